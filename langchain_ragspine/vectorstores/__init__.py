"""RagSpine stores as LangChain ``VectorStore``\\ s: the shared id / version / RESTRICTED rules
(:class:`RagSpineVectorStore`) and the PostgreSQL + pgvector store (:class:`PostgresVectorStore`, imported lazily:
it needs the ``postgres`` extra)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_ragspine.vectorstores.base import RagSpineVectorStore, as_chunks

if TYPE_CHECKING:
    from langchain_ragspine.vectorstores.postgres import PostgresVectorStore

__all__ = ["PostgresVectorStore", "RagSpineVectorStore", "as_chunks"]


def __getattr__(name: str) -> Any:
    if name == "PostgresVectorStore":
        from langchain_ragspine.vectorstores.postgres import PostgresVectorStore

        return PostgresVectorStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
