"""Lost-in-the-middle reordering: put the best documents at both ends of the context.

Language models use information at the start and at the end of a long context better than information in the
middle (Liu et al., "Lost in the Middle: How Language Models Use Long Contexts", TACL 2024).  Given documents ranked
best first, :func:`lost_in_the_middle_order` returns them so that rank 1 comes first, rank 2 last, rank 3 second,
rank 4 second to last, …, and the weakest documents sit in the middle.  It is the same permutation as LangChain's
``LongContextReorder`` (``langchain_community.document_transformers``), written here as a small pure function so the
package does not depend on ``langchain-community`` at run time.

Numbering a context after reordering is the caller's business: :mod:`langchain_ragspine.chains.answer` numbers the
passages in the order the model sees them, so citations map back to the right chunk.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document

from langchain_ragspine.document_compressors.restricted import drop_restricted

T = TypeVar("T")

__all__ = ["LostInTheMiddleReorder", "lost_in_the_middle_order"]


def lost_in_the_middle_order(items: Sequence[T]) -> list[T]:
    """``items`` (ranked best first) reordered best-at-both-ends: ``[1, 2, 3, 4, 5]`` → ``[1, 3, 5, 4, 2]``.

    A new list is returned; the input is not modified.  Empty and one-element inputs come back unchanged.
    """
    out: list[T] = []
    for i, item in enumerate(reversed(items)):
        if i % 2 == 1:
            out.append(item)
        else:
            out.insert(0, item)
    return out


class LostInTheMiddleReorder(BaseDocumentCompressor):
    """A ``BaseDocumentCompressor`` that applies :func:`lost_in_the_middle_order` (after the RESTRICTED gate).

    It keeps every (non-restricted) document and only changes their order; put it last in a
    ``DocumentCompressorPipeline``.
    """

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """``documents`` without RESTRICTED ones, reordered best-at-both-ends (``query`` is unused)."""
        return lost_in_the_middle_order(drop_restricted(documents))
