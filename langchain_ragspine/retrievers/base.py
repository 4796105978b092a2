"""The base class of the package's retrievers: strict, typed arguments and a query that must be a string.

LangChain's ``BaseRetriever`` is a pydantic model that ignores unknown constructor fields, so ``BM25Retriever(
top_k=3)`` or ``MultiQueryRetriever(base, llm, num_queries=5)`` would silently keep the defaults; assigning
``retriever.docs = other`` after construction would leave the index built from the old documents; and
``retriever.invoke(["q1", "q2"])`` fails deep inside a tokenizer.  The base classes here close these three holes
for every retriever of the package:

* an unknown constructor argument is a ``TypeError`` naming the closest field (:mod:`langchain_ragspine.arguments`),
  and the model forbids extra fields, so the pydantic mypy plugin gives each class a typed ``__init__`` — a type
  checker flags ``BM25Retriever(kk=3)`` too (:class:`ContractRetriever`, so every retriever of the package: BM25,
  dense, hybrid, the query transformations, multi-index, filter extraction, parent-child, the PostgreSQL ones);
* assignments are validated (``retriever.k = "3"`` is an error; so are the checks across fields, such as
  ``HybridRetriever.retrievers = []``, after which the retriever is unchanged), and assigning a field the index is built from
  (:attr:`RagSpineRetriever.index_fields`, e.g. ``docs``) rebuilds the index, as does ``model_copy(update=…)`` of
  one; the ``docs`` an index was built from are an :class:`IndexedDocuments` — a list that reads as before and
  refuses in-place edits (``retriever.docs[0] = d``, ``.append``) with a ``TypeError`` saying to assign instead;
* ``invoke`` / ``ainvoke`` take one query string; anything else is a ``TypeError`` of one line pointing at
  ``.batch`` (several queries) or ``itemgetter`` (one field of a dict) — checked by :class:`ContractRetriever`, so
  the query transforms and other wrappers refuse it too, before any LLM call.

:class:`ContractRetriever` is the callee's side of the retriever-call contract
(:mod:`langchain_ragspine.retrievers.contract`): it owns LangChain's ``_get_relevant_documents`` /
``_aget_relevant_documents`` signatures with ``k`` and ``filter`` once, refuses keyword arguments it does not take,
and hands each call to a short per-class hook.  Every retriever of the package that takes ``k`` and ``filter`` is
one, and its results pass the RESTRICTED gate there (:func:`~langchain_ragspine.sensitivity.drop_restricted`): no
retriever result of the package carries a RESTRICTED chunk, whatever the class's hook returns.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, NoReturn, Self, SupportsIndex, TypedDict, TypeVar, cast

import numpy as np
from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig
from langchain_core.runnables.config import run_in_executor
from pydantic import ConfigDict, PrivateAttr, model_validator

from langchain_ragspine.arguments import (
    RENAMED,
    check_arguments,
    check_k,
    rename_arguments,
    renamed_property,
    unknown_arguments_message,
)
from langchain_ragspine.documents import chunk_key
from langchain_ragspine.filters import CompiledFilter, compiled_filter
from langchain_ragspine.retrievers.contract import child_config, gated_exit
from langchain_ragspine.sensitivity import drop_restricted, is_restricted
from langchain_ragspine.served import ServedIds

__all__ = [
    "AsyncCall",
    "ContractRetriever",
    "IndexedDocuments",
    "RagSpineRetriever",
    "RetrieverCall",
    "RunnableOptions",
    "SyncBackedRetriever",
    "SyncCall",
    "check_query",
    "documents_from_texts",
    "unrestricted_hits",
]

RunManager = TypeVar("RunManager", CallbackManagerForRetrieverRun, AsyncCallbackManagerForRetrieverRun)


class RunnableOptions(TypedDict, total=False):
    """The ``Runnable`` fields every retriever's factory keywords share (``name``, ``tags``, ``metadata``: the
    run's name and tracing tags / metadata); each retriever's ``*Options`` ``TypedDict`` extends it."""

    name: str | None
    tags: list[str] | None
    metadata: dict[str, Any] | None


def check_query(owner: str, query: Any, method: str = "invoke") -> str:
    """``query`` if it is a string, else a ``TypeError`` of one line saying what to do instead.

    ``method`` names the method called (default ``"invoke"``, whose line points at ``.batch`` and ``itemgetter``;
    a vector store's ``"similarity_search"`` says to call it once per query).

    Example:
        >>> check_query("BM25Retriever", ["a", "b"])
        Traceback (most recent call last):
        ...
        TypeError: BM25Retriever.invoke takes one query string, got a list; for several queries use .batch([...]), for one field of a dict use `itemgetter("question") | retriever` (from operator import itemgetter)
    """
    if isinstance(query, str):
        return query
    got = "None" if query is None else f"a {type(query).__name__}"
    if method != "invoke":
        raise TypeError(f"{owner}.{method} takes one query string, got {got}; for several queries call it once per query")
    raise TypeError(
        f"{owner}.invoke takes one query string, got {got}; for several queries use .batch([...]), for one field "
        'of a dict use `itemgetter("question") | retriever` (from operator import itemgetter)'
    )


def documents_from_texts(
    texts: Iterable[str], metadatas: Iterable[dict[str, Any]] | None = None, ids: Iterable[str] | None = None
) -> list[Document]:
    """``Document(text, metadata=copy of metadatas[i], id=ids[i])`` per text: what a retriever's ``from_texts``
    indexes.

    Raises:
        ValueError: ``metadatas`` or ``ids`` has a different length than ``texts``.
    """
    texts = list(texts)
    metas = list(metadatas) if metadatas is not None else [{} for _ in texts]
    id_list = list(ids) if ids is not None else [None] * len(texts)
    if len(metas) != len(texts) or len(id_list) != len(texts):
        raise ValueError(f"from_texts got {len(texts)} texts, {len(metas)} metadatas and {len(id_list)} ids")
    return [Document(page_content=t, metadata=dict(m), id=i) for t, m, i in zip(texts, metas, id_list, strict=True)]


def unrestricted_hits(
    search: Callable[[np.ndarray | None], list[tuple[int, float]]],
    docs: Sequence[Document],
    mask: np.ndarray | None,
) -> list[tuple[int, float]]:
    """The RESTRICTED gate *before* the cut to ``k`` of an index search: ``search(mask)``'s ``(position, score)``
    hits, none of them RESTRICTED.

    An index of the package holds no RESTRICTED chunk (its builder drops them), but a label can be added to
    ``docs[i].metadata`` after the build.  Cutting to ``k`` first and gating after would then return fewer than
    ``k`` chunks although the index holds more; here a hit whose document is RESTRICTED is masked out and the search
    runs again, until none is, so the result holds up to ``k`` chunks that pass the gate whenever the candidates
    allow.  Each round removes at least one position; with no late label (the usual case) ``search`` runs once and
    the cost is one :func:`~langchain_ragspine.sensitivity.is_restricted` per hit.

    Args:
        search: the top ``k`` ``(position in docs, score)`` among the positions where its mask is ``True``
            (``None``: all), best first.
        docs: the indexed documents (``search``'s positions index them).
        mask: the call's candidate mask, a bool array of shape ``(len(docs),)`` (a filter), or ``None``; not
            modified.

    Used by :class:`~langchain_ragspine.retrievers.bm25.BM25Retriever` and
    :class:`~langchain_ragspine.retrievers.dense.DenseRetriever`; wrappers that fuse or cut lists gate before the
    cut themselves (:func:`~langchain_ragspine.retrievers.hybrid.fuse`, the retriever-call contract).
    """
    while True:
        hits = search(mask)
        late = [i for i, _ in hits if is_restricted(docs[i])]
        if not late:
            return hits
        mask = np.ones(len(docs), dtype=np.bool_) if mask is None else np.array(mask, dtype=np.bool_)
        mask[late] = False


class IndexedDocuments(list[Document]):
    """The documents a retriever's index was built from (``retriever.docs``): a ``list`` to read — index, slice,
    iterate, compare, copy with ``list(...)`` — that refuses every in-place edit.

    Editing the list would leave the index built from the old documents (LangChain's own ``BM25Retriever`` then
    returns the wrong chunks); assigning a new list rebuilds the index instead: ``retriever.docs = [*retriever.docs,
    new_doc]`` or ``retriever.model_copy(update={"docs": [...]})``.

    Raises:
        TypeError: any in-place edit (``docs[i] = d``, ``del docs[i]``, ``+=``, ``append``, ``extend``, ``insert``,
            ``pop``, ``remove``, ``clear``, ``sort``, ``reverse``), naming the owner and what to do instead.
    """

    __slots__ = ("owner",)

    def __init__(self, docs: Iterable[Document] = (), owner: str = "retriever") -> None:
        super().__init__(docs)
        self.owner = owner

    def _refuse(self) -> NoReturn:
        raise TypeError(
            f"{self.owner}.docs is the list its index was built from and cannot be edited in place; assign a new "
            f"list to rebuild the index (retriever.docs = [*retriever.docs, new_doc]) or build a new {self.owner}"
        )

    def __setitem__(self, index: Any, value: Any) -> None:
        self._refuse()

    def __delitem__(self, index: SupportsIndex | slice) -> None:
        self._refuse()

    def __iadd__(self, other: Iterable[Document]) -> Self:  # type: ignore[override,misc]
        self._refuse()

    def __imul__(self, n: SupportsIndex) -> Self:
        self._refuse()

    def append(self, value: Document) -> None:
        self._refuse()

    def extend(self, values: Iterable[Document]) -> None:
        self._refuse()

    def insert(self, index: SupportsIndex, value: Document) -> None:
        self._refuse()

    def pop(self, index: SupportsIndex = -1) -> Document:
        self._refuse()

    def remove(self, value: Document) -> None:
        self._refuse()

    def clear(self) -> None:
        self._refuse()

    def sort(self, *args: Any, **kwargs: Any) -> None:
        self._refuse()

    def reverse(self) -> None:
        self._refuse()

    def __reduce__(self) -> tuple[Any, ...]:  # copy / deepcopy / pickle rebuild it whole (not item by item)
        return (type(self), (list(self), self.owner))


class SyncBackedRetriever(BaseRetriever):
    """A ``BaseRetriever`` whose async path runs its sync ``_get_relevant_documents`` with the call's keywords.

    LangChain's default ``_aget_relevant_documents`` calls the sync method in a worker thread *without* the
    call's keyword arguments, so ``await retriever.ainvoke(query, k=2, filter=...)`` would lose ``k`` and
    ``filter`` (or fail).  This one passes every keyword (``k``, ``filter`` and a subclass's own) through.
    A subclass with a truly asynchronous path (an async embedding call, child retrievers run concurrently)
    overrides ``_aget_relevant_documents``.

    Attributes:
        run_async_in_executor: class-level switch.  ``False`` (default): the sync method runs inline on the event
            loop — right for CPU-bound work of a millisecond or less (BM25 over an in-memory index).  ``True``: it
            runs in the default executor (a worker thread), so blocking I/O (psycopg's pool) does not stall the loop.
    """

    run_async_in_executor: ClassVar[bool] = False

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        return await self._run_sync(
            functools.partial(self._get_relevant_documents, query, run_manager=run_manager.get_sync(), **kwargs)
        )

    async def _run_sync(self, call: Callable[[], list[Document]]) -> list[Document]:
        """``call()`` inline, or in the default executor when :attr:`run_async_in_executor` is set."""
        if type(self).run_async_in_executor:
            return await run_in_executor(None, call)
        return call()


@dataclass(frozen=True)
class RetrieverCall(Generic[RunManager]):
    """One call ``invoke(query, k=…, filter=…, **options)`` to a :class:`ContractRetriever`, as its hooks see it.

    The base class resolves ``k`` and the filter once, at the door (:meth:`ContractRetriever._call`), so a hook
    reads them as they are: it never checks ``k`` again, nor ANDs its own filter.

    Attributes:
        k: the call's ``k``, checked (an int ``>= 1``), else the retriever's own ``k`` field; ``None`` when the
            call gives none and the retriever has no ``k`` of its own (a wrapper whose ``k`` defaults to ``None``:
            its inner retrievers' defaults apply).
        filter: the retriever's own ``filter`` field ANDed with the call's metadata filter
            (:mod:`langchain_ragspine.filters` syntax) — so a call narrows the results, never widens them —
            validated and compiled once (:class:`~langchain_ragspine.filters.CompiledFilter`: hand it on as it is,
            every channel and merge of the call reuses it); ``None``: neither (also for empty filters).
        run_manager: LangChain's run of the call (``CallbackManagerForRetrieverRun`` in :meth:`ContractRetriever.
            _retrieve`, the async one in :meth:`ContractRetriever._aretrieve`); inner calls are its child runs.
        options: the further keywords the class takes (:attr:`ContractRetriever.call_options`), as given.
    """

    k: int | None
    filter: CompiledFilter | None
    run_manager: RunManager
    options: Mapping[str, Any] = field(default_factory=dict)

    def child(self, tag: str) -> RunnableConfig:
        """The config of an inner call: a child run of this call's, tagged ``tag`` (a trace shows it)."""
        return child_config(self.run_manager, tag)

    def depth(self, fetch_k: int | None) -> int | None:
        """What each inner search of a wrapper asks for: ``max(k, fetch_k)`` (``fetch_k`` ``None``: ``k``);
        ``None`` when :attr:`k` is (the inner retrievers' defaults)."""
        return None if self.k is None else max(self.k, fetch_k or self.k)


#: What :meth:`ContractRetriever._retrieve` receives.
SyncCall = RetrieverCall[CallbackManagerForRetrieverRun]
#: What :meth:`ContractRetriever._aretrieve` receives.
AsyncCall = RetrieverCall[AsyncCallbackManagerForRetrieverRun]


class ContractRetriever(SyncBackedRetriever):
    """A ``BaseRetriever`` that takes the retriever-call contract's ``k`` and ``filter``:
    ``invoke(query, k=None, filter=None)``.

    It owns LangChain's ``_get_relevant_documents`` / ``_aget_relevant_documents`` (so
    :func:`~langchain_ragspine.retrievers.contract.retriever_params` reads ``k`` and ``filter`` from them), refuses
    any other keyword argument, and passes the call to the hooks as a :class:`RetrieverCall`:

    * :meth:`_retrieve` (required): the sync path;
    * :meth:`_aretrieve`: the async path.  Default: :meth:`_retrieve` with the run's sync face, inline or in a
      worker thread (:attr:`~SyncBackedRetriever.run_async_in_executor`); a class with a truly asynchronous path (an
      async embedding call, inner retrievers run concurrently) overrides it.

    Every result list passes the RESTRICTED gate on its way out (:func:`~langchain_ragspine.sensitivity.
    drop_restricted`, the one constant :data:`~langchain_ragspine.sensitivity.RESTRICTED_SENSITIVITY`), so a hook
    cannot return a RESTRICTED chunk even when its index or a child retriever holds one.

    Attributes:
        call_options: class-level: the names of further keywords a call may pass (``HybridRetriever``:
            ``fetch_k``); they reach the hooks in :attr:`RetrieverCall.options`.  Default: none.
        renamed_arguments: class-level: the old names (:data:`~langchain_ragspine.arguments.RENAMED`:
            ``candidate_k``, ``parent_k`` …) the constructor accepts for one release, and a call too where the new
            name is a call option (``invoke(query, candidate_k=30)``): a ``DeprecationWarning`` naming the new
            name, a ``TypeError`` naming both when both are given with different values
            (:func:`~langchain_ragspine.arguments.rename_arguments`); reading or assigning the old attribute
            warns too.  Default: none.
        init_arguments: class-level: constructor keywords that are not fields, which the class's ``__init__`` turns
            into fields (``glossary`` / ``max_queries`` → a rewriter); the unknown-argument message lists them among
            the known names, so their misspellings get a did-you-mean too.  Default: none.

    ``invoke`` / ``ainvoke`` take one query string: anything else (a list, a dict, ``None``) is a ``TypeError`` of
    one line pointing at ``.batch`` / ``itemgetter`` (:func:`check_query`), raised before any work — a query
    transform's LLM call or an inner retriever's search.

    The call's ``k`` and filter are resolved here, once, for every subclass (:class:`RetrieverCall`): ``k`` is the
    call's (checked), else the retriever's own ``k`` field; the filter is the retriever's own ``filter`` field ANDed
    with the call's (filters never widen), compiled once.  A subclass's hooks read ``call.k`` / ``call.filter``.

    Assignments and :meth:`model_copy` updates are validated as the constructor validates (pydantic's own
    ``model_copy(update=…)`` does not: ``{"k": 0}`` or a malformed ``filter`` would be kept and fail at the next
    search, or quietly return nothing), then checked across fields (:meth:`_check_fields`); a refused one changes
    nothing.  :meth:`model_copy` refuses an ``update`` key that is not a field (``{"top_k": 3}`` would otherwise be
    stored and ignored).  A retriever's own ``k`` field (where it has one) is still checked at every call, before
    any work, for ``model_construct``, which skips validation.

    An unknown constructor argument is a ``TypeError`` of one line with a did-you-mean, e.g. ``MultiQueryRetriever
    got unexpected argument 'num_queries' (did you mean 'n_queries'?); known: ...`` (the model forbids extra fields:
    ``extra="forbid"``, inherited by every subclass; a subclass maps accepted synonyms onto fields in
    :meth:`_translate_arguments`).  ``name``, ``tags`` and ``metadata`` (``BaseRetriever``'s own fields) are fields
    like the others, so ``with_config``, ``configurable_fields`` and ``model_copy`` work as in LangChain.

    Raises:
        TypeError: an unknown constructor argument (see above); a call with another keyword argument — ``<class>.invoke got unexpected keyword argument 'kk'
            (did you mean 'k'?); known: 'filter', 'k'`` (:func:`~langchain_ragspine.arguments.unknown_arguments_message`);
            a query that is not a string; the retriever's ``k`` is not an int (set by ``model_copy``); an unknown
            ``model_copy`` update key, with a did-you-mean.
        ValueError: the retriever's own ``k`` is below 1 (set by ``model_copy`` or ``model_construct``), naming the
            class and the value.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid", validate_assignment=True)

    call_options: ClassVar[tuple[str, ...]] = ()
    init_arguments: ClassVar[tuple[str, ...]] = ()
    renamed_arguments: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        """Give each of :attr:`renamed_arguments` that names a field now its old attribute: reading or assigning
        ``retriever.candidate_k`` is ``fetch_k``'s, with a ``DeprecationWarning``
        (:func:`~langchain_ragspine.arguments.renamed_property`)."""
        super().__pydantic_init_subclass__(**kwargs)
        for old in cls.renamed_arguments:
            if RENAMED[old] in cls.model_fields and not isinstance(getattr(cls, old, None), property):
                setattr(cls, old, renamed_property(old))

    @classmethod
    def _translate_arguments(cls, data: dict[str, Any]) -> dict[str, Any]:
        """Map accepted synonyms (e.g. LangChain's names) onto fields; the default accepts none."""
        return data

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown_arguments(cls, data: Any) -> Any:
        """An unknown constructor argument is a ``TypeError`` with a did-you-mean (before pydantic's own
        ``extra="forbid"`` check, whose ``ValidationError`` names no alternative)."""
        if isinstance(data, dict):
            fields = cls._field_names()
            renamed = [old for old in cls.renamed_arguments if RENAMED[old] in fields]
            data = cls._translate_arguments(rename_arguments(cls.__name__, data, renamed))
            unknown = [name for name in data if name not in fields]
            if unknown:
                raise TypeError(unknown_arguments_message(cls.__name__, unknown, fields | set(cls.init_arguments)))
        return data

    @classmethod
    def _field_names(cls) -> set[str]:
        """The names a constructor or ``model_copy(update=…)`` accepts: the fields and their aliases."""
        return set(cls.model_fields) | {f.alias for f in cls.model_fields.values() if f.alias}

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """pydantic's ``model_copy``, with each ``update`` value validated as an assignment of it would be (pydantic's
        own copy does not validate: ``model_copy(update={"filter": {"$bogus": 1}})`` would be kept and fail at the
        next search), then the checks across fields (:meth:`_check_fields`).

        Raises:
            TypeError: an unknown key, with a did-you-mean (``top_k`` → ``k``).
            ValueError / TypeError: a value the field refuses (pydantic's ``ValidationError`` is a ``ValueError``),
                or the fields together; the original is unchanged either way.
        """
        if not update:
            return super().model_copy(deep=deep)
        check_arguments(f"{type(self).__name__}.model_copy", update, self._field_names(), what="update key")
        copied = super().model_copy(deep=deep)
        aliases = {f.alias: name for name, f in type(self).model_fields.items() if f.alias}
        for key, value in update.items():
            copied.__pydantic_validator__.validate_assignment(copied, aliases.get(key, key), value)
        copied._check_fields()
        return copied

    def _check_fields(self) -> None:
        """Checks across fields (a list that must not be empty, weights that must match it, …), run after every
        assignment to a field and every ``model_copy(update=…)`` (each field's own validators have run by then); a
        subclass with such checks runs them in ``model_post_init`` too.  Default: none.

        Raises:
            TypeError, ValueError: the subclass's; the assignment is then undone.
        """

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in type(self).model_fields:  # a private attribute, or an error pydantic reports
            super().__setattr__(name, value)
            return
        old = self.__dict__.get(name)
        super().__setattr__(name, value)  # validates the value (validate_assignment)
        try:
            self._check_fields()
        except Exception:
            self.__dict__[name] = old  # a refused assignment changes nothing
            raise

    def _check_own_k(self) -> None:
        """Check the retriever's own ``k`` field, if it has one (``None`` passes where ``None`` is the default)."""
        field = type(self).model_fields.get("k")
        if field is None:
            return
        value = self.__dict__.get("k")
        if value is None and field.default is None:
            return
        try:
            check_k(value, f"{type(self).__name__}.k")
        except (TypeError, ValueError) as e:
            raise type(e)(
                f"{e}; model_construct does not validate, so use the constructor, an assignment (retriever.k = 3), "
                "model_copy(update={'k': 3}) or invoke(query, k=3)"
            ) from None

    @gated_exit
    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        filter: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        return drop_restricted(self._retrieve(query, self._call(run_manager, k, filter, kwargs)))

    @gated_exit
    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        filter: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        return drop_restricted(await self._aretrieve(query, self._call(run_manager, k, filter, kwargs)))

    @gated_exit
    def invoke(self, input: str, config: RunnableConfig | None = None, **kwargs: Any) -> list[Document]:
        return super().invoke(check_query(type(self).__name__, input), config, **kwargs)

    @gated_exit
    async def ainvoke(self, input: str, config: RunnableConfig | None = None, **kwargs: Any) -> list[Document]:
        return await super().ainvoke(check_query(type(self).__name__, input), config, **kwargs)

    def _call(
        self, run_manager: RunManager, k: int | None, filter: Mapping[str, Any] | None, kwargs: Mapping[str, Any]
    ) -> RetrieverCall[RunManager]:
        self._check_own_k()
        cls = type(self)
        renamed = [old for old in cls.renamed_arguments if old in kwargs and RENAMED[old] in cls.call_options]
        if renamed:
            kwargs = rename_arguments(f"{cls.__name__}.invoke", kwargs, renamed)
        unknown = sorted(name for name in kwargs if name not in type(self).call_options)
        if unknown:
            known = ("k", "filter", *type(self).call_options)
            raise TypeError(
                unknown_arguments_message(f"{type(self).__name__}.invoke", unknown, known, what="keyword argument")
            )
        # the call's filter is validated and compiled here, once, then ANDed with the retriever's own (a call narrows,
        # never widens): every channel, gate and merge of the call gets it; then k, the call's or the retriever's own
        flt = compiled_filter(filter)
        own = self.__dict__.get("filter") if "filter" in cls.model_fields else None
        if own:
            flt = compiled_filter(own, flt)
        resolved_k = check_k(k) if k is not None else self.__dict__.get("k") if "k" in cls.model_fields else None
        return RetrieverCall(resolved_k, flt, run_manager, dict(kwargs))

    def _retrieve(self, query: str, call: SyncCall) -> list[Document]:
        """The documents for ``query`` under ``call`` (see the class docstring)."""
        raise NotImplementedError

    async def _aretrieve(self, query: str, call: AsyncCall) -> list[Document]:
        """Async :meth:`_retrieve` (default: the sync one, see the class docstring)."""
        sync = RetrieverCall(call.k, call.filter, call.run_manager.get_sync(), call.options)
        return await self._run_sync(functools.partial(self._retrieve, query, sync))


class RagSpineRetriever(ContractRetriever):
    """A :class:`ContractRetriever` built over an index of its own: validated assignments, and an index rebuilt
    when a field it is built from is assigned (see the module docstring).

    Subclasses list in :attr:`index_fields` the fields their index is built from, call :meth:`_mark_built` at the
    end of ``model_post_init``, and may translate LangChain synonyms in :meth:`_translate_arguments`.  A subclass
    with a ``docs`` field keeps what it indexed with :meth:`_set_indexed_docs` and reads it back with
    :meth:`_indexed_docs`, which refuses to answer from documents the index was not built from.

    Raises:
        TypeError: an unknown constructor argument (with a did-you-mean); a query that is not a string.
    """

    #: Fields the index is built from: assigning one after construction rebuilds the index.
    index_fields: ClassVar[tuple[str, ...]] = ()

    _built: bool = PrivateAttr(default=False)
    _snapshot: IndexedDocuments | None = PrivateAttr(default=None)
    _index_keys: tuple[IndexedDocuments, frozenset[str]] | None = PrivateAttr(default=None)

    def _mark_built(self) -> None:
        """Called at the end of ``model_post_init``: from now on an assignment to an index field rebuilds."""
        self._built = True

    def _set_indexed_docs(self, docs: Iterable[Document]) -> IndexedDocuments:
        """Make ``docs`` (the documents the index is built from) the read-only ``self.docs``."""
        snapshot = IndexedDocuments(docs, type(self).__name__)
        self.__dict__["docs"] = snapshot  # not through validation, which would turn it into a plain list
        self._snapshot = snapshot
        return snapshot

    def _indexed_docs(self) -> IndexedDocuments:
        """The documents the index was built from.

        Raises:
            ValueError: ``docs`` was replaced without a rebuild (``model_construct``, a write to ``__dict__``).
        """
        snapshot = self._snapshot
        if isinstance(snapshot, IndexedDocuments) and self.__dict__.get("docs") is snapshot:
            return cast(IndexedDocuments, snapshot)
        raise ValueError(
            f"{type(self).__name__}.docs is not the list its index was built from (replaced without a rebuild); "
            "assign retriever.docs = [...] or use retriever.model_copy(update={'docs': [...]}), which rebuild the index"
        )

    def served_ids(self, ids: Sequence[str]) -> ServedIds | None:
        """Which of ``ids`` this retriever would still return (:mod:`~langchain_ragspine.served`): for a retriever
        over its own index (a ``docs`` field: BM25, dense), the ids (:func:`~langchain_ragspine.documents.chunk_key`)
        of the documents the index was built from — RESTRICTED ones were never indexed, and nothing is ever withdrawn
        from a snapshot (a store's relabel reaches it through :class:`~langchain_ragspine.retrievers.live.
        LiveStoreRetriever`, which reloads).  The id set is built once per index (O(chunks) the first time, then
        O(len(ids))).  ``None`` (cannot tell) for a subclass without ``docs``.

        Example:
            >>> from langchain_core.documents import Document
            >>> from langchain_ragspine.retrievers import BM25Retriever
            >>> BM25Retriever.from_documents([Document("a b", id="a#0")]).served_ids(["a#0", "b#0"]).served
            frozenset({'a#0'})
        """
        if "docs" not in type(self).model_fields:
            return None
        docs = self._indexed_docs()
        cached = self._index_keys
        if cached is None or cached[0] is not docs:
            cached = self._index_keys = (docs, frozenset(k for k in map(chunk_key, docs) if k is not None))
        return ServedIds.of(ids, cached[1].intersection(ids))

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """pydantic's ``model_copy``; an ``update`` of an :attr:`index_fields` field (validated) rebuilds the copy's
        index, so ``retriever.model_copy(update={"docs": other})`` searches ``other``."""
        rest = dict(update or {})
        rebuild = {name: rest.pop(name) for name in list(rest) if name in type(self).index_fields}
        copied = super().model_copy(update=rest or None, deep=deep)
        if rebuild:
            copied._built = False
            for name, value in rebuild.items():
                setattr(copied, name, value)
            copied.model_post_init(None)
        return copied

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in type(self).model_fields:  # a private attribute, or an error pydantic reports
            super().__setattr__(name, value)
            return
        old = self.__dict__.get(name)
        super().__setattr__(name, value)  # validated, checked across fields, undone if refused (ContractRetriever)
        if name in type(self).index_fields and self._built:
            self._built = False
            try:
                self.model_post_init(None)  # rebuild from the new value (and mark built again)
            except Exception:
                self.__dict__[name] = old  # a refused assignment changes nothing: the index of the old value
                self._built = False
                self.model_post_init(None)
                raise
