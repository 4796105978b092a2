"""Moved to :mod:`langchain_ragspine.backends.directory.faiss_index` (issue 26); this module re-exports its public
names for one release.  Import them from there.
"""

from langchain_ragspine.backends.directory.faiss_index import (
    AUTO_HNSW_MIN_ROWS,
    EXACT_MAX_ROWS,
    INDEX_KINDS,
    FaissVectorIndex,
)

__all__ = [
    "AUTO_HNSW_MIN_ROWS",
    "EXACT_MAX_ROWS",
    "INDEX_KINDS",
    "FaissVectorIndex",
]
