"""RagSpine stores as LangChain ``VectorStore``\\ s: one :class:`RagSpineVectorStore` over any backend (a store
directory: chunk store + in-memory BM25 + dense; PostgreSQL + pgvector), and :class:`PostgresVectorStore` — the
same store opened from a ``postgresql://`` URL (imported lazily: it needs the ``postgres`` extra).
``VersionedVectorStore`` (the old base class of the PostgreSQL store) is a deprecated alias of
:class:`RagSpineVectorStore` for one release."""

from __future__ import annotations

import sys
import warnings
from typing import TYPE_CHECKING, Any

from langchain_ragspine.vectorstores.base import ScopedVectorStoreRetriever, as_chunks
from langchain_ragspine.vectorstores.store import (
    CacheNotWrittenWarning,
    ChunkStoreBackend,
    RagSpineStoreRetriever,
    RagSpineVectorStore,
    RecordBackend,
)

if TYPE_CHECKING:
    from langchain_ragspine.vectorstores.postgres import PostgresVectorStore

__all__ = [
    "CacheNotWrittenWarning",
    "ChunkStoreBackend",
    "PostgresVectorStore",
    "RagSpineStoreRetriever",
    "RagSpineVectorStore",
    "RecordBackend",
    "ScopedVectorStoreRetriever",
    "VersionedVectorStore",
    "as_chunks",
]


def __getattr__(name: str) -> Any:
    if name == "PostgresVectorStore":
        from langchain_ragspine.vectorstores.postgres import PostgresVectorStore

        return PostgresVectorStore
    if name == "VersionedVectorStore":
        if sys._getframe(1).f_code.co_filename.startswith("<frozen importlib"):
            return RagSpineVectorStore  # `from … import` asks twice (hasattr, then the name): warn on the second
        warnings.warn(
            "langchain_ragspine.vectorstores.VersionedVectorStore is deprecated (issue 26, B5): there is one vector "
            "store, RagSpineVectorStore(backend, embedding), over any StoreBackend (langchain_ragspine.backends.base); "
            "a store of its own is a StoreBackend, not a subclass",
            DeprecationWarning,
            stacklevel=2,
        )
        return RagSpineVectorStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
