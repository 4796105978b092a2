"""Retrieval quality on the shared JSQuAD / CMRC 2018 sets: answer recall@1/5/10 per configuration.

Answer recall@k (see ../shared/data/README.md): a question is a hit at k when one of the top-k chunks comes from the
question's own document AND contains one of its gold answers verbatim (after NFKC on both sides).  Every question
of each set is used.  Our rows use ParagraphTextSplitter defaults (480/80); LangChain baselines run on the same
chunks and, for the article's setup, on RecursiveCharacterTextSplitter 500/100 chunks.

    python benchmarks/quality.py [--sets jsquad-valid cmrc2018-dev] [--limit N] [--no-baselines]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path

from _common import DATA, update_results_section
from langchain_core.documents import Document

from langchain_ragspine.document_loaders import CorpusLoader
from langchain_ragspine.retrievers import BM25Retriever
from langchain_ragspine.text_splitters import ParagraphTextSplitter
from langchain_ragspine.tokenizers import fugashi_tokenize, whitespace_tokenize

KS = (1, 5, 10)


def nfkc(s: str) -> str:
    return unicodedata.normalize("NFKC", s)


def load_set(name: str, limit: int | None) -> tuple[list[Document], list[dict]]:
    root = DATA / name
    docs = CorpusLoader(root / "docs").load()
    with open(root / "questions.jsonl", encoding="utf-8") as f:
        questions = [json.loads(line) for line in f if line.strip()]
    return docs, questions[:limit] if limit else questions


def answer_recall(
    search: Callable[[str], Sequence[Document]], questions: list[dict]
) -> tuple[dict[int, float], float]:
    hits = dict.fromkeys(KS, 0)
    t0 = time.perf_counter()
    for q in questions:
        answers = [nfkc(a) for a in q["answers"]]
        for rank, doc in enumerate(search(q["question"])[: max(KS)]):
            if doc.metadata.get("doc_id") == q["doc_id"] and any(a in nfkc(doc.page_content) for a in answers):
                for k in KS:
                    hits[k] += rank < k
                break
    ms = (time.perf_counter() - t0) / max(len(questions), 1) * 1000
    return {k: hits[k] / len(questions) for k in KS}, ms


def run(sets: list[str], limit: int | None, baselines: bool) -> str:
    rows = []
    for name in sets:
        docs, questions = load_set(name, limit)
        chunks = ParagraphTextSplitter().split_documents(docs)
        configs: list[tuple[str, str, Callable[[], Callable[[str], Sequence[Document]]]]] = []
        for tok in ("auto", "cjk", "fugashi", "whitespace"):
            configs.append(
                (f"ragspine BM25Retriever, tokenizer={tok}", "paragraph 480/80",
                 lambda tok=tok: BM25Retriever.from_documents(chunks, k=max(KS), tokenizer=tok).invoke)
            )
        if baselines:
            from langchain_community.retrievers import BM25Retriever as LCBM25
            from langchain_text_splitters import RecursiveCharacterTextSplitter

            rec = RecursiveCharacterTextSplitter(chunk_size=500, chunk_overlap=100).split_documents(docs)
            configs += [
                ("langchain_community BM25Retriever (rank_bm25), whitespace", "paragraph 480/80",
                 lambda: LCBM25.from_documents(chunks, k=max(KS), preprocess_func=whitespace_tokenize).invoke),
                ("langchain_community BM25Retriever (rank_bm25), fugashi", "paragraph 480/80",
                 lambda: LCBM25.from_documents(chunks, k=max(KS), preprocess_func=fugashi_tokenize).invoke),
                ("langchain_community BM25Retriever (rank_bm25), fugashi", "recursive 500/100 (article)",
                 lambda: LCBM25.from_documents(rec, k=max(KS), preprocess_func=fugashi_tokenize).invoke),
                ("ragspine BM25Retriever, tokenizer=auto", "recursive 500/100 (article)",
                 lambda: BM25Retriever.from_documents(rec, k=max(KS), tokenizer="auto").invoke),
            ]
        for label, chunking, make in configs:
            t0 = time.perf_counter()
            search = make()
            build = time.perf_counter() - t0
            recall, ms = answer_recall(search, questions)
            rows.append((name, len(questions), label, chunking, recall, build, ms))
            print(f"{name:13s} {label:58s} {chunking:28s} " + " ".join(f"R@{k} {recall[k]:.4f}" for k in KS)
                  + f"  build {build:.1f}s  {ms:.1f} ms/q", flush=True)
    head = "| set | questions | retriever | chunks | R@1 | R@5 | R@10 | build s | ms/query |\n|---|---|---|---|---|---|---|---|---|\n"
    body = "".join(
        f"| {n} | {q} | {label} | {ch} | {r[1]:.4f} | {r[5]:.4f} | {r[10]:.4f} | {b:.1f} | {ms:.1f} |\n"
        for n, q, label, ch, r, b, ms in rows
    )
    return head + body


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", nargs="+", default=["jsquad-valid", "cmrc2018-dev"])
    ap.add_argument("--limit", type=int, default=None, help="first N questions per set (default: all)")
    ap.add_argument("--no-baselines", action="store_true", help="skip the LangChain baselines")
    args = ap.parse_args()
    missing = [s for s in args.sets if not (DATA / s / "questions.jsonl").exists()]
    if missing:
        print(f"benchmark data not found: {', '.join(str(DATA / s) for s in missing)} "
              "(expected ../shared/data beside the repo, or set RAGSPINE_DATA)", file=sys.stderr)
        return 2
    table = run(args.sets, args.limit, not args.no_baselines)
    note = (
        "Answer recall@k: a top-k chunk from the question's own article contains a gold answer verbatim (NFKC).\n"
        "All questions of each set unless the command says --limit.\n\n"
    )
    command = "python benchmarks/quality.py" + "".join(f" {a}" for a in sys.argv[1:])
    if not args.limit:
        update_results_section("quality-bm25", "BM25 answer recall by tokenizer (and LangChain baselines)", command,
                               note + table)
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
