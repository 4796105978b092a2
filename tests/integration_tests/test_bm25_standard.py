"""LangChain's standard retriever suite (langchain-tests) run against BM25Retriever."""

from langchain_core.documents import Document
from langchain_tests.integration_tests import RetrieversIntegrationTests

from langchain_ragspine.retrievers import BM25Retriever

_DOCS = [
    Document(page_content=f"梅雨は東アジアの雨季です。資料{i}番。", metadata={"chunk_id": f"doc{i}#0"}) for i in range(6)
]


class TestBM25RetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[BM25Retriever]:
        return BM25Retriever

    @property
    def retriever_constructor_params(self) -> dict:
        return {"docs": _DOCS, "k": 4}

    @property
    def retriever_query_example(self) -> str:
        return "梅雨とは"
