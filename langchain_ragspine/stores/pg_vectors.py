"""Moved to :mod:`langchain_ragspine.backends.postgres.vectors` (issue 26); this module re-exports its public
names for one release, and importing it warns (``DeprecationWarning``).  Import them from there.
"""

from langchain_ragspine._stacklevel import warn_moved as _warn_moved
from langchain_ragspine.backends.postgres.vectors import (
    EMBEDDINGS,
    PostgresEmbeddingCache,
    chunks_without_vectors,
    ensure_hnsw_index,
    ensure_vector_schema,
    has_hnsw_index,
    has_vectors,
    hnsw_index_name,
    prune_vectors,
    register_vector,
    vector_count,
)

_warn_moved(__name__, "langchain_ragspine.backends.postgres.vectors")

__all__ = [
    "EMBEDDINGS",
    "PostgresEmbeddingCache",
    "chunks_without_vectors",
    "ensure_hnsw_index",
    "ensure_vector_schema",
    "has_hnsw_index",
    "has_vectors",
    "hnsw_index_name",
    "prune_vectors",
    "register_vector",
    "vector_count",
]
