"""No search of a PostgreSQL store holds a pooled connection for long (issue 25, section 6): a very long BM25 query,
a 100,000-value ``in`` list, a filter nested 2,000 levels deep, a filter of more than a million characters and the
trial's wide filters (30,000-part ``$or`` / ``$and``, 50,000 fields, six 9,999-value lists) are refused with the
file store's ``ValueError`` before a connection is taken; a call compiles its filter and its SQL once, and filters
at the limits mean what small ones do; the largest filters the limits allow fit one statement (PostgreSQL's 65,535 parameters) and are planned
as subplans, not as thousands of joins; every search runs under a statement timeout (``RAGSPINE_PG_STATEMENT_TIMEOUT``, or a
retriever's ``statement_timeout``) set for its own transaction only; the query is tokenized or embedded before the
connection is taken.

Before: a 10,000-character query held a connection for 15 s, 50,000 characters for 80 s (a 617-chunk store), and a
50,000-value ``in`` list a minute (a quadratic deduplication in the SQL compiler).  No timing is asserted here.

Needs the session's PostgreSQL (``pg_server`` in ``tests/conftest.py``); skips, saying why, without it.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_ragspine.arguments import DEFAULT_K
from langchain_ragspine.backends.postgres import search as pg_search
from langchain_ragspine.backends.postgres.chunk_store import get_pool
from langchain_ragspine.backends.postgres.versions import add_documents
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.errors import StoreError
from langchain_ragspine.filters import (
    MAX_FILTER_CHARS,
    MAX_FILTER_DEPTH,
    MAX_FILTER_NODES,
    MAX_FILTER_VALUES,
    UnknownFilterFieldWarning,
    matches,
)
from langchain_ragspine.filters.sql import SEMI_JOIN_LIMIT, filter_sql
from langchain_ragspine.retrievers import HybridRetriever
from langchain_ragspine.retrievers.bm25 import MAX_QUERY_CHARS
from langchain_ragspine.retrievers.postgres import PostgresBM25Retriever, PostgresDenseRetriever
from langchain_ragspine.vectorstores import PostgresVectorStore

EMB = HashingEmbeddings(32)
DOCS = [Document(page_content=f"tsuyu rainy season number {i}",
                 metadata={"doc_id": f"d{i}", "chunk_id": f"d{i}#0", "lang": "en" if i % 2 else "ja", "n": i})
        for i in range(6)]


@pytest.fixture
def store(pg_url: str) -> str:
    add_documents(pg_url, DOCS, embedding=EMB)
    return pg_url


def _requests(url: str) -> int:
    """Connections asked of the process's pool for ``url`` so far."""
    return int(get_pool(url).get_stats().get("requests_num", 0))


def _deep_filter(depth: int) -> dict[str, Any]:
    flt: dict[str, Any] = {"lang": "en"}
    for _ in range(depth):
        flt = {"$not": flt}
    return flt


def _retrievers(url: str, **kwargs: Any) -> list[Any]:
    return [PostgresBM25Retriever(url=url, k=3, **kwargs), PostgresDenseRetriever(url=url, embedding=EMB, k=3, **kwargs)]


def test_limits_are_checked_before_a_connection_is_taken(store: str) -> None:
    bm25, dense = _retrievers(store)
    long = "rainy season " * 30_000
    cases = [
        (bm25, long, None, f"a BM25 query may be at most {MAX_QUERY_CHARS:,}"),
        (bm25, "rainy", {"n": {"in": list(range(MAX_FILTER_VALUES + 1))}}, f"the limit is {MAX_FILTER_VALUES}"),
        (dense, "rainy", {"n": {"nin": list(range(MAX_FILTER_VALUES + 1))}}, f"the limit is {MAX_FILTER_VALUES}"),
        (bm25, "rainy", _deep_filter(2000), f"more than {MAX_FILTER_DEPTH} levels deep"),
        (dense, "rainy", _deep_filter(2000), f"more than {MAX_FILTER_DEPTH} levels deep"),
    ]
    for retriever, query, flt, message in cases:
        before = _requests(store)
        with pytest.raises(ValueError, match=re.escape(message)):
            retriever.invoke(query, filter=flt)
        assert _requests(store) == before  # refused without touching the pool
    at_limit = {"n": {"in": list(range(MAX_FILTER_VALUES))}}
    assert len(bm25.invoke("rainy season", filter=at_limit)) == 3
    assert len(dense.invoke("rainy season", filter=at_limit)) == 3
    vectors = PostgresVectorStore(store, embedding=EMB)
    with pytest.raises(ValueError, match="levels deep"):
        vectors.similarity_search("rainy", k=2, filter=_deep_filter(500))


#: the trial's wide filters (issue 25, 6e): each failed after 2-24 s, holding a pooled connection, with psycopg's
#: "number of parameters must be between 0 and 65535" (or, for the in lists, got around MAX_FILTER_VALUES)
WIDE = {
    "$or of 30k eq": ({"$or": [{"n": i} for i in range(30_000)]}, "MAX_FILTER_NODES"),
    "$and of 30k ne": ({"$and": [{"n": {"ne": i}} for i in range(30_000)]}, "MAX_FILTER_NODES"),
    "50k fields": ({f"f{i}": i for i in range(50_000)}, "MAX_FILTER_NODES"),
    "6 in lists of 9,999": ({"$or": [{"n": {"in": list(range(j * 10_000, j * 10_000 + 9_999))}} for j in range(6)]},
                            "MAX_FILTER_VALUES"),
}


@pytest.mark.parametrize("name", sorted(WIDE))
def test_a_wide_filter_is_refused_before_a_connection_is_taken(store: str, name: str) -> None:
    flt, limit = WIDE[name]
    vectors = PostgresVectorStore(store, embedding=EMB)
    calls = [*(lambda f, r=r: r.invoke("rainy season", filter=f) for r in _retrievers(store)),
             lambda f: vectors.similarity_search("rainy season", k=2, filter=f)]
    for call in calls:
        before = _requests(store)
        with pytest.raises(ValueError, match=re.escape(f"(filters.{limit}")):
            call(flt)
        assert _requests(store) == before


def _nodes(flt: Any) -> int:
    """Every key of every dict in ``flt`` (what MAX_FILTER_NODES counts)."""
    if isinstance(flt, dict):
        return len(flt) + sum(_nodes(v) for v in flt.values())
    if isinstance(flt, list):
        return sum(_nodes(v) for v in flt)
    return 0


def _largest_filters() -> dict[str, dict[str, Any]]:
    """Filters at the limits: ``in`` lists meeting all four stored kinds (one array each), half the nodes, the rest
    equalities with two forms, under a ``$not`` (a negated test also checks that the field is there: one parameter
    more; the SQL folds them into one ``in``, as the evaluator does); and MAX_FILTER_NODES fields ANDed (the
    planner's worst)."""
    lists = min(MAX_FILTER_VALUES // 3, MAX_FILTER_NODES // 2)
    parts: list[dict[str, Any]] = [{"n": [True, 100 + i, "2024-01-01"]} for i in range(lists)]
    parts += [{"n": str(3 + i)} for i in range(MAX_FILTER_NODES - 2 - lists)]  # n = 3, 4, 5 … : d3-d5 left out
    return {"negated lists": {"$not": {"$or": parts}}, "fields": {f"f{i}": str(i) for i in range(MAX_FILTER_NODES)}}


def test_the_largest_filters_fit_one_statement_and_match_the_evaluator(store: str) -> None:
    """PostgreSQL takes at most 65,535 parameters per statement: the limits imply it (at most 6 per node, and the
    search's own few), and a filter of that size runs, with the evaluator's answer."""
    bm25, dense = PostgresBM25Retriever(url=store, k=6), PostgresDenseRetriever(url=store, embedding=EMB, k=6)
    for name, flt in _largest_filters().items():
        assert _nodes(flt) == MAX_FILTER_NODES, name
        sql = filter_sql(flt, row="s.chunk_row")
        assert sql is not None and len(sql.params) <= 6 * MAX_FILTER_NODES < 65_535 - 16, name
        want = sorted(d.metadata["chunk_id"] for d in DOCS if matches(d.metadata, flt))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UnknownFilterFieldWarning)  # 10,000 fields no chunk has
            for retriever in (bm25, dense) if name == "negated lists" else (bm25,):
                got = sorted(d.metadata["chunk_id"] for d in retriever.invoke("rainy season", filter=flt))
                assert got == want, name
        assert want == (["d0#0", "d1#0", "d2#0"] if name == "negated lists" else []), name


def test_a_filter_of_many_fields_is_planned_as_subplans(store: str) -> None:
    """Regression: every ``EXISTS`` of an AND of fields became a semi-join for the planner, whose join search grew
    far faster than the filter (PostgreSQL 18: 100 fields 0.7 s to plan, 300 fields 34 s — cancelled by the
    statement timeout, holding a connection, long before the node limit).  Beyond ``SEMI_JOIN_LIMIT`` tests each
    stays a per-row subplan; a small filter keeps the planner's joins."""
    many = {f"f{i}": i for i in range(SEMI_JOIN_LIMIT + 24)}
    few = {"lang": "en", "n": {"gte": 1}}
    plans = {}
    for name, flt in (("many", many), ("few", few)):
        sql = filter_sql(flt, row="s.chunk_row")
        assert sql is not None
        with get_pool(store).connection() as conn:
            rows = conn.execute(f"EXPLAIN SELECT s.chunk_id FROM ragspine_search s WHERE {sql.sql}", sql.params)
            plans[name] = "\n".join(r[0] for r in rows.fetchall())
    assert "Semi Join" not in plans["many"] and "SubPlan" in plans["many"], plans["many"]
    assert "Semi Join" in plans["few"], plans["few"]


def test_a_search_running_longer_than_the_statement_timeout_is_cancelled(store, monkeypatch) -> None:
    slow = "SELECT r.* FROM (" + pg_search._BM25_SQL + ") r CROSS JOIN pg_sleep(1)"
    monkeypatch.setattr(pg_search, "_BM25_SQL", slow)
    monkeypatch.setenv("RAGSPINE_PG_STATEMENT_TIMEOUT", "0.2")
    retriever = PostgresBM25Retriever(url=store, k=3)
    with pytest.raises(StoreError, match=r"cancelled the search after 0\.2 s .*RAGSPINE_PG_STATEMENT_TIMEOUT"):
        retriever.invoke("rainy season")
    # the retriever's own setting wins; 0 is no limit (the slow statement completes)
    assert len(PostgresBM25Retriever(url=store, k=3, statement_timeout=0).invoke("rainy season")) == 3
    monkeypatch.undo()
    # the connection went back to the pool healthy, without the search's timeout
    assert len(PostgresBM25Retriever(url=store, k=3).invoke("rainy season")) == 3
    with get_pool(store).connection() as conn:
        assert conn.execute("SHOW statement_timeout").fetchone()[0] == "0"


def test_every_search_runs_under_the_statement_timeout(store, monkeypatch) -> None:
    seen: list[str] = []
    real = pg_search.PostgresSearch._vector_rows

    def spying(self: pg_search.PostgresSearch, conn: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(conn.execute("SHOW statement_timeout").fetchone()[0])
        return real(self, conn, *args, **kwargs)

    monkeypatch.setattr(pg_search.PostgresSearch, "_vector_rows", spying)
    dense = PostgresDenseRetriever(url=store, embedding=EMB, k=2)
    dense.invoke("rainy season")  # the default: 30 s
    monkeypatch.setenv("RAGSPINE_PG_STATEMENT_TIMEOUT", "2.5")
    dense.invoke("rainy season", filter={"lang": "en"})  # the setting is the default, read when the retriever is made
    later = PostgresDenseRetriever(url=store, embedding=EMB, k=2)
    later.invoke("rainy season", filter={"lang": "en"})
    later.search_by_vector(EMB.embed_query("rainy"), k=1)
    assert later.statement_timeout == 2.5 == PostgresDenseRetriever(url=store, embedding=EMB,
                                                                    statement_timeout=None).statement_timeout
    PostgresDenseRetriever(url=store, embedding=EMB, statement_timeout=0.0004).invoke("rainy")  # rounded up, not 0
    assert seen == ["30s", "30s", "2500ms", "2500ms", "1ms"]


def test_the_pg_settings_are_the_defaults_of_the_retrievers_arguments(store, monkeypatch) -> None:
    """RAGSPINE_PG_EF_SEARCH / _STATEMENT_TIMEOUT are read when a retriever is made, as its arguments' defaults
    (``None`` too); an argument wins."""
    assert PostgresDenseRetriever(url=store, embedding=EMB).ef_search == 100
    assert PostgresBM25Retriever(url=store).statement_timeout == 30.0
    monkeypatch.setenv("RAGSPINE_PG_EF_SEARCH", "64")
    monkeypatch.setenv("RAGSPINE_PG_STATEMENT_TIMEOUT", "7")
    dense = PostgresDenseRetriever(url=store, embedding=EMB, ef_search=None)
    assert (dense.ef_search, dense.statement_timeout) == (64, 7.0)
    assert PostgresDenseRetriever(url=store, embedding=EMB, ef_search=40, statement_timeout=0).ef_search == 40
    monkeypatch.setenv("RAGSPINE_PG_EF_SEARCH", "many")
    with pytest.raises(ValueError, match=r"^RAGSPINE_PG_EF_SEARCH='many': pg_ef_search must be an integer > 0"):
        PostgresDenseRetriever(url=store, embedding=EMB)


def test_a_bad_statement_timeout_is_an_error_naming_it(store, monkeypatch) -> None:
    monkeypatch.setenv("RAGSPINE_PG_STATEMENT_TIMEOUT", "30s")
    with pytest.raises(ValueError, match=r"^RAGSPINE_PG_STATEMENT_TIMEOUT='30s': pg_statement_timeout must be a "
                                         r"number of seconds from 0 \(no limit\)"):
        PostgresBM25Retriever(url=store, k=3)  # the setting is the default: read (and refused) when it is made
    assert PostgresBM25Retriever(url=store, k=3, statement_timeout=1).statement_timeout == 1.0  # an argument wins
    for bad in (-1, float("nan"), "soon", True):
        with pytest.raises(ValueError, match="statement_timeout must be a number of seconds"):
            PostgresBM25Retriever(url=store, statement_timeout=bad)


class _Watching(Embeddings):
    """Hashing embeddings that record how many connections the pool had handed out when a query was embedded."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.at: list[int] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return EMB.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self.at.append(_requests(self.url))
        return EMB.embed_query(text)


def test_the_query_is_embedded_before_a_connection_is_taken(store) -> None:
    watching = _Watching(store)
    dense = PostgresDenseRetriever(url=store, embedding=watching, k=2)
    before = _requests(store)
    assert len(dense.invoke("rainy season")) == 2
    assert watching.at == [before] and _requests(store) == before + 1  # one connection, taken after embedding


# -- filters just under the limits (issue 25, section 6: limits; the file store's side is test_filter_limits.py) ---
def test_a_filter_over_the_character_limit_is_refused_before_a_connection_is_taken(store: str) -> None:
    """Regression: a ``nin`` of 9,999 strings of 10,000 characters (100 MB, shipped with every statement) took 77 s
    per hybrid search; nothing bounded a filter's characters."""
    vectors = PostgresVectorStore(store, embedding=EMB)
    over = {"lang": {"nin": [f"v{i:04d}" * 2_000 for i in range(MAX_FILTER_CHARS // 10_000 + 1)]}}
    limit = re.escape(f"more than {MAX_FILTER_CHARS} characters in its strings (filters.MAX_FILTER_CHARS")
    hybrid = HybridRetriever(retrievers=_retrievers(store))
    calls = [*(lambda f, r=r: r.invoke("rainy season", filter=f) for r in [*_retrievers(store), hybrid]),
             lambda f: vectors.similarity_search("rainy season", k=2, filter=f)]
    for call in calls:
        before = _requests(store)
        with pytest.raises(ValueError, match=limit):
            call(over)
        assert _requests(store) == before
    under = {"lang": {"nin": [f"v{i:04d}" * 2_000 for i in range(MAX_FILTER_CHARS // 10_000 - 1)]}}
    assert len(hybrid.invoke("rainy season", filter=under)) == DEFAULT_K  # the hybrid's default k


class _Counts:
    """Field conditions compiled (``filters._compile_condition``) and turned into SQL (``sql._condition_test``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from langchain_ragspine import filters
        from langchain_ragspine.filters import sql

        self.compiled = self.sql = 0
        real_compile, real_sql = filters._compile_condition, sql._condition_test

        def compile_(*args: Any) -> Any:
            self.compiled += 1
            return real_compile(*args)

        def sql_(*args: Any) -> Any:
            self.sql += 1
            return real_sql(*args)

        monkeypatch.setattr(filters, "_compile_condition", compile_)
        monkeypatch.setattr(sql, "_condition_test", sql_)


def test_a_hybrid_call_compiles_its_filter_and_its_sql_once(store: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: a PostgreSQL hybrid call compiled its filter 5 times and built its SQL twice (once per channel);
    now once each, whatever the number of channels."""
    from langchain_ragspine.pipeline.sources import open_retriever

    hybrid = open_retriever(store, mode="hybrid", embedding=EMB, k=6)
    counts = _Counts(monkeypatch)
    docs = hybrid.invoke("rainy season", filter={"lang": "en", "n": {"gte": 2}})
    assert sorted(d.metadata["n"] for d in docs) == [3, 5]
    assert (counts.compiled, counts.sql) == (2, 2)


def test_big_filters_give_the_chunks_of_the_small_ones(store: str) -> None:
    """The equalities of one field folded into one ``= ANY`` test (``ne`` / ``nin`` under an ``$and``) and filters
    at the node limit mean what the small filters do, as in the evaluator."""
    m = (MAX_FILTER_NODES - 1) // 2
    cases = [
        ({"$and": [{"n": {"ne": i}} for i in range(100, 100 + m - 1)] + [{"n": {"ne": 3}}]}, {"n": {"ne": 3}}),
        ({"$or": [{"n": i} for i in range(100, 100 + MAX_FILTER_NODES - 3)] + [{"n": 2}, {"lang": "ja"}]},
         {"$or": [{"n": 2}, {"lang": "ja"}]}),
        ({"n": {"nin": [*range(100, 5_100), 1, 4]}}, {"n": {"nin": [1, 4]}}),
        ({"$not": {"$or": [{"n": {"ne": 4}} for _ in range(m)]}}, {"n": 4}),
        ({"lang": "en", **{f"f{i}": "x" for i in range(MAX_FILTER_NODES - 1)}}, {"lang": "none"}),
        ({"$or": [{"$and": [{"n": i}, {"lang": "en" if i % 2 else "ja"}]} for i in range(300)]}, {"n": {"lte": 5}}),
    ]
    channels = [PostgresBM25Retriever(url=store, k=6), PostgresDenseRetriever(url=store, embedding=EMB, k=6)]
    retrievers = [*channels, HybridRetriever(retrievers=channels, k=6)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnknownFilterFieldWarning)
        for big, small in cases:
            want = sorted(d.metadata["chunk_id"] for d in DOCS if matches(d.metadata, small))
            assert sorted(d.metadata["chunk_id"] for d in DOCS if matches(d.metadata, big)) == want
            for retriever in retrievers:
                got = sorted(d.metadata["chunk_id"] for d in retriever.invoke("rainy season", filter=big))
                assert got == want, (type(retriever).__name__, small)
