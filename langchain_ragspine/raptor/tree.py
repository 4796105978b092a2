"""The RAPTOR tree: chunks clustered recursively by embedding, a summary node per cluster, level by level.

::

    builder = RaptorBuilder(embedding="hashing")            # extractive summaries, offline (the default)
    tree = builder.build(chunks)                            # RaptorTree: leaves (chunks) + summary nodes
    [n.node_id for n in tree.summaries()]                   # "raptor-1-…", "raptor-2-…"
    RaptorRetriever(tree=tree, docs=chunks, embedding=builder.embeddings())   # langchain_ragspine.retrievers

The technique is RAPTOR (Sarthi et al., "RAPTOR: Recursive Abstractive Processing for Tree-Organized Retrieval",
ICLR 2024): leaf nodes are the chunks; the chunks' embeddings are clustered (:mod:`~langchain_ragspine.raptor.
clustering`), each cluster gets a summary node whose text summarises its children
(:mod:`~langchain_ragspine.raptor.summarisers`) and whose vector embeds that text; the summary nodes are clustered
again, and so on until one node is left, a level cannot be reduced any more, or ``max_levels`` levels are built.  A
cluster of one node is carried up unchanged (no summary of a single child).

A summary node is a *synthesis*: its metadata (:meth:`RaptorNode.metadata`) says ``is_synthesis: True`` and holds
the union of its members' provenance — ``member_chunk_ids`` (every chunk below it), ``doc_ids``, ``sources`` — so a
result drawn from it is cited by those chunks, never by the summary.

RESTRICTED chunks (:mod:`langchain_ragspine.sensitivity`) are not in the tree at all: :meth:`RaptorBuilder.build`
drops them before anything is embedded, clustered or summarised (and chunks without visible text too).

Incremental rebuilds: a node's id is a hash of its content — a leaf is its ``chunk_id`` and the chunk's
:func:`chunk_fingerprint`, a summary ``raptor-<level>-<sha256 of its children's ids>`` — so a rebuild handed the
previous tree (``build(chunks, reuse=tree)``) takes every leaf vector of an unchanged chunk and every summary (text
and vector) of a cluster whose children are unchanged from it, and asks the embedding model and the summariser only
about what is new.  The clustering itself is redone over all chunks at every build: it is global (one changed chunk
can move cluster boundaries anywhere), and redoing it keeps the tree a function of the corpus alone, the same
whichever order or how many ingests it came through.
"""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_ragspine.arguments import check_int
from langchain_ragspine.documents import chunk_key, has_visible_text, with_identities
from langchain_ragspine.embeddings.batching import embed_in_batches, l2_normalize
from langchain_ragspine.embeddings.cache import model_key_for
from langchain_ragspine.embeddings.factory import make_embeddings
from langchain_ragspine.raptor.clustering import cluster_vectors
from langchain_ragspine.raptor.summarisers import ExtractiveSummariser, LLMSummariser, Summariser
from langchain_ragspine.sensitivity import drop_restricted
from langchain_ragspine.specs import parse_embedding_spec
from langchain_ragspine.text import index_text

__all__ = ["RAPTOR_FORMAT", "RaptorBuilder", "RaptorNode", "RaptorTree", "chunk_fingerprint", "summary_node_id"]

#: The ``format`` of :meth:`RaptorTree.to_json`.
RAPTOR_FORMAT = "ragspine-raptor-tree/1"


def chunk_fingerprint(doc: Document) -> str:
    """SHA-256 (hex, 32 characters) of what a leaf is built from: the chunk's text, ``doc_id`` and ``source`` — an
    edited chunk, or one moved to another document, is another leaf.  (A store's contextual headers, which change
    the index text a leaf is embedded by, are recorded in the tree's config instead: switching them rebuilds.)"""
    md = doc.metadata
    body = json.dumps([doc.page_content, str(md.get("doc_id", "")), str(md.get("source", ""))], ensure_ascii=False)
    return hashlib.sha256(body.encode("utf-8")).hexdigest()[:32]


def summary_node_id(level: int, children: Iterable[str], fingerprints: Mapping[str, str]) -> str:
    """``raptor-<level>-<16 hex>``: the hash of the sorted children (a leaf child with its fingerprint)."""
    parts = [f"{c}\x00{fingerprints.get(c, '')}" for c in sorted(children)]
    digest = hashlib.sha256("\x01".join(parts).encode("utf-8")).hexdigest()[:16]
    return f"raptor-{level}-{digest}"


@dataclass(frozen=True)
class RaptorNode:
    """One node: a leaf (``level`` 0, ``node_id`` = the chunk's id, no text of its own: the chunk store holds it)
    or a summary (``level`` >= 1, its ``text``, its ``children``' ids).

    Attributes:
        node_id: the node's id.
        level: 0 for a leaf; a summary the round of clustering that made it (1, 2, …; a child carried up
            unchanged may sit more than one level below).
        vector: float32 ``(d,)``, unit L2 norm: the leaf chunk's index text, or the summary's text, embedded.
        text: the summary's text (``""`` for a leaf).
        children: the ids of the nodes it summarises (``()`` for a leaf).
        members: every chunk id below it, sorted (a leaf: its own).
        doc_ids / sources: the members' documents and sources, sorted and distinct.
    """

    node_id: str
    level: int
    vector: np.ndarray
    text: str = ""
    children: tuple[str, ...] = ()
    members: tuple[str, ...] = ()
    doc_ids: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()

    @property
    def is_summary(self) -> bool:
        """Whether this is a summary node (a synthesis)."""
        return self.level > 0

    def metadata(self) -> dict[str, Any]:
        """The node's provenance: ``{"raptor_node", "raptor_level", "is_synthesis", "member_chunk_ids",
        "doc_ids", "sources"}``."""
        return {"raptor_node": self.node_id, "raptor_level": self.level, "is_synthesis": self.is_summary,
                "member_chunk_ids": list(self.members), "doc_ids": list(self.doc_ids),
                "sources": list(self.sources)}

    def to_document(self) -> Document:
        """A summary node as a ``Document`` (its text, :meth:`metadata`), for inspection: it is a synthesis, never
        a citable passage."""
        return Document(page_content=self.text, metadata=self.metadata(), id=self.node_id)


@dataclass
class RaptorTree:
    """A built tree: its nodes by id, the fingerprints of its leaf chunks, and its builder's config.

    Attributes:
        nodes: ``{node_id: RaptorNode}``.
        chunks: ``{chunk_id: fingerprint}`` of the leaves (none RESTRICTED).
        config: the builder's :meth:`RaptorBuilder.config` (embedding spec and model key, summariser, clustering).
    """

    nodes: dict[str, RaptorNode] = field(default_factory=dict)
    chunks: dict[str, str] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def dim(self) -> int:
        """The vectors' dimension (0 for an empty tree)."""
        return next((int(n.vector.shape[0]) for n in self.nodes.values()), 0)

    def levels(self) -> int:
        """The highest level (0: leaves only, or an empty tree)."""
        return max((n.level for n in self.nodes.values()), default=0)

    def summaries(self) -> list[RaptorNode]:
        """The summary nodes, by ``(level, node_id)``."""
        return sorted((n for n in self.nodes.values() if n.is_summary), key=lambda n: (n.level, n.node_id))

    def parents(self) -> dict[str, str]:
        """``{child id: parent id}``."""
        return {c: n.node_id for n in self.nodes.values() for c in n.children}

    def roots(self) -> list[str]:
        """The ids of the nodes without a parent, sorted (where tree traversal starts)."""
        parents = self.parents()
        return sorted(i for i in self.nodes if i not in parents)

    def without(self, chunk_ids: Iterable[str]) -> RaptorTree:
        """A copy without the leaves of ``chunk_ids`` and without every summary above one of them (its text was
        written from theirs); a child left without a parent becomes a root.  What a withdrawn (retracted, changed,
        relabelled RESTRICTED) chunk leaves behind: nothing of it."""
        gone = set(chunk_ids) & set(self.chunks)
        if not gone:
            return RaptorTree(dict(self.nodes), dict(self.chunks), dict(self.config))
        kept = {i: n for i, n in self.nodes.items() if not (set(n.members) & gone)}
        kept = {i: _replace_children(n, [c for c in n.children if c in kept]) for i, n in kept.items()}
        return RaptorTree(kept, {c: fp for c, fp in self.chunks.items() if c not in gone}, dict(self.config))

    # -- JSON -----------------------------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """A JSON object: ``format``, ``config``, ``chunks``, ``dim`` and ``nodes`` (sorted by id; each vector as
        base64 of little-endian float32)."""
        nodes = []
        for i in sorted(self.nodes):
            n = self.nodes[i]
            row: dict[str, Any] = {"id": n.node_id, "level": n.level,
                                   "vector": base64.b64encode(np.asarray(n.vector, dtype="<f4").tobytes()).decode()}
            if n.is_summary:
                row.update(text=n.text, children=list(n.children), members=list(n.members),
                           doc_ids=list(n.doc_ids), sources=list(n.sources))
            else:
                row.update(doc_ids=list(n.doc_ids), sources=list(n.sources))
            nodes.append(row)
        return {"format": RAPTOR_FORMAT, "config": self.config, "chunks": dict(sorted(self.chunks.items())),
                "dim": self.dim, "nodes": nodes}

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> RaptorTree:
        """The tree :meth:`to_json` wrote.

        Raises:
            ValueError: another format, or a malformed node (a vector of another dimension, a child that is not a
                node, a leaf that is not a chunk of ``chunks``).
        """
        if body.get("format") != RAPTOR_FORMAT:
            raise ValueError(f"not a {RAPTOR_FORMAT} tree")
        dim = int(body["dim"])
        chunks = {str(k): str(v) for k, v in dict(body["chunks"]).items()}
        nodes: dict[str, RaptorNode] = {}
        for row in body["nodes"]:
            vector = np.frombuffer(base64.b64decode(row["vector"]), dtype="<f4").astype(np.float32)
            if vector.shape != (dim,):
                raise ValueError(f"node {row['id']!r}: a vector of {vector.shape[0]} dimensions, not {dim}")
            level = int(row["level"])
            node_id = str(row["id"])
            members = tuple(row.get("members") or [node_id])
            nodes[node_id] = RaptorNode(node_id, level, vector, str(row.get("text", "")),
                                        tuple(row.get("children") or ()), tuple(members),
                                        tuple(row.get("doc_ids") or ()), tuple(row.get("sources") or ()))
            if level == 0 and node_id not in chunks:
                raise ValueError(f"leaf {node_id!r} is not among the tree's chunks")
        for n in nodes.values():
            missing = [c for c in n.children if c not in nodes]
            if missing:
                raise ValueError(f"node {n.node_id!r}: child {missing[0]!r} is not a node of the tree")
        return cls(nodes, chunks, dict(body.get("config") or {}))


def _replace_children(node: RaptorNode, children: list[str]) -> RaptorNode:
    if tuple(children) == node.children:
        return node
    return RaptorNode(node.node_id, node.level, node.vector, node.text, tuple(children), node.members,
                      node.doc_ids, node.sources)


class RaptorBuilder:
    """Builds a :class:`RaptorTree` over chunks (module docstring).

    Args:
        embedding: the tree's embedding model: a :func:`~langchain_ragspine.embeddings.factory.make_embeddings` spec
            (``"hashing"``, ``"e5"``, ``"st:<model>"``; recorded in a saved tree, so search rebuilds the query
            encoder) or any LangChain ``Embeddings`` (in memory only: a store directory needs a spec).
        summariser: what writes summary texts (default :class:`~langchain_ragspine.raptor.summarisers.
            ExtractiveSummariser`: offline, verbatim sentences); :class:`~langchain_ragspine.raptor.summarisers.
            LLMSummariser` for RAPTOR's abstractive summaries.
        cluster_size: the children a summary has on average (default 8; a cluster holds at most twice as many).
        max_levels: summary levels at most (default 4).
        seed: the clustering's seed (default 0).
        batch_size: texts per ``embed_documents`` call (default 32).
        progress: progress bars while embedding (``None``: on a terminal only).
        context: what else the leaf vectors depend on, recorded and compared before reuse (ingest passes the
            store's contextual-header settings, which change the index text a leaf is embedded by); default none.

    Raises:
        ValueError: a bad spec, ``cluster_size < 2``, ``max_levels`` / ``batch_size`` < 1, or ``"none"`` as the
            embedding.
        TypeError: ``embedding`` is neither a spec nor an ``Embeddings``; ``summariser`` is not a
            :class:`~langchain_ragspine.raptor.summarisers.Summariser`.

    Example:
        >>> from langchain_core.documents import Document
        >>> from langchain_ragspine.embeddings import HashingEmbeddings
        >>> chunks = [Document(f"Kyoto temple number {i}. Old wooden halls.", metadata={"chunk_id": f"k#{i}",
        ...           "doc_id": "k"}) for i in range(5)] + [Document(f"Osaka castle gate {i}. Stone walls.",
        ...           metadata={"chunk_id": f"o#{i}", "doc_id": "o"}) for i in range(5)]
        >>> tree = RaptorBuilder(HashingEmbeddings(64), cluster_size=5).build(chunks)
        >>> [(n.level, len(n.members)) for n in tree.summaries()][-1]
        (2, 10)
        >>> tree.summaries()[-1].metadata()["is_synthesis"]
        True
    """

    def __init__(
        self,
        embedding: str | Embeddings = "auto",
        *,
        summariser: Summariser | None = None,
        cluster_size: int = 8,
        max_levels: int = 4,
        seed: int = 0,
        batch_size: int = 32,
        progress: bool | None = False,
        context: Mapping[str, Any] | None = None,
    ) -> None:
        if isinstance(embedding, str):
            scheme, arg = parse_embedding_spec(embedding)
            if scheme == "none":
                raise ValueError("a RAPTOR tree needs an embedding model: pass a spec such as 'hashing' or 'e5', "
                                 "not 'none'")
            self.spec: str | None = f"{scheme}:{arg}" if arg else scheme
            self._embedding: Embeddings | None = None
        elif isinstance(embedding, Embeddings):
            self.spec, self._embedding = None, embedding
        else:
            raise TypeError(f"embedding must be an embedding spec or an Embeddings, got {type(embedding).__name__}")
        if summariser is not None and not isinstance(summariser, Summariser):
            raise TypeError(f"summariser must be a Summariser (ExtractiveSummariser, LLMSummariser), got "
                            f"{type(summariser).__name__}")
        check_int(cluster_size, "cluster_size", minimum=2)
        check_int(max_levels, "max_levels")
        check_int(seed, "seed", minimum=0)
        check_int(batch_size, "batch_size")
        self.summariser: Summariser = summariser if summariser is not None else ExtractiveSummariser()
        self.cluster_size, self.max_levels, self.seed = cluster_size, max_levels, seed
        self.batch_size, self.progress = batch_size, progress
        self.context = dict(context) if context is not None else None
        #: The summariser config a saved tree recorded, kept by :meth:`from_config` when its summariser cannot be
        #: rebuilt (an LLM's model is not recorded): reuse then keeps the model's summaries of unchanged clusters.
        self.recorded_summariser: dict[str, Any] | None = None
        #: Texts sent to the embedding model and summaries written by the last :meth:`build` (the rest reused).
        self.last_embedded = 0
        self.last_summarised = 0

    def embeddings(self) -> Embeddings:
        """The embedding model (built from the spec on first use).

        Raises:
            ValueError: the spec names no model here (``auto`` without the ``embed`` extra).
        """
        if self._embedding is None:
            model = make_embeddings(self.spec)
            if model is None:
                raise ValueError(f"the RAPTOR embedding spec {self.spec!r} gives no model here (install the embed "
                                 "extra for e5, or pass raptor='hashing')")
            self._embedding = model
        return self._embedding

    def config(self) -> dict[str, Any]:
        """What a saved tree records: the embedding spec (``None`` for an object) and model key, the summariser's
        config, the clustering parameters."""
        return {"embedding": self.spec, "model_key": model_key_for(self.embeddings()),
                "summariser": self.recorded_summariser or self.summariser.config(), "cluster_size": self.cluster_size,
                "max_levels": self.max_levels, "seed": self.seed, "context": self.context}

    @staticmethod
    def from_config(
        config: Mapping[str, Any], *, summariser: Summariser | None = None, context: Mapping[str, Any] | None = None
    ) -> RaptorBuilder:
        """The builder a saved tree's ``config`` records (the embedding from its spec; an LLM summariser's model is
        not recorded: pass ``summariser``, else summaries of new clusters are extractive).

        Raises:
            ValueError: the config has no embedding spec, or a bad value.
        """
        spec = config.get("embedding")
        if not isinstance(spec, str):
            raise ValueError("the saved RAPTOR tree records no embedding spec")
        recorded = dict(config.get("summariser") or {})
        keep = summariser is None and recorded.get("name") not in (None, "extractive")
        if summariser is None:
            summariser = ExtractiveSummariser(int(recorded.get("max_chars", 400))
                                              if recorded.get("name") == "extractive" else 400)
        builder = RaptorBuilder(spec, summariser=summariser, cluster_size=int(config.get("cluster_size", 8)),
                                max_levels=int(config.get("max_levels", 4)), seed=int(config.get("seed", 0)),
                                context=context)
        if keep:
            builder.recorded_summariser = recorded
        return builder

    def reusable(self, tree: RaptorTree | None) -> bool:
        """Whether ``tree``'s nodes can be reused by this builder: the same embedding model key and clustering; an
        extractive summariser also the same ``max_chars`` (an LLM's summaries are reused by any LLM summariser)."""
        if tree is None:
            return False
        mine, theirs = self.config(), tree.config
        same = all(mine.get(k) == theirs.get(k) for k in ("model_key", "cluster_size", "max_levels", "seed", "context"))
        return same and mine["summariser"].get("name") == dict(theirs.get("summariser") or {}).get("name") and (
            mine["summariser"] == theirs.get("summariser") or isinstance(self.summariser, LLMSummariser))

    def build(self, chunks: Sequence[Document], *, reuse: RaptorTree | None = None) -> RaptorTree:
        """The tree over ``chunks`` (RESTRICTED ones and chunks without visible text dropped first; chunks are
        identified by ``chunk_id``, else ``Document.id``, else their text, and sorted by it).

        Args:
            chunks: the chunks.
            reuse: a previous tree: its leaf vectors of unchanged chunks and its summaries of unchanged clusters
                are taken instead of embedding or summarising again (only when :meth:`reusable`).

        Raises:
            ValueError: the embedding model returned vectors of the wrong shape.
        """
        old = reuse if self.reusable(reuse) else None
        self.last_embedded = self.last_summarised = 0
        docs: dict[str, Document] = {}
        for d in with_identities(drop_restricted(list(chunks))):
            key = chunk_key(d)
            if key is not None and has_visible_text(d) and key not in docs:
                docs[key] = d
        ids = sorted(docs)
        prints = {i: chunk_fingerprint(docs[i]) for i in ids}
        tree = RaptorTree(chunks=prints, config=self.config())
        if not ids:
            return tree
        fresh = [i for i in ids if old is None or old.chunks.get(i) != prints[i] or i not in old.nodes]
        vectors = dict.fromkeys(ids, np.zeros(0, dtype=np.float32))
        for i in ids:
            if i not in fresh and old is not None:
                vectors[i] = old.nodes[i].vector
        if fresh:
            embedded = self._embed([index_text(docs[i]) for i in fresh])
            vectors.update(zip(fresh, embedded, strict=True))
        for i in ids:
            md = docs[i].metadata
            tree.nodes[i] = RaptorNode(i, 0, vectors[i], members=(i,), doc_ids=_one(md.get("doc_id")),
                                       sources=_one(md.get("source")))
        texts = {i: docs[i].page_content for i in ids}
        current = ids
        for level in range(1, self.max_levels + 1):
            if len(current) <= 1:
                break
            matrix = np.stack([tree.nodes[i].vector for i in current])
            groups = ([list(range(len(current)))] if len(current) <= self.cluster_size
                      else cluster_vectors(matrix, cluster_size=self.cluster_size, seed=self.seed + level,
                                           keys=current))
            if all(len(g) == 1 for g in groups):
                break
            made: list[tuple[str, list[str]]] = []
            nxt: list[str] = []
            for g in groups:
                children = [current[j] for j in g]
                if len(children) == 1:
                    nxt.append(children[0])  # carried up unchanged
                    continue
                node_id = summary_node_id(level, children, prints)
                made.append((node_id, children))
                nxt.append(node_id)
            self._summarise(tree, made, level, texts, old)
            current = sorted(nxt)
        return tree

    def _embed(self, texts: list[str]) -> list[np.ndarray]:
        arr = embed_in_batches(self.embeddings(), texts, batch_size=self.batch_size, progress=self.progress)
        if arr.shape[0] != len(texts):
            raise ValueError(f"the embedding model returned {arr.shape[0]} vectors for {len(texts)} texts")
        self.last_embedded += len(texts)
        return list(l2_normalize(arr))

    def _summarise(self, tree: RaptorTree, made: list[tuple[str, list[str]]], level: int, texts: dict[str, str],
                   old: RaptorTree | None) -> None:
        """Summary nodes for ``made`` (``(id, children)``): reused from ``old`` by id, else summarised and embedded
        (one embedding batch for the level)."""
        todo: list[tuple[str, list[str], str]] = []
        for node_id, children in made:
            members = tuple(sorted({m for c in children for m in tree.nodes[c].members}))
            doc_ids = tuple(sorted({d for c in children for d in tree.nodes[c].doc_ids}))
            sources = tuple(sorted({s for c in children for s in tree.nodes[c].sources}))
            prev = None if old is None else old.nodes.get(node_id)
            if prev is not None and prev.members == members:
                tree.nodes[node_id] = RaptorNode(node_id, level, prev.vector, prev.text, tuple(children), members,
                                                 doc_ids, sources)
                texts[node_id] = prev.text
                continue
            text = self.summariser.summarise([texts[c] for c in children]).strip()
            self.last_summarised += 1
            if not text:  # nothing to say (children without sentences): the first child's text
                text = texts[children[0]]
            texts[node_id] = text
            todo.append((node_id, children, text))
            tree.nodes[node_id] = RaptorNode(node_id, level, np.zeros(0, dtype=np.float32), text, tuple(children),
                                             members, doc_ids, sources)
        if todo:
            vectors = self._embed([t for _, _, t in todo])
            for (node_id, _, _), v in zip(todo, vectors, strict=True):
                n = tree.nodes[node_id]
                tree.nodes[node_id] = RaptorNode(node_id, level, v, n.text, n.children, n.members, n.doc_ids,
                                                 n.sources)


def _one(value: object) -> tuple[str, ...]:
    return () if value is None or value == "" else (str(value),)

