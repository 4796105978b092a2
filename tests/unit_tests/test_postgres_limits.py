"""No search of a PostgreSQL store holds a pooled connection for long (issue 25, section 6): a very long BM25 query,
a 100,000-value ``in`` list and a filter nested 2,000 levels deep are refused with the file store's ``ValueError``
before a connection is taken; every search runs under a statement timeout (``RAGSPINE_PG_STATEMENT_TIMEOUT``, or a
retriever's ``statement_timeout``) set for its own transaction only; the query is tokenized or embedded before the
connection is taken.

Before: a 10,000-character query held a connection for 15 s, 50,000 characters for 80 s (a 617-chunk store), and a
50,000-value ``in`` list a minute (a quadratic deduplication in the SQL compiler).  No timing is asserted here.

Needs the session's PostgreSQL (``pg_server`` in ``tests/conftest.py``); skips, saying why, without it.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.errors import StoreError
from langchain_ragspine.filters import MAX_FILTER_DEPTH, MAX_FILTER_VALUES
from langchain_ragspine.postgres import add_documents
from langchain_ragspine.retrievers import postgres as pg_retrievers
from langchain_ragspine.retrievers.bm25 import MAX_QUERY_CHARS
from langchain_ragspine.retrievers.postgres import PostgresBM25Retriever, PostgresDenseRetriever
from langchain_ragspine.stores.postgres import get_pool
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


def test_a_search_running_longer_than_the_statement_timeout_is_cancelled(store, monkeypatch) -> None:
    slow = "SELECT r.* FROM (" + pg_retrievers._BM25_SQL + ") r CROSS JOIN pg_sleep(1)"
    monkeypatch.setattr(pg_retrievers, "_BM25_SQL", slow)
    monkeypatch.setenv("RAGSPINE_PG_STATEMENT_TIMEOUT", "0.2")
    retriever = PostgresBM25Retriever(url=store, k=3)
    with pytest.raises(StoreError, match=r"cancelled the search after 0\.2 s .*RAGSPINE_PG_STATEMENT_TIMEOUT"):
        retriever.invoke("rainy season")
    # the retriever's own setting wins; 0 is no limit (the slow statement completes)
    assert len(PostgresBM25Retriever(url=store, k=3, statement_timeout=0).invoke("rainy season")) == 3
    monkeypatch.undo()
    # the connection went back to the pool healthy, without the search's timeout
    assert len(retriever.invoke("rainy season")) == 3
    with get_pool(store).connection() as conn:
        assert conn.execute("SHOW statement_timeout").fetchone()[0] == "0"


def test_every_search_runs_under_the_statement_timeout(store, monkeypatch) -> None:
    seen: list[str] = []
    real = PostgresDenseRetriever._search

    def spying(self: PostgresDenseRetriever, conn: Any, *args: Any) -> Any:
        seen.append(conn.execute("SHOW statement_timeout").fetchone()[0])
        return real(self, conn, *args)

    monkeypatch.setattr(PostgresDenseRetriever, "_search", spying)
    dense = PostgresDenseRetriever(url=store, embedding=EMB, k=2)
    dense.invoke("rainy season")  # the default: 30 s
    monkeypatch.setenv("RAGSPINE_PG_STATEMENT_TIMEOUT", "2.5")
    dense.invoke("rainy season", filter={"lang": "en"})  # read afresh at each search
    dense.search_by_vector(EMB.embed_query("rainy"), k=1)
    PostgresDenseRetriever(url=store, embedding=EMB, statement_timeout=0.0004).invoke("rainy")  # rounded up, not 0
    assert seen == ["30s", "2500ms", "2500ms", "1ms"]


def test_a_bad_statement_timeout_is_an_error_naming_it(store, monkeypatch) -> None:
    retriever = PostgresBM25Retriever(url=store, k=3)
    monkeypatch.setenv("RAGSPINE_PG_STATEMENT_TIMEOUT", "30s")
    with pytest.raises(ValueError, match=r"^RAGSPINE_PG_STATEMENT_TIMEOUT='30s': pg_statement_timeout must be a "
                                         r"number of seconds from 0 \(no limit\)"):
        retriever.invoke("rainy")
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
