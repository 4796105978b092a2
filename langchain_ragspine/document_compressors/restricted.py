"""The RESTRICTED gate: a ``BaseDocumentCompressor`` that removes restricted chunks.

A chunk is restricted when ``metadata["sensitivity"]``, stripped and upper-cased, equals
:data:`RESTRICTED_SENSITIVITY`.  The gate runs before anything reaches a prompt and at every exit of the package
(``ragspine search``, graph outputs, listwise rerank input); :func:`is_restricted` is the one test all of them use.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document

#: The one sensitivity label that never leaves the package (compared after ``strip().upper()``).
RESTRICTED_SENSITIVITY = "RESTRICTED"


def is_restricted(metadata: Any) -> bool:
    """``True`` when ``metadata`` (a mapping, or a ``Document``) is labelled RESTRICTED, case-insensitively."""
    if isinstance(metadata, Document):
        metadata = metadata.metadata
    if not hasattr(metadata, "get"):
        return False
    value = metadata.get("sensitivity")
    return isinstance(value, str) and value.strip().upper() == RESTRICTED_SENSITIVITY


def drop_restricted(documents: Iterable[Document]) -> list[Document]:
    """The documents that are not RESTRICTED, in their original order."""
    return [d for d in documents if not is_restricted(d.metadata)]


class RestrictedGate(BaseDocumentCompressor):
    """Drop every document whose ``metadata["sensitivity"]`` is ``RESTRICTED`` (after ``strip().upper()``).

    Use it as the first compressor in a ``ContextualCompressionRetriever`` or ``DocumentCompressorPipeline``, or as a
    graph node, so restricted text cannot reach an LLM.  Order and all other documents are kept unchanged; the input
    sequence is not modified.
    """

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """Return ``documents`` without the RESTRICTED ones (``query`` is unused)."""
        return drop_restricted(documents)

    async def acompress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """Async twin of :meth:`compress_documents`."""
        return drop_restricted(documents)
