"""Lost-in-the-middle reordering: put the best documents at both ends of the context.

Language models use information at the start and at the end of a long context better than information in the
middle (Liu et al., "Lost in the Middle: How Language Models Use Long Contexts", TACL 2024).  Given documents ranked
best first, :func:`lost_in_the_middle_order` returns them so that rank 1 comes first, rank 2 last, rank 3 second,
rank 4 second to last, …, and the weakest documents sit in the middle — for every length ``n``:
ranks ``1..4`` → ``1, 3, 4, 2``; ranks ``1..5`` → ``1, 3, 5, 4, 2``.

LangChain's ``LongContextReorder`` (``langchain_community.document_transformers``) implements the same idea, but
for an even number of documents its permutation puts the *best* document last and the second best first (ranks
``1..4`` → ``2, 4, 3, 1``: ours reversed; for an odd number both agree).  Here the odd ranks go to the front in order
and the even ranks to the back in reverse, which is correct for every ``n``; the package does not depend on
``langchain-community`` at run time.  :class:`LostInTheMiddleReorder` takes ``LongContextReorder``'s place as it
stands — a document transformer (``transform_documents``), a document compressor, and a Runnable over a list of
Documents (``retriever | LostInTheMiddleReorder()``) — with this order.

Numbering a context after reordering is the caller's business: :mod:`langchain_ragspine.chains.answer` numbers the
passages in the order the model sees them (and calls :func:`lost_in_the_middle_order` for
``lost_in_the_middle=True``), so citations map back to the right chunk.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, BaseDocumentTransformer, Document
from langchain_core.runnables import RunnableConfig, RunnableSerializable
from pydantic import ConfigDict

from langchain_ragspine.arguments import check_arguments
from langchain_ragspine.documents import check_documents
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


class LostInTheMiddleReorder(
    BaseDocumentCompressor, BaseDocumentTransformer, RunnableSerializable[Sequence[Document], list[Document]]
):
    """Put the best documents at both ends of a context (lost in the middle), after the RESTRICTED gate.

    One object, three ways in; each drops RESTRICTED documents, then applies :func:`lost_in_the_middle_order`:

    * a document compressor — ``compress_documents(documents, query)`` / ``acompress_documents``, last in a
      ``DocumentCompressorPipeline`` or as the ``base_compressor`` of a ``ContextualCompressionRetriever``
      (``query`` is unused);
    * a document transformer, as LangChain's ``LongContextReorder`` —
      ``transform_documents(documents)`` / ``atransform_documents``;
    * a Runnable from a list of Documents to a list of Documents, so it composes after a retriever:
      ``retriever | LostInTheMiddleReorder()`` (``invoke`` / ``ainvoke`` / ``batch`` / ``stream``; its run is a
      chain run named ``LostInTheMiddleReorder`` whose input and output are the gated documents).

    Documents are ranked best first on the way in and come back as they are (same objects, metadata untouched),
    only their order changed: ranks ``1..4`` → ``1, 3, 4, 2``; ``1..5`` → ``1, 3, 5, 4, 2`` — the best first, the
    second best last, the weakest in the middle, for every ``n``.  LangChain's ``LongContextReorder``
    (``langchain_community.document_transformers``) gives the same order for an odd ``n`` but, for an even ``n``,
    puts the *best* document last and the second best first (``1..4`` → ``2, 4, 3, 1``, ours reversed); swapping
    ours in for it changes only that.  Put it after any reranker (which would undo the order).

    Raises:
        TypeError: an unknown constructor or call keyword (``transform_documents(docs, k=3)``), or an input that is
            not a list of ``Document`` objects (a string, a dict: ``itemgetter("documents") | reorder``).

    Source: Liu et al., "Lost in the Middle: How Language Models Use Long Contexts", TACL 2024.

    Example:
        >>> from langchain_core.documents import Document
        >>> from langchain_core.runnables import RunnableLambda
        >>> docs = [Document(page_content=f"passage {i}", metadata={"chunk_id": f"d{i}#0"}) for i in range(1, 5)]
        >>> reorder = LostInTheMiddleReorder()
        >>> [d.metadata["chunk_id"] for d in reorder.transform_documents(docs)]
        ['d1#0', 'd3#0', 'd4#0', 'd2#0']
        >>> chain = RunnableLambda(lambda query: docs) | reorder  # a retriever composes the same way
        >>> [d.page_content for d in chain.invoke("q")]
        ['passage 1', 'passage 3', 'passage 4', 'passage 2']
    """

    model_config = ConfigDict(extra="forbid")

    def __init__(self, **data: Any) -> None:
        check_arguments(type(self).__name__, data, type(self).model_fields)
        super().__init__(**data)

    def _reorder(self, documents: Sequence[Document]) -> list[Document]:
        return lost_in_the_middle_order(drop_restricted(documents))

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """``documents`` without RESTRICTED ones, reordered best-at-both-ends (``query`` is unused)."""
        return self._reorder(check_documents(documents, f"{type(self).__name__}.compress_documents"))

    async def acompress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """Async twin of :meth:`compress_documents` (no I/O: runs inline)."""
        return self._reorder(check_documents(documents, f"{type(self).__name__}.compress_documents"))

    def transform_documents(self, documents: Sequence[Document], **kwargs: Any) -> Sequence[Document]:
        """``documents`` without RESTRICTED ones, reordered best-at-both-ends: ``LongContextReorder``'s method.

        Raises:
            TypeError: a keyword argument (it takes none; ``LongContextReorder`` ignores them).
        """
        check_arguments(f"{type(self).__name__}.transform_documents", kwargs, ())
        return self._reorder(check_documents(documents, f"{type(self).__name__}.transform_documents"))

    async def atransform_documents(self, documents: Sequence[Document], **kwargs: Any) -> Sequence[Document]:
        """Async twin of :meth:`transform_documents` (no I/O: runs inline)."""
        return self.transform_documents(documents, **kwargs)

    def invoke(
        self, input: Sequence[Document], config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[Document]:
        """``input`` (a retriever's documents, best first) gated and reordered, as a Runnable.

        The gate runs before the run starts, so the run's callbacks and stream events never see a RESTRICTED
        document.

        Raises:
            TypeError: ``input`` is not a list of ``Document`` objects, or a keyword argument is given.
        """
        check_arguments(f"{type(self).__name__}.invoke", kwargs, ())
        gated = drop_restricted(check_documents(input, type(self).__name__))
        return self._call_with_config(lost_in_the_middle_order, gated, config)

    async def ainvoke(
        self, input: Sequence[Document], config: RunnableConfig | None = None, **kwargs: Any
    ) -> list[Document]:
        """Async twin of :meth:`invoke` (no I/O: runs inline)."""
        check_arguments(f"{type(self).__name__}.ainvoke", kwargs, ())
        gated = drop_restricted(check_documents(input, type(self).__name__))
        return await self._acall_with_config(_alost_in_the_middle_order, gated, config)


async def _alost_in_the_middle_order(documents: Sequence[Document]) -> list[Document]:
    return lost_in_the_middle_order(documents)
