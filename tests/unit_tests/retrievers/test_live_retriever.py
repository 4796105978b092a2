"""Issue 25, section 2: a relabel or a retraction takes effect without a restart.

A retriever opened from a store directory (``open_retriever``; the ``langgraph dev`` app caches one) kept serving a
document after it was relabelled RESTRICTED or deleted and the store re-ingested.  ``open_retriever`` now returns a
``LiveStoreRetriever``: it reloads when the store's generation (or ``index.json``) changed and gates every result
against the store's active rows.  Each case below runs under one retriever that lives across the re-ingest, in
every mode (BM25, dense, hybrid, auto, parent-child, a query transformation and a registered wrapping mode), sync
and async, with the re-ingest in this process and in another one; each line of defence is also tested alone.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

import langchain_ragspine
from langchain_ragspine.backends.directory.chunk_store import ChunkStore
from langchain_ragspine.errors import StaleIndexWarning, StoreError
from langchain_ragspine.graphs import build_corrective_rag
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.modes import RetrievalMode, register_mode, unregister_mode
from langchain_ragspine.pipeline.sources import open_retriever, search
from langchain_ragspine.retrievers import (
    BM25Retriever,
    HybridRetriever,
    LiveStoreRetriever,
    ParentChildRetriever,
    StoreReloadWarning,
)
from langchain_ragspine.retrievers.live import GENERATION_TAG

ROOT = Path(langchain_ragspine.__file__).resolve().parents[1]
CANARY = "CANARYQZX"
QUERY = f"{CANARY} rivers temples harbours"
#: What each document holds; ``a`` carries the canary.
TEXTS = {
    "a": f"# Alpha\n\n{CANARY} rivers of the secret valley.",
    "b": "# Beta\n\nPublic rivers and temples of Kyoto.",
    "c": "# Gamma\n\nPublic harbours and rivers of Osaka.",
}


def _corpus(root: Path) -> Path:
    corpus = root / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    for name, text in TEXTS.items():
        (corpus / f"{name}.md").write_text(text + "\n", "utf-8")
    return corpus


def _relabel(corpus: Path, name: str = "a") -> None:
    (corpus / f"{name}.json").write_text(json.dumps({"sensitivity": "RESTRICTED"}), "utf-8")


def _delete(corpus: Path, name: str = "a") -> None:
    (corpus / f"{name}.md").unlink()


#: mode -> the ingest options its store needs
MODES: dict[str, dict[str, Any]] = {
    "bm25": {"mode": "bm25"},
    "vector": {"embedding": "hashing", "mode": "vector"},
    "hybrid": {"embedding": "hashing", "mode": "hybrid"},
    "auto": {"embedding": "hashing"},
    "parent_child": {"embedding": "hashing", "chunker": "parent_child", "mode": "parent_child",
                     "chunk_size": 40, "chunk_overlap": 10},
    "glossary": {"embedding": "hashing"},
    "live-reversed": {"embedding": "hashing"},
}


def _cli_args(options: dict[str, Any]) -> list[str]:
    out = []
    for key, value in options.items():
        out += [f"--{key.replace('_', '-')}", str(value)]
    return out


def _reingest(corpus: Path, store: Path, options: dict[str, Any], *, other_process: bool) -> None:
    if not other_process:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ingest(corpus, store, progress=False, **options)
        return
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run(
        [sys.executable, "-m", "langchain_ragspine", "ingest", str(corpus), "--store", str(store),
         *_cli_args(options)],
        env=env, capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 0, proc.stderr


class Reversed(BaseRetriever):
    """A wrapping mode of a user's: its base's results in reverse order."""

    base: BaseRetriever

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        return list(reversed(self.base.invoke(query)))


@pytest.fixture
def live_modes(tmp_path, monkeypatch):
    """The glossary transformation (its file) and a registered wrapping mode, for the duration of a test."""
    glossary = tmp_path / "glossary.yaml"
    glossary.write_text("- [rivers, 川]\n", "utf-8")
    monkeypatch.setenv("RAGSPINE_GLOSSARY", str(glossary))
    register_mode(RetrievalMode.wrapping("live-reversed", base="auto", wrap=lambda r, ctx: Reversed(base=r)))
    yield
    unregister_mode("live-reversed")


def _texts(docs: list[Document]) -> str:
    """What the results carry of the corpus (a query transformation's record of the queries echoes the query)."""
    return repr([(d.page_content, {k: v for k, v in d.metadata.items() if k != "query_transform"}) for d in docs])


def _found(retriever: BaseRetriever, *, use_async: bool = False) -> list[Document]:
    if use_async:
        return asyncio.run(retriever.ainvoke(QUERY, k=10))
    return search(retriever, QUERY, k=10)


def _rows(docs: list[Document]) -> list[tuple[Any, ...]]:
    return [(d.id, d.page_content, d.metadata.get("doc_version"), d.metadata.get("scores")) for d in docs]


@pytest.mark.subprocess
@pytest.mark.parametrize("other_process", [False, True], ids=["in-process", "other-process"])
@pytest.mark.parametrize("change", ["relabel", "delete"])
@pytest.mark.parametrize("mode", list(MODES))
def test_a_live_retriever_never_serves_a_relabelled_or_deleted_document(
    tmp_path, live_modes, mode, change, other_process
):
    corpus, store = _corpus(tmp_path), tmp_path / "S"
    options = MODES[mode]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a skipped transformation, a parent-child layout note
        ingest(corpus, store, progress=False, **options)
        retriever = open_retriever(store, mode=mode if mode not in ("auto",) else None, k=10)
    assert isinstance(retriever, LiveStoreRetriever)
    first = retriever.current
    before = _found(retriever)
    assert CANARY in _texts(before)  # not vacuous: the canary is found while it is public

    (_relabel if change == "relabel" else _delete)(corpus)
    _reingest(corpus, store, options, other_process=other_process)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for use_async in (False, True):
            after = _found(retriever, use_async=use_async)
            assert CANARY not in _texts(after), (mode, change, use_async)
            assert {"b", "c"} <= {d.metadata["doc_id"] for d in after}  # the rest is still served
        assert retriever.current is not first  # reloaded, not only gated
        fresh = open_retriever(store, mode=mode if mode not in ("auto",) else None, k=10)
        assert _rows(retriever.invoke(QUERY, k=10)) == _rows(fresh.invoke(QUERY, k=10))


def _live(tmp_path: Path, **options: Any) -> tuple[Path, Path, LiveStoreRetriever]:
    corpus, store = _corpus(tmp_path), tmp_path / "S"
    ingest(corpus, store, progress=False, **options)
    retriever = open_retriever(store, k=10, mode=options.get("mode"))
    assert isinstance(retriever, LiveStoreRetriever)
    assert CANARY in _texts(_found(retriever))
    return corpus, store, retriever


@pytest.mark.parametrize("change", ["relabel", "delete"])
def test_the_store_gate_alone_stops_the_stale_canary_when_the_reload_fails(tmp_path, change):
    """Second line of defence: a reload that fails keeps the previous retriever, whose results are gated against
    the current store — the canary is dropped, the rest served, a StoreReloadWarning says why."""
    corpus, store, retriever = _live(tmp_path, embedding="hashing", mode="hybrid")
    stale = retriever.current
    (_relabel if change == "relabel" else _delete)(corpus)
    ingest(corpus, store, progress=False, embedding="hashing", mode="hybrid")

    def broken() -> BaseRetriever:
        raise OSError("index directory being swapped")

    retriever.factory = broken
    with pytest.warns(StoreReloadWarning, match=r"could not be rebuilt \(OSError: index directory being swapped\)"):
        got = _found(retriever)
    assert CANARY not in _texts(got) and {"b", "c"} <= {d.metadata["doc_id"] for d in got}
    assert CANARY in _texts(stale.invoke(QUERY, k=10))  # the stale retriever itself still holds it: the gate acted
    with pytest.warns(StoreReloadWarning):
        assert CANARY not in _texts(asyncio.run(retriever.ainvoke(QUERY, k=10)))


def test_the_reload_alone_stops_the_stale_canary(tmp_path, monkeypatch):
    """First line: with the store gate switched off, the reload alone serves the new generation; with both off the
    canary comes back (what the test would catch)."""
    corpus, store, retriever = _live(tmp_path, mode="bm25")
    monkeypatch.setattr(LiveStoreRetriever, "_gate", lambda self, docs: list(docs))
    stale = retriever.current
    _relabel(corpus)
    ingest(corpus, store, progress=False, mode="bm25")
    assert CANARY in _texts(stale.invoke(QUERY, k=10))  # the old snapshot still holds the canary
    assert CANARY not in _texts(_found(retriever))
    monkeypatch.setattr(LiveStoreRetriever, "_serving", lambda self: self._snapshot)  # both lines off
    _delete(corpus, "b")
    _relabel(corpus, "c")
    (corpus / "a.json").unlink()  # a is public again, the live retriever stays on the last snapshot
    ingest(corpus, store, progress=False, mode="bm25")
    assert "Osaka" in _texts(_found(retriever))  # c, RESTRICTED by now: the leak this issue is about


def test_every_result_is_checked_against_the_version_it_was_read_from(tmp_path):
    """A changed document (new text and a filter field) is not served in its old version by a stale snapshot."""
    corpus, store, retriever = _live(tmp_path, mode="bm25")
    (corpus / "b.json").write_text(json.dumps({"dept": "sales"}), "utf-8")  # b: a new version, same text
    ingest(corpus, store, progress=False, mode="bm25")
    def mid_ingest() -> BaseRetriever:
        raise OSError("mid-ingest")

    retriever.factory = mid_ingest
    with pytest.warns(StoreReloadWarning):
        got = _found(retriever)
    assert "b" not in {d.metadata["doc_id"] for d in got}  # the old version of b: dropped
    assert {"a", "c"} <= {d.metadata["doc_id"] for d in got}


def test_results_without_doc_version_are_compared_by_text_and_current_label(tmp_path):
    """An index written before ``doc_version`` existed: a result is kept when the active row has its text and is not
    RESTRICTED; a document that is no row of the store is never returned (fail closed)."""
    corpus, store = _corpus(tmp_path), tmp_path / "S"
    ingest(corpus, store, progress=False, mode="bm25")
    with ChunkStore(store / "chunks.sqlite", read_only=True) as chunks:
        docs = [c.to_document() for c in chunks.iter_chunks()]
    for d in docs:
        d.metadata.pop("doc_version")
    foreign = Document(page_content="rivers of elsewhere", metadata={"chunk_id": "x#0", "doc_id": "x"})
    old_index = BM25Retriever.from_documents([*docs, foreign], k=10)
    retriever = LiveStoreRetriever(chunk_store=store / "chunks.sqlite", factory=lambda: old_index, k=10)
    got = retriever.invoke(QUERY)
    assert {d.metadata["doc_id"] for d in got} == {"a", "b", "c"}  # same text, unrestricted: kept; x: dropped
    _relabel(corpus)
    (corpus / "c.md").write_text(TEXTS["c"] + " Now longer.\n", "utf-8")
    ingest(corpus, store, progress=False, mode="bm25")
    assert {d.metadata["doc_id"] for d in retriever.invoke(QUERY)} == {"b"}  # a RESTRICTED, c's text changed


@pytest.mark.subprocess
def test_a_live_graph_answers_without_the_relabelled_canary(tmp_path):
    """The corrective graph built once over the live retriever: its answer, citations and documents lose the canary
    after the relabel (in another process), with no rebuild of the graph."""
    corpus, store, retriever = _live(tmp_path, mode="bm25")
    graph = build_corrective_rag(retriever, llm=None)
    question = f"What about {CANARY} rivers?"
    before = graph.invoke({"question": question})
    assert CANARY in repr([before["answer"], before["citations"], before["documents"]])
    _relabel(corpus)
    _reingest(corpus, store, {"mode": "bm25"}, other_process=True)
    after = graph.invoke({"question": question})
    assert CANARY not in repr([after["answer"], after["citations"], after["documents"]])  # (the trace echoes the
    # question)
    assert after["documents"]  # it still answers from the rest


def test_k_filter_options_ids_and_trace_pass_through(tmp_path):
    _corpus_dir, store, retriever = _live(tmp_path, embedding="hashing", mode="hybrid")
    assert len(retriever.invoke(QUERY, k=1)) == 1
    assert {d.metadata["doc_id"] for d in retriever.invoke(QUERY, filter={"doc_id": "c"})} == {"c"}
    assert all(d.id == d.metadata["chunk_id"] for d in retriever.invoke(QUERY))
    wide = retriever.invoke(QUERY, fetch_k=2)  # a hybrid option reaches the hybrid
    assert wide and wide == retriever.current.invoke(QUERY, fetch_k=2)
    assert retriever.invoke(QUERY, embed_as="document")
    bm25 = open_retriever(store, mode="bm25")
    with pytest.raises(TypeError, match=r"BM25Retriever\.invoke got unexpected keyword argument 'fetch_k'"):
        bm25.invoke(QUERY, fetch_k=3)
    with pytest.raises(TypeError, match=r"LiveStoreRetriever\.invoke got unexpected keyword argument 'kk'"):
        bm25.invoke(QUERY, kk=3)

    class Tags(BaseCallbackHandler):
        def __init__(self) -> None:
            self.runs: list[tuple[str, list[str]]] = []

        def on_retriever_start(self, serialized: Any, query: str, *, tags: Any = None, **kwargs: Any) -> None:
            self.runs.append((kwargs.get("name") or (serialized or {}).get("name", ""), list(tags or [])))

    spy = Tags()
    retriever.invoke(QUERY, config={"callbacks": [spy]})
    assert any(f"{GENERATION_TAG}:{retriever.generation}" in tags for _, tags in spy.runs)  # the snapshot's run


def test_current_and_generation_follow_the_store(tmp_path):
    corpus, store, retriever = _live(tmp_path, mode="bm25")
    with ChunkStore(store / "chunks.sqlite", read_only=True) as chunks:
        assert retriever.generation == chunks.generation
    first = retriever.current
    assert isinstance(first, BM25Retriever) and retriever.refresh() is False and retriever.current is first
    _relabel(corpus)
    ingest(corpus, store, progress=False, mode="bm25")
    assert retriever.refresh() is True and retriever.current is not first
    with ChunkStore(store / "chunks.sqlite", read_only=True) as chunks:
        assert retriever.generation == chunks.generation


def test_an_index_only_change_is_picked_up_through_index_json(tmp_path):
    """A re-ingest that changes no chunk (another tokenizer) leaves the generation as it was; index.json changes."""
    corpus, store = _corpus(tmp_path), tmp_path / "S"
    ingest(corpus, store, progress=False, tokenizer="cjk")
    retriever = open_retriever(store, mode="bm25")
    generation = retriever.generation
    assert retriever.current.tokenizer == "cjk"
    ingest(corpus, store, progress=False, tokenizer="whitespace")
    assert retriever.current.tokenizer == "whitespace" and retriever.generation == generation


def test_a_store_replaced_by_a_new_one_is_reopened(tmp_path):
    """The store directory deleted and ingested again (a new chunks.sqlite file): the kept connection would read
    the old, unlinked file forever; the retriever reopens the new one."""
    corpus, store, retriever = _live(tmp_path, mode="bm25")
    shutil.rmtree(store)
    _relabel(corpus)
    ingest(corpus, store, progress=False, mode="bm25")
    got = _found(retriever)
    assert CANARY not in _texts(got) and {"b", "c"} <= {d.metadata["doc_id"] for d in got}
    shutil.rmtree(store)
    with pytest.raises(StoreError, match="the chunk store is gone"):
        retriever.invoke(QUERY)


def test_concurrent_calls_share_one_reload_and_see_a_whole_retriever(tmp_path):
    """While one call rebuilds, another waits for it (the factory runs once) and is served by the new retriever."""
    corpus, store, retriever = _live(tmp_path, mode="bm25")
    build, entered, release = retriever.factory, threading.Event(), threading.Event()
    calls = []

    def slow() -> BaseRetriever:
        calls.append(1)
        entered.set()
        release.wait()
        return build()

    retriever.factory = slow
    _relabel(corpus)
    ingest(corpus, store, progress=False, mode="bm25")
    results: dict[str, list[Document]] = {}
    first = threading.Thread(target=lambda: results.__setitem__("first", _found(retriever)))
    first.start()
    assert entered.wait(timeout=120), "the first call did not start a reload"  # a readiness wait, not a timing check
    second = threading.Thread(target=lambda: results.__setitem__("second", _found(retriever)))
    second.start()
    release.set()
    first.join()
    second.join()
    assert len(calls) == 1
    for name in ("first", "second"):
        assert CANARY not in _texts(results[name]) and {"b", "c"} <= {d.metadata["doc_id"] for d in results[name]}


def test_parent_child_and_hybrid_inner_retrievers_are_exposed(tmp_path):
    corpus, store = _corpus(tmp_path), tmp_path / "S"
    ingest(corpus, store, progress=False, **MODES["parent_child"])
    retriever = open_retriever(store, mode="parent_child", k=2)
    assert isinstance(retriever.current, ParentChildRetriever)
    assert isinstance(retriever.current.child_retriever, HybridRetriever)


def test_the_first_build_errors_come_from_open_retriever(tmp_path):
    with pytest.raises(StoreError, match="no chunk store here"):
        open_retriever(tmp_path / "nothing")
    corpus, store = _corpus(tmp_path), tmp_path / "S"
    ingest(corpus, store, progress=False, mode="bm25")
    with pytest.raises(StoreError, match="needs a vector index"):
        open_retriever(store, mode="vector")
    (store / "index.json").write_text("{}", "utf-8")  # the saved index no longer matches: rebuilt, and said so
    with pytest.warns(StaleIndexWarning) as caught:
        open_retriever(store, mode="bm25")
    assert caught[0].filename == __file__  # the user's line, not pydantic's or langchain_core's


def test_chunk_store_active_versions_and_get_chunks(tmp_path):
    corpus, store = _corpus(tmp_path), tmp_path / "S"
    ingest(corpus, store, progress=False, chunker="parent_child", chunk_size=40, chunk_overlap=10)
    with ChunkStore(store / "chunks.sqlite", read_only=True) as chunks:
        active = chunks.active_versions(["a#0", "a#p0", "missing"])
        assert active == {"a#0": ("a", 1), "a#p0": ("a", 1)}
        assert set(chunks.get_chunks(["a#0", "a#p0"])) == {"a#0"}
        with pytest.raises(TypeError):
            chunks.active_versions("a#0")
    _relabel(corpus)
    ingest(corpus, store, progress=False, chunk_size=40, chunk_overlap=10)
    with ChunkStore(store / "chunks.sqlite", read_only=True) as chunks:
        assert chunks.active_versions(["a#0", "a#p0"]) == {"a#0": ("a", 2), "a#p0": ("a", 2)}
        assert chunks.get_chunks(["a#0"])["a#0"].sensitivity == "RESTRICTED"
    _delete(corpus)
    ingest(corpus, store, progress=False, chunk_size=40, chunk_overlap=10)
    with ChunkStore(store / "chunks.sqlite", read_only=True) as chunks:
        assert chunks.active_versions(["a#0", "a#p0", "b#0"]) == {"b#0": ("b", 1)}


def test_a_store_being_written_serves_its_last_commit(tmp_path, monkeypatch):
    """Another writer's transaction is open (an ingest between two batch commits): the retriever reads the last
    committed state (WAL), and after the commit it rebuilds from the store, whose saved index is not rewritten yet."""
    from langchain_ragspine.backends.directory import _sqlite

    monkeypatch.setattr(_sqlite, "BATCH_SECONDS", float("inf"))  # the batch commits when its block ends, not before
    corpus, store, retriever = _live(tmp_path, mode="bm25")
    with ChunkStore(store / "chunks.sqlite") as writer, writer.write_batch():
        writer.replace_doc_chunks("a", [])  # retracted, not committed yet
        assert CANARY in _texts(_found(retriever))  # still public as far as any reader can tell
    with pytest.warns(StaleIndexWarning, match="saved BM25 index not used"):
        got = _found(retriever)  # committed: rebuilt in memory (index.json is of the previous generation)
    assert CANARY not in _texts(got) and {"b", "c"} <= {d.metadata["doc_id"] for d in got}
