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
* :meth:`FollowedChunkStore.state` is ``(identity, generation)``, what a derived index is built from: when either
  changed, rebuild (the generation alone misses a replacement by a store of the same generation);
* :meth:`FollowedChunkStore.holds` tells a writer whether the file its write committed to is still the one at the
  path (the store can be replaced between the check and the commit): when not, it writes again, to the new one.

The connection to a replaced file is not closed here: a call of another thread may still be reading it; it closes
when its last reference goes.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import NamedTuple

from langchain_ragspine.backends.directory.chunk_store import ChunkStore
from langchain_ragspine.errors import StoreError

__all__ = ["FileIdentity", "FollowedChunkStore", "StoreState", "file_identity"]

#: ``(st_dev, st_ino)`` of a file.
FileIdentity = tuple[int, int]

#: Opens tried when the file at the path changes while it is opened, before giving up.
_OPEN_ATTEMPTS = 3


def file_identity(path: str | os.PathLike[str]) -> FileIdentity | None:
    """``(st_dev, st_ino)`` of the file at ``path`` (symlinks followed), or ``None`` when there is none."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return (st.st_dev, st.st_ino)


class StoreState(NamedTuple):
    """Which chunk store, at which generation: a derived index built from one state is stale in any other."""

    identity: FileIdentity
    generation: int


class FollowedChunkStore:
    """A :class:`~langchain_ragspine.backends.directory.chunk_store.ChunkStore` kept open on whatever file is at ``path`` now (see the
    module docstring)::

        chunks = FollowedChunkStore(root / "chunks.sqlite", read_only=True)
        chunks.state()            # StoreState(identity=(dev, ino), generation=7)
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
        self._identity: FileIdentity | None = None
        self._closed = False

    def _gone(self) -> StoreError:
        return StoreError(
            "the chunk store is gone (the file was removed: was the store directory deleted?); a store ingested "
            "again at this path is picked up by the next call",
            path=self.path,
        )

    def _open(self) -> tuple[ChunkStore, FileIdentity]:
        """Open the file at the path, and the identity it had both before and after the open (so the connection
        is on that file, not on one that replaced it meanwhile)."""
        for _ in range(_OPEN_ATTEMPTS):
            before = file_identity(self.path)
            create = self._create and self._store is None
            if before is None and not create:
                raise self._gone()
            store = ChunkStore(self.path, read_only=self.read_only, create=create)
            after = file_identity(self.path)
            if before is not None and before == after:
                return store, before
            store.close()  # created just now, or replaced while it was opened: open what is there now
        raise StoreError(f"the chunk store was replaced during each of {_OPEN_ATTEMPTS} attempts to open it",
                         path=self.path)

    def _current(self) -> tuple[ChunkStore, FileIdentity]:
        now = file_identity(self.path)
        if now is None and not (self._create and self._store is None):
            raise self._gone()
        with self._lock:
            if self._closed:
                raise StoreError("chunk store is closed", path=self.path)
            if self._store is None or self._identity is None or now != self._identity:
                # the old connection is not closed: a call of another thread may still be reading it
                self._store, self._identity = self._open()
            return self._store, self._identity

    def store(self) -> ChunkStore:
        """The chunk store at the path now: the open one, or the file that replaced it, opened.

        Raises:
            StoreError: no file at the path; it is not a chunk store; the follower is closed.
        """
        return self._current()[0]

    def state(self) -> StoreState:
        """``(identity, generation)`` of the chunk store at the path now (after :meth:`store`'s check); both are
        read from the same file.

        Raises:
            StoreError: as :meth:`store`; SQLite fails.
        """
        store, identity = self._current()
        return StoreState(identity, store.generation)

    @property
    def opened(self) -> ChunkStore | None:
        """The store opened by the last check, without a new one (no file system call), or ``None`` before the
        first."""
        return self._store

    def holds(self, store: ChunkStore) -> bool:
        """Whether ``store`` (returned by :meth:`store`) is on the file at the path now: ``False`` once that file
        was replaced or removed."""
        with self._lock:
            current, identity = self._store, self._identity
        return current is store and identity is not None and file_identity(self.path) == identity

    def close(self) -> None:
        """Close the open connection (idempotent); later calls raise :class:`StoreError`."""
        with self._lock:
            self._closed = True
            if self._store is not None:
                self._store.close()
