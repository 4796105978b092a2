"""Typed graph state and its reducers, shared by every graph builder of :mod:`langchain_ragspine.graphs`.

LangGraph merges the partial updates nodes return into one state (Pregel-style supersteps; LangGraph's
``StateGraph``).  Keys written by parallel branches (the sub-questions of the adaptive graph run as ``Send``
branches) need a reducer; here:

* ``documents`` — :func:`merge_documents`: a list update is *merged* into the current list and de-duplicated by
  ``chunk_id`` (else ``Document.id``; a document with neither is kept as is — never keyed by text, see invariant 5
  of ``docs/architecture.md``); ``{"replace": [...]}`` *replaces* the list (a retry that retrieves again, the
  grader keeping only relevant chunks, a refusal clearing it).  The replace form is a plain dict so that it
  serialises in checkpoints like any other write.
* ``trace`` — :func:`append_trace`: lists are appended (``operator.add``), ``{"replace": [...]}`` starts over (every
  run's first node does this, so a checkpointed thread reports the trace of its latest run).
* ``sub_answers`` — :func:`merge_sub_answers`: merged and de-duplicated by ``index``, kept sorted by it.

Every other key is last-value-wins.  Every loop of a graph is bounded by a counter in this state (``retries``
against the builder's ``max_retries``), invariant 7.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Annotated, Any, NotRequired

from langchain_core.documents import Document
from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict

from langchain_ragspine.chains.answer import Citation
from langchain_ragspine.documents import dedupe, doc_key

__all__ = [
    "AdaptiveRAGOutput",
    "AdaptiveRAGState",
    "CorrectiveRAGOutput",
    "CorrectiveRAGState",
    "RAGContext",
    "RAGInput",
    "RAGOutput",
    "RAGState",
    "SelfRAGOutput",
    "SelfRAGState",
    "SubAnswer",
    "append_trace",
    "merge_documents",
    "merge_sub_answers",
    "replace",
]


def replace(items: Sequence[Any]) -> dict[str, list[Any]]:
    """The update that replaces a list channel (``documents``, ``trace``) instead of merging into it."""
    return {"replace": list(items)}


def _is_replace(value: Any) -> bool:
    return isinstance(value, Mapping) and set(value) == {"replace"}


def merge_documents(left: list[Document] | None, right: Any) -> list[Document]:
    """Reducer of ``documents``: merge a list (or one ``Document``) de-duplicated by ``chunk_id`` — the first
    occurrence wins and order is kept — or replace with ``{"replace": [...]}``.  ``None`` leaves it unchanged.

    Raises:
        TypeError: an update that is neither a ``Document``, a list of them, ``None`` nor ``{"replace": list}``.
    """
    current = list(left or [])
    if right is None:
        return current
    if _is_replace(right):
        new = right["replace"] or []
        if not all(isinstance(d, Document) for d in new):
            raise TypeError("documents must be langchain_core.documents.Document objects")
        return dedupe(new)
    if isinstance(right, Document):
        right = [right]
    if not isinstance(right, Sequence) or isinstance(right, (str, bytes)) or not all(
        isinstance(d, Document) for d in right
    ):
        raise TypeError(f"a documents update must be a list of Document or {{'replace': [...]}}, got {right!r}"[:300])
    seen = {k for k in (doc_key(d) for d in current) if k is not None}
    return current + [d for d in dedupe(right) if doc_key(d) not in seen]


def append_trace(left: list[dict[str, Any]] | None, right: Any) -> list[dict[str, Any]]:
    """Reducer of ``trace``: append a list of entries (``operator.add``), or start over with ``{"replace": [...]}``."""
    if right is None:
        return list(left or [])
    if _is_replace(right):
        return list(right["replace"] or [])
    if isinstance(right, Mapping):
        return list(left or []) + [dict(right)]
    return list(left or []) + list(right)


class SubAnswer(TypedDict):
    """The answer to one sub-question of the adaptive graph (written by a parallel branch)."""

    index: int
    question: str
    answer: str
    citations: list[Citation]
    documents: list[Document]
    refused: bool
    unsupported_sentences: NotRequired[list[str]]
    warning: NotRequired[str | None]


def merge_sub_answers(left: list[SubAnswer] | None, right: Any) -> list[SubAnswer]:
    """Reducer of ``sub_answers``: merge by ``index`` (a later write for the same index wins), sorted by index;
    ``{"replace": [...]}`` replaces."""
    if right is None:
        return list(left or [])
    if _is_replace(right):
        items = list(right["replace"] or [])
        by_index = {}
    else:
        items = [right] if isinstance(right, Mapping) else list(right)
        by_index = {a["index"]: a for a in (left or [])}
    for item in items:
        by_index[item["index"]] = item
    return [by_index[i] for i in sorted(by_index)]


class RAGInput(TypedDict, total=False):
    """What every graph takes: ``{"question": str, "filters": dict | None}`` (``filters`` in the syntax of
    :mod:`langchain_ragspine.filters`), or a chat state ``{"messages": [...]}`` whose last human message is the
    question (then the answer is appended to ``messages`` as an ``AIMessage``).  Any other key is a ``ValueError``
    naming the closest known one (``filter``: did you mean ``filters``?), and so is a ``question`` with non-empty
    ``messages`` (:func:`~langchain_ragspine.graphs.nodes.check_input`; as a subgraph, only a key close to one of
    these three is refused).  Both ``question`` and ``filters`` apply to the run that passed them only: on a
    checkpointed thread a later run without ``filters`` has none."""

    question: str
    messages: Annotated[list[AnyMessage], add_messages]
    filters: dict[str, Any] | None


class RAGContext(TypedDict, total=False):
    """Per-run settings (LangGraph's run context — ``graph.invoke(inputs, context={"k": 3})`` — or, as older
    LangGraph and ``langgraph dev`` pass them, ``config={"configurable": {"k": 3}}``).

    Attributes:
        k: results per retrieval for this run (default: the builder's ``k``).  An ``int >= 1``.
        max_retries: corrections / retries allowed for this run, ``0 <= max_retries <=`` the builder's
            ``max_retries`` (the builder's value is the ceiling, so the compiled bound still holds).
        relax_filters: ``False`` keeps the filters for this run on a graph built with ``relax_filters=True``;
            ``True`` on a graph built without it is a ``ValueError``: the builder's value is the ceiling, so whoever
            calls a graph (a served one included) cannot widen its filters.
    """

    k: int
    max_retries: int
    relax_filters: bool


class RAGOutput(TypedDict, total=False):
    """What every graph returns (its ``output_schema``; working keys such as ``tried_queries`` stay internal).

    ``answer``, ``citations`` (``[{"n", "chunk_id", "doc_id", "title", "source_locator", "attributed"}]``),
    ``documents`` (the passages the answer was given, ``citations[i]["n"]`` indexes them), ``trace``, ``refused``,
    ``mode``, the answer chain's reports (``invalid_citations``, ``unsupported_sentences``, ``warning``), the
    loop's outcome (``retries``, ``retry_reason``, ``original_query``, ``search_query``), whether the run's filters
    were widened (``filters_dropped``: only a corrective loop built with ``relax_filters=True`` drops them, and the
    answer or refusal then comes from the unfiltered search; ``dropped_filters``: the filters dropped, else
    ``None``) and, for a chat input, ``messages`` with the answer appended: its ``AIMessage`` carries
    ``response_metadata["citations"]`` (the ``citations`` above, so a chat app resolves ``[n]`` from the message),
    ``response_metadata["ragspine"]`` (``search_query``, ``refused``, ``mode``) and reports a drop too.  For a chat
    follow-up, ``search_query`` is the standalone question it was condensed into (or a rewrite of it).
    """

    answer: str
    citations: list[Citation]
    documents: list[Document]
    trace: list[dict[str, Any]]
    refused: bool
    mode: str
    invalid_citations: list[int]
    unsupported_sentences: list[str]
    warning: str | None
    retries: int
    retry_reason: str | None
    original_query: str
    search_query: str
    filters_dropped: bool
    dropped_filters: dict[str, Any] | None
    messages: Annotated[list[AnyMessage], add_messages]


class CorrectiveRAGOutput(RAGOutput, total=False):
    """The corrective graph's output (``filters_dropped`` / ``dropped_filters`` are every graph's, see
    :class:`RAGOutput`; only this loop, and the adaptive graph's single path, may set them)."""


class AdaptiveRAGOutput(CorrectiveRAGOutput, total=False):
    """The adaptive graph's output: also the ``route`` taken and the ``sub_questions``."""

    route: str
    sub_questions: list[str]


class SelfRAGOutput(RAGOutput, total=False):
    """The Self-RAG graph's output: also ``use_retrieval`` and the last ``supported`` / ``useful`` verdicts."""

    use_retrieval: bool
    supported: str
    useful: str


class RAGState(TypedDict, total=False):
    """State of the simple graph, and the base of the others.

    Attributes:
        question: the user's question (input; ``prepare`` consumes it and sets it to ``None``, so a later run on a
            checkpointed thread never sees it).
        messages: the chat state (input and, in chat mode, output; reducer ``add_messages``).
        filters: metadata filter (input; consumed by ``prepare`` like ``question``).
        search_filters: the filter the searches of this run use (the corrective graph drops it only when the
            builder's ``relax_filters=True`` and the run did not turn it off).
        chat: whether the question came from ``messages`` (the answer is then appended to them).
        reply_id: the id of this run's ``AIMessage`` (a later node's answer replaces the earlier one's).
        max_retries: the retry bound of this run (builder ``max_retries``, or a smaller per-run value).
        relax_filters: whether this run may drop its filters (builder ``relax_filters``, or ``False`` per run).
        k: results per retrieval for this run (``None``: the retriever's own).
        original_query: the question the answer addresses (always the input question: the user's own words).
        standalone_question: in chat mode with ``condense_question`` on (the default), the question the run
            searches, grades and rewrites — the follow-up condensed with the conversation before it
            (:mod:`~langchain_ragspine.graphs.conversation`; ``original_query`` itself when the message is
            self-contained or the first of the conversation); absent otherwise (then ``original_query`` is used).
        search_query: what is searched (the standalone question, or a rewrite of it).
        documents: the chunks in play — retrieved, then gated, then graded; in the final state, exactly the
            passages the answer was given, numbered ``[1]…`` in this order (empty after a refusal).  Never holds a
            RESTRICTED chunk.
        answer: the final answer (a refusal names "insufficient context").
        citations: ``[{"n", "chunk_id", "doc_id", "title", "source_locator", "attributed"}]``; ``n`` indexes
            ``documents`` from 1; ``attributed`` marks a citation the package attributed to a sentence of an answer
            whose model wrote no valid marker.
        invalid_citations: citation numbers the model wrote that named no passage (removed from ``answer``).
        unsupported_sentences: answer sentences no passage supports (LLM answers cited by attribution).
        warning: why a returned or refused answer carries no citation (e.g. no passage supports it), else ``None``.
        trace: one dict per decision taken (``{"step": node name, …}``); it never holds chunk text.
        refused: whether the graph refused for lack of supported context.
        retries: corrections / retries taken so far (bounded by the builder's ``max_retries``).
        retry_reason: why the last retry or the refusal happened (``"no_relevant_documents"``,
            ``"unsupported"``, ``"not_useful"``, ``"rewrite_exhausted"``), else ``None``.
        tried_queries: every ``search_query`` searched so far (a rewrite that repeats one ends the loop).
        mode: how the answer was made (``"llm"``, ``"extractive"``, ``"extractive_fallback"``, ``"direct"``,
            ``"refusal"``, ``"merged"``).
        filters_dropped: whether this run's corrective loop dropped its filters (``relax_filters=True`` only).
        dropped_filters: the filters it dropped, else ``None``.
    """

    question: str | None
    messages: Annotated[list[AnyMessage], add_messages]
    filters: dict[str, Any] | None
    search_filters: dict[str, Any] | None
    chat: bool
    reply_id: str | None
    max_retries: int
    relax_filters: bool
    k: int | None
    original_query: str
    standalone_question: str
    search_query: str
    documents: Annotated[list[Document], merge_documents]
    answer: str
    citations: list[Citation]
    invalid_citations: list[int]
    unsupported_sentences: list[str]
    warning: str | None
    trace: Annotated[list[dict[str, Any]], append_trace]
    refused: bool
    retries: int
    retry_reason: str | None
    tried_queries: list[str]
    mode: str
    filters_dropped: bool
    dropped_filters: dict[str, Any] | None


class CorrectiveRAGState(RAGState, total=False):
    """State of the corrective graph (``filters_dropped`` / ``dropped_filters``, which its drop-filters correction
    writes, are in :class:`RAGState`: every node that answers reads them)."""


class AdaptiveRAGState(CorrectiveRAGState, total=False):
    """State of the adaptive graph: the ``route`` taken and, for ``"decompose"``, the sub-questions, the answers
    their parallel branches wrote and ``fallbacks`` — how often a decomposition that answered nothing fell back to
    answering the original question (bounded by ``adaptive.MAX_FALLBACKS``)."""

    route: str
    fallbacks: int
    sub_questions: list[str]
    sub_answers: Annotated[list[SubAnswer], merge_sub_answers]


class SelfRAGState(RAGState, total=False):
    """State of the Self-RAG graph: whether retrieval was chosen (``use_retrieval``) and the last support and
    usefulness verdicts (``retry_reason`` says why the last retry or the refusal happened)."""

    use_retrieval: bool
    supported: str
    useful: str
