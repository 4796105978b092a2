"""The vector index of the dense channel: a FAISS index file and a SQLite id map (row → ``chunk_id``).

Dense retrieval scores a chunk by the inner product of its embedding with the query's (dense passage retrieval,
Karpukhin et al., "Dense Passage Retrieval for Open-Domain Question Answering", EMNLP 2020).  On L2-normalised
vectors the inner product is the cosine similarity.  The search runs in FAISS (Johnson, Douze & Jégou, "Billion-scale
similarity search with GPUs", IEEE Trans. Big Data 2019; Douze et al., "The Faiss library", 2024), with one of three
index kinds:

* ``"flat"`` — ``IndexFlatIP``, exact; the default below :data:`AUTO_HNSW_MIN_ROWS` (200,000) vectors.
* ``"hnsw"`` — ``IndexHNSWFlat`` (Malkov & Yashunin, "Efficient and robust approximate nearest neighbor search
  using Hierarchical Navigable Small World graphs", TPAMI 2018), ``M = 32``, ``efConstruction = 40`` (FAISS's
  default), ``efSearch = 64``; the ``"auto"`` choice from 200,000 vectors up.
* ``"ivf"`` — ``IndexIVFFlat`` (inverted lists over a k-means coarse quantiser, Jégou et al. 2011) with
  ``nlist = clamp(round(4·√n), 1, n // 39)`` lists trained on the vectors themselves (FAISS wants at least 39
  training points per list) and ``nprobe = min(nlist, max(16, ceil(nlist / 8)))`` lists probed per query.
  Only on request.

**Filters before scoring.**  :meth:`FaissVectorIndex.search` takes a boolean ``allowed`` mask (one entry per row,
computed by :func:`langchain_ragspine.filters.compile_filter`) and never scores, let alone returns, a row outside
it.  The rule, verified against faiss-cpu 1.15:

1. When at most :attr:`FaissVectorIndex.exact_max_rows` rows (default :data:`EXACT_MAX_ROWS` = 4,096) are allowed,
   they are scored exactly with numpy from the index's own stored vectors (``reconstruct_batch``).  This is both
   faster than a graph walk and exact, so a filter that keeps one chunk finds that chunk in every index kind.
2. Otherwise FAISS searches with an ``IDSelectorBitmap`` in its ``SearchParameters(sel=…)``
   (``SearchParametersIVF`` / ``SearchParametersHNSW`` for those kinds — IVF rejects the base class).  FAISS
   skips rows outside the selector inside the scan, so they are never candidates.  Because a selective filter
   starves an approximate search (HNSW's graph walk meets few allowed nodes, IVF's probed lists hold few allowed
   rows), the search effort is scaled by the inverse of the allowed fraction ``f``: ``efSearch = min(4096,
   ceil(64 / f))`` and ``nprobe = min(nlist, ceil(nprobe / f))``.
3. If FAISS still returns fewer than ``min(k, allowed rows)`` hits, the allowed rows are scored exactly (as in 1).

Results are ``(row, score)`` pairs, best first, ties broken by ``chunk_id`` (then row).  To see every tie at the
k-th place the search over-fetches and widens until the boundary score is strictly inside the fetched list.

**Persistence, no pickle.**  :meth:`FaissVectorIndex.save` writes ``index.faiss`` with ``faiss.write_index``, the
id map ``ids.sqlite`` (``row INTEGER PRIMARY KEY, chunk_id TEXT, content_hash TEXT``) and ``vector_index.json``
(format, dim, kind, count, search parameters, SHA-256 of ``index.faiss``) into a temporary directory that then
replaces the target.
:meth:`FaissVectorIndex.load` reads with ``faiss.read_index`` and validates that the three agree, raising
:class:`~langchain_ragspine.errors.StoreError` naming the offending file.

faiss is imported lazily (the ``embed`` and ``st`` extras install faiss-cpu); nothing here is loaded with pickle.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from langchain_ragspine._optional import import_optional
from langchain_ragspine.arguments import check_int
from langchain_ragspine.backends.directory.files import atomic_dir, file_sha256, layout, read_config
from langchain_ragspine.backends.directory.regular_files import check_regular
from langchain_ragspine.embeddings.batching import l2_normalize
from langchain_ragspine.errors import StoreError, as_os_error

__all__ = [
    "AUTO_HNSW_MIN_ROWS",
    "EXACT_MAX_ROWS",
    "INDEX_KINDS",
    "FaissVectorIndex",
]

#: ``kind="auto"`` picks ``"flat"`` below this many vectors and ``"hnsw"`` from it up.
AUTO_HNSW_MIN_ROWS = 200_000

#: Filtered searches that allow at most this many rows score them exactly with numpy (default of
#: :attr:`FaissVectorIndex.exact_max_rows`).
EXACT_MAX_ROWS = 4_096

#: Accepted values of ``kind``.
INDEX_KINDS = ("auto", "flat", "ivf", "hnsw")

#: HNSW defaults: graph degree, build-time and search-time beam widths.
HNSW_M = 32
HNSW_EF_CONSTRUCTION = 40
HNSW_EF_SEARCH = 64
#: Upper bound for the selectivity-scaled ``efSearch`` of a filtered HNSW search.
HNSW_MAX_EF_SEARCH = 4_096

INDEX_FILE = "index.faiss"
IDS_FILE = "ids.sqlite"
META_FILE = "vector_index.json"
_FORMAT = "ragspine-faiss/1"
#: Everything :meth:`FaissVectorIndex.write_files` writes into a directory.
SAVE_LAYOUT = layout(INDEX_FILE, IDS_FILE, META_FILE)
_EXACT_BLOCK_ROWS = 65_536


# -- helpers ---------------------------------------------------------------------------------------------------
def _import_faiss() -> Any:
    return import_optional("faiss", "the dense channel needs FAISS: pip install 'langchain-ragspine[embed]' (or faiss-cpu)")



# -- the FAISS index -------------------------------------------------------------------------------------------
def default_nlist(n: int) -> int:
    """IVF list count for ``n`` vectors: ``round(4·√n)``, at most ``n // 39`` (FAISS's minimum of 39 training
    points per list), at least 1."""
    return max(1, min(round(4 * math.sqrt(max(n, 0))), n // 39))


def default_nprobe(nlist: int) -> int:
    """IVF lists probed per query: ``min(nlist, max(16, ceil(nlist / 8)))``."""
    return max(1, min(nlist, max(16, math.ceil(nlist / 8))))


class FaissVectorIndex:
    """A FAISS inner-product index over L2-normalised vectors, with a row → ``chunk_id`` map.

    Args:
        vectors: float array ``(n, d)``, ``d >= 1``; normalised here (a copy; zero rows stay zero).
        chunk_ids: ``n`` strings; row ``i`` of ``vectors`` is chunk ``chunk_ids[i]``.  Ties break on them.
        content_hashes: optional ``n`` strings (see :func:`content_hash`) stored in the id map.
        kind: ``"auto"`` (default: ``"flat"`` below :data:`AUTO_HNSW_MIN_ROWS` vectors, ``"hnsw"`` from there),
            ``"flat"``, ``"ivf"`` or ``"hnsw"``.  An empty index is always flat.
        nlist: IVF lists (default :func:`default_nlist`; clamped to ``n``).
        nprobe: IVF lists probed per query (default :func:`default_nprobe`).
        hnsw_m: HNSW graph degree ``M`` (default 32).
        ef_construction: HNSW build beam (default 40).
        ef_search: HNSW search beam (default 64; raised to the number of results fetched).
        exact_max_rows: filtered searches allowing at most this many rows score them exactly (default 4,096;
            ``0`` always uses FAISS's selector).

    ``nprobe``, ``ef_search`` and ``exact_max_rows`` are plain attributes and may be changed between searches.

    Raises:
        ValueError: a bad shape, length, ``kind`` or parameter; non-finite vectors.
        TypeError: an integer parameter that is not an int.
        ImportError: faiss-cpu is not installed.
    """

    def __init__(
        self,
        vectors: np.ndarray,
        chunk_ids: Sequence[str],
        *,
        content_hashes: Sequence[str | None] | None = None,
        kind: str = "auto",
        nlist: int | None = None,
        nprobe: int | None = None,
        hnsw_m: int = HNSW_M,
        ef_construction: int = HNSW_EF_CONSTRUCTION,
        ef_search: int = HNSW_EF_SEARCH,
        exact_max_rows: int = EXACT_MAX_ROWS,
    ) -> None:
        if kind not in INDEX_KINDS:
            raise ValueError(f"kind must be one of {INDEX_KINDS}, got {kind!r}")
        for name, value, low in (
            ("hnsw_m", hnsw_m, 2),
            ("ef_construction", ef_construction, 1),
            ("ef_search", ef_search, 1),
            ("exact_max_rows", exact_max_rows, 0),
        ):
            check_int(value, name, minimum=low)
        check_int(nlist, "nlist", allow_none=True)
        check_int(nprobe, "nprobe", allow_none=True)
        x = np.asarray(vectors)
        if x.ndim != 2 or x.shape[1] < 1:
            raise ValueError(f"vectors must have shape (n, d) with d >= 1, got {x.shape}")
        if not np.issubdtype(x.dtype, np.number) or np.issubdtype(x.dtype, np.complexfloating):
            raise ValueError(f"vectors must be real numbers, got dtype {x.dtype}")
        x = l2_normalize(x)
        if not np.all(np.isfinite(x)):
            raise ValueError("vectors contain NaN or infinite values")
        n, d = x.shape
        ids = [str(c) for c in chunk_ids]
        if len(ids) != n:
            raise ValueError(f"got {n} vectors but {len(ids)} chunk_ids")
        hashes: list[str | None] = list(content_hashes) if content_hashes is not None else [None] * n
        if len(hashes) != n:
            raise ValueError(f"got {n} vectors but {len(hashes)} content_hashes")
        resolved = kind
        if kind == "auto":
            resolved = "hnsw" if n >= AUTO_HNSW_MIN_ROWS else "flat"
        if n == 0:
            resolved = "flat"
        faiss = _import_faiss()
        self.requested_kind = kind
        self.hnsw_m = hnsw_m
        self.ef_construction = ef_construction
        self.ef_search = ef_search
        self.exact_max_rows = exact_max_rows
        self.nlist: int | None = None
        self.nprobe: int | None = None
        if resolved == "flat":
            index = faiss.IndexFlatIP(d)
        elif resolved == "hnsw":
            index = faiss.IndexHNSWFlat(d, hnsw_m, faiss.METRIC_INNER_PRODUCT)
            index.hnsw.efConstruction = ef_construction
        else:  # ivf
            lists = min(nlist if nlist is not None else default_nlist(n), n)
            quantizer = faiss.IndexFlatIP(d)
            index = faiss.IndexIVFFlat(quantizer, d, lists, faiss.METRIC_INNER_PRODUCT)
            index.cp.min_points_per_centroid = min(39, max(1, n // lists))  # no "too few points" warning
            index.train(x)
            index.make_direct_map()  # reconstruct_batch for exact scoring of filtered rows
            self.nlist = lists
            self.nprobe = min(lists, nprobe) if nprobe is not None else default_nprobe(lists)
        if n:
            index.add(x)
        self._setup(index, resolved, ids, hashes)

    def _setup(self, index: Any, kind: str, ids: list[str], hashes: list[str | None]) -> None:
        self._index = index
        self.kind = kind
        self._chunk_ids = tuple(ids)
        self._hashes = tuple(hashes)
        order = sorted(range(len(ids)), key=lambda i: (ids[i], i))
        ranks = np.empty(len(ids), dtype=np.int64)
        ranks[np.asarray(order, dtype=np.int64)] = np.arange(len(ids), dtype=np.int64)
        self._tie_rank = ranks

    # -- properties -----------------------------------------------------------------------------------------------
    @property
    def dim(self) -> int:
        """Vector dimension ``d``."""
        return int(self._index.d)

    @property
    def count(self) -> int:
        """Number of vectors (rows)."""
        return int(self._index.ntotal)

    def __len__(self) -> int:
        return self.count

    @property
    def chunk_ids(self) -> tuple[str, ...]:
        """``chunk_id`` of each row."""
        return self._chunk_ids

    @property
    def content_hashes(self) -> tuple[str | None, ...]:
        """Content hash of each row (``None`` where not given)."""
        return self._hashes

    @property
    def faiss_index(self) -> Any:
        """The underlying ``faiss.Index`` (inner-product metric)."""
        return self._index

    def __repr__(self) -> str:
        return f"FaissVectorIndex(kind={self.kind!r}, count={self.count}, dim={self.dim})"

    def vectors(self, rows: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
        """The stored (normalised) vectors of ``rows`` (all rows when ``None``): float32 ``(len(rows), d)``."""
        if rows is None:
            ids = np.arange(self.count, dtype=np.int64)
        else:
            ids = np.asarray(rows, dtype=np.int64).reshape(-1)
        if ids.size == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        if ids.min() < 0 or ids.max() >= self.count:
            raise ValueError(f"rows must be in [0, {self.count}), got min {ids.min()} max {ids.max()}")
        return np.asarray(self._index.reconstruct_batch(ids), dtype=np.float32).reshape(ids.size, self.dim)

    # -- search ---------------------------------------------------------------------------------------------------
    def search(
        self, query_vec: np.ndarray | Sequence[float], k: int, *, allowed: np.ndarray | None = None
    ) -> list[tuple[int, float]]:
        """The ``k`` rows most similar to ``query_vec``, restricted to ``allowed`` before scoring.

        Args:
            query_vec: ``(d,)`` or ``(1, d)``; normalised here (a zero vector scores every row 0).
            k: number of results, ``>= 0``.
            allowed: optional bool array ``(count,)``; rows where it is ``False`` are never scored or returned.
                See the module docstring for how each index kind honours it.

        Returns:
            ``[(row, score), …]``, at most ``k``, best first; ``score`` is the cosine similarity (float); ties
            broken by ``chunk_id`` then row.

        Raises:
            TypeError: ``k`` is not an int.
            ValueError: ``k < 0``; a query of the wrong dimension or with non-finite values; ``allowed`` of the
                wrong shape or dtype.
        """
        check_int(k, "k", minimum=0)
        q = np.asarray(query_vec, dtype=np.float32)
        if q.ndim == 2 and q.shape[0] == 1:
            q = q[0]
        if q.ndim != 1 or q.shape[0] != self.dim:
            raise ValueError(f"query vector must have shape ({self.dim},), got {np.shape(query_vec)}")
        if not np.all(np.isfinite(q)):
            raise ValueError("query vector contains NaN or infinite values")
        n = self.count
        if allowed is not None:
            allowed = np.asarray(allowed)
            if allowed.dtype != np.bool_ or allowed.shape != (n,):
                raise ValueError(
                    f"allowed must be a bool array of shape ({n},), got {allowed.dtype} {allowed.shape}"
                )
            n_cand = int(np.count_nonzero(allowed))
        else:
            n_cand = n
        if k == 0 or n_cand == 0:
            return []
        q = l2_normalize(q)
        rows = None if allowed is None or n_cand == n else np.flatnonzero(allowed)
        if not q.any():  # every score is 0: the order is the tie order
            cand = np.arange(n, dtype=np.int64) if rows is None else rows
            return self._top(cand, np.zeros(cand.size, dtype=np.float32), k)
        if rows is not None and n_cand <= self.exact_max_rows:
            return self._exact(rows, q, k)
        hits = self._faiss_search(q, k, None if rows is None else allowed, n_cand)
        if hits is None:
            return self._exact(rows, q, k)
        return hits

    def _search_params(self, sel: Any, fetch: int, fraction: float) -> Any:
        faiss = _import_faiss()
        if self.kind == "hnsw":
            ef = max(self.ef_search, fetch)
            if fraction < 1.0:
                ef = max(ef, min(HNSW_MAX_EF_SEARCH, math.ceil(self.ef_search / fraction)))
            params = faiss.SearchParametersHNSW(efSearch=int(ef))
        elif self.kind == "ivf":
            nlist = int(self.nlist or 1)
            probe = min(nlist, int(self.nprobe or default_nprobe(nlist)))
            if fraction < 1.0:
                probe = min(nlist, max(probe, math.ceil(probe / fraction)))
            params = faiss.SearchParametersIVF(nprobe=int(probe))
        else:
            if sel is None:
                return None
            params = faiss.SearchParameters()
        if sel is not None:
            params.sel = sel
        return params

    def _faiss_search(
        self, q: np.ndarray, k: int, allowed: np.ndarray | None, n_cand: int
    ) -> list[tuple[int, float]] | None:
        """FAISS search with an ``IDSelectorBitmap`` for ``allowed``; ``None`` when it finds fewer than
        ``min(k, n_cand)`` rows (the caller then scores exactly)."""
        faiss = _import_faiss()
        n = self.count
        sel = None
        bits = None
        if allowed is not None:
            bits = np.packbits(allowed, bitorder="little")  # FAISS reads bit i at bits[i >> 3] >> (i & 7)
            sel = faiss.IDSelectorBitmap(n, faiss.swig_ptr(bits))
        fraction = n_cand / n
        need = min(k, n_cand)
        fetch = min(n_cand, k + max(k, 8))
        query = q.reshape(1, -1)
        while True:
            scores, ids = self._index.search(query, fetch, params=self._search_params(sel, fetch, fraction))
            valid = ids[0] >= 0
            found_ids, found_scores = ids[0][valid].astype(np.int64), scores[0][valid]
            if found_ids.size < need:
                return None
            # more rows may tie with the k-th score beyond what was fetched: fetch more
            if found_ids.size == fetch and fetch < n_cand and found_scores[-1] == found_scores[need - 1]:
                fetch = min(n_cand, fetch * 4)
                continue
            return self._top(found_ids, found_scores, k)  # `bits` (read by `sel`) lives until here

    def _exact(self, rows: np.ndarray | None, q: np.ndarray, k: int) -> list[tuple[int, float]]:
        """Exact inner products of ``q`` with ``rows`` (all rows when ``None``), from the stored vectors."""
        cand = np.arange(self.count, dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
        scores = np.empty(cand.size, dtype=np.float32)
        for start in range(0, cand.size, _EXACT_BLOCK_ROWS):
            block = cand[start : start + _EXACT_BLOCK_ROWS]
            scores[start : start + block.size] = self.vectors(block) @ q
        return self._top(cand, scores, k)

    def _top(self, rows: np.ndarray, scores: np.ndarray, k: int) -> list[tuple[int, float]]:
        if rows.size > k:
            kth = np.partition(scores, rows.size - k)[rows.size - k]
            keep = scores >= kth  # every tie at the boundary, then ties break by chunk_id
            rows, scores = rows[keep], scores[keep]
        order = np.lexsort((self._tie_rank[rows], -scores))[:k]
        return [(int(rows[i]), float(scores[i])) for i in order]

    # -- persistence ----------------------------------------------------------------------------------------------
    def _meta(self) -> dict[str, Any]:
        faiss = _import_faiss()
        return {
            "format": _FORMAT,
            "dim": self.dim,
            "count": self.count,
            "kind": self.kind,
            "requested_kind": self.requested_kind,
            "metric": "inner_product",
            "normalized": True,
            "nlist": self.nlist,
            "nprobe": self.nprobe,
            "hnsw_m": self.hnsw_m,
            "ef_construction": self.ef_construction,
            "ef_search": self.ef_search,
            "exact_max_rows": self.exact_max_rows,
            "faiss_version": getattr(faiss, "__version__", None),
        }

    def write_files(self, directory: str | os.PathLike[str]) -> None:
        """Write ``index.faiss``, ``ids.sqlite`` and ``vector_index.json`` into the existing ``directory``, in
        place (not atomic: :meth:`save` wraps this in a temporary directory)."""
        faiss = _import_faiss()
        root = Path(directory)
        with as_os_error(root / INDEX_FILE):  # FAISS reports a failed fwrite (disk full) as a RuntimeError
            faiss.write_index(self._index, str(root / INDEX_FILE))
        ids_path = root / IDS_FILE
        if ids_path.exists():
            ids_path.unlink()
        with as_os_error(ids_path):
            conn = sqlite3.connect(str(ids_path), isolation_level=None)
            try:
                conn.execute(
                    "CREATE TABLE ids (row INTEGER PRIMARY KEY, chunk_id TEXT NOT NULL, content_hash TEXT)"
                )
                conn.execute("BEGIN")
                conn.executemany(
                    "INSERT INTO ids (row, chunk_id, content_hash) VALUES (?, ?, ?)",
                    zip(range(self.count), self._chunk_ids, self._hashes, strict=True),
                )
                conn.execute("COMMIT")
            finally:
                conn.close()
        meta = self._meta()
        meta["index_sha256"] = file_sha256(root / INDEX_FILE)
        (root / META_FILE).write_text(json.dumps(meta, ensure_ascii=False, indent=1), "utf-8")

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the index to directory ``path``, replacing it atomically (a temporary directory beside it is
        renamed into place): ``index.faiss`` (``faiss.write_index``), ``ids.sqlite``, ``vector_index.json``.

        Raises:
            StoreWriteError: a write failed (disk full — FAISS's ``write_index`` error, SQLite's ``SQLITE_FULL`` —,
                …), naming the file; the previous save is intact."""
        with atomic_dir(path, marker=META_FILE, writes=SAVE_LAYOUT) as tmp:
            self.write_files(tmp)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> FaissVectorIndex:
        """Read an index written by :meth:`save` (``faiss.read_index``; never pickle).

        Raises:
            StoreError: a file is missing or corrupt, or the three files disagree (count, dimension, kind,
                metric); the message names the file.
        """
        faiss = _import_faiss()
        root = Path(path)
        meta_path = root / META_FILE
        meta = read_config(root, META_FILE, fmt=_FORMAT, what="vector index")
        try:
            dim, count, kind = int(meta["dim"]), int(meta["count"]), str(meta["kind"])
        except (KeyError, TypeError, ValueError) as e:
            raise StoreError(f"vector index metadata lacks dim/count/kind: {e}", path=meta_path) from None
        if kind not in ("flat", "ivf", "hnsw"):
            raise StoreError(f"unknown index kind {kind!r}", path=meta_path, field="kind")

        index_path = root / INDEX_FILE
        if not check_regular(index_path):  # a FIFO, a folder, a device: StoreError, never read
            raise StoreError("FAISS index file missing", path=index_path)
        expected_sha = meta.get("index_sha256")
        if expected_sha is not None and file_sha256(index_path) != expected_sha:
            raise StoreError(
                f"FAISS index file does not match the SHA-256 recorded in {META_FILE}", path=index_path
            )
        try:
            index = faiss.read_index(str(index_path))
        except (RuntimeError, MemoryError, ValueError, OSError) as e:
            raise StoreError(f"unreadable FAISS index file: {_faiss_reason(e)}", path=index_path) from None
        expected_type = {"flat": faiss.IndexFlat, "ivf": faiss.IndexIVFFlat, "hnsw": faiss.IndexHNSWFlat}[kind]
        if not isinstance(index, expected_type):
            raise StoreError(f"FAISS index is a {type(index).__name__}, metadata says {kind!r}", path=index_path)
        if index.metric_type != faiss.METRIC_INNER_PRODUCT:
            raise StoreError("FAISS index does not use the inner-product metric", path=index_path)
        if int(index.d) != dim or int(index.ntotal) != count:
            raise StoreError(
                f"FAISS index holds {index.ntotal} vectors of dimension {index.d}; {META_FILE} says {count} of {dim}",
                path=index_path,
            )
        ids, hashes = _read_id_map(root / IDS_FILE, count)

        self = cls.__new__(cls)
        self.requested_kind = str(meta.get("requested_kind", kind))
        self.hnsw_m = int(meta.get("hnsw_m") or HNSW_M)
        self.ef_construction = int(meta.get("ef_construction") or HNSW_EF_CONSTRUCTION)
        self.ef_search = int(meta.get("ef_search") or HNSW_EF_SEARCH)
        self.exact_max_rows = int(meta.get("exact_max_rows", EXACT_MAX_ROWS))
        self.nlist = None
        self.nprobe = None
        if kind == "ivf":
            self.nlist = int(index.nlist)
            self.nprobe = int(meta.get("nprobe") or default_nprobe(self.nlist))
            if index.direct_map.type == faiss.DirectMap.NoMap:
                index.make_direct_map()
        self._setup(index, kind, ids, hashes)
        return self


def _faiss_reason(error: BaseException) -> str:
    """The readable part of a FAISS C++ exception (``"Error in <function> at <file>: Error: '<cond>' failed:
    <reason>"``)."""
    text = " ".join(str(error).split())
    if "failed:" in text:
        text = text.rsplit("failed:", 1)[1].strip()
    elif "Error: " in text:
        text = text.rsplit("Error: ", 1)[1].strip()
    return text[:300] or type(error).__name__


def _read_id_map(path: Path, count: int) -> tuple[list[str], list[str | None]]:
    if not check_regular(path):  # a FIFO, a folder, a device: StoreError, never read
        raise StoreError("id map missing", path=path)
    try:
        conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
    except sqlite3.Error as e:
        raise StoreError(f"cannot open id map: {e}", path=path) from None
    try:
        rows = conn.execute("SELECT row, chunk_id, content_hash FROM ids ORDER BY row").fetchall()
    except sqlite3.Error as e:
        raise StoreError(f"corrupt id map: {e}", path=path) from None
    finally:
        conn.close()
    if len(rows) != count:
        raise StoreError(f"id map has {len(rows)} rows, the FAISS index {count} vectors", path=path)
    ids: list[str] = []
    hashes: list[str | None] = []
    for expected, (row, cid, h) in enumerate(rows):
        if row != expected or not isinstance(cid, str) or not (h is None or isinstance(h, str)):
            raise StoreError(
                f"corrupt id map row {row!r} (expected row {expected} with a text chunk_id)", path=path
            )
        ids.append(cid)
        hashes.append(h)
    return ids, hashes


