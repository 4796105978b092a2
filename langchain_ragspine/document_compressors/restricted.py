"""The RESTRICTED gate: a ``BaseDocumentCompressor`` that removes restricted chunks.

What counts as restricted is decided in one place, :mod:`langchain_ragspine.sensitivity` (re-exported here:
:data:`RESTRICTED_SENSITIVITY`, :func:`is_restricted`, :func:`normalize_label`): a ``sensitivity`` key in any case,
width or spacing whose value names ``RESTRICTED`` — in any case or width, with invisible characters, among other words
or punctuation, or inside a list.  The gate runs before anything reaches a prompt and at every exit of the package
(``ragspine search``, graph outputs, listwise rerank input); :func:`is_restricted` is the one test all of them use.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document

from langchain_ragspine.arguments import known_fields
from langchain_ragspine.documents import check_documents
from langchain_ragspine.sensitivity import (
    KNOWN_SENSITIVITIES,
    RESTRICTED_SENSITIVITY,
    drop_restricted,
    is_restricted,
    normalize_label,
)

__all__ = [
    "KNOWN_SENSITIVITIES",
    "RESTRICTED_SENSITIVITY",
    "RestrictedGate",
    "drop_restricted",
    "is_restricted",
    "normalize_label",
]


class RestrictedGate(BaseDocumentCompressor):
    """Drop every document labelled ``RESTRICTED`` (see :func:`langchain_ragspine.sensitivity.is_restricted`).

    Use it as the first compressor in a ``ContextualCompressionRetriever`` or ``DocumentCompressorPipeline``, or as a
    graph node, so restricted text cannot reach an LLM.  Order and all other documents are kept unchanged; the input
    sequence is not modified.

    Example:
        >>> from langchain_core.documents import Document
        >>> from langchain_ragspine import RestrictedGate
        >>> docs = [
        ...     Document(page_content="公開の手順書", metadata={"chunk_id": "a#0", "sensitivity": "PUBLIC"}),
        ...     Document(page_content="鍵の保管場所", metadata={"chunk_id": "b#0", "sensitivity": " Restricted "}),
        ... ]
        >>> [d.metadata["chunk_id"] for d in RestrictedGate().compress_documents(docs, query="鍵")]
        ['a#0']
    """

    _known = known_fields()

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """Return ``documents`` without the RESTRICTED ones (``query`` is unused)."""
        return drop_restricted(check_documents(documents, f"{type(self).__name__}.compress_documents"))

    async def acompress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """Async twin of :meth:`compress_documents`."""
        return drop_restricted(check_documents(documents, f"{type(self).__name__}.compress_documents"))
