"""Deterministic hashing embeddings: the "hashing trick" (Weinberger et al., "Feature Hashing for Large Scale
Multitask Learning", ICML 2009) over the package's tokens.

Each token of the ``"cjk"`` tokenizer (words, CJK unigrams and bigrams) is hashed with BLAKE2b into one of ``size``
buckets with a ±1 sign; the vector is the signed bucket counts, L2-normalised.  Same text, same vector, in every
process and on every machine — no model, no download.  It captures lexical overlap only, so it is meant for tests
and offline plumbing, not for semantic quality.
"""

from __future__ import annotations

import hashlib

import numpy as np
from langchain_core.embeddings import Embeddings

from langchain_ragspine.tokenizers import cjk_tokenize


class HashingEmbeddings(Embeddings):
    """Feature-hashing embeddings of ``size`` dimensions (default 256), L2-normalised, float32.

    ``embed_documents(texts)`` returns one ``list[float]`` of length ``size`` per text; a text without any token maps
    to the zero vector.

    Raises:
        ValueError: ``size < 2``.
    """

    def __init__(self, size: int = 256) -> None:
        if size < 2:
            raise ValueError(f"size must be >= 2, got {size}")
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
        """Embed ``texts`` into a float32 array of shape ``(len(texts), size)``."""
        out = np.zeros((len(texts), self.size), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in cjk_tokenize(text):
                i, sign = self._bucket(token)
                out[row, i] += sign
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed documents (same function as queries: hashing has no roles)."""
        return self.embed_array(list(texts)).tolist()

    def embed_query(self, text: str) -> list[float]:
        """Embed one query."""
        return self.embed_array([text])[0].tolist()
