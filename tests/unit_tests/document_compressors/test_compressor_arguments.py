"""Every compressor of the package refuses a constructor keyword it does not take (trial of ba5bf07): LangChain's
``BaseDocumentCompressor`` ignores one, so ``MMRCompressor(top_n=3)`` kept ``k=6`` and returned six documents."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models import FakeListChatModel

from langchain_ragspine.document_compressors.compression import ExtractiveCompressor
from langchain_ragspine.document_compressors.listwise import LLMListwiseReranker
from langchain_ragspine.document_compressors.mmr import MMRCompressor
from langchain_ragspine.document_compressors.reorder import LostInTheMiddleReorder
from langchain_ragspine.document_compressors.restricted import RestrictedGate


def _llm() -> FakeListChatModel:
    return FakeListChatModel(responses=["1"])


@pytest.mark.parametrize(("make", "bad", "hint"), [
    (lambda **kw: MMRCompressor(**kw), {"top_n": 3}, "did you mean 'k'"),
    (lambda **kw: MMRCompressor(**kw), {"kk": 1}, "did you mean 'k'"),
    (lambda **kw: ExtractiveCompressor(**kw), {"max_char": 10}, "did you mean 'max_chars'"),
    (lambda **kw: RestrictedGate(**kw), {"strict": True}, "unexpected argument 'strict'"),
    (lambda **kw: LLMListwiseReranker(llm=_llm(), **kw), {"topn": 3}, "did you mean 'top_n'"),
    (lambda **kw: LostInTheMiddleReorder(**kw), {"k": 3}, "unexpected argument 'k'"),
])
def test_an_unknown_keyword_is_a_type_error_with_a_did_you_mean(make: Any, bad: dict, hint: str) -> None:
    with pytest.raises(TypeError, match=hint):
        make(**bad)


def test_the_keywords_they_take_still_work() -> None:
    assert MMRCompressor(k=3).k == 3 and ExtractiveCompressor(max_chars=10).max_chars == 10
    assert LLMListwiseReranker(llm=_llm(), top_n=2).k == 2  # LangChain's name of k, kept
