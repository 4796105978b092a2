"""Question decomposition: a chat model splits a complex question into sub-questions; each is searched, and the
lists are fused with the question's own.

Least-to-most prompting (Zhou et al., "Least-to-Most Prompting Enables Complex Reasoning in Large Language Models",
ICLR 2023) first reduces a problem to simpler sub-problems, then solves them in order; for retrieval the
sub-questions are the queries ("Which is older, A or B?" → "When was A founded?", "When was B founded?"), as in
LangChain's query-decomposition recipe.  :class:`DecompositionRetriever` searches the question and each
sub-question through any base retriever and fuses them by Reciprocal Rank Fusion; a graph that answers the
sub-questions one by one gets them from :meth:`DecompositionRetriever.decompose` (the plan, deny-list applied)
and each document's trace says which sub-questions found it (``matched``).
"""

from __future__ import annotations

from typing import ClassVar

from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableConfig
from pydantic import Field

from langchain_ragspine.retrievers.query_transform import LLMQueryTransformRetriever

__all__ = ["DECOMPOSITION_PROMPT", "DecompositionRetriever"]

#: The default decomposition prompt.
DECOMPOSITION_PROMPT = ChatPromptTemplate.from_messages([
    ("system", "You break complex questions into simpler sub-questions that can each be answered by searching "
               "documents. You do not answer them."),
    ("human", "Break the question below into at most {n} simple, self-contained sub-questions whose answers "
              "together answer it. If it is already simple, reply with it unchanged. Write them in the language "
              "of the question. One sub-question per line, nothing else.\n\nQuestion: {question}"),
])


class DecompositionRetriever(LLMQueryTransformRetriever):
    """Search ``base`` with the question and up to ``n_queries`` sub-questions a chat model writes; fuse by RRF.

    ``DecompositionRetriever(base, llm, n_queries=3)``.

    Attributes:
        n_queries: sub-questions used at most (default 3).
        (and those of :class:`~langchain_ragspine.retrievers.query_transform.LLMQueryTransformRetriever`)

    Results: at most ``k`` chunks, unique by ``chunk_id``, each with a trace entry whose ``matched`` names the
    (sub-)questions that found it.  Without a model: the base's results, unchanged.
    Example (and :meth:`decompose`): :class:`~langchain_ragspine.retrievers.query_transform.LLMQueryTransformRetriever`.
    """

    n_queries: int = Field(default=3)

    transform_name: ClassVar[str] = "decompose"
    default_prompt: ClassVar[ChatPromptTemplate] = DECOMPOSITION_PROMPT

    def decompose(self, question: str, config: RunnableConfig | None = None) -> list[str]:
        """The sub-questions of ``question`` (deny-list applied; the question itself not included); ``[]`` without
        a model, when the model fails, or when it found nothing to split."""
        if not self.active:
            return []
        plan = self.plan(question, config)
        return plan.queries[1:]
