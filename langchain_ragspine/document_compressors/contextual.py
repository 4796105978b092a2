"""Moved to :mod:`langchain_ragspine.text_splitters.contextual` (issue 26); this module re-exports its public
names for one release.  Import them from there.
"""

from langchain_ragspine.text_splitters.contextual import (
    DEFAULT_HEADER_FIELDS,
    HEADING_FIELDS,
    INDEX_TEXT_KEY,
    ContextualHeader,
    contextual_header,
    index_text,
)

__all__ = [
    "DEFAULT_HEADER_FIELDS",
    "HEADING_FIELDS",
    "INDEX_TEXT_KEY",
    "ContextualHeader",
    "contextual_header",
    "index_text",
]
