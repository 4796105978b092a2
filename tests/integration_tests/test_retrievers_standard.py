"""LangChain's standard retriever suite (langchain-tests) for DenseRetriever, HybridRetriever and
ParentChildRetriever (over a chunk store, and with ParentDocumentRetriever's arguments), offline with hashing
embeddings (BM25Retriever's run is in test_bm25_standard.py)."""

import tempfile
from pathlib import Path
from typing import Any

from langchain_core.documents import Document
from langchain_core.stores import InMemoryStore
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_tests.integration_tests import RetrieversIntegrationTests

from langchain_ragspine.backends.directory.chunk_store import ChunkStore
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.retrievers import BM25Retriever, DenseRetriever, HybridRetriever, ParentChildRetriever
from langchain_ragspine.text_splitters import ParagraphTextSplitter, ParentChildTextSplitter

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


# parents: six documents of three sections each, children of about one sentence; `k` counts parents
_PARENT_DOCS = [
    Document(
        "\n\n".join(f"# 第{j}節\n\n梅雨は東アジアの雨季です。資料{i}番の{j}節。六月に始まる。" for j in range(3)),
        metadata={"doc_id": f"doc{i}", "source": f"doc{i}.md"},
    )
    for i in range(6)
]
_PARENTS, _CHILDREN = ParentChildTextSplitter(chunk_size=20, chunk_overlap=0).split_with_parents(_PARENT_DOCS)
_CHUNK_STORE = ChunkStore(Path(tempfile.mkdtemp(prefix="ragspine-standard-")) / "chunks.sqlite")
for _doc in _PARENT_DOCS:
    _id = _doc.metadata["doc_id"]
    _CHUNK_STORE.replace_doc_chunks(_id, [c for c in _CHILDREN if c.metadata["doc_id"] == _id],
                                    parents=[p for p in _PARENTS if p.metadata["doc_id"] == _id])
_VECTORSTORE, _DOCSTORE = InMemoryVectorStore(_EMB), InMemoryStore()
ParentChildRetriever(vectorstore=_VECTORSTORE, docstore=_DOCSTORE,
                     child_splitter=ParagraphTextSplitter(chunk_size=20, chunk_overlap=0)).add_documents(_PARENT_DOCS)


class TestParentChildRetrieverStandard(RetrieversIntegrationTests):
    """Over an ingested layout: BM25 children, parents in a ChunkStore."""

    @property
    def retriever_constructor(self) -> type[ParentChildRetriever]:
        return ParentChildRetriever

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"child_retriever": BM25Retriever(docs=_CHILDREN), "store": _CHUNK_STORE, "k": 4}

    @property
    def retriever_query_example(self) -> str:
        return "梅雨とは"


class TestParentChildDropInStandard(TestParentChildRetrieverStandard):
    """With ParentDocumentRetriever's arguments: children in an InMemoryVectorStore, parents in an InMemoryStore."""

    @property
    def retriever_constructor_params(self) -> dict[str, Any]:
        return {"vectorstore": _VECTORSTORE, "docstore": _DOCSTORE, "k": 4}
