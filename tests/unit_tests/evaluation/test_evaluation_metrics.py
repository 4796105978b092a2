"""Metrics: hand-computed cases for every metric, and agreement with ranx on random runs (property test)."""

from __future__ import annotations

import math
import warnings

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from langchain_ragspine.evaluation.metrics import (
    answer_recall_at_k,
    dcg_at_k,
    dedupe,
    first_answer_rank,
    hit_rate_at_k,
    mean,
    mrr_at_k,
    ndcg_at_k,
    recall_at_k,
)

L2 = math.log2

# a: grade 3, b: grade 2, d: grade 1, c: judged non-relevant (0), x/y: unjudged
QRELS = {"a": 3, "b": 2, "c": 0, "d": 1}
RANKED = ["c", "a", "x", "d", "b", "y"]


# ---------------------------------------------------------------------------------------------- hand-computed


def test_recall_by_hand():
    # relevant = {a, b, d} (c has grade 0)
    assert recall_at_k(RANKED, QRELS, 1) == 0.0
    assert recall_at_k(RANKED, QRELS, 2) == pytest.approx(1 / 3)
    assert recall_at_k(RANKED, QRELS, 4) == pytest.approx(2 / 3)
    assert recall_at_k(RANKED, QRELS, 5) == 1.0
    assert recall_at_k(RANKED, QRELS, 100) == 1.0


def test_mrr_by_hand():
    assert mrr_at_k(RANKED, QRELS, 1) == 0.0  # c is judged but not relevant
    assert mrr_at_k(RANKED, QRELS, 2) == 0.5
    assert mrr_at_k(RANKED, QRELS, 10) == 0.5
    assert mrr_at_k(["x", "y", "z", "d"], QRELS, 4) == 0.25
    assert mrr_at_k(["x", "y", "z", "d"], QRELS, 3) == 0.0


def test_hit_rate_by_hand():
    assert hit_rate_at_k(RANKED, QRELS, 1) == 0.0
    assert hit_rate_at_k(RANKED, QRELS, 2) == 1.0
    assert hit_rate_at_k([], QRELS, 5) == 0.0


def test_graded_ndcg_by_hand():
    # ranks:   1    2    3    4    5    6
    # ids:     c    a    x    d    b    y
    # gains:   0    3    0    1    2    0
    dcg5 = 0 / L2(2) + 3 / L2(3) + 0 / L2(4) + 1 / L2(5) + 2 / L2(6)
    # ideal: the judged positive grades sorted desc: 3, 2, 1
    idcg5 = 3 / L2(2) + 2 / L2(3) + 1 / L2(4)
    assert dcg5 == pytest.approx(3.0971715, abs=1e-7)
    assert idcg5 == pytest.approx(4.7618595, abs=1e-7)
    assert ndcg_at_k(RANKED, QRELS, 5) == pytest.approx(dcg5 / idcg5, abs=1e-12)
    assert ndcg_at_k(RANKED, QRELS, 5) == pytest.approx(0.6504122, abs=1e-7)
    # cut at 3: DCG@3 = 3/log2(3); IDCG@3 = 3 + 2/log2(3) + 1/2
    assert ndcg_at_k(RANKED, QRELS, 3) == pytest.approx((3 / L2(3)) / (3 + 2 / L2(3) + 0.5), abs=1e-12)
    # cut at 2: IDCG@2 uses only the two best grades
    assert ndcg_at_k(RANKED, QRELS, 2) == pytest.approx((3 / L2(3)) / (3 + 2 / L2(3)), abs=1e-12)
    assert ndcg_at_k(RANKED, QRELS, 1) == 0.0
    # the ideal ranking scores 1 at every k
    for k in (1, 2, 3, 10):
        assert ndcg_at_k(["a", "b", "d"], QRELS, k) == pytest.approx(1.0)
    assert dcg_at_k([3, 2, 1], 2) == pytest.approx(3 + 2 / L2(3))


def test_duplicates_after_first_occurrence_are_ignored():
    ranked = ["x", "x", "x", "a", "a", "b"]
    assert dedupe(ranked) == ["x", "a", "b"]
    assert mrr_at_k(ranked, QRELS, 2) == 0.5  # k counts distinct ids: top 2 = [x, a]
    assert recall_at_k(ranked, QRELS, 3) == pytest.approx(2 / 3)
    assert ndcg_at_k(ranked, QRELS, 2) == pytest.approx((3 / L2(3)) / (3 + 2 / L2(3)))


def test_no_relevant_documents_give_zero():
    qrels = {"a": 0, "b": -1}
    for fn in (recall_at_k, mrr_at_k, ndcg_at_k, hit_rate_at_k):
        assert fn(["a", "b"], qrels, 2) == 0.0
        assert fn(["a", "b"], {}, 2) == 0.0


@pytest.mark.parametrize("fn", [recall_at_k, mrr_at_k, ndcg_at_k, hit_rate_at_k])
def test_k_is_validated(fn):
    for bad in (0, -1):
        with pytest.raises(ValueError, match=rf"^k must be an int >= 1, got {bad}$"):
            fn(RANKED, QRELS, bad)
    for bad in (1.5, True, "3"):
        with pytest.raises(TypeError, match=r"^k must be an int >= 1, got "):
            fn(RANKED, QRELS, bad)
    with pytest.raises(ValueError):
        answer_recall_at_k([], doc_id="a", answers=["x"], k=0)


def _doc(text: str, doc_id: str) -> Document:
    return Document(page_content=text, metadata={"doc_id": doc_id})


def test_answer_recall_by_hand():
    docs = [
        _doc("Kenya is in Africa.", "other"),  # right answer, wrong document
        _doc("The zebra lives on the plains.", "zebra"),  # right document, no answer
        _doc("The zebra lives in Kenya.", "zebra"),  # hit at rank 3
    ]
    assert first_answer_rank(docs, "zebra", ["Kenya"]) == 3
    assert [answer_recall_at_k(docs, doc_id="zebra", answers=["Kenya"], k=k) for k in (1, 2, 3, 10)] == [
        0.0,
        0.0,
        1.0,
        1.0,
    ]
    assert first_answer_rank(docs, "zebra", ["Tanzania", "Kenya"]) == 3  # any answer counts
    assert first_answer_rank(docs, "zebra", ["kenya"]) is None  # verbatim: case matters
    assert first_answer_rank(docs, "zebra", [""]) is None  # an empty answer never matches
    assert first_answer_rank([], "zebra", ["Kenya"]) is None


def test_answer_recall_normalises_nfkc_on_both_sides():
    # full-width Latin and digits, half-width katakana
    doc = _doc("ＩＳＯ／ＴＳ　１６９４９はｶﾀｶﾅで書く", "iso")
    assert first_answer_rank([doc], "iso", ["ISO/TS 16949"]) == 1
    assert first_answer_rank([doc], "iso", ["カタカナ"]) == 1
    assert first_answer_rank([_doc("ISO/TS 16949", "iso")], "iso", ["ＩＳＯ／ＴＳ　１６９４９"]) == 1
    # doc ids are compared as strings
    assert first_answer_rank([Document(page_content="x 42", metadata={"doc_id": 7})], "7", ["42"]) == 1


def test_mean():
    assert mean([1.0, 0.0, 0.5]) == 0.5
    assert mean(x for x in [2.0]) == 2.0
    assert math.isnan(mean([]))


# ------------------------------------------------------------------------------------------------ ranx


@pytest.fixture(scope="module")
def ranx():
    """ranx, imported once per module (numba JIT-compiles its metrics on first use)."""
    ranx = pytest.importorskip("ranx", reason="ranx is not installed (pip install ranx)")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        qrels = ranx.Qrels.from_dict({"q": {"a": 1}})
        run = ranx.Run.from_dict({"q": {"a": 1.0}})
        ranx.evaluate(qrels, run, ["recall@1", "mrr@1", "ndcg@1", "hit_rate@1"])  # warm the JIT
    return ranx


DOC_IDS = [f"d{i:02d}" for i in range(30)]
KS = (1, 3, 5, 10, 30)


@st.composite
def _collection(draw):
    """~20 queries, each with 1+ judgements (grades 0-3) and a run over up to 30 distinct doc ids."""
    n = draw(st.integers(min_value=1, max_value=20))
    qrels: dict[str, dict[str, int]] = {}
    runs: dict[str, list[str]] = {}
    for i in range(n):
        qid = f"q{i:02d}"
        qrels[qid] = draw(
            st.dictionaries(
                st.sampled_from(DOC_IDS), st.integers(min_value=0, max_value=3), min_size=1, max_size=8
            )
        )
        runs[qid] = draw(st.lists(st.sampled_from(DOC_IDS), unique=True, max_size=30))
    return qrels, runs


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(_collection())
def test_metrics_agree_with_ranx(ranx, collection):
    qrels, runs = collection
    assume(any(runs.values()))  # ranx.Run.from_dict cannot build a run in which every query is empty
    # distinct scores (ranx sorts by score; ties would make its order unspecified); empty runs are allowed
    ranx_run = ranx.Run.from_dict(
        {q: {d: float(len(r) - i) for i, d in enumerate(r)} for q, r in runs.items()}
    )
    ranx_qrels = ranx.Qrels.from_dict(qrels)
    ours = {"recall": recall_at_k, "mrr": mrr_at_k, "ndcg": ndcg_at_k, "hit_rate": hit_rate_at_k}
    names = [f"{m}@{k}" for m in ours for k in KS]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba's uint64 -> int64 cast warning
        per_query = ranx.evaluate(ranx_qrels, ranx_run, names, return_mean=False)
        means = ranx.evaluate(ranx_qrels, ranx_run, names)
    qids = sorted(qrels)  # ranx orders queries by id
    for metric, fn in ours.items():
        for k in KS:
            name = f"{metric}@{k}"
            mine = [fn(runs[q], qrels[q], k) for q in qids]
            # ranx averages over every query, including those with no relevant document (scored 0)
            assert abs(mean(mine) - float(means[name])) <= 1e-9, name
            for q, a, b in zip(qids, mine, per_query[name], strict=True):
                assert abs(a - float(b)) <= 1e-9, (name, q, runs[q], qrels[q])
