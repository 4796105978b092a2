"""Features of (question, candidate) pairs for the learned reranker: cheap lexical and first-stage signals.

::

    from langchain_ragspine.document_compressors.learned.features import FEATURE_NAMES, candidate_features

    X = candidate_features("日本で梅雨がないのは北海道とどこか。", candidates)   # float64 array, (len(candidates), 22)
    dict(zip(FEATURE_NAMES, X[0]))

The classic learning-to-rank feature set over a first stage's candidates (Qin et al., "LETOR", 2010; the features
Anserini / Pyserini compute for their LambdaMART rerankers): what the first stage said about each candidate, and how
much of the question the candidate's text (and its title) contains.  Every feature is computed from the question,
the candidate's ``page_content`` and metadata and the other candidates of the same list — no corpus statistics,
no model, nothing stored — so a list of 20–50 candidates costs about a millisecond.

Columns (:data:`FEATURE_NAMES`, in order):

* ``bm25``, ``has_bm25``, ``vector``, ``has_vector``, ``fused``, ``has_fused`` — the channel scores of
  ``metadata["scores"]`` (a missing or ``None`` score is ``0`` with its flag ``0``);
* ``rank``, ``inv_rank`` — the position in the input list (1 = first) and its reciprocal;
* ``score_norm``, ``score_gap`` — the first stage's own score (``fused``, else ``bm25``, else ``vector``) divided
  by the list's best one, and the best one minus it over the best one's magnitude;
* ``term_share``, ``idf_share`` — the share of the question's content terms
  (:func:`~langchain_ragspine.stopwords.content_terms`, the package's tokenizer) found in the text, plain and
  weighted by an IDF over the candidate list (``log(1 + (n - df + 0.5) / (df + 0.5))``, ``df`` = candidates holding
  the term: a term every candidate holds tells them apart by nothing);
* ``title_share`` — the IDF-weighted share found in ``metadata["title"]``; ``title_in_question`` — 1 when the whole
  title (two characters or more) occurs in the question: the question names the article's entity;
* ``lcs_share``, ``lcs_chars`` — the longest common substring of the question and the text (characters, over the
  NFKC lower-cased question with its CJK question words cut out), as a share of the question and raw;
* ``window_density`` — the sum of the lengths of the found multi-character terms over the width of the smallest
  span of the text that holds one occurrence of each (1 when they stand side by side; proximity, Tao & Zhai,
  SIGIR 2007); ``window_log`` — ``log1p`` of that width;
* ``bigram_share``, ``char_share`` — the share of the question's character bigrams and of its distinct characters
  (letters and ideographs, no kana-only or punctuation) found in the text: character-level similarity, which for
  Chinese and Japanese needs no word segmentation;
* ``length_log`` — ``log1p`` of the text's length in characters; ``start_log`` — ``log1p`` of
  ``metadata["start_index"]`` (its position in its document, 0 when unknown); ``is_first`` — 1 for a document's
  first chunk (``start_index`` 0).

Matching is on folded text: NFKC, lower case, Traditional Chinese folded to Simplified per character (as the
``auto`` tokenizer folds), so a term is "in" a text when it is a substring of it.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from langchain_core.documents import Document

from langchain_ragspine.documents import score_of
from langchain_ragspine.stopwords import CJK_QUESTION_WORDS, content_terms
from langchain_ragspine.text import normalize
from langchain_ragspine.text.chinese import fold_to_simplified
from langchain_ragspine.tokenizers import Tokenizer

__all__ = ["FEATURE_NAMES", "FEATURE_VERSION", "QueryTerms", "candidate_features", "fold_for_matching",
           "longest_common_substring", "query_terms", "smallest_window"]

#: The feature columns, in order (a model file records the names it was trained on, and loading checks them).
FEATURE_NAMES: tuple[str, ...] = (
    "bm25", "has_bm25", "vector", "has_vector", "fused", "has_fused",
    "rank", "inv_rank", "score_norm", "score_gap",
    "term_share", "idf_share", "title_share", "title_in_question",
    "lcs_share", "lcs_chars", "window_density", "window_log",
    "bigram_share", "char_share",
    "length_log", "start_log", "is_first",
)
#: Bumped whenever a feature's definition changes (a model records it; a model of another version is refused).
FEATURE_VERSION = 1

_QUESTION_WORDS_RE = re.compile("|".join(re.escape(w) for w in CJK_QUESTION_WORDS))
#: Characters that count for char_share / bigrams: letters, digits and ideographs, no kana-only marks or punctuation.
_KANA_RE = re.compile(r"[\u3040-\u309f\u30fc]")


@functools.lru_cache(maxsize=8192)
def fold_for_matching(text: str) -> str:
    """``text`` as the features compare it: NFKC, lower case, Traditional→Simplified per character.  The last
    8,192 texts are cached (a corpus's chunks come back as candidates of many questions; NFKC is most of the cost)."""
    return fold_to_simplified(normalize(text).lower())


@dataclass(frozen=True)
class QueryTerms:
    """What the features need of a question, computed once per question (:func:`query_terms`).

    Attributes:
        folded: the question folded (:func:`fold_for_matching`).
        core: the folded question with its CJK question words cut out and no whitespace or punctuation.
        terms: its content terms (sorted, for a deterministic order).
        long_terms: the terms of two characters or more (the window's terms; all terms when none is).
        bigrams: its distinct character bigrams (of ``core``, kana included).
        chars: its distinct letters, digits and ideographs (no kana, no punctuation).
    """

    folded: str
    core: str
    terms: tuple[str, ...]
    long_terms: tuple[str, ...]
    bigrams: tuple[str, ...]
    chars: tuple[str, ...]


def query_terms(question: str, tokenizer: str | Tokenizer = "auto") -> QueryTerms:
    """The :class:`QueryTerms` of ``question`` (content terms by ``tokenizer``, default ``"auto"``).

    >>> q = query_terms("What is the weather in Tokyo?")
    >>> q.terms, q.core
    (('tokyo', 'weather'), 'whatistheweatherintokyo')
    """
    folded = fold_for_matching(question)
    core = "".join(ch for ch in _QUESTION_WORDS_RE.sub("", folded) if ch.isalnum())
    terms = tuple(sorted({fold_for_matching(t) for t in content_terms(question, tokenizer)} - {""}))
    long_terms = tuple(t for t in terms if len(t) >= 2) or terms
    bigrams = tuple(sorted({core[i:i + 2] for i in range(len(core) - 1)}))
    chars = tuple(sorted({ch for ch in core if not _KANA_RE.match(ch)}))
    return QueryTerms(folded=folded, core=core, terms=terms, long_terms=long_terms, bigrams=bigrams, chars=chars)


def longest_common_substring(a: str, b: str) -> int:
    """Length of the longest common substring of ``a`` and ``b`` (characters; 0 when either is empty).

    Uses ``str.__contains__``: the longest match starting at ``a[i + 1]`` is at least the one at ``a[i]`` minus one,
    so about ``2 * len(a)`` substring tests suffice.

    >>> longest_common_substring("北海道とどこ", "北海道と小笠原諸島")
    4
    """
    best = 0
    length = 0  # the longest match starting at i found so far (a lower bound carried over from i - 1)
    for i in range(len(a)):
        length = max(length - 1, 0)
        while i + length < len(a) and a[i:i + length + 1] in b:
            length += 1
        best = max(best, length)
        if best >= len(a) - i:
            break
    return best


def smallest_window(text: str, terms: Sequence[str]) -> tuple[int, int]:
    """``(found, width)``: how many of ``terms`` occur in ``text`` and the width in characters of the smallest
    span of ``text`` holding one occurrence of each found term (``(0, 0)`` when none occurs).  The span runs from
    its first occurrence's start to the later end of its first and last occurrences, over the first 16
    occurrences of each term (bounded work on long texts).

    >>> smallest_window("a tokyo b c weather d tokyo weather", ["tokyo", "weather"])
    (2, 13)
    """
    events: list[tuple[int, int, int]] = []  # (start, end, term index)
    found = 0
    for ti, term in enumerate(terms):
        start = text.find(term)
        if start < 0:
            continue
        found += 1
        n = 0
        while start >= 0 and n < 16:  # enough occurrences for the window; bounds the work on long texts
            events.append((start, start + len(term), ti))
            start = text.find(term, start + 1)
            n += 1
    if not found:
        return 0, 0
    events.sort()
    counts: dict[int, int] = {}
    best = len(text) + 1
    lo = 0
    for hi in range(len(events)):
        ti = events[hi][2]
        counts[ti] = counts.get(ti, 0) + 1
        while len(counts) == found:
            best = min(best, max(events[hi][1], events[lo][1]) - events[lo][0])
            lt = events[lo][2]
            counts[lt] -= 1
            if not counts[lt]:
                del counts[lt]
            lo += 1
    return found, best


def candidate_features(
    question: str | QueryTerms, documents: Sequence[Document], *, tokenizer: str | Tokenizer = "auto"
) -> np.ndarray:
    """The feature matrix of ``documents`` (a first stage's list, best first) for ``question``.

    Args:
        question: the question, or its :func:`query_terms` (to compute those once).
        documents: the candidates, in the first stage's order (``rank`` is the position in this list).
        tokenizer: the content-term tokenizer (default ``"auto"``; the one the model was trained with).

    Returns:
        ``float64`` array of shape ``(len(documents), len(FEATURE_NAMES))``; ``(0, n)`` for no documents.
    """
    q = question if isinstance(question, QueryTerms) else query_terms(question, tokenizer)
    n = len(documents)
    out = np.zeros((n, len(FEATURE_NAMES)), dtype=np.float64)
    if not n:
        return out
    texts = [fold_for_matching(d.page_content) for d in documents]
    titles = [fold_for_matching(str(d.metadata.get("title") or "")) for d in documents]
    present = [[t in text for t in q.terms] for text in texts]
    df = [sum(p[j] for p in present) for j in range(len(q.terms))]
    idf = [math.log(1.0 + (n - f + 0.5) / (f + 0.5)) for f in df]
    idf_total = sum(idf) or 1.0
    n_terms = len(q.terms) or 1
    core_len = len(q.core) or 1
    n_bigrams = len(q.bigrams) or 1
    n_chars = len(q.chars) or 1
    raw = [[score_of(d, c) for c in ("bm25", "vector", "fused")] for d in documents]
    primary = [next((s for s in (r[2], r[0], r[1]) if s is not None), 0.0) for r in raw]
    top = max(primary)
    scale = abs(top) or 1.0
    for i, doc in enumerate(documents):
        text, title, row = texts[i], titles[i], out[i]
        for c, value in enumerate(raw[i]):
            if value is not None:
                row[2 * c] = value
                row[2 * c + 1] = 1.0
        row[6] = i + 1
        row[7] = 1.0 / (i + 1)
        row[8] = primary[i] / top if top > 0 else 0.0
        row[9] = (top - primary[i]) / scale
        row[10] = sum(present[i]) / n_terms
        row[11] = sum(w for w, p in zip(idf, present[i], strict=True) if p) / idf_total
        row[12] = sum(w for w, t in zip(idf, q.terms, strict=True) if t in title) / idf_total if title else 0.0
        row[13] = 1.0 if len(title) >= 2 and title in q.folded else 0.0
        lcs = longest_common_substring(q.core, text)
        row[14] = lcs / core_len
        row[15] = lcs
        found, width = smallest_window(text, q.long_terms)
        if found:
            total = sum(len(t) for t in q.long_terms if t in text)
            row[16] = min(1.0, total / width) if width else 0.0
            row[17] = math.log1p(width)
        row[18] = sum(b in text for b in q.bigrams) / n_bigrams if q.bigrams else 0.0
        row[19] = sum(ch in text for ch in q.chars) / n_chars if q.chars else 0.0
        row[20] = math.log1p(len(doc.page_content))
        start = doc.metadata.get("start_index")
        start_i = start if isinstance(start, int) and not isinstance(start, bool) and start > 0 else 0
        row[21] = math.log1p(start_i)
        row[22] = 1.0 if start_i == 0 and isinstance(start, int) else 0.0
    return out
