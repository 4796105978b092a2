"""Hybrid retrieval: fuse the ranked lists of any number of retrievers (BM25, dense, …) into one ranking.

Three fusion functions are offered:

* ``"convex"`` — a convex combination of min-max normalised scores (Bruch, Gai & Ingber, "An Analysis of Fusion
  Functions for Hybrid Retrieval", ACM TOIS 42(1), 2023)::

      fused(d) = Σ_i  w_i · (s_i(d) - min_i) / (max_i - min_i)      Σ_i w_i = 1

  ``s_i`` is channel ``i``'s own score (``metadata["scores"]``: ``fused``, else ``bm25``, else ``vector``; for a
  channel that reports no scores, ``1 / (c + rank)``), ``min_i``/``max_i`` are taken over that channel's candidate
  list, and a document the channel did not return contributes 0 for it.  Without ``weights``, the first channel
  gets ``alpha`` (default 0.7) and the others share ``1 - alpha``: put the lexical channel first, as the package's
  retrieval modes do.
* ``"two_stage"`` (:class:`HybridRetriever`'s default) — the same convex scores, used twice: rank 1 is the document
  with the best convex score at the first channel's weight ``top_alpha``; ranks 2+ follow the convex score at
  ``alpha``.  The defaults, ``top_alpha = 1.0`` and ``alpha = 0.55``, keep the lexical channel's best document at
  rank 1 and let the dense channel add recall below it ("BM25 first, dense fills").
* ``"rrf"`` (:func:`fuse`'s default) — Reciprocal Rank Fusion (Cormack, Clarke & Büttcher, "Reciprocal Rank Fusion
  outperforms Condorcet and individual Rank Learning Methods", SIGIR 2009), optionally weighted::

      fused(d) = Σ_i  w_i / (c + rank_i(d))        rank from 1, c = 60

  A list in which ``d`` does not appear contributes nothing.  It uses ranks only.

Why ``"two_stage"`` with ``top_alpha = 1.0`` is the retriever's default (BM25 ``auto`` + multilingual-e5-small,
``ParagraphTextSplitter()`` defaults, every question of JSQuAD valid (4,442, Japanese) and CMRC 2018 dev (3,219,
Chinese), ``fetch_k = 50``; ``python benchmarks/fusion_study.py``, tables in ``benchmarks/RESULTS.md``, section
``fusion``).  Thirteen fusion methods (score normalisations: min-max, min-max over a fixed depth, z-score, rank,
theoretical min-max; weighted RRF; per-query weights from each channel's top-score gap; rules that keep a confident
lexical top hit) had their one or two parameters chosen on one set and were measured on the other, in both
directions.  The dense channel's gain at answer recall@1 does not transfer: on CMRC every score fusion gains
+0.010 to +0.015 (significant), on JSQuAD none does (best +0.004, not significant), and a weight chosen on CMRC
*loses* on JSQuAD (convex: −0.0023).  Below rank 1 the gain does transfer: keeping BM25's first result and filling
ranks 2+ with convex ``alpha = 0.55`` (chosen alike on either set) gives answer recall@5 +0.0052 (JSQuAD) and +0.0025
(CMRC), recall@10 +0.0025 / +0.0022, both significant at @5 — and never changes rank 1, so it cannot lose to BM25
there.  It was the only method whose every transfer difference at @1 and @5 and every 95% interval bound was
>= 0.  ``top_alpha = 0.7`` (the previous ``"convex"`` default's weight at rank 1) gains recall@1 on CMRC (+0.010) at
the risk of a loss on Japanese data; plain RRF (c = 60) loses to BM25 at @1 on both sets (when one channel is much
stronger, its flat ``1/(60 + rank)`` lets the weaker channel's top ranks displace the stronger one's answer).  RRF
remains the right choice for lists whose scores are not comparable or absent (RAG-Fusion's several queries,
:func:`fuse`'s default) and is one keyword away: ``fusion="rrf"``.

Identity (``docs/architecture.md``, invariant 5): a document that carries ``metadata["chunk_id"]`` (every result of
the package's retrievers does) is keyed by it, never by its ``page_content`` (two chunks with the same text and
their own ``chunk_id`` are two chunks; a chunk whose text differs between channels, e.g. a ``prompt_text`` variant,
is still one chunk).  A document without one is keyed by ``Document.id`` (the same id in two lists is one chunk) and
is also matched by its text, as the package's own retrievers identify such a document: :class:`BM25Retriever` and
:class:`DenseRetriever` give a document without ``chunk_id`` or ``id`` (plain LangChain splitter output) the
identity :func:`~langchain_ragspine.documents.content_chunk_id` of its text, the n-th repeat of a text ``-{n}``.  So
a foreign vector store built from the same texts — which gives each its own uuid ``Document.id`` — meets the BM25
channel on the same chunks (as LangChain's ``EnsembleRetriever``, which keys by text, would), and two stores with
different uuids meet each other.  Text matching keeps chunks apart that the package keeps apart: it pairs the n-th
copy of a text in one list with the n-th elsewhere (never two documents of one list with one chunk), and never pairs
two documents whose ``doc_id`` (or ``source``) differ; one whose ``doc_id`` agrees is preferred.  A text-matched
result is a copy of the chunk's own document (the one carrying its ``chunk_id``) when a list returned it, with the
scores of every list.  Within one ranked list only the first (best-ranked) occurrence of a key counts, and ranks are
positions in that de-duplicated list.  Ties break on the key.  ``id_key`` (``EnsembleRetriever``'s argument) keys a
document carrying ``metadata[id_key]`` by that value instead — ``id_key="doc_id"``: one result per source document;
one without the field keeps the identity above.

A ``score_threshold`` drops fused results below it, on the fusion's scale: ``"convex"`` / ``"two_stage"`` in [0, 1]
(relative to the query's candidates: min-max per channel), ``"rrf"`` in [0, Σ weights / (c + 1)].

Differences from LangChain's ``EnsembleRetriever`` (``langchain_classic.retrievers``, weighted RRF only): it keys by
``page_content`` by default (and raises ``KeyError`` with ``id_key`` when a document lacks the field), so distinct
chunks with the same text collapse (also two documents' copies, whatever their ``doc_id``) and one chunk with two
renderings splits; a key repeated inside one list adds one
contribution per repeat and shifts the ranks after it; ties keep first-seen order; every fused document is returned
(no ``k``); children are invoked with no ``k``/``filter``; results carry no scores.  ``id_key`` has its meaning here
too, but a document without the field keeps its chunk identity where ``EnsembleRetriever`` raises ``KeyError``, and
a value repeated inside one list counts once.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, Unpack, cast

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from pydantic import field_validator

from langchain_ragspine.arguments import (
    DEFAULT_K,
    PositiveIntField,
    check_arguments,
    check_int,
    renamed_keywords,
)
from langchain_ragspine.backends.directory.bm25_index import SAVE_LAYOUT as _BM25_LAYOUT
from langchain_ragspine.backends.directory.files import atomic_dir, layout, read_config
from langchain_ragspine.documents import (
    check_score_threshold,
    content_chunk_id,
    doc_key,
    score_of,
    scored_at_least,
    with_scores,
)
from langchain_ragspine.filters import CompiledFilter, FilterField, Predicate, compile_filter
from langchain_ragspine.retrievers.base import (
    AsyncCall,
    RagSpineRetriever,
    RetrieverCall,
    RunnableOptions,
    SyncCall,
    documents_from_texts,
)
from langchain_ragspine.retrievers.bm25 import BM25Retriever
from langchain_ragspine.retrievers.contract import Search, asearch_each, search_each
from langchain_ragspine.retrievers.dense import SAVE_LAYOUT as _DENSE_LAYOUT
from langchain_ragspine.retrievers.dense import DenseRetriever
from langchain_ragspine.retrievers.embed_as import EMBED_AS_OPTION, embed_as_options, embed_as_target
from langchain_ragspine.sensitivity import is_restricted
from langchain_ragspine.served import ServedIds, combine_served
from langchain_ragspine.tokenizers import Tokenizer

__all__ = ["DEFAULT_C", "FUSIONS", "TWO_STAGE_ALPHA", "TWO_STAGE_TOP_ALPHA", "HybridRetriever", "convex_weights", "fuse"]

#: The RRF constant of Cormack et al. (their "k"; named ``c`` here because ``k`` is the result count).
DEFAULT_C = 60
#: Default weight of the first (lexical) channel for ``fusion="convex"``.
DEFAULT_ALPHA = 0.7
#: ``fusion="two_stage"`` defaults: the first channel's weight for ranks 2+ (``alpha``) and for rank 1 (``top_alpha``;
#: 1.0 = the first channel's own best document), measured on both shared sets (``benchmarks/fusion_study.py``).
TWO_STAGE_ALPHA = 0.55
TWO_STAGE_TOP_ALPHA = 1.0
#: The fusion functions :func:`fuse` and :class:`HybridRetriever` accept.
FUSIONS = ("rrf", "convex", "two_stage")

Fusion = Literal["rrf", "convex", "two_stage"]

# Score keys a channel's documents may carry, in the order the convex fusion looks for the channel's own score.
_OWN_SCORE_KEYS = ("fused", "bm25", "vector")


# ---------------------------------------------------------------------------------------------------- validation
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


def _check_alpha(alpha: Any, name: str = "alpha") -> float:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)):
        raise TypeError(f"{name} must be a number, got {alpha!r}")
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"{name} must be in [0, 1], got {alpha!r}")
    return float(alpha)





def _check_id_key(id_key: Any) -> str | None:
    if id_key is not None and (not isinstance(id_key, str) or not id_key):
        raise (TypeError if not isinstance(id_key, str) else ValueError)(
            f"id_key must be a metadata field name (a non-empty string) or None, got {id_key!r}"
        )
    return id_key


def convex_weights(n: int, alpha: float) -> list[float]:
    """Default convex weights for ``n`` channels: ``alpha`` for the first, ``(1 - alpha) / (n - 1)`` for each other
    (``[1.0]`` for one channel).  ``alpha = 0.5`` with two channels is the plain average."""
    if n == 1:
        return [1.0]
    return [alpha] + [(1.0 - alpha) / (n - 1)] * (n - 1)


_FORMAT = "ragspine-hybrid/1"
_CONFIG_FILE = "hybrid.json"
#: Everything :meth:`HybridRetriever.save` writes: ``hybrid.json`` and one BM25 or dense save per ``channel-<n>``.
_SAVE_LAYOUT = {**layout(_CONFIG_FILE), r"channel-\d+": {**_BM25_LAYOUT, **_DENSE_LAYOUT}}
# the HybridRetriever fields save() writes to hybrid.json (the channels are saved in sub-directories)
_SAVED_FIELDS = ("weights", "c", "fetch_k", "k", "filter", "fusion", "alpha", "top_alpha", "id_key", "score_threshold")
#: Field -> its key in hybrid.json where the two differ: the format ``ragspine-hybrid/1`` names the per-channel
#: depth ``candidate_k`` (the field's name when the format was made), so a save reads as before in every version.
_SAVED_KEYS = {"fetch_k": "candidate_k"}


# ---------------------------------------------------------------------------------------------------- fusion
@dataclass
class _Entry:
    """One fused key: its contributions (``parts``; ``top`` for the rank-1 choice of ``"two_stage"``) and its
    occurrences ``(order, doc)`` across lists."""

    parts: list[float] = field(default_factory=list)
    top: list[float] = field(default_factory=list)
    seen: list[tuple[tuple[bool, float, int], Document]] = field(default_factory=list)
    first: tuple[int, int] | None = None  # (list, rank) of its first occurrence, for ties="lists"


Key = tuple[int, str, int, int]

#: Lineage fields that tell two sources apart: a document keyed by its text is never fused with a chunk whose value
#: of one of them differs from its own (two chunks with the same text from two documents stay two results).
_SOURCE_FIELDS = ("doc_id", "source")


#: ``Key[2]`` of a key read from ``metadata[id_key]``: a string value, any other value (its JSON text).
_ID_KEY_STR, _ID_KEY_OTHER = 1, 2


def _id_key_value(doc: Document, id_key: str) -> Key | None:
    """The key of ``doc`` under ``id_key``: ``(0, value, 1, 0)`` for a string ``metadata[id_key]``, ``(0, its
    canonical JSON, 2, 0)`` for another value (so ``1`` and ``"1"`` stay apart, a list or dict is hashable);
    ``None`` when the field is missing or ``None`` (the document keeps its own identity: a missing value never
    matches)."""
    value = doc.metadata.get(id_key)
    if value is None:
        return None
    if isinstance(value, str):
        return (0, value, _ID_KEY_STR, 0)
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)
    return (0, text, _ID_KEY_OTHER, 0)


def _is_id_key_value(key: Key) -> bool:
    """Whether ``key`` was read from ``metadata[id_key]`` (:func:`_id_key_value`)."""
    return key[0] == 0 and key[2] in (_ID_KEY_STR, _ID_KEY_OTHER)


def _dedupe(docs: Sequence[Document], channel: int, id_key: str | None = None) -> list[tuple[Key, Document]]:
    """``(key, doc)`` for the first occurrence of each key in ``docs``, best first.

    Keys are ``(0, chunk_id or id, 0, 0)``; a document with neither gets ``(1, "", channel, position)`` — its own
    key, sorted after keyed ties in first-seen order (:func:`_fusion_keys` may still match it by its text).  With
    ``id_key``, a document carrying ``metadata[id_key]`` is keyed by that value instead (:func:`_id_key_value`).
    """
    seen: set[Key] = set()
    out: list[tuple[Key, Document]] = []
    for pos, doc in enumerate(docs):
        by_id = _id_key_value(doc, id_key) if id_key is not None else None
        k = doc_key(doc)
        key: Key = by_id if by_id is not None else (0, k, 0, 0) if k is not None else (1, "", channel, pos)
        if key in seen:
            continue
        seen.add(key)
        out.append((key, doc))
    return out


def _content_parts(key: str) -> tuple[str, int]:
    """``(base, n)`` of an id made by :func:`content_chunk_id` (``"chunk-…-2"`` → ``("chunk-…", 2)``); any other
    id is its own base with ``n = 0`` (it then matches no text)."""
    base, sep, tail = key.rpartition("-")
    return (base, int(tail)) if sep and tail.isdigit() and tail.isascii() else (key, 0)


def _source_match(a: Document, b: Document) -> bool | None:
    """``True``: ``a`` and ``b`` agree on a :data:`_SOURCE_FIELDS` value both carry; ``False``: they differ on one;
    ``None``: no such value to compare."""
    shared = [f for f in _SOURCE_FIELDS if a.metadata.get(f) is not None and b.metadata.get(f) is not None]
    if not shared:
        return None
    return all(a.metadata[f] == b.metadata[f] for f in shared)


@dataclass
class _Group:
    """The occurrences of one identity (``doc_key``; a keyless document alone) across lists, before text matching."""

    key: Key
    doc: Document  # its first occurrence (lists in order, best rank first)
    lists: set[int]
    ours: bool  # some occurrence carries ``metadata["chunk_id"]``: never re-keyed by its text


def _fusion_keys(
    ranked_lists: Sequence[Sequence[Document]], active: Sequence[bool], id_key: str | None = None
) -> list[list[tuple[Key, Document]]]:
    """Per list (``[]`` for an inactive one): ``(key, doc)`` for each distinct chunk, best first — the identity
    rule of the module docstring.

    0. With ``id_key``, a document carrying ``metadata[id_key]`` is keyed by that value, and the key is final
       (never matched by text); one without it follows 1 and 2.

    1. A document's identity is :func:`doc_key` (``metadata["chunk_id"]``, else ``Document.id``); a keyless one is
       its own (:func:`_dedupe`).  An identity carried as ``metadata["chunk_id"]`` by some occurrence is *ours* and
       is final.
    2. Any other identity (a foreign store's ``Document.id``, say a uuid, or none) is matched by its text, in order
       of first appearance (lists in order, best rank first): it joins the chunk whose id is the text's
       :func:`content_chunk_id` ``(text, n)`` — ours, or an earlier text-matched one — that appears in none of its
       lists (one contribution per chunk per list, so the n-th copy of a text in a list meets the n-th copy
       elsewhere, as :func:`content_chunk_id` numbers repeats) and does not differ from it in ``doc_id`` or
       ``source``; one with the same ``doc_id`` / ``source`` first, then the smallest ``n``.  Unmatched, it keeps
       its identity and takes the next free ``n`` for the documents matched after it.
    """
    groups: dict[Key, _Group] = {}
    per_list: list[list[tuple[Key, Document]]] = []
    for ch, (lst, on) in enumerate(zip(ranked_lists, active, strict=True)):
        unique = _dedupe(lst, ch, id_key) if on else []
        per_list.append(unique)
        for key, doc in unique:
            g = groups.get(key)
            if g is None:
                groups[key] = g = _Group(key, doc, set(), False)
            g.lists.add(ch)
            cid = doc.metadata.get("chunk_id")
            g.ours = g.ours or (cid is not None and cid != "") or _is_id_key_value(key)
    if all(g.ours for g in groups.values()):  # the package's own channels: nothing to match by text
        return per_list
    by_base: dict[str, list[tuple[int, _Group]]] = {}
    for g in groups.values():
        if g.ours and not _is_id_key_value(g.key):  # a chunk's own id (an id_key value names no text)
            base, n = _content_parts(g.key[1])
            by_base.setdefault(base, []).append((n, g))
    final: dict[Key, Key] = {}
    for g in groups.values():  # insertion order = first appearance
        if g.ours:
            continue
        base = content_chunk_id(g.doc.page_content)
        taken = by_base.setdefault(base, [])
        options = [(_source_match(g.doc, e.doc), n, e) for n, e in taken if not g.lists & e.lists]
        options = [o for o in options if o[0] is not False]
        if options:
            _, _, e = min(options, key=lambda o: (o[0] is not True, o[1]))
            final[g.key] = e.key
            e.lists |= g.lists
        else:
            used = {n for n, _ in taken}
            taken.append((next(n for n in range(len(used) + 1) if n not in used), g))
    if not final:
        return per_list
    return [[(final.get(key, key), doc) for key, doc in unique] for unique in per_list]


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
    top_alpha: float | None = None,
    ties: Literal["key", "lists"] = "key",
    id_key: str | None = None,
) -> list[Document]:
    """Fuse ranked lists of documents into one ranking (a pure function; inputs are not modified).

    Args:
        ranked_lists: one list per channel, best first.  Within a list only the first occurrence of a key counts
            and ranks (from 1) are positions among the list's distinct keys.
        weights: one per list, each >= 0, not all 0 (default: all 1.0).  A list with weight 0 is ignored entirely
            (as if it were not passed: it contributes no documents and no scores; for ``"two_stage"`` also not at
            rank 1).  For ``"convex"`` / ``"two_stage"`` the weights are rescaled to sum to 1; ``None`` means
            :func:`convex_weights` ``(len(ranked_lists), alpha)``.
        c: the RRF constant (default 60), ``>= 0``; the score-based fusions use it only for a list without scores.
        k: number of results (default ``None``: all).
        fusion: ``"rrf"`` (the default here: plain rank fusion, also for lists without comparable scores),
            ``"convex"`` or ``"two_stage"`` (:class:`HybridRetriever`'s default); see the module docstring.
        alpha: ``"convex"`` / ``"two_stage"`` only, when ``weights`` is ``None``: the first list's weight; the
            others share ``1 - alpha``.
        top_alpha: ``"two_stage"`` only: the first list's weight when the rank-1 document is chosen (the others
            share ``1 - top_alpha``; a list with weight 0 gets 0 here too); default :data:`TWO_STAGE_TOP_ALPHA`.
            ``1.0`` keeps the first list's best document at rank 1.
        ties: how documents with equal fused scores are ordered: ``"key"`` (default) by key; ``"lists"`` by where
            they first appear — the earlier list first, then the better rank in it, then the key — so the first
            list (a user's own query, before queries generated from it) wins ties.
        id_key: a metadata field whose value identifies a result instead of its chunk (``EnsembleRetriever``'s
            argument): documents with the same ``metadata[id_key]`` are one result — ``"doc_id"`` gives one result
            per source document, its best-ranked chunk.  A document without the field (or with ``None``) keeps its
            own identity (a missing value never matches another).  Default ``None``: the chunk identity.

    Returns:
        At most ``k`` documents sorted by ``(-fused, key)`` (``ties="lists"``: ``(-fused, first list, rank, key)``)
        — key = ``chunk_id``, else ``Document.id``, a document without ``chunk_id`` joining the chunk its text
        identifies (see the module docstring); documents without either key and unmatched by text come after keyed
        ties, in first-seen order.  For ``"two_stage"`` the
        document with the highest rank-1 score (ties: the higher ``fused``, then the key) comes first and the others
        follow by ``(-fused, key)``.  Each is a copy of the key's first occurrence (one carrying the key itself
        first, then lists taken by descending weight, then in the given order) whose ``metadata["scores"]`` holds
        ``bm25`` and ``vector`` (the first non-``None`` value any list reported for the key, same order), ``fused``
        (this fusion's score; for ``"two_stage"`` the ranks-2+ score, raised for rank 1 to the list's highest, so it
        never rises down the list) and ``rerank = None``.  RESTRICTED documents are never returned; a key
        that is RESTRICTED in any list is dropped altogether (fail closed).  The gate comes before ranking: a
        RESTRICTED document takes no rank in its list and no part in its min-max range, so it cannot push the
        others down or use up ``k``.

    Raises:
        TypeError: a list is not a sequence of ``Document``, or a parameter has the wrong type.
        ValueError: no lists, ``weights`` of the wrong length / negative / all zero, ``c < 0``, ``k < 0``, an
            unknown ``fusion``, ``alpha`` or ``top_alpha`` outside [0, 1], or ``top_alpha`` with another fusion
            than ``"two_stage"``.
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
    n = len(ranked_lists)
    ws = _check_weights(weights, n)
    check_int(c, "c", minimum=0)
    check_int(k, "k", minimum=0, allow_none=True)
    fusion = _check_fusion(fusion)  # type: ignore[assignment]
    alpha = _check_alpha(alpha)
    if top_alpha is not None and fusion != "two_stage":
        raise ValueError(f"top_alpha is a two_stage parameter, got it with fusion={fusion!r}")
    if ties not in ("key", "lists"):
        raise ValueError(f"ties must be 'key' or 'lists', got {ties!r}")
    _check_id_key(id_key)
    tops = [0.0] * n
    if fusion != "rrf":
        if weights is None:
            ws = convex_weights(n, alpha)
        total = math.fsum(ws)
        ws = [w / total for w in ws]
        if fusion == "two_stage":
            tw = _check_alpha(TWO_STAGE_TOP_ALPHA if top_alpha is None else top_alpha, "top_alpha")
            tops = [t if w > 0 else 0.0 for t, w in zip(convex_weights(n, tw), ws, strict=True)]
            if not any(t > 0 for t in tops):  # every channel weighted at rank 1 is off: rank 1 = the fused best
                tops = list(ws)

    entries: dict[Key, _Entry] = {}
    restricted: set[Key] = set()  # fail closed: a key labelled RESTRICTED in any list is dropped altogether
    keyed = _fusion_keys(ranked_lists, [w != 0 for w in ws], id_key)
    for ch, (listed, w, tw) in enumerate(zip(keyed, ws, tops, strict=True)):
        if w == 0:
            continue
        unique: list[tuple[Key, Document]] = []  # the gate before ranks: a RESTRICTED document takes none
        for key, doc in listed:
            if is_restricted(doc.metadata):
                restricted.add(key)
            else:
                unique.append((key, doc))
        if fusion == "rrf":
            parts = [w / (c + rank) for rank in range(1, len(unique) + 1)]
            top = [0.0] * len(unique)
        else:
            scores = _normalised_scores([d for _, d in unique], c)
            parts = [w * s for s in scores]
            top = [tw * s for s in scores]
        for rank, ((key, doc), part, tpart) in enumerate(zip(unique, parts, top, strict=True), 1):
            e = entries.setdefault(key, _Entry())
            if e.first is None:
                e.first = (ch, rank)
            e.parts.append(part)
            e.top.append(tpart)
            e.seen.append(((doc_key(doc) != key[1], -w, ch), doc))  # a document with the chunk's own key first

    ranked: list[tuple[float, Key, Document, float | None, float | None, float, float | None]] = []
    first_seen: dict[Key, tuple[int, int]] = {}
    for key, e in entries.items():
        if key in restricted:
            continue
        e.seen.sort(key=lambda t: t[0])  # the chunk's own key, then descending weight, then channel order
        bm25 = next((s for s in (score_of(d, "bm25") for _, d in e.seen) if s is not None), None)
        vector = next((s for s in (score_of(d, "vector") for _, d in e.seen) if s is not None), None)
        sparse = next((s for s in (score_of(d, "sparse") for _, d in e.seen) if s is not None), None)
        ranked.append((math.fsum(e.parts), key, e.seen[0][1], bm25, vector, math.fsum(e.top), sparse))
        first_seen[key] = e.first or (n, 0)
    if ties == "lists":
        ranked.sort(key=lambda t: (-t[0], first_seen[t[1]], t[1]))
    else:
        ranked.sort(key=lambda t: (-t[0], t[1]))
    if fusion == "two_stage" and ranked:
        # rank 1 by the rank-1 weights; ties by the fused score, then the key (= the first such in `ranked`)
        first = max(range(len(ranked)), key=lambda i: (ranked[i][5], -i))
        ranked.insert(0, ranked.pop(first))
        # rank 1 carries the list's highest fused score, so "fused" never rises down the list and a later stage that
        # re-ranks by it (MMR with relevance="retrieval") keeps rank 1 first
        ranked[0] = (max(t[0] for t in ranked), *ranked[0][1:])
    if k is not None:
        ranked = ranked[:k]
    # a learned-sparse channel's score is kept where one ran (absent otherwise: the four channels as before)
    return [with_scores(doc, bm25=b, vector=v, fused=s, rerank=None, **({} if sp is None else {"sparse": sp}))
            for s, _, doc, b, v, _, sp in ranked]


# ---------------------------------------------------------------------------------------------------- retriever
def _searches(
    channels: Sequence[tuple[int, BaseRetriever]], query: str, options: Mapping[str, Any]
) -> list[Search]:
    """One search per channel ``i``, traced as a child run tagged ``retriever_{i + 1}``; ``options`` (the call's
    ``embed_as``, when given) reach each channel as :func:`~langchain_ragspine.retrievers.embed_as.embed_as_target`
    decides (passed to a channel that declares ``embed_as``; a LangChain ``VectorStoreRetriever`` searched by a
    document vector; no other)."""
    out: list[Search] = []
    for i, r in channels:
        target, handed = embed_as_target(r, options)
        out.append((target, query, f"retriever_{i + 1}", handed) if handed else (target, query, f"retriever_{i + 1}"))
    return out


@dataclass(frozen=True)
class _CallParams:
    """One call's parameters (:meth:`HybridRetriever._params`)."""

    k: int
    filter: CompiledFilter | None
    depth: int
    predicate: Predicate | None
    score_threshold: float | None


class HybridOptions(RunnableOptions, total=False):
    """The further keyword arguments of :meth:`HybridRetriever.from_documents` (typed, so mypy and IDEs flag a
    misspelling such as ``top_k=``): the hybrid's own fields."""

    weights: list[float] | None
    c: int
    fetch_k: int
    filter: dict[str, Any] | None
    fusion: Fusion
    alpha: float | None
    top_alpha: float | None
    id_key: str | None
    score_threshold: float | None


class HybridTextOptions(HybridOptions, total=False):
    """The further keyword arguments of :meth:`HybridRetriever.from_texts`: those of :meth:`from_documents`."""

    k: int
    tokenizer: str | Tokenizer
    bm25_kwargs: Mapping[str, Any] | None
    dense_kwargs: Mapping[str, Any] | None


class HybridRetriever(RagSpineRetriever):
    """Fuse any list of ``BaseRetriever`` channels (e.g. BM25 + dense, lexical first).  By default
    (``fusion="two_stage"``) the first channel's best document stays at rank 1 and ranks 2+ follow a convex
    combination of min-max normalised scores (0.55 on the first channel); ``fusion="convex"`` ranks everything by
    that combination, ``fusion="rrf"`` by weighted Reciprocal Rank Fusion (see the module docstring for the formulas
    and the measurements behind the default).

    Each query asks every channel for ``depth = max(fetch_k, k)`` candidates matching the filter through the
    retriever-call contract (:func:`~langchain_ragspine.retrievers.contract.invoke_retriever`: this package's
    retrievers get ``k`` and ``filter``, a ``VectorStoreRetriever`` gets ``k`` only) and fuses them with
    :func:`fuse`, so ``invoke(query, k=70)`` returns 70 documents when 70 match.
    ``ainvoke`` runs the channels concurrently (``asyncio.gather``); ``invoke`` runs them one after another.

    Attributes:
        retrievers: the channels (at least one), any ``BaseRetriever``.
        weights: one per channel, each >= 0, not all 0 (default: all 1.0; a 0 turns a channel off — it is not
            even called).  ``"rrf"`` uses them as given (``w / (c + rank)``); ``"convex"`` / ``"two_stage"`` rescale
            them to sum 1.
        c: the RRF constant (default 60, Cormack et al.'s "k"; named ``c`` like ``EnsembleRetriever``'s because
            ``k`` is the result count).  The score-based fusions use it only for a channel that reports no scores
            (``1 / (c + rank)`` stands in for its score).
        fetch_k: candidates taken from each channel (default 50), raised to ``k`` when a call asks for more;
            a channel that returns more is truncated.  For ``"convex"`` / ``"two_stage"`` this depth also sets the
            list over which each channel's min and max are taken (a channel's own first document stays first).
            ``invoke(query, fetch_k=...)`` overrides it per call.  ``candidate_k`` is its old name (deprecated: a
            ``DeprecationWarning``; removed in the next release; with ``fetch_k`` and another value a
            ``TypeError``).
        k: number of fused results (default 6, :data:`~langchain_ragspine.arguments.DEFAULT_K`), an ``int >= 1``; ``invoke(query, k=...)`` overrides it per call.
        filter: the retriever's own metadata filter (:mod:`langchain_ragspine.filters`); ``invoke(query,
            filter=...)`` is ANDed with it, so a call narrows the results but never widens them.  Channels that
            accept ``filter`` get the combined filter and apply it before scoring (ANDed again with their own
            ``filter``); a channel that cannot take it (a foreign ``VectorStoreRetriever``, say) has its results
            filtered by the contract, which over-fetches to make up for what the filter removes, and every
            channel's list is post-filtered here again, so a filter never widens the results.
        fusion: ``"two_stage"`` (default), ``"convex"`` (min-max normalised scores, Bruch et al. 2023) or ``"rrf"``.
        alpha: ``"convex"`` / ``"two_stage"``, when ``weights`` is not given: the weight of the first channel's
            normalised score (for ``"two_stage"``: at ranks 2+); the other channels share ``1 - alpha``.  Default
            ``None``: 0.7 for ``"convex"``, 0.55 for ``"two_stage"`` (:data:`TWO_STAGE_ALPHA`).  Setting both
            ``weights`` and ``alpha`` is an error.
        top_alpha: ``"two_stage"`` only: the first channel's weight when rank 1 is chosen (default ``None`` =
            :data:`TWO_STAGE_TOP_ALPHA` = 1.0: the first channel's own best document; 0.7 lets a strong dense match
            take rank 1, which gained on Chinese and not on Japanese data).
        id_key: ``EnsembleRetriever``'s argument: a metadata field whose value identifies a result, so documents
            with the same ``metadata[id_key]`` — in one channel or across channels — are one result (the
            best-ranked occurrence, with the scores of every channel), e.g. ``id_key="doc_id"`` for one chunk per
            source document.  A document without the field (or ``None`` there) keeps its chunk identity, never
            merged by a missing value.  Default ``None``: the chunk identity (``chunk_id``, else ``Document.id``,
            else the text; see the module docstring) — where ``EnsembleRetriever`` keys by ``page_content``.
            ``fetch_k`` still counts the chunks each channel is asked for (several may share a value); a value
            with a RESTRICTED document in any channel is dropped altogether (fail closed).
        score_threshold: the lowest fused score (``metadata["scores"]["fused"]``) a result may have (default
            ``None``: none); ``invoke(query, score_threshold=...)`` sets it for one call.  The scale is the
            fusion's: ``"convex"`` / ``"two_stage"`` in [0, 1] — a weighted sum of each channel's min-max
            normalised score over this query's candidates, so it is relative to the query's best and weakest
            candidates, not an absolute relevance (the first result is at 1.0 whenever one document leads every
            channel); ``"rrf"`` in [0, Σ weights / (c + 1)] (Σ wᵢ / (c + rankᵢ), ranks only).  A threshold above
            the scale's top is a ``ValueError``.

    Call options: ``invoke(query, k=…, filter=…, fetch_k=…, score_threshold=…, embed_as=…)``.  ``embed_as`` (``"query"`` or
    ``"document"``, see :class:`~langchain_ragspine.retrievers.dense.DenseRetriever`) goes to the channels whose
    class declares it (the dense ones), not to the others (BM25, a foreign retriever): HyDE passes
    ``embed_as="document"`` for its hypothetical document.  Not given: no channel is passed it.

    Results: at most ``k`` documents, best first, ties broken by ``chunk_id`` (else ``Document.id``) — with
    ``fusion="rrf"`` first by the better rank in the earlier channel (:func:`fuse`'s ``ties="lists"``), each a copy
    with ``metadata["scores"] = {"bm25", "vector", "fused", "rerank"}`` (see :func:`fuse`).  RESTRICTED documents
    are dropped even when a foreign channel returns them.

    Raises:
        ValueError: no retrievers, bad ``weights``, ``c < 0``, ``fetch_k < 1``, ``k < 1``, an unknown
            ``fusion``, ``alpha`` or ``top_alpha`` outside [0, 1], ``alpha`` given together with ``weights``,
            ``top_alpha`` with another fusion than ``"two_stage"``, a malformed ``filter``, an ``embed_as`` other
            than ``"query"`` / ``"document"``, an empty ``id_key``, a ``score_threshold`` outside its fusion's
            scale.
        TypeError: a channel that is not a ``BaseRetriever``; ``k`` not an int; ``id_key`` not a string;
            ``score_threshold`` not a number; an unknown keyword argument to ``invoke``.

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
    fetch_k: int = 50
    k: PositiveIntField = DEFAULT_K
    filter: FilterField = None
    fusion: Fusion = "two_stage"
    alpha: float | None = None
    top_alpha: float | None = None
    id_key: str | None = None
    score_threshold: float | None = None

    #: ``invoke(query, fetch_k=…)`` sets the per-channel depth of one call, ``score_threshold=…`` its threshold;
    #: ``embed_as=…`` goes to the channels that declare it (see the class docstring).
    call_options: ClassVar[tuple[str, ...]] = ("fetch_k", "score_threshold", EMBED_AS_OPTION)
    #: ``candidate_k``: the old name of ``fetch_k`` (constructor and call), for one release.
    renamed_arguments: ClassVar[tuple[str, ...]] = ("candidate_k",)

    @field_validator("id_key", mode="before")
    @classmethod
    def _strict_id_key(cls, value: Any) -> str | None:
        return _check_id_key(value)

    @field_validator("score_threshold", mode="before")
    @classmethod
    def _strict_threshold(cls, value: Any) -> float | None:
        return check_score_threshold(value)  # its scale, which depends on the fusion, in _check_fields

    def model_post_init(self, context: Any, /) -> None:
        """Validate the parameters (see the class docstring)."""
        self._check_fields()

    def served_ids(self, ids: Sequence[str]) -> ServedIds | None:
        """Which of ``ids`` a channel would still return (:func:`~langchain_ragspine.served.combine_served` over
        :attr:`retrievers`: served by one and withdrawn by none; ``None`` when no channel can tell)."""
        return combine_served(self.retrievers, ids)

    def _check_fields(self, *, own_filter: bool = True) -> None:
        """The checks of the class docstring's ``Raises``, run at construction, after every assignment (a refused one
        is undone: ``h.retrievers = []`` raises and leaves ``h`` as it was) and at every call (``model_copy`` does
        not validate; a call compiles the own filter with its own, so ``own_filter=False`` skips it here)."""
        if not isinstance(self.retrievers, list) or not self.retrievers:
            raise ValueError(f"retrievers must be a non-empty list of BaseRetriever, got {self.retrievers!r}")
        for i, r in enumerate(self.retrievers):
            if not isinstance(r, BaseRetriever):
                raise TypeError(f"retrievers[{i}] is a {type(r).__name__}, expected a BaseRetriever")
        _check_weights(self.weights, len(self.retrievers))
        check_int(self.c, "c", minimum=0)
        check_int(self.fetch_k, "fetch_k")
        _check_fusion(self.fusion)
        if self.alpha is not None:
            _check_alpha(self.alpha)
        if self.top_alpha is not None:
            _check_alpha(self.top_alpha, "top_alpha")
            if self.fusion != "two_stage":
                raise ValueError(f"top_alpha is a two_stage parameter, got it with fusion={self.fusion!r}")
        if self.weights is not None and self.alpha is not None:
            raise ValueError("give either weights or alpha, not both (alpha only sets the default convex weights)")
        _check_id_key(self.id_key)
        self._check_threshold(self.score_threshold)
        if own_filter:
            compile_filter(self.filter)

    def _check_threshold(self, value: Any) -> float | None:
        """``value`` as a threshold on this retriever's fused scores (see ``score_threshold``)."""
        if self.fusion == "rrf":
            top = math.fsum(_check_weights(self.weights, len(self.retrievers))) / (self.c + 1)
            return check_score_threshold(value, maximum=top, scale=f"the RRF fused score, in [0, {top:.6g}]")
        return check_score_threshold(value, maximum=1.0, scale=f"the {self.fusion} fused score, in [0, 1]")

    @property
    def effective_alpha(self) -> float:
        """:attr:`alpha`, else the fusion's default: 0.7 for ``"convex"``, 0.5 for ``"two_stage"`` (unused by RRF)."""
        if self.alpha is not None:
            return self.alpha
        return DEFAULT_ALPHA if self.fusion == "convex" else TWO_STAGE_ALPHA

    @property
    def effective_top_alpha(self) -> float | None:
        """``"two_stage"`` only: :attr:`top_alpha`, else :data:`TWO_STAGE_TOP_ALPHA`; ``None`` for other fusions."""
        if self.fusion != "two_stage":
            return None
        return TWO_STAGE_TOP_ALPHA if self.top_alpha is None else self.top_alpha

    # -- plumbing ---------------------------------------------------------------------------------------------------
    def _params(self, call: RetrieverCall[Any]) -> _CallParams:
        """A call's parameters: ``k``, the call's filter ANDed with :attr:`filter` (and its predicate), the
        per-channel depth ``max(fetch_k, k)`` (the call's ``fetch_k``, else :attr:`fetch_k`) and the
        score threshold (the call's, else :attr:`score_threshold`)."""
        self._check_fields(own_filter=False)  # model_copy(update=...) skips validation
        k = cast(int, call.k)  # resolved by the base, as the filter (the own AND the call's)
        fetch_k = call.options.get("fetch_k")
        fetch_k = self.fetch_k if fetch_k is None else check_int(fetch_k, "fetch_k")
        threshold = call.options.get("score_threshold")
        threshold = self.score_threshold if threshold is None else self._check_threshold(threshold)
        flt = call.filter  # compiled once at the door, for every channel and the merge
        return _CallParams(k, flt, max(fetch_k, k), None if flt is None else flt.predicate, threshold)

    @staticmethod
    def _channel_options(call: RetrieverCall[Any]) -> dict[str, Any]:
        """The call options handed on to the channels: ``embed_as`` when the call gave it (checked), else none."""
        return embed_as_options(call.options)

    def _weights(self) -> list[float]:
        """The effective channel weights (a channel with weight 0 is not called)."""
        if self.weights is None and self.fusion != "rrf":
            return convex_weights(len(self.retrievers), self.effective_alpha)
        return _check_weights(self.weights, len(self.retrievers))

    def _channels(self) -> list[tuple[int, BaseRetriever]]:
        """``(index, channel)`` for every channel with a non-zero weight (the others are not called)."""
        return [(i, r) for i, (r, w) in enumerate(zip(self.retrievers, self._weights(), strict=True)) if w != 0]

    def _fuse(
        self,
        channels: Sequence[tuple[int, BaseRetriever]],
        results: Sequence[Sequence[Document]],
        gated: Sequence[Sequence[Document]],
        params: _CallParams,
    ) -> list[Document]:
        """Fuse ``results`` (one list per called channel, in ``channels``' order; a channel not called — weight 0 —
        contributes an empty list).  ``gated`` holds, per called channel, the RESTRICTED documents the contract's
        gate removed from its list before the cut to ``fetch_k``: they follow the channel's list, take no
        candidate's place, and :func:`fuse` (which ranks without them) drops their keys from every channel (fail
        closed).  Results below the call's score threshold are dropped (they come best first, so after the cut to
        ``k`` is the same as before it)."""
        lists: list[list[Document]] = [[] for _ in self.retrievers]
        for (i, _), docs, removed in zip(channels, results, gated, strict=True):
            if params.predicate is not None:
                docs = [d for d in docs if params.predicate(d.metadata)]
                removed = [d for d in removed if params.predicate(d.metadata)]
            lists[i] = [d for _, d in _dedupe(docs, i, self.id_key)[: params.depth]] + list(removed)
        fused = fuse(
            lists, weights=self.weights, c=self.c, k=params.k, fusion=self.fusion, alpha=self.effective_alpha,
            top_alpha=self.effective_top_alpha, id_key=self.id_key,
            # RRF scores are ranks only, so exact ties are common (each channel's #1 scores 1/61): the earlier
            # (stronger: the lexical channel first) list's better rank wins, as LlamaIndex's and Haystack's RRF keep
            # the earlier list's document; the score-based fusions tie rarely and break ties on the key
            ties="lists" if self.fusion == "rrf" else "key",
        )
        return scored_at_least(fused, params.score_threshold, "fused")

    # -- retrieval --------------------------------------------------------------------------------------------------
    def _retrieve(self, query: str, call: SyncCall) -> list[Document]:
        params = self._params(call)
        channels = self._channels()
        gated: list[list[Document]] = []
        searches = _searches(channels, query, self._channel_options(call))
        lists = search_each(searches, k=params.depth, filter=params.filter, run_manager=call.run_manager, gated=gated)
        return self._fuse(channels, lists, gated, params)

    async def _aretrieve(self, query: str, call: AsyncCall) -> list[Document]:
        params = self._params(call)
        channels = self._channels()
        gated: list[list[Document]] = []
        searches = _searches(channels, query, self._channel_options(call))
        lists = await asearch_each(
            searches, k=params.depth, filter=params.filter, run_manager=call.run_manager, gated=gated
        )
        return self._fuse(channels, lists, gated, params)

    # -- construction and persistence -------------------------------------------------------------------------------
    @classmethod
    @renamed_keywords("candidate_k")
    def from_documents(
        cls,
        documents: Iterable[Document],
        embedding: Embeddings,
        *,
        k: int = DEFAULT_K,
        tokenizer: str | Tokenizer = "auto",
        bm25_kwargs: Mapping[str, Any] | None = None,
        dense_kwargs: Mapping[str, Any] | None = None,
        **kwargs: Unpack[HybridOptions],
    ) -> HybridRetriever:
        """BM25 (first channel) + dense over ``documents``, fused — the two-channel retriever of the package's
        ``hybrid`` mode, like :meth:`BM25Retriever.from_documents` / :meth:`DenseRetriever.from_documents`.

        Args:
            documents: the chunks (RESTRICTED ones are dropped by each channel).
            embedding: the dense channel's model.
            k: fused results (default 6, :data:`~langchain_ragspine.arguments.DEFAULT_K`).
            tokenizer: the BM25 tokenizer (default ``"auto"``).
            bm25_kwargs / dense_kwargs: other fields of each channel (``k1``, ``b`` / ``cache_path``,
                ``index_kind``, …); the channels' own ``k`` is irrelevant (the hybrid asks each for its depth).
            kwargs: the hybrid's own fields (``fusion``, ``alpha``, ``weights``, ``fetch_k``, ``filter``, …).

        Raises:
            TypeError: an unknown keyword argument, with a did-you-mean over the hybrid's fields and ``tokenizer``,
                ``bm25_kwargs``, ``dense_kwargs`` (``tokenzier=`` → ``'tokenizer'``); else as the constructors of
                the three classes.
            ValueError: as the constructors of the three classes.
        """
        known = (set(cls.model_fields) - {"retrievers"}) | {"tokenizer", "bm25_kwargs", "dense_kwargs"}
        check_arguments(f"{cls.__name__}.from_documents", kwargs, known)
        docs = list(documents)
        bm25 = BM25Retriever.from_documents(docs, tokenizer=tokenizer, **dict(bm25_kwargs or {}))
        dense = DenseRetriever.from_documents(docs, embedding, **dict(dense_kwargs or {}))
        return cls(retrievers=[bm25, dense], k=k, **kwargs)

    @classmethod
    def from_texts(
        cls,
        texts: Iterable[str],
        embedding: Embeddings,
        metadatas: Iterable[dict[str, Any]] | None = None,
        ids: Iterable[str] | None = None,
        **kwargs: Unpack[HybridTextOptions],
    ) -> HybridRetriever:
        """Index plain ``texts`` with optional parallel ``metadatas`` and ``ids`` (the shape of
        :meth:`DenseRetriever.from_texts`); ``kwargs`` as in :meth:`from_documents`.

        Raises:
            ValueError: ``metadatas`` or ``ids`` has a different length than ``texts``; see :meth:`from_documents`.
            TypeError: see :meth:`from_documents`.
        """
        return cls.from_documents(documents_from_texts(texts, metadatas, ids), embedding, **kwargs)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the retriever to directory ``path`` (replaced atomically): ``hybrid.json`` (the fusion settings
        and the channel list) and one sub-directory per channel, written by that channel's own ``save`` (no
        pickle).  Every channel must be a :class:`BM25Retriever` or a :class:`DenseRetriever`.

        Raises:
            TypeError: a channel of another class (it has no file format here: save it yourself).
            ValueError: a metadata value is not JSON-serialisable.
            FileExistsError: ``path`` is a file, or a non-empty directory that is not a previous save, or a previous
                save holding files a save does not write (nothing is deleted; the message names them).
            StoreWriteError: a write failed (disk full, …), naming the file; the previous save is intact.
        """
        channels: list[dict[str, str]] = []
        for i, r in enumerate(self.retrievers):
            if not isinstance(r, (BM25Retriever, DenseRetriever)):
                raise TypeError(
                    f"retrievers[{i}] is a {type(r).__name__}; save() writes BM25Retriever and DenseRetriever "
                    "channels only"
                )
            channels.append({"kind": "bm25" if isinstance(r, BM25Retriever) else "dense", "dir": f"channel-{i}"})
        config = {"format": _FORMAT, "channels": channels,
                  **{_SAVED_KEYS.get(f, f): getattr(self, f) for f in _SAVED_FIELDS}}
        with atomic_dir(path, marker=_CONFIG_FILE, writes=_SAVE_LAYOUT) as tmp:
            for r, ch in zip(self.retrievers, channels, strict=True):
                r.save(tmp / ch["dir"])  # type: ignore[attr-defined]
            (tmp / _CONFIG_FILE).write_text(json.dumps(config, ensure_ascii=False, indent=1), "utf-8")

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        *,
        embedding: Embeddings | None = None,
        tokenizer: str | Tokenizer | None = None,
        **overrides: Any,
    ) -> HybridRetriever:
        """Load a retriever written by :meth:`save`; nothing is embedded.  ``embedding`` is the dense channel's
        model (as for :meth:`DenseRetriever.load`), ``tokenizer`` the BM25 channel's when it was a custom callable;
        ``overrides`` replace saved hybrid fields such as ``k``, ``filter`` or ``fusion``.

        Raises:
            StoreError: the directory is missing, incomplete, or not a ragspine hybrid retriever (the file named).
            ValueError: a dense channel and no ``embedding``; ``embedding`` not the saved model (see
                :meth:`DenseRetriever.load`).
        """
        root = Path(path)
        config = read_config(root, _CONFIG_FILE, fmt=_FORMAT, what="hybrid retriever")
        retrievers: list[BaseRetriever] = []
        for ch in config.get("channels", []):
            sub = root / str(ch.get("dir"))
            if ch.get("kind") == "dense":
                if embedding is None:
                    raise ValueError(f"{root} has a dense channel: pass embedding= (the model it was built with)")
                retrievers.append(DenseRetriever.load(sub, embedding=embedding))
            else:
                retrievers.append(BM25Retriever.load(sub, tokenizer=tokenizer))
        fields = {f: config[_SAVED_KEYS.get(f, f)] for f in _SAVED_FIELDS if _SAVED_KEYS.get(f, f) in config}
        fields.update(overrides)
        return cls(retrievers=retrievers, **fields)
