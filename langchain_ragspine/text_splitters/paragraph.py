"""RAGSpine's paragraph chunker as a LangChain ``TextSplitter``.

Paragraphs (blank-line separated) are packed into chunks of at most ``chunk_size`` characters; consecutive chunks
overlap by up to ``chunk_overlap`` characters, snapped forward to a sentence or word start inside the overlap window.
A paragraph longer than ``chunk_size`` is cut at sentence ends (``。！？；.!?;``), sentences packed greedily, and a
sentence that alone exceeds the budget is hard-cut; the pieces of one long paragraph do not overlap each other.

Every chunk is a contiguous, verbatim substring ``text[start_index:end_index]`` of its source (no normalisation, no
re-joining), so a citation's offsets always point at the exact text shown to the reader.  A document loaded by
``CorpusLoader`` carries ``metadata["body_offset"]`` (where its text starts in the file); the chunk offsets then
index the file itself (see :mod:`langchain_ragspine.document_loaders.locators`).  This is the
"fixed-size chunking with overlap, respecting paragraph and sentence boundaries" strategy common in RAG practice
(e.g. LangChain's ``RecursiveCharacterTextSplitter``), with exact offsets instead of ``str.find``.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Iterable
from typing import Any

from langchain_core.documents import Document
from langchain_text_splitters import TextSplitter

from langchain_ragspine.document_loaders.locators import source_locator_for
from langchain_ragspine.text import CJK_CHAR_RE, sentence_spans

#: Default chunk budget in characters.
DEFAULT_CHUNK_CHARS = 480
#: Default overlap between consecutive packed chunks, in characters.
DEFAULT_OVERLAP_CHARS = 80

_PARAGRAPH_BREAK = re.compile(r"\n[ \t\r\f\v]*\n\s*")

Span = tuple[int, int]


def _strip(text: str, start: int, end: int) -> Span:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def paragraph_spans(text: str) -> list[Span]:
    """``(start, end)`` offsets of the non-empty, whitespace-trimmed, blank-line separated paragraphs of ``text``."""
    spans: list[Span] = []
    pos = 0
    for m in _PARAGRAPH_BREAK.finditer(text):
        spans.append(_strip(text, pos, m.start()))
        pos = m.end()
    spans.append(_strip(text, pos, len(text)))
    return [(s, e) for s, e in spans if e > s]


def chunk_id_for(doc_id: str, i: int) -> str:
    """The chunk id convention: ``f"{doc_id}#{i}"`` with ``i`` the 0-based chunk position in the document."""
    return f"{doc_id}#{i}"


class ParagraphTextSplitter(TextSplitter):
    """Split text into paragraph-packed chunks with exact character offsets.

    Args:
        chunk_size: maximum chunk length in characters (default :data:`DEFAULT_CHUNK_CHARS` = 480).
        chunk_overlap: characters shared by consecutive packed chunks (default :data:`DEFAULT_OVERLAP_CHARS` = 80).
        **kwargs: passed to ``TextSplitter`` (``length_function`` is ignored: budgets are characters).

    Raises:
        ValueError: ``chunk_size <= 0``, ``chunk_overlap < 0`` or ``chunk_overlap >= chunk_size``.

    :meth:`split_documents` / :meth:`create_documents` return one ``Document`` per chunk whose ``page_content`` is
    ``text[s:e]`` for a span ``(s, e)`` of :meth:`split_spans`, and whose metadata is the source metadata plus
    ``doc_id`` (kept, else the ``source``, else a hash of the text), ``chunk_id`` = ``f"{doc_id}#{i}"``,
    ``start_index`` = ``body_offset + s``, ``end_index`` = ``body_offset + e`` and ``source_locator`` =
    ``f"{source}#{start_index}-{end_index}"`` (``source`` defaults to ``doc_id``).  ``body_offset`` is the
    source metadata's ``body_offset`` (set by ``CorpusLoader``: where the text starts in its file), else 0 — so
    offsets index the file a reader opens, see :mod:`langchain_ragspine.document_loaders.locators`.
    ``Document.id`` is the ``chunk_id``.
    """

    def __init__(
        self, chunk_size: int = DEFAULT_CHUNK_CHARS, chunk_overlap: int = DEFAULT_OVERLAP_CHARS, **kwargs: Any
    ) -> None:
        if isinstance(chunk_size, bool) or not isinstance(chunk_size, int):
            raise TypeError(f"chunk_size must be an int, got {chunk_size!r}")
        if isinstance(chunk_overlap, bool) or not isinstance(chunk_overlap, int):
            raise TypeError(f"chunk_overlap must be an int, got {chunk_overlap!r}")
        if chunk_size <= 0:
            raise ValueError(f"chunk_size must be > 0, got {chunk_size}")
        if chunk_overlap < 0:
            raise ValueError(f"chunk_overlap must be >= 0, got {chunk_overlap}")
        if chunk_overlap >= chunk_size:
            raise ValueError(f"chunk_overlap ({chunk_overlap}) must be smaller than chunk_size ({chunk_size})")
        kwargs.pop("add_start_index", None)
        super().__init__(chunk_size=chunk_size, chunk_overlap=chunk_overlap, add_start_index=True, **kwargs)

    # -- spans -------------------------------------------------------------------------------------------------
    def split_spans(self, text: str) -> list[Span]:
        """Return the ``(start_index, end_index)`` char offsets of the chunks of ``text``, in order."""
        size = self._chunk_size
        chunks: list[Span] = []
        cur: Span | None = None
        for ps, pe in paragraph_spans(text):
            if pe - ps > size:
                if cur is not None:
                    chunks.append(cur)
                    cur = None
                chunks.extend(self._split_long(text, ps, pe))
                continue
            if cur is not None and pe - cur[0] <= size:
                cur = (cur[0], pe)
                continue
            if cur is not None:
                chunks.append(cur)
            start = self._overlap_start(text, chunks[-1], ps, pe) if chunks else ps
            cur = (start, pe)
        if cur is not None:
            chunks.append(cur)
        return chunks

    def _overlap_start(self, text: str, prev: Span, ps: int, pe: int) -> int:
        """Where a chunk holding the paragraph ``[ps, pe)`` starts so that it overlaps the previous chunk ``prev``."""
        prev_start, prev_end = prev
        if self._chunk_overlap == 0:
            return ps
        # the chunk [start, pe) must fit the budget, overlap at most chunk_overlap chars, and not start inside the
        # previous chunk's first character (so it is never contained in it)
        cand = max(prev_end - self._chunk_overlap, pe - self._chunk_size, prev_start + 1)
        if cand >= prev_end:
            return ps
        # prefer a sentence start, then a word start, inside the window; else cut at the character
        for s, _ in sentence_spans(text, prev_start, prev_end):
            if s >= cand:
                return s
        for i in range(cand, prev_end):
            if text[i - 1].isspace() and not text[i].isspace():
                return i
        start, _ = _strip(text, cand, prev_end)
        if start >= prev_end or _inside_word(text, start):
            return ps  # no clean place to start the overlap: drop it rather than cut a word in two
        return start

    def _split_long(self, text: str, ps: int, pe: int) -> list[Span]:
        """Cut an over-budget paragraph at sentence ends, packing sentences; hard-cut over-budget sentences."""
        size = self._chunk_size
        out: list[Span] = []
        cur: Span | None = None
        for ss, se in sentence_spans(text, ps, pe):
            ss, se = _strip(text, ss, se)
            if se <= ss:
                continue
            if cur is not None and se - cur[0] <= size:
                cur = (cur[0], se)
                continue
            if cur is not None:
                out.append(cur)
                cur = None
            if se - ss <= size:
                cur = (ss, se)
                continue
            pos = ss
            while pos < se:
                piece = _strip(text, pos, min(pos + size, se))
                if piece[1] > piece[0]:
                    out.append(piece)
                pos += size
                while pos < se and text[pos].isspace():
                    pos += 1
        if cur is not None:
            out.append(cur)
        return out

    # -- TextSplitter API ------------------------------------------------------------------------------------------
    def split_text(self, text: str) -> list[str]:
        """Split ``text`` into chunk strings (each a verbatim substring of ``text``)."""
        return [text[s:e] for s, e in self.split_spans(text)]

    def create_documents(self, texts: list[str], metadatas: list[dict[Any, Any]] | None = None) -> list[Document]:
        """Split each text into chunk ``Document``s carrying lineage metadata (see the class docstring).

        Raises:
            ValueError: ``metadatas`` is given with a different length than ``texts``, or a ``body_offset`` is not
                an int ``>= 0``.
        """
        if metadatas is not None and len(metadatas) != len(texts):
            raise ValueError(f"got {len(texts)} texts but {len(metadatas)} metadatas")
        docs: list[Document] = []
        for i, text in enumerate(texts):
            base = copy.deepcopy(metadatas[i]) if metadatas is not None else {}
            doc_id = str(base.get("doc_id") or base.get("source") or _text_id(text))
            source = str(base.get("source") or doc_id)
            base["doc_id"] = doc_id
            offset = base.get("body_offset", 0)
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
                raise ValueError(f"metadata 'body_offset' of {doc_id!r} must be an int >= 0, got {offset!r}")
            for n, (s, e) in enumerate(self.split_spans(text)):
                md = copy.deepcopy(base)
                cid = chunk_id_for(doc_id, n)
                md.update(
                    chunk_id=cid,
                    start_index=offset + s,
                    end_index=offset + e,
                    source_locator=source_locator_for(source, offset + s, offset + e),
                )
                docs.append(Document(page_content=text[s:e], metadata=md, id=cid))
        return docs

    def split_documents(self, documents: Iterable[Document]) -> list[Document]:
        """Split ``Document``s; a document's ``id`` serves as ``doc_id`` when its metadata has none."""
        texts: list[str] = []
        metas: list[dict[Any, Any]] = []
        for d in documents:
            md = dict(d.metadata)
            if not md.get("doc_id") and d.id:
                md["doc_id"] = d.id
            texts.append(d.page_content)
            metas.append(md)
        return self.create_documents(texts, metas)


def _inside_word(text: str, i: int) -> bool:
    """``True`` when position ``i`` splits a run of letters/digits of a space-delimited script (Latin, Cyrillic…).

    CJK text has no spaces between words, so a cut between two CJK characters is not "inside a word".
    """
    a, b = text[i - 1], text[i]
    return a.isalnum() and b.isalnum() and not CJK_CHAR_RE.match(a) and not CJK_CHAR_RE.match(b)


def _text_id(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
