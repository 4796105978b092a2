"""The old home of PostgreSQL ingest and retrieval (before issue 26 put the backend in one folder): every name it
had, re-exported from where it lives now, for one release; importing it warns (``DeprecationWarning``, naming each
name's home).  No module of the package imports it (``tests/unit_tests/test_import_graph.py``, rule 4); new code
imports from the homes:

* :mod:`langchain_ragspine.backends.postgres.versions` — :func:`write_versions`, :func:`add_documents`,
  :func:`active_document_count` (the backend's own writes);
* :mod:`langchain_ragspine.pipeline.ingest` — :func:`ingest_postgres` (ingest's PostgreSQL branch);
* :mod:`langchain_ragspine.pipeline.sources` — :class:`PostgresSource` (the mode registry's source of a
  PostgreSQL store, the twin of :class:`~langchain_ragspine.pipeline.sources.StoreSource`).
"""

from langchain_ragspine._stacklevel import warn_moved as _warn_moved
from langchain_ragspine.backends.postgres.versions import active_document_count, add_documents, write_versions
from langchain_ragspine.pipeline.ingest import ingest_postgres
from langchain_ragspine.pipeline.sources import PostgresSource

_warn_moved(
    __name__,
    {
        "langchain_ragspine.backends.postgres.versions": ["active_document_count", "add_documents", "write_versions"],
        "langchain_ragspine.pipeline.ingest": ["ingest_postgres"],
        "langchain_ragspine.pipeline.sources": ["PostgresSource"],
    },
)

__all__ = ["PostgresSource", "active_document_count", "add_documents", "ingest_postgres", "write_versions"]
