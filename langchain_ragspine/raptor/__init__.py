"""RAPTOR (Sarthi et al., "RAPTOR: Recursive Abstractive Processing for Tree-Organized Retrieval", ICLR 2024): a
tree of summaries over the chunks, built by clustering their embeddings recursively.

:class:`RaptorBuilder` builds a :class:`RaptorTree` (seeded spherical k-means, :mod:`~langchain_ragspine.raptor.
clustering`; extractive summaries by default, :class:`LLMSummariser` opt-in, :mod:`~langchain_ragspine.raptor.
summarisers`).  The retriever over it is :class:`~langchain_ragspine.retrievers.raptor.RaptorRetriever`; a store
directory saves it as ``raptor.json`` (:mod:`langchain_ragspine.backends.directory.raptor_file`)."""

from langchain_ragspine.raptor.clustering import cluster_vectors, spherical_kmeans
from langchain_ragspine.raptor.summarisers import ExtractiveSummariser, LLMSummariser, Summariser
from langchain_ragspine.raptor.tree import RaptorBuilder, RaptorNode, RaptorTree, chunk_fingerprint

__all__ = [
    "ExtractiveSummariser",
    "LLMSummariser",
    "RaptorBuilder",
    "RaptorNode",
    "RaptorTree",
    "Summariser",
    "chunk_fingerprint",
    "cluster_vectors",
    "spherical_kmeans",
]
