"""Retrievers (LangChain ``BaseRetriever``s)."""

from langchain_ragspine.retrievers.bm25 import BM25Retriever

__all__ = ["BM25Retriever"]
