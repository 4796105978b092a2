"""One LangChain ``VectorStore`` over any backend of the package: :class:`RagSpineVectorStore`.

:class:`RagSpineVectorStore` is what an app that only knows LangChain's vector-store habits reaches for —
``add_documents(ids=…)``, ``delete(ids)``, ``get_by_ids``, ``similarity_search(_with_score)(filter=…)``,
``max_marginal_relevance_search``, ``as_retriever(search_type=…, search_kwargs=…)``, the async twins, and
``langchain_core.indexing.index()`` with a record manager — while the records live in a backend of the package
(:class:`~langchain_ragspine.backends.base.StoreBackend`), versioned by document, so every write is a new document
version and a crash leaves the previous one intact:

* a store directory (the one ``ragspine ingest`` writes): ``RagSpineVectorStore("store/", embedding)`` opens
  :class:`~langchain_ragspine.backends.directory.backend.DirectoryBackend` — the versioned SQLite chunk store,
  searched through in-memory indexes brought up to date with every write (any process's);
* PostgreSQL with pgvector: ``RagSpineVectorStore(PostgresBackend(url, embedding))``, or
  :class:`~langchain_ragspine.vectorstores.postgres.PostgresVectorStore` ``(url, embedding)`` — BM25 over postings
  and pgvector in SQL (:mod:`langchain_ragspine.backends.postgres.backend`).

Everything below holds on both (``tests/integration_tests/postgres/test_postgres_parity.py``: the same corpus gives
the same documents and scores; the langchain-tests suite runs on both); a feature a backend lacks is refused by
name (:func:`~langchain_ragspine.backends.base.refuse`, the backend's ``unsupported``).

Identity: a record's id is its ``chunk_id`` — the ``ids`` given to ``add_documents``, else ``Document.id``, else
``metadata["chunk_id"]``, else a new UUID4.  Every returned ``Document`` has ``id`` = that id.  A record belongs to
the document ``metadata["doc_id"]`` (a non-empty string), else to a document of its own; a write re-versions each
document it touches (its other chunks kept, a record with a known id replaced in place, one moved to another
``doc_id`` removed from its old document).  Records written through this face come back with exactly the
``page_content`` and ``metadata`` they were added with (the lineage keys a chunk row needs are stored beside them
and removed on the way out: :func:`~langchain_ragspine.backends.versioning.mark_record`); chunks written by
``ragspine ingest`` come back as :meth:`~langchain_ragspine.backends.versioning.StoredChunk.to_document` gives them
(full lineage).

Search types: ``similarity`` (dense cosine, LangChain's meaning), ``mmr`` (Carbonell & Goldstein, "The Use of MMR,
Diversity-Based Reranking for Reordering Documents and Producing Summaries", SIGIR 1998, over the dense channel,
via ``langchain_core``'s ``maximal_marginal_relevance``), ``similarity_score_threshold``, ``bm25`` and ``hybrid``
(BM25 + dense fused by :class:`~langchain_ragspine.retrievers.HybridRetriever`; :meth:`as_retriever`'s default, so
an app that only calls ``vectorstore.as_retriever()`` gets the package's retrieval).  ``bm25`` / ``hybrid`` results
carry ``metadata["scores"]`` like every retriever of the package; the LangChain search types return the stored
metadata untouched (scores come as tuples from the ``*_with_score`` methods).  The relevance score (LangChain's
``similarity_search_with_relevance_scores``, the ``score_threshold`` of ``similarity``) is the cosine similarity
clipped to [0, 1] — LangChain's cosine relevance ``1 - cosine_distance`` wherever that is non-negative — on every
backend.

Filters (``filter=``) are the package's metadata filters (:mod:`langchain_ragspine.filters`, a dict), applied
before scoring in every search type and failing closed (a missing field never matches; a malformed filter raises;
a callable raises ``TypeError``), compiled by the backend (row masks in memory, SQL in PostgreSQL).  A filter sees,
on every backend, a record's metadata and its lineage
(:func:`~langchain_ragspine.backends.versioning.filter_metadata`): ``doc_id`` (its document), ``chunk_id``,
``doc_version``, ``ingested_at`` and ``valid_as_of`` (where the metadata has no key of that name) — so
``filter={"doc_id": "handbook"}`` or ``{"ingested_at": {"gte": "2026-01-01"}}`` works though a returned record
carries only the metadata written; the bookkeeping key ``_ragspine_record`` is refused as a filter field.  A retriever's
own filter scopes every call: ``as_retriever(search_kwargs={"filter": F}).invoke(q, filter=G)`` searches
``F AND G`` and ``filter=None`` keeps ``F``, in every search type (LangChain's ``VectorStoreRetriever`` lets the
call's filter replace the retriever's).
RESTRICTED records (:mod:`langchain_ragspine.sensitivity`) may be stored but are never returned — not by a search
and not by ``get_by_ids``: every exit (each search type, ``get_by_ids``, the retriever of
:meth:`RagSpineVectorStore.as_retriever`) passes the RESTRICTED gate.  Every returned ``Document`` is a fresh copy,
so editing one changes nothing in the store.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import threading
import uuid
import warnings
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig

from langchain_ragspine._stacklevel import user_stacklevel
from langchain_ragspine.arguments import DEFAULT_K, check_arguments, check_k, rename_arguments
from langchain_ragspine.backends.base import MMR, SearchBackend, StoreBackend, refuse
from langchain_ragspine.backends.directory.backend import (
    CacheNotWrittenWarning,
    ChunkStoreBackend,
    DirectoryBackend,
    RecordBackend,
)
from langchain_ragspine.backends.directory.indexes import IndexSnapshot, internal_record
from langchain_ragspine.backends.open import PostgresLocation, open_backend
from langchain_ragspine.backends.versioning import VECTORSTORE_RECORD_KEY
from langchain_ragspine.documents import (
    bm25_threshold,
    check_bm25_query,
    check_score_threshold,
    copy_metadata,
    with_scores,
)
from langchain_ragspine.embeddings.cache import model_key_for
from langchain_ragspine.filters import CompiledFilter, compiled_filter
from langchain_ragspine.retrievers.base import (
    AsyncCall,
    ContractRetriever,
    RetrieverCall,
    SyncCall,
    check_query,
)
from langchain_ragspine.retrievers.contract import gated_exit
from langchain_ragspine.retrievers.embed_as import (
    BY_VECTOR_SEARCH_TYPES,
    EMBED_AS_OPTION,
    EmbedAs,
    aembed_search_text,
    asearch_as_document,
    check_embed_as,
    embed_as_options,
    embed_search_text,
    search_as_document,
    warn_embed_as_ignored,
)
from langchain_ragspine.retrievers.hybrid import HybridRetriever
from langchain_ragspine.sensitivity import drop_restricted, drop_restricted_pairs
from langchain_ragspine.vectorstores.base import (
    SEARCH_KWARGS,
    MarginalRelevanceStore,
    ScopedVectorStoreRetriever,
    all_or_nothing,
    as_ids,
    as_list,
    check_records,
    check_search_type_kwargs,
)

__all__ = [
    "CacheNotWrittenWarning",
    "ChunkStoreBackend",
    "RagSpineStoreRetriever",
    "RagSpineVectorStore",
    "RecordBackend",
]

# the search keywords besides k and filter (a retriever's search_kwargs, passed along by LangChain's
# VectorStoreRetriever): each search method takes the ones its search type uses and refuses the others by name
# (check_search_type_kwargs; LangChain's stores silently ignore them)
_PASSED_ALONG = tuple(name for name in SEARCH_KWARGS if name not in ("k", "filter"))
#: The scale of ``score_threshold`` in the ``similarity`` search type (LangChain's relevance score).
RELEVANCE_SCALE = "the relevance score: the cosine similarity clipped to [0, 1]"
#: The scale of ``score_threshold`` in the ``hybrid`` search type.
HYBRID_SCALE = "the hybrid's two_stage fused score, in [0, 1], relative to the query's candidates"


# the named parameters, listed so that a misspelling of one gets a did-you-mean
_NAMED = ("k", "filter")


# ------------------------------------------------------------------------------------------------ the search
def _copy(doc: Document, **extra: Any) -> Document:
    """A copy of a stored record to return (its own metadata dict, ``extra`` keys added), so that a caller editing
    a result cannot change the store's indexes."""
    return Document(page_content=doc.page_content, metadata={**copy_metadata(doc.metadata), **extra}, id=doc.id)


def _check_filter(filter: Any) -> CompiledFilter | None:
    """``filter`` validated and compiled once (the search hands the result on)."""
    if filter is not None and not isinstance(filter, Mapping):
        raise TypeError(
            f"filter must be a metadata filter dict (langchain_ragspine.filters syntax, e.g. {{'dept': 'a'}}), got "
            f"{type(filter).__name__}; a callable filter is not supported (filters fail closed)"
        )
    compiled = compiled_filter(filter)
    if compiled is not None and VECTORSTORE_RECORD_KEY in compiled.fields:
        raise ValueError(f"filter field {VECTORSTORE_RECORD_KEY!r} is reserved (the vector store's bookkeeping)")
    return compiled


def _search_kwargs(owner: str, kwargs: Mapping[str, Any], search_type: str) -> dict[str, Any]:
    """A ``search_type`` search's further keywords: ``candidate_k`` (the old name of ``fetch_k``, deprecated)
    renamed, then each one checked (an unknown keyword is a ``TypeError`` with a did-you-mean, one the search type
    does not use a ``ValueError``: :func:`~langchain_ragspine.vectorstores.base.check_search_type_kwargs`)."""
    kwargs = rename_arguments(owner, kwargs, ["candidate_k"])
    check_arguments(owner, kwargs, (*_PASSED_ALONG, *_NAMED))
    check_search_type_kwargs(search_type, kwargs)
    return kwargs


class _SearchBM25(ContractRetriever):
    """The BM25 channel of one :class:`~langchain_ragspine.backends.base.SearchBackend` (what
    :class:`HybridRetriever` fuses for the ``hybrid`` search type); each hit's record is kept in ``records`` (by
    id), the channel returns it as fusion sees it (``chunk_id`` = the record id).  ``filter``: the search's filter,
    applied by the backend before scoring (on the metadata a filter sees there, lineage included:
    :func:`~langchain_ragspine.backends.versioning.filter_metadata`), so the hybrid is given none of its own to
    apply again to the returned records, which lack that lineage."""

    search: Any
    records: Any
    filter: Any = None
    k: int = DEFAULT_K
    call_options: ClassVar[tuple[str, ...]] = ("score_threshold",)

    def _retrieve(self, query: str, call: SyncCall) -> list[Document]:
        k = self.k if call.k is None else check_k(call.k)
        threshold = bm25_threshold(None, call.options.get("score_threshold"))
        check_bm25_query(query)
        if not query.strip():
            return []
        hits = self.search.lexical_search(query, k, _check_filter(call.filter), score_threshold=threshold)
        self.records.update((str(d.id), d) for d, _ in hits)
        return [with_scores(internal_record(d), bm25=s, fused=s) for d, s in hits]


class _SearchDense(ContractRetriever):
    """The dense channel of one search backend (``embed_as`` as :class:`DenseRetriever` takes it); records kept
    as :class:`_SearchBM25` keeps them."""

    search: Any
    records: Any
    embedding: Embeddings
    filter: Any = None
    k: int = DEFAULT_K
    call_options: ClassVar[tuple[str, ...]] = (EMBED_AS_OPTION,)

    def _prepare(self, query: str, call: RetrieverCall[Any]) -> tuple[int, Mapping[str, Any] | None, EmbedAs] | None:
        k = self.k if call.k is None else check_k(call.k)
        flt = _check_filter(call.filter)
        embed_as = check_embed_as(call.options.get(EMBED_AS_OPTION))
        if not query.strip() or not _has_vectors(self.search):
            return None  # nothing to search: the query is not embedded
        return k, flt, embed_as

    def _hits(self, vector: Sequence[float], k: int, flt: Mapping[str, Any] | None) -> list[Document]:
        hits = self.search.vector_search(np.asarray(vector, dtype=np.float32), k, flt)
        self.records.update((str(d.id), d) for d, _ in hits)
        return [with_scores(internal_record(d), vector=s, fused=s) for d, s in hits]

    def _retrieve(self, query: str, call: SyncCall) -> list[Document]:
        prepared = self._prepare(query, call)
        if prepared is None:
            return []
        k, flt, embed_as = prepared
        return self._hits(embed_search_text(self.embedding, query, embed_as), k, flt)

    async def _aretrieve(self, query: str, call: AsyncCall) -> list[Document]:
        prepared = self._prepare(query, call)
        if prepared is None:
            return []
        k, flt, embed_as = prepared
        return self._hits(await aembed_search_text(self.embedding, query, embed_as), k, flt)


def _has_vectors(search: SearchBackend) -> bool:
    """Whether a vector search of ``search`` can find anything (a backend that cannot tell: ``True``)."""
    has = getattr(search, "has_vectors", None)
    return True if has is None else bool(has())


def _remove_temporary(backend: StoreBackend, root: Path) -> None:
    """Close a temporary store's connection and delete its directory (a ``weakref.finalize`` callback)."""
    with contextlib.suppress(Exception):
        backend.close()
    shutil.rmtree(root, ignore_errors=True)


class RagSpineVectorStore(MarginalRelevanceStore):
    """LangChain ``VectorStore`` over any backend of the package (see the module docstring).

    ``RagSpineVectorStore(store_dir, embedding)`` opens (or creates) a store directory;
    ``RagSpineVectorStore(backend)`` runs over a :class:`~langchain_ragspine.backends.base.StoreBackend` (e.g.
    :class:`~langchain_ragspine.backends.postgres.backend.PostgresBackend`; its ``embedding`` is the store's);
    ``RagSpineVectorStore(embedding=embedding)`` — or ``RagSpineVectorStore(embedding)``, or :meth:`from_texts` /
    ``from_documents`` without ``store_dir=`` — works in a **temporary store**, as ``InMemoryVectorStore``,
    ``FAISS.from_texts`` and an ephemeral ``Chroma`` do: a new directory made by :func:`tempfile.mkdtemp` (under
    :func:`tempfile.gettempdir`, named ``ragspine-vectorstore-…``; :attr:`store_dir` says where), removed with
    everything in it when the store is closed (:meth:`close`), garbage-collected or the interpreter exits.  It is
    not persistent: to keep the records, pass ``store_dir=`` (a directory that ``ragspine search`` /
    :func:`~langchain_ragspine.pipeline.sources.open_retriever` can open later, and a later ``RagSpineVectorStore`` reopens
    as it was).

    Args:
        store_dir: a store directory (created when missing; ``ragspine ingest``'s output works as is), a
            :class:`~langchain_ragspine.backends.base.StoreBackend` — e.g. a custom record source
            (:class:`RecordBackend`) as ``DirectoryBackend(records, embedding)``, indexed in memory as the
            directory store's records are (passing the record source itself is deprecated) — or ``None``
            (default): a temporary store (see above).
        embedding: the dense channel's model (any ``Embeddings``; required, by keyword or — with no ``store_dir``
            — as the only positional argument; with a ``StoreBackend``, the backend's own by default, and another
            model is refused).  A store records the model its vectors were made with (its first write that
            stores vectors, and every ``ragspine ingest --embedding …``, which re-embeds and so switches it);
            opening it with another model is a ``StoreError`` naming both, on every backend
            (:func:`~langchain_ragspine.backends.base.check_vector_model`) — never a silent re-embedding.
        tokenizer: the BM25 tokenizer of the directory store's indexes (default ``"auto"``).
        index_kind: the FAISS index kind of the directory store's main dense segment (default ``"auto"``; the small
            segments of recent writes are always exact).  ``tokenizer``, ``index_kind`` and ``lock_timeout`` are
            not used with a ``StoreBackend`` (it was opened with its own).
        lock_timeout: seconds a write waits for another writer of the store directory (an ``ingest``, another
            vector store) to finish (:class:`ChunkStoreBackend`); ``None`` (default): as long as it takes, ``0``: not
            at all.  Searches never wait.

    Writes: each ``add_documents`` / ``add_texts`` / ``delete`` call is atomic — every document version it writes,
    or none: a failure part way (disk full; a chunk id that is another document's, a ``ValueError``) leaves the
    store exactly as before, and a failed write is a :class:`~langchain_ragspine.errors.StoreError` saying so.  A call is checked whole before anything is written:
    an id given twice, or a NaN metadata value (NaN never equals itself, so no filter could match it; infinities
    are kept and compare as numbers), is a ``ValueError`` naming the id, the field and the position in the call.
    The versions it writes are recorded as the vector store's (writer ``"vectorstore"``): ``ragspine ingest`` of a
    corpus into the same directory never retracts them.

    Indexes: kept in memory (:mod:`~langchain_ragspine.backends.directory.indexes`) and brought up to the store's
    state before every search.  A write — by this object or by another process — is applied as a small segment
    holding only the documents it touched (read through the chunk store's change feed, tokenized and embedded
    alone), searched beside the others with the scores one index over the same records gives; segments are
    merged now and then.  A store replaced under the directory, or changed in ways the feed does not describe,
    is read again whole.

    Raises:
        StoreError: ``store_dir`` cannot be a store directory; the store's vectors were made with another model.
        TypeError: ``embedding`` is missing or not an ``Embeddings``.
        ValueError: an unknown ``tokenizer`` or ``index_kind``; an ``embedding`` of another model than the given
            ``StoreBackend``'s.

    Example:
        >>> from langchain_ragspine.embeddings import HashingEmbeddings
        >>> store = RagSpineVectorStore.from_texts(["梅雨は六月から七月の雨季。", "北京是中国的首都。"],
        ...                                        HashingEmbeddings(256), [{"dept": "a"}, {"dept": "b"}],
        ...                                        ids=["tsuyu", "beijing"])
        >>> store.temporary, store.store_dir.name.startswith("ragspine-vectorstore-")
        (True, True)
        >>> [d.id for d in store.similarity_search("梅雨の季節", k=1, filter={"dept": "a"})]
        ['tsuyu']
        >>> [d.id for d in store.as_retriever(search_kwargs={"k": 1}).invoke("北京")]  # hybrid by default
        ['beijing']
        >>> where = store.store_dir
        >>> store.close()  # a temporary store is deleted
        >>> where.exists()
        False
    """

    #: The search type of :meth:`as_retriever` when none is given.
    default_search_type: ClassVar[str] = "hybrid"

    def __init__(
        self,
        store_dir: str | os.PathLike[str] | StoreBackend | Embeddings | None = None,
        embedding: Embeddings | None = None,
        *,
        tokenizer: str = "auto",
        index_kind: str = "auto",
        lock_timeout: float | None = None,
    ) -> None:
        if isinstance(store_dir, Embeddings):
            if embedding is not None:
                raise TypeError(
                    f"{type(self).__name__} got an Embeddings as store_dir and embedding= too: pass "
                    f"{type(self).__name__}(store_dir, embedding), or {type(self).__name__}(embedding=...) for a "
                    "temporary store"
                )
            store_dir, embedding = None, store_dir
        if isinstance(store_dir, StoreBackend):
            own = store_dir.embedding
            if embedding is None:
                embedding = own
            elif embedding is not own and model_key_for(embedding) != model_key_for(own):
                raise ValueError(
                    f"{type(self).__name__}: embedding {model_key_for(embedding)} is not the backend's model "
                    f"{model_key_for(own)}; pass the backend's (or none)"
                )
        if embedding is None:
            raise TypeError(
                f"{type(self).__name__} needs embedding= (a langchain_core Embeddings, e.g. "
                "langchain_ragspine.embeddings.HashingEmbeddings(256) offline)"
            )
        if not isinstance(embedding, Embeddings):
            raise TypeError(f"embedding must be a langchain_core Embeddings, got {type(embedding).__name__}")
        self._temporary: Path | None = None
        self._finalizer: weakref.finalize[Any, Any] | None = None
        backend: StoreBackend
        if isinstance(store_dir, StoreBackend):
            backend = store_dir
        elif isinstance(store_dir, RecordBackend):  # the old second route: one release, then a TypeError
            warnings.warn(
                f"{type(self).__name__}(records, embedding) with a RecordBackend is deprecated and goes in the next "
                f"release: pass {type(self).__name__}(DirectoryBackend(records, embedding)) (from "
                "langchain_ragspine.backends.directory.backend), a StoreBackend like any other",
                DeprecationWarning, stacklevel=user_stacklevel(),
            )
            backend = DirectoryBackend(store_dir, embedding, tokenizer=tokenizer, index_kind=index_kind)
        elif store_dir is None:
            DirectoryBackend.check_options(embedding, tokenizer, index_kind)  # before a directory is made
            self._temporary = Path(tempfile.mkdtemp(prefix="ragspine-vectorstore-"))
            try:
                backend = DirectoryBackend.open(self._temporary, embedding, tokenizer=tokenizer,
                                                index_kind=index_kind, lock_timeout=lock_timeout)
            except BaseException:
                shutil.rmtree(self._temporary, ignore_errors=True)
                raise
            # removed on close(), when garbage-collected, or at interpreter exit, whichever comes first
            self._finalizer = weakref.finalize(self, _remove_temporary, backend, self._temporary)
        elif not isinstance(store_dir, (str, os.PathLike)):
            raise TypeError(
                f"{type(self).__name__}: store_dir must be a store directory (str or path), a postgresql:// URL, a "
                f"StoreBackend, an Embeddings (a temporary store) or None, got {type(store_dir).__name__}"
            )
        elif isinstance(open_backend(store_dir), PostgresLocation):  # a URL of another scheme raises there
            backend = self._postgres_backend(str(store_dir), embedding, tokenizer, index_kind, lock_timeout)
        else:
            backend = DirectoryBackend.open(store_dir, embedding, tokenizer=tokenizer, index_kind=index_kind,
                                            lock_timeout=lock_timeout)
        self.backend = backend
        self.embedding = embedding
        self.tokenizer = tokenizer
        self.index_kind = index_kind
        self._lock = threading.RLock()

    @staticmethod
    def _postgres_backend(
        url: str, embedding: Embeddings | None, tokenizer: str, index_kind: str, lock_timeout: float | None
    ) -> StoreBackend:
        """The PostgreSQL backend of a ``postgresql://`` ``store_dir`` (as :class:`PostgresVectorStore` opens it).

        Raises:
            ValueError: ``tokenizer`` or ``index_kind`` other than ``"auto"``: a PostgreSQL store has its own (its
                postings' tokenizer, pgvector's HNSW), so they would be ignored.
        """
        from langchain_ragspine.backends.postgres.backend import PostgresBackend

        given = [f"{name}={value!r}" for name, value in (("tokenizer", tokenizer), ("index_kind", index_kind))
                 if value != "auto"]
        if given:
            raise ValueError(f"RagSpineVectorStore over a postgresql:// store takes no {' or '.join(given)}: the "
                             "store's own tokenizer and pgvector's index serve it")
        return PostgresBackend(url, embedding, lock_timeout=lock_timeout)  # type: ignore[arg-type]

    @property
    def embeddings(self) -> Embeddings:
        """The embedding model (LangChain's attribute name)."""
        return self.embedding

    @property
    def store_dir(self) -> Path | None:
        """The store directory (for a temporary store, the one made for it); ``None`` over another backend."""
        root = getattr(self.backend, "root", None)
        return root if isinstance(root, Path) else None

    @property
    def temporary(self) -> bool:
        """Whether this is a temporary store (deleted on :meth:`close`; see the class docstring)."""
        return self._temporary is not None

    def close(self) -> None:
        """Close the backend's connection; a temporary store's directory is deleted (idempotent)."""
        if self._finalizer is not None:
            self._finalizer()  # closes the backend, then removes the directory (once)
        else:
            self.backend.close()

    def _current(self) -> IndexSnapshot:
        """The directory backend's indexes now (:meth:`DirectoryBackend.current`).

        Raises:
            TypeError: over another backend.
        """
        current = getattr(self.backend, "current", None)
        if current is None:
            raise TypeError(f"{type(self.backend).__name__} keeps no in-memory indexes")
        snapshot: IndexSnapshot = current()
        return snapshot

    # -- writing ------------------------------------------------------------------------------------------------
    def add_documents(self, documents: list[Document], **kwargs: Any) -> list[str]:
        """Add or replace ``documents``; returns their ids (see the module docstring for how an id is chosen).

        Keyword args: ``ids`` (one per document; precedence over ``Document.id``); ``batch_size`` (accepted for
        ``langchain_core.indexing.index()``; the call is one transaction anyway).  ``documents`` are not modified.
        The call is one new store version, all or nothing (see the class docstring).

        Raises:
            TypeError: ``documents`` or ``ids`` a single ``str`` / ``bytes``, ``None`` or not a list
                (:func:`~langchain_ragspine.vectorstores.base.as_list`); an unknown keyword argument; an element
                that is not a ``Document`` (its index named); a metadata value that is not JSON-serialisable.
            ValueError: ``ids`` of another length than ``documents``; an id given twice, or a NaN metadata
                value (:func:`~langchain_ragspine.vectorstores.base.check_records`: id, field and index
                named); the reserved metadata key is used.  Nothing is written.
            StoreError: the write failed (disk full, …): nothing was written, and the message says so;
                :class:`~langchain_ragspine.backends.directory.lock.StoreBusyError`: another writer held the store directory
                longer than ``lock_timeout``.
        """
        check_arguments(f"{type(self).__name__}.add_documents", kwargs, ("ids", "batch_size"))
        docs = as_list(documents, "documents", "add_documents")
        for i, doc in enumerate(docs):
            if not isinstance(doc, Document):
                raise TypeError(
                    f"add_documents: documents[{i}] must be a langchain_core Document, got {type(doc).__name__} "
                    f"{doc!r:.60}; for plain strings use add_texts"
                )
        ids = kwargs.get("ids")
        ids = None if ids is None else as_ids(ids, "add_documents", missing=True)
        if ids is not None and len(ids) != len(docs):
            raise ValueError(f"add_documents got {len(docs)} documents and {len(ids)} ids")
        out: list[Document] = []
        for i, doc in enumerate(docs):
            rid = ids[i] if ids is not None and ids[i] else doc.id or doc.metadata.get("chunk_id") or uuid.uuid4().hex
            out.append(Document(page_content=doc.page_content, metadata=dict(doc.metadata), id=str(rid)))
        check_records([str(d.id) for d in out], out, "add_documents")
        with self._lock, all_or_nothing("add_documents", self.backend.where):
            self.backend.upsert(out)
        return [str(d.id) for d in out]

    async def aadd_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        return await asyncio.to_thread(self.add_texts, texts, metadatas, ids=ids, **kwargs)

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Remove the records with these ids (unknown ids are ignored); returns ``True``.  All or nothing, as
        :meth:`add_documents`.

        Raises:
            ValueError: ``ids`` is ``None`` (deleting everything needs the ids: nothing is removed by accident).
            TypeError: an unknown keyword argument; ``ids`` a single ``str`` / ``bytes`` or not a list.
            StoreError: the write failed: nothing was removed, and the message says so.
        """
        check_arguments(f"{type(self).__name__}.delete", kwargs, ())
        if ids is None:
            raise ValueError("delete() needs the ids to remove (get them from add_documents or get_by_ids)")
        wanted = as_ids(ids, "delete")
        with self._lock, all_or_nothing("delete", self.backend.where):
            self.backend.delete(wanted)
        return True

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The records with these ids, in the order of ``ids`` (unknown and RESTRICTED ones are left out).

        Raises:
            TypeError: ``ids`` a single ``str`` / ``bytes`` or not a list (:func:`~langchain_ragspine.vectorstores.base.as_list`).
        """
        wanted = as_ids(ids, "get_by_ids")
        return drop_restricted(_copy(d) for d in self.backend.get_by_ids(wanted))

    async def aget_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        return await asyncio.to_thread(self.get_by_ids, ids)

    async def aadd_documents(self, documents: list[Document], **kwargs: Any) -> list[str]:
        return await asyncio.to_thread(self.add_documents, documents, **kwargs)

    async def adelete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        return await asyncio.to_thread(self.delete, ids, **kwargs)

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings,
        metadatas: list[dict[Any, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> RagSpineVectorStore:
        """A store holding ``texts``: at ``store_dir=`` when given, else a temporary store (deleted on
        :meth:`close`, see the class docstring), like ``InMemoryVectorStore.from_texts`` / ``FAISS.from_texts``.
        Other keywords as the constructor (``tokenizer``, ``index_kind``, ``lock_timeout``).  LangChain's
        ``from_documents`` comes here too.

        Raises:
            TypeError: an unknown keyword argument (with a did-you-mean).
        """
        check_arguments(f"{cls.__name__}.from_texts", kwargs, ("store_dir", "tokenizer", "index_kind", "lock_timeout"))
        store = cls(kwargs.pop("store_dir", None), embedding, **kwargs)
        try:
            store.add_texts(texts, metadatas, ids=ids)
        except BaseException:
            store.close()  # a temporary store made for nothing is removed at once
            raise
        return store

    # -- searching ----------------------------------------------------------------------------------------------
    def _query(self, query: Any, name: str) -> str:
        """``query`` if it is a string, else the package's one-line ``TypeError`` naming ``name``."""
        return check_query(type(self).__name__, query, name)

    def _dense_hits(
        self, vector: Sequence[float] | None, k: int, filter: Any, kwargs: Mapping[str, Any], name: str
    ) -> list[tuple[Document, float]]:
        """The top ``k`` records for a query ``vector`` (``None``: an empty query, no results) whose relevance
        (:meth:`_select_relevance_score_fn`) is at least ``kwargs["score_threshold"]`` when given, gated."""
        _search_kwargs(f"{type(self).__name__}.{name}", kwargs, "similarity")
        k = check_k(k)
        threshold = check_score_threshold(kwargs.get("score_threshold"), maximum=1.0, scale=RELEVANCE_SCALE)
        flt = _check_filter(filter)
        if vector is None:
            return []
        hits = self.backend.search().vector_search(np.asarray(vector, dtype=np.float32), k, flt)
        if threshold is not None:
            relevance = self._select_relevance_score_fn()
            hits = [(d, s) for d, s in hits if relevance(s) >= threshold]
        found = [(_copy(d), s) for d, s in hits]
        return drop_restricted_pairs(found)  # the gate at this exit

    def similarity_search_with_score(
        self, query: str, k: int = DEFAULT_K, filter: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """Top ``k`` records by cosine similarity to ``query`` (dense channel), best first, with the cosine.  An
        empty or whitespace-only query returns ``[]`` (as the ``hybrid`` and ``bm25`` search types do).
        ``score_threshold`` keeps the records whose relevance score (the cosine clipped to [0, 1], as
        ``similarity_search_with_relevance_scores`` gives it) is at least it — so ``as_retriever(search_type=
        "similarity", search_kwargs={"score_threshold": 0.3})`` honours it as ``"similarity_score_threshold"``
        does.

        Raises:
            TypeError: a query that is not a string; an unknown keyword argument (``fetch_k`` and ``lambda_mult``
                are accepted and ignored, as LangChain passes them along; ``candidate_k``, the old name of
                ``fetch_k``, with a ``DeprecationWarning``); a non-dict ``filter``;
                a ``score_threshold`` that is not a number.
            ValueError: ``k < 1``; a malformed filter; a ``score_threshold`` outside [0, 1].
        """
        query = self._query(query, "similarity_search")
        check_score_threshold(kwargs.get("score_threshold"), maximum=1.0, scale=RELEVANCE_SCALE)  # before embedding
        vector = self.embedding.embed_query(query) if query.strip() else None
        return self._dense_hits(vector, k, filter, kwargs, "similarity_search")

    async def asimilarity_search_with_score(
        self, query: str, k: int = DEFAULT_K, filter: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        query = self._query(query, "similarity_search")
        check_score_threshold(kwargs.get("score_threshold"), maximum=1.0, scale=RELEVANCE_SCALE)
        vector = await self.embedding.aembed_query(query) if query.strip() else None
        return await asyncio.to_thread(self._dense_hits, vector, k, filter, kwargs, "similarity_search")

    def similarity_search(
        self, query: str, k: int = DEFAULT_K, filter: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        """:meth:`similarity_search_with_score` without the scores."""
        return [d for d, _ in self.similarity_search_with_score(query, k, filter, **kwargs)]

    async def asimilarity_search(
        self, query: str, k: int = DEFAULT_K, filter: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        return [d for d, _ in await self.asimilarity_search_with_score(query, k, filter, **kwargs)]

    def similarity_search_by_vector(
        self, embedding: list[float], k: int = DEFAULT_K, filter: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        """Top ``k`` records by cosine similarity to a query vector (shape ``(d,)``); ``score_threshold`` as in
        :meth:`similarity_search_with_score`."""
        return [d for d, _ in self._dense_hits(embedding, k, filter, kwargs, "similarity_search_by_vector")]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        """Relevance in [0, 1] is the cosine similarity, negative cosines clipped to 0 — on every backend (LangChain's
        cosine relevance ``1 - cosine_distance`` wherever that is non-negative)."""
        return lambda score: min(1.0, max(0.0, score))

    def _check_search_arguments(self, name: str, kwargs: Mapping[str, Any], filter: Any) -> Mapping[str, Any] | None:
        """The keywords LangChain passes along are taken (``fetch_k``, ``lambda_mult``); a filter
        must be a dict (:func:`_check_filter`).  MMR refuses a ``score_threshold`` (it ranks by no relevance score).
        """
        _search_kwargs(f"{type(self).__name__}.{name}", kwargs, "mmr")
        refuse(self.backend, MMR)
        return _check_filter(filter)

    def _mmr_candidates(
        self, vector: np.ndarray, n: int, filter: Mapping[str, Any] | None
    ) -> list[tuple[Document, np.ndarray]]:
        """The dense channel's top ``n`` records with their stored vectors (copies of the stored records)."""
        return [(_copy(d), v) for d, _, v in self.backend.search().vector_search_with_vectors(vector, n, filter)]

    def _fused(self, channel: str, query: str, k: int, filter: Any, kwargs: Mapping[str, Any]) -> list[Document]:
        query = self._query(query, f"{channel}_search")
        kwargs = dict(kwargs)
        embed_as = kwargs.pop(EMBED_AS_OPTION, None) if channel == "hybrid" else None
        kwargs = _search_kwargs(f"{type(self).__name__}.{channel}_search", kwargs, channel)
        k = check_k(k)
        flt = _check_filter(filter)
        threshold = kwargs.get("score_threshold")
        records: dict[str, Document] = {}  # the channels' hits by id, as the backend returned them
        if channel == "bm25":
            bm25_threshold(None, threshold)  # checked before the backend is touched
            search = self.backend.search()
            found = _SearchBM25(search=search, records=records, k=k).invoke(query, k=k, filter=flt,
                                                                             score_threshold=threshold)
        else:
            # fetch_k as given: 0 is an error like -1, not the default
            depth = check_k(kwargs["fetch_k"], "fetch_k") if kwargs.get("fetch_k") is not None else 50
            check_score_threshold(threshold, maximum=1.0, scale=HYBRID_SCALE)  # before the backend is touched
            search = self.backend.search()
            # each channel searches with the filter in the backend (see _SearchBM25)
            channels: list[BaseRetriever] = [
                _SearchBM25(search=search, records=records, filter=flt),
                _SearchDense(search=search, records=records, embedding=self.embedding, filter=flt),
            ]
            hybrid = HybridRetriever(retrievers=channels, k=k, fetch_k=depth, score_threshold=threshold)
            found = hybrid.invoke(query, k=k, **embed_as_options({EMBED_AS_OPTION: embed_as}))
        # the record as stored, with the channel scores; id = the record id (its chunk_id)
        out = [_copy(records[str(d.id)], scores=d.metadata["scores"]) for d in found if str(d.id) in records]
        return drop_restricted(out)

    def hybrid_search(
        self, query: str, k: int = DEFAULT_K, filter: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        """Top ``k`` records of BM25 + dense fused by :class:`HybridRetriever` (its default fusion); ``fetch_k``
        (default 50) candidates per channel.  Results carry ``metadata["scores"]``.  ``embed_as="document"``
        embeds the query for the dense channel with ``embed_documents`` (HyDE's hypothetical document).
        ``score_threshold`` drops results whose fused score (``metadata["scores"]["fused"]``, in [0, 1]: relative
        to the query's candidates, see :class:`HybridRetriever`) is below it.

        Raises:
            TypeError, ValueError: bad ``k`` / ``fetch_k`` / ``filter`` / ``score_threshold`` (outside [0, 1]), or
                an unknown keyword.
        """
        return self._fused("hybrid", query, k, filter, kwargs)

    def bm25_search(
        self, query: str, k: int = DEFAULT_K, filter: Mapping[str, Any] | None = None, **kwargs: Any
    ) -> list[Document]:
        """Top ``k`` records by BM25 (records sharing no term with the query are not returned); results carry
        ``metadata["scores"]``.  ``score_threshold`` drops results whose raw BM25 score is below it (``>= 0``,
        unbounded and corpus-dependent, as :class:`BM25Retriever`'s).

        Raises:
            TypeError, ValueError: bad ``k`` / ``filter`` / ``score_threshold`` (negative or not finite), an unknown
                keyword, a query longer than :data:`~langchain_ragspine.retrievers.bm25.MAX_QUERY_CHARS`.
        """
        return self._fused("bm25", query, k, filter, kwargs)

    def search(self, query: str, search_type: str, **kwargs: Any) -> list[Document]:
        """LangChain's ``search`` with two more search types: ``"hybrid"`` and ``"bm25"``.

        Raises:
            ValueError: another ``search_type``; the message lists the five.
        """
        _check_search_type(search_type)
        if search_type == "hybrid":
            return self.hybrid_search(query, **kwargs)
        if search_type == "bm25":
            return self.bm25_search(query, **kwargs)
        return super().search(query, search_type, **kwargs)

    async def asearch(self, query: str, search_type: str, **kwargs: Any) -> list[Document]:
        _check_search_type(search_type)
        if search_type in ("hybrid", "bm25"):
            return await asyncio.to_thread(self.search, query, search_type, **kwargs)
        return await super().asearch(query, search_type, **kwargs)

    def as_retriever(self, **kwargs: Any) -> RagSpineStoreRetriever:
        """A :class:`RagSpineStoreRetriever`: ``search_type`` (default ``"hybrid"``; also ``"similarity"``,
        ``"mmr"``, ``"similarity_score_threshold"``, ``"bm25"``) and ``search_kwargs`` (``k``, ``filter``,
        ``fetch_k``, ``lambda_mult``, ``score_threshold``); a call's ``filter`` is ANDed with
        ``search_kwargs["filter"]``, never replacing it.

        Raises:
            ValueError: an unknown ``search_type`` (LangChain's check).
            TypeError: an unknown ``search_kwargs`` key or retriever argument, with a did-you-mean.
        """
        tags = kwargs.pop("tags", None) or [*self._get_retriever_tags()]
        search_type = kwargs.setdefault("search_type", self.default_search_type)
        allowed = RagSpineStoreRetriever.allowed_search_types
        if search_type not in allowed:
            raise ValueError(
                f"{type(self).__name__}.as_retriever(search_type={search_type!r}) is not allowed: the search types are "
                f"{', '.join(repr(t) for t in allowed)}"
            )
        if search_type == "mmr":
            refuse(self.backend, MMR)
        return RagSpineStoreRetriever(vectorstore=self, tags=tags, **kwargs)


class RagSpineStoreRetriever(ScopedVectorStoreRetriever):
    """LangChain's ``VectorStoreRetriever`` with the ``"hybrid"`` and ``"bm25"`` search types, and strict
    arguments (:class:`~langchain_ragspine.vectorstores.base.ScopedVectorStoreRetriever`'s): an unknown constructor
    argument, ``search_kwargs`` key or call keyword is a ``TypeError`` with a did-you-mean, and
    ``invoke(query, search_type=…)`` is refused, naming it (the search type is the retriever's).

    ``invoke(query, k=…)`` overrides ``search_kwargs`` for one call, as in LangChain, but a call's ``filter=`` is
    ANDed with ``search_kwargs["filter"]`` and ``filter=None`` keeps it, in every search type
    (:class:`~langchain_ragspine.vectorstores.base.ScopedVectorStoreRetriever`): a call never widens the retriever's
    filter.  A query that is not a string is the package's one-line ``TypeError`` (pointing at ``.batch`` /
    ``itemgetter``).

    ``invoke(query, embed_as="document")`` (the package's call option, passed by HyDE for its hypothetical
    document, see :mod:`~langchain_ragspine.retrievers.embed_as`) embeds the text with ``embed_documents``:
    ``hybrid`` hands it to its dense channel, ``similarity`` and ``mmr`` search by that vector, ``bm25`` embeds
    nothing; ``similarity_score_threshold`` has no by-vector search in LangChain's API and embeds it as a query,
    with an :class:`~langchain_ragspine.retrievers.embed_as.EmbedAsIgnoredWarning`.

    Raises:
        ValueError: an ``embed_as`` other than ``"query"`` / ``"document"``.
    """

    #: ``invoke(query, embed_as=…)`` is taken (see the class docstring).
    call_options: ClassVar[tuple[str, ...]] = (EMBED_AS_OPTION,)

    allowed_search_types: ClassVar[Sequence[str]] = (
        "similarity",
        "similarity_score_threshold",
        "mmr",
        "hybrid",
        "bm25",
    )

    @gated_exit
    def invoke(self, input: str, config: RunnableConfig | None = None, **kwargs: Any) -> list[Document]:
        return super().invoke(check_query(type(self).__name__, input), config, **kwargs)

    @gated_exit
    async def ainvoke(self, input: str, config: RunnableConfig | None = None, **kwargs: Any) -> list[Document]:
        return await super().ainvoke(check_query(type(self).__name__, input), config, **kwargs)

    def _as_document(self, query: str, kwargs: dict[str, Any]) -> bool:
        """Pop ``embed_as`` from ``kwargs``; whether this search embeds ``query`` as a document by vector
        (``hybrid`` gets the option back in ``kwargs``; ``bm25`` embeds nothing)."""
        embed_as = check_embed_as(kwargs.pop(EMBED_AS_OPTION, None))
        if embed_as == "query" or self.search_type == "bm25" or not query.strip():
            return False
        if self.search_type == "hybrid":
            kwargs[EMBED_AS_OPTION] = embed_as
            return False
        if self.search_type in BY_VECTOR_SEARCH_TYPES:
            return True
        warn_embed_as_ignored(self)
        return False

    @gated_exit
    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        if self._as_document(query, kwargs):
            return drop_restricted(search_as_document(self.vectorstore, self.search_type, query,
                                                      self.call_search_kwargs(kwargs)))
        if self.search_type in ("hybrid", "bm25"):
            return drop_restricted(self.vectorstore.search(query, self.search_type, **self.call_search_kwargs(kwargs)))
        return drop_restricted(super()._get_relevant_documents(query, run_manager=run_manager, **kwargs))

    @gated_exit
    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        if self._as_document(query, kwargs):
            docs = await asearch_as_document(self.vectorstore, self.search_type, query, self.call_search_kwargs(kwargs))
        elif self.search_type in ("hybrid", "bm25"):
            docs = await self.vectorstore.asearch(query, self.search_type, **self.call_search_kwargs(kwargs))
        else:
            docs = await super()._aget_relevant_documents(query, run_manager=run_manager, **kwargs)
        return drop_restricted(docs)


def _check_search_type(search_type: object) -> None:
    """Raise ``ValueError`` naming ``search_type`` and the five when it is not one of
    :attr:`RagSpineStoreRetriever.allowed_search_types`
    (LangChain's own check lists only its three, though ``hybrid`` and ``bm25`` work)."""
    allowed = RagSpineStoreRetriever.allowed_search_types
    if search_type not in allowed:
        raise ValueError(f"search_type {search_type!r} is not one of {', '.join(map(repr, allowed))}")
