"""The versioning rules both storage backends follow, in one place (issue 26, B1).

The directory store (:class:`~langchain_ragspine.backends.directory.chunk_store.ChunkStore`, SQLite) and PostgreSQL
(:class:`~langchain_ragspine.backends.postgres.chunk_store.PostgresChunkStore`) keep chunks as append-only document
versions.  What makes a version, and what a version reads back as, is decided here, above their SQL:

* **validation** of a write (:func:`check_write_args`, :func:`check_writer`, :func:`prepare_chunks`,
  :func:`check_parent_links`, :func:`nan_field`): the same arguments are refused with the same messages by both;
* **content hash** of a version (:func:`version_hash`): re-writing the current content is a no-op;
* **version state** (:func:`version_state`): the current version and whether a write changes anything;
* **owners** (:func:`owner_of_next`, :func:`attribute_history`): who owns a document after a write, and the
  attribution of versions written before owners were recorded;
* **lineage** (:data:`LINEAGE_KEYS`, :func:`lineage`, :class:`StoredChunk`, :func:`row_to_stored`,
  :func:`new_stored`): the lineage columns of a chunk row and the ``Document`` a row reads back as;
* **facets and filter values** (:data:`FACET_FIELDS`, :func:`facets_of`, :func:`facet_filters`,
  :func:`filter_values`, :func:`id_list`) and the reading API's arguments (:class:`VersionedChunkStore`);
* :func:`where_clause`, the ``WHERE`` of both stores' SQL conditions;
* **records** of the vector store (:func:`mark_record`, :func:`written_record`, :func:`written_document`,
  :func:`record_doc_id`): a record written through
  :class:`~langchain_ragspine.vectorstores.RagSpineVectorStore` reads back with exactly the metadata it was written
  with, whichever backend holds it — the lineage keys a chunk row needs are stored with a marker
  (:data:`VECTORSTORE_RECORD_KEY`) naming what was added or overwritten, and removed again on the way out;
* **merging** a vector-store write into documents' next versions (:func:`merged_versions`): a record with a known
  id is replaced in place, a new one appended, one moved to another ``doc_id`` leaves its old document.

Nothing here touches a database: a store passes its cursor (:func:`version_state`) or its rows
(:func:`row_to_stored`).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import numbers
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from langchain_core.documents import Document

from langchain_ragspine.errors import StoreError

__all__ = [
    "FACET_FIELDS",
    "INGEST_WRITER",
    "LINEAGE_KEYS",
    "READ_BACK_KEYS",
    "VECTORSTORE_RECORD_KEY",
    "VECTORSTORE_WRITER",
    "Prepared",
    "StoredChunk",
    "VersionWritten",
    "VersionedChunkStore",
    "attribute_history",
    "check_parent_links",
    "check_write_args",
    "check_writer",
    "facet_filters",
    "facets_of",
    "filter_metadata",
    "filter_values",
    "id_list",
    "lineage",
    "mark_record",
    "merged_versions",
    "nan_field",
    "new_stored",
    "owner_of_next",
    "prepare_chunks",
    "record_doc_id",
    "row_to_stored",
    "utc_now_iso",
    "version_hash",
    "version_state",
    "where_clause",
    "written_document",
    "written_record",
]

#: The writer name of ``ragspine ingest`` (:func:`~langchain_ragspine.pipeline.ingest.ingest`), the default writer of
#: :meth:`~langchain_ragspine.backends.directory.chunk_store.ChunkStore.replace_doc_chunks`.
INGEST_WRITER = "ingest"
#: The writer name of :class:`~langchain_ragspine.vectorstores.RagSpineVectorStore`.
VECTORSTORE_WRITER = "vectorstore"
#: The metadata key the vector store stores beside each record it writes (its lineage bookkeeping); the schema-4
#: migration attributes a version with such a chunk to :data:`VECTORSTORE_WRITER`.
VECTORSTORE_RECORD_KEY = "_ragspine_record"

#: Metadata keys copied into the ``facets`` table and accepted as :meth:`~langchain_ragspine.backends.directory.chunk_store.ChunkStore.iter_chunks` filters.
FACET_FIELDS: tuple[str, ...] = ("topic", "entity", "geography", "period", "language")


#: The lineage fields of a chunk: columns of both stores' chunk rows, overlaid on the metadata a row reads back
#: with (:meth:`StoredChunk.to_document`).
LINEAGE_KEYS = ("doc_id", "chunk_id", "start_index", "end_index", "source_locator", "title", "sensitivity")

# -- value type ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class StoredChunk:
    """One chunk row of a chunk store (either backend): the chunk, its lineage and its version bookkeeping.

    Attributes:
        chunk_id: ``f"{doc_id}#{i}"`` by the splitter convention; unique among active chunks.
        doc_id: the document the chunk belongs to.
        text: the chunk text (``Document.page_content``).
        start_index: char offset of ``text`` in the source document, or ``None`` if the chunk had none.
        end_index: end char offset (exclusive), or ``None``.
        source_locator: ``f"{source}#{start}-{end}"``, or ``None``.
        title: the document title, or ``None``.
        sensitivity: the sensitivity label (e.g. ``"RESTRICTED"``), or ``None``.
        metadata: the full metadata dict as given at ingest, after JSON round-tripping (``date``/``datetime``
            values are ISO-8601 strings, tuples are lists).  A fresh dict on every read.
        valid_as_of: the ``valid_as_of`` string given at ingest (``""`` when none).
        ingested_at: when the version was written, ISO-8601 in UTC (``"2025-01-31T09:00:00.000000+00:00"``).
        version: the document version this row belongs to (1-based).
        active: ``True`` for rows of the document's current version.
    """

    chunk_id: str
    doc_id: str
    text: str
    start_index: int | None
    end_index: int | None
    source_locator: str | None
    title: str | None
    sensitivity: str | None
    metadata: dict[str, Any] = field(hash=False)
    valid_as_of: str
    ingested_at: str
    version: int
    active: bool

    def to_document(self) -> Document:
        """The chunk as a LangChain ``Document`` with ``id = chunk_id``.

        ``metadata`` is the stored metadata, overlaid with the lineage fields that are not ``None``
        (``doc_id``, ``chunk_id``, ``start_index``, ``end_index``, ``source_locator``, ``title``,
        ``sensitivity``) and with ``doc_version`` (the store's version of the document; a reserved key).
        ``valid_as_of`` and ``ingested_at`` are added only when the stored metadata has no key of that name, so a
        user's own ``version`` / ``ingested_at`` front matter is never overwritten (and filters on it see the
        user's value).
        """
        return Document(page_content=self.text, metadata=self.lineage_metadata(), id=self.chunk_id)

    def lineage_metadata(self) -> dict[str, Any]:
        """A new dict: the stored metadata overlaid with the lineage, as :meth:`to_document` gives it."""
        md: dict[str, Any] = dict(self.metadata)
        for key in LINEAGE_KEYS:
            value = getattr(self, key)
            if value is not None:
                md[key] = value
        md["doc_version"] = self.version
        md.setdefault("valid_as_of", self.valid_as_of)
        md.setdefault("ingested_at", self.ingested_at)
        return md


#: One validated chunk or parent (:func:`prepare_chunks`): ``(id, text, start, end, JSON-ready metadata,
#: metadata_json)``.
Prepared = tuple[str, str, int | None, int | None, dict[str, Any], str]


# -- rules ----------------------------------------------------------------------------------------------------
def utc_now_iso() -> str:
    """Now, as both stores record a version's ``ingested_at``: ISO-8601 in UTC with microseconds
    (``"2025-01-31T09:00:00.000000+00:00"``)."""
    return _dt.datetime.now(_dt.UTC).isoformat(timespec="microseconds")


#: Types :func:`_jsonable` returns unchanged (checked by exact type first, the common case).
_JSON_SCALARS = frozenset((str, int, float, bool, type(None)))


def _jsonable(value: Any, chunk_id: str, key: str) -> Any:
    """``value`` with dates as ISO strings, tuples as lists; ``TypeError`` for what JSON cannot hold."""
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, _dt.date | _dt.time):  # datetime is a date
        return value.isoformat()
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v, chunk_id, key) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v, chunk_id, key) for v in value]
    raise TypeError(
        f"chunk {chunk_id!r}: metadata key {key!r} holds a {type(value).__name__} ({value!r}), "
        "which is not JSON-serialisable"
    )


def nan_field(metadata: Mapping[str, Any]) -> tuple[str, Any] | None:
    """The first ``(field, value)`` of ``metadata`` holding a NaN — at any depth of dicts, lists and tuples; the
    field a dotted path (``"w.deep[1]"``) — else ``None``.  A NaN is refused by every write of a store: it never
    equals itself, so no filter could match it, and it is not JSON (infinities compare as numbers and are kept)."""
    seen: set[int] = set()

    def walk(value: Any, path: str) -> tuple[str, Any] | None:
        if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
            return (path, value) if math.isnan(float(value)) else None
        if isinstance(value, Mapping | list | tuple) and id(value) not in seen:
            seen.add(id(value))
            pairs = value.items() if isinstance(value, Mapping) else enumerate(value)
            for key, item in pairs:
                found = walk(item, f"{path}.{key}" if isinstance(value, Mapping) else f"{path}[{key}]")
                if found is not None:
                    return found
        return None

    for key, value in metadata.items():
        found = walk(value, str(key))
        if found is not None:
            return found
    return None


def _facet_strings(value: Any) -> list[str]:
    """Facet strings of one metadata value: one for a scalar, one per element of a list; none for ``None``."""
    items = value if isinstance(value, list | tuple) else [value]
    out: list[str] = []
    for item in items:
        if item is None or isinstance(item, dict | list | tuple):
            continue
        s = item if isinstance(item, str) else json.dumps(item) if isinstance(item, bool) else str(item)
        if s not in out:
            out.append(s)
    return out


#: Metadata keys :func:`facets_of` reads.
_FACET_SOURCE_KEYS = frozenset((*FACET_FIELDS, "lang"))


def facets_of(metadata: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """``(field, value)`` pairs for the facet fields of (JSON-converted) chunk metadata."""
    if _FACET_SOURCE_KEYS.isdisjoint(metadata.keys()):
        return ()
    pairs: list[tuple[str, str]] = []
    for name in FACET_FIELDS:
        value = metadata.get(name)
        if value is None and name == "language":
            value = metadata.get("lang")
        pairs.extend((name, v) for v in _facet_strings(value))
    return tuple(pairs)


# What ``json.dumps(..., ensure_ascii=False)`` and the content hash's ``json.dumps`` produce, without building a
# JSONEncoder on every call.
_encode_metadata = json.JSONEncoder(ensure_ascii=False).encode
_encode_hashed = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode


def version_hash(items: Iterable[tuple[str, int | None, int | None, Mapping[str, Any]]]) -> str:
    """SHA-256 over ``(text, start_index, end_index, metadata)`` in order; metadata keys are sorted."""
    h = hashlib.sha256()
    for text, start, end, metadata in items:
        h.update(_encode_hashed([text, start, end, metadata]).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


def _optional_str(md: Mapping[str, Any], key: str) -> str | None:
    value = md.get(key)
    return None if value is None else str(value)


def _optional_int(md: Mapping[str, Any], key: str, chunk_id: str) -> int | None:
    value = md.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"chunk {chunk_id!r}: metadata {key!r} must be an int, got {value!r}")
    return value


def lineage(md: Mapping[str, Any]) -> tuple[str | None, str | None, str | None]:
    """``(source_locator, title, sensitivity)`` of a chunk's metadata: the lineage columns of both stores."""
    return _optional_str(md, "source_locator"), _optional_str(md, "title"), _optional_str(md, "sensitivity")


def new_stored(doc_id: str, version: int, item: Prepared, valid_as_of: str, ingested_at: str) -> StoredChunk:
    """The :class:`StoredChunk` a new, active chunk row reads back as (without a round trip to the database)."""
    chunk_id, text, start, end, md, _json = item
    source_locator, title, sensitivity = lineage(md)
    return StoredChunk(
        chunk_id=chunk_id, doc_id=doc_id, text=text, start_index=start, end_index=end, source_locator=source_locator,
        title=title, sensitivity=sensitivity, metadata=md, valid_as_of=valid_as_of, ingested_at=ingested_at,
        version=version, active=True,
    )


def check_write_args(doc_id: Any, valid_as_of: Any) -> str:
    """Check the ``doc_id`` and ``valid_as_of`` of a ``replace_doc_chunks`` call (both stores); return
    ``valid_as_of`` as a string (a ``date``/``datetime`` in ISO-8601).

    Raises:
        TypeError: ``doc_id`` is not a str; ``valid_as_of`` is neither a str nor a date.
        ValueError: ``doc_id`` is empty.
    """
    if not isinstance(doc_id, str):
        raise TypeError(f"doc_id must be a str, got {doc_id!r}")
    if not doc_id:
        raise ValueError("doc_id must be a non-empty string")
    if isinstance(valid_as_of, _dt.date):
        valid_as_of = valid_as_of.isoformat()
    if not isinstance(valid_as_of, str):
        raise TypeError(f"valid_as_of must be a str or a date, got {valid_as_of!r}")
    return valid_as_of


def version_state(
    cur: Any, doc_id: str, digest: str | None, *, table: str = "doc_versions", param: str = "?"
) -> tuple[int, bool]:
    """``(current version, unchanged)`` of ``doc_id``, read in the write transaction of ``cur`` from its newest
    row of ``table`` (``param``: the driver's placeholder), for a write of content hash ``digest`` (``None``: a
    retraction).  ``unchanged`` means the write is a no-op: retracting an unknown or retracted document, or
    writing the current version's content again.  The current version of an unknown document is 0."""
    latest = cur.execute(
        f"SELECT version, content_hash, retracted FROM {table} WHERE doc_id = {param} "
        "ORDER BY version DESC LIMIT 1",
        (doc_id,),
    ).fetchone()
    current = int(latest[0]) if latest else 0
    is_retracted = bool(latest[2]) if latest else True
    if digest is None:
        return current, is_retracted
    return current, not is_retracted and latest is not None and latest[1] == digest


def facet_filters(*values: str | Sequence[str] | None) -> list[tuple[str, str | Sequence[str]]]:
    """The ``iter_chunks`` facet filters that were given, as ``(field, value)`` in :data:`FACET_FIELDS` order
    (``values`` in that order; ``None`` means not given)."""
    return [(name, value) for name, value in zip(FACET_FIELDS, values, strict=True) if value is not None]


def filter_values(name: str, value: str | Sequence[str]) -> list[str]:
    """Normalise one ``iter_chunks`` filter argument to a list of strings."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return list(value)
    raise TypeError(f"filter {name!r} must be a str or a list/tuple of str, got {value!r}")


def id_list(name: str, ids: Sequence[str]) -> list[str]:
    """``ids`` as a list of str (for the lookups by id).

    Raises:
        TypeError: ``ids`` is a str, or holds a non-str.
    """
    if isinstance(ids, str):
        raise TypeError(f"{name} must be a sequence of str, not a str")
    return filter_values(name, list(ids))


def where_clause(conditions: list[str]) -> str:
    """``" WHERE a AND b"`` of SQL conditions (``""`` for none): how both stores end their reading queries.

    Example:
        >>> where_clause(["active = 1", "doc_id = ?"]), where_clause([])
        (' WHERE active = 1 AND doc_id = ?', '')
    """
    return " WHERE " + " AND ".join(conditions) if conditions else ""


def owner_of_next(live_owner: str | None, writer: str, *, retracting: bool = False) -> str:
    """The owner of a document after ``writer`` wrote a version of it — the rule of both chunk stores (the directory
    store's :meth:`~langchain_ragspine.backends.directory.chunk_store.ChunkStore.replace_doc_chunks` and the
    PostgreSQL store's).

    Args:
        live_owner: the document's owner before the write, ``None`` for a document that is new or whose current
            version is a retraction.
        writer: who writes the version (:data:`INGEST_WRITER`, :data:`VECTORSTORE_WRITER`, another name).
        retracting: the version is a retraction, which keeps the owner the document had (its writer's, when it
            had none).

    Example:
        >>> owner_of_next(None, VECTORSTORE_WRITER), owner_of_next(VECTORSTORE_WRITER, INGEST_WRITER)
        ('vectorstore', 'ingest')
        >>> owner_of_next(INGEST_WRITER, VECTORSTORE_WRITER), owner_of_next(INGEST_WRITER, VECTORSTORE_WRITER, retracting=True)
        ('ingest', 'ingest')
    """
    if retracting:
        return live_owner or writer
    if live_owner is None or writer == INGEST_WRITER:
        return writer
    return live_owner


def attribute_history(versions: Iterable[tuple[str, int, bool, str]]) -> list[tuple[str, int, str, str]]:
    """The writers and owners of document versions written before either store recorded them (their migrations).

    Args:
        versions: ``(doc_id, version, retracted, writer)`` in ``(doc_id, version)`` order, ``writer`` being who
            wrote a version that is not a retraction (as the store can tell; ignored for a retraction, which is
            attributed to the document's owner, else to :data:`INGEST_WRITER`).

    Returns:
        ``(doc_id, version, writer, owner)`` per version, in the same order; owners follow :func:`owner_of_next`
        along each document's history.

    Example:
        >>> attribute_history([("n", 1, False, "vectorstore"), ("n", 2, True, "ingest"), ("n", 3, False, "ingest")])
        [('n', 1, 'vectorstore', 'vectorstore'), ('n', 2, 'vectorstore', 'vectorstore'), ('n', 3, 'ingest', 'ingest')]
    """
    out: list[tuple[str, int, str, str]] = []
    owner: str | None = None
    live = False
    last_doc: str | None = None
    for doc_id, version, retracted, written_by in versions:
        if doc_id != last_doc:
            last_doc, owner, live = doc_id, None, False
        if retracted:
            writer = owner or INGEST_WRITER
            live = False
        else:
            writer = written_by
            owner = owner_of_next(owner if live else None, writer)
            live = True
        out.append((doc_id, int(version), writer, owner or writer))
    return out


class VersionWritten(NamedTuple):
    """One document version as the change feed (:meth:`~langchain_ragspine.backends.directory.chunk_store.ChunkStore.versions_since`) lists it."""

    generation: int  # the chunk-store generation its transaction made
    doc_id: str
    version: int
    writer: str | None  # who wrote it (``None``: written before schema 4)
    retracted: bool


def check_parent_links(doc_id: str, prepared: Sequence[Prepared], parent_ids: set[str]) -> None:
    """``ValueError`` naming the first chunk whose ``parent_id`` is set but not among ``parent_ids``."""
    for chunk_id, *_, md, _json in prepared:
        pid = md.get("parent_id")
        if pid is not None and str(pid) not in parent_ids:
            raise ValueError(f"chunk {chunk_id!r} of doc_id {doc_id!r} names parent {pid!r}, which is not among its parents")




def check_writer(writer: Any) -> str:
    """``writer`` (who writes a version: :data:`INGEST_WRITER`, :data:`VECTORSTORE_WRITER` or another name) once
    checked, as both stores' ``replace_doc_chunks`` check it.

    Raises:
        ValueError: ``writer`` is not a non-empty string.
    """
    if not isinstance(writer, str) or not writer:
        raise ValueError(f"writer must be a non-empty string, got {writer!r}")
    return writer


def prepare_chunks(
    doc_id: str, chunks: list[Document], *, what: str = "chunks", id_key: str = "chunk_id"
) -> list[Prepared]:
    """The chunks of one document version, validated as both stores validate them, as :data:`Prepared` tuples
    ``(id, text, start, end, JSON-ready metadata, metadata_json)`` in the given order (parents:
    ``id_key="parent_id"``, falling back to ``chunk_id``, then ``Document.id``)::

        prepared = prepare_chunks("law-1", splitter.split_documents([doc]))
        digest = version_hash((p[1], p[2], p[3], p[4]) for p in prepared)

    Raises:
        TypeError: an element is not a ``Document``; a metadata value is not JSON-serialisable (chunk and key named).
        ValueError: a chunk without an id; its ``metadata["doc_id"]`` is not ``doc_id``; an id given twice;
            ``start_index`` / ``end_index`` not ints; a NaN metadata value (field named).
    """
    out: list[Prepared] = []
    seen: set[str] = set()
    for i, doc in enumerate(chunks):
        if not isinstance(doc, Document):
            raise TypeError(f"{what}[{i}] must be a langchain_core Document, got {type(doc).__name__}")
        raw_id = doc.metadata.get(id_key) or doc.metadata.get("chunk_id", doc.id)
        if raw_id is None or raw_id == "":
            raise ValueError(
                f"{what}[{i}] of doc_id {doc_id!r} has no metadata {id_key!r} (and no Document.id)"
            )
        chunk_id = str(raw_id)
        md_doc_id = doc.metadata.get("doc_id")
        if md_doc_id != doc_id:
            raise ValueError(f"chunk {chunk_id!r} has metadata doc_id {md_doc_id!r}, expected {doc_id!r}")
        if chunk_id in seen:
            raise ValueError(
                f"{id_key} {chunk_id!r} appears more than once in the {what} for doc_id {doc_id!r}"
            )
        seen.add(chunk_id)
        md = {
            str(k): v if type(v) in _JSON_SCALARS else _jsonable(v, chunk_id, str(k))
            for k, v in doc.metadata.items()
        }
        start = _optional_int(md, "start_index", chunk_id)
        end = _optional_int(md, "end_index", chunk_id)
        md_json = _encode_metadata(md)
        nan = nan_field(md) if "NaN" in md_json else None  # the walk runs only when the token may be there
        if nan is not None:
            raise ValueError(
                f"chunk {chunk_id!r}: metadata {nan[0]!r} holds {nan[1]!r}, which cannot be stored: NaN never "
                "equals itself, so no filter could match it (and it is not JSON); store None instead"
            )
        out.append((chunk_id, doc.page_content, start, end, md, md_json))
    return out



def row_to_stored(row: Sequence[Any], *, path: str | Path | None = None) -> StoredChunk:
    """A :class:`StoredChunk` from the first 15 values of a chunk row (``id, chunk_id, doc_id, version, position,
    text, start_index, end_index, source_locator, title, sensitivity, metadata_json, valid_as_of, ingested_at,
    active``) — the row layout of both store backends.

    Raises:
        StoreError: ``metadata_json`` is not JSON (naming the row and ``path``).
    """
    (rowid, chunk_id, doc_id, version, _position, text, start, end, locator, title, sensitivity, md_json,
     valid_as_of, ingested_at, active) = row[:15]  # fmt: skip
    try:
        md = json.loads(md_json)
    except json.JSONDecodeError as e:
        raise StoreError(f"chunk row {rowid} ({chunk_id!r}): metadata_json is not JSON: {e}", path=path) from e
    return StoredChunk(
        chunk_id=chunk_id,
        doc_id=doc_id,
        text=text,
        start_index=start,
        end_index=end,
        source_locator=locator,
        title=title,
        sensitivity=sensitivity,
        metadata=md if isinstance(md, dict) else {},
        valid_as_of=valid_as_of or "",
        ingested_at=ingested_at,
        version=int(version),
        active=bool(active),
    )


class VersionedChunkStore:
    """The base of both chunk stores (:class:`~langchain_ragspine.backends.directory.chunk_store.ChunkStore`, SQLite;
    :class:`~langchain_ragspine.backends.postgres.chunk_store.PostgresChunkStore`): the reading API's arguments,
    checked once above their SQL.  A subclass implements ``_select_chunks(doc_id, facets, include_inactive)``
    (``facets`` as :func:`facet_filters` gives them) and gets :meth:`iter_chunks`::

        class MyStore(VersionedChunkStore):
            def _select_chunks(self, doc_id, facets, include_inactive):
                ...  # one query; an iterator of StoredChunk
    """

    def _select_chunks(
        self, doc_id: str | Sequence[str] | None, facets: list[tuple[str, str | Sequence[str]]], include_inactive: bool
    ) -> Iterator[StoredChunk]:  # pragma: no cover - every store overrides it
        raise NotImplementedError

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
        """Yield stored chunks matching every given filter, ordered by ``doc_id`` (by code point), ``version``,
        chunk position.

        Filters are ANDed and evaluated in SQL.  Each is a str or a list/tuple of str (any of them matches; an
        empty list matches nothing).  ``topic``/``entity``/``geography``/``period``/``language`` match the
        chunk metadata key of the same name (``language`` falls back to ``lang``); a list-valued metadata
        field matches when any element matches; non-string scalars compare by ``str(value)``.  A chunk without
        the field never matches.

        Args:
            doc_id: restrict to these documents.
            topic, entity, geography, period, language: facet filters (see above).
            include_inactive: also yield rows of superseded and retracted versions (the history).

        Returns:
            An iterator of :class:`StoredChunk`; the rows are read in one query when iteration starts (a
            snapshot: later writes do not show up in an iteration already begun).

        Raises:
            TypeError: a filter is neither a str nor a list/tuple of str.
            StoreError: the store is closed or its database fails.
        """
        facets = facet_filters(topic, entity, geography, period, language)
        return self._select_chunks(doc_id, facets, include_inactive)




# -- records of the vector store --------------------------------------------------------------------------------
#: The keys :meth:`StoredChunk.to_document` adds to a chunk's stored metadata besides the lineage keys: a backend
#: whose searches read rows back through it (PostgreSQL) marks them too (:func:`mark_record` ``also=``), so
#: :func:`written_document` removes them again.
READ_BACK_KEYS: tuple[str, ...] = ("doc_version", "valid_as_of", "ingested_at")


def record_doc_id(record: Document) -> str:
    """The document a vector-store record belongs to: ``metadata["doc_id"]`` when a non-empty string, else the
    record's own id (a one-record document)."""
    value = record.metadata.get("doc_id")
    return value if isinstance(value, str) and value else str(record.id)


def mark_record(record: Document, *, also: Sequence[str] = ()) -> Document:
    """``record`` (its ``id`` set) in the form a chunk store takes: the lineage keys ``doc_id``
    (:func:`record_doc_id`) and ``chunk_id`` (the id) set, and under :data:`VECTORSTORE_RECORD_KEY` what the
    record's own metadata lacked (``added``) or had otherwise (``replaced``: the original values) — so that
    :func:`written_record` / :func:`written_document` give back exactly the metadata written.  ``also``: further
    keys the backend's read path adds (:data:`READ_BACK_KEYS` for one reading rows back with
    :meth:`StoredChunk.to_document`), recorded as added or, when present, replaced.

    Example:
        >>> md = mark_record(Document("x", id="a", metadata={"lang": "ja"})).metadata
        >>> md["doc_id"], md["chunk_id"], md[VECTORSTORE_RECORD_KEY]
        ('a', 'a', {'added': ['doc_id', 'chunk_id'], 'replaced': {}})

    Raises:
        ValueError: the record's metadata uses the reserved key :data:`VECTORSTORE_RECORD_KEY`.
    """
    if VECTORSTORE_RECORD_KEY in record.metadata:
        raise ValueError(f"metadata key {VECTORSTORE_RECORD_KEY!r} is reserved (record {record.id!r})")
    md = dict(record.metadata)
    ids = {"doc_id": record_doc_id(record), "chunk_id": str(record.id)}
    added = [key for key in (*ids, *also) if key not in md]
    replaced = {key: md[key] for key in ids if key in md and md[key] != ids[key]}
    replaced.update({key: md[key] for key in also if key in md})
    md.update(ids)
    md[VECTORSTORE_RECORD_KEY] = {"added": added, "replaced": replaced}
    return Document(page_content=record.page_content, metadata=md, id=str(record.id))


def _unmarked(metadata: Mapping[str, Any]) -> dict[str, Any] | None:
    """``metadata`` without the marker's additions, with its replaced values back; ``None``: no marker."""
    md = dict(metadata)
    mark = md.pop(VECTORSTORE_RECORD_KEY, None)
    if not isinstance(mark, dict):
        return None
    for key in mark.get("added", []):
        md.pop(key, None)
    md.update(mark.get("replaced", {}))
    return md


def filter_metadata(chunk: StoredChunk) -> dict[str, Any]:
    """The metadata a filter sees for a stored chunk — one rule for every backend and every writer: the chunk's
    metadata as :meth:`StoredChunk.to_document` gives it (the stored metadata, overlaid with the lineage columns
    ``doc_id``, ``chunk_id``, ``source_locator``, … and ``doc_version``; ``valid_as_of`` / ``ingested_at`` where the
    metadata has no key of that name), without the vector store's bookkeeping key :data:`VECTORSTORE_RECORD_KEY`.

    So a vector-store record is found by ``{"doc_id": …}`` (the document it belongs to: :func:`record_doc_id`) and
    ``{"ingested_at": {"gte": …}}`` although :func:`written_record` returns only the metadata written, exactly as
    a chunk ``ragspine ingest`` wrote is.

    Example:
        >>> c = new_stored("d", 1, ("d#0", "x", None, None, {"lang": "ja"}, "{}"), "", "2025-01-31T09:00:00+00:00")
        >>> sorted(filter_metadata(c).items())  # doctest: +NORMALIZE_WHITESPACE
        [('chunk_id', 'd#0'), ('doc_id', 'd'), ('doc_version', 1), ('ingested_at', '2025-01-31T09:00:00+00:00'),
         ('lang', 'ja'), ('valid_as_of', '')]
    """
    md = chunk.lineage_metadata()
    md.pop(VECTORSTORE_RECORD_KEY, None)
    return md


def written_record(chunk: StoredChunk) -> Document:
    """A stored chunk as the vector store returns it: a record it wrote (:func:`mark_record`) with exactly the
    metadata written, any other chunk (``ragspine ingest``'s) as :meth:`StoredChunk.to_document` gives it."""
    md = _unmarked(chunk.metadata)
    if md is None:
        return chunk.to_document()
    return Document(page_content=chunk.text, metadata=md, id=chunk.chunk_id)


def written_document(doc: Document) -> Document:
    """:func:`written_record` of a row already read back as ``doc`` (:meth:`StoredChunk.to_document`, marked with
    ``also=READ_BACK_KEYS``); ``doc`` itself when it carries no marker."""
    md = _unmarked(doc.metadata)
    if md is None:
        return doc
    return Document(page_content=doc.page_content, metadata=md, id=doc.id)


def merged_versions(
    records: Sequence[Document], active: Iterable[StoredChunk], *, delete: Iterable[str] = ()
) -> dict[str, list[Document]]:
    """The next version of every document a vector-store write touches, as chunk ``Document``\\ s (records through
    :func:`mark_record` are the caller's business: ``records`` are put as given).

    ``active``: the current chunks of the documents of ``records`` (:func:`record_doc_id`) and of those holding
    their ids or the ids in ``delete`` now.  A record whose id a document holds replaces it in place; a new one is
    appended to its document; one whose id another document holds leaves that one; ids in ``delete`` leave their
    documents.  A document left with no chunk maps to ``[]`` (retracted).  Kept chunks are
    ``Document(text, stored metadata, id)``.  The last of repeated ids wins.
    """
    rows: dict[str, list[StoredChunk]] = {}
    for c in active:
        rows.setdefault(c.doc_id, []).append(c)
    put: dict[str, dict[str, Document]] = {}
    for record in records:
        for group in put.values():
            group.pop(str(record.id), None)
        put.setdefault(record_doc_id(record), {})[str(record.id)] = record
    put_ids = {cid: doc_id for doc_id, group in put.items() for cid in group}
    gone = set(delete)
    out: dict[str, list[Document]] = {}
    for doc_id in sorted(set(rows) | set(put)):
        mine = put.get(doc_id, {})
        chunks: list[Document] = []
        changed = False
        for c in rows.get(doc_id, []):
            if c.chunk_id in mine:
                chunks.append(mine[c.chunk_id])
                changed = True
            elif c.chunk_id in gone or c.chunk_id in put_ids:
                changed = True  # deleted, or moved to another document
            else:
                chunks.append(Document(page_content=c.text, metadata=dict(c.metadata), id=c.chunk_id))
        known = {c.chunk_id for c in rows.get(doc_id, [])}
        new = [d for cid, d in mine.items() if cid not in known]
        if changed or new:
            out[doc_id] = chunks + new
    return out
