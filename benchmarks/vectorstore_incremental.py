"""Incremental writes to a vector store: rounds of (add 10 texts, search) at 300, 10,000 and 100,000 chunks.

Issue 27 §2: every ``RagSpineVectorStore`` write rebuilt its whole in-memory index, so 30 rounds of (add 10 texts,
search) over 300 chunks took 7.8 s against 0.4 s for ``InMemoryVectorStore``.  This benchmark runs, side by side in
one invocation and one worker process per configuration:

* ``InMemoryVectorStore`` (langchain_core) — ``add_texts`` + ``similarity_search``;
* ``RagSpineVectorStore`` *before* — the package at an older commit (``--before DIR``: a ``git worktree`` of it,
  e.g. ``git worktree add /tmp/before-vs 30df2b6``), put first on ``PYTHONPATH``;
* ``RagSpineVectorStore`` *after* — this checkout;

each timed for ``add_texts`` of 10 new texts, then ``similarity_search(q, k=4)`` (the dense search
``InMemoryVectorStore`` has: the first search after a write also brings the indexes up to date), then
``as_retriever().invoke(q)`` (the default ``hybrid`` search: BM25 + dense fused).  Embeddings are the package's
offline ``HashingEmbeddings(256)`` for every store (no model download).  A store is loaded with the chunks first
(not timed in the rounds; reported as "load"), then searched once.

The texts are synthetic and deterministic: 200-300-character chunks of Japanese-like words (1-4 characters from a
fixed set of 3,000 CJK characters and the kana, drawn with Zipf weights) with some English words, so the
tokenizer's work and the vocabulary grow as with real text.  At 10,000 and 100,000 chunks the *before* store
rebuilds everything on each round, so it is timed on fewer rounds (``--before-rounds``) and its per-round time
extrapolated to the rounds of the others; the table says so.

Usage::

    python benchmarks/vectorstore_incremental.py --before /tmp/before-vs            # 300, 10k, 100k; RESULTS.md
    python benchmarks/vectorstore_incremental.py --before /tmp/before-vs --sizes 300 --no-write
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ADD = 10
QUERIES = ["梅雨の季節について", "東京の会議の記録", "the rainy season report", "北京の首都機能"]


def corpus(n: int, seed: int) -> list[str]:
    """``n`` deterministic synthetic chunks (see the module docstring)."""
    import numpy as np

    chars = [chr(0x4E00 + i * 7) for i in range(3000)] + [chr(c) for c in range(0x3041, 0x3097)]
    vocab_rng = random.Random(12345)
    words = ["".join(vocab_rng.choice(chars) for _ in range(vocab_rng.randint(1, 4))) for _ in range(20000)]
    words[:8] = ["梅雨", "季節", "東京", "会議", "記録", "北京", "首都", "機能"]
    english = ["rainy ", "season ", "report ", "meeting ", "store ", "version ", "index ", "search "]
    weights = 1.0 / np.arange(1, len(words) + 1)
    rng = np.random.default_rng(seed)
    targets = rng.integers(200, 301, size=n)
    picks = rng.choice(len(words), size=(n, 160), p=weights / weights.sum())
    extra = rng.random((n, 160))
    tokens = np.array(words + [w + "。" for w in words] + english, dtype=object)
    ids = np.where(extra > 0.94, picks + len(words), picks)
    ids = np.where(extra < 0.05, 2 * len(words) + picks % 8, ids)
    return ["".join(row)[:t] for row, t in zip(tokens[ids], targets.tolist(), strict=True)]


# ------------------------------------------------------------------------------------------------ the worker
def worker(cfg: dict[str, Any]) -> dict[str, Any]:
    from langchain_ragspine.embeddings import HashingEmbeddings

    emb = HashingEmbeddings(256)
    n, rounds = int(cfg["n"]), int(cfg["rounds"])
    texts = corpus(n, seed=1)
    new = corpus(ADD * rounds, seed=2)
    tmp = Path(tempfile.mkdtemp(prefix="bench-vs-"))
    try:
        t0 = time.perf_counter()
        if cfg["impl"] == "inmemory":
            from langchain_core.vectorstores import InMemoryVectorStore

            store: Any = InMemoryVectorStore(emb)
            hybrid = None
        else:
            import langchain_ragspine
            from langchain_ragspine.vectorstores import RagSpineVectorStore

            assert Path(langchain_ragspine.__file__).resolve().is_relative_to(Path(cfg["src"]).resolve())
            store = RagSpineVectorStore(tmp / "store", emb)
            hybrid = store.as_retriever()
        for start in range(0, n, 5000):
            store.add_texts(texts[start : start + 5000])
        store.similarity_search(QUERIES[0], k=4)
        if hybrid is not None:
            hybrid.invoke(QUERIES[0])
        load = time.perf_counter() - t0
        adds, dense, fused = [], [], []
        for r in range(rounds):
            q = QUERIES[r % len(QUERIES)]
            t = time.perf_counter()
            store.add_texts(new[r * ADD : (r + 1) * ADD])
            adds.append(time.perf_counter() - t)
            t = time.perf_counter()
            store.similarity_search(q, k=4)
            dense.append(time.perf_counter() - t)
            if hybrid is not None:
                store.add_texts([f"{new[r * ADD]} 追記"])  # one more write, so the hybrid search updates too
                t = time.perf_counter()
                hybrid.invoke(q)
                fused.append(time.perf_counter() - t)
        close = getattr(store, "close", None)
        if close is not None:
            close()
        return {"load_s": load, "add_s": adds, "dense_s": dense, "hybrid_s": fused}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        gc.collect()


# ------------------------------------------------------------------------------------------------ the driver
def _ms(values: list[float]) -> str:
    return f"{1000 * statistics.fmean(values):,.1f}" if values else "–"


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _common import REPO, run_json_worker, update_results_section

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", type=Path, required=True, help="a checkout of the older commit (git worktree)")
    ap.add_argument("--sizes", default="300,10000,100000")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--before-rounds", default="300:30,10000:5,100000:2",
                    help="rounds of the before store per size (it rebuilds on every round)")
    ap.add_argument("--no-write", action="store_true", help="print the table only")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    before_rounds = {int(k): int(v) for k, v in (p.split(":") for p in args.before_rounds.split(","))}
    load_start = os.getloadavg()
    rows = []
    for n in sizes:
        for impl, src, rounds in (
            ("inmemory", REPO, args.rounds),
            ("before", args.before.resolve(), min(args.rounds, before_rounds.get(n, args.rounds))),
            ("after", REPO, args.rounds),
        ):
            print(f"n={n:,} {impl}: {rounds} rounds ...", file=sys.stderr, flush=True)
            res = run_json_worker(__file__, {"n": n, "impl": impl, "rounds": rounds, "src": str(src)}, src)
            rows.append((n, impl, rounds, res))
    load_end = os.getloadavg()
    names = {"inmemory": "`InMemoryVectorStore` (langchain_core)", "before": "`RagSpineVectorStore` before (30df2b6)",
             "after": "`RagSpineVectorStore` after (this commit)"}
    lines = [
        f"| chunks | store | rounds timed | load s | add 10 ms | similarity_search after it ms | hybrid invoke after "
        f"a write ms | {args.rounds} rounds of (add 10, search) s |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    totals: dict[tuple[int, str], float] = {}
    for n, impl, rounds, res in rows:
        per_round = statistics.fmean([a + d for a, d in zip(res["add_s"], res["dense_s"], strict=True)])
        totals[(n, impl)] = per_round * args.rounds
        note = "" if rounds == args.rounds else f" (extrapolated from {rounds})"
        lines.append(
            f"| {n:,} | {names[impl]} | {rounds} | {res['load_s']:.1f} | {_ms(res['add_s'])} | {_ms(res['dense_s'])} "
            f"| {_ms(res['hybrid_s'])} | {totals[(n, impl)]:.2f}{note} |"
        )
    ratios = []
    for n in sizes:
        b, a, m = totals[(n, "before")], totals[(n, "after")], totals[(n, "inmemory")]
        versus = f"{a / m:.1f}x slower than" if a > m else f"{m / a:.1f}x faster than"
        ratios.append(f"{n:,} chunks: after is **{b / a:,.0f}x** faster than before and {versus} InMemoryVectorStore")
    body = "\n".join(lines) + "\n\n" + "; ".join(ratios) + ".\n\n" + (
        "One worker process per row, all in this one run. A round = `add_texts` of 10 new texts, then "
        "`similarity_search(q, k=4)` (the search brings the indexes up to date: the before store rebuilds them "
        "whole, the after store adds a segment); the hybrid column is a separate `as_retriever().invoke(q)` after "
        "one more single-text write (not in the round total). The last column is the add + similarity_search per "
        f"round times {args.rounds}; where fewer rounds were timed (the before store at 10k / 100k, every round a "
        "full rebuild) it is extrapolated from their mean. Load = `add_texts` of the chunks in batches of 5,000 "
        "plus the first searches (for both RagSpine stores: the whole in-memory index built once; the after store "
        "also embeds at write). `HashingEmbeddings(256)` for every store; synthetic deterministic 200-300-character "
        "Japanese-like chunks (see the script). "
        f"Machine load (1-min average) {load_start[0]:.2f} at the start, {load_end[0]:.2f} at the end: the 2 cores "
        "are shared with other work, so absolute times are noisy; the ratios are of rows measured in the same run."
    )
    print(body)
    if not args.no_write:
        update_results_section(
            "vectorstore-incremental", "Incremental vector-store writes: rounds of (add 10, search)",
            "python benchmarks/vectorstore_incremental.py --before /tmp/before-vs  "
            "# git -C /work/main worktree add /tmp/before-vs 30df2b6",
            body,
        )


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        print(json.dumps(worker(json.loads(sys.argv[2]))))
    else:
        main()
