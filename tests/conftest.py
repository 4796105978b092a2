"""Test-wide settings: no test loads the real e5 model by accident.

With the ``embed`` extra installed, ``RAGSPINE_EMBEDDING`` defaults to ``auto`` = offline e5 (~5 chunks/s here), so
every test runs with ``RAGSPINE_EMBEDDING=none`` unless it sets its own (tests of the dense channel use
``hashing``, and the few that exercise e5 ask for it explicitly).
"""

import pytest


@pytest.fixture(autouse=True)
def _no_implicit_embedding_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGSPINE_EMBEDDING", "none")
    monkeypatch.delenv("RAGSPINE_RETRIEVAL_MODE", raising=False)
