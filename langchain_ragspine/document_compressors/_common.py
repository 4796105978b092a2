"""Small helpers shared by the compressors: argument checks and the deterministic tie-break key."""

from __future__ import annotations

from typing import Annotated, Any

from langchain_core.documents import Document
from pydantic import BeforeValidator, ValidationInfo

from langchain_ragspine.retrievers.bm25 import check_k, doc_key

__all__ = ["PositiveIntField", "TopNField", "check_top_n", "instance_of", "positive_int", "rank_key"]


def positive_int(name: str, value: Any) -> int:
    """``value`` as an ``int >= 1``, else an error naming ``name``.

    Raises:
        TypeError: not an int (``"3"``, ``2.0``, ``True``).
        ValueError: ``value < 1``.
    """
    return check_k(value, name)


def check_top_n(value: Any, name: str = "top_n") -> int | None:
    """``value`` as a result count: ``None`` (all) or an ``int >= 1``.

    Raises:
        TypeError, ValueError: as :func:`positive_int`.
    """
    return None if value is None else check_k(value, name)


def instance_of(kind: type, what: str) -> BeforeValidator:
    """A pydantic ``BeforeValidator`` (for ``Annotated[T, instance_of(T, "a T")]``) that passes an instance of
    ``kind`` through and raises ``TypeError("<field> must be <what>, got <type name>")`` for anything else."""

    def check(value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, kind):
            raise TypeError(f"{info.field_name} must be {what}, got {type(value).__name__}")
        return value

    return BeforeValidator(check)


def _positive_field(value: Any, info: ValidationInfo) -> int:
    return positive_int(str(info.field_name), value)


def _top_n_field(value: Any, info: ValidationInfo) -> int | None:
    return check_top_n(value, str(info.field_name))


#: A pydantic field type: an ``int >= 1``, checked by :func:`positive_int` before pydantic sees it (the error
#: names the field).
PositiveIntField = Annotated[int, BeforeValidator(_positive_field)]
#: A pydantic field type: a result count, ``None`` (all) or an ``int >= 1``, checked by :func:`check_top_n`.
TopNField = Annotated[int | None, BeforeValidator(_top_n_field)]


def rank_key(doc: Document, position: int) -> tuple[int, str, int]:
    """Tie-break key of a document: its ``chunk_id`` (else ``Document.id``); documents with neither come after,
    in input ``position`` order."""
    key = doc_key(doc)
    return (0, key, position) if key is not None else (1, "", position)
