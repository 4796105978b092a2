"""Maximal marginal relevance (MMR): keep relevant documents that do not repeat each other.

MMR (Carbonell & Goldstein, "The Use of MMR, Diversity-Based Reranking for Reordering Documents and Producing
Summaries", SIGIR 1998) builds the result one document at a time, each time taking the candidate ``d`` that
maximises::

    lambda_mult · rel(d)  -  (1 - lambda_mult) · max_{s ∈ selected} sim(d, s)

so a near-duplicate of an already chosen chunk (an overlapping neighbour, the same paragraph in two versions) gives
way to the next different one.  ``lambda_mult = 1`` is the plain relevance order; ``0`` is maximal diversity.

Relevance ``rel`` and similarity ``sim``, both in [0, 1] for the usual scores:

* ``rel`` comes from the retrieval itself by default — the normalised ``scores`` the documents carry (``rerank``,
  else ``fused``, else ``bm25``, else ``vector``, the first that every document has), else their rank
  (``1 - i / n``) — so MMR keeps the first stage's ranking and only adds the diversity term;
  ``relevance="query"`` uses the cosine of each candidate to the query embedding instead, as LangChain's
  ``max_marginal_relevance_search`` does;
* ``sim`` is the cosine between candidates with ``embeddings`` (any LangChain ``Embeddings``, ``embed_documents``
  of ``page_content``), else — offline, deterministic, no model — the Jaccard overlap of their token sets from the
  package tokenizer (``"auto"`` by default, the one BM25 uses).

Ties are broken by input position, i.e. by the retrieval order.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.embeddings import Embeddings
from pydantic import ConfigDict, PrivateAttr, field_validator

from langchain_ragspine.arguments import DEFAULT_K, PositiveIntField, known_fields
from langchain_ragspine.documents import check_documents
from langchain_ragspine.sensitivity import drop_restricted
from langchain_ragspine.tokenizers import Tokenizer, get_tokenizer

__all__ = ["MMRCompressor", "jaccard", "mmr_select", "relevance_from_scores"]

#: Score channels read (in order) for the relevance of documents without embeddings.
RELEVANCE_CHANNELS = ("rerank", "fused", "bm25", "vector")


def mmr_select(
    relevance: Sequence[float], similarity: Callable[[int, int], float], k: int, lambda_mult: float = 0.5
) -> list[int]:
    """Greedy MMR selection: up to ``k`` positions of ``relevance`` in selection order.

    Args:
        relevance: ``rel(d)`` per candidate (higher is better).
        similarity: ``sim(i, j)`` between candidates ``i`` and ``j`` (symmetric; higher is more alike).
        k: how many to select (``min(k, len(relevance))`` are returned).
        lambda_mult: the weight of relevance against diversity, in [0, 1].

    Each step takes the candidate with the highest ``lambda_mult · rel - (1 - lambda_mult) · max sim to the
    selected``; ties go to the lower position.  The first pick is the most relevant candidate.
    """
    n = len(relevance)
    selected: list[int] = []
    max_sim = [-math.inf] * n  # highest similarity of each candidate to the selected ones
    remaining = list(range(n))
    while remaining and len(selected) < k:
        best, best_value = remaining[0], -math.inf
        for i in remaining:
            # the first pick is the most relevant for every lambda_mult (scaling by a tiny lambda could tie it)
            value = lambda_mult * relevance[i] - (1.0 - lambda_mult) * max_sim[i] if selected else relevance[i]
            if value > best_value:
                best, best_value = i, value
        selected.append(best)
        remaining.remove(best)
        for i in remaining:
            max_sim[i] = max(max_sim[i], similarity(i, best))
    return selected


def jaccard(a: set[str], b: set[str]) -> float:
    """``|a ∩ b| / |a ∪ b|``; two empty sets give 0.0."""
    if not a and not b:
        return 0.0
    return len(a & b) / len(a | b)


def _finite(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def relevance_from_scores(documents: Sequence[Document]) -> list[float]:
    """Relevance in [0, 1] of documents in retrieval order, from what they carry.

    The first channel of :data:`RELEVANCE_CHANNELS` that *every* document has as a finite number in
    ``metadata["scores"]``, divided by the largest when none is negative (so ratios survive: BM25 10, 6, 2 →
    1.0, 0.6, 0.2), else min-max normalised (all equal → 1.0); when no channel is complete, the rank: ``1 - i / n``.
    """
    n = len(documents)
    if n == 0:
        return []
    for channel in RELEVANCE_CHANNELS:
        values: list[float] = []
        for doc in documents:
            scores = doc.metadata.get("scores")
            value = _finite(scores.get(channel)) if isinstance(scores, Mapping) else None
            if value is None:
                break
            values.append(value)
        else:
            lo, hi = min(values), max(values)
            if lo >= 0.0 and hi > 0.0:  # BM25, cosine, fused scores: keep their ratios
                return [v / hi for v in values]
            return [1.0] * n if hi <= lo else [(v - lo) / (hi - lo) for v in values]
    return [1.0 - i / n for i in range(n)]


def _unit_rows(vectors: Any) -> np.ndarray:
    arr = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(arr, axis=-1, keepdims=True)
    return arr / np.where(norms > 0, norms, 1.0)


class MMRCompressor(BaseDocumentCompressor):
    """Select ``k`` relevant, mutually different documents by maximal marginal relevance (a
    ``BaseDocumentCompressor``).

    Args:
        embeddings: an ``Embeddings`` model for the similarity between documents (cosine); ``None`` (default) uses
            token-set Jaccard (see the module docstring).  With embeddings the candidates are embedded on every
            call (an ``Embeddings`` with a cache, such as LangChain's ``CacheBackedEmbeddings``, avoids repeats).
        relevance: ``"retrieval"`` (default) — relevance from the scores / order the documents arrive with
            (:func:`relevance_from_scores`), so the first-stage ranking is kept and only the diversity term is
            added; ``"query"`` — cosine of each document to the query embedding, as LangChain's
            ``max_marginal_relevance_search`` does (needs ``embeddings``); see ``benchmarks/RESULTS.md``, section
            ``postprocess``, for both measured after the hybrid retriever.
        lambda_mult: relevance weight in [0, 1] (default 0.5, LangChain's default): 1 keeps the relevance order.
        k: documents returned (default 6, :data:`~langchain_ragspine.arguments.DEFAULT_K`).
        tokenizer: tokenizer name or callable for the Jaccard similarity (default ``"auto"``).

    ``compress_documents(documents, query)`` drops RESTRICTED documents, then returns at most ``k`` of the others in
    MMR selection order — the input ``Document`` objects, unchanged.  An empty input returns ``[]`` without calling
    the embeddings.  ``acompress_documents`` uses ``aembed_query`` / ``aembed_documents``.

    Raises:
        TypeError: ``k`` not an int; ``lambda_mult`` not a number; ``embeddings`` not an ``Embeddings``.
        ValueError: ``k < 1``; ``lambda_mult`` outside [0, 1]; an unknown ``relevance``, or ``"query"`` without
            embeddings; an unknown tokenizer; at call time, embeddings of the wrong count.
    """

    _known = known_fields()

    embeddings: Embeddings | None = None
    relevance: Literal["retrieval", "query"] = "retrieval"
    lambda_mult: float = 0.5
    k: PositiveIntField = DEFAULT_K
    tokenizer: str | Callable[[str], list[str]] = "auto"

    model_config = ConfigDict(arbitrary_types_allowed=True)

    _tokenize: Tokenizer = PrivateAttr()

    @field_validator("lambda_mult", mode="before")
    @classmethod
    def _check_lambda(cls, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"lambda_mult must be a number in [0, 1], got {value!r}")
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"lambda_mult must be in [0, 1], got {value!r}")
        return float(value)

    def model_post_init(self, context: Any, /) -> None:
        """Check ``relevance`` against ``embeddings`` and resolve the tokenizer."""
        if self.relevance == "query" and self.embeddings is None:
            raise ValueError("relevance='query' needs embeddings (the cosine of each document to the query)")
        self._tokenize = get_tokenizer(self.tokenizer)

    def _select(self, docs: list[Document], similarity: Callable[[int, int], float], relevance: list[float]) -> list[Document]:
        return [docs[i] for i in mmr_select(relevance, similarity, self.k, self.lambda_mult)]

    def _select_by_tokens(self, docs: list[Document]) -> list[Document]:
        token_sets = [set(self._tokenize(d.page_content)) for d in docs]
        return self._select(docs, lambda i, j: jaccard(token_sets[i], token_sets[j]), relevance_from_scores(docs))

    def _select_by_vectors(self, docs: list[Document], query_vector: Any, doc_vectors: Any) -> list[Document]:
        d = _unit_rows(doc_vectors)
        if d.ndim != 2 or d.shape[0] != len(docs):
            raise ValueError(f"embed_documents returned {d.shape[0] if d.ndim else 0} vectors for {len(docs)} texts")
        relevance = (d @ _unit_rows(query_vector)).tolist() if query_vector is not None else relevance_from_scores(docs)
        sim = d @ d.T
        return self._select(docs, lambda i, j: float(sim[i, j]), relevance)

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """At most ``k`` non-RESTRICTED ``documents`` in MMR order (see the class docstring)."""
        docs = drop_restricted(check_documents(documents, f"{type(self).__name__}.compress_documents"))
        if not docs or self.embeddings is None:
            return self._select_by_tokens(docs)
        query_vector = self.embeddings.embed_query(query) if self.relevance == "query" else None
        return self._select_by_vectors(docs, query_vector, self.embeddings.embed_documents([d.page_content for d in docs]))

    async def acompress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """Async twin of :meth:`compress_documents` (awaits the embeddings' async methods)."""
        docs = drop_restricted(check_documents(documents, f"{type(self).__name__}.compress_documents"))
        if not docs or self.embeddings is None:
            return self._select_by_tokens(docs)
        query_vector = await self.embeddings.aembed_query(query) if self.relevance == "query" else None
        doc_vectors = await self.embeddings.aembed_documents([d.page_content for d in docs])
        return self._select_by_vectors(docs, query_vector, doc_vectors)
