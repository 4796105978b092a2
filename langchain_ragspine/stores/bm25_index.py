"""Moved to :mod:`langchain_ragspine.backends.directory.bm25_index` (issue 26); this module re-exports its public
names for one release, and importing it warns (``DeprecationWarning``).  Import them from there.
"""

from langchain_ragspine._stacklevel import warn_moved as _warn_moved
from langchain_ragspine.backends.directory.bm25_index import (
    FORMAT,
    SavedBM25Index,
    TermPostings,
    build_bm25_index,
    load_bm25_index,
    save_bm25_index,
)

_warn_moved(__name__, "langchain_ragspine.backends.directory.bm25_index")

__all__ = [
    "FORMAT",
    "SavedBM25Index",
    "TermPostings",
    "build_bm25_index",
    "load_bm25_index",
    "save_bm25_index",
]
