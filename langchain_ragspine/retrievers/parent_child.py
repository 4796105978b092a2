"""Parent-child retrieval: match small chunks, return the passages that hold them.

:class:`ParentChildRetriever` asks a child retriever (any ``BaseRetriever`` over the children of
:class:`~langchain_ragspine.text_splitters.ParentChildTextSplitter`: BM25, dense, hybrid …, or a LangChain
``VectorStore``'s retriever) for ``fetch_k`` children, then returns the distinct parents of those children, in the
rank order of their best child, up to ``k``.  Each parent carries the ids of its matched children
(``metadata["child_ids"]``, best first) and the scores of its best child.

It is a drop-in for LangChain's ``ParentDocumentRetriever``: it takes that class's arguments (``vectorstore``,
``docstore`` or ``byte_store``, ``child_splitter``, ``parent_splitter``, ``id_key``, ``search_type``, ``search_kwargs``,
``child_metadata_fields``) and its ``add_documents(documents, ids=None, add_to_docstore=True)``, and ``k`` (at
construction and per call) is the number of parents returned, as the standard retriever suites of langchain-tests
expect.  The differences: ``k`` and ``fetch_k`` are separate, so a document whose ten children fill the top ten
still yields only one parent and the other parents come from further down the child ranking; ids are
deterministic (LangChain draws uuids); every parent and child is a verbatim slice of its document with offsets;
RESTRICTED documents are never split, embedded or stored; ``id_key`` defaults to ``"parent_id"`` (``doc_id`` names
the source document here).

Over an ingested store (``ragspine ingest --chunker parent_child``; what ``open_retriever`` and ``ragspine search``
build for such a store in the default ``auto`` mode) the parents are read from its chunk store
(:class:`~langchain_ragspine.backends.directory.chunk_store.ChunkStore`), where they are versioned with their
document, so a new process that opens the same store gets the same parents — unlike a ``ParentDocumentRetriever``
with its usual ``InMemoryStore``, whose parents vanish on restart and whose results are then silently empty.

The parents are read from the store at the time of the call, so a child index that was built once and kept (a
static one: ``BM25Retriever.from_documents(children)``) stays usable while the store changes: a child whose parent
is no active parent of the store any more (its document deleted, or re-chunked, since the index was built) is
dropped — its parent is gone, so there is nothing to return, and nothing is returned whose current label is not
read — and the other children's parents are returned.  Only a store that holds chunks but no parent at all (not
ingested with ``--chunker parent_child``) is a :class:`~langchain_ragspine.errors.StoreError`, naming a child and its
parent.

A parent's ``page_content`` is its own verbatim slice of the source, with its own ``start_index`` / ``end_index`` /
``source_locator`` (invariant 2).  RESTRICTED children are dropped by the gate before grouping, and a RESTRICTED
parent is never returned; a parent and its children copy the same document metadata, so they share one label.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, ClassVar, Protocol, cast

import pydantic
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.stores import BaseStore
from langchain_core.vectorstores import VectorStore, VectorStoreRetriever
from langchain_text_splitters import TextSplitter
from pydantic import ConfigDict, Field, field_validator

from langchain_ragspine.arguments import DEFAULT_K, PositiveIntField
from langchain_ragspine.backends.base import PARENTS, refuse
from langchain_ragspine.documents import check_documents, doc_key, with_scores
from langchain_ragspine.errors import StoreError
from langchain_ragspine.filters import matches
from langchain_ragspine.retrievers.base import AsyncCall, ContractRetriever, SyncCall
from langchain_ragspine.retrievers.contract import ainvoke_retriever, invoke_retriever
from langchain_ragspine.retrievers.embed_as import EMBED_AS_OPTION, embed_as_options, embed_as_target
from langchain_ragspine.sensitivity import drop_restricted, is_restricted, is_sensitivity_key
from langchain_ragspine.served import ServedIds, served_ids
from langchain_ragspine.text_splitters.parent_child import (
    LINEAGE_KEYS,
    PARENT_KEY,
    split_parents_and_children,
)

__all__ = ["ByteStoreDocstore", "DocstoreParents", "ParentChildRetriever", "ParentStore"]

#: Metadata keys ``id_key`` cannot be: the package's lineage keys, the label, the keys a result gets.
_RESERVED_KEYS = frozenset(set(LINEAGE_KEYS) - {PARENT_KEY}) | {"source", "sensitivity", "body_offset", "child_ids",
                                                                "scores", "heading"}


class ParentStore(Protocol):
    """Where parents are read from: :class:`~langchain_ragspine.backends.directory.chunk_store.ChunkStore` implements
    it, and :class:`DocstoreParents` over a LangChain docstore."""

    def get_parents(self, parent_ids: Sequence[str]) -> Mapping[str, Any]:
        """The active parents among ``parent_ids``, by id; values are ``Document``\\ s or have ``to_document()``."""
        ...


class DocstoreParents:
    """A LangChain docstore (``BaseStore[str, Document]``: ``InMemoryStore``, ``create_kv_docstore(LocalFileStore(
    ...))``, Redis …) as a :class:`ParentStore`: ``get_parents(ids)`` is ``docstore.mget(ids)`` without the misses
    (``aget_parents``: ``amget``).  :class:`ParentChildRetriever` wraps its ``docstore=`` in one.

    Raises:
        TypeError: (per read) the docstore holds something else than a ``Document`` under a parent id (a byte store
            passed as ``docstore``: wrap it in ``create_kv_docstore``).
    """

    def __init__(self, docstore: Any) -> None:
        for name in ("mget", "mset"):
            if not callable(getattr(docstore, name, None)):
                raise TypeError(f"docstore must be a LangChain BaseStore[str, Document] (with mget / mset), got "
                                f"{type(docstore).__name__}")
        self.docstore = docstore

    def _found(self, ids: Sequence[str], values: Sequence[Any]) -> dict[str, Document]:
        out: dict[str, Document] = {}
        for pid, value in zip(ids, values, strict=True):
            if value is None:
                continue
            if not isinstance(value, Document):
                raise TypeError(
                    f"docstore holds a {type(value).__name__} under parent id {pid!r}, not a Document: pass a byte "
                    "store (LocalFileStore …) as byte_store=, not as docstore="
                )
            out[pid] = value
        return out

    def get_parents(self, parent_ids: Sequence[str]) -> dict[str, Document]:
        """The parents among ``parent_ids`` the docstore holds, by id."""
        ids = list(parent_ids)
        return self._found(ids, self.docstore.mget(ids)) if ids else {}

    async def aget_parents(self, parent_ids: Sequence[str]) -> dict[str, Document]:
        """Async :meth:`get_parents` (``docstore.amget``)."""
        ids = list(parent_ids)
        return self._found(ids, await self.docstore.amget(ids)) if ids else {}


_KEY_SAFE = re.compile(r"[A-Za-z0-9.-]")
_KEY_ESCAPE = re.compile(r"_([0-9a-f]+)_")


def _encode_key(key: str) -> str:
    """``key`` in the characters a file name (``LocalFileStore``) allows: letters, digits, ``.`` and ``-`` as they
    are, any other character as ``_<utf-8 hex>_`` (``"rain.md#p0"`` -> ``"rain.md_23_p0"``); reversible."""
    return "".join(c if _KEY_SAFE.fullmatch(c) else f"_{c.encode().hex()}_" for c in key)


def _decode_key(key: str) -> str:
    def unescape(m: re.Match[str]) -> str:
        try:
            return bytes.fromhex(m.group(1)).decode()
        except ValueError:  # not an escape this class wrote (a key another writer put in the byte store)
            return m.group(0)

    return _KEY_ESCAPE.sub(unescape, key)


class ByteStoreDocstore(BaseStore[str, Document]):
    """A docstore over a LangChain ``ByteStore`` (``LocalFileStore``, ``InMemoryByteStore``, Redis …): what
    ``ParentChildRetriever(byte_store=...)`` reads and writes its parents with, as ``ParentDocumentRetriever`` does.

    Usage: ``docstore = ByteStoreDocstore(LocalFileStore("parents"))``.

    A ``Document`` is stored as UTF-8 JSON ``{"page_content", "metadata", "id"}`` (plain data: reading it builds a
    ``Document`` and nothing else); a key is escaped to the characters a file name allows (letters, digits, ``.``,
    ``-``; any other character as ``_<utf-8 hex>_``), so parent ids such as ``"規程/rain.md#p0"`` work with a
    ``LocalFileStore``, whose own key check refuses ``#``, ``/`` in odd places and non-ASCII.

    Raises:
        TypeError: ``mset`` of something else than a ``Document``, or metadata that is not JSON (naming the key).
        ValueError: ``mget`` of bytes that are not such a JSON document (naming the key).
    """

    def __init__(self, byte_store: Any) -> None:
        for name in ("mget", "mset", "mdelete", "yield_keys"):
            if not callable(getattr(byte_store, name, None)):
                raise TypeError(f"byte_store must be a LangChain ByteStore (mget / mset / mdelete / yield_keys), got "
                                f"{type(byte_store).__name__}")
        self.byte_store = byte_store

    @staticmethod
    def _dump(key: str, doc: Any) -> bytes:
        if not isinstance(doc, Document):
            raise TypeError(f"ByteStoreDocstore stores Documents, got a {type(doc).__name__} for key {key!r}")
        try:
            text = json.dumps({"page_content": doc.page_content, "metadata": doc.metadata, "id": doc.id},
                              ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as e:
            raise TypeError(f"the metadata of document {key!r} is not JSON: {e}") from e
        return text.encode("utf-8")

    @staticmethod
    def _load(key: str, value: bytes | None) -> Document | None:
        if value is None:
            return None
        try:
            data = json.loads(value.decode("utf-8"))
            return Document(page_content=data["page_content"], metadata=data["metadata"], id=data.get("id"))
        except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, pydantic.ValidationError) as e:
            raise ValueError(f"the byte store's value for key {key!r} is not a stored Document: {e}") from e

    def mget(self, keys: Sequence[str]) -> list[Document | None]:
        """The documents under ``keys`` (``None`` where there is none)."""
        values = self.byte_store.mget([_encode_key(k) for k in keys])
        return [self._load(k, v) for k, v in zip(keys, values, strict=True)]

    def mset(self, key_value_pairs: Sequence[tuple[str, Document]]) -> None:
        """Store each ``(key, document)``."""
        self.byte_store.mset([(_encode_key(k), self._dump(k, d)) for k, d in key_value_pairs])

    def mdelete(self, keys: Sequence[str]) -> None:
        """Delete the documents under ``keys``."""
        self.byte_store.mdelete([_encode_key(k) for k in keys])

    def yield_keys(self, *, prefix: str | None = None) -> Iterator[str]:
        """The keys (decoded), those starting with ``prefix`` when given."""
        for key in self.byte_store.yield_keys():
            decoded = _decode_key(str(key))
            if prefix is None or decoded.startswith(prefix):
                yield decoded


def _as_document(value: Any) -> Document:
    return value if isinstance(value, Document) else value.to_document()


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _holds(parent: Document, child: Document) -> bool:
    """Whether ``child`` is the slice of ``parent`` its offsets say (``True`` when either lacks offsets: it cannot be
    told).  A child written for an earlier version of its parent (re-added since, with other text) is not."""
    offsets = [parent.metadata.get("start_index"), parent.metadata.get("end_index"),
               child.metadata.get("start_index"), child.metadata.get("end_index")]
    if not all(_is_int(v) for v in offsets):
        return True
    ps, pe, cs, ce = (int(v or 0) for v in offsets)
    pdoc, cdoc = parent.metadata.get("doc_id"), child.metadata.get("doc_id")
    if pdoc is not None and cdoc is not None and pdoc != cdoc:
        return False
    return bool(ps <= cs <= ce <= pe and parent.page_content[cs - ps : ce - ps] == child.page_content)


@contextlib.contextmanager
def _key_hint() -> Iterator[None]:
    """A docstore that refuses the parent ids' characters (``create_kv_docstore(LocalFileStore(...))``: ``#``) is a
    ``ValueError`` saying to pass the byte store as ``byte_store=``, which escapes keys."""
    try:
        yield
    except Exception as e:
        if type(e).__name__ != "InvalidKeyException":
            raise
        raise ValueError(f"the docstore refused a parent id ({e}): pass the byte store itself as byte_store= "
                         "(ParentChildRetriever(byte_store=LocalFileStore(path), ...)), which escapes the ids to "
                         "file-name characters") from e


class ParentChildRetriever(ContractRetriever):
    """Retrieve children, return their distinct parents (see the module docstring); a drop-in for LangChain's
    ``ParentDocumentRetriever``.

    Two ways to build one:

    * **over an ingested store** (what ``open_retriever`` does for a ``--chunker parent_child`` store):
      ``ParentChildRetriever(child_retriever, store, k=6, fetch_k=50)`` — any ``BaseRetriever`` over the children
      and the :class:`~langchain_ragspine.backends.directory.chunk_store.ChunkStore` that holds the parents;
    * **LangChain's arguments**: ``ParentChildRetriever(vectorstore=..., docstore=..., child_splitter=...,
      parent_splitter=None, id_key="parent_id", search_type="similarity", search_kwargs={})`` then
      :meth:`add_documents` — the code of a ``ParentDocumentRetriever`` with the class name swapped.  The children
      are searched with ``vectorstore.as_retriever(search_type=..., search_kwargs=...)``; the parents are read from
      ``docstore`` (any ``BaseStore[str, Document]``, through :class:`DocstoreParents`).

    Args:
        child_retriever: retrieves children (chunks with ``metadata[id_key]``), any ``BaseRetriever``.  It is asked
            for ``fetch_k`` children matching the call's ``filter`` through the retriever-call contract
            (:func:`~langchain_ragspine.retrievers.contract.invoke_retriever`: passed on when it takes ``k`` /
            ``filter``, else truncated / filtered here, fail closed).  Default: from ``vectorstore``.
        store: the parent store — a :class:`~langchain_ragspine.backends.directory.chunk_store.ChunkStore` (or
            anything with ``get_parents(ids) -> {id: parent}``).  Default: from ``docstore``.
        k: parents returned (default 6, :data:`~langchain_ragspine.arguments.DEFAULT_K`), an ``int >= 1``; ``invoke(query, k=...)`` overrides it per call.  (The
            standard retriever suites of langchain-tests check both.)
        fetch_k: children retrieved per query (default 50, or ``search_kwargs["k"]`` when that is given), an
            ``int >= 1``: the candidate pool the parents come from.  A document whose ten children fill the top ten
            still yields one parent; the others come from further down.
        parent_k / child_k: the old names of ``k`` / ``fetch_k``, deprecated (a ``DeprecationWarning``; removed in
            the next release).  Given with the new name and another value: ``TypeError`` naming both.
        vectorstore: the LangChain ``VectorStore`` of the children: searched when no ``child_retriever`` is given,
            written by :meth:`add_documents`.
        docstore: the LangChain docstore of the parents (``BaseStore[str, Document]``, e.g. ``InMemoryStore()``):
            read when no ``store`` is given, written by :meth:`add_documents`.
        byte_store: a LangChain ``ByteStore`` for the parents instead (``LocalFileStore(path)`` keeps them on disk):
            ``docstore`` becomes a :class:`ByteStoreDocstore` over it, which escapes the parent ids to file-name
            characters (``create_kv_docstore(LocalFileStore(path))`` would refuse their ``#``).
        child_splitter / parent_splitter: what :meth:`add_documents` cuts documents with (see there).
        child_metadata_fields: the document metadata fields children keep (``None``: all), as in LangChain; the
            lineage keys (``doc_id``, ``chunk_id``, offsets, ``parent_id``) and the sensitivity label are always kept.
        id_key: the child metadata key naming its parent (default ``"parent_id"``, what the package's splitters and
            ``ragspine ingest`` write).  LangChain's default ``"doc_id"`` is refused: here ``doc_id`` names the
            source document, so children written by LangChain's class (``doc_id`` = a random parent key) cannot be
            read — add the documents again with :meth:`add_documents`.
        search_type / search_kwargs: the ``vectorstore``'s search (``"similarity"``, ``"mmr"``,
            ``"similarity_score_threshold"``; the store's own ``filter``, ``fetch_k``, ``lambda_mult``,
            ``score_threshold``); ``search_kwargs["k"]`` is ``fetch_k``.  Only with a ``vectorstore`` and no
            ``child_retriever`` (configure a ``child_retriever`` itself).

    ``invoke(query, k=None, filter=None, embed_as=None)`` returns at most ``k`` (default the field) parent
    ``Document``\\ s (``id`` the parent id, ``f"{doc_id}#p{i}"`` for parents the package wrote), distinct, ordered by
    their best child's rank, each with ``metadata["child_ids"]`` (the matched children, best first) and
    ``metadata["scores"]`` (the best child's).  The call's ``filter`` goes to the child search and is checked
    again on each parent as read now (fail closed: filters only narrow); a store-dialect ``search_kwargs["filter"]``
    applies as well (AND).  A child that is not the slice of its parent its offsets say (a child of an earlier
    version of a document added again) is dropped.  ``embed_as`` (``"query"`` / ``"document"``; HyDE passes
    ``"document"`` for its hypothetical document) is handed on to the child retriever as
    :func:`~langchain_ragspine.retrievers.embed_as.embed_as_target` decides.  RESTRICTED children are dropped by
    the gate before grouping, and a RESTRICTED parent is never returned.

    Raises:
        TypeError: an unknown argument; neither ``child_retriever`` nor ``vectorstore``, or neither ``store`` nor
            ``docstore``; ``store`` and ``docstore`` both, or ``docstore`` and ``byte_store``; ``search_type`` /
            ``search_kwargs`` with a ``child_retriever``; a deprecated name given with its new name and another
            value.
        ValueError: bad ``k`` / ``fetch_k`` (at construction or per call); a reserved ``id_key``; a bad
            ``search_type``.
        StoreError: (per call) a retrieved child has no ``metadata[id_key]``; or no retrieved child's parent is in
            the store and the store holds chunks but no parents (a ``ChunkStore`` not ingested with ``--chunker
            parent_child``); the message names the child and the parent.  A child whose parent is gone from a store
            that has parents is dropped (see the module docstring).

    Example:
        >>> import tempfile, pathlib
        >>> from langchain_core.documents import Document
        >>> from langchain_ragspine import BM25Retriever
        >>> from langchain_ragspine.backends.directory.chunk_store import ChunkStore
        >>> from langchain_ragspine.text_splitters import ParentChildTextSplitter
        >>> doc = Document("# 梅雨\\n\\n梅雨は六月に始まる。七月に終わる。\\n\\n# 台風\\n\\n台風は秋に来る。", id="w")
        >>> parents, children = ParentChildTextSplitter(chunk_size=16, chunk_overlap=0).split_with_parents([doc])
        >>> store = ChunkStore(pathlib.Path(tempfile.mkdtemp()) / "chunks.sqlite")
        >>> store.replace_doc_chunks("w", children, parents=parents)
        1
        >>> retriever = ParentChildRetriever(BM25Retriever.from_documents(children), store, k=1, fetch_k=10)
        >>> hit = retriever.invoke("七月")[0]
        >>> hit.page_content, hit.metadata["child_ids"]
        ('# 梅雨\\n\\n梅雨は六月に始まる。七月に終わる。', ['w#1', 'w#0'])
        >>> store.close()

        LangChain's arguments (the ``ParentDocumentRetriever`` snippet, class name swapped):

        >>> from langchain_core.stores import InMemoryStore
        >>> from langchain_core.vectorstores import InMemoryVectorStore
        >>> from langchain_ragspine.embeddings import HashingEmbeddings
        >>> retriever = ParentChildRetriever(
        ...     vectorstore=InMemoryVectorStore(HashingEmbeddings(64)), docstore=InMemoryStore(),
        ...     child_splitter=ParentChildTextSplitter(chunk_size=16, chunk_overlap=0), k=1)
        >>> retriever.add_documents([doc])
        >>> [(d.id, d.page_content, d.metadata["source_locator"]) for d in retriever.invoke("台風は秋に来る")]
        [('w#p1', '# 台風\\n\\n台風は秋に来る。', 'w#25-39')]
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    #: ``invoke(query, embed_as="document")`` is handed on to the child retriever (see the class docstring).
    call_options: ClassVar[tuple[str, ...]] = (EMBED_AS_OPTION,)
    #: ``parent_k`` / ``child_k``: the old names of ``k`` / ``fetch_k``, for one release.
    renamed_arguments: ClassVar[tuple[str, ...]] = ("parent_k", "child_k")

    child_retriever: BaseRetriever | None = None
    store: Any = None
    k: PositiveIntField = DEFAULT_K
    fetch_k: PositiveIntField = 50
    vectorstore: VectorStore | None = None
    docstore: Any = None
    byte_store: Any = None
    child_splitter: TextSplitter | None = None
    parent_splitter: TextSplitter | None = None
    child_metadata_fields: list[str] | None = None
    id_key: str = PARENT_KEY
    search_type: str = "similarity"
    search_kwargs: dict[str, Any] = Field(default_factory=dict)

    def __init__(self, child_retriever: BaseRetriever | None = None, store: ParentStore | None = None,
                 **kwargs: Any) -> None:
        if child_retriever is not None:
            kwargs["child_retriever"] = child_retriever
        if store is not None:
            kwargs["store"] = store
        super().__init__(**kwargs)

    @classmethod
    def _translate_arguments(cls, data: dict[str, Any]) -> dict[str, Any]:
        """LangChain's ``search_type`` enum and ``search_kwargs["k"]``; the child retriever
        from ``vectorstore`` and the parent store from ``docstore`` (see the class docstring)."""
        byte_store, docstore = data.get("byte_store"), data.get("docstore")
        if byte_store is not None:
            # (the fields of a built retriever, passed again by configurable_fields, hold both, one over the other)
            if docstore is not None and not (isinstance(docstore, ByteStoreDocstore) and docstore.byte_store is byte_store):
                raise TypeError("ParentChildRetriever got docstore= and byte_store=: the parents are kept in one of them")
            data["docstore"] = docstore or ByteStoreDocstore(byte_store)
        if "search_type" in data:
            data["search_type"] = getattr(data["search_type"], "value", data["search_type"])  # SearchType.mmr
        search_kwargs = data.get("search_kwargs")
        if isinstance(search_kwargs, Mapping) and "k" in search_kwargs:
            if "fetch_k" in data and data["fetch_k"] != search_kwargs["k"]:
                raise TypeError(f"ParentChildRetriever got fetch_k={data['fetch_k']!r} and search_kwargs['k']="
                                f"{search_kwargs['k']!r}: both are the children asked for; pass one")
            data["fetch_k"] = search_kwargs["k"]
        search_type, vectorstore = data.get("search_type", "similarity"), data.get("vectorstore")
        child = data.get("child_retriever")
        if child is None:
            if isinstance(vectorstore, VectorStore):  # else the field's own type error names it
                data["child_retriever"] = vectorstore.as_retriever(
                    search_type=search_type, search_kwargs=dict(search_kwargs or {}))
        elif search_type != "similarity" or search_kwargs:
            derived = (isinstance(child, VectorStoreRetriever) and child.vectorstore is vectorstore
                       and child.search_type == search_type and child.search_kwargs == dict(search_kwargs or {}))
            if not derived:
                raise TypeError("ParentChildRetriever got search_type / search_kwargs with a child_retriever: they "
                                "configure the vectorstore's search; configure the child_retriever itself")
        docstore, store = data.get("docstore"), data.get("store")
        if docstore is not None and store is not None:
            if not (isinstance(store, DocstoreParents) and store.docstore is docstore):
                raise TypeError("ParentChildRetriever got store= and docstore=: the parents are read from one of them")
        elif docstore is not None:
            data["store"] = DocstoreParents(docstore)
        return data

    def model_post_init(self, context: Any, /) -> None:
        """Refuse a retriever with no children to search or no parents to read (after the argument checks)."""
        super().model_post_init(context)
        self._check_fields()

    def _check_fields(self) -> None:
        """No children to search or no parents to read is refused — at construction, on assignment
        (``retriever.store = None``) and in ``model_copy(update=…)`` alike."""
        if self.child_retriever is None:
            raise TypeError("ParentChildRetriever needs child_retriever= (any retriever over the children) or "
                            "vectorstore= (a VectorStore of the children, as ParentDocumentRetriever takes)")
        if self.store is None:
            raise TypeError("ParentChildRetriever needs store= (the ChunkStore of an ingested store) or "
                            "docstore= (a LangChain BaseStore[str, Document] such as InMemoryStore())")

    @field_validator("store")
    @classmethod
    def _check_store(cls, value: Any) -> Any:
        if value is not None and not callable(getattr(value, "get_parents", None)):
            raise ValueError(f"store must have get_parents(ids) (a ChunkStore), got {type(value).__name__}")
        if value is not None:
            refuse(value, PARENTS)  # a backend that keeps no parents (PostgreSQL) would find none, silently
        return value

    @field_validator("id_key")
    @classmethod
    def _check_id_key(cls, value: str) -> str:
        if not value:
            raise ValueError("id_key must be a non-empty metadata key")
        if value == "doc_id":
            raise ValueError(
                "id_key='doc_id' (ParentDocumentRetriever's default) cannot be used: here metadata['doc_id'] names the "
                "source document; children name their parent under 'parent_id' (the default id_key) — leave id_key "
                "out, and add the documents with add_documents (children LangChain wrote cannot be read)"
            )
        if value in _RESERVED_KEYS:
            raise ValueError(f"id_key={value!r} is a key the package writes itself; choose another (default "
                             f"{PARENT_KEY!r})")
        return value

    # -- writing: LangChain's add_documents -----------------------------------------------------------------------
    def _split_for_adding(
        self, documents: Sequence[Document], ids: Sequence[str] | None
    ) -> tuple[list[Document], list[Document]]:
        if self.vectorstore is None or self.docstore is None:
            raise TypeError(
                "add_documents needs vectorstore= and docstore= (ParentDocumentRetriever's arguments); a ChunkStore "
                "is written by `ragspine ingest --chunker parent_child` (or ingest(..., chunker='parent_child'))"
            )
        if self.child_splitter is None:
            raise TypeError("add_documents needs child_splitter= (e.g. ParagraphTextSplitter(400, 80), or "
                            "ParentChildTextSplitter() for sections as parents)")
        docs = check_documents(documents, f"{type(self).__name__}.add_documents")
        if ids is not None:
            ids = [str(i) for i in ids]
            if len(ids) != len(docs):
                raise ValueError(f"add_documents got {len(docs)} documents and {len(ids)} ids: ids name the "
                                 "documents, one each")
        kept = [i for i, d in enumerate(docs) if not is_restricted(d)]  # the gate before any splitter or store
        parents, children = split_parents_and_children(
            [docs[i] for i in kept], self.child_splitter, self.parent_splitter,
            doc_ids=None if ids is None else [ids[i] for i in kept],
        )
        return drop_restricted(parents), [self._child_view(c) for c in drop_restricted(children)]

    def _child_view(self, child: Document) -> Document:
        """The child as written to the vector store: ``metadata[id_key]`` its parent id; with
        ``child_metadata_fields`` only those fields, the lineage keys and the label."""
        md = dict(child.metadata)
        if self.child_metadata_fields is not None:
            keep = set(self.child_metadata_fields) | set(LINEAGE_KEYS)
            md = {key: v for key, v in md.items() if key in keep or is_sensitivity_key(key)}
        md[self.id_key] = md[PARENT_KEY]
        return Document(page_content=child.page_content, metadata=md, id=child.id)

    def add_documents(
        self, documents: Sequence[Document], ids: Sequence[str] | None = None, add_to_docstore: bool = True,
        **kwargs: Any,
    ) -> None:
        """Split ``documents`` into parents and children and write them: the parents to ``docstore`` (under their
        ids), then the children to ``vectorstore`` (under their ``chunk_id``\\ s, with ``**kwargs``) — LangChain's
        ``ParentDocumentRetriever.add_documents``.

        Usage: ``retriever.add_documents(docs)``; ``retriever.add_documents(docs, ids=["a", "b"])``.

        Documents are cut by :func:`~langchain_ragspine.text_splitters.parent_child.split_parents_and_children`:
        into parents by ``parent_splitter`` (``None``: each document is one parent; a
        :class:`~langchain_ragspine.text_splitters.ParentChildTextSplitter` as ``child_splitter`` makes its own,
        the sections), each parent into children by ``child_splitter``.  Every parent and child is a verbatim slice
        of its document with offsets and a locator; a splitter of this package gives exact spans, another
        ``TextSplitter``'s pieces are located in the text (one that rewrites the text is refused).

        Ids are deterministic: a document is ``ids[i]``, else its ``metadata["doc_id"]``, else its ``Document.id``,
        else its ``source``, else a hash of its text; its parents are ``f"{doc_id}#p{i}"`` and its children
        ``f"{doc_id}#{n}"``.  (LangChain draws random uuids, and with a ``parent_splitter`` wants one id per parent;
        here ``ids`` name the documents, one each.)  Adding a document again under the same id writes the same keys
        (no duplicates); a child left over from a longer earlier version is not returned when its parent's text
        no longer holds it (see the class docstring).

        RESTRICTED documents are skipped before anything is split, embedded or stored: no RESTRICTED text reaches
        the splitter, the vector store's embedding model or the docstore.

        Args:
            documents: the documents.
            ids: one id per document (its ``doc_id``), or ``None``.
            add_to_docstore: write the parents (default); ``False``: only the children (the parents are there).
            **kwargs: passed to ``vectorstore.add_documents``.

        Raises:
            TypeError: no ``vectorstore`` / ``docstore`` / ``child_splitter``.
            ValueError: ``ids`` of another length than ``documents``; two documents with one ``doc_id``; a splitter
                piece that is not a verbatim slice (nothing is written then).
        """
        parents, children = self._split_for_adding(documents, ids)
        assert self.vectorstore is not None  # checked by _split_for_adding
        if add_to_docstore and parents:  # parents first: a child is never searchable without its parent
            with _key_hint():
                self.docstore.mset([(str(p.id), p) for p in parents])
        if children:
            self.vectorstore.add_documents(children, ids=[str(c.id) for c in children], **kwargs)

    async def aadd_documents(
        self, documents: Sequence[Document], ids: Sequence[str] | None = None, add_to_docstore: bool = True,
        **kwargs: Any,
    ) -> None:
        """Async :meth:`add_documents` (``docstore.amset``, ``vectorstore.aadd_documents``)."""
        parents, children = self._split_for_adding(documents, ids)
        assert self.vectorstore is not None
        if add_to_docstore and parents:
            with _key_hint():
                await self.docstore.amset([(str(p.id), p) for p in parents])
        if children:
            await self.vectorstore.aadd_documents(children, ids=[str(c.id) for c in children], **kwargs)

    # -- reading --------------------------------------------------------------------------------------------------
    def _group(self, children: Sequence[Document]) -> tuple[list[str], dict[str, list[Document]]]:
        """The parent ids of ranked ``children`` (RESTRICTED ones gated out first), in the order of their best
        child, and each parent's children, best first."""
        order: list[str] = []
        matched: dict[str, list[Document]] = {}
        for child in drop_restricted(children)[: self.fetch_k]:  # the gate before the cut
            pid = child.metadata.get(self.id_key)
            if pid is None or pid == "":
                raise StoreError(
                    f"child {doc_key(child)!r} has no {self.id_key}: index the children of a ParentChildTextSplitter "
                    "(ragspine ingest --chunker parent_child), or of ParentChildRetriever.add_documents"
                )
            pid = str(pid)
            if pid not in matched:
                order.append(pid)
                matched[pid] = []
            matched[pid].append(child)
        return order, matched

    def _check_found(self, order: list[str], matched: dict[str, list[Document]], found: Mapping[str, Any]) -> None:
        if order and not found and self._holds_no_parents():
            child = matched[order[0]][0]
            raise StoreError(
                f"child {doc_key(child)!r} names parent {order[0]!r}, but the store holds chunks and no parents: the "
                "child index and the chunk store disagree — ingest the corpus with --chunker parent_child",
                path=getattr(self.store, "path", None),
            )

    def _parents(self, order: list[str], matched: dict[str, list[Document]], found: Mapping[str, Any], k: int,
                 filter: Mapping[str, Any] | None) -> list[Document]:
        """The first ``k`` parents of ``order`` that were found, are not RESTRICTED, match ``filter`` and hold a
        matched child."""
        self._check_found(order, matched, found)
        out: list[Document] = []
        for pid in order:
            if pid not in found:  # its document was deleted or re-chunked since the child index was built
                continue
            parent = _as_document(found[pid])
            if is_restricted(parent) or not matches(parent.metadata, filter):
                continue
            kids = [c for c in matched[pid] if _holds(parent, c)]
            if not kids:
                continue
            md = dict(parent.metadata)
            md["child_ids"] = [doc_key(c) for c in kids]
            doc = Document(page_content=parent.page_content, metadata=md, id=pid)
            scores = kids[0].metadata.get("scores")
            out.append(with_scores(doc, **scores) if isinstance(scores, Mapping) else with_scores(doc))
            if len(out) == k:
                break
        return out

    def _holds_no_parents(self) -> bool:
        """Whether the store (when it can tell: a ``ChunkStore``'s ``count_parents`` / ``count_chunks``) has chunks
        but no parents — a store not built for parent-child retrieval, not one whose documents were deleted."""
        count_parents = getattr(self.store, "count_parents", None)
        count_chunks = getattr(self.store, "count_chunks", None)
        if not callable(count_parents) or not callable(count_chunks):
            return False
        return bool(count_parents() == 0 and count_chunks() > 0)

    def served_ids(self, ids: Sequence[str]) -> ServedIds | None:
        """Which of ``ids`` this retriever would still return (:mod:`~langchain_ragspine.served`): what its parent
        ``store`` answers (it returns only parents read from ``store``; a
        :class:`~langchain_ragspine.backends.directory.chunk_store.ChunkStore` answers for its current rows and
        labels); ``None`` when the store cannot tell."""
        return served_ids(self.store, ids)

    def _children(self) -> BaseRetriever:
        assert self.child_retriever is not None  # checked by model_post_init
        return self.child_retriever

    def _retrieve(self, query: str, call: SyncCall) -> list[Document]:
        k = cast(int, call.k)  # resolved by the base
        child, options = embed_as_target(self._children(), embed_as_options(call.options))
        children = invoke_retriever(child, query, k=self.fetch_k, filter=call.filter,
                                    config=call.child("child_retriever"), options=options)
        order, matched = self._group(children)
        found = self.store.get_parents(order) if order else {}
        return self._parents(order, matched, found, k, call.filter)

    async def _aretrieve(self, query: str, call: AsyncCall) -> list[Document]:
        k = cast(int, call.k)  # resolved by the base
        child, options = embed_as_target(self._children(), embed_as_options(call.options))
        children = await ainvoke_retriever(child, query, k=self.fetch_k, filter=call.filter,
                                           config=call.child("child_retriever"), options=options)
        order, matched = self._group(children)
        aget = getattr(self.store, "aget_parents", None)
        if not order:
            found: Mapping[str, Any] = {}
        elif callable(aget):
            found = await aget(order)
        else:
            found = self.store.get_parents(order)
        return self._parents(order, matched, found, k, call.filter)
