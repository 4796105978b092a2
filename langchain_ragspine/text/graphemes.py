"""Extended grapheme cluster boundaries (Unicode Standard Annex #29) and whitespace trimming that respects them.

A *grapheme cluster* is what a reader takes for one character: ``e`` + a combining acute accent, an emoji with a
skin-tone modifier or a ZWJ sequence (``👨‍👩‍👧``), a flag (two regional indicators), a Hangul syllable written in
jamo, CR LF.  The package's splitters never cut inside one, and never trim a space that carries a combining mark
(it is not whitespace to a reader).  :class:`Graphemes` finds the boundaries of one text once; :func:`lstrip_span`
and :func:`strip_span` trim whitespace off a span by whole clusters.

Usage::

    >>> from langchain_ragspine.text.graphemes import Graphemes, strip_span
    >>> g = Graphemes("  e\\u0301t\\u00e9  ")
    >>> g.at(3), g.at(4), strip_span(g, 0, len(g.text))
    (False, True, (2, 6))

Segmentation uses the ``regex`` package's ``\\X`` (UAX #29 extended grapheme clusters) on the stretches of text
that need it; see :class:`Graphemes`.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator

import regex

__all__ = ["Graphemes", "Span", "lstrip_span", "strip_span"]

#: A ``(start, end)`` pair of character offsets, ``text[start:end]``.
Span = tuple[int, int]

_NON_SPACE_RE = re.compile(r"\S")
_GRAPHEME = regex.compile(r"\X")
# Between two characters of these grapheme-break classes there is a cluster boundary (except inside CR LF).
_NOT_SIMPLE_RUN = regex.compile(r"[^\p{GCB=Other}\p{GCB=Control}\p{GCB=LF}\p{GCB=CR}]+")


class Graphemes:
    """Extended grapheme cluster boundaries (UAX #29) of one text: ``Graphemes(text)``.

    ``g.at(i)`` tells whether offset ``i`` (``0 <= i <= len(text)``) is a boundary; ``g.next(i)`` / ``g.prev(i)``
    give the first boundary after / the last before ``i``; ``g.text`` is the text.  Offsets are code points.

    Between two "simple" characters (Latin, CJK ideographs and kana, punctuation, spaces: grapheme break class
    Other, Control, CR or LF) there is always a boundary, except inside CR LF.  So only the stretches around other
    characters (combining marks, ZWJ, emoji modifiers, regional indicators, Hangul jamo, Indic marks) are segmented,
    with the ``regex`` package's ``\\X``, starting from a known boundary.  Built in one pass over the text;
    :meth:`at` is O(1), :meth:`next` and :meth:`prev` O(log clusters), however long a cluster is.
    """

    __slots__ = ("_ends", "_inner", "_starts", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        n = len(text)
        clusters: list[Span] = []  # the clusters of several code points, in order
        region: list[int] | None = None
        for m in _NOT_SIMPLE_RUN.finditer(text):
            start, end = max(m.start() - 1, 0), min(m.end() + 1, n)  # one simple character of context each side
            if start > 0 and text[start - 1 : start + 1] == "\r\n":
                start -= 1
            if region is not None and start <= region[1]:
                region[1] = end
                continue
            if region is not None:
                clusters += self._segment(*region)
            region = [start, end]
        if region is not None:
            clusters += self._segment(*region)
        i = text.find("\r\n")
        if i >= 0:  # CR LF outside the segmented stretches
            segmented = {c[0] for c in clusters}
            crlf = [(j, j + 2) for j in _find_all(text, "\r\n", i) if j not in segmented]
            clusters = sorted(clusters + crlf) if crlf else clusters
        # 1 at the positions strictly inside a cluster; empty (and never indexed) when there is no cluster
        self._inner = bytearray(n + 1) if clusters else bytearray()
        for s, e in clusters:
            self._inner[s + 1 : e] = b"\x01" * (e - s - 1)
        self._starts = [c[0] for c in clusters]
        self._ends = [c[1] for c in clusters]

    def _segment(self, start: int, end: int) -> list[Span]:
        return [m.span() for m in _GRAPHEME.finditer(self.text, start, end) if m.end() - m.start() > 1]

    def at(self, i: int) -> bool:
        """``True`` when ``i`` (``0 <= i <= len(text)``) is a grapheme cluster boundary."""
        inner = self._inner
        return i <= 0 or i >= len(self.text) or not (inner and inner[i])

    def _cluster(self, i: int) -> int:
        """Index of the cluster of several code points that ``i`` lies strictly inside."""
        return bisect.bisect_right(self._starts, i) - 1

    def next(self, i: int) -> int:
        """The first boundary after ``i``."""
        j = i + 1
        return j if self.at(j) else self._ends[self._cluster(j)]

    def prev(self, i: int) -> int:
        """The last boundary before ``i``."""
        j = i - 1
        return j if self.at(j) else self._starts[self._cluster(j)]


def _find_all(text: str, sub: str, i: int) -> Iterator[int]:
    """The positions of ``sub`` in ``text`` from ``i`` (a position of it) on, not overlapping."""
    while i >= 0:
        yield i
        i = text.find(sub, i + len(sub))


def lstrip_span(g: Graphemes, start: int, end: int) -> int:
    """``start`` moved past whole whitespace clusters of ``g.text[start:end]`` (a space carrying a combining mark is not whitespace), at
    most to ``end``: the last cluster boundary that is neither past ``end`` nor past the first non-whitespace
    character, or ``start`` itself."""
    text = g.text
    if start >= end or not text[start].isspace():
        return start
    m = _NON_SPACE_RE.search(text, start, end)
    stop = end if m is None else m.start()
    if g.at(stop):
        return stop
    return max(g.prev(stop), start)


def strip_span(g: Graphemes, start: int, end: int) -> Span:
    """``(start, end)`` trimmed of whitespace at both ends by whole clusters (:func:`lstrip_span` at the start;
    at the end, trailing clusters that are all whitespace): ``(s, e)`` with ``start <= s <= e <= end``, ``s == e``
    when the span is only whitespace."""
    start = lstrip_span(g, start, end)
    text = g.text
    while end > start and text[end - 1].isspace():
        prv = max(g.prev(end), start)
        if not text[prv:end].isspace():
            break
        end = prv
    return start, end
