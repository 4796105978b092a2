"""Backend parity of retrieval (issue 17): BM25 scores computed in PostgreSQL equal ``BM25Retriever``'s (bm25s) on
the same chunks; one filter table — the contracts table of ``test_filter_contracts.py`` plus more typed cases, and
random filters — gives the same chunks in both backends; the dense channel (pgvector) ranks as ``DenseRetriever``;
hybrid through the mode registry is the same fusion; an HNSW index with a selective filter still returns ``k``;
RESTRICTED chunks never come back.

Needs the session's PostgreSQL (``pg_server`` in ``tests/conftest.py``); skips, saying why, without it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import math
import traceback
import uuid
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from langchain_ragspine.arguments import DEFAULT_K
from langchain_ragspine.backends.postgres.chunk_store import PostgresChunkStore, close_pools
from langchain_ragspine.backends.postgres.search import PostgresSearch
from langchain_ragspine.backends.postgres.vectors import ensure_hnsw_index
from langchain_ragspine.backends.postgres.versions import add_documents
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.errors import StaleIndexWarning
from langchain_ragspine.filters import UnknownFilterFieldWarning, matches
from langchain_ragspine.pipeline.modes import DocumentsSource
from langchain_ragspine.pipeline.plan import build_retriever
from langchain_ragspine.pipeline.sources import PostgresSource, search
from langchain_ragspine.retrievers import BM25Retriever, DenseRetriever
from langchain_ragspine.retrievers.postgres import PostgresBM25Retriever, PostgresDenseRetriever
from tests.unit_tests.filters.test_filter_contracts import DOCS, QUERY, TABLE

EMB = HashingEmbeddings(64)


def load(url: str, docs: list[Document], *, embedding: Any = None) -> list[Document]:
    """Write ``docs`` into the store at ``url`` and return the stored chunks as retrievers see them (the file
    store's retrievers are built from exactly these)."""
    add_documents(url, docs, embedding=embedding)
    with PostgresChunkStore(url, read_only=True) as store:
        return [c.to_document() for c in store.iter_chunks()]


def hits(docs: list[Document], channel: str) -> list[tuple[str, float]]:
    return [(d.metadata["chunk_id"], d.metadata["scores"][channel]) for d in docs]


def assert_same_ranking(got: list[tuple[str, float]], want: list[tuple[str, float]], tol: float = 1e-6) -> None:
    assert [c for c, _ in got] == [c for c, _ in want]
    for (_, a), (_, b) in zip(got, want, strict=True):
        assert abs(a - b) <= tol, (got, want)


@pytest.fixture
def schema_url(pg_server: str) -> Iterator[Any]:
    """A factory of fresh store URLs (one schema each) for tests that need several; all dropped afterwards."""
    made: list[str] = []

    def new() -> str:
        close_pools()  # one hypothesis example per schema: the previous example's pool is done with
        schema = f"r_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        made.append(schema)
        return f"{pg_server}&options=-csearch_path%3D{schema},public"

    yield new
    close_pools()
    with psycopg.connect(pg_server, autocommit=True) as conn:
        for schema in made:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


# -- BM25: the same scores ----------------------------------------------------------------------------------------
CORPUS = [
    ("ja1", "梅雨は六月から七月にかけて続く雨の季節。梅雨前線が日本列島に停滞する。"),
    ("ja2", "台風は夏から秋にかけて日本に接近する。雨と風の被害が出る。"),
    ("ja3", "梅雨 梅雨 梅雨"),
    ("zh1", "北京是中国的首都。北京的冬天很冷。"),
    ("zh2", "上海是中國最大的城市之一。"),  # Traditional: folded to Simplified by the auto tokenizer
    ("en1", "The rainy season in Japan starts in June; the rain front stalls over the islands."),
    ("en2", "Typhoons approach Japan from summer to autumn, bringing rain and wind."),
    ("empty", "。、"),
    ("sec", "極秘: 梅雨 北京 rain"),
]
QUERIES = ["梅雨の季節", "北京", "上海是中国的城市", "rain Japan", "雨 雨 雨", "台風 rain 北京 梅雨", "nothing here",
           "。", "the", "Japan's rainy season starts in June"]


def corpus_docs() -> list[Document]:
    return [
        Document(page_content=text, metadata={"doc_id": doc_id, "chunk_id": f"{doc_id}#0",
                                              "sensitivity": "RESTRICTED" if doc_id == "sec" else "PUBLIC"})
        for doc_id, text in CORPUS
    ]


def test_bm25_scores_equal_bm25retriever(pg_url: str) -> None:
    stored = load(pg_url, corpus_docs())
    ours = BM25Retriever.from_documents(stored, k=20)
    pg = PostgresBM25Retriever(url=pg_url, k=20)
    assert pg.tokenizer == "auto"
    for q in QUERIES:
        want = hits(ours.invoke(q), "bm25")
        got = hits(pg.invoke(q), "bm25")
        assert_same_ranking(got, want)
        assert got == want  # in fact the same float32 numbers
        for k in (1, 2, 3):
            assert hits(pg.invoke(q, k=k), "bm25") == want[:k]
    assert pg.invoke("梅雨") and all("sec" not in c for c, _ in hits(pg.invoke("梅雨 北京 rain"), "bm25"))


def test_bm25_score_threshold_drops_the_same_chunks_in_both_backends(pg_url: str) -> None:
    stored = load(pg_url, corpus_docs())
    ours = BM25Retriever.from_documents(stored, k=20)
    pg = PostgresBM25Retriever(url=pg_url, k=20)
    for q in QUERIES:
        want = hits(ours.invoke(q), "bm25")
        for _, score in want:  # at each result's own score, and at the next double above it
            for t in (score, float(np.nextafter(score, math.inf))):
                kept = hits(ours.invoke(q, score_threshold=t), "bm25")
                assert kept == [h for h in want if h[1] >= t]
                assert hits(pg.invoke(q, score_threshold=t), "bm25") == kept
                assert hits(PostgresBM25Retriever(url=pg_url, k=2, score_threshold=t).invoke(q), "bm25") == kept[:2]
    with pytest.raises(ValueError, match="raw BM25 score"):
        pg.invoke("梅雨", score_threshold=-1)
    with pytest.raises(TypeError, match="score_threshold"):
        PostgresBM25Retriever(url=pg_url, score_threshold="1")


_WORDS = ["梅雨", "雨", "季節", "北京", "首都", "城市", "rain", "season", "Japan", "the", "台風", "風", "夏"]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    texts=st.lists(st.lists(st.sampled_from(_WORDS), min_size=0, max_size=12).map(" ".join), min_size=1, max_size=12),
    queries=st.lists(st.lists(st.sampled_from([*_WORDS, "unknown"]), min_size=1, max_size=5).map(" ".join),
                     min_size=1, max_size=4),
    k=st.integers(1, 6),
)
def test_bm25_scores_equal_on_random_corpora(schema_url: Any, texts: list[str], queries: list[str], k: int) -> None:
    url = schema_url()
    docs = [Document(page_content=t, metadata={"doc_id": f"d{i:02d}", "chunk_id": f"d{i:02d}#0"})
            for i, t in enumerate(texts)]
    stored = load(url, docs)
    ours = BM25Retriever.from_documents(stored, k=k)
    pg = PostgresBM25Retriever(url=url, k=k)
    for q in queries:
        assert_same_ranking(hits(pg.invoke(q), "bm25"), hits(ours.invoke(q), "bm25"))


def test_bm25_k1_b_and_the_whitespace_tokenizer(pg_url: str) -> None:
    stored = load(pg_url, corpus_docs())
    with PostgresChunkStore(pg_url) as store:
        store.set_tokenizer("whitespace")
    for k1, b in ((1.2, 0.75), (0.9, 0.4), (2.0, 1.0), (1.5, 0.0)):
        ours = BM25Retriever.from_documents(stored, k=10, tokenizer="whitespace", k1=k1, b=b)
        pg = PostgresBM25Retriever(url=pg_url, k=10, k1=k1, b=b)
        for q in ("梅雨 梅雨", "rain Japan", "the rainy season"):
            assert hits(pg.invoke(q), "bm25") == hits(ours.invoke(q), "bm25"), (k1, b, q)


# -- filters: one table, both backends ------------------------------------------------------------------------------
# More typed cases beside the contracts table, each checked against the Python evaluator (the oracle) as well.
EXTRA_DOCS = [
    Document(page_content="梅雨 前線 の 報告 e0", metadata={"doc_id": "e0", "chunk_id": "e0#0", "score": 0.1,
             "big": 2**70, "flags": [True, False], "when": "2026-11-01T10:00:00+09:00", "note": None,
             "tags": ["a", "b", "a"], "name": "Zebra"}),
    Document(page_content="梅雨 前線 の 報告 e1", metadata={"doc_id": "e1", "chunk_id": "e1#0", "score": 0.30000000000000004,
             "big": float(2**70), "flags": [False], "when": "2026-11-01", "note": "", "tags": [],
             "name": "apple"}),
    Document(page_content="梅雨 前線 の 報告 e2", metadata={"doc_id": "e2", "chunk_id": "e2#0", "score": math.inf,
             "big": "1180591620717411303424", "when": "not a date", "name": "Äpfel", "nested": {"x": 1}}),
    Document(page_content="梅雨 前線 の 報告 e3", metadata={"doc_id": "e3", "chunk_id": "e3#0", "score": -1,
             "flags": True, "name": "日本", "tags": "a"}),
]
EXTRA_FILTERS: list[dict[str, Any]] = [
    {"score": 0.1}, {"score": {"gt": 0.1}}, {"score": {"gte": "0.30000000000000004"}}, {"score": {"lt": 0}},
    {"score": {"between": [0, 1]}}, {"score": {"gt": 1e308}}, {"big": 2**70}, {"big": {"gte": 2**70}},
    {"big": "1180591620717411303424"}, {"flags": True}, {"flags": {"ne": True}}, {"flags": {"nin": [False]}},
    {"flags": "yes"}, {"when": {"gte": "2026-11-01"}}, {"when": {"lt": "2026-11-01T02:00:00+01:00"}},
    {"when": "not a date"}, {"note": {"ne": "x"}}, {"note": ""}, {"tags": {"ne": "a"}}, {"tags": ["b", "z"]},
    {"tags": {"nin": ["z"]}}, {"name": {"gt": "Zebra"}}, {"name": {"lt": "apple"}}, {"name": {"between": ["A", "a"]}},
    {"nested": {"ne": 1}}, {"missing": {"ne": 1}}, {"$not": {"missing": 1}},
    {"$or": [{"missing": 1}, {"name": "日本"}]}, {"$not": {"$and": [{"missing": 1}, {"name": "x"}]}},
    {"$not": {"$or": [{"missing": 1}, {"name": "日本"}]}}, {"score": {"$not": {"gt": 0}}},
    {"$and": [{"score": {"gte": -1}}, {"$not": {"tags": "a"}}]}, {"name": {"in": ["apple", "日本"], "ne": "日本"}},
]


def _expected(stored: list[Document], flt: dict[str, Any]) -> set[str]:
    return {d.metadata["doc_id"] for d in stored if matches(d.metadata, flt)}


def _ids(docs: list[Document]) -> set[str]:
    return {d.metadata["doc_id"] for d in docs}


@pytest.fixture
def filter_stores(pg_url: str) -> Iterator[dict[str, Any]]:
    stored = load(pg_url, [*DOCS, *EXTRA_DOCS], embedding=EMB)
    mem = DocumentsSource(stored, embedding=EMB)
    # add_documents records no embedding spec (the caller holds the model), so the source is given it.
    with PostgresSource(pg_url, embedding=EMB) as source:
        yield {
            "stored": stored,
            "pg": {"bm25": source.bm25(k=20), "dense": source.dense(k=20, required=True, mode="vector"),
                   "hybrid": build_retriever("hybrid", source, k=20)},
            "file": {"bm25": mem.bm25(k=20), "dense": mem.dense(k=20, required=True, mode="vector"),
                     "hybrid": build_retriever("hybrid", mem, k=20)},
        }


def test_filter_table_in_both_backends(filter_stores: dict[str, Any]) -> None:
    stored = filter_stores["stored"]
    contracts = {d.metadata["doc_id"] for d in DOCS}
    rows = [(f, e) for f, e in TABLE] + [(f, _expected(stored, f)) for f in EXTRA_FILTERS]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnknownFilterFieldWarning)
        for flt, expected in rows:
            oracle = _expected(stored, flt)
            if flt in [f for f, _ in TABLE]:
                assert oracle & contracts == expected, flt  # the contracts table's own answer
            for name in ("bm25", "dense", "hybrid"):
                file_ids = _ids(filter_stores["file"][name].invoke(QUERY, filter=flt))
                pg_ids = _ids(filter_stores["pg"][name].invoke(QUERY, filter=flt))
                assert pg_ids == file_ids == oracle, (name, flt)


async def test_filter_table_async_in_postgres(filter_stores: dict[str, Any]) -> None:
    for flt, expected in TABLE:
        for name, retriever in filter_stores["pg"].items():
            got = await retriever.ainvoke(QUERY, filter=flt)
            assert _ids(got) & {d.metadata["doc_id"] for d in DOCS} == expected, (name, flt)


async def test_ainvoke_forwards_k_in_a_worker_thread(pg_url: str) -> None:
    # the shared async path (SyncBackedRetriever, run_async_in_executor=True) keeps k, filter and the strict check
    load(pg_url, corpus_docs(), embedding=EMB)
    for r in (PostgresBM25Retriever(url=pg_url), PostgresDenseRetriever(url=pg_url, embedding=EMB)):
        assert type(r).run_async_in_executor
        want = r.invoke("梅雨", k=2)
        assert len(want) == 2
        assert await r.ainvoke("梅雨", k=2) == want
        assert [d for d, _ in r.search("梅雨", k=2)] == want  # one _get_relevant_documents over each search()
        with pytest.raises(TypeError, match="unexpected keyword"):
            await r.ainvoke("梅雨", fetch_k=3)


def test_own_filter_is_anded_with_the_call_filter(pg_url: str) -> None:
    load(pg_url, list(DOCS))
    own = PostgresBM25Retriever(url=pg_url, k=10, filter={"dept": "a"})
    assert _ids(own.invoke(QUERY)) == {"d0", "d1"}
    assert own.invoke(QUERY, filter={"dept": "b"}) == []
    assert _ids(own.invoke(QUERY, filter={"$or": [{"dept": "b"}, {"draft": False}]})) == {"d0"}


def test_filter_errors_and_warnings_match_the_evaluator(pg_url: str) -> None:
    stored = load(pg_url, list(DOCS))
    pg = PostgresBM25Retriever(url=pg_url, k=10)
    ours = BM25Retriever.from_documents(stored, k=10)
    for bad in ({"year": {"bogus": 1}}, {"year": {"between": [1]}}, {"": 1}, {"$or": []}, {"$nor": [{"a": 1}]}):
        errors = []
        for r in (ours, pg):
            with pytest.raises(ValueError) as info:
                r.invoke(QUERY, filter=bad)
            errors.append(str(info.value))
        assert errors[0] == errors[1]
    with pytest.raises(ValueError, match="not a date this filter reads"):
        pg.invoke(QUERY, filter={"updated": {"gt": "2024/01/01"}})
    with pytest.raises(ValueError, match="not a date this filter reads"):
        pg.invoke("", filter={"updated": {"gt": "2024/01/01"}})  # checked before an empty query returns []
    with pytest.warns(UnknownFilterFieldWarning, match="closest known fields: 'dept'") as record:
        assert pg.invoke(QUERY, filter={"dpet": "a"}) == []
    with warnings.catch_warnings():  # once per process for a field and the store's fields, not every call
        warnings.simplefilter("error", UnknownFilterFieldWarning)
        assert pg.invoke(QUERY, filter={"dpet": "a"}) == []
    with pytest.warns(UnknownFilterFieldWarning) as direct:
        assert pg.search(QUERY, filter={"dpte": "a"}) == []
    # attributed to the caller's line (here), not to a frame inside the package or langchain_core
    assert [w.filename for w in (*record, *direct)] == [__file__, __file__]
    with pytest.raises(TypeError):
        pg.invoke(QUERY, filter="dept=a")  # type: ignore[arg-type]


_VALUES = st.one_of(
    st.sampled_from(["a", "b", "2020", "0098231", "1.10", "true", "no", "2024-01-01", "2025-06-30T10:00:00+09:00",
                     "2024/01/01", "", "日本"]),
    st.integers(-3, 2030), st.sampled_from([0.5, 1.0, 2020.0, -0.0]), st.booleans(), st.none(),
    st.lists(st.sampled_from(["a", "b", "2020", 1, True, "2024-01-01"]), max_size=3),
)
_OPERANDS = st.one_of(
    st.sampled_from(["a", "2020", "98231", "1.1", "false", "2024-01-01", "2024-06-30T00:00:00Z", "2024/01/01", "日本"]),
    st.integers(-3, 2030), st.booleans(), st.sampled_from([0.5, 2020.0]),
)
_FIELD_COND = st.one_of(
    _OPERANDS,
    st.lists(_OPERANDS, min_size=1, max_size=3),
    st.fixed_dictionaries({}, optional={"eq": _OPERANDS, "ne": _OPERANDS, "gt": _OPERANDS, "lte": _OPERANDS}).filter(bool),
    st.builds(lambda a, b: {"between": [a, b]}, _OPERANDS, _OPERANDS),
    st.builds(lambda v: {"nin": v}, st.lists(_OPERANDS, min_size=1, max_size=2)),
    st.builds(lambda v: {"not": {"eq": v}}, _OPERANDS),
)
_LEAF = st.builds(lambda f, c: {f: c}, st.sampled_from(["x", "y", "missing"]), _FIELD_COND)
_FILTERS = st.recursive(
    _LEAF,
    lambda inner: st.one_of(
        st.builds(lambda parts: {"$and": parts}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda parts: {"$or": parts}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda part: {"$not": part}, inner),
    ),
    max_leaves=4,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    metas=st.lists(st.fixed_dictionaries({}, optional={"x": _VALUES, "y": _VALUES}), min_size=1, max_size=6),
    filters=st.lists(_FILTERS, min_size=1, max_size=6),
)
def test_random_filters_match_the_evaluator(schema_url: Any, metas: list[dict[str, Any]], filters: list[Any]) -> None:
    """SQL filters select exactly the chunks the Python evaluator selects; where the evaluator raises, so does SQL;
    SQL may raise the date error where the evaluator short-circuited past a stored date (documented)."""
    url = schema_url()
    docs = [Document(page_content=f"梅雨 {i}", metadata={"doc_id": f"m{i}", "chunk_id": f"m{i}#0", **md})
            for i, md in enumerate(metas)]
    stored = load(url, docs)
    pg = PostgresBM25Retriever(url=url, k=50)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnknownFilterFieldWarning)
        for flt in filters:
            try:
                expected: set[str] | None = _expected(stored, flt)
            except ValueError:
                expected = None
            try:
                got: set[str] | None = _ids(pg.invoke("梅雨", filter=flt))
            except ValueError as e:
                assert "not a date this filter reads" in str(e) or expected is None, (flt, e)
                got = None
            if expected is None:
                assert got is None, flt
            elif got is not None:
                assert got == expected, (flt, json.dumps([d.metadata for d in stored], default=str))


# -- dense and hybrid -----------------------------------------------------------------------------------------------
def test_dense_ranks_as_dense_retriever(pg_url: str) -> None:
    docs = corpus_docs() + [Document(page_content="   ", metadata={"doc_id": "blank", "chunk_id": "blank#0"})]
    stored = load(pg_url, docs, embedding=EMB)
    ours = DenseRetriever.from_documents(stored, EMB, k=20)
    pg = PostgresDenseRetriever(url=pg_url, embedding=EMB, k=20)
    assert not pg.uses_hnsw and pg.resolved_model_key == ours.resolved_model_key
    for q in QUERIES:
        assert_same_ranking(hits(pg.invoke(q), "vector"), hits(ours.invoke(q), "vector"))
        assert_same_ranking(hits(pg.invoke(q, k=2), "vector"), hits(ours.invoke(q, k=2), "vector"))
    assert all(d.metadata["chunk_id"] not in ("sec#0", "blank#0") for d in pg.invoke("梅雨 rain", k=50))
    vec = np.asarray(EMB.embed_query("北京"), dtype=np.float32)
    got = pg.search_by_vector(vec, k=3)
    assert [d.metadata["chunk_id"] for d, _ in got] == [ours.docs[i].metadata["chunk_id"] for i, _ in
                                                        ours.search_by_vector(vec, k=3)]
    with pytest.raises(ValueError, match="shape"):
        pg.search_by_vector(vec[:10])
    assert pg.invoke("   ") == []


def test_hybrid_and_auto_modes_fuse_as_in_memory(pg_url: str) -> None:
    stored = load(pg_url, corpus_docs(), embedding=EMB)
    mem = DocumentsSource(stored, embedding=EMB)
    with PostgresSource(pg_url, embedding=EMB) as source:
        for mode in ("hybrid", "auto", "bm25", "vector"):
            ours = build_retriever(mode, mem, k=5)
            pg = build_retriever(mode, source, k=5)
            for q in QUERIES:
                assert_same_ranking(hits(pg.invoke(q), "fused"), hits(ours.invoke(q), "fused"))
        rrf = build_retriever("hybrid", source, k=5, fusion="rrf")
        assert_same_ranking(hits(rrf.invoke("梅雨"), "fused"),
                            hits(build_retriever("hybrid", mem, k=5, fusion="rrf").invoke("梅雨"), "fused"))


def test_restricted_never_returned_through_any_mode(pg_url: str) -> None:
    load(pg_url, corpus_docs(), embedding=EMB)
    with PostgresSource(pg_url, embedding=EMB) as source:
        for mode in ("hybrid", "bm25", "vector"):
            r = build_retriever(mode, source, k=50)
            for q in ("極秘", "梅雨 北京 rain", "sec"):
                got = r.invoke(q)
                assert all("極秘" not in d.page_content for d in got), mode
                assert all("極秘" not in d.page_content for d in search(r, q, k=50))


def test_hnsw_with_a_selective_filter_still_returns_k(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """2,000 chunks behind an HNSW index; a filter matching 1% (20) of them; k = 10 comes back, with exact scores,
    best first.  Without pgvector's iterative scan the same query returns fewer (the test can fail)."""
    rng = np.random.default_rng(7)
    words = [f"w{i}" for i in range(300)]
    docs = [
        Document(page_content=" ".join(rng.choice(words, 8)),
                 metadata={"doc_id": f"n{i:04d}", "chunk_id": f"n{i:04d}#0", "group": "rare" if i % 100 == 0 else "common"})
        for i in range(2000)
    ]
    stored = load(pg_url, docs, embedding=EMB)
    with PostgresChunkStore(pg_url) as store:
        assert ensure_hnsw_index(store.db, str(store.meta("vector_model_key")), 64, threshold=1000)
    # With honest statistics the planner answers a 1% filter exactly (filter first, then sort 20 rows); a planner
    # that misjudges the filter walks the index instead.  ``enable_sort = off`` makes it walk the index here.
    walk_url = pg_url + "%20-cenable_sort%3Doff"
    pg = PostgresDenseRetriever(url=walk_url, embedding=EMB, k=10, ef_search=40)
    assert pg.uses_hnsw  # (the last assertion shows the index is walked: an exact plan always finds 10 of 20)
    exact = DenseRetriever.from_documents(stored, EMB, k=10)
    flt = {"group": "rare"}
    queries = [docs[i].page_content for i in (0, 700, 1900)]  # the texts of three rare chunks
    for q, own in zip(queries, ("n0000#0", "n0700#0", "n1900#0"), strict=True):
        got = pg.invoke(q, filter=flt)
        assert len(got) == 10 and all(d.metadata["group"] == "rare" for d in got)
        # Approximate search (the order among the other, near-orthogonal rare chunks may differ from the exact
        # one): the chunk itself first, the exact cosines, best first.
        assert got[0].metadata["chunk_id"] == own
        want = {d.metadata["chunk_id"]: d.metadata["scores"]["vector"] for d in exact.invoke(q, filter=flt, k=20)}
        scores = [d.metadata["scores"]["vector"] for d in got]
        assert scores == sorted(scores, reverse=True)
        assert all(abs(want[d.metadata["chunk_id"]] - d.metadata["scores"]["vector"]) < 1e-5 for d in got)
    monkeypatch.setattr(PostgresSearch, "ITERATIVE_SCAN", "off")
    assert min(len(pg.invoke(q, filter=flt)) for q in queries) < 10


def test_bad_k_and_arguments(pg_url: str) -> None:
    load(pg_url, corpus_docs(), embedding=EMB)
    for r in (PostgresBM25Retriever(url=pg_url), PostgresDenseRetriever(url=pg_url, embedding=EMB)):
        assert r.k == DEFAULT_K
        for bad in ("3", 2.0, 0, True):
            with pytest.raises((TypeError, ValueError), match=r"\bk must be an int >= 1"):
                r.invoke("梅雨", k=bad)
        with pytest.raises(TypeError, match="unexpected keyword"):
            r.invoke("梅雨", fetch_k=3)
    with pytest.raises(ValueError, match="k1"):
        PostgresBM25Retriever(url=pg_url, k1=-1)


def test_a_reassigned_or_copied_field_is_what_the_next_search_uses(pg_url: str) -> None:
    """Kept through the move of the SQL into backends.postgres.search (made once per retriever): ``k1`` / ``b`` /
    ``ef_search`` / ``statement_timeout`` are read at each search, so an assignment or a
    ``model_copy(update=…)`` is what the next search runs with — the same scores as a retriever made with them."""
    stored = load(pg_url, corpus_docs(), embedding=EMB)
    r = PostgresBM25Retriever(url=pg_url, k=5)
    flat = PostgresBM25Retriever(url=pg_url, k=5, k1=0.0, b=0.0)
    before = hits(r.invoke("梅雨 六月"), "bm25")
    assert before != hits(flat.invoke("梅雨 六月"), "bm25")  # k1 = 0: every matching term scores its idf alone
    copied = r.model_copy(update={"k1": 0.0, "b": 0.0})
    assert hits(copied.invoke("梅雨 六月"), "bm25") == hits(flat.invoke("梅雨 六月"), "bm25")
    assert hits(r.invoke("梅雨 六月"), "bm25") == before  # the original keeps its own
    r.k1, r.b = 0.0, 0.0
    assert hits(r.invoke("梅雨 六月"), "bm25") == hits(flat.invoke("梅雨 六月"), "bm25")
    memory = BM25Retriever.from_documents(stored, k=5, k1=0.0, b=0.0)
    assert_same_ranking(hits(r.invoke("梅雨 六月"), "bm25"), hits(memory.invoke("梅雨 六月"), "bm25"))
    dense = PostgresDenseRetriever(url=pg_url, embedding=EMB, k=3)
    assert dense.model_copy(update={"statement_timeout": 0.0}).backend_search.statement_timeout == 0.0
    assert dense.backend_search.statement_timeout == 30.0 and dense.backend_search is dense.backend_search
    with pytest.raises(TypeError, match="unexpected keyword.*k2"):
        dense.backend_search.with_options(k2=1.0)


@pytest.mark.parametrize("bad", [{"b": 2}, {"k1": -1}, {"filter": {"$bad": 1}}, {"k": 0}, {"ef_search": 0}])
def test_an_argument_error_never_shows_the_urls_password(bad: dict[str, Any]) -> None:
    """Regression (trial of bf21278): pydantic's ValidationError quoted every argument, the URL's password with it
    (``input_value={'url': 'postgresql://app:hunter2@…', 'b': 2}``); the message still names the bad argument."""
    url = "postgresql://app:hunter2@127.0.0.1:9/rag?sslmode=disable&password=S3cr3tPw"
    cls = PostgresDenseRetriever if "ef_search" in bad else PostgresBM25Retriever
    extra = {"embedding": EMB} if cls is PostgresDenseRetriever else {}
    with pytest.raises(ValueError) as info:
        cls(url=url, **extra, **bad)
    shown = "".join(traceback.format_exception(info.value))  # what a user sees, the chained errors included
    assert "hunter2" not in shown and "S3cr3tPw" not in shown, shown
    assert next(iter(bad)) in str(info.value)
    # (an error of the whole model quotes every argument, shortened in the middle: the end of the URL shows)


def test_an_assignment_is_checked_when_made_and_the_url_is_fixed(pg_url: str) -> None:
    """Regression (trial of bf21278): ``pg.k1 = -1`` / ``pg.b = 5`` / ``pg.k = 0`` were accepted and refused only
    at the next invoke, and ``pg.url = other`` was accepted while the retriever kept searching the old store."""
    load(pg_url, corpus_docs())
    r = PostgresBM25Retriever(url=pg_url, k=3)
    for name, value in (("k1", -1.0), ("b", 5.0), ("k", 0), ("statement_timeout", -5)):
        with pytest.raises(ValueError, match=name):
            setattr(r, name, value)
        assert getattr(r, name) == {"k1": 1.5, "b": 0.75, "k": 3, "statement_timeout": 30.0}[name]
    with pytest.raises(AttributeError, match="url cannot be changed"):
        r.url = "postgresql://other@h/db"
    with pytest.raises(AttributeError, match="url cannot be changed"):
        r.model_copy(update={"url": "postgresql://other@h/db"})
    assert r.url == pg_url and len(r.invoke("梅雨")) == 3
    r.k = 2
    assert len(r.invoke("梅雨")) == 2


def test_stale_postings_fall_back_to_memory_with_a_warning(pg_url: str) -> None:
    stored = load(pg_url, corpus_docs())
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("UPDATE ragspine_meta SET value = '0' WHERE key = 'tokenizer_version'")
    with pytest.raises(Exception, match="stale postings"):
        PostgresBM25Retriever(url=pg_url)
    with PostgresSource(pg_url) as source, pytest.warns(StaleIndexWarning, match="another version"):
        r = source.bm25(k=5)
    assert isinstance(r, BM25Retriever)
    assert hits(r.invoke("梅雨"), "bm25") == hits(BM25Retriever.from_documents(stored, k=5).invoke("梅雨"), "bm25")
    with PostgresSource(pg_url) as source:
        assert isinstance(source.bm25(k=5, tokenizer="cjk"), BM25Retriever)  # another tokenizer: in memory


def test_dates_survive_the_postgres_store(pg_url: str) -> None:
    docs = [Document(page_content="梅雨", metadata={"doc_id": "a", "chunk_id": "a#0", "day": dt.date(2024, 1, 2),
                                                  "at": dt.datetime(2024, 1, 2, 3, 4, tzinfo=dt.UTC)})]
    load(pg_url, docs)
    r = PostgresBM25Retriever(url=pg_url)
    assert r.invoke("梅雨")[0].metadata["day"] == "2024-01-02"
    assert _ids(r.invoke("梅雨", filter={"at": {"between": ["2024-01-02", "2024-01-02T03:04:00Z"]}})) == {"a"}
    assert r.invoke("梅雨", filter={"day": {"gt": "2024-01-02"}}) == []


def test_index_text_is_what_both_backends_index(pg_url: str) -> None:
    """Chunks carrying ``metadata["index_text"]`` (a contextual header + the text) are tokenised and embedded by
    it in Postgres as in the file store's retrievers; results carry the stored ``page_content``."""
    docs = corpus_docs()
    for d in docs[:4]:
        d.metadata["index_text"] = f"気象庁 weather report\n{d.page_content}"
    stored = load(pg_url, docs, embedding=EMB)
    assert {d.metadata["chunk_id"] for d in stored if "index_text" in d.metadata} == {"ja1#0", "ja2#0", "ja3#0", "zh1#0"}
    bm25 = PostgresBM25Retriever(url=pg_url, k=10)
    dense = PostgresDenseRetriever(url=pg_url, embedding=EMB, k=10)
    ours_bm25 = BM25Retriever.from_documents(stored, k=10)
    ours_dense = DenseRetriever.from_documents(stored, EMB, k=10)
    for q in ("気象庁", "weather report 梅雨", "北京"):
        assert_same_ranking(hits(bm25.invoke(q), "bm25"), hits(ours_bm25.invoke(q), "bm25"))
        assert_same_ranking(hits(dense.invoke(q), "vector"), hits(ours_dense.invoke(q), "vector"))
    got = bm25.invoke("気象庁")
    assert {d.metadata["chunk_id"] for d in got} == {f"{d.metadata['doc_id']}#0" for d in docs[:4]}
    assert all("気象庁" not in d.page_content for d in got)


def test_warmed_vectors_are_those_the_dense_channel_reads(tmp_path: Any) -> None:
    """Regression (file store): ingest's warm-up embedded ``page_content`` while ``DenseRetriever`` embeds the index
    text, so chunks with ``metadata["index_text"]`` were embedded twice and their warmed vectors pruned.  The shared
    warm-up (used by both backends) now embeds the index text: the retriever finds every vector cached."""
    from langchain_ragspine.backends.directory.embedding_cache import EmbeddingCache
    from langchain_ragspine.embeddings.cache import warm_embedding_cache
    from tests.unit_tests.retrievers.test_dense import CountingEmbeddings

    docs = corpus_docs()
    docs[0].metadata["index_text"] = "気象庁 weather report\n" + docs[0].page_content
    emb = CountingEmbeddings()
    with EmbeddingCache(tmp_path / "embeddings.sqlite") as cache:
        assert warm_embedding_cache(cache, emb, docs, False).last_embedded == len(docs) - 1  # not the RESTRICTED one
    assert docs[0].metadata["index_text"] in emb.embedded
    dense = DenseRetriever(docs=docs, embedding=emb, cache_path=str(tmp_path / "embeddings.sqlite"))
    assert dense.last_embedded == 0


def test_pooled_connections_never_prepare_statements(pg_url: str) -> None:
    """Regression: psycopg prepares a query on its 5th execution, and PostgreSQL may then plan it generically —
    the BM25 query's generic plan re-ran the corpus statistics per posting row, 50-100x slower.  Pool connections
    are made with ``prepare_threshold=None``: after many queries no statement is prepared on them."""
    load(pg_url, corpus_docs(), embedding=EMB)
    bm25 = PostgresBM25Retriever(url=pg_url, k=3)
    dense = PostgresDenseRetriever(url=pg_url, embedding=EMB, k=3)
    for q in QUERIES * 2:
        bm25.invoke(q)
        dense.invoke(q, filter={"sensitivity": "PUBLIC"})
    with PostgresChunkStore(pg_url, read_only=True) as store, store.db.connection() as conn:
        assert conn.prepare_threshold is None
        assert conn.execute("SELECT count(*) FROM pg_prepared_statements").fetchone()[0] == 0


class _RoleSpy(HashingEmbeddings):
    """``EMB``'s vectors, recording which method embedded which text."""

    def __init__(self) -> None:
        super().__init__(64)
        self.calls: list[tuple[str, str]] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += [("embed_documents", t) for t in texts]
        return super().embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self.calls.append(("embed_query", text))
        return super().embed_query(text)


def test_dense_embed_as_and_hyde_probe_as_a_document(pg_url: str) -> None:
    """Issue 14: the pgvector channel takes ``embed_as`` like ``DenseRetriever``; HyDE over it, alone or in the
    postgres hybrid mode, embeds the probe with ``embed_documents`` and the question with ``embed_query``."""
    from langchain_ragspine.retrievers import HyDERetriever
    from tests.unit_tests._transform_fakes import SpyChatModel

    spy = _RoleSpy()
    stored = load(pg_url, corpus_docs(), embedding=spy)
    pg = PostgresDenseRetriever(url=pg_url, embedding=spy, k=5)
    ours = DenseRetriever.from_documents(stored, EMB, k=5)
    q = "Japan's rainy season starts in June"
    spy.calls.clear()
    assert_same_ranking(hits(pg.invoke(q, embed_as="document"), "vector"),
                        hits(ours.invoke(q, embed_as="document"), "vector"))
    assert spy.calls == [("embed_documents", q)]
    for bad in (lambda: pg.invoke(q, embed_as="passage"), lambda: pg.search(q, embed_as="passage"),
                lambda: pg.invoke("  ", embed_as=1)):
        with pytest.raises(ValueError, match="embed_as must be"):
            bad()
    with pytest.raises(TypeError, match="embed_as"):
        PostgresBM25Retriever(url=pg_url).invoke(q, embed_as="document")

    probe = "梅雨は六月から七月にかけて続く雨の季節で、rain が多い。"
    with PostgresSource(pg_url, embedding=spy) as source:
        for base in (pg, build_retriever("hybrid", source, k=5)):
            for run in (lambda h: h.invoke("梅雨はいつ"), lambda h: asyncio.run(h.ainvoke("梅雨はいつ"))):
                spy.calls.clear()
                docs = run(HyDERetriever(base, SpyChatModel(replies=[probe]), k=3))
                assert docs and all(d.page_content != probe for d in docs)
                assert sorted(spy.calls) == sorted([("embed_query", "梅雨はいつ"), ("embed_documents", probe)])


@pytest.mark.parametrize("cls", [PostgresBM25Retriever, PostgresDenseRetriever])
def test_every_field_check_holds_on_assignment_and_model_copy(pg_url: str, cls: type) -> None:
    """Regression (trial of 7b84662): ``r.filter = {"lang": {"$zz": 1}}`` and ``r.k1 = inf`` were accepted (the
    filter's check ran only when the retriever was made; ``k1`` was checked ``>= 0`` only), and every later search
    failed or returned ``[]``."""
    load(pg_url, corpus_docs(), embedding=EMB)
    extra = {"embedding": EMB} if cls is PostgresDenseRetriever else {}
    r = cls(url=pg_url, k=3, **extra)
    before = hits(r.invoke("梅雨"), "fused")
    bad: list[tuple[str, Any]] = [("filter", {"lang": {"$zz": 1}}), ("filter", {"$bogus": 1})]
    if cls is PostgresBM25Retriever:
        bad += [("k1", math.inf), ("k1", math.nan)]
    for name, value in bad:
        with pytest.raises(ValueError):
            setattr(r, name, value)
        with pytest.raises(ValueError):
            r.model_copy(update={name: value})
        assert hits(r.invoke("梅雨"), "fused") == before
    with pytest.raises(ValueError, match="k1 must be a finite number"):
        PostgresBM25Retriever(url=pg_url, k1=math.inf)


def test_a_dense_retriever_with_a_model_key_without_vectors_is_refused_and_the_key_is_fixed(pg_url: str) -> None:
    """Regression (trial of 7b84662): ``PostgresDenseRetriever(model_key="other")`` returned ``[]`` silently (its
    docstring promises a StoreError), and ``r.model_key = "other"`` was accepted and ignored."""
    from langchain_ragspine.errors import StoreError

    load(pg_url, corpus_docs(), embedding=EMB)
    with pytest.raises(StoreError, match="no vectors of model_key 'other'"):
        PostgresDenseRetriever(url=pg_url, embedding=EMB, model_key="other")
    r = PostgresDenseRetriever(url=pg_url, embedding=EMB, k=2)
    with pytest.raises(AttributeError, match="model_key cannot be changed"):
        r.model_key = "other"
    with pytest.raises(AttributeError, match="model_key cannot be changed"):
        r.model_copy(update={"model_key": "other"})
    assert r.model_key is None and len(r.invoke("梅雨")) == 2


def test_an_argument_error_keeps_no_unredacted_error_in_its_context() -> None:
    """Regression (trial of 7b84662): the redacted ValidationError was raised ``from None`` inside the ``except``
    block, so ``e.__context__`` still held pydantic's original error, which quotes the URL's password."""
    url = "postgresql://app:hunter2@127.0.0.1:9/rag"
    with pytest.raises(ValueError) as info:
        PostgresBM25Retriever(url=url, b=2)
    chain, e = [], info.value
    while e is not None:
        chain.append(e)
        e = e.__cause__ or e.__context__
    assert all("hunter2" not in str(x) and "hunter2" not in repr(x) for x in chain) and len(chain) == 1


def test_a_connection_error_keeps_no_unredacted_error_in_its_context() -> None:
    """Regression (trial of 7b84662, the kind of F1's note): a connection error was raised ``from None`` inside the
    ``except`` block, so ``e.__context__`` held psycopg's error, whose text may echo the password."""
    from langchain_ragspine.errors import StoreError

    with pytest.raises(StoreError) as info:
        PostgresBM25Retriever(url="postgresql://app:pa%ZZss@127.0.0.1:9/rag")
    assert info.value.__context__ is None and info.value.__cause__ is None
    assert "pa%ZZss" not in str(info.value) and "ZZ" not in str(info.value)
