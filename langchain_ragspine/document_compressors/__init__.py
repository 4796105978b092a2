"""Document compressors (LangChain ``BaseDocumentCompressor``\\ s) and the contextual-header transform.

``RestrictedGate`` (the gate), ``CrossEncoderReranker``, ``ColBERTReranker`` (late interaction),
``LLMListwiseReranker``, ``LearnedReranker`` (LambdaMART over cheap features), ``MMRCompressor``, ``LostInTheMiddleReorder``, ``ExtractiveCompressor``; ``ContextualHeader`` (a ``BaseDocumentTransformer`` applied
before indexing); ``gated_pipeline`` / ``gated_compression_retriever`` chain them behind the gate (LangChain's classes);
``SecondStageRetriever`` does the same for the CLI's ``--rerank`` / ``--postprocess`` (fetches a candidate pool,
honours ``k`` and ``filter``).
"""

from langchain_ragspine.document_compressors.colbert import ColBERTReranker
from langchain_ragspine.document_compressors.compression import ExtractiveCompressor
from langchain_ragspine.document_compressors.cross_encoder import CrossEncoderReranker
from langchain_ragspine.document_compressors.learned import LearnedReranker
from langchain_ragspine.document_compressors.listwise import (
    LLMListwiseReranker,
    build_listwise_prompt,
    parse_listwise_response,
)
from langchain_ragspine.document_compressors.mmr import MMRCompressor
from langchain_ragspine.document_compressors.pipeline import (
    SecondStageRetriever,
    gated_compression_retriever,
    gated_pipeline,
    selects_candidates,
)
from langchain_ragspine.document_compressors.reorder import LostInTheMiddleReorder, lost_in_the_middle_order
from langchain_ragspine.document_compressors.restricted import (
    RESTRICTED_SENSITIVITY,
    RestrictedGate,
    is_restricted,
)
from langchain_ragspine.text_splitters.contextual import ContextualHeader, contextual_header

__all__ = [
    "RESTRICTED_SENSITIVITY",
    "ColBERTReranker",
    "ContextualHeader",
    "CrossEncoderReranker",
    "ExtractiveCompressor",
    "LLMListwiseReranker",
    "LearnedReranker",
    "LostInTheMiddleReorder",
    "MMRCompressor",
    "RestrictedGate",
    "SecondStageRetriever",
    "build_listwise_prompt",
    "contextual_header",
    "gated_compression_retriever",
    "gated_pipeline",
    "is_restricted",
    "lost_in_the_middle_order",
    "parse_listwise_response",
    "selects_candidates",
]
