"""Text splitters (LangChain ``TextSplitter``s) whose chunks are verbatim substrings with char offsets.

``paragraph`` (the default: paragraphs packed into 480 characters, 80 overlap), ``layout`` (sections at headings,
presets ``laws`` / ``book`` / ``qa``), ``parent_child`` (parents and the children inside them), ``sentence_window``
(one sentence per chunk, its window in metadata) and ``semantic`` (cuts where embedding similarity drops).
:mod:`~langchain_ragspine.text_splitters.chunkers` names them for ``ragspine ingest --chunker``.
"""

from langchain_ragspine.text_splitters.layout import PRESETS, LayoutTextSplitter
from langchain_ragspine.text_splitters.paragraph import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_OVERLAP_CHARS,
    ParagraphTextSplitter,
)
from langchain_ragspine.text_splitters.parent_child import ParentChildTextSplitter
from langchain_ragspine.text_splitters.semantic import SemanticTextSplitter
from langchain_ragspine.text_splitters.sentence_window import SentenceWindowTextSplitter

__all__ = [
    "DEFAULT_CHUNK_CHARS",
    "DEFAULT_OVERLAP_CHARS",
    "PRESETS",
    "LayoutTextSplitter",
    "ParagraphTextSplitter",
    "ParentChildTextSplitter",
    "SemanticTextSplitter",
    "SentenceWindowTextSplitter",
]
