"""Self-RAG as a LangGraph ``StateGraph``: decide to retrieve, grade, generate, then critique the answer.

Asai et al., "Self-RAG: Learning to Retrieve, Generate, and Critique through Self-Reflection" (ICLR 2024) train a
model to emit reflection tokens — Retrieve (is retrieval needed?), ISREL (is a passage relevant?), ISSUP (is the
output supported?), ISUSE (is it useful?) — and act on them.  Following LangGraph's Self-RAG recipe, the same four
judgements are asked of graders here (:mod:`langchain_ragspine.graphs.graders`: an LLM, or deterministic checks):

``prepare → decide_retrieval →`` ``respond_directly`` (small talk only) or ``retrieve → restricted_gate →
grade_documents → generate → check_support → check_usefulness → END``.  A failed judgement leads to ``retry``
with the reason recorded in ``retry_reason`` — ``"no_relevant_documents"`` and ``"not_useful"`` rewrite the query
and retrieve again, ``"unsupported"`` regenerates — until ``max_retries`` retries were spent (a counter in state);
then the graph refuses with the explicit "insufficient context" answer, so an unsupported answer is never returned.
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

from langchain_ragspine.arguments import DEFAULT_K, check_int
from langchain_ragspine.graphs.conversation import DEFAULT_HISTORY_TURNS
from langchain_ragspine.graphs.graders import Graders
from langchain_ragspine.graphs.nodes import (
    GraphParts,
    add_retrieval,
    compile_graph,
    generate,
    grade_documents,
    make_parts,
    new_graph,
    prepare,
    progress,
    refuse,
    respond_directly,
    retriever_scores,
    rewrite,
    search_question,
    wants_no_retrieval,
)
from langchain_ragspine.graphs.prompts import GraphPrompts
from langchain_ragspine.graphs.state import SelfRAGOutput, SelfRAGState
from langchain_ragspine.tokenizers import Tokenizer

__all__ = [
    "build_self_rag",
    "check_support",
    "check_usefulness",
    "decide_retrieval",
    "retry",
    "self_rag_max_steps",
]


def self_rag_max_steps(max_retries: int = 2, *, compress: bool = False) -> int:
    """Worst-case supersteps of :func:`build_self_rag`: ``9 + 7 * max_retries`` (``10 + 8 * max_retries`` with
    ``compressors``).

    prepare, decide_retrieval, retrieve, restricted_gate, grade_documents, generate, check_support,
    check_usefulness (8); each retry adds retry, retrieve, restricted_gate, grade_documents, generate,
    check_support, check_usefulness (7 at most); then refuse (1); ``compress`` adds one step per retrieval.
    ``max_retries=2`` → 23 (26 with compressors).
    """
    retries = check_int(max_retries, "max_retries", minimum=0)
    return 9 + 7 * retries + (retries + 1) * int(compress)


# -- nodes ----------------------------------------------------------------------------------------------------------
def decide_retrieval(state: SelfRAGState, *, parts: GraphParts) -> dict[str, Any]:
    """Node ``decide_retrieval`` (Self-RAG's Retrieve token): skip retrieval only for small talk
    (:func:`~langchain_ragspine.graphs.nodes.wants_no_retrieval`)."""
    skip, how = wants_no_retrieval(state.get("original_query") or "", parts.llm, parts.prompts)
    return {"use_retrieval": not skip, "trace": [{"step": "decide_retrieval", "retrieve": not skip, "how": how}]}


def check_support(state: SelfRAGState, *, parts: GraphParts) -> dict[str, Any]:
    """Node ``check_support`` (ISSUP): is the answer supported by the passages it was given?"""
    verdict = parts.graders.supported(state.get("answer") or "", state.get("documents") or [])
    progress("checked", check="support", verdict=verdict)
    return {
        "supported": verdict,
        "retry_reason": None if verdict == "yes" else "unsupported",
        "trace": [{"step": "check_support", "verdict": verdict}],
    }


def check_usefulness(state: SelfRAGState, *, parts: GraphParts) -> dict[str, Any]:
    """Node ``check_usefulness`` (ISUSE): does the answer resolve the question (a chat follow-up's standalone
    question, :func:`~langchain_ragspine.graphs.nodes.search_question`)?"""
    verdict = parts.graders.useful(search_question(state), state.get("answer") or "")
    progress("checked", check="usefulness", verdict=verdict)
    return {
        "useful": verdict,
        "retry_reason": None if verdict == "yes" else "not_useful",
        "trace": [{"step": "check_usefulness", "verdict": verdict}],
    }


def retry(state: SelfRAGState, *, parts: GraphParts) -> dict[str, Any]:
    """Node ``retry`` (counts against ``max_retries``): ``"unsupported"`` regenerates; ``"no_relevant_documents"``
    and ``"not_useful"`` rewrite the query (a rewrite that repeats a tried query sets ``"rewrite_exhausted"``)."""
    reason = state.get("retry_reason") or "no_relevant_documents"
    attempt = int(state.get("retries", 0)) + 1
    entry: dict[str, Any] = {"step": "retry", "reason": reason, "attempt": attempt}
    update: dict[str, Any] = {"retries": attempt, "trace": [entry]}
    if reason == "unsupported":
        entry["action"] = "regenerate"
        return update
    question = search_question(state)
    tried = list(state.get("tried_queries") or [question])
    new, how = rewrite(
        question, tried, llm=parts.llm, tokenizer=parts.tokenizer, prompts=parts.prompts,
        scorable=retriever_scores(state, parts),
    )
    if new.strip() in {t.strip() for t in tried}:
        entry["action"] = "rewrite_exhausted"
        update["retry_reason"] = "rewrite_exhausted"
        return update
    progress("rewriting", attempt=attempt, query=new)
    entry.update(action="rewrite_query", query=new, how=how)
    update.update(search_query=new, tried_queries=tried + [new])
    return update


# -- edges ----------------------------------------------------------------------------------------------------------
def route_retrieval(state: SelfRAGState) -> str:
    """Edge after ``decide_retrieval``: ``retrieve``, or ``respond_directly`` for small talk."""
    return "retrieve" if state.get("use_retrieval", True) else "respond_directly"


def retry_or_refuse(state: SelfRAGState) -> str:
    """``refuse`` once ``retries`` reached the run's ``max_retries`` (in state), else ``retry``."""
    return "refuse" if int(state.get("retries", 0)) >= int(state.get("max_retries", 0)) else "retry"


def route_after_grading(state: SelfRAGState) -> str:
    """Edge after ``grade_documents``: ``generate`` when a document is relevant, else retry or refuse."""
    return "generate" if state.get("documents") else retry_or_refuse(state)


def route_after_support(state: SelfRAGState) -> str:
    """Edge after ``check_support``: ``check_usefulness`` when supported, else retry or refuse."""
    return "check_usefulness" if state.get("supported") == "yes" else retry_or_refuse(state)


def route_after_usefulness(state: SelfRAGState) -> str:
    """Edge after ``check_usefulness``: the end when useful, else retry or refuse."""
    return END if state.get("useful") == "yes" else retry_or_refuse(state)


def route_after_retry(state: SelfRAGState) -> str:
    """Edge after ``retry``: ``refuse`` (rewrite exhausted), ``generate`` (unsupported) or ``retrieve``."""
    reason = state.get("retry_reason")
    if reason == "rewrite_exhausted":
        return "refuse"
    return "generate" if reason == "unsupported" else "retrieve"


def build_self_rag(
    retriever: BaseRetriever,
    llm: BaseChatModel | str | None = None,
    *,
    max_retries: int = 2,
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
    """Compile the Self-RAG graph (see the module docstring for the flow).

    Retrieval is skipped only for small talk (a greeting or thanks the heuristic recognises and, with an LLM, the
    model confirms); every other message is answered from documents.  Without an LLM the support check is verbatim
    containment, which extractive answers pass by construction.

    Args: as :func:`~langchain_ragspine.graphs.build_corrective_rag` (no filter relaxation here: retries rewrite
    the query and keep ``filters``; a run's ``context={"relax_filters": True}`` is a ``ValueError``).

    Output :class:`~langchain_ragspine.graphs.state.SelfRAGOutput`: also ``use_retrieval``, ``supported`` /
    ``useful`` (the last verdicts) and ``retry_reason`` (why the last retry, or the refusal, happened).

    Bound: at most :func:`self_rag_max_steps` ``= 9 + 7 * max_retries`` supersteps (23 by default).

    Raises:
        TypeError / ValueError: a bad ``retriever``, ``llm``, ``graders``, ``max_retries``, ``k``, ``prompts``,
            ``compressors``, ``condense_question`` or ``history_turns``.
    """
    parts = make_parts(
        retriever, llm, max_retries=max_retries, graders=graders, answer_chain=answer_chain, k=k,
        max_docs=max_docs, lost_in_the_middle=lost_in_the_middle, tokenizer=tokenizer, prompts=prompts,
        compressors=compressors, condense_question=condense_question,
        history_turns=history_turns,
    )
    builder = new_graph(SelfRAGState, SelfRAGOutput)
    builder.add_node(
        "prepare", partial(prepare, parts=parts, extra={"use_retrieval": True, "supported": "", "useful": ""})
    )
    builder.add_node("decide_retrieval", partial(decide_retrieval, parts=parts))
    builder.add_node("respond_directly", partial(respond_directly, parts=parts))
    add_retrieval(builder, parts)
    builder.add_node("grade_documents", partial(grade_documents, parts=parts))
    builder.add_node("generate", partial(generate, parts=parts))
    builder.add_node("check_support", partial(check_support, parts=parts))
    builder.add_node("check_usefulness", partial(check_usefulness, parts=parts))
    builder.add_node("retry", partial(retry, parts=parts))
    builder.add_node("refuse", refuse)
    builder.add_edge(START, "prepare")
    builder.add_edge("prepare", "decide_retrieval")
    builder.add_conditional_edges("decide_retrieval", route_retrieval, ["retrieve", "respond_directly"])
    builder.add_conditional_edges("grade_documents", route_after_grading, ["generate", "retry", "refuse"])
    builder.add_edge("generate", "check_support")
    builder.add_conditional_edges("check_support", route_after_support, ["check_usefulness", "retry", "refuse"])
    builder.add_conditional_edges("check_usefulness", route_after_usefulness, [END, "retry", "refuse"])
    builder.add_conditional_edges("retry", route_after_retry, ["generate", "retrieve", "refuse"])
    builder.add_edge("respond_directly", END)
    builder.add_edge("refuse", END)
    bound = self_rag_max_steps(parts.max_retries, compress=bool(parts.compressors))
    return compile_graph(builder, name="self_rag", max_steps=bound, checkpointer=checkpointer)
