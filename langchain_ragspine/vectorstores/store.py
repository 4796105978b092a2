"""A LangChain ``VectorStore`` face over a ragspine store directory: chunk store + BM25 + dense, one object.

:class:`RagSpineVectorStore` is what an app that only knows LangChain's vector-store habits reaches for —
``add_documents(ids=…)``, ``delete(ids)``, ``get_by_ids``, ``similarity_search(_with_score)(filter=…)``,
``max_marginal_relevance_search``, ``as_retriever(search_type=…, search_kwargs=…)``, the async twins, and
``langchain_core.indexing.index()`` with a record manager — while the records live in the versioned chunk store
(:class:`~langchain_ragspine.backends.directory.chunk_store.ChunkStore`) of a store directory (the one ``ragspine ingest`` writes), so
every write is a new document version and a crash leaves the previous one intact.

Two layers, so another backend (e.g. PostgreSQL) can plug in under the same face:

* a :class:`RecordBackend` — where records live: ``records()`` (the active ones), ``upsert(docs)``,
  ``delete(ids)`` and a ``generation`` counter that changes with every write.  :class:`ChunkStoreBackend` is the
  SQLite one; it follows the file at ``DIR/chunks.sqlite`` (:mod:`langchain_ragspine.backends.directory.follow`, the rule
  :class:`~langchain_ragspine.retrievers.LiveStoreRetriever` follows too): the store directory deleted and ingested
  again, or another store moved into its place, is reopened before the next read or write, whatever its
  generation, and a write that returns is in the store at the path, never only in a replaced file;
* the vector store — the derived indexes (BM25 and dense over the records, kept in memory as segments:
  :mod:`~langchain_ragspine.backends.directory.indexes`), brought up to date when the backend's state (for a store
  directory: which file, which store id, at which generation) differs from the one they were built from (checked
  on every call, so writes by another process and a rebuilt directory are seen).  Within one store directory an
  update reads only the documents written since (the chunk store's change feed,
  :meth:`~langchain_ragspine.backends.directory.chunk_store.ChunkStore.versions_since`) and adds them as one small
  segment — tokenized and embedded alone — searched beside the others with the scores one index over the same
  records gives (BM25 with the corpus statistics of every live row; ties by ``chunk_id``); another file or store
  id, or a history the feed cannot describe, builds them again from every record, as does any change of another
  backend.  Chunk vectors come from the store's embedding cache (``DIR/embeddings.sqlite``, keyed by chunk id and
  text hash), where a write puts its records' vectors after it commits; a cache that cannot be written (a full
  disk) never fails a write or a search (:class:`CacheNotWrittenWarning`).

Identity: a record's id is its ``chunk_id`` — the ``ids`` given to ``add_documents``, else ``Document.id``, else
``metadata["chunk_id"]``, else a new UUID4.  Every returned ``Document`` has ``id`` = that id.  Records written
through this face come back with exactly the ``page_content`` and ``metadata`` they were added with (the chunk
store's lineage keys are stored beside them and removed on the way out); chunks written by ``ragspine ingest``
come back as :meth:`~langchain_ragspine.backends.directory.chunk_store.StoredChunk.to_document` gives them (full lineage).

Search types: ``similarity`` (dense cosine, LangChain's meaning), ``mmr`` (Carbonell & Goldstein, "The Use of MMR,
Diversity-Based Reranking for Reordering Documents and Producing Summaries", SIGIR 1998, over the dense channel,
via ``langchain_core``'s ``maximal_marginal_relevance``), ``similarity_score_threshold``, ``bm25`` and ``hybrid``
(BM25 + dense fused by :class:`~langchain_ragspine.retrievers.HybridRetriever`; :meth:`as_retriever`'s default, so
an app that only calls ``vectorstore.as_retriever()`` gets the package's retrieval).  ``bm25`` / ``hybrid`` results
carry ``metadata["scores"]`` like every retriever of the package; the LangChain search types return the stored
metadata untouched (scores come as tuples from the ``*_with_score`` methods).

Filters (``filter=``) are the package's metadata filters (:mod:`langchain_ragspine.filters`, a dict), applied
before scoring in every search type and failing closed (a missing field never matches; a malformed filter raises;
a callable raises ``TypeError``).  They see the record's metadata with ``chunk_id`` = the record id.  A retriever's
own filter scopes every call: ``as_retriever(search_kwargs={"filter": F}).invoke(q, filter=G)`` searches
``F AND G`` and ``filter=None`` keeps ``F``, in every search type (LangChain's ``VectorStoreRetriever`` lets the
call's filter replace the retriever's).
RESTRICTED records (:mod:`langchain_ragspine.sensitivity`) may be stored but are never embedded, indexed or
returned — not by a search and not by ``get_by_ids``: they are left out when the indexes are built, and every exit
(each search type, ``get_by_ids``, the retriever of :meth:`RagSpineVectorStore.as_retriever`) passes the RESTRICTED
gate again.  Every returned ``Document`` is a fresh copy, so editing one changes nothing in the store's indexes.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import shutil
import tempfile
import threading
import uuid
import warnings
import weakref
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol, runtime_checkable

import langchain_core
import numpy as np
from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig

from langchain_ragspine._stacklevel import user_stacklevel
from langchain_ragspine.arguments import DEFAULT_K, check_arguments, check_k, rename_arguments
from langchain_ragspine.backends.directory.chunk_store import (
    VECTORSTORE_RECORD_KEY,
    VECTORSTORE_WRITER,
    ChunkStore,
    StoredChunk,
)
from langchain_ragspine.backends.directory.embedding_cache import EmbeddingCache
from langchain_ragspine.backends.directory.faiss_index import INDEX_KINDS
from langchain_ragspine.backends.directory.follow import FollowedChunkStore, StoreState
from langchain_ragspine.backends.directory.indexes import IndexConfig, IndexSnapshot, internal_record
from langchain_ragspine.backends.directory.layout import (
    CHUNKS_DB,
    EMBEDDING_CACHE,
    STORE_MARKER,
    prepare_store_dir,
    store_writer,
)
from langchain_ragspine.backends.directory.lock import StoreReplacedError, check_lock_timeout, writer_lock
from langchain_ragspine.documents import (
    check_score_threshold,
    copy_metadata,
    has_visible_text,
    with_scores,
)
from langchain_ragspine.embeddings.batching import embed_in_batches
from langchain_ragspine.embeddings.cache import CachedEmbeddings, model_key_for
from langchain_ragspine.errors import StoreError, StoreWriteError, read_only_mount
from langchain_ragspine.filters import CompiledFilter, compiled_filter
from langchain_ragspine.retrievers.base import (
    AsyncCall,
    ContractRetriever,
    RetrieverCall,
    SyncCall,
    check_query,
)
from langchain_ragspine.retrievers.bm25 import bm25_threshold, check_bm25_query
from langchain_ragspine.retrievers.contract import gated_exit
from langchain_ragspine.retrievers.embed_as import (
    BY_VECTOR_SEARCH_TYPES,
    EMBED_AS_OPTION,
    EmbedAs,
    aembed_search_text,
    asearch_as_document,
    check_embed_as,
    embed_as_options,
    embed_search_text,
    search_as_document,
    warn_embed_as_ignored,
)
from langchain_ragspine.retrievers.hybrid import HybridRetriever
from langchain_ragspine.sensitivity import drop_restricted, drop_restricted_pairs, is_restricted
from langchain_ragspine.text import index_text
from langchain_ragspine.tokenizers import get_tokenizer
from langchain_ragspine.vectorstores.base import (
    MarginalRelevanceStore,
    ScopedVectorStoreRetriever,
    all_or_nothing,
    as_list,
    check_records,
)

__all__ = [
    "CacheNotWrittenWarning",
    "ChunkStoreBackend",
    "RagSpineStoreRetriever",
    "RagSpineVectorStore",
    "RecordBackend",
]

#: Metadata key, stored beside a record written through the vector store, that lists the lineage keys the chunk
#: store needed (``added``) or overwrote (``replaced``: their original values), so the record reads back as given.
RECORD_MARKER = VECTORSTORE_RECORD_KEY
#: Documents read per query when a write or an index update reads some documents of the store.
_READ_BATCH = 500
#: Texts per ``embed_documents`` call when the indexes embed new records.
_EMBED_BATCH = 32
#: Vectors of written records kept for the next index update at most (more: it reads them from the cache).
_FRESH_MAX = 50_000

# keywords LangChain's VectorStoreRetriever / similarity_search_with_relevance_scores pass along that a search type
# does not use (they are accepted and ignored, as every LangChain store does) — except score_threshold: honoured by
# every search type with a relevance score (similarity, bm25, hybrid; similarity_score_threshold is LangChain's),
# refused by MMR
_PASSED_ALONG = ("fetch_k", "lambda_mult", "score_threshold")
#: The scale of ``score_threshold`` in the ``similarity`` search type (LangChain's relevance score).
RELEVANCE_SCALE = "the relevance score: the cosine similarity clipped to [0, 1]"
#: The scale of ``score_threshold`` in the ``hybrid`` search type.
HYBRID_SCALE = "the hybrid's two_stage fused score, in [0, 1], relative to the query's candidates"


def _refuse_mmr_threshold(value: Any) -> None:
    """MMR picks for diversity and gives its picks no relevance score, so a ``score_threshold`` would be silently
    ignored (LangChain's stores do so): refuse it, naming what to use instead.

    Raises:
        ValueError: ``value`` is not ``None``.
    """
    if value is not None:
        raise ValueError(
            f"score_threshold={value!r} has no meaning for search_type='mmr' (maximal marginal relevance picks for "
            "diversity and ranks by no relevance score): use search_type='similarity_score_threshold' or "
            "'similarity' (relevance = clipped cosine), 'hybrid' (fused score) or 'bm25' (raw BM25 score) with "
            "score_threshold, or mmr without it"
        )
# the named parameters, listed so that a misspelling of one gets a did-you-mean
_NAMED = ("k", "filter")


class CacheNotWrittenWarning(UserWarning):
    """A :class:`RagSpineVectorStore` rebuilding its indexes could not write the store directory's embedding cache
    (a full disk, a read-only directory): the search went on, the vectors it missed embedded in memory only; the
    message names the file and the cause."""


# ------------------------------------------------------------------------------------------------ the backend face
@runtime_checkable
class RecordBackend(Protocol):
    """Where a :class:`RagSpineVectorStore` keeps its records (the part a PostgreSQL backend would replace).

    A record is a ``Document`` whose ``id`` is set (its ``chunk_id``).  Implementations must make each ``upsert`` /
    ``delete`` call atomic (all of it or nothing: the vector store promises that to its callers), keep RESTRICTED
    records out of nothing (the vector store gates them), and bump :attr:`generation` on every write that changes
    something.
    """

    @property
    def generation(self) -> int:
        """A number that changes whenever the active records change (also by another process, and when the store
        is replaced by another)."""
        ...

    @property
    def cache_path(self) -> Path | None:
        """An embedding-cache file for chunk vectors, or ``None`` for no cache."""
        ...

    def records(self) -> list[Document]:
        """The active records, in a stable order."""
        ...

    def upsert(self, docs: Sequence[Document]) -> None:
        """Insert or replace records by id (every ``doc.id`` is set, each id once: the vector store refuses a call
        that repeats one)."""
        ...

    def delete(self, ids: Sequence[str]) -> None:
        """Remove the records with these ids; unknown ids are ignored."""
        ...

    def close(self) -> None:
        """Release the connection."""
        ...


def _external(chunk: StoredChunk) -> Document:
    """A stored chunk as the vector store returns it (see the module docstring)."""
    md = dict(chunk.metadata)
    mark = md.pop(RECORD_MARKER, None)
    if not isinstance(mark, dict):
        return chunk.to_document()
    for key in mark.get("added", []):
        md.pop(key, None)
    md.update(mark.get("replaced", {}))
    return Document(page_content=chunk.text, metadata=md, id=chunk.chunk_id)


def _doc_id_of(doc: Document) -> str:
    value = doc.metadata.get("doc_id")
    return value if isinstance(value, str) and value else str(doc.id)


def _stored(doc: Document) -> Document:
    """A record in the form the chunk store takes: lineage keys set, the user's values kept in the marker."""
    if RECORD_MARKER in doc.metadata:
        raise ValueError(f"metadata key {RECORD_MARKER!r} is reserved (record {doc.id!r})")
    md = dict(doc.metadata)
    lineage = {"doc_id": _doc_id_of(doc), "chunk_id": str(doc.id)}
    added = [key for key in lineage if key not in md]
    replaced = {key: md[key] for key in lineage if key in md and md[key] != lineage[key]}
    md.update(lineage)
    md[RECORD_MARKER] = {"added": added, "replaced": replaced}
    return Document(page_content=doc.page_content, metadata=md, id=str(doc.id))


class ChunkStoreBackend:
    """Records in a store directory's versioned SQLite chunk store (``DIR/chunks.sqlite``).

    A record belongs to the document ``metadata["doc_id"]`` (a non-empty string), else to a document of its own
    (``doc_id`` = its id).  A write re-versions each touched document in one transaction
    (:meth:`ChunkStore.replace_doc_chunks`): its other chunks are kept, a record with a known id is replaced in
    place, new ones are appended; writing what is already stored is a no-op.  A record that moves to another
    ``doc_id`` is removed from its old document in the same transaction.

    Each :meth:`upsert` / :meth:`delete` call is one SQLite transaction — all of its documents' new versions or
    none (a disk-full error leaves the store exactly as before) — written while holding the store directory's
    writer lock (:mod:`langchain_ragspine.backends.directory.lock`), so it never interleaves with an ``ingest`` or another
    writer (it waits for them).

    The backend follows the store at its path (:class:`~langchain_ragspine.backends.directory.follow.FollowedChunkStore`):
    every read and write first checks that ``DIR/chunks.sqlite`` is still the file its connection has open, and
    reopens it when the directory was deleted and ingested again or another store was moved into its place.  A
    write whose store was replaced while it committed is written again, to the new store (a write that returns is
    in the store at the path, never only in a replaced file); a store directory removed and not rebuilt is a
    :class:`~langchain_ragspine.errors.StoreError` per call, never recreated empty.

    Args:
        store_dir: the store directory (created when missing; an existing one must be a ragspine store).
        lock_timeout: seconds a write (and the creation of the store) waits for another writer of the directory;
            ``None`` (default): as long as it takes, ``0``: not at all.

    An existing store that this process may not write (``os.access``: a read-only folder or mount, another user's
    store) is opened read-only: reads work (:func:`~langchain_ragspine.backends.directory._sqlite.connect_read_only`),
    and each write is a :class:`~langchain_ragspine.errors.StoreWriteError` naming the directory, before anything
    is written (:attr:`read_only`).

    Raises:
        StoreError: ``store_dir`` is a file, or a non-empty directory that is not a ragspine store;
            :class:`~langchain_ragspine.backends.directory.lock.StoreBusyError` when the wait for the writer lock runs out.
        StoreWriteError: (per write) the store is read-only for this process.
    """

    #: Writes tried when the store is replaced while one commits, before giving up.
    WRITE_ATTEMPTS: ClassVar[int] = 3

    def __init__(self, store_dir: str | os.PathLike[str], *, lock_timeout: float | None = None) -> None:
        self.root = Path(store_dir)
        self.lock_timeout = check_lock_timeout(lock_timeout)
        exists = (self.root / STORE_MARKER).is_file() and (self.root / CHUNKS_DB).is_file()
        #: An existing store this process may not write (a read-only folder or file system, another user's store):
        #: opened for reading, and every write is a StoreWriteError.
        self.read_only = exists and not all(os.access(p, os.W_OK) for p in (self.root, self.root / CHUNKS_DB))
        self._chunks = FollowedChunkStore(self.root / CHUNKS_DB, read_only=self.read_only, create=not self.read_only)
        if exists:
            # an existing store: opening it takes no writer lock (an older schema migrates in one SQLite transaction)
            self._chunks.store()
        else:
            with self.writing():  # creating the store is a write
                prepare_store_dir(self.root)
                self._chunks.store()

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the store directory's writer lock for the block (see the class docstring)."""
        with store_writer(self.root, lock_timeout=self.lock_timeout):
            yield

    @property
    def store(self) -> ChunkStore:
        """The chunk store at ``DIR/chunks.sqlite`` now (reopened when the file was replaced).

        Raises:
            StoreError: the file is gone (the store directory was removed) or unreadable.
        """
        return self._chunks.store()

    @property
    def state(self) -> StoreState:
        """``(identity, store_id, generation)`` of the chunk store file now: what the vector store's indexes are
        built from (:meth:`FollowedChunkStore.state`), changed by every write, by a replaced store and by another
        store copied over it in place."""
        return self._chunks.state()

    @property
    def generation(self) -> int:
        return self.state.generation

    @property
    def cache_path(self) -> Path | None:
        return self.root / EMBEDDING_CACHE

    def records(self) -> list[Document]:
        return [_external(c) for c in self.store.iter_chunks()]

    def snapshot(self) -> tuple[ChunkStore, StoreState]:
        """The chunk store at ``DIR/chunks.sqlite`` now and its :attr:`state`, read from that one store object
        (:meth:`~langchain_ragspine.backends.directory.follow.FollowedChunkStore.current`).

        Raises:
            StoreError: as :attr:`store`.
        """
        return self._chunks.current()

    @staticmethod
    def stored_records(store: ChunkStore, doc_ids: Sequence[str] | None = None) -> list[tuple[str, Document]]:
        """``(doc_id, record)`` of the active chunks of ``store`` (of the documents ``doc_ids`` only, when
        given; read in batches of 500), records as :meth:`records` gives them."""
        if doc_ids is None:
            return [(c.doc_id, _external(c)) for c in store.iter_chunks()]
        wanted = sorted(set(doc_ids))
        out: list[tuple[str, Document]] = []
        for start in range(0, len(wanted), _READ_BATCH):
            out += [(c.doc_id, _external(c)) for c in store.iter_chunks(doc_id=wanted[start : start + _READ_BATCH])]
        return out

    def _write(self, change: Callable[[ChunkStore], None]) -> None:
        """``change(store)`` as one transaction under the writer lock, on the store at the path; written again on
        the new store when the file was replaced while it committed."""
        if self.read_only:
            code = errno.EROFS if read_only_mount(self.root) else errno.EACCES
            raise StoreWriteError(
                f"could not be written (the store is read-only for this process: {os.strerror(code)}); nothing was "
                "lost: the store is unchanged, and searches work; to write, give this user write permission on the "
                "store directory and open the vector store again",
                path=self.root, code=code, why=os.strerror(code), detail=f"[Errno {code}] {os.strerror(code)}",
            )
        for _ in range(self.WRITE_ATTEMPTS):
            written = False
            try:
                with self.writing():
                    store = self._chunks.store()
                    with store.atomic():
                        change(store)
                    written = self._chunks.holds(store)
            except StoreReplacedError:
                if not written:
                    continue  # the directory was replaced while this attempt held its (old) lock: write again
                # only the lock file was replaced: the write is in the store at the path
            if written:
                return
        raise StoreError(
            f"the store was replaced while each of {self.WRITE_ATTEMPTS} attempts of this write committed, so it is "
            "not in the store at this path; write again once the store directory is left in place",
            path=self.root,
        )

    @staticmethod
    def _active_of(store: ChunkStore, doc_ids: Iterable[str]) -> list[StoredChunk]:
        """The active chunks of the documents ``doc_ids`` (read in batches): what a write rewrites, never the whole
        store."""
        wanted = sorted(set(doc_ids))
        out: list[StoredChunk] = []
        for start in range(0, len(wanted), _READ_BATCH):
            out += store.iter_chunks(doc_id=wanted[start : start + _READ_BATCH])
        return out

    @staticmethod
    def _rewrite(
        store: ChunkStore, active: list[StoredChunk], doc_id: str, drop: set[str], put: Mapping[str, Document]
    ) -> None:
        rows = [c for c in active if c.doc_id == doc_id]
        out: list[Document] = []
        for c in rows:
            if c.chunk_id in drop:
                continue
            out.append(put[c.chunk_id] if c.chunk_id in put else Document(page_content=c.text, metadata=c.metadata))
        known = {c.chunk_id for c in rows}
        out += [d for cid, d in put.items() if cid not in known]
        valid_as_of = rows[0].valid_as_of if rows else ""
        store.replace_doc_chunks(doc_id, out, valid_as_of=valid_as_of, writer=VECTORSTORE_WRITER)

    def upsert(self, docs: Sequence[Document]) -> None:
        self._write(lambda store: self._upsert(store, docs))

    def _upsert(self, store: ChunkStore, docs: Sequence[Document]) -> None:
        # only the documents the call touches are read: those of its records, and those its ids are in now
        where = {cid: c.doc_id for cid, c in store.get_chunks(sorted({str(d.id) for d in docs})).items()}
        targets = {_doc_id_of(d) for d in docs}
        active = self._active_of(store, targets | set(where.values()))
        groups: dict[str, dict[str, Document]] = {}
        moved: dict[str, set[str]] = {}
        for doc in docs:
            stored = _stored(doc)
            doc_id, cid = stored.metadata["doc_id"], str(doc.id)
            for group in groups.values():  # the last of repeated ids wins, wherever it goes
                group.pop(cid, None)
            groups.setdefault(doc_id, {})[cid] = stored
            old = where.get(cid)
            if old is not None and old != doc_id:
                moved.setdefault(old, set()).add(cid)
        for doc_id, drop in moved.items():
            self._rewrite(store, active, doc_id, drop, {})
        if moved:
            active = self._active_of(store, targets | set(where.values()))
        for doc_id, put in groups.items():
            if put:
                self._rewrite(store, active, doc_id, set(), put)

    def delete(self, ids: Sequence[str]) -> None:
        self._write(lambda store: self._delete(store, ids))

    def _delete(self, store: ChunkStore, ids: Sequence[str]) -> None:
        wanted = {str(i) for i in ids}
        active = self._active_of(store, {c.doc_id for c in store.get_chunks(sorted(wanted)).values()})
        by_doc: dict[str, set[str]] = {}
        for c in active:
            if c.chunk_id in wanted:
                by_doc.setdefault(c.doc_id, set()).add(c.chunk_id)
        for doc_id, drop in by_doc.items():
            self._rewrite(store, active, doc_id, drop, {})

    def close(self) -> None:
        self._chunks.close()


# ------------------------------------------------------------------------------------------------ the indexes
#: A full rebuild instead of an update when a change touches more documents than this (or than a quarter of the
#: store): one pass over the store is then cheaper than reading the documents one batch at a time.
_UPDATE_MAX_DOCS = 2_000


def _copy(doc: Document, **extra: Any) -> Document:
    """A copy of a stored record to return (its own metadata dict, ``extra`` keys added), so that a caller editing
    a result cannot change the store's indexes."""
    return Document(page_content=doc.page_content, metadata={**copy_metadata(doc.metadata), **extra}, id=doc.id)


def _check_filter(filter: Any) -> CompiledFilter | None:
    """``filter`` validated and compiled once (the search hands the result on)."""
    if filter is not None and not isinstance(filter, Mapping):
        raise TypeError(
            f"filter must be a metadata filter dict (langchain_ragspine.filters syntax, e.g. {{'dept': 'a'}}), got "
            f"{type(filter).__name__}; a callable filter is not supported (filters fail closed)"
        )
    return compiled_filter(filter)


def _search_kwargs(owner: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """A search's further keywords: ``candidate_k`` (the old name of ``fetch_k``, deprecated) renamed, then each
    one checked (an unknown keyword is a ``TypeError`` with a did-you-mean)."""
    kwargs = rename_arguments(owner, kwargs, ["candidate_k"])
    check_arguments(owner, kwargs, (*_PASSED_ALONG, *_NAMED))
    return kwargs


class _SnapshotBM25(ContractRetriever):
    """The BM25 channel of one :class:`~langchain_ragspine.backends.directory.indexes.IndexSnapshot` (what
    :class:`HybridRetriever` fuses for the ``hybrid`` search type)."""

    snapshot: Any
    k: int = DEFAULT_K
    call_options: ClassVar[tuple[str, ...]] = ("score_threshold",)

    def _retrieve(self, query: str, call: SyncCall) -> list[Document]:
        k = self.k if call.k is None else check_k(call.k)
        threshold = bm25_threshold(None, call.options.get("score_threshold"))
        check_bm25_query(query)
        hits = self.snapshot.bm25(query, k, _check_filter(call.filter), threshold=threshold)
        return [with_scores(d, bm25=s, fused=s) for d, s in hits]


class _SnapshotDense(ContractRetriever):
    """The dense channel of one snapshot (``embed_as`` as :class:`DenseRetriever` takes it)."""

    snapshot: Any
    embedding: Embeddings
    k: int = DEFAULT_K
    call_options: ClassVar[tuple[str, ...]] = (EMBED_AS_OPTION,)

    def _prepare(self, query: str, call: RetrieverCall[Any]) -> tuple[int, Mapping[str, Any] | None, EmbedAs] | None:
        k = self.k if call.k is None else check_k(call.k)
        flt = _check_filter(call.filter)
        embed_as = check_embed_as(call.options.get(EMBED_AS_OPTION))
        if not query.strip() or not self.snapshot.has_vectors():
            return None  # nothing to search: the query is not embedded
        return k, flt, embed_as

    def _hits(self, vector: Sequence[float], k: int, flt: Mapping[str, Any] | None) -> list[Document]:
        hits = self.snapshot.dense(np.asarray(vector, dtype=np.float32), k, flt)
        return [with_scores(d, vector=s, fused=s) for d, s in hits]

    def _retrieve(self, query: str, call: SyncCall) -> list[Document]:
        prepared = self._prepare(query, call)
        if prepared is None:
            return []
        k, flt, embed_as = prepared
        return self._hits(embed_search_text(self.embedding, query, embed_as), k, flt)

    async def _aretrieve(self, query: str, call: AsyncCall) -> list[Document]:
        prepared = self._prepare(query, call)
        if prepared is None:
            return []
        k, flt, embed_as = prepared
        return self._hits(await aembed_search_text(self.embedding, query, embed_as), k, flt)


def _warn_at_caller(message: str, category: type[Warning]) -> None:
    """A warning of the indexes, attributed to the first caller outside this package and langchain_core."""
    warnings.warn(message, category, stacklevel=user_stacklevel(langchain_core))


def _remove_temporary(backend: RecordBackend, root: Path) -> None:
    """Close a temporary store's connection and delete its directory (a ``weakref.finalize`` callback)."""
    with contextlib.suppress(Exception):
        backend.close()
    shutil.rmtree(root, ignore_errors=True)


class RagSpineVectorStore(MarginalRelevanceStore):
    """LangChain ``VectorStore`` over a ragspine store directory (see the module docstring).

    ``RagSpineVectorStore(store_dir, embedding)`` opens (or creates) a store directory;
    ``RagSpineVectorStore(embedding=embedding)`` — or ``RagSpineVectorStore(embedding)``, or :meth:`from_texts` /
    ``from_documents`` without ``store_dir=`` — works in a **temporary store**, as ``InMemoryVectorStore``,
    ``FAISS.from_texts`` and an ephemeral ``Chroma`` do: a new directory made by :func:`tempfile.mkdtemp` (under
    :func:`tempfile.gettempdir`, named ``ragspine-vectorstore-…``; :attr:`store_dir` says where), removed with
    everything in it when the store is closed (:meth:`close`), garbage-collected or the interpreter exits.  It is
    not persistent: to keep the records, pass ``store_dir=`` (a directory that ``ragspine search`` /
    :func:`~langchain_ragspine.indexing.open_retriever` can open later, and a later ``RagSpineVectorStore`` reopens
    as it was).

    Args:
        store_dir: a store directory (created when missing; ``ragspine ingest``'s output works as is), any
            :class:`RecordBackend`, or ``None`` (default): a temporary store (see above).
        embedding: the dense channel's model (any ``Embeddings``; required, by keyword or — with no ``store_dir``
            — as the only positional argument).  For a store written by ``ragspine ingest --embedding …`` use the
            same model, so cached chunk vectors are reused.
        tokenizer: the BM25 tokenizer (default ``"auto"``).
        index_kind: the FAISS index kind of the dense channel's main segment (default ``"auto"``; the small
            segments of recent writes are always exact).
        lock_timeout: seconds a write waits for another writer of the store directory (an ``ingest``, another
            vector store) to finish (:class:`ChunkStoreBackend`); ``None`` (default): as long as it takes, ``0``: not
            at all.  Searches never wait.  Not used with a :class:`RecordBackend` given as ``store_dir``.

    Writes: each ``add_documents`` / ``add_texts`` / ``delete`` call is atomic — every document version it writes,
    or none: a failure part way (disk full; a chunk id that is another document's, a ``ValueError``) leaves the
    store exactly as before, and a failed write is a :class:`~langchain_ragspine.errors.StoreError` saying so.  A call is checked whole before anything is written:
    an id given twice, or a NaN metadata value (NaN never equals itself, so no filter could match it; infinities
    are kept and compare as numbers), is a ``ValueError`` naming the id, the field and the position in the call.
    The versions it writes are recorded as the vector store's (writer ``"vectorstore"``): ``ragspine ingest`` of a
    corpus into the same directory never retracts them.

    Indexes: kept in memory (:mod:`~langchain_ragspine.backends.directory.indexes`) and brought up to the store's
    state before every search.  A write — by this object or by another process — is applied as a small segment
    holding only the documents it touched (read through the chunk store's change feed, tokenized and embedded
    alone), searched beside the others with the scores one index over the same records gives; segments are
    merged now and then.  A store replaced under the directory, or changed in ways the feed does not describe,
    is read again whole.

    Raises:
        StoreError: ``store_dir`` cannot be a store directory.
        TypeError: ``embedding`` is missing or not an ``Embeddings``.
        ValueError: an unknown ``tokenizer`` or ``index_kind``.

    Example:
        >>> from langchain_ragspine.embeddings import HashingEmbeddings
        >>> store = RagSpineVectorStore.from_texts(["梅雨は六月から七月の雨季。", "北京是中国的首都。"],
        ...                                        HashingEmbeddings(256), [{"dept": "a"}, {"dept": "b"}],
        ...                                        ids=["tsuyu", "beijing"])
        >>> store.temporary, store.store_dir.name.startswith("ragspine-vectorstore-")
        (True, True)
        >>> [d.id for d in store.similarity_search("梅雨の季節", k=1, filter={"dept": "a"})]
        ['tsuyu']
        >>> [d.id for d in store.as_retriever(search_kwargs={"k": 1}).invoke("北京")]  # hybrid by default
        ['beijing']
        >>> where = store.store_dir
        >>> store.close()  # a temporary store is deleted
        >>> where.exists()
        False
    """

    def __init__(
        self,
        store_dir: str | os.PathLike[str] | RecordBackend | Embeddings | None = None,
        embedding: Embeddings | None = None,
        *,
        tokenizer: str = "auto",
        index_kind: str = "auto",
        lock_timeout: float | None = None,
    ) -> None:
        if isinstance(store_dir, Embeddings):
            if embedding is not None:
                raise TypeError(
                    f"{type(self).__name__} got an Embeddings as store_dir and embedding= too: pass "
                    f"{type(self).__name__}(store_dir, embedding), or {type(self).__name__}(embedding=...) for a "
                    "temporary store"
                )
            store_dir, embedding = None, store_dir
        if embedding is None:
            raise TypeError(
                f"{type(self).__name__} needs embedding= (a langchain_core Embeddings, e.g. "
                "langchain_ragspine.embeddings.HashingEmbeddings(256) offline)"
            )
        if not isinstance(embedding, Embeddings):
            raise TypeError(f"embedding must be a langchain_core Embeddings, got {type(embedding).__name__}")
        if index_kind not in INDEX_KINDS:
            raise ValueError(f"index_kind must be one of {INDEX_KINDS}, got {index_kind!r}")
        config = IndexConfig(get_tokenizer(tokenizer), index_kind)  # an unknown tokenizer: at once
        self._temporary: Path | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None
        if store_dir is None:
            self._temporary = Path(tempfile.mkdtemp(prefix="ragspine-vectorstore-"))
            try:
                backend: RecordBackend = ChunkStoreBackend(self._temporary, lock_timeout=lock_timeout)
            except BaseException:
                shutil.rmtree(self._temporary, ignore_errors=True)
                raise
            # removed on close(), when garbage-collected, or at interpreter exit, whichever comes first
            self._finalizer = weakref.finalize(self, _remove_temporary, backend, self._temporary)
        elif isinstance(store_dir, RecordBackend):
            backend = store_dir
        else:
            backend = ChunkStoreBackend(store_dir, lock_timeout=lock_timeout)
        self.backend = backend
        self.embedding = embedding
        self.tokenizer = tokenizer
        self.index_kind = index_kind
        self._config = config
        self._lock = threading.RLock()
        self._indexes: IndexSnapshot | None = None
        # (chunk_id, text) of vectors the indexes hold that the cache could not take yet (see _embedder)
        self._unsaved: dict[tuple[str, str], None] = {}
        # vectors of the last writes' records, by (chunk_id, index text), until the next index update takes them
        self._fresh: dict[tuple[str, str], np.ndarray] = {}

    @property
    def embeddings(self) -> Embeddings:
        """The embedding model (LangChain's attribute name)."""
        return self.embedding

    @property
    def store_dir(self) -> Path | None:
        """The store directory (for a temporary store, the one made for it); ``None`` over a custom
        :class:`RecordBackend`."""
        root = getattr(self.backend, "root", None)
        return root if isinstance(root, Path) else None

    @property
    def temporary(self) -> bool:
        """Whether this is a temporary store (deleted on :meth:`close`; see the class docstring)."""
        return self._temporary is not None

    def close(self) -> None:
        """Close the backend's connection; a temporary store's directory is deleted (idempotent)."""
        if self._finalizer is not None:
            self._finalizer()  # closes the backend, then removes the directory (once)
        else:
            self.backend.close()

    # -- indexes ------------------------------------------------------------------------------------------------
    def _state(self) -> Hashable:
        """What the indexes are built from: a :class:`ChunkStoreBackend`'s ``(file identity, store id,
        generation)`` (its store replaced, whatever the generation, counts as a change), another backend's
        ``generation``."""
        backend = self.backend
        return backend.state if isinstance(backend, ChunkStoreBackend) else backend.generation

    def _current(self) -> IndexSnapshot:
        """The indexes of the backend's current state: updated with the documents written since they were built
        (the chunk store's change feed), or built again when the store was replaced or the feed cannot say."""
        with self._lock:
            backend = self.backend
            idx = self._indexes
            if idx is not None and idx.state == self._state():
                return idx
            with self._cache_access() as read_only:
                embed = self._with_fresh(self._embedder(read_only))
                if isinstance(backend, ChunkStoreBackend):
                    store, state = backend.snapshot()  # read again under the writer lock, if taken
                    touched = self._touched(idx, store, state)
                    mark = store.history_mark(state.generation)
                    if idx is not None and touched is not None:
                        rows = backend.stored_records(store, sorted(touched))
                        self._indexes = idx.updated(touched, rows, embed, state=state, mark=mark)
                    else:
                        rows = backend.stored_records(store)
                        self._indexes = IndexSnapshot.build(rows, self._config, embed, state=state, mark=mark,
                                                            warn=_warn_at_caller)
                else:
                    rows = [(_doc_id_of(d), d) for d in backend.records()]
                    self._indexes = IndexSnapshot.build(rows, self._config, embed, state=backend.generation,
                                                        warn=_warn_at_caller)
                self._fresh = {}  # taken, or of records written and changed again since: read anew next time
            return self._indexes

    def _with_fresh(self, embed: Callable[[list[tuple[str, str]]], np.ndarray]) -> Callable[[list[tuple[str, str]]],
                                                                                             np.ndarray]:
        """``embed``, answered from the vectors this object's last writes embedded (:meth:`_embed_written`) when
        it holds every one asked for — the cache's own vectors, without opening it again."""
        def embed_fresh(items: list[tuple[str, str]]) -> np.ndarray:
            fresh = self._fresh
            if items and all(item in fresh for item in items):
                return np.stack([fresh[item] for item in items])
            return embed(items)

        return embed_fresh

    @staticmethod
    def _touched(idx: IndexSnapshot | None, store: ChunkStore, state: StoreState) -> set[str] | None:
        """The documents written since ``idx`` was built, by the chunk store's change feed; ``None`` when the
        indexes must be built again: none yet, another store (file or store id), an older generation, a history
        that differs from the one ``idx`` read (a copy of the store written otherwise), no feed, or so many
        documents that one pass over the store is cheaper."""
        if idx is None or not isinstance(idx.state, StoreState):
            return None
        old = idx.state
        if (old.identity, old.store_id) != (state.identity, state.store_id) or state.generation < old.generation:
            return None
        if store.history_mark(old.generation) != idx.mark:
            return None
        versions = store.versions_since(old.generation)
        if versions is None:
            return None
        touched = {v.doc_id for v in versions}
        if len(touched) > max(_UPDATE_MAX_DOCS, len(idx) // 4):
            return None
        return touched

    def _embedder(self, read_only: bool, *, during: str = "search") -> Callable[[list[tuple[str, str]]], np.ndarray]:
        """``embed(items)``: the vectors of ``[(chunk_id, index text), …]`` from the backend's embedding cache,
        the misses embedded (and written to the cache unless ``read_only``).  A cache that cannot be written (a
        full disk, a read-only directory) never fails a search: the vectors then come from the cache read-only,
        the misses embedded in memory only (from no cache when it cannot be read either), with a
        :class:`CacheNotWrittenWarning`; those vectors are written to the cache by the next update that can
        write it (embedded again then: the cache keeps the model's own vectors)."""
        cache = self.backend.cache_path
        model_key = model_key_for(self.embedding)

        def cached(items: list[tuple[str, str]], path: Path, ro: bool) -> np.ndarray:
            with EmbeddingCache(path, read_only=ro) as store:
                embedder = CachedEmbeddings(self.embedding, store, model_key=model_key, batch_size=_EMBED_BATCH,
                                            progress=False)
                return embedder.embed_chunks(items)

        def uncached(items: list[tuple[str, str]]) -> np.ndarray:
            return embed_in_batches(self.embedding, [t for _, t in items], batch_size=_EMBED_BATCH, progress=False)

        def embed(items: list[tuple[str, str]]) -> np.ndarray:
            if cache is None or (read_only and not cache.is_file()):
                self._unsaved.update(dict.fromkeys(items))
                return uncached(items)
            if read_only:
                self._unsaved.update(dict.fromkeys(items))  # (the misses among them)
                return cached(items, cache, True)
            try:
                vectors = cached(items, cache, False)
                if self._unsaved:  # vectors embedded earlier in memory only (the cache was full or locked): now saved
                    cached(list(self._unsaved), cache, False)
                    self._unsaved = {}
                return vectors
            except StoreError as e:
                if e.path != str(cache):
                    raise
                why = e.reason
            self._unsaved.update(dict.fromkeys(items))
            warnings.warn(
                f"{cache}: the embedding cache cannot be written ({why}); this {during} embeds the vectors it misses "
                "in memory only (a later write or search that can write the cache puts them there)",
                CacheNotWrittenWarning,
                stacklevel=user_stacklevel(langchain_core),
            )
            if cache.is_file():
                with contextlib.suppress(StoreError):  # unreadable as well (e.g. left empty by the disk): no cache
                    return cached(items, cache, True)
            return uncached(items)

        return embed

    @contextlib.contextmanager
    def _cache_access(self) -> Iterator[bool]:
        """Whether a rebuild must leave the store directory's embedding cache as it is (yields ``True``): the
        vectors a rebuild embeds are written to the cache only while this call holds the directory's writer lock,
        taken without waiting — while another writer (an ingest) holds it, the misses are embedded in memory only,
        so a search never waits and never writes beside a running ingest (nor when the lock cannot be taken at
        all: a full disk, a read-only directory)."""
        backend = self.backend
        held = contextlib.ExitStack()
        busy = False
        if isinstance(backend, ChunkStoreBackend):
            try:
                held.enter_context(writer_lock(backend.root, timeout=0, on_wait=lambda _: None))
            except StoreError:  # another writer holds it (StoreBusyError), or it cannot be taken (a full disk)
                busy = True
        with held:
            yield busy

    # -- writing ------------------------------------------------------------------------------------------------
    def add_documents(self, documents: list[Document], **kwargs: Any) -> list[str]:
        """Add or replace ``documents``; returns their ids (see the module docstring for how an id is chosen).

        Keyword args: ``ids`` (one per document; precedence over ``Document.id``); ``batch_size`` (accepted for
        ``langchain_core.indexing.index()``; the call is one transaction anyway).  ``documents`` are not modified.
        The call is one new store version, all or nothing (see the class docstring).

        Raises:
            TypeError: ``documents`` or ``ids`` a single ``str`` / ``bytes``, ``None`` or not a list
                (:func:`~langchain_ragspine.vectorstores.base.as_list`); an unknown keyword argument; an element
                that is not a ``Document`` (its index named); a metadata value that is not JSON-serialisable.
            ValueError: ``ids`` of another length than ``documents``; an id given twice, or a NaN metadata
                value (:func:`~langchain_ragspine.vectorstores.base.check_records`: id, field and index
                named); the reserved metadata key is used.  Nothing is written.
            StoreError: the write failed (disk full, …): nothing was written, and the message says so;
                :class:`~langchain_ragspine.backends.directory.lock.StoreBusyError`: another writer held the store directory
                longer than ``lock_timeout``.
        """
        check_arguments(f"{type(self).__name__}.add_documents", kwargs, ("ids", "batch_size"))
        docs = as_list(documents, "documents", "add_documents")
        for i, doc in enumerate(docs):
            if not isinstance(doc, Document):
                raise TypeError(
                    f"add_documents: documents[{i}] must be a langchain_core Document, got {type(doc).__name__} "
                    f"{doc!r:.60}; for plain strings use add_texts"
                )
        ids = kwargs.get("ids")
        ids = None if ids is None else as_list(ids, "ids", "add_documents")
        if ids is not None and len(ids) != len(docs):
            raise ValueError(f"add_documents got {len(docs)} documents and {len(ids)} ids")
        out: list[Document] = []
        for i, doc in enumerate(docs):
            rid = ids[i] if ids is not None and ids[i] else doc.id or doc.metadata.get("chunk_id") or uuid.uuid4().hex
            out.append(Document(page_content=doc.page_content, metadata=dict(doc.metadata), id=str(rid)))
        check_records([str(d.id) for d in out], out, "add_documents")
        with self._lock:
            with all_or_nothing("add_documents", getattr(self.backend, "root", None)):
                self.backend.upsert(out)
            self._embed_written(out)
        return [str(d.id) for d in out]

    def _embed_written(self, records: Sequence[Document]) -> None:
        """Put the vectors of records just written into the store's embedding cache (those not RESTRICTED, with
        visible text, that it lacks), so the next search — this object's, another process's, or
        :func:`~langchain_ragspine.indexing.open_retriever`'s with the same model — finds them; only while the
        store's writer lock can be taken at once (as a search writes the cache), else the next search embeds them.
        The write has committed: nothing here fails it.  A cache that cannot be written or a model that fails is a
        :class:`CacheNotWrittenWarning` (the next search embeds what is missing)."""
        if self.backend.cache_path is None:
            return
        items = [(str(d.id), index_text(d)) for d in map(internal_record, records)
                 if not is_restricted(d.metadata) and has_visible_text(d)]
        if not items:
            return
        try:
            with self._cache_access() as read_only:  # as a search: never beside another writer (then: the next search)
                if not read_only:
                    vectors = self._embedder(False, during="write")(items)
                    if len(self._fresh) + len(items) <= _FRESH_MAX:  # for the next update (see _with_fresh)
                        self._fresh.update(zip(items, vectors, strict=True))
        except Exception as e:  # a model or its server failed, a cache unreadable: the write stands
            warnings.warn(
                f"the records were written, but their vectors could not be embedded now ({type(e).__name__}: {e}); "
                "the next search embeds them",
                CacheNotWrittenWarning,
                stacklevel=user_stacklevel(langchain_core),
            )

    async def aadd_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        return await asyncio.to_thread(self.add_texts, texts, metadatas, ids=ids, **kwargs)

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Remove the records with these ids (unknown ids are ignored); returns ``True``.  All or nothing, as
        :meth:`add_documents`.

        Raises:
            ValueError: ``ids`` is ``None`` (deleting everything needs the ids: nothing is removed by accident).
            TypeError: an unknown keyword argument; ``ids`` a single ``str`` / ``bytes`` or not a list.
            StoreError: the write failed: nothing was removed, and the message says so.
        """
        check_arguments(f"{type(self).__name__}.delete", kwargs, ())
        if ids is None:
            raise ValueError("delete() needs the ids to remove (get them from add_documents or get_by_ids)")
        wanted = [str(i) for i in as_list(ids, "ids", "delete")]
        with self._lock, all_or_nothing("delete", getattr(self.backend, "root", None)):
            self.backend.delete(wanted)
        return True

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The records with these ids, in the order of ``ids`` (unknown and RESTRICTED ones are left out).

        Raises:
            TypeError: ``ids`` a single ``str`` / ``bytes`` or not a list (:func:`~langchain_ragspine.vectorstores.base.as_list`).
        """
        wanted = [str(i) for i in as_list(ids, "ids", "get_by_ids")]
        idx = self._current()
        found = (idx.record(i) for i in wanted)
        return drop_restricted(_copy(d) for d in found if d is not None)

    async def aget_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        return await asyncio.to_thread(self.get_by_ids, ids)

    async def aadd_documents(self, documents: list[Document], **kwargs: Any) -> list[str]:
        return await asyncio.to_thread(self.add_documents, documents, **kwargs)

    async def adelete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        return await asyncio.to_thread(self.delete, ids, **kwargs)

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings,
        metadatas: list[dict[Any, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> RagSpineVectorStore:
        """A store holding ``texts``: at ``store_dir=`` when given, else a temporary store (deleted on
        :meth:`close`, see the class docstring), like ``InMemoryVectorStore.from_texts`` / ``FAISS.from_texts``.
        Other keywords as the constructor (``tokenizer``, ``index_kind``, ``lock_timeout``).  LangChain's
        ``from_documents`` comes here too.

        Raises:
            TypeError: an unknown keyword argument (with a did-you-mean).
        """
        check_arguments(f"{cls.__name__}.from_texts", kwargs, ("store_dir", "tokenizer", "index_kind", "lock_timeout"))
        store = cls(kwargs.pop("store_dir", None), embedding, **kwargs)
        try:
            store.add_texts(texts, metadatas, ids=ids)
        except BaseException:
            store.close()  # a temporary store made for nothing is removed at once
            raise
        return store

    # -- searching ----------------------------------------------------------------------------------------------
    def _query(self, query: Any, name: str) -> str:
        """``query`` if it is a string, else the package's one-line ``TypeError`` naming ``name``."""
        return check_query(type(self).__name__, query, name)

    def _dense_hits(
        self, vector: Sequence[float] | None, k: int, filter: Any, kwargs: Mapping[str, Any], name: str
    ) -> list[tuple[Document, float]]:
        """The top ``k`` records for a query ``vector`` (``None``: an empty query, no results) whose relevance
        (:meth:`_select_relevance_score_fn`) is at least ``kwargs["score_threshold"]`` when given, gated."""
        _search_kwargs(f"{type(self).__name__}.{name}", kwargs)
        k = check_k(k)
        threshold = check_score_threshold(kwargs.get("score_threshold"), maximum=1.0, scale=RELEVANCE_SCALE)
        flt = _check_filter(filter)
        if vector is None:
            return []
        idx = self._current()
        hits = idx.dense(np.asarray(vector, dtype=np.float32), k, flt)
        if threshold is not None:
            relevance = self._select_relevance_score_fn()
            hits = [(d, s) for d, s in hits if relevance(s) >= threshold]
        found = [(_copy(idx.record_of(d)), s) for d, s in hits]
        return drop_restricted_pairs(found)  # the gate at this exit

    def similarity_search_with_score(
        self, query: str, k: int = DEFAULT_K, filter: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """Top ``k`` records by cosine similarity to ``query`` (dense channel), best first, with the cosine.  An
        empty or whitespace-only query returns ``[]`` (as the ``hybrid`` and ``bm25`` search types do).
        ``score_threshold`` keeps the records whose relevance score (the cosine clipped to [0, 1], as
        ``similarity_search_with_relevance_scores`` gives it) is at least it — so ``as_retriever(search_type=
        "similarity", search_kwargs={"score_threshold": 0.3})`` honours it as ``"similarity_score_threshold"``
        does.

        Raises:
            TypeError: a query that is not a string; an unknown keyword argument (``fetch_k`` and ``lambda_mult``
                are accepted and ignored, as LangChain passes them along; ``candidate_k``, the old name of
                ``fetch_k``, with a ``DeprecationWarning``); a non-dict ``filter``;
                a ``score_threshold`` that is not a number.
            ValueError: ``k < 1``; a malformed filter; a ``score_threshold`` outside [0, 1].
        """
        query = self._query(query, "similarity_search")
        check_score_threshold(kwargs.get("score_threshold"), maximum=1.0, scale=RELEVANCE_SCALE)  # before embedding
        vector = self.embedding.embed_query(query) if query.strip() else None
        return self._dense_hits(vector, k, filter, kwargs, "similarity_search")

    async def asimilarity_search_with_score(
        self, query: str, k: int = DEFAULT_K, filter: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        query = self._query(query, "similarity_search")
        check_score_threshold(kwargs.get("score_threshold"), maximum=1.0, scale=RELEVANCE_SCALE)
        vector = await self.embedding.aembed_query(query) if query.strip() else None
        return await asyncio.to_thread(self._dense_hits, vector, k, filter, kwargs, "similarity_search")

    def similarity_search(
        self, query: str, k: int = DEFAULT_K, filter: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        """:meth:`similarity_search_with_score` without the scores."""
        return [d for d, _ in self.similarity_search_with_score(query, k, filter, **kwargs)]

    async def asimilarity_search(
        self, query: str, k: int = DEFAULT_K, filter: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        return [d for d, _ in await self.asimilarity_search_with_score(query, k, filter, **kwargs)]

    def similarity_search_by_vector(
        self, embedding: list[float], k: int = DEFAULT_K, filter: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        """Top ``k`` records by cosine similarity to a query vector (shape ``(d,)``); ``score_threshold`` as in
        :meth:`similarity_search_with_score`."""
        return [d for d, _ in self._dense_hits(embedding, k, filter, kwargs, "similarity_search_by_vector")]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        """Relevance in [0, 1] is the cosine similarity, negative cosines clipped to 0."""
        return lambda score: min(1.0, max(0.0, score))

    def _check_search_arguments(self, name: str, kwargs: Mapping[str, Any], filter: Any) -> Mapping[str, Any] | None:
        """The keywords LangChain passes along are taken (``fetch_k``, ``lambda_mult``); a filter
        must be a dict (:func:`_check_filter`).  MMR refuses a ``score_threshold`` (it ranks by no relevance score).
        """
        kwargs = _search_kwargs(f"{type(self).__name__}.{name}", kwargs)
        _refuse_mmr_threshold(kwargs.get("score_threshold"))
        return _check_filter(filter)

    def _mmr_candidates(
        self, vector: np.ndarray, n: int, filter: Mapping[str, Any] | None
    ) -> list[tuple[Document, np.ndarray]]:
        """The dense channel's top ``n`` records with their stored vectors (copies of the stored records)."""
        idx = self._current()
        return [(_copy(idx.record_of(d)), v) for d, _, v in idx.dense_with_vectors(vector, n, filter)]

    def _fused(self, channel: str, query: str, k: int, filter: Any, kwargs: Mapping[str, Any]) -> list[Document]:
        query = self._query(query, f"{channel}_search")
        kwargs = dict(kwargs)
        embed_as = kwargs.pop(EMBED_AS_OPTION, None) if channel == "hybrid" else None
        kwargs = _search_kwargs(f"{type(self).__name__}.{channel}_search", kwargs)
        k = check_k(k)
        flt = _check_filter(filter)
        threshold = kwargs.get("score_threshold")
        if channel == "bm25":
            bm25_threshold(None, threshold)  # checked before the indexes are touched
            idx = self._current()
            found = _SnapshotBM25(snapshot=idx, k=k).invoke(query, k=k, filter=flt, score_threshold=threshold)
        else:
            # fetch_k as given: 0 is an error like -1, not the default
            depth = check_k(kwargs["fetch_k"], "fetch_k") if kwargs.get("fetch_k") is not None else 50
            check_score_threshold(threshold, maximum=1.0, scale=HYBRID_SCALE)  # before the indexes are touched
            idx = self._current()
            channels: list[BaseRetriever] = [_SnapshotBM25(snapshot=idx),
                                             _SnapshotDense(snapshot=idx, embedding=self.embedding)]
            hybrid = HybridRetriever(retrievers=channels, k=k, fetch_k=depth, score_threshold=threshold)
            found = hybrid.invoke(query, k=k, filter=flt, **embed_as_options({EMBED_AS_OPTION: embed_as}))
        # the record as stored, with the channel scores; id = the record id (its chunk_id)
        out = []
        for d in found:
            record = idx.record(str(d.id))
            if record is not None:
                out.append(_copy(record, scores=d.metadata["scores"]))
        return drop_restricted(out)

    def hybrid_search(
        self, query: str, k: int = DEFAULT_K, filter: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        """Top ``k`` records of BM25 + dense fused by :class:`HybridRetriever` (its default fusion); ``fetch_k``
        (default 50) candidates per channel.  Results carry ``metadata["scores"]``.  ``embed_as="document"``
        embeds the query for the dense channel with ``embed_documents`` (HyDE's hypothetical document).
        ``score_threshold`` drops results whose fused score (``metadata["scores"]["fused"]``, in [0, 1]: relative
        to the query's candidates, see :class:`HybridRetriever`) is below it.

        Raises:
            TypeError, ValueError: bad ``k`` / ``fetch_k`` / ``filter`` / ``score_threshold`` (outside [0, 1]), or
                an unknown keyword.
        """
        return self._fused("hybrid", query, k, filter, kwargs)

    def bm25_search(
        self, query: str, k: int = DEFAULT_K, filter: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        """Top ``k`` records by BM25 (records sharing no term with the query are not returned); results carry
        ``metadata["scores"]``.  ``score_threshold`` drops results whose raw BM25 score is below it (``>= 0``,
        unbounded and corpus-dependent, as :class:`BM25Retriever`'s).

        Raises:
            TypeError, ValueError: bad ``k`` / ``filter`` / ``score_threshold`` (negative or not finite), an unknown
                keyword, a query longer than :data:`~langchain_ragspine.retrievers.bm25.MAX_QUERY_CHARS`.
        """
        return self._fused("bm25", query, k, filter, kwargs)

    def search(self, query: str, search_type: str, **kwargs: Any) -> list[Document]:
        """LangChain's ``search`` with two more search types: ``"hybrid"`` and ``"bm25"``."""
        if search_type == "hybrid":
            return self.hybrid_search(query, **kwargs)
        if search_type == "bm25":
            return self.bm25_search(query, **kwargs)
        return super().search(query, search_type, **kwargs)

    async def asearch(self, query: str, search_type: str, **kwargs: Any) -> list[Document]:
        if search_type in ("hybrid", "bm25"):
            return await asyncio.to_thread(self.search, query, search_type, **kwargs)
        return await super().asearch(query, search_type, **kwargs)

    def as_retriever(self, **kwargs: Any) -> RagSpineStoreRetriever:
        """A :class:`RagSpineStoreRetriever`: ``search_type`` (default ``"hybrid"``; also ``"similarity"``,
        ``"mmr"``, ``"similarity_score_threshold"``, ``"bm25"``) and ``search_kwargs`` (``k``, ``filter``,
        ``fetch_k``, ``lambda_mult``, ``score_threshold``); a call's ``filter`` is ANDed with
        ``search_kwargs["filter"]``, never replacing it.

        Raises:
            ValueError: an unknown ``search_type`` (LangChain's check).
            TypeError: an unknown ``search_kwargs`` key or retriever argument, with a did-you-mean.
        """
        tags = kwargs.pop("tags", None) or [*self._get_retriever_tags()]
        kwargs.setdefault("search_type", "hybrid")
        return RagSpineStoreRetriever(vectorstore=self, tags=tags, **kwargs)


class RagSpineStoreRetriever(ScopedVectorStoreRetriever):
    """LangChain's ``VectorStoreRetriever`` with the ``"hybrid"`` and ``"bm25"`` search types, and strict
    arguments (:class:`~langchain_ragspine.vectorstores.base.ScopedVectorStoreRetriever`'s): an unknown constructor
    argument, ``search_kwargs`` key or call keyword is a ``TypeError`` with a did-you-mean, and
    ``invoke(query, search_type=…)`` is refused, naming it (the search type is the retriever's).

    ``invoke(query, k=…)`` overrides ``search_kwargs`` for one call, as in LangChain, but a call's ``filter=`` is
    ANDed with ``search_kwargs["filter"]`` and ``filter=None`` keeps it, in every search type
    (:class:`~langchain_ragspine.vectorstores.base.ScopedVectorStoreRetriever`): a call never widens the retriever's
    filter.  A query that is not a string is the package's one-line ``TypeError`` (pointing at ``.batch`` /
    ``itemgetter``).

    ``invoke(query, embed_as="document")`` (the package's call option, passed by HyDE for its hypothetical
    document, see :mod:`~langchain_ragspine.retrievers.embed_as`) embeds the text with ``embed_documents``:
    ``hybrid`` hands it to its dense channel, ``similarity`` and ``mmr`` search by that vector, ``bm25`` embeds
    nothing; ``similarity_score_threshold`` has no by-vector search in LangChain's API and embeds it as a query,
    with an :class:`~langchain_ragspine.retrievers.embed_as.EmbedAsIgnoredWarning`.

    Raises:
        ValueError: an ``embed_as`` other than ``"query"`` / ``"document"``.
    """

    #: ``invoke(query, embed_as=…)`` is taken (see the class docstring).
    call_options: ClassVar[tuple[str, ...]] = (EMBED_AS_OPTION,)

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        if self.search_type == "mmr":  # refused when the retriever is built, not at its first call
            _refuse_mmr_threshold(self.search_kwargs.get("score_threshold"))

    allowed_search_types: ClassVar[Sequence[str]] = (
        "similarity",
        "similarity_score_threshold",
        "mmr",
        "hybrid",
        "bm25",
    )

    @gated_exit
    def invoke(self, input: str, config: RunnableConfig | None = None, **kwargs: Any) -> list[Document]:
        return super().invoke(check_query(type(self).__name__, input), config, **kwargs)

    @gated_exit
    async def ainvoke(self, input: str, config: RunnableConfig | None = None, **kwargs: Any) -> list[Document]:
        return await super().ainvoke(check_query(type(self).__name__, input), config, **kwargs)

    def _as_document(self, query: str, kwargs: dict[str, Any]) -> bool:
        """Pop ``embed_as`` from ``kwargs``; whether this search embeds ``query`` as a document by vector
        (``hybrid`` gets the option back in ``kwargs``; ``bm25`` embeds nothing)."""
        embed_as = check_embed_as(kwargs.pop(EMBED_AS_OPTION, None))
        if embed_as == "query" or self.search_type == "bm25" or not query.strip():
            return False
        if self.search_type == "hybrid":
            kwargs[EMBED_AS_OPTION] = embed_as
            return False
        if self.search_type in BY_VECTOR_SEARCH_TYPES:
            return True
        warn_embed_as_ignored(self)
        return False

    @gated_exit
    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        if self._as_document(query, kwargs):
            return drop_restricted(search_as_document(self.vectorstore, self.search_type, query,
                                                      self.call_search_kwargs(kwargs)))
        if self.search_type in ("hybrid", "bm25"):
            return drop_restricted(self.vectorstore.search(query, self.search_type, **self.call_search_kwargs(kwargs)))
        return drop_restricted(super()._get_relevant_documents(query, run_manager=run_manager, **kwargs))

    @gated_exit
    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        if self._as_document(query, kwargs):
            docs = await asearch_as_document(self.vectorstore, self.search_type, query, self.call_search_kwargs(kwargs))
        elif self.search_type in ("hybrid", "bm25"):
            docs = await self.vectorstore.asearch(query, self.search_type, **self.call_search_kwargs(kwargs))
        else:
            docs = await super()._aget_relevant_documents(query, run_manager=run_manager, **kwargs)
        return drop_restricted(docs)
