"""backends/directory/bm25_index.py: the BM25 index built from streamed texts through bm25s's ``build_index_from_ids`` hook,
and its files."""

from __future__ import annotations

import json
from pathlib import Path

import bm25s
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from langchain_ragspine.backends.directory.bm25_index import (
    TermPostings,
    _postings_bm25_class,
    _stable_order,
    build_bm25_index,
    load_bm25_index,
    save_bm25_index,
)
from langchain_ragspine.tokenizers import cjk_tokenize

TEXTS = ["東京都の天気は晴れです 晴れ 晴れ", "大阪府の人口について", "", "データベースの設計方法 DB db", "京都の観光名所"]


def test_texts_are_read_once_and_tokenized_one_at_a_time():
    seen: list[str] = []

    def tokenize(text: str) -> list[str]:
        seen.append(text)
        return cjk_tokenize(text)

    index = build_bm25_index(iter(TEXTS), tokenize, k1=1.5, b=0.75)  # a one-pass iterator is enough
    assert seen == TEXTS
    assert isinstance(index, bm25s.BM25) and index.scores["num_docs"] == len(TEXTS)


def test_the_index_scores_as_bm25s_own_lucene_build():
    ours = build_bm25_index(TEXTS, cjk_tokenize, k1=1.2, b=0.6)
    ref = bm25s.BM25(k1=1.2, b=0.6, method="lucene")
    ref.index([cjk_tokenize(t) for t in TEXTS], show_progress=False)
    for query in ["東京の天気", "db 設計", "京都 観光 晴れ"]:
        tokens = cjk_tokenize(query)
        np.testing.assert_allclose(
            ours.get_scores_from_ids(ours.get_tokens_ids(tokens)),
            ref.get_scores_from_ids(ref.get_tokens_ids(tokens)),
            rtol=1e-6,
        )
    assert "" not in ours.vocab_dict  # no empty token: the vocabulary is the corpus's terms only
    assert ours.unique_token_ids_set == set(range(len(ours.vocab_dict))) and ours.nonoccurrence_array is None


def test_no_token_at_all_gives_no_index():
    assert build_bm25_index(["", "  "], cjk_tokenize, k1=1.5, b=0.75) is None
    assert build_bm25_index([], cjk_tokenize, k1=1.5, b=0.75) is None


def test_term_postings_hold_counts_not_tokens():
    postings = TermPostings()
    postings.add(["a", "b", "a"])
    postings.add([])
    postings.add(["b"])
    assert postings.vocab == {"a": 0, "b": 1} and postings.num_docs == 3 and postings.ids is postings
    scores = postings.lucene_scores(k1=1.5, b=0.75)
    assert list(scores["indptr"]) == [0, 1, 3]  # term a: doc 0; term b: docs 0 and 2
    assert list(scores["indices"]) == [0, 0, 2] and scores["num_docs"] == 3
    assert scores["data"].dtype == np.float32 and scores["indices"].dtype == np.int32


def test_the_subclass_leaves_other_corpora_and_methods_to_bm25s():
    cls = _postings_bm25_class()
    tokens = [cjk_tokenize(t) for t in TEXTS]
    mine, ref = cls(method="lucene"), bm25s.BM25(method="lucene")
    mine.index(tokens, show_progress=False)  # token lists: bm25s's own build_index_from_ids
    ref.index(tokens, show_progress=False)
    for key in ("data", "indices", "indptr"):
        np.testing.assert_array_equal(mine.scores[key], ref.scores[key])
    postings = TermPostings()
    postings.add(["a"])
    with pytest.raises(ValueError, match="lucene"):
        cls(method="bm25+").index(postings, create_empty_token=False, show_progress=False)


def test_save_and_load_round_trip(tmp_path: Path):
    docs = [Document(page_content=t, metadata={"chunk_id": f"d#{i}"}, id=f"d#{i}") for i, t in enumerate(TEXTS)]
    index = build_bm25_index(TEXTS, cjk_tokenize, k1=1.2, b=0.6)
    save_bm25_index(tmp_path / "idx", index, docs, tokenizer="cjk", k=3, k1=1.2, b=0.6, filter={"lang": "ja"})
    config = json.loads((tmp_path / "idx" / "retriever.json").read_text("utf-8"))
    assert list(config) == [
        "format", "k", "k1", "b", "tokenizer", "tokenizer_version", "filter", "num_docs", "empty_index"
    ]
    saved = load_bm25_index(tmp_path / "idx")
    assert saved.docs == docs and saved.tokenizer == "cjk"
    assert saved.settings == {"k": 3, "k1": 1.2, "b": 0.6, "filter": {"lang": "ja"}}
    for key in ("data", "indices", "indptr"):
        np.testing.assert_array_equal(saved.index.scores[key], index.scores[key])
    save_bm25_index(tmp_path / "empty", None, [], tokenizer="cjk", k=3, k1=1.2, b=0.6, filter=None)
    assert load_bm25_index(tmp_path / "empty").index is None
    assert not (tmp_path / "empty" / "bm25s").exists()


# -- the blocked / spilled build gives exactly the matrix of the previous one-shot build (issue 12) -------------
def _previous_lucene_scores(docs: list[list[str]], *, k1: float, b: float) -> dict[str, np.ndarray]:
    """The matrix as TermPostings built it before blocks and spilling (commit d10fa7a), as a reference."""
    from collections import Counter

    vocab: dict[str, int] = {}
    terms: list[int] = []
    tfs: list[int] = []
    doc_len: list[int] = []
    doc_terms: list[int] = []
    for tokens in docs:
        counts = Counter(tokens)
        terms.extend(vocab.setdefault(t, len(vocab)) for t in counts)
        tfs.extend(counts.values())
        doc_len.append(len(tokens))
        doc_terms.append(len(counts))
    n_docs = len(doc_len)
    term = np.asarray(terms, dtype=np.int32)
    tf = np.asarray(tfs, dtype=np.float32)
    doc = np.repeat(np.arange(n_docs, dtype=np.int32), np.asarray(doc_terms, dtype=np.int64))
    lengths = np.asarray(doc_len, dtype=np.float32)
    df = np.bincount(term, minlength=len(vocab))
    idf = np.log(1.0 + (n_docs - df + 0.5) / (df + 0.5)).astype(np.float32)
    norm = (k1 * (1.0 - b + b * lengths / lengths.mean())).astype(np.float32)
    score = idf[term] * tf / (tf + norm[doc])
    order = np.argsort(term, kind="stable")
    return {
        "data": score[order].astype(np.float32, copy=False),
        "indices": doc[order],
        "indptr": np.concatenate([[0], np.cumsum(df)]).astype(np.int64),
    }


def _synthetic_corpus(n: int, seed: int) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(300)]
    # Zipf-like: a few very common terms, many rare ones; some empty documents
    return [
        [words[min(int(x), 299)] for x in rng.zipf(1.3, size=int(rng.integers(0, 60)))] for _ in range(n)
    ]


@pytest.mark.parametrize(("memory_postings", "block_postings"), [(None, None), (0, 1), (50, 7), (0, 10_000)])
def test_blocked_and_spilled_builds_equal_the_previous_build_exactly(memory_postings, block_postings):
    docs = _synthetic_corpus(400, seed=3)
    ref = _previous_lucene_scores(docs, k1=1.2, b=0.6)
    with TermPostings(memory_postings=memory_postings, block_postings=block_postings) as postings:
        for tokens in docs:
            postings.add(tokens)
        got = postings.lucene_scores(k1=1.2, b=0.6)
        spilled = postings._spill is not None
    assert postings._spill is None  # the context manager deleted the temporary file
    assert spilled == (memory_postings == 0 or memory_postings == 50)
    for key in ("data", "indices", "indptr"):
        assert got[key].dtype == ref[key].dtype
        np.testing.assert_array_equal(got[key], ref[key])  # bit for bit, not approximately
    assert got["num_docs"] == len(docs)


def test_spilled_index_scores_queries_as_the_in_memory_one():
    texts = ["".join(chr(0x4E00 + (i * 7 + j) % 50) for j in range(i % 40)) for i in range(300)]
    in_memory = build_bm25_index(texts, cjk_tokenize, k1=1.5, b=0.75)
    spilled = build_bm25_index(texts, cjk_tokenize, k1=1.5, b=0.75, memory_postings=0)
    for query in ["一丁", "七万丈三", texts[77][:5]]:
        ids = in_memory.get_tokens_ids(cjk_tokenize(query))
        assert ids == spilled.get_tokens_ids(cjk_tokenize(query))
        np.testing.assert_array_equal(in_memory.get_scores_from_ids(ids), spilled.get_scores_from_ids(ids))


def test_term_postings_reject_bad_sizes():
    with pytest.raises(ValueError, match="memory_postings"):
        TermPostings(memory_postings=-1)
    with pytest.raises(ValueError, match="block_postings"):
        TermPostings(block_postings=0)


def test_a_vocabulary_past_two_to_the_sixteen_terms_equals_the_previous_build_exactly():
    """Term ids of 2**16 and more take the two-digit path of the radix sort that orders each block term-major."""
    rng = np.random.default_rng(7)
    docs = [[f"t{int(x)}" for x in rng.integers(0, 150_000, size=int(rng.integers(0, 80)))] for _ in range(3000)]
    ref = _previous_lucene_scores(docs, k1=1.5, b=0.75)
    with TermPostings(block_postings=20_000) as postings:  # several blocks, each with ids on both sides of 2**16
        for tokens in docs:
            postings.add(tokens)
        assert len(postings.vocab) > 1 << 16
        got = postings.lucene_scores(k1=1.5, b=0.75)
    for key in ("data", "indices", "indptr"):
        np.testing.assert_array_equal(got[key], ref[key])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 2**31 - 1) | st.integers(0, 5), max_size=300))
def test_stable_order_is_numpys_stable_argsort(keys: list[int]):
    arr = np.asarray(keys, dtype=np.int32)
    np.testing.assert_array_equal(_stable_order(arr), np.argsort(arr, kind="stable"))
