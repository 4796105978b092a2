"""MeCab is fed at most ``MECAB_MAX_CHARS`` characters per call: a huge one-line text used to crash the process.

Regression (trial 16b): ``BM25Retriever.from_texts(["東京の天気は晴れ。" * 100000])`` (900,000 characters on one
line), the same text as a query, and ``HybridRetriever`` died with SIGSEGV (exit 139) inside MeCab.  The crash
inputs run in a subprocess, so a segfault fails the test instead of killing pytest.
"""

from __future__ import annotations

import os
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import langchain_ragspine
from langchain_ragspine.tokenizers import (
    MECAB_MAX_CHARS,
    _mecab_surfaces,
    auto_tokenize,
    fugashi_tokenize,
    mecab_pieces,
    mecab_surfaces,
)

_ROOT = str(Path(langchain_ragspine.__file__).resolve().parent.parent)


def _run_child(code: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([_ROOT, os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)


_CRASH_CODE = """
from langchain_ragspine.retrievers.bm25 import BM25Retriever
from langchain_ragspine.tokenizers import auto_tokenize, fugashi_tokenize
text = "東京の天気は晴れ。" * 111112  # 1,000,008 characters, no line break
assert len(text) > 1_000_000 and "\\n" not in text
from langchain_ragspine.backends.directory.bm25_parallel import count_batch  # what a bm25_parallel worker runs
assert int(count_batch("auto", [text]).doc_len[0]) == len(auto_tokenize(text))
assert len(fugashi_tokenize(text)) == 5 * 111112  # 東京 の 天気 は 晴れ (。 is dropped)
index = BM25Retriever.from_texts([text, "apple"])
print(len(index.invoke("天気")))
query = BM25Retriever.from_texts(["東京の天気は晴れ。", "apple"])
from langchain_ragspine.retrievers.bm25 import MAX_QUERY_CHARS
try:  # a query that long is refused by the query cap (a clear ValueError), never handed to MeCab
    query.invoke(text)
    raise SystemExit("a 1,000,008-character query was not refused")
except ValueError as e:
    assert f"{MAX_QUERY_CHARS:,}" in str(e), e
print(query.invoke(text[:MAX_QUERY_CHARS])[0].page_content)  # the longest query allowed, still one MeCab call or more
from langchain_ragspine.graphs.query_analysis import rewrite_query_deterministic
print(rewrite_query_deterministic(text))  # the graphs' query rewrite parses with MeCab nodes
"""


@pytest.mark.subprocess
def test_a_one_million_character_line_does_not_crash_mecab() -> None:
    done = _run_child(_CRASH_CODE)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    lines = done.stdout.split("\n")
    assert lines[:2] == ["1", "東京の天気は晴れ。"]  # only the matching chunk
    assert set(lines[2].split()) >= {"東京", "天気", "晴れ"}


# The tokens of the code before the bound existed (recorded at b72dced; Latin words stemmed since issue 27): short
# texts must not change.
_BEFORE = {
    "東京の天気は晴れ。明日は雨が降るでしょう。": (
        ["东", "京", "の", "天", "気", "は", "晴", "れ", "东京", "京の", "の天", "天気", "気は", "は晴", "晴れ", "明",
         "日", "は", "雨", "が", "降", "る", "で", "し", "ょ", "う", "明日", "日は", "は雨", "雨が", "が降", "降る",
         "るで", "でし", "しょ", "ょう", "东京", "の", "天気", "は", "晴れ", "明日", "は", "雨", "が", "降る",
         "でしょう"],
        ["东京", "の", "天気", "は", "晴れ", "明日", "は", "雨", "が", "降る", "でしょう"],
    ),
    "北海道の小笠原諸島 Apple 2024年": (
        ["北", "海", "道", "の", "小", "笠", "原", "诸", "岛", "北海", "海道", "道の", "の小", "小笠", "笠原", "原诸",
         "诸岛", "appl", "2024", "年", "北海道", "の", "小笠原", "诸岛", "年"],  # "appl": auto stems English (issue 27)
        ["北海道", "の", "小笠原", "诸岛", "apple", "2024", "年"],
    ),
}


@pytest.mark.parametrize("text", sorted(_BEFORE))
def test_short_texts_give_the_tokens_they_gave_before(text: str) -> None:
    assert (auto_tokenize(text), fugashi_tokenize(text)) == (list(_BEFORE[text][0]), list(_BEFORE[text][1]))


def test_a_text_at_the_bound_is_one_mecab_call() -> None:
    text = ("東京の天気は晴れ明日は雨" * (MECAB_MAX_CHARS // 12 + 1))[:MECAB_MAX_CHARS]
    assert mecab_pieces(text) == [text]
    assert mecab_surfaces(text) == _mecab_surfaces(text)


def test_a_longer_text_is_parsed_in_pieces_that_join_back() -> None:
    text = "東京の天気は晴れ。" * (MECAB_MAX_CHARS // 9 + 5)
    pieces = mecab_pieces(text)
    assert len(pieces) == 2 and "".join(pieces) == text
    assert all(len(p) <= MECAB_MAX_CHARS and p.endswith("。") for p in pieces[:-1])
    assert mecab_surfaces(text) == [s for p in pieces for s in _mecab_surfaces(p)]


def test_cuts_prefer_a_line_break_then_a_sentence_end_then_whitespace() -> None:
    assert mecab_pieces("ab cd。ef\ngh。ij", 12) == ["ab cd。ef\n", "gh。ij"]
    assert mecab_pieces("ab cd。ef gh。ij", 12) == ["ab cd。ef gh。", "ij"]
    assert mecab_pieces("abcdef ghijkl", 10) == ["abcdef ", "ghijkl"]
    assert mecab_pieces("abcdefghijkl", 10) == ["abcdefghij", "kl"]  # no place to cut: a hard cut


def test_a_hard_cut_leaves_no_combining_mark_or_joiner_at_a_piece_start() -> None:
    accented = "e\u0301" * 20
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467" * 10
    for text in (accented, family):
        for piece in mecab_pieces(text, 7)[1:]:
            assert unicodedata.category(piece[0]) not in ("Mn", "Mc", "Me") and piece[0] != "\u200d"


def test_max_chars_must_allow_progress() -> None:
    with pytest.raises(ValueError, match="at least 2"):
        mecab_pieces("abc", 1)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from("東京a 。\n\u0301\u200d\U0001f468"), max_size=60), st.integers(2, 12))
def test_pieces_are_bounded_and_join_back_to_the_text(text: str, max_chars: int) -> None:
    pieces = mecab_pieces(text, max_chars)
    assert "".join(pieces) == text
    assert all(0 < len(p) <= max_chars for p in pieces) or pieces == [""]
