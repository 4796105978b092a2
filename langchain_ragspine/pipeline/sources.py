"""Open a store for search — a store directory or a ``postgresql://`` URL — and search it.

:func:`open_retriever` builds a retrieval mode's retriever (:mod:`langchain_ragspine.pipeline.modes`) over a store
written by :func:`~langchain_ragspine.pipeline.ingest.ingest`: for a store directory it opens the saved indexes
(rebuilding them in memory if they are stale or damaged, e.g. after a crash between the store commit and the index
write) through :class:`StoreSource`, behind a retriever that follows the store's later writes
(:mod:`langchain_ragspine.retrievers.live`); for a PostgreSQL store through
:class:`PostgresSource` (:func:`open_source` picks the source by the backend
:func:`~langchain_ragspine.backends.open.open_backend` opened).  :func:`search` passes every result through the
RESTRICTED gate::

    retriever = open_retriever("store", mode="hybrid", k=6)
    docs = search(retriever, "梅雨はいつ")
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever

from langchain_ragspine.arguments import check_k, renamed_keywords
from langchain_ragspine.backends.base import GRAPH, PARENTS, RAPTOR, SPARSE, refuse
from langchain_ragspine.backends.directory.chunk_store import VECTORSTORE_RECORD_KEY, ChunkStore
from langchain_ragspine.backends.directory.embedding_cache import EmbeddingCache
from langchain_ragspine.backends.directory.graph_file import GRAPH_FILE, read_graph_file
from langchain_ragspine.backends.directory.layout import (
    BM25_DIR,
    CHUNKS_DB,
    EMBEDDING_CACHE,
    INDEX_STATE,
    VECTOR_DIR,
    describe_damage,
    has_chunk_store,
    read_index_record,
    writer_note,
)
from langchain_ragspine.backends.directory.raptor_file import RAPTOR_FILE, read_raptor_file
from langchain_ragspine.backends.open import PostgresLocation, StoreLocation, open_backend
from langchain_ragspine.backends.postgres.chunk_store import PostgresChunkStore
from langchain_ragspine.configured import configured_setting
from langchain_ragspine.documents import has_visible_text
from langchain_ragspine.embeddings.cache import model_key_for, uncached_chunks
from langchain_ragspine.embeddings.factory import make_embeddings, resolve_embedding
from langchain_ragspine.embeddings.sparse import SparseEmbeddings, make_sparse_embeddings
from langchain_ragspine.errors import RagSpineError, StoreError, warn_stale
from langchain_ragspine.pipeline.modes import (
    StoreBackedSource,
    build_mode,
    needs_sparse_message,
    resolve_mode,
    split_mode,
)
from langchain_ragspine.pipeline.stages import (
    build_bm25,
    contextual_header,
    load_saved_bm25,
    store_documents,
)
from langchain_ragspine.raptor.tree import chunk_fingerprint as leaf_fingerprint
from langchain_ragspine.relations.extractors import (
    build_graph,
    chunk_fingerprint,
    extractions_of,
    extractor_from_config,
    graph_of,
)
from langchain_ragspine.relations.store import GraphStore
from langchain_ragspine.retrievers.bm25 import BM25Retriever
from langchain_ragspine.retrievers.contract import invoke_retriever
from langchain_ragspine.retrievers.dense import DenseRetriever
from langchain_ragspine.retrievers.graph import GraphRetriever
from langchain_ragspine.retrievers.live import LiveStoreRetriever
from langchain_ragspine.retrievers.raptor import RaptorRetriever
from langchain_ragspine.retrievers.sparse import SparseRetriever
from langchain_ragspine.sensitivity import drop_restricted
from langchain_ragspine.settings import get_settings
from langchain_ragspine.text_splitters.chunkers import CHUNKERS, DEFAULT_CHUNKER, describe_chunker
from langchain_ragspine.text_splitters.contextual import ContextualHeader

__all__ = ["PostgresSource", "StoreSource", "check_store_chunker", "open_retriever", "open_source", "search"]


def _vector_coverage(
    root: Path, store: ChunkStore, emb: Embeddings, header: ContextualHeader | None
) -> tuple[list[Document], list[Document]]:
    """``(covered, lacking)``: the chunks the dense channel would index (active, not RESTRICTED, with visible text;
    with their contextual ``header``) that have a vector of ``emb`` in ``DIR/embeddings.sqlite``, and those that
    have none (all, when there is no cache).  Reads the store once, so both count the same chunks."""
    docs = [d for d in drop_restricted(store_documents(store, header)) if has_visible_text(d)]
    if not (root / EMBEDDING_CACHE).is_file():
        return [], docs
    with EmbeddingCache(root / EMBEDDING_CACHE, read_only=True) as cache:
        lacking = {cid for cid, _ in uncached_chunks(cache, model_key_for(emb), docs)}
    return ([d for d in docs if str(d.metadata["chunk_id"]) not in lacking],
            [d for d in docs if str(d.metadata["chunk_id"]) in lacking])


def _lacking_why(lacking: Sequence[Document]) -> str:
    """Who wrote the chunks that lack a vector, and what that means: the vector store embeds its records with the
    model it was opened with (another model's vectors are not this one's); ingest embeds after its commit (an
    interrupted one leaves some out)."""
    by_vs = sum(1 for d in lacking if VECTORSTORE_RECORD_KEY in d.metadata)
    parts = []
    if by_vs:
        parts.append(f"{by_vs} written by the vector store (RagSpineVectorStore), which caches the vectors of the model "
                     "it was opened with")
    if len(lacking) - by_vs:
        parts.append(f"{len(lacking) - by_vs} written by ingest, which embeds after it commits: was one interrupted "
                     "while embedding?")
    return "; ".join(parts)


def _rewrite_advice(root: Path) -> str:
    """What to do about a saved index that does not match the store: wait for the running writer, or re-ingest
    (which keeps what other writers — the vector store — added: it retracts only its own documents)."""
    note = writer_note(root)
    if note is not None:
        return f"{note} and rewrites it when it finishes"
    return ("run `ragspine ingest` of the store's corpus again to rewrite it (documents other writers added, such "
            "as the vector store's, are kept)")


#: How the warnings name a writer recorded in the chunk store (:data:`~langchain_ragspine.backends.directory.
#: chunk_store.INGEST_WRITER`, ``VECTORSTORE_WRITER``; any other name as it is).
_WRITER_NAMES = {"ingest": "ingest", "vectorstore": "the vector store (RagSpineVectorStore)"}


def _written_since(store: ChunkStore, generation: int) -> str:
    """``"; written since by the vector store (RagSpineVectorStore): 2 documents, by ingest: 1 document"`` — who
    wrote how many documents after ``generation`` (the chunk store's change feed), ``""`` when it lists none."""
    by_writer: dict[str, set[str]] = {}
    for v in store.versions_since(generation) or []:
        by_writer.setdefault(v.writer or "an unrecorded writer", set()).add(v.doc_id)
    if not by_writer:
        return ""
    written = ", ".join(
        f"by {_WRITER_NAMES.get(w, w)}: {len(docs)} document{'' if len(docs) == 1 else 's'}"
        for w, docs in sorted(by_writer.items())
    )
    return f"; written since {written}"


def _lag(saved_generation: Any, store: ChunkStore) -> str:
    """Why a saved index does not match the chunk store, as precisely as the store can say: the generation it was
    built from, the store's, and who wrote how many documents since (the chunk store's change feed)."""
    now = store.generation
    if isinstance(saved_generation, bool) or not isinstance(saved_generation, int):
        return f"it is older than the chunk store: it records no generation, and the store is at generation {now}"
    head = (f"it is older than the chunk store: built from its generation {saved_generation}, and the store is at "
            f"generation {now}")
    return head + _written_since(store, saved_generation)


def _never_indexed(root: Path, store: ChunkStore, index: str, *, built_from: str = "the chunk store") -> str:
    """The warning for a store no ``ragspine ingest`` has indexed (no ``index.json``: written by the vector store
    only): nothing saved is stale, the ``index`` is built in memory from ``built_from``, and how to save one."""
    return (f"{root}: no saved {index} (no `ragspine ingest` has indexed this store{_written_since(store, 0)}); "
            f"built in memory from {built_from}, so this search sees every document — to save one, run "
            f"`ragspine ingest FOLDER --store {root} --keep-missing` (FOLDER may be an empty folder: it indexes what "
            "the store holds and retracts nothing)")


def check_store_chunker(store: ChunkStore, root: Path, chunker: str | None = None) -> None:
    """Refuse to search a store chunked with another configuration than the one asked for: the chunker
    ``chunker`` (default ``RAGSPINE_CHUNKER``) with the ``chunk_size`` / ``chunk_overlap`` of the settings
    (``RAGSPINE_CHUNK_SIZE`` / ``RAGSPINE_CHUNK_OVERLAP``, default 480 / 80) — what ``ingest`` would build with the
    same settings.  When no chunker is asked for, any store is searched as it was built.

    Raises:
        StoreError: the store's recorded chunker (``paragraph`` for a store with no record), or its budgets, differ
            from the asked configuration; the message names both.
        ValueError: an unknown chunker name.
    """
    settings = get_settings()
    wanted = chunker if chunker is not None else configured_setting("chunker", settings)
    if wanted is None:
        return  # the chunk budgets are read (and checked) only when a chunker is asked for
    wanted = wanted.strip().lower()
    if wanted not in CHUNKERS:
        raise ValueError(f"unknown chunker {wanted!r}; choose one of {', '.join(CHUNKERS)}")
    asked = {"name": wanted, "chunk_size": configured_setting("chunk_size", settings),
             "chunk_overlap": configured_setting("chunk_overlap", settings)}
    recorded = store.chunker or {"name": DEFAULT_CHUNKER}
    differ = [key for key in asked if key in recorded and recorded[key] != asked[key]]
    if differ:
        built = describe_chunker(recorded)
        raise StoreError(
            f"refusing to search: this store was chunked by {built}, but the configuration asked for is "
            f"{describe_chunker(asked)} (RAGSPINE_CHUNKER, RAGSPINE_CHUNK_SIZE, RAGSPINE_CHUNK_OVERLAP); search it "
            f"without RAGSPINE_CHUNKER, or ingest into a new store with --chunker {wanted}",
            path=root,
        )


def _open_bm25(
    root: Path, store: ChunkStore, state: Mapping[str, Any], *, k: int, damaged: StoreError | None = None
) -> BM25Retriever:
    """The saved BM25 index when the index record and its own manifest say it was built from the store as it is
    (with ``damaged``, an invalid index record: its manifest alone), else one rebuilt in memory, with a warning."""
    if damaged is not None or state.get("generation") == store.generation:
        retriever, why = load_saved_bm25(root, k=k, generation=store.generation)
        if retriever is not None:
            return retriever
        if damaged is not None:
            why = f"{why}; and {INDEX_STATE} is invalid, so it is rebuilt with the default tokenizer"
    elif not state:
        warn_stale(_never_indexed(root, store, "BM25 index"))
        return build_bm25(store, tokenizer="auto", k=k, header=None)
    else:
        why = _lag(state.get("generation"), store)
    warn_stale(
        f"{root / BM25_DIR}: saved BM25 index not used ({why}); rebuilt in memory from the chunk store, so this "
        f"search sees every document — {_rewrite_advice(root)}"
    )
    return build_bm25(
        store, tokenizer=str(state.get("tokenizer") or "auto"), k=k, header=contextual_header(state.get("contextual"))
    )


def _open_dense(
    root: Path,
    store: ChunkStore,
    state: Mapping[str, Any],
    emb: Embeddings,
    *,
    k: int,
    explicit: bool,
    damaged: StoreError | None = None,
) -> DenseRetriever:
    """The dense channel: the saved vector index when it matches the store, else one built in memory from the
    cached vectors of the store's current chunks (a read never embeds a chunk).  While a writer holds the store's
    lock (an ingest embedding the chunks it just committed) the chunks without a vector yet are left out of the
    channel, with a warning; without one, missing vectors mean an interrupted ingest and are an error."""
    saved = state.get("vector") or {}
    key = model_key_for(emb)
    if explicit and saved.get("model_key") and saved["model_key"] != key:
        raise StoreError(
            f"this store's vector index was built with {saved['model_key']}, not {key}; query it with the same "
            f"model (leave out --embedding) or re-ingest with the model you want",
            path=root,
        )
    if (saved.get("generation") == store.generation and saved.get("model_key") == key
            and saved.get("contextual") == state.get("contextual")):
        try:
            return DenseRetriever.load(root / VECTOR_DIR, embedding=emb, k=k)
        except (StoreError, OSError, ValueError) as e:
            why = str(e)
    else:
        why = f"{INDEX_STATE} is invalid" if damaged is not None else _lag(saved.get("generation"), store)
    header = contextual_header(state.get("contextual"))
    covered, lacking = _vector_coverage(root, store, emb, header)
    missing = len(lacking)
    if missing:  # a read path never embeds: the ingest does
        note = writer_note(root)
        total = len(covered) + missing
        if note is None:
            raise StoreError(
                f"{missing} of {total} chunks have no vector of {key} yet ({_lacking_why(lacking)}); run `ragspine "
                "ingest` of the store's corpus again to embed them (documents other writers added are kept)",
                path=root,
            )
        warn_stale(
            f"{root / VECTOR_DIR}: {note}: {missing} of {total} chunks of the store's current version have no "
            f"vector of {key} yet, so the vector channel searches the other {len(covered)} (from cached vectors) "
            "until it has finished"
        )
    elif not state and damaged is None:
        warn_stale(_never_indexed(root, store, "vector index", built_from="cached vectors"))
    else:
        warn_stale(
            f"{root / VECTOR_DIR}: saved vector index not used ({why}); rebuilt in memory from cached vectors, so "
            f"this search sees every document — {_rewrite_advice(root)}"
        )
    # the chunks read once above that have a cached vector: a read path never embeds a chunk nor writes the cache
    return DenseRetriever(
        docs=covered, embedding=emb, k=k, cache_path=str(root / EMBEDDING_CACHE), cache_read_only=True,
        show_progress=False,
    )


def _open_chunk_store(root: Path) -> ChunkStore:
    """The chunk store of the store directory ``root``, opened read-only.

    Raises:
        StoreError: ``root`` holds no chunk store (run ``ingest`` first; while an ingest is creating it, the message
            says so), or it is unreadable.
    """
    creating = "; search it when that ingest has finished (it is creating the store)"
    if not has_chunk_store(root):
        note = writer_note(root)
        if note is not None:
            raise StoreError(f"no chunk store here yet: {note}{creating}", path=root)
        if (root / CHUNKS_DB).is_file():  # blank: the first ingest failed before its first commit
            raise StoreError(
                f"no chunk store here yet: {CHUNKS_DB} is empty (the first ingest stopped before it committed, e.g. "
                "on a full disk); run `ragspine ingest PATH --store DIR` again, which creates it",
                path=root,
            )
        raise StoreError("no chunk store here; run `ragspine ingest PATH --store DIR` first", path=root)
    try:
        return ChunkStore(root / CHUNKS_DB, read_only=True)
    except StoreError as e:
        note = writer_note(root)
        if note is None or (root / INDEX_STATE).exists():
            raise
        raise StoreError(f"the chunk store cannot be read yet: {note}{creating}", path=root) from e


class StoreSource(StoreBackedSource[ChunkStore]):
    """The channels of a store directory, for the mode registry (:mod:`langchain_ragspine.pipeline.modes`).

    Use it as a context manager (it holds the chunk store open, read-only)::

        with StoreSource("store") as source:
            retriever = build_retriever("hybrid", source, k=10)  # langchain_ragspine.pipeline.plan

    Args:
        store_dir: a store directory written by :func:`ingest`.
        embedding: the query encoder — a spec or an ``Embeddings``; default: the one the vector index was built
            with (its spec is recorded in ``index.json``).  Given explicitly, it must match the index's model.
        models: models made from specs, by spec, shared with later sources of the same store (what a
            :class:`~langchain_ragspine.retrievers.live.LiveStoreRetriever` reload reuses instead of loading the
            model again); filled here.  Default ``None``: a model is made for this source.

    The BM25 channel is the saved index (``tokenizer=None``) or, for another tokenizer, an index built in memory
    from the store's chunks (evaluation compares tokenizers this way).  The dense channel is the saved vector
    index; a saved index that does not match the store is rebuilt in memory (the dense one from cached vectors,
    never embedding again) with a :class:`StaleIndexWarning`.  Channels are opened on first use and kept: a
    retriever built from a source is a snapshot of the store; :func:`open_retriever` wraps it in a
    :class:`~langchain_ragspine.retrievers.LiveStoreRetriever`, which follows the store's later writes.

    Raises:
        StoreError: ``store_dir`` holds no chunk store (on entering).
    """

    def __init__(
        self,
        store_dir: str | os.PathLike[str],
        *,
        embedding: str | Embeddings | None = None,
        models: dict[str, Embeddings | None] | None = None,
    ) -> None:
        self.root = Path(store_dir)
        self.embedding = embedding
        self._models = models
        self._state: dict[str, Any] = {}
        self._damaged: StoreError | None = None
        self._dense: dict[int, DenseRetriever | None] = {}
        self._sparse: dict[int, SparseRetriever] = {}
        self._sparse_models: dict[str, SparseEmbeddings | None] = {}

    def _open(self) -> ChunkStore:
        store = _open_chunk_store(self.root)
        self._state, self._damaged = read_index_record(self.root)
        if self._damaged is not None:
            warn_stale(
                f"{self._damaged}; the index record is ignored: the saved BM25 index is used only if its checksums "
                "show it matches the chunk store, the vector index only with an explicit embedding — "
                f"{_rewrite_advice(self.root)}"
            )
        return store

    def _model(self, spec: str) -> Embeddings | None:
        """``make_embeddings(spec)``, reused from ``models`` when the source has them."""
        if self._models is None:
            return make_embeddings(spec)
        if spec not in self._models:
            self._models[spec] = make_embeddings(spec)
        return self._models[spec]

    def recorded_embedding(self) -> str | None:
        """The spec of the model the store's vector index was built with (``index.json``), ``None`` without one."""
        self.store  # noqa: B018 -- opened: the index record is read with the chunk store
        spec = (self._state.get("vector") or {}).get("embedding")
        return str(spec) if spec else None

    def recorded_tokenizer(self) -> str | None:
        """The tokenizer the store's BM25 index was built with (``index.json``), ``None`` without a record."""
        self.store  # noqa: B018 -- opened: the index record is read with the chunk store
        name = self._state.get("tokenizer")
        return str(name) if name else None

    def documents(self) -> list[Document]:
        """The store's active chunks (with ``metadata["index_text"]`` when the store has contextual headers)."""
        return store_documents(self.store, contextual_header(self._state.get("contextual")))

    def holds_parents(self) -> bool:
        """Whether the store was chunked by ``parent_child`` (its recorded chunker) and holds parents: ``auto``
        then returns parents (:mod:`~langchain_ragspine.pipeline.modes`)."""
        return (self.store.chunker or {}).get("name") == "parent_child" and self.store.count_parents() > 0

    def parent_store(self) -> ChunkStore:
        """The parent store of :class:`~langchain_ragspine.retrievers.ParentChildRetriever`: the chunk store, opened
        read-only on its own (it stays open for the retriever's lifetime, after this source is closed).

        Raises:
            StoreError: the store holds no parents (it was not ingested with ``--chunker parent_child``).
        """
        if self.store.count_parents() == 0:
            name = (self.store.chunker or {}).get("name") or DEFAULT_CHUNKER
            raise StoreError(
                f"this store holds no parents (it was chunked by {name}); parent-child retrieval needs a store "
                "ingested with --chunker parent_child",
                path=self.root,
            )
        return ChunkStore(self.root / CHUNKS_DB, read_only=True)  # outlives this source: the retriever reads it

    def graph(self, *, k: int) -> GraphRetriever:
        """The graph channel (mode ``graph``): a :class:`~langchain_ragspine.retrievers.graph.GraphRetriever` over
        the saved relation graph (``DIR/graph.json``) and the store's active chunks.  A saved graph that does not
        match the store (written by another process since: the vector store) is rebuilt in memory with its
        recorded co-occurrence extractor, or, for an LLM graph, keeps only the extractions of chunks whose
        fingerprint still matches — with a :class:`StaleIndexWarning` either way.

        Raises:
            StoreError: the store has no relation graph (ingest with ``--graph`` / ``graph="cooccurrence"``).
        """
        saved, damaged = read_graph_file(self.root)
        if saved is None:
            raise StoreError(
                "this store has no relation graph" + (f" ({damaged})" if damaged else "") + ": run `ragspine "
                "ingest PATH --store DIR --graph` (Python: ingest(..., graph='cooccurrence')) first",
                path=self.root,
            )
        docs = [d for d in drop_restricted(store_documents(self.store)) if has_visible_text(d)]
        prints = {str(d.metadata["chunk_id"]): chunk_fingerprint(d) for d in docs}
        graph: GraphStore = saved.graph
        if saved.generation != self.store.generation or any(prints.get(c) != fp for c, fp in saved.chunks.items()):
            extractor = extractor_from_config(saved.extractor)
            if extractor is not None:
                graph = build_graph(docs, extractor)
                how = "rebuilt in memory from the chunk store"
            else:
                same = [c for c, fp in saved.chunks.items() if prints.get(c) == fp]
                graph = graph_of(extractions_of(saved.graph, same))
                how = "used for the chunks it still matches (new or changed chunks have no relations)"
            warn_stale(f"{self.root / GRAPH_FILE}: saved relation graph {how} ({_lag(saved.generation, self.store)}) "
                       f"— {_rewrite_advice(self.root)}")
        return GraphRetriever(graph=graph, docs=docs, k=k)

    def raptor(self, *, k: int) -> RaptorRetriever:
        """The RAPTOR channel (mode ``raptor``): a :class:`~langchain_ragspine.retrievers.raptor.RaptorRetriever`
        over the saved tree (``DIR/raptor.json``; collapsed tree) and the store's active chunks, the query embedded
        by the model the tree records.  A saved tree behind the store (written to by another process since: the
        vector store) is used for the chunks it still matches — a changed or retracted chunk's leaf and every
        summary above it left out, new chunks absent until the next ingest — with a :class:`StaleIndexWarning`.

        Raises:
            StoreError: the store has no tree (ingest with ``--raptor``), or its recorded model gives no model
                here or another model key.
        """
        saved, damaged = read_raptor_file(self.root)
        if saved is None:
            raise StoreError(
                "this store has no RAPTOR tree" + (f" ({damaged})" if damaged else "") + ": run `ragspine ingest "
                "PATH --store DIR --raptor` (Python: ingest(..., raptor='e5')) first",
                path=self.root,
            )
        tree = saved.tree
        spec = tree.config.get("embedding")
        model = self._model(spec) if isinstance(spec, str) else None
        if model is None or model_key_for(model) != tree.config.get("model_key"):
            raise StoreError(
                f"the RAPTOR tree was built with the embedding {spec!r} ({tree.config.get('model_key')}), which "
                f"{'gives no model here' if model is None else 'gives another model here: ' + model_key_for(model)}; "
                "install it, or ingest again with --raptor <spec> to rebuild the tree",
                path=self.root,
            )
        docs = store_documents(self.store, contextual_header(self._state.get("contextual")))
        prints = {str(d.metadata["chunk_id"]): leaf_fingerprint(d) for d in drop_restricted(docs)}
        stale = [c for c, fp in tree.chunks.items() if prints.get(c) != fp]
        if saved.generation != self.store.generation or stale:
            tree = tree.without(stale)
            warn_stale(f"{self.root / RAPTOR_FILE}: saved RAPTOR tree used for the chunks it still matches "
                       f"({_lag(saved.generation, self.store)}; new chunks are not in it) — {_rewrite_advice(self.root)}")
        return RaptorRetriever(tree=tree, docs=docs, embedding=model, k=k)

    def bm25(self, *, k: int, tokenizer: str | None = None) -> BaseRetriever:
        """The saved BM25 index (``tokenizer=None``), or one built in memory with ``tokenizer`` (and the store's
        contextual headers)."""
        if tokenizer is not None:
            return build_bm25(self.store, tokenizer=tokenizer, k=k, header=contextual_header(self._state.get("contextual")))
        return _open_bm25(self.root, self.store, self._state, k=k, damaged=self._damaged)

    def sparse(self, *, k: int, required: bool, mode: str) -> BaseRetriever | None:
        """The learned-sparse channel (:class:`~langchain_ragspine.retrievers.sparse.SparseRetriever`) when the
        store was ingested with one (``index.json``'s ``sparse`` record names its encoder), else ``None`` — or, when
        ``required``, a :class:`StoreError` saying how to build it.  Chunk vectors come from the store's cache
        (read-only); a chunk written since the last ingest (the vector store's) is encoded at open, with a
        :class:`StaleIndexWarning`.

        Raises:
            StoreError: ``required`` and the store has no sparse channel.
        """
        record = self._state.get("sparse")
        if not isinstance(record, Mapping) or not isinstance(record.get("spec"), str):
            if required:
                raise StoreError(needs_sparse_message(mode), path=self.root)
            return None
        if k not in self._sparse:
            spec = str(record["spec"])
            if spec not in self._sparse_models:
                self._sparse_models[spec] = make_sparse_embeddings(spec)
            encoder = self._sparse_models[spec]
            if record.get("generation") != self.store.generation:
                warn_stale(f"the learned-sparse vectors were encoded for another version of this store; chunks "
                           f"written since are encoded now — {_rewrite_advice(self.root)}")
            cache = self.root / EMBEDDING_CACHE
            self._sparse[k] = SparseRetriever(
                docs=store_documents(self.store, contextual_header(self._state.get("contextual"))),
                embedding=encoder, k=k, cache_path=str(cache) if cache.is_file() else None, cache_read_only=True,
            )
        return self._sparse[k]

    def dense(self, *, k: int, required: bool, mode: str) -> BaseRetriever | None:
        """The saved vector index (or its in-memory rebuild), or ``None`` when the store has none, its model cannot
        load here, or it fails to open, and ``required`` is false (the last with a :class:`StaleIndexWarning`).

        Raises:
            StoreError: ``required`` and the store has no vector index or its model cannot load here; an explicit
                ``embedding`` that is not the index's model.
            RagSpineError / ImportError / OSError: the index fails to open and ``required`` (or an explicit
                ``embedding``).
        """
        if k not in self._dense:
            self._dense[k] = self._open_dense(k=k, required=required, mode=mode)
        dense = self._dense[k]
        if dense is None and required:  # cached as absent by a mode that could do without it
            return self._open_dense(k=k, required=True, mode=mode)
        return dense

    def _open_dense(self, *, k: int, required: bool, mode: str) -> DenseRetriever | None:
        root, store, state = self.root, self.store, self._state
        vector_state = state.get("vector") or {}
        emb: Embeddings | None = None
        if isinstance(self.embedding, str):
            emb = self._model(self.embedding)
        elif self.embedding is not None:
            emb = resolve_embedding(self.embedding)
        elif vector_state.get("embedding"):
            try:
                emb = self._model(str(vector_state["embedding"]))
            except ImportError as e:
                if required:
                    raise StoreError(f"this store's vector index needs a model that cannot load here: {e}", path=root) from e
        if emb is None:
            if not required:
                return None
            if self._damaged is not None:
                raise StoreError(
                    f"mode {mode!r} needs the vector index, but the index record that names its embedding model "
                    f"is invalid ({describe_damage(self._damaged)}); {_rewrite_advice(root)} (with the --embedding it "
                    "was built with), or search with --embedding SPEC",
                    path=root / INDEX_STATE,
                )
            note = writer_note(root)
            raise StoreError(
                f"mode {mode!r} needs a vector index: run `ragspine ingest PATH --store DIR --embedding e5` "
                "(or another spec) first" if note is None else
                f"mode {mode!r} needs a vector index, and none is recorded yet: {note}; search with mode 'bm25' "
                "now, or in this mode when it has finished (if it was started with an embedding model)",
                path=root,
            )
        try:
            return _open_dense(root, store, state, emb, k=k, explicit=self.embedding is not None,
                               damaged=self._damaged)
        except (StoreError, RagSpineError, ImportError, OSError) as e:
            if required or self.embedding is not None:
                raise
            warn_stale(f"dense channel unavailable ({e}); searching with BM25 only")
            return None


class PostgresSource(StoreBackedSource[PostgresChunkStore]):
    """The channels of a PostgreSQL store, for the mode registry (:mod:`langchain_ragspine.pipeline.modes`) — the twin of
    :class:`StoreSource`.

    Use it as a context manager (it holds the store open, read-only)::

        with PostgresSource("postgresql://localhost/rag") as source:
            retriever = build_retriever("hybrid", source, k=10)  # langchain_ragspine.pipeline.plan

    Args:
        url: the store's ``postgresql://`` URL.
        embedding: the query encoder — a spec or an ``Embeddings``; default: the one the vectors were made with
            (its spec is recorded at ingest).  Given explicitly, it must be that model.

    The BM25 channel is :class:`~langchain_ragspine.retrievers.postgres.PostgresBM25Retriever` for the store's
    tokenizer (``tokenizer=None`` or its name), or an in-memory
    :class:`~langchain_ragspine.retrievers.bm25.BM25Retriever` over the store's chunks for another tokenizer
    (evaluation compares tokenizers this way) and, with a :class:`~langchain_ragspine.errors.StaleIndexWarning`,
    when the postings were written by another version of the tokenizer.  The dense channel is
    :class:`~langchain_ragspine.retrievers.postgres.PostgresDenseRetriever`.  Channels are made on first use and
    kept.

    Raises:
        StoreError: no store at ``url`` (on entering).
    """

    #: What this backend refuses, by name (:func:`~langchain_ragspine.backends.base.refuse`): its chunk store's.
    unsupported: ClassVar[Mapping[str, str]] = PostgresChunkStore.unsupported
    backend_name: ClassVar[str] = PostgresChunkStore.backend_name

    def __init__(self, url: str, *, embedding: str | Embeddings | None = None) -> None:
        self.url = url
        self.embedding = embedding
        self._bm25: dict[tuple[int, str], BaseRetriever] = {}
        self._dense: dict[int, BaseRetriever | None] = {}

    def _open(self) -> PostgresChunkStore:
        return PostgresChunkStore(self.url, read_only=True)

    def recorded_embedding(self) -> str | None:
        """The spec of the model the store's vectors were made with, ``None`` when it has none."""
        spec = self.store.meta("vector_embedding")
        return str(spec) if spec else None

    def recorded_tokenizer(self) -> str | None:
        """The tokenizer the store's BM25 postings were written with."""
        return self.store.tokenizer

    def documents(self) -> list[Document]:
        """The store's active chunks (RESTRICTED ones included: retrievers built from them leave those out)."""
        return [c.to_document() for c in self.store.iter_chunks()]

    def bm25(self, *, k: int, tokenizer: str | None = None) -> BaseRetriever:
        """BM25 in SQL for the store's tokenizer; in memory for another (see the class docstring)."""
        from langchain_ragspine.retrievers.postgres import PostgresBM25Retriever

        store = self.store
        own = store.tokenizer
        name = own if tokenizer is None else tokenizer.strip().lower()
        key = (k, name)
        if key not in self._bm25:
            if name == own and store.postings_are_current():
                self._bm25[key] = PostgresBM25Retriever(url=self.url, k=k)
            else:
                if name == own:
                    warn_stale(
                        f"{store.path}: BM25 postings were written by another version of tokenizer {own!r}; "
                        "BM25 built in memory from the store — run `ragspine ingest` again to rewrite them "
                        "(documents other writers added, such as the vector store's, are kept, and their postings "
                        "rewritten too)"
                    )
                self._bm25[key] = BM25Retriever.from_documents(self.documents(), k=k, tokenizer=name)
        return self._bm25[key]

    def sparse(self, *, k: int, required: bool, mode: str) -> BaseRetriever | None:
        """``None``: a PostgreSQL store keeps no learned-sparse vectors yet — refused by name when ``required``
        (mode ``sparse``), as ingest refuses ``sparse=``."""
        if required:
            refuse(self, SPARSE)
        return None

    def dense(self, *, k: int, required: bool, mode: str) -> BaseRetriever | None:
        """:class:`~langchain_ragspine.retrievers.postgres.PostgresDenseRetriever`, or ``None`` when the store has
        no vectors (or their model cannot load here) and ``required`` is false.

        Raises:
            StoreError: ``required`` and the store has no vectors or their model cannot load here; an explicit
                ``embedding`` that is not the vectors' model.
            ValueError: ``required``, no vectors, and no embedding model configured.
        """
        if k not in self._dense:
            self._dense[k] = self._open_dense(k=k, required=required, mode=mode)
        dense = self._dense[k]
        if dense is None and required:
            return self._open_dense(k=k, required=True, mode=mode)
        return dense

    def _open_dense(self, *, k: int, required: bool, mode: str) -> BaseRetriever | None:
        from langchain_ragspine.retrievers.postgres import PostgresDenseRetriever

        store = self.store
        saved_key = store.meta("vector_model_key")
        emb: Embeddings | None = None
        if self.embedding is not None:
            emb = resolve_embedding(self.embedding)
        elif store.meta("vector_embedding"):
            try:
                emb = make_embeddings(str(store.meta("vector_embedding")))
            except ImportError as e:
                if required:
                    raise StoreError(
                        f"this store's vectors need a model that cannot load here: {e}", path=store.path
                    ) from e
        if emb is None:
            if not required:
                return None
            raise StoreError(
                f"mode {mode!r} needs vectors: run `ragspine ingest PATH --store URL --embedding e5` (or another "
                "spec) first",
                path=store.path,
            )
        key = model_key_for(emb)
        if self.embedding is not None and saved_key and saved_key != key:
            raise StoreError(
                f"this store's vectors were made with {saved_key}, not {key}; query it with the same model (leave "
                "out --embedding) or re-ingest with the model you want (documents other writers added, such as "
                "the vector store's, are kept and embedded too)",
                path=store.path,
            )
        if saved_key != key:  # an explicit model for a store without vectors: embed in memory, as the file store
            warn_stale(
                f"{store.path}: the store has no vectors of {key}; the dense channel is built in memory (every "
                "chunk embedded) — run `ragspine ingest` with this model to store them (documents other writers "
                "added, such as the vector store's, are kept and embedded too)"
            )
            return DenseRetriever(docs=self.documents(), embedding=emb, k=k)
        return PostgresDenseRetriever(url=self.url, embedding=emb, k=k)


@renamed_keywords("candidate_k")
def open_retriever(
    store_dir: str | os.PathLike[str],
    *,
    k: int | None = None,
    mode: str | None = None,
    embedding: str | Embeddings | None = None,
    fetch_k: int = 50,
    **options: Any,
) -> BaseRetriever:
    """The retriever of a store — a directory, or a ``postgresql://`` URL (``docs/postgres.md``) — for a
    retrieval ``mode``, built by the mode registry (:mod:`langchain_ragspine.pipeline.modes`).

    Modes (default ``RAGSPINE_RETRIEVAL_MODE``, else ``"auto"``): ``bm25`` / ``lexical`` / ``economy`` — the BM25
    index only, no embedding model is loaded; ``vector`` — the dense channel only; ``hybrid`` — BM25 and dense fused
    by :class:`~langchain_ragspine.retrievers.HybridRetriever` (``fetch_k`` per channel, default 50 —
    ``candidate_k`` is its old name, deprecated; ``options`` such as ``alpha`` or ``fusion`` go to it; every built-in mode takes ``filter=``, the retriever's own
    filter, ANDed with each call's); ``auto`` —
    ``hybrid`` when the store has a vector index and its embedding model can be loaded here, else ``bm25``, and over
    a store ingested with ``--chunker parent_child`` the distinct parents of what that finds (as ``parent_child``: a
    :class:`~langchain_ragspine.retrievers.ParentChildRetriever`, ``k`` parents from 50 children); and any mode
    registered with :func:`~langchain_ragspine.pipeline.modes.register_mode`.  ``k`` defaults to ``RAGSPINE_K``,
    else 6 (:data:`~langchain_ragspine.arguments.DEFAULT_K`).  The query encoder is the one the vector index was built
    with (its spec is recorded at ingest), unless ``embedding`` is given.  An invalid ``index.json`` (the store's
    index record, :mod:`langchain_ragspine.backends.directory.index_state`) is treated as absent, with a
    :class:`StaleIndexWarning` naming the file and field: the saved BM25 index is used only when its own checksums
    show it matches the store, and ``vector`` / ``hybrid`` need ``embedding`` (or an ``ingest``, which rewrites the
    record).

    A saved index is used when it matches the chunk store's generation (and model) and loads cleanly — the BM25
    index also only when every file matches its checksum and the arrays hold together (see
    :func:`~langchain_ragspine.backends.directory.bm25_index.load_bm25_index`); otherwise it is rebuilt in memory from the store (for the dense channel, from the embedding cache) and a
    :class:`StaleIndexWarning` says so — run ``ingest`` again to rewrite it.

    For a store directory the result is a :class:`~langchain_ragspine.retrievers.LiveStoreRetriever`: it follows
    the store for as long as it lives (an app, a graph, a ``langgraph dev`` server that keeps it), so a document
    relabelled RESTRICTED, changed or deleted and re-ingested — by this process or another — is never returned
    after the re-ingest committed, with no restart.  Before each call (sync and async) it reads the store's
    generation and stats ``index.json`` (~5-50 µs measured on a shared 2-core machine) and, when either changed,
    builds this mode's retriever again from the store as it is then (the same ``mode``, ``k``, ``embedding``,
    ``fetch_k`` and ``options``; the query encoder is reused, not loaded again); and it gates every result
    against the store's active rows (one indexed lookup for the call's results, ~60 µs for ten).  While an ingest
    runs it commits every 1,000 documents or 0.5 s, and the first call after each commit rebuilds, from the newest
    committed generation (as ``open_retriever`` reads a store then: the saved index does not match it yet, so it is
    rebuilt in memory, with a :class:`StaleIndexWarning`).  A rebuild that fails keeps the previous retriever
    answering, gated, with a
    :class:`~langchain_ragspine.retrievers.StoreReloadWarning`.  All told the wrapper adds ~0.1-0.4 ms to a call
    here.  Its :attr:`~langchain_ragspine.retrievers.LiveStoreRetriever.current` is the mode's retriever
    (``BM25Retriever``, ``HybridRetriever``, …) answering now, for inspection.  A PostgreSQL store's retrievers
    read the tables at every call, so they are returned as they are.

    Raises:
        StoreError: ``store_dir`` holds no chunk store (run ``ingest`` first), or ``vector``/``hybrid`` was asked
            of a store without a vector index.
        ValueError: unknown mode, or ``k < 1``.
        TypeError: ``k`` is not an int; options given to a mode that takes none.
    """
    mode = resolve_mode(mode)
    k = check_k(k) if k is not None else configured_setting("k")
    backend = open_backend(store_dir)
    feature = _MODE_FEATURES.get(split_mode(mode)[0])
    if feature is not None:
        refuse(backend, feature)  # a backend without it says so by name, before connecting
    if isinstance(backend, PostgresLocation):  # its retrievers read the tables at every call: current already
        with _source(backend, embedding=embedding) as source:
            return build_mode(mode, source, k=k, fetch_k=fetch_k, **options)
    root = backend.root
    _open_chunk_store(root).close()  # no store (or one being created): open_retriever's own error, at once
    models: dict[str, Embeddings | None] = {}  # a reload reuses the query encoder instead of loading it again

    def build() -> BaseRetriever:
        with StoreSource(root, embedding=embedding, models=models) as source:
            check_store_chunker(source.store, source.root)
            return build_mode(mode, source, k=k, fetch_k=fetch_k, **options)

    live = LiveStoreRetriever(chunk_store=root / CHUNKS_DB, factory=build, k=k,
                              watch=(root / INDEX_STATE, root / GRAPH_FILE, root / RAPTOR_FILE))
    live.refresh()  # the first build, here: its errors are open_retriever's
    return live


#: The backend feature a built-in mode needs (refused by name, before connecting, where a backend lacks it).
_MODE_FEATURES = {"sparse": SPARSE, "graph": GRAPH, "raptor": RAPTOR, "parent_child": PARENTS}


def open_source(
    store: str | os.PathLike[str], *, embedding: str | Embeddings | None = None
) -> StoreSource | PostgresSource:
    """The :class:`~langchain_ragspine.pipeline.modes.RetrieverSource` of a store: :class:`StoreSource` for a directory,
    :class:`PostgresSource` for a ``postgresql://`` URL.  Use it as a context manager.

    Raises:
        ImportError: a URL, and psycopg is not installed (names the ``postgres`` extra).
    """
    return _source(open_backend(store), embedding=embedding)


def _source(backend: StoreLocation, *, embedding: str | Embeddings | None) -> StoreSource | PostgresSource:
    """The retrieval source of an opened backend (see :func:`open_source`)."""
    if isinstance(backend, PostgresLocation):
        return PostgresSource(backend.given, embedding=embedding)
    return StoreSource(backend.root, embedding=embedding)


def search(
    retriever: BaseRetriever, query: str, *, k: int | None = None, filter: Mapping[str, Any] | None = None
) -> list[Document]:
    """Top ``k`` chunks (default ``RAGSPINE_K``, else 6: :data:`~langchain_ragspine.arguments.DEFAULT_K`) for
    ``query`` from ``retriever``, passed through the RESTRICTED gate on the way out.

    Our retrievers never index RESTRICTED chunks, so the gate here is the last line of defence, not a filter that
    changes ``k``; it also covers any other ``BaseRetriever`` a caller hands in, which is asked for ``k`` and
    ``filter`` through the retriever-call contract (:func:`~langchain_ragspine.retrievers.contract.invoke_retriever`:
    a retriever that cannot take the filter has its results filtered, never ignored).

    Raises:
        ValueError: ``k < 1`` or a malformed filter.
        TypeError: ``k`` is not an int (``"3"``, ``2.0``, ``True``).
    """
    k = check_k(k) if k is not None else configured_setting("k")
    return drop_restricted(invoke_retriever(retriever, query, k=k, filter=filter))[:k]


