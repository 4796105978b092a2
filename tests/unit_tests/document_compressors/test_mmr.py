"""MMRCompressor: maximal marginal relevance over embeddings, or over token sets and retrieval scores."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_ragspine.document_compressors.mmr import (
    MMRCompressor,
    jaccard,
    mmr_select,
    relevance_from_scores,
)


def _doc(i: int, text: str, score: float | None = None, **md: Any) -> Document:
    meta: dict[str, Any] = {"chunk_id": f"d{i}#0", "doc_id": f"d{i}", **md}
    if score is not None:
        meta["scores"] = {"bm25": score, "vector": None, "fused": score, "rerank": None}
    return Document(page_content=text, metadata=meta)


class TableEmbeddings(Embeddings):
    """Vectors from a table the test controls; counts calls."""

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table
        self.calls = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        return [self.table[t] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self.calls += 1
        return self.table[text]


def test_mmr_select_prefers_the_different_one():
    rel = [1.0, 0.95, 0.5]
    sim = np.array([[1, 0.99, 0.0], [0.99, 1, 0.0], [0.0, 0.0, 1]])
    assert mmr_select(rel, lambda i, j: sim[i, j], k=2, lambda_mult=0.5) == [0, 2]
    assert mmr_select(rel, lambda i, j: sim[i, j], k=3, lambda_mult=1.0) == [0, 1, 2]  # pure relevance
    assert mmr_select([], lambda i, j: 0.0, k=3) == []


def test_mmr_select_ties_go_to_the_earlier_position():
    assert mmr_select([0.5, 0.5, 0.5], lambda i, j: 0.0, k=3) == [0, 1, 2]


def test_jaccard():
    assert jaccard({"a", "b"}, {"b", "c"}) == pytest.approx(1 / 3)
    assert jaccard(set(), set()) == 0.0


def test_relevance_from_scores_uses_the_first_complete_channel_else_rank():
    docs = [_doc(1, "a", 10.0), _doc(2, "b", 6.0), _doc(3, "c", 2.0)]
    assert relevance_from_scores(docs) == pytest.approx([1.0, 0.6, 0.2])
    docs[1].metadata["scores"]["rerank"] = 0.9  # only one document has a rerank score: not used
    assert relevance_from_scores(docs) == pytest.approx([1.0, 0.6, 0.2])
    signed = [_doc(1, "a", 1.0), _doc(2, "b", -1.0), _doc(3, "c", 0.0)]  # negative scores: min-max
    assert relevance_from_scores(signed) == pytest.approx([1.0, 0.0, 0.5])
    assert relevance_from_scores([_doc(1, "a"), _doc(2, "b"), _doc(3, "c"), _doc(4, "d")]) == [1.0, 0.75, 0.5, 0.25]
    assert relevance_from_scores([_doc(1, "a", 3.0), _doc(2, "b", 3.0)]) == [1.0, 1.0]
    assert relevance_from_scores([]) == []


def test_without_embeddings_a_near_duplicate_gives_way():
    docs = [
        _doc(1, "梅雨は北海道と小笠原諸島を除く日本でみられる。", 10.0),
        _doc(2, "梅雨は北海道と小笠原諸島を除く日本でみられる現象。", 9.5),  # the overlapping neighbour
        _doc(3, "台風は夏から秋にかけて日本に来る。", 7.0),
    ]
    out = MMRCompressor(k=2).compress_documents(docs, "梅雨")
    assert [d.metadata["chunk_id"] for d in out] == ["d1#0", "d3#0"]
    assert out[0] is docs[0]  # the input documents, unchanged
    plain = MMRCompressor(k=2, lambda_mult=1.0).compress_documents(docs, "梅雨")
    assert [d.metadata["chunk_id"] for d in plain] == ["d1#0", "d2#0"]


TABLE = {"q": [1.0, 0.0, 0.0], "a": [0.9, 0.1, 0.0], "a2": [0.89, 0.12, 0.0], "b": [0.6, 0.0, 0.8], "far": [0, 0, 1.0]}


def test_with_embeddings_and_query_relevance_the_retrieval_order_is_ignored():
    emb = TableEmbeddings(TABLE)
    docs = [_doc(1, "far"), _doc(2, "a"), _doc(3, "a2"), _doc(4, "b")]
    out = MMRCompressor(embeddings=emb, relevance="query", k=2, lambda_mult=0.5).compress_documents(docs, "q")
    assert [d.page_content for d in out] == ["a", "b"]
    plain = MMRCompressor(embeddings=emb, relevance="query", k=2, lambda_mult=1.0).compress_documents(docs, "q")
    assert [d.page_content for d in plain] == ["a", "a2"]


def test_with_embeddings_and_retrieval_relevance_the_first_stage_ranking_leads():
    emb = TableEmbeddings({**TABLE, "b": [0.0, 1.0, 0.0]})
    docs = [_doc(1, "far", 10.0), _doc(2, "a", 9.0), _doc(3, "a2", 8.9), _doc(4, "b", 5.0)]
    out = MMRCompressor(embeddings=emb, k=3).compress_documents(docs, "q")
    # "far" stays first (the retriever ranked it first); "a2", a near-copy of "a", gives way to "b"
    assert [d.page_content for d in out] == ["far", "a", "b"]
    assert emb.calls == 1  # embed_documents only: the query is not embedded


def test_restricted_are_dropped_and_empty_input_makes_no_call():
    emb = TableEmbeddings({"q": [1.0, 0.0], "a": [1.0, 0.0]})
    mmr = MMRCompressor(embeddings=emb, k=3)
    assert mmr.compress_documents([], "q") == []
    assert mmr.compress_documents([_doc(1, "secret", sensitivity="RESTRICTED")], "q") == []
    assert emb.calls == 0
    out = mmr.compress_documents([_doc(1, "secret", sensitivity="RESTRICTED"), _doc(2, "a")], "q")
    assert [d.page_content for d in out] == ["a"]


def test_bad_arguments():
    with pytest.raises(ValueError, match="lambda_mult"):
        MMRCompressor(lambda_mult=1.5)
    with pytest.raises(TypeError, match="lambda_mult"):
        MMRCompressor(lambda_mult="0.5")
    with pytest.raises(ValueError, match="k"):
        MMRCompressor(k=0)
    with pytest.raises(ValueError, match="embeddings"):
        MMRCompressor(relevance="query")
    with pytest.raises(ValueError):
        MMRCompressor(relevance="cosine")


async def test_async_matches_sync():
    emb = TableEmbeddings({"q": [1.0, 0.0, 0.0], "a": [0.9, 0.1, 0.0], "a2": [0.89, 0.12, 0.0], "b": [0.6, 0.0, 0.8]})
    docs = [_doc(2, "a"), _doc(3, "a2"), _doc(4, "b")]
    for mmr in (MMRCompressor(embeddings=emb, k=2), MMRCompressor(embeddings=emb, relevance="query", k=2), MMRCompressor(k=2)):
        assert await mmr.acompress_documents(docs, "q") == mmr.compress_documents(docs, "q")


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=0, max_size=12), st.integers(1, 15), st.floats(0, 1))
def test_mmr_select_returns_distinct_positions_starting_with_the_most_relevant(rel, k, lam):
    out = mmr_select(rel, lambda i, j: 1.0 if i == j else 0.3, k, lam)
    assert len(out) == min(k, len(rel)) and len(set(out)) == len(out)
    if rel:
        assert rel[out[0]] == max(rel)


def test_regression_a_tiny_lambda_still_picks_the_most_relevant_first():
    # before: 5e-324 * 0.75 == 5e-324 * 1.0 (underflow), so the tie went to position 0, the less relevant one
    assert mmr_select([0.75, 1.0], lambda i, j: 0.3, 1, 5e-324) == [1]
    assert mmr_select([0.75, 1.0], lambda i, j: 0.3, 1, 0.0) == [1]
