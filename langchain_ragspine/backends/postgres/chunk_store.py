"""The versioned chunk store in PostgreSQL, with its search tables kept in the same transactions.

:class:`PostgresChunkStore` has the public methods of the SQLite :class:`~langchain_ragspine.backends.directory.chunk_store.ChunkStore`
(``replace_doc_chunks``, ``iter_chunks``, ``doc_ids``, ``current_version``, ``count_chunks``, ``generation``) and
the same semantics: append-only versioned rows, one transaction per document version, soft retraction recorded as a
version, idempotent re-ingest by content hash, a generation counter bumped by every write, and crash safety — a
process killed mid-transaction leaves the previous version (PostgreSQL rolls the open transaction back).

Unlike the file store, whose BM25 and vector indexes are files rebuilt after the store changes, the search tables
here are written in the same transaction as the chunk rows, so they are never stale:

* ``ragspine_search(chunk_row, chunk_id, content_hash, dl, has_text, terms)`` — the searchable chunks: active and
  not RESTRICTED (:func:`~langchain_ragspine.sensitivity.is_restricted`; a RESTRICTED chunk is stored in
  ``ragspine_chunks`` as history, like in ``chunks.sqlite``, and never written to a search table);
* ``ragspine_postings(term, chunk_row, tf, dl)`` — BM25 postings, tokenized in the package with the store's
  tokenizer (its name and :func:`~langchain_ragspine.tokenizers.tokenizer_version` are in ``ragspine_meta``), so
  Japanese and Chinese behave exactly as with the file store (PostgreSQL has no CJK text search here);
  :class:`~langchain_ragspine.retrievers.postgres.PostgresBM25Retriever` scores them in SQL;
* ``ragspine_corpus(n, total_dl)`` (one row) and ``ragspine_df(term, df)`` — BM25's corpus statistics: the number of
  searchable chunks, their summed token count, and each term's document frequency, kept exact by the same
  transactions (schema version 2; a version-1 database gets them computed from its postings the first time it is
  opened writable), so a query reads only its own terms' postings and statistics;
* ``ragspine_fields(chunk_row, field, kind, s, n, t, b)`` — typed metadata values for filters
  (:mod:`langchain_ragspine.filters.sql`);
* ``ragspine_embeddings`` — chunk vectors for the dense channel (:mod:`langchain_ragspine.backends.postgres.vectors`).

Writers and owners, as in the file store: every document version records its ``writer``
(:data:`~langchain_ragspine.backends.directory.chunk_store.INGEST_WRITER` for ``ragspine ingest``,
:data:`~langchain_ragspine.backends.directory.chunk_store.VECTORSTORE_WRITER` for
:class:`~langchain_ragspine.vectorstores.PostgresVectorStore`, or any other name a caller passes) and the document's
``owner`` — the writer that created it, taken over by ingest once ingest writes a version
(:func:`~langchain_ragspine.backends.directory.chunk_store.owner_of_next`).  ``ingest`` retracts only the documents
it owns (:meth:`PostgresChunkStore.doc_ids` with ``owner=``), so what the vector store added survives a re-ingest.

Each write transaction takes a ``SHARE ROW EXCLUSIVE`` lock on ``ragspine_doc_versions`` (as SQLite's
``BEGIN IMMEDIATE``), which orders transactions; a whole write of many transactions (an ingest, a vector-store write)
holds the store's writer lock, an advisory lock on its schema (:mod:`langchain_ragspine.backends.postgres.lock`), so writers
never interleave.  Readers never wait (MVCC).  Tables live in the connection's current schema (the first of
``search_path``): several stores share one database by schema, e.g.
``postgresql://host/db?options=-csearch_path%3Dmystore,public``.  Connections come from one
``psycopg_pool.ConnectionPool`` per URL and process (:func:`get_pool`, ``RAGSPINE_PG_POOL_SIZE``).

All SQL is parameterised; identifiers come from constants in this module.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as _dt
import math
import re
import threading
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar
from urllib.parse import unquote

from langchain_core.documents import Document

from langchain_ragspine._closing import Closing
from langchain_ragspine._optional import import_optional
from langchain_ragspine.backends.base import CONTEXTUAL, GRAPH, PARENTS, RAPTOR, SPARSE, refuse
from langchain_ragspine.backends.versioning import (
    INGEST_WRITER,
    VECTORSTORE_WRITER,
    StoredChunk,
    VersionedChunkStore,
    attribute_history,
    check_write_args,
    check_writer,
    facets_of,
    filter_metadata,
    filter_values,
    id_list,
    lineage,
    new_stored,
    owner_of_next,
    prepare_chunks,
    row_to_stored,
    utc_now_iso,
    version_hash,
    version_state,
    where_clause,
)
from langchain_ragspine.documents import has_visible_text
from langchain_ragspine.embeddings.cache import content_hash
from langchain_ragspine.errors import StoreError
from langchain_ragspine.filters.sql import value_rows
from langchain_ragspine.sensitivity import is_restricted
from langchain_ragspine.served import ServedIds
from langchain_ragspine.settings import configured_number
from langchain_ragspine.text import index_text
from langchain_ragspine.tokenizers import get_tokenizer, tokenizer_name, tokenizer_version

__all__ = [
    "PG_SCHEMA_VERSION",
    "PostgresChunkStore",
    "PostgresConnection",
    "chunk_columns",
    "check_store_schema",
    "close_pools",
    "get_pool",
    "import_psycopg",
    "is_postgres_url",
    "libpq_url",
    "looks_like_conninfo",
    "pg_error_text",
    "redact_text",
    "redact_url",
    "row_to_stored",
    "store_relations",
]

#: ``ragspine_meta.schema_version`` written by this library.
#: 2 added ``ragspine_corpus`` and ``ragspine_df`` (BM25 statistics maintained on write); opening a version-1
#: store writable computes them from its postings (:meth:`PostgresChunkStore._migrate`).
#: 3 added ``ragspine_doc_versions.writer`` and ``.owner`` (who wrote each version, who owns the document); opening
#: an older store writable attributes its versions (:meth:`PostgresChunkStore._attribute_versions`).  A version-2
#: store opens read-only as it is (no owners: every document counts as ingest's, as before).
PG_SCHEMA_VERSION = 3
#: The oldest schema a read-only open accepts without migrating.
_READABLE_SCHEMA = 2

META = "ragspine_meta"
DOC_VERSIONS = "ragspine_doc_versions"
CHUNKS = "ragspine_chunks"
FACETS = "ragspine_facets"
SEARCH = "ragspine_search"
POSTINGS = "ragspine_postings"
FIELDS = "ragspine_fields"
CORPUS = "ragspine_corpus"
DF = "ragspine_df"

# One advisory lock key (per database) serialises schema creation: "ragspine" as a bigint.
_SCHEMA_LOCK = 0x7261677370696E65

_DDL: tuple[str, ...] = (
    f"""CREATE TABLE IF NOT EXISTS {META} (key text PRIMARY KEY, value text NOT NULL)""",
    f"""CREATE TABLE IF NOT EXISTS {DOC_VERSIONS} (
        doc_id       text    NOT NULL,
        version      integer NOT NULL,
        content_hash text,
        n_chunks     integer NOT NULL DEFAULT 0,
        valid_as_of  text    NOT NULL DEFAULT '',
        ingested_at  text    NOT NULL,
        retracted    boolean NOT NULL DEFAULT false,
        writer       text,
        owner        text,
        PRIMARY KEY (doc_id, version)
    )""",
    f"""CREATE TABLE IF NOT EXISTS {CHUNKS} (
        id             bigint  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        chunk_id       text    NOT NULL,
        doc_id         text    NOT NULL,
        version        integer NOT NULL,
        position       integer NOT NULL,
        text           text    NOT NULL,
        start_index    integer,
        end_index      integer,
        source_locator text,
        title          text,
        sensitivity    text,
        metadata_json  text    NOT NULL,
        valid_as_of    text    NOT NULL DEFAULT '',
        ingested_at    text    NOT NULL,
        active         boolean NOT NULL DEFAULT true,
        content_hash   text    NOT NULL,
        UNIQUE (doc_id, version, chunk_id),
        FOREIGN KEY (doc_id, version) REFERENCES {DOC_VERSIONS} (doc_id, version)
    )""",
    f"CREATE INDEX IF NOT EXISTS ragspine_chunks_order ON {CHUNKS} (doc_id, version, position)",
    f"CREATE INDEX IF NOT EXISTS ragspine_chunks_live ON {CHUNKS} (chunk_id) WHERE active",
    f"""CREATE TABLE IF NOT EXISTS {FACETS} (
        chunk_row bigint NOT NULL REFERENCES {CHUNKS} (id) ON DELETE CASCADE,
        field     text   NOT NULL,
        value     text   NOT NULL,
        PRIMARY KEY (chunk_row, field, value)
    )""",
    f"CREATE INDEX IF NOT EXISTS ragspine_facets_lookup ON {FACETS} (field, value)",
    f"""CREATE TABLE IF NOT EXISTS {SEARCH} (
        chunk_row    bigint  PRIMARY KEY REFERENCES {CHUNKS} (id),
        chunk_id     text    COLLATE "C" NOT NULL UNIQUE,
        content_hash text    NOT NULL,
        dl           integer NOT NULL,
        has_text     boolean NOT NULL,
        terms        text[]  NOT NULL
    )""",
    f"""CREATE TABLE IF NOT EXISTS {POSTINGS} (
        term      text    COLLATE "C" NOT NULL,
        chunk_row bigint  NOT NULL,
        tf        integer NOT NULL,
        dl        integer NOT NULL,
        PRIMARY KEY (term, chunk_row) INCLUDE (tf, dl)
    )""",
    f"""CREATE TABLE IF NOT EXISTS {FIELDS} (
        chunk_row bigint   NOT NULL,
        field     text     COLLATE "C" NOT NULL,
        kind      smallint NOT NULL,
        s         text     COLLATE "C",
        n         numeric,
        t         timestamptz,
        b         boolean
    )""",
    f"CREATE INDEX IF NOT EXISTS ragspine_fields_row ON {FIELDS} (chunk_row, field)",
    f"CREATE INDEX IF NOT EXISTS ragspine_fields_value ON {FIELDS} (field, kind, s)",
    # BM25's corpus statistics over the search tables, updated by the transactions that change them (schema 2)
    f"""CREATE TABLE IF NOT EXISTS {CORPUS} (
        id       boolean PRIMARY KEY DEFAULT true CHECK (id),
        n        bigint  NOT NULL,
        total_dl bigint  NOT NULL
    )""",
    f"""CREATE TABLE IF NOT EXISTS {DF} (
        term text    COLLATE "C" NOT NULL,
        df   integer NOT NULL,
        PRIMARY KEY (term) INCLUDE (df)
    )""",
)

# Columns added after a table first appeared (schema 3), for ``ALTER TABLE … ADD COLUMN IF NOT EXISTS``.
_ADDED_COLUMNS: tuple[tuple[str, str, str], ...] = (
    (DOC_VERSIONS, "writer", "text"),
    (DOC_VERSIONS, "owner", "text"),
)

_CHUNK_COLUMNS = (
    "id, chunk_id, doc_id, version, position, text, start_index, end_index, source_locator, title, sensitivity, "
    "metadata_json, valid_as_of, ingested_at, active"
)


# -- the store's schema -----------------------------------------------------------------------------------------
# Which of the named relations (tables, indexes) exist in the store's schema: the connection's current_schema() (the
# first schema of its search_path that exists, where CREATE puts a table).  Never to_regclass(name), which resolves
# through the whole search_path: a store meant for schema `laws` (search_path laws,public) then found public's
# tables and wrote into them.
_STORE_RELATIONS_SQL = (
    "SELECT u.n FROM unnest(%s::text[]) WITH ORDINALITY AS u(n, i) WHERE EXISTS (SELECT 1 FROM pg_class c "
    "JOIN pg_namespace s ON s.oid = c.relnamespace WHERE s.nspname = current_schema() AND c.relname = u.n) ORDER BY u.i"
)


def _path_schemas(search_path: str) -> list[str]:
    """The schema names of a ``search_path`` setting, as PostgreSQL reads them: comma-separated, a double-quoted
    name as written (``""`` for a quote), an unquoted one folded to lower case."""
    names, name, quoted, i = [], "", False, 0
    while i < len(search_path):
        ch = search_path[i]
        if quoted:
            if ch == '"' and search_path[i + 1:i + 2] == '"':
                name, i = name + '"', i + 1
            elif ch == '"':
                quoted = False
            else:
                name += ch
        elif ch == '"':
            quoted = True
        elif ch == ",":
            names.append(name.strip())
            name = ""
        else:
            name += ch.lower()
        i += 1
    names.append(name.strip())
    return [n for n in names if n]


def check_store_schema(conn: Any, where: str) -> str:
    """The store's schema (``current_schema()``), after checking it is the one the connection's ``search_path``
    names first: when that schema does not exist, ``current_schema()`` is the next one (often ``public``, where
    another store may live), and writing there retracted that store's documents.  A leading ``$user`` that names no
    schema is skipped, as PostgreSQL skips it.

    Raises:
        StoreError: the first schema of the ``search_path`` does not exist (the message names it and what to do);
            no schema of it exists.
    """
    current, path, user = conn.execute("SELECT current_schema(), current_setting('search_path'), current_user").fetchone()
    named = _path_schemas(path)
    if named[:1] == ["$user"]:
        named = [user, *named[1:]] if current == user else named[1:]  # no schema of that name: PostgreSQL skips it
    if named and current != named[0]:
        raise StoreError(
            f"the store's schema {named[0]!r}, the first of this URL's search_path, does not exist, so PostgreSQL "
            f"would use {current!r} instead (another store may live there): create it first (CREATE SCHEMA "
            f"{named[0]}), or correct the search_path",
            path=where,
        )
    if current is None:
        raise StoreError(
            "no schema to hold the store: none of the schemas of the connection's search_path exists; create it "
            "first (CREATE SCHEMA …), or name an existing one (options=-csearch_path=...)",
            path=where,
        )
    return str(current)


def store_relations(conn: Any, *names: str) -> list[str]:
    """Those of ``names`` (tables or indexes, in the given order) that exist in the store's schema.

    The store's schema is the connection's ``current_schema()``: the first schema of its ``search_path`` that
    exists, where the store's tables are created (``options=-csearch_path%3Dlaws,public`` → ``laws``).  A table of
    that name in a later schema of the path (``public``) is not the store's and is not found here.  Every existence
    check of the PostgreSQL backend goes through this function (and the writer lock keys on the same schema).
    """
    return [n for (n,) in conn.execute(_STORE_RELATIONS_SQL, (list(names),))]


# -- connections ------------------------------------------------------------------------------------------------
def is_postgres_url(value: object) -> bool:
    """Whether ``value`` is a PostgreSQL connection URL (``postgresql://…`` or ``postgres://…``)."""
    return isinstance(value, str) and value.strip().lower().startswith(("postgresql://", "postgres://"))


# a libpq keyword/value connection string ("host=db port=5432 dbname=rag"): the start of one
_CONNINFO_RE = re.compile(
    r"(?i)^\s*(host|hostaddr|port|dbname|user|password|passfile|sslmode|service|connect_timeout|options)\s*="
)


# a password anywhere in a text: in a URL-ish user part of any scheme ("postgresql://u:PW@", "POSTGRES:/u:PW@",
# "mysql://u:PW@", however malformed the rest; up to the user part's last "@", so an unencoded "@" in the password
# is hidden too) and as a libpq parameter ("password=PW", "sslpassword='PW'", in a query string or a conninfo string)
_TEXT_SECRETS = (
    (re.compile(r"(?i)\b([a-z][a-z0-9+.-]*:/*[^:/@\s\"']*:)(?:[^@\s\"']*@)+"), r"\1***@"),
    (re.compile(r"(?i)\b((?:ssl)?password\s*=\s*)('[^']*'|[^&\s\"']*)"), r"\1***"),
)


def redact_text(text: str) -> str:
    """``text`` (an error message, libpq's included: it quotes a malformed URL whole) with every password in it
    replaced by ``***``: one in a URL's user part (``postgresql://u:***@…``, also when the URL is malformed) and
    every ``password=`` / ``sslpassword=`` parameter."""
    for pattern, replacement in _TEXT_SECRETS:
        text = pattern.sub(replacement, text)
    return text


def url_secrets(url: str) -> list[str]:
    """The secrets of a connection URL as a message may echo them alone, longest first: the user part's password as
    written and percent-decoded (libpq quotes a bad ``%`` token of it: ``invalid percent-encoded token: "…"``) and
    every ``password=`` / ``sslpassword=`` value of the query string."""
    found: list[str] = []
    head, _, query = url.strip().partition("?")
    _, sep, rest = head.partition("://")
    userinfo = rest.rpartition("@")[0] if sep else ""
    if ":" in userinfo:
        found.append(userinfo.split(":", 1)[1])
    found += re.findall(r"(?i)(?:^|&)(?:ssl)?password=([^&]*)", query)
    out = {s for f in found for s in (f, unquote(f)) if s}
    return sorted(out, key=len, reverse=True)


def pg_error_text(error: BaseException, url: str | None = None) -> str:
    """The message of a psycopg error for a :class:`StoreError`: stripped, every password hidden
    (:func:`redact_text`) — and, given the ``url`` it connected with, each of its secrets wherever the message
    repeats one alone (:func:`url_secrets`; one of fewer than 3 characters only where it stands quoted)."""
    text = redact_text(str(error).strip())
    for secret in url_secrets(url) if url else []:
        text = text.replace(f'"{secret}"', '"***"')
        if len(secret) >= 3:
            text = text.replace(secret, "***")
    return text


def libpq_url(url: str) -> str:
    """``url`` as libpq takes it: surrounding blanks stripped and the scheme in lower case (libpq reads
    ``POSTGRESQL://…`` as a malformed keyword/value string; this package accepts the scheme in any case)."""
    url = url.strip()
    scheme, sep, rest = url.partition("://")
    return f"{scheme.lower()}{sep}{rest}" if sep and scheme.lower() in ("postgresql", "postgres") else url


def redact_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (for messages, logs and ``repr``): the one in the user part
    (``postgresql://u:***@h/db``, any scheme, also when the URL is malformed) and ``password`` / ``sslpassword``
    in the query string (``?password=***``) — :func:`redact_text`, the one rule for a URL and for a message that
    quotes one."""
    return redact_text(url)


def looks_like_conninfo(value: object) -> bool:
    """Whether ``value`` is a libpq keyword/value connection string (``"host=db dbname=rag"``) rather than a
    directory: ``--store`` takes PostgreSQL as a URL only, and such a string must not become a folder name."""
    return isinstance(value, str) and _CONNINFO_RE.match(value) is not None


def import_psycopg() -> Any:
    """The ``psycopg`` module (psycopg 3), after checking that psycopg-pool imports too: what every module of the
    PostgreSQL backend calls before it connects, so psycopg is imported only when a PostgreSQL store is opened::

        psycopg = import_psycopg()
        with psycopg.connect(url, autocommit=True) as conn:
            ...

    Raises:
        ImportError: psycopg or psycopg-pool is not installed (names the ``postgres`` extra).
    """
    hint = "the PostgreSQL backend needs psycopg 3 and psycopg-pool: pip install 'langchain-ragspine[postgres]'"
    psycopg = import_optional("psycopg", hint)
    import_optional("psycopg_pool", hint)
    return psycopg


_POOLS: dict[str, Any] = {}
_POOLS_LOCK = threading.Lock()


def get_pool(url: str, *, pool_size: int | None = None) -> Any:
    """The process's ``psycopg_pool.ConnectionPool`` for ``url`` (autocommit connections; at most ``pool_size`` of
    them, default ``RAGSPINE_PG_POOL_SIZE``, else 4), opened on first use and closed at exit or by
    :func:`close_pools`.  The size counts when the pool is opened: a later call gets the open pool.

    Raises:
        StoreError: the server cannot be reached or refuses the connection (the message names the URL, password
            hidden).
        ImportError: psycopg / psycopg-pool are not installed (names the ``postgres`` extra).
    """
    psycopg = import_psycopg()
    from psycopg_pool import ConnectionPool

    with _POOLS_LOCK:
        pool = _POOLS.get(url)
        if pool is not None and not pool.closed:
            return pool
        refused: StoreError | None = None
        try:  # fail now, with the server's own message, instead of a pool timeout later
            psycopg.connect(url, connect_timeout=10).close()
        except psycopg.Error as e:  # libpq may echo the password: the error is raised outside, with no __context__
            refused = StoreError(f"cannot connect to PostgreSQL: {pg_error_text(e, url)}", path=redact_url(url))
        if refused is not None:
            raise refused
        pool = ConnectionPool(
            url,
            min_size=1,
            max_size=max(1, pool_size if pool_size is not None else configured_number("pg_pool_size")),
            # No server-side prepared statements: after psycopg's 5th execution PostgreSQL may switch a prepared
            # query to a generic plan that ignores the query's own terms, and the BM25 query then re-runs its
            # corpus statistics per posting row (measured: 2-6 s instead of 50 ms on 600 chunks).
            kwargs={"autocommit": True, "prepare_threshold": None},
            name=f"ragspine-{len(_POOLS)}",
            open=True,
        )
        _POOLS[url] = pool
        return pool


def close_pools() -> None:
    """Close every pool :func:`get_pool` opened (their connections end; the next use opens a new pool)."""
    with _POOLS_LOCK:
        pools = list(_POOLS.values())
        _POOLS.clear()
    for pool in pools:
        pool.close()


atexit.register(close_pools)


class PostgresConnection:
    """Connections to one store: the pool, and SQL errors re-raised as :class:`StoreError` naming the URL.

    Raises:
        StoreError: see :func:`get_pool`.
    """

    def __init__(self, url: str) -> None:
        if not is_postgres_url(url):
            raise ValueError(f"not a PostgreSQL URL (postgresql://…): {redact_url(str(url))!r}")
        self.url = libpq_url(url)
        self.where = redact_url(self.url)
        self._pool = get_pool(self.url)
        self._pinned = threading.local()  # .conn: this thread's connection inside atomic()

    @contextlib.contextmanager
    def errors(self) -> Iterator[None]:
        """Re-raise psycopg errors as :class:`StoreError` naming the store."""
        psycopg = import_psycopg()
        try:
            yield
        except psycopg.Error as e:
            raise StoreError(f"PostgreSQL: {pg_error_text(e, self.url)}", path=self.where) from e

    @contextlib.contextmanager
    def connection(self) -> Iterator[Any]:
        """A pooled autocommit connection (inside :meth:`atomic`: the block's connection, in its transaction)."""
        pinned = getattr(self._pinned, "conn", None)
        if pinned is not None:
            with self.errors():
                yield pinned
            return
        with self.errors(), self._pool.connection() as conn:
            yield conn

    def served_ids(self, ids: Sequence[str]) -> ServedIds:
        """Which of ``ids`` search may return now, and which it no longer may (:mod:`~langchain_ragspine.served`):
        ``served`` — in the search tables (active and not RESTRICTED; written in the transaction that changed the
        chunk, so never stale); ``withdrawn`` — an id with a row in ``ragspine_chunks`` (any version) that is not
        served: relabelled RESTRICTED, retracted, or gone from its document's current version.  One lookup by the
        search table's unique ``chunk_id``, and — only when some id is not served — one over the chunk history.

        Raises:
            TypeError: ``ids`` is a str or holds a non-str.
            StoreError: the query fails.
        """
        if isinstance(ids, (str, bytes)) or not all(isinstance(i, str) for i in ids):
            raise TypeError(f"ids must be a list of str chunk ids, got {ids!r}"[:300])
        wanted = list(ids)
        if not wanted:
            return ServedIds()
        with self.connection() as conn:
            served = {r[0] for r in conn.execute(
                f"SELECT chunk_id FROM {SEARCH} WHERE chunk_id = ANY(%s)", (wanted,)).fetchall()}
            rest = [i for i in wanted if i not in served]
            known = {r[0] for r in conn.execute(
                f"SELECT DISTINCT chunk_id FROM {CHUNKS} WHERE chunk_id = ANY(%s)", (rest,)).fetchall()} if rest else set()
        return ServedIds.of(wanted, served, known)

    @contextlib.contextmanager
    def search(self, timeout: float) -> Iterator[Any]:
        """A pooled connection inside one transaction whose statements the server cancels after ``timeout`` seconds
        (``0``: no limit; ``SET LOCAL statement_timeout``, so the connection goes back to the pool without it).

        Raises:
            StoreError: a statement ran longer than ``timeout`` (the message says so and how to change the limit),
                or another SQL error.
        """
        psycopg = import_psycopg()
        with self.errors(), self._pool.connection() as conn:
            try:
                with conn.transaction():
                    if timeout > 0:
                        ms = max(1, math.ceil(timeout * 1000))
                        conn.execute("SELECT set_config('statement_timeout', %s, true)", (f"{ms}ms",))
                    yield conn
            except psycopg.errors.QueryCanceled as e:
                if "statement timeout" not in str(e):
                    raise
                raise StoreError(
                    f"PostgreSQL cancelled the search after {timeout:g} s (the statement timeout: the retriever's "
                    "statement_timeout, default RAGSPINE_PG_STATEMENT_TIMEOUT); shorten the query or the filter, or "
                    "raise the limit (0: none)",
                    path=self.where,
                ) from e

    @contextlib.contextmanager
    def atomic(self) -> Iterator[None]:
        """Run this thread's statements inside the block on one connection, in one transaction: committed when the
        block ends, rolled back as a whole when it raises (each :meth:`transaction` inside becomes a savepoint).
        Nested in another :meth:`atomic` of the same thread, it joins it.

        Raises:
            StoreError: the database fails (also on the commit: then nothing is written).
        """
        if getattr(self._pinned, "conn", None) is not None:
            yield
            return
        with self.errors(), self._pool.connection() as conn, conn.transaction():
            self._pinned.conn = conn
            try:
                yield
            finally:
                self._pinned.conn = None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Any]:
        """A cursor inside one transaction, committed on exit, rolled back on any exception."""
        with self.connection() as conn, conn.transaction(), conn.cursor() as cur:
            yield cur


# -- the store ----------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Searchable:
    """The search-table rows of one new chunk (computed before the write transaction)."""

    position: int
    chunk_id: str
    digest: str
    length: int
    has_text: bool
    counts: Counter[str]


@dataclass
class _Statistics:
    """What some chunks contribute to BM25's corpus statistics: their number, their tokens, and per term the
    number of them holding it (document frequency)."""

    chunks: int = 0
    tokens: int = 0
    df: Counter[str] = field(default_factory=Counter)

    def add(self, terms: Iterable[str], length: int) -> None:
        self.chunks += 1
        self.tokens += length
        self.df.update(terms)


def _doc_conditions(
    doc_id: str | Sequence[str] | None, include_inactive: bool, *, alias: str = ""
) -> tuple[list[str], list[Any]]:
    """The ``WHERE`` conditions (ANDed) and parameters of the ``doc_id`` / ``include_inactive`` arguments, as the
    SQLite store's ``_doc_conditions`` in PostgreSQL (an array parameter); ``alias`` prefixes the columns (``"c."``).

    Raises:
        TypeError: ``doc_id`` is neither a str nor a list/tuple of str.
    """
    where: list[str] = [] if include_inactive else [f"{alias}active"]
    params: list[Any] = []
    if doc_id is not None:
        where.append(f"{alias}doc_id = ANY(%s)")
        params.append(filter_values("doc_id", doc_id))
    return where, params


def chunk_columns(alias: str) -> str:
    """The chunk columns :func:`row_to_stored` reads, qualified by table ``alias``."""
    return ", ".join(f"{alias}.{n}" for n in _CHUNK_COLUMNS.split(", "))


class PostgresChunkStore(Closing, VersionedChunkStore):
    """Versioned chunk storage in PostgreSQL tables, with BM25 postings, typed metadata values and (for the dense
    channel) vectors maintained in the same transactions (see the module docstring).

    Args:
        url: a ``postgresql://`` connection URL.  The tables are created in its current schema when missing
            (unless ``read_only``).
        read_only: refuse every write (:class:`StoreError`); a missing store is an error instead of being created.

    Attributes:
        url: the connection URL.

    Raises:
        StoreError: the server cannot be reached; ``read_only`` and there is no store; the schema is newer than this
            library's; the tables exist but are not a ragspine store.  Messages name the URL (password hidden).
        ImportError: psycopg is not installed (``pip install 'langchain-ragspine[postgres]'``).

    Example::

        with PostgresChunkStore("postgresql://localhost/rag") as store:
            store.replace_doc_chunks("law-1", ParagraphTextSplitter().split_documents([doc]))
            docs = [c.to_document() for c in store.iter_chunks(language="ja")]
    """

    #: What this backend refuses, by name (:func:`~langchain_ragspine.backends.base.refuse`).
    unsupported: Mapping[str, str] = MappingProxyType({
        PARENTS: "it keeps no parent passages (parent-child chunking); use a store directory (--store DIR) for "
                 "them, or another chunker",
        CONTEXTUAL: "it records no contextual headers yet; ingest without --contextual (contextual=False), or "
                    "into a store directory (--store DIR)",
        GRAPH: "it keeps no relation graph yet; ingest without --graph (graph=None), or into a store directory "
               "(--store DIR), whose graph.json holds it",
        SPARSE: "it keeps no learned-sparse vectors yet; ingest without --sparse (RAGSPINE_SPARSE=none), or into a "
                "store directory (--store DIR), whose embeddings.sqlite holds them",
        RAPTOR: "it keeps no RAPTOR tree yet; ingest without --raptor (RAGSPINE_RAPTOR=none), or into a store "
                "directory (--store DIR), whose raptor.json holds it",
    })
    #: The subject of a refusal (:func:`~langchain_ragspine.backends.base.refuse`), the same for every class of
    #: this backend.
    backend_name: ClassVar[str] = "a PostgreSQL store"

    def __init__(self, url: str, *, read_only: bool = False) -> None:
        self._db = PostgresConnection(url)
        self.url = self._db.url
        self._read_only = bool(read_only)
        self._closed = False
        self._ensure_schema()

    # -- lifecycle ------------------------------------------------------------------------------------------------
    @property
    def read_only(self) -> bool:
        """Whether writes are refused."""
        return self._read_only

    @property
    def path(self) -> str:
        """The store's URL with the password hidden (what messages name)."""
        return self._db.where

    @property
    def db(self) -> PostgresConnection:
        """The store's connections (for the retrievers and the vector tables over the same database)."""
        self._require_open()
        return self._db

    def close(self) -> None:
        """Mark the store closed (the pool stays for other users of the URL; see :func:`close_pools`)."""
        self._closed = True

    def _require_open(self) -> None:
        if self._closed:
            raise StoreError("the store is closed", path=self.path)

    def _require_writable(self) -> None:
        self._require_open()
        if self._read_only:
            raise StoreError("the store was opened read-only", path=self.path)

    # -- schema -----------------------------------------------------------------------------------------------------
    def _refuse_foreign_tables(self, conn: Any) -> None:
        """Refuse a database whose current schema already holds a table of ours by name but no ``ragspine_meta``
        (another application's table): nothing is created or changed there."""
        names = [DOC_VERSIONS, CHUNKS, FACETS, SEARCH, POSTINGS, FIELDS, CORPUS, DF]
        found = store_relations(conn, *names)
        if found:
            raise StoreError(
                f"this database is not a ragspine store but already has table(s) {', '.join(found)} (no "
                f"{META} table); use another database or schema (options=-csearch_path=...)",
                path=self.path,
            )

    def _ensure_schema(self) -> None:
        with self._db.connection() as conn:
            check_store_schema(conn, self.path)
            version = self._schema_version(conn)
            if version is None:
                if self._read_only:
                    raise StoreError(
                        "no ragspine store here (no ragspine_meta table in the current schema); run "
                        "`ragspine ingest PATH --store URL` first",
                        path=self.path,
                    )
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
                    version = self._schema_version(conn)
                    if version is None:
                        self._refuse_foreign_tables(conn)
                        for ddl in _DDL:
                            conn.execute(ddl)
                        conn.execute(
                            f"INSERT INTO {META} (key, value) VALUES ('schema_version', %s), ('generation', '1'), "
                            "('tokenizer', 'auto'), ('tokenizer_version', %s)",
                            (str(PG_SCHEMA_VERSION), tokenizer_version("auto")),
                        )
                        conn.execute(f"INSERT INTO {CORPUS} (n, total_dl) VALUES (0, 0)")
                        version = PG_SCHEMA_VERSION
            if version > PG_SCHEMA_VERSION:
                raise StoreError(
                    f"schema version {version} is newer than this langchain-ragspine supports "
                    f"({PG_SCHEMA_VERSION}); upgrade the package",
                    path=self.path,
                )
            if version < PG_SCHEMA_VERSION:
                if self._read_only and version >= _READABLE_SCHEMA:
                    return  # opened as it is: what it lacks (owners) reads as ingest's
                if self._read_only:
                    raise StoreError(
                        f"schema version {version} predates the oldest this langchain-ragspine reads "
                        f"({_READABLE_SCHEMA}: BM25 statistics tables); open the store writable once to migrate it, e.g. "
                        "`ragspine ingest PATH --store URL` or `PostgresChunkStore(URL).close()`",
                        path=self.path,
                    )
                self._migrate(conn)

    def _migrate(self, conn: Any) -> None:
        """Bring an older store to the current schema in one transaction, additively (no row deleted or rewritten;
        writers wait, readers do not): from version 1, create ``ragspine_corpus`` / ``ragspine_df`` and compute
        them from the search tables (one pass over the postings); from version 1 or 2, add the ``writer`` /
        ``owner`` columns and attribute every existing version (:meth:`_attribute_versions`)."""
        with conn.transaction(), conn.cursor() as cur:
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            cur.execute(f"LOCK TABLE {DOC_VERSIONS} IN SHARE ROW EXCLUSIVE MODE")
            from_version = self._schema_version(conn)
            if from_version is None or from_version >= PG_SCHEMA_VERSION:  # migrated by another process meanwhile
                return
            for ddl in _DDL:
                cur.execute(ddl)
            for table, column, declaration in _ADDED_COLUMNS:
                cur.execute(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {column} {declaration}")
            if from_version < 2:
                self._recount_statistics(cur)
            if from_version < 3:
                self._attribute_versions(cur)
            cur.execute(f"UPDATE {META} SET value = %s WHERE key = 'schema_version'", (str(PG_SCHEMA_VERSION),))

    @staticmethod
    def _attribute_versions(cur: Any) -> None:
        """Record the writer and owner of every version written before schema 3.  The vector store of that code
        left no mark of its own on its chunks, but every chunk ``ingest`` writes has a ``source_locator`` (its
        splitters give each chunk one): a version with such a chunk is attributed to ingest, any other (no chunk
        with a ``source_locator``) to the vector store; a retraction to the document's owner.  Owners follow
        :func:`~langchain_ragspine.backends.directory.chunk_store.attribute_history` along each document's history.
        A vector-store version written into an ingested document (its chunks merged with ingest's) counts as
        ingest's, which gives the same owner (ingest's, as the document's creator); a vector-store record given a
        ``source_locator`` of its own counts as ingest's too (then ingest retracts it when it is absent from the
        paths, as it did before owners were recorded)."""
        rows = cur.execute(
            f"SELECT d.doc_id, d.version, d.retracted, EXISTS (SELECT 1 FROM {CHUNKS} c WHERE c.doc_id = d.doc_id "
            f"AND c.version = d.version AND c.source_locator IS NOT NULL) FROM {DOC_VERSIONS} d "
            'WHERE d.writer IS NULL ORDER BY d.doc_id COLLATE "C", d.version'
        ).fetchall()
        attributed = attribute_history(
            (str(d), int(v), bool(r), INGEST_WRITER if located else VECTORSTORE_WRITER) for d, v, r, located in rows
        )
        if attributed:
            cur.execute(
                f"UPDATE {DOC_VERSIONS} d SET writer = u.writer, owner = u.owner FROM unnest(%s::text[], %s::int[], "
                "%s::text[], %s::text[]) AS u(doc_id, version, writer, owner) WHERE d.doc_id = u.doc_id AND "
                "d.version = u.version",
                ([a[0] for a in attributed], [a[1] for a in attributed], [a[2] for a in attributed],
                 [a[3] for a in attributed]),
            )

    def _schema_version(self, conn: Any) -> int | None:
        if not store_relations(conn, META):
            return None
        row = conn.execute(f"SELECT value FROM {META} WHERE key = 'schema_version'").fetchone()
        if row is None:
            raise StoreError(f"{META} exists but has no schema_version: not a ragspine store", path=self.path)
        return int(row[0])

    def _meta(self, key: str, conn: Any | None = None) -> str | None:
        if conn is None:
            with self._db.connection() as c:
                return self._meta(key, c)
        row = conn.execute(f"SELECT value FROM {META} WHERE key = %s", (key,)).fetchone()
        return None if row is None else str(row[0])

    def meta(self, key: str) -> str | None:
        """A value of ``ragspine_meta`` (``tokenizer``, ``vector_model_key``, …), or ``None``.

        Raises:
            StoreError: the store is closed or the query fails.
        """
        self._require_open()
        return self._meta(key)

    def set_meta(self, values: dict[str, str | None]) -> None:
        """Set (``None``: delete) keys of ``ragspine_meta`` in one transaction.

        Raises:
            StoreError: read-only or closed store, or the query fails.
        """
        self._require_writable()
        with self._db.transaction() as cur:
            for key, value in values.items():
                if value is None:
                    cur.execute(f"DELETE FROM {META} WHERE key = %s", (key,))
                else:
                    cur.execute(
                        f"INSERT INTO {META} (key, value) VALUES (%s, %s) "
                        "ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                        (key, value),
                    )

    @property
    def generation(self) -> int:
        """A counter bumped by every committed write (any process's); as :attr:`ChunkStore.generation`."""
        self._require_open()
        return int(self._meta("generation") or 0)

    @property
    def schema_version(self) -> int:
        """The schema version recorded in the database."""
        self._require_open()
        return int(self._meta("schema_version") or 0)

    @property
    def tokenizer(self) -> str:
        """The name of the tokenizer the BM25 postings were written with."""
        self._require_open()
        return self._meta("tokenizer") or "auto"

    @property
    def postings_tokenizer_version(self) -> str:
        """The :func:`~langchain_ragspine.tokenizers.tokenizer_version` the postings were written with."""
        self._require_open()
        return self._meta("tokenizer_version") or "1"

    def postings_are_current(self) -> bool:
        """Whether the postings hold the tokens the store's tokenizer produces today (else re-ingest)."""
        return self.postings_tokenizer_version == tokenizer_version(self.tokenizer)

    def set_tokenizer(self, tokenizer: str) -> bool:
        """Make ``tokenizer`` the store's BM25 tokenizer, rewriting every posting in one transaction when the name
        or its :func:`~langchain_ragspine.tokenizers.tokenizer_version` differs from the recorded one.  Returns
        whether the postings were rewritten.

        Raises:
            ValueError: an unknown tokenizer name.
            StoreError: read-only or closed store, or the query fails.
        """
        name = tokenizer_name(tokenizer)
        if name is None:
            raise ValueError(f"a store's tokenizer is a registered name, got {tokenizer!r}")
        self._require_writable()
        version = tokenizer_version(name)
        if self.tokenizer == name and self.postings_tokenizer_version == version:
            return False
        tokenize = get_tokenizer(name)
        with self._db.transaction() as cur:
            cur.execute(f"LOCK TABLE {DOC_VERSIONS} IN SHARE ROW EXCLUSIVE MODE")
            rows = cur.execute(
                f"SELECT {chunk_columns('c')} FROM {SEARCH} s JOIN {CHUNKS} c ON c.id = s.chunk_row ORDER BY 1"
            ).fetchall()
            cur.execute(f"TRUNCATE {POSTINGS}")
            updates = []
            with cur.copy(f"COPY {POSTINGS} (term, chunk_row, tf, dl) FROM STDIN") as copy:
                for row in rows:
                    chunk_row = row[0]
                    # tokenised by its index text, as replace_doc_chunks does
                    tokens = tokenize(index_text(row_to_stored(row, path=self.path).to_document()))
                    counts = Counter(tokens)
                    for term, tf in counts.items():
                        copy.write_row((term, chunk_row, tf, len(tokens)))
                    updates.append((len(tokens), list(counts), chunk_row))
            cur.executemany(f"UPDATE {SEARCH} SET dl = %s, terms = %s WHERE chunk_row = %s", updates)
            self._recount_statistics(cur)
            cur.execute(
                f"UPDATE {META} SET value = CASE key WHEN 'tokenizer' THEN %s ELSE %s END "
                "WHERE key IN ('tokenizer', 'tokenizer_version')",
                (name, version),
            )
            self._bump_generation(cur)
        return True

    @staticmethod
    def _recount_statistics(cur: Any) -> None:
        """Recompute BM25's corpus statistics from the search tables (migration, a tokenizer change)."""
        cur.execute(f"DELETE FROM {CORPUS}")
        cur.execute(f"INSERT INTO {CORPUS} (n, total_dl) SELECT count(*), coalesce(sum(dl), 0) FROM {SEARCH}")
        cur.execute(f"TRUNCATE {DF}")
        cur.execute(f"INSERT INTO {DF} (term, df) SELECT term, count(*) FROM {POSTINGS} GROUP BY term")

    @staticmethod
    def _update_statistics(cur: Any, chunks: int, tokens: int, df: Mapping[str, int]) -> None:
        """Add ``chunks`` / ``tokens`` (either may be negative) to the corpus row and each ``df[term]`` delta to
        the document frequencies (a term whose count falls to 0 is deleted), in the open write transaction."""
        if chunks or tokens:
            cur.execute(f"UPDATE {CORPUS} SET n = n + %s, total_dl = total_dl + %s", (chunks, tokens))
        changed = sorted((t, d) for t, d in df.items() if d)
        if not changed:
            return
        cur.execute(
            f"INSERT INTO {DF} AS d (term, df) SELECT * FROM unnest(%s::text[], %s::int[]) "
            "ON CONFLICT (term) DO UPDATE SET df = d.df + EXCLUDED.df",
            ([t for t, _ in changed], [d for _, d in changed]),
        )
        fallen = [t for t, d in changed if d < 0]
        if fallen:
            cur.execute(f"DELETE FROM {DF} WHERE term = ANY(%s::text[]) AND df <= 0", (fallen,))

    @staticmethod
    def _bump_generation(cur: Any) -> None:
        cur.execute(f"UPDATE {META} SET value = (value::bigint + 1)::text WHERE key = 'generation'")

    # -- writing ----------------------------------------------------------------------------------------------------
    def replace_doc_chunks(
        self,
        doc_id: str,
        chunks: Iterable[Document],
        valid_as_of: str | _dt.date = "",
        *,
        parents: Iterable[Document] | None = None,
        writer: str = INGEST_WRITER,
    ) -> int:
        """Make ``chunks`` the current version of document ``doc_id``, atomically — exactly as
        :meth:`ChunkStore.replace_doc_chunks` (same arguments, return value, no-op and retraction rules, errors;
        ``writer``, default :data:`~langchain_ragspine.backends.directory.chunk_store.INGEST_WRITER`, is recorded
        with the version and decides the document's owner by the same rule).  ``parents`` (parent-child chunking)
        are the directory store's only: non-empty ones are refused by name (:attr:`unsupported`), ``None`` or ``[]``
        is no parents.

        In one transaction: the document's previous rows become inactive (kept as history) and leave the search
        tables; the new rows are inserted; the new chunks that are not RESTRICTED enter the search tables (BM25
        postings with the store's tokenizer, typed metadata values); ``generation`` is bumped.

        Raises:
            TypeError, ValueError: as :meth:`ChunkStore.replace_doc_chunks`; also a chunk text or metadata string
                holding a NUL character (PostgreSQL text cannot); non-empty ``parents`` (``ValueError`` naming them).
            StoreError: the store is read-only or closed, the tokenizer changed meanwhile, or the query fails.
        """
        valid_as_of = check_write_args(doc_id, valid_as_of)
        check_writer(writer)
        if parents is not None and list(parents):
            refuse(self, PARENTS)
        self._require_writable()
        prepared = prepare_chunks(doc_id, list(chunks))
        for chunk_id, text, *_ in prepared:
            if "\x00" in text or "\x00" in chunk_id or "\x00" in doc_id:
                raise ValueError(f"chunk {chunk_id!r} holds a NUL character, which PostgreSQL text cannot store")
        digest = version_hash((p[1], p[2], p[3], p[4]) for p in prepared) if prepared else None
        tokenizer = self.tokenizer
        tokenize = get_tokenizer(tokenizer)
        searchable: list[_Searchable] = []
        for position, (chunk_id, text, _s, _e, md, _j) in enumerate(prepared):
            if not is_restricted(md):
                # Tokenised and embedded by its index text (metadata["index_text"], else the text), as the file
                # store's BM25Retriever / DenseRetriever do; "has text" is about what a reader sees.
                as_document = Document(page_content=text, metadata=md)
                indexed = index_text(as_document)
                tokens = tokenize(indexed)
                searchable.append(_Searchable(
                    position, chunk_id, content_hash(indexed), len(tokens), has_visible_text(as_document),
                    Counter(tokens),
                ))

        with self._db.transaction() as cur:
            cur.execute(f"LOCK TABLE {DOC_VERSIONS} IN SHARE ROW EXCLUSIVE MODE")
            if self._meta("tokenizer", cur) != tokenizer:
                raise StoreError("the store's tokenizer changed during this write; retry", path=self.path)
            current, unchanged = version_state(cur, doc_id, digest, table=DOC_VERSIONS, param="%s")
            if unchanged:
                return current
            if prepared:
                clash = cur.execute(
                    f"SELECT chunk_id, doc_id FROM {CHUNKS} WHERE active AND doc_id <> %s AND chunk_id = ANY(%s) "
                    "ORDER BY chunk_id COLLATE \"C\" LIMIT 1",
                    (doc_id, [p[0] for p in prepared]),
                ).fetchone()
                if clash:
                    raise ValueError(
                        f"chunk_id {clash[0]!r} of doc_id {doc_id!r} is already an active chunk of doc_id "
                        f"{clash[1]!r}"
                    )
            version = current + 1
            now = utc_now_iso()
            latest = cur.execute(
                f"SELECT owner, retracted FROM {DOC_VERSIONS} WHERE doc_id = %s ORDER BY version DESC LIMIT 1",
                (doc_id,),
            ).fetchone()
            live_owner = None if latest is None or latest[1] or latest[0] is None else str(latest[0])
            owner = owner_of_next(live_owner, writer, retracting=not prepared)
            old_rows = [
                r[0] for r in cur.execute(
                    f"UPDATE {CHUNKS} SET active = false WHERE doc_id = %s AND active RETURNING id", (doc_id,)
                )
            ]
            removed = self._unsearch(cur, old_rows)
            cur.execute(
                f"INSERT INTO {DOC_VERSIONS} (doc_id, version, content_hash, n_chunks, valid_as_of, ingested_at, "
                "retracted, writer, owner) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (doc_id, version, digest, len(prepared), valid_as_of, now, not prepared, writer, owner),
            )
            if prepared:
                rows = self._insert_chunk_rows(cur, doc_id, version, prepared, valid_as_of, now)
                stored = [new_stored(doc_id, version, item, valid_as_of, now) for item in prepared]
                added = self._insert_searchable(cur, rows, stored, searchable)
            else:
                added = _Statistics()
            added.df.subtract(removed.df)  # a re-ingest's unchanged terms cancel out
            self._update_statistics(cur, added.chunks - removed.chunks, added.tokens - removed.tokens, added.df)
            self._bump_generation(cur)
            return version

    def _insert_chunk_rows(
        self,
        cur: Any,
        doc_id: str,
        version: int,
        prepared: list[tuple[str, str, int | None, int | None, dict[str, Any], str]],
        valid_as_of: str,
        now: str,
    ) -> list[int]:
        """Insert the new version's chunk rows (and facets) in the open transaction; their row ids by position."""
        cols: list[list[Any]] = [[] for _ in range(10)]
        for position, (chunk_id, text, start, end, md, md_json) in enumerate(prepared):
            for col, value in zip(cols, (
                chunk_id, position, text, start, end, *lineage(md), md_json, content_hash(text),
            ), strict=True):
                col.append(value)
        got = cur.execute(
            f"INSERT INTO {CHUNKS} (chunk_id, doc_id, version, position, text, start_index, end_index, "
            "source_locator, title, sensitivity, metadata_json, valid_as_of, ingested_at, active, content_hash) "
            "SELECT u.chunk_id, %s, %s, u.position, u.text, u.start_index, u.end_index, u.source_locator, u.title, "
            "u.sensitivity, u.metadata_json, %s, %s, true, u.content_hash FROM unnest(%s::text[], %s::int[], "
            "%s::text[], %s::int[], %s::int[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[]) AS "
            "u(chunk_id, position, text, start_index, end_index, source_locator, title, sensitivity, "
            "metadata_json, content_hash) RETURNING id, position",
            (doc_id, version, valid_as_of, now, *cols),
        ).fetchall()
        by_position = {int(p): int(i) for i, p in got}
        rows = [by_position[p] for p in range(len(prepared))]
        facets = [(rows[p], f, v) for p, item in enumerate(prepared) for f, v in facets_of(item[4])]
        if facets:
            cur.execute(
                f"INSERT INTO {FACETS} (chunk_row, field, value) SELECT * FROM unnest(%s::bigint[], %s::text[], "
                "%s::text[]) ON CONFLICT DO NOTHING",
                ([f[0] for f in facets], [f[1] for f in facets], [f[2] for f in facets]),
            )
        return rows

    def _insert_searchable(
        self, cur: Any, rows: list[int], stored: list[StoredChunk], searchable: list[_Searchable]
    ) -> _Statistics:
        """Write the search-table rows of the new chunks that are not RESTRICTED (checked again on the metadata
        retrievers will see); returns what they add to BM25's statistics."""
        items = [s for s in searchable if not is_restricted(stored[s.position].to_document())]
        added = _Statistics()
        for s in items:
            added.add(s.counts.keys(), s.length)
        if not items:
            return added
        with cur.copy(f"COPY {SEARCH} (chunk_row, chunk_id, content_hash, dl, has_text, terms) FROM STDIN") as copy:
            for s in items:
                copy.write_row((rows[s.position], s.chunk_id, s.digest, s.length, s.has_text, list(s.counts)))
        with cur.copy(f"COPY {POSTINGS} (term, chunk_row, tf, dl) FROM STDIN") as copy:
            for s in items:
                row = rows[s.position]
                for term, tf in s.counts.items():
                    copy.write_row((term, row, tf, s.length))
        with cur.copy(f"COPY {FIELDS} (chunk_row, field, kind, s, n, t, b) FROM STDIN") as copy:
            for s in items:
                row = rows[s.position]
                seen = filter_metadata(stored[s.position])
                for value in value_rows(seen, where=f"chunk {s.chunk_id!r}: "):
                    copy.write_row((row, *value))
        return added

    @staticmethod
    def _unsearch(cur: Any, chunk_rows: list[int]) -> _Statistics:
        """Remove chunk rows from every search table (their postings found through ``search.terms``); returns
        what they contributed to BM25's statistics."""
        gone = _Statistics()
        if not chunk_rows:
            return gone
        for dl, terms in cur.execute(f"SELECT dl, terms FROM {SEARCH} WHERE chunk_row = ANY(%s)", (chunk_rows,)):
            gone.add(terms, int(dl))
        cur.execute(
            f"DELETE FROM {POSTINGS} p USING (SELECT s.chunk_row, unnest(s.terms) AS term FROM {SEARCH} s "
            "WHERE s.chunk_row = ANY(%s)) d WHERE p.term = d.term AND p.chunk_row = d.chunk_row",
            (chunk_rows,),
        )
        cur.execute(f"DELETE FROM {FIELDS} WHERE chunk_row = ANY(%s)", (chunk_rows,))
        cur.execute(f"DELETE FROM {SEARCH} WHERE chunk_row = ANY(%s)", (chunk_rows,))
        return gone

    # -- reading ----------------------------------------------------------------------------------------------------
    def _select_chunks(
        self, doc_id: str | Sequence[str] | None, facets: list[tuple[str, str | Sequence[str]]], include_inactive: bool
    ) -> Iterator[StoredChunk]:
        """:meth:`iter_chunks` in PostgreSQL: ``facets`` are the given facet filters, ``(field, value)``."""
        self._require_open()
        where, params = _doc_conditions(doc_id, include_inactive, alias="c.")
        for name, value in facets:
            where.append(
                f"EXISTS (SELECT 1 FROM {FACETS} f WHERE f.chunk_row = c.id AND f.field = %s AND f.value = ANY(%s))"
            )
            params.extend((name, filter_values(name, value)))
        sql = f"SELECT {chunk_columns('c')} FROM {CHUNKS} c" + where_clause(where)
        sql += ' ORDER BY c.doc_id COLLATE "C", c.version, c.position, c.id'
        with self._db.connection() as conn:
            rows = conn.execute(sql, params).fetchall()
        return iter([row_to_stored(r, path=self.path) for r in rows])

    def get_by_ids(self, chunk_ids: Sequence[str]) -> list[Document]:
        """The active chunks with these ``chunk_id``\\ s as ``Document``\\ s (``id = chunk_id``), in the order asked;
        unknown ids are left out (LangChain's ``VectorStore.get_by_ids`` contract).  RESTRICTED chunks are
        returned too: this reads the store, not the search tables.

        Raises:
            StoreError: the store is closed or the query fails.
        """
        ids = [str(i) for i in chunk_ids]
        found = self._active_by_id(ids)
        return [found[i].to_document() for i in ids if i in found]

    def get_chunks(self, chunk_ids: Sequence[str]) -> dict[str, StoredChunk]:
        """The active chunks among ``chunk_ids``, by id; as :meth:`ChunkStore.get_chunks` (an id with no active chunk
        — superseded, retracted, never stored — is absent; RESTRICTED chunks are returned: this reads the store, not
        the search tables).

        Raises:
            TypeError: ``chunk_ids`` is a str or holds a non-str.
            StoreError: the store is closed or the query fails.
        """
        return self._active_by_id(id_list("chunk_ids", chunk_ids))

    def get_parents(self, parent_ids: Sequence[str]) -> dict[str, StoredChunk]:
        """``{}``: a PostgreSQL store keeps no parents (:attr:`unsupported`); the ids are checked as
        :meth:`ChunkStore.get_parents` checks them.

        Raises:
            TypeError: ``parent_ids`` is a str or holds a non-str.
        """
        id_list("parent_ids", parent_ids)
        return {}

    def _active_by_id(self, ids: list[str]) -> dict[str, StoredChunk]:
        """The active chunk rows whose ``chunk_id`` is in ``ids``, by id (one query)."""
        self._require_open()
        if not ids:
            return {}
        with self._db.connection() as conn:
            rows = conn.execute(
                f"SELECT {_CHUNK_COLUMNS} FROM {CHUNKS} WHERE active AND chunk_id = ANY(%s)", (ids,)
            ).fetchall()
        return {str(r[1]): row_to_stored(r, path=self.path) for r in rows}

    def served_ids(self, ids: Sequence[str]) -> ServedIds:
        """Which of ``ids`` search may return now, and which it no longer may: as
        :meth:`PostgresConnection.served_ids` (the protocol of :mod:`~langchain_ragspine.served`).

        Raises:
            TypeError: ``ids`` is a str or holds a non-str.
            StoreError: the store is closed or the query fails.
        """
        self._require_open()
        return self._db.served_ids(ids)

    def doc_ids(self, *, include_retracted: bool = False, owner: str | None = None) -> list[str]:
        """Sorted (by code point) ids of the documents in the store; as :meth:`ChunkStore.doc_ids`.

        Args:
            include_retracted: also list documents whose current version is a retraction.
            owner: only the documents this writer owns (see :meth:`replace_doc_chunks`), e.g.
                :data:`~langchain_ragspine.backends.directory.chunk_store.INGEST_WRITER`: what ``ingest`` may
                retract.  Default ``None``: every writer's.  In a schema-2 store opened read-only (no owners
                recorded yet) every document counts as ingest's.

        Raises:
            StoreError: the store is closed or the query fails.
        """
        self._require_open()
        with self._db.connection() as conn:
            owners = (self._schema_version(conn) or 0) >= 3
            column = "owner" if owners else "NULL"
            rows = conn.execute(
                f"SELECT DISTINCT ON (doc_id) doc_id, retracted, {column} FROM {DOC_VERSIONS} "
                "ORDER BY doc_id, version DESC"
            ).fetchall()
        if owner is not None and not owners:
            rows = [(d, r, INGEST_WRITER) for d, r, _ in rows]
        return sorted(
            d for d, retracted, by in rows if (include_retracted or not retracted) and (owner is None or by == owner)
        )

    def current_version(self, doc_id: str) -> int | None:
        """The newest version number of ``doc_id`` (a retraction counts), or ``None`` if unknown.

        Raises:
            StoreError: the store is closed or the query fails.
        """
        self._require_open()
        with self._db.connection() as conn:
            row = conn.execute(f"SELECT max(version) FROM {DOC_VERSIONS} WHERE doc_id = %s", (doc_id,)).fetchone()
        return None if row is None or row[0] is None else int(row[0])

    def count_chunks(self, *, doc_id: str | Sequence[str] | None = None, include_inactive: bool = False) -> int:
        """Number of active chunk rows (all rows with ``include_inactive=True``); as :meth:`ChunkStore.count_chunks`.

        Raises:
            TypeError: ``doc_id`` is neither a str nor a list/tuple of str.
            StoreError: the store is closed or the query fails.
        """
        self._require_open()
        where, params = _doc_conditions(doc_id, include_inactive)
        sql = f"SELECT count(*) FROM {CHUNKS}" + where_clause(where)
        with self._db.connection() as conn:
            return int(conn.execute(sql, params).fetchone()[0])

    def count_searchable(self) -> int:
        """Chunks in the search tables (active, not RESTRICTED): BM25's ``N``.

        Raises:
            StoreError: the store is closed or the query fails.
        """
        self._require_open()
        with self._db.connection() as conn:
            return int(conn.execute(f"SELECT count(*) FROM {SEARCH}").fetchone()[0])

    def analyze(self) -> None:
        """Refresh the planner's statistics of the search tables and their visibility maps (``VACUUM (ANALYZE)``;
        ingest runs it after writing).  The visibility map is what lets a BM25 query read a term's postings and
        document frequency from the covering indexes alone (index-only scans) instead of visiting the table.

        Raises:
            StoreError: the query fails.
        """
        with self._db.connection() as conn:
            for table in (SEARCH, POSTINGS, DF, CORPUS, FIELDS, CHUNKS):
                conn.execute(f"VACUUM (ANALYZE) {table}")
