from itertools import pairwise

from langchain_ragspine.text import normalize, sentence_spans


def test_normalize_folds_widths():
    assert normalize("ＡＢＣ１２３") == "ABC123"
    assert normalize("ｶﾀｶﾅ") == "カタカナ"
    assert normalize("東京\u3000タワー") == "東京 タワー"


def _sentences(text):
    return [text[s:e] for s, e in sentence_spans(text)]


def test_cjk_sentence_ends():
    text = "梅雨は雨季の一種。北海道にはない！本当か？はい；そうです"
    assert _sentences(text) == ["梅雨は雨季の一種。", "北海道にはない！", "本当か？", "はい；", "そうです"]


def test_latin_sentence_ends_need_space_or_end():
    text = "Pi is 3.14 roughly. See e.g. the docs! Done?"
    assert _sentences(text) == ["Pi is 3.14 roughly. ", "See e.g. ", "the docs! ", "Done?"]


def test_closing_brackets_stay_with_sentence():
    text = "「そうだ。」と言った。次だ。"
    assert _sentences(text) == ["「そうだ。」", "と言った。", "次だ。"]


def test_spans_tile_the_range():
    text = "前置き。一文目。二文目！ trailing words"
    spans = sentence_spans(text, 4, len(text))
    assert spans[0][0] == 4 and spans[-1][1] == len(text)
    assert all(a[1] == b[0] for a, b in pairwise(spans))
    assert sentence_spans(text, 5, 5) == []
