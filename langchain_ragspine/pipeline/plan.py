"""The retrieval plan: a base mode, query transformations and a second stage, built into one retriever here.

A :class:`RetrievalPlan` says *what* to search with: the base mode (:mod:`langchain_ragspine.pipeline.modes`: ``auto``,
``bm25``, ``hybrid`` …), the query transformations that wrap it in order (``hyde``, ``glossary`` …, built by
:func:`~langchain_ragspine.retrievers.transforms.make_query_transform`) and the second stage behind them (a reranker spec and
post-processing steps, built by :func:`~langchain_ragspine.document_compressors.factory.make_compressors`, run behind the RESTRICTED gate
by :class:`~langchain_ragspine.document_compressors.SecondStageRetriever`).  :func:`build_retriever` builds it over a
store (a directory or ``postgresql://`` URL, opened by :func:`~langchain_ragspine.pipeline.sources.open_retriever`, so a
directory's retriever follows the store) or any :class:`~langchain_ragspine.pipeline.modes.RetrieverSource` (chunks
in memory: :class:`~langchain_ragspine.pipeline.modes.DocumentsSource`); :func:`retriever_factory` makes the
``documents -> retriever`` factory an evaluation times.  ``ragspine search | ask | eval``, ``graphs/app.py`` (the
served graphs) and the benchmarks all build their retrievers here::

    from langchain_ragspine.pipeline.plan import RetrievalPlan, build_retriever

    plan = RetrievalPlan(mode="bm25", transforms=("glossary",), postprocessor="mmr")
    retriever = build_retriever(plan, "store", k=6, glossary="glossary.yaml")
    # SecondStageRetriever(GlossaryRetriever(LiveStoreRetriever(BM25Retriever)), [MMRCompressor], k=6)

A query transformation is not a mode: ``RetrievalPlan.of("hyde")`` (a transformation's name given as the mode, the
spelling ``--mode hyde`` and ``RAGSPINE_RETRIEVAL_MODE=hyde`` used) is ``RetrievalPlan("auto", ("hyde",))``, with a
``DeprecationWarning`` naming the new spelling; that spelling goes in the next release.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.retrievers import BaseRetriever

from langchain_ragspine import document_compressors
from langchain_ragspine._stacklevel import user_stacklevel
from langchain_ragspine.arguments import DEFAULT_FETCH_K, check_k
from langchain_ragspine.configured import configured_setting
from langchain_ragspine.document_compressors import selects_candidates
from langchain_ragspine.document_compressors.factory import make_compressors
from langchain_ragspine.pipeline.modes import (
    RetrieverSource,
    build_mode,
    mode_factory,
    resolve_mode,
    split_mode,
    transform_mode_message,
)
from langchain_ragspine.pipeline.sources import open_retriever
from langchain_ragspine.retrievers.transforms import make_query_transform
from langchain_ragspine.specs import (
    configured_postprocessor,
    configured_query_transform,
    configured_reranker,
    normalise_postprocessor_spec,
    normalise_reranker_spec,
    resolve_query_transform,
)

__all__ = ["RetrievalPlan", "build_retriever", "retriever_factory"]

@dataclass(frozen=True)
class RetrievalPlan:
    """What a retriever is built from: a base mode, query transformations around it, a second stage behind them.

    ``RetrievalPlan()`` is :func:`~langchain_ragspine.pipeline.sources.open_retriever`'s retriever (mode
    ``RAGSPINE_RETRIEVAL_MODE``, else ``auto``; no transformation, no second stage); :meth:`of` reads a mode the
    way a user writes it, :meth:`configured` adds the ``RAGSPINE_*`` defaults the CLI uses.

    Attributes:
        mode: the base mode, a registered mode name or alias (``None``: ``RAGSPINE_RETRIEVAL_MODE``, else
            ``auto``, read when the retriever is built).
        transforms: query transformations (:data:`~langchain_ragspine.specs.QUERY_TRANSFORMS` names, ``none``
            excluded), applied in order: the first wraps the base mode's retriever, the next wraps that.
        reranker: the second stage's reranker spec (:data:`~langchain_ragspine.specs.RERANKER_SPECS`;
            ``"none"``: none).
        postprocessor: the post-processing steps after it (``"mmr,lost_in_middle"``; ``"none"``: none).
        fetch_k: the candidates a choosing second stage (a reranker, ``mmr``) picks ``k`` from (``None``:
            :data:`~langchain_ragspine.arguments.DEFAULT_FETCH_K`); ignored without one.

    Raises:
        ValueError: an unknown transformation, reranker or post-processing step; ``fetch_k`` below 1.
        TypeError: a field of the wrong type.
    """

    mode: str | None = None
    transforms: tuple[str, ...] = ()
    reranker: str = "none"
    postprocessor: str = "none"
    fetch_k: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.transforms, str) or not isinstance(self.transforms, Sequence):
            raise TypeError(f"transforms is a tuple of query transformation names, got {self.transforms!r}")
        names = tuple(n for n in (resolve_query_transform(t) for t in self.transforms) if n != "none")
        if self.mode is not None:
            base, inner = split_mode(self.mode)  # checks the mode; an alias is its mode's name
            if inner is not None:  # a transformation given as the mode: `auto` + it, applied once
                warnings.warn(transform_mode_message(inner), DeprecationWarning, stacklevel=user_stacklevel())
                names = (inner, *(names[1:] if names[:1] == (inner,) else names))
            object.__setattr__(self, "mode", base)
        object.__setattr__(self, "transforms", names)
        object.__setattr__(self, "reranker", normalise_reranker_spec(self.reranker))
        object.__setattr__(self, "postprocessor", normalise_postprocessor_spec(self.postprocessor))
        if self.fetch_k is not None:
            object.__setattr__(self, "fetch_k", check_k(self.fetch_k, "fetch_k"))

    @classmethod
    def of(
        cls,
        mode: str | None = None,
        *,
        transform: str = "none",
        reranker: str = "none",
        postprocessor: str = "none",
        fetch_k: int | None = None,
    ) -> RetrievalPlan:
        """The plan of a mode as a user writes it, plus one outer ``transform``.

        ``mode`` is read now (``None``: ``RAGSPINE_RETRIEVAL_MODE``, else ``auto``); a query transformation's name
        given as the mode (``"hyde"``: deprecated, with a ``DeprecationWarning`` naming the new spelling) is mode
        ``auto`` with that transformation.  ``transform`` (``"none"``: none) wraps the result, unless it is the
        mode's own transformation (``of("glossary", transform="glossary")`` applies the glossary once).  A mode left
        ``None`` stays ``None`` (read again when the retriever is built), unless it named a transformation.

        Raises:
            ValueError: an unknown mode (from ``RAGSPINE_RETRIEVAL_MODE``: the message names it), transformation or
                second-stage spec.

        Example:
            >>> RetrievalPlan.of("bm25", transform="HyDE").transforms
            ('hyde',)
        """
        name = resolve_mode(mode)
        if split_mode(name)[1] is not None:
            mode = name  # RAGSPINE_RETRIEVAL_MODE=hyde: the constructor splits it, now
        return cls(mode, (resolve_query_transform(transform),), reranker, postprocessor, fetch_k)

    @classmethod
    def configured(
        cls,
        mode: str | None = None,
        *,
        transform: str | None = None,
        reranker: str | None = None,
        postprocessor: str | None = None,
        fetch_k: int | None = None,
    ) -> RetrievalPlan:
        """:meth:`of`, with each ``None`` read from its setting: ``RAGSPINE_QUERY_TRANSFORM``,
        ``RAGSPINE_RERANKER``, ``RAGSPINE_POSTPROCESSOR`` (unset: ``none``) — what ``ragspine search | ask | eval``
        build without ``--transform`` / ``--rerank`` / ``--postprocess``.  (:func:`~langchain_ragspine.pipeline.sources.
        open_retriever` and ``RetrievalPlan()`` read none of them.)

        Raises:
            ValueError: as :meth:`of`; a bad value of one of those variables (the message names it).
        """
        return cls.of(
            mode,
            transform=configured_query_transform() if transform is None else transform,
            reranker=configured_reranker() if reranker is None else reranker,
            postprocessor=configured_postprocessor() if postprocessor is None else postprocessor,
            fetch_k=fetch_k,
        )

    def first_stage(self) -> RetrievalPlan:
        """This plan without its second stage (the base mode and transformations only)."""
        return replace(self, reranker="none", postprocessor="none", fetch_k=None)

    def compressors(self, *, k: int, llm: BaseChatModel | None = None) -> list[BaseDocumentCompressor]:
        """The second stage (:func:`~langchain_ragspine.document_compressors.factory.make_compressors`: the reranker keeping ``k``, then
        the post-processing steps); ``[]`` when both are ``none``.  ``llm`` is the ``llm`` reranker's chat model
        (``None``: ``RAGSPINE_LLM``'s).

        Raises:
            ValueError / ImportError / OSError: as :func:`~langchain_ragspine.document_compressors.factory.make_compressors`.
        """
        return make_compressors(self.reranker, self.postprocessor, k=k, llm=llm)

    def candidates(self, k: int, compressors: Sequence[object]) -> int:
        """How many results the first stage should return for ``k`` final ones behind ``compressors``:
        ``max(k, fetch_k)`` (default :data:`~langchain_ragspine.arguments.DEFAULT_FETCH_K`) when one of them chooses
        among candidates (a reranker, ``mmr``), else ``k``."""
        if not selects_candidates(compressors):
            return k
        return max(k, DEFAULT_FETCH_K if self.fetch_k is None else self.fetch_k)

    def transform(
        self, base: BaseRetriever, *, llm: BaseChatModel | str | None = None, glossary: object = None,
        k: int | None = None,
    ) -> BaseRetriever:
        """``base`` (the base mode's retriever) through the plan's transformations, in order (none: ``base``).

        Args:
            base: the base mode's retriever.
            llm: the LLM transformations' chat model (a ``BaseChatModel``, a spec, or ``"none"`` for none: they are
                then skipped with one warning); ``None``: ``RAGSPINE_LLM``'s.
            glossary: the ``glossary`` transformation's glossary (a file, a ``Glossary`` or its data; ``None``:
                ``RAGSPINE_GLOSSARY``).
            k: each transformation's own ``k`` (``None``: none, so a call's ``k`` or the base's applies).

        Raises:
            ValueError: as :func:`~langchain_ragspine.retrievers.transforms.make_query_transform` (``glossary`` without a
                glossary, a bad chat model spec).
        """
        fields: dict[str, Any] = {} if k is None else {"k": k}
        retriever = base
        for name in self.transforms:
            retriever = make_query_transform(name, retriever, llm=llm, glossary=glossary, **fields)
        return retriever

    def second_stage(
        self, retriever: BaseRetriever, *, k: int, compressors: Sequence[BaseDocumentCompressor] | None = None,
        llm: BaseChatModel | None = None,
    ) -> BaseRetriever:
        """``retriever`` behind the plan's second stage: a :class:`~langchain_ragspine.document_compressors.
        SecondStageRetriever` returning ``k`` results from ``fetch_k`` candidates (default
        :data:`~langchain_ragspine.arguments.DEFAULT_FETCH_K`); without one, ``retriever`` itself.

        Args:
            retriever: the first stage (the base mode's retriever, transformed).
            k: the results returned.
            compressors: the second stage, built already (shared by several retrievers); ``None``: built here by
                :meth:`compressors` with ``llm``.
            llm: the ``llm`` reranker's chat model (``None``: ``RAGSPINE_LLM``'s).

        Raises:
            ValueError / ImportError / OSError: as :meth:`compressors`.
        """
        stage = self.compressors(k=k, llm=llm) if compressors is None else list(compressors)
        if not stage:
            return retriever
        pool = DEFAULT_FETCH_K if self.fetch_k is None else self.fetch_k
        return document_compressors.SecondStageRetriever(base_retriever=retriever, compressors=stage, k=k,
                                                         fetch_k=pool)

    def wrap(
        self,
        base: BaseRetriever,
        *,
        k: int,
        llm: BaseChatModel | str | None = None,
        glossary: object = None,
        compressors: Sequence[BaseDocumentCompressor] | None = None,
        transform_k: int | None = None,
    ) -> BaseRetriever:
        """``base`` through :meth:`transform` (``transform_k``: the transformations' own ``k``), then behind
        :meth:`second_stage` (``k`` results); ``llm`` is the transformations' chat model and, when it is a
        ``BaseChatModel``, the ``llm`` reranker's.

        Raises:
            ValueError / ImportError / OSError: as :meth:`transform` and :meth:`second_stage`.
        """
        chat = llm if isinstance(llm, BaseChatModel) else None
        transformed = self.transform(base, llm=llm, glossary=glossary, k=transform_k)
        return self.second_stage(transformed, k=k, compressors=compressors, llm=chat)


def _is_store(source: object) -> bool:
    return isinstance(source, (str, os.PathLike))


def build_retriever(
    plan: RetrievalPlan | str | None,
    source: RetrieverSource | str | os.PathLike[str],
    *,
    k: int | None = None,
    tokenizer: str | None = None,
    embedding: str | Embeddings | None = None,
    llm: BaseChatModel | str | None = None,
    glossary: object = None,
    compressors: Sequence[BaseDocumentCompressor] | None = None,
    transform_k: int | None = None,
    **options: Any,
) -> BaseRetriever:
    """The retriever of ``plan`` over ``source``: the base mode's retriever, wrapped in the plan's transformations
    and second stage (:meth:`RetrievalPlan.wrap`).

    Args:
        plan: the plan; a mode name is :meth:`RetrievalPlan.of` it; ``None``: ``RetrievalPlan()``.
        source: a store directory or ``postgresql://`` URL — its retriever is :func:`~langchain_ragspine.pipeline.sources.
            open_retriever`'s (a directory's follows the store: a :class:`~langchain_ragspine.retrievers.
            LiveStoreRetriever`) — or a :class:`~langchain_ragspine.pipeline.modes.RetrieverSource` (a store opened
            with :func:`~langchain_ragspine.pipeline.sources.open_source`, chunks in memory).
        k: results per ``invoke`` (default ``RAGSPINE_K``, else 6).
        tokenizer: the BM25 tokenizer of a :class:`RetrieverSource` (``None``: its own); a store's is the one it
            was indexed with.
        embedding: a store's query encoder (default: the one its vector index was built with).
        llm: the chat model of the LLM transformations and the ``llm`` reranker (see :meth:`RetrievalPlan.wrap`).
        glossary: the ``glossary`` transformation's glossary (default ``RAGSPINE_GLOSSARY``).
        compressors: the second stage, built already (default: the plan's, built here before the store is opened,
            so a bad spec fails first).
        transform_k: the transformations' own ``k`` (default none: a call's ``k`` or the base's applies).
        options: the base mode's options (``hybrid``: ``alpha``, ``fusion`` …; ``fetch_k``: its candidates per
            channel).

    Raises:
        StoreError: no store at ``source``; a mode that needs a vector index the store lacks.
        ValueError: an unknown mode or spec; a mode that needs an embedding model there is none of.
        TypeError: options given to a mode that takes none.
    """
    plan = plan if isinstance(plan, RetrievalPlan) else RetrievalPlan.of(plan)
    k = check_k(k) if k is not None else cast(int, configured_setting("k"))
    if compressors is None:
        compressors = plan.compressors(k=k, llm=llm if isinstance(llm, BaseChatModel) else None)
    if _is_store(source):
        base = open_retriever(cast("str | os.PathLike[str]", source), k=k, mode=plan.mode, embedding=embedding,
                              **options)
    else:
        base = build_mode(plan.mode, cast(RetrieverSource, source), k=k, tokenizer=tokenizer, **options)
    return plan.wrap(base, k=k, llm=llm, glossary=glossary, compressors=compressors, transform_k=transform_k)


def retriever_factory(
    plan: RetrievalPlan | str | None,
    *,
    k: int,
    tokenizer: str | None = None,
    embedding: str | Embeddings | None = None,
    llm: BaseChatModel | str | None = None,
    glossary: object = None,
    compressors: Sequence[BaseDocumentCompressor] | None = None,
    transform_k: int | None = None,
    **options: Any,
) -> Callable[[list[Document]], BaseRetriever]:
    """A factory ``documents -> retriever`` building ``plan`` over chunks in memory
    (:func:`~langchain_ragspine.pipeline.modes.mode_factory` for the base mode, then :meth:`RetrievalPlan.wrap`):
    what :func:`~langchain_ragspine.evaluation.evaluate` times as index time (BEIR corpora, benchmarks).  The
    embedding model and the second stage are made once, here; the arguments are :func:`build_retriever`'s.

    Raises:
        ValueError: as :func:`build_retriever`, raised here, before any document is indexed.
    """
    plan = plan if isinstance(plan, RetrievalPlan) else RetrievalPlan.of(plan)
    if compressors is None:
        compressors = plan.compressors(k=k, llm=llm if isinstance(llm, BaseChatModel) else None)
    stage = list(compressors)
    base = mode_factory(plan.mode, k=k, tokenizer=tokenizer, embedding=embedding, **options)
    return lambda documents: plan.wrap(base(documents), k=k, llm=llm, glossary=glossary, compressors=stage,
                                       transform_k=transform_k)
