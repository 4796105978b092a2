"""LangGraph deployment entry points: ``corrective_rag``, ``adaptive_rag`` and ``self_rag`` built from the environment.

``langgraph dev`` (langgraph-cli) reads ``graphs/langgraph.json`` and imports the three compiled graphs below.
Configuration, all optional:

* ``RAGSPINE_STORE`` — a store directory written by ``ragspine ingest``; without it, the bundled demo corpus is
  ingested into ``$TMPDIR/ragspine-langgraph-demo-<uid>-<hash>`` (reused by later imports and runs), so
  ``langgraph dev`` works from a fresh clone;
* ``RAGSPINE_RETRIEVAL_MODE`` / ``RAGSPINE_EMBEDDING`` — the retrieval mode and embedding model (default ``auto``);
* ``RAGSPINE_LLM`` — a chat model spec (``ollama:qwen2.5:7b``, any ``init_chat_model`` string); unset or ``none``
  means no LLM: every graph then runs its deterministic path.

Each graph takes ``{"question": str, "filters": dict | None}`` and ends with ``answer``, ``citations``,
``documents`` and ``trace`` in its state.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from langchain_core.retrievers import BaseRetriever

from langchain_ragspine.cli import demo_corpus_dir
from langchain_ragspine.config import make_chat_model
from langchain_ragspine.graphs import build_adaptive_rag, build_corrective_rag, build_self_rag
from langchain_ragspine.indexing import ingest, open_retriever


def _store_dir() -> Path:
    configured = os.environ.get("RAGSPINE_STORE")
    if configured:
        return Path(configured)
    # One demo store per user and corpus location, reused across imports: `langgraph dev` imports this file once
    # per graph, and a re-ingest of the unchanged corpus is a no-op (nothing re-embedded).
    corpus = demo_corpus_dir()
    tag = hashlib.sha256(str(corpus.resolve()).encode()).hexdigest()[:12]
    store = Path(tempfile.gettempdir()) / f"ragspine-langgraph-demo-{os.getuid() if hasattr(os, 'getuid') else 0}-{tag}"
    ingest(corpus, store, progress=False)
    return store


def _retriever() -> BaseRetriever:
    return open_retriever(_store_dir(), k=6)


_RETRIEVER = _retriever()
_LLM = make_chat_model()  # RAGSPINE_LLM, else None (deterministic path)

corrective_rag = build_corrective_rag(_RETRIEVER, llm=_LLM)
adaptive_rag = build_adaptive_rag(_RETRIEVER, llm=_LLM)
self_rag = build_self_rag(_RETRIEVER, llm=_LLM)
