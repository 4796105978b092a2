"""Lost-in-the-middle reordering: put the best documents at both ends of the context.

Language models use information at the start and at the end of a long context better than information in the
middle (Liu et al., "Lost in the Middle: How Language Models Use Long Contexts", TACL 2024).  Given documents ranked
best first, :func:`lost_in_the_middle_order` returns them so that rank 1 comes first, rank 2 last, rank 3 second,
rank 4 second to last, …, and the weakest documents sit in the middle — for every length ``n``:
ranks ``1..4`` → ``1, 3, 4, 2``; ranks ``1..5`` → ``1, 3, 5, 4, 2``.

LangChain's ``LongContextReorder`` (``langchain_community.document_transformers``) implements the same idea, but
for an even number of documents its permutation puts the *best* document last and the second best first (ranks
``1..4`` → ``2, 4, 3, 1``).  Here the odd ranks go to the front in order and the even ranks to the back in reverse,
which is correct for every ``n``; the package does not depend on ``langchain-community`` at run time.

Numbering a context after reordering is the caller's business: :mod:`langchain_ragspine.chains.answer` numbers the
passages in the order the model sees them (and calls :func:`lost_in_the_middle_order` for
``lost_in_the_middle=True``), so citations map back to the right chunk.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document

from langchain_ragspine.sensitivity import drop_restricted

T = TypeVar("T")

__all__ = ["LostInTheMiddleReorder", "lost_in_the_middle_order"]


def lost_in_the_middle_order(items: Sequence[T]) -> list[T]:
    """``items`` (ranked best first) reordered best-at-both-ends.

    Ranks 1, 3, 5, … in order at the front, then ranks …, 6, 4, 2 at the back: ``[1, 2, 3, 4]`` → ``[1, 3, 4, 2]``,
    ``[1, 2, 3, 4, 5]`` → ``[1, 3, 5, 4, 2]``.  The first item stays first and, for ``n >= 2``, the second becomes
    last; relevance decreases from both ends toward the middle.  A new list is returned (the input is not
    modified); empty and one-element inputs come back as they are.
    """
    seq = list(items)
    return seq[0::2] + seq[1::2][::-1]


class LostInTheMiddleReorder(BaseDocumentCompressor):
    """A ``BaseDocumentCompressor`` that applies :func:`lost_in_the_middle_order` (after the RESTRICTED gate).

    It keeps every (non-restricted) document and only changes their order; put it last in a
    ``DocumentCompressorPipeline`` (after any reranker, which would undo the order).  Documents are returned as
    they are (same objects, metadata untouched).
    """

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """``documents`` without RESTRICTED ones, reordered best-at-both-ends (``query`` is unused)."""
        return lost_in_the_middle_order(drop_restricted(documents))

    async def acompress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """Async twin of :meth:`compress_documents` (no I/O: runs inline)."""
        return self.compress_documents(documents, query, callbacks)
