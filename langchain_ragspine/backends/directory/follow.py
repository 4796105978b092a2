"""Follow the chunk store at a path: the one rule for everything that keeps a store directory open.

A process that keeps a store directory's ``chunks.sqlite`` open — a served retriever
(:class:`~langchain_ragspine.retrievers.live.LiveStoreRetriever`), the
:class:`~langchain_ragspine.vectorstores.RagSpineVectorStore` of a long-lived app — holds one SQLite connection to
one *file*.  The directory can be replaced under it: ``rm -rf store && ragspine ingest corpus --store store``, or
a store built elsewhere ``mv``'d into its place.  The connection would go on reading, and writing, the old file —
unlinked (so every write to it is lost) or moved aside — and the generation counter cannot tell: the new file's
may be the same number, or any other.

The rule: a file is identified by ``(st_dev, st_ino)`` (:func:`file_identity`).  While a connection keeps the old
file open its inode is not freed, so the new file cannot reuse it: another identity at the path is another file.
:class:`FollowedChunkStore` applies it before every use:

* :meth:`FollowedChunkStore.store` stats the path (one ``stat`` call, a few µs) and reopens the chunk store when
  the file there is not the one its connection has open; no file at the path is a
  :class:`~langchain_ragspine.errors.StoreError`;
* :meth:`FollowedChunkStore.state` is ``(identity, store id, generation)``, what a derived index is built from:
  when any of them changed, rebuild.  The generation alone misses a replacement by a store of the same generation;
  the identity misses another store copied over this one *in place* (``cp -r new/. store/``: the same inode, the
  bytes overwritten); the store id (``meta.store_id``, random, written when a store is created:
  :attr:`~langchain_ragspine.backends.directory.chunk_store.ChunkStore.store_id`) tells those apart.  A store
  without one (created before store ids, never opened by a writer since) compares as "no id", so a copied-in
  store that has one is another store;
* a connection keeps the pages it read cached and, in WAL mode, trusts them while the WAL index does not change —
  which an in-place copy does not touch — so it would go on reading the old store (or a mix).  The stat of the
  path is therefore also compared by modification time, change time and size: when any changed (an in-place
  copy; a checkpoint of the store's own writes, now and then) the file is opened again, and the state read from
  the new connection;
* a store in a folder this process cannot write is read through a *snapshot* connection
  (:func:`~langchain_ragspine.backends.directory._sqlite.connect_read_only`), which sees no later commit: it is
  opened again whenever the ``-wal`` file (inode, modification time, size) or the presence of the ``-shm`` file
  changes — a writer allowed to write there creates them before its first commit;
* :meth:`FollowedChunkStore.holds` tells a writer whether the file its write committed to is still the one at the
  path (the store can be replaced between the check and the commit): when not, it writes again, to the new one.

The connection to a replaced file is not closed here: a call of another thread may still be reading it; it closes
when its last reference goes.
"""

from __future__ import annotations

import os
import threading
import weakref
from pathlib import Path
from typing import NamedTuple

from langchain_ragspine.backends.directory._sqlite import wal_stat
from langchain_ragspine.backends.directory.chunk_store import ChunkStore
from langchain_ragspine.errors import StoreError

__all__ = ["FileIdentity", "FileStat", "FollowedChunkStore", "StoreState", "file_identity", "file_stat"]

#: ``(st_dev, st_ino)`` of a file.
FileIdentity = tuple[int, int]

#: ``(st_dev, st_ino, st_mtime_ns, st_ctime_ns, st_size)`` of a file: another value, open it again.
FileStat = tuple[int, int, int, int, int]

#: Opens tried when the file at the path changes while it is opened, before giving up.
_OPEN_ATTEMPTS = 3


def file_identity(path: str | os.PathLike[str]) -> FileIdentity | None:
    """``(st_dev, st_ino)`` of the file at ``path`` (symlinks followed), or ``None`` when there is none."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino)


def file_stat(path: str | os.PathLike[str]) -> FileStat | None:
    """``(st_dev, st_ino, st_mtime_ns, st_ctime_ns, st_size)`` of the file at ``path`` (symlinks followed), or
    ``None`` when there is none: another value, another file or the same file changed."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size)


class StoreState(NamedTuple):
    """Which chunk store (its file and its store id), at which generation: a derived index built from one state is
    stale in any other.  ``store_id`` is ``None`` for a store without one."""

    identity: FileIdentity
    store_id: str | None
    generation: int


class FollowedChunkStore:
    """A :class:`~langchain_ragspine.backends.directory.chunk_store.ChunkStore` kept open on whatever file is at ``path`` now (see the
    module docstring)::

        chunks = FollowedChunkStore(root / "chunks.sqlite", read_only=True)
        chunks.state()            # StoreState(identity=(dev, ino), store_id='5f0c…', generation=7)
        chunks.store().get_chunks(["a#0"])
        # rm -rf root && ragspine ingest corpus --store root
        chunks.state()            # another identity: the new file, reopened

    Args:
        path: the chunk store file (``DIR/chunks.sqlite``).
        read_only: open it read-only (default ``False``: writable, never creating it again once opened).
        create: create the file on the first open when it is missing (default ``False``); later opens never create
            one, so a store removed under a writer is not recreated empty.

    Nothing is opened until the first call.

    Raises:
        StoreError: (per call) no file at ``path``; the file is not a chunk store; the follower is closed.
    """

    def __init__(self, path: str | os.PathLike[str], *, read_only: bool = False, create: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self._create = create and not read_only
        self._lock = threading.Lock()
        self._store: ChunkStore | None = None
        self._stat: FileStat | None = None
        # for a snapshot connection (a folder this process cannot write: SQLiteFile.snapshot), the WAL files' stat
        # when it was opened: a writer opening or committing changes it, and the store is opened again
        self._wal: object = None
        # the file each connection this follower opened is on (a reopen of the same file, after a checkpoint
        # changed its stat, leaves a write on the previous connection in the store at the path)
        self._opened_on: weakref.WeakKeyDictionary[ChunkStore, FileIdentity] = weakref.WeakKeyDictionary()
        self._closed = False

    def _gone(self) -> StoreError:
        return StoreError(
            "the chunk store is gone (the file was removed: was the store directory deleted?); a store ingested "
            "again at this path is picked up by the next call",
            path=self.path,
        )

    def _open(self) -> tuple[ChunkStore, FileStat]:
        """Open the file at the path, and the stat it had both before and after the open (so the connection is on
        that file, not on one that replaced it meanwhile)."""
        for _ in range(_OPEN_ATTEMPTS):
            before = file_stat(self.path)
            create = self._create and self._store is None
            if before is None and not create:
                raise self._gone()
            store = ChunkStore(self.path, read_only=self.read_only, create=create)
            after = file_stat(self.path)
            if before is not None and before == after:
                return store, before
            if after is not None and before is not None and before[:2] == after[:2] and not create:
                return store, after  # the same file, written meanwhile (a checkpoint): the connection reads it now
            store.close()  # created just now, or replaced while it was opened: open what is there now
        raise StoreError(f"the chunk store was replaced during each of {_OPEN_ATTEMPTS} attempts to open it",
                         path=self.path)

    def _current(self) -> tuple[ChunkStore, FileIdentity]:
        now = file_stat(self.path)
        if now is None and not (self._create and self._store is None):
            raise self._gone()
        with self._lock:
            if self._closed:
                raise StoreError("chunk store is closed", path=self.path)
            snapshot = self._store is not None and self._store.snapshot
            if self._store is None or self._stat is None or now != self._stat or (
                    snapshot and wal_stat(self.path) != self._wal):
                # the old connection is not closed: a call of another thread may still be reading it
                wal = wal_stat(self.path)  # before the open: a change during it opens again next time
                self._store, self._stat = self._open()
                self._wal = wal if self._store.snapshot else None
                self._opened_on[self._store] = (self._stat[0], self._stat[1])
            return self._store, (self._stat[0], self._stat[1])

    def store(self) -> ChunkStore:
        """The chunk store at the path now: the open one, or the file that replaced it, opened.

        Raises:
            StoreError: no file at the path; it is not a chunk store; the follower is closed.
        """
        return self._current()[0]

    def state(self) -> StoreState:
        """``(identity, store_id, generation)`` of the chunk store at the path now (after :meth:`store`'s check),
        all read from the same file (the id and the generation in one query).

        Raises:
            StoreError: as :meth:`store`; SQLite fails.
        """
        store, identity = self._current()
        return StoreState(identity, *store.follow_state())

    def current(self) -> tuple[ChunkStore, StoreState]:
        """The chunk store at the path now and its :meth:`state`, read from that same store object (so a caller
        that reads more from it reads the file the state describes, even if the path is replaced meanwhile).

        Raises:
            StoreError: as :meth:`state`.
        """
        store, identity = self._current()
        return store, StoreState(identity, *store.follow_state())

    @property
    def opened(self) -> ChunkStore | None:
        """The store opened by the last check, without a new one (no file system call), or ``None`` before the
        first."""
        return self._store

    def holds(self, store: ChunkStore) -> bool:
        """Whether ``store`` (returned by :meth:`store`) is on the file at the path now: ``False`` once that file
        was replaced or removed."""
        with self._lock:
            opened_on = self._opened_on.get(store)
        return opened_on is not None and file_identity(self.path) == opened_on

    def close(self) -> None:
        """Close the open connection (idempotent); later calls raise :class:`StoreError`."""
        with self._lock:
            self._closed = True
            if self._store is not None:
                self._store.close()
