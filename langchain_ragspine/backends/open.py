"""Which backend a store is: :func:`open_backend` is the one place that looks at whether a store is a URL.

A store is given as a path (a store directory, :mod:`langchain_ragspine.backends.directory`) or as a
``postgresql://`` / ``postgres://`` URL (:mod:`langchain_ragspine.backends.postgres`)::

    backend = open_backend("store")                       # DirectoryLocation(root=PosixPath('store'))
    backend = open_backend("postgresql://localhost/rag")  # PostgresLocation(given='postgresql://localhost/rag')
    with backend.writer_lock(timeout=None):
        n = backend.active_document_count()

Ingest, the retrieval sources and the CLI ask it (or receive what it opened) instead of testing the string
themselves.  The PostgreSQL classes still refuse a non-URL they are handed directly (a clear ``ValueError``), but
choosing the backend happens here.  Opening reads and connects to nothing: what it returns is a *location* — where
the store is, its writer lock, its document count, its recorded chunker and what the backend supports — not the
chunk store itself (:class:`~langchain_ragspine.backends.base.ChunkBackend`), which ingest and the sources open from
it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from langchain_ragspine.backends.base import CONTEXTUAL, PARENTS
from langchain_ragspine.backends.directory.chunk_store import ChunkStore
from langchain_ragspine.backends.directory.layout import CHUNKS_DB, has_chunk_store, store_writer
from langchain_ragspine.backends.postgres.chunk_store import (
    PostgresChunkStore,
    is_postgres_url,
    redact_url,
)
from langchain_ragspine.backends.postgres.versions import active_document_count
from langchain_ragspine.settings import MALFORMED_POSTGRES_RE, URL_SCHEME_RE

__all__ = ["DirectoryLocation", "PostgresLocation", "StoreLocation", "open_backend"]


@dataclass(frozen=True)
class DirectoryLocation:
    """A store directory at ``root`` (it may not exist yet: ``ingest`` creates it).

    Attributes:
        root: the directory.
        keeps_parents / contextual_headers: what this backend supports (parent-child chunking's parents, as
            :attr:`ChunkStore.unsupported` says; contextual headers recorded in ``index.json``): both.
    """

    root: Path
    kind: ClassVar[str] = "directory"
    #: What this backend refuses, by name (:func:`~langchain_ragspine.backends.base.refuse`): its chunk store's.
    unsupported: ClassVar[Mapping[str, str]] = ChunkStore.unsupported
    keeps_parents: ClassVar[bool] = PARENTS not in ChunkStore.unsupported
    contextual_headers: ClassVar[bool] = CONTEXTUAL not in ChunkStore.unsupported

    @property
    def location(self) -> Path:
        """The store as the CLI hands it on: the directory's ``Path``."""
        return self.root

    @property
    def shown(self) -> Path:
        """The store as messages name it (``StoreError(path=…)``): the directory."""
        return self.root

    def writer_lock(self, timeout: float | None) -> contextlib.AbstractContextManager[object]:
        """The directory's writer lock (:func:`~langchain_ragspine.backends.directory.layout.store_writer`, after it
        checked the directory can be a store), waiting at most ``timeout`` seconds (``None``: as long as it takes).

        Raises:
            StoreError: not a store directory; ``StoreBusyError`` after ``timeout``."""
        return store_writer(self.root, lock_timeout=timeout)

    def active_document_count(self, *, owner: str | None = None) -> int:
        """Active documents in the store (0 when there is none yet); with ``owner``, only those that writer owns."""
        if not has_chunk_store(self.root):
            return 0
        with ChunkStore(self.root / CHUNKS_DB, read_only=True) as store:
            return len(store.doc_ids(owner=owner))

    def recorded_chunker(self) -> tuple[dict[str, Any] | None, bool]:
        """``(the store's chunker record, whether it has active documents)``; ``(None, False)`` without a store."""
        if not has_chunk_store(self.root):
            return None, False
        with ChunkStore(self.root / CHUNKS_DB, read_only=True) as store:
            return store.chunker, bool(store.doc_ids())


@dataclass(frozen=True)
class PostgresLocation:
    """A PostgreSQL store (one schema: chunk versions, BM25 postings, pgvector vectors; ``docs/postgres.md``).

    Attributes:
        given: the URL as the caller gave it (the CLI hands it on unchanged).
        keeps_parents / contextual_headers: neither yet (parents: :attr:`PostgresChunkStore.unsupported`; ingest
            refuses ``--chunker parent_child`` and ``--contextual`` for it, naming them).
    """

    given: str
    kind: ClassVar[str] = "postgresql"
    #: What this backend refuses, by name (:func:`~langchain_ragspine.backends.base.refuse`): its chunk store's.
    unsupported: ClassVar[Mapping[str, str]] = PostgresChunkStore.unsupported
    backend_name: ClassVar[str] = PostgresChunkStore.backend_name
    keeps_parents: ClassVar[bool] = PARENTS not in PostgresChunkStore.unsupported
    contextual_headers: ClassVar[bool] = CONTEXTUAL not in PostgresChunkStore.unsupported

    def __repr__(self) -> str:
        return f"PostgresLocation(given={redact_url(self.given)!r})"  # never the password

    @property
    def url(self) -> str:
        """The URL, stripped of surrounding blanks."""
        return self.given.strip()

    @property
    def location(self) -> str:
        """The store as the CLI hands it on: the URL as given (a ``Path`` would fold its ``//``)."""
        return self.given

    @property
    def shown(self) -> str:
        """The store as messages name it: the URL with its password replaced by ``***``."""
        return redact_url(self.given)

    def writer_lock(self, timeout: float | None) -> contextlib.AbstractContextManager[object]:
        """The store's writer lock (:func:`~langchain_ragspine.backends.postgres.lock.writer_lock`, an advisory lock
        on its schema), waiting at most ``timeout`` seconds (``None``: as long as it takes)."""
        from langchain_ragspine.backends.postgres.lock import writer_lock

        return writer_lock(self.url, timeout=timeout)

    def active_document_count(self, *, owner: str | None = None) -> int:
        """Active documents of the store (0 when the database holds none yet); with ``owner`` (e.g.
        :data:`~langchain_ragspine.backends.directory.chunk_store.INGEST_WRITER`), only those that writer owns — then
        a store that predates owners is migrated first (opened writable once, as the ingest about to write it
        would), so the count is of the documents its owners give that writer.

        Raises:
            StoreError: the server cannot be reached.
        """
        return active_document_count(self.given, owner=owner)

    def recorded_chunker(self) -> tuple[dict[str, Any] | None, bool]:
        """``(None, False)``: a PostgreSQL store records no chunker (any chunker but ``parent_child`` may write it)."""
        return None, False


#: What :func:`open_backend` returns.
StoreLocation = DirectoryLocation | PostgresLocation


def open_backend(store: str | os.PathLike[str]) -> StoreLocation:
    """The backend of ``store``: a :class:`PostgresLocation` for a ``str`` that is a ``postgresql://`` or
    ``postgres://`` URL (any case, surrounding blanks allowed), else a :class:`DirectoryLocation` of ``Path(store)``
    (a ``Path`` is always a directory).  Connects to and reads nothing.

    Raises:
        TypeError: ``store`` is neither a string nor a path (from ``Path``).
        ValueError: ``store`` is an empty or blank string (as a path, the working directory).
        ValueError: ``store`` is a string in another URL scheme (``mysql://…``, ``sqlite:///…``, ``https://…``,
            SQLAlchemy's ``postgresql+psycopg://…``): no backend serves it, and as a path it would make a directory
            named after the URL; the message names the scheme (the URL's password hidden); ``store`` is a
            PostgreSQL URL missing a slash (``postgresql:/u@h/db``, ``postgres:u@h/db``), not a directory.
    """
    if is_postgres_url(store):
        return PostgresLocation(str(store))
    if isinstance(store, str) and not store.strip():
        raise ValueError(
            "the store is empty: give a store directory or a postgresql:// URL (an empty string would be the "
            "working directory)"
        )
    if isinstance(store, str) and MALFORMED_POSTGRES_RE.match(store):
        raise ValueError(
            f"store {redact_url(store.strip())!r}: a malformed PostgreSQL URL (it needs '://': "
            "postgresql://user@host/db); as a path it would make a directory named after the URL"
        )
    if isinstance(store, str) and (scheme := URL_SCHEME_RE.match(store)):
        hint = ""
        if scheme.group(1).lower().startswith(("postgresql+", "postgres+")):
            hint = " (SQLAlchemy's spelling, with a driver: write postgresql://…)"
        raise ValueError(
            f"store {redact_url(store.strip())!r}: no backend serves {scheme.group(1)}:// URLs{hint}; a store is a "
            "directory path or a postgresql:// URL"
        )
    return DirectoryLocation(Path(store))
