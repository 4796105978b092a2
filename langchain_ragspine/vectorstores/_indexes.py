"""Moved to :mod:`langchain_ragspine.backends.directory.indexes` (issue 26, B2: the directory backend's search); this
module re-exports its public names for one release.  Import them from there.
"""

from langchain_ragspine.backends.directory.indexes import (
    Embedder,
    IndexConfig,
    IndexSnapshot,
    Part,
    StoredRecord,
    internal_record,
)

__all__ = ["Embedder", "IndexConfig", "IndexSnapshot", "Part", "StoredRecord", "internal_record"]
