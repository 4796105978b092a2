"""The sensitivity-label policy (langchain_ragspine.sensitivity): folding, RESTRICTED words, most restrictive."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from langchain_ragspine import sensitivity as sens
from langchain_ragspine.document_compressors import restricted
from langchain_ragspine.sensitivity import (
    KNOWN_SENSITIVITIES,
    RESTRICTED_SENSITIVITY,
    fold,
    is_restricted,
    is_restricted_label,
    is_sensitivity_key,
    label_words,
    most_restrictive,
    normalize_label,
    parse_label,
)


def test_one_policy_the_gate_and_the_public_api_re_export_it():
    import langchain_ragspine

    assert restricted.is_restricted is sens.is_restricted is langchain_ragspine.is_restricted
    assert restricted.RESTRICTED_SENSITIVITY is RESTRICTED_SENSITIVITY
    assert restricted.drop_restricted is sens.drop_restricted
    assert KNOWN_SENSITIVITIES == (
        "PUBLIC",
        "INTERNAL",
        "CONFIDENTIAL",
        "RESTRICTED",
    )  # least → most restrictive


@pytest.mark.parametrize(
    "key",
    [
        "sensitivity",
        "Sensitivity",
        " SENSITIVITY ",
        "Ｓｅｎｓｉｔｉｖｉｔｙ",
        "sensi\u200btivity",
        "\ufeffsensitivity",
        "SENSİTİVİTY",
    ],
)
def test_key_spellings_fold_to_the_label_key(key):
    assert is_sensitivity_key(key)


@pytest.mark.parametrize("key", ["sensitivity_note", "sensitivities", "sens", "", 3, None])
def test_other_keys_are_not_the_label(key):
    assert not is_sensitivity_key(key)


def test_fold_and_normalize():
    assert fold(" ｒｅｓｔｒｉｃｔｅｄ\u200b\n") == "restricted"
    assert normalize_label("Restr\u200bicted") == "RESTRICTED"
    assert label_words("Restricted, internal.") == ["RESTRICTED", "INTERNAL"]
    assert label_words("RESTRICTED（社外秘）") == ["RESTRICTED"]
    assert label_words("社外秘") == []


@pytest.mark.parametrize(
    ("value", "label", "ambiguous"),
    [
        ("RESTRICTED", "RESTRICTED", False),
        ("restricted", "restricted", False),  # a clean spelling is kept as written
        ("ＰＵＢＬＩＣ", "ＰＵＢＬＩＣ", False),
        ("RESTRICTED, INTERNAL", "RESTRICTED", True),
        ("Restricted.", "RESTRICTED", True),
        ("not restricted", "RESTRICTED", True),  # fail closed: the word RESTRICTED is there
        ("PUBLIC, INTERNAL", "INTERNAL", True),
        ("Public.", "PUBLIC", True),
        ("team-a", "team-a", False),  # unknown: kept (the loader warns)
        ("UNRESTRICTED", "UNRESTRICTED", False),
        (["INTERNAL", "RESTRICTED"], "RESTRICTED", True),
        (["PUBLIC", "CONFIDENTIAL"], "CONFIDENTIAL", True),
        (["restricted"], "restricted", False),
        (["PUBLIC", "public"], "public", False),
    ],
)
def test_parse_label(value, label, ambiguous):
    got, why = parse_label(value)
    assert got == label
    assert (why is not None) == ambiguous


@pytest.mark.parametrize("value", [3, None, {"level": "RESTRICTED"}, ["PUBLIC", 3], []])
def test_parse_label_rejects_non_labels(value):
    with pytest.raises((TypeError, ValueError)):
        parse_label(value)


def test_most_restrictive():
    assert most_restrictive(["PUBLIC", "INTERNAL", "CONFIDENTIAL"]) == "CONFIDENTIAL"
    assert most_restrictive(["restricted", "PUBLIC"]) == "RESTRICTED"
    assert most_restrictive(["PUBLIC", "public"]) == "public"  # agree after folding: the last spelling
    assert most_restrictive(["PUBLIC", "team-a"]) == "RESTRICTED"  # no order known: fail closed
    assert most_restrictive(["team-a"]) == "team-a"
    with pytest.raises(ValueError):
        most_restrictive([])
    with pytest.raises(TypeError):
        most_restrictive(["PUBLIC", None])  # type: ignore[list-item]


LABELS = st.sampled_from(
    ["PUBLIC", "INTERNAL", "CONFIDENTIAL", "RESTRICTED", "restricted", "team-a", "Ｐｕｂｌｉｃ"]
)


@given(st.lists(LABELS, min_size=1, max_size=5), st.permutations(range(5)))
def test_most_restrictive_is_restricted_when_any_input_is_and_never_below_a_known_input(labels, order):
    merged = most_restrictive(labels)
    shuffled = [labels[i] for i in order if i < len(labels)]
    assert is_restricted_label(merged) == is_restricted_label(most_restrictive(shuffled))
    if any(is_restricted_label(x) for x in labels):
        assert is_restricted_label(merged)
    rank = {name: i for i, name in enumerate(KNOWN_SENSITIVITIES)}
    if normalize_label(merged) in rank:
        for x in labels:
            if normalize_label(x) in rank:
                assert rank[normalize_label(merged)] >= rank[normalize_label(x)]


def test_is_restricted_on_documents_and_mappings():
    from langchain_core.documents import Document

    assert is_restricted(Document("x", metadata={"Ｓｅｎｓｉｔｉｖｉｔｙ": "Restricted."}))
    assert is_restricted({"sensitivity": ("PUBLIC", "RESTRICTED")})
    assert not is_restricted({"sensitivity": "PUBLIC"})
    assert not is_restricted(None)
    assert is_restricted({"sensitivity": 5})  # not a readable label: fails closed


PADDING = st.sampled_from(["", " ", "\t", "\n", "\u3000", "\u200b", "\ufeff"])


#: Look-alikes of the letters of "sensitivity" (issue 25 §4d: keys follow the look-alike rules of values), written out
#: independently of the package's tables: Cyrillic, Greek, the digit 1 and | and a small l for i, Latin small
#: capitals, negative squared / negative circled letters and regional indicators.
KEY_LOOK_ALIKES = {
    "s": "\u0455\u0405\ua731\U0001f182\U0001f162\U0001f1f8",
    "e": "\u0435\u0415\u1d07\U0001f174\U0001f154\U0001f1ea",
    "n": "\u0274\u039d\U0001f17d\U0001f15d\U0001f1f3",
    "i": "\u0456\u0406\u03b91l|\u026a\U0001f178\U0001f158\U0001f1ee",
    "t": "\u0442\u0422\u03a4\u1d1b\U0001f183\U0001f163\U0001f1f9",
    "v": "\u03bd\u1d20\U0001f185\U0001f165\U0001f1fb",
    "y": "\u0443\u0423\u028f\U0001f188\U0001f168\U0001f1fe",
}


@st.composite
def key_spellings(draw: st.DrawFn, look_alikes: bool = False) -> tuple[str, bool]:
    """A spelling of "sensitivity" (case, width, padding, zero-width characters; with ``look_alikes``, look-alike
    letters and HTML tags between letters too), possibly with one letter dropped (then it is another key)."""
    letters = list("sensitivity")
    drop = draw(st.one_of(st.none(), st.integers(0, len(letters) - 1)))
    if drop is not None:
        del letters[drop]
    out = []
    for ch in letters:
        forms = [ch, ch.upper(), chr(ord(ch) - 0x61 + 0xFF41), chr(ord(ch) - 0x61 + 0xFF21)]
        ch = draw(st.sampled_from(forms + list(KEY_LOOK_ALIKES[ch] if look_alikes else "")))
        out.append(ch + draw(st.sampled_from(["", "", "", "\u200b"] + (["<b></b>"] if look_alikes else []))))
    return draw(PADDING) + "".join(out) + draw(PADDING), drop is None


@given(key_spellings())
def test_every_spelling_of_the_key_is_the_label_and_the_ascii_fast_path_agrees(case):
    key, is_key = case
    assert is_sensitivity_key(key) == is_key
    assert is_sensitivity_key(key) == (fold(key).casefold() == "sensitivity")


@given(key_spellings(look_alikes=True))
def test_every_look_alike_spelling_of_the_key_is_the_label(case):
    key, is_key = case
    assert is_sensitivity_key(key) == is_key
    assert is_restricted({key: "RESTRICTED"}) == is_key
