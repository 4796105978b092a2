"""Moved to :mod:`langchain_ragspine.backends.directory.bm25_index` (issue 26); this module re-exports its public
names for one release.  Import them from there.
"""

from langchain_ragspine.backends.directory.bm25_index import (
    FORMAT,
    SavedBM25Index,
    TermPostings,
    build_bm25_index,
    load_bm25_index,
    save_bm25_index,
)

__all__ = [
    "FORMAT",
    "SavedBM25Index",
    "TermPostings",
    "build_bm25_index",
    "load_bm25_index",
    "save_bm25_index",
]
