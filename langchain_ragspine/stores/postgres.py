"""Moved to :mod:`langchain_ragspine.backends.postgres.chunk_store` (issue 26); this module re-exports its public
names for one release.  Import them from there.
"""

from langchain_ragspine.backends.postgres.chunk_store import (
    PG_SCHEMA_VERSION,
    PostgresChunkStore,
    PostgresConnection,
    chunk_columns,
    close_pools,
    get_pool,
    import_psycopg,
    is_postgres_url,
    looks_like_conninfo,
    redact_url,
    row_to_stored,
)

__all__ = [
    "PG_SCHEMA_VERSION",
    "PostgresChunkStore",
    "PostgresConnection",
    "chunk_columns",
    "close_pools",
    "get_pool",
    "import_psycopg",
    "is_postgres_url",
    "looks_like_conninfo",
    "redact_url",
    "row_to_stored",
]
