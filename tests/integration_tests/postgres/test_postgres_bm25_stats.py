"""BM25's corpus statistics in PostgreSQL (issue 17): ``ragspine_corpus`` (N, total length) and ``ragspine_df``
(document frequency per term) are maintained by the write transactions instead of being recounted by every query.
They must stay exact — equal to a recount over the search tables, and giving the scores of a fresh
``BM25Retriever`` over the active chunks — after ingest, re-ingest of a changed document, retraction, a chunk
turning RESTRICTED, a no-op re-ingest, a tokenizer change, and the migration of a schema-version-1 store.

Needs the session's PostgreSQL (``pg_server`` in ``tests/conftest.py``); skips, saying why, without it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from langchain_ragspine.backends.postgres.chunk_store import PG_SCHEMA_VERSION, PostgresChunkStore
from langchain_ragspine.errors import StoreError
from langchain_ragspine.retrievers import BM25Retriever
from langchain_ragspine.retrievers.postgres import PostgresBM25Retriever
from tests.integration_tests.postgres.test_postgres_retrievers import assert_same_ranking, hits, schema_url  # noqa: F401  (schema_url: fixture)

QUERIES = ["梅雨", "北京 首都", "rain season", "雨 雨 梅雨 rain", "台風 北京 rain 梅雨 夏", "unknown"]


def chunks(doc_id: str, texts: list[str], **extra: Any) -> list[Document]:
    return [Document(page_content=t, metadata={"doc_id": doc_id, "chunk_id": f"{doc_id}#{i}", **extra})
            for i, t in enumerate(texts)]


def kept(url: str) -> tuple[int, int, dict[str, int]]:
    """The maintained statistics: (N, total length, {term: df})."""
    with psycopg.connect(url, autocommit=True) as conn:
        n, total = conn.execute("SELECT n, total_dl FROM ragspine_corpus").fetchone()  # type: ignore[misc]
        assert conn.execute("SELECT count(*) FROM ragspine_corpus").fetchone() == (1,)
        df = dict(conn.execute("SELECT term, df FROM ragspine_df").fetchall())
    return int(n), int(total), df


def recounted(url: str) -> tuple[int, int, dict[str, int]]:
    """The statistics recounted from the search tables (what every query computed before schema 2)."""
    with psycopg.connect(url, autocommit=True) as conn:
        n, total = conn.execute("SELECT count(*), coalesce(sum(dl), 0) FROM ragspine_search").fetchone()  # type: ignore[misc]
        df = dict(conn.execute("SELECT term, count(*) FROM ragspine_postings GROUP BY term").fetchall())
    return int(n), int(total), df


def assert_exact(url: str, store: PostgresChunkStore) -> None:
    """Statistics equal a recount, and every query scores as a fresh BM25Retriever over the active chunks."""
    assert kept(url) == recounted(url)
    active = [c.to_document() for c in store.iter_chunks()]
    pg = PostgresBM25Retriever(url=url, k=50)
    ours = BM25Retriever.from_documents(active, k=50, tokenizer=store.tokenizer) if active else None
    for q in QUERIES:
        want = hits(ours.invoke(q), "bm25") if ours is not None else []
        assert_same_ranking(hits(pg.invoke(q), "bm25"), want)


def test_statistics_stay_exact_through_every_kind_of_write(pg_url: str) -> None:
    with PostgresChunkStore(pg_url) as store:
        assert kept(pg_url) == (0, 0, {})
        store.replace_doc_chunks("a", chunks("a", ["梅雨は六月の雨の季節", "梅雨前線 rain season"]))
        store.replace_doc_chunks("b", chunks("b", ["北京是中国的首都", "北京 rain"]))
        store.replace_doc_chunks("c", chunks("c", ["台風は夏に来る 雨 風"]))
        assert_exact(pg_url, store)
        n, total, df = kept(pg_url)
        assert n == 5 and df["北京"] == 2 and df["rain"] == 2
        # re-ingest of a changed document: one term gone, one new, one chunk fewer
        store.replace_doc_chunks("b", chunks("b", ["北京 首都 summer"]))
        assert_exact(pg_url, store)
        assert kept(pg_url)[2]["北京"] == 1 and kept(pg_url)[2]["rain"] == 1 and kept(pg_url)[2]["summer"] == 1
        # an identical re-ingest is a no-op: nothing moves
        before = kept(pg_url)
        store.replace_doc_chunks("b", chunks("b", ["北京 首都 summer"]))
        assert kept(pg_url) == before
        # retraction: its terms' counts fall, terms only it held disappear
        store.replace_doc_chunks("c", [])
        assert_exact(pg_url, store)
        assert "台風" not in kept(pg_url)[2]
        # a chunk turning RESTRICTED leaves the statistics with the search tables; and comes back
        store.replace_doc_chunks("a", chunks("a", ["梅雨は六月の雨の季節", "梅雨前線 rain season"],
                                             sensitivity="RESTRICTED"))
        assert_exact(pg_url, store)
        assert kept(pg_url)[0] == 1
        store.replace_doc_chunks("a", chunks("a", ["梅雨 rain"]))
        assert_exact(pg_url, store)
        # a tokenizer change rewrites the postings and recounts
        assert store.set_tokenizer("whitespace")
        assert_exact(pg_url, store)
        assert "北京" in kept(pg_url)[2] and kept(pg_url)[0] == 2
        store.replace_doc_chunks("a", [])
        store.replace_doc_chunks("b", [])
        assert kept(pg_url) == (0, 0, {})


_WORDS = ["梅雨", "雨", "季節", "北京", "首都", "rain", "season", "台風", "夏"]
_TEXTS = st.lists(st.sampled_from(_WORDS), min_size=0, max_size=8).map(" ".join)
_OPS = st.lists(
    st.tuples(st.sampled_from(["d0", "d1", "d2"]), st.lists(_TEXTS, min_size=0, max_size=3), st.booleans()),
    min_size=1, max_size=8,
)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_OPS)
def test_random_histories_keep_exact_statistics(schema_url: Any, ops: list[tuple[str, list[str], bool]]) -> None:  # noqa: F811
    """Any sequence of versions (an empty list retracts; ``True``: the version is RESTRICTED) leaves statistics
    equal to a recount and scores equal to a fresh BM25Retriever."""
    url = schema_url()
    with PostgresChunkStore(url) as store:
        for doc_id, texts, restricted in ops:
            extra = {"sensitivity": "RESTRICTED"} if restricted else {}
            store.replace_doc_chunks(doc_id, chunks(doc_id, texts, **extra))
        assert_exact(url, store)


@pytest.fixture
def v1_store(pg_url: str) -> Iterator[str]:
    """A store turned back into schema version 1: no statistics tables (and no writers or owners, schema 3)."""
    with PostgresChunkStore(pg_url) as store:
        store.replace_doc_chunks("a", chunks("a", ["梅雨は六月の雨の季節", "梅雨前線 rain season"]))
        store.replace_doc_chunks("b", chunks("b", ["北京是中国的首都", "北京 rain"]))
        store.replace_doc_chunks("b", chunks("b", ["北京 首都"]))
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DROP TABLE ragspine_corpus, ragspine_df")
        conn.execute("ALTER TABLE ragspine_doc_versions DROP COLUMN writer, DROP COLUMN owner")
        conn.execute("UPDATE ragspine_meta SET value = '1' WHERE key = 'schema_version'")
    yield pg_url


def test_a_version_1_store_is_migrated_when_opened_writable(v1_store: str) -> None:
    assert PG_SCHEMA_VERSION == 3
    with pytest.raises(StoreError, match="schema version 1 predates .* open the store writable once"):
        PostgresChunkStore(v1_store, read_only=True)
    with pytest.raises(StoreError, match="open the store writable once"):
        PostgresBM25Retriever(url=v1_store)
    with PostgresChunkStore(v1_store) as store:
        assert store.schema_version == PG_SCHEMA_VERSION
        assert kept(v1_store) == recounted(v1_store) and kept(v1_store)[0] == 3
        assert_exact(v1_store, store)
        store.replace_doc_chunks("a", [])
        assert_exact(v1_store, store)
    with PostgresChunkStore(v1_store, read_only=True) as store:  # opens now, and migrates nothing again
        assert store.schema_version == PG_SCHEMA_VERSION
        # chunks without a source_locator (not ingest's splitters'): attributed to the vector store by the migration
        assert store.doc_ids(owner="vectorstore") == ["b"] and store.doc_ids(owner="ingest") == []


def test_set_tokenizer_tokenizes_the_index_text(pg_url: str) -> None:
    """Regression: ``set_tokenizer`` rewrote the postings from ``page_content`` while ingest tokenizes
    ``metadata["index_text"]`` when present, so after a tokenizer change such chunks lost their header's terms
    (and BM25 no longer matched ``BM25Retriever``)."""
    docs = chunks("a", ["梅雨前線", "北京 rain"])
    docs[0].metadata["index_text"] = "気象庁 report\n梅雨前線"
    with PostgresChunkStore(pg_url) as store:
        store.replace_doc_chunks("a", docs)
        assert store.set_tokenizer("whitespace")
        assert "気象庁" in kept(pg_url)[2]
        assert_exact(pg_url, store)
        assert [d.metadata["chunk_id"] for d in PostgresBM25Retriever(url=pg_url).invoke("気象庁")] == ["a#0"]


class _Explaining:
    """A connection stand-in for ``PostgresDenseRetriever._search``: the distance query is EXPLAINed (in the
    same transaction, after the same ``SET LOCAL``\\ s) instead of run; everything else passes through."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self.adapters = conn.adapters  # register_vector: done already on ``conn``
        self.plan = ""

    def transaction(self) -> Any:
        return self.conn.transaction()

    def execute(self, query: Any, params: Any = None) -> Any:
        from psycopg import sql

        text = query if isinstance(query, str) else query.as_string(self.conn)
        if "<#>" not in text:
            return self.conn.execute(query, params)
        explain = "EXPLAIN " + query if isinstance(query, str) else sql.SQL("EXPLAIN ") + query
        self.plan = "\n".join(r[0] for r in self.conn.execute(explain, params).fetchall())
        return self.conn.execute("SELECT 1 WHERE false")


def test_hnsw_queries_walk_the_index(pg_url: str) -> None:
    """Regression: above the HNSW threshold the dense query never used the index — the planner estimated the join
    of vectors and searchable chunks on (chunk_id, content_hash) at one row, so scoring every vector and sorting
    looked cheaper (0.9 s per query at 100k chunks).  The plan must be an HNSW index scan, unfiltered and filtered."""
    import numpy as np

    from langchain_ragspine.backends.postgres.vectors import (
        ensure_hnsw_index,
        hnsw_index_name,
        register_vector,
    )
    from langchain_ragspine.backends.postgres.versions import add_documents
    from langchain_ragspine.embeddings import HashingEmbeddings
    from langchain_ragspine.filters.sql import filter_sql
    from langchain_ragspine.retrievers.postgres import PostgresDenseRetriever

    emb = HashingEmbeddings(64)
    docs = [Document(page_content=f"w{i % 50} w{i % 7} w{i % 13}",
                     metadata={"doc_id": f"n{i:04d}", "chunk_id": f"n{i:04d}#0", "group": "a" if i % 2 else "b"})
            for i in range(400)]
    add_documents(pg_url, docs, embedding=emb)
    with PostgresChunkStore(pg_url) as store:
        key = str(store.meta("vector_model_key"))
        assert ensure_hnsw_index(store.db, key, 64, threshold=100)
        store.analyze()
    dense = PostgresDenseRetriever(url=pg_url, embedding=emb, k=5)
    assert dense.uses_hnsw and len(dense.invoke("w3 w4")) == 5
    q = np.asarray(emb.embed_query("w3 w4"), dtype=np.float32)
    for flt in (None, {"group": "a"}):
        with PostgresChunkStore(pg_url, read_only=True) as store, store.db.connection() as conn:
            register_vector(conn)
            spy = _Explaining(conn)
            search = dense.backend_search
            search._vector_rows(spy, q, search.resolved_model_key, search.dimension, 5,
                                filter_sql(flt, row="s.chunk_row"), with_vectors=False)
        assert hnsw_index_name(key) in spy.plan, spy.plan
