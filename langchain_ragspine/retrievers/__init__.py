"""Retrievers (LangChain ``BaseRetriever``s)."""

from langchain_ragspine.retrievers.bm25 import BM25Retriever
from langchain_ragspine.retrievers.dense import DenseRetriever
from langchain_ragspine.retrievers.hybrid import HybridRetriever, fuse
from langchain_ragspine.retrievers.parent_child import ParentChildRetriever

__all__ = ["BM25Retriever", "DenseRetriever", "HybridRetriever", "ParentChildRetriever", "fuse"]
