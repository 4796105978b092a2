"""Moved to :mod:`langchain_ragspine.backends.directory.index_state` (issue 26); this module re-exports its public
names for one release, and importing it warns (``DeprecationWarning``).  Import them from there.
"""

from langchain_ragspine._stacklevel import warn_moved as _warn_moved
from langchain_ragspine.backends.directory.index_state import (
    INDEX_STATE,
    check_index_state,
    read_index_state,
    write_index_state,
)

_warn_moved(__name__, "langchain_ragspine.backends.directory.index_state")

__all__ = [
    "INDEX_STATE",
    "check_index_state",
    "read_index_state",
    "write_index_state",
]
