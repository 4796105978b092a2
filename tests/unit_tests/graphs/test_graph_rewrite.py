"""The corrective rewrite keeps a model's rewrite that shares no word with the question when the retriever can
score it (a cross-language rewrite is what a rewrite is for), and still drops one it cannot score."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field

from langchain_ragspine.graphs import build_corrective_rag, build_self_rag
from langchain_ragspine.graphs.nodes import rewrite
from langchain_ragspine.retrievers import BM25Retriever
from tests.unit_tests.chat_docs import SECRET, chunk

QUESTION = "When does the rainy season start?"


#: A Japanese corpus: no word of the English question is in it.
DOCS = [
    chunk("tsuyu", "梅雨入り", "関東の梅雨入りの時期は例年6月上旬である。"),
    chunk("fuji", "富士山", "富士山は日本一高い山である。"),
    chunk("secret", "社外秘", f"{SECRET} 梅雨入り 時期 {SECRET}", sensitivity="RESTRICTED"),
]


class Rewriter(BaseChatModel):
    """Rewrites into ``rewrite``; grades a passage relevant when it holds 梅雨; answers citing passage 1."""

    rewrite: str = "梅雨入り 時期"
    prompts: list[str] = Field(default_factory=list)

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:  # type: ignore[no-untyped-def]
        text = "\n".join(str(m.content) for m in messages)
        self.prompts.append(text)
        if "rewrite a question into a better search query" in text:
            reply = self.rewrite
        elif "Grade passages" in text:
            reply = '{"1": "yes"}' if "梅雨" in text.split("Question:")[0] else '{"1": "no"}'
        elif "binary_score" in text:
            reply = '{"binary_score": "yes"}'
        else:
            reply = "関東の梅雨入りは例年6月上旬です [1]。"
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=reply))])

    @property
    def _llm_type(self) -> str:
        return "rewriter"


@pytest.fixture(scope="module")
def retriever() -> BM25Retriever:
    return BM25Retriever.from_documents(DOCS, k=3)


@pytest.mark.parametrize("build", [build_corrective_rag, build_self_rag])
def test_a_cross_language_rewrite_the_index_can_score_is_kept(retriever, build):
    llm = Rewriter()
    out = build(retriever, llm).invoke({"question": QUESTION})
    rewrites = [t for t in out["trace"] if t["step"] in ("rewrite_query", "retry") and t.get("query")]
    assert rewrites[0]["query"] == "梅雨入り 時期" and rewrites[0]["how"] == "llm"
    assert out["search_query"] == "梅雨入り 時期" and out["original_query"] == QUESTION
    assert not out["refused"] and [c["doc_id"] for c in out["citations"]] == ["tsuyu"]
    assert not any(SECRET in p for p in llm.prompts)


def test_a_rewrite_the_index_cannot_score_is_still_dropped(retriever):
    llm = Rewriter(rewrite="xyzzy plugh")
    out = build_corrective_rag(retriever, llm).invoke({"question": QUESTION})
    first = next(t for t in out["trace"] if t["step"] == "rewrite_query")
    assert first["how"] == "deterministic" and first["query"] == "rainy season start"
    assert out["refused"] is True


def test_the_score_check_searches_within_the_runs_filters(retriever):
    """A rewrite that only scores outside the run's filter does not count as scorable (filters never widen)."""
    scoped = BM25Retriever.from_documents(
        [Document(d.page_content, metadata={**d.metadata, "tenant": "A" if d.metadata["doc_id"] == "tsuyu" else "B"})
         for d in DOCS], k=3
    )
    out = build_corrective_rag(scoped, Rewriter()).invoke({"question": QUESTION, "filters": {"tenant": "B"}})
    first = next(t for t in out["trace"] if t["step"] == "rewrite_query")
    assert first["how"] == "deterministic" and out["refused"] is True


def test_rewrite_without_a_score_check_keeps_the_old_rule():
    llm = Rewriter()
    assert rewrite(QUESTION, [QUESTION], llm=llm) == ("rainy season start", "deterministic")
    assert rewrite(QUESTION, [QUESTION], llm=llm, scorable=lambda q: True) == ("梅雨入り 時期", "llm")
    assert rewrite(QUESTION, [QUESTION], llm=llm, scorable=lambda q: False)[1] == "deterministic"
