"""Issue 25, section 6: a vector-store write call is one version, all or nothing, on both stores
(``RagSpineVectorStore`` over a store directory, ``PostgresVectorStore``): a disk-full error part way through
``add_documents`` / ``delete`` leaves the store exactly as before (rows, generation, what search returns) and says
so; an id given twice in one call, or a NaN metadata value, is a ``ValueError`` naming the id, the field and the
position, before anything is written (infinities are kept: they compare as numbers).  (The corpus loader already refuses NaN in JSONL / front matter:
``test_document_loaders.py``.)"""

from __future__ import annotations

import errno
import inspect
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore

from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.errors import StoreError
from langchain_ragspine.stores import ChunkStore
from langchain_ragspine.stores.postgres import PostgresChunkStore
from langchain_ragspine.vectorstores import PostgresVectorStore, RagSpineVectorStore

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
    if isinstance(store, RagSpineVectorStore):
        generation = store.backend.generation
        records = sorted((d.id, d.page_content) for d in store.backend.records())
    else:
        assert isinstance(store, PostgresVectorStore)
        with PostgresChunkStore(store.url, read_only=True) as s:
            generation = s.generation
            records = sorted((c.chunk_id, c.text) for c in s.iter_chunks())
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
    if isinstance(store, RagSpineVectorStore):
        _fail_second(monkeypatch, ChunkStore, "_insert_rows", _disk_full)
    else:
        _fail_second(monkeypatch, PostgresChunkStore, "_insert_searchable", _server_error)


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
    conn = vs.backend._store._connection()  # type: ignore[attr-defined]
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
