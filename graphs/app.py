"""LangGraph deployment entry points: ``corrective_rag``, ``adaptive_rag`` and ``self_rag`` built from the environment.

``langgraph dev`` (langgraph-cli) reads ``graphs/langgraph.json`` and imports the three compiled graphs below.
Configuration, all optional:

* ``RAGSPINE_STORE`` — a store directory written by ``ragspine ingest``; without it, the bundled demo corpus is
  ingested into a temporary store on first import, so ``langgraph dev`` works from a fresh clone;
* ``RAGSPINE_RETRIEVAL_MODE`` / ``RAGSPINE_EMBEDDING`` — the retrieval mode and embedding model (default ``auto``);
* ``RAGSPINE_LLM`` — a chat model spec (``ollama:qwen2.5:7b``, any ``init_chat_model`` string); unset or ``none``
  means no LLM: every graph then runs its deterministic path.

Each graph takes ``{"question": str, "filters": dict | None}`` and ends with ``answer``, ``citations``,
``documents`` and ``trace`` in its state.
"""

from __future__ import annotations

import atexit
import os
import shutil
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
    tmp = Path(tempfile.mkdtemp(prefix="ragspine-langgraph-"))
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    ingest(demo_corpus_dir(), tmp, progress=False)
    return tmp


def _retriever() -> BaseRetriever:
    return open_retriever(_store_dir(), k=6)


_RETRIEVER = _retriever()
_LLM = make_chat_model()  # RAGSPINE_LLM, else None (deterministic path)

corrective_rag = build_corrective_rag(_RETRIEVER, llm=_LLM)
adaptive_rag = build_adaptive_rag(_RETRIEVER, llm=_LLM)
self_rag = build_self_rag(_RETRIEVER, llm=_LLM)
