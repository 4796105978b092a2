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

from collections.abc import Mapping
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from langchain_ragspine.graphs.graders import Graders
from langchain_ragspine.graphs.nodes import (
    check_max_retries,
    check_retriever,
    default_chain,
    default_graders,
    make_generate,
    make_grade_documents,
    make_prepare,
    make_respond_directly,
    make_retrieve,
    recursion_limit_for,
    refuse,
    resolve_llm,
    restricted_gate,
    rewrite,
    wants_no_retrieval,
)
from langchain_ragspine.graphs.state import RAGInput, SelfRAGState
from langchain_ragspine.tokenizers import Tokenizer

__all__ = ["build_self_rag", "self_rag_max_steps"]


def self_rag_max_steps(max_retries: int = 2) -> int:
    """Worst-case supersteps of :func:`build_self_rag`: ``9 + 7 * max_retries``.

    prepare, decide_retrieval, retrieve, restricted_gate, grade_documents, generate, check_support,
    check_usefulness (8); each retry adds retry, retrieve, restricted_gate, grade_documents, generate,
    check_support, check_usefulness (7 at most); then refuse (1).  ``max_retries=2`` → 23.
    """
    return 9 + 7 * check_max_retries(max_retries)


def build_self_rag(
    retriever: BaseRetriever,
    llm: BaseChatModel | str | None = None,
    *,
    max_retries: int = 2,
    graders: Graders | None = None,
    answer_chain: Runnable[Any, Any] | None = None,
    k: int | None = None,
    max_docs: int | None = 6,
    lost_in_the_middle: bool = False,
    tokenizer: str | Tokenizer = "auto",
    checkpointer: Any = None,
) -> CompiledStateGraph:
    """Compile the Self-RAG graph (see the module docstring for the flow).

    Retrieval is skipped only for small talk (a greeting or thanks the heuristic recognises and, with an LLM, the
    model confirms); every other message is answered from documents.  Without an LLM the support check is verbatim
    containment, which extractive answers pass by construction.

    Args: as :func:`~langchain_ragspine.graphs.build_corrective_rag` (no filter relaxation here: retries rewrite
    the query and keep ``filters``).

    The final state also holds ``use_retrieval``, ``supported`` / ``useful`` (the last verdicts) and
    ``retry_reason`` (why the last retry, or the refusal, happened).

    Bound: at most :func:`self_rag_max_steps` ``= 9 + 7 * max_retries`` supersteps (23 by default).

    Raises:
        TypeError / ValueError: a bad ``retriever``, ``llm``, ``graders`` or ``max_retries``.
    """
    check_retriever(retriever)
    retries = check_max_retries(max_retries)
    model = resolve_llm(llm)
    grade = default_graders(graders, model, tokenizer)
    chain = default_chain(model, answer_chain, tokenizer)

    def decide_retrieval(state: Mapping[str, Any]) -> dict[str, Any]:
        skip, how = wants_no_retrieval(state["original_query"], model)
        return {"use_retrieval": not skip, "trace": [{"step": "decide_retrieval", "retrieve": not skip, "how": how}]}

    def route_retrieval(state: Mapping[str, Any]) -> str:
        return "retrieve" if state.get("use_retrieval", True) else "respond_directly"

    def check_support(state: Mapping[str, Any]) -> dict[str, Any]:
        verdict = grade.supported(state.get("answer") or "", state.get("documents") or [])
        return {
            "supported": verdict,
            "retry_reason": None if verdict == "yes" else "unsupported",
            "trace": [{"step": "check_support", "verdict": verdict}],
        }

    def check_usefulness(state: Mapping[str, Any]) -> dict[str, Any]:
        verdict = grade.useful(state["original_query"], state.get("answer") or "")
        return {
            "useful": verdict,
            "retry_reason": None if verdict == "yes" else "not_useful",
            "trace": [{"step": "check_usefulness", "verdict": verdict}],
        }

    def retry_or_refuse(state: Mapping[str, Any]) -> str:
        return "refuse" if int(state.get("retries", 0)) >= retries else "retry"

    def route_after_grading(state: Mapping[str, Any]) -> str:
        return "generate" if state.get("documents") else retry_or_refuse(state)

    def route_after_support(state: Mapping[str, Any]) -> str:
        return "check_usefulness" if state.get("supported") == "yes" else retry_or_refuse(state)

    def route_after_usefulness(state: Mapping[str, Any]) -> str:
        return END if state.get("useful") == "yes" else retry_or_refuse(state)

    def retry(state: Mapping[str, Any]) -> dict[str, Any]:
        reason = state.get("retry_reason") or "no_relevant_documents"
        attempt = int(state.get("retries", 0)) + 1
        entry: dict[str, Any] = {"step": "retry", "reason": reason, "attempt": attempt}
        update: dict[str, Any] = {"retries": attempt, "trace": [entry]}
        if reason == "unsupported":
            entry["action"] = "regenerate"
            return update
        question = state["original_query"]
        tried = list(state.get("tried_queries") or [question])
        new, how = rewrite(question, tried, llm=model, tokenizer=tokenizer)
        if new.strip() in {t.strip() for t in tried}:
            entry["action"] = "rewrite_exhausted"
            update["retry_reason"] = "rewrite_exhausted"
            return update
        entry.update(action="rewrite_query", query=new, how=how)
        update.update(search_query=new, tried_queries=tried + [new])
        return update

    def route_after_retry(state: Mapping[str, Any]) -> str:
        reason = state.get("retry_reason")
        if reason == "rewrite_exhausted":
            return "refuse"
        return "generate" if reason == "unsupported" else "retrieve"

    builder = StateGraph(SelfRAGState, input_schema=RAGInput)
    builder.add_node("prepare", make_prepare(use_retrieval=True, supported="", useful=""))
    builder.add_node("decide_retrieval", decide_retrieval)
    builder.add_node("respond_directly", make_respond_directly(model))
    builder.add_node("retrieve", make_retrieve(retriever, k=k))
    builder.add_node("restricted_gate", restricted_gate)
    builder.add_node("grade_documents", make_grade_documents(grade))
    builder.add_node("generate", make_generate(chain, max_docs=max_docs, lost_in_the_middle=lost_in_the_middle))
    builder.add_node("check_support", check_support)
    builder.add_node("check_usefulness", check_usefulness)
    builder.add_node("retry", retry)
    builder.add_node("refuse", refuse)
    builder.add_edge(START, "prepare")
    builder.add_edge("prepare", "decide_retrieval")
    builder.add_conditional_edges("decide_retrieval", route_retrieval, ["retrieve", "respond_directly"])
    builder.add_edge("retrieve", "restricted_gate")
    builder.add_edge("restricted_gate", "grade_documents")
    builder.add_conditional_edges("grade_documents", route_after_grading, ["generate", "retry", "refuse"])
    builder.add_edge("generate", "check_support")
    builder.add_conditional_edges("check_support", route_after_support, ["check_usefulness", "retry", "refuse"])
    builder.add_conditional_edges("check_usefulness", route_after_usefulness, [END, "retry", "refuse"])
    builder.add_conditional_edges("retry", route_after_retry, ["generate", "retrieve", "refuse"])
    builder.add_edge("respond_directly", END)
    builder.add_edge("refuse", END)
    graph = builder.compile(checkpointer=checkpointer, name="self_rag")
    return graph.with_config(recursion_limit=recursion_limit_for(self_rag_max_steps(retries)))
