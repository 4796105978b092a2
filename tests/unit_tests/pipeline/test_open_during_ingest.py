"""Issue 25, section 6: opening a store while an ingest writes it.  ``open_retriever`` in every mode answers from the
store's newest committed version — never with a chunk that version retracted or labelled RESTRICTED — instead of
raising "an ingest was interrupted while embedding?"; an ingest that really was interrupted (its lock released)
still gets that clear error; a store being created says so.  The ingest runs in a child process that stops at a
chosen point until the test lets it go (``_ingest_gate_child.py``), so the window is exact."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import warnings
from pathlib import Path

import pytest

from langchain_ragspine.errors import StaleIndexWarning, StoreError
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.sources import open_retriever, search
from langchain_ragspine.retrievers import BM25Retriever, DenseRetriever, HybridRetriever
from tests.unit_tests._ingest_gate_child import DONE_S, GatedIngest

POSIX_ONLY = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")
pytestmark = POSIX_ONLY

N_DOCS = 10
PARAGRAPHS = 8


def _doc(d: int) -> str:
    paras = [f"Document {d} paragraph {p}: item{d}x{p} " + "shared filler words here " * 16 for p in range(PARAGRAPHS)]
    return f"# Doc {d}\n\n" + "\n\n".join(paras)


def _corpora(tmp: Path) -> tuple[Path, Path]:
    """Version 1 (documents 0-9) and version 2: document 3 labelled RESTRICTED, document 5 gone, 10-15 new (more
    new chunks than the probe embeds, so the ingest stops while embedding)."""
    v1, v2 = tmp / "v1", tmp / "v2"
    v1.mkdir()
    v2.mkdir()
    for d in range(N_DOCS):
        (v1 / f"doc{d:02d}.md").write_text(_doc(d), "utf-8")
        if d != 5:
            (v2 / f"doc{d:02d}.md").write_text(_doc(d), "utf-8")
    (v2 / "doc03.json").write_text(json.dumps({"sensitivity": "RESTRICTED"}), "utf-8")
    for d in range(N_DOCS, N_DOCS + 6):
        (v2 / f"doc{d:02d}.md").write_text(_doc(d), "utf-8")
    return v1, v2


def _cache_rows(store: Path) -> int:
    with sqlite3.connect(f"{(store / 'embeddings.sqlite').resolve().as_uri()}?mode=ro", uri=True) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0])


def _doc_ids(retriever: object, query: str) -> list[str]:
    return [d.metadata["doc_id"] for d in search(retriever, query, k=50)]  # type: ignore[arg-type]


@pytest.fixture
def stores(tmp_path: Path) -> tuple[Path, Path]:
    v1, v2 = _corpora(tmp_path)
    store = tmp_path / "store"
    ingest(v1, store, embedding="hashing", progress=False)
    return store, v2


@pytest.mark.subprocess
def test_open_retriever_during_an_ingest_answers_from_the_newest_version(stores: tuple[Path, Path]) -> None:
    """Regression: ``hybrid`` / ``vector`` raised "an ingest was interrupted while embedding?" and ``auto`` fell
    back to BM25 while an ingest was embedding the chunks it had just committed."""
    store, v2 = stores
    with GatedIngest(v2, store, "embed") as running:
        running.wait_gated()  # the new version is committed, its BM25 index saved; the vectors are being made
        rows = _cache_rows(store)
        opened = {}
        for mode in ("hybrid", "vector", "auto"):
            with pytest.warns(StaleIndexWarning, match=rf"pid {running.pid}.*is writing this store.*have no vector"):
                opened[mode] = open_retriever(store, mode=mode)
        assert isinstance(opened["hybrid"].current, HybridRetriever) and isinstance(opened["auto"].current, HybridRetriever)
        assert isinstance(opened["vector"].current, DenseRetriever)
        with warnings.catch_warnings():
            warnings.simplefilter("error", StaleIndexWarning)  # BM25's saved index is the new version's
            opened["bm25"] = open_retriever(store, mode="bm25")
        assert isinstance(opened["bm25"].current, BM25Retriever)
        for mode, retriever in opened.items():
            for query in ("item3x2", "item5x4", "Document 3 paragraph 1", "Document 5", "shared filler words"):
                found = _doc_ids(retriever, query)
                assert "doc03" not in found and "doc05" not in found, (mode, query, found)  # RESTRICTED, retracted
            if mode != "vector":  # the lexical channel has every chunk of the new version
                assert _doc_ids(retriever, "item11x6")[0] == "doc11", mode
        assert _cache_rows(store) == rows  # opening wrote nothing and embedded nothing
        running.release()
    with warnings.catch_warnings():
        warnings.simplefilter("error", StaleIndexWarning)  # the ingest finished: every index is current
        done = open_retriever(store, mode="hybrid")
    assert _doc_ids(done, "item11x6")[0] == "doc11"
    assert not {"doc03", "doc05"} & set(_doc_ids(done, "item3x2") + _doc_ids(done, "item5x4"))


@pytest.mark.subprocess
def test_an_ingest_that_was_interrupted_still_says_so(stores: tuple[Path, Path]) -> None:
    store, v2 = stores
    with GatedIngest(v2, store, "embed") as running:
        running.wait_gated()
        os.kill(running.pid, signal.SIGKILL)
        running.proc.wait(timeout=DONE_S)
    with pytest.raises(StoreError, match=r"\d+ of \d+ chunks have no vector.*interrupted while embedding"):
        open_retriever(store, mode="hybrid")
    with pytest.warns(StaleIndexWarning, match="interrupted while embedding.*searching with BM25 only"):
        assert isinstance(open_retriever(store).current, BM25Retriever)


@pytest.mark.subprocess
def test_a_store_being_created_says_so_instead_of_not_a_chunk_store(tmp_path: Path) -> None:
    v1, _ = _corpora(tmp_path)
    store = tmp_path / "store"
    with GatedIngest(v1, store, "schema") as creating:
        creating.wait_gated()
        for mode in ("bm25", "hybrid"):
            with pytest.raises(StoreError, match=rf"pid {creating.pid}.*is writing this store.*creating") as info:
                open_retriever(store, mode=mode)
            assert "not a chunk store" not in str(info.value)
        creating.release()
    assert isinstance(open_retriever(store, mode="hybrid").current, HybridRetriever)


@pytest.mark.subprocess
def test_the_first_ingest_of_a_store_is_searchable_while_it_embeds(tmp_path: Path) -> None:
    _, v2 = _corpora(tmp_path)
    store = tmp_path / "store"
    with GatedIngest(v2, store, "embed") as running:
        running.wait_gated()
        with pytest.warns(StaleIndexWarning, match="is writing this store"):
            hybrid = open_retriever(store, mode="hybrid")
        assert _doc_ids(hybrid, "item11x6")[0] == "doc11"
        assert "doc03" not in _doc_ids(hybrid, "item3x2")
        running.release()


@pytest.mark.subprocess
def test_a_retriever_opened_before_the_ingest_follows_it_while_it_runs(stores: tuple[Path, Path]) -> None:
    """Issue 25, section 2: retrievers opened before the ingest (one per mode, kept), asked while it is stopped
    mid-embedding and after it finished, answer as retrievers opened at that moment do: never with the chunks the
    new version relabelled RESTRICTED (doc03) or retracted (doc05), with the lexical channel's new chunks."""
    store, v2 = stores
    modes = ("hybrid", "vector", "auto", "bm25")
    with warnings.catch_warnings():
        warnings.simplefilter("error", StaleIndexWarning)
        kept = {mode: open_retriever(store, mode=mode) for mode in modes}
    assert all("doc03" in _doc_ids(r, "item3x2") for r in kept.values())  # public before the ingest
    queries = ("item3x2", "item5x4", "Document 3 paragraph 1", "Document 5", "item11x6")
    with GatedIngest(v2, store, "embed") as running:
        running.wait_gated()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", StaleIndexWarning)  # the vectors are being made (said elsewhere)
            for mode, retriever in kept.items():
                fresh = open_retriever(store, mode=mode)
                for query in queries:
                    found = _doc_ids(retriever, query)
                    assert "doc03" not in found and "doc05" not in found, (mode, query, found)
                    assert found == _doc_ids(fresh, query), (mode, query)
                if mode != "vector":
                    assert _doc_ids(retriever, "item11x6")[0] == "doc11", mode
        running.release()
    with warnings.catch_warnings():
        warnings.simplefilter("error", StaleIndexWarning)  # the ingest finished: the saved indexes are current
        for mode, retriever in kept.items():
            fresh = open_retriever(store, mode=mode)
            for query in queries:
                assert _doc_ids(retriever, query) == _doc_ids(fresh, query), (mode, query)
