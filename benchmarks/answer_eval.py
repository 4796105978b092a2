"""Answer evaluation of every graph on the shared sets (issue 29): ``evaluate_answers`` with and without an LLM.

Over a BM25 store of each set in ``../shared/data`` (JSQuAD valid, Japanese; CMRC 2018 dev, Chinese), built by
:func:`langchain_ragspine.ingest` (``embedding="none"``, default chunking), every graph of
:data:`~langchain_ragspine.graphs.GRAPH_BUILDERS` answers over ``open_retriever(store, k=6, mode="bm25")``:

* ``--llm none`` (default): the offline path (lexical graders, extractive answers), every question of both sets;
* ``--llm SPEC`` (e.g. ``ollama:qwen2.5:7b`` served by ``../shared/tools/local-llm``): the graphs with that chat
  model on a seeded sample (``--n`` questions per set, ``random.Random(--seed)``), judged by ``--judge`` (default
  the same model).  Model replies are cached on disk by prompt, one cache per graph
  (``benchmarks/_work/answer-eval-llm-cache-<graph>.json``) and one for the judge, so a rerun costs nothing, a
  partial run continues where it stopped, and the first run times each graph's own calls (the JSON keeps them).

Each run writes ``benchmarks/_work/answer-eval-<label>.json``; ``--report`` turns the ``none`` and ``llm`` files
into the ``answer-evaluation`` and ``answer-evaluation-llm`` sections of ``benchmarks/RESULTS.md`` (the table and
the paired difference of every pair of configurations; ``--no-llm G`` adds graph G's offline path on the same sample,
so the two models are compared too)::

    RAGSPINE_DATA=../shared/data python benchmarks/answer_eval.py                       # label none
    RAGSPINE_DATA=../shared/data python benchmarks/answer_eval.py --llm ollama:qwen2.5:7b --n 8 --no-llm corrective
    python benchmarks/answer_eval.py --report
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _common import DATA, REPO, git_rev, update_results_section
from answers import JSONFileCache

from langchain_ragspine import ingest, open_retriever
from langchain_ragspine.evaluation import (
    EvalResult,
    answers_markdown,
    compare_paired,
    evaluate_answers,
    load_dataset,
)
from langchain_ragspine.evaluation.datasets import QADataset
from langchain_ragspine.graphs import GRAPH_BUILDERS

WORK = REPO / "benchmarks" / "_work"
SETS = ("jsquad-valid", "cmrc2018-dev")
SECTION = "answer-evaluation"


def run(args: argparse.Namespace) -> dict[str, Any]:
    judge = None
    if args.llm:
        from langchain_ragspine import make_chat_model

        judge = make_chat_model(args.judge or args.llm, cache=JSONFileCache(WORK / "answer-eval-judge-cache.json"))

    def graph_llm(graph_name: str) -> Any:
        """The graphs' model, with a reply cache per graph: two graphs sending the same prompt each pay for it,
        so the first (uncached) run times every graph's own model calls."""
        if not args.llm:
            return None
        from langchain_ragspine import make_chat_model

        return make_chat_model(args.llm, cache=JSONFileCache(WORK / f"answer-eval-llm-cache-{graph_name}.json"))

    import datetime as dt

    out: dict[str, Any] = {"commit": git_rev(), "measured": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
                           "llm": args.llm, "judge": (args.judge or args.llm) if args.llm else None, "seed": args.seed,
                           "n": args.n, "k": args.k, "sets": {}, "no_llm": list(args.no_llm),
                           "cached_at_start": {g: _cached(g) for g in args.graphs} if args.llm else {}}
    configs = [(g, g, graph_llm(g), judge) for g in args.graphs]
    # the same sample without a model, so the two models are compared; not judged (the judge's calls are the cost)
    configs += [(g, f"{g} (no LLM)", None, None) for g in args.no_llm]
    with tempfile.TemporaryDirectory(prefix="ragspine-answer-eval-") as tmp:
        for name in args.sets:
            ds = load_dataset(DATA / name)
            assert isinstance(ds, QADataset), name
            store = Path(tmp) / name
            ingest(DATA / name / "docs", store, embedding="none", mode="bm25", progress=False)
            questions = list(ds.questions)
            if args.n is not None and args.n < len(questions):
                picked = sorted(random.Random(args.seed).sample(range(len(questions)), args.n))
                questions = [questions[i] for i in picked]
            results = []
            for graph_name, label, llm, judged_by in configs:
                graph = GRAPH_BUILDERS[graph_name](open_retriever(store, k=args.k, mode="bm25"), llm=llm)
                t0 = time.perf_counter()
                r = evaluate_answers(graph, ds, name=label, judge=judged_by, questions=questions)
                r.config["seconds"] = time.perf_counter() - t0
                data = r.to_dict()
                for q in data["per_query"]:
                    q.pop("contexts", None)  # the passages' text: not needed for the report, and large
                results.append(data)
                agg = ", ".join(f"{k} {v:.3f}" for k, v in r.aggregate.items() if v is not None)
                print(f"{name} {label}: {agg} ({r.config['seconds']:.0f}s)", file=sys.stderr)
            out["sets"][name] = results
    return out


def _cached(graph_name: str) -> int:
    """Replies already in ``graph_name``'s cache file: 0 means every latency of the run is the model's own."""
    path = WORK / f"answer-eval-llm-cache-{graph_name}.json"
    return len(json.loads(path.read_text("utf-8"))) if path.exists() else 0


def call_seconds(log: Path) -> str:
    """The model's time per call, read off the local server's log (one JSON line per reply, ``t`` to the second;
    the server answers one request at a time, so the gap between consecutive replies is one call)."""
    import datetime as dt
    import statistics

    if not log.exists():
        return "the server's log was not found, so no per-call time is given."
    stamps = [dt.datetime.fromisoformat(json.loads(line)["t"].replace("Z", "+00:00"))
              for line in log.read_text("utf-8").splitlines() if line.strip()]
    gaps = [(b - a).total_seconds() for a, b in zip(stamps, stamps[1:], strict=False)]
    gaps = [g for g in gaps if g < 600]  # an idle pause between runs is not a call
    if not gaps:
        return "the server's log holds too few replies for a per-call time."
    return (f"the model took a median {statistics.median(gaps):.0f} s per call (p90 "
            f"{statistics.quantiles(gaps, n=10)[-1]:.0f} s; {len(gaps)} calls in the server's log, while other jobs "
            "shared the 2 cores), so a question costs about (llm_calls + 2 judge calls) × that.")


def _tables(run_: dict[str, Any]) -> list[str]:
    parts = []
    for name, results in run_["sets"].items():
        res = [EvalResult.from_json(json.dumps(r)) for r in results]
        parts += ["", f"*{name}*", "", answers_markdown(res)]
    return [*parts, ""]


def report(server_log: Path) -> int:
    """Write the ``answer-evaluation`` section from ``answer-eval-none.json`` and the ``answer-evaluation-llm``
    section from every ``answer-eval-llm*.json``; a section whose runs are absent is left as it is."""
    llm_runs = [p for p in sorted(WORK.glob("answer-eval-llm*.json")) if "cache" not in p.name]
    for path in llm_runs:
        run_ = json.loads(path.read_text("utf-8"))
        names = [r["name"] for r in next(iter(run_["sets"].values()))]
        fresh = run_.get("cached_at_start") and not any(run_["cached_at_start"].values())
        latency = (
            "Every graph's reply cache was empty when the run started, so p50 / p95 are the model's own time per "
            "question (the judge's calls are not in them)"
            if fresh else
            "The p50 / p95 columns include replies served from the on-disk reply cache (a rerun), so they are not "
            "the model's latency"
        )
        body = [
            f"**With a local model**: `{run_['llm']}` served by `../shared/tools/local-llm` "
            "(Qwen2.5-Coder-1.5B-Instruct Q4_K_M, llama.cpp, 2 CPU cores), judged by the same model "
            f"(`{run_['judge']}`), configurations {', '.join(names)}, on one sample of {run_['n']} questions per set "
            f"(`random.Random({run_['seed']}).sample`, sorted), the same BM25 store as the no-LLM rows, `k={run_['k']}`"
            + (" (fewer passages than the no-LLM rows' 6: shorter prompts, so more questions fit the run)"
               if run_["k"] < 6 else "") + ". "
            "A configuration marked *(no LLM)* is the graph's offline path on the same questions (not judged), so "
            f"its pairs compare the two models (none and the local one). {latency}; {call_seconds(server_log)} "
            "With this many questions an interval is wide and a 1.5B model's answers are weak: the rows show what "
            "the measures report with a real model, not how good a production model is.",
            *_tables(run_),
        ]
        update_results_section(
            f"{SECTION}-llm",
            "Answer evaluation with a real local model: every graph on one sample (issue 29)",
            f"RAGSPINE_DATA=../shared/data python benchmarks/answer_eval.py --llm {run_['llm']} --n {run_['n']} --k {run_['k']} "
            f"--no-llm {' '.join(run_.get('no_llm') or [])}; python benchmarks/answer_eval.py --report".replace(
                " --no-llm ;", ";"),
            "\n".join(body), measured=run_.get("measured"), commit=run_.get("commit"),
        )
        print(f"updated {SECTION}-llm in benchmarks/RESULTS.md", file=sys.stderr)
    if not (WORK / "answer-eval-none.json").exists():
        print("answer-eval-none.json not found: the no-LLM section is left as it is", file=sys.stderr)
        return 0
    run_ = json.loads((WORK / "answer-eval-none.json").read_text("utf-8"))
    stamp = {"measured": run_.get("measured"), "commit": run_.get("commit")}
    parts = [
        "**No LLM** (`llm=None`: lexical graders and the extractive answer, the default `ask` path), every "
        f"question, BM25 store (`embedding=\"none\"`, default chunking), `k={run_['k']}`.",
        *_tables(run_),
    ]
    before = WORK / "answer-eval-none-before-brackets.json"
    if before.exists() and (WORK / "answer-eval-none.json").exists():
        old, new = (json.loads(f.read_text("utf-8")) for f in (before, WORK / "answer-eval-none.json"))
        cells = []
        for name in new["sets"]:
            a, b = (EvalResult.from_json(json.dumps(run_["sets"][name][0])) for run_ in (old, new))
            a.name, b.name = "before", "after"
            found = {c.metric: c for c in compare_paired(a, b, ["answer_contains", "f1", "citation_precision"])}
            cells.append(f"{name}: " + ", ".join(f"{m} {c.cell()}" for m, c in found.items()))
        parts += [
            "Sentence ends inside CJK brackets (commit 54abc2c: `（既定 6。…）` is one sentence, so no extractive answer "
            "starts mid-sentence) change the no-LLM rows as follows (simple graph, after − before, paired; the other "
            "graphs move the same way): " + "; ".join(cells) + " — whole sentences are longer, so token F1 and, on "
            "JSQuAD, citation precision drop a little; correctness does not move.",
            "",
        ]
    parts.append(
        "Measures (`langchain_ragspine.evaluation.answers`): *answer_contains* a gold answer occurs in the answer "
        "(NFKC, case folded); *exact_match* / *f1* SQuAD's, over CJK characters (an extractive answer is a whole "
        "sentence, so EM is ~0 and F1 low by construction); *citation_precision* cited passages that are gold "
        "passages (the question's article, holding a gold answer); *citation_recall* a gold passage is cited "
        "(answered questions); *faithfulness* answer sentences lexically supported by a cited passage (support >= "
        "0.5); *judge_faithfulness* / *judge_relevance* the judge's verdicts, *judge_unknown_rate* replies it could "
        "not parse (never counted as a pass); *refusal_rate*; *false_refusal_rate* refusals although a retriever "
        "call returned a gold passage; *llm_calls* per question; p50 / p95 ms per question. The rows with a "
        "real model are in the section \"Answer evaluation with a real local model\" below (every graph on one sample, "
        "real latencies)."
    )
    update_results_section(
        SECTION,
        "Answer evaluation: every graph, with and without an LLM (issue 29)",
        "RAGSPINE_DATA=../shared/data python benchmarks/answer_eval.py; python benchmarks/answer_eval.py --report",
        "\n".join(parts), **stamp,
    )
    print(f"updated {SECTION} in benchmarks/RESULTS.md", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--sets", nargs="+", default=list(SETS))
    ap.add_argument("--graphs", nargs="+", default=list(GRAPH_BUILDERS), choices=list(GRAPH_BUILDERS))
    ap.add_argument("--llm", default=None, metavar="SPEC", help="chat model of the graphs (default none)")
    ap.add_argument("--judge", default=None, metavar="SPEC", help="judge model (default: --llm; none without it)")
    ap.add_argument("--no-llm", nargs="*", default=[], choices=list(GRAPH_BUILDERS), metavar="GRAPH",
                    help="with --llm: these graphs also answer the sample without a model, '<graph> (no LLM)'")
    ap.add_argument("--n", type=int, default=None, help="questions per set (default: all)")
    ap.add_argument("--k", type=int, default=6)
    ap.add_argument("--seed", type=int, default=20261204)
    ap.add_argument("--report", action="store_true")
    ap.add_argument("--label", default=None, help="names answer-eval-<label>.json (default: none, or llm with --llm; "
                    "--report reads answer-eval-none.json and every answer-eval-llm*.json)")
    ap.add_argument("--server-log", type=Path, default=Path("/tmp/ollama_api_server.log"),
                    help="the local-llm server's log, for the model's time per call (--report)")
    args = ap.parse_args(argv)
    WORK.mkdir(parents=True, exist_ok=True)
    if args.report:
        return report(args.server_log)
    result = run(args)
    label = args.label or ("llm" if args.llm else "none")
    path = WORK / f"answer-eval-{label}.json"
    path.write_text(json.dumps(result, ensure_ascii=False), "utf-8")
    print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
