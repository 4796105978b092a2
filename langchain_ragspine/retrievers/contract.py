"""The retriever-call contract: how every part of the package asks *any* ``BaseRetriever`` for ``k`` documents
matching a metadata ``filter``.

LangChain's ``BaseRetriever.invoke(query, **kwargs)`` has no fixed keywords: a retriever whose
``_get_relevant_documents`` names no extra parameter never sees the keyword arguments of a call (LangChain drops
them silently), a ``VectorStoreRetriever`` merges them into its ``search_kwargs`` and hands them to its store, and
this package's retrievers take ``k`` and ``filter`` (:mod:`langchain_ragspine.filters` syntax).  Haystack 2.x solves
this with one retriever protocol, ``run(query, top_k, filters)``; here the protocol is read from the retriever:

==========================================  =========================================  ================================
retriever                                    ``k``                                      ``filter``
==========================================  =========================================  ================================
``_get_relevant_documents`` names ``k`` /    ``invoke(query, k=…)``                     ``invoke(query, filter=…)``:
``filter`` (BM25, dense, hybrid, …)                                                     applied before scoring
``VectorStoreRetriever``                     ``invoke(query, k=…)`` (merged into        never passed (see below);
                                             ``search_kwargs``)                         applied to the results here
a ``k`` field, no ``k`` parameter            a copy of the retriever with ``k`` set     applied to the results here
(LangChain's ``BM25Retriever``, TF-IDF …)    (the caller's object is not modified)
anything else                                the results are truncated to ``k``         applied to the results here
==========================================  =========================================  ================================

A filter is never passed to a ``VectorStoreRetriever``: every store has its own filter dialect (a callable for
``InMemoryVectorStore``, Chroma's and Qdrant's own dicts, …), some ignore keywords they do not know, and a missing
field means something else in each.  Filters often scope access, so the contract **fails closed**: when a filter
is asked of a retriever that cannot take one, the results are filtered here with the package's evaluator (a
missing field never matches), so nothing outside the filter is ever returned — and, so that the filter costs as
few results as possible, the call **over-fetches**: when fewer than ``k`` results survive and the retriever
returned all it was asked for, it is asked again for :data:`OVERFETCH_GROWTH` times as many, up to
:data:`OVERFETCH_MAX_FACTOR` ``× k``.  A retriever that takes no ``k`` cannot be over-fetched: its results are
filtered as they are, so a selective filter may leave fewer than ``k`` (or none).

Results are distinct chunks: a repeat of an earlier :func:`~langchain_ragspine.documents.doc_key` — ``chunk_id``
(else ``Document.id``), within its ``metadata["index_id"]`` when the result carries one, so the same ``README#0`` of
two indexes of a :class:`~langchain_ragspine.retrievers.multi_index.MultiIndexRetriever` is two results — is
dropped, so ``k`` counts chunks (``docs/architecture.md``, invariant 5).

**The RESTRICTED gate comes before the cut to k.**  RESTRICTED documents
(:func:`~langchain_ragspine.sensitivity.is_restricted`) are removed from what the retriever returned *before* the
results are cut to ``k``, and a retriever that takes ``k`` is over-fetched for them as for a post-filter, so a
retriever that returns four RESTRICTED chunks ahead of many public ones still yields ``k`` public chunks (cutting
first and gating after — at a wrapper's exit — used to leave one).  Callers keep their own gate at their exits
(one more check is cheap; the rule is that every exit gates).

**A foreign retriever runs untraced; the gated result is reported in its place.**  A retriever's run hands its
whole answer to the callbacks of the call (``on_retriever_end``), so LangSmith, ``astream_events`` and an SSE feed
of a served graph would show RESTRICTED documents a retriever that is not this package's returned, before the gate.
So a retriever whose own run may not be traced (:func:`traces_own_run` is ``False``: any class defined outside
this package, LangChain's ``VectorStoreRetriever`` included, and this package's classes that do not gate their own
exit) is invoked *with the caller's callbacks withheld*: with an empty callback list, inside a context where no
run config, LangSmith tracing context, ``tracing_v2_enabled`` tracer or ``collect_runs`` collector is inherited —
so neither it nor anything it runs inside reports to anyone.  In its place the contract reports one retriever run of
its own under the caller's callbacks, named as the retriever's own run would be (its ``name``, or the config's
``run_name``), with its tags and metadata plus :data:`REPORTED_RUN_METADATA`: its input is the query and its output
is what the call returns (gated, filtered, de-duplicated, cut to ``k``; one run for all its over-fetching requests),
or its error.  A trace therefore keeps its shape (the hybrid's ``vector`` channel is still a child run tagged
``vector``) and shows what the package kept, never what it removed; the foreign retriever's inner runs (an LLM
call of a LangChain ``MultiQueryRetriever``, say) are not traced.  This package's gated retrievers (every
``ContractRetriever``, ``RagSpineStoreRetriever``) run with the caller's callbacks as before: their own
``on_retriever_end`` already passes the RESTRICTED gate, also for a label added after the index was built.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from langchain_core.callbacks import AsyncCallbackManager, CallbackManager
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import (
    ensure_config,
    patch_config,
    run_in_executor,
    var_child_runnable_config,
)
from langchain_core.tracers.context import run_collector_var, tracing_v2_callback_var
from langchain_core.vectorstores import VectorStoreRetriever

from langchain_ragspine.arguments import check_k
from langchain_ragspine.documents import dedupe
from langchain_ragspine.filters import CompiledFilter, Predicate, compiled_filter
from langchain_ragspine.sensitivity import is_restricted

__all__ = [
    "OVERFETCH_GROWTH",
    "OVERFETCH_MAX_FACTOR",
    "REPORTED_RUN_METADATA",
    "RetrieverParams",
    "Search",
    "ainvoke_retriever",
    "asearch_each",
    "child_config",
    "gated_exit",
    "invoke_retriever",
    "retriever_params",
    "search_each",
    "traces_own_run",
]

#: When a post-filter leaves fewer than ``k`` results, the next request asks for this many times more.
OVERFETCH_GROWTH = 4
#: A post-filtered call never asks one retriever for more than ``k`` times this (at most 4 requests: k, 4k, 16k, 64k).
OVERFETCH_MAX_FACTOR = 64
#: Metadata of the run the contract reports in place of an untraced retriever's own (see the module docstring).
REPORTED_RUN_METADATA: Mapping[str, Any] = {"ragspine_reported": True}

_F = TypeVar("_F", bound=Callable[..., Any])
_T = TypeVar("_T")
_GATED_EXIT = "__ragspine_gated_exit__"
#: The methods of a retriever class whose run reaches the callbacks: all of them must be gated exits.
_EXIT_METHODS = ("invoke", "ainvoke", "_get_relevant_documents", "_aget_relevant_documents")
_PACKAGE = __name__.split(".", 1)[0]


def gated_exit(method: _F) -> _F:
    """Mark a retriever method of this package whose result — what its run reports to the callbacks — never holds a
    RESTRICTED document (it passes :func:`~langchain_ragspine.sensitivity.drop_restricted` on its way out, or calls
    one that does).  A class of the package whose ``invoke``, ``ainvoke``, ``_get_relevant_documents`` and
    ``_aget_relevant_documents`` are all marked runs with the caller's callbacks (:func:`traces_own_run`)."""
    setattr(method, _GATED_EXIT, True)
    return method


@functools.lru_cache(maxsize=256)
def _traces_own_run(cls: type[BaseRetriever]) -> bool:
    return cls.__module__.split(".", 1)[0] == _PACKAGE and all(
        getattr(getattr(cls, name, None), _GATED_EXIT, False) for name in _EXIT_METHODS
    )


def traces_own_run(retriever: BaseRetriever) -> bool:
    """Whether :func:`invoke_retriever` may run ``retriever`` with the caller's callbacks: its class is defined in
    this package and all its run's methods are gated exits (:func:`gated_exit`: every ``ContractRetriever``,
    ``RagSpineStoreRetriever``).  ``False`` for any other retriever — a user's subclass too, which may override what
    its run reports — so it runs untraced and the contract reports the gated result (see the module docstring).

    Example:
        >>> from langchain_core.documents import Document
        >>> from langchain_core.vectorstores import InMemoryVectorStore
        >>> from langchain_ragspine import BM25Retriever
        >>> from langchain_ragspine.embeddings import HashingEmbeddings
        >>> traces_own_run(BM25Retriever.from_documents([Document(page_content="梅雨")]))
        True
        >>> traces_own_run(InMemoryVectorStore(HashingEmbeddings(8)).as_retriever())
        False
    """
    return _traces_own_run(type(retriever))


@dataclass(frozen=True)
class RetrieverParams:
    """What a retriever understands of a call (see the module docstring for how it is decided).

    Attributes:
        takes_k: ``k`` reaches the retriever — as ``invoke(query, k=…)``, or, with ``k_field``, as the ``k`` field
            of a copy.  ``False``: its results are truncated to ``k``.
        takes_filter: ``invoke(query, filter=…)`` is understood in :mod:`langchain_ragspine.filters` syntax and
            applied before scoring.  ``False``: a filter is applied to the results, with over-fetching when
            ``takes_k``.
        takes_async_kwargs: ``_aget_relevant_documents`` accepts the keywords the contract passes (``k`` and/or
            ``filter``).  ``False`` (e.g. a retriever that implements only the sync method, whose inherited async
            method takes no keywords): :func:`ainvoke_retriever` runs the sync ``invoke`` in a worker thread.
        k_field: ``k`` is set on a copy of the retriever (``model_copy(update={"k": k})``) instead of being passed
            to ``invoke``.
    """

    takes_k: bool
    takes_filter: bool
    takes_async_kwargs: bool
    k_field: bool = False


def _named(method: Any, name: str) -> bool:
    """Whether ``method``'s signature has a parameter ``name`` that can be passed by keyword."""
    try:
        params = inspect.signature(method).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtins without a signature
        return False
    p = params.get(name)
    return p is not None and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)


def _takes_var_keywords(method: Any) -> bool:
    try:
        params = inspect.signature(method).parameters
    except (TypeError, ValueError):  # pragma: no cover
        return False
    return any(p.kind is p.VAR_KEYWORD for p in params.values())


@functools.lru_cache(maxsize=256)
def _params_of(cls: type[BaseRetriever]) -> RetrieverParams:
    sync = cls._get_relevant_documents
    if issubclass(cls, VectorStoreRetriever):
        takes_k, takes_filter, k_field = True, False, False
        names: tuple[str, ...] = ("k",)
    else:
        takes_filter = _named(sync, "filter")
        if _named(sync, "k"):
            takes_k, k_field = True, False
        else:
            k_field = "k" in cls.model_fields
            takes_k = k_field
        names = tuple(n for n, on in (("k", takes_k and not k_field), ("filter", takes_filter)) if on)
    asyn = cls._aget_relevant_documents
    takes_async = _takes_var_keywords(asyn) or all(_named(asyn, n) for n in names)
    return RetrieverParams(takes_k=takes_k, takes_filter=takes_filter, takes_async_kwargs=takes_async, k_field=k_field)


def _is_ours(retriever: BaseRetriever) -> bool:
    """Whether ``retriever``'s class is defined in this package (it takes a compiled filter as it is)."""
    return type(retriever).__module__.split(".", 1)[0] == _PACKAGE


def retriever_params(retriever: BaseRetriever) -> RetrieverParams:
    """How ``retriever`` takes ``k`` and ``filter`` (decided once per class, then cached).

    Raises:
        TypeError: ``retriever`` is not a ``BaseRetriever``.

    Example:
        >>> from langchain_core.documents import Document
        >>> from langchain_ragspine import BM25Retriever
        >>> retriever_params(BM25Retriever.from_documents([Document(page_content="梅雨")]))
        RetrieverParams(takes_k=True, takes_filter=True, takes_async_kwargs=True, k_field=False)
    """
    if not isinstance(retriever, BaseRetriever):
        raise TypeError(f"retriever must be a langchain_core BaseRetriever, got {type(retriever).__name__}")
    return _params_of(type(retriever))


class _Call:
    """One contract call: what to ask the retriever for, and — with a post-filter — when to ask again."""

    def __init__(
        self,
        retriever: BaseRetriever,
        k: int | None,
        filter: Mapping[str, Any] | None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        self.retriever = retriever
        self.options = dict(options or {})  # passed to every request as given
        self.params = retriever_params(retriever)
        self.k = None if k is None else check_k(k)
        # validated and compiled once (None for an absent or empty filter; a compiled one is taken as it is)
        compiled = compiled_filter(filter)
        self.filter: CompiledFilter | dict[str, Any] | None = None  # passed to the retriever
        self.post: Predicate | None = None  # applied here, to the results
        if compiled is not None:
            if not self.params.takes_filter:
                self.post = compiled.predicate
            elif _is_ours(retriever):
                self.filter = compiled  # reused as it is: not validated or compiled again
            else:
                self.filter = compiled.to_dict()  # a plain copy of its own for a retriever from elsewhere
        self.fetch = self.k if self.params.takes_k else None
        self.max_fetch = None if self.k is None else self.k * OVERFETCH_MAX_FACTOR
        self.gated: list[Document] = []  # the RESTRICTED documents removed from the last answer

    def target(self) -> tuple[BaseRetriever, dict[str, Any]]:
        """The retriever to invoke (a copy for a ``k`` field) and the keywords of this request."""
        kwargs: dict[str, Any] = {}
        target = self.retriever
        if self.fetch is not None:
            if self.params.k_field:
                target = self.retriever.model_copy(update={"k": self.fetch})
            else:
                kwargs["k"] = self.fetch
        if self.filter is not None:
            kwargs["filter"] = self.filter
        kwargs.update(self.options)
        return target, kwargs

    def settle(self, docs: Any) -> list[Document] | None:
        """The call's result when ``docs`` (the answer to the current request) settles it; ``None`` when the
        RESTRICTED gate or the post-filter left fewer than ``k`` and a larger request may find more (``fetch`` has
        grown).  The gate and the filter run before the cut to ``k``."""
        if not isinstance(docs, (list, tuple)) or not all(isinstance(d, Document) for d in docs):
            raise TypeError(f"{type(self.retriever).__name__} returned something other than a list of Documents")
        safe: list[Document] = []
        self.gated = []
        for d in dedupe(docs):  # the RESTRICTED gate, before the filter and the cut
            (self.gated if is_restricted(d) else safe).append(d)
        kept = safe if self.post is None else [d for d in safe if self.post(d.metadata)]
        if self.k is None:
            return kept
        if (
            (self.post is not None or self.gated)
            and self.fetch is not None
            and self.max_fetch is not None
            and len(kept) < self.k
            and len(docs) >= self.fetch  # the retriever may hold more
            and self.fetch < self.max_fetch
        ):
            self.fetch = min(self.fetch * OVERFETCH_GROWTH, self.max_fetch)
            return None
        return kept[: self.k]


    def report(self, result: list[Document], gated: list[Document] | None) -> list[Document]:
        """``result``, after adding the documents the gate removed from the last answer to ``gated`` (if given)."""
        if gated is not None:
            gated.extend(self.gated)
        return result


def invoke_retriever(
    retriever: BaseRetriever,
    query: str,
    *,
    k: int | None = None,
    filter: Mapping[str, Any] | None = None,
    config: RunnableConfig | None = None,
    gated: list[Document] | None = None,
    options: Mapping[str, Any] | None = None,
) -> list[Document]:
    """``retriever.invoke(query)`` asking for ``k`` results that match ``filter``, whatever kind of retriever it is.

    Args:
        retriever: any ``BaseRetriever`` (see the module docstring for how each kind is asked).
        query: the search query.
        k: at most this many results (an ``int >= 1``); ``None``: as many as the retriever returns by default.
        filter: a metadata filter in :mod:`langchain_ragspine.filters` syntax, or one compiled already
            (:class:`~langchain_ragspine.filters.CompiledFilter`, not compiled again); ``None`` or ``{}``: no
            filter.  Validated and compiled once per call; applied by the retriever when it takes one (this
            package's retrievers get the compiled filter, any other a plain copy), else to its results (fail
            closed, over-fetching).
        config: the ``RunnableConfig`` of the call (callbacks, tags, run name; default: the run config of the
            context, as ``invoke`` reads it).  A retriever whose own run is not traced (:func:`traces_own_run` is
            ``False``) gets none of its callbacks; the call reports a run of its own with the result instead (see
            the module docstring).
        gated: a list that receives the RESTRICTED documents the gate removed from the retriever's answer — for a
            caller that must drop a chunk labelled RESTRICTED in *any* of several lists (:class:`~langchain_ragspine.
            retrievers.hybrid.HybridRetriever`, fail closed) or count them; never to be shown or returned.
            ``None`` (default): not reported.
        options: further keyword arguments of the call, passed to ``invoke`` as given — only call options the
            retriever's class declares (:attr:`~langchain_ragspine.retrievers.base.ContractRetriever.call_options`,
            e.g. ``{"embed_as": "document"}``): the caller checks.  ``None`` (default): none.

    Returns:
        At most ``k`` distinct documents in the retriever's order, every one matching ``filter`` and none
        RESTRICTED: a document whose :func:`~langchain_ragspine.documents.doc_key` came earlier in the list is
        dropped (the first occurrence wins), so ``k`` counts chunks, and RESTRICTED documents are removed before the
        cut to ``k`` (over-fetching a retriever that takes ``k``), so they do not use up the ``k`` budget.

    Raises:
        TypeError: ``retriever`` is not a ``BaseRetriever`` or returns something other than a list of ``Document``;
            ``k`` is not an int; ``filter`` is not a mapping.
        ValueError: ``k < 1``; a malformed filter.

    Example:
        >>> from langchain_core.documents import Document
        >>> from langchain_core.vectorstores import InMemoryVectorStore
        >>> from langchain_ragspine.embeddings import HashingEmbeddings
        >>> store = InMemoryVectorStore(HashingEmbeddings(64))
        >>> _ = store.add_documents([Document(page_content=f"梅雨 {i}", metadata={"dept": "ab"[i % 2]})
        ...                          for i in range(6)])
        >>> docs = invoke_retriever(store.as_retriever(), "梅雨", k=2, filter={"dept": "b"})
        >>> len(docs), {d.metadata["dept"] for d in docs}
        (2, {'b'})
    """
    call = _Call(retriever, k, filter, options)
    if traces_own_run(retriever):
        return _settled(call, lambda target, kwargs: target.invoke(query, config, **kwargs), gated)
    cfg = ensure_config(config)
    quiet = _quiet_config(cfg)
    manager, start = _reporting(retriever, cfg)
    run = CallbackManager.configure(**manager).on_retriever_start(None, query, **start)
    try:
        result = _settled(call, lambda target, kwargs: _untraced(quiet, target.invoke, query, quiet, **kwargs), gated)
    except BaseException as e:
        run.on_retriever_error(e)
        raise
    run.on_retriever_end(result)
    return result


def _settled(call: _Call, request: Callable[[BaseRetriever, dict[str, Any]], Any],
             gated: list[Document] | None) -> list[Document]:
    """The result of ``call``: ``request(target, kwargs)`` until an answer settles it (over-fetching)."""
    while True:
        target, kwargs = call.target()
        result = call.settle(request(target, kwargs))
        if result is not None:
            return call.report(result, gated)


async def _asettled(call: _Call, request: Callable[[BaseRetriever, dict[str, Any]], Awaitable[Any]],
                    gated: list[Document] | None) -> list[Document]:
    """The async :func:`_settled`."""
    while True:
        target, kwargs = call.target()
        result = call.settle(await request(target, kwargs))
        if result is not None:
            return call.report(result, gated)


def _reporting(retriever: BaseRetriever, cfg: RunnableConfig) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(callback-manager configure arguments, on_retriever_start keywords)`` of the run reported in place of
    ``retriever``'s own: configured as ``BaseRetriever.invoke`` configures its run, plus :data:`REPORTED_RUN_METADATA`."""
    manager = {
        "inheritable_callbacks": cfg.get("callbacks"),
        "local_callbacks": None,
        "verbose": False,
        "inheritable_tags": cfg.get("tags"),
        "local_tags": retriever.tags,
        "inheritable_metadata": cfg.get("metadata"),
        "local_metadata": {**(retriever.metadata or {}), **REPORTED_RUN_METADATA},
    }
    return manager, {"name": cfg.get("run_name") or retriever.get_name(), "run_id": cfg.get("run_id")}


def _quiet_config(cfg: RunnableConfig) -> RunnableConfig:
    """The config an untraced retriever runs with: the caller's ``configurable`` and limits, no callbacks (an empty
    list, which a run config inherited from the context cannot fill in), tags, metadata, run name or id."""
    quiet = RunnableConfig(callbacks=[])
    if "configurable" in cfg:
        quiet["configurable"] = cfg["configurable"]
    if "recursion_limit" in cfg:
        quiet["recursion_limit"] = cfg["recursion_limit"]
    if cfg.get("max_concurrency") is not None:
        quiet["max_concurrency"] = cfg["max_concurrency"]
    return quiet


def _silence(quiet: RunnableConfig) -> None:
    """In the current context: runnables inherit ``quiet`` and no LangChain tracer or run collector."""
    var_child_runnable_config.set(quiet)
    tracing_v2_callback_var.set(None)
    run_collector_var.set(None)


def _untraced(quiet: RunnableConfig, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
    """``fn(*args, **kwargs)`` in a copy of the context in which nothing it runs reports to the caller's callbacks,
    LangSmith (tracing disabled, no parent run) or a context-registered tracer (:func:`_silence`)."""
    from langsmith.run_helpers import tracing_context

    def run() -> _T:
        _silence(quiet)
        with tracing_context(enabled=False, parent=False):
            return fn(*args, **kwargs)

    return contextvars.copy_context().run(run)


async def _auntraced(quiet: RunnableConfig, make: Callable[[], Awaitable[_T]]) -> _T:
    """The async :func:`_untraced`: ``await make()`` in a task of its own with the silenced copy of the context."""
    from langsmith.run_helpers import tracing_context

    async def run() -> _T:
        _silence(quiet)
        with tracing_context(enabled=False, parent=False):
            return await make()

    return await asyncio.create_task(run(), context=contextvars.copy_context())


async def ainvoke_retriever(
    retriever: BaseRetriever,
    query: str,
    *,
    k: int | None = None,
    filter: Mapping[str, Any] | None = None,
    config: RunnableConfig | None = None,
    gated: list[Document] | None = None,
    options: Mapping[str, Any] | None = None,
) -> list[Document]:
    """The async :func:`invoke_retriever`: ``retriever.ainvoke`` (so a fan-out retriever runs its channels
    concurrently), or — when the retriever's async method cannot take the keywords (``takes_async_kwargs`` is
    ``False``) — its sync ``invoke`` in a worker thread.  Same arguments, result and errors."""
    call = _Call(retriever, k, filter, options)

    def request(target: BaseRetriever, kwargs: dict[str, Any], config: RunnableConfig | None) -> Awaitable[Any]:
        if not kwargs or call.params.takes_async_kwargs:
            return target.ainvoke(query, config, **kwargs)
        return run_in_executor(config, target.invoke, query, config, **kwargs)

    if traces_own_run(retriever):
        return await _asettled(call, lambda target, kwargs: request(target, kwargs, config), gated)
    cfg = ensure_config(config)
    quiet = _quiet_config(cfg)
    manager, start = _reporting(retriever, cfg)
    run = await AsyncCallbackManager.configure(**manager).on_retriever_start(None, query, **start)
    try:
        result = await _asettled(
            call, lambda target, kwargs: _auntraced(quiet, lambda: request(target, kwargs, quiet)), gated
        )
    except BaseException as e:
        await run.on_retriever_error(e)
        raise
    await run.on_retriever_end(result)
    return result


def child_config(run_manager: Any, tag: str) -> RunnableConfig:
    """The config of a wrapper's inner call: a child run of ``run_manager``'s, tagged ``tag``."""
    return patch_config(None, callbacks=run_manager.get_child(tag=tag))


#: One inner search of a wrapper: ``(retriever, query, trace tag)``, or with a fourth item, the call options passed
#: to that search alone (see ``options`` of :func:`invoke_retriever`).
Search = tuple[BaseRetriever, str, str] | tuple[BaseRetriever, str, str, Mapping[str, Any]]


def _options(search: Search) -> Mapping[str, Any] | None:
    return search[3] if len(search) == 4 else None


def search_each(
    searches: Sequence[Search],
    *,
    k: int | None,
    filter: Mapping[str, Any] | None,
    run_manager: Any,
    gated: list[list[Document]] | None = None,
) -> list[list[Document]]:
    """The result lists of a wrapper's inner searches, in order: each ``(retriever, query, tag)`` through
    :func:`invoke_retriever` with the same ``k`` and ``filter`` (and a search's own call options, when it has a
    fourth item: :data:`Search`), as a child run of ``run_manager``'s tagged ``tag``
    (so a trace shows which query / index / channel each list came from).  Used by the hybrid, multi-index and
    query-transformation retrievers.  ``gated``, when given, receives one list per search: the RESTRICTED documents
    the gate removed from it (see :func:`invoke_retriever`).  The filter is compiled once for all the searches
    (:func:`~langchain_ragspine.filters.compiled_filter`).  Errors as :func:`invoke_retriever`."""
    filter = compiled_filter(filter)
    out = []
    for search in searches:
        r, q, tag = search[:3]
        removed: list[Document] = []
        out.append(invoke_retriever(r, q, k=k, filter=filter, config=child_config(run_manager, tag), gated=removed,
                                    options=_options(search)))
        if gated is not None:
            gated.append(removed)
    return out


async def asearch_each(
    searches: Sequence[Search],
    *,
    k: int | None,
    filter: Mapping[str, Any] | None,
    run_manager: Any,
    gated: list[list[Document]] | None = None,
) -> list[list[Document]]:
    """The async :func:`search_each`: the searches run concurrently (``asyncio.gather``); lists in order."""
    filter = compiled_filter(filter)
    removed: list[list[Document]] = [[] for _ in searches]
    lists = await asyncio.gather(*(
        ainvoke_retriever(s[0], s[1], k=k, filter=filter, config=child_config(run_manager, s[2]), gated=g,
                          options=_options(s))
        for s, g in zip(searches, removed, strict=True)
    ))
    if gated is not None:
        gated.extend(removed)
    return list(lists)
