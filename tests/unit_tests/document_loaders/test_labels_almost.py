"""Issue 25 §4b–d (second trial): labels written *almost* as the loader reads them fail closed.

* Almost front matter: a document whose first lines look like metadata but are not front matter (``+++`` TOML,
  ``--- !!map``, ``%YAML 1.2`` then ``---``, ``----``, an HTML comment first, a second block after the front matter,
  a bare ``sensitivity: RESTRICTED`` first line, full-width / em-dash / en-dash fences) was indexed as a public
  body containing ``sensitivity: RESTRICTED``.  Now the file is refused, naming the line.
* Sidecar shapes: ``x.json`` holding ``{"metadata": {...}}`` (as a JSONL line's ``metadata`` object is read) and
  ``x.md.json`` beside ``x.md`` were ignored.  Now both are read (the strictest label wins).
* Look-alikes: keys ``sensitiviтy`` (Cyrillic ``т``), ``sensitiv1ty``, ``sensitivlty`` were not the label key
  although values spelled so were RESTRICTED; values with HTML tags inside (``RES<b></b>TRICTED``) and in enclosed
  letters (``🆁🅴🆂🆃🆁🅸🅲🆃🅴🅳``) were not RESTRICTED.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document

from langchain_ragspine.document_compressors import RestrictedGate
from langchain_ragspine.document_loaders import CorpusLoader, read_source_text
from langchain_ragspine.errors import LoaderError
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.sources import open_retriever, search
from langchain_ragspine.sensitivity import (
    is_restricted,
    is_restricted_label,
    is_sensitivity_key,
    look_alike_capitals,
    normalize_label,
    parse_label,
)
from tests.unit_tests.document_loaders.test_labels_unreadable import REFUSED_SHAPES, load, write

CANARY = "ZEBRACANARY7731"


# ---------------------------------------------------------------------------------- almost front matter

def test_regression_almost_front_matter_never_reaches_a_search(tmp_path: Path) -> None:
    # each shape of REFUSED_SHAPES (test_labels_unreadable.py) refuses its file, naming the line
    root = tmp_path / "c"
    for i, shape in enumerate(sorted(REFUSED_SHAPES)):
        write(root / f"d{i}.md", REFUSED_SHAPES[shape][0] + f"The secret body {CANARY}.\n")
    write(root / "pub.md", "The public body.\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        summary = ingest(root, tmp_path / "s", mode="bm25", progress=False, on_error="skip")
    assert summary.skipped == len(REFUSED_SHAPES)
    results = search(open_retriever(tmp_path / "s", mode="bm25"), f"secret body {CANARY} public", k=20)
    assert [d.metadata["source"] for d in results] == ["pub.md"]


@pytest.mark.parametrize(
    ("raw", "label", "body"),
    [
        ("---\nsensitivity: RESTRICTED\n---\n---\n\nBody after a rule.\n", "RESTRICTED", "---\n\nBody after a rule.\n"),
        ("---\ntitle: T\n---\nBody text.\n\nsensitivity: RESTRICTED later on\n", "INTERNAL", None),  # after prose
    ],
    ids=["rule", "label-after-prose"],
)
def test_front_matter_then_a_rule_or_prose_still_loads(tmp_path: Path, raw: str, label: str, body: str | None) -> None:
    path = write(tmp_path / "doc.md", raw)
    _, [doc], _ = load(tmp_path)
    assert doc.metadata["sensitivity"] == label
    assert body is None or doc.page_content == body
    assert read_source_text(path)[doc.metadata["body_offset"] :] == doc.page_content


# ---------------------------------------------------------------------------------- sidecar shapes


@pytest.mark.parametrize(
    ("name", "sidecar"),
    [
        ("x.json", {"metadata": {"sensitivity": "RESTRICTED"}}),
        ("x.json", {"title": "T", "metadata": {"Sensitivity": ["INTERNAL", "RESTRICTED"]}}),
        ("x.md.json", {"sensitivity": "RESTRICTED"}),
        ("x.md.json", {"metadata": {"sensitivity": "restricted"}}),
    ],
    ids=["nested", "nested-list", "full-name", "full-name-nested"],
)
def test_regression_sidecar_shapes_are_honoured(tmp_path: Path, name: str, sidecar: dict[str, Any]) -> None:
    write(tmp_path / "x.md", f"{CANARY} body\n")
    write(tmp_path / name, json.dumps(sidecar))
    _, [doc], _ = load(tmp_path)
    assert is_restricted(doc.metadata) and doc.metadata["sensitivity"].upper() == "RESTRICTED"
    assert "metadata" not in doc.metadata  # the nested object's keys are the document's


def test_regression_jsonl_sidecar_shapes_are_honoured(tmp_path: Path) -> None:
    write(tmp_path / "a.jsonl", '{"text": "one"}\n{"text": "two", "sensitivity": "PUBLIC"}\n')
    write(tmp_path / "a.jsonl.json", '{"metadata": {"sensitivity": "RESTRICTED", "lang": "en"}}')
    _, docs, _ = load(tmp_path)
    assert [(d.metadata["sensitivity"], d.metadata["lang"]) for d in docs] == [("RESTRICTED", "en")] * 2


def test_both_sidecar_spellings_are_read_the_strictest_label_wins(tmp_path: Path) -> None:
    write(tmp_path / "x.md", "body\n")
    write(tmp_path / "x.json", '{"sensitivity": "PUBLIC", "title": "stem", "lang": "ja"}')
    write(tmp_path / "x.md.json", '{"sensitivity": "CONFIDENTIAL", "title": "full"}')
    _, [doc], messages = load(tmp_path)
    # the label: the most restrictive; any other key: x.md.json (the more specific name) wins
    assert (doc.metadata["sensitivity"], doc.metadata["title"], doc.metadata["lang"]) == ("CONFIDENTIAL", "full", "ja")
    assert any("x.md.json" in m and "x.json" in m and "'sensitivity'" in m for m in messages), messages


def test_a_broken_full_name_sidecar_is_an_error_naming_it(tmp_path: Path) -> None:
    write(tmp_path / "x.md", "body\n")
    side = write(tmp_path / "x.md.json", '{"sensitivity": "PUBLIC",\n "title": }')
    with pytest.raises(LoaderError, match="not valid JSON") as info:
        CorpusLoader(tmp_path).load()
    assert (info.value.path, info.value.line) == (str(side), 2)
    write(tmp_path / "x.md.json", '{"title": 3.5, "doc_id": []}')
    with pytest.raises(LoaderError, match="document id") as info:
        CorpusLoader(tmp_path).load()
    assert (info.value.path, info.value.field) == (str(side), "doc_id")


@pytest.mark.parametrize(
    ("document", "side", "content", "match"),
    [
        ("x.md", "x.md.JSON", '{"sensitivity": "PUBLIC"}', "suffix in another case"),
        ("a.jsonl", "a.jsonl.json", '{"doc_id": "x"}', "cannot set doc_id"),
    ],
    ids=["full-name-in-another-case", "jsonl-full-name-doc-id"],
)
def test_the_full_name_sidecar_follows_the_rules_of_the_other(
    tmp_path: Path, document: str, side: str, content: str, match: str
) -> None:
    write(tmp_path / document, '{"text": "one"}\n')
    path = write(tmp_path / side, content)
    with pytest.raises(LoaderError, match=match) as info:
        CorpusLoader(tmp_path).load()
    assert info.value.path == str(path)


@pytest.mark.parametrize(
    "name",
    [
        "x.json ", "x.JS\u041eN", "x.\uff4a\uff53\uff4f\uff4e", "x.json\u200b", "x.md.js\u03bfn",
        # third trial: a dot or space after the suffix (Windows drops them), also with the stem in another case
        "x.json.", "x.md.json.", "x.json..", "x.json. ", "X.json.",
    ],
    ids=[
        "trailing-space", "cyrillic-o", "full-width", "zero-width-space", "full-name-greek-o",
        "trailing-dot", "full-name-trailing-dot", "two-trailing-dots", "dot-and-space", "stem-case-trailing-dot",
    ],
)  # fmt: skip
def test_regression_a_sidecar_name_spelled_with_look_alikes_is_an_error(tmp_path: Path, name: str) -> None:
    # named like the sidecar (the trial's t4_sidecar.sh: "x.json ", "x.JSОN"): its label was silently ignored
    write(tmp_path / "x.md", f"{CANARY} body\n")
    side = write(tmp_path / name, '{"sensitivity": "RESTRICTED"}')
    with pytest.raises(LoaderError, match="suffix in another case or spelling") as info:
        CorpusLoader(tmp_path).load()
    assert info.value.path == str(side)


# ---------------------------------------------------------------------------------- look-alike keys and values

def _labels_in_every_source(folder: Path, key: str, label: str) -> list[str]:
    """The ``sensitivity`` the loader gives a document labelled ``{key: label}`` in front matter (the characters
    written as they are: YAML reads each \\u escape alone), in a sidecar and in a JSONL line's ``metadata``."""
    write(folder / "fm.md", f"---\n{json.dumps(key, ensure_ascii=False)}: {json.dumps(label, ensure_ascii=False)}\n---\nb\n")
    write(folder / "sc.md", "body\n")
    write(folder / "sc.json", json.dumps({key: label}))
    write(folder / "j.jsonl", json.dumps({"text": "body", "metadata": {key: label}}) + "\n")
    _, docs, _ = load(folder)
    return [d.metadata["sensitivity"] for d in docs]


LOOK_ALIKE_KEYS = [
    "sensitivi\u0442y",  # Cyrillic т (only its capital Т is a confusable of T; upper-casing reads it)
    "sensitiv1ty",  # the digit 1 for i, as in RESTR1CTED
    "sensitivlty",  # a small l for i, as in RESTRlCTED
    "sens|tivity",
    "sensi<b></b>tivity",  # an HTML tag inside
    "\U0001f182\U0001f174\U0001f17d\U0001f182\U0001f178\U0001f183\U0001f178\U0001f185\U0001f178\U0001f183\U0001f188",
    "\ua731\u1d07\u0274\ua731\u026a\u1d1b\u026a\u1d20\u026a\u1d1b\u028f",  # Latin small capitals
    "\u24e2\u24d4\u24dd\u24e2\u24d8\u24e3\u24d8\u24e5\u24d8\u24e3\u24e8",  # circled small letters (NFKC)
]
OTHER_KEYS = ["sensitivity_note", "insensitivity", "sensitivities", "SENSITIVLTY", "sens1t1v1ty_x", "sensitiv"]


@pytest.mark.parametrize("key", LOOK_ALIKE_KEYS, ids=ascii)
def test_regression_keys_follow_the_look_alike_rules_of_values(tmp_path: Path, key: str) -> None:
    assert is_sensitivity_key(key)
    assert is_restricted({key: "RESTRICTED"})
    assert RestrictedGate().compress_documents([Document("plan", metadata={key: "RESTRICTED"})], query="p") == []
    assert _labels_in_every_source(tmp_path, key, "RESTRICTED") == ["RESTRICTED"] * 3


@pytest.mark.parametrize("key", OTHER_KEYS, ids=ascii)
def test_other_keys_stay_other_keys(key: str) -> None:
    assert not is_sensitivity_key(key)
    assert not is_restricted({key: "RESTRICTED"})


RESTRICTED_SPELLINGS = [
    "RES<b></b>TRICTED",
    "R<span>ESTRICTED</span>",
    "RES<!-- x -->TRICTED",
    "RE<br/>STRICTED",
    "&lt;b&gt;RES&lt;/b&gt;TRICTED",  # tags written as references: decoded, then removed
    "\U0001f181\U0001f174\U0001f182\U0001f183\U0001f181\U0001f178\U0001f172\U0001f183\U0001f174\U0001f173",  # 🆁…
    "\U0001f141\U0001f134\U0001f142\U0001f143\U0001f141\U0001f138\U0001f132\U0001f143\U0001f134\U0001f133",  # 🅁…
    "\U0001f161\U0001f154\U0001f162\U0001f163\U0001f161\U0001f158\U0001f152\U0001f163\U0001f154\U0001f153",  # 🅡…
    "\u24c7\u24ba\u24c8\u24c9\u24c7\u24be\u24b8\u24c9\u24ba\u24b9",  # Ⓡ…
    "\u24e1\u24d4\u24e2\u24e3\u24e1\u24d8\u24d2\u24e3\u24d4\u24d3",  # ⓡ…
    "\U0001f1f7\U0001f1ea\U0001f1f8\U0001f1f9\U0001f1f7\U0001f1ee\U0001f1e8\U0001f1f9\U0001f1ea\U0001f1e9",  # 🇷…
    "\U0001f181ESTRICTED",  # one enclosed letter among plain ones
    "\u24adestricted",  # ⒭ parenthesized (NFKC: "(r)"), then plain letters
    "\u0280\u1d07\ua731\u1d1b\u0280\u026a\u1d04\u1d1b\u1d07\u1d05",  # Latin small capitals
]


@pytest.mark.parametrize("label", RESTRICTED_SPELLINGS, ids=ascii)
def test_regression_values_with_tags_and_enclosed_letters_are_restricted(tmp_path: Path, label: str) -> None:
    assert is_restricted_label(label)
    assert normalize_label(parse_label(label)[0]) == "RESTRICTED"  # (a known label folded is kept as written)
    assert [normalize_label(x) for x in _labels_in_every_source(tmp_path, "sensitivity", label)] == ["RESTRICTED"] * 3


@pytest.mark.parametrize(
    "label",
    [
        "PUBLIC",
        "<b>PUBLIC</b>",
        "\U0001f17f\U0001f184\U0001f171\U0001f17b\U0001f178\U0001f172",  # 🅿🆄🅱🅻🅸🅲
        "INTERNAL<br/>",
        "UN\U0001f181\U0001f174\U0001f182\U0001f183\U0001f181\U0001f178\U0001f172\U0001f183\U0001f174\U0001f173",
    ],
    ids=ascii,
)
def test_other_values_with_tags_and_enclosed_letters_stay_open(label: str) -> None:
    assert not is_restricted_label(label)


def test_look_alike_capitals() -> None:
    assert look_alike_capitals("r\u0435s\u0442ricted") == "RESTRICTED"
    assert look_alike_capitals("\U0001f1f7\U0001f161\U0001f181\u24c7\u0280") == "RRRRR"
    assert look_alike_capitals("社外秘 1|") == "社外秘 1|"  # CJK kept; symbols are not letters


@pytest.mark.parametrize(
    ("name", "text", "line"),
    [
        # YAML reads each \u escape alone: a surrogate pair becomes two lone surrogates (here: 🆂 of a look-alike key)
        ("fm.md", '---\ntitle: T\n"\\ud83c\\udd82ensitivity": RESTRICTED\n---\nbody\n', 3),
        ("j.jsonl", '{"text": "t"}\n{"text": "t", "k\\ud800": 1}\n', 2),
        ("n.jsonl", '{"text": "t", "meta": {"\\udc00": 2}}\n', 1),
    ],
    ids=["front-matter-pair", "jsonl-key", "nested-key"],
)
def test_regression_a_key_with_a_lone_surrogate_is_an_error_naming_it(
    tmp_path: Path, name: str, text: str, line: int
) -> None:
    # the key went into the metadata, and the ingest failed later with a UnicodeEncodeError traceback
    path = write(tmp_path / name, text)
    with pytest.raises(LoaderError, match="lone UTF-16 surrogate") as info:
        CorpusLoader(tmp_path).load()
    assert (info.value.path, info.value.line) == (str(path), line)
    write(tmp_path / "ok.md", "fine\n")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        summary = ingest(tmp_path, tmp_path / "s", mode="bm25", progress=False, on_error="skip")
    assert summary.skipped == 1
