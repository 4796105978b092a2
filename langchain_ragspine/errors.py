"""Errors raised by langchain-ragspine for problems in the user's data.

Bad *arguments* raise the standard ``ValueError`` / ``TypeError`` with the offending value.  Bad *data* (a file that
is not UTF-8, a malformed sidecar, a JSONL line without ``text``) raises :class:`RagSpineError`, whose message names
the file, the line and the field, so a user can open the file and fix it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any


class RagSpineError(Exception):
    """A problem in the user's data, located by file, line and field where known.

    Attributes:
        path: the offending file, or ``None``.
        line: 1-based line number inside ``path``, or ``None``.
        field: the offending field name (a metadata key, a JSON key), or ``None``.
        reason: the bare explanation, without the location prefix.

    ``str(err)`` reads ``"<path>:<line>: field '<field>': <reason>"``, leaving out the parts that are unknown.
    """

    def __init__(
        self,
        reason: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.reason = reason
        self.path = str(path) if path is not None else None
        self.line = line
        self.field = field
        super().__init__(self._format())

    def _format(self) -> str:
        where = ""
        if self.path is not None:
            where = self.path if self.line is None else f"{self.path}:{self.line}"
            where += ": "
        what = f"field {self.field!r}: " if self.field else ""
        return f"{where}{what}{self.reason}"


class LoaderError(RagSpineError):
    """A corpus file could not be loaded (encoding, binary content, malformed JSON, missing ``text``)."""


class StoreError(RagSpineError):
    """The chunk store or a persisted index is missing, corrupt, or from an incompatible version."""


class StaleIndexWarning(UserWarning):
    """A saved index did not match the chunk store, or could not be verified or read, and was rebuilt in memory
    (from the chunk store, or for a saved retriever from its own documents); the message names the file and why.
    Search answers from the rebuilt index, never from the saved one; ``ragspine ingest`` (or saving again)
    rewrites it.  Also importable as ``langchain_ragspine.indexing.StaleIndexWarning``."""


def json_type_name(value: Any) -> str:
    """The JSON name of ``value``'s type (``null``, ``boolean``, ``number``, ``string``, ``array``, ``object``), else
    the Python type name — for messages about malformed JSON data."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def parse_json_object(
    line: str,
    *,
    path: str | Path,
    lineno: int,
    what: str,
    error: type[RagSpineError] = RagSpineError,
    object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
) -> dict[str, Any]:
    """One line of a JSON Lines file (https://jsonlines.org) as a JSON object.

    Args:
        line: the line's text.  path, lineno: where it is (for the error).
        what: how the message names the line (``"a line"`` → ``"a line must be a JSON object, got array"``).
        error: the :class:`RagSpineError` subclass raised (default :class:`RagSpineError`).
        object_pairs_hook: passed to ``json.loads``.

    Raises:
        RagSpineError: (``error``) ``"not valid JSON: <reason> (column <n>)"`` or ``"<what> must be a JSON object,
            got <JSON type>"``, located at ``path:lineno``.
    """
    try:
        obj = json.loads(line, object_pairs_hook=object_pairs_hook)
    except json.JSONDecodeError as exc:
        raise error(f"not valid JSON: {exc.msg} (column {exc.colno})", path=path, line=lineno) from None
    if not isinstance(obj, dict):
        raise error(f"{what} must be a JSON object, got {json_type_name(obj)}", path=path, line=lineno)
    return obj
