"""Chunk vectors in PostgreSQL with pgvector: the embedding cache and the dense channel's index in one table.

``ragspine_embeddings(model_key, chunk_id, content_hash, dim, embedding vector)`` is keyed like the file store's
``embeddings.sqlite`` — ``(model_key, chunk_id, sha256(text))`` — so :class:`PostgresEmbeddingCache` plugs into
:class:`~langchain_ragspine.embeddings.cache.CachedEmbeddings` unchanged: an unchanged chunk is never embedded twice,
a changed one is.  Vectors are stored L2-normalised (the file store's FAISS index holds the same unit vectors), so
pgvector's inner product ``<#>`` is the cosine similarity.  What the table holds is what search may return: vectors
of RESTRICTED chunks are never written, and :func:`prune_vectors` deletes those of chunks that are no longer
searchable (changed, retracted, RESTRICTED).

The dense channel searches the vectors of the store's model joined to the searchable chunks.  Exact below
``RAGSPINE_PG_HNSW_THRESHOLD`` vectors (a sequential scan: every score computed); at or above it
:func:`ensure_hnsw_index` builds a pgvector HNSW index (Malkov & Yashunin, "Efficient and robust approximate nearest
neighbor search using Hierarchical Navigable Small World graphs", IEEE TPAMI 2020) on that model's rows — a partial
expression index, ``(embedding::vector(dim)) vector_ip_ops WHERE model_key = …``, so models of other dimensions
share the table — which PostgreSQL then keeps up to date on every write.  Requires the ``vector`` extension
(pgvector >= 0.8 for iterative index scans, see :mod:`langchain_ragspine.retrievers.pg_dense`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

import numpy as np
from langchain_core.documents import Document

from langchain_ragspine._optional import import_optional
from langchain_ragspine.backends.postgres.chunk_store import (
    CHUNKS,
    DOC_VERSIONS,
    SEARCH,
    PostgresChunkStore,
    PostgresConnection,
    chunk_columns,
    pg_error_text,
    row_to_stored,
    store_relations,
)
from langchain_ragspine.embeddings.batching import l2_normalize
from langchain_ragspine.errors import StoreError

__all__ = [
    "EMBEDDINGS",
    "PostgresEmbeddingCache",
    "chunks_without_vectors",
    "ensure_hnsw_index",
    "ensure_vector_schema",
    "has_hnsw_index",
    "has_vectors",
    "hnsw_index_name",
    "prune_vectors",
    "register_vector",
    "vector_count",
]

EMBEDDINGS = "ragspine_embeddings"

_VECTOR_DDL = (
    f"""CREATE TABLE IF NOT EXISTS {EMBEDDINGS} (
        model_key    text    NOT NULL,
        chunk_id     text    COLLATE "C" NOT NULL,
        content_hash text    NOT NULL,
        dim          integer NOT NULL CHECK (dim > 0),
        embedding    vector  NOT NULL,
        PRIMARY KEY (model_key, chunk_id, content_hash)
    )""",
)


def _vector_extension(conn: Any) -> tuple[str, bool] | None:
    """``(schema, on the search_path)`` of the installed ``vector`` extension, or ``None`` when it is not
    installed. A catalog query that cannot fail, so it is safe in or out of a transaction block (when the schema is
    not on the ``search_path``, ``vector`` is an unknown type there: psycopg's ``type "vector" does not exist``)."""
    row = conn.execute(
        "SELECT n.nspname, n.nspname = ANY (current_schemas(true)) FROM pg_extension e "
        "JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
    ).fetchone()
    return None if row is None else (str(row[0]), bool(row[1]))


def _vector_schema_off_path(conn: Any) -> str | None:
    """The schema holding the installed ``vector`` extension when it is not on the connection's ``search_path``,
    else ``None`` (not installed, or reachable)."""
    found = _vector_extension(conn)
    return None if found is None or found[1] else found[0]


def _off_path_error(schema: str, where: str | None = None) -> StoreError:
    return StoreError(
        f"the pgvector extension is installed in schema {schema!r}, which is not on this connection's search_path, "
        f"so the type vector is unknown here: add it to the store URL's search_path (e.g. "
        f"options=-csearch_path%3D<store schema>,{schema}), or ALTER EXTENSION vector SET SCHEMA to a schema on it",
        path=where,
    )


def register_vector(conn: Any) -> None:
    """Teach a psycopg connection pgvector's ``vector`` type (numpy arrays in, ``pgvector.Vector`` out); a no-op
    when done already.

    Raises:
        StoreError: the ``vector`` extension is not installed in the database, or it is installed in a schema that
            is not on the connection's ``search_path`` (the message names the schema and what to do).
        ImportError: the ``pgvector`` package is missing (names the ``postgres`` extra).
    """
    if conn.adapters.types.get("vector") is not None:
        return
    hint = "the dense channel on PostgreSQL needs pgvector: pip install 'langchain-ragspine[postgres]'"
    _register = import_optional("pgvector.psycopg", hint).register_vector
    import psycopg

    # Where the extension is, asked of the catalog before registering: a query that cannot fail, so it works in
    # or out of a transaction block (a failed type lookup would abort the transaction, and rolling back to ask
    # afterwards is not allowed inside ``with conn.transaction()``, the search path's case).
    found = _vector_extension(conn)
    if found is None:
        raise StoreError(
            "the pgvector extension is not installed in this database: run CREATE EXTENSION vector (or ingest "
            "once as a role allowed to)"
        )
    if not found[1]:
        raise _off_path_error(found[0])
    try:
        _register(conn)
    except psycopg.ProgrammingError as e:
        raise StoreError(f"registering pgvector's vector type on this connection failed: {pg_error_text(e)}") from e


def ensure_vector_schema(db: PostgresConnection) -> None:
    """Create the ``vector`` extension (when missing) and the embeddings table.

    Raises:
        StoreError: the extension is missing and this role may not create it (the message says what to run); it
            is installed in a schema that is not on the store's ``search_path`` (the message names it).
    """
    with db.connection() as conn:
        has = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()
        if not has:
            import psycopg

            try:
                conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            except psycopg.Error as e:
                raise StoreError(
                    f"the dense channel needs the pgvector extension, and creating it failed ({pg_error_text(e)}); ask an "
                    "administrator to run CREATE EXTENSION vector in this database",
                    path=db.where,
                ) from e
        schema = _vector_schema_off_path(conn)
        if schema is not None:
            raise _off_path_error(schema, db.where)
        if not store_relations(conn, EMBEDDINGS):
            with conn.transaction():
                for ddl in _VECTOR_DDL:
                    conn.execute(ddl)


class PostgresEmbeddingCache:
    """The :class:`~langchain_ragspine.embeddings.cache.ChunkVectorCache` of a PostgreSQL store: vectors in
    ``ragspine_embeddings``, keyed by ``(model_key, chunk_id, content_hash)``, stored L2-normalised.

    Args:
        db: the store's connections (``PostgresChunkStore.db``).
        read_only: :meth:`put_many` raises (a reader never writes).

    Each :meth:`put_many` is one transaction (a crash keeps every committed batch).

    Raises:
        StoreError: pgvector is missing (see :func:`ensure_vector_schema`).
    """

    def __init__(self, db: PostgresConnection, *, read_only: bool = False) -> None:
        self._db = db
        self._read_only = read_only
        if not read_only:
            ensure_vector_schema(db)

    @property
    def path(self) -> str:  # type: ignore[override]
        """The store's URL, password hidden (what messages name)."""
        return self._db.where

    @property
    def read_only(self) -> bool:
        """Whether writes are refused."""
        return self._read_only

    def get_many(self, model_key: str, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], np.ndarray]:
        """The cached unit vectors among ``keys`` = ``[(chunk_id, content_hash), …]`` (float32 ``(dim,)``)."""
        if not keys:
            return {}
        with self._db.connection() as conn:
            if not store_relations(conn, EMBEDDINGS):
                return {}
            register_vector(conn)
            rows = conn.execute(
                f"SELECT e.chunk_id, e.content_hash, e.embedding FROM {EMBEDDINGS} e JOIN unnest(%s::text[], "
                "%s::text[]) AS k(chunk_id, content_hash) ON e.chunk_id = k.chunk_id AND "
                "e.content_hash = k.content_hash WHERE e.model_key = %s",
                ([k[0] for k in keys], [k[1] for k in keys], model_key),
            ).fetchall()
        return {(c, h): np.asarray(v.to_numpy(), dtype=np.float32) for c, h, v in rows}

    def put_many(self, model_key: str, items: Sequence[tuple[str, str, np.ndarray]]) -> None:
        """Store ``[(chunk_id, content_hash, vector), …]`` for ``model_key`` (normalised here; existing keys kept).

        Raises:
            StoreError: read-only; vectors of one call differ in dimension; the query fails.
        """
        if self._read_only:
            raise StoreError("the embedding cache was opened read-only", path=self.path)
        if not items:
            return
        vectors = l2_normalize(np.stack([np.asarray(v, dtype=np.float32) for _, _, v in items]))
        # Registered before the cursor exists: a psycopg cursor copies its connection's adapters when created.
        with self._db.connection() as conn:
            register_vector(conn)
            with conn.transaction(), conn.cursor() as cur:
                cur.executemany(
                    f"INSERT INTO {EMBEDDINGS} (model_key, chunk_id, content_hash, dim, embedding) "
                    "VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
                    [(model_key, c, h, int(vectors.shape[1]), vectors[i]) for i, (c, h, _) in enumerate(items)],
                )

    def keys(self, model_key: str) -> set[tuple[str, str]]:
        """The ``(chunk_id, content_hash)`` keys held for ``model_key`` (no vector is read)."""
        with self._db.connection() as conn:
            if not store_relations(conn, EMBEDDINGS):
                return set()
            rows = conn.execute(
                f"SELECT chunk_id, content_hash FROM {EMBEDDINGS} WHERE model_key = %s", (model_key,)
            ).fetchall()
        return {(str(c), str(h)) for c, h in rows}

    def dim(self, model_key: str) -> int | None:
        """The dimension of ``model_key``'s vectors, or ``None`` when there are none."""
        with self._db.connection() as conn:
            if not store_relations(conn, EMBEDDINGS):
                return None
            row = conn.execute(f"SELECT dim FROM {EMBEDDINGS} WHERE model_key = %s LIMIT 1", (model_key,)).fetchone()
        return None if row is None else int(row[0])

    def count(self, model_key: str | None = None) -> int:
        """Vectors held (of ``model_key``, or of every model)."""
        with self._db.connection() as conn:
            if not store_relations(conn, EMBEDDINGS):
                return 0
            if model_key is None:
                return int(conn.execute(f"SELECT count(*) FROM {EMBEDDINGS}").fetchone()[0])
            return int(
                conn.execute(f"SELECT count(*) FROM {EMBEDDINGS} WHERE model_key = %s", (model_key,)).fetchone()[0]
            )


def prune_vectors(db: PostgresConnection) -> int:
    """Delete every vector (of any model) whose ``(chunk_id, content_hash)`` is not a searchable chunk's; returns
    the rows deleted."""
    with db.connection() as conn:
        if not store_relations(conn, EMBEDDINGS):
            return 0
        cur = conn.execute(
            f"DELETE FROM {EMBEDDINGS} e WHERE NOT EXISTS (SELECT 1 FROM {SEARCH} s WHERE s.chunk_id = e.chunk_id "
            "AND s.content_hash = e.content_hash)"
        )
        return int(cur.rowcount or 0)


def chunks_without_vectors(
    store: PostgresChunkStore,
    model_key: str,
    *,
    skip_doc_ids: Sequence[str] = (),
    skip_owner: str | None = None,
) -> list[Document]:
    """The searchable chunks with visible text that have no vector of ``model_key`` (what the dense channel of
    that model would never find), as ``Document``\\ s in store order — one anti-join of the search table with the
    vectors, so nothing is read for chunks that have one.  ``ingest`` embeds them with a new model: the chunks of
    the documents it keeps without writing them.

    Args:
        store: a writable (current-schema) store.
        model_key: the model (:func:`~langchain_ragspine.embeddings.cache.model_key_for`).
        skip_doc_ids: documents left out (those the caller writes itself).
        skip_owner: leave out the documents this writer owns, too (those an ingest is about to retract).

    Raises:
        StoreError: the query fails.
    """
    where = ["s.has_text", "NOT (c.doc_id = ANY(%s))"]
    params: list[Any] = [list(skip_doc_ids)]
    if skip_owner is not None:
        where.append(
            f"NOT EXISTS (SELECT 1 FROM {DOC_VERSIONS} d WHERE d.doc_id = c.doc_id AND d.version = c.version "
            "AND d.owner = %s)"
        )
        params.append(skip_owner)
    with store.db.connection() as conn:
        if store_relations(conn, EMBEDDINGS):
            where.append(
                f"NOT EXISTS (SELECT 1 FROM {EMBEDDINGS} e WHERE e.model_key = %s AND e.chunk_id = s.chunk_id AND "
                "e.content_hash = s.content_hash)"
            )
            params.append(model_key)
        rows = conn.execute(
            f"SELECT {chunk_columns('c')} FROM {SEARCH} s JOIN {CHUNKS} c ON c.id = s.chunk_row WHERE "
            + " AND ".join(where) + ' ORDER BY c.doc_id COLLATE "C", c.position',
            params,
        ).fetchall()
    return [row_to_stored(r, path=store.path).to_document() for r in rows]


def vector_count(db: PostgresConnection, model_key: str) -> int:
    """Vectors of ``model_key`` that belong to searchable chunks with visible text (what the dense channel ranks)."""
    with db.connection() as conn:
        if not store_relations(conn, EMBEDDINGS):
            return 0
        return int(conn.execute(
            f"SELECT count(*) FROM {EMBEDDINGS} e JOIN {SEARCH} s ON s.chunk_id = e.chunk_id AND "
            "s.content_hash = e.content_hash WHERE e.model_key = %s AND s.has_text",
            (model_key,),
        ).fetchone()[0])


def hnsw_index_name(model_key: str) -> str:
    """The name of the HNSW index of ``model_key``'s vectors (``ragspine_hnsw_`` + 16 hex digits of its SHA-256)."""
    return "ragspine_hnsw_" + hashlib.sha256(model_key.encode("utf-8")).hexdigest()[:16]


def has_vectors(db: PostgresConnection, model_key: str) -> bool:
    """Whether the store holds any vector of ``model_key``."""
    with db.connection() as conn:
        row = conn.execute(f"SELECT 1 FROM {EMBEDDINGS} WHERE model_key = %s LIMIT 1", (model_key,)).fetchone()
    return row is not None


def has_hnsw_index(db: PostgresConnection, model_key: str) -> bool:
    """Whether ``model_key``'s vectors have an HNSW index."""
    with db.connection() as conn:
        return bool(store_relations(conn, hnsw_index_name(model_key)))


def ensure_hnsw_index(
    db: PostgresConnection, model_key: str, dim: int, *, threshold: int, m: int = 16, ef_construction: int = 64
) -> bool:
    """Build the HNSW index of ``model_key``'s vectors when they number ``threshold`` or more and it is missing
    (``m`` / ``ef_construction``: pgvector's defaults).  Returns whether the index exists afterwards.

    Raises:
        StoreError: the build fails.
    """
    from psycopg import sql

    if has_hnsw_index(db, model_key):
        return True
    if vector_count(db, model_key) < threshold:
        return False
    with db.connection() as conn:
        conn.execute("SET maintenance_work_mem = '512MB'")
        try:
            conn.execute(sql.SQL(
                "CREATE INDEX IF NOT EXISTS {name} ON {table} USING hnsw ((embedding::vector({dim})) vector_ip_ops) "
                "WITH (m = {m}, ef_construction = {ef}) WHERE model_key = {key}"
            ).format(
                name=sql.Identifier(hnsw_index_name(model_key)), table=sql.Identifier(EMBEDDINGS),
                dim=sql.Literal(int(dim)), m=sql.Literal(int(m)), ef=sql.Literal(int(ef_construction)),
                key=sql.Literal(model_key),
            ))
        finally:
            conn.execute("RESET maintenance_work_mem")
    return True
