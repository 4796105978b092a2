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
:class:`~langchain_ragspine.vectorstores.RagSpineStoreRetriever`, and the wrappers that hand it on to the retrievers
they search: :class:`~langchain_ragspine.retrievers.hybrid.HybridRetriever` (to its channels),
:class:`~langchain_ragspine.retrievers.parent_child.ParentChildRetriever` (to its child retriever),
:class:`~langchain_ragspine.retrievers.multi_index.MultiIndexRetriever` (to each index searched),
:class:`~langchain_ragspine.retrievers.filter_extraction.FilterExtractionRetriever` (to its base));
:func:`accepts_embed_as` tells.  A wrapper hands the option on with :func:`embed_as_target`, which decides per
inner retriever:

* it declares the option: the option is passed;
* a LangChain ``VectorStoreRetriever`` (any store) of search type ``"similarity"`` or ``"mmr"`` whose store has
  ``embeddings``: ``"document"`` is honoured by :class:`DocumentRoleVectorStoreRetriever`, which embeds the text
  with ``embed_documents`` and calls the store's ``similarity_search_by_vector`` /
  ``max_marginal_relevance_search_by_vector`` (LangChain's standard ``VectorStore`` methods) with the same
  ``search_kwargs``;
* any other ``VectorStoreRetriever`` (``similarity_score_threshold``, which has no by-vector method in LangChain's
  API, or a store without ``embeddings``) embeds the text with ``embed_query``: the fallback is visible, an
  :class:`EmbedAsIgnoredWarning`;
* any other retriever (BM25, a foreign retriever) gets no option: BM25 embeds nothing, and a foreign retriever's
  keywords are its own.

A text embedded in the document role is not a chunk: it goes to the model behind a chunk-vector cache wrapper
(the package's :class:`~langchain_ragspine.embeddings.cache.CachedEmbeddings`, LangChain's
``CacheBackedEmbeddings``), whose ``embed_documents`` would store its vector, never to the wrapper.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, Final, Literal

import langchain_core
from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStore, VectorStoreRetriever

from langchain_ragspine._stacklevel import user_stacklevel
from langchain_ragspine.embeddings.cache import CachedEmbeddings

__all__ = ["BY_VECTOR_SEARCH_TYPES", "EMBED_AS", "EMBED_AS_OPTION", "DocumentRoleVectorStoreRetriever",
           "EmbedAs", "EmbedAsIgnoredWarning", "accepts_embed_as", "aembed_search_text", "asearch_as_document",
           "check_embed_as", "embed_as_options", "embed_as_target", "embed_search_text", "search_as_document",
           "warn_embed_as_ignored"]

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


def embed_as_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """The options a wrapper hands on from its call's ``options``: ``{"embed_as": value}`` (checked) when the call
    gave it, else ``{}``.

    Raises:
        ValueError: an ``embed_as`` other than ``"query"`` / ``"document"``.
    """
    value = options.get(EMBED_AS_OPTION)
    return {} if value is None else {EMBED_AS_OPTION: check_embed_as(value)}


class EmbedAsIgnoredWarning(UserWarning):
    """A search asked to embed its text as a document (``embed_as="document"``, e.g. HyDE's hypothetical document)
    reached a ``VectorStoreRetriever`` that cannot honour it (search type ``similarity_score_threshold``, or a store
    without ``embeddings``): the text was embedded with ``embed_query`` instead."""


#: The ``VectorStoreRetriever`` search types with a by-vector twin in LangChain's ``VectorStore`` API.
BY_VECTOR_SEARCH_TYPES: Final = ("similarity", "mmr")


def _by_vector(retriever: VectorStoreRetriever) -> bool:
    return retriever.search_type in BY_VECTOR_SEARCH_TYPES and retriever.vectorstore.embeddings is not None


def embed_as_target(retriever: BaseRetriever, options: Mapping[str, Any]) -> tuple[BaseRetriever, dict[str, Any]]:
    """What a wrapper searches for ``options`` (from :func:`embed_as_options`): ``(retriever, options)`` when the
    retriever declares ``embed_as``; for ``embed_as="document"`` and a ``VectorStoreRetriever`` that does not,
    ``(DocumentRoleVectorStoreRetriever over it, {})`` when its search type has a by-vector method and its store
    ``embeddings``, else ``(retriever, {})`` with an :class:`EmbedAsIgnoredWarning`; ``(retriever, {})`` for
    anything else (see the module docstring)."""
    if not options or accepts_embed_as(retriever):
        return retriever, dict(options)
    if options.get(EMBED_AS_OPTION) != "document" or not isinstance(retriever, VectorStoreRetriever):
        return retriever, {}
    if _by_vector(retriever):
        return DocumentRoleVectorStoreRetriever.over(retriever), {}
    warn_embed_as_ignored(retriever)
    return retriever, {}


def warn_embed_as_ignored(retriever: VectorStoreRetriever) -> None:
    """Issue the :class:`EmbedAsIgnoredWarning` for ``retriever`` (pointing at the user's line)."""
    warnings.warn(
        f"embed_as='document' cannot reach a {type(retriever).__name__} of search type {retriever.search_type!r} "
        f"over {type(retriever.vectorstore).__name__} (only {' and '.join(map(repr, BY_VECTOR_SEARCH_TYPES))} "
        "with a store that has embeddings can search by a document vector): the text is embedded with embed_query",
        EmbedAsIgnoredWarning,
        stacklevel=user_stacklevel(langchain_core),
    )


def _document_search_method(vectorstore: VectorStore, search_type: str, asynchronous: bool) -> Any:
    name = "similarity_search_by_vector" if search_type == "similarity" else "max_marginal_relevance_search_by_vector"
    return getattr(vectorstore, "a" + name if asynchronous else name)


def search_as_document(vectorstore: VectorStore, search_type: str, text: str, kwargs: Mapping[str, Any]) -> list[Document]:
    """``vectorstore``'s search of type ``search_type`` (one of :data:`BY_VECTOR_SEARCH_TYPES`) for ``text``
    embedded as a document (``embed_documents``, past a cache wrapper), with the search's ``kwargs``
    (``k``, ``fetch_k``, ``lambda_mult``, the store's ``filter``, …)."""
    vector = embed_search_text(vectorstore.embeddings, text, "document")  # type: ignore[arg-type]
    return list(_document_search_method(vectorstore, search_type, False)(vector, **kwargs))


async def asearch_as_document(
    vectorstore: VectorStore, search_type: str, text: str, kwargs: Mapping[str, Any]
) -> list[Document]:
    """Async :func:`search_as_document`."""
    vector = await aembed_search_text(vectorstore.embeddings, text, "document")  # type: ignore[arg-type]
    return list(await _document_search_method(vectorstore, search_type, True)(vector, **kwargs))


class DocumentRoleVectorStoreRetriever(VectorStoreRetriever):
    """A ``VectorStoreRetriever`` that embeds its query text as a document: what :func:`embed_as_target` searches
    in place of a LangChain ``VectorStoreRetriever`` for ``embed_as="document"``.  Same store, search type
    (``"similarity"`` or ``"mmr"``) and ``search_kwargs``; the text goes through the store's ``embeddings``
    ``embed_documents`` and then ``similarity_search_by_vector`` / ``max_marginal_relevance_search_by_vector``.  A
    call's ``filter`` never replaces the retriever's
    (:func:`~langchain_ragspine.vectorstores.base.search_kwargs_for_call`: ANDed over the package's stores).

    Raises:
        ValueError: a search type other than ``"similarity"`` / ``"mmr"``, or a store without ``embeddings``
            (at construction).
    """

    @classmethod
    def over(cls, retriever: VectorStoreRetriever) -> DocumentRoleVectorStoreRetriever:
        """The document-role twin of ``retriever``."""
        if not _by_vector(retriever):
            raise ValueError(
                f"a document-role search needs search_type 'similarity' or 'mmr' and a store with embeddings, got "
                f"{retriever.search_type!r} over {type(retriever.vectorstore).__name__}"
            )
        return cls(vectorstore=retriever.vectorstore, search_type=retriever.search_type,
                   search_kwargs=dict(retriever.search_kwargs), tags=retriever.tags, metadata=retriever.metadata)

    def _search_kwargs(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        # a call's filter never widens the retriever's (vectorstores/base.py; imported here: it imports this module)
        from langchain_ragspine.vectorstores.base import search_kwargs_for_call

        return search_kwargs_for_call(self.vectorstore, self.search_kwargs, kwargs)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        return search_as_document(self.vectorstore, self.search_type, query, self._search_kwargs(kwargs))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        return await asearch_as_document(self.vectorstore, self.search_type, query, self._search_kwargs(kwargs))


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
