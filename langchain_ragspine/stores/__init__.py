"""Persistent stores: the versioned SQLite chunk store that derived indexes are rebuilt from."""

from langchain_ragspine.stores.chunk_store import ChunkStore, StoredChunk

__all__ = ["ChunkStore", "StoredChunk"]
