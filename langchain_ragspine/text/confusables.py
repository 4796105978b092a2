"""Look-alike characters of the Latin letters, from Unicode's confusables data: one table, read two ways.

Source: ``confusables.txt`` of Unicode Technical Standard #39, *Unicode Security Mechanisms* (the data of version
13.0.0, as shipped in ``confusable-homoglyphs`` 3.3.1).  :data:`CONFUSABLES` holds, for each ASCII letter ``p``
(``a``–``z`` and ``A``–``Z``, two rows), every single character that file gives the prototype ``p`` — letters of
other scripts (Cyrillic ``а о р е с х у і ј ѕ``, Greek ``Α Β Ε Ι Ο Ρ ο ν ι``, Armenian, Cherokee, Coptic, Lisu …),
Latin letters such as ``ɑ ı ſ``, digits (``1`` and ``0`` are rows ``l`` and ``O``) and symbols (``|``, ``⊤``, ``℮``)
— except the characters that NFKC and case folding already turn into ``p`` (full-width and most mathematical
forms).  UTS #39 gives a capital ``I`` the prototype ``l``: ``I`` and its look-alikes (Greek ``Ι``, Cyrillic ``І``,
``Ӏ``, Hebrew ``ו`` …) are in row ``l``, and row ``I`` holds only ``l`` itself.  The package reads the table two
ways:

* :data:`LATIN_LOOK_ALIKES` and :func:`latin_skeleton` (the deny-list gate on generated queries,
  :mod:`langchain_ragspine.retrievers.deny_list`): per lower-case letter, the *letters* (Unicode General Category
  ``L*``) outside ASCII of its two rows — digits and symbols are not read (``0`` is not read as ``o`` nor ``1`` as
  ``l``), and the two cases of a letter share one row (the table is for case-insensitive matching).  A row-``l``
  look-alike may stand for a capital ``I`` or a small ``l``, so :func:`latin_skeleton` reads it as :data:`I_OR_L`, a
  placeholder the deny-list gate matches against either letter; row ``i`` reads as ``i``.  The ASCII letters ``i``
  and ``l`` are kept apart: folding them together made ``Al Gore`` mention ``AI`` and ``similar`` mention ``ml``.
* the sensitivity-label policy (:func:`langchain_ragspine.sensitivity.look_alike_capitals`): the rows of the letters
  of ``RESTRICTED`` (``i`` and ``l`` for ``I``), symbols and digits included, as capitals.

:func:`latin_skeleton` is the UTS #39 *skeleton* idea (map each character to its prototype, then compare) restricted
to Latin targets and made case-insensitive; the deny-list gate compares skeletons.  No CJK character, kana or hangul
is read as a letter: Japanese and Chinese text is left as it is (the one CJK character of the table, ``〇`` in row
``O``, is a number, not a letter).
"""

from __future__ import annotations

import functools
import unicodedata

__all__ = ["CONFUSABLES", "I_OR_L", "LATIN_LOOK_ALIKES", "latin_skeleton", "look_alikes"]

#: What :func:`latin_skeleton` writes for a look-alike of a capital ``I`` / small ``l`` (row ``l`` of the table): a
#: private-use character, U+E000, that a matcher should take for either letter.
I_OR_L = "\ue000"

#: ASCII letter (the UTS #39 prototype, case kept) -> the characters confusables.txt reads as it (hexadecimal code
#: points, ascending), those NFKC and case folding turn into the letter left out (module docstring).
CONFUSABLES: dict[str, str] = {
    "a": "0251 03B1 0430 237A 1D6C2 1D6FC 1D736 1D770 1D7AA",
    "A": "0391 0410 13AA 15C5 A4EE 102A0 16F40 1D6A8 1D6E2 1D71C 1D756 1D790",
    "b": "0184 042C 13CF 1472 15AF",
    "B": "0392 0412 13F4 15F7 A4D0 A7B4 10282 102A1 10301 1D6A9 1D6E3 1D71D 1D757 1D791",
    "c": "03F2 0441 1D04 2CA5 ABAF 1043D",
    "C": "03F9 0421 13DF 2CA4 A4DA 102A2 10302 10415 1051C 118E9 118F2 1F74C",
    "d": "0501 13E7 146F A4D2",
    "D": "13A0 15DE 15EA A4D3",
    "e": "0435 04BD 212E AB32",
    "E": "0395 0415 13AC 22FF 2D39 A4F0 10286 118A6 118AE 1D6AC 1D6E6 1D720 1D75A 1D794",
    "f": "017F 0584 1E9D A799 AB35",
    "F": "03DC 15B4 A4DD A798 10287 102A5 10525 118A2 118C2 1D213 1D7CA",
    "g": "018D 0261 0581 1D83",
    "G": "050C 13C0 13F3 A4D6",
    "h": "04BB 0570 13C2",
    "H": "0397 041D 13BB 157C 2C8E A4E7 102CF 1D6AE 1D6E8 1D722 1D75C 1D796",
    "i": (
        "0131 0269 026A 02DB 037A 03B9 0456 04CF 13A5 1FBE 2373 A647 AB75 118C3 1D6A4 1D6CA 1D704 1D73E"
        " 1D778 1D7B2"
    ),
    "I": "006C",
    "j": "03F3 0458",
    "J": "037F 0408 13AB 148D A4D9 A7B2",
    "K": "039A 041A 13E6 16D5 2C94 A4D7 10518 1D6B1 1D6EB 1D725 1D75F 1D799",
    "l": (
        "0031 0049 007C 0196 01C0 0399 0406 04C0 05C0 05D5 05DF 0627 0661 06F1 07CA 16C1 2110 2111 2160"
        " 2223 23FD 2C92 2D4F A4F2 FE8D FE8E FF29 FFE8 1028A 10309 10320 16F28 1D408 1D43C 1D470 1D4D8"
        " 1D540 1D574 1D5A8 1D5DC 1D610 1D644 1D678 1D6B0 1D6EA 1D724 1D75E 1D798 1D7CF 1D7D9 1D7E3 1D7ED"
        " 1D7F7 1E8C7 1EE00 1EE80 1FBF1"
    ),
    "L": "13DE 14AA 2CD0 A4E1 1041B 10526 118A3 118B2 16F16 1D22A",
    "M": "039C 03FA 041C 13B7 15F0 16D6 2C98 A4DF 102B0 10311 1D6B3 1D6ED 1D727 1D761 1D79B",
    "n": "0578 057C",
    "N": "039D 2C9A A4E0 10513 1D6B4 1D6EE 1D728 1D762 1D79C",
    "o": (
        "03BF 03C3 043E 0585 05E1 0647 0665 06BE 06C1 06D5 06F5 0966 0A66 0AE6 0BE6 0C02 0C66 0C82 0CE6"
        " 0D02 0D20 0D66 0D82 0E50 0ED0 101D 1040 10FF 1D0F 1D11 2C9F AB3D FBA6 FBA7 FBA8 FBA9 FBAA FBAB"
        " FBAC FBAD FEE9 FEEA FEEB FEEC 1042C 104EA 118C8 118D7 1D6D0 1D6D4 1D70A 1D70E 1D744 1D748 1D77E"
        " 1D782 1D7B8 1D7BC 1EE24 1EE64 1EE84"
    ),
    "O": (
        "0030 039F 041E 0555 07C0 09E6 0B20 0B66 12D0 2C9E 2D54 3007 A4F3 10292 102AB 10404 104C2 10516"
        " 114D0 118B5 118E0 1D6B6 1D6F0 1D72A 1D764 1D79E 1D7CE 1D7D8 1D7E2 1D7EC 1D7F6 1FBF0"
    ),
    "p": "03C1 03F1 0440 2374 2CA3 1D6D2 1D6E0 1D70C 1D71A 1D746 1D754 1D780 1D78E 1D7BA 1D7C8",
    "P": "03A1 0420 13E2 146D 2CA2 A4D1 10295 1D6B8 1D6F2 1D72C 1D766 1D7A0",
    "q": "051B 0563 0566",
    "Q": "2D55",
    "r": "0433 1D26 2C85 AB47 AB48 AB81",
    "R": "01A6 13A1 13D2 1587 A4E3 104B4 16F35 1D216",
    "s": "01BD 0455 A731 ABAA 10448 118C1",
    "S": "0405 054F 13D5 13DA A4E2 10296 10420 16F3A",
    "T": (
        "03A4 0422 13A2 22A4 27D9 2CA6 A4D4 10297 102B1 10315 118BC 16F0A 1D6BB 1D6F5 1D72F 1D769 1D7A3"
        " 1F768"
    ),
    "u": "028B 03C5 057D 1D1C A79F AB4E AB52 104F6 118D8 1D6D6 1D710 1D74A 1D784 1D7BE",
    "U": "054D 1200 144C 222A 22C3 A4F4 104CE 118B8 16F42",
    "v": "03BD 0475 05D8 1D20 2228 22C1 ABA9 11706 118C0 1D6CE 1D708 1D742 1D77C 1D7B6",
    "V": "0474 0667 06F7 13D9 142F 2D38 A4E6 A6DF 1051D 118A0 16F08 1D20D",
    "w": "026F 0461 051D 0561 1D21 AB83 1170A 1170E 1170F",
    "W": "051C 13B3 13D4 A4EA 118E6 118EF",
    "x": "00D7 0445 1541 157D 166E 292B 292C 2A2F",
    "X": (
        "03A7 0425 166D 16B7 2573 2CAC 2D5D A4EB A7B3 10290 102B4 10317 10322 10527 118EC 1D6BE 1D6F8"
        " 1D732 1D76C 1D7A6"
    ),
    "y": "0263 028F 03B3 0443 04AF 10E7 1D8C 1EFF 213D AB5A 118DC 1D6C4 1D6FE 1D738 1D772 1D7AC",
    "Y": "03A5 03D2 0423 04AE 13A9 13BD 2CA8 A4EC 102B2 118A4 16F43 1D6BC 1D6F6 1D730 1D76A 1D7A4",
    "z": "1D22 AB93 118C4",
    "Z": "0396 13C3 A4DC 102F5 118A9 118E5 1D6AD 1D6E7 1D721 1D75B 1D795",
}


def look_alikes(*prototypes: str) -> list[str]:
    """The characters of the :data:`CONFUSABLES` rows of ``prototypes``, in row order then code point order.

    Example:
        >>> look_alikes("I"), look_alikes("e")
        (['l'], ['е', 'ҽ', '℮', 'ꬲ'])
    """
    return [chr(int(point, 16)) for p in prototypes for point in CONFUSABLES.get(p, "").split()]


def _latin_row(letter: str) -> str:
    """The look-alike letters of ``letter`` (lower case): the letters outside ASCII of its two rows, ascending."""
    chars = {ch for ch in look_alikes(letter, letter.upper()) if not ch.isascii() and unicodedata.category(ch)[0] == "L"}
    return " ".join(f"{ord(ch):04X}" for ch in sorted(chars))


#: Latin letter -> the look-alike *letters* of other scripts (hexadecimal code points), both cases' rows of
#: :data:`CONFUSABLES` read as one (see the module docstring for which characters are kept).
LATIN_LOOK_ALIKES: dict[str, str] = {letter: _latin_row(letter) for letter in "abcdefghijklmnopqrstuvwxyz"}


@functools.cache
def _table() -> dict[int, str]:
    """The ``str.translate`` table of :func:`latin_skeleton`: every look-alike to its letter, row ``l`` to
    :data:`I_OR_L`."""
    out: dict[int, str] = {}
    for letter, points in LATIN_LOOK_ALIKES.items():
        target = I_OR_L if letter == "l" else letter
        for point in points.split():
            out[int(point, 16)] = target
    return out


def latin_skeleton(text: str) -> str:
    """``text`` case-folded with each Latin look-alike letter read as the Latin letter it looks like.

    The table (:data:`LATIN_LOOK_ALIKES`) is applied, then ``str.casefold()``, then the table again (a look-alike
    whose small form is another row's, such as Greek ``Ι`` → ``ι``, is read by its capital's row first).  A
    look-alike of a capital ``I`` or small ``l`` becomes :data:`I_OR_L`; ASCII ``i`` and ``l`` stay apart.  Expects
    NFKC text (full-width forms already folded); characters not in the table are kept as they are (case-folded).

    Example:
        >>> latin_skeleton("Project \u041erion"), latin_skeleton("ΡRΟJΕCΤ"), latin_skeleton("梅雨")
        ('project orion', 'project', '梅雨')
        >>> latin_skeleton("OR\u04c0ON") == "or" + I_OR_L + "on", latin_skeleton("Al")
        (True, 'al')
    """
    table = _table()
    return text.translate(table).casefold().translate(table)
