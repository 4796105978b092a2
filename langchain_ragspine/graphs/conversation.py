"""Follow-up questions: the conversation window a graph reads, and the standalone search question made from it.

A chat turn such as "それはなぜですか？" / "为什么？" / "Why is that?" means nothing to a retriever on its own.  Before
retrieval, the graphs condense the conversation into a standalone search question, as LangChain's
``create_history_aware_retriever`` (its rephrase prompt) and LlamaIndex's condense-question chat mode do:

* with a chat model, one call (:data:`~langchain_ragspine.graphs.prompts.CONDENSE_PROMPT`) rewrites the follow-up
  into a question that can be understood without the conversation; a reply that is empty, too long, has no
  content term of its own (:func:`topic_terms`) or fails falls back to the rule below;
* without one, a deterministic rule that does not depend on the language: a follow-up with no content term of its
  own (:func:`topic_terms` — the package's content terms, :mod:`langchain_ragspine.stopwords`, so question words,
  stop words, particles and pronouns such as それ / 那是 / that never count) borrows the content words of the most
  recent earlier human turn that has some (:func:`~langchain_ragspine.graphs.query_analysis.
  rewrite_query_deterministic`); a follow-up with a content term of its own is searched as it is, and so is small
  talk.

The window (:func:`chat_history`) is bounded: the last ``turns`` turns before the question (default
:data:`DEFAULT_HISTORY_TURNS`), each message cut to :data:`MAX_HISTORY_MESSAGE_CHARS` characters.  It holds only
what can go into a prompt: the user's own messages and the replies the package's graphs wrote themselves
(:func:`is_graph_reply`: the ``AIMessage`` carries ``response_metadata["ragspine"]``; those replies were made from
passages that had passed the RESTRICTED gate), with their citation markers removed (the numbers named the passages
of an earlier turn).  Tool messages, system messages and AI messages written by anything else — another node of a
parent app, an agent's tool results — are never read, so a document another component put into the conversation
never reaches a prompt through it.

**A passage relabelled or retracted after the reply** (:func:`check_conversation`).  A reply passed the gate when
it was made; the passage it quoted may be relabelled RESTRICTED or retracted later.  So before the conversation goes
into any prompt, the graphs ask the retriever which of the earlier replies' passages it still serves
(:func:`~langchain_ragspine.served.served_ids`; a reply names them in ``response_metadata["ragspine"]["passages"]``,
a reply written before that key existed by its citations):

* a reply whose passages are all **served** stays in the history, as it was (nothing relabelled: the history and
  every prompt are byte for byte what they were without the check);
* a reply with a passage the retriever reports **withdrawn** (relabelled RESTRICTED, retracted, gone from its
  document's current version) is left out of every prompt, and its message in the graph state is replaced — same
  id, so LangGraph's ``add_messages`` replaces it in the checkpoint and in a parent app's state — by a
  :data:`WITHDRAWN_NOTE` without citations (``response_metadata["ragspine"]["withdrawn"] = True``); so is a
  ``ToolMessage`` whose artifact holds a withdrawn chunk (an agent's :func:`~langchain_ragspine.graphs.tools.
  make_answer_tool` result in a parent app);
* a reply the retriever **cannot vouch for** — a retriever without the check (a foreign one), a passage without an
  id, an id of another corpus — is left out of every prompt (fail closed) and left as it is in the state (it may be
  another graph's reply over another corpus).

The user's own messages always stay: they are the user's text, not a passage (a user who pastes a passage into a
message has it in their own words).  Replies without passages (a refusal, small talk) stay too.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig

from langchain_ragspine.arguments import check_int
from langchain_ragspine.chains.answer import detect_language, rewrite_citation_markers
from langchain_ragspine.documents import chunk_key
from langchain_ragspine.graphs.graders import NOSTREAM_TAG
from langchain_ragspine.graphs.prompts import GraphPrompts
from langchain_ragspine.graphs.query_analysis import clean_query, is_small_talk, rewrite_query_deterministic
from langchain_ragspine.served import ServedIds, served_ids
from langchain_ragspine.stopwords import CHINESE_FUNCTION_CHARS, content_terms
from langchain_ragspine.tokenizers import Tokenizer, get_tokenizer

__all__ = [
    "DEFAULT_HISTORY_TURNS",
    "GRAPH_REPLY_KEY",
    "MAX_HISTORY_MESSAGE_CHARS",
    "MAX_STANDALONE_CHARS",
    "WITHDRAWN_NOTE",
    "ConversationCheck",
    "Condensed",
    "chat_history",
    "check_conversation",
    "check_history_turns",
    "condense_question",
    "condense_question_deterministic",
    "format_history",
    "is_graph_reply",
    "is_withdrawn",
    "reply_sources",
    "topic_terms",
    "withdraw_from_thread",
]

logger = logging.getLogger(__name__)

#: Turns of the conversation before the question that a graph reads (a turn: a user message and the reply to it).
DEFAULT_HISTORY_TURNS = 3
#: Each message of the window is cut to this many characters (so a prompt's history is bounded: at most
#: ``2 * turns`` messages of this size).
MAX_HISTORY_MESSAGE_CHARS = 1000
#: A chat model's standalone question longer than this is not used (the rule decides instead).
MAX_STANDALONE_CHARS = 500
#: The ``response_metadata`` key that marks an ``AIMessage`` as a reply of one of the package's graphs.
GRAPH_REPLY_KEY = "ragspine"

_NOSTREAM: RunnableConfig = {"tags": [NOSTREAM_TAG]}

#: What replaces an earlier reply (and an agent's tool result) made from a passage withdrawn since — relabelled
#: RESTRICTED or retracted — in the graph state, in the reply's language (:func:`check_conversation`).
WITHDRAWN_NOTE: dict[str, str] = {
    "ja": "（この回答は取り下げられました。根拠となった文書が現在は利用できません。）",
    "zh": "（此回答已撤回：其依据的文档现已不可用。）",
    "en": "(This reply was withdrawn: a document it was based on is no longer available.)",
}

How = Literal["llm", "borrowed", "as_is", "small_talk"]


@dataclass(frozen=True)
class Condensed:
    """The outcome of condensing a follow-up: the ``question`` to search, ``how`` it was made (``"llm"``: the chat
    model's standalone question; ``"borrowed"``: the follow-up plus the content words of an earlier turn;
    ``"as_is"``: the follow-up itself; ``"small_talk"``: the follow-up itself, small talk), and whether a chat model
    call failed or gave an unusable reply (``llm_failed``; the rule decided instead)."""

    question: str
    how: How
    llm_failed: bool = False


def check_history_turns(turns: Any) -> int:
    """``turns`` if it is an ``int >= 1`` (the history window of a graph).

    Raises:
        TypeError: not an int.  ValueError: ``turns < 1`` (use ``condense_question=False`` for no history).
    """
    return check_int(turns, "history_turns", hint="condense_question=False turns history off")


def is_graph_reply(message: Any) -> bool:
    """Whether ``message`` is an ``AIMessage`` one of the package's graphs appended (``response_metadata`` holds
    :data:`GRAPH_REPLY_KEY`)."""
    return isinstance(message, AIMessage) and isinstance(message.response_metadata.get(GRAPH_REPLY_KEY), dict)


def is_withdrawn(message: Any) -> bool:
    """Whether ``message`` is a graph reply (or a tool message) that :func:`check_conversation` replaced by the
    :data:`WITHDRAWN_NOTE` (``response_metadata["ragspine"]["withdrawn"]`` is true)."""
    meta = getattr(message, "response_metadata", None)
    mark = meta.get(GRAPH_REPLY_KEY) if isinstance(meta, dict) else None
    return isinstance(mark, dict) and mark.get("withdrawn") is True


def reply_sources(message: Any) -> list[str | None]:
    """The ids of the passages a graph reply (:func:`is_graph_reply`) was made from:
    ``response_metadata["ragspine"]["passages"]`` (every passage the answer was given, cited or not; ``None`` for
    one without an id), else — a reply written before that key existed — the ``chunk_id`` of each of its
    ``response_metadata["citations"]``.  ``[]`` for a reply made from no passage (a refusal, small talk) and for any
    other message."""
    if not is_graph_reply(message):
        return []
    meta = message.response_metadata
    passages = meta[GRAPH_REPLY_KEY].get("passages")
    if isinstance(passages, list):
        return [p if isinstance(p, str) and p else None for p in passages]
    citations = meta.get("citations")
    if not isinstance(citations, list):
        return []
    return [c.get("chunk_id") or None if isinstance(c, dict) else None for c in citations]


def _artifact_ids(message: ToolMessage) -> list[str]:
    """The chunk ids of the documents in a tool message's artifact (``Document`` objects, or the dicts a checkpoint
    gives back: ``{"id", "metadata", "page_content"}``)."""
    artifact = message.artifact
    if not isinstance(artifact, (list, tuple)):
        return []
    out = []
    for item in artifact:
        if isinstance(item, Document):
            key = chunk_key(item)
        elif isinstance(item, dict) and isinstance(item.get("metadata", {}), dict):
            key = (item.get("metadata") or {}).get("chunk_id") or item.get("id")
        else:
            key = None
        if isinstance(key, str) and key:
            out.append(key)
    return out


@dataclass(frozen=True)
class ConversationCheck:
    """The outcome of :func:`check_conversation`: ``kept`` — the messages in order, without the graph replies that
    may not go into a prompt (read by :func:`chat_history`); ``withdrawn`` — the replacements (same ids) of the
    replies and tool messages made from a withdrawn passage, for the graph state's ``messages``; ``unverified`` —
    how many replies were left out because the retriever could not vouch for their passages (they stay in the
    state as they are)."""

    kept: list[BaseMessage]
    withdrawn: list[BaseMessage]
    unverified: int = 0


def _withdrawn_reply(message: AIMessage) -> AIMessage:
    mark = message.response_metadata[GRAPH_REPLY_KEY]
    note = WITHDRAWN_NOTE[detect_language(_text(message))]
    meta = {"citations": [], GRAPH_REPLY_KEY: {
        "search_query": None, "refused": bool(mark.get("refused")), "mode": str(mark.get("mode") or ""),
        "passages": [], "withdrawn": True,
    }}
    return AIMessage(content=note, id=message.id, name=message.name, response_metadata=meta)


def _withdrawn_tool_result(message: ToolMessage) -> ToolMessage:
    note = WITHDRAWN_NOTE[detect_language(_text(message))]
    return ToolMessage(content=note, id=message.id, name=message.name, tool_call_id=message.tool_call_id,
                       status=message.status, response_metadata={GRAPH_REPLY_KEY: {"withdrawn": True}})


def check_conversation(messages: Sequence[Any], retriever: Any) -> ConversationCheck:
    """Check the earlier replies of ``messages`` against what ``retriever`` serves now (see the module docstring):
    one :func:`~langchain_ragspine.served.served_ids` call for the passages of every graph reply and the artifact
    documents of every tool message (none when there are none).

    * a graph reply whose passages (:func:`reply_sources`) are all served is kept, unchanged;
    * one with a passage the retriever reports withdrawn is left out of ``kept`` and replaced in ``withdrawn`` by
      the :data:`WITHDRAWN_NOTE` in its language (same ``id``; ``response_metadata``: no citations,
      ``["ragspine"]["withdrawn"] = True``); a tool message whose artifact holds a withdrawn chunk is replaced the
      same way (content the note, no artifact) — tool messages never reach a prompt of the graphs, but they are in
      their result;
    * one the retriever cannot vouch for (it has no check, a passage has no id or is unknown to it) is left out of
      ``kept`` only (fail closed; counted in ``unverified``).

    Every other message is kept as it is.  Messages without an id are never replaced (a graph's state gives every
    message one).

    Raises:
        StoreError: the retriever's store is unreadable.

    Example:
        >>> from langchain_core.documents import Document
        >>> from langchain_core.messages import AIMessage, HumanMessage
        >>> from langchain_ragspine.retrievers import BM25Retriever
        >>> retriever = BM25Retriever.from_documents([Document("Kyoto temples", id="k#0")])
        >>> reply = AIMessage("Temples [1].", id="r1", response_metadata={
        ...     "citations": [], "ragspine": {"search_query": "Kyoto", "refused": False, "mode": "llm",
        ...                                   "passages": ["k#0"]}})
        >>> len(check_conversation([HumanMessage("Kyoto?"), reply], retriever).kept)
        2
        >>> check_conversation([HumanMessage("Kyoto?"), reply], object()).unverified   # cannot tell: fail closed
        1
    """
    items = [m for m in messages if isinstance(m, BaseMessage)]
    sources: dict[int, list[str | None]] = {}
    tool_ids: dict[int, list[str]] = {}
    for i, m in enumerate(items):
        if is_withdrawn(m):
            continue
        if is_graph_reply(m):
            found = reply_sources(m)
            if found:
                sources[i] = found
        elif isinstance(m, ToolMessage):
            found_ids = _artifact_ids(m)
            if found_ids:
                tool_ids[i] = found_ids
    asked = sorted({s for ids in sources.values() for s in ids if s is not None}
                   | {s for ids in tool_ids.values() for s in ids})
    answer: ServedIds | None = ServedIds()
    if asked:
        answer = served_ids(retriever, asked)
    kept: list[BaseMessage] = []
    withdrawn: list[BaseMessage] = []
    unverified = 0
    for i, m in enumerate(items):
        if i in tool_ids and answer is not None and answer.withdrawn.intersection(tool_ids[i]) and m.id:
            assert isinstance(m, ToolMessage)
            withdrawn.append(_withdrawn_tool_result(m))
            continue
        if i not in sources:
            kept.append(m)
            continue
        ids = sources[i]
        if answer is not None and answer.withdrawn.intersection(s for s in ids if s is not None):
            if m.id:
                assert isinstance(m, AIMessage)
                withdrawn.append(_withdrawn_reply(m))
            else:
                unverified += 1
        elif answer is None or any(s is None or s not in answer.served for s in ids):
            unverified += 1
        else:
            kept.append(m)
    return ConversationCheck(kept, withdrawn, unverified)


def withdraw_from_thread(graph: Any, config: RunnableConfig, retriever: Any) -> int:
    """Apply :func:`check_conversation` to a checkpointed thread *before* a run, so that nothing withdrawn since the
    last turn is replayed by LangGraph at the start of the next one (its first ``stream_mode="values"`` chunk and the
    first node's input event are the state as stored; the graphs' own check runs in their first node).  For an app
    that streams ``values`` or ``astream_events`` to a client::

        withdraw_from_thread(graph, config, retriever)   # then graph.stream(inputs, config, stream_mode="values")

    Reads ``graph.get_state(config)``; when a reply or tool message is withdrawn, or a document of the stored
    ``documents`` (the previous turn's passages) is — the retriever reports it withdrawn — writes one
    ``graph.update_state(config, ...)``: the replacement messages and, for stale documents, the served ones kept
    (``{"replace": [...]}``) with ``answer`` and ``citations`` cleared (keys the graph's state does not have are left
    out, so a parent ``MessagesState`` app works too).  Nothing is written when nothing is withdrawn.  Returns the
    number of messages and documents withdrawn.

    Raises:
        ValueError: the graph has no checkpointer (LangGraph's error); StoreError: the retriever's store is
            unreadable.
    """
    values = graph.get_state(config).values
    update: dict[str, Any] = {}
    checked = check_conversation(values.get("messages") or [], retriever)
    if checked.withdrawn:
        update["messages"] = checked.withdrawn
    docs = [d for d in values.get("documents") or [] if isinstance(d, Document)]
    keys = [chunk_key(d) for d in docs]
    answer = served_ids(retriever, sorted({k for k in keys if k is not None})) if docs else None
    stale = 0
    if answer is not None and answer.withdrawn:
        kept = [d for d, k in zip(docs, keys, strict=True) if k not in answer.withdrawn]
        stale = len(docs) - len(kept)
        update.update({"documents": {"replace": kept}, "answer": "", "citations": []})
        update = {k: v for k, v in update.items() if k in values or k == "messages"}
    if update:
        graph.update_state(config, update)
    return len(checked.withdrawn) + stale


def _text(message: BaseMessage) -> str:
    return message.content if isinstance(message.content, str) else str(message.text)


def _cut(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MAX_HISTORY_MESSAGE_CHARS else text[: MAX_HISTORY_MESSAGE_CHARS - 1].rstrip() + "…"


def chat_history(messages: Sequence[Any], *, turns: int = DEFAULT_HISTORY_TURNS) -> list[BaseMessage]:
    """The conversation before the last human message of ``messages``, as the graphs read it: the last ``turns``
    turns (default :data:`DEFAULT_HISTORY_TURNS`), each a ``HumanMessage`` (the user's text) and the graph replies
    after it (:func:`is_graph_reply`, citation markers removed; a withdrawn one, :func:`is_withdrawn`, never), every
    text cut to :data:`MAX_HISTORY_MESSAGE_CHARS`.  Other messages (tool, system, AI messages of anything else) are
    left out; so are empty ones.  New message objects (content only: no ids, no metadata).  This does not ask the
    retriever which passages it still serves: the graphs pass ``check_conversation(messages, retriever).kept``
    (:func:`check_conversation`), and so should any caller that builds a prompt from it.

    Raises:
        TypeError / ValueError: a bad ``turns`` (:func:`check_history_turns`).
    """
    check_history_turns(turns)
    items = [m for m in messages if isinstance(m, BaseMessage)]
    last_human = max((i for i, m in enumerate(items) if m.type == "human"), default=None)
    if last_human is None:
        return []
    grouped: list[list[BaseMessage]] = []
    for message in items[:last_human]:
        if message.type == "human":
            text = _cut(_text(message))
            if text:
                grouped.append([HumanMessage(content=text)])
        elif is_graph_reply(message) and not is_withdrawn(message) and grouped:
            text = _cut(rewrite_citation_markers(_text(message), lambda _: []))
            if text:
                grouped[-1].append(AIMessage(content=text))
    return [m for turn in grouped[-turns:] for m in turn]


def format_history(history: Sequence[BaseMessage]) -> str:
    """``history`` as the condense prompt shows it: one ``User: …`` / ``Assistant: …`` line per message."""
    return "\n".join(f"{'User' if m.type == 'human' else 'Assistant'}: {_text(m)}" for m in history)


def topic_terms(text: str, tokenizer: str | Tokenizer = "auto") -> set[str]:
    """The content terms of ``text`` that name a topic: :func:`~langchain_ragspine.stopwords.content_terms`
    without tokens made only of Chinese function characters (``那是``, ``这个`` — a pronoun and a copula, which
    the character bigrams of the CJK tokenizer would otherwise keep).  Empty for "それはなぜですか？", "为什么？",
    "那是为什么呢？", "Why is that?"."""
    return {t for t in content_terms(text, tokenizer) if not all(ch in CHINESE_FUNCTION_CHARS for ch in t)}


def condense_question_deterministic(
    question: str, history: Sequence[BaseMessage], *, tokenizer: str | Tokenizer = "auto"
) -> Condensed:
    """The standalone search question for ``question`` without a model (see the module docstring): small talk
    and a follow-up with a topic term of its own are searched as they are; any other follow-up is searched as
    ``"{question} {content words of the latest earlier human turn that has topic terms}"`` (``how="borrowed"``),
    or as it is when no earlier turn has any.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> condense_question_deterministic("Why is that?", [HumanMessage("Which region has no rainy season?")])
        Condensed(question='Why is that? region rainy season', how='borrowed', llm_failed=False)
        >>> condense_question_deterministic("それはなぜですか？", [HumanMessage("梅雨がない地域はどこですか？")]).question
        'それはなぜですか？ 梅雨 ない 地域'
        >>> condense_question_deterministic("Where is the Eiffel Tower?", [HumanMessage("Why?")]).how
        'as_is'
    """
    tok = get_tokenizer(tokenizer)
    if is_small_talk(question):
        return Condensed(question, "small_talk")
    if topic_terms(question, tok):
        return Condensed(question, "as_is")
    for message in reversed(history):
        if message.type != "human":
            continue
        earlier = _text(message)
        if is_small_talk(earlier) or not topic_terms(earlier, tok):
            continue
        return Condensed(f"{question.strip()} {rewrite_query_deterministic(earlier)}", "borrowed")
    return Condensed(question, "as_is")


def condense_question(
    question: str,
    history: Sequence[BaseMessage],
    *,
    llm: BaseChatModel | None = None,
    prompts: GraphPrompts | None = None,
    tokenizer: str | Tokenizer = "auto",
) -> Condensed:
    """The standalone search question for the follow-up ``question`` after ``history`` (:func:`chat_history`).

    No history, or small talk: ``question`` itself, no model call.  With ``llm``: one call of ``prompts.condense``
    (variables ``history``, :func:`format_history`, and ``question``; tagged ``nostream``), its first line cleaned
    (:func:`~langchain_ragspine.graphs.query_analysis.clean_query`) and used when it is at most
    :data:`MAX_STANDALONE_CHARS` characters and has a topic term (:func:`topic_terms`); otherwise — an exception
    included — :func:`condense_question_deterministic` decides (``llm_failed=True``).  Without ``llm``:
    :func:`condense_question_deterministic`.  Never raises for a model's failure.
    """
    if not history:
        return Condensed(question, "as_is")
    if is_small_talk(question):
        return Condensed(question, "small_talk")
    if llm is None:
        return condense_question_deterministic(question, history, tokenizer=tokenizer)
    prompt = (prompts or GraphPrompts()).condense
    try:
        reply = llm.invoke(prompt.format_messages(history=format_history(history), question=question), _NOSTREAM)
        candidate = clean_query(reply, max_chars=MAX_STANDALONE_CHARS)
        if candidate and topic_terms(candidate, tokenizer):
            return Condensed(candidate, "llm")
        logger.warning("the chat model's standalone question %r is not usable; using the deterministic rule", candidate)
    except Exception as e:  # noqa: BLE001 - documented fallback: the deterministic rule
        logger.warning("condensing the follow-up with the chat model failed (%s); using the deterministic rule", e)
    found = condense_question_deterministic(question, history, tokenizer=tokenizer)
    return Condensed(found.question, found.how, llm_failed=True)
