"""RAGSpine's paragraph chunker as a LangChain ``TextSplitter``.

Paragraphs (blank-line separated) are packed into chunks of at most ``chunk_size`` characters; consecutive chunks
overlap by up to ``chunk_overlap`` characters, the overlap starting on the best boundary inside the overlap window.

A paragraph longer than ``chunk_size`` is cut into pieces at the best boundary that fits, in this order:

1. a line break (so Markdown lists, tables and code split between lines),
2. a sentence end (``。！？`` always; ``.!?`` when followed by whitespace; closing quotes and brackets such as
   ``」』）"'`` stay with their sentence),
3. a clause mark (``、，；：`` always; ``,;`` when followed by whitespace),
4. whitespace,
5. an extended grapheme cluster boundary (Unicode Standard Annex #29, via the ``regex`` package's ``\\X``) that is
   not inside a Latin word (between two CJK characters, next to punctuation),
6. any grapheme cluster boundary (a run of Latin letters longer than the budget, e.g. a URL or base64),
7. a code point — only when one grapheme cluster alone is longer than ``chunk_size``.

A cut is never placed inside a grapheme cluster (combining marks, emoji ZWJ and flag sequences, CRLF) except in
case 7, and never inside a Latin word while another boundary exists in the budget.  A piece is filled: among the
boundaries of the best kind in the second half of its budget it ends at the last one — except that the last piece
of a paragraph keeps at least ``(chunk_size - chunk_overlap) // 8`` characters (50 by default) of its own, so there
is no sliver.  Short paragraphs just before a long one (a heading, a lead-in line) open its first piece, so a
heading is not a chunk of its own.  Consecutive pieces of one paragraph overlap by up to ``chunk_overlap``
characters: the next piece starts on the earliest boundary of the best kind in the overlap window, and that
boundary must be as strong as the cut — a line start after a line-break cut (table rows and list items stay
whole), a sentence or clause start after a sentence or clause cut, a word start after a whitespace cut; without
one the pieces do not overlap.  Every piece ends after the previous one ended, so splitting always terminates, and
every non-whitespace character is in some chunk.

Splitting takes time linear in the length of the text, however long one paragraph is: every search for a cut or an
overlap start looks at one piece's budget (plus a run of whitespace or punctuation crossing its edge), never at the
rest of the paragraph, and grapheme boundaries are found once per text.  A 10 MB paragraph without a sentence end
splits in seconds, within a small factor of the same text in paragraphs (``benchmarks/RESULTS.md``, section
``chunking-scale``).

Every chunk is a contiguous, verbatim substring ``text[start_index:end_index]`` of its source (no normalisation, no
re-joining), so a citation's offsets always point at the exact text shown to the reader.  A document loaded by
``CorpusLoader`` carries ``metadata["body_offset"]`` (where its text starts in the file); the chunk offsets then
index the file itself (see :mod:`langchain_ragspine.document_loaders.locators`).  This is the "recursive" chunking
of LangChain's ``RecursiveCharacterTextSplitter`` (separators from strong to weak), with exact offsets instead of
``str.find``, grapheme-safe cuts, and overlap that starts on a boundary.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from langchain_core.documents import Document
from langchain_text_splitters import TextSplitter

from langchain_ragspine.arguments import check_int
from langchain_ragspine.document_loaders.locators import source_locator_for
from langchain_ragspine.settings import DEFAULT_CHUNK_CHARS as DEFAULT_CHUNK_CHARS
from langchain_ragspine.settings import DEFAULT_OVERLAP_CHARS as DEFAULT_OVERLAP_CHARS
from langchain_ragspine.text import CJK_CHAR_CLASS, CJK_CHAR_RE
from langchain_ragspine.text.graphemes import Graphemes, Span, lstrip_span
from langchain_ragspine.text.sentences import CHUNK_SENTENCE_RULES, LINE_BREAKS, paragraph_segments

__all__ = [
    "DEFAULT_CHUNK_CHARS",
    "DEFAULT_OVERLAP_CHARS",
    "ParagraphTextSplitter",
    "chunk_id_for",
    "paragraph_spans",
    "source_locator_for",
]

# The default chunk budget and overlap in characters (480, 80) are the settings' defaults, stated there once.

# Boundary kinds, strongest first (the order in which a cut is looked for).
LINE, SENTENCE, CLAUSE, SPACE, GRAPHEME, IN_WORD, CODE_POINT = range(7)
_NOT_IN_WORD = (LINE, SENTENCE, CLAUSE, SPACE, GRAPHEME)

# The sentence rules are the text package's (semicolons are clause marks here); the clause marks are the chunker's.
_RULES = CHUNK_SENTENCE_RULES
_CLOSERS, _CJK_ENDS, _LATIN_ENDS = _RULES.closers, _RULES.cjk_ends, _RULES.latin_ends
_ends_sentence = _RULES.ends_sentence
_CJK_CLAUSE = "、，；："
_LATIN_CLAUSE = ",;"
_LINE_RE = re.compile(rf"\s*[{LINE_BREAKS}]\s*")
_SENTENCE_RE = _RULES.end_re
_CLAUSE_RE = re.compile(rf"[{_CJK_CLAUSE}]|[{_LATIN_CLAUSE}](?=\s)")
_SPACE_RE = re.compile(r"\s+")
_NON_SPACE_RE = re.compile(r"\S")
_LINE_BREAK_RE = re.compile(f"[{LINE_BREAKS}]")
#: Characters that keep a Latin "word" together (``3.14``, ``well-known``, ``don't``, URLs).
_WORD_JOINERS = frozenset("._-'’/:@%&+#~=")
#: A character that is not :func:`_wordish` (CJK, or neither alphanumeric — ``\\w`` is ``str.isalnum`` plus ``_``,
#: a joiner — nor a joiner): a window without one holds no grapheme-level cut at all (every position is inside a
#: word), so :func:`_pick_cut` skips that kind at once instead of testing each position (a 10 MB run of letters:
#: ~1 s/MB before, equal by ``tests/unit_tests/text_splitters/test_chunking_linear.py``'s check over every code point).
_NOT_WORDISH_RE = re.compile(f"[{CJK_CHAR_CLASS}]|[^\\w{''.join(chr(92) + c for c in sorted(_WORD_JOINERS))}]")


def paragraph_spans(text: str) -> list[Span]:
    """``(start, end)`` offsets of the non-empty, whitespace-trimmed, blank-line separated paragraphs of ``text``
    (:func:`langchain_ragspine.text.sentences.paragraph_segments`)."""
    return paragraph_segments(Graphemes(text))


def chunk_id_for(doc_id: str, i: int) -> str:
    """The chunk id convention: ``f"{doc_id}#{i}"`` with ``i`` the 0-based chunk position in the document."""
    return f"{doc_id}#{i}"


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
    gap = k > j
    if gap and _LINE_BREAK_RE.search(text, j, k):
        return LINE
    if _ends_sentence(text, j, k):  # "。」" and "！！" end after the last
        return SENTENCE
    if j > 0 and (text[j - 1] in _CJK_CLAUSE or (gap and text[j - 1] in _LATIN_CLAUSE)):
        return CLAUSE
    if gap:
        return SPACE
    return IN_WORD if _inside_word(text, j) else GRAPHEME


# How long the searches below look.  Every search for a cut or a start is bounded by its window (the piece's budget
# or the overlap window) plus the whitespace or punctuation run that crosses the window's edge, never by the rest
# of the paragraph: that makes cutting linear in paragraph length.  The regexes match only whitespace and marks
# (sentence ends, closers, clause marks) and look at most one character past a run of them, so a search that stops
# one character after the window finds every match that ends (or starts) inside it, as a search to the paragraph's
# end would, and a search may begin at any character that no match can contain.


def _sentence_resume(text: str, x: int, hi: int) -> tuple[int, int | None] | None:
    """Where a sentence-start search that must look back to the closer at ``x`` resumes, and the end of the sentence
    match running through ``x`` if there is one: ``(resume, end)``, or ``None`` when no sentence match can end
    before ``hi``.  A match is a run of sentence ends then closers (``。」``, ``."``); a closer belongs to a match
    only when the run of closers it is in follows an end, and a Latin end only when whitespace follows the closers.
    """
    c = x + 1
    while c < hi and text[c] in _CLOSERS:
        c += 1
    if c >= hi:  # the closers reach the window's end: whatever match they belong to ends at or after it
        return None
    y = x
    while y > 0 and text[y - 1] in _CLOSERS:
        y -= 1
    if y > 0 and (text[y - 1] in _CJK_ENDS or (text[y - 1] in _LATIN_ENDS and text[c].isspace())):
        return c, c
    return c, None


def _start_candidates(g: Graphemes, kind: int, lo: int, hi: int) -> Iterator[int]:
    """Chunk starts ``k`` in ``[lo, hi)`` (``lo >= 1``) that begin on a boundary of exactly ``kind``, in order."""
    text = g.text
    if kind in (LINE, SENTENCE, CLAUSE, SPACE):
        # a start in the window may follow whitespace (and, before it, the mark that ends a sentence or clause):
        # search from the last non-whitespace character before the window.  No LINE or SPACE match contains it, a
        # CLAUSE match is one character, and a SENTENCE match through a sentence end ends where it would if the
        # search began at the start of the run of ends; only a closer needs a look further back (_sentence_resume)
        scan = lo - 1
        while scan > 0 and text[scan].isspace():
            scan -= 1
        first: list[int] = []  # the end of a sentence match that runs through the closer at scan
        if kind == SENTENCE and scan > 0 and text[scan] in _CLOSERS:
            resumed = _sentence_resume(text, scan, hi)
            if resumed is None:
                return
            scan, end = resumed
            first = [] if end is None else [end]
        pattern = {LINE: _LINE_RE, SENTENCE: _SENTENCE_RE, CLAUSE: _CLAUSE_RE, SPACE: _SPACE_RE}[kind]
        at_start = kind in (LINE, SPACE)
        found = (m.start() if at_start else m.end() for m in pattern.finditer(text, scan, hi))
        for j in itertools.chain(first, found):
            k = lstrip_span(g, j, hi)
            if k >= hi:
                break
            if k >= lo and not text[k].isspace() and g.at(k) and _gap_kind(text, j, k) == kind:
                yield k
    else:
        for k in range(lo, hi):
            if not text[k - 1].isspace() and not text[k].isspace() and _gap_kind(text, k, k) == kind:
                yield k


def _best_start(g: Graphemes, lo: int, hi: int, worst: int) -> int | None:
    """Earliest chunk start of the strongest kind (no weaker than ``worst``) in ``[lo, hi)``, or ``None``."""
    lo = max(lo, 1)
    for kind in range(min(worst, GRAPHEME) + 1):
        for k in _start_candidates(g, kind, lo, hi):
            if g.at(k):
                return k
    return None


def _space_runs(text: str, lo: int, hi: int, pe: int) -> Iterator[Span]:
    """``(start, end)`` of the whitespace runs of ``text[:pe]`` that start in ``[lo, hi]`` (``lo >= 1``), in order;
    ``end`` is where the run ends, at most ``pe``, even when that is past ``hi``."""
    stop = min(hi + 1, pe)
    for m in _SPACE_RE.finditer(text, lo - 1, stop):  # from lo - 1: a run through lo - 1 does not start at lo
        s, e = m.span()
        if s < lo:
            continue
        if e == stop < pe:  # the run goes on past the window
            more = _NON_SPACE_RE.search(text, e, pe)
            e = pe if more is None else more.start()
        yield s, e


def _cut_candidates(g: Graphemes, kind: int, a: int, lo: int, hi: int, pe: int) -> Iterator[int]:
    """Piece ends ``j`` in ``[lo, hi]`` (cutting ``[a, pe)``, ``a < lo``) that lie on a boundary of exactly
    ``kind``."""
    text = g.text
    if kind in (LINE, SPACE):
        stop = min(hi + 1, pe)
        if kind == LINE and not _LINE_BREAK_RE.search(text, lo, stop) and not (stop < pe and text[stop - 1].isspace()):
            return  # no line break in the window, and no whitespace run crossing its end that could hold one
        for j, e in _space_runs(text, lo, hi, pe):
            if kind == LINE:
                if _LINE_BREAK_RE.search(text, j, e):
                    yield j
            elif _gap_kind(text, j, e) == SPACE:
                yield j
    elif kind in (SENTENCE, CLAUSE):
        pattern = _SENTENCE_RE if kind == SENTENCE else _CLAUSE_RE
        for m in pattern.finditer(text, a, min(hi + 1, pe)):
            j = m.end()
            if j > hi:
                break
            if j >= lo and _gap_kind(text, j, lstrip_span(g, j, pe)) == kind:
                yield j
    else:
        yield from (j for j in range(lo, hi + 1) if _char_cut(text, kind, j))


def _char_cut(text: str, kind: int, j: int) -> bool:
    """Whether ``j`` is a cut of the character-level ``kind`` (GRAPHEME, IN_WORD or CODE_POINT), clusters aside."""
    return kind == CODE_POINT or (not text[j - 1].isspace() and not text[j].isspace() and (
        kind == IN_WORD or not _inside_word(text, j)
    ))


def _nearest_first(lo: int, hi: int, target: int) -> Iterator[int]:
    """``lo … hi`` ordered by distance to ``target``, the smaller position first among equals."""
    if target <= lo:
        yield from range(lo, hi + 1)
    elif target >= hi:
        yield from range(hi, lo - 1, -1)
    else:
        yield target
        for d in range(1, max(target - lo, hi - target) + 1):
            if target - d >= lo:
                yield target - d
            if target + d <= hi:
                yield target + d


def _pick_cut(g: Graphemes, a: int, lo: int, hi: int, pe: int, target: int, kinds: Iterable[int]) -> Span | None:
    """The ``(end, kind)`` of the strongest boundary in ``[lo, hi]`` (nearest ``target`` among equals, the earlier
    one on a tie), or ``None``."""
    if lo > hi:
        return None
    for kind in kinds:
        if kind >= GRAPHEME:  # a boundary at nearly every character: look outwards from the target
            text = g.text
            if kind == GRAPHEME and 0 < lo and hi < len(text) and _NOT_WORDISH_RE.search(text, lo - 1, hi + 1) is None:
                continue  # only letters and digits of a spaced script (and their joiners): every cut is in a word
            for j in _nearest_first(lo, hi, target):
                if _char_cut(text, kind, j) and (kind == CODE_POINT or g.at(j)):
                    return j, kind
            continue
        best: int | None = None
        for j in _cut_candidates(g, kind, a, lo, hi, pe):
            if g.at(j) and (best is None or abs(j - target) < abs(best - target)):
                best = j
        if best is not None:
            return best, kind
    return None


class ParagraphTextSplitter(TextSplitter):
    """Split text into paragraph-packed chunks with exact character offsets and natural boundaries.

    Args:
        chunk_size: maximum chunk length in characters (code points; default :data:`DEFAULT_CHUNK_CHARS` = 480).
        chunk_overlap: characters shared by consecutive chunks, at most (default
            :data:`DEFAULT_OVERLAP_CHARS` = 80); the overlap always starts on a boundary (see the module docstring).
        **kwargs: passed to ``TextSplitter`` (``length_function`` is ignored: budgets are characters).

    Raises:
        TypeError: a budget is not an integer (:func:`~langchain_ragspine.arguments.check_int`: ``bool``,
            ``float``, ``str`` refused; numpy integers accepted).
        ValueError: ``chunk_size < 1``, ``chunk_overlap < 0`` or ``chunk_overlap >= chunk_size``; the message
            names the argument (``chunk_size must be an int >= 1, got 0``).

    :meth:`split_documents` / :meth:`create_documents` return one ``Document`` per chunk whose ``page_content`` is
    ``text[s:e]`` for a span ``(s, e)`` of :meth:`split_spans`, and whose metadata is the source metadata plus
    ``doc_id`` (kept, else the ``source``, else a hash of the text), ``chunk_id`` = ``f"{doc_id}#{i}"``,
    ``start_index`` = ``body_offset + s``, ``end_index`` = ``body_offset + e`` and ``source_locator`` =
    ``f"{source}#{start_index}-{end_index}"`` (``source`` defaults to ``doc_id``).  ``body_offset`` is the
    source metadata's ``body_offset`` (set by ``CorpusLoader``: where the text starts in its file), else 0 — so
    offsets index the file a reader opens, see :mod:`langchain_ragspine.document_loaders.locators`.
    ``Document.id`` is the ``chunk_id``.  Output is deterministic: the same text and metadata give the same chunks
    and ids.

    Example:
        >>> from langchain_core.documents import Document
        >>> from langchain_ragspine import ParagraphTextSplitter
        >>> text = "# 梅雨\\n\\n梅雨は六月に始まり、七月に終わる。\\n\\n台風は夏から秋にかけて来る。"
        >>> splitter = ParagraphTextSplitter(chunk_size=24, chunk_overlap=8)
        >>> chunks = splitter.split_documents([Document(page_content=text, metadata={"source": "tsuyu.md"})])
        >>> [(c.metadata["chunk_id"], c.metadata["source_locator"]) for c in chunks]
        [('tsuyu.md#0', 'tsuyu.md#0-23'), ('tsuyu.md#1', 'tsuyu.md#16-39')]
        >>> all(text[c.metadata["start_index"] : c.metadata["end_index"]] == c.page_content for c in chunks)
        True
    """

    def __init__(
        self, chunk_size: int = DEFAULT_CHUNK_CHARS, chunk_overlap: int = DEFAULT_OVERLAP_CHARS, **kwargs: Any
    ) -> None:
        chunk_size = check_int(chunk_size, "chunk_size")
        chunk_overlap = check_int(chunk_overlap, "chunk_overlap", minimum=0)
        if chunk_overlap >= chunk_size:
            raise ValueError(f"chunk_overlap ({chunk_overlap}) must be smaller than chunk_size ({chunk_size})")
        kwargs.pop("add_start_index", None)
        super().__init__(chunk_size=chunk_size, chunk_overlap=chunk_overlap, add_start_index=True, **kwargs)

    # -- spans -------------------------------------------------------------------------------------------------
    def split_spans(self, text: str) -> list[Span]:
        """Return the ``(start, end)`` char offsets of the chunks of ``text``, in order (offsets into ``text``)."""
        return self._pack(Graphemes(text), 0, len(text))

    def _pack(self, g: Graphemes, start: int, end: int) -> list[Span]:
        """Chunk spans of ``g.text[start:end]`` (``start`` a line start): paragraphs packed into ``chunk_size``,
        long ones cut at the best boundary, consecutive chunks overlapping (the module docstring).  The structural
        splitters (layout, parent-child, semantic) call this on a section so that the boundary order inside a
        section is the paragraph splitter's."""
        size = self._chunk_size
        chunks: list[Span] = []
        cur: Span | None = None
        for ps, pe in paragraph_segments(g, start, end):
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

    def _overlap_start(self, g: Graphemes, prev: Span, ps: int, pe: int) -> int:
        """Where a chunk holding the paragraph ``[ps, pe)`` starts so that it overlaps the previous chunk ``prev``."""
        prev_start, prev_end = prev
        if self._chunk_overlap == 0:
            return ps
        # the chunk [start, pe) must fit the budget, overlap at most chunk_overlap chars, and not start on the
        # previous chunk's first character (so it is never contained in it)
        lo = max(prev_end - self._chunk_overlap, pe - self._chunk_size, prev_start + 1)
        start = _best_start(g, lo, prev_end, GRAPHEME)
        return ps if start is None else start

    def _split_long(self, g: Graphemes, ps: int, pe: int) -> list[Span]:
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
                    a = lstrip_span(g, done, pe)
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
            a = lstrip_span(g, cut, pe) if nxt is None else nxt
            done = cut
        out.append((a, pe))
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
            source = SourceText.of(text, metadatas[i] if metadatas is not None else None)
            docs.extend(self._documents_of(source))
        return docs

    def _chunk_spans(self, text: str) -> list[tuple[int, int, dict[str, Any]]]:
        """``(start, end, extra metadata)`` of each chunk of ``text``; subclasses add structure (headings, windows)."""
        return [(s, e, {}) for s, e in self.split_spans(text)]

    def _documents_of(self, source: SourceText) -> list[Document]:
        """The chunk ``Document``s of one source text."""
        return [source.chunk(n, s, e, extra) for n, (s, e, extra) in enumerate(self._chunk_spans(source.text))]

    def split_documents(self, documents: Iterable[Document]) -> list[Document]:
        """Split ``Document``s; a document's ``id`` serves as ``doc_id`` when its metadata has none."""
        docs = list(documents)
        return self.create_documents([d.page_content for d in docs], [document_metadata(d) for d in docs])


def document_metadata(document: Document) -> dict[Any, Any]:
    """A copy of ``document.metadata`` with ``doc_id`` defaulting to ``document.id``."""
    md = dict(document.metadata)
    if not md.get("doc_id") and document.id:
        md["doc_id"] = document.id
    return md


_SCALARS = (str, int, float, bool, type(None))


def _copy_metadata(metadata: dict[Any, Any]) -> dict[Any, Any]:
    """A copy of ``metadata`` that shares no mutable value with it: a plain ``dict`` copy when every value is an
    immutable scalar (the usual loader metadata; ~10x cheaper), else :func:`copy.deepcopy`."""
    if all(type(v) in _SCALARS for v in metadata.values()):
        return dict(metadata)
    return copy.deepcopy(metadata)


def _text_id(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class SourceText:
    """One text to split with its lineage: the metadata every chunk starts from, ``doc_id``, ``source`` and the
    ``body_offset`` that makes chunk offsets index the file (shared by every splitter of the package).

    Build it with :meth:`of`; :meth:`chunk` makes the chunk ``Document`` of a span.
    """

    text: str
    base: dict[Any, Any]
    doc_id: str
    source: str
    offset: int

    @classmethod
    def of(cls, text: str, metadata: dict[Any, Any] | None) -> SourceText:
        """The lineage of ``text``: ``doc_id`` (the metadata's, else its ``source``, else a hash of the text),
        ``source`` (default ``doc_id``) and ``body_offset`` (default 0).

        Raises:
            ValueError: ``body_offset`` is not an int ``>= 0``.
        """
        base = copy.deepcopy(metadata) if metadata is not None else {}
        doc_id = str(base.get("doc_id") or base.get("source") or _text_id(text))
        source = str(base.get("source") or doc_id)
        base["doc_id"] = doc_id
        offset = base.get("body_offset", 0)
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"metadata 'body_offset' of {doc_id!r} must be an int >= 0, got {offset!r}")
        return cls(text, base, doc_id, source, offset)

    def locator(self, s: int, e: int) -> str:
        """The ``source_locator`` of the span ``text[s:e]`` (file offsets)."""
        return source_locator_for(self.source, self.offset + s, self.offset + e)

    def chunk(self, n: int, s: int, e: int, extra: dict[str, Any] | None = None, *, chunk_id: str | None = None
              ) -> Document:
        """The chunk ``Document`` of ``text[s:e]``: the base metadata, ``extra``, then the lineage keys
        (``chunk_id`` default ``f"{doc_id}#{n}"``, ``start_index``, ``end_index``, ``source_locator``)."""
        md = _copy_metadata(self.base)
        if extra:
            md.update(extra)
        cid = chunk_id if chunk_id is not None else chunk_id_for(self.doc_id, n)
        md.update(
            chunk_id=cid,
            start_index=self.offset + s,
            end_index=self.offset + e,
            source_locator=self.locator(s, e),
        )
        return Document(page_content=self.text[s:e], metadata=md, id=cid)
