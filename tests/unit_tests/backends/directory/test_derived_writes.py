"""A full disk while ingest writes a store's files (issue 25 §6b, §6c): FAISS's ``RuntimeError: Error in
faiss::write_index … (No space left on device)`` escaped as a traceback (exit status 1), SQLite's ``database or disk
is full`` read as a bare ``SQLite error`` (and, while the embedding cache was opened, made ingest move the intact
cache aside as "unreadable").  Every write of a store file — the FAISS index and its id map, ``embeddings.sqlite``,
``index.json``, the BM25 files, and the chunk store itself — now fails as one ``StoreWriteError`` (a
``StoreError``) naming the file and saying that nothing was lost, and the previous version of the file is intact.

A first ingest that fails before its first commit leaves ``chunks.sqlite`` blank — 0 bytes, or a SQLite header
without a table (the schema is created in one transaction, so never in part) — and every later ingest refused that
directory with ``not a chunk store (no meta table or schema_version)``, even with space again (§6c).  A blank file
holds nothing to lose: the next ingest creates the store in it, under the store's writer lock; a search says the
store is not created yet.  A SQLite file with tables that are not a chunk store's is still refused, and kept.

The full disk is injected where the write happens: FAISS's own exception text, SQLite's real ``SQLITE_FULL``
(``PRAGMA max_page_count``), ``ENOSPC`` from the file write, numpy's short write (``"4596 requested and 1520
written"``, no ``errno``).
"""

from __future__ import annotations

import errno
import os
import sqlite3
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import langchain_ragspine.pipeline.ingest as ingest_module
from langchain_ragspine.backends.directory import faiss_index
from langchain_ragspine.backends.directory.chunk_store import ChunkStore
from langchain_ragspine.backends.directory.embedding_cache import EmbeddingCache
from langchain_ragspine.backends.directory.layout import (
    BM25_DIR,
    CHUNKS_DB,
    EMBEDDING_CACHE,
    INDEX_STATE,
    STORE_MARKER,
    VECTOR_DIR,
    prepare_store_dir,
)
from langchain_ragspine.backends.directory.lock import LOCK_FILE, StoreBusyError, writer_lock
from langchain_ragspine.cli import main
from langchain_ragspine.errors import StaleIndexWarning, StoreError
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.sources import open_retriever, search
from tests.harness import write_corpus
from tests.unit_tests.invariants.test_clear_errors import _one_line_error

TEXTS = {
    "tsuyu": "# Tsuyu\n\nThe rainy season is called tsuyu and lasts from June to July.",
    "kyoto": "# Kyoto\n\nKyoto has many temples, Kiyomizu-dera among them.",
    "store": "# Store\n\nThe chunk store keeps every version of every document.",
    "filters": "# Filters\n\nMetadata filters narrow a search before scoring.",
}
NEW = "# Tsuyu\n\nThe plum rain season NEWMARK is called tsuyu and lasts from June to July."


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return write_corpus(tmp_path / "corpus", TEXTS)


def _hybrid(corpus: Path, store: Path, **kwargs: Any) -> ingest_module.IngestSummary:
    return ingest(corpus, store, mode="hybrid", embedding="hashing", progress=False, **kwargs)


def _files(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


def _leftovers(store: Path) -> list[str]:
    """Hidden files or folders a failed write left (temporary names); the writer lock is the store's own."""
    return sorted(p.name for p in store.iterdir() if p.name.startswith(".") and p.name != LOCK_FILE)


def _says_nothing_was_lost(error: BaseException, file: Path, *parts: str) -> str:
    message = str(error)
    assert isinstance(error, StoreError) and isinstance(error, OSError), type(error)
    for part in (str(file), "disk full", "nothing was lost", *parts):
        assert part in message, message
    return message


def _found(store: Path, query: str, mode: str = "bm25") -> list[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StaleIndexWarning)
        retriever = open_retriever(store, mode=mode)
    return [d.page_content for d in search(retriever, query, k=2)]


def _no_warning(store: Path, mode: str) -> None:
    """The store answers in ``mode`` from its saved indexes (no StaleIndexWarning)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", StaleIndexWarning)
        assert "tsuyu" in search(open_retriever(store, mode=mode), "rainy season", k=1)[0].page_content


# -- FAISS ------------------------------------------------------------------------------------------------------------
def _faiss_disk_full(monkeypatch: pytest.MonkeyPatch) -> None:
    """``faiss.write_index`` writes part of the file, then fails as FAISS does when ``fwrite`` hits a full disk."""
    import faiss

    def write_index(index: Any, path: str) -> None:
        Path(path).write_bytes(b"\0" * 4051)
        raise RuntimeError(
            "Error in void faiss::write_index(const Index*, IOWriter*, int) at /project/faiss/impl/index_write.cpp:499: "
            f"Error: 'ret == (size * 4)' failed: write error in {path}: 4051 != 100352 (No space left on device)"
        )

    monkeypatch.setattr(faiss, "write_index", write_index)


def test_faiss_on_a_full_disk_is_a_store_error_naming_the_file(corpus, tmp_path, monkeypatch, capsys):
    store = tmp_path / "s"
    _faiss_disk_full(monkeypatch)
    with pytest.raises(StoreError) as caught:
        _hybrid(corpus, store)
    _says_nothing_was_lost(caught.value, store / VECTOR_DIR / "index.faiss", "committed this run",
                           "rebuilds the vector index in memory", "run `ragspine ingest` again when there is space")
    assert not (store / VECTOR_DIR).exists() and _leftovers(store) == []
    with pytest.warns(StaleIndexWarning, match="vector index"):  # rebuilt from the cached vectors
        assert "tsuyu" in search(open_retriever(store, mode="hybrid"), "rainy season", k=1)[0].page_content
    assert main(["ingest", str(corpus), "--store", str(tmp_path / "s2"), "--mode", "hybrid", "--embedding",
                 "hashing"]) == 2
    _one_line_error(capsys, str(tmp_path / "s2" / VECTOR_DIR / "index.faiss"), "disk full", "nothing was lost")
    monkeypatch.undo()
    _hybrid(corpus, store)  # with space again the index is saved
    _no_warning(store, "hybrid")


def test_faiss_on_a_full_disk_keeps_the_previous_vector_index(corpus, tmp_path, monkeypatch):
    store = tmp_path / "s"
    _hybrid(corpus, store)
    before = _files(store / VECTOR_DIR)
    (corpus / "tsuyu.md").write_text(NEW, "utf-8")
    _faiss_disk_full(monkeypatch)
    with pytest.raises(StoreError) as caught:
        _hybrid(corpus, store)
    _says_nothing_was_lost(caught.value, store / VECTOR_DIR / "index.faiss")
    assert _files(store / VECTOR_DIR) == before and _leftovers(store) == []
    assert any("NEWMARK" in text for text in _found(store, "NEWMARK plum", mode="hybrid"))  # the committed version


def test_the_faiss_id_map_on_a_full_disk_is_a_store_error_naming_it(corpus, tmp_path, monkeypatch):
    """``ids.sqlite`` beside the FAISS index fills the disk: a real ``SQLITE_FULL``."""
    real = sqlite3.connect

    class FullSqlite:
        Error = sqlite3.Error

        @staticmethod
        def connect(*args: Any, **kwargs: Any) -> sqlite3.Connection:
            conn = real(*args, **kwargs)
            conn.execute("PRAGMA max_page_count = 1")
            return conn

    monkeypatch.setattr(faiss_index, "sqlite3", FullSqlite)
    store = tmp_path / "s"
    with pytest.raises(StoreError) as caught:
        _hybrid(corpus, store)
    _says_nothing_was_lost(caught.value, store / VECTOR_DIR / "ids.sqlite")
    assert not (store / VECTOR_DIR).exists() and _leftovers(store) == []


# -- the embedding cache --------------------------------------------------------------------------------------------
def _sqlite_full(conn: sqlite3.Connection) -> None:
    """Let the file of ``conn`` grow no more: its next write that needs a page is a real ``SQLITE_FULL``."""
    conn.execute(f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0]}")


def _cache_full_on_call(monkeypatch: pytest.MonkeyPatch, call: int) -> None:
    """The ``call``-th write of vectors into the embedding cache finds the disk full."""
    real = EmbeddingCache.put_many
    calls = [0]

    def put_many(self: EmbeddingCache, *args: Any, **kwargs: Any) -> None:
        calls[0] += 1
        if calls[0] == call:
            _sqlite_full(self._connection())
        real(self, *args, **kwargs)

    monkeypatch.setattr(EmbeddingCache, "put_many", put_many)


def _cache_rows(store: Path) -> int:
    with EmbeddingCache(store / EMBEDDING_CACHE, read_only=True) as cache:
        return cache.count()


def test_the_embedding_cache_on_a_full_disk_before_the_commit_changes_nothing(corpus, tmp_path, monkeypatch):
    store = tmp_path / "s"
    _hybrid(corpus, store)
    rows, generation = _cache_rows(store), ChunkStore(store / CHUNKS_DB, read_only=True).generation
    (corpus / "tsuyu.md").write_text(NEW, "utf-8")
    _cache_full_on_call(monkeypatch, 1)  # the model check embeds its first batch before the chunk store changes
    with pytest.raises(StoreError) as caught:
        _hybrid(corpus, store)
    _says_nothing_was_lost(caught.value, store / EMBEDDING_CACHE)
    monkeypatch.undo()
    assert ChunkStore(store / CHUNKS_DB, read_only=True).generation == generation
    assert _cache_rows(store) == rows and not list(store.glob(f"{EMBEDDING_CACHE}.corrupt-*"))
    _no_warning(store, "hybrid")  # the store and its indexes are exactly as before
    assert not any("NEWMARK" in text for text in _found(store, "NEWMARK plum"))


def test_an_embedding_cache_that_cannot_open_on_a_full_disk_is_kept(corpus, tmp_path, monkeypatch):
    """Regression: opening the cache writes (its WAL files); a full disk there made ingest call the cache
    unreadable and move it aside, so every vector had to be embedded again."""
    store = tmp_path / "s"
    _hybrid(corpus, store)
    rows = _cache_rows(store)
    real = EmbeddingCache._ensure_schema

    def ensure_schema(self: EmbeddingCache) -> None:
        real(self)
        if not self.read_only:
            with self._sql_errors():
                conn = self._connection()
                _sqlite_full(conn)
                conn.execute("CREATE TABLE IF NOT EXISTS filler (x BLOB)")
                conn.execute("INSERT INTO filler VALUES (zeroblob(100000))")

    monkeypatch.setattr(EmbeddingCache, "_ensure_schema", ensure_schema)
    (corpus / "tsuyu.md").write_text(NEW, "utf-8")
    with pytest.raises(StoreError) as caught:
        _hybrid(corpus, store)
    _says_nothing_was_lost(caught.value, store / EMBEDDING_CACHE)
    monkeypatch.undo()
    assert not list(store.glob(f"{EMBEDDING_CACHE}.corrupt-*")) and _cache_rows(store) == rows
    assert _hybrid(corpus, store).embedded == 1  # only the changed chunk: the cache was kept


def test_the_embedding_cache_on_a_full_disk_after_the_commit_says_what_is_searchable(corpus, tmp_path, monkeypatch):
    store = tmp_path / "s"
    monkeypatch.setattr(ingest_module, "PROBE_CHUNKS", 1)  # the model check embeds one chunk, the rest after the commit
    _cache_full_on_call(monkeypatch, 2)
    with pytest.raises(StoreError) as caught:
        _hybrid(corpus, store)
    _says_nothing_was_lost(caught.value, store / EMBEDDING_CACHE, "committed this run",
                           "the vectors embedded so far are kept", "mode auto searches with BM25 only")
    monkeypatch.undo()
    with pytest.warns(StaleIndexWarning, match="BM25 only"):
        assert "tsuyu" in search(open_retriever(store), "rainy season", k=1)[0].page_content
    assert _hybrid(corpus, store).embedded == len(TEXTS) - 1  # the rest; the first is kept
    _no_warning(store, "hybrid")


# -- index.json and the BM25 files -----------------------------------------------------------------------------------
def test_index_json_on_a_full_disk_keeps_the_previous_record(corpus, tmp_path, monkeypatch):
    store = tmp_path / "s"
    ingest(corpus, store, mode="bm25", progress=False)
    before = (store / INDEX_STATE).read_bytes()
    real = Path.write_text

    def write_text(self: Path, data: str, *args: Any, **kwargs: Any) -> int:
        if self.name.startswith(f".{INDEX_STATE}.tmp-"):
            real(self, data[:10], *args, **kwargs)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))
        return real(self, data, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write_text)
    (corpus / "tsuyu.md").write_text(NEW, "utf-8")
    with pytest.raises(StoreError) as caught:
        ingest(corpus, store, mode="bm25", progress=False)
    _says_nothing_was_lost(caught.value, store / INDEX_STATE, "committed this run", "rebuilds the BM25 index")
    monkeypatch.undo()
    assert (store / INDEX_STATE).read_bytes() == before and _leftovers(store) == []
    with pytest.warns(StaleIndexWarning, match="older than the chunk store"):
        hits = search(open_retriever(store, mode="bm25"), "NEWMARK plum", k=1)
    assert "NEWMARK" in hits[0].page_content


def test_a_short_write_of_the_bm25_arrays_reads_as_disk_full(corpus, tmp_path, monkeypatch):
    """numpy reports a short write as ``OSError("4596 requested and 1520 written")``, with no ``errno``."""
    import bm25s

    def save(self: Any, path: Any, **kwargs: Any) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)
        (Path(path) / "data.csc.index.npy").write_bytes(b"\0" * 1520)
        raise OSError("4596 requested and 1520 written")

    store = tmp_path / "s"
    ingest(corpus, store, mode="bm25", progress=False)
    before = _files(store / BM25_DIR)
    monkeypatch.setattr(bm25s.BM25, "save", save)
    (corpus / "tsuyu.md").write_text(NEW, "utf-8")
    with pytest.raises(StoreError) as caught:
        ingest(corpus, store, mode="bm25", progress=False)
    _says_nothing_was_lost(caught.value, store / BM25_DIR, "when there is space")
    assert _files(store / BM25_DIR) == before and _leftovers(store) == []


# -- the chunk store --------------------------------------------------------------------------------------------------
def test_the_chunk_store_on_a_full_disk_keeps_every_committed_version(corpus, tmp_path, monkeypatch, capsys):
    store = tmp_path / "s"
    ingest(corpus, store, mode="bm25", progress=False)
    generation = ChunkStore(store / CHUNKS_DB, read_only=True).generation
    real: Callable[..., Any] = ChunkStore.write_batch

    def write_batch(self: ChunkStore) -> Any:
        _sqlite_full(self._connection())
        return real(self)

    monkeypatch.setattr(ChunkStore, "write_batch", write_batch)
    (corpus / "tsuyu.md").write_text(NEW + "\n\n" + "More text about the plum rain. " * 200, "utf-8")
    with pytest.raises(StoreError) as caught:
        ingest(corpus, store, mode="bm25", progress=False)
    _says_nothing_was_lost(caught.value, store / CHUNKS_DB, "committed before it is intact")
    assert main(["ingest", str(corpus), "--store", str(store), "--mode", "bm25"]) == 2
    _one_line_error(capsys, str(store / CHUNKS_DB), "disk full", "nothing was lost")
    monkeypatch.undo()
    assert ChunkStore(store / CHUNKS_DB, read_only=True).generation == generation
    _no_warning(store, "bm25")
    assert not any("NEWMARK" in text for text in _found(store, "NEWMARK plum"))


def test_a_saved_hybrid_retriever_on_a_full_disk_names_the_channel_file(tmp_path, monkeypatch):
    """A channel saved inside the hybrid save's temporary directory is named as it is called once saved."""
    from langchain_core.documents import Document

    from langchain_ragspine.embeddings.factory import make_embeddings
    from langchain_ragspine.retrievers import HybridRetriever

    docs = [Document(page_content=text, metadata={"chunk_id": name}, id=name) for name, text in TEXTS.items()]
    hybrid = HybridRetriever.from_documents(docs, make_embeddings("hashing"))
    hybrid.save(tmp_path / "h")
    before = _files(tmp_path / "h")
    _faiss_disk_full(monkeypatch)
    with pytest.raises(StoreError) as caught:
        hybrid.save(tmp_path / "h")
    message = _says_nothing_was_lost(caught.value, tmp_path / "h" / "channel-1" / "index.faiss",
                                     f"the previous save in {tmp_path / 'h'} is intact")
    assert ".tmp-" not in message
    assert _files(tmp_path / "h") == before and sorted(p.name for p in tmp_path.iterdir()) == ["h"]


# -- a first ingest that fails before its first commit (issue 25 §6c) ----------------------------------------------
def _first_commit_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    """The transaction that creates the schema finds the disk full (a real ``SQLITE_FULL``): what a first ingest
    into a full disk meets."""
    real = ChunkStore._create_schema

    def create_schema(self: ChunkStore, cur: sqlite3.Cursor) -> None:
        cur.execute("PRAGMA max_page_count = 1")
        real(self, cur)

    monkeypatch.setattr(ChunkStore, "_create_schema", create_schema)


def _blank_store(tmp_path: Path, kind: str) -> Path:
    """A store directory as a failed first ingest leaves it: the marker and a blank ``chunks.sqlite``."""
    store = tmp_path / "s"
    prepare_store_dir(store)
    db = store / CHUNKS_DB
    if kind == "empty":
        db.write_bytes(b"")
    else:  # a SQLite header page without a table: a WAL database whose first transaction never committed
        conn = sqlite3.connect(db)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.close()
        assert db.stat().st_size > 0
    return store


def test_an_ingest_after_a_first_commit_that_failed_creates_the_store(corpus, tmp_path, monkeypatch, capsys):
    store = tmp_path / "s"
    _first_commit_fails(monkeypatch)
    with pytest.raises(StoreError, match="disk full"):
        ingest(corpus, store, mode="bm25", progress=False)
    monkeypatch.undo()
    assert (store / CHUNKS_DB).is_file() and ChunkStore.is_blank(store / CHUNKS_DB)
    with pytest.raises(StoreError, match="no chunk store here yet: chunks.sqlite is empty.*run `ragspine ingest"):
        open_retriever(store)
    assert main(["ingest", str(corpus), "--store", str(store), "--mode", "bm25"]) == 0  # the reported retry
    assert "not a chunk store" not in capsys.readouterr().err
    _no_warning(store, "bm25")


@pytest.mark.parametrize("kind", ["empty", "header_only"])
def test_a_blank_chunk_store_is_created_by_the_next_ingest(corpus, tmp_path, kind):
    store = _blank_store(tmp_path, kind)
    assert ChunkStore.is_blank(store / CHUNKS_DB)
    summary = ingest(corpus, store, mode="bm25", progress=False)
    assert summary.new == len(TEXTS) and summary.store_documents == len(TEXTS)
    assert not ChunkStore.is_blank(store / CHUNKS_DB)
    _no_warning(store, "bm25")


def test_a_foreign_sqlite_file_is_still_refused_and_kept(corpus, tmp_path):
    store = tmp_path / "s"
    prepare_store_dir(store)
    conn = sqlite3.connect(store / CHUNKS_DB)
    conn.execute("CREATE TABLE notes (body TEXT)")
    conn.execute("INSERT INTO notes VALUES ('keep me')")
    conn.commit()
    conn.close()
    before = (store / CHUNKS_DB).read_bytes()
    assert not ChunkStore.is_blank(store / CHUNKS_DB)
    for run in (lambda: ingest(corpus, store, mode="bm25", progress=False), lambda: open_retriever(store)):
        with pytest.raises(StoreError, match="not a chunk store"):
            run()
    assert (store / CHUNKS_DB).read_bytes() == before


def test_a_damaged_file_is_not_blank(tmp_path):
    (tmp_path / "garbage.sqlite").write_bytes(b"not a database at all" * 300)
    assert not ChunkStore.is_blank(tmp_path / "garbage.sqlite")
    assert not ChunkStore.is_blank(tmp_path / "missing.sqlite")


def test_a_blank_store_is_created_only_under_the_writer_lock(corpus, tmp_path):
    """While another writer holds the store's lock (an ingest creating it), a second ingest does not touch the blank
    file; it waits, or with ``lock_timeout`` refuses, and creates it when the lock is free."""
    store = _blank_store(tmp_path, "empty")
    held, release = threading.Event(), threading.Event()

    def other_writer() -> None:
        with writer_lock(store):
            held.set()
            release.wait(30)

    thread = threading.Thread(target=other_writer)
    thread.start()
    try:
        assert held.wait(30)
        with pytest.raises(StoreBusyError):
            ingest(corpus, store, mode="bm25", progress=False, lock_timeout=0)
        assert (store / CHUNKS_DB).read_bytes() == b""
        results: list[Any] = []
        waiting = threading.Thread(target=lambda: results.append(ingest(corpus, store, mode="bm25", progress=False)))
        waiting.start()
        release.set()
        waiting.join(60)
    finally:
        release.set()
        thread.join(30)
    assert results and results[0].new == len(TEXTS)
    assert (store / STORE_MARKER).is_file()
    _no_warning(store, "bm25")
