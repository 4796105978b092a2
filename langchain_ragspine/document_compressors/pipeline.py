"""Compressor pipelines that start with the RESTRICTED gate.

LangChain chains post-processing steps with ``DocumentCompressorPipeline`` and attaches them to a retriever with
``ContextualCompressionRetriever`` (both in ``langchain-classic``).  Wherever such a pipeline leads to a prompt, the
package's rule is that :class:`~langchain_ragspine.document_compressors.restricted.RestrictedGate` runs first, so
no later step — a listwise LLM reranker, a user's own compressor — ever sees a RESTRICTED chunk.  :func:`gated_pipeline`
and :func:`gated_compression_retriever` build them that way.

``langchain-classic`` is imported when one of these functions is called (it is not a core dependency of the
package); ``pip install langchain-classic`` provides it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.documents import BaseDocumentCompressor, BaseDocumentTransformer
from langchain_core.retrievers import BaseRetriever

from langchain_ragspine.document_compressors.restricted import RestrictedGate

__all__ = ["gated_compression_retriever", "gated_pipeline"]

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

    Raises:
        TypeError: ``base_retriever`` is not a ``BaseRetriever``; a bad item in ``transformers``.
        ImportError: langchain-classic is not installed.
    """
    if not isinstance(base_retriever, BaseRetriever):
        raise TypeError(f"base_retriever must be a BaseRetriever, got {type(base_retriever).__name__}")
    pipeline = gated_pipeline(transformers)
    classic, _ = _classic()
    return classic.ContextualCompressionRetriever(base_compressor=pipeline, base_retriever=base_retriever)
