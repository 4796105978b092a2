"""Small helpers shared by the compressors: the type check of a field and the deterministic tie-break key (the
integer checks are :mod:`langchain_ragspine.arguments`'s)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Literal

from langchain_core.documents import Document
from pydantic import BeforeValidator, ValidationInfo

from langchain_ragspine.documents import check_documents, doc_key, with_scores
from langchain_ragspine.sensitivity import drop_restricted

__all__ = ["instance_of", "rank_key", "reranked"]


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


#: A reranker's scoring: ``(query, texts) -> (order key per text, higher first; scores["rerank"] per text)``; with
#: ``whole_documents``, ``(query, documents) -> …`` (a model that reads metadata too).
Scorer = Callable[[str, list[Any]], tuple[Any, Any]]  # two sequences of floats (lists or 1-D arrays)


def reranked(
    documents: Sequence[Document], query: str, owner: str, k: int | None, score: Scorer, *,
    whole_documents: bool = False, ties: Literal["key", "input"] = "key",
) -> list[Document]:
    """What every model reranker's ``compress_documents`` does around its model: check the input, drop RESTRICTED
    documents (before the model sees them), score the rest on their ``page_content`` (``whole_documents``: on the
    documents themselves), order best first with ties by :func:`rank_key` (``ties="input"``: by input order, for a
    model whose input order is itself evidence), keep ``k`` (``None``: all), and return copies with
    ``scores["rerank"]``.  An empty input (or one of RESTRICTED documents only) returns ``[]`` without calling
    ``score``."""
    docs = drop_restricted(check_documents(documents, f"{owner}.compress_documents"))
    if not docs:
        return []
    order_by, rerank = score(query, list(docs) if whole_documents else [d.page_content for d in docs])
    if ties == "input":
        order = sorted(range(len(docs)), key=lambda i: (-order_by[i], i))
    else:
        order = sorted(range(len(docs)), key=lambda i: (-order_by[i], rank_key(docs[i], i)))
    if k is not None:
        order = order[:k]
    return [with_scores(docs[i], rerank=float(rerank[i])) for i in order]
