"""The default embedder's real model, loaded once a test process (about a second on a busy machine)."""

from __future__ import annotations

import pytest

from memory.ranking.encoder import MiniLM


@pytest.fixture(scope="session")
def minilm() -> MiniLM:
    return MiniLM.load()
