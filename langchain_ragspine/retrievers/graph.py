"""GraphRAG-style local search over a relation graph: the entities a question names, their neighbourhood, and the
chunks that support the edges walked (Edge et al., "From Local to Global: A Graph RAG Approach to Query-Focused
Summarization", 2024, section 3 "local search": entities → relationships → text units).

::

    graph = build_graph(chunks, CooccurrenceExtractor())             # langchain_ragspine.relations
    retriever = GraphRetriever(graph=graph, docs=chunks, k=5, hops=1)
    retriever.invoke("Which tokenizer does BM25 use for Japanese?")   # the chunks themselves, verbatim

Ranking (deterministic, no model):

1. seeds: the graph's nodes the question names (``extractor.query_entities``: its CJK-aware terms that are nodes,
   and metadata entities named whole), each weighted ``w(s) = ln(1 + N / df(s))`` (``N`` chunks indexed, ``df`` the
   chunks that mention ``s``);
2. the neighbourhood: up to ``hops`` steps (default 1) from the seeds, each step through at most
   ``max_neighbours`` neighbours of a node (those joined by the most supporting chunks, ties by name); a node
   reached at step ``h`` weighs ``decay · min(weight of the node it came from, w(node))`` (the most over its paths);
3. a chunk's score is the sum of the weights of the distinct reached entities it supports — a seed it mentions, or
   an end of a walked edge whose provenance holds it — so a chunk joining two of the question's entities (or one
   and a bridge entity) ranks above a chunk naming one; ties break on ``chunk_id``.

Results are copies of the indexed chunks (``page_content`` verbatim, citable) with ``metadata["scores"] =
{"bm25": None, "vector": None, "fused": score, "rerank": None}`` — the ``fused`` score is what
:class:`~langchain_ragspine.retrievers.HybridRetriever` fuses, so the graph is a channel like BM25 or dense.  A
call's ``filter`` is ANDed with the retriever's own; RESTRICTED chunks are never indexed (an edge whose provenance
names only such chunks supports nothing) and every result passes the gate on its way out.
"""

from __future__ import annotations

import math
from typing import Any, cast

from langchain_core.documents import Document
from pydantic import Field, PrivateAttr

from langchain_ragspine.arguments import DEFAULT_K, PositiveIntField
from langchain_ragspine.documents import chunk_positions, with_identities, with_scores
from langchain_ragspine.filters import FilterField, compile_filter
from langchain_ragspine.relations.extractors import CooccurrenceExtractor, RelationExtractor
from langchain_ragspine.relations.store import GraphStore
from langchain_ragspine.retrievers.base import RagSpineRetriever, SyncCall
from langchain_ragspine.sensitivity import drop_restricted, is_restricted

__all__ = ["GraphRetriever"]


class GraphRetriever(RagSpineRetriever):
    """Local search over ``graph``, returning ``k`` of ``docs`` (see the module docstring).

    Args:
        graph: a :class:`~langchain_ragspine.relations.store.GraphStore` built from (a superset of) ``docs``.
        docs: the chunks the graph's provenance names (RESTRICTED ones are dropped: never returned).
        k: results per call (default 6).
        filter: a metadata filter (:mod:`langchain_ragspine.filters`), ANDed with every call's.
        hops: neighbourhood depth, 0 (the seeds' own chunks) to 3 (default 1).
        max_neighbours: neighbours followed per node and step (default 16).
        decay: weight kept per hop, in (0, 1] (default 0.5).
        extractor: what finds the question's entities (default
            :class:`~langchain_ragspine.relations.extractors.CooccurrenceExtractor`; pass the graph's own).

    Raises:
        TypeError: an unknown argument (with a did-you-mean); ``graph`` is not a GraphStore.
        ValueError: ``hops`` outside 0..3, ``decay`` outside (0, 1], ``k`` / ``max_neighbours`` < 1.
    """

    graph: Any
    docs: list[Document] = Field(default_factory=list)
    k: int = PositiveIntField(DEFAULT_K)
    filter: FilterField = None
    hops: int = 1
    max_neighbours: int = PositiveIntField(16)
    decay: float = 0.5
    extractor: Any = None

    index_fields = ("docs", "graph")

    _by_id: dict[str, int] = PrivateAttr(default_factory=dict)

    def _check_fields(self) -> None:
        if not isinstance(self.graph, GraphStore):
            raise TypeError(f"graph must be a GraphStore, got {type(self.graph).__name__}")
        if isinstance(self.hops, bool) or not isinstance(self.hops, int) or not 0 <= self.hops <= 3:
            raise ValueError(f"hops must be an int in 0..3, got {self.hops!r}")
        if isinstance(self.decay, bool) or not 0 < float(self.decay) <= 1:
            raise ValueError(f"decay must be in (0, 1], got {self.decay!r}")
        if self.extractor is not None and not isinstance(self.extractor, RelationExtractor):
            raise TypeError(f"extractor must be a RelationExtractor, got {type(self.extractor).__name__}")

    def model_post_init(self, context: Any, /) -> None:
        """Check the fields and index ``docs`` by chunk id (RESTRICTED ones dropped)."""
        self._check_fields()
        compile_filter(self.filter)
        docs = self._set_indexed_docs(drop_restricted(with_identities(self.docs)))
        self._by_id = chunk_positions(docs)
        self._mark_built()

    def _query_extractor(self) -> RelationExtractor:
        return cast(RelationExtractor, self.extractor) if self.extractor is not None else CooccurrenceExtractor()

    def seeds(self, query: str) -> list[str]:
        """The graph's nodes ``query`` names (sorted)."""
        return self._query_extractor().query_entities(query, self.graph)

    def scores(self, query: str) -> dict[str, float]:
        """``{chunk_id: score}`` of every indexed chunk the local search reaches (see the module docstring)."""
        graph: GraphStore = self.graph
        n = max(len(self._by_id), 1)

        def idf(node: str) -> float:
            df = sum(1 for c in graph.node_chunks(node) if c in self._by_id)
            return math.log(1 + n / df) if df else 0.0

        reached: dict[str, float] = {}
        for s in self.seeds(query):
            w = idf(s)
            if w > 0:
                reached[s] = w
        support: dict[str, set[str]] = {}  # chunk -> reached entities it supports
        for s in reached:
            for c in graph.node_chunks(s):
                if c in self._by_id:
                    support.setdefault(c, set()).add(s)
        frontier = sorted(reached)
        for _ in range(self.hops):
            nxt: dict[str, float] = {}
            for u in frontier:
                scored = []
                for v in graph.neighbours(u):
                    prov = [c for c in graph.provenance(u, v) if c in self._by_id]
                    if prov:
                        scored.append((-len(prov), v, prov))
                for _, v, prov in sorted(scored)[: self.max_neighbours]:
                    w = self.decay * min(reached[u], idf(v))
                    if w > max(reached.get(v, 0.0), nxt.get(v, 0.0)):
                        nxt[v] = w
                    for c in prov:
                        support.setdefault(c, set()).update((u, v))
            for v, w in nxt.items():
                if w > reached.get(v, 0.0):
                    reached[v] = w
            frontier = sorted(nxt)
        return {c: math.fsum(reached.get(e, 0.0) for e in sorted(ents)) for c, ents in support.items()}

    def _retrieve(self, query: str, call: SyncCall) -> list[Document]:
        docs = self._indexed_docs()
        predicate = None if call.filter is None else call.filter.predicate
        ranked = sorted(((-s, c) for c, s in self.scores(query).items() if s > 0), key=lambda t: t)
        out: list[Document] = []
        for neg, cid in ranked:
            doc = docs[self._by_id[cid]]
            if is_restricted(doc.metadata) or (predicate is not None and not predicate(doc.metadata)):
                continue
            out.append(with_scores(doc, bm25=None, vector=None, fused=-neg, rerank=None))
            if len(out) >= cast(int, call.k):
                break
        return out
