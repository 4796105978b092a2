"""LangGraph RAG graphs: simple, corrective (CRAG), adaptive and Self-RAG, with shared state, reducers and graders.

Every builder takes a ``BaseRetriever`` and an optional chat model (``None``: the deterministic path — lexical
graders, deterministic query rewrites, extractive answers) and returns a compiled graph that accepts a
``checkpointer``, optional ``compressors`` (run after the RESTRICTED gate, before grading) and ``prompts``.
Every graph takes ``{"question": str, "filters": dict | None}`` or a chat state ``{"messages": [...]}`` (the answer
is then appended as an ``AIMessage``), per-run ``k`` / ``max_retries`` in its context; its output holds
``answer``, ``citations`` (``[{"n", "chunk_id", "doc_id", "title", "source_locator"}]``, ``n`` indexing
``documents`` from 1), ``documents`` (the passages the answer was given), ``refused`` and a ``trace`` of the
decisions taken.  In chat mode a follow-up is condensed with the conversation into a standalone search question
(``condense_question=True``, the default; :mod:`~langchain_ragspine.graphs.conversation`) and the appended
``AIMessage`` carries its citations in ``response_metadata["citations"]``; ``stream_mode="custom"`` streams
progress events; :func:`make_answer_tool` makes a graph a compact agent tool.  RESTRICTED chunks never reach a prompt or the final state.  Every loop is bounded by a counter in
state; ``*_max_steps(max_retries)`` gives each graph's worst-case number of supersteps.

>>> from langchain_ragspine import open_retriever
>>> from langchain_ragspine.graphs import build_corrective_rag
>>> graph = build_corrective_rag(open_retriever("store"))          # doctest: +SKIP
>>> graph.invoke({"question": "日本で梅雨がないのは北海道とどこか。"})["answer"]  # doctest: +SKIP
"""

from langchain_ragspine.graphs import graders as _graders
from langchain_ragspine.graphs.adaptive import adaptive_rag_max_steps, build_adaptive_rag
from langchain_ragspine.graphs.corrective import build_corrective_rag, corrective_rag_max_steps
from langchain_ragspine.graphs.graders import *  # noqa: F403  (the graders' public names, __all__ below)
from langchain_ragspine.graphs.prompts import GraphPrompts
from langchain_ragspine.graphs.self_rag import build_self_rag, self_rag_max_steps
from langchain_ragspine.graphs.simple import SIMPLE_RAG_MAX_STEPS, build_simple_rag, simple_rag_max_steps
from langchain_ragspine.graphs.state import RAGContext, RAGInput, RAGOutput, merge_documents
from langchain_ragspine.graphs.tools import make_answer_tool

#: The builders by name (e.g. for a ``--graph`` option).  ``build_simple_rag`` takes no ``max_retries``.
GRAPH_BUILDERS = {
    "simple": build_simple_rag,
    "corrective": build_corrective_rag,
    "adaptive": build_adaptive_rag,
    "self_rag": build_self_rag,
}

__all__ = [
    "GRAPH_BUILDERS",
    "GraphPrompts",
    "RAGContext",
    "RAGInput",
    "RAGOutput",
    "SIMPLE_RAG_MAX_STEPS",
    "adaptive_rag_max_steps",
    "build_adaptive_rag",
    "build_corrective_rag",
    "build_self_rag",
    "build_simple_rag",
    "corrective_rag_max_steps",
    "make_answer_tool",
    "merge_documents",
    "self_rag_max_steps",
    "simple_rag_max_steps",
]
__all__ += _graders.__all__  # Graders, the LLM / lexical graders, make_graders, parse_binary, ...
