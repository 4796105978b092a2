"""The writer lock of a PostgreSQL store: one writer at a time per store, readers never wait.

The twin of a store directory's lock (:mod:`langchain_ragspine.backends.directory.lock`), with the same contract: every writer
of a ``postgresql://`` store — ``ingest`` (Python and CLI), a
:class:`~langchain_ragspine.vectorstores.PostgresVectorStore` ``add_documents`` / ``delete``,
:func:`langchain_ragspine.backends.postgres.versions.add_documents` / ``write_versions`` — holds it for its whole write, from its
first read of the store to its last commit::

    with writer_lock("postgresql://rag@db/rag", timeout=None):   # waits for the writer holding it, if any
        ...  # read the store, write its versions (many transactions), retract, record the model

so two ingests into one store run one after the other, each against the store the other left (an ingest commits
each document version on its own, so without the lock a second ingest retracted the first's documents while the
first was still writing them, and the store ended with neither run's corpus).

The lock is a session-level ``pg_advisory_lock`` on its own connection (not one of the pool's, so a pool of one
connection still serves the write), keyed on the store: its schema, the connection's ``current_schema()`` (the first
schema of its ``search_path`` that exists, where its tables are or will be created) — so stores in different
schemas of one database write in parallel, and two URLs of one store share the lock.  The server releases it when
the holder's connection ends, however its process ends (``SIGKILL`` included): a crashed writer never leaves a stale
lock behind.  A waiting writer says once whom it waits for (the holder's process id and host, which the holder's
connection carries as its ``application_name``) and waits as long as it takes (``timeout=None``, the default), or at
most ``timeout`` seconds (``0``: not at all; PostgreSQL's ``lock_timeout`` for the wait) before a
:class:`~langchain_ragspine.backends.directory.lock.StoreBusyError` that names the holder.  A thread that holds the lock of a
store may take it again (re-entrant per thread); two threads of one process exclude each other as two processes do.

Readers never take it (:func:`writer_pid` only looks); each transaction of a writer also takes the table lock of
:class:`~langchain_ragspine.backends.postgres.chunk_store.PostgresChunkStore` (``SHARE ROW EXCLUSIVE``), which orders single
transactions but not a whole ingest.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from langchain_ragspine.backends.directory.lock import busy_error, check_lock_timeout, waiting_message
from langchain_ragspine.backends.postgres.chunk_store import (
    check_store_schema,
    import_psycopg,
    is_postgres_url,
    libpq_url,
    pg_error_text,
    redact_url,
)
from langchain_ragspine.errors import StoreError

__all__ = ["LOCK_CLASS", "writer_lock", "writer_pid"]

#: The high 32 bits of every store's advisory lock key (``"RGWR"``); the low 32 bits are the store schema's oid.
LOCK_CLASS = 0x52475752

_LOG = logging.getLogger("langchain_ragspine.backends.directory.lock")  # the store directory lock's logger: one place to listen
_APP_RE = re.compile(r"ragspine writer (\d+)@(.*)")
# The oid of the store's schema (check_store_schema's: current_schema(), where every existence check looks).
_SCHEMA_OID_SQL = "SELECT oid FROM pg_namespace WHERE nspname = %s"
_HOLDER_SQL = (
    "SELECT a.application_name FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid "
    "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 AND l.classid = %s::bigint::oid "
    "AND l.objid = %s::bigint::oid AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)

_HELD: dict[tuple[str, str, str, int], int] = {}  # (host, port, database, key) -> the thread holding it here
_HELD_GUARD = threading.Lock()


@contextlib.contextmanager
def _errors(where: str) -> Iterator[None]:
    psycopg = import_psycopg()
    try:
        yield
    except psycopg.Error as e:
        raise StoreError(f"PostgreSQL (the store's writer lock): {pg_error_text(e)}", path=where) from e


def _connect(url: str, where: str) -> Any:
    """A connection of its own for the lock, named for the waiters (``application_name``), never closed by the
    server for idling while the write runs on the pool's connections."""
    psycopg = import_psycopg()
    name = f"ragspine writer {os.getpid()}@{socket.gethostname()}"[:63]  # NAMEDATALEN - 1
    refused: StoreError | None = None
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=10, application_name=name)
    except psycopg.Error as e:  # libpq may echo the password: the error is raised outside, with no __context__
        refused = StoreError(f"cannot connect to PostgreSQL: {pg_error_text(e, url)}", path=where)
    if refused is not None:
        raise refused
    try:
        with _errors(where):
            conn.execute("SELECT set_config('idle_session_timeout', '0', false)")
    except BaseException:
        conn.close()
        raise
    return conn


def _store_key(conn: Any, where: str) -> tuple[str, int]:
    """``(schema, key)``: the store's schema (:func:`~langchain_ragspine.backends.postgres.chunk_store.
    check_store_schema`) and its advisory lock key.

    Raises:
        StoreError: as ``check_store_schema``: the first schema of the ``search_path`` does not exist, or none does.
    """
    schema = check_store_schema(conn, where)
    (oid,) = conn.execute(_SCHEMA_OID_SQL, (schema,)).fetchone()
    return schema, (LOCK_CLASS << 32) | int(oid)


def _holder(conn: Any, key: int) -> tuple[int, str | None] | None:
    """``(pid, host)`` of the writer holding ``key`` now (``(0, None)``: held, by a process not saying who it is),
    or ``None`` when nobody holds it."""
    row = conn.execute(_HOLDER_SQL, (key >> 32, key & 0xFFFFFFFF)).fetchone()
    if row is None:
        return None
    m = _APP_RE.fullmatch(row[0] or "")
    return (int(m.group(1)), m.group(2)) if m else (0, None)


def writer_pid(url: str) -> int | None:
    """The process id of the writer holding the writer lock of the store at ``url`` now, ``0`` when one holds it
    but does not say who it is, ``None`` when no writer holds it.  Never waits and never takes the lock.

    Raises:
        StoreError: the server cannot be reached, or no schema of the ``search_path`` exists.
        ValueError: ``url`` is not a ``postgresql://`` URL.
    """
    url, where = _checked(url)
    conn = _connect(url, where)
    try:
        with _errors(where):
            held = _holder(conn, _store_key(conn, where)[1])
    finally:
        conn.close()
    return None if held is None else held[0]


def _checked(url: str) -> tuple[str, str]:
    if not is_postgres_url(url):
        raise ValueError(f"not a PostgreSQL URL (postgresql://…): {redact_url(str(url))!r}")
    return libpq_url(url), redact_url(libpq_url(url))


def _acquire(
    conn: Any, key: int, lock: str, where: str, timeout: float | None, on_wait: Callable[[str], None]
) -> None:
    """Take ``key`` on ``conn`` (see :func:`writer_lock`)."""
    psycopg = import_psycopg()
    started = time.monotonic()
    if conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]:
        return
    pid, host = _holder(conn, key) or (0, None)
    if timeout == 0:
        raise busy_error(lock, path=where, pid=pid, host=host, waited=time.monotonic() - started, timeout=timeout)
    on_wait(waiting_message(f"{lock} of {where}", pid, host))
    if timeout is not None:
        left = timeout - (time.monotonic() - started)
        conn.execute("SELECT set_config('lock_timeout', %s, false)", (f"{max(1, math.ceil(left * 1000))}ms",))
    try:
        conn.execute("SELECT pg_advisory_lock(%s)", (key,))
    except psycopg.errors.LockNotAvailable:
        pid, host = _holder(conn, key) or (pid, host)
        raise busy_error(
            lock, path=where, pid=pid, host=host, waited=time.monotonic() - started, timeout=timeout
        ) from None


_THIS_THREAD = threading.local()  # .urls: the URLs whose lock this thread holds (a nested block takes nothing)


@contextlib.contextmanager
def writer_lock(
    url: str,
    *,
    timeout: float | None = None,
    on_wait: Callable[[str], None] | None = None,
) -> Iterator[None]:
    """Hold the writer lock of the PostgreSQL store at ``url`` for the block (see the module docstring).

    When another writer holds it, ``on_wait`` (default: a ``logging`` warning of the
    ``langchain_ragspine.backends.directory.lock`` logger, which Python prints on stderr when logging is not configured) is
    called once with a line naming the store and the holder's pid, and the call waits: ``timeout=None`` (default)
    as long as it takes, else at most ``timeout`` seconds (``0``: not at all).  The same thread may nest the lock.

    Raises:
        StoreBusyError: another writer still holds the lock after ``timeout`` seconds (names it and its pid).
        StoreError: the server cannot be reached; no schema of the ``search_path`` exists; the lock's query fails.
        TypeError, ValueError: a bad ``timeout`` (:func:`~langchain_ragspine.backends.directory.lock.check_lock_timeout`), or a
            ``url`` that is not a ``postgresql://`` URL.
        ImportError: psycopg is not installed (``pip install 'langchain-ragspine[postgres]'``).
    """
    timeout = check_lock_timeout(timeout)
    url, where = _checked(url)
    urls: set[str] = _THIS_THREAD.__dict__.setdefault("urls", set())
    if url in urls:  # nested in this thread's own block: that block releases it
        yield
        return
    conn = _connect(url, where)
    try:
        with _errors(where):
            schema, key = _store_key(conn, where)
        ident = (str(conn.info.host), str(conn.info.port), str(conn.info.dbname), key)
        me = threading.get_ident()
        with _HELD_GUARD:
            nested = _HELD.get(ident) == me
        if nested:  # another URL of a store this thread holds
            yield
            return
        with _errors(where):
            _acquire(conn, key, f"the writer lock of schema {schema!r}", where, timeout, on_wait or _LOG.warning)
        with _HELD_GUARD:
            _HELD[ident] = me
        urls.add(url)
        try:
            yield
        finally:
            urls.discard(url)
            with _HELD_GUARD:
                _HELD.pop(ident, None)
            with contextlib.suppress(Exception):  # closing the connection releases it in any case
                conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
    finally:
        conn.close()
