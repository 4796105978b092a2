"""Moved to :mod:`langchain_ragspine.backends.directory.lock` (issue 26); this module re-exports its public
names for one release, and importing it warns (``DeprecationWarning``).  Import them from there.
"""

from langchain_ragspine._stacklevel import warn_moved as _warn_moved
from langchain_ragspine.backends.directory.lock import (
    LOCK_FILE,
    NOT_A_DIRECTORY,
    StoreBusyError,
    StoreReplacedError,
    busy_error,
    check_lock_timeout,
    describe_holder,
    waiting_message,
    writer_lock,
    writer_pid,
)

_warn_moved(__name__, "langchain_ragspine.backends.directory.lock")

__all__ = [
    "LOCK_FILE",
    "NOT_A_DIRECTORY",
    "StoreBusyError",
    "StoreReplacedError",
    "busy_error",
    "check_lock_timeout",
    "describe_holder",
    "waiting_message",
    "writer_lock",
    "writer_pid",
]
