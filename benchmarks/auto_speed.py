"""`auto` search end to end at 100k chunks, query encoding included: BM25 + dense (FAISS flat vs HNSW) fused.

The corpus and questions are ``benchmarks/speed.py``'s (synthetic 300-480-char chunks of real JSQuAD / CMRC 2018
sentences, fixed seed).  Embedding 100k chunks with e5 is out of reach on these cores, so the *chunk* vectors come
from ``HashingEmbeddings(384)`` (the package's deterministic hashing model, e5's dimension); the *query* vector is
the real e5 encoder's (``E5SmallEmbeddings``, the package default engine), so every query pays e5 encoding as a
user's does.  A flat or HNSW scan costs the same whatever the vector values, so the latencies are honest; the
rankings are not meaningful (``quality.py`` measures quality).

Per question, interleaved so that machine load hits every row alike: the engine's own ``query()``, the package's
``embed_query`` (the same engine through ``E5SmallEmbeddings``), and ``HybridRetriever.invoke`` (k=10,
fetch_k=50, as ``open_retriever`` builds ``auto``) over BM25 + FAISS flat and over BM25 + FAISS HNSW.

    python benchmarks/auto_speed.py [--size 100k] [--queries 200]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import DATA, update_results_section  # noqa: E402
from langchain_core.embeddings import Embeddings  # noqa: E402
from speed import SETS, _pct, make_corpus, make_queries, parse_size  # noqa: E402


class HashedChunksE5Queries(Embeddings):
    """Chunks through ``HashingEmbeddings(384)``, queries through the e5 encoder."""

    def __init__(self, passages: Embeddings, queries: Embeddings) -> None:
        self.passages, self.queries = passages, queries

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.passages.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.queries.embed_query(text)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="100k")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tokenizer", default="auto")
    args = ap.parse_args()
    if any(not (DATA / s / "docs").is_dir() for s in SETS):
        print(f"auto_speed.py: shared evaluation data not found under {DATA} (or set RAGSPINE_DATA)", file=sys.stderr)
        return 2
    from langchain_ragspine.embeddings import HashingEmbeddings
    from langchain_ragspine.embeddings.e5 import E5SmallEmbeddings
    from langchain_ragspine.retrievers import BM25Retriever, DenseRetriever, HybridRetriever

    load_start = os.getloadavg()
    size = parse_size(args.size)
    docs = make_corpus(size, args.seed)
    queries = make_queries(args.queries, args.seed)
    e5 = E5SmallEmbeddings()
    engine: Any = getattr(e5, "_model", None)  # the engine object E5SmallEmbeddings wraps
    emb = HashedChunksE5Queries(HashingEmbeddings(384), e5)
    t0 = time.perf_counter()
    bm25 = BM25Retriever.from_documents(docs, k=10, tokenizer=args.tokenizer)
    t_bm25 = time.perf_counter() - t0
    print(f"BM25 built in {t_bm25:.0f} s", file=sys.stderr)
    builds: dict[str, float] = {}
    hybrids = {}
    dense = {}
    for kind in ("flat", "hnsw"):
        t0 = time.perf_counter()
        dense[kind] = DenseRetriever.from_documents(docs, emb, k=10, index_kind=kind, batch_size=4096)
        builds[kind] = time.perf_counter() - t0
        hybrids[kind] = HybridRetriever(retrievers=[bm25, dense[kind]], k=10, fetch_k=50)
        print(f"dense {kind} built in {builds[kind]:.0f} s", file=sys.stderr)

    rows: dict[str, list[float]] = {
        "e5 engine's own `query()`": [],
        "`E5SmallEmbeddings.embed_query` (package)": [],
        "`auto` = HybridRetriever.invoke, FAISS flat (exact)": [],
        "`auto` = HybridRetriever.invoke, FAISS HNSW": [],
    }
    calls = list(rows)
    fns = [
        (lambda q: engine.query(q)) if engine is not None and hasattr(engine, "query") else None,
        e5.embed_query,
        hybrids["flat"].invoke,
        hybrids["hnsw"].invoke,
    ]
    overlap = []
    for i, q in enumerate(queries[:5] + queries):
        warm = i < 5
        for name, fn in zip(calls, fns, strict=True):
            if fn is None:
                continue
            t0 = time.perf_counter()
            fn(q)
            if not warm:
                rows[name].append((time.perf_counter() - t0) * 1000)
        if not warm:
            exact = {d.metadata["chunk_id"] for d in dense["flat"].invoke(q, k=50)}
            approx = {d.metadata["chunk_id"] for d in dense["hnsw"].invoke(q, k=50)}
            overlap.append(len(exact & approx) / max(1, len(exact)))
    table = ["| what | p50 ms | p95 ms | mean ms |", "|---|---:|---:|---:|"]
    for name, xs in rows.items():
        if xs:
            table.append(f"| {name} | {_pct(xs, 50):.2f} | {_pct(xs, 95):.2f} | {statistics.fmean(xs):.2f} |")
    load_end = os.getloadavg()
    body = "\n".join(table) + (
        f"\n\n{size:,} chunks, tokenizer `{args.tokenizer}`, {len(queries)} real questions (JSQuAD / CMRC 2018 "
        "alternating) after 5 warm-up questions, the four calls interleaved per question. Chunk vectors: "
        "`HashingEmbeddings(384)` (embedding 100k chunks with e5 is out of reach here; a FAISS scan costs the same "
        "whatever the values); query vectors: the real e5 encoder (package default engine), included in every "
        f"`auto` row. Build: BM25 {t_bm25:.0f} s, FAISS flat {builds['flat']:.0f} s, HNSW {builds['hnsw']:.0f} s "
        f"(M=32, efConstruction=40, efSearch=64, hashing included). HNSW top-50 overlap with the exact top-50 on "
        f"these (hashing) vectors: mean {statistics.fmean(overlap):.3f}. Load average (1/5/15 min) at start "
        f"{' / '.join(f'{x:.1f}' for x in load_start)}, at end {' / '.join(f'{x:.1f}' for x in load_end)} on 2 "
        "cores shared with other engineers: timings are noisy; re-run on a quiet machine with the command above.\n"
    )
    print(body)
    command = "python benchmarks/auto_speed.py" + "".join(f" {a}" for a in sys.argv[1:])
    update_results_section("auto-100k", f"`auto` search end to end at {size:,} chunks, query encoding included",
                           command, body)
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
