"""Persistent stores: the versioned SQLite chunk store that derived indexes are rebuilt from, and the vector index
(FAISS index file + SQLite id map) with its embedding cache."""

from langchain_ragspine.stores.chunk_store import ChunkStore, StoredChunk
from langchain_ragspine.stores.vector_index import (
    EmbeddingCache,
    FaissVectorIndex,
    content_hash,
    model_key_for,
)

__all__ = ["ChunkStore", "EmbeddingCache", "FaissVectorIndex", "StoredChunk", "content_hash", "model_key_for"]
