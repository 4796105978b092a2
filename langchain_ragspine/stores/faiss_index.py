"""Moved to :mod:`langchain_ragspine.backends.directory.faiss_index` (issue 26); this module re-exports its public
names for one release, and importing it warns (``DeprecationWarning``).  Import them from there.
"""

from langchain_ragspine._stacklevel import warn_moved as _warn_moved
from langchain_ragspine.backends.directory.faiss_index import (
    AUTO_HNSW_MIN_ROWS,
    EXACT_MAX_ROWS,
    INDEX_KINDS,
    FaissVectorIndex,
)

_warn_moved(__name__, "langchain_ragspine.backends.directory.faiss_index")

__all__ = [
    "AUTO_HNSW_MIN_ROWS",
    "EXACT_MAX_ROWS",
    "INDEX_KINDS",
    "FaissVectorIndex",
]
