"""Embedding in batches: L2 normalisation, checked ``embed_documents`` calls, and a batched embed with a progress bar.

On L2-normalised vectors the inner product is the cosine similarity, which is what the dense channel scores with
(Karpukhin et al., "Dense Passage Retrieval for Open-Domain Question Answering", EMNLP 2020).  Every model output
is checked (one finite vector per text, one dimension) before it reaches an index or a cache.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from langchain_core.embeddings import Embeddings

from langchain_ragspine.arguments import check_int
from langchain_ragspine.progress import progress_bar

__all__ = ["DimensionMismatchError", "embed_checked", "embed_in_batches", "l2_normalize"]


def l2_normalize(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` (shape ``(n, d)`` or ``(d,)``) as float32 rows of unit L2 norm; zero rows stay zero.

    Always returns a new C-contiguous float32 array.
    """
    out = np.array(vectors, dtype=np.float32, copy=True, order="C")
    norms = np.linalg.norm(out, axis=-1, keepdims=True)
    np.divide(out, norms, out=out, where=norms > 0)
    return out


class DimensionMismatchError(ValueError):
    """:func:`embed_checked`: the model returned vectors of another dimension than earlier ones (``dim``)."""


def embed_checked(embedding: Embeddings, texts: list[str], dim: int | None = None) -> np.ndarray:
    """``embedding.embed_documents(texts)`` as a checked float32 array ``(len(texts), d)``, not normalised: one
    finite, non-empty vector per text, of dimension ``dim`` when ``dim`` is given (the dimension of earlier
    batches or of cached vectors).

    Example:
        >>> from langchain_core.embeddings import DeterministicFakeEmbedding
        >>> embed_checked(DeterministicFakeEmbedding(size=4), ["a", "b"], dim=4).shape
        (2, 4)

    Raises:
        DimensionMismatchError: the vectors are not ``dim``-dimensional.
        ValueError: ragged or non-numeric vectors, not one vector per text, an empty vector, NaN or infinity.
    """
    raw = embedding.embed_documents(texts)
    try:
        arr = np.asarray(raw, dtype=np.float32)
    except (TypeError, ValueError) as e:
        raise ValueError(
            f"{type(embedding).__name__}.embed_documents returned ragged or non-numeric vectors: {e}"
        ) from e
    if arr.ndim != 2 or arr.shape[0] != len(texts) or arr.shape[1] < 1:
        raise ValueError(
            f"{type(embedding).__name__}.embed_documents returned shape {arr.shape} for {len(texts)} texts; "
            "expected one non-empty vector per text"
        )
    if dim is not None and arr.shape[1] != dim:
        raise DimensionMismatchError(
            f"{type(embedding).__name__}.embed_documents returned {arr.shape[1]}-dimensional vectors, "
            f"earlier ones had {dim}"
        )
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{type(embedding).__name__}.embed_documents returned NaN or infinite values")
    return arr


def embed_in_batches(
    embedding: Embeddings, texts: Sequence[str], *, batch_size: int = 32, progress: bool | None = None
) -> np.ndarray:
    """Embed ``texts`` with ``embedding.embed_documents`` in batches of ``batch_size`` (default 32), behind a tqdm
    progress bar (shown on a terminal unless ``progress`` says otherwise), without any cache.

    Returns:
        float32 array ``(len(texts), d)``, rows L2-normalised (zero vectors stay zero).  For no texts: ``(0, 0)``.

    Raises:
        TypeError: ``batch_size`` is not an int.
        ValueError: ``batch_size < 1``; the model returns the wrong number of vectors, mixed dimensions or
            non-finite values.
    """
    check_int(batch_size, "batch_size")
    texts = list(texts)
    if not texts:
        return np.zeros((0, 0), dtype=np.float32)
    parts: list[np.ndarray] = []
    dim: int | None = None
    with progress_bar(total=len(texts), desc="embed", unit="chunk", show=progress) as bar:
        for start in range(0, len(texts), batch_size):
            batch = texts[start : start + batch_size]
            arr = embed_checked(embedding, batch, dim)
            dim = arr.shape[1]
            parts.append(arr)
            bar.update(len(batch))
    return l2_normalize(np.concatenate(parts, axis=0))
