"""Multi-index routing: keyword and LLM routers, the fall-back to every index, index_id on every result, chunks
identified within their index, k and filter reaching each index, concurrent ainvoke, and the graph reducer in a real
LangGraph fan-out."""

from __future__ import annotations

import asyncio
import json
import operator
from collections.abc import Mapping
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel
from langchain_core.retrievers import BaseRetriever
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from langchain_ragspine import BM25Retriever
from langchain_ragspine.retrievers import (
    KeywordRouter,
    LLMRouter,
    MultiIndexRetriever,
    fuse_by_index,
    invoke_retriever,
    merge_index_results,
)
from langchain_ragspine.retrievers.multi_index import RoutingDecision, tag_index

from ._transform_fakes import SpyChatModel, SpyRetriever, doc


def _indexes() -> dict[str, SpyRetriever]:
    return {
        "hr": SpyRetriever(default=[doc("leave#0", "有給休暇は年20日。", dept="hr"), doc("README#0", "hr readme")]),
        "eng": SpyRetriever(default=[doc("bm25#0", "BM25 の k1 は 1.5。", dept="eng"), doc("README#0", "eng readme")]),
        "faq": SpyRetriever(default=[doc("faq#0", "よくある質問", dept="faq")]),
    }


def _pairs(docs: list[Document]) -> list[tuple[str, str]]:
    return [(d.metadata["index_id"], d.metadata["chunk_id"]) for d in docs]


def test_keyword_router_selects_and_only_selected_indexes_are_searched():
    idx = _indexes()
    retriever = MultiIndexRetriever(idx, {"hr": ["休暇", "leave"], "eng": ["ＢＭ２５", "deploy"]}, k=5)
    docs = retriever.invoke("有給休暇は何日？")
    assert _pairs(docs) == [("hr", "leave#0"), ("hr", "README#0")]
    assert idx["hr"].queries == ["有給休暇は何日？"] and idx["eng"].calls == [] and idx["faq"].calls == []
    assert retriever.route("How to tune bm25 and request LEAVE").selected == ("hr", "eng")


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_no_known_index_searches_every_index(mode):
    idx = _indexes()
    retriever = MultiIndexRetriever(idx, {"hr": ["休暇"]}, k=10)
    docs = retriever.invoke("天気は？") if mode == "sync" else await retriever.ainvoke("天気は？")
    assert all(r.queries == ["天気は？"] for r in idx.values())
    assert {i for i, _ in _pairs(docs)} == {"hr", "eng", "faq"}
    assert retriever.route("天気は？") == RoutingDecision(("hr", "eng", "faq"), (), "no_known_index")


def _broken(query: str) -> list[str]:
    raise RuntimeError("router down")


@pytest.mark.parametrize(
    "router, fallback",
    [(_broken, "router_error"), (lambda q: ["nope", 3], "no_known_index"), (lambda q: None, "no_known_index"),
     (LLMRouter(SpyChatModel(error="refused"), {"hr": "HR", "eng": "eng", "faq": "faq"}), "router_error"),
     (LLMRouter(FakeListChatModel(responses=["I cannot tell."]), {"hr": "HR", "eng": "E", "faq": "F"}),
      "no_known_index")],
)
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_failing_router_searches_every_index(router, fallback, mode, caplog):
    idx = _indexes()
    retriever = MultiIndexRetriever(idx, router, k=10)
    docs = retriever.invoke("q") if mode == "sync" else await retriever.ainvoke("q")
    assert {i for i, _ in _pairs(docs)} == {"hr", "eng", "faq"}
    decision = retriever.route("q") if mode == "sync" else await retriever.aroute("q")
    assert decision.fallback == fallback and decision.selected == ("hr", "eng", "faq")
    if fallback == "router_error":
        assert "routing failed" in caplog.text


def test_llm_router_reads_known_ids_in_order_and_sees_only_the_query_and_descriptions():
    llm = SpyChatModel(replies=["<think>hr? no</think>Search: ENG, faq, marketing"])
    retriever = MultiIndexRetriever(_indexes(), llm, descriptions={"hr": "人事規程", "eng": "技術文書", "faq": "FAQ"})
    decision = retriever.route("BM25 の設定")
    assert decision.routed == ("eng", "faq") and decision.selected == ("eng", "faq") and decision.fallback is None
    assert "人事規程" in llm.prompts[0] and "BM25 の設定" in llm.prompts[0]
    assert "有給休暇" not in llm.prompts[0]  # no document text is ever shown to the router


def test_same_chunk_id_in_two_indexes_is_two_results_each_with_its_index_id():
    retriever = MultiIndexRetriever(_indexes(), lambda q: ["hr", "eng"], k=10)
    docs = retriever.invoke("readme")
    assert ("hr", "README#0") in _pairs(docs) and ("eng", "README#0") in _pairs(docs)
    assert len(_pairs(docs)) == len(set(_pairs(docs))) == 4
    hr_readme = next(d for d in docs if d.metadata["index_id"] == "hr" and d.metadata["chunk_id"] == "README#0")
    assert hr_readme.page_content == "hr readme"  # the chunk's own text, not the other index's
    # RRF over the two lists: the two rank-1 chunks tie and break on (index_id, chunk_id)
    assert _pairs(docs)[:2] == [("eng", "bm25#0"), ("hr", "leave#0")]


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_k_and_filter_reach_every_selected_index(mode):
    idx = _indexes()
    retriever = MultiIndexRetriever(idx, lambda q: ["hr", "eng"], filter={"dept": {"in": ["hr", "eng"]}},
                                    candidate_k=4)
    docs = (retriever.invoke("q", k=1, filter={"dept": "eng"}) if mode == "sync"
            else await retriever.ainvoke("q", k=1, filter={"dept": "eng"}))
    for i in ("hr", "eng"):
        assert idx[i].calls == [("q", 4, {"$and": [{"dept": {"in": ["hr", "eng"]}}, {"dept": "eng"}]})]
    assert _pairs(docs) == [("eng", "bm25#0")]


def test_one_selected_index_keeps_its_order_and_scores_and_drops_restricted():
    secret = doc("s#0", "SECRET-9", sensitivity="Restricted")
    idx = {"a": SpyRetriever(default=[secret, doc("x#0", scores={"bm25": 3.0})]), "b": SpyRetriever()}
    docs = MultiIndexRetriever(idx, lambda q: ["a"]).invoke("q")
    assert _pairs(docs) == [("a", "x#0")] and docs[0].metadata["scores"] == {"bm25": 3.0}
    fused = MultiIndexRetriever(idx, lambda q: ["a", "b"]).invoke("q")
    assert "SECRET-9" not in json.dumps([d.model_dump() for d in fused])


_FLIGHT = {"now": 0, "peak": 0}


class _Slow(BaseRetriever):
    name_: str

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                k: int | None = None, filter: Mapping[str, Any] | None = None) -> list[Document]:
        return [doc(self.name_)]

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
                                       k: int | None = None, filter: Mapping[str, Any] | None = None
                                       ) -> list[Document]:
        _FLIGHT["now"] += 1
        _FLIGHT["peak"] = max(_FLIGHT["peak"], _FLIGHT["now"])
        for _ in range(5):
            await asyncio.sleep(0)
        _FLIGHT["now"] -= 1
        return [doc(self.name_)]


async def test_ainvoke_searches_the_selected_indexes_concurrently():
    _FLIGHT.update(now=0, peak=0)
    idx = {n: _Slow(name_=n) for n in ("a", "b", "c")}
    docs = await MultiIndexRetriever(idx, lambda q: ["a", "b", "c"], k=3).ainvoke("q")
    assert _FLIGHT["peak"] == 3 and sorted(_pairs(docs)) == [("a", "a"), ("b", "b"), ("c", "c")]


def test_default_router_uses_the_index_ids_and_bm25_indexes_work():
    hr = BM25Retriever.from_documents([Document(page_content="有給休暇は年20日。", metadata={"chunk_id": "leave#0"})])
    eng = BM25Retriever.from_documents([Document(page_content="BM25 の k1 は 1.5。", metadata={"chunk_id": "b#0"})])
    retriever = MultiIndexRetriever({"hr": hr, "eng": eng}, k=3)
    assert _pairs(retriever.invoke("eng: BM25 の k1")) == [("eng", "b#0")]
    assert {i for i, _ in _pairs(retriever.invoke("k1 と休暇"))} == {"hr", "eng"}


@pytest.mark.parametrize(
    "kwargs, error",
    [({"indexes": {}}, ValueError), ({"indexes": {"": SpyRetriever()}}, ValueError),
     ({"indexes": {"a": "x"}}, TypeError), ({"indexes": {"a": SpyRetriever()}, "router": 3}, TypeError),
     ({"indexes": {"a": SpyRetriever()}, "k": 0}, ValueError)],
)
def test_bad_arguments(kwargs, error):
    with pytest.raises(error):
        MultiIndexRetriever(**kwargs)


def test_keyword_router_rejects_a_string_of_keywords():
    with pytest.raises(TypeError):
        KeywordRouter({"hr": "休暇"})


# -- the reducer in a LangGraph fan-out -----------------------------------------------------------------------------------
class State(TypedDict, total=False):
    question: str
    index_id: str
    index_results: Annotated[list[Document], merge_index_results]
    documents: list[Document]
    searched: Annotated[list[str], operator.add]


def test_fan_out_over_indexes_in_a_graph_merges_through_the_reducer():
    idx = _indexes()
    direct = MultiIndexRetriever(idx, lambda q: list(idx), k=5).invoke("readme")

    def fan_out(state: State) -> list[Send]:
        return [Send("search_one", {"question": state["question"], "index_id": i}) for i in idx]

    def search_one(state: State) -> dict[str, Any]:
        docs = invoke_retriever(idx[state["index_id"]], state["question"], k=5)
        # each branch writes its list twice: the reducer keeps one copy per (index_id, chunk_id)
        tagged = tag_index(docs, state["index_id"])
        return {"index_results": tagged + tagged, "searched": [state["index_id"]]}

    def rank(state: State) -> dict[str, Any]:
        return {"documents": fuse_by_index(state["index_results"], k=5)}

    g = StateGraph(State)
    g.add_node("search_one", search_one)
    g.add_node("rank", rank)
    g.add_conditional_edges(START, fan_out, ["search_one"])
    g.add_edge("search_one", "rank")
    g.add_edge("rank", END)
    out = g.compile().invoke({"question": "readme"})
    assert sorted(out["searched"]) == ["eng", "faq", "hr"]
    assert len(out["index_results"]) == 5  # 2 + 2 + 1 distinct (index_id, chunk_id)
    assert _pairs(out["documents"]) == _pairs(direct)  # the same fusion as the retriever's


def test_reducer_rejects_bad_updates():
    with pytest.raises(TypeError):
        merge_index_results([], "text")  # type: ignore[arg-type]
    assert merge_index_results(None, None) == []


@pytest.mark.parametrize("query", ["", "   ", "\n\t\u3000"])
def test_an_empty_query_calls_no_router_model_and_searches_every_index(query):
    # regression: an empty query used to cost one router model call
    llm = SpyChatModel(replies=["hr"])
    indexes = _indexes()
    retriever = MultiIndexRetriever(indexes, llm)
    decision = retriever.route(query)
    assert decision == RoutingDecision(("hr", "eng", "faq"), (), "empty_query")
    assert asyncio.run(retriever.aroute(query)) == decision
    retriever.invoke(query)
    asyncio.run(retriever.ainvoke(query))
    assert llm.prompts == []
    assert all(len(r.calls) == 2 for r in indexes.values())
    assert LLMRouter(llm, {"hr": "HR"})(query) == [] and asyncio.run(LLMRouter(llm, {"hr": "HR"}).acall(query)) == []
    assert llm.prompts == []
