"""Hybrid query latency at scale: BM25 + FAISS flat fused by ``HybridRetriever``, query embedding excluded.

Builds the same synthetic corpus as ``speed.py`` (real JSQuAD / CMRC 2018 sentences recombined into 300-480-char
chunks, fixed seed) and gives every chunk and query a 384-dimensional unit vector drawn from a seeded generator —
the shape of multilingual-e5-small's output.  The embedding model's inference is thereby excluded (the issue asks
for that: e5 costs ~200 ms per query here and would dominate); everything else of ``invoke`` is timed: BM25
scoring, the FAISS flat inner-product scan over all rows, candidate fusion, Document copies, callbacks.  Vector
*values* do not change the cost of a flat scan, so random vectors time it honestly (they do not measure quality —
``quality.py`` does).

    python benchmarks/hybrid_speed.py [--size 100k] [--queries 300]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import DATA, update_results_section  # noqa: E402
from langchain_core.embeddings import Embeddings  # noqa: E402
from speed import SETS, _maxrss_mb, _pct, make_corpus, make_queries, parse_size  # noqa: E402

DIM = 384


class TableEmbeddings(Embeddings):
    """Returns precomputed unit vectors: a seeded random vector per text, computed once and looked up."""

    def __init__(self, seed: int) -> None:
        self._rng = np.random.default_rng(seed)
        self._table: dict[str, np.ndarray] = {}

    def _vec(self, text: str) -> np.ndarray:
        v = self._table.get(text)
        if v is None:
            v = self._rng.standard_normal(DIM).astype(np.float32)
            v /= np.linalg.norm(v)
            self._table[text] = v
        return v

    def precompute(self, texts: list[str]) -> None:
        block = self._rng.standard_normal((len(texts), DIM)).astype(np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        self._table.update(zip(texts, block, strict=True))

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return np.stack([self._vec(t) for t in texts]).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self._vec(text).tolist()


def timed(fn: Any, queries: list[str], warmup: int = 5) -> list[float]:
    for q in queries[:warmup]:
        fn(q)
    out = []
    for q in queries:
        t0 = time.perf_counter()
        fn(q)
        out.append((time.perf_counter() - t0) * 1000)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="100k")
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    if any(not (DATA / s / "docs").is_dir() for s in SETS):
        print(f"hybrid_speed.py: shared evaluation data not found under {DATA} (or set RAGSPINE_DATA)", file=sys.stderr)
        return 2
    from langchain_ragspine.retrievers import BM25Retriever, DenseRetriever, HybridRetriever

    size = parse_size(args.size)
    docs = make_corpus(size, args.seed)
    queries = make_queries(args.queries, args.seed)
    emb = TableEmbeddings(args.seed)
    emb.precompute([d.page_content for d in docs])
    emb.precompute(queries)
    gc.collect()
    rss0 = _maxrss_mb()
    t0 = time.perf_counter()
    bm25 = BM25Retriever.from_documents(docs, k=10, tokenizer="auto")
    t_bm25 = time.perf_counter() - t0
    t0 = time.perf_counter()
    dense = DenseRetriever.from_documents(docs, emb, k=10, index_kind="flat")
    t_dense = time.perf_counter() - t0
    hybrid = HybridRetriever(retrievers=[bm25, dense], k=10, fetch_k=50)
    rss = _maxrss_mb() - rss0

    lat = {
        "BM25Retriever.invoke (k=50)": timed(lambda q: bm25.invoke(q, k=50), queries),
        "DenseRetriever.invoke (k=50, FAISS flat)": timed(lambda q: dense.invoke(q, k=50), queries),
        "HybridRetriever.invoke (k=10, fetch_k=50)": timed(hybrid.invoke, queries),
    }
    rows = ["| what | p50 ms | p95 ms | mean ms |", "|---|---:|---:|---:|"]
    for name, xs in lat.items():
        rows.append(f"| {name} | {_pct(xs, 50):.2f} | {_pct(xs, 95):.2f} | {statistics.fmean(xs):.2f} |")
    body = "\n".join(rows) + (
        f"\n\n{size:,} chunks (tokenizer `auto`), {len(queries)} real questions (JSQuAD / CMRC 2018 alternating) "
        "after 5 warm-up queries; vectors 384-d from a seeded generator, so the e5 query encoder (~200 ms/query on "
        "these 2 cores) is excluded, as asked. "
        f"Build: BM25 {t_bm25:.1f} s, FAISS flat {t_dense:.1f} s (vector lookup, no inference); peak RSS growth "
        f"{rss:,.0f} MB for both indexes.\n"
    )
    print(body)
    command = "python benchmarks/hybrid_speed.py" + "".join(f" {a}" for a in sys.argv[1:])
    update_results_section("speed-hybrid", f"Hybrid query latency at {size:,} chunks (BM25 + FAISS flat)", command, body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
