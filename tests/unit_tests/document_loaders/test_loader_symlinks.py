"""Issue 25 §4a and "other": a file's label does not depend on the name it is reached by, and nothing outside the
corpus root is loaded.

The loader deduplicated files by real path and kept the first name in sort order; when that name was a symlink
(``alias.md`` sorts before ``secret.md``), the real file's sidecar was never read, the document was indexed INTERNAL
and answers carried its text, while ``resolve_source_locator`` refused it as RESTRICTED.  A symlink to a file
outside the root was indexed; a hard link was indexed a second time under its own (missing) sidecar's label.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from langchain_ragspine.document_loaders import (
    CorpusLoader,
    LoaderWarning,
    RestrictedSourceError,
    resolve_source_locator,
)
from langchain_ragspine.document_loaders.corpus import names_of, real_path_inside
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.sources import open_retriever, search
from langchain_ragspine.sensitivity import is_restricted
from langchain_ragspine.text_splitters import ParagraphTextSplitter
from tests.unit_tests.document_loaders.test_labels_unreadable import load
from tests.unit_tests.document_loaders.test_locator_safety import _symlink

CANARY = "ZEBRACANARY7731"


def _hardlink(link: Path, target: Path) -> None:
    try:
        os.link(target, link)
    except (OSError, NotImplementedError):  # pragma: no cover - a file system without hard links
        pytest.skip("hard links are not available here")


def refused_by_resolver(locator: str, root: Path) -> bool:
    """Whether ``resolve_source_locator`` refuses ``locator`` as RESTRICTED."""
    try:
        resolve_source_locator(locator, root)
    except RestrictedSourceError:
        return True
    return False


# ---------------------------------------------------------------------------------- one file, several names

#: ``(alias name, where the label is)``: the alias sorts before or after the file; the label is in the real file's
#: sidecar (either spelling), in the alias's own sidecar, or in the file's front matter.
ALIAS_CASES = {
    "alias_first_real_sidecar": ("alias.md", {"secret.json": '{"sensitivity": "RESTRICTED"}'}),
    "alias_last_real_sidecar": ("zz_alias.md", {"secret.json": '{"sensitivity": "RESTRICTED"}'}),
    "alias_first_full_name_sidecar": ("alias.md", {"secret.md.json": '{"sensitivity": "RESTRICTED"}'}),
    "alias_own_sidecar": ("alias.md", {"alias.json": '{"sensitivity": "RESTRICTED"}'}),
    "alias_last_own_sidecar": ("zz_alias.md", {"zz_alias.json": '{"sensitivity": "RESTRICTED"}'}),
    "sidecars_disagree": (
        "alias.md",
        {"secret.json": '{"sensitivity": "PUBLIC"}', "alias.json": '{"sensitivity": "RESTRICTED"}'},
    ),
    "alias_in_a_subfolder": ("sub/alias.md", {"secret.json": '{"sensitivity": "RESTRICTED"}'}),
}


@pytest.mark.parametrize("case", sorted(ALIAS_CASES))
def test_regression_a_symlink_alias_keeps_the_label_of_its_file(tmp_path: Path, case: str) -> None:
    alias, sidecars = ALIAS_CASES[case]
    root = tmp_path / "c"
    root.mkdir()
    (root / "secret.md").write_text(f"payroll falcon {CANARY} secret\n", "utf-8")
    (root / "pub.md").write_text("public falcon text\n", "utf-8")
    for name, text in sidecars.items():
        (root / name).write_text(text, "utf-8")
    (root / alias).parent.mkdir(exist_ok=True)
    _symlink(root / alias, root / "secret.md")

    _, docs, _ = load(root)
    by_source = {d.metadata["source"]: d for d in docs}
    assert sorted(by_source) == ["pub.md", "secret.md"]  # loaded once, under the real file's name
    assert by_source["secret.md"].metadata["sensitivity"] == "RESTRICTED"
    assert by_source["pub.md"].metadata["sensitivity"] == "INTERNAL"
    # the resolver agrees with the loader, whichever name a locator uses
    for name in ("secret.md", alias):
        assert refused_by_resolver(f"{name}#0-10", root), name
    assert resolve_source_locator("pub.md#0-6", root) == "public"


#: ``(document name, sidecar name)`` that differ only as a case-insensitive, normalizing file system ignores (NFC and
#: case-folded): the sidecar is the document's (issue 25, third trial: they were silently ignored).
SIDECAR_NAME_CASES = {
    "nfc_doc_nfd_sidecar": ("\u00e9t\u00e9.md", "e\u0301te\u0301.json"),
    "nfd_doc_nfc_sidecar": ("e\u0301te\u0301.md", "\u00e9t\u00e9.json"),
    "nfc_doc_nfd_full_name_sidecar": ("\u00e9t\u00e9.md", "e\u0301te\u0301.md.json"),
    "stem_case": ("notes.md", "Notes.json"),
    "full_name_suffix_case": ("notes.md", "notes.MD.json"),
    "full_name_case": ("Notes.md", "NOTES.MD.json"),
    "casefold_sharp_s": ("stra\u00dfe.md", "STRASSE.json"),  # casefold, not lower: ß is ss
    "doc_suffix_case": ("notes.MD", "notes.md.json"),
}


@pytest.mark.parametrize("case", sorted(SIDECAR_NAME_CASES))
def test_regression_a_sidecar_named_as_a_case_insensitive_file_system_matches_is_read(
    tmp_path: Path, case: str
) -> None:
    doc, side = SIDECAR_NAME_CASES[case]
    root = tmp_path / "c"
    root.mkdir()
    (root / doc).write_text(f"payroll falcon {CANARY} secret\n", "utf-8")
    (root / side).write_text('{"sensitivity": "RESTRICTED"}', "utf-8")
    (root / "pub.md").write_text("public falcon text\n", "utf-8")
    _, docs, messages = load(root)
    labels = {d.metadata["source"]: d.metadata["sensitivity"] for d in docs}
    assert labels == {doc: "RESTRICTED", "pub.md": "INTERNAL"}
    assert any(str(root / side) in m and "read as the sidecar" in m for m in messages)
    assert refused_by_resolver(f"{doc}#0-10", root)  # the resolver reads the same sidecar
    summary = ingest(root, tmp_path / "s", mode="bm25", progress=False)
    assert summary.skipped == 0
    results = search(open_retriever(tmp_path / "s", mode="bm25"), "payroll falcon secret", k=10)
    assert [d.metadata["source"] for d in results] == ["pub.md"]


def test_sidecars_whose_names_differ_only_in_case_are_both_read(tmp_path: Path) -> None:
    # on a case-sensitive file system both files are there: the strictest label wins, as for both spellings
    (tmp_path / "notes.md").write_text("body\n", "utf-8")
    (tmp_path / "notes.json").write_text('{"sensitivity": "PUBLIC", "title": "T"}', "utf-8")
    (tmp_path / "NOTES.json").write_text('{"sensitivity": "RESTRICTED"}', "utf-8")
    _, [doc], messages = load(tmp_path)
    assert (doc.metadata["sensitivity"], doc.metadata["title"]) == ("RESTRICTED", "T")
    assert any("keeping 'RESTRICTED'" in m for m in messages)


def test_regression_ingest_through_a_symlink_alias_never_returns_the_text(tmp_path: Path) -> None:
    # the trial's repro_symlink_alias.sh: the document was indexed INTERNAL and the answer carried the canary
    root = tmp_path / "c"
    root.mkdir()
    (root / "secret.md").write_text(f"payroll falcon {CANARY} secret\n", "utf-8")
    (root / "secret.json").write_text('{"sensitivity": "RESTRICTED"}', "utf-8")
    (root / "pub.md").write_text("payroll falcon public notes\n", "utf-8")
    _symlink(root / "alias.md", root / "secret.md")
    summary = ingest(root, tmp_path / "s", mode="bm25", progress=False)
    assert summary.skipped == 0
    results = search(open_retriever(tmp_path / "s", mode="bm25"), "payroll falcon secret", k=10)
    assert [d.metadata["source"] for d in results] == ["pub.md"]
    assert CANARY not in repr(results)


def test_regression_a_hard_link_is_one_document_with_the_strictest_label(tmp_path: Path) -> None:
    root = tmp_path / "c"
    root.mkdir()
    (root / "secret.md").write_text(f"{CANARY} secret\n", "utf-8")
    (root / "secret.json").write_text('{"sensitivity": "RESTRICTED"}', "utf-8")
    _hardlink(root / "copy.md", root / "secret.md")  # sorts first, no sidecar of its own
    _, docs, _ = load(root)
    [doc] = docs  # was two documents, copy.md INTERNAL
    assert doc.metadata["source"] == "copy.md"  # a hard link cannot be told from the original: the first name
    assert doc.metadata["sensitivity"] == "RESTRICTED"
    for name in ("copy.md", "secret.md"):
        assert refused_by_resolver(f"{name}#0-10", root), name


def test_the_names_of_a_file_and_the_label_of_the_first_name_given(tmp_path: Path) -> None:
    root = tmp_path / "c"
    (root / "private").mkdir(parents=True)
    (root / "private" / "memo.md").write_text("memo\n", "utf-8")
    _symlink(root / "a.md", root / "private" / "memo.md")
    _symlink(root / "b.md", root / "a.md")  # a symlink to a symlink
    (root / "other.md").write_text("other\n", "utf-8")
    assert [p.name for p in names_of(root / "b.md", root)] == ["a.md", "b.md", "memo.md"]
    assert names_of(root / "other.md", root) == [root / "other.md"]
    (root / "b.json").write_text('{"sensitivity": "RESTRICTED", "title": "B"}', "utf-8")
    loader, docs, _ = load(root)
    meta = {d.metadata["source"]: d.metadata for d in docs}
    assert meta["private/memo.md"]["sensitivity"] == "RESTRICTED"  # a label beside any name counts
    assert meta["private/memo.md"]["title"] == "B"
    assert loader.stats.files == 2


def test_two_sidecars_of_one_file_that_disagree_are_warned_about(tmp_path: Path) -> None:
    (tmp_path / "doc.md").write_text("body\n", "utf-8")
    (tmp_path / "doc.json").write_text('{"sensitivity": "PUBLIC", "title": "A"}', "utf-8")
    _symlink(tmp_path / "alias.md", tmp_path / "doc.md")
    (tmp_path / "alias.json").write_text('{"sensitivity": "CONFIDENTIAL", "title": "B"}', "utf-8")
    _, [doc], messages = load(tmp_path)
    assert (doc.metadata["sensitivity"], doc.metadata["title"]) == ("CONFIDENTIAL", "A")
    assert any("doc.json" in m and "alias.json" in m and "'sensitivity'" in m for m in messages), messages
    assert any("'title'" in m and "keeping 'A'" in m for m in messages), messages


# ---------------------------------------------------------------------------------- outside the root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    other = tmp_path / "outside"
    other.mkdir()
    (other / "o.md").write_text(f"outside {CANARY}\n", "utf-8")
    return other


def test_regression_a_symlink_out_of_the_root_is_not_loaded(tmp_path: Path, outside: Path) -> None:
    root = tmp_path / "c"
    root.mkdir()
    (root / "pub.md").write_text("public\n", "utf-8")
    _symlink(root / "link_out.md", outside / "o.md")
    _symlink(root / "dir_out", outside)
    loader, docs, messages = load(root)
    assert [d.metadata["source"] for d in docs] == ["pub.md"]
    assert loader.stats.outside == [str(root / "dir_out"), str(root / "link_out.md")]
    for name in ("link_out.md", "dir_out"):
        [message] = [m for m in messages if str(root / name) in m]
        assert "outside the corpus root" in message and str(outside) in message
    assert loader.stats.skipped == []  # not a data problem: an ingest still retracts missing documents
    # the same rule as the resolver's
    assert real_path_inside(root / "link_out.md", root) is None
    with pytest.raises(ValueError, match="leaves the corpus root"):
        resolve_source_locator("link_out.md#0-7", root)
    assert real_path_inside(root / "pub.md", root) == (root / "pub.md").resolve()


def test_regression_ingest_leaves_out_a_symlink_out_of_the_root(tmp_path: Path, outside: Path) -> None:
    root = tmp_path / "c"
    root.mkdir()
    (root / "pub.md").write_text("public outside notes\n", "utf-8")
    _symlink(root / "link_out.md", outside / "o.md")
    with pytest.warns(LoaderWarning, match="link_out.md.*outside the corpus root"):
        ingest(root, tmp_path / "s", mode="bm25", progress=False)
    results = search(open_retriever(tmp_path / "s", mode="bm25"), "outside", k=10)
    assert [d.metadata["source"] for d in results] == ["pub.md"]


def test_regression_a_path_given_that_resolves_out_of_its_root_isrefused_by_resolver(tmp_path: Path, outside: Path) -> None:
    root = tmp_path / "c"
    root.mkdir()
    _symlink(root / "link_out.md", outside / "o.md")
    _symlink(root / "dir_out", outside)
    for path, kwargs in [(root / "link_out.md", {}), (root / "dir_out", {"root": root})]:
        with pytest.raises(ValueError, match=r"resolves to .*outside its root") as info:
            CorpusLoader(path, **kwargs)
        assert str(path) in str(info.value)
    # a folder given as its own root is read where it is: its files are inside it
    assert [d.metadata["source"] for d in CorpusLoader(root / "dir_out").load()] == ["o.md"]


def test_symlinks_inside_the_root_stillload(tmp_path: Path) -> None:
    root = tmp_path / "c"
    (root / "real").mkdir(parents=True)
    (root / "real" / "a.md").write_text("alpha\n", "utf-8")
    _symlink(root / "link.md", root / "real" / "a.md")
    _symlink(root / "linked_dir", root / "real")  # not followed (its files load by their names)
    _symlink(tmp_path / "alias", root)  # the root given through a symlink
    for given in (root, tmp_path / "alias"):
        loader, docs, messages = load(given)
        assert [d.metadata["source"] for d in docs] == ["real/a.md"]
        assert loader.stats.outside == [] and messages == []
    assert CorpusLoader(root / "link.md").load()[0].page_content == "alpha\n"  # inside its parent folder


def test_every_chunk_locator_agrees_with_the_loader(tmp_path: Path) -> None:
    root = tmp_path / "c"
    (root / "d").mkdir(parents=True)
    (root / "d" / "x.md").write_text(f"{CANARY} x\n\nmore x\n", "utf-8")
    (root / "d" / "x.md.json").write_text('{"sensitivity": "RESTRICTED"}', "utf-8")
    (root / "y.md").write_text("y text\n\nmore y\n", "utf-8")
    (root / "z.jsonl").write_text('{"text": "z line"}\n', "utf-8")
    _symlink(root / "a.md", root / "d" / "x.md")
    _symlink(root / "b.md", root / "y.md")
    _symlink(root / "a.jsonl", root / "z.jsonl")
    (root / "a.json").write_text('{"sensitivity": "RESTRICTED"}', "utf-8")  # the sidecar of a.md and a.jsonl
    chunks = ParagraphTextSplitter(chunk_size=8, chunk_overlap=0).split_documents(CorpusLoader(root).load())
    assert {c.metadata["source"] for c in chunks} == {"d/x.md", "y.md", "z.jsonl:1"}
    for chunk in chunks:
        assert refused_by_resolver(chunk.metadata["source_locator"], root) == is_restricted(chunk.metadata), chunk.metadata
    assert is_restricted(next(c for c in chunks if c.metadata["source"] == "z.jsonl:1").metadata)
