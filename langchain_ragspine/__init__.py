"""langchain-ragspine: retrieval for Japanese, Chinese and English documents as LangChain parts.

Loaders (``CorpusLoader``) → splitters (``ParagraphTextSplitter``, ``LayoutTextSplitter``, parent-child, sentence
window, semantic) → versioned chunk store (``ChunkStore``) → retrievers (``BM25Retriever``, ``DenseRetriever``,
``HybridRetriever``, ``ParentChildRetriever``; query transformations such as ``HyDERetriever``,
``MultiQueryRetriever``, ``GlossaryRetriever``; ``MultiIndexRetriever``) → compressors (``RestrictedGate``,
rerankers, MMR, lost-in-the-middle, extractive compression).  See ``docs/architecture.md``.
"""

from langchain_ragspine._version import __version__ as __version__
from langchain_ragspine.backends.directory.chunk_store import ChunkStore, StoredChunk
from langchain_ragspine.chains import make_answer_chain
from langchain_ragspine.config import (
    RagSpineSettings,
    get_settings,
    make_chat_model,
    make_embeddings,
    make_query_transform,
)
from langchain_ragspine.document_compressors import (
    RESTRICTED_SENSITIVITY,
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
from langchain_ragspine.errors import LoaderError, RagSpineError, StoreError
from langchain_ragspine.filters import compile_filter, matches
from langchain_ragspine.indexing import IngestSummary, ingest, open_retriever, search
from langchain_ragspine.pipeline.modes import RetrievalMode, register_mode
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
from langchain_ragspine.text_splitters import (
    LayoutTextSplitter,
    ParagraphTextSplitter,
    ParentChildTextSplitter,
    SemanticTextSplitter,
    SentenceWindowTextSplitter,
)
from langchain_ragspine.tokenizers import get_tokenizer
from langchain_ragspine.vectorstores import RagSpineVectorStore

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
    "IngestSummary",
    "LLMListwiseReranker",
    "LayoutTextSplitter",
    "LoaderError",
    "LostInTheMiddleReorder",
    "MMRCompressor",
    "MultiIndexRetriever",
    "MultiQueryRetriever",
    "ParagraphTextSplitter",
    "ParentChildRetriever",
    "ParentChildTextSplitter",
    "QueryDenyList",
    "RAGFusionRetriever",
    "RESTRICTED_SENSITIVITY",
    "RagSpineError",
    "RagSpineSettings",
    "RagSpineVectorStore",
    "RestrictedGate",
    "RetrievalMode",
    "SemanticTextSplitter",
    "SentenceWindowTextSplitter",
    "StepBackRetriever",
    "StoreError",
    "StoredChunk",
    "compile_filter",
    "get_settings",
    "get_tokenizer",
    "ingest",
    "is_restricted",
    "make_answer_chain",
    "make_chat_model",
    "make_embeddings",
    "make_query_transform",
    "matches",
    "open_retriever",
    "register_mode",
    "search",
]
