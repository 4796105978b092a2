"""RagSpine stores as LangChain ``VectorStore``\\ s: :class:`RagSpineVectorStore` over a store directory (chunk store +
BM25 + dense), the versioned-document rules a database store shares (:class:`VersionedVectorStore`), and the
PostgreSQL + pgvector store (:class:`PostgresVectorStore`, imported lazily: it needs the ``postgres`` extra)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_ragspine.vectorstores.base import ScopedVectorStoreRetriever, VersionedVectorStore, as_chunks
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
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
