"""EmbeddingCache (SQLite vectors keyed by model, chunk_id and content hash), embedding in batches, model keys."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings

from langchain_ragspine.backends.directory.embedding_cache import EmbeddingCache
from langchain_ragspine.embeddings import HashingEmbeddings, PrefixedEmbeddings
from langchain_ragspine.embeddings.batching import embed_in_batches, l2_normalize
from langchain_ragspine.embeddings.cache import CachedEmbeddings, content_hash, model_key_for
from langchain_ragspine.errors import StoreError


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


def test_cached_embeddings_embed_only_misses(tmp_path: Path) -> None:
    emb = CountingEmbeddings()
    chunks = [(f"d{i}#0", f"文書{i}の本文です") for i in range(10)] + [("d0#0", "文書0の本文です")]  # one duplicate
    with EmbeddingCache(tmp_path / "c.sqlite") as cache:
        cached = CachedEmbeddings(emb, cache, model_key="counting", batch_size=3, progress=False)
        first = cached.embed_chunks(chunks)
        assert first.shape == (11, 32) and first.dtype == np.float32
        np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, rtol=1e-5)
        np.testing.assert_array_equal(first[0], first[10])
        assert cached.last_embedded == 10 and len(emb.embedded) == 10  # the duplicate key is embedded once
        assert [len(b) for b in emb.batches] == [3, 3, 3, 1]
        np.testing.assert_allclose(first, embed_in_batches(emb, [t for _, t in chunks], progress=False), rtol=1e-6)
        emb.batches.clear()
        cached = CachedEmbeddings(emb, cache, model_key="counting", progress=False)
        again = cached.embed_chunks(chunks)
        assert cached.last_embedded == 0 and cached.last_cached == 11 and emb.embedded == []
        np.testing.assert_array_equal(again, first)
        changed = list(chunks)
        changed[3] = ("d3#0", "書き換えた本文")  # new text, same chunk_id
        changed[4] = ("d4#renamed", chunks[4][1])  # same text, new chunk_id
        cached.embed_chunks(changed)
        assert sorted(emb.embedded) == sorted(["書き換えた本文", chunks[4][1]]) and cached.last_embedded == 2
        emb.batches.clear()
        CachedEmbeddings(emb, cache, model_key="another-model", progress=False).embed_chunks(chunks[:2])
        assert len(emb.embedded) == 2  # the key includes the model
        keep = {(c, content_hash(t)) for c, t in changed}
        assert cache.prune("counting", keep) == 2  # the old d3#0 and d4#0 rows
        assert cache.count("counting") == 10 and cache.count("another-model") == 2


def test_finished_batches_survive_a_crash(tmp_path: Path) -> None:
    chunks = [(f"d{i}#0", f"text number {i}") for i in range(10)]
    crashing = CountingEmbeddings(fail_on_batch=3)
    with EmbeddingCache(tmp_path / "c.sqlite") as cache, pytest.raises(RuntimeError, match="crashed"):
        CachedEmbeddings(crashing, cache, model_key="m", batch_size=4, progress=False).embed_chunks(chunks)
    emb = CountingEmbeddings()
    with EmbeddingCache(tmp_path / "c.sqlite") as cache:
        cached = CachedEmbeddings(emb, cache, model_key="m", batch_size=4, progress=False)
        cached.embed_chunks(chunks)
        assert cached.last_embedded == 2 and emb.embedded == ["text number 8", "text number 9"]


def test_cache_dimension_conflict_is_a_store_error(tmp_path: Path) -> None:
    with EmbeddingCache(tmp_path / "c.sqlite") as cache:
        CachedEmbeddings(HashingEmbeddings(16), cache, model_key="same-key").embed_chunks([("a", "x")])
        with pytest.raises(StoreError, match="model_key"):
            CachedEmbeddings(HashingEmbeddings(32), cache, model_key="same-key").embed_chunks([("a", "x"), ("b", "y")])


def test_dimension_conflict_is_found_when_no_requested_chunk_is_cached(tmp_path: Path) -> None:
    # the warm-up asks only for misses (chunks whose key the cache lacks), so the dimension of the key's other
    # vectors comes from cache.dim(): a second model under the same key no longer adds vectors of another dimension
    with EmbeddingCache(tmp_path / "c.sqlite") as cache:
        CachedEmbeddings(HashingEmbeddings(16), cache, model_key="same-key").embed_chunks([("a", "x")])
        assert cache.dim("same-key") == 16 and cache.dim("other") is None
        with pytest.raises(StoreError, match="model_key"):
            CachedEmbeddings(HashingEmbeddings(32), cache, model_key="same-key").embed_chunks([("b", "y")])
        assert cache.count("same-key") == 1
        CachedEmbeddings(HashingEmbeddings(32), cache, model_key="other").embed_chunks([("b", "y")])  # own key: fine


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


# -- CachedEmbeddings as an Embeddings ----------------------------------------------------------------------------
def test_cached_embeddings_is_an_embeddings_that_embeds_each_text_once(tmp_path: Path) -> None:
    emb = CountingEmbeddings()
    with EmbeddingCache(tmp_path / "c.sqlite") as cache:
        cached = CachedEmbeddings(emb, cache, progress=False)
        assert isinstance(cached, Embeddings) and cached.model_key == model_key_for(emb)
        texts = ["梅雨は六月", "typhoon season", "梅雨は六月"]
        first = cached.embed_documents(texts)
        assert emb.embedded == ["梅雨は六月", "typhoon season"] and cached.last_embedded == 2
        # the model's vectors (CountingEmbeddings doubles them: not normalised), in float32 precision
        expected = np.asarray(emb.embed_documents(texts[:2]), dtype=np.float32)
        np.testing.assert_array_equal(np.asarray(first, dtype=np.float32), expected[[0, 1, 0]])
        emb.batches.clear()
        assert cached.embed_documents(texts) == first and emb.embedded == [] and cached.last_cached == 3
        assert cache.get_many(cached.model_key, [("", content_hash("typhoon season"))])  # keyed by the empty chunk_id
        assert cached.embed_documents([]) == [] and cached.embed_chunks([]).shape == (0, 0)
        assert cached.embed_query("梅雨") == emb.embed_query("梅雨") and emb.embedded == []  # queries: the model's


async def test_cached_embeddings_async_query_is_the_models(tmp_path: Path) -> None:
    emb = HashingEmbeddings(16)
    with EmbeddingCache(tmp_path / "c.sqlite") as cache:
        cached = CachedEmbeddings(emb, cache)
        assert await cached.aembed_query("雨") == emb.embed_query("雨")
        assert await cached.aembed_documents(["雨"]) == cached.embed_documents(["雨"])


def test_read_only_cache_embeds_misses_without_storing_them(tmp_path: Path) -> None:
    path = tmp_path / "c.sqlite"
    with EmbeddingCache(path) as cache:
        CachedEmbeddings(HashingEmbeddings(16), cache).embed_chunks([("a#0", "x")])
    emb = CountingEmbeddings(16)
    with EmbeddingCache(path, read_only=True) as ro:
        cached = CachedEmbeddings(emb, ro, model_key="HashingEmbeddings(size=16)")
        out = cached.embed_chunks([("a#0", "x"), ("b#0", "y")])
        assert out.shape == (2, 16) and cached.last_embedded == 1 and cached.last_cached == 1
        assert emb.embedded == ["y"] and ro.count() == 1  # the miss was embedded, not stored


@pytest.mark.parametrize(("bad", "error"), [(0, ValueError), (-1, ValueError), (2.0, TypeError), (True, TypeError),
                                            ("8", TypeError)])
def test_cached_embeddings_rejects_a_bad_batch_size(tmp_path: Path, bad: object, error: type) -> None:
    with EmbeddingCache(tmp_path / "c.sqlite") as cache, pytest.raises(error, match="^batch_size must be an int >= 1"):
        CachedEmbeddings(HashingEmbeddings(16), cache, batch_size=bad)  # type: ignore[arg-type]


def test_regression_get_many_reads_only_the_chunks_asked_for(tmp_path) -> None:
    """Issue 27 §2: ``get_many`` matched ``(chunk_id, content_hash) IN (VALUES …)``, which SQLite searches by
    ``model_key`` alone — every vector of the model read for each call, so a vector-store write of 10 records
    took ~0.4 s at 100,000 cached vectors.  The work (SQLite VM steps) for 10 keys must not grow with the cache."""
    import numpy as np

    from langchain_ragspine.backends.directory.embedding_cache import EmbeddingCache

    def steps(n: int) -> int:
        with EmbeddingCache(tmp_path / f"e{n}.sqlite") as cache:
            cache.put_many("m", [(f"c{i}", "h", np.ones(8, np.float32)) for i in range(n)])
            calls = [0]

            def tick() -> int:
                calls[0] += 1
                return 0

            cache._connection().set_progress_handler(tick, 100)
            found = cache.get_many("m", [(f"c{i}", "h") for i in range(0, n, n // 10)] + [("c1", "other")])
            assert len(found) == 10
            return calls[0]

    assert steps(20_000) < 3 * steps(200) + 20
