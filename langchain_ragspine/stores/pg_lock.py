"""Moved to :mod:`langchain_ragspine.backends.postgres.lock` (issue 26); this module re-exports its public
names for one release, and importing it warns (``DeprecationWarning``).  Import them from there.
"""

from langchain_ragspine._stacklevel import warn_moved as _warn_moved
from langchain_ragspine.backends.postgres.lock import (
    LOCK_CLASS,
    writer_lock,
    writer_pid,
)

_warn_moved(__name__, "langchain_ragspine.backends.postgres.lock")

__all__ = [
    "LOCK_CLASS",
    "writer_lock",
    "writer_pid",
]
