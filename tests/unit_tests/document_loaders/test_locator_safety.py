"""resolve_source_locator stays inside the corpus root (real paths) and returns no RESTRICTED text unless asked.

Issue 25: a symlink inside the root led to a file outside it, and any locator returned RESTRICTED text.
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
from langchain_ragspine.errors import LoaderError
from langchain_ragspine.text_splitters import ParagraphTextSplitter

CANARY = "CANARY-7f3e-secret"


def _symlink(link: Path, target: Path) -> None:
    try:
        link.symlink_to(target, target_is_directory=target.is_dir())
    except (OSError, NotImplementedError):  # pragma: no cover - a platform without symlinks
        pytest.skip("symlinks are not available here")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    other = tmp_path / "outside"
    other.mkdir()
    (other / "secret.md").write_text(f"{CANARY} payroll\n", "utf-8")
    return other


@pytest.fixture
def root(tmp_path: Path) -> Path:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "public.md").write_text("# Public\n\nThe zebra lives in Kenya.\n", "utf-8")
    return corpus


def test_a_symlinked_file_out_of_the_root_is_refused(root: Path, outside: Path) -> None:
    _symlink(root / "link.md", outside / "secret.md")
    with pytest.raises(ValueError, match=r"'link.md#0-10'.*leaves the corpus root"):
        resolve_source_locator("link.md#0-10", root)
    with pytest.raises(ValueError, match="leaves the corpus root"):  # also when RESTRICTED text is allowed
        resolve_source_locator("link.md#0-10", root, allow_restricted=True)


def test_a_symlinked_folder_out_of_the_root_is_refused(root: Path, outside: Path) -> None:
    _symlink(root / "sub", outside)
    with pytest.raises(ValueError, match="leaves the corpus root"):
        resolve_source_locator("sub/secret.md#0-10", root)


def test_a_root_given_through_a_symlink_and_a_link_inside_it_resolve(root: Path, tmp_path: Path) -> None:
    _symlink(tmp_path / "alias", root)
    _symlink(root / "again.md", root / "public.md")
    assert resolve_source_locator("public.md#0-8", tmp_path / "alias") == "# Public"
    assert resolve_source_locator("again.md#0-8", root) == "# Public"


def test_absolute_and_dotdot_paths_are_refused(root: Path, outside: Path) -> None:
    for bad in (f"{outside / 'secret.md'}#0-5", "../outside/secret.md#0-5", "a/../../outside/secret.md#0-5"):
        with pytest.raises(ValueError, match="relative to the corpus root"):
            resolve_source_locator(bad, root)


@pytest.mark.parametrize(
    ("files", "locator"),
    [
        ({"fm.md": f"---\nsensitivity: RESTRICTED\n---\n{CANARY} in the body\n"}, "fm.md#31-45"),
        ({"fm.md": f"---\nSensitivity: ｒｅｓｔｒｉｃｔｅｄ\n---\n{CANARY} in the body\n"}, "fm.md#0-20"),
        ({"side.md": f"{CANARY} body\n", "side.json": '{"sensitivity": "RESTRICTED"}'}, "side.md#0-10"),
        ({"mixed.md": f"---\nsensitivity: PUBLIC\n---\n{CANARY}\n", "mixed.json": '{"sensitivity": "RESTRICTED"}'},
         "mixed.md#0-5"),
        ({"c.jsonl": f'{{"text": "open"}}\n{{"text": "{CANARY}", "sensitivity": "RESTRICTED"}}\n'}, "c.jsonl:2#0-6"),
        ({"d.jsonl": f'{{"text": "{CANARY}"}}\n', "d.json": '{"sensitivity": ["INTERNAL", "RESTRICTED"]}'},
         "d.jsonl:1#0-6"),
    ],
    ids=["front-matter", "front-matter-folded", "sidecar", "sidecar-wins", "jsonl-field", "jsonl-sidecar"],
)
@pytest.mark.filterwarnings("ignore::langchain_ragspine.document_loaders.LoaderWarning")
def test_a_restricted_source_needs_allow_restricted(root: Path, files: dict[str, str], locator: str) -> None:
    for name, text in files.items():
        (root / name).write_text(text, "utf-8")
    with pytest.raises(RestrictedSourceError, match=r"RESTRICTED source.*allow_restricted=True") as err:
        resolve_source_locator(locator, root)
    assert err.value.locator == locator and isinstance(err.value, PermissionError)
    assert resolve_source_locator(locator, root, allow_restricted=True)  # asked for by name: the text


def test_chunk_locators_of_an_ingested_corpus_resolve_except_the_restricted_ones(root: Path) -> None:
    (root / "secret.md").write_text(f"---\nsensitivity: RESTRICTED\n---\n{CANARY}\n\nmore\n", "utf-8")
    chunks = ParagraphTextSplitter().split_documents(CorpusLoader(root).load())
    for c in chunks:
        if c.metadata["sensitivity"] == "RESTRICTED":
            with pytest.raises(RestrictedSourceError):
                resolve_source_locator(c.metadata["source_locator"], root)
            assert resolve_source_locator(c.metadata["source_locator"], root, allow_restricted=True) == c.page_content
        else:
            assert resolve_source_locator(c.metadata["source_locator"], root) == c.page_content


def test_a_link_to_a_restricted_file_inside_the_root_is_refused(root: Path) -> None:
    # the loader reads the sidecar beside the path it walks: the link has none, its target's says RESTRICTED
    (root / "private").mkdir()
    (root / "private" / "memo.md").write_text(f"{CANARY}\n", "utf-8")
    (root / "private" / "memo.json").write_text('{"sensitivity": "RESTRICTED"}', "utf-8")
    _symlink(root / "memo.md", root / "private" / "memo.md")
    with pytest.raises(RestrictedSourceError):
        resolve_source_locator("memo.md#0-6", root)


def test_unreadable_labels_are_refused(root: Path) -> None:
    (root / "bad.md").write_text(f"---\nsensitivity: [unclosed\n---\n{CANARY}\n", "utf-8")
    with pytest.raises(LoaderError, match="bad.md"):
        resolve_source_locator("bad.md#0-6", root)
    assert resolve_source_locator("bad.md#0-3", root, allow_restricted=True) == "---"
    # a JSONL line whose label the loader refuses (a sensitivity must be a string or a list of strings)
    (root / "e.jsonl").write_text(f'{{"text": "{CANARY}", "sensitivity": {{"level": 3}}}}\n', "utf-8")
    with pytest.warns(LoaderWarning), pytest.raises(RestrictedSourceError, match="label cannot be read"):
        resolve_source_locator("e.jsonl:1#0-6", root)


def test_another_broken_jsonl_line_does_not_block_a_readable_one(root: Path) -> None:
    (root / "f.jsonl").write_text('not json\n{"text": "open data", "sensitivity": "PUBLIC"}\n', "utf-8")
    with pytest.warns(LoaderWarning, match="f.jsonl:1"):
        assert resolve_source_locator("f.jsonl:2#0-4", root) == "open"


def test_a_missing_file_is_still_file_not_found(root: Path) -> None:
    with pytest.raises(FileNotFoundError):
        resolve_source_locator("missing.md#0-1", root)
    assert not os.path.exists(root / "missing.md")
