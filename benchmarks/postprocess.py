"""Second-stage ranking and post-processing on the shared sets: what each stage buys, and what it costs.

For each set in ``../shared/data`` (JSQuAD valid, Japanese; CMRC 2018 dev, Chinese), chunked with the default
``ParagraphTextSplitter`` (480/80), every question:

1. **Contextual headers** — answer recall@1/@5/@10 of BM25 (``auto``) and of the default hybrid (BM25 + e5,
   ``HybridRetriever``'s default two-stage fusion) over the plain chunks and over the same chunks indexed with ``ContextualHeader`` (``index_text`` = title
   header + text; the sets' chunks carry a ``title``, no heading path, period or entity).
2. **MMR** — the base retriever's top 20 (hybrid, else BM25) cut to 5 by ``MMRCompressor`` (similarity by token
   Jaccard or e5 cosine; relevance from the retrieval scores, and once from the e5 cosine to the query, as
   LangChain's MMR search does) against the plain top 5: answer recall@1/@5 and the mean number of distinct
   articles in the top 5.
3. **Extractive compression** — the base top 5 through ``ExtractiveCompressor(max_chars=…)``: characters of context
   shown to a model (``prompt_text`` else ``page_content``) against the uncompressed top 5, and how often the gold
   answer is still inside the compressed text of a gold-article chunk (of the questions whose top 5 held it).
4. **Latency** of each stage per query (p50 / p95 ms, on the base top-20 candidates; ``ContextualHeader`` per
   chunk).  ``CrossEncoderReranker`` runs a tiny random BERT (the test suite's, 1 layer × 16 dims, built on the
   fly: no weights can be downloaded here) — it times the sentence-transformers code path, not a real model, and
   says nothing about quality; ``LLMListwiseReranker`` runs with a fake chat model (prompt building + parsing only).
5. Optionally (``--llm-sample N``, when a local Ollama-compatible server answers on ``OLLAMA_HOST``): the listwise
   reranker with that real model on the first N questions of each set (top 5, 300 characters per passage): answer
   recall@1 before/after, parse fallbacks, latency.

e5 vectors come from the persistent cache (``benchmarks/_embedding_cache.py``, namespace
``e5-small-onnxruntime-int8``); the header-prefixed chunks are embedded on the first run (~10 chunks/s).  The
MMR-e5 latency therefore excludes the model (cache reads only).

    python benchmarks/postprocess.py [--sets jsquad-valid cmrc2018-dev] [--limit N] [--no-dense] [--llm-sample N]

Results go to ``benchmarks/RESULTS.md`` (section ``postprocess``) unless ``--limit`` is given.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import DATA, REPO, update_results_section  # noqa: E402
from langchain_core.documents import Document  # noqa: E402
from langchain_core.language_models.fake_chat_models import FakeListChatModel  # noqa: E402
from langchain_core.retrievers import BaseRetriever  # noqa: E402

from langchain_ragspine.document_compressors import (  # noqa: E402
    ContextualHeader,
    CrossEncoderReranker,
    ExtractiveCompressor,
    LLMListwiseReranker,
    LostInTheMiddleReorder,
    MMRCompressor,
    RestrictedGate,
)
from langchain_ragspine.evaluation import load_dataset  # noqa: E402
from langchain_ragspine.evaluation.datasets import QADataset, QAQuestion  # noqa: E402
from langchain_ragspine.evaluation.metrics import first_answer_rank  # noqa: E402
from langchain_ragspine.retrievers import BM25Retriever, DenseRetriever, HybridRetriever  # noqa: E402
from langchain_ragspine.text_splitters import ParagraphTextSplitter  # noqa: E402

CANDIDATES = 20
TOP = 5
MAX_CHARS = (120, 160, 240, 320)
LATENCY_QUESTIONS = 300  # per set, for the slow-ish stages (tiny cross-encoder)


def pct(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile ``q`` (0–100) of ``values``."""
    xs = sorted(values)
    if not xs:
        return float("nan")
    pos = (len(xs) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn()
    return out, (time.perf_counter() - t0) * 1000.0


def rank_of(docs: Sequence[Document], q: QAQuestion) -> int | None:
    return first_answer_rank(docs, q.doc_id, q.answers)


def recall(ranks: Sequence[int | None], k: int) -> float:
    return sum(1 for r in ranks if r is not None and r <= k) / max(len(ranks), 1)


def nfkc(text: str) -> str:
    return unicodedata.normalize("NFKC", text)


def shown_text(doc: Document) -> str:
    text = doc.metadata.get("prompt_text")
    return text if isinstance(text, str) and text.strip() else doc.page_content


def answer_shown(docs: Sequence[Document], q: QAQuestion, text_of: Callable[[Document], str]) -> bool:
    wanted = [nfkc(a) for a in q.answers if a]
    return any(
        str(d.metadata.get("doc_id")) == q.doc_id and any(a in nfkc(text_of(d)) for a in wanted) for d in docs
    )


# ------------------------------------------------------------------------------------------------------ builders
def bm25(chunks: list[Document]) -> BaseRetriever:
    return BM25Retriever.from_documents(chunks)


def hybrid_factory(emb: Any) -> Callable[[list[Document]], BaseRetriever]:
    def build(chunks: list[Document]) -> BaseRetriever:
        return HybridRetriever(retrievers=[BM25Retriever.from_documents(chunks), DenseRetriever.from_documents(chunks, emb)])

    return build


# ------------------------------------------------------------------------------------------------------ sections
def contextual_rows(ds: QADataset, chunks: list[Document], questions: list[QAQuestion], emb: Any) -> list[str]:
    ctx = list(ContextualHeader().transform_documents(chunks))
    configs: list[tuple[str, Callable[[list[Document]], BaseRetriever], list[Document]]] = [
        ("BM25 auto", bm25, chunks),
        ("BM25 auto + contextual header", bm25, ctx),
    ]
    if emb is not None:
        hybrid = hybrid_factory(emb)
        configs += [("hybrid (default fusion)", hybrid, chunks), ("hybrid + contextual header", hybrid, ctx)]
    rows = []
    for label, factory, docs in configs:
        retriever, build_ms = timed(lambda f=factory, d=docs: f(d))
        ranks, lat = [], []
        for q in questions:
            out, ms = timed(lambda q=q, r=retriever: r.invoke(q.question, k=10))
            ranks.append(rank_of(out, q))
            lat.append(ms)
        rows.append(
            f"| {label} | {recall(ranks, 1):.4f} | {recall(ranks, 5):.4f} | {recall(ranks, 10):.4f} | "
            f"{pct(lat, 50):.2f} | {build_ms / 1000:.1f} |"
        )
        print(f"{ds.name:13s} {rows[-1]}", flush=True)
    return rows


def mmr_rows(ds: QADataset, cands: list[list[Document]], questions: list[QAQuestion], emb: Any) -> list[str]:
    configs: list[tuple[str, Any]] = [("base top 5 (no MMR)", None)]
    for lam in (0.5, 0.7):
        configs.append((f"MMR token Jaccard, lambda {lam}", MMRCompressor(k=TOP, lambda_mult=lam)))
    if emb is not None:
        for lam in (0.5, 0.7):
            configs.append((f"MMR e5 cosine similarity, lambda {lam}",
                            MMRCompressor(embeddings=emb, k=TOP, lambda_mult=lam)))
        configs.append(("MMR e5, relevance = cosine to the query (LangChain's), lambda 0.5",
                        MMRCompressor(embeddings=emb, relevance="query", k=TOP, lambda_mult=0.5)))
    rows = []
    for label, mmr in configs:
        ranks, distinct, lat = [], [], []
        for q, cand in zip(questions, cands, strict=True):
            if mmr is None:
                top, ms = cand[:TOP], 0.0
            else:
                top, ms = timed(lambda m=mmr, c=cand, q=q: m.compress_documents(c, q.question))
            ranks.append(rank_of(top, q))
            distinct.append(len({d.metadata["doc_id"] for d in top}))
            lat.append(ms)
        rows.append(
            f"| {label} | {recall(ranks, 1):.4f} | {recall(ranks, 5):.4f} | {statistics.fmean(distinct):.2f} | "
            f"{pct(lat, 50):.2f} | {pct(lat, 95):.2f} |"
        )
        print(f"{ds.name:13s} {rows[-1]}", flush=True)
    return rows


def compression_rows(ds: QADataset, cands: list[list[Document]], questions: list[QAQuestion]) -> list[str]:
    tops = [c[:TOP] for c in cands]
    before_chars = sum(len(d.page_content) for top in tops for d in top)
    had = [answer_shown(top, q, lambda d: d.page_content) for top, q in zip(tops, questions, strict=True)]
    n_had = sum(had)
    rows = [f"| none (top {TOP} chunks) | {before_chars / len(tops):.0f} | - | {n_had / len(tops):.4f} | - | - | - |"]
    for max_chars in MAX_CHARS:
        comp = ExtractiveCompressor(max_chars=max_chars)
        after_chars, kept, lat = 0, 0, []
        for top, q, h in zip(tops, questions, had, strict=True):
            out, ms = timed(lambda c=comp, t=top, q=q: c.compress_documents(t, q.question))
            lat.append(ms)
            after_chars += sum(len(shown_text(d)) for d in out)
            if h and answer_shown(out, q, shown_text):
                kept += 1
        rows.append(
            f"| max_chars={max_chars} | {after_chars / len(tops):.0f} | {1 - after_chars / before_chars:.1%} | "
            f"{kept / len(tops):.4f} | {kept / max(n_had, 1):.4f} | {pct(lat, 50):.2f} | {pct(lat, 95):.2f} |"
        )
        print(f"{ds.name:13s} {rows[-1]}", flush=True)
    return rows


def latency_rows(
    ds: QADataset, chunks: list[Document], cands: list[list[Document]], questions: list[QAQuestion], emb: Any,
    tiny_model: str | None,
) -> list[str]:
    # a fake chat model that always answers the reverse order of the 20-passage window
    fake = FakeListChatModel(responses=[" > ".join(f"[{i}]" for i in range(CANDIDATES, 0, -1))])
    stages: list[tuple[str, Any]] = [
        ("RestrictedGate", RestrictedGate()),
        ("LostInTheMiddleReorder", LostInTheMiddleReorder()),
        (f"MMRCompressor (token Jaccard, k={TOP})", MMRCompressor(k=TOP)),
    ]
    if emb is not None:
        stages.append((f"MMRCompressor (e5 cosine from the cache, k={TOP})", MMRCompressor(embeddings=emb, k=TOP)))
    stages += [
        ("ExtractiveCompressor (default max_chars)", ExtractiveCompressor()),
        ("LLMListwiseReranker, fake chat model (prompt + parse only)",
         LLMListwiseReranker(llm=fake, k=10)),  # k as measured (the default was 10, now DEFAULT_K = 6)
    ]
    if tiny_model is not None:
        stages.append(("CrossEncoderReranker, tiny random BERT (code path only)",
                       CrossEncoderReranker(model=tiny_model, k=5)))  # k as measured (the default was 5)
    n = min(LATENCY_QUESTIONS, len(questions))
    rows = []
    for label, stage in stages:
        lat = [timed(lambda s=stage, c=c, q=q: s.compress_documents(c, q.question))[1]
               for q, c in zip(questions[:n], cands[:n], strict=True)]
        rows.append(f"| {label} | {n} | {pct(lat, 50):.3f} | {pct(lat, 95):.3f} |")
        print(f"{ds.name:13s} {rows[-1]}", flush=True)
    header = ContextualHeader()
    _, ms = timed(lambda: header.transform_documents(chunks))
    rows.append(f"| ContextualHeader (per chunk, {len(chunks)} chunks) | - | {ms / len(chunks):.4f} | - |")
    return rows


def llm_rows(cands: list[list[Document]], questions: list[QAQuestion], n: int) -> list[str]:
    from langchain_ragspine import make_chat_model

    llm = make_chat_model("ollama:qwen2.5:7b")
    reranker = LLMListwiseReranker(llm=llm, k=TOP, window=TOP, max_chars=300)
    before, after, lat, fallbacks = [], [], [], 0
    for q, cand in zip(questions[:n], cands[:n], strict=True):
        top = cand[:TOP]
        out, ms = timed(lambda r=reranker, t=top, q=q: r.compress_documents(t, q.question))
        lat.append(ms)
        fallbacks += all(d.metadata.get("scores", {}).get("rerank") is None for d in out)
        before.append(rank_of(top, q))
        after.append(rank_of(out, q))
    return [
        f"| base top {TOP} order | {n} | {recall(before, 1):.3f} | - | - |",
        f"| listwise rerank (local 1.5B model) | {n} | {recall(after, 1):.3f} | {fallbacks} | "
        f"{pct(lat, 50) / 1000:.1f} s |",
    ]


# ------------------------------------------------------------------------------------------------------ main
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", nargs="+", default=["jsquad-valid", "cmrc2018-dev"])
    ap.add_argument("--limit", type=int, default=None, help="first N questions per set (writes nothing)")
    ap.add_argument("--no-dense", action="store_true", help="skip everything that needs the e5 model")
    ap.add_argument("--llm-sample", type=int, default=0, help="questions per set for the local-LLM listwise sample")
    args = ap.parse_args()
    missing = [s for s in args.sets if not (DATA / s / "questions.jsonl").exists()]
    if missing:
        print(f"benchmark data not found: {', '.join(str(DATA / s) for s in missing)} "
              "(expected ../shared/data beside the repo, or set RAGSPINE_DATA)", file=sys.stderr)
        return 2
    emb = None
    if not args.no_dense:
        from _embedding_cache import cached_e5

        emb = cached_e5()
    tiny_model = None
    try:
        import tempfile

        sys.path.insert(0, str(REPO))
        from tests.unit_tests.tiny_cross_encoder import build_tiny_cross_encoder

        tiny_model = str(build_tiny_cross_encoder(Path(tempfile.mkdtemp()) / "tiny-ce", max_position_embeddings=512))
    except ImportError as e:
        print(f"no tiny cross-encoder ({e}); skipping its latency", file=sys.stderr)

    parts: dict[str, list[str]] = {"ctx": [], "mmr": [], "comp": [], "lat": [], "llm": []}
    for name in args.sets:
        ds = load_dataset(DATA / name)
        assert isinstance(ds, QADataset)
        chunks = ParagraphTextSplitter().split_documents(ds.docs)
        questions = ds.questions[: args.limit] if args.limit else ds.questions
        title = f"**{name}** ({len(questions)} questions, {len(chunks)} chunks)"
        parts["ctx"] += [title, "", "| retriever | ans R@1 | ans R@5 | ans R@10 | p50 ms | build s |",
                         "|---|---:|---:|---:|---:|---:|", *contextual_rows(ds, chunks, questions, emb), ""]
        base = hybrid_factory(emb)(chunks) if emb is not None else bm25(chunks)
        cands = [base.invoke(q.question, k=CANDIDATES) for q in questions]
        base_name = "hybrid" if emb is not None else "BM25"
        parts["mmr"] += [f"{title}, candidates: {base_name} top {CANDIDATES}", "",
                         "| top 5 | ans R@1 | ans R@5 | distinct articles in top 5 | p50 ms | p95 ms |",
                         "|---|---:|---:|---:|---:|---:|", *mmr_rows(ds, cands, questions, emb), ""]
        parts["comp"] += [f"{title}, {base_name} top {TOP}", "",
                          "| compression | context chars / question | reduction | answer shown | kept of those "
                          "shown before | p50 ms | p95 ms |",
                          "|---|---:|---:|---:|---:|---:|---:|", *compression_rows(ds, cands, questions), ""]
        parts["lat"] += [f"{title}, {CANDIDATES} candidates per query ({base_name})", "",
                         "| stage | questions | p50 ms | p95 ms |", "|---|---:|---:|---:|",
                         *latency_rows(ds, chunks, cands, questions, emb, tiny_model), ""]
        if args.llm_sample:
            parts["llm"] += [f"{title}, {base_name} top {TOP}", "",
                             "| order | questions | ans R@1 | fallbacks to input order | p50 latency |",
                             "|---|---:|---:|---:|---:|", *llm_rows(cands, questions, args.llm_sample), ""]

    body = "\n".join([
        "Answer recall@k (ans R@k): a top-k chunk from the question's own article contains a gold answer verbatim "
        "(NFKC). Chunks: ParagraphTextSplitter 480/80. Hybrid: BM25 auto + e5-small (ONNX int8, vectors from the "
        "benchmark cache) fused by HybridRetriever's default (BM25's top chunk kept, ranks 2+ convex 0.55). Latencies are per query on a shared 2-core machine (other jobs ran); "
        "re-run on a quiet machine for speed claims.",
        "",
        "### Contextual headers (title header in `index_text`; page_content unchanged)",
        "",
        *parts["ctx"],
        "### MMR: top 5 of the base top 20",
        "",
        *parts["mmr"],
        "### Extractive compression of the top 5 (`prompt_text`)",
        "",
        "\"answer shown\": a gold-article chunk's shown text (prompt_text, else page_content) contains a gold "
        "answer; \"kept of those shown before\": the same among the questions whose uncompressed top 5 showed it.",
        "",
        *parts["comp"],
        "### Latency of each stage",
        "",
        "The tiny cross-encoder (1 layer, 16 dims, random weights; max 512 tokens) times the sentence-transformers "
        "code path only; a real reranker (e.g. a 6-12-layer BERT) costs one to two orders of magnitude more and its "
        "quality cannot be measured here (no weights can be downloaded). The listwise row excludes the model.",
        "",
        *parts["lat"],
    ])
    if parts["llm"]:
        host = os.environ.get("OLLAMA_HOST", "127.0.0.1:11434")
        body += "\n" + "\n".join([
            f"### Listwise rerank with a real local model (sample; `{host}`, Qwen2.5-Coder-1.5B Q4_K_M behind "
            "Ollama's API, window 5, 300 chars per passage)",
            "",
            *parts["llm"],
        ])
    command = "python benchmarks/postprocess.py" + "".join(f" {a}" for a in sys.argv[1:])
    if not args.limit:
        update_results_section("postprocess", "Second-stage ranking and post-processing", command, body)
    print(body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
