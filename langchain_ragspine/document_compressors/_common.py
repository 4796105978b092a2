"""Small helpers shared by the compressors: the type check of a field and the deterministic tie-break key (the
integer checks are :mod:`langchain_ragspine.arguments`'s)."""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document
from pydantic import BeforeValidator, ValidationInfo

from langchain_ragspine.documents import doc_key

__all__ = ["instance_of", "rank_key"]


def instance_of(kind: type, what: str) -> BeforeValidator:
    """A pydantic ``BeforeValidator`` (for ``Annotated[T, instance_of(T, "a T")]``) that passes an instance of
    ``kind`` through and raises ``TypeError("<field> must be <what>, got <type name>")`` for anything else."""

    def check(value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, kind):
            raise TypeError(f"{info.field_name} must be {what}, got {type(value).__name__}")
        return value

    return BeforeValidator(check)


def rank_key(doc: Document, position: int) -> tuple[int, str, int]:
    """Tie-break key of a document: its ``chunk_id`` (else ``Document.id``); documents with neither come after,
    in input ``position`` order."""
    key = doc_key(doc)
    return (0, key, position) if key is not None else (1, "", position)
