"""A first ingest that fails before its first commit (issue 25 §6c: a full disk) leaves ``chunks.sqlite`` empty — 0
bytes, or a SQLite header without a table (the schema is created in one transaction, so never in part).  Every
later ingest refused that directory with ``not a chunk store (no meta table or schema_version)``, even with space
again.  Such a blank file holds nothing to lose: the next ingest creates the store in it, under the store's writer
lock; a search says the store is not created yet.  A SQLite file with tables that are not a chunk store's is still
refused, and left as it was."""

from __future__ import annotations

import sqlite3
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest

from langchain_ragspine.cli import main
from langchain_ragspine.errors import StaleIndexWarning, StoreError
from langchain_ragspine.indexing import (
    CHUNKS_DB,
    STORE_MARKER,
    ingest,
    open_retriever,
    prepare_store_dir,
    search,
)
from langchain_ragspine.stores import ChunkStore
from langchain_ragspine.stores.lock import StoreBusyError, writer_lock

TEXTS = {
    "tsuyu": "# Tsuyu\n\nThe rainy season is called tsuyu and lasts from June to July.",
    "kyoto": "# Kyoto\n\nKyoto has many temples, Kiyomizu-dera among them.",
}


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    root.mkdir()
    for name, text in TEXTS.items():
        (root / f"{name}.md").write_text(text + "\n", "utf-8")
    return root


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


def _searchable(store: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", StaleIndexWarning)
        assert "tsuyu" in search(open_retriever(store), "rainy season", k=1)[0].page_content


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
    _searchable(store)


@pytest.mark.parametrize("kind", ["empty", "header_only"])
def test_a_blank_chunk_store_is_created_by_the_next_ingest(corpus, tmp_path, kind):
    store = _blank_store(tmp_path, kind)
    assert ChunkStore.is_blank(store / CHUNKS_DB)
    summary = ingest(corpus, store, mode="bm25", progress=False)
    assert summary.new == len(TEXTS) and summary.store_documents == len(TEXTS)
    assert not ChunkStore.is_blank(store / CHUNKS_DB)
    _searchable(store)


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
    _searchable(store)
