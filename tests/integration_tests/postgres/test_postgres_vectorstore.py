"""``PostgresVectorStore``: a RagSpine store in PostgreSQL through LangChain's ``VectorStore`` face — add or update
by id (one new version per document), delete (retraction when a document is left empty), ``get_by_ids``,
similarity search with the package's filters, relevance scores, ``as_retriever`` (every search type), ``from_documents``;
RESTRICTED chunks leave through no method; records read back as written (issue 26, B5: ``RagSpineVectorStore`` over
the PostgreSQL backend).  The same rows serve ``PostgresSource`` (BM25, hybrid) unchanged.

Needs the session's PostgreSQL (``pg_server`` in ``tests/conftest.py``); skips, saying why, without it.
"""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore, VectorStoreRetriever

from langchain_ragspine.backends.postgres.chunk_store import PostgresChunkStore
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.errors import StoreError
from langchain_ragspine.filters import UnknownFilterFieldWarning
from langchain_ragspine.pipeline.plan import build_retriever
from langchain_ragspine.pipeline.sources import PostgresSource
from langchain_ragspine.retrievers import DenseRetriever
from langchain_ragspine.vectorstores import PostgresVectorStore, as_chunks

EMB = HashingEmbeddings(64)

DOCS = [
    Document(page_content="梅雨は六月から七月にかけて続く雨の季節。", metadata={"lang": "ja", "year": 2024}),
    Document(page_content="台風は夏から秋にかけて日本に接近する。", metadata={"lang": "ja", "year": 2023}),
    Document(page_content="The rainy season in Japan starts in June.", metadata={"lang": "en", "year": 2024}),
    Document(page_content="極秘 梅雨 rain", metadata={"lang": "ja", "sensitivity": "restricted"}),
]
IDS = ["tsuyu", "taifu", "rain", "secret"]


@pytest.fixture
def store(pg_url: str) -> PostgresVectorStore:
    return PostgresVectorStore(pg_url, EMB)


def test_is_a_langchain_vectorstore_that_ranks_as_dense_retriever(store: PostgresVectorStore) -> None:
    assert isinstance(store, VectorStore) and store.embeddings is EMB
    assert store.similarity_search("梅雨") == []  # empty store: nothing yet, no error
    assert store.add_documents(DOCS, ids=IDS) == IDS
    stored = as_chunks(DOCS, IDS)
    ours = DenseRetriever.from_documents(stored, EMB, k=10)
    for q in ("梅雨の季節", "rain in June", "台風"):
        got = store.similarity_search_with_score(q, k=10)
        want = [(d.metadata["chunk_id"], d.metadata["scores"]["vector"]) for d in ours.invoke(q)]
        assert [(d.id, round(s, 5)) for d, s in got] == [(c, round(s, 5)) for c, s in want]
    top = store.similarity_search("梅雨は六月から七月にかけて続く雨の季節。", k=1)[0]
    assert top.id == "tsuyu" and top.page_content == DOCS[0].page_content
    # read back as written (issue 26, B5): no lineage keys, no scores in the metadata (the directory store's rule)
    assert top.metadata == DOCS[0].metadata


def test_restricted_never_leaves(store: PostgresVectorStore) -> None:
    store.add_documents(DOCS, ids=IDS)
    assert all(d.id != "secret" for d in store.similarity_search("極秘 梅雨 rain", k=10))
    assert [d.id for d in store.get_by_ids(["secret", "rain", "nope"])] == ["rain"]
    assert all(d.id != "secret" for d in store.as_retriever(search_kwargs={"k": 10}).invoke("極秘"))


def test_filters_are_the_package_predicates(store: PostgresVectorStore) -> None:
    store.add_documents(DOCS, ids=IDS)
    assert {d.id for d in store.similarity_search("梅雨", k=10, filter={"lang": "ja"})} == {"tsuyu", "taifu"}
    assert {d.id for d in store.similarity_search("梅雨", k=10, filter={"year": {"gte": 2024}})} == {"tsuyu", "rain"}
    with pytest.warns(UnknownFilterFieldWarning) as record:
        assert store.similarity_search("梅雨", k=10, filter={"missing": {"ne": 1}}) == []  # fails closed
    assert [w.filename for w in record] == [__file__]  # the caller's line, not the store's
    retriever = store.as_retriever(search_kwargs={"k": 10, "filter": {"lang": "en"}})
    assert isinstance(retriever, VectorStoreRetriever)
    assert [d.id for d in retriever.invoke("rain")] == ["rain"]
    with pytest.raises(ValueError):
        store.similarity_search("梅雨", filter={"year": {"bogus": 1}})
    # a keyword similarity search does not use is refused by name (it was taken and silently ignored)
    with pytest.raises(ValueError, match=r"fetch_k=3 has no meaning for search_type='similarity'"):
        store.similarity_search("梅雨", k=10, fetch_k=3)
    with pytest.raises(TypeError, match=r"got unexpected argument 'kk' \(did you mean 'k'\?\)"):
        store.similarity_search("梅雨", kk=3)
    with pytest.raises(ValueError, match="k"):
        store.similarity_search("梅雨", k=0)


def test_add_or_update_by_id_keeps_one_version_per_document(store: PostgresVectorStore, pg_url: str) -> None:
    chunks = [Document(page_content=f"第{i}条 梅雨", metadata={"doc_id": "law", "chunk_id": f"law#{i}"}) for i in range(3)]
    assert store.add_documents(chunks) == ["law#0", "law#1", "law#2"]
    store.add_documents([Document(page_content="第1条 改正 台風", metadata={"doc_id": "law", "chunk_id": "law#1"}),
                         Document(page_content="第3条 追加", metadata={"doc_id": "law", "chunk_id": "law#3"})])
    with PostgresChunkStore(pg_url, read_only=True) as s:
        assert s.current_version("law") == 2
        assert [(c.chunk_id, c.text) for c in s.iter_chunks(doc_id="law")] == [
            ("law#0", "第0条 梅雨"), ("law#1", "第1条 改正 台風"), ("law#2", "第2条 梅雨"), ("law#3", "第3条 追加")]
    assert store.get_by_ids(["law#1"])[0].page_content == "第1条 改正 台風"
    assert store.similarity_search("第1条 改正 台風", k=1)[0].id == "law#1"
    with pytest.raises(ValueError, match="given twice"):
        store.add_documents([Document(page_content="a"), Document(page_content="b")], ids=["x", "x"])
    with pytest.raises(ValueError, match="got 1 documents and 3 ids"):
        store.add_documents([Document(page_content="a")], ids=["x", "y", "z"])
    generated = store.add_texts(["梅雨 前線"], [{"lang": "ja"}])
    assert len(generated) == 1 and len(generated[0]) == 32  # uuid4 hex, its own one-chunk document
    assert store.get_by_ids(generated)[0].metadata == {"lang": "ja"}  # as written (issue 26, B5)
    with PostgresChunkStore(pg_url, read_only=True) as s:  # the row has its lineage
        row = s.get_chunks(generated)[generated[0]]
        assert (row.doc_id, row.chunk_id, row.version) == (generated[0], generated[0], 1)


def test_delete_makes_a_new_version_or_retracts(store: PostgresVectorStore, pg_url: str) -> None:
    store.add_documents(DOCS, ids=IDS)
    store.add_documents([Document(page_content=f"節{i} 梅雨", metadata={"doc_id": "book"}) for i in range(2)],
                        ids=["book#0", "book#1"])
    assert store.delete(["tsuyu", "book#0", "unknown"]) is True
    assert store.get_by_ids(["tsuyu", "book#0", "book#1"]) == store.get_by_ids(["book#1"])
    assert all(d.id not in ("tsuyu", "book#0") for d in store.similarity_search("梅雨", k=10))
    with PostgresChunkStore(pg_url, read_only=True) as s:
        assert "tsuyu" not in s.doc_ids() and "tsuyu" in s.doc_ids(include_retracted=True)
        assert s.current_version("book") == 2
    with pytest.raises(ValueError, match="needs the ids"):
        store.delete()


def test_from_documents_and_the_same_rows_serve_bm25_and_hybrid(pg_url: str) -> None:
    with pytest.raises(ValueError, match="url="):
        PostgresVectorStore.from_documents(DOCS, EMB)
    store = PostgresVectorStore.from_documents([d.model_copy(update={"id": i}) for d, i in zip(DOCS, IDS, strict=True)],
                                               EMB, url=pg_url)
    assert sorted(d.id for d in store.get_by_ids(IDS)) == ["rain", "taifu", "tsuyu"]
    with PostgresSource(pg_url, embedding=EMB) as source:
        assert build_retriever("bm25", source, k=3).invoke("梅雨")[0].metadata["chunk_id"] == "tsuyu"
        assert {d.metadata["chunk_id"] for d in build_retriever("hybrid", source, k=10).invoke("梅雨")} == {
            "tsuyu", "taifu", "rain"}
    rel = store.similarity_search_with_relevance_scores("梅雨は六月から七月にかけて続く雨の季節。", k=3)
    assert rel[0][0].id == "tsuyu" and rel[0][1] == pytest.approx(1.0, abs=1e-5)
    assert all(0.0 <= s <= 1.0 for _, s in rel)


def test_a_store_of_another_model_is_refused(pg_url: str) -> None:
    PostgresVectorStore(pg_url, EMB).add_documents(DOCS[:1], ids=["a"])
    with pytest.raises(StoreError, match="made with"):
        PostgresVectorStore(pg_url, HashingEmbeddings(32))
    with pytest.raises(ValueError, match="not a PostgreSQL URL"):
        PostgresVectorStore("/tmp/store", EMB)
    with pytest.raises(TypeError, match="Embeddings"):
        PostgresVectorStore(pg_url, "hashing")  # type: ignore[arg-type]


async def test_async_paths_run_the_sync_ones(store: PostgresVectorStore) -> None:
    assert await store.aadd_documents(DOCS[:3], ids=IDS[:3]) == IDS[:3]
    got = await store.asimilarity_search("梅雨の季節", k=2, filter={"lang": "ja"})
    assert [d.id for d in got] == [d.id for d in store.similarity_search("梅雨の季節", k=2, filter={"lang": "ja"})]
    retriever = store.as_retriever(search_kwargs={"k": 1})
    assert [d.id for d in await retriever.ainvoke("The rainy season")] == ["rain"] == [
        d.id for d in retriever.invoke("The rainy season")]


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("delete", r"delete: ids must be a list, got a single str 'abc'"),
        ("get_by_ids", r"get_by_ids: ids must be a list, got a single str 'abc'"),
        ("add_texts ids", r"add_texts: ids must be a list, got a single str 'abc'"),
        ("add_texts texts", r"add_texts: texts must be a list, got a single str 'abc'"),
        ("add_documents ids", r"add_documents: ids must be a list, got a single str 'abc'"),
        ("add_documents None", r"add_documents: documents must be a list, got NoneType"),
        ("metadatas [None]", r"add_texts: metadatas\[0\] must be a dict, got NoneType"),
        ("metadatas ['x']", r"add_texts: metadatas\[0\] must be a dict, got str 'x'"),
    ],
)
def test_a_single_string_for_a_list_is_a_type_error_and_changes_nothing(
    store: PostgresVectorStore, case: str, message: str
) -> None:
    """Regression (new-user trial 16b): ``delete("abc")`` deleted a, b and c and kept abc."""
    store.add_texts(["apple", "banana", "cherry", "all three"], ids=["a", "b", "c", "abc"])
    calls = {
        "delete": lambda: store.delete("abc"),
        "get_by_ids": lambda: store.get_by_ids("abc"),
        "add_texts ids": lambda: store.add_texts(["x1", "x2", "x3"], ids="abc"),
        "add_texts texts": lambda: store.add_texts("abc"),
        "add_documents ids": lambda: store.add_documents([Document("x1"), Document("x2"), Document("x3")], ids="abc"),
        "add_documents None": lambda: store.add_documents(None),
        "metadatas [None]": lambda: store.add_texts(["m"], metadatas=[None]),
        "metadatas ['x']": lambda: store.add_texts(["m"], metadatas=["x"]),
    }
    with pytest.raises(TypeError, match=message):
        calls[case]()
    got = store.get_by_ids(["a", "b", "c", "abc"])
    assert [d.page_content for d in got] == ["apple", "banana", "cherry", "all three"]


# ------------------------------------------------------------------------------------------------ MMR
MMR_DOCS = [
    Document("falcon falcon hr report of the year", metadata={"dept": "hr", "year": 2024}, id="hr1"),
    Document("falcon falcon hr report of the year.", metadata={"dept": "hr", "year": 2024}, id="hr1-copy"),
    Document("falcon sales numbers and hunting", metadata={"dept": "sales", "year": 2024}, id="sales"),
    Document("falcon hr archive", metadata={"dept": "hr", "year": 2020}, id="hr-old"),
]
MMR_QUERY = "falcon hr report of the year"


def _ids(docs: list[Document]) -> list[str]:
    return [str(d.id) for d in docs]


@pytest.fixture
def mmr_stores(store: PostgresVectorStore, tmp_path):
    """The PostgreSQL store and a directory store over the same records (the reference: RagSpineVectorStore)."""
    from langchain_ragspine.vectorstores import RagSpineVectorStore

    directory = RagSpineVectorStore(tmp_path / "S", EMB)
    for s in (store, directory):
        s.add_documents(MMR_DOCS)
    yield store, directory
    directory.close()


def test_mmr_search_picks_as_the_directory_store_does(mmr_stores) -> None:
    """Regression (trial 6d): ``max_marginal_relevance_search`` raised a bare ``NotImplementedError()``."""
    pg, directory = mmr_stores
    assert _ids(pg.similarity_search(MMR_QUERY, k=2)) == ["hr1", "hr1-copy"]  # the near-duplicate second
    for lambda_mult in (0.0, 0.3, 0.5, 1.0):
        for flt in (None, {"dept": "hr"}):
            got = pg.max_marginal_relevance_search(MMR_QUERY, k=2, fetch_k=4, lambda_mult=lambda_mult, filter=flt)
            want = directory.max_marginal_relevance_search(MMR_QUERY, k=2, fetch_k=4, lambda_mult=lambda_mult,
                                                           filter=flt)
            assert _ids(got) == _ids(want), (lambda_mult, flt)
    assert _ids(pg.max_marginal_relevance_search(MMR_QUERY, k=2, fetch_k=4, lambda_mult=0.3)) == ["hr1", "sales"]
    assert _ids(pg.max_marginal_relevance_search(MMR_QUERY, k=2, fetch_k=4, lambda_mult=1.0)) == ["hr1", "hr1-copy"]
    vector = EMB.embed_query(MMR_QUERY)
    assert _ids(pg.max_marginal_relevance_search_by_vector(vector, k=2, fetch_k=4, lambda_mult=0.3)) == [
        "hr1", "sales"]
    assert pg.max_marginal_relevance_search("   ", k=2) == []
    got = pg.max_marginal_relevance_search(MMR_QUERY, k=2, fetch_k=4, lambda_mult=0.3)
    assert got[0].page_content == MMR_DOCS[0].page_content and got[0].metadata["dept"] == "hr"


def test_mmr_retriever_ands_the_filters_sync_and_async(mmr_stores) -> None:
    """Regression (trial 6d): ``as_retriever(search_type="mmr")`` was accepted, then ``invoke`` raised a bare
    ``NotImplementedError()``."""
    pg, directory = mmr_stores
    for s in (pg, directory):
        r = s.as_retriever(search_type="mmr",
                           search_kwargs={"k": 2, "fetch_k": 4, "lambda_mult": 0.3, "filter": {"dept": "hr"}})
        assert _ids(r.invoke(MMR_QUERY)) == ["hr1", "hr-old"], s  # diverse, among hr only
        assert _ids(r.invoke(MMR_QUERY, filter={"year": 2020})) == ["hr-old"]
        assert r.invoke(MMR_QUERY, filter={"dept": "sales"}) == []  # ANDed: never widened to sales
        assert _ids(asyncio.run(r.ainvoke(MMR_QUERY, filter={"year": 2020}))) == ["hr-old"]
    assert _ids(asyncio.run(pg.amax_marginal_relevance_search(MMR_QUERY, k=2, fetch_k=4, lambda_mult=0.3))) == [
        "hr1", "sales"]


def test_mmr_refuses_bad_arguments(mmr_stores) -> None:
    pg, _ = mmr_stores
    with pytest.raises(ValueError, match=r"fetch_k must be an int >= 1"):
        pg.max_marginal_relevance_search(MMR_QUERY, k=2, fetch_k=0)
    with pytest.raises(ValueError, match=r"lambda_mult must be a number in \[0, 1\], got 1.5"):
        pg.max_marginal_relevance_search(MMR_QUERY, lambda_mult=1.5)
    with pytest.raises(TypeError, match=r"max_marginal_relevance_search got unexpected argument 'kk'"):
        pg.max_marginal_relevance_search(MMR_QUERY, kk=2)
    with pytest.raises(ValueError):
        pg.max_marginal_relevance_search(MMR_QUERY, filter={"year": {"bogus": 1}})


def test_mmr_over_the_hnsw_index_reads_the_same_vectors(pg_url: str, monkeypatch) -> None:
    """Above ``RAGSPINE_PG_HNSW_THRESHOLD`` the candidates come through the HNSW query: the same picks."""
    monkeypatch.setenv("RAGSPINE_PG_HNSW_THRESHOLD", "1")
    pg = PostgresVectorStore(pg_url, EMB)
    pg.add_documents(MMR_DOCS)
    assert pg.backend.search().uses_hnsw
    assert _ids(pg.max_marginal_relevance_search(MMR_QUERY, k=2, fetch_k=4, lambda_mult=0.3)) == ["hr1", "sales"]
    assert _ids(pg.max_marginal_relevance_search(MMR_QUERY, k=2, fetch_k=4, lambda_mult=1.0)) == ["hr1", "hr1-copy"]


def test_bm25_and_hybrid_search_types_work_and_an_unknown_one_is_refused_by_name(store: PostgresVectorStore) -> None:
    """``as_retriever(search_type="bm25")`` raised pydantic's ValidationError, then (B6 part) a ValueError pointing
    at PostgresBM25Retriever; now PostgreSQL has every search type of the directory store (issue 26, B6: the same
    results, ``test_postgres_parity.py``), and an unknown one is a ValueError naming it and the ones there are."""
    store.add_documents(DOCS, ids=IDS)
    bm25 = store.as_retriever(search_type="bm25", search_kwargs={"k": 2}).invoke("梅雨")
    assert [d.id for d in bm25] == ["tsuyu"] and bm25[0].metadata["scores"]["bm25"] > 0
    hybrid = store.as_retriever(search_type="hybrid", search_kwargs={"k": 10}).invoke("梅雨 rain")
    assert {d.id for d in hybrid} == {"tsuyu", "taifu", "rain"}  # the RESTRICTED one never
    with pytest.raises(ValueError, match=r"search_type='lexical'\) is not allowed") as caught:
        store.as_retriever(search_type="lexical")
    assert type(caught.value) is ValueError
    assert "'similarity'" in str(caught.value) and "'mmr'" in str(caught.value) and "'hybrid'" in str(caught.value)
    assert store.as_retriever().search_type == "similarity"  # LangChain's default, as before
