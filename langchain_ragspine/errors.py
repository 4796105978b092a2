"""Errors raised by langchain-ragspine for problems in the user's data.

Bad *arguments* raise the standard ``ValueError`` / ``TypeError`` with the offending value.  Bad *data* (a file that
is not UTF-8, a malformed sidecar, a JSONL line without ``text``) raises :class:`RagSpineError`, whose message names
the file, the line and the field, so a user can open the file and fix it.
"""

from __future__ import annotations

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
