"""Persistent stores: the versioned SQLite chunk store that derived indexes are rebuilt from, the vector index
(FAISS index file + SQLite id map) and the embedding cache (chunk vectors in SQLite)."""

from langchain_ragspine.stores.chunk_store import ChunkStore, StoredChunk
from langchain_ragspine.stores.embedding_cache import EmbeddingCache
from langchain_ragspine.stores.faiss_index import FaissVectorIndex

__all__ = ["ChunkStore", "EmbeddingCache", "FaissVectorIndex", "StoredChunk"]
