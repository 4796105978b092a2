"""Text splitters (LangChain ``TextSplitter``s) whose chunks are verbatim substrings with char offsets."""

from langchain_ragspine.text_splitters.paragraph import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_OVERLAP_CHARS,
    ParagraphTextSplitter,
)

__all__ = ["DEFAULT_CHUNK_CHARS", "DEFAULT_OVERLAP_CHARS", "ParagraphTextSplitter"]
