"""Retrievers (LangChain ``BaseRetriever``s) and the retriever-call contract every stage uses to call one."""

from langchain_ragspine.retrievers.bm25 import BM25Retriever
from langchain_ragspine.retrievers.contract import (
    RetrieverParams,
    ainvoke_retriever,
    invoke_retriever,
    retriever_params,
    traces_own_run,
)
from langchain_ragspine.retrievers.decomposition import DecompositionRetriever
from langchain_ragspine.retrievers.dense import DenseRetriever
from langchain_ragspine.retrievers.deny_list import QueryDenyList
from langchain_ragspine.retrievers.embed_as import EmbedAsIgnoredWarning
from langchain_ragspine.retrievers.filter_extraction import (
    FilterExtractionRetriever,
    LLMFilterExtractor,
    RuleFilterExtractor,
)
from langchain_ragspine.retrievers.gated import GatedRetriever
from langchain_ragspine.retrievers.glossary import Glossary, GlossaryQueryRewriter, GlossaryRetriever
from langchain_ragspine.retrievers.hybrid import HybridRetriever, fuse
from langchain_ragspine.retrievers.hyde import HyDERetriever
from langchain_ragspine.retrievers.live import LiveStoreRetriever, StoreReloadWarning
from langchain_ragspine.retrievers.multi_index import (
    KeywordRouter,
    LLMRouter,
    MultiIndexRetriever,
    asearch_index,
    fuse_by_index,
    merge_index_results,
    search_index,
    tag_index,
)
from langchain_ragspine.retrievers.multi_query import MultiQueryRetriever, RAGFusionRetriever
from langchain_ragspine.retrievers.parent_child import ParentChildRetriever
from langchain_ragspine.retrievers.query_transform import (
    QueryTransformRetriever,
    QueryTransformSkippedWarning,
)
from langchain_ragspine.retrievers.query_variants import parse_query_variants
from langchain_ragspine.retrievers.step_back import StepBackRetriever

__all__ = [
    "BM25Retriever",
    "DecompositionRetriever",
    "DenseRetriever",
    "EmbedAsIgnoredWarning",
    "FilterExtractionRetriever",
    "GatedRetriever",
    "Glossary",
    "GlossaryQueryRewriter",
    "GlossaryRetriever",
    "HyDERetriever",
    "HybridRetriever",
    "KeywordRouter",
    "LLMFilterExtractor",
    "LLMRouter",
    "LiveStoreRetriever",
    "MultiIndexRetriever",
    "MultiQueryRetriever",
    "ParentChildRetriever",
    "QueryDenyList",
    "QueryTransformRetriever",
    "QueryTransformSkippedWarning",
    "RAGFusionRetriever",
    "RetrieverParams",
    "RuleFilterExtractor",
    "StepBackRetriever",
    "StoreReloadWarning",
    "ainvoke_retriever",
    "asearch_index",
    "fuse",
    "fuse_by_index",
    "invoke_retriever",
    "merge_index_results",
    "parse_query_variants",
    "retriever_params",
    "traces_own_run",
    "search_index",
    "tag_index",
]
