"""One confusables table (``text.confusables.CONFUSABLES``), read two ways: the deny-list's Latin skeleton and the
sensitivity policy's look-alike capitals.  Issue 26 H2a merged the two tables the package had built from the same
UTS #39 data; what each reading derives from the one table is pinned to what it was before."""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata

from langchain_ragspine import sensitivity as sens
from langchain_ragspine.text.confusables import (
    CONFUSABLES,
    I_OR_L,
    LATIN_LOOK_ALIKES,
    _table,
    latin_skeleton,
    look_alikes,
)


def _readings() -> dict[str, object]:
    """Everything both readings take from the table: the Latin look-alike rows, the skeleton's translate table, the
    label policy's capitals / symbols tables and the character classes of its spelled-``RESTRICTED`` pattern."""
    classes = [sorted(set(re.sub(r"\\(.)", r"\1", part)))
               for part in sens._SPELLED_RESTRICTED.pattern.split("[^A-Z]{0,3}")]
    return {
        "latin_look_alikes": LATIN_LOOK_ALIKES,
        "skeleton": sorted(_table().items()),
        "capitals": sorted(sens._LOOK_ALIKE_LETTERS.items()),
        "symbols": sorted(sens._SYMBOLS.items()),
        "needed": list(sens._NEEDED),
        "spelled": classes,
    }


def test_both_readings_are_what_the_two_tables_gave() -> None:
    """The digest of :func:`_readings` computed at 9130972, before the merge (two tables: ``LATIN_LOOK_ALIKES`` and
    ``sensitivity._CONFUSABLES`` with its four hand-added small capitals): the one table reads exactly the same."""
    digest = hashlib.sha256(json.dumps(_readings(), sort_keys=True, ensure_ascii=False).encode()).hexdigest()
    assert digest == "b34efd40924e316c7338924acf310c201d5fa748c6ac08e0d6127cf76302d5e2"


def test_no_row_holds_what_nfkc_and_case_folding_already_make_its_letter() -> None:
    for prototype in CONFUSABLES:
        for ch in look_alikes(prototype):
            assert unicodedata.normalize("NFKC", ch).casefold() != prototype.casefold(), (prototype, hex(ord(ch)))


def test_the_latin_reading_takes_letters_only_and_both_cases() -> None:
    row_o = {chr(int(p, 16)) for p in LATIN_LOOK_ALIKES["o"].split()}
    assert "\u041e" in row_o and "\u043e" in row_o  # Cyrillic О (row O) and о (row o)
    assert "0" in look_alikes("O") and "0" not in row_o  # a digit is in the table, not in the Latin reading
    assert latin_skeleton("C0DE") == "c0de" and latin_skeleton("\u0421\u041eDE") == "code"
    assert latin_skeleton("\u0406") == I_OR_L and latin_skeleton("\u0456") == "i"  # rows l and i apart


def test_the_label_reading_takes_symbols_of_the_letters_of_restricted() -> None:
    assert sens.look_alike_capitals("R\u0415STR\u0399CT\u0395D") == "RESTRICTED"  # Cyrillic Е, Greek Ι and Ε
    assert sens.is_restricted_label("RESTR1CTED") and sens.is_restricted_label("RES\u22a4RICTED")  # 1 and ⊤
    assert sens.is_sensitivity_key("sensitiv1ty")
    # a symbol of another letter's row is no letter of RESTRICTED: 0 (row O) for D
    assert not sens.is_restricted_label("RESTRICTE0")
