"""The directory backend's in-memory search: segments a write adds to, searched together with the scores of one
index over the same records — what :class:`~langchain_ragspine.vectorstores.RagSpineVectorStore` searches, and the
directory store's :class:`~langchain_ragspine.backends.base.SearchBackend` (:meth:`IndexSnapshot.lexical_search`,
:meth:`~IndexSnapshot.vector_search`, :meth:`~IndexSnapshot.vector_search_with_vectors`; filters compiled here to
row masks).

A rebuild of every index after each write made a small write cost what the whole store costs (30 rounds of "add
10 texts, search" over 300 chunks took 7.8 s, against 0.4 s for ``InMemoryVectorStore``).  An
:class:`IndexSnapshot` is instead a tuple of immutable :class:`Part`\\ s — the *main* part and a few small *delta*
parts — each with a mask of its live rows.  A write (:meth:`IndexSnapshot.updated`) marks the rows of the documents
it touched dead, and appends one part with their new rows: only the new rows are tokenized and embedded.  Searches
read every part:

* **BM25** is scored at query time from raw postings (:mod:`~langchain_ragspine.backends.directory.bm25_postings`)
  with the corpus statistics (``N``, ``avgdl``, each query term's ``df``) of the live rows of all parts, so the
  scores are exactly those of one index built from the same records, bit for bit;
* **dense**: each part has its own FAISS index (:class:`~langchain_ragspine.backends.directory.faiss_index.
  FaissVectorIndex`; an exact flat one scores every row with FAISS's own inner product whatever the filter, so a
  row's cosine does not depend on the part that holds it), searched with the filter and the live rows as its
  ``allowed`` mask before scoring;
* each part's top ``k`` (every tie at its boundary kept) are merged by ``(-score, chunk_id)``: the order of one
  index, ties broken by ``chunk_id``.

Parts are merged (their live rows, nothing tokenized or embedded again) when there are more than
:attr:`IndexConfig.max_deltas` deltas (the deltas into one), and when the deltas' rows plus the main part's dead
rows pass :attr:`IndexConfig.merge_fraction` of the main part's live rows, at least :attr:`IndexConfig.
min_merge_rows` (everything into a new main part).  A write thus costs what it adds, plus now and then a merge
whose cost is a pass over arrays already built.

RESTRICTED records are never given to a part (:meth:`IndexSnapshot.build` / :meth:`~IndexSnapshot.updated` leave
them out: not tokenized, embedded or counted in the statistics).  The snapshot is immutable once built (its
filter-mask caches aside), so a search may read it while a write builds the next one.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from langchain_core.documents import Document

from langchain_ragspine.backends.directory.bm25_postings import (
    PostingsSegment,
    bm25_scores,
    corpus_statistics,
    merge_segments,
)
from langchain_ragspine.backends.directory.faiss_index import (
    AUTO_HNSW_MIN_ROWS,
    EXACT_MAX_ROWS,
    FaissVectorIndex,
)
from langchain_ragspine.documents import has_visible_text, top_rows
from langchain_ragspine.embeddings.cache import content_hash
from langchain_ragspine.filters import (
    UnknownFilterFieldWarning,
    compile_filter,
    filter_fields,
    filter_key,
    unknown_field_message,
    unreported_fields,
)
from langchain_ragspine.sensitivity import is_restricted
from langchain_ragspine.text import index_text
from langchain_ragspine.tokenizers import Tokenizer

__all__ = ["Embedder", "IndexConfig", "IndexSnapshot", "Part", "StoredRecord", "internal_record"]

#: ``(doc_id, record, seen)``: a record as the indexes take it — the chunk-store document it belongs to, the record
#: as the vector store returns it (``id`` = its chunk id), and the metadata a filter sees
#: (:func:`~langchain_ragspine.backends.versioning.filter_metadata` for a chunk store's row: the record's lineage too).
StoredRecord = tuple[str, Document, Mapping[str, Any]]
#: ``embed([(chunk_id, text), ...])`` → float32 ``(n, d)`` L2-normalised vectors (``(0, 0)`` for none).
Embedder = Callable[[list[tuple[str, str]]], np.ndarray]
#: Filter masks a part keeps (the oldest dropped first).
_MASKS_KEPT = 32


@dataclass(frozen=True)
class IndexConfig:
    """How a snapshot indexes (fixed for the vector store's life).

    Attributes:
        tokenize: the BM25 tokenizer (a callable of :func:`~langchain_ragspine.tokenizers.get_tokenizer`).
        index_kind: the FAISS kind of the main part (``"auto"``, ``"flat"``, ``"ivf"``, ``"hnsw"``); deltas are
            always exact (flat).
        k1, b: BM25's parameters (:class:`~langchain_ragspine.retrievers.BM25Retriever`'s defaults).
        merge_fraction: merge everything into a new main part when the deltas' rows plus the main part's dead rows
            exceed this fraction of its live rows (default 0.1) …
        min_merge_rows: … and at least this many (default 256).
        max_deltas: merge the deltas into one beyond this many (default 8).
    """

    tokenize: Tokenizer
    index_kind: str = "auto"
    k1: float = 1.5
    b: float = 0.75
    merge_fraction: float = 0.1
    min_merge_rows: int = 256
    max_deltas: int = 8


def _resolved_kind(kind: str, n: int) -> str:
    if n == 0:
        return "flat"
    if kind == "auto":
        return "hnsw" if n >= AUTO_HNSW_MIN_ROWS else "flat"
    return kind


def _vector_index(vectors: np.ndarray, ids: list[str], hashes: list[str], kind: str) -> FaissVectorIndex | None:
    """A FAISS index of ``vectors`` (``None`` for none).  An exact (flat) index scores through FAISS for every
    filter (``exact_max_rows=0``), so a row's score is the same in every part and under every filter."""
    if not ids:
        return None
    resolved = _resolved_kind(kind, len(ids))
    return FaissVectorIndex(
        vectors, ids, content_hashes=hashes, kind=resolved,
        exact_max_rows=0 if resolved == "flat" else EXACT_MAX_ROWS,
    )


def _tie_ranks(ids: Sequence[str]) -> np.ndarray:
    order = sorted(range(len(ids)), key=ids.__getitem__)
    ranks = np.empty(len(ids), dtype=np.int64)
    ranks[np.asarray(order, dtype=np.int64)] = np.arange(len(ids), dtype=np.int64)
    return ranks


@dataclass(eq=False)
class Part:
    """One immutable segment of a snapshot: its records, their BM25 postings and their vectors.

    Attributes:
        docs: the records as the indexes see them (``metadata["chunk_id"]`` = the record id), in row order.
        records: the records as the vector store returns them, in row order.
        doc_ids: the chunk-store document of each row.
        postings: the BM25 postings of every row (tokens of :func:`~langchain_ragspine.text.index_text`).
        dense_rows: int64, the row of each vector (rows without visible text have none).
        vectors: the FAISS index of those vectors (``None``: no row has one).
    """

    docs: tuple[Document, ...]
    records: tuple[Document, ...]
    doc_ids: tuple[str, ...]
    postings: PostingsSegment
    dense_rows: np.ndarray
    vectors: FaissVectorIndex | None
    row_of: dict[str, int] = field(init=False, repr=False)
    tie_rank: np.ndarray = field(init=False, repr=False)
    _rows_of_doc: dict[str, list[int]] | None = field(default=None, init=False, repr=False)
    _masks: dict[str, np.ndarray] = field(default_factory=dict, init=False, repr=False)
    _known: frozenset[str] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        ids = [str(d.id) for d in self.docs]
        self.row_of = {rid: i for i, rid in enumerate(ids)}
        self.tie_rank = _tie_ranks(ids)

    def __len__(self) -> int:
        return len(self.docs)

    @classmethod
    def build(
        cls, rows: Sequence[StoredRecord], config: IndexConfig, embed: Embedder, *, kind: str = "flat"
    ) -> Part:
        """A part of ``rows`` (none of them RESTRICTED: the caller leaves those out): tokenized, and embedded with
        ``embed`` (only the rows with visible text).  ``kind``: its FAISS kind."""
        records = tuple(record for _, record, _ in rows)
        docs = tuple(internal_record(record, seen) for _, record, seen in rows)
        texts = [index_text(d) for d in docs]
        postings = PostingsSegment.build(texts, config.tokenize)
        dense = [i for i, d in enumerate(docs) if has_visible_text(d)]
        items = [(str(docs[i].id), texts[i]) for i in dense]
        vectors = embed(items) if items else np.zeros((0, 0), dtype=np.float32)
        index = _vector_index(vectors, [cid for cid, _ in items], [content_hash(t) for _, t in items], kind)
        return cls(docs, records, tuple(doc_id for doc_id, _, _ in rows), postings,
                   np.asarray(dense, dtype=np.int64), index)

    @classmethod
    def merged(cls, parts: Sequence[tuple[Part, np.ndarray | None]], *, kind: str) -> Part:
        """One part of the live rows of ``parts`` (in order), reusing their postings, vectors and filter masks."""
        keeps = [np.ones(len(p), dtype=np.bool_) if live is None else live for p, live in parts]
        rows = [(p, np.flatnonzero(keep).tolist()) for (p, _), keep in zip(parts, keeps, strict=True)]
        docs = tuple(p.docs[i] for p, picked in rows for i in picked)
        records = tuple(p.records[i] for p, picked in rows for i in picked)
        doc_ids = tuple(p.doc_ids[i] for p, picked in rows for i in picked)
        postings = merge_segments([(p.postings, keep) for (p, _), keep in zip(parts, keeps, strict=True)])
        dense_rows: list[np.ndarray] = []
        blocks: list[np.ndarray] = []
        ids: list[str] = []
        hashes: list[str] = []
        offset = 0
        for (p, _), keep in zip(parts, keeps, strict=True):
            new_row = np.cumsum(keep, dtype=np.int64) - 1 + offset
            if p.vectors is not None and p.dense_rows.size:
                alive = keep[p.dense_rows]
                picked = np.flatnonzero(alive)
                if picked.size:
                    blocks.append(p.vectors.vectors(picked))
                    dense_rows.append(new_row[p.dense_rows[picked]])
                    ids.extend(p.vectors.chunk_ids[i] for i in picked.tolist())
                    hashes.extend(str(p.vectors.content_hashes[i]) for i in picked.tolist())
            offset += int(keep.sum())
        vectors = np.concatenate(blocks) if blocks else np.zeros((0, 0), dtype=np.float32)
        part = cls(docs, records, doc_ids, postings,
                   np.concatenate(dense_rows) if dense_rows else np.zeros(0, dtype=np.int64),
                   _vector_index(vectors, ids, hashes, kind))
        shared = set.intersection(*(set(p._masks) for p, _ in parts)) if parts else set()
        for key in list(shared)[-_MASKS_KEPT:]:  # the filters every part had a mask of: no predicate run again
            part._masks[key] = np.concatenate([p._masks[key][keep] for (p, _), keep in zip(parts, keeps, strict=True)])
        return part

    def rows_of_doc(self, doc_id: str) -> list[int]:
        """The rows of chunk-store document ``doc_id``."""
        if self._rows_of_doc is None:
            by_doc: dict[str, list[int]] = {}
            for i, d in enumerate(self.doc_ids):
                by_doc.setdefault(d, []).append(i)
            self._rows_of_doc = by_doc
        return self._rows_of_doc.get(doc_id, [])

    def known_fields(self) -> frozenset[str]:
        """Every metadata key of the part's records (computed once)."""
        if self._known is None:
            keys: set[str] = set()
            for d in self.docs:
                keys.update(d.metadata)
            self._known = frozenset(keys)
        return self._known

    def mask(self, key: str, predicate: Callable[[Mapping[str, Any]], bool]) -> np.ndarray:
        """The rows whose metadata the filter (``key`` = :func:`~langchain_ragspine.filters.filter_key`,
        ``predicate`` its compiled form) matches, cached."""
        hit = self._masks.get(key)
        if hit is None:
            hit = np.fromiter((predicate(d.metadata) for d in self.docs), dtype=np.bool_, count=len(self.docs))
            if len(self._masks) >= _MASKS_KEPT:
                self._masks.pop(next(iter(self._masks)), None)
            self._masks[key] = hit
        return hit


def internal_record(record: Document, seen: Mapping[str, Any] | None = None) -> Document:
    """A record as the indexes see it: the metadata a filter sees (``seen``, else the record's own) with
    ``chunk_id`` = the record id (the key of fusion and of the vector cache)."""
    md = record.metadata if seen is None else seen
    return Document(page_content=record.page_content, metadata={**md, "chunk_id": record.id}, id=record.id)


#: One hit: ``(score, chunk_id, part index, row, vector row or -1)``.
_Hit = tuple[float, str, int, int, int]


@dataclass(eq=False)
class IndexSnapshot:
    """The indexes of one state of a store (see the module docstring).  Build with :meth:`build`; a write's next
    snapshot is :meth:`updated`.

    Attributes:
        state: what the snapshot was built from (the vector store compares it with the store's state).
        mark: the change-feed mark of that state (see :meth:`~langchain_ragspine.backends.directory.chunk_store.
            ChunkStore.history_mark`), or ``None``.
        parts, live: the parts (main first) and each one's live-row mask (``None``: every row).
    """

    config: IndexConfig
    state: Hashable
    mark: Any
    parts: tuple[Part, ...]
    live: tuple[np.ndarray | None, ...]
    statistics: tuple[int, int] = field(init=False)
    #: ``warn(message, category)``: how a filter naming a field no record has is reported (the vector store
    #: attributes the warning to its caller's line); default :func:`warnings.warn`.
    warn: Callable[[str, type[Warning]], None] = field(default=warnings.warn, repr=False)
    _checked: set[str] = field(default_factory=set, init=False, repr=False)

    def __post_init__(self) -> None:
        self.statistics = corpus_statistics([(p.postings, live) for p, live in zip(self.parts, self.live, strict=True)])

    @classmethod
    def build(
        cls,
        rows: Iterable[StoredRecord],
        config: IndexConfig,
        embed: Embedder,
        *,
        state: Hashable,
        mark: Any = None,
        warn: Callable[[str, type[Warning]], None] = warnings.warn,
    ) -> IndexSnapshot:
        """One main part of ``rows`` (the RESTRICTED ones left out); ``warn`` as the attribute."""
        kept = [row for row in rows if not is_restricted(row[1].metadata)]
        main = Part.build(kept, config, embed, kind=config.index_kind)
        return cls(config, state, mark, (main,), (None,), warn=warn)

    # -- writing ------------------------------------------------------------------------------------------------
    def updated(
        self,
        touched: Iterable[str],
        rows: Iterable[StoredRecord],
        embed: Embedder,
        *,
        state: Hashable,
        mark: Any = None,
    ) -> IndexSnapshot:
        """The next snapshot after writes to the documents ``touched``, whose current rows are ``rows`` (the
        RESTRICTED ones left out here): every row of those documents dies, the new rows form one new part, and
        parts are merged as the module docstring says.  ``self`` is not changed."""
        touched = set(touched)
        lives: list[np.ndarray | None] = []
        for part, live in zip(self.parts, self.live, strict=True):
            dead = [r for d in touched for r in part.rows_of_doc(d)]
            if dead:
                live = np.ones(len(part), dtype=np.bool_) if live is None else live.copy()
                live[dead] = False
            lives.append(live)
        kept = [row for row in rows if not is_restricted(row[1].metadata) and row[0] in touched]
        parts: list[tuple[Part, np.ndarray | None]] = list(zip(self.parts, lives, strict=True))
        if kept:
            parts.append((Part.build(kept, self.config, embed), None))
        main, deltas = parts[0], [(p, live) for p, live in parts[1:] if live is None or live.any()]
        cfg = self.config
        if len(deltas) > cfg.max_deltas:
            deltas = [(Part.merged(deltas, kind="flat"), None)]
        main_live = len(main[0]) if main[1] is None else int(np.count_nonzero(main[1]))
        waste = (len(main[0]) - main_live) + sum(len(p) if v is None else int(np.count_nonzero(v)) for p, v in deltas)
        if waste > max(cfg.min_merge_rows, cfg.merge_fraction * main_live):
            total = main_live + sum(len(p) if v is None else int(np.count_nonzero(v)) for p, v in deltas)
            merged = Part.merged([main, *deltas], kind=_resolved_kind(cfg.index_kind, total))
            return IndexSnapshot(cfg, state, mark, (merged,), (None,), warn=self.warn)
        out = [main, *deltas]
        return IndexSnapshot(cfg, state, mark, tuple(p for p, _ in out), tuple(v for _, v in out), warn=self.warn)

    # -- reading ------------------------------------------------------------------------------------------------
    def __len__(self) -> int:
        """Live records."""
        return self.statistics[0]

    def _find(self, rid: str) -> tuple[Part, int] | None:
        for part, live in zip(reversed(self.parts), reversed(self.live), strict=True):
            row = part.row_of.get(rid)
            if row is not None and (live is None or live[row]):
                return part, row
        return None

    def record(self, rid: str) -> Document | None:
        """The live record with id ``rid`` as the vector store returns it (``None``: none)."""
        found = self._find(rid)
        return None if found is None else found[0].records[found[1]]

    def document(self, rid: str) -> Document | None:
        """The live record with id ``rid`` as the indexes see it (``metadata["chunk_id"]`` set)."""
        found = self._find(rid)
        return None if found is None else found[0].docs[found[1]]

    def record_of(self, doc: Document) -> Document:
        """The record (as returned) of a document this snapshot's searches gave."""
        found = self._find(str(doc.id))
        if found is None:  # pragma: no cover - a search returns live rows only
            raise KeyError(doc.id)
        return found[0].records[found[1]]

    def has_vectors(self) -> bool:
        """Whether some live record has a vector (else a dense search finds nothing, without embedding)."""
        return any(
            p.vectors is not None and (live is None or bool(live[p.dense_rows].any()))
            for p, live in zip(self.parts, self.live, strict=True)
        )

    def _allowed(self, filter: Mapping[str, Any] | None) -> list[np.ndarray | None]:
        """Per part, the rows a search may score: live and matching ``filter`` (``None``: every row)."""
        if not filter:
            return list(self.live)
        key = filter_key(filter)
        predicate = compile_filter(filter)
        assert predicate is not None
        if key not in self._checked:
            self._checked.add(key)
            known: set[str] = set()
            for part in self.parts:
                known |= part.known_fields()
            if known:
                for name in unreported_fields([n for n in filter_fields(filter) if n not in known], known):
                    self.warn(unknown_field_message(name, known), UnknownFilterFieldWarning)
        out: list[np.ndarray | None] = []
        for part, live in zip(self.parts, self.live, strict=True):
            mask = part.mask(key, predicate)
            out.append(mask if live is None else mask & live)
        return out

    @staticmethod
    def _best(hits: list[_Hit], k: int) -> list[_Hit]:
        hits.sort(key=lambda h: (-h[0], h[1]))
        return hits[:k]

    def bm25(
        self, query: str, k: int, filter: Mapping[str, Any] | None = None, *, threshold: float | None = None
    ) -> list[tuple[Document, float]]:
        """The ``k`` best ``(document, BM25 score)`` with a positive score (and ``>= threshold``) among the live
        records matching ``filter``, best first, ties by ``chunk_id``; ``[]`` for an empty query.

        (The vector store checks the query's length first: :func:`~langchain_ragspine.retrievers.bm25.
        check_bm25_query`.)
        """
        allowed = self._allowed(filter)
        if not query.strip() or not len(self):
            return []
        tokens = self.config.tokenize(query)
        scores = bm25_scores(tokens, [(p.postings, live) for p, live in zip(self.parts, self.live, strict=True)],
                             k1=self.config.k1, b=self.config.b, statistics=self.statistics)
        hits: list[_Hit] = []
        for j, (part, s, ok_rows) in enumerate(zip(self.parts, scores, allowed, strict=True)):
            ok = s > 0
            if threshold is not None:
                ok &= s >= np.float64(threshold)
            if ok_rows is not None:
                ok &= ok_rows
            hits += [(sc, str(part.docs[r].id), j, r, -1) for r, sc in top_rows(s, ok, k, part.tie_rank)]
        return [(self.parts[j].docs[r], sc) for sc, _, j, r, _ in self._best(hits, k)]

    def _dense_hits(self, vector: np.ndarray, k: int, filter: Mapping[str, Any] | None) -> list[_Hit]:
        allowed = self._allowed(filter)
        hits: list[_Hit] = []
        for j, (part, ok_rows) in enumerate(zip(self.parts, allowed, strict=True)):
            if part.vectors is None:
                continue
            mask = None if ok_rows is None else ok_rows[part.dense_rows]
            if mask is not None and not mask.any():
                continue
            for vrow, sc in part.vectors.search(vector, k, allowed=mask):
                row = int(part.dense_rows[vrow])
                hits.append((sc, str(part.docs[row].id), j, row, vrow))
        return self._best(hits, k)

    def dense(self, vector: np.ndarray, k: int, filter: Mapping[str, Any] | None = None) -> list[tuple[Document, float]]:
        """The ``k`` best ``(document, cosine)`` for a query vector among the live records matching ``filter``
        that have a vector, best first, ties by ``chunk_id``.

        Raises:
            ValueError: a vector of another dimension than the store's.
        """
        return [(self.parts[j].docs[r], sc) for sc, _, j, r, _ in self._dense_hits(vector, k, filter)]

    def dense_with_vectors(
        self, vector: np.ndarray, k: int, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[Document, float, np.ndarray]]:
        """:meth:`dense` with each hit's stored (normalised) vector: the candidates of MMR."""
        out: list[tuple[Document, float, np.ndarray]] = []
        for sc, _, j, r, vrow in self._dense_hits(vector, k, filter):
            index = self.parts[j].vectors
            assert index is not None
            out.append((self.parts[j].docs[r], sc, index.vectors([vrow])[0]))
        return out

    # -- the backend interface (langchain_ragspine.backends.base.SearchBackend) ------------------------------------
    def lexical_search(
        self, query: str, k: int, filter: Mapping[str, Any] | None = None, *, score_threshold: float | None = None
    ) -> list[tuple[Document, float]]:
        """:meth:`bm25` under the :class:`~langchain_ragspine.backends.base.SearchBackend` name: the ``k`` best
        ``(document, BM25 score)`` (score > 0, ``>= score_threshold``) among the live records matching ``filter``.

        Raises:
            ValueError, TypeError: a malformed ``filter``.
        """
        return self.bm25(query, k, filter, threshold=score_threshold)

    def vector_search(
        self, vector: Sequence[float] | np.ndarray, k: int, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[Document, float]]:
        """:meth:`dense` under the :class:`~langchain_ragspine.backends.base.SearchBackend` name (``vector`` of
        shape ``(d,)``, normalised by the index).

        Raises:
            ValueError: a vector of another dimension than the store's; a malformed ``filter``.
        """
        return self.dense(np.asarray(vector, dtype=np.float32), k, filter)

    def vector_search_with_vectors(
        self, vector: Sequence[float] | np.ndarray, k: int, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[Document, float, np.ndarray]]:
        """:meth:`dense_with_vectors` under the :class:`~langchain_ragspine.backends.base.SearchBackend` name."""
        return self.dense_with_vectors(np.asarray(vector, dtype=np.float32), k, filter)
