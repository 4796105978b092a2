"""Paired significance of the difference between two retrieval configurations evaluated on the same questions.

Two configurations run on the same questions give two per-question metric vectors ``a`` (baseline) and ``b``
(the other configuration) — e.g. answer recall@1 hits (0/1) or nDCG@10 values.  The quantity of interest is the mean
of the per-question differences ``d = b - a``; the question is whether it is distinguishable from 0 given how much
``d`` varies from question to question.  Two standard tools, both on ``d`` (so both are *paired*):

* **Paired bootstrap interval** (Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993, ch. 13; for IR
  Sakai, "Evaluating evaluation metrics based on the bootstrap", SIGIR 2006): resample the questions with
  replacement ``n_resamples`` times, take the mean of ``d`` over each resample, and report the 2.5th and 97.5th
  percentiles of those means (the percentile interval, ``numpy.quantile``'s default linear interpolation).
* **Paired randomisation test** (Fisher; for IR Smucker, Allan & Carterette, "A comparison of statistical
  significance tests for information retrieval evaluation", CIKM 2007 — ``ranx``'s ``stat_test="fisher"``): under
  the null hypothesis the two labels of each question are exchangeable, so each ``d_i`` flips sign with
  probability 1/2.  The two-sided p-value is the share of sign assignments whose ``|mean|`` is at least the
  observed ``|mean(d)|``.  Sampled assignments give ``(hits + 1) / (n_resamples + 1)`` (Phipson & Smyth,
  "Permutation p-values should never be zero", 2010; ``ranx`` reports ``hits / n_resamples``).

Both are exact when that is cheaper than sampling: the randomisation test enumerates all ``2**n`` sign vectors when
``2**n <= n_resamples``, the bootstrap all ``n**n`` index tuples when ``n**n <= n_resamples`` (tiny ``n`` only —
that is what makes hand checks possible).  Otherwise they draw from ``numpy.random.default_rng(seed)``, so a seed
gives the same numbers on every run; every metric of one comparison uses the same resamples.

A difference is reported *significant* when both agree: its 95% bootstrap interval excludes 0 *and* the
randomisation p-value is below 0.05 (``1 - confidence``).  On thousands of questions the two agree; on a handful
the percentile bootstrap is too narrow (3 questions with differences ``[1, 1, 0]`` give the interval
``[+0.22, +1.00]`` but p = 0.5), and the test keeps such a difference from being called a win.  Intervals are per
comparison: with many configurations, some exclude 0 by chance (no multiple-comparison correction is applied) —
choose on one set and confirm on another.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from langchain_ragspine.arguments import check_int

if TYPE_CHECKING:
    from langchain_ragspine.evaluation.runner import EvalResult

__all__ = [
    "DEFAULT_CONFIDENCE",
    "DEFAULT_RESAMPLES",
    "DEFAULT_SEED",
    "PairedComparison",
    "compare_paired",
    "paired_bootstrap_interval",
    "paired_randomization_test",
    "paired_results",
    "significance_metrics",
]

#: Resamples (bootstrap) and sign assignments (randomisation) per comparison.
DEFAULT_RESAMPLES = 10_000
#: Two-sided coverage of the bootstrap interval.
DEFAULT_CONFIDENCE = 0.95
#: Seed of ``numpy.random.default_rng``.
DEFAULT_SEED = 0
# Resamples drawn at once (bounds memory: CHUNK x n indices).
_CHUNK = 500
# Relative tolerance when comparing a resampled |mean| with the observed one (float sums of the same values).
_EPS = 1e-12

Array = npt.NDArray[np.float64]


@dataclass(frozen=True)
class PairedComparison:
    """The paired difference ``other - baseline`` of one metric over the same questions.

    Attributes:
        metric: the metric name (e.g. ``"answer_recall@1"``).
        baseline, other: the two configurations' names.
        n: questions compared (those where both have a value).
        baseline_mean, other_mean: the two means over those ``n`` questions.
        difference: ``other_mean - baseline_mean`` (= the mean per-question difference).
        low, high: the bootstrap percentile interval of ``difference`` at ``confidence``.
        p_value: two-sided paired randomisation test p-value.
        confidence: the interval's coverage (default 0.95).
        n_resamples: resamples used (bootstrap and randomisation alike; fewer when enumerated exactly).
        seed: the random seed.
    """

    metric: str
    baseline: str
    other: str
    n: int
    baseline_mean: float
    other_mean: float
    difference: float
    low: float
    high: float
    p_value: float
    confidence: float
    n_resamples: int
    seed: int

    @property
    def significant(self) -> bool:
        """``True`` when the interval excludes 0 (``low > 0`` or ``high < 0``) and ``p_value < 1 - confidence``."""
        return (self.low > 0.0 or self.high < 0.0) and self.p_value < 1.0 - self.confidence

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON data (with ``significant``)."""
        return {**asdict(self), "significant": self.significant}

    def cell(self, digits: int = 4, *, p_value: bool = False) -> str:
        """``+0.0038 [+0.0011, +0.0065]`` (with `` p=0.004`` when ``p_value``), then `` n.s.`` when not
        significant."""
        text = f"{self.difference:+.{digits}f} [{self.low:+.{digits}f}, {self.high:+.{digits}f}]"
        if p_value:
            text += f" p={self.p_value:.2g}"
        return text if self.significant else f"{text} n.s."


# ---------------------------------------------------------------------------------------------------- checks
def _as_matrix(a: Any, b: Any) -> tuple[Array, bool]:
    """``b - a`` as an ``(n, m)`` float matrix, and whether the input was 1-D."""
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.shape != y.shape:
        raise ValueError(f"paired vectors must have the same shape, got {x.shape} and {y.shape}")
    if x.ndim not in (1, 2) or x.shape[0] == 0:
        raise ValueError(f"expected a non-empty (n,) or (n, metrics) array, got shape {x.shape}")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("paired vectors must be finite (drop unjudged questions first)")
    d = y - x
    return (d[:, None], True) if d.ndim == 1 else (d, False)


def _check_resamples(n_resamples: int, confidence: float) -> None:
    check_int(n_resamples, "n_resamples")
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")


def _exact_count(base: int, n: int, limit: int) -> int | None:
    """``base ** n`` when it is <= ``limit`` (computed without overflow), else ``None``."""
    if n * math.log2(base) > math.log2(limit) + 1e-9:
        return None
    total = base**n
    return total if total <= limit else None


# ---------------------------------------------------------------------------------------------------- bootstrap
def _bootstrap_means(d: Array, n_resamples: int, seed: int) -> Array:
    """``(R, m)`` resampled means of the columns of ``d`` (all ``n**n`` index tuples when that is <= R)."""
    n = d.shape[0]
    if _exact_count(n, n, n_resamples) is not None:
        idx = np.array(list(itertools.product(range(n), repeat=n)), dtype=np.intp)
        return d[idx].mean(axis=1)
    rng = np.random.default_rng(seed)
    out = np.empty((n_resamples, d.shape[1]))
    for start in range(0, n_resamples, _CHUNK):
        stop = min(start + _CHUNK, n_resamples)
        rows = stop - start
        idx = rng.integers(0, n, size=(rows, n)) + np.arange(rows)[:, None] * n
        counts = np.bincount(idx.ravel(), minlength=rows * n).reshape(rows, n).astype(np.float64)
        out[start:stop] = counts @ d / n
    return out


def paired_bootstrap_interval(
    baseline: Any,
    other: Any,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
) -> tuple[Any, Any, Any]:
    """Percentile bootstrap interval of ``mean(other - baseline)`` over paired questions.

    Args:
        baseline, other: per-question values, shape ``(n,)`` — or ``(n, m)`` for ``m`` metrics at once, which then
            share the same resamples.  Finite numbers.
        n_resamples: bootstrap resamples (default 10,000); when ``n**n <= n_resamples`` every index tuple is
            enumerated instead (exact bootstrap distribution).
        confidence: coverage (default 0.95): the interval runs from the ``(1 - confidence) / 2`` to the
            ``(1 + confidence) / 2`` quantile of the resampled means (``numpy.quantile``, linear interpolation).
        seed: ``numpy.random.default_rng`` seed (default 0); the same seed gives the same interval.

    Returns:
        ``(difference, low, high)`` — floats for 1-D input, ``(m,)`` arrays for 2-D input.

    Raises:
        ValueError: shapes differ, are empty or not 1-/2-D, non-finite values, ``n_resamples < 1`` or
            ``confidence`` outside (0, 1).
        TypeError: ``n_resamples`` is not an int.
    """
    _check_resamples(n_resamples, confidence)
    d, flat = _as_matrix(baseline, other)
    means = _bootstrap_means(d, n_resamples, seed)
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(means, [tail, 1.0 - tail], axis=0)
    # float sums of the same values in another order differ by ~1e-17: a bound that is 0 must not read as > 0
    scale = _EPS * max(1.0, float(np.abs(d).max()))
    lo[np.abs(lo) <= scale] = 0.0
    hi[np.abs(hi) <= scale] = 0.0
    diff = d.mean(axis=0)
    diff[np.abs(diff) <= scale] = 0.0
    if flat:
        return float(diff[0]), float(lo[0]), float(hi[0])
    return diff, lo, hi


# ---------------------------------------------------------------------------------------------------- randomisation
def paired_randomization_test(
    baseline: Any,
    other: Any,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> Any:
    """Two-sided paired randomisation (sign-flip) test of ``mean(other - baseline) = 0``.

    Args:
        baseline, other: per-question values, shape ``(n,)`` or ``(n, m)`` (the ``m`` metrics share the sign
            assignments).  Finite numbers.
        n_resamples: random sign assignments (default 10,000); when ``2**n <= n_resamples`` all ``2**n`` are
            enumerated and the p-value is exact.
        seed: ``numpy.random.default_rng`` seed (default 0).

    Returns:
        The p-value — a float for 1-D input, an ``(m,)`` array for 2-D input: exact ``hits / 2**n``, else
        ``(hits + 1) / (n_resamples + 1)``, where a hit is an assignment with ``|mean| >= |observed mean|``.
        Identical inputs give 1.0.

    Raises:
        ValueError, TypeError: as :func:`paired_bootstrap_interval`.
    """
    _check_resamples(n_resamples, DEFAULT_CONFIDENCE)
    d, flat = _as_matrix(baseline, other)
    n = d.shape[0]
    observed = np.abs(d.mean(axis=0))
    threshold = observed - _EPS * np.maximum(1.0, observed)
    total = _exact_count(2, n, n_resamples)
    if total is not None:
        signs = 1.0 - 2.0 * np.array(list(itertools.product((0, 1), repeat=n)), dtype=np.float64)
        hits = (np.abs(signs @ d / n) >= threshold).sum(axis=0)
        p = hits / total
    else:
        rng = np.random.default_rng(seed)
        hits = np.zeros(d.shape[1])
        for start in range(0, n_resamples, _CHUNK):
            stop = min(start + _CHUNK, n_resamples)
            flips = 1.0 - 2.0 * rng.integers(0, 2, size=(stop - start, n))
            hits += (np.abs(flips @ d / n) >= threshold).sum(axis=0)
        p = (hits + 1.0) / (n_resamples + 1.0)
    return float(p[0]) if flat else p


# ---------------------------------------------------------------------------------------------------- results
def significance_metrics(result: EvalResult) -> list[str]:
    """The metrics compared by default: every ``answer_recall@k`` and ``ndcg@10`` of ``result.aggregate``; for a
    result without answer recall (BEIR), ``ndcg@10`` and every ``recall@k``; for a result of
    :func:`~langchain_ragspine.evaluation.answers.evaluate_answers`, every measure named in ``config["metrics"]``
    that some question has."""
    named = result.config.get("metrics")
    if isinstance(named, list):  # evaluate_answers names its per-question measures
        return [m for m in named if any(q.get(m) is not None for q in result.per_query)]
    answer = [m for m in result.aggregate if m.startswith("answer_recall@")]
    ndcg = [m for m in result.aggregate if m == "ndcg@10"]
    if answer:
        return answer + ndcg
    return ndcg + [m for m in result.aggregate if m.startswith("recall@")]


def paired_results(baseline: EvalResult, other: EvalResult, metric: str) -> tuple[Array, Array]:
    """The two per-question vectors of ``metric``, paired by question id (questions where either value is
    ``None`` — unjudged — are left out), in the baseline's order.

    Raises:
        ValueError: the two results were not run on the same question ids, or a question id repeats.
    """
    def by_id(r: EvalResult) -> dict[str, Mapping[str, Any]]:
        out: dict[str, Mapping[str, Any]] = {}
        for q in r.per_query:
            qid = str(q["id"])
            if qid in out:
                raise ValueError(f"question id {qid!r} appears twice in {r.name!r}")
            out[qid] = q
        return out

    a, b = by_id(baseline), by_id(other)
    if a.keys() != b.keys():
        only_a = sorted(a.keys() - b.keys())[:3]
        only_b = sorted(b.keys() - a.keys())[:3]
        raise ValueError(
            f"{baseline.name!r} and {other.name!r} were not evaluated on the same questions "
            f"({len(a)} vs {len(b)}; only in the first e.g. {only_a}, only in the second e.g. {only_b})"
        )
    x, y = [], []
    for qid, qa in a.items():
        va, vb = qa.get(metric), b[qid].get(metric)
        if va is None or vb is None or (isinstance(va, float) and math.isnan(va)):
            continue
        if isinstance(vb, float) and math.isnan(vb):
            continue
        x.append(float(va))
        y.append(float(vb))
    return np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)


def compare_paired(
    baseline: EvalResult,
    other: EvalResult,
    metrics: Sequence[str] | None = None,
    *,
    n_resamples: int = DEFAULT_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = DEFAULT_SEED,
) -> list[PairedComparison]:
    """Paired differences ``other - baseline`` for each metric, with bootstrap interval and randomisation p-value.

    Args:
        baseline, other: results of :func:`~langchain_ragspine.evaluation.evaluate` on the same questions (their
            ``per_query`` records hold the per-question values).
        metrics: metric names (default :func:`significance_metrics` of ``baseline``); a metric that neither
            result has for any question is skipped.
        n_resamples, confidence, seed: see :func:`paired_bootstrap_interval` / :func:`paired_randomization_test`.

    Returns:
        One :class:`PairedComparison` per metric, in the order given.

    Raises:
        ValueError: the results cover different questions (see :func:`paired_results`), or bad parameters.
    """
    names = list(metrics) if metrics is not None else significance_metrics(baseline)
    out: list[PairedComparison] = []
    for metric in names:
        x, y = paired_results(baseline, other, metric)
        if x.size == 0:
            continue
        diff, lo, hi = paired_bootstrap_interval(x, y, n_resamples=n_resamples, confidence=confidence, seed=seed)
        p = paired_randomization_test(x, y, n_resamples=n_resamples, seed=seed)
        out.append(
            PairedComparison(
                metric=metric, baseline=baseline.name, other=other.name, n=int(x.size),
                baseline_mean=float(x.mean()), other_mean=float(y.mean()), difference=diff, low=lo, high=hi,
                p_value=p, confidence=float(confidence), n_resamples=n_resamples, seed=seed,
            )
        )
    return out
