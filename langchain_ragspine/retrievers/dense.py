"""Dense retriever: embeddings + FAISS inner product over L2-normalised vectors (cosine similarity).

Dense passage retrieval (Karpukhin et al., "Dense Passage Retrieval for Open-Domain Question Answering", EMNLP 2020)
embeds chunks and queries into one vector space and ranks chunks by the inner product with the query vector.  The
nearest-neighbour search is FAISS (Johnson, Douze & Jégou, "Billion-scale similarity search with GPUs", IEEE Trans.
Big Data 2019; Douze et al., "The Faiss library", 2024) through
:class:`~langchain_ragspine.backends.directory.faiss_index.FaissVectorIndex`: exact (``IndexFlatIP``) below 200,000 chunks,
HNSW above, IVF on request — see that module for the parameters and for how filters are honoured in each kind.

What :class:`DenseRetriever` guarantees:

* each result is a copy of the stored ``Document`` with ``metadata["scores"] = {"bm25": None, "vector": s,
  "fused": s, "rerank": None}``, ``s`` the cosine similarity; at most ``k`` results, best first, ties broken by
  ``chunk_id``; an empty query or an empty corpus returns ``[]``; ``k`` must be an ``int >= 1``;
* a chunk with no visible text (empty, or only white space) is never embedded, indexed or returned;
* the query is embedded with ``embed_query``; ``invoke(text, embed_as="document")`` embeds it with
  ``embed_documents([text])[0]`` instead — the document (passage) role, for a search text written to look like a
  chunk, as HyDE's hypothetical document (Gao et al., ACL 2023), which :class:`~langchain_ragspine.retrievers.hyde.
  HyDERetriever` passes so (see :mod:`langchain_ragspine.retrievers.embed_as`);
* the embedded text is ``metadata["index_text"]`` when present (e.g. a contextual header + the text, see
  :func:`langchain_ragspine.text.index_text`), else ``page_content``; results carry the stored ``page_content``;
* ``filter`` (see :mod:`langchain_ragspine.filters`, the same evaluator as BM25's) restricts the candidates *before*
  scoring: with 100 ``dept=a`` chunks next to the query and one ``dept=c`` chunk far from it,
  ``filter={"dept": "c"}`` returns that one chunk; a missing field never matches; a call's ``filter`` is ANDed
  with the retriever's own;
* documents labelled RESTRICTED are dropped when the retriever is built: never embedded, indexed or returned;
* with ``cache_path`` the chunk vectors come from an :class:`~langchain_ragspine.backends.directory.embedding_cache.EmbeddingCache`
  keyed by ``(model_key, chunk_id, sha256(text))``: rebuilding over an unchanged corpus embeds nothing, a changed
  document re-embeds only its chunks (:attr:`DenseRetriever.last_embedded` tells how many were embedded);
* ``save(dir)`` / ``load(dir, embedding=…)`` persist ``index.faiss`` (``faiss.write_index``), the id map
  ``ids.sqlite``, ``docs.jsonl`` and ``retriever.json`` — never pickle — replacing ``dir`` atomically.

Plugging in any LangChain ``VectorStore`` instead
-------------------------------------------------
Every retrieval channel is a plain ``BaseRetriever``, so a vector store a user already runs (Chroma, pgvector,
Qdrant, LangChain's ``InMemoryVectorStore``, …) replaces this class through ``as_retriever``::

    from langchain_core.vectorstores import InMemoryVectorStore
    from langchain_ragspine.document_compressors.restricted import drop_restricted

    store = InMemoryVectorStore.from_documents(drop_restricted(chunks), embedding)
    dense = store.as_retriever(search_kwargs={"k": 4})
    dense.invoke("梅雨とは", k=2)           # per-call kwargs are merged into search_kwargs

and ``dense`` goes wherever a dense channel goes (e.g. next to ``BM25Retriever`` in a reciprocal-rank fusion,
which keys results by ``metadata["chunk_id"]``, so keep the chunk metadata in the store).  Three things are then the
user's job, because a foreign store follows its own rules:

1. **Filters use the store's own syntax** and the store decides whether they run before scoring.
   ``InMemoryVectorStore`` takes a callable ``Document -> bool``; the package's dict filters convert with
   ``pred = compile_filter(flt)`` and ``search_kwargs={"filter": lambda d: pred(d.metadata)}``.  Chroma, Qdrant,
   pgvector, … each take their own filter dialect.
2. **RESTRICTED chunks** must be removed before they are added (``drop_restricted``), and the ``RestrictedGate``
   still runs at every exit.
3. **Scores**: a ``VectorStoreRetriever`` returns documents without ``metadata["scores"]``; rank fusion needs only
   the order.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any, ClassVar, Unpack, cast

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from pydantic import Field, PrivateAttr

from langchain_ragspine.arguments import DEFAULT_K, PositiveIntField, check_int, check_k
from langchain_ragspine.backends.directory.embedding_cache import EmbeddingCache
from langchain_ragspine.backends.directory.faiss_index import INDEX_KINDS, FaissVectorIndex
from langchain_ragspine.backends.directory.faiss_index import SAVE_LAYOUT as _FAISS_LAYOUT
from langchain_ragspine.backends.directory.files import (
    RETRIEVER_CONFIG,
    atomic_dir,
    layout,
    read_config,
    read_documents,
    write_documents,
)
from langchain_ragspine.documents import doc_key, has_visible_text, with_identities, with_scores
from langchain_ragspine.embeddings.batching import embed_in_batches
from langchain_ragspine.embeddings.cache import CachedEmbeddings, content_hash, model_key_for
from langchain_ragspine.errors import StoreError
from langchain_ragspine.filters import FilterField, FilterMasks, compile_filter, compiled_filter
from langchain_ragspine.retrievers.base import (
    AsyncCall,
    RagSpineRetriever,
    RetrieverCall,
    RunnableOptions,
    SyncCall,
    documents_from_texts,
    unrestricted_hits,
)
from langchain_ragspine.retrievers.embed_as import (
    EMBED_AS_OPTION,
    EmbedAs,
    aembed_search_text,
    check_embed_as,
    embed_search_text,
)
from langchain_ragspine.sensitivity import drop_restricted
from langchain_ragspine.text import index_text

__all__ = ["DenseRetriever"]

_FORMAT = "ragspine-dense/1"
_CONFIG_FILE = RETRIEVER_CONFIG
_DOCS_FILE = "docs.jsonl"
#: Everything :meth:`DenseRetriever.save` writes into its directory.
SAVE_LAYOUT = {**_FAISS_LAYOUT, **layout(_CONFIG_FILE, _DOCS_FILE)}
# Set while load() validates a retriever whose index comes from disk, so model_post_init skips the build
# (the same device as bm25.py: pydantic's validation context does not reach model_post_init via BaseRetriever).
_SKIP_BUILD: ContextVar[bool] = ContextVar("ragspine_dense_skip_build", default=False)
# a character that is neither white space nor an invisible format character (zero-width space, BOM, …)
_VISIBLE_RE = re.compile(r"[^\s\u200b-\u200f\u2028-\u202f\u2060-\u206f\ufeff]")


class DenseOptions(RunnableOptions, total=False):
    """The further keyword arguments of :meth:`DenseRetriever.from_documents` (typed, so mypy and IDEs flag a
    misspelling such as ``top_k=``): the retriever's other fields."""

    filter: dict[str, Any] | None
    index_kind: str
    cache_path: str | Path | None
    cache_read_only: bool
    model_key: str | None
    batch_size: int
    show_progress: bool | None


class DenseTextOptions(DenseOptions, total=False):
    """The further keyword arguments of :meth:`DenseRetriever.from_texts`: those of :meth:`from_documents`."""

    k: int


class DenseRetriever(RagSpineRetriever):
    """Dense (embedding) retrieval over a list of ``Document``\\ s, searched with FAISS.

    Build with :meth:`from_documents` or ``DenseRetriever(docs=[...], embedding=...)``; the chunks are embedded and
    indexed at construction.

    Attributes:
        docs: the indexed documents (RESTRICTED ones and chunks without visible text are removed at
            construction): after construction an :class:`~langchain_ragspine.retrievers.base.IndexedDocuments` of
            the documents given (a document without ``chunk_id`` or ``id`` replaced by a copy with ``chunk_id = id =``
            :func:`~langchain_ragspine.documents.content_chunk_id` of its text, so a BM25 retriever built from the
            same documents agrees, in any order or subset).  Read it as a list; ``docs[i] = d`` / ``append`` are a
            ``TypeError``; assigning ``retriever.docs = [...]`` (or ``model_copy(update={"docs": [...]})``) rebuilds
            the index.  Your own
            ``Document`` objects are never modified (nor copied: a label added to one afterwards is seen by the exit
            gate; editing its text afterwards is not supported), and every result passes the RESTRICTED gate again.
        embedding: any LangChain ``Embeddings``; ``embed_documents`` for chunks, ``embed_query`` /
            ``aembed_query`` for queries (``embed_documents`` / ``aembed_documents`` for a call with
            ``embed_as="document"``).  Vectors are L2-normalised here, so scores are cosine similarities.
        k: number of results (default 6, :data:`~langchain_ragspine.arguments.DEFAULT_K`), an ``int >= 1``; ``invoke(query, k=...)`` overrides it per call.
        filter: the retriever's own metadata filter (:mod:`langchain_ragspine.filters`); ``invoke(query,
            filter=...)`` is ANDed with it, so a call narrows the results but never widens them.
        index_kind: ``"auto"`` (default: exact flat index below 200,000 chunks, HNSW above), ``"flat"``, ``"ivf"``
            or ``"hnsw"``.
        cache_path: an :class:`EmbeddingCache` SQLite file (e.g. ``DIR/embeddings.sqlite`` beside the chunk
            store); chunk vectors are read from it and the misses written to it.  ``None`` (default): no cache.
        cache_read_only: open the cache read-only: misses are embedded but not stored (for read-only callers).
        model_key: the cache key of the embedding model; default :func:`model_key_for` of ``embedding``.  Pass your
            own when that cannot tell two models apart.
        batch_size: texts per ``embed_documents`` call while building (default 32).
        show_progress: progress bar while embedding; ``None`` (default) shows it on a terminal only.

    Call options: ``invoke(query, k=…, filter=…, embed_as=…)``; ``embed_as`` is ``"query"`` (default: the text is
    embedded with ``embed_query`` / ``aembed_query``) or ``"document"`` (``embed_documents([text])[0]`` /
    ``aembed_documents``: the model's document role — e5's ``"passage: "`` prefix — for a text written to look
    like a chunk, such as HyDE's hypothetical document).  Such a text is not a chunk: it is never written to the
    embedding cache (past a cache wrapper given as ``embedding``, the wrapped model embeds it).

    Raises:
        ValueError: ``k < 1``, ``batch_size < 1``, an unknown ``index_kind``, a malformed filter, an ``embed_as``
            other than ``"query"`` / ``"document"``, or an embedding model returning malformed vectors.
        TypeError: ``k`` is not an int.
        StoreError: the embedding cache is unusable.
        ImportError: faiss-cpu is not installed.

    Example:
        >>> from langchain_core.documents import Document
        >>> from langchain_ragspine import DenseRetriever
        >>> from langchain_ragspine.embeddings import HashingEmbeddings
        >>> docs = [
        ...     Document(page_content="梅雨は六月から七月にかけて続く雨の季節。", metadata={"chunk_id": "tsuyu#0"}),
        ...     Document(page_content="北京是中国的首都。", metadata={"chunk_id": "beijing#0"}),
        ... ]
        >>> dense = DenseRetriever.from_documents(docs, HashingEmbeddings(256), k=1)
        >>> top = dense.invoke("梅雨の季節")[0]
        >>> top.metadata["chunk_id"], 0 < top.metadata["scores"]["vector"] <= 1  # cosine similarity
        ('tsuyu#0', True)
    """

    docs: list[Document] = Field(default_factory=list, repr=False)
    embedding: Embeddings
    k: PositiveIntField = DEFAULT_K
    filter: FilterField = None
    index_kind: str = "auto"
    cache_path: str | Path | None = None
    cache_read_only: bool = False
    model_key: str | None = None
    batch_size: PositiveIntField = 32
    show_progress: bool | None = None

    #: Assigning one of these after construction rebuilds the index (see :class:`RagSpineRetriever`).
    index_fields = ("docs", "embedding", "index_kind", "cache_path", "model_key")
    #: ``invoke(query, embed_as="document")`` embeds the text with ``embed_documents`` (see the class docstring).
    call_options: ClassVar[tuple[str, ...]] = (EMBED_AS_OPTION,)

    _index: FaissVectorIndex | None = PrivateAttr(default=None)
    _masks: FilterMasks = PrivateAttr()
    _last_embedded: int = PrivateAttr(default=0)

    def model_post_init(self, context: Any, /) -> None:
        """Validate parameters, drop RESTRICTED documents and chunks without visible text, embed and index (unless
        :meth:`load` supplies the index)."""
        check_int(self.batch_size, "batch_size")
        if self.index_kind not in INDEX_KINDS:
            raise ValueError(f"index_kind must be one of {INDEX_KINDS}, got {self.index_kind!r}")
        compile_filter(self.filter)
        # each with an identity; RESTRICTED ones never embedded, indexed or returned
        docs = self._set_indexed_docs(d for d in drop_restricted(with_identities(self.docs)) if has_visible_text(d))
        self._masks = FilterMasks([d.metadata for d in docs])
        if not _SKIP_BUILD.get():
            self._build()
        self._mark_built()

    def _build(self) -> None:
        self._index = None
        self._last_embedded = 0
        docs = self._indexed_docs()
        if not docs:
            return
        keys = [doc_key(d) or "" for d in docs]
        texts = [index_text(d) for d in docs]
        if self.cache_path is not None:
            with EmbeddingCache(self.cache_path, read_only=self.cache_read_only) as cache:
                cached = CachedEmbeddings(
                    self.embedding,
                    cache,
                    model_key=self.resolved_model_key,
                    batch_size=self.batch_size,
                    progress=self.show_progress,
                )
                vectors = cached.embed_chunks(list(zip(keys, texts, strict=True)))
                self._last_embedded = cached.last_embedded
        else:
            vectors = embed_in_batches(
                self.embedding, texts, batch_size=self.batch_size, progress=self.show_progress
            )
            self._last_embedded = len(texts)
        self._index = FaissVectorIndex(
            vectors, keys, content_hashes=[content_hash(t) for t in texts], kind=self.index_kind
        )

    # -- construction -----------------------------------------------------------------------------------------------
    @classmethod
    def from_documents(
        cls, documents: Iterable[Document], embedding: Embeddings, *, k: int = DEFAULT_K, **kwargs: Unpack[DenseOptions]
    ) -> DenseRetriever:
        """Embed and index ``documents``; ``kwargs`` are the other fields (``filter``, ``index_kind``,
        ``cache_path``, ``model_key``, ``batch_size``, ``show_progress``)."""
        return cls(docs=list(documents), embedding=embedding, k=k, **kwargs)

    @classmethod
    def from_texts(
        cls,
        texts: Iterable[str],
        embedding: Embeddings,
        metadatas: Iterable[dict[str, Any]] | None = None,
        ids: Iterable[str] | None = None,
        **kwargs: Unpack[DenseTextOptions],
    ) -> DenseRetriever:
        """Index plain ``texts`` with optional parallel ``metadatas`` and ``ids``; ``kwargs`` as in
        :meth:`from_documents`.

        Raises:
            ValueError: ``metadatas`` or ``ids`` has a different length than ``texts``.
        """
        return cls.from_documents(documents_from_texts(texts, metadatas, ids), embedding, **kwargs)

    @property
    def resolved_model_key(self) -> str:
        """``model_key`` if given, else :func:`model_key_for` of ``embedding``."""
        return self.model_key if self.model_key is not None else model_key_for(self.embedding)

    @property
    def index(self) -> FaissVectorIndex | None:
        """The FAISS index (row ``i`` is ``docs[i]``); ``None`` for an empty corpus."""
        return self._index

    @property
    def last_embedded(self) -> int:
        """Chunks sent to ``embed_documents`` when this retriever was built (cache misses; 0 after :meth:`load`)."""
        return self._last_embedded

    # -- retrieval --------------------------------------------------------------------------------------------------
    def search_by_vector(
        self,
        vector: np.ndarray | list[float],
        *,
        k: int | None = None,
        filter: Mapping[str, Any] | None = None,
    ) -> list[tuple[int, float]]:
        """Top ``k`` ``(doc_position, cosine)`` pairs for a query ``vector`` of shape ``(d,)``, best first, ties by
        ``chunk_id``, among the documents that match both the retriever's own :attr:`filter` and ``filter`` (AND) and
        are not RESTRICTED (a label added after the build is skipped before the cut to ``k``).

        For benchmarks that time the search without the query embedding.

        Raises:
            TypeError, ValueError: a bad ``k``; a malformed filter; a vector of another dimension than the index.
        """
        k = self.k if k is None else check_k(k)
        mask = self._masks.mask(compiled_filter(self.filter, filter))
        return self._search(vector, k, mask)

    def _search(self, vector: np.ndarray | list[float], k: int, mask: np.ndarray | None) -> list[tuple[int, float]]:
        docs = self._indexed_docs()  # refuses documents the index was not built from
        index = self._index
        if index is None:
            return []
        # a label added after the build is skipped before the cut to k, not after it
        return unrestricted_hits(lambda allowed: index.search(vector, k, allowed=allowed), docs, mask)

    def _prepare(self, query: str, call: RetrieverCall[Any]) -> tuple[int, np.ndarray | None, EmbedAs] | None:
        """``(k, candidate mask, embed_as)`` for a call, or ``None`` when the answer is ``[]`` without embedding the
        query."""
        k = cast(int, call.k)  # k and the filter (own AND call's): resolved by the base
        mask = self._masks.mask(call.filter)
        embed_as = check_embed_as(call.options.get(EMBED_AS_OPTION))
        if self._index is None or not query or not query.strip():
            return None
        if mask is not None and not mask.any():
            return None
        return k, mask, embed_as

    def _results(self, vector: np.ndarray | list[float], k: int, mask: np.ndarray | None) -> list[Document]:
        """The ``k`` documents nearest ``vector`` among ``mask``, with their cosine as the vector score."""
        hits = self._search(vector, k, mask)
        docs = self._indexed_docs()
        return [with_scores(docs[i], vector=s, fused=s) for i, s in hits]

    def _retrieve(self, query: str, call: SyncCall) -> list[Document]:
        prepared = self._prepare(query, call)
        if prepared is None:
            return []
        k, mask, embed_as = prepared
        return self._results(embed_search_text(self.embedding, query, embed_as), k, mask)

    async def _aretrieve(self, query: str, call: AsyncCall) -> list[Document]:
        prepared = self._prepare(query, call)
        if prepared is None:
            return []
        k, mask, embed_as = prepared
        return self._results(await aembed_search_text(self.embedding, query, embed_as), k, mask)

    # -- persistence ------------------------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the retriever to directory ``path``, replaced atomically: ``index.faiss`` + ``ids.sqlite`` +
        ``vector_index.json`` (see :class:`FaissVectorIndex`), ``docs.jsonl`` and ``retriever.json``.  The
        embedding model is not saved; pass it to :meth:`load`.

        Raises:
            ValueError: a metadata value is not JSON-serialisable.
            FileExistsError: ``path`` is a file, or a non-empty directory that is not a previous save, or a previous
                save holding files a save does not write (nothing is deleted; the message names them).
            StoreWriteError: a write failed (disk full — FAISS's ``write_index`` error too —, …), naming the file;
                the previous save is intact.
        """
        config = {
            "format": _FORMAT,
            "k": self.k,
            "filter": self.filter,
            "index_kind": self.index_kind,
            "model_key": self.resolved_model_key,
            "model_key_explicit": self.model_key is not None,
            "cache_path": None if self.cache_path is None else str(self.cache_path),
            "batch_size": self.batch_size,
            "num_docs": len(self.docs),
            "empty_index": self._index is None,
        }
        with atomic_dir(path, marker=_CONFIG_FILE, writes=SAVE_LAYOUT) as tmp:
            if self._index is not None:
                self._index.write_files(tmp)
            (tmp / _CONFIG_FILE).write_text(json.dumps(config, ensure_ascii=False, indent=1), "utf-8")
            write_documents(tmp / _DOCS_FILE, self.docs)

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, embedding: Embeddings, **overrides: Any) -> DenseRetriever:
        """Load a retriever written by :meth:`save`; nothing is embedded.  ``overrides`` replace saved fields such
        as ``k``, ``filter``, ``cache_path`` or ``show_progress``.

        ``embedding`` must be the model the index was built with: when the saved key came from
        :func:`model_key_for`, the key of ``embedding`` must equal it; a saved explicit ``model_key`` is trusted.
        ``model_key=<saved key>`` in ``overrides`` accepts any model.

        Raises:
            StoreError: the directory is missing, incomplete or corrupt, or its files disagree (the message names
                the file).
            ValueError: ``embedding`` does not match the saved model key; ``index_kind`` differs from the saved
                one; ``docs`` given as an override.
        """
        root = Path(path)
        cfg_path = root / _CONFIG_FILE
        config = read_config(root, _CONFIG_FILE, fmt=_FORMAT, what="dense index")
        if "docs" in overrides:
            raise ValueError("load() takes the documents from docs.jsonl; build a new retriever to change them")
        if "index_kind" in overrides and overrides["index_kind"] != config.get("index_kind"):
            raise ValueError(
                f"{root} holds a {config.get('index_kind')!r} index; index_kind={overrides['index_kind']!r} needs a "
                "rebuild (DenseRetriever.from_documents with the same cache_path re-embeds nothing)"
            )
        saved_key = config.get("model_key")
        if "model_key" in overrides and overrides["model_key"] is not None:
            current = overrides["model_key"]
        elif config.get("model_key_explicit"):
            current = saved_key
        else:
            current = model_key_for(embedding)
        if saved_key is not None and current != saved_key:
            raise ValueError(
                f"{root} was built with embeddings {saved_key!r}, got {current!r}; load with the same model, or pass "
                f"model_key={saved_key!r} to use this one anyway"
            )

        docs_path = root / _DOCS_FILE
        docs = read_documents(docs_path, expected=config.get("num_docs"))

        fields: dict[str, Any] = {
            key: config[key] for key in ("k", "filter", "index_kind", "cache_path", "batch_size") if key in config
        }
        fields["model_key"] = saved_key if config.get("model_key_explicit") else None
        fields.update(overrides)
        token = _SKIP_BUILD.set(True)
        try:
            retriever = cls.model_validate({"docs": docs, "embedding": embedding, **fields})
        finally:
            _SKIP_BUILD.reset(token)

        if config.get("empty_index"):
            if retriever.docs:
                raise StoreError("the index is marked empty but documents are present", path=cfg_path)
            return retriever
        index = FaissVectorIndex.load(root)
        keys = [doc_key(d) or "" for d in retriever.docs]
        saved_ids = list(index.chunk_ids)
        # "" in an id map written before keyless documents got an identity (content_chunk_id) matches that identity
        if len(saved_ids) != len(keys) or any(s not in (k, "") for s, k in zip(saved_ids, keys, strict=False)):
            raise StoreError(
                f"the id map ({index.count} rows) does not match the chunk ids of {_DOCS_FILE} ({len(keys)} "
                "indexable documents)",
                path=root / "ids.sqlite",
            )
        for row, (d, h) in enumerate(zip(retriever.docs, index.content_hashes, strict=True)):
            if h is not None and content_hash(index_text(d)) != h:
                raise StoreError(
                    f"text of document {keys[row]!r} differs from the text that was embedded",
                    path=docs_path,
                    line=row + 1,
                )
        retriever._index = index
        return retriever
