"""The LLM query transformations (HyDE, multi-query, RAG-Fusion, step-back, decomposition) with fake chat models:
fusion order, uniqueness by chunk_id, the original query first, k and filter reaching the base, no LLM = the base's
results byte for byte, a failing model degrading, RESTRICTED text in no prompt and in no result, and HyDE's
hypothetical document never returned, cited or traced."""

from __future__ import annotations

import asyncio
import json
import warnings
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.retrievers import BaseRetriever
from pydantic import Field

from langchain_ragspine import BM25Retriever
from langchain_ragspine.chains import make_answer_chain
from langchain_ragspine.retrievers import (
    DecompositionRetriever,
    HyDERetriever,
    MultiQueryRetriever,
    QueryTransformSkippedWarning,
    RAGFusionRetriever,
    StepBackRetriever,
)
from langchain_ragspine.retrievers.query_transform import PROBE_PLACEHOLDER, TRACE_KEY
from tests.unit_tests._transform_fakes import SpyChatModel, SpyRetriever, doc

LLM_CLASSES = [HyDERetriever, MultiQueryRetriever, RAGFusionRetriever, StepBackRetriever, DecompositionRetriever]
VARIANT_CLASSES = [MultiQueryRetriever, RAGFusionRetriever, DecompositionRetriever]

SECRET = "KEYCODE-7731"
HYPOTHETICAL = "梅雨は例年六月上旬に始まり七月下旬に明ける雨季で、ZZPROBE という架空の語を含む。"
CORPUS = [
    Document(page_content="梅雨は六月から七月にかけて続く雨の季節である。", metadata={"chunk_id": "tsuyu#0", "year": 2020}),
    Document(page_content="梅雨前線が停滞すると長雨になる。", metadata={"chunk_id": "tsuyu#1", "year": 2021}),
    Document(page_content="The rainy season in Japan is called tsuyu.", metadata={"chunk_id": "en#0", "year": 2022}),
    Document(page_content="北海道には梅雨がほとんどない。", metadata={"chunk_id": "hokkaido#0", "year": 2022}),
    Document(page_content="京都の観光名所は清水寺である。", metadata={"chunk_id": "kyoto#0", "year": 2024}),
    Document(page_content=f"梅雨の時期の鍵交換手順 {SECRET}", metadata={"chunk_id": "keys#0", "sensitivity": "RESTRICTED"}),
]


def _bm25(**kw: Any) -> BM25Retriever:
    return BM25Retriever.from_documents(CORPUS, **kw)


def _ids(docs: list[Document]) -> list[str]:
    return [d.metadata["chunk_id"] for d in docs]


def _make(cls: type, base: BaseRetriever, llm: Any, **kw: Any) -> Any:
    return cls(base, llm, **kw)


# -- fusion order, uniqueness, the original first -----------------------------------------------------------------------
@pytest.mark.parametrize("cls", VARIANT_CLASSES)
def test_rrf_fusion_order_and_original_searched_first(cls):
    base = SpyRetriever(lists={
        "q": [doc("a"), doc("b"), doc("c")],
        "v1": [doc("b"), doc("d")],
        "v2": [doc("b"), doc("a")],
    })
    retriever = cls(base, FakeListChatModel(responses=["1. v1\n2. v2"]), k=4)
    docs = retriever.invoke("q")
    assert base.queries == ["q", "v1", "v2"]
    # RRF c=60: b 1/62+1/61+1/61 > a 1/61+1/62 > d 1/62 > c 1/63
    assert _ids(docs) == ["b", "a", "d", "c"]
    fused = [d.metadata["scores"]["fused"] for d in docs]
    assert fused == sorted(fused, reverse=True)
    assert fused[0] == pytest.approx(1 / 62 + 2 / 61)
    trace = docs[0].metadata[TRACE_KEY][-1]
    assert trace["queries"] == ["q", "v1", "v2"] and trace["matched"] == [0, 1, 2] and trace["llm_calls"] == 1


def test_ties_break_by_query_order_then_rank():
    base = SpyRetriever(lists={"q": [doc("z"), doc("y")], "v": [doc("m"), doc("a")]})
    docs = MultiQueryRetriever(base, FakeListChatModel(responses=["v"]), k=4).invoke("q")
    assert _ids(docs) == ["z", "m", "y", "a"]  # equal RRF scores: the user's query's list first, rank by rank


@pytest.mark.parametrize("cls", VARIANT_CLASSES)
def test_the_users_hit_wins_a_tie_when_k_is_unset(cls):
    # new-user trial of issue 14: one document per query and no k returned a generated query's hit ('a', first by
    # chunk_id) instead of the user's ('q')
    base = SpyRetriever(lists={q: [doc(q)] for q in ["q", "a", "b", "c"]})
    docs = cls(base, FakeListChatModel(responses=["a\nb\nc"])).invoke("q")
    assert _ids(docs) == ["q"]
    assert _ids(cls(base, FakeListChatModel(responses=["a\nb\nc"]), k=4).invoke("q")) == ["q", "a", "b", "c"]


def test_fuse_keeps_its_key_ties_by_default():
    """HybridRetriever's fusion is unchanged: ties="lists" is the transformations' option, not fuse's default."""
    from langchain_ragspine.retrievers.hybrid import fuse

    lists = [[doc("z")], [doc("m")]]
    assert _ids(fuse(lists)) == ["m", "z"]
    assert _ids(fuse(lists, ties="lists")) == ["z", "m"]
    with pytest.raises(ValueError, match="ties"):
        fuse(lists, ties="rank")  # type: ignore[arg-type]


_IDS = st.sampled_from("abcdefghij")


@settings(max_examples=60, deadline=None)
@given(lists=st.lists(st.lists(_IDS, max_size=8, unique=True), min_size=2, max_size=4), depth=st.integers(1, 8))
def test_property_results_are_prefix_stable_across_k(lists, depth):
    """Each query is searched to max(k, fetch_k): for every k <= fetch_k the ranking is the same, cut."""
    queries = ["q"] + [f"v{i}" for i in range(1, len(lists))]
    base = SpyRetriever(lists={q: [doc(c) for c in ids] for q, ids in zip(queries, lists, strict=True)})
    reply = "\n".join(queries[1:])
    full = _ids(MultiQueryRetriever(base, FakeListChatModel(responses=[reply]), n_queries=4,
                                    fetch_k=depth, k=depth).invoke("q"))
    for k in range(1, depth + 1):
        got = _ids(MultiQueryRetriever(base, FakeListChatModel(responses=[reply]), n_queries=4,
                                       fetch_k=depth, k=k).invoke("q"))
        assert got == full[:k]
    # no k: each query searched with the base's default, cut to the longest list = the call with that k
    longest = max(len(x) for x in lists)
    if longest:
        unset = _ids(MultiQueryRetriever(base, FakeListChatModel(responses=[reply]), n_queries=4).invoke("q"))
        assert unset == _ids(MultiQueryRetriever(base, FakeListChatModel(responses=[reply]), n_queries=4,
                                                 k=longest).invoke("q"))


@pytest.mark.parametrize("cls", VARIANT_CLASSES)
def test_results_are_unique_by_chunk_id_although_scores_differ(cls):
    """The same chunk found by every query, each time with other scores, comes back once."""
    corpus_llm = FakeListChatModel(responses=["梅雨の季節\n梅雨前線\n北海道 梅雨"])
    docs = cls(_bm25(k=5), corpus_llm, k=5).invoke("梅雨はいつ")
    assert len(_ids(docs)) == len(set(_ids(docs))) > 1


def test_langchains_multi_query_returns_each_of_our_chunks_once():
    """LangChain's MultiQueryRetriever dedupes equal Documents; our per-query scores (a ChunkScores) take no part in
    equality, so a chunk two queries find comes back once there too, with the first query's scores (skip if
    langchain_classic is gone)."""
    mq = pytest.importorskip("langchain_classic.retrievers.multi_query")
    llm = FakeListChatModel(responses=["梅雨の季節\n梅雨前線"])
    theirs = mq.MultiQueryRetriever.from_llm(retriever=_bm25(k=3), llm=llm).invoke("梅雨はいつ")
    assert len(_ids(theirs)) == len(set(_ids(theirs))) > 1
    first = {d.id: d.metadata["scores"] for d in _bm25(k=3).invoke("梅雨の季節")}  # its first query
    assert all(dict(d.metadata["scores"]) == dict(first[d.id]) for d in theirs if d.id in first)
    ours = MultiQueryRetriever(_bm25(k=3), FakeListChatModel(responses=["梅雨の季節\n梅雨前線"]), k=6)
    assert len(_ids(ours.invoke("梅雨はいつ"))) == len(set(_ids(ours.invoke("梅雨はいつ"))))


@pytest.mark.parametrize(
    "reply",
    ["<think>I should list rewrites</think>\nHere are 3 queries:\n1. v1\n\n   \n2) \"v2\"\n3. v3\n4. v4",
     '```json\n["v1", "v2", "v3", "v4"]\n```', "- v1\n* v2\n• v3\n・v4", "Query 1: v1\nQuery 2: v2\nQuery 3: v3\nv4"],
)
def test_messy_replies_give_at_most_n_variants_after_the_original(reply):
    base = SpyRetriever(default=[doc("a")])
    MultiQueryRetriever(base, FakeListChatModel(responses=[reply]), n_queries=3).invoke("q")
    assert base.queries == ["q", "v1", "v2", "v3"]


def test_a_restatement_of_the_question_is_not_searched_twice():
    base = SpyRetriever(default=[doc("a")])
    MultiQueryRetriever(base, FakeListChatModel(responses=["What is BM25?\nbm25 definition"])).invoke("what is BM25")
    assert base.queries == ["what is BM25", "bm25 definition"]


def test_step_back_uses_one_question_and_its_prompt_has_the_examples():
    base = SpyRetriever(default=[doc("a")])
    llm = SpyChatModel(replies=["日本の気候の特徴は？\nもう一つ"])
    StepBackRetriever(base, llm).invoke("梅雨はいつ？")
    assert base.queries == ["梅雨はいつ？", "日本の気候の特徴は？"]
    assert "The Police" in llm.prompts[0] and llm.prompts[0].rstrip().endswith("梅雨はいつ？")


def test_decompose_returns_the_sub_questions_and_the_trace_says_which_found_what():
    base = SpyRetriever(lists={"東京の人口は？": [doc("tokyo")], "大阪の人口は？": [doc("osaka")]})
    retriever = DecompositionRetriever(base, FakeListChatModel(responses=["1. 東京の人口は？\n2. 大阪の人口は？"]), k=3)
    assert retriever.decompose("東京と大阪の人口の差は？") == ["東京の人口は？", "大阪の人口は？"]
    docs = retriever.invoke("東京と大阪の人口の差は？")
    matched = {d.metadata["chunk_id"]: d.metadata[TRACE_KEY][-1]["matched"] for d in docs}
    assert matched == {"tokyo": [1], "osaka": [2]}


def test_decompose_without_a_model_is_empty():
    with pytest.warns(QueryTransformSkippedWarning):
        retriever = DecompositionRetriever(SpyRetriever(), None)
    assert retriever.decompose("A と B の違いは？") == []


# -- k and filter reach the base ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", LLM_CLASSES)
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_k_and_filter_reach_the_base_and_filters_are_anded(cls, mode):
    base = SpyRetriever(default=[doc("a", year=2020, lang="ja"), doc("b", year=2021, lang="ja"),
                                 doc("c", year=2021, lang="en")])
    retriever = cls(base, FakeListChatModel(responses=["v1\nv2"]), filter={"lang": "ja"}, fetch_k=7)
    docs = (retriever.invoke("q", k=2, filter={"year": 2021}) if mode == "sync"
            else await retriever.ainvoke("q", k=2, filter={"year": 2021}))
    assert len(base.calls) >= 2
    for _, k, flt in base.calls:
        assert k == 7  # fetch_k: each list is searched deeper than k
        assert flt == {"$and": [{"lang": "ja"}, {"year": 2021}]}
    assert _ids(docs) == ["b"]


@pytest.mark.parametrize("cls", LLM_CLASSES)
def test_a_call_filter_can_only_narrow(cls):
    retriever = cls(_bm25(k=5), FakeListChatModel(responses=["梅雨 北海道\n梅雨前線"]), k=5)
    wide = set(_ids(retriever.invoke("梅雨")))
    narrow = _ids(retriever.invoke("梅雨", filter={"year": 2022}))
    assert narrow and set(narrow) <= wide
    assert all(d.metadata["year"] == 2022 for d in retriever.invoke("梅雨", filter={"year": 2022}))


def test_bad_call_arguments_raise():
    retriever = MultiQueryRetriever(SpyRetriever(), FakeListChatModel(responses=["v"]))
    with pytest.raises(ValueError):
        retriever.invoke("q", k=0)
    with pytest.raises(TypeError, match="unexpected keyword"):
        retriever.invoke("q", top_k=3)
    with pytest.raises(TypeError, match="BaseRetriever"):
        MultiQueryRetriever("not a retriever", FakeListChatModel(responses=["v"]))  # type: ignore[arg-type]


# -- off / no LLM / failing LLM -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", LLM_CLASSES)
@pytest.mark.parametrize("call", [{}, {"k": 2}, {"k": 3, "filter": {"year": {"gte": 2021}}}])
async def test_without_a_model_the_results_are_the_bases_byte_for_byte(cls, call):
    base = _bm25(k=4)
    with pytest.warns(QueryTransformSkippedWarning, match="no chat model") as record:
        retriever = cls(base, None)
    assert len(record) == 1  # one warning, when built; none per call
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = retriever.invoke("梅雨はいつ", **call)
        agot = await retriever.ainvoke("梅雨はいつ", **call)
    want = base.invoke("梅雨はいつ", **call)
    assert got == want and agot == want
    assert json.dumps([d.model_dump() for d in got], ensure_ascii=False) == json.dumps(
        [d.model_dump() for d in want], ensure_ascii=False)
    assert all(TRACE_KEY not in d.metadata for d in got)


@pytest.mark.parametrize("cls", LLM_CLASSES)
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_failing_model_degrades_to_the_query_alone(cls, mode, caplog):
    base = SpyRetriever(default=[doc("a"), doc("b")])
    retriever = cls(base, SpyChatModel(error="connection refused"), k=2)
    docs = retriever.invoke("q") if mode == "sync" else await retriever.ainvoke("q")
    assert base.queries == ["q"]
    assert _ids(docs) == ["a", "b"]
    trace = docs[0].metadata[TRACE_KEY][-1]
    assert trace["fallback"] == "llm_error" and trace["queries"] == ["q"]
    assert "query generation failed" in caplog.text


@pytest.mark.parametrize("cls", LLM_CLASSES)
@pytest.mark.parametrize("query", ["", "   ", "\n\t　", "\u200b", "\ufeff \u200b\u200d"])
async def test_an_empty_query_calls_no_model_and_returns_the_bases_results(cls, query):
    # new-user trial of issue 14: a query of only zero-width characters was sent to the model
    # new-user trial of issue 16 (left over): an empty or whitespace-only query still called the model
    base = SpyRetriever(default=[doc("a"), doc("b"), doc("c")])  # answers any query, so the pass-through shows
    llm = SpyChatModel(replies=["1. 梅雨\n2. 雨季"])
    flt = {"chunk_id": {"ne": "c"}}
    retriever = cls(base, llm, k=3, filter=flt)
    got = retriever.invoke(query)
    agot = await retriever.ainvoke(query, k=1)
    assert llm.prompts == []  # 0 model calls, sync and async
    assert base.calls == [(query, 3, flt), (query, 1, flt)]  # one search each: the query as given, no variants
    assert got == base.invoke(query, k=3, filter=flt) and _ids(got) == ["a", "b"]
    assert _ids(agot) == ["a"] and all(TRACE_KEY not in d.metadata for d in got + agot)
    plan = retriever.plan(query)
    assert (plan.queries, plan.llm_calls, plan.fallback) == ([query], 0, "empty_query")
    assert (await retriever.aplan(query)).fallback == "empty_query" and llm.prompts == []
    assert _ids(_make(cls, _bm25(), llm).invoke(query)) == _ids(_bm25().invoke(query)) and llm.prompts == []


@pytest.mark.parametrize("cls", VARIANT_CLASSES + [StepBackRetriever])
def test_an_empty_reply_searches_the_query_alone(cls):
    base = SpyRetriever(default=[doc("a")])
    docs = cls(base, FakeListChatModel(responses=["  \n\n<think>nothing</think>"])).invoke("q")
    assert base.queries == ["q"]
    assert docs[0].metadata[TRACE_KEY][-1]["fallback"] == "no_variants"


@pytest.mark.parametrize("cls", LLM_CLASSES)
def test_a_zero_width_reply_searches_the_query_alone(cls):
    # new-user trial of issue 14: HyDE searched a probe of zero-width characters, the others such lines
    base = SpyRetriever(default=[doc("a")])
    docs = cls(base, FakeListChatModel(responses=["\u200b\n\u200b\u200b\n\ufeff"])).invoke("q")
    assert base.queries == ["q"]
    assert docs[0].metadata[TRACE_KEY][-1]["fallback"] == "no_variants"


def test_generic_fake_chat_model_and_content_blocks_are_read():
    base = SpyRetriever(default=[doc("a")])
    llm = GenericFakeChatModel(messages=iter([AIMessage(content=[{"type": "text", "text": "v1\n"},
                                                                  {"type": "text", "text": "v2"}])]))
    RAGFusionRetriever(base, llm).invoke("q")
    assert base.queries == ["q", "v1", "v2"]


# -- concurrency ---------------------------------------------------------------------------------------------------------
class _Concurrent(BaseRetriever):
    """Counts how many async searches are in flight at once."""

    in_flight: int = 0
    peak: int = 0
    seen: list[str] = Field(default_factory=list)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                k: int | None = None, filter: Mapping[str, Any] | None = None) -> list[Document]:
        self.seen.append(query)
        return [doc(query)]

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun,
                                       k: int | None = None, filter: Mapping[str, Any] | None = None
                                       ) -> list[Document]:
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        for _ in range(5):
            await asyncio.sleep(0)
        self.in_flight -= 1
        return [doc(query)]


async def test_ainvoke_searches_the_queries_concurrently():
    base = _Concurrent()
    docs = await MultiQueryRetriever(base, FakeListChatModel(responses=["v1\nv2\nv3"]), k=4).ainvoke("q")
    assert base.peak == 4
    assert sorted(_ids(docs)) == ["q", "v1", "v2", "v3"]


# -- RESTRICTED and HyDE's probe ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", LLM_CLASSES)
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_restricted_text_reaches_no_prompt_and_no_result(cls, mode):
    """The base here returns a RESTRICTED chunk (a user's retriever may); the transformation never shows a chunk
    to the model and drops RESTRICTED ones on the way out, also in the answer chain behind it."""
    leaky = SpyRetriever(default=[CORPUS[5], CORPUS[0]])
    llm = SpyChatModel(replies=["梅雨の鍵\n梅雨の時期"])
    retriever = cls(leaky, llm, k=3)
    docs = retriever.invoke("梅雨の時期") if mode == "sync" else await retriever.ainvoke("梅雨の時期")
    assert llm.prompts and all(SECRET not in p for p in llm.prompts)
    assert _ids(docs) == ["tsuyu#0"]
    assert SECRET not in json.dumps([d.model_dump() for d in docs], ensure_ascii=False)


def test_a_single_query_path_drops_restricted_too():
    leaky = SpyRetriever(default=[CORPUS[5], CORPUS[0]])
    docs = MultiQueryRetriever(leaky, SpyChatModel(error="down")).invoke("梅雨")
    assert _ids(docs) == ["tsuyu#0"]


@pytest.mark.parametrize("answer_llm", [None, SpyChatModel(replies=["梅雨は六月から七月まで [1][2]"])])
def test_behind_hyde_the_answer_cites_corpus_chunks_and_its_prompt_has_no_restricted_text(answer_llm):
    """HyDE's probe (ZZPROBE) is never cited, by the LLM path or the extractive one; no RESTRICTED text is shown."""
    leaky = SpyRetriever(default=[CORPUS[5], CORPUS[0], CORPUS[1]])
    retriever = HyDERetriever(leaky, FakeListChatModel(responses=[HYPOTHETICAL]), k=3)
    out = make_answer_chain(answer_llm).invoke({"question": "梅雨はいつ", "documents": retriever.invoke("梅雨はいつ")})
    assert out["citations"] and {c["chunk_id"] for c in out["citations"]} <= {"tsuyu#0", "tsuyu#1"}
    assert "ZZPROBE" not in json.dumps(out, ensure_ascii=False, default=str)
    if answer_llm is not None:
        assert answer_llm.prompts and all(SECRET not in p and "ZZPROBE" not in p for p in answer_llm.prompts)


@pytest.mark.parametrize("include_original", [True, False])
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_hyde_text_is_never_returned_cited_or_traced(include_original, mode):
    base = SpyRetriever(lists={"梅雨はいつ": [doc("a")], HYPOTHETICAL: [doc("b"), doc("a")]})
    hyde = HyDERetriever(base, FakeListChatModel(responses=[HYPOTHETICAL]), include_original=include_original, k=3)
    docs = hyde.invoke("梅雨はいつ") if mode == "sync" else await hyde.ainvoke("梅雨はいつ")
    assert base.queries == (["梅雨はいつ", HYPOTHETICAL] if include_original else [HYPOTHETICAL])
    assert set(_ids(docs)) == {"a", "b"}
    dumped = json.dumps([d.model_dump() for d in docs], ensure_ascii=False)
    assert "ZZPROBE" not in dumped and "架空" not in dumped
    trace = docs[0].metadata[TRACE_KEY][-1]
    assert trace["queries"][-1] == PROBE_PLACEHOLDER
    assert all(d.page_content.startswith("text of ") for d in docs)  # corpus chunks only


def test_hyde_over_bm25_returns_corpus_chunks_only_and_ranks_by_the_probe():
    hyde = HyDERetriever(_bm25(k=3), FakeListChatModel(responses=["北海道には梅雨がない。"]), k=3,
                         include_original=False)
    docs = hyde.invoke("どこ？")
    texts = {d.page_content for d in CORPUS}
    assert docs and all(d.page_content in texts for d in docs)
    assert docs[0].metadata["chunk_id"] == "hokkaido#0"


def test_hyde_probe_is_cut_and_a_restatement_is_dropped():
    base = SpyRetriever(default=[doc("a")])
    HyDERetriever(base, FakeListChatModel(responses=["x" * 50]), max_chars=10).invoke("q")
    assert base.queries == ["q", "x" * 10]
    base2 = SpyRetriever(default=[doc("a")])
    HyDERetriever(base2, FakeListChatModel(responses=["<think>hm</think> Q?"])).invoke("q")
    assert base2.queries == ["q"]


def test_hyde_prompt_asks_for_a_passage_with_the_question():
    llm = SpyChatModel(replies=["passage"])
    HyDERetriever(SpyRetriever(default=[doc("a")]), llm).invoke("梅雨はいつ？")
    assert "passage" in llm.prompts[0].lower() and "梅雨はいつ？" in llm.prompts[0]


def test_transformations_stack_and_keep_both_traces():
    inner = MultiQueryRetriever(_bm25(k=3), FakeListChatModel(responses=["梅雨前線"]), k=3)
    outer = HyDERetriever(inner, FakeListChatModel(responses=["北海道には梅雨がない。"]), k=3)
    docs = outer.invoke("梅雨")
    traces = docs[0].metadata[TRACE_KEY]
    assert [t["transform"] for t in traces] == ["multi_query", "hyde"]


@pytest.mark.parametrize("graph_llm", [None, "spy"])
def test_in_the_corrective_graph_the_probe_is_never_graded_cited_or_answered_from(graph_llm):
    """HyDE inside a LangGraph corrective-RAG loop: the graders and the answer see corpus chunks only."""
    from langchain_ragspine.graphs import build_corrective_rag

    spy = SpyChatModel(replies=["yes"]) if graph_llm else None
    hyde = HyDERetriever(_bm25(k=4), FakeListChatModel(responses=[HYPOTHETICAL]), k=4)
    final = build_corrective_rag(hyde, llm=spy, max_retries=1).invoke({"question": "梅雨はいつ", "filters": None})
    dumped = json.dumps(final, ensure_ascii=False, default=str)
    assert "ZZPROBE" not in dumped and SECRET not in dumped
    assert all(d.page_content in {c.page_content for c in CORPUS} for d in final.get("documents") or [])
    if spy is not None:
        assert spy.prompts and all("ZZPROBE" not in p and SECRET not in p for p in spy.prompts)


# -- prompts: variables checked, the question capped ----------------------------------------------------------------------
@pytest.mark.parametrize("cls", LLM_CLASSES)
@pytest.mark.parametrize(
    "messages, named",
    [([("human", "{foo}")], ["'question'", "'foo'"]), ([("human", "{question} {lang}")], ["'lang'"]),
     ([("human", "no variables")], ["'question'"])],
)
def test_a_prompt_without_question_or_with_unknown_variables_is_refused_when_built(cls, messages, named):
    # new-user trial of issue 14: prompt={foo} only logged "query generation failed: 'foo'" on every call
    from langchain_core.prompts import ChatPromptTemplate

    with pytest.raises(ValueError, match="prompt must take the variable 'question'") as info:
        cls(SpyRetriever(), FakeListChatModel(responses=["x"]), prompt=ChatPromptTemplate.from_messages(messages))
    assert all(name in str(info.value) for name in named)


@pytest.mark.parametrize("cls", LLM_CLASSES)
def test_prompts_with_question_and_n_or_partials_are_accepted(cls):
    from langchain_core.prompts import ChatPromptTemplate, PromptTemplate

    llm = SpyChatModel(replies=["梅雨 時期"])
    partial = ChatPromptTemplate.from_messages([("human", "[{lang}] {n}: {question}")]).partial(lang="ja")
    cls(SpyRetriever(default=[doc("a")]), llm, prompt=partial).invoke("梅雨はいつ")
    assert llm.prompts[-1].startswith("[ja] ") and llm.prompts[-1].endswith(": 梅雨はいつ")
    cls(SpyRetriever(default=[doc("a")]), llm, prompt=PromptTemplate.from_template("Q: {question}")).invoke("x?")
    assert llm.prompts[-1] == "Q: x?"


@pytest.mark.parametrize("cls", LLM_CLASSES)
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_huge_query_is_cut_in_the_prompt_but_searched_whole(cls, mode):
    # new-user trial of issue 14: a 100k-character query was sent whole to the model
    from langchain_ragspine.retrievers.query_transform import MAX_PROMPT_QUERY_CHARS

    query = "梅雨" * 50_000
    base = SpyRetriever(default=[doc("a")])
    llm = SpyChatModel(replies=["梅雨の時期"])
    retriever = cls(base, llm)
    _ = retriever.invoke(query) if mode == "sync" else await retriever.ainvoke(query)
    assert len(llm.prompts) == 1
    assert query[:MAX_PROMPT_QUERY_CHARS] in llm.prompts[0] and query[: MAX_PROMPT_QUERY_CHARS + 1] not in llm.prompts[0]
    assert len(llm.prompts[0]) < MAX_PROMPT_QUERY_CHARS + 2000  # the template's own text, not the whole query
    assert base.queries[0] == query  # the user's own search is never cut


# -- the skipped-transformation warning names the user's line ---------------------------------------------------------------
@pytest.mark.parametrize("cls", LLM_CLASSES)
def test_the_no_model_warning_points_at_the_users_line(cls):
    # new-user trial of issue 14: it was reported from pydantic/main.py
    with pytest.warns(QueryTransformSkippedWarning) as record:
        cls(SpyRetriever(), None)
    assert record[0].filename == __file__


def test_the_no_model_warning_from_the_factory_points_at_the_users_line():
    from langchain_ragspine.retrievers.transforms import make_query_transform

    with pytest.warns(QueryTransformSkippedWarning) as record:
        make_query_transform("hyde", SpyRetriever(), llm=None)
    assert record[0].filename == __file__


# -- LangChain's constructor ------------------------------------------------------------------------------------------------
def test_from_llm_takes_langchains_keywords():
    # new-user trial of issue 14: MultiQueryRetriever.from_llm(retriever=..., llm=...) raised AttributeError
    base = SpyRetriever(lists={"q": [doc("a")], "v1": [doc("b")], "v2": [doc("c")]})
    retriever = MultiQueryRetriever.from_llm(retriever=base, llm=FakeListChatModel(responses=["v1\nv2"]), k=3)
    assert isinstance(retriever, MultiQueryRetriever)
    assert _ids(retriever.invoke("q")) == ["a", "b", "c"]
    assert base.queries == ["q", "v1", "v2"]  # the question is searched too (include_original defaults to True here)


def test_from_llm_with_include_original_false_searches_the_rewordings_only():
    base = SpyRetriever(lists={"q": [doc("a")], "v1": [doc("b")], "v2": [doc("c")]})
    retriever = MultiQueryRetriever.from_llm(retriever=base, llm=FakeListChatModel(responses=["v1\nv2"]),
                                             include_original=False)
    docs = retriever.invoke("q")
    assert base.queries == ["v1", "v2"] and _ids(docs) == ["b"]  # no k: cut to the longest list
    assert docs[0].metadata[TRACE_KEY][-1]["positions"] == [1, 2]
    alone = SpyRetriever(lists={"q": [doc("a")]})
    MultiQueryRetriever.from_llm(retriever=alone, llm=FakeListChatModel(responses=[""]), include_original=False).invoke("q")
    assert alone.queries == ["q"]  # nothing generated: the question alone


def test_from_llm_takes_langchains_own_prompt_and_ignores_parser_key_with_a_warning():
    mq = pytest.importorskip("langchain_classic.retrievers.multi_query")
    llm = SpyChatModel(replies=["v1\nv2"])
    base = SpyRetriever(default=[doc("a")])
    with pytest.warns(UserWarning, match="parser_key is ignored") as record:
        retriever = MultiQueryRetriever.from_llm(retriever=base, llm=llm, prompt=mq.DEFAULT_QUERY_PROMPT,
                                                 parser_key="lines")
    assert record[0].filename == __file__
    retriever.invoke("q")
    assert "Original question: q" in llm.prompts[0] and base.queries == ["q", "v1", "v2"]


# -- trace positions ---------------------------------------------------------------------------------------------------------
def test_trace_positions_dropped_and_matched_are_consistent():
    # new-user trial of issue 14: dropped[].position counted before the gate, queries/matched after it
    base = SpyRetriever(lists={"citation offset": [doc("a")], "出典 offset": [doc("b")], "citation 文字位置": [doc("a")]})
    retriever = MultiQueryRetriever(base, FakeListChatModel(responses=["1. 引用 offset\n2. 出典 offset\n3. citation 文字位置"]),
                                    deny_list=["引用"], k=3)
    docs = retriever.invoke("citation offset")
    trace = {d.metadata["chunk_id"]: d.metadata[TRACE_KEY][-1] for d in docs}
    t = trace["a"]
    assert t["queries"] == ["citation offset", "出典 offset", "citation 文字位置"]
    assert t["positions"] == [0, 2, 3] and t["dropped"] == [{"position": 1, "term": 0, "reason": "deny_list"}]
    assert t["matched"] == [0, 2] and trace["b"]["matched"] == [1]
    assert all(t["queries"][i] for i in t["matched"])  # matched indexes queries
    assert {t["positions"][i] for i in t["matched"]} == {0, 3}  # …and positions maps them to the planned numbering
    assert not set(t["positions"]) & {d["position"] for d in t["dropped"]}


def test_a_huge_query_is_cut_in_every_results_trace():
    # regression (second issue-14 trial): a 100k-character query was copied whole into every result's trace
    from langchain_ragspine.retrievers import MultiQueryRetriever
    from langchain_ragspine.retrievers.query_transform import MAX_PROMPT_QUERY_CHARS

    query = "長い段落 " + "あ" * 100_000
    base = SpyRetriever(default=[doc("a#0", "長い段落の例"), doc("b#0", "別の段落")])
    docs = MultiQueryRetriever(base, FakeListChatModel(responses=["段落の分割\n長い段落"]), k=2).invoke(query)
    assert docs
    for d in docs:
        shown = d.metadata[TRACE_KEY][-1]["queries"] if isinstance(d.metadata[TRACE_KEY], list) \
            else d.metadata[TRACE_KEY]["queries"]
        assert shown[0] == query[:MAX_PROMPT_QUERY_CHARS] + "…"
        assert all(len(q) <= MAX_PROMPT_QUERY_CHARS + 1 for q in shown)
        assert len(json.dumps(d.metadata, ensure_ascii=False)) < 10_000
    assert base.queries[0] == query  # the user's own query is still searched whole


def test_hyde_refuses_n_queries_it_would_ignore():
    """``HyDERetriever(..., n_queries=3)`` was accepted and changed nothing (HyDE writes one probe)."""
    llm = FakeListChatModel(responses=[HYPOTHETICAL])
    with pytest.raises(TypeError, match="writes one hypothetical document per question, so n_queries=3"):
        HyDERetriever(_bm25(k=3), llm, n_queries=3)
    assert HyDERetriever(_bm25(k=3), llm, n_queries=1).n_queries == 1
