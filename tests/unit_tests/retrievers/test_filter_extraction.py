"""Filter extraction: "2023年の…" becomes a filter that can only narrow the candidate set; a failed extraction
(nothing found, a failing or nonsensical model, a filter that does not compile) means no filter, never an error."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel

from langchain_ragspine import BM25Retriever
from langchain_ragspine.retrievers import FilterExtractionRetriever, LLMFilterExtractor, RuleFilterExtractor
from langchain_ragspine.retrievers.query_transform import TRACE_KEY
from tests.unit_tests._transform_fakes import SpyChatModel, SpyRetriever, doc

CORPUS = [
    Document(page_content=f"売上の報告 {y} 年度版 第{i}部", metadata={"chunk_id": f"r{y}#{i}", "year": y,
                                                                "updated": f"{y}-06-0{i + 1}"})
    for y in (2021, 2022, 2023) for i in range(2)
]


@pytest.mark.parametrize(
    "question, expected",
    [("2023年の売上は？", {"year": 2023}), ("２０２３年に何があった", {"year": 2023}), ("2023 年 売上", {"year": 2023}),
     ("2023年的销售额是多少？", {"year": 2023}), ("What changed in 2022?", {"year": 2022}),
     ("2020年から2022年までの変化", {"year": {"between": [2020, 2022]}}),
     ("売上は？", None), ("2023年度の予算", None), ("約1500年前の遺跡", None), ("3年間の推移", None),
     ("1000年以上続く祭り", None), ("2020年代の傾向", None), ("trends of the 1990s", None), ("12023年", None),
     ("version 2.2023年", None)],
)
def test_rule_extraction(question, expected):
    assert RuleFilterExtractor()(question) == expected


def test_date_fields_get_a_half_open_range():
    assert RuleFilterExtractor("updated", kind="date")("2022年と2023年") == {
        "updated": {"gte": "2022-01-01", "lt": "2024-01-01"}}


@pytest.mark.parametrize("kwargs", [{"field": ""}, {"field": "y", "kind": "month"}])
def test_rule_extractor_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        RuleFilterExtractor(**kwargs)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_extracted_filter_is_anded_with_the_call_and_own_filters(mode):
    base = SpyRetriever(default=[doc("a", year=2023, lang="ja"), doc("b", year=2022, lang="ja")])
    retriever = FilterExtractionRetriever(base, filter={"lang": "ja"}, k=3)
    docs = (retriever.invoke("2023年の売上", filter={"lang": {"ne": "en"}}) if mode == "sync"
            else await retriever.ainvoke("2023年の売上", filter={"lang": {"ne": "en"}}))
    assert base.calls == [("2023年の売上", 3, {"$and": [{"lang": "ja"}, {"lang": {"ne": "en"}}, {"year": 2023}]})]
    assert [d.metadata["chunk_id"] for d in docs] == ["a"]
    assert docs[0].metadata[TRACE_KEY] == [{"transform": "filter_extraction", "filter": {"year": 2023}}]


def test_without_an_extracted_filter_the_results_are_the_bases_byte_for_byte():
    base = BM25Retriever.from_documents(CORPUS, k=4)
    retriever = FilterExtractionRetriever(base)
    for call in ({}, {"k": 2}, {"filter": {"year": 2022}}):
        assert retriever.invoke("売上の報告", **call) == base.invoke("売上の報告", **call)


def _raises(question: str) -> dict:
    raise RuntimeError("extractor down")


@pytest.mark.parametrize(
    "extractor",
    [_raises, lambda q: {"year": {"near": 3}}, lambda q: "year=2023", lambda q: {},
     LLMFilterExtractor(SpyChatModel(error="timeout"), {"year": "publication year"}),
     LLMFilterExtractor(FakeListChatModel(responses=["I think the year is 2023."]), {"year": "publication year"}),
     LLMFilterExtractor(FakeListChatModel(responses=['{"author": "x"}']), {"year": "publication year"}),
     LLMFilterExtractor(FakeListChatModel(responses=['{"$or": [{"year": 2021}]}']), {"year": "year"}),
     LLMFilterExtractor(FakeListChatModel(responses=['{"year": {"gte": 2023']), {"year": "year"})],
)
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_failed_extraction_means_no_filter(extractor, mode):
    base = BM25Retriever.from_documents(CORPUS, k=6)
    retriever = FilterExtractionRetriever(base, extractor)
    got = retriever.invoke("2023年の売上") if mode == "sync" else await retriever.ainvoke("2023年の売上")
    assert got == base.invoke("2023年の売上")


def test_llm_extractor_reads_fenced_json_after_think_and_sees_only_the_question():
    llm = SpyChatModel(replies=['<think>year?</think>```json\n{"year": {"gte": 2022, "lte": 2023}}\n```'])
    extractor = LLMFilterExtractor(llm, {"year": "the year the report covers"})
    docs = FilterExtractionRetriever(BM25Retriever.from_documents(CORPUS, k=6), extractor).invoke("最近の売上")
    assert {d.metadata["year"] for d in docs} == {2022, 2023}
    assert "the year the report covers" in llm.prompts[0] and "最近の売上" in llm.prompts[0]
    assert "売上の報告" not in llm.prompts[0]  # no chunk text reaches the model


def test_bad_arguments():
    with pytest.raises(TypeError):
        FilterExtractionRetriever("x")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        FilterExtractionRetriever(SpyRetriever(), 3)
    with pytest.raises(ValueError):
        LLMFilterExtractor(FakeListChatModel(responses=["{}"]), {})


_BM25 = BM25Retriever.from_documents(CORPUS, k=6)
_WORDS = ["売上", "報告", "年", "の", "は", "？", " ", "in", "2021", "2022", "2023", "1999", "年度", "前", "第1部"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(st.sampled_from(_WORDS), min_size=1, max_size=8),
       call_filter=st.sampled_from([None, {"year": {"gte": 2022}}, {"chunk_id": {"nin": ["r2023#0"]}}]))
def test_property_extraction_only_narrows(parts, call_filter):
    question = "".join(parts)
    narrowed = FilterExtractionRetriever(_BM25).invoke(question, filter=call_filter)
    plain = _BM25.invoke(question, filter=call_filter)
    plain_ids = [d.metadata["chunk_id"] for d in plain]
    assert {d.metadata["chunk_id"] for d in narrowed} <= set(plain_ids)
    found = RuleFilterExtractor()(question)
    if found is None:
        assert json.dumps([d.model_dump() for d in narrowed]) == json.dumps([d.model_dump() for d in plain])


def test_the_llm_router_and_the_llm_extractor_check_and_list_their_choices_alike() -> None:
    from langchain_ragspine.retrievers import LLMRouter

    llm = FakeListChatModel(responses=["{}"])
    for cls, empty in ((LLMFilterExtractor, "fields must name at least one metadata field"),
                       (LLMRouter, "descriptions must name at least one index")):
        with pytest.raises(TypeError, match="^llm must be a BaseChatModel, got str$"):
            cls("gpt", {"a": "b"})  # type: ignore[arg-type]
        with pytest.raises(ValueError, match=f"^{empty}$"):
            cls(llm, {})
        made = cls(llm, {"year": "the fiscal year", 7: "seven"})  # type: ignore[dict-item]
        human = made.messages("2023年の売上は？")[-1].content
        assert "- year: the fiscal year\n- 7: seven" in human and "2023年の売上は？" in human


@pytest.mark.parametrize("question", ["", "   ", "\n\t\u3000"])
def test_an_empty_question_calls_no_extractor_model_and_sets_no_filter(question):
    # regression: an empty question used to cost one extraction model call
    import asyncio

    llm = SpyChatModel(replies=['{"year": 2023}'])
    base = SpyRetriever(default=[doc("a", year=2023), doc("b", year=2022)])
    retriever = FilterExtractionRetriever(base, LLMFilterExtractor(llm, {"year": "publication year"}))
    assert retriever.extract(question) is None and asyncio.run(retriever.aextract(question)) is None
    retriever.invoke(question)
    asyncio.run(retriever.ainvoke(question))
    assert llm.prompts == []
    assert [flt for _, _, flt in base.calls] == [None, None]


# -- regressions from the new-user trial (issue 14): a wrong filter loses documents, a missed one costs nothing -----------
@pytest.mark.parametrize(
    "question, expected",
    [  # a range used to give only its last year ({'year': 2023}), dropping the 2022 documents
     ("2022-2023年の売上", {"year": {"between": [2022, 2023]}}), ("2022〜2023年の売上", {"year": {"between": [2022, 2023]}}),
     ("2022年から2023年", {"year": {"between": [2022, 2023]}}), ("2022～2023", {"year": {"between": [2022, 2023]}}),
     ("2022年〜2023年", {"year": {"between": [2022, 2023]}}), ("２０２２－２０２３年の売上", {"year": {"between": [2022, 2023]}}),
     ("2020至2022年的销售额", {"year": {"between": [2020, 2022]}}), ("从2020年到2022年", {"year": {"between": [2020, 2022]}}),
     ("from 2020 to 2022", {"year": {"between": [2020, 2022]}}), ("between 2020 and 2022", {"year": {"between": [2020, 2022]}}),
     ("sales in 2022-2023?", {"year": {"between": [2022, 2023]}}), ("in 2023 and 2024", {"year": {"between": [2023, 2024]}}),
     # compounds and implausible years used to become filters that matched nothing
     ("1000年に一度の売上", None), ("2000年問題の売上", None), ("2000年に一度の売上", None), ("Year 2000 problem", None),
     ("3000年の未来", None),
     # open-ended years used to become a single year: "since 2021" is not "in 2021"
     ("since 2021", None), ("until 2023", None), ("2021年以降の売上", None), ("2023年まで", None), ("2023年 以降", None),
     ("2023年の売上と2021年以降の推移", None), ("in 2023 compared with 2022", None),
     ("2023年の売上は2050万円", None),  # a plausible number the rules do not read: no filter at all
     ("2023-2022年", None), ("2022-2023年度", None), ("03-2022-2023", None), ("2023/04/01の件", None),
     ("FY2023 results", None), ("v2023年", None), ("2023年后", None), ("in the 1990s", None),
     # still read
     ("2023年", {"year": 2023}), ("（2023年）", {"year": 2023}), ("2023年3月の件", {"year": 2023}),
     ("in the year 2023", {"year": 2023}), ("2023年と2024年", {"year": {"between": [2023, 2024]}}),
     ("１９９９年の記録", {"year": 1999})],
)
def test_rule_extraction_reads_ranges_and_refuses_what_is_not_a_time_qualifier(question, expected):
    assert RuleFilterExtractor()(question) == expected


def test_a_range_question_keeps_both_years_documents():
    # regression: "2022〜2023年の売上" searched {'year': 2023} and lost the 2022 reports
    retriever = FilterExtractionRetriever(BM25Retriever.from_documents(CORPUS, k=6))
    assert {d.metadata["year"] for d in retriever.invoke("2022〜2023年の売上の報告")} == {2022, 2023}
    date = RuleFilterExtractor("updated", kind="date")
    assert date("2022-2023年の売上") == {"updated": {"gte": "2022-01-01", "lt": "2024-01-01"}}


def test_the_plausible_years_are_configurable():
    assert RuleFilterExtractor()("1868年の記録") is None
    historical = RuleFilterExtractor(min_year=1000, max_year=1999)
    assert historical("1868年の記録") == {"year": 1868} and historical("2023年の記録") is None
    assert historical("1000年に一度の記録") is None  # in range, but not a time qualifier


@pytest.mark.parametrize(
    "kwargs", [{"min_year": 999}, {"max_year": 10000}, {"min_year": 2000, "max_year": 1999}, {"min_year": "1900"},
               {"max_year": True}, {"min_year": 1900.0}])
def test_rule_extractor_rejects_bad_year_bounds(kwargs):
    with pytest.raises(ValueError, match="year"):
        RuleFilterExtractor(**kwargs)


_YEARS = ["2021", "2022", "2023", "１９９９", "1000", "2050"]
_LINKS = ["年", "年の", "年に", "年に一度", "年から", "年まで", "年以降", "年度", "年問題", "〜", "-", "から", "、", " ",
          "万円", " and ", " to ", "の売上", "?"]
_PREFIXES = ["", "in ", "since ", "from ", "between ", "売上 "]


@settings(max_examples=300, deadline=None)
@given(prefix=st.sampled_from(_PREFIXES), parts=st.lists(st.tuples(st.sampled_from(_YEARS), st.sampled_from(_LINKS)),
                                                         min_size=1, max_size=4))
def test_property_no_plausible_year_of_the_question_is_filtered_out(prefix, parts):
    import re
    import unicodedata

    question = prefix + "".join(y + link for y, link in parts)
    found = RuleFilterExtractor()(question)
    if found is None:
        return
    cond = found["year"]
    lo, hi = (cond, cond) if isinstance(cond, int) else cond["between"]
    for n in re.findall(r"(?<![0-9])[0-9]{4}(?![0-9])", unicodedata.normalize("NFKC", question)):
        if 1900 <= int(n) <= 2100:
            assert lo <= int(n) <= hi, (question, found)


# -- regressions (issue 14, round 2) ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "question",
    ["Summarize the leave policy in 2000 words", "Encrypt it in 2048 bits", "Answer in 1900 characters",
     "Respond in 2000 ms", "What does it cost in 1999 yen", "GDP in 2023 dollars", "run it in 2010 mode",
     "Answer in 2000 Words", "from 2020 to 2022 dollars", "between 2000 and 2001 dollars", "during 2023 mode"],
)
def test_an_english_year_followed_by_a_content_word_is_not_read(question):
    # regression: "in 2000 words" gave {'year': 2000}, and the search found nothing
    assert RuleFilterExtractor()(question) is None


@pytest.mark.parametrize(
    ("question", "expected"),
    [("What changed in 2023?", {"year": 2023}), ("sales in 2023", {"year": 2023}),
     ("sales in 2023 for HR", {"year": 2023}), ("in 2023 and before that", {"year": 2023}),
     ("in 2023, what changed", {"year": 2023}), ("in 2023の売上", {"year": 2023}),
     ("What did HR change in 2023 in the leave policy", {"year": 2023}),
     ("from 2020 to 2022 in sales", {"year": {"between": [2020, 2022]}})],
)
def test_an_english_year_followed_by_a_function_word_or_punctuation_is_read(question, expected):
    assert RuleFilterExtractor()(question) == expected


def test_a_year_read_as_an_amount_leaves_the_results_unfiltered():
    base = BM25Retriever.from_documents(CORPUS, k=6)
    question = "Summarize the leave policy in 2000 words"
    assert FilterExtractionRetriever(base, RuleFilterExtractor()).invoke(question) == base.invoke(question)


def test_the_llm_extractor_prompt_is_capped():
    # regression: a 100k-character question made a 100k-character extraction prompt
    from langchain_ragspine.retrievers.query_transform import MAX_PROMPT_QUERY_CHARS

    llm = SpyChatModel(replies=["{}"])
    question = "売上 " + "あ" * 100_000
    retriever = FilterExtractionRetriever(BM25Retriever.from_documents(CORPUS, k=6), LLMFilterExtractor(llm, {"year": "y"}))
    with pytest.raises(ValueError, match="a BM25 query may be at most"):  # the search refuses it (issue 25)
        retriever.invoke(question)
    assert len(llm.prompts) == 1 and question[:MAX_PROMPT_QUERY_CHARS] in llm.prompts[0]
    assert question[: MAX_PROMPT_QUERY_CHARS + 1] not in llm.prompts[0]
