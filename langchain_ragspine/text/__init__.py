"""Text helpers for Japanese, Chinese and English: CJK character classes, folding, graphemes, sentences.

The package's one home for text: every module that folds, segments or classifies text uses these.

* :mod:`~langchain_ragspine.text.folding` — the forms strings are compared in (:func:`normalize` is NFKC:
  full-width ASCII becomes half-width, ``ＡＢＣ１２３`` → ``ABC123``, half-width katakana full-width, ``ｶﾀｶﾅ`` →
  ``カタカナ``).  Folding is used on *tokens, queries and keys*, never on stored chunk text: a chunk stays a
  verbatim slice of its source.
* :mod:`~langchain_ragspine.text.confusables` — look-alike letters of other scripts (UTS #39), one table.
* :mod:`~langchain_ragspine.text.chinese` — Traditional→Simplified Chinese per character (OpenCC's ``t2s`` table),
  for tokens.
* :mod:`~langchain_ragspine.text.graphemes` — extended grapheme cluster boundaries (UAX #29).
* :mod:`~langchain_ragspine.text.sentences` — paragraphs and sentences: :func:`sentence_spans` finds sentence ends
  for CJK (``。！？；``) and Latin (``.!?;`` followed by whitespace) punctuation, keeping closing quotes and brackets
  with their sentence; the splitters' grapheme-aware segmentation beside it.
* here: the CJK character class, the heading metadata keys and :func:`index_text`.
"""

from __future__ import annotations

import re
from typing import Any

from langchain_ragspine.text.folding import normalize
from langchain_ragspine.text.sentences import SENTENCE_RULES, sentence_spans

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

#: The characters that end a sentence for :func:`sentence_spans` (:data:`~langchain_ragspine.text.sentences.SENTENCE_RULES`)
#: in CJK text (full width) and in Latin text (before whitespace).
CJK_SENTENCE_ENDS = SENTENCE_RULES.cjk_ends
LATIN_SENTENCE_ENDS = SENTENCE_RULES.latin_ends
SENTENCE_ENDS = CJK_SENTENCE_ENDS + LATIN_SENTENCE_ENDS


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
