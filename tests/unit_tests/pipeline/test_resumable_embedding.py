"""Resumable embedding (issue 12): ingest writes the chunk store and its BM25 index before embedding, commits
vectors in batches, so a run killed while embedding leaves BM25 searchable (``auto`` falls back with a warning) and
the next run embeds only the chunks the cache lacks."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.errors import RagSpineError, StaleIndexWarning, StoreError
from langchain_ragspine.pipeline.ingest import PROBE_CHUNKS, ingest
from langchain_ragspine.pipeline.sources import open_retriever, search
from langchain_ragspine.retrievers import BM25Retriever, HybridRetriever

HERE = Path(__file__).resolve().parents[1]
CHILD = HERE / "_ingest_kill_child.py"
N_DOCS = 12
PARAGRAPHS = 12


def _corpus(root: Path) -> Path:
    root.mkdir(parents=True)
    for d in range(N_DOCS):
        paras = [
            f"Document {d} paragraph {p}: the rainy season tsuyu item{d}x{p} " + "filler words here " * 20
            for p in range(PARAGRAPHS)
        ]
        (root / f"doc{d:02d}.md").write_text(f"# Doc {d}\n\n" + "\n\n".join(paras), "utf-8")
    return root


def _cache_rows(store: Path) -> int:
    path = store / "embeddings.sqlite"
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True) as conn:
            return int(conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0])
    except sqlite3.OperationalError:  # the schema is being created
        return 0


class _Counting:
    """Counts texts sent to ``HashingEmbeddings.embed_documents`` (patched for one test)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.texts = 0
        original = HashingEmbeddings.embed_documents

        def counting(emb: HashingEmbeddings, texts: list[str]) -> list[list[float]]:
            self.texts += len(texts)
            return original(emb, texts)

        monkeypatch.setattr(HashingEmbeddings, "embed_documents", counting)


@pytest.mark.subprocess
def test_kill_during_embedding_keeps_bm25_searchable_and_reingest_embeds_only_the_rest(tmp_path, monkeypatch):
    corpus = _corpus(tmp_path / "corpus")
    store = tmp_path / "store"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parents[1]), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), str(corpus), str(store)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        deadline = time.monotonic() + 120
        while _cache_rows(store) < 2 * PROBE_CHUNKS:  # the probe and at least one batch after the store commit
            assert proc.poll() is None, f"child exited early: {proc.communicate()}"
            assert time.monotonic() < deadline, "child never reached the embedding phase"
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out, _ = proc.communicate()
    assert "FINISHED" not in out
    cached = _cache_rows(store)
    assert not (store / "vector").exists()

    # BM25 is searchable; auto falls back to it with a warning; hybrid names the missing vectors
    with pytest.warns(StaleIndexWarning, match=r"chunks have no vector .*searching with BM25 only"):
        retriever = open_retriever(store)
    assert isinstance(retriever.current, BM25Retriever)
    top = search(retriever, "item7x3", k=1)[0]
    assert top.metadata["doc_id"] == "doc07"
    with pytest.raises(StoreError, match=r"\d+ of \d+ chunks have no vector"):
        open_retriever(store, mode="hybrid")
    assert _cache_rows(store) == cached  # reads never embed or write the cache

    counting = _Counting(monkeypatch)
    summary = ingest(corpus, store, embedding="hashing")
    assert summary.unchanged == N_DOCS and summary.new == 0
    assert summary.chunks > cached > 0
    assert counting.texts == summary.embedded == summary.chunks - cached  # only what the cache lacked
    assert _cache_rows(store) == summary.chunks
    assert isinstance(open_retriever(store).current, HybridRetriever)


class _FailAfterFirstCall(HashingEmbeddings):
    """Works for the probe batch, then the server 'goes away'."""

    def __init__(self) -> None:
        super().__init__(64)
        self.calls = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        if self.calls > 1:
            raise ConnectionError("server went away")
        return super().embed_documents(texts)


def test_model_failing_after_the_probe_leaves_bm25_updated_and_the_next_run_finishes(tmp_path, monkeypatch):
    corpus = _corpus(tmp_path / "corpus")
    store = tmp_path / "store"
    failing = _FailAfterFirstCall()
    with pytest.raises(RagSpineError, match="server went away.*BM25 index are updated"):
        ingest(corpus, store, embedding=failing)
    assert _cache_rows(store) == PROBE_CHUNKS
    assert search(open_retriever(store, mode="bm25"), "item2x5", k=1)[0].metadata["doc_id"] == "doc02"
    # same model key (class name and size) as the failed run: only the rest is embedded
    retry = _FailAfterFirstCall()
    retry.calls = -10**6
    summary = ingest(corpus, store, embedding=retry)
    assert summary.embedded == summary.chunks - PROBE_CHUNKS
    assert isinstance(open_retriever(store, embedding=retry).current, HybridRetriever)
