"""Stop words and content terms: which tokens of a text can count as evidence that a passage answers it.

Question words (``what``, ``どこ``, ``什么``), function words (``the``, ``of``) and Japanese particles and endings
(``の``, ``は``, ``です``, ``か``) occur in questions and passages alike, whatever the topic.  Counted as evidence, they
make an unrelated sentence look like an answer ("Cherries are grown in Yamagata." shares ``are`` with "What are
apples?") and they dilute the share of a question a good sentence covers ("Tokyo weather is sunny today." covers
only half of the tokens of "What is the weather in Tokyo?").  Leaving such words out of matching is the stop-list
practice of information retrieval (Luhn, 1958; Salton and McGill, "Introduction to Modern Information Retrieval",
1983); :func:`content_terms` is the one place in the package that decides what counts, used by the extractive
answer, the answer attribution, the lexical grader and the query-analysis sanity checks.

Content terms of a text, in order:

1. CJK interrogatives are cut out of the text before tokenizing (:data:`CJK_QUESTION_WORDS`: ``何``, ``誰``,
   ``什么``, ``哪``, ``谁``, ``多少`` …), so that no character n-gram that contains one is formed.
2. The text is tokenized with the given tokenizer (default ``"auto"``, the BM25 one), so terms compare with the
   tokens of passages tokenized the same way — for ``"auto"`` and ``"cjk"`` English words are Snowball stems
   (``documents`` → ``document``, ``changed`` → ``chang``), so an inflected question word finds its passage word.
3. Dropped: :data:`ENGLISH_STOPWORDS` (function words, question words, auxiliaries; for a stemming tokenizer
   their stems too — ``does`` reaches this step as ``doe``, ``only`` as ``onli``), tokens made only of
   hiragana (Japanese particles, auxiliaries, inflections and the kana interrogatives ``どこ``, ``いつ``, ``どの``),
   two-character tokens with a hiragana character (the character bigrams that straddle a word and its particle:
   ``号を``, ``道と``, ``本で``), and the single-character Chinese function words of :data:`CHINESE_FUNCTION_CHARS`
   (``的``, ``是``, ``了`` …).

What stays are the words and character n-grams that carry a topic: ``tokyo``, ``weather``, ``梅雨``, ``北海道``,
``小笠``, ``3776`` (with ``"auto"``: ``weather``, ``tokyo``, ``ingest``, ``chang``).  A Japanese word written only in hiragana (``すし``) is not a content term — a known limitation
of dropping kana-only tokens, which are function words in the vast majority of cases.
"""

from __future__ import annotations

import functools
import re

from langchain_ragspine.text import normalize
from langchain_ragspine.text.english import ENGLISH_STOPWORDS, english_stem
from langchain_ragspine.tokenizers import STEMMING_TOKENIZERS, Tokenizer, get_tokenizer, tokenizer_name

__all__ = [
    "CHINESE_FUNCTION_CHARS",
    "CHINESE_QUESTION_WORDS",
    "CJK_QUESTION_WORDS",
    "ENGLISH_STOPWORDS",
    "JAPANESE_QUESTION_WORDS",
    "content_terms",
    "is_content_term",
]

#: Japanese interrogatives (the kana ones are also dropped as kana-only tokens; ``何`` and ``誰`` are cut out).
JAPANESE_QUESTION_WORDS = frozenset(
    {"どこ", "何", "なに", "なん", "いつ", "誰", "だれ", "どの", "どれ", "どう", "なぜ", "どちら", "どんな", "いくつ",
     "いくら", "どのよう", "どうして"}
)
#: Chinese interrogatives and sentence-final question particles.
CHINESE_QUESTION_WORDS = frozenset(
    {"什么", "哪", "哪里", "哪儿", "哪个", "哪些", "哪一年", "谁", "为什么", "怎么", "怎样", "怎么样", "如何", "多少", "几",
     "吗", "呢"}
)
#: Interrogatives written with ideographs, cut out of a text before it is tokenized (longest first).
CJK_QUESTION_WORDS: tuple[str, ...] = tuple(
    sorted({w for w in JAPANESE_QUESTION_WORDS | CHINESE_QUESTION_WORDS if re.search(r"[\u4e00-\u9fff]", w)},
           key=len, reverse=True)
)
#: Single characters that are function words in Chinese (as one-character tokens they carry no topic).
CHINESE_FUNCTION_CHARS = frozenset("的是了在和与及或也都就而被把之其于为以这那个吧啊么着过得地所")

_CJK_QUESTION_RE = re.compile("|".join(re.escape(w) for w in CJK_QUESTION_WORDS))
_HIRAGANA_ONLY_RE = re.compile(r"[\u3040-\u309f\u30fc]+")
_HIRAGANA_RE = re.compile(r"[\u3040-\u309f]")


@functools.cache
def _stopword_stems() -> frozenset[str]:
    """:data:`ENGLISH_STOPWORDS` and their Snowball stems (``does`` → ``doe``, ``only`` → ``onli``)."""
    return ENGLISH_STOPWORDS | {english_stem(w) for w in ENGLISH_STOPWORDS}


def is_content_term(token: str, *, stemmed: bool = False) -> bool:
    """Whether ``token`` (as a tokenizer emits it: NFKC, lower-cased) can count as evidence — not an English stop
    word, not made only of hiragana, not two characters one of which is hiragana, not a one-character Chinese
    function word, not empty.  ``stemmed`` (default ``False``): ``token`` comes from a tokenizer that stems
    English words (``"auto"``, ``"cjk"``), so the stems of the stop words are stop words too (``doe``, ``onli``).
    """
    stops = _stopword_stems() if stemmed else ENGLISH_STOPWORDS
    if not token or token in stops or token in CHINESE_FUNCTION_CHARS:
        return False
    if len(token) <= 2 and _HIRAGANA_RE.search(token):
        return False
    return not _HIRAGANA_ONLY_RE.fullmatch(token)


def content_terms(text: str, tokenizer: str | Tokenizer = "auto") -> set[str]:
    """The distinct content terms of ``text`` (see the module docstring), as ``tokenizer`` spells them.

    ``content_terms("What is the weather in Tokyo?") == {"weather", "tokyo"}``; ``content_terms("What happens
    when I re-ingest a changed document?") == {"ingest", "chang", "document"}`` (stems, with the default
    ``"auto"``); a text with nothing but stop words, question words and kana (``"What is it?"``, ``"どこですか"``)
    gives an empty set.  Never raises on odd
    input: a non-string gives an empty set.

    Raises:
        ValueError: an unknown tokenizer name.
    """
    tokenize = get_tokenizer(tokenizer)
    if not isinstance(text, str) or not text.strip():
        return set()
    stemmed = tokenizer_name(tokenize) in STEMMING_TOKENIZERS
    masked = _CJK_QUESTION_RE.sub(" ", normalize(text))
    return {t for t in tokenize(masked) if is_content_term(t, stemmed=stemmed)}

