"""Simple RAG graph: retrieve → RESTRICTED gate → grade → generate (or refuse), no loop.

Retrieval-augmented generation (Lewis et al., "Retrieval-Augmented Generation for Knowledge-Intensive NLP Tasks",
NeurIPS 2020) as one pass, with the relevance check of CRAG (Yan et al., 2024) so that a question the corpus cannot
answer gets the explicit "insufficient context" refusal instead of an answer built on unrelated chunks.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from langchain_ragspine.graphs.graders import Graders
from langchain_ragspine.graphs.nodes import (
    check_retriever,
    default_chain,
    default_graders,
    make_generate,
    make_grade_documents,
    make_prepare,
    make_retrieve,
    recursion_limit_for,
    refuse,
    resolve_llm,
    restricted_gate,
)
from langchain_ragspine.graphs.state import RAGInput, RAGState
from langchain_ragspine.tokenizers import Tokenizer

__all__ = ["SIMPLE_RAG_MAX_STEPS", "build_simple_rag"]

#: Supersteps of the simple graph, always: prepare, retrieve, restricted_gate, grade_documents, generate | refuse.
SIMPLE_RAG_MAX_STEPS = 5


def route_after_grading_simple(state: dict[str, Any]) -> str:
    """Edge after ``grade_documents``: ``generate`` when a document is relevant, else ``refuse``."""
    return "generate" if state.get("documents") else "refuse"


def build_simple_rag(
    retriever: BaseRetriever,
    llm: BaseChatModel | str | None = None,
    *,
    graders: Graders | None = None,
    answer_chain: Runnable[Any, Any] | None = None,
    k: int | None = None,
    max_docs: int | None = 6,
    lost_in_the_middle: bool = False,
    tokenizer: str | Tokenizer = "auto",
    checkpointer: Any = None,
) -> CompiledStateGraph:
    """Compile the simple RAG graph.

    Nodes: ``prepare → retrieve → restricted_gate → grade_documents → generate | refuse``.

    Args:
        retriever: any ``BaseRetriever``; ``filters`` go to it as ``filter=`` when it takes that keyword, else they
            are applied to its results.
        llm: a chat model, a :func:`~langchain_ragspine.config.make_chat_model` spec, or ``None`` (default: no LLM —
            extractive answer, lexical graders; the environment is not consulted).
        graders: the relevance / support / usefulness checks (default :func:`make_graders` for ``llm``).
        answer_chain: replaces the default :func:`~langchain_ragspine.chains.make_answer_chain` (it receives the
            passages already selected and ordered, and must return ``{"answer", "citations"}``).
        k: results per retrieval (passed when the retriever takes ``k``; default: the retriever's own).
        max_docs: passages given to the answer (default 6).
        lost_in_the_middle: show the passages best-at-both-ends.
        tokenizer: for the extractive answer and the lexical graders (default ``"auto"``, BM25's).
        checkpointer: a LangGraph checkpointer (``None``: none).

    Input ``{"question": str, "filters": dict | None}``; the final state holds ``answer``, ``citations``,
    ``documents`` (the passages the answer was given; ``[]`` after a refusal), ``trace``, ``refused``.

    Bound: exactly :data:`SIMPLE_RAG_MAX_STEPS` = 5 supersteps.

    Raises:
        TypeError: ``retriever`` is not a ``BaseRetriever``; a bad ``llm`` or ``graders``.
    """
    check_retriever(retriever)
    model = resolve_llm(llm)
    grade = default_graders(graders, model, tokenizer)
    chain = default_chain(model, answer_chain, tokenizer)
    builder = StateGraph(RAGState, input_schema=RAGInput)
    builder.add_node("prepare", make_prepare())
    builder.add_node("retrieve", make_retrieve(retriever, k=k))
    builder.add_node("restricted_gate", restricted_gate)
    builder.add_node("grade_documents", make_grade_documents(grade))
    builder.add_node("generate", make_generate(chain, max_docs=max_docs, lost_in_the_middle=lost_in_the_middle))
    builder.add_node("refuse", refuse)
    builder.add_edge(START, "prepare")
    builder.add_edge("prepare", "retrieve")
    builder.add_edge("retrieve", "restricted_gate")
    builder.add_edge("restricted_gate", "grade_documents")
    builder.add_conditional_edges("grade_documents", route_after_grading_simple, ["generate", "refuse"])
    builder.add_edge("generate", END)
    builder.add_edge("refuse", END)
    graph = builder.compile(checkpointer=checkpointer, name="simple_rag")
    return graph.with_config(recursion_limit=recursion_limit_for(SIMPLE_RAG_MAX_STEPS))
