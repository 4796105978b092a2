"""The ``embed_as`` call option of the package's dense retrievers: embed the search text with the model's query
encoder (``embed_query``, the default) or its document encoder (``embed_documents``).

Many embedding models encode the two roles differently: e5 prefixes ``"query: "`` / ``"passage: "``, ruri-v3
``検索クエリ: `` / ``検索文書: ``, instruction models add an instruction to queries only.  A search text that is
meant to look like a passage of the corpus belongs in the document role: HyDE (Gao, Ma, Lin & Callan, "Precise
Zero-Shot Dense Retrieval without Relevance Labels", ACL 2023, arXiv 2212.10496) encodes its hypothetical document
with the document encoder, and LangChain's ``HypotheticalDocumentEmbedder.embed_query`` calls ``embed_documents``.

A retriever takes the option when its class lists ``"embed_as"`` in
:attr:`~langchain_ragspine.retrievers.base.ContractRetriever.call_options`
(:class:`~langchain_ragspine.retrievers.dense.DenseRetriever`,
:class:`~langchain_ragspine.retrievers.postgres.PostgresDenseRetriever`,
:class:`~langchain_ragspine.retrievers.hybrid.HybridRetriever`, which hands it to the channels that take it);
:func:`accepts_embed_as` tells.  Nobody else is ever passed it.

A text embedded in the document role is not a chunk: it goes to the model behind a chunk-vector cache wrapper
(the package's :class:`~langchain_ragspine.embeddings.cache.CachedEmbeddings`, LangChain's
``CacheBackedEmbeddings``), whose ``embed_documents`` would store its vector, never to the wrapper.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from langchain_core.embeddings import Embeddings

from langchain_ragspine.embeddings.cache import CachedEmbeddings

__all__ = ["EMBED_AS", "EMBED_AS_OPTION", "EmbedAs", "accepts_embed_as", "aembed_search_text", "check_embed_as",
           "embed_search_text"]

#: The call option's name: ``retriever.invoke(text, embed_as="document")``.
EMBED_AS_OPTION: Final = "embed_as"
#: Its values: ``"query"`` (``embed_query``, the default) and ``"document"`` (``embed_documents``).
EMBED_AS: Final = ("query", "document")

EmbedAs = Literal["query", "document"]


def check_embed_as(value: Any) -> EmbedAs:
    """``value`` as an ``embed_as`` value; ``None`` (the option not given) is ``"query"``.

    Raises:
        ValueError: any other value (a non-string too), naming it and the two accepted.

    Example:
        >>> check_embed_as(None), check_embed_as("document")
        ('query', 'document')
        >>> check_embed_as("passage")
        Traceback (most recent call last):
        ...
        ValueError: embed_as must be 'query' (embed_query) or 'document' (embed_documents: the passage role, e.g. e5's 'passage: '), got 'passage'
    """
    if value is None or value == "query":
        return "query"
    if value == "document":
        return "document"
    raise ValueError(
        "embed_as must be 'query' (embed_query) or 'document' (embed_documents: the passage role, e.g. e5's "
        f"'passage: '), got {value!r}"
    )


def accepts_embed_as(retriever: Any) -> bool:
    """Whether ``retriever``'s class declares the ``embed_as`` call option (a foreign retriever never does)."""
    return EMBED_AS_OPTION in getattr(type(retriever), "call_options", ())


def _document_encoder(embedding: Embeddings) -> Embeddings:
    """The model that embeds a non-chunk text in the document role: ``embedding`` itself, or the model behind a
    chunk-vector cache wrapper (ours, or LangChain's ``CacheBackedEmbeddings``), so the text is not cached."""
    if isinstance(embedding, CachedEmbeddings):
        return embedding.underlying_embeddings
    inner = getattr(embedding, "underlying_embeddings", None)
    if type(embedding).__name__ == "CacheBackedEmbeddings" and isinstance(inner, Embeddings):
        return inner
    return embedding


def embed_search_text(embedding: Embeddings, text: str, embed_as: EmbedAs) -> list[float]:
    """The vector of search text ``text``: ``embedding.embed_query(text)`` for ``"query"``,
    ``embed_documents([text])[0]`` for ``"document"`` (past a cache wrapper, see the module docstring).

    Raises:
        ValueError: ``"document"`` and the model returned no vector.
    """
    if embed_as == "query":
        return embedding.embed_query(text)
    return _one(_document_encoder(embedding).embed_documents([text]))


async def aembed_search_text(embedding: Embeddings, text: str, embed_as: EmbedAs) -> list[float]:
    """Async :func:`embed_search_text` (``aembed_query`` / ``aembed_documents``)."""
    if embed_as == "query":
        return await embedding.aembed_query(text)
    return _one(await _document_encoder(embedding).aembed_documents([text]))


def _one(vectors: list[list[float]]) -> list[float]:
    if len(vectors) != 1:
        raise ValueError(f"embed_documents returned {len(vectors)} vectors for one text")
    return vectors[0]
