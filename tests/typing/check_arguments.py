# mypy: warn-unused-ignores
"""Checked by mypy (``make lint``), never run: every marked line must be a type error, else mypy reports the
``type: ignore`` as unused.  Proves that the retrievers' typed signatures reach type checkers and IDEs."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from langchain_ragspine.embeddings import HashingEmbeddings
    from langchain_ragspine.retrievers import BM25Retriever, DenseRetriever, HybridRetriever

    BM25Retriever(kk=3)  # type: ignore[call-arg]
    BM25Retriever(top_k=3)  # type: ignore[call-arg]
    DenseRetriever(embedding=HashingEmbeddings(8), search_kwargs={"k": 3})  # type: ignore[call-arg]
    HybridRetriever(retrievers=[], kk=3)  # type: ignore[call-arg]
    BM25Retriever(k="3")  # type: ignore[arg-type]
    BM25Retriever(k=3, k1=1.2, b=0.75, tokenizer="cjk", filter={"dept": "a"})  # the right names pass
