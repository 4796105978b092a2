"""The stages of an ingest, each a small function both store backends run: load → split → write versions →
lexical index → embed.

::

    docs, loader = load_documents(["corpus"], on_error="raise", progress=False)
    split = split_documents(splitter, docs, progress=False)     # [(document, chunks, parents | None), …]
    write_documents(store, split, summary, retract_missing=True, active_before=0, progress=False)
    bm25 = build_bm25(store, tokenizer="auto")                   # the lexical index of the store's active chunks
    warm_embedding_cache(cache, embeddings, chunks, progress=False)  # embed what the cache lacks (embeddings.cache)

:func:`~langchain_ragspine.pipeline.ingest.ingest` composes them for a store directory (where it also saves the
derived files: ``bm25/``, ``vector/``, ``index.json``) and hands a PostgreSQL store to
:func:`~langchain_ragspine.pipeline.ingest.ingest_postgres`, which runs the same write-versions and embed stages (its lexical
index is the postings each version writes).  :class:`IngestSummary` is what a run reports.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from langchain_core.documents import Document

from langchain_ragspine.arguments import DEFAULT_K
from langchain_ragspine.backends.directory.chunk_store import INGEST_WRITER, ChunkStore
from langchain_ragspine.backends.directory.layout import BM25_DIR
from langchain_ragspine.configured import configured_setting
from langchain_ragspine.document_loaders import CorpusLoader
from langchain_ragspine.errors import StoreError
from langchain_ragspine.progress import progress_bar
from langchain_ragspine.retrievers.bm25 import BM25Retriever
from langchain_ragspine.text_splitters import ParagraphTextSplitter
from langchain_ragspine.text_splitters.contextual import DEFAULT_HEADER_FIELDS, ContextualHeader

__all__ = [
    "CONTEXTUAL_DEFAULT",
    "DocumentStore",
    "IngestSummary",
    "Split",
    "build_bm25",
    "contextual_header",
    "load_documents",
    "load_saved_bm25",
    "owned_doc_ids",
    "split_document",
    "split_documents",
    "store_documents",
    "write_documents",
]

#: One loaded document and its chunks, with its parents when the splitter makes them (parent-child chunking).
Split = tuple[Document, list[Document], list[Document] | None]


@dataclass
class IngestSummary:
    """What one :func:`~langchain_ragspine.pipeline.ingest.ingest` run did.

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


#: The ``index.json`` record of contextual headers switched on with the default fields (see
#: :func:`~langchain_ragspine.pipeline.ingest.ingest`).
CONTEXTUAL_DEFAULT: Mapping[str, Any] = {"fields": list(DEFAULT_HEADER_FIELDS), "separator": " · "}


def contextual_header(record: Any) -> ContextualHeader | None:
    """The :class:`ContextualHeader` an ``index.json`` ``contextual`` record describes (``None``: off)."""
    if not isinstance(record, Mapping):
        return None
    return ContextualHeader(list(record.get("fields") or DEFAULT_HEADER_FIELDS),
                            separator=str(record.get("separator", " · ")))


# -- load -------------------------------------------------------------------------------------------------------
def load_documents(
    paths: str | os.PathLike[str] | Sequence[str | os.PathLike[str]],
    *,
    on_error: Literal["raise", "skip"],
    progress: bool | None,
) -> tuple[list[Document], CorpusLoader]:
    """Stage 1, load: every document of ``paths`` (files or folders, see
    :class:`~langchain_ragspine.document_loaders.CorpusLoader`), read and checked before any store is touched, with
    a ``load`` progress bar; and the loader, whose ``stats`` count the skipped and empty files.

    Raises:
        RagSpineError: a bad file, with ``on_error="raise"``.
    """
    loader = CorpusLoader(paths, on_error=on_error)
    return list(progress_bar(loader.lazy_load(), desc="load", unit="doc", show=progress)), loader


# -- split ------------------------------------------------------------------------------------------------------
def split_document(splitter: ParagraphTextSplitter, doc: Document) -> tuple[list[Document], list[Document] | None]:
    """``(chunks, parents)`` of one document (``parents`` is ``None`` unless the splitter makes them)."""
    split_with_parents = getattr(splitter, "split_with_parents", None)
    if split_with_parents is None:
        return splitter.split_documents([doc]), None
    parents, chunks = split_with_parents([doc])
    return chunks, parents


def split_documents(
    splitter: ParagraphTextSplitter,
    docs: Sequence[Document],
    *,
    progress: bool | None,
    chunked: Callable[[int, list[Document]], None] | None = None,
) -> list[Split]:
    """Stage 2, split: ``(document, chunks, parents)`` of each document, in order, with a ``chunk`` progress bar;
    ``chunked(i, chunks)`` is called as soon as document ``i`` is split (a new store's BM25 tokenization starts
    then)."""
    split: list[Split] = []
    for i, doc in enumerate(progress_bar(docs, desc="chunk", unit="doc", show=progress)):
        split.append((doc, *split_document(splitter, doc)))
        if chunked is not None:
            chunked(i, split[-1][1])
    return split


# -- write versions ---------------------------------------------------------------------------------------------
class DocumentStore(Protocol):
    """The chunk-store methods :func:`write_documents` uses: :class:`~langchain_ragspine.backends.directory.chunk_store.ChunkStore` and
    :class:`~langchain_ragspine.backends.postgres.chunk_store.PostgresChunkStore` have them."""

    def current_version(self, doc_id: str) -> int | None: ...

    def count_chunks(self, *, doc_id: str | Sequence[str] | None = None, include_inactive: bool = False) -> int: ...

    def replace_doc_chunks(self, doc_id: str, chunks: Any, valid_as_of: Any = "") -> int: ...

    def doc_ids(self, *, include_retracted: bool = False, owner: str | None = None) -> list[str]: ...


def write_documents(
    store: DocumentStore,
    split: Sequence[Split],
    summary: IngestSummary,
    *,
    retract_missing: bool,
    active_before: int,
    progress: bool | None,
) -> None:
    """Stage 3, write versions: write each loaded document's chunks as its new version (all or nothing per
    document; unchanged ones are no-ops), retract the store's documents absent from ``split`` (unless
    ``retract_missing`` is false or a file failed to load), and count the outcomes and the store's size into
    ``summary``.  Shared by both backends; ``split`` holds ``(document, chunks, parents)``, and parents
    (parent-child chunking) are written only when a document has some.  A :class:`ChunkStore` commits the
    documents in batches (:meth:`~langchain_ragspine.backends.directory.chunk_store.ChunkStore.write_batch`): the
    same rows, far fewer commits.

    Raises:
        StoreError: parents for a store that is not a :class:`ChunkStore` (a PostgreSQL store keeps none)."""
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
                owned = owned_doc_ids(store)
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


def owned_doc_ids(store: DocumentStore) -> list[str]:
    """The documents ingest may retract: those it owns (``doc_ids`` with ``owner=``, in both backends; a document
    another writer — the vector store — created and ingest never wrote is not)."""
    return store.doc_ids(owner=INGEST_WRITER)


# -- lexical index ----------------------------------------------------------------------------------------------
def store_documents(store: ChunkStore, header: ContextualHeader | None = None) -> list[Document]:
    """The store's active chunks as documents, with ``metadata["index_text"]`` when ``header`` is given."""
    docs = [c.to_document() for c in store.iter_chunks()]
    return docs if header is None else list(header.transform_documents(docs))


def build_bm25(
    store: ChunkStore,
    *,
    tokenizer: str = "auto",
    k: int = DEFAULT_K,
    header: ContextualHeader | None = None,
    workers: int | None = None,
) -> BM25Retriever:
    """Stage 4, lexical index: a :class:`BM25Retriever` over the store's active chunks (it leaves RESTRICTED ones
    out of the index), indexing each chunk with ``header`` (a :class:`ContextualHeader`) when given, tokenized by
    ``workers`` processes (default ``RAGSPINE_WORKERS``, else automatic: every usable core for a large store; the
    index is the same)."""
    workers = configured_setting("workers") if workers is None else workers
    return BM25Retriever.from_documents(store_documents(store, header), k=k, tokenizer=tokenizer, workers=workers)


def load_saved_bm25(root: Path, *, k: int, generation: int) -> tuple[BM25Retriever | None, str]:
    """The saved BM25 index of store directory ``root`` (``root/bm25``), verified against its checksums and built
    from chunk-store ``generation``, or ``(None, why)`` when it is missing, unreadable, damaged, edited, from
    another generation, or has no checksum (saved before checksums were recorded): ``why`` names the file."""
    try:
        return BM25Retriever.load(root / BM25_DIR, k=k, generation=generation), ""
    except (StoreError, OSError, ValueError, EOFError, KeyError, TypeError) as e:
        return None, str(e)
