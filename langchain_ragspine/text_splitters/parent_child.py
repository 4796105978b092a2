"""Parent-child chunking: small chunks to match a query, the larger passage around them to read.

:class:`ParentChildTextSplitter` cuts a text into *parents* — its sections, by
:class:`~langchain_ragspine.text_splitters.LayoutTextSplitter`'s heading detection, a section longer than
``parent_chunk_size`` cut into large windows by the paragraph machinery (no overlap) — and each parent into
*children* with :class:`~langchain_ragspine.text_splitters.ParagraphTextSplitter`'s boundaries (``chunk_size``,
``chunk_overlap``), never crossing a parent's edge.  Parents and children are both verbatim slices of the source
with file offsets.  A child carries ``parent_id`` and its parent's ``parent_locator`` /
``parent_start_index`` / ``parent_end_index``; a parent's ``chunk_id`` is its ``parent_id``, ``f"{doc_id}#p{i}"``.

Children are what a retriever indexes (:meth:`ParentChildTextSplitter.split_documents` returns them, so the
splitter drops into any LangChain pipeline); parents go to the chunk store with their document's version
(:meth:`~langchain_ragspine.backends.directory.chunk_store.ChunkStore.replace_doc_chunks` ``parents=``), where
:class:`~langchain_ragspine.retrievers.ParentChildRetriever` reads them.  This is LangChain's
``ParentDocumentRetriever`` layout (child splitter + parent splitter + docstore), with parents persisted and
versioned instead of held in an ``InMemoryStore``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from langchain_core.documents import Document

from langchain_ragspine.text import HEADING_KEY
from langchain_ragspine.text.graphemes import Graphemes, Span
from langchain_ragspine.text_splitters.layout import LayoutTextSplitter
from langchain_ragspine.text_splitters.paragraph import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_OVERLAP_CHARS,
    ParagraphTextSplitter,
    SourceText,
    document_metadata,
)

__all__ = ["PARENT_KEY", "ParentChildTextSplitter", "parent_id_for"]

#: The metadata key of a child's parent.
PARENT_KEY = "parent_id"


def parent_id_for(doc_id: str, i: int) -> str:
    """The parent id convention: ``f"{doc_id}#p{i}"`` (never equal to a chunk id ``f"{doc_id}#{n}"``)."""
    return f"{doc_id}#p{i}"


class ParentChildTextSplitter(ParagraphTextSplitter):
    """Split into parents (sections or large windows) and children (small chunks inside one parent).

    Args:
        chunk_size: child budget in characters (default 480).
        chunk_overlap: overlap between consecutive children of one parent (default 80).
        parent_chunk_size: parent budget in characters (default ``4 * chunk_size``); must exceed ``chunk_size``.
        preset: the heading detection that makes sections (``"layout"`` default, ``"laws"``, ``"book"``, ``"qa"``;
            see :mod:`~langchain_ragspine.text_splitters.layout`).
        **kwargs: passed to ``TextSplitter``.

    Raises:
        TypeError: a budget is not an ``int``.
        ValueError: bad budgets, ``parent_chunk_size <= chunk_size``, or an unknown preset.

    :meth:`split_documents` / :meth:`create_documents` return the children: lineage metadata as
    :class:`ParagraphTextSplitter`'s (``chunk_id`` = ``f"{doc_id}#{n}"``, numbered across the document), plus
    ``heading`` (the parent's heading path), ``parent_id``, ``parent_locator``, ``parent_start_index`` and
    ``parent_end_index``.  :meth:`split_with_parents` returns ``(parents, children)``; a parent is a ``Document``
    with the same lineage keys (``chunk_id`` = ``parent_id`` = ``f"{doc_id}#p{i}"``) and ``heading``.  Parent and
    children copy their document's metadata, so they share its ``sensitivity`` label.

    Example:
        >>> from langchain_ragspine.text_splitters import ParentChildTextSplitter
        >>> text = "# 梅雨\\n\\n梅雨は六月に始まる。七月に終わる。\\n\\n# 台風\\n\\n台風は秋に来る。"
        >>> parents, children = ParentChildTextSplitter(chunk_size=16, chunk_overlap=0).split_with_parents(
        ...     [Document(text, metadata={"source": "w.md"})])
        >>> [(p.id, p.page_content) for p in parents]
        [('w.md#p0', '# 梅雨\\n\\n梅雨は六月に始まる。七月に終わる。'), ('w.md#p1', '# 台風\\n\\n台風は秋に来る。')]
        >>> [(c.page_content, c.metadata["parent_id"]) for c in children]
        [('# 梅雨\\n\\n梅雨は六月に始まる。', 'w.md#p0'), ('七月に終わる。', 'w.md#p0'), ('# 台風\\n\\n台風は秋に来る。', 'w.md#p1')]
    """

    def __init__(
        self,
        chunk_size: int = DEFAULT_CHUNK_CHARS,
        chunk_overlap: int = DEFAULT_OVERLAP_CHARS,
        *,
        parent_chunk_size: int | None = None,
        preset: str = "layout",
        **kwargs: Any,
    ) -> None:
        super().__init__(chunk_size=chunk_size, chunk_overlap=chunk_overlap, **kwargs)
        parent_size = 4 * chunk_size if parent_chunk_size is None else parent_chunk_size
        if isinstance(parent_size, bool) or not isinstance(parent_size, int):
            raise TypeError(f"parent_chunk_size must be an int, got {parent_chunk_size!r}")
        if parent_size <= chunk_size:
            raise ValueError(f"parent_chunk_size ({parent_size}) must be larger than chunk_size ({chunk_size})")
        self.parent_chunk_size = parent_size
        self.preset = preset
        self._parents = LayoutTextSplitter(chunk_size=parent_size, chunk_overlap=0, preset=preset)

    def parent_child_spans(self, text: str) -> list[tuple[int, int, tuple[str, ...], list[Span]]]:
        """``(parent start, parent end, heading path, child spans)`` for every parent of ``text``, in order."""
        g = Graphemes(text)
        return [(ps, pe, path, self._pack(g, ps, pe)) for ps, pe, path in self._parents.section_chunks(g)]

    def split_spans(self, text: str) -> list[Span]:
        """``(start, end)`` offsets of the children of ``text``, in order."""
        return [span for *_, children in self.parent_child_spans(text) for span in children]

    def _split_source(self, source: SourceText) -> tuple[list[Document], list[Document]]:
        parents: list[Document] = []
        children: list[Document] = []
        for i, (ps, pe, path, spans) in enumerate(self.parent_child_spans(source.text)):
            pid = parent_id_for(source.doc_id, i)
            heading = {HEADING_KEY: list(path)}
            parents.append(source.chunk(i, ps, pe, {**heading, PARENT_KEY: pid}, chunk_id=pid))
            link = {
                **heading,
                PARENT_KEY: pid,
                "parent_locator": source.locator(ps, pe),
                "parent_start_index": source.offset + ps,
                "parent_end_index": source.offset + pe,
            }
            children.extend(source.chunk(len(children), s, e, link) for s, e in spans)
        return parents, children

    def _documents_of(self, source: SourceText) -> list[Document]:
        return self._split_source(source)[1]

    def split_with_parents(self, documents: Iterable[Document]) -> tuple[list[Document], list[Document]]:
        """``(parents, children)`` of ``documents`` (a document's ``id`` serves as ``doc_id`` when its metadata has
        none), each in document order.

        Raises:
            ValueError: a ``body_offset`` is not an int ``>= 0``.
        """
        parents: list[Document] = []
        children: list[Document] = []
        for d in documents:
            p, c = self._split_source(SourceText.of(d.page_content, document_metadata(d)))
            parents.extend(p)
            children.extend(c)
        return parents, children
