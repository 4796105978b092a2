"""The tokenizers' fast paths give exactly the tokens of the straightforward implementation they replaced.

``mecab_surfaces`` reads the surfaces from MeCab's own output instead of one fugashi node object per morpheme, and
the CJK unigrams/bigrams are built with C-level loops; the references below are the code as it was, token for
token (order included: it decides the BM25 vocabulary ids).
"""

from __future__ import annotations

import re
import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from langchain_ragspine.text import CJK_CHAR_CLASS, CJK_CHAR_RE, normalize
from langchain_ragspine.text.english import english_term
from langchain_ragspine.tokenizers import (
    auto_tokenize,
    cjk_tokenize,
    fold_to_simplified,
    fugashi_tagger,
    fugashi_tokenize,
    mecab_surfaces,
)

_TOKEN_RE = re.compile(rf"(?P<cjk>[{CJK_CHAR_CLASS}]+)|(?P<word>[^\W_{CJK_CHAR_CLASS}]+)")


def _grams_reference(text: str, english: bool = False) -> tuple[list[str], bool]:
    out: list[str] = []
    has_cjk = False
    for m in _TOKEN_RE.finditer(text):
        run = m.group("cjk")
        if run is not None:
            has_cjk = True
            out.extend(run)
            out.extend(run[i : i + 2] for i in range(len(run) - 1))
        elif not english:
            out.append(m.group("word"))
        elif term := english_term(m.group("word")):  # the English analysis touches words only
            out.append(term)
    return out, has_cjk


def _node_surfaces(text: str) -> list[str]:
    return [w.surface for w in fugashi_tagger()(text)]


def _auto_reference(text: str, fold: bool = True, english: bool = False) -> list[str]:
    norm = normalize(text).lower()
    grams = fold_to_simplified(norm) if fold else norm
    out, has_cjk = _grams_reference(grams, english)
    if has_cjk:
        morphemes = [s for s in _node_surfaces(norm) if CJK_CHAR_RE.search(s)]
        out.extend([fold_to_simplified(m) for m in morphemes] if fold else morphemes)
    return out


# Japanese, Chinese (both scripts), Latin, digits, full-width forms, punctuation and every kind of space and
# control character MeCab or the fast path could treat specially (BEL is the fast path's separator, NUL ends a C
# string).
_ALPHABET = st.sampled_from(
    list("東京都の天気は晴れ北海道梅雨關聯資料庫的备份与还原カタカナｶﾀｶﾅひらがな한국어")
    + list("abcXYZ019ＡＢＣ１２３.,!?;:-_'\"()[]「」『』。、，！？・…")
    + [" ", "  ", "\t", "\n", "\r", "\u3000", "\xa0", "\u2028", "\x85", "\x1c", "\x07", "\x00", "\x7f", "\ufeff"]
)
_TEXT = st.lists(_ALPHABET, max_size=60).map("".join)


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_mecab_surfaces_equal_the_node_surfaces(text: str) -> None:
    assert mecab_surfaces(text) == _node_surfaces(text)
    norm = normalize(text).lower()
    assert mecab_surfaces(norm) == _node_surfaces(norm)


@settings(max_examples=300, deadline=None)
@given(_TEXT)
def test_auto_and_cjk_tokens_are_unchanged(text: str) -> None:
    # without English analysis: the tokens of before, byte for byte; with it, the same with each word analysed
    assert auto_tokenize(text, stem_english=False) == _auto_reference(text)
    assert auto_tokenize(text) == _auto_reference(text, english=True)
    assert auto_tokenize(text, fold_scripts=False, stem_english=False) == _auto_reference(text, fold=False)
    folded = fold_to_simplified(normalize(text).lower())
    assert cjk_tokenize(text, stem_english=False) == _grams_reference(folded)[0]
    assert cjk_tokenize(text) == _grams_reference(folded, english=True)[0]
    symbol = lambda s: all(unicodedata.category(ch)[0] in "PSZC" for ch in s)  # noqa: E731
    assert fugashi_tokenize(text, fold_scripts=False) == [
        s for s in _node_surfaces(normalize(text).lower()) if s and not symbol(s)
    ]


def test_separator_and_nul_take_the_node_path() -> None:
    for text in ("東京\x07都", "東京\x00都の天気", "\x07", "a\x07b 北京"):
        assert mecab_surfaces(text) == _node_surfaces(text)


def test_real_sentences() -> None:
    text = "日本で梅雨がないのは北海道と小笠原諸島。北京是中华人民共和国的首都，關聯式資料庫 RAG-Fusion 2024年"
    assert mecab_surfaces(text) == _node_surfaces(text)
    assert auto_tokenize(text, stem_english=False) == _auto_reference(text)
    assert auto_tokenize(text) == _auto_reference(text, english=True)
    assert "北海道" in auto_tokenize(text) and "小笠原" in auto_tokenize(text)
