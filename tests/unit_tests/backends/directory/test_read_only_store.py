"""Issue 25 §6 (fresh-clone tester): a store on a read-only location could not be searched — ``ragspine search``,
``open_retriever`` (every mode), a ``RagSpineVectorStore`` failed with ``SQLite error: attempt to write a readonly
database`` or ``unable to open database file``: SQLite creates ``chunks.sqlite-shm`` (and ``-wal``) beside a WAL
database to read it, and cannot in a folder the reader may not write.

Now a reader opens such a file without SQLite's shared memory
(``backends/directory/_sqlite.py``: ``connect_read_only``) — also one whose last commits are still in its ``-wal``
file — and writes nothing: a BM25 index that fails its checks is rebuilt in memory, the embedding cache is read
only, no lock is taken.  A writer (``ingest``, the vector store's writes) fails with a ``StoreWriteError`` naming the
file, before anything is written.  A long-lived retriever over such a store still sees what a writer allowed to
write there commits (it reopens when the WAL files appear or change).

How the location is made read-only: ``chmod -R a-w``.  Root ignores file modes (``CAP_DAC_OVERRIDE``), so when the
tests run as root the reader runs in a child process without that capability (``setpriv --inh-caps=-dac_override
--bounding-set=-dac_override``): the kernel then applies the modes to it as to any user — the same refusal a
read-only folder gives a normal user, not a simulation inside the package.  The writer steps run in this process
(root keeps its right to write, as the store's owner would).  Skipped where neither works (no ``setpriv``).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document

from langchain_ragspine.backends.directory.chunk_store import ChunkStore
from langchain_ragspine.backends.directory.layout import BM25_DIR, CHUNKS_DB
from langchain_ragspine.pipeline.ingest import ingest
from tests.harness import write_corpus
from tests.unit_tests._ingest_gate_child import DONE_S, child_env

pytestmark = [
    pytest.mark.subprocess,
    pytest.mark.skipif(os.name != "posix", reason="file modes and setpriv are POSIX"),
]

TEXTS = {
    "falcon": "# Falcon\n\nThe peregrine falcon is the fastest bird.",
    "kyoto": "# Kyoto\n\nKyoto has many temples, Kiyomizu-dera among them.",
    "rain": "# Rain\n\nThe rainy season is called tsuyu in Japan.",
}

_CHILD = r"""
import json, sys, warnings
warnings.simplefilter("always")
from langchain_ragspine import open_retriever, ingest
from langchain_ragspine.cli import main
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.vectorstores import RagSpineVectorStore

store, corpus = sys.argv[1], sys.argv[2]

def outcome(fn):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value, error = fn(), None
        except Exception as e:
            value, error = None, {"type": type(e).__name__, "mro": [c.__name__ for c in type(e).__mro__],
                                  "message": str(e)}
    return {"value": value, "error": error,
            "warnings": [f"{w.category.__name__}: {w.message}" for w in caught if w.category.__name__ != "ResourceWarning"]}

def ids(docs):
    return [d.metadata.get("doc_id", d.id) for d in docs]

def vectorstore():
    vs = RagSpineVectorStore(store, HashingEmbeddings(256))
    try:
        found = [ids(vs.similarity_search("falcon bird", k=1)), ids(vs.as_retriever(search_kwargs={"k": 1}).invoke("temples"))]
        return {"found": found, "write": outcome(lambda: vs.add_texts(["new text"], ids=["n1"]))}
    finally:
        vs.close()

if sys.argv[3] == "live":  # a long-lived retriever: one answer per line read
    retriever = open_retriever(store, mode="bm25", k=3)
    for line in sys.stdin:
        print(json.dumps(outcome(lambda: ids(retriever.invoke(line.strip())))), flush=True)
    sys.exit(0)
out = {}
for mode in ("bm25", "hybrid", "auto"):
    out[mode] = outcome(lambda: ids(open_retriever(store, mode=mode, k=1).invoke("falcon bird")))
out["cli-search"] = outcome(lambda: main(["search", "temples", "--store", store, "--mode", "bm25"]))
out["vectorstore"] = outcome(vectorstore)
out["ingest"] = outcome(lambda: ingest(corpus, store, mode="bm25", progress=False))
out["cli-ingest"] = outcome(lambda: main(["ingest", corpus, "--store", store, "--mode", "bm25"]))
print("RESULT " + json.dumps(out), flush=True)
"""


def _reader_prefix(probe_dir: Path) -> list[str]:
    """The command prefix that runs a child without the right to write into a folder it may not write."""
    prefix: list[str] = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            pytest.skip("running as root without setpriv: cannot take root's right to write away")
        prefix = [setpriv, "--inh-caps=-dac_override", "--bounding-set=-dac_override"]
    probe_dir.mkdir()
    probe_dir.chmod(0o555)
    try:
        done = subprocess.run([*prefix, sys.executable, "-c", f"open({str(probe_dir / 'x')!r}, 'w')"],
                              capture_output=True, timeout=DONE_S)
    finally:
        probe_dir.chmod(0o755)
    if done.returncode == 0:
        pytest.skip("the child can still write into a read-only folder here")
    return prefix


def _chmod_tree(root: Path, writable: bool) -> None:
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        path.chmod(mode | stat.S_IWUSR if writable else mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    return write_corpus(tmp_path / "corpus", TEXTS)


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[tuple[list[str], list[Path]]]:
    """(the reader's command prefix, the trees to make writable again at the end)."""
    trees: list[Path] = []
    yield _reader_prefix(tmp_path / "probe"), trees
    for tree in trees:
        _chmod_tree(tree, True)


def _read(prefix: list[str], store: Path, corpus: Path) -> dict[str, Any]:
    done = subprocess.run([*prefix, sys.executable, "-c", _CHILD, str(store), str(corpus), "all"],
                          capture_output=True, text=True, timeout=DONE_S, env=child_env())
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    result: dict[str, Any] = json.loads(lines[-1][len("RESULT "):])
    result["stdout"], result["stderr"] = done.stdout, done.stderr
    return result


def _assert_searches_and_refuses_writes(result: dict[str, Any], store: Path, expect_stale: bool) -> None:
    for mode in ("bm25", "hybrid", "auto"):
        assert result[mode]["error"] is None, (mode, result[mode])
        assert result[mode]["value"] == ["falcon"], (mode, result[mode])
    assert result["cli-search"]["value"] == 0 and "Kyoto has many temples" in result["stdout"], result["stderr"]
    vs = result["vectorstore"]
    assert vs["error"] is None, vs
    assert vs["value"]["found"] == [["falcon"], ["kyoto"]]
    write = vs["value"]["write"]["error"]
    assert write is not None and "StoreWriteError" in write["mro"], write
    assert str(store) in write["message"] and "read-only" in write["message"], write
    assert "searches work" in write["message"] and "nothing was lost" in write["message"], write
    lock = str(store / ".ragspine.lock")
    error = result["ingest"]["error"]
    assert error is not None and "StoreWriteError" in error["mro"], result["ingest"]
    assert lock in error["message"] and "Permission denied" in error["message"], error
    assert "nothing was lost" in error["message"] and "store is unchanged" in error["message"], error
    assert result["cli-ingest"]["value"] == 2
    assert f"ragspine: error: {lock}: could not be written (Permission denied" in result["stderr"]
    assert "Traceback" not in result["stderr"]
    stale = [w for mode in ("bm25", "auto") for w in result[mode]["warnings"] if "StaleIndexWarning" in w]
    assert bool(stale) == expect_stale, stale


@pytest.mark.subprocess
def test_a_read_only_store_is_searched_and_refuses_writes(corpus, tmp_path, read_only) -> None:
    """Regression: every reader failed with ``attempt to write a readonly database``."""
    prefix, trees = read_only
    store = tmp_path / "store"
    ingest(corpus, store, mode="hybrid", embedding="hashing", progress=False)
    before = _files(store)
    assert not any(name.endswith(("-wal", "-shm")) for name in before)
    _chmod_tree(store, False)
    trees.append(store)
    result = _read(prefix, store, corpus)
    _assert_searches_and_refuses_writes(result, store, expect_stale=False)
    assert _files(store) == before  # nothing written: no -wal/-shm, no lock content, no rebuilt index


@pytest.mark.subprocess
def test_a_read_only_store_with_commits_left_in_its_wal_shows_them(corpus, tmp_path, read_only) -> None:
    """A store copied (or left by a killed writer) with its ``-wal`` but without ``-shm``: SQLite said ``unable to
    open database file``.  The committed rows still in the WAL are read (here a new document, so the saved indexes
    are stale: BM25 is rebuilt in memory — written nowhere — with a StaleIndexWarning)."""
    prefix, trees = read_only
    live = tmp_path / "live"
    ingest(corpus, live, mode="hybrid", embedding="hashing", progress=False)
    writer = ChunkStore(live / CHUNKS_DB)
    try:
        writer._connection().execute("PRAGMA wal_autocheckpoint = 0")  # keep the commit in the WAL
        writer.replace_doc_chunks("walonly", [Document(
            page_content="The falcon bird WALONLY note.",
            metadata={"doc_id": "walonly", "chunk_id": "walonly#0", "start_index": 0, "end_index": 29})])
        assert (live / f"{CHUNKS_DB}-wal").stat().st_size > 0
        store = tmp_path / "store"
        shutil.copytree(live, store, ignore=shutil.ignore_patterns("*-shm"))  # what a copy of a live store gets
    finally:
        writer.close()
    assert (store / f"{CHUNKS_DB}-wal").stat().st_size > 0 and not (store / f"{CHUNKS_DB}-shm").exists()
    before = _files(store)
    _chmod_tree(store, False)
    trees.append(store)
    done = subprocess.run(
        [*prefix, sys.executable, "-c",
         "import sys, warnings; warnings.simplefilter('ignore')\n"
         "from langchain_ragspine import open_retriever\n"
         "print(sorted(d.metadata['doc_id'] for d in open_retriever(sys.argv[1], mode='bm25', k=5).invoke('WALONLY')))",
         str(store)],
        capture_output=True, text=True, timeout=DONE_S, env=child_env())
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "['walonly']"  # the WAL's commit is read
    assert _files(store) == before


@pytest.mark.subprocess
def test_a_bm25_index_failing_its_checks_is_rebuilt_in_memory_on_a_read_only_store(corpus, tmp_path,
                                                                                  read_only) -> None:
    """A reader that finds the saved BM25 index damaged rebuilds it in memory (it would be rewritten by an
    ingest): on a read-only store that works as anywhere, writes nothing, and says so."""
    prefix, trees = read_only
    store = tmp_path / "store"
    ingest(corpus, store, mode="hybrid", embedding="hashing", progress=False)
    docs = store / BM25_DIR / "docs.jsonl"
    rows = docs.read_text("utf-8").splitlines()
    docs.write_text("\n".join(reversed(rows)) + "\n", "utf-8")  # rows swapped: the checksum no longer matches
    before = _files(store)
    _chmod_tree(store, False)
    trees.append(store)
    result = _read(prefix, store, corpus)
    _assert_searches_and_refuses_writes(result, store, expect_stale=True)
    assert _files(store) == before


@pytest.mark.subprocess
def test_a_live_retriever_on_a_read_only_store_sees_what_a_writer_commits(corpus, tmp_path, read_only) -> None:
    """The reader's connection is a snapshot (it cannot register in a ``-shm`` file); a writer allowed to write
    there (the store's owner; root here) commits a relabel — RESTRICTED — and keeps its connection open, so the
    commit is in the WAL only: the reader's next call sees the WAL files appear, reopens, and no longer returns
    the document; after the writer closes (a checkpoint), still not."""
    prefix, trees = read_only
    store = tmp_path / "store"
    ingest(corpus, store, mode="bm25", progress=False)
    _chmod_tree(store, False)
    trees.append(store)
    child = subprocess.Popen([*prefix, sys.executable, "-c", _CHILD, str(store), str(corpus), "live"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=child_env())
    assert child.stdin is not None and child.stdout is not None

    def ask(query: str) -> list[str]:
        child.stdin.write(query + "\n")  # type: ignore[union-attr]
        child.stdin.flush()  # type: ignore[union-attr]
        said = json.loads(child.stdout.readline())  # type: ignore[union-attr]
        assert said["error"] is None, said
        return list(said["value"])

    try:
        assert ask("peregrine falcon") == ["falcon"]
        if os.geteuid() != 0:
            store.chmod(0o755)  # the owner, as a normal user, gives itself the right to write (the reader has it too)
        writer = ChunkStore(store / CHUNKS_DB)
        try:
            writer._connection().execute("PRAGMA wal_autocheckpoint = 0")
            old = next(c for c in writer.iter_chunks(doc_id="falcon"))
            writer.replace_doc_chunks("falcon", [Document(
                page_content=old.text, metadata={**old.metadata, "sensitivity": "RESTRICTED"})])
            assert (store / f"{CHUNKS_DB}-wal").stat().st_size > 0
            assert ask("peregrine falcon") == []  # the WAL-only commit is seen
        finally:
            writer.close()
        assert ask("peregrine falcon") == []
        assert ask("temples") == ["kyoto"]
    finally:
        child.stdin.close()
        child.wait(timeout=DONE_S)
        err = child.stderr.read() if child.stderr is not None else ""
    assert child.returncode == 0, err[-3000:]


def test_a_blank_check_and_a_plain_sqlite_error_are_unchanged(tmp_path: Path) -> None:
    """The fallback is only for a file SQLite cannot read without creating one beside it: a damaged file is still
    refused as before, naming it."""
    bad = tmp_path / "chunks.sqlite"
    bad.write_bytes(b"not a database at all" * 100)
    from langchain_ragspine.errors import StoreError

    with pytest.raises(StoreError, match="chunks.sqlite") as caught:
        ChunkStore(bad, read_only=True)
    assert isinstance(caught.value.__cause__, sqlite3.DatabaseError)
    assert not ChunkStore.is_blank(bad)
