"""Graders: robust yes/no/unknown parsing (never raising), LLM graders, the deterministic lexical grader."""

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import BaseModel, Field

from langchain_ragspine.graphs.graders import (
    DEFAULT_MIN_OVERLAP,
    Graders,
    LexicalGrader,
    LLMRelevanceGrader,
    LLMSupportGrader,
    LLMUsefulnessGrader,
    make_graders,
    parse_binary,
)


class GradeModel(BaseModel):
    binary_score: str


PARSE_CASES: list[tuple[Any, str]] = [
    # the list
    (None, "unknown"),
    ("", "unknown"),
    ("   \n ", "unknown"),
    ('```json\n{"binary_score": "yes"}\n```', "yes"),
    ('```\n{"score": "no"}\n```', "no"),
    ("<think>The passage mentions Paris… so no? Actually yes.</think>\nno", "no"),
    ("<think>\nlong reasoning, yes yes\n</think>yes", "yes"),
    ({"score": "yes"}, "yes"),
    ({"binary_score": "Yes"}, "yes"),
    ({"Binary_Score": "NO"}, "no"),
    ('{"binary_score": "Yes"}', "yes"),
    ("Yes, the document is relevant to the question.", "yes"),
    ("The document is not relevant.", "no"),
    ("No. It talks about something else.", "no"),
    ("I think the answer is no.", "no"),
    # beyond the issue
    ({"score": True}, "yes"),
    ({"score": False}, "no"),
    ({"score": 1}, "yes"),
    ({"score": 0.5}, "unknown"),
    ({"other": "yes"}, "unknown"),
    (True, "yes"),
    (False, "no"),
    (AIMessage(content="yes"), "yes"),
    (AIMessage(content='<think>x</think>{"binary_score": "no"}'), "no"),
    (AIMessageChunk(content="No"), "no"),
    (AIMessage(content=[{"type": "text", "text": "yes"}]), "yes"),
    (GradeModel(binary_score="yes"), "yes"),
    ("  YES  ", "yes"),
    ("yes.", "yes"),
    ("'no'", "no"),
    ("**Yes**", "yes"),
    ("はい", "yes"),
    ("いいえ", "no"),
    ("はい、関連しています。", "yes"),
    ("いいえ。関連しません", "no"),
    ("是", "yes"),
    ("否", "no"),
    ("ｙｅｓ", "yes"),  # full width
    ("y", "yes"),
    ("n", "no"),
    ("true", "yes"),
    ("FALSE", "no"),
    ("I cannot say yes or no", "unknown"),
    ("No, wait: yes", "no"),
    ("yes [1]", "yes"),
    ("<think>unfinished reasoning: yes", "unknown"),
    ("maybe", "unknown"),
    ("nothing", "unknown"),
    ("Not sure.", "unknown"),
    (42, "unknown"),
    (object(), "unknown"),
    ([], "unknown"),
    ({}, "unknown"),
    ('{"binary_score": ', "unknown"),
]


@pytest.mark.parametrize(("output", "expected"), PARSE_CASES, ids=[repr(c[0])[:40] for c in PARSE_CASES])
def test_parse_binary_table(output, expected):
    assert parse_binary(output) == expected


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(), st.binary(), json_values, json_values.map(lambda v: AIMessage(content=str(v)))))
def test_parse_binary_never_raises(value):
    assert parse_binary(value) in ("yes", "no", "unknown")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=40), st.sampled_from(["yes", "no"]))
def test_parse_binary_reads_wrapped_verdicts(noise, verdict):
    assert parse_binary({"binary_score": verdict}) == verdict
    assert parse_binary(f"<think>{noise.replace('<', '')}</think>\n{verdict}") == verdict
    assert parse_binary(f'```json\n{{"score": "{verdict}"}}\n```') == verdict


def test_deeply_nested_input_is_unknown_not_an_error():
    value: Any = "yes"
    for _ in range(5000):
        value = [value]
    assert parse_binary(value) == "unknown"


class RaisingChatModel(BaseChatModel):
    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:  # type: ignore[no-untyped-def]
        raise TimeoutError("slow")

    @property
    def _llm_type(self) -> str:
        return "raising"


class SpyChatModel(BaseChatModel):
    reply: str = "yes"
    prompts: list[str] = Field(default_factory=list)

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:  # type: ignore[no-untyped-def]
        self.prompts.append("\n".join(str(m.content) for m in messages))
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=self.reply))])

    @property
    def _llm_type(self) -> str:
        return "spy"


DOC = Document(page_content="Mount Fuji is the highest mountain in Japan.", metadata={"chunk_id": "a#0"})
SECRET = Document(page_content="TOPSECRET", metadata={"chunk_id": "s#0", "sensitivity": "restricted "})


def test_llm_graders_parse_and_never_raise():
    fenced = FakeListChatModel(responses=['```json\n{"binary_score": "yes"}\n```'])
    assert LLMRelevanceGrader(fenced)("highest mountain?", DOC) == "yes"
    assert LLMSupportGrader(FakeListChatModel(responses=["No."]))("answer", [DOC]) == "no"
    assert LLMUsefulnessGrader(FakeListChatModel(responses=["<think>…</think>はい"]))("q", "a") == "yes"
    for grader in (LLMRelevanceGrader, LLMSupportGrader, LLMUsefulnessGrader):
        g = grader(RaisingChatModel())
        args = ("q", DOC) if grader is LLMRelevanceGrader else ("a", [DOC]) if grader is LLMSupportGrader else ("q", "a")
        assert g(*args) == "unknown"
    with pytest.raises(TypeError):
        LLMRelevanceGrader("not a model")  # type: ignore[arg-type]


def test_llm_graders_never_see_restricted_text():
    spy = SpyChatModel()
    assert LLMRelevanceGrader(spy)("q", SECRET) == "no"
    assert LLMSupportGrader(spy)("a", [SECRET, DOC]) == "yes"
    assert all("TOPSECRET" not in p for p in spy.prompts)
    graders = make_graders(spy)
    assert graders.relevant("q", SECRET) == "no"
    assert all("TOPSECRET" not in p for p in spy.prompts)


def test_lexical_relevance_threshold():
    g = LexicalGrader()
    assert DEFAULT_MIN_OVERLAP == 0.55
    assert g.relevance("Which is the highest mountain in Japan?", DOC) == "yes"
    assert g.relevance("Who painted the Mona Lisa?", DOC) == "no"
    # stopwords do not make an unrelated English chunk relevant
    unrelated = Document(page_content="The cat is on the mat of the house.", metadata={})
    assert g.relevance("What is the capital of France?", unrelated) == "no"
    assert g.relevance("日本で梅雨がないのは北海道とどこか。",
                       Document(page_content="梅雨は北海道と小笠原諸島を除く日本でみられる。")) == "yes"
    assert g.relevance("q", SECRET) == "no"


def test_lexical_relevance_by_score_threshold():
    doc = Document(page_content="zzz", metadata={"scores": {"bm25": 3.0, "rerank": 0.9}})
    assert LexicalGrader().relevance("unrelated words", doc) == "no"
    assert LexicalGrader(score_thresholds={"rerank": 0.5}).relevance("unrelated words", doc) == "yes"
    assert LexicalGrader(score_thresholds={"bm25": 5.0}).relevance("unrelated words", doc) == "no"
    with pytest.raises(ValueError):
        LexicalGrader(min_overlap=1.5)


def test_lexical_support_and_usefulness():
    g = LexicalGrader()
    assert g.support("Mount Fuji is the highest mountain in Japan. [1]", [DOC]) == "yes"
    assert g.support("Mount Fuji is   the highest\nmountain in Japan. [1]", [DOC]) == "yes"  # whitespace folded
    assert g.support("Mount Fuji is in France. [1]", [DOC]) == "no"
    assert g.support("I don't know", []) == "yes"
    assert g.support("Mount Fuji is the highest mountain in Japan.", [SECRET]) == "no"
    assert g.usefulness("q", "Mount Fuji [1]") == "yes"
    assert g.usefulness("q", "わかりません") == "no"
    assert g.usefulness("q", "Insufficient context: …") == "no"


def test_llm_unknown_falls_back_to_the_lexical_grader():
    graders = make_graders(FakeListChatModel(responses=["hmm, hard to say"]))
    assert graders.relevant("Which is the highest mountain in Japan?", DOC) == "yes"
    assert graders.relevant("Who painted the Mona Lisa?", DOC) == "no"
    graders = make_graders(FakeListChatModel(responses=["no"]))
    assert graders.relevant("Which is the highest mountain in Japan?", DOC) == "no"  # the LLM's verdict stands


def test_graders_bundle():
    no = Graders.constant("no")
    assert (no.relevant("q", DOC), no.supported("a", [DOC]), no.useful("q", "a")) == ("no", "no", "no")

    def boom(*args: Any) -> str:
        raise RuntimeError("x")

    odd = Graders(relevance=lambda q, d: {"binary_score": "Yes"}, support=boom, usefulness=lambda q, a: None)
    assert (odd.relevant("q", DOC), odd.supported("a", [DOC]), odd.useful("q", "a")) == ("yes", "unknown", "unknown")
    assert Graders.constant("yes").relevant("q", SECRET) == "no"  # the gate comes first
