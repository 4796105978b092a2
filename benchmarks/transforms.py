"""Query transformations on the shared sets: the glossary rewriter's quality, and each LLM transformation's cost.

Three measurements on ``../shared/data`` (JSQuAD valid, Japanese; CMRC 2018 dev, Chinese), every row over the
package's BM25 (``mode_factory("bm25")``, tokenizer ``auto``, default 480/80 chunks):

* ``glossary`` — :class:`~langchain_ragspine.retrievers.GlossaryRetriever` with the set's language glossary,
  ``docs/glossaries/general-ja.yaml`` / ``general-zh.yaml`` (hand-written everyday synonyms, not tuned on the sets) against BM25 alone, on every question: answer recall@1/5/10,
  nDCG@10, the paired difference with its 95% bootstrap interval, and how many questions the glossary rewrote.
* ``cost`` — each LLM transformation (HyDE, multi-query, RAG-Fusion, step-back, decomposition) with a scripted,
  instant chat model that writes distinct queries from the question: chat-model calls per question and base
  searches per question (counted), and the transformation's own latency per question (p50/p95, LLM time ~0) next to
  BM25 alone.  Quality under a scripted model means nothing, so it is not reported.
* ``--llm SPEC`` (optional) — HyDE and multi-query with a real chat model (e.g. ``ollama:qwen2.5:7b`` served by
  ``../shared/tools/local-llm``) on the first ``--llm-limit`` questions of each set: answer recall@1/@5 with the
  paired difference to BM25 on the same questions, chat-model calls and latency per question.  Replies are kept
  with their wall time in ``benchmarks/_work/transforms-llm-cache.json``, so an interrupted run resumes.

    python benchmarks/transforms.py [--sets jsquad-valid cmrc2018-dev] [--limit N] [--cost-limit 300]
                                    [--llm ollama:qwen2.5:7b --llm-limit 300 --llm-transforms hyde multi_query]

Writes the ``transforms`` section of ``benchmarks/RESULTS.md`` unless ``--limit`` is given, and with ``--llm`` the
``transforms-llm`` section when ``--llm-limit`` is at least 300 (a smaller sample only prints).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from _common import DATA, REPO, update_results_section
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.load import dumpd, load
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.retrievers import BaseRetriever
from pydantic import PrivateAttr
from quality import GLOSSARIES

from langchain_ragspine.chat_models import make_chat_model
from langchain_ragspine.evaluation import EvalResult, compare_paired, evaluate, load_dataset
from langchain_ragspine.pipeline.modes import mode_factory
from langchain_ragspine.pipeline.plan import RetrievalPlan, retriever_factory
from langchain_ragspine.retrievers import GlossaryQueryRewriter, invoke_retriever
from langchain_ragspine.specs import LLM_QUERY_TRANSFORMS

KS = (1, 5, 10)
DEPTH = 10
LLM_CACHE = REPO / "benchmarks" / "_work" / "transforms-llm-cache.json"
DIFF = ["answer_recall@1", "answer_recall@5"]


class CountingRetriever(BaseRetriever):
    """Passes every call to ``inner`` (through the retriever-call contract) and counts the calls."""

    inner: BaseRetriever
    calls: int = 0

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None,
        filter: Mapping[str, Any] | None = None,
    ) -> list[Document]:
        self.calls += 1
        return invoke_retriever(self.inner, query, k=k, filter=filter)


class ScriptedChatModel(BaseChatModel):
    """An instant chat model that writes three distinct queries from the question in its prompt (the text after
    ``Question:`` / ``related to:``, else the last message) and counts its calls."""

    calls: int = 0

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        self.calls += 1
        text = str(messages[-1].content)
        m = re.search(r"(?:Question: |related to: )(.+)", text)
        q = (m.group(1) if m else text).strip()
        half = max(1, len(q) // 2)
        reply = f"{q[:half]}\n{q[half:]}\n{q} 概要"
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=reply))])

    @property
    def _llm_type(self) -> str:
        return "scripted"


def _row(r: EvalResult, base: EvalResult | None, extra: str = "") -> str:
    cells = [f"{r.aggregate.get(c, 0.0):.4f}" for c in ("answer_recall@1", "answer_recall@5", "answer_recall@10")]
    nd = r.aggregate.get("ndcg@10")
    cells.append("-" if nd is None else f"{nd:.4f}")
    if base is not None:
        paired = {} if r is base else {c.metric: c for c in compare_paired(base, r, DIFF)}
        cells += [paired[c].cell() if c in paired else "baseline" for c in DIFF]
    return f"| {r.name} | " + " | ".join(cells) + f" | {r.latency_ms['p50']:.2f} | {r.latency_ms['p95']:.2f} |{extra}\n"


def _table(results: Sequence[EvalResult], extra_head: str = "", extras: Sequence[str] = ()) -> str:
    head = ("| configuration | ans R@1 | ans R@5 | ans R@10 | nDCG@10 | Δ ans R@1 vs BM25 [95%] | Δ ans R@5 vs BM25 "
            "[95%] | p50 ms | p95 ms |" + extra_head + "\n|---|" + "---:|" * 4 + "---|" * 2 + "---:|" * 2
            + "---:|" * extra_head.count("|") + "\n")
    return head + "".join(_row(r, results[0], extras[i] if extras else "") for i, r in enumerate(results))


def glossary_section(name: str, limit: int | None) -> str:
    dataset = load_dataset(DATA / name)
    bm25 = mode_factory("bm25", k=DEPTH)
    plain = evaluate(bm25, dataset, ks=KS, limit=limit, name="ragspine BM25 auto")
    glossary = GLOSSARIES[name]
    glossed = retriever_factory(RetrievalPlan("bm25", ("glossary",)), k=DEPTH, glossary=glossary, transform_k=DEPTH)
    expanded = evaluate(glossed, dataset, ks=KS,
                        limit=limit, name=f"BM25 auto + glossary ({glossary.name}, max_queries 5)")
    rewriter = GlossaryQueryRewriter(glossary)
    questions = [q.question for q in dataset.questions][:limit]
    rewritten = sum(1 for q in questions if len(rewriter.rewrite(q)) > 1)
    print(f"{name}: glossary R@1 {expanded.aggregate['answer_recall@1']:.4f} vs {plain.aggregate['answer_recall@1']:.4f}",
          flush=True)
    return (f"### {name}: glossary rewriter ({len(questions)} questions; the glossary rewrote {rewritten})\n\n"
            + _table([plain, expanded]) + "\n")


def cost_section(name: str, limit: int) -> str:
    dataset = load_dataset(DATA / name)
    bm25 = mode_factory("bm25", k=DEPTH)
    results = [evaluate(bm25, dataset, ks=KS, limit=limit, name="ragspine BM25 auto (no transformation)")]
    per_q = ["| 0 | 1.00 |"]
    for transform in LLM_QUERY_TRANSFORMS:
        llm = ScriptedChatModel()
        counters: list[CountingRetriever] = []

        def factory(chunks: list[Document], transform: str = transform, llm: ScriptedChatModel = llm,
                    counters: list[CountingRetriever] = counters) -> Any:
            counting = CountingRetriever(inner=bm25(chunks))
            counters.append(counting)
            return RetrievalPlan("bm25", (transform,)).transform(counting, llm=llm, k=DEPTH)

        r = evaluate(factory, dataset, ks=KS, limit=limit, name=f"+ {transform} (scripted instant LLM)")
        n = r.config["n_questions"]
        results.append(r)
        per_q.append(f"| {llm.calls / n:.2f} | {sum(c.calls for c in counters) / n:.2f} |")
        print(f"{name}: {transform} {llm.calls / n:.2f} LLM calls/q, p50 {r.latency_ms['p50']:.2f} ms", flush=True)
    n = results[0].config["n_questions"]
    rows = []
    head = ("| configuration | chat-model calls / question | base searches / question | p50 ms | p95 ms |\n"
            "|---|---:|---:|---:|---:|\n")
    for r, counts in zip(results, per_q, strict=True):
        rows.append(f"| {r.name} {counts} {r.latency_ms['p50']:.2f} | {r.latency_ms['p95']:.2f} |\n")
    return f"### {name}: cost of each LLM transformation (first {n} questions)\n\n" + head + "".join(rows) + "\n"


def llm_section(name: str, spec: str, limit: int, transforms: Sequence[str], max_tokens: int) -> str:
    dataset = load_dataset(DATA / name)
    bm25 = mode_factory("bm25", k=DEPTH)
    results = [evaluate(bm25, dataset, ks=KS, limit=limit, name="ragspine BM25 auto")]
    extras = [" 0 | - |"]
    for transform in transforms:
        inner = make_chat_model(spec, num_predict=max_tokens) if spec.startswith("ollama:") else make_chat_model(spec)
        timed = _Timed(inner=inner, cache_path=str(LLM_CACHE), tag=f"{spec}|{max_tokens}")

        factory = retriever_factory(RetrievalPlan("bm25", (transform,)), k=DEPTH, llm=timed, transform_k=DEPTH)

        r = evaluate(factory, dataset, ks=KS, limit=limit, name=f"+ {transform} ({spec})")
        n = r.config["n_questions"]
        results.append(r)
        extras.append(f" {timed.n / n:.2f} | {timed.seconds / max(timed.n, 1):.1f} |")
        print(f"{name}: {transform} R@1 {r.aggregate['answer_recall@1']:.4f} R@5 {r.aggregate['answer_recall@5']:.4f}"
              f" ({timed.n} calls, {timed.seconds:.0f} s)", flush=True)
    n = results[0].config["n_questions"]
    return (f"### {name}: HyDE and multi-query with a real chat model (first {n} questions)\n\n"
            + _table(results, " LLM calls / question | s per LLM call |", extras) + "\n")


class _Timed(BaseChatModel):
    """Wraps a chat model, counting its calls (``n``) and their wall time (``seconds``) on this instance.

    Every reply is kept with its wall time in the JSON file ``cache_path`` (keyed by ``tag`` and the prompt), so an
    interrupted run resumes where it stopped: a cached call counts as one call with the seconds it took when made.
    """

    inner: BaseChatModel
    cache_path: str
    tag: str
    n: int = 0
    seconds: float = 0.0
    _cache: dict[str, Any] | None = PrivateAttr(default=None)

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        path = Path(self.cache_path)
        if self._cache is None:  # read once per instance, written through on every miss
            self._cache = json.loads(path.read_text("utf-8")) if path.exists() else {}
        cache = self._cache
        key = hashlib.sha1(json.dumps([self.tag, [dumpd(m) for m in messages]], ensure_ascii=False,
                                      sort_keys=True).encode()).hexdigest()
        if key not in cache:
            t0 = time.perf_counter()
            result = self.inner._generate(messages, stop=stop, **kwargs)
            cache[key] = {"message": dumpd(result.generations[0].message), "seconds": time.perf_counter() - t0}
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps(cache, ensure_ascii=False), "utf-8")
            tmp.replace(path)
        self.n += 1
        self.seconds += cache[key]["seconds"]
        return ChatResult(generations=[ChatGeneration(message=load(cache[key]["message"], allowed_objects="messages"))])

    @property
    def _llm_type(self) -> str:
        return "timed"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", nargs="+", default=["jsquad-valid", "cmrc2018-dev"])
    ap.add_argument("--limit", type=int, default=None, help="glossary rows: first N questions (default: all)")
    ap.add_argument("--cost-limit", type=int, default=300, help="cost rows: first N questions (default 300)")
    ap.add_argument("--llm", default=None, metavar="SPEC", help="also measure HyDE and multi-query with this model")
    ap.add_argument("--llm-limit", type=int, default=300, help="questions per set for --llm (default 300)")
    ap.add_argument("--llm-transforms", nargs="+", default=["hyde", "multi_query"], choices=LLM_QUERY_TRANSFORMS)
    ap.add_argument("--only-llm", action="store_true", help="skip the glossary and cost rows")
    ap.add_argument("--llm-max-tokens", type=int, default=160,
                    help="cap on generated tokens per LLM call (Ollama num_predict; default 160)")
    args = ap.parse_args()
    missing = [s for s in args.sets if not (DATA / s / "questions.jsonl").exists()]
    if missing:
        print(f"benchmark data not found: {', '.join(str(DATA / s) for s in missing)} "
              "(expected ../shared/data beside the repo, or set RAGSPINE_DATA)", file=sys.stderr)
        return 2
    warnings.simplefilter("ignore", DeprecationWarning)
    command = "python benchmarks/transforms.py" + "".join(f" {a}" for a in sys.argv[1:])
    if not args.only_llm:
        sections = [glossary_section(name, args.limit) for name in args.sets]
        sections += [cost_section(name, args.cost_limit) for name in args.sets]
        note = (
            "All rows over the package's BM25 (tokenizer auto, ParagraphTextSplitter 480/80), depth 10. Answer "
            "recall@k: a top-k chunk from the question's own article contains a gold answer verbatim (NFKC). Δ: "
            "paired difference to BM25 alone on the same questions, 95% paired bootstrap interval (n.s. = not "
            "significant). Glossary: docs/glossaries/general-ja.yaml (JSQuAD) / general-zh.yaml (CMRC), written without looking at the sets; a "
            "question with no glossary term is searched alone (its results are BM25's). Cost rows: a scripted "
            "chat model that answers instantly with three distinct queries, so p50/p95 are the transformation's "
            "own overhead (prompting, parsing, one BM25 search per query, RRF) and the call counts are exact; "
            "real-model latency adds (calls / question) × (seconds per call).\n\n"
        )
        body = note + "\n".join(sections)
        print(body)
        if args.limit is None:
            update_results_section("transforms", "Query transformations: glossary rewriter and LLM-transform cost",
                                   command, body)
    if args.llm:
        sections = [llm_section(name, args.llm, args.llm_limit, args.llm_transforms, args.llm_max_tokens) for name in args.sets]
        body = ("Answer recall@k as above; Δ: paired difference to BM25 alone on the same questions. LLM calls are "
                "sequential (one request at a time); s per LLM call is wall time including queueing; each reply is capped at "
                f"{args.llm_max_tokens} generated tokens. Replies are kept in benchmarks/_work/transforms-llm-cache.json "
                "with the seconds they took, so a rerun resumes (cached calls count with their original time).\n\n"
                + "\n".join(sections))
        print(body)
        if args.llm_limit >= 300:  # a smaller sample is a smoke test, not a measurement for the record
            update_results_section("transforms-llm", "Query transformations with a real chat model", command, body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
