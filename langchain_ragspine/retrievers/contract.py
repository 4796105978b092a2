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
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import patch_config, run_in_executor
from langchain_core.vectorstores import VectorStoreRetriever

from langchain_ragspine.documents import check_k, dedupe
from langchain_ragspine.filters import Predicate, compile_filter
from langchain_ragspine.sensitivity import is_restricted

__all__ = [
    "OVERFETCH_GROWTH",
    "OVERFETCH_MAX_FACTOR",
    "RetrieverParams",
    "Search",
    "ainvoke_retriever",
    "asearch_each",
    "child_config",
    "invoke_retriever",
    "retriever_params",
    "search_each",
]

#: When a post-filter leaves fewer than ``k`` results, the next request asks for this many times more.
OVERFETCH_GROWTH = 4
#: A post-filtered call never asks one retriever for more than ``k`` times this (at most 4 requests: k, 4k, 16k, 64k).
OVERFETCH_MAX_FACTOR = 64


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
        pred: Predicate | None = compile_filter(filter)  # validates; None for an absent or empty filter
        self.filter: dict[str, Any] | None = None  # passed to the retriever
        self.post: Predicate | None = None  # applied here, to the results
        if pred is not None and filter is not None:
            if self.params.takes_filter:
                self.filter = dict(filter)
            else:
                self.post = pred
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
        filter: a metadata filter in :mod:`langchain_ragspine.filters` syntax; ``None`` or ``{}``: no filter.
            Applied by the retriever when it takes one, else to its results (fail closed, over-fetching).
        config: the ``RunnableConfig`` of the call (callbacks, tags, run name).
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
    while True:
        target, kwargs = call.target()
        result = call.settle(target.invoke(query, config, **kwargs))
        if result is not None:
            return call.report(result, gated)


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
    while True:
        target, kwargs = call.target()
        if not kwargs or call.params.takes_async_kwargs:
            docs = await target.ainvoke(query, config, **kwargs)
        else:
            docs = await run_in_executor(config, target.invoke, query, config, **kwargs)
        result = call.settle(docs)
        if result is not None:
            return call.report(result, gated)


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
    the gate removed from it (see :func:`invoke_retriever`).  Errors as :func:`invoke_retriever`."""
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
    removed: list[list[Document]] = [[] for _ in searches]
    lists = await asyncio.gather(*(
        ainvoke_retriever(s[0], s[1], k=k, filter=filter, config=child_config(run_manager, s[2]), gated=g,
                          options=_options(s))
        for s, g in zip(searches, removed, strict=True)
    ))
    if gated is not None:
        gated.extend(removed)
    return list(lists)
