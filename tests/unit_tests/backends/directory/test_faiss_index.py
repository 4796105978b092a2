"""FaissVectorIndex (flat / IVF / HNSW, filters before scoring, persistence)."""

from __future__ import annotations

import json
import pickle
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from langchain_ragspine.backends.directory.faiss_index import (
    AUTO_HNSW_MIN_ROWS,
    FaissVectorIndex,
    default_nlist,
    default_nprobe,
)
from langchain_ragspine.embeddings.batching import l2_normalize
from langchain_ragspine.embeddings.cache import content_hash
from langchain_ragspine.errors import StoreError

KINDS = ("flat", "ivf", "hnsw")


def _unit(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    x = rng.standard_normal((n, d)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _clustered(rng: np.random.Generator, n: int, d: int, centers: int = 50) -> tuple[np.ndarray, np.ndarray]:
    """Unit vectors around ``centers`` topics (embeddings of real text are clustered like this), plus queries."""
    c = _unit(rng, centers, d)
    x = c[rng.integers(0, centers, n)] + 0.3 * 4 / np.sqrt(d) * rng.standard_normal((n, d)).astype(np.float32)
    q = c[rng.integers(0, centers, 50)] + 0.3 * 4 / np.sqrt(d) * rng.standard_normal((50, d)).astype(np.float32)
    return l2_normalize(x), l2_normalize(q)


def _ids(n: int) -> list[str]:
    return [f"c{i:05d}" for i in range(n)]


def _brute(x: np.ndarray, q: np.ndarray, k: int, allowed: np.ndarray | None = None) -> list[int]:
    s = x @ q
    rows = np.arange(len(x)) if allowed is None else np.flatnonzero(allowed)
    return [int(r) for r in rows[np.argsort(-s[rows], kind="stable")[:k]]]


@pytest.fixture(scope="module")
def clustered() -> tuple[np.ndarray, np.ndarray]:
    return _clustered(np.random.default_rng(7), 5000, 32)


@pytest.fixture(scope="module")
def built(clustered: tuple[np.ndarray, np.ndarray]) -> dict[str, FaissVectorIndex]:
    x, _ = clustered
    return {kind: FaissVectorIndex(x, _ids(len(x)), kind=kind) for kind in KINDS}


# -- basics ---------------------------------------------------------------------------------------------------
def test_kind_resolution_and_parameters(clustered: tuple[np.ndarray, np.ndarray]) -> None:
    x, _ = clustered
    auto = FaissVectorIndex(x[:100], _ids(100))
    assert auto.kind == "flat" and auto.requested_kind == "auto"
    assert AUTO_HNSW_MIN_ROWS == 200_000
    ivf = FaissVectorIndex(x[:1000], _ids(1000), kind="ivf")
    assert ivf.kind == "ivf" and ivf.nlist == default_nlist(1000) == 1000 // 39
    assert ivf.nprobe == default_nprobe(ivf.nlist) == min(ivf.nlist, 16)
    assert default_nlist(1_000_000) == 4000 and default_nprobe(4000) == 500
    hnsw = FaissVectorIndex(x[:100], _ids(100), kind="hnsw")
    assert hnsw.faiss_index.hnsw.efConstruction == 40
    import faiss

    assert isinstance(hnsw.faiss_index, faiss.IndexHNSWFlat)
    for ix in (auto, ivf, hnsw):
        assert ix.faiss_index.metric_type == faiss.METRIC_INNER_PRODUCT
    empty = FaissVectorIndex(np.zeros((0, 8), np.float32), [], kind="ivf")
    assert empty.kind == "flat" and empty.count == 0 and empty.search(np.ones(8), 3) == []


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((np.ones((2, 3)), ["a"]), {}),
        ((np.ones((2, 3)), ["a", "b"]), {"kind": "lsh"}),
        ((np.ones(3), ["a"]), {}),
        ((np.array([[np.nan, 1.0]]), ["a"]), {}),
        ((np.ones((1, 3)), ["a"]), {"content_hashes": ["x", "y"]}),
        ((np.ones((1, 3)), ["a"]), {"hnsw_m": 1}),
    ],
)
def test_bad_construction_arguments(args: tuple, kwargs: dict) -> None:
    with pytest.raises(ValueError):
        FaissVectorIndex(*args, **kwargs)


def test_bad_search_arguments() -> None:
    ix = FaissVectorIndex(np.eye(4, dtype=np.float32), list("abcd"))
    with pytest.raises(ValueError):
        ix.search(np.ones(4), -1)
    with pytest.raises(ValueError, match="shape"):
        ix.search(np.ones(5), 2)
    with pytest.raises(ValueError, match="NaN"):
        ix.search(np.array([np.nan, 0, 0, 0]), 2)
    with pytest.raises(ValueError, match="allowed"):
        ix.search(np.ones(4), 2, allowed=np.ones(3, dtype=bool))
    with pytest.raises(ValueError, match="allowed"):
        ix.search(np.ones(4), 2, allowed=np.ones(4, dtype=int))
    assert ix.search(np.ones(4), 0) == []
    assert ix.search(np.ones(4), 2, allowed=np.zeros(4, dtype=bool)) == []


# -- exactness and recall ---------------------------------------------------------------------------------------
def test_flat_is_exact_against_numpy() -> None:
    rng = np.random.default_rng(0)
    x = _unit(rng, 2000, 48)
    ix = FaissVectorIndex(x * rng.uniform(0.5, 3.0, (2000, 1)).astype(np.float32), _ids(2000), kind="flat")
    for q in _unit(rng, 25, 48):
        hits = ix.search(q * 7.0, 10)  # neither the stored nor the query vector needs to be normalised
        assert [r for r, _ in hits] == _brute(x, q, 10)
        np.testing.assert_allclose([s for _, s in hits], np.sort(x @ q)[::-1][:10], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind", ["ivf", "hnsw"])
def test_approximate_recall_at_10(kind: str, built: dict[str, FaissVectorIndex], clustered: tuple) -> None:
    x, queries = clustered
    ix = built[kind]
    recalls = [len({r for r, _ in ix.search(q, 10)} & set(_brute(x, q, 10))) / 10 for q in queries]
    assert np.mean(recalls) >= 0.9, (kind, np.mean(recalls))


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("fraction", [0.5, 0.05])
def test_faiss_selector_restricts_before_scoring(
    kind: str, fraction: float, built: dict[str, FaissVectorIndex], clustered: tuple
) -> None:
    """exact_max_rows=0 forces FAISS's IDSelectorBitmap path: nothing outside the mask comes back, and the
    selectivity-scaled efSearch / nprobe keep recall up."""
    x, queries = clustered
    ix = built[kind]
    allowed = np.random.default_rng(3).random(len(x)) < fraction
    ix.exact_max_rows = 0
    try:
        recalls = []
        for q in queries[:20]:
            hits = ix.search(q, 10, allowed=allowed)
            assert len(hits) == 10
            assert all(allowed[r] for r, _ in hits)
            exact = _brute(x, q, 10, allowed)
            if kind == "flat":
                assert [r for r, _ in hits] == exact
            recalls.append(len({r for r, _ in hits} & set(exact)) / 10)
        assert np.mean(recalls) >= 0.9, (kind, fraction, np.mean(recalls))
    finally:
        ix.exact_max_rows = 4096


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("exact_max_rows", [0, 4096])
def test_very_selective_filter_finds_the_allowed_rows(
    kind: str, exact_max_rows: int, built: dict[str, FaissVectorIndex], clustered: tuple
) -> None:
    """Three allowed rows far from the query: every kind returns exactly them, best first (via FAISS's selector
    with the scaled search effort, or via exact scoring)."""
    x, queries = clustered
    ix = built[kind]
    q = queries[0]
    far = np.argsort(x @ q)[:3]  # the three rows least similar to the query
    allowed = np.zeros(len(x), dtype=bool)
    allowed[far] = True
    ix.exact_max_rows = exact_max_rows
    try:
        hits = ix.search(q, 4, allowed=allowed)
    finally:
        ix.exact_max_rows = 4096
    assert [r for r, _ in hits] == _brute(x, q, 4, allowed)
    assert len(hits) == 3


def test_short_faiss_answer_falls_back_to_exact(built: dict[str, FaissVectorIndex], clustered: tuple) -> None:
    x, queries = clustered
    ix = built["hnsw"]
    real = ix._index

    class Starved:  # a FAISS index that finds nothing, as a starved graph walk would
        d, ntotal = real.d, real.ntotal

        def search(self, q, k, params=None):  # noqa: ANN001
            return np.full((1, k), -np.inf, np.float32), np.full((1, k), -1, np.int64)

        def reconstruct_batch(self, ids):  # noqa: ANN001
            return real.reconstruct_batch(ids)

    allowed = np.random.default_rng(1).random(len(x)) < 0.9
    ix._index = Starved()
    try:
        hits = ix.search(queries[1], 5, allowed=allowed)
        unfiltered = ix.search(queries[1], 5)
    finally:
        ix._index = real
    assert [r for r, _ in hits] == _brute(x, queries[1], 5, allowed)
    assert [r for r, _ in unfiltered] == _brute(x, queries[1], 5)


@pytest.mark.parametrize("kind", KINDS)
def test_ties_break_on_chunk_id_even_beyond_the_fetch(kind: str) -> None:
    """40 identical vectors under shuffled chunk_ids: the k best are the k smallest chunk_ids, for the FAISS path
    (which must widen its fetch to see every tie) and the exact path alike."""
    rng = np.random.default_rng(5)
    other = _unit(rng, 60, 16)
    v = _unit(rng, 1, 16)
    x = np.vstack([np.repeat(v, 40, axis=0), other - 2 * v]).astype(np.float32)  # the 60 others point away
    names = [f"t{i:03d}" for i in range(40)] + [f"o{i:03d}" for i in range(60)]
    perm = rng.permutation(40)
    ids = [names[p] for p in perm] + names[40:]
    ix = FaissVectorIndex(x, ids, kind=kind)
    expected = sorted(names[:40])[:5]
    ix.exact_max_rows = 0
    assert [ids[r] for r, _ in ix.search(v[0], 5)] == expected
    allowed = np.ones(100, dtype=bool)
    allowed[0] = False
    assert [ids[r] for r, _ in ix.search(v[0], 5, allowed=allowed)] == sorted(n for i, n in enumerate(ids[:40]) if i)[:5]
    ix.exact_max_rows = 4096
    assert [ids[r] for r, _ in ix.search(v[0], 5, allowed=allowed)] == sorted(n for i, n in enumerate(ids[:40]) if i)[:5]


def test_zero_query_and_zero_rows() -> None:
    x = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0]], dtype=np.float32)
    ix = FaissVectorIndex(x, ["c", "b", "a"])
    np.testing.assert_array_equal(ix.vectors([0]), [[0, 0, 0]])
    assert ix.search(np.zeros(3), 3) == [(2, 0.0), (1, 0.0), (0, 0.0)]  # all 0: chunk_id order
    hits = ix.search(np.array([1.0, 0, 0]), 3)
    assert hits[0] == (1, pytest.approx(1.0)) and hits[1:] == [(2, 0.0), (0, 0.0)]


# -- persistence ----------------------------------------------------------------------------------------------
@pytest.fixture
def no_pickle(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*a: object, **k: object) -> None:
        raise AssertionError("pickle used")

    for name in ("load", "loads", "Unpickler"):
        monkeypatch.setattr(pickle, name, boom)


@pytest.mark.parametrize("kind", KINDS)
def test_save_load_round_trip(kind: str, tmp_path: Path, no_pickle: None) -> None:
    rng = np.random.default_rng(11)
    x = _unit(rng, 600, 24)
    hashes = [content_hash(f"text {i}") for i in range(600)]
    ix = FaissVectorIndex(x, _ids(600), content_hashes=hashes, kind=kind, ef_search=80)
    ix.save(tmp_path / "vec")
    assert sorted(p.name for p in (tmp_path / "vec").iterdir()) == ["ids.sqlite", "index.faiss", "vector_index.json"]
    assert [p.name for p in tmp_path.iterdir()] == ["vec"]  # no temporary directory left behind
    for p in (tmp_path / "vec").iterdir():
        assert not p.read_bytes().startswith(b"\x80"), f"{p.name} looks like a pickle"
    meta = json.loads((tmp_path / "vec" / "vector_index.json").read_text())
    assert meta["dim"] == 24 and meta["count"] == 600 and meta["kind"] == kind and meta["format"] == "ragspine-faiss/1"
    with sqlite3.connect(tmp_path / "vec" / "ids.sqlite") as conn:
        assert conn.execute("SELECT row, chunk_id, content_hash FROM ids WHERE row = 7").fetchone() == (7, "c00007", hashes[7])
    back = FaissVectorIndex.load(tmp_path / "vec")
    assert (back.kind, back.count, back.dim, back.ef_search) == (kind, 600, 24, 80)
    assert back.chunk_ids == ix.chunk_ids and back.content_hashes == ix.content_hashes
    np.testing.assert_array_equal(back.vectors(), ix.vectors())
    allowed = rng.random(600) < 0.3
    for q in _unit(rng, 10, 24):
        assert back.search(q, 8) == ix.search(q, 8)
        assert back.search(q, 8, allowed=allowed) == ix.search(q, 8, allowed=allowed)


def test_save_replaces_atomically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    x = np.eye(3, dtype=np.float32)
    FaissVectorIndex(x, list("abc")).save(tmp_path / "vec")
    newer = FaissVectorIndex(np.eye(4, dtype=np.float32), list("abcd"))

    def half_written(directory: Path) -> None:
        (Path(directory) / "index.faiss").write_bytes(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(newer, "write_files", half_written)
    with pytest.raises(OSError, match="disk full"):
        newer.save(tmp_path / "vec")
    assert FaissVectorIndex.load(tmp_path / "vec").count == 3
    assert [p.name for p in tmp_path.iterdir()] == ["vec"]


def _saved(tmp_path: Path) -> Path:
    FaissVectorIndex(_unit(np.random.default_rng(2), 50, 8), _ids(50), kind="hnsw").save(tmp_path / "vec")
    return tmp_path / "vec"


@pytest.mark.parametrize(
    "damage",
    ["truncate", "garbage", "flip", "garbage_unchecked", "missing"],
)
def test_corrupt_index_file_raises_store_error_naming_it(tmp_path: Path, damage: str) -> None:
    root = _saved(tmp_path)
    p = root / "index.faiss"
    data = p.read_bytes()
    if damage == "truncate":
        p.write_bytes(data[: len(data) // 3])
    elif damage == "garbage":
        p.write_bytes(b"not a faiss index" * 20)
    elif damage == "flip":
        p.write_bytes(data[:200] + bytes(b ^ 0xFF for b in data[200:260]) + data[260:])
    elif damage == "garbage_unchecked":  # no checksum recorded: FAISS's own reader must fail cleanly
        meta = json.loads((root / "vector_index.json").read_text())
        del meta["index_sha256"]
        (root / "vector_index.json").write_text(json.dumps(meta))
        p.write_bytes(data[: len(data) // 2])
    else:
        p.unlink()
    with pytest.raises(StoreError) as err:
        FaissVectorIndex.load(root)
    assert err.value.path == str(p)


def test_mismatched_or_corrupt_id_map_raises_store_error_naming_it(tmp_path: Path) -> None:
    root = _saved(tmp_path)
    ids = root / "ids.sqlite"
    with sqlite3.connect(ids) as conn:
        conn.execute("DELETE FROM ids WHERE row = 49")
    with pytest.raises(StoreError, match="49 rows") as err:
        FaissVectorIndex.load(root)
    assert err.value.path == str(ids)
    with sqlite3.connect(ids) as conn:
        conn.execute("INSERT INTO ids VALUES (50, 'x', NULL)")
    with pytest.raises(StoreError, match="row") as err:
        FaissVectorIndex.load(root)
    assert err.value.path == str(ids)
    ids.write_bytes(b"garbage" * 100)
    with pytest.raises(StoreError) as err:
        FaissVectorIndex.load(root)
    assert err.value.path == str(ids)


def test_bad_meta_raises_store_error(tmp_path: Path) -> None:
    root = _saved(tmp_path)
    meta_path = root / "vector_index.json"
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({**meta, "count": 51}))
    with pytest.raises(StoreError, match="51") as err:
        FaissVectorIndex.load(root)
    assert err.value.path == str(root / "index.faiss")
    meta_path.write_text(json.dumps({**meta, "kind": "flat"}))
    with pytest.raises(StoreError, match="IndexHNSWFlat"):
        FaissVectorIndex.load(root)
    meta_path.write_text("{not json")
    with pytest.raises(StoreError) as err:
        FaissVectorIndex.load(root)
    assert err.value.path == str(meta_path)
    with pytest.raises(StoreError, match="no vector index"):
        FaissVectorIndex.load(tmp_path / "nowhere")
