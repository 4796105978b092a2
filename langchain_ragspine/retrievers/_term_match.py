"""Finding a term in a query: whole words in scripts that space their words, substrings in Japanese and Chinese.

English, French or Russian put spaces between words, so a term written in those letters must match a whole word:
``hr`` is not in ``three``, ``leave`` not in ``cleave``, ``BM25`` not in ``BM250``.  Japanese and Chinese do not
space their words, so a term written in kanji, kana or hanzi matches anywhere (``休暇`` in ``有給休暇は``).  The rule
is per edge: a term whose first (last) character is a letter or digit of a spaced script — :data:`WORD_CHARS` —
must not be preceded (followed) by one; an edge in any other script has no boundary.  ``BM25検索`` therefore needs a
boundary before ``B`` only.  This is the rule of the glossary rewriter (:mod:`~langchain_ragspine.retrievers.glossary`),
with the spaced scripts widened from ASCII to accented Latin, Greek and Cyrillic letters.

The caller folds the term and the text alike first (NFKC, case: :func:`langchain_ragspine.text.folding.fold_text`) —
this module only builds the pattern.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["WORD_CHARS", "plural_endings", "term_pattern", "terms_regex"]

#: The letters and digits of scripts that separate words with spaces, as a character-class body: ASCII letters and
#: digits, Latin-1 and Latin Extended-A/B letters (``à``, ``ß``, ``ő``), Greek and Cyrillic.
WORD_CHARS = "0-9A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u0386-\u03ff\u0400-\u04ff"
_WORD = re.compile(f"[{WORD_CHARS}]")


#: Consonants: a word ending in one of these and ``y`` makes its plural with ``-ies`` (``policy`` -> ``policies``).
_CONSONANTS = frozenset("bcdfghjklmnpqrstvwxz")


def plural_endings(word: str) -> tuple[str, tuple[str, ...]]:
    """``(stem, endings)``: ``word`` (folded: lower case) and its English plural are ``stem + e`` for ``e`` in
    ``endings``, longest first — the one plural rule of the routers and the glossary rewriter.

    A word ending in a consonant and ``y`` takes ``-ies`` (``policy``, ``policies``; not ``policys``); any other
    word takes ``-s`` or ``-es`` (``leave``, ``leaves``; ``bus``, ``buses``).

    Example:
        >>> plural_endings("policy"), plural_endings("key"), plural_endings("leave")
        (('polic', ('ies', 'y')), ('key', ('es', 's', '')), ('leave', ('es', 's', '')))
    """
    if len(word) >= 2 and word[-1] == "y" and word[-2] in _CONSONANTS:
        return word[:-1], ("ies", "y")
    return word, ("es", "s", "")


def term_pattern(term: str, *, plurals: bool = False, joiners: str = "") -> str:
    """The regular-expression source that finds ``term`` (already folded, non-empty) in folded text.

    Args:
        term: the term; a run of whitespace in it matches any run of whitespace.
        plurals: an English plural of a term ending in a spaced-script letter counts as the term
            (:func:`plural_endings`: ``leave`` finds ``leaves``, ``policy`` finds ``policies``), as in the glossary
            rewriter.
        joiners: characters that also glue words together at a bounded edge (``"-_"``: ``hr`` is not found in
            ``hr-policy``).

    Raises:
        ValueError: ``term`` is empty or whitespace.

    Example:
        >>> import re
        >>> p = re.compile(term_pattern("hr"))
        >>> bool(p.search("three steps")), bool(p.search("hrの規程")), bool(p.search("the hr policy"))
        (False, True, True)
        >>> bool(re.search(term_pattern("休暇"), "有給休暇は")), bool(re.search(term_pattern("hr", joiners="-"), "hr-x"))
        (True, False)
    """
    words = term.split()
    if not words:
        raise ValueError(f"a term is a non-empty string, got {term!r}")
    boundary = f"[{WORD_CHARS}{re.escape(joiners)}]"
    left = f"(?<!{boundary})" if _WORD.match(words[0][0]) else ""
    right = ""
    if _WORD.match(words[-1][-1]):
        if plurals and words[-1][-1].isalpha():
            stem, endings = plural_endings(words[-1])
            words[-1] = stem
            right = "(?:" + "|".join(re.escape(e) for e in endings) + ")"
        right += f"(?!{boundary})"
    body = r"\s+".join(re.escape(w) for w in words)
    return left + body + right


def terms_regex(terms: Iterable[str], *, plurals: bool = False, joiners: str = "") -> re.Pattern[str] | None:
    """One pattern finding any of ``terms`` (each as :func:`term_pattern`), the longest first where they overlap
    (``人事部`` before ``人事``); ``None`` when ``terms`` holds no non-empty term."""
    unique = sorted({t for t in terms if t.strip()}, key=lambda t: (-len(t), t))
    if not unique:
        return None
    return re.compile("|".join(term_pattern(t, plurals=plurals, joiners=joiners) for t in unique))
