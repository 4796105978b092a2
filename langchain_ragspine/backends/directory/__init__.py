"""The directory backend: a store directory (``chunks.sqlite``, ``bm25/``, ``vector/``, ``embeddings.sqlite``,
``index.json``, ``.ragspine.lock``).

Modules: :mod:`~langchain_ragspine.backends.directory.chunk_store` (the versioned SQLite chunk store),
:mod:`~langchain_ragspine.backends.directory.bm25_index` and
:mod:`~langchain_ragspine.backends.directory.bm25_parallel` (the BM25 index and its parallel tokenization),
:mod:`~langchain_ragspine.backends.directory.faiss_index` (the vector index),
:mod:`~langchain_ragspine.backends.directory.embedding_cache` (chunk vectors in SQLite),
:mod:`~langchain_ragspine.backends.directory.files` (atomic directories, manifests),
:mod:`~langchain_ragspine.backends.directory.index_state` (``index.json``) and
:mod:`~langchain_ragspine.backends.directory.lock` (the writer lock).  Import from them, e.g.
``from langchain_ragspine.backends.directory.chunk_store import ChunkStore``; this package re-exports nothing, so
importing one module does not load the others.
"""

__all__: list[str] = []
