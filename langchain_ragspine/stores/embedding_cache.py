"""Moved to :mod:`langchain_ragspine.backends.directory.embedding_cache` (issue 26); this module re-exports its public
names for one release, and importing it warns (``DeprecationWarning``).  Import them from there.
"""

from langchain_ragspine._stacklevel import warn_moved as _warn_moved
from langchain_ragspine.backends.directory.embedding_cache import (
    CACHE_SCHEMA_VERSION,
    EmbeddingCache,
)

_warn_moved(__name__, "langchain_ragspine.backends.directory.embedding_cache")

__all__ = [
    "CACHE_SCHEMA_VERSION",
    "EmbeddingCache",
]
