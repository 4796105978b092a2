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

:func:`split_parents_and_children` is the same two-level split with any pair of splitters — what
:meth:`ParentChildRetriever.add_documents <langchain_ragspine.retrievers.ParentChildRetriever.add_documents>` uses,
as LangChain's ``ParentDocumentRetriever`` takes a ``child_splitter`` and an optional ``parent_splitter``.  Its
parents and children are verbatim slices with file offsets too: a splitter of this package gives its exact spans;
another ``TextSplitter``'s pieces are located in the text, and one that is not a verbatim slice is refused.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_text_splitters import TextSplitter

from langchain_ragspine.arguments import check_int
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

__all__ = ["LINEAGE_KEYS", "PARENT_KEY", "ParentChildTextSplitter", "parent_id_for", "split_parents_and_children"]

#: The metadata key of a child's parent.
PARENT_KEY = "parent_id"
#: The lineage keys a parent or child carries (set by the splitter, never copied from the document).
LINEAGE_KEYS: tuple[str, ...] = (
    "doc_id", "chunk_id", "start_index", "end_index", "source_locator",
    PARENT_KEY, "parent_locator", "parent_start_index", "parent_end_index",
)

#: One parent of a text before it becomes ``Document``\ s: ``(start, end, its own metadata, its children's
#: (start, end, own metadata))``, offsets into the text.
_Group = tuple[int, int, dict[str, Any], list[tuple[int, int, dict[str, Any]]]]


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
        chunk_size = self._chunk_size  # checked by the paragraph splitter
        parent_size = 4 * chunk_size if parent_chunk_size is None else check_int(parent_chunk_size, "parent_chunk_size")
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

    def _groups(self, text: str) -> list[_Group]:
        """The parents of ``text`` with their children, each with its heading path."""
        out: list[_Group] = []
        for ps, pe, path, spans in self.parent_child_spans(text):
            heading = {HEADING_KEY: list(path)}
            out.append((ps, pe, heading, [(s, e, heading) for s, e in spans]))
        return out

    def _split_source(self, source: SourceText) -> tuple[list[Document], list[Document]]:
        return _assemble(source, self._groups(source.text))

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


def _assemble(
    source: SourceText, groups: Sequence[_Group], *, keep_empty: bool = True
) -> tuple[list[Document], list[Document]]:
    """The parent and child ``Document``\\ s of ``source`` from its groups: the ``i``-th group's parent is
    ``f"{doc_id}#p{i}"``, children are numbered across the document, each linked to its parent; a parent without
    children is left out unless ``keep_empty``."""
    parents: list[Document] = []
    children: list[Document] = []
    for i, (ps, pe, own, spans) in enumerate(groups):
        if not spans and not keep_empty:
            continue  # a parent no child points to could never be found
        pid = parent_id_for(source.doc_id, i)
        parents.append(source.chunk(i, ps, pe, {**own, PARENT_KEY: pid}, chunk_id=pid))
        link = {
            PARENT_KEY: pid,
            "parent_locator": source.locator(ps, pe),
            "parent_start_index": source.offset + ps,
            "parent_end_index": source.offset + pe,
        }
        children.extend(source.chunk(len(children), s, e, {**extra, **link}) for s, e, extra in spans)
    return parents, children


def _pieces(
    splitter: TextSplitter, text: str, base: dict[Any, Any], offset: int
) -> list[tuple[int, int, dict[str, Any]]]:
    """``(start, end, metadata the splitter adds)`` of the pieces ``splitter`` cuts ``text`` into, offsets into
    ``text`` (which starts at ``offset`` in its file).  A splitter of this package gives its exact spans (and its
    own keys, with file offsets: a layout splitter's ``heading``, a sentence window's ``window_text`` …); another ``TextSplitter``'s ``split_text`` pieces are located in order
    (``str.find`` from just after the previous piece's start, as LangChain's ``add_start_index`` does).

    Raises:
        ValueError: a piece of a foreign splitter is not a verbatim slice of ``text`` (after the previous piece).
    """
    if isinstance(splitter, ParagraphTextSplitter):
        out = []
        for d in splitter.split_documents([Document(text, metadata={**base, "body_offset": offset})]):
            s, e = d.metadata["start_index"] - offset, d.metadata["end_index"] - offset
            extra = {k: v for k, v in d.metadata.items()
                     if k not in LINEAGE_KEYS and k != "body_offset" and (k not in base or base[k] != v)}
            out.append((s, e, extra))
        return out
    out, at = [], 0
    for piece in splitter.split_text(text):
        if not piece:
            continue
        s = text.find(piece, at)
        if s < 0:
            raise ValueError(
                f"{type(splitter).__name__} returned a piece that is not a verbatim slice of document "
                f"{base.get('doc_id')!r} (after offset {at}): {piece[:60]!r}; parents and children must be slices "
                "of the text as it is — use a splitter of langchain_ragspine.text_splitters, or one that does not "
                "rewrite the text (RecursiveCharacterTextSplitter does not)"
            )
        out.append((s, s + len(piece), {}))
        at = s + 1
    return out


def split_parents_and_children(
    documents: Iterable[Document],
    child_splitter: TextSplitter,
    parent_splitter: TextSplitter | None = None,
    *,
    doc_ids: Sequence[str] | None = None,
) -> tuple[list[Document], list[Document]]:
    """``(parents, children)`` of ``documents``: each document cut into parents by ``parent_splitter`` (``None``:
    the whole document is its one parent, as in LangChain's ``ParentDocumentRetriever``), each parent into children
    by ``child_splitter``.

    Usage: ``parents, children = split_parents_and_children(docs, ParagraphTextSplitter(200, 40))``.

    A :class:`ParentChildTextSplitter` as ``child_splitter`` with no ``parent_splitter`` makes its own parents (the
    sections); as ``parent_splitter`` its parents are the parents.  Parents and children are ``Document``\\ s with
    the metadata of :meth:`ParentChildTextSplitter.split_with_parents`: the document's metadata, ``doc_id``
    (``doc_ids[i]``, else the metadata's, else ``Document.id``, else the ``source``, else a hash of the text),
    ``chunk_id`` (a parent's ``f"{doc_id}#p{i}"``, a child's ``f"{doc_id}#{n}"``, numbered across the document; also
    the ``Document.id``), ``start_index`` / ``end_index`` / ``source_locator`` (file offsets, with the document's
    ``body_offset``), ``parent_id``; a child also ``parent_locator`` / ``parent_start_index`` /
    ``parent_end_index``; plus what the splitter adds (``heading``).  ``page_content`` is always the verbatim
    slice ``text[start:end]``: a splitter of this package gives exact spans, another ``TextSplitter``'s pieces
    (``split_text``) are located in the text in order.  A parent without children (an empty document) is left out.

    Args:
        documents: the documents (``page_content`` the text).
        child_splitter: cuts a parent into children, any ``TextSplitter``.
        parent_splitter: cuts a document into parents, or ``None``.
        doc_ids: one ``doc_id`` per document (default: each document's own, as above).

    Raises:
        ValueError: ``doc_ids`` has another length than ``documents``; two documents have the same ``doc_id`` (their
            parents' ids would collide: pass ``doc_ids`` or set ``metadata["doc_id"]``); a foreign splitter's piece
            is not a verbatim slice of its text; a ``body_offset`` is not an int ``>= 0``.
    """
    docs = list(documents)
    if doc_ids is not None and len(doc_ids) != len(docs):
        raise ValueError(f"got {len(docs)} documents and {len(doc_ids)} doc_ids: one doc_id per document")
    parents: list[Document] = []
    children: list[Document] = []
    seen: dict[str, int] = {}
    for i, d in enumerate(docs):
        md = document_metadata(d)
        if doc_ids is not None:
            md["doc_id"] = str(doc_ids[i])
        source = SourceText.of(d.page_content, md)
        if source.doc_id in seen:
            raise ValueError(
                f"documents {seen[source.doc_id]} and {i} have the same doc_id {source.doc_id!r}, so their parents "
                "would share ids; pass ids= (one per document) or set metadata['doc_id']"
            )
        seen[source.doc_id] = i
        p, c = _assemble(source, _document_groups(source, child_splitter, parent_splitter), keep_empty=False)
        parents.extend(p)
        children.extend(c)
    return parents, children


def _document_groups(
    source: SourceText, child_splitter: TextSplitter, parent_splitter: TextSplitter | None
) -> list[_Group]:
    text, base = source.text, source.base
    if parent_splitter is None and isinstance(child_splitter, ParentChildTextSplitter):
        return child_splitter._groups(text)
    if parent_splitter is None:
        spans: list[tuple[int, int, dict[str, Any]]] = [(0, len(text), {})]
    elif isinstance(parent_splitter, ParentChildTextSplitter):
        spans = [(ps, pe, own) for ps, pe, own, _ in parent_splitter._groups(text)]
    else:
        spans = _pieces(parent_splitter, text, base, source.offset)
    groups: list[_Group] = []
    for ps, pe, own in spans:
        inherited = {HEADING_KEY: own[HEADING_KEY]} if HEADING_KEY in own else {}  # a child is under its parent's heading
        pieces = _pieces(child_splitter, text[ps:pe], base, source.offset + ps)
        groups.append((ps, pe, own, [(ps + s, ps + e, {**inherited, **extra}) for s, e, extra in pieces]))
    return groups
