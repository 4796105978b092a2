"""The embedding cache's storage: chunk vectors in one SQLite file, keyed by ``(model_key, chunk_id, content_hash)``.

:class:`EmbeddingCache` only holds data (read, write, prune, count); it never calls a model.  The model side is
:class:`langchain_ragspine.embeddings.cache.CachedEmbeddings`, which wraps an embedding model and this store and
embeds only what the store lacks — the split of LangChain's ``CacheBackedEmbeddings`` (a model wrapper) and its
byte store.  With the key ``(model_key, chunk_id, sha256(text))`` re-ingesting an unchanged corpus embeds nothing
and a changed document re-embeds only its chunks.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from langchain_ragspine.backends.directory._sqlite import SQLiteFile
from langchain_ragspine.errors import StoreError

__all__ = ["CACHE_SCHEMA_VERSION", "EmbeddingCache"]

CACHE_SCHEMA_VERSION = 1
_CACHE_KIND = "ragspine-embedding-cache"
_SQL_PAIRS_PER_QUERY = 400  # (chunk_id, hash) pairs per SELECT: 801 bound parameters, under every SQLite limit


_CACHE_DDL = (
    """CREATE TABLE IF NOT EXISTS meta (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS embeddings (
        model_key    TEXT    NOT NULL,
        chunk_id     TEXT    NOT NULL,
        content_hash TEXT    NOT NULL,
        dim          INTEGER NOT NULL CHECK (dim > 0),
        vector       BLOB    NOT NULL,
        PRIMARY KEY (model_key, chunk_id, content_hash)
    ) WITHOUT ROWID""",
)


class EmbeddingCache(SQLiteFile):
    """Embedding vectors in one SQLite file, keyed by ``(model_key, chunk_id, content_hash)``.

    Table ``embeddings(model_key TEXT, chunk_id TEXT, content_hash TEXT, dim INTEGER, vector BLOB)``; ``vector``
    holds ``dim`` float32 values, little-endian, exactly as the model returned them (normalisation happens on
    use).  The file runs in WAL mode (``synchronous=NORMAL``); every write is one ``BEGIN IMMEDIATE … COMMIT``
    transaction, so a crash keeps every committed batch; all SQL is parameterised.

    Args:
        db_path: the SQLite file, created with its parent directories when missing (unless ``read_only``).
            A natural place is beside the chunk store, e.g. ``DIR/embeddings.sqlite``.
        read_only: open with ``mode=ro``; :meth:`put_many` and :meth:`prune` raise :class:`StoreError` (and a
            :class:`~langchain_ragspine.embeddings.cache.CachedEmbeddings` over it embeds misses without storing
            them).
        busy_timeout: seconds to wait for another writer's lock (default 5.0).

    Raises:
        StoreError: the file is missing (``read_only``), not SQLite, not an embedding cache, or from a newer
            schema; any later SQLite failure.  The message names the path.

    Use it as a context manager or call :meth:`close`.  One instance may be shared between threads.
    """

    _what = "embedding cache"

    def __init__(
        self, db_path: str | os.PathLike[str], *, read_only: bool = False, busy_timeout: float = 5.0
    ) -> None:
        super().__init__(Path(db_path), read_only=read_only, busy_timeout=busy_timeout)

    def _ensure_schema(self) -> None:
        with self._lock, self._sql_errors():
            conn = self._connection()
            version = self._schema_version(conn)
            if version is not None:
                if version > CACHE_SCHEMA_VERSION:
                    raise StoreError(
                        f"embedding cache schema {version} is newer than this library's ({CACHE_SCHEMA_VERSION})",
                        path=self._path,
                    )
                return
            if self._read_only:
                raise StoreError("not an embedding cache (no meta.schema_version)", path=self._path)
            with self._write_transaction() as cur:
                if self._schema_version(conn) is not None:  # created by another process meanwhile
                    return
                tables = {r[0] for r in cur.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                if tables:
                    raise StoreError(
                        f"not an embedding cache: has tables {sorted(tables)} but no meta.schema_version",
                        path=self._path,
                    )
                for ddl in _CACHE_DDL:
                    cur.execute(ddl)
                cur.executemany(
                    "INSERT INTO meta (key, value) VALUES (?, ?)",
                    [("schema_version", str(CACHE_SCHEMA_VERSION)), ("kind", _CACHE_KIND)],
                )

    def _schema_version(self, conn: sqlite3.Connection) -> int | None:
        if not self._has_table(conn, "meta"):
            return None
        rows = dict(conn.execute("SELECT key, value FROM meta WHERE key IN (?, ?)", ("schema_version", "kind")))
        if "schema_version" not in rows:
            return None
        if rows.get("kind") != _CACHE_KIND:
            raise StoreError(f"not an embedding cache (meta.kind is {rows.get('kind')!r})", path=self._path)
        try:
            return int(rows["schema_version"])
        except ValueError:
            raise StoreError(
                f"meta.schema_version is not an integer: {rows['schema_version']!r}", path=self._path
            ) from None

    # -- reading and writing ----------------------------------------------------------------------------------
    def get_many(self, model_key: str, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], np.ndarray]:
        """The cached vectors for ``keys`` = ``[(chunk_id, content_hash), …]`` under ``model_key``.

        Returns:
            ``{(chunk_id, content_hash): float32 array (dim,)}`` for the keys present; misses are absent.

        Raises:
            StoreError: a stored blob's length does not match its ``dim`` (the message names the row).
        """
        if not isinstance(model_key, str):
            raise TypeError(f"model_key must be a str, got {model_key!r}")
        wanted = set((str(c), str(h)) for c, h in keys)
        chunk_ids = list(dict.fromkeys(c for c, _ in wanted))
        out: dict[tuple[str, str], np.ndarray] = {}
        with self._lock, self._sql_errors():
            conn = self._connection()
            # by (model_key, chunk_id), a prefix of the primary key: SQLite searches a row-value IN list by
            # model_key alone, reading every vector of the model (O(cache) per call, ~0.4 s at 100,000 vectors)
            for start in range(0, len(chunk_ids), _SQL_PAIRS_PER_QUERY):
                part = chunk_ids[start : start + _SQL_PAIRS_PER_QUERY]
                sql = (
                    "SELECT chunk_id, content_hash, dim, vector FROM embeddings "
                    f"WHERE model_key = ? AND chunk_id IN ({', '.join('?' * len(part))})"
                )
                for cid, h, dim, blob in conn.execute(sql, [model_key, *part]):
                    if (cid, h) not in wanted:
                        continue  # another text of the chunk
                    if not isinstance(blob, bytes) or not isinstance(dim, int) or dim < 1 or len(blob) != 4 * dim:
                        raise StoreError(
                            f"corrupt cached vector for chunk {cid!r} (model {model_key!r}): "
                            f"{len(blob) if isinstance(blob, bytes) else type(blob).__name__} bytes for dim {dim!r}",
                            path=self._path,
                            field="vector",
                        )
                    out[(cid, h)] = np.frombuffer(blob, dtype="<f4").astype(np.float32)
        return out

    def put_many(self, model_key: str, items: Sequence[tuple[str, str, np.ndarray]]) -> None:
        """Store ``[(chunk_id, content_hash, vector), …]`` under ``model_key`` in one transaction (existing keys
        are replaced).

        Raises:
            ValueError: a vector is not 1-D, empty, or not finite.
            StoreError: the cache is read-only, or SQLite fails.
        """
        if not isinstance(model_key, str):
            raise TypeError(f"model_key must be a str, got {model_key!r}")
        self._require_writable()
        rows = []
        for cid, h, vec in items:
            arr = np.asarray(vec, dtype="<f4")
            if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr)):
                raise ValueError(
                    f"vector for chunk {cid!r} must be a finite non-empty 1-D array, got shape {arr.shape}"
                )
            rows.append((model_key, str(cid), str(h), int(arr.size), arr.tobytes()))
        if not rows:
            return
        with self._lock, self._sql_errors(), self._write_transaction() as cur:
            cur.executemany(
                "INSERT OR REPLACE INTO embeddings (model_key, chunk_id, content_hash, dim, vector) "
                "VALUES (?, ?, ?, ?, ?)",
                rows,
            )

    def prune(self, model_key: str | None, keep: set[tuple[str, str]] | frozenset[tuple[str, str]]) -> int:
        """Delete the rows of ``model_key`` (of every model when ``None``) whose ``(chunk_id, content_hash)`` is not
        in ``keep``; other models' rows are untouched.  Returns the number of rows deleted.

        Deleted rows leave no trace in the file: the delete runs with ``PRAGMA secure_delete`` (freed pages are
        overwritten with zeros), and the write-ahead log is checkpointed and truncated afterwards (when no other
        connection holds it open), so a vector that must go (a chunk that became RESTRICTED or was retracted) is
        neither in ``embeddings.sqlite`` nor in ``embeddings.sqlite-wal``.
        """
        self._require_writable()
        with self._lock, self._sql_errors():
            conn = self._connection()
            conn.execute("PRAGMA secure_delete = ON")
            with self._write_transaction() as cur:
                cur.execute("CREATE TEMP TABLE IF NOT EXISTS keep_keys (chunk_id TEXT, content_hash TEXT)")
                cur.execute("DELETE FROM temp.keep_keys")
                cur.executemany("INSERT INTO temp.keep_keys VALUES (?, ?)", [(str(c), str(h)) for c, h in keep])
                stale = (
                    "NOT EXISTS (SELECT 1 FROM temp.keep_keys k "
                    "WHERE k.chunk_id = embeddings.chunk_id AND k.content_hash = embeddings.content_hash)"
                )
                if model_key is None:
                    cur.execute(f"DELETE FROM embeddings WHERE {stale}")
                else:
                    cur.execute(f"DELETE FROM embeddings WHERE model_key = ? AND {stale}", (model_key,))
                deleted = cur.rowcount
                cur.execute("DELETE FROM temp.keep_keys")
            if deleted:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return int(deleted)

    def delete_chunks(self, chunk_ids: Sequence[str]) -> int:
        """Delete every row of ``chunk_ids`` (every model, every content hash), leaving no trace in the file (as
        :meth:`prune`: ``secure_delete``, the write-ahead log checkpointed).  What a write that is not an ingest
        (the vector store's) runs for chunks it relabelled RESTRICTED or retracted.  Returns the rows deleted.

        Raises:
            StoreError: the cache is read-only, or SQLite fails.
        """
        self._require_writable()
        ids = sorted({str(c) for c in chunk_ids})
        if not ids:
            return 0
        deleted = 0
        with self._lock, self._sql_errors():
            conn = self._connection()
            conn.execute("PRAGMA secure_delete = ON")
            with self._write_transaction() as cur:
                for start in range(0, len(ids), _SQL_PAIRS_PER_QUERY):
                    part = ids[start : start + _SQL_PAIRS_PER_QUERY]
                    cur.execute(f"DELETE FROM embeddings WHERE chunk_id IN ({', '.join('?' * len(part))})", part)
                    deleted += cur.rowcount
            if deleted:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return int(deleted)

    def keys(self, model_key: str) -> set[tuple[str, str]]:
        """The ``(chunk_id, content_hash)`` keys cached under ``model_key`` (no vector is read)."""
        if not isinstance(model_key, str):
            raise TypeError(f"model_key must be a str, got {model_key!r}")
        with self._lock, self._sql_errors():
            rows = self._connection().execute(
                "SELECT chunk_id, content_hash FROM embeddings WHERE model_key = ?", (model_key,)
            )
            return {(str(c), str(h)) for c, h in rows}

    def dim(self, model_key: str) -> int | None:
        """The dimension of ``model_key``'s cached vectors, or ``None`` when there are none."""
        with self._lock, self._sql_errors():
            row = self._connection().execute(
                "SELECT dim FROM embeddings WHERE model_key = ? LIMIT 1", (model_key,)
            ).fetchone()
        return None if row is None else int(row[0])

    def count(self, model_key: str | None = None) -> int:
        """Number of cached vectors (of ``model_key``, or of every model)."""
        with self._lock, self._sql_errors():
            conn = self._connection()
            if model_key is None:
                return int(conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0])
            row = conn.execute("SELECT COUNT(*) FROM embeddings WHERE model_key = ?", (model_key,)).fetchone()
            return int(row[0])
