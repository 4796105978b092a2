"""Moved to :mod:`langchain_ragspine.filters.sql` (issue 26); this module re-exports its public
names for one release, and importing it warns (``DeprecationWarning``).  Import them from there.
"""

from langchain_ragspine._stacklevel import warn_moved as _warn_moved
from langchain_ragspine.filters.sql import (
    KIND_NONE,
    SEMI_JOIN_LIMIT,
    SqlFilter,
    check_filter,
    filter_sql,
    value_rows,
)

_warn_moved(__name__, "langchain_ragspine.filters.sql")

__all__ = [
    "KIND_NONE",
    "SEMI_JOIN_LIMIT",
    "SqlFilter",
    "check_filter",
    "filter_sql",
    "value_rows",
]
