"""Retrievers (LangChain ``BaseRetriever``s) and the retriever-call contract every stage uses to call one."""

from langchain_ragspine.retrievers.bm25 import BM25Retriever
from langchain_ragspine.retrievers.contract import (
    RetrieverParams,
    ainvoke_retriever,
    invoke_retriever,
    retriever_params,
)
from langchain_ragspine.retrievers.dense import DenseRetriever
from langchain_ragspine.retrievers.hybrid import HybridRetriever, fuse

__all__ = [
    "BM25Retriever",
    "DenseRetriever",
    "HybridRetriever",
    "RetrieverParams",
    "ainvoke_retriever",
    "fuse",
    "invoke_retriever",
    "retriever_params",
]
