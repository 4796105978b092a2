"""Writers own their documents in a ``postgresql://`` store too (issue 27 §2 item 3): what only PostgreSQL has.

* The schema-3 migration of a store written before writers were recorded (schema 2; the store the code of
  e191c01 wrote, ``tests/fixtures/pg-store-e191c01``, and stores of today's code with the new columns dropped): it
  opens read-only as it is,
  and its first writable open attributes every existing version — a version with a chunk that has a
  ``source_locator`` (every chunk ingest writes has one) to ingest, any other to the vector store — so the next
  ingest keeps what ``PostgresVectorStore`` added.
* The advice of the PostgreSQL path's warnings is true now that ingest keeps other writers' documents: re-ingesting
  rewrites stale postings of every document and embeds the vector store's chunks with a new model too, so they
  stay searchable by every channel.

The sequence both backends share is in ``test_writer_ownership.py``.  Needs the session's PostgreSQL
(``pg_server`` in ``tests/conftest.py``); skips, saying why, without it.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import psycopg
import pytest

from langchain_ragspine.backends.directory.chunk_store import INGEST_WRITER, VECTORSTORE_WRITER
from langchain_ragspine.backends.postgres.chunk_store import PG_SCHEMA_VERSION, PostgresChunkStore
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.errors import StaleIndexWarning, StoreError
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.sources import open_retriever, search
from langchain_ragspine.retrievers.postgres import PostgresBM25Retriever
from langchain_ragspine.vectorstores import PostgresVectorStore

EMB = HashingEmbeddings(64)
OTHER = HashingEmbeddings(32)
FILES = {
    "tsuyu": "# 梅雨\n\n梅雨は六月から七月にかけて続く雨の季節である。",
    "pekin": "# 北京\n\n北京是中国的首都。",
}
NOTE = "梅雨前線の観測メモ NOTE27 falcon"
VERSION_COLUMNS = "doc_id, version, content_hash, n_chunks, valid_as_of, ingested_at, retracted"
FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "pg-store-e191c01"


def _corpus(root: Path) -> Path:
    corpus = root / "corpus"
    corpus.mkdir()
    for name, text in FILES.items():
        (corpus / f"{name}.md").write_text(text + "\n", "utf-8")
    return corpus


def _rows(url: str, sql: str) -> list[tuple[object, ...]]:
    with psycopg.connect(url) as conn:
        return conn.execute(sql).fetchall()


def _ids(url: str) -> set[str]:
    with PostgresChunkStore(url, read_only=True) as store:
        return set(store.doc_ids())


def _to_schema_2(url: str) -> None:
    """The store as the code before writers were recorded left it: schema 2's ``ragspine_doc_versions`` (no
    ``writer`` / ``owner`` columns) and ``schema_version`` 2."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ALTER TABLE ragspine_doc_versions DROP COLUMN writer, DROP COLUMN owner")
        conn.execute("UPDATE ragspine_meta SET value = '2' WHERE key = 'schema_version'")


def _attribution(url: str) -> dict[tuple[str, int], tuple[str, str]]:
    rows = _rows(url, "SELECT doc_id, version, writer, owner FROM ragspine_doc_versions")
    return {(str(d), int(v)): (str(w), str(o)) for d, v, w, o in rows}


def test_the_store_the_code_before_owners_wrote_is_migrated_and_ingest_keeps_the_vector_stores_documents(
    tmp_path: Path, pg_url: str
) -> None:
    """``tests/fixtures/pg-store-e191c01/store.sql``: the tables and rows the code of e191c01 (schema 2) left after
    an ingest of ``corpus/`` and four vector-store writes (see its ``make_fixture.py``).  Before this change the
    next ingest retracted ``note-1``, the vector store's document."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute((FIXTURE / "store.sql").read_text("utf-8"))
    before = _rows(pg_url, f"SELECT {VERSION_COLUMNS} FROM ragspine_doc_versions ORDER BY doc_id, version")

    with PostgresChunkStore(pg_url, read_only=True) as store:
        assert store.schema_version == 2
        assert store.doc_ids(owner=INGEST_WRITER) == ["loc", "note-1", "pekin", "tsuyu"]
    with PostgresChunkStore(pg_url) as store:
        assert store.schema_version == PG_SCHEMA_VERSION
        assert store.doc_ids(owner=VECTORSTORE_WRITER) == ["note-1"]
        assert store.doc_ids(owner=INGEST_WRITER) == ["loc", "pekin", "tsuyu"]
    assert _rows(pg_url, f"SELECT {VERSION_COLUMNS} FROM ragspine_doc_versions ORDER BY doc_id, version") == before
    assert _attribution(pg_url) == {
        ("pekin", 1): ("ingest", "ingest"),
        ("tsuyu", 1): ("ingest", "ingest"),
        ("tsuyu", 2): ("ingest", "ingest"),  # the vector store's chunk beside ingest's, whose source_locator decides
        ("note-1", 1): ("vectorstore", "vectorstore"),
        ("gone", 1): ("vectorstore", "vectorstore"),
        ("gone", 2): ("vectorstore", "vectorstore"),  # the delete: a retraction, the owner's
        # a vector-store record with a source_locator of its own cannot be told from ingest's: ingest's, as before
        ("loc", 1): ("ingest", "ingest"),
    }

    corpus = shutil.copytree(FIXTURE / "corpus", tmp_path / "corpus")
    assert ingest(corpus, pg_url, embedding=EMB, progress=False).retracted == 1  # loc, as the old code did
    assert _ids(pg_url) == {"note-1", "pekin", "tsuyu"}
    (corpus / "pekin.md").unlink()
    assert ingest(corpus, pg_url, embedding=EMB, progress=False).retracted == 1
    assert _ids(pg_url) == {"note-1", "tsuyu"}
    with warnings.catch_warnings():
        warnings.simplefilter("error", StaleIndexWarning)
        retriever = open_retriever(pg_url, mode="hybrid", embedding=EMB, k=3)
    assert [d.metadata["doc_id"] for d in search(retriever, "NOTE27 falcon", k=1)] == ["note-1"]


def test_a_schema_2_store_attributes_the_vector_stores_old_versions(tmp_path: Path, pg_url: str) -> None:
    corpus = _corpus(tmp_path)
    ingest(corpus, pg_url, embedding=EMB, progress=False)
    vs = PostgresVectorStore(pg_url, EMB)
    vs.add_texts([NOTE], ids=["note-1"])
    vs.add_texts(["消えたメモ"], [{"doc_id": "gone"}], ids=["gone#0"])
    vs.delete(["gone#0"])  # a retraction in the history: the owner's
    vs.add_texts(["追記"], [{"doc_id": "tsuyu"}], ids=["tsuyu#9"])  # the vector store writes an ingested document
    _to_schema_2(pg_url)
    before = _rows(pg_url, f"SELECT {VERSION_COLUMNS} FROM ragspine_doc_versions ORDER BY doc_id, version")

    assert PG_SCHEMA_VERSION == 3
    with PostgresChunkStore(pg_url, read_only=True) as store:  # read-only: opens as it is, migrates nothing
        assert store.schema_version == 2
        assert store.doc_ids(owner=INGEST_WRITER) == store.doc_ids()  # no owners yet: all count as ingest's
        assert store.doc_ids(owner=VECTORSTORE_WRITER) == []
    with PostgresChunkStore(pg_url) as store:
        assert store.schema_version == 3
        assert store.doc_ids(owner=VECTORSTORE_WRITER) == ["note-1"]
    assert _rows(pg_url, f"SELECT {VERSION_COLUMNS} FROM ragspine_doc_versions ORDER BY doc_id, version") == before
    attributed = {(d, v): (w, o) for d, v, w, o in _rows(
        pg_url, "SELECT doc_id, version, writer, owner FROM ragspine_doc_versions")}
    assert attributed == {
        ("tsuyu", 1): ("ingest", "ingest"),
        ("tsuyu", 2): ("ingest", "ingest"),  # its chunks carry ingest's source_locator: attributed to ingest
        ("pekin", 1): ("ingest", "ingest"),
        ("note-1", 1): ("vectorstore", "vectorstore"),
        ("gone", 1): ("vectorstore", "vectorstore"),
        ("gone", 2): ("vectorstore", "vectorstore"),
    }

    summary = ingest(corpus, pg_url, embedding=EMB, progress=False)
    assert summary.retracted == 0 and "note-1" in _ids(pg_url)
    (corpus / "pekin.md").unlink()
    assert ingest(corpus, pg_url, embedding=EMB, progress=False).retracted == 1
    assert _ids(pg_url) == {"tsuyu", "note-1"}


def test_ingest_migrates_a_schema_2_store_before_counting_what_it_would_retract(tmp_path: Path, pg_url: str) -> None:
    """The refusal to empty a store counts ingest's documents of the migrated store, not every document."""
    vs = PostgresVectorStore(pg_url, EMB)
    vs.add_texts([NOTE], ids=["note-1"])
    _to_schema_2(pg_url)
    empty = tmp_path / "empty"
    empty.mkdir()
    summary = ingest(empty, pg_url, embedding=EMB, progress=False)
    assert summary.retracted == 0 and _ids(pg_url) == {"note-1"}


def test_a_version_1_store_migrates_to_owners_too(pg_url: str) -> None:
    """Schema 1 (no BM25 statistics tables, no owners) goes to the current schema in one writable open."""
    vs = PostgresVectorStore(pg_url, EMB)
    vs.add_texts([NOTE], ids=["note-1"])
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("ALTER TABLE ragspine_doc_versions DROP COLUMN writer, DROP COLUMN owner")
        conn.execute("DROP TABLE ragspine_corpus, ragspine_df")
        conn.execute("UPDATE ragspine_meta SET value = '1' WHERE key = 'schema_version'")
    with PostgresChunkStore(pg_url) as store:
        assert store.schema_version == PG_SCHEMA_VERSION
        assert store.doc_ids(owner=VECTORSTORE_WRITER) == ["note-1"]


def test_stale_postings_advice_keeps_the_vector_stores_documents(tmp_path: Path, pg_url: str) -> None:
    corpus = _corpus(tmp_path)
    ingest(corpus, pg_url, embedding=EMB, progress=False)
    PostgresVectorStore(pg_url, EMB).add_texts([NOTE], ids=["note-1"])
    with psycopg.connect(pg_url, autocommit=True) as conn:  # postings written by another tokenizer version
        conn.execute("UPDATE ragspine_meta SET value = 'old' WHERE key = 'tokenizer_version'")
    with pytest.raises(StoreError, match="run `ragspine ingest` again .*kept") as raised:
        PostgresBM25Retriever(url=pg_url)
    assert "vector store" in str(raised.value)
    with pytest.warns(StaleIndexWarning, match="run `ragspine ingest` again .*kept"):
        open_retriever(pg_url, mode="bm25", k=5)

    summary = ingest(corpus, pg_url, embedding=EMB, progress=False)  # the advice
    assert summary.retracted == 0 and summary.index_rebuilt
    with warnings.catch_warnings():
        warnings.simplefilter("error", StaleIndexWarning)
        retriever = open_retriever(pg_url, mode="bm25", k=5)
    assert [d.metadata["doc_id"] for d in search(retriever, "NOTE27", k=1)] == ["note-1"]


def test_ingest_with_another_model_embeds_the_vector_stores_chunks_too(tmp_path: Path, pg_url: str) -> None:
    """Asked for a model the store has no vectors of, the error says to re-ingest with it; following it leaves no
    chunk of another writer without a vector of the new model (the dense channel would never find it)."""
    corpus = _corpus(tmp_path)
    ingest(corpus, pg_url, embedding=EMB, progress=False)
    PostgresVectorStore(pg_url, EMB).add_texts([NOTE], ids=["note-1"])
    with pytest.raises(StoreError, match="re-ingest with the model you want .*kept and embedded too"):
        open_retriever(pg_url, mode="vector", embedding=OTHER, k=5)

    summary = ingest(corpus, pg_url, embedding=OTHER, progress=False)
    assert summary.retracted == 0 and summary.embedded == 3  # the corpus's two chunks and the vector store's one
    with warnings.catch_warnings():
        warnings.simplefilter("error", StaleIndexWarning)
        retriever = open_retriever(pg_url, mode="vector", embedding=OTHER, k=5)
    assert "note-1" in {d.metadata["doc_id"] for d in search(retriever, NOTE, k=5)}
    assert ingest(corpus, pg_url, embedding=OTHER, progress=False).embedded == 0  # nothing left to embed
