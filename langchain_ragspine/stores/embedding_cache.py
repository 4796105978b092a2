"""Moved to :mod:`langchain_ragspine.backends.directory.embedding_cache` (issue 26); this module re-exports its public
names for one release.  Import them from there.
"""

from langchain_ragspine.backends.directory.embedding_cache import (
    CACHE_SCHEMA_VERSION,
    EmbeddingCache,
)

__all__ = [
    "CACHE_SCHEMA_VERSION",
    "EmbeddingCache",
]
