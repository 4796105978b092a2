"""A :class:`~langchain_ragspine.relations.store.GraphStore` over a ``networkx.MultiDiGraph`` (extra ``graph``).

Use it where the graph should be a ``networkx`` graph — for its algorithms (PageRank, communities, shortest paths
for GraphRAG's global search) or to hand it to other tools::

    from langchain_ragspine.relations import NetworkXGraphStore, copy_graph
    nxg = copy_graph(saved_graph, NetworkXGraphStore()).graph     # a networkx.MultiDiGraph

Nodes carry ``kind`` and ``chunks`` (a set of chunk ids); each edge is keyed by its relation and carries
``chunks``.  It answers every read exactly as :class:`~langchain_ragspine.relations.store.InMemoryGraphStore`
(sorted listings; ``tests/unit_tests/relations`` holds both to the same assertions).

Raises:
    ImportError: on construction, when networkx is not installed (``pip install 'langchain-ragspine[graph]'``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from langchain_ragspine._optional import import_optional
from langchain_ragspine.relations.store import Edge

__all__ = ["NetworkXGraphStore"]

_HINT = "NetworkXGraphStore needs networkx: pip install 'langchain-ragspine[graph]'"


class NetworkXGraphStore:
    """A :class:`~langchain_ragspine.relations.store.GraphStore` backed by ``networkx.MultiDiGraph`` (``graph``).

    Args:
        graph: an existing ``MultiDiGraph`` whose nodes and edges follow the shape above (default: a new one).

    Raises:
        ImportError: networkx is not installed (names the ``graph`` extra).
    """

    def __init__(self, graph: Any = None) -> None:
        nx = import_optional("networkx", _HINT)
        self.graph = nx.MultiDiGraph() if graph is None else graph

    def add_node(self, name: str, *, chunk_id: str | None = None, kind: str = "term") -> None:
        """See :meth:`~langchain_ragspine.relations.store.GraphStore.add_node`."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"a graph node is a non-empty string, got {name!r}")
        if name not in self.graph:
            self.graph.add_node(name, kind=kind, chunks=set())
        if chunk_id is not None:
            self.graph.nodes[name]["chunks"].add(chunk_id)

    def add_edge(self, source: str, relation: str, target: str, *, chunk_id: str) -> None:
        """See :meth:`~langchain_ragspine.relations.store.GraphStore.add_edge`."""
        if source == target:
            raise ValueError(f"a graph edge joins two different nodes, got {source!r} twice")
        if not relation:
            raise ValueError("a graph edge needs a relation name")
        for end in (source, target):
            self.add_node(end, chunk_id=chunk_id)
        if not self.graph.has_edge(source, target, key=relation):
            self.graph.add_edge(source, target, key=relation, chunks=set())
        self.graph.edges[source, target, relation]["chunks"].add(chunk_id)

    def has_node(self, name: str) -> bool:
        """See :meth:`~langchain_ragspine.relations.store.GraphStore.has_node`."""
        return bool(self.graph.has_node(name))

    def nodes(self) -> list[str]:
        """See :meth:`~langchain_ragspine.relations.store.GraphStore.nodes`."""
        return sorted(self.graph.nodes)

    def node_kind(self, name: str) -> str:
        """See :meth:`~langchain_ragspine.relations.store.GraphStore.node_kind`."""
        return str(self.graph.nodes[name]["kind"])

    def node_chunks(self, name: str) -> tuple[str, ...]:
        """See :meth:`~langchain_ragspine.relations.store.GraphStore.node_chunks`."""
        if name not in self.graph:
            return ()
        return tuple(sorted(self.graph.nodes[name]["chunks"]))

    def edges(self) -> list[Edge]:
        """See :meth:`~langchain_ragspine.relations.store.GraphStore.edges`."""
        return sorted(Edge(s, r, t, tuple(sorted(d["chunks"]))) for s, t, r, d in self.graph.edges(keys=True, data=True))

    def neighbours(self, name: str) -> list[str]:
        """See :meth:`~langchain_ragspine.relations.store.GraphStore.neighbours`."""
        if name not in self.graph:
            return []
        return sorted(set(self.graph.successors(name)) | set(self.graph.predecessors(name)))

    def provenance(self, a: str, b: str) -> tuple[str, ...]:
        """See :meth:`~langchain_ragspine.relations.store.GraphStore.provenance`."""
        out: set[str] = set()
        for s, t in ((a, b), (b, a)):
            if self.graph.has_edge(s, t):
                for data in self.graph.get_edge_data(s, t).values():
                    out |= data["chunks"]
        return tuple(sorted(out))

    def subgraph(self, nodes: Iterable[str]) -> NetworkXGraphStore:
        """See :meth:`~langchain_ragspine.relations.store.GraphStore.subgraph` (a copy, not a view)."""
        sub = self.graph.subgraph([n for n in nodes if n in self.graph]).copy()
        for n in sub.nodes:
            sub.nodes[n]["chunks"] = set(sub.nodes[n]["chunks"])
        for _, _, d in sub.edges(data=True):
            d["chunks"] = set(d["chunks"])
        return NetworkXGraphStore(sub)

    def remove_chunks(self, chunk_ids: Iterable[str]) -> None:
        """See :meth:`~langchain_ragspine.relations.store.GraphStore.remove_chunks`."""
        gone = set(chunk_ids)
        if not gone:
            return
        for s, t, r, d in list(self.graph.edges(keys=True, data=True)):
            d["chunks"] -= gone
            if not d["chunks"]:
                self.graph.remove_edge(s, t, key=r)
        for n, d in list(self.graph.nodes(data=True)):
            d["chunks"] -= gone
            if not d["chunks"] and self.graph.degree(n) == 0:
                self.graph.remove_node(n)
