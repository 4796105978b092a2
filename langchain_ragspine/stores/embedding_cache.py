"""The embedding cache: chunk vectors in one SQLite file, keyed by ``(model_key, chunk_id, content_hash)``.

:class:`EmbeddingCache` keeps vectors in SQLite keyed by ``(model_key, chunk_id, content_hash)``, so re-ingesting an
unchanged corpus embeds nothing and a changed document re-embeds only its chunks; misses are embedded in batches
behind a progress bar and each finished batch is committed at once, so an interrupted run keeps its work.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from langchain_core.embeddings import Embeddings

from langchain_ragspine.embeddings.batching import (
    _DimensionMismatch,
    _embed_batch,
    _show_progress,
    l2_normalize,
)
from langchain_ragspine.embeddings.cache import content_hash, model_key_for
from langchain_ragspine.errors import StoreError
from langchain_ragspine.stores._sqlite import SQLiteFile

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
        read_only: open with ``mode=ro``; :meth:`put_many` and :meth:`prune` raise :class:`StoreError`, and
            :meth:`embed_with_cache` embeds misses without storing them.
        busy_timeout: seconds to wait for another writer's lock (default 5.0).

    Attributes:
        last_embedded: texts sent to the model by the last :meth:`embed_with_cache` call (cache misses).
        last_cached: rows the last :meth:`embed_with_cache` call took from the cache.

    Raises:
        StoreError: the file is missing (``read_only``), not SQLite, not an embedding cache, or from a newer
            schema; any later SQLite failure.  The message names the path.

    Use it as a context manager or call :meth:`close`.  One instance may be shared between threads.
    """

    _what = "embedding cache"

    def __init__(
        self, db_path: str | os.PathLike[str], *, read_only: bool = False, busy_timeout: float = 5.0
    ) -> None:
        self.last_embedded = 0
        self.last_cached = 0
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
        has_meta = conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", ("meta",)
        ).fetchone()
        if not has_meta:
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
        wanted = list(dict.fromkeys((str(c), str(h)) for c, h in keys))
        out: dict[tuple[str, str], np.ndarray] = {}
        with self._lock, self._sql_errors():
            conn = self._connection()
            for start in range(0, len(wanted), _SQL_PAIRS_PER_QUERY):
                part = wanted[start : start + _SQL_PAIRS_PER_QUERY]
                values = ", ".join(["(?, ?)"] * len(part))
                params: list[str] = [model_key]
                for cid, h in part:
                    params.extend((cid, h))
                sql = (
                    "SELECT chunk_id, content_hash, dim, vector FROM embeddings "
                    f"WHERE model_key = ? AND (chunk_id, content_hash) IN (VALUES {values})"
                )
                for cid, h, dim, blob in conn.execute(sql, params):
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

    def count(self, model_key: str | None = None) -> int:
        """Number of cached vectors (of ``model_key``, or of every model)."""
        with self._lock, self._sql_errors():
            conn = self._connection()
            if model_key is None:
                return int(conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0])
            row = conn.execute("SELECT COUNT(*) FROM embeddings WHERE model_key = ?", (model_key,)).fetchone()
            return int(row[0])

    def embed_with_cache(
        self,
        embedding: Embeddings,
        model_key: str | None,
        chunks: Sequence[tuple[str, str]],
        *,
        batch_size: int = 32,
        progress: bool | None = None,
    ) -> np.ndarray:
        """Vectors for ``chunks`` = ``[(chunk_id, text), …]``, embedding only what the cache lacks.

        The key of a chunk is ``(chunk_id, content_hash(text))``: an unchanged chunk is never embedded again, a
        changed text is, and so is the same text under a new ``chunk_id``.  Misses (each distinct key once) go
        to ``embedding.embed_documents`` in batches of ``batch_size`` behind a tqdm progress bar (shown on a
        terminal by default; ``progress=True/False`` forces it); each batch is committed to the cache as soon as
        it is embedded (not in ``read_only`` mode).

        Args:
            model_key: identifies the model (see :func:`model_key_for`, used when ``None``).

        Returns:
            float32 array ``(len(chunks), d)`` in input order, rows L2-normalised (zero vectors stay zero); for no
            chunks ``(0, 0)``.  :attr:`last_embedded` / :attr:`last_cached` count misses and hits.

        Raises:
            ValueError: ``batch_size < 1``; the model returns the wrong number of vectors or non-finite values.
            StoreError: cached vectors of ``model_key`` disagree in dimension with each other or with the model
                (the key does not identify the model: pass a distinct ``model_key``).
        """
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ValueError(f"batch_size must be an int >= 1, got {batch_size!r}")
        key = model_key if model_key is not None else model_key_for(embedding)
        items = [(str(cid), text) for cid, text in chunks]
        keys = [(cid, content_hash(text)) for cid, text in items]
        self.last_embedded = 0
        self.last_cached = 0
        if not items:
            return np.zeros((0, 0), dtype=np.float32)
        found = self.get_many(key, keys)
        dims = {v.shape[0] for v in found.values()}
        if len(dims) > 1:
            raise StoreError(
                f"cached vectors of model {key!r} have several dimensions {sorted(dims)}; the model key does not "
                "identify one model — pass a distinct model_key",
                path=self._path,
            )
        dim: int | None = dims.pop() if dims else None
        misses: dict[tuple[str, str], str] = {}
        for k, (_, text) in zip(keys, items, strict=True):
            if k not in found and k not in misses:
                misses[k] = text
        if misses:
            from tqdm.auto import tqdm

            miss_keys = list(misses)
            show = _show_progress(progress)
            with tqdm(total=len(miss_keys), desc="embed", unit="chunk", disable=not show) as bar:
                for start in range(0, len(miss_keys), batch_size):
                    batch = miss_keys[start : start + batch_size]
                    try:
                        arr = _embed_batch(embedding, [misses[k] for k in batch], dim)
                    except _DimensionMismatch as e:
                        raise StoreError(
                            f"the model returns vectors of another dimension than the cached ones of {key!r} "
                            f"({e}); pass a distinct model_key",
                            path=self._path,
                        ) from e
                    dim = arr.shape[1]
                    if not self._read_only:
                        self.put_many(key, [(c, h, v) for (c, h), v in zip(batch, arr, strict=True)])
                    for k, v in zip(batch, arr, strict=True):
                        found[k] = v
                    self.last_embedded += len(batch)
                    bar.update(len(batch))
        assert dim is not None
        out = np.empty((len(items), dim), dtype=np.float32)
        for row, k in enumerate(keys):
            out[row] = found[k]
        self.last_cached = len(items) - sum(1 for k in keys if k in misses)
        return l2_normalize(out)
