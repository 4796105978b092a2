"""Answer quality on the shared sets: the deterministic extractive answer of ``ragspine ask``, and the LLM path.

Two measurements, on fixed seeded samples of each set in ``../shared/data`` (JSQuAD valid, Japanese; CMRC 2018 dev,
Chinese), over a BM25 store built by :func:`langchain_ragspine.ingest` (``embedding="none"``, default chunking):

* ``extractive`` — the default ``ask`` path: :func:`build_corrective_rag` with ``llm=None`` over
  ``open_retriever(store, k=6, mode="bm25")``.  Per set: how often the answer contains a gold answer (NFKC),
  how often the graph refuses, and how often a citation names the gold article.
* ``llm`` — one chat-model call per question: :func:`make_answer_chain` with the chat model over the BM25 top
  ``--llm-k`` (default 3; no grading step, so "before" and "after" send the model exactly the same prompts).  Per set: gold answer
  contained, "I don't know", citations present, a citation naming the gold article, answers whose citations the
  model wrote (valid ``[n]`` markers) vs answers cited by attribution, answers with an unsupported sentence.
  Model replies are cached on disk (``benchmarks/_work/answers-llm-cache.json``, keyed by prompt and model), so a
  second run with other package code — "before" vs "after" — sends the model the same prompts and gets the same
  replies without calling it again.

Each run writes ``benchmarks/_work/answers-<label>.json``; ``--report`` turns the ``before`` / ``after`` files into
the ``extractive-answers`` section of ``benchmarks/RESULTS.md``.  Run "before" with ``PYTHONPATH`` pointing at a
checkout of the older code (``git archive main | tar -x -C /tmp/base``)::

    PYTHONPATH=/tmp/base python benchmarks/answers.py --label before
    PYTHONPATH=$PWD python benchmarks/answers.py --label after
    PYTHONPATH=$PWD python benchmarks/answers.py --label before --llm ollama:qwen2.5:7b --only llm   # served by
    PYTHONPATH=$PWD python benchmarks/answers.py --label after --llm ollama:qwen2.5:7b --only llm    # local-llm
    python benchmarks/answers.py --report

``--cache-only`` measures the LLM path from cached replies alone (the model is not called; a question with no
cached reply is left out), so a partial LLM run can be reported and continued later.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import tempfile
import time
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import DATA, REPO, update_results_section
from langchain_core.caches import RETURN_VAL_TYPE, BaseCache
from langchain_core.load import dumpd, load

import langchain_ragspine
from langchain_ragspine import ingest, open_retriever
from langchain_ragspine.chains import is_dont_know, make_answer_chain
from langchain_ragspine.evaluation import load_dataset
from langchain_ragspine.evaluation.datasets import QADataset, QAQuestion
from langchain_ragspine.graphs import build_corrective_rag

WORK = REPO / "benchmarks" / "_work"
SETS = ("jsquad-valid", "cmrc2018-dev")
SECTION = "extractive-answers"


def nfkc(text: str) -> str:
    return unicodedata.normalize("NFKC", text or "")


def sample(questions: Sequence[QAQuestion], n: int, seed: int) -> list[QAQuestion]:
    """``n`` questions drawn without replacement by ``random.Random(seed)``, in file order."""
    if n >= len(questions):
        return list(questions)
    picked = sorted(random.Random(seed).sample(range(len(questions)), n))
    return [questions[i] for i in picked]


class JSONFileCache(BaseCache):
    """A LangChain LLM cache in one JSON file: ``{sha1(prompt + llm_string): [generation, …]}``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.data: dict[str, Any] = json.loads(path.read_text("utf-8")) if path.exists() else {}

    @staticmethod
    def _key(prompt: str, llm_string: str) -> str:
        return hashlib.sha1((prompt + "\x00" + llm_string).encode()).hexdigest()

    def lookup(self, prompt: str, llm_string: str) -> RETURN_VAL_TYPE | None:
        hit = self.data.get(self._key(prompt, llm_string))
        return None if hit is None else [load(g, allowed_objects="core") for g in hit]

    def update(self, prompt: str, llm_string: str, return_val: RETURN_VAL_TYPE) -> None:
        self.data[self._key(prompt, llm_string)] = [dumpd(g) for g in return_val]
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, ensure_ascii=False), "utf-8")
        tmp.replace(self.path)

    def clear(self, **kwargs: Any) -> None:
        self.data = {}


def build_store(ds: QADataset, root: Path) -> Path:
    store = root / ds.name
    ingest(DATA / ds.name / "docs", store, embedding="none", mode="bm25", progress=False)
    return store


def contains_gold(answer: str, q: QAQuestion) -> bool:
    text = nfkc(answer)
    return any(nfkc(a) in text for a in q.answers if a)


def run_extractive(ds: QADataset, store: Path, questions: list[QAQuestion]) -> list[dict[str, Any]]:
    graph = build_corrective_rag(open_retriever(store, k=6, mode="bm25"), llm=None, relax_filters=False)
    rows = []
    for q in questions:
        state = graph.invoke({"question": q.question})
        citations = state.get("citations") or []
        # the same question with its own article filtered out: nothing can answer it, the graph should refuse
        unanswerable = graph.invoke({"question": q.question, "filters": {"doc_id": {"ne": q.doc_id}}})
        rows.append({
            "unanswerable_refused": bool(unanswerable.get("refused")),
            "id": q.id,
            "hit": contains_gold(state.get("answer", ""), q),
            "refused": bool(state.get("refused")),
            "cites_gold_doc": any(c.get("doc_id") == q.doc_id for c in citations),
            "chars": len(state.get("answer") or ""),
            "answer": state.get("answer") or "",
        })
    return rows


def run_llm(
    ds: QADataset, store: Path, questions: list[QAQuestion], llm: Any, k: int, *, cache_only: bool = False
) -> list[dict[str, Any]]:
    """One chat-model call per question (see the module docstring).  With ``cache_only`` the model is unreachable
    and a question whose reply is not in the cache is left out (the chain fell back to the extractive answer)."""
    retriever = open_retriever(store, k=k, mode="bm25")
    chain = make_answer_chain(llm, k=k)
    rows = []
    for q in questions:
        t0 = time.perf_counter()
        docs = retriever.invoke(q.question)
        out = chain.invoke({"question": q.question, "documents": docs})
        if cache_only and out.get("mode") == "extractive_fallback":
            print(f"  {q.id}: no cached reply, left out", file=sys.stderr)
            continue
        kept_hit = None
        if out.get("warning"):  # what the uncited reply said (same prompt: the cached reply, no second model call)
            kept = make_answer_chain(llm, k=k, uncited="warn").invoke({"question": q.question, "documents": docs})
            kept_hit = contains_gold(kept.get("answer", ""), q)
        answer = out.get("answer", "")
        citations = out.get("citations") or []
        attributed = [c for c in citations if c.get("attributed")]
        rows.append({
            "id": q.id,
            "question": q.question,
            "answer": answer,
            "hit": contains_gold(answer, q),
            "refused": is_dont_know(answer),
            "mode": out.get("mode"),
            "cited": bool(citations),
            "cites_gold_doc": any(c.get("doc_id") == q.doc_id for c in citations),
            "model_cited": bool(citations) and len(attributed) < len(citations),
            "attributed": bool(attributed),
            "unsupported": bool(out.get("unsupported_sentences")),
            "invalid": bool(out.get("invalid_citations")),
            "warning": out.get("warning"),
            "uncited_reply_had_gold": kept_hit,
            "seconds": round(time.perf_counter() - t0, 2),
        })
        print(f"  {q.id}: hit={rows[-1]['hit']} cited={rows[-1]['cited']} {rows[-1]['seconds']}s", file=sys.stderr)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", nargs="+", default=list(SETS))
    ap.add_argument("--label", default="after", help="names the output file answers-<label>.json")
    ap.add_argument("--n", type=int, default=500, help="questions per set for the extractive path (500)")
    ap.add_argument("--llm-n", type=int, default=25, help="questions per set for the LLM path (25)")
    ap.add_argument("--llm-k", type=int, default=3, help="passages per LLM prompt (3: prompt time dominates here)")
    ap.add_argument("--seed", type=int, default=20240601)
    ap.add_argument("--llm", default=None, metavar="SPEC", help="chat model for the LLM path (e.g. ollama:qwen2.5:7b)")
    ap.add_argument("--only", choices=["extractive", "llm"], default=None)
    ap.add_argument("--report", action="store_true", help="write RESULTS.md from answers-before/after.json")
    ap.add_argument("--cache-only", action="store_true",
                    help="LLM path from cached replies only: the model is not called, uncached questions are left out")
    args = ap.parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    if args.report:
        return report()
    out_path = WORK / f"answers-{args.label}.json"
    result: dict[str, Any] = {"package": str(Path(langchain_ragspine.__file__).parent), "seed": args.seed}
    llm = None
    if args.llm and args.only != "extractive":
        from langchain_ragspine import make_chat_model  # the root: the same name in a --before package

        if args.cache_only:  # nothing listens on the discard port: a cache miss fails at once and is left out
            import os

            os.environ["OLLAMA_HOST"] = "http://127.0.0.1:9"
        llm = make_chat_model(args.llm, cache=JSONFileCache(WORK / "answers-llm-cache.json"))
        result["llm"] = args.llm
    with tempfile.TemporaryDirectory(prefix="ragspine-answers-") as tmp:
        for name in args.sets:
            ds = load_dataset(DATA / name)
            assert isinstance(ds, QADataset), name
            store = build_store(ds, Path(tmp))
            if args.only != "llm":
                t0 = time.perf_counter()
                rows = run_extractive(ds, store, sample(ds.questions, args.n, args.seed))
                result.setdefault("extractive", {})[name] = rows
                print(f"{name} extractive: {summary(rows)} ({time.perf_counter() - t0:.0f}s)", file=sys.stderr)
            if llm is not None:
                rows = run_llm(ds, store, sample(ds.questions, args.llm_n, args.seed + 1), llm, args.llm_k,
                               cache_only=args.cache_only)
                result["llm_k"] = args.llm_k
                result["llm_n"] = args.llm_n
                result.setdefault("llm_rows", {})[name] = rows
                print(f"{name} llm: {summary(rows)}", file=sys.stderr)
    saved: dict[str, Any] = json.loads(out_path.read_text("utf-8")) if out_path.exists() else {}
    for name, rows in result.get("llm_rows", {}).items():  # a rerun served from the reply cache keeps the timing
        before = {r["id"]: r.get("seconds") for r in saved.get("llm_rows", {}).get(name, [])}
        for r in rows:
            if r["seconds"] < 1.0 and before.get(r["id"]):
                r["seconds"] = before[r["id"]]
    saved.update(result)  # an extractive run and an LLM run of the same label share one file
    out_path.write_text(json.dumps(saved, ensure_ascii=False, indent=1), "utf-8")
    print(f"wrote {out_path}", file=sys.stderr)
    return 0


def rate(rows: Sequence[dict[str, Any]], key: str) -> float:
    return sum(bool(r.get(key)) for r in rows) / len(rows) if rows else float("nan")


def summary(rows: Sequence[dict[str, Any]]) -> str:
    keys = ("hit", "refused", "cites_gold_doc", "cited", "unanswerable_refused")
    return ", ".join(f"{k} {rate(rows, k):.3f}" for k in keys if k in rows[0])


def report() -> int:
    runs = {label: json.loads((WORK / f"answers-{label}.json").read_text("utf-8")) for label in ("before", "after")}
    lines = [
        "The default `ask` path (corrective graph, no LLM: lexical graders and the extractive answer) over a BM25 "
        "store (`ingest(..., embedding=\"none\")`, default chunking, `k=6`), on a fixed sample of each set "
        f"(`random.Random({runs['after']['seed']})`, 500 questions). *gold in answer*: a gold answer string occurs "
        "in the answer (NFKC); *refused*: the graph answered \"insufficient context\" / \"I don't know\"; "
        "*cites gold article*: a citation names the question's own article; *refused, article filtered out*: the "
        "same questions asked with the filter `doc_id != gold` (and `relax_filters=False`), which no remaining "
        "chunk can answer — the share the graph refuses (higher is better). *before* is the package as it was before "
        "issue 9 §3 (main at 51ca4b5), *after* with it (answers merge + the document title as evidence, e269663; "
        "the answer path's code is the same at the commit stamped above); same sample, same store.",
        "",
        "| set | code | gold in answer | refused | cites gold article | mean answer chars | "
        "refused, article filtered out |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in SETS:
        for label in ("before", "after"):
            rows = runs[label].get("extractive", {}).get(name)
            if rows:
                chars = sum(r["chars"] for r in rows) / len(rows)
                lines.append(
                    f"| {name} | {label} | {rate(rows, 'hit'):.3f} | {rate(rows, 'refused'):.3f} | "
                    f"{rate(rows, 'cites_gold_doc'):.3f} | {chars:.0f} | {rate(rows, 'unanswerable_refused'):.3f} |"
                )
    if any(r.get("llm_rows") for r in runs.values()):
        spec = runs["after"].get("llm") or runs["before"].get("llm")
        # before and after over the same questions: those with a model reply in both runs
        both = {name: {r["id"] for r in runs["after"].get("llm_rows", {}).get(name, [])}
                & {r["id"] for r in runs["before"].get("llm_rows", {}).get(name, [])} for name in SETS}
        measured = ", ".join(f"{name} {len(both[name])}" for name in SETS)
        llm_n = runs["after"].get("llm_n", 25)
        lines += [
            "",
            f"LLM path: `{spec}` served by `../shared/tools/local-llm` (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, "
            "llama.cpp, temperature 0), one model call per question: the **answer chain** (`make_answer_chain(llm, "
            f"k={runs['after'].get('llm_k')})`, default prompt) over the BM25 top {runs['after'].get('llm_k')} "
            "of the same store, no grading (3 passages rather than the default 6: on 2 shared cores the prompt "
            f"takes most of a minute per passage set). A sample of {llm_n} questions per set "
            f"(`random.Random({runs['after']['seed'] + 1})`); measured: {measured} (questions with a model reply; "
            f"the rest had none yet, see below). Replies are cached by prompt, so *before* and *after* "
            "parse the very same model replies. *model-cited*: the answer kept at least one valid `[n]` the model "
            "wrote; *attributed*: citations added by attribution because the reply had no valid marker; "
            "*unsupported*: an answer sentence no passage supports (reported in `unsupported_sentences`); "
            "*uncited, refused*: replies with no valid marker and no attributable sentence, which the chain turns "
            "into \"I don't know\" with a `warning` (counted in *I don't know* too).",
            "",
            "| set | code | questions | gold in answer | I don't know | citations present | cites gold article | "
            "model-cited | attributed | unsupported sentence | uncited, refused | median s/question (model call) |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for name in SETS:
            for label in ("before", "after"):
                rows = [r for r in runs[label].get("llm_rows", {}).get(name, []) if r["id"] in both[name]]
                if rows:
                    secs_all = sorted(r["seconds"] for r in runs["after"]["llm_rows"][name] if r["id"] in both[name])
                    median = secs_all[len(secs_all) // 2]
                    secs = f"{median:.0f}" if median >= 1.0 else "n/a (cached)"
                    lines.append(
                        f"| {name} | {label} | {len(rows)} | {rate(rows, 'hit'):.2f} | {rate(rows, 'refused'):.2f} | "
                        f"{rate(rows, 'cited'):.2f} | {rate(rows, 'cites_gold_doc'):.2f} | "
                        f"{rate(rows, 'model_cited'):.2f} | {rate(rows, 'attributed'):.2f} | "
                        f"{rate(rows, 'unsupported'):.2f} | {rate(rows, 'warning'):.2f} | {secs} |"
                    )
        if any(len(both[name]) < llm_n for name in SETS):
            lines += [
                "",
                f"Not every question of the {llm_n}-per-set sample has a model reply yet (the model took 1.5-10 "
                "minutes per call on the shared machine). To continue: start the server as "
                "`../shared/tools/local-llm/README.md` says, then `python benchmarks/answers.py --label after "
                f"--llm {spec} --only llm` (cached replies are reused, only the missing ones call the model), "
                f"`PYTHONPATH=<main before the answers merge> python benchmarks/answers.py --label before --llm {spec} "
                "--only llm --cache-only`, and `--report`.",
            ]
    update_results_section(
        SECTION,
        "Answers: the extractive answer of `ask` and the LLM path (issue 9 §3)",
        "RAGSPINE_DATA=../shared/data python benchmarks/answers.py --label before|after [--llm ollama:qwen2.5:7b "
        "--only llm]; python benchmarks/answers.py --report",
        "\n".join(lines),
    )
    print(f"updated {SECTION} in benchmarks/RESULTS.md", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
