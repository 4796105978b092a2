"""Moved to :mod:`langchain_ragspine.backends` (issue 26): the store directory's modules are in
:mod:`langchain_ragspine.backends.directory`, PostgreSQL's in :mod:`langchain_ragspine.backends.postgres` and the
filter compiler in :mod:`langchain_ragspine.filters.sql`.  This package and its modules re-export the public names
for one release.  Import them from there.
"""

from langchain_ragspine.backends.directory.chunk_store import ChunkStore, StoredChunk
from langchain_ragspine.backends.directory.embedding_cache import EmbeddingCache
from langchain_ragspine.backends.directory.faiss_index import FaissVectorIndex

__all__ = ["ChunkStore", "EmbeddingCache", "FaissVectorIndex", "StoredChunk"]
