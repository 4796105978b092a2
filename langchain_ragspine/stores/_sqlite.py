"""Plumbing shared by the package's SQLite files (the chunk store, the embedding cache).

One connection per object (``check_same_thread=False``, guarded by a re-entrant lock), autocommit mode with explicit
``BEGIN IMMEDIATE … COMMIT`` transactions rolled back on any exception, WAL journal with ``synchronous=NORMAL``
for writers, ``mode=ro`` URIs for readers, and every ``sqlite3`` error re-raised as a :class:`StoreError` that names
the file.  Subclasses set :attr:`SQLiteFile._what` (for messages) and implement ``_ensure_schema``.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from langchain_ragspine._closing import Closing
from langchain_ragspine.errors import StoreError

#: Seconds a writer waits for another writer's lock before giving up.
DEFAULT_BUSY_TIMEOUT_S = 5.0


class SQLiteFile(Closing):
    """Base class: open ``db_path`` (creating its folder unless ``read_only``), then ``_ensure_schema()``.

    Raises:
        ValueError: ``busy_timeout`` is not a number of seconds >= 0.
        StoreError: the file is missing (``read_only``) or is not a usable SQLite database.
    """

    _what: ClassVar[str] = "SQLite file"

    def __init__(
        self, db_path: str | Path, *, read_only: bool = False, busy_timeout: float = DEFAULT_BUSY_TIMEOUT_S
    ) -> None:
        if isinstance(busy_timeout, bool) or not isinstance(busy_timeout, int | float) or busy_timeout < 0:
            raise ValueError(f"busy_timeout must be a number of seconds >= 0, got {busy_timeout!r}")
        self._path = Path(db_path)
        self._read_only = bool(read_only)
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
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
        try:
            if self._read_only:
                if not path.is_file():
                    raise StoreError(f"{self._what} does not exist (opened with read_only=True)", path=path)
                conn = sqlite3.connect(
                    path.resolve().as_uri() + "?mode=ro",
                    uri=True,
                    timeout=busy_timeout,
                    isolation_level=None,
                    check_same_thread=False,
                )
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                conn = sqlite3.connect(str(path), timeout=busy_timeout, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as e:
            raise StoreError(f"cannot open {self._what}: {e}", path=path) from e
        try:
            busy_ms = int(busy_timeout * 1000)  # PRAGMA takes no bound parameters; this is an int we computed
            conn.execute(f"PRAGMA busy_timeout = {busy_ms}")
            conn.execute("PRAGMA foreign_keys = ON")
            if not self._read_only:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
        except sqlite3.Error as e:
            conn.close()
            raise StoreError(f"not a usable SQLite database: {e}", path=path) from e
        return conn

    # -- connection plumbing ---------------------------------------------------------------------------------
    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StoreError(f"{self._what} is closed", path=self._path)
        return self._conn

    @contextlib.contextmanager
    def _sql_errors(self) -> Iterator[None]:
        """Re-raise ``sqlite3`` errors as :class:`StoreError` naming the path."""
        try:
            yield
        except sqlite3.Error as e:
            raise StoreError(f"SQLite error: {e}", path=self._path) from e

    @contextlib.contextmanager
    def _write_transaction(self) -> Iterator[sqlite3.Cursor]:
        """``BEGIN IMMEDIATE`` … ``COMMIT``; ``ROLLBACK`` on any exception (also ``KeyboardInterrupt``)."""
        conn = self._connection()
        cur = conn.cursor()
        cur.execute("BEGIN IMMEDIATE")
        try:
            yield cur
        except BaseException:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
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

    def _require_writable(self) -> None:
        if self._read_only:
            raise StoreError(
                f"{self._what} is opened read_only=True; open it without read_only to write", path=self._path
            )

    # -- properties and lifecycle ------------------------------------------------------------------------------
    @property
    def path(self) -> Path:
        """The SQLite file."""
        return self._path

    @property
    def read_only(self) -> bool:
        """Whether the file was opened with ``read_only=True``."""
        return self._read_only

    def close(self) -> None:
        """Close the connection (idempotent); later calls raise :class:`StoreError`."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def __repr__(self) -> str:
        mode = ", read_only=True" if self._read_only else ""
        state = "" if self._conn is not None else " (closed)"
        return f"{type(self).__name__}({str(self._path)!r}{mode}){state}"
