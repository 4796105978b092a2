"""Linear-time chunking (issue 25 §5): the cutter gives byte-identical chunks to the old quadratic one
(``_paragraph_reference``) for every splitter, and its work grows linearly with paragraph length (counted in
operations, never timed)."""

from __future__ import annotations

import os
import random
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.text import graphemes as graphemes_module
from langchain_ragspine.text import sentences as sentences_module
from langchain_ragspine.text.graphemes import Graphemes, lstrip_span, strip_span
from langchain_ragspine.text_splitters import (
    LayoutTextSplitter,
    ParagraphTextSplitter,
    ParentChildTextSplitter,
    SemanticTextSplitter,
    SentenceWindowTextSplitter,
)
from langchain_ragspine.text_splitters import paragraph as paragraph_module
from langchain_ragspine.text_splitters.paragraph import paragraph_spans
from tests.unit_tests._paragraph_reference import reference_cutter

DATA = Path(os.environ.get("RAGSPINE_DATA", Path(__file__).resolve().parents[3].parent / "shared" / "data"))

# every kind of boundary and every multi-code-point cluster the cutter knows, plus heading lines for the layout
# presets: line breaks of every kind, CRLF, paragraph breaks, CJK and Latin sentence ends, closers, clause marks,
# whitespace of several kinds, combining marks (also on a space), emoji modifier / ZWJ / flag sequences, an Indic
# conjunct, Hangul jamo, a prepended concatenation mark, astral CJK and emoji, word joiners
_ATOMS = [
    "あ", "い", "漢", "字", "中", "文", "カ", "𠮷", "a", "b", "Z", "7", "xyz", "word", "3.14", "e.g.", "well-known",
    "don't", "http://a.b/c", " ", "  ", "\t", "\u3000", "\xa0", "\n", "\n\n", "\r\n", "\r", "\v", "\f", "\x85",
    "\u2028", "\u2029", "\x1c", " \n ", "\n \n",
    "。", "！", "？", "．", ".", "!", "?", "…", "」", "』", "）", ")", "】", "》", '"', "'", "”", "’",
    "、", "，", "；", "：", ",", ";", ":", "-", "/",
    "e\u0301", "a\u0308\u0323", "\u0301", " \u0301", "\u200d", "👍🏽", "👨\u200d👩\u200d👧", "🇯🇵", "🇺", "😀",
    "\u0915\u094d\u0937", "\u1100\u1161\u11a8", "가", "\u0600", "\u0600 ",
]
_LINES = ["\n# 見出し\n", "\n## Sub\n", "\n1. Scope\n", "\n一、总则\n", "\n第一章 总则\n", "\n第三条　", "\n（一）",
          "\n２　", "\nQ: ", "\n问：", "\n質問：", "\n（目的）\n", "\n```\n", "\nChapter 2\n", "\n第二篇\n", "?\n"]


def _runs(atoms: list[str]) -> st.SearchStrategy[str]:
    """Texts of atoms, some repeated into long runs (of spaces, of sentence ends, of closers, of marks...)."""
    piece = st.one_of(st.sampled_from(atoms), st.tuples(st.sampled_from(atoms), st.integers(2, 40)).map(
        lambda t: t[0] * t[1]))
    return st.lists(piece, max_size=80).map("".join)


_texts = st.one_of(_runs(_ATOMS), _runs(_ATOMS + _LINES * 3))


def _budgets(size: int, overlap_frac: float) -> tuple[int, int]:
    return size, min(int(size * overlap_frac), size - 1)


def _all_outputs(text: str, size: int, overlap: int) -> dict[str, Any]:
    """What every splitter makes of ``text`` (spans and the metadata that depends on them)."""
    out: dict[str, Any] = {
        "paragraph_spans": paragraph_spans(text),
        # through the module, so that reference_cutter's replacements apply
        "sentence_spans": sentences_module.sentence_segments(paragraph_module.Graphemes(text)),
        "paragraph": ParagraphTextSplitter(size, overlap).split_spans(text),
    }
    for preset in ("layout", "laws", "qa", "book"):
        out[preset] = LayoutTextSplitter(size, overlap, preset=preset)._chunk_spans(text)
    out["parent_child"] = ParentChildTextSplitter(size, overlap).parent_child_spans(text)
    out["sentence_window"] = SentenceWindowTextSplitter(chunk_size=size, chunk_overlap=overlap).split_spans(text)
    out["semantic"] = SemanticTextSplitter(HashingEmbeddings(16), size, overlap,
                                           breakpoint_threshold_amount=50).split_spans(text)
    return out


def _assert_identical(text: str, size: int, overlap: int) -> None:
    new = _all_outputs(text, size, overlap)
    with reference_cutter():
        old = _all_outputs(text, size, overlap)
    for name in new:
        assert new[name] == old[name], (name, text, size, overlap)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_texts, size=st.integers(1, 120), overlap_frac=st.floats(0, 0.95))
def test_property_every_splitter_cuts_exactly_as_the_reference(text: str, size: int, overlap_frac: float) -> None:
    _assert_identical(text, *_budgets(size, overlap_frac))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_runs(_ATOMS), size=st.integers(121, 600), overlap_frac=st.floats(0, 0.5))
def test_property_larger_budgets_cut_exactly_as_the_reference(text: str, size: int, overlap_frac: float) -> None:
    _assert_identical(text * 3, *_budgets(size, overlap_frac))


@pytest.mark.parametrize(
    ("text", "size", "overlap"),
    [
        ("あ" * 50 + "。」」」" + "い" * 20, 30, 20),  # a sentence end whose closers run into the overlap window
        ("あ" * 40 + "」" * 30 + " b", 20, 15),  # closers with no sentence end before them
        ("x" * 30 + "." + "'" * 12 + " y" * 20, 24, 20),  # a Latin end, closers, then the space the end needs
        ("x" * 30 + "." + "'" * 12 + "y" * 20, 24, 20),  # ... and without that space
        ("あ" + "。" * 300 + "い", 40, 30),  # a run of sentence ends longer than the budget
        ("a" + " " * 300 + "b" + " \u0301" * 5, 40, 30),  # a long whitespace run without a line break
        ("a" + " " * 150 + "\n" + " " * 150 + "b", 40, 30),  # a long whitespace run with one
        ("e" + "\u0301" * 200 + " x" * 40, 30, 10),  # a cluster longer than the budget
        ("…" * 100 + "、" * 100 + "！" * 3 + "」", 25, 12),
        # the overlap window opens inside the closers (or the spaces) after a sentence end: the next piece starts
        # on the sentence after them, which only a search that looks back past the window's edge can see
        ("あ" * 10 + "。" + "」" * 5 + "い" * 10 + "。" + "う" * 40, 30, 14),
        ("あ" * 10 + "。" + " " * 6 + "い" * 10 + "。" + "う" * 40, 30, 14),
        ("a" * 10 + "." + "'" * 5 + " " + "b" * 10 + ". " + "c" * 40, 30, 14),
        # runs of letters with no break at all (the grapheme kind is skipped when a window holds no non-word
        # character), and such runs with one character that is not a word's somewhere
        ("abcdefghij" * 300, 480, 80), ("abcdefghij" * 300, 40, 20), ("слово" * 200, 30, 10),
        ("a-b_c.d'e" * 100, 30, 10), ("ab" * 300 + "漢" + "cd" * 300, 40, 20), ("x" * 500 + " " + "y" * 500, 40, 20),
        ("x" * 500 + "," + "y" * 500, 40, 20), ("x" * 39 + "漢" + "y" * 100, 40, 20), ("漢" + "x" * 200, 40, 20),
    ],
)
def test_runs_longer_than_the_window_cut_exactly_as_the_reference(text: str, size: int, overlap: int) -> None:
    _assert_identical(text, size, overlap)


# -- the cutter's primitives against the reference's, at arbitrary positions ---------------------------------------
_sentences = st.lists(
    st.tuples(st.sampled_from(["あい", "漢字", "word", "x", "", "3.14"]), st.sampled_from(["。", "！", ".", "?", "", "、", ","]),
              st.sampled_from(["", "」", "」」", "）」", '"', "'" * 5, "」" * 9]),
              st.sampled_from(["", " ", "  ", "\n", " \n ", "\u3000", " " * 7, "\r\n"])).map("".join),
    max_size=30,
).map("".join)
_primitive_texts = st.one_of(_runs(_ATOMS), _sentences)


@settings(max_examples=500, deadline=None)
@given(text=_primitive_texts)
def test_property_grapheme_navigation_matches_the_reference(text: str) -> None:
    from tests.unit_tests import _paragraph_reference as ref

    g, r = Graphemes(text), ref._Graphemes(text)
    for i in range(len(text) + 1):
        assert (g.at(i), g.next(i), g.prev(i)) == (r.at(i), r.next(i), r.prev(i)), (text, i)


@settings(max_examples=500, deadline=None)
@given(text=_primitive_texts, data=st.data())
def test_property_cut_and_start_candidates_match_the_reference(text: str, data: st.DataObject) -> None:
    """Every boundary kind's candidates in random windows (``a < lo <= hi < pe`` for cuts, ``1 <= lo <= hi`` for
    starts), and whitespace stripping of random spans, as the reference finds them."""
    from tests.unit_tests import _paragraph_reference as ref

    n = len(text)
    g, r = Graphemes(text), ref._Graphemes(text)
    for _ in range(8):
        lo, hi = sorted(data.draw(st.integers(1, max(1, n)), label="window") for _ in range(2))
        for kind in range(ref.GRAPHEME + 1):
            new = list(paragraph_module._start_candidates(g, kind, lo, hi))
            assert new == list(ref._start_candidates(r, kind, lo, hi)), (text, kind, lo, hi)
        assert paragraph_module._best_start(g, lo, hi, ref.GRAPHEME) == ref._best_start(r, lo, hi, ref.GRAPHEME)
        s, e = sorted(data.draw(st.integers(0, n), label="span") for _ in range(2))
        assert lstrip_span(g, s, e) == ref._lstrip(r, s, e), (text, s, e)
        assert strip_span(g, s, e) == ref._strip(r, s, e), (text, s, e)
        if n >= 3:
            a, lo, hi, pe = sorted(data.draw(st.integers(0, n), label="cut") for _ in range(4))
            if a < lo <= hi < pe:
                for kind in range(ref.CODE_POINT + 1):
                    new = list(paragraph_module._cut_candidates(g, kind, a, lo, hi, pe))
                    assert new == list(ref._cut_candidates(r, kind, a, lo, hi, pe)), (text, kind, a, lo, hi, pe)


def _articles(set_name: str) -> list[str]:
    return [p.read_text("utf-8") for p in sorted((DATA / set_name / "docs").glob("*.md"))]


@pytest.mark.shared_data
@pytest.mark.skipif(not (DATA / "jsquad-valid").is_dir(), reason=f"shared evaluation data not found at {DATA}")
@pytest.mark.parametrize("set_name", ["jsquad-valid", "cmrc2018-dev"])
def test_shared_articles_cut_exactly_as_the_reference(set_name: str) -> None:
    """Every article of the set with the ingest budgets (480/80), and a part of it at other budgets; then a long
    stretch of the set joined into one paragraph, the case the linear cutter is for."""
    articles = _articles(set_name)
    for i, text in enumerate(articles):
        budgets = [(480, 80)] + ([(120, 20), (480, 0), (1000, 200)] if i % 10 == 0 else [])
        for size, overlap in budgets:
            _assert_identical(text, size, overlap)
    one = "".join(re.sub(r"\s*\n\s*", "", a.split("\n", 1)[1]) for a in articles[:30])[:30_000]
    for size, overlap in [(480, 80), (200, 60)]:
        _assert_identical(one, size, overlap)


# -- complexity, in operations ------------------------------------------------------------------------------------
class _Counting:
    """A compiled pattern that adds to ``counter`` the characters each search gets through: up to the end of the
    last match taken from ``finditer`` (to ``endpos`` when it runs out), of the match ``search`` / ``match``
    return (to ``endpos`` when there is none)."""

    def __init__(self, pattern: Any, counter: list[int]) -> None:
        self._pattern, self._counter = pattern, counter

    def _bounds(self, text: str, pos: int, endpos: int | None) -> tuple[int, int]:
        return pos, len(text) if endpos is None else min(endpos, len(text))

    def finditer(self, text: str, pos: int = 0, endpos: int | None = None) -> Any:
        pos, end = self._bounds(text, pos, endpos)
        reached = pos
        try:
            for m in self._pattern.finditer(text, pos, end):
                reached = m.end()
                yield m
            reached = end
        finally:
            self._counter[0] += max(0, reached - pos)

    def search(self, text: str, pos: int = 0, endpos: int | None = None) -> Any:
        pos, end = self._bounds(text, pos, endpos)
        m = self._pattern.search(text, pos, end)
        self._counter[0] += max(0, (end if m is None else m.end()) - pos)
        return m

    def match(self, text: str, pos: int = 0, endpos: int | None = None) -> Any:
        pos, end = self._bounds(text, pos, endpos)
        m = self._pattern.match(text, pos, end)
        self._counter[0] += 1 if m is None else m.end() - pos
        return m


#: The modules whose cutting work is measured: the cutter, and the text package's segmentation it runs on.
_MEASURED = (paragraph_module, sentences_module, graphemes_module)


def _work(split: Callable[[str], object], text: str, monkeypatch: pytest.MonkeyPatch) -> int:
    """Python lines executed in the measured modules (the paragraph cutter, ``text.sentences``, ``text.graphemes``)
    plus characters their regex searches may scan, for one split."""
    scanned = [0]
    for module in _MEASURED:
        for name in dir(module):
            obj = getattr(module, name)
            if isinstance(obj, re.Pattern) or type(obj).__name__ == "Pattern":
                monkeypatch.setattr(module, name, _Counting(obj, scanned))
    for rules in (sentences_module.CHUNK_SENTENCE_RULES, sentences_module.SENTENCE_RULES):
        monkeypatch.setattr(rules, "end_re", _Counting(rules.end_re, scanned))
    lines = [0]
    code_files = {module.__file__ for module in _MEASURED}

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename not in code_files:
            return None
        if event == "line":
            lines[0] += 1
        return tracer

    old = sys.gettrace()
    sys.settrace(tracer)
    try:
        split(text)
    finally:
        sys.settrace(old)
    monkeypatch.undo()
    return lines[0] + scanned[0]


def _latin(n: int) -> str:
    rng = random.Random(0)
    words: list[str] = []
    while sum(map(len, words)) + len(words) < n:
        words.append("".join(rng.choice("abcdefghij") for _ in range(rng.randint(1, 9))))
    return " ".join(words)[:n]


# single paragraphs of n characters: the worst cases of the old cutter (no boundary it searched for), and the
# long runs a window search must not rescan
_INPUTS: dict[str, Callable[[int], str]] = {
    "latin words, no sentence end": _latin,
    "CJK run, no boundary": lambda n: ("漢字仮名交じり文" * n)[:n],
    "Japanese sentences": lambda n: ("梅雨は六月に始まり、七月に終わる。" * n)[:n],
    "a run of sentence ends": lambda n: "あ" + "。" * (n - 2) + "い",
    "a run of closers after an end": lambda n: "あ。" + "」" * (n - 3) + "い",
    "a run of clause marks": lambda n: "、" * n,
    "a whitespace run": lambda n: "a" + " " * (n - 2) + "b",
    "combining marks": lambda n: ("e\u0301" * n)[:n],
    "a run of letters, no space": lambda n: "".join(random.Random(n).choice("abcdefghij") for _ in range(n)),
}


def test_the_non_word_pattern_is_exactly_not_wordish() -> None:
    """The window pre-check of ``_pick_cut`` (``_NOT_WORDISH_RE``) matches exactly the characters that are not
    ``_wordish``, over every code point."""
    wrong = [c for c in range(0x110000) if not 0xD800 <= c < 0xE000
             and (paragraph_module._NOT_WORDISH_RE.match(chr(c)) is None) != paragraph_module._wordish(chr(c))]
    assert wrong == []


@pytest.mark.parametrize("kind", list(_INPUTS))
@pytest.mark.parametrize("splitter", ["paragraph", "sentence_window", "parent_child"])
def test_cutting_work_grows_linearly_with_paragraph_length(kind: str, splitter: str,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Doubling a single paragraph's length at most doubles the work (plus a little slack for the ends): the old
    cutter scanned the rest of the paragraph for every piece, 4x the work for 2x the text."""
    make = {
        "paragraph": ParagraphTextSplitter(),
        "sentence_window": SentenceWindowTextSplitter(),
        "parent_child": ParentChildTextSplitter(),
    }[splitter].split_spans
    small, large = (_work(make, _INPUTS[kind](n), monkeypatch) for n in (6_000, 12_000))
    assert large <= 2.2 * small + 2_000, (kind, small, large)


def test_the_work_measure_sees_the_reference_cutter_grow_quadratically(monkeypatch: pytest.MonkeyPatch) -> None:
    """The measure above would catch the old behaviour: on a paragraph of Latin words the reference's regex scans
    grow about fourfold when the paragraph doubles."""
    from tests.unit_tests import _paragraph_reference as ref

    scanned = [0]
    for name in ("_LINE_RE", "_SENTENCE_RE", "_CLAUSE_RE", "_SPACE_RE"):
        monkeypatch.setattr(ref, name, _Counting(getattr(ref, name), scanned))
    counts = []
    for n in (6_000, 12_000):
        scanned[0] = 0
        with reference_cutter():
            ParagraphTextSplitter().split_spans(_latin(n))
        counts.append(scanned[0])
    assert counts[1] > 3.5 * counts[0], counts


class _Recording:
    """A compiled pattern that records the ``(pos, endpos)`` range of every search."""

    def __init__(self, pattern: Any, ranges: list[int]) -> None:
        self._pattern, self._ranges = pattern, ranges

    def finditer(self, text: str, pos: int = 0, endpos: int | None = None) -> Any:
        end = len(text) if endpos is None else min(endpos, len(text))
        self._ranges.append(end - pos)
        return self._pattern.finditer(text, pos, end)


@pytest.mark.parametrize("kind", ["latin words, no sentence end", "a whitespace run", "a run of sentence ends",
                                  "CJK run, no boundary"])
@pytest.mark.parametrize(("size", "overlap"), [(480, 80), (100, 60)])
def test_boundary_searches_never_span_more_than_a_piece(kind: str, size: int, overlap: int,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: the cutter ran its boundary regexes from the piece start to the paragraph's end.  Besides the
    rescanning, ``\\s*[line break]\\s*`` backtracks over a whitespace run without a line break at every position of
    it, so a paragraph holding 20,000 spaces took 35 s.  Now every search is confined to one piece's budget."""
    ranges: list[int] = []
    for name in ("_LINE_RE", "_SENTENCE_RE", "_CLAUSE_RE", "_SPACE_RE"):
        monkeypatch.setattr(paragraph_module, name, _Recording(getattr(paragraph_module, name), ranges))
    text = _INPUTS[kind](20_000)
    spans = ParagraphTextSplitter(size, overlap).split_spans(text)
    assert spans and ranges and max(ranges) <= size + 2, (len(spans), max(ranges))
