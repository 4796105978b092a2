"""Issue 25 (fresh-clone trial b): a store file that is not a regular file is damaged, never read.

``index.json`` replaced by a FIFO made ``ragspine search`` and ``ragspine ingest`` block forever (the loader refused a
FIFO sidecar; the store read it).  Every file the store reads now goes through one check
(``backends/directory/regular_files.py``: ``os.stat``/``S_ISREG``, or ``O_NONBLOCK`` + ``fstat``): a FIFO, a folder or a
symlink to ``/dev/zero`` in place of a file takes the path a damaged file takes — a search warns
(``StaleIndexWarning``) and answers from the chunk store, a chunk store that is not a file is a ``StoreError``
naming it, and ``ingest`` rewrites the file or refuses naming it.

Each call runs in a daemon thread joined with a generous bound: without the fix it would block forever, and the
bound turns that into a failure instead of a hung suite (it measures nothing).
"""

from __future__ import annotations

import os
import stat
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from langchain_ragspine.backends.directory.chunk_store import ChunkStore
from langchain_ragspine.backends.directory.embedding_cache import EmbeddingCache
from langchain_ragspine.backends.directory.faiss_index import FaissVectorIndex
from langchain_ragspine.backends.directory.regular_files import check_regular, open_regular
from langchain_ragspine.errors import StaleIndexWarning, StoreError
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.sources import open_retriever

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs (POSIX)")

#: a bound on a call that must not block (never reached when it works; see the module docstring)
HANG_GUARD_S = 120.0


def _returns(fn: Callable[[], Any]) -> Any:
    """``fn()``'s result (or its exception, raised), failing when it is still blocked after the guard."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            box["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HANG_GUARD_S)
    assert not thread.is_alive(), "blocked: the call read a file that is not a regular file"
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _folder(path: Path) -> None:
    path.mkdir()


def _dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


KINDS: dict[str, Callable[[Path], None]] = {"fifo": _fifo, "folder": _folder, "symlink-to-dev-zero": _dev_zero}
WHAT = {"fifo": "a FIFO", "folder": "a folder", "symlink-to-dev-zero": "a device"}


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, Path]:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("BM25 is a ranking function.\n", "utf-8")
    (corpus / "b.md").write_text("Bread is baked in the oven.\n", "utf-8")
    root = tmp_path / "store"
    ingest(corpus, root, progress=False, mode="bm25")
    return corpus, root


def _replace(path: Path, kind: str) -> None:
    path.unlink()
    KINDS[kind](path)


def _search(root: Path) -> tuple[list[str], list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        docs = _returns(lambda: open_retriever(root, mode="bm25", k=1).invoke("ranking function"))
    return [d.id for d in docs], [str(w.message) for w in caught if issubclass(w.category, StaleIndexWarning)]


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("name", ["index.json", "bm25/manifest.json", "bm25/docs.jsonl", "bm25/retriever.json",
                                  "bm25/bm25s/params.index.json", "bm25/bm25s/data.csc.index.npy"])
def test_a_derived_file_that_is_not_a_regular_file_is_damaged(store, name: str, kind: str) -> None:
    """Regression: ``index.json`` as a FIFO blocked ``search`` and ``ingest`` forever."""
    corpus, root = store
    path = root / name
    _replace(path, kind)
    ids, stale = _search(root)
    assert ids == ["a#0"]  # answered from the chunk store
    assert any(str(path) in m and f"not a regular file: {WHAT[kind]}" in m for m in stale), stale
    try:
        _returns(lambda: ingest(corpus, root, progress=False, mode="bm25"))
    except StoreError as e:  # refused: naming the file
        assert name.split("/")[-1] in str(e), e
        assert kind == "folder" or name == "bm25/retriever.json", e
    else:  # repaired: a regular file again, and the saved indexes trusted
        assert stat.S_ISREG(os.lstat(path).st_mode)
        assert _search(root) == (["a#0"], [])


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("name", ["chunks.sqlite", "chunks.sqlite-wal"])
def test_a_chunk_store_that_is_not_a_regular_file_is_a_store_error(store, name: str, kind: str) -> None:
    corpus, root = store
    path = root / name
    if path.exists():
        path.unlink()
    KINDS[kind](path)
    for read_only in (True, False):
        with pytest.raises(StoreError, match=f"not a regular file: {WHAT[kind]}") as info:
            _returns(lambda: ChunkStore(root / "chunks.sqlite", read_only=read_only))  # noqa: B023
        assert name in str(info.value)
    with pytest.raises(StoreError, match="not a regular file"):
        _search(root)
    with pytest.raises(StoreError, match="not a regular file"):
        _returns(lambda: ingest(corpus, root, progress=False, mode="bm25"))


@pytest.mark.parametrize("kind", list(KINDS))
def test_an_embedding_cache_that_is_not_a_regular_file_is_a_store_error(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "embeddings.sqlite"
    KINDS[kind](path)
    with pytest.raises(StoreError, match=f"embeddings.sqlite.*not a regular file: {WHAT[kind]}"):
        _returns(lambda: EmbeddingCache(path))


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("name", ["index.faiss", "ids.sqlite", "vector_index.json"])
def test_a_faiss_index_file_that_is_not_a_regular_file_is_a_store_error(tmp_path: Path, name: str,
                                                                       kind: str) -> None:
    pytest.importorskip("faiss")
    import numpy as np

    FaissVectorIndex(np.eye(3, dtype=np.float32), ["a", "b", "c"]).save(tmp_path / "vec")
    _replace(tmp_path / "vec" / name, kind)
    with pytest.raises(StoreError, match=f"not a regular file: {WHAT[kind]}"):
        _returns(lambda: FaissVectorIndex.load(tmp_path / "vec"))


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_one_check(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "f"
    assert check_regular(path) is False
    with pytest.raises(FileNotFoundError):
        open_regular(path)
    KINDS[kind](path)
    with pytest.raises(StoreError, match=f"not a regular file: {WHAT[kind]}"):
        check_regular(path)
    with pytest.raises(StoreError, match=f"not a regular file: {WHAT[kind]}"):
        _returns(lambda: open_regular(path))
    (tmp_path / "g").write_bytes(b"x")
    assert check_regular(tmp_path / "g")
    with open_regular(tmp_path / "g") as f:
        assert f.read() == b"x"


# -- the writer lock: .ragspine.lock ------------------------------------------------------------------------------
def _dangling(path: Path) -> None:
    path.symlink_to(path.with_name("elsewhere") / "lock")


def _socket(path: Path) -> None:
    import socket

    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))


LOCK_KINDS: dict[str, Callable[[Path], None]] = {**KINDS, "dangling-symlink": _dangling, "socket": _socket}
LOCK_WHAT = {"fifo": "a FIFO", "folder": "a folder", "symlink-to-dev-zero": "a symbolic link",
             "dangling-symlink": "a symbolic link", "socket": "a socket"}


@pytest.mark.parametrize("kind", list(LOCK_KINDS))
def test_a_lock_file_that_is_not_a_regular_file_is_refused_naming_it(store, kind: str, capsys) -> None:
    """Regression: ``.ragspine.lock`` as a FIFO made every writer fail with a bare ``Invalid argument`` (and a
    reader's test of the lock, ``writer_pid``, blocked on it forever); a symlink to nothing made the writer create
    the file it points to, outside the store."""
    from langchain_ragspine.backends.directory.lock import LOCK_FILE, writer_lock, writer_pid
    from langchain_ragspine.cli import main
    from langchain_ragspine.embeddings import HashingEmbeddings
    from langchain_ragspine.vectorstores import RagSpineVectorStore

    corpus, root = store
    lock = root / LOCK_FILE
    lock.unlink()
    LOCK_KINDS[kind](lock)
    before = sorted(p.name for p in root.iterdir())
    vectors = RagSpineVectorStore(root, HashingEmbeddings(64))
    for write in (lambda: ingest(corpus, root, progress=False, mode="bm25"),
                  lambda: writer_lock(root).__enter__(),
                  lambda: vectors.add_texts(["new"], ids=["n"])):
        with pytest.raises(StoreError) as caught:
            _returns(write)
        message = str(caught.value)
        assert str(lock) in message and f"not a regular file: {LOCK_WHAT[kind]}" in message, message
        assert "remove it" in message and "Invalid argument" not in message, message
    assert [d.id for d in vectors.similarity_search("ranking", k=1)] == ["a#0"]  # its searches work
    vectors.close()
    assert _returns(lambda: main(["ingest", str(corpus), "--store", str(root), "--mode", "bm25"])) == 2
    err = capsys.readouterr().err
    assert f"ragspine: error: {lock}: not a regular file" in err and "Traceback" not in err, err
    assert sorted(p.name for p in root.iterdir()) == before  # nothing written, nothing created
    assert not (root / "elsewhere").exists()
    assert _returns(lambda: writer_pid(root)) is None  # no writer can hold such a lock; never blocks
    assert _search(root) == (["a#0"], [])  # readers never needed the lock
    (lock.unlink if kind != "folder" else lock.rmdir)()
    assert _returns(lambda: ingest(corpus, root, progress=False, mode="bm25")).unchanged == 2  # removed: works again
    assert stat.S_ISREG(os.lstat(lock).st_mode)
