"""Plots comparing evaluation results: recall@k curves and a latency-vs-quality scatter, saved as PNG.

The two standard views of a retrieval comparison: quality as a function of the cutoff (the "top-k retrieval
accuracy" curves of DPR, Karpukhin et al. 2020) and the speed/quality trade-off (as in ANN-Benchmarks' recall
vs queries-per-second plots, Aumüller et al. 2020).  matplotlib is imported lazily (extra ``eval``); figures
are drawn on an ``Agg`` canvas without ``pyplot``, so no display is needed and the caller's backend is left
alone.  Plot text is ASCII except the result names, which may be Japanese or Chinese: the font list prefers
installed CJK fonts and falls back to matplotlib's "Last Resort" font, and missing-glyph warnings are
silenced, so a CJK name never makes plotting fail.
"""

from __future__ import annotations

import math
import os
import re
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langchain_ragspine._optional import import_optional
from langchain_ragspine.evaluation.runner import EvalResult

__all__ = ["ANSWER_PLOT_METRICS", "DPI", "FIGSIZE", "plot_answer_metrics", "plot_latency_quality", "plot_recall_curves"]

#: Fonts tried in order (those installed are used; matplotlib falls back per glyph, 3.6+).
_FONT_PREFERENCE = (
    "DejaVu Sans",
    "Noto Sans CJK JP",
    "Noto Sans CJK SC",
    "Noto Sans JP",
    "Noto Sans SC",
    "IPAexGothic",
    "IPAGothic",
    "Hiragino Sans",
    "Yu Gothic",
    "Microsoft YaHei",
    "SimHei",
    "WenQuanYi Zen Hei",
    "Last Resort High-Efficiency",
)
#: Figure size in inches and resolution: PNGs are 1050 x 675 pixels.
FIGSIZE = (7.0, 4.5)
DPI = 150
_INSTALL_HINT = "plots need matplotlib: pip install 'langchain-ragspine[eval]'"


def _figure() -> Any:
    """A new ``matplotlib.figure.Figure`` on an Agg canvas (no pyplot, so no global backend switch)."""
    agg = import_optional("matplotlib.backends.backend_agg", _INSTALL_HINT)
    fig = import_optional("matplotlib.figure", _INSTALL_HINT).Figure(figsize=FIGSIZE, dpi=DPI, layout="constrained")
    agg.FigureCanvasAgg(fig)
    return fig


@contextmanager
def _style() -> Iterator[None]:
    matplotlib = import_optional("matplotlib", _INSTALL_HINT)
    font_manager = import_optional("matplotlib.font_manager", _INSTALL_HINT)

    installed = {f.name for f in font_manager.fontManager.ttflist}
    fonts = [f for f in _FONT_PREFERENCE if f in installed] or ["sans-serif"]
    with matplotlib.rc_context({"font.family": fonts}), warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*[Gg]lyph .* missing from.*")
        warnings.filterwarnings("ignore", message=r".*findfont.*")
        yield


def _save(fig: Any, path: str | os.PathLike[str]) -> Path:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(target, format="png", dpi=DPI)
    return target


def _curve(result: EvalResult, metric: str) -> tuple[list[int], list[float]]:
    pattern = re.compile(rf"{re.escape(metric)}@(\d+)")
    points = sorted(
        (int(m.group(1)), v)
        for name, v in result.aggregate.items()
        if (m := pattern.fullmatch(name)) and v is not None and not math.isnan(v)
    )
    return [k for k, _ in points], [v for _, v in points]


def plot_recall_curves(
    results: Sequence[EvalResult],
    path: str | os.PathLike[str],
    *,
    metric: str = "answer_recall",
    title: str | None = None,
) -> Path:
    """Plot ``metric@k`` against ``k``, one line per result, and save a PNG.

    The x axis is logarithmic when the cutoffs span two decades or more (``max(k) / min(k) >= 100``, e.g. the
    default 1…100), linear otherwise; y runs to 1 from 0, or — when every value is at least 0.5 — from just below
    the lowest value, so that close configurations stay distinguishable.

    Args:
        results: evaluation results (their ``aggregate`` holds ``f"{metric}@{k}"`` values).
        path: the PNG file to write (parent folders are created).
        metric: metric family, ``"answer_recall"`` (default) or ``"recall"`` (paragraph / BEIR Recall@k).
        title: plot title (default derived from ``metric``).

    Returns:
        The written path.

    Raises:
        ValueError: ``results`` is empty, or a result has no ``metric@k`` values.
        ImportError: matplotlib is missing (``pip install 'langchain-ragspine[eval]'``).
    """
    if not results:
        raise ValueError("plot_recall_curves needs at least one result")
    curves = []
    for r in results:
        ks, values = _curve(r, metric)
        if not ks:
            raise ValueError(f"result {r.name!r} has no {metric}@k values (it has {sorted(r.aggregate)})")
        curves.append((r.name, ks, values))
    with _style():
        fig = _figure()
        ax = fig.add_subplot()
        all_ks = sorted({k for _, ks, _ in curves for k in ks})
        for label, ks, values in curves:
            ax.plot(ks, values, marker="o", linewidth=1.8, label=label)
        if all_ks[-1] / all_ks[0] >= 100:
            ax.set_xscale("log")
        ax.set_xticks(all_ks)
        ax.set_xticklabels([str(k) for k in all_ks])
        ax.minorticks_off()
        lowest = min(v for _, _, values in curves for v in values)
        # zoom in when every curve is high (the usual case), so close configurations stay apart; else 0..1
        ax.set_ylim(max(0.0, math.floor(lowest * 20) / 20 - 0.05) if lowest >= 0.5 else 0.0, 1.0)
        ax.set_xlabel("k (number of retrieved chunks)" if metric == "answer_recall" else "k (cutoff rank)")
        ax.set_ylabel(f"{metric}@k (fraction of questions)" if metric == "answer_recall" else f"{metric}@k")
        ax.set_title(title or f"{metric}@k by cutoff")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(loc="lower right", fontsize="small")
        return _save(fig, path)


def plot_latency_quality(
    results: Sequence[EvalResult],
    path: str | os.PathLike[str],
    metric: str = "answer_recall@1",
    *,
    title: str | None = None,
) -> Path:
    """Scatter median query latency (ms, x) against ``metric`` (y), one labelled point per result; save a PNG.

    The x axis is logarithmic when the latencies span two decades or more.  Up and to the left is better.

    Args:
        results: evaluation results.
        path: the PNG file to write (parent folders are created).
        metric: an ``aggregate`` key (default ``"answer_recall@1"``).
        title: plot title (default derived from ``metric``).

    Returns:
        The written path.

    Raises:
        ValueError: ``results`` is empty, or a result lacks ``metric`` or a finite p50 latency.
        ImportError: matplotlib is missing (``pip install 'langchain-ragspine[eval]'``).
    """
    if not results:
        raise ValueError("plot_latency_quality needs at least one result")
    points = []
    for r in results:
        if metric not in r.aggregate or r.aggregate[metric] is None or math.isnan(r.aggregate[metric]):
            raise ValueError(f"result {r.name!r} has no {metric!r} (it has {sorted(r.aggregate)})")
        p50 = r.latency_ms.get("p50")
        if p50 is None or not math.isfinite(p50):
            raise ValueError(f"result {r.name!r} has no p50 latency")
        points.append((r.name, p50, r.aggregate[metric]))
    with _style():
        fig = _figure()
        ax = fig.add_subplot()
        for i, (label, x, y) in enumerate(points):
            ax.scatter([x], [y], s=60, zorder=3)
            # alternate labels above and below their points, so close points keep readable labels
            ax.annotate(
                label,
                (x, y),
                textcoords="offset points",
                xytext=(6, 6 if i % 2 == 0 else -14),
                fontsize="small",
            )
        xs = [x for _, x, _ in points]
        if min(xs) > 0 and max(xs) / min(xs) >= 100:
            ax.set_xscale("log")
        else:
            ax.set_xlim(0.0, max(xs) * 1.25 if max(xs) > 0 else 1.0)
        ax.set_ylim(0.0, 1.0)
        ax.set_xlabel("median query latency, p50 (ms)")
        ax.set_ylabel(metric)
        ax.set_title(title or f"{metric} vs latency (up and left is better)")
        ax.grid(True, alpha=0.3)
        return _save(fig, path)


#: The measures :func:`plot_answer_metrics` draws by default (those a result has).
ANSWER_PLOT_METRICS = (
    "answer_contains", "f1", "citation_precision", "citation_recall", "faithfulness", "judge_faithfulness",
    "judge_relevance", "refusal_rate", "false_refusal_rate",
)


def plot_answer_metrics(
    results: Sequence[EvalResult],
    path: str | os.PathLike[str],
    metrics: Sequence[str] | None = None,
    *,
    title: str | None = None,
) -> Path:
    """Grouped bars of answer measures (one group per measure, one bar per result) from
    :func:`~langchain_ragspine.evaluation.answers.evaluate_answers`; save a PNG.

    Usage: ``plot_answer_metrics([simple, corrective], "answers.png")``.  Every measure is a share in [0, 1]; the
    y axis runs from 0 to 1.  A measure a result does not have (no judge, say) leaves its bar out.

    Args:
        results: answer results (their ``aggregate`` holds the measures).
        path: the PNG file to write (parent folders are created).
        metrics: ``aggregate`` keys to draw (default: those of :data:`ANSWER_PLOT_METRICS` some result has).
        title: plot title.

    Returns:
        The written path.

    Raises:
        ValueError: ``results`` is empty, or no result has any of ``metrics``.
        ImportError: matplotlib is missing (``pip install 'langchain-ragspine[eval]'``).
    """
    if not results:
        raise ValueError("plot_answer_metrics needs at least one result")
    wanted = list(metrics) if metrics is not None else list(ANSWER_PLOT_METRICS)

    def value(r: EvalResult, m: str) -> float | None:
        v = r.aggregate.get(m)
        return None if v is None or not math.isfinite(v) else float(v)

    shown = [m for m in wanted if any(value(r, m) is not None for r in results)]
    if not shown:
        raise ValueError(f"no result has any of {wanted} (the first has {sorted(results[0].aggregate)})")
    width = 0.8 / len(results)
    with _style():
        fig = _figure()
        ax = fig.add_subplot()
        for i, r in enumerate(results):
            xs = [j + (i - (len(results) - 1) / 2) * width for j, m in enumerate(shown) if value(r, m) is not None]
            ys = [value(r, m) for m in shown if value(r, m) is not None]
            ax.bar(xs, ys, width=width * 0.95, label=r.name)
        ax.set_xticks(list(range(len(shown))))
        ax.set_xticklabels(shown, rotation=30, ha="right", fontsize="small")
        ax.set_ylim(0.0, 1.0)
        ax.set_ylabel("share of questions (answers)")
        ax.set_title(title or "answer evaluation")
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(loc="upper right", fontsize="small")
        return _save(fig, path)
