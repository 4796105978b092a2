"""Test-wide settings: no test loads the real e5 model by accident, talks to a local LLM server, or writes to the
user's cache directory.

With the ``embed`` extra installed, ``RAGSPINE_EMBEDDING`` defaults to ``auto`` = offline e5, so every test runs
with ``RAGSPINE_EMBEDDING=none`` unless it sets its own (tests of the dense channel use ``hashing``, and the few
that exercise e5 ask for it explicitly).  ``OLLAMA_HOST`` points at the discard port, so ``--llm auto`` finds no
server even on a machine where one runs (tests that need a host set their own), and ``RAGSPINE_CACHE_DIR`` (where
the ONNX e5 model is built) is one temporary directory per test session.  Every other ``RAGSPINE_*`` setting the
library reads (``K``, ``TOKENIZER``, ``CHUNK_SIZE``, ``CHUNK_OVERLAP``, ``STORE``, ``RETRIEVAL_MODE``, ``LLM``,
``QUERY_TRANSFORM``, ``GLOSSARY``, ``QUERY_DENY_LIST``) is
removed from the environment, so a developer's own exports never change a test.
"""

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def _session_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ragspine-cache")


@pytest.fixture(autouse=True)
def _no_implicit_embedding_model(monkeypatch: pytest.MonkeyPatch, _session_cache_dir: Path) -> None:
    monkeypatch.setenv("RAGSPINE_EMBEDDING", "none")
    for name in ("RETRIEVAL_MODE", "LLM", "K", "TOKENIZER", "CHUNK_SIZE", "CHUNK_OVERLAP", "STORE",
                 "QUERY_TRANSFORM", "GLOSSARY", "QUERY_DENY_LIST"):
        monkeypatch.delenv(f"RAGSPINE_{name}", raising=False)  # a developer's own settings stay out of the tests
    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:9")  # discard port: nothing listens
    monkeypatch.setenv("RAGSPINE_CACHE_DIR", str(_session_cache_dir))
