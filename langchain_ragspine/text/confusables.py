"""Latin look-alike letters: letters of other scripts that a reader takes for a Latin letter ``a``–``z``.

Source: ``confusables.txt`` of Unicode Technical Standard #39, *Unicode Security Mechanisms* (the data of version
13.0.0, as shipped in ``confusable-homoglyphs`` 3.3.1 — the same data ``langchain_ragspine.sensitivity`` takes its
table of the letters of ``RESTRICTED`` from).  :data:`LATIN_LOOK_ALIKES` holds, for each Latin letter, every row of
that file whose *prototype* is the letter (either case) and whose source is

* a single character,
* a letter (Unicode General Category ``L*``) outside ASCII — Cyrillic ``а о р е с х у і ј ѕ``, Greek ``Α Β Ε Ι Ο Ρ ο
  ν ι``, Armenian, Cherokee, Coptic, Lisu, Latin letters such as ``ɑ ı ſ`` … (digits and symbols are not letters
  and are not listed: ``0`` is not read as ``o`` nor ``1`` as ``l``), and
* not already that letter after NFKC and case folding (full-width and mathematical forms are left to NFKC).

The two cases of a letter share one row (the table is for case-insensitive matching).  UTS #39 gives a capital
``I`` the prototype ``l``, so its look-alikes (Greek ``Ι``, Cyrillic ``І``, ``Ӏ``, Hebrew ``ו`` …) are in row ``l``,
and those of a small ``i`` (Greek ``ι``, Cyrillic ``і``, dotless ``ı``) in row ``i``.  A row-``l`` look-alike may
stand for a capital ``I`` or a small ``l``, so :func:`latin_skeleton` reads it as :data:`I_OR_L`, a placeholder the
deny-list gate matches against either letter; row ``i`` reads as ``i``.  The ASCII letters ``i`` and ``l`` are kept
apart: folding them together made ``Al Gore`` mention ``AI`` and ``similar`` mention ``ml``.

:func:`latin_skeleton` is the UTS #39 *skeleton* idea (map each character to its prototype, then compare) restricted
to Latin targets and made case-insensitive; the deny-list gate on generated queries
(:mod:`langchain_ragspine.retrievers.deny_list`) compares skeletons.  No CJK character, kana or hangul is in the
table: Japanese and Chinese text is left as it is.
"""

from __future__ import annotations

import functools

__all__ = ["I_OR_L", "LATIN_LOOK_ALIKES", "latin_skeleton"]

#: What :func:`latin_skeleton` writes for a look-alike of a capital ``I`` / small ``l`` (row ``l`` of the table): a
#: private-use character, U+E000, that a matcher should take for either letter.
I_OR_L = "\ue000"

#: Latin letter -> the look-alike letters of other scripts (hexadecimal code points), from UTS #39 confusables.txt
#: (see the module docstring for which rows are kept).
LATIN_LOOK_ALIKES: dict[str, str] = {
    "a": (
        "0251 0391 03B1 0410 0430 13AA 15C5 A4EE 102A0 16F40 1D6A8 1D6C2 1D6E2 1D6FC 1D71C 1D736 1D756 1D770"
        " 1D790 1D7AA"
    ),
    "b": (
        "0184 0392 0412 042C 13CF 13F4 1472 15AF 15F7 A4D0 A7B4 10282 102A1 10301 1D6A9 1D6E3 1D71D 1D757"
        " 1D791"
    ),
    "c": "03F2 03F9 0421 0441 13DF 1D04 2CA4 2CA5 A4DA ABAF 102A2 10302 10415 1043D 1051C",
    "d": "0501 13A0 13E7 146F 15DE 15EA A4D2 A4D3",
    "e": "0395 0415 0435 04BD 13AC 2D39 A4F0 AB32 10286 118A6 118AE 1D6AC 1D6E6 1D720 1D75A 1D794",
    "f": "017F 03DC 0584 15B4 1E9D A4DD A798 A799 AB35 10287 102A5 10525 118A2 118C2 1D7CA",
    "g": "018D 0261 050C 0581 13C0 13F3 1D83 A4D6",
    "h": "0397 041D 04BB 0570 13BB 13C2 157C 2C8E A4E7 102CF 1D6AE 1D6E8 1D722 1D75C 1D796",
    "i": "0131 0269 026A 037A 03B9 0456 04CF 13A5 1FBE A647 AB75 118C3 1D6A4 1D6CA 1D704 1D73E 1D778 1D7B2",
    "j": "037F 03F3 0408 0458 13AB 148D A4D9 A7B2",
    "k": "039A 041A 13E6 16D5 2C94 A4D7 10518 1D6B1 1D6EB 1D725 1D75F 1D799",
    "l": (
        "0196 01C0 0399 0406 04C0 05D5 05DF 0627 07CA 13DE 14AA 16C1 2110 2111 2C92 2CD0 2D4F A4E1 A4F2 FE8D"
        " FE8E FF29 1028A 10309 1041B 10526 118A3 118B2 16F16 16F28 1D408 1D43C 1D470 1D4D8 1D540 1D574 1D5A8"
        " 1D5DC 1D610 1D644 1D678 1D6B0 1D6EA 1D724 1D75E 1D798 1EE00 1EE80"
    ),
    "m": "039C 03FA 041C 13B7 15F0 16D6 2C98 A4DF 102B0 10311 1D6B3 1D6ED 1D727 1D761 1D79B",
    "n": "039D 0578 057C 2C9A A4E0 10513 1D6B4 1D6EE 1D728 1D762 1D79C",
    "o": (
        "039F 03BF 03C3 041E 043E 0555 0585 05E1 0647 06BE 06C1 06D5 0B20 0D20 101D 10FF 12D0 1D0F 1D11 2C9E"
        " 2C9F 2D54 A4F3 AB3D FBA6 FBA7 FBA8 FBA9 FBAA FBAB FBAC FBAD FEE9 FEEA FEEB FEEC 10292 102AB 10404"
        " 1042C 104C2 104EA 10516 118B5 118C8 118D7 1D6B6 1D6D0 1D6D4 1D6F0 1D70A 1D70E 1D72A 1D744 1D748"
        " 1D764 1D77E 1D782 1D79E 1D7B8 1D7BC 1EE24 1EE64 1EE84"
    ),
    "p": (
        "03A1 03C1 03F1 0420 0440 13E2 146D 2CA2 2CA3 A4D1 10295 1D6B8 1D6D2 1D6E0 1D6F2 1D70C 1D71A 1D72C"
        " 1D746 1D754 1D766 1D780 1D78E 1D7A0 1D7BA 1D7C8"
    ),
    "q": "051B 0563 0566 2D55",
    "r": "01A6 0433 13A1 13D2 1587 1D26 2C85 A4E3 AB47 AB48 AB81 104B4 16F35",
    "s": "01BD 0405 0455 054F 13D5 13DA A4E2 A731 ABAA 10296 10420 10448 118C1 16F3A",
    "t": "03A4 0422 13A2 2CA6 A4D4 10297 102B1 10315 118BC 16F0A 1D6BB 1D6F5 1D72F 1D769 1D7A3",
    "u": (
        "028B 03C5 054D 057D 1200 144C 1D1C A4F4 A79F AB4E AB52 104CE 104F6 118B8 118D8 16F42 1D6D6 1D710"
        " 1D74A 1D784 1D7BE"
    ),
    "v": (
        "03BD 0474 0475 05D8 13D9 142F 1D20 2D38 A4E6 A6DF ABA9 1051D 11706 118A0 118C0 16F08 1D6CE 1D708"
        " 1D742 1D77C 1D7B6"
    ),
    "w": "026F 0461 051C 051D 0561 13B3 13D4 1D21 A4EA AB83 1170A 1170E 1170F",
    "x": (
        "03A7 0425 0445 1541 157D 16B7 2CAC 2D5D A4EB A7B3 10290 102B4 10317 10527 1D6BE 1D6F8 1D732 1D76C"
        " 1D7A6"
    ),
    "y": (
        "0263 028F 03A5 03B3 03D2 0423 0443 04AE 04AF 10E7 13A9 13BD 1D8C 1EFF 213D 2CA8 A4EC AB5A 102B2"
        " 118A4 118DC 16F43 1D6BC 1D6C4 1D6F6 1D6FE 1D730 1D738 1D76A 1D772 1D7A4 1D7AC"
    ),
    "z": "0396 13C3 1D22 A4DC AB93 118A9 118C4 1D6AD 1D6E7 1D721 1D75B 1D795",
}


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
