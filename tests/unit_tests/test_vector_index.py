"""FaissVectorIndex (flat / IVF / HNSW, filters before scoring, persistence) and EmbeddingCache."""

from __future__ import annotations

import json
import pickle
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings

from langchain_ragspine.embeddings import HashingEmbeddings, PrefixedEmbeddings
from langchain_ragspine.errors import StoreError
from langchain_ragspine.stores import EmbeddingCache, FaissVectorIndex, content_hash, model_key_for
from langchain_ragspine.stores.vector_index import (
    AUTO_HNSW_MIN_ROWS,
    default_nlist,
    default_nprobe,
    embed_in_batches,
    l2_normalize,
)

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
def test_content_hash_is_sha256_of_utf8() -> None:
    import hashlib

    assert content_hash("梅雨") == hashlib.sha256("梅雨".encode()).hexdigest()
    assert content_hash("a") != content_hash("a ")
    assert len(content_hash("")) == 64


def test_l2_normalize_keeps_zero_rows_zero() -> None:
    out = l2_normalize(np.array([[3.0, 4.0], [0.0, 0.0]]))
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [[0.6, 0.8], [0.0, 0.0]], rtol=1e-6)


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


# -- embedding cache ------------------------------------------------------------------------------------------
class CountingEmbeddings(Embeddings):
    """HashingEmbeddings that records every batch it embeds and can fail on a given batch number."""

    def __init__(self, size: int = 32, fail_on_batch: int | None = None) -> None:
        self.inner = HashingEmbeddings(size)
        self.batches: list[list[str]] = []
        self.fail_on_batch = fail_on_batch

    @property
    def embedded(self) -> list[str]:
        return [t for b in self.batches for t in b]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if self.fail_on_batch is not None and len(self.batches) + 1 == self.fail_on_batch:
            raise RuntimeError("model crashed")
        self.batches.append(list(texts))
        return [[2.0 * v for v in row] for row in self.inner.embed_documents(texts)]  # not normalised

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


def test_cache_schema_and_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "emb" / "cache.sqlite"
    with EmbeddingCache(path) as cache:
        cache.put_many("m", [("a#0", "h1", np.array([1.0, -2.5, 3.0])), ("a#1", "h2", np.array([0.5, 0.0, 0.0]))])
        got = cache.get_many("m", [("a#0", "h1"), ("a#1", "h2"), ("a#1", "other"), ("b#0", "h1")])
        assert set(got) == {("a#0", "h1"), ("a#1", "h2")}
        np.testing.assert_array_equal(got[("a#0", "h1")], np.array([1.0, -2.5, 3.0], np.float32))
        assert got[("a#0", "h1")].dtype == np.float32
        assert cache.get_many("other-model", [("a#0", "h1")]) == {}
        assert cache.count() == 2 and cache.count("m") == 2
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        cols = [(r[1], r[2]) for r in conn.execute("PRAGMA table_info(embeddings)")]
        assert cols == [
            ("model_key", "TEXT"), ("chunk_id", "TEXT"), ("content_hash", "TEXT"), ("dim", "INTEGER"), ("vector", "BLOB")
        ]
        pk = [r[1] for r in sorted(conn.execute("PRAGMA table_info(embeddings)"), key=lambda r: r[5]) if r[5]]
        assert pk == ["model_key", "chunk_id", "content_hash"]
        dim, blob = conn.execute("SELECT dim, vector FROM embeddings WHERE chunk_id = 'a#0'").fetchone()
        assert dim == 3 and blob == np.array([1.0, -2.5, 3.0], "<f4").tobytes()
    with EmbeddingCache(path, read_only=True) as ro:
        assert len(ro.get_many("m", [("a#0", "h1")])) == 1
        with pytest.raises(StoreError, match="read_only"):
            ro.put_many("m", [("x", "y", np.ones(3))])


def test_cache_rejects_other_databases_and_bad_rows(tmp_path: Path) -> None:
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    with pytest.raises(StoreError, match="not an embedding cache") as err:
        EmbeddingCache(other)
    assert err.value.path == str(other)
    (tmp_path / "junk.sqlite").write_bytes(b"junk" * 100)
    with pytest.raises(StoreError):
        EmbeddingCache(tmp_path / "junk.sqlite")
    with pytest.raises(StoreError, match="does not exist"):
        EmbeddingCache(tmp_path / "missing.sqlite", read_only=True)
    path = tmp_path / "c.sqlite"
    with EmbeddingCache(path) as cache:
        with pytest.raises(ValueError):
            cache.put_many("m", [("a", "h", np.array([np.nan]))])
    with sqlite3.connect(path) as conn:
        conn.execute("INSERT INTO embeddings VALUES ('m', 'a', 'h', 4, ?)", (b"\x00" * 8,))
    with EmbeddingCache(path) as cache, pytest.raises(StoreError, match="corrupt cached vector"):
        cache.get_many("m", [("a", "h")])


def test_embed_with_cache_embeds_only_misses(tmp_path: Path) -> None:
    emb = CountingEmbeddings()
    chunks = [(f"d{i}#0", f"文書{i}の本文です") for i in range(10)] + [("d0#0", "文書0の本文です")]  # one duplicate
    with EmbeddingCache(tmp_path / "c.sqlite") as cache:
        first = cache.embed_with_cache(emb, "counting", chunks, batch_size=3, progress=False)
        assert first.shape == (11, 32) and first.dtype == np.float32
        np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, rtol=1e-5)
        np.testing.assert_array_equal(first[0], first[10])
        assert cache.last_embedded == 10 and len(emb.embedded) == 10  # the duplicate key is embedded once
        assert [len(b) for b in emb.batches] == [3, 3, 3, 1]
        np.testing.assert_allclose(first, embed_in_batches(emb, [t for _, t in chunks], progress=False), rtol=1e-6)
        emb.batches.clear()
        again = cache.embed_with_cache(emb, "counting", chunks, progress=False)
        assert cache.last_embedded == 0 and cache.last_cached == 11 and emb.embedded == []
        np.testing.assert_array_equal(again, first)
        changed = list(chunks)
        changed[3] = ("d3#0", "書き換えた本文")  # new text, same chunk_id
        changed[4] = ("d4#renamed", chunks[4][1])  # same text, new chunk_id
        cache.embed_with_cache(emb, "counting", changed, progress=False)
        assert sorted(emb.embedded) == sorted(["書き換えた本文", chunks[4][1]]) and cache.last_embedded == 2
        emb.batches.clear()
        cache.embed_with_cache(emb, "another-model", chunks[:2], progress=False)
        assert len(emb.embedded) == 2  # the key includes the model
        keep = {(c, content_hash(t)) for c, t in changed}
        assert cache.prune("counting", keep) == 2  # the old d3#0 and d4#0 rows
        assert cache.count("counting") == 10 and cache.count("another-model") == 2


def test_finished_batches_survive_a_crash(tmp_path: Path) -> None:
    chunks = [(f"d{i}#0", f"text number {i}") for i in range(10)]
    crashing = CountingEmbeddings(fail_on_batch=3)
    with EmbeddingCache(tmp_path / "c.sqlite") as cache, pytest.raises(RuntimeError, match="crashed"):
        cache.embed_with_cache(crashing, "m", chunks, batch_size=4, progress=False)
    emb = CountingEmbeddings()
    with EmbeddingCache(tmp_path / "c.sqlite") as cache:
        cache.embed_with_cache(emb, "m", chunks, batch_size=4, progress=False)
        assert cache.last_embedded == 2 and emb.embedded == ["text number 8", "text number 9"]


def test_cache_dimension_conflict_is_a_store_error(tmp_path: Path) -> None:
    with EmbeddingCache(tmp_path / "c.sqlite") as cache:
        cache.embed_with_cache(HashingEmbeddings(16), "same-key", [("a", "x")], progress=False)
        with pytest.raises(StoreError, match="model_key"):
            cache.embed_with_cache(HashingEmbeddings(32), "same-key", [("a", "x"), ("b", "y")], progress=False)


def test_embed_validates_model_output() -> None:
    class Short(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [[1.0, 0.0]] * (len(texts) - 1)

        def embed_query(self, text: str) -> list[float]:
            return [1.0, 0.0]

    with pytest.raises(ValueError, match="shape"):
        embed_in_batches(Short(), ["a", "b"], progress=False)
    with pytest.raises(ValueError, match="batch_size"):
        embed_in_batches(Short(), ["a"], batch_size=0)


def test_model_key_for() -> None:
    assert model_key_for(HashingEmbeddings(64)) == "HashingEmbeddings(size=64)"
    assert model_key_for(HashingEmbeddings(64)) != model_key_for(HashingEmbeddings(128))
    wrapped = PrefixedEmbeddings(HashingEmbeddings(64), preset="e5")
    assert model_key_for(wrapped) == (
        "PrefixedEmbeddings(query_prefix='query: ', document_prefix='passage: ', inner=HashingEmbeddings(size=64))"
    )
    assert model_key_for(CountingEmbeddings(32)) == "CountingEmbeddings(inner=HashingEmbeddings(size=32))"
