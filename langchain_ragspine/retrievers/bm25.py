"""BM25 retriever for Japanese, Chinese and English text, a drop-in for LangChain's ``BM25Retriever``.

Okapi BM25 (Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009) in Lucene's
variant: ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))`` — never negative — and
``tf' = tf / (tf + k1 * (1 - b + b * dl / avgdl))``.  Scores are precomputed into a sparse term-document matrix by
`bm25s <https://github.com/xhluca/bm25s>`_ (Lù, "BM25S: Orders of magnitude faster lexical search via eager sparse
scoring", 2024), so a query costs one sparse row-sum instead of a Python loop over every document (which is what
``rank_bm25`` behind ``langchain_community``'s retriever does).  The index build and its files are
:mod:`langchain_ragspine.backends.directory.bm25_index`; this module is the retriever over it.

Differences from ``langchain_community.retrievers.BM25Retriever`` a user may rely on:

* ``tokenizer`` (a name from :mod:`langchain_ragspine.tokenizers` or a callable) replaces ``preprocess_func``
  (still accepted), and defaults to ``"auto"``, which handles Japanese and Chinese;
* documents with score 0 (no query term) are never returned; ties break on ``chunk_id``; ``score_threshold``
  drops the documents scoring below it (the raw BM25 score, see :class:`BM25Retriever`);
* each result is a copy of the stored ``Document`` with ``metadata["scores"] = {"bm25": s, "vector": None,
  "fused": s, "rerank": None}``;
* ``filter`` restricts candidates *before* scoring (see :mod:`langchain_ragspine.filters`); a filter given to
  ``invoke`` is ANDed with the retriever's own ``filter``, never replaces it;
* ``k`` must be an ``int >= 1`` (``"3"``, ``2.0``, ``True``, ``0`` are errors naming ``k``);
* ``save(dir)`` / ``load(dir)`` persist numpy arrays and JSON — never pickle — with the tokenizer's name and
  version, and ``load`` refuses an index whose tokens the named tokenizer no longer produces;
* documents labelled RESTRICTED (see :mod:`langchain_ragspine.document_compressors.restricted`) are dropped when
  the retriever is built: they are never indexed (so they do not even shape the IDF), scored or returned — and
  every result passes the RESTRICTED gate again on its way out;
* ``docs`` reads as a list but refuses in-place edits (assign a new list to rebuild); a document with neither
  ``chunk_id`` nor ``id`` gets a deterministic one (:func:`~langchain_ragspine.documents.with_identities`), so every
  result has ``id = chunk_id``.  The documents are indexed as given, not copied: a label you add to one afterwards
  is seen by the exit gate, but editing their text afterwards is not supported (the index keeps the old tokens);
* a query is at most :data:`MAX_QUERY_CHARS` (2,000) characters, a ``ValueError`` beyond: its cost grows with its
  terms (400,000 characters took 18 s here, and minutes on PostgreSQL, whose
  :class:`~langchain_ragspine.retrievers.postgres.PostgresBM25Retriever` has the same limit); twice HyDE's probe
  (``HyDERetriever.max_chars``, 1,000), and no generated query is longer than that;
* a document's tokens come from ``metadata["index_text"]`` when present (e.g. a contextual header + the text, see
  :func:`langchain_ragspine.text.index_text`), else from ``page_content``; results are the stored documents, so
  ``page_content`` and citations never change.
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextvars import ContextVar
from typing import Annotated, Any, ClassVar, Unpack, cast

import numpy as np
from langchain_core.documents import Document
from pydantic import Field, PrivateAttr, ValidationInfo, field_validator

from langchain_ragspine._stacklevel import user_stacklevel
from langchain_ragspine.arguments import DEFAULT_K, PositiveIntField, check_k, int_field
from langchain_ragspine.backends.directory.bm25_index import (
    build_bm25_index,
    load_bm25_index,
    save_bm25_index,
)
from langchain_ragspine.documents import (
    MAX_QUERY_CHARS,
    bm25_threshold,
    check_bm25_parameter,
    check_bm25_query,
    doc_key,
    top_rows,
    with_identities,
    with_scores,
)
from langchain_ragspine.errors import StaleIndexWarning
from langchain_ragspine.filters import (
    CompiledFilter,
    FilterField,
    FilterMasks,
    compile_filter,
    compiled_filter,
)
from langchain_ragspine.retrievers.base import (
    RagSpineRetriever,
    RunnableOptions,
    SyncCall,
    documents_from_texts,
    unrestricted_hits,
)
from langchain_ragspine.sensitivity import drop_restricted
from langchain_ragspine.text import index_text
from langchain_ragspine.tokenizers import Tokenizer, get_tokenizer

__all__ = [
    "MAX_QUERY_CHARS",
    "BM25Options",
    "BM25Retriever",
    "BM25TextOptions",
    "check_bm25_query",
]

# Set while load() validates a retriever whose index comes from disk, so model_post_init skips the build.
# (pydantic's validation context does not reach model_post_init through LangChain's BaseRetriever.)
_SKIP_BUILD: ContextVar[bool] = ContextVar("ragspine_bm25_skip_build", default=False)


class _BM25Common(RunnableOptions, total=False):
    filter: dict[str, Any] | None
    score_threshold: float | None
    workers: int | None


class BM25Options(_BM25Common, total=False):
    """The further keyword arguments of :meth:`BM25Retriever.from_documents` (typed, so mypy and IDEs flag a
    misspelling such as ``top_k=``): the retriever's other fields, and LangChain's ``preprocess_func``."""

    preprocess_func: Tokenizer


class BM25TextOptions(_BM25Common, total=False):
    """The further keyword arguments of :meth:`BM25Retriever.from_texts`: those of :meth:`from_documents`."""

    k: int
    tokenizer: str | Tokenizer
    k1: float
    b: float


class BM25Retriever(RagSpineRetriever):
    """Okapi BM25 (Lucene variant, via bm25s) over a list of ``Document``s.

    Build with :meth:`from_documents` / :meth:`from_texts`, or directly with ``BM25Retriever(docs=[...])``.

    Attributes:
        docs: the indexed documents (typically chunks from ``ParagraphTextSplitter``): after construction an
            :class:`~langchain_ragspine.retrievers.base.IndexedDocuments` of the documents given (RESTRICTED
            ones removed; a document without ``chunk_id`` or ``id`` replaced by a copy with ``chunk_id = id =``
            :func:`~langchain_ragspine.documents.content_chunk_id` of its text).  Read it as a list;
            ``docs[i] = d`` / ``append`` are a ``TypeError``; assigning ``retriever.docs = [...]`` (or
            ``model_copy(update={"docs": [...]})``) rebuilds the index.  Your own ``Document`` objects are never
            modified.
        k: number of results (default 6, :data:`~langchain_ragspine.arguments.DEFAULT_K`), an ``int >= 1``; ``invoke(query, k=...)`` overrides it per call.
        tokenizer: tokenizer name (``"auto"``, ``"cjk"``, ``"fugashi"``, ``"whitespace"``) or a callable
            ``str -> list[str]``; queries and documents use the same one.
        k1: term-frequency saturation (default 1.5).
        b: length normalisation in [0, 1] (default 0.75).
        filter: the retriever's own metadata filter (:mod:`langchain_ragspine.filters`); ``invoke(query,
            filter=...)`` is ANDed with it, so a call narrows the results but never widens them.
        score_threshold: the lowest BM25 score a result may have (default ``None``: every document sharing a
            term with the query); ``invoke(query, score_threshold=...)`` sets it for one call.  The scale is the
            raw Okapi BM25 score of ``metadata["scores"]["bm25"]`` (Lucene IDF, so ``>= 0``): unbounded and
            corpus-dependent — it grows with the number of query terms and their rarity — so choose it per corpus
            and tokenizer from scores you have seen; :class:`~langchain_ragspine.retrievers.hybrid.HybridRetriever`
            offers a threshold on its fused score in [0, 1].  The same in :class:`~langchain_ragspine.retrievers.
            postgres.PostgresBM25Retriever`, whose scores are these.  Not saved with the index (:meth:`save`
            refuses a retriever that has one: pass it to :meth:`load`).
        workers: processes that tokenize ``docs`` when the index is built (default 1: this process; ``0``:
            every usable core for a large corpus); the index is the same whatever the number
            (:mod:`langchain_ragspine.backends.directory.bm25_parallel`).  Not saved with the index.

    ``invoke`` returns at most ``k`` documents with a positive score (and at least ``score_threshold``), best first,
    ties broken by ``chunk_id``.
    An empty corpus, an empty or whitespace-only query, and a query with no indexed term return ``[]``.
    RESTRICTED documents are removed from ``docs`` at construction, and from every result (a document of ``docs``
    labelled RESTRICTED in place afterwards is never returned).

    Raises:
        ValueError: ``k < 1``, ``k1 < 0`` or ``b`` outside [0, 1]; an unknown tokenizer; a malformed filter; a
            negative or non-finite ``score_threshold``; (when invoked) a query longer than :data:`MAX_QUERY_CHARS`
            characters.
        TypeError: ``k`` is not an int; ``score_threshold`` is not a number.

    Example:
        >>> from langchain_core.documents import Document
        >>> from langchain_ragspine import BM25Retriever
        >>> docs = [
        ...     Document(page_content="梅雨は六月から七月にかけて続く雨の季節。", metadata={"chunk_id": "tsuyu#0"}),
        ...     Document(page_content="北京是中国的首都。", metadata={"chunk_id": "beijing#0"}),
        ...     Document(page_content="The chunk store keeps every version.", metadata={"chunk_id": "store#0"}),
        ... ]
        >>> retriever = BM25Retriever.from_documents(docs, k=2)
        >>> [d.metadata["chunk_id"] for d in retriever.invoke("梅雨はいつ")]  # only documents sharing a term
        ['tsuyu#0']
        >>> retriever.invoke("北京的首都", k=1)[0].metadata["scores"]["vector"] is None  # one channel: BM25
        True
    """

    docs: list[Document] = Field(default_factory=list, repr=False)
    k: PositiveIntField = DEFAULT_K
    tokenizer: str | Callable[[str], list[str]] = "auto"
    k1: float = 1.5
    b: float = 0.75
    filter: FilterField = None
    score_threshold: float | None = None
    workers: Annotated[int | None, int_field(minimum=0, allow_none=True)] = Field(default=1, repr=False)

    #: Assigning one of these after construction rebuilds the index (see :class:`RagSpineRetriever`).
    index_fields = ("docs", "tokenizer", "k1", "b")
    #: ``invoke(query, score_threshold=…)`` sets the threshold of one call.
    call_options: ClassVar[tuple[str, ...]] = ("score_threshold",)

    _tokenize: Tokenizer = PrivateAttr()
    _bm25: Any = PrivateAttr(default=None)
    _tie_rank: np.ndarray = PrivateAttr()
    _masks: FilterMasks = PrivateAttr()

    @classmethod
    def _translate_arguments(cls, data: dict[str, Any]) -> dict[str, Any]:
        # LangChain's BM25Retriever names the tokenizer `preprocess_func`; accept it for drop-in use.
        if "preprocess_func" in data:
            pre = data.pop("preprocess_func")
            data.setdefault("tokenizer", pre)
        data.pop("vectorizer", None)
        return data

    @field_validator("score_threshold", mode="before")
    @classmethod
    def _check_threshold(cls, value: Any) -> float | None:
        return bm25_threshold(value)

    @field_validator("k1", "b")
    @classmethod
    def _check_bm25(cls, value: float, info: ValidationInfo) -> float:  # per field: refused before anything changes
        return check_bm25_parameter(str(info.field_name), value)

    def model_post_init(self, context: Any, /) -> None:
        """Validate parameters and build the index from ``docs`` (unless :meth:`load` supplies one)."""
        check_bm25_parameter("k1", self.k1)  # also for model_construct / load, which skip the field checks
        check_bm25_parameter("b", self.b)
        compile_filter(self.filter)
        # each with an identity; RESTRICTED ones never indexed, scored or returned
        docs = self._set_indexed_docs(drop_restricted(with_identities(self.docs)))
        self._masks = FilterMasks([d.metadata for d in docs])
        self._tokenize = get_tokenizer(self.tokenizer)
        self._tie_rank = _tie_ranks(docs)
        if not _SKIP_BUILD.get():
            self._bm25 = build_bm25_index(
                [index_text(d) for d in docs], self._tokenize, k1=self.k1, b=self.b, workers=self.workers
            )
        self._mark_built()

    # -- construction -----------------------------------------------------------------------------------------------
    @classmethod
    def from_documents(
        cls,
        documents: Iterable[Document],
        *,
        k: int = DEFAULT_K,
        tokenizer: str | Tokenizer = "auto",
        k1: float = 1.5,
        b: float = 0.75,
        bm25_params: Mapping[str, Any] | None = None,
        **kwargs: Unpack[BM25Options],
    ) -> BM25Retriever:
        """Index ``documents`` (``bm25_params={"k1":…, "b":…}`` as in LangChain's retriever is accepted too)."""
        params: dict[str, Any] = {"k1": k1, "b": b, **dict(bm25_params or {})}
        fields: dict[str, Any] = dict(kwargs)
        if "preprocess_func" in fields:  # LangChain's name for the tokenizer
            tokenizer = fields.pop("preprocess_func")
        return cls(docs=list(documents), k=k, tokenizer=tokenizer, **params, **fields)

    @classmethod
    def from_texts(
        cls,
        texts: Iterable[str],
        metadatas: Iterable[dict[str, Any]] | None = None,
        ids: Iterable[str] | None = None,
        bm25_params: Mapping[str, Any] | None = None,
        preprocess_func: Tokenizer | None = None,
        **kwargs: Unpack[BM25TextOptions],
    ) -> BM25Retriever:
        """Index plain ``texts`` with optional parallel ``metadatas`` and ``ids``; ``kwargs`` as in
        :meth:`from_documents`.  The positional order is LangChain's: ``texts, metadatas, ids, bm25_params,
        preprocess_func``.

        Raises:
            ValueError: ``metadatas`` or ``ids`` has a different length than ``texts``.
        """
        docs = documents_from_texts(texts, metadatas, ids)
        if preprocess_func is not None:
            kwargs["tokenizer"] = preprocess_func
        return cls.from_documents(docs, bm25_params=bm25_params, **kwargs)

    @property
    def preprocess_func(self) -> Tokenizer:
        """The tokenizer callable (LangChain's ``BM25Retriever`` attribute name)."""
        return self._tokenize

    @property
    def vectorizer(self) -> Any:
        """The underlying ``bm25s.BM25`` index (``None`` for an empty corpus); LangChain's attribute name."""
        return self._bm25

    # -- retrieval --------------------------------------------------------------------------------------------------
    def score(self, query: str) -> np.ndarray:
        """BM25 score of every document for ``query``: float32 array of shape ``(len(docs),)``.

        Raises:
            ValueError: ``query`` is longer than :data:`MAX_QUERY_CHARS`.
        """
        check_bm25_query(query)
        n = len(self._indexed_docs())
        if self._bm25 is None or not query or not query.strip():
            return np.zeros(n, dtype=np.float32)
        ids = self._bm25.get_tokens_ids(self._tokenize(query))
        if not ids:
            return np.zeros(n, dtype=np.float32)
        return np.asarray(self._bm25.get_scores_from_ids(ids), dtype=np.float32)

    def search(
        self,
        query: str,
        *,
        k: int | None = None,
        filter: Mapping[str, Any] | None = None,
        score_threshold: float | None = None,
    ) -> list[tuple[int, float]]:
        """Top ``k`` ``(doc_position, score)`` pairs with score > 0 (and ``>= score_threshold``, else the
        retriever's :attr:`score_threshold`), best first, ties by ``chunk_id``, among the documents that match both
        the retriever's own :attr:`filter` and ``filter`` (AND) and are not RESTRICTED (a label added after the
        build is skipped before the cut to ``k``: :func:`~langchain_ragspine.retrievers.base.unrestricted_hits`).

        Raises:
            TypeError, ValueError: a bad ``k`` (see :func:`~langchain_ragspine.documents.check_k`) or
                ``score_threshold``; a malformed filter; a query longer than :data:`MAX_QUERY_CHARS`.
        """
        k = self.k if k is None else check_k(k)
        threshold = self._threshold(score_threshold)
        check_bm25_query(query)
        return self._hits(query, k, compiled_filter(self.filter, filter), threshold)

    def _hits(self, query: str, k: int, flt: CompiledFilter | None, threshold: float | None) -> list[tuple[int, float]]:
        """:meth:`search` with ``k`` and the filter resolved (``flt``: the own filter ANDed with the call's)."""
        mask = self._masks.mask(flt)
        docs = self._indexed_docs()
        if not docs:
            return []
        scores = self.score(query)
        return unrestricted_hits(functools.partial(self._top, scores, k, threshold=threshold), docs, mask)

    def _threshold(self, given: Any) -> float | None:
        return bm25_threshold(self.score_threshold, given)

    def _top(
        self, scores: np.ndarray, k: int, mask: np.ndarray | None, *, threshold: float | None = None
    ) -> list[tuple[int, float]]:
        """Top ``k`` ``(doc_position, score)`` with score > 0 (and ``>= threshold``) among ``mask``, best first,
        ties by ``chunk_id``.  The threshold is compared in double precision, as the PostgreSQL retriever does."""
        ok = scores > 0
        if threshold is not None:
            ok &= scores >= np.float64(threshold)
        if mask is not None:
            ok &= mask
        return top_rows(scores, ok, k, self._tie_rank)

    def _retrieve(self, query: str, call: SyncCall) -> list[Document]:
        threshold = self._threshold(call.options.get("score_threshold"))
        check_bm25_query(query)
        hits = self._hits(query, cast(int, call.k), call.filter, threshold)  # k and filter: resolved by the base
        docs = self._indexed_docs()
        return [with_scores(docs[i], bm25=s, fused=s) for i, s in hits]

    # -- persistence ------------------------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str], *, generation: int | None = None) -> None:
        """Write the index to directory ``path`` (replaced atomically): bm25s arrays (``.npy``, no pickle), the
        vocabulary and parameters as JSON, the documents as JSON lines, and last ``manifest.json`` with the SHA-256
        of every file and ``generation`` — the chunk-store generation ``docs`` were read at (default ``None``: not
        from a store; :func:`~langchain_ragspine.pipeline.ingest.ingest` passes it), see
        :func:`~langchain_ragspine.backends.directory.bm25_index.save_bm25_index`.

        Raises:
            ValueError: a metadata value is not JSON-serialisable; the retriever has a ``score_threshold`` (the
                index format does not record one: save without it and pass ``load(path, score_threshold=…)``).
                (A custom tokenizer callable is saved as ``null``: pass it to :meth:`load`.)
            FileExistsError: ``path`` is a file, or a non-empty directory that is not a previous save, or a previous
                save holding files a save does not write (nothing is deleted; the message names them).
            StoreWriteError: a write failed (disk full, …), naming the file; the previous save is intact.
        """
        if self.score_threshold is not None:
            raise ValueError(
                f"BM25Retriever.save does not record score_threshold={self.score_threshold}: save a copy without it "
                "(retriever.model_copy(update={'score_threshold': None})) and pass load(path, score_threshold=...)"
            )
        save_bm25_index(
            path, self._bm25, self.docs, tokenizer=self.tokenizer, k=self.k, k1=self.k1, b=self.b, filter=self.filter,
            generation=generation,
        )

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        *,
        tokenizer: str | Tokenizer | None = None,
        generation: int | None = None,
        **overrides: Any,
    ) -> BM25Retriever:
        """Load and verify an index written by :meth:`save`; ``overrides`` replace saved fields such as ``k`` or
        ``filter``.

        Every file is checked against the SHA-256 its manifest records, and the arrays against each other and the
        documents (:func:`~langchain_ragspine.backends.directory.bm25_index.load_bm25_index`), so a damaged or edited index
        is a :class:`StoreError` naming the file, never a wrong answer.  An index saved before checksums were
        recorded (no ``manifest.json``) is not trusted: it is rebuilt in memory from its documents with a
        :class:`~langchain_ragspine.errors.StaleIndexWarning` (save it again to rewrite it) — unless
        ``generation`` is given.

        Args:
            generation: the chunk-store generation the index must have been built from (default ``None``: any);
                given, an index without a manifest is a :class:`StoreError` too (the store rebuilds it).

        Raises:
            StoreError: the directory is missing, incomplete, not a ragspine BM25 index, damaged or edited (a file
                does not match its checksum, or the arrays do not hold together), from another ``generation``, or
                stale (built with another version of its tokenizer: rebuild it); see
                :func:`~langchain_ragspine.backends.directory.bm25_index.load_bm25_index`.
            ValueError: the index was saved with a custom tokenizer and ``tokenizer`` is not given.
        """
        saved = load_bm25_index(path, tokenizer=tokenizer, generation=generation)
        fields = {**saved.settings, **overrides}
        if not saved.verified:
            warnings.warn(
                f"{path}: saved BM25 index not used (no checksum: saved before checksums were recorded); rebuilt "
                "in memory from its docs.jsonl — save it again to rewrite it",
                StaleIndexWarning,
                stacklevel=user_stacklevel(),
            )
            return cls.model_validate({"docs": saved.docs, "tokenizer": saved.tokenizer, **fields})
        token = _SKIP_BUILD.set(True)
        try:
            retriever = cls.model_validate({"docs": saved.docs, "tokenizer": saved.tokenizer, **fields})
        finally:
            _SKIP_BUILD.reset(token)
        retriever._bm25 = saved.index
        return retriever


def _tie_ranks(docs: Sequence[Document]) -> np.ndarray:
    """Rank of each document's tie-break key (``chunk_id``, else ``id``, else position)."""
    keys = [(doc_key(d) or "", i) for i, d in enumerate(docs)]
    order = sorted(range(len(keys)), key=keys.__getitem__)
    ranks = np.empty(len(keys), dtype=np.int64)
    ranks[np.asarray(order, dtype=np.int64)] = np.arange(len(keys), dtype=np.int64)
    return ranks
