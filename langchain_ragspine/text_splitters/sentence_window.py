"""Sentence-window chunking: one sentence per chunk, its neighbours in metadata for the prompt.

Small chunks match a query precisely; a model answers better with context.  :class:`SentenceWindowTextSplitter`
indexes each sentence alone (``page_content``, a verbatim slice) and puts the ``window_size`` sentences before and
after it — the *window*, also a verbatim slice of the source — in ``metadata["window_text"]``, with its own
``window_start_index`` / ``window_end_index``.  The answer chain shows a model ``window_text`` in place of the
sentence (``prompt_text`` first, then ``window_text``, then ``page_content``); citations still point at the
sentence.

Sentences are found with :class:`~langchain_ragspine.text_splitters.ParagraphTextSplitter`'s boundaries: a line
break or a sentence end (``。！？``; ``.!?`` before whitespace, closing quotes kept) ends one, so a heading, a list
item or a table row is a sentence of its own.  A sentence longer than ``chunk_size`` is cut by the paragraph
machinery (clause mark, whitespace, grapheme boundary).

The technique is LlamaIndex's ``SentenceWindowNodeParser`` + ``MetadataReplacementPostProcessor`` ("sentence window
retrieval"), with verbatim offsets.
"""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document

from langchain_ragspine.arguments import check_int
from langchain_ragspine.text.graphemes import Graphemes, Span
from langchain_ragspine.text.sentences import sentence_segments
from langchain_ragspine.text_splitters.paragraph import (
    DEFAULT_CHUNK_CHARS,
    ParagraphTextSplitter,
    SourceText,
)

__all__ = ["DEFAULT_WINDOW_SIZE", "SentenceWindowTextSplitter", "sentence_chunk_spans"]

#: Sentences on each side of a sentence in its window (LlamaIndex's default).
DEFAULT_WINDOW_SIZE = 3


def sentence_chunk_spans(splitter: ParagraphTextSplitter, g: Graphemes) -> list[Span]:
    """The sentences of ``g.text`` as chunk spans: one per sentence, a sentence longer than the splitter's
    ``chunk_size`` cut into pieces by the paragraph machinery."""
    out: list[Span] = []
    for s, e in sentence_segments(g):
        out.extend([(s, e)] if e - s <= splitter._chunk_size else splitter._split_long(g, s, e))
    return out


class SentenceWindowTextSplitter(ParagraphTextSplitter):
    """One chunk per sentence; the surrounding sentences in ``metadata["window_text"]``.

    Args:
        window_size: sentences on each side of the chunk's sentence in its window (default 3; 0: the sentence).
        chunk_size: longest sentence kept whole, in characters (default 480); a longer one is cut into pieces.
        chunk_overlap: overlap between the pieces of a cut sentence (default 0).
        **kwargs: passed to ``TextSplitter``.

    Raises:
        TypeError: ``window_size`` or a budget is not an ``int``.
        ValueError: ``window_size < 0``, or bad budgets (as :class:`ParagraphTextSplitter`).

    Each chunk has the paragraph splitter's lineage metadata (``page_content`` is the sentence,
    ``start_index``/``end_index`` its file offsets) plus ``window_text`` (the verbatim text from the first to the
    last sentence of the window) and ``window_start_index`` / ``window_end_index`` (its file offsets).  Windows
    cross paragraph breaks but not documents.

    Example:
        >>> from langchain_ragspine.text_splitters import SentenceWindowTextSplitter
        >>> text = "梅雨は六月に始まる。七月に終わる。台風は秋に来る。"
        >>> chunks = SentenceWindowTextSplitter(window_size=1).create_documents([text])
        >>> [(c.page_content, c.metadata["window_text"]) for c in chunks][1]
        ('七月に終わる。', '梅雨は六月に始まる。七月に終わる。台風は秋に来る。')
    """

    def __init__(
        self,
        window_size: int = DEFAULT_WINDOW_SIZE,
        chunk_size: int = DEFAULT_CHUNK_CHARS,
        chunk_overlap: int = 0,
        **kwargs: Any,
    ) -> None:
        window_size = check_int(window_size, "window_size", minimum=0)
        super().__init__(chunk_size=chunk_size, chunk_overlap=chunk_overlap, **kwargs)
        self.window_size = window_size

    def split_spans(self, text: str) -> list[Span]:
        """``(start, end)`` offsets of the sentences of ``text`` (the chunks), in order."""
        return sentence_chunk_spans(self, Graphemes(text))

    def _documents_of(self, source: SourceText) -> list[Document]:
        spans = self.split_spans(source.text)
        w, off, docs = self.window_size, source.offset, []
        for n, (s, e) in enumerate(spans):
            ws, we = spans[max(0, n - w)][0], spans[min(len(spans) - 1, n + w)][1]
            extra = {"window_text": source.text[ws:we], "window_start_index": off + ws, "window_end_index": off + we}
            docs.append(source.chunk(n, s, e, extra))
        return docs
