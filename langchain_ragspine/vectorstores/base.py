"""What every RagSpine ``VectorStore`` shares, whatever backend holds the chunks: id and list checks
(:func:`as_list`, :func:`check_records`, :func:`as_chunks`, :func:`texts_as_documents`), all-or-nothing writes
(:func:`all_or_nothing`), LangChain's Maximal Marginal Relevance search once (:class:`MarginalRelevanceStore`) and
the retriever whose own filter scopes every call (:class:`ScopedVectorStoreRetriever`,
:func:`search_kwargs_for_call`).

The one vector store of the package is :class:`~langchain_ragspine.vectorstores.RagSpineVectorStore` (over a store
directory or PostgreSQL: :mod:`langchain_ragspine.backends`); the rules it maps LangChain's id-keyed
``VectorStore`` onto versioned documents with are in its module docstring
(:mod:`langchain_ragspine.vectorstores.store`).

* **ids.**  A ``Document``'s id is its ``chunk_id``: ``ids[i]`` when given, else ``metadata["chunk_id"]``, else
  ``Document.id``, else a new ``uuid4().hex`` (:func:`as_chunks`).  Its document is ``metadata["doc_id"]``, else
  the id itself (a one-chunk document).
* **filters** are the package's own predicate language (:mod:`langchain_ragspine.filters`), applied before
  scoring.  The retriever of ``as_retriever`` (:class:`ScopedVectorStoreRetriever`) ANDs a call's filter with its
  own: ``as_retriever(search_kwargs={"filter": F}).invoke(q, filter=G)`` searches ``F AND G``, and ``filter=None``
  keeps ``F`` (LangChain's ``VectorStoreRetriever`` lets the call's replace it).
* **MMR.**  ``max_marginal_relevance_search`` (and ``as_retriever(search_type="mmr")``) picks ``k`` of the
  ``fetch_k`` most similar chunks with ``langchain_core``'s ``maximal_marginal_relevance`` over their stored
  vectors, after the RESTRICTED gate.
* **call keywords.**  The retriever takes ``k``, ``filter``, ``fetch_k``, ``lambda_mult``, ``score_threshold`` per
  call; anything else — ``search_type`` included — is a ``TypeError`` naming it.  One its search type does not use
  (:data:`SEARCH_TYPE_KWARGS`: ``lambda_mult`` outside ``mmr``, ``fetch_k`` outside ``mmr`` / ``hybrid``,
  ``score_threshold`` on ``mmr``), in ``search_kwargs`` or a call, is a ``ValueError`` naming it
  (:func:`check_search_type_kwargs`; LangChain's stores silently ignore it), and so is one given to the store's
  search method of that type.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.runnables import RunnableConfig
from langchain_core.vectorstores import VectorStore, VectorStoreRetriever
from langchain_core.vectorstores.utils import maximal_marginal_relevance

from langchain_ragspine.arguments import DEFAULT_FETCH_K, DEFAULT_K, check_arguments, check_k
from langchain_ragspine.backends.directory.chunk_store import nan_field
from langchain_ragspine.backends.directory.lock import StoreBusyError
from langchain_ragspine.documents import BM25_SCALE, check_score_threshold, chunk_key
from langchain_ragspine.errors import StoreError, StoreWriteError
from langchain_ragspine.filters import and_filters, compiled_filter
from langchain_ragspine.retrievers.base import check_query
from langchain_ragspine.sensitivity import drop_restricted, is_blank_label, is_restricted, is_sensitivity_key
from langchain_ragspine.served import ServedIds

__all__ = [
    "RETRIEVER_FIELDS",
    "MarginalRelevanceStore",
    "SEARCH_KWARGS",
    "SEARCH_TYPE_KWARGS",
    "ScopedVectorStoreRetriever",
    "TextsAsDocumentsStore",
    "all_or_nothing",
    "as_chunks",
    "as_ids",
    "as_list",
    "check_records",
    "check_lambda_mult",
    "check_search_kwarg_values",
    "check_search_type_kwargs",
    "search_kwargs_for_call",
    "texts_as_documents",
]


def as_list(value: Any, name: str, method: str) -> list[Any]:
    """``value`` as a list, refusing what would be iterated by mistake: a single ``str`` / ``bytes`` (its
    characters would become texts or ids: ``delete("abc")`` deleted ``a``, ``b`` and ``c``), ``None`` and a
    non-iterable.  ``name`` is the argument and ``method`` the store method, both named in the message.

    Raises:
        TypeError: ``value`` is a ``str``, ``bytes``, ``None``, a mapping or not iterable (one line: pass a list).
    """
    if isinstance(value, (str, bytes, bytearray)):
        hint = "a list of Documents (for plain strings use add_texts)" if name == "documents" else f"[{value!r:.40}]"
        raise TypeError(
            f"{method}: {name} must be a list, got a single {type(value).__name__} {value!r:.60}; pass a list, "
            f"e.g. {hint}"
        )
    if value is None or isinstance(value, Mapping) or not isinstance(value, Iterable):
        raise TypeError(f"{method}: {name} must be a list, got {type(value).__name__} {value!r:.60}; pass a list")
    return list(value)


def as_ids(value: Any, method: str, *, missing: bool = False) -> list[Any]:
    """``value`` as a list of record ids: :func:`as_list`, then every item a non-empty ``str`` (a LangChain
    ``Document.id``) — never converted: ``add_texts(ids=[1])`` stored ``'1'`` silently, and ``get_by_ids([1, "1"])``
    returned that record twice.  ``missing``: a write's ids, where ``None`` / ``""`` means "choose one" (LangChain's
    ``from_documents`` passes ``[doc.id for doc in documents]``, ``None`` for a document without one).

    Raises:
        TypeError: as :func:`as_list`; an item that is not a ``str`` (its index named).
        ValueError: an empty id (unless ``missing``).
    """
    ids = as_list(value, "ids", method)
    for i, rid in enumerate(ids):
        if missing and not rid and (rid is None or isinstance(rid, str)):
            continue
        if not isinstance(rid, str):
            raise TypeError(f"{method}: ids[{i}] must be a str, got {type(rid).__name__} {rid!r:.60}")
        if not rid:
            raise ValueError(f"{method}: ids[{i}] is empty; an id is a non-empty str")
    return ids


def check_records(ids: Sequence[str], documents: Sequence[Document], method: str) -> None:
    """Refuse a write call that could not be stored as given, before anything is written: an id given twice in
    the call (which of the two should win is a guess) or a NaN metadata value (anywhere in it: NaN never equals
    itself, so no filter could ever match it, and it is not JSON — the corpus loader refuses it too).  Infinities
    are kept: they compare as numbers (``inf`` is greater than every finite number) in both stores' filters.
    ``method`` names the call in the message.

    Raises:
        ValueError: naming the id, the metadata field (a dotted path for nested values) and the positions in the
            call.
    """
    first: dict[str, int] = {}
    for i, (rid, doc) in enumerate(zip(ids, documents, strict=True)):
        if rid in first:
            raise ValueError(
                f"{method}: id {rid!r} is given twice in one call (at index {first[rid]} and {i}); a call writes "
                "each id once — pass each record once"
            )
        first[rid] = i
        for key in ("doc_id", "chunk_id"):  # lineage a filter sees: as stored, so a str (an id) or absent
            value = doc.metadata.get(key)
            if key in doc.metadata and not (isinstance(value, str) and value):
                raise ValueError(
                    f"{method}: the record at index {i} (id {rid!r}) has metadata {key!r} = {value!r}; {key} is an "
                    "id, a non-empty str (a filter on it compares strings): write it as one, or leave it out"
                )
        for key, value in doc.metadata.items():
            if is_sensitivity_key(key) and (is_blank_label(value) or value == []):
                raise ValueError(
                    f"{method}: the record at index {i} (id {rid!r}) has metadata {key!r} = {value!r}, which is no "
                    "sensitivity label; an empty label is never read as the default (as the corpus loader refuses "
                    "it): write a label such as 'INTERNAL', or remove the key"
                )
        found = nan_field(doc.metadata)
        if found is not None:
            raise ValueError(
                f"{method}: the record at index {i} (id {rid!r}) has metadata {found[0]!r} = {found[1]!r}, which "
                "cannot be stored: NaN never equals itself, so no filter could match it (and it is not JSON); store "
                "None instead"
            )


@contextlib.contextmanager
def all_or_nothing(method: str, where: object = None) -> Iterator[None]:
    """Around one write call of a store whose calls are atomic: re-raise its failure (a :class:`StoreError` —
    SQLite's or PostgreSQL's disk full among them — or an ``OSError``) as a :class:`StoreError` that says nothing
    of the call was written.  A :class:`~langchain_ragspine.backends.directory.lock.StoreBusyError` (nothing written either:
    the call never started) passes unchanged.

    Raises:
        StoreError: ``"<method> wrote nothing, the store is as it was before the call: <cause>"``, naming
            ``where`` (the store's path or URL) when given; a
            :class:`~langchain_ragspine.errors.StoreWriteError` when the failure was one (a full disk, a read-only
            store), with its ``errno``.
    """
    try:
        yield
    except StoreBusyError:
        raise
    except (StoreError, OSError) as e:
        path = None if where is None else str(where)
        if isinstance(e, StoreError):  # naming the file it is about, when that is not the store itself
            cause = e.reason if e.path is None or e.path == path else f"{e.path}: {e.reason}"
        else:
            cause = f"{type(e).__name__}: {e}"
        message = f"{method} wrote nothing, the store is as it was before the call: {cause}"
        if isinstance(e, StoreWriteError):  # keep the kind (and errno): a full disk, a read-only store
            raise StoreWriteError(message, path=path, code=e.errno, why=e.why, detail=e.detail) from e
        raise StoreError(message, path=path) from e


def as_chunks(documents: Sequence[Document], ids: Sequence[str] | None = None) -> list[Document]:
    """Copies of ``documents`` as store chunks: ``metadata["chunk_id"]`` and ``Document.id`` set to the id and
    ``metadata["doc_id"]`` to the document (rules in the module docstring).

    Raises:
        ValueError: ``ids`` of another length than ``documents``; an empty id; an id given twice or a NaN
            metadata value (:func:`check_records`); a ``doc_id`` that is not a non-empty string.
        TypeError: an element that is not a ``Document``.
    """
    if ids is not None and len(ids) != len(documents):
        raise ValueError(f"got {len(ids)} ids for {len(documents)} documents")
    out: list[Document] = []
    chunk_ids: list[str] = []
    for i, doc in enumerate(documents):
        if not isinstance(doc, Document):
            raise TypeError(f"documents[{i}] must be a langchain_core Document, got {type(doc).__name__}")
        raw = ids[i] if ids is not None else doc.metadata.get("chunk_id") or doc.id or uuid.uuid4().hex
        chunk_id = str(raw)
        if not chunk_id:
            raise ValueError(f"documents[{i}] has an empty id")
        chunk_ids.append(chunk_id)
    check_records(chunk_ids, documents, "add_documents")
    for i, (doc, chunk_id) in enumerate(zip(documents, chunk_ids, strict=True)):
        doc_id = doc.metadata.get("doc_id", chunk_id)
        if not isinstance(doc_id, str) or not doc_id:
            raise ValueError(f"documents[{i}] has metadata doc_id {doc_id!r}: a non-empty string is required")
        metadata = {**doc.metadata, "doc_id": doc_id, "chunk_id": chunk_id}
        out.append(Document(id=chunk_id, page_content=doc.page_content, metadata=metadata))
    return out


def texts_as_documents(
    texts: Iterable[str], metadatas: Sequence[Mapping[str, Any]] | None, ids: Sequence[str] | None
) -> list[Document]:
    """``Document(texts[i], metadata=copy of metadatas[i])`` per text: what a vector store's ``add_texts`` adds
    (the ids are passed on separately).  ``metadatas`` / ``ids`` that are ``None`` or empty mean none, as in
    LangChain.  ``ids`` is only checked for its length here: it is the list ``add_texts`` already made of its
    argument with :func:`as_list`, which refuses a single ``str`` / ``bytes``.

    Raises:
        TypeError: ``texts`` or ``metadatas`` a single ``str`` / ``bytes`` or not a list (:func:`as_list`); a
            text that is not a ``str`` or a metadata that is not a dict (its index named).
        ValueError: ``metadatas`` or ``ids`` of another length than ``texts`` (LangChain's default ``add_texts``
            zips them, silently dropping the texts beyond the ids).
    """
    texts = as_list(texts, "texts", "add_texts")
    metadatas = None if metadatas is None else as_list(metadatas, "metadatas", "add_texts")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"add_texts: texts[{i}] must be a str, got {type(text).__name__} {text!r:.60}")
    if metadatas and len(metadatas) != len(texts):
        raise ValueError(f"add_texts got {len(texts)} texts and {len(metadatas)} metadatas")
    for i, meta in enumerate(metadatas or ()):
        if not isinstance(meta, Mapping):
            raise TypeError(f"add_texts: metadatas[{i}] must be a dict, got {type(meta).__name__} {meta!r:.60}")
    if ids and len(ids) != len(texts):
        raise ValueError(f"add_texts got {len(texts)} texts and {len(ids)} ids")
    return [Document(page_content=t, metadata=dict(metadatas[i]) if metadatas else {}) for i, t in enumerate(texts)]


def _check_relevance_threshold(kwargs: Mapping[str, Any]) -> None:
    """``kwargs["score_threshold"]``, when given, as a threshold on LangChain's relevance score (in [0, 1])."""
    check_score_threshold(kwargs.get("score_threshold"), maximum=1.0, scale="LangChain's relevance score, in [0, 1]")


class TextsAsDocumentsStore(VectorStore):
    """A ``VectorStore`` whose ``add_texts`` is ``add_documents`` of checked ``Document(text, metadata)`` pairs, so
    both stores of the package check texts, ``metadatas`` and ``ids`` the same way."""

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """:meth:`add_documents` of ``Document(texts[i], metadata=metadatas[i])`` (LangChain's signature); returns
        the ids.

        Raises:
            TypeError, ValueError: see :func:`texts_as_documents` (a text that is not a ``str``; ``metadatas`` or
                ``ids`` of another length than ``texts``) and ``add_documents``.
        """
        id_list = None if ids is None else as_list(ids, "ids", "add_texts")  # the one conversion of ids
        return self.add_documents(texts_as_documents(texts, metadatas, id_list), ids=id_list or None, **kwargs)


class MarginalRelevanceStore(TextsAsDocumentsStore):
    """LangChain's Maximal Marginal Relevance search (Carbonell & Goldstein, "The Use of MMR, Diversity-Based
    Reranking for Reordering Documents and Producing Summaries", SIGIR 1998), once for both stores of the package:
    ``max_marginal_relevance_search(query, k=6, fetch_k=20, lambda_mult=0.5, filter=None)`` (:data:`~langchain_ragspine.arguments.DEFAULT_K`, :data:`~langchain_ragspine.arguments.DEFAULT_FETCH_K`) (and ``_by_vector``,
    the async twin) picks ``k`` of the ``max(k, fetch_k)`` chunks most similar to the query that match ``filter``
    with ``langchain_core``'s ``maximal_marginal_relevance`` over their stored vectors — ``lambda_mult`` 1 =
    relevance only, 0 = diversity only.  The candidates pass the RESTRICTED gate before the pick (a RESTRICTED chunk
    takes no place of ``k``) and the picked ones again.  An empty query returns ``[]``.

    A subclass gives the candidates (:meth:`_mmr_candidates`) and may widen the keywords it takes
    (:meth:`_check_search_arguments`); one that gives none has no MMR (:meth:`_has_mmr`).

    Raises:
        TypeError, ValueError: a query that is not a string; bad ``k`` / ``fetch_k`` (an ``int >= 1``) /
            ``lambda_mult`` (a number in ``[0, 1]``) / ``filter``; an unknown keyword argument.
        NotImplementedError: a store without MMR candidates.
    """

    #: Whether :meth:`get_by_ids` returns exactly the chunks search may return now (current, not RESTRICTED; both
    #: stores of the package read the store as it is now): what their retrievers answer the served-ids check with
    #: (:meth:`ScopedVectorStoreRetriever.served_ids`).
    get_by_ids_is_current: ClassVar[bool] = True

    def _mmr_candidates(
        self, vector: np.ndarray, n: int, filter: Mapping[str, Any] | None
    ) -> list[tuple[Document, np.ndarray]]:
        """The ``n`` chunks most similar to ``vector`` that match ``filter`` (already checked), best first, each
        with its stored vector."""
        raise NotImplementedError(f"{type(self).__name__} has no maximal marginal relevance search")

    def _has_mmr(self) -> bool:
        """Whether this store gives MMR candidates."""
        return type(self)._mmr_candidates is not MarginalRelevanceStore._mmr_candidates

    def _check_search_arguments(self, name: str, kwargs: Mapping[str, Any], filter: Any) -> Mapping[str, Any] | None:
        """The checked ``filter`` of a search ``name`` called with further keywords ``kwargs`` (default: none
        taken).

        Raises:
            TypeError, ValueError: an unknown keyword; a malformed filter.
        """
        if kwargs:
            raise TypeError(f"unexpected keyword arguments for {name}: {sorted(kwargs)}")
        return compiled_filter(filter)  # validated and compiled once: the search hands it on

    # LangChain's VectorStore says k=4 in these; the package's stores return DEFAULT_K on every route
    def similarity_search_with_relevance_scores(
        self, query: str, k: int = DEFAULT_K, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """LangChain's ``similarity_search_with_relevance_scores`` with the package's default ``k``
        (:data:`~langchain_ragspine.arguments.DEFAULT_K`, 6) and a checked ``score_threshold``.

        Raises:
            TypeError, ValueError: a ``score_threshold`` that is not a number in [0, 1] (LangChain compares it with
                the scores as it is: ``"0.5"`` failed inside ``langchain_core``, ``-5`` kept everything).
        """
        _check_relevance_threshold(kwargs)
        return super().similarity_search_with_relevance_scores(query, k, **kwargs)

    async def asimilarity_search_with_relevance_scores(
        self, query: str, k: int = DEFAULT_K, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """Async :meth:`similarity_search_with_relevance_scores`."""
        _check_relevance_threshold(kwargs)
        return await super().asimilarity_search_with_relevance_scores(query, k, **kwargs)

    async def asimilarity_search_by_vector(
        self, embedding: list[float], k: int = DEFAULT_K, **kwargs: Any
    ) -> list[Document]:
        """LangChain's ``asimilarity_search_by_vector`` with the package's default ``k``."""
        return await super().asimilarity_search_by_vector(embedding, k, **kwargs)

    async def amax_marginal_relevance_search_by_vector(
        self,
        embedding: list[float],
        k: int = DEFAULT_K,
        fetch_k: int = DEFAULT_FETCH_K,
        lambda_mult: float = 0.5,
        **kwargs: Any,
    ) -> list[Document]:
        """Async :meth:`max_marginal_relevance_search_by_vector` (in a worker thread)."""
        return await asyncio.to_thread(
            self.max_marginal_relevance_search_by_vector, embedding, k, fetch_k, lambda_mult, **kwargs
        )

    def max_marginal_relevance_search(
        self,
        query: str,
        k: int = DEFAULT_K,
        fetch_k: int = DEFAULT_FETCH_K,
        lambda_mult: float = 0.5,
        filter: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """``k`` chunks picked by MMR from the ``fetch_k`` most similar to ``query`` (see the class docstring)."""
        query = check_query(type(self).__name__, query, "max_marginal_relevance_search")
        vector = self.embeddings.embed_query(query) if query.strip() else None  # type: ignore[union-attr]
        return self._mmr(vector, k, fetch_k, lambda_mult, filter, kwargs, "max_marginal_relevance_search")

    def max_marginal_relevance_search_by_vector(
        self,
        embedding: list[float],
        k: int = DEFAULT_K,
        fetch_k: int = DEFAULT_FETCH_K,
        lambda_mult: float = 0.5,
        filter: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """:meth:`max_marginal_relevance_search` for a query vector (shape ``(d,)``)."""
        return self._mmr(embedding, k, fetch_k, lambda_mult, filter, kwargs, "max_marginal_relevance_search_by_vector")

    async def amax_marginal_relevance_search(
        self,
        query: str,
        k: int = DEFAULT_K,
        fetch_k: int = DEFAULT_FETCH_K,
        lambda_mult: float = 0.5,
        filter: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """:meth:`max_marginal_relevance_search`, the query embedded with ``aembed_query`` and the search run in a
        worker thread."""
        query = check_query(type(self).__name__, query, "max_marginal_relevance_search")
        vector = await self.embeddings.aembed_query(query) if query.strip() else None  # type: ignore[union-attr]
        return await asyncio.to_thread(
            self._mmr, vector, k, fetch_k, lambda_mult, filter, kwargs, "max_marginal_relevance_search"
        )

    def _mmr(
        self,
        vector: Sequence[float] | None,
        k: int,
        fetch_k: int,
        lambda_mult: float,
        filter: Any,
        kwargs: Mapping[str, Any],
        name: str,
    ) -> list[Document]:
        flt = self._check_search_arguments(name, kwargs, filter)
        k, fetch_k = check_k(k), check_k(fetch_k, "fetch_k")
        check_lambda_mult(lambda_mult)
        if not self._has_mmr():
            raise NotImplementedError(f"{type(self).__name__} has no maximal marginal relevance search")
        if vector is None:  # an empty query
            return []
        q = np.asarray(vector, dtype=np.float32)
        candidates = [(d, v) for d, v in self._mmr_candidates(q, max(k, fetch_k), flt) if not is_restricted(d)]
        if not candidates:
            return []
        picked = maximal_marginal_relevance(
            q, [np.asarray(v, dtype=np.float32).tolist() for _, v in candidates], lambda_mult=float(lambda_mult), k=k
        )
        return drop_restricted(candidates[j][0] for j in picked)


def search_kwargs_for_call(
    vectorstore: VectorStore, search_kwargs: Mapping[str, Any], kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    """The keywords of one search of a ``VectorStoreRetriever`` over ``vectorstore``: its ``search_kwargs`` with the
    call's ``kwargs`` over them (a call's ``k``, ``fetch_k``, … replace the retriever's, as in LangChain), except
    ``filter``: a call never widens the retriever's own filter.

    Over one of the package's stores (whose filters are :mod:`langchain_ragspine.filters` dicts) a call's filter is
    ANDed with the retriever's (:func:`~langchain_ragspine.filters.and_filters`: ``{"$and": [own, call]}``), and
    ``filter=None`` (or ``{}``) keeps the retriever's.  Over a store of another filter dialect two filters cannot be
    ANDed here: ``filter=None`` keeps the retriever's, and a different filter when the retriever has one is refused.

    Example:
        >>> import tempfile
        >>> from langchain_ragspine.embeddings import HashingEmbeddings
        >>> from langchain_ragspine.vectorstores import RagSpineVectorStore
        >>> store = RagSpineVectorStore(tempfile.mkdtemp(), HashingEmbeddings(64))
        >>> search_kwargs_for_call(store, {"k": 4, "filter": {"dept": "hr"}}, {"k": 2, "filter": {"year": 2024}})
        {'k': 2, 'filter': {'$and': [{'dept': 'hr'}, {'year': 2024}]}}
        >>> search_kwargs_for_call(store, {"filter": {"dept": "hr"}}, {"filter": None})
        {'filter': {'dept': 'hr'}}
        >>> store.close()

    Raises:
        TypeError: over a package store, a filter that is not a dict while the other is set.
        ValueError: over another store, a call's filter other than the retriever's own filter.
    """
    merged = {**search_kwargs, **kwargs}
    if "filter" not in kwargs:
        return merged
    own, call = search_kwargs.get("filter"), kwargs["filter"]
    if own is None or call is None or own is call:
        merged["filter"] = own if call is None else call  # one filter: the store checks it
    elif isinstance(vectorstore, TextsAsDocumentsStore):
        merged["filter"] = and_filters(own, call)
    elif own != call:
        raise ValueError(
            f"a call's filter cannot AND with this retriever's own over {type(vectorstore).__name__} (its filters are "
            "not langchain_ragspine.filters dicts), and replacing it would widen the search: put the combined filter "
            "in the retriever's search_kwargs, or call without filter="
        )
    return merged


#: The ``search_kwargs`` keys a store retriever takes, and the keywords of a call (a call's value replaces the
#: retriever's for that call, except ``filter``: ANDed).
SEARCH_KWARGS = ("k", "filter", "fetch_k", "lambda_mult", "score_threshold")
#: The keywords of :data:`SEARCH_KWARGS` besides ``k`` and ``filter`` each search type uses (of the package's five);
#: another one is refused by :func:`check_search_type_kwargs` — LangChain's stores silently ignore it.
SEARCH_TYPE_KWARGS: Mapping[str, tuple[str, ...]] = MappingProxyType({
    "similarity": ("score_threshold",),
    "similarity_score_threshold": ("score_threshold",),
    "mmr": ("fetch_k", "lambda_mult"),
    "hybrid": ("fetch_k", "score_threshold"),
    "bm25": ("score_threshold",),
})
#: What each of those keywords means, for the refusal.
_MEANING = {
    "fetch_k": "the candidates a search picks or fuses from",
    "lambda_mult": "maximal marginal relevance's weight of relevance against diversity",
    "score_threshold": "a cut on a relevance score",
}


def check_search_type_kwargs(
    search_type: str, kwargs: Mapping[str, Any], search_types: Iterable[str] = tuple(SEARCH_TYPE_KWARGS)
) -> None:
    """Refuse a search keyword that ``search_type`` does not use (:data:`SEARCH_TYPE_KWARGS`), naming it and the
    search types (of ``search_types``) that do; a value of ``None`` is no keyword.  A search type outside the
    table is not checked.

    Example:
        >>> check_search_type_kwargs("mmr", {"k": 4, "fetch_k": 20, "lambda_mult": 0.3})
        >>> check_search_type_kwargs("hybrid", {"lambda_mult": 0.3})
        Traceback (most recent call last):
        ...
        ValueError: lambda_mult=0.3 has no meaning for search_type='hybrid' (it is maximal marginal relevance's weight of relevance against diversity, and would be silently ignored): use search_type 'mmr' with lambda_mult, or 'hybrid' without it

    Raises:
        ValueError: as above.
    """
    used = SEARCH_TYPE_KWARGS.get(search_type)
    if used is None:
        return
    for name, meaning in _MEANING.items():
        value = kwargs.get(name)
        if value is None or name in used:
            continue
        users = [t for t in search_types if name in SEARCH_TYPE_KWARGS.get(t, ())]
        raise ValueError(
            f"{name}={value!r} has no meaning for search_type={search_type!r} (it is {meaning}, and would be silently "
            f"ignored): use search_type {' or '.join(repr(t) for t in users)} with {name}, or {search_type!r} "
            "without it"
        )


def check_lambda_mult(value: Any) -> float:
    """MMR's ``lambda_mult``: a number in ``[0, 1]`` (1: relevance only, 0: diversity only).

    Raises:
        ValueError: anything else (a ``bool``, a string, a number outside the range), naming it.
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        raise ValueError(f"lambda_mult must be a number in [0, 1], got {value!r}")
    return float(value)


def check_search_kwarg_values(kwargs: Mapping[str, Any], search_type: str | None = None) -> None:
    """The values of the search keywords in ``kwargs`` (``None``: not given) checked as the store's search methods
    check them — ``k`` and ``fetch_k`` ints >= 1, ``lambda_mult`` in [0, 1], ``score_threshold`` a finite number
    >= 0 (its upper bound depends on the search type's scale, which the store checks when it searches) — so
    ``as_retriever(search_kwargs={"k": "3"})`` fails when it is built, not at its first ``invoke``.

    Raises:
        TypeError, ValueError: naming the keyword and the value (as :func:`~langchain_ragspine.arguments.check_k`,
            :func:`check_lambda_mult`, :func:`~langchain_ragspine.documents.check_score_threshold`).
    """
    for name in ("k", "fetch_k"):
        if kwargs.get(name) is not None:
            check_k(kwargs[name], name)
    if kwargs.get("lambda_mult") is not None:
        check_lambda_mult(kwargs["lambda_mult"])
    check_score_threshold(kwargs.get("score_threshold"), scale=BM25_SCALE if search_type == "bm25" else "")


#: A store retriever's constructor arguments.
RETRIEVER_FIELDS = ("vectorstore", "search_type", "search_kwargs", "tags", "metadata", "name")


class ScopedVectorStoreRetriever(VectorStoreRetriever):
    """LangChain's ``VectorStoreRetriever`` whose own filter scopes every call: ``invoke(q, filter=G)`` on
    ``store.as_retriever(search_kwargs={"filter": F})`` searches ``F AND G``, and ``filter=None`` keeps ``F``
    (:func:`search_kwargs_for_call`; LangChain's merges ``search_kwargs | kwargs``, so the call's filter replaced the
    retriever's).  Every other call keyword (``k``, ``fetch_k``, ``lambda_mult``, ``score_threshold``) replaces the
    retriever's for that call.

    Strict arguments: an unknown constructor argument (:data:`RETRIEVER_FIELDS`), ``search_kwargs`` key or call
    keyword (:data:`SEARCH_KWARGS`, plus a subclass's :attr:`call_options`) is a ``TypeError`` with a did-you-mean,
    and so is ``invoke(query, search_type=…)`` / ``search_kwargs=…``: the search type is the retriever's, set by
    ``as_retriever`` (LangChain's retriever would hand the keyword on to the store's search method, which fails or
    ignores it).  A ``search_kwargs`` key or call keyword the search type does not use (``lambda_mult`` outside
    ``"mmr"``, …: :data:`SEARCH_TYPE_KWARGS`) is a ``ValueError`` naming it, when the retriever is built or called.

    What :meth:`VersionedVectorStore.as_retriever` returns (search types ``"similarity"``,
    ``"similarity_score_threshold"``, ``"mmr"`` where the store has MMR); the directory store's
    :class:`~langchain_ragspine.vectorstores.RagSpineStoreRetriever` is one too.

    Example:
        >>> import tempfile
        >>> from langchain_ragspine.embeddings import HashingEmbeddings
        >>> from langchain_ragspine.vectorstores import RagSpineVectorStore
        >>> store = RagSpineVectorStore(tempfile.mkdtemp(), HashingEmbeddings(64))
        >>> store.add_texts(["falcon hr", "falcon sales"], [{"dept": "hr"}, {"dept": "sales"}], ids=["hr", "sales"])
        ['hr', 'sales']
        >>> hr = store.as_retriever(search_type="similarity", search_kwargs={"filter": {"dept": "hr"}})
        >>> [d.id for d in hr.invoke("falcon", filter={"dept": "sales"})], [d.id for d in hr.invoke("falcon", filter=None)]
        ([], ['hr'])
        >>> store.close()
    """

    #: Call options a subclass takes besides :data:`SEARCH_KWARGS` (``RagSpineStoreRetriever``: ``embed_as``).
    call_options: ClassVar[tuple[str, ...]] = ()

    def __init__(self, **data: Any) -> None:
        check_arguments(type(self).__name__, data, RETRIEVER_FIELDS)
        check_arguments(f"{type(self).__name__} search_kwargs", data.get("search_kwargs") or {}, SEARCH_KWARGS,
                        what="key")
        super().__init__(**data)
        check_search_type_kwargs(self.search_type, self.search_kwargs, self.allowed_search_types)
        check_search_kwarg_values(self.search_kwargs, self.search_type)
        compiled_filter(self.search_kwargs.get("filter"))  # a malformed filter fails here, not at the first invoke

    def check_call(self, kwargs: Mapping[str, Any]) -> None:
        """Refuse a call keyword this retriever does not take: ``search_type`` / ``search_kwargs`` (fixed when the
        retriever is built — LangChain's ``VectorStoreRetriever`` does not switch on them per call either, it
        hands them to the store's search method), any name outside :data:`SEARCH_KWARGS` and
        :attr:`call_options`, and one its search type does not use (:func:`check_search_type_kwargs`).

        Raises:
            TypeError: naming the keyword (with a did-you-mean for an unknown one).
            ValueError: a keyword the search type does not use.
        """
        owner = f"{type(self).__name__}.invoke"
        known = (*SEARCH_KWARGS, *self.call_options)
        for name in ("search_type", "search_kwargs"):
            if name in kwargs:
                raise TypeError(
                    f"{owner} got {name}={kwargs[name]!r}, but a retriever's {name} is set when it is built "
                    f"(vectorstore.as_retriever({name}=...)), not per call; this one's search_type is "
                    f"{self.search_type!r} — build another retriever for another, or pass only "
                    f"{', '.join(repr(n) for n in known)} to invoke"
                )
        check_arguments(owner, kwargs, known, what="keyword argument")
        check_search_type_kwargs(self.search_type, kwargs, self.allowed_search_types)

    def invoke(self, input: str, config: RunnableConfig | None = None, **kwargs: Any) -> list[Document]:
        """LangChain's ``invoke``, its keywords checked first (:meth:`check_call`)."""
        self.check_call(kwargs)
        return super().invoke(input, config, **kwargs)

    async def ainvoke(self, input: str, config: RunnableConfig | None = None, **kwargs: Any) -> list[Document]:
        """LangChain's ``ainvoke``, its keywords checked first (:meth:`check_call`)."""
        self.check_call(kwargs)
        return await super().ainvoke(input, config, **kwargs)

    def served_ids(self, ids: Sequence[str]) -> ServedIds | None:
        """Which of ``ids`` this retriever would still return (:mod:`~langchain_ragspine.served`): over a store of
        the package (``get_by_ids_is_current``: :class:`VersionedVectorStore`, ``RagSpineVectorStore``), the ids its
        ``get_by_ids`` returns — current and not RESTRICTED; a vector store keeps no answer for withdrawn ids, so
        those count as unknown.  ``None`` (cannot tell) over any other vector store.

        Raises:
            StoreError: the store is unreadable.
        """
        if not getattr(type(self.vectorstore), "get_by_ids_is_current", False):
            return None
        wanted = list(ids)
        found = self.vectorstore.get_by_ids(wanted) if wanted else []
        return ServedIds.of(wanted, {k for d in found for k in (d.id, chunk_key(d)) if k is not None})

    def call_search_kwargs(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """The keywords of a search for a call with ``kwargs`` (:func:`search_kwargs_for_call`)."""
        return search_kwargs_for_call(self.vectorstore, self.search_kwargs, kwargs)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        return super()._get_relevant_documents(query, run_manager=run_manager, **self.call_search_kwargs(kwargs))

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        return await super()._aget_relevant_documents(
            query, run_manager=run_manager, **self.call_search_kwargs(kwargs)
        )


def __getattr__(name: str) -> Any:
    """``VersionedVectorStore``, the old base class of the PostgreSQL store (in this module's ``__all__`` before issue
    26 B5): the deprecated alias of :class:`~langchain_ragspine.vectorstores.RagSpineVectorStore`, with the same
    warning as ``langchain_ragspine.vectorstores.VersionedVectorStore``."""
    if name == "VersionedVectorStore":
        import sys
        import warnings

        from langchain_ragspine._stacklevel import user_stacklevel

        warnings.warn(
            "langchain_ragspine.vectorstores.base.VersionedVectorStore is deprecated (issue 26, B5): there is one "
            "vector store, RagSpineVectorStore(backend, embedding) (from langchain_ragspine.vectorstores import "
            "RagSpineVectorStore), over any StoreBackend (langchain_ragspine.backends.base)",
            DeprecationWarning,
            stacklevel=user_stacklevel(),
        )
        # the package is imported before any of its modules, and by the time a user asks, it holds the class
        return sys.modules["langchain_ragspine.vectorstores"].RagSpineVectorStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
