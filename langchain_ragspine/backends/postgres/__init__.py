"""The PostgreSQL backend: one schema holding chunk versions, BM25 postings and pgvector vectors.

Modules: :mod:`~langchain_ragspine.backends.postgres.chunk_store` (``PostgresChunkStore``, connections and pools),
:mod:`~langchain_ragspine.backends.postgres.vectors` (pgvector vectors and the HNSW index) and
:mod:`~langchain_ragspine.backends.postgres.lock` (the writer lock, a session advisory lock).  Filters are compiled
to SQL by :mod:`langchain_ragspine.filters.sql`.  Import from the modules, e.g.
``from langchain_ragspine.backends.postgres.chunk_store import PostgresChunkStore``; this package re-exports
nothing (psycopg is imported only when a PostgreSQL store is opened).
"""

__all__: list[str] = []
