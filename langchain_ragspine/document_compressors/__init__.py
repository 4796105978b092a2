"""Document compressors (LangChain ``BaseDocumentCompressor``s)."""

from langchain_ragspine.document_compressors.restricted import (
    RESTRICTED_SENSITIVITY,
    RestrictedGate,
    is_restricted,
)

__all__ = ["RESTRICTED_SENSITIVITY", "RestrictedGate", "is_restricted"]
