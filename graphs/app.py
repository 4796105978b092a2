"""LangGraph deployment entry points: ``corrective_rag``, ``adaptive_rag`` and ``self_rag`` built from the settings.

``langgraph dev`` (langgraph-cli) reads ``graphs/langgraph.json``, which names the factories ``make_corrective_rag``,
``make_adaptive_rag`` and ``make_self_rag`` (the server looks names up in the module's ``__dict__``, where a PEP 562
attribute is not).  Importing this module does no work: each graph is built on first access (a module
``__getattr__`` for ``corrective_rag`` and the others, or a factory call; built once either way), and
the store, retriever and chat model they share are made once, then.  The retriever is the retrieval plan's
(:func:`~langchain_ragspine.pipeline.plan.build_retriever`, as the CLI's); it follows the store
(:class:`~langchain_ragspine.retrievers.LiveStoreRetriever`): a document relabelled RESTRICTED or deleted and
re-ingested while the server runs is not served from the next run on, with no restart.  Configuration (``RAGSPINE_*`` variables, from
the environment or ``.env``; see :class:`~langchain_ragspine.settings.RagSpineSettings`), all optional:

* ``RAGSPINE_STORE`` — a store directory written by ``ragspine ingest``; without it, the bundled demo corpus is
  ingested into ``$TMPDIR/ragspine-langgraph-demo-<uid>-<hash>`` (reused by later imports and runs), so
  ``langgraph dev`` works from a fresh clone;
* ``RAGSPINE_RETRIEVAL_MODE`` / ``RAGSPINE_EMBEDDING`` — the retrieval mode (any registered one, see
  :mod:`langchain_ragspine.pipeline.modes`) and embedding model (default ``auto``);
* ``RAGSPINE_K`` — passages per search (default 6, as ``ragspine ask``);
* ``RAGSPINE_QUERY_TRANSFORM``, ``RAGSPINE_RERANKER``, ``RAGSPINE_POSTPROCESSOR`` — the query transformation and
  the second stage, as ``ragspine ask --graph`` builds them (default none);
* ``RAGSPINE_LLM`` — a chat model spec (``ollama:qwen2.5:7b``, ``auto``, any ``init_chat_model`` string); unset or
  ``none`` means no LLM: every graph then runs its deterministic path.

Each graph takes ``{"question": str, "filters": dict | None}`` or a chat state ``{"messages": [...]}`` (per-run
``k`` / ``max_retries`` in the run's context or ``configurable``) and returns ``answer``, ``citations``,
``documents``, ``trace`` (and, for a chat input, ``messages`` with the answer appended).

Filters are never widened here: the graphs are built with the builders' default ``relax_filters=False``, so a
question whose ``filters`` match nothing relevant is refused — never answered from documents outside them — and a
run asking for ``relax_filters=True`` in its context is refused with a ``ValueError`` (a caller of the served
graph cannot widen its own filter).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any

#: Entry point name → graph name in :data:`langchain_ragspine.graphs.GRAPH_BUILDERS`.
GRAPHS = {"corrective_rag": "corrective", "adaptive_rag": "adaptive", "self_rag": "self_rag"}

__all__ = list(GRAPHS)


def _store_dir() -> Path:
    from langchain_ragspine.cli import demo_corpus_dir
    from langchain_ragspine.pipeline.ingest import ingest
    from langchain_ragspine.settings import get_settings

    configured = get_settings().store
    if configured is not None:
        return configured
    # One demo store per user and corpus location, reused across imports: `langgraph dev` imports this file once
    # per graph, and a re-ingest of the unchanged corpus is a no-op (nothing re-embedded).
    corpus = demo_corpus_dir()
    tag = hashlib.sha256(str(corpus.resolve()).encode()).hexdigest()[:12]
    store = Path(tempfile.gettempdir()) / f"ragspine-langgraph-demo-{os.getuid() if hasattr(os, 'getuid') else 0}-{tag}"
    ingest(corpus, store, progress=False)
    return store


@functools.cache
def _parts() -> tuple[Any, Any, list[Any]]:
    """``(retriever, chat model or None, second stage)``, shared by the three graphs; cached for the process's
    lifetime, which is safe because the store's retriever (``open_retriever``'s) checks the store before every call
    (it reloads after a re-ingest and never returns a row the store no longer serves)."""
    from langchain_ragspine.chat_models import make_chat_model
    from langchain_ragspine.configured import configured_setting
    from langchain_ragspine.pipeline.plan import RetrievalPlan, build_retriever

    # the plan `ragspine ask --graph` builds from the same settings: mode and k (RAGSPINE_RETRIEVAL_MODE / _K), the query
    # transformation (RAGSPINE_QUERY_TRANSFORM) and the second stage (RAGSPINE_RERANKER / _POSTPROCESSOR), which the
    # graph runs after its RESTRICTED gate; the first stage then returns the candidates the second stage chooses from
    plan = RetrievalPlan.configured()
    llm = make_chat_model(None)  # RAGSPINE_LLM; unset: no LLM (the deterministic path)
    k = configured_setting("k")
    compressors = plan.compressors(k=k, llm=llm)
    retriever = build_retriever(plan.first_stage(), _store_dir(), k=plan.candidates(k, compressors),
                                llm="none" if llm is None else llm)
    return retriever, llm, compressors


@functools.cache
def _graph(name: str) -> Any:
    from langchain_ragspine.graphs import GRAPH_BUILDERS

    retriever, llm, compressors = _parts()
    options = {"compressors": compressors} if compressors else {}  # none: the graph exactly as without them
    return GRAPH_BUILDERS[GRAPHS[name]](retriever, llm=llm, **options)


async def make_corrective_rag() -> Any:
    """Graph factory for ``langgraph dev``, which looks names up in ``module.__dict__`` (a PEP 562 attribute is not
    there).  Async, and the first build (ingest of the demo corpus, opening the store) runs in a worker thread: the
    server forbids blocking calls in its event loop."""
    return await asyncio.to_thread(_graph, "corrective_rag")


async def make_adaptive_rag() -> Any:
    """Graph factory for ``langgraph dev``: the ``adaptive_rag`` graph (built once, in a worker thread)."""
    return await asyncio.to_thread(_graph, "adaptive_rag")


async def make_self_rag() -> Any:
    """Graph factory for ``langgraph dev``: the ``self_rag`` graph (built once, in a worker thread)."""
    return await asyncio.to_thread(_graph, "self_rag")


def __getattr__(name: str) -> Any:
    if name in GRAPHS:
        return _graph(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
