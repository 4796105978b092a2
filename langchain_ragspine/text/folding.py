"""Text folding: the forms in which the package compares strings (tokens, queries, terms, labels, file names).

Folding is for *comparing*, never for storing: a chunk's ``page_content`` stays a verbatim slice of its source.
Each function is one step or one fixed combination of steps, and each comparison in the package names the one it
uses, so two places that compare the same things fold them alike.

* :func:`normalize` — Unicode NFKC (Unicode Standard Annex #15): full-width ASCII to half-width (``ＡＢＣ１２３`` →
  ``ABC123``), half-width katakana to full-width (``ｶﾀｶﾅ`` → ``カタカナ``), compatibility ideographs folded.  What
  tokenizers read (:mod:`langchain_ragspine.tokenizers`), answer checks compare, filter extraction reads.
* :func:`fold` — NFKD, combining marks and invisible format characters removed (categories Mn, Me, Cf: accents,
  zero-width spaces and joiners, soft hyphens, bidi controls), NFKC, surrounding whitespace stripped; case kept.
  The sensitivity-label policy's folding (:mod:`langchain_ragspine.sensitivity`), and the base of :func:`fold_text`.
* :func:`normalize_spaces` — NFKC with every run of whitespace as one space, stripped (glossary terms; the
  support grader's verbatim check).  :func:`fold_key` — that, case-folded (glossary lookups); :func:`fold_query`
  — that, trailing punctuation ``?？。.!！`` removed (two queries that are the same query).
* :func:`fold_text` — :func:`fold`, case-folded, whitespace runs as one space (router keywords and index ids).
* :func:`simple_casefold` — one character for one character, as ``re.IGNORECASE`` compares them: offsets carry over.
* :func:`file_name_key` — NFC and case-folded: a file name as a case-insensitive, normalizing file system
  (APFS, NTFS) compares it.

Look-alike letters of other scripts (``confusables.txt`` of Unicode Technical Standard #39) are read by
:mod:`langchain_ragspine.text.confusables`; Traditional→Simplified Chinese per character by
:func:`langchain_ragspine.text.chinese.fold_to_simplified` (its table is built from OpenCC's ``t2s`` dictionary).
"""

from __future__ import annotations

import unicodedata

__all__ = [
    "file_name_key",
    "fold",
    "fold_key",
    "fold_query",
    "fold_text",
    "normalize",
    "normalize_spaces",
    "simple_casefold",
]


def normalize(text: str) -> str:
    """``text`` in Unicode NFKC form (width folding for CJK and Latin; see the module docstring).

    Example:
        >>> normalize("ＡＢＣ１２３ ｶﾀｶﾅ")
        'ABC123 カタカナ'
    """
    return unicodedata.normalize("NFKC", text)


def fold(text: str) -> str:
    """``text`` with compatibility forms, combining marks and format characters folded away, whitespace stripped.

    NFKD, then every character of Unicode category Mn, Me or Cf removed, then NFKC, then ``strip()``.  Case is
    kept (see :func:`langchain_ragspine.sensitivity.normalize_label` and :func:`fold_text`).

    Example:
        >>> fold(" Ｓｅｎｓｉ\\u200bｔｉｖｉｔｙ ")
        'Sensitivity'
    """
    decomposed = unicodedata.normalize("NFKD", text)
    kept = "".join(ch for ch in decomposed if unicodedata.category(ch) not in ("Mn", "Me", "Cf"))
    return unicodedata.normalize("NFKC", kept).strip()


def normalize_spaces(text: str) -> str:
    """:func:`normalize` (NFKC), every run of whitespace (``str.isspace``) as one space, none at either end.

    Example:
        >>> normalize_spaces(" 有給\\u3000 休暇\\n ＨＲ ")
        '有給 休暇 HR'
    """
    return " ".join(normalize(text).split())


def fold_key(text: str) -> str:
    """:func:`normalize_spaces`, then ``str.casefold()``: the key two terms are the same term by.

    Example:
        >>> fold_key("  Ｐａｉｄ   Leave ")
        'paid leave'
    """
    return normalize_spaces(text).casefold()


def fold_query(text: str) -> str:
    """The form two queries are compared in: NFKC, case-folded, runs of whitespace as one space, trailing
    punctuation (``?？。.!！``) removed.  ``"What is BM25?"`` and ``"what  is ＢＭ２５"`` fold alike.

    Example:
        >>> fold_query("What is BM25?") == fold_query("what  is ＢＭ２５")
        True
    """
    return fold_key(text).rstrip("?？。.!！ ")


def fold_text(text: str) -> str:
    """A term or a text as the routers compare them: :func:`fold` (NFKC, invisible characters removed),
    ``casefold()``, and every run of whitespace as one space.  (Unlike the deny-list's skeleton, it keeps word
    separators and letters as written, so word boundaries still mean something.)

    Example:
        >>> fold_text(" Ｈｒ\\u200b  Policy ")
        'hr policy'
    """
    return " ".join(fold(text).casefold().split())


#: Characters ``re.IGNORECASE`` treats as one letter beyond simple lower-casing (CPython's ``re._casefix``):
#: each string is one class, folded to its first character.
_CASE_CLASSES = (
    "i\u0131", "s\u017f", "\u00b5\u03bc", "\u03b9\u0345\u1fbe", "\u0390\u1fd3", "\u03b0\u1fe3", "\u03b2\u03d0",
    "\u03b5\u03f5", "\u03b8\u03d1", "\u03ba\u03f0", "\u03c0\u03d6", "\u03c1\u03f1", "\u03c3\u03c2",
    "\u03c6\u03d5", "\u0432\u1c80", "\u0434\u1c81", "\u043e\u1c82", "\u0441\u1c83", "\u0442\u1c84\u1c85",
    "\u044a\u1c86", "\u0463\u1c87", "\ua64b\u1c88", "\u1e61\u1e9b", "\ufb05\ufb06",
)
_CASE_FOLD = str.maketrans({c: cls[0] for cls in _CASE_CLASSES for c in cls[1:]})


def simple_casefold(text: str) -> str:
    """``text`` case-folded one character for one character, as ``re.IGNORECASE`` compares characters (simple
    lower case, plus the classes of CPython's ``re._casefix``: ``ı`` as ``i``, ``ſ`` as ``s``, final ``ς`` as
    ``σ`` …, and ``İ`` as ``i``): the same length as ``text``, so offsets carry over.

    Example:
        >>> simple_casefold("İSTANBUL ſoft Σίσυφος")
        'istanbul soft σίσυφοσ'
    """
    return text.replace("\u0130", "i").lower().translate(_CASE_FOLD)


def file_name_key(name: str) -> str:
    """A file name as a case-insensitive, normalizing file system compares it: NFC, case-folded.

    Example:
        >>> file_name_key("A.JSON") == file_name_key("a.json"), file_name_key("e\\u0301") == file_name_key("\\u00e9")
        (True, True)
    """
    return unicodedata.normalize("NFC", name).casefold()
