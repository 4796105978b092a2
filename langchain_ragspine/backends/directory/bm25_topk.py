"""The top ``k`` of a BM25 query over the eager score matrix, with MaxScore pruning and results exactly equal to
exhaustive scoring.

Usage::

    maxima = term_maxima(data, indptr)                       # once per index: each term's best contribution
    hits = top_k(data, indices, indptr, num_docs, query_ids, k=10, tie_rank=ranks, maxima=maxima)
    # == top_rows(exhaustive_scores(...), ok, 10, ranks) for every query, filter and threshold

The matrix is bm25s's CSC layout (:mod:`~langchain_ragspine.backends.directory.bm25_index`): ``data`` float32 BM25
contribution of each posting, ``indices`` int32 document ids ascending within a term, ``indptr`` one slice per term.
A document's score is the float32 sum of its postings' contributions in query-token order (a term repeated in the
query counts each time) — :func:`exhaustive_scores` computes exactly that for every document, bit for bit what
``bm25s.BM25.get_scores_from_ids`` returns.

:func:`top_k` prunes with MaxScore (Turtle & Flood, "Query evaluation: strategies and optimizations", IP&M 1995),
the dynamic pruning Lucene and tantivy use, in a term-at-a-time form that suits numpy:

1. each query term's upper bound is its best contribution (:func:`term_maxima`) times its count in the query;
   terms are taken in decreasing bound, rare (high-IDF) terms first;
2. after each term the partial sums are lower bounds of the documents' scores, so the ``k``-th best partial sum
   among the documents the call may return (filter, threshold) is a lower bound ``θ`` of the ``k``-th best score;
   once the bounds of the terms not yet taken add up to less than ``θ``, no document they alone could lift can
   reach the top ``k`` and those postings are never read in full;
3. the candidates — documents already seen whose partial sum plus the remaining bound can still reach ``θ`` — are
   scored exactly: the float32 sum in query order, each term's contribution found by binary search in its
   posting list; the top ``k`` of those, ties by ``tie_rank``, is the exhaustive top ``k``.

Bounds are compared with a relative margin (:data:`MARGIN`) far above float32 rounding, so a rounding difference
between the float64 partial sums and the float32 scores can only keep a document, never drop one.  When nothing
can be pruned (few candidates, a filter that leaves fewer than ``k`` scoring documents, or a query of one term),
the exhaustive path runs instead: results are the same either way; only the work differs.

Status (issue 31): exact, and checked so by property tests and on every question of both shared sets, but in
numpy not faster than bm25s's exhaustive scoring at 100k or 1M chunks (``benchmarks/bm25_pruning.py``, RESULTS.md
``bm25-pruning``), so :class:`~langchain_ragspine.retrievers.bm25.BM25Retriever` does not use it yet: it is the
reference a compiled kernel must equal.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from langchain_ragspine.documents import top_rows

__all__ = ["MARGIN", "MIN_POSTINGS", "exhaustive_scores", "term_maxima", "top_k"]

#: Relative margin of every pruning comparison: float32 sums of a few hundred terms are within ~1e-5 of the real
#: sums, so pruning only where the bound is below ``θ · (1 - MARGIN)`` never drops a document of the top ``k``.
MARGIN = 1e-4


def term_maxima(data: np.ndarray, indptr: np.ndarray) -> np.ndarray:
    """Each term's largest contribution: float32 array of shape ``(len(indptr) - 1,)``, 0 for a term without
    postings.  ``O(nnz)``; compute it once per index."""
    n_terms = len(indptr) - 1
    out = np.zeros(n_terms, dtype=np.float32)
    if n_terms == 0 or data.size == 0:
        return out
    starts, ends = indptr[:-1], indptr[1:]
    nonempty = ends > starts
    # reduceat over the non-empty terms' starts: each segment runs to the next non-empty start, which is its end
    out[nonempty] = np.maximum.reduceat(data, starts[nonempty])
    return out


def exhaustive_scores(
    data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, num_docs: int, query_ids: Sequence[int] | np.ndarray
) -> np.ndarray:
    """Every document's score for ``query_ids`` (term ids, repeats counted): float32 of shape ``(num_docs,)``, the
    float32 sum in query order — what ``bm25s.BM25.get_scores_from_ids`` returns, bit for bit."""
    scores = np.zeros(num_docs, dtype=np.float32)
    for t in np.asarray(query_ids, dtype=np.int64).tolist():
        lo, hi = int(indptr[t]), int(indptr[t + 1])
        np.add.at(scores, indices[lo:hi], data[lo:hi])  # numpy >= 1.25: one pass, faster than a fancy-indexed add
    return scores


def _ok(scores: np.ndarray, threshold: float | None, mask: np.ndarray | None) -> np.ndarray:
    ok = scores > 0
    if threshold is not None:
        ok &= scores >= np.float64(threshold)
    if mask is not None:
        ok &= mask
    return ok


def top_k(
    data: np.ndarray,
    indices: np.ndarray,
    indptr: np.ndarray,
    num_docs: int,
    query_ids: Sequence[int] | np.ndarray,
    *,
    k: int,
    tie_rank: np.ndarray,
    maxima: np.ndarray,
    mask: np.ndarray | None = None,
    threshold: float | None = None,
    min_postings: int | None = None,
) -> list[tuple[int, float]]:
    """The top ``k`` ``(document, score)`` of ``query_ids``, best first, ties by ``tie_rank``: exactly
    ``top_rows(scores, ok, k, tie_rank)`` of the exhaustive ``scores`` (:func:`exhaustive_scores`), ``ok`` being
    score > 0, ``>= threshold`` (compared in double precision) and ``mask`` — found with MaxScore pruning (module
    docstring).

    Args:
        data, indices, indptr, num_docs: the score matrix (bm25s's CSC arrays).
        query_ids: the query's term ids, in query order, repeats counted.
        k: at most this many (``>= 1``).
        tie_rank: int array of shape ``(num_docs,)``, the order among equal scores (lower first).
        maxima: :func:`term_maxima` of the matrix.
        mask: bool array of shape ``(num_docs,)``: the documents the call may return (a filter), or ``None``.
        threshold: the lowest score returned, or ``None``.
        min_postings: below this many postings of the query's terms every document is scored instead (cheaper);
            default :data:`MIN_POSTINGS`.
    """
    ids = np.asarray(query_ids, dtype=np.int64)
    if ids.size == 0 or num_docs == 0:
        return []
    pruned = _candidates(data, indices, indptr, num_docs, ids, k=k, maxima=maxima, mask=mask, threshold=threshold,
                         min_postings=MIN_POSTINGS if min_postings is None else min_postings)
    if pruned is None:
        scores = exhaustive_scores(data, indices, indptr, num_docs, ids)
        return top_rows(scores, _ok(scores, threshold, mask), k, tie_rank)
    rows = _narrow(data, indices, indptr, pruned, k=k)
    if rows.size == 0:
        return []
    where = np.full(num_docs, -1, dtype=np.int64)  # a document's position among the candidates, -1: not one
    where[rows] = np.arange(rows.size)
    found_terms: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    positions: list[np.ndarray] = []
    values: list[np.ndarray] = []
    for t in ids.tolist():  # each term's contributions to the candidates, in query order (a repeat: again)
        if t not in found_terms:
            lo, hi = int(indptr[t]), int(indptr[t + 1])
            seg = indices[lo:hi]
            if seg.size <= 8 * rows.size:  # read the term's postings: which are candidates'
                pos = where[seg]
                hit = pos >= 0
                found_terms[t] = (pos[hit], data[lo:hi][hit])
            else:  # a long posting list: look the few candidates up in it
                found, pos = _lookup(seg, rows)
                found_terms[t] = (found, data[lo + pos])
        positions.append(found_terms[t][0])
        values.append(found_terms[t][1])
    exact = np.zeros(rows.size, dtype=np.float32)
    # one unbuffered add in query order: each row's float32 sum adds its terms in the exhaustive order
    np.add.at(exact, np.concatenate(positions), np.concatenate(values))
    best = top_rows(exact, _ok(exact, threshold, None), k, tie_rank[rows])
    return [(int(rows[j]), score) for j, score in best]


#: Below this many postings (all the query's terms together) scoring every document is cheaper than pruning.
MIN_POSTINGS = 50_000


def _kth(values: np.ndarray, k: int) -> float:
    """The ``k``-th largest of ``values`` (0 when there are fewer)."""
    return float(np.partition(values, values.size - k)[values.size - k]) if values.size >= k else 0.0


def _add_terms(
    acc: np.ndarray, data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, terms: np.ndarray, counts: np.ndarray
) -> None:
    """``acc`` (float64, one entry per document) += the contributions of ``terms`` (× their counts in the query)."""
    for t, c in zip(terms.tolist(), counts.tolist(), strict=True):
        lo, hi = int(indptr[t]), int(indptr[t + 1])
        np.add.at(acc, indices[lo:hi], data[lo:hi].astype(np.float64) * c)


def _lookup(seg: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(where, positions)``: the indices of ``rows`` (sorted) found in the sorted posting list ``seg``, and where
    in ``seg`` they are."""
    pos = np.searchsorted(seg, rows)
    hit = pos < seg.size
    hit[hit] = seg[pos[hit]] == rows[hit]
    return np.flatnonzero(hit), pos[hit]


def _narrow(
    data: np.ndarray, indices: np.ndarray, indptr: np.ndarray,
    pruned: tuple[np.ndarray, np.ndarray, float, np.ndarray, np.ndarray, np.ndarray], *, k: int,
) -> np.ndarray:
    """MaxScore's second phase: the candidates' partial sums take the other (non-essential) terms one by one, in
    decreasing bound, and after each a candidate whose partial sum plus the bounds still to come cannot reach
    ``θ`` (raised as the partial sums grow) is dropped; returns the candidates left, sorted."""
    rows, partial, theta, terms, counts, bounds = pruned
    rest = np.concatenate([np.cumsum(bounds[::-1])[::-1], [0.0]])
    for j, (t, c) in enumerate(zip(terms.tolist(), counts.tolist(), strict=True)):
        if rows.size <= k:
            break
        lo, hi = int(indptr[t]), int(indptr[t + 1])
        found, pos = _lookup(indices[lo:hi], rows)
        partial[found] += data[lo + pos].astype(np.float64) * c
        theta = max(theta, _kth(partial, k))
        keep = partial + rest[j + 1] >= theta * (1.0 - MARGIN)
        rows, partial = rows[keep], partial[keep]
    return rows


def _candidates(
    data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, num_docs: int, ids: np.ndarray, *, k: int,
    maxima: np.ndarray, mask: np.ndarray | None, threshold: float | None, min_postings: int,
) -> tuple[np.ndarray, np.ndarray, float, np.ndarray, np.ndarray, np.ndarray] | None:
    """MaxScore's first phase: ``(candidates (sorted), their partial sums over the essential terms, θ, the other
    terms, their counts, their bounds)`` — the documents that may still reach the top ``k`` — or ``None`` when
    pruning would not pay (few postings, no θ, every term essential) and every document should be scored instead.

    Terms are taken rarest first (by bound).  ``θ`` is the ``k``-th best partial sum over the first of them (their
    postings up to a budget), or the threshold if higher: a lower bound of the ``k``-th best score that can be
    returned.  The terms of lowest bound whose bounds add up to less than ``θ`` (with :data:`MARGIN`) are not
    essential: a document holding none of the others cannot reach the top ``k``.  Over every essential term, ``θ``
    is raised to the ``k``-th best partial sum, and a document is a candidate when its partial sum plus the other
    terms' bounds still reaches ``θ``."""
    terms, counts = np.unique(ids, return_counts=True)
    df = (indptr[terms + 1] - indptr[terms]).astype(np.int64)
    total = int(df.sum())
    if terms.size < 2 or total < min_postings:
        return None
    bounds = maxima[terms].astype(np.float64) * counts
    order = np.argsort(-bounds, kind="stable")
    terms, counts, bounds, df = terms[order], counts[order], bounds[order], df[order]
    n_first = max(1, int(np.searchsorted(np.cumsum(df), max(4096, total // 16), side="right")))
    acc = np.zeros(num_docs, dtype=np.float64)
    _add_terms(acc, data, indices, indptr, terms[:n_first], counts[:n_first])
    allowed = acc if mask is None else np.where(mask, acc, 0.0)
    theta = max(_kth(allowed[allowed > 0], k), float(threshold) if threshold is not None else 0.0)
    if theta <= 0.0:
        return None
    rest = np.concatenate([np.cumsum(bounds[::-1])[::-1], [0.0]])  # rest[i]: the bounds of terms i.. added
    below = np.flatnonzero(rest[:-1] < theta * (1.0 - MARGIN))
    if below.size == 0:
        return None
    first = int(below[0])  # the terms before the first prunable suffix are essential
    if first == 0:  # no document can reach the threshold
        return (np.zeros(0, dtype=np.int64), np.zeros(0), theta, terms[:0], counts[:0], bounds[:0])
    if first > n_first:
        _add_terms(acc, data, indices, indptr, terms[n_first:first], counts[n_first:first])
    elif first < n_first:  # θ came out high: fewer essential terms than were added; their sums bound the same
        acc[:] = 0.0
        _add_terms(acc, data, indices, indptr, terms[:first], counts[:first])
    allowed = acc if mask is None else np.where(mask, acc, 0.0)
    theta = max(theta, _kth(allowed[allowed > 0], k))
    rows = np.flatnonzero((allowed > 0) & (allowed + rest[first] >= theta * (1.0 - MARGIN)))
    return rows, allowed[rows], theta, terms[first:], counts[first:], bounds[first:]
