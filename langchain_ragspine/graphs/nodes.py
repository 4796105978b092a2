"""Graph nodes and edges shared by the builders: each node is a plain function ``state -> partial update``, each
edge a small function returning a node name.  Factories (``make_*``) close over the parts a node needs (retriever,
graders, chain, LLM); the returned functions are ordinary ``state -> dict`` callables.

The RESTRICTED gate runs twice before anything reads documents: the ``retrieve`` node drops RESTRICTED chunks the
moment the retriever returns them (so restricted text never enters graph state, checkpoints or streamed updates),
and the ``restricted_gate`` node then passes the state's documents through :class:`RestrictedGate` (covering
documents that entered state any other way, e.g. ``graph.update_state``).  The answer chain gates once more.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable

from langchain_ragspine.chains.answer import (
    NO_RETRIEVAL_NOTE,
    detect_language,
    insufficient_context,
    is_dont_know,
    make_answer_chain,
    prepare_context,
    strip_think,
)
from langchain_ragspine.document_compressors.restricted import RestrictedGate, drop_restricted
from langchain_ragspine.documents import doc_key
from langchain_ragspine.filters import compile_filter
from langchain_ragspine.graphs.graders import Graders, make_graders, parse_binary
from langchain_ragspine.graphs.query_analysis import (
    clean_query,
    is_small_talk,
    rewrite_query_deterministic,
    shares_tokens,
)
from langchain_ragspine.graphs.state import merge_documents, replace
from langchain_ragspine.retrievers.contract import invoke_retriever, retriever_params
from langchain_ragspine.tokenizers import Tokenizer

logger = logging.getLogger(__name__)

Node = Callable[[Mapping[str, Any]], dict[str, Any]]

#: LangGraph's default ``recursion_limit``; builders raise it when their worst case needs more.
DEFAULT_RECURSION_LIMIT = 25

_GATE = RestrictedGate()

SMALL_TALK_REPLY: dict[str, str] = {
    "ja": "こんにちは。登録された文書についての質問にお答えします。",
    "zh": "你好！我可以回答关于已索引文档的问题。",
    "en": "Hello! I answer questions about the indexed documents.",
}

REWRITE_PROMPT = ChatPromptTemplate.from_messages(
    [
        (
            "system",
            "You rewrite a question into a better search query for a keyword search over documents. Keep names "
            "and key terms, drop question words and filler, keep the question's language. Reply with the query "
            "only, on one line.",
        ),
        ("human", "Question: {question}\nQueries already tried: {tried}"),
    ]
)
SMALL_TALK_PROMPT = ChatPromptTemplate.from_messages(
    [
        (
            "system",
            "You are the assistant of a document search system. This message is small talk; no documents were "
            "retrieved for it. Reply briefly and politely in the language of the message, and do not state facts "
            "as if they came from documents.",
        ),
        ("human", "{question}"),
    ]
)
SMALL_TALK_CHECK_PROMPT = ChatPromptTemplate.from_messages(
    [
        (
            "system",
            "Decide whether a message is small talk (a greeting, thanks, a farewell) that needs no information "
            'from a document collection. Reply with JSON only: {{"binary_score": "yes"}} if it is small talk, '
            '{{"binary_score": "no"}} otherwise.',
        ),
        ("human", "{question}"),
    ]
)


# -- parts ----------------------------------------------------------------------------------------------------------
def resolve_llm(llm: BaseChatModel | str | None) -> BaseChatModel | None:
    """``llm`` as a chat model: ``None`` stays ``None`` (no LLM; the environment is *not* consulted — call
    :func:`~langchain_ragspine.config.make_chat_model` for that), a string goes through ``make_chat_model``.

    Raises:
        TypeError: neither ``None``, a string nor a ``BaseChatModel``.
    """
    if llm is None or isinstance(llm, BaseChatModel):
        return llm
    if isinstance(llm, str):
        from langchain_ragspine.config import make_chat_model

        return make_chat_model(llm)
    raise TypeError(f"llm must be a BaseChatModel, a make_chat_model spec or None, got {llm!r}")


def check_retriever(retriever: Any) -> BaseRetriever:
    """``retriever`` if it is a ``BaseRetriever``.

    Raises:
        TypeError: anything else.
    """
    if not isinstance(retriever, BaseRetriever):
        raise TypeError(f"retriever must be a langchain_core BaseRetriever, got {type(retriever).__name__}")
    return retriever


def check_max_retries(max_retries: Any) -> int:
    """``max_retries`` if it is an ``int >= 0``.

    Raises:
        ValueError: a negative value.  TypeError: not an int.
    """
    if isinstance(max_retries, bool) or not isinstance(max_retries, int):
        raise TypeError(f"max_retries must be an int, got {max_retries!r}")
    if max_retries < 0:
        raise ValueError(f"max_retries must be >= 0, got {max_retries}")
    return max_retries


def run_retrieval(
    retriever: BaseRetriever,
    query: str,
    *,
    filters: Mapping[str, Any] | None = None,
    k: int | None = None,
    config: Any = None,
) -> tuple[list[Document], list[Document], dict[str, Any]]:
    """Retrieve ``query`` through the retriever-call contract and gate the result: ``(kept, raw, info)``.

    :func:`~langchain_ragspine.retrievers.contract.invoke_retriever` asks any retriever for ``k`` results matching
    ``filters``: a retriever that takes ``filter=`` (every retriever of this package) applies it before scoring;
    any other (a ``VectorStoreRetriever``, say) has its results filtered by the contract, over-fetching (fail
    closed: a filter never widens what is returned), and ``info["filter"]`` says ``"post"``.  ``kept`` is ``raw``
    without RESTRICTED chunks; callers must only ever store ``kept``.
    """
    info: dict[str, Any] = {"filter": None}
    if filters:
        info["filter"] = "retriever" if retriever_params(retriever).takes_filter else "post"
    raw = invoke_retriever(retriever, query, k=k, filter=filters or None, config=config)
    kept = drop_restricted(raw)
    return kept, raw, info


def _chunk_ids(documents: Sequence[Document]) -> list[str | None]:
    return [doc_key(d) for d in documents]


# -- nodes ----------------------------------------------------------------------------------------------------------
def make_prepare(**extra: Any) -> Node:
    """The first node: check the input and reset every per-run key (``extra`` adds graph-specific resets).

    Raises (when the node runs):
        ValueError: ``question`` missing, not a string or blank; a malformed ``filters``.
    """

    def prepare(state: Mapping[str, Any]) -> dict[str, Any]:
        question = state.get("question")
        if not isinstance(question, str) or not question.strip():
            raise ValueError(f"the graph input needs a non-empty 'question' string, got {question!r}")
        filters = state.get("filters") or None
        if filters is not None and not isinstance(filters, Mapping):
            raise ValueError(f"'filters' must be a dict or None, got {filters!r}")
        compile_filter(filters)
        return {
            "original_query": question,
            "search_query": question,
            "filters": dict(filters) if filters else None,
            "documents": replace([]),
            "answer": "",
            "citations": [],
            "invalid_citations": [],
            "unsupported_sentences": [],
            "warning": None,
            "refused": False,
            "retries": 0,
            "retry_reason": None,
            "tried_queries": [question],
            "mode": "",
            "trace": replace([{"step": "prepare", "filters": bool(filters)}]),
            **extra,
        }

    return prepare


def make_retrieve(retriever: BaseRetriever, *, k: int | None = None) -> Node:
    """Node ``retrieve``: search ``search_query`` with ``filters``; RESTRICTED chunks are dropped on arrival."""

    def retrieve(state: Mapping[str, Any]) -> dict[str, Any]:
        query = state.get("search_query") or state["question"]
        kept, raw, info = run_retrieval(retriever, query, filters=state.get("filters"), k=k)
        entry: dict[str, Any] = {"step": "retrieve", "query": query, "retrieved": len(kept)}
        if info["filter"]:
            entry["filter"] = info["filter"]
        if len(raw) != len(kept):
            entry["restricted_dropped"] = len(raw) - len(kept)
        return {"documents": replace(kept), "trace": [entry]}

    return retrieve


def restricted_gate(state: Mapping[str, Any]) -> dict[str, Any]:
    """Node ``restricted_gate``: :class:`RestrictedGate` as a compressor over the state's documents."""
    docs = list(state.get("documents") or [])
    kept = list(_GATE.compress_documents(docs, state.get("search_query") or ""))
    return {
        "documents": replace(kept),
        "trace": [{"step": "restricted_gate", "kept": len(kept), "dropped": len(docs) - len(kept)}],
    }


def make_grade_documents(graders: Graders) -> Node:
    """Node ``grade_documents``: keep the documents graded relevant to ``original_query`` (``"unknown"`` counts as
    not relevant); sets ``retry_reason="no_relevant_documents"`` when none is."""

    def grade_documents(state: Mapping[str, Any]) -> dict[str, Any]:
        question = state.get("original_query") or state["question"]
        docs = drop_restricted(state.get("documents") or [])
        verdicts = [graders.relevant(question, d) for d in docs]
        relevant = [d for d, v in zip(docs, verdicts, strict=True) if v == "yes"]
        entry = {
            "step": "grade_documents",
            "graded": len(docs),
            "relevant": len(relevant),
            "unknown": sum(v == "unknown" for v in verdicts),
            "kept": _chunk_ids(relevant),
        }
        update: dict[str, Any] = {"documents": replace(relevant), "trace": [entry]}
        update["retry_reason"] = None if relevant else "no_relevant_documents"
        return update

    return grade_documents


def make_generate(chain: Runnable[Any, Any], *, max_docs: int | None = 6, lost_in_the_middle: bool = False) -> Node:
    """Node ``generate``: answer ``original_query`` from the state's documents with ``chain``.

    The passages shown are chosen here (:func:`prepare_context`: gate, ``max_docs``, optional lost-in-the-middle
    order) and written back as ``documents``, so ``citations[i]["n"]`` indexes the final ``documents``.
    """

    def generate(state: Mapping[str, Any]) -> dict[str, Any]:
        question = state.get("original_query") or state["question"]
        docs = merge_documents([], list(state.get("documents") or []))  # one passage per chunk_id
        shown = prepare_context(docs, max_docs=max_docs, lost_in_the_middle=lost_in_the_middle)
        out = chain.invoke({"question": question, "documents": shown})
        citations = [c for c in out.get("citations") or [] if 1 <= int(c.get("n", 0)) <= len(shown)]
        mode = str(out.get("mode") or "llm")
        answer = str(out.get("answer") or "")
        dont_know = is_dont_know(answer)  # the chain found no support: a refusal, not an answer
        report = answer_report(out)
        entry = {"step": "generate", "mode": mode, "passages": len(shown), "cited": [c["n"] for c in citations]}
        if dont_know:
            entry["dont_know"] = True
        if any(c.get("attributed") for c in citations):
            entry["attributed"] = True
        entry.update({k: len(v) for k, v in report.items() if isinstance(v, list) and v})
        if report["warning"]:
            entry["warning"] = report["warning"]
        return {
            "answer": answer,
            "citations": [] if dont_know else citations,
            "documents": replace(shown),
            "mode": mode,
            "refused": dont_know,
            **report,
            "trace": [entry],
        }

    return generate


def answer_report(out: Mapping[str, Any]) -> dict[str, Any]:
    """The answer chain's checks of its own citations, as state keys: ``invalid_citations`` (numbers that named
    no passage, removed from the text), ``unsupported_sentences`` (sentences no passage supports) and ``warning``
    (why an answer carries no citation) — empty / ``None`` when an answer chain does not report them."""
    warning = out.get("warning")
    return {
        "invalid_citations": [int(n) for n in out.get("invalid_citations") or []],
        "unsupported_sentences": [str(x) for x in out.get("unsupported_sentences") or []],
        "warning": str(warning) if warning else None,
    }


def refuse(state: Mapping[str, Any]) -> dict[str, Any]:
    """Node ``refuse``: the explicit "insufficient context" answer in the question's language, no citations, no
    documents."""
    question = state.get("original_query") or state.get("question") or ""
    reason = state.get("retry_reason") or "no_relevant_documents"
    return {
        "answer": insufficient_context(question),
        "citations": [],
        "documents": replace([]),
        "refused": True,
        "mode": "refusal",
        "retry_reason": reason,
        "invalid_citations": [],
        "unsupported_sentences": [],
        "warning": None,
        "trace": [{"step": "refuse", "reason": reason, "retries": state.get("retries", 0)}],
    }


def drop_filters(state: Mapping[str, Any]) -> dict[str, Any]:
    """Node ``drop_filters`` (CRAG's first correction): search again without the metadata filter."""
    return {
        "filters": None,
        "filters_dropped": True,
        "retries": int(state.get("retries", 0)) + 1,
        "trace": [{"step": "drop_filters", "attempt": int(state.get("retries", 0)) + 1}],
    }


def rewrite(
    question: str,
    tried: Sequence[str],
    *,
    llm: BaseChatModel | None = None,
    tokenizer: str | Tokenizer = "auto",
) -> tuple[str, str]:
    """A new search query for ``question`` and how it was made (``"llm"`` or ``"deterministic"``).

    With an ``llm``: its reply (cleaned by :func:`clean_query`) when it is non-empty, new, and shares a content
    token with the question; anything else — including an exception — falls back to
    :func:`rewrite_query_deterministic`.  The result may equal a tried query; the caller decides what that means.
    """
    tried_norm = {t.strip() for t in tried}
    if llm is not None:
        try:
            reply = llm.invoke(REWRITE_PROMPT.format_messages(question=question, tried=" | ".join(tried)))
            candidate = clean_query(reply)
            if candidate and candidate.strip() not in tried_norm and shares_tokens(candidate, question, tokenizer):
                return candidate, "llm"
        except Exception as e:  # noqa: BLE001 - documented fallback: deterministic rewrite
            logger.warning("query rewrite by the chat model failed (%s); using the deterministic rewrite", e)
    return rewrite_query_deterministic(question), "deterministic"


def make_rewrite_query(llm: BaseChatModel | None = None, *, tokenizer: str | Tokenizer = "auto") -> Node:
    """Node ``rewrite_query`` (counts as a retry): a new ``search_query`` (see :func:`rewrite`).  When the rewrite
    repeats a query already searched, ``retry_reason`` becomes ``"rewrite_exhausted"`` and the search query is
    left unchanged (the edge after this node then refuses)."""

    def rewrite_query(state: Mapping[str, Any]) -> dict[str, Any]:
        question = state.get("original_query") or state["question"]
        tried = list(state.get("tried_queries") or [question])
        attempt = int(state.get("retries", 0)) + 1
        new, how = rewrite(question, tried, llm=llm, tokenizer=tokenizer)
        exhausted = new.strip() in {t.strip() for t in tried}
        entry = {"step": "rewrite_query", "attempt": attempt, "query": new, "how": how, "exhausted": exhausted}
        update: dict[str, Any] = {"retries": attempt, "trace": [entry]}
        if exhausted:
            update["retry_reason"] = "rewrite_exhausted"
        else:
            update["search_query"] = new
            update["tried_queries"] = tried + [new]
            update["retry_reason"] = None
        return update

    return rewrite_query


def wants_no_retrieval(question: str, llm: BaseChatModel | None = None) -> tuple[bool, str]:
    """Whether ``question`` needs no retrieval, and who decided.

    Conservative: only a message :func:`is_small_talk` recognises can skip retrieval; with an ``llm``, the model
    must also say it is small talk (an unknown or failed reply keeps retrieval).  A message that looks like a
    question is always answered from documents.
    """
    if not is_small_talk(question):
        return False, "heuristic"
    if llm is None:
        return True, "heuristic"
    try:
        verdict = parse_binary(llm.invoke(SMALL_TALK_CHECK_PROMPT.format_messages(question=question)))
    except Exception:  # noqa: BLE001 - keep retrieval when the model fails
        verdict = "unknown"
    return verdict == "yes", "llm"


def make_respond_directly(llm: BaseChatModel | None = None) -> Node:
    """Node ``respond_directly``: a reply without retrieval (small talk) that says no documents were used.

    With an ``llm``: its reply to :data:`SMALL_TALK_PROMPT` (no documents in the prompt) plus the note; on failure or
    without an LLM: a fixed greeting in the question's language plus the note.
    """

    def respond_directly(state: Mapping[str, Any]) -> dict[str, Any]:
        question = state.get("original_query") or state["question"]
        lang = detect_language(question)
        text, mode = "", "direct"
        if llm is not None:
            try:
                reply = llm.invoke(SMALL_TALK_PROMPT.format_messages(question=question))
                content = reply.content if isinstance(reply.content, str) else str(reply.text)
                text = strip_think(content)
            except Exception as e:  # noqa: BLE001 - documented fallback: the fixed reply
                logger.warning("small-talk reply by the chat model failed (%s); using the fixed reply", e)
        if not text:
            text = SMALL_TALK_REPLY[lang]
        return {
            "answer": f"{text}\n{NO_RETRIEVAL_NOTE[lang]}",
            "citations": [],
            "documents": replace([]),
            "refused": False,
            "mode": mode,
            "trace": [{"step": "respond_directly", "retrieval": False}],
        }

    return respond_directly


def default_chain(
    llm: BaseChatModel | None, answer_chain: Runnable[Any, Any] | None, tokenizer: str | Tokenizer
) -> Runnable[Any, Any]:
    """``answer_chain``, else :func:`make_answer_chain` for ``llm`` that shows the passages as given (selection and
    ordering happen in :func:`make_generate`)."""
    if answer_chain is not None:
        return answer_chain
    return make_answer_chain(llm, max_docs=None, lost_in_the_middle=False, tokenizer=tokenizer)


def default_graders(graders: Graders | None, llm: BaseChatModel | None, tokenizer: str | Tokenizer) -> Graders:
    """``graders``, else :func:`make_graders` for ``llm``.

    Raises:
        TypeError: ``graders`` is not a :class:`Graders`.
    """
    if graders is None:
        return make_graders(llm, tokenizer=tokenizer)
    if not isinstance(graders, Graders):
        raise TypeError(f"graders must be a Graders bundle, got {graders!r}")
    return graders


def recursion_limit_for(max_steps: int) -> int:
    """The ``recursion_limit`` a builder configures: LangGraph's default (25), or ``max_steps + 1`` when the
    graph's worst case needs more (LangGraph stops *before* the superstep numbered ``recursion_limit``)."""
    return max(DEFAULT_RECURSION_LIMIT, max_steps + 1)


# -- edges ----------------------------------------------------------------------------------------------------------
def make_route_after_grading(max_retries: int, *, relax_filters: bool = True) -> Callable[[Mapping[str, Any]], str]:
    """Edge after ``grade_documents`` (CRAG's correction order): ``generate`` when a document is relevant; else
    ``refuse`` once ``retries`` reached ``max_retries``; else ``drop_filters`` when the search was filtered (and
    ``relax_filters``); else ``rewrite_query``."""

    def route_after_grading(state: Mapping[str, Any]) -> str:
        if state.get("documents"):
            return "generate"
        if int(state.get("retries", 0)) >= max_retries:
            return "refuse"
        if relax_filters and state.get("filters") and not state.get("filters_dropped"):
            return "drop_filters"
        return "rewrite_query"

    return route_after_grading


def route_after_rewrite(state: Mapping[str, Any]) -> str:
    """Edge after ``rewrite_query``: ``refuse`` when the rewrite repeated a tried query, else ``retrieve``."""
    return "refuse" if state.get("retry_reason") == "rewrite_exhausted" else "retrieve"
