"""The learned reranker: build the bundled model, choose its features, and measure it on the shared sets.

    python benchmarks/learned_reranker.py build      # rebuild langchain_ragspine/.../learned-reranker-v1.txt (+ .json)
    python benchmarks/learned_reranker.py ablation   # held-out recall@1 without each feature group (training data)
    python benchmarks/learned_reranker.py eval [--sets jsquad-valid cmrc2018-dev] [--hybrid] [--no-results]

``build`` trains ONLY on the training splits ``jaquad-train`` (31,748 Japanese questions) and ``cmrc2018-trial``
(1,000 Simplified-Chinese questions with text; two lines of the file have an empty question and are skipped): the
first stage is BM25 ``auto`` over ``ParagraphTextSplitter`` chunks, top 30 candidates per question, labels by the
answer-recall rule, 20% of each set's articles held out for early stopping (selection uses nothing else).  The
feature rows are cached in ``benchmarks/_work/learned-groups-<set>.npz``; the build is deterministic (LightGBM
``deterministic``, ``force_row_wise``, one thread, fixed seeds), so running it twice gives the same file bit for bit.

``eval`` runs the evaluation sets, which training never saw: BM25 ``auto`` vs BM25 ``auto`` + the learned reranker
(fetch 30, keep 10), answer recall @1/@5/@10 with paired differences and 95% bootstrap intervals
(:func:`langchain_ragspine.evaluation.compare_paired`), and the reranker's added latency; ``--hybrid`` adds the
hybrid default (e5-small vectors from the benchmark embedding cache) and the hybrid + learned row.  Results go to
``benchmarks/RESULTS.md`` (section ``learned-reranker``).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import DATA, REPO, data_missing, update_results_section

from langchain_ragspine.document_compressors.learned.features import FEATURE_NAMES
from langchain_ragspine.document_compressors.learned.reranker import DEFAULT_MODEL
from langchain_ragspine.evaluation import QADataset, load_qa
from langchain_ragspine.evaluation.fit_reranker import (
    DEFAULT_DEPTH,
    TrainingGroups,
    fit_reranker,
    held_out_split,
    training_groups,
)

WORK = REPO / "benchmarks" / "_work"
TRAINING_SETS = ("jaquad-train", "cmrc2018-trial")
EVAL_SETS = ("jsquad-valid", "cmrc2018-dev")
BUILD_COMMAND = "OMP_NUM_THREADS=1 python benchmarks/learned_reranker.py build"

#: Feature groups for the ablation (a group's columns are dropped together).
GROUPS: dict[str, tuple[str, ...]] = {
    "channel scores": ("bm25", "has_bm25", "vector", "has_vector", "fused", "has_fused"),
    "rank": ("rank", "inv_rank"),
    "normalised score": ("score_norm", "score_gap"),
    "term shares": ("term_share", "idf_share"),
    "title": ("title_share", "title_in_question"),
    "longest common substring": ("lcs_share", "lcs_chars"),
    "window": ("window_density", "window_log"),
    "character overlap": ("bigram_share", "char_share"),
    "length and position": ("length_log", "start_log", "is_first"),
}


#: The features of the bundled model, chosen by ``ablation`` on the held-out training questions (recall@1, 6,392
#: questions): without the raw channel scores 0.8856 and without length and position 0.8864, both above all 23
#: features (0.8833), and without both 0.8866; dropping the longest common substring as well (0.8817), the window
#: (0.8814) or the normalised score (0.8794) lost.  The raw scores and lengths are also what differs most between
#: corpora (BM25's scale grows with the query and the corpus), so the model keeps rank, normalised score and the
#: lexical features.  Parameters, on the same held-out questions with these 14 features: learning rate 0.05 and
#: 15 leaves 0.8866 (373 trees), 31 leaves 0.8874 (367), 7 leaves 0.8845 (472), learning rate 0.1 0.8889 (191
#: trees: the smallest and the best) — the defaults of ``DEFAULT_PARAMS``.
SELECTED: tuple[str, ...] = tuple(f for f in FEATURE_NAMES
                                  if f not in GROUPS["channel scores"] + GROUPS["length and position"])


def load_training_set(name: str) -> QADataset:
    """A training split as a QA dataset; questions with an empty text are skipped (cmrc2018-trial has one)."""
    src = DATA / name
    lines = [ln for ln in (src / "questions.jsonl").read_text("utf-8").splitlines() if ln.strip()]
    kept = [ln for ln in lines if str(json.loads(ln).get("question", "")).strip()]
    if len(kept) != len(lines):
        print(f"{name}: {len(lines) - len(kept)} question(s) with an empty text skipped", file=sys.stderr)
    tmp = Path(tempfile.mkdtemp(prefix=f"ragspine-{name}-"))
    os.symlink(src / "docs", tmp / "docs")
    (tmp / "questions.jsonl").write_text("\n".join(kept) + "\n", "utf-8")
    ds = load_qa(tmp)
    ds.name = name
    return ds


def cached_groups(name: str, depth: int = DEFAULT_DEPTH) -> TrainingGroups:
    """The training groups of set ``name`` (computed once, then read from ``benchmarks/_work``)."""
    path = WORK / f"learned-groups-{name}-d{depth}.npz"
    if path.exists():
        z = np.load(path, allow_pickle=False)
        if list(z["names"]) == list(FEATURE_NAMES):
            return TrainingGroups(z["features"], z["labels"], [int(g) for g in z["groups"]],
                                  [str(q) for q in z["question_ids"]], [str(d) for d in z["doc_ids"]],
                                  [name] * len(z["groups"]))
    t0 = time.perf_counter()
    groups = training_groups(load_training_set(name), depth=depth, progress=True)
    print(f"{name}: {len(groups.groups)} questions, {groups.features.shape[0]} rows in "
          f"{time.perf_counter() - t0:.0f} s", file=sys.stderr)
    WORK.mkdir(parents=True, exist_ok=True)
    np.savez(path, features=groups.features, labels=groups.labels, groups=np.array(groups.groups),
             question_ids=np.array(groups.question_ids), doc_ids=np.array(groups.doc_ids),
             names=np.array(FEATURE_NAMES))
    return groups


def training_data(depth: int = DEFAULT_DEPTH) -> TrainingGroups:
    return TrainingGroups.concat([cached_groups(n, depth) for n in TRAINING_SETS])


def build(out: Path) -> int:
    groups = training_data()
    t0 = time.perf_counter()
    report = fit_reranker([], out, groups=groups, feature_names=SELECTED, training={
        "data": {n: f"../shared/data/{n} (training split)" for n in TRAINING_SETS},
        "first_stage": "BM25 auto over ParagraphTextSplitter() chunks (480/80)",
        "labels": "1 when the chunk comes from the question's doc_id and contains a gold answer (NFKC)",
        "rebuild": BUILD_COMMAND,
    })
    seconds = time.perf_counter() - t0
    size = out.stat().st_size
    print(f"wrote {out} ({size} bytes, {report.trees} trees) in {seconds:.1f} s; held-out answer recall@1 "
          f"{report.before_at_1:.4f} -> {report.after_at_1:.4f} ({report.n_train} training, "
          f"{report.n_held_out} held-out questions)")
    return 0


def ablation() -> int:
    """Held-out recall@1 (training data only, learning rate 0.05) with every feature, without each group, without
    combinations of the groups that did not help, then the parameters over the chosen features."""
    groups = training_data()
    slow = {"learning_rate": 0.05}
    rows = []

    def run(label: str, drop: tuple[str, ...], params: dict | None = None) -> None:
        keep = [f for f in FEATURE_NAMES if not any(f in GROUPS[d] for d in drop)]
        r = fit_reranker([], None, groups=groups, feature_names=keep, params=params or slow)
        rows.append((label, len(keep), r.before_at_1, r.after_at_1, r.trees))
        print(rows[-1], file=sys.stderr, flush=True)

    run("all features", ())
    for name in GROUPS:
        run(f"without {name}", (name,))
    chosen = ("channel scores", "length and position")
    run("without channel scores + length and position", chosen)
    for more in ("longest common substring", "window", "normalised score"):
        run(f"without channel scores + length and position + {more}", (*chosen, more))
    for params in ({"num_leaves": 31}, {"num_leaves": 7}, {"learning_rate": 0.1}):
        run(f"chosen features, {params}", chosen, {**slow, **params})
    held = held_out_split([f"{s}/{d}" for s, d in zip(groups.datasets, groups.doc_ids, strict=True)])
    print(f"held-out questions: {sum(held)} of {len(held)}")
    print("| features | n | BM25 auto @1 | reranked @1 | trees |\n|---|---:|---:|---:|---:|")
    for name, n, before, after, trees in rows:
        print(f"| {name} | {n} | {before:.4f} | {after:.4f} | {trees} |")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build")
    b.add_argument("--out", type=Path, default=DEFAULT_MODEL)
    sub.add_parser("ablation")
    e = sub.add_parser("eval")
    e.add_argument("--sets", nargs="+", default=list(EVAL_SETS))
    e.add_argument("--hybrid", action="store_true")
    e.add_argument("--no-results", action="store_true")
    e.add_argument("--limit", type=int, default=None)
    args = parser.parse_args(argv)
    if args.command == "build":
        return 1 if data_missing(list(TRAINING_SETS)) else build(args.out)
    if args.command == "ablation":
        return 1 if data_missing(list(TRAINING_SETS)) else ablation()
    from learned_eval import evaluate_sets  # the measurement half (kept apart: it needs the evaluation sets)

    if data_missing(args.sets):
        return 1
    body = evaluate_sets(args.sets, hybrid=args.hybrid, limit=args.limit)
    print(body)
    if not args.no_results and args.limit is None:
        cmd = "python benchmarks/learned_reranker.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
        update_results_section("learned-reranker", "Learned reranker (issue 30): LambdaMART over cheap features",
                               cmd, body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
