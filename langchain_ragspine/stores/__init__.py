"""Moved to :mod:`langchain_ragspine.backends` (issue 26): the store directory's modules are in
:mod:`langchain_ragspine.backends.directory`, PostgreSQL's in :mod:`langchain_ragspine.backends.postgres` and the
filter compiler in :mod:`langchain_ragspine.filters.sql`.  This package and its modules re-export the public names
for one release.  Import them from there.

Each module ``stores.X`` warns (``DeprecationWarning``) when imported.  This package warns when one of its names is
used (``from langchain_ragspine.stores import ChunkStore``), not when Python imports it as the parent of
``stores.X``: an old import gives one warning, naming where its names went.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from langchain_ragspine._stacklevel import warn_moved as _warn_moved

if TYPE_CHECKING:
    from langchain_ragspine.backends.directory.chunk_store import ChunkStore, StoredChunk
    from langchain_ragspine.backends.directory.embedding_cache import EmbeddingCache
    from langchain_ragspine.backends.directory.faiss_index import FaissVectorIndex

__all__ = ["ChunkStore", "EmbeddingCache", "FaissVectorIndex", "StoredChunk"]

#: Each name this package exported -> its home module.
_HOMES = {
    "ChunkStore": "langchain_ragspine.backends.directory.chunk_store",
    "EmbeddingCache": "langchain_ragspine.backends.directory.embedding_cache",
    "FaissVectorIndex": "langchain_ragspine.backends.directory.faiss_index",
    "StoredChunk": "langchain_ragspine.backends.directory.chunk_store",
}


def __getattr__(name: str) -> Any:
    """``langchain_ragspine.stores.NAME``: the name from its home, with one ``DeprecationWarning`` naming it (then
    cached here, so it warns once)."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    _warn_moved(__name__, {home: [name]})
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
