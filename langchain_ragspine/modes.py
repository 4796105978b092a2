"""Moved to :mod:`langchain_ragspine.pipeline.modes` (issue 26); this module re-exports its public
names for one release, and importing it warns (``DeprecationWarning``).  Import them from there.
"""

from langchain_ragspine._stacklevel import warn_moved as _warn_moved
from langchain_ragspine.pipeline.modes import (
    LEXICAL_MODES,
    RETRIEVAL_MODES,
    DocumentsSource,
    EmbeddingUse,
    ModeContext,
    RetrievalMode,
    RetrieverSource,
    StoreBackedSource,
    build_mode,
    get_mode,
    lexical_mode_names,
    mode_aliases,
    mode_choices,
    mode_factory,
    mode_names,
    needs_dense_index,
    needs_embedding_message,
    needs_sparse_message,
    register_mode,
    resolve_mode,
    resolve_mode_name,
    source_sparse,
    split_mode,
    transform_mode_message,
    unregister_mode,
)

_warn_moved(__name__, "langchain_ragspine.pipeline.modes")


def __getattr__(name: str) -> object:
    """``build_retriever`` (the old name of ``build_mode``), from :mod:`langchain_ragspine.pipeline.modes`, which warns."""
    from langchain_ragspine.pipeline import modes

    return getattr(modes, name)

__all__ = [
    "LEXICAL_MODES",
    "RETRIEVAL_MODES",
    "DocumentsSource",
    "EmbeddingUse",
    "ModeContext",
    "RetrievalMode",
    "RetrieverSource",
    "StoreBackedSource",
    "build_mode",
    "get_mode",
    "lexical_mode_names",
    "mode_aliases",
    "mode_choices",
    "mode_factory",
    "mode_names",
    "needs_dense_index",
    "needs_embedding_message",
    "needs_sparse_message",
    "register_mode",
    "resolve_mode",
    "resolve_mode_name",
    "source_sparse",
    "split_mode",
    "transform_mode_message",
    "unregister_mode",
]
