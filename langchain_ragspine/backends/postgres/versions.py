"""Writing document versions into a PostgreSQL store: what ``ingest``, :func:`add_documents` and the vector store's
:class:`~langchain_ragspine.backends.postgres.backend.PostgresBackend` share (issue 26: the PostgreSQL backend in
one folder).

::

    write_versions(url, {"law-1": chunks, "law-2": []}, embedding=make_embeddings("e5"))  # one transaction
    add_documents(url, chunk_documents, embedding=emb)                                   # grouped by doc_id
    active_document_count(url)                                                           # 2

A write holds the store's writer lock (:func:`~langchain_ragspine.backends.postgres.lock.writer_lock`), embeds the
searchable chunks the store has no vector of *before* anything changes
(:func:`~langchain_ragspine.embeddings.cache.warm_embedding_cache`, :func:`embed_missing`), writes every version of
the call in one transaction, then deletes the vectors no longer searchable and records the model
(:func:`record_vectors`: key, spec, dimension, and an HNSW index once the store holds ``RAGSPINE_PG_HNSW_THRESHOLD``
vectors).  The rules of a version are :mod:`~langchain_ragspine.backends.versioning`'s, as for the directory store.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_ragspine.backends.postgres.chunk_store import (
    META,
    PostgresChunkStore,
    PostgresConnection,
    check_store_schema,
    redact_url,
    store_relations,
)
from langchain_ragspine.backends.postgres.lock import writer_lock
from langchain_ragspine.backends.postgres.vectors import (
    PostgresEmbeddingCache,
    ensure_hnsw_index,
    prune_vectors,
)
from langchain_ragspine.backends.versioning import INGEST_WRITER
from langchain_ragspine.documents import has_visible_text
from langchain_ragspine.embeddings.cache import model_key_for, warm_embedding_cache
from langchain_ragspine.settings import configured_number

__all__ = ["VECTOR_META", "active_document_count", "add_documents", "embed_missing", "record_vectors", "write_versions"]

#: The store's record of its vectors' model (``ragspine_meta`` keys): the model key, its spec, the dimension.
VECTOR_META = ("vector_model_key", "vector_embedding", "vector_dim")


def active_document_count(url: str, *, owner: str | None = None) -> int:
    """Active documents of the store at ``url`` (0 when the database holds none yet); with ``owner`` (e.g.
    :data:`~langchain_ragspine.backends.versioning.INGEST_WRITER`), only those that writer owns — then a store that
    predates owners is migrated first (opened writable once, as the ingest about to write it would), so the count is
    of the documents its owners give that writer.

    Raises:
        StoreError: the server cannot be reached; the first schema of the URL's ``search_path`` does not exist.
    """
    db = PostgresConnection(url)
    with db.connection() as conn:
        check_store_schema(conn, redact_url(url))
        if not store_relations(conn, META):
            return 0
    with PostgresChunkStore(url, read_only=owner is None) as store:
        return len(store.doc_ids(owner=owner))


def add_documents(
    url: str,
    documents: Sequence[Document],
    *,
    embedding: Embeddings | None = None,
    spec: str | None = None,
    progress: bool = False,
    lock_timeout: float | None = None,
    writer: str = INGEST_WRITER,
) -> list[str]:
    """Write chunk ``Document``\\ s (each with ``metadata["doc_id"]`` and ``chunk_id``) into the store at ``url``:
    the chunks of each ``doc_id`` become that document's new version, in the order given (documents not named are
    left alone).  With ``embedding`` their vectors are stored first (as ``ingest`` does).  Returns the
    ``chunk_id``\\ s, in order.  Writes under the store's writer lock, as :func:`write_versions`, recorded as
    ``writer``'s (default :data:`~langchain_ragspine.backends.versioning.INGEST_WRITER`: ingest owns
    the documents and retracts them when a later ingest's paths lack them; pass another name to keep them).

    Raises:
        ValueError: a document without ``doc_id``; the errors of ``replace_doc_chunks``.
        StoreError: the database failed; :class:`~langchain_ragspine.backends.directory.lock.StoreBusyError`: another writer
            held the lock longer than ``lock_timeout``.
    """
    groups: dict[str, list[Document]] = {}
    for i, doc in enumerate(documents):
        doc_id = doc.metadata.get("doc_id")
        if not isinstance(doc_id, str) or not doc_id:
            raise ValueError(f"documents[{i}] has no metadata 'doc_id' (a non-empty string)")
        groups.setdefault(doc_id, []).append(doc)
    write_versions(url, groups, embedding=embedding, spec=spec, progress=progress, lock_timeout=lock_timeout,
                   writer=writer)
    return [str(d.metadata.get("chunk_id", d.id)) for d in documents]


def write_versions(
    url: str,
    versions: Mapping[str, Sequence[Document]],
    *,
    embedding: Embeddings | None = None,
    spec: str | None = None,
    progress: bool = False,
    lock_timeout: float | None = None,
    writer: str = INGEST_WRITER,
) -> None:
    """Make each ``versions[doc_id]`` (chunk ``Document``\\ s of that ``doc_id``) the next version of its
    document, all in one transaction (every document's new version, or none); an empty sequence retracts the
    document.  ``writer`` is recorded with each version and decides the documents' owners
    (:meth:`~langchain_ragspine.backends.postgres.chunk_store.PostgresChunkStore.replace_doc_chunks`; default
    :data:`~langchain_ragspine.backends.versioning.INGEST_WRITER`,
    :class:`~langchain_ragspine.vectorstores.PostgresVectorStore` passes ``VECTORSTORE_WRITER``).  With ``embedding`` the
    searchable chunks' vectors are stored first (a failing model leaves the store as it was), vectors no longer
    searchable are deleted and the store records the model (as ``ingest`` does).  All of it holds the
    store's writer lock (:func:`~langchain_ragspine.backends.postgres.lock.writer_lock`: after another writer — an ingest —
    has finished, waiting at most ``lock_timeout`` seconds; ``None``: as long as it takes).

    Raises:
        ValueError, TypeError: the errors of ``replace_doc_chunks``.
        RagSpineError / StoreError: the embedding model or the database failed.
        StoreBusyError: another writer held the lock longer than ``lock_timeout``; nothing was written.
    """
    with writer_lock(url, timeout=lock_timeout), PostgresChunkStore(url) as store:
        embed_missing(store, embedding, [c for chunks in versions.values() for c in chunks], progress)
        with store.db.atomic():  # every version of the call, or none (a failure part way leaves the store as it was)
            for doc_id, chunks in versions.items():
                store.replace_doc_chunks(doc_id, list(chunks), writer=writer)
        record_vectors(store, embedding, spec)
        store.analyze()


def embed_missing(
    store: PostgresChunkStore, embedding: Embeddings | None, chunks: Sequence[Document], progress: bool | None
) -> int:
    """Embed into the store's vector table the searchable chunks of ``chunks`` with visible text that it has no
    vector of (RESTRICTED ones never: :func:`~langchain_ragspine.embeddings.cache.warm_embedding_cache`); returns
    how many were sent to the model (``0`` without ``embedding``).

    Raises:
        RagSpineError: the model failed (the store is unchanged); StoreError: a dimension differing from the cached
            vectors'.
    """
    if embedding is None:
        return 0
    cache = PostgresEmbeddingCache(store.db)
    return warm_embedding_cache(cache, embedding, [c for c in chunks if has_visible_text(c)], progress).last_embedded


def record_vectors(store: PostgresChunkStore, embedding: Embeddings | None, spec: str | None) -> str | None:
    """Delete the vectors no longer searchable; record ``embedding`` as the store's model (``spec``: how to make it
    again, kept from the record when ``None`` and the model is the same) and build its HNSW index once the store
    holds ``RAGSPINE_PG_HNSW_THRESHOLD`` vectors; without ``embedding``, forget the model record (the vectors stay).
    Returns the recorded model key (``None``: none, or no vector of the model yet)."""
    prune_vectors(store.db)
    if embedding is None:
        if store.meta("vector_model_key") is not None:
            store.set_meta(dict.fromkeys(VECTOR_META))
        return None
    key = model_key_for(embedding)
    dim = PostgresEmbeddingCache(store.db).dim(key)
    if dim is None:
        return None
    if spec is None and store.meta("vector_model_key") == key:
        spec = store.meta("vector_embedding")  # the same model written through the Python API keeps its spec
    store.set_meta({"vector_model_key": key, "vector_embedding": spec, "vector_dim": str(dim)})
    ensure_hnsw_index(store.db, key, dim, threshold=int(configured_number("pg_hnsw_threshold")))
    return key
