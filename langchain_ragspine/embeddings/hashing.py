"""Deterministic hashing embeddings: the "hashing trick" (Weinberger et al., "Feature Hashing for Large Scale
Multitask Learning", ICML 2009) over the package's tokens.

Each token of the ``"cjk-nostem"`` tokenizer (lower-cased words, CJK unigrams and bigrams; no English stemming,
so the vectors never change with the BM25 analysis) is hashed with BLAKE2b into one of ``size``
buckets with a ±1 sign; the vector is the signed bucket counts, L2-normalised.  A text without any token (``""``,
whitespace, punctuation only) gets one fixed unit vector, :func:`featureless_vector` — every component
``1/√size`` — never the zero vector, whose cosine is undefined (LangChain's ``InMemoryVectorStore`` raises "NaN
values found" on it).  Same text, same vector, in every process and on every machine — no model, no download.  It captures lexical overlap only, so it is meant for tests
and offline plumbing, not for semantic quality.
"""

from __future__ import annotations

import hashlib

import numpy as np
from langchain_core.embeddings import Embeddings

from langchain_ragspine.arguments import check_int
from langchain_ragspine.tokenizers import cjk_tokenize

__all__ = ["HashingEmbeddings", "featureless_vector"]


def featureless_vector(size: int) -> np.ndarray:
    """The vector :class:`HashingEmbeddings` gives a text without any token: float32, shape ``(size,)``, every
    component ``1/√size`` (unit L2 norm).

    It is the same for every featureless text and favours no bucket, so its cosine with a text's vector is that
    vector's signed bucket sum over ``√size`` (small, and 0 on average), not undefined as with the zero vector.

    Example:
        >>> featureless_vector(4).tolist()
        [0.5, 0.5, 0.5, 0.5]
    """
    return np.full(size, 1.0 / np.sqrt(size), dtype=np.float32)


class HashingEmbeddings(Embeddings):
    """Feature-hashing embeddings of ``size`` dimensions (default 256), L2-normalised, float32.

    ``embed_documents(texts)`` returns one ``list[float]`` of length ``size`` and unit norm per text; a text without
    any token (``""``, whitespace, punctuation only) maps to :func:`featureless_vector` ``(size)``, never to the
    zero vector, so a cosine-similarity store never divides by a zero norm.

    Raises:
        ValueError: ``size < 2``.  TypeError: ``size`` is not an int.
    """

    def __init__(self, size: int = 256) -> None:
        check_int(size, "size", minimum=2)
        self.size = size
        self._cache: dict[str, tuple[int, float]] = {}

    def _bucket(self, token: str) -> tuple[int, float]:
        hit = self._cache.get(token)
        if hit is None:
            digest = int.from_bytes(hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest(), "little")
            hit = (digest % self.size, 1.0 if (digest >> 63) & 1 else -1.0)
            if len(self._cache) < 1_000_000:
                self._cache[token] = hit
        return hit

    def embed_array(self, texts: list[str]) -> np.ndarray:
        """Embed ``texts`` into a float32 array of shape ``(len(texts), size)``, each row of unit L2 norm."""
        out = np.zeros((len(texts), self.size), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in cjk_tokenize(text, stem_english=False):  # the vectors of before: cached under one key
                i, sign = self._bucket(token)
                out[row, i] += sign
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        empty = norms[:, 0] == 0  # no token (or tokens whose signs cancel): the fixed unit vector
        if empty.any():
            out[empty] = featureless_vector(self.size)
        return out

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed documents (same function as queries: hashing has no roles)."""
        return self.embed_array(list(texts)).tolist()

    def embed_query(self, text: str) -> list[float]:
        """Embed one query."""
        return self.embed_array([text])[0].tolist()
