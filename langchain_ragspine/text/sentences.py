"""Paragraphs and sentences of Japanese, Chinese and English text: one grammar of sentence ends, two shapes.

**The grammar** (every sentence splitter of the package, and the chunker's sentence cut, use it): a sentence ends
after a run of full stops — the CJK ones (``。！？``) wherever they stand, the Latin ones (``.!?``) only when
whitespace follows, so ``3.14``, ``e.g.x`` and URLs are not cut — together with the closing quotes and brackets
right after the run (:data:`CLOSERS`: ``」』）)】〕〉》"'”’``), which stay with the sentence they close.

**Two rule sets** (:class:`SentenceRules`) over that grammar, because the package has split sentences in two ways
since its first release and aligning either would change what is stored or answered:

* :data:`SENTENCE_RULES` — the semicolons ``；`` and ``;`` end a sentence too, and ``]`` is a closer too.  The
  default of :func:`sentence_spans` and :func:`line_sentence_spans`: extractive answers and their support check,
  the sentence compressor (``ExtractiveCompressor``), question splitting.
* :data:`CHUNK_SENTENCE_RULES` — the semicolons are *clause* marks (the weaker cut of ``ParagraphTextSplitter``, after
  sentence ends), ``]`` closes nothing.  The default of :func:`sentence_segments` (``SentenceWindowTextSplitter``,
  ``SemanticTextSplitter``) and the rules of the chunker's sentence cut: chunks stay byte-identical to the chunks
  already stored (and so do their ids).

**Two shapes.**

* :func:`sentence_spans` — spans that *tile* a range of a plain ``str`` exactly (the whitespace after a sentence end
  stays with that sentence); a caller trims what it needs (:func:`line_sentence_spans` trims, cuts at line breaks
  and may drop Markdown headings and fenced code).
* :func:`sentence_segments` — *trimmed*, grapheme-aware spans of a :class:`~langchain_ragspine.text.graphemes.Graphemes`
  text, as the splitters cut: blank-line paragraphs (:func:`paragraph_segments`) cut at every line break and every
  sentence end, never inside a grapheme cluster (Unicode Standard Annex #29), a run of marks ending a sentence
  after its last mark (``。」。`` is one end, as is ``！！``), and whitespace removed by whole clusters.

Every span is ``(start, end)`` into the text given (a verbatim slice); nothing here normalises text.

Example:
    >>> from langchain_ragspine.text.graphemes import Graphemes
    >>> text = "梅雨は六月に始まる；七月に終わる。Rain falls. See 3.14!"
    >>> [text[s:e] for s, e in sentence_spans(text)]
    ['梅雨は六月に始まる；', '七月に終わる。', 'Rain falls. ', 'See 3.14!']
    >>> [text[s:e] for s, e in sentence_segments(Graphemes(text))]
    ['梅雨は六月に始まる；七月に終わる。', 'Rain falls.', 'See 3.14!']
"""

from __future__ import annotations

import re

from langchain_ragspine.text.graphemes import Graphemes, Span, lstrip_span, strip_span

__all__ = [
    "CHUNK_SENTENCE_RULES",
    "CJK_BRACKETS",
    "CJK_FULL_STOPS",
    "CLOSERS",
    "LATIN_FULL_STOPS",
    "LINE_BREAKS",
    "SENTENCE_RULES",
    "SentenceRules",
    "line_sentence_spans",
    "line_sentences",
    "paragraph_segments",
    "sentence_segments",
    "sentence_spans",
]

#: Full stops that end a sentence wherever they stand (full width).
CJK_FULL_STOPS = "。！？"
#: Full stops that end a sentence when whitespace follows them (after any closers).
LATIN_FULL_STOPS = ".!?"
#: Closing quotes and brackets kept with the sentence they close (both rule sets; :data:`SENTENCE_RULES` adds ``]``).
CLOSERS = "」』）)】〕〉》\"'”’"
#: CJK brackets and quotes, opener → closer: a sentence end inside a pair that closes later on the line is no end
#: (``（既定 6。LangChain では 4）、…`` is one sentence; :func:`sentence_spans`).
CJK_BRACKETS = {"（": "）", "「": "」", "『": "』", "【": "】", "〔": "〕", "〈": "〉", "《": "》"}
#: The characters ``str.splitlines()`` splits on.
LINE_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"

_SPACE_RE = re.compile(r"\s+")
_LINE_BREAK_RE = re.compile(f"[{LINE_BREAKS}]")
_PARAGRAPH_BREAK = re.compile(r"\n[ \t\r\f\v]*\n\s*")
#: A Markdown fence line (CommonMark: three backticks or tildes) and an ATX heading line (``#`` … ``######``).
_FENCE_RE = re.compile(r"^\s*(```|~~~)")
_HEADING_RE = re.compile(r"^\s{0,3}#{1,6}\s")


class SentenceRules:
    """Which marks end a sentence and which closers stay with it: ``SentenceRules(cjk_ends, latin_ends, closers)``.

    Args:
        cjk_ends: marks that end a sentence wherever they stand (a run of them is one end).
        latin_ends: marks that end a sentence only when whitespace follows the closers after them.
        closers: closing quotes and brackets right after the ends, kept with the sentence.

    ``end_re`` is the compiled pattern of one sentence end (a run of ends, then closers); :meth:`ends_sentence` is
    the check the grapheme-aware splitters add.  The package's two instances are :data:`SENTENCE_RULES` and
    :data:`CHUNK_SENTENCE_RULES` (module docstring).
    """

    __slots__ = ("closers", "cjk_ends", "end_re", "latin_ends", "tail")

    def __init__(self, cjk_ends: str, latin_ends: str, closers: str) -> None:
        self.cjk_ends, self.latin_ends, self.closers = cjk_ends, latin_ends, closers
        #: every character that may continue a sentence end: another end, or a closer
        self.tail = frozenset(closers + cjk_ends + latin_ends)
        close = f"[{re.escape(closers)}]*"
        self.end_re = re.compile(rf"(?:[{re.escape(cjk_ends)}]+|[{re.escape(latin_ends)}]+(?={close}\s)){close}")

    def __repr__(self) -> str:
        return f"SentenceRules({self.cjk_ends!r}, {self.latin_ends!r}, {self.closers!r})"

    def ends_sentence(self, text: str, j: int, k: int) -> bool:
        """Whether a sentence ends at offset ``j`` of ``text`` when ``text[j:k]`` is the whitespace after it (empty
        when ``k == j``): the characters before ``j`` are an end and its closers — a Latin end only with whitespace
        after it — and, with no whitespace, the next character is not one more end or closer (``。」`` and ``！！``
        end after their last mark)."""
        gap = k > j
        if not gap and k < len(text) and text[k] in self.tail:
            return False
        i = j
        while i > 0 and text[i - 1] in self.closers:
            i -= 1
        return i > 0 and (text[i - 1] in self.cjk_ends or (gap and text[i - 1] in self.latin_ends))


#: The rules of :func:`sentence_spans` / :func:`line_sentence_spans`: semicolons end a sentence, ``]`` closes one.
SENTENCE_RULES = SentenceRules(CJK_FULL_STOPS + "；", LATIN_FULL_STOPS + ";", CLOSERS + "]")
#: The splitters' rules (:func:`sentence_segments`, the chunker's sentence cut): semicolons are clause marks.
CHUNK_SENTENCE_RULES = SentenceRules(CJK_FULL_STOPS, LATIN_FULL_STOPS, CLOSERS)


def _inside_brackets(text: str, start: int, at: int, end: int) -> bool:
    """Whether offset ``at`` lies inside a CJK bracket (:data:`CJK_BRACKETS`) opened in ``text[start:at]`` that
    closes in ``text[at:end]`` (an unclosed bracket does not hold the sentence open)."""
    stack: list[str] = []
    for ch in text[start:at]:
        if ch in CJK_BRACKETS:
            stack.append(CJK_BRACKETS[ch])
        elif stack and ch == stack[-1]:
            stack.pop()
    return bool(stack) and stack[-1] in text[at:end]


def sentence_spans(
    text: str, start: int = 0, end: int | None = None, *, rules: SentenceRules = SENTENCE_RULES
) -> list[Span]:
    """Split ``text[start:end]`` into sentences and return their ``(start, end)`` char offsets into ``text``.

    The spans tile the range exactly: the first starts at ``start``, each next one starts where the previous ended, and
    the last ends at ``end`` (the whitespace after a sentence end stays with that sentence; trailing text without
    an end mark is its own sentence).  An empty range gives ``[]``.  Sentence ends are those of ``rules`` (default
    :data:`SENTENCE_RULES`: ``。！？；`` always, ``.!?;`` before whitespace, closers kept), except inside a CJK
    bracket or quote (:data:`CJK_BRACKETS`) that closes later in the range — ``（既定 6。LangChain では 4）、…。`` is one
    sentence, ``「はい。そうです。」と答えた。`` ends after ``」`` —; line breaks are not boundaries of their own
    (:func:`line_sentence_spans` adds them), so a bracket never holds a sentence across lines there.

    Example:
        >>> text = "One. Two!三つ。四つ"
        >>> [text[s:e] for s, e in sentence_spans(text)]
        ['One. ', 'Two!三つ。', '四つ']
    """
    end = len(text) if end is None else end
    if start >= end:
        return []
    spans: list[Span] = []
    pos = start
    for m in rules.end_re.finditer(text, start, end):
        if _inside_brackets(text, pos, m.end(), end):
            continue
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


def line_sentence_spans(
    text: str, *, skip_headings: bool = False, skip_code: bool = False, rules: SentenceRules = SENTENCE_RULES
) -> list[Span]:
    """``(start, end)`` of the sentences of ``text``: each line (``str.splitlines``) cut by :func:`sentence_spans`
    with ``rules``, every piece stripped of whitespace (``str.isspace``), blank pieces dropped.

    Args:
        text: the text (a passage, an answer).
        skip_headings: drop Markdown ATX heading lines (``# …`` to ``###### …``, up to three spaces before).
        skip_code: drop fenced code blocks (lines from a ```` ``` ```` or ``~~~`` fence to the next, fences
            included).  A text that may begin inside a block — an odd number of fences whose first is a bare
            ```` ``` ```` / ``~~~`` (a closing fence) — is read as starting inside it.
        rules: the sentence ends (default :data:`SENTENCE_RULES`).

    Example:
        >>> text = "# 梅雨\\n梅雨は六月。七月まで。\\n```\\nx = 1.\\n```\\nEnd."
        >>> [text[s:e] for s, e in line_sentence_spans(text, skip_headings=True, skip_code=True)]
        ['梅雨は六月。', '七月まで。', 'End.']
    """
    out: list[Span] = []
    pos = 0
    lines = text.splitlines(keepends=True)
    in_fence = False
    if skip_code:
        fences = [line.strip() for line in lines if _FENCE_RE.match(line)]
        in_fence = len(fences) % 2 == 1 and fences[0] in ("```", "~~~")
    for line in lines:
        start, end = pos, pos + len(line)
        pos = end
        if skip_code and _FENCE_RE.match(line):
            in_fence = not in_fence
            continue
        if in_fence or not line.strip() or (skip_headings and _HEADING_RE.match(line)):
            continue
        for s, e in sentence_spans(text, start, end, rules=rules):
            while s < e and text[s].isspace():
                s += 1
            while e > s and text[e - 1].isspace():
                e -= 1
            if s < e:
                out.append((s, e))
    return out


def line_sentences(
    text: str, *, skip_headings: bool = False, skip_code: bool = False, rules: SentenceRules = SENTENCE_RULES
) -> list[str]:
    """The sentences of :func:`line_sentence_spans` as strings (verbatim slices of ``text``, stripped)."""
    spans = line_sentence_spans(text, skip_headings=skip_headings, skip_code=skip_code, rules=rules)
    return [text[s:e] for s, e in spans]


def paragraph_segments(g: Graphemes, start: int = 0, end: int | None = None) -> list[Span]:
    """The blank-line separated paragraphs of ``g.text[start:end]`` (``start`` a line start), as ``(start, end)``
    offsets into the whole text, whitespace-trimmed by whole grapheme clusters (a space that carries a combining
    mark is kept), empty ones dropped.  A paragraph break is a line break, blank lines (whitespace only), and the
    whitespace after them."""
    text = g.text
    end = len(text) if end is None else end
    spans: list[Span] = []
    pos = start
    for m in _PARAGRAPH_BREAK.finditer(text, start, end):
        spans.append(strip_span(g, pos, m.start()))
        pos = m.end() if g.at(m.end()) else g.prev(m.end())  # keep a space that carries a combining mark
    spans.append(strip_span(g, pos, end))
    return [(s, e) for s, e in spans if e > s]


def sentence_segments(
    g: Graphemes, start: int = 0, end: int | None = None, *, rules: SentenceRules = CHUNK_SENTENCE_RULES
) -> list[Span]:
    """Sentence spans of ``g.text[start:end]`` (offsets into the whole text, whitespace-trimmed, in order): the
    paragraphs (:func:`paragraph_segments`) cut at every line break and every sentence end of ``rules`` (default
    :data:`CHUNK_SENTENCE_RULES`: ``。！？`` always, ``.!?`` before whitespace, closers kept with their sentence),
    never inside a grapheme cluster.  A heading, a list item or a table row is a sentence of its own.  Linear in
    the length of the text.

    Example:
        >>> from langchain_ragspine.text.graphemes import Graphemes
        >>> text = "# 梅雨\\n\\n梅雨は六月に始まる。「七月まで。」\\n- 台風"
        >>> [text[s:e] for s, e in sentence_segments(Graphemes(text))]
        ['# 梅雨', '梅雨は六月に始まる。', '「七月まで。」', '- 台風']
    """
    text = g.text
    out: list[Span] = []
    for ps, pe in paragraph_segments(g, start, end):
        # a line break: at the start of the whitespace run that holds it
        cuts = {m.start() for m in _SPACE_RE.finditer(text, ps, pe)
                if m.start() > ps and _LINE_BREAK_RE.search(text, m.start(), m.end())}
        for m in rules.end_re.finditer(text, ps, pe):
            j = m.end()
            if ps < j < pe and rules.ends_sentence(text, j, lstrip_span(g, j, pe)):
                cuts.add(j)
        a = ps
        for j in sorted(cuts):
            if not g.at(j):
                continue
            s, e = strip_span(g, a, j)
            if e > s:
                out.append((s, e))
            a = j
        s, e = strip_span(g, a, pe)
        if e > s:
            out.append((s, e))
    return out
