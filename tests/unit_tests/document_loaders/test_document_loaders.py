import json
import warnings
from pathlib import Path

import pytest
from langchain_core.document_loaders import BaseLoader
from langchain_core.documents import Document

from langchain_ragspine.document_loaders import CorpusLoader, LoaderWarning, LoadStats
from langchain_ragspine.errors import LoaderError, RagSpineError


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_bytes(content.encode("utf-8"))
    return path


def file_text(path: Path, encoding: str = "utf-8") -> str:
    """The decoded file text body_offset indexes into (no newline translation)."""
    return path.read_bytes().decode(encoding)


def by_id(docs: list[Document]) -> dict[str, Document]:
    return {d.id: d for d in docs}


JA_MD = """---
title: 労働基準法の概要
doc_id: rodo
tags: [法律, 労働]
published: 2024-04-01
updated: 2024-04-01 09:30:00+09:00
lang: ja
---
# 第一章　総則

労働条件は、労働者が人たるに値する生活を営むための必要を充たすべきものでなければならない。

  インデントと末尾の空白も保つ。  
"""


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    write(root / "laws" / "rodo.md", JA_MD)
    write(
        root / "laws" / "rodo.json",
        json.dumps({"title": "労働基準法（サイドカー）", "sensitivity": "RESTRICTED"}),
    )
    write(root / "guide.markdown", "Intro line\n\n# English Guide\n\nBody text.\n")
    write(root / "notes" / "deep" / "memo.txt", "メモ：中文也可以。\n第二行\n")
    write(root / "notes" / "readme.md", "no heading here\n")
    write(root / "ignored.csv", "a,b\n")
    write(root / "orphan.json", '{"title": "sidecar without a document"}')
    write(root / ".hidden.md", "hidden file\n")
    write(root / ".git" / "x.md", "hidden folder\n")
    return root


# ---------------------------------------------------------------------------- basics


def test_is_a_base_loader_and_exports(corpus: Path) -> None:
    loader = CorpusLoader(corpus)
    assert isinstance(loader, BaseLoader)
    assert isinstance(loader.stats, LoadStats)
    assert issubclass(LoaderWarning, UserWarning)
    assert issubclass(LoaderError, RagSpineError)


def test_folder_walk_order_ids_sources_and_titles(corpus: Path) -> None:
    loader = CorpusLoader(corpus)
    docs = loader.load()
    # sorted by path below the folder; hidden, .csv and .json files are not documents
    assert [d.metadata["source"] for d in docs] == [
        "guide.markdown",
        "laws/rodo.md",
        "notes/deep/memo.txt",
        "notes/readme.md",
    ]
    assert [d.id for d in docs] == ["guide", "rodo", "notes/deep/memo", "notes/readme"]
    assert all(d.id == d.metadata["doc_id"] for d in docs)
    titles = {d.id: d.metadata["title"] for d in docs}
    assert titles == {
        "guide": "English Guide",  # first "# " heading, not the first line
        "rodo": "労働基準法（サイドカー）",  # sidecar wins over front matter
        "notes/deep/memo": "memo",  # stem
        "notes/readme": "readme",
    }
    assert loader.stats == LoadStats(files=4, documents=4, skipped=[], empty=[])
    # lazy_load gives the same documents in the same order
    assert [d.id for d in loader.lazy_load()] == [d.id for d in docs]


def test_front_matter_sidecar_merge_and_verbatim_japanese_body(corpus: Path) -> None:
    path = corpus / "laws" / "rodo.md"
    doc = by_id(CorpusLoader(corpus).load())["rodo"]
    meta = doc.metadata
    assert meta["sensitivity"] == "RESTRICTED"  # from the sidecar
    assert meta["doc_id"] == "rodo"  # from front matter
    assert meta["tags"] == ["法律", "労働"]
    assert meta["lang"] == "ja"
    assert meta["published"] == "2024-04-01"  # YAML date → ISO string
    assert meta["updated"] == "2024-04-01T09:30:00+09:00"  # YAML datetime → ISO string
    assert meta["source"] == "laws/rodo.md"
    json.dumps(meta)  # every value is JSON-serialisable
    text = file_text(path)
    assert text[meta["body_offset"] :] == doc.page_content
    assert doc.page_content.startswith("# 第一章　総則\n")
    assert "  インデントと末尾の空白も保つ。  \n" in doc.page_content  # not stripped or normalised
    assert "---" not in doc.page_content and "title:" not in doc.page_content


def test_front_matter_title_used_without_sidecar_and_sensitivity_default(tmp_path: Path) -> None:
    p = write(tmp_path / "a.md", "---\ntitle: 表題\nsensitivity: PUBLIC\n---\n# 見出し\n本文\n")
    write(tmp_path / "b.md", "---\nauthor: 山田\n...\n本文\n")  # '...' also closes front matter
    docs = by_id(CorpusLoader(tmp_path).load())
    assert docs["a"].metadata["title"] == "表題"
    assert docs["a"].metadata["sensitivity"] == "PUBLIC"
    assert docs["b"].metadata["sensitivity"] == "INTERNAL"
    assert docs["b"].metadata["author"] == "山田"
    assert docs["b"].page_content == "本文\n"
    assert file_text(p)[docs["a"].metadata["body_offset"] :] == docs["a"].page_content


@pytest.mark.parametrize(
    "raw",
    [
        "---\r\ntitle: CRLF\r\n---\r\n本文一行目\r\n二行目\r\n",
        "\ufeff---\ntitle: BOM\n---\n本文\n",
        "\ufeffBOM but no front matter\n",
        "---\ntitle: last line\n---",  # closing line without newline: empty body → skipped, tested elsewhere
        "plain text, no front matter\n",
        "---\n---\nempty front matter\n",
    ],
)
def test_body_offset_points_into_the_file(tmp_path: Path, raw: str) -> None:
    path = write(tmp_path / "doc.md", raw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LoaderWarning)
        docs = CorpusLoader(path).load()
    text = file_text(path)
    for doc in docs:
        assert text[doc.metadata["body_offset"] :] == doc.page_content
        assert not doc.page_content.startswith("\ufeff")
    if raw.startswith("---\r\n"):
        assert docs[0].page_content == "本文一行目\r\n二行目\r\n"
        assert docs[0].metadata["title"] == "CRLF"


def test_markdown_heading_rules(tmp_path: Path) -> None:
    write(tmp_path / "fenced.md", "```bash\n# not a title\n```\n## level two\n#   Real Title  ##\n")
    write(tmp_path / "csharp.md", "# C#\n")
    write(tmp_path / "plain.txt", "# in a .txt this is not a Markdown heading\n")
    docs = by_id(CorpusLoader(tmp_path).load())
    assert docs["fenced"].metadata["title"] == "Real Title"
    assert docs["csharp"].metadata["title"] == "C#"
    assert docs["plain"].metadata["title"] == "plain"


def test_doc_id_defaults_for_nested_folders_and_roots(tmp_path: Path) -> None:
    base = tmp_path / "kb"
    write(base / "a" / "b" / "c.md", "nested\n")
    write(base / "a" / "b.v2.txt", "dots\n")
    docs = CorpusLoader(base).load()
    # sorted by path components: ("a", "b", "c.md") < ("a", "b.v2.txt")
    assert [(d.id, d.metadata["source"]) for d in docs] == [
        ("a/b/c", "a/b/c.md"),
        ("a/b.v2", "a/b.v2.txt"),
    ]
    # a file given directly: root is its parent folder
    (doc,) = CorpusLoader(base / "a" / "b" / "c.md").load()
    assert (doc.id, doc.metadata["source"]) == ("c", "c.md")
    # a sub-folder given: it is its own root
    (doc,) = CorpusLoader(base / "a" / "b").load()
    assert doc.id == "c"
    # explicit root
    (doc,) = CorpusLoader(base / "a" / "b" / "c.md", root=base).load()
    assert (doc.id, doc.metadata["source"]) == ("a/b/c", "a/b/c.md")
    docs = CorpusLoader([base / "a" / "b"], root=tmp_path).load()
    assert [d.id for d in docs] == ["kb/a/b/c"]


def test_walk_order_is_deterministic(tmp_path: Path) -> None:
    for name in ["z.md", "a.md", "m/b.md", "m/a.md", "B.md"]:
        write(tmp_path / name, name + "\n")
    first = [d.id for d in CorpusLoader(tmp_path).load()]
    assert first == sorted(first, key=lambda s: tuple(s.split("/")))
    assert first == [d.id for d in CorpusLoader(tmp_path).load()]


def test_several_paths_keep_their_order_and_files_load_once(tmp_path: Path) -> None:
    write(tmp_path / "x" / "one.md", "1\n")
    write(tmp_path / "y" / "two.md", "2\n")
    loader = CorpusLoader([tmp_path / "y", tmp_path / "x", tmp_path / "y" / "two.md"])
    assert [d.id for d in loader.load()] == ["two", "one"]
    assert loader.stats.files == 2


def test_hidden_root_folder_is_still_walked(tmp_path: Path) -> None:
    write(tmp_path / ".cache" / "doc.md", "text\n")
    assert [d.id for d in CorpusLoader(tmp_path / ".cache").load()] == ["doc"]


# ---------------------------------------------------------------------------- JSONL


def test_beir_style_jsonl(tmp_path: Path) -> None:
    lines = [
        {"_id": "doc1", "title": "東京", "text": "東京は日本の首都である。", "metadata": {}},
        {"_id": "doc2", "title": "", "text": "Paris is the capital of France."},
        {"id": 7, "text": "integer id"},
        {"doc_id": "explicit", "id": "ignored", "_id": "also-ignored", "text": "doc_id first"},
        {"text": "no id at all", "lang": "en"},
    ]
    content = "\n".join(json.dumps(x, ensure_ascii=False) for x in lines[:2]) + "\n\n   \n"
    content += "\n".join(json.dumps(x) for x in lines[2:]) + "\n"
    path = write(tmp_path / "beir" / "corpus.jsonl", content)
    loader = CorpusLoader(tmp_path / "beir")
    docs = loader.load()
    assert [d.id for d in docs] == ["doc1", "doc2", "7", "explicit", "corpus:7"]
    d1, d2, d3, d4, d5 = docs
    assert d1.page_content == "東京は日本の首都である。"
    assert d1.metadata == {
        "_id": "doc1",
        "title": "東京",
        "source": "corpus.jsonl:1",
        "doc_id": "doc1",
        "sensitivity": "INTERNAL",
        "line": 1,
    }
    assert "text" not in d1.metadata
    assert d2.metadata["title"] == "doc2"  # empty title → doc_id
    assert d3.metadata["line"] == 5 and d3.metadata["id"] == 7 and d3.metadata["doc_id"] == "7"
    assert d4.metadata["id"] == "ignored"
    assert d5.metadata["title"] == "corpus:7" and d5.metadata["lang"] == "en"
    assert loader.stats == LoadStats(files=1, documents=5, skipped=[], empty=[])
    assert file_text(path).splitlines()[d3.metadata["line"] - 1] == json.dumps(lines[2])


def test_jsonl_default_doc_id_uses_nested_path(tmp_path: Path) -> None:
    write(tmp_path / "sets" / "qa.jsonl", '{"text": "a"}\n{"text": "b"}\n')
    assert [d.id for d in CorpusLoader(tmp_path).load()] == ["sets/qa:1", "sets/qa:2"]


def test_jsonl_sidecar_applies_to_every_line_and_wins(tmp_path: Path) -> None:
    write(tmp_path / "faq.jsonl", '{"id": "q1", "text": "一", "lang": "ja"}\n{"id": "q2", "text": "二"}\n')
    write(tmp_path / "faq.json", '{"lang": "zh", "sensitivity": "PUBLIC", "dataset": "faq"}')
    docs = CorpusLoader(tmp_path / "faq.jsonl").load()
    assert [d.metadata["lang"] for d in docs] == ["zh", "zh"]
    assert all(d.metadata["sensitivity"] == "PUBLIC" and d.metadata["dataset"] == "faq" for d in docs)
    assert [d.id for d in docs] == ["q1", "q2"]


def test_jsonl_sidecar_labels_are_checked_once_per_file(tmp_path: Path) -> None:
    write(tmp_path / "qa.jsonl", '{"text": "一"}\n{"text": "二"}\n{"text": "三"}\n')
    write(tmp_path / "qa.json", '{"sensitivity": 3}')
    with pytest.raises(LoaderError, match=r"qa\.json:1: field 'sensitivity': must be a string") as info:
        CorpusLoader(tmp_path).load()
    assert info.value.path == str(tmp_path / "qa.json")
    loader = CorpusLoader(tmp_path, on_error="skip")
    with pytest.warns(LoaderWarning) as record:
        assert loader.load() == []
    assert len(record) == 1
    assert loader.stats.files == 1 and len(loader.stats.skipped) == 1


def test_first_h1_example() -> None:
    from langchain_ragspine.document_loaders.corpus import first_h1

    assert first_h1("```\n# not this\n```\n# 労働基準法 #\n") == "労働基準法"
    assert first_h1("~~~\n# inside\n```\n# still inside\n~~~\ntext\n") is None
    assert first_h1("#no-space\n#\n# #\n") is None


# ---------------------------------------------------------------------------- data errors

# case -> (files to write, the file at fault, its line, the field, a fragment of the reason)
ERROR_CASES = {
    "invalid_utf8_md": (
        {"bad.md": b"line one\nline two \xff\xfe broken\n"},
        "bad.md",
        2,
        None,
        "invalid utf-8",
    ),
    "invalid_utf8_jsonl_line": (
        {"bad.jsonl": b'{"text": "ok"}\n{"text": "\xe3\x81"}\n{"text": "ok too"}\n'},
        "bad.jsonl",
        2,
        None,
        "invalid utf-8",
    ),
    "binary_file": (
        {"bad.txt": b"text\nmore\n\x00\x01\x02\x89PNG"},
        "bad.txt",
        3,
        None,
        "binary",
    ),
    "sidecar_invalid_json": (
        {"bad.md": "body\n", "bad.json": '{\n  "title": "x",\n  "tags": [1, 2\n}\n'},
        "bad.json",
        4,
        None,
        "not valid JSON",
    ),
    "sidecar_not_object": (
        {"bad.md": "body\n", "bad.json": '\n["a", "b"]\n'},
        "bad.json",
        2,
        None,
        "must be a JSON object",
    ),
    "malformed_yaml": (
        {"bad.md": "---\ntitle: ok\ntags: [a, b\nother: 1\n---\nbody\n"},
        "bad.md",
        None,  # checked loosely below: PyYAML reports the line where it gave up
        None,
        "malformed YAML front matter",
    ),
    "unclosed_front_matter": (
        {"bad.md": "---\ntitle: x\nbody without a closing line\n"},
        "bad.md",
        1,
        None,
        "never closed",
    ),
    "front_matter_not_mapping": (
        {"bad.md": "---\n- a\n- b\n---\nbody\n"},
        "bad.md",
        2,
        None,
        "must be a mapping",
    ),
    "yaml_set_not_json": (
        {"bad.md": "---\ntitle: ok\nkinds: !!set {a: null, b: null}\n---\nbody\n"},
        "bad.md",
        3,
        "kinds",
        "not JSON-serialisable",
    ),
    "sensitivity_not_string": (
        {"bad.md": "---\nsensitivity: {level: RESTRICTED}\n---\nbody\n"},
        "bad.md",
        2,
        "sensitivity",
        "must be a string",
    ),
    "jsonl_invalid_json": (
        {"bad.jsonl": '{"text": "ok"}\n{"text": "unterminated}\n'},
        "bad.jsonl",
        2,
        None,
        "not valid JSON",
    ),
    "jsonl_not_object": (
        {"bad.jsonl": '{"text": "ok"}\n\n["text", "x"]\n'},
        "bad.jsonl",
        3,
        None,
        "must be a JSON object",
    ),
    "jsonl_missing_text": (
        {"bad.jsonl": '{"text": "ok"}\n{"body": "x"}\n'},
        "bad.jsonl",
        2,
        "text",
        "missing",
    ),
    "jsonl_text_not_string": (
        {"bad.jsonl": '{"text": "ok"}\n{"text": ["x"]}\n'},
        "bad.jsonl",
        2,
        "text",
        "must be a string",
    ),
    "jsonl_nan_value": (
        {"bad.jsonl": '{"text": "ok"}\n{"text": "x", "score": NaN}\n'},
        "bad.jsonl",
        2,
        "score",
        "not valid JSON",
    ),
    "jsonl_sidecar_sets_doc_id": (
        {"bad.jsonl": '{"text": "a"}\n', "bad.json": '{"doc_id": "same-for-all"}'},
        "bad.json",
        None,
        "doc_id",
        "cannot set doc_id",
    ),
}


def _build(tmp_path: Path, files: dict[str, str | bytes]) -> Path:
    root = tmp_path / "c"
    write(root / "good.md", "# Good\n良い文書。\n")
    for name, content in files.items():
        write(root / name, content)
    return root


@pytest.mark.parametrize("case", sorted(ERROR_CASES))
def test_data_errors_raise_with_file_and_line(tmp_path: Path, case: str) -> None:
    files, culprit, line, field, fragment = ERROR_CASES[case]
    root = _build(tmp_path, files)
    with pytest.raises(LoaderError) as info:
        CorpusLoader(root).load()
    err = info.value
    msg = str(err)
    assert culprit in msg
    assert err.path == str(root / culprit)
    assert fragment.lower() in msg.lower()
    if case == "malformed_yaml":
        assert err.line is not None and 2 <= err.line <= 5
        assert f"{culprit}:{err.line}:" in msg
    elif line is not None:
        assert err.line == line
        assert f"{culprit}:{line}:" in msg
    if field is not None:
        assert err.field == field
        assert repr(field) in msg


@pytest.mark.parametrize("case", sorted(ERROR_CASES))
def test_data_errors_skip_warn_and_record(tmp_path: Path, case: str) -> None:
    files, culprit, line, field, fragment = ERROR_CASES[case]
    root = _build(tmp_path, files)
    loader = CorpusLoader(root, on_error="skip")
    with pytest.warns(LoaderWarning) as record:
        docs = loader.load()
    messages = [str(w.message) for w in record if issubclass(w.category, LoaderWarning)]
    assert len(messages) == 1
    assert culprit in messages[0] and "skipped" in messages[0]
    ids = {d.id for d in docs}
    assert "good" in ids
    assert len(loader.stats.skipped) == 1
    path, skipped_line, reason = loader.stats.skipped[0]
    assert path == str(root / culprit)
    assert fragment.lower() in reason.lower()
    if line is not None and case != "malformed_yaml":
        assert skipped_line == line
        assert f"{culprit}:{line}:" in messages[0]
    assert loader.stats.documents == len(docs)
    assert loader.stats.empty == []
    jsonl_line_level = culprit.endswith(".jsonl") and line is not None and line > 1
    if jsonl_line_level:
        # only the bad line is skipped: the other lines of the file still load
        assert "bad:1" in ids
    else:
        assert not any(i.startswith("bad") for i in ids)


def test_utf8_error_line_is_the_line_of_the_first_bad_byte(tmp_path: Path) -> None:
    path = write(tmp_path / "ja.txt", "一行目\n二行目\n三行目".encode() + b"\x80\n" + "四行目\n".encode())
    with pytest.raises(LoaderError, match=r"ja\.txt:3: invalid utf-8") as info:
        CorpusLoader(path).load()
    assert info.value.line == 3


def test_other_encodings(tmp_path: Path) -> None:
    path = write(tmp_path / "sjis.txt", "シフトJISの本文\n".encode("cp932"))
    (doc,) = CorpusLoader(path, encoding="cp932").load()
    assert doc.page_content == "シフトJISの本文\n"
    with pytest.raises(LoaderError, match="sjis.txt:1: invalid utf-8"):
        CorpusLoader(path).load()
    u16 = write(tmp_path / "u16.md", "# 見出し\n本文\n".encode("utf-16"))
    with pytest.raises(LoaderError, match="binary"):
        CorpusLoader(u16).load()
    (doc,) = CorpusLoader(u16, encoding="utf-16").load()
    assert doc.metadata["title"] == "見出し"
    assert file_text(u16, "utf-16")[doc.metadata["body_offset"] :] == doc.page_content


def test_duplicate_doc_ids_raise_naming_both_files(tmp_path: Path) -> None:
    write(tmp_path / "a.md", "---\ndoc_id: shared\n---\nfirst\n")
    write(tmp_path / "b.md", "second\n")
    write(tmp_path / "b.json", '{"doc_id": "shared"}')
    with pytest.raises(LoaderError) as info:
        CorpusLoader(tmp_path).load()
    msg = str(info.value)
    assert "a.md" in msg and "b.md" in msg and "shared" in msg
    assert info.value.field == "doc_id"


def test_duplicate_doc_ids_from_suffix_and_jsonl(tmp_path: Path) -> None:
    write(tmp_path / "x.md", "markdown\n")
    write(tmp_path / "x.txt", "text\n")  # same stem: the default ids keep their suffixes (issue 8)
    write(
        tmp_path / "y.jsonl",
        '{"_id": "x.md", "text": "t"}\n{"_id": "z", "text": "t"}\n{"_id": "z", "text": "u"}\n',
    )
    loader = CorpusLoader(tmp_path, on_error="skip")
    with pytest.warns(LoaderWarning, match="duplicate doc_id") as record:
        docs = loader.load()
    assert [d.metadata["source"] for d in docs] == ["x.md", "x.txt", "y.jsonl:2"]
    assert [d.id for d in docs] == ["x.md", "x.txt", "z"]
    assert docs[2].page_content == "t"  # the first "z" is kept
    assert [(Path(p).name, line) for p, line, _ in loader.stats.skipped] == [("y.jsonl", 1), ("y.jsonl", 3)]
    assert any("x.md" in str(w.message) and "y.jsonl:1" in str(w.message) for w in record)
    with pytest.raises(
        LoaderError, match=r"y\.jsonl:3: field 'doc_id': duplicate doc_id 'z': already used by .*y\.jsonl:2"
    ):
        CorpusLoader(tmp_path / "y.jsonl").load()


# ---------------------------------------------------------------------------- empty documents


def test_empty_documents_are_skipped_with_a_warning(tmp_path: Path) -> None:
    write(tmp_path / "empty.md", "")
    write(tmp_path / "blank.txt", " \n\t\n\u3000\n")
    write(tmp_path / "front_only.md", "---\ntitle: nothing else\n---\n\n")
    write(tmp_path / "empty.jsonl", "\n\n")
    write(tmp_path / "lines.jsonl", '{"text": "kept"}\n{"text": "   "}\n')
    write(tmp_path / "ok.md", "内容\n")
    for mode in ("raise", "skip"):
        loader = CorpusLoader(tmp_path, on_error=mode)
        with pytest.warns(LoaderWarning, match="empty document") as record:
            docs = loader.load()
        assert [d.id for d in docs] == ["lines:1", "ok"]
        assert sum(issubclass(w.category, LoaderWarning) for w in record) == 5
        assert loader.stats.empty == [
            str(tmp_path / "blank.txt"),
            str(tmp_path / "empty.jsonl"),
            str(tmp_path / "empty.md"),
            str(tmp_path / "front_only.md"),
            f"{tmp_path / 'lines.jsonl'}:2",
        ]
        assert loader.stats.files == 6
        assert loader.stats.documents == 2
        assert loader.stats.skipped == []


def test_stats_reset_on_each_pass(tmp_path: Path) -> None:
    write(tmp_path / "a.md", "a\n")
    write(tmp_path / "b.md", "")
    loader = CorpusLoader(tmp_path)
    with pytest.warns(LoaderWarning):
        loader.load()
    with pytest.warns(LoaderWarning):
        loader.load()
    assert loader.stats == LoadStats(files=2, documents=1, skipped=[], empty=[str(tmp_path / "b.md")])


def test_lazy_load_is_lazy(tmp_path: Path) -> None:
    write(tmp_path / "a.md", "first\n")
    write(tmp_path / "b.md", b"\x00binary")
    it = CorpusLoader(tmp_path).lazy_load()
    assert next(it).id == "a"
    with pytest.raises(LoaderError, match="b.md"):
        next(it)


# ---------------------------------------------------------------------------- argument errors


def test_missing_path_raises_file_not_found(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "gone.md"
    with pytest.raises(FileNotFoundError, match="gone.md"):
        CorpusLoader(missing)
    with pytest.raises(FileNotFoundError, match="nope"):
        CorpusLoader([tmp_path, tmp_path / "nope"])
    with pytest.raises(FileNotFoundError, match="no-root"):
        CorpusLoader(tmp_path, root=tmp_path / "no-root")


def test_path_removed_after_construction(tmp_path: Path) -> None:
    path = write(tmp_path / "a.md", "x\n")
    loader = CorpusLoader(path)
    path.unlink()
    with pytest.raises(FileNotFoundError, match="a.md"):
        loader.load()


@pytest.mark.parametrize("name", ["table.csv", "page.html", "README", "data.JSON", "meta.json"])
def test_explicit_unsupported_file_raises_value_error(tmp_path: Path, name: str) -> None:
    path = write(tmp_path / name, "{}")
    with pytest.raises(ValueError, match=name.replace(".", r"\.")):
        CorpusLoader(path)


def test_uppercase_suffix_is_supported(tmp_path: Path) -> None:
    path = write(tmp_path / "NOTE.MD", "# Upper\n")
    (doc,) = CorpusLoader(path).load()
    assert doc.metadata["title"] == "Upper"


@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"on_error": "ignore"}, ValueError, "on_error"),
        ({"encoding": "no-such-codec"}, ValueError, "no-such-codec"),
    ],
)
def test_bad_arguments(tmp_path: Path, kwargs: dict, exc: type, match: str) -> None:
    with pytest.raises(exc, match=match):
        CorpusLoader(tmp_path, **kwargs)


def test_bad_paths_arguments(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="empty"):
        CorpusLoader([])
    with pytest.raises(TypeError):
        CorpusLoader([tmp_path, 3])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="bytes"):
        CorpusLoader(b"corpus")  # type: ignore[arg-type]
    other = tmp_path / "other"
    other.mkdir()
    write(tmp_path / "kb" / "a.md", "x\n")
    with pytest.raises(ValueError, match="not inside root"):
        CorpusLoader(tmp_path / "kb", root=other)
    with pytest.raises(ValueError, match="folder"):
        CorpusLoader(tmp_path / "kb", root=tmp_path / "kb" / "a.md")


# -- regressions from a fresh-user trial ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "line",
    ['{"text": "lone \\ud800 here"}', '{"text": "ok", "note": "bad \\udc80"}'],
)
def test_regression_lone_surrogates_are_data_errors_with_file_and_line(tmp_path: Path, line: str):
    f = tmp_path / "c.jsonl"
    f.write_text('{"text": "fine"}\n' + line + "\n", "utf-8")
    with pytest.raises(LoaderError, match=r"c\.jsonl:2.*surrogate"):
        CorpusLoader(f).load()
    with pytest.warns(LoaderWarning, match="surrogate"):
        docs = CorpusLoader(f, on_error="skip").load()
    assert [d.page_content for d in docs] == ["fine"]


def test_regression_jsonl_locator_names_the_line(tmp_path: Path):
    f = tmp_path / "corpus.jsonl"
    f.write_text('{"text": "a"}\n\n{"text": "b"}\n', "utf-8")
    assert [d.metadata["source"] for d in CorpusLoader(f).load()] == ["corpus.jsonl:1", "corpus.jsonl:3"]


def test_regression_langchain_style_nested_metadata_is_flattened(tmp_path: Path):
    f = tmp_path / "docs.jsonl"
    f.write_text('{"text": "x", "metadata": {"sensitivity": "RESTRICTED", "lang": "ja"}}\n', "utf-8")
    md = CorpusLoader(f).load()[0].metadata
    assert md["sensitivity"] == "RESTRICTED" and md["lang"] == "ja" and "metadata" not in md


def test_regression_sidecar_cannot_declassify_restricted(tmp_path: Path):
    (tmp_path / "a.md").write_text("---\nsensitivity: RESTRICTED\n---\n本文", "utf-8")
    (tmp_path / "a.json").write_text('{"sensitivity": "PUBLIC", "title": "T"}', "utf-8")
    with pytest.warns(LoaderWarning, match="keeping RESTRICTED"):
        md = CorpusLoader(tmp_path).load()[0].metadata
    assert md["sensitivity"] == "RESTRICTED" and md["title"] == "T"  # the sidecar still wins elsewhere


def test_regression_unknown_sensitivity_label_warns(tmp_path: Path):
    (tmp_path / "a.md").write_text("---\nsensitivity: RESTRICED\n---\n本文", "utf-8")
    with pytest.warns(LoaderWarning, match="unknown sensitivity label 'RESTRICED'"):
        CorpusLoader(tmp_path).load()
