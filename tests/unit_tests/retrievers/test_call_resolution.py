"""The base class resolves a call's ``k`` and filter once (issue 26, O3): ``call.k`` is the call's (checked), else the
retriever's own; ``call.filter`` is the retriever's own filter ANDed with the call's.  A new subclass gets this for
free, and on every store-backed retriever a call's filter narrows, never widens."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from pydantic import PrivateAttr

from langchain_ragspine.backends.directory.chunk_store import ChunkStore
from langchain_ragspine.backends.directory.layout import CHUNKS_DB
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.retrievers import BM25Retriever, DenseRetriever, HybridRetriever, LiveStoreRetriever
from langchain_ragspine.retrievers.base import ContractRetriever, RetrieverCall

DOCS = [Document(page_content=f"梅雨 前線 の 報告 {i}", metadata={"chunk_id": f"d{i}#0", "doc_id": f"d{i}",
                                                            "dept": "a" if i < 2 else "b", "year": 2020 + i})
        for i in range(4)]
OWN = {"dept": "a"}
WIDER = {"$or": [{"dept": "a"}, {"dept": "b"}]}  # a call trying to widen the own filter


class Recording(ContractRetriever):
    """A new retriever written against the base class alone: its hook reads ``call.k`` and ``call.filter``."""

    k: int = 3
    filter: dict[str, Any] | None = None
    _seen: list[RetrieverCall[Any]] = PrivateAttr(default_factory=list)

    def _retrieve(self, query: str, call: Any) -> list[Document]:
        self._seen.append(call)
        keep = [d for d in DOCS if call.filter is None or call.filter.predicate(d.metadata)]
        return keep[: call.k]


class Bare(ContractRetriever):
    """A subclass with neither a ``k`` nor a ``filter`` of its own."""

    _seen: list[RetrieverCall[Any]] = PrivateAttr(default_factory=list)

    def _retrieve(self, query: str, call: Any) -> list[Document]:
        self._seen.append(call)
        return []


def test_a_new_subclass_gets_k_and_the_anded_filter_for_free():
    r = Recording(filter=OWN)
    assert [d.metadata["doc_id"] for d in r.invoke("q")] == ["d0", "d1"]
    assert r._seen[-1].k == 3 and r._seen[-1].filter is not None
    assert r._seen[-1].filter.predicate({"dept": "a"}) and not r._seen[-1].filter.predicate({"dept": "b"})
    assert r.invoke("q", k=1, filter={"year": {"gte": 2021}}) == [DOCS[1]]
    call = r._seen[-1]
    assert call.k == 1 and set(call.filter.fields) == {"dept", "year"}  # the own filter AND the call's
    assert r.invoke("q", filter={"dept": "b"}) == []  # a call cannot widen the own filter
    assert [d.metadata["doc_id"] for d in r.invoke("q", filter=WIDER)] == ["d0", "d1"]
    assert asyncio.run(r.ainvoke("q", k=1, filter={"year": {"gte": 2021}})) == [DOCS[1]]  # async: the same
    assert r._seen[-1].k == 1 and set(r._seen[-1].filter.fields) == {"dept", "year"}
    assert RetrieverCall(2, None, None).depth(5) == 5 and RetrieverCall(None, None, None).depth(5) is None


def test_the_base_checks_k_with_the_contract_messages():
    r = Recording()
    with pytest.raises(ValueError, match="^k must be an int >= 1, got 0$"):
        r.invoke("q", k=0)
    with pytest.raises(TypeError, match="^k must be an int"):
        r.invoke("q", k="2")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        r.invoke("q", filter={"year": {"gte": []}})  # a malformed call filter: refused at the door
    assert not r._seen  # before the hook ran


def test_a_subclass_without_its_own_k_or_filter_gets_the_calls():
    r = Bare()
    r.invoke("q")
    assert r._seen[-1].k is None and r._seen[-1].filter is None
    r.invoke("q", k=4, filter={"dept": "b"})
    assert r._seen[-1].k == 4 and r._seen[-1].filter is not None and r._seen[-1].filter.fields == ("dept",)


# -- every store-backed retriever: a call's filter narrows the own one, never widens it ------------------------------
def _ids(docs: list[Document]) -> set[str]:
    return {d.metadata["doc_id"] for d in docs}


def _directory_store(tmp_path: Path) -> Path:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for d in DOCS:
        (corpus / f"{d.metadata['doc_id']}.md").write_text(
            f"---\ndept: {d.metadata['dept']}\n---\n# {d.metadata['doc_id']}\n\n{d.page_content}", "utf-8")
    ingest(corpus, tmp_path / "S", embedding="hashing", progress=False)
    return tmp_path / "S"


def _stored_docs(store: Path) -> list[Document]:
    with ChunkStore(store / CHUNKS_DB) as chunks:
        return [c.to_document() for c in chunks.iter_chunks()]


def _build(kind: str, tmp_path: Path) -> Any:
    emb = HashingEmbeddings(64)
    if kind == "bm25":
        return BM25Retriever.from_documents(DOCS, k=4, filter=OWN)
    if kind == "dense":
        return DenseRetriever.from_documents(DOCS, emb, k=4, filter=OWN)
    if kind == "hybrid":
        return HybridRetriever(retrievers=[BM25Retriever.from_documents(DOCS, k=4),
                                           DenseRetriever.from_documents(DOCS, emb, k=4)], k=4, filter=OWN)
    store = _directory_store(tmp_path)
    docs = _stored_docs(store)
    if kind == "live":
        return LiveStoreRetriever(chunk_store=store / CHUNKS_DB, k=4,
                                  factory=lambda: BM25Retriever.from_documents(docs, k=4, filter=OWN))
    if kind == "store-bm25":
        return BM25Retriever.from_documents(docs, k=4, filter=OWN)
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["bm25", "dense", "hybrid", "live", "store-bm25"])
def test_a_call_filter_never_widens_a_store_backed_retriever(kind, tmp_path):
    r = _build(kind, tmp_path)
    assert _ids(r.invoke("梅雨 前線")) == {"d0", "d1"}
    assert _ids(r.invoke("梅雨 前線", filter=WIDER)) == {"d0", "d1"}
    assert r.invoke("梅雨 前線", filter={"dept": "b"}) == []
    assert _ids(r.invoke("梅雨 前線", filter={"doc_id": "d1"})) == {"d1"}
    assert _ids(asyncio.run(r.ainvoke("梅雨 前線", filter=WIDER))) == {"d0", "d1"}


@pytest.mark.parametrize("cls_name", ["PostgresBM25Retriever", "PostgresDenseRetriever"])
def test_a_call_filter_never_widens_a_postgres_retriever(cls_name, pg_url):
    from langchain_ragspine.backends.postgres.versions import add_documents
    from langchain_ragspine.retrievers import postgres

    emb = HashingEmbeddings(64)
    add_documents(pg_url, DOCS, embedding=emb)
    cls = getattr(postgres, cls_name)
    extra = {"embedding": emb} if cls_name == "PostgresDenseRetriever" else {}
    r = cls(url=pg_url, k=4, filter=OWN, **extra)
    assert _ids(r.invoke("梅雨 前線")) == {"d0", "d1"}
    assert _ids(r.invoke("梅雨 前線", filter=WIDER)) == {"d0", "d1"}
    assert r.invoke("梅雨 前線", filter={"dept": "b"}) == []
    assert _ids([d for d, _ in r.search("梅雨 前線", filter=WIDER)]) == {"d0", "d1"}  # a direct search too
