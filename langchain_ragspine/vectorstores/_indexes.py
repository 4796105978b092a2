"""Moved to :mod:`langchain_ragspine.backends.directory.indexes` (issue 26, B2: the directory backend's search); this
module re-exports its public names for one release, and importing it warns (``DeprecationWarning``).  Import them
from there.
"""

from langchain_ragspine._stacklevel import warn_moved as _warn_moved
from langchain_ragspine.backends.directory.indexes import (
    Embedder,
    IndexConfig,
    IndexSnapshot,
    Part,
    StoredRecord,
    internal_record,
)

_warn_moved(__name__, "langchain_ragspine.backends.directory.indexes")

__all__ = ["Embedder", "IndexConfig", "IndexSnapshot", "Part", "StoredRecord", "internal_record"]
