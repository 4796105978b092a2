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
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableConfig

from langchain_ragspine.chains.answer import rewrite_citation_markers
from langchain_ragspine.graphs.graders import NOSTREAM_TAG
from langchain_ragspine.graphs.prompts import GraphPrompts
from langchain_ragspine.graphs.query_analysis import clean_query, is_small_talk, rewrite_query_deterministic
from langchain_ragspine.stopwords import CHINESE_FUNCTION_CHARS, content_terms
from langchain_ragspine.tokenizers import Tokenizer, get_tokenizer

__all__ = [
    "DEFAULT_HISTORY_TURNS",
    "GRAPH_REPLY_KEY",
    "MAX_HISTORY_MESSAGE_CHARS",
    "MAX_STANDALONE_CHARS",
    "Condensed",
    "chat_history",
    "check_history_turns",
    "condense_question",
    "condense_question_deterministic",
    "format_history",
    "is_graph_reply",
    "topic_terms",
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
    if isinstance(turns, bool) or not isinstance(turns, int):
        raise TypeError(f"history_turns must be an int, got {turns!r}")
    if turns < 1:
        raise ValueError(f"history_turns must be >= 1, got {turns} (condense_question=False turns history off)")
    return turns


def is_graph_reply(message: Any) -> bool:
    """Whether ``message`` is an ``AIMessage`` one of the package's graphs appended (``response_metadata`` holds
    :data:`GRAPH_REPLY_KEY`)."""
    return isinstance(message, AIMessage) and isinstance(message.response_metadata.get(GRAPH_REPLY_KEY), dict)


def _text(message: BaseMessage) -> str:
    return message.content if isinstance(message.content, str) else str(message.text)


def _cut(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MAX_HISTORY_MESSAGE_CHARS else text[: MAX_HISTORY_MESSAGE_CHARS - 1].rstrip() + "…"


def chat_history(messages: Sequence[Any], *, turns: int = DEFAULT_HISTORY_TURNS) -> list[BaseMessage]:
    """The conversation before the last human message of ``messages``, as the graphs read it: the last ``turns``
    turns (default :data:`DEFAULT_HISTORY_TURNS`), each a ``HumanMessage`` (the user's text) and the graph replies
    after it (:func:`is_graph_reply`, citation markers removed), every text cut to
    :data:`MAX_HISTORY_MESSAGE_CHARS`.  Other messages (tool, system, AI messages of anything else) are left out;
    so are empty ones.  New message objects (content only: no ids, no metadata).

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
        elif is_graph_reply(message) and grouped:
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
