"""DenseRetriever: filters before scoring in every index kind, the embedding cache, persistence, RESTRICTED,
plugging in a LangChain VectorStore, and LangChain's standard retriever suite."""

from __future__ import annotations

import json
import pickle
import sqlite3
import warnings
from pathlib import Path

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_tests.integration_tests import RetrieversIntegrationTests

from langchain_ragspine.document_compressors.restricted import drop_restricted
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.errors import StoreError
from langchain_ragspine.filters import UnknownFilterFieldWarning, compile_filter
from langchain_ragspine.retrievers import BM25Retriever, DenseRetriever

KINDS = ("flat", "ivf", "hnsw")


class TableEmbeddings(Embeddings):
    """Vectors chosen by the test: ``table[text]``; counts document and query calls."""

    def __init__(self, table: dict[str, np.ndarray]) -> None:
        self.table = {t: np.asarray(v, dtype=np.float32) for t, v in table.items()}
        self.documents_embedded: list[str] = []
        self.queries: list[str] = []
        self.async_queries: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.documents_embedded.extend(texts)
        return [self.table[t].tolist() for t in texts]

    def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return self.table[text].tolist()

    async def aembed_query(self, text: str) -> list[float]:
        self.async_queries.append(text)
        return self.table[text].tolist()


class CountingEmbeddings(Embeddings):
    """HashingEmbeddings that records every text it embeds as a document."""

    def __init__(self, size: int = 64) -> None:
        self.inner = HashingEmbeddings(size)
        self.embedded: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.embedded.extend(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


def _dept_corpus() -> tuple[list[Document], TableEmbeddings]:
    """100 ``dept=a`` chunks next to the query and one ``dept=c`` chunk far from it (cosine < 0)."""
    rng = np.random.default_rng(0)
    d = 16
    query = np.zeros(d, np.float32)
    query[0] = 1.0
    table: dict[str, np.ndarray] = {"梅雨の季節はいつですか": query}
    docs = []
    for i in range(100):
        text = f"梅雨についての資料 {i}"
        table[text] = query + 0.05 * rng.standard_normal(d).astype(np.float32)
        docs.append(Document(page_content=text, metadata={"chunk_id": f"a{i:03d}#0", "dept": "a"}))
    far = -query.copy()
    far[1] = 0.5
    table["経理部の旅費規程"] = far
    docs.append(Document(page_content="経理部の旅費規程", metadata={"chunk_id": "c000#0", "dept": "c"}))
    return docs, TableEmbeddings(table)


# -- filters before scoring ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("exact_max_rows", [4096, 0])
def test_filter_runs_before_scoring_in_every_index_kind(kind: str, exact_max_rows: int) -> None:
    docs, emb = _dept_corpus()
    dense = DenseRetriever(docs=docs, embedding=emb, k=4, index_kind=kind)
    assert dense.index is not None and dense.index.kind == kind
    dense.index.exact_max_rows = exact_max_rows  # 0: through FAISS's IDSelector, else exact numpy scoring
    unfiltered = dense.invoke("梅雨の季節はいつですか")
    assert len(unfiltered) == 4 and all(d.metadata["dept"] == "a" for d in unfiltered)
    got = dense.invoke("梅雨の季節はいつですか", filter={"dept": "c"})
    assert [d.metadata["chunk_id"] for d in got] == ["c000#0"]
    assert got[0].metadata["scores"]["vector"] < 0  # far from the query, and still found
    assert dense.invoke("梅雨の季節はいつですか", filter={"dept": "nobody"}) == []
    default_filtered = DenseRetriever(docs=docs, embedding=emb, k=4, index_kind=kind, filter={"dept": "c"})
    assert [d.metadata["chunk_id"] for d in default_filtered.invoke("梅雨の季節はいつですか")] == ["c000#0"]
    # a call's filter is ANDed with the retriever's own: {} or another value never lifts it
    assert [d.metadata["chunk_id"] for d in default_filtered.invoke("梅雨の季節はいつですか", filter={})] == ["c000#0"]
    assert default_filtered.invoke("梅雨の季節はいつですか", filter={"dept": "a"}) == []


def test_filter_case_holds_in_both_channels() -> None:
    """The issue's rule: one evaluator, before scoring, in BM25 and dense alike."""
    docs, emb = _dept_corpus()
    bm25 = BM25Retriever.from_documents(docs, k=4)
    dense = DenseRetriever.from_documents(docs, emb, k=4)
    for channel in (bm25, dense):
        top = channel.invoke("梅雨の季節はいつですか")
        assert len(top) == 4 and all(d.metadata["dept"] == "a" for d in top)
        got = channel.invoke("梅雨の季節はいつですか", filter={"dept": "c"})
        assert [d.metadata["chunk_id"] for d in got] == ["c000#0"], type(channel).__name__


@pytest.mark.parametrize("kind", KINDS)
def test_typed_and_missing_field_filters(kind: str) -> None:
    years = [2018, "2019", 2020, "2021", 2022, "2023", None]
    docs = []
    for i, y in enumerate(years):
        md = {"chunk_id": f"y{i}#0"}
        if y is not None:
            md["year"] = y
        docs.append(Document(page_content=f"年次報告書 第{i}版", metadata=md))
    dense = DenseRetriever(docs=docs, embedding=HashingEmbeddings(64), k=10, index_kind=kind)
    # the stored type decides: numbers order as numbers (a "2020" operand too), stored strings as strings, and a
    # number operand does not order against a stored string
    got = dense.invoke("年次報告書", filter={"year": {"gte": 2020}})
    assert sorted(d.metadata["chunk_id"] for d in got) == ["y2#0", "y4#0"]
    got = dense.invoke("年次報告書", filter={"year": {"gte": "2020", "lt": "2022"}})
    assert sorted(d.metadata["chunk_id"] for d in got) == ["y2#0", "y3#0"]
    got = dense.invoke("年次報告書", filter={"year": {"ne": 2018}})
    assert "y6#0" not in {d.metadata["chunk_id"] for d in got}  # a missing field never matches, even for ne
    with pytest.warns(UnknownFilterFieldWarning, match="'missing_field'"):
        assert dense.invoke("年次報告書", filter={"missing_field": "x"}) == []
    with warnings.catch_warnings():  # warned once per process for the field and these chunks' fields
        warnings.simplefilter("error", UnknownFilterFieldWarning)
        assert dense.invoke("年次報告書", filter={"missing_field": {"nin": ["x"]}}) == []
    with pytest.raises(ValueError, match="unknown operator"):
        dense.invoke("年次報告書", filter={"year": {"approx": 2020}})


# -- results ----------------------------------------------------------------------------------------------------
def test_results_are_scored_copies_best_first() -> None:
    docs, emb = _dept_corpus()
    dense = DenseRetriever(docs=docs, embedding=emb, k=5)
    got = dense.invoke("梅雨の季節はいつですか")
    q = emb.table["梅雨の季節はいつですか"]
    expected = []
    for d in docs:
        v = emb.table[d.page_content]
        expected.append((-float(v @ q / np.linalg.norm(v)), d.metadata["chunk_id"]))
    expected.sort()
    assert [d.metadata["chunk_id"] for d in got] == [cid for _, cid in expected[:5]]
    for doc, (neg, _) in zip(got, expected, strict=False):
        s = doc.metadata["scores"]
        assert s["vector"] == pytest.approx(-neg, abs=1e-5) and s["fused"] == s["vector"]
        assert s["bm25"] is None and s["rerank"] is None
    assert "scores" not in docs[0].metadata  # stored documents are not mutated
    assert [i for i, _ in dense.search_by_vector(q, k=5)] == [
        next(j for j, d in enumerate(docs) if d.metadata["chunk_id"] == cid) for _, cid in expected[:5]
    ]


def test_k_bounds_empty_inputs_and_bad_arguments() -> None:
    docs, emb = _dept_corpus()
    dense = DenseRetriever(docs=docs, embedding=emb, k=3)
    assert len(dense.invoke("梅雨の季節はいつですか")) == 3
    assert len(dense.invoke("梅雨の季節はいつですか", k=7)) == 7
    assert len(dense.invoke("梅雨の季節はいつですか", k=500)) == 101
    n_queries = len(emb.queries)
    assert dense.invoke("") == [] and dense.invoke("   \n") == []
    assert dense.invoke("梅雨の季節はいつですか", filter={"dept": "zzz"}) == []
    assert len(emb.queries) == n_queries  # nothing to search: the query is not even embedded
    with pytest.raises(TypeError, match="unexpected keyword"):
        dense.invoke("梅雨の季節はいつですか", top_k=2)
    for bad in (0, -1):
        with pytest.raises(ValueError, match="k must be an int >= 1"):
            dense.invoke("梅雨の季節はいつですか", k=bad)
        with pytest.raises(ValueError, match="k must be an int >= 1"):
            DenseRetriever(docs=docs, embedding=emb, k=bad)
    with pytest.raises(ValueError, match="index_kind"):
        DenseRetriever(docs=docs, embedding=emb, index_kind="annoy")
    with pytest.raises(ValueError, match="batch_size must be an int >= 1"):
        DenseRetriever(docs=docs, embedding=emb, batch_size=0)
    with pytest.raises(ValueError, match="shape"):
        dense.search_by_vector(np.ones(3))
    empty = DenseRetriever(docs=[], embedding=emb)
    assert empty.index is None and empty.invoke("梅雨の季節はいつですか") == [] and empty.last_embedded == 0


async def test_async_uses_aembed_query() -> None:
    docs, emb = _dept_corpus()
    dense = DenseRetriever(docs=docs, embedding=emb, k=4)
    sync = dense.invoke("梅雨の季節はいつですか", filter={"dept": "c"})
    got = await dense.ainvoke("梅雨の季節はいつですか", filter={"dept": "c"})
    assert got == sync and emb.async_queries == ["梅雨の季節はいつですか"]
    assert len(await dense.ainvoke("梅雨の季節はいつですか", k=2)) == 2
    with pytest.raises(TypeError):
        await dense.ainvoke("梅雨の季節はいつですか", top_k=2)


# -- RESTRICTED -----------------------------------------------------------------------------------------------------
def test_restricted_is_never_embedded_indexed_or_returned(tmp_path: Path) -> None:
    secret = "極秘: 役員報酬の一覧"
    docs = [
        Document(page_content="役員会の議事録の公開版", metadata={"chunk_id": "p#0", "sensitivity": "PUBLIC"}),
        Document(page_content=secret, metadata={"chunk_id": "s#0", "sensitivity": " ｒｅｓｔｒｉｃｔｅｄ"}),
        Document(page_content="役員報酬の決め方", metadata={"chunk_id": "p#1"}),
    ]
    emb = CountingEmbeddings()
    dense = DenseRetriever(docs=docs, embedding=emb, k=10, cache_path=str(tmp_path / "emb.sqlite"))
    assert secret not in emb.embedded and len(emb.embedded) == 2
    assert dense.index is not None and "s#0" not in dense.index.chunk_ids
    assert all(d.metadata["chunk_id"] != "s#0" for d in dense.docs)
    got = dense.invoke(secret)
    assert got and all(secret not in d.page_content for d in got)
    with sqlite3.connect(tmp_path / "emb.sqlite") as conn:
        assert conn.execute("SELECT COUNT(*) FROM embeddings WHERE chunk_id = 's#0'").fetchone()[0] == 0
    dense.save(tmp_path / "dense")
    assert secret not in (tmp_path / "dense" / "docs.jsonl").read_text("utf-8")


# -- embedding cache ------------------------------------------------------------------------------------------------
def _corpus(texts_by_doc: dict[str, list[str]]) -> list[Document]:
    return [
        Document(page_content=t, metadata={"doc_id": doc_id, "chunk_id": f"{doc_id}#{i}"})
        for doc_id, texts in texts_by_doc.items()
        for i, t in enumerate(texts)
    ]


def test_cache_embeds_only_what_changed(tmp_path: Path) -> None:
    cache = str(tmp_path / "emb.sqlite")
    corpus = {
        "law": ["第一条 この法律は", "第二条 定義", "第三条 適用範囲"],
        "faq": ["Q. 梅雨はいつ？", "A. 六月ごろです"],
        "en": ["The rainy season", "begins in June"],
    }
    emb = CountingEmbeddings()
    first = DenseRetriever.from_documents(_corpus(corpus), emb, cache_path=cache)
    assert first.last_embedded == 7 and len(emb.embedded) == 7

    emb.embedded.clear()
    second = DenseRetriever.from_documents(_corpus(corpus), emb, cache_path=cache)
    assert second.last_embedded == 0 and emb.embedded == []  # unchanged corpus: nothing embedded
    assert second.invoke("梅雨はいつ") == first.invoke("梅雨はいつ")
    np.testing.assert_array_equal(second.index.vectors(), first.index.vectors())

    changed = dict(corpus, faq=["Q. 梅雨はいつ始まる？", "A. 六月上旬です"])  # one document rewritten
    emb.embedded.clear()
    third = DenseRetriever.from_documents(_corpus(changed), emb, cache_path=cache)
    assert third.last_embedded == 2 and sorted(emb.embedded) == sorted(changed["faq"])

    renamed = _corpus(changed)
    renamed[0] = Document(page_content=renamed[0].page_content, metadata={"chunk_id": "law-v2#0"})
    emb.embedded.clear()
    fourth = DenseRetriever.from_documents(renamed, emb, cache_path=cache)
    assert fourth.last_embedded == 1 and emb.embedded == ["第一条 この法律は"]  # key = chunk_id + content hash

    emb.embedded.clear()
    other_model = DenseRetriever.from_documents(_corpus(corpus), emb, cache_path=cache, model_key="another-model")
    assert other_model.last_embedded == 7  # the model key is part of the cache key

    no_cache = DenseRetriever.from_documents(_corpus(corpus), CountingEmbeddings())
    assert no_cache.last_embedded == 7
    np.testing.assert_allclose(no_cache.index.vectors(), first.index.vectors(), rtol=1e-6)


# -- persistence ----------------------------------------------------------------------------------------------------
@pytest.fixture
def no_pickle(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*a: object, **k: object) -> None:
        raise AssertionError("pickle used")

    for name in ("load", "loads", "Unpickler", "dump", "dumps", "Pickler"):
        monkeypatch.setattr(pickle, name, boom)


@pytest.mark.parametrize("kind", KINDS)
def test_save_load_round_trip(kind: str, tmp_path: Path, no_pickle: None) -> None:
    docs, emb = _dept_corpus()
    docs[5].metadata["year"] = 2021
    dense = DenseRetriever(docs=docs, embedding=emb, k=6, index_kind=kind, filter={"dept": {"in": ["a", "c"]}})
    dense.save(tmp_path / "dense")
    names = sorted(p.name for p in (tmp_path / "dense").iterdir())
    assert names == ["docs.jsonl", "ids.sqlite", "index.faiss", "retriever.json", "vector_index.json"]
    assert not any(p.suffix in (".pkl", ".pickle") or p.read_bytes()[:1] == b"\x80" for p in (tmp_path / "dense").iterdir())
    n_docs_embedded = len(emb.documents_embedded)
    back = DenseRetriever.load(tmp_path / "dense", embedding=emb)
    assert len(emb.documents_embedded) == n_docs_embedded and back.last_embedded == 0
    assert back.docs == dense.docs and back.k == 6 and back.filter == dense.filter and back.index_kind == kind
    assert back.index.kind == dense.index.kind and back.index.chunk_ids == dense.index.chunk_ids
    for flt in (None, {"dept": "c"}, {"year": {"gte": 2020}}):
        assert back.invoke("梅雨の季節はいつですか", filter=flt) == dense.invoke("梅雨の季節はいつですか", filter=flt)
    assert len(DenseRetriever.load(tmp_path / "dense", embedding=emb, k=2).invoke("梅雨の季節はいつですか")) == 2


def test_save_load_empty_and_model_checks(tmp_path: Path) -> None:
    emb = HashingEmbeddings(32)
    DenseRetriever(docs=[], embedding=emb).save(tmp_path / "empty")
    assert DenseRetriever.load(tmp_path / "empty", embedding=emb).invoke("x") == []
    docs = [Document(page_content=f"文書 {i}", metadata={"chunk_id": f"d{i}#0"}) for i in range(5)]
    DenseRetriever(docs=docs, embedding=emb).save(tmp_path / "d")
    with pytest.raises(ValueError, match="HashingEmbeddings"):
        DenseRetriever.load(tmp_path / "d", embedding=HashingEmbeddings(64))
    forced = DenseRetriever.load(tmp_path / "d", embedding=HashingEmbeddings(64), model_key="HashingEmbeddings(size=32)")
    with pytest.raises(ValueError, match="shape"):  # the index is 32-dimensional, the model 64
        forced.invoke("文書")
    with pytest.raises(ValueError, match="index_kind"):
        DenseRetriever.load(tmp_path / "d", embedding=emb, index_kind="hnsw")
    DenseRetriever(docs=docs, embedding=emb, model_key="my-model-v1").save(tmp_path / "explicit")
    assert DenseRetriever.load(tmp_path / "explicit", embedding=emb).model_key == "my-model-v1"


def _saved(tmp_path: Path) -> Path:
    docs = [Document(page_content=f"文書 {i}", metadata={"chunk_id": f"d{i}#0"}) for i in range(20)]
    DenseRetriever(docs=docs, embedding=HashingEmbeddings(32)).save(tmp_path / "d")
    return tmp_path / "d"


def test_corrupt_index_file_is_a_store_error_naming_it(tmp_path: Path) -> None:
    root = _saved(tmp_path)
    (root / "index.faiss").write_bytes((root / "index.faiss").read_bytes()[:100])
    with pytest.raises(StoreError) as err:
        DenseRetriever.load(root, embedding=HashingEmbeddings(32))
    assert err.value.path == str(root / "index.faiss")


def test_mismatched_id_map_is_a_store_error_naming_it(tmp_path: Path) -> None:
    root = _saved(tmp_path)
    with sqlite3.connect(root / "ids.sqlite") as conn:
        conn.execute("UPDATE ids SET chunk_id = 'intruder#0' WHERE row = 3")
    with pytest.raises(StoreError, match="does not match") as err:
        DenseRetriever.load(root, embedding=HashingEmbeddings(32))
    assert err.value.path == str(root / "ids.sqlite")
    with sqlite3.connect(root / "ids.sqlite") as conn:
        conn.execute("DELETE FROM ids WHERE row = 19")
    with pytest.raises(StoreError) as err:
        DenseRetriever.load(root, embedding=HashingEmbeddings(32))
    assert err.value.path == str(root / "ids.sqlite")


def test_edited_documents_are_a_store_error(tmp_path: Path) -> None:
    root = _saved(tmp_path)
    lines = (root / "docs.jsonl").read_text("utf-8").splitlines()
    row = json.loads(lines[4])
    row["page_content"] = "書き換えられた本文"
    lines[4] = json.dumps(row, ensure_ascii=False)
    (root / "docs.jsonl").write_text("\n".join(lines) + "\n", "utf-8")
    with pytest.raises(StoreError, match="differs") as err:
        DenseRetriever.load(root, embedding=HashingEmbeddings(32))
    assert err.value.path == str(root / "docs.jsonl") and err.value.line == 5
    (root / "docs.jsonl").write_text("{broken\n", "utf-8")
    with pytest.raises(StoreError) as err:
        DenseRetriever.load(root, embedding=HashingEmbeddings(32))
    assert err.value.path == str(root / "docs.jsonl") and err.value.line == 1
    with pytest.raises(StoreError, match="no dense index"):
        DenseRetriever.load(tmp_path / "nowhere", embedding=HashingEmbeddings(32))


def test_failed_save_keeps_the_previous_index(tmp_path: Path) -> None:
    root = _saved(tmp_path)
    bad = DenseRetriever(
        docs=[Document(page_content="x", metadata={"chunk_id": "x#0", "when": object()})], embedding=HashingEmbeddings(32)
    )
    with pytest.raises(ValueError, match="x#0"):
        bad.save(root)
    assert len(DenseRetriever.load(root, embedding=HashingEmbeddings(32)).docs) == 20
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]


# -- any LangChain VectorStore as the dense channel ------------------------------------------------------------------
def test_in_memory_vector_store_plugs_in_as_a_channel() -> None:
    docs, emb = _dept_corpus()
    docs.append(Document(page_content="梅雨についての資料 0", metadata={"chunk_id": "r#0", "sensitivity": "RESTRICTED"}))
    store = InMemoryVectorStore.from_documents(drop_restricted(docs), emb)
    channel = store.as_retriever(search_kwargs={"k": 4})
    got = channel.invoke("梅雨の季節はいつですか")
    assert len(got) == 4 and all(d.metadata["dept"] == "a" for d in got)
    assert [d.metadata["chunk_id"] for d in got] == [
        d.metadata["chunk_id"] for d in DenseRetriever(docs=docs, embedding=emb, k=4).invoke("梅雨の季節はいつですか")
    ]
    assert len(channel.invoke("梅雨の季節はいつですか", k=2)) == 2  # per-call k through kwargs
    pred = compile_filter({"dept": "c"})  # the package's filters, in the store's own (callable) syntax
    got = channel.invoke("梅雨の季節はいつですか", filter=lambda d: pred(d.metadata))
    assert [d.metadata["chunk_id"] for d in got] == ["c000#0"]


# -- LangChain's standard retriever suite ---------------------------------------------------------------------------
_STANDARD_DOCS = [
    Document(page_content=f"梅雨は東アジアの雨季です。資料{i}番。", metadata={"chunk_id": f"doc{i}#0"}) for i in range(6)
]


class TestDenseRetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[DenseRetriever]:
        return DenseRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        return {"docs": _STANDARD_DOCS, "embedding": HashingEmbeddings(64), "k": 4}

    @property
    def retriever_query_example(self) -> str:
        return "梅雨とは"
