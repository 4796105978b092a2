"""The numpy count of the ``cjk`` / ``auto`` tokenizers equals their token-by-token count (issue 12).

``count_batch`` counts the n-gram tokenizers with :func:`count_gram_batch` (integers instead of a string per
character n-gram); every field of the :class:`CountedBatch` — the terms in order of first occurrence, each
document's term numbers and frequencies, its length and its number of distinct terms — must be what counting the
tokenizer's own tokens gives, for any text: CJK runs of every length, Traditional characters that fold, kana,
hangul, astral ideographs, Latin words, NFKC-changing characters, MeCab's separator (BEL) and NUL, empty texts,
text longer than one MeCab call takes.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from langchain_ragspine import tokenizers
from langchain_ragspine.backends.directory import _gram_count, bm25_parallel
from langchain_ragspine.backends.directory._gram_count import GRAM_TOKENIZERS, count_gram_batch
from langchain_ragspine.backends.directory.bm25_index import build_bm25_index
from langchain_ragspine.backends.directory.bm25_parallel import CountedBatch, _count_tokens, count_batch
from langchain_ragspine.tokenizers import get_tokenizer

NAMES = sorted(GRAM_TOKENIZERS)
JA = "日本で梅雨がないのは北海道と小笠原諸島である。東京都の天気は晴れ、気温は二十度を超えた。"
ZH = "北京是中华人民共和国的首都，關聯式資料庫的備份與還原。长江是亚洲最长的河流。髮發乾"
EN = "Reciprocal rank fusion combines BM25 and dense retrieval; k=60. Straße ΣΑΣ İstanbul naïve"
# English analysis: stop words dropped (a whole text of them has no token), inflections stemmed, a possessive's s
EN_STEMS = "The documents were re-ingested; it is BM25's index of changed chunks, running Москва cafés"
EN_STOP = "the a of is it to"
# characters chosen to hit every branch: CJK of each block (with Traditional forms that fold), kana and the
# iteration mark, hangul, astral ideographs, beyond plane 2, Latin, digits, NFKC-changing forms (full width, half
# width katakana, circled digits, ㍻, ligatures), combining marks, separators, MeCab's BEL and NUL
ALPHABET = (
    "日本東京都の梅雨がない北海道關聯資料庫發髮乾々カタカナｶﾀｶﾅ한국어𠀀𪚲\U00030000😀"
    "abcXYZ019 _-.,;\n\t\r\u3000\a\0。、！？ＡＢ①㍻ﬁ\u0301é"
)


def _reference(name: str, texts: list[str]) -> CountedBatch:
    return _count_tokens(get_tokenizer(name), texts)


def _postings(c: CountedBatch) -> list[list[tuple[int, int]]]:
    """Each document's (term number, frequency) pairs, sorted (the order within a document is free)."""
    ends = np.cumsum(c.doc_terms)
    pairs = list(zip(c.term_ids.tolist(), c.tfs.tolist(), strict=True))
    return [sorted(pairs[int(e - n) : int(e)]) for e, n in zip(ends, c.doc_terms, strict=True)]


def _assert_same(a: CountedBatch, b: CountedBatch) -> None:
    assert a.term_list() == b.term_list()  # the same terms in the same order of first occurrence
    for field in ("term_ids", "tfs", "doc_len", "doc_terms"):
        x, y = getattr(a, field), getattr(b, field)
        assert x.dtype == y.dtype, field
    assert np.array_equal(a.doc_len, b.doc_len) and np.array_equal(a.doc_terms, b.doc_terms)
    assert _postings(a) == _postings(b)


def _mixed(n: int) -> list[str]:
    rng = np.random.default_rng(0)
    pool = [JA, ZH, EN, EN_STEMS, EN_STOP, "", "。、！？", "東京", "ＡＢＣ　ｶﾀｶﾅ 한국어 123"]
    out = []
    for _ in range(n):
        text = "".join(pool[i] for i in rng.integers(0, len(pool), rng.integers(1, 5)))
        cut = int(rng.integers(0, len(text) + 1))
        out.append(text[cut:] + text[:cut])
    return out


@pytest.mark.parametrize("name", NAMES)
def test_equals_the_token_count_on_mixed_text(name: str) -> None:
    texts = _mixed(300)
    counted = count_gram_batch(name, texts)
    assert counted is not None
    _assert_same(counted, _reference(name, texts))
    assert len(counted.term_list()) > 100 and counted.doc_len.sum() > 10_000  # the texts really have terms


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(st.text(alphabet=ALPHABET, max_size=40), max_size=8), name=st.sampled_from(NAMES))
def test_equals_the_token_count_on_any_text(texts: list[str], name: str) -> None:
    counted = count_gram_batch(name, texts)
    assert counted is not None
    _assert_same(counted, _reference(name, texts))


def test_regression_terms_equal_across_morphemes_and_grams() -> None:
    """A morpheme of one or two CJK characters is the same term as the unigram / bigram it equals (one term, its
    frequencies added), a longer one a term of its own; Traditional morphemes fold like the n-grams."""
    texts = ["東京都の天気", "關聯式資料庫", "北海道は北海道"]
    counted = count_gram_batch("auto", texts)
    assert counted is not None
    terms = counted.term_list()
    assert len(terms) == len(set(terms))
    assert "北海道" in terms and "关联" in terms and "關聯" not in terms
    _assert_same(counted, _reference("auto", texts))


def test_texts_mecab_gets_in_pieces_or_as_nodes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Text longer than one MeCab call, or holding BEL / NUL, takes the tokenizer's own MeCab path."""
    monkeypatch.setattr(tokenizers, "MECAB_MAX_CHARS", 40)
    texts = [JA * 3, "東京\a都の天気", "北京\0是首都", ZH, JA]
    for name in ("auto", "auto-nofold"):
        counted = count_gram_batch(name, texts)
        assert counted is not None
        _assert_same(counted, _reference(name, texts))


def test_empty_batches_and_texts_without_terms() -> None:
    for texts in ([], [""], ["", "。、", "  \n"], ["", "東京", ""]):
        counted = count_gram_batch("auto", texts)
        assert counted is not None
        _assert_same(counted, _reference("auto", texts))


def test_count_batch_uses_it_and_falls_back_to_the_token_count(monkeypatch: pytest.MonkeyPatch) -> None:
    texts = _mixed(50)
    fast = count_batch(" AUTO ", texts)
    _assert_same(fast, _reference("auto", texts))
    calls: list[str] = []

    def too_wide(name: str, batch: object) -> None:
        calls.append(name)
        return None

    monkeypatch.setattr(bm25_parallel, "count_gram_batch", too_wide)
    _assert_same(count_batch("auto", texts), fast)
    assert calls == ["auto"]
    assert count_batch("fugashi", texts[:3]).doc_len.size == 3 and calls == ["auto"]


def test_integers_too_wide_for_63_bits_give_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_gram_count, "_bits", lambda n: 32)
    assert count_gram_batch("cjk", ["東京都"]) is None


@pytest.mark.parametrize("name", ["auto", "cjk"])
def test_index_equals_the_index_of_the_tokens(name: str) -> None:
    """``build_bm25_index`` with the registered tokenizer (counted in batches) equals the build over the same
    tokenizer's tokens given as an unregistered callable (counted token by token): ids, order, matrix bytes."""
    texts = _mixed(200)
    tokenize = get_tokenizer(name)
    fast = build_bm25_index(texts, tokenize, k1=1.5, b=0.75, workers=1)
    slow = build_bm25_index(texts, lambda t: tokenize(t), k1=1.5, b=0.75, workers=1)
    assert list(fast.vocab_dict.items()) == list(slow.vocab_dict.items())
    for key in ("data", "indices", "indptr"):
        assert fast.scores[key].tobytes() == slow.scores[key].tobytes()
