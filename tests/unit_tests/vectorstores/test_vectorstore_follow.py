"""Issue 25 (trial, section 2): a live ``RagSpineVectorStore`` follows its store directory when it is rebuilt.

A vector store kept open by an app held one SQLite connection to ``chunks.sqlite``; after ``rm -rf store`` and a new
ingest, or another store ``mv``'d into its place, it went on serving the old file — a document relabelled RESTRICTED
in the rebuild still came back, whatever the new generation — and every write after that went to the old, unlinked
file and was lost.  The vector store now applies the rule ``LiveStoreRetriever`` had (``backends/directory/follow.py``: the
file at the path is identified by ``(st_dev, st_ino)``, and the indexes are built from ``(identity, store id,
generation)``) before every read and write; these tests run one store across each kind of replacement.  Issue 25
(fresh-clone trial b): another store copied over the store in place (``cp -r new/. store/``: the same inodes, the
same generation) was still served by the vector store — only the store id (``meta.store_id``) tells them apart,
and the kept connection's page cache has to be dropped to read it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import langchain_ragspine
from langchain_ragspine.backends.directory.chunk_store import ChunkStore
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.errors import StoreError
from langchain_ragspine.graphs import build_corrective_rag
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.sources import open_retriever
from langchain_ragspine.retrievers import LiveStoreRetriever
from langchain_ragspine.vectorstores import ChunkStoreBackend, RagSpineVectorStore

ROOT = Path(langchain_ragspine.__file__).resolve().parents[1]
EMB = HashingEmbeddings(64)
CANARY = "CANARYVSQ"
QUERY = f"{CANARY} falcon rivers"
TEXTS = {
    "a": f"# Alpha\n\nThe secret falcon codename is {CANARY}.",
    "b": "# Beta\n\nThe falcon flies over the rivers of Kyoto.",
    "c": "# Gamma\n\nFalcon dives over the rivers of Osaka.",
}


def _corpus(root: Path) -> Path:
    corpus = root / "corpus"
    corpus.mkdir(parents=True)
    for name, text in TEXTS.items():
        (corpus / f"{name}.md").write_text(text + "\n", "utf-8")
    return corpus


def _relabel(corpus: Path) -> None:
    (corpus / "a.json").write_text(json.dumps({"sensitivity": "RESTRICTED"}), "utf-8")


def _ingest(corpus: Path, store: Path) -> None:
    ingest(corpus, store, progress=False, mode="bm25")


def _generation(store: Path) -> int:
    with ChunkStore(store / "chunks.sqlite", read_only=True) as chunks:
        return chunks.generation


def _rm_same_generation(corpus: Path, store: Path) -> None:
    shutil.rmtree(store)
    _ingest(corpus, store)


def _rm_other_generation(corpus: Path, store: Path) -> None:
    (corpus / "d.md").write_text("# Delta\n\nAnother falcon of the rivers.\n", "utf-8")
    shutil.rmtree(store)
    _ingest(corpus, store)


def _moved_into_place(corpus: Path, store: Path) -> None:
    new = store.parent / "new-store"
    _ingest(corpus, new)
    os.rename(store, store.parent / "old-store")
    os.rename(new, store)


def _copied_in_place(corpus: Path, store: Path) -> None:
    """Another store, ingested elsewhere, copied over this one file by file (``cp -r new/. store/``): every file
    keeps its inode, so only the store id tells the new chunk store from the old."""
    new = store.parent / "new-store"
    _ingest(corpus, new)
    inode = os.stat(store / "chunks.sqlite").st_ino
    shutil.copytree(new, store, dirs_exist_ok=True, copy_function=shutil.copyfile)  # overwrites in place
    assert os.stat(store / "chunks.sqlite").st_ino == inode


def _rm_other_process(corpus: Path, store: Path) -> None:
    shutil.rmtree(store)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run([sys.executable, "-m", "langchain_ragspine", "ingest", str(corpus), "--store", str(store),
                    "--mode", "bm25"], check=True, capture_output=True, env=env, timeout=300)


#: how the store directory is replaced, and whether the new chunk store has the old one's generation
REPLACEMENTS: dict[str, tuple[Callable[[Path, Path], None], bool]] = {
    "rm-same-generation": (_rm_same_generation, True),
    "rm-other-generation": (_rm_other_generation, False),
    "mv-into-place": (_moved_into_place, True),
    "cp-in-place": (_copied_in_place, True),
    "rm-other-process": (_rm_other_process, True),
}
#: the ``how`` of the tests below (the one that runs the CLI in a child process is marked so)
HOWS = [pytest.param(how, marks=pytest.mark.subprocess) if how == "rm-other-process" else how for how in REPLACEMENTS]


def _texts(docs: Any) -> str:
    return " ".join(d.page_content for d in docs)


def _reads(vs: RagSpineVectorStore) -> dict[str, str]:
    """What each exit of the store returns for the canary query."""
    return {
        "similarity": _texts(vs.similarity_search(QUERY, k=10)),
        "scored": _texts(d for d, _ in vs.similarity_search_with_score(QUERY, k=10)),
        "mmr": _texts(vs.max_marginal_relevance_search(QUERY, k=5, fetch_k=10)),
        "bm25": _texts(vs.bm25_search(QUERY, k=10)),
        "hybrid": _texts(vs.hybrid_search(QUERY, k=10)),
        "get_by_ids": _texts(vs.get_by_ids(["a#0", "b#0", "c#0"])),
    }


@pytest.fixture
def live(tmp_path: Path) -> tuple[Path, Path, RagSpineVectorStore]:
    corpus, store = _corpus(tmp_path), tmp_path / "store"
    _ingest(corpus, store)
    vs = RagSpineVectorStore(store, EMB)
    assert all(CANARY in text for text in _reads(vs).values())  # the canary is served before
    return corpus, store, vs


@pytest.mark.parametrize("how", HOWS)
def test_every_read_follows_a_rebuilt_store_directory(live, how: str) -> None:
    """Regression: every exit kept serving the old file (the canary labelled PUBLIC), whatever the generation."""
    corpus, store, vs = live
    retriever = vs.as_retriever(search_kwargs={"k": 10})  # hybrid, kept across the rebuild as an app keeps it
    bm25 = vs.as_retriever(search_type="bm25", search_kwargs={"k": 10})
    before = _generation(store)
    replace, same_generation = REPLACEMENTS[how]
    _relabel(corpus)
    replace(corpus, store)
    assert (_generation(store) == before) is same_generation
    reads = _reads(vs)
    assert not [name for name, text in reads.items() if CANARY in text]
    assert "Kyoto" in reads["bm25"] and "Osaka" in reads["get_by_ids"]  # the new store answers
    assert CANARY not in _texts(retriever.invoke(QUERY)) + _texts(bm25.invoke(QUERY))
    vs.close()


@pytest.mark.parametrize("how", HOWS)
def test_a_write_after_the_rebuild_goes_to_the_new_store(live, how: str) -> None:
    """Regression: ``add_texts`` after the rebuild returned its ids, but wrote to the old (unlinked) file: a new
    instance never saw the record."""
    corpus, store, vs = live
    REPLACEMENTS[how][0](corpus, store)
    assert vs.add_texts(["a falcon record written after the rebuild"], ids=["w1"]) == ["w1"]
    fresh = RagSpineVectorStore(store, EMB)
    assert [d.id for d in fresh.get_by_ids(["w1"])] == ["w1"] == [d.id for d in vs.get_by_ids(["w1"])]
    assert vs.delete(["w1"]) and fresh.get_by_ids(["w1"]) == []
    fresh.close()
    vs.close()


def test_a_graph_on_the_vector_store_retriever_follows_the_rebuild(live) -> None:
    corpus, store, vs = live
    graph = build_corrective_rag(vs.as_retriever(), llm=None)
    secret = "secret falcon codename"  # in the canary document, not in the question
    assert secret in json.dumps(graph.invoke({"question": QUERY, "filters": None}), default=str)
    _relabel(corpus)
    _rm_same_generation(corpus, store)
    assert secret not in json.dumps(graph.invoke({"question": QUERY, "filters": None}), default=str)
    vs.close()


def test_a_removed_store_fails_clearly_and_is_not_recreated(live) -> None:
    corpus, store, vs = live
    shutil.rmtree(store)
    with pytest.raises(StoreError, match="the chunk store is gone"):
        vs.similarity_search(QUERY)
    with pytest.raises(StoreError, match=r"add_documents wrote nothing.*the chunk store is gone"):
        vs.add_texts(["lost?"], ids=["w1"])
    assert not store.exists()  # no empty store left under the path
    _relabel(corpus)
    _ingest(corpus, store)  # rebuilt: picked up by the next call
    assert vs.add_texts(["kept"], ids=["w1"]) == ["w1"]
    assert "Kyoto" in _reads(vs)["bm25"] and CANARY not in _texts(vs.get_by_ids(["a#0"]))
    vs.close()


def _swap(store: Path, other: Path) -> None:
    """Exchange the store directory with ``other`` (each a complete store)."""
    aside = store.parent / "aside"
    os.rename(store, aside)
    os.rename(other, store)
    os.rename(aside, other)


def test_a_write_whose_store_is_replaced_while_it_commits_goes_to_the_new_store(live, monkeypatch) -> None:
    corpus, store, vs = live
    other = store.parent / "other"
    _ingest(corpus, other)
    original, calls = ChunkStoreBackend._upsert, []

    def replaced_meanwhile(self: ChunkStoreBackend, chunks: ChunkStore, docs: Any) -> None:
        calls.append(chunks.path)
        original(self, chunks, docs)
        if len(calls) == 1:
            _swap(store, other)  # before the commit: the transaction is on the file now at `other`

    monkeypatch.setattr(ChunkStoreBackend, "_upsert", replaced_meanwhile)
    assert vs.add_texts(["written once the store was swapped"], ids=["w1"]) == ["w1"]
    assert len(calls) == 2  # written again, to the store now at the path
    fresh = RagSpineVectorStore(store, EMB)
    assert [d.id for d in fresh.get_by_ids(["w1"])] == ["w1"]
    fresh.close()

    def always_replaced(self: ChunkStoreBackend, chunks: ChunkStore, docs: Any) -> None:
        original(self, chunks, docs)
        _swap(store, other)

    monkeypatch.setattr(ChunkStoreBackend, "_upsert", always_replaced)
    with pytest.raises(StoreError, match=r"the store was replaced while each of 3 attempts of this write committed"):
        vs.add_texts(["never in place"], ids=["w2"])
    vs.close()


def test_a_live_retriever_without_watched_files_follows_a_replaced_chunk_store(tmp_path: Path) -> None:
    """The shared rule: a chunk store replaced by one of the same generation reloads the retriever even when no
    other file is watched (the generation alone said nothing changed, and the gate passed the old rows: the new
    store has them too, at the same version, relabelled)."""
    corpus, store = _corpus(tmp_path), tmp_path / "store"
    _ingest(corpus, store)
    factory = open_retriever(store, mode="bm25").factory
    retriever = LiveStoreRetriever(chunk_store=store / "chunks.sqlite", factory=factory, k=10)
    assert CANARY in _texts(retriever.invoke(QUERY))
    before = _generation(store)
    _relabel(corpus)
    _rm_same_generation(corpus, store)
    assert _generation(store) == before
    got = retriever.invoke(QUERY)
    assert CANARY not in _texts(got) and "Kyoto" in _texts(got)


#: in the canary document's text, not in the question (a graph's state holds the question)
SECRET = "secret falcon codename"


def _restricted_served(store: Path, vs: RagSpineVectorStore, live: LiveStoreRetriever, unwatched: LiveStoreRetriever,
                       graph: Any) -> list[str]:
    """The followers that return the canary document (labelled RESTRICTED after the copy)."""
    served = {
        "vector store": _texts(vs.similarity_search(QUERY, k=10)) + _texts(vs.bm25_search(QUERY, k=10)),
        "open_retriever": _texts(live.invoke(QUERY)),
        "LiveStoreRetriever without watched files": _texts(unwatched.invoke(QUERY)),
        "graph on vs.as_retriever()": json.dumps(graph.invoke({"question": QUERY, "filters": None}), default=str),
    }
    return [name for name, text in served.items() if SECRET in text]


def test_every_follower_follows_another_store_copied_over_it_in_place(tmp_path: Path) -> None:
    """Regression (issue 25, trial b): after ``cp -r new/. store/`` of a store of the same generation in which the
    canary document is RESTRICTED, the live vector store (and a graph on its retriever) kept serving the canary;
    every follower shares the state ``(file identity, store id, generation)`` now."""
    corpus, store = _corpus(tmp_path), tmp_path / "store"
    _ingest(corpus, store)
    vs = RagSpineVectorStore(store, EMB)
    live = open_retriever(store, mode="bm25", k=10)
    unwatched = LiveStoreRetriever(chunk_store=store / "chunks.sqlite", factory=live.factory, k=10)
    graph = build_corrective_rag(vs.as_retriever(search_kwargs={"k": 10}), llm=None)
    assert _restricted_served(store, vs, live, unwatched, graph) == [
        "vector store", "open_retriever", "LiveStoreRetriever without watched files", "graph on vs.as_retriever()"]
    _relabel(corpus)
    _copied_in_place(corpus, store)
    assert _generation(store) == _generation(store.parent / "new-store")
    assert _restricted_served(store, vs, live, unwatched, graph) == []
    assert "Kyoto" in _texts(vs.bm25_search(QUERY, k=10)) and "Kyoto" in _texts(unwatched.invoke(QUERY))
    vs.close()


def _drop_store_id(path: Path) -> None:
    """Make ``path`` a store of before store ids (no ``meta.store_id`` row)."""
    import sqlite3

    con = sqlite3.connect(path)
    with con:
        con.execute("DELETE FROM meta WHERE key = 'store_id'")
    con.close()


def test_a_store_without_an_id_gets_one_from_a_writer_never_from_a_reader(tmp_path: Path) -> None:
    corpus, store = _corpus(tmp_path), tmp_path / "store"
    _ingest(corpus, store)
    db = store / "chunks.sqlite"
    with ChunkStore(db, read_only=True) as chunks:
        first = chunks.store_id
    assert first is not None and len(first) == 32
    _drop_store_id(db)
    with ChunkStore(db, read_only=True) as chunks:
        assert chunks.store_id is None and chunks.follow_state() == (None, chunks.generation)
    with ChunkStore(db, read_only=True) as chunks:  # a read-only open wrote nothing
        assert chunks.store_id is None
    generation = _generation(store)
    with ChunkStore(db) as chunks:  # a writer gives it one (a new one), without a new generation
        assert chunks.store_id not in (None, first) and chunks.generation == generation
    other = tmp_path / "other"
    _ingest(corpus, other)
    with ChunkStore(other / "chunks.sqlite", read_only=True) as a, ChunkStore(db, read_only=True) as b:
        assert a.store_id != b.store_id  # every store its own


def test_a_store_without_an_id_is_told_from_a_copied_in_store_with_one(tmp_path: Path) -> None:
    """A follower of a store of before store ids compares it as "no id": another store (same generation) copied
    over it in place is seen."""
    corpus, store = _corpus(tmp_path), tmp_path / "store"
    _ingest(corpus, store)
    _drop_store_id(store / "chunks.sqlite")
    factory = open_retriever(store, mode="bm25").factory
    retriever = LiveStoreRetriever(chunk_store=store / "chunks.sqlite", factory=factory, k=10)
    assert CANARY in _texts(retriever.invoke(QUERY))
    _relabel(corpus)
    _copied_in_place(corpus, store)
    got = retriever.invoke(QUERY)
    assert CANARY not in _texts(got) and "Kyoto" in _texts(got)
