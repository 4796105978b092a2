"""Stores saved by earlier code keep working: the fixture ``tests/fixtures/store-5830ee7`` is a store directory
(chunk store, BM25 index, FAISS index, embedding cache) written by the code at commit 5830ee7, before the index
build, the FAISS index and the embedding cache moved modules, and before BM25 indexes recorded checksums.  Today's
code must load the FAISS index as saved (no rebuild), answer exactly as that code did (``expected.json``, scores
included), and find every chunk vector in the old embedding cache.  The BM25 index has no checksum, so it is not
trusted: it is rebuilt in memory from the chunk store with a ``StaleIndexWarning`` ("no checksum") — the same
answers — and a re-ingest rewrites it with a checksum manifest, after which it loads as saved."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import pytest

from langchain_ragspine.errors import StaleIndexWarning
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.sources import open_retriever, search

pytest.importorskip("faiss", reason="the dense channel needs faiss-cpu (embed extra)")

FIXTURE = Path(__file__).resolve().parents[3] / "fixtures" / "store-5830ee7"
QUERIES = ["梅雨はいつ", "北京的首都", "chunk store versions", "台風"]


@pytest.fixture()
def saved(tmp_path: Path) -> Path:
    """A copy of the fixture (corpus/ and store/), so the test may write to it."""
    shutil.copytree(FIXTURE / "corpus", tmp_path / "corpus")
    shutil.copytree(FIXTURE / "store", tmp_path / "store")
    return tmp_path


def _no_rebuild(monkeypatch: pytest.MonkeyPatch, *, bm25: bool = True) -> None:
    """Make a rebuild of the dense index (and with ``bm25``, of the BM25 index) fail the test."""
    import langchain_ragspine.retrievers.bm25 as bm25_module
    from langchain_ragspine.retrievers.dense import DenseRetriever

    def boom(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a saved index was rebuilt instead of loaded")

    if bm25:
        monkeypatch.setattr(bm25_module, "build_bm25_index", boom)
    monkeypatch.setattr(DenseRetriever, "_build", boom)


def _open(store: Path, mode: str) -> Any:
    """``open_retriever`` of the fixture: the FAISS index loads as saved; the BM25 index (no checksum) is rebuilt
    in memory with a StaleIndexWarning naming the missing manifest."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        retriever = open_retriever(store, mode=mode, k=3)
    stale = [str(w.message) for w in caught if issubclass(w.category, StaleIndexWarning)]
    if mode == "vector":
        assert stale == []
    else:
        assert len(stale) == 1 and "manifest.json: missing: no checksum" in stale[0], stale
        assert "rebuilt in memory from the chunk store" in stale[0] and "run `ragspine ingest`" in stale[0]
    return retriever


@pytest.mark.parametrize("mode", ["bm25", "vector", "hybrid"])
def test_a_saved_store_opens_and_answers_as_before(saved: Path, monkeypatch, mode: str) -> None:
    expected = json.loads((FIXTURE / "expected.json").read_text("utf-8"))[mode]
    _no_rebuild(monkeypatch, bm25=False)
    retriever = _open(saved / "store", mode)
    if mode == "hybrid":
        # the default fusion changed after 5830ee7 (convex 0.7 -> two_stage): the saved channels must answer as
        # before, and fusing them the old way must give the old fused scores exactly
        for q in QUERIES:
            old = {cid: (s["bm25"], s["vector"]) for cid, s in expected[q]}
            new = {d.metadata["chunk_id"]: d.metadata["scores"] for d in search(retriever, q, k=3)}
            assert new.keys() == old.keys(), q  # three chunks in each query's candidates: the same three
            assert {cid: (s["bm25"], s["vector"]) for cid, s in new.items()} == old, q
        retriever = retriever.current.model_copy(update={"fusion": "convex", "alpha": 0.7})
    got = {q: [[d.metadata["chunk_id"], d.metadata["scores"]] for d in search(retriever, q, k=3)] for q in QUERIES}
    assert got == expected
    assert expected["梅雨はいつ"][0][0] == "tsuyu#0"  # the fixture itself is a meaningful answer


def test_reingesting_a_saved_store_finds_every_vector_in_the_old_cache(saved: Path) -> None:
    summary = ingest(
        saved / "corpus", saved / "store", embedding="hashing", mode="hybrid", tokenizer="cjk-nofold", progress=False
    )
    assert (summary.documents, summary.unchanged, summary.new, summary.changed) == (3, 3, 0, 0)
    assert summary.embedded == 0 and summary.dense == "HashingEmbeddings(size=256)"


@pytest.mark.parametrize("mode", ["bm25", "hybrid"])
def test_reingesting_a_saved_store_rewrites_its_bm25_index_with_a_checksum(saved: Path, monkeypatch, mode) -> None:
    expected = json.loads((FIXTURE / "expected.json").read_text("utf-8"))[mode]
    assert not (saved / "store" / "bm25" / "manifest.json").exists()
    summary = ingest(
        saved / "corpus", saved / "store", embedding="hashing", mode="hybrid", tokenizer="cjk-nofold", progress=False
    )
    assert summary.unchanged == 3 and summary.index_rebuilt  # nothing changed, but the index had no checksum
    assert (saved / "store" / "bm25" / "manifest.json").is_file()
    _no_rebuild(monkeypatch)  # from now on both indexes load as saved
    with warnings.catch_warnings():
        warnings.simplefilter("error", StaleIndexWarning)
        retriever = open_retriever(saved / "store", mode=mode, k=3)
    if mode == "hybrid":
        retriever = retriever.current.model_copy(update={"fusion": "convex", "alpha": 0.7})
    got = {q: [[d.metadata["chunk_id"], d.metadata["scores"]] for d in search(retriever, q, k=3)] for q in QUERIES}
    assert got == expected
