"""The relation graph (issue 28 part 4): graph alone and fused vs BM25 ``auto``, and what it costs.

1. ``docs/demo`` with the 30 bridge / comparison questions of ``benchmarks/graph_questions/demo-bridge.jsonl``
   (written by hand from the demo pages before any graph run; each names entities of one page, often with a
   second page's vocabulary — "the paragraph splitter's budget", "LangChain's default k" — and its gold answer is a
   verbatim span of one page): answer recall@1/@5 of BM25 ``auto``, the graph channel alone
   (:class:`~langchain_ragspine.retrievers.graph.GraphRetriever`, hops 1) and mode ``graph`` (BM25 + graph, fused by
   ``HybridRetriever``'s default two_stage), paired bootstrap vs BM25.
2. JSQuAD valid and CMRC 2018 dev: mode ``graph`` vs mode ``bm25`` (both ``auto`` tokenizer, no dense channel),
   every question, paired bootstrap — to show the graph channel does not hurt.
3. Cost: ingest wall time with and without ``graph="cooccurrence"``, the size of ``graph.json``, query p50.

    python benchmarks/graph.py [--sets jsquad-valid cmrc2018-dev] [--limit N] [--no-write]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from _common import DATA, REPO, data_missing, update_results_section
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from langchain_ragspine.document_loaders import CorpusLoader
from langchain_ragspine.evaluation import compare_paired, evaluate, load_dataset
from langchain_ragspine.evaluation.metrics import answer_recall_at_k
from langchain_ragspine.evaluation.significance import paired_bootstrap_interval, paired_randomization_test
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.modes import DocumentsSource, build_mode, mode_factory
from langchain_ragspine.relations import CooccurrenceExtractor, build_graph
from langchain_ragspine.retrievers.graph import GraphRetriever
from langchain_ragspine.text_splitters import ParagraphTextSplitter

QUESTIONS = REPO / "benchmarks" / "graph_questions" / "demo-bridge.jsonl"
KS = (1, 5)


def _recalls(retriever: BaseRetriever, questions: list[dict]) -> tuple[dict[int, list[float]], list[float]]:
    out: dict[int, list[float]] = {k: [] for k in KS}
    lat: list[float] = []
    for q in questions:
        t = time.perf_counter()
        docs: list[Document] = retriever.invoke(q["question"], k=max(KS))
        lat.append((time.perf_counter() - t) * 1000)
        for k in KS:
            out[k].append(answer_recall_at_k(docs, doc_id=q["doc_id"], answers=q["answers"], k=k))
    return out, lat


def demo_section() -> str:
    questions = [json.loads(line) for line in QUESTIONS.read_text("utf-8").splitlines() if line.strip()]
    chunks = ParagraphTextSplitter().split_documents(CorpusLoader(REPO / "docs" / "demo").load())
    source = DocumentsSource(chunks)
    t = time.perf_counter()
    graph = build_graph(chunks, CooccurrenceExtractor())
    build_s = time.perf_counter() - t
    rows = {
        "BM25 auto": build_mode("bm25", source, k=max(KS)),
        "graph alone (hops 1)": GraphRetriever(graph=graph, docs=chunks, k=max(KS)),
        "graph alone (hops 2)": GraphRetriever(graph=graph, docs=chunks, k=max(KS), hops=2),
        "mode graph (BM25 + graph, two_stage)": build_mode("graph", source, k=max(KS)),
        "BM25 + graph, rrf": build_mode("graph", source, k=max(KS), fusion="rrf"),
    }
    results = {name: _recalls(r, questions) for name, r in rows.items()}
    base = results["BM25 auto"][0]
    lines = [f"docs/demo: {len(chunks)} chunks, {len(questions)} questions; graph {len(graph.nodes())} nodes, "
             f"{len(graph.edges())} edges, built in {build_s:.2f} s.", "",
             "| configuration | answer R@1 | answer R@5 | Δ R@1 vs BM25 [95% CI] (p) | Δ R@5 vs BM25 [95% CI] (p) | query p50 ms |",
             "|---|---|---|---|---|---|"]
    for name, (rec, lat) in results.items():
        cells = []
        for k in KS:
            if name == "BM25 auto":
                cells.append("—")
                continue
            d, lo, hi = paired_bootstrap_interval(base[k], rec[k])
            p = paired_randomization_test(base[k], rec[k])
            cells.append(f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}] ({p:.2f})")
        lines.append(f"| {name} | {statistics.fmean(rec[1]):.3f} | {statistics.fmean(rec[5]):.3f} | {cells[0]} | "
                     f"{cells[1]} | {statistics.median(lat):.2f} |")
    return "\n".join(lines)


def shared_section(set_name: str, limit: int | None) -> str:
    ds = load_dataset(DATA / set_name)
    bm25 = evaluate(mode_factory("bm25", k=10), ds, ks=(1, 5, 10), limit=limit, progress=False, name="bm25")
    fused = evaluate(mode_factory("graph", k=10), ds, ks=(1, 5, 10), limit=limit, progress=False, name="graph")
    lines = [f"| {set_name} metric | BM25 auto | mode graph | Δ [95% CI] | p |", "|---|---|---|---|---|"]
    for c in compare_paired(bm25, fused, ["answer_recall@1", "answer_recall@5", "answer_recall@10"]):
        lines.append(f"| {c.metric} (n={c.n}) | {c.baseline_mean:.4f} | {c.other_mean:.4f} | {c.difference:+.4f} "
                     f"[{c.low:+.4f}, {c.high:+.4f}] | {c.p_value:.3f} |")
    lines.append(f"| index s / query p50 ms | {bm25.index_seconds:.1f} / {bm25.latency_ms['p50']:.2f} | "
                 f"{fused.index_seconds:.1f} / {fused.latency_ms['p50']:.2f} | | |")
    return "\n".join(lines)


def cost_section(sets: list[str]) -> str:
    lines = ["| corpus | ingest s, no graph | ingest s, graph cooccurrence | graph.json KB | chunk store KB |",
             "|---|---|---|---|---|"]
    corpora = [("docs/demo", REPO / "docs" / "demo")] + [(s, DATA / s / "docs") for s in sets]
    for name, path in corpora:
        times = {}
        with tempfile.TemporaryDirectory() as tmp:
            for graph in (None, "cooccurrence"):
                store = Path(tmp) / f"s-{graph}"
                t = time.perf_counter()
                ingest(path, store, progress=False, embedding="none", graph=graph, workers=1)
                times[graph] = time.perf_counter() - t
            size = (Path(tmp) / "s-cooccurrence" / "graph.json").stat().st_size / 1024
            chunks = (Path(tmp) / "s-None" / "chunks.sqlite").stat().st_size / 1024
            shutil.rmtree(tmp, ignore_errors=True)
        lines.append(f"| {name} | {times[None]:.2f} | {times['cooccurrence']:.2f} | {size:,.0f} | {chunks:,.0f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sets", nargs="*", default=["jsquad-valid", "cmrc2018-dev"])
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--no-write", action="store_true", help="print only; RESULTS.md untouched")
    args = ap.parse_args()
    sets = [s for s in args.sets if not data_missing([s])]
    parts = ["### docs/demo bridge questions (graph alone and fused vs BM25 auto)", "", demo_section(), ""]
    for s in sets:
        parts += [f"### {s}: mode graph vs BM25 auto (does it hurt?)", "", shared_section(s, args.limit), ""]
    parts += ["### cost (ingest with workers=1, no embedding model)", "", cost_section(sets)]
    body = "\n".join(parts)
    print(body)
    if not args.no_write:
        cmd = "python benchmarks/graph.py" + (f" --limit {args.limit}" if args.limit else "")
        update_results_section("graph", "Relation graph (GraphRAG-style local search, issue 28 part 4)", cmd, body)


if __name__ == "__main__":
    main()
