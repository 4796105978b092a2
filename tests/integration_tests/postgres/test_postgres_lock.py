"""Issue 25, 6a: one writer at a time per PostgreSQL store, as for a store directory (``test_store_lock.py``).

Regression: two ingests into one PostgreSQL store interleaved — A ingesting 1,500 documents, B (started 8 s later)
20 documents, retracting the rest — and the store ended with 1,101 active documents, 1,081 of A's and B's 20: neither
run's corpus.  ``docs/postgres.md`` said "ingest is serialised per store (one writer at a time)", which was false:
only each document's own transaction took a table lock.  Now every writer (ingest, CLI or Python; a
``PostgresVectorStore`` write; ``postgres.add_documents``) holds a session advisory lock on the store's schema for
its whole write; a second writer waits, saying for whom, or refuses after its ``lock_timeout`` with
``StoreBusyError``; readers never wait; a SIGKILLed holder leaves no lock behind.

Needs the session's PostgreSQL (``pg_server`` in ``tests/conftest.py``); skips, saying why, without it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document

from langchain_ragspine.backends.directory.lock import StoreBusyError
from langchain_ragspine.backends.postgres.chunk_store import PostgresChunkStore
from langchain_ragspine.backends.postgres.lock import writer_lock, writer_pid
from langchain_ragspine.backends.postgres.versions import add_documents
from langchain_ragspine.cli import main
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.errors import StoreError
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.sources import open_retriever
from langchain_ragspine.vectorstores import PostgresVectorStore
from tests.unit_tests._ingest_gate_child import (
    DONE_S,
    GatedIngest,
    Waiting,
    child_env,
    summary_counts,
    waiting_line,
)

POSIX_ONLY = pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs POSIX signals")
EMB = HashingEmbeddings(256)  # the "hashing" spec the ingests use


def _corpus(root: Path, name: str, n: int) -> Path:
    root.mkdir(parents=True)
    for d in range(n):
        (root / f"{name}{d:02d}.md").write_text(
            f"# {name} {d}\n\n{name} {d}: term {name}{d} and common words about rivers", "utf-8"
        )
    return root


def _rows(url: str) -> tuple[list[tuple[Any, ...]], int]:
    """Every chunk row (history included, without timestamps) and the generation."""
    with PostgresChunkStore(url, read_only=True) as store:
        rows = [(c.doc_id, c.version, c.chunk_id, c.text, c.active) for c in store.iter_chunks(include_inactive=True)]
        return rows, store.generation


class _Holder:
    """Another thread of this process holding the store's writer lock until :meth:`release` (the lock is
    re-entrant per thread only); ``do(fn)`` runs ``fn`` in that thread, inside the lock, and re-raises its error."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._taken, self._go, self._done = threading.Event(), threading.Event(), threading.Event()
        self._jobs: list[Any] = []
        self._errors: list[BaseException] = []
        self.thread = threading.Thread(target=self._run)
        self.thread.start()
        assert self._taken.wait(DONE_S)

    def _run(self) -> None:
        with writer_lock(self.url):
            self._taken.set()
            while self._go.wait(DONE_S) and self._jobs:
                self._go.clear()
                try:
                    self._jobs.pop()()
                except BaseException as e:  # re-raised by do()
                    self._errors.append(e)
                self._done.set()

    def do(self, job: Any) -> None:
        self._done.clear()
        self._jobs.append(job)
        self._go.set()
        assert self._done.wait(DONE_S)
        if self._errors:
            raise self._errors.pop()

    def release(self) -> None:
        self._go.set()
        self.thread.join(DONE_S)


# ------------------------------------------------------------------------------------------------ the lock itself


def _nest(*urls: str) -> None:
    with writer_lock(urls[0]), writer_lock(urls[1], timeout=0):
        assert writer_pid(urls[1]) == os.getpid()


def test_the_lock_is_per_store_exclusive_reentrant_and_names_its_holder(pg_url: str, other_pg_url: str) -> None:
    assert writer_pid(pg_url) is None
    same_store = pg_url.replace(",public", "")  # another URL of the same schema
    holder = _Holder(pg_url)
    try:
        assert writer_pid(pg_url) == os.getpid() == writer_pid(same_store)
        holder.do(lambda: _nest(pg_url, same_store))  # the holding thread may nest it, by either URL
        with writer_lock(other_pg_url, timeout=0):  # another store (schema) of the same database: its own lock
            pass
        with pytest.raises(StoreBusyError) as refused:  # this thread is not the holder: it is refused
            with writer_lock(same_store, timeout=0):
                pass
    finally:
        holder.release()
    busy = refused.value
    assert isinstance(busy, StoreError) and busy.pid == os.getpid()
    assert f"another writer (pid {os.getpid()}: an ingest or a vector-store write) holds the writer lock of " \
           "schema 't_" in str(busy) and "lock_timeout=0" in str(busy) and "--lock-timeout" in str(busy)
    assert writer_pid(pg_url) is None


@pytest.mark.parametrize("bad", [-1, float("nan"), "5"])
def test_a_bad_lock_timeout_is_refused_before_anything_happens(pg_url: str, bad: Any) -> None:
    with pytest.raises((TypeError, ValueError), match="lock_timeout"):
        PostgresVectorStore(pg_url, embedding=EMB, lock_timeout=bad)
    with pytest.raises((TypeError, ValueError), match="lock_timeout"):
        with writer_lock(pg_url, timeout=bad):
            pass


_HOLDING = """
import sys, time
from langchain_ragspine.backends.postgres.lock import writer_lock
with writer_lock(sys.argv[1]):
    print("HELD", flush=True)
    time.sleep(600)
"""


@pytest.mark.subprocess
@POSIX_ONLY
def test_a_sigkilled_holder_leaves_no_stale_lock(pg_url: str) -> None:
    holder = subprocess.Popen([sys.executable, "-c", _HOLDING, pg_url], stdout=subprocess.PIPE, text=True,
                              env=child_env())
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "HELD"
        assert writer_pid(pg_url) == holder.pid
        with pytest.raises(StoreBusyError, match=f"pid {holder.pid}"):
            with writer_lock(pg_url, timeout=0):
                pass
    finally:
        holder.kill()
        holder.wait(DONE_S)
    with writer_lock(pg_url, timeout=DONE_S):  # the server released it when the connection dropped
        assert writer_pid(pg_url) == os.getpid()


# ------------------------------------------------------------------------------------------------ ingest


def test_an_ingest_waits_or_refuses_while_another_writer_holds_the_store(
    tmp_path: Path, pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = _corpus(tmp_path / "corpus", "a", 3)
    assert main(["ingest", str(corpus), "--store", pg_url, "--embedding", "hashing"]) == 0
    before = _rows(pg_url)
    holder = _Holder(pg_url)
    try:
        with pytest.raises(StoreBusyError, match=rf"pid {os.getpid()}: .*lock_timeout=0\b"):
            ingest(corpus, pg_url, embedding="hashing", progress=False, lock_timeout=0)
        with pytest.raises(StoreBusyError, match=r"waited \d+\.\ds \(lock_timeout=0\.2\)"):
            ingest(corpus, pg_url, embedding="hashing", progress=False, lock_timeout=0.2)
        capsys.readouterr()
        assert main(["ingest", str(corpus), "--store", pg_url, "--lock-timeout", "0"]) == 2
        err = capsys.readouterr().err
        assert f"another writer (pid {os.getpid()}" in err and "--lock-timeout" in err
        # readers never wait
        assert open_retriever(pg_url, mode="hybrid", embedding="hashing").invoke("common words")
        assert PostgresVectorStore(pg_url, embedding=EMB).similarity_search("common words", k=1)
    finally:
        holder.release()
    assert _rows(pg_url) == before  # refused before anything was read or written
    assert ingest(corpus, pg_url, embedding="hashing", progress=False, lock_timeout=0).unchanged == 3


@pytest.mark.subprocess
@POSIX_ONLY
def test_a_second_ingest_waits_for_the_first_and_the_store_ends_as_after_one_then_the_other(
    tmp_path: Path, pg_url: str, other_pg_url: str
) -> None:
    """The trial's failing input (6a), small: A is part way through its documents (one committed) when B starts;
    B must wait for A, then retract A's documents and write its own — exactly what A-then-B leaves."""
    base = _corpus(tmp_path / "base", "base", 4)
    first = _corpus(tmp_path / "first", "first", 6)
    second = _corpus(tmp_path / "second", "second", 2)
    ingest(base, pg_url, embedding="hashing", progress=False)
    with GatedIngest(first, pg_url, "pg-commit") as one:
        one.wait_gated()  # holds the lock: one of its documents committed, five to go
        partway = _rows(pg_url)
        with GatedIngest(second, pg_url, "none") as two:  # stops nowhere
            line = waiting_line(two.proc)
            assert f"pid {one.pid}" in line and "the writer lock of schema 't_" in line
            assert two.proc.poll() is None and _rows(pg_url) == partway  # it waits, and has written nothing
            out_one = one.release()
            out_two = two.release()
    lines = [summary_counts(ingest(c, other_pg_url, embedding="hashing", progress=False).line())
             for c in (base, first, second)]
    assert summary_counts(out_one.splitlines()[-1]) == lines[1]
    assert summary_counts(out_two.splitlines()[-1]) == lines[2]  # B reports what it did: 2 new, 6 retracted
    got, want = _rows(pg_url), _rows(other_pg_url)
    assert got == want
    with PostgresChunkStore(pg_url, read_only=True) as store:
        assert store.doc_ids() == ["second00", "second01"]


# ------------------------------------------------------------------------------------------------ vector store


def test_a_vector_store_write_waits_for_the_writer_and_merges_what_it_wrote(pg_url: str) -> None:
    """A ``PostgresVectorStore`` write reads the document's current chunks under the lock: a write that waited
    merges into what the holder wrote meanwhile, instead of into the version it saw before."""
    seed = Document("x chunk", metadata={"doc_id": "d", "chunk_id": "d#x"})
    PostgresVectorStore(pg_url, embedding=EMB).add_documents([seed])
    impatient = PostgresVectorStore(pg_url, embedding=EMB, lock_timeout=0)
    holder = _Holder(pg_url)
    done: list[object] = []
    try:
        with pytest.raises(StoreBusyError, match=rf"pid {os.getpid()}.*lock_timeout=0"):
            impatient.add_documents([Document("late", metadata={"doc_id": "d", "chunk_id": "d#late"})])
        with pytest.raises(StoreBusyError, match="lock_timeout=0"):
            impatient.delete(["d#x"])
        with pytest.raises(StoreBusyError, match="lock_timeout=0"):
            add_documents(pg_url, [seed], lock_timeout=0)
        assert sorted(d.id for d in impatient.similarity_search("chunk", k=5)) == ["d#x"]  # searches never wait
        patient = PostgresVectorStore(pg_url, embedding=EMB)
        with Waiting() as waiting:
            writer = threading.Thread(target=lambda: done.append(patient.add_documents(
                [Document("w chunk", metadata={"doc_id": "d", "chunk_id": "d#w"})])))
            writer.start()
            assert waiting.seen.wait(DONE_S), "the vector-store write did not wait"
            assert f"pid {os.getpid()}" in waiting.messages[0] and writer.is_alive() and not done
            # the holder writes the same document meanwhile (nested in its own lock)
            holder.do(lambda: PostgresVectorStore(pg_url, embedding=EMB).add_documents(
                [Document("t chunk", metadata={"doc_id": "d", "chunk_id": "d#t"})]))
    finally:
        holder.release()
    writer.join(DONE_S)
    assert done == [["d#w"]]
    with PostgresChunkStore(pg_url, read_only=True) as store:
        assert [c.chunk_id for c in store.iter_chunks(doc_id="d")] == ["d#x", "d#t", "d#w"]
