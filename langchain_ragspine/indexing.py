"""Moved (issue 26, P1-P3): this module re-exports, for one release, the public names it held, and importing it
warns (``DeprecationWarning``, naming each name's home).  Import them from their homes:

- :mod:`langchain_ragspine.pipeline.ingest` — :func:`ingest`, :data:`PROBE_CHUNKS`;
- :mod:`langchain_ragspine.pipeline.stages` — the ingest stages (:class:`IngestSummary`, :func:`write_documents`,
  :func:`build_bm25`, …);
- :mod:`langchain_ragspine.embeddings.cache` — the embed stage (:func:`warm_embedding_cache`, :class:`KeyedVectorCache`,
  :data:`STORE_UNCHANGED`);
- :mod:`langchain_ragspine.pipeline.sources` — :func:`open_retriever`, :class:`StoreSource`, :func:`open_source`,
  :func:`search`, :func:`check_store_chunker`;
- :mod:`langchain_ragspine.backends.directory.layout` — a store directory's file names, :func:`check_store_dir`,
  :func:`store_writer`, :func:`prepare_store_dir`;
- :mod:`langchain_ragspine.cli` — :func:`result_record` (the ``search --json`` record);
- :mod:`langchain_ragspine.errors` — :class:`StaleIndexWarning`.

No module of the package imports this one (rule 4 of ``tests/unit_tests/test_import_graph.py``).
"""

from langchain_ragspine._stacklevel import warn_moved as _warn_moved
from langchain_ragspine.backends.directory.layout import (
    BM25_DIR,
    CHUNKS_DB,
    EMBEDDING_CACHE,
    INDEX_STATE,
    STORE_MARKER,
    VECTOR_DIR,
    check_store_dir,
    prepare_store_dir,
    store_writer,
)
from langchain_ragspine.cli import result_record
from langchain_ragspine.embeddings.cache import STORE_UNCHANGED, KeyedVectorCache, warm_embedding_cache
from langchain_ragspine.errors import StaleIndexWarning
from langchain_ragspine.pipeline.ingest import PROBE_CHUNKS, ingest
from langchain_ragspine.pipeline.sources import (
    StoreSource,
    check_store_chunker,
    open_retriever,
    open_source,
    search,
)
from langchain_ragspine.pipeline.stages import (
    CONTEXTUAL_DEFAULT,
    DocumentStore,
    IngestSummary,
    build_bm25,
    write_documents,
)

_warn_moved(
    __name__,
    {
        "langchain_ragspine.backends.directory.layout": [
            "BM25_DIR", "CHUNKS_DB", "EMBEDDING_CACHE", "INDEX_STATE", "STORE_MARKER", "VECTOR_DIR",
            "check_store_dir", "prepare_store_dir", "store_writer",
        ],
        "langchain_ragspine.cli": ["result_record"],
        "langchain_ragspine.embeddings.cache": ["KeyedVectorCache", "STORE_UNCHANGED", "warm_embedding_cache"],
        "langchain_ragspine.errors": ["StaleIndexWarning"],
        "langchain_ragspine.pipeline.ingest": ["PROBE_CHUNKS", "ingest"],
        "langchain_ragspine.pipeline.sources": [
            "StoreSource", "check_store_chunker", "open_retriever", "open_source", "search",
        ],
        "langchain_ragspine.pipeline.stages": [
            "CONTEXTUAL_DEFAULT", "DocumentStore", "IngestSummary", "build_bm25", "write_documents",
        ],
    },
)

__all__ = [
    "BM25_DIR",
    "CHUNKS_DB",
    "CONTEXTUAL_DEFAULT",
    "EMBEDDING_CACHE",
    "INDEX_STATE",
    "PROBE_CHUNKS",
    "STORE_MARKER",
    "STORE_UNCHANGED",
    "VECTOR_DIR",
    "DocumentStore",
    "IngestSummary",
    "KeyedVectorCache",
    "StaleIndexWarning",
    "StoreSource",
    "build_bm25",
    "check_store_chunker",
    "check_store_dir",
    "ingest",
    "open_retriever",
    "open_source",
    "prepare_store_dir",
    "result_record",
    "search",
    "store_writer",
    "warm_embedding_cache",
    "write_documents",
]
