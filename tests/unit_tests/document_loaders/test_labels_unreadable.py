"""Issue 25 §4: a label that cannot be read fails closed.  Each case here was read as the default ``INTERNAL``,
silently, before: a sidecar that is there but cannot be read (or whose suffix differs in case from ``.json``), a
``sensitivity`` key spelled with look-alike letters or HTML references, front matter that is almost front matter,
and a value that shows as RESTRICTED once HTML references are decoded or bidi controls applied."""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document

from langchain_ragspine import BM25Retriever
from langchain_ragspine.document_compressors import RestrictedGate
from langchain_ragspine.document_loaders import CorpusLoader, LoaderWarning, read_source_text
from langchain_ragspine.errors import LoaderError
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.sources import open_retriever, search
from langchain_ragspine.sensitivity import (
    display_order,
    is_restricted,
    is_restricted_label,
    is_sensitivity_key,
    most_restrictive,
    parse_label,
    readings,
)
from langchain_ragspine.text_splitters import ParagraphTextSplitter


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
    "sensltlvlty",  # a small l for each i, as values read "RESTRlCTED" (issue 25 §4d: keys follow the value rules)
    # issue 25 (trial c): letters split by separators, as values already accept (R-E-S-T-R-I-C-T-E-D)
    "S-E-N-S-I-T-I-V-I-T-Y",
    "S E N S I T I V I T Y",
    "s-e-n-s-i-t-i-v-i-t-y",
    "sensi.tivity",
    "**Sensitivity",  # Markdown bold around it
    "s-\u0435-n-s-i-t-i-v-i-t-y",  # separators and a Cyrillic е at once
]
OTHER_KEYS = [
    "sensitivity_note",
    "insensitivity",
    "s&#101;nsitivity_note",
    "\u202esensitivity_x",
    "SENSITIVLTY",
    "sensitivity-2",
    "s-e-n-s-i-t-i-v-i-t-y-note",
]


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


@pytest.mark.parametrize("key", ["S-E-N-S-I-T-I-V-I-T-Y", "S E N S I T I V I T Y", "s-e-n-s-i-t-i-v-i-t-y"])
def test_regression_keys_with_separators_in_every_source(tmp_path: Path, key: str) -> None:
    write(tmp_path / "fm.md", f"---\n{key}: RESTRICTED\n---\nbody\n")
    write(tmp_path / "side.md", "body\n")
    write(tmp_path / "side.json", json.dumps({key: "RESTRICTED"}))
    write(tmp_path / "lines.jsonl", json.dumps({"text": "body", key: "RESTRICTED"}) + "\n")
    _, docs, messages = load(tmp_path)
    assert {d.id: d.metadata["sensitivity"] for d in docs} == dict.fromkeys(["fm", "lines:1", "side"], "RESTRICTED")
    assert sum("is read as 'sensitivity'" in m for m in messages) == 3


# ---------------------------------------------------------------------------- labels nested at any depth, or empty

NESTED_LABELS = {
    "front_matter_nested": {"x.md": "---\nmeta:\n  sensitivity: RESTRICTED\n---\nbody\n"},
    "front_matter_deep_list": {"x.md": "---\na:\n  - b:\n      Sensitivity: [INTERNAL, RESTRICTED]\n---\nbody\n"},
    "front_matter_nested_spaced_key": {"x.md": "---\nmeta:\n  S E N S I T I V I T Y: RESTRICTED\n---\nbody\n"},
    "sidecar_metadata_metadata": {
        "x.md": "body\n",
        "x.json": json.dumps({"metadata": {"metadata": {"sensitivity": "RESTRICTED"}}}),
    },
    "sidecar_nested": {"x.md": "body\n", "x.json": json.dumps({"a": [{"b": {"sensitivity": "RESTRICTED"}}]})},
    "jsonl_nested": {"x.jsonl": json.dumps({"text": "body", "extra": {"sensitivity": "RESTRICTED"}}) + "\n"},
    "nested_stricter_than_top": {
        "x.md": "---\nsensitivity: PUBLIC\nmeta:\n  sensitivity: RESTRICTED\n---\nbody\n",
    },
}


def _dumpd_sidecar() -> dict[str, str]:
    from langchain_core.load import dumpd

    serialised = dumpd(Document(page_content="", metadata={"sensitivity": "RESTRICTED"}))
    return {"x.md": "body\n", "x.json": json.dumps(serialised)}


@pytest.mark.parametrize("case", [*NESTED_LABELS, "sidecar_langchain_dumpd"])
def test_regression_a_label_nested_at_any_depth_sets_the_label(tmp_path: Path, case: str) -> None:
    files = _dumpd_sidecar() if case == "sidecar_langchain_dumpd" else NESTED_LABELS[case]
    for name, text in files.items():
        write(tmp_path / name, text)
    _, docs, messages = load(tmp_path)
    assert [d.metadata["sensitivity"] for d in docs] == ["RESTRICTED"]
    # the warning names the file, its line and where the key sits
    assert any(str(tmp_path) in m and "' is read as 'sensitivity'" in m for m in messages)


def test_a_nested_label_names_its_path_and_line(tmp_path: Path) -> None:
    write(tmp_path / "x.md", "---\ntitle: t\nmeta:\n  sensitivity: RESTRICTED\n---\nbody\n")
    _, docs, messages = load(tmp_path)
    assert docs[0].metadata["sensitivity"] == "RESTRICTED"
    assert f"{tmp_path / 'x.md'}:4: key 'meta.sensitivity' is read as 'sensitivity'" in messages


EMPTY_LABELS = {
    "front_matter_null": ("x.md", "---\nsensitivity:\n---\nbody\n", 2),
    "front_matter_blank_string": ("x.md", "---\nsensitivity: '  '\n---\nbody\n", 2),
    "front_matter_nested_null": ("x.md", "---\nmeta:\n  sensitivity: ~\n---\nbody\n", 3),
    "sidecar_null": ("x.json", json.dumps({"sensitivity": None}), 1),
    "sidecar_empty_string": ("x.json", json.dumps({"sensitivity": ""}), 1),
    "jsonl_null": ("x.jsonl", json.dumps({"text": "body", "sensitivity": None}) + "\n", 1),
}


@pytest.mark.parametrize("case", EMPTY_LABELS)
def test_regression_an_empty_label_is_refused_naming_file_and_line(tmp_path: Path, case: str) -> None:
    name, text, line = EMPTY_LABELS[case]
    if name == "x.json":
        write(tmp_path / "x.md", "body\n")
    at = write(tmp_path / name, text)
    with pytest.raises(LoaderError, match="has no label") as info:
        load(tmp_path)
    assert (info.value.path, info.value.line, info.value.field) == (str(at), line, "sensitivity")
    loader, docs, _ = load(tmp_path, on_error="skip")
    assert docs == [] and len(loader.stats.skipped) == 1


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


# ---------------------------------------------------------------------------- sidecars that cannot be read


def _dangling(side: Path) -> None:
    os.symlink(side.parent / "nowhere.json", side)


def _loop(side: Path) -> None:
    os.symlink(side.name, side)


def _folder(side: Path) -> None:
    side.mkdir()


def _fifo(side: Path) -> None:
    os.mkfifo(side)  # opening it for reading would block: the loader must never do that


def _link_to_folder(side: Path) -> None:
    (side.parent / "real").mkdir()
    os.symlink("real", side)


def _bad_utf8(side: Path) -> None:
    write(side, b'{"sensitivity": "RESTRICTED", "note": "\xff"}')


SIDECAR_CASES = {
    "dangling_symlink": (_dangling, "symlink to nothing"),
    "symlink_loop": (_loop, "cannot be read"),
    "folder": (_folder, "is a folder"),
    "fifo": (_fifo, "not a regular file"),
    "symlink_to_folder": (_link_to_folder, "is a folder"),
    "invalid_utf8": (_bad_utf8, "invalid utf-8"),
}


@pytest.fixture(params=["md", "jsonl"])
def document(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    root = tmp_path / "c"
    write(root / "good.md", "# Good\nfine\n")
    if request.param == "md":
        return write(root / "doc.md", "the secret body\n")
    return write(root / "doc.jsonl", '{"text": "the secret body"}\n')


@pytest.mark.parametrize("case", sorted(SIDECAR_CASES))
def test_regression_unreadable_sidecar_is_an_error_naming_it(document: Path, case: str) -> None:
    make, fragment = SIDECAR_CASES[case]
    side = document.with_suffix(".json")
    make(side)
    with pytest.raises(LoaderError) as info:
        CorpusLoader(document.parent).load()
    assert info.value.path == str(side)
    assert str(side) in str(info.value) and fragment in str(info.value).lower()


@pytest.mark.parametrize("case", sorted(SIDECAR_CASES))
def test_regression_unreadable_sidecar_skips_its_document(document: Path, case: str) -> None:
    make, fragment = SIDECAR_CASES[case]
    side = document.with_suffix(".json")
    make(side)
    loader, docs, messages = load(document.parent, on_error="skip")
    assert [d.id for d in docs] == ["good"]
    assert len(loader.stats.skipped) == 1 and loader.stats.skipped[0][0] == str(side)
    assert fragment in loader.stats.skipped[0][2].lower()
    assert [m for m in messages if str(side) in m and "(skipped)" in m]


@pytest.mark.parametrize("name", ["doc.JSON", "doc.Json", "doc.jSoN"])
def test_regression_sidecar_suffix_in_another_case_is_an_error(document: Path, name: str) -> None:
    odd = write(document.with_name(name), '{"sensitivity": "RESTRICTED"}')
    with pytest.raises(LoaderError, match="another case") as info:
        CorpusLoader(document.parent).load()
    assert info.value.path == str(odd)
    loader, docs, _ = load(document.parent, on_error="skip")
    assert [d.id for d in docs] == ["good"] and loader.stats.skipped[0][0] == str(odd)


def test_regression_both_spellings_of_a_sidecar_are_ambiguous(tmp_path: Path) -> None:
    # two files only where names are case-sensitive; on a case-insensitive file system this is the one-file case
    write(tmp_path / "doc.md", "body\n")
    write(tmp_path / "doc.json", '{"sensitivity": "PUBLIC"}')
    write(tmp_path / "doc.JSON", '{"sensitivity": "RESTRICTED"}')
    names = sorted(os.listdir(tmp_path))
    with pytest.raises(LoaderError, match="beside doc.json") as info:
        CorpusLoader(tmp_path).load()
    if "doc.JSON" in names and "doc.json" in names:
        assert info.value.path == str(tmp_path / "doc.JSON")


def test_a_sidecar_named_exactly_and_other_json_files_still_load(tmp_path: Path) -> None:
    write(tmp_path / "doc.md", "body\n")
    write(tmp_path / "doc.json", '{"sensitivity": "PUBLIC", "title": "T"}')
    write(tmp_path / "other.JSON", "{}")  # the sidecar of no document
    write(tmp_path / "notes.md.JSON", "{}")  # the sidecar of no document either (doc.md.JSON would be refused)
    os.symlink("doc.json", tmp_path / "link.json")
    write(tmp_path / "link.md", "linked\n")
    _, docs, _ = load(tmp_path)
    assert {d.id: (d.metadata["sensitivity"], d.metadata["title"]) for d in docs} == {
        "doc": ("PUBLIC", "T"),
        "link": ("PUBLIC", "T"),  # a symlink to a readable sidecar is read
    }


@pytest.mark.parametrize("error", [PermissionError(13, "Permission denied"), OSError(5, "Input/output error")])
def test_regression_sidecar_that_cannot_be_opened(
    document: Path, error: OSError, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the tests run as root, whom chmod 000 does not stop: the failure is injected where the file is read
    side = write(document.with_suffix(".json"), '{"sensitivity": "RESTRICTED"}')
    real = Path.read_bytes

    def read_bytes(self: Path) -> bytes:
        if self == side:
            raise error
        return real(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    with pytest.raises(LoaderError, match=error.strerror) as info:
        CorpusLoader(document.parent).load()
    assert info.value.path == str(side)
    loader, docs, _ = load(document.parent, on_error="skip")
    assert [d.id for d in docs] == ["good"] and loader.stats.skipped[0][0] == str(side)


def test_regression_sidecar_whose_status_cannot_be_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "doc.md", "body\n")
    side = write(tmp_path / "doc.json", '{"sensitivity": "RESTRICTED"}')
    real = os.stat

    def stat(path: Any, *args: Any, **kwargs: Any) -> os.stat_result:
        if os.fspath(path) == str(side):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    with pytest.raises(LoaderError, match="Permission denied") as info:
        CorpusLoader(tmp_path).load()
    assert info.value.path == str(side)


def test_regression_ingest_on_error_skip_reports_the_unreadable_sidecar(tmp_path: Path) -> None:
    root = tmp_path / "c"
    write(root / "good.md", "a public good document\n")
    write(root / "doc.md", "zqsecretmarker body\n")
    os.symlink("missing.json", root / "doc.json")
    with pytest.raises(LoaderError, match="symlink to nothing"):
        ingest(root, tmp_path / "S", embedding="hashing")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LoaderWarning)
        summary = ingest(root, tmp_path / "S", embedding="hashing", on_error="skip")
    assert summary.skipped == 1 and "1 skipped" in summary.line()
    assert summary.documents == 1
    found = search(open_retriever(tmp_path / "S", k=5), "zqsecretmarker", k=5)
    assert [d.metadata["doc_id"] for d in found] == ["good"]  # the document of the broken sidecar is not stored


# ---------------------------------------------------------------------------- almost front matter

#: Read as front matter: the fence is on the first line, with whitespace or invisible characters around it.
FRONT_MATTER_SHAPES = {
    "space_before": " ---\nsensitivity: RESTRICTED\n---\n",
    "tab_before": "\t---\nsensitivity: RESTRICTED\n---\n",
    "nbsp_after": "---\u00a0\nsensitivity: RESTRICTED\n---\u00a0\n",
    "comment_after": "--- # metadata\nsensitivity: RESTRICTED\n--- # end\n",
    "comment_no_space": "---# metadata\nsensitivity: RESTRICTED\n...\n",
    "cr_line_ends": "---\rsensitivity: RESTRICTED\r---\r",
    "crlf_line_ends": "---\r\nsensitivity: RESTRICTED\r\n---\r\n",
    "mixed_line_ends": "---\r\nsensitivity: RESTRICTED\r---\n",
    "line_separator": "---\u2028sensitivity: RESTRICTED\u2028---\u2028",
    "next_line": "---\x85sensitivity: RESTRICTED\x85---\x85",
    "zero_width_before": "\u200b---\nsensitivity: RESTRICTED\n---\n",
    "word_joiner_before": "\u2060---\nsensitivity: RESTRICTED\n---\n",
    "second_bom": "\ufeff\ufeff---\nsensitivity: RESTRICTED\n---\n",
    "bidi_mark_before": "\u200f---\u200e\nsensitivity: RESTRICTED\n---\n",
    "zero_width_in_fence": "-\u200b--\nsensitivity: RESTRICTED\n-\u200d--\n",
}
BODY = "The secret body.\n\nIts second paragraph, long enough to be split.\n"


@pytest.mark.parametrize("shape", sorted(FRONT_MATTER_SHAPES))
@pytest.mark.parametrize("bom", ["", "\ufeff"])
def test_regression_almost_front_matter_is_front_matter(tmp_path: Path, shape: str, bom: str) -> None:
    front = FRONT_MATTER_SHAPES[shape]
    break_ = "\r" if shape == "cr_line_ends" else "\n"
    raw = bom + front + BODY.replace("\n", break_)
    path = write(tmp_path / "doc.md", raw)
    _, docs, _ = load(tmp_path)
    [doc] = docs
    assert doc.metadata["sensitivity"] == "RESTRICTED"
    assert "sensitivity" not in doc.page_content and "---" not in doc.page_content
    text = read_source_text(path)
    assert text[doc.metadata["body_offset"] :] == doc.page_content == BODY.replace("\n", break_)
    chunks = ParagraphTextSplitter(chunk_size=30, chunk_overlap=0).split_documents(docs)
    assert len(chunks) > 1
    for chunk in chunks:
        assert text[chunk.metadata["start_index"] : chunk.metadata["end_index"]] == chunk.page_content


def test_regression_cr_front_matter_errors_name_the_line(tmp_path: Path) -> None:
    path = write(tmp_path / "doc.md", "---\rtitle: ok\rtags: [a, b\rother: 1\r---\rbody\r")
    with pytest.raises(LoaderError, match="malformed YAML") as info:
        CorpusLoader(path).load()
    assert info.value.line is not None and 3 <= info.value.line <= 5
    path = write(tmp_path / "doc.md", "---\rtitle: ok\rsensitivity: [1]\r---\rbody\r")
    with pytest.raises(LoaderError) as info:
        CorpusLoader(path).load()
    assert (info.value.line, info.value.field) == (3, "sensitivity")
    path = write(tmp_path / "doc.md", "---\u00a0\rtitle: never closed\rbody\r")
    with pytest.raises(LoaderError, match="never closed") as info:
        CorpusLoader(path).load()
    assert info.value.line == 1


#: A ``---`` block after blank (or invisible) lines is not front matter, nor is anything else at the top of the body
#: that looks like metadata; setting a label there refuses the file.
REFUSED_SHAPES = {
    "blank_line": ("\n---\nsensitivity: RESTRICTED\n---\n", 3),
    "two_blank_lines": ("\n\n---\ntitle: T\nsensitivity: RESTRICTED\n---\n", 5),
    "spaces_line": ("   \n---\nsensitivity: RESTRICTED\n---\n", 3),
    "zero_width_line": ("\u200b\n---\nsensitivity: RESTRICTED\n---\n", 3),
    "crlf_blank_line": ("\r\n---\r\nsensitivity: RESTRICTED\r\n---\r\n", 3),
    "cr_blank_line": ("\r---\rsensitivity: PUBLIC\r---\r", 3),  # any label: it would be dropped
    "never_closed": ("\n---\nsensitivity: RESTRICTED\n\n", 3),
    "look_alike_key": ("\n---\ns\u0435nsitivity: RESTRICTED\n---\n", 3),
    "quoted_key": ('\n---\n"Sensitivity" : RESTRICTED\n---\n', 3),
    "escaped_key": ('\n---\n"s\\u0435nsitivity": RESTRICTED\n---\n', 3),
    "flow_mapping": ("\n---\n{title: T, sensitivity: RESTRICTED}\n---\n", 3),
    "malformed_yaml": ("\n---\ntitle: [a\nsensitivity: RESTRICTED\n---\n", 4),
    # issue 25, second trial: anything else at the top of the body that looks like metadata and sets a label
    "toml": ('+++\nsensitivity = "RESTRICTED"\n+++\n', 2),
    "toml_colon": ("+++\nsensitivity: RESTRICTED\n+++\n", 2),
    "toml_table": ('+++\ntitle = "T"\n[params]\nsensitivity = "RESTRICTED"\n+++\n', 4),
    "toml_dotted": ('+++\nparams.sensitivity = "RESTRICTED"\n+++\n', 2),
    "yaml_tag": ("--- !!map\nsensitivity: RESTRICTED\n---\n", 2),
    "yaml_directive": ("%YAML 1.2\n---\nsensitivity: RESTRICTED\n---\n", 3),
    "four_dashes": ("----\nsensitivity: RESTRICTED\n----\n", 2),
    "html_comment": ("<!-- generated -->\n---\nsensitivity: RESTRICTED\n---\n", 3),
    "second_block": ("---\nsensitivity: PUBLIC\n---\n---\nsensitivity: RESTRICTED\n---\n", 5),
    "second_block_after_blank": ("---\ntitle: T\n---\n\n---\nsensitivity: RESTRICTED\n---\n", 6),
    "bare_first_line": ("sensitivity: RESTRICTED\n\n", 1),
    "bare_after_title": ("title: T\nSensitivity: RESTRICTED\n\n", 2),
    "bare_equals": ("sensitivity=RESTRICTED\n\n", 1),
    "bare_fullwidth_colon": ("sensitivity：RESTRICTED\n\n", 1),
    "bare_look_alike_key": ("sensitivi\u0442y: RESTRICTED\n\n", 1),
    "bare_open_label": ("sensitivity: PUBLIC\n\n", 1),  # any label: it would be dropped
    "fullwidth_fence": ("－－－\nsensitivity: RESTRICTED\n－－－\n", 2),
    "em_dash_fence": ("———\nsensitivity: RESTRICTED\n———\n", 2),
    "en_dash_fence": ("–––\nsensitivity: RESTRICTED\n–––\n", 2),
    "list_item": ("- sensitivity: RESTRICTED\n\n", 1),
    "code_fence": ("```yaml\nsensitivity: RESTRICTED\n```\n", 2),
    # issue 25, third trial: a first-line label in prose forms, markup stripped, and keys with separators
    "bold_label": ("**Sensitivity:** RESTRICTED\n\n", 1),
    "bold_label_after_title": ("title: T\n__Sensitivity__: RESTRICTED\n\n", 2),
    "link_reference_comment": ("[//]: # (sensitivity: RESTRICTED)\n\n", 1),
    "link_reference_comment_quoted": ('[comment]: <> "Sensitivity: RESTRICTED"\n\n', 1),
    "html_comment_label": ("<!-- sensitivity: RESTRICTED -->\n\n", 1),
    "html_comment_label_second": ("<!-- generated -->\n<!-- Sensitivity = RESTRICTED -->\n\n", 2),
    "dashed_key": ("S-E-N-S-I-T-I-V-I-T-Y: RESTRICTED\n\n", 1),
    "spaced_key_after_front_matter": ("---\ntitle: T\n---\nS E N S I T I V I T Y: RESTRICTED\n\n", 4),
    # issue 25, fourth trial: a heading or a table row that a reader sees as the label
    "heading_label": ("# Sensitivity: RESTRICTED\n\n", 1),
    "heading_label_closed": ("## **Sensitivity**: Restricted ##\n\n", 1),
    "table_label": ("| sensitivity | RESTRICTED |\n|---|---|\n\n", 1),
    "table_label_after_front_matter": ("---\ntitle: T\n---\n| Sensitivity | RЕSTRICTED |\n\n", 4),
}


@pytest.mark.parametrize("shape", sorted(REFUSED_SHAPES))
@pytest.mark.parametrize("suffix", [".md", ".txt"])
def test_regression_label_in_a_block_after_blank_lines_refuses_the_file(tmp_path: Path, shape: str, suffix: str) -> None:
    front, line = REFUSED_SHAPES[shape]
    write(tmp_path / "good.md", "fine\n")
    path = write(tmp_path / f"doc{suffix}", front + BODY)
    with pytest.raises(LoaderError, match="not front matter") as info:
        CorpusLoader(tmp_path).load()
    assert (info.value.path, info.value.line, info.value.field) == (str(path), line, "sensitivity")
    assert f"{path}:{line}:" in str(info.value)
    loader, docs, _ = load(tmp_path, on_error="skip")
    assert [d.id for d in docs] == ["good"]
    assert loader.stats.skipped == [(str(path), line, info.value.reason)]


@pytest.mark.parametrize(
    "raw",
    [
        "\n# Title\n\nMarkdown starting with a blank line.\n",
        "\n\n---\n\nA horizontal rule after blank lines, then text: with a colon.\n\n---\n",
        "\n---\ntitle: a block that is not front matter, without a label\n---\nbody\n",
        "# Title\n\n---\n\nsensitivity: RESTRICTED is how a label is written\n\n---\n",  # rules later on
        "--- title: not a fence\nbody\n",
        "- - -\ntitle: a Markdown rule with spaces is no fence\n- - -\nbody\n",
        "\n---\n# Sensitivity: a heading (a YAML comment) is text, not a label\n---\nbody\n",
        "\n---\nNo closing fence, and the word sensitivity without a colon\n",
        # issue 25, second trial: what looks like metadata refuses a file only when it sets a label
        '+++\ntitle = "no label"\n+++\nBody.\n',
        "Sensitivity analysis: the ratio of true positives.\n\nMore text.\n",  # another key
        "Intro line.\n\nsensitivity: RESTRICTED is how a label is written\n",  # after the first line of prose
        "# Title\nsensitivity: RESTRICTED\n",  # after a heading
        "本文です。\nsensitivity: RESTRICTED\n",
        "**Sensitivity** is discussed below.\n",
        "sensitivity\n\nThe word alone, with no colon.\n",
        "# Sensitivity: what the label means\n\nText.\n",  # a heading that is no RESTRICTED label
        "| Sensitivity | Meaning |\n|---|---|\n| RESTRICTED | never shown |\n",  # a table about labels
    ],
    ids=ascii,
)
def test_ordinary_documents_are_unchanged(tmp_path: Path, raw: str) -> None:
    path = write(tmp_path / "doc.md", raw)
    _, [doc], _ = load(tmp_path)
    assert doc.page_content == raw and doc.metadata["body_offset"] == 0
    assert doc.metadata["sensitivity"] == "INTERNAL"
    assert read_source_text(path)[doc.metadata["body_offset"] :] == doc.page_content
