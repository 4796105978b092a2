"""Behaviour of the versioned SQLite chunk store (``langchain_ragspine.backends.directory.chunk_store``)."""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import os
import queue
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document

from langchain_ragspine.backends.directory.chunk_store import SCHEMA_VERSION, ChunkStore, StoredChunk
from langchain_ragspine.errors import StoreError
from langchain_ragspine.text_splitters import ParagraphTextSplitter

HERE = Path(__file__).resolve().parents[2]
CHILD = HERE / "_chunk_store_crash_child.py"


def chunk(doc_id: str, i: int, text: str, start: int = 0, **extra: Any) -> Document:
    """A chunk ``Document`` shaped like the splitter's output."""
    md: dict[str, Any] = {
        "doc_id": doc_id,
        "chunk_id": f"{doc_id}#{i}",
        "start_index": start,
        "end_index": start + len(text),
        "source_locator": f"{doc_id}.md#{start}-{start + len(text)}",
        "title": f"Title of {doc_id}",
        "sensitivity": "PUBLIC",
        "source": f"{doc_id}.md",
        **extra,
    }
    return Document(page_content=text, metadata=md, id=md["chunk_id"])


def chunks(doc_id: str, texts: list[str], **extra: Any) -> list[Document]:
    out, pos = [], 0
    for i, t in enumerate(texts):
        out.append(chunk(doc_id, i, t, pos, **extra))
        pos += len(t) + 2
    return out


def texts(items: list[StoredChunk]) -> list[str]:
    return [c.text for c in items]


@pytest.fixture
def store(tmp_path: Path):
    with ChunkStore(tmp_path / "store.sqlite") as s:
        yield s


# -- versions, history, no-op, retraction --------------------------------------------------------------------
def test_replace_creates_versions_and_keeps_history(store: ChunkStore) -> None:
    assert store.current_version("a") is None
    assert store.replace_doc_chunks("a", chunks("a", ["one", "two"]), valid_as_of="2024-01-01") == 1
    assert store.replace_doc_chunks("a", chunks("a", ["uno", "dos", "tres"]), valid_as_of="2025-01-01") == 2
    assert store.current_version("a") == 2

    active = list(store.iter_chunks())
    assert texts(active) == ["uno", "dos", "tres"]
    assert {(c.version, c.active, c.valid_as_of) for c in active} == {(2, True, "2025-01-01")}
    assert store.count_chunks() == 3

    history = list(store.iter_chunks(include_inactive=True))
    assert [(c.version, c.active, c.text) for c in history] == [
        (1, False, "one"),
        (1, False, "two"),
        (2, True, "uno"),
        (2, True, "dos"),
        (2, True, "tres"),
    ]
    assert store.count_chunks(include_inactive=True) == 5
    store.replace_doc_chunks("b", chunks("b", ["bee"]))
    assert store.count_chunks(doc_id="a") == 3
    assert store.count_chunks(doc_id="a", include_inactive=True) == 5
    assert store.count_chunks(doc_id=["a", "b"]) == 4
    assert store.count_chunks(doc_id=[]) == 0
    assert store.count_chunks(doc_id="zzz") == 0
    # all rows of one version share one ingest timestamp, ISO-8601 in UTC
    v2_times = {c.ingested_at for c in history if c.doc_id == "a" and c.version == 2}
    assert len(v2_times) == 1
    assert dt.datetime.fromisoformat(v2_times.pop()).utcoffset() == dt.timedelta(0)


def test_stored_chunk_fields_and_to_document(store: ChunkStore) -> None:
    when = dt.datetime(2024, 5, 1, 12, 30, tzinfo=dt.UTC)
    doc = chunk("a", 0, "本文です", start=10, published=dt.date(2024, 4, 1), updated=when, tags=("x", "y"))
    store.replace_doc_chunks("a", [doc], valid_as_of=dt.date(2024, 6, 30))
    (c,) = store.iter_chunks()
    assert (c.chunk_id, c.doc_id, c.text, c.start_index, c.end_index) == ("a#0", "a", "本文です", 10, 14)
    assert (c.source_locator, c.title, c.sensitivity) == ("a.md#10-14", "Title of a", "PUBLIC")
    assert (c.version, c.active, c.valid_as_of) == (1, True, "2024-06-30")
    # the full metadata as given, dates as ISO strings, tuples as lists
    assert c.metadata["published"] == "2024-04-01"
    assert c.metadata["updated"] == when.isoformat()
    assert c.metadata["tags"] == ["x", "y"]
    assert c.metadata["source"] == "a.md"

    d = c.to_document()
    assert d.id == "a#0" and d.page_content == "本文です"
    assert d.metadata["chunk_id"] == "a#0" and d.metadata["doc_id"] == "a"
    assert d.metadata["start_index"] == 10 and d.metadata["end_index"] == 14
    assert d.metadata["doc_version"] == 1 and "version" not in d.metadata
    assert d.metadata["valid_as_of"] == "2024-06-30"
    assert d.metadata["ingested_at"] == c.ingested_at
    assert d.metadata["published"] == "2024-04-01"
    # frozen, and hashable despite the metadata dict
    with pytest.raises(AttributeError):
        c.version = 5  # type: ignore[misc]
    assert hash(c) == hash(next(store.iter_chunks()))


def test_splitter_output_round_trips(store: ChunkStore) -> None:
    text = "東京都の天気は晴れです。\n\n大阪府の人口について。\n\nデータベースの設計方法。"
    docs = ParagraphTextSplitter(chunk_size=16, chunk_overlap=0).create_documents(
        [text], [{"doc_id": "jp", "title": "天気", "sensitivity": "PUBLIC", "lang": "ja"}]
    )
    assert store.replace_doc_chunks("jp", docs) == 1
    back = [c.to_document() for c in store.iter_chunks(language="ja")]
    assert [d.page_content for d in back] == [d.page_content for d in docs]
    assert [d.id for d in back] == [d.id for d in docs]
    for orig, got in zip(docs, back, strict=True):
        assert text[got.metadata["start_index"] : got.metadata["end_index"]] == got.page_content
        assert {k: got.metadata[k] for k in orig.metadata} == orig.metadata
    assert store.replace_doc_chunks("jp", docs) == 1  # same splitter output again: no-op


def test_identical_reingest_is_a_noop(store: ChunkStore) -> None:
    v1 = chunks("a", ["one", "two"], topic="law")
    assert store.replace_doc_chunks("a", v1) == 1
    gen = store.generation
    rows = store.count_chunks(include_inactive=True)

    # same content, freshly built objects, metadata keys in another order, different valid_as_of: still a
    # no-op
    again = [Document(page_content=d.page_content, metadata=dict(reversed(d.metadata.items()))) for d in v1]
    assert store.replace_doc_chunks("a", again, valid_as_of="2030-01-01") == 1
    assert store.generation == gen
    assert store.count_chunks(include_inactive=True) == rows
    assert {c.valid_as_of for c in store.iter_chunks()} == {""}

    # any change in text, offsets, metadata or order makes a new version
    changed_md = chunks("a", ["one", "two"], topic="tax")
    assert store.replace_doc_chunks("a", changed_md) == 2
    shifted = chunks("a", ["one", "two"], topic="tax")
    shifted[1].metadata["start_index"] += 1
    assert store.replace_doc_chunks("a", shifted) == 3
    reordered = [chunk("a", 1, "two", 5, topic="tax"), chunk("a", 0, "one", 0, topic="tax")]
    assert store.replace_doc_chunks("a", reordered) == 4
    assert store.generation == gen + 3


def test_retraction(store: ChunkStore) -> None:
    store.replace_doc_chunks("a", chunks("a", ["one", "two"]))
    store.replace_doc_chunks("b", chunks("b", ["bee"]))
    gen = store.generation

    assert store.replace_doc_chunks("a", []) == 2
    assert store.current_version("a") == 2
    assert store.generation == gen + 1
    assert list(store.iter_chunks(doc_id="a")) == []
    assert [(c.version, c.active) for c in store.iter_chunks(doc_id="a", include_inactive=True)] == [
        (1, False),
        (1, False),
    ]
    assert store.doc_ids() == ["b"]
    assert store.doc_ids(include_retracted=True) == ["a", "b"]
    assert store.count_chunks() == 1

    # retracting again, or retracting an unknown document, writes nothing
    assert store.replace_doc_chunks("a", []) == 2
    assert store.replace_doc_chunks("zzz", []) == 0
    assert store.current_version("zzz") is None
    assert store.generation == gen + 1

    # re-ingesting the old content after a retraction is a new version, not a no-op
    assert store.replace_doc_chunks("a", chunks("a", ["one", "two"])) == 3
    assert texts(list(store.iter_chunks(doc_id="a"))) == ["one", "two"]
    assert store.doc_ids() == ["a", "b"]


def test_order_is_doc_id_version_position(store: ChunkStore) -> None:
    store.replace_doc_chunks("b", chunks("b", ["b0", "b1"]))
    store.replace_doc_chunks("a", chunks("a", ["a0", "a1", "a2"]))
    store.replace_doc_chunks("b", chunks("b", ["B0"]))
    assert [c.chunk_id for c in store.iter_chunks()] == ["a#0", "a#1", "a#2", "b#0"]
    assert [(c.chunk_id, c.version) for c in store.iter_chunks(include_inactive=True)] == [
        ("a#0", 1),
        ("a#1", 1),
        ("a#2", 1),
        ("b#0", 1),
        ("b#1", 1),
        ("b#0", 2),
    ]
    assert store.doc_ids() == ["a", "b"]


def test_generation_counts_committed_writes_across_connections(tmp_path: Path) -> None:
    path = tmp_path / "g.sqlite"
    with ChunkStore(path) as writer:
        g0 = writer.generation
        with ChunkStore(path, read_only=True) as reader:
            assert reader.generation == g0
            writer.replace_doc_chunks("a", chunks("a", ["x"]))
            assert reader.generation == writer.generation == g0 + 1
            assert texts(list(reader.iter_chunks())) == ["x"]


# -- filters -------------------------------------------------------------------------------------------------
@pytest.fixture
def faceted(store: ChunkStore) -> ChunkStore:
    store.replace_doc_chunks(
        "law",
        [chunk("law", 0, "law text", topic="law", entity=["ACME", "Globex"], geography="JP", lang="ja")],
    )
    store.replace_doc_chunks(
        "tax",
        [
            chunk("tax", 0, "tax one", topic=["tax", "law"], entity="ACME", period=2024, language="en"),
            chunk("tax", 1, "tax two", topic="tax", geography=["JP", "US"], language="en", lang="ja"),
        ],
    )
    store.replace_doc_chunks("bare", [chunk("bare", 0, "no facets")])
    return store


def ids(items) -> list[str]:  # type: ignore[no-untyped-def]
    return [c.chunk_id for c in items]


def test_filters_match_scalar_and_list_valued_facets(faceted: ChunkStore) -> None:
    s = faceted
    assert ids(s.iter_chunks(topic="law")) == ["law#0", "tax#0"]  # list-valued metadata: any element
    assert ids(s.iter_chunks(topic="tax")) == ["tax#0", "tax#1"]
    assert ids(s.iter_chunks(entity="Globex")) == ["law#0"]
    assert ids(s.iter_chunks(entity="ACME")) == ["law#0", "tax#0"]
    assert ids(s.iter_chunks(geography="US")) == ["tax#1"]
    assert ids(s.iter_chunks(period="2024")) == ["tax#0"]  # non-string metadata compares as str
    assert ids(s.iter_chunks(topic=["nothing", "tax"])) == ["tax#0", "tax#1"]  # filter list: any of them
    assert ids(s.iter_chunks(topic=("law",), entity="Globex")) == ["law#0"]  # filters AND together
    assert ids(s.iter_chunks(topic="tax", geography="JP")) == ["tax#1"]
    assert ids(s.iter_chunks(topic="law", doc_id=["tax", "bare"])) == ["tax#0"]
    assert ids(s.iter_chunks(doc_id="bare")) == ["bare#0"]
    assert ids(s.iter_chunks(topic="nope")) == []
    assert ids(s.iter_chunks(topic=[])) == []  # an empty choice matches nothing, never everything
    assert ids(s.iter_chunks(doc_id=[])) == []
    assert ids(s.iter_chunks(period="2023")) == []  # a chunk without the field never matches


def test_language_falls_back_to_lang(faceted: ChunkStore) -> None:
    s = faceted
    assert ids(s.iter_chunks(language="ja")) == ["law#0"]  # from metadata "lang"
    # "language" wins over "lang" when both are present
    assert ids(s.iter_chunks(language="en")) == ["tax#0", "tax#1"]


def test_filters_apply_to_history_too(faceted: ChunkStore) -> None:
    s = faceted
    s.replace_doc_chunks("law", [chunk("law", 0, "law text v2", topic="labour")])
    assert ids(s.iter_chunks(topic="law", doc_id="law")) == []
    old = list(s.iter_chunks(topic="law", doc_id="law", include_inactive=True))
    assert [(c.version, c.active) for c in old] == [(1, False)]
    assert ids(s.iter_chunks(topic="labour")) == ["law#0"]


def test_facets_are_rows_in_their_own_table(faceted: ChunkStore) -> None:
    con = sqlite3.connect(faceted.path)
    try:
        got = con.execute(
            "SELECT f.field, f.value FROM facets f JOIN chunks c ON c.id = f.chunk_row "
            "WHERE c.chunk_id = ? ORDER BY f.field, f.value",
            ("law#0",),
        ).fetchall()
    finally:
        con.close()
    assert got == [
        ("entity", "ACME"),
        ("entity", "Globex"),
        ("geography", "JP"),
        ("language", "ja"),
        ("topic", "law"),
    ]


@pytest.mark.parametrize("bad", [1, ["ok", 2], {"a"}, 3.5])
def test_bad_filter_value_raises_type_error(store: ChunkStore, bad: Any) -> None:
    with pytest.raises(TypeError, match="topic"):
        list(store.iter_chunks(topic=bad))


# -- validation ----------------------------------------------------------------------------------------------
def test_doc_id_mismatch_raises_value_error_naming_the_chunk(store: ChunkStore) -> None:
    store.replace_doc_chunks("a", chunks("a", ["keep"]))
    gen = store.generation
    bad = chunks("a", ["x", "y"])
    bad[1].metadata["doc_id"] = "other"
    with pytest.raises(ValueError, match=r"a#1.*'other'.*'a'"):
        store.replace_doc_chunks("a", bad)
    missing = chunks("a", ["x"])
    del missing[0].metadata["doc_id"]
    with pytest.raises(ValueError, match="a#0"):
        store.replace_doc_chunks("a", missing)
    assert store.generation == gen
    assert texts(list(store.iter_chunks(include_inactive=True))) == ["keep"]


def test_duplicate_chunk_ids_raise_value_error(store: ChunkStore) -> None:
    dup = [chunk("a", 0, "x"), chunk("a", 0, "y", start=3)]
    with pytest.raises(ValueError, match="a#0"):
        store.replace_doc_chunks("a", dup)
    assert store.current_version("a") is None


def test_chunk_id_of_another_documents_active_chunk_is_rejected(store: ChunkStore) -> None:
    store.replace_doc_chunks("a", chunks("a", ["x"]))
    stolen = chunk("b", 0, "y")
    stolen.metadata["chunk_id"] = "a#0"
    with pytest.raises(ValueError, match=r"'a#0'.*doc_id 'a'"):
        store.replace_doc_chunks("b", [stolen])
    assert store.current_version("b") is None  # rolled back: no version recorded
    assert store.doc_ids(include_retracted=True) == ["a"]


def test_other_bad_arguments(store: ChunkStore) -> None:
    with pytest.raises(TypeError, match="Document"):
        store.replace_doc_chunks("a", ["just a string"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"a#0.*'blob'"):
        store.replace_doc_chunks("a", [chunk("a", 0, "x", blob=object())])
    with pytest.raises(ValueError, match="non-empty"):
        store.replace_doc_chunks("", [])
    with pytest.raises(ValueError, match="start_index"):
        store.replace_doc_chunks("a", [chunk("a", 0, "x", start_index="3")])
    no_id = Document(page_content="x", metadata={"doc_id": "a"})
    with pytest.raises(ValueError, match="chunk_id"):
        store.replace_doc_chunks("a", [no_id])
    with pytest.raises(TypeError, match="valid_as_of"):
        store.replace_doc_chunks("a", chunks("a", ["x"]), valid_as_of=20240101)  # type: ignore[arg-type]
    assert store.count_chunks(include_inactive=True) == 0


def test_exception_mid_transaction_rolls_back(tmp_path: Path) -> None:
    class Failing(ChunkStore):
        calls = 0
        fail_at: int | None = None

        def _insert_rows(self, cur, table, *args):  # type: ignore[no-untyped-def]
            super()._insert_rows(cur, table, *args)  # the new rows are in the transaction when it fails
            if table == "chunks":
                self.calls += 1
                if self.fail_at is not None and self.calls == self.fail_at:
                    raise RuntimeError("disk on fire")

    with Failing(tmp_path / "f.sqlite") as s:
        s.replace_doc_chunks("a", chunks("a", ["one", "two"]))
        gen = s.generation
        s.calls, s.fail_at = 0, 1
        with pytest.raises(RuntimeError, match="disk on fire"):
            s.replace_doc_chunks("a", chunks("a", ["1", "2", "3", "4"]))
        assert s.current_version("a") == 1
        assert s.generation == gen
        assert [(c.text, c.active) for c in s.iter_chunks(include_inactive=True)] == [
            ("one", True),
            ("two", True),
        ]
        s.fail_at = None
        assert s.replace_doc_chunks("a", chunks("a", ["1", "2", "3", "4"])) == 2


# -- write batches ---------------------------------------------------------------------------------------------
def _script(s: ChunkStore) -> list[int]:
    """A mix of writes (new, faceted, parents, changed, no-op, retracted, re-added, a failing one); the versions."""
    out = [
        s.replace_doc_chunks("a", chunks("a", ["one", "two"], topic=["x", "y"], lang="ja"), valid_as_of="2024-01-01"),
        s.replace_doc_chunks("b", chunks("b", ["three"], entity="ACME", period=2024)),
        s.replace_doc_chunks("c", [chunk("c", 0, "child", parent_id="c#p0")],
                             parents=[Document(page_content="parent", metadata={"doc_id": "c", "parent_id": "c#p0"})]),
        s.replace_doc_chunks("a", chunks("a", ["one", "two"], topic=["x", "y"], lang="ja")),  # no-op
        s.replace_doc_chunks("a", chunks("a", ["one", "2", "3"], topic="z")),
        s.replace_doc_chunks("b", []),
        s.replace_doc_chunks("b", chunks("b", ["back"])),
    ]
    with pytest.raises(ValueError, match="already an active chunk"):
        s.replace_doc_chunks("d", [Document(page_content="clash", metadata={"doc_id": "d", "chunk_id": "a#0"})])
    out.append(s.replace_doc_chunks("e", chunks("e", ["last"])))
    return out


def _rows(path: Path) -> list[Any]:
    """Every table's rows except the write times."""
    con = sqlite3.connect(path)
    try:
        return [
            con.execute(
                "SELECT id, chunk_id, doc_id, version, position, text, start_index, end_index, source_locator, "
                "title, sensitivity, metadata_json, valid_as_of, active FROM chunks ORDER BY id").fetchall(),
            con.execute("SELECT id, parent_id, doc_id, version, position, text, active FROM parents ORDER BY id"
                        ).fetchall(),
            con.execute("SELECT * FROM facets ORDER BY 1, 2, 3").fetchall(),
            con.execute("SELECT doc_id, version, content_hash, n_chunks, valid_as_of, retracted FROM doc_versions "
                        "ORDER BY 1, 2").fetchall(),
            con.execute("SELECT * FROM meta WHERE key != 'store_id' ORDER BY key").fetchall(),  # random per store
        ]
    finally:
        con.close()


def test_write_batch_writes_exactly_what_single_writes_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from langchain_ragspine.backends.directory import _sqlite

    with ChunkStore(tmp_path / "single.sqlite") as s:
        versions = _script(s)
    monkeypatch.setattr(_sqlite, "BATCH_WRITES", 3)  # commits inside the batch too
    with ChunkStore(tmp_path / "batched.sqlite") as s, s.write_batch():
        assert _script(s) == versions
        assert s.generation == 8  # reads inside the batch see its writes (created + 7 writes, the no-op none)
    assert versions == [1, 1, 1, 1, 2, 2, 3, 1]
    assert _rows(tmp_path / "batched.sqlite") == _rows(tmp_path / "single.sqlite")


def test_write_batch_commits_completed_writes_when_it_ends_with_an_exception(tmp_path: Path) -> None:
    path = tmp_path / "b.sqlite"
    with ChunkStore(path) as s:
        with pytest.raises(ValueError, match="doc_id 'x'"), s.write_batch():
            s.replace_doc_chunks("a", chunks("a", ["one"]))
            with ChunkStore(path, read_only=True) as reader:
                assert reader.doc_ids() == []  # not committed yet: other connections see the last commit
            s.replace_doc_chunks("b", chunks("x", ["bad"]))  # fails validation: nothing of it is written
        with pytest.raises(RuntimeError, match="stop"), s.write_batch():
            s.replace_doc_chunks("c", chunks("c", ["three"]))
            raise RuntimeError("stop")
    with ChunkStore(path, read_only=True) as reader:
        assert reader.doc_ids() == ["a", "c"]
        assert reader.generation == 3  # created + two writes


def test_write_batch_rolls_back_only_the_failing_write(tmp_path: Path) -> None:
    class Failing(ChunkStore):
        fail = False

        def _insert_rows(self, cur, table, *args):  # type: ignore[no-untyped-def]
            super()._insert_rows(cur, table, *args)
            if self.fail and table == "chunks":
                raise RuntimeError("disk on fire")

    path = tmp_path / "f.sqlite"
    with Failing(path) as s, s.write_batch():
        s.replace_doc_chunks("a", chunks("a", ["one"]))
        s.fail = True
        with pytest.raises(RuntimeError, match="disk on fire"):
            s.replace_doc_chunks("a", chunks("a", ["1", "2"]))
        s.fail = False
        assert s.replace_doc_chunks("b", chunks("b", ["two"])) == 1
    with ChunkStore(path, read_only=True) as reader:
        assert [(c.chunk_id, c.text, c.version) for c in reader.iter_chunks(include_inactive=True)] == [
            ("a#0", "one", 1), ("b#0", "two", 1)]


def test_write_batch_lets_other_threads_and_writers_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another thread's write waits for the batch's open transaction at most; another connection gets the write lock
    between the batch's commits (here after every write)."""
    from langchain_ragspine.backends.directory import _sqlite

    monkeypatch.setattr(_sqlite, "BATCH_WRITES", 1)
    path = tmp_path / "t.sqlite"
    with ChunkStore(path) as s, s.write_batch():
        s.replace_doc_chunks("a", chunks("a", ["one"]))
        with ChunkStore(path, busy_timeout=0.05) as other:
            assert other.replace_doc_chunks("o", chunks("o", ["other"])) == 1
        done: list[int] = []
        t = threading.Thread(target=lambda: done.append(s.replace_doc_chunks("t", chunks("t", ["thread"]))))
        t.start()
        t.join(timeout=30)
        assert done == [1]
        s.replace_doc_chunks("b", chunks("b", ["two"]))
    with ChunkStore(path, read_only=True) as reader:
        assert reader.doc_ids() == ["a", "b", "o", "t"]


def test_write_batch_settings_last_for_the_batch_only(store: ChunkStore) -> None:
    con = store._connection()

    def settings() -> tuple[int, int, str]:
        return (con.execute("PRAGMA cache_size").fetchone()[0], con.execute("PRAGMA wal_autocheckpoint").fetchone()[0],
                con.execute("PRAGMA journal_mode").fetchone()[0])

    before = settings()
    with store.write_batch():
        assert settings() == (-65536, 10000, "wal")
        store.replace_doc_chunks("a", chunks("a", ["one"]))
    assert settings() == before == (-2000, 1000, "wal")
    assert con.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL, in and out of batches


def test_write_batch_on_a_read_only_store_raises(tmp_path: Path) -> None:
    path = tmp_path / "r.sqlite"
    ChunkStore(path).close()
    with ChunkStore(path, read_only=True) as s, pytest.raises(StoreError, match="read_only"), s.write_batch():
        pass


# -- connection, read-only mode, lifecycle -------------------------------------------------------------------
def test_pragmas_and_schema(store: ChunkStore) -> None:
    con = store._connection()
    assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert con.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert con.execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
    assert con.execute("PRAGMA busy_timeout").fetchone()[0] == 5000
    assert con.isolation_level is None
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"meta", "chunks", "doc_versions", "facets"} <= tables
    assert store.schema_version == SCHEMA_VERSION


def test_read_only_missing_file_raises_store_error_naming_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.sqlite"
    with pytest.raises(StoreError, match="nope.sqlite") as info:
        ChunkStore(missing, read_only=True)
    assert info.value.path == str(missing)
    assert not missing.exists()  # read-only never creates the file


def test_read_only_reads_and_rejects_writes(tmp_path: Path) -> None:
    path = tmp_path / "ro.sqlite"
    with ChunkStore(path) as w:
        w.replace_doc_chunks("a", chunks("a", ["one"], topic="law"))
    with ChunkStore(path, read_only=True) as r:
        assert r.read_only
        assert ids(r.iter_chunks(topic="law")) == ["a#0"]
        assert r.doc_ids() == ["a"] and r.current_version("a") == 1 and r.count_chunks() == 1
        gen = r.generation
        # writes are refused by the store with a StoreError naming the path ...
        with pytest.raises(StoreError, match=r"ro\.sqlite.*read_only"):
            r.replace_doc_chunks("a", chunks("a", ["two"]))
        with pytest.raises(StoreError, match="read_only"):
            r.replace_doc_chunks("a", [])
        # ... and the connection itself is a SQLite read-only one (file:...?mode=ro)
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            r._connection().execute("UPDATE meta SET value = '0' WHERE key = 'generation'")
        assert r.generation == gen
    with ChunkStore(path) as w:
        assert texts(list(w.iter_chunks())) == ["one"]


def test_close_and_context_manager(tmp_path: Path) -> None:
    with ChunkStore(tmp_path / "c.sqlite") as s:
        s.replace_doc_chunks("a", chunks("a", ["x"]))
    with pytest.raises(StoreError, match="closed"):
        s.count_chunks()
    s.close()  # idempotent
    with ChunkStore(tmp_path / "c.sqlite") as again:  # the data outlived the connection
        assert again.count_chunks() == 1


def test_not_a_chunk_store(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"this is not a database, just text" * 100)
    with pytest.raises(StoreError, match="garbage.sqlite"):
        ChunkStore(garbage)
    foreign = tmp_path / "foreign.sqlite"
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE users (name TEXT)")
    con.commit()
    con.close()
    with pytest.raises(StoreError, match="not a chunk store"):
        ChunkStore(foreign)


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.sqlite"
    ChunkStore(path).close()
    con = sqlite3.connect(path)
    con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    con.commit()
    con.close()
    with pytest.raises(StoreError, match="newer"):
        ChunkStore(path)


def test_threads_share_one_store(store: ChunkStore) -> None:
    def work(t: int) -> None:
        for j in range(5):
            store.replace_doc_chunks(f"t{t}-{j}", chunks(f"t{t}-{j}", [f"text {t} {j}", "more"]))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(store.doc_ids()) == 20
    assert store.count_chunks() == 40


# -- migration -----------------------------------------------------------------------------------------------
V1_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE chunks (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    chunk_id TEXT NOT NULL,
    doc_id TEXT NOT NULL,
    version INTEGER NOT NULL,
    position INTEGER NOT NULL,
    text TEXT NOT NULL,
    start_index INTEGER,
    end_index INTEGER,
    source_locator TEXT,
    title TEXT,
    metadata_json TEXT NOT NULL,
    ingested_at TEXT NOT NULL,
    active INTEGER NOT NULL DEFAULT 1
);
INSERT INTO meta (key, value) VALUES ('schema_version', '1');
"""


def _v1_insert(con: sqlite3.Connection, doc: Document, version: int, position: int, active: int) -> None:
    md = doc.metadata
    con.execute(
        "INSERT INTO chunks (chunk_id, doc_id, version, position, text, start_index, end_index, "
        "source_locator, title, metadata_json, ingested_at, active) VALUES (" + ", ".join("?" * 12) + ")",
        (
            md["chunk_id"],
            md["doc_id"],
            version,
            position,
            doc.page_content,
            md["start_index"],
            md["end_index"],
            md["source_locator"],
            md["title"],
            json.dumps(md),
            "2024-01-01T00:00:00.000000+00:00",
            active,
        ),
    )


def test_migration_from_schema_1_keeps_rows_and_backfills(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite"
    a_v1 = chunks("a", ["old one", "old two"], topic="law")
    a_v2 = chunks("a", ["new one", "new two"], topic=["law", "tax"], lang="ja", sensitivity="RESTRICTED")
    b_v1 = chunks("b", ["bee"])
    con = sqlite3.connect(path)
    con.executescript(V1_SCHEMA)
    for i, d in enumerate(a_v1):
        _v1_insert(con, d, 1, i, 0)
    for i, d in enumerate(a_v2):
        _v1_insert(con, d, 2, i, 1)
    _v1_insert(con, b_v1[0], 1, 0, 0)  # schema 1 retracted by deactivating, without a version number
    con.commit()
    con.close()

    with pytest.raises(StoreError, match="older"):  # read-only cannot migrate
        ChunkStore(path, read_only=True)

    with ChunkStore(path) as s:
        assert s.schema_version == SCHEMA_VERSION
        # no row lost, nothing rewritten
        assert [(c.doc_id, c.version, c.active, c.text) for c in s.iter_chunks(include_inactive=True)] == [
            ("a", 1, False, "old one"),
            ("a", 1, False, "old two"),
            ("a", 2, True, "new one"),
            ("a", 2, True, "new two"),
            ("b", 1, False, "bee"),
        ]
        # new columns and tables were backfilled
        assert {c.sensitivity for c in s.iter_chunks()} == {"RESTRICTED"}
        assert ids(s.iter_chunks(topic="tax")) == ["a#0", "a#1"]
        assert ids(s.iter_chunks(language="ja")) == ["a#0", "a#1"]
        assert [c.version for c in s.iter_chunks(topic="law", include_inactive=True)] == [1, 1, 2, 2]
        assert s.current_version("a") == 2
        assert s.current_version("b") == 2  # the schema-1 retraction is now a recorded version
        assert s.doc_ids() == ["a"]
        assert s.doc_ids(include_retracted=True) == ["a", "b"]
        # content hashes were backfilled: re-ingesting the current content is a no-op
        gen = s.generation
        assert s.replace_doc_chunks("a", a_v2) == 2
        assert s.generation == gen
        # and the migrated store takes writes
        assert s.replace_doc_chunks("a", chunks("a", ["newest"])) == 3
        assert s.replace_doc_chunks("b", b_v1) == 3

    # the migrated schema has the same columns as a fresh one; reopening migrates nothing again
    fresh = tmp_path / "fresh.sqlite"
    ChunkStore(fresh).close()

    def columns(p: Path) -> dict[str, set[str]]:
        c = sqlite3.connect(p)
        try:
            names = [r[0] for r in c.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            return {n: {r[1] for r in c.execute(f"PRAGMA table_info({n})")} for n in names}
        finally:
            c.close()

    assert columns(path) == columns(fresh)
    with ChunkStore(path) as s:
        gen = s.generation
    with ChunkStore(path) as s:
        assert s.generation == gen
        assert s.count_chunks(include_inactive=True) == 5 + 1 + 1


# -- crash safety --------------------------------------------------------------------------------------------
def _load_child() -> Any:
    spec = importlib.util.spec_from_file_location("_chunk_store_crash_child", CHILD)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.subprocess
@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX SIGKILL")
@pytest.mark.parametrize("batch", [False, True], ids=["one-write", "write-batch"])
def test_sigkill_mid_transaction_keeps_committed_version(tmp_path: Path, batch: bool) -> None:
    """A process killed inside a write (also inside a ``write_batch``, with another complete document written but
    not yet committed) leaves the last committed state: version 1 intact, nothing of the batch."""
    child = _load_child()
    path = tmp_path / "crash.sqlite"
    wal = Path(f"{path}-wal")
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), str(path), *(["batch"] if batch else [])],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line.strip()) for line in proc.stdout], daemon=True).start()  # type: ignore[union-attr]

    def expect(word: str) -> None:
        try:
            got = lines.get(timeout=30)
        except queue.Empty:
            proc.kill()
            pytest.fail(f"child did not print {word}; stderr: {proc.stderr.read()}")  # type: ignore[union-attr]
        assert got == word, proc.stderr.read() if proc.poll() is not None else got  # type: ignore[union-attr]

    try:
        expect("COMMITTED")
        wal_after_v1 = wal.stat().st_size
        expect("PAUSED")
        # the child now holds the write lock with N_V2 uncommitted rows, part of them spilled into the WAL
        assert wal.stat().st_size > wal_after_v1
        with ChunkStore(path, read_only=True) as reader:  # WAL: readers see the last commit meanwhile
            assert reader.current_version(child.DOC_ID) == 1
            assert reader.count_chunks(include_inactive=True) == child.N_V1
        with ChunkStore(path, busy_timeout=0.05) as blocked, pytest.raises(StoreError, match="locked"):
            blocked.replace_doc_chunks("other", chunks("other", ["x"]))
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        proc.stdout.close()  # type: ignore[union-attr]
        proc.stderr.close()  # type: ignore[union-attr]
    assert proc.returncode == -signal.SIGKILL

    expected = child.make_chunks(1, child.N_V1)
    with ChunkStore(path) as s:
        assert s.current_version(child.DOC_ID) == 1
        got = list(s.iter_chunks(include_inactive=True))
        assert [(c.chunk_id, c.text, c.version, c.active) for c in got] == [
            (d.metadata["chunk_id"], d.page_content, 1, True) for d in expected
        ]
        assert [c.metadata for c in got] == [d.metadata for d in expected]
        assert {c.valid_as_of for c in got} == {"2024-01-01"}
        assert s.doc_ids() == [child.DOC_ID]
        # writable again: the interrupted replacement now goes through
        assert s.replace_doc_chunks(child.DOC_ID, child.make_chunks(2, 5)) == 2
        assert s.count_chunks() == 5
        assert s.count_chunks(include_inactive=True) == child.N_V1 + 5
    con = sqlite3.connect(path)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        assert con.execute("PRAGMA foreign_key_check").fetchall() == []
    finally:
        con.close()


def test_user_version_metadata_survives_the_store(tmp_path: Path) -> None:
    """Regression: front matter ``version: "1.10"`` used to be replaced by the store's document version (1), so a
    filter on the user's ``version`` field saw the wrong value after ingest."""
    from langchain_ragspine.filters import matches

    store = ChunkStore(tmp_path / "c.sqlite")
    doc = Document(
        page_content="本文",
        metadata={"doc_id": "a", "chunk_id": "a#0", "version": "1.10", "ingested_at": "yesterday"},
    )
    store.replace_doc_chunks("a", [doc])
    (chunk,) = store.iter_chunks()
    md = chunk.to_document().metadata
    assert md["version"] == "1.10" and md["doc_version"] == 1 and md["ingested_at"] == "yesterday"
    assert matches(md, {"version": "1.10"}) and not matches(md, {"version": "1.1"})
    store.close()
