"""Child process for the store-concurrency tests (``test_store_lock.py``, ``test_open_during_ingest.py``); not a
test module itself.

Usage: ``python _ingest_gate_child.py CORPUS STORE PHASE``.  Ingests ``CORPUS`` into ``STORE`` with the
``"hashing"`` embedding spec and ``progress=False``, stopping once at ``PHASE``:

* ``embed`` — the first ``embed_documents`` call after the probe batch, i.e. after the chunk store, its BM25 index
  and ``index.json`` are written and while the rest is being embedded;
* ``schema`` — inside the creation of a new chunk store's schema (the file exists, its tables do not yet);
* ``pg-commit`` — (a ``postgresql://`` store) after the first document version of the run is committed, the
  others not yet written;
* ``none`` — nowhere.

At the stop it prints ``GATED <phase>`` on stdout and blocks until the parent writes a line ``go`` on its stdin (so
the parent controls the window exactly, no sleeps), then goes on; at the end it prints ``FINISHED <summary line>``.
The stops come from patching ``HashingEmbeddings.embed_documents`` / ``ChunkStore._create_schema`` /
``PostgresChunkStore.replace_doc_chunks`` in this process only: the production code has no test hooks.  :class:`GatedIngest` runs it from a test.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from langchain_ragspine.backends.directory.chunk_store import ChunkStore
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.pipeline.ingest import ingest

REPO = Path(__file__).resolve().parents[2]
#: Seconds a test waits at most for a child to finish once released (a guard against a hang, not a measurement).
DONE_S = 300


def child_env() -> dict[str, str]:
    """The environment of a child: this checkout first on ``PYTHONPATH``."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


class GatedIngest:
    """This script run as a child: ``GatedIngest(corpus, store, "embed")``; :meth:`wait_gated` returns once it has
    stopped, :meth:`release` lets it finish and returns its stdout.  Use it as a context manager: a child still
    running at the end is killed."""

    def __init__(self, corpus: Path, store: Path | str, phase: str) -> None:
        self.phase = phase
        self.proc = subprocess.Popen(
            [sys.executable, __file__, str(corpus), str(store), phase],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(),
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_gated(self) -> None:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()  # blocks until the child stops (or exits)
        assert line.strip() == f"GATED {self.phase}", (line, self.proc.communicate(timeout=DONE_S))

    def release(self) -> str:
        """Let the child go on; its stdout (ends with ``FINISHED <summary>``) once it has exited with status 0."""
        out, err = self.proc.communicate("go\n", timeout=DONE_S)
        assert self.proc.returncode == 0, (out, err)
        return out

    def __enter__(self) -> GatedIngest:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.communicate()


def waiting_line(proc: subprocess.Popen[str]) -> str:
    """The stderr line in which the child ``proc`` says it waits for a writer (read as it is written, no polling).

    Raises:
        AssertionError: the child exited without waiting (with its exit status and stderr).
    """
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if "waiting for the writer holding" in line:
            return line
    raise AssertionError(f"the second ingest never waited; it exited with {proc.wait()}: {''.join(seen)}")


def summary_counts(line: str) -> str:
    """An ingest's summary line (``FINISHED <summary>`` or the summary itself) without its seconds."""
    return line.strip().removeprefix("FINISHED ").rsplit(";", 1)[0]


class Waiting(logging.Handler):
    """Collects the writer locks' "waiting for …" lines (the ``langchain_ragspine.backends.directory.lock`` logger); ``seen``
    is set at the first.  Use it as a context manager to listen for the block."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = threading.Event()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())
        self.seen.set()

    def __enter__(self) -> Waiting:
        logging.getLogger("langchain_ragspine.backends.directory.lock").addHandler(self)
        return self

    def __exit__(self, *exc: object) -> None:
        logging.getLogger("langchain_ragspine.backends.directory.lock").removeHandler(self)


def _gate(phase: str) -> None:
    print(f"GATED {phase}", flush=True)
    if sys.stdin.readline().strip() != "go":
        sys.exit(3)  # the parent went away


def _stop_in_embedding() -> None:
    original = HashingEmbeddings.embed_documents
    calls = [0]

    def gated(self: HashingEmbeddings, texts: list[str]) -> list[list[float]]:
        calls[0] += 1
        if calls[0] == 2:  # the first call is the probe, before the store changes
            _gate("embed")
        return original(self, texts)

    HashingEmbeddings.embed_documents = gated  # type: ignore[method-assign]


def _stop_in_schema() -> None:
    original = ChunkStore._create_schema

    def gated(self: ChunkStore, cur: Any) -> None:
        _gate("schema")
        original(self, cur)

    ChunkStore._create_schema = gated  # type: ignore[method-assign]


def _stop_after_a_postgres_commit() -> None:
    from langchain_ragspine.backends.postgres.chunk_store import PostgresChunkStore

    original = PostgresChunkStore.replace_doc_chunks
    calls = [0]

    def gated(self: PostgresChunkStore, *args: Any, **kwargs: Any) -> int:
        version = original(self, *args, **kwargs)  # committed: its own transaction
        calls[0] += 1
        if calls[0] == 1:
            _gate("pg-commit")
        return version

    PostgresChunkStore.replace_doc_chunks = gated  # type: ignore[method-assign]


if __name__ == "__main__":
    corpus, store, phase = sys.argv[1:4]
    stops = {"embed": _stop_in_embedding, "schema": _stop_in_schema, "pg-commit": _stop_after_a_postgres_commit,
             "none": lambda: None}
    stops[phase]()
    summary = ingest(corpus, store, embedding="hashing", progress=False)
    print("FINISHED", summary.line(), flush=True)
