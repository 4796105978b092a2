"""BM25 and dense retrieval computed inside PostgreSQL, over a :class:`~langchain_ragspine.backends.postgres.chunk_store.PostgresChunkStore`.

:class:`PostgresBM25Retriever` scores Okapi BM25 in Lucene's variant (Robertson & Zaragoza, "The Probabilistic
Relevance Framework: BM25 and Beyond", 2009) in one SQL statement over the store's postings:
``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))``, ``tf' = tf / (tf + k1 · (1 - b + b · dl / avgdl))``, summed over
the query's tokens (a repeated token counts again).  It reproduces
:class:`~langchain_ragspine.retrievers.bm25.BM25Retriever` (bm25s, ``method="lucene"``) operation by operation:
``idf`` in double precision rounded to ``real``, every later step in single precision (``real``) in bm25s's order,
and the per-token contributions added in query order — so on the same chunks the scores are the same float32
numbers (tested within 1e-6; ``avgdl`` is the exact mean rounded once, which equals numpy's float32 mean while a
corpus holds fewer than 2^24 tokens).  The query is tokenized here, with the store's tokenizer.  ``N``, the total
length and each term's ``df`` are read from the store's statistics tables (``ragspine_corpus``, ``ragspine_df``,
maintained by its write transactions), and a term's postings from the covering index on ``(term, chunk_row)``: a
query reads its own terms' entries only, so its cost grows with their document frequencies (every posting of a
query term is scored: exact, no WAND / MaxScore pruning), not with the corpus.

:class:`PostgresDenseRetriever` ranks the store's unit vectors by inner product (cosine similarity) with pgvector,
exactly below ``RAGSPINE_PG_HNSW_THRESHOLD`` vectors and through the HNSW index above it.  A filter is part of the
query; pgvector's iterative index scan (``hnsw.iterative_scan = relaxed_order``, pgvector >= 0.8) keeps walking
the graph until ``k`` rows pass it, so a selective filter still returns ``k`` results (without it an HNSW scan
stops after ``hnsw.ef_search`` candidates, and a filter matching 1% of the rows leaves about 1% of them).  The
relaxed order is re-sorted before results leave.

Every search runs in one transaction on one pooled connection, with a statement timeout (``statement_timeout``,
default ``RAGSPINE_PG_STATEMENT_TIMEOUT``, 30 s): the server cancels a statement that runs longer and the search
raises :class:`~langchain_ragspine.errors.StoreError` saying so, so no query holds a connection of the pool for
longer.  The query-side work — the filter compiled to SQL, the query tokenized or embedded — is done before the
connection is taken.  A BM25 query is at most :data:`~langchain_ragspine.retrievers.bm25.MAX_QUERY_CHARS`
characters, and a filter is within the size limits of :func:`~langchain_ragspine.filters.check_filter_size`
(:data:`~langchain_ragspine.filters.MAX_FILTER_NODES` nodes, :data:`~langchain_ragspine.filters.MAX_FILTER_VALUES`
values in its lists, :data:`~langchain_ragspine.filters.MAX_FILTER_DEPTH` levels), as in the file store (a
``ValueError`` beyond); so its SQL never needs more parameters than PostgreSQL takes (:mod:`~langchain_ragspine.filters.sql`).

Both behave like their in-memory twins: results are copies of the stored chunks (``Document.id = chunk_id``) with
``metadata["scores"]`` (``bm25`` / ``vector`` and ``fused``), at most ``k``, best first, ties broken by
``chunk_id``; a filter (:mod:`langchain_ragspine.filters`, run as SQL by :mod:`langchain_ragspine.filters.sql`)
restricts the candidates before ranking and is ANDed with the retriever's own; RESTRICTED chunks are not in the
search tables, so they are never scored or returned; an empty query returns ``[]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, cast

import langchain_core
import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from psycopg import sql as _sql
from pydantic import ConfigDict, Field, PrivateAttr, field_validator

from langchain_ragspine._stacklevel import user_stacklevel
from langchain_ragspine.arguments import DEFAULT_K, PositiveIntField, check_k
from langchain_ragspine.backends.postgres.chunk_store import (
    CHUNKS,
    CORPUS,
    DF,
    POSTINGS,
    SEARCH,
    PostgresChunkStore,
    PostgresConnection,
    chunk_columns,
    redact_url,
    row_to_stored,
)
from langchain_ragspine.backends.postgres.vectors import EMBEDDINGS, has_hnsw_index, register_vector
from langchain_ragspine.backends.versioning import VECTORSTORE_RECORD_KEY
from langchain_ragspine.embeddings.batching import l2_normalize
from langchain_ragspine.errors import StoreError
from langchain_ragspine.filters import CompiledFilter, compile_filter, compiled_filter
from langchain_ragspine.filters.sql import SqlFilter, check_filter, filter_sql
from langchain_ragspine.retrievers.base import ContractRetriever, SyncCall
from langchain_ragspine.retrievers.bm25 import bm25_threshold, check_bm25_query, with_scores
from langchain_ragspine.retrievers.embed_as import (
    EMBED_AS_OPTION,
    EmbedAs,
    check_embed_as,
    embed_search_text,
)
from langchain_ragspine.served import ServedIds
from langchain_ragspine.settings import check_timeout, configured_number
from langchain_ragspine.tokenizers import Tokenizer, get_tokenizer, tokenizer_version

__all__ = ["PostgresBM25Retriever", "PostgresDenseRetriever"]

#: The vector of a row read without one (``with_vectors=False``).
_NO_VECTOR = np.zeros(0, dtype=np.float32)

#: Where warnings are not attributed: this package and langchain_core (``BaseRetriever.invoke``).


class _PostgresRetriever(ContractRetriever):
    """What both retrievers share: the store URL, ``k``, the own filter, a call's filter compiled to SQL, the
    statement timeout.  The async path runs the sync one in a worker thread with the call's ``k`` / ``filter``
    (psycopg's pool blocks)."""

    run_async_in_executor: ClassVar[bool] = True
    #: The column of the search query that holds the chunk row a filter is applied to.
    _filter_row: ClassVar[str] = "s.chunk_row"

    url: str
    k: PositiveIntField = DEFAULT_K
    filter: dict[str, Any] | None = None
    statement_timeout: float = Field(default_factory=lambda: float(configured_number("pg_statement_timeout")))

    model_config = ConfigDict(arbitrary_types_allowed=True)

    _db: PostgresConnection = PrivateAttr()

    @field_validator("statement_timeout", mode="before")
    @classmethod
    def _check_timeout(cls, value: Any) -> float:
        if value is None:  # the default: RAGSPINE_PG_STATEMENT_TIMEOUT, read now
            return float(configured_number("pg_statement_timeout"))
        return check_timeout(value, what="statement_timeout")

    def __repr_args__(self) -> Any:
        """pydantic's ``repr()`` / ``str()`` (and so LangChain's ``dumpd`` of a retriever it cannot serialise, and
        every retriever that holds this one) with the URL's password as ``***``."""
        for name, value in super().__repr_args__():
            yield name, (redact_url(value) if name == "url" and isinstance(value, str) else value)

    def model_post_init(self, context: Any, /) -> None:
        compile_filter(self.filter)
        with PostgresChunkStore(self.url, read_only=True) as store:
            self._db = store.db
            self._open(store)

    def _open(self, store: PostgresChunkStore) -> None:  # pragma: no cover - both subclasses override it
        raise NotImplementedError

    def _timeout(self) -> float:
        """The statement timeout of a search, in seconds (``0``: none): :attr:`statement_timeout`."""
        return self.statement_timeout

    def _call_filter(self, filter: Mapping[str, Any] | None, row: str) -> SqlFilter | None:
        """The retriever's own filter AND the call's, as SQL on ``row`` (validated; no connection needed; the call's
        filter comes compiled, and its SQL is built once for every search of the call)."""
        return filter_sql(compiled_filter(self.filter, filter), row=row)

    def _check_filter(self, conn: Any, flt: SqlFilter | None) -> None:
        """The evaluator's checks of ``flt`` against the store (a date error; the unknown-field warning)."""
        if flt is not None:
            # an unknown field warns at the first caller outside this package and langchain_core (the user's
            # invoke / search / similarity_search line), however many frames stand between
            check_filter(conn, flt, stacklevel=user_stacklevel(langchain_core) + 1, hidden=(VECTORSTORE_RECORD_KEY,))

    def _documents(self, rows: list[Any], channel: str) -> list[Document]:
        """Chunk rows (score last) as scored documents; a ``real`` score is read back as its exact float32
        value (PostgreSQL prints the shortest decimal that identifies it)."""
        out = []
        for r in rows:
            score = float(np.float32(r[-1])) if channel == "bm25" else float(r[-1])
            out.append(with_scores(row_to_stored(r, path=self._db.where).to_document(), **{channel: score, "fused": score}))
        return out

    def search(
        self, query: str, *, k: int | None = None, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[Document, float]]:
        """Top ``k`` ``(chunk, score)`` pairs for ``query``, best first, ties by ``chunk_id``, among the chunks
        matching both the retriever's :attr:`filter` and ``filter``; an empty query finds nothing.  The score is
        the BM25 score (:class:`PostgresBM25Retriever`: only chunks sharing a query token, score > 0) or the
        cosine similarity of the embedded query (:class:`PostgresDenseRetriever`).

        Raises:
            TypeError, ValueError: a bad ``k``; a malformed filter, or a non-date operand for a field holding dates;
                (BM25) a query longer than :data:`~langchain_ragspine.retrievers.bm25.MAX_QUERY_CHARS`.
            StoreError: the query fails, or runs longer than the statement timeout.
        """
        return self._search_text(query, *self._resolved(k, filter), "query")

    def _resolved(self, k: int | None, filter: Mapping[str, Any] | None) -> tuple[int, CompiledFilter | None]:
        """What :class:`~langchain_ragspine.retrievers.base.ContractRetriever` resolves for ``invoke``, for a direct
        :meth:`search`: ``k`` (checked, else the retriever's), the own filter ANDed with ``filter``."""
        return (self.k if k is None else check_k(k)), compiled_filter(self.filter, filter)

    def _search_text(
        self, query: str, k: int, filter: CompiledFilter | None, embed_as: EmbedAs
    ) -> list[tuple[Document, float]]:
        """:meth:`search` with ``k`` and the filter resolved (the own filter ANDed with the call's), and the dense
        retriever's ``embed_as`` (BM25 embeds nothing).  The query is prepared (tokenized / embedded) before a
        connection is taken from the pool."""
        flt = filter_sql(filter, row=self._filter_row)
        prepared = self._prepare(query, embed_as) if query and query.strip() else None
        with self._db.search(self._timeout()) as conn:
            self._check_filter(conn, flt)
            if prepared is None:
                return []
            return self._search_prepared(conn, prepared, k, flt)

    def _prepare(self, query: str, embed_as: EmbedAs) -> Any:  # pragma: no cover - both subclasses override it
        """What the search statement takes for ``query`` (its tokens, its vector), or ``None``: nothing to find."""
        raise NotImplementedError

    def _search_prepared(
        self, conn: Any, prepared: Any, k: int, flt: SqlFilter | None
    ) -> list[tuple[Document, float]]:  # pragma: no cover - both subclasses override it
        raise NotImplementedError

    def served_ids(self, ids: Sequence[str]) -> ServedIds:
        """Which of ``ids`` this retriever would still return now, and which it no longer will
        (:mod:`~langchain_ragspine.served`; :meth:`~langchain_ragspine.backends.postgres.chunk_store.
        PostgresConnection.served_ids`: the search tables as they are now, so a relabel or a retraction committed
        by any process counts at once).

        Raises:
            TypeError: ``ids`` is a str or holds a non-str.
            StoreError: the query fails.
        """
        return self._db.served_ids(ids)

    def _retrieve(self, query: str, call: SyncCall) -> list[Document]:
        embed_as = check_embed_as(call.options.get(EMBED_AS_OPTION))  # only the dense class declares the option
        return [d for d, _ in self._search_text(query, cast(int, call.k), call.filter, embed_as)]


class PostgresBM25Retriever(_PostgresRetriever):
    """Okapi BM25 (Lucene variant) computed in SQL over a PostgreSQL store's postings; a drop-in for
    :class:`~langchain_ragspine.retrievers.bm25.BM25Retriever` over the same chunks, with the same scores.

    Attributes:
        url: the store's ``postgresql://`` URL.
        k: number of results (default 6, :data:`~langchain_ragspine.arguments.DEFAULT_K`), an ``int >= 1``; ``invoke(query, k=...)`` overrides it per call.
        k1: term-frequency saturation (default 1.5).
        b: length normalisation in [0, 1] (default 0.75).
        filter: the retriever's own metadata filter; ``invoke(query, filter=...)`` is ANDed with it.
        score_threshold: the lowest BM25 score a result may have (default ``None``: none); ``invoke(query,
            score_threshold=...)`` sets it for one call.  The scale is
            :class:`~langchain_ragspine.retrievers.bm25.BM25Retriever`'s (the raw BM25 score, ``>= 0``, unbounded
            and corpus-dependent), and so is every kept result.
        statement_timeout: the longest a search may run, in seconds (``0``: no limit; default, and ``None``:
            ``RAGSPINE_PG_STATEMENT_TIMEOUT`` read when the retriever is made, else 30); a search cancelled by it
            raises ``StoreError``.

    The tokenizer is the store's (``store.tokenizer``), used for the query as it was for the chunks.  A query is at
    most :data:`~langchain_ragspine.retrievers.bm25.MAX_QUERY_CHARS` characters, as for ``BM25Retriever``.

    Raises:
        ValueError: ``k < 1``, ``k1 < 0``, ``b`` outside [0, 1], a malformed filter, a bad ``statement_timeout``,
            a negative or non-finite ``score_threshold``; (when invoked) a query longer than ``MAX_QUERY_CHARS``.
        TypeError: ``k`` is not an int; ``score_threshold`` is not a number.
        StoreError: no store at ``url``; its postings were written by another version of its tokenizer (re-ingest).
    """

    k1: float = 1.5
    b: float = 0.75
    score_threshold: float | None = None

    #: ``invoke(query, score_threshold=…)`` sets the threshold of one call.
    call_options: ClassVar[tuple[str, ...]] = ("score_threshold",)
    _filter_row: ClassVar[str] = "h.chunk_row"
    _tokenizer: str = PrivateAttr()
    _tokenize: Tokenizer = PrivateAttr()

    @field_validator("score_threshold", mode="before")
    @classmethod
    def _check_threshold(cls, value: Any) -> float | None:
        return bm25_threshold(value)

    def model_post_init(self, context: Any, /) -> None:
        if self.k1 < 0:
            raise ValueError(f"k1 must be >= 0, got {self.k1}")
        if not 0.0 <= self.b <= 1.0:
            raise ValueError(f"b must be in [0, 1], got {self.b}")
        super().model_post_init(context)

    def _open(self, store: PostgresChunkStore) -> None:
        self._tokenizer = store.tokenizer
        if not store.postings_are_current():
            raise StoreError(
                f"stale postings: written with tokenizer {self._tokenizer!r} version "
                f"{store.postings_tokenizer_version}, which now produces version "
                f"{tokenizer_version(self._tokenizer)} tokens; run `ragspine ingest` again to rewrite them "
                "(documents other writers added, such as the vector store's, are kept, and their postings "
                "rewritten too)",
                path=store.path,
            )
        self._tokenize = get_tokenizer(self._tokenizer)

    @property
    def tokenizer(self) -> str:
        """The store's tokenizer name."""
        return self._tokenizer

    def search(
        self,
        query: str,
        *,
        k: int | None = None,
        filter: Mapping[str, Any] | None = None,
        score_threshold: float | None = None,
    ) -> list[tuple[Document, float]]:
        """Top ``k`` ``(chunk, score)`` pairs scoring ``>= score_threshold`` (else the retriever's
        :attr:`score_threshold`); otherwise as :meth:`_PostgresRetriever.search`.  Results come best first, so
        dropping those below the threshold after the cut to ``k`` keeps the top ``k`` of those above it.

        Raises:
            TypeError, ValueError: a bad ``score_threshold`` (before the store is asked); see the base's.
        """
        threshold = bm25_threshold(self.score_threshold, score_threshold)
        hits = super().search(query, k=k, filter=filter)
        return hits if threshold is None else [(d, s) for d, s in hits if s >= threshold]

    def _retrieve(self, query: str, call: SyncCall) -> list[Document]:
        threshold = bm25_threshold(self.score_threshold, call.options.get("score_threshold"))
        hits = self._search_text(query, cast(int, call.k), call.filter, "query")  # k, filter: resolved by the base
        return [d for d, s in hits if threshold is None or s >= threshold]

    def _prepare(self, query: str, embed_as: EmbedAs) -> list[str] | None:
        """The query's tokens (``None`` when it has none).

        Raises:
            ValueError: ``query`` is longer than :data:`~langchain_ragspine.retrievers.bm25.MAX_QUERY_CHARS`.
        """
        return self._tokenize(check_bm25_query(query)) or None

    def _search_prepared(
        self, conn: Any, tokens: list[str], k: int, flt: SqlFilter | None
    ) -> list[tuple[Document, float]]:
        """BM25 in one SQL statement (see :data:`_BM25_SQL`); chunks sharing no token with the query score 0 and
        are left out."""
        where, fparams = (flt.sql, flt.params) if flt is not None else ("TRUE", ())
        k1, b = np.float32(self.k1), np.float32(self.b)
        rows = conn.execute(
            _BM25_SQL.format(filter=where),
            (tokens, list(dict.fromkeys(tokens)), float(k1), float(np.float32(1.0 - self.b)), float(b),
             *fparams, k - 1, k),
        ).fetchall()
        return [(d, d.metadata["scores"]["bm25"]) for d in self._documents(rows, "bm25")]



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


class PostgresDenseRetriever(_PostgresRetriever):
    """Dense retrieval with pgvector over a PostgreSQL store's vectors (cosine similarity of unit vectors).

    Attributes:
        url: the store's ``postgresql://`` URL.
        embedding: the query encoder; it must be the model the store's vectors were made with.
        model_key: the cache key of the store's vectors (default: the store's ``vector_model_key``).
        k: number of results (default 6, :data:`~langchain_ragspine.arguments.DEFAULT_K`), an ``int >= 1``; ``invoke(query, k=...)`` overrides it per call.
        filter: the retriever's own metadata filter; ``invoke(query, filter=...)`` is ANDed with it.
        ef_search: pgvector's ``hnsw.ef_search`` (default, and ``None``: ``RAGSPINE_PG_EF_SEARCH`` read when the
            retriever is made, else 100; raised to ``k``).
        statement_timeout: the longest a search may run, in seconds (``0``: no limit; default, and ``None``:
            ``RAGSPINE_PG_STATEMENT_TIMEOUT`` read when the retriever is made, else 30); a search cancelled by it
            raises ``StoreError``.  The query
            is embedded before a pooled connection is taken, so a slow model holds none.

    Call options: ``invoke(query, k=…, filter=…, embed_as=…)``, ``embed_as`` as for
    :class:`~langchain_ragspine.retrievers.dense.DenseRetriever`: ``"query"`` (default, ``embed_query``) or
    ``"document"`` (``embed_documents([text])[0]``, e.g. HyDE's hypothetical document).

    Raises:
        ValueError: ``k < 1``, a malformed filter, a bad ``statement_timeout``, an ``embed_as`` other than
            ``"query"`` / ``"document"``.
        TypeError: ``k`` is not an int.
        StoreError: no store at ``url``; it has no vectors (ingest with an embedding model first).
    """

    embedding: Embeddings
    model_key: str | None = None
    ef_search: int | None = Field(default_factory=lambda: int(configured_number("pg_ef_search")))  # never None once made

    #: pgvector's ``hnsw.iterative_scan`` mode for filtered HNSW searches (tests switch it ``off`` to show why).
    _ITERATIVE_SCAN: ClassVar[str] = "relaxed_order"
    #: ``invoke(query, embed_as="document")`` embeds the text with ``embed_documents`` (see the class docstring).
    call_options: ClassVar[tuple[str, ...]] = (EMBED_AS_OPTION,)

    _dim: int = PrivateAttr()
    _key: str = PrivateAttr()
    _hnsw: bool = PrivateAttr(default=False)

    @field_validator("ef_search", mode="before")
    @classmethod
    def _ef_search_default(cls, value: Any) -> Any:
        return configured_number("pg_ef_search") if value is None else value  # None: RAGSPINE_PG_EF_SEARCH, now

    def _open(self, store: PostgresChunkStore) -> None:
        key = self.model_key or store.meta("vector_model_key")
        dim = store.meta("vector_dim")
        if not key or not dim:
            raise StoreError(
                "this store has no vectors: run `ragspine ingest PATH --store URL --embedding e5` (or another spec)",
                path=store.path,
            )
        self._key, self._dim = key, int(dim)
        self._hnsw = has_hnsw_index(store.db, key)

    @property
    def resolved_model_key(self) -> str:
        """The model key of the vectors searched."""
        return self._key

    @property
    def uses_hnsw(self) -> bool:
        """Whether searches go through the HNSW index (read when the retriever was made)."""
        return self._hnsw

    def search_by_vector(
        self, vector: np.ndarray | list[float], *, k: int | None = None, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[Document, float]]:
        """Top ``k`` ``(chunk, cosine)`` pairs for a query ``vector`` of shape ``(d,)``, best first, ties by
        ``chunk_id``, among the chunks matching both filters (for benchmarks and a ``VectorStore`` face).

        Raises:
            TypeError, ValueError: a bad ``k``; a malformed filter; a vector of another dimension or with
                non-finite values.
            StoreError: the query fails.
        """
        return [(d, score) for d, score, _ in self._by_vector(vector, k, filter, with_vectors=False)]

    def search_by_vector_with_embeddings(
        self, vector: np.ndarray | list[float], *, k: int | None = None, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[Document, float, np.ndarray]]:
        """:meth:`search_by_vector` with each chunk's stored unit vector (float32, shape ``(d,)``): the candidates
        of a Maximal Marginal Relevance search (:meth:`~langchain_ragspine.vectorstores.PostgresVectorStore.
        max_marginal_relevance_search`), read in the same statement.

        Raises:
            TypeError, ValueError, StoreError: as :meth:`search_by_vector`.
        """
        return self._by_vector(vector, k, filter, with_vectors=True)

    def _by_vector(
        self, vector: np.ndarray | list[float], k: int | None, filter: Mapping[str, Any] | None, *, with_vectors: bool
    ) -> list[tuple[Document, float, np.ndarray]]:
        k = self.k if k is None else check_k(k)
        q = np.asarray(vector, dtype=np.float32).reshape(-1)
        if q.shape[0] != self._dim:
            raise ValueError(f"query vector must have shape ({self._dim},), got {np.shape(vector)}")
        if not np.all(np.isfinite(q)):
            raise ValueError("query vector contains NaN or infinite values")
        flt = self._call_filter(filter, "s.chunk_row")
        with self._db.search(self._timeout()) as conn:
            self._check_filter(conn, flt)
            if with_vectors:
                return self._search_rows(conn, l2_normalize(q), k, flt, with_vectors=True)
            return [(d, score, _NO_VECTOR) for d, score in self._search(conn, l2_normalize(q), k, flt)]

    def _search(self, conn: Any, q: np.ndarray, k: int, flt: SqlFilter | None) -> list[tuple[Document, float]]:
        return [(d, score) for d, score, _ in self._search_rows(conn, q, k, flt, with_vectors=False)]

    def _search_rows(
        self, conn: Any, q: np.ndarray, k: int, flt: SqlFilter | None, *, with_vectors: bool
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
        if not self._hnsw:  # exact: every vector scored, ties by chunk_id as in the file store
            rows = conn.execute(
                f"SELECT {cols}, -(e.embedding <#> %s::vector) AS score {joins} WHERE e.model_key = %s AND "
                f"s.has_text AND ({where}) ORDER BY e.embedding <#> %s::vector, s.chunk_id LIMIT %s",
                (q, self._key, *fparams, q, k),
            ).fetchall()
        else:
            dist = _sql.SQL("e.embedding::vector({dim}) <#> %s::vector({dim})").format(dim=_sql.Literal(self._dim))
            query = _sql.SQL(
                "SELECT * FROM (SELECT {cols}, -({dist}) AS score, s.chunk_id AS tie {joins} WHERE e.model_key = {key} "
                "AND s.has_text AND ({where}) ORDER BY {dist} LIMIT %s) t ORDER BY score DESC, tie"
            ).format(
                cols=_sql.SQL(cols), dist=dist, joins=_sql.SQL(joins), key=_sql.Literal(self._key),
                where=_sql.SQL(where),  # type: ignore[arg-type]  # our own SQL text with %s placeholders
            )
            ef = max(cast(int, self.ef_search), k)
            with conn.transaction():
                conn.execute(_sql.SQL("SET LOCAL hnsw.ef_search = {}").format(_sql.Literal(int(ef))))
                mode = self._ITERATIVE_SCAN if self._ITERATIVE_SCAN in ("off", "strict_order") else "relaxed_order"
                conn.execute(f"SET LOCAL hnsw.iterative_scan = {mode}")
                # Walk the index: the planner estimates the join on (chunk_id, content_hash) at ~1 row (two
                # correlated columns), so it always preferred scoring every vector and sorting them (measured: the
                # index unused, 0.9 s per query at 100k vectors); with sorts disabled, ordering by the HNSW scan is
                # the plan (the final re-sort of k rows still runs).
                conn.execute("SET LOCAL enable_sort = off")
                rows = [r[:-1] for r in conn.execute(query, (q, *fparams, q, k)).fetchall()]
        # a row: the chunk columns (row_to_stored reads the first 15), [its vector], the score last
        vectors = [np.asarray(r[-2].to_numpy(), dtype=np.float32) if with_vectors else _NO_VECTOR for r in rows]
        docs = self._documents(rows, "vector")
        return [(d, d.metadata["scores"]["vector"], v) for d, v in zip(docs, vectors, strict=True)]

    def search(
        self, query: str, *, k: int | None = None, filter: Mapping[str, Any] | None = None, embed_as: str = "query"
    ) -> list[tuple[Document, float]]:
        """Top ``k`` ``(chunk, cosine)`` pairs for ``query``, embedded with ``embed_query`` (``embed_as="query"``,
        the default) or ``embed_documents`` (``"document"``); otherwise as :meth:`_PostgresRetriever.search`.

        Raises:
            ValueError: an ``embed_as`` other than ``"query"`` / ``"document"``; as :meth:`_PostgresRetriever.search`.
            TypeError, StoreError: as :meth:`_PostgresRetriever.search`.
        """
        embed = check_embed_as(embed_as)
        return self._search_text(query, *self._resolved(k, filter), embed)

    def _prepare(self, query: str, embed_as: EmbedAs) -> np.ndarray:
        """``query`` embedded by :attr:`embedding` in the ``embed_as`` role, as a unit vector."""
        return l2_normalize(np.asarray(embed_search_text(self.embedding, query, embed_as), dtype=np.float32))

    def _search_prepared(
        self, conn: Any, vector: np.ndarray, k: int, flt: SqlFilter | None
    ) -> list[tuple[Document, float]]:
        return self._search(conn, vector, k, flt)
