"""Document compressors (LangChain ``BaseDocumentCompressor``s)."""

from langchain_ragspine.document_compressors.reorder import LostInTheMiddleReorder, lost_in_the_middle_order
from langchain_ragspine.document_compressors.restricted import (
    RESTRICTED_SENSITIVITY,
    RestrictedGate,
    is_restricted,
)

__all__ = [
    "RESTRICTED_SENSITIVITY",
    "LostInTheMiddleReorder",
    "RestrictedGate",
    "is_restricted",
    "lost_in_the_middle_order",
]
