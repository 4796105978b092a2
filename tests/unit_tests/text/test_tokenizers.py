import pytest

from langchain_ragspine.tokenizers import (
    TOKENIZERS,
    auto_tokenize,
    cjk_tokenize,
    fugashi_tokenize,
    get_tokenizer,
    tokenizer_name,
    whitespace_tokenize,
)


def test_cjk_unigrams_and_bigrams_and_lowercased_words():
    assert cjk_tokenize("東京都のAPI", fold_scripts=False) == ["東", "京", "都", "の", "東京", "京都", "都の", "api"]
    # folded Traditional→Simplified by default (test_script_folding.py)
    assert cjk_tokenize("東京都のAPI") == ["东", "京", "都", "の", "东京", "京都", "都の", "api"]


def test_cjk_covers_kana_hangul_and_width_folding():
    toks = cjk_tokenize("ｶﾀｶﾅ　ＡＢＣ 한국어")
    assert "カタ" in toks and "カナ" in toks  # half-width katakana folded
    assert "abc" in toks  # full-width Latin folded and lower-cased
    assert "한국" in toks and "국어" in toks


def test_cjk_single_char_run_has_no_bigram():
    assert cjk_tokenize("猫 and dog", stem_english=False) == ["猫", "and", "dog"]
    assert cjk_tokenize("猫 and dogs") == ["猫", "dog"]  # English analysis: "and" is a stop word, "dogs" → "dog"


def test_fugashi_segments_japanese_and_drops_punctuation():
    toks = fugashi_tokenize("日本で梅雨がないのは北海道とどこか。")
    assert "梅雨" in toks and "北海道" in toks
    assert "。" not in toks


def test_auto_is_cjk_tokens_plus_cjk_morphemes():
    text = "北海道の梅雨とRAG"
    toks = auto_tokenize(text)
    assert set(cjk_tokenize(text)) <= set(toks)
    assert "北海道" in toks  # a whole morpheme, not a bigram
    assert "rag" in toks


def test_auto_on_english_equals_cjk():
    text = "Reciprocal Rank Fusion, k=60."
    assert auto_tokenize(text) == cjk_tokenize(text) == ["reciproc", "rank", "fusion", "k", "60"]
    assert auto_tokenize(text, stem_english=False) == ["reciprocal", "rank", "fusion", "k", "60"]


def test_whitespace():
    assert whitespace_tokenize("Hello  ＷＯＲＬＤ\nx") == ["hello", "world", "x"]


def test_get_tokenizer_by_name_and_callable():
    assert get_tokenizer("CJK") is cjk_tokenize
    assert get_tokenizer(" auto ") is auto_tokenize
    fn = lambda s: s.split()  # noqa: E731
    assert get_tokenizer(fn) is fn
    with pytest.raises(ValueError, match="unknown tokenizer 'mecab'"):
        get_tokenizer("mecab")
    with pytest.raises(TypeError):
        get_tokenizer(3)  # type: ignore[arg-type]


def test_tokenizer_name_round_trip():
    for name, fn in TOKENIZERS.items():
        assert tokenizer_name(fn) == name
        assert tokenizer_name(name.upper()) == name
    assert tokenizer_name(lambda s: []) is None


@pytest.mark.parametrize("name", sorted(TOKENIZERS))
def test_empty_text_gives_no_tokens(name):
    assert get_tokenizer(name)("") == []
    assert get_tokenizer(name)("   \n") == []
