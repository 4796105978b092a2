"""Issue 27 §2: ``RagSpineVectorStore.from_texts(texts, embedding)`` — and ``from_documents``, and the constructor
without a location — work in a temporary store, as ``InMemoryVectorStore.from_texts`` / ``FAISS.from_texts`` do.

Before, ``from_texts`` without ``store_dir=`` was a ``TypeError`` and the constructor required a directory.  Now a
directory made by ``tempfile.mkdtemp`` holds the store and is deleted when the store is closed, garbage-collected
or the interpreter exits; ``store_dir=`` keeps it.
"""

from __future__ import annotations

import gc
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from langchain_core.documents import Document

import langchain_ragspine
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.vectorstores import RagSpineVectorStore

EMB = HashingEmbeddings(64)
ROOT = Path(langchain_ragspine.__file__).resolve().parents[1]


def test_regression_from_texts_needs_no_location_and_cleans_up_on_close() -> None:
    store = RagSpineVectorStore.from_texts(["梅雨は六月から。", "北京是中国的首都。"], EMB, [{"d": 1}, {"d": 2}],
                                           ids=["t", "b"])
    where = store.store_dir
    assert store.temporary and where is not None and where.is_dir()
    assert where.parent == Path(tempfile.gettempdir()) and where.name.startswith("ragspine-vectorstore-")
    assert [d.id for d in store.similarity_search("梅雨", k=1)] == ["t"]
    assert [d.id for d in store.as_retriever(search_kwargs={"k": 1}).invoke("北京")] == ["b"]
    store.close()
    assert not where.exists()
    store.close()  # idempotent


def test_from_documents_and_the_constructor_make_temporary_stores_too() -> None:
    docs = [Document(page_content="梅雨前線", id="f"), Document(page_content="rainy season", metadata={"lang": "en"})]
    a = RagSpineVectorStore.from_documents(docs, EMB)
    b = RagSpineVectorStore(embedding=EMB)
    c = RagSpineVectorStore(EMB)  # as InMemoryVectorStore(embedding)
    assert a.get_by_ids(["f"])[0].page_content == "梅雨前線"
    assert len(a.similarity_search("rain", k=10)) == 2
    assert b.add_texts(["x"], ids=["x"]) == ["x"] and c.similarity_search("x") == []
    dirs = {s.store_dir for s in (a, b, c)}
    assert len(dirs) == 3 and all(s.temporary for s in (a, b, c))
    for s in (a, b, c):
        s.close()
    assert not any(d is not None and d.exists() for d in dirs)


def test_a_garbage_collected_temporary_store_is_removed() -> None:
    store = RagSpineVectorStore.from_texts(["梅雨"], EMB)
    where = store.store_dir
    assert where is not None and where.is_dir()
    del store
    gc.collect()
    assert not where.exists()


@pytest.mark.subprocess
def test_a_temporary_store_is_removed_at_interpreter_exit(tmp_path: Path) -> None:
    script = (
        "from langchain_ragspine.embeddings import HashingEmbeddings\n"
        "from langchain_ragspine.vectorstores import RagSpineVectorStore\n"
        "KEEP = RagSpineVectorStore.from_texts(['梅雨'], HashingEmbeddings(64))\n"
        "print(KEEP.store_dir)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=300,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    where = Path(out.stdout.strip())
    assert where.name.startswith("ragspine-vectorstore-") and not where.exists()


def test_missing_or_doubled_embedding_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"needs embedding="):
        RagSpineVectorStore()
    with pytest.raises(TypeError, match=r"needs embedding="):
        RagSpineVectorStore(tmp_path / "S")
    with pytest.raises(TypeError, match=r"an Embeddings as store_dir and embedding= too"):
        RagSpineVectorStore(EMB, embedding=EMB)
    with pytest.raises(TypeError, match=r"from_texts got unexpected.*'store_dri'.*did you mean 'store_dir'"):
        RagSpineVectorStore.from_texts(["x"], EMB, store_dri=tmp_path / "S")
    assert not (tmp_path / "S").exists()
