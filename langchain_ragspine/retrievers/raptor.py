"""RAPTOR retrieval over a tree of summaries (Sarthi et al., "RAPTOR: Recursive Abstractive Processing for
Tree-Organized Retrieval", ICLR 2024, section 3 "Querying"): collapsed tree (default) or tree traversal.

::

    builder = RaptorBuilder(embedding="hashing")                  # langchain_ragspine.raptor
    tree = builder.build(chunks)
    retriever = RaptorRetriever(tree=tree, docs=chunks, embedding=builder.embeddings(), k=5)
    retriever.invoke("When does the rainy season start?")          # chunks, verbatim and citable

Every node (leaf chunks and summaries) is scored by the cosine of its vector with the query's.

* ``strategy="collapsed"`` (RAPTOR's better-measured choice): all levels form one index; nodes are taken best
  first — a leaf gives its chunk, a summary node gives its member chunks (best first by their own cosine) — until
  ``k`` chunks are taken.
* ``strategy="traversal"``: from the roots down, the ``beam`` best summary nodes of each layer, then the best
  among their children, and so on to the leaves; every leaf reached on the way is a candidate, best first.

**Citations: results are always chunks, never summaries.**  A summary node is a synthesis (``is_synthesis``): it
ranks chunks, it is never returned as a passage, so ``page_content`` of every result is the chunk's own text (a
verbatim slice of its source) and the answer chain cites chunks as it does for any retriever.  A chunk that came in
through a summary says so: ``metadata["raptor"] = {"node": id, "level": n, "is_synthesis": True}`` (a leaf hit:
level 0, ``False``), and ``metadata["raptor_summary"]`` holds the summary's text — as context, not a citable
fact — only when every member of that summary may be returned to this call (none RESTRICTED, each passing the
call's filter), so a summary never shows text of a chunk the filter scoped out.  ``metadata["scores"]["fused"]`` is
the cosine of the node the chunk came through (what :class:`~langchain_ragspine.retrievers.hybrid.HybridRetriever`
fuses), non-increasing down the list.

RESTRICTED chunks are not in the tree (the builder drops them); a chunk of ``docs`` relabelled RESTRICTED later is
dropped here too, and a leaf whose chunk is not in ``docs`` is never returned.  A call's ``filter`` is ANDed with
the retriever's own.
"""

from __future__ import annotations

from typing import Any, Literal, cast

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from pydantic import Field, PrivateAttr

from langchain_ragspine.arguments import DEFAULT_K, PositiveIntField
from langchain_ragspine.documents import chunk_positions, with_identities, with_scores
from langchain_ragspine.filters import FilterField, compile_filter
from langchain_ragspine.raptor.tree import RaptorTree
from langchain_ragspine.retrievers.base import AsyncCall, RagSpineRetriever, SyncCall
from langchain_ragspine.sensitivity import drop_restricted, is_restricted

__all__ = ["RAPTOR_STRATEGIES", "RaptorRetriever"]

#: The ``strategy`` values of :class:`RaptorRetriever`.
RAPTOR_STRATEGIES = ("collapsed", "traversal")


class RaptorRetriever(RagSpineRetriever):
    """Retrieval over a :class:`~langchain_ragspine.raptor.tree.RaptorTree` (see the module docstring).

    Args:
        tree: the tree, built over (a superset of) ``docs``.
        docs: the chunks the tree's leaves name (RESTRICTED ones dropped: never returned).
        embedding: the tree's embedding model (``embed_query`` for the question): the one it was built with.
        k: results per call (default 6).
        filter: a metadata filter (:mod:`langchain_ragspine.filters`), ANDed with every call's.
        strategy: ``"collapsed"`` (default) or ``"traversal"``.
        beam: nodes kept per layer in tree traversal (default 4).

    Raises:
        TypeError: an unknown argument (with a did-you-mean); ``tree`` is not a RaptorTree; ``embedding`` is not an
            ``Embeddings``.
        ValueError: an unknown ``strategy``; ``k`` / ``beam`` < 1; the query vector's dimension is not the tree's.

    Example:
        >>> from langchain_core.documents import Document
        >>> from langchain_ragspine.embeddings import HashingEmbeddings
        >>> from langchain_ragspine.raptor import RaptorBuilder
        >>> chunks = [Document("Kyoto temples are old.", metadata={"chunk_id": "k#0", "doc_id": "k"}),
        ...           Document("Osaka castle has stone walls.", metadata={"chunk_id": "o#0", "doc_id": "o"})]
        >>> emb = HashingEmbeddings(64)
        >>> r = RaptorRetriever(tree=RaptorBuilder(emb).build(chunks), docs=chunks, embedding=emb, k=1)
        >>> [d.metadata["chunk_id"] for d in r.invoke("castle walls")]
        ['o#0']
    """

    tree: Any
    docs: list[Document] = Field(default_factory=list, repr=False)
    embedding: Any
    k: int = PositiveIntField(DEFAULT_K)
    filter: FilterField = None
    strategy: Literal["collapsed", "traversal"] = "collapsed"
    beam: int = PositiveIntField(4)

    index_fields = ("docs", "tree", "embedding")

    _by_id: dict[str, int] = PrivateAttr(default_factory=dict)
    _node_ids: list[str] = PrivateAttr(default_factory=list)
    _matrix: np.ndarray = PrivateAttr(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    _row: dict[str, int] = PrivateAttr(default_factory=dict)
    _members: dict[str, list[str]] = PrivateAttr(default_factory=dict)

    def model_post_init(self, context: Any, /) -> None:
        """Check the fields, index ``docs`` by chunk id (RESTRICTED ones dropped) and stack the vectors of the
        nodes that have a member among them."""
        if not isinstance(self.tree, RaptorTree):
            raise TypeError(f"tree must be a RaptorTree, got {type(self.tree).__name__}")
        if not isinstance(self.embedding, Embeddings):
            raise TypeError(f"embedding must be an Embeddings (the tree's model), got {type(self.embedding).__name__}")
        if self.strategy not in RAPTOR_STRATEGIES:
            raise ValueError(f"strategy must be one of {RAPTOR_STRATEGIES}, got {self.strategy!r}")
        compile_filter(self.filter)
        docs = self._set_indexed_docs(drop_restricted(with_identities(self.docs)))
        self._by_id = chunk_positions(docs)
        tree: RaptorTree = self.tree
        self._members = {}
        for node_id in sorted(tree.nodes):
            node = tree.nodes[node_id]
            served = [m for m in node.members if m in self._by_id]
            if served and (node.is_summary or node_id in tree.chunks):
                self._members[node_id] = served
        self._node_ids = sorted(self._members)
        self._row = {n: i for i, n in enumerate(self._node_ids)}
        self._matrix = (np.stack([tree.nodes[n].vector for n in self._node_ids]).astype(np.float32)
                        if self._node_ids else np.zeros((0, tree.dim), dtype=np.float32))
        self._mark_built()

    def _scores(self, vector: list[float]) -> np.ndarray:
        q = np.asarray(vector, dtype=np.float32)
        if self._matrix.shape[0] and q.shape != (self._matrix.shape[1],):
            raise ValueError(f"the query vector has {q.shape} dimensions, the tree's vectors {self._matrix.shape[1]}: "
                             "embed with the model the tree was built with")
        norm = float(np.linalg.norm(q))
        if norm > 0:
            q = q / norm
        return self._matrix @ q if self._matrix.shape[0] else np.zeros(0, dtype=np.float32)

    def node_scores(self, query: str) -> dict[str, float]:
        """``{node_id: cosine}`` of every node with a member among ``docs`` (leaves and summaries)."""
        scores = self._scores(self.embedding.embed_query(query))
        return {n: float(scores[i]) for i, n in enumerate(self._node_ids)}

    def _results(self, scores: np.ndarray, call: SyncCall | AsyncCall) -> list[Document]:
        docs = self._indexed_docs()
        predicate = None if call.filter is None else call.filter.predicate
        tree: RaptorTree = self.tree

        def allowed(cid: str) -> bool:
            md = docs[self._by_id[cid]].metadata
            return not is_restricted(md) and (predicate is None or bool(predicate(md)))

        own = {n: float(scores[i]) for i, n in enumerate(self._node_ids)}
        k = cast(int, call.k)
        order = (self._collapsed(own) if self.strategy == "collapsed" else self._traversal(own, allowed))
        out: list[Document] = []
        taken: set[str] = set()
        for node_id in order:
            node = tree.nodes[node_id]
            members = [m for m in self._members[node_id] if m not in taken and allowed(m)]
            if not members:
                continue
            members.sort(key=lambda m: (-own.get(m, -2.0), m))
            info: dict[str, Any] = {"node": node_id, "level": node.level, "is_synthesis": node.is_summary}
            summary = (node.text if node.is_summary and all(m in self._by_id and allowed(m) for m in node.members)
                       else None)
            for m in members:
                doc = with_scores(docs[self._by_id[m]], bm25=None, vector=None, fused=own[node_id], rerank=None)
                doc.metadata["raptor"] = dict(info)
                if summary is not None:
                    doc.metadata["raptor_summary"] = summary
                out.append(doc)
                taken.add(m)
                if len(out) >= k:
                    return out
        return out

    def _collapsed(self, own: dict[str, float]) -> list[str]:
        return sorted(own, key=lambda n: (-own[n], n))

    def _traversal(self, own: dict[str, float], allowed: Any) -> list[str]:
        """The leaves reached from the roots, ``beam`` best nodes per layer, best first."""
        tree: RaptorTree = self.tree
        frontier = [n for n in tree.roots() if n in own]
        leaves: list[str] = []
        while frontier:
            useful = [n for n in frontier if any(allowed(m) for m in self._members[n])]
            leaves.extend(n for n in useful if not tree.nodes[n].is_summary)  # every leaf reached is a candidate
            summaries = [n for n in useful if tree.nodes[n].is_summary]
            chosen = sorted(summaries, key=lambda n: (-own[n], n))[: self.beam]
            frontier = sorted({c for n in chosen for c in tree.nodes[n].children if c in own})
        return sorted(set(leaves), key=lambda n: (-own[n], n))

    def _retrieve(self, query: str, call: SyncCall) -> list[Document]:
        if not self._node_ids or not query.strip():
            return []
        return self._results(self._scores(self.embedding.embed_query(query)), call)

    async def _aretrieve(self, query: str, call: AsyncCall) -> list[Document]:
        if not self._node_ids or not query.strip():
            return []
        return self._results(self._scores(await self.embedding.aembed_query(query)), call)
