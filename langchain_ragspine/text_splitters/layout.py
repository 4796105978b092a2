"""Structure-aware chunking: sections at headings, the paragraph splitter's boundaries inside a section.

:class:`LayoutTextSplitter` finds heading lines, cuts the text into *sections* (a heading line and everything up to
the next heading), and chunks each section with :class:`~langchain_ragspine.text_splitters.ParagraphTextSplitter`'s
machinery (paragraph packing; long paragraphs cut at a line break, sentence end, clause mark, whitespace, grapheme
boundary, in that order; overlap inside a section).  A chunk never spans two sibling sections: an article of a law,
a chapter of a book, a question with its answer each start a chunk of their own.  Small sections nested under a
section (its sub-headings, the items of an article) are packed with it while they fit ``chunk_size`` — but never
two *units* of a preset (two articles of a law, two questions of a FAQ); a
section whose heading stands alone (no text before its first sub-heading) opens the chunk of what follows, so a
heading is never a chunk of its own when something follows it.

Every chunk carries ``metadata["heading"]``: the heading path, outermost first (``["第一章 总则", "第三条"]``;
``[]`` before the first heading), and stays a verbatim slice of its source with file offsets, exactly as the
paragraph splitter's chunks.

Presets change heading detection only (:data:`PRESETS`):

* ``layout`` — Markdown ATX headings (``#`` … ``######``, outside fenced code) and numbered headings on a line of
  their own (``1. Scope``, ``2.3 Details``, ``一、总则``).
* ``laws`` — Markdown headings and the divisions of Chinese and Japanese statutes at a line start: 第N编/編, 章,
  节/節, 款, 目, 第N条/條 (``第十条の二``, ``第十条之一``), 项/項 (``第N项``, ``（一）``, Japanese ``２　``),
  号/號 (``第N号``, Japanese ``一　``); a caption line ``（目的）`` just before an article belongs to it.
* ``book`` — Markdown and numbered headings, and 第N篇/部/卷, 第N章/回, 第N节/節, ``Part``/``Chapter``/``Section``.
* ``qa`` — Markdown headings and question lines (``Q:``, ``Question:``, ``问：``, ``問題：``, ``質問：``, or a line
  ending in ``?``/``？``): each question starts a section, so it stays with the answer that follows it.

This is the "document structure" chunking of LangChain's ``MarkdownHeaderTextSplitter`` (which drops the heading
text and loses offsets) generalised to numbered, legal and book headings, with verbatim slices.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_ragspine.text import HEADING_KEY
from langchain_ragspine.text.graphemes import Graphemes, Span, strip_span
from langchain_ragspine.text_splitters.paragraph import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_OVERLAP_CHARS,
    ParagraphTextSplitter,
)

__all__ = [
    "PRESETS",
    "UNIT_LEVELS",
    "HeadingRule",
    "LayoutTextSplitter",
    "Section",
    "find_sections",
]

_NUM = "0-9０-９一二三四五六七八九十百千零〇两"
_AFTER_MARKER = r"(?=[ \t\u3000]|$)"
_SENTENCE_PUNCT = "。．.！？!?，,；;：:、"


@dataclass(frozen=True)
class HeadingRule:
    """One kind of heading line.

    Attributes:
        pattern: matched (``re.match``) against a line without its line break.
        level: the heading's depth (1 outermost), or a function of the match.
        standalone: the line must be a paragraph of its own (blank line or text edge before and after) and short
            (at most 80 characters, no sentence punctuation at its end) — for numbered and book headings, which
            would otherwise catch list items and sentences.
        label: what goes into the heading path: ``"text"`` (the pattern's ``text`` group: Markdown), ``"line"``
            (the stripped line), ``"marker"`` (the match: ``第三条``, ``（一）``), or ``"auto"`` (the line when it is short and ends without punctuation, else the
            matched marker: ``第三条`` of ``第三条　为了…``).
    """

    pattern: re.Pattern[str]
    level: int | Callable[[re.Match[str]], int]
    standalone: bool = False
    label: Literal["text", "line", "marker", "auto"] = "auto"

    def level_of(self, m: re.Match[str]) -> int:
        return self.level(m) if callable(self.level) else self.level


def _marker(units: str, level: int, tail: str = "", label: Literal["marker", "auto"] = "auto") -> HeadingRule:
    return HeadingRule(re.compile(rf"[ \t\u3000]*第[{_NUM}]+(?:{units}){tail}{_AFTER_MARKER}"), level, label=label)


_MARKDOWN = HeadingRule(
    re.compile(r" {0,3}(#{1,6})(?:[ \t]+(?P<text>.*?))?(?:[ \t]+#+)?[ \t]*$"), lambda m: len(m.group(1)), label="text"
)
_NUMBERED = (
    HeadingRule(re.compile(r"(\d+(?:\.\d+)*)\.?[ \t]+\S"), lambda m: m.group(1).count(".") + 1, True, "line"),
    HeadingRule(re.compile(r"[一二三四五六七八九十百]+、\S"), 1, True, "line"),
)
_LAW = (
    _marker("编|編", 1),
    _marker("章", 2),
    _marker("节|節", 3),
    _marker("款", 4),
    _marker("目", 5),
    _marker("条|條", 6, rf"(?:[之の][{_NUM}]+)*", "marker"),
    _marker("项|項", 7, label="marker"),
    HeadingRule(re.compile(r"[ \t\u3000]*[（(][一二三四五六七八九十]+[）)]"), 7, label="marker"),
    HeadingRule(re.compile(r"[0-9０-９]+(?=[ \u3000])"), 7, label="marker"),  # Japanese 項: "２　前項の…"
    _marker("号|號", 8, label="marker"),
    HeadingRule(re.compile(r"[一二三四五六七八九十]+(?=[ \u3000])"), 8, label="marker"),  # Japanese 号: "一　…"
)
_BOOK = (
    # one level below a Markdown title ("# 書名"): part 2, chapter 3, section 4
    HeadingRule(re.compile(rf"第[{_NUM}]+[篇部卷巻]{_AFTER_MARKER}"), 2, True),
    HeadingRule(re.compile(rf"第[{_NUM}]+[章回]{_AFTER_MARKER}"), 3, True),
    HeadingRule(re.compile(rf"第[{_NUM}]+[节節]{_AFTER_MARKER}"), 4, True),
    HeadingRule(re.compile(r"(?i:part|book)\s+([IVXLC]+|\d+|[A-Z][a-z]+)\b"), 2, True),
    HeadingRule(re.compile(r"(?i:chapter)\s+([IVXLC]+|\d+|[A-Z][a-z]+)\b"), 3, True),
    HeadingRule(re.compile(r"(?i:section)\s+\d+(?:\.\d+)*\b"), 4, True),
)
_QUESTION = (
    HeadingRule(
        re.compile(r"\s*(?:Q\d*|Question|问|問|问题|問題|質問|设问)\s*[:：.．]", re.IGNORECASE), 7, label="line"
    ),
    HeadingRule(re.compile(r"[^\n]{1,200}[?？][\s\"'”’」』）)]*$"), 7, label="line"),
)

#: The heading level of a preset's *unit*: a chunk never holds two of them (an article of a law, a question with
#: its answer), even when they would fit together.  Presets without one pack whatever nests and fits.
UNIT_LEVELS: dict[str, int] = {"laws": 6, "qa": 7}

#: Heading rules per preset (the first rule that matches a line decides its level).
PRESETS: dict[str, tuple[HeadingRule, ...]] = {
    "layout": (_MARKDOWN, *_NUMBERED),
    "laws": (_MARKDOWN, *_LAW),
    "book": (_MARKDOWN, *_BOOK, *_NUMBERED),
    "qa": (_MARKDOWN, *_QUESTION),
}

_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_CAPTION = re.compile(r"[ \t\u3000]*[（(][^（）()\n]{1,20}[）)][ \t\u3000]*$")
_LEAF = 1_000  # the level of the text before the first heading: nothing nests under it


@dataclass(frozen=True)
class Section:
    """A heading line and the text up to the next heading (offsets into the text).

    Attributes:
        start / end: the section's span (``start`` at the heading's line start, or 0 for the preamble).
        level: the heading's depth (1 outermost); the preamble's is larger than any heading's.
        path: the heading path, outermost first (``()`` for the preamble).
        body_start: where the text after the heading line starts.
    """

    start: int
    end: int
    level: int
    path: tuple[str, ...]
    body_start: int


def _lines(text: str) -> list[tuple[int, str]]:
    """``(offset, line without its break)`` of every line."""
    out: list[tuple[int, str]] = []
    pos = 0
    for raw in text.splitlines(keepends=True):
        line = raw.rstrip("\r\n\v\f\x1c\x1d\x1e\x85\u2028\u2029")
        out.append((pos, line))
        pos += len(raw)
    return out


def _label(rule: HeadingRule, m: re.Match[str], line: str) -> tuple[str, int]:
    """The heading's label and where the section's own text starts in ``line`` (after a marker such as
    ``第三条``, whose article text follows on the same line; else after the line)."""
    stripped = line.strip()
    if rule.label == "text":
        return (m.group("text") or "").strip() or stripped, len(line)
    if rule.label == "line" or (rule.label == "auto" and len(stripped) <= 40 and stripped[-1:] not in _SENTENCE_PUNCT):
        return stripped, len(line)
    return m.group(0).strip(), m.end()


def _blank(lines: list[tuple[int, str]], i: int) -> bool:
    return i < 0 or i >= len(lines) or not lines[i][1].strip()


def find_sections(text: str, rules: Sequence[HeadingRule], *, captions: bool = False) -> list[Section]:
    """Cut ``text`` into sections at the heading lines that ``rules`` detect (lines inside fenced code blocks are
    never headings).  The sections tile the text: the first starts at 0 (the preamble, when the text does not open
    with a heading; omitted when it is blank), each next one at a heading's line start.  The heading path of a
    section is the labels of the enclosing headings (each heading closes every open heading of its level or
    deeper).  With ``captions``, a bracketed caption line just before a heading (``（目的）`` before ``第一条``, as
    Japanese statutes print it) starts that heading's section and joins its label."""
    lines = _lines(text)
    heads: list[tuple[int, int, int, str]] = []  # (start, body_start, level, label)
    fence: str | None = None
    for i, (pos, line) in enumerate(lines):
        fm = _FENCE.match(line)
        if fence is not None:
            if fm and fm.group(1)[0] == fence[0] and len(fm.group(1)) >= len(fence):
                fence = None
            continue
        if fm:
            fence = fm.group(1)
            continue
        if not line.strip():
            continue
        for rule in rules:
            m = rule.pattern.match(line)
            if m is None:
                continue
            if rule.standalone and (
                not (_blank(lines, i - 1) and _blank(lines, i + 1))
                or len(line.strip()) > 80
                or line.strip()[-1] in _SENTENCE_PUNCT
            ):
                continue
            label, own = _label(rule, m, line)
            start = pos
            if captions and i > 0 and _CAPTION.match(lines[i - 1][1]):
                start, label = lines[i - 1][0], f"{label}{lines[i - 1][1].strip()}"  # 第一条（目的）
                if heads and heads[-1][0] == start:
                    heads.pop()
            body = pos + own
            heads.append((start, body, rule.level_of(m), label))
            break
    sections: list[Section] = []
    if not heads or heads[0][0] > 0:
        first = heads[0][0] if heads else len(text)
        if text[:first].strip():
            sections.append(Section(0, first, _LEAF, (), 0))
    stack: list[tuple[int, str]] = []
    for n, (start, body, level, label) in enumerate(heads):
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, label))
        end = heads[n + 1][0] if n + 1 < len(heads) else len(text)
        sections.append(Section(start, end, level, tuple(lab for _, lab in stack), body))
    return sections


class LayoutTextSplitter(ParagraphTextSplitter):
    """Chunk at structural boundaries (headings), with :class:`ParagraphTextSplitter`'s boundaries inside a section.

    Args:
        chunk_size: maximum chunk length in characters (default 480).
        chunk_overlap: overlap between consecutive chunks *of one section* (default 80); sections never overlap.
        preset: which headings are detected: ``"layout"`` (default: Markdown and numbered headings), ``"laws"``,
            ``"book"`` or ``"qa"`` (see the module docstring and :data:`PRESETS`).
        heading_rules: your own rules instead of a preset's.
        unit_level: the heading level of which a chunk holds at most one (default: the preset's,
            :data:`UNIT_LEVELS`: articles for ``laws``, questions for ``qa``; none for the others).
        **kwargs: passed to ``TextSplitter``.

    Raises:
        ValueError: an unknown preset, or bad budgets (as :class:`ParagraphTextSplitter`).
        TypeError: a budget is not an ``int``.

    Chunks are ``Document``\\ s with the paragraph splitter's lineage metadata (``doc_id``, ``chunk_id``,
    ``start_index``/``end_index`` in file offsets, ``source_locator``) plus ``heading``, the heading path (a list
    of strings, outermost first).  Packing: a section and the small sections nested under it form one chunk while
    they fit ``chunk_size``; a longer section is chunked on its own by the paragraph machinery.

    Example:
        >>> from langchain_ragspine.text_splitters import LayoutTextSplitter
        >>> text = "第一章 总则\\n\\n第一条　为了规范管理，制定本法。\\n\\n第二条　本法适用于全国。"
        >>> chunks = LayoutTextSplitter(preset="laws", chunk_size=30, chunk_overlap=0).create_documents([text])
        >>> [(c.page_content, c.metadata["heading"]) for c in chunks]
        [('第一章 总则\\n\\n第一条　为了规范管理，制定本法。', ['第一章 总则', '第一条']), ('第二条　本法适用于全国。', ['第一章 总则', '第二条'])]
    """

    def __init__(
        self,
        chunk_size: int = DEFAULT_CHUNK_CHARS,
        chunk_overlap: int = DEFAULT_OVERLAP_CHARS,
        *,
        preset: str = "layout",
        heading_rules: Sequence[HeadingRule] | None = None,
        unit_level: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(chunk_size=chunk_size, chunk_overlap=chunk_overlap, **kwargs)
        if heading_rules is None and preset not in PRESETS:
            raise ValueError(f"unknown layout preset {preset!r}; choose one of {', '.join(PRESETS)}")
        self.preset = preset if heading_rules is None else "custom"
        self._rules: tuple[HeadingRule, ...] = tuple(heading_rules) if heading_rules is not None else PRESETS[preset]
        self.unit_level = unit_level if unit_level is not None else UNIT_LEVELS.get(self.preset)

    def sections(self, text: str) -> list[Section]:
        """The sections of ``text`` (see :func:`find_sections`)."""
        return find_sections(text, self._rules, captions=self.preset == "laws")

    def split_spans(self, text: str) -> list[Span]:
        """``(start, end)`` offsets of the chunks of ``text``, in order."""
        return [(s, e) for s, e, _ in self._chunk_spans(text)]

    def _chunk_spans(self, text: str) -> list[tuple[int, int, dict[str, Any]]]:
        return [(s, e, {HEADING_KEY: list(path)}) for s, e, path in self.section_chunks(Graphemes(text))]

    def blocks(self, g: Graphemes) -> list[tuple[int, int, tuple[str, ...]]]:
        """Sections packed into blocks (before chunking): ``(start, end, heading path)``.  A block is a section and
        the sections nested under it while they fit ``chunk_size`` (or one section alone); a heading with no text
        of its own before a nested heading opens the next block."""
        text, size = g.text, self._chunk_size
        sections = self.sections(text)
        n = len(sections)
        subtree_end = [n] * n  # sections[i:subtree_end[i]] is section i and everything nested under it
        open_: list[int] = []
        for i, sec in enumerate(sections):
            while open_ and sections[open_[-1]].level >= sec.level:
                subtree_end[open_.pop()] = i
            open_.append(i)
        out: list[tuple[int, int, tuple[str, ...]]] = []
        i, pending = 0, None  # pending: the start of bare headings that open the next block
        while i < n:
            sec = sections[i]
            start = sec.start if pending is None else pending
            end, j, children = sec.end, i + 1, 0
            units = int(sec.level == self.unit_level)
            while j < subtree_end[i]:  # whole nested subtrees, in order, while they fit (and hold one unit at most)
                last = sections[subtree_end[j] - 1]
                more = sum(1 for x in sections[j : subtree_end[j]] if x.level == self.unit_level)
                if last.end - start > size or units + more > 1:
                    break
                end, j, children, units = last.end, subtree_end[j], children + 1, units + more
            bare = not text[sec.body_start : sec.end].strip()
            if bare and children == 0 and j < n:
                pending = start  # a heading alone (nothing nested fits with it): it opens the next chunk
                i += 1
                continue
            pending = None
            out.append((start, end, sections[i + 1].path if bare and children == 1 else sec.path))
            i = j
        return out

    def section_chunks(self, g: Graphemes) -> list[tuple[int, int, tuple[str, ...]]]:
        """``(start, end, heading path)`` of every chunk: each block that fits is one chunk (whitespace-trimmed),
        a longer one is chunked by the paragraph machinery."""
        out: list[tuple[int, int, tuple[str, ...]]] = []
        for start, end, path in self.blocks(g):
            if end - start <= self._chunk_size:
                s, e = strip_span(g, start, end)
                if e > s:
                    out.append((s, e, path))
                continue
            out.extend((s, e, path) for s, e in self._pack(g, start, end))
        return out
