"""A relation graph over a corpus: entities (nodes) and relations (edges), each edge keeping the chunks it came from.

GraphRAG's local search (Edge et al., "From Local to Global: A Graph RAG Approach to Query-Focused Summarization",
2024) starts from the entities a question names, walks to their neighbours, and answers from the text units that
support the edges it walked.  This module is the graph half of that: a :class:`GraphStore` protocol (structural,
as the backends' protocols: an implementation inherits nothing) and its in-process default,
:class:`InMemoryGraphStore` (pure Python, JSON-persistable: :meth:`InMemoryGraphStore.to_json` /
:meth:`InMemoryGraphStore.from_json`).  A ``networkx`` adapter with the same methods is
:class:`~langchain_ragspine.relations.networkx_store.NetworkXGraphStore` (extra ``graph``)::

    g = InMemoryGraphStore()
    g.add_edge("bm25", "co-occurs", "lucene", chunk_id="en/bm25#0")
    g.neighbours("lucene")            # ['bm25']
    g.provenance("bm25", "lucene")    # ('en/bm25#0',)

Shapes: a node is a string (an entity's normalised name); an edge is ``(source, relation, target)`` with the
sorted chunk ids it came from (:class:`Edge`).  Adjacency ignores direction (a question may name either end).  A
node also keeps the chunks that mention it (:meth:`GraphStore.node_chunks`).  Every listing is sorted, so two
graphs built from the same chunks give the same answers and the same JSON, byte for byte.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = ["GRAPH_FORMAT", "Edge", "GraphStore", "InMemoryGraphStore", "copy_graph"]

#: The ``format`` of :meth:`InMemoryGraphStore.to_json`'s object.
GRAPH_FORMAT = "ragspine-graph/1"


@dataclass(frozen=True, order=True)
class Edge:
    """One relation: ``source --relation--> target``, supported by ``chunks`` (sorted chunk ids)."""

    source: str
    relation: str
    target: str
    chunks: tuple[str, ...]


@runtime_checkable
class GraphStore(Protocol):
    """What a relation graph offers the package (:class:`InMemoryGraphStore`,
    :class:`~langchain_ragspine.relations.networkx_store.NetworkXGraphStore`).

    ``add_node`` / ``add_edge`` accumulate provenance (adding the same node or edge from another chunk adds that
    chunk); ``remove_chunks`` takes chunks out again (an edge or node left with no chunk goes).  Every read is
    sorted.
    """

    def add_node(self, name: str, *, chunk_id: str | None = None, kind: str = "term") -> None:
        """Add node ``name`` (``kind``: where it came from — ``metadata``, ``title``, ``term``, ``llm``), mentioned
        by ``chunk_id`` when given."""
        ...

    def add_edge(self, source: str, relation: str, target: str, *, chunk_id: str) -> None:
        """Add the edge ``(source, relation, target)`` as supported by ``chunk_id`` (its ends are added as nodes)."""
        ...

    def has_node(self, name: str) -> bool:
        """Whether ``name`` is a node."""
        ...

    def nodes(self) -> list[str]:
        """Every node, sorted."""
        ...

    def node_kind(self, name: str) -> str:
        """The kind ``name`` was added with (the first kind given)."""
        ...

    def node_chunks(self, name: str) -> tuple[str, ...]:
        """The chunks that mention ``name``, sorted (``()`` for an unknown node)."""
        ...

    def edges(self) -> list[Edge]:
        """Every edge, sorted."""
        ...

    def neighbours(self, name: str) -> list[str]:
        """The nodes joined to ``name`` by an edge in either direction, sorted (``[]`` for an unknown node)."""
        ...

    def provenance(self, a: str, b: str) -> tuple[str, ...]:
        """The chunks that support any edge between ``a`` and ``b`` (either direction, any relation), sorted."""
        ...

    def subgraph(self, nodes: Iterable[str]) -> GraphStore:
        """A new graph of ``nodes`` and the edges between them (their provenance kept)."""
        ...

    def remove_chunks(self, chunk_ids: Iterable[str]) -> None:
        """Forget ``chunk_ids`` everywhere: an edge or node no chunk supports any longer is removed."""
        ...


def _pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


class InMemoryGraphStore:
    """The default :class:`GraphStore`: dictionaries in this process, saved as one JSON object.

    Example:
        >>> g = InMemoryGraphStore()
        >>> g.add_edge("tokyo", "capital of", "japan", chunk_id="d#1")
        >>> g.add_edge("japan", "co-occurs", "tokyo", chunk_id="d#0")
        >>> g.neighbours("japan"), g.provenance("japan", "tokyo")
        (['tokyo'], ('d#0', 'd#1'))
        >>> InMemoryGraphStore.from_json(g.to_json()).edges() == g.edges()
        True
    """

    def __init__(self) -> None:
        self._kind: dict[str, str] = {}
        self._node_chunks: dict[str, set[str]] = {}
        self._edges: dict[tuple[str, str, str], set[str]] = {}
        self._adjacent: dict[str, set[str]] = {}
        self._pairs: dict[tuple[str, str], set[tuple[str, str, str]]] = {}  # unordered pair -> its edges

    def __len__(self) -> int:
        return len(self._kind)

    def add_node(self, name: str, *, chunk_id: str | None = None, kind: str = "term") -> None:
        """See :meth:`GraphStore.add_node`."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a graph node is a non-empty string, got {name!r}")
        self._kind.setdefault(name, kind)
        self._node_chunks.setdefault(name, set())
        self._adjacent.setdefault(name, set())
        if chunk_id is not None:
            self._node_chunks[name].add(chunk_id)

    def add_edge(self, source: str, relation: str, target: str, *, chunk_id: str) -> None:
        """See :meth:`GraphStore.add_edge`.

        Raises:
            ValueError: an empty name or relation, or ``source == target`` (no self-loops).
        """
        if source == target:
            raise ValueError(f"a graph edge joins two different nodes, got {source!r} twice")
        if not relation:
            raise ValueError("a graph edge needs a relation name")
        for end in (source, target):
            self.add_node(end, chunk_id=chunk_id)
        self._edges.setdefault((source, relation, target), set()).add(chunk_id)
        self._pairs.setdefault(_pair(source, target), set()).add((source, relation, target))
        self._adjacent[source].add(target)
        self._adjacent[target].add(source)

    def has_node(self, name: str) -> bool:
        """See :meth:`GraphStore.has_node`."""
        return name in self._kind

    def nodes(self) -> list[str]:
        """See :meth:`GraphStore.nodes`."""
        return sorted(self._kind)

    def node_kind(self, name: str) -> str:
        """See :meth:`GraphStore.node_kind`."""
        return self._kind[name]

    def node_chunks(self, name: str) -> tuple[str, ...]:
        """See :meth:`GraphStore.node_chunks`."""
        return tuple(sorted(self._node_chunks.get(name, ())))

    def edges(self) -> list[Edge]:
        """See :meth:`GraphStore.edges`."""
        return sorted(Edge(s, r, t, tuple(sorted(c))) for (s, r, t), c in self._edges.items())

    def neighbours(self, name: str) -> list[str]:
        """See :meth:`GraphStore.neighbours`."""
        return sorted(self._adjacent.get(name, ()))

    def provenance(self, a: str, b: str) -> tuple[str, ...]:
        """See :meth:`GraphStore.provenance`."""
        out: set[str] = set()
        for key in self._pairs.get(_pair(a, b), ()):
            out |= self._edges[key]
        return tuple(sorted(out))

    def subgraph(self, nodes: Iterable[str]) -> InMemoryGraphStore:
        """See :meth:`GraphStore.subgraph`."""
        keep = {n for n in nodes if n in self._kind}
        sub = InMemoryGraphStore()
        for n in sorted(keep):
            sub._kind[n] = self._kind[n]
            sub._node_chunks[n] = set(self._node_chunks[n])
            sub._adjacent[n] = set()
        for (s, r, t), chunks in self._edges.items():
            if s in keep and t in keep:
                sub._edges[(s, r, t)] = set(chunks)
                sub._pairs.setdefault(_pair(s, t), set()).add((s, r, t))
                sub._adjacent[s].add(t)
                sub._adjacent[t].add(s)
        return sub

    def remove_chunks(self, chunk_ids: Iterable[str]) -> None:
        """See :meth:`GraphStore.remove_chunks`."""
        gone = set(chunk_ids)
        if not gone:
            return
        for key in list(self._edges):
            self._edges[key] -= gone
            if not self._edges[key]:
                del self._edges[key]
        for name in list(self._node_chunks):
            self._node_chunks[name] -= gone
        self._adjacent = {n: set() for n in self._kind}
        self._pairs = {}
        for s, r, t in self._edges:
            self._adjacent[s].add(t)
            self._adjacent[t].add(s)
            self._pairs.setdefault(_pair(s, t), set()).add((s, r, t))
        for name in list(self._kind):
            if not self._node_chunks[name] and not self._adjacent[name]:
                del self._kind[name], self._node_chunks[name], self._adjacent[name]

    # -- JSON ------------------------------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The graph as a JSON-ready object ``{"format", "nodes": {name: {"kind", "chunks"}}, "edges": [[source,
        relation, target, [chunk ids]], ...]}``, every list sorted (the same graph gives the same object)."""
        return {
            "format": GRAPH_FORMAT,
            "nodes": {n: {"kind": self._kind[n], "chunks": sorted(self._node_chunks[n])} for n in sorted(self._kind)},
            "edges": [[e.source, e.relation, e.target, list(e.chunks)] for e in self.edges()],
        }

    def dumps(self) -> str:
        """:meth:`to_json` as compact JSON text (UTF-8 kept as written; keys sorted)."""
        return json.dumps(self.to_json(), ensure_ascii=False, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> InMemoryGraphStore:
        """The graph :meth:`to_json` wrote.

        Raises:
            ValueError: not such an object (another ``format``, a field missing or of the wrong type).
        """
        if not isinstance(data, Mapping) or data.get("format") != GRAPH_FORMAT:
            raise ValueError(f"not a relation graph of format {GRAPH_FORMAT!r}")
        g = cls()
        try:
            for name, node in dict(data["nodes"]).items():
                g.add_node(str(name), kind=str(node["kind"]))
                for c in node["chunks"]:
                    g._node_chunks[name].add(str(c))
            for s, r, t, chunks in data["edges"]:
                for c in chunks:
                    g.add_edge(str(s), str(r), str(t), chunk_id=str(c))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"a damaged relation graph ({type(e).__name__}: {e})") from e
        return g


def copy_graph(source: GraphStore, into: GraphStore) -> GraphStore:
    """Copy every node (kind, mentions) and edge (provenance) of ``source`` into ``into``; returns ``into``."""
    for n in source.nodes():
        kind = source.node_kind(n)
        chunks = source.node_chunks(n)
        into.add_node(n, kind=kind)
        for c in chunks:
            into.add_node(n, chunk_id=c, kind=kind)
    for e in source.edges():
        for c in e.chunks:
            into.add_edge(e.source, e.relation, e.target, chunk_id=c)
    return into
