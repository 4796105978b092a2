"""Issue 27 §2: ``ragspine ingest`` and a vector store writing one store each own their documents — a store directory
(``RagSpineVectorStore``) and a ``postgresql://`` store (``PostgresVectorStore``) alike.

Before: after a vector-store write every ``open_retriever`` warned "run ``ragspine ingest`` again", and following
that advice retracted every document the vector store had added (ingest retracted whatever its corpus lacked).  Now
every document version records its writer and the document its owner (``chunk_store.py``: the directory store's
schema 4, the PostgreSQL store's schema 3): ingest retracts only the documents it owns that left the corpus, the
vector store's ``delete`` only the ids it is given, and the warnings say what is stale — the saved index lags the
chunk store, by whose writes — with advice that loses nothing.

The tests that hold for both backends run on both (``backend``: ``directory`` / ``postgres``; the latter needs the
session's PostgreSQL, ``pg_server`` in ``tests/conftest.py``, and skips without it).
"""

from __future__ import annotations

import sqlite3
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document

from langchain_ragspine.backends.directory.chunk_store import INGEST_WRITER, VECTORSTORE_WRITER, ChunkStore
from langchain_ragspine.backends.directory.layout import CHUNKS_DB
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.errors import StaleIndexWarning
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.sources import open_retriever, search
from langchain_ragspine.vectorstores import PostgresVectorStore, RagSpineVectorStore

EMB = HashingEmbeddings(64)
FILES = {
    "tsuyu": "# 梅雨\n\n梅雨は六月から七月にかけて続く雨の季節である。",
    "pekin": "# 北京\n\n北京是中国的首都。",
    "store": "# Store\n\nThe chunk store keeps every version of a document.",
}
NOTE = "梅雨前線の観測メモ NOTE27 falcon"
LATEST = (
    "SELECT doc_id, owner FROM {t} d WHERE version = (SELECT MAX(version) FROM {t} WHERE doc_id = d.doc_id)"
)


def _corpus(root: Path) -> Path:
    corpus = root / "corpus"
    corpus.mkdir()
    for name, text in FILES.items():
        (corpus / f"{name}.md").write_text(text + "\n", "utf-8")
    return corpus


@dataclass
class Backend:
    """One store of either backend: where it is, its vector store, and what its version table records."""

    name: str
    store: Any  # a store directory (Path) or a postgresql:// URL (str)

    @property
    def postgres(self) -> bool:
        return self.name == "postgres"

    def vector_store(self, embedding: Any = EMB) -> Any:
        if self.postgres:
            return PostgresVectorStore(self.store, embedding)
        return RagSpineVectorStore(self.store, embedding)

    def ids(self) -> set[str]:
        if self.postgres:
            from langchain_ragspine.backends.postgres.chunk_store import PostgresChunkStore

            with PostgresChunkStore(self.store, read_only=True) as chunks:
                return set(chunks.doc_ids())
        with ChunkStore(self.store / CHUNKS_DB, read_only=True) as chunks:
            return set(chunks.doc_ids())

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        """``sql`` on the store's database (``{t}``: its version table)."""
        if self.postgres:
            import psycopg

            with psycopg.connect(self.store) as conn:
                return conn.execute(sql.format(t="ragspine_doc_versions")).fetchall()
        con = sqlite3.connect(self.store / CHUNKS_DB)
        try:
            return con.execute(sql.format(t="doc_versions")).fetchall()
        finally:
            con.close()

    def owners(self) -> dict[str, str]:
        return {d: o for d, o in self.query(LATEST)}

    def writers(self) -> dict[tuple[str, int], str]:
        return {(d, int(v)): w for d, v, w in self.query("SELECT doc_id, version, writer FROM {t}")}


@pytest.fixture(params=["directory", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "postgres":
        yield Backend("postgres", request.getfixturevalue("pg_url"))
    else:
        yield Backend("directory", tmp_path / "store")


def _close(vs: Any) -> None:
    if isinstance(vs, RagSpineVectorStore):
        vs.close()


def _open(store: Any, **kw: Any) -> tuple[object, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        retriever = open_retriever(store, mode="hybrid", embedding=EMB, k=10, **kw)
    return retriever, [str(w.message) for w in caught if issubclass(w.category, StaleIndexWarning)]


def test_regression_ingest_and_the_vector_store_keep_each_others_documents(tmp_path: Path, backend: Backend) -> None:
    store = backend.store
    corpus = _corpus(tmp_path)
    ingest(corpus, store, embedding=EMB, progress=False)
    vs = backend.vector_store()
    vs.add_texts([NOTE, "北京の天気メモ"], [{"kind": "note"}, {"kind": "note"}], ids=["note-1", "note-2"])

    retriever, stale = _open(store)  # sees both, and says only what is true
    found = {d.metadata["doc_id"] for d in search(retriever, "梅雨 NOTE27 北京", k=10)}
    assert {"tsuyu", "note-1"} <= found
    if not backend.postgres:  # a PostgreSQL store's search tables are written with its chunks: never stale
        assert stale, "the saved indexes do lag the chunk store: a warning says so"
    for message in stale:
        assert "run `ragspine ingest` again" not in message or "kept" in message, message
        assert "vector store" in message and "interrupted" not in message, message

    summary = ingest(corpus, store, embedding=EMB, progress=False)  # the advice: loses nothing
    assert summary.retracted == 0 and {"note-1", "note-2"} <= backend.ids()
    assert any("written by other writers" in n for n in summary.notes), summary.notes
    with warnings.catch_warnings():
        warnings.simplefilter("error", StaleIndexWarning)  # the advice fixed what was stale
        retriever = open_retriever(store, mode="hybrid", embedding=EMB, k=10)
    assert "note-1" in {d.metadata["doc_id"] for d in search(retriever, "NOTE27", k=3)}

    (corpus / "pekin.md").unlink()
    summary = ingest(corpus, store, embedding=EMB, progress=False)
    assert summary.retracted == 1
    assert backend.ids() == {"tsuyu", "store", "note-1", "note-2"}

    vs.delete(["note-2"])  # the vector store deletes what it is asked, nothing of ingest's
    assert backend.ids() == {"tsuyu", "store", "note-1"}
    assert [d.id for d in vs.similarity_search("NOTE27", k=1)] == ["note-1"]
    _close(vs)


def test_ingest_of_an_empty_corpus_into_a_store_of_vector_store_documents_needs_no_allow_empty(
    tmp_path: Path, backend: Backend
) -> None:
    """The refusal to empty a store counts the documents ingest would retract: its own, not the vector store's."""
    vs = backend.vector_store()
    vs.add_texts([NOTE], ids=["note-1"])
    empty = tmp_path / "empty"
    empty.mkdir()
    summary = ingest(empty, backend.store, embedding=EMB, progress=False)
    assert summary.retracted == 0 and backend.ids() == {"note-1"}
    _close(vs)


def test_ownership_follows_the_writer_that_created_the_document_and_ingest_takes_over(
    tmp_path: Path, backend: Backend
) -> None:
    corpus = _corpus(tmp_path)
    ingest(corpus, backend.store, embedding=EMB, progress=False)
    vs = backend.vector_store()
    # a chunk added to an ingested document: the document stays ingest's (its file's)
    vs.add_documents([Document(page_content="追記：梅雨明けは七月。", metadata={"doc_id": "tsuyu"}, id="tsuyu#9")])
    # a document the vector store created, then written by an ingest from a file of the same doc_id: ingest's now
    vs.add_texts(["旧メモ"], [{"doc_id": "memo"}], ids=["memo#0"])
    assert backend.owners()["memo"] == VECTORSTORE_WRITER
    (corpus / "memo.md").write_text("# Memo\n\nメモの本文。\n", "utf-8")
    ingest(corpus, backend.store, embedding=EMB, progress=False)
    owners, writers = backend.owners(), backend.writers()
    assert owners["tsuyu"] == owners["memo"] == INGEST_WRITER
    assert writers[("tsuyu", 2)] == VECTORSTORE_WRITER and writers[("memo", 1)] == VECTORSTORE_WRITER
    assert writers[("tsuyu", 3)] == writers[("memo", 2)] == INGEST_WRITER
    (corpus / "tsuyu.md").unlink()
    (corpus / "memo.md").unlink()
    summary = ingest(corpus, backend.store, embedding=EMB, progress=False)
    assert summary.retracted == 2 and backend.ids() == {"pekin", "store"}
    _close(vs)


def test_a_vector_store_retraction_keeps_the_owner_and_a_rewrite_is_the_new_creators(backend: Backend) -> None:
    """A retraction keeps the owner the document had (whoever retracts it); the first version after it makes the
    document its writer's — as the directory store's ``_owner_of_next``."""
    vs = backend.vector_store()
    vs.add_texts(["一"], [{"doc_id": "x"}], ids=["x#0"])
    vs.delete(["x#0"])
    assert backend.writers()[("x", 2)] == VECTORSTORE_WRITER and backend.owners()["x"] == VECTORSTORE_WRITER
    _close(vs)


def test_a_schema_3_store_attributes_the_vector_stores_old_versions(tmp_path: Path) -> None:
    """A store written before writers were recorded: the migration gives the vector store the versions whose chunks
    carry its record marker, so the next ingest keeps them."""
    store = tmp_path / "store"
    corpus = _corpus(tmp_path)
    ingest(corpus, store, embedding=EMB, progress=False)
    vs = RagSpineVectorStore(store, EMB)
    vs.add_texts([NOTE], ids=["note-1"])
    vs.close()
    con = sqlite3.connect(store / CHUNKS_DB)
    con.execute("UPDATE doc_versions SET writer = NULL, owner = NULL, generation = NULL")
    con.execute("UPDATE meta SET value = '3' WHERE key = 'schema_version'")
    con.commit()
    con.close()
    summary = ingest(corpus, store, embedding=EMB, progress=False)
    assert summary.retracted == 0 and "note-1" in Backend("directory", store).ids()


@pytest.mark.parametrize("writer", ["", None])
def test_a_writer_name_must_be_a_non_empty_string(backend: Backend, writer: object) -> None:
    doc = Document(page_content="x", metadata={"doc_id": "d", "chunk_id": "d#0"})
    if backend.postgres:
        from langchain_ragspine.backends.postgres.chunk_store import PostgresChunkStore

        with PostgresChunkStore(backend.store) as pg, pytest.raises(ValueError, match="writer must be"):
            pg.replace_doc_chunks("d", [doc], writer=writer)  # type: ignore[arg-type]
        return
    backend.store.mkdir()
    with ChunkStore(backend.store / "c.sqlite") as chunks, pytest.raises(ValueError, match="writer must be"):
        chunks.replace_doc_chunks("d", [doc], writer=writer)  # type: ignore[arg-type]


def test_a_store_only_the_vector_store_wrote_gets_advice_it_can_follow(tmp_path: Path) -> None:
    # issue 27 trial F2: every search said "saved BM25 index not used (... records no generation) ... run `ragspine
    # ingest` of the store's corpus again" for a store that has neither a saved index nor a corpus
    store = tmp_path / "store"
    vs = RagSpineVectorStore(store, HashingEmbeddings(64))
    vs.add_texts(["パスワード再設定は情シスへ。", "経費精算は月末まで。"], ids=["n1", "n2"])
    vs.close()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert [d.id for d in open_retriever(store).invoke("パスワード再設定")][:1] == ["n1"]
    [message] = [str(w.message) for w in caught if issubclass(w.category, StaleIndexWarning)]
    assert "no saved BM25 index (no `ragspine ingest` has indexed this store" in message
    assert "by the vector store (RagSpineVectorStore): 2 documents" in message
    assert "saved BM25 index not used" not in message and "corpus" not in message
    assert f"ragspine ingest FOLDER --store {store} --keep-missing" in message
    # the advice, followed with an empty folder: the index is saved, nothing retracted, no warning any more
    (tmp_path / "empty").mkdir()
    summary = ingest(tmp_path / "empty", store, mode="bm25", progress=False, retract_missing=False)
    assert summary.retracted == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", StaleIndexWarning)
        assert sorted(d.id for d in open_retriever(store).invoke("パスワード再設定 経費精算")) == ["n1", "n2"]
