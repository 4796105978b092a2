"""Where a warning points: the first frame outside the given libraries — the user's own line.

A warning raised deep inside the package (a mode builder, a pydantic validator, langchain_core's ``invoke``) is
only useful when ``warnings.warn`` attributes it to the line that caused it.  The number of frames in between varies
with the call path, so :func:`user_stacklevel` counts them instead of a fixed ``stacklevel``.
"""

from __future__ import annotations

import functools
import os
import sys
from types import ModuleType

__all__ = ["user_stacklevel"]


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
    passes the result ``+ 1``.  The outermost frame ends the walk if every frame is inside.
    """
    dirs = _library_dirs(libraries)
    frame, level = sys._getframe(1), 1
    while frame.f_back is not None and frame.f_code.co_filename.startswith(dirs):
        frame, level = frame.f_back, level + 1
    return level
