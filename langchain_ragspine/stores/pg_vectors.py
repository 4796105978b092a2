"""Moved to :mod:`langchain_ragspine.backends.postgres.vectors` (issue 26); this module re-exports its public
names for one release.  Import them from there.
"""

from langchain_ragspine.backends.postgres.vectors import (
    EMBEDDINGS,
    PostgresEmbeddingCache,
    chunks_without_vectors,
    ensure_hnsw_index,
    ensure_vector_schema,
    has_hnsw_index,
    hnsw_index_name,
    prune_vectors,
    register_vector,
    vector_count,
)

__all__ = [
    "EMBEDDINGS",
    "PostgresEmbeddingCache",
    "chunks_without_vectors",
    "ensure_hnsw_index",
    "ensure_vector_schema",
    "has_hnsw_index",
    "hnsw_index_name",
    "prune_vectors",
    "register_vector",
    "vector_count",
]
