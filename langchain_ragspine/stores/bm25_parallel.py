"""Moved to :mod:`langchain_ragspine.backends.directory.bm25_parallel` (issue 26); this module re-exports its public
names for one release, and importing it warns (``DeprecationWarning``).  Import them from there.
"""

from langchain_ragspine._stacklevel import warn_moved as _warn_moved
from langchain_ragspine.backends.directory.bm25_parallel import (
    BATCH_TEXTS,
    MIN_PARALLEL_TEXTS,
    CountedBatch,
    CountedBatches,
    count_batch,
    iter_counted,
    prefetch,
    prefetch_scope,
    prefetched,
    resolve_workers,
    take_prefetched,
    usable_cores,
)

_warn_moved(__name__, "langchain_ragspine.backends.directory.bm25_parallel")

__all__ = [
    "BATCH_TEXTS",
    "MIN_PARALLEL_TEXTS",
    "CountedBatch",
    "CountedBatches",
    "count_batch",
    "iter_counted",
    "prefetch",
    "prefetch_scope",
    "prefetched",
    "resolve_workers",
    "take_prefetched",
    "usable_cores",
]
