"""RagSpineVectorStore: the LangChain VectorStore face over a store directory (records, filters, search types,
RESTRICTED, index() with a record manager, a store written by ``ingest``)."""

import asyncio
import warnings
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.indexing import InMemoryRecordManager, aindex, index

from langchain_ragspine.backends.directory.chunk_store import ChunkStore
from langchain_ragspine.backends.directory.layout import CHUNKS_DB
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.retrievers.contract import invoke_retriever
from langchain_ragspine.vectorstores import RagSpineStoreRetriever, RagSpineVectorStore

EMB = HashingEmbeddings(256)


@pytest.fixture
def store(tmp_path: Path):
    s = RagSpineVectorStore(tmp_path / "S", EMB)
    yield s
    s.close()


def _texts() -> list[Document]:
    return [
        Document(page_content="梅雨は六月から七月にかけて続く雨の季節。", metadata={"dept": "a"}, id="tsuyu"),
        Document(page_content="梅雨前線が停滞すると大雨になる。", metadata={"dept": "b"}, id="front"),
        Document(page_content="北京是中国的首都。", metadata={"dept": "a"}, id="beijing"),
        Document(page_content="The chunk store keeps every version.", metadata={"dept": "c"}, id="store"),
        Document(page_content="梅雨の機密メモ", metadata={"dept": "a", "sensitivity": "restricted"}, id="secret"),
    ]


def test_records_round_trip_exactly_and_ids_are_chunk_ids(store):
    docs = [
        Document(page_content="a", metadata={"doc_id": "D", "chunk_id": "user-cid", "n": 1, "tags": ["x"]}),
        Document(page_content="b", metadata={}),
    ]
    ids = store.add_documents(docs, ids=["r1", "r2"])
    assert ids == ["r1", "r2"]
    got = store.get_by_ids(["r2", "missing", "r1"])
    assert got == [Document(page_content="b", metadata={}, id="r2"), Document(page_content="a", metadata=docs[0].metadata, id="r1")]
    assert docs[0].id is None  # the caller's documents are not modified
    # filters see chunk_id = the record id
    assert [d.id for d in store.similarity_search("a", k=5, filter={"chunk_id": "r1"})] == ["r1"]


def test_id_falls_back_to_document_id_then_chunk_id_then_uuid(store):
    ids = store.add_documents(
        [Document(page_content="x", id="given"), Document(page_content="y", metadata={"chunk_id": "d#0"}),
         Document(page_content="z")]
    )
    assert ids[:2] == ["given", "d#0"] and len(ids[2]) == 32


def test_filters_run_before_scoring_and_fail_closed(store):
    store.add_documents(_texts())
    assert [d.id for d in store.similarity_search("北京", k=1, filter={"dept": "b"})] == ["front"]
    with pytest.warns(UserWarning, match="missing_field"):
        assert store.similarity_search("梅雨", k=3, filter={"missing_field": "a"}) == []  # a missing field never matches
    found = [d.id for d in store.hybrid_search("梅雨", k=5, filter={"dept": {"$ne": "a"}})]
    assert found[0] == "front" and set(found) <= {"front", "store"}
    with pytest.raises(TypeError, match="callable filter"):
        store.similarity_search("梅雨", filter=lambda d: True)
    with pytest.raises(ValueError):
        store.similarity_search("梅雨", filter={"dept": {"$nope": 1}})


def test_restricted_records_are_stored_but_never_returned(store, tmp_path):
    store.add_documents(_texts())
    with ChunkStore(tmp_path / "S" / CHUNKS_DB, read_only=True) as cs:
        assert "secret" in {c.chunk_id for c in cs.iter_chunks()}
    seen = set()
    for search_type in ("similarity", "mmr", "hybrid", "bm25"):
        seen |= {d.id for d in store.search("梅雨の機密メモ", search_type, k=10)}
    seen |= {d.id for d in store.as_retriever(search_kwargs={"k": 10}).invoke("機密")}
    assert "secret" not in seen and seen
    assert store.get_by_ids(["secret"]) == []


def test_search_types_through_as_retriever(store):
    store.add_documents(_texts())
    hybrid = store.as_retriever(search_kwargs={"k": 2})
    assert isinstance(hybrid, RagSpineStoreRetriever) and hybrid.search_type == "hybrid"
    top = hybrid.invoke("梅雨の季節")
    assert top[0].id == "tsuyu" and set(top[0].metadata["scores"]) == {"bm25", "vector", "fused", "rerank"}
    assert all(d.id == d.metadata.get("chunk_id", d.id) for d in top)
    bm25 = store.as_retriever(search_type="bm25", search_kwargs={"k": 5})
    assert {d.id for d in bm25.invoke("北京")} == {"beijing"}  # only records sharing a term
    sim = store.as_retriever(search_type="similarity", search_kwargs={"k": 2, "filter": {"dept": "a"}})
    assert {d.metadata["dept"] for d in sim.invoke("梅雨")} == {"a"} and "scores" not in sim.invoke("梅雨")[0].metadata
    mmr = store.as_retriever(search_type="mmr", search_kwargs={"k": 2, "fetch_k": 4})
    assert len(mmr.invoke("梅雨")) == 2
    thr = store.as_retriever(search_type="similarity_score_threshold", search_kwargs={"score_threshold": 0.99, "k": 4})
    assert thr.invoke("北京是中国的首都。")[0].id == "beijing"
    assert hybrid.invoke("梅雨", k=1, filter={"dept": "b"})[0].id == "front"  # per-call kwargs override
    # the retriever-call contract (used by graphs and CLI) asks it for k and filter
    assert [d.id for d in invoke_retriever(hybrid, "梅雨", k=1, filter={"dept": "b"})] == ["front"]


def test_unknown_arguments_are_errors_with_did_you_mean(store):
    with pytest.raises(TypeError, match="did you mean 'k'"):
        store.as_retriever(search_kwargs={"top_k": 2})
    with pytest.raises(TypeError, match="did you mean 'search_kwargs'"):
        store.as_retriever(search_kwarg={"k": 2})
    with pytest.raises(ValueError, match="not allowed"):
        store.as_retriever(search_type="hybridd")
    with pytest.raises(TypeError, match="did you mean 'filter'"):
        store.similarity_search("x", filters={"a": 1})
    with pytest.raises(TypeError, match="did you mean 'ids'"):
        store.add_documents([Document(page_content="x")], idss=["a"])


def test_mmr_prefers_diversity_when_lambda_is_low(store):
    store.add_documents(
        [Document(page_content="梅雨 梅雨 梅雨", id="d1"), Document(page_content="梅雨 梅雨 梅雨", id="d2"),
         Document(page_content="梅雨 と 台風", id="d3")]
    )
    assert [d.id for d in store.max_marginal_relevance_search("梅雨", k=2, fetch_k=3, lambda_mult=1.0)] == ["d1", "d2"]
    assert [d.id for d in store.max_marginal_relevance_search("梅雨", k=2, fetch_k=3, lambda_mult=0.0)][1] == "d3"


def test_upsert_replaces_in_place_keeps_history_and_moves_between_documents(store, tmp_path):
    store.add_documents([Document(page_content="one", metadata={"doc_id": "D"}, id="D#0"),
                         Document(page_content="two", metadata={"doc_id": "D"}, id="D#1")])
    store.add_documents([Document(page_content="two, edited", metadata={"doc_id": "D"}, id="D#1")])
    assert [d.page_content for d in store.get_by_ids(["D#0", "D#1"])] == ["one", "two, edited"]
    store.add_documents([Document(page_content="moved", metadata={"doc_id": "E"}, id="D#0")])
    assert store.get_by_ids(["D#0"])[0].metadata == {"doc_id": "E"}
    store.delete(["D#1", "nope"])
    assert [d.id for d in store.similarity_search("x", k=10)] == ["D#0"]
    with ChunkStore(tmp_path / "S" / CHUNKS_DB, read_only=True) as cs:
        history = [c.text for c in cs.iter_chunks(doc_id="D", include_inactive=True)]
        assert "two" in history and "two, edited" in history  # every write is a new version; old rows stay
    with pytest.raises(ValueError, match="needs the ids"):
        store.delete()


def test_a_second_instance_sees_writes_of_the_first(tmp_path):
    a = RagSpineVectorStore(tmp_path / "S", EMB)
    b = RagSpineVectorStore(tmp_path / "S", EMB)
    assert b.similarity_search("x") == []
    a.add_texts(["梅雨"], ids=["t"])
    assert [d.id for d in b.similarity_search("梅雨", k=1)] == ["t"]
    a.close()
    b.close()


def test_an_ingested_store_is_searchable_with_lineage(tmp_path):
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "tsuyu.md").write_text("# 梅雨\n\n日本で梅雨がないのは北海道と小笠原諸島である。", "utf-8")
    (corpus / "pekin.md").write_text("# 北京\n\n北京是中国的首都。", "utf-8")
    ingest(corpus, tmp_path / "S", embedding=EMB)
    store = RagSpineVectorStore(tmp_path / "S", EMB)
    top = store.as_retriever(search_kwargs={"k": 1}).invoke("梅雨がないのはどこ")[0]
    assert top.id == top.metadata["chunk_id"] == "tsuyu#0" and top.metadata["doc_id"] == "tsuyu"
    assert top.metadata["source_locator"].startswith("tsuyu.md#")
    # adding one chunk to an ingested document keeps its other chunks
    store.add_documents([Document(page_content="追記：梅雨明けは七月。", metadata={"doc_id": "tsuyu"}, id="tsuyu#9")])
    assert {d.id for d in store.get_by_ids(["tsuyu#0", "tsuyu#9"])} == {"tsuyu#0", "tsuyu#9"}
    store.close()


def _source_docs(version: int) -> list[Document]:
    return [
        Document(page_content=f"梅雨の説明 v{version}", metadata={"source": "tsuyu.md"}),
        Document(page_content="北京是中国的首都。", metadata={"source": "beijing.md"}),
    ]


def test_index_incremental_and_full_cleanup_with_a_record_manager(store):
    rm = InMemoryRecordManager(namespace="ragspine/test")
    rm.create_schema()
    first = index(_source_docs(1), rm, store, cleanup="incremental", source_id_key="source", key_encoder="sha256")
    assert first == {"num_added": 2, "num_updated": 0, "num_skipped": 0, "num_deleted": 0}
    again = index(_source_docs(1), rm, store, cleanup="incremental", source_id_key="source", key_encoder="sha256")
    assert again["num_skipped"] == 2 and again["num_added"] == 0
    changed = index(_source_docs(2), rm, store, cleanup="incremental", source_id_key="source", key_encoder="sha256")
    assert changed["num_added"] == 1 and changed["num_deleted"] == 1
    texts = sorted(d.page_content for d in store.similarity_search("梅雨", k=10))
    assert texts == ["北京是中国的首都。", "梅雨の説明 v2"]
    full = index(_source_docs(2)[:1], rm, store, cleanup="full", source_id_key="source", key_encoder="sha256")
    assert full["num_deleted"] == 1
    assert [d.page_content for d in store.similarity_search("梅雨", k=10)] == ["梅雨の説明 v2"]
    assert all(d.id in rm.list_keys() for d in store.similarity_search("梅雨", k=10))


def test_aindex_and_async_twins(store):
    rm = InMemoryRecordManager(namespace="ragspine/async")
    rm.create_schema()

    async def run():
        out = await aindex(_source_docs(1), rm, store, cleanup="full", source_id_key="source", key_encoder="sha256")
        hits = await store.asimilarity_search("北京", k=1)
        mmr = await store.amax_marginal_relevance_search("梅雨", k=1)
        hyb = await store.as_retriever(search_kwargs={"k": 1}).ainvoke("北京")
        ids = await store.aadd_documents([Document(page_content="追加", id="extra")])
        await store.adelete(ids)
        return out, hits, mmr, hyb, await store.aget_by_ids(["extra"])

    out, hits, mmr, hyb, gone = asyncio.run(run())
    assert out["num_added"] == 2 and hits[0].page_content == "北京是中国的首都。"
    assert mmr and hyb[0].page_content == "北京是中国的首都。" and gone == []


def test_from_texts_with_a_store_dir_persists(tmp_path):
    s = RagSpineVectorStore.from_texts(["梅雨"], EMB, ids=["t"], store_dir=tmp_path / "S")
    assert not s.temporary and s.store_dir == tmp_path / "S"
    assert s.get_by_ids(["t"])[0].page_content == "梅雨"
    s.close()
    assert (tmp_path / "S").is_dir()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert RagSpineVectorStore(tmp_path / "S", EMB).get_by_ids(["t"])


def test_versioned_vector_store_is_a_deprecated_alias_of_the_one_vector_store() -> None:
    """Issue 26, B5: one vector store over any backend; the old base class of the PostgreSQL store stays one
    release as a deprecated alias."""
    import langchain_ragspine.vectorstores as vectorstores

    with pytest.warns(DeprecationWarning, match=r"RagSpineVectorStore\(backend, embedding\)"):
        assert vectorstores.VersionedVectorStore is RagSpineVectorStore


def test_versioned_vector_store_still_imports_from_its_old_module_with_one_warning_at_the_users_line() -> None:
    """Regression (issue 26 trial, FAIL 4): ``from langchain_ragspine.vectorstores.base import VersionedVectorStore``
    (where it was defined and exported) raised ImportError; the package's alias warned twice per import."""
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        from langchain_ragspine.vectorstores import VersionedVectorStore as from_package
        from langchain_ragspine.vectorstores.base import VersionedVectorStore as from_base
    assert from_base is from_package is RagSpineVectorStore
    assert [(w.category, w.filename) for w in seen] == [(DeprecationWarning, __file__)] * 2


def test_a_bad_store_dir_or_search_type_is_named(tmp_path: Path) -> None:
    """Regression (issue 26 trial, FAIL 6): ``RagSpineVectorStore(123, emb)`` said only 'expected str, bytes or
    os.PathLike object, not int'; ``search(q, "bogus")`` listed three search types though five work."""
    with pytest.raises(TypeError, match=r"store_dir must be a store directory .* got int"):
        RagSpineVectorStore(123, EMB)  # type: ignore[arg-type]
    store = RagSpineVectorStore(tmp_path / "S", EMB)
    store.add_texts(["rainy season in June"], ids=["r"])
    with pytest.raises(ValueError, match="'bogus' is not one of 'similarity', 'similarity_score_threshold', 'mmr', "
                                         "'hybrid', 'bm25'"):
        store.search("rain", "bogus")
    assert [d.id for d in store.search("rainy season", "bm25")] == ["r"]
