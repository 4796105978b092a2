"""Moved to :mod:`langchain_ragspine.backends.directory.chunk_store` (issue 26); this module re-exports its public
names for one release, and importing it warns (``DeprecationWarning``).  Import them from there.
"""

from langchain_ragspine._stacklevel import warn_moved as _warn_moved
from langchain_ragspine.backends.directory.chunk_store import (
    FACET_FIELDS,
    INGEST_WRITER,
    SCHEMA_VERSION,
    VECTORSTORE_RECORD_KEY,
    VECTORSTORE_WRITER,
    ChunkStore,
    StoredChunk,
    VersionWritten,
    attribute_history,
    nan_field,
    owner_of_next,
)

_warn_moved(__name__, "langchain_ragspine.backends.directory.chunk_store")

__all__ = [
    "FACET_FIELDS",
    "INGEST_WRITER",
    "SCHEMA_VERSION",
    "VECTORSTORE_RECORD_KEY",
    "VECTORSTORE_WRITER",
    "ChunkStore",
    "StoredChunk",
    "VersionWritten",
    "attribute_history",
    "nan_field",
    "owner_of_next",
]
