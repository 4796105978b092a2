import json
import math
from pathlib import Path

import numpy as np
import pytest
from langchain_core.documents import Document

from langchain_ragspine.errors import StoreError
from langchain_ragspine.filters import UnknownFilterFieldWarning
from langchain_ragspine.retrievers import BM25Retriever

CITIES = ["東京都の天気は晴れです", "大阪府の人口について", "データベースの設計方法", "京都の観光名所"]


# -- cases from public bug reports against LangChain's BM25Retriever ------------------------------------------------
def test_japanese_query_finds_the_right_document_first():
    r = BM25Retriever.from_texts(CITIES)
    res = r.invoke("東京")
    assert res and res[0].page_content == "東京都の天気は晴れです"


def test_unknown_term_returns_nothing():
    assert BM25Retriever.from_texts(CITIES).invoke("zzz") == []


def test_empty_corpus_and_corpus_of_empty_strings():
    assert BM25Retriever.from_documents([]).invoke("東京") == []
    assert BM25Retriever.from_texts(["", ""]).invoke("東京") == []


@pytest.mark.parametrize("query", ["", "   ", "\n\t"])
def test_empty_or_whitespace_query_returns_nothing(query):
    assert BM25Retriever.from_texts(CITIES).invoke(query) == []


# -- scoring --------------------------------------------------------------------------------------------------------
def test_scores_follow_lucene_bm25_by_hand():
    docs = ["a b", "a c c", "d"]
    r = BM25Retriever.from_texts(docs, tokenizer="whitespace", k=3, k1=1.2, b=0.75)
    n, avgdl = 3, (2 + 3 + 1) / 3

    def expected(tf, dl, df):
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        return idf * tf / (tf + 1.2 * (1 - 0.75 + 0.75 * dl / avgdl))

    got = {d.page_content: d.metadata["scores"]["bm25"] for d in r.invoke("a c")}
    assert got["a c c"] == pytest.approx(expected(1, 3, 2) + expected(2, 3, 1), rel=1e-5)
    assert got["a b"] == pytest.approx(expected(1, 2, 2), rel=1e-5)
    assert "d" not in got  # zero score is never returned


def test_term_in_every_document_still_scores_positive():
    # rank_bm25's Okapi IDF goes negative (then epsilon) for terms in over half the documents; Lucene's never does.
    r = BM25Retriever.from_texts(["x y", "x z", "x w"], tokenizer="whitespace", k=3)
    res = r.invoke("x")
    assert len(res) == 3
    assert all(d.metadata["scores"]["bm25"] > 0 for d in res)


def test_ties_break_on_chunk_id():
    docs = [Document(page_content="same text", metadata={"chunk_id": cid}) for cid in ["c#2", "a#0", "b#1"]]
    res = BM25Retriever.from_documents(docs, k=3, tokenizer="whitespace").invoke("same")
    assert [d.metadata["chunk_id"] for d in res] == ["a#0", "b#1", "c#2"]
    top1 = BM25Retriever.from_documents(docs, k=1, tokenizer="whitespace").invoke("same")
    assert [d.metadata["chunk_id"] for d in top1] == ["a#0"]


def test_scores_metadata_and_inputs_not_mutated():
    docs = [Document(page_content=t, metadata={"chunk_id": f"d#{i}"}) for i, t in enumerate(CITIES)]
    res = BM25Retriever.from_documents(docs).invoke("京都の観光")
    assert res[0].page_content == "京都の観光名所"
    s = res[0].metadata["scores"]
    assert set(s) == {"bm25", "vector", "fused", "rerank"}
    assert s["bm25"] == s["fused"] > 0 and s["vector"] is None and s["rerank"] is None
    assert all("scores" not in d.metadata for d in docs)


def test_results_sorted_and_bounded_by_k():
    texts = [f"梅雨 {'雨 ' * i}" for i in range(10)]
    r = BM25Retriever.from_texts(texts, k=4)
    res = r.invoke("梅雨 雨")
    assert len(res) == 4
    scores = [d.metadata["scores"]["bm25"] for d in res]
    assert scores == sorted(scores, reverse=True)
    assert len(r.invoke("梅雨 雨", k=7)) == 7
    for bad in (0, -1):
        with pytest.raises(ValueError, match="k must be an int >= 1"):
            r.invoke("梅雨", k=bad)


# -- filters --------------------------------------------------------------------------------------------------------
def _dept_corpus():
    near = [Document(page_content="梅雨 前線 梅雨 前線", metadata={"dept": "a", "chunk_id": f"a#{i}"}) for i in range(100)]
    far = Document(page_content="梅雨 の 話 ではない 長い 文書 です 前線", metadata={"dept": "c", "chunk_id": "c#0"})
    return near + [far]


def test_filter_restricts_candidates_before_scoring():
    r = BM25Retriever.from_documents(_dept_corpus(), k=4, tokenizer="whitespace")
    assert all(d.metadata["dept"] == "a" for d in r.invoke("梅雨 前線"))
    res = r.invoke("梅雨 前線", filter={"dept": "c"})
    assert [d.metadata["chunk_id"] for d in res] == ["c#0"]
    assert r.invoke("梅雨 前線", filter={"dept": ["c", "z"]})[0].metadata["chunk_id"] == "c#0"
    assert r.invoke("梅雨 前線", filter={"dept": "zzz"}) == []
    with pytest.warns(UnknownFilterFieldWarning, match="'missing' is in no indexed chunk"):
        assert r.invoke("梅雨 前線", filter={"missing": "x"}) == []


def test_own_filter_is_anded_with_the_call_filter():
    r = BM25Retriever.from_documents(_dept_corpus(), k=4, tokenizer="whitespace", filter={"dept": "c"})
    assert [d.metadata["dept"] for d in r.invoke("梅雨")] == ["c"]
    assert r.invoke("梅雨", filter={"dept": "a"}) == []  # a call narrows, never replaces the retriever's filter
    assert r.invoke("梅雨", filter={}) == r.invoke("梅雨")


def test_malformed_filter_and_unknown_kwargs():
    r = BM25Retriever.from_texts(CITIES)
    with pytest.raises(ValueError, match="unknown operator"):
        r.invoke("東京", filter={"x": {"like": 1}})
    with pytest.raises(TypeError, match="unexpected keyword"):
        r.invoke("東京", top_k=3)


@pytest.mark.parametrize("kw", [{"k": -1}, {"k1": -0.1}, {"b": 1.5}, {"tokenizer": "nope"}])
def test_invalid_parameters(kw):
    with pytest.raises(ValueError):
        BM25Retriever.from_texts(CITIES, **kw)


# -- LangChain drop-in compatibility --------------------------------------------------------------------------------
def test_accepts_langchain_keyword_names():
    r = BM25Retriever.from_texts(
        ["a b", "b c"], ids=["x", "y"], preprocess_func=str.split, bm25_params={"k1": 2.0, "b": 0.5}
    )
    assert (r.k1, r.b) == (2.0, 0.5)
    assert r.invoke("c")[0].id == "y"
    with pytest.raises(ValueError, match="2 texts"):
        BM25Retriever.from_texts(["a", "b"], metadatas=[{}])


async def test_ainvoke_matches_invoke():
    r = BM25Retriever.from_texts(CITIES)
    assert await r.ainvoke("大阪") == r.invoke("大阪")


# -- persistence ----------------------------------------------------------------------------------------------------
def test_save_load_round_trip_without_pickle(tmp_path: Path):
    docs = [
        Document(page_content=t, metadata={"chunk_id": f"d#{i}", "lang": "ja", "n": i}, id=f"d#{i}")
        for i, t in enumerate(CITIES)
    ]
    r = BM25Retriever.from_documents(docs, k=3, filter={"lang": "ja"})
    r.save(tmp_path / "idx")
    for npy in (tmp_path / "idx").rglob("*.npy"):
        np.load(npy, allow_pickle=False)  # raises if any array needed pickle
    assert not list((tmp_path / "idx").rglob("*.pkl"))
    r2 = BM25Retriever.load(tmp_path / "idx")
    assert (r2.k, r2.filter, r2.tokenizer) == (3, {"lang": "ja"}, "auto")
    for q in ["東京", "京都の観光", "人口", "zzz"]:
        assert r2.invoke(q) == r.invoke(q)
    assert BM25Retriever.load(tmp_path / "idx", k=1).invoke("東京") == r.invoke("東京", k=1)
    # saving again replaces the directory atomically
    BM25Retriever.from_texts(["別の 文書"]).save(tmp_path / "idx")
    assert BM25Retriever.load(tmp_path / "idx").invoke("文書")[0].page_content == "別の 文書"
    assert [p.name for p in tmp_path.iterdir()] == ["idx"]


def test_save_load_empty_index(tmp_path: Path):
    BM25Retriever.from_texts(["", ""]).save(tmp_path / "e")
    assert BM25Retriever.load(tmp_path / "e").invoke("x") == []


def test_custom_tokenizer_must_be_given_to_load(tmp_path: Path):
    tok = lambda s: s.split("|")  # noqa: E731
    BM25Retriever.from_texts(["a|b", "c|d"], tokenizer=tok).save(tmp_path / "c")
    with pytest.raises(ValueError, match="custom tokenizer"):
        BM25Retriever.load(tmp_path / "c")
    assert BM25Retriever.load(tmp_path / "c", tokenizer=tok).invoke("c|x")[0].page_content == "c|d"


def test_load_errors_name_the_path(tmp_path: Path):
    with pytest.raises(StoreError, match="retriever.json missing"):
        BM25Retriever.load(tmp_path / "nothing")
    BM25Retriever.from_texts(CITIES).save(tmp_path / "idx")
    (tmp_path / "idx" / "retriever.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(StoreError, match="unknown index format"):
        BM25Retriever.load(tmp_path / "idx")


def test_unserialisable_metadata_cannot_be_saved(tmp_path: Path):
    r = BM25Retriever.from_documents([Document(page_content="a", metadata={"obj": object()})])
    with pytest.raises(ValueError, match="not JSON-serialisable"):
        r.save(tmp_path / "x")
    assert not (tmp_path / "x").exists()


def test_regression_from_documents_honours_preprocess_func():
    # from_documents used to pass tokenizer="auto" explicitly, so LangChain's preprocess_func was ignored
    tok = lambda s: s.split("|")  # noqa: E731
    r = BM25Retriever.from_documents([Document(page_content="a b|c"), Document(page_content="d")], preprocess_func=tok)
    assert r.tokenizer is tok
    assert [d.page_content for d in r.invoke("a b")] == ["a b|c"]
    assert BM25Retriever.from_texts(["a b|c"], preprocess_func=tok).invoke("a") == []  # "a" is not a token


def test_index_matrix_equals_bm25s_own_build():
    # we build bm25s's eager score matrix with numpy (streaming, no token strings kept); it must be bm25s's matrix
    import bm25s

    from langchain_ragspine.tokenizers import cjk_tokenize

    texts = ["東京都の天気は晴れです 晴れ 晴れ", "大阪府の人口について", "", "データベースの設計方法 DB db", "京都の観光名所"]
    ours = BM25Retriever.from_texts(texts, tokenizer="cjk", k1=1.2, b=0.6)._bm25
    ref = bm25s.BM25(k1=1.2, b=0.6, method="lucene")
    ref.index([cjk_tokenize(t) for t in texts], show_progress=False)
    for term, ref_id in ref.vocab_dict.items():
        if term == "":
            continue
        our_id = ours.vocab_dict[term]
        rs, re_ = ref.scores["indptr"][ref_id], ref.scores["indptr"][ref_id + 1]
        os_, oe = ours.scores["indptr"][our_id], ours.scores["indptr"][our_id + 1]
        assert list(ours.scores["indices"][os_:oe]) == list(ref.scores["indices"][rs:re_]), term
        np.testing.assert_allclose(ours.scores["data"][os_:oe], ref.scores["data"][rs:re_], rtol=1e-6)
    assert set(ours.vocab_dict) == set(ref.vocab_dict) - {""}



def test_restricted_documents_are_never_indexed_scored_or_returned():
    docs = [
        Document(page_content="鍵 交換 手順 秘密", metadata={"chunk_id": "r#0", "sensitivity": " restricted "}),
        Document(page_content="鍵 交換 は 年 一度", metadata={"chunk_id": "p#0", "sensitivity": "PUBLIC"}),
        Document(page_content="天気", metadata={"chunk_id": "q#0"}),
    ]
    r = BM25Retriever.from_documents(docs, k=5, tokenizer="whitespace")
    assert [d.metadata["chunk_id"] for d in r.docs] == ["p#0", "q#0"]
    assert [d.metadata["chunk_id"] for d in r.invoke("鍵 交換 手順 秘密")] == ["p#0"]
    assert r.invoke("秘密") == []  # the term exists only in the restricted chunk: not even in the vocabulary
    assert "秘密" not in r._bm25.vocab_dict


def test_regression_langchain_positional_arguments_and_attributes():
    tok = lambda s: s.split()  # noqa: E731
    r = BM25Retriever.from_texts(["a b", "b c"], None, ["x", "y"], {"k1": 1.0}, tok)
    assert r.k1 == 1.0 and r.preprocess_func is tok and r.vectorizer is not None
    assert r.invoke("c")[0].id == "y"


def test_regression_saved_index_directory_mode_follows_umask(tmp_path: Path):
    import os
    import stat

    old = os.umask(0o022)
    try:
        BM25Retriever.from_texts(CITIES).save(tmp_path / "idx")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "idx").stat().st_mode) == 0o755  # was 0700 from mkdtemp


async def test_regression_ainvoke_forwards_k_and_filter():
    # LangChain's default async path does not forward keyword arguments: ainvoke(q, k=...) raised TypeError
    docs = [Document(page_content=f"梅雨 {i}", metadata={"chunk_id": f"d#{i}", "n": i}) for i in range(6)]
    r = BM25Retriever.from_documents(docs, k=4)
    assert len(await r.ainvoke("梅雨", k=2)) == 2
    assert [d.metadata["n"] for d in await r.ainvoke("梅雨", filter={"n": 5})] == [5]


# -- score_threshold (issue 27 §2): the raw BM25 score, documents below it dropped -----------------------------------
_THRESHOLD_TEXTS = ["a a a b", "a b c d", "a c d e f g", "x y"]


def _scored(docs):
    return [(d.page_content, d.metadata["scores"]["bm25"]) for d in docs]


def test_score_threshold_drops_documents_scoring_below_it():
    r = BM25Retriever.from_texts(_THRESHOLD_TEXTS, tokenizer="whitespace", k=4)
    ranked = _scored(r.invoke("a b"))
    assert [t for t, _ in ranked] == ["a a a b", "a b c d", "a c d e f g"]
    second = ranked[1][1]
    kept = BM25Retriever.from_texts(_THRESHOLD_TEXTS, tokenizer="whitespace", k=4, score_threshold=second)
    assert _scored(kept.invoke("a b")) == ranked[:2]  # a score equal to the threshold is not below it
    assert _scored(r.invoke("a b", score_threshold=second)) == ranked[:2]  # one call's own threshold
    assert _scored(kept.invoke("a b", score_threshold=0.0)) == ranked  # the call's replaces the retriever's
    assert _scored(kept.invoke("a b", k=1)) == ranked[:1]
    # compared in double precision: the next float above the (float32) score drops it, in both backends alike
    above = float(np.nextafter(second, math.inf))
    assert _scored(r.invoke("a b", score_threshold=above)) == ranked[:1]
    assert [h[1] for h in r.search("a b", score_threshold=above)] == [ranked[0][1]]


async def test_score_threshold_async_matches_sync():
    r = BM25Retriever.from_texts(_THRESHOLD_TEXTS, tokenizer="whitespace", k=4, score_threshold=0.3)
    assert await r.ainvoke("a b") == r.invoke("a b")
    assert await r.ainvoke("a b", score_threshold=5.0) == r.invoke("a b", score_threshold=5.0) == []


@pytest.mark.parametrize(("value", "error"), [(-1, ValueError), (math.inf, ValueError), (math.nan, ValueError),
                                              ("0.5", TypeError), (True, TypeError)])
def test_score_threshold_must_be_a_finite_number_at_least_zero(value, error):
    with pytest.raises(error, match="score_threshold .*raw BM25 score"):
        BM25Retriever.from_texts(CITIES, score_threshold=value)
    with pytest.raises(error, match="score_threshold"):
        BM25Retriever.from_texts(CITIES).invoke("東京", score_threshold=value)


def test_score_threshold_is_refused_by_save_and_taken_by_load(tmp_path: Path):
    r = BM25Retriever.from_texts(_THRESHOLD_TEXTS, tokenizer="whitespace", k=4, score_threshold=0.5)
    with pytest.raises(ValueError, match="does not record score_threshold"):
        r.save(tmp_path / "idx")
    assert not (tmp_path / "idx").exists()
    r.model_copy(update={"score_threshold": None}).save(tmp_path / "idx")
    assert BM25Retriever.load(tmp_path / "idx", score_threshold=0.5).invoke("a b") == r.invoke("a b")


def test_a_refused_assignment_changes_nothing_and_the_next_one_rebuilds() -> None:
    """Regression (trial of bf21278, also before issue 26): ``r.k1 = -1`` was refused only by the rebuild, after
    the value was set and the index marked unbuilt — so ``r.k1`` stayed -1, ``r.b = 5`` was then accepted, and
    ``r.b = 0.0`` no longer rebuilt the index (old scores).  A refused assignment now changes nothing, whether the
    field's check or the rebuild refuses it."""
    from langchain_core.documents import Document

    docs = [Document(page_content="梅雨 雨 台風 雪 風", metadata={"chunk_id": "a#0"}),
            Document(page_content="雨 晴れ", metadata={"chunk_id": "b#0"})]

    def scores(r: BM25Retriever) -> list[float]:
        return [d.metadata["scores"]["bm25"] for d in r.invoke("雨")]

    r = BM25Retriever.from_documents(docs)
    before = scores(r)
    for name, value in (("k1", -1.0), ("b", 5.0), ("tokenizer", "no-such-tokenizer")):
        with pytest.raises(ValueError):
            setattr(r, name, value)
        assert (r.k1, r.b, r.tokenizer) == (1.5, 0.75, "auto") and scores(r) == before
    r.b = 0.0
    assert scores(r) == scores(BM25Retriever.from_documents(docs, b=0.0)) != before
