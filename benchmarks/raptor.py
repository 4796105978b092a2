"""RAPTOR (issue 28, part 1): a tree of extractive summaries searched as a collapsed tree, alone and fused with BM25,
on both shared sets.

Rows: BM25 ``auto`` (the default without a model), the tree's embedding as a flat dense channel (the leaves alone:
what the tree adds to it), RAPTOR alone (collapsed tree, all levels in one index), BM25 + RAPTOR (two-stage fusion,
what mode ``raptor`` builds without a dense channel) and BM25 + flat dense for comparison.  Each row after the first
is compared on the same questions with BM25 ``auto``, the RAPTOR rows also with the flat dense row of the same
embedding (paired bootstrap, 10,000 resamples, seed 0).  Cost: tree build seconds, ``raptor.json`` bytes (the tree's
JSON as the store saves it), query p50.

    python benchmarks/raptor.py [--sets jsquad-valid cmrc2018-dev] [--embedding hashing|e5] [--sample N]

``--embedding e5`` reads the e5 cache of ``benchmarks/_embedding_cache.py`` (~12 texts/s to fill on 2 cores);
``--sample N`` evaluates a seeded sample of N questions per set (``random.Random(0)``), for e5.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Callable
from dataclasses import replace

from _common import DATA, REPO, data_missing, update_results_section
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever

from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.evaluation import EvalResult, compare_paired, evaluate, load_dataset
from langchain_ragspine.pipeline.modes import mode_factory
from langchain_ragspine.raptor import RaptorBuilder, RaptorTree
from langchain_ragspine.retrievers import DenseRetriever, HybridRetriever
from langchain_ragspine.retrievers.raptor import RaptorRetriever

KS = (1, 5, 10, 100)
METRICS = ("answer_recall@1", "answer_recall@5", "answer_recall@10")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", nargs="+", default=["jsquad-valid", "cmrc2018-dev"])
    ap.add_argument("--embedding", choices=["hashing", "e5"], default="hashing")
    ap.add_argument("--sample", type=int, default=None, help="a seeded sample of N questions per set")
    ap.add_argument("--cluster-size", type=int, default=8)
    args = ap.parse_args()
    if data_missing(args.sets):
        return 2
    emb: Embeddings
    if args.embedding == "e5":
        sys.path.insert(0, str(REPO / "benchmarks"))
        from _embedding_cache import cached_e5

        emb = cached_e5()
    else:
        emb = HashingEmbeddings(256)
    depth = max(KS)
    trees: dict[tuple[str, ...], tuple[RaptorTree, float, int]] = {}

    def tree_of(chunks: list[Document]) -> RaptorTree:
        key = tuple(sorted(str(c.metadata["chunk_id"]) for c in chunks))
        if key not in trees:
            t0 = time.perf_counter()
            tree = RaptorBuilder(emb, cluster_size=args.cluster_size).build(chunks)
            seconds = time.perf_counter() - t0
            size = len(json.dumps(tree.to_json(), ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode())
            trees[key] = (tree, seconds, size)
        return trees[key][0]

    def raptor(chunks: list[Document]) -> BaseRetriever:
        return RaptorRetriever(tree=tree_of(chunks), docs=chunks, embedding=emb, k=depth)

    dense_cache: dict[int, DenseRetriever] = {}

    def dense(chunks: list[Document]) -> BaseRetriever:
        if id(chunks) not in dense_cache:
            dense_cache[id(chunks)] = DenseRetriever.from_documents(chunks, emb, k=depth)
        return dense_cache[id(chunks)]

    bm25 = mode_factory("bm25", k=depth)

    def fused(channel: Callable[[list[Document]], BaseRetriever]) -> Callable[[list[Document]], BaseRetriever]:
        return lambda chunks: HybridRetriever(retrievers=[bm25(chunks), channel(chunks)], k=depth)

    name_e = "e5" if args.embedding == "e5" else "hashing-256"
    rows: list[tuple[str, Callable[[list[Document]], BaseRetriever]]] = [
        ("BM25 auto", bm25),
        (f"flat dense ({name_e})", dense),
        (f"RAPTOR alone ({name_e}, collapsed tree)", raptor),
        (f"BM25 + RAPTOR ({name_e}, two-stage)", fused(raptor)),
        (f"BM25 + flat dense ({name_e}, two-stage)", fused(dense)),
    ]
    sections = []
    for set_name in args.sets:
        dataset = load_dataset(DATA / set_name)
        if args.sample:
            picked = sorted(random.Random(0).sample(range(len(dataset.questions)), args.sample))
            dataset = replace(dataset, questions=[dataset.questions[i] for i in picked])
        results: list[EvalResult] = []
        for label, factory in rows:
            t0 = time.perf_counter()
            r = evaluate(factory, dataset, ks=KS, name=label, progress=False)
            results.append(r)
            print(f"{set_name:13s} {label:45s} R@1 {r.aggregate['answer_recall@1']:.4f} R@5 "
                  f"{r.aggregate['answer_recall@5']:.4f} index {r.index_seconds:.1f}s p50 {r.latency_ms['p50']:.2f}ms "
                  f"({time.perf_counter() - t0:.0f}s)", flush=True)
        tree, seconds, size = list(trees.values())[-1]
        cost = (f"Tree: {len(tree.chunks)} leaves, {len(tree.summaries())} summaries, {tree.levels()} levels; built in "
                f"{seconds:.1f} s ({name_e}, extractive summaries, cluster size {args.cluster_size}); raptor.json "
                f"{size / 1e6:.2f} MB.")
        sections.append(_table(set_name, results, cost))
    command = "python benchmarks/raptor.py" + "".join(f" {a}" for a in sys.argv[1:])
    text = "\n".join(sections)
    update_results_section(f"raptor-{args.embedding}", f"RAPTOR collapsed tree, alone and fused with BM25 "
                           f"({name_e}; issue 28 part 1)", command, text)
    print(text)
    return 0


def _delta(base: EvalResult, other: EvalResult, metric: str) -> str:
    (c,) = compare_paired(base, other, [metric])
    star = "" if c.significant else " n.s."
    return f"{c.difference:+.4f} [{c.low:+.4f}, {c.high:+.4f}]{star}"


def _table(name: str, results: list[EvalResult], cost: str) -> str:
    base, flat = results[0], results[1]
    lines = [f"### {name} ({base.config['n_questions']} questions)", "",
             "| configuration | ans R@1 | ans R@5 | ans R@10 | Δ R@1 vs BM25 | Δ R@5 vs BM25 | Δ R@1 vs flat dense | "
             "Δ R@5 vs flat dense | index s | p50 ms |",
             "| --- | ---: | ---: | ---: | --- | --- | --- | --- | ---: | ---: |"]
    for r in results:
        a = r.aggregate
        vs_base = ["", ""] if r is base else [_delta(base, r, m) for m in METRICS[:2]]
        vs_flat = ["", ""] if "RAPTOR" not in r.name else [_delta(flat, r, m) for m in METRICS[:2]]
        lines.append(f"| {r.name} | {a['answer_recall@1']:.4f} | {a['answer_recall@5']:.4f} | "
                     f"{a['answer_recall@10']:.4f} | {' | '.join(vs_base)} | {' | '.join(vs_flat)} | "
                     f"{r.index_seconds:.1f} | {r.latency_ms['p50']:.2f} |")
    return "\n".join(lines) + "\n\n" + cost + "\n"


if __name__ == "__main__":
    sys.exit(main())
