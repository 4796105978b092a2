"""MaxScore top-k over the BM25 score matrix (issue 31): the pruned top k equals exhaustive scoring — ids, scores,
order, ties — for random matrices, queries (terms repeated), k, filters and thresholds, and on a real index."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

import langchain_ragspine.backends.directory.bm25_topk as topk_module
from langchain_ragspine.backends.directory.bm25_topk import exhaustive_scores, term_maxima, top_k
from langchain_ragspine.documents import top_rows
from langchain_ragspine.retrievers import BM25Retriever


def _matrix(rng: np.random.Generator, n_docs: int, n_terms: int):
    """A CSC score matrix with skewed terms: each term's document frequency and contribution scale differ, and
    contributions come from a small set of values, so equal scores (ties) are frequent."""
    data, indices, indptr = [], [], [0]
    for _ in range(n_terms):
        docs = np.sort(rng.choice(n_docs, size=int(rng.integers(0, n_docs + 1)), replace=False))
        scale = rng.choice([0.05, 0.5, 1.0, 4.0, 20.0])
        indices += docs.tolist()
        data += (rng.choice([0.25, 0.5, 0.75, 1.0, 1.5], size=docs.size) * scale).tolist()
        indptr.append(len(indices))
    return (np.array(data, dtype=np.float32), np.array(indices, dtype=np.int32), np.array(indptr, dtype=np.int64))


@st.composite
def cases(draw):
    n_docs = draw(st.integers(1, 60))
    n_terms = draw(st.integers(1, 25))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    data, indices, indptr = _matrix(rng, n_docs, n_terms)
    query = draw(st.lists(st.integers(0, n_terms - 1), min_size=0, max_size=12))  # repeats allowed
    k = draw(st.integers(1, 12))
    tie_rank = rng.permutation(n_docs).astype(np.int64)
    mask = rng.random(n_docs) < draw(st.sampled_from([0.2, 0.6, 0.95])) if draw(st.booleans()) else None
    threshold = draw(st.one_of(st.none(), st.sampled_from([0.1, 0.5, 1.0, 3.0])))
    return data, indices, indptr, n_docs, query, k, tie_rank, mask, threshold


def _expected(data, indices, indptr, n_docs, query, k, tie_rank, mask, threshold):
    scores = exhaustive_scores(data, indices, indptr, n_docs, query)
    ok = scores > 0
    if threshold is not None:
        ok &= scores >= np.float64(threshold)
    if mask is not None:
        ok &= mask
    return top_rows(scores, ok, k, tie_rank)


@settings(max_examples=500, deadline=None)
@given(cases())
def test_pruned_top_k_equals_exhaustive_scoring(case):
    data, indices, indptr, n_docs, query, k, tie_rank, mask, threshold = case
    maxima = term_maxima(data, indptr)
    want = _expected(data, indices, indptr, n_docs, query, k, tie_rank, mask, threshold)
    for min_postings in (0, None):  # pruned wherever it can be, and the default (small lists: exhaustive)
        got = top_k(data, indices, indptr, n_docs, query, k=k, tie_rank=tie_rank, maxima=maxima, mask=mask,
                    threshold=threshold, min_postings=min_postings)
        assert got == want


def test_term_maxima_with_empty_terms():
    data = np.array([1.0, 3.0, 2.0, 0.5], dtype=np.float32)
    indptr = np.array([0, 0, 2, 2, 3, 4], dtype=np.int64)  # terms 0 and 2 have no postings
    assert term_maxima(data, indptr).tolist() == [0.0, 3.0, 0.0, 2.0, 0.5]
    assert term_maxima(np.zeros(0, dtype=np.float32), np.array([0, 0])).tolist() == [0.0]


def test_pruning_happens_and_reads_only_the_candidates(monkeypatch):
    # one rare, strong term and a common, weak one: the weak one cannot lift a document without the rare term into
    # the top 2, so it is not essential and only the rare term's documents are candidates
    n = 1000
    rare_docs = np.array([3, 500, 900], dtype=np.int32)
    data = np.concatenate([np.array([9.0, 8.0, 7.0], dtype=np.float32), np.full(n, 0.01, dtype=np.float32)])
    indices = np.concatenate([rare_docs, np.arange(n, dtype=np.int32)])
    indptr = np.array([0, 3, 3 + n], dtype=np.int64)
    chosen = []
    real = topk_module._candidates
    monkeypatch.setattr(topk_module, "_candidates", lambda *a, **kw: chosen.append(real(*a, **kw)) or chosen[-1])
    got = top_k(data, indices, indptr, n, [1, 0], k=2, tie_rank=np.arange(n), maxima=term_maxima(data, indptr),
                min_postings=0)
    assert [d for d, _ in got] == [3, 500]
    # the weak term (1,000 postings) is not essential, and 900 (7 + at most 0.01) cannot reach θ = 8: two candidates
    assert len(chosen) == 1 and chosen[0][0].tolist() == [3, 500]
    assert got == _expected(data, indices, indptr, n, [1, 0], 2, np.arange(n), None, None)
    # a threshold no document can reach: nothing, without scoring
    assert top_k(data, indices, indptr, n, [1, 0], k=2, tie_rank=np.arange(n), maxima=term_maxima(data, indptr),
                 threshold=100.0, min_postings=0) == []


def test_exhaustive_scores_are_bm25s_own_bit_for_bit():
    words = "東京 大阪 京都 名古屋 札幌 福岡 神戸 横浜 仙台 広島".split()
    rng = np.random.default_rng(0)
    docs = [Document(page_content=" ".join(rng.choice(words, size=rng.integers(1, 30))), metadata={"chunk_id": f"c{i}"})
            for i in range(300)]
    retriever = BM25Retriever.from_documents(docs, tokenizer="whitespace")
    bm25 = retriever.vectorizer
    s = bm25.scores
    for query in ("東京 東京 大阪", "京都", "札幌 福岡 神戸 横浜 仙台 広島 東京"):
        ids = bm25.get_tokens_ids(query.split())
        ours = exhaustive_scores(s["data"], s["indices"], s["indptr"], s["num_docs"], ids)
        theirs = np.asarray(bm25.get_scores_from_ids(ids), dtype=np.float32)
        assert ours.tobytes() == theirs.tobytes()


@pytest.mark.parametrize("k", [1, 3, 10, 50])
def test_pruned_top_k_on_a_real_index_equals_the_retrievers_exhaustive_order(k):
    rng = np.random.default_rng(1)
    vocab = [f"w{i}" for i in range(200)]
    weights = 1.0 / np.arange(1, 201)  # Zipf: a few words in most documents, most words rare
    weights /= weights.sum()
    docs = [Document(page_content=" ".join(rng.choice(vocab, size=40, p=weights)), metadata={"chunk_id": f"c{i:04d}"})
            for i in range(2000)]
    retriever = BM25Retriever.from_documents(docs, tokenizer="whitespace")
    s = retriever.vectorizer.scores
    maxima = term_maxima(s["data"], s["indptr"])
    ranks = np.arange(len(docs))
    for _ in range(30):
        query = list(rng.choice(vocab, size=rng.integers(1, 15), p=weights)) + list(rng.choice(vocab, size=2))
        ids = retriever.vectorizer.get_tokens_ids(query)
        want = _expected(s["data"], s["indices"], s["indptr"], s["num_docs"], ids, k, ranks, None, None)
        for min_postings in (0, None):
            got = top_k(s["data"], s["indices"], s["indptr"], s["num_docs"], ids, k=k, tie_rank=ranks, maxima=maxima,
                        min_postings=min_postings)
            assert got == want
