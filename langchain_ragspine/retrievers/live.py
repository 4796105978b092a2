"""A retriever that follows its store: a relabel, a retraction or any re-ingest takes effect on the next call.

A retriever built from a store directory's saved indexes (:class:`~langchain_ragspine.pipeline.sources.StoreSource`) is a
snapshot: an app that keeps it (``graphs/app.py``, a ``langgraph dev`` server, a notebook) would go on returning
a document after it was relabelled RESTRICTED or deleted and the store re-ingested.  :class:`LiveStoreRetriever`
is what :func:`~langchain_ragspine.pipeline.sources.open_retriever` returns for a store directory instead; it wraps the
snapshot and, on every call (sync and async):

1. **checks the store** — one indexed read of ``meta.generation`` (the counter every write transaction of the
   chunk store bumps, :attr:`~langchain_ragspine.backends.directory.chunk_store.ChunkStore.generation`) over a read-only connection kept
   open, plus a ``stat`` of the chunk store file (another file there — the store directory deleted and ingested
   again, or another store moved into its place, whatever its generation — or another store copied over it in
   place, told by its store id: the connection is reopened and the retriever rebuilt; the rule and the state
   ``(file identity, store id, generation)`` of :mod:`langchain_ragspine.backends.directory.follow`, which the
   vector store follows too)
   and of each watched file (``index.json``, rewritten when an ingest changes the indexes without changing a chunk, e.g.
   ``--contextual`` or a new vector index).  Measured at ~5-50 µs per call on a shared 2-core machine; the async
   path runs it (and any rebuild) in a worker thread, off the event loop.  SQLite in WAL mode lets this read run
   while an ingest writes, and it sees the last committed transaction;
2. **reloads** when any of these changed: the wrapped retriever is built again by the ``factory`` (the same mode,
   ``k`` and options, from the store as it is now: its saved indexes, or their in-memory rebuild when they do not
   match the store yet) and swapped in as one object, so a call is served wholly by the previous retriever or
   wholly by the new one, never a mix.  One reload runs at a time; calls that arrive meanwhile wait for it;
3. **gates the results against the store** — a second line of defence, also for the window between the check and
   the answer: a result is returned only when its id (``chunk_id``, else ``Document.id``) is an active chunk or
   parent of the store *now*, of the same document and version (``metadata["doc_id"]`` /
   ``metadata["doc_version"]``; a row never changes, so that row is exactly what the result was read from and its
   label is the current one).  A result without ``doc_version`` (an index written by an older version) is kept
   only when the active row has its text and is not RESTRICTED.  Anything else — a chunk of a version since
   replaced, relabelled RESTRICTED or retracted, a document that is not a row of this store — is dropped.  The
   lookup is one indexed ``IN (…)`` query per table for the call's results (tens of µs for ten results).

**A reload that fails** (the factory raises: e.g. a ``hybrid`` store whose ingest is still embedding, or a read
error while an index directory is swapped) does not stop the service and does not serve stale results: the
previous retriever keeps answering, every result gated against the current store (so nothing relabelled,
retracted or changed since gets out; a call may then return fewer than ``k``), with a :class:`StoreReloadWarning`
naming the error; the next call tries the reload again.  Only the store itself becoming unreadable (its file
removed, SQLite failing) raises a :class:`~langchain_ragspine.errors.StoreError`.

The wrapper keeps the retriever-call contract of what it wraps: ``invoke(query, k=None, filter=None)`` (``k``
defaults to the wrapper's ``k``; the filter is passed on and ANDed there with the retriever's own), the call
options ``embed_as`` (handed on as every wrapper does, :func:`~langchain_ragspine.retrievers.embed_as.
embed_as_target`) and ``fetch_k`` (passed on: a hybrid retriever takes it, any other refuses it as it would
unwrapped), ``Document.id`` and
scores as the wrapped retriever returns them, and a trace in which the wrapped retriever's run is a child run
tagged ``store-generation:<n>``.  :attr:`LiveStoreRetriever.current` shows the retriever that would answer now
(after the check) — for inspection; searching it directly skips the check and the gate.
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import langchain_core
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables.config import run_in_executor
from pydantic import ConfigDict, PrivateAttr

from langchain_ragspine._stacklevel import user_stacklevel
from langchain_ragspine.arguments import DEFAULT_K, PositiveIntField
from langchain_ragspine.backends.directory.follow import FileStat, FollowedChunkStore, StoreState, file_stat
from langchain_ragspine.documents import chunk_key
from langchain_ragspine.retrievers.base import AsyncCall, ContractRetriever, RetrieverCall, SyncCall
from langchain_ragspine.retrievers.contract import ainvoke_retriever, invoke_retriever
from langchain_ragspine.retrievers.embed_as import EMBED_AS_OPTION, embed_as_options, embed_as_target
from langchain_ragspine.sensitivity import is_restricted
from langchain_ragspine.served import ServedIds

__all__ = ["LiveStoreRetriever", "StoreReloadWarning"]

#: The trace tag of the wrapped retriever's run: ``store-generation:<n>``.
GENERATION_TAG = "store-generation"


class StoreReloadWarning(UserWarning):
    """A :class:`LiveStoreRetriever` saw the store change but could not build the new retriever; the previous one
    keeps answering, its results gated against the current store, and the next call tries again."""


#: What identifies the store's state: ``(chunk store state, stat key of each watched file)`` — the state is the one
#: every follower of a store compares (:class:`~langchain_ragspine.backends.directory.follow.StoreState`: file
#: identity, store id, generation).
_StateKey = tuple[StoreState, tuple[FileStat | None, ...]]


@dataclass(frozen=True)
class _Snapshot:
    """One built retriever and the store state it was built from (replaced whole, never edited)."""

    key: _StateKey
    retriever: BaseRetriever


class LiveStoreRetriever(ContractRetriever):
    """The retriever of a store directory, kept current: it reloads when the store changes and never returns a row
    that is not active in the store at the time of the call (see the module docstring).

    :func:`~langchain_ragspine.pipeline.sources.open_retriever` builds it for a store directory; build one yourself only
    around a retriever factory of your own::

        retriever = open_retriever("store", mode="hybrid", k=6)   # a LiveStoreRetriever
        retriever.invoke("梅雨")                                   # re-ingest the store in between: still current
        retriever.current                                          # the HybridRetriever answering now

    Args:
        chunk_store: the store's ``chunks.sqlite`` (opened read-only and kept open for the check and the gate).
        factory: builds the retriever of the store as it is now (no arguments); called for the first call (or
            :meth:`refresh`, which ``open_retriever`` calls at once, so the first build's errors propagate from it)
            and again after every change of the store.
        k: results per call (default 6, :data:`~langchain_ragspine.arguments.DEFAULT_K`), an ``int >= 1``; ``invoke(query, k=...)`` overrides it.
        watch: further files whose change (device, inode, modification and change time, size) triggers a reload; ``open_retriever``
            watches the store's ``index.json``.  Default: none.

    Raises:
        StoreError: per call, when the chunk store is missing or unreadable (removed, not a chunk store, SQLite
            failing) — never for a failed reload (see the module docstring).
        TypeError / ValueError: a bad ``k`` (on construction); the factory's own errors on the first build.

    Example:
        >>> import tempfile, pathlib
        >>> from langchain_ragspine import ingest, open_retriever
        >>> root = pathlib.Path(tempfile.mkdtemp())
        >>> (root / "c").mkdir()
        >>> _ = (root / "c" / "kyoto.md").write_text("Kyoto has temples.", "utf-8")
        >>> _ = ingest(root / "c", root / "S", progress=False)
        >>> retriever = open_retriever(root / "S", mode="bm25", k=3)
        >>> [d.id for d in retriever.invoke("temples")]
        ['kyoto#0']
        >>> _ = (root / "c" / "kyoto.json").write_text('{"sensitivity": "RESTRICTED"}', "utf-8")
        >>> _ = ingest(root / "c", root / "S", progress=False)   # relabelled; the retriever lives on
        >>> retriever.invoke("temples")
        []
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    #: ``embed_as`` is handed on (as every wrapper does); ``fetch_k`` is passed to a wrapped retriever that
    #: takes it (a hybrid one; any other refuses it, as it would without the wrapper).
    call_options: ClassVar[tuple[str, ...]] = ("fetch_k", EMBED_AS_OPTION)
    #: ``invoke(query, candidate_k=…)``: the old name of ``fetch_k``, for one release.
    renamed_arguments: ClassVar[tuple[str, ...]] = ("candidate_k",)

    chunk_store: Path
    factory: Callable[[], BaseRetriever]
    k: PositiveIntField = DEFAULT_K
    watch: tuple[Path, ...] = ()

    _chunks: FollowedChunkStore = PrivateAttr()
    _snapshot: _Snapshot | None = PrivateAttr(default=None)
    _reload_lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    #: :meth:`served_ids` answers of one store state: ``(state, {id: "served" | "withdrawn" | ""})``.
    _served_memo: tuple[_StateKey, dict[str, str]] | None = PrivateAttr(default=None)

    def model_post_init(self, context: Any, /) -> None:
        self._chunks = FollowedChunkStore(self.chunk_store, read_only=True)

    # -- the store's state --------------------------------------------------------------------------------------
    def _state_key(self) -> _StateKey:
        """The chunk store's state (its read-only connection reopened when another file is at the path) and the
        watched files'."""
        return (self._chunks.state(), tuple(file_stat(p) for p in self.watch))

    def _serving(self) -> _Snapshot:
        """The snapshot to answer this call: the current one, or a new one when the store changed (one reload at a
        time; a caller that finds one running waits for it).  A failed reload keeps the previous snapshot; the
        first build has none to keep, so its errors propagate."""
        snap = self._snapshot
        if snap is not None and snap.key == self._state_key():
            return snap
        with self._reload_lock:
            # read before the build (a write in between only makes the next call reload), and after the wait: a
            # reload that ran while this call waited counts
            snap, key = self._snapshot, self._state_key()
            if snap is not None and snap.key == key:
                return snap
            if snap is None:
                snap = self._snapshot = _Snapshot(key, self.factory())
                return snap
            try:
                snap = _Snapshot(key, self.factory())
            except Exception as e:  # the store is mid-ingest or an index is being swapped: serve gated, retry
                warnings.warn(
                    f"{self.chunk_store.parent}: the store changed but its retriever could not be rebuilt "
                    f"({type(e).__name__}: {e}); the previous retriever keeps answering, its results checked "
                    "against the current store; the next call tries again",
                    StoreReloadWarning,
                    stacklevel=user_stacklevel(langchain_core),
                )
                return snap
            self._snapshot = snap
            return snap

    def refresh(self) -> bool:
        """Build the retriever now if the store changed since the current one was built (what every call does
        first), or if none is built yet; ``True`` when a new retriever was built.  A failed reload returns
        ``False`` with a :class:`StoreReloadWarning` (the previous retriever stays).

        Raises:
            StoreError: the chunk store is unreadable.
            Exception: the factory's error, when no retriever was built before (the first build).
        """
        before = self._snapshot
        return self._serving() is not before

    @property
    def current(self) -> BaseRetriever:
        """The retriever that answers the next call, after the store check (a reload if the store changed).  For
        inspection (its type, channels, ``k``): searching it directly skips the check and the gate."""
        return self._serving().retriever

    @property
    def generation(self) -> int:
        """The store generation the current retriever was built from (:attr:`~langchain_ragspine.backends.directory.
        chunk_store.ChunkStore.generation`), after the store check (as :attr:`current`)."""
        return self._serving().key[0].generation

    def served_ids(self, ids: Sequence[str]) -> ServedIds:
        """Which of the chunk (or parent) ids ``ids`` this retriever would still return now, and which it no longer
        will (:mod:`~langchain_ragspine.served`): after the same store check a call makes (a changed store is
        reloaded, a replaced one reopened), the store's answer
        (:meth:`~langchain_ragspine.backends.directory.chunk_store.ChunkStore.served_ids`) — ``served``: active and
        not RESTRICTED now; ``withdrawn``: a row of this store that is not (relabelled RESTRICTED, retracted, gone
        from its document's current version).  Cheap: the store check plus, for ids not asked before in the same
        store state (answers are kept until the store changes), one or two indexed lookups per table and a label
        check per row.  What the chat graphs ask before an earlier reply goes into a prompt.

        Raises:
            TypeError: ``ids`` is a str or holds a non-str.
            StoreError: the chunk store is unreadable.

        Example:
            >>> import tempfile, pathlib
            >>> from langchain_ragspine import ingest, open_retriever
            >>> root = pathlib.Path(tempfile.mkdtemp())
            >>> (root / "c").mkdir()
            >>> _ = (root / "c" / "kyoto.md").write_text("Kyoto has temples.", "utf-8")
            >>> _ = ingest(root / "c", root / "S", progress=False)
            >>> retriever = open_retriever(root / "S", mode="bm25")
            >>> retriever.served_ids(["kyoto#0", "osaka#0"]).served
            frozenset({'kyoto#0'})
            >>> _ = (root / "c" / "kyoto.json").write_text('{"sensitivity": "RESTRICTED"}', "utf-8")
            >>> _ = ingest(root / "c", root / "S", progress=False)
            >>> retriever.served_ids(["kyoto#0", "osaka#0"])
            ServedIds(served=frozenset(), withdrawn=frozenset({'kyoto#0'}))
        """
        if isinstance(ids, (str, bytes)) or not all(isinstance(i, str) for i in ids):
            raise TypeError(f"ids must be a list of str chunk ids, got {ids!r}"[:300])
        wanted = list(ids)
        self._serving()
        key = self._state_key()  # read before the lookup: a write in between only makes the next call look again
        memo = self._served_memo
        if memo is None or memo[0] != key:  # the answers of one store state (a row never changes within one)
            memo = self._served_memo = (key, {})
        answers = memo[1]
        missing = [i for i in dict.fromkeys(wanted) if i not in answers]
        if missing:
            store = self._chunks.opened
            assert store is not None  # opened by the store check
            found = store.served_ids(missing)
            answers.update((i, "served" if i in found.served else "withdrawn" if i in found.withdrawn else "")
                           for i in missing)
        return ServedIds.of(wanted, (i for i in wanted if answers[i] == "served"),
                            (i for i in wanted if answers[i] == "withdrawn"))

    # -- the gate -----------------------------------------------------------------------------------------------
    def _gate(self, docs: Sequence[Document]) -> list[Document]:
        """``docs`` that are active rows of the store now, of the version they were read from (module docstring),
        read over the connection of the call's store check (no file system call: the async path runs it on the
        event loop)."""
        store = self._chunks.opened
        assert store is not None  # opened by the store check that began the call
        keys = [chunk_key(d) for d in docs]
        active = store.active_versions([k for k in keys if k is not None])
        unversioned = [k for d, k in zip(docs, keys, strict=True)
                       if k in active and d.metadata.get("doc_version") is None]
        rows = store.get_chunks(unversioned) if unversioned else {}  # an index written before doc_version:
        if len(rows) < len(unversioned):  # compare the text, read the current label
            rows.update(store.get_parents([k for k in unversioned if k not in rows]))
        out = []
        for doc, key in zip(docs, keys, strict=True):
            if key is None or key not in active or doc.metadata.get("doc_id") != active[key][0]:
                continue
            version = doc.metadata.get("doc_version")
            if version is None:
                row = rows.get(key)
                if row is None or row.text != doc.page_content or is_restricted(row.to_document()):
                    continue
            elif version != active[key][1]:
                continue
            out.append(doc)
        return out

    # -- calls --------------------------------------------------------------------------------------------------
    def _inner_call(self, retriever: BaseRetriever, call: RetrieverCall[Any]) -> tuple[BaseRetriever, dict[str, Any]]:
        """The retriever to search and the options to pass it: ``embed_as`` as :func:`embed_as_target` decides,
        ``fetch_k`` as given (the wrapped retriever refuses it when it takes none)."""
        target, options = embed_as_target(retriever, embed_as_options(call.options))
        if "fetch_k" in call.options:
            options["fetch_k"] = call.options["fetch_k"]
        return target, options

    def _retrieve(self, query: str, call: SyncCall) -> list[Document]:
        snap = self._serving()
        target, options = self._inner_call(snap.retriever, call)
        docs = invoke_retriever(target, query, k=call.k, filter=call.filter,
                                config=call.child(f"{GENERATION_TAG}:{snap.key[0].generation}"), options=options)
        return self._gate(docs)

    async def _aretrieve(self, query: str, call: AsyncCall) -> list[Document]:
        # the store check stats files and a rebuild reads indexes: both off the event loop (an ASGI server such as
        # langgraph dev refuses blocking calls there)
        snap = await run_in_executor(None, self._serving)
        target, options = self._inner_call(snap.retriever, call)
        docs = await ainvoke_retriever(target, query, k=call.k, filter=call.filter,
                                       config=call.child(f"{GENERATION_TAG}:{snap.key[0].generation}"), options=options)
        return self._gate(docs)
