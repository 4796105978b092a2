"""A PostgreSQL + pgvector RagSpine store as a LangChain ``VectorStore``: :class:`PostgresVectorStore`.

:class:`PostgresVectorStore` is :class:`~langchain_ragspine.vectorstores.RagSpineVectorStore` over the PostgreSQL
backend (:class:`~langchain_ragspine.backends.postgres.backend.PostgresBackend`) — the store ``ragspine ingest PATH
--store postgresql://…`` writes — opened from its URL::

    store = PostgresVectorStore("postgresql://rag@db/rag", embedding=make_embeddings("e5"))
    store.add_documents([Document("梅雨は六月から。", metadata={"lang": "ja"})])
    store.similarity_search("梅雨はいつ", k=4, filter={"lang": "ja"})
    retriever = store.as_retriever(search_kwargs={"k": 8})             # "similarity", LangChain's default
    store.as_retriever(search_type="hybrid")                           # BM25 + pgvector, fused

Everything is the directory store's (ids, versions, RESTRICTED, filters, search types ``similarity``,
``similarity_score_threshold``, ``mmr``, ``bm25``, ``hybrid``, the relevance score = the cosine clipped to [0, 1],
records read back as written, ``add_documents(batch_size=…)`` for ``langchain_core.indexing.index()``), the same
documents and scores for the same records (``tests/integration_tests/postgres/test_postgres_parity.py``); one
difference: :meth:`as_retriever` defaults to LangChain's ``"similarity"`` (as this class always did), the directory
store's to ``"hybrid"``.  Writes hold the store's writer lock and are one transaction each; every version is
recorded as written by ``VECTORSTORE_WRITER`` (``ragspine ingest`` of the same store keeps the documents it
created).  The same database then serves ``ragspine search --store URL`` unchanged.  See ``docs/postgres.md``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from langchain_core.embeddings import Embeddings

from langchain_ragspine.backends.postgres.backend import PostgresBackend
from langchain_ragspine.vectorstores.store import RagSpineVectorStore

__all__ = ["PostgresVectorStore"]


class PostgresVectorStore(RagSpineVectorStore):
    """:class:`~langchain_ragspine.vectorstores.RagSpineVectorStore` over a RagSpine store in PostgreSQL with
    pgvector (see the module docstring).

    Args:
        url: the store's ``postgresql://`` URL (tables are created on first write; pool size from
            ``RAGSPINE_PG_POOL_SIZE``).
        embedding: the model of the store's vectors.  A store holds one model's vectors for search; it must be the
            model already recorded there, if any.
        ef_search: pgvector's ``hnsw.ef_search`` for searches through the HNSW index (default
            ``RAGSPINE_PG_EF_SEARCH``).
        lock_timeout: seconds a write (``add_documents`` / ``add_texts`` / ``delete``) waits for another writer of
            the store (an ``ingest``, another vector store) to finish; ``None`` (default): as long as it takes, ``0``:
            not at all (:mod:`langchain_ragspine.backends.postgres.lock`).  Searches never wait.

    Writes hold the store's writer lock for the whole call, from reading the documents' current chunks to the
    commit, so they never interleave with an ``ingest`` or another writer: a
    :class:`~langchain_ragspine.backends.directory.lock.StoreBusyError` (nothing written) when the wait runs out.

    Raises:
        ValueError: ``url`` is not a ``postgresql://`` URL.
        TypeError: ``embedding`` is not an ``Embeddings``; a bad ``lock_timeout``.
        StoreError: the server cannot be reached; the store's vectors were made with another model.
    """

    #: LangChain's default search type, as this class always had (the directory store's is ``"hybrid"``).
    default_search_type: ClassVar[str] = "similarity"
    backend: PostgresBackend

    def __init__(
        self, url: str, embedding: Embeddings, *, ef_search: int | None = None, lock_timeout: float | None = None
    ) -> None:
        super().__init__(PostgresBackend(url, embedding, ef_search=ef_search, lock_timeout=lock_timeout), embedding)

    @property
    def url(self) -> str:
        """The store's URL."""
        return self.backend.url

    @property
    def ef_search(self) -> int | None:
        """pgvector's ``hnsw.ef_search`` of the searches (``None``: ``RAGSPINE_PG_EF_SEARCH``)."""
        return self.backend.ef_search

    @property
    def lock_timeout(self) -> float | None:
        """Seconds a write waits for another writer (``None``: as long as it takes)."""
        return self.backend.lock_timeout

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings,
        metadatas: list[dict[Any, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        url: str | None = None,
        **kwargs: Any,
    ) -> PostgresVectorStore:
        """A store at ``url`` (keyword, required) with ``texts`` added (LangChain's ``from_texts`` /
        ``from_documents``; other keywords go to the constructor).

        Raises:
            ValueError: no ``url``; see :meth:`add_texts`.
        """
        if url is None:
            raise ValueError("PostgresVectorStore.from_texts needs url='postgresql://…'")
        store = cls(url, embedding, **kwargs)
        store.add_texts(texts, metadatas, ids=ids)
        return store
