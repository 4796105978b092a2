"""PostgreSQL's search as the backend interface's :class:`~langchain_ragspine.backends.base.SearchBackend`.

:class:`PostgresSearch` answers ``lexical_search`` / ``vector_search`` / ``vector_search_with_vectors`` over a store's
search tables with the SQL of :class:`~langchain_ragspine.retrievers.postgres.PostgresBM25Retriever` (BM25 over the
postings) and :class:`~langchain_ragspine.retrievers.postgres.PostgresDenseRetriever` (pgvector), filters compiled to
SQL inside the query (:mod:`langchain_ragspine.filters.sql`)::

    search = PostgresSearch("postgresql://rag@db/rag", embedding=make_embeddings("e5"))
    search.lexical_search("梅雨 六月", 4, {"lang": "ja"})     # [(Document, BM25 score)]
    search.vector_search(vector, 4)                           # [(Document, cosine)]

The retrievers are made on first use (a store without vectors fails only a vector search) and imported then: the
SQL still lives in :mod:`langchain_ragspine.retrievers.postgres` (B5 of issue 26 moves it here).  Results are the
stored chunks as :meth:`~langchain_ragspine.backends.versioning.StoredChunk.to_document` gives them, without the
retrievers' ``metadata["scores"]`` (the score is the pair's second element), as the directory backend's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

__all__ = ["PostgresSearch"]


def _unscored(doc: Document) -> Document:
    """``doc`` without the retrievers' ``metadata["scores"]``."""
    metadata = {k: v for k, v in doc.metadata.items() if k != "scores"}
    return Document(page_content=doc.page_content, metadata=metadata, id=doc.id)


class PostgresSearch:
    """Lexical and vector search over a PostgreSQL store (see the module docstring).

    Args:
        url: the store's ``postgresql://`` URL.
        embedding: the model of the store's vectors (needed by the vector searches only; the query vector is the
            caller's, the model names which vectors are searched when ``model_key`` is not given).
        model_key: the cache key of the vectors searched (default: the store's ``vector_model_key``).
        ef_search: pgvector's ``hnsw.ef_search`` for searches through the HNSW index (default
            ``RAGSPINE_PG_EF_SEARCH``).

    Raises:
        StoreError: (on first use) no store at ``url``; (vector search) the store has no vectors; stale postings.
        ValueError: (vector search) no ``embedding`` was given.
    """

    def __init__(
        self, url: str, embedding: Embeddings | None = None, *, model_key: str | None = None,
        ef_search: int | None = None,
    ) -> None:
        self.url = url
        self.embedding = embedding
        self.model_key = model_key
        self.ef_search = ef_search
        self._bm25: Any = None
        self._dense: Any = None

    def _lexical(self) -> Any:
        if self._bm25 is None:
            from langchain_ragspine.retrievers.postgres import PostgresBM25Retriever

            self._bm25 = PostgresBM25Retriever(url=self.url)
        return self._bm25

    def _vectors(self) -> Any:
        if self._dense is None:
            if self.embedding is None:
                raise ValueError("PostgresSearch needs embedding= (the model of the store's vectors) to search them")
            from langchain_ragspine.retrievers.postgres import PostgresDenseRetriever

            self._dense = PostgresDenseRetriever(url=self.url, embedding=self.embedding, model_key=self.model_key,
                                                 ef_search=self.ef_search)
        return self._dense

    def dense_retriever(self) -> Any:
        """The :class:`~langchain_ragspine.retrievers.postgres.PostgresDenseRetriever` of the vector searches (made
        on first use).

        Raises:
            ValueError: no ``embedding`` was given.
        """
        return self._vectors()

    def lexical_search(
        self, query: str, k: int, filter: Mapping[str, Any] | None = None, *, score_threshold: float | None = None
    ) -> list[tuple[Document, float]]:
        """The ``k`` best ``(chunk, BM25 score)`` (score > 0, ``>= score_threshold``) matching ``filter``.

        Raises:
            TypeError, ValueError: a bad ``k``, filter or threshold; a query longer than
                :data:`~langchain_ragspine.retrievers.bm25.MAX_QUERY_CHARS`.
            StoreError: the query fails or runs longer than the statement timeout.
        """
        hits = self._lexical().search(query, k=k, filter=filter, score_threshold=score_threshold)
        return [(_unscored(d), s) for d, s in hits]

    def vector_search(
        self, vector: Sequence[float] | np.ndarray, k: int, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[Document, float]]:
        """The ``k`` best ``(chunk, cosine)`` for a query vector of shape ``(d,)`` matching ``filter``.

        Raises:
            TypeError, ValueError: a bad ``k`` or filter; a vector of another dimension or not finite.
            StoreError: the store has no vectors; the query fails.
        """
        hits = self._vectors().search_by_vector(np.asarray(vector, dtype=np.float32), k=k, filter=filter)
        return [(_unscored(d), s) for d, s in hits]

    def vector_search_with_vectors(
        self, vector: Sequence[float] | np.ndarray, k: int, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[Document, float, np.ndarray]]:
        """:meth:`vector_search` with each hit's stored unit vector (float32, shape ``(d,)``).

        Raises:
            TypeError, ValueError, StoreError: as :meth:`vector_search`.
        """
        hits = self._vectors().search_by_vector_with_embeddings(np.asarray(vector, dtype=np.float32), k=k,
                                                                filter=filter)
        return [(_unscored(d), s, v) for d, s, v in hits]
