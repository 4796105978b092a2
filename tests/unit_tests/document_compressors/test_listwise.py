"""LLMListwiseReranker: the pure prompt builder and parser, the gate before the model, and the fallbacks."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage

from langchain_ragspine.document_compressors.listwise import (
    LLMListwiseReranker,
    build_listwise_prompt,
    parse_listwise_response,
    parse_ranking,
)
from tests.unit_tests.spy_models import SpyChatModel


def _doc(i: int, text: str, **md: Any) -> Document:
    return Document(page_content=text, metadata={"chunk_id": f"d{i}#0", "doc_id": f"d{i}", "title": f"T{i}", **md})


DOCS = [_doc(1, "Paris has the Eiffel Tower."), _doc(2, "Mount Fuji is in Japan."), _doc(3, "梅雨は雨季の一種である。")]


# -- build_listwise_prompt --------------------------------------------------------------------------------------------
def test_prompt_numbers_every_candidate_and_names_the_query_and_format():
    prompt = build_listwise_prompt("Where is Fuji?", DOCS)
    assert "[1] Paris has the Eiffel Tower." in prompt
    assert "[2] Mount Fuji is in Japan." in prompt
    assert "[3] 梅雨は雨季の一種である。" in prompt
    assert prompt.count("Where is Fuji?") == 2  # before and after the passages, as RankGPT does
    assert "[2] > [1] > [3]" in prompt and "3 passages" in prompt
    assert build_listwise_prompt("Where is Fuji?", DOCS) == prompt  # pure


def test_prompt_cuts_long_passages_collapses_space_and_prefers_prompt_text():
    long_doc = _doc(4, "x" * 1000)
    compressed = _doc(5, "full text", prompt_text="short\n\n  version")
    prompt = build_listwise_prompt("q", [long_doc, compressed, "a plain string"], max_chars=50)
    assert "[1] " + "x" * 50 + "…" in prompt and "x" * 51 not in prompt
    assert "[2] short version" in prompt and "full text" not in prompt
    assert "[3] a plain string" in prompt
    assert "x" * 1000 in build_listwise_prompt("q", [long_doc], max_chars=None)


def test_prompt_refuses_a_restricted_candidate():
    with pytest.raises(ValueError, match="RESTRICTED"):
        build_listwise_prompt("q", [DOCS[0], _doc(9, "secret", sensitivity=" restricted ")])


# -- parse_listwise_response ------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "n", "expected"),
    [
        ("[2] > [1] > [3]", 3, [1, 0, 2]),  # RankGPT's format
        ("[3] > [1]", 3, [2, 0, 1]),  # missing ids appended in original order
        ("[2] > [2] > [9] > [0] > [1]", 3, [1, 0, 2]),  # duplicate and invalid ids dropped
        ("<think>maybe [1] > [3] > [2]</think>\n[3] > [2] > [1]", 3, [2, 1, 0]),  # reasoning ignored
        ("<think>[3] > [2] > [1] but the answer was cut off", 3, [0, 1, 2]),  # unclosed think: nothing left
        ("[2, 3, 1]", 3, [1, 2, 0]),  # JSON array
        ('```json\n{"ranking": ["3", "1", "2"]}\n```', 3, [2, 0, 1]),  # JSON object holding an array
        ("Passage 3 is the most relevant, followed by passage 1.", 3, [2, 0, 1]),  # prose
        ("The ranking is 2, 3, 1.", 3, [1, 2, 0]),  # prose with bare numbers
        ("2 > 3", 3, [1, 2, 0]),
        ("2", 3, [1, 0, 2]),
        ("［３］＞［１］＞［２］", 3, [2, 0, 1]),  # full-width
        ("文書2が最も関連が高く、次に文書3です。", 3, [1, 2, 0]),
        ("I cannot rank these 3 passages.", 3, [0, 1, 2]),  # a lone number in prose is not a ranking
        ("", 3, [0, 1, 2]),
        ("no idea", 3, [0, 1, 2]),
        ("[7] > [8]", 3, [0, 1, 2]),  # only invalid ids: input order
        ("[1] > [2]", 0, []),
        (None, 2, [0, 1]),
    ],
)
def test_parser_cases(text, n, expected):
    assert parse_listwise_response(text, n) == expected


def test_parse_ranking_tells_unparseable_from_parsed():
    assert parse_ranking("nothing here", 3) is None
    assert parse_ranking("[3]", 3) == [2]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80), st.integers(min_value=0, max_value=25))
def test_parser_always_returns_a_permutation(text, n):
    out = parse_listwise_response(text, n)
    assert sorted(out) == list(range(n))


@settings(max_examples=100, deadline=None)
@given(st.permutations(list(range(1, 9))), st.sampled_from([" > ", ", ", " "]), st.booleans())
def test_parser_reads_back_any_written_ranking(order, sep, brackets):
    text = sep.join(f"[{i}]" if brackets else str(i) for i in order)
    assert parse_listwise_response(text, 8) == [i - 1 for i in order]


# -- the reranker ------------------------------------------------------------------------------------------------------
def test_reranks_in_the_models_order_with_rank_scores_and_metadata():
    docs = [_doc(1, "a", scores={"bm25": 1.0, "vector": None, "fused": 1.0, "rerank": None}), _doc(2, "b"), _doc(3, "c")]
    spy = SpyChatModel(reply="[3] > [1] > [2]")
    out = LLMListwiseReranker(llm=spy).compress_documents(docs, "q")
    assert [d.page_content for d in out] == ["c", "a", "b"]
    assert [d.metadata["scores"]["rerank"] for d in out] == pytest.approx([1.0, 2 / 3, 1 / 3])
    assert out[1].metadata["scores"]["bm25"] == 1.0 and out[1].metadata["title"] == "T1"
    assert len(spy.prompts) == 1 and "[1] a" in spy.prompts[0]


def test_k_and_window():
    docs = [_doc(i, f"text {i}") for i in range(1, 7)]
    spy = SpyChatModel(reply="[3] > [2] > [1]")
    out = LLMListwiseReranker(llm=spy, k=None, window=3).compress_documents(docs, "q")
    assert [d.metadata["chunk_id"] for d in out] == ["d3#0", "d2#0", "d1#0", "d4#0", "d5#0", "d6#0"]
    assert "[4]" not in spy.prompts[0]  # only the window is shown
    assert len(LLMListwiseReranker(llm=spy, k=2).compress_documents(docs, "q")) == 2


def test_restricted_candidates_never_reach_the_model_nor_the_output():
    secret = _doc(9, "SECRETMARK budget", sensitivity="ＲＥＳＴＲＩＣＴＥＤ")
    spy = SpyChatModel(reply="[1] > [2] > [3] > [4]")
    out = LLMListwiseReranker(llm=spy).compress_documents([secret, *DOCS], "budget")
    assert "SECRETMARK" not in spy.prompts[0]
    assert "[4]" not in spy.prompts[0]
    assert [d.metadata["chunk_id"] for d in out] == ["d1#0", "d2#0", "d3#0"]


@pytest.mark.parametrize(
    "documents",
    [[], [_doc(9, "SECRET", sensitivity="restricted")], [_doc(9, "SECRET", sensitivity=["INTERNAL", "RESTRICTED"])]],
)
def test_no_call_when_nothing_is_left(documents):
    spy = SpyChatModel()
    assert LLMListwiseReranker(llm=spy).compress_documents(documents, "q") == []
    assert spy.prompts == []


def test_one_candidate_needs_no_call():
    spy = SpyChatModel()
    assert LLMListwiseReranker(llm=spy).compress_documents([DOCS[0]], "q") == [DOCS[0]]
    assert spy.prompts == []


def test_model_error_falls_back_to_input_order(caplog):
    spy = SpyChatModel(error="server down")
    with caplog.at_level(logging.WARNING):
        out = LLMListwiseReranker(llm=spy).compress_documents(DOCS, "q")
    assert out == DOCS  # the documents as they came, no rerank score invented
    assert "server down" in caplog.text


def test_unparseable_answer_falls_back_to_input_order(caplog):
    llm = FakeListChatModel(responses=["I am not sure which one."])
    with caplog.at_level(logging.WARNING):
        out = LLMListwiseReranker(llm=llm).compress_documents(DOCS, "q")
    assert out == DOCS
    assert "no passage id" in caplog.text


def test_reads_content_blocks_and_think_blocks():
    llm = GenericFakeChatModel(
        messages=iter([AIMessage(content=[{"type": "text", "text": "<think>[1]</think>[2] > [3] > [1]"}])])
    )
    out = LLMListwiseReranker(llm=llm).compress_documents(DOCS, "q")
    assert [d.metadata["chunk_id"] for d in out] == ["d2#0", "d3#0", "d1#0"]


def test_bad_arguments():
    with pytest.raises(TypeError, match="llm"):
        LLMListwiseReranker(llm="ollama:qwen2.5:7b")
    with pytest.raises(ValueError, match="k must be"):
        LLMListwiseReranker(llm=SpyChatModel(), k=0)
    with pytest.raises(TypeError, match="window"):
        LLMListwiseReranker(llm=SpyChatModel(), window=2.5)


async def test_async_uses_ainvoke_and_matches_sync():
    spy = SpyChatModel(reply="[3] > [1] > [2]")
    reranker = LLMListwiseReranker(llm=spy)
    out = await reranker.acompress_documents(DOCS, "q")
    assert out == reranker.compress_documents(DOCS, "q")
    assert [d.metadata["chunk_id"] for d in out] == ["d3#0", "d1#0", "d2#0"]
    failing = LLMListwiseReranker(llm=SpyChatModel(error="down"))
    assert await failing.acompress_documents(DOCS, "q") == DOCS
    spy2 = SpyChatModel()
    assert await LLMListwiseReranker(llm=spy2).acompress_documents([], "q") == []
    assert spy2.prompts == []
