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


@pytest.mark.parametrize("kind", ["bm25", "dense", "hybrid"])
def test_a_file_added_to_a_saved_index_is_refused_and_kept(tmp_path: Path, kind: str):
    """Gap A (regression): save; the user adds mynotes.txt beside the index; a second save deleted it."""
    r = _retrievers()[kind]
    target = tmp_path / "idx"
    r.save(target)
    before = sorted(p.name for p in target.iterdir())
    (target / "mynotes.txt").write_text("mine", "utf-8")
    with pytest.raises(FileExistsError, match=r"idx: besides a saved index it holds mynotes\.txt"):
        r.save(target)
    assert sorted(p.name for p in target.iterdir()) == sorted([*before, "mynotes.txt"])
    assert (target / "mynotes.txt").read_text("utf-8") == "mine"
    assert [p.name for p in tmp_path.iterdir()] == ["idx"]
    (target / "mynotes.txt").unlink()
    r.save(target)  # once the note is moved out, the save replaces its own index again


def test_a_file_added_inside_a_hybrid_channel_is_refused_and_kept(tmp_path: Path):
    r = _retrievers()["hybrid"]
    r.save(tmp_path / "idx")
    (tmp_path / "idx" / "channel-0" / "mynotes.txt").write_text("mine", "utf-8")
    with pytest.raises(FileExistsError, match=r"channel-0/mynotes\.txt"):
        r.save(tmp_path / "idx")
    assert (tmp_path / "idx" / "channel-0" / "mynotes.txt").read_text("utf-8") == "mine"


@pytest.mark.parametrize("kind", ["bm25", "dense", "hybrid"])
@pytest.mark.parametrize("config", ['{"my": "app config"}', '{"format": "other-tool/1"}', "not json", "[1]"])
def test_a_users_own_settings_file_is_not_taken_for_a_saved_index(tmp_path: Path, kind: str, config: str):
    """Gap B (regression): a folder with the user's own retriever.json (or hybrid.json) and thesis.docx was
    replaced because only the marker's name was checked."""
    folder = tmp_path / "project"
    folder.mkdir()
    for name in ("retriever.json", "hybrid.json"):
        (folder / name).write_text(config, "utf-8")
    (folder / "thesis.docx").write_bytes(b"years of work")
    with pytest.raises(FileExistsError, match=r"project: the directory is not empty and holds no saved index"):
        _retrievers()[kind].save(folder)
    assert sorted(p.name for p in folder.iterdir()) == ["hybrid.json", "retriever.json", "thesis.docx"]
    assert (folder / "retriever.json").read_text("utf-8") == config
    assert [p.name for p in tmp_path.iterdir()] == ["project"]


def test_the_faiss_index_save_refuses_foreign_entries_and_a_foreign_marker(tmp_path: Path):
    import numpy as np

    from langchain_ragspine.backends.directory.faiss_index import FaissVectorIndex

    index = FaissVectorIndex(np.eye(2, 4, dtype=np.float32), ["a", "b"])
    index.save(tmp_path / "v")
    (tmp_path / "v" / "mynotes.txt").write_text("mine", "utf-8")
    with pytest.raises(FileExistsError, match=r"mynotes\.txt"):
        index.save(tmp_path / "v")
    assert (tmp_path / "v" / "mynotes.txt").exists()
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "vector_index.json").write_text('{"my": "app config"}', "utf-8")
    with pytest.raises(FileExistsError, match="holds no saved index"):
        index.save(tmp_path / "w")
    assert [p.name for p in (tmp_path / "w").iterdir()] == ["vector_index.json"]
