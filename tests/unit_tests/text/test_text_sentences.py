"""``text.sentences``: one grammar of sentence ends, two rule sets (semicolons, ``]``), two shapes (tiling spans of a
``str``; trimmed, grapheme-aware segments).  The functions moved here in issue 26 H2a are checked against copies of
the code they replaced (``text.sentence_spans``, ``chains.answer._sentence_spans``, ``compression.sentence_units``),
so answers and compressed passages are unchanged; the splitters' segmentation is checked against the reference
cutter in ``test_chunking_linear.py``."""

from __future__ import annotations

import re
from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from langchain_ragspine.text.graphemes import Graphemes
from langchain_ragspine.text.sentences import (
    CHUNK_SENTENCE_RULES,
    SENTENCE_RULES,
    line_sentence_spans,
    line_sentences,
    paragraph_segments,
    sentence_segments,
    sentence_spans,
)

# -- the code these functions replaced, copied unchanged (9130972) ---------------------------------------------------
_OLD_CJK_ENDS = "。！？；"
_OLD_LATIN_ENDS = ".!?;"
_OLD_CLOSERS = "」』）)】〕〉》\"'”’]"
_OLD_END_RE = re.compile(
    rf"(?:[{_OLD_CJK_ENDS}]+|[{re.escape(_OLD_LATIN_ENDS)}]+(?=[{re.escape(_OLD_CLOSERS)}]*(?:\s|$)))"
    rf"[{re.escape(_OLD_CLOSERS)}]*"
)


def _old_sentence_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    end = len(text) if end is None else end
    if start >= end:
        return []
    spans: list[tuple[int, int]] = []
    pos = start
    for m in _OLD_END_RE.finditer(text, start, end):
        cut = m.end()
        while cut < end and text[cut].isspace():
            cut += 1
        if cut > pos:
            spans.append((pos, cut))
            pos = cut
    if pos < end:
        spans.append((pos, end))
    return spans


_FENCE_RE = re.compile(r"^\s*(```|~~~)")
_HEADING_RE = re.compile(r"^\s{0,3}#{1,6}\s")


def _old_answer_sentence_spans(text: str, *, skip_code: bool = True) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    pos = 0
    lines = text.splitlines(keepends=True)
    fences = [line.strip() for line in lines if _FENCE_RE.match(line)]
    in_fence = skip_code and len(fences) % 2 == 1 and fences[0] in ("```", "~~~")
    for line in lines:
        start, end = pos, pos + len(line)
        pos = end
        if skip_code and _FENCE_RE.match(line):
            in_fence = not in_fence
            continue
        if in_fence or not line.strip() or _HEADING_RE.match(line):
            continue
        for s, e in _old_sentence_spans(text, start, end):
            while s < e and text[s].isspace():
                s += 1
            while e > s and text[e - 1].isspace():
                e -= 1
            if s < e:
                out.append((s, e))
    return out


def _old_sentence_units(text: str) -> list[tuple[int, int]]:
    units: list[tuple[int, int]] = []
    pos = 0
    for line in text.splitlines(keepends=True):
        start, end = pos, pos + len(line)
        pos = end
        for s, e in _old_sentence_spans(text, start, end):
            while s < e and text[s].isspace():
                s += 1
            while e > s and text[e - 1].isspace():
                e -= 1
            if e > s:
                units.append((s, e))
    return units


_ATOMS = ["あ", "漢字", "word", "x", "3.14", "e.g.", "。", "！", "？", "；", ".", "!", "?", ";", "…", "」", "』", "）", ")",
          '"', "'", "’", "]", "[", "、", ",", " ", "  ", "\t", "\u3000", "\xa0", "\n", "\n\n", "\r\n", "\x85", "\u2028",
          "e\u0301", " \u0301", "👍🏽", "🇯🇵", "\n# 見出し\n", "\n## Sub\n", "\n```\n", "\n~~~\n", "```", "\n    # x\n"]
_texts = st.lists(st.one_of(st.sampled_from(_ATOMS), st.tuples(st.sampled_from(_ATOMS), st.integers(2, 6)).map(
    lambda t: t[0] * t[1])), max_size=60).map("".join)


@settings(max_examples=800, deadline=None)
@given(text=_texts, data=st.data())
def test_property_sentence_spans_are_the_old_ones(text: str, data: st.DataObject) -> None:
    """The tiling splitter on the shared grammar (no ``$`` in the Latin lookahead: a cut at the range's end is the
    range's end) gives the spans of the old ``text.sentence_spans``, on any range."""
    assert sentence_spans(text) == _old_sentence_spans(text)
    start, end = sorted(data.draw(st.integers(0, len(text))) for _ in range(2))
    assert sentence_spans(text, start, end) == _old_sentence_spans(text, start, end)


@settings(max_examples=800, deadline=None)
@given(text=_texts)
def test_property_line_sentences_are_the_answer_chains_and_the_compressors(text: str) -> None:
    assert line_sentence_spans(text, skip_headings=True, skip_code=True) == _old_answer_sentence_spans(text)
    assert line_sentence_spans(text, skip_headings=True) == _old_answer_sentence_spans(text, skip_code=False)
    assert line_sentence_spans(text) == _old_sentence_units(text)


def test_the_two_rule_sets_differ_in_semicolons_and_square_brackets() -> None:
    text = "第一条に従う；第二条は除く。[Note: see below.] Next"
    assert [text[s:e] for s, e in sentence_spans(text)] == [
        "第一条に従う；", "第二条は除く。", "[Note: see below.] ", "Next"]
    g = Graphemes(text)
    assert [text[s:e] for s, e in sentence_segments(g)] == ["第一条に従う；第二条は除く。", "[Note: see below.] Next"]
    # either shape takes either rule set
    assert [text[s:e] for s, e in sentence_segments(g, rules=SENTENCE_RULES)] == [
        "第一条に従う；", "第二条は除く。", "[Note: see below.]", "Next"]
    assert [text[s:e] for s, e in sentence_spans(text, rules=CHUNK_SENTENCE_RULES)] == [
        "第一条に従う；第二条は除く。", "[Note: see below.] Next"]


def test_segments_are_trimmed_cut_at_lines_and_never_inside_a_cluster() -> None:
    text = "  見出し\n本文です。「はい。」。次。\u0301続く。 🇯🇵 flag! \n\n  Last line.  "
    got = [text[s:e] for s, e in sentence_segments(Graphemes(text))]
    # 。」。 ends after its last mark; 。 carrying a combining mark is one cluster, not cut inside
    assert got == ["見出し", "本文です。", "「はい。」。", "次。\u0301続く。", "🇯🇵 flag!", "Last line."]
    assert [text[s:e] for s, e in paragraph_segments(Graphemes(text))] == [
        "見出し\n本文です。「はい。」。次。\u0301続く。 🇯🇵 flag!", "Last line."]


def test_spans_tile_segments_do_not() -> None:
    text = "One. Two!三つ。四つ"
    spans = sentence_spans(text)
    assert spans[0][0] == 0 and spans[-1][1] == len(text) and all(a[1] == b[0] for a, b in pairwise(spans))
    assert [text[s:e] for s, e in sentence_segments(Graphemes(text))] == ["One.", "Two!三つ。", "四つ"]


def test_line_sentences_drop_headings_and_code_when_asked() -> None:
    text = "# 梅雨\n梅雨は六月。七月まで。\n```\nx = 1. y = 2.\n```\nEnd."
    assert line_sentences(text, skip_headings=True, skip_code=True) == ["梅雨は六月。", "七月まで。", "End."]
    assert line_sentences(text) == ["# 梅雨", "梅雨は六月。", "七月まで。", "```", "x = 1.", "y = 2.", "```", "End."]
    # a passage that begins inside a code block (an odd number of fences, the first a bare one)
    assert line_sentences("x = 1.\n```\nAfter.", skip_code=True) == ["After."]


def test_a_full_stop_inside_a_cjk_bracket_that_closes_later_ends_no_sentence():
    # trial of issue 29: the extractive answer began mid-sentence ("…既定は 4）、…") because "。" inside "（…）" ended one
    from langchain_ragspine.text.sentences import line_sentences, sentence_spans

    text = "返す件数 k（既定 6。LangChain の既定は 4）、引数も受け付けます。次の文です。"
    assert line_sentences(text) == ["返す件数 k（既定 6。LangChain の既定は 4）、引数も受け付けます。", "次の文です。"]
    quoted = "「はい。そうです。」と答えた。"
    assert [quoted[s:e] for s, e in sentence_spans(quoted)] == ["「はい。そうです。」", "と答えた。"]
    nested = "（注：『甲。乙』を見よ。）次。"
    assert [nested[s:e] for s, e in sentence_spans(nested)] == ["（注：『甲。乙』を見よ。）", "次。"]
    # a bracket that never closes holds nothing open, nor does one that closes only on a later line
    assert [t[s:e] for t in ["括弧（閉じない。次の文。"] for s, e in sentence_spans(t)] == ["括弧（閉じない。", "次の文。"]
    assert line_sentences("前（一行目。\n二行目）の文。") == ["前（一行目。", "二行目）の文。"]
    # English parentheses are unchanged (Latin ends need whitespace after them; only CJK brackets are pairs here)
    assert line_sentences("It works (see the FAQ. It helps) well. Next.") == [
        "It works (see the FAQ.", "It helps) well.", "Next."]
