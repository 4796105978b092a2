"""Moved to :mod:`langchain_ragspine.filters.sql` (issue 26); this module re-exports its public
names for one release.  Import them from there.
"""

from langchain_ragspine.filters.sql import (
    KIND_NONE,
    SEMI_JOIN_LIMIT,
    SqlFilter,
    check_filter,
    filter_sql,
    value_rows,
)

__all__ = [
    "KIND_NONE",
    "SEMI_JOIN_LIMIT",
    "SqlFilter",
    "check_filter",
    "filter_sql",
    "value_rows",
]
