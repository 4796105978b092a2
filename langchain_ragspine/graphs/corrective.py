"""Corrective RAG (CRAG) as a LangGraph ``StateGraph``.

Yan et al., "Corrective Retrieval Augmented Generation" (2024): a retrieval evaluator grades what was retrieved;
when nothing is relevant the system *corrects* before generating.  The paper's corrections are query rewriting and
web search; here the correction sequence is, in order: drop the metadata filter (only when the caller asks for it
by name, ``relax_filters=True``, and the search had one; then reported), rewrite the query (with the LLM, else
deterministically), and finally refuse with an explicit "insufficient context" answer.  Every correction counts against ``max_retries`` (a counter in state, invariant 7), so the graph ends within
a fixed number of supersteps whatever the graders say.

``original_query`` is what the answer addresses (relevance is graded against it); ``search_query`` is what is
searched.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from langchain_core.documents import BaseDocumentCompressor
from langchain_core.language_models import BaseChatModel
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable
from langgraph.graph import START
from langgraph.graph.state import CompiledStateGraph

from langchain_ragspine.arguments import DEFAULT_K, check_int
from langchain_ragspine.graphs.conversation import DEFAULT_HISTORY_TURNS
from langchain_ragspine.graphs.graders import Graders
from langchain_ragspine.graphs.nodes import (
    add_corrective_loop,
    add_retrieval,
    compile_graph,
    make_parts,
    new_graph,
    prepare,
    route_after_grading,
)
from langchain_ragspine.graphs.prompts import GraphPrompts
from langchain_ragspine.graphs.state import CorrectiveRAGOutput, CorrectiveRAGState
from langchain_ragspine.tokenizers import Tokenizer

__all__ = ["build_corrective_rag", "corrective_rag_max_steps"]


def corrective_rag_max_steps(max_retries: int = 2, *, compress: bool = False) -> int:
    """Worst-case supersteps of :func:`build_corrective_rag`: ``5 + 4 * max_retries`` (``6 + 5 * max_retries`` with
    ``compressors``).

    prepare, retrieve, restricted_gate, grade_documents (4); each correction adds drop_filters | rewrite_query,
    retrieve, restricted_gate, grade_documents (4); then generate | refuse (1); ``compress`` adds one step per
    retrieval.  ``max_retries=2`` → 13 (16 with compressors).
    """
    retries = check_int(max_retries, "max_retries", minimum=0)
    return 5 + 4 * retries + (retries + 1) * int(compress)


def build_corrective_rag(
    retriever: BaseRetriever,
    llm: BaseChatModel | str | None = None,
    *,
    max_retries: int = 2,
    relax_filters: bool = False,
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
    """Compile the corrective RAG graph.

    Nodes: ``prepare → retrieve → restricted_gate [→ compress] → grade_documents →`` ``generate`` (some document
    relevant) or a correction — ``drop_filters`` (first, only when ``filters`` were given and ``relax_filters=True``),
    then ``rewrite_query`` — back to ``retrieve``; ``refuse`` once ``max_retries`` corrections were made or a
    rewrite repeats a tried query.

    Filters never widen unless asked for by name: a run's ``filters`` are ANDed with the retriever's own, and by
    default they are kept — nothing relevant under them means a rewrite, then a refusal, never documents from
    outside them.

    Args:
        retriever: any ``BaseRetriever`` (``filters`` passed as ``filter=`` when it takes it, else applied to its
            results).
        llm: chat model, :func:`~langchain_ragspine.chat_models.make_chat_model` spec, or ``None`` (default: no LLM —
            lexical graders, deterministic rewrite, extractive answer).  With an LLM the common path makes two
            model calls: one grades every retrieved passage, one answers.
        max_retries: corrections allowed (default 2: rewrite → rewrite → refuse; with ``relax_filters=True`` and
            filters, drop filters → rewrite → refuse).  ``0`` refuses as soon as nothing is relevant.  A run may
            lower it (``context={"max_retries": 0}``), never raise it.
        relax_filters: allow the drop-filters correction, CRAG's "widen the search" (default ``False``: filters
            often scope access — a tenant, a department — so they are kept).  With ``True``, a run whose filtered
            search finds nothing relevant searches again without its ``filters`` (the retriever's own filter and the
            RESTRICTED gate still hold) and reports it: ``filters_dropped=True``, ``dropped_filters``, a
            ``drop_filters`` trace entry and, in chat mode, the ``AIMessage``'s ``response_metadata`` and a note
            after the answer.  A run may turn it off (``context={"relax_filters": False}``), never on.
        graders, answer_chain, k, max_docs, lost_in_the_middle, tokenizer, prompts, compressors, checkpointer,
        condense_question, history_turns: as in :func:`~langchain_ragspine.graphs.build_simple_rag` (a chat
            follow-up is condensed into a standalone question, which is what is graded and rewritten).

    Input :class:`~langchain_ragspine.graphs.state.RAGInput` (``{"question", "filters"}`` or ``{"messages"}``);
    output :class:`~langchain_ragspine.graphs.state.CorrectiveRAGOutput`: ``answer``, ``citations``,
    ``documents``, ``trace``, ``refused``, ``original_query``, ``search_query``, ``retries``, ``retry_reason``,
    ``filters_dropped``, ``dropped_filters``, … .

    Bound: at most :func:`corrective_rag_max_steps` ``= 5 + 4 * max_retries`` supersteps (13 by default; one more
    per retrieval with compressors); the compiled graph's ``recursion_limit`` is set to cover it, and any larger
    limit changes nothing.

    Raises:
        TypeError / ValueError: a bad ``retriever``, ``llm``, ``graders``, ``max_retries``, ``relax_filters``, ``k``,
            ``prompts``, ``compressors``, ``condense_question`` or ``history_turns``.
    """
    parts = make_parts(
        retriever, llm, max_retries=max_retries, relax_filters=relax_filters, graders=graders,
        answer_chain=answer_chain, k=k, max_docs=max_docs, lost_in_the_middle=lost_in_the_middle,
        tokenizer=tokenizer, prompts=prompts, compressors=compressors, condense_question=condense_question,
        history_turns=history_turns,
    )
    builder = new_graph(CorrectiveRAGState, CorrectiveRAGOutput)
    builder.add_node("prepare", partial(prepare, parts=parts))
    add_retrieval(builder, parts)
    add_corrective_loop(builder, parts, partial(route_after_grading, parts=parts))
    builder.add_edge(START, "prepare")
    builder.add_edge("prepare", "retrieve")
    bound = corrective_rag_max_steps(parts.max_retries, compress=bool(parts.compressors))
    return compile_graph(builder, name="corrective_rag", max_steps=bound, checkpointer=checkpointer)
