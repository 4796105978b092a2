"""The measurement half of ``benchmarks/learned_reranker.py eval``: the evaluation sets, which training never saw."""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

from _common import DATA

from langchain_ragspine.document_compressors import SecondStageRetriever
from langchain_ragspine.document_compressors.learned import DEFAULT_MODEL, LearnedReranker
from langchain_ragspine.document_compressors.learned.features import fold_for_matching
from langchain_ragspine.evaluation import EvalResult, evaluate, load_qa
from langchain_ragspine.evaluation.runner import compare_markdown
from langchain_ragspine.pipeline.modes import mode_factory
from langchain_ragspine.text_splitters import ParagraphTextSplitter

KS = (1, 5, 10)
FETCH = 30


def _two_stage(first: object, k: int = max(KS)) -> object:
    def factory(chunks: list) -> SecondStageRetriever:
        base = first(chunks)  # type: ignore[operator]
        return SecondStageRetriever(base_retriever=base, compressors=[LearnedReranker(k=k)], k=k, fetch_k=FETCH)

    return factory


def rerank_latency(set_name: str, n: int = 300) -> dict[str, float]:
    """Median / p95 milliseconds of the reranker alone on ``n`` questions' 30 BM25 candidates, warm and cold
    (the feature cache of chunk texts cleared before every call)."""
    ds = load_qa(DATA / set_name)
    chunks = ParagraphTextSplitter().split_documents(ds.docs)
    bm25 = mode_factory("bm25", k=FETCH)(chunks)
    rerank = LearnedReranker(k=10)
    pools = [(q.question, bm25.invoke(q.question)) for q in ds.questions[:n]]
    out: dict[str, float] = {}
    first = []
    for q, _ in pools:
        t = time.perf_counter()
        bm25.invoke(q)
        first.append((time.perf_counter() - t) * 1000)
    out["bm25_p50"] = statistics.median(first)
    for label, clear in (("warm", False), ("cold", True)):
        times = []
        for q, docs in pools:
            if clear:
                fold_for_matching.cache_clear()
            t = time.perf_counter()
            rerank.compress_documents(docs, q)
            times.append((time.perf_counter() - t) * 1000)
        times.sort()
        out[f"{label}_p50"] = statistics.median(times)
        out[f"{label}_p95"] = times[int(0.95 * (len(times) - 1))]
    return out


#: Measured once (2026-12-04, 2 shared cores, nice 10, one thread): the feature rows of the training sets (the
#: first stage's top 30 of every question, then the features) and the fit.  A rebuild reads the cached rows.
TRAINING_TIME = ("feature rows: jaquad-train 221 s (31,748 questions, 952,440 rows), cmrc2018-trial 5 s (1,000 "
                 "questions); fit 22 s on one thread (early stopping on the held-out questions)")


def training_summary() -> str:
    """What the bundled model is: from its sidecar, and the ablation that chose its features."""
    import json

    from langchain_ragspine.document_compressors.learned.model import sidecar_path

    meta = json.loads(sidecar_path(DEFAULT_MODEL).read_text("utf-8"))
    t = meta["training"]
    held = t["held_out_recall@1"]
    return (
        "Training (no evaluation data seen): LightGBM 4.7 `lambdarank` on the BM25 `auto` top 30 of every question "
        f"of {' and '.join(t['datasets'])} ({t['questions']:,} questions; labels: the answer-recall rule); "
        f"{t['held_out_questions']:,} questions of 20% of the articles held out for early stopping and selection. "
        f"{t['trees']} trees of at most {t['params']['num_leaves']} leaves over {len(meta['features'])} features "
        f"({', '.join(meta['features'])}); held-out answer recall@1 {held['before']:.4f} (BM25 auto) -> "
        f"{held['after']:.4f}. {TRAINING_TIME}. Rebuild bit for bit: `{t['rebuild']}` (built twice, `cmp` equal).\n\n"
        "Feature selection (`python benchmarks/learned_reranker.py ablation`, held-out training questions "
        "only, learning rate 0.05; recall@1): all 23 features 0.8833; without the raw channel scores 0.8856, "
        "without length and position 0.8864, without both 0.8866 (kept out); without the normalised score 0.8845, "
        "the window 0.8844, the longest common substring 0.8849, rank 0.8833, title 0.8827, character overlap "
        "0.8817, term shares 0.8781 (kept); dropping the longest common substring, the window or the normalised "
        "score as well as the two lost (0.8817, 0.8814, 0.8794). Learning rate 0.1 (191 trees) 0.8889 against "
        "0.05 (373 trees) 0.8866; 31 leaves 0.8874, 7 leaves 0.8845."
    )


def evaluate_sets(sets: list[str], *, hybrid: bool = False, limit: int | None = None) -> str:
    parts = [training_summary()]
    emb = None
    if hybrid:
        from _embedding_cache import cached_e5

        emb = cached_e5()
    for name in sets:
        ds = load_qa(DATA / name)
        configs: list[tuple[str, object]] = [
            ("BM25 auto", mode_factory("bm25", k=max(KS))),
            ("BM25 auto + learned", _two_stage(mode_factory("bm25", k=FETCH))),
        ]
        if emb is not None:
            configs += [
                ("hybrid default (auto mode)", mode_factory("auto", k=max(KS), embedding=emb)),
                ("hybrid default + learned", _two_stage(mode_factory("auto", k=FETCH, embedding=emb))),
            ]
        results: list[EvalResult] = []
        for label, factory in configs:
            t = time.perf_counter()
            results.append(evaluate(factory, ds, ks=KS, limit=limit, progress=False, name=label))  # type: ignore[arg-type]
            print(f"{name} {label}: {results[-1].aggregate} ({time.perf_counter() - t:.0f} s)", file=sys.stderr)
        parts.append(f"### {name} ({len(results[0].per_query)} questions)\n\n"
                     + compare_markdown(results, baseline="BM25 auto"))
        if emb is not None:
            parts.append(f"Paired against the hybrid default ({name}):\n\n"
                         + compare_markdown([results[2], results[1], results[3]],
                                            baseline="hybrid default (auto mode)").split("\n\n", 1)[-1])
        lat = rerank_latency(name)
        parts.append(f"Reranker alone on {name} (300 questions, 30 BM25 candidates each, one process): "
                     f"p50 {lat['warm_p50']:.2f} ms / p95 {lat['warm_p95']:.2f} ms with the chunk-text cache warm, "
                     f"p50 {lat['cold_p50']:.2f} ms / p95 {lat['cold_p95']:.2f} ms cold; the BM25 auto query itself "
                     f"p50 {lat['bm25_p50']:.2f} ms.")
    size = DEFAULT_MODEL.stat().st_size
    parts.append(f"Model: `{DEFAULT_MODEL.relative_to(Path(__file__).resolve().parents[1])}`, {size:,} bytes.")
    return "\n\n".join(parts)
