"""Misspelt or unknown arguments get a did-you-mean everywhere, and HybridRetriever has from_texts like the others.

Regression tests for a new-user trial (issue 16): ``HybridRetriever.from_documents(chunks, emb, tokenzier="cjk")``
got no did-you-mean (its known list lacked ``tokenizer``, ``bm25_kwargs``, ``dense_kwargs``);
``BM25Retriever.invoke("x", kk=2)`` said ``unexpected keyword arguments for BM25Retriever: ['kk']`` without one;
``HybridRetriever.from_texts`` was missing.
"""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.documents import Document

from langchain_ragspine import BM25Retriever, DenseRetriever, HybridRetriever
from langchain_ragspine.embeddings import HashingEmbeddings

EMB = HashingEmbeddings(256)
DOCS = [Document("梅雨は六月から七月の雨季。", metadata={"chunk_id": "tsuyu#0"})]


@pytest.mark.parametrize(
    ("kwargs", "hint"),
    [
        ({"tokenzier": "cjk"}, "tokenizer"),
        ({"bm25_kwarg": {}}, "bm25_kwargs"),
        ({"dense_kwarg": {}}, "dense_kwargs"),
        ({"top_k": 2}, "k"),
        ({"fecth_k": 3}, "fetch_k"),
    ],
)
def test_hybrid_from_documents_names_the_closest_argument(kwargs, hint):
    with pytest.raises(TypeError, match=rf"^HybridRetriever\.from_documents got unexpected argument '\w+' "
                                        rf"\(did you mean '{hint}'"):
        HybridRetriever.from_documents(DOCS, EMB, **kwargs)


def test_hybrid_from_documents_still_passes_its_arguments_on():
    h = HybridRetriever.from_documents(DOCS, EMB, k=1, tokenizer="cjk", bm25_kwargs={"k1": 1.2},
                                       dense_kwargs={"index_kind": "flat"}, fusion="rrf", fetch_k=5)
    assert (h.k, h.fusion, h.fetch_k) == (1, "rrf", 5)
    assert h.retrievers[0].k1 == 1.2 and h.retrievers[1].index_kind == "flat"  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "make",
    [
        lambda: BM25Retriever.from_documents(DOCS),
        lambda: DenseRetriever.from_documents(DOCS, EMB),
        lambda: HybridRetriever.from_documents(DOCS, EMB),
    ],
)
def test_an_unknown_invoke_keyword_gets_a_did_you_mean(make):
    r = make()
    name = type(r).__name__
    pattern = rf"^{name}\.invoke got unexpected keyword argument 'kk' \(did you mean 'k'\?\); known: "
    with pytest.raises(TypeError, match=pattern):
        r.invoke("梅雨", kk=2)
    with pytest.raises(TypeError, match=pattern):
        asyncio.run(r.ainvoke("梅雨", kk=2))
    with pytest.raises(TypeError, match=r"'filters' \(did you mean 'filter'"):
        r.invoke("梅雨", filters={"lang": "ja"})


def test_hybrid_from_texts_has_the_shape_of_the_other_two():
    texts, metas, ids = ["apple pie", "pear tart"], [{"a": 1}, {"a": 2}], ["p1", "p2"]
    h = HybridRetriever.from_texts(texts, EMB, metas, ids, k=1)
    d = DenseRetriever.from_texts(texts, EMB, metas, ids, k=1)
    got = h.invoke("apple")
    assert [x.id for x in got] == [x.id for x in d.invoke("apple")] == ["p1"]
    assert got[0].metadata["a"] == 1 and got[0].page_content == "apple pie"
    with pytest.raises(ValueError, match="from_texts got 2 texts, 1 metadatas and 2 ids"):
        HybridRetriever.from_texts(texts, EMB, metas[:1], ids)
    with pytest.raises(TypeError, match="did you mean 'tokenizer'"):
        HybridRetriever.from_texts(texts, EMB, tokenzier="cjk")
    plain = HybridRetriever.from_texts(texts, EMB, k=2).invoke("apple pie pear")
    assert len(plain) == 2 and all(x.id == x.metadata["chunk_id"] for x in plain)
