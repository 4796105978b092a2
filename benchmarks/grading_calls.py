"""Model calls and wall time of the corrective graph with a real chat model: per-document grading vs one call.

For each question, :func:`build_corrective_rag` runs twice over the same BM25 store of the bundled demo corpus
(``open_retriever(store, k=K, mode="bm25")``), side by side in one process: ``per-document`` grades each retrieved
passage with its own call (``make_graders(llm, batch=False)``, the graph before one-call grading), ``one-call``
grades all of them in one prompt (the default).  Counted: chat-model calls (a callback on ``on_chat_model_start``),
wall seconds, whether the graph refused, and how many passages were kept.  One request at a time; the model is the
local one of ``../shared/tools/local-llm`` (served as ``ollama:qwen2.5:7b``)::

    PYTHONPATH=$PWD python benchmarks/grading_calls.py --llm ollama:qwen2.5:7b

writes the ``one-call-grading`` section of ``benchmarks/RESULTS.md`` (``--no-write`` prints it only).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from typing import Any

from _common import update_results_section
from langchain_core.callbacks import BaseCallbackHandler

from langchain_ragspine import ingest, make_chat_model, open_retriever
from langchain_ragspine.cli import demo_corpus_dir
from langchain_ragspine.graphs import build_corrective_rag, make_graders

SECTION = "one-call-grading"
QUESTIONS = (
    "長い段落はどこで切られますか？",
    "Which BM25 engine does the package use?",
    "What happens when I ingest a changed document again?",
)


class CallCounter(BaseCallbackHandler):
    """Counts chat-model calls."""

    def __init__(self) -> None:
        self.calls = 0

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self.calls += 1


def run(graph: Any, question: str) -> dict[str, Any]:
    counter = CallCounter()
    t0 = time.perf_counter()
    final = graph.invoke({"question": question}, {"callbacks": [counter]})
    grade = next(t for t in final["trace"] if t["step"] == "grade_documents")
    return {
        "calls": counter.calls, "seconds": time.perf_counter() - t0, "refused": final["refused"],
        "graded": grade["graded"], "kept": grade["relevant"], "unknown": grade["unknown"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llm", default="ollama:qwen2.5:7b")
    parser.add_argument("--k", type=int, default=6)
    parser.add_argument("--limit", type=int, default=len(QUESTIONS), help="the first N questions")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    llm = make_chat_model(args.llm)
    if llm is None:
        print("no chat model", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as tmp:
        ingest(demo_corpus_dir(), tmp, embedding="none", mode="bm25", progress=False)
        retriever = open_retriever(tmp, k=args.k, mode="bm25")
        graphs = {
            "per-document": build_corrective_rag(retriever, llm, graders=make_graders(llm, batch=False)),
            "one-call": build_corrective_rag(retriever, llm),
        }
        rows = []
        for question in QUESTIONS[: args.limit]:
            for name, graph in graphs.items():
                r = run(graph, question)
                print(name, question, r, file=sys.stderr, flush=True)
                rows.append((question, name, r))
    lines = [
        "| question | grading | model calls | wall s | passages graded | kept | unknown | refused |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for question, name, r in rows:
        lines.append(
            f"| {question} | {name} | {r['calls']} | {r['seconds']:.1f} | {r['graded']} | {r['kept']} | "
            f"{r['unknown']} | {r['refused']} |"
        )
    summary = []
    for name in graphs:
        mine = [r for _, n, r in rows if n == name]
        summary.append(
            f"- {name}: {statistics.mean(r['calls'] for r in mine):.1f} calls and "
            f"{statistics.mean(r['seconds'] for r in mine):.1f} s per question (mean of {len(mine)})"
        )
    body = (
        f"Corrective graph, BM25 top {args.k} of the demo corpus, chat model `{args.llm}` (the local "
        "Qwen2.5-Coder-1.5B Q4_K_M of ../shared/tools/local-llm, 2 shared cores; other engineers were working, so "
        "wall times are indicative — re-run on a quiet machine). Both variants per question, side by side.\n\n"
        + "\n".join(lines) + "\n\n" + "\n".join(summary) + "\n"
    )
    print(body)
    if not args.no_write:
        update_results_section(
            SECTION, "One-call grading: model calls and wall time (corrective graph, real local model)",
            f"PYTHONPATH=$PWD python benchmarks/grading_calls.py --llm {args.llm} --k {args.k} --limit {args.limit}",
            body,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
