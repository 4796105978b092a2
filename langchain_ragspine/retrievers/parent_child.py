"""Parent-child retrieval: match small chunks, return the passages that hold them, from the persistent store.

:class:`ParentChildRetriever` asks a child retriever (any ``BaseRetriever`` over the children of
:class:`~langchain_ragspine.text_splitters.ParentChildTextSplitter`: BM25, dense, hybrid …) for ``child_k``
children, then returns the distinct parents of those children, in the rank order of their best child, up to
``parent_k``.  Each parent carries the ids of its matched children (``metadata["child_ids"]``, best first) and the
scores of its best child.  Parents are read from a chunk store
(:class:`~langchain_ragspine.backends.directory.chunk_store.ChunkStore`), where they are versioned with their document, so a new process
that opens the same store gets the same parents — unlike LangChain's ``ParentDocumentRetriever`` with its usual
``InMemoryStore``, whose parents vanish on restart and whose results are then silently empty.

Another difference from ``ParentDocumentRetriever``: ``child_k`` and ``parent_k`` are separate, so a document whose
ten children fill the top ten still yields only one parent and the other parents come from further down the child
ranking.

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

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Protocol

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, field_validator

from langchain_ragspine.documents import check_k, doc_key, with_scores
from langchain_ragspine.errors import StoreError
from langchain_ragspine.retrievers.base import AsyncCall, ContractRetriever, SyncCall
from langchain_ragspine.retrievers.contract import ainvoke_retriever, invoke_retriever
from langchain_ragspine.retrievers.embed_as import EMBED_AS_OPTION, embed_as_options, embed_as_target
from langchain_ragspine.sensitivity import drop_restricted, is_restricted
from langchain_ragspine.served import ServedIds, served_ids

__all__ = ["ParentChildRetriever", "ParentStore"]


class ParentStore(Protocol):
    """Where parents are read from: :class:`~langchain_ragspine.backends.directory.chunk_store.ChunkStore` implements it."""

    def get_parents(self, parent_ids: Sequence[str]) -> Mapping[str, Any]:
        """The active parents among ``parent_ids``, by id; values are ``Document``\\ s or have ``to_document()``."""
        ...


def _as_document(value: Any) -> Document:
    return value if isinstance(value, Document) else value.to_document()


class ParentChildRetriever(ContractRetriever):
    """Retrieve children, return their distinct parents from a persistent store (see the module docstring).

    Args:
        child_retriever: retrieves children (chunks with ``metadata["parent_id"]``), any ``BaseRetriever``.  It is
            asked for ``child_k`` children matching the call's ``filter`` through the retriever-call contract
            (:func:`~langchain_ragspine.retrievers.contract.invoke_retriever`: passed on when it takes ``k`` /
            ``filter``, else truncated / filtered here, fail closed).
        store: the parent store — a :class:`~langchain_ragspine.backends.directory.chunk_store.ChunkStore` (or anything with
            ``get_parents(ids) -> {id: parent}``).
        child_k: children retrieved per query (default 50), an ``int >= 1``.
        parent_k: parents returned (default 5), an ``int >= 1``; ``invoke(query, k=...)`` overrides it per call.

    ``invoke(query, k=None, filter=None, embed_as=None)`` returns at most ``k`` (default ``parent_k``) parent
    ``Document``\\ s
    (``id`` and ``chunk_id`` the parent id ``f"{doc_id}#p{i}"``), ordered by their best child's rank, each with
    ``metadata["child_ids"]`` (the matched children, best first) and ``metadata["scores"]`` (the best child's).
    ``embed_as`` (``"query"`` / ``"document"``; HyDE passes ``"document"`` for its hypothetical document) is handed
    on to the child retriever as :func:`~langchain_ragspine.retrievers.embed_as.embed_as_target` decides: passed
    to a dense or hybrid child, honoured for a LangChain ``VectorStoreRetriever`` child by a document-vector search,
    dropped for a BM25 child (which embeds nothing).

    Raises:
        TypeError / ValueError: bad ``child_k`` / ``parent_k`` (at construction) or ``k`` (per call).
        StoreError: (per call) a retrieved child has no ``parent_id``; or no retrieved child's parent is in the
            store and the store holds chunks but no parents (a ``ChunkStore`` not ingested with ``--chunker
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
        >>> retriever = ParentChildRetriever(BM25Retriever.from_documents(children), store, child_k=10, parent_k=1)
        >>> hit = retriever.invoke("七月")[0]
        >>> hit.page_content, hit.metadata["child_ids"]
        ('# 梅雨\\n\\n梅雨は六月に始まる。七月に終わる。', ['w#1', 'w#0'])
        >>> store.close()
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    #: ``invoke(query, embed_as="document")`` is handed on to the child retriever (see the class docstring).
    call_options: ClassVar[tuple[str, ...]] = (EMBED_AS_OPTION,)

    child_retriever: BaseRetriever
    store: Any
    child_k: int = 50
    parent_k: int = 5

    def __init__(
        self,
        child_retriever: BaseRetriever | None = None,
        store: ParentStore | None = None,
        child_k: int = 50,
        parent_k: int = 5,
        **kwargs: Any,
    ) -> None:
        if child_retriever is not None:
            kwargs["child_retriever"] = child_retriever
        if store is not None:
            kwargs["store"] = store
        kwargs.update(child_k=child_k, parent_k=parent_k)  # (the base's typed __init__ names only its own fields)
        super().__init__(**kwargs)

    @field_validator("child_k", "parent_k", mode="before")
    @classmethod
    def _check_counts(cls, value: Any, info: Any) -> int:
        return check_k(value, info.field_name)

    @field_validator("store")
    @classmethod
    def _check_store(cls, value: Any) -> Any:
        if not callable(getattr(value, "get_parents", None)):
            raise ValueError(f"store must have get_parents(ids) (a ChunkStore), got {type(value).__name__}")
        return value

    def _parents(self, children: Sequence[Document], k: int) -> list[Document]:
        """Group ranked children by parent; read the parents; the first ``k`` that are not RESTRICTED."""
        children = drop_restricted(children)[: self.child_k]  # the gate before the cut
        order: list[str] = []
        matched: dict[str, list[Document]] = {}
        for child in children:
            pid = child.metadata.get("parent_id")
            if pid is None or pid == "":
                raise StoreError(
                    f"child {doc_key(child)!r} has no parent_id: index the children of a ParentChildTextSplitter "
                    "(ragspine ingest --chunker parent_child)"
                )
            pid = str(pid)
            if pid not in matched:
                order.append(pid)
                matched[pid] = []
            matched[pid].append(child)
        found = self.store.get_parents(order) if order else {}
        if order and not found and self._holds_no_parents():
            child = matched[order[0]][0]
            raise StoreError(
                f"child {doc_key(child)!r} names parent {order[0]!r}, but the store holds chunks and no parents: the "
                "child index and the chunk store disagree — ingest the corpus with --chunker parent_child",
                path=getattr(self.store, "path", None),
            )
        out: list[Document] = []
        for pid in order:
            if pid not in found:  # its document was deleted or re-chunked since the child index was built
                continue
            parent = _as_document(found[pid])
            if is_restricted(parent):
                continue
            best = matched[pid][0]
            md = dict(parent.metadata)
            md["child_ids"] = [doc_key(c) for c in matched[pid]]
            doc = Document(page_content=parent.page_content, metadata=md, id=pid)
            scores = best.metadata.get("scores")
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

    def _retrieve(self, query: str, call: SyncCall) -> list[Document]:
        k = self.parent_k if call.k is None else check_k(call.k)
        child, options = embed_as_target(self.child_retriever, embed_as_options(call.options))
        children = invoke_retriever(child, query, k=self.child_k, filter=call.filter,
                                    config=call.child("child_retriever"), options=options)
        return self._parents(children, k)

    async def _aretrieve(self, query: str, call: AsyncCall) -> list[Document]:
        k = self.parent_k if call.k is None else check_k(call.k)
        child, options = embed_as_target(self.child_retriever, embed_as_options(call.options))
        children = await ainvoke_retriever(child, query, k=self.child_k, filter=call.filter,
                                           config=call.child("child_retriever"), options=options)
        return self._parents(children, k)
