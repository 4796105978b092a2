"""Every public method that takes a list of Documents refuses anything else with a TypeError naming the method
(trial of issue 27, F3-F5): a string was reordered character by character, a Document iterated field by field, a
list of strings failed with ``AttributeError: 'str' object has no attribute 'metadata'``."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.stores import InMemoryStore
from langchain_core.vectorstores import InMemoryVectorStore

from langchain_ragspine.document_compressors import (
    CrossEncoderReranker,
    ExtractiveCompressor,
    LLMListwiseReranker,
    LostInTheMiddleReorder,
    MMRCompressor,
    RestrictedGate,
)
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.retrievers import ParentChildRetriever
from langchain_ragspine.text_splitters import ParagraphTextSplitter
from langchain_ragspine.text_splitters.contextual import ContextualHeader
from tests.unit_tests.document_compressors.test_compressor_pipelines import StubCrossEncoder
from tests.unit_tests.spy_models import SpyChatModel

BAD = {
    "a string": ("abc", "got str"),
    "one Document": (Document(page_content="x"), "got Document"),
    "None": (None, "got NoneType"),
    "a dict": ({"page_content": "x"}, "got dict"),
    "a list of strings": (["text"], "item 0 is a str"),
    "a list with a dict": ([Document(page_content="x"), {"page_content": "y"}], "item 1 is a dict"),
}


def _compressors() -> list[Any]:
    return [RestrictedGate(), CrossEncoderReranker(model=StubCrossEncoder(), top_n=3),
            LLMListwiseReranker(llm=SpyChatModel(reply="[1]"), top_n=3), MMRCompressor(k=3),
            MMRCompressor(embeddings=HashingEmbeddings(), k=3), ExtractiveCompressor(), LostInTheMiddleReorder()]


def _calls() -> list[tuple[str, Callable[[Any], Any]]]:
    calls: list[tuple[str, Callable[[Any], Any]]] = []
    for c in _compressors():
        name = type(c).__name__
        calls.append((f"{name}.compress_documents", lambda v, c=c: c.compress_documents(v, "q")))
        calls.append((f"{name}.compress_documents", lambda v, c=c: asyncio.run(c.acompress_documents(v, "q"))))
    reorder, header = LostInTheMiddleReorder(), ContextualHeader()
    calls += [("LostInTheMiddleReorder.transform_documents", reorder.transform_documents),
              ("LostInTheMiddleReorder.transform_documents", lambda v: asyncio.run(reorder.atransform_documents(v))),
              ("ContextualHeader.transform_documents", header.transform_documents),
              ("ContextualHeader.transform_documents", lambda v: asyncio.run(header.atransform_documents(v)))]
    pc = ParentChildRetriever(vectorstore=InMemoryVectorStore(HashingEmbeddings(64)), docstore=InMemoryStore(),
                              child_splitter=ParagraphTextSplitter(60, 0))
    calls += [("ParentChildRetriever.add_documents", pc.add_documents),
              ("ParentChildRetriever.add_documents", lambda v: asyncio.run(pc.aadd_documents(v)))]
    return calls


@pytest.mark.parametrize("bad", list(BAD), ids=list(BAD))
@pytest.mark.parametrize("owner, call", _calls(), ids=[f"{o}-{i}" for i, (o, _) in enumerate(_calls())])
def test_a_method_taking_documents_refuses_anything_else_naming_itself(owner, call, bad) -> None:
    value, says = BAD[bad]
    with pytest.raises(TypeError, match=rf"^{owner} takes a list of Documents.*{says}"):
        call(value)


@pytest.mark.parametrize("owner, call", _calls(), ids=[f"{o}-{i}" for i, (o, _) in enumerate(_calls())])
def test_a_list_of_documents_and_a_tuple_are_taken(owner, call) -> None:
    docs = [Document(page_content="梅雨は六月に始まる。", metadata={"source": "a.md", "chunk_id": "a#0"}),
            Document(page_content="紅葉は十一月。", metadata={"source": "b.md", "chunk_id": "b#0"})]
    call(docs)
    call(tuple(docs))
