"""The directory store as the backend of :class:`~langchain_ragspine.vectorstores.RagSpineVectorStore`: records in
a store directory's versioned SQLite chunk store, searched through in-memory indexes (issue 26, B5).

:class:`DirectoryBackend` is a :class:`~langchain_ragspine.backends.base.StoreBackend`::

    backend = DirectoryBackend.open("store/", HashingEmbeddings(256))      # or ragspine ingest's output
    backend.upsert([Document("梅雨は六月から。", id="tsuyu")])                # one transaction, under the lock
    backend.search().vector_search(vector, 4, {"lang": "ja"})              # [(record, cosine)], best first
    backend.get_by_ids(["tsuyu"])                                          # the records, as written

Two layers:

* the **records** — :class:`ChunkStoreBackend`, the versioned chunk store at ``DIR/chunks.sqlite``, followed at its
  path (:mod:`langchain_ragspine.backends.directory.follow`: the store directory deleted and ingested again, or
  another store moved into its place, is reopened before the next read or write, whatever its generation; a write
  that returns is in the store at the path, never only in a replaced file).  Any :class:`RecordBackend` (a custom
  record source: ``records()``, ``upsert``, ``delete``, ``generation``, ``cache_path``) works in its place, its
  indexes built again whenever its generation changes;
* the **indexes** — BM25 and dense over the records, kept in memory as segments
  (:class:`~langchain_ragspine.backends.directory.indexes.IndexSnapshot`), brought up to date when the store's
  state (which file, which store id, at which generation) differs from the one they were built from (checked on
  every :meth:`DirectoryBackend.current`, so writes by another process and a rebuilt directory are seen).  Within
  one store directory an update reads only the documents written since (the chunk store's change feed,
  :meth:`~langchain_ragspine.backends.directory.chunk_store.ChunkStore.versions_since`) and adds them as one small
  segment, tokenized and embedded alone, searched beside the others with the scores one index over the same
  records gives; another file or store id, or a history the feed cannot describe, builds them again.  Chunk
  vectors come from the store's embedding cache (``DIR/embeddings.sqlite``, keyed by chunk id and text hash),
  where a write puts its records' vectors after it commits; a cache that cannot be written (a full disk) never
  fails a write or a search (:class:`CacheNotWrittenWarning`).

Records read back with exactly the metadata they were written with (the record marker of
:func:`~langchain_ragspine.backends.versioning.mark_record`); chunks written by ``ragspine ingest`` come back as
:meth:`~langchain_ragspine.backends.versioning.StoredChunk.to_document` gives them (full lineage).
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import warnings
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Protocol, runtime_checkable

import langchain_core
import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_ragspine._stacklevel import user_stacklevel
from langchain_ragspine.backends.base import check_vector_model
from langchain_ragspine.backends.directory.chunk_store import VECTORSTORE_WRITER, ChunkStore, StoredChunk
from langchain_ragspine.backends.directory.embedding_cache import EmbeddingCache
from langchain_ragspine.backends.directory.faiss_index import INDEX_KINDS
from langchain_ragspine.backends.directory.follow import FollowedChunkStore, StoreState
from langchain_ragspine.backends.directory.graph_file import remove_graph_file, withdraw_unserved
from langchain_ragspine.backends.directory.indexes import (
    IndexConfig,
    IndexSnapshot,
    StoredRecord,
    internal_record,
)
from langchain_ragspine.backends.directory.layout import (
    CHUNKS_DB,
    EMBEDDING_CACHE,
    STORE_MARKER,
    prepare_store_dir,
    read_index_record,
    store_writer,
)
from langchain_ragspine.backends.directory.lock import StoreReplacedError, check_lock_timeout, writer_lock
from langchain_ragspine.backends.directory.raptor_file import remove_raptor_file
from langchain_ragspine.backends.directory.raptor_file import withdraw_unserved as withdraw_from_raptor
from langchain_ragspine.backends.versioning import (
    filter_metadata,
    mark_record,
    record_doc_id,
    written_record,
)
from langchain_ragspine.documents import has_visible_text
from langchain_ragspine.embeddings.batching import embed_in_batches
from langchain_ragspine.embeddings.cache import CachedEmbeddings, model_key_for
from langchain_ragspine.errors import StoreError, StoreWriteError, read_only_mount
from langchain_ragspine.sensitivity import is_restricted
from langchain_ragspine.text import index_text
from langchain_ragspine.tokenizers import get_tokenizer

__all__ = ["CacheNotWrittenWarning", "ChunkStoreBackend", "DirectoryBackend", "RecordBackend"]

#: Documents read per query when a write or an index update reads some documents of the store.
_READ_BATCH = 500
#: Texts per ``embed_documents`` call when the indexes embed new records.
_EMBED_BATCH = 32
#: Vectors of written records kept for the next index update at most (more: it reads them from the cache).
_FRESH_MAX = 50_000
#: A full rebuild instead of an update when a change touches more documents than this (or than a quarter of the
#: store): one pass over the store is then cheaper than reading the documents one batch at a time.
_UPDATE_MAX_DOCS = 2_000


class CacheNotWrittenWarning(UserWarning):
    """A :class:`DirectoryBackend` (a :class:`~langchain_ragspine.vectorstores.RagSpineVectorStore`'s) rebuilding
    its indexes could not write the store directory's embedding cache (a full disk, a read-only directory): the
    search went on, the vectors it missed embedded in memory only; the
    message names the file and the cause."""


@runtime_checkable
class RecordBackend(Protocol):
    """A custom record source a :class:`DirectoryBackend` indexes in memory (:class:`ChunkStoreBackend` is the
    store directory's).

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



def _stored_record(chunk: StoredChunk) -> StoredRecord:
    """A chunk row as the indexes take it: its document, the record returned, the metadata a filter sees."""
    return chunk.doc_id, written_record(chunk), filter_metadata(chunk)


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
        return [written_record(c) for c in self.store.iter_chunks()]

    def snapshot(self) -> tuple[ChunkStore, StoreState]:
        """The chunk store at ``DIR/chunks.sqlite`` now and its :attr:`state`, read from that one store object
        (:meth:`~langchain_ragspine.backends.directory.follow.FollowedChunkStore.current`).

        Raises:
            StoreError: as :attr:`store`.
        """
        return self._chunks.current()

    @staticmethod
    def stored_records(store: ChunkStore, doc_ids: Sequence[str] | None = None) -> list[StoredRecord]:
        """``(doc_id, record, seen)`` of the active chunks of ``store`` (of the documents ``doc_ids`` only, when
        given; read in batches of 500): records as :meth:`records` gives them, ``seen`` what a filter sees
        (:func:`~langchain_ragspine.backends.versioning.filter_metadata`, as on PostgreSQL)."""
        if doc_ids is None:
            return [_stored_record(c) for c in store.iter_chunks()]
        wanted = sorted(set(doc_ids))
        out: list[StoredRecord] = []
        for start in range(0, len(wanted), _READ_BATCH):
            out += [_stored_record(c) for c in store.iter_chunks(doc_id=wanted[start : start + _READ_BATCH])]
        return out

    def _write(self, change: Callable[[ChunkStore], None], touched: Sequence[str] = ()) -> None:
        """``change(store)`` as one transaction under the writer lock, on the store at the path; written again on
        the new store when the file was replaced while it committed.  Afterwards the derived files lose what they
        held of the ``touched`` chunk ids that are now RESTRICTED or gone (:func:`_withdraw`)."""
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
                    if written:
                        _withdraw(self.root, store, touched)
                        _withdraw_from_raptor(self.root, store)
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

    def upsert(self, docs: Sequence[Document], *, model_key: str | None = None) -> None:
        """Write ``docs`` (see the class docstring).  ``model_key``: the model of the writer's vectors — in the
        write's transaction, refused when the store records another
        (:func:`~langchain_ragspine.backends.base.check_vector_model`; nothing written) and recorded when it
        records none.

        Raises:
            StoreError: another model's store; as the class docstring.
        """

        def change(store: ChunkStore) -> None:
            if model_key is not None:
                check_vector_model(self.vector_model_key(store), model_key, str(self.root))
                if store.vector_model_key is None:
                    store.set_vector_model_key(model_key)
            self._upsert(store, docs)

        self._write(change, touched=[str(d.id) for d in docs])

    def vector_model_key(self, store: ChunkStore | None = None) -> str | None:
        """The model the store's vectors were made with: the chunk store's record
        (:attr:`ChunkStore.vector_model_key`; of ``store``, a write's, else :attr:`store`), else — a store
        ingested before the record existed — the saved vector index's (``index.json``), else ``None``.

        Raises:
            StoreError: the chunk store is unreadable.
        """
        saved = (self.store if store is None else store).vector_model_key
        if saved is None:
            vector = read_index_record(self.root)[0].get("vector")
            key = vector.get("model_key") if isinstance(vector, Mapping) else None
            saved = key if isinstance(key, str) and key else None
        return saved

    def _upsert(self, store: ChunkStore, docs: Sequence[Document]) -> None:
        # only the documents the call touches are read: those of its records, and those its ids are in now
        where = {cid: c.doc_id for cid, c in store.get_chunks(sorted({str(d.id) for d in docs})).items()}
        targets = {record_doc_id(d) for d in docs}
        active = self._active_of(store, targets | set(where.values()))
        groups: dict[str, dict[str, Document]] = {}
        moved: dict[str, set[str]] = {}
        for doc in docs:
            stored = mark_record(doc)
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
        self._write(lambda store: self._delete(store, ids), touched=[str(i) for i in ids])

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


def _withdraw(root: Path, store: ChunkStore, touched: Sequence[str]) -> None:
    """After a committed write, the derived files lose what they held of chunks the write withdrew:

    * the embedding cache (``embeddings.sqlite``: dense and learned-sparse vectors) every row of a ``touched``
      chunk that is now RESTRICTED or no longer active (what ``ingest`` prunes; a write of the vector store's
      relabelled or deleted it);
    * the relation graph (``graph.json``, when the store has one) what it held of chunks retracted, changed or
      relabelled RESTRICTED (:func:`~langchain_ragspine.backends.directory.graph_file.withdraw_unserved`); if that
      cannot be written, the file is removed.

    A derived file never keeps a withdrawn chunk's vectors or entities."""
    cache = root / EMBEDDING_CACHE
    if touched and cache.is_file():
        active = store.get_chunks(sorted(set(touched)))
        gone = [c for c in touched if c not in active or is_restricted(active[c].to_document())]
        if gone:
            with EmbeddingCache(cache) as embeddings:
                embeddings.delete_chunks(gone)
    try:
        withdraw_unserved(root, store)
    except OSError:
        remove_graph_file(root)


def _withdraw_from_raptor(root: Path, store: ChunkStore) -> None:
    """After a committed write: the RAPTOR tree (``raptor.json``, when the store has one) loses the leaves of
    chunks the write retracted, changed or relabelled RESTRICTED and every summary above them
    (:func:`~langchain_ragspine.backends.directory.raptor_file.withdraw_unserved`); if that cannot be written, the
    file is removed — a derived file never keeps a withdrawn chunk's vector or text."""
    try:
        withdraw_from_raptor(root, store)
    except OSError:
        remove_raptor_file(root)


def _warn_at_caller(message: str, category: type[Warning]) -> None:
    """A warning of the indexes, attributed to the first caller outside this package and langchain_core."""
    warnings.warn(message, category, stacklevel=user_stacklevel(langchain_core))


class _RecordSearch:
    """One :class:`IndexSnapshot` as a :class:`~langchain_ragspine.backends.base.SearchBackend` whose results are
    the records as written (the snapshot's searches give the indexed documents, ``chunk_id`` set)."""

    def __init__(self, snapshot: IndexSnapshot) -> None:
        self.snapshot = snapshot

    def has_vectors(self) -> bool:
        """Whether a vector search can find anything (else the query need not be embedded)."""
        return self.snapshot.has_vectors()

    def lexical_search(
        self, query: str, k: int, filter: Mapping[str, Any] | None = None, *, score_threshold: float | None = None
    ) -> list[tuple[Document, float]]:
        snap = self.snapshot
        return [(snap.record_of(d), s) for d, s in snap.bm25(query, k, filter, threshold=score_threshold)]

    def vector_search(
        self, vector: Sequence[float] | np.ndarray, k: int, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[Document, float]]:
        snap = self.snapshot
        return [(snap.record_of(d), s) for d, s in snap.dense(np.asarray(vector, dtype=np.float32), k, filter)]

    def vector_search_with_vectors(
        self, vector: Sequence[float] | np.ndarray, k: int, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[Document, float, np.ndarray]]:
        snap = self.snapshot
        hits = snap.dense_with_vectors(np.asarray(vector, dtype=np.float32), k, filter)
        return [(snap.record_of(d), s, v) for d, s, v in hits]


class DirectoryBackend:
    """The directory store as a :class:`~langchain_ragspine.backends.base.StoreBackend` (see the module
    docstring): ``DirectoryBackend.open(store_dir, embedding)``, or ``DirectoryBackend(source, embedding)`` over a
    :class:`ChunkStoreBackend` or any :class:`RecordBackend`.

    Args:
        source: where the records live.
        embedding: the dense channel's model (for a store written by ``ragspine ingest --embedding …`` the same
            model, so cached chunk vectors are reused).
        tokenizer: the BM25 tokenizer (default ``"auto"``).
        index_kind: the FAISS index kind of the dense channel's main segment (default ``"auto"``; the small
            segments of recent writes are always exact).

    Raises:
        TypeError: ``embedding`` is not an ``Embeddings``.
        ValueError: an unknown ``tokenizer`` or ``index_kind``.
        StoreError: the store's vectors were made with another model
            (:func:`~langchain_ragspine.backends.base.check_vector_model`, as on PostgreSQL).
    """

    #: Nothing refused: the directory store has every feature (parents, contextual headers, MMR, BM25, hybrid).
    unsupported: Mapping[str, str] = MappingProxyType({})

    def __init__(
        self,
        source: ChunkStoreBackend | RecordBackend,
        embedding: Embeddings,
        *,
        tokenizer: str = "auto",
        index_kind: str = "auto",
    ) -> None:
        self.check_options(embedding, tokenizer, index_kind)
        self._config = IndexConfig(get_tokenizer(tokenizer), index_kind)
        if isinstance(source, ChunkStoreBackend):  # one rule on every backend: never another model's vectors
            check_vector_model(source.vector_model_key(), model_key_for(embedding), str(source.root))
        self.source = source
        self.embedding = embedding
        self.tokenizer = tokenizer
        self.index_kind = index_kind
        self._lock = threading.RLock()
        self._indexes: IndexSnapshot | None = None
        # (chunk_id, text) of vectors the indexes hold that the cache could not take yet (see _embedder)
        self._unsaved: dict[tuple[str, str], None] = {}
        # vectors of the last writes' records, by (chunk_id, index text), until the next index update takes them
        self._fresh: dict[tuple[str, str], np.ndarray] = {}

    @staticmethod
    def check_options(embedding: Any, tokenizer: str, index_kind: str) -> None:
        """Refuse what the constructor would refuse, before anything is opened or created.

        Raises:
            TypeError: ``embedding`` is not an ``Embeddings``.
            ValueError: an unknown ``tokenizer`` or ``index_kind``.
        """
        if not isinstance(embedding, Embeddings):
            raise TypeError(f"embedding must be a langchain_core Embeddings, got {type(embedding).__name__}")
        if index_kind not in INDEX_KINDS:
            raise ValueError(f"index_kind must be one of {INDEX_KINDS}, got {index_kind!r}")
        get_tokenizer(tokenizer)

    @classmethod
    def open(
        cls,
        store_dir: str | os.PathLike[str],
        embedding: Embeddings,
        *,
        tokenizer: str = "auto",
        index_kind: str = "auto",
        lock_timeout: float | None = None,
    ) -> DirectoryBackend:
        """The backend of the store directory ``store_dir`` (created when missing; :class:`ChunkStoreBackend`);
        ``lock_timeout``: seconds a write waits for another writer (``None``: as long as it takes).

        Raises:
            StoreError: ``store_dir`` cannot be a store directory; TypeError / ValueError: as the constructor
            (checked before the directory is touched).
        """
        cls.check_options(embedding, tokenizer, index_kind)
        return cls(ChunkStoreBackend(store_dir, lock_timeout=lock_timeout), embedding, tokenizer=tokenizer,
                   index_kind=index_kind)

    # -- where the records are ----------------------------------------------------------------------------------
    @property
    def root(self) -> Path | None:
        """The store directory (``None`` over a custom :class:`RecordBackend`)."""
        root = getattr(self.source, "root", None)
        return root if isinstance(root, Path) else None

    @property
    def where(self) -> str | None:
        """The store directory, for messages (``None`` over a custom :class:`RecordBackend`)."""
        return None if self.root is None else str(self.root)

    @property
    def store(self) -> ChunkStore:
        """The chunk store at ``DIR/chunks.sqlite`` now (:attr:`ChunkStoreBackend.store`).

        Raises:
            TypeError: over a custom :class:`RecordBackend`; StoreError: as :attr:`ChunkStoreBackend.store`.
        """
        if not isinstance(self.source, ChunkStoreBackend):
            raise TypeError(f"{type(self.source).__name__} is not a store directory")
        return self.source.store

    @property
    def generation(self) -> int:
        """The record source's generation (changed by every write, any process's)."""
        return self.source.generation

    def records(self) -> list[Document]:
        """Every active record, as written (RESTRICTED ones included: this is storage)."""
        return self.source.records()

    # -- the StoreBackend interface -------------------------------------------------------------------------------
    def upsert(self, records: Sequence[Document]) -> None:
        """Write ``records`` (ids set, each once) as :meth:`ChunkStoreBackend.upsert` does — one transaction
        under the writer lock — then put their vectors into the embedding cache (never failing the write)."""
        with self._lock:
            if isinstance(self.source, ChunkStoreBackend):
                self.source.upsert(records, model_key=model_key_for(self.embedding))
            else:
                self.source.upsert(records)
            self._embed_written(records)

    def delete(self, ids: Sequence[str]) -> None:
        """Remove the records with these ids (unknown ids ignored), one transaction."""
        with self._lock:
            self.source.delete(ids)

    def get_by_ids(self, ids: Sequence[str]) -> list[Document]:
        """The indexed records with these ids, in the order asked (unknown and RESTRICTED ones left out: the
        indexes never hold those).  The objects are the indexes' own: copy before handing them out."""
        idx = self.current()
        return [d for d in (idx.record(str(i)) for i in ids) if d is not None]

    def search(self) -> _RecordSearch:
        """Search over the current indexes (:meth:`current`), results the records as written."""
        return _RecordSearch(self.current())

    def close(self) -> None:
        """Close the record source (idempotent)."""
        self.source.close()

    # -- the indexes ------------------------------------------------------------------------------------------------
    def _state(self) -> Hashable:
        """What the indexes are built from: a :class:`ChunkStoreBackend`'s ``(file identity, store id,
        generation)`` (its store replaced, whatever the generation, counts as a change), another backend's
        ``generation``."""
        backend = self.source
        return backend.state if isinstance(backend, ChunkStoreBackend) else backend.generation

    def current(self) -> IndexSnapshot:
        """The indexes of the backend's current state: updated with the documents written since they were built
        (the chunk store's change feed), or built again when the store was replaced or the feed cannot say."""
        with self._lock:
            backend = self.source
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
                    rows = [(record_doc_id(d), d, d.metadata) for d in backend.records()]
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
        cache = self.source.cache_path
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
        backend = self.source
        held = contextlib.ExitStack()
        busy = False
        if isinstance(backend, ChunkStoreBackend):
            try:
                held.enter_context(writer_lock(backend.root, timeout=0, on_wait=lambda _: None))
            except StoreError:  # another writer holds it (StoreBusyError), or it cannot be taken (a full disk)
                busy = True
        with held:
            yield busy


    def _embed_written(self, records: Sequence[Document]) -> None:
        """Put the vectors of records just written into the store's embedding cache (those not RESTRICTED, with
        visible text, that it lacks), so the next search — this object's, another process's, or
        :func:`~langchain_ragspine.pipeline.sources.open_retriever`'s with the same model — finds them; only while the
        store's writer lock can be taken at once (as a search writes the cache), else the next search embeds them.
        The write has committed: nothing here fails it.  A cache that cannot be written or a model that fails is a
        :class:`CacheNotWrittenWarning` (the next search embeds what is missing)."""
        if self.source.cache_path is None:
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

