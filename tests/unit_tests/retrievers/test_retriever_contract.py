"""The retriever-call contract (retrievers/contract.py): one rule for how any BaseRetriever is asked for ``k``
results matching a ``filter`` — our retrievers, a VectorStoreRetriever, a retriever with a ``k`` field, a plain one —
used alike by the hybrid, the graphs, the evaluation runner and ``indexing.search``."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import InMemoryVectorStore, VectorStoreRetriever

from langchain_ragspine.arguments import DEFAULT_K
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.evaluation.runner import _searcher
from langchain_ragspine.graphs import build_corrective_rag
from langchain_ragspine.pipeline.sources import search
from langchain_ragspine.retrievers import (
    BM25Retriever,
    DenseRetriever,
    HybridRetriever,
    RetrieverParams,
    ainvoke_retriever,
    invoke_retriever,
    retriever_params,
)
from langchain_ragspine.retrievers.contract import OVERFETCH_MAX_FACTOR

EMB = HashingEmbeddings(64)


def _doc(i: int, dept: str | None = "a", text: str | None = None) -> Document:
    md: dict[str, Any] = {"chunk_id": f"d{i}#0"}
    if dept is not None:
        md["dept"] = dept
    return Document(page_content=text or f"梅雨の季節 資料{i}番", metadata=md)


# 12 documents: one in three is dept "b", the rest "a"
DOCS = [_doc(i, "b" if i % 3 == 2 else "a") for i in range(12)]


def _ids(docs: list[Document]) -> list[str]:
    return [d.metadata["chunk_id"] for d in docs]


class PlainRetriever(BaseRetriever):
    """A user's retriever: no ``k``, no ``filter`` — LangChain silently drops keyword arguments of a call to it."""

    docs: list[Document]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return list(self.docs)


class KFieldRetriever(BaseRetriever):
    """Like LangChain's ``BM25Retriever`` / ``TFIDFRetriever``: ``k`` is a field, not a call keyword."""

    docs: list[Document]
    k: int = 4

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return list(self.docs[: self.k])


class SyncOnlyKRetriever(BaseRetriever):
    """Takes ``k`` in its sync method only; the inherited async method takes no keywords."""

    docs: list[Document]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None
    ) -> list[Document]:
        return list(self.docs[: k or 4])


class SpyStore(InMemoryVectorStore):
    """An ``InMemoryVectorStore`` that records every ``k`` (and whether a ``filter``) it is searched with."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[int, bool]] = []

    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        self.calls.append((k, "filter" in kwargs))
        return super().similarity_search(query, k=k, **kwargs)

    async def asimilarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        self.calls.append((k, "filter" in kwargs))
        return await super().asimilarity_search(query, k=k, **kwargs)


def _store(docs: list[Document] = DOCS) -> SpyStore:
    store = SpyStore(EMB)
    store.add_documents(docs)
    return store


def _ours() -> dict[str, BaseRetriever]:
    bm25 = BM25Retriever.from_documents(DOCS)
    dense = DenseRetriever.from_documents(DOCS, EMB)
    return {"bm25": bm25, "dense": dense, "hybrid": HybridRetriever(retrievers=[bm25, dense])}


# -- what each kind of retriever takes ------------------------------------------------------------------------------
def test_params_of_every_kind_of_retriever() -> None:
    for r in _ours().values():
        assert retriever_params(r) == RetrieverParams(True, True, True, k_field=False)
    assert retriever_params(_store().as_retriever()) == RetrieverParams(True, False, True, k_field=False)
    assert retriever_params(KFieldRetriever(docs=DOCS)) == RetrieverParams(True, False, True, k_field=True)
    assert retriever_params(PlainRetriever(docs=DOCS)) == RetrieverParams(False, False, True, k_field=False)
    assert retriever_params(SyncOnlyKRetriever(docs=DOCS)) == RetrieverParams(True, False, False, k_field=False)
    with pytest.raises(TypeError, match="BaseRetriever"):
        retriever_params(lambda q: [])  # type: ignore[arg-type]


def test_langchain_community_bm25_gets_k_through_its_field() -> None:
    community = pytest.importorskip("langchain_community.retrievers")
    lc = community.BM25Retriever.from_documents(DOCS)  # k = 4
    assert retriever_params(lc).k_field
    assert len(invoke_retriever(lc, "梅雨", k=9)) == 9
    assert lc.k == 4  # the caller's retriever is not modified


# -- k --------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["bm25", "dense", "hybrid"])
def test_our_retrievers_get_k(name: str) -> None:
    r = _ours()[name]
    assert len(invoke_retriever(r, "梅雨の季節", k=7)) == 7
    assert len(invoke_retriever(r, "梅雨の季節")) == DEFAULT_K  # the retriever's own default (issue 26, D1)


def test_a_vector_store_retriever_gets_k_merged_into_search_kwargs() -> None:
    store = _store()
    vsr = store.as_retriever(search_kwargs={"k": 2})
    assert len(invoke_retriever(vsr, "梅雨", k=5)) == 5
    assert store.calls == [(5, False)]
    assert vsr.search_kwargs == {"k": 2}


def test_k_field_and_plain_retrievers() -> None:
    kf = KFieldRetriever(docs=DOCS)
    assert _ids(invoke_retriever(kf, "q", k=10)) == _ids(DOCS[:10])
    assert kf.k == 4
    plain = PlainRetriever(docs=DOCS)
    assert _ids(invoke_retriever(plain, "q", k=3)) == _ids(DOCS[:3])  # truncated
    assert _ids(invoke_retriever(plain, "q")) == _ids(DOCS)


def test_k_counts_distinct_chunks() -> None:
    again = Document(page_content="another rendering", metadata={"chunk_id": "d0#0"})
    keyless = [Document(page_content="same text"), Document(page_content="same text")]
    plain = PlainRetriever(docs=[DOCS[0], again, *keyless, DOCS[1]])
    out = invoke_retriever(plain, "q", k=4)
    assert [d.page_content for d in out] == [DOCS[0].page_content, "same text", "same text", DOCS[1].page_content]


def test_bad_arguments_and_bad_results() -> None:
    plain = PlainRetriever(docs=DOCS)
    for bad, err in ((0, ValueError), (-1, ValueError), ("3", TypeError), (2.0, TypeError), (True, TypeError)):
        with pytest.raises(err, match="k must be an int >= 1"):
            invoke_retriever(plain, "q", k=bad)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown operator"):
        invoke_retriever(plain, "q", filter={"dept": {"$regex": "a"}})  # validated even for a plain retriever
    with pytest.raises(TypeError, match="filter must be a dict"):
        invoke_retriever(plain, "q", filter=["dept"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="other than a list of Documents"):
        invoke_retriever(PlainRetriever.model_construct(docs=["not a document"]), "q")


# -- filter: fail closed ---------------------------------------------------------------------------------------------
def test_a_dict_filter_is_never_handed_to_a_vector_store() -> None:
    store = _store()
    vsr = store.as_retriever()
    with pytest.raises(TypeError):  # InMemoryVectorStore calls its filter: our dict syntax would crash it
        vsr.invoke("梅雨", filter={"dept": "b"})
    out = invoke_retriever(vsr, "梅雨", k=3, filter={"dept": "b"})
    assert len(out) == 3 and {d.metadata["dept"] for d in out} == {"b"}
    assert all(not with_filter for _, with_filter in store.calls[1:])


def test_a_post_filter_over_fetches_until_k_match() -> None:
    # the 3 "b" documents are the ones least like the query: a plain top-3 holds none of them
    docs = [_doc(i, "a", "梅雨 梅雨 梅雨") for i in range(20)] + [_doc(100 + i, "b", f"北京 {i}") for i in range(3)]
    store = _store(docs)
    vsr = store.as_retriever()
    assert {d.metadata["dept"] for d in vsr.invoke("梅雨", k=3)} == {"a"}
    store.calls.clear()
    out = invoke_retriever(vsr, "梅雨", k=3, filter={"dept": "b"})
    assert sorted(_ids(out)) == ["d100#0", "d101#0", "d102#0"]
    assert [k for k, _ in store.calls] == [3, 12, 48]  # 48 > 23 documents: the store is exhausted, stop


def test_over_fetching_is_bounded() -> None:
    docs = [_doc(i, "a") for i in range(300)]
    store = _store(docs)
    out = invoke_retriever(store.as_retriever(), "梅雨", k=2, filter={"dept": "b"})
    assert out == []
    assert [k for k, _ in store.calls] == [2, 8, 32, 128]
    assert store.calls[-1][0] == 2 * OVERFETCH_MAX_FACTOR


def test_a_plain_retriever_never_ignores_a_filter() -> None:
    plain = PlainRetriever(docs=[*DOCS, _doc(99, dept=None)])
    assert len(plain.invoke("q", filter={"dept": "b"})) == 13  # LangChain drops the keyword: nothing filtered
    out = invoke_retriever(plain, "q", filter={"dept": "b"})
    assert _ids(out) == ["d2#0", "d5#0", "d8#0", "d11#0"]
    assert _ids(invoke_retriever(plain, "q", k=2, filter={"dept": "b"})) == ["d2#0", "d5#0"]
    # a missing field never matches, also for ne (the package's evaluator, not the store's)
    assert "d99#0" not in _ids(invoke_retriever(plain, "q", filter={"dept": {"ne": "a"}}))
    assert invoke_retriever(plain, "q", filter={}) == invoke_retriever(plain, "q")  # {}: no filter


def test_our_retrievers_filter_before_scoring() -> None:
    for r in _ours().values():
        out = invoke_retriever(r, "梅雨の季節", k=10, filter={"dept": "b"})
        assert len(out) == 4 and {d.metadata["dept"] for d in out} == {"b"}


def test_search_filters_any_retriever() -> None:
    # regression: indexing.search passed filter= to retriever.invoke, which a plain retriever silently ignored
    out = search(PlainRetriever(docs=DOCS), "q", k=10, filter={"dept": "b"})
    assert _ids(out) == ["d2#0", "d5#0", "d8#0", "d11#0"]


# -- async -----------------------------------------------------------------------------------------------------------
async def test_async_equals_sync_for_every_kind() -> None:
    retrievers = [
        *_ours().values(),
        _store().as_retriever(),
        KFieldRetriever(docs=DOCS),
        PlainRetriever(docs=DOCS),
        SyncOnlyKRetriever(docs=DOCS),  # its async method cannot take k: the sync one runs in a worker thread
    ]
    for r in retrievers:
        for kw in ({}, {"k": 2}, {"k": 5, "filter": {"dept": "b"}}):
            assert await ainvoke_retriever(r, "梅雨の季節", **kw) == invoke_retriever(r, "梅雨の季節", **kw), (r, kw)


# -- the example: a VectorStoreRetriever gets k in a hybrid and in a graph alike -----------------------------
def test_a_vector_store_retriever_gets_k_in_a_hybrid_and_in_a_graph() -> None:
    store = _store()
    vsr = store.as_retriever()
    HybridRetriever(retrievers=[BM25Retriever.from_documents(DOCS), vsr], fetch_k=7).invoke("梅雨")
    assert store.calls == [(7, False)]
    store.calls.clear()
    graph = build_corrective_rag(vsr, k=6, relax_filters=False, max_retries=0)
    graph.invoke({"question": "梅雨の季節はいつ", "filters": None})
    assert store.calls == [(6, False)]
    store.calls.clear()
    final = graph.invoke({"question": "梅雨の季節はいつ", "filters": {"dept": "b"}})
    assert store.calls[0] == (6, False)  # the filter is applied to the results, never handed to the store
    assert final["trace"][1]["filter"] == "post"
    assert {d.metadata["dept"] for d in final["documents"]} <= {"b"}


def test_the_evaluation_runner_asks_through_the_contract() -> None:
    store = _store()
    search_fn, via = _searcher(store.as_retriever(), 9)
    assert via == "invoke(k=...)" and len(search_fn("梅雨")) == 9 and store.calls == [(9, False)]
    assert _searcher(KFieldRetriever(docs=DOCS), 9)[1] == "k field"
    assert _searcher(PlainRetriever(docs=DOCS), 9)[1] == "as returned"
    assert _searcher(BM25Retriever.from_documents(DOCS), 9)[1] == "invoke(k=...)"


def test_vector_store_retriever_is_recognised_by_class() -> None:
    class MyStoreRetriever(VectorStoreRetriever):
        pass

    assert retriever_params(MyStoreRetriever(vectorstore=_store())).takes_k


# -- the callee's side: ContractRetriever ---------------------------------------------------------------------------
class _NoParents:
    def get_parents(self, parent_ids: Any) -> dict[str, Any]:
        return {}


def _contract_retrievers() -> dict[str, BaseRetriever]:
    """Every retriever of the package that takes ``k`` and ``filter`` (the PostgreSQL ones are tested with a
    server in test_postgres_retrievers.py)."""
    import warnings

    from langchain_ragspine.document_compressors import SecondStageRetriever
    from langchain_ragspine.retrievers import (
        DecompositionRetriever,
        FilterExtractionRetriever,
        GlossaryRetriever,
        HyDERetriever,
        MultiIndexRetriever,
        MultiQueryRetriever,
        ParentChildRetriever,
        RAGFusionRetriever,
        StepBackRetriever,
    )

    ours = _ours()
    bm25 = ours["bm25"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the LLM transformations warn that they have no model
        llm_free = {cls.__name__: cls(bm25) for cls in (HyDERetriever, MultiQueryRetriever, RAGFusionRetriever,
                                                         StepBackRetriever, DecompositionRetriever)}
    return {
        **ours,
        **llm_free,
        "multi_index": MultiIndexRetriever({"a": bm25, "b": ours["dense"]}),
        "parent_child": ParentChildRetriever(bm25, _NoParents()),
        "second_stage": SecondStageRetriever(base_retriever=bm25, compressors=[]),
        "filter_extraction": FilterExtractionRetriever(bm25),
        "glossary": GlossaryRetriever(bm25, glossary={"梅雨": ["つゆ"]}),
    }


@pytest.mark.parametrize("name", sorted(_contract_retrievers()))
async def test_every_contract_retriever_takes_k_and_filter_and_refuses_other_keywords(name: str) -> None:
    from langchain_ragspine.retrievers.base import ContractRetriever

    r = _contract_retrievers()[name]
    assert isinstance(r, ContractRetriever)
    assert retriever_params(r) == RetrieverParams(True, True, True, k_field=False)
    message = (
        f"{type(r).__name__}.invoke got unexpected keyword arguments 'bogus', 'top_k' (did you mean 'k'?); known: "
        + ", ".join(repr(n) for n in sorted({"k", "filter", *type(r).call_options}))
    )
    with pytest.raises(TypeError) as sync_error:
        r.invoke("梅雨", k=2, top_k=3, bogus=1)
    with pytest.raises(TypeError) as async_error:
        await r.ainvoke("梅雨", k=2, top_k=3, bogus=1)
    assert str(sync_error.value) == str(async_error.value) == message
    if name != "parent_child":  # its store holds no parents
        docs = r.invoke("梅雨", k=2, filter={"dept": "b"})
        assert 0 < len(docs) <= 2 and {d.metadata["dept"] for d in docs} == {"b"}
        assert _ids(await r.ainvoke("梅雨", k=2, filter={"dept": "b"})) == _ids(docs)


class _Recording:
    calls: list[tuple[str, Any, Any, dict[str, Any], bool]] = []


def _recording_retriever(options: tuple[str, ...] = ()) -> BaseRetriever:
    from typing import ClassVar

    from langchain_ragspine.retrievers.base import ContractRetriever, SyncCall

    class Recorder(ContractRetriever):
        """A user's subclass: one sync hook; the async path reuses it with the call's keywords."""

        call_options: ClassVar[tuple[str, ...]] = options

        def _retrieve(self, query: str, call: SyncCall) -> list[Document]:
            is_sync = isinstance(call.run_manager, CallbackManagerForRetrieverRun)
            _Recording.calls.append((query, call.k, call.filter, dict(call.options), is_sync))
            return DOCS[: call.k or 4]

    return Recorder()


async def test_a_subclass_implements_one_hook_and_gets_k_filter_and_its_options_sync_and_async() -> None:
    _Recording.calls.clear()
    r = _recording_retriever(("depth",))
    assert len(r.invoke("q", k=2, filter={"dept": "a"}, depth=7)) == 2
    assert len(await r.ainvoke("q", k=3, filter={"dept": "b"})) == 3
    assert r.invoke("q") == DOCS[:4]
    assert _Recording.calls == [
        ("q", 2, {"dept": "a"}, {"depth": 7}, True),
        ("q", 3, {"dept": "b"}, {}, True),  # the default async path runs the sync hook with a sync run manager
        ("q", None, None, {}, True),
    ]
    with pytest.raises(TypeError, match=r"^Recorder\.invoke got unexpected keyword argument 'depht' \(did you mean 'depth'\?\)"):
        r.invoke("q", depht=7)
    assert invoke_retriever(r, "q", k=1, filter={"dept": "a"}) == DOCS[:1]  # the contract passes k and filter


def test_from_texts_builds_the_same_documents_for_bm25_and_dense() -> None:
    texts, metas, ids = ["梅雨 六月", "台風 九月"], [{"chunk_id": "a#0"}, {"chunk_id": "b#0"}], ["x", "y"]
    bm25 = BM25Retriever.from_texts(texts, metas, ids)
    dense = DenseRetriever.from_texts(texts, EMB, metas, ids)
    assert bm25.docs == dense.docs == [
        Document(page_content="梅雨 六月", metadata={"chunk_id": "a#0"}, id="x"),
        Document(page_content="台風 九月", metadata={"chunk_id": "b#0"}, id="y"),
    ]
    assert bm25.docs[0].metadata is not metas[0]  # a copy
    for build in (lambda: BM25Retriever.from_texts(texts, [{}]), lambda: DenseRetriever.from_texts(texts, EMB, ids=["x"])):
        with pytest.raises(ValueError, match=r"from_texts got 2 texts, (1 metadatas and 2|2 metadatas and 1) ids"):
            build()
