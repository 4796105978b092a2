"""Exact Okapi BM25 over segments of raw postings: the lexical index of a store that grows by small writes.

The eager score matrix of :mod:`~langchain_ragspine.backends.directory.bm25_index` (bm25s's) bakes the corpus
statistics — the number of documents ``N``, the average length ``avgdl`` and each term's document frequency ``df``
— into every entry, so a corpus that gains ten chunks needs every entry computed again.  A
:class:`PostingsSegment` keeps the raw postings instead (term → rows and term frequencies, and each row's length),
and :func:`bm25_scores` computes Lucene's BM25 (Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25
and Beyond", 2009; Lucene's variant as in ``bm25_index``)::

    score(d, q) = Σ_{t in q} idf(t) · tf / (tf + k1 · (1 - b + b · dl / avgdl))
    idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))

for the query's terms only, over several segments at once, each with a mask of its *live* rows (rows replaced or
deleted since the segment was built are dead): ``N`` and the total length are those of the live rows of all
segments and ``df`` counts each query term's live postings in all of them — exactly the statistics of one index
built from the live rows alone.  A query term repeated counts once per occurrence (as bm25s's
``get_tokens_ids``).  The cost is one pass over the postings of the query's terms, as the eager matrix's row sum.

A row's score depends on nothing but its own ``tf`` and ``dl`` and those statistics, and is computed in float64,
term after term in the query's order, by element-wise operations: it is the same, bit for bit, whichever segment
holds the row and however the corpus was split — a corpus held in one segment and the same corpus written by a
hundred small writes score alike (``tests/unit_tests/vectorstores/test_vectorstore_incremental.py``).  The scores agree with
:class:`~langchain_ragspine.retrievers.bm25.BM25Retriever`'s (float32) to float32 precision.

:func:`merge_segments` folds segments (their live rows) into one without tokenizing again, so small segments can be
merged into a large one now and then at the cost of a pass over their postings.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from langchain_ragspine.backends.directory.bm25_index import TermPostings
from langchain_ragspine.backends.directory.bm25_parallel import CountedBatches
from langchain_ragspine.tokenizers import Tokenizer, tokenizer_name

__all__ = ["PostingsSegment", "bm25_scores", "corpus_statistics", "merge_segments"]

_EMPTY_INT32 = np.zeros(0, dtype=np.int32)


@dataclass(frozen=True, eq=False)
class PostingsSegment:
    """The BM25 postings of some rows, term-major (immutable).

    Build with :meth:`build`; score with :func:`bm25_scores`; fold with :func:`merge_segments`.

    Attributes:
        terms: the distinct terms, by id.
        indptr: int64 ``(len(terms) + 1,)``: term ``t``'s postings are ``rows[indptr[t]:indptr[t + 1]]``.
        rows: int32 row of each posting, ascending within a term.
        tfs: int32 term frequency of each posting (``>= 1``).
        lengths: int64 tokens of each row (its ``dl``).
    """

    terms: tuple[str, ...]
    indptr: np.ndarray
    rows: np.ndarray
    tfs: np.ndarray
    lengths: np.ndarray
    vocab: Mapping[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "vocab", {t: i for i, t in enumerate(self.terms)})

    @property
    def n_rows(self) -> int:
        """Rows (documents) of the segment."""
        return int(self.lengths.size)

    @classmethod
    def empty(cls) -> PostingsSegment:
        """A segment of no rows."""
        return cls((), np.zeros(1, dtype=np.int64), _EMPTY_INT32, _EMPTY_INT32, np.zeros(0, dtype=np.int64))

    @classmethod
    def build(cls, texts: Sequence[str], tokenize: Tokenizer, *, workers: int = 1) -> PostingsSegment:
        """The postings of ``texts`` (row ``i`` = ``texts[i]``) tokenized by ``tokenize``.  A registered tokenizer
        counts whole batches at once, in ``workers`` processes (default 1: this one), exactly as
        :func:`~langchain_ragspine.backends.directory.bm25_index.build_bm25_index` does; a custom callable runs
        here, text by text.

        Raises:
            ValueError: ``workers < 1``; whatever the tokenizer raises.
        """
        if not texts:
            return cls.empty()
        name = tokenizer_name(tokenize)
        with TermPostings() as postings:
            if name is None:
                for text in texts:
                    postings.add(tokenize(text))
            else:
                with CountedBatches(list(texts), name, workers=workers) as batches:
                    for batch in batches:
                        postings.add_counted(
                            batch.term_list(), batch.term_ids, batch.tfs, batch.doc_len, batch.doc_terms
                        )
            indptr, rows, tfs, lengths = postings.term_major()
            terms = tuple(sorted(postings.vocab, key=postings.vocab.__getitem__))
        return cls(terms, indptr, rows, tfs, lengths)

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, tfs)`` of ``term`` (empty arrays for a term the segment lacks)."""
        t = self.vocab.get(term)
        if t is None:
            return _EMPTY_INT32, _EMPTY_INT32
        lo, hi = int(self.indptr[t]), int(self.indptr[t + 1])
        return self.rows[lo:hi], self.tfs[lo:hi]


def merge_segments(parts: Sequence[tuple[PostingsSegment, np.ndarray | None]]) -> PostingsSegment:
    """One segment holding the live rows of ``parts`` — ``(segment, live)`` pairs, ``live`` a bool mask of the
    segment's rows (``None``: all) — in order: the first part's live rows first, then the next part's, each in its
    own order.  Nothing is tokenized again: the postings are renumbered and sorted term-major (one pass over them).
    """
    terms: dict[str, int] = {}
    term_parts: list[np.ndarray] = []
    row_parts: list[np.ndarray] = []
    tf_parts: list[np.ndarray] = []
    length_parts: list[np.ndarray] = []
    offset = 0
    for seg, live in parts:
        keep = np.ones(seg.n_rows, dtype=np.bool_) if live is None else np.asarray(live, dtype=np.bool_)
        new_row = np.cumsum(keep, dtype=np.int64) - 1 + offset  # the row's number in the merged segment
        global_id = np.fromiter(
            (terms.setdefault(t, len(terms)) for t in seg.terms), dtype=np.int64, count=len(seg.terms)
        )
        term_of = np.repeat(global_id, np.diff(seg.indptr))
        alive = keep[seg.rows] if seg.rows.size else np.zeros(0, dtype=np.bool_)
        term_parts.append(term_of[alive])
        row_parts.append(new_row[seg.rows[alive]])
        tf_parts.append(seg.tfs[alive])
        length_parts.append(seg.lengths[keep])
        offset += int(keep.sum())
    if not length_parts:
        return PostingsSegment.empty()
    term = np.concatenate(term_parts) if term_parts else np.zeros(0, dtype=np.int64)
    order = np.argsort(term, kind="stable")  # rows stay ascending within a term: parts and rows come in order
    counts = np.bincount(term, minlength=len(terms))
    indptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    # a term whose every posting died is kept in the vocabulary with no postings (df 0: it scores nothing)
    return PostingsSegment(
        tuple(terms),
        indptr,
        np.concatenate(row_parts)[order].astype(np.int32),
        np.concatenate(tf_parts)[order].astype(np.int32),
        np.concatenate(length_parts).astype(np.int64),
    )


def corpus_statistics(parts: Sequence[tuple[PostingsSegment, np.ndarray | None]]) -> tuple[int, int]:
    """``(N, total length)`` of the live rows of ``parts``."""
    n = total = 0
    for seg, live in parts:
        if live is None:
            n += seg.n_rows
            total += int(seg.lengths.sum())
        else:
            n += int(np.count_nonzero(live))
            total += int(seg.lengths[live].sum())
    return n, total


def bm25_scores(
    tokens: Sequence[str],
    parts: Sequence[tuple[PostingsSegment, np.ndarray | None]],
    *,
    k1: float,
    b: float,
    statistics: tuple[int, int] | None = None,
) -> list[np.ndarray]:
    """Lucene BM25 of every row of each part for the query ``tokens`` (see the module docstring): one float64 array
    per part, 0 for a dead row or a row sharing no term with the query.  ``statistics`` — ``(N, total length)`` of
    the live rows, :func:`corpus_statistics` — when the caller keeps them (default: computed here).

    Args:
        tokens: the query's tokens, in order (a repeated token counts each time).
        parts: ``(segment, live)`` pairs, ``live`` a bool mask of the segment's rows (``None``: all live).
        k1, b: BM25's term-frequency saturation and length normalisation.
    """
    out = [np.zeros(seg.n_rows, dtype=np.float64) for seg, _ in parts]
    n, total = corpus_statistics(parts) if statistics is None else statistics
    if n == 0 or not tokens:
        return out
    avgdl = total / n if total else 1.0
    contributions: dict[str, list[tuple[np.ndarray, np.ndarray]] | None] = {}
    for token in tokens:
        if token not in contributions:
            contributions[token] = _contributions(token, parts, n, avgdl, k1, b)
        found = contributions[token]
        if found is None:
            continue
        for scores, (rows, values) in zip(out, found, strict=True):
            if rows.size:
                scores[rows] += values  # a term's rows are distinct within a part
    return out


def _contributions(
    token: str,
    parts: Sequence[tuple[PostingsSegment, np.ndarray | None]],
    n: int,
    avgdl: float,
    k1: float,
    b: float,
) -> list[tuple[np.ndarray, np.ndarray]] | None:
    """Per part, ``(rows, idf · tf')`` of ``token``'s live postings; ``None`` when no live row has it."""
    live_postings: list[tuple[np.ndarray, np.ndarray, PostingsSegment]] = []
    df = 0
    for seg, live in parts:
        rows, tfs = seg.postings(token)
        if live is not None and rows.size:
            keep = live[rows]
            rows, tfs = rows[keep], tfs[keep]
        df += int(rows.size)
        live_postings.append((rows, tfs, seg))
    if df == 0:
        return None
    idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
    out: list[tuple[np.ndarray, np.ndarray]] = []
    for rows, tfs, seg in live_postings:
        if not rows.size:
            out.append((rows, np.zeros(0, dtype=np.float64)))
            continue
        tf = tfs.astype(np.float64)
        dl = seg.lengths[rows].astype(np.float64)
        out.append((rows, idf * tf / (tf + k1 * (1.0 - b + b * dl / avgdl))))
    return out
