"""The backend interface: what a storage backend of the package does, whichever holds the chunks (issue 26, B1).

A backend keeps chunks as append-only **document versions** and searches the current ones.  Two implementations,
one folder each:

* the directory store (:mod:`langchain_ragspine.backends.directory`): the versioned SQLite
  :class:`~langchain_ragspine.backends.directory.chunk_store.ChunkStore` (a :class:`ChunkBackend`), searched through
  in-memory indexes rebuilt from it (:class:`~langchain_ragspine.backends.directory.indexes.IndexSnapshot`, a
  :class:`SearchBackend`) or the files ``ragspine ingest`` writes beside it;
* PostgreSQL (:mod:`langchain_ragspine.backends.postgres`):
  :class:`~langchain_ragspine.backends.postgres.chunk_store.PostgresChunkStore` (a :class:`ChunkBackend`) whose
  search tables are written in the same transactions, searched in SQL
  (:class:`~langchain_ragspine.backends.postgres.search.PostgresSearch`, a :class:`SearchBackend`).

The interface is two ``typing.Protocol`` classes — structural, as Haystack 2.x's ``DocumentStore`` protocol: a
backend need not inherit anything, it has the methods (``isinstance(store, ChunkBackend)`` checks their presence,
``tests/unit_tests/test_backend_contract.py`` their behaviour, the same assertions on both backends):

* :class:`ChunkBackend` — **write versions** (``replace_doc_chunks``: a new version of one document, atomically; a
  no-op when the content is the current version's), **retract** (``replace_doc_chunks(doc_id, [])``), **iterate the
  active chunks** (``iter_chunks``, facet filters compiled to the backend's SQL), **get by ids** (``get_chunks``),
  **parents** (``get_parents``; a backend that keeps none says so in :attr:`ChunkBackend.unsupported` and refuses
  them by name, :func:`refuse`), the **generation** counter every write bumps, and which ids search may still
  return (``served_ids``).  The rules of a version (content hash, owners, lineage, facets, validation) are not the
  backends' own: both follow :mod:`langchain_ragspine.backends.versioning`.
* :class:`SearchBackend` — **lexical search** (BM25) and **vector search** (cosine over unit vectors, also with the
  stored vectors for MMR) over the active chunks that are not RESTRICTED, with **filters compiled by the backend**:
  the caller passes the package's filter dict (:mod:`langchain_ragspine.filters`), the directory backend compiles
  it to row masks in memory, PostgreSQL to SQL applied inside the query (:mod:`langchain_ragspine.filters.sql`).
  Results are ``(Document, score)`` pairs, best first, ties by ``chunk_id``, at most ``k``.

* :class:`StoreBackend` — what :class:`~langchain_ragspine.vectorstores.RagSpineVectorStore` runs over: records
  (``Document`` objects whose ``id`` is their ``chunk_id``) **upserted** and **deleted** as new document versions (one
  transaction per call), **read by id**, and **searched** (:meth:`StoreBackend.search`: a :class:`SearchBackend` of
  the current state), each record read back with exactly the metadata it was written with
  (:func:`~langchain_ragspine.backends.versioning.mark_record`).  The directory store's is
  :class:`~langchain_ragspine.backends.directory.backend.DirectoryBackend`, PostgreSQL's
  :class:`~langchain_ragspine.backends.postgres.backend.PostgresBackend`.

Why a protocol: what sits above storage (the vector store, the retrievers, ingest) is written once against it,
and a feature one backend lacks is refused by name in one place (:attr:`ChunkBackend.unsupported`) instead of by
an ``isinstance`` test at each call site.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
from langchain_core.documents import Document

from langchain_ragspine.backends.versioning import INGEST_WRITER, StoredChunk
from langchain_ragspine.errors import StoreError
from langchain_ragspine.served import ServedIds

__all__ = ["CONTEXTUAL", "GRAPH", "MMR", "PARENTS", "SPARSE", "RAPTOR", "ChunkBackend", "SearchBackend", "StoreBackend", "check_vector_model", "refuse"]

#: The feature name of parent-child chunking's parents (:attr:`ChunkBackend.unsupported`).
PARENTS = "parents"
#: The feature name of contextual chunk headers (``ingest(contextual=True)``, ``--contextual``; recorded in a store
#: directory's ``index.json``).
CONTEXTUAL = "contextual headers"
#: The feature name of maximal marginal relevance search (:attr:`StoreBackend.unsupported`; both backends have it).
MMR = "maximal marginal relevance search"
#: The feature name of the relation graph (``ingest(graph=...)``, mode ``graph``; a store directory's ``graph.json``).
GRAPH = "relation graph"
#: The feature name of a learned-sparse channel (:mod:`langchain_ragspine.retrievers.sparse`).
SPARSE = "learned sparse retrieval"
#: The feature name of the RAPTOR tree (``ingest(raptor=...)``, mode ``raptor``; a store directory's ``raptor.json``).
RAPTOR = "RAPTOR tree"


@runtime_checkable
class ChunkBackend(Protocol):
    """Versioned chunk storage: what both chunk stores do (see the module docstring).

    Usage, whichever backend ``store`` is::

        version = store.replace_doc_chunks("law-1", chunks, writer="ingest")   # a new version (1, 2, …)
        store.replace_doc_chunks("law-1", [])                                  # retracted (a version too)
        active = list(store.iter_chunks(language="ja"))                        # StoredChunk, current versions
        found = store.get_chunks(["law-2#0"])                                  # {chunk_id: StoredChunk}
        store.generation                                                       # bumped by every write

    Attributes:
        unsupported: ``{feature: why}`` — what this backend refuses (e.g. :data:`PARENTS` on PostgreSQL), each
            reason naming what to use instead; empty when it does everything.  :func:`refuse` raises with it.
    """

    unsupported: Mapping[str, str]

    @property
    def read_only(self) -> bool:
        """Whether every write is refused (``StoreError``)."""
        ...

    @property
    def generation(self) -> int:
        """A counter bumped by every committed write (any process's); a no-op write leaves it."""
        ...

    def replace_doc_chunks(
        self,
        doc_id: str,
        chunks: Iterable[Document],
        valid_as_of: str | _dt.date = "",
        *,
        parents: Iterable[Document] | None = None,
        writer: str = INGEST_WRITER,
    ) -> int:
        """Make ``chunks`` the current version of ``doc_id`` atomically (``[]``: retract it); returns the
        document's version after the call (unchanged for a no-op, ``0`` for retracting an unknown document).
        ``parents``: parent-child chunking's parents (refused by a backend listing :data:`PARENTS` in
        :attr:`unsupported`, unless empty)."""
        ...

    def iter_chunks(
        self,
        *,
        doc_id: str | Sequence[str] | None = None,
        topic: str | Sequence[str] | None = None,
        entity: str | Sequence[str] | None = None,
        geography: str | Sequence[str] | None = None,
        period: str | Sequence[str] | None = None,
        language: str | Sequence[str] | None = None,
        include_inactive: bool = False,
    ) -> Iterator[StoredChunk]:
        """The chunks of the current versions (all versions with ``include_inactive``) matching every facet filter,
        ordered by ``doc_id`` (code point), version, position — RESTRICTED ones included (this is storage)."""
        ...

    def get_chunks(self, chunk_ids: Sequence[str]) -> dict[str, StoredChunk]:
        """The active chunks among ``chunk_ids``, by id; an id without one is absent (RESTRICTED ones included)."""
        ...

    def get_parents(self, parent_ids: Sequence[str]) -> dict[str, StoredChunk]:
        """The active parents among ``parent_ids``, by id (``{}`` in a backend that keeps none)."""
        ...

    def served_ids(self, ids: Sequence[str]) -> ServedIds:
        """Which of ``ids`` search may return now (active, not RESTRICTED) and which it no longer may."""
        ...

    def doc_ids(self, *, include_retracted: bool = False, owner: str | None = None) -> list[str]:
        """Sorted ids of the stored documents (those ``owner`` owns, when given)."""
        ...

    def current_version(self, doc_id: str) -> int | None:
        """The newest version of ``doc_id`` (a retraction counts), ``None`` if unknown."""
        ...

    def count_chunks(self, *, doc_id: str | Sequence[str] | None = None, include_inactive: bool = False) -> int:
        """Number of active chunk rows (all rows with ``include_inactive``)."""
        ...

    def close(self) -> None:
        """Release the store (idempotent)."""
        ...


@runtime_checkable
class SearchBackend(Protocol):
    """Search over a backend's active, not RESTRICTED chunks (see the module docstring).

    Usage, whichever backend ``search`` is::

        search.lexical_search("梅雨 六月", 4, {"lang": "ja"})          # [(Document, BM25 score)], best first
        search.vector_search(query_vector, 4, {"lang": "ja"})          # [(Document, cosine)]
        search.vector_search_with_vectors(query_vector, 20)            # [(Document, cosine, stored vector)]

    ``filter`` is the package's filter dict (:mod:`langchain_ragspine.filters`), compiled by the backend and applied
    before ranking; a malformed one raises ``ValueError`` / ``TypeError``.  Results are copies of the stored chunks
    (``Document.id`` = ``chunk_id``), at most ``k``, best first, ties by ``chunk_id``; an empty query finds nothing.
    """

    def lexical_search(
        self, query: str, k: int, filter: Mapping[str, Any] | None = None, *, score_threshold: float | None = None
    ) -> list[tuple[Document, float]]:
        """The ``k`` best chunks by BM25 (Lucene variant; only chunks sharing a query token, score > 0, and
        ``>= score_threshold`` when given)."""
        ...

    def vector_search(
        self, vector: Sequence[float] | np.ndarray, k: int, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[Document, float]]:
        """The ``k`` chunks whose vectors are most similar (cosine) to the query ``vector`` (shape ``(d,)``)."""
        ...

    def vector_search_with_vectors(
        self, vector: Sequence[float] | np.ndarray, k: int, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[Document, float, np.ndarray]]:
        """:meth:`vector_search` with each hit's stored unit vector (the candidates of MMR)."""
        ...


@runtime_checkable
class StoreBackend(Protocol):
    """The records of a :class:`~langchain_ragspine.vectorstores.RagSpineVectorStore` (see the module docstring).

    Usage, whichever backend ``backend`` is::

        backend.upsert([Document("梅雨は六月から。", id="tsuyu", metadata={"lang": "ja"})])
        backend.get_by_ids(["tsuyu"])                           # [Document(id="tsuyu", metadata={"lang": "ja"})]
        backend.search().vector_search(vector, 4, {"lang": "ja"})  # [(record, cosine)], best first
        backend.delete(["tsuyu"])

    A record belongs to the document ``metadata["doc_id"]`` when that is a non-empty string, else to a document of
    its own (``doc_id`` = its id); a write re-versions each document it touches
    (:func:`~langchain_ragspine.backends.versioning.merged_versions`).  RESTRICTED records may be stored; the
    vector store gates every exit.

    Attributes:
        unsupported: ``{feature: why}`` — what this backend refuses (:func:`refuse`), e.g. :data:`MMR`; empty when
            it does everything.
        embedding: the model of the backend's vectors (written records are embedded with it).
    """

    unsupported: Mapping[str, str]
    embedding: Any

    @property
    def where(self) -> str | None:
        """Where the records are, for messages (a path, a URL without its password); ``None``: unknown."""
        ...

    def upsert(self, records: Sequence[Document]) -> None:
        """Insert or replace ``records`` by id (every ``id`` set, each once), one transaction: all or nothing."""
        ...

    def delete(self, ids: Sequence[str]) -> None:
        """Remove the records with these ids (unknown ids ignored), one transaction."""
        ...

    def get_by_ids(self, ids: Sequence[str]) -> list[Document]:
        """The current records with these ids, in the order asked (unknown ids left out)."""
        ...

    def search(self) -> SearchBackend:
        """Search over the current records (results: the records as written, ``Document.id`` set)."""
        ...

    def close(self) -> None:
        """Release the backend (idempotent)."""
        ...


def refuse(backend: object, feature: str) -> None:
    """Refuse ``feature`` on ``backend`` when its ``unsupported`` mapping lists it (the one place a backend's
    missing feature is refused by name); a backend without the attribute supports everything::

        refuse(store, PARENTS)   # ValueError on PostgreSQL: "a PostgreSQL store does not support parents: …"

    The subject is the backend's ``backend_name`` (one for every class of a backend: its chunk store, its
    ``StoreBackend``, its location and its retriever source), else its class name.

    Raises:
        ValueError: ``feature`` is in ``backend.unsupported``; the message names the feature, the backend and what
            to use instead.
    """
    why = dict(getattr(backend, "unsupported", None) or {}).get(feature)
    if why is not None:
        name = getattr(backend, "backend_name", None) or type(backend).__name__
        raise ValueError(f"{name} does not support {feature}: {why}")


def check_vector_model(saved: str | None, key: str, where: str | None) -> None:
    """The one rule of every backend for a store opened with an embedding model: a store records the model its
    vectors were made with (the first write that stores vectors, and every ``ragspine ingest --embedding …``, which
    re-embeds and so switches the store); a backend opened with another model (cache key ``key``,
    :func:`~langchain_ragspine.embeddings.cache.model_key_for`) is refused — never searched with vectors of two
    models, never silently re-embedded.  ``saved``: the recorded key (``None``: none recorded, any model may open
    it); ``where``: the store, for the message.

    Example:
        >>> check_vector_model(None, "hashing-64", "/tmp/s")
        >>> check_vector_model("e5-small", "hashing-64", "/tmp/s")
        Traceback (most recent call last):
        ...
        langchain_ragspine.errors.StoreError: /tmp/s: this store's vectors were made with e5-small, not hashing-64; open it with that model, or re-ingest with the model you want (`ragspine ingest PATH --store STORE --embedding SPEC`: documents other writers added are kept and embedded too)

    Raises:
        StoreError: ``saved`` is another key; the message names both models and how to switch.
    """
    if saved is not None and saved != key:
        raise StoreError(
            f"this store's vectors were made with {saved}, not {key}; open it with that model, or re-ingest with "
            "the model you want (`ragspine ingest PATH --store STORE --embedding SPEC`: documents other writers "
            "added are kept and embedded too)",
            path=where,
        )
