"""The PostgreSQL backend for ``ingest`` and the retrieval modes: ``--store postgresql://…`` everywhere a store
directory goes.

:func:`~langchain_ragspine.pipeline.ingest.ingest` hands a ``postgresql://`` URL to :func:`ingest_postgres`, which writes
the versioned chunk store and its search tables (:class:`~langchain_ragspine.backends.postgres.chunk_store.PostgresChunkStore`)
and, with an embedding model, the chunk vectors (:mod:`langchain_ragspine.backends.postgres.vectors`).
:func:`~langchain_ragspine.pipeline.sources.open_source` hands it to :class:`PostgresSource`, the
:class:`~langchain_ragspine.pipeline.modes.RetrieverSource` whose channels are
:class:`~langchain_ragspine.retrievers.postgres.PostgresBM25Retriever` and
:class:`~langchain_ragspine.retrievers.postgres.PostgresDenseRetriever` — so every registered mode (``bm25``,
``vector``, ``hybrid``, ``auto``, wrappers), ``search``, ``ask``, ``eval`` and the graphs run on it unchanged, with
fusion in the package as for the file store.  See ``docs/postgres.md``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever

from langchain_ragspine.backends.directory.chunk_store import INGEST_WRITER
from langchain_ragspine.backends.postgres.chunk_store import PostgresChunkStore
from langchain_ragspine.backends.postgres.lock import writer_lock
from langchain_ragspine.backends.postgres.vectors import (
    chunks_without_vectors,
)
from langchain_ragspine.backends.postgres.versions import (
    active_document_count,
    add_documents,
    embed_missing,
    record_vectors,
    write_versions,
)
from langchain_ragspine.embeddings.cache import model_key_for
from langchain_ragspine.embeddings.factory import make_embeddings, resolve_embedding
from langchain_ragspine.errors import StoreError, warn_stale
from langchain_ragspine.pipeline.modes import StoreBackedSource
from langchain_ragspine.pipeline.stages import IngestSummary, Split, write_documents
from langchain_ragspine.retrievers.bm25 import BM25Retriever
from langchain_ragspine.retrievers.dense import DenseRetriever

__all__ = ["PostgresSource", "active_document_count", "add_documents", "ingest_postgres", "write_versions"]

def ingest_postgres(
    url: str,
    split: Sequence[Split],
    summary: IngestSummary,
    *,
    tokenizer: str,
    embedding: Embeddings | None,
    spec: str | None,
    retract_missing: bool,
    active_before: int,
    progress: bool | None,
    lock_timeout: float | None = None,
) -> None:
    """The store-writing half of :func:`~langchain_ragspine.pipeline.ingest.ingest` for a ``postgresql://`` URL (the
    load and split stages and the refusal of an empty run happen there first); the stages of
    :mod:`~langchain_ragspine.pipeline.stages` that apply to a PostgreSQL store, in this order:

    1. Lexical index: the store's BM25 tokenizer becomes ``tokenizer`` (every posting rewritten, in one
       transaction, when it differs from the recorded name or version).
    2. Embed (:func:`~langchain_ragspine.pipeline.stages.warm_embedding_cache`): with ``embedding``, the new or
       changed chunks that are searchable and have visible text are embedded into ``ragspine_embeddings``
       *before* the store changes (a failing model leaves the store as it was).
       So are the searchable chunks of the documents this ingest keeps and does not write — other writers'
       (the vector store's), and with ``retract_missing=False`` its own absent ones — that lack a vector of the
       model (a new model), so every document stays visible to the dense channel.
    3. Write versions: each document becomes a new version in its own transaction, with its postings and typed
       values (:func:`~langchain_ragspine.pipeline.stages.write_documents`, shared with the file store), written by
       :data:`~langchain_ragspine.backends.directory.chunk_store.INGEST_WRITER`; absent documents that ingest owns
       are retracted (those another writer created and ingest never wrote are kept).
    4. Vectors no longer searchable are deleted; the store records the model (key, spec, dimension) and gets an
       HNSW index once it holds ``RAGSPINE_PG_HNSW_THRESHOLD`` vectors.  Without ``embedding`` the model record is
       dropped (the vectors stay, as the file store keeps its cache).  The planner's statistics are refreshed.

    All of it holds the store's writer lock (:func:`~langchain_ragspine.backends.postgres.lock.writer_lock`, waiting
    at most ``lock_timeout`` seconds; ``None``: as long as it takes) —
    :func:`~langchain_ragspine.pipeline.ingest.ingest` has taken it before reading the store.

    Raises:
        RagSpineError / StoreError: the embedding model or the database failed (the store keeps its committed
            versions).
        StoreBusyError: another writer held the lock longer than ``lock_timeout``; nothing was written.
    """
    with writer_lock(url, timeout=lock_timeout), PostgresChunkStore(url) as store:
        generation = store.generation
        rewritten = store.set_tokenizer(tokenizer)
        to_embed = [c for _, chunks, _ in split for c in chunks]
        if embedding is not None:  # and the kept documents' chunks the model has no vector of
            written = [str(doc.metadata["doc_id"]) for doc, _, _ in split]
            retracting = retract_missing and not summary.skipped
            to_embed += chunks_without_vectors(store, model_key_for(embedding), skip_doc_ids=written,
                                               skip_owner=INGEST_WRITER if retracting else None)
        summary.embedded = embed_missing(store, embedding, to_embed, progress)
        write_documents(store, split, summary, retract_missing=retract_missing, active_before=active_before,
                        progress=progress)
        summary.dense = record_vectors(store, embedding, spec)
        summary.index_rebuilt = rewritten or store.generation != generation
        if summary.index_rebuilt:
            store.analyze()


class PostgresSource(StoreBackedSource[PostgresChunkStore]):
    """The channels of a PostgreSQL store, for the mode registry (:mod:`langchain_ragspine.pipeline.modes`) — the twin of
    :class:`~langchain_ragspine.pipeline.sources.StoreSource`.

    Use it as a context manager (it holds the store open, read-only)::

        with PostgresSource("postgresql://localhost/rag") as source:
            retriever = build_retriever("hybrid", source, k=10)

    Args:
        url: the store's ``postgresql://`` URL.
        embedding: the query encoder — a spec or an ``Embeddings``; default: the one the vectors were made with
            (its spec is recorded at ingest).  Given explicitly, it must be that model.

    The BM25 channel is :class:`~langchain_ragspine.retrievers.postgres.PostgresBM25Retriever` for the store's
    tokenizer (``tokenizer=None`` or its name), or an in-memory
    :class:`~langchain_ragspine.retrievers.bm25.BM25Retriever` over the store's chunks for another tokenizer
    (evaluation compares tokenizers this way) and, with a :class:`~langchain_ragspine.errors.StaleIndexWarning`,
    when the postings were written by another version of the tokenizer.  The dense channel is
    :class:`~langchain_ragspine.retrievers.postgres.PostgresDenseRetriever`.  Channels are made on first use and
    kept.

    Raises:
        StoreError: no store at ``url`` (on entering).
    """

    #: What this backend refuses, by name (:func:`~langchain_ragspine.backends.base.refuse`): its chunk store's.
    unsupported: ClassVar[Mapping[str, str]] = PostgresChunkStore.unsupported
    backend_name: ClassVar[str] = PostgresChunkStore.backend_name

    def __init__(self, url: str, *, embedding: str | Embeddings | None = None) -> None:
        self.url = url
        self.embedding = embedding
        self._bm25: dict[tuple[int, str], BaseRetriever] = {}
        self._dense: dict[int, BaseRetriever | None] = {}

    def _open(self) -> PostgresChunkStore:
        return PostgresChunkStore(self.url, read_only=True)

    def documents(self) -> list[Document]:
        """The store's active chunks (RESTRICTED ones included: retrievers built from them leave those out)."""
        return [c.to_document() for c in self.store.iter_chunks()]

    def bm25(self, *, k: int, tokenizer: str | None = None) -> BaseRetriever:
        """BM25 in SQL for the store's tokenizer; in memory for another (see the class docstring)."""
        from langchain_ragspine.retrievers.postgres import PostgresBM25Retriever

        store = self.store
        own = store.tokenizer
        name = own if tokenizer is None else tokenizer.strip().lower()
        key = (k, name)
        if key not in self._bm25:
            if name == own and store.postings_are_current():
                self._bm25[key] = PostgresBM25Retriever(url=self.url, k=k)
            else:
                if name == own:
                    warn_stale(
                        f"{store.path}: BM25 postings were written by another version of tokenizer {own!r}; "
                        "BM25 built in memory from the store — run `ragspine ingest` again to rewrite them "
                        "(documents other writers added, such as the vector store's, are kept, and their postings "
                        "rewritten too)"
                    )
                self._bm25[key] = BM25Retriever.from_documents(self.documents(), k=k, tokenizer=name)
        return self._bm25[key]

    def dense(self, *, k: int, required: bool, mode: str) -> BaseRetriever | None:
        """:class:`~langchain_ragspine.retrievers.postgres.PostgresDenseRetriever`, or ``None`` when the store has
        no vectors (or their model cannot load here) and ``required`` is false.

        Raises:
            StoreError: ``required`` and the store has no vectors or their model cannot load here; an explicit
                ``embedding`` that is not the vectors' model.
            ValueError: ``required``, no vectors, and no embedding model configured.
        """
        if k not in self._dense:
            self._dense[k] = self._open_dense(k=k, required=required, mode=mode)
        dense = self._dense[k]
        if dense is None and required:
            return self._open_dense(k=k, required=True, mode=mode)
        return dense

    def _open_dense(self, *, k: int, required: bool, mode: str) -> BaseRetriever | None:
        from langchain_ragspine.retrievers.postgres import PostgresDenseRetriever

        store = self.store
        saved_key = store.meta("vector_model_key")
        emb: Embeddings | None = None
        if self.embedding is not None:
            emb = resolve_embedding(self.embedding)
        elif store.meta("vector_embedding"):
            try:
                emb = make_embeddings(str(store.meta("vector_embedding")))
            except ImportError as e:
                if required:
                    raise StoreError(
                        f"this store's vectors need a model that cannot load here: {e}", path=store.path
                    ) from e
        if emb is None:
            if not required:
                return None
            raise StoreError(
                f"mode {mode!r} needs vectors: run `ragspine ingest PATH --store URL --embedding e5` (or another "
                "spec) first",
                path=store.path,
            )
        key = model_key_for(emb)
        if self.embedding is not None and saved_key and saved_key != key:
            raise StoreError(
                f"this store's vectors were made with {saved_key}, not {key}; query it with the same model (leave "
                "out --embedding) or re-ingest with the model you want (documents other writers added, such as "
                "the vector store's, are kept and embedded too)",
                path=store.path,
            )
        if saved_key != key:  # an explicit model for a store without vectors: embed in memory, as the file store
            warn_stale(
                f"{store.path}: the store has no vectors of {key}; the dense channel is built in memory (every "
                "chunk embedded) — run `ragspine ingest` with this model to store them (documents other writers "
                "added, such as the vector store's, are kept and embedded too)"
            )
            return DenseRetriever(docs=self.documents(), embedding=emb, k=k)
        return PostgresDenseRetriever(url=self.url, embedding=emb, k=k)
