"""BM25 and dense retrieval computed inside PostgreSQL: :class:`PostgresBM25Retriever` and
:class:`PostgresDenseRetriever`, LangChain retrievers over a store's
:class:`~langchain_ragspine.backends.postgres.search.PostgresSearch` (the SQL and how it scores are described there).

:class:`PostgresBM25Retriever` scores Okapi BM25 in Lucene's variant in one SQL statement over the store's postings,
with the same float32 scores as :class:`~langchain_ragspine.retrievers.bm25.BM25Retriever` on the same chunks;
:class:`PostgresDenseRetriever` ranks the store's unit vectors by cosine with pgvector (exact below
``RAGSPINE_PG_HNSW_THRESHOLD`` vectors, the HNSW index with an iterative scan above it).  Every search runs in one
transaction on one pooled connection with a statement timeout (``statement_timeout``, default
``RAGSPINE_PG_STATEMENT_TIMEOUT``, 30 s: a longer one raises :class:`~langchain_ragspine.errors.StoreError`); the
query is tokenized or embedded before a connection is taken.  A BM25 query is at most
:data:`~langchain_ragspine.documents.MAX_QUERY_CHARS` characters, and a filter within the size limits of
:func:`~langchain_ragspine.filters.check_filter_size`, as in the file store (a ``ValueError`` beyond).

Both behave like their in-memory twins: results are copies of the stored chunks (``Document.id = chunk_id``) with
``metadata["scores"]`` (``bm25`` / ``vector`` and ``fused``), at most ``k``, best first, ties broken by
``chunk_id``; a filter (:mod:`langchain_ragspine.filters`, run as SQL by :mod:`langchain_ragspine.filters.sql`)
restricts the candidates before ranking and is ANDed with the retriever's own; RESTRICTED chunks are not in the
search tables, so they are never scored or returned; an empty query returns ``[]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Self, cast

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from pydantic import ConfigDict, Field, PrivateAttr, ValidationError, ValidationInfo, field_validator

from langchain_ragspine.arguments import DEFAULT_K, PositiveIntField, check_k
from langchain_ragspine.backends.postgres.chunk_store import redact_text, redact_url
from langchain_ragspine.backends.postgres.search import PostgresSearch
from langchain_ragspine.documents import bm25_threshold, check_bm25_parameter, with_scores
from langchain_ragspine.filters import CompiledFilter, FilterField, compile_filter, compiled_filter
from langchain_ragspine.retrievers.base import ContractRetriever, SyncCall
from langchain_ragspine.retrievers.embed_as import (
    EMBED_AS_OPTION,
    EmbedAs,
    check_embed_as,
    embed_search_text,
)
from langchain_ragspine.served import ServedIds
from langchain_ragspine.settings import check_timeout, configured_number

__all__ = ["PostgresBM25Retriever", "PostgresDenseRetriever"]

def _redacted(error: ValidationError) -> ValidationError:
    """``error`` with every password in its quoted inputs hidden (:func:`~langchain_ragspine.backends.postgres.
    chunk_store.redact_text` on each string)."""

    def hide(value: Any) -> Any:
        if isinstance(value, str):
            return redact_text(value)
        if isinstance(value, Mapping):
            return {k: hide(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(hide(v) for v in value)
        return value

    details: list[Any] = [{**err, "input": hide(err["input"])} for err in error.errors()]
    return ValidationError.from_exception_data(error.title, details)


class _PostgresRetriever(ContractRetriever):
    """What both retrievers share: the store URL, ``k``, the own filter ANDed with a call's, the statement timeout,
    and the store's :class:`~langchain_ragspine.backends.postgres.search.PostgresSearch` that runs the SQL.  The
    async path runs the sync one in a worker thread with the call's ``k`` / ``filter`` (psycopg's pool blocks)."""

    run_async_in_executor: ClassVar[bool] = True

    url: str
    k: PositiveIntField = DEFAULT_K
    filter: FilterField = None
    statement_timeout: float = Field(default_factory=lambda: float(configured_number("pg_statement_timeout")))

    model_config = ConfigDict(arbitrary_types_allowed=True, validate_assignment=True)

    _pg: PostgresSearch = PrivateAttr()

    #: Fields fixed once the store is opened: the search was set up for them (a new retriever for other values).
    fixed_fields: ClassVar[tuple[str, ...]] = ("url",)

    def __init__(self, **data: Any) -> None:
        refused: ValidationError | None = None
        try:
            super().__init__(**data)
        except ValidationError as e:  # pydantic quotes the arguments, the URL's password included: hide it
            refused = _redacted(e)
        if refused is not None:  # raised here, not in the except block: no __context__ holds the unredacted error
            raise refused

    def _fixed(self, name: str) -> AttributeError:
        what = "the store it opened" if name == "url" else f"the vectors it opened for its {name}"
        return AttributeError(
            f"{type(self).__name__}.{name} cannot be changed (the retriever searches {what}): make a new "
            "retriever for another one"
        )

    def __setattr__(self, name: str, value: Any) -> None:
        if name in type(self).fixed_fields and "_pg" in (self.__pydantic_private__ or {}):
            raise self._fixed(name)
        super().__setattr__(name, value)  # validated (validate_assignment), read by the next search

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """``model_copy`` (see :class:`~langchain_ragspine.retrievers.base.ContractRetriever`); :attr:`fixed_fields`
        (``url``; ``model_key`` of the dense one) cannot be updated (the copy searches the same store).

        Raises:
            AttributeError: ``update`` has a fixed field; TypeError: an unknown key.
        """
        for name in type(self).fixed_fields:
            if update and name in update:
                raise self._fixed(name)
        return super().model_copy(update=update, deep=deep)

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
        self._pg = self._open()

    def _open(self) -> PostgresSearch:  # pragma: no cover - both subclasses override it
        raise NotImplementedError

    @property
    def backend_search(self) -> PostgresSearch:
        """The store's search (:class:`~langchain_ragspine.backends.postgres.search.PostgresSearch`) this retriever
        runs, with the retriever's current field values (an assignment or ``model_copy(update=…)`` counts)."""
        return self._pg.with_options(statement_timeout=self.statement_timeout, **self._search_options())

    def _search_options(self) -> dict[str, float | None]:
        """The subclass's fields that are options of its search (``k1`` / ``b``, ``ef_search``)."""
        return {}

    def _resolved(self, k: int | None, filter: Mapping[str, Any] | None) -> tuple[int, CompiledFilter | None]:
        """What :class:`~langchain_ragspine.retrievers.base.ContractRetriever` resolves for ``invoke``, for a direct
        :meth:`search`: ``k`` (checked, else the retriever's), the own filter ANDed with ``filter``."""
        return (self.k if k is None else check_k(k)), compiled_filter(self.filter, filter)

    def served_ids(self, ids: Sequence[str]) -> ServedIds:
        """Which of ``ids`` this retriever would still return now, and which it no longer will
        (:mod:`~langchain_ragspine.served`; the search tables as they are now, so a relabel or a retraction
        committed by any process counts at once).

        Raises:
            TypeError: ``ids`` is a str or holds a non-str.
            StoreError: the query fails.
        """
        return self._pg.served_ids(ids)


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

    @field_validator("score_threshold", mode="before")
    @classmethod
    def _check_threshold(cls, value: Any) -> float | None:
        return bm25_threshold(value)

    @field_validator("k1", "b")
    @classmethod
    def _check_bm25(cls, value: float, info: ValidationInfo) -> float:  # per field: refused before anything changes
        return check_bm25_parameter(str(info.field_name), value)

    def _open(self) -> PostgresSearch:
        search = PostgresSearch(self.url, statement_timeout=self.statement_timeout, k1=self.k1, b=self.b)
        search.open_lexical()  # no store, stale postings: an error now
        return search

    def _search_options(self) -> dict[str, float | None]:
        return {"k1": self.k1, "b": self.b}

    @property
    def tokenizer(self) -> str:
        """The store's tokenizer name."""
        return self._pg.tokenizer

    def search(
        self,
        query: str,
        *,
        k: int | None = None,
        filter: Mapping[str, Any] | None = None,
        score_threshold: float | None = None,
    ) -> list[tuple[Document, float]]:
        """Top ``k`` ``(chunk, BM25 score)`` pairs for ``query``, best first, ties by ``chunk_id``, among the chunks
        matching both the retriever's :attr:`filter` and ``filter`` and sharing a query token (score > 0),
        scoring ``>= score_threshold`` (else the retriever's :attr:`score_threshold`); an empty query finds nothing.

        Raises:
            TypeError, ValueError: a bad ``k`` or ``score_threshold`` (before the store is asked); a malformed filter,
                or a non-date operand for a field holding dates; a query longer than
                :data:`~langchain_ragspine.documents.MAX_QUERY_CHARS`.
            StoreError: the query fails, or runs longer than the statement timeout.
        """
        threshold = bm25_threshold(self.score_threshold, score_threshold)
        return self._scored(query, *self._resolved(k, filter), threshold)

    def _scored(
        self, query: str, k: int, filter: CompiledFilter | None, threshold: float | None
    ) -> list[tuple[Document, float]]:
        hits = self.backend_search.lexical_search(query, k, filter, score_threshold=threshold)
        return [(with_scores(d, bm25=s, fused=s), s) for d, s in hits]

    def _retrieve(self, query: str, call: SyncCall) -> list[Document]:
        threshold = bm25_threshold(self.score_threshold, call.options.get("score_threshold"))
        return [d for d, _ in self._scored(query, cast(int, call.k), call.filter, threshold)]  # k, filter: the base's


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

    #: ``invoke(query, embed_as="document")`` embeds the text with ``embed_documents`` (see the class docstring).
    call_options: ClassVar[tuple[str, ...]] = (EMBED_AS_OPTION,)

    @field_validator("ef_search", mode="before")
    @classmethod
    def _ef_search_default(cls, value: Any) -> Any:
        if value is None:
            return configured_number("pg_ef_search")  # None: RAGSPINE_PG_EF_SEARCH, now
        return check_k(value, "ef_search")  # an int >= 1

    fixed_fields: ClassVar[tuple[str, ...]] = ("url", "model_key")

    def _open(self) -> PostgresSearch:
        search = PostgresSearch(self.url, model_key=self.model_key, ef_search=self.ef_search,
                                statement_timeout=self.statement_timeout)
        search.open_vectors()  # no store, no vectors: an error now
        return search

    def _search_options(self) -> dict[str, float | None]:
        return {"ef_search": self.ef_search}

    @property
    def resolved_model_key(self) -> str:
        """The model key of the vectors searched."""
        return self._pg.resolved_model_key

    @property
    def uses_hnsw(self) -> bool:
        """Whether searches go through the HNSW index (read when the retriever was made)."""
        return self._pg.uses_hnsw

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
        hits = self.backend_search.vector_search(vector, *self._resolved(k, filter))
        return [(with_scores(d, vector=s, fused=s), s) for d, s in hits]

    def search_by_vector_with_embeddings(
        self, vector: np.ndarray | list[float], *, k: int | None = None, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[Document, float, np.ndarray]]:
        """:meth:`search_by_vector` with each chunk's stored unit vector (float32, shape ``(d,)``): the candidates
        of a Maximal Marginal Relevance search, read in the same statement.

        Raises:
            TypeError, ValueError, StoreError: as :meth:`search_by_vector`.
        """
        hits = self.backend_search.vector_search_with_vectors(vector, *self._resolved(k, filter))
        return [(with_scores(d, vector=s, fused=s), s, v) for d, s, v in hits]

    def search(
        self, query: str, *, k: int | None = None, filter: Mapping[str, Any] | None = None, embed_as: str = "query"
    ) -> list[tuple[Document, float]]:
        """Top ``k`` ``(chunk, cosine)`` pairs for ``query``, embedded with ``embed_query`` (``embed_as="query"``,
        the default) or ``embed_documents`` (``"document"``), best first, ties by ``chunk_id``, among the chunks
        matching both the retriever's :attr:`filter` and ``filter``; an empty query finds nothing.

        Raises:
            ValueError: an ``embed_as`` other than ``"query"`` / ``"document"``; a bad ``k``; a malformed filter.
            TypeError: a bad ``k``; StoreError: the query fails or runs longer than the statement timeout.
        """
        embed = check_embed_as(embed_as)
        return self._scored(query, *self._resolved(k, filter), embed)

    def _scored(
        self, query: str, k: int, filter: CompiledFilter | None, embed_as: EmbedAs
    ) -> list[tuple[Document, float]]:
        """The query embedded (before a pooled connection is taken), then searched; an empty query still has its
        filter checked against the store (a date error raises, an unknown field warns) and finds nothing."""
        if not (query and query.strip()):
            self.backend_search.check_filter(filter)
            return []
        vector = np.asarray(embed_search_text(self.embedding, query, embed_as), dtype=np.float32)  # normalised there
        hits = self.backend_search.vector_search(vector, k, filter)
        return [(with_scores(d, vector=s, fused=s), s) for d, s in hits]

    def _retrieve(self, query: str, call: SyncCall) -> list[Document]:
        embed_as = check_embed_as(call.options.get(EMBED_AS_OPTION))
        return [d for d, _ in self._scored(query, cast(int, call.k), call.filter, embed_as)]
