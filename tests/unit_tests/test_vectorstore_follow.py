"""Issue 25 (trial, section 2): a live ``RagSpineVectorStore`` follows its store directory when it is rebuilt.

A vector store kept open by an app held one SQLite connection to ``chunks.sqlite``; after ``rm -rf store`` and a new
ingest, or another store ``mv``'d into its place, it went on serving the old file — a document relabelled RESTRICTED
in the rebuild still came back, whatever the new generation — and every write after that went to the old, unlinked
file and was lost.  The vector store now applies the rule ``LiveStoreRetriever`` had (``backends/directory/_follow.py``: the
file at the path is identified by ``(st_dev, st_ino)``, and the indexes are built from ``(identity,
generation)``) before every read and write; these tests run one store across each kind of replacement.
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
from langchain_ragspine.indexing import ingest, open_retriever
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
    "rm-other-process": (_rm_other_process, True),
}


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


@pytest.mark.parametrize("how", list(REPLACEMENTS))
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


@pytest.mark.parametrize("how", list(REPLACEMENTS))
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
