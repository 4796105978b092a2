"""PostgreSQL as the backend of :class:`~langchain_ragspine.vectorstores.RagSpineVectorStore` (issue 26, B5).

:class:`PostgresBackend` is a :class:`~langchain_ragspine.backends.base.StoreBackend` over a RagSpine store in
PostgreSQL with pgvector (the store ``ragspine ingest PATH --store postgresql://…`` writes)::

    backend = PostgresBackend("postgresql://rag@db/rag", make_embeddings("e5"))
    backend.upsert([Document("梅雨は六月から。", id="tsuyu", metadata={"lang": "ja"})])
    backend.search().lexical_search("梅雨", 4, {"lang": "ja"})        # [(record, BM25 score)]
    backend.get_by_ids(["tsuyu"])                                      # [Document(id="tsuyu", metadata={"lang": "ja"})]

Writes hold the store's writer lock (:mod:`langchain_ragspine.backends.postgres.lock`, as ``ingest`` does) from
reading the documents' current chunks to the commit, and go through :func:`~langchain_ragspine.backends.postgres.versions.write_versions`:
one transaction per call (every document version of an ``upsert`` / ``delete``, or none of them), BM25 postings and
typed metadata values written with the chunks, vectors cached by ``(model, chunk_id, content hash)``.  The versions
are merged as the directory store merges them (:func:`~langchain_ragspine.backends.versioning.merged_versions`) and
recorded as written by ``VECTORSTORE_WRITER``; a document the vector store creates is its own (``ragspine ingest``
of the same store keeps it).  Records carry the record marker
(:func:`~langchain_ragspine.backends.versioning.mark_record`, with the keys PostgreSQL's rows read back with), so
they read back — by id and from every search — with exactly the metadata written.

Search is :class:`~langchain_ragspine.backends.postgres.search.PostgresSearch` (BM25 over the postings, pgvector
exact below ``RAGSPINE_PG_HNSW_THRESHOLD`` vectors and HNSW above, filters compiled to SQL inside the query).
Parents are refused by name (:attr:`PostgresBackend.unsupported`, as
:class:`~langchain_ragspine.backends.postgres.chunk_store.PostgresChunkStore`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_ragspine.backends.base import check_vector_model
from langchain_ragspine.backends.directory.lock import check_lock_timeout
from langchain_ragspine.backends.postgres.chunk_store import PostgresChunkStore, is_postgres_url, redact_url
from langchain_ragspine.backends.postgres.lock import writer_lock
from langchain_ragspine.backends.postgres.search import PostgresSearch
from langchain_ragspine.backends.postgres.versions import write_versions
from langchain_ragspine.backends.versioning import (
    READ_BACK_KEYS,
    VECTORSTORE_WRITER,
    mark_record,
    merged_versions,
    record_doc_id,
    written_document,
    written_record,
)
from langchain_ragspine.embeddings.cache import model_key_for

__all__ = ["PostgresBackend"]


class _RecordSearch:
    """A :class:`PostgresSearch` whose results are the records as written (:func:`written_document`), and whose
    vector searches find nothing while the store holds no vectors of the model."""

    def __init__(self, search: PostgresSearch, has_vectors: bool) -> None:
        self._search = search
        self._has_vectors = has_vectors

    def has_vectors(self) -> bool:
        """Whether the store holds vectors of the model (else a vector search finds nothing)."""
        return self._has_vectors

    @property
    def uses_hnsw(self) -> bool:
        """Whether vector searches go through the store's HNSW index (``False`` while it has no vectors)."""
        return self._has_vectors and self._search.uses_hnsw

    def lexical_search(
        self, query: str, k: int, filter: Mapping[str, Any] | None = None, *, score_threshold: float | None = None
    ) -> list[tuple[Document, float]]:
        hits = self._search.lexical_search(query, k, filter, score_threshold=score_threshold)
        return [(written_document(d), s) for d, s in hits]

    def vector_search(
        self, vector: Sequence[float] | np.ndarray, k: int, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[Document, float]]:
        if not self._has_vectors:
            return []
        return [(written_document(d), s) for d, s in self._search.vector_search(vector, k, filter)]

    def vector_search_with_vectors(
        self, vector: Sequence[float] | np.ndarray, k: int, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[Document, float, np.ndarray]]:
        if not self._has_vectors:
            return []
        return [(written_document(d), s, v) for d, s, v in self._search.vector_search_with_vectors(vector, k, filter)]


class PostgresBackend:
    """A RagSpine store in PostgreSQL as a :class:`~langchain_ragspine.backends.base.StoreBackend` (see the module
    docstring).

    Args:
        url: the store's ``postgresql://`` URL (tables are created on first use; pool size from
            ``RAGSPINE_PG_POOL_SIZE``).
        embedding: the model of the store's vectors; it must be the model already recorded there, if any.
        ef_search: pgvector's ``hnsw.ef_search`` for searches through the HNSW index (default
            ``RAGSPINE_PG_EF_SEARCH``).
        lock_timeout: seconds a write waits for another writer of the store (an ``ingest``, another vector store);
            ``None`` (default): as long as it takes, ``0``: not at all.  Searches never wait.

    Raises:
        ValueError: ``url`` is not a ``postgresql://`` URL.
        TypeError: ``embedding`` is not an ``Embeddings``; a bad ``lock_timeout``.
        StoreError: the server cannot be reached; the store's vectors were made with another model;
            :class:`~langchain_ragspine.backends.directory.lock.StoreBusyError` (per write) when the wait for the
            writer lock runs out (nothing written).
    """

    #: What PostgreSQL refuses, by name (:func:`~langchain_ragspine.backends.base.refuse`): parents.
    unsupported: Mapping[str, str] = PostgresChunkStore.unsupported
    backend_name: ClassVar[str] = PostgresChunkStore.backend_name

    def __init__(
        self, url: str, embedding: Embeddings, *, ef_search: int | None = None, lock_timeout: float | None = None
    ) -> None:
        if not isinstance(embedding, Embeddings):
            raise TypeError(f"embedding must be a langchain_core Embeddings, got {type(embedding).__name__}")
        if not is_postgres_url(url):
            raise ValueError(f"not a PostgreSQL URL (postgresql://…): {redact_url(str(url))!r}")
        self.url = url
        self.embedding = embedding
        self.ef_search = ef_search
        self.lock_timeout = check_lock_timeout(lock_timeout)
        self.model_key = model_key_for(embedding)
        self._search: _RecordSearch | None = None
        self.check_model()

    @property
    def where(self) -> str:
        """The URL without its password."""
        return redact_url(self.url)

    def check_model(self) -> None:
        """Refuse a store whose vectors another model made
        (:func:`~langchain_ragspine.backends.base.check_vector_model`, the rule of every backend).

        Raises:
            StoreError: naming both models.
        """
        with PostgresChunkStore(self.url) as store:
            saved = store.meta("vector_model_key")
        check_vector_model(saved, self.model_key, self.where)

    # -- writing --------------------------------------------------------------------------------------------------
    def upsert(self, records: Sequence[Document]) -> None:
        """Insert or replace ``records`` by id, each touched document one new version, all in one transaction
        (see the module docstring).

        Raises:
            ValueError, TypeError: the store's validation (a NUL character, …); StoreError: the database or the
                model failed (nothing written); StoreBusyError: as the class docstring.
        """
        ids = sorted({str(r.id) for r in records})
        with writer_lock(self.url, timeout=self.lock_timeout):
            with PostgresChunkStore(self.url) as store:
                holders = {c.doc_id for c in store.get_chunks(ids).values()} if ids else set()
                doc_ids = sorted({record_doc_id(r) for r in records} | holders)
                active = list(store.iter_chunks(doc_id=doc_ids)) if doc_ids else []
            self._write(merged_versions([mark_record(r, also=READ_BACK_KEYS) for r in records], active))

    def delete(self, ids: Sequence[str]) -> None:
        """Remove the records with these ids from their documents' next versions (a document left empty is
        retracted); unknown ids are ignored.

        Raises:
            StoreError, StoreBusyError: as :meth:`upsert`.
        """
        wanted = sorted({str(i) for i in ids})
        with writer_lock(self.url, timeout=self.lock_timeout):
            with PostgresChunkStore(self.url) as store:
                doc_ids = sorted({c.doc_id for c in store.get_chunks(wanted).values()}) if wanted else []
                active = list(store.iter_chunks(doc_id=doc_ids)) if doc_ids else []
            versions = merged_versions([], active, delete=wanted)
            if versions:
                self._write(versions)

    def _write(self, versions: Mapping[str, list[Document]]) -> None:
        if not versions:
            return
        self.check_model()  # another writer may have recorded another model meanwhile
        write_versions(self.url, versions, embedding=self.embedding, lock_timeout=self.lock_timeout,
                       writer=VECTORSTORE_WRITER)
        self._search = None  # the record (model, dimension, HNSW index) may have changed

    # -- reading --------------------------------------------------------------------------------------------------
    def get_by_ids(self, ids: Sequence[str]) -> list[Document]:
        """The current records with these ids, in the order asked, as written; unknown ids left out (RESTRICTED
        ones included: this reads the store — the vector store gates them).

        Raises:
            StoreError: the query fails.
        """
        wanted = [str(i) for i in ids]
        if not wanted:
            return []
        with PostgresChunkStore(self.url, read_only=True) as store:
            found = store.get_chunks(wanted)
        return [written_record(found[i]) for i in wanted if i in found]

    def search(self) -> _RecordSearch:
        """Search over the store now (BM25, pgvector); results the records as written."""
        if self._search is None or not self._search.has_vectors():
            with PostgresChunkStore(self.url) as store:
                has_vectors = store.meta("vector_model_key") == self.model_key
            search = PostgresSearch(self.url, model_key=self.model_key, ef_search=self.ef_search)
            self._search = _RecordSearch(search, has_vectors)
        return self._search

    def close(self) -> None:
        """Nothing to release: connections come from the URL's shared pool (closed at exit)."""
