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

fugashi is imported lazily, on the first call that needs it.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections.abc import Callable
from typing import Any

from langchain_ragspine.text import CJK_CHAR_CLASS, CJK_CHAR_RE, normalize

Tokenizer = Callable[[str], list[str]]

_TOKEN_RE = re.compile(rf"(?P<cjk>[{CJK_CHAR_CLASS}]+)|(?P<word>[^\W_{CJK_CHAR_CLASS}]+)")


def _cjk_grams(run: str, out: list[str], *, unigrams: bool = True) -> None:
    if unigrams:
        out.extend(run)
    out.extend(run[i : i + 2] for i in range(len(run) - 1))


def cjk_tokenize(text: str) -> list[str]:
    """Tokenize with the ``"cjk"`` scheme: lower-cased words, and CJK character unigrams + adjacent bigrams.

    >>> cjk_tokenize("東京都のAPI")
    ['東', '京', '都', 'の', '東京', '京都', '都の', 'api']
    """
    out: list[str] = []
    for m in _TOKEN_RE.finditer(normalize(text).lower()):
        run = m.group("cjk")
        if run is not None:
            _cjk_grams(run, out)
        else:
            out.append(m.group("word"))
    return out


def whitespace_tokenize(text: str) -> list[str]:
    """Tokenize with ``str.split()`` after NFKC and lower-casing (LangChain's default is the bare ``str.split()``)."""
    return normalize(text).lower().split()


_local = threading.local()


def _tagger() -> Any:
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


def _is_symbol(token: str) -> bool:
    return all(unicodedata.category(ch)[0] in "PSZC" for ch in token)


def fugashi_tokenize(text: str) -> list[str]:
    """Tokenize into unidic-lite morphemes (surface forms of the NFKC, lower-cased text); symbols are dropped."""
    norm = normalize(text).lower()
    return [w.surface for w in _tagger()(norm) if w.surface and not _is_symbol(w.surface)]


def auto_tokenize(text: str) -> list[str]:
    """The default tokenizer: the ``"cjk"`` tokens, plus the fugashi morphemes that contain a CJK character.

    Character unigrams and bigrams match whatever the segmentation; the morphemes add whole Japanese words
    (``北海道``, ``小笠原諸島``) as terms of their own, which sharpens ranking at rank 1.  Measured with default
    chunking (answer recall@1): JSQuAD 0.919 (cjk 0.914, fugashi 0.900), CMRC 2018 0.907 (cjk 0.895, fugashi 0.877);
    see ``benchmarks/RESULTS.md``.  Text without CJK characters is never sent to MeCab, so English gets exactly
    the ``"cjk"`` word tokens.
    """
    norm = normalize(text).lower()
    out: list[str] = []
    has_cjk = False
    for m in _TOKEN_RE.finditer(norm):
        run = m.group("cjk")
        if run is not None:
            has_cjk = True
            _cjk_grams(run, out)
        else:
            out.append(m.group("word"))
    if has_cjk:
        out.extend(w.surface for w in _tagger()(norm) if CJK_CHAR_RE.search(w.surface))
    return out


TOKENIZERS: dict[str, Tokenizer] = {
    "auto": auto_tokenize,
    "cjk": cjk_tokenize,
    "fugashi": fugashi_tokenize,
    "whitespace": whitespace_tokenize,
}


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


def tokenizer_name(tokenizer: str | Tokenizer) -> str | None:
    """The registered name of ``tokenizer`` (a name or one of the registered callables), else ``None``."""
    if isinstance(tokenizer, str):
        get_tokenizer(tokenizer)
        return tokenizer.strip().lower()
    for name, fn in TOKENIZERS.items():
        if fn is tokenizer:
            return name
    return None
