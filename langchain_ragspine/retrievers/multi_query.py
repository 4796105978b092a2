"""Multi-query retrieval and RAG-Fusion: a chat model rewrites the question several ways; each version is searched
and the lists are fused.

* **Multi-query** — LangChain's ``MultiQueryRetriever`` (``langchain_classic.retrievers.multi_query``): the model
  writes ``n`` differently worded versions of the question, "to overcome some of the limitations of distance-based
  similarity search"; the documents found by any version are returned.
* **RAG-Fusion** — Raudaschl, "Forget RAG, the Future is RAG-Fusion" (2023; github.com/Raudaschl/rag-fusion): the
  model writes ``n`` *related search queries*; the original and the generated queries are searched and fused by
  Reciprocal Rank Fusion (Cormack, Clarke & Büttcher, SIGIR 2009), so documents several queries agree on rise.

Both are :class:`~langchain_ragspine.retrievers.query_transform.QueryTransformRetriever` s: the user's query is
always searched first, the model's reply is parsed robustly
(:func:`~langchain_ragspine.retrievers.query_variants.parse_query_variants`), generated queries pass the deny-list,
``k`` and ``filter`` reach the base retriever, and the lists are fused by RRF — which also gives multi-query a
ranking and a ``k``.

Differences from LangChain's ``MultiQueryRetriever`` a user may rely on: its result is the *unique union* of the
lists in query order, with no ``k``, and "unique" means equal ``Document`` objects (over this package's retrievers
a chunk found by two queries still comes back once there: its per-query ``metadata["scores"]`` are a
:class:`~langchain_ragspine.documents.ChunkScores`, which takes no part in equality; a test shows it); here a chunk
is one chunk (``chunk_id``) and the lists are ranked by RRF.  Its ``include_original`` defaults to ``False``; here the
user's query is always searched.  Its parser splits on newlines only (a numbered list becomes queries starting with
``"1. "``).  Its base is called without ``k`` or ``filter``.
"""

from __future__ import annotations

from typing import ClassVar

from langchain_core.prompts import ChatPromptTemplate
from pydantic import Field

from langchain_ragspine.retrievers.query_transform import LLMQueryTransformRetriever

__all__ = ["MULTI_QUERY_PROMPT", "RAG_FUSION_PROMPT", "MultiQueryRetriever", "RAGFusionRetriever"]

#: The default multi-query prompt: ``n`` rewordings of the question.
MULTI_QUERY_PROMPT = ChatPromptTemplate.from_messages([
    ("system", "You help a search engine find documents. You rewrite questions; you do not answer them."),
    ("human", "Write {n} different versions of the question below, worded differently from it and from each other, "
              "so that together they find the documents that answer it by keyword and semantic search. "
              "Write them in the language of the question. One version per line, nothing else.\n\n"
              "Question: {question}"),
])

#: The default RAG-Fusion prompt (Raudaschl's: "generate multiple search queries related to" the input).
RAG_FUSION_PROMPT = ChatPromptTemplate.from_messages([
    ("system", "You are a helpful assistant that generates multiple search queries based on a single input query."),
    ("human", "Generate {n} search queries related to: {question}\n"
              "Write them in the language of the input query. One query per line, nothing else."),
])


class MultiQueryRetriever(LLMQueryTransformRetriever):
    """Search ``base`` with the question and ``n_queries`` rewordings a chat model writes; fuse by RRF.

    ``MultiQueryRetriever(base, llm, n_queries=3)`` — ``retriever=`` (LangChain's name for the base) works too.

    Attributes:
        n_queries: rewordings asked for and used at most (default 3); the question is searched as well.
        (and those of :class:`~langchain_ragspine.retrievers.query_transform.LLMQueryTransformRetriever`)

    Results: at most ``k`` chunks, unique by ``chunk_id``, best RRF score first (ties on ``chunk_id``); each with a
    trace entry in ``metadata["query_transform"]``.  Without a model: the base's results, unchanged.
    Example: :class:`~langchain_ragspine.retrievers.query_transform.LLMQueryTransformRetriever`.
    """

    n_queries: int = Field(default=3)

    transform_name: ClassVar[str] = "multi_query"
    default_prompt: ClassVar[ChatPromptTemplate] = MULTI_QUERY_PROMPT


class RAGFusionRetriever(LLMQueryTransformRetriever):
    """RAG-Fusion: search ``base`` with the question and ``n_queries`` related queries a chat model writes; fuse by
    Reciprocal Rank Fusion (Raudaschl, 2023).

    ``RAGFusionRetriever(base, llm, n_queries=4)``.  Same attributes and results as :class:`MultiQueryRetriever`;
    the default prompt asks for related search queries rather than rewordings, and four of them (as Raudaschl's).
    Example: :class:`~langchain_ragspine.retrievers.query_transform.LLMQueryTransformRetriever`.
    """

    n_queries: int = Field(default=4)

    transform_name: ClassVar[str] = "rag_fusion"
    default_prompt: ClassVar[ChatPromptTemplate] = RAG_FUSION_PROMPT
