"""``DIR/raptor.json``: a store directory's RAPTOR tree, a derived file like ``graph.json`` (written by ingest when
RAPTOR is switched on: ``ingest(raptor=...)``, ``ragspine ingest --raptor``, ``RAGSPINE_RAPTOR``; absent otherwise).

One JSON object, written to a temporary name and renamed into place (a reader sees the old file or the new one)::

    {"format": "ragspine-raptor-file/1", "generation": 12, "tree": {RaptorTree.to_json()}, "sha256": "..."}

The tree holds its builder's config (the embedding spec search rebuilds the query encoder from), the fingerprints
of its leaf chunks (none RESTRICTED), and every node's vector; leaves hold no text (the chunk store does).
``sha256`` covers the rest (a damaged or edited file is read as absent).  Keys are sorted and the text is compact,
so the same store gives the same bytes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_ragspine.backends.directory.checked_json import (
    read_checked_json,
    remove_derived_file,
    write_checked_json,
)
from langchain_ragspine.raptor.tree import RaptorTree, chunk_fingerprint
from langchain_ragspine.sensitivity import is_restricted

__all__ = [
    "RAPTOR_FILE",
    "RAPTOR_FILE_FORMAT",
    "SavedRaptor",
    "read_raptor_file",
    "remove_raptor_file",
    "withdraw_unserved",
    "write_raptor_file",
]

#: The file name inside a store directory.
RAPTOR_FILE = "raptor.json"
RAPTOR_FILE_FORMAT = "ragspine-raptor-file/1"


@dataclass
class SavedRaptor:
    """What ``raptor.json`` holds: the tree and the store generation it was built from."""

    tree: RaptorTree
    generation: int | None




def write_raptor_file(root: str | os.PathLike[str], saved: SavedRaptor) -> None:
    """Write ``saved`` as ``root/raptor.json`` atomically.

    Raises:
        StoreWriteError: the file could not be written (disk full, …); the previous ``raptor.json`` is intact and
            no temporary file is left.
    """
    write_checked_json(Path(root) / RAPTOR_FILE,
                       {"format": RAPTOR_FILE_FORMAT, "generation": saved.generation, "tree": saved.tree.to_json()})


def read_raptor_file(root: str | os.PathLike[str]) -> tuple[SavedRaptor | None, str | None]:
    """``(the saved tree, None)``, ``(None, None)`` when there is none, or ``(None, why)`` when ``raptor.json`` is
    damaged (not JSON, another format, a checksum that does not match, a malformed tree): then it is treated as
    absent.

    Raises:
        StoreError: ``raptor.json`` is there but not a regular file (a FIFO, a folder).
    """
    path = Path(root) / RAPTOR_FILE
    body, why = read_checked_json(path, RAPTOR_FILE_FORMAT)
    if body is None:
        return None, why
    try:
        return SavedRaptor(RaptorTree.from_json(body["tree"]), body["generation"]), None
    except (ValueError, KeyError, TypeError) as e:
        return None, f"{path}: unreadable ({type(e).__name__}: {e})"


def remove_raptor_file(root: str | os.PathLike[str]) -> bool:
    """Remove ``root/raptor.json``; whether there was one.

    Raises:
        StoreError: it is not a regular file.
    """
    return remove_derived_file(Path(root) / RAPTOR_FILE)


def withdraw_unserved(root: str | os.PathLike[str], store: Any) -> int:
    """Drop from ``root/raptor.json`` every leaf of a chunk the store no longer serves as it was built — retracted,
    changed, or relabelled RESTRICTED — and every summary above one (its text was written from theirs), so the
    derived file never holds their vectors or text; what a write that is not an ingest (the vector store's) runs
    after it commits.  The rest of the tree is kept as it was (its ``generation`` too, so search still sees it is
    behind the store).  A damaged ``raptor.json`` (which cannot be filtered) is removed.  Returns the chunks
    withdrawn.

    ``store`` is the open :class:`~langchain_ragspine.backends.directory.chunk_store.ChunkStore`.  Cost: one
    ``get_chunks`` over the tree's chunks, only when there is a ``raptor.json``.

    Raises:
        StoreWriteError: the filtered file could not be written (the caller removes the file then).
    """
    saved, damaged = read_raptor_file(root)
    if saved is None:
        if damaged is not None:
            remove_raptor_file(root)
        return 0
    current = store.get_chunks(sorted(saved.tree.chunks))
    gone: list[str] = []
    for cid, fingerprint in saved.tree.chunks.items():
        chunk = current.get(cid)
        doc = None if chunk is None else chunk.to_document()
        if doc is None or is_restricted(doc) or chunk_fingerprint(doc) != fingerprint:
            gone.append(cid)
    if gone:
        write_raptor_file(root, SavedRaptor(saved.tree.without(gone), saved.generation))
    return len(gone)
