"""``user_stacklevel`` names the user's line: frames in this package's directory count as inside without the caller
naming the package (issue 26 H1: no module imports the package root to name it)."""

from __future__ import annotations

import os
import warnings

import langchain_core

import langchain_ragspine
from langchain_ragspine._stacklevel import user_stacklevel

PACKAGE_DIR = os.path.dirname(langchain_ragspine.__file__)


def _function_in(directory: str, name: str, body: str) -> object:
    """A function whose code object claims to live in ``directory`` (as a module of that package would)."""
    namespace: dict[str, object] = {"user_stacklevel": user_stacklevel, "warnings": warnings,
                                    "langchain_core": langchain_core}
    exec(compile(body, os.path.join(directory, f"{name}.py"), "exec"), namespace)
    return namespace[name]


def test_a_warning_from_two_package_frames_deep_names_the_callers_line() -> None:
    inner = _function_in(PACKAGE_DIR, "inner", "def inner():\n"
                         "    warnings.warn('x', UserWarning, stacklevel=user_stacklevel())\n")
    outer = _function_in(PACKAGE_DIR, "outer", "def outer(f):\n    f()\n")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        outer(inner)  # type: ignore[operator]
    assert [w.filename for w in record] == [__file__]


def test_other_libraries_count_only_when_named(tmp_path: object) -> None:
    core_dir = os.path.dirname(langchain_core.__file__)
    inner = _function_in(PACKAGE_DIR, "inner", "def inner(*libs):\n"
                         "    warnings.warn('x', UserWarning, stacklevel=user_stacklevel(*libs))\n")
    via_core = _function_in(core_dir, "via_core", "def via_core(f, *libs):\n    f(*libs)\n")
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        via_core(inner)  # type: ignore[operator]
        via_core(inner, langchain_core)  # type: ignore[operator]
    assert [w.filename for w in record] == [os.path.join(core_dir, "via_core.py"), __file__]
