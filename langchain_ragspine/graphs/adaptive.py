"""Adaptive RAG: route each question by complexity — no retrieval, single-shot retrieval, or decomposition.

Jeong et al., "Adaptive-RAG: Learning to Adapt Retrieval-Augmented Large Language Models through Question
Complexity" (NAACL 2024) classify questions into no-retrieval, single-step and multi-step and run a strategy for
each.  Here:

* the classifier is :func:`~langchain_ragspine.graphs.query_analysis.classify_question` (a deterministic heuristic)
  by default; with an LLM, the model picks ``single`` or ``decompose`` (an unparsable reply falls back to the
  heuristic), and ``none`` is only taken for messages the heuristic also recognises as small talk — a question is
  never answered without documents;
* ``none`` → ``respond_directly``: a reply that says no documents were used;
* ``single`` → the corrective loop of :mod:`langchain_ragspine.graphs.corrective` (retrieve, gate, grade, correct
  within ``max_retries``, refuse);
* ``decompose`` → at most 3 sub-questions (the LLM's, parsed robustly, else the deterministic split; fewer than 2
  falls back to ``single``), answered in parallel LangGraph ``Send`` branches (each: retrieve, gate, grade, answer,
  no retries), then merged deterministically: sub-answers in sub-question order, their passages numbered into one
  list (de-duplicated by ``chunk_id``) and their ``[n]`` markers renumbered to match.  If no sub-question could be
  answered — typically a factoid question the model misrouted to decomposition, whose invented sub-questions find
  nothing — the graph falls back once to answering the original question the way the single path does
  (retrieve, gate, grade, generate; no corrections), and refuses only when that finds nothing relevant either.
  The fallback is bounded by the ``fallbacks`` counter in state (at most :data:`MAX_FALLBACKS`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import partial
from typing import Any

from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.language_models import BaseChatModel
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable
from langgraph.graph import END, START
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Send
from typing_extensions import TypedDict

from langchain_ragspine.arguments import DEFAULT_K, check_int
from langchain_ragspine.chains.answer import (
    citation_for,
    insufficient_context,
    is_dont_know,
    prepare_context,
    rewrite_citation_markers,
    strip_think,
)
from langchain_ragspine.document_compressors.restricted import RestrictedGate
from langchain_ragspine.documents import doc_key
from langchain_ragspine.graphs.conversation import DEFAULT_HISTORY_TURNS
from langchain_ragspine.graphs.graders import Graders
from langchain_ragspine.graphs.nodes import (
    NOSTREAM,
    GraphParts,
    add_corrective_loop,
    add_retrieval,
    compile_graph,
    make_parts,
    message_text,
    new_graph,
    prepare,
    progress,
    refuse,
    reply,
    respond_directly,
    run_compressors,
    run_retrieval,
    search_question,
    wants_no_retrieval,
)
from langchain_ragspine.graphs.nodes import route_after_grading as corrective_route
from langchain_ragspine.graphs.prompts import CLASSIFY_PROMPT, DECOMPOSE_PROMPT, GraphPrompts
from langchain_ragspine.graphs.query_analysis import (
    MAX_SUB_QUESTIONS,
    classify_question,
    parse_lines,
    shares_tokens,
    split_question,
)
from langchain_ragspine.graphs.state import (
    AdaptiveRAGOutput,
    AdaptiveRAGState,
    SubAnswer,
    merge_documents,
    replace,
)
from langchain_ragspine.tokenizers import Tokenizer

__all__ = [
    "CLASSIFY_PROMPT",
    "DECOMPOSE_PROMPT",
    "MAX_FALLBACKS",
    "SubQuestionTask",
    "adaptive_rag_max_llm_calls",
    "adaptive_rag_max_steps",
    "answer_sub_question",
    "build_adaptive_rag",
    "classify",
    "decompose",
    "merge_answers",
    "merge_sub_answers_text",
]

#: How often a failed decomposition falls back to answering the original question (a counter in state).
MAX_FALLBACKS = 1

_ROUTE_WORD_RE = re.compile(r"\b(single|decompose|none)\b")
_GATE = RestrictedGate()


class SubQuestionTask(TypedDict):
    """The payload of one ``answer_sub_question`` branch (a LangGraph ``Send``)."""

    index: int
    question: str
    filters: dict[str, Any] | None
    k: int | None


def adaptive_rag_max_steps(max_retries: int = 2, *, compress: bool = False) -> int:
    """Worst-case supersteps of :func:`build_adaptive_rag`: ``max(7 + 4 * max_retries, 9)``; with ``compressors``
    one more per retrieval of the single path: ``max(8 + 5 * max_retries, 10)``.

    The single path: prepare, classify, decompose (a decomposition that yields < 2 sub-questions falls back to
    single), retrieve, restricted_gate, grade_documents (6), 4 per correction, generate | refuse (1).  The
    decomposition path: prepare, classify, decompose, answer_sub_question (every branch in one superstep),
    merge_answers (5), and when no sub-question was answered the fallback — retrieve, restricted_gate,
    grade_documents, generate | refuse (4, no corrections): 9.  ``none`` takes 3 (prepare, classify,
    respond_directly).  ``max_retries=2`` → 15.
    """
    retries = check_int(max_retries, "max_retries", minimum=0)
    extra = int(compress)
    return max(7 + 4 * retries + (retries + 1) * extra, 9 + extra)


def adaptive_rag_max_llm_calls(max_retries: int = 2, k: int = DEFAULT_K) -> int:
    """Worst-case chat-model calls of :func:`build_adaptive_rag` with an LLM, when every search returns ``k``
    documents: ``max(2 + (max_retries + 1) * k + max_retries + 1, 2 + 3 * (k + 1) + k + 1)``.

    This is the bound with per-document grading (:func:`make_graders` with ``batch=False``, or graders without
    ``relevance_batch``); the default LLM graders grade each search in one call unless its reply is unusable.
    classify and decompose (2); the single path grades ``k`` documents per search (``max_retries + 1`` searches),
    rewrites the query once per correction and generates once; the decomposition path grades and answers each of
    at most :data:`~langchain_ragspine.graphs.query_analysis.MAX_SUB_QUESTIONS` (3) sub-questions, then the fallback
    grades ``k`` documents and generates.  ``max_retries=2, k=6`` → 30 (23 before the fallback existed).  An LLM
    grader that fails falls back to the lexical grader, which calls no model.

    Raises:
        ValueError: ``k < 0`` or ``max_retries < 0``.  TypeError: either is not an int.
    """
    retries = check_int(max_retries, "max_retries", minimum=0)
    check_int(k, "k", minimum=0)
    single = 2 + (retries + 1) * k + retries + 1
    decomposed = 2 + MAX_SUB_QUESTIONS * (k + 1) + k + 1
    return max(single, decomposed)


def merge_sub_answers_text(sub_answers: list[SubAnswer]) -> tuple[str, list[Any], list[Document]]:
    """Merge sub-answers deterministically: ``(answer, citations, documents)``.

    Passages of every sub-answer are numbered into one list in sub-question order (a chunk given to two
    sub-answers gets one number), each sub-answer's ``[n]`` markers are renumbered to that list, and the answer is
    the sub-questions with their answers, in order, separated by blank lines.  Citations follow first use.
    """
    documents: list[Document] = []
    number: dict[Any, int] = {}
    blocks: list[str] = []
    cited: list[int] = []
    model_cited: set[int] = set()  # global numbers some sub-answer's model cited itself (not attributed)
    for sub in sorted(sub_answers, key=lambda s: s["index"]):
        local: dict[int, int] = {}
        for i, doc in enumerate(sub["documents"], 1):
            key = doc_key(doc) or ("#", sub["index"], i)
            if key not in number:
                documents.append(doc)
                number[key] = len(documents)
            local[i] = number[key]
        def renumber(nums: list[int], local: dict[int, int] = local) -> list[int]:
            return [local[n] for n in nums if n in local]

        text = rewrite_citation_markers(sub["answer"], renumber)
        for c in sub["citations"]:
            g = local.get(int(c["n"]))
            if g is None:
                continue
            if g not in cited:
                cited.append(g)
            if not c.get("attributed"):
                model_cited.add(g)
        blocks.append(f"{sub['question']}\n{text}")
    citations = [citation_for(n, documents[n - 1], attributed=n not in model_cited) for n in cited]
    return "\n\n".join(blocks), citations, documents


# -- nodes ----------------------------------------------------------------------------------------------------------
def classify(state: AdaptiveRAGState, *, parts: GraphParts) -> dict[str, Any]:
    """Node ``classify``: the route — ``"none"`` (small talk only), ``"single"`` or ``"decompose"`` — by
    :func:`~langchain_ragspine.graphs.query_analysis.classify_question`, or by the LLM (an unparsable reply keeps
    the heuristic's route).  A chat follow-up is classified by its standalone question
    (:func:`~langchain_ragspine.graphs.nodes.search_question`)."""
    question = search_question(state)
    heuristic = classify_question(question)
    route, how = heuristic, "heuristic"
    if parts.llm is not None:
        try:
            answer = parts.llm.invoke(parts.prompts.classify.format_messages(question=question), NOSTREAM)
            found = _ROUTE_WORD_RE.findall(strip_think(message_text(answer)).lower())
            if found and len(set(found)) == 1:
                route, how = found[0], "llm"
        except Exception:  # noqa: BLE001 - documented fallback: the heuristic route
            pass
    if route == "none":
        skip, _ = wants_no_retrieval(question, None)
        if not skip:  # only small talk goes without documents
            route, how = ("single" if heuristic == "none" else heuristic), how + "+guard"
    progress("routed", route=route)
    return {"route": route, "trace": [{"step": "classify", "route": route, "how": how}]}


def decompose(state: AdaptiveRAGState, *, parts: GraphParts) -> dict[str, Any]:
    """Node ``decompose``: at most :data:`MAX_SUB_QUESTIONS` sub-questions (the LLM's, each sharing a content
    token with the question, else :func:`~langchain_ragspine.graphs.query_analysis.split_question`); fewer than
    two means none (the single path).  A chat follow-up's standalone question is what is decomposed."""
    question = search_question(state)
    subs: list[str] = []
    how = "heuristic"
    if parts.llm is not None:
        try:
            answer = parts.llm.invoke(parts.prompts.decompose.format_messages(question=question), NOSTREAM)
            subs = [
                s for s in parse_lines(answer, limit=MAX_SUB_QUESTIONS * 2) if shares_tokens(s, question, parts.tokenizer)
            ][:MAX_SUB_QUESTIONS]
            how = "llm"
        except Exception:  # noqa: BLE001 - documented fallback: the deterministic split
            subs = []
    if len(subs) < 2:
        subs, how = split_question(question)[:MAX_SUB_QUESTIONS], "heuristic"
    if len(subs) < 2:
        subs = []
    return {
        "sub_questions": subs,
        "sub_answers": replace([]),
        "trace": [{"step": "decompose", "how": how, "sub_questions": len(subs)}],
    }


def answer_sub_question(task: SubQuestionTask, *, parts: GraphParts) -> dict[str, Any]:
    """Node ``answer_sub_question``, one parallel branch per sub-question: retrieve, gate (RestrictedGate), the
    builder's compressors (gated again), grade (one call for all passages with an LLM), answer; no retries."""
    index, question = int(task["index"]), str(task["question"])
    kept, raw, _info = run_retrieval(parts.retriever, question, filters=task.get("filters"), k=task.get("k", parts.k))
    gated = merge_documents([], list(_GATE.compress_documents(kept, question)))  # one per chunk_id
    entry: dict[str, Any] = {"step": "answer_sub_question", "index": index, "retrieved": len(gated)}
    progress("retrieved", count=len(gated), query=question, index=index)
    if parts.compressors:
        gated, steps, _ = run_compressors(parts.compressors, gated, question)
        entry["compressors"] = steps
    verdicts = parts.graders.relevant_many(question, gated)
    relevant = [d for d, v in zip(gated, verdicts, strict=True) if v == "yes"]
    entry["relevant"] = len(relevant)
    progress("graded", graded=len(gated), relevant=len(relevant), index=index)
    if len(raw) != entry["retrieved"]:
        entry["restricted_dropped"] = len(raw) - entry["retrieved"]
    if not relevant:
        refused: SubAnswer = {
            "index": index, "question": question, "answer": insufficient_context(question), "citations": [],
            "documents": [], "refused": True,
        }
        return {"sub_answers": [refused], "trace": [entry]}
    shown = prepare_context(relevant, k=parts.max_docs, lost_in_the_middle=parts.lost_in_the_middle)
    progress("answering", passages=len(shown), index=index)
    out = parts.chain.invoke({"question": question, "documents": shown})
    answer = str(out.get("answer") or "")
    citations = [c for c in out.get("citations") or [] if 1 <= int(c.get("n", 0)) <= len(shown)]
    entry["mode"] = out.get("mode")
    sub: SubAnswer = {
        "index": index, "question": question, "answer": answer, "citations": citations, "documents": shown,
        "refused": is_dont_know(answer), "unsupported_sentences": list(out.get("unsupported_sentences") or []),
        "warning": out.get("warning"),
    }
    return {"sub_answers": [sub], "documents": shown, "trace": [entry]}


def merge_answers(state: AdaptiveRAGState) -> dict[str, Any]:
    """Node ``merge_answers``: :func:`merge_sub_answers_text` over the answered sub-questions; when none was
    answered, the fallback to the single path (at most :data:`MAX_FALLBACKS`), then a refusal."""
    subs = list(state.get("sub_answers") or [])
    answered = [s for s in subs if not s["refused"]]
    entry: dict[str, Any] = {"step": "merge_answers", "answered": len(answered), "of": len(subs)}
    if not answered:
        used = int(state.get("fallbacks", 0))
        if used < MAX_FALLBACKS:  # answer the original question plainly before refusing
            entry["fallback"] = "single"
            return {
                "fallbacks": used + 1,
                "search_query": search_question(state),
                "documents": replace([]),
                "retry_reason": None,
                "trace": [entry],
            }
        refusing: AdaptiveRAGState = {**state, "retry_reason": "no_relevant_documents"}
        update = refuse(refusing)
        update["trace"] = [entry] + update["trace"]
        return update
    answer, citations, documents = merge_sub_answers_text(subs)
    progress("answered", cited=[c["n"] for c in citations], mode="merged")
    return {
        "answer": answer,
        "citations": citations,
        "documents": replace(documents),
        "refused": False,
        "mode": "merged",
        "unsupported_sentences": [x for s in answered for x in s.get("unsupported_sentences", [])],
        "warning": next((s["warning"] for s in answered if s.get("warning")), None),
        **reply(state, answer, citations=citations, mode="merged", passages=documents),
        "trace": [entry],
    }


# -- edges ----------------------------------------------------------------------------------------------------------
def route_by_complexity(state: AdaptiveRAGState) -> str:
    """Edge after ``classify``: ``respond_directly`` | ``decompose`` | ``retrieve``."""
    return {"none": "respond_directly", "decompose": "decompose"}.get(state.get("route", ""), "retrieve")


def fan_out(state: AdaptiveRAGState) -> list[Send] | str:
    """Edge after ``decompose``: one ``Send("answer_sub_question", SubQuestionTask)`` per sub-question, or
    ``retrieve`` (the single path) when there are fewer than two."""
    subs = state.get("sub_questions") or []
    if len(subs) < 2:
        return "retrieve"
    return [
        Send(
            "answer_sub_question",
            SubQuestionTask(index=i, question=q, filters=state.get("search_filters"), k=state.get("k")),
        )
        for i, q in enumerate(subs)
    ]


def route_after_merge(state: AdaptiveRAGState) -> str:
    """Edge after ``merge_answers``: the end when it answered (or refused), else the fallback's ``retrieve``."""
    return END if state.get("answer") else "retrieve"


def route_after_grading(state: AdaptiveRAGState, *, parts: GraphParts) -> str:
    """Edge after ``grade_documents``: as the corrective graph's, except that the fallback after a failed
    decomposition is one plain attempt (``refuse`` when it finds nothing, no corrections)."""
    if state.get("fallbacks") and not state.get("documents"):
        return "refuse"
    return corrective_route(state, parts=parts)


def build_adaptive_rag(
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
    """Compile the adaptive RAG graph (see the module docstring for the routes).

    Nodes: ``prepare → classify →`` ``respond_directly`` | the corrective loop (``retrieve``, ``restricted_gate``,
    [``compress``,] ``grade_documents``, ``drop_filters``, ``rewrite_query``, ``generate``, ``refuse``) |
    ``decompose →`` ``answer_sub_question`` (parallel ``Send`` branches; they run the ``compressors`` too)
    ``→ merge_answers``.

    Args: as :func:`~langchain_ragspine.graphs.build_corrective_rag` (``max_retries`` bounds the single path;
    sub-question branches do not retry; a chat follow-up's standalone question is what is classified and
    decomposed).  Filters are kept on every route (sub-questions and the fallback search
    with the run's ``filters``); only the single path's corrective loop may drop them, and only with
    ``relax_filters=True`` (default ``False``), reported as in the corrective graph.

    Output :class:`~langchain_ragspine.graphs.state.AdaptiveRAGOutput`: also ``route`` (``"none"``, ``"single"``,
    ``"decompose"``) and ``sub_questions``; for a merged answer, ``documents`` is every passage the sub-answers
    were given, and ``citations[i]["n"]`` indexes it.

    When no sub-question could be answered, the graph answers the original question once more on the single path
    without corrections (``trace`` shows ``"fallback": "single"`` on the ``merge_answers`` step) and refuses only
    if that finds nothing relevant.

    Bound: at most :func:`adaptive_rag_max_steps` ``= max(7 + 4 * max_retries, 9)`` supersteps (15 by default) and,
    with an LLM, :func:`adaptive_rag_max_llm_calls` model calls (30 for ``max_retries=2`` and 6 documents a search).

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
    builder = new_graph(AdaptiveRAGState, AdaptiveRAGOutput)
    resets = {"route": "", "sub_questions": [], "sub_answers": replace([]), "fallbacks": 0}
    builder.add_node("prepare", partial(prepare, parts=parts, extra=resets))
    builder.add_node("classify", partial(classify, parts=parts))
    builder.add_node("respond_directly", partial(respond_directly, parts=parts))
    builder.add_node("decompose", partial(decompose, parts=parts))
    builder.add_node("answer_sub_question", partial(answer_sub_question, parts=parts))
    builder.add_node("merge_answers", merge_answers)
    add_retrieval(builder, parts)
    builder.add_edge(START, "prepare")
    builder.add_edge("prepare", "classify")
    builder.add_conditional_edges("classify", route_by_complexity, ["respond_directly", "decompose", "retrieve"])
    builder.add_conditional_edges("decompose", fan_out, ["answer_sub_question", "retrieve"])
    builder.add_edge("answer_sub_question", "merge_answers")
    builder.add_conditional_edges("merge_answers", route_after_merge, ["retrieve", END])
    add_corrective_loop(builder, parts, partial(route_after_grading, parts=parts))
    builder.add_edge("respond_directly", END)
    bound = adaptive_rag_max_steps(parts.max_retries, compress=bool(parts.compressors))
    return compile_graph(builder, name="adaptive_rag", max_steps=bound, checkpointer=checkpointer)
