"""Cache keys of chunk embeddings: the model key (:func:`model_key_for`) and the text's content hash.

A chunk vector is identified by ``(model_key, chunk_id, content_hash)``: the model that produced it, the chunk, and
the SHA-256 of the text that was embedded, so an unchanged chunk is never embedded twice and a changed one is.
"""

from __future__ import annotations

import hashlib
from typing import Any

from langchain_core.embeddings import Embeddings

__all__ = ["MODEL_KEY_ATTRIBUTES", "content_hash", "model_key_for"]


def content_hash(text: str) -> str:
    """SHA-256 hex digest of ``text`` encoded as UTF-8 (64 lowercase hex characters)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()



#: Attributes read by :func:`model_key_for`, when they hold a string, number or boolean.
MODEL_KEY_ATTRIBUTES = (
    "model_name",
    "model",
    "model_id",
    "model_path",
    "repo_id",
    "deployment",
    "size",
    "dim",
    "dimensions",
    "query_prefix",
    "document_prefix",
    "query_instruction",
    "embed_instruction",
)
_INNER_ATTRIBUTES = ("inner", "underlying_embeddings", "embeddings", "base_embeddings")


def model_key_for(embedding: Embeddings) -> str:
    """A stable string identifying the vectors ``embedding`` produces, for :class:`EmbeddingCache` keys.

    It is the class name followed by the scalar values of :data:`MODEL_KEY_ATTRIBUTES` the object has
    (``model_name``, ``model``, ``size``, the role prefixes, …) and, for wrappers, the key of the wrapped model
    (attribute ``inner`` / ``underlying_embeddings``): ``"HashingEmbeddings(size=256)"``,
    ``"PrefixedEmbeddings(query_prefix='query: ', document_prefix='passage: ', inner=E5SmallEmbeddings(dim=384))"``.

    Two models that this function cannot tell apart (a custom class without such attributes, two checkpoints
    loaded from the same name) would share cached vectors: pass your own ``model_key`` (any string, e.g. a model
    name plus a weights hash) wherever one is accepted.
    """
    return _model_key(embedding, depth=0)


def _model_key(embedding: Any, depth: int) -> str:
    parts: list[str] = []
    for name in MODEL_KEY_ATTRIBUTES:
        try:
            value = getattr(embedding, name, None)
        except Exception:  # a property that fails is simply not part of the key
            continue
        if isinstance(value, (str, int, float, bool)) and not isinstance(value, type):
            parts.append(f"{name}={value!r}")
    if depth < 4:
        for name in _INNER_ATTRIBUTES:
            inner = getattr(embedding, name, None)
            if isinstance(inner, Embeddings) and inner is not embedding:
                parts.append(f"{name}={_model_key(inner, depth + 1)}")
                break
    return f"{type(embedding).__name__}({', '.join(parts)})"
