"""End to end on PostgreSQL (issue 17): ``ragspine ingest PATH --store postgresql://…`` and the Python ``ingest``
write the same versioned store as a store directory, and ``search``, ``ask`` and ``eval`` run on it unchanged,
giving the file store's answers; re-ingest embeds nothing new; RESTRICTED never comes out.

Needs the session's PostgreSQL (``pg_server`` in ``tests/conftest.py``); skips, saying why, without it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from langchain_ragspine.backends.postgres.chunk_store import PostgresChunkStore
from langchain_ragspine.cli import main
from langchain_ragspine.errors import StoreError
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.sources import open_retriever, search
from tests.unit_tests.test_eval_cli import _qa_folder
from tests.unit_tests.test_indexing_cli import SECRET, _write


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    _write(root / "tsuyu.md", "# 梅雨\n\n梅雨は北海道と小笠原諸島を除く日本で見られる雨季である。\n\n梅雨前線が停滞する。",
           lang="ja", year=2020)
    _write(root / "kyoto.md", "# 京都\n\n京都の観光名所は清水寺と金閣寺である。", lang="ja", year=2024)
    _write(root / "keys.md", f"# 鍵\n\n梅雨の時期の鍵交換手順。{SECRET} 梅雨 梅雨 北海道", sensitivity="restricted", lang="ja")
    _write(root / "en.md", "# Rainy season\n\nThe rainy season in Japan is called tsuyu.", lang="en", year=2022)
    return root


def _rows(docs: list) -> list[tuple[str, float | None, float | None, float | None]]:
    return [(d.metadata["chunk_id"], *(round(d.metadata["scores"][c], 5) if d.metadata["scores"][c] is not None
                                       else None for c in ("bm25", "vector", "fused"))) for d in docs]


def test_python_ingest_and_every_mode_answer_as_the_file_store(corpus: Path, tmp_path: Path, pg_url: str) -> None:
    file_summary = ingest(corpus, tmp_path / "S", embedding="hashing")
    pg_summary = ingest(corpus, pg_url, embedding="hashing")
    for field in ("documents", "chunks", "new", "store_documents", "store_chunks", "embedded", "dense"):
        assert getattr(pg_summary, field) == getattr(file_summary, field), field
    for mode in ("bm25", "vector", "hybrid", "auto"):
        for q in ("日本で梅雨がないのは北海道とどこか", "rainy season", "清水寺"):
            want = search(open_retriever(tmp_path / "S", mode=mode), q, k=5)
            got = search(open_retriever(pg_url, mode=mode), q, k=5)
            assert _rows(got) == _rows(want), (mode, q)
            assert all(SECRET not in d.page_content for d in got)
        flt = {"year": {"gte": 2022}}
        assert _rows(search(open_retriever(pg_url, mode=mode), "梅雨", k=5, filter=flt)) == _rows(
            search(open_retriever(tmp_path / "S", mode=mode), "梅雨", k=5, filter=flt))
    again = ingest(corpus, pg_url, embedding="hashing")
    assert (again.unchanged, again.new, again.changed, again.embedded) == (4, 0, 0, 0)
    (corpus / "kyoto.md").unlink()
    (corpus / "kyoto.json").unlink()
    (corpus / "en.md").write_text("# Rainy season\n\nThe rainy season in Japan is called tsuyu. It ends in July.", "utf-8")
    third = ingest(corpus, pg_url, embedding="hashing")
    assert (third.changed, third.retracted, third.embedded) == (1, 1, 1)
    with PostgresChunkStore(pg_url, read_only=True) as store:
        assert store.doc_ids() == ["en", "keys", "tsuyu"] and store.current_version("en") == 2
        assert "kyoto" in store.doc_ids(include_retracted=True)
    assert all(d.metadata["doc_id"] != "kyoto" for d in search(open_retriever(pg_url, mode="hybrid"), "清水寺", k=5))


def test_cli_ingest_search_ask_eval_on_postgres(corpus: Path, tmp_path: Path, pg_url: str, capsys) -> None:
    assert main(["ingest", str(corpus), "--store", pg_url, "--embedding", "hashing"]) == 0
    out = capsys.readouterr().out
    assert "this run: 4 documents" in out and "(4 new, 0 changed" in out
    assert main(["search", "日本で梅雨がないのは北海道とどこか", "--store", pg_url, "-k", "2", "--json"]) == 0
    hits = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert [h["doc_id"] for h in hits][:1] == ["tsuyu"] and all(SECRET not in h["text"] for h in hits)
    assert main(["search", "梅雨", "--store", pg_url, "--filter", "lang=en", "--json"]) == 0
    assert {json.loads(x)["doc_id"] for x in capsys.readouterr().out.splitlines() if x.startswith("{")} <= {"en"}
    assert main(["ask", "日本で梅雨がないのは北海道とどこか", "--store", pg_url, "--llm", "none", "--json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert "小笠原諸島" in json.dumps(answer, ensure_ascii=False) and SECRET not in json.dumps(answer, ensure_ascii=False)
    ds = _qa_folder(tmp_path / "ds")
    other = pg_url.replace("options=-csearch_path%3D", "options=-csearch_path%3Deval_")  # a schema of its own
    schema = other.split("csearch_path%3D")[1].split(",")[0]
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        assert main(["eval", str(ds), "--store", other, "--mode", "bm25", "--json", str(tmp_path / "r.json")]) == 0
        res = json.loads((tmp_path / "r.json").read_text("utf-8"))["results"][0]
        assert res["aggregate"]["answer_recall@1"] == pytest.approx(2 / 3)
    finally:
        from langchain_ragspine.backends.postgres.chunk_store import close_pools

        close_pools()
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def _schema(url: str) -> str:
    return url.split("csearch_path%3D")[1].split(",")[0]


def test_a_store_scoped_by_search_path_never_touches_a_later_schemas_store(
    corpus: Path, tmp_path: Path, pg_url: str, other_pg_url: str
) -> None:
    """Regression (trial of 5d1ab81, data loss): a store URL scoped as docs/postgres.md shows
    (``options=-csearch_path%3Dlaws,public``) found the tables of a store in a *later* schema of its search_path
    (``to_regclass`` resolves through the whole path), wrote its documents there and retracted that store's
    documents; its writer lock keyed on the first schema, so it did not even serialise with that store's writers.
    The store is the connection's current_schema(): every existence check, DDL and the lock use it."""
    import psycopg

    from langchain_ragspine.backends.postgres.lock import _connect, _store_key

    later = ingest(corpus, other_pg_url, embedding="hashing")  # the store of the later schema ("public")
    assert later.store_documents == 4
    first, second = _schema(pg_url), _schema(other_pg_url)
    scoped = pg_url.replace(f"csearch_path%3D{first},public", f"csearch_path%3D{first},{second},public")
    assert scoped != pg_url
    with pytest.raises(StoreError, match="no ragspine store here"):
        PostgresChunkStore(scoped, read_only=True)  # it read the later schema's store
    elsewhere = tmp_path / "elsewhere"
    _write(elsewhere / "laws.md", "# 法令\n\n民法は私法の一般法である。", lang="ja")
    summary = ingest(elsewhere, scoped, embedding="hashing")
    assert (summary.new, summary.retracted, summary.store_documents) == (1, 0, 1)
    with PostgresChunkStore(other_pg_url, read_only=True) as store:  # untouched: it lost its 4 documents
        assert store.doc_ids() == ["en", "keys", "kyoto", "tsuyu"]
        assert "laws" not in store.doc_ids(include_retracted=True)
    with PostgresChunkStore(scoped, read_only=True) as store:
        assert store.doc_ids() == ["laws"]
    with psycopg.connect(scoped, autocommit=True) as conn:
        tables = {r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", (first,))}
        assert {"ragspine_meta", "ragspine_chunks", "ragspine_embeddings"} <= tables
    for mode in ("bm25", "vector", "hybrid"):
        assert {d.metadata["doc_id"] for d in search(open_retriever(scoped, mode=mode), "民法 梅雨", k=5)} == {"laws"}
    conns = [_connect(u, "test") for u in (scoped, pg_url, other_pg_url)]
    try:
        keys = [_store_key(c, "test") for c in conns]
    finally:
        for c in conns:
            c.close()
    assert keys[0] == keys[1] != keys[2] and keys[0][0] == first  # one lock per store, keyed on its own schema


def test_no_retriever_over_a_store_shows_its_password(corpus: Path, pg_url: str) -> None:
    """Regression (trial of 5d1ab81): ``repr()`` / ``str()`` of ``PostgresBM25Retriever`` / ``PostgresDenseRetriever``
    — and so of a hybrid over them, and LangChain's ``dumpd`` / ``dumps`` (which carry the repr of a retriever it
    cannot serialise, as tracers do) — printed the store URL with its password."""
    from langchain_core.callbacks import BaseCallbackHandler
    from langchain_core.load import dumpd, dumps

    secret = "pw9secret"
    assert "postgres:@" in pg_url
    url = pg_url.replace("postgres:@", f"postgres:{secret}@")  # the test server trusts any password
    ingest(corpus, url, embedding="hashing")

    class Spy(BaseCallbackHandler):
        seen: list[str] = []

        def on_retriever_start(self, serialized: Any, query: str, **kw: Any) -> None:
            self.seen.append(repr(serialized) + repr(kw))

    for mode in ("bm25", "vector", "hybrid", "auto"):
        retriever = open_retriever(url, mode=mode)
        for text in (repr(retriever), str(retriever), dumps(retriever), repr(dumpd(retriever))):
            assert secret not in text, mode
        assert "postgres:***@" in repr(retriever), mode
        spy = Spy()
        assert retriever.invoke("梅雨", config={"callbacks": [spy]})
        assert spy.seen and secret not in "".join(spy.seen), mode


def test_a_psycopg_error_quoting_the_url_never_shows_its_password() -> None:
    """Regression (trial of 5d1ab81): libpq quotes a malformed URL whole in its error, and the StoreError carried
    it; an upper-case scheme, taken as PostgreSQL, was such a URL to libpq."""
    for url in ("postgresql://u:pw9secret@[::1/db", "POSTGRESQL://u:pw9secret@127.0.0.1:9/db?connect_timeout=2"):
        with pytest.raises(StoreError) as info:
            PostgresChunkStore(url)
        assert "pw9secret" not in str(info.value) and "***" in str(info.value)
    with pytest.raises(StoreError, match="Connection refused|connection failed"):  # reached the server: lowered
        PostgresChunkStore("POSTGRESQL://u@127.0.0.1:9/db?connect_timeout=2")


def test_an_unknown_filter_field_warns_once_on_both_backends(corpus: Path, tmp_path: Path, pg_url: str) -> None:
    """Trial of 5d1ab81: the directory store warned once per retriever and channel (twice per hybrid); PostgreSQL
    at every call and channel (six times for three hybrid calls).  Now one rule (filters.unreported_fields): once
    per process for a field and the store's set of fields, on both backends, whatever the channels or calls."""
    import warnings

    from langchain_ragspine.filters import UnknownFilterFieldWarning, reset_filter_warnings

    ingest(corpus, tmp_path / "S", embedding="hashing")
    ingest(corpus, pg_url, embedding="hashing")
    for store in (str(tmp_path / "S"), pg_url):
        for mode in ("bm25", "vector", "hybrid"):
            reset_filter_warnings()
            with warnings.catch_warnings(record=True) as seen:
                warnings.simplefilter("always")
                for _ in range(3):
                    assert open_retriever(store, mode=mode).invoke("梅雨", filter={"lnag": "ja"}) == []
            got = [str(w.message) for w in seen if issubclass(w.category, UnknownFilterFieldWarning)]
            assert len(got) == 1 and "closest known fields: 'lang'" in got[0], (store, mode, got)


def test_every_mode_takes_its_own_filter_on_postgresql_too(corpus: Path, pg_url: str) -> None:
    """Trial of 5d1ab81: ``mode="bm25"`` / ``"vector"`` refused ``filter=`` (hybrid took it); on PostgreSQL as on a
    store directory every mode now takes it, and a call's filter is ANDed with it."""
    ingest(corpus, pg_url, embedding="hashing")
    for mode in ("bm25", "vector", "hybrid", "auto"):
        own = open_retriever(pg_url, mode=mode, filter={"lang": "ja"})
        hits = search(own, "梅雨 rainy season", k=5)
        assert hits and {d.metadata["lang"] for d in hits} == {"ja"}, mode
        assert search(own, "rainy season", k=5, filter={"lang": "en"}) == [], mode  # never widened
        assert all(SECRET not in d.page_content for d in hits)


def test_a_search_path_whose_first_schema_is_missing_is_refused_not_read_as_the_next(
    corpus: Path, tmp_path: Path, pg_url: str, other_pg_url: str
) -> None:
    """Regression (trial of ba5bf07, data loss): with ``search_path=laws,<schema of a store>`` and no schema
    ``laws``, current_schema() is the next one: ``ragspine ingest`` wrote into that store and retracted its
    documents.  The first schema of the path must exist; otherwise every open, search and write is refused."""
    import uuid

    from langchain_ragspine.backends.postgres.lock import writer_lock

    ingest(corpus, other_pg_url, embedding="hashing")
    second = _schema(other_pg_url)
    missing = f"absent_{uuid.uuid4().hex[:8]}"
    url = other_pg_url.replace(f"csearch_path%3D{second},", f"csearch_path%3D{missing},{second},")
    elsewhere = tmp_path / "elsewhere"
    _write(elsewhere / "laws.md", "# 法令\n\n民法は私法の一般法である。", lang="ja")
    refused = rf"the store's schema '{missing}', the first of this URL's search_path, does not exist"
    for attempt in (lambda: ingest(elsewhere, url, embedding="hashing"), lambda: open_retriever(url, mode="bm25"),
                    lambda: PostgresChunkStore(url), lambda: writer_lock(url).__enter__()):
        with pytest.raises(StoreError, match=refused):
            attempt()
    with PostgresChunkStore(other_pg_url, read_only=True) as store:
        assert store.doc_ids() == ["en", "keys", "kyoto", "tsuyu"]  # untouched
    assert PostgresChunkStore(pg_url).count_chunks() == 0  # an existing first schema is fine


def test_eval_into_an_existing_postgres_store_keeps_its_vectors(tmp_path: Path, pg_url: str, capsys) -> None:
    # trial of issue 30: `eval --store URL --mode bm25` re-ingested with mode bm25 and dropped the store's vectors
    from langchain_ragspine.pipeline.sources import open_source

    ds = _qa_folder(tmp_path / "ds")
    assert main(["ingest", str(ds / "docs"), "--store", pg_url, "--embedding", "hashing:32"]) == 0
    assert main(["eval", str(ds), "--store", pg_url, "--mode", "bm25"]) == 0
    with open_source(pg_url) as source:
        assert source.recorded_embedding() == "hashing:32"
    capsys.readouterr()
    assert main(["search", "京都の名所", "--store", pg_url, "--mode", "hybrid", "--json"]) == 0
    assert [json.loads(x)["doc_id"] for x in capsys.readouterr().out.splitlines() if x.startswith("{")][:1] == ["b"]
