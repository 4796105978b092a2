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
user's query is searched too unless ``include_original=False`` is passed.  Its parser splits on newlines only (a
numbered list becomes queries starting with ``"1. "``).  Its base is called without ``k`` or ``filter``.

Coming from LangChain: ``MultiQueryRetriever.from_llm(retriever=…, llm=…, prompt=…, include_original=…)`` works here
with the same keyword names (:meth:`MultiQueryRetriever.from_llm`); a prompt written for LangChain's (a
``PromptTemplate`` with ``{question}``) works as it is.
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar

from langchain_core.language_models import BaseChatModel
from langchain_core.prompts import BasePromptTemplate, ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
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

    ``MultiQueryRetriever(base, llm, n_queries=3)`` — ``retriever=`` (LangChain's name for the base) works too, and
    so does LangChain's constructor, :meth:`from_llm`.

    Attributes:
        n_queries: rewordings asked for and used at most (default 3).
        include_original: search the question as well (default ``True``; LangChain's default is ``False``).  With
            ``False`` only the rewordings are searched — the question alone when there are none.
        (and those of :class:`~langchain_ragspine.retrievers.query_transform.LLMQueryTransformRetriever`)

    Results: at most ``k`` chunks, unique by ``chunk_id``, best RRF score first (ties on ``chunk_id``); each with a
    trace entry in ``metadata["query_transform"]``.  Without a model: the base's results, unchanged.
    Example: :class:`~langchain_ragspine.retrievers.query_transform.LLMQueryTransformRetriever`.
    """

    n_queries: int = Field(default=3)
    include_original: bool = True

    transform_name: ClassVar[str] = "multi_query"
    default_prompt: ClassVar[ChatPromptTemplate] = MULTI_QUERY_PROMPT

    @classmethod
    def from_llm(
        cls,
        retriever: BaseRetriever,
        llm: BaseChatModel,
        prompt: BasePromptTemplate | None = None,
        parser_key: str | None = None,
        include_original: bool = True,
        **kwargs: Any,
    ) -> MultiQueryRetriever:
        """LangChain's constructor (``langchain_classic.retrievers.multi_query.MultiQueryRetriever.from_llm``), with
        its keyword names.

        Args:
            retriever: the base retriever.
            llm: the chat model (a ``BaseChatModel``; LangChain also takes a completion ``LLM``, this class does not).
            prompt: a prompt template taking ``{question}`` (and optionally ``{n}``) — LangChain's own
                ``DEFAULT_QUERY_PROMPT`` or one written for it works; default :data:`MULTI_QUERY_PROMPT`.
            parser_key: ignored, with a warning — LangChain ignores it too (deprecated there).
            include_original: search the question as well.  Default ``True`` here (LangChain: ``False``): the user's
                own query is usually the best single query, and fusion ranks what both find first.
            **kwargs: this class's own fields (``k``, ``n_queries``, ``fetch_k``, ``filter``, ``deny_list``, ``c``).

        Raises:
            TypeError, ValueError: as the constructor (a bad retriever, a prompt without ``{question}``, …).

        Example:
            >>> from langchain_core.documents import Document
            >>> from langchain_core.language_models import FakeListChatModel
            >>> from langchain_ragspine import BM25Retriever
            >>> base = BM25Retriever.from_documents([Document(page_content="梅雨は六月から。", metadata={"chunk_id": "a#0"})])
            >>> mq = MultiQueryRetriever.from_llm(retriever=base, llm=FakeListChatModel(responses=["梅雨 六月"]))
            >>> [d.metadata["chunk_id"] for d in mq.invoke("梅雨はいつ？")]
            ['a#0']
        """
        if parser_key is not None:
            warnings.warn(
                "MultiQueryRetriever.from_llm: parser_key is ignored (it is deprecated and unused in LangChain too)",
                UserWarning,
                stacklevel=2,
            )
        return cls(base=retriever, llm=llm, prompt=prompt, include_original=include_original, **kwargs)

    def searches_original(self) -> bool:
        """The ``include_original`` field."""
        return self.include_original


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
