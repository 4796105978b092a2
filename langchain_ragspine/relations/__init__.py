"""A relation graph over the corpus (GraphRAG-style local search, Edge et al. 2024): the :class:`GraphStore`
protocol, its in-process default :class:`InMemoryGraphStore`, the ``networkx`` adapter
(:class:`NetworkXGraphStore`, extra ``graph``) and the relation extractors (:class:`CooccurrenceExtractor`,
:class:`LLMRelationExtractor`, :func:`build_graph`).  The retriever over it is
:class:`~langchain_ragspine.retrievers.graph.GraphRetriever`; a store directory saves it as ``graph.json``
(:mod:`langchain_ragspine.backends.directory.graph_file`)."""

from langchain_ragspine.relations.extractors import (
    COOCCURS,
    CooccurrenceExtractor,
    Extraction,
    LLMRelationExtractor,
    RelationExtractor,
    build_graph,
    entity_terms,
    make_extractor,
)
from langchain_ragspine.relations.networkx_store import NetworkXGraphStore
from langchain_ragspine.relations.store import Edge, GraphStore, InMemoryGraphStore, copy_graph

__all__ = [
    "COOCCURS",
    "CooccurrenceExtractor",
    "Edge",
    "Extraction",
    "GraphStore",
    "InMemoryGraphStore",
    "LLMRelationExtractor",
    "NetworkXGraphStore",
    "RelationExtractor",
    "build_graph",
    "copy_graph",
    "entity_terms",
    "make_extractor",
]
