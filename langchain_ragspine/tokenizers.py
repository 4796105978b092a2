"""Tokenizers for BM25 over Japanese, Chinese and English text.

Every tokenizer is a plain callable ``str -> list[str]`` chosen by name with :func:`get_tokenizer`; queries and
documents must go through the same one.  All of them NFKC-normalise first (:func:`langchain_ragspine.text.normalize`)
and lower-case Latin letters, so ``ＡＢＣ``, ``ABC`` and ``abc`` are one term.

* ``"cjk"`` — ASCII/Latin words as lower-cased word tokens; every run of CJK characters (kanji/hanzi, hiragana,
  katakana, hangul) as character unigrams plus adjacent bigrams.  Dictionary-free and language-agnostic; the
  classic overlapping-bigram indexing for CJK (Kwok, "Comparing representations in Chinese information retrieval",
  SIGIR 1997), with unigrams added so that one-character queries still match.
* ``"fugashi"`` — MeCab morphemes with the unidic-lite dictionary (surface forms after NFKC), punctuation and
  symbols dropped.  Good segmentation for Japanese; Chinese text is segmented as if it were Japanese.
* ``"whitespace"`` — ``str.split()`` after NFKC and lower-casing (LangChain's default preprocessing is the bare
  ``str.split()``).
* ``"auto"`` (the default) — the ``"cjk"`` tokens plus the fugashi morphemes of CJK text (see
  :func:`auto_tokenize`): the best combination measured on Japanese (JSQuAD) and Chinese (CMRC 2018) text, see
  ``benchmarks/RESULTS.md``.

**English words.**  ``"auto"`` and ``"cjk"`` analyse each Latin-script word as English
(:mod:`langchain_ragspine.text.english`): Lucene's 33 English stop words (and the ``s`` of a possessive) are
dropped and every other word becomes its Snowball English stem, as Lucene's ``EnglishAnalyzer`` and bm25s with
PyStemmer do — ``re-ingesting`` and ``re-ingest`` both give ``re``, ``ingest``.  CJK tokens are untouched.
``"auto-nostem"`` and ``"cjk-nostem"`` are the same tokenizers without it (the English words lower-cased, stop
words kept: byte-identical to ``"auto"`` / ``"cjk"`` before English analysis existed); the ``-nofold`` variants
have neither the fold nor the English analysis.  Measured in ``benchmarks/RESULTS.md``, section
``english-analysis``.

**Chinese in either script.**  ``"auto"``, ``"cjk"`` and ``"fugashi"`` fold Traditional Chinese characters to
Simplified in their tokens (:func:`~langchain_ragspine.text.chinese.fold_to_simplified`, importable from here too), so a Simplified query finds Traditional text and the
reverse; the text itself (chunk ``page_content``) is never changed.  ``"auto-nofold"``, ``"cjk-nofold"`` and
``"fugashi-nofold"`` are the same tokenizers without folding — byte-identical to their output before folding
existed — for corpora where the script carries meaning.  Every tokenizer has a version
(:func:`tokenizer_version`) that a saved index records, so an index built with other tokens is detected as stale.

Why this fold (measured in ``benchmarks/RESULTS.md``, sections ``cross-script`` and ``cross-script-speed``):

* Traditional→Simplified, because it is many-to-one (``發``, ``髮`` → ``发``) and needs no context; the reverse is
  one-to-many.
* Per character, not OpenCC's phrase-level conversion: a pure function of the character, so a query and a document
  can never fold a shared character differently, offsets are kept, and it is a table lookup (~4 µs per 400-character
  chunk).  The phrase-level conversion scored within 0.001 of it (CMRC 2018 answer recall@1, Traditional questions
  on Simplified articles: 0.9074 vs 0.9068; original questions: 0.9074).
* All text, Japanese included — no language detection.  Kanji that are Traditional forms fold on both sides
  (``東京`` → ``东京``), and MeCab still segments the text as written, so Japanese segmentation is unchanged: JSQuAD
  answer recall@1/@5 stays 0.9190/0.9788.  Folding *before* MeCab (or converting phrase-level) cost Japanese
  0.0003/0.0006, and a rule that folds only text "identified as Chinese" would have to guess from kana, which
  Japanese keyword queries often lack.

The fold itself (its OpenCC table, :data:`~langchain_ragspine.text.chinese.FOLD_VERSION`) lives in
:mod:`langchain_ragspine.text.chinese`.  fugashi and OpenCC are imported lazily, on the first call that needs them.
"""

from __future__ import annotations

import operator
import re
import threading
import unicodedata
from collections.abc import Callable
from typing import Any

from langchain_ragspine.text import CJK_CHAR_CLASS, CJK_CHAR_RE, normalize
from langchain_ragspine.text.chinese import FOLD_VERSION, fold_to_simplified, fold_tokens
from langchain_ragspine.text.english import english_analysis_version, english_terms

__all__ = [
    "MECAB_MAX_CHARS",
    "MECAB_SURFACE_END",
    "STEMMING_TOKENIZERS",
    "TOKENIZERS",
    "WORD_PATTERN",
    "auto_nofold_tokenize",
    "auto_nostem_tokenize",
    "auto_tokenize",
    "cjk_nofold_tokenize",
    "cjk_nostem_tokenize",
    "cjk_tokenize",
    "fugashi_nofold_tokenize",
    "fugashi_tagger",
    "fugashi_tokenize",
    "get_tokenizer",
    "mecab_pieces",
    "mecab_surface_tagger",
    "mecab_surfaces",
    "Tokenizer",
    "tokenizer_name",
    "tokenizer_version",
    "whitespace_tokenize",
]

Tokenizer = Callable[[str], list[str]]

#: A word of the ``cjk`` / ``auto`` tokenizers: a run of word characters that are neither ``_`` nor CJK.
WORD_PATTERN = rf"[^\W_{CJK_CHAR_CLASS}]+"
_TOKEN_RE = re.compile(rf"(?P<cjk>[{CJK_CHAR_CLASS}]+)|(?P<word>{WORD_PATTERN})")


def _gram_tokens(text: str, english: bool = False) -> tuple[list[str], bool]:
    """``(tokens, has_cjk)``: the lower-cased words and CJK unigrams + bigrams of ``text`` (already normalised),
    in text order, and whether it holds a CJK run.  With ``english`` each word is its
    :func:`~langchain_ragspine.text.english.english_term` (stem; stop words dropped)."""
    out: list[str] = []
    extend, append = out.extend, out.append
    has_cjk = False
    words: list[int] = []  # where the words are in ``out``
    for run, word in _TOKEN_RE.findall(text):  # exactly one of the two groups is non-empty
        if run:
            has_cjk = True
            extend(run)
            extend(map(operator.add, run, run[1:]))
        else:
            words.append(len(out))
            append(word)
    if english and words:  # the words analysed in one pass over the cache; "" = a stop word, dropped
        if not has_cjk:
            return [t for t in english_terms(out) if t], has_cjk
        terms = english_terms([out[i] for i in words])
        for i, term in zip(words, terms, strict=True):
            out[i] = term
        if "" in terms:
            out = [t for t in out if t]
    return out, has_cjk


def cjk_tokenize(text: str, *, fold_scripts: bool = True, stem_english: bool = True) -> list[str]:
    """Tokenize with the ``"cjk"`` scheme: lower-cased words, and CJK character unigrams + adjacent bigrams.

    With ``fold_scripts`` (the default) Traditional Chinese characters are folded to Simplified first
    (:func:`fold_to_simplified`); with ``stem_english`` (the default) each Latin-script word is analysed as
    English (:func:`~langchain_ragspine.text.english.english_term`: Lucene's stop words dropped, the rest
    Snowball-stemmed).  ``stem_english=False`` is the ``"cjk-nostem"`` tokenizer; ``fold_scripts=False,
    stem_english=False`` the ``"cjk-nofold"`` one.

    >>> cjk_tokenize("東京都のAPIs")
    ['东', '京', '都', 'の', '东京', '京都', '都の', 'api']
    >>> cjk_tokenize("東京都のAPIs", fold_scripts=False, stem_english=False)
    ['東', '京', '都', 'の', '東京', '京都', '都の', 'apis']
    """
    norm = normalize(text).lower()
    if fold_scripts:
        norm = fold_to_simplified(norm)
    return _gram_tokens(norm, stem_english)[0]


def whitespace_tokenize(text: str) -> list[str]:
    """Tokenize with ``str.split()`` after NFKC and lower-casing (LangChain's default is the bare ``str.split()``)."""
    return normalize(text).lower().split()


_local = threading.local()


def fugashi_tagger() -> Any:
    """This thread's ``fugashi.Tagger`` over the unidic-lite dictionary (created on first use, then reused).

    The raw tagger: give it :func:`mecab_pieces` of a text that may exceed :data:`MECAB_MAX_CHARS` characters (MeCab
    crashes the process on a very long line).

    Raises:
        ImportError: fugashi or unidic-lite is not installed (both are core dependencies).
    """
    tagger = getattr(_local, "tagger", None)
    if tagger is None:
        try:
            import fugashi
            import unidic_lite
        except ImportError as e:  # pragma: no cover - both are core dependencies
            raise ImportError(
                "The 'fugashi' tokenizer needs fugashi and unidic-lite: pip install fugashi unidic-lite"
            ) from e
        # -r /dev/null: ignore any system mecabrc; -d: the dictionary bundled in unidic-lite.
        tagger = fugashi.Tagger(f'-r /dev/null -d "{unidic_lite.DICDIR}"')
        _local.tagger = tagger
    return tagger


#: Ends every morpheme in the output of :func:`mecab_surface_tagger` (BEL: MeCab's ``\\a`` escape).
MECAB_SURFACE_END = "\a"


def mecab_surface_tagger() -> Any:
    """This thread's MeCab tagger over unidic-lite that prints each morpheme's surface followed by
    :data:`MECAB_SURFACE_END` (``-F %m\\a``, the same for unknown words; no BOS/EOS line): the same best path as
    :func:`fugashi_tagger`, without a Python node object per morpheme (created on first use, then reused).

    ``mecab_surface_tagger().parse(text)`` returns one string; split it at :data:`MECAB_SURFACE_END` and drop the
    last (empty) part.  Like :func:`fugashi_tagger` it must be given pieces of at most :data:`MECAB_MAX_CHARS`
    characters, and text holding neither the separator nor NUL (:func:`mecab_surfaces` does both).

    Raises:
        ImportError: fugashi or unidic-lite is not installed (both are core dependencies).
    """
    tagger = getattr(_local, "surface_tagger", None)
    if tagger is None:
        fugashi_tagger()  # the same import checks and error message
        import fugashi
        import unidic_lite

        # -O "": no output style from the dictionary's dicrc, so the formats given here apply
        tagger = fugashi.GenericTagger(
            f'-r /dev/null -d "{unidic_lite.DICDIR}" -O "" -F "%m\\a" -U "%m\\a" -B "" -E ""'
        )
        _local.surface_tagger = tagger
    return tagger


#: The most characters one MeCab call is given.  MeCab (fugashi 1.x, unidic-lite) crashes the process with a
#: segmentation fault on one line of roughly 850,000 characters or more (``"東京の天気は晴れ。" * 100_000``, 900,000
#: characters, crashes; 810,000 does not), so longer text is parsed in pieces of at most this many characters
#: (:func:`mecab_pieces`), far below the crash.  Text up to this length is one piece, tokenized exactly as before.
MECAB_MAX_CHARS = 65_536

# Where a long text is cut, best first: after a line break, after a sentence end, after whitespace.
_CUT_AFTER = ("\n\r\u2028\u2029\x0b\x0c\x1c\x1d\x1e\x85", "。！？｡.!?", " \t\u3000")


def _cut_point(text: str, start: int, end: int) -> int:
    """Where to end the piece of ``text`` that starts at ``start`` and may end at most at ``end`` (``end < len``):
    just after the last line break, else sentence end, else whitespace in the second half of the window; else
    ``end``, moved back so that it splits no surrogate pair and leaves no combining mark, variation selector or
    zero-width joiner at the start of the next piece."""
    low = start + (end - start) // 2
    for chars in _CUT_AFTER:
        cut = max(text.rfind(ch, low, end) for ch in chars)
        if cut >= low:
            return cut + 1
    cut = end
    while cut > low and (
        "\udc00" <= text[cut] <= "\udfff"
        or text[cut - 1] == "\u200d"
        or unicodedata.category(text[cut]) in ("Mn", "Mc", "Me")
        or text[cut] == "\u200d"
    ):
        cut -= 1
    return cut if cut > low else end


def mecab_pieces(text: str, max_chars: int = MECAB_MAX_CHARS) -> list[str]:
    """``text`` cut into consecutive pieces of at most ``max_chars`` characters (default :data:`MECAB_MAX_CHARS`)
    for MeCab, which crashes on very long lines.  ``"".join(pieces) == text``; a text of at most ``max_chars``
    characters is the one piece ``[text]``.  Each cut is just after the last line break in the second half of the
    window, else the last sentence end (``。！？.!?``), else the last whitespace; with none of them, a hard cut that
    does not split a surrogate pair or put a combining mark / zero-width joiner at the start of a piece.

    Raises:
        ValueError: ``max_chars`` < 2.
    """
    if max_chars < 2:
        raise ValueError(f"max_chars must be at least 2, got {max_chars}")
    if len(text) <= max_chars:
        return [text]
    pieces: list[str] = []
    start = 0
    while len(text) - start > max_chars:
        cut = _cut_point(text, start, start + max_chars)
        pieces.append(text[start:cut])
        start = cut
    pieces.append(text[start:])
    return pieces


def _mecab_surfaces(text: str) -> list[str]:
    if MECAB_SURFACE_END in text or "\0" in text:
        return [w.surface for w in fugashi_tagger()(text)]
    out = mecab_surface_tagger().parse(text).split(MECAB_SURFACE_END)
    out.pop()  # after the last separator: the (empty) end of sentence
    return out


def mecab_surfaces(text: str) -> list[str]:
    """The surface forms of the morphemes MeCab (unidic-lite) finds in ``text``, in order — exactly
    ``[w.surface for w in fugashi_tagger()(text)]``, about twice as fast: MeCab prints the surfaces itself, so no
    Python object is made per morpheme.  A text holding the separator (BEL) or a NUL character takes the node path.

    A text longer than :data:`MECAB_MAX_CHARS` is parsed piece by piece (:func:`mecab_pieces`) and the surfaces
    concatenated, so a huge one-line text cannot crash MeCab; only morphemes at a cut can differ from one parse.
    """
    if len(text) <= MECAB_MAX_CHARS:
        return _mecab_surfaces(text)
    return [s for piece in mecab_pieces(text) for s in _mecab_surfaces(piece)]


def _is_symbol(token: str) -> bool:
    return all(unicodedata.category(ch)[0] in "PSZC" for ch in token)


def fugashi_tokenize(text: str, *, fold_scripts: bool = True) -> list[str]:
    """Tokenize into unidic-lite morphemes (surface forms of the NFKC, lower-cased text); symbols are dropped.

    MeCab segments the text as written; with ``fold_scripts`` (the default) each morpheme is then folded
    Traditional→Simplified (:func:`fold_to_simplified`), so Japanese segmentation is unchanged.
    ``fold_scripts=False`` is the ``"fugashi-nofold"`` tokenizer.
    """
    norm = normalize(text).lower()
    tokens = [s for s in mecab_surfaces(norm) if s and not _is_symbol(s)]
    return fold_tokens(tokens) if fold_scripts else tokens


def auto_tokenize(text: str, *, fold_scripts: bool = True, stem_english: bool = True) -> list[str]:
    """The default tokenizer: the ``"cjk"`` tokens, plus the fugashi morphemes that contain a CJK character.

    Character unigrams and bigrams match whatever the segmentation; the morphemes add whole Japanese words
    (``北海道``, ``小笠原諸島``) as terms of their own, which sharpens ranking at rank 1.  Measured with default
    chunking (answer recall@1): JSQuAD 0.919 (cjk 0.914, fugashi 0.900), CMRC 2018 0.907 (cjk 0.895, fugashi 0.877);
    see ``benchmarks/RESULTS.md``.  Text without CJK characters is never sent to MeCab, so English gets exactly
    the ``"cjk"`` word tokens: with ``stem_english`` (the default) Lucene's English stop words are dropped and
    every other Latin-script word is its Snowball English stem (:mod:`langchain_ragspine.text.english`), so
    "re-ingesting changed documents" and "re-ingest a changed document" share ``ingest``, ``chang`` and
    ``document``.  CJK tokens (unigrams, bigrams, morphemes) are the same either way.

    With ``fold_scripts`` (the default) every token is folded Traditional→Simplified
    (:func:`fold_to_simplified`): the unigrams and bigrams come from the folded text, while MeCab segments the
    text as written and its morphemes are folded afterwards — folding before MeCab would feed it Simplified forms
    of Japanese kanji it does not know (JSQuAD answer recall@1 0.9187 instead of 0.9190).  Traditional CMRC 2018
    questions against the Simplified articles: answer recall@1 0.9068 with folding, 0.7956 without, 0.9074 for the
    original questions (section ``cross-script`` of ``benchmarks/RESULTS.md``).  ``stem_english=False`` is the
    ``"auto-nostem"`` tokenizer (the ``"auto"`` of before English analysis); ``fold_scripts=False,
    stem_english=False`` the ``"auto-nofold"`` one.
    """
    norm = normalize(text).lower()
    grams = fold_to_simplified(norm) if fold_scripts else norm
    out, has_cjk = _gram_tokens(grams, stem_english)
    if has_cjk:
        search = CJK_CHAR_RE.search
        morphemes = [s for s in mecab_surfaces(norm) if search(s)]
        # morphemes are pieces of ``norm``: when folding changed nothing there, it changes nothing in them
        out.extend(fold_tokens(morphemes) if grams != norm else morphemes)
    return out


def auto_nofold_tokenize(text: str) -> list[str]:
    """The ``"auto-nofold"`` tokenizer: :func:`auto_tokenize` without script folding or English analysis (the
    ``"auto"`` tokens of before both)."""
    return auto_tokenize(text, fold_scripts=False, stem_english=False)


def cjk_nofold_tokenize(text: str) -> list[str]:
    """The ``"cjk-nofold"`` tokenizer: :func:`cjk_tokenize` without script folding or English analysis."""
    return cjk_tokenize(text, fold_scripts=False, stem_english=False)


def auto_nostem_tokenize(text: str) -> list[str]:
    """The ``"auto-nostem"`` tokenizer: :func:`auto_tokenize` without English analysis (English words as
    lower-cased words, stop words kept) — the ``"auto"`` tokens of before English analysis, byte for byte."""
    return auto_tokenize(text, stem_english=False)


def cjk_nostem_tokenize(text: str) -> list[str]:
    """The ``"cjk-nostem"`` tokenizer: :func:`cjk_tokenize` without English analysis (the ``"cjk"`` tokens of
    before English analysis)."""
    return cjk_tokenize(text, stem_english=False)


def fugashi_nofold_tokenize(text: str) -> list[str]:
    """The ``"fugashi-nofold"`` tokenizer: :func:`fugashi_tokenize` without script folding."""
    return fugashi_tokenize(text, fold_scripts=False)


TOKENIZERS: dict[str, Tokenizer] = {
    "auto": auto_tokenize,
    "cjk": cjk_tokenize,
    "fugashi": fugashi_tokenize,
    "whitespace": whitespace_tokenize,
    "auto-nofold": auto_nofold_tokenize,
    "cjk-nofold": cjk_nofold_tokenize,
    "fugashi-nofold": fugashi_nofold_tokenize,
    "auto-nostem": auto_nostem_tokenize,
    "cjk-nostem": cjk_nostem_tokenize,
}

# The version of each tokenizer's output for the same text.  "1" is the output before script folding existed (an
# index saved without a version was built with it); a folding tokenizer's version names the fold and the OpenCC
# release whose dictionary it was built from, so a dictionary update also marks saved indexes stale; "3" adds the
# English analysis and the PyStemmer release.
_FOLDING = frozenset({"auto", "cjk", "fugashi", "auto-nostem", "cjk-nostem"})
#: The registered tokenizers that analyse English words (stop words out, Snowball stems).
STEMMING_TOKENIZERS = frozenset({"auto", "cjk"})


def get_tokenizer(name: str | Tokenizer = "auto") -> Tokenizer:
    """Return the tokenizer called ``name`` (case-insensitive), or ``name`` itself if it is already a callable.

    Raises:
        ValueError: unknown name; the message lists the known ones.
        TypeError: neither a string nor a callable.
    """
    if callable(name):
        return name
    if not isinstance(name, str):
        raise TypeError(f"tokenizer must be a name or a callable str -> list[str], got {name!r}")
    try:
        return TOKENIZERS[name.strip().lower()]
    except KeyError:
        raise ValueError(f"unknown tokenizer {name!r}; choose one of {sorted(TOKENIZERS)}") from None


def tokenizer_version(name: str) -> str:
    """The version of the tokens the registered tokenizer ``name`` produces, recorded with every saved index.

    ``"1"`` for a tokenizer whose output is what it was before script folding existed (``"whitespace"`` and the
    ``-nofold`` variants); ``"2+t2s-char/1+opencc-<release>"`` for a folding one without English analysis
    (``"fugashi"``, ``"auto-nostem"``, ``"cjk-nostem"``: the version ``"auto"`` and ``"cjk"`` had before it);
    ``"3+t2s-char/1+opencc-<release>+en-lucene33s-porter2/1+pystemmer-<release>"`` for ``"auto"`` and ``"cjk"``
    (:func:`~langchain_ragspine.text.english.english_analysis_version`).  An index whose recorded
    version differs from this one holds other tokens than queries now get and must be rebuilt
    (``BM25Retriever.load`` refuses it; the store rebuilds it, see :mod:`langchain_ragspine.pipeline.sources`).

    Raises:
        ValueError: unknown tokenizer name.
    """
    key = tokenizer_name(name)
    if key not in _FOLDING:
        return "1"
    from importlib.metadata import PackageNotFoundError, version

    try:
        release = version("opencc")
    except PackageNotFoundError:  # pragma: no cover - opencc is a core dependency
        release = "unknown"
    if key in STEMMING_TOKENIZERS:
        return f"3+{FOLD_VERSION}+opencc-{release}+{english_analysis_version()}"
    return f"2+{FOLD_VERSION}+opencc-{release}"


def tokenizer_name(tokenizer: str | Tokenizer) -> str | None:
    """The registered name of ``tokenizer`` (a name or one of the registered callables), else ``None``."""
    if isinstance(tokenizer, str):
        get_tokenizer(tokenizer)
        return tokenizer.strip().lower()
    for name, fn in TOKENIZERS.items():
        if fn is tokenizer:
            return name
    return None
