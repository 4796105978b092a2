"""Optional dependencies: import one, or fail with a message that says what to install."""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["import_optional"]


def import_optional(name: str, hint: str) -> ModuleType:
    """The module ``name`` (``importlib.import_module``), imported when first needed.

    Args:
        name: a dotted module name (``"sentence_transformers"``, ``"matplotlib.figure"``).
        hint: the whole message of the error when the module cannot be imported — what needs it and what to
            install (``"plots need matplotlib: pip install 'langchain-ragspine[eval]'"``).

    Raises:
        ImportError: the module (or one it imports) is missing; the message is ``hint``, chained to the original
            error.
    """
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise ImportError(hint) from e
