"""Graph nodes and edges shared by the builders, as module-level functions.

A node is ``node(state, *, parts) -> partial update``; an edge is ``edge(state, *, parts) -> node name``.  The
builders bind the run-independent parts (retriever, graders, answer chain, chat model, prompts, compressors) with
``functools.partial(node, parts=parts)`` — one frozen :class:`GraphParts` per compiled graph — so every node is a
plain, typed, documented function that a test can call with a state dict.  Per-run settings (``k``,
``max_retries``, ``relax_filters``: :class:`~langchain_ragspine.graphs.state.RAGContext`) are read once by
:func:`prepare` and kept in state, so every loop is bounded by state (invariant 7).

Filters never widen unless the caller asks by name: a run's ``filters`` are ANDed with the retriever's own (the
retriever-call contract), and the corrective loop's ``drop_filters`` correction runs only on a graph built with
``relax_filters=True`` (default ``False``; a run may turn it off, never on).  When it runs, the result says so —
``filters_dropped``, ``dropped_filters``, the ``drop_filters`` trace entry naming the filters — and so does the chat
reply (:func:`reply`: ``response_metadata`` and a one-line note in the question's language).

The RESTRICTED gate runs before anything reads documents: the ``retrieve`` node drops RESTRICTED chunks the moment
the retriever returns them (so restricted text never enters graph state, checkpoints or streamed updates), the
``restricted_gate`` node then passes the state's documents through :class:`RestrictedGate` (covering documents
that entered state any other way, e.g. ``graph.update_state``), the optional ``compress`` node runs the builder's
``compressors`` and gates again after them, and the answer chain gates once more.

Model calls made for grading, rewriting, condensing and routing carry the ``nostream`` tag, so LangGraph's
``stream_mode="messages"`` streams the answer's tokens only.  ``stream_mode="custom"`` carries progress events
(:func:`progress`: ``{"event": "retrieved", "count": 3, …}``), which hold counts, verdicts and queries, never a
passage's text.

In chat mode a follow-up is condensed into a standalone search question first (:func:`prepare`, with
:mod:`~langchain_ragspine.graphs.conversation`); retrieval, grading and rewriting use it
(:func:`search_question`), the answer addresses the user's own words with the recent conversation in its prompt,
and the reply's ``AIMessage`` carries its citations (:func:`reply`).  Before any of it, :func:`prepare` checks the
earlier replies against what the retriever still serves (:func:`~langchain_ragspine.graphs.conversation.
check_conversation`; :func:`generate` checks again before the answer prompt): a reply made from a passage
relabelled RESTRICTED or retracted since leaves every prompt and is replaced in ``messages`` by a withdrawn note,
one the retriever cannot vouch for leaves every prompt (fail closed).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler, BaseCallbackManager
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, RemoveMessage
from langchain_core.outputs import ChatGeneration, LLMResult
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime

from langchain_ragspine import chat_models
from langchain_ragspine.arguments import DEFAULT_K, check_int, close_names, unknown_arguments_message
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
from langchain_ragspine.documents import chunk_key, doc_key
from langchain_ragspine.filters import compile_filter
from langchain_ragspine.graphs.conversation import (
    DEFAULT_HISTORY_TURNS,
    GRAPH_REPLY_KEY,
    chat_history,
    check_conversation,
    check_history_turns,
    condense_question,
)
from langchain_ragspine.graphs.graders import NOSTREAM_TAG, Graders, make_graders, parse_binary
from langchain_ragspine.graphs.prompts import (
    REWRITE_PROMPT,
    SMALL_TALK_CHECK_PROMPT,
    SMALL_TALK_PROMPT,
    GraphPrompts,
)
from langchain_ragspine.graphs.query_analysis import (
    clean_query,
    is_small_talk,
    rewrite_query_deterministic,
    shares_tokens,
)
from langchain_ragspine.graphs.state import (
    CorrectiveRAGState,
    RAGContext,
    RAGInput,
    RAGState,
    merge_documents,
    replace,
)
from langchain_ragspine.retrievers.contract import invoke_retriever, retriever_params
from langchain_ragspine.tokenizers import Tokenizer

try:  # the runnable LangGraph's own __start__ task uses (private: if a LangGraph release moves it, inputs go unchecked)
    from langgraph._internal._runnable import RunnableCallable
except ImportError:  # pragma: no cover - depends on the installed LangGraph
    RunnableCallable = None  # type: ignore[assignment,misc]

__all__ = [
    "FILTERS_DROPPED_NOTE",
    "REWRITE_PROMPT",
    "SMALL_TALK_CHECK_PROMPT",
    "SMALL_TALK_PROMPT",
    "GraphParts",
    "add_corrective_loop",
    "add_retrieval",
    "compile_graph",
    "compress",
    "drop_filters",
    "generate",
    "grade_documents",
    "make_parts",
    "new_graph",
    "prepare",
    "progress",
    "refuse",
    "respond_directly",
    "restricted_gate",
    "retrieve",
    "retriever_scores",
    "rewrite_query",
    "route_after_grading",
    "route_after_rewrite",
    "search_question",
]

logger = logging.getLogger(__name__)

#: LangGraph's default ``recursion_limit``; builders raise it when their worst case needs more.
DEFAULT_RECURSION_LIMIT = 25

#: The config of every model call that is not the answer (not streamed in ``stream_mode="messages"``).
NOSTREAM: RunnableConfig = {"tags": [NOSTREAM_TAG]}

_GATE = RestrictedGate()

#: The note a chat reply carries when the corrective loop dropped the filters (``relax_filters=True``).
FILTERS_DROPPED_NOTE: dict[str, str] = {
    "ja": "（指定されたフィルタに合う関連文書がなかったため、フィルタを外して検索しました。）",
    "zh": "（没有符合过滤条件的相关文档，因此已去掉过滤条件进行检索。）",
    "en": "(Nothing relevant matched the filters, so they were dropped for this search.)",
}

SMALL_TALK_REPLY: dict[str, str] = {
    "ja": "こんにちは。登録された文書についての質問にお答えします。",
    "zh": "你好！我可以回答关于已索引文档的问题。",
    "en": "Hello! I answer questions about the indexed documents.",
}


@dataclass(frozen=True)
class GraphParts:
    """What the nodes of one compiled graph share (built by :func:`make_parts`; never changes between runs).

    Attributes:
        retriever: the ``BaseRetriever`` searched.
        llm: the chat model, or ``None`` (the deterministic path).
        graders: the relevance / support / usefulness checks.
        chain: the answer chain (``{"question", "documents"} -> {"answer", "citations", …}``).
        k: results per retrieval (``None``: the retriever's own); a run may override it.
        max_retries: the retry ceiling of the compiled graph; a run may lower it.
        max_docs: passages given to the answer.  lost_in_the_middle: reorder them best-at-both-ends.
        tokenizer: for the deterministic rewrite and the lexical checks.
        prompts: the prompts of the model calls.
        compressors: ``BaseDocumentCompressor``s run after the RESTRICTED gate, before grading.
        relax_filters: whether the corrective loop may drop the metadata filter (default ``False``: filters scope
            access, so they are kept); a run may turn it off, never on.
        condense_question: whether a chat follow-up is condensed into a standalone search question and the answer
            prompt carries the recent conversation (default ``True``; ``False``: every message is searched and
            answered on its own, as before this existed).
        history_turns: the conversation window, in turns (default
            :data:`~langchain_ragspine.graphs.conversation.DEFAULT_HISTORY_TURNS`).
    """

    retriever: BaseRetriever
    llm: BaseChatModel | None
    graders: Graders
    chain: Runnable[Any, Any]
    k: int | None = None
    max_retries: int = 2
    max_docs: int | None = DEFAULT_K
    lost_in_the_middle: bool = False
    tokenizer: str | Tokenizer = "auto"
    prompts: GraphPrompts = field(default_factory=GraphPrompts)
    compressors: tuple[BaseDocumentCompressor, ...] = ()
    relax_filters: bool = False
    condense_question: bool = True
    history_turns: int = DEFAULT_HISTORY_TURNS


# -- parts ----------------------------------------------------------------------------------------------------------
def check_retriever(retriever: Any) -> BaseRetriever:
    """``retriever`` if it is a ``BaseRetriever``.

    Raises:
        TypeError: anything else.
    """
    if not isinstance(retriever, BaseRetriever):
        raise TypeError(f"retriever must be a langchain_core BaseRetriever, got {type(retriever).__name__}")
    return retriever


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
    without RESTRICTED chunks (the contract gates them before its cut to ``k``, so they take no place in ``kept``;
    ``raw`` adds them back, for the trace's count); callers must only ever store ``kept``.
    """
    info: dict[str, Any] = {"filter": None}
    if filters:
        info["filter"] = "retriever" if retriever_params(retriever).takes_filter else "post"
    gated: list[Document] = []
    kept = drop_restricted(invoke_retriever(retriever, query, k=k, filter=filters or None, config=config, gated=gated))
    return kept, [*kept, *gated], info


def check_relax_filters(relax_filters: Any) -> bool:
    """``relax_filters`` if it is a bool (a truthy string such as ``"false"`` must not widen a search).

    Raises:
        TypeError: anything else.
    """
    if not isinstance(relax_filters, bool):
        raise TypeError(f"relax_filters must be True or False, got {relax_filters!r}")
    return relax_filters


def check_condense_question(condense: Any) -> bool:
    """``condense_question`` if it is a bool.

    Raises:
        TypeError: anything else (a string such as ``"false"`` would be truthy).
    """
    if not isinstance(condense, bool):
        raise TypeError(f"condense_question must be True or False, got {condense!r}")
    return condense


def check_compressors(compressors: Sequence[BaseDocumentCompressor] | None) -> tuple[BaseDocumentCompressor, ...]:
    """``compressors`` as a tuple (``None`` → ``()``).

    Raises:
        TypeError: a single compressor instead of a sequence, or an item that is not a ``BaseDocumentCompressor``.
    """
    if compressors is None:
        return ()
    if isinstance(compressors, BaseDocumentCompressor) or not isinstance(compressors, Sequence):
        raise TypeError(f"compressors must be a sequence of BaseDocumentCompressor, got {compressors!r}"[:300])
    for c in compressors:
        if not isinstance(c, BaseDocumentCompressor):
            raise TypeError(f"compressors must be BaseDocumentCompressor objects, got {type(c).__name__}")
    return tuple(compressors)


def make_parts(
    retriever: BaseRetriever,
    llm: BaseChatModel | str | None,
    *,
    max_retries: int,
    graders: Graders | None,
    answer_chain: Runnable[Any, Any] | None,
    k: int | None,
    max_docs: int | None,
    lost_in_the_middle: bool,
    tokenizer: str | Tokenizer,
    prompts: GraphPrompts | None,
    compressors: Sequence[BaseDocumentCompressor] | None,
    relax_filters: bool = False,
    condense_question: bool = True,
    history_turns: int = DEFAULT_HISTORY_TURNS,
) -> GraphParts:
    """Check a builder's arguments and bundle them as :class:`GraphParts` (arguments as in the builders, which
    pass each one: their signatures hold the defaults; ``relax_filters`` (default ``False``) only matters to the
    corrective loop; ``condense_question`` (default ``True``) and ``history_turns`` (default 3) to chat input).

    ``llm``: a chat model, a :func:`~langchain_ragspine.chat_models.make_chat_model` spec, or ``None`` (no LLM: the
    environment is not consulted).

    Raises:
        TypeError / ValueError: a bad ``retriever``, ``llm``, ``graders``, ``max_retries``, ``k``, ``prompts``,
            ``compressors``, ``relax_filters`` (not a bool: ``"no"`` would widen), ``condense_question`` or
            ``history_turns``.
    """
    check_retriever(retriever)
    relax = check_relax_filters(relax_filters)
    condense = check_condense_question(condense_question)
    turns = check_history_turns(history_turns)
    retries = check_int(max_retries, "max_retries", minimum=0)
    if prompts is not None and not isinstance(prompts, GraphPrompts):
        raise TypeError(f"prompts must be a GraphPrompts, got {prompts!r}")
    p = prompts or GraphPrompts()
    model = None if llm is None else chat_models.make_chat_model(llm)  # None: no LLM (a builder never reads RAGSPINE_LLM)
    if graders is None:
        grade = make_graders(model, tokenizer=tokenizer, prompts=p)
    elif isinstance(graders, Graders):
        grade = graders
    else:
        raise TypeError(f"graders must be a Graders bundle, got {graders!r}")
    chain = answer_chain or make_answer_chain(model, k=None, lost_in_the_middle=False, tokenizer=tokenizer)
    return GraphParts(
        retriever=retriever, llm=model, graders=grade, chain=chain, k=check_int(k, "k", allow_none=True), max_retries=retries,
        max_docs=max_docs, lost_in_the_middle=lost_in_the_middle, tokenizer=tokenizer, prompts=p,
        compressors=check_compressors(compressors), relax_filters=relax, condense_question=condense,
        history_turns=turns,
    )


def run_settings(
    parts: GraphParts, runtime: Runtime[RAGContext] | None, config: RunnableConfig | None
) -> tuple[int | None, int, bool]:
    """This run's ``(k, max_retries, relax_filters)``: the run context (``context={...}``), else
    ``config["configurable"]``, else the builder's values.  The builder's ``max_retries`` and ``relax_filters`` are
    ceilings: a run may lower them, never raise them (so a served graph's user cannot widen a filter).

    Raises:
        ValueError: ``k < 1``, a negative ``max_retries``, or one above the builder's (the compiled ceiling);
            ``relax_filters=True`` on a graph built without it.
        TypeError: a ``k`` / ``max_retries`` that is not an int, a ``relax_filters`` that is not a bool.
    """
    context: Mapping[str, Any] = {}
    if runtime is not None and isinstance(runtime.context, Mapping):
        context = runtime.context
    configurable: Mapping[str, Any] = (config or {}).get("configurable") or {}

    def pick(key: str, default: Any) -> Any:
        if context.get(key) is not None:
            return context[key]
        if configurable.get(key) is not None:
            return configurable[key]
        return default

    k = check_int(pick("k", parts.k), "k", allow_none=True)
    retries = check_int(pick("max_retries", parts.max_retries), "max_retries", minimum=0)
    if retries > parts.max_retries:
        raise ValueError(
            f"max_retries={retries} for this run exceeds the graph's max_retries={parts.max_retries}; build the "
            "graph with a larger max_retries"
        )
    relax = check_relax_filters(pick("relax_filters", parts.relax_filters))
    if relax and not parts.relax_filters:
        raise ValueError(
            "relax_filters=True for this run, but this graph was built to keep its filters (relax_filters=False, the "
            "default; the self-RAG and simple graphs never drop them): a run cannot widen a filter; build the graph "
            "with relax_filters=True to allow it"
        )
    return k, retries, relax


def message_text(message: BaseMessage) -> str:
    """The text of a message (string content, or the text blocks of a content list)."""
    return message.content if isinstance(message.content, str) else str(message.text)


def question_of(state: Mapping[str, Any]) -> tuple[str, bool]:
    """The run's question and whether it came from ``messages``: ``question`` when it is a non-blank string, else
    the last human message of ``messages``.

    Raises:
        ValueError: neither gives a non-empty question.
    """
    question = state.get("question")
    if isinstance(question, str) and question.strip():
        return question, False
    humans = [m for m in state.get("messages") or [] if isinstance(m, BaseMessage) and m.type == "human"]
    if question is None and humans and message_text(humans[-1]).strip():
        return message_text(humans[-1]), True
    raise ValueError(
        f"the graph input needs a non-empty 'question' string or 'messages' ending in a human message, got "
        f"question={question!r}"
    )


class _AnswerMessageId(BaseCallbackHandler):
    """Records the id of the last chat-model message generated below the run it is attached to."""

    def __init__(self) -> None:
        self.id: str | None = None

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        gens = response.generations
        if gens and gens[0] and isinstance(gens[0][0], ChatGeneration):
            self.id = gens[0][0].message.id


def invoke_answering(
    runnable: Runnable[Any, Any], value: Any, state: Mapping[str, Any], config: RunnableConfig | None
) -> tuple[Any, str | None]:
    """``runnable.invoke(value)`` and, in chat mode, the id of the answer model's message (``None`` without a
    model call).  The chat reply then reuses that id, so ``stream_mode="messages"`` — which has already streamed
    that message's tokens — does not send the answer a second time."""
    if not state.get("chat"):
        return runnable.invoke(value), None
    handler = _AnswerMessageId()
    callbacks = (config or {}).get("callbacks")
    manager: Any
    if isinstance(callbacks, BaseCallbackManager):
        manager = callbacks.copy()
        manager.add_handler(handler, inherit=True)
    else:
        manager = [*(callbacks or []), handler]
    return runnable.invoke(value, {"callbacks": manager}), handler.id


def reply(
    state: Mapping[str, Any],
    answer: str,
    message_id: str | None = None,
    *,
    citations: Sequence[Mapping[str, Any]] = (),
    refused: bool = False,
    mode: str = "",
    retrieved: bool = True,
    passages: Sequence[Document] = (),
) -> dict[str, Any]:
    """The ``messages`` update of a node that sets the answer: in chat mode, the answer as a new ``AIMessage``
    (id ``message_id`` — the answer model's — else a fresh one) that replaces this run's earlier reply, if any
    (``RemoveMessage``; Self-RAG may answer more than once in a run), and the new ``reply_id``; otherwise
    nothing.

    The message carries what a chat app needs to render it, in ``response_metadata``:

    * ``"citations"``: the answer's citations, ``[{"n", "chunk_id", "doc_id", "title", "source_locator",
      "attributed"}]`` — ``n`` is the ``[n]`` marker in the text (``[]`` for a refusal or a reply without
      retrieval).  Built from passages that passed the RESTRICTED gate; no passage text.
    * ``"ragspine"``: ``{"search_query": what was searched last (``None`` without retrieval), "refused": bool,
      "mode": str, "passages": [the chunk id of every passage the answer was given, cited or not; None for one
      without an id]}`` — also the mark of a graph's own reply, the only AI messages a later turn reads
      (:func:`~langchain_ragspine.graphs.conversation.is_graph_reply`), and what a later turn checks against the
      retriever before the reply goes into a prompt (:func:`~langchain_ragspine.graphs.conversation.
      check_conversation`).

    When this run dropped its filters (``filters_dropped``), the message says so as well:
    ``response_metadata["filters_dropped"] = True``, ``["dropped_filters"] = {...}`` and
    :data:`FILTERS_DROPPED_NOTE` (in the question's language) on a line after the answer; the ``answer`` key
    itself stays the cited answer."""
    if not state.get("chat"):
        return {}
    new_id = message_id or str(uuid.uuid4())
    previous = state.get("reply_id")
    messages: list[BaseMessage] = [RemoveMessage(id=previous)] if previous and previous != new_id else []
    search = (state.get("search_query") or state.get("original_query")) if retrieved else None
    metadata: dict[str, Any] = {
        "citations": [dict(c) for c in citations],
        GRAPH_REPLY_KEY: {
            "search_query": search, "refused": refused, "mode": mode, "passages": [chunk_key(d) for d in passages],
        },
    }
    content = answer
    if state.get("filters_dropped"):
        note = FILTERS_DROPPED_NOTE[detect_language(str(state.get("original_query") or answer))]
        metadata.update({"filters_dropped": True, "dropped_filters": state.get("dropped_filters")})
        content = f"{answer}\n{note}"
    messages.append(AIMessage(content=content, id=new_id, response_metadata=metadata))
    return {"messages": messages, "reply_id": new_id}


def progress(event: str, **fields: Any) -> None:
    """Emit ``{"event": event, **fields}`` on LangGraph's ``stream_mode="custom"`` (its ``get_stream_writer``);
    nothing outside a graph run (a node called directly) or when the run does not stream ``"custom"``.

    Events of the graphs (fields never hold a passage's text): ``condensed`` (``query``, ``how``), ``routed``
    (``route``), ``retrieved`` (``count``, ``query``; ``index`` for a sub-question), ``graded`` (``graded``,
    ``relevant``), ``dropping_filters`` (``attempt``), ``rewriting`` (``attempt``, ``query``), ``answering``
    (``passages``), ``answered`` (``cited``, ``mode``), ``checked`` (``check``: ``"support"`` /
    ``"usefulness"``, ``verdict``), ``refused`` (``reason``)."""
    try:
        writer = get_stream_writer()
    except (RuntimeError, KeyError):  # not inside a graph run
        return
    writer({"event": event, **fields})


def search_question(state: Mapping[str, Any]) -> str:
    """The question a run searches, grades and rewrites: the condensed ``standalone_question`` of a chat
    follow-up, else ``original_query`` (the user's own words, which the answer always addresses)."""
    return str(state.get("standalone_question") or state.get("original_query") or "")


# -- nodes ----------------------------------------------------------------------------------------------------------
def prepare(
    state: RAGState,
    runtime: Runtime[RAGContext],
    config: RunnableConfig,
    *,
    parts: GraphParts,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The first node: check the input, read this run's settings, and reset every per-run key (``extra`` adds
    graph-specific resets).  It consumes ``question`` and ``filters`` (sets them to ``None``): they apply to this
    run only; the run's filter lives on in ``search_filters``.

    Raises (when the node runs):
        ValueError: no question (``question`` missing or blank and no human message); a malformed ``filters``; a
            bad per-run ``k`` / ``max_retries`` / ``relax_filters`` (see :func:`run_settings`).
    """
    question, chat = question_of(state)
    filters = state.get("filters") or None
    if filters is not None and not isinstance(filters, Mapping):
        raise ValueError(f"'filters' must be a dict or None, got {filters!r}")
    compile_filter(filters)
    k, retries, relax = run_settings(parts, runtime, config)
    search = question
    condensed: dict[str, Any] = {}
    trace: list[dict[str, Any]] = [{"step": "prepare", "filters": bool(filters)}]
    # earlier replies made from a passage withdrawn since (relabelled RESTRICTED, retracted) leave the state and
    # every prompt; ones the retriever cannot vouch for leave every prompt (conversation.check_conversation)
    checked = check_conversation(state.get("messages") or [], parts.retriever)
    if checked.withdrawn or checked.unverified:
        trace.append({"step": "check_history", "withdrawn": len(checked.withdrawn), "unverified": checked.unverified})
    withdrawn = {"messages": checked.withdrawn} if checked.withdrawn else {}
    if parts.condense_question:
        history = chat_history(checked.kept, turns=parts.history_turns) if chat else []
        if history:
            found = condense_question(
                question, history, llm=parts.llm, prompts=parts.prompts, tokenizer=parts.tokenizer
            )
            search = found.question
            entry: dict[str, Any] = {
                "step": "condense_question", "how": found.how, "query": search,
                "turns": sum(m.type == "human" for m in history),
            }
            if found.llm_failed:
                entry["llm_failed"] = True
            trace.append(entry)
            progress("condensed", query=search, how=found.how)
        condensed = {"standalone_question": search}
    return {
        "question": None,
        "filters": None,
        "search_filters": dict(filters) if filters else None,
        "chat": chat,
        "reply_id": None,
        "k": k,
        "max_retries": retries,
        "relax_filters": relax,
        "original_query": question,
        **condensed,
        "search_query": search,
        "documents": replace([]),
        "answer": "",
        "citations": [],
        "invalid_citations": [],
        "unsupported_sentences": [],
        "warning": None,
        "refused": False,
        "retries": 0,
        "retry_reason": None,
        "tried_queries": [search],
        "mode": "",
        "filters_dropped": False,
        "dropped_filters": None,
        "trace": replace(trace),
        **withdrawn,
        **(extra or {}),
    }


def retrieve(state: RAGState, *, parts: GraphParts) -> dict[str, Any]:
    """Node ``retrieve``: search ``search_query`` with ``search_filters`` for ``k`` results; RESTRICTED chunks are
    dropped on arrival."""
    query = state.get("search_query") or state.get("original_query") or ""
    kept, raw, info = run_retrieval(parts.retriever, query, filters=state.get("search_filters"), k=state.get("k", parts.k))
    entry: dict[str, Any] = {"step": "retrieve", "query": query, "retrieved": len(kept)}
    if info["filter"]:
        entry["filter"] = info["filter"]
    if len(raw) != len(kept):
        entry["restricted_dropped"] = len(raw) - len(kept)
    progress("retrieved", count=len(kept), query=query)
    return {"documents": replace(kept), "trace": [entry]}


def restricted_gate(state: RAGState) -> dict[str, Any]:
    """Node ``restricted_gate``: :class:`RestrictedGate` as a compressor over the state's documents."""
    docs = list(state.get("documents") or [])
    kept = list(_GATE.compress_documents(docs, state.get("search_query") or ""))
    return {
        "documents": replace(kept),
        "trace": [{"step": "restricted_gate", "kept": len(kept), "dropped": len(docs) - len(kept)}],
    }


def run_compressors(
    compressors: Sequence[BaseDocumentCompressor], documents: Sequence[Document], query: str
) -> tuple[list[Document], list[dict[str, Any]], int]:
    """``documents`` through each compressor in turn, then through the RESTRICTED gate again (a compressor must
    never re-introduce RESTRICTED content): ``(kept, steps, restricted_dropped)`` — ``steps`` holds one
    ``{"compressor": class name, "in": n, "out": m}`` per compressor."""
    docs = drop_restricted(documents)
    steps: list[dict[str, Any]] = []
    for compressor in compressors:
        out = list(compressor.compress_documents(docs, query))
        steps.append({"compressor": type(compressor).__name__, "in": len(docs), "out": len(out)})
        docs = out
    kept = drop_restricted(docs)
    return kept, steps, len(docs) - len(kept)


def compress(state: RAGState, *, parts: GraphParts) -> dict[str, Any]:
    """Node ``compress`` (only when the builder got ``compressors``): the builder's ``BaseDocumentCompressor``s
    (rerankers, MMR, reordering, …) over the gated documents, against :func:`search_question`, then the RESTRICTED
    gate again.  The trace entry lists each compressor with its input and output counts."""
    query = search_question(state) or state.get("search_query") or ""
    kept, steps, dropped = run_compressors(parts.compressors, list(state.get("documents") or []), query)
    entry: dict[str, Any] = {"step": "compress", "compressors": steps, "kept": len(kept)}
    if dropped:
        entry["restricted_dropped"] = dropped
    return {"documents": replace(kept), "trace": [entry]}


def grade_documents(state: RAGState, *, parts: GraphParts) -> dict[str, Any]:
    """Node ``grade_documents``: keep the documents graded relevant to :func:`search_question` (the question, or a
    chat follow-up's standalone question; ``"unknown"`` counts as not relevant; with an LLM all of them are graded
    in one call, see :meth:`Graders.relevant_many`); sets ``retry_reason="no_relevant_documents"`` when none is."""
    question = search_question(state)
    docs = drop_restricted(state.get("documents") or [])
    verdicts = parts.graders.relevant_many(question, docs)
    relevant = [d for d, v in zip(docs, verdicts, strict=True) if v == "yes"]
    entry = {
        "step": "grade_documents",
        "graded": len(docs),
        "relevant": len(relevant),
        "unknown": sum(v == "unknown" for v in verdicts),
        "kept": [doc_key(d) for d in relevant],
    }
    progress("graded", graded=len(docs), relevant=len(relevant))
    return {
        "documents": replace(relevant),
        "trace": [entry],
        "retry_reason": None if relevant else "no_relevant_documents",
    }


def generate(state: RAGState, config: RunnableConfig, *, parts: GraphParts) -> dict[str, Any]:
    """Node ``generate``: answer ``original_query`` from the state's documents with the answer chain.

    The passages shown are chosen here (:func:`prepare_context`: gate, ``max_docs``, optional lost-in-the-middle
    order) and written back as ``documents``, so ``citations[i]["n"]`` indexes the final ``documents``.  The answer
    model's tokens are what ``stream_mode="messages"`` streams.  In chat mode with ``condense_question`` on, the
    chain also gets ``chat_history`` (the conversation window,
    :func:`~langchain_ragspine.graphs.conversation.chat_history`, when there is one) and ``standalone_question``
    (when the follow-up was condensed into another text: what the extractive answer looks for).
    """
    question = state.get("original_query") or ""
    docs = merge_documents([], list(state.get("documents") or []))  # one passage per chunk_id
    shown = prepare_context(docs, k=parts.max_docs, lost_in_the_middle=parts.lost_in_the_middle)
    inputs: dict[str, Any] = {"question": question, "documents": shown}
    if parts.condense_question and state.get("chat"):
        # checked again here: the store may have changed since prepare (every prompt gets a checked history)
        history = chat_history(check_conversation(state.get("messages") or [], parts.retriever).kept,
                               turns=parts.history_turns)
        if history:
            inputs["chat_history"] = history
        if search_question(state) != question:
            inputs["standalone_question"] = search_question(state)
    progress("answering", passages=len(shown))
    out, message_id = invoke_answering(parts.chain, inputs, state, config)
    citations = [c for c in out.get("citations") or [] if 1 <= int(c.get("n", 0)) <= len(shown)]
    mode = str(out.get("mode") or "llm")
    answer = str(out.get("answer") or "")
    dont_know = is_dont_know(answer)  # the chain found no support: a refusal, not an answer
    report = answer_report(out)
    entry: dict[str, Any] = {"step": "generate", "mode": mode, "passages": len(shown), "cited": [c["n"] for c in citations]}
    if dont_know:
        entry["dont_know"] = True
    if any(c.get("attributed") for c in citations):
        entry["attributed"] = True
    entry.update({k: len(v) for k, v in report.items() if isinstance(v, list) and v})
    if report["warning"]:
        entry["warning"] = report["warning"]
    cited = [] if dont_know else citations
    progress("answered", cited=[c["n"] for c in cited], mode=mode)
    return {
        "answer": answer,
        "citations": cited,
        "documents": replace(shown),
        "mode": mode,
        "refused": dont_know,
        **report,
        **reply(state, answer, message_id, citations=cited, refused=dont_know, mode=mode, passages=shown),
        "trace": [entry],
    }


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


def answer_without_documents(
    state: Mapping[str, Any],
    answer: str,
    *,
    refused: bool,
    mode: str,
    extra: Mapping[str, Any] | None = None,
    message_id: str | None = None,
) -> dict[str, Any]:
    """The update of a node that ends a run with ``answer`` and no passages (``refuse``, ``respond_directly``):
    ``answer``, empty ``citations`` and ``documents``, ``refused``, ``mode``, then ``extra`` and the chat reply
    (:func:`reply`), in that key order; the caller adds its ``trace`` entry."""
    return {
        "answer": answer,
        "citations": [],
        "documents": replace([]),
        "refused": refused,
        "mode": mode,
        **(extra or {}),
        **reply(state, answer, message_id, refused=refused, mode=mode, retrieved=mode != "direct"),
    }


def refuse(state: RAGState) -> dict[str, Any]:
    """Node ``refuse``: the explicit "insufficient context" answer in the question's language, no citations, no
    documents."""
    question = state.get("original_query") or state.get("question") or ""
    reason = state.get("retry_reason") or "no_relevant_documents"
    answer = insufficient_context(question)
    checks: dict[str, Any] = {
        "retry_reason": reason, "invalid_citations": [], "unsupported_sentences": [], "warning": None,
    }
    progress("refused", reason=reason)
    return {
        **answer_without_documents(state, answer, refused=True, mode="refusal", extra=checks),
        "trace": [{"step": "refuse", "reason": reason, "retries": state.get("retries", 0)}],
    }


def drop_filters(state: RAGState) -> dict[str, Any]:
    """Node ``drop_filters`` (CRAG's first correction, only on a graph built with ``relax_filters=True``): search
    again without the run's metadata filter, and report it — ``filters_dropped``, ``dropped_filters`` (the filter
    dropped) and the trace entry ``{"step": "drop_filters", "attempt", "filters"}``."""
    attempt = int(state.get("retries", 0)) + 1
    dropped = dict(state.get("search_filters") or {}) or None
    progress("dropping_filters", attempt=attempt)
    return {
        "search_filters": None,
        "filters_dropped": True,
        "dropped_filters": dropped,
        "retries": attempt,
        "trace": [{"step": "drop_filters", "attempt": attempt, "filters": dropped}],
    }


def rewrite(
    question: str,
    tried: Sequence[str],
    *,
    llm: BaseChatModel | None = None,
    tokenizer: str | Tokenizer = "auto",
    prompts: GraphPrompts | None = None,
    scorable: Callable[[str], bool] | None = None,
) -> tuple[str, str]:
    """A new search query for ``question`` and how it was made (``"llm"`` or ``"deterministic"``).

    With an ``llm``: its reply to ``prompts.rewrite`` (cleaned by :func:`clean_query`) when it is non-empty, new,
    and either shares a content term with the question or — a rewrite into the corpus's own words or language
    ("When does the rainy season start?" → "梅雨入り 時期") — is one the retriever can score: ``scorable(query)``
    is true (the graphs pass :func:`retriever_scores`: the search finds at least one passage).  Anything else —
    including an exception — falls back to :func:`rewrite_query_deterministic`.  The result may equal a tried
    query; the caller decides what that means.
    """
    tried_norm = {t.strip() for t in tried}
    if llm is not None:
        prompt = (prompts or GraphPrompts()).rewrite
        try:
            answer = llm.invoke(prompt.format_messages(question=question, tried=" | ".join(tried)), NOSTREAM)
            candidate = clean_query(answer)
            if candidate and candidate.strip() not in tried_norm and (
                shares_tokens(candidate, question, tokenizer) or (scorable is not None and scorable(candidate))
            ):
                return candidate, "llm"
        except Exception as e:  # noqa: BLE001 - documented fallback: deterministic rewrite
            logger.warning("query rewrite by the chat model failed (%s); using the deterministic rewrite", e)
    return rewrite_query_deterministic(question), "deterministic"


def retriever_scores(state: Mapping[str, Any], parts: GraphParts) -> Callable[[str], bool]:
    """The ``scorable`` check of :func:`rewrite` for this run: whether a search of the query — the run's retriever,
    ``search_filters`` and ``k``, RESTRICTED chunks dropped — returns at least one passage (BM25 returns only
    passages that hold a query term, so a rewrite in words the index does not know finds none; a dense retriever
    scores any text).  The passages are only counted, never kept."""

    def scorable(query: str) -> bool:
        kept, _raw, _info = run_retrieval(
            parts.retriever, query, filters=state.get("search_filters"), k=state.get("k", parts.k)
        )
        return bool(kept)

    return scorable


def rewrite_query(state: RAGState, *, parts: GraphParts) -> dict[str, Any]:
    """Node ``rewrite_query`` (counts as a retry): a new ``search_query`` for :func:`search_question` (see
    :func:`rewrite`; a model's rewrite that shares no word with the question is kept when the retriever can
    score it, :func:`retriever_scores`).  When the rewrite repeats a query already searched, ``retry_reason``
    becomes ``"rewrite_exhausted"`` and the search query is left unchanged (the edge after this node then
    refuses)."""
    question = search_question(state)
    tried = list(state.get("tried_queries") or [question])
    attempt = int(state.get("retries", 0)) + 1
    new, how = rewrite(
        question, tried, llm=parts.llm, tokenizer=parts.tokenizer, prompts=parts.prompts,
        scorable=retriever_scores(state, parts),
    )
    exhausted = new.strip() in {t.strip() for t in tried}
    if not exhausted:
        progress("rewriting", attempt=attempt, query=new)
    entry = {"step": "rewrite_query", "attempt": attempt, "query": new, "how": how, "exhausted": exhausted}
    update: dict[str, Any] = {"retries": attempt, "trace": [entry]}
    if exhausted:
        update["retry_reason"] = "rewrite_exhausted"
    else:
        update["search_query"] = new
        update["tried_queries"] = tried + [new]
        update["retry_reason"] = None
    return update


def wants_no_retrieval(
    question: str, llm: BaseChatModel | None = None, prompts: GraphPrompts | None = None
) -> tuple[bool, str]:
    """Whether ``question`` needs no retrieval, and who decided.

    Conservative: only a message :func:`is_small_talk` recognises can skip retrieval; with an ``llm``, the model
    must also say it is small talk (an unknown or failed reply keeps retrieval).  A message that looks like a
    question is always answered from documents.
    """
    if not is_small_talk(question):
        return False, "heuristic"
    if llm is None:
        return True, "heuristic"
    prompt = (prompts or GraphPrompts()).small_talk_check
    try:
        verdict = parse_binary(llm.invoke(prompt.format_messages(question=question), NOSTREAM))
    except Exception:  # noqa: BLE001 - keep retrieval when the model fails
        verdict = "unknown"
    return verdict == "yes", "llm"


def respond_directly(state: RAGState, config: RunnableConfig, *, parts: GraphParts) -> dict[str, Any]:
    """Node ``respond_directly``: a reply without retrieval (small talk) that says no documents were used.

    With an LLM: its reply to ``prompts.small_talk`` (no documents in the prompt; streamed like an answer) plus the
    note; on failure or without an LLM: a fixed greeting in the question's language plus the note.
    """
    question = state.get("original_query") or ""
    lang = detect_language(question)
    text, message_id = "", None
    if parts.llm is not None:
        try:
            prompt = parts.prompts.small_talk.format_messages(question=question)
            answer, message_id = invoke_answering(parts.llm, prompt, state, config)
            text = strip_think(message_text(answer))
        except Exception as e:  # noqa: BLE001 - documented fallback: the fixed reply
            logger.warning("small-talk reply by the chat model failed (%s); using the fixed reply", e)
    if not text:
        text = SMALL_TALK_REPLY[lang]
    answer_text = f"{text}\n{NO_RETRIEVAL_NOTE[lang]}"
    return {
        **answer_without_documents(state, answer_text, refused=False, mode="direct", message_id=message_id),
        "trace": [{"step": "respond_directly", "retrieval": False}],
    }


def recursion_limit_for(max_steps: int) -> int:
    """The ``recursion_limit`` a builder configures: LangGraph's default (25), or ``max_steps + 1`` when the
    graph's worst case needs more (LangGraph stops *before* the superstep numbered ``recursion_limit``)."""
    return max(DEFAULT_RECURSION_LIMIT, max_steps + 1)


def new_graph(state_schema: type[Any], output_schema: type[Any]) -> StateGraph[Any, Any, Any, Any]:
    """An empty ``StateGraph`` over ``state_schema`` with the schemas every builder shares: the run context
    :class:`~langchain_ragspine.graphs.state.RAGContext` (per-run ``k`` / ``max_retries``), the input
    :class:`~langchain_ragspine.graphs.state.RAGInput`, and ``output_schema`` (so internal keys stay internal)."""
    return StateGraph(state_schema, context_schema=RAGContext, input_schema=RAGInput, output_schema=output_schema)


#: The keys a graph input may have (:class:`~langchain_ragspine.graphs.state.RAGInput`).
INPUT_KEYS: frozenset[str] = RAGInput.__required_keys__ | RAGInput.__optional_keys__


def check_input(value: Any, config: RunnableConfig, *, graph: str) -> Any:
    """Check a graph's input before LangGraph maps it onto the state (which silently drops every key the input
    schema does not name, so ``{"question": q, "filter": {...}}`` would run with no filter at all); returns
    ``value`` unchanged.

    A run called directly refuses any key outside :data:`INPUT_KEYS`.  A run inside a parent graph (as its node, or
    from one of its nodes) receives the parent's whole state, so there only a key that looks like a misspelt input
    key (``filter``, ``questions``; :func:`~langchain_ragspine.arguments.close_names`) is refused and the parent's
    other keys are ignored, as LangGraph does.  Inputs that are not a mapping (a ``Command``) pass.

    Raises:
        ValueError: an unknown key, with a did-you-mean; both a ``question`` and non-empty ``messages`` (which one
            is the question would be a guess).
    """
    if not isinstance(value, Mapping):
        return value
    nested = "|" in str((config.get("configurable") or {}).get("checkpoint_ns") or "")  # a task of a parent graph
    unknown = [k for k in value if k not in INPUT_KEYS and (not nested or close_names(str(k), INPUT_KEYS))]
    if unknown:
        raise ValueError(unknown_arguments_message(graph, [str(k) for k in unknown], INPUT_KEYS, what="input key"))
    if value.get("question") is not None and value.get("messages"):
        raise ValueError(
            f"{graph} got both 'question' and 'messages': pass {{'question': ...}} or {{'messages': [...]}} (the last "
            "human message is the question), not both"
        )
    return value


def compile_graph(
    builder: StateGraph[Any, Any, Any, Any], *, name: str, max_steps: int, checkpointer: Any = None
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """Compile ``builder`` as graph ``name`` with ``checkpointer``, configured with the ``recursion_limit`` its
    worst case of ``max_steps`` supersteps needs (:func:`recursion_limit_for`), so the loop bound in state is
    what stops a run, never LangGraph's limit.  Its input is checked by :func:`check_input` (in LangGraph's
    ``__start__`` task, so ``invoke``, ``stream``, their async forms, subgraph use and ``langgraph dev`` all pass
    through it)."""
    graph = builder.compile(checkpointer=checkpointer, name=name)
    if RunnableCallable is not None:
        start = graph.nodes[START]
        check = RunnableCallable(partial(check_input, graph=name), name=START, trace=False)
        graph.nodes[START] = start.copy({"bound": check})
    return graph.with_config(recursion_limit=recursion_limit_for(max_steps))


# -- edges ----------------------------------------------------------------------------------------------------------
def route_after_grading(state: CorrectiveRAGState, *, parts: GraphParts) -> str:
    """Edge after ``grade_documents`` (CRAG's correction order): ``generate`` when a document is relevant; else
    ``refuse`` once ``retries`` reached the run's ``max_retries``; else ``drop_filters`` when the search was
    filtered and the run may relax filters (the builder's ``relax_filters=True``, not turned off for the run);
    else ``rewrite_query``."""
    if state.get("documents"):
        return "generate"
    if int(state.get("retries", 0)) >= int(state.get("max_retries", parts.max_retries)):
        return "refuse"
    relax = parts.relax_filters and state.get("relax_filters", False) is True
    if relax and state.get("search_filters") and not state.get("filters_dropped"):
        return "drop_filters"
    return "rewrite_query"


def route_after_rewrite(state: RAGState) -> str:
    """Edge after ``rewrite_query``: ``refuse`` when the rewrite repeated a tried query, else ``retrieve``."""
    return "refuse" if state.get("retry_reason") == "rewrite_exhausted" else "retrieve"


def add_retrieval(builder: Any, parts: GraphParts, *, then: str = "grade_documents") -> None:
    """Add ``retrieve → restricted_gate [→ compress] → then`` to ``builder`` (``compress`` only when the parts have
    compressors, so a graph without them is unchanged)."""
    builder.add_node("retrieve", partial(retrieve, parts=parts))
    builder.add_node("restricted_gate", restricted_gate)
    builder.add_edge("retrieve", "restricted_gate")
    if parts.compressors:
        builder.add_node("compress", partial(compress, parts=parts))
        builder.add_edge("restricted_gate", "compress")
        builder.add_edge("compress", then)
    else:
        builder.add_edge("restricted_gate", then)


def add_corrective_loop(builder: Any, parts: GraphParts, route: Any) -> None:
    """Add CRAG's grade-and-correct loop to ``builder``: ``grade_documents``, then — by ``route`` (an edge function
    returning one of them) — ``generate``, ``drop_filters`` or ``rewrite_query`` (both back to ``retrieve``; a
    rewrite that repeats a tried query goes to ``refuse``) or ``refuse``.  ``generate`` and ``refuse`` end the
    graph.  Used by the corrective and the adaptive graph."""
    builder.add_node("grade_documents", partial(grade_documents, parts=parts))
    builder.add_node("drop_filters", drop_filters)
    builder.add_node("rewrite_query", partial(rewrite_query, parts=parts))
    builder.add_node("generate", partial(generate, parts=parts))
    builder.add_node("refuse", refuse)
    builder.add_conditional_edges("grade_documents", route, ["generate", "drop_filters", "rewrite_query", "refuse"])
    builder.add_edge("drop_filters", "retrieve")
    builder.add_conditional_edges("rewrite_query", route_after_rewrite, ["retrieve", "refuse"])
    builder.add_edge("generate", END)
    builder.add_edge("refuse", END)

