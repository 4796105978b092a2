"""The sensitivity-label policy: one place that decides what ``RESTRICTED`` means.

Every part of the package that looks at a ``sensitivity`` label — the loader that reads it, the retrievers that keep
RESTRICTED chunks out of their indexes, ``ingest`` that keeps them out of derived files, and the RESTRICTED gate at
every exit — asks this module.  The rule is *fail closed*: when a label is ambiguous, the most restrictive reading
wins.

* **Folding.**  Keys and values are compared after :func:`fold` (from :mod:`langchain_ragspine.text.folding`):
  Unicode compatibility decomposition (NFKD), combining marks and invisible format characters removed (Unicode categories Mn, Me, Cf — a zero-width space, the
  dot of a Turkish ``İ``), recomposition (NFKC, so full-width ``ＲＥＳＴＲＩＣＴＥＤ`` is ``RESTRICTED``) and surrounding
  whitespace stripped (bidirectional controls such as U+202E are format characters, so they go too).  Keys then
  compare case-insensitively (``Ｓｅｎｓｉｔｉｖｉｔｙ``, `` sensitivity `` and ``SENSITIVITY`` all name the label), also
  written with look-alike characters (``sеnsitivity`` with Cyrillic ``е``, ``sensitiviтy``, ``sensitiv1ty``,
  ``sensitivlty``: :func:`look_alike_capitals`, the rule values are read by), HTML character references
  (``s&#101;nsitivity``) or tags, or a bidi override (``\\u202eytivitisnes``) — the same readings values get —
  or with its letters split by separators (``S-E-N-S-I-T-I-V-I-T-Y``, ``S E N S I T I V I T Y``: :func:`key_letters`);
  values are upper-cased.
* **Restricted.**  A value is restricted when the word ``RESTRICTED`` is among the ASCII-letter runs of its folded
  form: ``"restricted"``, ``"RESTRICTED, INTERNAL"``, ``"Restricted."``, ``"RESTRICTED（社外秘）"`` and a list holding
  any of these are restricted; ``"UNRESTRICTED"`` (one other word) is not.  It is also restricted when a reader
  would still see the word: its letters split by separators (``"R E S T R I C T E D"``, ``"R-E-S-T-R-I-C-T-E-D"``,
  ``"RES.TRIC.TED"``), or written with look-alike letters of other scripts (``"RЕSTRICTЕD"`` with Cyrillic ``Е``,
  Greek ``Ι``, a digit ``1`` or ``|`` for ``I``), per the confusables data of Unicode Technical Standard #39, or
  in enclosed letters (``🆁🅴🆂🆃🆁🅸🅲🆃🅴🅳``, ``🅡``, ``🇷``, read by their Unicode names; ``Ⓡ``, ``🅁`` by NFKC), or
  when it shows as RESTRICTED once decoded or displayed: HTML character references decoded (``"&#82;ESTRICTED"``,
  ``"R&#x45;STRICTED"``, ``"&amp;#82;ESTRICTED"``), HTML tags removed (``"RES<b></b>TRICTED"``) and bidirectional
  controls applied (``"\\u202eDETCIRTSER"``, an
  override that displays the letters reversed) — see :func:`is_restricted_label` for the exact rule.  Labels of
  other types are read by :func:`is_restricted_label` (bytes decoded, an Enum's value, nested lists and mappings
  searched at any depth); a value it cannot read as a label (a number, a bool, any other object) is restricted.
* **Most restrictive.**  :data:`KNOWN_SENSITIVITIES` is ordered from least to most restrictive; of several labels
  (duplicate keys, a list, sources that disagree) :func:`most_restrictive` keeps the highest, and when one of them
  is not a known label — so no order is known — the result is RESTRICTED.

Unicode normalisation forms are those of Unicode Standard Annex #15; the categories are the Unicode General
Categories; look-alike letters are those of ``confusables.txt`` in Unicode Technical Standard #39 (Unicode Security
Mechanisms).
"""

from __future__ import annotations

import enum
import functools
import html
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from langchain_ragspine.text.confusables import LATIN_LOOK_ALIKES, look_alikes
from langchain_ragspine.text.folding import fold

__all__ = [
    "KNOWN_SENSITIVITIES",
    "RESTRICTED_SENSITIVITY",
    "SENSITIVITY_KEY",
    "display_order",
    "drop_restricted",
    "drop_restricted_pairs",
    "fold",
    "is_restricted",
    "is_restricted_label",
    "is_sensitivity_key",
    "key_letters",
    "label_words",
    "look_alike_capitals",
    "most_restrictive",
    "is_blank_label",
    "normalize_label",
    "parse_label",
    "readings",
]

#: The one sensitivity label that never leaves the package (compared after :func:`normalize_label`).
RESTRICTED_SENSITIVITY = "RESTRICTED"

#: The labels the package knows, from least to most restrictive; any other label is kept but warned about.
KNOWN_SENSITIVITIES = ("PUBLIC", "INTERNAL", "CONFIDENTIAL", RESTRICTED_SENSITIVITY)

#: The metadata key of the label (any spelling that :func:`is_sensitivity_key` accepts is read as this key).
SENSITIVITY_KEY = "sensitivity"

_T = TypeVar("_T")
_S = TypeVar("_S")
_RANK = {name: i for i, name in enumerate(KNOWN_SENSITIVITIES)}
_WORD = re.compile(r"[A-Z]+")
_LIST_TYPES = (list, tuple, set, frozenset)
#: What :func:`is_restricted` walks into for a nested label key.
_CONTAINERS = (Mapping, *_LIST_TYPES)


def normalize_label(value: str) -> str:
    """A sensitivity label in canonical form: :func:`fold`, upper-cased.

    Example:
        >>> normalize_label(" ｒｅｓｔｒｉｃｔｅｄ\\u200b")
        'RESTRICTED'
    """
    return fold(value).upper()


def is_blank_label(value: Any) -> bool:
    """Whether a sensitivity key's value is no label at all: ``None`` or a blank string (after
    :func:`normalize_label`) — refused by every writer (the corpus loader, the vector store), never read as the
    default."""
    return value is None or (isinstance(value, str) and not normalize_label(value))


def is_sensitivity_key(key: Any) -> bool:
    """Whether a metadata ``key`` names the sensitivity label: a string that reads as ``"sensitivity"``.

    A key reads as ``"sensitivity"`` when, in any of its :func:`readings` (as stored, HTML character references
    decoded, HTML tags removed, bidi overrides applied), its letters read as the capitals ``SENSITIVITY`` — by the
    same look-alike rule as values (:func:`is_restricted_label`): :func:`fold` (NFKC), case ignored, and each
    look-alike character read as the Latin capital it looks like (Unicode Technical Standard #39 confusables, the
    Latin small capitals and the enclosed letters: :func:`look_alike_capitals`).  So ``Ｓｅｎｓｉｔｉｖｉｔｙ``,
    ``sеnsitivity`` (Cyrillic ``е``), ``sensitiviтy`` (Cyrillic ``т``), ``SЕNSΙTΙVΙTY`` (Cyrillic ``Е``, Greek
    ``Ι``), ``sensitiv1ty`` and ``sensitivlty`` (``1`` and ``l`` for ``i``, as in ``RESTR1CTED``),
    ``s&#101;nsitivity``, ``sensi<b></b>tivity`` and ``🆂🅴🅽🆂🅸🆃🅸🆅🅸🆃🆈`` all name the label, and so do its letters split
    by separators, as values may be (:func:`key_letters`: ``S-E-N-S-I-T-I-V-I-T-Y``, ``S E N S I T I V I T Y``,
    ``sensitivity:``, ``**Sensitivity``).  Other words stay other keys (``sensitivity_note``, ``insensitivity``).

    Example:
        >>> is_sensitivity_key("Ｓｅｎｓｉｔｉｖｉｔｙ"), is_sensitivity_key("s\\u0435nsitivity"), is_sensitivity_key("sensitiv1ty")
        (True, True, True)
        >>> is_sensitivity_key("sensitivity_note")
        False
    """
    if not isinstance(key, str):
        return False
    if key.isascii() and "&" not in key and "<" not in key:  # the common case: nothing to fold or decode
        word = key.translate(_ASCII_LOOK_ALIKES)
        if len(word) != len(SENSITIVITY_KEY):
            word = _ASCII_SEPARATORS.sub("", word)
        return word.upper() == _KEY_CAPITALS
    return _names_sensitivity(key)


_KEY_CAPITALS = SENSITIVITY_KEY.upper()
#: What is not part of a key's word in ASCII: anything but letters and digits (``-``, ``_``, ``.``, spaces, ``*``).
_ASCII_SEPARATORS = re.compile(r"[^A-Za-z0-9]+")


def key_letters(key: str) -> str:
    """The letters a reader sees in a key: :func:`look_alike_capitals`, look-alike symbols read as letters (``1`` and
    ``|`` for ``I``), then every separator removed — any character that is not a letter or a digit (punctuation,
    spaces, symbols, invisible characters): ``"S-E-N-S-I-T-I-V-I-T-Y"``, ``"s e n s i t i v i t y"``,
    ``"**Sensitivity"`` → ``"SENSITIVITY"``; ``"sensitivity_note"`` → ``"SENSITIVITYNOTE"``.

    Example:
        >>> key_letters("s-e-n-s-i-t-i-v-i-t-y"), key_letters("Sensitivity Note")
        ('SENSITIVITY', 'SENSITIVITYNOTE')
    """
    read = look_alike_capitals(key).translate(_SYMBOLS)
    return "".join(ch for ch in read if unicodedata.category(ch)[0] in "LN")


@functools.lru_cache(maxsize=4096)
def _names_sensitivity(key: str) -> bool:
    # "SENSITIVITY" holds no L: a look-alike of a capital I (which UTS #39 gives the prototype ``l``) is its I
    return any(key_letters(reading) == _KEY_CAPITALS for reading in readings(key))


#: The bidirectional formatting characters of Unicode Standard Annex #9: embeddings and overrides (U+202A–U+202E
#: with their end U+202C), isolates (U+2066–U+2069) and the marks U+200E, U+200F, U+061C.
_BIDI_CONTROLS = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
_BIDI = re.compile(f"[{_BIDI_CONTROLS}]")
_OVERRIDES = frozenset("\u202d\u202e")  # LEFT-TO-RIGHT / RIGHT-TO-LEFT OVERRIDE: the controls that reorder letters
_PUSH = frozenset("\u202a\u202b\u202d\u202e")  # embeddings and overrides, closed by U+202C
_ISOLATES = frozenset("\u2066\u2067\u2068")  # closed by U+2069
#: An HTML character reference: decimal, hexadecimal or named, its ``;`` optional (as browsers read them).
_CHARACTER_REFERENCE = re.compile(r"&(?:#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);?")
#: How many times :func:`readings` decodes references in references (``&amp;#82;`` → ``&#82;`` → ``R``).
_MAX_UNESCAPE = 4
#: An HTML tag (``<b>``, ``</span>``, ``<br/>``) or comment (``<!-- x -->``): a browser shows none of it.
_HTML_TAG = re.compile(r"<!--.*?-->|</?[A-Za-z][^<>]*>", re.S)


def readings(text: str) -> tuple[str, ...]:
    """The ways a label key or value may be shown to a reader: ``text`` as stored, first of all, then

    * with its HTML character references decoded (``html.unescape``, repeated while that changes anything, at most
      four times: ``"&amp;#82;ESTRICTED"`` → ``"&#82;ESTRICTED"`` → ``"RESTRICTED"``), and with every reference
      removed (``"RES&shy;TRICTED"``, ``"RES&bogus;TRICTED"`` → ``"RESTRICTED"``);
    * for each of those holding an HTML tag or comment, with the tags removed, as a browser shows it
      (``"RES<b></b>TRICTED"``, ``"R<span>ESTRICTED</span>"`` → ``"RESTRICTED"``);
    * for each of those holding a bidirectional override (U+202D, U+202E), the order in which it is displayed
      (:func:`display_order`).

    A caller treats a label as RESTRICTED when any reading is (fail closed).  Invisible characters (bidi controls
    included) are removed by :func:`fold`, which every reading goes through.

    Example:
        >>> readings("&#82;ESTRICTED")
        ('&#82;ESTRICTED', 'RESTRICTED', 'ESTRICTED')
        >>> readings("\\u202eDETCIRTSER\\u202c")[-1]
        'RESTRICTED'
    """
    if "&" not in text and "<" not in text and (text.isascii() or not _BIDI.search(text)):
        return (text,)
    return _readings(text)


@functools.lru_cache(maxsize=4096)
def _readings(text: str) -> tuple[str, ...]:
    found = [text]
    if "&" in text:
        decoded = text
        for _ in range(_MAX_UNESCAPE):
            step = html.unescape(decoded)
            if step == decoded:
                break
            decoded = step
            found.append(decoded)
        found.append(_CHARACTER_REFERENCE.sub("", text))
    for reading in list(found):
        if "<" in reading:
            found.append(_HTML_TAG.sub("", reading))
    for reading in list(found):
        if not _OVERRIDES.isdisjoint(reading):
            found.append(display_order(reading))
    return tuple(dict.fromkeys(found))  # distinct, in order


def display_order(text: str) -> str:
    """``text`` in the order a reader sees it under its bidi overrides, the controls removed.

    A RIGHT-TO-LEFT OVERRIDE (U+202E) shows what follows, up to its POP DIRECTIONAL FORMATTING (U+202C) — or the
    end of an enclosing isolate (U+2069), or of the text — in reverse order; a LEFT-TO-RIGHT OVERRIDE (U+202D), an
    embedding or an isolate inside it is shown as one unit, in its own order (the reordering of rule L2 of Unicode
    Standard Annex #9 for runs of Latin letters).  Other bidi controls are removed without reordering: they do not
    change the order of Latin letters.

    Example:
        >>> display_order("\\u202eDETCIRTSER\\u202c"), display_order("ab\\u202ec\\u202dde\\u202c\\u202cf")
        ('RESTRICTED', 'abdecf')
    """
    # a stack of open frames: (the control that opened it, or "" for the text itself; the units shown inside it)
    frames: list[tuple[str, list[str]]] = [("", [])]

    def close() -> None:
        control, units = frames.pop()
        shown = "".join(reversed(units)) if control == "\u202e" else "".join(units)
        frames[-1][1].append(shown)

    for ch in text:
        if ch in _PUSH or ch in _ISOLATES:
            frames.append((ch, []))
        elif ch == "\u202c":  # closes the innermost embedding or override, never across an isolate
            if len(frames) > 1 and frames[-1][0] in _PUSH:
                close()
        elif ch == "\u2069":  # closes the innermost isolate and everything opened inside it
            if any(control in _ISOLATES for control, _ in frames):
                while frames[-1][0] not in _ISOLATES:
                    close()
                close()
        elif not _BIDI.match(ch):
            frames[-1][1].append(ch)
    while len(frames) > 1:
        close()
    return "".join(frames[0][1])


def label_words(value: str) -> list[str]:
    """The runs of ASCII letters in ``normalize_label(value)``: ``"Restricted, internal."`` → ``["RESTRICTED",
    "INTERNAL"]``; ``"RESTRICTED（社外秘）"`` → ``["RESTRICTED"]``."""
    return list(_words(value))


@functools.lru_cache(maxsize=4096)
def _words(value: str) -> tuple[str, ...]:
    return tuple(_WORD.findall(normalize_label(value)))


#: The :data:`~langchain_ragspine.text.confusables.CONFUSABLES` rows read for each letter of ``RESTRICTED``: both
#: cases of the letter; for ``I``, rows ``i`` and ``l`` (UTS #39 gives a capital ``I`` the prototype ``l``) and row
#: ``I`` (``l`` itself).
_ROWS: dict[str, tuple[str, ...]] = {letter: (letter.lower(), letter) for letter in "CDERST"} | {"I": ("i", "l", "I")}


def _restricted_look_alikes(letter: str) -> str:
    """The characters Unicode's confusables data reads as ``letter`` (a letter of ``RESTRICTED``): its rows of
    :data:`~langchain_ragspine.text.confusables.CONFUSABLES` (:data:`_ROWS`; Cyrillic ``Р`` and Greek ``Ρ`` are
    look-alikes of ``P``, not of a letter of ``RESTRICTED``, so they are not read), without the letter itself and
    without the characters :func:`fold` turns into the letter or into another character of those rows (full-width
    and mathematical forms: :func:`fold` reads them)."""
    row = look_alikes(*_ROWS[letter])
    chars = set(row)
    return "".join(
        ch for ch in row
        if ch != letter and not ((folded := fold(ch)) != ch and (folded.upper() == letter or folded in chars))
    )


#: Where :func:`look_alike_capitals` looks for letters that Unicode *names* as Latin letters but that neither NFKC
#: nor the confusables data turn into one: Latin Extended-B and IPA Extensions, Phonetic Extensions (and their
#: Supplement), Latin Extended-C, -D and -E, Enclosed Alphanumerics and Enclosed Alphanumeric Supplement.
_NAMED_LETTER_BLOCKS = (
    (0x0180, 0x02AF), (0x1D00, 0x1DBF), (0x2C60, 0x2C7F), (0x2460, 0x24FF), (0xA720, 0xA7FF), (0xAB30, 0xAB6F),
    (0x1F100, 0x1F1FF),
)  # fmt: skip
#: The Unicode names read as a Latin letter (the letter is the last word): the Latin small capitals (``ʀ``, ``ɴ``,
#: ``ꜱ``), the negative circled and negative squared letters (``🅡``, ``🆁``; the circled, squared and
#: parenthesized ones NFKC already reads: ``Ⓡ``, ``🅁``, ``⒭``), and the regional indicator letters (``🇷``).
_LETTER_NAME = re.compile(
    r"(?:(?:NEGATIVE |CROSSED )*(?:CIRCLED|SQUARED|PARENTHESIZED)(?: ITALIC)? )?LATIN (?:CAPITAL|SMALL) LETTER "
    r"(?P<a>[A-Z])|LATIN LETTER SMALL CAPITAL (?P<b>[A-Z])|REGIONAL INDICATOR SYMBOL LETTER (?P<c>[A-Z])"
)


def _look_alike_tables() -> tuple[dict[int, str], dict[int, str], re.Pattern[str], tuple[str, ...]]:
    """``(letters, symbols, spelled, needed)``.

    * ``letters``: a ``str.translate`` table from each look-alike *letter* (Unicode category L*) to the ASCII capital
      it reads as: the look-alike letters of each letter of ``RESTRICTED`` (:func:`_restricted_look_alikes`), every
      row of :data:`~langchain_ragspine.text.confusables.LATIN_LOOK_ALIKES` (its row ``l``, the look-alikes UTS #39 gives a
      capital ``I``, read as ``I``: neither word the package reads — ``RESTRICTED``, ``SENSITIVITY`` — holds an
      ``L``), and every character of :data:`_NAMED_LETTER_BLOCKS` whose name :data:`_LETTER_NAME` reads as a letter
      and that :func:`fold` leaves as it is.  (It also holds the two look-alikes that are not letters but that
      :func:`fold` would change — U+02DB OGONEK and U+FFE8 HALFWIDTH FORMS LIGHT VERTICAL — since it is applied
      before folding as well as after.)
    * ``symbols``: the look-alikes that are not letters (the digit ``1``, ``|``, ``⊤``, ``℮`` …) to their letter;
      a key reads them so (:func:`is_sensitivity_key`), a value only in ``spelled``, where they may be separators.
    * ``spelled``: the pattern of ``RESTRICTED`` spelled in an upper-cased reading.  Each letter is its ASCII capital
      or one of its ``symbols``; up to three characters other than ASCII capitals may stand between two letters
      (whitespace runs count as one); and the spelling is a word of its own: no ASCII capital right before or after
      it.  A character that is both a possible separator and a look-alike (``1``, ``|``) is tried both ways.
    * ``needed``: the letters the pattern can match only as themselves (no symbol look-alike: ``D``, ``S``).
    """
    letters: dict[int, str] = {}
    symbols: dict[int, str] = {}
    others = {letter: letter for letter in _ROWS}
    for letter in sorted(_ROWS):
        for ch in _restricted_look_alikes(letter):
            if unicodedata.category(ch).startswith("L") or fold(ch) != ch:
                letters[ord(ch)] = letter
            else:
                others[letter] += ch
                symbols[ord(ch)] = letter
    for letter, points in LATIN_LOOK_ALIKES.items():
        for point in points.split():
            letters.setdefault(int(point, 16), "I" if letter == "l" else letter.upper())
    for first, last in _NAMED_LETTER_BLOCKS:
        for code in range(first, last + 1):
            m = _LETTER_NAME.fullmatch(unicodedata.name(chr(code), ""))
            if m is not None and fold(chr(code)) == chr(code):
                letters.setdefault(code, m["a"] or m["b"] or m["c"])
    gap = "[^A-Z]{0,3}"
    body = gap.join(f"[{re.escape(others[letter])}]" for letter in RESTRICTED_SENSITIVITY)
    needed = tuple(sorted(letter for letter, chars in others.items() if chars == letter))
    return letters, symbols, re.compile(f"(?<![A-Z]){body}(?![A-Z])"), needed


_LOOK_ALIKE_LETTERS, _SYMBOLS, _SPELLED_RESTRICTED, _NEEDED = _look_alike_tables()
#: The ASCII look-alikes (``l``, ``1`` and ``|`` for ``I``): the fast path of :func:`is_sensitivity_key`.
_ASCII_LOOK_ALIKES = {k: v for table in (_LOOK_ALIKE_LETTERS, _SYMBOLS) for k, v in table.items() if k < 128}


def look_alike_capitals(text: str) -> str:
    """``text`` upper-cased, with each look-alike letter read as the ASCII capital it looks like: the reading in
    which :func:`is_restricted_label` looks for ``RESTRICTED`` and :func:`is_sensitivity_key` for ``SENSITIVITY``.

    The look-alikes are the letters of the confusables data of Unicode Technical Standard #39 (Cyrillic ``е т``,
    Greek ``Ι``, Cherokee, Lisu, a small ``l`` for ``I`` …), the Latin small capitals (``ʀ ɪ ɴ ꜱ``) and the enclosed
    letters NFKC leaves as they are (negative circled ``🅡``, negative squared ``🆁``, regional indicators ``🇷``);
    :func:`fold` (NFKC) reads the rest (full-width, mathematical, circled ``Ⓡ``, squared ``🅁``).  The table is
    applied before folding, after it and after upper-casing (``т`` → ``Т`` → ``T``).  Look-alikes that are not
    letters (``1``, ``|``) are kept.

    Example:
        >>> look_alike_capitals("r\u0435s\u0442ricted"), look_alike_capitals("\U0001f181\U0001f174\U0001f182")
        ('RESTRICTED', 'RES')
    """
    table = _LOOK_ALIKE_LETTERS
    return fold(text.translate(table)).translate(table).upper().translate(table)


_SPACES = re.compile(r"\s+")


#: ``RESTRICTED`` inside a longer run of letters (``RestrictedData``, ``RESTRICTEDRESTRICTED``), except right after
#: ``UN`` (``UNRESTRICTED`` is another word).
_EMBEDDED_RESTRICTED = re.compile(rf"(?<!UN){RESTRICTED_SENSITIVITY}")


@functools.lru_cache(maxsize=4096)
def _restricted_text(value: str) -> bool:
    """Whether a label string is RESTRICTED (the string rule of :func:`is_restricted_label`): any of its
    :func:`readings` is."""
    return any(_restricted_reading(reading) for reading in readings(value))


def _restricted_reading(value: str) -> bool:
    """Whether one reading of a label string is RESTRICTED (words, separators, look-alikes)."""
    if RESTRICTED_SENSITIVITY in _words(value) or _EMBEDDED_RESTRICTED.search(normalize_label(value)):
        return True
    if value.isascii():
        # ASCII reads the same both ways but for ``l`` (as ``I``); the pattern needs the letters of _NEEDED as
        # themselves, and one word that is not RESTRICTED has nothing more to read
        upper = value.upper()
        if not all(letter in upper for letter in _NEEDED) or ("l" not in value and value.strip().isalpha()):
            return False
    # a look-alike as written (lower-case ``l`` for ``I``, Cyrillic ``г`` for ``r``), and the look-alike of its
    # capital (Greek ``ε`` → ``Ε``): labels compare case-insensitively
    read = look_alike_capitals(value)
    if not all(letter in read for letter in _NEEDED):  # every ASCII capital of the plain reading is here too
        return False
    if _EMBEDDED_RESTRICTED.search(read):
        return True
    return any(_SPELLED_RESTRICTED.search(_SPACES.sub(" ", text)) for text in (normalize_label(value), read))


def is_restricted_label(value: Any) -> bool:
    """Whether a label value is RESTRICTED.  Fails closed: a value that cannot be read as a label is RESTRICTED.

    * ``None``: not restricted (no label).
    * a string: restricted when a reader sees the word ``RESTRICTED`` in it, in any case or width
      (:func:`normalize_label`):

      - the word is among its :func:`label_words` (``"restricted"``, ``"RESTRICTED, INTERNAL"``,
        ``"restricted_note"``; not ``"PUBLIC"``, ``""`` or ``"UNRESTRICTED"``);
      - the word inside a longer run of letters (``"RestrictedData"``, ``"RESTRICTEDRESTRICTED"``,
        ``"RESTRICTEDNESS"``), unless right after ``UN`` (``"UNRESTRICTED"``, ``"unrestrictedData"`` stay open);
      - its letters are split by separators — up to three characters that are not ASCII letters between two
        letters, a whitespace run counting as one: ``"R E S T R I C T E D"``, ``"R-E-S-T-R-I-C-T-E-D"``,
        ``"R.E.S.T.R.I.C.T.E.D"``, ``"RES TRIC TED"``, also inside other text (``"U N R E S T R I C T E D"``: when
        every letter stands alone, no reader can tell where a word starts, so it fails closed);
      - it is written with look-alike characters (homoglyphs): each character that ``confusables.txt`` of Unicode
        Technical Standard #39 maps to a letter of ``RESTRICTED`` reads as that letter, as written or as its
        capital — Cyrillic ``Е е С с Т Ѕ ѕ І і г``, Greek ``Ε Τ Ι ι``, Cherokee, Lisu and other scripts, and ``l``,
        ``1`` and ``|`` for ``I`` (``"RЕSTRICTЕD"``, ``"RESTR1CTED"``), and so does a Latin small capital or an
        enclosed letter (``"ʀᴇꜱᴛʀɪᴄᴛᴇᴅ"``, ``"🆁🅴🆂🆃🆁🅸🅲🆃🅴🅳"``: :func:`look_alike_capitals`).  This is the UTS #39
        *skeleton* idea restricted to the words the package looks for;
      - it shows as RESTRICTED in another of its :func:`readings`: HTML character references decoded or removed
        (``"&#82;ESTRICTED"``, ``"R&#x45;STRICTED"``, ``"&amp;#82;ESTRICTED"``, ``"RES&shy;TRICTED"``), HTML tags
        removed (``"RES<b></b>TRICTED"``, ``"R<span>ESTRICTED</span>"``), or
        displayed under a bidi override (``"\\u202eDETCIRTSER\\u202c"`` shows ``RESTRICTED``).  Bidi controls
        and other invisible characters are removed anyway (``"RES\\u2067TRICTED"``).

      In every reading the word must stand alone: an ASCII letter right before or after it makes it another
      word, so ``"UNRESTRICTED"`` and ``"UNRЕSTRICTЕD"`` are not restricted; look-alikes of other letters (Cyrillic
      ``Р`` is a ``P``) spell other words, so ``"РЕСТ"`` and ``"PUBLIC"`` are not.
    * ``bytes`` / ``bytearray`` / ``memoryview``: decoded as UTF-8 (undecodable bytes replaced), then as a string.
    * an ``enum.Enum`` member: its ``value``, read by these same rules.
    * a list / tuple / set / frozenset: restricted when any item is, at any depth (``["x", ["restricted"]]``); an
      empty one is not.
    * a mapping: restricted when any key or value is, at any depth (``{"level": "restricted"}``); an empty one is
      not.
    * anything else — a number, a bool, any other object — and a container nested deeper than
      :data:`_MAX_DEPTH` levels (or a self-containing one), or one whose iteration raises: restricted.  Such a value
      is not a label the package knows how to read, and an ambiguous label is RESTRICTED.

    Example:
        >>> is_restricted_label(["PUBLIC", "INTERNAL"]), is_restricted_label({"level": "Restricted"})
        (False, True)
        >>> is_restricted_label(b"RESTRICTED"), is_restricted_label(3), is_restricted_label(None)
        (True, True, False)
        >>> is_restricted_label("R-E-S-T-R-I-C-T-E-D"), is_restricted_label("R\\u0415STRICT\\u0415D")
        (True, True)
    """
    if isinstance(value, str):  # the common case first
        return _restricted_text(value)
    try:
        return _is_restricted_value(value, 0)
    except Exception:  # a container that cannot be read (its iteration raised): fail closed
        return True


#: How deep :func:`is_restricted_label` reads nested containers; deeper (or self-containing) ones are RESTRICTED.
_MAX_DEPTH = 32


def _is_restricted_value(value: Any, depth: int) -> bool:
    if value is None:
        return False
    if isinstance(value, str):
        return _restricted_text(value)
    if depth >= _MAX_DEPTH:
        return True
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _is_restricted_value(bytes(value).decode("utf-8", errors="replace"), depth + 1)
    if isinstance(value, enum.Enum):
        return _is_restricted_value(value.value, depth + 1)
    if isinstance(value, Mapping):
        return any(
            _is_restricted_value(k, depth + 1) or _is_restricted_value(v, depth + 1) for k, v in value.items()
        )
    if isinstance(value, _LIST_TYPES):
        return any(_is_restricted_value(v, depth + 1) for v in value)
    return True  # a number, a bool, any other object: not a readable label


def is_restricted(metadata: Any) -> bool:
    """``True`` when ``metadata`` (a mapping, or a ``Document``) is labelled RESTRICTED: under any key that
    :func:`is_sensitivity_key` accepts, a value that :func:`is_restricted_label` accepts — at the top level or in a
    mapping or list nested at any depth (``{"metadata": {"sensitivity": "RESTRICTED"}}``; deeper than 32 levels or
    unreadable: RESTRICTED).

    This is the one test every exit of the package uses (the ``RestrictedGate``, ``search``, the graphs, the
    retrievers' index builders); it also covers documents from other loaders (``{"Sensitivity": ["INTERNAL",
    "RESTRICTED"]}``).
    """
    metadata = getattr(metadata, "metadata", metadata)  # a langchain_core Document
    if not isinstance(metadata, Mapping):
        return False
    try:
        return _has_restricted_key(metadata, 0)
    except Exception:  # a container that cannot be read (its iteration raised): fail closed
        return True


def _has_restricted_key(value: Any, depth: int) -> bool:
    """A sensitivity key with a RESTRICTED label anywhere in ``value``: at its top level or nested at any depth of
    mappings and lists (``{"metadata": {"sensitivity": "RESTRICTED"}}``, LangChain's ``Document`` JSON shape, as
    another loader may leave it; the loader reads nested label keys of files by the same rule).  Deeper than
    :data:`_MAX_DEPTH` is RESTRICTED (fail closed, also for a self-containing container)."""
    if depth >= _MAX_DEPTH:
        return True
    if isinstance(value, Mapping):
        for key, item in value.items():
            if is_sensitivity_key(key) and is_restricted_label(item):
                return True
            if isinstance(item, _CONTAINERS) and _has_restricted_key(item, depth + 1):
                return True
        return False
    if isinstance(value, _LIST_TYPES):
        return any(isinstance(item, _CONTAINERS) and _has_restricted_key(item, depth + 1)
                   for item in value)
    return False


def drop_restricted(documents: Iterable[_T]) -> list[_T]:
    """The documents (``Document`` objects, or metadata mappings) that are not RESTRICTED, in their order."""
    return [d for d in documents if not is_restricted(d)]


def drop_restricted_pairs(pairs: Iterable[tuple[_T, _S]]) -> list[tuple[_T, _S]]:
    """The ``(document, score)`` pairs whose document (a ``Document`` or a metadata mapping) is not RESTRICTED, in
    their order, each pair as given: the gate at the exits that return scores (``similarity_search_with_score``).

    Example:
        >>> drop_restricted_pairs([({"sensitivity": "RESTRICTED"}, 0.9), ({"sensitivity": "PUBLIC"}, 0.5)])
        [({'sensitivity': 'PUBLIC'}, 0.5)]
    """
    return [pair for pair in pairs if not is_restricted(pair[0])]


def most_restrictive(labels: Sequence[str]) -> str:
    """The most restrictive of several label strings (the merge of duplicate keys and disagreeing sources).

    * any restricted (:func:`is_restricted_label`): ``"RESTRICTED"``, or the last label as written when every label
      folds to the same value;
    * all fold (:func:`normalize_label`) to the same value: the last one, as written (later sources win ties);
    * all known: the highest in :data:`KNOWN_SENSITIVITIES`, in canonical spelling;
    * otherwise (an unknown label disagrees with another, so no order is known): ``"RESTRICTED"``.

    Raises:
        ValueError: ``labels`` is empty.
        TypeError: a label is not a string.

    Example:
        >>> most_restrictive(["PUBLIC", "internal"]), most_restrictive(["PUBLIC", "team-a"])
        ('INTERNAL', 'RESTRICTED')
    """
    if not labels:
        raise ValueError("most_restrictive() needs at least one label")
    for label in labels:
        if not isinstance(label, str):
            raise TypeError(f"a sensitivity label must be a str, got {type(label).__name__}: {label!r}")
    folded = {normalize_label(label) for label in labels}
    if len(folded) == 1:
        return labels[-1]
    if any(is_restricted_label(label) for label in labels):
        return RESTRICTED_SENSITIVITY
    if folded <= _RANK.keys():
        return max(folded, key=_RANK.__getitem__)
    return RESTRICTED_SENSITIVITY


def parse_label(value: str | Sequence[str]) -> tuple[str, str | None]:
    """Read one label value as written in a source: ``(label, why_ambiguous)``.

    * a string that folds to a known label (``"restricted"``, ``"ＰＵＢＬＩＣ"``): itself, not ambiguous;
    * a string naming RESTRICTED among other words or punctuation (``"RESTRICTED, INTERNAL"``, ``"Restricted."``),
      or spelling it with separators or look-alike characters (``"R-E-S-T-R-I-C-T-E-D"``, ``"RЕSTRICTЕD"``; see
      :func:`is_restricted_label`): ``"RESTRICTED"``, ambiguous;
    * a string made only of known labels and punctuation (``"PUBLIC, INTERNAL"``, ``"Public."``): the most
      restrictive of them, ambiguous;
    * any other string (``"team-a"``, ``"社外秘"``): itself, not ambiguous (it is an *unknown* label; the caller
      warns about those);
    * a list / tuple of strings: the :func:`most_restrictive` of its items' readings, ambiguous when they differ
      or an item is.

    Raises:
        ValueError: an empty list.
        TypeError: ``value`` is neither a string nor a list / tuple of strings.
    """
    if isinstance(value, str):
        if normalize_label(value) in _RANK:
            return value, None
        words = label_words(value)
        if RESTRICTED_SENSITIVITY in words:
            return RESTRICTED_SENSITIVITY, f"{value!r} names RESTRICTED among other words or punctuation"
        if is_restricted_label(value):
            return RESTRICTED_SENSITIVITY, (
                f"{value!r} reads as RESTRICTED (letters split by separators, look-alike characters, HTML "
                "character references or bidirectional controls)"
            )
        if words and set(words) <= _RANK.keys():
            return max(words, key=_RANK.__getitem__), f"{value!r} is not one label"
        return value, None
    if isinstance(value, (list, tuple)):
        if not value:
            raise ValueError("an empty list is not a sensitivity label")
        readings = [parse_label(item) for item in _strings(value)]
        label = most_restrictive([label for label, _ in readings])
        reasons = [why for _, why in readings if why]
        if len({normalize_label(label) for label, _ in readings}) > 1:
            reasons.append(f"the list {list(value)!r} holds different labels")
        return label, "; ".join(reasons) or None
    raise TypeError(f"a sensitivity label must be a string or a list of strings, got {type(value).__name__}")


def _strings(items: Sequence[Any]) -> list[str]:
    for item in items:
        if not isinstance(item, str):
            raise TypeError(
                f"a sensitivity label list may hold only strings, got {type(item).__name__}: {item!r}"
            )
    return list(items)
