"""Moved to :mod:`langchain_ragspine.backends.directory.files` (issue 26); this module re-exports its public
names for one release, and importing it warns (``DeprecationWarning``).  Import them from there.
"""

from langchain_ragspine._stacklevel import warn_moved as _warn_moved
from langchain_ragspine.backends.directory.files import (
    FORMAT_PREFIX,
    MANIFEST_FILE,
    MANIFEST_FORMAT,
    RETRIEVER_CONFIG,
    Manifest,
    SaveLayout,
    atomic_dir,
    check_replaceable,
    discard_unsaved,
    file_sha256,
    json_default,
    layout,
    read_config,
    read_documents,
    read_manifest,
    replace_dir,
    write_documents,
    write_manifest,
)

_warn_moved(__name__, "langchain_ragspine.backends.directory.files")

__all__ = [
    "FORMAT_PREFIX",
    "MANIFEST_FILE",
    "MANIFEST_FORMAT",
    "RETRIEVER_CONFIG",
    "Manifest",
    "SaveLayout",
    "atomic_dir",
    "check_replaceable",
    "discard_unsaved",
    "file_sha256",
    "json_default",
    "layout",
    "read_config",
    "read_documents",
    "read_manifest",
    "replace_dir",
    "write_documents",
    "write_manifest",
]
