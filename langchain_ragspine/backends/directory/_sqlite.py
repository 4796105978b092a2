"""Plumbing shared by the package's SQLite files (the chunk store, the embedding cache).

One connection per object (``check_same_thread=False``, guarded by a re-entrant lock), autocommit mode with explicit
``BEGIN IMMEDIATE … COMMIT`` transactions rolled back on any exception, WAL journal with ``synchronous=NORMAL``
for writers, ``mode=ro`` URIs for readers (:func:`connect_read_only`: also in a folder this process cannot write, as
a snapshot connection without SQLite's shared memory), and every ``sqlite3`` error re-raised as a :class:`StoreError` that names
the file — a failed write of a writable file (``SQLITE_FULL``: the disk is full; ``SQLITE_IOERR``) as a
:class:`~langchain_ragspine.errors.StoreWriteError` saying that SQLite rolled it back and nothing committed was lost
(:func:`~langchain_ragspine.errors.write_errors`).  Subclasses set :attr:`SQLiteFile._what` (for messages) and
implement ``_ensure_schema``; :meth:`SQLiteFile.is_blank` tells a file whose first transaction never committed (0
bytes, or no table) from one with a schema.

:meth:`SQLiteFile.write_batch` groups many small write transactions (one per document of an ingest) into few
commits: inside it each write transaction is a ``SAVEPOINT`` of one ``BEGIN IMMEDIATE`` transaction that commits
every :data:`BATCH_WRITES` writes or :data:`BATCH_SECONDS` seconds and when the block ends.  Each write stays
all-or-nothing (a failing one rolls back to its savepoint), what committed before a failure stays committed, and a
crash loses at most the writes since the last commit (never part of one); see https://www.sqlite.org/lang_savepoint.html.
:meth:`SQLiteFile.atomic` is the same grouping with one commit at the end and a rollback of everything on any
exception: a group of writes that is all or nothing (a vector store's ``add_documents`` call).
Per-commit costs (the WAL frames of every page a write touches, written again by each commit, and the checkpoints
they trigger) are paid once per batch instead of once per write.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from langchain_ragspine._closing import Closing
from langchain_ragspine.backends.directory.regular_files import check_regular
from langchain_ragspine.errors import StoreError, write_errors

#: What a failed write of a SQLite file leaves (the message of its :class:`~langchain_ragspine.errors.StoreWriteError`).
ROLLED_BACK = "SQLite rolled the unfinished write back, and everything committed before it is intact"
#: Seconds a writer waits for another writer's lock before giving up.
DEFAULT_BUSY_TIMEOUT_S = 5.0
#: The files SQLite keeps beside a database (its WAL, the WAL index, a rollback journal): each, when there, must be a
#: regular file too.
_COMPANIONS = ("-wal", "-shm", "-journal")
#: Writes (write transactions) a :meth:`SQLiteFile.write_batch` commits together at most.
BATCH_WRITES = 1000
#: Connection settings for the time of a :meth:`SQLiteFile.write_batch` (restored after it): a page cache that holds a
#: batch's transaction (64 MiB, instead of 2 MiB, so it does not spill into the WAL before its commit) and WAL
#: checkpoints every 10,000 pages instead of 1,000.  Neither changes what a commit guarantees.
BATCH_PRAGMAS: tuple[tuple[str, int], ...] = (("cache_size", -65536), ("wal_autocheckpoint", 10000))
#: Seconds a :meth:`SQLiteFile.write_batch` keeps a transaction open at most (so other writers, which wait up to
#: their busy timeout, get the lock in time), checked after each write.
BATCH_SECONDS = 0.5


def check_sqlite_files(path: Path) -> None:
    """Refuse a SQLite database whose file, or one of SQLite's files beside it (:data:`_COMPANIONS`), is there but
    is not a regular file (a FIFO would block SQLite forever, a device feed it without end).

    Raises:
        StoreError: naming the file and what it is (:func:`~langchain_ragspine.backends.directory.regular_files.
            check_regular`).
    """
    for companion in ("", *_COMPANIONS):
        check_regular(path.with_name(path.name + companion))


def _probe(conn: sqlite3.Connection) -> None:
    """Read the schema (what opens the file, and in WAL mode its ``-wal`` / ``-shm``, for real)."""
    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()


def _needs_the_folder(error: sqlite3.Error) -> bool:
    """Whether SQLite failed for want of a file it creates beside the database (``SQLITE_CANTOPEN``,
    ``SQLITE_READONLY_DIRECTORY``, ``SQLITE_READONLY_CANTINIT``…), not because the file is damaged."""
    code = getattr(error, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in (sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY)


def _cannot_create_in(folder: Path) -> str | None:
    """Why no file can be created in ``folder`` now, as the end of a sentence, or ``None`` when nothing says so:
    it is not writable for this process (``os.access``, which also sees a read-only mount), or its file system has
    no free inode or block left (``statvfs``).  Writes nothing."""
    if not os.access(folder, os.W_OK):
        return f"its folder {folder} is read-only for this process"
    with contextlib.suppress(OSError, AttributeError):
        st = os.statvfs(folder)
        if st.f_files > 0 and st.f_favail == 0:
            return f"the file system of its folder {folder} has no free inode left"
        if st.f_bavail == 0:
            return f"the file system of its folder {folder} is full"
    return None


def connect_read_only(path: Path, *, what: str, timeout: float) -> tuple[sqlite3.Connection, bool]:
    """A read-only connection to the SQLite file ``path`` (autocommit, ``check_same_thread=False``) and whether it
    is a *snapshot* (see below); a folder this process cannot write is no obstacle::

        conn, snapshot = connect_read_only(root / "chunks.sqlite", what="chunk store", timeout=5.0)

    First the ordinary ``mode=ro`` URI.  A WAL database read that way needs its ``-shm`` (and ``-wal``) file, which
    SQLite creates beside it when missing — impossible in a folder that is read-only for this process (a read-only
    mount, a store owned by another user, ``chmod -R a-w``) or on a file system without a free inode or block:
    SQLite says ``attempt to write a readonly database`` or ``unable to open database file``.  Then, and only when
    the folder says why (:func:`_cannot_create_in`: ``os.access``, ``statvfs``; nothing is written to find out),
    the file is opened without SQLite's shared memory, as https://www.sqlite.org/wal.html ("Read-Only Databases",
    "Use of WAL Without Shared-Memory") describes: with ``immutable=1`` when there is no ``-wal`` file or it is
    empty (the database file then holds every committed transaction), else (POSIX) through the ``unix-none`` VFS
    in ``locking_mode=EXCLUSIVE``, which builds the WAL index in private memory and so reads the WAL's committed
    transactions too.  Such a connection takes no lock and does not see later commits: it is a snapshot, and whoever
    keeps it reopens it when :func:`wal_stat` changes (a writer allowed to write there creates the WAL files before
    its first commit; an ordinary connection then opens).

    Raises:
        StoreError: naming ``path``: it cannot be opened at all (no permission to read it, damaged), or only by
            creating a file beside it, which its folder does not allow (the message says why and what to do).
    """
    base = path.resolve().as_uri()
    try:
        conn = sqlite3.connect(base + "?mode=ro", uri=True, timeout=timeout, isolation_level=None,
                               check_same_thread=False)
    except sqlite3.Error as e:
        raise StoreError(f"cannot open {what}: {e}", path=path) from e
    try:
        _probe(conn)
        return conn, False
    except sqlite3.Error as e:
        conn.close()
        first: sqlite3.Error = e
    why = _cannot_create_in(path.parent) if _needs_the_folder(first) else None
    if why is None:
        raise StoreError(f"cannot read {what}: {first}", path=path) from first
    wal = path.with_name(path.name + "-wal")
    try:
        empty_wal = not wal.exists() or wal.stat().st_size == 0
    except OSError:
        empty_wal = False
    uri: str | None
    pragma: str | None
    if empty_wal:
        uri, pragma = base + "?mode=ro&immutable=1", None
    elif os.name == "posix":
        uri, pragma = base + "?mode=ro&vfs=unix-none", "PRAGMA locking_mode = EXCLUSIVE"
    else:  # pragma: no cover - not run here
        uri = pragma = None
    if uri is not None:
        try:
            conn = sqlite3.connect(uri, uri=True, timeout=timeout, isolation_level=None, check_same_thread=False)
        except sqlite3.Error:
            pass
        else:
            try:
                if pragma is not None:
                    conn.execute(pragma)
                _probe(conn)
                return conn, True
            except sqlite3.Error:
                conn.close()
    raise StoreError(
        f"cannot read {what}: {why}, and SQLite needs to create {path.name}-shm there to read it ({first}); give "
        "this user write permission on the folder (or free some space), or copy the store to a writable place",
        path=path,
    ) from first


def wal_stat(path: Path) -> tuple[tuple[int, int, int] | None, bool]:
    """``((st_ino, st_mtime_ns, st_size) of path-wal, or None; whether path-shm exists)``: what changes when a
    writer opens the database or commits — the signal for a :meth:`SQLiteFile.snapshot` connection to reopen."""
    try:
        st = os.stat(path.with_name(path.name + "-wal"))
        wal: tuple[int, int, int] | None = (st.st_ino, st.st_mtime_ns, st.st_size)
    except OSError:
        wal = None
    return wal, os.path.lexists(path.with_name(path.name + "-shm"))


def _undo(conn: sqlite3.Connection, *statements: str) -> bool:
    """Run the ``statements`` that undo a failed write (``ROLLBACK``, or ``ROLLBACK TO`` a savepoint and
    ``RELEASE`` it), ignoring SQLite errors; ``False`` when no transaction was open any more (SQLite had already
    rolled it back, e.g. disk full), so there was nothing to undo."""
    if not conn.in_transaction:
        return False
    with contextlib.suppress(sqlite3.Error):
        for statement in statements:
            conn.execute(statement)
    return True


@dataclass
class _Batch:
    """The state of an open :meth:`SQLiteFile.write_batch` (internal)."""

    owner: int  # the thread whose writes it groups
    open: bool = False  # a batch transaction is open (and the owner holds the lock for it)
    writes: int = 0  # writes in the open transaction
    started: float = 0.0  # when it began (time.monotonic)
    atomic: bool = False  # one transaction for the whole block (:meth:`SQLiteFile.atomic`), never committed before
    lost: str | None = None  # atomic: why SQLite rolled the whole transaction back (then no further write runs)


class SQLiteFile(Closing):
    """Base class: open ``db_path`` (creating it and its folder unless ``read_only`` or ``create=False``), then
    ``_ensure_schema()``.

    ``create=False`` opens an existing file for writing and never makes one (SQLite's ``mode=rw`` URI): what a
    long-lived writer reopening a file that was replaced uses, so a store directory removed meanwhile is not
    recreated empty under its path.

    Raises:
        ValueError: ``busy_timeout`` is not a number of seconds >= 0.
        StoreError: the file is missing (``read_only`` or ``create=False``) or is not a usable SQLite database;
            it, or its ``-wal``/``-shm``/``-journal`` file, is not a regular file (a FIFO, a folder, a device:
            never opened).
    """

    _what: ClassVar[str] = "SQLite file"

    def __init__(
        self,
        db_path: str | Path,
        *,
        read_only: bool = False,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT_S,
        create: bool = True,
    ) -> None:
        if isinstance(busy_timeout, bool) or not isinstance(busy_timeout, int | float) or busy_timeout < 0:
            raise ValueError(f"busy_timeout must be a number of seconds >= 0, got {busy_timeout!r}")
        self._path = Path(db_path)
        self._read_only = bool(read_only)
        self._create = bool(create) and not self._read_only
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._batch: _Batch | None = None
        self._snapshot = False
        self._conn = self._connect(float(busy_timeout))
        try:
            self._ensure_schema()
        except BaseException:
            self.close()
            raise

    def _ensure_schema(self) -> None:  # pragma: no cover - every subclass overrides it
        raise NotImplementedError

    def _connect(self, busy_timeout: float) -> sqlite3.Connection:
        path = self._path
        check_sqlite_files(path)
        if not self._create and not path.is_file():
            how = "read_only=True" if self._read_only else "create=False"
            raise StoreError(f"{self._what} does not exist (opened with {how})", path=path)
        if self._read_only:
            conn, self._snapshot = connect_read_only(path, what=self._what, timeout=busy_timeout)
            return conn
        try:
            # creating the file, or its -wal / -shm, can fail for want of an inode or a descriptor, or permission
            with self._write_errors():
                if not self._create:
                    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=rw", uri=True, timeout=busy_timeout,
                                           isolation_level=None, check_same_thread=False)
                else:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    conn = sqlite3.connect(str(path), timeout=busy_timeout, isolation_level=None,
                                           check_same_thread=False)
        except sqlite3.Error as e:
            raise StoreError(f"cannot open {self._what}: {e}", path=path) from e
        try:
            with self._write_errors():  # switching a new file to WAL writes its header: the disk may be full
                busy_ms = int(busy_timeout * 1000)  # PRAGMA takes no bound parameters; this is an int we computed
                conn.execute(f"PRAGMA busy_timeout = {busy_ms}")
                conn.execute("PRAGMA foreign_keys = ON")
                if not self._read_only:
                    conn.execute("PRAGMA journal_mode = WAL")
                    conn.execute("PRAGMA synchronous = NORMAL")
        except BaseException as e:
            conn.close()
            if isinstance(e, sqlite3.Error):
                raise StoreError(f"not a usable SQLite database: {e}", path=path) from e
            raise
        return conn

    # -- connection plumbing ---------------------------------------------------------------------------------
    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"{self._what} is closed", path=self._path)
        return self._conn

    def _write_errors(self) -> contextlib.AbstractContextManager[None]:
        """A failed write of a writable file (``SQLITE_FULL``, ``SQLITE_IOERR``) as a :class:`StoreWriteError`
        (:func:`~langchain_ragspine.errors.write_errors`): SQLite rolled the transaction back, nothing was lost."""
        if self._read_only:
            return contextlib.nullcontext()
        return write_errors(self._path, kept=ROLLED_BACK)

    @contextlib.contextmanager
    def _sql_errors(self) -> Iterator[None]:
        """Re-raise ``sqlite3`` errors as :class:`StoreError` naming the path (a failed write of a writable file as
        :class:`StoreWriteError`, saying that nothing committed was lost)."""
        try:
            with self._write_errors():
                yield
        except sqlite3.Error as e:
            raise StoreError(f"SQLite error: {e}", path=self._path) from e

    @contextlib.contextmanager
    def _write_transaction(self) -> Iterator[sqlite3.Cursor]:
        """``BEGIN IMMEDIATE`` … ``COMMIT``; ``ROLLBACK`` on any exception (also ``KeyboardInterrupt``).  Within
        this thread's :meth:`write_batch`: a savepoint of the batch's transaction instead."""
        conn = self._connection()
        batch = self._batch
        if batch is not None and batch.owner == threading.get_ident():
            with self._batched_write(conn, batch) as cur:
                yield cur
            return
        cur = conn.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            yield cur
        except BaseException:
            _undo(conn, "ROLLBACK")
            raise
        else:
            cur.execute("COMMIT")
        finally:
            cur.close()

    @staticmethod
    def _has_table(conn: sqlite3.Connection, name: str) -> bool:
        """Whether the database of ``conn`` has a table ``name``."""
        found = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone()
        return found is not None

    @contextlib.contextmanager
    def _batched_write(self, conn: sqlite3.Connection, batch: _Batch) -> Iterator[sqlite3.Cursor]:
        """One write of a :meth:`write_batch`: ``SAVEPOINT`` … ``RELEASE`` in the batch's transaction (begun here
        if none is open); ``ROLLBACK TO`` it on any exception.  Commits once the batch is due."""
        if batch.lost is not None:
            raise StoreError(
                f"SQLite rolled this atomic write back ({batch.lost}); nothing of it was written", path=self._path
            )
        if not batch.open:
            self._lock.acquire()  # held while the batch's transaction is open; released by _commit_batch
            try:
                conn.execute("BEGIN IMMEDIATE")
            except BaseException:
                self._lock.release()
                raise
            batch.open, batch.writes, batch.started = True, 0, time.monotonic()
        cur = conn.cursor()
        cur.execute("SAVEPOINT ragspine_write")
        try:
            yield cur
        except BaseException as e:
            if not _undo(conn, "ROLLBACK TO ragspine_write", "RELEASE ragspine_write"):
                self._end_batch_transaction(batch)  # SQLite rolled the whole transaction back (e.g. disk full)
                if batch.atomic:
                    batch.lost = f"{type(e).__name__}: {e}"
            raise
        else:
            cur.execute("RELEASE ragspine_write")
            batch.writes += 1
            due = batch.writes >= BATCH_WRITES or time.monotonic() - batch.started >= BATCH_SECONDS
            if due and not batch.atomic:
                self._commit_batch(batch)
        finally:
            cur.close()

    def _end_batch_transaction(self, batch: _Batch) -> None:
        if batch.open:
            batch.open = False
            self._lock.release()

    def _commit_batch(self, batch: _Batch) -> None:
        """``COMMIT`` the batch's open transaction (if any) and release the lock; ``ROLLBACK`` if it fails."""
        if not batch.open:
            return
        conn = self._connection()
        try:
            if conn.in_transaction:
                try:
                    conn.execute("COMMIT")
                except BaseException:
                    _undo(conn, "ROLLBACK")
                    raise
        finally:
            self._end_batch_transaction(batch)

    @contextlib.contextmanager
    def write_batch(self) -> Iterator[None]:
        """Group this thread's writes inside the block into few transactions (see the module docstring).

        Every write keeps its own all-or-nothing semantics (a savepoint); the batch commits after
        :data:`BATCH_WRITES` writes, after :data:`BATCH_SECONDS` seconds, and when the block ends — also when it
        ends with an exception, so the writes that completed before it stay committed, exactly as without a batch.
        Readers (other connections) see the writes at those commits; other threads of this object wait for the open
        transaction to commit.  A nested call joins the outer batch; a call from another thread while a batch is
        open writes without one.

        Raises:
            StoreError: the file is read-only or closed, or SQLite fails (also on the final commit).
        """
        self._require_writable()
        self._connection()
        with self._lock:
            if self._batch is not None:  # nested (the outer batch commits), or another thread's
                batch = None
            else:
                batch = self._batch = _Batch(owner=threading.get_ident())
        if batch is None:
            yield
            return
        conn = self._connection()
        with self._lock, self._sql_errors():
            # names and values come from the BATCH_PRAGMAS constant only (PRAGMA takes no bound parameters)
            saved = [(name, conn.execute(f"PRAGMA {name}").fetchone()[0]) for name, _ in BATCH_PRAGMAS]
            for name, value in BATCH_PRAGMAS:
                conn.execute(f"PRAGMA {name} = {int(value)}")
        try:
            yield
        finally:
            try:
                with self._sql_errors():
                    self._commit_batch(batch)
            finally:
                self._batch = None
                with self._lock, contextlib.suppress(sqlite3.Error):
                    for name, value in saved:
                        conn.execute(f"PRAGMA {name} = {int(value)}")

    @contextlib.contextmanager
    def atomic(self) -> Iterator[None]:
        """Make every write of this thread inside the block one transaction: committed when the block ends, rolled
        back as a whole when it raises (disk full, a failing write, ``KeyboardInterrupt``), so the file is
        exactly as before the block.  Other threads of this object wait for the block to end; readers (other
        connections) see all of it or nothing.  Inside an :meth:`atomic` block of the same thread it joins the
        outer one.

        Raises:
            StoreError: the file is read-only or closed; SQLite fails (also on the commit: nothing is written); a
                write inside a :meth:`write_batch` of another thread of this object; a write after SQLite
                rolled the transaction back by itself.
        """
        self._require_writable()
        self._connection()
        with self._lock:
            batch = self._batch
            if batch is not None:
                if batch.owner == threading.get_ident() and batch.atomic:
                    yield
                    return
                raise StoreError(
                    f"{self._what}: an atomic write cannot run inside an open write_batch", path=self._path
                )
            batch = self._batch = _Batch(owner=threading.get_ident(), atomic=True)
            try:
                yield
            except BaseException:
                if batch.open:
                    _undo(self._connection(), "ROLLBACK")
                    self._end_batch_transaction(batch)
                raise
            else:
                if batch.lost is not None:
                    raise StoreError(
                        f"SQLite rolled this atomic write back ({batch.lost}); nothing of it was written",
                        path=self._path,
                    )
                with self._sql_errors():
                    self._commit_batch(batch)
            finally:
                self._batch = None

    def _require_writable(self) -> None:
        if self._read_only:
            raise StoreError(
                f"{self._what} is opened read_only=True; open it without read_only to write", path=self._path
            )

    @staticmethod
    def is_blank(db_path: str | Path) -> bool:
        """Whether ``db_path`` is a SQLite file that holds nothing yet: empty (0 bytes), or a database without a
        single table, index or view — what the first write of a new file leaves when its transaction never
        committed (the disk was full, the process was killed; the schema is created in one transaction, so never
        in part).  A writable open creates the schema in such a file and loses nothing.  ``False`` for a missing
        file and for any other (one with a schema, a foreign database, a damaged file).  Reads only (``mode=ro``).
        """
        path = Path(db_path)
        try:
            check_sqlite_files(path)
            if not path.is_file():
                return False
            if path.stat().st_size == 0:
                return True
            conn, _ = connect_read_only(path, what="SQLite file", timeout=DEFAULT_BUSY_TIMEOUT_S)
        except (OSError, sqlite3.Error, StoreError):  # not a regular file: not blank (an open says why)
            return False
        try:
            return conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0] == 0
        except sqlite3.Error:
            return False
        finally:
            conn.close()

    # -- properties and lifecycle ------------------------------------------------------------------------------
    @property
    def path(self) -> Path:
        """The SQLite file."""
        return self._path

    @property
    def read_only(self) -> bool:
        """Whether the file was opened with ``read_only=True``."""
        return self._read_only

    @property
    def snapshot(self) -> bool:
        """Whether this read-only connection reads the file without SQLite's shared memory (its folder is not
        writable here and SQLite could not open it otherwise: :func:`connect_read_only`).  It does not see what a
        writer commits later: whoever keeps it open reopens it when the files beside it change
        (:func:`wal_stat`)."""
        return self._snapshot

    def close(self) -> None:
        """Close the connection (idempotent); later calls raise :class:`StoreError`."""
        with self._lock:
            if self._batch is not None and self._batch.owner == threading.get_ident():
                with contextlib.suppress(sqlite3.Error, StoreError):
                    self._commit_batch(self._batch)
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __repr__(self) -> str:
        mode = ", read_only=True" if self._read_only else ""
        state = "" if self._conn is not None else " (closed)"
        return f"{type(self).__name__}({str(self._path)!r}{mode}){state}"
