"""A PostgreSQL + pgvector RagSpine store as a LangChain ``VectorStore``.

:class:`PostgresVectorStore` is the store ``ragspine ingest PATH --store postgresql://…`` writes, seen through
LangChain's ``VectorStore`` face (the rules for ids, versions, RESTRICTED and scores are
:class:`~langchain_ragspine.vectorstores.base.VersionedVectorStore`'s)::

    store = PostgresVectorStore("postgresql://rag@db/rag", embedding=make_embeddings("e5"))
    store.add_documents([Document("梅雨は六月から。", metadata={"lang": "ja"})])
    store.similarity_search("梅雨はいつ", k=4, filter={"lang": "ja"})
    retriever = store.as_retriever(search_kwargs={"k": 8})

Search is :class:`~langchain_ragspine.retrievers.postgres.PostgresDenseRetriever`'s (pgvector, exact below
``RAGSPINE_PG_HNSW_THRESHOLD`` vectors, HNSW with iterative scans above; filters compiled to SQL and applied inside
the query).  ``max_marginal_relevance_search`` (and ``as_retriever(search_type="mmr")``) reads the ``fetch_k``
candidates with their stored vectors in the same query
(:meth:`~langchain_ragspine.retrievers.postgres.PostgresDenseRetriever.search_by_vector_with_embeddings`) and picks
``k`` with ``langchain_core``'s ``maximal_marginal_relevance``, as the directory store does.  Writes hold the store's
writer lock (:mod:`langchain_ragspine.backends.postgres.lock`, as ``ingest`` does) and go through
:func:`langchain_ragspine.postgres.write_versions`: one transaction per call (every
document version of an ``add_documents`` / ``delete`` call, or none of them: a failure part way — disk full — leaves
the store as it was, and the error says so), BM25 postings and typed metadata values written with the chunks,
vectors cached by ``(model, chunk_id, content hash)`` so an unchanged chunk is never embedded twice.  Every version
it writes is recorded as written by ``VECTORSTORE_WRITER``, and a document it creates is its own: ``ragspine
ingest`` of the same store keeps it (ingest retracts only the documents it owns, and takes over one it writes from
a file).  The same database then serves
``ragspine search --store URL`` (BM25, hybrid) unchanged.  See ``docs/postgres.md``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_ragspine.backends.directory.chunk_store import VECTORSTORE_WRITER
from langchain_ragspine.backends.directory.lock import check_lock_timeout
from langchain_ragspine.backends.postgres.chunk_store import PostgresChunkStore, is_postgres_url, redact_url
from langchain_ragspine.backends.postgres.lock import writer_lock
from langchain_ragspine.embeddings.cache import model_key_for
from langchain_ragspine.errors import StoreError
from langchain_ragspine.postgres import write_versions
from langchain_ragspine.vectorstores.base import VersionedVectorStore

__all__ = ["PostgresVectorStore"]


class PostgresVectorStore(VersionedVectorStore):
    """A LangChain ``VectorStore`` over a RagSpine store in PostgreSQL with pgvector.

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
    commit, so they never interleave with an ``ingest`` or another writer: a :class:`~langchain_ragspine.backends.directory.lock.StoreBusyError`
    (nothing written) when the wait runs out.

    Raises:
        ValueError: ``url`` is not a ``postgresql://`` URL.
        TypeError: ``embedding`` is not an ``Embeddings``; a bad ``lock_timeout``.
        StoreError: the server cannot be reached; the store's vectors were made with another model.
    """

    def __init__(
        self, url: str, embedding: Embeddings, *, ef_search: int | None = None, lock_timeout: float | None = None
    ) -> None:
        super().__init__(embedding)
        if not is_postgres_url(url):
            raise ValueError(f"not a PostgreSQL URL (postgresql://…): {redact_url(str(url))!r}")
        self.url = url
        self.ef_search = ef_search
        self.lock_timeout = check_lock_timeout(lock_timeout)
        self._key = model_key_for(embedding)
        self._retriever: Any = None
        self._check_model()

    def _check_model(self) -> None:
        with PostgresChunkStore(self.url) as store:
            saved = store.meta("vector_model_key")
        if saved is not None and saved != self._key:
            raise StoreError(
                f"this store's vectors were made with {saved}, not {self._key}; open it with that model",
                path=redact_url(self.url),
            )

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings,
        metadatas: list[dict[str, Any]] | None = None,
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

    # -- the backend ------------------------------------------------------------------------------------------------
    def _active_chunks(self, doc_ids: Sequence[str]) -> dict[str, list[Document]]:
        out: dict[str, list[Document]] = {}
        if not doc_ids:
            return out
        with PostgresChunkStore(self.url) as store:
            for c in store.iter_chunks(doc_id=list(doc_ids)):
                doc = c.to_document()
                out.setdefault(str(doc.metadata["doc_id"]), []).append(doc)
        return out

    def _writing(self) -> contextlib.AbstractContextManager[object]:
        return writer_lock(self.url, timeout=self.lock_timeout)

    def _write_versions(self, versions: Mapping[str, list[Document]]) -> None:
        self._check_model()  # another writer may have recorded another model meanwhile
        write_versions(self.url, versions, embedding=self._embedding, lock_timeout=self.lock_timeout,
                       writer=VECTORSTORE_WRITER)
        self._retriever = None  # the record (model, dimension, HNSW index) may have changed

    def _where(self) -> str:
        return redact_url(self.url)

    def _read_by_ids(self, ids: Sequence[str]) -> list[Document]:
        with PostgresChunkStore(self.url, read_only=True) as store:
            return store.get_by_ids(list(ids))

    def _search_by_vector(
        self, vector: Sequence[float], k: int, filter: Mapping[str, Any] | None
    ) -> list[tuple[Document, float]]:
        retriever = self._dense()
        if retriever is None:
            return []
        return list(retriever.search_by_vector(np.asarray(vector, dtype=np.float32), k=k, filter=filter))

    def _search_by_vector_with_embeddings(
        self, vector: Sequence[float] | np.ndarray, k: int, filter: Mapping[str, Any] | None
    ) -> list[tuple[Document, float, np.ndarray]]:
        retriever = self._dense()
        if retriever is None:
            return []
        return list(retriever.search_by_vector_with_embeddings(np.asarray(vector, dtype=np.float32), k=k,
                                                                filter=filter))

    def _dense(self) -> Any:
        """The dense retriever over the store's vectors, or ``None`` while the store has none."""
        if self._retriever is None:
            from langchain_ragspine.retrievers.postgres import PostgresDenseRetriever

            with PostgresChunkStore(self.url) as store:
                if store.meta("vector_model_key") != self._key:
                    return None
            self._retriever = PostgresDenseRetriever(
                url=self.url, embedding=self._embedding, model_key=self._key, ef_search=self.ef_search
            )
        return self._retriever
