"""Moved to :mod:`langchain_ragspine.backends.directory.chunk_store` (issue 26); this module re-exports its public
names for one release.  Import them from there.
"""

from langchain_ragspine.backends.directory.chunk_store import (
    FACET_FIELDS,
    SCHEMA_VERSION,
    ChunkStore,
    StoredChunk,
    nan_field,
)

__all__ = [
    "FACET_FIELDS",
    "SCHEMA_VERSION",
    "ChunkStore",
    "StoredChunk",
    "nan_field",
]
