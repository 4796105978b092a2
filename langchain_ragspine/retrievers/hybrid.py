"""Hybrid retrieval: fuse the ranked lists of any number of retrievers (BM25, dense, …) into one ranking.

Two fusion functions are offered:

* ``"convex"`` (:class:`HybridRetriever`'s default) — a convex combination of min-max normalised scores (Bruch, Gai
  & Ingber, "An Analysis of Fusion Functions for Hybrid Retrieval", ACM TOIS 42(1), 2023)::

      fused(d) = Σ_i  w_i · (s_i(d) - min_i) / (max_i - min_i)      Σ_i w_i = 1

  ``s_i`` is channel ``i``'s own score (``metadata["scores"]``: ``fused``, else ``bm25``, else ``vector``; for a
  channel that reports no scores, ``1 / (c + rank)``), ``min_i``/``max_i`` are taken over that channel's candidate
  list, and a document the channel did not return contributes 0 for it.  Without ``weights``, the first channel
  gets ``alpha`` (default 0.7) and the others share ``1 - alpha``: put the lexical channel first, as the package's
  retrieval modes do.
* ``"rrf"`` (:func:`fuse`'s default) — Reciprocal Rank Fusion (Cormack, Clarke & Büttcher, "Reciprocal Rank Fusion
  outperforms Condorcet and individual Rank Learning Methods", SIGIR 2009), optionally weighted::

      fused(d) = Σ_i  w_i / (c + rank_i(d))        rank from 1, c = 60

  A list in which ``d`` does not appear contributes nothing.  It uses ranks only.

Why ``convex`` with ``alpha = 0.7`` is the retriever's default (measured, BM25 ``auto`` + multilingual-e5-small
dense, ParagraphTextSplitter 480/80, every question of JSQuAD valid (4,442, Japanese) and CMRC 2018 dev (3,219,
Chinese), ``candidate_k = 50``; full tables in ``benchmarks/RESULTS.md``): plain RRF (c = 60) *lost* to BM25 alone
(answer recall@1 0.844 vs 0.919 and 0.870 vs 0.907): when one channel is much stronger, RRF's flat
``1/(60 + rank)`` lets the weaker channel's top ranks displace the stronger channel's answer; weighted RRF (up to
3 : 1) still lost at @1.  Convex fusion keeps the score margins.  Equal weights (0.905 / 0.908) beat RRF but not
BM25 on JSQuAD; ``alpha = 0.7`` on the BM25 channel beat both channels on both sets at recall@1 and @5 (JSQuAD
0.923 / 0.982 vs BM25 0.919 / 0.979; CMRC 0.916 / 0.992 vs 0.907 / 0.989).  ``alpha`` was chosen on JSQuAD and
held on CMRC; results are flat for 0.65–0.8.  RRF remains the right choice for lists whose scores are not comparable
or absent (RAG-Fusion's several queries, :func:`fuse`'s default) and is one keyword away: ``fusion="rrf"``.

Identity (``docs/architecture.md``, invariant 5): a document is keyed by ``metadata["chunk_id"]``, else by
``Document.id`` — never by ``page_content`` (two chunks with the same text are different chunks; a chunk whose text
differs between channels, e.g. a ``prompt_text`` variant, is still one chunk).  A document with neither key cannot
be matched across channels: each occurrence is its own key.  Within one ranked list only the first (best-ranked)
occurrence of a key counts, and ranks are positions in that de-duplicated list.  Ties break on the key.

Differences from LangChain's ``EnsembleRetriever`` (``langchain_classic.retrievers``, weighted RRF only): it keys by
``page_content`` by default (and raises ``KeyError`` with ``id_key`` when a document lacks the field), so distinct
chunks with the same text collapse and one chunk with two renderings splits; a key repeated inside one list adds one
contribution per repeat and shifts the ranks after it; ties keep first-seen order; every fused document is returned
(no ``k``); children are invoked with no ``k``/``filter``; results carry no scores.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import patch_config
from pydantic import ConfigDict, field_validator

from langchain_ragspine.documents import check_k, doc_key, score_of, with_scores
from langchain_ragspine.filters import Predicate, and_filters, compile_filter
from langchain_ragspine.retrievers.contract import ainvoke_retriever, invoke_retriever
from langchain_ragspine.sensitivity import is_restricted

__all__ = ["DEFAULT_C", "FUSIONS", "HybridRetriever", "convex_weights", "fuse"]

#: The RRF constant of Cormack et al. (their "k"; named ``c`` here because ``k`` is the result count).
DEFAULT_C = 60
#: Default convex weight of the first (lexical) channel, measured on JSQuAD and confirmed on CMRC 2018.
DEFAULT_ALPHA = 0.7
#: The fusion functions :func:`fuse` and :class:`HybridRetriever` accept.
FUSIONS = ("rrf", "convex")

Fusion = Literal["rrf", "convex"]

# Score keys a channel's documents may carry, in the order the convex fusion looks for the channel's own score.
_OWN_SCORE_KEYS = ("fused", "bm25", "vector")


# ---------------------------------------------------------------------------------------------------- validation
def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def _check_weights(weights: Sequence[float] | None, n: int) -> list[float]:
    """``weights`` as a list of ``n`` finite non-negative floats, not all zero (``None`` → all 1.0)."""
    if weights is None:
        return [1.0] * n
    if isinstance(weights, (str, bytes)) or not isinstance(weights, Sequence):
        raise TypeError(f"weights must be a list of numbers, got {type(weights).__name__}")
    ws = list(weights)
    if len(ws) != n:
        raise ValueError(f"weights has {len(ws)} entries for {n} ranked lists/retrievers: {ws!r}")
    for w in ws:
        if isinstance(w, bool) or not isinstance(w, (int, float)):
            raise TypeError(f"weights must be numbers, got {w!r} in {ws!r}")
        if not math.isfinite(w) or w < 0:
            raise ValueError(f"weights must be finite and >= 0, got {w!r} in {ws!r}")
    if not any(w > 0 for w in ws):
        raise ValueError(f"at least one weight must be > 0, got {ws!r}")
    return [float(w) for w in ws]


def _check_fusion(fusion: Any) -> str:
    if fusion not in FUSIONS:
        raise ValueError(f"fusion must be one of {FUSIONS}, got {fusion!r}")
    return str(fusion)


def _check_alpha(alpha: Any) -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
        raise TypeError(f"alpha must be a number, got {alpha!r}")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha!r}")
    return float(alpha)


def convex_weights(n: int, alpha: float) -> list[float]:
    """Default convex weights for ``n`` channels: ``alpha`` for the first, ``(1 - alpha) / (n - 1)`` for each other
    (``[1.0]`` for one channel).  ``alpha = 0.5`` with two channels is the plain average."""
    if n == 1:
        return [1.0]
    return [alpha] + [(1.0 - alpha) / (n - 1)] * (n - 1)


# ---------------------------------------------------------------------------------------------------- fusion
@dataclass
class _Entry:
    """One fused key: its contributions and its occurrences ``(order, doc)`` across lists."""

    parts: list[float] = field(default_factory=list)
    seen: list[tuple[tuple[float, int], Document]] = field(default_factory=list)


Key = tuple[int, str, int, int]


def _dedupe(docs: Sequence[Document], channel: int) -> list[tuple[Key, Document]]:
    """``(key, doc)`` for the first occurrence of each key in ``docs``, best first.

    Keys are ``(0, chunk_id or id, 0, 0)``; a document with neither gets ``(1, "", channel, position)`` — its own
    key, matched with nothing (not even the same text elsewhere), sorted after keyed ties in first-seen order.
    """
    seen: set[Key] = set()
    out: list[tuple[Key, Document]] = []
    for pos, doc in enumerate(docs):
        k = doc_key(doc)
        key: Key = (0, k, 0, 0) if k is not None else (1, "", channel, pos)
        if key in seen:
            continue
        seen.add(key)
        out.append((key, doc))
    return out


def _normalised_scores(docs: Sequence[Document], c: int) -> list[float]:
    """Min-max normalised own scores of one channel's de-duplicated list (higher = better).

    The channel's own score is the first of ``scores["fused"]``, ``["bm25"]``, ``["vector"]`` that *every* document
    of the list carries as a finite number; when none does (a foreign retriever that reports no scores, such as a
    ``VectorStoreRetriever``), the rank-based ``1 / (c + rank)``.  A list whose scores are all equal (or a single
    document) normalises to 1.0.
    """
    raw: list[float] | None = None
    for name in _OWN_SCORE_KEYS:
        vals = [score_of(d, name) for d in docs]
        if all(v is not None for v in vals):
            raw = [v for v in vals if v is not None]
            break
    if raw is None:
        raw = [1.0 / (c + r) for r in range(1, len(docs) + 1)]
    lo, hi = min(raw, default=0.0), max(raw, default=0.0)
    if hi <= lo:
        return [1.0] * len(raw)
    return [(v - lo) / (hi - lo) for v in raw]


def fuse(
    ranked_lists: Sequence[Sequence[Document]],
    *,
    weights: Sequence[float] | None = None,
    c: int = DEFAULT_C,
    k: int | None = None,
    fusion: Fusion = "rrf",
    alpha: float = 0.5,
) -> list[Document]:
    """Fuse ranked lists of documents into one ranking (a pure function; inputs are not modified).

    Args:
        ranked_lists: one list per channel, best first.  Within a list only the first occurrence of a key counts
            and ranks (from 1) are positions among the list's distinct keys.
        weights: one per list, each >= 0, not all 0 (default: all 1.0).  A list with weight 0 is ignored entirely
            (as if it were not passed: it contributes no documents and no scores).  For ``"convex"`` the weights are
            rescaled to sum to 1; ``None`` means :func:`convex_weights` ``(len(ranked_lists), alpha)``.
        c: the RRF constant (default 60), ``>= 0``; ``"convex"`` uses it only for a list without scores.
        k: number of results (default ``None``: all).
        fusion: ``"rrf"`` (the default here: plain rank fusion, also for lists without comparable scores) or
            ``"convex"`` (:class:`HybridRetriever`'s default); see the module docstring for both formulas.
        alpha: ``"convex"`` only, when ``weights`` is ``None``: the first list's weight; the others share
            ``1 - alpha``.

    Returns:
        At most ``k`` documents sorted by ``(-fused, key)`` — key = ``chunk_id``, else ``Document.id``; documents
        without either come after keyed ties, in first-seen order.  Each is a copy of the key's first occurrence
        (lists taken by descending weight, then in the given order) whose ``metadata["scores"]`` holds ``bm25``
        and ``vector`` (the first non-``None`` value any list reported for the key, same order), ``fused`` (this
        fusion's score) and ``rerank = None``.  RESTRICTED documents are never returned; a key that is RESTRICTED
        in any list is dropped altogether (fail closed).

    Raises:
        TypeError: a list is not a sequence of ``Document``, or a parameter has the wrong type.
        ValueError: no lists, ``weights`` of the wrong length / negative / all zero, ``c < 0``, ``k < 0``, an
            unknown ``fusion`` or ``alpha`` outside [0, 1].
    """
    if isinstance(ranked_lists, (str, bytes)) or not isinstance(ranked_lists, Sequence):
        raise TypeError(f"ranked_lists must be a sequence of lists of Documents, got {type(ranked_lists).__name__}")
    if not ranked_lists:
        raise ValueError("ranked_lists is empty: nothing to fuse")
    for i, lst in enumerate(ranked_lists):
        if isinstance(lst, (str, bytes)) or not isinstance(lst, Sequence):
            raise TypeError(f"ranked_lists[{i}] must be a list of Documents, got {type(lst).__name__}")
        for d in lst:
            if not isinstance(d, Document):
                raise TypeError(f"ranked_lists[{i}] holds a {type(d).__name__}, expected Document: {d!r}")
    ws = _check_weights(weights, len(ranked_lists))
    _check_int("c", c, 0)
    if k is not None:
        _check_int("k", k, 0)
    fusion = _check_fusion(fusion)  # type: ignore[assignment]
    alpha = _check_alpha(alpha)
    if fusion == "convex":
        if weights is None:
            ws = convex_weights(len(ranked_lists), alpha)
        total = math.fsum(ws)
        ws = [w / total for w in ws]

    entries: dict[Key, _Entry] = {}
    for ch, (lst, w) in enumerate(zip(ranked_lists, ws, strict=True)):
        if w == 0:
            continue
        unique = _dedupe(lst, ch)
        if fusion == "rrf":
            parts = [w / (c + rank) for rank in range(1, len(unique) + 1)]
        else:
            parts = [w * s for s in _normalised_scores([d for _, d in unique], c)]
        for (key, doc), part in zip(unique, parts, strict=True):
            e = entries.setdefault(key, _Entry())
            e.parts.append(part)
            e.seen.append(((-w, ch), doc))

    ranked: list[tuple[float, Key, Document, float | None, float | None]] = []
    for key, e in entries.items():
        if any(is_restricted(d.metadata) for _, d in e.seen):
            continue  # fail closed: a key labelled RESTRICTED anywhere is dropped
        e.seen.sort(key=lambda t: t[0])  # descending weight, then channel order
        bm25 = next((s for s in (score_of(d, "bm25") for _, d in e.seen) if s is not None), None)
        vector = next((s for s in (score_of(d, "vector") for _, d in e.seen) if s is not None), None)
        ranked.append((math.fsum(e.parts), key, e.seen[0][1], bm25, vector))
    ranked.sort(key=lambda t: (-t[0], t[1]))
    if k is not None:
        ranked = ranked[:k]
    return [with_scores(doc, bm25=b, vector=v, fused=s, rerank=None) for s, _, doc, b, v in ranked]


# ---------------------------------------------------------------------------------------------------- retriever
def _child_config(
    run_manager: CallbackManagerForRetrieverRun | AsyncCallbackManagerForRetrieverRun, i: int
) -> RunnableConfig:
    """The config of channel ``i``'s call: a child run of the hybrid's, tagged ``retriever_{i + 1}``."""
    return patch_config(None, callbacks=run_manager.get_child(tag=f"retriever_{i + 1}"))


class HybridRetriever(BaseRetriever):
    """Fuse any list of ``BaseRetriever`` channels (e.g. BM25 + dense): convex combination of min-max normalised
    scores by default, weighted Reciprocal Rank Fusion with ``fusion="rrf"`` (see the module docstring for both
    formulas and the measurements behind the default).

    Each query asks every channel for ``depth = max(candidate_k, k)`` candidates matching the filter through the
    retriever-call contract (:func:`~langchain_ragspine.retrievers.contract.invoke_retriever`: this package's
    retrievers get ``k`` and ``filter``, a ``VectorStoreRetriever`` gets ``k`` only) and fuses them with
    :func:`fuse`, so ``invoke(query, k=70)`` returns 70 documents when 70 match.
    ``ainvoke`` runs the channels concurrently (``asyncio.gather``); ``invoke`` runs them one after another.

    Attributes:
        retrievers: the channels (at least one), any ``BaseRetriever``.
        weights: one per channel, each >= 0, not all 0 (default: all 1.0; a 0 turns a channel off — it is not
            even called).  ``"rrf"`` uses them as given (``w / (c + rank)``); ``"convex"`` rescales them to sum 1.
        c: the RRF constant (default 60, Cormack et al.'s "k"; named ``c`` like ``EnsembleRetriever``'s because
            ``k`` is the result count).  ``"convex"`` uses it only for a channel that reports no scores
            (``1 / (c + rank)`` stands in for its score).
        candidate_k: candidates taken from each channel (default 50), raised to ``k`` when a call asks for more;
            a channel that returns more is truncated.  For ``"convex"`` this depth also sets the list over which
            each channel's min and max are taken.
        k: number of fused results (default 4), an ``int >= 1``; ``invoke(query, k=...)`` overrides it per call.
        filter: the retriever's own metadata filter (:mod:`langchain_ragspine.filters`); ``invoke(query,
            filter=...)`` is ANDed with it, so a call narrows the results but never widens them.  Channels that
            accept ``filter`` get the combined filter and apply it before scoring (ANDed again with their own
            ``filter``); a channel that cannot take it (a foreign ``VectorStoreRetriever``, say) has its results
            filtered by the contract, which over-fetches to make up for what the filter removes, and every
            channel's list is post-filtered here again, so a filter never widens the results.
        fusion: ``"convex"`` (default; min-max normalised scores, Bruch et al. 2023) or ``"rrf"``.
        alpha: ``"convex"`` only, when ``weights`` is not given: the weight of the first channel's normalised score;
            the other channels share ``1 - alpha`` (default 0.7, measured best with the lexical channel first).
            Setting both ``weights`` and ``alpha`` is an error.

    Results: at most ``k`` documents, best first, ties broken by ``chunk_id`` (else ``Document.id``), each a copy
    with ``metadata["scores"] = {"bm25", "vector", "fused", "rerank"}`` (see :func:`fuse`).  RESTRICTED documents
    are dropped even when a foreign channel returns them.

    Raises:
        ValueError: no retrievers, bad ``weights``, ``c < 0``, ``candidate_k < 1``, ``k < 1``, an unknown
            ``fusion``, ``alpha`` outside [0, 1] or given together with ``weights``, a malformed ``filter``.
        TypeError: a channel that is not a ``BaseRetriever``; ``k`` not an int; an unknown keyword argument to
            ``invoke``.

    Example:
        >>> from langchain_core.documents import Document
        >>> from langchain_ragspine import BM25Retriever, DenseRetriever, HybridRetriever
        >>> from langchain_ragspine.embeddings import HashingEmbeddings
        >>> docs = [
        ...     Document(page_content="梅雨は六月から七月にかけて続く雨の季節。", metadata={"chunk_id": "tsuyu#0"}),
        ...     Document(page_content="北京是中国的首都。", metadata={"chunk_id": "beijing#0"}),
        ... ]
        >>> bm25 = BM25Retriever.from_documents(docs)
        >>> dense = DenseRetriever.from_documents(docs, HashingEmbeddings(256))
        >>> hybrid = HybridRetriever(retrievers=[bm25, dense], k=2)
        >>> top = hybrid.invoke("梅雨はいつ")[0]
        >>> top.metadata["chunk_id"], sorted(top.metadata["scores"])
        ('tsuyu#0', ['bm25', 'fused', 'rerank', 'vector'])
    """

    retrievers: list[BaseRetriever]
    weights: list[float] | None = None
    c: int = DEFAULT_C
    candidate_k: int = 50
    k: int = 4
    filter: dict[str, Any] | None = None
    fusion: Fusion = "convex"
    alpha: float = DEFAULT_ALPHA

    model_config = ConfigDict(arbitrary_types_allowed=True)

    @field_validator("k", mode="before")
    @classmethod
    def _strict_k(cls, value: Any) -> int:
        return check_k(value)

    def model_post_init(self, context: Any, /) -> None:
        """Validate the parameters (see the class docstring)."""
        if not isinstance(self.retrievers, list) or not self.retrievers:
            raise ValueError(f"retrievers must be a non-empty list of BaseRetriever, got {self.retrievers!r}")
        for i, r in enumerate(self.retrievers):
            if not isinstance(r, BaseRetriever):
                raise TypeError(f"retrievers[{i}] is a {type(r).__name__}, expected a BaseRetriever")
        _check_weights(self.weights, len(self.retrievers))
        _check_int("c", self.c, 0)
        _check_int("candidate_k", self.candidate_k, 1)
        _check_fusion(self.fusion)
        _check_alpha(self.alpha)
        if self.weights is not None and "alpha" in self.model_fields_set:
            raise ValueError("give either weights or alpha, not both (alpha only sets the default convex weights)")
        compile_filter(self.filter)

    # -- plumbing ---------------------------------------------------------------------------------------------------
    def _params(
        self, k: int | None, filter: Mapping[str, Any] | None, candidate_k: int | None, extra: Mapping[str, Any]
    ) -> tuple[int, Mapping[str, Any] | None, int, Predicate | None]:
        """``(k, filter, depth, predicate)`` of a call: the call's filter ANDed with :attr:`filter`, and the
        per-channel depth ``max(candidate_k, k)``."""
        if extra:
            raise TypeError(f"unexpected keyword arguments for HybridRetriever: {sorted(extra)}")
        k = self.k if k is None else check_k(k)
        candidate_k = self.candidate_k if candidate_k is None else _check_int("candidate_k", candidate_k, 1)
        flt = and_filters(self.filter, filter)
        return k, flt, max(candidate_k, k), compile_filter(flt)

    def _weights(self) -> list[float]:
        """The effective channel weights (a channel with weight 0 is not called)."""
        if self.weights is None and self.fusion == "convex":
            return convex_weights(len(self.retrievers), self.alpha)
        return _check_weights(self.weights, len(self.retrievers))

    def _channels(self) -> list[tuple[int, BaseRetriever]]:
        """``(index, channel)`` for every channel with a non-zero weight (the others are not called)."""
        return [(i, r) for i, (r, w) in enumerate(zip(self.retrievers, self._weights(), strict=True)) if w != 0]

    def _fuse(
        self,
        results: Sequence[tuple[int, Sequence[Document]]],
        k: int,
        pred: Predicate | None,
        candidate_k: int,
    ) -> list[Document]:
        lists: list[list[Document]] = [[] for _ in self.retrievers]
        for i, docs in results:
            if pred is not None:
                docs = [d for d in docs if pred(d.metadata)]
            lists[i] = [d for _, d in _dedupe(docs, i)[:candidate_k]]
        return fuse(lists, weights=self.weights, c=self.c, k=k, fusion=self.fusion, alpha=self.alpha)

    # -- retrieval --------------------------------------------------------------------------------------------------
    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        filter: Mapping[str, Any] | None = None,
        candidate_k: int | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        k, flt, depth, pred = self._params(k, filter, candidate_k, kwargs)
        results = [
            (i, invoke_retriever(r, query, k=depth, filter=flt, config=_child_config(run_manager, i)))
            for i, r in self._channels()
        ]
        return self._fuse(results, k, pred, depth)

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        filter: Mapping[str, Any] | None = None,
        candidate_k: int | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        k, flt, depth, pred = self._params(k, filter, candidate_k, kwargs)
        channels = self._channels()
        lists = await asyncio.gather(
            *(
                ainvoke_retriever(r, query, k=depth, filter=flt, config=_child_config(run_manager, i))
                for i, r in channels
            )
        )
        return self._fuse([(i, docs) for (i, _), docs in zip(channels, lists, strict=True)], k, pred, depth)
