"""Issue 25 §6 (fresh-clone tester): a file system out of inodes — ``ENOSPC`` with free bytes — during ``ingest``
gave raw errors where a full disk gives the ``StoreWriteError`` message (the file, what was committed, that the
previous version is intact): ``cannot lock …: No space left on device``, ``[Errno 28] No space left on device:
'…/ragspine-store.json'``, SQLite's bare ``unable to open database file`` (it could not create ``-wal`` / ``-shm``;
for the embedding cache ingest even called the intact cache "unreadable" and moved it aside), and a traceback from
the FAISS id map.  Only the creation of a *new* file fails there, which a full-disk fault injected into a write
never reached.

The kind, fixed once: every file a writer creates is created inside ``write_errors`` (the lock file, the store
marker), and SQLite's ``SQLITE_CANTOPEN`` / ``SQLITE_READONLY`` from a writable file is diagnosed by asking the
file system the same question (``errors.creation_errno``: create a file beside it) — ``ENOSPC`` (no inode),
``EDQUOT``, ``EMFILE``, ``EACCES``, ``EROFS`` — and raised as the ``StoreWriteError`` of a full disk.  The message
says which ``ENOSPC`` it is (``statvfs``: "no free inode left" or "disk full").

The faults: a real file system without free inodes (a tmpfs mounted with ``nr_inodes=N`` in a private mount
namespace, every N from "not even the lock file" to "everything fits"; run where ``unshare -m`` and ``mount`` work,
i.e. as root), and in-process injections that run everywhere: ``os.open`` failing with ``ENOSPC`` / ``EDQUOT`` /
``EMFILE`` for the files ingest creates, and a real ``EMFILE`` (``RLIMIT_NOFILE``) under SQLite.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from langchain_ragspine import errors
from langchain_ragspine.backends.directory.chunk_store import ChunkStore
from langchain_ragspine.backends.directory.embedding_cache import EmbeddingCache
from langchain_ragspine.backends.directory.layout import CHUNKS_DB, EMBEDDING_CACHE, STORE_MARKER
from langchain_ragspine.backends.directory.lock import LOCK_FILE
from langchain_ragspine.cli import main
from langchain_ragspine.errors import StoreError, StoreWriteError, os_error_of
from langchain_ragspine.pipeline.ingest import ingest
from tests.harness import write_corpus
from tests.unit_tests._ingest_gate_child import DONE_S, child_env

TEXTS = {
    "falcon": "# Falcon\n\nThe peregrine falcon is the fastest bird.",
    "kyoto": "# Kyoto\n\nKyoto has many temples, Kiyomizu-dera among them.",
    "rain": "# Rain\n\nThe rainy season is called tsuyu in Japan.",
}


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return write_corpus(tmp_path / "corpus", TEXTS)


def _assert_nothing_lost(error: BaseException, file: Path, why: str) -> str:
    message = str(error)
    assert isinstance(error, StoreWriteError) and isinstance(error, OSError), type(error)
    for part in (str(file), f"could not be written ({why}", "nothing was lost"):
        assert part in message, message
    return message


# -- in-process: the files ingest creates -----------------------------------------------------------------------------
def _fail_creating(monkeypatch: pytest.MonkeyPatch, name: str, code: int) -> None:
    """``os.open`` of a new file called ``name`` fails with ``code`` (what a file system without inodes, over its
    quota or a process without descriptors does); every other call, and opening it once it exists, works."""
    real = os.open

    def fake(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if Path(path).name == name and flags & os.O_CREAT and not os.path.lexists(path):
            raise OSError(code, os.strerror(code), str(path))
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", fake)


WHY = {errno.ENOSPC: "disk full or no free inode left", errno.EDQUOT: "disk quota exceeded",
       errno.EMFILE: "Too many open files"}


@pytest.mark.parametrize("code", list(WHY), ids=errno.errorcode.get)
@pytest.mark.parametrize("existing", [False, True], ids=["new-store", "existing-store"])
def test_the_lock_file_that_cannot_be_created_is_a_store_write_error(corpus, tmp_path, monkeypatch, capsys, code,
                                                                      existing) -> None:
    """Regression: ``cannot lock …/.ragspine.lock: No space left on device`` (a ``StoreError`` without the rest)."""
    store = tmp_path / "store"
    if existing:
        ingest(corpus, store, mode="bm25", progress=False)
        (store / LOCK_FILE).unlink()  # e.g. a store copied without it
    before = sorted(p.name for p in store.iterdir()) if existing else None
    _fail_creating(monkeypatch, LOCK_FILE, code)
    with pytest.raises(StoreError) as caught:
        ingest(corpus, store, mode="bm25", progress=False)
    _assert_nothing_lost(caught.value, store / LOCK_FILE, WHY[code])
    assert "store is unchanged" in str(caught.value) and caught.value.errno == code
    assert main(["ingest", str(corpus), "--store", str(store), "--mode", "bm25"]) == 2
    err = capsys.readouterr().err
    assert f"ragspine: error: {store / LOCK_FILE}: could not be written" in err and "Traceback" not in err
    monkeypatch.undo()
    assert (sorted(p.name for p in store.iterdir()) if store.exists() else None) == before
    assert ingest(corpus, store, mode="bm25", progress=False).store_documents == len(TEXTS)


@pytest.mark.parametrize("code", list(WHY), ids=errno.errorcode.get)
def test_the_store_marker_that_cannot_be_created_is_a_store_write_error(corpus, tmp_path, monkeypatch, code) -> None:
    """Regression: a bare ``[Errno 28] No space left on device: '…/ragspine-store.json'``."""
    store = tmp_path / "store"
    real = Path.write_text

    def write_text(self: Path, *args: Any, **kwargs: Any) -> int:
        if self.name == STORE_MARKER:
            real(self, "")  # the inode was there, the block was not: an empty file, removed again
            raise OSError(code, os.strerror(code), str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write_text)
    with pytest.raises(StoreError) as caught:
        ingest(corpus, store, mode="bm25", progress=False)
    _assert_nothing_lost(caught.value, store / STORE_MARKER, WHY[code])
    assert "nothing of the store was written yet" in str(caught.value)
    monkeypatch.undo()
    assert not store.exists()  # the writer removed the directory it had created for nothing
    assert ingest(corpus, store, mode="bm25", progress=False).store_documents == len(TEXTS)


def test_sqlite_unable_to_open_is_diagnosed_by_the_file_system() -> None:
    """``SQLITE_CANTOPEN`` says nothing of why: the file system says (a file created beside it), and only a reason
    that is a failed write makes it one."""
    try:
        sqlite3.connect("file:/nonexistent-ragspine-dir/x.sqlite?mode=rw", uri=True).execute("SELECT 1")
    except sqlite3.OperationalError as e:
        cantopen = e
    assert cantopen.sqlite_errorcode == sqlite3.SQLITE_CANTOPEN
    assert os_error_of(cantopen) is None  # no file to ask about
    assert os_error_of(cantopen, "/nonexistent-ragspine-dir/x.sqlite") is None  # a missing folder: not a write


def test_sqlite_unable_to_open_under_a_real_fd_limit_is_a_store_write_error(corpus, tmp_path, monkeypatch) -> None:
    """A real ``EMFILE`` under SQLite (``RLIMIT_NOFILE`` lowered to the next free descriptor while the chunk store
    and the embedding cache open): SQLite's ``unable to open database file`` becomes a ``StoreWriteError`` saying
    why — and the embedding cache is kept, not moved aside as unreadable."""
    resource = pytest.importorskip("resource")
    from langchain_ragspine.backends.directory import _sqlite

    store = tmp_path / "store"
    ingest(corpus, store, mode="hybrid", embedding="hashing", progress=False)
    (corpus / "falcon.md").write_text("# Falcon\n\nThe falcon NEWMARK dives.\n", "utf-8")
    real = _sqlite.SQLiteFile._connect

    @contextlib.contextmanager
    def no_descriptor_left() -> Iterator[None]:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        probe = os.dup(0)  # the lowest free descriptor: the next open would get it
        os.close(probe)
        resource.setrlimit(resource.RLIMIT_NOFILE, (probe, hard))
        try:
            yield
        finally:
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

    for target, file in ((EmbeddingCache, store / EMBEDDING_CACHE), (ChunkStore, store / CHUNKS_DB)):
        def connect(self: Any, busy_timeout: float, target: type = target) -> sqlite3.Connection:
            if isinstance(self, target) and not self.read_only:
                with no_descriptor_left():
                    return real(self, busy_timeout)
            return real(self, busy_timeout)

        monkeypatch.setattr(_sqlite.SQLiteFile, "_connect", connect)
        with pytest.raises(StoreError) as caught:
            ingest(corpus, store, mode="hybrid", embedding="hashing", progress=False)
        _assert_nothing_lost(caught.value, file, "Too many open files")
        assert caught.value.errno == errno.EMFILE
        monkeypatch.undo()
        assert not list(store.glob("*.corrupt-*"))  # the cache was kept
    summary = ingest(corpus, store, mode="hybrid", embedding="hashing", progress=False)
    assert summary.changed == 1 and summary.embedded <= 1  # every other vector came from the kept cache


# -- a real file system without free inodes ------------------------------------------------------------------------------
_TMPFS_CHILD = r"""
import contextlib, json, os, subprocess, sys, warnings
from pathlib import Path
warnings.simplefilter("ignore")
from langchain_ragspine import ingest, open_retriever

corpus, mnt = Path(sys.argv[1]), Path(sys.argv[2])

def mount(option):
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size=64m,{option}", "tmpfs", str(mnt)], check=True)

def remount(n):
    subprocess.run(["mount", "-o", f"remount,nr_inodes={n}", str(mnt)], check=True)

def used():
    st = os.statvfs(mnt)
    return st.f_files - st.f_ffree

def run(fn):
    try:
        fn()
        return None
    except Exception as e:
        return {"mro": [c.__name__ for c in type(e).__mro__], "message": str(e)}

def found(store):
    with contextlib.suppress(Exception):
        return sorted(d.metadata["doc_id"] for d in open_retriever(store, mode="bm25", k=5).invoke("falcon"))
    return None

out = []
for n in range(2, 40):  # a new store: the lock file, the marker, chunks.sqlite (-wal, -shm), ... , index.json
    mount(f"nr_inodes={n}")
    store = mnt / "store"
    error = run(lambda: ingest(corpus, store, mode="hybrid", embedding="hashing", progress=False))
    out.append({"case": "new", "n": n, "error": error, "corrupt": [p.name for p in mnt.rglob("*.corrupt-*")]})
    subprocess.run(["umount", "-l", str(mnt)], check=True)  # lazily: a retriever may hold a file
    if error is None:
        break
falcon = corpus / "falcon.md"
original = falcon.read_text("utf-8")
for k in range(0, 30):  # an existing store: a re-ingest with k inodes left
    mount("nr_inodes=1000")
    store = mnt / "store"
    falcon.write_text(original, "utf-8")
    ingest(corpus, store, mode="hybrid", embedding="hashing", progress=False)
    falcon.write_text(original.replace("fastest", "fastest NEWMARK"), "utf-8")
    remount(used() + k)
    error = run(lambda: ingest(corpus, store, mode="hybrid", embedding="hashing", progress=False))
    remount(1000)
    out.append({"case": "existing", "n": k, "error": error, "found": found(store),
                "corrupt": [p.name for p in mnt.rglob("*.corrupt-*")]})
    subprocess.run(["umount", "-l", str(mnt)], check=True)  # lazily: a retriever may hold a file
    if error is None:
        break
falcon.write_text(original, "utf-8")
print("RESULT " + json.dumps(out), flush=True)
"""


def _private_mounts() -> list[str]:
    """The command prefix that runs a child in a private mount namespace where it may mount a tmpfs."""
    unshare, mount = shutil.which("unshare"), shutil.which("mount")
    if os.name != "posix" or unshare is None or mount is None:
        pytest.skip("needs unshare(1) and mount(8)")
    probe = subprocess.run([unshare, "-m", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt && umount /mnt"],
                           capture_output=True, timeout=DONE_S)
    if probe.returncode != 0:
        pytest.skip("cannot mount a tmpfs in a private mount namespace here (needs root)")
    return [unshare, "-m"]


@pytest.mark.subprocess
def test_ingest_on_a_file_system_out_of_inodes_fails_only_with_store_write_errors(corpus, tmp_path) -> None:
    """Every point where ingest creates a file, hit for real: each failure is the full-disk ``StoreWriteError``
    (the file, that nothing was lost, "run again"), never a bare error or a traceback, the embedding cache is never
    moved aside, and the store answers afterwards: the previous version or the new one, never neither."""
    prefix = _private_mounts()
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    done = subprocess.run([*prefix, sys.executable, "-c", _TMPFS_CHILD, str(corpus), str(mnt)], capture_output=True,
                          text=True, timeout=DONE_S, env=child_env())
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    outcomes: list[dict[str, Any]] = json.loads(lines[-1][len("RESULT "):])
    failed = [o for o in outcomes if o["error"] is not None]
    assert outcomes[-1]["error"] is None and len(failed) > 10, outcomes  # both cases end with enough inodes
    files: set[str] = set()
    for outcome in failed:
        error: dict[str, Any] = outcome["error"]
        assert "StoreWriteError" in error["mro"], outcome
        message = error["message"]
        assert "could not be written" in message and "nothing was lost" in message, outcome
        assert "No space left on device" in message and "Traceback" not in message, outcome
        assert outcome["corrupt"] == [], outcome
        if outcome["case"] == "existing":
            assert outcome["found"] == ["falcon"], outcome  # searchable: the old version or the committed new one
        files.add(message.split(": ", 1)[0].rsplit("/", 1)[-1])
        files.update(name for name in ("ids.sqlite", "docs.jsonl", "index.json") if f"/{name}" in message)
    for name in (LOCK_FILE, STORE_MARKER, EMBEDDING_CACHE, CHUNKS_DB, "ids.sqlite", "index.json"):
        assert any(name in f for f in files), (name, files)  # each creation point was hit
    assert any("no free inode left" in o["error"]["message"] for o in failed)


def test_creation_errno_reports_only_write_failures(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "x.sqlite"
    assert errors.creation_errno(target) is None  # a file can be created here
    assert not list(tmp_path.iterdir())  # the probe is gone
    for code in (errno.ENOSPC, errno.EDQUOT, errno.EMFILE, errno.EACCES, errno.EROFS):
        _fail_creating_any(monkeypatch, code)
        assert errors.creation_errno(target) == code
        monkeypatch.undo()
    _fail_creating_any(monkeypatch, errno.ENOENT)
    assert errors.creation_errno(target) is None  # a missing folder is not a failed write


def _fail_creating_any(monkeypatch: pytest.MonkeyPatch, code: int) -> None:
    real: Callable[..., int] = os.open

    def fake(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        if flags & os.O_CREAT:
            raise OSError(code, os.strerror(code), str(path))
        return real(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", fake)
