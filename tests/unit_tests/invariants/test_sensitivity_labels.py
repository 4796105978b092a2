"""Issue 8, section 1 (loader side): an ambiguous sensitivity label is RESTRICTED, with a warning naming file and
line; and section 3 (loader side): default doc_ids never collide and are stable.

Each case writes the exact input of the issue into front matter, a sidecar JSON and a JSONL line.
"""

import json
import re
import warnings
from pathlib import Path

import pytest

from langchain_ragspine.document_loaders import CorpusLoader
from langchain_ragspine.document_loaders.corpus import LoaderWarning
from langchain_ragspine.errors import LoaderError
from langchain_ragspine.sensitivity import is_restricted


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")
    return path


def load(*paths: Path) -> tuple[dict, list[str]]:
    """``({doc_id: metadata}, [warning messages])``."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        docs = CorpusLoader(list(paths)).load()
    messages = [str(w.message) for w in record if issubclass(w.category, LoaderWarning)]
    return {d.id: d.metadata for d in docs}, messages


def warned(messages: list[str], path: Path, line: int | None, *fragments: str) -> bool:
    where = f"{path}:{line}:" if line is not None else f"{path}:"
    return any(m.startswith(where) and all(f in m for f in fragments) for m in messages)


# ---------------------------------------------------------------------------- duplicate sensitivity keys


def test_regression_duplicate_key_in_front_matter_restricted_first_public_second(tmp_path):
    f = write(tmp_path / "a.md", "---\nsensitivity: RESTRICTED\ntitle: T\nsensitivity: PUBLIC\n---\n本文\n")
    docs, messages = load(tmp_path)
    assert docs["a"]["sensitivity"] == "RESTRICTED" and is_restricted(docs["a"])
    assert warned(messages, f, 4, "sensitivity is set 2 times", "line 2", "line 4", "keeping RESTRICTED")


def test_regression_duplicate_key_in_one_jsonl_line(tmp_path):
    f = write(
        tmp_path / "c.jsonl",
        '{"text": "first"}\n{"text": "x", "sensitivity": "RESTRICTED", "sensitivity": "PUBLIC"}\n',
    )
    docs, messages = load(tmp_path)
    assert docs["c:2"]["sensitivity"] == "RESTRICTED"
    assert docs["c:1"]["sensitivity"] == "INTERNAL"
    assert warned(messages, f, 2, "sensitivity is set 2 times", "keeping RESTRICTED")


def test_regression_duplicate_key_in_a_sidecar(tmp_path):
    write(tmp_path / "a.md", "本文\n")
    side = write(
        tmp_path / "a.json",
        '{\n  "sensitivity": "RESTRICTED",\n  "title": "T",\n  "sensitivity": "PUBLIC"\n}\n',
    )
    docs, messages = load(tmp_path)
    assert docs["a"]["sensitivity"] == "RESTRICTED" and docs["a"]["title"] == "T"
    assert warned(messages, side, 4, "sensitivity is set 2 times", "line 2", "line 4", "keeping RESTRICTED")


def test_duplicate_key_in_a_jsonl_sidecar_applies_to_every_line(tmp_path):
    write(tmp_path / "q.jsonl", '{"text": "one"}\n{"text": "two", "sensitivity": "PUBLIC"}\n')
    write(tmp_path / "q.json", '{"sensitivity": "RESTRICTED", "sensitivity": "PUBLIC"}')
    docs, _ = load(tmp_path)
    assert [md["sensitivity"] for md in docs.values()] == ["RESTRICTED", "RESTRICTED"]


@pytest.mark.parametrize(
    ("name", "content", "doc_id"),
    [
        # a label merged in with a YAML anchor counts
        ("a.md", "---\nbase: &b\n  sensitivity: RESTRICTED\n<<: *b\nsensitivity: PUBLIC\n---\n本文\n", "a"),
        # a JSONL line and its nested LangChain metadata disagree
        (
            "c.jsonl",
            '{"text": "x", "sensitivity": "PUBLIC", "metadata": {"sensitivity": "RESTRICTED"}}\n',
            "c:1",
        ),
    ],
)
def test_labels_from_yaml_merges_and_nested_jsonl_metadata_count(tmp_path, name, content, doc_id):
    write(tmp_path / name, content)
    docs, _ = load(tmp_path)
    assert docs[doc_id]["sensitivity"] == "RESTRICTED"


@pytest.mark.parametrize(
    ("first", "second", "label"), [("PUBLIC", "RESTRICTED", "RESTRICTED"), ("PUBLIC", "INTERNAL", "INTERNAL")]
)
def test_duplicate_keys_in_either_order_keep_the_most_restrictive(tmp_path, first, second, label):
    write(tmp_path / "a.md", f"---\nsensitivity: {first}\nsensitivity: {second}\n---\n本文\n")
    write(tmp_path / "b.md", f"---\nsensitivity: {second}\nsensitivity: {first}\n---\n本文\n")
    docs, _ = load(tmp_path)
    assert docs["a"]["sensitivity"] == docs["b"]["sensitivity"] == label


# ---------------------------------------------------------------------------- other duplicate keys


def test_other_duplicate_keys_keep_the_last_value_and_warn_with_file_and_line(tmp_path):
    f = write(
        tmp_path / "a.md", "---\ntitle: first\nlang: ja\ntitle: second\nextra: {k: 1, k: 2}\n---\n本文\n"
    )
    j = write(tmp_path / "b.jsonl", '{"text": "x", "lang": "ja", "lang": "en"}\n')
    side = write(tmp_path / "b.json", '{"dataset": "a",\n "dataset": "b"}')
    docs, messages = load(tmp_path)
    assert docs["a"]["title"] == "second" and docs["a"]["extra"] == {"k": 2}
    assert docs["b:1"]["lang"] == "en" and docs["b:1"]["dataset"] == "b"
    assert warned(messages, f, 4, "duplicate key 'title'", "first on line 2", "last value is used")
    assert warned(messages, f, 5, "duplicate key 'k'")
    assert warned(messages, j, 1, "duplicate key 'lang'")
    assert warned(messages, side, 2, "duplicate key 'dataset'")
    assert not any("sensitivity" in m for m in messages)


def test_no_warning_for_clean_files(tmp_path):
    write(tmp_path / "a.md", "---\ntitle: T\nsensitivity: PUBLIC\n---\n本文\n")
    write(tmp_path / "a.json", '{"lang": "ja", "sensitivity": "public"}')
    docs, messages = load(tmp_path)
    assert (
        messages == [] and docs["a"]["sensitivity"] == "public"
    )  # agree after folding: the sidecar's spelling


# ---------------------------------------------------------------------------- key spellings


KEYS = ["Ｓｅｎｓｉｔｉｖｉｔｙ", " sensitivity ", "sensi\u200btivity", "SENSITIVITY", "Sensitivity\u3000"]


@pytest.mark.parametrize("key", KEYS)
def test_regression_key_spellings_in_front_matter(tmp_path, key):
    f = write(tmp_path / "a.md", f'---\n"{key}": RESTRICTED\n---\n本文\n')
    docs, messages = load(tmp_path)
    assert docs["a"]["sensitivity"] == "RESTRICTED" and key not in docs["a"]
    assert warned(messages, f, 2, f"key {key!r} is read as 'sensitivity'")


@pytest.mark.parametrize("key", KEYS)
def test_regression_key_spellings_in_a_sidecar_and_a_jsonl_line(tmp_path, key):
    write(tmp_path / "a.md", "---\nsensitivity: PUBLIC\n---\n本文\n")
    write(tmp_path / "a.json", json.dumps({key: "RESTRICTED"}))
    write(tmp_path / "b.jsonl", json.dumps({"text": "x", key: "RESTRICTED"}) + "\n")
    docs, _ = load(tmp_path)
    assert docs["a"]["sensitivity"] == "RESTRICTED"
    assert docs["b:1"]["sensitivity"] == "RESTRICTED"


def test_the_issue_example_key_unquoted(tmp_path):
    write(tmp_path / "a.md", "---\nＳｅｎｓｉｔｉｖｉｔｙ: RESTRICTED\n---\n本文\n")
    docs, _ = load(tmp_path)
    assert docs["a"]["sensitivity"] == "RESTRICTED"


def test_regression_sensitivity_key_is_case_insensitive(
    tmp_path,
):  # moved here: it now warns about the spelling
    (tmp_path / "a.md").write_text("---\nSensitivity: RESTRICTED\n---\n本文", "utf-8")
    with pytest.warns(LoaderWarning, match="key 'Sensitivity' is read as 'sensitivity'"):
        assert CorpusLoader(tmp_path).load()[0].metadata["sensitivity"] == "RESTRICTED"


# ---------------------------------------------------------------------------- values


@pytest.mark.parametrize(
    "value",
    [
        '"RESTRICTED, INTERNAL"',
        "Restricted.",
        "[INTERNAL, RESTRICTED]",
        "RESTRICTED（社外秘）",
        "not restricted",
    ],
)
def test_regression_value_naming_restricted_among_other_words(tmp_path, value):
    f = write(tmp_path / "a.md", f"---\ntitle: T\nsensitivity: {value}\n---\n本文\n")
    docs, messages = load(tmp_path)
    assert docs["a"]["sensitivity"] == "RESTRICTED"
    assert warned(messages, f, 3, "ambiguous sensitivity", "read as RESTRICTED")


def test_values_in_json_sources(tmp_path):
    write(tmp_path / "a.md", "本文\n")
    write(tmp_path / "a.json", '{"sensitivity": "Restricted."}')
    write(
        tmp_path / "b.jsonl",
        '{"text": "x", "sensitivity": ["PUBLIC", "RESTRICTED"]}\n{"text": "y", "sensitivity": "RESTRICTED, INTERNAL"}\n',
    )
    docs, _ = load(tmp_path)
    assert [docs[k]["sensitivity"] for k in ("a", "b:1", "b:2")] == ["RESTRICTED"] * 3


def test_several_non_restricted_labels_give_the_most_restrictive(tmp_path):
    f = write(tmp_path / "a.md", "---\nsensitivity: PUBLIC, CONFIDENTIAL\n---\n本文\n")
    write(tmp_path / "b.md", "---\nsensitivity: [PUBLIC, INTERNAL]\n---\n本文\n")
    docs, messages = load(tmp_path)
    assert (docs["a"]["sensitivity"], docs["b"]["sensitivity"]) == ("CONFIDENTIAL", "INTERNAL")
    assert warned(messages, f, 2, "ambiguous sensitivity")


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("{level: RESTRICTED}", "got object"),
        ("3", "got number"),
        ("[]", "empty list"),
        ("[PUBLIC, 3]", "only strings"),
    ],
)
def test_values_that_are_not_labels_are_errors_naming_file_line_and_field(tmp_path, value, fragment):
    f = write(tmp_path / "a.md", f"---\ntitle: T\nsensitivity: {value}\n---\n本文\n")
    with pytest.raises(LoaderError, match=re.escape(f"{f}:3: field 'sensitivity': must be a string")) as info:
        CorpusLoader(tmp_path).load()
    assert fragment in str(info.value)


def test_unknown_labels_are_kept_with_a_warning(tmp_path):
    f = write(tmp_path / "a.md", "---\nsensitivity: team-a\n---\n本文\n")
    docs, messages = load(tmp_path)
    assert docs["a"]["sensitivity"] == "team-a"
    assert warned(messages, f, 2, "unknown sensitivity label 'team-a'")


# ---------------------------------------------------------------------------- sources that disagree


@pytest.mark.parametrize(
    ("front", "side"), [("RESTRICTED", "PUBLIC"), ("PUBLIC", "RESTRICTED"), ("public", "Restricted.")]
)
def test_regression_front_matter_and_sidecar_disagree(tmp_path, front, side):
    f = write(tmp_path / "a.md", f"---\ntitle: front\nsensitivity: {front}\n---\n本文\n")
    s = write(tmp_path / "a.json", json.dumps({"title": "sidecar", "sensitivity": side}))
    docs, messages = load(tmp_path)
    assert docs["a"]["sensitivity"] == "RESTRICTED"
    assert docs["a"]["title"] == "sidecar"  # other keys: the sidecar still wins
    assert warned(messages, f, 3, "disagree", f"{s}:1", "keeping RESTRICTED")


@pytest.mark.parametrize(("line", "side"), [("RESTRICTED", "PUBLIC"), ("PUBLIC", "RESTRICTED")])
def test_regression_jsonl_field_and_sidecar_disagree(tmp_path, line, side):
    f = write(tmp_path / "q.jsonl", json.dumps({"text": "x", "lang": "ja", "sensitivity": line}) + "\n")
    write(tmp_path / "q.json", json.dumps({"lang": "en", "sensitivity": side}))
    docs, messages = load(tmp_path)
    assert docs["q:1"]["sensitivity"] == "RESTRICTED" and docs["q:1"]["lang"] == "en"
    assert warned(messages, f, 1, "disagree", "keeping RESTRICTED")


def test_disagreeing_known_labels_keep_the_most_restrictive_and_unknown_ones_fail_closed(tmp_path):
    write(tmp_path / "a.md", "---\nsensitivity: CONFIDENTIAL\n---\n本文\n")
    write(tmp_path / "a.json", '{"sensitivity": "PUBLIC"}')  # before issue 8 the sidecar won: PUBLIC
    write(tmp_path / "b.md", "---\nsensitivity: team-a\n---\n本文\n")
    write(tmp_path / "b.json", '{"sensitivity": "PUBLIC"}')
    docs, _ = load(tmp_path)
    assert docs["a"]["sensitivity"] == "CONFIDENTIAL"
    assert docs["b"]["sensitivity"] == "RESTRICTED"


# ---------------------------------------------------------------------------- doc_ids (section 3)


def test_regression_same_relative_name_in_two_folders_gets_distinct_ids(tmp_path):
    write(tmp_path / "projA" / "README.md", "# A\nalpha\n")
    write(tmp_path / "projB" / "README.md", "# B\nbeta\n")
    write(tmp_path / "projA" / "guide.md", "guide\n")
    loader = CorpusLoader([tmp_path / "projA", tmp_path / "projB"])
    docs = loader.load()
    assert [(d.id, d.metadata["source"]) for d in docs] == [
        ("projA/README", "projA/README.md"),
        ("guide", "guide.md"),  # no collision: the plain default id
        ("projB/README", "projB/README.md"),
    ]
    assert loader.stats.skipped == [] and [d.page_content for d in docs][::2] == [
        "# A\nalpha\n",
        "# B\nbeta\n",
    ]
    again = CorpusLoader([tmp_path / "projA", tmp_path / "projB"]).load()
    assert [d.id for d in again] == [d.id for d in docs]  # stable


def test_regression_same_stem_with_different_suffixes_gets_distinct_ids(tmp_path):
    write(tmp_path / "notes.md", "markdown notes\n")
    write(tmp_path / "notes.txt", "text notes\n")
    write(tmp_path / "other.md", "other\n")
    docs = CorpusLoader(tmp_path).load()
    assert [(d.id, d.metadata["source"]) for d in docs] == [
        ("notes.md", "notes.md"),
        ("notes.txt", "notes.txt"),
        ("other", "other.md"),
    ]


def test_same_folder_name_under_two_parents_and_mixed_collisions(tmp_path):
    write(tmp_path / "x" / "docs" / "a.md", "x\n")
    write(tmp_path / "y" / "docs" / "a.md", "y\n")
    write(tmp_path / "p" / "notes.md", "p md\n")
    write(tmp_path / "q" / "notes.md", "q md\n")
    write(tmp_path / "q" / "notes.txt", "q txt\n")
    write(tmp_path / "p" / "qa.jsonl", '{"text": "p"}\n')
    write(tmp_path / "q" / "qa.jsonl", '{"text": "q"}\n')
    roots = [tmp_path / "x" / "docs", tmp_path / "y" / "docs", tmp_path / "p", tmp_path / "q"]
    ids = [d.id for d in CorpusLoader(roots).load()]
    assert ids == ["x/docs/a", "y/docs/a", "p/notes.md", "p/qa:1", "q/notes.md", "q/notes.txt", "q/qa:1"]
    assert len(set(ids)) == len(ids)


def test_single_folder_ids_are_unchanged(tmp_path):
    write(tmp_path / "kb" / "a" / "b.md", "b\n")
    write(tmp_path / "kb" / "c.txt", "c\n")
    write(tmp_path / "kb" / "d.jsonl", '{"text": "d"}\n')
    assert [d.id for d in CorpusLoader(tmp_path / "kb").load()] == ["a/b", "c", "d:1"]


def test_explicit_doc_ids_still_collide_loudly(tmp_path):
    write(tmp_path / "a.md", "---\ndoc_id: same\n---\none\n")
    write(tmp_path / "b.md", "---\ndoc_id: same\n---\ntwo\n")
    with pytest.raises(LoaderError, match="duplicate doc_id 'same'"):
        CorpusLoader(tmp_path).load()
