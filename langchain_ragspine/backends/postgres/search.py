"""PostgreSQL's search: BM25 and vector search in SQL, the backend interface's
:class:`~langchain_ragspine.backends.base.SearchBackend` (issue 26: the whole PostgreSQL backend in one folder).

:class:`PostgresSearch` answers ``lexical_search`` / ``vector_search`` / ``vector_search_with_vectors`` over a store's
search tables; :class:`~langchain_ragspine.retrievers.postgres.PostgresBM25Retriever`,
:class:`~langchain_ragspine.retrievers.postgres.PostgresDenseRetriever` and the vector store's
:class:`~langchain_ragspine.backends.postgres.backend.PostgresBackend` all search through it::

    search = PostgresSearch("postgresql://rag@db/rag")         # the store's own vectors and tokenizer
    search.lexical_search("梅雨 六月", 4, {"lang": "ja"})     # [(Document, BM25 score)], best first
    search.vector_search(vector, 4)                           # [(Document, cosine)]

**BM25** is Okapi BM25 in Lucene's variant (Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and
Beyond", 2009) in one SQL statement over the store's postings: ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))``,
``tf' = tf / (tf + k1 · (1 - b + b · dl / avgdl))``, summed over the query's tokens (a repeated token counts again).
It reproduces :class:`~langchain_ragspine.retrievers.bm25.BM25Retriever` (bm25s, ``method="lucene"``) operation by
operation: ``idf`` in double precision rounded to ``real``, every later step in single precision (``real``) in
bm25s's order, and the per-token contributions added in query order — so on the same chunks the scores are the
same float32 numbers (tested within 1e-6; ``avgdl`` is the exact mean rounded once, which equals numpy's float32
mean while a corpus holds fewer than 2^24 tokens).  The query is tokenized here, with the store's tokenizer.  ``N``,
the total length and each term's ``df`` are read from the store's statistics tables (``ragspine_corpus``,
``ragspine_df``, maintained by its write transactions), and a term's postings from the covering index on
``(term, chunk_row)``: a query reads its own terms' entries only, so its cost grows with their document frequencies
(every posting of a query term is scored: exact, no WAND / MaxScore pruning), not with the corpus.

**Vector search** ranks the store's unit vectors by inner product (cosine similarity) with pgvector, exactly below
``RAGSPINE_PG_HNSW_THRESHOLD`` vectors and through the HNSW index above it.  A filter is part of the query;
pgvector's iterative index scan (``hnsw.iterative_scan = relaxed_order``, pgvector >= 0.8) keeps walking the graph
until ``k`` rows pass it, so a selective filter still returns ``k`` results (without it an HNSW scan stops after
``hnsw.ef_search`` candidates, and a filter matching 1% of the rows leaves about 1% of them).  The relaxed order is
re-sorted before results leave.

Every search runs in one transaction on one pooled connection, with a statement timeout (``statement_timeout``,
default ``RAGSPINE_PG_STATEMENT_TIMEOUT``, 30 s): the server cancels a statement that runs longer and the search
raises :class:`~langchain_ragspine.errors.StoreError` saying so, so no query holds a connection of the pool for
longer.  The query-side work — the filter compiled to SQL (:mod:`langchain_ragspine.filters.sql`, applied inside
the query, before ranking), the query tokenized — is done before the connection is taken.  A BM25 query is at most
:data:`~langchain_ragspine.documents.MAX_QUERY_CHARS` characters, and a filter is within the size limits of
:func:`~langchain_ragspine.filters.check_filter_size`, as in the file store (a ``ValueError`` beyond); so its SQL never
needs more parameters than PostgreSQL takes.

Results are ``(Document, score)`` pairs: copies of the stored chunks (``Document.id = chunk_id``, no
``metadata["scores"]`` — the retrievers add them), at most ``k``, best first, ties broken by ``chunk_id``.
RESTRICTED chunks are not in the search tables, so they are never scored or returned; an empty query finds nothing
(its filter is still checked against the store: a date error raises, an unknown field warns).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, cast

import langchain_core
import numpy as np
from langchain_core.documents import Document
from psycopg import sql as _sql

from langchain_ragspine._stacklevel import user_stacklevel
from langchain_ragspine.arguments import check_k
from langchain_ragspine.backends.postgres.chunk_store import (
    CHUNKS,
    CORPUS,
    DF,
    POSTINGS,
    SEARCH,
    PostgresChunkStore,
    PostgresConnection,
    chunk_columns,
    row_to_stored,
)
from langchain_ragspine.backends.postgres.vectors import (
    EMBEDDINGS,
    has_hnsw_index,
    has_vectors,
    register_vector,
)
from langchain_ragspine.backends.versioning import VECTORSTORE_RECORD_KEY
from langchain_ragspine.documents import bm25_threshold, check_bm25_parameter, check_bm25_query
from langchain_ragspine.embeddings.batching import l2_normalize
from langchain_ragspine.errors import StoreError
from langchain_ragspine.filters.sql import SqlFilter, check_filter, filter_sql
from langchain_ragspine.served import ServedIds
from langchain_ragspine.settings import check_timeout, configured_number
from langchain_ragspine.tokenizers import Tokenizer, get_tokenizer, tokenizer_version

__all__ = ["PostgresSearch"]

#: The vector of a row read without one (``with_vectors=False``).
_NO_VECTOR = np.zeros(0, dtype=np.float32)

# Lucene BM25 in bm25s's arithmetic (see the module docstring).  Placeholders: query tokens (in order, repeats
# kept), the distinct tokens, k1, 1 - b, b (each a float32 value), the filter's, k - 1, k.  N and the total length
# come from the one-row ragspine_corpus, df from ragspine_df (both kept exact by the store's write transactions),
# and each query term's postings from the covering primary key (term, chunk_row) INCLUDE (tf, dl): the query reads
# only its own terms' index entries, never the whole corpus.
_BM25_SQL = (
    "WITH q AS (SELECT u.term, u.qpos FROM unnest(%s::text[]) WITH ORDINALITY AS u(term, qpos)), "
    # per distinct query term, once: its idf and avgdl as bm25s computes them (rounded to real)
    "w AS MATERIALIZED (SELECT d.term, "
    "(ln(1.0::float8 + (st.n::float8 - d.df + 0.5::float8) / (d.df + 0.5::float8)))::real AS idf, "
    "st.total_dl::float8::real / st.n::float8::real AS avgdl "
    f"FROM {CORPUS} st CROSS JOIN {DF} d WHERE d.term = ANY(%s::text[])), "
    "scored AS (SELECT p.chunk_row, sum("
    "(w.idf * p.tf::real) / (p.tf::real + %s::real * (%s::real + (%s::real * p.dl::real) / w.avgdl)) "
    "ORDER BY q.qpos) AS score "
    f"FROM w JOIN {POSTINGS} p ON p.term = w.term JOIN q ON q.term = w.term GROUP BY p.chunk_row), "
    "hits AS MATERIALIZED (SELECT h.chunk_row, h.score FROM scored h WHERE h.score > 0 AND {filter}), "
    "kth AS (SELECT score FROM hits ORDER BY score DESC OFFSET %s LIMIT 1) "
    f"SELECT {chunk_columns('c')}, h.score FROM hits h JOIN {SEARCH} s ON s.chunk_row = h.chunk_row "
    f"JOIN {CHUNKS} c ON c.id = h.chunk_row "
    "WHERE h.score >= coalesce((SELECT score FROM kth), 0::real) ORDER BY h.score DESC, s.chunk_id LIMIT %s"
)


class PostgresSearch:
    """BM25 and vector search in SQL over a PostgreSQL store (see the module docstring).

    Args:
        url: the store's ``postgresql://`` URL.
        model_key: the cache key of the vectors searched (:func:`~langchain_ragspine.embeddings.cache.model_key_for`
            of their model; default: the store's recorded ``vector_model_key``).  The query vector is the caller's.
        ef_search: pgvector's ``hnsw.ef_search`` for searches through the HNSW index (default, and ``None``:
            ``RAGSPINE_PG_EF_SEARCH`` read now, else 100; raised to ``k``).
        statement_timeout: the longest a search may run, in seconds (``0``: no limit; default, and ``None``:
            ``RAGSPINE_PG_STATEMENT_TIMEOUT`` read now, else 30).
        k1: BM25's term-frequency saturation (default 1.5, ``>= 0``).
        b: BM25's length normalisation (default 0.75, in [0, 1]).

    The store is read when a search of a kind first needs it (:meth:`open_lexical`, :meth:`open_vectors`: the
    retrievers call them when made, so a missing store or stale postings fail there).

    Raises:
        ValueError: ``k1 < 0``, ``b`` outside [0, 1], a bad ``statement_timeout``.
        StoreError: (on first use) no store at ``url``; (BM25) stale postings; (vector search) no vectors.
    """

    #: pgvector's ``hnsw.iterative_scan`` mode for filtered HNSW searches (tests switch it ``off`` to show why).
    ITERATIVE_SCAN: ClassVar[str] = "relaxed_order"

    def __init__(
        self,
        url: str,
        *,
        model_key: str | None = None,
        ef_search: int | None = None,
        statement_timeout: float | None = None,
        k1: float = 1.5,
        b: float = 0.75,
    ) -> None:
        self.url = url
        self.model_key = model_key
        self._set(k1, b, ef_search, statement_timeout)
        self._db: PostgresConnection | None = None
        self._tokenizer: str | None = None
        self._tokenize: Tokenizer | None = None
        self._vectors: tuple[str, int, bool] | None = None  # (model key, dimension, through the HNSW index)

    def _set(self, k1: float, b: float, ef_search: int | None, statement_timeout: float | None) -> None:
        self.k1, self.b = check_bm25_parameter("k1", k1), check_bm25_parameter("b", b)
        self.ef_search = int(configured_number("pg_ef_search")) if ef_search is None else int(ef_search)
        self.statement_timeout = (
            float(configured_number("pg_statement_timeout")) if statement_timeout is None
            else check_timeout(statement_timeout, what="statement_timeout")
        )

    def with_options(self, **options: float | None) -> PostgresSearch:
        """This search with other values of the constructor's ``k1``, ``b``, ``ef_search`` or
        ``statement_timeout``, sharing what was read of the store (``self`` when they are its own): how a retriever
        whose fields were reassigned (``retriever.k1 = 1.2``) or copied with ``model_copy(update=…)`` searches with
        its current values.

        Raises:
            TypeError: another keyword; ValueError: a bad value, as the constructor.
        """
        now = {"k1": self.k1, "b": self.b, "ef_search": self.ef_search, "statement_timeout": self.statement_timeout}
        unknown = sorted(set(options) - set(now))
        if unknown:
            raise TypeError(f"PostgresSearch.with_options() got unexpected keyword(s): {', '.join(unknown)}")
        if all(now[name] == value for name, value in options.items()):
            return self
        merged = {**now, **options}
        other = copy.copy(self)
        other._set(float(cast(float, merged["k1"])), float(cast(float, merged["b"])),
                   cast("int | None", merged["ef_search"]), merged["statement_timeout"])
        return other

    # -- opening ---------------------------------------------------------------------------------------------------
    def _store(self) -> PostgresChunkStore:
        store = PostgresChunkStore(self.url, read_only=True)
        self._db = store.db  # pooled: it outlives the store object
        return store

    @property
    def db(self) -> PostgresConnection:
        """The store's pooled connection (opened on first use).

        Raises:
            StoreError: no store at ``url``.
        """
        if self._db is None:
            with self._store():
                pass
        return cast(PostgresConnection, self._db)

    def open_lexical(self) -> str:
        """Read the store's tokenizer for BM25 (once); returns its name.

        Raises:
            StoreError: no store at ``url``; its postings were written by another version of the tokenizer
                (re-ingest).
        """
        if self._tokenizer is None:
            with self._store() as store:
                name = store.tokenizer
                if not store.postings_are_current():
                    raise StoreError(
                        f"stale postings: written with tokenizer {name!r} version "
                        f"{store.postings_tokenizer_version}, which now produces version "
                        f"{tokenizer_version(name)} tokens; run `ragspine ingest` again to rewrite them "
                        "(documents other writers added, such as the vector store's, are kept, and their postings "
                        "rewritten too)",
                        path=store.path,
                    )
            self._tokenize, self._tokenizer = get_tokenizer(name), name
        return self._tokenizer

    def open_vectors(self) -> tuple[str, int]:
        """Read which vectors a vector search ranks (once): returns ``(model key, dimension)``.

        Raises:
            StoreError: no store at ``url``; it has no vectors (ingest with an embedding model first).
        """
        if self._vectors is None:
            with self._store() as store:
                recorded = store.meta("vector_model_key")
                key = self.model_key or recorded
                dim = store.meta("vector_dim")
                if not key or not dim:
                    raise StoreError(
                        "this store has no vectors: run `ragspine ingest PATH --store URL --embedding e5` (or "
                        "another spec)",
                        path=store.path,
                    )
                if key != recorded and not has_vectors(store.db, str(key)):
                    # an explicit model_key with no vectors would rank nothing, silently
                    raise StoreError(
                        f"this store has no vectors of model_key {key!r} (its vectors are {recorded!r}): leave "
                        "model_key out, or ingest with that model",
                        path=store.path,
                    )
                self._vectors = (str(key), int(dim), has_hnsw_index(store.db, str(key)))
        return self._vectors[0], self._vectors[1]

    @property
    def tokenizer(self) -> str:
        """The store's tokenizer name (the query is tokenized with it)."""
        return self.open_lexical()

    @property
    def resolved_model_key(self) -> str:
        """The model key of the vectors searched."""
        return self.open_vectors()[0]

    @property
    def dimension(self) -> int:
        """The dimension of the vectors searched."""
        return self.open_vectors()[1]

    @property
    def uses_hnsw(self) -> bool:
        """Whether vector searches go through the HNSW index (read when the vectors were first opened)."""
        self.open_vectors()
        return cast("tuple[str, int, bool]", self._vectors)[2]

    def served_ids(self, ids: Sequence[str]) -> ServedIds:
        """Which of ``ids`` a search may still return now, and which it no longer may
        (:meth:`~langchain_ragspine.backends.postgres.chunk_store.PostgresConnection.served_ids`: the search tables
        as they are now, so a relabel or a retraction committed by any process counts at once).

        Raises:
            TypeError: ``ids`` is a str or holds a non-str.
            StoreError: the query fails.
        """
        return self.db.served_ids(ids)

    # -- searching --------------------------------------------------------------------------------------------------
    def _check_filter(self, conn: Any, flt: SqlFilter | None) -> None:
        """The evaluator's checks of ``flt`` against the store (a date error; the unknown-field warning)."""
        if flt is not None:
            # an unknown field warns at the first caller outside this package and langchain_core (the user's
            # invoke / search / similarity_search line), however many frames stand between
            check_filter(conn, flt, stacklevel=user_stacklevel(langchain_core) + 1, hidden=(VECTORSTORE_RECORD_KEY,))

    def check_filter(self, filter: Mapping[str, Any] | None) -> None:
        """Check ``filter`` against the store as a search would, finding nothing: what a search of an empty query
        does (a non-date operand for a field holding dates raises; an unknown field warns, naming the caller's line).

        Raises:
            TypeError, ValueError: a malformed filter, or the date error; StoreError: the query fails.
        """
        flt = filter_sql(filter, row="s.chunk_row")
        if flt is not None:
            with self.db.search(self.statement_timeout) as conn:
                self._check_filter(conn, flt)

    def _document(self, row: Any) -> Document:
        return row_to_stored(row, path=self.db.where).to_document()

    def lexical_search(
        self, query: str, k: int, filter: Mapping[str, Any] | None = None, *, score_threshold: float | None = None
    ) -> list[tuple[Document, float]]:
        """The ``k`` best ``(chunk, BM25 score)`` pairs among the chunks matching ``filter`` (a filter dict or a
        :class:`~langchain_ragspine.filters.CompiledFilter`): only chunks sharing a query token (score > 0), and
        scoring ``>= score_threshold`` when given (dropped after the cut to ``k``: results come best first, so the
        top ``k`` of those above it are kept).  The score is the float32 number
        :class:`~langchain_ragspine.retrievers.bm25.BM25Retriever` gives.

        Raises:
            TypeError, ValueError: a bad ``k``, filter or threshold; a query longer than
                :data:`~langchain_ragspine.documents.MAX_QUERY_CHARS`; a non-date operand for a field holding dates.
            StoreError: no store, stale postings; the query fails or runs longer than the statement timeout.
        """
        k = check_k(k)
        threshold = bm25_threshold(score_threshold)
        flt = filter_sql(filter, row="h.chunk_row")
        self.open_lexical()
        tokens = cast(Tokenizer, self._tokenize)(check_bm25_query(query)) if query and query.strip() else []
        with self.db.search(self.statement_timeout) as conn:
            self._check_filter(conn, flt)
            if not tokens:
                return []
            where, fparams = (flt.sql, flt.params) if flt is not None else ("TRUE", ())
            k1, b = np.float32(self.k1), np.float32(self.b)
            rows = conn.execute(
                _BM25_SQL.format(filter=where),
                (tokens, list(dict.fromkeys(tokens)), float(k1), float(np.float32(1.0 - self.b)), float(b),
                 *fparams, k - 1, k),
            ).fetchall()
        # a real score is read back as its exact float32 value (PostgreSQL prints the shortest decimal naming it)
        hits = [(self._document(r), float(np.float32(r[-1]))) for r in rows]
        return hits if threshold is None else [(d, s) for d, s in hits if s >= threshold]

    def vector_search(
        self, vector: Sequence[float] | np.ndarray, k: int, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[Document, float]]:
        """The ``k`` best ``(chunk, cosine)`` pairs for a query vector of shape ``(d,)`` (normalised here) among the
        chunks matching ``filter``.

        Raises:
            TypeError, ValueError: a bad ``k`` or filter; a vector of another dimension or not finite.
            StoreError: the store has no vectors; the query fails or runs longer than the statement timeout.
        """
        return [(d, s) for d, s, _ in self._by_vector(vector, k, filter, with_vectors=False)]

    def vector_search_with_vectors(
        self, vector: Sequence[float] | np.ndarray, k: int, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[Document, float, np.ndarray]]:
        """:meth:`vector_search` with each hit's stored unit vector (float32, shape ``(d,)``), read in the same
        statement: the candidates of maximal marginal relevance.

        Raises:
            TypeError, ValueError, StoreError: as :meth:`vector_search`.
        """
        return self._by_vector(vector, k, filter, with_vectors=True)

    def _by_vector(
        self, vector: Sequence[float] | np.ndarray, k: int, filter: Mapping[str, Any] | None, *, with_vectors: bool
    ) -> list[tuple[Document, float, np.ndarray]]:
        k = check_k(k)
        key, dim = self.open_vectors()
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        if q.shape[0] != dim:
            raise ValueError(f"query vector must have shape ({dim},), got {np.shape(vector)}")
        if not np.all(np.isfinite(q)):
            raise ValueError("query vector contains NaN or infinite values")
        flt = filter_sql(filter, row="s.chunk_row")
        with self.db.search(self.statement_timeout) as conn:
            self._check_filter(conn, flt)
            return self._vector_rows(conn, l2_normalize(q), key, dim, k, flt, with_vectors=with_vectors)

    def _vector_rows(
        self, conn: Any, q: np.ndarray, key: str, dim: int, k: int, flt: SqlFilter | None, *, with_vectors: bool
    ) -> list[tuple[Document, float, np.ndarray]]:
        """The top ``k`` rows as ``(chunk, cosine, stored vector)``; the vector is an empty array unless
        ``with_vectors`` (then it is read in the same statement, after the chunk columns)."""
        register_vector(conn)
        where, fparams = (flt.sql, flt.params) if flt is not None else ("TRUE", ())
        cols = chunk_columns("c") + (", e.embedding" if with_vectors else "")
        joins = (
            f"FROM {EMBEDDINGS} e JOIN {SEARCH} s ON s.chunk_id = e.chunk_id AND s.content_hash = e.content_hash "
            f"JOIN {CHUNKS} c ON c.id = s.chunk_row"
        )
        if not self.uses_hnsw:  # exact: every vector scored, ties by chunk_id as in the file store
            rows = conn.execute(
                f"SELECT {cols}, -(e.embedding <#> %s::vector) AS score {joins} WHERE e.model_key = %s AND "
                f"s.has_text AND ({where}) ORDER BY e.embedding <#> %s::vector, s.chunk_id LIMIT %s",
                (q, key, *fparams, q, k),
            ).fetchall()
        else:
            dist = _sql.SQL("e.embedding::vector({dim}) <#> %s::vector({dim})").format(dim=_sql.Literal(dim))
            query = _sql.SQL(
                "SELECT * FROM (SELECT {cols}, -({dist}) AS score, s.chunk_id AS tie {joins} WHERE e.model_key = {key} "
                "AND s.has_text AND ({where}) ORDER BY {dist} LIMIT %s) t ORDER BY score DESC, tie"
            ).format(
                cols=_sql.SQL(cols), dist=dist, joins=_sql.SQL(joins), key=_sql.Literal(key),
                where=_sql.SQL(where),  # type: ignore[arg-type]  # our own SQL text with %s placeholders
            )
            ef = max(self.ef_search, k)
            with conn.transaction():
                conn.execute(_sql.SQL("SET LOCAL hnsw.ef_search = {}").format(_sql.Literal(int(ef))))
                mode = self.ITERATIVE_SCAN if self.ITERATIVE_SCAN in ("off", "strict_order") else "relaxed_order"
                conn.execute(f"SET LOCAL hnsw.iterative_scan = {mode}")
                # Walk the index: the planner estimates the join on (chunk_id, content_hash) at ~1 row (two
                # correlated columns), so it always preferred scoring every vector and sorting them (measured: the
                # index unused, 0.9 s per query at 100k vectors); with sorts disabled, ordering by the HNSW scan is
                # the plan (the final re-sort of k rows still runs).
                conn.execute("SET LOCAL enable_sort = off")
                rows = [r[:-1] for r in conn.execute(query, (q, *fparams, q, k)).fetchall()]
        # a row: the chunk columns (row_to_stored reads the first 15), [its vector], the score last
        return [
            (self._document(r), float(r[-1]),
             np.asarray(r[-2].to_numpy(), dtype=np.float32) if with_vectors else _NO_VECTOR)
            for r in rows
        ]
