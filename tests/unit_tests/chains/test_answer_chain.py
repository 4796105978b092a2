"""The answer chain: numbered context, citations that map to given chunks, extractive answers, the gate."""

from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from langchain_ragspine.chains import (
    detect_language,
    extractive_answer,
    format_context,
    insufficient_context,
    is_dont_know,
    make_answer_chain,
    prepare_context,
)
from langchain_ragspine.document_compressors.reorder import LostInTheMiddleReorder, lost_in_the_middle_order


def _doc(i: int, text: str, *, title: str | None = None, sensitivity: str = "PUBLIC", **md: Any) -> Document:
    meta = {
        "chunk_id": f"doc{i}#0",
        "doc_id": f"doc{i}",
        "title": title or f"Title {i}",
        "source_locator": f"doc{i}.md#0-{len(text)}",
        "sensitivity": sensitivity,
        **md,
    }
    return Document(page_content=text, metadata=meta)


CORPUS = [
    _doc(1, "The Eiffel Tower is in Paris. It was completed in 1889."),
    _doc(2, "Mount Fuji is the highest mountain in Japan. It is 3776 metres tall."),
    _doc(3, "梅雨は北海道と小笠原諸島を除く日本でみられる。梅雨は雨季の一種である。", title="梅雨"),
]


class SpyChatModel(BaseChatModel):
    """Records every prompt; answers ``reply``."""

    reply: str = "yes [1]"
    prompts: list[str] = Field(default_factory=list)

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:  # type: ignore[no-untyped-def]
        self.prompts.append("\n".join(str(m.content) for m in messages))
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=self.reply))])

    @property
    def _llm_type(self) -> str:
        return "spy"


class FailingChatModel(BaseChatModel):
    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:  # type: ignore[no-untyped-def]
        raise ConnectionError("no server")

    @property
    def _llm_type(self) -> str:
        return "failing"


def test_format_context_numbers_titles_locators_and_prompt_text():
    docs = [CORPUS[0], _doc(9, "raw text", prompt_text="compressed text"), Document(page_content="bare")]
    text = format_context(docs)
    assert text.split("\n\n") == [
        "[1] Title 1 (doc1.md#0-55)\nThe Eiffel Tower is in Paris. It was completed in 1889.",
        "[2] Title 9 (doc9.md#0-8)\ncompressed text",
        "[3] untitled\nbare",
    ]


def test_lost_in_the_middle_order_is_langchains_permutation():
    assert lost_in_the_middle_order([1, 2, 3, 4, 5]) == [1, 3, 5, 4, 2]
    assert lost_in_the_middle_order([1, 2, 3, 4, 5, 6, 7]) == [1, 3, 5, 7, 6, 4, 2]
    assert lost_in_the_middle_order([]) == []
    restricted = _doc(4, "secret", sensitivity="restricted")
    out = LostInTheMiddleReorder().compress_documents([CORPUS[0], restricted, CORPUS[1], CORPUS[2]], "q")
    assert [d.metadata["doc_id"] for d in out] == ["doc1", "doc3", "doc2"]


def test_prepare_context_gates_caps_and_reorders():
    restricted = _doc(4, "secret", sensitivity=" Restricted ")
    docs = [restricted, *CORPUS]
    assert [d.metadata["doc_id"] for d in prepare_context(docs, k=2)] == ["doc1", "doc2"]
    assert [d.metadata["doc_id"] for d in prepare_context(docs, lost_in_the_middle=True)] == ["doc1", "doc3", "doc2"]
    with pytest.raises(ValueError):
        prepare_context(docs, k=0)


def test_extractive_answer_cites_the_right_chunk():
    out = make_answer_chain().invoke({"question": "Which is the highest mountain in Japan?", "documents": CORPUS})
    assert out["mode"] == "extractive"
    assert "Mount Fuji is the highest mountain in Japan. [2]" in out["answer"]
    assert out["citations"][0]["chunk_id"] == "doc2#0"
    assert out["citations"][0]["n"] == 2
    assert set(out["citations"][0]) == {"n", "chunk_id", "doc_id", "title", "source_locator", "attributed"}
    assert out["citations"][0]["attributed"] is False  # a verbatim sentence of the chunk, not an attribution
    # every line is a verbatim sentence of the cited chunk followed by its number
    for line in out["answer"].splitlines():
        sentence, _, n = line.rpartition(" [")
        assert sentence in CORPUS[int(n.rstrip("]")) - 1].page_content


def test_extractive_answer_japanese():
    out = extractive_answer("日本で梅雨がないのは北海道とどこか。", CORPUS)
    assert "小笠原諸島" in out["answer"]
    assert [c["doc_id"] for c in out["citations"]][0] == "doc3"


@pytest.mark.parametrize(
    ("question", "expected"),
    [("What is quantum chromodynamics?", "I don't know"), ("量子色力学とは何ですか", "わかりません"), ("量子色动力学", "我不知道")],
)
def test_extractive_says_i_dont_know_in_the_questions_language(question, expected):
    out = make_answer_chain().invoke({"question": question, "documents": CORPUS})
    assert out == {
        "answer": expected, "citations": [], "mode": "extractive", "invalid_citations": [],
        "unsupported_sentences": [], "warning": None,
    }
    assert make_answer_chain().invoke({"question": question, "documents": []})["answer"] == expected


def test_llm_path_returns_text_and_maps_citations_dropping_invalid_numbers():
    llm = FakeListChatModel(responses=["<think>hmm [3]</think>Fuji is 3776 m [2]. The tower [1, 9] is in Paris [7]."])
    out = make_answer_chain(llm).invoke({"question": "Tell me", "documents": CORPUS})
    assert out["mode"] == "llm"
    assert out["answer"] == "Fuji is 3776 m [2]. The tower [1] is in Paris."
    assert [(c["n"], c["chunk_id"]) for c in out["citations"]] == [(2, "doc2#0"), (1, "doc1#0")]


def test_llm_path_numbers_follow_the_order_shown_with_lost_in_the_middle():
    spy = SpyChatModel(reply="Answer [2].")
    out = make_answer_chain(spy, lost_in_the_middle=True).invoke({"question": "q?", "documents": CORPUS})
    # shown order is doc1, doc3, doc2: [2] is doc3
    assert out["citations"][0]["chunk_id"] == "doc3#0"
    assert "[2] 梅雨 (doc3.md#0-" in spy.prompts[0]
    assert "I don't know" in spy.prompts[0] and "わかりません" in spy.prompts[0]


def test_llm_never_sees_restricted_text_and_no_documents_means_no_call():
    spy = SpyChatModel(reply="ok [1]")
    secret = _doc(5, "TOPSECRET launch codes", sensitivity="ＲＥＳＴＲＩＣＴＥＤ")
    out = make_answer_chain(spy).invoke({"question": "codes?", "documents": [secret, CORPUS[0]]})
    assert out["citations"][0]["chunk_id"] == "doc1#0"
    assert all("TOPSECRET" not in p for p in spy.prompts)
    spy.prompts.clear()
    out = make_answer_chain(spy).invoke({"question": "codes?", "documents": [secret]})
    assert out["answer"] == "I don't know" and out["citations"] == [] and spy.prompts == []


def test_llm_failure_degrades_to_the_extractive_answer(caplog):
    out = make_answer_chain(FailingChatModel()).invoke({"question": "How many metres tall?", "documents": CORPUS})
    assert out["mode"] == "extractive_fallback"
    assert "3776" in out["answer"] and out["citations"][0]["chunk_id"] == "doc2#0"
    assert "extractive" in caplog.text


def test_bad_inputs_raise():
    chain = make_answer_chain()
    with pytest.raises(ValueError):
        chain.invoke({"documents": CORPUS})
    with pytest.raises(TypeError):
        chain.invoke({"question": "q", "documents": ["not a document"]})
    with pytest.raises(TypeError):
        make_answer_chain("not a model")  # type: ignore[arg-type]


def test_language_helpers():
    assert detect_language("日本で梅雨がないのは") == "ja"
    assert detect_language("北京大学是哪一年成立的") == "zh"
    assert detect_language("What?") == "en"
    assert "insufficient context" in insufficient_context("梅雨とは？")
    for text in ("I don't know.", "わかりません。", "我不知道", " i do not know ", "", insufficient_context("q")):
        assert is_dont_know(text), text
    assert not is_dont_know("Paris [1]")


def test_regression_extractive_answer_skips_fenced_code():
    # the demo corpus showed a code line (`retriever.invoke("チャンクの重なりは何文字ですか")`) picked as the answer
    from langchain_core.documents import Document

    from langchain_ragspine.chains import extractive_answer

    doc = Document(
        page_content='使い方の例です。\n\n```python\nretriever.invoke("チャンクの重なりは何文字ですか")\n```\n\n'
        "チャンクの重なりは最大 80 文字です。",
        metadata={"chunk_id": "d#0", "doc_id": "d", "title": "T", "source_locator": "d.md#0-10"},
    )
    out = extractive_answer("チャンクの重なりは何文字ですか", [doc])
    assert "retriever.invoke" not in out["answer"]
    assert out["answer"].startswith("チャンクの重なりは最大 80 文字です。")


def test_regression_extractive_answer_skips_code_when_the_chunk_starts_inside_a_fence():
    from langchain_core.documents import Document

    from langchain_ragspine.chains import extractive_answer

    doc = Document(
        page_content='retriever.invoke("チャンクの重なりは何文字ですか")\n```\n\nチャンクの重なりは最大 80 文字です。',
        metadata={"chunk_id": "d#1", "doc_id": "d", "title": "T", "source_locator": "d.md#10-90"},
    )
    out = extractive_answer("チャンクの重なりは何文字ですか", [doc])
    assert out["answer"] == "チャンクの重なりは最大 80 文字です。 [1]"
