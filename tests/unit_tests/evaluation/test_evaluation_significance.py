"""Paired significance: bootstrap intervals and randomisation p-values checked by hand, against ranx, and on results."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from langchain_ragspine.evaluation import (
    EvalResult,
    compare_markdown,
    compare_paired,
    paired_bootstrap_interval,
    paired_markdown,
    paired_randomization_test,
)
from langchain_ragspine.evaluation.significance import paired_results, significance_metrics

# ------------------------------------------------------------------------------------------ hand computations


def test_bootstrap_interval_by_hand_two_questions():
    # d = [0, 1]: the 2**2 resamples (0,0) (0,1) (1,0) (1,1) have means 0, .5, .5, 1.
    # numpy's linear quantile of [0, .5, .5, 1] at 0.025 sits at position 0.075 → 0.0375, at 0.975 at 2.925 → 0.9625.
    diff, lo, hi = paired_bootstrap_interval([0, 0], [0, 1])
    assert (diff, lo, hi) == pytest.approx((0.5, 0.0375, 0.9625))


def test_bootstrap_interval_by_hand_three_questions():
    # d = [0, 0, 3]: over the 27 resamples the mean is the number of times question 3 is drawn:
    # 8 x 0, 12 x 1, 6 x 2, 1 x 3.  Position 0.025 * 26 = 0.65 → 0; position 0.975 * 26 = 25.35 → 2 + 0.35 * (3 - 2).
    diff, lo, hi = paired_bootstrap_interval([0, 0, 0], [0, 0, 3])
    assert (diff, lo, hi) == pytest.approx((1.0, 0.0, 2.35))


def test_randomization_by_hand():
    # d = [2, 1, 0.5], mean 3.5 / 3: of the 8 sign vectors only (+,+,+) and (-,-,-) reach |sum| = 3.5 → p = 2 / 8
    assert paired_randomization_test([0, 0, 0], [2, 1, 0.5]) == pytest.approx(0.25)
    # d = [1, 0, 1, -1], |sum| = 1: every sign vector gives an odd sum of three ±1, |sum| >= 1 → p = 1
    assert paired_randomization_test([0, 1, 0, 1], [1, 1, 1, 0]) == pytest.approx(1.0)
    # identical systems: p = 1 and a zero-width interval at 0
    same = [1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0]
    assert paired_randomization_test(same, same) == 1.0
    assert paired_bootstrap_interval(same, same) == (0.0, 0.0, 0.0)


def test_monte_carlo_bootstrap_agrees_with_exact_enumeration():
    d = np.array([0.31, -0.2, 0.55, 0.0, 0.12, 0.7])
    zero = np.zeros_like(d)
    exact = paired_bootstrap_interval(zero, d, n_resamples=6**6)  # all 46,656 index tuples
    sampled = paired_bootstrap_interval(zero, d, n_resamples=20_000, seed=3)
    assert sampled[0] == exact[0] == pytest.approx(d.mean())
    assert sampled[1] == pytest.approx(exact[1], abs=0.02)
    assert sampled[2] == pytest.approx(exact[2], abs=0.02)


def test_monte_carlo_randomization_agrees_with_exact_enumeration():
    rng = np.random.default_rng(7)
    a, b = rng.random(12), rng.random(12)
    exact = paired_randomization_test(a, b, n_resamples=2**12)  # all 4,096 sign vectors
    sampled = paired_randomization_test(a, b, n_resamples=4_000, seed=1)
    assert 0.05 < exact < 0.95  # an informative case
    assert sampled == pytest.approx(exact, abs=0.03)


def test_bootstrap_interval_matches_normal_approximation_for_many_questions():
    # For n = 4,000 binary differences the bootstrap distribution of the mean is close to normal:
    # mean ± 1.96 · sd(d) / sqrt(n) (sd with ddof=0, the bootstrap's plug-in variance).
    rng = np.random.default_rng(11)
    a = (rng.random(4000) < 0.9).astype(float)
    b = a.copy()
    flip = rng.random(4000) < 0.04
    b[flip] = 1.0 - b[flip]
    d = b - a
    diff, lo, hi = paired_bootstrap_interval(a, b)
    half = 1.96 * d.std() / math.sqrt(d.size)
    assert diff == pytest.approx(d.mean())
    assert lo == pytest.approx(diff - half, abs=0.1 * half)
    assert hi == pytest.approx(diff + half, abs=0.1 * half)


def test_randomization_agrees_with_ranx_fisher_test():
    ranx_tests = pytest.importorskip("ranx.statistical_tests")
    rng = np.random.default_rng(1)
    a = (rng.random(400) < 0.7).astype(float)
    b = a.copy()
    flip = rng.random(400) < 0.08
    b[flip] = 1.0 - b[flip]
    theirs, _ = ranx_tests.fisher_randomization_test(a, b, 20_000, 0.05, 42)
    ours = paired_randomization_test(a, b, n_resamples=20_000)
    assert 0.02 < theirs < 0.9  # not a degenerate case
    assert ours == pytest.approx(theirs, abs=0.015)  # two Monte Carlo estimates of one p-value (sd ≈ 0.004 each)


# ------------------------------------------------------------------------------------------ properties


def test_seeded_and_shared_resamples():
    rng = np.random.default_rng(2)
    a, b = rng.random((300, 3)), rng.random((300, 3))
    first = paired_bootstrap_interval(a, b, seed=9)
    again = paired_bootstrap_interval(a, b, seed=9)
    other = paired_bootstrap_interval(a, b, seed=10)
    assert all(np.array_equal(x, y) for x, y in zip(first, again, strict=True))
    assert not np.array_equal(first[1], other[1])
    # a 2-D call is the 1-D call per column, with the same resamples
    for j in range(3):
        col = paired_bootstrap_interval(a[:, j], b[:, j], seed=9)
        assert col == pytest.approx(tuple(float(x[j]) for x in first), abs=1e-12)
        assert paired_randomization_test(a[:, j], b[:, j], seed=9) == pytest.approx(
            paired_randomization_test(a, b, seed=9)[j]
        )


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from([0.0, 0.5, 1.0]), st.sampled_from([0.0, 0.5, 1.0])), min_size=1, max_size=40),
    st.integers(0, 3),
)
def test_interval_properties(pairs, seed):
    a = [x for x, _ in pairs]
    b = [y for _, y in pairs]
    d = np.subtract(b, a)
    diff, lo, hi = paired_bootstrap_interval(a, b, n_resamples=300, seed=seed)
    assert d.min() - 1e-12 <= lo <= hi <= d.max() + 1e-12
    assert diff == pytest.approx(d.mean())
    # swapping the systems mirrors the interval and keeps the p-value
    diff2, lo2, hi2 = paired_bootstrap_interval(b, a, n_resamples=300, seed=seed)
    assert (diff2, lo2, hi2) == pytest.approx((-diff, -hi, -lo), abs=1e-12)
    p = paired_randomization_test(a, b, n_resamples=300, seed=seed)
    assert 0.0 < p <= 1.0
    assert paired_randomization_test(b, a, n_resamples=300, seed=seed) == pytest.approx(p)


@pytest.mark.parametrize(
    ("a", "b", "kw", "match"),
    [
        ([1, 0], [1, 0, 1], {}, "same shape"),
        ([], [], {}, "non-empty"),
        ([1.0, math.nan], [1.0, 0.0], {}, "finite"),
        ([1, 0], [0, 1], {"n_resamples": 0}, "n_resamples"),
        ([1, 0], [0, 1], {"confidence": 1.0}, "confidence"),
    ],
)
def test_bad_input(a, b, kw, match):
    with pytest.raises(ValueError, match=match):
        paired_bootstrap_interval(a, b, **kw)


# ------------------------------------------------------------------------------------------ on EvalResults


def _result(name: str, hits: dict[str, tuple[float, float | None]]) -> EvalResult:
    per_query = [
        {"id": qid, "answer_recall@1": r1, "answer_recall@5": 1.0, "ndcg@10": nd} for qid, (r1, nd) in hits.items()
    ]
    agg = {
        "answer_recall@1": float(np.mean([r for r, _ in hits.values()])),
        "answer_recall@5": 1.0,
        "ndcg@10": float(np.mean([n for _, n in hits.values() if n is not None])),
        "mrr@10": 0.5,
    }
    return EvalResult(name=name, config={}, per_query=per_query, aggregate=agg, latency_ms={"p50": 1.0})


def test_compare_paired_pairs_by_question_id_and_skips_unjudged():
    n = 60
    base = _result("bm25", {f"q{i}": (float(i % 3 != 0), 0.5) for i in range(n)})
    # the other system finds every answer; records in reverse order; q0's nDCG is unjudged
    other_hits = {f"q{i}": (1.0, None if i == 0 else 0.6) for i in reversed(range(n))}
    other = _result("hybrid", other_hits)
    assert significance_metrics(base) == ["answer_recall@1", "answer_recall@5", "ndcg@10"]
    x, y = paired_results(base, other, "answer_recall@1")
    assert x.tolist() == [float(i % 3 != 0) for i in range(n)] and y.tolist() == [1.0] * n
    comps = {c.metric: c for c in compare_paired(base, other)}
    r1 = comps["answer_recall@1"]
    assert r1.n == n and r1.difference == pytest.approx(1 / 3) and r1.significant and r1.p_value < 0.001
    assert r1.baseline == "bm25" and r1.other == "hybrid"
    assert r1.cell().startswith("+0.3333 [+") and "n.s." not in r1.cell()
    r5 = comps["answer_recall@5"]
    assert (r5.difference, r5.low, r5.high, r5.p_value) == (0.0, 0.0, 0.0, 1.0) and not r5.significant
    assert r5.cell() == "+0.0000 [+0.0000, +0.0000] n.s."
    nd = comps["ndcg@10"]
    assert nd.n == n - 1 and nd.difference == pytest.approx(0.1)
    assert r1.to_dict()["significant"] is True


def test_compare_paired_refuses_different_questions():
    a = _result("a", {"q1": (1.0, 1.0), "q2": (0.0, 0.0)})
    b = _result("b", {"q1": (1.0, 1.0), "q3": (0.0, 0.0)})
    with pytest.raises(ValueError, match="not evaluated on the same questions"):
        compare_paired(a, b)


def test_compare_markdown_adds_paired_table():
    n = 50
    bm25 = _result("bm25", {f"q{i}": (float(i % 2 == 0), 0.5) for i in range(n)})
    hybrid = _result("hybrid", {f"q{i}": (float(i % 2 == 0 or i < 20), 0.5) for i in range(n)})
    vector = _result("vector", {f"q{i}": (float(i % 2 == 0), 0.5) for i in range(n)})
    text = compare_markdown([hybrid, bm25, vector], baseline="bm25")
    head, _, paired = text.partition("\n\n")
    assert head == compare_markdown([hybrid, bm25, vector], significance=False).rstrip("\n")
    assert "Paired difference to **bm25** on the same questions (n = 50)" in paired
    assert "| metric | hybrid − bm25 | vector − bm25 |" in paired
    row = next(line for line in paired.splitlines() if line.startswith("| answer_recall@1 |"))
    hyb, vec = row.split(" | ")[1:3]
    assert hyb.startswith("+0.2000 [+") and "n.s." not in hyb  # 10 more hits of 50, never fewer
    assert vec.startswith("+0.0000 [+0.0000, +0.0000] p=1 n.s.")
    assert "mrr@10" not in paired  # only answer recall@k and nDCG@10 are compared
    # the default baseline is the first result; an unknown one is an error; one result has no paired table
    assert "Paired difference to **hybrid**" in compare_markdown([hybrid, bm25])
    with pytest.raises(ValueError, match="baseline 'nope'"):
        compare_markdown([hybrid, bm25], baseline="nope")
    assert "Paired" not in compare_markdown([bm25])
    other_questions = _result("other", {"x": (1.0, 1.0)})
    assert "| answer_recall@1 | not paired |" in paired_markdown(bm25, [other_questions])


def test_significant_needs_interval_and_test_to_agree():
    # three questions, d = [1, 1, 0]: the exact bootstrap interval excludes 0, the exact randomisation p is 2/4
    a, b = [0.0, 0.0, 1.0], [1.0, 1.0, 1.0]
    diff, lo, hi = paired_bootstrap_interval(a, b)
    p = paired_randomization_test(a, b)
    assert lo > 0 and p == pytest.approx(0.5)
    ok = compare_paired(_result("a", {"q1": (0.0, 1.0), "q2": (0.0, 1.0), "q3": (1.0, 1.0)}),
                        _result("b", {"q1": (1.0, 1.0), "q2": (1.0, 1.0), "q3": (1.0, 1.0)}))[0]
    assert (ok.difference, ok.low, ok.p_value) == pytest.approx((diff, lo, p)) and not ok.significant
