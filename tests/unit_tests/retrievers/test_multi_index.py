"""Multi-index routing: keyword and LLM routers, the fall-back to every index, index_id on every result, chunks
identified within their index, k and filter reaching each index, concurrent ainvoke, and the graph reducer in a real
LangGraph fan-out."""

from __future__ import annotations

import asyncio
import json
import operator
import re
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
    asearch_index,
    fuse_by_index,
    invoke_retriever,
    merge_index_results,
    search_index,
    tag_index,
)
from langchain_ragspine.retrievers.multi_index import RoutingDecision
from tests.unit_tests._transform_fakes import SpyChatModel, SpyRetriever, doc


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
                                    fetch_k=4)
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


def _fan_out_graph(search_one: Any, idx: Mapping[str, BaseRetriever], k: int = 6) -> Any:
    """A compiled graph: one ``Send`` per index to ``search_one``, then ``fuse_by_index`` of the merged results."""

    def fan_out(state: State) -> list[Send]:
        return [Send("search_one", {"question": state["question"], "index_id": i}) for i in idx]

    def rank(state: State) -> dict[str, Any]:
        return {"documents": fuse_by_index(state["index_results"], k=k)}

    g = StateGraph(State)
    g.add_node("search_one", search_one)
    g.add_node("rank", rank)
    g.add_conditional_edges(START, fan_out, ["search_one"])
    g.add_edge("search_one", "rank")
    g.add_edge("rank", END)
    return g.compile()


def test_fan_out_over_indexes_in_a_graph_merges_through_the_reducer():
    idx = _indexes()
    direct = MultiIndexRetriever(idx, lambda q: list(idx), k=5).invoke("readme")

    def search_one(state: State) -> dict[str, Any]:
        docs = invoke_retriever(idx[state["index_id"]], state["question"], k=5)
        # each branch writes its list twice: the reducer keeps one copy per (index_id, chunk_id)
        tagged = tag_index(docs, state["index_id"])
        return {"index_results": tagged + tagged, "searched": [state["index_id"]]}

    out = _fan_out_graph(search_one, idx, k=5).invoke({"question": "readme"})
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


# -- regressions from the new-user trial (issue 14) -----------------------------------------------------------------------
def _bm25_pair() -> dict[str, BaseRetriever]:
    hr = BM25Retriever.from_documents([Document(page_content="有給休暇は年20日です。", metadata={"chunk_id": "README#0"})])
    eng = BM25Retriever.from_documents([
        Document(page_content="three steps to deploy the BM25 index", metadata={"chunk_id": "deploy#0"})])
    return {"hr": hr, "eng": eng}


@pytest.mark.parametrize(
    "query, selected",
    [("What are the three steps to deploy?", None),  # regression: "three" contains "hr" -> ('hr',)
     ("Tell me about the length of leave", None),  # regression: "length" contains "eng" -> ('eng',)
     ("hr policy", ("hr",)), ("HRの規程", ("hr",)), ("ＨＲ と ENG", ("hr", "eng")), ("eng: BM25", ("eng",)),
     ("(hr)", ("hr",)), ("hr-policy", ("hr",)), ("shr", None), ("hr2", None)],
)
def test_default_router_matches_latin_index_ids_as_whole_words(query, selected):
    decision = MultiIndexRetriever(_bm25_pair()).route(query)
    if selected is None:
        assert decision == RoutingDecision(("hr", "eng"), (), "no_known_index")
    else:
        assert decision.selected == selected and decision.fallback is None


def test_a_latin_keyword_inside_another_word_selects_nothing_so_every_index_is_searched():
    # regression: {"hr": ["leave"]} routed "cleave the index" to hr only, which returned []
    retriever = MultiIndexRetriever(_bm25_pair(), {"hr": ["leave"]}, k=3)
    assert retriever.route("cleave the index").fallback == "no_known_index"
    assert _pairs(retriever.invoke("cleave the index")) == [("eng", "deploy#0")]
    assert retriever.route("How many leaves do I get?").selected == ("hr",)  # an English plural counts


@pytest.mark.parametrize(
    "keywords, query, hit",
    [(["休暇"], "有給休暇は何日？", True), (["休暇"], "休暇", True), (["人事"], "人事部の規程", True),  # CJK: substring
     (["BM25"], "BM250 の設定", False), (["BM25"], "BM25検索", True), (["BM25"], "ｂｍ２５", True),
     (["deploy"], "deployment", False), (["deploy"], "deploys", True), (["Project Orion"], "project  orion", True),
     (["café"], "cafés", True), (["café"], "décafé", False), (["отпуск"], "отпуска", False),
     (["отпуск"], "мой отпуск", True), (["leave"], "", False)],
)
def test_keyword_router_word_boundaries_for_spaced_scripts_substrings_for_cjk(keywords, query, hit):
    assert KeywordRouter({"hr": keywords})(query) == (["hr"] if hit else [])


@pytest.mark.parametrize(
    "router, message",
    [({"zzz": ["x"]}, "the keyword rules name unknown index 'zzz'; the indexes are 'hr', 'eng'"),
     ({"hr": ["休暇"], "engg": ["BM25"]}, "unknown index 'engg' (did you mean 'eng'?)"),
     (KeywordRouter({"HR": ["休暇"]}), "unknown index 'HR'"),
     (LLMRouter(FakeListChatModel(responses=["hr"]), {"hr": "人事", "faq": "FAQ"}),
      "the LLMRouter descriptions name unknown index 'faq'")],
)
def test_a_router_naming_an_unknown_index_is_an_error(router, message):
    # regression: keyword rules naming an unknown index were accepted silently and never matched anything
    with pytest.raises(ValueError, match=re.escape(message)):
        MultiIndexRetriever(_bm25_pair(), router)


def test_descriptions_naming_an_unknown_index_are_an_error_and_missing_ones_default_to_the_id():
    with pytest.raises(ValueError, match=re.escape("the descriptions name unknown index 'hr_' (did you mean 'hr'?)")):
        MultiIndexRetriever(_bm25_pair(), FakeListChatModel(responses=["hr"]), descriptions={"hr_": "人事"})
    llm = SpyChatModel(replies=["eng"])
    retriever = MultiIndexRetriever(_bm25_pair(), llm, descriptions={"hr": "人事規程"})
    assert retriever.route("BM25").selected == ("eng",)
    assert "- hr: 人事規程\n- eng: eng" in llm.prompts[0]


_ODD_IDS = {"hr-policy": "人事規程", "hr": "HR", "eng_wiki": "wiki", "faq.v2": "FAQ", "人事": "人事", "人事部": "部"}


@pytest.mark.parametrize(
    "reply, routed",
    [("hr-policy", ("hr-policy",)), ("Search the hr-policy and eng_wiki.", ("hr-policy", "eng_wiki")),
     ("HR-Policy, FAQ.v2", ("hr-policy", "faq.v2")), ("ＨＲ－ＰＯＬＩＣＹ", ("hr-policy",)), ("faq.v2.", ("faq.v2",)),
     ("hr and hr-policy", ("hr", "hr-policy")), ("`eng_wiki`", ("eng_wiki",)),
     ("人事と技術", ("人事",)),  # regression: a CJK id next to CJK text was never read
     ("人事部、人事", ("人事部", "人事")), ("「人事部」", ("人事部",)),  # the longest id wins where they overlap
     ("hr-policy-2, eng_wiki_old, eng-wiki, faq.v20", ())],
)
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_llm_router_reads_ids_with_hyphens_underscores_dots_and_cjk(reply, routed, mode):
    indexes = {i: SpyRetriever() for i in _ODD_IDS}
    retriever = MultiIndexRetriever(indexes, LLMRouter(FakeListChatModel(responses=[reply]), _ODD_IDS))
    decision = retriever.route("q") if mode == "sync" else await retriever.aroute("q")
    assert decision.routed == routed
    assert decision.fallback == (None if routed else "no_known_index")


async def test_ainvoke_with_an_llm_router_still_searches_the_selected_indexes_concurrently():
    _FLIGHT.update(now=0, peak=0)
    idx = {n: _Slow(name_=n) for n in ("a", "b", "c")}
    llm = SpyChatModel(replies=["a, c"])
    docs = await MultiIndexRetriever(idx, llm, k=3).ainvoke("q")
    assert len(llm.prompts) == 1 and _FLIGHT["peak"] == 2
    assert sorted(_pairs(docs)) == [("a", "a"), ("c", "c")]


# -- the graph fan-out gates RESTRICTED at the node and at the reducer ---------------------------------------------------
def _leaky_indexes() -> dict[str, SpyRetriever]:
    return {
        "hr": SpyRetriever(default=[doc("secret#0", "SECRET-HR", sensitivity="restricted"), doc("README#0", "hr")]),
        "eng": SpyRetriever(default=[doc("README#0", "eng"), doc("s#1", "SECRET-ENG", Sensitivity="ＲＥＳＴＲＩＣＴＥＤ")]),
    }


def test_the_documented_fan_out_never_puts_restricted_chunks_in_state_or_stream_updates():
    idx = _leaky_indexes()

    def search_one(state: State) -> dict[str, Any]:  # the recipe of the module docstring and docs
        i = state["index_id"]
        return {"index_results": search_index(idx[i], state["question"], index_id=i, k=6)}

    app = _fan_out_graph(search_one, idx)
    out = app.invoke({"question": "readme"})
    updates = list(app.stream({"question": "readme"}, stream_mode="updates"))
    dumped = json.dumps([d.model_dump() for d in out["index_results"] + out["documents"]]) + repr(updates)
    assert "SECRET" not in dumped  # regression: the search node emitted, and the state held, RESTRICTED chunks
    assert sorted(_pairs(out["documents"])) == [("eng", "README#0"), ("hr", "README#0")]


def test_the_old_recipe_with_tag_index_also_keeps_restricted_out_of_state_and_updates():
    # regression: invoke_retriever + tag_index in the node (the recipe as first documented) streamed RESTRICTED chunks
    idx = _leaky_indexes()

    def search_one(state: State) -> dict[str, Any]:
        docs = invoke_retriever(idx[state["index_id"]], state["question"], k=6)
        return {"index_results": tag_index(docs, state["index_id"])}

    app = _fan_out_graph(search_one, idx)
    assert "SECRET" not in repr(list(app.stream({"question": "readme"}, stream_mode="updates")))
    assert sorted(_pairs(app.invoke({"question": "readme"})["documents"])) == [("eng", "README#0"), ("hr", "README#0")]


def test_the_reducer_drops_restricted_chunks_a_node_returns():
    idx = _leaky_indexes()

    def search_one(state: State) -> dict[str, Any]:  # a node that tags by hand, without any gate
        docs = invoke_retriever(idx[state["index_id"]], state["question"], k=6)
        for d in docs:
            d.metadata["index_id"] = state["index_id"]
        return {"index_results": docs}

    out = _fan_out_graph(search_one, idx).invoke({"question": "readme"})
    assert "SECRET" not in json.dumps([d.model_dump() for d in out["index_results"]])
    assert sorted(_pairs(out["index_results"])) == [("eng", "README#0"), ("hr", "README#0")]
    restricted = doc("x#0", "SECRET", sensitivity="RESTRICTED", index_id="hr")
    assert merge_index_results([restricted], None) == [] and merge_index_results([], restricted) == []
    assert tag_index([restricted, doc("y#0")], "eng") == [doc("y#0", index_id="eng")]


def test_untagged_documents_are_an_error_not_a_silent_duplicate():
    # regression: without tag_index the second index's README#0 was dropped as a duplicate of the first's
    a = [Document(page_content="hr readme", metadata={"chunk_id": "README#0"})]
    b = [Document(page_content="eng readme", metadata={"chunk_id": "README#0"})]
    with pytest.raises(ValueError, match=r"merge_index_results: a document without metadata\['index_id'\].*tag_index"):
        merge_index_results(merge_index_results(None, tag_index(a, "hr")), b)
    with pytest.raises(ValueError, match="fuse_by_index: a document without"):
        fuse_by_index(a + b)
    tagged = merge_index_results(merge_index_results(None, tag_index(a, "hr")), tag_index(b, "eng"))
    assert [d.page_content for d in fuse_by_index(tagged)] == ["eng readme", "hr readme"]

    idx = _indexes()

    def untagged_node(state: State) -> dict[str, Any]:
        return {"index_results": invoke_retriever(idx[state["index_id"]], state["question"], k=5)}

    with pytest.raises(ValueError, match="without metadata"):
        _fan_out_graph(untagged_node, idx).invoke({"question": "readme"})


@pytest.mark.parametrize("bad", ["", "  ", None, 3])
def test_tag_index_and_search_index_need_an_index_id(bad):
    with pytest.raises(ValueError, match="an index id is a non-empty string"):
        tag_index([doc("a")], bad)
    with pytest.raises(ValueError, match="an index id is a non-empty string"):
        search_index(SpyRetriever(), "q", index_id=bad)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_search_index_searches_through_the_contract_tags_and_gates(mode):
    r = _leaky_indexes()["hr"]
    args: dict[str, Any] = {"index_id": "hr", "k": 2, "filter": {"chunk_id": {"ne": "x"}}}
    docs = search_index(r, "q", **args) if mode == "sync" else await asearch_index(r, "q", **args)
    # the gate removed a RESTRICTED chunk from the first 2, so the contract asked again, deeper (k * 4)
    f = {"chunk_id": {"ne": "x"}}
    assert r.calls == [("q", 2, f), ("q", 8, f)]
    assert _pairs(docs) == [("hr", "README#0")]


def test_the_docs_fan_out_recipe_runs_as_written_and_keeps_restricted_out_of_every_update(monkeypatch):
    import sys
    import types
    from pathlib import Path

    page = (Path(__file__).resolve().parents[3] / "docs" / "query-transforms.md").read_text("utf-8")
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", page, re.S) if "search_index" in b]
    leaky = _leaky_indexes()
    module = types.ModuleType("_query_transforms_doc")  # LangGraph resolves the State's annotations in its module
    module.__dict__.update(hr_bm25=leaky["hr"], eng_hybrid=leaky["eng"])
    monkeypatch.setitem(sys.modules, module.__name__, module)
    exec(compile(block, "docs/query-transforms.md", "exec"), module.__dict__)
    app = module.app
    out = app.invoke({"question": "readme"})
    updates = list(app.stream({"question": "readme"}, stream_mode="updates"))
    assert "SECRET" not in repr(updates) + repr(out)
    assert sorted(_pairs(out["documents"])) == [("eng", "README#0"), ("hr", "README#0")]


# -- regressions: the same chunk_id in two indexes through every dedupe / fusion (issue 14, round 2) -----------------
def _same_chunk_id_mi() -> MultiIndexRetriever:
    a = BM25Retriever.from_documents([Document(page_content="install guide for alpha", metadata={"chunk_id": "README#0"})])
    b = BM25Retriever.from_documents([Document(page_content="install guide for beta", metadata={"chunk_id": "README#0"})])
    return MultiIndexRetriever({"a": a, "b": b}, lambda q: ["a", "b"])


def test_the_contract_keeps_the_same_chunk_id_of_two_indexes():
    # regression: invoke_retriever(mi, ...) deduped by chunk_id alone and returned only index "a"'s README#0
    mi = _same_chunk_id_mi()
    assert sorted(_pairs(mi.invoke("install guide", k=5))) == [("a", "README#0"), ("b", "README#0")]
    docs = invoke_retriever(mi, "install guide", k=5)
    assert sorted(_pairs(docs)) == [("a", "README#0"), ("b", "README#0")]
    assert all(d.id == "README#0" for d in docs)  # the chunk's own id is unchanged


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_query_transformation_over_multi_index_keeps_both_chunks(mode):
    # regression: MultiQueryRetriever(mi, ...) fused by chunk_id alone and lost index "b"'s README#0
    from langchain_ragspine.retrievers import MultiQueryRetriever

    mq = MultiQueryRetriever(_same_chunk_id_mi(), FakeListChatModel(responses=["setup guide"]), k=5)
    docs = mq.invoke("install guide") if mode == "sync" else asyncio.run(mq.ainvoke("install guide"))
    assert sorted(_pairs(docs)) == [("a", "README#0"), ("b", "README#0")]
    assert all(d.metadata["query_transform"][-1]["matched"] == [0, 1] for d in docs)  # found by both queries


def test_hybrid_fusion_keeps_the_same_chunk_id_of_two_indexes():
    from langchain_ragspine.retrievers.hybrid import fuse

    a = tag_index([doc("README#0", "alpha")], "a")
    b = tag_index([doc("README#0", "beta")], "b")
    assert sorted(_pairs(fuse([a, b], k=5))) == [("a", "README#0"), ("b", "README#0")]
    assert len(fuse([a, a + b], k=5)) == 2  # the same (index, chunk) twice is still one


def test_corrective_rag_over_multi_index_keeps_both_chunks():
    from langchain_ragspine.graphs import build_corrective_rag

    graph = build_corrective_rag(_same_chunk_id_mi(), llm=None, max_retries=1, k=5)
    final = graph.invoke({"question": "install guide", "filters": None})
    assert sorted(_pairs(final["documents"])) == [("a", "README#0"), ("b", "README#0")]


def test_doc_key_is_namespaced_by_index_id_only_when_tagged():
    from langchain_ragspine.documents import chunk_key, doc_key

    plain = doc("README#0")
    assert doc_key(plain) == chunk_key(plain) == "README#0"
    tagged_a, tagged_b = tag_index([plain], "a")[0], tag_index([plain], "b")[0]
    assert doc_key(tagged_a) != doc_key(tagged_b) and chunk_key(tagged_a) == chunk_key(tagged_b) == "README#0"


# -- regressions: prompts are capped; case-insensitive did-you-mean ---------------------------------------------------
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_llm_router_prompt_is_capped(mode):
    # regression: a 100k-character query made a 100k-character routing prompt
    from langchain_ragspine.retrievers.query_transform import MAX_PROMPT_QUERY_CHARS

    llm = SpyChatModel(replies=["hr"])
    retriever = MultiIndexRetriever(_indexes(), llm, k=2)
    query = "有給休暇 " + "あ" * 100_000
    docs = retriever.invoke(query) if mode == "sync" else asyncio.run(retriever.ainvoke(query))
    assert docs and len(llm.prompts) == 1
    assert query[:MAX_PROMPT_QUERY_CHARS] in llm.prompts[0] and query[: MAX_PROMPT_QUERY_CHARS + 1] not in llm.prompts[0]
    assert len(llm.prompts[0]) < MAX_PROMPT_QUERY_CHARS + 1000
    assert all(len(json.dumps(d.metadata, ensure_ascii=False, default=str)) < 1000 for d in docs)  # no query copy


@pytest.mark.parametrize("name", ["Hr", "HR", "hR"])
def test_did_you_mean_is_case_insensitive(name):
    # regression: keyword rules naming "Hr" for the index "hr" got no suggestion
    with pytest.raises(ValueError, match=r"unknown index '" + name + r"' \(did you mean 'hr'\?\)"):
        MultiIndexRetriever(_indexes(), {name: ["leave"]})


# -- router ids checked where the router knows them, and wherever a router is bound to indexes ------------------------
@pytest.mark.parametrize(
    "build, message",
    [(lambda: LLMRouter(FakeListChatModel(responses=["HR"]), {"hr": "人事", "HR": "規程"}),
      "the LLMRouter descriptions name 'hr' and 'HR', which a reply cannot tell apart (ids are read in any case and "
      "width); the ids are 'hr', 'HR'"),
     (lambda: LLMRouter(FakeListChatModel(responses=["hr"]), {"ｈｒ": "人事", "hr": "規程"}),
      "name 'ｈｒ' and 'hr', which a reply cannot tell apart"),
     (lambda: LLMRouter(FakeListChatModel(responses=["hr"]), {"": "人事", "hr": "規程"}),
      "an index id is a non-empty string, got ''"),
     (lambda: LLMRouter(FakeListChatModel(responses=["hr"]), {"\u200b": "人事", "hr": "規程"}),
      "the LLMRouter descriptions name '\\u200b', which is blank once folded"),
     (lambda: KeywordRouter({" ": ["休暇"]}), "an index id is a non-empty string, got ' '"),
     (lambda: KeywordRouter({"hr": ["", "  "]}),
      "the keyword rule of 'hr' has no keyword (got ['', '  ']), so it could never select that index")],
)
def test_a_router_refuses_ids_it_could_never_return(build, message):
    # regression: LLMRouter({"hr", "HR"}) read a reply "hr" as "HR" only, so index "hr" could never be chosen; a
    # blank id or a rule without a keyword was accepted and never routed to
    with pytest.raises(ValueError, match=re.escape(message)):
        build()


@pytest.mark.parametrize(
    "field, value, message",
    [("router", KeywordRouter({"hrr": ["休暇"]}), "the keyword rules name unknown index 'hrr' (did you mean 'hr'?); "
                                                   "the indexes are 'hr', 'eng', 'faq'"),
     ("router", {"eng": ["BM25"], "fac": ["FAQ"]}, "unknown index 'fac' (did you mean 'faq'?)"),
     ("router", LLMRouter(FakeListChatModel(responses=["hr"]), {"hr": "人事", "wiki": "wiki"}),
      "the LLMRouter descriptions name unknown index 'wiki'"),
     ("indexes", {"eng": SpyRetriever()}, "the keyword rules name unknown index 'hr'; the indexes are 'eng'"),
     ("descriptions", {"hr_": "人事"}, "the descriptions name unknown index 'hr_' (did you mean 'hr'?)")],
)
def test_assigning_a_router_or_indexes_checks_the_ids_and_a_refusal_changes_nothing(field, value, message):
    # regression: retriever.router = KeywordRouter({"hrr": ...}) was accepted and silently searched every index
    retriever = MultiIndexRetriever(_indexes(), {"hr": ["休暇"], "eng": ["BM25"]}, k=5)
    before = (retriever.router, dict(retriever.indexes), retriever.descriptions)
    with pytest.raises(ValueError, match=re.escape(message)):
        setattr(retriever, field, value)
    assert (retriever.router, dict(retriever.indexes), retriever.descriptions) == before
    assert retriever.route("有給休暇").selected == ("hr",)
    with pytest.raises(ValueError, match=re.escape(message)):
        retriever.model_copy(update={field: value})


def test_assigned_routers_and_indexes_are_bound_like_the_constructor_binds_them():
    idx = _indexes()
    retriever = MultiIndexRetriever(idx, k=5)  # the default router: the ids as keywords
    retriever.router = {"hr": ["休暇"]}  # rules shorthand, built into a KeywordRouter
    assert isinstance(retriever.router, KeywordRouter) and retriever.route("有給休暇").selected == ("hr",)
    retriever.router = None  # the default again
    retriever.indexes = {"wiki": idx["eng"], "faq": idx["faq"]}  # the default router follows the new indexes
    assert retriever.route("the wiki page").selected == ("wiki",)
    llm = SpyChatModel(replies=["faq"])
    copied = retriever.model_copy(update={"router": llm, "descriptions": {"faq": "よくある質問"}})
    assert isinstance(copied.router, LLMRouter) and copied.route("質問").selected == ("faq",)
    assert "- wiki: wiki\n- faq: よくある質問" in llm.prompts[0]
    assert isinstance(retriever.router, KeywordRouter)  # the original is unchanged
    with pytest.raises(TypeError, match="index 'x' is a str, expected a BaseRetriever"):
        retriever.indexes = {"x": "not a retriever"}
    assert set(retriever.indexes) == {"wiki", "faq"}


def test_a_callable_router_naming_an_unknown_index_is_logged_and_ignored(caplog):
    # a plain callable cannot be checked before it runs: its unknown ids are ignored, with a did-you-mean in the log
    retriever = MultiIndexRetriever(_indexes(), lambda q: ["hrr", "eng"], k=5)
    with caplog.at_level("WARNING", logger="langchain_ragspine.retrievers.multi_index"):
        assert retriever.route("q") == RoutingDecision(("eng",), ("eng",))
    assert "the router's ids name unknown index 'hrr' (did you mean 'hr'?); the indexes are 'hr', 'eng', 'faq'" \
        in caplog.text


def _trilingual() -> dict[str, BM25Retriever]:
    """Three small BM25 indexes (default k); for "北京的天气" ja and zh each return one chunk, en none."""
    def bm25(lang: str, texts: list[tuple[str, str]]) -> BM25Retriever:
        return BM25Retriever.from_documents([doc(f"{lang}/{name}#0", text) for name, text in texts])

    return {
        "ja": bm25("ja", [("beijing", "北京の天気は晴れです。"), ("nara", "奈良の鹿は多い。"),
                          ("food", "寿司はおいしい。"), ("train", "新幹線は速い。")]),
        "zh": bm25("zh", [("beijing", "北京的天气很冷。"), ("food", "饺子很好吃。"), ("train", "高铁很快。"),
                          ("tea", "茶很香。")]),
        "en": bm25("en", [("london", "London weather is rainy."), ("food", "Pizza is tasty."),
                          ("train", "Trains are fast."), ("tea", "Tea is hot.")]),
    }


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("router", [None, "callable", "llm"])
def test_k_none_returns_the_whole_fused_list_so_every_index_best_match_is_kept(router, mode):
    # regression (new-user trial): k=None cut the fused list to the longest list any index returned, so
    # MultiIndexRetriever(idx).invoke("北京的天气") gave only ja's chunk although the zh index alone finds zh/beijing#0
    idx = _trilingual()
    assert [d.metadata["chunk_id"] for d in idx["zh"].invoke("北京的天气")] == ["zh/beijing#0"]
    routers: dict[Any, Any] = {None: None, "callable": lambda q: ["ja", "zh", "en"],
                               "llm": FakeListChatModel(responses=["ja, zh, en"])}
    retriever = MultiIndexRetriever(idx, routers[router])
    docs = retriever.invoke("北京的天气") if mode == "sync" else asyncio.run(retriever.ainvoke("北京的天气"))
    assert _pairs(docs) == [("ja", "ja/beijing#0"), ("zh", "zh/beijing#0")]
    assert _pairs(retriever.invoke("北京的天气", k=1)) == [("ja", "ja/beijing#0")]  # an int k still cuts


def test_k_none_keeps_the_gate_and_dedupes_by_index_and_chunk_id():
    secret = doc("s#0", "SECRET-9", sensitivity="RESTRICTED")
    idx = {"a": SpyRetriever(default=[doc("x#0"), secret, doc("x#0"), doc("y#0")]),
           "b": SpyRetriever(default=[doc("x#0"), doc("z#0"), secret])}
    docs = MultiIndexRetriever(idx, lambda q: ["a", "b"]).invoke("q")
    assert sorted(_pairs(docs)) == [("a", "x#0"), ("a", "y#0"), ("b", "x#0"), ("b", "z#0")]  # all, once each
    assert "SECRET-9" not in json.dumps([d.model_dump() for d in docs])
    assert all(call[1] is None for spy in idx.values() for call in spy.calls)  # each index with its own default


def test_hyde_over_multi_index_with_k_none_keeps_every_index_best_match():
    from langchain_ragspine.retrievers import HyDERetriever

    hyde = HyDERetriever(MultiIndexRetriever(_trilingual()), FakeListChatModel(responses=["北京的天气很冷。"]))
    assert {("ja", "ja/beijing#0"), ("zh", "zh/beijing#0")} <= set(_pairs(hyde.invoke("北京的天气")))
