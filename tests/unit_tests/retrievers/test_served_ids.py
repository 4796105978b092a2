"""The served-ids check (``langchain_ragspine.served``): which chunk ids a retriever would still return now, which
it reports withdrawn (relabelled RESTRICTED, retracted, gone from the current version), and ``None`` — cannot tell,
fail closed — for a retriever without the check; per retriever kind: the live store retriever (after a re-ingest in
this process and in another), a chunk store with parents, in-memory BM25 / dense / hybrid, wrappers, multi-index,
vector-store retrievers and a foreign one.  The chat graphs' use of it is in ``test_graph_history_relabel.py``."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import InMemoryVectorStore

from langchain_ragspine.backends.directory.chunk_store import ChunkStore
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.sources import open_retriever
from langchain_ragspine.retrievers import (
    BM25Retriever,
    DenseRetriever,
    GatedRetriever,
    HybridRetriever,
    LiveStoreRetriever,
    MultiIndexRetriever,
)
from langchain_ragspine.served import ServedIds, served_ids, still_served
from langchain_ragspine.vectorstores import RagSpineVectorStore
from tests.unit_tests.retrievers.test_live_retriever import _corpus, _delete, _reingest, _relabel


class Fixed(BaseRetriever):
    """Answers the served-ids check with fixed sets."""

    served: frozenset[str] = frozenset()
    withdrawn: frozenset[str] = frozenset()

    def served_ids(self, ids: list[str]) -> ServedIds:
        return ServedIds.of(ids, self.served, self.withdrawn)

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        return []


def _store(tmp_path: Any) -> tuple[Any, Any, LiveStoreRetriever]:
    corpus, store = _corpus(tmp_path), tmp_path / "S"
    ingest(corpus, store, progress=False, mode="bm25")
    retriever = open_retriever(store, mode="bm25", k=3)
    assert isinstance(retriever, LiveStoreRetriever)
    return corpus, store, retriever


@pytest.mark.subprocess
def test_the_live_retriever_answers_after_following_the_store(tmp_path):
    corpus, store, retriever = _store(tmp_path)
    assert retriever.served_ids(["a#0", "b#0", "zz#0"]) == ServedIds(frozenset({"a#0", "b#0"}))
    _relabel(corpus)
    ingest(corpus, store, progress=False, mode="bm25")
    assert retriever.served_ids(["a#0", "b#0", "zz#0"]) == ServedIds(frozenset({"b#0"}), frozenset({"a#0"}))
    _delete(corpus, "b")
    _reingest(corpus, store, {"mode": "bm25"}, other_process=False)
    assert retriever.served_ids(["a#0", "b#0", "c#0"]) == ServedIds(frozenset({"c#0"}), frozenset({"a#0", "b#0"}))
    assert still_served(retriever, ["a#0", "c#0"]) == {"c#0"}
    with pytest.raises(TypeError, match="single str"):
        served_ids(retriever, "a#0")


def test_a_chunk_store_answers_for_parents_and_labels(tmp_path):
    def version(**label: str) -> tuple[list[Document], list[Document]]:
        child = Document("c", metadata={"doc_id": "d", "chunk_id": "d#0", "parent_id": "d#p0", **label})
        return [child], [Document("p", metadata={"doc_id": "d", "parent_id": "d#p0", **label})]

    with ChunkStore(tmp_path / "chunks.sqlite") as store:
        children, parents = version()
        store.replace_doc_chunks("d", children, parents=parents)
        assert store.served_ids(["d#0", "d#p0", "e#0"]) == ServedIds(frozenset({"d#0", "d#p0"}))
        children, parents = version(sensitivity="RESTRICTED")
        store.replace_doc_chunks("d", children, parents=parents)
        assert store.served_ids(["d#0", "d#p0", "e#0"]) == ServedIds(frozenset(), frozenset({"d#0", "d#p0"}))


def test_in_memory_hybrid_multi_index_and_wrappers():
    docs = [Document("kyoto temples", metadata={"chunk_id": "k#0"}), Document("osaka", id="o#0"),
            Document("secret", metadata={"chunk_id": "s#0", "sensitivity": "RESTRICTED"})]
    bm25, dense = BM25Retriever.from_documents(docs), DenseRetriever.from_documents(docs, HashingEmbeddings(32))
    assert served_ids(bm25, ["k#0", "o#0", "s#0"]) == ServedIds(frozenset({"k#0", "o#0"}))  # RESTRICTED never indexed
    assert served_ids(dense, ["k#0", "s#0"]) == ServedIds(frozenset({"k#0"}))
    foreign = InMemoryVectorStore(HashingEmbeddings(8)).as_retriever()
    assert served_ids(foreign, ["k#0"]) is None and still_served(foreign, ["k#0"]) == set()  # fail closed
    assert served_ids(HybridRetriever(retrievers=[bm25, foreign]), ["k#0", "x#0"]) == ServedIds(frozenset({"k#0"}))
    assert served_ids(GatedRetriever(retriever=foreign), ["k#0"]) is None
    assert served_ids(GatedRetriever(retriever=bm25), ["k#0"]) == ServedIds(frozenset({"k#0"}))
    # two indexes may hold the same id: one that reports it withdrawn wins
    multi = MultiIndexRetriever(indexes={"a": bm25, "b": Fixed(withdrawn=frozenset({"k#0"}))})
    assert served_ids(multi, ["k#0", "o#0"]) == ServedIds(frozenset({"o#0"}), frozenset({"k#0"}))


def test_vector_store_retrievers_answer_from_the_store_now(tmp_path):
    store = RagSpineVectorStore(tmp_path / "vs", HashingEmbeddings(32))
    store.add_texts(["kyoto", "osaka"], [{"doc_id": "k"}, {"doc_id": "o"}], ids=["k", "o"])
    for search_type in ("similarity", "mmr", "hybrid", "bm25"):
        assert served_ids(store.as_retriever(search_type=search_type), ["k", "o", "z"]) == ServedIds(
            frozenset({"k", "o"}))
    retriever = store.as_retriever(search_type="similarity")
    store.delete(["k"])
    assert served_ids(retriever, ["k", "o"]) == ServedIds(frozenset({"o"}))  # unknown, not withdrawn: no history
    store.close()




@pytest.mark.subprocess
def test_the_live_retriever_sees_a_relabel_from_another_process(tmp_path):
    corpus, store, retriever = _store(tmp_path)
    _relabel(corpus)
    _reingest(corpus, store, {"mode": "bm25"}, other_process=True)
    assert retriever.served_ids(["a#0", "b#0"]) == ServedIds(frozenset({"b#0"}), frozenset({"a#0"}))


def test_a_served_ids_method_must_answer_with_served_ids():
    class Bad(Fixed):
        def served_ids(self, ids: list[str]) -> Any:
            return {"a#0"}

    with pytest.raises(TypeError, match="not ServedIds"):
        served_ids(Bad(), ["a#0"])
    with pytest.raises(TypeError, match="must be str"):
        served_ids(Fixed(), [1])
    # an answer is cut to the ids asked, and withdrawn wins over served
    assert ServedIds.of(["a", "b"], {"a", "b", "c"}, {"b", "d"}) == ServedIds(frozenset({"a"}), frozenset({"b"}))


def _pg_chunk(doc_id: str, text: str, **label: str) -> Document:
    return Document(text, metadata={"doc_id": doc_id, "chunk_id": f"{doc_id}#0", **label})


def test_postgres_retrievers_and_vector_store_answer_from_the_tables_now(pg_url):
    from langchain_ragspine.backends.postgres.chunk_store import PostgresChunkStore
    from langchain_ragspine.backends.postgres.versions import add_documents, write_versions
    from langchain_ragspine.retrievers.postgres import PostgresBM25Retriever, PostgresDenseRetriever
    from langchain_ragspine.vectorstores import PostgresVectorStore

    emb = HashingEmbeddings(32)
    add_documents(pg_url, [_pg_chunk("a", "CANARYQZX rivers"), _pg_chunk("b", "Kyoto rivers")], embedding=emb)
    bm25, dense = PostgresBM25Retriever(url=pg_url), PostgresDenseRetriever(url=pg_url, embedding=emb)
    vs = PostgresVectorStore(pg_url, emb).as_retriever()
    for r in (bm25, dense):
        assert served_ids(r, ["a#0", "b#0", "z#0"]) == ServedIds(frozenset({"a#0", "b#0"}))
    assert served_ids(vs, ["a#0", "z#0"]) == ServedIds(frozenset({"a#0"}))
    add_documents(pg_url, [_pg_chunk("a", "CANARYQZX rivers", sensitivity="RESTRICTED")], embedding=emb)
    write_versions(pg_url, {"b": []}, embedding=emb)  # b retracted
    for r in (bm25, dense):  # built before the change: the tables are read at each check
        assert served_ids(r, ["a#0", "b#0", "z#0"]) == ServedIds(frozenset(), frozenset({"a#0", "b#0"}))
    assert served_ids(vs, ["a#0", "b#0"]) == ServedIds()  # a vector store keeps no answer for withdrawn ids
    with PostgresChunkStore(pg_url, read_only=True) as store:
        assert store.served_ids(["a#0"]) == ServedIds(frozenset(), frozenset({"a#0"}))
