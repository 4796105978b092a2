"""Issue 25, section 6: one writer at a time per store directory.  Two ingests into one store (processes or threads,
into a new store or an existing one) run one after the other — the second waits, saying for whom — and end exactly
as a sequential run (no stale BM25 index, no "not a chunk store", no false success); a vector-store write waits for
an ingest too, or refuses clearly after its ``lock_timeout``; a SIGKILLed holder leaves no stale lock."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import warnings
from pathlib import Path

import pytest

from langchain_ragspine.backends.directory.chunk_store import ChunkStore
from langchain_ragspine.backends.directory.files import read_documents
from langchain_ragspine.backends.directory.layout import CHUNKS_DB, INDEX_STATE
from langchain_ragspine.backends.directory.lock import (
    LOCK_FILE,
    StoreBusyError,
    StoreReplacedError,
    writer_lock,
    writer_pid,
)
from langchain_ragspine.cli import main
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.errors import StaleIndexWarning, StoreError
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.sources import open_retriever, search
from langchain_ragspine.pipeline.stages import IngestSummary
from langchain_ragspine.vectorstores import RagSpineVectorStore
from tests.unit_tests._ingest_gate_child import (
    DONE_S,
    GatedIngest,
    Waiting,
    child_env,
    summary_counts,
    waiting_line,
)

CHILD = Path(__file__).resolve().parents[2] / "_ingest_gate_child.py"
POSIX_ONLY = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")


def _corpus(root: Path, name: str, n: int, paragraphs: int = 6) -> Path:
    """``n`` Markdown documents ``{name}NN`` with ``paragraphs`` paragraphs each (terms unique per paragraph)."""
    root.mkdir(parents=True)
    for d in range(n):
        paras = [f"{name} {d} part {p}: term {name}{d}x{p} " + "common words about rivers " * 12
                 for p in range(paragraphs)]
        (root / f"{name}{d:02d}.md").write_text(f"# {name} {d}\n\n" + "\n\n".join(paras), "utf-8")
    return root


def _snapshot(store: Path) -> dict[str, object]:
    """What two runs must agree on: every chunk row (history included, without timestamps), the generation,
    ``index.json`` and the saved BM25 / vector indexes' documents."""
    with ChunkStore(store / CHUNKS_DB, read_only=True) as cs:
        rows = [(c.doc_id, c.version, c.chunk_id, c.text, c.active) for c in cs.iter_chunks(include_inactive=True)]
        generation = cs.generation
    state = json.loads((store / INDEX_STATE).read_text("utf-8"))
    return {
        "rows": rows,
        "generation": generation,
        "state": state,
        "bm25": [d.id for d in read_documents(store / "bm25" / "docs.jsonl")],
        "vector": [d.id for d in read_documents(store / "vector" / "docs.jsonl")],
    }


def _consistent(store: Path, embedding: HashingEmbeddings | None = None) -> None:
    """The saved indexes are those of the store's current generation: opening them warns about nothing."""
    snap = _snapshot(store)
    state = snap["state"]
    assert isinstance(state, dict)
    assert state["generation"] == snap["generation"] == state["vector"]["generation"]
    with warnings.catch_warnings():
        warnings.simplefilter("error", StaleIndexWarning)
        retriever = open_retriever(store, mode="hybrid", embedding=embedding)
    with ChunkStore(store / CHUNKS_DB, read_only=True) as cs:
        active = sorted(c.chunk_id for c in cs.iter_chunks())
    assert sorted(snap["bm25"]) == sorted(snap["vector"]) == active  # type: ignore[call-overload]
    assert search(retriever, "common words", k=3)


def _cache_rows(store: Path) -> int:
    with sqlite3.connect(f"{(store / 'embeddings.sqlite').resolve().as_uri()}?mode=ro", uri=True) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0])


def _sequential(tmp: Path, *corpora: Path) -> tuple[dict[str, object], list[str]]:
    """The snapshot and summary lines of ``corpora`` ingested one after the other into a new store."""
    store = tmp / "sequential"
    lines = [summary_counts(ingest(c, store, embedding="hashing", progress=False).line()) for c in corpora]
    return _snapshot(store), lines


def _child(corpus: Path, store: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(CHILD), str(corpus), str(store), "none"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(),
    )


# ------------------------------------------------------------------------------------------------ the lock itself


def test_the_lock_is_exclusive_reentrant_and_names_its_holder(tmp_path: Path) -> None:
    store = tmp_path / "new"
    assert writer_pid(store) is None
    with writer_lock(store) as path:
        assert path == store / LOCK_FILE and writer_pid(store) == os.getpid()
        with writer_lock(store):  # the same thread may nest it
            assert writer_pid(store) == os.getpid()
        refused: list[BaseException] = []

        def other_thread() -> None:
            try:
                with writer_lock(store, timeout=0):
                    pass
            except StoreBusyError as e:
                refused.append(e)

        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()
        assert len(refused) == 1 and isinstance(refused[0], StoreError)
        busy = refused[0]
        assert isinstance(busy, StoreBusyError) and busy.pid == os.getpid()
        assert str(store / LOCK_FILE) in str(busy) and f"pid {os.getpid()}" in str(busy) and "lock_timeout" in str(busy)
    assert writer_pid(store) is None
    assert not store.exists()  # created for the block and left empty: removed again


_FORKING_HOLDER = """
import os, sys, time
from pathlib import Path
if len(sys.argv) > 2:  # a child slow to take its first step: its first at-fork hook (run before the lock's) sleeps
    os.register_at_fork(after_in_child=lambda: time.sleep(float(sys.argv[2])))
from langchain_ragspine.backends.directory.lock import writer_lock
with writer_lock(Path(sys.argv[1])):
    if os.fork() == 0:  # a worker: lives on until the test writes a line on its stdin
        sys.stdin.readline()
        os._exit(0)
    print("FORKED", flush=True)
    os._exit(0)  # the holder dies without releasing the lock (as if killed)
"""


@pytest.mark.subprocess
@POSIX_ONLY
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_worker_forked_by_the_holder_does_not_keep_the_lock_after_it_dies(tmp_path: Path) -> None:
    """The BM25 tokenizer workers are forked while ingest holds the lock, and a flock belongs to the open file a
    fork shares: a worker outliving a killed ingest must not keep the store locked."""
    store = tmp_path / "store"
    store.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", _FORKING_HOLDER, str(store)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=child_env())
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "FORKED"
        assert holder.wait(timeout=DONE_S) == 0
        assert writer_pid(store) is None  # the worker (still running: it waits for our line) holds nothing
        with writer_lock(store, timeout=0):
            pass
    finally:
        holder.communicate("bye\n", timeout=DONE_S)  # the worker shares the holder's stdin: let it go


@pytest.mark.subprocess
@POSIX_ONLY
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_the_fork_returns_only_once_the_worker_has_let_go_of_the_lock(tmp_path: Path) -> None:
    """Regression (the test above failed about 2 runs in 8 on a loaded machine): the worker closed its copy of the
    lock in an at-fork hook, but the holder did not wait for that — killed right after the fork, it left the lock
    held by a worker not yet scheduled, for as long as that took.  Here the worker's first step takes 2 s (an
    earlier at-fork hook sleeps; the sleep only widens the window, nothing is timed): the holder's ``os.fork`` now
    returns only after the worker closed it, so the lock is free the moment the holder is gone."""
    store = tmp_path / "store"
    store.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", _FORKING_HOLDER, str(store), "2"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=child_env())
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "FORKED"
        assert holder.wait(timeout=DONE_S) == 0
        assert writer_pid(store) is None
        with writer_lock(store, timeout=0):
            pass
    finally:
        holder.communicate("bye\n", timeout=DONE_S)


@pytest.mark.subprocess
def test_a_thread_forking_while_another_holds_the_lock_gets_a_child_without_it(tmp_path: Path) -> None:
    """The at-fork hooks take the registry's guard: a fork while another thread holds the lock still closes the
    child's copy, and the holder's lock is untouched."""
    if not hasattr(os, "fork"):
        pytest.skip("needs os.fork")
    store = tmp_path / "store"
    taken, done = threading.Event(), threading.Event()

    def hold() -> None:
        with writer_lock(store):
            taken.set()
            done.wait(DONE_S)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert taken.wait(DONE_S)
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: it must not hold the lock (a test of the lock from here sees it held by the parent)
            os.close(read_end)
            os.write(write_end, b"free" if writer_pid(store) == os.getppid() else b"HELD")
            os._exit(0)
        os.close(write_end)
        with os.fdopen(read_end, "rb") as said:
            assert said.read() == b"free"
        assert os.waitpid(pid, 0)[1] == 0
        assert writer_pid(store) == os.getpid()  # the parent still holds it
        with pytest.raises(StoreBusyError):
            with writer_lock(store, timeout=0):
                pass
    finally:
        done.set()
        holder.join(DONE_S)
    with writer_lock(store, timeout=0):
        pass


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf")])
def test_a_bad_lock_timeout_is_refused_before_anything_happens(tmp_path: Path, bad: float) -> None:
    with pytest.raises(ValueError, match="lock_timeout"):
        ingest(tmp_path, tmp_path / "store", lock_timeout=bad)
    with pytest.raises(TypeError, match="lock_timeout"):
        ingest(tmp_path, tmp_path / "store", lock_timeout="5")  # type: ignore[arg-type]
    assert not (tmp_path / "store").exists()


def test_the_lock_never_goes_into_a_foreign_directory(tmp_path: Path) -> None:
    foreign = tmp_path / "notes"
    foreign.mkdir()
    (foreign / "todo.txt").write_text("mine", "utf-8")
    corpus = _corpus(tmp_path / "c", "a", 1)
    with pytest.raises(StoreError, match="not a ragspine store"):
        ingest(corpus, foreign)
    assert sorted(p.name for p in foreign.iterdir()) == ["todo.txt"]


def test_cli_lock_timeout_refuses_with_the_holder_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = _corpus(tmp_path / "corpus", "a", 2)
    store = tmp_path / "store"
    assert main(["ingest", str(corpus), "--store", str(store), "--embedding", "none"]) == 0
    generation = _snapshot_generation(store)
    taken, done = threading.Event(), threading.Event()

    def hold() -> None:  # another thread of this process: the lock is not re-entrant across threads
        with writer_lock(store):
            taken.set()
            done.wait(DONE_S)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert taken.wait(DONE_S)
        capsys.readouterr()
        assert main(["ingest", str(corpus), "--store", str(store), "--lock-timeout", "0"]) == 2
        err = capsys.readouterr().err
        assert f"ragspine: error: {store}: another writer (pid {os.getpid()}" in err and "--lock-timeout" in err
    finally:
        done.set()
        holder.join(DONE_S)
    assert _snapshot_generation(store) == generation  # refused before anything was read or written
    assert main(["ingest", str(corpus), "--store", str(store), "--lock-timeout", "0"]) == 0


def _snapshot_generation(store: Path) -> int:
    with ChunkStore(store / CHUNKS_DB, read_only=True) as cs:
        return cs.generation


@pytest.mark.subprocess
@POSIX_ONLY
def test_a_sigkilled_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus", "a", 8)
    store = tmp_path / "store"
    with GatedIngest(corpus, store, "embed") as held:
        held.wait_gated()
        assert writer_pid(store) == held.pid
        with pytest.raises(StoreBusyError, match=f"pid {held.pid}"):
            ingest(corpus, store, embedding="hashing", progress=False, lock_timeout=0)
        os.kill(held.pid, signal.SIGKILL)
        held.proc.wait(timeout=DONE_S)
    assert writer_pid(store) is None  # the OS released it
    summary = ingest(corpus, store, embedding="hashing", progress=False, lock_timeout=0)  # no wait needed
    assert summary.unchanged == 8
    _consistent(store)


# ------------------------------------------------------------------------------------------------ two ingests


@POSIX_ONLY
@pytest.mark.parametrize(
    ("existing", "phase"),
    [(False, "schema"), (False, "embed"), (True, "embed")],
    ids=["new-store-while-creating", "new-store-while-embedding", "existing-store-while-embedding"],
)
@pytest.mark.subprocess
def test_a_second_ingest_waits_for_the_first_and_both_land_in_order(
    tmp_path: Path, existing: bool, phase: str
) -> None:
    """Regression: the second ingest failed with "not a chunk store" (a store being created) or wrote its
    versions while the first was still indexing, leaving ``index.json`` and ``bm25/`` of another generation
    than the store, while both reported success."""
    base = _corpus(tmp_path / "base", "base", 4)
    first = _corpus(tmp_path / "first", "first", 8)
    second = _corpus(tmp_path / "second", "second", 6)
    store = tmp_path / "store"
    if existing:
        ingest(base, store, embedding="hashing", progress=False)
    with GatedIngest(first, store, phase) as one:
        one.wait_gated()  # holds the lock, in the middle of its write
        two = _child(second, store)
        try:
            line = waiting_line(two)
            assert str(store / LOCK_FILE) in line and f"pid {one.pid}" in line
            assert two.poll() is None  # it waits; it has not written anything
            if phase == "schema":  # a reader of a store being created is told so, not "not a chunk store"
                with pytest.raises(StoreError, match=r"is writing this store.*creating") as info:
                    open_retriever(store, mode="bm25")
                assert "not a chunk store" not in str(info.value)
            out_one = one.release()
            out_two, err_two = two.communicate(timeout=DONE_S)
        finally:
            if two.poll() is None:
                two.kill()
                two.communicate()
    assert two.returncode == 0, err_two
    want, lines = _sequential(tmp_path, *([base] if existing else []), first, second)
    assert summary_counts(out_one.splitlines()[-1]) == lines[-2]
    assert summary_counts(out_two.splitlines()[-1]) == lines[-1]  # reports exactly what it did
    assert _snapshot(store) == want
    _consistent(store)


@pytest.mark.subprocess
@POSIX_ONLY
def test_two_ingests_started_together_end_as_one_after_the_other(tmp_path: Path) -> None:
    one, two = _corpus(tmp_path / "one", "one", 10), _corpus(tmp_path / "two", "two", 10)
    store = tmp_path / "store"
    procs = [_child(one, store), _child(two, store)]
    outs = [p.communicate(timeout=DONE_S) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    with ChunkStore(store / CHUNKS_DB, read_only=True) as cs:
        last = cs.doc_ids()[0][:3]  # the later run retracted the other's documents
    order = (one, two) if last == "two" else (two, one)
    want, _ = _sequential(tmp_path, *order)
    assert _snapshot(store) == want
    _consistent(store)


class _GatedEmbeddings(HashingEmbeddings):
    """Hashing vectors; with ``gate`` set, the second ``embed_documents`` call (the first after the probe) sets
    ``gated`` and waits for ``gate``."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        super().__init__(64)
        self.gate = gate
        self.gated = threading.Event()
        self.calls = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        if self.gate is not None and self.calls == 2:
            self.gated.set()
            assert self.gate.wait(DONE_S)
        return super().embed_documents(texts)


def test_two_threads_ingesting_into_one_store_take_turns(tmp_path: Path) -> None:
    first, second = _corpus(tmp_path / "first", "first", 8), _corpus(tmp_path / "second", "second", 6)
    store = tmp_path / "store"
    gate = threading.Event()
    blocking = _GatedEmbeddings(gate)
    results: dict[str, IngestSummary | BaseException] = {}

    def run(name: str, corpus: Path, emb: HashingEmbeddings) -> None:
        try:
            results[name] = ingest(corpus, store, embedding=emb, progress=False)
        except BaseException as e:  # reported by the assertions below
            results[name] = e

    waiting = Waiting()
    logger = logging.getLogger("langchain_ragspine.backends.directory.lock")
    logger.addHandler(waiting)
    a = threading.Thread(target=run, args=("a", first, blocking))
    b = threading.Thread(target=run, args=("b", second, _GatedEmbeddings()))
    try:
        a.start()
        assert blocking.gated.wait(DONE_S)
        b.start()
        assert waiting.seen.wait(DONE_S), "the second thread did not wait"
        assert b.is_alive() and f"pid {os.getpid()}" in waiting.messages[0]
    finally:
        gate.set()
        a.join(DONE_S)
        b.join(DONE_S)
        logger.removeHandler(waiting)
    assert isinstance(results["a"], IngestSummary) and isinstance(results["b"], IngestSummary), results
    assert results["b"].retracted == 8 and results["b"].new == 6
    want, _ = _sequential(tmp_path, first, second)
    got = _snapshot(store)
    assert got["rows"] == want["rows"] and got["generation"] == want["generation"]
    _consistent(store, _GatedEmbeddings())


# ------------------------------------------------------------------------------------------------ vector store


@pytest.mark.subprocess
@POSIX_ONLY
def test_a_vector_store_write_waits_for_an_ingest_and_searching_never_does(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus", "a", 8)
    store = tmp_path / "store"
    ingest(corpus, store, embedding="hashing", progress=False)
    emb = HashingEmbeddings(256)  # the model of the ingest (another model is refused)
    changed = _corpus(tmp_path / "changed", "b", 40)  # > 32 new chunks: the ingest stops after its probe
    with GatedIngest(changed, store, "embed") as running:
        running.wait_gated()
        impatient = RagSpineVectorStore(store, emb, lock_timeout=0)  # opening an existing store: no wait
        generation = impatient.backend.generation
        vectors = _cache_rows(store)
        assert impatient.similarity_search("b 3 part 1", k=2)  # a search never waits,
        assert _cache_rows(store) == vectors  # and writes no vector beside the running ingest (in memory only)
        with pytest.raises(StoreBusyError, match=rf"pid {running.pid}.*lock_timeout=0"):
            impatient.add_texts(["late"], ids=["late"])
        assert impatient.backend.generation == generation and impatient.get_by_ids(["late"]) == []
        impatient.close()
        patient = RagSpineVectorStore(store, emb)
        waiting = Waiting()
        logger = logging.getLogger("langchain_ragspine.backends.directory.lock")
        logger.addHandler(waiting)
        done: list[object] = []
        writer = threading.Thread(target=lambda: done.append(patient.add_texts(["late text"], ids=["late"])))
        try:
            writer.start()
            assert waiting.seen.wait(DONE_S) and f"pid {running.pid}" in waiting.messages[0]
            assert writer.is_alive() and not done
            running.release()
            writer.join(DONE_S)
        finally:
            logger.removeHandler(waiting)
        assert done == [["late"]]
        assert [d.page_content for d in patient.get_by_ids(["late"])] == ["late text"]  # written after the ingest
        patient.close()


# ------------------------------------------------------------------------------- a store replaced under its writer


def test_a_writer_whose_directory_is_rebuilt_under_it_is_told_so(tmp_path: Path) -> None:
    """Regression (issue 25 trial): a writer holding the lock of a directory that was removed and rebuilt holds the
    lock of the removed file, so it no longer excludes the rebuilt store's writers; when its block ends it must say
    that what it wrote is not in the store at the path, instead of returning as if it were."""
    root = tmp_path / "s"
    root.mkdir()
    with pytest.raises(StoreReplacedError, match="removed or replaced while this writer held its lock") as info:
        with writer_lock(root):

            shutil.rmtree(root)
            root.mkdir()
            # the rebuilt directory's lock is free: another writer takes it at once (the exclusion the old lock lost)
            with writer_lock(root, timeout=0):
                pass
    assert info.value.path == str(root)
    with writer_lock(root, timeout=0):  # the replaced writer released nothing of the new store's
        pass


def test_a_writer_whose_lock_file_is_deleted_under_it_is_told_so(tmp_path: Path) -> None:
    root = tmp_path / "s"
    root.mkdir()
    with pytest.raises(StoreReplacedError, match=f"lock file {LOCK_FILE} was removed while this writer held it"):
        with writer_lock(root):
            (root / LOCK_FILE).unlink()
    with writer_lock(root):  # an error in the block is the block's, not a replaced-store error
        pass
    with pytest.raises(KeyError), writer_lock(root):
        shutil.rmtree(root)
        raise KeyError("the block's own error wins")


def test_an_ingest_whose_store_is_rebuilt_meanwhile_fails_and_the_rebuilt_store_is_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    corpus = _corpus(tmp_path / "corpus", "alpha", 3)
    other = _corpus(tmp_path / "other", "bravo", 2)
    store = tmp_path / "store"
    ingest(corpus, store, progress=False)
    import langchain_ragspine.pipeline.ingest as ingest_module  # where ingest looks the stage up

    real = ingest_module.write_documents

    def rebuild_then_write(*args: object, **kwargs: object) -> object:
        shutil.rmtree(store)  # rm -rf store; ingest other  (the rebuilt store's ingest does not wait: the lock is gone)
        monkeypatch.setattr(ingest_module, "write_documents", real)
        ingest(other, store, progress=False, lock_timeout=0)
        return real(*args, **kwargs)

    monkeypatch.setattr(ingest_module, "write_documents", rebuild_then_write)
    with pytest.raises(StoreReplacedError, match="not in the store now at this path"):
        ingest(corpus, store, progress=False, retract_missing=True)
    with ChunkStore(store / CHUNKS_DB, read_only=True) as cs:
        assert sorted({c.doc_id.split("/")[-1] for c in cs.iter_chunks()}) == ["bravo00", "bravo01"]


def test_a_vector_store_write_on_a_directory_rebuilt_under_its_lock_lands_in_the_rebuilt_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from langchain_core.documents import Document

    store = tmp_path / "vs"
    vs = RagSpineVectorStore(store, embedding=HashingEmbeddings())
    vs.add_documents([Document("first text about rivers", id="a")])
    followed = vs.backend.source._chunks  # type: ignore[attr-defined]
    real = followed.store
    rebuilt: list[bool] = []

    def rebuild_once() -> ChunkStore:
        """The first read of the store inside the write's lock: the directory is rebuilt by another writer first."""
        if not rebuilt:
            rebuilt.append(True)
            shutil.rmtree(store)
            RagSpineVectorStore(store, embedding=HashingEmbeddings()).add_documents(
                [Document("rebuilt text about lakes", id="b")]
            )
        return real()  # type: ignore[no-any-return]

    monkeypatch.setattr(followed, "store", rebuild_once)
    vs.add_documents([Document("second text about rivers", id="c")])
    monkeypatch.undo()
    fresh = RagSpineVectorStore(store, embedding=HashingEmbeddings())
    assert sorted(d.id for d in fresh.get_by_ids(["a", "b", "c"])) == ["b", "c"]
