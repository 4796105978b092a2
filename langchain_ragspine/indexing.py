"""Ingest a corpus into a store directory, and search it.

A *store directory* holds the versioned chunk store (``chunks.sqlite``, the source of truth) and the BM25 index
derived from its active chunks (``bm25/``).  :func:`ingest` loads files with
:class:`~langchain_ragspine.document_loaders.CorpusLoader`, splits them with
:class:`~langchain_ragspine.text_splitters.ParagraphTextSplitter`, writes each document as a new version only when
its chunks changed, retracts documents that are no longer in the corpus, and rebuilds the BM25 index only when the
store changed.  :func:`open_retriever` opens the index (rebuilding it in memory if it is stale or damaged, e.g.
after a crash between the store commit and the index write) behind a retriever that follows the store's later
writes (:mod:`langchain_ragspine.retrievers.live`), and :func:`search` passes every result through the RESTRICTED
gate.

This mirrors LangChain's ``langchain_core.indexing.index`` (a record of what was indexed, so unchanged content is
not re-processed), with versions kept instead of deletes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import os
import shutil
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import langchain_core
import pydantic
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever

from langchain_ragspine._stacklevel import user_stacklevel
from langchain_ragspine.arguments import DEFAULT_K, check_k, renamed_keywords
from langchain_ragspine.backends.directory import bm25_parallel
from langchain_ragspine.backends.directory.bm25_index import SAVE_LAYOUT as BM25_LAYOUT
from langchain_ragspine.backends.directory.chunk_store import (
    INGEST_WRITER,
    VECTORSTORE_RECORD_KEY,
    ChunkStore,
)
from langchain_ragspine.backends.directory.embedding_cache import EmbeddingCache
from langchain_ragspine.backends.directory.files import RETRIEVER_CONFIG, discard_unsaved
from langchain_ragspine.backends.directory.index_state import INDEX_STATE, read_index_state, write_index_state
from langchain_ragspine.backends.directory.lock import LOCK_FILE, check_lock_timeout, writer_lock, writer_pid
from langchain_ragspine.backends.directory.regular_files import check_regular
from langchain_ragspine.backends.postgres.chunk_store import is_postgres_url, redact_url
from langchain_ragspine.configured import configured_setting
from langchain_ragspine.document_loaders import CorpusLoader
from langchain_ragspine.document_loaders import corpus as corpus_module
from langchain_ragspine.documents import has_visible_text
from langchain_ragspine.embeddings.cache import (
    CachedEmbeddings,
    ChunkVectorCache,
    content_hash,
    model_key_for,
)
from langchain_ragspine.embeddings.factory import make_embeddings, resolve_embedding
from langchain_ragspine.errors import (
    RagSpineError,
    StaleIndexWarning,
    StoreError,
    StoreWriteError,
    sqlite_cannot_open,
    write_errors,
)
from langchain_ragspine.pipeline.modes import (
    StoreBackedSource,
    build_retriever,
    get_mode,
    needs_embedding_message,
    resolve_mode,
)
from langchain_ragspine.progress import progress_bar, reporting
from langchain_ragspine.retrievers.bm25 import BM25Retriever
from langchain_ragspine.retrievers.contract import invoke_retriever
from langchain_ragspine.retrievers.dense import SAVE_LAYOUT as DENSE_LAYOUT
from langchain_ragspine.retrievers.dense import DenseRetriever
from langchain_ragspine.retrievers.live import LiveStoreRetriever
from langchain_ragspine.sensitivity import drop_restricted, is_restricted
from langchain_ragspine.settings import get_settings
from langchain_ragspine.text import index_text
from langchain_ragspine.text_splitters import ParagraphTextSplitter
from langchain_ragspine.text_splitters.chunkers import (
    CHUNKERS,
    DEFAULT_CHUNKER,
    chunker_mismatch,
    describe_chunker,
    make_chunker,
)
from langchain_ragspine.text_splitters.contextual import DEFAULT_HEADER_FIELDS, ContextualHeader
from langchain_ragspine.tokenizers import tokenizer_name, tokenizer_version

if TYPE_CHECKING:
    from langchain_ragspine.postgres import PostgresSource

#: File and folder names inside a store directory (``index.json``: :mod:`langchain_ragspine.backends.directory.index_state`).
CHUNKS_DB = "chunks.sqlite"
BM25_DIR = "bm25"
VECTOR_DIR = "vector"
EMBEDDING_CACHE = "embeddings.sqlite"
#: Marks a directory as a ragspine store; ``CorpusLoader`` never walks into a folder holding it.
STORE_MARKER = corpus_module.STORE_MARKER


def _warn_stale(message: str) -> None:
    """Warn with :class:`StaleIndexWarning`, attributed to the first caller outside this package, langchain_core and
    pydantic (however many mode builders, or a live retriever's reload inside ``invoke``, stand between it and the
    index)."""
    warnings.warn(
        message, StaleIndexWarning, stacklevel=user_stacklevel(langchain_core, pydantic)
    )


def check_store_dir(root: Path) -> None:
    """Check that ``root`` can be a store directory: absent, empty (or holding only the writer lock,
    :data:`~langchain_ragspine.backends.directory.lock.LOCK_FILE`), or a ragspine store.  Writes nothing.

    Raises:
        StoreError: ``root`` is a file, or a non-empty directory that is not a ragspine store (so ingest never
            overwrites someone else's ``index.json`` or ``bm25/``).
    """
    if root.exists() and not root.is_dir():
        raise StoreError("--store must be a directory, but this is a file", path=root)
    if root.is_dir() and not (root / STORE_MARKER).exists() and not (root / CHUNKS_DB).exists():
        if any(p.name != LOCK_FILE for p in root.iterdir()):
            raise StoreError(
                f"this directory is not empty and is not a ragspine store (no {STORE_MARKER}); "
                "choose a new or empty directory for --store",
                path=root,
            )


@contextlib.contextmanager
def store_writer(root: Path, *, lock_timeout: float | None = None) -> Iterator[None]:
    """Hold the writer lock of store directory ``root`` (:func:`~langchain_ragspine.backends.directory.lock.writer_lock`)
    for the block, after :func:`check_store_dir` (so no lock file is ever made in someone else's directory).
    Every writer of a store directory writes inside one: :func:`ingest`, the vector store's writes.

    Raises:
        StoreError: see :func:`check_store_dir`; :class:`~langchain_ragspine.backends.directory.lock.StoreBusyError` when
            another writer still holds the lock after ``lock_timeout`` seconds (``None``: wait).
    """
    check_store_dir(root)
    with writer_lock(root, timeout=lock_timeout):
        yield


def prepare_store_dir(root: Path) -> None:
    """Create ``root`` as a store directory, or check that an existing one is a ragspine store (call it inside
    :func:`store_writer`: it removes what a killed writer left behind).

    Raises:
        StoreError: see :func:`check_store_dir`.
        StoreWriteError: ``root`` or its marker file cannot be written (no inode or block left, a read-only
            folder, …): nothing of the store was written yet (a marker written in part is removed again).
    """
    check_store_dir(root)
    marker = root / STORE_MARKER
    with write_errors(marker, kept="nothing of the store was written yet"):
        root.mkdir(parents=True, exist_ok=True)
        if not marker.exists():
            try:
                marker.write_text(json.dumps({"format": "ragspine-store/1"}) + "\n", "utf-8")
            except BaseException:
                with contextlib.suppress(OSError):
                    marker.unlink()
                raise
    for leftover in list(root.glob(f".{BM25_DIR}.tmp-*")) + list(root.glob(f".{BM25_DIR}.old-*")):
        shutil.rmtree(leftover, ignore_errors=True)  # left by a process killed while saving the index


def _load_saved_index(root: Path, *, k: int, generation: int) -> tuple[BM25Retriever | None, str]:
    """The saved BM25 index, verified against its checksums and built from chunk-store ``generation``, or
    ``(None, why)`` when it is missing, unreadable, damaged, edited, from another generation, or has no checksum
    (saved before checksums were recorded): ``why`` names the file."""
    try:
        return BM25Retriever.load(root / BM25_DIR, k=k, generation=generation), ""
    except (StoreError, OSError, ValueError, EOFError, KeyError, TypeError) as e:
        return None, str(e)


@dataclass
class IngestSummary:
    """What one :func:`ingest` run did.

    Attributes:
        documents: documents loaded from the corpus by this run.
        chunks: chunks of those documents (this run; RESTRICTED ones included).
        new / changed / unchanged / retracted: documents by outcome (``retracted``: stored documents that are not
            among this run's).
        store_documents / store_chunks: active documents and chunks in the store after the run.
        skipped: files or JSONL lines skipped because of an error (``on_error="skip"``).
        empty: empty files skipped.
        index_rebuilt: whether the BM25 index was (re)written.
        embedded: chunks sent to the embedding model (0 when every vector came from the cache, or no dense channel).
        dense: the embedding model key of the vector index, or ``None`` when no dense channel was built.
        seconds: wall time.
        notes: human-readable remarks (e.g. why retraction was skipped).
    """

    documents: int = 0
    chunks: int = 0
    store_documents: int = 0
    store_chunks: int = 0
    new: int = 0
    changed: int = 0
    unchanged: int = 0
    retracted: int = 0
    skipped: int = 0
    empty: int = 0
    index_rebuilt: bool = False
    embedded: int = 0
    dense: str | None = None
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def line(self) -> str:
        """The one-line summary the CLI prints, each count on a named scope: ``"this run: 4 documents, 12 chunks
        (4 new, 0 changed, 0 unchanged, 0 retracted); store: 4 documents, 12 chunks; 0.1s"``."""
        outcomes = [
            f"{self.new} new",
            f"{self.changed} changed",
            f"{self.unchanged} unchanged",
            f"{self.retracted} retracted",
        ]
        if self.skipped:
            outcomes.append(f"{self.skipped} skipped")
        if self.empty:
            outcomes.append(f"{self.empty} empty")
        parts = [
            f"this run: {self.documents} documents, {self.chunks} chunks ({', '.join(outcomes)})",
            f"store: {self.store_documents} documents, {self.store_chunks} chunks",
        ]
        if self.dense is not None:
            parts.append(f"{self.embedded} embedded")
        return "; ".join(parts) + f"; {self.seconds:.1f}s"

    def to_dict(self) -> dict[str, Any]:
        """Every attribute as a JSON-ready dict — what ``ragspine ingest --json`` prints: the counts of
        :meth:`line` (``documents``, ``chunks``, ``new``, ``changed``, ``unchanged``, ``retracted``, ``skipped``,
        ``empty``, ``store_documents``, ``store_chunks``, ``embedded``), ``index_rebuilt``, ``dense`` (the vector
        index's model key, or ``None``), ``seconds`` (wall time, unrounded) and ``notes`` (a list of strings)."""
        return dataclasses.asdict(self)


#: The ``index.json`` record of contextual headers switched on with the default fields (see :func:`ingest`).
CONTEXTUAL_DEFAULT: Mapping[str, Any] = {"fields": list(DEFAULT_HEADER_FIELDS), "separator": " · "}


def _header(record: Any) -> ContextualHeader | None:
    """The :class:`ContextualHeader` an ``index.json`` ``contextual`` record describes (``None``: off)."""
    if not isinstance(record, Mapping):
        return None
    return ContextualHeader(list(record.get("fields") or DEFAULT_HEADER_FIELDS),
                            separator=str(record.get("separator", " · ")))


def _store_documents(store: ChunkStore, header: ContextualHeader | None = None) -> list[Document]:
    """The store's active chunks as documents, with ``metadata["index_text"]`` when ``header`` is given."""
    docs = [c.to_document() for c in store.iter_chunks()]
    return docs if header is None else list(header.transform_documents(docs))


def _damage(error: StoreError) -> str:
    """What is wrong with an invalid ``index.json``, without its path: ``"field 'vector': expected an object …"``."""
    return (f"line {error.line}: " if error.line else "") + (f"field {error.field!r}: " if error.field else "") + (
        error.reason)


def _index_state(store_dir: Path) -> tuple[dict[str, Any], StoreError | None]:
    """``(the store's index record, None)``, ``({}, None)`` when it has none, or ``({}, why)`` when ``index.json``
    is invalid (:func:`~langchain_ragspine.backends.directory.index_state.read_index_state`): then it is treated as absent."""
    try:
        return read_index_state(store_dir) or {}, None
    except StoreError as e:
        return {}, e


#: What the next search does after a derived file failed to be written (:func:`_after_commit`), by the file.
_BM25_NEXT = "the next search rebuilds the BM25 index in memory from the chunk store (with a StaleIndexWarning)"
_NOT_EMBEDDED = (
    "no vector was embedded for this run's new chunks yet, so until the next ingest embeds them mode auto searches "
    "with BM25 only and modes hybrid and vector refuse"
)
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


def _open_cache(root: Path, *, read_only: bool = False) -> EmbeddingCache:
    """The store's embedding cache; an unreadable one (it is only a cache) is moved aside and started afresh."""
    path = root / EMBEDDING_CACHE
    try:
        return EmbeddingCache(path, read_only=read_only)
    except StoreWriteError:
        raise  # the disk is full (opening writes the -wal/-shm files): the cache is intact, keep it
    except StoreError as e:
        if read_only or not path.exists() or sqlite_cannot_open(e):
            raise  # a file SQLite could not open or create (its -wal, its -shm) says nothing of the cache: keep it
        aside = path.with_name(f"{path.name}.corrupt-{int(time.time())}")
        for suffix in ("", "-wal", "-shm"):
            src = Path(str(path) + suffix)
            if src.exists():
                os.replace(src, Path(str(aside) + suffix))
        warnings.warn(
            f"{path}: unreadable embedding cache ({e.reason}); moved to {aside.name} and started a new one",
            StaleIndexWarning,
            stacklevel=3,
        )
        return EmbeddingCache(path)


class KeyedVectorCache(ChunkVectorCache, Protocol):
    """A :class:`~langchain_ragspine.embeddings.cache.ChunkVectorCache` that can list its keys without reading a
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
    """Embed the chunks ``cache`` lacks (RESTRICTED ones never), each key once, in input order, at most ``limit``
    of them (``None``: all); the wrapper's ``last_embedded`` tells how many were sent to the model.  Misses are
    found by the cache's keys alone (no vector is read); each batch is committed to the cache as soon as it is
    embedded, so a killed process loses at most the batch in flight.  Shared by both store backends.

    Raises:
        RagSpineError: the embedding model failed (unreachable server, bad model), naming it; the message ends
            with ``on_failure`` (what the failure left behind).
        StoreError: the model's vectors differ in dimension from those cached for its key.
    """
    key = model_key_for(emb)
    items = _uncached(cache, key, chunks) if chunks else []
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


#: Chunks embedded before the chunk store changes, to check that the model works (:func:`ingest`).
PROBE_CHUNKS = 32


def _uncached(cache: KeyedVectorCache, key: str, chunks: Sequence[Document]) -> list[tuple[str, str]]:
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


def _warm_file_cache(
    root: Path, emb: Embeddings, chunks: Sequence[Document], progress: bool | None, *, limit: int | None = None
) -> int:
    """:func:`warm_embedding_cache` on the file store's cache (``root/embeddings.sqlite``); returns how many chunks
    were sent to the model.  ``limit`` set: the probe before the chunk store changes."""
    if not chunks:
        return 0
    on_failure = (
        STORE_UNCHANGED
        if limit is not None
        else "the chunk store and its BM25 index are updated and searchable; the vectors embedded so far are kept "
        "— run ingest again to embed the rest"
    )
    with _open_cache(root) as cache:
        return warm_embedding_cache(cache, emb, chunks, progress, limit=limit, on_failure=on_failure).last_embedded


def _vector_coverage(
    root: Path, store: ChunkStore, emb: Embeddings, header: ContextualHeader | None
) -> tuple[list[Document], list[Document]]:
    """``(covered, lacking)``: the chunks the dense channel would index (active, not RESTRICTED, with visible text;
    with their contextual ``header``) that have a vector of ``emb`` in ``DIR/embeddings.sqlite``, and those that
    have none (all, when there is no cache).  Reads the store once, so both count the same chunks."""
    docs = [d for d in drop_restricted(_store_documents(store, header)) if has_visible_text(d)]
    if not (root / EMBEDDING_CACHE).is_file():
        return [], docs
    with EmbeddingCache(root / EMBEDDING_CACHE, read_only=True) as cache:
        lacking = {cid for cid, _ in _uncached(cache, model_key_for(emb), docs)}
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


def _writer_note(root: Path) -> str | None:
    """``"an ingest or another writer (pid N) is writing this store"`` while a writer holds the store's lock, else
    ``None``."""
    pid = writer_pid(root)
    if pid is None:
        return None
    return f"an ingest or another writer ({f'pid {pid}' if pid else 'pid unknown'}) is writing this store"


def _rewrite_advice(root: Path) -> str:
    """What to do about a saved index that does not match the store: wait for the running writer, or re-ingest
    (which keeps what other writers — the vector store — added: it retracts only its own documents)."""
    note = _writer_note(root)
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
        docs=_store_documents(store, header),
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
    dense = _dense_from_store(root, store, emb, progress=progress, header=_header(contextual))
    discard_unsaved(root / VECTOR_DIR, RETRIEVER_CONFIG, DENSE_LAYOUT)  # a damaged index of this store: rebuilt
    dense.save(root / VECTOR_DIR)
    state["vector"] = {"generation": store.generation, "model_key": key, "embedding": spec}
    if contextual is not None:
        state["vector"]["contextual"] = contextual
    return dense


def _active_document_count(root: Path | str, *, owner: str | None = None) -> int:
    """Active documents in the store at ``root`` (0 when there is none yet); with ``owner``, only those that writer
    owns."""
    if is_postgres_url(root):
        from langchain_ragspine.postgres import active_document_count

        return active_document_count(str(root), owner=owner)
    root = Path(root)
    if not _has_chunk_store(root):
        return 0
    with ChunkStore(root / CHUNKS_DB, read_only=True) as store:
        return len(store.doc_ids(owner=owner))


def _has_chunk_store(root: Path) -> bool:
    """Whether ``root`` holds a chunk store: ``chunks.sqlite`` exists and is not blank
    (:meth:`~langchain_ragspine.backends.directory.chunk_store.ChunkStore.is_blank`: a first ingest stopped before its schema committed —
    the disk was full — which the next ingest creates again).

    Raises:
        StoreError: ``chunks.sqlite`` is there but not a regular file (a FIFO, a folder, a device)."""
    # a FIFO, a folder or a device there: StoreError naming it (never opened: it would block or never end)
    return check_regular(root / CHUNKS_DB) and not ChunkStore.is_blank(root / CHUNKS_DB)


def _prune_embedding_cache(root: Path, store: ChunkStore, header: ContextualHeader | None = None) -> int:
    """Delete from ``DIR/embeddings.sqlite`` every vector that search may not return: of chunks that are no longer
    active (changed or retracted documents), are RESTRICTED, or were embedded with another index text (contextual
    headers switched), for every model.  Returns the rows deleted."""
    if not (root / EMBEDDING_CACHE).is_file():
        return 0
    chunks = _store_documents(store, header)
    keep = {(str(c.metadata["chunk_id"]), content_hash(index_text(c))) for c in chunks if not is_restricted(c)}
    with _open_cache(root) as cache:
        return cache.prune(None, keep)


def build_bm25(
    store: ChunkStore,
    *,
    tokenizer: str = "auto",
    k: int = DEFAULT_K,
    header: ContextualHeader | None = None,
    workers: int | None = None,
) -> BM25Retriever:
    """A :class:`BM25Retriever` over the store's active chunks (it leaves RESTRICTED ones out of the index), indexing
    each chunk with ``header`` (a :class:`ContextualHeader`) when given, tokenized by ``workers`` processes (default
    ``RAGSPINE_WORKERS``, else automatic: every usable core for a large store; the index is the same)."""
    workers = configured_setting("workers") if workers is None else workers
    return BM25Retriever.from_documents(_store_documents(store, header), k=k, tokenizer=tokenizer, workers=workers)


class DocumentStore(Protocol):
    """The chunk-store methods :func:`write_documents` uses: :class:`~langchain_ragspine.backends.directory.chunk_store.ChunkStore` and
    :class:`~langchain_ragspine.backends.postgres.chunk_store.PostgresChunkStore` have them."""

    def current_version(self, doc_id: str) -> int | None: ...

    def count_chunks(self, *, doc_id: str | Sequence[str] | None = None, include_inactive: bool = False) -> int: ...

    def replace_doc_chunks(self, doc_id: str, chunks: Any, valid_as_of: Any = "") -> int: ...

    def doc_ids(self, *, include_retracted: bool = False, owner: str | None = None) -> list[str]: ...


def write_documents(
    store: DocumentStore,
    split: Sequence[tuple[Document, list[Document], list[Document] | None]],
    summary: IngestSummary,
    *,
    retract_missing: bool,
    active_before: int,
    progress: bool | None,
) -> None:
    """Write each loaded document's chunks as its new version (all or nothing per document; unchanged ones are
    no-ops), retract the store's documents absent from ``split`` (unless ``retract_missing`` is false or a file
    failed to load), and count the outcomes and the store's size into ``summary``.  Shared by both backends;
    ``split`` holds ``(document, chunks, parents)``, and parents (parent-child chunking) are written only when a
    document has some.  A :class:`ChunkStore` commits the documents in batches
    (:meth:`~langchain_ragspine.backends.directory.chunk_store.ChunkStore.write_batch`): the same rows, far fewer commits."""
    with store.write_batch() if isinstance(store, ChunkStore) else contextlib.nullcontext():
        seen: set[str] = set()
        for doc, chunks, parents in progress_bar(split, desc="index", unit="doc", show=progress):
            doc_id = str(doc.metadata["doc_id"])
            seen.add(doc_id)
            before = store.current_version(doc_id)
            was_active = before is not None and store.count_chunks(doc_id=doc_id) > 0
            valid_as_of = str(doc.metadata.get("valid_as_of", ""))
            if parents:
                if not isinstance(store, ChunkStore):
                    raise StoreError(
                        "parent-child chunking keeps its parents in the file store only; ingest into a store directory, "
                        "or choose another --chunker for a PostgreSQL store"
                    )
                after = store.replace_doc_chunks(doc_id, chunks, valid_as_of=valid_as_of, parents=parents)
            else:
                after = store.replace_doc_chunks(doc_id, chunks, valid_as_of=valid_as_of)
            if before is None:
                summary.new += 1
            elif after == before:
                summary.unchanged += 1
            elif was_active:
                summary.changed += 1
            else:
                summary.new += 1  # a retracted document that came back
        if retract_missing:
            if summary.skipped:
                summary.notes.append(f"retraction skipped: {summary.skipped} item(s) failed to load")
            else:
                owned = _owned_doc_ids(store)
                for doc_id in owned:
                    if doc_id not in seen:
                        store.replace_doc_chunks(doc_id, [])
                        summary.retracted += 1
                mine = set(owned)
                kept = [d for d in store.doc_ids() if d not in seen and d not in mine]
                if kept:
                    summary.notes.append(
                        f"{len(kept)} document(s) written by other writers (the vector store) are not in these "
                        "paths and were kept: ingest retracts only the documents it wrote"
                    )
                if summary.retracted > 1 and 2 * summary.retracted > active_before:
                    summary.notes.append(
                        f"this run retracted {summary.retracted} of the store's {active_before} documents (those "
                        "not among its paths); ingest every folder of the store in one command, or pass "
                        "--keep-missing to keep them"
                    )
        summary.store_documents = len(store.doc_ids())
        summary.store_chunks = store.count_chunks()


def _owned_doc_ids(store: DocumentStore) -> list[str]:
    """The documents ingest may retract: those it owns (``doc_ids`` with ``owner=``, in both backends; a document
    another writer — the vector store — created and ingest never wrote is not)."""
    return store.doc_ids(owner=INGEST_WRITER)


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
) -> IngestSummary:
    """Load, chunk and store a corpus under ``store_dir``, then (re)build its BM25 index.

    Args:
        paths: files or folders (``.md``, ``.txt``, ``.jsonl``; see ``CorpusLoader``).
        store_dir: the store directory (created if missing), or a ``postgresql://`` URL: the same versioned store
            and search tables in PostgreSQL (:mod:`langchain_ragspine.postgres`, ``docs/postgres.md``).
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
            ``None``: the store's recorded setting (off for a new store).  Changing it rebuilds the BM25 and vector
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
            hold=lambda store: held.enter_context(_writer_lock(store, lock_timeout)),
        )


def _writer_lock(store: str | Path, lock_timeout: float | None) -> contextlib.AbstractContextManager[object]:
    """The writer lock of a store directory (:func:`store_writer`) or of a ``postgresql://`` store
    (:func:`~langchain_ragspine.backends.postgres.lock.writer_lock`)."""
    if is_postgres_url(store):
        from langchain_ragspine.backends.postgres.lock import writer_lock as pg_writer_lock

        return pg_writer_lock(str(store), timeout=lock_timeout)
    return store_writer(Path(store), lock_timeout=lock_timeout)


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
    hold: Callable[[str | Path], object] = lambda store: None,
) -> IngestSummary:
    """:func:`ingest`; ``hold(store)`` takes the store's writer lock (a store directory's, or a ``postgresql://``
    store's) until :func:`ingest` returns (after the arguments are checked, before the store is first read)."""
    t0 = time.perf_counter()
    # only the settings this ingest uses are read (and checked): a bad RAGSPINE_K cannot break it
    chunk_size = configured_setting("chunk_size") if chunk_size is None else chunk_size
    chunk_overlap = configured_setting("chunk_overlap") if chunk_overlap is None else chunk_overlap
    tokenizer = configured_setting("tokenizer") if tokenizer is None else tokenizer
    # checked before the store is touched, whichever build uses it (a new store's, or a rebuild after the writes)
    workers = configured_setting("workers") if workers is None else workers
    bm25_parallel.resolve_workers(workers, 0)
    mode = resolve_mode(mode)
    use = get_mode(mode).embedding
    emb = None if use == "none" else resolve_embedding(embedding)
    if emb is None and use == "required":
        raise ValueError(needs_embedding_message(mode))
    name = tokenizer_name(tokenizer)
    if name is None:
        raise ValueError(f"ingest needs a named tokenizer (it is persisted with the index), got {tokenizer!r}")
    postgres = is_postgres_url(store_dir)
    if postgres and str(chunker or configured_setting("chunker") or "").strip().lower() == "parent_child":
        raise ValueError(  # before the store is touched (its tokenizer, its vectors) or a file is read
            "chunker 'parent_child' is not supported on a PostgreSQL store (its parents are kept by a store directory's "
            "chunk store only): ingest into a store directory (--store DIR), or choose another --chunker"
        )
    root = Path(store_dir)
    # one writer at a time, from the first read of the store (its chunker, index state, document count) to the
    # last write (index.json; a PostgreSQL store's last commit): so two ingests run in order, each against the store
    # the other left
    hold(str(store_dir).strip() if postgres else root)
    splitter, chunker_config = _chunker_for(root, chunker, chunk_size, chunk_overlap, embedding, emb)
    # read once: the writer lock is held from here to the last write of index.json
    state, damaged = _index_state(root) if not postgres else ({}, None)
    recorded = state.get("contextual")
    wanted_header = recorded if contextual is None else dict(CONTEXTUAL_DEFAULT) if contextual else None
    header = _header(wanted_header)
    if postgres and wanted_header is not None:
        raise ValueError("contextual headers are not supported on a PostgreSQL store yet; ingest without --contextual")
    loader = CorpusLoader(paths, on_error=on_error)
    # every file is read and checked before the store is touched
    docs = list(progress_bar(loader.lazy_load(), desc="load", unit="doc", show=progress))
    active_before = _active_document_count(str(store_dir) if postgres else root)
    # what this run may retract: ingest's own documents (the vector store's are never retracted by an ingest)
    owned_before = _active_document_count(str(store_dir) if postgres else root, owner=INGEST_WRITER)
    # a new store's BM25 index is built from exactly this run's chunks: tokenize them while chunking
    streaming = None if postgres or active_before else _StreamingPrefetch(docs, header, name, workers)
    split = []
    for i, doc in enumerate(progress_bar(docs, desc="chunk", unit="doc", show=progress)):
        split.append((doc, *_split(splitter, doc)))
        if streaming is not None:
            streaming.chunked(i, split[-1][1])
    show = progress  # None: a bar on a terminal, else a line per phase every ~10 s (langchain_ragspine.progress)
    summary = IngestSummary(
        documents=len(docs),
        chunks=sum(len(chunks) for _, chunks, _ in split),
        skipped=len(loader.stats.skipped),
        empty=len(loader.stats.empty),
    )
    if not docs and retract_missing and not summary.skipped and not allow_empty and owned_before:
        empty = f" ({summary.empty} empty file(s) skipped)" if summary.empty else ""
        raise StoreError(
            f"refusing to ingest: the paths yielded 0 documents{empty}, which would retract all {owned_before} "
            "active documents of this store; check the paths, or pass --allow-empty (Python: allow_empty=True) to "
            "empty the store, or --keep-missing to keep its documents",
            path=redact_url(str(store_dir)) if postgres else root,
        )
    spec = _spec_name(embedding if isinstance(embedding, str) or embedding is None else None)
    if postgres:
        from langchain_ragspine.postgres import ingest_postgres

        ingest_postgres(
            str(store_dir).strip(), split, summary, tokenizer=name, embedding=emb, spec=spec,
            retract_missing=retract_missing, active_before=owned_before, progress=show,
        )
        summary.seconds = time.perf_counter() - t0
        return summary
    prepare_store_dir(root)
    all_chunks = [c for _, chunks, _ in split for c in chunks]
    if header is not None:  # embedded (and keyed) by the index text with its contextual header
        all_chunks = list(header.transform_documents(all_chunks))
    if streaming is not None:  # registered with the prefetch scope when it started; closed when ingest() returns
        streaming.finish()
    if emb is not None:
        # Probe the model with one batch BEFORE the store changes: an unreachable or broken model leaves the chunk
        # store and its indexes exactly as they were (the cache only gains vectors).
        summary.embedded = _warm_file_cache(root, emb, all_chunks, show, limit=PROBE_CHUNKS)
    if damaged is not None:  # rewritten below from this run's settings
        summary.notes.append(
            f"{root / INDEX_STATE} was not a valid index record ({_damage(damaged)}); rewritten"
            + ("" if contextual is not None else " (contextual headers it may have recorded are off: pass "
               "--contextual to switch them on)")
        )
    with ChunkStore(root / CHUNKS_DB) as store:
        if store.chunker != chunker_config:
            store.set_chunker(chunker_config)
        write_documents(store, split, summary, retract_missing=retract_missing, active_before=owned_before,
                        progress=show)
        with _after_commit(root, store, summary, f"the embedding cache {root / EMBEDDING_CACHE}", then=_PRUNE_NEXT):
            _prune_embedding_cache(root, store, header)
        wanted = {"generation": store.generation, "tokenizer": name, "tokenizer_version": tokenizer_version(name)}
        current = all(state.get(key) == value for key, value in wanted.items())
        current = current and state.get("contextual") == wanted_header
        # a saved index that fails its checks (damaged, edited, no checksum) is rewritten even when nothing changed
        if not current or _load_saved_index(root, k=DEFAULT_K, generation=store.generation)[0] is None:
            # no generation: the saved index is stale, and search rebuilds it with this run's tokenizer and headers
            pending = {key: value for key, value in state.items() if key != "contextual"}
            pending.update(wanted, generation=None, **({} if wanted_header is None else {"contextual": wanted_header}))
            then = _BM25_NEXT if emb is None else f"{_BM25_NEXT}; {_NOT_EMBEDDED}"
            with _after_commit(root, store, summary, f"the saved BM25 index {root / BM25_DIR}", then=then,
                               pending=pending):
                discard_unsaved(root / BM25_DIR, RETRIEVER_CONFIG, BM25_LAYOUT)  # a damaged index of this store: rebuilt
                build_bm25(store, tokenizer=name, header=header, workers=workers).save(
                    root / BM25_DIR, generation=store.generation
                )
            summary.index_rebuilt = True
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
            # BM25 first: the store and its BM25 index are saved before the rest is embedded, so a run killed while
            # embedding leaves them searchable (``auto`` falls back to BM25 until the vectors are complete) and the
            # next run embeds only what the cache lacks.
            spec = _spec_name(embedding if isinstance(embedding, str) or embedding is None else None)
            saved = state.get("vector") or {}
            if saved.get("generation") != store.generation or saved.get("model_key") != model_key_for(emb):
                # records the model, so search knows vectors are expected and falls back with a warning
                state["vector"] = {"generation": None, "model_key": model_key_for(emb), "embedding": spec}
            with _after_commit(root, store, summary, f"the index record {root / INDEX_STATE}",
                               then=f"{_BM25_NEXT}; {_NOT_EMBEDDED}"):
                write_index_state(root, state)
            with _after_commit(root, store, summary, f"the embedding cache {root / EMBEDDING_CACHE}",
                               then=_EMBED_NEXT):
                summary.embedded += _warm_file_cache(root, emb, all_chunks, show)
            with _after_commit(root, store, summary, f"the saved vector index {root / VECTOR_DIR}",
                               then=_VECTOR_NEXT):
                dense = _refresh_dense(root, store, emb, state, spec=spec, progress=show)
            summary.embedded += dense.last_embedded  # 0: the cache was warmed above
            summary.dense = dense.resolved_model_key
        elif state.pop("vector", None) is not None or damaged is not None:
            shutil.rmtree(root / VECTOR_DIR, ignore_errors=True)  # no longer matches; the embedding cache stays
        with _after_commit(root, store, summary, f"the index record {root / INDEX_STATE}"):
            write_index_state(root, state)
    summary.seconds = time.perf_counter() - t0
    return summary


class _StreamingPrefetch:
    """Hands the BM25 index texts of a new store's chunks to the tokenizing processes while ingest is still
    chunking: in the order :func:`build_bm25` reads them from a store holding only these documents (by ``doc_id``,
    stably, then position), each document's as soon as it and every document before it in that order are chunked
    (at once when the loader's order is that order, as for a folder).  The batches are registered with
    :func:`~langchain_ragspine.backends.directory.bm25_parallel.prefetch` at once (so the ingest's scope closes them however it
    ends); the build takes them only after :meth:`finish`, and only if its texts are exactly these."""

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


def _split(splitter: ParagraphTextSplitter, doc: Document) -> tuple[list[Document], list[Document] | None]:
    """``(chunks, parents)`` of one document (``parents`` is ``None`` unless the splitter makes them)."""
    split_with_parents = getattr(splitter, "split_with_parents", None)
    if split_with_parents is None:
        return splitter.split_documents([doc]), None
    parents, chunks = split_with_parents([doc])
    return chunks, parents


def _recorded_chunker(root: Path) -> tuple[dict[str, Any] | None, bool]:
    """``(the store's chunker record, whether it has active documents)``; ``(None, False)`` without a store."""
    if not _has_chunk_store(root):
        return None, False
    with ChunkStore(root / CHUNKS_DB, read_only=True) as store:
        return store.chunker, bool(store.doc_ids())


def _chunker_for(
    root: Path,
    name: str | None,
    chunk_size: int,
    chunk_overlap: int,
    embedding: str | Embeddings | None,
    emb: Embeddings | None,
) -> tuple[ParagraphTextSplitter, dict[str, Any]]:
    """The splitter of this ingest and its configuration, checked against the store's record.

    Raises:
        StoreError: the store was chunked with another configuration.
        ValueError: an unknown chunker; ``semantic`` without an embedding model.
    """
    recorded, has_documents = _recorded_chunker(root)
    if name is None:
        name = configured_setting("chunker") or (recorded or {}).get("name") or DEFAULT_CHUNKER
    model = (emb if emb is not None else resolve_embedding(embedding)) if name == "semantic" else None
    splitter, config = make_chunker(name, chunk_size=chunk_size, chunk_overlap=chunk_overlap, embedding=model)
    why = chunker_mismatch(recorded, config, has_documents=has_documents)
    if why is not None:
        raise StoreError(
            f"refusing to ingest: {why}; one store never mixes two chunkers — ingest into a new --store directory "
            "(or delete this one) to change how documents are chunked",
            path=root,
        )
    return splitter, config


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
        retriever, why = _load_saved_index(root, k=k, generation=store.generation)
        if retriever is not None:
            return retriever
        if damaged is not None:
            why = f"{why}; and {INDEX_STATE} is invalid, so it is rebuilt with the default tokenizer"
    elif not state:
        _warn_stale(_never_indexed(root, store, "BM25 index"))
        return build_bm25(store, tokenizer="auto", k=k, header=None)
    else:
        why = _lag(state.get("generation"), store)
    _warn_stale(
        f"{root / BM25_DIR}: saved BM25 index not used ({why}); rebuilt in memory from the chunk store, so this "
        f"search sees every document — {_rewrite_advice(root)}"
    )
    return build_bm25(
        store, tokenizer=str(state.get("tokenizer") or "auto"), k=k, header=_header(state.get("contextual"))
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
    header = _header(state.get("contextual"))
    covered, lacking = _vector_coverage(root, store, emb, header)
    missing = len(lacking)
    if missing:  # a read path never embeds: the ingest does
        note = _writer_note(root)
        total = len(covered) + missing
        if note is None:
            raise StoreError(
                f"{missing} of {total} chunks have no vector of {key} yet ({_lacking_why(lacking)}); run `ragspine "
                "ingest` of the store's corpus again to embed them (documents other writers added are kept)",
                path=root,
            )
        _warn_stale(
            f"{root / VECTOR_DIR}: {note}: {missing} of {total} chunks of the store's current version have no "
            f"vector of {key} yet, so the vector channel searches the other {len(covered)} (from cached vectors) "
            "until it has finished"
        )
    elif not state and damaged is None:
        _warn_stale(_never_indexed(root, store, "vector index", built_from="cached vectors"))
    else:
        _warn_stale(
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
    if not _has_chunk_store(root):
        note = _writer_note(root)
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
        note = _writer_note(root)
        if note is None or (root / INDEX_STATE).exists():
            raise
        raise StoreError(f"the chunk store cannot be read yet: {note}{creating}", path=root) from e


class StoreSource(StoreBackedSource[ChunkStore]):
    """The channels of a store directory, for the mode registry (:mod:`langchain_ragspine.pipeline.modes`).

    Use it as a context manager (it holds the chunk store open, read-only)::

        with StoreSource("store") as source:
            retriever = build_retriever("hybrid", source, k=10)

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

    def _open(self) -> ChunkStore:
        store = _open_chunk_store(self.root)
        self._state, self._damaged = _index_state(self.root)
        if self._damaged is not None:
            _warn_stale(
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

    def documents(self) -> list[Document]:
        """The store's active chunks (with ``metadata["index_text"]`` when the store has contextual headers)."""
        return _store_documents(self.store, _header(self._state.get("contextual")))

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

    def bm25(self, *, k: int, tokenizer: str | None = None) -> BaseRetriever:
        """The saved BM25 index (``tokenizer=None``), or one built in memory with ``tokenizer`` (and the store's
        contextual headers)."""
        if tokenizer is not None:
            return build_bm25(self.store, tokenizer=tokenizer, k=k, header=_header(self._state.get("contextual")))
        return _open_bm25(self.root, self.store, self._state, k=k, damaged=self._damaged)

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
                    f"is invalid ({_damage(self._damaged)}); {_rewrite_advice(root)} (with the --embedding it "
                    "was built with), or search with --embedding SPEC",
                    path=root / INDEX_STATE,
                )
            note = _writer_note(root)
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
            _warn_stale(f"dense channel unavailable ({e}); searching with BM25 only")
            return None


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
    ``candidate_k`` is its old name, deprecated; ``options`` such as ``alpha`` or ``fusion`` go to it); ``auto`` —
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
    if is_postgres_url(store_dir):  # its retrievers read the tables at every call: current already
        with open_source(store_dir, embedding=embedding) as source:
            return build_retriever(mode, source, k=k, fetch_k=fetch_k, **options)
    root = Path(store_dir)
    _open_chunk_store(root).close()  # no store (or one being created): open_retriever's own error, at once
    models: dict[str, Embeddings | None] = {}  # a reload reuses the query encoder instead of loading it again

    def build() -> BaseRetriever:
        with StoreSource(root, embedding=embedding, models=models) as source:
            check_store_chunker(source.store, source.root)
            return build_retriever(mode, source, k=k, fetch_k=fetch_k, **options)

    live = LiveStoreRetriever(chunk_store=root / CHUNKS_DB, factory=build, k=k, watch=(root / INDEX_STATE,))
    live.refresh()  # the first build, here: its errors are open_retriever's
    return live


def open_source(
    store: str | os.PathLike[str], *, embedding: str | Embeddings | None = None
) -> StoreSource | PostgresSource:
    """The :class:`~langchain_ragspine.pipeline.modes.RetrieverSource` of a store: :class:`StoreSource` for a directory,
    :class:`~langchain_ragspine.postgres.PostgresSource` for a ``postgresql://`` URL.  Use it as a context manager.

    Raises:
        ImportError: a URL, and psycopg is not installed (names the ``postgres`` extra).
    """
    if is_postgres_url(store):
        from langchain_ragspine.postgres import PostgresSource

        return PostgresSource(str(store), embedding=embedding)
    return StoreSource(store, embedding=embedding)


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


def result_record(rank: int, doc: Document) -> dict[str, Any]:
    """The JSON object ``ragspine search --json`` prints for one result (``scores`` holds ``rerank`` only when a
    reranker scored it)."""
    md = dict(doc.metadata)
    scores = md.pop("scores", None) or {}
    return {
        "rank": rank,
        "text": doc.page_content,
        "doc_id": md.get("doc_id"),
        "title": md.get("title"),
        "chunk_id": md.get("chunk_id"),
        "source_locator": md.get("source_locator"),
        "start_index": md.get("start_index"),
        "end_index": md.get("end_index"),
        "sensitivity": md.get("sensitivity"),
        "metadata": md,
        "scores": {"bm25": scores.get("bm25"), "vector": scores.get("vector"), "fused": scores.get("fused")}
        | ({"rerank": scores["rerank"]} if scores.get("rerank") is not None else {}),
    }
