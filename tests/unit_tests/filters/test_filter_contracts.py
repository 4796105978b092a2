"""Issue 8, sections 2 and 4: filters never widen, and the retrieval contracts (k, depth, empty chunks).

One filter table runs against BM25, dense (hashing embeddings) and hybrid; the retriever's own filter is ANDed with
every call's, also through a LangGraph graph; dates survive ingest, the chunk store and the saved indexes; the CLI
types its string filters by the stored field.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document

from langchain_ragspine.backends.directory.chunk_store import ChunkStore
from langchain_ragspine.cli import main
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.filters import UnknownFilterFieldWarning
from langchain_ragspine.graphs import Graders, build_corrective_rag
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.sources import open_retriever, search
from langchain_ragspine.pipeline.stages import build_bm25
from langchain_ragspine.retrievers import BM25Retriever, DenseRetriever, HybridRetriever

QUERY = "梅雨 前線"


def _doc(i: int, **md: Any) -> Document:
    return Document(page_content=f"梅雨 前線 の 報告 第{i}号", metadata={"chunk_id": f"d{i}#0", "doc_id": f"d{i}", **md})


# d0/d1 in dept a, d2/d3 in dept b; dates as ISO strings (as the chunk store keeps them) and as date objects
DOCS = [
    _doc(0, dept="a", order_id="98231", version="1.1", draft=False, year=2020, updated="2026-11-01",
         tags=["uv", "python"]),
    _doc(1, dept="a", order_id="0098231", version="1.10", draft=True, year=2019, updated=dt.date(2024, 1, 1)),
    _doc(2, dept="b", year="2021", updated="2025-06-30T10:00:00+09:00", tags=["new"]),
    _doc(3, dept="b", tags="old", updated=dt.datetime(2023, 5, 1, 12, 0)),
]
ALL = {"d0", "d1", "d2", "d3"}

# (filter, the doc_ids it matches) — the inputs first
TABLE: list[tuple[dict[str, Any], set[str]]] = [
    ({"order_id": "0098231"}, {"d1"}),
    ({"order_id": "98231"}, {"d0"}),
    ({"version": "1.10"}, {"d1"}),
    ({"version": "1.1"}, {"d0"}),
    ({"version": {"ne": "1.10"}}, {"d0"}),  # d2, d3 have no version: a missing field never matches
    ({"draft": "false"}, {"d0"}),
    ({"draft": {"ne": "true"}}, {"d0"}),
    ({"draft": False}, {"d0"}),
    ({"year": "2020"}, {"d0"}),
    ({"year": {"gte": "2020"}}, {"d0", "d2"}),  # 2020 as a number, "2021" >= "2020" as strings
    ({"year": {"gte": 2020}}, {"d0"}),  # a number does not order against the string "2021"
    ({"updated": {"gte": "2025-01-01"}}, {"d0", "d2"}),
    ({"updated": {"lt": "2025-01-01"}}, {"d1", "d3"}),
    ({"updated": "2024-01-01"}, {"d1"}),
    ({"updated": {"between": ["2023-05-01T12:00:00Z", "2024-01-01"]}}, {"d1", "d3"}),
    ({"tags": "python"}, {"d0"}),
    ({"tags": {"nin": ["old"]}}, {"d0", "d2"}),
    ({"$or": [{"dept": "b"}, {"draft": True}]}, {"d1", "d2", "d3"}),
    ({"$not": {"draft": True}}, {"d0"}),  # d2, d3: draft missing, so NOT(draft = true) is unknown
    ({"$and": [{"dept": "b"}, {"$not": {"tags": "old"}}]}, {"d2"}),
    ({"dept": {"$not": {"eq": "a"}}}, {"d2", "d3"}),
    ({"$or": [{"version": "1.10"}, {"year": {"lt": 2020}}]}, {"d1"}),
    ({}, ALL),
]


def _bm25(**kw: Any) -> BM25Retriever:
    return BM25Retriever.from_documents(DOCS, **{"k": 10, **kw})


def _dense(**kw: Any) -> DenseRetriever:
    return DenseRetriever.from_documents(DOCS, HashingEmbeddings(64), **{"k": 10, **kw})


def _hybrid(**kw: Any) -> HybridRetriever:
    return HybridRetriever(retrievers=[_bm25(), _dense()], **{"k": 10, **kw})


FACTORIES = {"bm25": _bm25, "dense": _dense, "hybrid": _hybrid}


def _ids(docs: list[Document]) -> set[str]:
    return {d.metadata["doc_id"] for d in docs}


@pytest.mark.parametrize("name", FACTORIES)
@pytest.mark.parametrize("flt, expected", TABLE, ids=[json.dumps(f, ensure_ascii=False) for f, _ in TABLE])
def test_filter_table_in_every_retriever(name: str, flt: dict[str, Any], expected: set[str]) -> None:
    retriever = FACTORIES[name]()
    assert _ids(retriever.invoke(QUERY)) == ALL  # every chunk is a candidate without a filter
    assert _ids(retriever.invoke(QUERY, filter=flt)) == expected


@pytest.mark.parametrize("name", FACTORIES)
async def test_filter_table_async(name: str) -> None:
    retriever = FACTORIES[name]()
    for flt, expected in TABLE:
        assert _ids(await retriever.ainvoke(QUERY, filter=flt)) == expected, flt


# -- a call's filter is ANDed with the retriever's own ----------------------------------------------------------------
CALL_FILTERS = [None, {}, {"dept": "b"}, {"dept": {"ne": "a"}}, {"$or": [{"dept": "b"}, {"dept": "a"}]},
                {"$not": {"dept": "a"}}, *(f for f, _ in TABLE)]


@pytest.mark.parametrize("name", FACTORIES)
def test_own_filter_holds_whatever_a_call_passes(name: str) -> None:
    retriever = FACTORIES[name](filter={"dept": "a"})
    for flt in CALL_FILTERS:
        got = retriever.invoke(QUERY, filter=flt)
        assert all(d.metadata["dept"] == "a" for d in got), (name, flt)
        expected = next((e for f, e in TABLE if f == flt), ALL) & {"d0", "d1"}
        if flt in ({"dept": "b"}, {"dept": {"ne": "a"}}, {"$not": {"dept": "a"}}):
            expected = set()
        assert _ids(got) == expected, (name, flt)


def test_channel_filters_hold_inside_a_hybrid() -> None:
    hybrid = HybridRetriever(retrievers=[_bm25(filter={"dept": "a"}), _dense(filter={"dept": "a"})], k=10)
    assert _ids(hybrid.invoke(QUERY)) == {"d0", "d1"}
    assert hybrid.invoke(QUERY, filter={"dept": "b"}) == []
    assert _ids(hybrid.invoke(QUERY, filter={"$or": [{"dept": "b"}, {"draft": False}]})) == {"d0"}


def test_own_filter_holds_in_search_helpers() -> None:
    bm25 = _bm25(filter={"dept": "a"})
    assert {bm25.docs[i].metadata["dept"] for i, _ in bm25.search(QUERY, filter={"dept": "b"})} == set()
    dense = _dense(filter={"dept": "a"})
    vector = HashingEmbeddings(64).embed_query(QUERY)
    assert dense.search_by_vector(vector, filter={}) and all(
        dense.docs[i].metadata["dept"] == "a" for i, _ in dense.search_by_vector(vector, filter={})
    )
    assert dense.search_by_vector(vector, filter={"dept": "b"}) == []


def test_own_filter_holds_through_a_graph_that_drops_the_call_filter() -> None:
    """The corrective graph's first correction drops the input ``filters``; the retriever's own filter stays."""
    graph = build_corrective_rag(_bm25(filter={"dept": "a"}), graders=Graders.constant("no"), relax_filters=True)
    seen: list[Document] = []
    for update in graph.stream({"question": QUERY, "filters": {"dept": "b"}}, stream_mode="updates"):
        for part in update.values():
            docs = (part or {}).get("documents")
            if isinstance(docs, dict):
                docs = docs.get("replace")
            seen.extend(docs or [])
    final = graph.invoke({"question": QUERY, "filters": {"dept": "b"}})
    assert any(t.get("step") == "drop_filters" for t in final["trace"])
    assert seen and {d.metadata["dept"] for d in seen} == {"a"}  # after the drop: dept a only, never b
    state = build_corrective_rag(_hybrid(filter={"dept": "a"})).invoke({"question": QUERY, "filters": None})
    assert {d.metadata["dept"] for d in state["documents"]} <= {"a"}


# -- issue 8, section 4: k and depth --------------------------------------------------------------------------------
def _many(n: int) -> list[Document]:
    return [_doc(i, dept="a") for i in range(n)]


def test_hybrid_returns_k_beyond_fetch_k() -> None:
    docs = _many(80)
    hybrid = HybridRetriever(
        retrievers=[BM25Retriever.from_documents(docs), DenseRetriever.from_documents(docs, HashingEmbeddings(64))]
    )
    assert hybrid.fetch_k == 50
    assert len(hybrid.invoke(QUERY, k=70)) == 70  # was 50: each channel now gives max(fetch_k, k)
    assert len(hybrid.invoke(QUERY, k=80)) == 80
    assert len(hybrid.invoke(QUERY, k=500)) == 80
    assert len(hybrid.invoke(QUERY, k=70, filter={"chunk_id": {"nin": ["d0#0"]}})) == 70
    fixed = HybridRetriever(retrievers=hybrid.retrievers, k=70)
    assert len(fixed.invoke(QUERY)) == 70


async def test_hybrid_returns_k_beyond_fetch_k_async() -> None:
    docs = _many(80)
    hybrid = HybridRetriever(
        retrievers=[BM25Retriever.from_documents(docs), DenseRetriever.from_documents(docs, HashingEmbeddings(64))]
    )
    assert len(await hybrid.ainvoke(QUERY, k=70)) == 70


BAD_K = ["3", 2.0, 0, -1, True, None]


@pytest.mark.parametrize("name", FACTORIES)
@pytest.mark.parametrize("bad", BAD_K, ids=repr)
def test_bad_k_is_an_error_naming_k(name: str, bad: Any) -> None:
    retriever = FACTORIES[name]()
    if bad is not None:  # None per call means "the retriever's k"
        with pytest.raises((TypeError, ValueError), match=r"\bk must be an int >= 1"):
            retriever.invoke(QUERY, k=bad)
        with pytest.raises((TypeError, ValueError), match=r"\bk must be an int >= 1"):
            search(retriever, QUERY, k=bad)
    with pytest.raises((TypeError, ValueError), match=r"\bk must be an int >= 1"):
        FACTORIES[name](k=bad)


def test_dense_never_returns_chunks_without_text() -> None:
    blanks = ["", "   ", "\n\t", "\u3000\u3000", "\u200b", "\ufeff "]
    docs = [Document(page_content=t, metadata={"chunk_id": f"blank{i}#0"}) for i, t in enumerate(blanks)]
    docs += _many(3)
    emb = HashingEmbeddings(64)
    dense = DenseRetriever.from_documents(docs, emb, k=20)
    assert len(dense.docs) == 3 and dense.last_embedded == 3  # never embedded either
    for query in (QUERY, "何か", "x"):
        got = dense.invoke(query)
        assert len(got) == 3 and all(d.page_content.strip() for d in got)
    assert DenseRetriever.from_documents(docs[:6], emb).invoke(QUERY) == []


def test_hybrid_never_returns_a_blank_chunk() -> None:
    docs = [Document(page_content=" ", metadata={"chunk_id": "blank#0"}), *_many(2)]
    hybrid = HybridRetriever(
        retrievers=[BM25Retriever.from_documents(docs), DenseRetriever.from_documents(docs, HashingEmbeddings(64))]
    )
    assert {d.metadata["chunk_id"] for d in hybrid.invoke("何か別の話", k=10)} <= {"d0#0", "d1#0"}


# -- dates survive ingest, chunks.sqlite and the saved indexes --------------------------------------------------------
def _write(path: Path, front: str, body: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\n{front}\n---\n{body}\n", "utf-8")


@pytest.fixture
def dated_store(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    _write(root / "new.md", "title: New\nupdated: 2026-11-01\ndraft: false\ndept: a", "梅雨 前線 の 新しい 報告")
    _write(root / "old.md", "title: Old\nupdated: 2024-01-01 10:00:00+09:00\ndraft: true\ndept: a",
           "梅雨 前線 の 古い 報告")
    _write(root / "plain.md", "title: Plain\ndept: b", "梅雨 前線 の 日付 の ない 報告")
    store = tmp_path / "S"
    ingest(root, store, embedding="hashing", progress=False)
    return store


DATE_CASES = [
    ({"updated": {"gte": "2025-01-01"}}, {"new"}),
    ({"updated": {"lt": "2025-01-01"}}, {"old"}),
    ({"updated": "2026-11-01"}, {"new"}),
    ({"updated": {"between": ["2024-01-01T01:00:00Z", "2024-01-01T01:00:00Z"]}}, {"old"}),  # 10:00+09:00
    ({"updated": {"ne": "2026-11-01"}}, {"old"}),  # plain has no date: never matches
    ({"draft": "false"}, {"new"}),
    ({"draft": {"ne": "true"}}, {"new"}),
]


def test_front_matter_dates_filter_after_ingest_in_every_form(dated_store: Path) -> None:
    with ChunkStore(dated_store / "chunks.sqlite", read_only=True) as store:
        retrievers = {"chunks.sqlite": build_bm25(store)}
    for mode in ("bm25", "vector", "hybrid"):  # loaded from bm25/docs.jsonl and vector/docs.jsonl
        retrievers[mode] = open_retriever(dated_store, mode=mode, k=10)
    for where, retriever in retrievers.items():
        for flt, expected in DATE_CASES:
            assert _ids(search(retriever, QUERY, k=10, filter=flt)) == expected, (where, flt)
        with pytest.raises(ValueError, match="YYYY-MM-DD"):
            search(retriever, QUERY, k=10, filter={"updated": {"gte": "2024/01/01"}})


# -- the CLI ------------------------------------------------------------------------------------------------------------
def _cli_ids(capsys: pytest.CaptureFixture[str], argv: list[str]) -> set[str]:
    assert main(argv) == 0
    return {json.loads(line)["doc_id"] for line in capsys.readouterr().out.splitlines()}


def test_cli_filters_are_typed_by_the_stored_field(dated_store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["search", QUERY, "--store", str(dated_store), "--json", "-k", "10"]
    assert _cli_ids(capsys, [*base, "--filter", "draft=false"]) == {"new"}
    assert _cli_ids(capsys, [*base, "--filter", "draft!=true"]) == {"new"}
    assert _cli_ids(capsys, [*base, "--filter", "draft=true"]) == {"old"}
    assert _cli_ids(capsys, [*base, "--filter", "updated>=2025-01-01"]) == {"new"}
    assert _cli_ids(capsys, [*base, "--filter", "updated=2024-01-01..2025-01-01"]) == {"old"}
    for mode in ("bm25", "vector", "hybrid"):
        assert _cli_ids(capsys, [*base, "--mode", mode, "--filter", "draft!=true", "--filter", "dept=a"]) == {"new"}


def test_cli_bad_date_operand_is_an_error_naming_the_formats(
    dated_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["search", QUERY, "--store", str(dated_store), "--filter", "updated>=2024/01/01"]) == 2
    err = capsys.readouterr().err
    assert "'updated'" in err and "2024/01/01" in err and "YYYY-MM-DD" in err


@pytest.mark.subprocess
def test_cli_unknown_field_warns_on_stderr(dated_store: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    proc = subprocess.run(
        [sys.executable, "-m", "langchain_ragspine", "search", QUERY, "--store", str(dated_store), "--filter",
         "dpet=a", "--mode", "bm25"],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "warning: filter field 'dpet' is in no indexed chunk's metadata" in proc.stderr
    assert "closest known fields: 'dept'" in proc.stderr
    assert "(no results)" in proc.stdout


def test_python_unknown_field_warning(dated_store: Path) -> None:
    with pytest.warns(UnknownFilterFieldWarning, match="closest known fields: 'updated'"):
        assert search(open_retriever(dated_store, mode="bm25"), QUERY, filter={"updatd": {"gte": "2020-01-01"}}) == []


def test_cli_search_k_beyond_fetch_k(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / "corpus"
    for i in range(75):
        _write(root / f"d{i:02d}.md", f"title: D{i}", f"梅雨 前線 の 報告 第{i}号")
    store = tmp_path / "S"
    ingest(root, store, embedding="hashing", progress=False)
    capsys.readouterr()
    for mode in ("hybrid", "bm25", "vector"):
        assert main(["search", QUERY, "--store", str(store), "--json", "-k", "70", "--mode", mode]) == 0
        assert len(capsys.readouterr().out.splitlines()) == 70, mode
    assert main(["search", QUERY, "--store", str(store), "-k", "0"]) == 2
    assert "-k must be > 0" in capsys.readouterr().err
