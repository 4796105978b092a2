"""save() never deletes what it did not write: a file, or a non-empty directory that is not a previous save of the
same kind, is refused with FileExistsError and left untouched (regression: a new-user trial saved a retriever over a
project folder and over a file, and both were replaced)."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.documents import Document

from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.retrievers import BM25Retriever, DenseRetriever, HybridRetriever

DOCS = [
    Document(page_content="梅雨は六月に始まる", metadata={"chunk_id": "a#0"}),
    Document(page_content="The rainy season starts in June.", metadata={"chunk_id": "b#0"}),
]


def _retrievers():
    emb = HashingEmbeddings(32)
    return {
        "bm25": BM25Retriever.from_documents(DOCS, k=2),
        "dense": DenseRetriever.from_documents(DOCS, emb, k=2),
        "hybrid": HybridRetriever.from_documents(DOCS, emb, k=2),
    }


@pytest.mark.parametrize("kind", ["bm25", "dense", "hybrid"])
def test_a_folder_of_user_files_is_refused_and_kept(tmp_path: Path, kind: str):
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "thesis.docx").write_bytes(b"years of work")
    with pytest.raises(FileExistsError, match=r"project.*not empty.*holds no saved index"):
        _retrievers()[kind].save(folder)
    assert sorted(p.name for p in folder.iterdir()) == ["thesis.docx"]
    assert (folder / "thesis.docx").read_bytes() == b"years of work"
    assert [p.name for p in tmp_path.iterdir()] == ["project"]  # no temporary or .old sibling left behind


@pytest.mark.parametrize("kind", ["bm25", "dense", "hybrid"])
def test_a_file_is_refused_and_kept(tmp_path: Path, kind: str):
    f = tmp_path / "notes.txt"
    f.write_text("keep me", "utf-8")
    with pytest.raises(FileExistsError, match=r"notes\.txt.*not a directory"):
        _retrievers()[kind].save(f)
    assert f.read_text("utf-8") == "keep me"
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


@pytest.mark.parametrize("kind", ["bm25", "dense", "hybrid"])
def test_a_new_an_empty_or_a_previously_saved_directory_is_written(tmp_path: Path, kind: str):
    r = _retrievers()[kind]
    cls = type(r)
    kw = {} if kind == "bm25" else {"embedding": HashingEmbeddings(32)}
    (tmp_path / "empty").mkdir()
    for target in (tmp_path / "new", tmp_path / "empty", tmp_path / "new"):  # the last one: replacing a save
        r.save(target)
        assert [d.id for d in cls.load(target, **kw).invoke("梅雨")] == [d.id for d in r.invoke("梅雨")]


def test_a_symlink_is_refused(tmp_path: Path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(FileExistsError, match="not a directory"):
        _retrievers()["bm25"].save(tmp_path / "link")
    assert (tmp_path / "link").is_symlink() and real.is_dir()
