"""English analysis of Latin-script words: Lucene's English stop words out, then the Snowball English stem.

The ``auto`` and ``cjk`` tokenizers (:mod:`langchain_ragspine.tokenizers`) pass every word token — a run of word
characters that are not CJK, already NFKC-normalised and lower-cased — through :func:`english_term`:

1. A word with a character outside the Latin blocks (U+0000–U+024F: Basic Latin, Latin-1, Latin Extended-A/B) is
   kept as it is: Cyrillic, Greek, Thai … are not English.  CJK text never reaches this module, so CJK tokens are
   unchanged.
2. A word of :data:`BM25_ENGLISH_STOPWORDS` is dropped: the 33 words of Lucene's ``EnglishAnalyzer`` default stop
   set (``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET``, also bm25s's ``"en"`` list), plus ``s``: the tokenizers split
   words at apostrophes, so a possessive ``BM25's`` leaves a lone ``s``, which Lucene's ``EnglishPossessiveFilter``
   removes.
3. Every other word becomes its Snowball English ("Porter2") stem (M. Porter, "Snowball: A language for stemming
   algorithms", 2001; https://snowballstem.org/algorithms/english/stemmer.html), computed by PyStemmer (the C
   Snowball library): ``ingesting``, ``ingests``, ``ingested`` → ``ingest``; ``changed``, ``changes`` → ``chang``;
   ``documents`` → ``document``.

So "Re-ingesting a changed document" and "re-ingest changed documents" share ``ingest``, ``chang``, ``document``
(the hyphen splits ``re`` off, on both sides).  The same chain is what Lucene's ``EnglishAnalyzer`` (stop filter,
then Porter stemmer) and bm25s with PyStemmer (``bm25s.tokenize(..., stopwords="en", stemmer=Stemmer("english"))``)
do.  The short stop list is theirs on purpose: BM25 weighs common words down by itself, and a longer list loses
words that carry a topic (``may``, ``us``, ``it``, ``won``); the graders' longer list (:data:`ENGLISH_STOPWORDS`,
used by :func:`langchain_ragspine.stopwords.content_terms`) is applied to these stems there.

Why PyStemmer rather than the pure-Python ``snowballstemmer`` (the same Snowball algorithm, the same stems): it
stems a word in ~0.4 µs instead of ~27 µs (``benchmarks/RESULTS.md``, section ``english-analysis``), which matters
for the workers of a BM25 build, each of which stems its own vocabulary.  Each distinct word is analysed once per
process and then looked up (a cache of up to :data:`CACHE_WORDS` words, emptied when full), so a corpus costs one
dictionary look-up per word plus one stem per distinct word.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

__all__ = [
    "BM25_ENGLISH_STOPWORDS",
    "CACHE_WORDS",
    "ENGLISH_ANALYSIS_VERSION",
    "ENGLISH_STOPWORDS",
    "LUCENE_ENGLISH_STOPWORDS",
    "english_analysis_version",
    "english_stem",
    "english_term",
    "english_terms",
    "is_latin_word",
]

#: Lucene's ``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET`` (the same 33 words as bm25s's ``"en"`` stop words).
LUCENE_ENGLISH_STOPWORDS = frozenset(
    """a an and are as at be but by for if in into is it no not of on or such that the their then there these
    they this to was will with""".split()
)
#: The words :func:`english_term` drops from BM25's index and queries: :data:`LUCENE_ENGLISH_STOPWORDS` and the
#: ``s`` a possessive leaves once the tokenizer splits the word at its apostrophe.
BM25_ENGLISH_STOPWORDS = LUCENE_ENGLISH_STOPWORDS | {"s"}

#: English function words, question words and auxiliaries that never count as evidence in
#: :func:`langchain_ragspine.stopwords.content_terms` (the Snowball / NLTK English list, plus contraction stems
#: such as ``don``/``t`` that word tokenizers leave, ``many``/``much``/``whose``/``also``/``may``…, and the verb of
#: "what happens …?", ``happen`` in its forms: the question frame that Japanese ``どうなる`` and Chinese ``怎么样``
#: say with question words, so a passage need not repeat it).
ENGLISH_STOPWORDS = frozenset(
    """a about above after again against all also am an and any are aren as at be because been before being below
    between both but by can cannot could couldn d did didn do does doesn doing don down during each either few for
    from further had hadn happen happened happening happens has hasn have haven having he her here hers herself him
    himself his how i if in into is
    isn it its itself just ll m many may me might more most much must mustn my myself neither no nor not now o of
    off on once only or other our ours ourselves out over own re s same shall shan she should shouldn so some such
    t than that the their theirs them themselves then there these they this those through to too under until up
    upon us ve very was wasn we were weren what whatever when where whether which while who whom whose why will
    with won would wouldn y you your yours yourself yourselves""".split()
)

#: The version of the analysis itself (stop list and rules); part of the tokenizer version of ``auto`` / ``cjk``.
ENGLISH_ANALYSIS_VERSION = "en-lucene33s-porter2/1"
#: The most distinct words kept in the per-process cache of :func:`english_term`.
CACHE_WORDS = 200_000

# word -> its term ("" = dropped); for a word that is its own stem, the word object itself
_terms: dict[str, str] = {}
_local = threading.local()
# Characters below this are Latin script (Basic Latin, Latin-1 Supplement, Latin Extended-A and -B).
_LATIN_END = "\u0250"


def _stemmer() -> Any:
    """This thread's PyStemmer English stemmer (a ``Stemmer.Stemmer`` is not thread-safe)."""
    stemmer = getattr(_local, "stemmer", None)
    if stemmer is None:
        try:
            import Stemmer
        except ImportError as e:  # pragma: no cover - PyStemmer is a core dependency
            raise ImportError(
                "English stemming needs PyStemmer: pip install PyStemmer (or use an '-nostem' tokenizer)"
            ) from e
        stemmer = Stemmer.Stemmer("english")
        stemmer.maxCacheSize = 0  # this module caches whole analyses
        _local.stemmer = stemmer
    return stemmer


def english_analysis_version() -> str:
    """``"<ENGLISH_ANALYSIS_VERSION>+pystemmer-<release>"``: what a saved index of a stemming tokenizer records,
    so that a PyStemmer update (whose Snowball release could stem a word differently) marks it stale too."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        release = version("pystemmer")
    except PackageNotFoundError:  # pragma: no cover - PyStemmer is a core dependency
        release = "unknown"
    return f"{ENGLISH_ANALYSIS_VERSION}+pystemmer-{release}"


def is_latin_word(word: str) -> bool:
    """Whether every character of ``word`` is in the Latin blocks U+0000–U+024F (``"café"`` yes, ``"москва"``
    no); the empty string is."""
    return word.isascii() or max(word) < _LATIN_END


def english_stem(word: str) -> str:
    """The Snowball English (Porter2) stem of ``word`` (lower-case): ``"ingesting"`` → ``"ingest"``,
    ``"changed"`` → ``"chang"``.  No stop-word test, no cache (see :func:`english_term`).

    Raises:
        ImportError: PyStemmer is not installed (it is a core dependency).
    """
    stem: str = _stemmer().stemWord(word)
    return stem


def _analyse(word: str) -> str:
    if not is_latin_word(word):
        return word
    if word in BM25_ENGLISH_STOPWORDS:
        return ""
    stem = english_stem(word)
    return word if stem == word else stem


def english_term(word: str) -> str:
    """The BM25 term of the word token ``word`` (NFKC, lower-cased, no CJK character; see the module docstring):
    its Snowball English stem, ``""`` when it is a stop word of :data:`BM25_ENGLISH_STOPWORDS`, ``word`` itself
    when it is not Latin script.  ``english_term("ingesting") == "ingest"``, ``english_term("the") == ""``,
    ``english_term("москва") == "москва"``.  Cached per process (:data:`CACHE_WORDS` words).

    Raises:
        ImportError: PyStemmer is not installed (it is a core dependency).
    """
    term = _terms.get(word)
    if term is None:
        term = _analyse(word)
        if len(_terms) >= CACHE_WORDS:
            _terms.clear()
        _terms[word] = term
    return term


def english_terms(words: Sequence[str]) -> list[str]:
    """``[english_term(w) for w in words]`` with one cache look-up per word and no call for a cached one: the
    form the BM25 build's posting counter uses (``""`` for each dropped word)."""
    get = _terms.get
    out = [get(w) for w in words]
    if None in out:
        for i, term in enumerate(out):
            if term is None:
                out[i] = english_term(words[i])
    return out  # type: ignore[return-value]  # no None left
