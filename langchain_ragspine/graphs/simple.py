"""Simple RAG graph: retrieve → RESTRICTED gate → grade → generate (or refuse), no loop.

Retrieval-augmented generation (Lewis et al., "Retrieval-Augmented Generation for Knowledge-Intensive NLP Tasks",
NeurIPS 2020) as one pass, with the relevance check of CRAG (Yan et al., 2024) so that a question the corpus cannot
answer gets the explicit "insufficient context" refusal instead of an answer built on unrelated chunks.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from langchain_core.documents import BaseDocumentCompressor
from langchain_core.language_models import BaseChatModel
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable
from langgraph.graph import END, START
from langgraph.graph.state import CompiledStateGraph

from langchain_ragspine.arguments import DEFAULT_K
from langchain_ragspine.graphs.conversation import DEFAULT_HISTORY_TURNS
from langchain_ragspine.graphs.graders import Graders
from langchain_ragspine.graphs.nodes import (
    add_retrieval,
    compile_graph,
    generate,
    grade_documents,
    make_parts,
    new_graph,
    prepare,
    refuse,
)
from langchain_ragspine.graphs.prompts import GraphPrompts
from langchain_ragspine.graphs.state import RAGOutput, RAGState
from langchain_ragspine.tokenizers import Tokenizer

__all__ = ["SIMPLE_RAG_MAX_STEPS", "build_simple_rag", "route_after_grading_simple", "simple_rag_max_steps"]

#: Supersteps of the simple graph, always: prepare, retrieve, restricted_gate, grade_documents, generate | refuse.
SIMPLE_RAG_MAX_STEPS = 5


def simple_rag_max_steps(*, compress: bool = False) -> int:
    """Supersteps of :func:`build_simple_rag`: :data:`SIMPLE_RAG_MAX_STEPS` (5), 6 with ``compressors``."""
    return SIMPLE_RAG_MAX_STEPS + int(compress)


def route_after_grading_simple(state: RAGState) -> str:
    """Edge after ``grade_documents``: ``generate`` when a document is relevant, else ``refuse``."""
    return "generate" if state.get("documents") else "refuse"


def build_simple_rag(
    retriever: BaseRetriever,
    llm: BaseChatModel | str | None = None,
    *,
    graders: Graders | None = None,
    answer_chain: Runnable[Any, Any] | None = None,
    k: int | None = None,
    max_docs: int | None = DEFAULT_K,
    lost_in_the_middle: bool = False,
    tokenizer: str | Tokenizer = "auto",
    prompts: GraphPrompts | None = None,
    compressors: Sequence[BaseDocumentCompressor] | None = None,
    checkpointer: Any = None,
    condense_question: bool = True,
    history_turns: int = DEFAULT_HISTORY_TURNS,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Compile the simple RAG graph.

    Nodes: ``prepare → retrieve → restricted_gate [→ compress] → grade_documents → generate | refuse``.

    Args:
        retriever: any ``BaseRetriever``; ``filters`` go to it as ``filter=`` when it takes that keyword (ANDed
            with its own filter), else they are applied to its results.  Filters are never dropped (a run's
            ``context={"relax_filters": True}`` is a ``ValueError``).
        llm: a chat model, a :func:`~langchain_ragspine.chat_models.make_chat_model` spec, or ``None`` (default: no LLM —
            extractive answer, lexical graders; the environment is not consulted).
        graders: the relevance / support / usefulness checks (default :func:`make_graders` for ``llm``: with an
            LLM, every retrieval is graded in one call).
        answer_chain: replaces the default :func:`~langchain_ragspine.chains.make_answer_chain` (it receives the
            passages already selected and ordered, and must return ``{"answer", "citations"}``; for a chat
            follow-up its input also holds ``chat_history`` and, when condensed, ``standalone_question``).
        k: results per retrieval (passed when the retriever takes ``k``; default: the retriever's own); a run may
            override it (``context={"k": 3}``).
        max_docs: passages given to the answer (default 6, :data:`~langchain_ragspine.arguments.DEFAULT_K`): the
            answer chain's ``k``, named apart here because the graph's ``k`` is the results per retrieval.
        lost_in_the_middle: show the passages best-at-both-ends.
        tokenizer: for the extractive answer and the lexical graders (default ``"auto"``, BM25's).
        prompts: the prompts of the model calls (default :class:`~langchain_ragspine.graphs.prompts.GraphPrompts`).
        compressors: ``BaseDocumentCompressor``s (rerankers, MMR, lost-in-the-middle, …) run in order in a
            ``compress`` node after the RESTRICTED gate and before grading, against the question; the gate runs
            again after them.  Default ``None``: no ``compress`` node, the graph is unchanged.
        checkpointer: a LangGraph checkpointer (``None``: none).
        condense_question: in chat mode (``{"messages": [...]}``), condense a follow-up with the conversation before
            it into a standalone search question before retrieval — one call of ``prompts.condense`` with an LLM,
            else the deterministic rule of :mod:`~langchain_ragspine.graphs.conversation` (a follow-up with no
            content term of its own borrows the content words of the latest earlier question that has some) —
            and give the answer prompt the recent conversation; the answer addresses the user's own words, the
            trace's ``condense_question`` step and ``search_query`` show what was searched.  Default ``True``;
            ``False`` searches and answers every message on its own (the behaviour before it existed).  Only the
            user's messages and the graph's own replies are read, never tool or other AI messages.
        history_turns: the conversation window, in turns before the question (default 3,
            :data:`~langchain_ragspine.graphs.conversation.DEFAULT_HISTORY_TURNS`; each message cut to 1,000
            characters).  An ``int >= 1``.

    Input ``{"question": str, "filters": dict | None}`` or ``{"messages": [...]}``
    (:class:`~langchain_ragspine.graphs.state.RAGInput`); output
    :class:`~langchain_ragspine.graphs.state.RAGOutput` — ``answer``, ``citations``, ``documents`` (the passages
    the answer was given; ``[]`` after a refusal), ``trace``, ``refused``, … .

    Bound: exactly :func:`simple_rag_max_steps` supersteps (5; 6 with compressors).

    In chat mode the appended ``AIMessage`` carries the citations in ``response_metadata["citations"]`` (see
    :func:`~langchain_ragspine.graphs.nodes.reply`), so a ``MessagesState`` app renders its ``[n]`` markers without
    ``citations`` or ``documents`` in its own state.

    Raises:
        TypeError: ``retriever`` is not a ``BaseRetriever``; a bad ``llm``, ``graders``, ``prompts``,
            ``compressors``, ``condense_question`` (not a bool) or ``history_turns`` (not an int).
        ValueError: ``history_turns < 1``.
    """
    parts = make_parts(
        retriever, llm, graders=graders, answer_chain=answer_chain, k=k, max_docs=max_docs,
        lost_in_the_middle=lost_in_the_middle, tokenizer=tokenizer, prompts=prompts, compressors=compressors,
        condense_question=condense_question, history_turns=history_turns, max_retries=0,
    )
    builder = new_graph(RAGState, RAGOutput)
    builder.add_node("prepare", partial(prepare, parts=parts))
    add_retrieval(builder, parts)
    builder.add_node("grade_documents", partial(grade_documents, parts=parts))
    builder.add_node("generate", partial(generate, parts=parts))
    builder.add_node("refuse", refuse)
    builder.add_edge(START, "prepare")
    builder.add_edge("prepare", "retrieve")
    builder.add_conditional_edges("grade_documents", route_after_grading_simple, ["generate", "refuse"])
    builder.add_edge("generate", END)
    builder.add_edge("refuse", END)
    bound = simple_rag_max_steps(compress=bool(parts.compressors))
    return compile_graph(builder, name="simple_rag", max_steps=bound, checkpointer=checkpointer)
