"""Step-back prompting for retrieval: search with the question and a broader "step-back" question, fused.

Zheng, Mishra, Chen, Cheng, Chi, Le & Zhou, "Take a Step Back: Evoking Reasoning via Abstraction in Large Language
Models" (ICLR 2024; arXiv 2310.06117): before answering, the model is asked a more generic question about the
concept or principle behind the original ("What is the history of the school?" for "Which school did X attend in
1954?"); retrieving for both gives the answer model the specific passage and its context.  Here the step-back
question and the user's question are each searched through any base retriever and fused by Reciprocal Rank Fusion
(:class:`~langchain_ragspine.retrievers.query_transform.QueryTransformRetriever`).
"""

from __future__ import annotations

from typing import ClassVar

from langchain_core.prompts import ChatPromptTemplate
from pydantic import Field

from langchain_ragspine.retrievers.query_transform import LLMQueryTransformRetriever

__all__ = ["STEP_BACK_PROMPT", "StepBackRetriever"]

#: The default step-back prompt (after Zheng et al.'s, with one English and one Japanese example).
STEP_BACK_PROMPT = ChatPromptTemplate.from_messages([
    ("system", "You are an expert at world knowledge. Your task is to step back and paraphrase a question to a more "
               "generic step-back question, which is easier to answer. Write it in the language of the question. "
               "Reply with the step-back question only."),
    ("human", "Could the members of The Police perform lawful arrests?"),
    ("ai", "What can the members of The Police do?"),
    ("human", "ヤン・シンデルが生まれた国はどこですか？"),
    ("ai", "ヤン・シンデルの経歴は？"),
    ("human", "{question}"),
])


class StepBackRetriever(LLMQueryTransformRetriever):
    """Search ``base`` with the question and one broader step-back question a chat model writes; fuse by RRF.

    ``StepBackRetriever(base, llm)``.

    Attributes:
        n_queries: step-back questions used at most (default 1: the first line of the reply).
        (and those of :class:`~langchain_ragspine.retrievers.query_transform.LLMQueryTransformRetriever`)

    Results: at most ``k`` chunks, unique by ``chunk_id``, each with a trace entry.  Without a model: the base's
    results, unchanged.  Example: :class:`~langchain_ragspine.retrievers.query_transform.LLMQueryTransformRetriever`.
    """

    n_queries: int = Field(default=1)

    transform_name: ClassVar[str] = "step_back"
    default_prompt: ClassVar[ChatPromptTemplate] = STEP_BACK_PROMPT
