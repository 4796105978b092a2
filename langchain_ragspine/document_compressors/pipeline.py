"""Compressor pipelines that start with the RESTRICTED gate.

LangChain chains post-processing steps with ``DocumentCompressorPipeline`` and attaches them to a retriever with
``ContextualCompressionRetriever`` (both in ``langchain-classic``).  Wherever such a pipeline leads to a prompt, the
package's rule is that :class:`~langchain_ragspine.document_compressors.restricted.RestrictedGate` runs first, so
no later step — a listwise LLM reranker, a user's own compressor — ever sees a RESTRICTED chunk.  :func:`gated_pipeline`
and :func:`gated_compression_retriever` build them that way.

``langchain-classic`` is imported when one of these functions is called (it is not a core dependency of the
package); ``pip install langchain-classic`` provides it.

:class:`SecondStageRetriever` is the package's own two-stage retriever, used by ``ragspine search`` / ``eval``
with ``--rerank`` / ``--postprocess``: it honours a call's ``k`` and ``filter`` (the retriever-call contract),
fetches ``max(k, fetch_k)`` first-stage candidates when a stage chooses among them (a reranker, MMR), runs the
gate and the compressors, and returns ``k``.  It needs no ``langchain-classic``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.documents import BaseDocumentCompressor, BaseDocumentTransformer, Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, field_validator

from langchain_ragspine.arguments import DEFAULT_FETCH_K, DEFAULT_K, PositiveIntField, check_k
from langchain_ragspine.document_compressors.restricted import RestrictedGate, drop_restricted
from langchain_ragspine.retrievers.base import AsyncCall, ContractRetriever, SyncCall
from langchain_ragspine.retrievers.contract import ainvoke_retriever, invoke_retriever, traces_own_run
from langchain_ragspine.retrievers.gated import GatedRetriever

__all__ = ["SecondStageRetriever", "gated_compression_retriever", "gated_pipeline", "selects_candidates"]

Step = BaseDocumentCompressor | BaseDocumentTransformer


def _classic() -> Any:
    try:
        import langchain_classic.retrievers as classic
        import langchain_classic.retrievers.document_compressors as compressors
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "DocumentCompressorPipeline and ContextualCompressionRetriever live in langchain-classic: "
            "pip install langchain-classic"
        ) from e
    return classic, compressors


def gated_pipeline(transformers: Sequence[Step]) -> Any:
    """A ``DocumentCompressorPipeline`` running ``RestrictedGate()`` first, then ``transformers`` in order.

    A ``RestrictedGate`` already first in ``transformers`` is not doubled.

    Returns:
        ``langchain_classic.retrievers.document_compressors.DocumentCompressorPipeline``.

    Raises:
        TypeError: an item is neither a ``BaseDocumentCompressor`` nor a ``BaseDocumentTransformer``.
        ImportError: langchain-classic is not installed.
    """
    steps = list(transformers)
    for i, step in enumerate(steps):
        if not isinstance(step, (BaseDocumentCompressor, BaseDocumentTransformer)):
            raise TypeError(
                f"transformers[{i}] is a {type(step).__name__}; expected a BaseDocumentCompressor or "
                "BaseDocumentTransformer"
            )
    if not steps or not isinstance(steps[0], RestrictedGate):
        steps.insert(0, RestrictedGate())
    _, compressors = _classic()
    return compressors.DocumentCompressorPipeline(transformers=steps)


def gated_compression_retriever(base_retriever: BaseRetriever, transformers: Sequence[Step]) -> Any:
    """A ``ContextualCompressionRetriever`` over ``base_retriever`` whose compressor is
    :func:`gated_pipeline` ``(transformers)``.

    A ``base_retriever`` that is not one of the package's gated retrievers (:func:`~langchain_ragspine.retrievers.
    contract.traces_own_run`) is wrapped in a :class:`~langchain_ragspine.retrievers.gated.GatedRetriever`: LangChain's
    class runs its base as a child run with the caller's callbacks, which would hand its RESTRICTED documents to
    LangSmith and ``astream_events`` before the gate; behind the wrapper it runs untraced and the trace shows the
    gated result.

    Raises:
        TypeError: ``base_retriever`` is not a ``BaseRetriever``; a bad item in ``transformers``.
        ImportError: langchain-classic is not installed.
    """
    if not isinstance(base_retriever, BaseRetriever):
        raise TypeError(f"base_retriever must be a BaseRetriever, got {type(base_retriever).__name__}")
    pipeline = gated_pipeline(transformers)
    classic, _ = _classic()
    if not traces_own_run(base_retriever):
        base_retriever = GatedRetriever(retriever=base_retriever)
    return classic.ContextualCompressionRetriever(base_compressor=pipeline, base_retriever=base_retriever)


def _selects(step: object) -> bool:
    from langchain_ragspine.document_compressors.cross_encoder import CrossEncoderReranker
    from langchain_ragspine.document_compressors.learned.reranker import LearnedReranker
    from langchain_ragspine.document_compressors.listwise import LLMListwiseReranker
    from langchain_ragspine.document_compressors.mmr import MMRCompressor

    return isinstance(step, (CrossEncoderReranker, LLMListwiseReranker, MMRCompressor, LearnedReranker))


def selects_candidates(compressors: Sequence[object]) -> bool:
    """Whether a second stage chooses among more candidates than it returns — it holds a reranker
    (``CrossEncoderReranker``, ``LLMListwiseReranker``, ``LearnedReranker``) or ``MMRCompressor`` — so the first stage should fetch
    ``max(k, fetch_k)`` candidates; reordering and compression alone need no more than ``k``."""
    return any(_selects(c) for c in compressors)


class SecondStageRetriever(ContractRetriever):
    """A first-stage retriever followed by the RESTRICTED gate and second-stage compressors (rerankers, MMR,
    lost-in-the-middle, compression), asked for ``k`` results like any retriever of the package.

    A call ``invoke(query, k=..., filter=...)``:

    1. asks ``base_retriever`` for ``max(k, fetch_k)`` candidates when a compressor chooses among candidates
       (:func:`selects_candidates`), else for ``k``, passing ``filter`` through the retriever-call contract
       (:func:`~langchain_ragspine.retrievers.contract.invoke_retriever`: applied before scoring, or to the results);
    2. drops RESTRICTED candidates (the gate comes first, so no compressor — an LLM reranker included — sees one);
    3. runs ``compressors`` in order, cutting to ``k`` right after the last choosing one (so a reorder that follows,
       e.g. lost-in-the-middle, orders the ``k`` that are returned);
    4. returns at most ``k`` documents, gated once more.

    With no compressors it returns the base retriever's gated top ``k`` unchanged.

    Args:
        base_retriever: any ``BaseRetriever``.
        compressors: ``BaseDocumentCompressor``\\ s, run in order (e.g. :func:`~langchain_ragspine.document_compressors.factory.make_compressors`).
        k: results when a call gives none (default 6, :data:`~langchain_ragspine.arguments.DEFAULT_K`).
        fetch_k: first-stage candidates for a choosing stage (default
            :data:`~langchain_ragspine.arguments.DEFAULT_FETCH_K`, 20); the pool is ``max(k, fetch_k)``.

    Raises:
        TypeError: ``base_retriever`` is not a ``BaseRetriever``, a compressor is not a ``BaseDocumentCompressor``,
            ``k`` / ``fetch_k`` not an int.
        ValueError: ``k`` / ``fetch_k`` < 1.
    """

    base_retriever: BaseRetriever
    compressors: list[BaseDocumentCompressor]
    k: PositiveIntField = DEFAULT_K
    fetch_k: PositiveIntField = DEFAULT_FETCH_K

    model_config = ConfigDict(arbitrary_types_allowed=True)

    @field_validator("base_retriever", mode="before")
    @classmethod
    def _check_base(cls, value: Any) -> Any:
        if not isinstance(value, BaseRetriever):
            raise TypeError(f"base_retriever must be a BaseRetriever, got {type(value).__name__}")
        return value

    @field_validator("compressors", mode="before")
    @classmethod
    def _check_compressors(cls, value: Any) -> Any:
        steps = list(value)
        for i, step in enumerate(steps):
            if not isinstance(step, BaseDocumentCompressor):
                raise TypeError(f"compressors[{i}] is a {type(step).__name__}; expected a BaseDocumentCompressor")
        return steps

    def _plan(self, k: int | None) -> tuple[int, int, int]:
        """``(k, first-stage depth, index of the last choosing compressor or -1)``."""
        k = check_k(self.k if k is None else k)  # the call's k comes resolved; _plan is also asked without one
        last = max((i for i, c in enumerate(self.compressors) if _selects(c)), default=-1)
        return k, max(k, self.fetch_k) if last >= 0 else k, last

    def _retrieve(self, query: str, call: SyncCall) -> list[Document]:
        k, depth, last = self._plan(call.k)
        docs = drop_restricted(invoke_retriever(self.base_retriever, query, k=depth, filter=call.filter,
                                                config={"callbacks": call.run_manager.get_child()}))
        for i, step in enumerate(self.compressors):
            docs = _stage(step.compress_documents(docs, query, callbacks=call.run_manager.get_child()), k, i == last)
        return docs[:k]

    async def _aretrieve(self, query: str, call: AsyncCall) -> list[Document]:
        k, depth, last = self._plan(call.k)
        docs = drop_restricted(await ainvoke_retriever(self.base_retriever, query, k=depth, filter=call.filter,
                                                       config={"callbacks": call.run_manager.get_child()}))
        for i, step in enumerate(self.compressors):
            docs = _stage(await step.acompress_documents(docs, query, callbacks=call.run_manager.get_child()), k,
                          i == last)
        return docs[:k]


def _stage(docs: Sequence[Document], k: int, last: bool) -> list[Document]:
    """A compressor's output, gated, and cut to ``k`` when it is the last one that chooses among candidates."""
    docs = drop_restricted(docs)
    return docs[:k] if last else docs
