"""The relation graph's stores: the in-process default and the networkx adapter answer alike."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from langchain_ragspine.relations import Edge, GraphStore, InMemoryGraphStore, NetworkXGraphStore, copy_graph

STORES = [InMemoryGraphStore, NetworkXGraphStore]


def _filled(cls: type) -> Any:
    g = cls()
    g.add_node("tokyo", chunk_id="a#0", kind="metadata")
    g.add_edge("tokyo", "capital of", "japan", chunk_id="a#0")
    g.add_edge("japan", "co-occurs", "tokyo", chunk_id="b#1")
    g.add_edge("japan", "co-occurs", "osaka", chunk_id="b#1")
    g.add_edge("osaka", "co-occurs", "kyoto", chunk_id="c#0")
    return g


@pytest.mark.parametrize("cls", STORES)
def test_reads_are_sorted_and_keep_provenance(cls: type) -> None:
    g = _filled(cls)
    assert isinstance(g, GraphStore)
    assert g.nodes() == ["japan", "kyoto", "osaka", "tokyo"]
    assert g.neighbours("japan") == ["osaka", "tokyo"]  # either direction
    assert g.neighbours("nowhere") == []
    assert g.provenance("japan", "tokyo") == ("a#0", "b#1")  # both relations, both directions
    assert g.provenance("tokyo", "kyoto") == ()
    assert g.node_chunks("tokyo") == ("a#0", "b#1") and g.node_kind("tokyo") == "metadata"
    assert g.edges()[0] == Edge("japan", "co-occurs", "osaka", ("b#1",))
    assert len(g.edges()) == 4


@pytest.mark.parametrize("cls", STORES)
def test_subgraph_keeps_only_edges_between_its_nodes(cls: type) -> None:
    sub = _filled(cls).subgraph(["japan", "tokyo", "absent"])
    assert sub.nodes() == ["japan", "tokyo"]
    assert [(e.source, e.target) for e in sub.edges()] == [("japan", "tokyo"), ("tokyo", "japan")]
    assert sub.neighbours("japan") == ["tokyo"]


@pytest.mark.parametrize("cls", STORES)
def test_remove_chunks_drops_edges_and_nodes_left_without_support(cls: type) -> None:
    g = _filled(cls)
    g.remove_chunks(["b#1"])
    assert g.provenance("japan", "tokyo") == ("a#0",)
    assert g.neighbours("japan") == ["tokyo"]
    assert g.neighbours("osaka") == ["kyoto"]
    g.remove_chunks(["c#0"])
    assert g.nodes() == ["japan", "tokyo"]  # osaka and kyoto: no chunk, no edge left


@pytest.mark.parametrize("cls", STORES)
def test_no_self_loops_or_empty_names(cls: type) -> None:
    g = cls()
    with pytest.raises(ValueError, match="two different nodes"):
        g.add_edge("a", "r", "a", chunk_id="x")
    with pytest.raises(ValueError, match="non-empty string"):
        g.add_node("")


def test_both_stores_give_the_same_graph() -> None:
    a, b = _filled(InMemoryGraphStore), _filled(NetworkXGraphStore)
    assert a.edges() == b.edges() and a.nodes() == b.nodes()
    assert copy_graph(b, InMemoryGraphStore()).dumps() == a.dumps()
    assert copy_graph(a, NetworkXGraphStore()).edges() == b.edges()


def test_json_round_trip_is_byte_identical() -> None:
    g = _filled(InMemoryGraphStore)
    text = g.dumps()
    again = InMemoryGraphStore.from_json(json.loads(text))
    assert again.dumps() == text and again.edges() == g.edges() and again.node_kind("tokyo") == "metadata"
    with pytest.raises(ValueError, match="format"):
        InMemoryGraphStore.from_json({"format": "other"})
    with pytest.raises(ValueError, match="damaged"):
        InMemoryGraphStore.from_json({"format": "ragspine-graph/1", "nodes": {}, "edges": [["a", "r"]]})


def test_networkx_missing_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "networkx", None)  # as if not installed: importing it raises ImportError
    with pytest.raises(ImportError, match=r"langchain-ragspine\[graph\]"):
        NetworkXGraphStore()
