"""The layout of a store directory: the names of its files, how one is created and checked, and its index record.

A store directory holds::

    DIR/ragspine-store.json   STORE_MARKER: marks a ragspine store (the corpus loader never walks into it)
    DIR/chunks.sqlite         CHUNKS_DB: the versioned chunk store, the source of truth
    DIR/bm25/                 BM25_DIR: the BM25 index of its active chunks
    DIR/vector/               VECTOR_DIR: the FAISS vector index (with an embedding model)
    DIR/embeddings.sqlite     EMBEDDING_CACHE: chunk vectors by chunk_id + content hash, for every model
    DIR/graph.json            the relation graph, only when ingested with a graph
                              (:mod:`~langchain_ragspine.backends.directory.graph_file`)
    DIR/index.json            INDEX_STATE: which generation, tokenizer, headers and model the indexes were built
                              with (:mod:`~langchain_ragspine.backends.directory.index_state`)
    DIR/.ragspine.lock        LOCK_FILE: the writer lock (:mod:`~langchain_ragspine.backends.directory.lock`)

Use it as ``with store_writer(root): prepare_store_dir(root); ...`` to write a store (``ingest`` and the vector
store do), and :func:`read_index_record` to read its index record as a search does.  Nothing here builds an index
(:mod:`langchain_ragspine.pipeline.ingest` does).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from langchain_ragspine.backends.directory.chunk_store import ChunkStore
from langchain_ragspine.backends.directory.embedding_cache import EmbeddingCache
from langchain_ragspine.backends.directory.index_state import INDEX_STATE, read_index_state
from langchain_ragspine.backends.directory.lock import LOCK_FILE, NOT_A_DIRECTORY, writer_lock, writer_pid
from langchain_ragspine.backends.directory.regular_files import check_regular
from langchain_ragspine.document_loaders import corpus as corpus_module
from langchain_ragspine.errors import (
    StaleIndexWarning,
    StoreError,
    StoreWriteError,
    sqlite_cannot_open,
    write_errors,
)

__all__ = [
    "BM25_DIR",
    "CHUNKS_DB",
    "EMBEDDING_CACHE",
    "INDEX_STATE",
    "STORE_MARKER",
    "VECTOR_DIR",
    "check_store_dir",
    "describe_damage",
    "has_chunk_store",
    "open_embedding_cache",
    "prepare_store_dir",
    "read_index_record",
    "store_writer",
    "writer_note",
]

#: File and folder names inside a store directory (``index.json``: :mod:`langchain_ragspine.backends.directory.index_state`).
CHUNKS_DB = "chunks.sqlite"
BM25_DIR = "bm25"
VECTOR_DIR = "vector"
EMBEDDING_CACHE = "embeddings.sqlite"
#: Marks a directory as a ragspine store; ``CorpusLoader`` never walks into a folder holding it.
STORE_MARKER = corpus_module.STORE_MARKER


def check_store_dir(root: Path) -> None:
    """Check that ``root`` can be a store directory: absent, empty (or holding only the writer lock,
    :data:`~langchain_ragspine.backends.directory.lock.LOCK_FILE`), or a ragspine store.  Writes nothing.

    Raises:
        StoreError: ``root`` is a file, or a non-empty directory that is not a ragspine store (so ingest never
            overwrites someone else's ``index.json`` or ``bm25/``).
    """
    if root.exists() and not root.is_dir():
        raise StoreError(NOT_A_DIRECTORY, path=root)
    if root.is_dir() and not (root / STORE_MARKER).exists() and not (root / CHUNKS_DB).exists():
        if any(p.name != LOCK_FILE for p in root.iterdir()):
            raise StoreError(
                f"this directory is not empty and is not a ragspine store (no {STORE_MARKER}); "
                "choose a new or empty directory for --store",
                path=root,
            )


@contextlib.contextmanager
def store_writer(root: Path, *, lock_timeout: float | None = None) -> Iterator[None]:
    """Hold the writer lock of store directory ``root`` (:func:`~langchain_ragspine.backends.directory.lock.writer_lock`)
    for the block, after :func:`check_store_dir` (so no lock file is ever made in someone else's directory).
    Every writer of a store directory writes inside one: :func:`~langchain_ragspine.pipeline.ingest.ingest`, the
    vector store's writes.

    Raises:
        StoreError: see :func:`check_store_dir`; :class:`~langchain_ragspine.backends.directory.lock.StoreBusyError` when
            another writer still holds the lock after ``lock_timeout`` seconds (``None``: wait).
    """
    check_store_dir(root)
    with writer_lock(root, timeout=lock_timeout):
        yield


def prepare_store_dir(root: Path) -> None:
    """Create ``root`` as a store directory, or check that an existing one is a ragspine store (call it inside
    :func:`store_writer`: it removes what a killed writer left behind).

    Raises:
        StoreError: see :func:`check_store_dir`.
        StoreWriteError: ``root`` or its marker file cannot be written (no inode or block left, a read-only
            folder, …): nothing of the store was written yet (a marker written in part is removed again).
    """
    check_store_dir(root)
    marker = root / STORE_MARKER
    with write_errors(marker, kept="nothing of the store was written yet"):
        root.mkdir(parents=True, exist_ok=True)
        if not marker.exists():
            try:
                marker.write_text(json.dumps({"format": "ragspine-store/1"}) + "\n", "utf-8")
            except BaseException:
                with contextlib.suppress(OSError):
                    marker.unlink()
                raise
    for leftover in list(root.glob(f".{BM25_DIR}.tmp-*")) + list(root.glob(f".{BM25_DIR}.old-*")):
        shutil.rmtree(leftover, ignore_errors=True)  # left by a process killed while saving the index


def has_chunk_store(root: Path) -> bool:
    """Whether ``root`` holds a chunk store: ``chunks.sqlite`` exists and is not blank
    (:meth:`~langchain_ragspine.backends.directory.chunk_store.ChunkStore.is_blank`: a first ingest stopped before its schema committed —
    the disk was full — which the next ingest creates again).

    Raises:
        StoreError: ``chunks.sqlite`` is there but not a regular file (a FIFO, a folder, a device)."""
    # a FIFO, a folder or a device there: StoreError naming it (never opened: it would block or never end)
    return check_regular(root / CHUNKS_DB) and not ChunkStore.is_blank(root / CHUNKS_DB)


def describe_damage(error: StoreError) -> str:
    """What is wrong with an invalid ``index.json``, without its path: ``"field 'vector': expected an object …"``."""
    return (f"line {error.line}: " if error.line else "") + (f"field {error.field!r}: " if error.field else "") + (
        error.reason)


def read_index_record(store_dir: Path) -> tuple[dict[str, Any], StoreError | None]:
    """``(the store's index record, None)``, ``({}, None)`` when it has none, or ``({}, why)`` when ``index.json``
    is invalid (:func:`~langchain_ragspine.backends.directory.index_state.read_index_state`): then it is treated as absent."""
    try:
        return read_index_state(store_dir) or {}, None
    except StoreError as e:
        return {}, e


def open_embedding_cache(root: Path, *, read_only: bool = False) -> EmbeddingCache:
    """The store's embedding cache (``root/embeddings.sqlite``); an unreadable one (it is only a cache) is moved
    aside as ``embeddings.sqlite.corrupt-<unix time>`` and started afresh, with a :class:`StaleIndexWarning`.

    Raises:
        StoreWriteError: the disk is full (opening writes the ``-wal`` / ``-shm`` files); the cache is kept.
        StoreError: ``read_only`` and the cache is unreadable, or SQLite could not open or create a file of it.
    """
    path = root / EMBEDDING_CACHE
    try:
        return EmbeddingCache(path, read_only=read_only)
    except StoreWriteError:
        raise  # the disk is full (opening writes the -wal/-shm files): the cache is intact, keep it
    except StoreError as e:
        if read_only or not path.exists() or sqlite_cannot_open(e):
            raise  # a file SQLite could not open or create (its -wal, its -shm) says nothing of the cache: keep it
        aside = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
        for suffix in ("", "-wal", "-shm"):
            src = Path(str(path) + suffix)
            if src.exists():
                os.replace(src, Path(str(aside) + suffix))
        warnings.warn(
            f"{path}: unreadable embedding cache ({e.reason}); moved to {aside.name} and started a new one",
            StaleIndexWarning,
            stacklevel=3,
        )
        return EmbeddingCache(path)


def writer_note(root: Path) -> str | None:
    """``"an ingest or another writer (pid N) is writing this store"`` while a writer holds the store's lock, else
    ``None``."""
    pid = writer_pid(root)
    if pid is None:
        return None
    return f"an ingest or another writer ({f'pid {pid}' if pid else 'pid unknown'}) is writing this store"
