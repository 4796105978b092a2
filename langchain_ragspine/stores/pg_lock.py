"""Moved to :mod:`langchain_ragspine.backends.postgres.lock` (issue 26); this module re-exports its public
names for one release.  Import them from there.
"""

from langchain_ragspine.backends.postgres.lock import (
    LOCK_CLASS,
    writer_lock,
    writer_pid,
)

__all__ = [
    "LOCK_CLASS",
    "writer_lock",
    "writer_pid",
]
