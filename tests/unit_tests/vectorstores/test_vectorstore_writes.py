"""Issue 25, section 6: a vector-store write call is one version, all or nothing, on both stores
(``RagSpineVectorStore`` over a store directory, ``PostgresVectorStore``): a disk-full error part way through
``add_documents`` / ``delete`` leaves the store exactly as before (rows, generation, what search returns) and says
so; an id given twice in one call, or a NaN metadata value, is a ``ValueError`` naming the id, the field and the
position, before anything is written (infinities are kept: they compare as numbers).  (The corpus loader already refuses NaN in JSONL / front matter:
``test_document_loaders.py``.)  A failed write leaves the same ``RagSpineVectorStore`` readable: a search never
fails because the embedding cache (or the writer lock) cannot be written on a full disk."""

from __future__ import annotations

import contextlib
import errno
import inspect
import re
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore

from langchain_ragspine.backends.directory import backend as directory_backend
from langchain_ragspine.backends.directory.chunk_store import ChunkStore
from langchain_ragspine.backends.directory.embedding_cache import EmbeddingCache
from langchain_ragspine.backends.postgres.chunk_store import PostgresChunkStore
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.errors import StoreError
from langchain_ragspine.vectorstores import PostgresVectorStore, RagSpineVectorStore
from langchain_ragspine.vectorstores.store import CacheNotWrittenWarning

EMB = HashingEmbeddings(64)


def _two_chunk_docs(*doc_ids: str, size: int = 1) -> list[Document]:
    """Two chunks per document (``{doc}-0``, ``{doc}-1``); ``size`` repeats each text (for a store that fills)."""
    return [
        Document(page_content=f"{doc} chunk {i} about the rainy season " * size, metadata={"doc_id": doc},
                 id=f"{doc}-{i}")
        for doc in doc_ids for i in range(2)
    ]


def _state(store: VectorStore) -> tuple[int, list[tuple[str | None, str]], list[str | None]]:
    """The store's generation, its records and what a search returns."""
    if isinstance(store, PostgresVectorStore):  # (a RagSpineVectorStore over the PostgreSQL backend)
        with PostgresChunkStore(store.url, read_only=True) as s:
            generation = s.generation
            records = sorted((c.chunk_id, c.text) for c in s.iter_chunks())
    else:
        assert isinstance(store, RagSpineVectorStore)
        generation = store.backend.generation
        records = sorted((d.id, d.page_content) for d in store.backend.records())
    found = [d.id for d in store.similarity_search("rainy season", k=10)]
    return generation, records, found


@pytest.fixture(params=["directory", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[VectorStore]:
    if request.param == "directory":
        vs = RagSpineVectorStore(tmp_path / "store", EMB)
        yield vs
        vs.close()
    else:
        yield PostgresVectorStore(request.getfixturevalue("pg_url"), EMB)


def _fail_second(monkeypatch: pytest.MonkeyPatch, cls: type, name: str, fail: Callable[..., None]) -> None:
    """Make the second call of ``cls.name`` (one per document version written) fail with ``fail(*args)``."""
    original = getattr(cls, name)
    static = isinstance(inspect.getattr_static(cls, name), staticmethod)
    calls = [0]

    def patched(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] == 2:
            fail(*args)
        return original(*args, **kwargs)

    monkeypatch.setattr(cls, name, staticmethod(patched) if static else patched)


def _disk_full(*_: object) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


def _server_error(_store: object, cur: Any, *_: object) -> None:
    cur.execute("SELECT 1 / 0")  # a real error inside the server's transaction, as a full disk would raise


def _inject_failure(store: VectorStore, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second document version of the next write fails inside its transaction."""
    if isinstance(store, PostgresVectorStore):  # (a RagSpineVectorStore over the PostgreSQL backend)
        _fail_second(monkeypatch, PostgresChunkStore, "_insert_searchable", _server_error)
    else:
        _fail_second(monkeypatch, ChunkStore, "_insert_rows", _disk_full)


# ------------------------------------------------------------------------------------------------ all or nothing


def test_a_failure_part_way_through_add_documents_writes_nothing(store: VectorStore, monkeypatch) -> None:
    """Regression: each document group was its own transaction, so the groups before the failure stayed written."""
    store.add_documents(_two_chunk_docs("old"))
    before = _state(store)
    _inject_failure(store, monkeypatch)
    with pytest.raises(StoreError, match="add_documents wrote nothing, the store is as it was before the call"):
        store.add_documents(_two_chunk_docs("new1", "new2", "new3"))
    monkeypatch.undo()
    assert _state(store) == before
    assert store.get_by_ids(["new1-0", "new1-1", "new2-0"]) == []


def test_a_failure_part_way_through_delete_removes_nothing(store: VectorStore, monkeypatch) -> None:
    store.add_documents(_two_chunk_docs("a", "b", "c"))
    before = _state(store)
    _inject_failure(store, monkeypatch)
    with pytest.raises(StoreError, match="delete wrote nothing"):
        store.delete(["a-0", "b-0", "c-0"])
    monkeypatch.undo()
    assert _state(store) == before
    assert store.delete(["a-0", "b-0", "c-0"])  # and it works once the cause is gone
    assert sorted(str(d.id) for d in store.get_by_ids(["a-0", "a-1", "b-1", "c-0"])) == ["a-1", "b-1"]


def test_sqlite_full_part_way_leaves_the_directory_store_as_it_was(tmp_path: Path) -> None:
    """A real ``SQLITE_FULL`` (the file may not grow: ``PRAGMA max_page_count``) after the first document's pages."""
    vs = RagSpineVectorStore(tmp_path / "store", EMB)
    vs.add_documents(_two_chunk_docs("old"))
    before = _state(vs)
    conn = vs.backend.store._connection()  # type: ignore[attr-defined]
    conn.execute(f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0] + 6}")
    with pytest.raises(StoreError, match=r"add_documents wrote nothing.*database or disk is full"):
        vs.add_documents(_two_chunk_docs("big1", "big2", "big3", "big4", size=400))
    assert _state(vs) == before
    vs.close()
    reopened = RagSpineVectorStore(tmp_path / "store", EMB)  # another process's view: the same
    assert _state(reopened) == before
    reopened.close()


# ------------------------------------------------------------------------------------------------ refused inputs


@pytest.mark.parametrize(
    ("metadata", "field"),
    [
        ({"score": float("nan")}, "score"),
        ({"w": {"deep": [1, float("nan")]}}, "w.deep[1]"),
        ({"score": np.float32("nan")}, "score"),
    ],
    ids=["nan", "nested", "numpy"],
)
def test_nan_metadata_is_refused_naming_id_field_and_index(
    store: VectorStore, metadata: dict[str, Any], field: str
) -> None:
    """Regression: NaN metadata was stored silently, and no filter could ever match it."""
    store.add_texts(["kept"], ids=["kept"])
    before = _state(store)
    with pytest.raises(ValueError, match=rf"index 1 \(id 'bad'\) has metadata '{re.escape(field)}' = .*nan.*never equal"):
        store.add_texts(["fine", "broken"], [{"x": 1}, metadata], ids=["good", "bad"])
    with pytest.raises(ValueError, match=r"index 0 \(id 'bad'\)"):
        store.add_documents([Document(page_content="broken", metadata=metadata, id="bad")])
    assert _state(store) == before and store.get_by_ids(["good", "bad"]) == []


def test_infinite_metadata_is_kept_and_compares_as_a_number(store: VectorStore) -> None:
    store.add_texts(["rain high", "rain low"], [{"w": float("inf")}, {"w": float("-inf")}], ids=["hi", "lo"])
    assert [d.metadata["w"] for d in store.get_by_ids(["hi", "lo"])] == [float("inf"), float("-inf")]
    assert [d.id for d in store.similarity_search("rain", k=5, filter={"w": {"gt": 1e308}})] == ["hi"]
    assert [d.id for d in store.similarity_search("rain", k=5, filter={"w": {"lt": -1e308}})] == ["lo"]


def test_an_id_given_twice_in_one_call_is_refused(store: VectorStore) -> None:
    """Regression: ``RagSpineVectorStore`` kept the last of repeated ids silently."""
    before = _state(store)
    with pytest.raises(ValueError, match=r"id 'x' is given twice in one call \(at index 0 and 2\)"):
        store.add_texts(["first", "other", "second"], ids=["x", "y", "x"])
    with pytest.raises(ValueError, match=r"id 'd' is given twice in one call \(at index 0 and 1\)"):
        store.add_documents([Document(page_content="one", id="d"), Document(page_content="two", id="d")])
    assert _state(store) == before and store.get_by_ids(["x", "y", "d"]) == []


def test_the_chunk_store_refuses_nan_metadata_for_every_writer(tmp_path: Path) -> None:
    with ChunkStore(tmp_path / "chunks.sqlite") as cs:
        generation = cs.generation
        chunk = Document(page_content="t", metadata={"doc_id": "d", "chunk_id": "d#0", "p": float("nan")})
        with pytest.raises(ValueError, match=r"chunk 'd#0': metadata 'p' holds nan.*never equals itself"):
            cs.replace_doc_chunks("d", [chunk])
        assert cs.generation == generation and cs.count_chunks() == 0


# ------------------------------------------------------------------------------------------------ readable after a full disk


def _full_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every embedding-cache connection may not grow its file (a real ``SQLITE_FULL``, as on a full disk)."""
    original = EmbeddingCache._connect

    def full(self: EmbeddingCache, busy_timeout: float) -> sqlite3.Connection:
        conn = original(self, busy_timeout)
        conn.execute(f"PRAGMA max_page_count = {max(conn.execute('PRAGMA page_count').fetchone()[0], 1)}")
        return conn

    monkeypatch.setattr(EmbeddingCache, "_connect", full)


def _full_chunk_store(vs: RagSpineVectorStore) -> None:
    conn = vs.backend.store._connection()  # type: ignore[attr-defined]
    conn.execute(f"PRAGMA max_page_count = {conn.execute('PRAGMA page_count').fetchone()[0]}")


BASE = [f"base-{i}" for i in range(5)]


def _base_store(tmp_path: Path) -> RagSpineVectorStore:
    vs = RagSpineVectorStore(tmp_path / "store", EMB)
    vs.add_texts([f"base record {i} about the rainy season" for i in range(5)], ids=BASE)
    return vs


def _readable(vs: RagSpineVectorStore, ids: list[str]) -> None:
    assert [d.id for d in vs.get_by_ids(ids)] == ids
    assert sorted(str(d.id) for d in vs.similarity_search("rainy season", k=100)) == sorted(ids)
    assert sorted(str(d.id) for d in vs.as_retriever(search_kwargs={"k": 100}).invoke("rainy season")) == sorted(ids)


def test_a_disk_full_write_leaves_the_store_readable_in_the_same_instance(tmp_path: Path, monkeypatch) -> None:
    """Regression (trial ``t6_vs_diskfull.py``): after ``add_documents`` failed on a full disk, ``get_by_ids`` and
    ``similarity_search`` on the same instance failed too (``embeddings.sqlite: not a usable SQLite database:
    database or disk is full``) until space was freed: the first read after a write rebuilds the indexes, and the
    rebuild wrote the vectors it embedded to the cache.  (A write now also puts its records' vectors into the cache;
    here the cache is removed after it and the store opened again, so the first read has every vector to embed.)"""
    _base_store(tmp_path).close()
    (tmp_path / "store" / "embeddings.sqlite").unlink()
    vs = RagSpineVectorStore(tmp_path / "store", EMB)  # nothing read yet: the indexes are built by the first read
    _full_chunk_store(vs)
    _full_cache(monkeypatch)
    with pytest.raises(StoreError, match=r"add_documents wrote nothing.*database or disk is full"):
        vs.add_documents(_two_chunk_docs("new1", "new2", size=400))
    with pytest.warns(CacheNotWrittenWarning, match=r"embeddings\.sqlite: the embedding cache cannot be written"):
        _readable(vs, BASE)
    assert vs.get_by_ids(["new1-0"]) == []
    monkeypatch.undo()  # space freed: the same instance writes, and the cache is written again
    vs.add_documents(_two_chunk_docs("new1"))
    _readable(vs, [*BASE, "new1-0", "new1-1"])
    with EmbeddingCache(tmp_path / "store" / "embeddings.sqlite", read_only=True) as cache:
        assert cache.count() == len(BASE) + 2
    vs.close()


def test_a_write_that_succeeds_while_the_cache_cannot_grow_stays_readable(tmp_path: Path, monkeypatch) -> None:
    """The trial's other case: the write fit, the new records' vectors did not (the cache's file was full)."""
    vs = _base_store(tmp_path)
    _readable(vs, BASE)  # the cache holds the base vectors
    _full_cache(monkeypatch)
    new = [f"new{i}" for i in range(40)]  # more vectors than the cache's last page holds
    with pytest.warns(CacheNotWrittenWarning, match="database or disk is full"):  # the write embeds them: said so
        vs.add_documents(_two_chunk_docs(*new))
    _readable(vs, [*BASE, *(f"{d}-{i}" for d in new for i in range(2))])  # from the vectors the write embedded
    with pytest.warns(CacheNotWrittenWarning, match="database or disk is full"):  # a store opened now embeds them
        other = RagSpineVectorStore(tmp_path / "store", EMB)
        _readable(other, [*BASE, *(f"{d}-{i}" for d in new for i in range(2))])
    other.close()
    vs.close()


def test_a_read_whose_writer_lock_cannot_be_taken_reads_the_cache_only(tmp_path: Path, monkeypatch) -> None:
    """A full disk can fail the writer lock itself (its holder's pid is written to the lock file): the rebuild then
    leaves the cache as it is, as while another writer holds the lock."""
    _base_store(tmp_path).close()
    (tmp_path / "store" / "embeddings.sqlite").unlink()  # the write cached its vectors: the read has to embed them
    vs = RagSpineVectorStore(tmp_path / "store", EMB)

    @contextlib.contextmanager
    def no_lock(root: Any, **_: Any) -> Iterator[Path]:
        raise StoreError(f"cannot lock {root}/.lock: No space left on device", path=root)
        yield Path(root)  # pragma: no cover

    monkeypatch.setattr(directory_backend, "writer_lock", no_lock)
    _readable(vs, BASE)
    assert not (tmp_path / "store" / "embeddings.sqlite").exists()  # nothing written beside the failed lock
    vs.close()
