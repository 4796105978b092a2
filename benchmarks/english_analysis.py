"""English analysis (issue 27 §3): the demo corpus's English questions before / after, and what the analysis costs.

Part 1 — retrieval and the offline answer path on the demo corpus (``docs/demo``, all 13 pages, chunked as ``ragspine
demo`` chunks them: the default ``ParagraphTextSplitter``), for :data:`QUESTIONS`: 30 English questions written for
this benchmark, five per English page, phrased as a user would ask them (not copied from the pages), each with the
page(s) that answer it.  Per configuration: page hit@1 / hit@3 and MRR@6 of ``BM25Retriever`` (the rank of the first
chunk from an answering page), and the corrective graph without a model (``ragspine ask``'s default: lexical grader,
extractive answer): how many questions it answers, and how many of those cite an answering page first.

* ``before`` — the package of ``--before DIR`` (default: none), run in a subprocess: the code before English
  analysis (tokenizer ``auto`` then = ``auto-nostem`` now, byte for byte; its content terms without the stems).
* ``auto-nostem`` — this commit with the opt-out tokenizer (BM25 and the graph's content terms).
* ``auto`` — this commit's default: Lucene's stop words out, Snowball stems.
* ablations (BM25 only, this commit): stems without stop words; Lucene's stop words without stems; stems with
  Lucene's list plus the English question words; stems with the graders' long list (``ENGLISH_STOPWORDS``) as BM25
  stop words.

Part 2 — CPU cost of the analysis in this process: the stem of one distinct word (PyStemmer vs the pure-Python
``snowballstemmer``, when installed), and tokenizing English chunks with ``auto`` vs ``auto-nostem`` with a cold and
a warm word cache.  The ingest cost end to end is ``benchmarks/ingest_speed.py --corpus en``.

    python benchmarks/english_analysis.py [--before /tmp/before-en] [--write]

Prints the tables; ``--write`` replaces the ``english-analysis`` section of ``benchmarks/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO, run_json_worker, update_results_section  # noqa: E402

#: (question, the doc_ids of the pages that answer it).
QUESTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # en/chunk-store
    ("When I ingest a folder again, what happens to the old chunks of a changed document?", ("en/chunk-store",)),
    ("What happens when I re-ingest a changed document?", ("en/chunk-store",)),
    ("Are retracted documents deleted from the store?", ("en/chunk-store",)),
    ("What does the store keep if ingest crashes halfway?", ("en/chunk-store", "en/cli")),
    ("Why is SQLite used for storing chunks?", ("en/chunk-store",)),
    ("Do citations stay valid after a document is edited?", ("en/chunk-store",)),
    # en/bm25
    ("How is the IDF of a term computed?", ("en/bm25",)),
    ("Why is bm25s faster than rank-bm25?", ("en/bm25",)),
    ("How are ties between chunks broken?", ("en/bm25",)),
    ("What do the k1 and b parameters control?", ("en/bm25",)),
    ("Can a saved index be loaded without pickle?", ("en/bm25",)),
    # en/metadata-filters
    ("How do I filter search results by metadata?", ("en/metadata-filters",)),
    ("What happens when a chunk is missing the filtered field?", ("en/metadata-filters",)),
    ("How are dates compared in filters?", ("en/metadata-filters",)),
    ("Which operators can a filter use?", ("en/metadata-filters",)),
    ("Are filters applied before or after scoring?", ("en/metadata-filters", "en/bm25")),
    # en/cli
    ("Which options does ragspine ingest accept?", ("en/cli",)),
    ("How do I get JSON output from a search?", ("en/cli",)),
    ("What happens when a file fails to load during ingest?", ("en/cli", "en/chunk-store")),
    ("Which environment variables set defaults for the command line?", ("en/cli",)),
    ("What does the demo command print?", ("en/cli", "en/quickstart")),
    # en/evaluation
    ("How is the mean reciprocal rank computed?", ("en/evaluation",)),
    ("What is answer recall?", ("en/evaluation",)),
    ("Which datasets are used for the quality benchmarks?", ("en/evaluation",)),
    ("How should benchmark results be reported?", ("en/evaluation",)),
    ("What does nDCG measure?", ("en/evaluation",)),
    # en/quickstart
    ("How do I install the optional extras?", ("en/quickstart",)),
    ("What does make demo do?", ("en/quickstart",)),
    ("How do I attach metadata to a file?", ("en/quickstart", "en/cli")),
    ("Which Python version is needed?", ("en/quickstart",)),
)
DEPTH = 6


def _chunks() -> list[Any]:
    from langchain_ragspine.document_loaders import CorpusLoader
    from langchain_ragspine.text_splitters import ParagraphTextSplitter

    docs = list(CorpusLoader([REPO / "docs" / "demo"]).lazy_load())
    return ParagraphTextSplitter().split_documents(docs)


def _ablations() -> dict[str, Callable[[str], list[str]]]:
    """BM25-only variants of ``auto`` built from this commit's public functions."""
    from langchain_ragspine.text import CJK_CHAR_RE
    from langchain_ragspine.text.english import (
        ENGLISH_STOPWORDS,
        LUCENE_ENGLISH_STOPWORDS,
        english_stem,
        is_latin_word,
    )
    from langchain_ragspine.tokenizers import auto_nostem_tokenize

    def variant(stops: frozenset[str], stem: bool) -> Callable[[str], list[str]]:
        def tokenize(text: str) -> list[str]:
            out = []
            for t in auto_nostem_tokenize(text):
                if CJK_CHAR_RE.search(t) or not is_latin_word(t):
                    out.append(t)
                elif t not in stops:
                    out.append(english_stem(t) if stem else t)
            return out

        return tokenize

    return {
        "stems, no stop words": variant(frozenset(), True),
        "Lucene stop words, no stems": variant(LUCENE_ENGLISH_STOPWORDS | {"s"}, False),
        "stems + Lucene + question words": variant(
            LUCENE_ENGLISH_STOPWORDS | {"s", "what", "when", "where", "which", "who", "whom", "whose", "why", "how"},
            True),
        "stems + the graders' 170 stop words": variant(ENGLISH_STOPWORDS, True),
    }


def _measure(tokenizer: Any, graph_tokenizer: Any | None) -> dict[str, Any]:
    """Retrieval (and, with ``graph_tokenizer``, the offline corrective graph) over the demo chunks."""
    from langchain_ragspine.retrievers import BM25Retriever

    chunks = _chunks()
    t0 = time.perf_counter()
    retriever = BM25Retriever.from_documents(chunks, k=DEPTH, tokenizer=tokenizer)
    build = time.perf_counter() - t0
    rows, latencies = [], []
    for question, pages in QUESTIONS:
        t = time.perf_counter()
        hits = retriever.invoke(question)
        latencies.append(time.perf_counter() - t)
        rank = next((i for i, d in enumerate(hits, 1) if d.metadata.get("doc_id") in pages), None)
        rows.append({"question": question, "rank": rank, "top": [d.metadata.get("chunk_id") for d in hits[:3]]})
    out: dict[str, Any] = {
        "chunks": len(chunks),
        "build_s": build,
        "query_ms": 1000 * statistics.median(latencies),
        "rows": rows,
    }
    if graph_tokenizer is not None:
        from langchain_ragspine.graphs import build_corrective_rag

        graph = build_corrective_rag(retriever, tokenizer=graph_tokenizer)
        for row, (question, pages) in zip(rows, QUESTIONS, strict=True):
            state = graph.invoke({"question": question})
            cited = [c.get("doc_id") for c in state.get("citations") or []]
            row["answered"] = not state.get("refused") and bool(cited)
            row["answer_on_page"] = row["answered"] and cited[0] in pages
            row["answer"] = (state.get("answer") or "")[:100]
    return out


def _stem_costs() -> dict[str, float]:
    """µs per distinct word: PyStemmer and (when installed) the pure-Python snowballstemmer."""
    import Stemmer

    text = " ".join(p.read_text("utf-8") for p in sorted((REPO / "docs").rglob("*.md")))
    words = sorted(set(re.findall(r"[a-z]+", text.lower())))
    out = {"distinct words": float(len(words))}
    c = Stemmer.Stemmer("english")
    c.maxCacheSize = 0
    t = time.perf_counter()
    for _ in range(5):
        for w in words:
            c.stemWord(w)
    out["PyStemmer µs/word"] = (time.perf_counter() - t) / 5 / len(words) * 1e6
    try:
        from snowballstemmer.english_stemmer import EnglishStemmer
    except ImportError:
        return out
    p = EnglishStemmer()
    t = time.perf_counter()
    for w in words:
        p.stemWord(w)
    out["snowballstemmer (pure Python) µs/word"] = (time.perf_counter() - t) / len(words) * 1e6
    out["differing stems"] = float(sum(c.stemWord(w) != p.stemWord(w) for w in words))
    return out


def _tokenize_costs() -> dict[str, float]:
    """µs per English chunk (the English demo chunks): auto-nostem, auto with a cold cache, auto warm."""
    from langchain_ragspine.text import english
    from langchain_ragspine.tokenizers import get_tokenizer

    texts = [c.page_content for c in _chunks() if str(c.metadata.get("doc_id", "")).startswith("en/")] * 20
    out = {}
    for label, name, cold in (("auto-nostem", "auto-nostem", False), ("auto, cold cache", "auto", True),
                              ("auto, warm cache", "auto", False)):
        tok = get_tokenizer(name)
        if cold:
            english._terms.clear()  # noqa: SLF001 - the benchmark measures the cache itself
            t = time.perf_counter()
            for text in texts[: len(texts) // 20]:
                tok(text)
            out[label] = (time.perf_counter() - t) / (len(texts) // 20) * 1e6
            continue
        for text in texts[:50]:
            tok(text)
        t = time.perf_counter()
        for text in texts:
            tok(text)
        out[label] = (time.perf_counter() - t) / len(texts) * 1e6
    return out


def worker(cfg: dict[str, Any]) -> dict[str, Any]:
    warnings.filterwarnings("ignore")
    return _measure(cfg["tokenizer"], cfg["tokenizer"])


def _summary(label: str, res: dict[str, Any]) -> str:
    ranks = [r["rank"] for r in res["rows"]]
    n = len(ranks)
    hit1 = sum(r == 1 for r in ranks) / n
    hit3 = sum(r is not None and r <= 3 for r in ranks) / n
    mrr = sum(1 / r for r in ranks if r) / n
    answer = "—"
    if "answered" in res["rows"][0]:
        answered = sum(r["answered"] for r in res["rows"])
        right = sum(r["answer_on_page"] for r in res["rows"])
        answer = f"{answered} / {n} | {right}"
    else:
        answer = "— | —"
    return f"| {label} | {hit1:.3f} | {hit3:.3f} | {mrr:.3f} | {answer} | {res['query_ms']:.2f} |"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", type=Path, default=None, help="a folder holding the package before the analysis")
    ap.add_argument("--write", action="store_true", help="write the section of benchmarks/RESULTS.md")
    ap.add_argument("--json", type=Path, default=None, help="also write the per-question results here")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    warnings.filterwarnings("ignore")
    load_start = os.getloadavg()
    results: dict[str, dict[str, Any]] = {}
    if args.before is not None:
        results[f"before ({args.before.name}, `auto`)"] = run_json_worker(
            __file__, {"tokenizer": "auto"}, args.before.resolve())
    results["`auto-nostem` (opt-out)"] = _measure("auto-nostem", "auto-nostem")
    results["**`auto` (default)**"] = _measure("auto", "auto")
    for label, fn in _ablations().items():
        results[f"ablation: {label}"] = _measure(fn, None)
    stems, tokenize = _stem_costs(), _tokenize_costs()
    load_end = os.getloadavg()

    n = len(QUESTIONS)
    body = [
        "| configuration | page hit@1 | page hit@3 | MRR@6 | offline graph: answered | answered citing a right page "
        "| query ms (median) |",
        "|---|---:|---:|---:|---:|---:|---:|",
        *(_summary(label, res) for label, res in results.items()),
        "",
        f"Corpus: `docs/demo`, {next(iter(results.values()))['chunks']} chunks (RESTRICTED ones not indexed); {n} "
        "English questions (`QUESTIONS` in the script: five per English page, written for this benchmark, each "
        "with the page(s) that answer it). BM25 top 6; the offline graph is `build_corrective_rag(retriever, "
        "tokenizer=…)` without a model, as `ragspine ask` runs it.",
        "",
        "Per question (rank of the first chunk of an answering page; `-` = not in the top 6; A = answered citing "
        "a right page, a = answered citing another page, r = refused):",
        "",
        "| question | " + " | ".join(label for label, res in results.items() if "answered" in res["rows"][0]) + " |",
        "|---|" + "---|" * sum("answered" in res["rows"][0] for res in results.values()),
    ]
    graph_runs = [res for res in results.values() if "answered" in res["rows"][0]]
    for i, (question, _) in enumerate(QUESTIONS):
        cells = []
        for res in graph_runs:
            row = res["rows"][i]
            mark = "A" if row["answer_on_page"] else "a" if row["answered"] else "r"
            cells.append(f"{row['rank'] or '-'} {mark}")
        body.append(f"| {question} | " + " | ".join(cells) + " |")
    body += [
        "",
        "Cost in this process: " + "; ".join(f"{k} {v:,.2f}" for k, v in stems.items())
        + ". Tokenizing an English demo chunk (µs): " + "; ".join(f"{k} {v:,.0f}" for k, v in tokenize.items())
        + ".",
        "",
        f"Load average: {' / '.join(f'{x:.1f}' for x in load_start)} at the start, "
        f"{' / '.join(f'{x:.1f}' for x in load_end)} at the end ({os.cpu_count()} cores).",
    ]
    text = "\n".join(body) + "\n"
    print(text)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1, ensure_ascii=False), "utf-8")
    if args.write:
        cmd = "python benchmarks/english_analysis.py" + (f" --before {args.before}" if args.before else "") + " --write"
        update_results_section("english-analysis", "English analysis: the demo corpus's English questions",
                               cmd, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
