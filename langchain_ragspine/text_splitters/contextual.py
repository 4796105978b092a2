"""Contextual headers: index each chunk together with a short header naming where it comes from.

Contextual retrieval (Anthropic, "Introducing Contextual Retrieval", September 2024) prepends to every chunk a
short context situating it in its document, and indexes (BM25) and embeds that *contextualised* text instead of the
bare chunk, so that a chunk which never repeats its document's subject ("It was completed in 1889.") is still found
by it.  Anthropic writes the context with an LLM; here it is built deterministically from the chunk's metadata —
title · heading path · period / entity fields — so it costs nothing, needs no model and is reproducible.

The header goes into ``metadata["index_text"]`` (:data:`~langchain_ragspine.text.INDEX_TEXT_KEY`) only, never into
``page_content``: ``BM25Retriever`` and ``DenseRetriever`` tokenise and embed :func:`~langchain_ragspine.text.index_text`
(the index text when present, else ``page_content``), while what they return, what a prompt shows and what is cited
stays the verbatim slice of the source with its offsets.  Without the key, retrievers behave byte for byte as
before.

Example::

    chunks = ContextualHeader().transform_documents(chunks)     # adds metadata["index_text"]
    retriever = BM25Retriever.from_documents(chunks)            # searches "title · headings\\n\\ntext"
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.documents import BaseDocumentTransformer, Document

from langchain_ragspine.documents import check_documents
from langchain_ragspine.text import HEADING_KEYS, INDEX_TEXT_KEY, index_text

__all__ = [
    "DEFAULT_HEADER_FIELDS",
    "HEADING_FIELDS",
    "INDEX_TEXT_KEY",
    "ContextualHeader",
    "contextual_header",
    "index_text",
]

#: Metadata fields read for the header, in header order: the title, the heading path (every key of
#: :data:`~langchain_ragspine.text.HEADING_KEYS`: ``heading``, which the package's layout, laws, book, qa and
#: parent-child splitters write, then ``heading_path`` / ``headings`` / ``section``), then period and entity fields.
#: Absent or empty fields are skipped.
DEFAULT_HEADER_FIELDS: tuple[str, ...] = (
    "title",
    *HEADING_KEYS,
    "period",
    "date",
    "year",
    "entity",
    "entities",
    "organization",
)
#: Fields holding a heading path: a list is joined with " > " (other list fields with ", ").
HEADING_FIELDS = frozenset(HEADING_KEYS)


def _parts(value: Any) -> list[str]:
    """The non-empty string parts of a metadata value: a string, a number (not a bool), or a list of them."""
    if isinstance(value, str):
        text = " ".join(value.split())
        return [text] if text else []
    if isinstance(value, bool):
        return []
    if isinstance(value, numbers.Number):
        return [str(value)]
    if isinstance(value, (list, tuple)):
        return [p for item in value for p in _parts(item)]
    return []


def contextual_header(metadata: Mapping[str, Any], fields: Sequence[str] = DEFAULT_HEADER_FIELDS,
                      *, separator: str = " · ") -> str:
    """The header of a chunk with ``metadata``: the values of ``fields`` that are present, joined by ``separator``.

    A string value is used with its white space collapsed; a number as ``str()``; a list's parts are joined with
    ``" > "`` for heading fields (:data:`HEADING_FIELDS`) and ``", "`` for the others; other values (``None``,
    booleans, mappings) are skipped.  A part already in the header (the title repeated as the first heading) is
    not repeated.  Returns ``""`` when no field is present.

    Example:
        >>> contextual_header({"title": "梅雨", "heading_path": ["梅雨", "気候", "東アジア"], "year": 2024})
        '梅雨 · 気候 > 東アジア · 2024'
    """
    seen: set[str] = set()
    pieces: list[str] = []
    for field in fields:
        parts = [p for p in _parts(metadata.get(field)) if p not in seen]
        if not parts:
            continue
        seen.update(parts)
        pieces.append((" > " if field in HEADING_FIELDS else ", ").join(parts))
    return separator.join(pieces)


def _with_header(head: str, text: str) -> str:
    return f"{head}\n\n{text}" if head else text


class ContextualHeader(BaseDocumentTransformer):
    """A ``BaseDocumentTransformer`` that writes ``header + "\\n\\n" + page_content`` to ``metadata["index_text"]``.

    Apply it to chunks before building retrievers (or at ingest); ``BM25Retriever`` and ``DenseRetriever`` then
    index and embed the header with the text.  ``page_content``, ``id`` and every other metadata key — offsets,
    ``source_locator``, ``chunk_id``, ``sensitivity`` — are unchanged; a chunk whose metadata yields no header is
    returned as it is (no ``index_text``).  Deterministic: the same chunk always gets the same index text.

    Args:
        fields: metadata fields read for the header, in order (default :data:`DEFAULT_HEADER_FIELDS`).
        separator: between header fields (default ``" · "``).

    Raises:
        TypeError: ``fields`` is not a sequence of strings.
    """

    def __init__(self, fields: Sequence[str] = DEFAULT_HEADER_FIELDS, *, separator: str = " · ") -> None:
        if isinstance(fields, str) or not all(isinstance(f, str) for f in fields):
            raise TypeError(f"fields must be a sequence of metadata key strings, got {fields!r}")
        self.fields = tuple(fields)
        self.separator = separator

    def header(self, document: Document) -> str:
        """The header of ``document`` (see :func:`contextual_header`); ``""`` when none of the fields is present."""
        return contextual_header(document.metadata, self.fields, separator=self.separator)

    def index_text(self, document: Document) -> str:
        """The text ``document`` is indexed by: ``header + "\\n\\n" + page_content``, or ``page_content`` without a
        header."""
        return _with_header(self.header(document), document.page_content)

    def transform_documents(self, documents: Sequence[Document], **kwargs: Any) -> Sequence[Document]:
        """Copies of ``documents`` with ``metadata["index_text"]`` set (inputs are not modified)."""
        out: list[Document] = []
        for doc in check_documents(documents, f"{type(self).__name__}.transform_documents"):
            head = self.header(doc)
            if not head:
                out.append(doc)
                continue
            md = dict(doc.metadata)
            md[INDEX_TEXT_KEY] = _with_header(head, doc.page_content)
            out.append(Document(page_content=doc.page_content, metadata=md, id=doc.id))
        return out

    async def atransform_documents(self, documents: Sequence[Document], **kwargs: Any) -> Sequence[Document]:
        """Async twin of :meth:`transform_documents` (no I/O: runs inline)."""
        return self.transform_documents(documents, **kwargs)
