"""Moved to :mod:`langchain_ragspine.backends.postgres.chunk_store` (issue 26); this module re-exports its public
names for one release, and importing it warns (``DeprecationWarning``).  Import them from there.
"""

from langchain_ragspine._stacklevel import warn_moved as _warn_moved
from langchain_ragspine.backends.postgres.chunk_store import (
    PG_SCHEMA_VERSION,
    PostgresChunkStore,
    PostgresConnection,
    check_store_schema,
    chunk_columns,
    close_pools,
    get_pool,
    import_psycopg,
    is_postgres_url,
    libpq_url,
    looks_like_conninfo,
    pg_error_text,
    redact_text,
    redact_url,
    row_to_stored,
    store_relations,
)

_warn_moved(__name__, "langchain_ragspine.backends.postgres.chunk_store")

__all__ = [
    "PG_SCHEMA_VERSION",
    "PostgresChunkStore",
    "PostgresConnection",
    "check_store_schema",
    "chunk_columns",
    "close_pools",
    "get_pool",
    "import_psycopg",
    "is_postgres_url",
    "libpq_url",
    "looks_like_conninfo",
    "pg_error_text",
    "redact_text",
    "redact_url",
    "row_to_stored",
    "store_relations",
]
