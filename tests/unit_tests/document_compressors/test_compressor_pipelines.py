"""Every compressor works in LangChain's ContextualCompressionRetriever and DocumentCompressorPipeline, sync and
async, and gated_pipeline puts the RESTRICTED gate first."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.retrievers import BaseRetriever

from langchain_ragspine.document_compressors import (
    ContextualHeader,
    CrossEncoderReranker,
    ExtractiveCompressor,
    LLMListwiseReranker,
    LostInTheMiddleReorder,
    MMRCompressor,
    RestrictedGate,
    gated_compression_retriever,
    gated_pipeline,
)
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.retrievers import BM25Retriever
from tests.unit_tests.spy_models import SpyChatModel

classic = pytest.importorskip("langchain_classic.retrievers")
from langchain_classic.retrievers import ContextualCompressionRetriever  # noqa: E402
from langchain_classic.retrievers.document_compressors import DocumentCompressorPipeline  # noqa: E402

TEXTS = [
    "梅雨は北海道と小笠原諸島を除く日本でみられる雨季の一種である。梅雨入りは沖縄が最も早い。",
    "梅雨の時期は湿度が高く、カビが生えやすい。北海道には梅雨がないと言われる。",
    "The Eiffel Tower is in Paris. It was completed in 1889. It is 330 metres tall.",
    "Mount Fuji is the highest mountain in Japan. It is 3776 metres tall. It last erupted in 1707.",
    "台風は夏から秋にかけて日本に来る。梅雨前線を刺激して大雨になることがある。",
]
DOCS = [
    Document(
        page_content=t,
        metadata={"chunk_id": f"d{i}#0", "doc_id": f"d{i}", "title": f"T{i}", "sensitivity": "INTERNAL"},
    )
    for i, t in enumerate(TEXTS)
]
SECRET = Document(
    page_content="SECRETMARK 梅雨 budget Eiffel",
    metadata={"chunk_id": "s#0", "doc_id": "s", "title": "secret", "sensitivity": "RESTRICTED"},
)


class LeakyRetriever(BaseRetriever):
    """BM25 over DOCS plus the RESTRICTED chunk on every call (as a foreign store might return it)."""

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return [SECRET, *BM25Retriever.from_documents(DOCS, k=5).invoke(query)]


class StubCrossEncoder:
    def predict(self, pairs: list[tuple[str, str]], batch_size: int = 32, **kwargs: Any) -> np.ndarray:
        return np.asarray([float(len(set(q) & set(t))) for q, t in pairs])


def compressors() -> list[tuple[str, BaseDocumentCompressor]]:
    return [
        ("gate", RestrictedGate()),
        ("cross_encoder", CrossEncoderReranker(model=StubCrossEncoder(), k=3)),
        ("listwise", LLMListwiseReranker(llm=SpyChatModel(reply="[2] > [1]"), k=3)),
        ("mmr_tokens", MMRCompressor(k=3)),
        ("mmr_embeddings", MMRCompressor(embeddings=HashingEmbeddings(), k=3)),
        ("lost_in_the_middle", LostInTheMiddleReorder()),
        ("extractive", ExtractiveCompressor(max_chars=30)),
    ]


QUERY = "梅雨 北海道"


@pytest.mark.parametrize(("name", "compressor"), compressors())
def test_in_contextual_compression_retriever_sync_and_async(name, compressor):
    retriever = ContextualCompressionRetriever(base_compressor=compressor, base_retriever=LeakyRetriever())
    out = retriever.invoke(QUERY)
    assert out and all(d.metadata["chunk_id"] != "s#0" for d in out)  # every compressor fails closed
    assert {d.metadata["chunk_id"] for d in out} <= {d.metadata["chunk_id"] for d in DOCS}
    assert all(d.page_content in TEXTS for d in out)  # page_content is never rewritten
    assert _ids(out) == _ids(_run_async(retriever.ainvoke(QUERY)))


@pytest.mark.parametrize(("name", "compressor"), compressors())
async def test_in_document_compressor_pipeline_sync_and_async(name, compressor):
    pipeline = DocumentCompressorPipeline(transformers=[RestrictedGate(), compressor, LostInTheMiddleReorder()])
    docs = [SECRET, *BM25Retriever.from_documents(DOCS, k=5).invoke(QUERY)]
    out = pipeline.compress_documents(docs, QUERY)
    assert out and "s#0" not in _ids(out)
    assert _ids(out) == _ids(await pipeline.acompress_documents(docs, QUERY))


def test_gated_pipeline_runs_the_gate_first_before_the_listwise_model():
    spy = SpyChatModel(reply="[2] > [1]")
    pipeline = gated_pipeline([LLMListwiseReranker(llm=spy), LostInTheMiddleReorder()])
    assert isinstance(pipeline, DocumentCompressorPipeline)
    assert isinstance(pipeline.transformers[0], RestrictedGate) and len(pipeline.transformers) == 3
    out = pipeline.compress_documents([SECRET, DOCS[0], DOCS[1]], "梅雨")
    assert "SECRETMARK" not in "".join(spy.prompts) and len(spy.prompts) == 1
    assert _ids(out) == ["d1#0", "d0#0"]
    # a gate already first is not doubled; a ContextualHeader (a transformer) is accepted
    again = gated_pipeline([RestrictedGate(), ContextualHeader()])
    assert len(again.transformers) == 2
    assert len(gated_pipeline([]).transformers) == 1


def test_gated_pipeline_rejects_other_objects():
    with pytest.raises(TypeError, match=r"transformers\[1\]"):
        gated_pipeline([RestrictedGate(), "mmr"])  # type: ignore[list-item]


def test_gated_compression_retriever():
    spy = SpyChatModel(reply="[2] > [1]")
    retriever = gated_compression_retriever(LeakyRetriever(), [LLMListwiseReranker(llm=spy, k=2)])
    assert isinstance(retriever, ContextualCompressionRetriever)
    out = retriever.invoke(QUERY)
    assert len(out) == 2 and "s#0" not in _ids(out)
    assert spy.prompts and all("SECRETMARK" not in p for p in spy.prompts)
    with pytest.raises(TypeError, match="base_retriever"):
        gated_compression_retriever("bm25", [])  # type: ignore[arg-type]


def _ids(docs: Any) -> list[str]:
    return [d.metadata["chunk_id"] for d in docs]


def _run_async(coro: Any) -> Any:
    import asyncio

    return asyncio.run(coro)
