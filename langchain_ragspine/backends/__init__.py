"""Storage backends: where chunk versions and their search indexes live.

Two implementations, one folder each: :mod:`langchain_ragspine.backends.directory` (a store directory: the versioned
SQLite chunk store, the BM25 index, the FAISS index and the embedding cache) and
:mod:`langchain_ragspine.backends.postgres` (one PostgreSQL schema: chunk versions, BM25 postings and pgvector
vectors).  Import from the modules themselves, e.g.
``from langchain_ragspine.backends.directory.chunk_store import ChunkStore``; this package re-exports nothing.  The
interface both implement is :mod:`langchain_ragspine.backends.base` (``ChunkBackend``, ``SearchBackend``), and the
versioning rules both follow are :mod:`langchain_ragspine.backends.versioning`.
"""

__all__: list[str] = []
