"""Where a warning points: the first frame outside the given libraries — the user's own line.

A warning raised deep inside the package (a mode builder, a pydantic validator, langchain_core's ``invoke``) is
only useful when ``warnings.warn`` attributes it to the line that caused it.  The number of frames in between varies
with the call path, so :func:`user_stacklevel` counts them instead of a fixed ``stacklevel``.

:func:`warn_moved` is the one warning of a shim (the old path of a moved module, issue 26): it points at the line
that imports the shim.
"""

from __future__ import annotations

import functools
import os
import sys
import warnings
from collections.abc import Mapping, Sequence
from types import CodeType, ModuleType

__all__ = ["moved_message", "user_stacklevel", "warn_moved"]


#: This package's own directory: always counted as inside, so no module has to import the package root to name it
#: (that import made every caller part of one import cycle with ``langchain_ragspine/__init__.py``).
_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


@functools.cache
def _library_dirs(libraries: tuple[ModuleType, ...]) -> tuple[str, ...]:
    return (_PACKAGE_DIR, *(os.path.dirname(os.path.abspath(m.__file__ or "")) + os.sep for m in libraries))


def user_stacklevel(*libraries: ModuleType) -> int:
    """The ``stacklevel`` that makes ``warnings.warn``, called in this function's caller, name the first frame
    whose file is outside this package's directory and the directories of the package modules ``libraries`` (e.g.
    ``langchain_core``, ``pydantic``): ``1`` is the caller itself.  A warning issued one call deeper (a helper the caller calls)
    passes the result ``+ 1``.  The outermost frame ends the walk if every frame is inside.  Code a package class
    had generated for it counts as inside: the ``__init__`` that :mod:`dataclasses` compiles (file ``"<string>"``),
    when it calls the package's ``__post_init__``.
    """
    dirs = _library_dirs(libraries)
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and (
        frame.f_code.co_filename.startswith(dirs) or _generated_init(frame.f_code)
    ):
        frame, level = frame.f_back, level + 1
    return level


def _generated_init(code: CodeType) -> bool:
    """Whether ``code`` is a dataclass's generated ``__init__`` (a user's ``exec``'d code is ``<module>``)."""
    return code.co_filename == "<string>" and code.co_name == "__init__"


def moved_message(old: str, homes: str | Mapping[str, Sequence[str]]) -> str:
    """The text of :func:`warn_moved`: ``"{old} is deprecated and goes in the next release: import ..."`` — its
    names from the one module ``homes``, or each name from its home (``homes``: home module -> the names it gives).

    >>> moved_message("pkg.old", "pkg.new")
    'pkg.old is deprecated and goes in the next release: import its names from pkg.new'
    >>> moved_message("pkg.old", {"pkg.a": ["x", "y"], "pkg.b": ["z"]})
    'pkg.old is deprecated and goes in the next release: import each name from its home: x, y from pkg.a; z from pkg.b'
    """
    if isinstance(homes, str):
        return f"{old} is deprecated and goes in the next release: import its names from {homes}"
    where = "; ".join(f"{', '.join(names)} from {home}" for home, names in homes.items())
    return f"{old} is deprecated and goes in the next release: import each name from its home: {where}"


def warn_moved(old: str, homes: str | Mapping[str, Sequence[str]], *, stacklevel: int = 3) -> None:
    """Issue the ``DeprecationWarning`` of the shim ``old`` (:func:`moved_message` says what to import instead).

    Call it once at the top level of the shim (``warn_moved(__name__, "langchain_ragspine.pipeline.modes")``): it
    runs when the shim is first imported, and the default ``stacklevel`` names the line that imports it — the
    shim's frame is the second, and ``warnings`` skips the frames of the import machinery
    (``<frozen importlib._bootstrap>``).  A package shim whose names resolve in a module ``__getattr__`` calls it
    from there, with the same ``stacklevel``: the line that uses the name.
    """
    warnings.warn(moved_message(old, homes), DeprecationWarning, stacklevel=stacklevel)
