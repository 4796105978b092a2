"""What every RagSpine store shows LangChain as a ``VectorStore``, whatever holds the chunks.

LangChain's :class:`~langchain_core.vectorstores.VectorStore` is id-keyed ("add or update these documents, search
them, get or delete them by id"); a RagSpine store is versioned by document (every write makes a new version of a
``doc_id``; old versions stay as history).  :class:`VersionedVectorStore` maps one onto the other, once for every
backend:

* **ids.**  A ``Document``'s id is its ``chunk_id``: ``ids[i]`` when given, else ``metadata["chunk_id"]``, else
  ``Document.id``, else a new ``uuid4().hex``.  Its document is ``metadata["doc_id"]``, else the id itself (a
  one-chunk document).  :meth:`~VersionedVectorStore.add_documents` returns the ids in order.
* **add or update.**  The chunks given for a ``doc_id`` become part of that document's next version: a chunk whose
  id the document already has replaces it in place, a new one is appended; the document's other chunks stay.  One
  version per document per call.
* **delete.**  The document's next version leaves those chunks out; a document left with none is retracted (its
  history stays, search no longer sees it).
* **the RESTRICTED gate.**  Search reads only the searchable tables, where RESTRICTED chunks are never written;
  :meth:`~VersionedVectorStore.get_by_ids` and every search result pass the gate as well
  (:func:`~langchain_ragspine.sensitivity.drop_restricted`, and ``drop_restricted_pairs`` for scored results), so
  no exit of the store returns one.
* **scores.**  ``similarity_search_with_score`` gives the cosine similarity in ``[-1, 1]`` (the dense channel's
  ``scores["vector"]``); relevance scores are ``(1 + cosine) / 2`` in ``[0, 1]``.
* **filters** are the package's own predicate language (:mod:`langchain_ragspine.filters`), applied before
  scoring: ``similarity_search(query, k, filter={"lang": "ja"})``.  The retriever of
  :meth:`~VersionedVectorStore.as_retriever` (:class:`ScopedVectorStoreRetriever`) ANDs a call's filter with its
  own: ``as_retriever(search_kwargs={"filter": F}).invoke(q, filter=G)`` searches ``F AND G``, and ``filter=None``
  keeps ``F`` (LangChain's ``VectorStoreRetriever`` lets the call's replace it).

A backend implements :meth:`~VersionedVectorStore._active_chunks`, :meth:`~VersionedVectorStore._write_versions`,
:meth:`~VersionedVectorStore._search_by_vector` and :meth:`~VersionedVectorStore._read_by_ids`.
"""

from __future__ import annotations

import contextlib
import uuid
from abc import abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore, VectorStoreRetriever

from langchain_ragspine.documents import check_k
from langchain_ragspine.errors import StoreError
from langchain_ragspine.filters import and_filters, check_filter_size
from langchain_ragspine.retrievers.base import check_query
from langchain_ragspine.sensitivity import drop_restricted, drop_restricted_pairs
from langchain_ragspine.stores.chunk_store import nan_field
from langchain_ragspine.stores.lock import StoreBusyError

__all__ = [
    "ScopedVectorStoreRetriever",
    "TextsAsDocumentsStore",
    "VersionedVectorStore",
    "all_or_nothing",
    "as_chunks",
    "as_list",
    "check_records",
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
    of the call was written.  A :class:`~langchain_ragspine.stores.lock.StoreBusyError` (nothing written either:
    the call never started) passes unchanged.

    Raises:
        StoreError: ``"<method> wrote nothing, the store is as it was before the call: <cause>"``, naming
            ``where`` (the store's path or URL) when given.
    """
    try:
        yield
    except StoreBusyError:
        raise
    except (StoreError, OSError) as e:
        cause = e.reason if isinstance(e, StoreError) else f"{type(e).__name__}: {e}"
        raise StoreError(
            f"{method} wrote nothing, the store is as it was before the call: {cause}",
            path=None if where is None else str(where),
        ) from e


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


def _merge(current: Sequence[Document], new: Iterable[Document]) -> list[Document]:
    """``current`` with the chunks of ``new`` replacing those of the same id in place, the others appended."""
    merged = {str(d.metadata["chunk_id"]): d for d in current}
    for d in new:
        merged[str(d.metadata["chunk_id"])] = d
    return list(merged.values())


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


class ScopedVectorStoreRetriever(VectorStoreRetriever):
    """LangChain's ``VectorStoreRetriever`` whose own filter scopes every call: ``invoke(q, filter=G)`` on
    ``store.as_retriever(search_kwargs={"filter": F})`` searches ``F AND G``, and ``filter=None`` keeps ``F``
    (:func:`search_kwargs_for_call`; LangChain's merges ``search_kwargs | kwargs``, so the call's filter replaced the
    retriever's).  Every other call keyword (``k``, ``fetch_k``, …) replaces the retriever's for that call.

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


class VersionedVectorStore(TextsAsDocumentsStore):
    """A RagSpine store as a LangChain ``VectorStore`` (see the module docstring for the id, version, RESTRICTED
    and score rules); subclasses say where the chunks live.

    Args:
        embedding: the model of the store's vectors (``embed_documents`` for chunks, ``embed_query`` for queries).
    """

    def __init__(self, embedding: Embeddings) -> None:
        if not isinstance(embedding, Embeddings):
            raise TypeError(f"embedding must be a langchain_core Embeddings, got {type(embedding).__name__}")
        self._embedding = embedding

    @property
    def embeddings(self) -> Embeddings:
        """The embedding model."""
        return self._embedding

    # -- what a backend provides ------------------------------------------------------------------------------------
    @abstractmethod
    def _active_chunks(self, doc_ids: Sequence[str]) -> dict[str, list[Document]]:
        """The current chunks (RESTRICTED included) of each of ``doc_ids`` that has a current version, in order."""

    @abstractmethod
    def _write_versions(self, versions: Mapping[str, list[Document]]) -> None:
        """Make each ``chunks`` the next version of its ``doc_id`` (``[]``: retract it), embedding what needs it;
        all of them or none (one transaction)."""

    def _where(self) -> str | None:
        """Where the store is, for messages (a path, or a URL without its password); ``None``: unknown."""
        return None

    def _writing(self) -> contextlib.AbstractContextManager[object]:
        """The store's writer lock, held around a whole write call — the read of the documents' current chunks
        included, so two writers of one document never merge into the same old version (default: none)."""
        return contextlib.nullcontext()

    @abstractmethod
    def _search_by_vector(
        self, vector: Sequence[float], k: int, filter: Mapping[str, Any] | None
    ) -> list[tuple[Document, float]]:
        """Top ``k`` searchable ``(chunk, cosine)`` pairs for a query vector, best first."""

    @abstractmethod
    def _read_by_ids(self, ids: Sequence[str]) -> list[Document]:
        """The current chunks with these ids, in the order asked, unknown ids left out."""

    # -- LangChain's VectorStore ----------------------------------------------------------------------------------
    def add_documents(self, documents: list[Document], **kwargs: Any) -> list[str]:
        """Add or update ``documents`` (keyword ``ids``: their ids, taking precedence over the documents' own);
        returns the ids, in order.  Each ``doc_id`` touched gets one new version.

        Raises:
            ValueError, TypeError: ``documents`` or ``ids`` not a list (:func:`as_list`); see :func:`as_chunks`;
                the store's own validation (a NUL character, a ``chunk_id`` that is another document's).
            RagSpineError: the embedding model failed (the store is unchanged).
            StoreBusyError: another writer held the store's writer lock longer than the store's ``lock_timeout``
                (nothing was written).
        """
        ids = kwargs.pop("ids", None)
        if kwargs:
            raise TypeError(f"unexpected keyword arguments for add_documents: {sorted(kwargs)}")
        documents = as_list(documents, "documents", "add_documents")
        ids = None if ids is None else as_list(ids, "ids", "add_documents")
        chunks = as_chunks(documents, ids)
        if not chunks:
            return []
        by_doc: dict[str, list[Document]] = {}
        for c in chunks:
            by_doc.setdefault(str(c.metadata["doc_id"]), []).append(c)
        with self._writing():
            current = self._active_chunks(list(by_doc))
            with all_or_nothing("add_documents", self._where()):
                self._write_versions({d: _merge(current.get(d, []), new) for d, new in by_doc.items()})
        return [str(c.metadata["chunk_id"]) for c in chunks]


    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Remove the chunks with these ids from their documents' next versions (a document left empty is
        retracted).  Returns ``True``; unknown ids are ignored.

        Raises:
            ValueError: ``ids`` is ``None`` (this store does not delete everything at once).
            TypeError: ``ids`` a single ``str`` / ``bytes`` or not a list (:func:`as_list`).
            StoreBusyError: as :meth:`add_documents`.
        """
        if ids is None:
            raise ValueError("delete needs the ids to delete (this store does not delete everything at once)")
        if kwargs:
            raise TypeError(f"unexpected keyword arguments for delete: {sorted(kwargs)}")
        gone = {str(i) for i in as_list(ids, "ids", "delete")}
        with self._writing():
            found = self._read_by_ids(sorted(gone))
            doc_ids = sorted({str(d.metadata["doc_id"]) for d in found})
            current = self._active_chunks(doc_ids)
            with all_or_nothing("delete", self._where()):
                self._write_versions({
                    d: [c for c in current.get(d, []) if str(c.metadata["chunk_id"]) not in gone] for d in doc_ids
                })
        return True

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The current chunks with these ids, in the order asked; unknown and RESTRICTED ones are left out.

        Raises:
            TypeError: ``ids`` a single ``str`` / ``bytes`` or not a list (:func:`as_list`).
        """
        return drop_restricted(self._read_by_ids([str(i) for i in as_list(ids, "ids", "get_by_ids")]))

    def similarity_search_with_score(
        self, query: str, k: int = 4, filter: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """Top ``k`` ``(chunk, cosine similarity)`` pairs for ``query``, best first, ties by ``chunk_id``, among
        the searchable chunks matching ``filter`` (the package's predicate language).

        Raises:
            TypeError, ValueError: a bad ``k`` or ``filter`` (one beyond the size limits of
                :func:`~langchain_ragspine.filters.check_filter_size` before the query is embedded or the store
                touched); an unknown keyword argument.
        """
        if kwargs:
            raise TypeError(f"unexpected keyword arguments for similarity_search: {sorted(kwargs)}")
        k = check_k(k)
        check_filter_size(filter)  # before the query is embedded or the store touched
        if not check_query(type(self).__name__, query, "similarity_search").strip():
            return []
        hits = self._search_by_vector(self._embedding.embed_query(query), k, filter)
        return drop_restricted_pairs(hits)  # the gate at this exit

    def similarity_search(
        self, query: str, k: int = 4, filter: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        """The chunks of :meth:`similarity_search_with_score` (each carries ``metadata["scores"]``)."""
        return [d for d, _ in self.similarity_search_with_score(query, k, filter, **kwargs)]

    def similarity_search_by_vector(
        self, embedding: list[float], k: int = 4, filter: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        """Top ``k`` chunks for a query vector (normalised here), best first."""
        if kwargs:
            raise TypeError(f"unexpected keyword arguments for similarity_search_by_vector: {sorted(kwargs)}")
        check_filter_size(filter)
        return drop_restricted(d for d, _ in self._search_by_vector(embedding, check_k(k), filter))

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        return lambda cosine: (1.0 + cosine) / 2.0

    def as_retriever(self, **kwargs: Any) -> ScopedVectorStoreRetriever:
        """A :class:`ScopedVectorStoreRetriever` (LangChain's ``as_retriever`` arguments: ``search_type``,
        ``search_kwargs`` …): a call's ``filter`` is ANDed with ``search_kwargs["filter"]``, never replacing it."""
        tags = kwargs.pop("tags", None) or [*self._get_retriever_tags()]
        return ScopedVectorStoreRetriever(vectorstore=self, tags=tags, **kwargs)
