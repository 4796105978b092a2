"""The chunk cutter as it was before it was made linear (commit 66aa609): the reference the linear cutter is
proved byte-identical against (``tests/unit_tests/text_splitters/test_chunking_linear.py``).

The functions below are the package's ``text_splitters/paragraph.py`` internals of that commit, copied unchanged
(quadratic in paragraph length: every search for a cut scanned the rest of the paragraph).  :func:`reference_cutter`
swaps them into the package for the duration of a ``with`` block, so every splitter — paragraph, layout presets,
parent-child, sentence window, semantic — runs on the old cutting code and its output can be compared with the
current one's.  Test-only code: keep it out of the package.
"""
# ruff: noqa
# mypy: ignore-errors

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from unittest import mock

import regex

from langchain_ragspine.text import CJK_CHAR_RE

Span = tuple[int, int]

_PARAGRAPH_BREAK = re.compile(r"\n[ \t\r\f\v]*\n\s*")

# Boundary kinds, strongest first (the order in which a cut is looked for).
LINE, SENTENCE, CLAUSE, SPACE, GRAPHEME, IN_WORD, CODE_POINT = range(7)
_NOT_IN_WORD = (LINE, SENTENCE, CLAUSE, SPACE, GRAPHEME)

_LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"  # what str.splitlines() splits on
_CLOSERS = "」』）)】〕〉》\"'”’"
_CJK_ENDS = "。！？"
_LATIN_ENDS = ".!?"
_CJK_CLAUSE = "、，；："
_LATIN_CLAUSE = ",;"
_SENTENCE_TAIL = frozenset(_CLOSERS + _CJK_ENDS + _LATIN_ENDS)
_MARKS = _SENTENCE_TAIL | frozenset(_CJK_CLAUSE + _LATIN_CLAUSE)
_LINE_RE = re.compile(rf"\s*[{_LINE_BREAKS}]\s*")
_SENTENCE_RE = re.compile(
    rf"(?:[{_CJK_ENDS}]+|[{re.escape(_LATIN_ENDS)}]+(?=[{re.escape(_CLOSERS)}]*\s))[{re.escape(_CLOSERS)}]*"
)
_CLAUSE_RE = re.compile(rf"[{_CJK_CLAUSE}]|[{_LATIN_CLAUSE}](?=\s)")
_SPACE_RE = re.compile(r"\s+")
#: Characters that keep a Latin "word" together (``3.14``, ``well-known``, ``don't``, URLs).
_WORD_JOINERS = frozenset("._-'’/:@%&+#~=")

_GRAPHEME = regex.compile(r"\X")
# Between two characters of these grapheme-break classes there is a cluster boundary (except inside CR LF).
_NOT_SIMPLE_RUN = regex.compile(r"[^\p{GCB=Other}\p{GCB=Control}\p{GCB=LF}\p{GCB=CR}]+")


class _Graphemes:
    """Extended grapheme cluster boundaries (UAX #29) of one text.

    Between two "simple" characters (Latin, CJK ideographs and kana, punctuation, spaces: grapheme break class
    Other, Control, CR or LF) there is always a boundary, except inside CR LF.  So only the stretches around other
    characters (combining marks, ZWJ, emoji modifiers, regional indicators, Hangul jamo, Indic marks) are segmented,
    with the ``regex`` package's ``\\X``, starting from a known boundary.
    """

    __slots__ = ("_inner", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self._inner: set[int] = set()  # positions strictly inside a cluster of several code points
        n = len(text)
        region: list[int] | None = None
        for m in _NOT_SIMPLE_RUN.finditer(text):
            start, end = max(m.start() - 1, 0), min(m.end() + 1, n)  # one simple character of context each side
            if start > 0 and text[start - 1 : start + 1] == "\r\n":
                start -= 1
            if region is not None and start <= region[1]:
                region[1] = end
                continue
            if region is not None:
                self._segment(*region)
            region = [start, end]
        if region is not None:
            self._segment(*region)

    def _segment(self, start: int, end: int) -> None:
        for m in _GRAPHEME.finditer(self.text, start, end):
            self._inner.update(range(m.start() + 1, m.end()))

    def at(self, i: int) -> bool:
        """``True`` when ``i`` (``0 <= i <= len(text)``) is a grapheme cluster boundary."""
        t = self.text
        return i not in self._inner and (i <= 0 or i >= len(t) or not (t[i - 1] == "\r" and t[i] == "\n"))

    def next(self, i: int) -> int:
        """The first boundary after ``i``."""
        j, n = i + 1, len(self.text)
        while j < n and not self.at(j):
            j += 1
        return j

    def prev(self, i: int) -> int:
        """The last boundary before ``i``."""
        j = i - 1
        while j > 0 and not self.at(j):
            j -= 1
        return j


def _lstrip(g: _Graphemes, start: int, end: int) -> int:
    """``start`` moved past whole whitespace clusters (a space carrying a combining mark is not whitespace)."""
    text = g.text
    while start < end and text[start].isspace():
        nxt = g.next(start)
        if nxt > end or not text[start:nxt].isspace():
            break
        start = nxt
    return start


def _strip(g: _Graphemes, start: int, end: int) -> Span:
    start = _lstrip(g, start, end)
    text = g.text
    while end > start and text[end - 1].isspace():
        prv = max(g.prev(end), start)
        if not text[prv:end].isspace():
            break
        end = prv
    return start, end


def _paragraph_spans(g: _Graphemes, start: int = 0, end: int | None = None) -> list[Span]:
    """Paragraph spans of ``g.text[start:end]`` (offsets into the whole text); ``start`` must be a line start."""
    text = g.text
    end = len(text) if end is None else end
    spans: list[Span] = []
    pos = start
    for m in _PARAGRAPH_BREAK.finditer(text, start, end):
        spans.append(_strip(g, pos, m.start()))
        pos = m.end() if g.at(m.end()) else g.prev(m.end())  # keep a space that carries a combining mark
    spans.append(_strip(g, pos, end))
    return [(s, e) for s, e in spans if e > s]


def paragraph_spans(text: str) -> list[Span]:
    """``(start, end)`` offsets of the non-empty, whitespace-trimmed, blank-line separated paragraphs of ``text``."""
    return _paragraph_spans(_Graphemes(text))


def _sentence_spans(g: _Graphemes, start: int = 0, end: int | None = None) -> list[Span]:
    """Sentence spans of ``g.text[start:end]`` (offsets into the whole text, whitespace-trimmed, in order): the
    paragraphs cut at every line break and every sentence end, with the boundary rules of the module docstring
    (``。！？`` always, ``.!?`` before whitespace, closing quotes and brackets kept with their sentence).  A
    heading, a list item or a table row is a sentence of its own."""
    out: list[Span] = []
    for ps, pe in _paragraph_spans(g, start, end):
        cuts = set(_cut_candidates(g, LINE, ps, ps + 1, pe - 1, pe))
        cuts.update(_cut_candidates(g, SENTENCE, ps, ps + 1, pe - 1, pe))
        a = ps
        for j in sorted(cuts):
            if not g.at(j):
                continue
            s, e = _strip(g, a, j)
            if e > s:
                out.append((s, e))
            a = j
        s, e = _strip(g, a, pe)
        if e > s:
            out.append((s, e))
    return out


def _wordish(ch: str) -> bool:
    return (ch.isalnum() or ch in _WORD_JOINERS) and CJK_CHAR_RE.match(ch) is None


def _inside_word(text: str, i: int) -> bool:
    """``True`` when position ``i`` splits a run of letters/digits of a space-delimited script (Latin, Cyrillic…),
    including the marks that join such a word (``3.14``, ``well-known``, ``don't``, ``example.com/a``).

    CJK text has no spaces between words, so a cut between two CJK characters is not "inside a word".
    """
    return 0 < i < len(text) and _wordish(text[i - 1]) and _wordish(text[i])


def _gap_kind(text: str, j: int, k: int) -> int:
    """Kind of the boundary between ``text[:j]`` and ``text[k:]``, where ``text[j:k]`` is whitespace (maybe empty)."""
    gap = text[j:k]
    if any(c in _LINE_BREAKS for c in gap):
        return LINE
    i = j
    while i > 0 and text[i - 1] in _CLOSERS:
        i -= 1
    ends = i > 0 and (text[i - 1] in _CJK_ENDS or (gap and text[i - 1] in _LATIN_ENDS))
    if ends and (gap or k >= len(text) or text[k] not in _SENTENCE_TAIL):  # "。」" and "！！" end after the last
        return SENTENCE
    if j > 0 and (text[j - 1] in _CJK_CLAUSE or (gap and text[j - 1] in _LATIN_CLAUSE)):
        return CLAUSE
    if gap:
        return SPACE
    return IN_WORD if _inside_word(text, j) else GRAPHEME


def _start_candidates(g: _Graphemes, kind: int, lo: int, hi: int) -> Iterator[int]:
    """Chunk starts ``k`` in ``[lo, hi)`` (``lo >= 1``) that begin on a boundary of exactly ``kind``, in order."""
    text = g.text
    scan = lo - 1
    while scan > 0 and (text[scan].isspace() or text[scan] in _MARKS):  # what a start in the window may follow
        scan -= 1
    if kind in (LINE, SENTENCE, CLAUSE, SPACE):
        pattern = {LINE: _LINE_RE, SENTENCE: _SENTENCE_RE, CLAUSE: _CLAUSE_RE, SPACE: _SPACE_RE}[kind]
        for m in pattern.finditer(text, scan, hi):
            j = m.start() if kind in (LINE, SPACE) else m.end()
            k = _lstrip(g, j, hi)
            if k >= hi:
                break
            if k >= lo and not text[k].isspace() and g.at(k) and _gap_kind(text, j, k) == kind:
                yield k
    else:
        for k in range(lo, hi):
            if not text[k - 1].isspace() and not text[k].isspace() and _gap_kind(text, k, k) == kind:
                yield k


def _best_start(g: _Graphemes, lo: int, hi: int, worst: int) -> int | None:
    """Earliest chunk start of the strongest kind (no weaker than ``worst``) in ``[lo, hi)``, or ``None``."""
    lo = max(lo, 1)
    for kind in range(min(worst, GRAPHEME) + 1):
        for k in _start_candidates(g, kind, lo, hi):
            if g.at(k):
                return k
    return None


def _cut_candidates(g: _Graphemes, kind: int, a: int, lo: int, hi: int, pe: int) -> Iterator[int]:
    """Piece ends ``j`` in ``[lo, hi]`` (cutting ``[a, pe)``) that lie on a boundary of exactly ``kind``."""
    text = g.text
    if kind == LINE:
        for m in _LINE_RE.finditer(text, a, pe):
            if m.start() > hi:
                break
            if m.start() >= lo:
                yield m.start()
    elif kind in (SENTENCE, CLAUSE):
        pattern = _SENTENCE_RE if kind == SENTENCE else _CLAUSE_RE
        for m in pattern.finditer(text, a, pe):
            j = m.end()
            if j > hi:
                break
            if j >= lo and _gap_kind(text, j, _lstrip(g, j, pe)) == kind:
                yield j
    elif kind == SPACE:
        for m in _SPACE_RE.finditer(text, a, pe):
            j = m.start()
            if j > hi:
                break
            if j >= lo and _gap_kind(text, j, m.end()) == SPACE:
                yield j
    else:
        for j in range(lo, hi + 1):
            if kind == CODE_POINT or (not text[j - 1].isspace() and not text[j].isspace() and (
                kind == IN_WORD or not _inside_word(text, j)
            )):
                yield j


def _pick_cut(g: _Graphemes, a: int, lo: int, hi: int, pe: int, target: int, kinds: Iterable[int]) -> Span | None:
    """The ``(end, kind)`` of the strongest boundary in ``[lo, hi]`` (nearest ``target`` among equals), or ``None``."""
    if lo > hi:
        return None
    for kind in kinds:
        best: int | None = None
        for j in _cut_candidates(g, kind, a, lo, hi, pe):
            if (kind == CODE_POINT or g.at(j)) and (best is None or abs(j - target) < abs(best - target)):
                best = j
        if best is not None:
            return best, kind
    return None



# -- ParagraphTextSplitter's cutting methods, as functions of the splitter ---------------------------------
def _pack(self, g: _Graphemes, start: int, end: int) -> list[Span]:
    """Chunk spans of ``g.text[start:end]`` (``start`` a line start): paragraphs packed into ``chunk_size``,
    long ones cut at the best boundary, consecutive chunks overlapping (the module docstring).  The structural
    splitters (layout, parent-child, semantic) call this on a section so that the boundary order inside a
    section is the paragraph splitter's."""
    size = self._chunk_size
    chunks: list[Span] = []
    cur: Span | None = None
    for ps, pe in _paragraph_spans(g, start, end):
        if pe - ps > size:
            # the short paragraphs packed so far (a heading, a lead-in line) open the long one's first piece
            start = ps if cur is None else cur[0]
            cur = None
            chunks.extend(self._split_long(g, start, pe))
            continue
        if cur is not None and pe - cur[0] <= size:
            cur = (cur[0], pe)
            continue
        if cur is not None:
            chunks.append(cur)
        start = self._overlap_start(g, chunks[-1], ps, pe) if chunks else ps
        cur = (start, pe)
    if cur is not None:
        chunks.append(cur)
    return chunks

def _overlap_start(self, g: _Graphemes, prev: Span, ps: int, pe: int) -> int:
    """Where a chunk holding the paragraph ``[ps, pe)`` starts so that it overlaps the previous chunk ``prev``."""
    prev_start, prev_end = prev
    if self._chunk_overlap == 0:
        return ps
    # the chunk [start, pe) must fit the budget, overlap at most chunk_overlap chars, and not start on the
    # previous chunk's first character (so it is never contained in it)
    lo = max(prev_end - self._chunk_overlap, pe - self._chunk_size, prev_start + 1)
    start = _best_start(g, lo, prev_end, GRAPHEME)
    return ps if start is None else start

def _split_long(self, g: _Graphemes, ps: int, pe: int) -> list[Span]:
    """Cut the over-budget paragraph ``[ps, pe)`` into overlapping pieces at the best boundaries (module doc)."""
    size, overlap = self._chunk_size, self._chunk_overlap
    tail = (size - overlap) // 8  # fresh characters the last piece of a paragraph gets at least, if it can
    out: list[Span] = []
    a, done = ps, ps  # current piece start; end of the text already in a piece
    while pe - a > size:
        limit = a + size
        # fill the piece up to the budget, but leave the paragraph's last piece some text of its own
        first = max(a, done) + 1  # a piece holds at least one character no earlier piece has
        hi = limit if pe - limit >= tail else max(first, pe - tail)
        lo = max(first, hi - (hi - first) // 2)
        picked = (
            _pick_cut(g, a, lo, hi, pe, hi, _NOT_IN_WORD)  # the strongest boundary, nearest the budget
            or _pick_cut(g, a, first, lo - 1, pe, lo, _NOT_IN_WORD)  # a shorter piece
            or _pick_cut(g, a, hi + 1, limit, pe, hi, _NOT_IN_WORD)  # a shorter last piece
            or _pick_cut(g, a, first, limit, pe, hi, (IN_WORD,))  # inside a long Latin "word"
        )
        if picked is None:
            if a < done:  # the overlap leaves no room for the next grapheme cluster: start without it
                a = _lstrip(g, done, pe)
                continue
            # any cluster boundary (one next to a space that carries a combining mark is no whitespace cut),
            # else inside a grapheme cluster longer than the budget
            picked = next(((j, GRAPHEME) for j in range(limit, first - 1, -1) if g.at(j)), (hi, CODE_POINT))
        cut, kind = picked
        out.append((a, cut))
        nxt = None
        if overlap and kind <= GRAPHEME:
            # a piece begins on a boundary as strong as the cut before it: a line after a line-break cut, a
            # sentence or clause after a sentence or clause cut, a word after a whitespace cut
            worst = LINE if kind == LINE else max(kind, CLAUSE)
            nxt = _best_start(g, max(cut - overlap, done, a + 1), cut, worst)
        a = _lstrip(g, cut, pe) if nxt is None else nxt
        done = cut
    out.append((a, pe))
    return out



@contextmanager
def reference_cutter() -> Iterator[None]:
    """Run every splitter on the reference (old) cutter inside the block: the grapheme segmentation and
    whitespace trimming (now ``text.graphemes``), paragraph / sentence segmentation (now ``text.sentences``) and the
    splitter's ``_pack`` / ``_overlap_start`` / ``_split_long`` are replaced, in every module that imported them."""
    from langchain_ragspine.text import sentences
    from langchain_ragspine.text_splitters import layout, paragraph, parent_child, semantic, sentence_window

    patches = [
        mock.patch.object(paragraph.ParagraphTextSplitter, "_pack", _pack),
        mock.patch.object(paragraph.ParagraphTextSplitter, "_overlap_start", _overlap_start),
        mock.patch.object(paragraph.ParagraphTextSplitter, "_split_long", _split_long),
        mock.patch.object(paragraph, "Graphemes", _Graphemes),
        mock.patch.object(paragraph, "paragraph_segments", _paragraph_spans),
        mock.patch.object(sentences, "paragraph_segments", _paragraph_spans),
        mock.patch.object(sentences, "sentence_segments", _sentence_spans),
        mock.patch.object(layout, "Graphemes", _Graphemes),
        mock.patch.object(layout, "strip_span", _strip),
        mock.patch.object(parent_child, "Graphemes", _Graphemes),
        mock.patch.object(sentence_window, "Graphemes", _Graphemes),
        mock.patch.object(sentence_window, "sentence_segments", _sentence_spans),
        mock.patch.object(semantic, "Graphemes", _Graphemes),
        mock.patch.object(semantic, "sentence_segments", _sentence_spans),
    ]
    for p in patches:
        p.start()
    try:
        yield
    finally:
        for p in reversed(patches):
            p.stop()
