"""Document helpers shared by every stage: chunk identity, per-channel scores, de-duplication, top-k, result counts.

One home for the few rules every retriever, compressor, graph node and evaluator must apply the same way
(``docs/architecture.md``, invariants 2 and 5):

* **identity** — a chunk is ``metadata["chunk_id"]``, else ``Document.id``; never its ``page_content`` (two chunks
  with the same text are two chunks; one chunk shown with another rendering is still one chunk);
* **scores** — ``metadata["scores"]`` holds one value per channel, ``{"bm25", "vector", "fused", "rerank"}``, an
  absent channel being ``None``; a stage adds its own channel and keeps the others;
* **ties** — a ranking by score breaks ties on the chunk identity, so the same input always gives the same order;
* **identities** — a retriever indexes the documents it is given, each with an identity: a document without any gets
  a copy with a deterministic one made from its text (:func:`with_identities`, :func:`content_chunk_id`).

The module depends on ``langchain_core`` and :mod:`langchain_ragspine.arguments` (which imports nothing from the
package), so any module of the package (stores, retrievers, compressors, graphs, evaluation) may import it.
:func:`check_k` is re-exported from :mod:`~langchain_ragspine.arguments`, the home of the integer checks.
"""

from __future__ import annotations

import copy
import hashlib
import math
import numbers
import re
import warnings
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
from langchain_core.documents import Document

from langchain_ragspine.arguments import check_k

__all__ = [
    "BM25_SCALE",
    "MAX_QUERY_CHARS",
    "SCORE_CHANNELS",
    "bm25_threshold",
    "check_bm25_parameter",
    "check_bm25_query",
    "ChunkScores",
    "check_k",
    "check_score_threshold",
    "chunk_key",
    "chunk_positions",
    "content_chunk_id",
    "check_documents",
    "copy_metadata",
    "dedupe",
    "dedupe_by",
    "doc_key",
    "has_visible_text",
    "score_of",
    "scored_at_least",
    "top_k",
    "top_rows",
    "with_identities",
    "with_scores",
]

#: The channels of ``metadata["scores"]``, in the order they are written.
SCORE_CHANNELS: tuple[str, ...] = ("bm25", "vector", "fused", "rerank")


class ChunkScores(dict[str, "float | None"]):
    """The per-channel scores of one retrieved chunk, ``metadata["scores"]``: a ``dict`` from channel name
    (:data:`SCORE_CHANNELS`) to a float or ``None``.

    Scores belong to the query that found the chunk, not to the chunk, so they take no part in comparing two results:
    a ``ChunkScores`` compares equal to any other ``ChunkScores``, and two results of the same chunk (same
    ``page_content``, ``id`` and lineage) compare equal whatever their scores.  LangChain de-duplicates retrieved
    documents with ``==`` (``MultiQueryRetriever.unique_union`` keeps a document unless an equal one came before), so
    without this the same chunk found by two query variants would be returned twice.  Compared with a plain ``dict``,
    a ``ChunkScores`` is an ordinary dict (``scores == {"bm25": 1.0, ...}`` checks the values); to compare the scores
    of two results, compare ``dict(a) == dict(b)`` or :func:`score_of`.

    It serializes as a plain dict everywhere (JSON, ``Document.model_dump``, ``langchain_core.load.dumpd``, LangGraph
    checkpoints), so a restored result has a plain dict of scores and compares by value.

    Example:
        >>> from langchain_core.documents import Document
        >>> a = Document(page_content="x", id="a#0", metadata={"scores": ChunkScores(bm25=2.5)})
        >>> b = Document(page_content="x", id="a#0", metadata={"scores": ChunkScores(bm25=0.7)})
        >>> a == b, a.metadata["scores"] == {"bm25": 2.5}, dict(a.metadata["scores"]) == dict(b.metadata["scores"])
        (True, True, False)
    """

    __slots__ = ()
    __hash__ = None  # type: ignore[assignment]  # a dict: mutable, unhashable

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ChunkScores):
            return True
        return dict.__eq__(self, other)  # type: ignore[no-any-return]  # NotImplemented for a non-dict

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal


def chunk_key(doc: Document) -> str | None:
    """The chunk's own id: ``metadata["chunk_id"]`` (as a string), else ``Document.id``, else ``None`` (an empty
    ``chunk_id`` or ``id`` counts as absent).  Unlike :func:`doc_key` it ignores ``metadata["index_id"]``.

    Example:
        >>> from langchain_core.documents import Document
        >>> chunk_key(Document(page_content="x", metadata={"chunk_id": "a#0", "index_id": "hr"}))
        'a#0'
    """
    cid = doc.metadata.get("chunk_id")
    if cid is not None and cid != "":
        return str(cid)
    return doc.id or None


def chunk_positions(docs: Iterable[Document]) -> dict[str, int]:
    """``{chunk_key: position}`` of ``docs``: where each chunk id first occurs (documents without one are left out)
    — how a retriever over derived files (a relation graph, a RAPTOR tree) finds the indexed chunk a node names.

    Example:
        >>> from langchain_core.documents import Document
        >>> chunk_positions([Document(page_content="x", metadata={"chunk_id": "a#0"}), Document(page_content="y")])
        {'a#0': 0}
    """
    out: dict[str, int] = {}
    for i, d in enumerate(docs):
        key = chunk_key(d)
        if key is not None:
            out.setdefault(key, i)
    return out


#: Separates ``index_id`` from the chunk's id in :func:`doc_key` (a control character: no id contains it).
INDEX_KEY_SEP = "\x1f"


def doc_key(doc: Document) -> str | None:
    """The identity of a result: :func:`chunk_key` (``metadata["chunk_id"]`` as a string, else ``Document.id``,
    else ``None``), namespaced by ``metadata["index_id"]`` when the document carries one (a non-empty string):
    ``f"{index_id}\\x1f{chunk_key}"``.

    Two indexes ingested separately may both hold a ``README#0``; a
    :class:`~langchain_ragspine.retrievers.multi_index.MultiIndexRetriever` tags each result with its
    ``index_id``, so every dedupe and fusion that keys by :func:`doc_key` (the retriever-call contract, RRF fusion,
    the query transformations, the graphs' ``documents`` reducer) keeps both.  An untagged document keys by its
    chunk id alone, as before.  An empty ``chunk_id`` or ``id`` counts as absent.  A document whose key is ``None``
    cannot be matched with any other document.

    Example:
        >>> from langchain_core.documents import Document
        >>> doc_key(Document(page_content="x", metadata={"chunk_id": "a#0"}, id="other"))
        'a#0'
        >>> doc_key(Document(page_content="x", id="b")), doc_key(Document(page_content="x")) is None
        ('b', True)
        >>> doc_key(Document(page_content="x", metadata={"chunk_id": "a#0", "index_id": "hr"})).split("\\x1f")
        ['hr', 'a#0']
    """
    key = chunk_key(doc)
    if key is None:
        return None
    index_id = doc.metadata.get("index_id")
    if isinstance(index_id, str) and index_id:
        return f"{index_id}{INDEX_KEY_SEP}{key}"
    return key


def content_chunk_id(text: str, repeat: int = 0) -> str:
    """The identity given to a document that has neither ``metadata["chunk_id"]`` nor ``Document.id`` (a plain
    LangChain document, e.g. ``RecursiveCharacterTextSplitter`` output): ``"chunk-{h}"``, ``h`` the first 16 hex
    digits of SHA-256 of ``text`` (UTF-8), for the first such document with that text in a list, and
    ``"chunk-{h}-{repeat}"`` for its ``repeat``-th repeat (1, 2, ...), so two chunks with the same text stay two
    chunks.

    The id depends on the text, not on the position, so two retrievers built from the same documents agree whatever
    the order or subset they were given (the channels of a hybrid retriever built separately match up).  Only
    repeated texts depend on the order: the n-th keyless copy of a text is ``-{n}`` in each list.

    Example:
        >>> content_chunk_id("apple"), content_chunk_id("apple", 1)
        ('chunk-3a7bd3e2360a3d29', 'chunk-3a7bd3e2360a3d29-1')
    """
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"chunk-{digest}" if repeat == 0 else f"chunk-{digest}-{repeat}"


_SCALARS = (str, int, float, bool, type(None))


def copy_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a metadata mapping that shares nothing mutable with it: a new dict, and nested lists / dicts
    copied too (``copy.deepcopy``) when there are any."""
    if all(isinstance(v, _SCALARS) for v in metadata.values()):
        return dict(metadata)
    return copy.deepcopy(dict(metadata))


def with_identities(documents: Iterable[Document]) -> list[Document]:
    """``documents`` as a list in which each has an identity (see :func:`doc_key`): a document with
    ``metadata["chunk_id"]`` or ``Document.id`` is kept as it is (the same object, not copied: at a million chunks a
    copy costs about 0.8 GB and seconds of build time); one with neither is replaced by a copy with
    ``chunk_id`` = ``id`` = :func:`content_chunk_id` ``(page_content, n)``, ``n`` the number of keyless documents
    with the same text before it in ``documents``, so two retrievers built from the same documents agree, in any
    order or subset.  ``documents`` are not modified.

    Warns:
        UserWarning: once per call, when documents with different texts share an identity (two chunks given the
            same ``chunk_id``, say): they are indexed as given, but a search or a fusion keyed by identity may return
            one of them under the other's id, or drop one.  The message names the first such id.

    Example:
        >>> from langchain_core.documents import Document
        >>> src = [Document(page_content="apple"), Document(page_content="pear", metadata={"chunk_id": "p#0"}),
        ...        Document(page_content="apple")]
        >>> out = with_identities(src)
        >>> [(d.id, d.metadata.get("chunk_id")) for d in out], out[1] is src[1]
        ([('chunk-3a7bd3e2360a3d29', 'chunk-3a7bd3e2360a3d29'), (None, 'p#0'), \
('chunk-3a7bd3e2360a3d29-1', 'chunk-3a7bd3e2360a3d29-1')], True)
        >>> src[0].id is None and src[0].metadata == {}
        True
    """
    out: list[Document] = []
    repeats: dict[str, int] = {}
    texts: dict[str, str] = {}
    clash: str | None = None
    n_clash = 0
    for doc in documents:
        key = doc_key(doc)
        if key is None:
            n = repeats.get(doc.page_content, 0)
            repeats[doc.page_content] = n + 1
            md = copy_metadata(doc.metadata)
            md["chunk_id"] = key = content_chunk_id(doc.page_content, n)
            doc = doc.model_copy(update={"metadata": md, "id": key})
        seen = texts.setdefault(key, doc.page_content)
        if seen is not doc.page_content and seen != doc.page_content:
            n_clash += 1
            clash = key if clash is None else clash
        out.append(doc)
    if clash is not None:
        warnings.warn(
            f"{n_clash} document(s) share an identity with a document of different text, first {clash!r}: a chunk's "
            "id (metadata chunk_id, else Document.id) must be unique; results keyed by it may show one chunk under "
            "another's id or drop one (give each chunk its own chunk_id)",
            UserWarning,
            stacklevel=3,
        )
    return out


def with_scores(doc: Document, **scores: float | None) -> Document:
    """A copy of ``doc`` whose ``metadata["scores"]`` holds the four channels of :data:`SCORE_CHANNELS`, updated
    with ``scores``.

    Channels ``doc`` already carries are kept unless ``scores`` names them; absent ones are ``None``.  ``doc`` is not
    modified (its metadata dict is copied; the values are shared).  The copy's ``id`` is the chunk's identity,
    :func:`doc_key` (``chunk_id``, else ``Document.id``), and a copy of a document that has only ``Document.id`` gets
    ``metadata["chunk_id"]`` = that id, so every scored result a retriever or compressor returns has
    ``id == metadata["chunk_id"]``.

    Example:
        >>> from langchain_core.documents import Document
        >>> d = with_scores(Document(page_content="x"), bm25=2.5, fused=2.5)
        >>> with_scores(d, rerank=0.9).metadata["scores"]
        {'bm25': 2.5, 'vector': None, 'fused': 2.5, 'rerank': 0.9}
        >>> with_scores(Document(page_content="x", metadata={"chunk_id": "a#0"})).id
        'a#0'
        >>> with_scores(Document(page_content="x", id="my-0")).metadata["chunk_id"]
        'my-0'
    """
    md = dict(doc.metadata)
    merged: dict[str, float | None] = dict.fromkeys(SCORE_CHANNELS)
    prev = md.get("scores")
    if isinstance(prev, Mapping):
        merged.update(prev)
    merged.update(scores)
    md["scores"] = ChunkScores(merged)
    key = chunk_key(doc)  # the chunk's own id, not namespaced by index_id
    if key is not None and md.get("chunk_id") in (None, ""):
        md["chunk_id"] = key  # a document keyed by Document.id alone: its results carry chunk_id = id too
    return Document(page_content=doc.page_content, metadata=md, id=key)


def score_of(doc: Document, name: str) -> float | None:
    """The ``name`` channel of ``doc.metadata["scores"]`` as a float, or ``None`` when the document has no scores,
    lacks that channel, or holds something that is not a finite number there (a ``bool``, a string, NaN, ±inf).

    Example:
        >>> from langchain_core.documents import Document
        >>> d = Document(page_content="x", metadata={"scores": {"bm25": 3, "vector": None, "fused": float("nan")}})
        >>> score_of(d, "bm25"), score_of(d, "vector"), score_of(d, "fused"), score_of(d, "rerank")
        (3.0, None, None, None)
    """
    scores = doc.metadata.get("scores")
    if not isinstance(scores, Mapping):
        return None
    value = scores.get(name)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def check_score_threshold(
    value: Any, name: str = "score_threshold", *, maximum: float | None = None, scale: str = ""
) -> float | None:
    """``value`` as a score threshold: ``None`` (none) or a finite number ``>= 0`` (``<= maximum`` when given),
    else an error naming ``name`` and, when given, the ``scale`` the scores are on.

    Raises:
        TypeError: not a number (``"0.5"``, ``True``).
        ValueError: NaN, infinite, negative, or above ``maximum`` (no result could reach it).

    Example:
        >>> check_score_threshold(2)
        2.0
        >>> check_score_threshold(1.5, maximum=1.0, scale="the fused score, in [0, 1]")
        Traceback (most recent call last):
        ...
        ValueError: score_threshold must be a number in [0, 1.0] (the fused score, in [0, 1]), got 1.5
    """
    if value is None:
        return None
    where = f" ({scale})" if scale else ""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number or None{where}, got {type(value).__name__} {value!r}")
    number = float(value)
    top = math.inf if maximum is None else maximum
    if not math.isfinite(number) or not 0.0 <= number <= top:
        bounds = "a finite number >= 0" if maximum is None else f"a number in [0, {maximum}]"
        raise ValueError(f"{name} must be {bounds}{where}, got {value!r}")
    return number


# -- BM25's query and score threshold, checked alike by both backends and every BM25 retriever -------------------
#: The longest query a BM25 retriever takes, in characters (both backends): scoring adds every posting of every
#: query token, repeats included, so the cost grows with the query's length; a longer one is a ``ValueError``.
#: (On PostgreSQL a 4,000-character Japanese query, 9,212 tokens, took 10 s on a 617-chunk store.)
MAX_QUERY_CHARS = 2_000


def check_bm25_query(query: str) -> str:
    """``query``, if it is at most :data:`MAX_QUERY_CHARS` characters long.

    Raises:
        ValueError: the query is longer; the message gives its length and the limit.

    Example:
        >>> check_bm25_query("梅雨はいつ")
        '梅雨はいつ'
    """
    if isinstance(query, str) and len(query) > MAX_QUERY_CHARS:
        raise ValueError(
            f"the query is {len(query):,} characters long; a BM25 query may be at most {MAX_QUERY_CHARS:,} "
            "(retrievers.bm25.MAX_QUERY_CHARS), since its cost grows with its length: search with its key sentences"
        )
    return query


#: How a BM25 ``score_threshold`` is read (both backends, the retrievers, the vector store), for error messages.
BM25_SCALE = "the raw BM25 score of metadata['scores']['bm25'], >= 0, unbounded and corpus-dependent"


def bm25_threshold(own: Any, given: Any = None) -> float | None:
    """The BM25 score threshold of one call: the call's ``given`` one, else the retriever's ``own`` (both checked
    here, since ``model_copy`` does not validate); ``None``: no threshold.  Shared by both backends' BM25 and both
    BM25 retrievers.

    Raises:
        TypeError, ValueError: not ``None`` or a finite number ``>= 0`` (the message names the BM25 scale).
    """
    return check_score_threshold(own if given is None else given, scale=BM25_SCALE)



def check_bm25_parameter(name: str, value: float) -> float:
    """``value`` as BM25's ``k1`` (finite, ``>= 0``) or ``b`` (in [0, 1]), the rule of both backends and every BM25
    retriever.

    Raises:
        ValueError: outside its range, or NaN; the message names the parameter.

    Example:
        >>> check_bm25_parameter("b", 0.75)
        0.75
    """
    if name == "k1" and not 0 <= value < math.inf:  # NaN and infinity too (an infinite k1 scores every chunk NaN)
        raise ValueError(f"k1 must be a finite number >= 0, got {value}")
    if name == "b" and not 0.0 <= value <= 1.0:
        raise ValueError(f"b must be in [0, 1], got {value}")
    return value


def scored_at_least(docs: Iterable[Document], threshold: float | None, channel: str) -> list[Document]:
    """The documents whose ``channel`` score (:func:`score_of`) is ``>= threshold``, in their order; all of them
    when ``threshold`` is ``None``.  A document without that score is dropped: it cannot be shown to reach it.

    Example:
        >>> from langchain_core.documents import Document
        >>> docs = [Document(page_content=t, metadata={"scores": {"bm25": s}}) for t, s in (("a", 3.0), ("b", 1.0))]
        >>> [d.page_content for d in scored_at_least(docs, 2.0, "bm25")]
        ['a']
    """
    if threshold is None:
        return list(docs)
    return [d for d in docs if (s := score_of(d, channel)) is not None and s >= threshold]


def dedupe(docs: Iterable[Document]) -> list[Document]:
    """``docs`` with every document whose :func:`doc_key` was seen before removed: the first occurrence wins and
    the order is kept.  Documents without a key are all kept (they cannot be matched; text is never a key).

    Example:
        >>> from langchain_core.documents import Document
        >>> a1 = Document(page_content="first", metadata={"chunk_id": "a#0"})
        >>> a2 = Document(page_content="again", metadata={"chunk_id": "a#0"})
        >>> b = Document(page_content="b", id="b")
        >>> [d.page_content for d in dedupe([a1, b, a2, Document(page_content="b")])]
        ['first', 'b', 'b']
    """
    return dedupe_by(docs, doc_key)


_Key = TypeVar("_Key", bound=Hashable)


def dedupe_by(
    docs: Iterable[Document], key: Callable[[Document], _Key | None], *, seen: set[_Key] | None = None
) -> list[Document]:
    """:func:`dedupe` by another identity: ``docs`` without every document whose ``key(doc)`` was seen before (or
    is already in ``seen``); the first occurrence wins, the order is kept, and documents whose key is ``None`` are
    all kept.  ``seen`` (default: a new set) is updated in place, so a caller can merge into a list it has.

    Example:
        >>> from langchain_core.documents import Document
        >>> docs = [Document(page_content=t, metadata={"doc_id": d}) for t, d in [("a", "x"), ("b", "y"), ("c", "x")]]
        >>> seen = {"y"}
        >>> [d.page_content for d in dedupe_by(docs, lambda d: d.metadata["doc_id"], seen=seen)], sorted(seen)
        (['a'], ['x', 'y'])
    """
    seen = set() if seen is None else seen
    out: list[Document] = []
    for doc in docs:
        k = key(doc)
        if k is not None:
            if k in seen:
                continue
            seen.add(k)
        out.append(doc)
    return out


def top_k(
    docs: Sequence[Document], k: int | None, *, score: str | Callable[[Document], float | None] = "fused"
) -> list[Document]:
    """The ``k`` best of ``docs`` by ``score``, highest first, ties broken by :func:`doc_key` (ascending).

    Args:
        docs: the candidates (not modified; returned documents are the same objects).
        k: how many to return, an ``int >= 1``; ``None`` sorts all of them.
        score: a channel of ``metadata["scores"]`` read with :func:`score_of` (default ``"fused"``), or a function
            ``Document -> float | None``.

    Returns:
        At most ``k`` documents sorted by ``(-score, key)``.  Documents without a finite score come after every
        scored one; documents without a key come after the keyed ones of equal score, in their input order — so
        the result is the same for the same input, whatever order the candidates arrived in, when every document
        has a key.  Duplicates are not removed (see :func:`dedupe`).

    Raises:
        TypeError, ValueError: ``k`` is not ``None`` or an ``int >= 1`` (see :func:`check_k`).

    Example:
        >>> from langchain_core.documents import Document
        >>> docs = [with_scores(Document(page_content=t, metadata={"chunk_id": t}), rerank=s)
        ...         for t, s in [("c", 0.5), ("b", 0.9), ("a", 0.5), ("d", None)]]
        >>> [d.page_content for d in top_k(docs, 3, score="rerank")]
        ['b', 'a', 'c']
    """
    if k is not None:
        k = check_k(k)
    read: Callable[[Document], float | None]
    if isinstance(score, str):
        name = score
        read = lambda d: score_of(d, name)  # noqa: E731 - a one-line reader
    elif callable(score):
        read = score
    else:
        raise TypeError(f"score must be a channel name or a function Document -> float | None, got {score!r}")

    def order(item: tuple[int, Document]) -> tuple[bool, float, bool, str, int]:
        pos, doc = item
        value = read(doc)
        key = doc_key(doc)
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            return (True, 0.0, key is None, key or "", pos)  # unscored: after every scored document
        return (False, -float(value), key is None, key or "", pos)

    ranked = [doc for _, doc in sorted(enumerate(docs), key=order)]
    return ranked if k is None else ranked[:k]


# a character that is neither white space nor an invisible format character (zero-width space, BOM, …)
_VISIBLE_RE = re.compile(r"[^\s\u200b-\u200f\u2028-\u202f\u2060-\u206f\ufeff]")


def has_visible_text(doc: Document) -> bool:
    """Whether ``doc.page_content`` has a character that is neither white space nor an invisible format character
    (zero-width space, BOM, …): the chunks a dense index embeds (the others are never embedded, indexed or
    returned by a dense channel).

    Example:
        >>> has_visible_text(Document(page_content=chr(0x200B) + " ")), has_visible_text(Document(page_content="梅雨"))
        (False, True)
    """
    return bool(_VISIBLE_RE.search(doc.page_content))


def top_rows(scores: np.ndarray, ok: np.ndarray, k: int, tie_rank: np.ndarray) -> list[tuple[int, float]]:
    """The ``k`` best ``(row, score)`` among the rows where ``ok`` is true, best first, ties by ``tie_rank`` (lower
    first; e.g. each row's rank by ``chunk_id``): every tie at the ``k``-th score is considered, so which rows win
    a tie never depends on the order of the rows.  ``O(n + m log m)`` for ``n`` rows and ``m`` candidates at or
    above the ``k``-th score (:func:`numpy.partition`, then a sort of those).

    Args:
        scores: shape ``(n,)``, any real dtype.
        ok: bool, shape ``(n,)``: the rows that may be returned.
        k: how many at most (``>= 1``).
        tie_rank: shape ``(n,)``: the order among equal scores.

    Example:
        >>> top_rows(np.array([0.5, 2.0, 0.5, 1.0]), np.array([True, True, True, False]), 2, np.array([3, 0, 1, 2]))
        [(1, 2.0), (2, 0.5)]
    """
    cand = np.flatnonzero(ok)
    if cand.size == 0:
        return []
    cs = scores[cand]
    if cand.size > k:
        kth = np.partition(cs, cand.size - k)[cand.size - k]
        keep = cs >= kth  # keep every tie at the boundary, then break ties by tie_rank
        cand, cs = cand[keep], cs[keep]
    order = np.lexsort((tie_rank[cand], -cs))[:k]
    return [(int(cand[i]), float(cs[i])) for i in order]


def check_documents(value: Any, owner: str) -> list[Document]:
    """``value`` as a list of ``Document`` objects — what a compressor, a transformer or ``add_documents`` takes —
    else a one-line ``TypeError`` naming ``owner`` (the method, e.g. ``"MMRCompressor.compress_documents"``) and
    what was given: a string, a single ``Document``, a mapping, ``None`` or an item that is not a ``Document``
    (which would otherwise be iterated character by character or field by field).

    Example:
        >>> check_documents([Document(page_content="梅雨")], "f")[0].page_content
        '梅雨'
        >>> check_documents("text", "f")
        Traceback (most recent call last):
        ...
        TypeError: f takes a list of Documents (a retriever's output), got str

    Raises:
        TypeError: as above.
    """
    if isinstance(value, (str, bytes, Document)) or not isinstance(value, Sequence):
        raise TypeError(f"{owner} takes a list of Documents (a retriever's output), got {type(value).__name__}")
    docs = list(value)
    for i, doc in enumerate(docs):
        if not isinstance(doc, Document):
            raise TypeError(f"{owner} takes a list of Documents; item {i} is a {type(doc).__name__}")
    return docs
