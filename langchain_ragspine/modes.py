"""Moved to :mod:`langchain_ragspine.pipeline.modes` (issue 26); this module re-exports its public
names for one release.  Import them from there.
"""

from langchain_ragspine.pipeline.modes import (
    LEXICAL_MODES,
    RETRIEVAL_MODES,
    DocumentsSource,
    EmbeddingUse,
    ModeContext,
    RetrievalMode,
    RetrieverSource,
    StoreBackedSource,
    build_retriever,
    get_mode,
    lexical_mode_names,
    mode_factory,
    mode_names,
    needs_dense_index,
    needs_embedding_message,
    register_mode,
    resolve_mode,
    resolve_mode_name,
    unregister_mode,
)

__all__ = [
    "LEXICAL_MODES",
    "RETRIEVAL_MODES",
    "DocumentsSource",
    "EmbeddingUse",
    "ModeContext",
    "RetrievalMode",
    "RetrieverSource",
    "StoreBackedSource",
    "build_retriever",
    "get_mode",
    "lexical_mode_names",
    "mode_factory",
    "mode_names",
    "needs_dense_index",
    "needs_embedding_message",
    "register_mode",
    "resolve_mode",
    "resolve_mode_name",
    "unregister_mode",
]
