"""langchain-ragspine: retrieval for Japanese, Chinese and English documents as LangChain parts.

Loaders (``CorpusLoader``) → splitters (``ParagraphTextSplitter``, ``LayoutTextSplitter``, parent-child, sentence
window, semantic) → versioned chunk store (``ChunkStore``) → retrievers (``BM25Retriever``, ``DenseRetriever``,
``HybridRetriever``, ``ParentChildRetriever``; query transformations such as ``HyDERetriever``,
``MultiQueryRetriever``, ``GlossaryRetriever``; ``MultiIndexRetriever``) → compressors (``RestrictedGate``,
rerankers, MMR, lost-in-the-middle, extractive compression).  See ``docs/architecture.md``.

The names are imported when first used (PEP 562), so ``import langchain_ragspine`` — and the ``ragspine`` command's
``--help`` / ``--version`` — load nothing beyond the version; ``from langchain_ragspine import BM25Retriever`` loads
what that class needs.
"""

import importlib as _importlib
from typing import TYPE_CHECKING, Any

from langchain_ragspine._version import __version__ as __version__

if TYPE_CHECKING:
    from langchain_ragspine.backends.directory.chunk_store import ChunkStore
    from langchain_ragspine.chains import make_answer_chain
    from langchain_ragspine.chat_models import make_chat_model
    from langchain_ragspine.document_compressors import (
        ContextualHeader,
        CrossEncoderReranker,
        ExtractiveCompressor,
        LLMListwiseReranker,
        LostInTheMiddleReorder,
        MMRCompressor,
        RestrictedGate,
        is_restricted,
    )
    from langchain_ragspine.document_loaders import CorpusLoader
    from langchain_ragspine.embeddings.factory import make_embeddings
    from langchain_ragspine.errors import RagSpineError
    from langchain_ragspine.pipeline.ingest import ingest
    from langchain_ragspine.pipeline.modes import register_mode
    from langchain_ragspine.pipeline.sources import open_retriever, search
    from langchain_ragspine.retrievers import (
        BM25Retriever,
        DecompositionRetriever,
        DenseRetriever,
        FilterExtractionRetriever,
        GlossaryRetriever,
        HybridRetriever,
        HyDERetriever,
        MultiIndexRetriever,
        MultiQueryRetriever,
        ParentChildRetriever,
        QueryDenyList,
        RAGFusionRetriever,
        StepBackRetriever,
    )
    from langchain_ragspine.retrievers.transforms import make_query_transform
    from langchain_ragspine.settings import RagSpineSettings, get_settings
    from langchain_ragspine.text_splitters import (
        LayoutTextSplitter,
        ParagraphTextSplitter,
        ParentChildTextSplitter,
        SemanticTextSplitter,
        SentenceWindowTextSplitter,
    )
    from langchain_ragspine.vectorstores import RagSpineVectorStore

#: Where each public name lives: ``langchain_ragspine.NAME`` imports ``_LAZY[NAME]`` on first use.
_LAZY: dict[str, str] = {
    "BM25Retriever": "langchain_ragspine.retrievers",
    "ChunkStore": "langchain_ragspine.backends.directory.chunk_store",
    "ContextualHeader": "langchain_ragspine.document_compressors",
    "CorpusLoader": "langchain_ragspine.document_loaders",
    "CrossEncoderReranker": "langchain_ragspine.document_compressors",
    "DecompositionRetriever": "langchain_ragspine.retrievers",
    "DenseRetriever": "langchain_ragspine.retrievers",
    "ExtractiveCompressor": "langchain_ragspine.document_compressors",
    "FilterExtractionRetriever": "langchain_ragspine.retrievers",
    "GlossaryRetriever": "langchain_ragspine.retrievers",
    "HyDERetriever": "langchain_ragspine.retrievers",
    "HybridRetriever": "langchain_ragspine.retrievers",
    "LLMListwiseReranker": "langchain_ragspine.document_compressors",
    "LayoutTextSplitter": "langchain_ragspine.text_splitters",
    "LostInTheMiddleReorder": "langchain_ragspine.document_compressors",
    "MMRCompressor": "langchain_ragspine.document_compressors",
    "MultiIndexRetriever": "langchain_ragspine.retrievers",
    "MultiQueryRetriever": "langchain_ragspine.retrievers",
    "ParagraphTextSplitter": "langchain_ragspine.text_splitters",
    "ParentChildRetriever": "langchain_ragspine.retrievers",
    "ParentChildTextSplitter": "langchain_ragspine.text_splitters",
    "QueryDenyList": "langchain_ragspine.retrievers",
    "RAGFusionRetriever": "langchain_ragspine.retrievers",
    "RagSpineError": "langchain_ragspine.errors",
    "RagSpineSettings": "langchain_ragspine.settings",
    "RagSpineVectorStore": "langchain_ragspine.vectorstores",
    "RestrictedGate": "langchain_ragspine.document_compressors",
    "SemanticTextSplitter": "langchain_ragspine.text_splitters",
    "SentenceWindowTextSplitter": "langchain_ragspine.text_splitters",
    "StepBackRetriever": "langchain_ragspine.retrievers",
    "get_settings": "langchain_ragspine.settings",
    "ingest": "langchain_ragspine.pipeline.ingest",
    "is_restricted": "langchain_ragspine.document_compressors",
    "make_answer_chain": "langchain_ragspine.chains",
    "make_chat_model": "langchain_ragspine.chat_models",
    "make_embeddings": "langchain_ragspine.embeddings.factory",
    "make_query_transform": "langchain_ragspine.retrievers.transforms",
    "open_retriever": "langchain_ragspine.pipeline.sources",
    "register_mode": "langchain_ragspine.pipeline.modes",
    "search": "langchain_ragspine.pipeline.sources",
}

#: Names the root exported before issue 26 R1 and no longer does (helpers, not what a user composes): each still
#: resolves for one release with a ``DeprecationWarning`` naming the module to import it from.
_MOVED: dict[str, str] = {
    "IngestSummary": "langchain_ragspine.pipeline.stages",
    "LoaderError": "langchain_ragspine.errors",
    "RESTRICTED_SENSITIVITY": "langchain_ragspine.document_compressors",
    "RetrievalMode": "langchain_ragspine.pipeline.modes",
    "StoreError": "langchain_ragspine.errors",
    "StoredChunk": "langchain_ragspine.backends.directory.chunk_store",
    "compile_filter": "langchain_ragspine.filters",
    "get_tokenizer": "langchain_ragspine.tokenizers",
    "matches": "langchain_ragspine.filters",
}

__all__ = [
    "BM25Retriever",
    "ChunkStore",
    "ContextualHeader",
    "CorpusLoader",
    "CrossEncoderReranker",
    "DecompositionRetriever",
    "DenseRetriever",
    "ExtractiveCompressor",
    "FilterExtractionRetriever",
    "GlossaryRetriever",
    "HyDERetriever",
    "HybridRetriever",
    "LLMListwiseReranker",
    "LayoutTextSplitter",
    "LostInTheMiddleReorder",
    "MMRCompressor",
    "MultiIndexRetriever",
    "MultiQueryRetriever",
    "ParagraphTextSplitter",
    "ParentChildRetriever",
    "ParentChildTextSplitter",
    "QueryDenyList",
    "RAGFusionRetriever",
    "RagSpineError",
    "RagSpineSettings",
    "RagSpineVectorStore",
    "RestrictedGate",
    "SemanticTextSplitter",
    "SentenceWindowTextSplitter",
    "StepBackRetriever",
    "get_settings",
    "ingest",
    "is_restricted",
    "make_answer_chain",
    "make_chat_model",
    "make_embeddings",
    "make_query_transform",
    "open_retriever",
    "register_mode",
    "search",
]


def __getattr__(name: str) -> Any:
    """``langchain_ragspine.NAME``: the public name imported from its module on first use (then cached here)."""
    module = _LAZY.get(name)
    if module is None:
        module = _MOVED.get(name)
        if module is None:
            raise AttributeError(f"module 'langchain_ragspine' has no attribute {name!r}")
        import warnings

        from langchain_ragspine._stacklevel import user_stacklevel

        warnings.warn(
            f"langchain_ragspine.{name} is deprecated and goes in the next release: import it from {module} "
            f"(from {module} import {name})",
            DeprecationWarning,
            stacklevel=user_stacklevel(),
        )
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names (``__all__``) and the module's dunders — not the helpers this module imports itself
    (``importlib``, ``Any``, ``TYPE_CHECKING``) nor its lazy-import tables."""
    return sorted({*__all__, *(n for n in globals() if n.startswith("__") and n.endswith("__"))})
