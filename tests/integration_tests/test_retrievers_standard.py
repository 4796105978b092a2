"""LangChain's standard retriever suite (langchain-tests) for DenseRetriever and HybridRetriever, offline with
hashing embeddings (BM25Retriever's run is in test_bm25_standard.py)."""

from typing import Any

from langchain_core.documents import Document
from langchain_tests.integration_tests import RetrieversIntegrationTests

from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.retrievers import BM25Retriever, DenseRetriever, HybridRetriever

_DOCS = [
    Document(page_content=f"梅雨は東アジアの雨季です。資料{i}番。", metadata={"chunk_id": f"doc{i}#0"}) for i in range(6)
]
_EMB = HashingEmbeddings(128)


class TestDenseRetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[DenseRetriever]:
        return DenseRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"docs": _DOCS, "embedding": _EMB, "k": 4}

    @property
    def retriever_query_example(self) -> str:
        return "梅雨とは"


class TestHybridRetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[HybridRetriever]:
        return HybridRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"retrievers": [BM25Retriever(docs=_DOCS), DenseRetriever(docs=_DOCS, embedding=_EMB)], "k": 4}

    @property
    def retriever_query_example(self) -> str:
        return "梅雨とは"


class TestHybridFromDocumentsStandard(TestHybridRetrieverStandard):
    """The same suite through HybridRetriever.from_documents (k as a constructor argument)."""

    @property
    def retriever_constructor(self) -> Any:
        return lambda **kw: HybridRetriever.from_documents(_DOCS, _EMB, **kw)

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"k": 4}
