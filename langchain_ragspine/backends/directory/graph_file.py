"""``DIR/graph.json``: a store directory's relation graph, a derived file like ``bm25/`` (rebuilt by ingest when a
graph is switched on; absent otherwise).

One JSON object, written to a temporary name and renamed into place (a reader sees the old file or the new one)::

    {"format": "ragspine-graph-file/1", "generation": 12, "extractor": {"name": "cooccurrence", ...},
     "chunks": {chunk_id: fingerprint}, "graph": {InMemoryGraphStore.to_json()}, "sha256": "..."}

``chunks`` are the chunks the graph was extracted from (none RESTRICTED) with their
:func:`~langchain_ragspine.relations.extractors.chunk_fingerprint`; ``sha256`` covers the rest (a damaged or
edited file is read as absent).  Keys are sorted and the text is compact, so the same store gives the same bytes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_ragspine.backends.directory.checked_json import (
    read_checked_json,
    remove_derived_file,
    write_checked_json,
)
from langchain_ragspine.relations.extractors import chunk_fingerprint, extractions_of, graph_of
from langchain_ragspine.relations.store import InMemoryGraphStore
from langchain_ragspine.sensitivity import is_restricted

__all__ = [
    "GRAPH_FILE",
    "GRAPH_FILE_FORMAT",
    "SavedGraph",
    "read_graph_file",
    "remove_graph_file",
    "withdraw_unserved",
    "write_graph_file",
]

#: The file name inside a store directory.
GRAPH_FILE = "graph.json"
GRAPH_FILE_FORMAT = "ragspine-graph-file/1"


@dataclass
class SavedGraph:
    """What ``graph.json`` holds: the graph, the store generation it was built from, the extractor's config and
    the fingerprints of the chunks it came from."""

    graph: InMemoryGraphStore
    generation: int | None
    extractor: dict[str, Any]
    chunks: dict[str, str] = field(default_factory=dict)




def write_graph_file(root: str | os.PathLike[str], saved: SavedGraph) -> None:
    """Write ``saved`` as ``root/graph.json`` atomically.

    Raises:
        StoreWriteError: the file could not be written (disk full, …); the previous ``graph.json`` is intact and
            no temporary file is left.
    """
    write_checked_json(Path(root) / GRAPH_FILE, {
        "format": GRAPH_FILE_FORMAT, "generation": saved.generation, "extractor": saved.extractor,
        "chunks": dict(sorted(saved.chunks.items())), "graph": saved.graph.to_json(),
    })


def read_graph_file(root: str | os.PathLike[str]) -> tuple[SavedGraph | None, str | None]:
    """``(the saved graph, None)``, ``(None, None)`` when there is none, or ``(None, why)`` when ``graph.json`` is
    damaged (not JSON, another format, a checksum that does not match): then it is treated as absent.

    Raises:
        StoreError: ``graph.json`` is there but not a regular file (a FIFO, a folder).
    """
    path = Path(root) / GRAPH_FILE
    body, why = read_checked_json(path, GRAPH_FILE_FORMAT)
    if body is None:
        return None, why
    try:
        return SavedGraph(InMemoryGraphStore.from_json(body["graph"]), body["generation"], dict(body["extractor"]),
                          {str(k): str(v) for k, v in dict(body["chunks"]).items()}), None
    except (ValueError, KeyError, TypeError) as e:
        return None, f"{path}: unreadable ({type(e).__name__}: {e})"


def remove_graph_file(root: str | os.PathLike[str]) -> bool:
    """Remove ``root/graph.json``; whether there was one.

    Raises:
        StoreError: it is not a regular file.
    """
    return remove_derived_file(Path(root) / GRAPH_FILE)


def withdraw_unserved(root: str | os.PathLike[str], store: Any) -> int:
    """Drop from ``root/graph.json`` every extraction of a chunk the store no longer serves as it was extracted —
    retracted, changed, or relabelled RESTRICTED — so the derived file never holds their entities or edges; what a
    write that is not an ingest (the vector store's) runs after it commits.  The rest of the graph is kept as it
    was (its ``generation`` too, so search still sees it is behind the store and brings it up to date in memory).
    A damaged ``graph.json`` (which cannot be filtered) is removed.  Returns the chunks withdrawn.

    ``store`` is the open :class:`~langchain_ragspine.backends.directory.chunk_store.ChunkStore`.  Cost: one
    ``get_chunks`` over the graph's chunks, only when there is a ``graph.json``.

    Raises:
        StoreWriteError: the filtered file could not be written (the caller removes the file then).
    """
    saved, damaged = read_graph_file(root)
    if saved is None:
        if damaged is not None:
            remove_graph_file(root)
        return 0
    current = store.get_chunks(sorted(saved.chunks))
    keep: dict[str, str] = {}
    for cid, fingerprint in saved.chunks.items():
        chunk = current.get(cid)
        if chunk is None:
            continue
        doc = chunk.to_document()
        if not is_restricted(doc) and chunk_fingerprint(doc) == fingerprint:
            keep[cid] = fingerprint
    withdrawn = len(saved.chunks) - len(keep)
    if withdrawn:
        graph = graph_of(extractions_of(saved.graph, keep))
        assert isinstance(graph, InMemoryGraphStore)
        write_graph_file(root, SavedGraph(graph, saved.generation, saved.extractor, keep))
    return withdrawn
