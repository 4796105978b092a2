"""A versioned SQLite chunk store: each ingest of a document is a new version; old versions stay as history.

:class:`ChunkStore` keeps the chunk ``Document``\\ s produced by the text splitters in one SQLite file (stdlib
``sqlite3``, no server).  It is the source of truth that derived indexes (BM25, vectors) are rebuilt from.

Design:

* **Append-only versioned rows.**  :meth:`ChunkStore.replace_doc_chunks` never updates a chunk's content: it
  inserts the new chunks of a document as version ``max(version) + 1`` with ``active = 1`` and flips the
  previous rows of that document to ``active = 0``, all in one ``BEGIN IMMEDIATE … COMMIT`` transaction.
  Readers see either the old version or the new one, never a mix.  Old rows stay in the table, so
  ``iter_chunks(include_inactive=True)`` shows the history.
* **Soft retraction.**  Replacing a document with no chunks deactivates its rows and records a new version
  number (marked retracted in ``doc_versions``), so the retraction itself is visible in the history.
* **Idempotent re-ingest.**  Each document version stores a SHA-256 of its chunks (texts, offsets and
  metadata, in order); re-ingesting identical content writes nothing and keeps the version number.
* **Batched commits.**  Inside :meth:`ChunkStore.write_batch` (what ``ingest`` uses) each document's replacement
  is a savepoint of a transaction that commits every 1,000 documents or 0.5 s and at the end: every document is
  still all or nothing, readers see whole documents only, and a crash loses at most the documents since the last
  commit — each of them keeps its previous version.  The rows are exactly those of one transaction per document.
* **WAL journal.**  The file runs in write-ahead-log mode (``synchronous=NORMAL``): readers never block the
  writer and the writer never blocks readers, and a process killed mid-transaction (even by ``SIGKILL``)
  leaves every committed version intact — uncommitted WAL frames are ignored when the file is next opened (see
  https://www.sqlite.org/wal.html and https://www.sqlite.org/atomiccommit.html).
* **Facets in their own table.**  ``topic``, ``entity``, ``geography``, ``period`` and ``language`` (falling
  back to ``lang``) are copied from chunk metadata into ``facets(chunk_row, field, value)``, one row per value
  (a list-valued metadata field gives several rows), so :meth:`ChunkStore.iter_chunks` filters in SQL with
  ``EXISTS`` before any scoring happens.
* **Generation counter.**  ``meta.generation`` is bumped inside every transaction that writes; a derived index
  records the generation it was built from and rebuilds when :attr:`ChunkStore.generation` differs.
* **Store id.**  ``meta.store_id`` is a random id (``uuid4().hex``) written when the store is created, so two
  stores of the same generation are told apart (:mod:`langchain_ragspine.backends.directory.follow`: another
  store copied over this one in place, same file and generation).  A store created before it existed gets one at
  its next writable open (never at a read-only one); until then :attr:`ChunkStore.store_id` is ``None``.
* **Writers and owners.**  Every document version records its ``writer`` (:data:`INGEST_WRITER` for ``ragspine
  ingest``, :data:`VECTORSTORE_WRITER` for :class:`~langchain_ragspine.vectorstores.RagSpineVectorStore`, or any
  other name a caller passes) and the document's ``owner``: the writer that created the document, taken over by
  ``ingest`` once it writes a version.  ``ingest`` retracts only the documents it owns (:meth:`ChunkStore.doc_ids`
  with ``owner=``), so what another writer added survives a re-ingest of the corpus.
* **Change feed.**  Every version also records the generation its transaction made
  (``doc_versions.generation``, indexed): :meth:`ChunkStore.versions_since` lists what was written after a
  generation, so a derived index kept in memory updates only the documents written since it was built instead
  of reading the whole store again.
* **Additive migrations.**  ``meta.schema_version`` records the schema; opening an older file (writable)
  creates the missing tables, adds missing columns with ``ALTER TABLE … ADD COLUMN`` and backfills them, never
  dropping rows.

All SQL is parameterised; table and column names come only from constants in this module.

Schema history:

* **1** — ``meta(key, value)`` and ``chunks(id, chunk_id, doc_id, version, position, text, start_index,
  end_index, source_locator, title, metadata_json, ingested_at, active)``.
* **2** — adds ``chunks.sensitivity`` and ``chunks.valid_as_of``, the ``doc_versions`` table (content hash and
  retraction marker per document version) and the ``facets`` table.
* **3** — adds the ``parents`` table (the parent passages of parent-child chunking, versioned with their
  document: written, deactivated and hashed in the same transaction as its chunks) and the ``meta.chunker`` record
  (which chunker and parameters built the store).  A version-2 file opens read-only as it is (it has no parents
  and no chunker record); one writable open migrates it.
* **4** — adds ``doc_versions.writer``, ``doc_versions.owner`` and ``doc_versions.generation`` (and an index on
  the last).  The migration attributes every existing version: to :data:`VECTORSTORE_WRITER` when one of its
  chunks carries the vector store's record marker (:data:`VECTORSTORE_RECORD_KEY` in its metadata), else to
  :data:`INGEST_WRITER`, and derives the owners from that history; the generations of existing versions stay
  ``NULL`` (unknown: older than every generation written after the migration).  A version-3 file opens
  read-only as it is.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import sqlite3
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from langchain_core.documents import Document

from langchain_ragspine.backends.directory._sqlite import SQLiteFile
from langchain_ragspine.backends.versioning import (
    FACET_FIELDS,
    INGEST_WRITER,
    VECTORSTORE_RECORD_KEY,
    VECTORSTORE_WRITER,
    Prepared,
    StoredChunk,
    VersionedChunkStore,
    VersionWritten,
    attribute_history,
    check_parent_links,
    check_write_args,
    check_writer,
    facets_of,
    filter_values,
    id_list,
    lineage,
    nan_field,
    owner_of_next,
    prepare_chunks,
    row_to_stored,
    utc_now_iso,
    version_hash,
    version_state,
    where_clause,
)
from langchain_ragspine.errors import StoreError
from langchain_ragspine.sensitivity import is_restricted
from langchain_ragspine.served import ServedIds

__all__ = [
    "FACET_FIELDS",
    "INGEST_WRITER",
    "SCHEMA_VERSION",
    "VECTORSTORE_RECORD_KEY",
    "VECTORSTORE_WRITER",
    "ChunkStore",
    "StoredChunk",
    "VersionWritten",
    "attribute_history",
    "nan_field",
    "owner_of_next",
]

#: Current schema version written to ``meta.schema_version``.
SCHEMA_VERSION = 4

#: The oldest schema a read-only open accepts without migrating (what it lacks reads as empty).
_READABLE_SCHEMA = 2

# -- schema --------------------------------------------------------------------------------------------------
def _passage_table_ddl(table: str, id_column: str) -> str:
    """The DDL of a table of versioned passages: ``chunks`` (id column ``chunk_id``) and, from schema 3, ``parents``
    (``parent_id``) have the same columns and constraints."""
    return f"""CREATE TABLE IF NOT EXISTS {table} (
        id             INTEGER PRIMARY KEY AUTOINCREMENT,
        {id_column:<15}TEXT    NOT NULL,
        doc_id         TEXT    NOT NULL,
        version        INTEGER NOT NULL,
        position       INTEGER NOT NULL,
        text           TEXT    NOT NULL,
        start_index    INTEGER,
        end_index      INTEGER,
        source_locator TEXT,
        title          TEXT,
        sensitivity    TEXT,
        metadata_json  TEXT    NOT NULL,
        valid_as_of    TEXT    NOT NULL DEFAULT '',
        ingested_at    TEXT    NOT NULL,
        active         INTEGER NOT NULL DEFAULT 1 CHECK (active IN (0, 1)),
        UNIQUE (doc_id, version, {id_column}),
        FOREIGN KEY (doc_id, version) REFERENCES doc_versions (doc_id, version)
    )"""


# Every statement is idempotent (IF NOT EXISTS) so the same list creates a fresh file and completes an older
# one.
_SCHEMA_DDL: tuple[str, ...] = (
    """CREATE TABLE IF NOT EXISTS meta (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    )""",
    """CREATE TABLE IF NOT EXISTS doc_versions (
        doc_id       TEXT    NOT NULL,
        version      INTEGER NOT NULL,
        content_hash TEXT,
        n_chunks     INTEGER NOT NULL DEFAULT 0,
        valid_as_of  TEXT    NOT NULL DEFAULT '',
        ingested_at  TEXT    NOT NULL,
        retracted    INTEGER NOT NULL DEFAULT 0 CHECK (retracted IN (0, 1)),
        writer       TEXT,
        owner        TEXT,
        generation   INTEGER,
        PRIMARY KEY (doc_id, version)
    )""",
    _passage_table_ddl("chunks", "chunk_id"),
    _passage_table_ddl("parents", "parent_id"),
    """CREATE TABLE IF NOT EXISTS facets (
        chunk_row INTEGER NOT NULL REFERENCES chunks (id) ON DELETE CASCADE,
        field     TEXT    NOT NULL,
        value     TEXT    NOT NULL,
        PRIMARY KEY (chunk_row, field, value)
    ) WITHOUT ROWID""",
)

# Indexes are created after columns are added, because an older ``chunks`` may lack a column they cover.
_INDEX_DDL: tuple[str, ...] = (
    "CREATE INDEX IF NOT EXISTS chunks_order ON chunks (doc_id, version, position)",
    "CREATE INDEX IF NOT EXISTS chunks_active ON chunks (active, doc_id, version, position)",
    "CREATE INDEX IF NOT EXISTS chunks_chunk_id ON chunks (chunk_id, active)",
    "CREATE INDEX IF NOT EXISTS facets_lookup ON facets (field, value, chunk_row)",
    "CREATE INDEX IF NOT EXISTS parents_parent_id ON parents (parent_id, active)",
    "CREATE INDEX IF NOT EXISTS parents_active ON parents (active, doc_id, version, position)",
    "CREATE INDEX IF NOT EXISTS doc_versions_generation ON doc_versions (generation)",
)

# Columns added after a table first appeared, with a declaration valid for ``ALTER TABLE … ADD COLUMN`` (a NOT
# NULL column needs a constant default there).  ``_migrate`` adds whichever of these an older file lacks.
_ADDED_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("chunks", "sensitivity", "TEXT"),
    ("chunks", "valid_as_of", "TEXT NOT NULL DEFAULT ''"),
    ("doc_versions", "writer", "TEXT"),
    ("doc_versions", "owner", "TEXT"),
    ("doc_versions", "generation", "INTEGER"),
)

_CHUNK_COLUMNS = (
    "chunk_id, doc_id, version, position, text, start_index, end_index, source_locator, title, sensitivity, "
    "metadata_json, valid_as_of, ingested_at, active"
)
_SELECT_CHUNKS = (
    f"SELECT c.id, {', '.join('c.' + n.strip() for n in _CHUNK_COLUMNS.split(','))} FROM chunks AS c"
)
# the parents table has the chunks table's columns, with parent_id in place of chunk_id
_PARENT_COLUMNS = _CHUNK_COLUMNS.replace("chunk_id", "parent_id", 1)
_SELECT_PARENTS = (
    f"SELECT c.id, {', '.join('c.' + n.strip() for n in _PARENT_COLUMNS.split(','))} FROM parents AS c"
)
#: The ``meta`` key of the store id (:attr:`ChunkStore.store_id`).
_STORE_ID_KEY = "store_id"

#: The ``meta`` key of the chunker record.
_CHUNKER_KEY = "chunker"

#: The ``meta`` key of the model the store's vectors were made with (:attr:`ChunkStore.vector_model_key`).
_VECTOR_MODEL_KEY = "vector_model_key"


# -- helpers -------------------------------------------------------------------------------------------------
def _row_values(
    doc_id: str, version: int, position: int, item: Prepared, valid_as_of: str, ingested_at: str
) -> tuple[Any, ...]:
    """The values of one new ``chunks`` (or ``parents``) row, in ``_CHUNK_COLUMNS`` order, ``active = 1``."""
    row_id, text, start, end, md, md_json = item
    return (row_id, doc_id, version, position, text, start, end, *lineage(md), md_json, valid_as_of, ingested_at, 1)


#: Ids per ``IN (…)`` lookup (below SQLite's default limit of bound parameters).
_ID_BATCH = 500


def _batches(ids: list[str]) -> Iterator[list[str]]:
    for i in range(0, len(ids), _ID_BATCH):
        yield ids[i : i + _ID_BATCH]


def _placeholders(n: int) -> str:
    return ", ".join("?" * n)


def _doc_conditions(
    doc_id: str | Sequence[str] | None, include_inactive: bool, *, alias: str = ""
) -> tuple[list[str], list[Any]]:
    """The ``WHERE`` conditions (ANDed) and parameters of the ``doc_id`` / ``include_inactive`` arguments every
    reading method takes; ``alias`` prefixes the column names (``"c."``).

    Raises:
        TypeError: ``doc_id`` is neither a str nor a list/tuple of str.
    """
    where: list[str] = [] if include_inactive else [f"{alias}active = 1"]
    params: list[Any] = []
    if doc_id is not None:
        ids = filter_values("doc_id", doc_id)
        where.append(f"{alias}doc_id IN ({_placeholders(len(ids))})" if ids else "0")
        params.extend(ids)
    return where, params


# -- the store -----------------------------------------------------------------------------------------------

class ChunkStore(SQLiteFile, VersionedChunkStore):
    """Versioned chunk storage in one SQLite file (see the module docstring for the design).

    Args:
        db_path: the SQLite file.  Created (with its parent directories) when missing, unless ``read_only``.
        read_only: open through a ``file:…?mode=ro`` URI; every write method raises :class:`StoreError`.
        busy_timeout: seconds a writer waits for another connection's write lock before failing (default 5.0).
        create: create the file when missing (default ``True``); ``False`` opens an existing file only (what a
            writer that follows a replaced store uses, :mod:`langchain_ragspine.backends.directory.follow`).

    Raises:
        StoreError: ``read_only`` (or ``create=False``) and the file does not exist; the file is not a SQLite database or not a
            chunk store; its schema is newer than this library's; or (``read_only``) its schema is older and
            needs one writable open to migrate.  The message names the path.

    The connection is opened with ``check_same_thread=False``; a lock serialises every use of it, so one store
    may be shared between threads.  Use it as a context manager, or call :meth:`close`.

    Example::

        with ChunkStore("corpus.sqlite") as store:
            store.replace_doc_chunks("law-1", ParagraphTextSplitter().split_documents([doc]))
            docs = [c.to_document() for c in store.iter_chunks(language="ja")]
    """

    _what = "chunk store"
    #: What this backend refuses, by name (:func:`~langchain_ragspine.backends.base.refuse`): nothing.
    unsupported: Mapping[str, str] = MappingProxyType({})

    def _ensure_schema(self) -> None:
        """Check the schema; create it (fresh file) or migrate it (older file) when writable.

        A file already at :data:`SCHEMA_VERSION` is only read here, so opening a store never waits for another
        process's write transaction — except once for a store created before store ids, which a writable open
        gives one (:attr:`store_id`).
        """
        with self._lock, self._sql_errors():
            conn = self._connection()
            version = self._read_schema_version(conn)
            if version is not None:
                self._check_not_newer(version)
                if self._read_only and version >= _READABLE_SCHEMA:
                    return
                if version == SCHEMA_VERSION:
                    if self._read_store_id(conn) is None:  # a store created before store ids: give it one
                        # best effort: a file that cannot be written now (read-only medium, busy) stays without
                        # one (it compares as "no id") and the next writable open tries again
                        with contextlib.suppress(sqlite3.Error, StoreError), self._write_transaction() as cur:
                            self._add_store_id(cur)
                    return
            if self._read_only:
                if version is None:
                    raise StoreError("not a chunk store (no meta table or schema_version)", path=self._path)
                raise StoreError(
                    f"schema version {version} is older than {SCHEMA_VERSION}; open the store once without "
                    "read_only to migrate it",
                    path=self._path,
                )
            with self._write_transaction() as cur:
                version = self._read_schema_version(conn)  # again, under the write lock
                if version is None:
                    tables = {
                        r[0] for r in cur.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                    }
                    if tables - {"sqlite_sequence"}:
                        raise StoreError(
                            f"not a chunk store: has tables {sorted(tables)} but no meta.schema_version",
                            path=self._path,
                        )
                    self._create_schema(cur)
                    return
                self._check_not_newer(version)
                if version < SCHEMA_VERSION:
                    self._migrate(cur, version)

    @staticmethod
    def _read_store_id(conn: sqlite3.Connection) -> str | None:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (_STORE_ID_KEY,)).fetchone()
        return None if row is None else str(row[0])

    @staticmethod
    def _add_store_id(cur: sqlite3.Cursor) -> None:
        """Write a new random store id unless the store has one (in the open write transaction)."""
        cur.execute("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", (_STORE_ID_KEY, uuid.uuid4().hex))

    def _read_schema_version(self, conn: sqlite3.Connection) -> int | None:
        if not self._has_table(conn, "meta"):
            return None
        row = conn.execute("SELECT value FROM meta WHERE key = ?", ("schema_version",)).fetchone()
        if row is None:
            return None
        try:
            return int(row[0])
        except (TypeError, ValueError) as e:
            raise StoreError(f"meta.schema_version is not an integer: {row[0]!r}", path=self._path) from e

    def _check_not_newer(self, version: int) -> None:
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"schema version {version} is newer than this langchain-ragspine supports "
                f"({SCHEMA_VERSION}); upgrade the package",
                path=self._path,
            )

    def _create_schema(self, cur: sqlite3.Cursor) -> None:
        for ddl in _SCHEMA_DDL + _INDEX_DDL:
            cur.execute(ddl)
        cur.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?), (?, ?)",
            ("schema_version", str(SCHEMA_VERSION), "generation", "0"),
        )
        self._add_store_id(cur)
        self._bump_generation(cur)

    def _migrate(self, cur: sqlite3.Cursor, from_version: int) -> None:
        """Bring a schema at ``from_version`` to :data:`SCHEMA_VERSION`, additively, in the open transaction.

        Creates the missing tables, adds the missing columns (``ALTER TABLE … ADD COLUMN``), creates the
        indexes, then backfills what the new columns and tables hold for existing rows.  No row is deleted or
        rewritten.
        """
        for ddl in _SCHEMA_DDL:
            cur.execute(ddl)
        # identifiers cannot be bound parameters; these come from the _ADDED_COLUMNS constant only
        for table, column, decl in _ADDED_COLUMNS:
            present = {r[1] for r in cur.execute(f"PRAGMA table_info({table})")}
            if column not in present:
                cur.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")
        for ddl in _INDEX_DDL:
            cur.execute(ddl)
        if from_version < 2:
            self._backfill_v2(cur)
        if from_version < 4:
            self._backfill_v4(cur)
        cur.execute("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)", ("generation", "0"))
        cur.execute(
            "INSERT INTO meta (key, value) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            ("schema_version", str(SCHEMA_VERSION)),
        )
        self._add_store_id(cur)
        self._bump_generation(cur)

    def _backfill_v2(self, cur: sqlite3.Cursor) -> None:
        """Fill ``chunks.sensitivity``, ``facets`` and ``doc_versions`` (content hashes) from old rows."""
        rows = cur.execute(
            "SELECT id, doc_id, version, text, start_index, end_index, metadata_json, ingested_at, active "
            "FROM chunks ORDER BY doc_id, version, position, id"
        ).fetchall()
        groups: dict[tuple[str, int], list[tuple[Any, ...]]] = {}
        for row in rows:
            rowid, doc_id, version, text, start, end, md_json, _ingested, _active = row
            try:
                md = json.loads(md_json)
            except json.JSONDecodeError as e:
                raise StoreError(f"chunk row {rowid}: metadata_json is not JSON: {e}", path=self._path) from e
            if not isinstance(md, dict):
                md = {}
            cur.execute(
                "UPDATE chunks SET sensitivity = ? WHERE id = ?", (lineage(md)[2], rowid)
            )
            cur.executemany(
                "INSERT OR IGNORE INTO facets (chunk_row, field, value) VALUES (?, ?, ?)",
                [(rowid, f, v) for f, v in facets_of(md)],
            )
            groups.setdefault((doc_id, version), []).append((text, start, end, md, row[7], row[8]))
        latest: dict[str, tuple[int, bool]] = {}
        for (doc_id, version), items in groups.items():
            digest = version_hash((t, s, e, m) for t, s, e, m, _, _ in items)
            cur.execute(
                "INSERT OR IGNORE INTO doc_versions (doc_id, version, content_hash, n_chunks, valid_as_of, "
                "ingested_at, retracted) VALUES (?, ?, ?, ?, '', ?, 0)",
                (doc_id, version, digest, len(items), min(i[4] for i in items)),
            )
            any_active = any(i[5] for i in items)
            if doc_id not in latest or version > latest[doc_id][0]:
                latest[doc_id] = (version, any_active)
        # version 1 had no retraction marker: a document whose newest rows are all inactive was retracted
        now = utc_now_iso()
        for doc_id, (version, any_active) in latest.items():
            if not any_active:
                cur.execute(
                    "INSERT OR IGNORE INTO doc_versions (doc_id, version, content_hash, n_chunks, "
                    "valid_as_of, ingested_at, retracted) VALUES (?, ?, NULL, 0, '', ?, 1)",
                    (doc_id, version + 1, now),
                )

    @staticmethod
    def _backfill_v4(cur: sqlite3.Cursor) -> None:
        """Attribute every version written before schema 4 (``writer`` and ``owner``; ``generation`` stays
        ``NULL``): a version with a chunk carrying :data:`VECTORSTORE_RECORD_KEY` was written by the vector store,
        any other by ingest (a retraction: by whoever owned the document); owners follow the rule of
        :meth:`ChunkStore.replace_doc_chunks` along each document's history."""
        marked = {
            (str(d), int(v)) for d, v in cur.execute(
                "SELECT DISTINCT doc_id, version FROM chunks WHERE instr(metadata_json, ?) > 0",
                (json.dumps(VECTORSTORE_RECORD_KEY),),
            )
        }
        rows = cur.execute(
            "SELECT doc_id, version, retracted FROM doc_versions WHERE writer IS NULL ORDER BY doc_id, version"
        ).fetchall()
        attributed = attribute_history(
            (str(d), int(v), bool(r), VECTORSTORE_WRITER if (d, int(v)) in marked else INGEST_WRITER)
            for d, v, r in rows
        )
        cur.executemany("UPDATE doc_versions SET writer = ?, owner = ? WHERE doc_id = ? AND version = ?",
                        [(w, o, d, v) for d, v, w, o in attributed])

    @staticmethod
    def _bump_generation(cur: sqlite3.Cursor) -> None:
        cur.execute(
            "UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE key = ?", ("generation",)
        )

    # -- writing ---------------------------------------------------------------------------------------------
    def replace_doc_chunks(
        self,
        doc_id: str,
        chunks: Iterable[Document],
        valid_as_of: str | _dt.date = "",
        *,
        parents: Iterable[Document] | None = None,
        writer: str = INGEST_WRITER,
    ) -> int:
        """Make ``chunks`` the current version of document ``doc_id``, atomically.

        In one ``BEGIN IMMEDIATE … COMMIT`` transaction (inside :meth:`write_batch`: one savepoint), rolled back
        on any exception: the new version is
        ``max(existing version) + 1``; the document's previous rows get ``active = 0`` (they stay as history);
        the new rows are inserted with ``active = 1``, in the given order; ``generation`` is bumped.

        * ``chunks`` empty: retract the document — all its rows become inactive and a new version number is
          recorded (marked retracted).  Retracting an unknown or already-retracted document is a no-op.
        * ``chunks`` identical to the current version (same texts, offsets and metadata, in order; compared by
          a content hash): a no-op — nothing is written, ``generation`` is unchanged.  ``valid_as_of`` is not
          part of the comparison.

        Args:
            doc_id: the document id; every chunk's ``metadata["doc_id"]`` must equal it.
            chunks: chunk ``Document``s from a splitter: ``page_content`` is the text; ``metadata`` holds
                ``chunk_id`` (else ``Document.id`` is used), ``start_index``, ``end_index``,
                ``source_locator``, ``title``, ``sensitivity``, ``source`` and any other JSON-serialisable
                keys (``date``/``datetime`` are stored as ISO-8601 strings).
            valid_as_of: the date the content is valid as of (a string, or a ``date``/``datetime`` stored as
                ISO); ``""`` when unknown.
            parents: the parent passages of parent-child chunking
                (:meth:`~langchain_ragspine.text_splitters.ParentChildTextSplitter.split_with_parents`), each with
                ``parent_id`` (else ``chunk_id``, else ``Document.id``) and the lineage keys of a chunk.  They are
                written, deactivated and compared (the content hash covers them) together with the chunks, in
                the same transaction; every chunk's ``parent_id``, when set, must name one of them.
            writer: who writes this version (default :data:`INGEST_WRITER`; the vector store passes
                :data:`VECTORSTORE_WRITER`), recorded with it.  The document's owner is the writer that created it
                (wrote its first version, or the first after a retraction), and becomes ``ingest`` once ``ingest``
                writes a version; a no-op write changes neither.

        Returns:
            The document's version after the call (unchanged for a no-op; ``0`` when retracting an unknown
            document).

        Raises:
            TypeError: ``doc_id`` is not a str, a chunk is not a ``Document``, ``valid_as_of`` is not a
                str/date, or a metadata value is not JSON-serialisable (the message names the chunk_id and
                key).
            ValueError: ``doc_id`` is empty or ``writer`` is not a non-empty string; a chunk has no chunk_id; a chunk's ``metadata["doc_id"]`` differs
                from ``doc_id``; a chunk_id repeats within the call or belongs to an active chunk of another
                document; ``start_index``/``end_index`` are not ints; parents without chunks, or a chunk whose
                ``parent_id`` is not among ``parents``.  The message names the chunk_id.
            StoreError: the store is read-only or closed, or SQLite fails (e.g. the write lock was not
                obtained within ``busy_timeout``).
        """
        valid_as_of = check_write_args(doc_id, valid_as_of)
        check_writer(writer)
        self._require_writable()
        prepared = prepare_chunks(doc_id, list(chunks))
        prepared_parents = prepare_chunks(doc_id, list(parents or ()), what="parents", id_key="parent_id")
        if prepared_parents and not prepared:
            raise ValueError(f"doc_id {doc_id!r}: parents were given without chunks")
        if prepared_parents:
            check_parent_links(doc_id, prepared, {p[0] for p in prepared_parents})
        digest = version_hash((p[1], p[2], p[3], p[4]) for p in prepared) if prepared else None
        if digest is not None and prepared_parents:  # without parents the hash is what schema 2 wrote
            parent_digest = version_hash((p[1], p[2], p[3], p[4]) for p in prepared_parents)
            digest = hashlib.sha256(f"{digest}\nparents {parent_digest}".encode()).hexdigest()

        with self._lock, self._sql_errors(), self._write_transaction() as cur:
            current, unchanged = version_state(cur, doc_id, digest)
            if unchanged:
                return current

            if prepared:
                self._check_chunk_ids_free(cur, doc_id, [p[0] for p in prepared])
            if prepared_parents:
                self._check_chunk_ids_free(cur, doc_id, [p[0] for p in prepared_parents], table="parents")
            new_version = current + 1
            now = utc_now_iso()
            owner = self._owner_of_next(cur, doc_id, writer, retracting=not prepared)
            generation = int(cur.execute("SELECT value FROM meta WHERE key = 'generation'").fetchone()[0]) + 1
            cur.execute("UPDATE chunks SET active = 0 WHERE doc_id = ? AND active = 1", (doc_id,))
            cur.execute("UPDATE parents SET active = 0 WHERE doc_id = ? AND active = 1", (doc_id,))
            cur.execute(
                "INSERT INTO doc_versions (doc_id, version, content_hash, n_chunks, valid_as_of, "
                "ingested_at, retracted, writer, owner, generation) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (doc_id, new_version, digest, len(prepared), valid_as_of, now, 0 if prepared else 1, writer, owner,
                 generation),
            )
            self._insert_rows(cur, "chunks", doc_id, new_version, prepared, valid_as_of, now)
            self._insert_rows(cur, "parents", doc_id, new_version, prepared_parents, valid_as_of, now)
            self._bump_generation(cur)
            return new_version

    @staticmethod
    def _owner_of_next(cur: sqlite3.Cursor, doc_id: str, writer: str, *, retracting: bool) -> str:
        """The owner of the version ``writer`` writes now (in the open write transaction): see
        :meth:`replace_doc_chunks` (a retraction keeps the owner the document had)."""
        row = cur.execute(
            "SELECT owner, retracted FROM doc_versions WHERE doc_id = ? ORDER BY version DESC LIMIT 1", (doc_id,)
        ).fetchone()
        live_owner = None if row is None or row[1] or row[0] is None else str(row[0])
        return owner_of_next(live_owner, writer, retracting=retracting)

    @staticmethod
    def _check_chunk_ids_free(
        cur: sqlite3.Cursor, doc_id: str, chunk_ids: list[str], *, table: str = "chunks"
    ) -> None:
        """``ValueError`` if one of ``chunk_ids`` is an active chunk (``table="parents"``: parent) of another
        document (ids key fusion and parent look-ups)."""
        column, what = ("chunk_id", "chunk") if table == "chunks" else ("parent_id", "parent")
        batch = 500
        for i in range(0, len(chunk_ids), batch):
            part = chunk_ids[i : i + batch]
            # identifiers come from the two constants above only
            clash = cur.execute(
                f"SELECT {column}, doc_id FROM {table} WHERE active = 1 AND doc_id <> ? "
                f"AND {column} IN ({_placeholders(len(part))}) ORDER BY {column} LIMIT 1",
                (doc_id, *part),
            ).fetchone()
            if clash:
                raise ValueError(
                    f"{column} {clash[0]!r} of doc_id {doc_id!r} is already an active {what} of doc_id "
                    f"{clash[1]!r}"
                )

    @staticmethod
    def _insert_rows(
        cur: sqlite3.Cursor,
        table: str,
        doc_id: str,
        version: int,
        prepared: Sequence[Prepared],
        valid_as_of: str,
        now: str,
    ) -> None:
        """Insert the prepared rows (:meth:`_prepare`) of one document version into ``table`` (``"chunks"`` or
        ``"parents"``) with ``active = 1``, positions in order, in the open transaction, in one ``executemany``; for
        chunks also their facets."""
        if not prepared:
            return
        columns = _CHUNK_COLUMNS if table == "chunks" else _PARENT_COLUMNS  # identifiers from constants only
        cur.executemany(
            f"INSERT INTO {table} ({columns}) VALUES ({_placeholders(14)})",
            [_row_values(doc_id, version, position, item, valid_as_of, now) for position, item in enumerate(prepared)],
        )
        if table != "chunks":
            return
        facets = [facets_of(item[4]) for item in prepared]
        if not any(facets):
            return
        rowids = [r[0] for r in cur.execute(
            "SELECT id FROM chunks WHERE doc_id = ? AND version = ? ORDER BY position", (doc_id, version)
        )]
        cur.executemany(
            "INSERT OR IGNORE INTO facets (chunk_row, field, value) VALUES (?, ?, ?)",
            [(rowid, f, v) for rowid, pairs in zip(rowids, facets, strict=True) for f, v in pairs],
        )

    # -- reading ---------------------------------------------------------------------------------------------
    def _select_chunks(
        self, doc_id: str | Sequence[str] | None, facets: list[tuple[str, str | Sequence[str]]], include_inactive: bool
    ) -> Iterator[StoredChunk]:
        """:meth:`iter_chunks` in SQLite: ``facets`` are the given facet filters, ``(field, value)``."""
        where, params = _doc_conditions(doc_id, include_inactive, alias="c.")
        for name, value in facets:
            values = filter_values(name, value)
            if not values:
                where.append("0")
                continue
            where.append(
                "EXISTS (SELECT 1 FROM facets AS f WHERE f.chunk_row = c.id AND f.field = ? "
                f"AND f.value IN ({_placeholders(len(values))}))"
            )
            params.append(name)
            params.extend(values)
        sql = _SELECT_CHUNKS + where_clause(where) + " ORDER BY c.doc_id, c.version, c.position, c.id"
        return self._iter_rows(sql, params)

    def _iter_rows(self, sql: str, params: list[Any]) -> Iterator[StoredChunk]:
        with self._lock, self._sql_errors():
            rows = self._connection().execute(sql, params).fetchall()
        for row in rows:
            yield self._to_stored(row)

    def _to_stored(self, row: tuple[Any, ...]) -> StoredChunk:
        return row_to_stored(row, path=self._path)

    def _has_parents_table(self) -> bool:
        with self._lock, self._sql_errors():
            return self._has_table(self._connection(), "parents")

    def get_parents(self, parent_ids: Sequence[str]) -> dict[str, StoredChunk]:
        """The active parents among ``parent_ids``, by id (a :class:`StoredChunk` whose ``chunk_id`` is the parent
        id).  An id with no active parent is absent from the result (the caller decides whether that is an error).

        Raises:
            TypeError: ``parent_ids`` is a str or holds a non-str.
            StoreError: the store is closed or SQLite fails.
        """
        ids = id_list("parent_ids", parent_ids)
        if not ids or not self._has_parents_table():
            return {}
        return self._active_by_id(_SELECT_PARENTS, "parent_id", ids)

    def get_chunks(self, chunk_ids: Sequence[str]) -> dict[str, StoredChunk]:
        """The active chunks among ``chunk_ids``, by id (as :meth:`get_parents` for parents): an id with no active
        chunk (superseded, retracted, never stored) is absent from the result.

        Raises:
            TypeError: ``chunk_ids`` is a str or holds a non-str.
            StoreError: the store is closed or SQLite fails.
        """
        return self._active_by_id(_SELECT_CHUNKS, "chunk_id", id_list("chunk_ids", chunk_ids))

    def _active_by_id(self, select: str, column: str, ids: list[str]) -> dict[str, StoredChunk]:
        """The active rows of ``select`` (``_SELECT_CHUNKS`` / ``_SELECT_PARENTS``) whose ``column`` is in ``ids``."""
        out: dict[str, StoredChunk] = {}
        for part in _batches(ids):
            sql = f"{select} WHERE c.active = 1 AND c.{column} IN ({_placeholders(len(part))})"
            for stored in self._iter_rows(sql, part):
                out[stored.chunk_id] = stored
        return out

    def active_versions(self, ids: Sequence[str]) -> dict[str, tuple[str, int]]:
        """``{id: (doc_id, version)}`` of the active chunks and parents among ``ids`` — which rows search may return
        now, without reading their text or metadata (one indexed lookup per table; a chunk wins over a parent of the
        same id).  An id with no active row is absent.

        A row's content never changes (a write adds a version), so a document read earlier from this store whose
        ``metadata["doc_id"]`` / ``metadata["doc_version"]`` equal an entry here is exactly the active row.

        Raises:
            TypeError: ``ids`` is a str or holds a non-str.
            StoreError: the store is closed or SQLite fails.
        """
        ids = id_list("ids", ids)
        out: dict[str, tuple[str, int]] = {}
        tables = [("chunks", "chunk_id")] + ([("parents", "parent_id")] if self._has_parents_table() else [])
        for table, column in tables:  # names from this list only
            wanted = [i for i in ids if i not in out]
            for part in _batches(wanted):
                sql = (f"SELECT {column}, doc_id, version FROM {table} "
                       f"WHERE {column} IN ({_placeholders(len(part))}) AND active = 1")
                with self._lock, self._sql_errors():
                    rows = self._connection().execute(sql, part).fetchall()
                out.update((str(r[0]), (str(r[1]), int(r[2]))) for r in rows)
        return out

    def served_ids(self, ids: Sequence[str]) -> ServedIds:
        """Which of ``ids`` search may return now, and which it no longer may (:mod:`~langchain_ragspine.served`):
        ``served`` — an active chunk or parent that is not RESTRICTED (its current label, read from the row);
        ``withdrawn`` — an id with a row in this store (any version, active or not) that is not served: relabelled
        RESTRICTED, retracted, or gone from its document's current version.  An id this store never held is in
        neither.  One indexed lookup per table for the active rows, and — only when some id is not served — one more
        per table over the history.

        Raises:
            TypeError: ``ids`` is a str or holds a non-str.
            StoreError: the store is closed or SQLite fails.
        """
        wanted = id_list("ids", ids)
        rows = self.get_chunks(wanted)
        rows.update(self.get_parents([i for i in wanted if i not in rows]))
        served = {i for i, row in rows.items() if not is_restricted(row.to_document())}
        rest = [i for i in wanted if i not in served]
        known: set[str] = set()
        tables = [("chunks", "chunk_id")] + ([("parents", "parent_id")] if self._has_parents_table() else [])
        for table, column in tables if rest else ():  # names from this list only
            for part in _batches([i for i in rest if i not in known]):
                sql = f"SELECT DISTINCT {column} FROM {table} WHERE {column} IN ({_placeholders(len(part))})"
                with self._lock, self._sql_errors():
                    known.update(str(r[0]) for r in self._connection().execute(sql, part).fetchall())
        return ServedIds.of(wanted, served, known)

    def iter_parents(
        self, *, doc_id: str | Sequence[str] | None = None, include_inactive: bool = False
    ) -> Iterator[StoredChunk]:
        """Yield stored parents (active ones unless ``include_inactive``), ordered by ``doc_id``, ``version``,
        position.

        Raises:
            TypeError: ``doc_id`` is neither a str nor a list/tuple of str.
            StoreError: the store is closed or SQLite fails.
        """
        where, params = _doc_conditions(doc_id, include_inactive, alias="c.")
        if not self._has_parents_table():
            return iter(())
        sql = _SELECT_PARENTS + where_clause(where) + " ORDER BY c.doc_id, c.version, c.position, c.id"
        return self._iter_rows(sql, params)

    def count_parents(self) -> int:
        """Number of active parents (0 in a store without parent-child chunking).

        Raises:
            StoreError: the store is closed or SQLite fails.
        """
        if not self._has_parents_table():
            return 0
        with self._lock, self._sql_errors():
            return int(self._connection().execute("SELECT COUNT(*) FROM parents WHERE active = 1").fetchone()[0])

    @property
    def chunker(self) -> dict[str, Any] | None:
        """Which chunker and parameters built the store's chunks (``{"name": "paragraph", "chunk_size": 480,
        …}``), or ``None`` when none was recorded (a new store, or one written before schema 3).

        Raises:
            StoreError: the record is not a JSON object, the store is closed or SQLite fails.
        """
        row = self._meta_text(_CHUNKER_KEY)
        if row is None:
            return None
        try:
            value = json.loads(row)
        except json.JSONDecodeError as e:
            raise StoreError(f"meta.{_CHUNKER_KEY} is not JSON: {e}", path=self._path) from e
        if not isinstance(value, dict):
            raise StoreError(f"meta.{_CHUNKER_KEY} is not a JSON object: {row!r}", path=self._path)
        return value

    def set_chunker(self, config: Mapping[str, Any]) -> None:
        """Record which chunker and parameters build this store's chunks (see :attr:`chunker`).

        Raises:
            TypeError: ``config`` is not JSON-serialisable.
            StoreError: the store is read-only or closed, or SQLite fails.
        """
        self._set_meta_text(_CHUNKER_KEY, json.dumps(dict(config), ensure_ascii=False, sort_keys=True))

    def _meta_text(self, key: str) -> str | None:
        """The ``meta`` value of ``key``, or ``None``."""
        with self._lock, self._sql_errors():
            row = self._connection().execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _set_meta_text(self, key: str, value: str) -> None:
        """Set the ``meta`` value of ``key`` (one write transaction, or part of the :meth:`atomic` block)."""
        self._require_writable()
        with self._lock, self._sql_errors(), self._write_transaction() as cur:
            cur.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    @property
    def vector_model_key(self) -> str | None:
        """The cache key of the model the store's vectors were made with
        (:func:`~langchain_ragspine.embeddings.cache.model_key_for`; the rule:
        :func:`~langchain_ragspine.backends.base.check_vector_model`), or ``None`` when none was recorded.

        Raises:
            StoreError: the store is closed or SQLite fails.
        """
        return self._meta_text(_VECTOR_MODEL_KEY)

    def set_vector_model_key(self, key: str) -> None:
        """Record ``key`` as the model of the store's vectors (see :attr:`vector_model_key`).

        Raises:
            TypeError: ``key`` is not a non-empty string.
            StoreError: the store is read-only or closed, or SQLite fails.
        """
        if not isinstance(key, str) or not key:
            raise TypeError(f"key must be a non-empty str, got {key!r}")
        self._set_meta_text(_VECTOR_MODEL_KEY, key)

    def doc_ids(self, *, include_retracted: bool = False, owner: str | None = None) -> list[str]:
        """Sorted ids of the documents in the store.

        Args:
            include_retracted: also list documents whose current version is a retraction.
            owner: only the documents this writer owns (see :meth:`replace_doc_chunks`), e.g.
                :data:`INGEST_WRITER`: what ``ingest`` may retract.  Default ``None``: every writer's.  In a
                schema-3 file opened read-only (no owners recorded yet) every document counts as ingest's.

        Raises:
            StoreError: the store is closed or SQLite fails.
        """
        where = ""
        params: list[Any] = [1 if include_retracted else 0]
        if owner is not None:
            if not self._has_change_feed():
                if owner != INGEST_WRITER:
                    return []
            else:
                where = " AND d.owner = ?"
                params.append(owner)
        sql = (
            "SELECT d.doc_id FROM doc_versions AS d "
            "WHERE d.version = (SELECT MAX(version) FROM doc_versions WHERE doc_id = d.doc_id) "
            f"AND (? OR d.retracted = 0){where} ORDER BY d.doc_id"
        )
        with self._lock, self._sql_errors():
            return [r[0] for r in self._connection().execute(sql, params)]

    def _has_change_feed(self) -> bool:
        """Whether ``doc_versions`` has the schema-4 columns (a schema-3 file opened read-only has not)."""
        with self._lock, self._sql_errors():
            columns = {r[1] for r in self._connection().execute("PRAGMA table_info(doc_versions)")}
        return "generation" in columns

    def versions_since(self, generation: int) -> list[VersionWritten] | None:
        """The change feed: every document version written after chunk-store generation ``generation``, in the
        order they were written (one indexed range read; what a derived index kept in memory re-reads instead of
        the whole store).  ``None`` when the store keeps no feed (a schema-3 file opened read-only).  Versions
        written before schema 4 have no generation and are never listed.

        Raises:
            StoreError: the store is closed or SQLite fails.
        """
        if not self._has_change_feed():
            return None
        sql = (
            "SELECT generation, doc_id, version, writer, retracted FROM doc_versions WHERE generation > ? "
            "ORDER BY generation"
        )
        with self._lock, self._sql_errors():
            rows = self._connection().execute(sql, (int(generation),)).fetchall()
        return [VersionWritten(int(g), str(d), int(v), None if w is None else str(w), bool(r)) for g, d, v, w, r in rows]

    def history_mark(self, generation: int) -> tuple[int, str, int, str] | None:
        """``(generation, doc_id, version, ingested_at)`` of the newest document version written at or before
        ``generation`` (``None``: none recorded one): what a follower of the change feed compares to tell the store
        it read from a copy of it that was written differently since (a fork with the same store id copied over it:
        another version at that generation) — then :meth:`versions_since` does not describe the difference.

        Raises:
            StoreError: the store is closed or SQLite fails.
        """
        if not self._has_change_feed():
            return None
        sql = (
            "SELECT generation, doc_id, version, ingested_at FROM doc_versions WHERE generation <= ? "
            "ORDER BY generation DESC LIMIT 1"
        )
        with self._lock, self._sql_errors():
            row = self._connection().execute(sql, (int(generation),)).fetchone()
        return None if row is None else (int(row[0]), str(row[1]), int(row[2]), str(row[3]))

    def current_version(self, doc_id: str) -> int | None:
        """The newest version number of ``doc_id`` (a retraction counts as a version), or ``None`` if unknown.

        Raises:
            StoreError: the store is closed or SQLite fails.
        """
        with self._lock, self._sql_errors():
            row = (
                self._connection()
                .execute("SELECT MAX(version) FROM doc_versions WHERE doc_id = ?", (doc_id,))
                .fetchone()
            )
        return None if row is None or row[0] is None else int(row[0])

    def count_chunks(
        self, *, doc_id: str | Sequence[str] | None = None, include_inactive: bool = False
    ) -> int:
        """Number of active chunk rows (all rows, history included, with ``include_inactive=True``).

        Args:
            doc_id: count only these documents (a str or a list/tuple of str; an empty list counts nothing).
            include_inactive: also count rows of superseded and retracted versions.

        Raises:
            TypeError: ``doc_id`` is neither a str nor a list/tuple of str.
            StoreError: the store is closed or SQLite fails.
        """
        where, params = _doc_conditions(doc_id, include_inactive)
        sql = "SELECT COUNT(*) FROM chunks" + where_clause(where)
        with self._lock, self._sql_errors():
            return int(self._connection().execute(sql, params).fetchone()[0])

    def _meta_int(self, key: str) -> int:
        with self._lock, self._sql_errors():
            row = self._connection().execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        if row is None:
            raise StoreError(f"meta.{key} is missing", path=self._path)
        return int(row[0])

    @property
    def generation(self) -> int:
        """A counter bumped by every committed write (read from the file, so writes by other processes count).

        Derived indexes store the generation they were built from and rebuild when it differs.
        """
        return self._meta_int("generation")

    @property
    def store_id(self) -> str | None:
        """The store's random id (``meta.store_id``, written when it was created), or ``None`` for a store created
        before store ids that no writer has opened since."""
        with self._lock, self._sql_errors():
            return self._read_store_id(self._connection())

    def follow_state(self) -> tuple[str | None, int]:
        """``(store_id, generation)`` read in one query: which store, at which generation
        (:meth:`~langchain_ragspine.backends.directory.follow.FollowedChunkStore.state`).

        Raises:
            StoreError: ``meta.generation`` is missing; SQLite fails.
        """
        with self._lock, self._sql_errors():
            rows = dict(self._connection().execute(
                "SELECT key, value FROM meta WHERE key IN (?, ?)", (_STORE_ID_KEY, "generation")).fetchall())
        if "generation" not in rows:
            raise StoreError("meta.generation is missing", path=self._path)
        store_id = rows.get(_STORE_ID_KEY)
        return (None if store_id is None else str(store_id)), int(rows["generation"])

    @property
    def schema_version(self) -> int:
        """The schema version recorded in the file (equals :data:`SCHEMA_VERSION` once opened)."""
        return self._meta_int("schema_version")
