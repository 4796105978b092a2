"""The backend interface's contract (issue 26, B2/B3): the same assertions on the directory store and on PostgreSQL.

Each test takes ``backend``, parametrized over both implementations of :mod:`langchain_ragspine.backends.base`: the
directory store (``ChunkStore`` + its in-memory search, ``IndexSnapshot``) and PostgreSQL (``PostgresChunkStore`` +
``PostgresSearch``, through the session's pgserver like ``test_postgres_*.py``; the ``postgres`` parameter is marked
``postgres`` / ``integration`` and skips, saying why, where pgserver is not installed).  Storage: versions, no-op
writes, retraction, generation bumps, get by ids, facet filters, parents (stored, or refused by name), RESTRICTED
chunks (stored as history, never served).  Search over one tiny corpus: BM25 and vector search with filters, the
RESTRICTED chunk never found.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document

from langchain_ragspine.backends.base import PARENTS, ChunkBackend, SearchBackend, refuse
from langchain_ragspine.backends.directory.backend import ChunkStoreBackend
from langchain_ragspine.backends.directory.chunk_store import ChunkStore
from langchain_ragspine.backends.directory.indexes import IndexConfig, IndexSnapshot
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.embeddings.batching import l2_normalize
from langchain_ragspine.tokenizers import get_tokenizer

EMBEDDING = HashingEmbeddings(64)


def chunk(doc_id: str, i: int, text: str, **extra: Any) -> Document:
    md = {"doc_id": doc_id, "chunk_id": f"{doc_id}#{i}", "source_locator": f"{doc_id}.md#{i}", **extra}
    return Document(page_content=text, metadata=md, id=md["chunk_id"])


#: The tiny corpus of the search tests: ``{doc_id: chunks}``.
CORPUS: dict[str, list[Document]] = {
    "tsuyu": [chunk("tsuyu", 0, "梅雨は六月から七月の雨季。", language="ja", dept="a"),
              chunk("tsuyu", 1, "梅雨前線が停滞する。", language="ja", dept="b")],
    "beijing": [chunk("beijing", 0, "北京是中国的首都。", language="zh", dept="a")],
    "falcon": [chunk("falcon", 0, "The falcon hunts over the river.", language="en", dept="a"),
               chunk("falcon", 1, "Secret falcon nesting sites.", language="en", dept="a", sensitivity="RESTRICTED")],
}


@dataclass
class Backend:
    """One implementation under test: its storage, and ``search()`` — its search over what storage holds now
    (written through ``write_corpus``, the backend's own path to vectors)."""

    kind: str
    store: Any
    search: Callable[[], Any]
    write_corpus: Callable[[dict[str, list[Document]]], None]


def _embed(items: list[tuple[str, str]]) -> np.ndarray:
    return l2_normalize(np.asarray(EMBEDDING.embed_documents([t for _, t in items]), dtype=np.float32))


def _directory(tmp_path: Path) -> Iterator[Backend]:
    with ChunkStore(tmp_path / "chunks.sqlite") as store:
        def search() -> IndexSnapshot:
            return IndexSnapshot.build(ChunkStoreBackend.stored_records(store), IndexConfig(get_tokenizer("auto"), "flat"), _embed,
                                       state=store.generation)

        def write_corpus(corpus: dict[str, list[Document]]) -> None:
            for doc_id, chunks in corpus.items():
                store.replace_doc_chunks(doc_id, chunks)

        yield Backend("directory", store, search, write_corpus)


def _postgres(url: str) -> Iterator[Backend]:
    from langchain_ragspine.backends.postgres.chunk_store import PostgresChunkStore
    from langchain_ragspine.backends.postgres.search import PostgresSearch
    from langchain_ragspine.backends.postgres.versions import write_versions

    with PostgresChunkStore(url) as store:
        def write_corpus(corpus: dict[str, list[Document]]) -> None:
            write_versions(url, corpus, embedding=EMBEDDING)  # the chunks and their vectors, one transaction

        yield Backend("postgres", store, lambda: PostgresSearch(url), write_corpus)


@pytest.fixture(params=["directory", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "directory":
        yield from _directory(tmp_path)
    else:
        yield from _postgres(request.getfixturevalue("pg_url"))


def texts(store: Any, **kw: Any) -> list[tuple[str, str]]:
    return [(c.chunk_id, c.text) for c in store.iter_chunks(**kw)]


# -- storage ----------------------------------------------------------------------------------------------------------
def test_both_stores_are_chunk_backends_and_both_searches_search_backends(backend: Backend) -> None:
    backend.write_corpus(CORPUS)
    assert isinstance(backend.store, ChunkBackend)
    assert isinstance(backend.search(), SearchBackend)


def test_a_write_is_a_new_version_an_identical_write_a_no_op_and_each_write_bumps_the_generation(
    backend: Backend,
) -> None:
    store = backend.store
    g0 = store.generation
    assert store.replace_doc_chunks("d", [chunk("d", 0, "one")]) == 1
    g1 = store.generation
    assert g1 > g0
    assert store.replace_doc_chunks("d", [chunk("d", 0, "one")]) == 1  # same content: nothing written
    assert store.generation == g1
    assert store.replace_doc_chunks("d", [chunk("d", 0, "two"), chunk("d", 1, "three")]) == 2
    assert store.generation > g1
    assert texts(store) == [("d#0", "two"), ("d#1", "three")]
    history = [(c.version, c.text, c.active) for c in store.iter_chunks(include_inactive=True)]
    assert history == [(1, "one", False), (2, "two", True), (2, "three", True)]
    assert store.current_version("d") == 2 and store.current_version("unknown") is None
    assert store.count_chunks() == 2 and store.count_chunks(include_inactive=True) == 3


def test_retracting_is_a_version_that_hides_the_document_and_retracting_again_is_a_no_op(backend: Backend) -> None:
    store = backend.store
    store.replace_doc_chunks("d", [chunk("d", 0, "one")])
    store.replace_doc_chunks("e", [chunk("e", 0, "other")])
    g = store.generation
    assert store.replace_doc_chunks("d", []) == 2
    assert store.generation > g
    assert texts(store) == [("e#0", "other")]
    assert store.doc_ids() == ["e"] and store.doc_ids(include_retracted=True) == ["d", "e"]
    assert store.current_version("d") == 2
    g = store.generation
    assert store.replace_doc_chunks("d", []) == 2 and store.generation == g
    assert store.replace_doc_chunks("never", []) == 0 and store.generation == g
    assert store.get_chunks(["d#0", "e#0"]).keys() == {"e#0"}


def test_get_chunks_returns_the_active_chunks_by_id_and_refuses_a_single_string(backend: Backend) -> None:
    store = backend.store
    store.replace_doc_chunks("d", [chunk("d", 0, "old"), chunk("d", 1, "kept")])
    store.replace_doc_chunks("d", [chunk("d", 1, "kept")])
    found = store.get_chunks(["d#1", "d#0", "missing"])
    assert {i: (c.text, c.version, c.active) for i, c in found.items()} == {"d#1": ("kept", 2, True)}
    assert found["d#1"].to_document().metadata["doc_version"] == 2
    with pytest.raises(TypeError, match="chunk_ids"):
        store.get_chunks("d#1")


def test_facet_filters_are_evaluated_by_the_store(backend: Backend) -> None:
    backend.write_corpus(CORPUS)
    store = backend.store
    assert [i for i, _ in texts(store, language="ja")] == ["tsuyu#0", "tsuyu#1"]
    assert [i for i, _ in texts(store, language=["zh", "en"])] == ["beijing#0", "falcon#0", "falcon#1"]
    assert texts(store, language=[]) == []
    assert [i for i, _ in texts(store, doc_id="beijing")] == ["beijing#0"]
    with pytest.raises(TypeError, match="language"):
        list(store.iter_chunks(language=3))


def test_parents_are_stored_or_refused_by_name(backend: Backend) -> None:
    store = backend.store
    parent = Document(page_content="the whole passage", metadata={"doc_id": "d", "parent_id": "d#p0"})
    child = chunk("d", 0, "the whole", parent_id="d#p0")
    if PARENTS in store.unsupported:
        with pytest.raises(ValueError, match="does not support parents"):
            store.replace_doc_chunks("d", [child], parents=[parent])
        with pytest.raises(ValueError, match="does not support parents"):
            refuse(store, PARENTS)
        assert store.current_version("d") is None  # nothing was written
        assert store.replace_doc_chunks("d", [child], parents=[]) == 1  # no parents: an ordinary write
        assert store.get_parents(["d#p0"]) == {}
    else:
        refuse(store, PARENTS)  # supported: nothing raised
        assert store.replace_doc_chunks("d", [child], parents=[parent]) == 1
        assert {i: p.text for i, p in store.get_parents(["d#p0", "x"]).items()} == {"d#p0": "the whole passage"}
    with pytest.raises(TypeError, match="parent_ids"):
        store.get_parents("d#p0")


def test_a_restricted_chunk_is_stored_as_history_but_never_served(backend: Backend) -> None:
    backend.write_corpus(CORPUS)
    store = backend.store
    assert store.get_chunks(["falcon#1"])["falcon#1"].sensitivity == "RESTRICTED"
    served = store.served_ids(["falcon#0", "falcon#1", "nowhere"])
    assert served.served == frozenset({"falcon#0"})
    assert "falcon#1" in served.withdrawn and "nowhere" not in served.withdrawn


def test_the_same_arguments_are_refused_alike(backend: Backend) -> None:
    store = backend.store
    with pytest.raises(ValueError, match="doc_id must be a non-empty string"):
        store.replace_doc_chunks("", [])
    with pytest.raises(ValueError, match="writer must be a non-empty string"):
        store.replace_doc_chunks("d", [chunk("d", 0, "x")], writer="")
    with pytest.raises(ValueError, match="expected 'd'"):
        store.replace_doc_chunks("d", [chunk("other", 0, "x")])
    with pytest.raises(ValueError, match="NaN"):
        store.replace_doc_chunks("d", [chunk("d", 0, "x", weight=float("nan"))])
    assert store.current_version("d") is None


# -- search -----------------------------------------------------------------------------------------------------------
def test_lexical_search_ranks_by_bm25_applies_the_filter_and_never_finds_a_restricted_chunk(backend: Backend) -> None:
    backend.write_corpus(CORPUS)
    search = backend.search()
    hits = search.lexical_search("梅雨", 5)
    assert [d.id for d, _ in hits] == ["tsuyu#1", "tsuyu#0"]  # the shorter chunk first (BM25's length norm)
    assert all(s > 0 for _, s in hits) and hits[0][1] >= hits[1][1]
    assert [d.id for d, _ in search.lexical_search("梅雨", 5, {"dept": "a"})] == ["tsuyu#0"]
    assert [d.id for d, _ in search.lexical_search("falcon", 5)] == ["falcon#0"]  # falcon#1 is RESTRICTED
    assert search.lexical_search("梅雨", 5, score_threshold=hits[0][1] + 1) == []
    assert search.lexical_search("   ", 5) == []
    doc = hits[0][0]
    assert doc.page_content == "梅雨前線が停滞する。" and doc.metadata["doc_id"] == "tsuyu"
    with pytest.raises(ValueError):
        search.lexical_search("梅雨", 5, {"dept": {"$bogus": 1}})


def test_vector_search_ranks_by_cosine_applies_the_filter_and_returns_the_stored_vectors(backend: Backend) -> None:
    backend.write_corpus(CORPUS)
    search = backend.search()
    query = np.asarray(EMBEDDING.embed_query("The falcon hunts over the river."), dtype=np.float32)
    hits = search.vector_search(query, 3)
    assert hits[0][0].id == "falcon#0" and hits[0][1] == pytest.approx(1.0, abs=1e-5)
    assert len(hits) == 3 and [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    assert "falcon#1" not in {d.id for d, _ in search.vector_search(query, 10)}  # RESTRICTED: never embedded
    assert {d.id for d, _ in search.vector_search(query, 10, {"language": "ja"})} == {"tsuyu#0", "tsuyu#1"}
    with_vectors = search.vector_search_with_vectors(query, 2)
    assert [d.id for d, _, _ in with_vectors] == [d.id for d, _ in hits[:2]]
    assert with_vectors[0][2].shape == (64,)
    assert float(np.dot(with_vectors[0][2], query / np.linalg.norm(query))) == pytest.approx(1.0, abs=1e-5)
