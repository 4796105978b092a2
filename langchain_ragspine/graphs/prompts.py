"""Every prompt the graphs send a chat model, in one place, and :class:`GraphPrompts` to override them.

The graders follow LangGraph's agentic-RAG tutorials (a binary ``{"binary_score": "yes" | "no"}`` reply); the
batch relevance prompt grades every retrieved passage in one call (one numbered list in, one verdict per number
out), which keeps the common corrective path at two model calls (grade, answer) instead of ``k + 1``.  The answer
prompt itself lives with the answer chain (:data:`langchain_ragspine.chains.answer.ANSWER_SYSTEM_PROMPT`).

Override any of them per graph::

    from langchain_ragspine.graphs import GraphPrompts, build_corrective_rag
    prompts = GraphPrompts().replace(rewrite=my_rewrite_prompt)      # keeps the variables {question}, {tried}
    graph = build_corrective_rag(retriever, llm, prompts=prompts)

A replacement must use the same input variables as the default (:data:`PROMPT_VARIABLES`); anything else raises
``ValueError`` when the :class:`GraphPrompts` is made, not at run time.  RESTRICTED chunks never fill a variable.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from langchain_core.prompts import ChatPromptTemplate

__all__ = [
    "BATCH_RELEVANCE_PROMPT",
    "CLASSIFY_PROMPT",
    "CONDENSE_PROMPT",
    "DECOMPOSE_PROMPT",
    "PROMPT_VARIABLES",
    "RELEVANCE_PROMPT",
    "REWRITE_PROMPT",
    "SMALL_TALK_CHECK_PROMPT",
    "SMALL_TALK_PROMPT",
    "SUPPORT_PROMPT",
    "USEFULNESS_PROMPT",
    "GraphPrompts",
]

_JSON_INSTRUCTION = 'Reply with JSON only: {{"binary_score": "yes"}} or {{"binary_score": "no"}}.'

#: One passage, one question (the per-document grader; also the fallback of the batch grader).
RELEVANCE_PROMPT = ChatPromptTemplate.from_messages(
    [
        (
            "system",
            "You grade whether a retrieved passage is relevant to a question. The passage is relevant if it "
            "contains keywords or meaning that help answer the question. It need not answer it fully. "
            + _JSON_INSTRUCTION,
        ),
        ("human", "Passage:\n{document}\n\nQuestion: {question}"),
    ]
)

#: Every passage of one retrieval, numbered ``[1]…[n]``, graded in one call.
BATCH_RELEVANCE_PROMPT = ChatPromptTemplate.from_messages(
    [
        (
            "system",
            "You grade whether each retrieved passage is relevant to a question. A passage is relevant if it "
            "contains keywords or meaning that help answer the question. It need not answer it fully. Grade every "
            "numbered passage. Reply with JSON only, one entry per passage number, for example "
            '{{"1": "yes", "2": "no", "3": "yes"}}.',
        ),
        ("human", "Passages:\n{documents}\n\nQuestion: {question}\n\nGrade passages 1 to {n}."),
    ]
)

SUPPORT_PROMPT = ChatPromptTemplate.from_messages(
    [
        (
            "system",
            "You check whether an answer is supported by the numbered passages. Answer yes only if every claim in "
            "the answer is stated in the passages; a plain \"I don't know\" counts as supported. " + _JSON_INSTRUCTION,
        ),
        ("human", "Passages:\n{documents}\n\nAnswer: {answer}"),
    ]
)

USEFULNESS_PROMPT = ChatPromptTemplate.from_messages(
    [
        (
            "system",
            "You check whether an answer resolves a question. Answer yes if it answers what was asked; answer no "
            "if it evades, says it does not know, or answers something else. " + _JSON_INSTRUCTION,
        ),
        ("human", "Question: {question}\n\nAnswer: {answer}"),
    ]
)

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

CLASSIFY_PROMPT = ChatPromptTemplate.from_messages(
    [
        (
            "system",
            "Classify the question for a document search system. Reply with one word: 'single' if one search can "
            "answer it, 'decompose' if it asks several things or compares things so that it should be split into "
            "sub-questions, 'none' if it is small talk that needs no documents.",
        ),
        ("human", "{question}"),
    ]
)

DECOMPOSE_PROMPT = ChatPromptTemplate.from_messages(
    [
        (
            "system",
            "Split the question into at most 3 self-contained sub-questions that can each be answered by one "
            "search. Keep the question's language. Reply with one sub-question per line and nothing else.",
        ),
        ("human", "{question}"),
    ]
)

#: A follow-up and the conversation before it -> one standalone search question (the rephrase step of LangChain's
#: ``create_history_aware_retriever`` and of LlamaIndex's condense-question chat mode).  RESTRICTED text never
#: fills ``{history}``: it holds the user's messages and the graph's own replies only
#: (:func:`~langchain_ragspine.graphs.conversation.chat_history`), and of those only the replies whose passages the
#: retriever still serves (:func:`~langchain_ragspine.graphs.conversation.check_conversation`).
CONDENSE_PROMPT = ChatPromptTemplate.from_messages(
    [
        (
            "system",
            "You turn the last message of a conversation into a standalone question for a search over documents. "
            "Resolve words that point back into the conversation (it, that, それ, その, 这, 那) to what they refer "
            "to, keep names and key terms, and keep the language of the last message. If the last message is "
            "already self-contained, repeat it unchanged. Do not answer it. Reply with the question only, on one "
            "line.",
        ),
        ("human", "Conversation:\n{history}\n\nLast message: {question}\n\nStandalone question:"),
    ]
)

#: The input variables each prompt of :class:`GraphPrompts` must use (a replacement needs exactly these).
PROMPT_VARIABLES: dict[str, frozenset[str]] = {
    "relevance": frozenset({"question", "document"}),
    "batch_relevance": frozenset({"question", "documents", "n"}),
    "support": frozenset({"answer", "documents"}),
    "usefulness": frozenset({"question", "answer"}),
    "rewrite": frozenset({"question", "tried"}),
    "small_talk": frozenset({"question"}),
    "small_talk_check": frozenset({"question"}),
    "classify": frozenset({"question"}),
    "decompose": frozenset({"question"}),
    "condense": frozenset({"history", "question"}),
}


@dataclass(frozen=True)
class GraphPrompts:
    """The prompts of the graphs and their graders (defaults: the module constants above).

    Attributes (each a ``ChatPromptTemplate`` with the variables of :data:`PROMPT_VARIABLES`):
        relevance: one passage — ``{question}``, ``{document}``.
        batch_relevance: all passages of a retrieval in one call — ``{question}``, ``{documents}`` (numbered
            ``[1] …``), ``{n}`` (how many).
        support: ``{answer}``, ``{documents}``.  usefulness: ``{question}``, ``{answer}``.
        rewrite: ``{question}``, ``{tried}`` (the queries already searched, ``" | "``-joined).
        small_talk / small_talk_check / classify / decompose: ``{question}``.
        condense: ``{history}`` (the conversation before the follow-up, one ``User: …`` / ``Assistant: …`` line
            per message) and ``{question}`` (the follow-up).

    Raises:
        TypeError: a field that is not a ``ChatPromptTemplate``.
        ValueError: a prompt whose input variables differ from the default's (names both sets).
    """

    relevance: ChatPromptTemplate = field(default_factory=lambda: RELEVANCE_PROMPT)
    batch_relevance: ChatPromptTemplate = field(default_factory=lambda: BATCH_RELEVANCE_PROMPT)
    support: ChatPromptTemplate = field(default_factory=lambda: SUPPORT_PROMPT)
    usefulness: ChatPromptTemplate = field(default_factory=lambda: USEFULNESS_PROMPT)
    rewrite: ChatPromptTemplate = field(default_factory=lambda: REWRITE_PROMPT)
    small_talk: ChatPromptTemplate = field(default_factory=lambda: SMALL_TALK_PROMPT)
    small_talk_check: ChatPromptTemplate = field(default_factory=lambda: SMALL_TALK_CHECK_PROMPT)
    classify: ChatPromptTemplate = field(default_factory=lambda: CLASSIFY_PROMPT)
    decompose: ChatPromptTemplate = field(default_factory=lambda: DECOMPOSE_PROMPT)
    condense: ChatPromptTemplate = field(default_factory=lambda: CONDENSE_PROMPT)

    def __post_init__(self) -> None:
        for name, expected in PROMPT_VARIABLES.items():
            prompt = getattr(self, name)
            if not isinstance(prompt, ChatPromptTemplate):
                raise TypeError(f"GraphPrompts.{name} must be a ChatPromptTemplate, got {type(prompt).__name__}")
            got = frozenset(prompt.input_variables)
            if got != expected:
                raise ValueError(
                    f"GraphPrompts.{name} must use the variables {sorted(expected)}, got {sorted(got)}"
                )

    def replace(self, **changes: Any) -> GraphPrompts:
        """A copy with some prompts replaced (``GraphPrompts().replace(rewrite=...)``).

        Raises:
            TypeError: an unknown prompt name.  ValueError: a prompt with the wrong variables.
        """
        unknown = set(changes) - set(PROMPT_VARIABLES)
        if unknown:
            raise TypeError(f"unknown prompt name(s) {sorted(unknown)}; known: {sorted(PROMPT_VARIABLES)}")
        return dataclasses.replace(self, **changes)
