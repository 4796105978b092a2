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
    # the factories' further keywords are typed too (issue 16: from_documents(docs, top_k=3) passed mypy)
    BM25Retriever.from_documents([], top_k=3)  # type: ignore[call-arg]
    BM25Retriever.from_texts([], kk=3)  # type: ignore[call-arg]
    DenseRetriever.from_documents([], HashingEmbeddings(8), top_k=3)  # type: ignore[call-arg]
    DenseRetriever.from_texts([], HashingEmbeddings(8), search_kwargs={})  # type: ignore[call-arg]
    HybridRetriever.from_documents([], HashingEmbeddings(8), top_k=2)  # type: ignore[call-arg]
    HybridRetriever.from_documents([], HashingEmbeddings(8), tokenzier="cjk")  # type: ignore[call-arg]
    HybridRetriever.from_texts([], HashingEmbeddings(8), weigths=[1.0])  # type: ignore[call-arg]
    BM25Retriever.from_documents([], k=3, filter={"a": 1}, workers=2, preprocess_func=str.split)  # these pass
    DenseRetriever.from_texts([], HashingEmbeddings(8), k=2, index_kind="flat", cache_path=None)
    HybridRetriever.from_texts([], HashingEmbeddings(8), k=2, tokenizer="cjk", fusion="rrf", bm25_kwargs={"k1": 1.2})
    # make_embeddings: the specs that always give a model are typed Embeddings (the README passes one on), any other
    # spec may give None ("none", "auto" without the embed extra)
    from langchain_ragspine.embeddings.factory import make_embeddings

    DenseRetriever.from_documents([], make_embeddings("hashing"))
    DenseRetriever.from_documents([], make_embeddings("auto"))  # type: ignore[arg-type]
