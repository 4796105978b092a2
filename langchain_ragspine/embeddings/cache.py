"""Cache-backed embeddings for chunks: embed only what a vector cache lacks.

:class:`CachedEmbeddings` wraps an embedding model and a vector cache (normally
:class:`~langchain_ragspine.backends.directory.embedding_cache.EmbeddingCache`, one SQLite file), as LangChain's
``CacheBackedEmbeddings`` (``langchain_classic.embeddings``) wraps a model and a byte store: the model embeds, the
store holds data.  The difference is the key.  LangChain's is a hash of the text in a namespace; here a vector is
keyed by ``(model_key, chunk_id, content_hash)`` — the model that produced it (:func:`model_key_for`), the chunk,
and the SHA-256 of the embedded text (:func:`content_hash`) — so an unchanged chunk is never embedded twice, a
changed one is, and the vectors of a retracted or RESTRICTED chunk can be deleted by its ``chunk_id``.  Misses go
to the model in batches behind a progress bar, and each finished batch is written to the cache at once, so an
interrupted run keeps its work.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_ragspine.arguments import check_int
from langchain_ragspine.embeddings.batching import (
    DimensionMismatchError,
    embed_checked,
    l2_normalize,
)
from langchain_ragspine.errors import RagSpineError, StoreError
from langchain_ragspine.progress import progress_bar
from langchain_ragspine.sensitivity import drop_restricted
from langchain_ragspine.text import index_text

__all__ = [
    "MODEL_KEY_ATTRIBUTES",
    "STORE_UNCHANGED",
    "CachedEmbeddings",
    "ChunkVectorCache",
    "KeyedVectorCache",
    "content_hash",
    "model_key_for",
    "uncached_chunks",
    "warm_embedding_cache",
]


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
    """A stable string identifying the vectors ``embedding`` produces, for cache keys (:class:`CachedEmbeddings`).

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


class ChunkVectorCache(Protocol):
    """What :class:`CachedEmbeddings` needs of a vector store; :class:`~langchain_ragspine.backends.directory.embedding_cache.EmbeddingCache`
    is the implementation (see it for the semantics of each member)."""

    @property
    def path(self) -> Path | str: ...  # a file, or a database URL with its password hidden

    @property
    def read_only(self) -> bool: ...

    def get_many(self, model_key: str, keys: Sequence[tuple[str, str]]) -> dict[tuple[str, str], np.ndarray]: ...

    def put_many(self, model_key: str, items: Sequence[tuple[str, str, np.ndarray]]) -> None: ...

    # Optional: ``dim(model_key) -> int | None``, the dimension of the key's cached vectors.  With it, a model whose
    # vectors differ in dimension from those cached is a ``StoreError`` even when none of a call's chunks is cached.


class CachedEmbeddings(Embeddings):
    """An ``Embeddings`` that takes chunk vectors from a cache and sends only the misses to the model.

    Args:
        underlying_embeddings: the embedding model (any LangChain ``Embeddings``).
        cache: the vector store, usually an open :class:`~langchain_ragspine.backends.directory.embedding_cache.EmbeddingCache`; the caller
            opens and closes it.  A ``read_only`` cache is read but never written (misses are embedded each time).
        model_key: the model's part of the key; default :func:`model_key_for` of ``underlying_embeddings``.  Pass
            your own when that cannot tell two models apart.
        batch_size: texts per ``embed_documents`` call of the model (default 32), an ``int >= 1``.
        progress: tqdm progress bar over the misses; ``None`` (default) shows it on a terminal only.
        progress_desc: the bar's label (default ``"embed"``).

    Attributes:
        last_embedded: texts sent to the model by the last call (cache misses, each distinct key once).
        last_cached: rows the last call took from the cache.

    Queries are not cached: :meth:`embed_query` is the model's.

    Raises:
        ValueError: ``batch_size < 1``.  TypeError: ``batch_size`` is not an int.

    Example:
        >>> import tempfile
        >>> from pathlib import Path
        >>> from langchain_ragspine.embeddings import CachedEmbeddings, HashingEmbeddings
        >>> from langchain_ragspine.backends.directory.embedding_cache import EmbeddingCache
        >>> chunks = [("faq#0", "梅雨は六月に始まる"), ("faq#1", "The rainy season starts in June.")]
        >>> with tempfile.TemporaryDirectory() as tmp, EmbeddingCache(Path(tmp) / "embeddings.sqlite") as cache:
        ...     cached = CachedEmbeddings(HashingEmbeddings(64), cache)
        ...     first = cached.embed_chunks(chunks)  # both embedded, and stored
        ...     again = cached.embed_chunks(chunks)  # both from the cache
        >>> first.shape, cached.last_embedded, cached.last_cached
        ((2, 64), 0, 2)
    """

    def __init__(
        self,
        underlying_embeddings: Embeddings,
        cache: ChunkVectorCache,
        *,
        model_key: str | None = None,
        batch_size: int = 32,
        progress: bool | None = None,
        progress_desc: str = "embed",
    ) -> None:
        check_int(batch_size, "batch_size")
        self.underlying_embeddings = underlying_embeddings
        self.cache = cache
        self.model_key = model_key if model_key is not None else model_key_for(underlying_embeddings)
        self.batch_size = batch_size
        self.progress = progress
        self.progress_desc = progress_desc
        self.last_embedded = 0
        self.last_cached = 0

    def embed_chunks(self, chunks: Sequence[tuple[str, str]]) -> np.ndarray:
        """Vectors for ``chunks`` = ``[(chunk_id, text), …]``, embedding only what the cache lacks.

        The key of a chunk is ``(chunk_id, content_hash(text))``: an unchanged chunk is never embedded again, a
        changed text is, and so is the same text under a new ``chunk_id``.  Misses (each distinct key once) go to
        the model's ``embed_documents`` in batches of :attr:`batch_size`; each batch is written to the cache as
        soon as it is embedded (unless the cache is read-only).

        Returns:
            float32 array ``(len(chunks), d)`` in input order, rows L2-normalised (zero vectors stay zero); for no
            chunks ``(0, 0)``.  :attr:`last_embedded` / :attr:`last_cached` count misses and hits.

        Raises:
            ValueError: the model returns the wrong number of vectors or non-finite values.
            StoreError: cached vectors of the model key disagree in dimension with each other or with the model
                (the key does not identify the model: pass a distinct ``model_key``).
        """
        raw = self._vectors(chunks)
        return raw if raw.size == 0 else l2_normalize(raw)

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """The model's vectors for ``texts`` (as it returns them, in float32 precision), cached under the empty
        ``chunk_id``: ``(model_key, "", sha256(text))``.  Chunks with ids go through :meth:`embed_chunks`."""
        return self._vectors([("", text) for text in texts]).tolist()

    def embed_query(self, text: str) -> list[float]:
        """The model's query vector (not cached)."""
        return self.underlying_embeddings.embed_query(text)

    async def aembed_query(self, text: str) -> list[float]:
        """The model's query vector (not cached)."""
        return await self.underlying_embeddings.aembed_query(text)

    def _vectors(self, chunks: Sequence[tuple[str, str]]) -> np.ndarray:
        """The vectors of ``chunks`` as stored / as the model returned them: float32 ``(n, d)``, ``(0, 0)`` for
        none."""
        key = self.model_key
        cache = self.cache
        items = [(str(cid), text) for cid, text in chunks]
        keys = [(cid, content_hash(text)) for cid, text in items]
        self.last_embedded = 0
        self.last_cached = 0
        if not items:
            return np.zeros((0, 0), dtype=np.float32)
        found = cache.get_many(key, keys)
        dims = {v.shape[0] for v in found.values()}
        if len(dims) > 1:
            raise StoreError(
                f"cached vectors of model {key!r} have several dimensions {sorted(dims)}; the model key does not "
                "identify one model — pass a distinct model_key",
                path=cache.path,
            )
        dim: int | None = dims.pop() if dims else None
        if dim is None and hasattr(cache, "dim"):  # none of these is cached: the dimension of the model key's others
            dim = cache.dim(key)
        misses: dict[tuple[str, str], str] = {}
        for k, (_, text) in zip(keys, items, strict=True):
            if k not in found and k not in misses:
                misses[k] = text
        if misses:
            miss_keys = list(misses)
            with progress_bar(total=len(miss_keys), desc=self.progress_desc, unit="chunk", show=self.progress) as bar:
                for start in range(0, len(miss_keys), self.batch_size):
                    batch = miss_keys[start : start + self.batch_size]
                    try:
                        arr = embed_checked(self.underlying_embeddings, [misses[k] for k in batch], dim)
                    except DimensionMismatchError as e:
                        raise StoreError(
                            f"the model returns vectors of another dimension than the cached ones of {key!r} "
                            f"({e}); pass a distinct model_key",
                            path=cache.path,
                        ) from e
                    dim = arr.shape[1]
                    if not cache.read_only:
                        cache.put_many(key, [(c, h, v) for (c, h), v in zip(batch, arr, strict=True)])
                    for k, v in zip(batch, arr, strict=True):
                        found[k] = v
                    self.last_embedded += len(batch)
                    bar.update(len(batch))
        assert dim is not None
        out = np.empty((len(items), dim), dtype=np.float32)
        for row, k in enumerate(keys):
            out[row] = found[k]
        self.last_cached = len(items) - sum(1 for k in keys if k in misses)
        return out


# -- warming a cache (ingest's stage 5, embed; both backends' ingest and the vector store's writes run it) -------
class KeyedVectorCache(ChunkVectorCache, Protocol):
    """A :class:`ChunkVectorCache` that can list its keys without reading a
    vector (both store backends' caches: :class:`~langchain_ragspine.backends.directory.embedding_cache.EmbeddingCache`,
    :class:`~langchain_ragspine.backends.postgres.vectors.PostgresEmbeddingCache`)."""

    def keys(self, model_key: str) -> set[tuple[str, str]]: ...


#: What an interrupted warm-up keeps, by default: it ran before the chunk store changed.
STORE_UNCHANGED = "the store was not changed"


def warm_embedding_cache(
    cache: KeyedVectorCache,
    emb: Embeddings,
    chunks: Sequence[Document],
    progress: bool | None,
    *,
    limit: int | None = None,
    on_failure: str = STORE_UNCHANGED,
) -> CachedEmbeddings:
    """Stage 5, embed: embed the chunks ``cache`` lacks (RESTRICTED ones never), each key once, in input order, at
    most ``limit`` of them (``None``: all); the wrapper's ``last_embedded`` tells how many were sent to the model.
    Misses are found by the cache's keys alone (no vector is read); each batch is committed to the cache as soon
    as it is embedded, so a killed process loses at most the batch in flight.  Shared by both store backends.

    Raises:
        RagSpineError: the embedding model failed (unreachable server, bad model), naming it; the message ends
            with ``on_failure`` (what the failure left behind).
        StoreError: the model's vectors differ in dimension from those cached for its key.
    """
    key = model_key_for(emb)
    items = uncached_chunks(cache, key, chunks) if chunks else []
    # a probe that embeds only part of the misses is labelled as the check it is; the "embed" bar is then the rest
    desc = "embed (model check)" if limit is not None and len(items) > limit else "embed"
    cached = CachedEmbeddings(emb, cache, model_key=key, progress=progress, progress_desc=desc)
    if limit is not None:
        items = items[:limit]
    if not items:
        return cached
    try:
        cached.embed_chunks(items)
    except (RagSpineError, ValueError, TypeError):
        raise
    except Exception as e:  # a model or its server failed: name it
        raise RagSpineError(f"embedding model {key} failed: {type(e).__name__}: {e}; {on_failure}") from e
    return cached


def uncached_chunks(cache: KeyedVectorCache, key: str, chunks: Sequence[Document]) -> list[tuple[str, str]]:
    """``(chunk_id, text)`` of the chunks (RESTRICTED ones never) whose vector under ``key`` is not in ``cache``,
    each key once, in input order, keyed and embedded by the index text (as DenseRetriever embeds, and the prune
    keeps, them).  Reads only the cache's keys, no vector."""
    have = cache.keys(key)
    out: dict[tuple[str, str], str] = {}
    for c in drop_restricted(chunks):
        text = index_text(c)
        k = (str(c.metadata["chunk_id"]), content_hash(text))
        if k not in have and k not in out:
            out[k] = text
    return [(cid, text) for (cid, _), text in out.items()]
