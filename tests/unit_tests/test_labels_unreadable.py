"""Issue 25 §4: a label that cannot be read fails closed.  Each case here was read as the default ``INTERNAL``,
silently, before: a sidecar that is there but cannot be read (or whose suffix differs in case from ``.json``), a
``sensitivity`` key spelled with look-alike letters or HTML references, front matter that is almost front matter,
and a value that shows as RESTRICTED once HTML references are decoded or bidi controls applied."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document

from langchain_ragspine import BM25Retriever
from langchain_ragspine.document_compressors import RestrictedGate
from langchain_ragspine.document_loaders import CorpusLoader, LoaderWarning
from langchain_ragspine.sensitivity import (
    display_order,
    is_restricted,
    is_restricted_label,
    is_sensitivity_key,
    most_restrictive,
    parse_label,
    readings,
)


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        with open(path, "w", encoding="utf-8", newline="") as f:  # line ends exactly as given
            f.write(text)
    return path


def load(path: Path, **kwargs: Any) -> tuple[CorpusLoader, list[Document], list[str]]:
    loader = CorpusLoader(path, **kwargs)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        docs = loader.load()
    return loader, docs, [str(w.message) for w in record if issubclass(w.category, LoaderWarning)]


# ---------------------------------------------------------------------------- keys with look-alike letters

LOOK_ALIKE_KEYS = [
    "s\u0435nsitivity",  # Cyrillic е
    "\u0455\u0435n\u0455\u0456t\u0456v\u0456t\u0443",  # Cyrillic ѕ е ѕ і і і у
    "S\u0415NS\u0399T\u0399V\u0399TY",  # Cyrillic Е, Greek Ι
    "sens\u03b9t\u03b9v\u03b9ty",  # Greek ι
    "Sensitivit\u0443",  # Cyrillic у
    "sensiti\u03bdity",  # Greek ν
    "se\u039dsitivity",  # Greek Ν
    "s&#101;nsitivity",  # HTML references, decimal
    "&#x73;ensitivity",  # hexadecimal
    "sensitivit&yacute;",  # named: ý folds to y
    "\u202eytivitisnes\u202c",  # a right-to-left override: displays "sensitivity"
    "sensi\u2066tivity\u2069",  # an isolate inside: invisible
]
OTHER_KEYS = ["sensitivity_note", "insensitivity", "sensltlvlty", "s&#101;nsitivity_note", "\u202esensitivity_x"]


@pytest.mark.parametrize("key", LOOK_ALIKE_KEYS, ids=ascii)
def test_regression_look_alike_sensitivity_keys_name_the_label(key: str) -> None:
    assert is_sensitivity_key(key)
    assert is_restricted({key: "RESTRICTED"})
    doc = Document("the secret plan", metadata={key: "RESTRICTED"})
    assert RestrictedGate().compress_documents([doc], query="plan") == []


@pytest.mark.parametrize("key", OTHER_KEYS, ids=ascii)
def test_other_keys_stay_other_keys(key: str) -> None:
    assert not is_sensitivity_key(key)
    assert not is_restricted({key: "RESTRICTED"})


@pytest.mark.parametrize("key", ["s\u0435nsitivity", "s&#101;nsitivity", "\u202eytivitisnes"], ids=ascii)
def test_regression_look_alike_keys_in_every_source(tmp_path: Path, key: str) -> None:
    write(tmp_path / "fm.md", f"---\n{json.dumps(key)}: RESTRICTED\n---\nbody\n")
    write(tmp_path / "side.md", "body\n")
    side = write(tmp_path / "side.json", json.dumps({key: "RESTRICTED"}))
    jsonl = write(tmp_path / "lines.jsonl", json.dumps({"text": "body", key: "RESTRICTED"}) + "\n")
    _, docs, messages = load(tmp_path)
    assert {d.id: d.metadata["sensitivity"] for d in docs} == {
        "fm": "RESTRICTED",
        "lines:1": "RESTRICTED",
        "side": "RESTRICTED",
    }
    assert all(key not in d.metadata for d in docs)  # read as the one key `sensitivity`
    assert any(m.startswith(f"{tmp_path / 'fm.md'}:2:") and "is read as 'sensitivity'" for m in messages)
    assert any(m.startswith(f"{side}:") and "is read as 'sensitivity'" in m for m in messages)
    assert any(m.startswith(f"{jsonl}:1:") and "is read as 'sensitivity'" in m for m in messages)


# ---------------------------------------------------------------------------- values: HTML references, bidi

SHOWN_RESTRICTED = [
    "&#82;ESTRICTED",
    "&#x52;ESTRICTED",
    "&#X52;ESTRICTED",
    "R&#69;STRICTED",
    "&#82;&#69;&#83;&#84;&#82;&#73;&#67;&#84;&#69;&#68;",
    "&#82ESTRICTED",  # no ';': browsers still read it
    "&amp;#82;ESTRICTED",  # escaped twice
    "RES&shy;TRICTED",  # decodes to a soft hyphen, an invisible character
    "RES&#8203;TRICTED",  # a zero-width space
    "&Rscr;ESTRICTED",  # script R: NFKC folds it
    "REST&bogus;RICTED",  # removed, the rest reads RESTRICTED
    "\u202eDETCIRTSER\u202c",  # right-to-left override: displays RESTRICTED
    "\u202eDETCIRTSER",  # never closed: to the end
    "\u2067\u202eDETCIRTSER\u2069",  # inside an isolate
    "&#x202E;DETCIRTSER",  # both at once
    "RES\u202aTRIC\u202cTED",
    "\u200fRESTRICTED\u200e",
    "RES\u2066TRI\u2069CTED",
    "\u061cRESTRICTED",
    "INTERNAL, &#82;ESTRICTED",
]
SHOWN_OPEN = [
    "UN&#82;ESTRICTED",
    "\u202eDETCIRTSERNU",  # displays UNRESTRICTED
    "&#80;UBLIC",
    "P&amp;L",
    "\u202eCILBUP",
    "\u202dDETCIRTSER",  # a left-to-right override keeps the order: displays DETCIRTSER
]


@pytest.mark.parametrize("label", SHOWN_RESTRICTED, ids=ascii)
def test_regression_values_shown_as_restricted_are_restricted(label: str) -> None:
    assert is_restricted_label(label)
    assert is_restricted({"sensitivity": label}) and is_restricted({"sensitivity": ["PUBLIC", label]})
    assert is_restricted_label(parse_label(label)[0])  # "RESTRICTED", or the label as written when it folds to it
    assert most_restrictive(["PUBLIC", label]) == "RESTRICTED"
    doc = Document("the secret plan", metadata={"sensitivity": label})
    retriever = BM25Retriever.from_documents([doc, Document("a public plan", metadata={"sensitivity": "PUBLIC"})])
    assert [d.page_content for d in retriever.invoke("secret plan")] == ["a public plan"]


@pytest.mark.parametrize("label", SHOWN_OPEN, ids=ascii)
def test_values_shown_as_other_words_stay_open(label: str) -> None:
    assert not is_restricted_label(label)


def test_readings_and_display_order() -> None:
    assert readings("PUBLIC") == ("PUBLIC",)
    assert readings("&amp;#82;X") == ("&amp;#82;X", "&#82;X", "RX", "#82;X")
    assert display_order("ab\u202ecd\u202c") == "abdc"
    assert display_order("\u202eab\u202dcd\u202cef\u202c") == "fecdba"  # an LTR override inside: one unit
    assert display_order("\u202e\u202eab\u202c\u202c") == "ba"  # levels 1 and 3: reversed three times (UAX #9 L2)
    assert display_order("\u2067a\u202ebc\u2069d") == "acbd"  # the isolate's end closes the override
    assert display_order("x\u202c\u2069y") == "xy"  # stray ends are ignored


def test_regression_html_and_bidi_values_in_files(tmp_path: Path) -> None:
    write(tmp_path / "fm.md", '---\nsensitivity: "&#82;ESTRICTED"\n---\nbody\n')
    write(tmp_path / "side.md", "body\n")
    side = write(tmp_path / "side.json", json.dumps({"sensitivity": "\u202eDETCIRTSER\u202c"}))
    write(tmp_path / "lines.jsonl", json.dumps({"text": "body", "sensitivity": "R&#x45;STRICTED"}) + "\n")
    _, docs, messages = load(tmp_path)
    assert {d.id: d.metadata["sensitivity"] for d in docs} == dict.fromkeys(["fm", "lines:1", "side"], "RESTRICTED")
    assert any(m.startswith(f"{side}:1:") and "ambiguous sensitivity" in m for m in messages)
