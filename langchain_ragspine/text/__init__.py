"""Unicode normalisation and sentence boundaries for Japanese, Chinese and English text.

* :func:`normalize` (from :mod:`~langchain_ragspine.text.folding`, the package's comparison forms) applies NFKC (Unicode Standard Annex #15): full-width ASCII becomes half-width (``ＡＢＣ１２３`` →
  ``ABC123``), half-width katakana becomes full-width (``ｶﾀｶﾅ`` → ``カタカナ``), compatibility ideographs fold.
  It is used on *tokens and queries*, never on stored chunk text: a chunk stays a verbatim slice of its source.
* :func:`sentence_spans` finds sentence ends for CJK (``。！？；``) and Latin (``.!?;`` followed by a space or the
  end of the text) punctuation, keeping closing quotes and brackets with their sentence.
"""

from __future__ import annotations

import re
from typing import Any

from langchain_ragspine.text.folding import normalize

__all__ = [
    "CJK_CHAR_CLASS",
    "CJK_CHAR_RE",
    "CJK_SENTENCE_ENDS",
    "HEADING_KEY",
    "HEADING_KEYS",
    "INDEX_TEXT_KEY",
    "LATIN_SENTENCE_ENDS",
    "SENTENCE_ENDS",
    "index_text",
    "normalize",
    "sentence_spans",
]

#: Regex character class (without brackets) of CJK characters: CJK unified ideographs (+ext. A, compatibility, and
#: ext. B-F in the SIP), the iteration marks 々〆, hiragana, katakana (with ー and the phonetic extensions), and
#: hangul syllables and jamo.
CJK_CHAR_CLASS = (
    "\u3005\u3006\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\uac00-\ud7af\u1100-\u11ff\u3130-\u318f\U00020000-\U0002fa1f"
)
#: Matches one CJK character.
CJK_CHAR_RE = re.compile(f"[{CJK_CHAR_CLASS}]")

#: Characters that end a sentence in CJK text (full width) and in Latin text.
CJK_SENTENCE_ENDS = "。！？；"
LATIN_SENTENCE_ENDS = ".!?;"
SENTENCE_ENDS = CJK_SENTENCE_ENDS + LATIN_SENTENCE_ENDS

# A CJK end always ends a sentence; a Latin end only when followed by whitespace or the end of the text (so that
# "3.14", "e.g.x" and URLs are not cut).  Closing quotes/brackets directly after the end belong to the sentence.
_CLOSERS = "」』）)】〕〉》\"'”’]"
_SENTENCE_END_RE = re.compile(
    rf"(?:[{CJK_SENTENCE_ENDS}]+|[{re.escape(LATIN_SENTENCE_ENDS)}]+(?=[{re.escape(_CLOSERS)}]*(?:\s|$)))"
    rf"[{re.escape(_CLOSERS)}]*"
)


def sentence_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """Split ``text[start:end]`` into sentences and return their ``(start, end)`` char offsets into ``text``.

    The spans tile the range exactly: the first starts at ``start``, each next one starts where the previous ended, and
    the last ends at ``end`` (whitespace after a sentence end stays with the next sentence's start only if it is not
    trailing; trailing text without an end mark is its own sentence).  An empty range gives ``[]``.
    """
    end = len(text) if end is None else end
    if start >= end:
        return []
    spans: list[tuple[int, int]] = []
    pos = start
    for m in _SENTENCE_END_RE.finditer(text, start, end):
        cut = m.end()
        # keep whitespace that follows the mark with the finished sentence, so the next one starts on a character
        while cut < end and text[cut].isspace():
            cut += 1
        if cut > pos:
            spans.append((pos, cut))
            pos = cut
    if pos < end:
        spans.append((pos, end))
    return spans


#: Metadata key of the text a chunk is indexed and embedded by, when it differs from ``page_content``.
INDEX_TEXT_KEY = "index_text"

#: Metadata key the package's splitters write a chunk's heading path to, outermost first (``["第一章 总则",
#: "第三条"]``): ``LayoutTextSplitter`` and its ``laws`` / ``book`` / ``qa`` presets, ``ParentChildTextSplitter``.
HEADING_KEY = "heading"
#: Every metadata key read as a heading path (the contextual header's), in the order they are read: the package's
#: own :data:`HEADING_KEY` first, then the names other loaders and splitters use.
HEADING_KEYS: tuple[str, ...] = (HEADING_KEY, "heading_path", "headings", "section")


def index_text(doc: Any) -> str:
    """The text ``doc`` (a ``Document``) is tokenised and embedded by: a non-empty string in
    ``metadata["index_text"]``, else ``page_content``.  Without the key the result is exactly ``page_content``, so
    retrievers index documents that carry no index text byte-identically to before.
    """
    value = doc.metadata.get(INDEX_TEXT_KEY)
    if isinstance(value, str) and value:
        return value
    return str(doc.page_content)
