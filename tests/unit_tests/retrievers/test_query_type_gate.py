"""Every retriever of the package refuses a query that is not a string at its entry, before any LLM call or inner
search (issue 16, new-user trial: ``MultiQueryRetriever(...).invoke(["a"])`` first warned "query generation
failed … normalize() argument 2 must be str, not list" and then raised an error naming the inner BM25Retriever)."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import pytest
from langchain_core.documents import Document

from langchain_ragspine import BM25Retriever, GlossaryRetriever
from langchain_ragspine.retrievers import (
    DecompositionRetriever,
    HyDERetriever,
    MultiIndexRetriever,
    MultiQueryRetriever,
    RAGFusionRetriever,
    StepBackRetriever,
)
from tests.unit_tests._transform_fakes import SpyChatModel, SpyRetriever

DOCS = [Document("梅雨は六月から七月の雨季。", metadata={"chunk_id": "tsuyu#0"})]
BAD: list[Any] = [["a"], {"question": "梅雨"}, None, 123]


def _wrappers(llm: SpyChatModel, inner: SpyRetriever) -> list[Any]:
    return [
        MultiQueryRetriever(inner, llm, n_queries=2),
        RAGFusionRetriever(inner, llm),
        HyDERetriever(inner, llm),
        StepBackRetriever(inner, llm),
        DecompositionRetriever(inner, llm),
        GlossaryRetriever(inner, glossary={"梅雨": ["つゆ"]}),
        MultiIndexRetriever(indexes={"a": inner, "b": BM25Retriever.from_documents(DOCS)}),
    ]


@pytest.mark.parametrize("bad", BAD)
@pytest.mark.parametrize("i", range(7))
def test_a_wrapper_refuses_a_non_string_query_before_any_llm_call(i, bad):
    llm, inner = SpyChatModel(replies=["梅雨\nつゆ"]), SpyRetriever(default=DOCS)
    r = _wrappers(llm, inner)[i]
    name = type(r).__name__
    pattern = rf"^{name}\.invoke takes one query string, got .*\.batch\(\[\.\.\.\]\).*itemgetter"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "query generation failed" warning first
        with pytest.raises(TypeError, match=pattern):
            r.invoke(bad)
        with pytest.raises(TypeError, match=pattern):
            asyncio.run(r.ainvoke(bad))
    assert llm.prompts == [] and inner.calls == []  # nothing ran
    assert r.invoke("梅雨") == [] or all(isinstance(d, Document) for d in r.invoke("梅雨"))  # a string still works


def test_the_line_is_the_one_bm25_gives():
    with pytest.raises(TypeError) as bm25_err:
        BM25Retriever.from_documents(DOCS).invoke(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError) as mq_err:
        MultiQueryRetriever(SpyRetriever(), SpyChatModel()).invoke(None)  # type: ignore[arg-type]
    assert str(mq_err.value) == str(bm25_err.value).replace("BM25Retriever", "MultiQueryRetriever")
