"""Moved to :mod:`langchain_ragspine.text_splitters.contextual` (issue 26); this module re-exports its public
names for one release, and importing it warns (``DeprecationWarning``).  Import them from there.
"""

from langchain_ragspine._stacklevel import warn_moved as _warn_moved
from langchain_ragspine.text_splitters.contextual import (
    DEFAULT_HEADER_FIELDS,
    HEADING_FIELDS,
    INDEX_TEXT_KEY,
    ContextualHeader,
    contextual_header,
    index_text,
)

_warn_moved(__name__, "langchain_ragspine.text_splitters.contextual")

__all__ = [
    "DEFAULT_HEADER_FIELDS",
    "HEADING_FIELDS",
    "INDEX_TEXT_KEY",
    "ContextualHeader",
    "contextual_header",
    "index_text",
]
