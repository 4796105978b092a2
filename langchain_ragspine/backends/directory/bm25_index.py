"""The BM25 index: bm25s's eager score matrix built from tokenized texts, and its persistence (no pickle).

Okapi BM25 (Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009) in Lucene's
variant, ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))`` and ``tf' = tf / (tf + k1 * (1 - b + b * dl / avgdl))``,
precomputed into a sparse term-document matrix, as `bm25s <https://github.com/xhluca/bm25s>`_ does (Lù, "BM25S:
Orders of magnitude faster lexical search via eager sparse scoring", 2024).  bm25s keeps tokenization, scoring and
selection apart; this module is the indexing side: :func:`build_bm25_index` turns texts into a ``bm25s.BM25``
(scoring and persistence are bm25s's), :func:`save_bm25_index` / :func:`load_bm25_index` write and read an index
directory.  :class:`~langchain_ragspine.retrievers.bm25.BM25Retriever` is the retriever over it.

An index directory (written into a temporary sibling that then replaces it, see
:func:`~langchain_ragspine.backends.directory.files.atomic_dir`):

* ``retriever.json`` — format ``"ragspine-bm25/1"``, the retriever's ``k``, ``k1``, ``b`` and ``filter``, the
  tokenizer's registered name (``null`` for a custom callable) and :func:`~langchain_ragspine.tokenizers.tokenizer_version`,
  ``num_docs``, and ``empty_index`` (no token at all: no arrays);
* ``docs.jsonl`` — the indexed documents, one JSON object per line;
* ``bm25s/`` — bm25s's own files: ``data`` / ``indices`` / ``indptr`` ``.npy`` arrays, ``vocab.index.json``,
  ``params.index.json``;
* ``manifest.json`` — written last: the size and SHA-256 of every other file and the chunk-store generation the
  index was built from (``null`` outside a store), see :func:`~langchain_ragspine.backends.directory.files.write_manifest`.

:func:`load_bm25_index` trusts nothing it has not checked, so a damaged or edited index is an error naming the
file, never a wrong answer or a numpy error at query time:

1. the manifest: every file present with its recorded size and SHA-256, the generation the caller asks for
   (tampering and damage: a truncated array, swapped ``docs.jsonl`` rows, an edited vocabulary, a missing file);
2. the structure, which holds even for a manifest rewritten by hand: array dtypes and shapes agree with each other,
   with the vocabulary and with ``docs.jsonl`` (``indptr`` one entry per term plus one, rising from 0 to the
   number of postings, every document id below the number of documents, every score positive and finite, the
   vocabulary's ids ``0 .. n-1`` once each, bm25s's parameters those of ``retriever.json``);
3. the documents against the columns (what covers a *bug* that misaligns rows, which no checksum sees): the
   documents at :data:`SPOT_CHECK_DOCS` evenly spread positions (all of them in a smaller index) are tokenized
   again with the tokenizer ``retriever.json`` names (not for a custom callable, which is not saved), and the
   terms the index gives each must be exactly its tokens' terms (one pass over the postings).

An index saved before manifests existed has no checksum: it is not trusted (:attr:`SavedBM25Index.verified` is
false and its arrays are not read) and the caller rebuilds it from the documents or the chunk store.
"""

from __future__ import annotations

import functools
import json
import os
from array import array
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.documents import Document

from langchain_ragspine._closing import Closing
from langchain_ragspine.arguments import check_int
from langchain_ragspine.backends.directory.files import (
    MANIFEST_FILE,
    RETRIEVER_CONFIG,
    atomic_dir,
    layout,
    read_config,
    read_documents,
    read_manifest,
    write_documents,
    write_manifest,
)
from langchain_ragspine.errors import StoreError
from langchain_ragspine.text import index_text
from langchain_ragspine.tokenizers import Tokenizer, get_tokenizer, tokenizer_name, tokenizer_version

__all__ = ["FORMAT", "SavedBM25Index", "TermPostings", "build_bm25_index", "load_bm25_index", "save_bm25_index"]

#: ``format`` of ``retriever.json``.
FORMAT = "ragspine-bm25/1"
CONFIG_FILE = RETRIEVER_CONFIG
DOCS_FILE = "docs.jsonl"
ARRAYS_DIR = "bm25s"
#: bm25s's files in ``bm25s/`` that :func:`load_bm25_index` reads.
ARRAY_FILES = ("params.index.json", "vocab.index.json", "data.csc.index.npy", "indices.csc.index.npy",
               "indptr.csc.index.npy")
#: Everything :func:`save_bm25_index` writes into its directory (the bm25s arrays directory as a whole).
SAVE_LAYOUT = layout(CONFIG_FILE, DOCS_FILE, ARRAYS_DIR, MANIFEST_FILE)
#: Documents whose terms :func:`load_bm25_index` checks against the index's columns (evenly spread; all of them
#: in an index of fewer documents).
SPOT_CHECK_DOCS = 32


def build_bm25_index(
    texts: Iterable[str],
    tokenize: Tokenizer,
    *,
    k1: float,
    b: float,
    memory_postings: int | None = None,
    workers: int | None = 1,
) -> Any:
    """A bm25s Lucene index over ``texts``, or ``None`` when there is no token at all.

    Documents are tokenized one at a time and reduced at once to (term id, tf) postings (:class:`TermPostings`), so
    the corpus is never held as token strings (at 100k chunks of ~400 CJK chars that is ~80M Python strings) nor as
    bm25s's per-document token-id lists; past ``memory_postings`` (default :data:`TermPostings.MEMORY_POSTINGS`)
    the postings go to a temporary file, so the build holds little more than the finished index.  The postings go
    to bm25s through its documented hook: ``BM25.index`` takes a ``Tokenized``-shaped ``(ids, vocab)`` corpus and
    calls ``build_index_from_ids``, which our subclass overrides to compute the eager score matrix with numpy
    (:meth:`TermPostings.lucene_scores`) in bm25s's own layout.  bm25s then does the scoring and the (pickle-free)
    persistence.  ``tests/unit_tests/retrievers/test_bm25.py`` checks the matrix equals bm25s's own build.

    ``workers`` (default 1: this process) tokenizes a registered tokenizer's texts in that many processes, ``0`` /
    ``None`` as many as :func:`~langchain_ragspine.backends.directory.bm25_parallel.resolve_workers` chooses (every usable core
    for a large corpus); the index is the same, bit for bit (:mod:`~langchain_ragspine.backends.directory.bm25_parallel`).  A
    custom tokenizer callable is always run in this process.

    Raises:
        ValueError / TypeError: a bad ``workers`` (see :func:`~langchain_ragspine.backends.directory.bm25_parallel.resolve_workers`).
    """
    from langchain_ragspine.backends.directory import bm25_parallel

    name = tokenizer_name(tokenize)
    texts = texts if isinstance(texts, Sequence) else list(texts)
    batches = bm25_parallel.take_prefetched(texts, name)
    if batches is None and name is not None:
        # a registered tokenizer is counted batch by batch (in this process when n == 1): the same postings as
        # token by token, with less CPU for the n-gram tokenizers (bm25_parallel.count_batch)
        n = bm25_parallel.resolve_workers(workers, len(texts)) if workers != 1 else 1
        batches = bm25_parallel.CountedBatches(texts, name, workers=n)
    with TermPostings(memory_postings=memory_postings) as postings:
        if batches is None:
            for text in texts:
                postings.add(tokenize(text))
        else:
            if batches._pool is not None:
                _postings_bm25_class()  # import bm25s while the workers tokenize
            for batch in batches:
                postings.add_counted(batch.term_list(), batch.term_ids, batch.tfs, batch.doc_len, batch.doc_terms)
        if not postings.vocab:
            return None
        index = _postings_bm25_class()(k1=k1, b=b, method="lucene")
        index.index(postings, create_empty_token=False, show_progress=False)
        return index


class TermPostings(Closing):
    """A corpus as (term id, term frequency) postings, added one document at a time.

    Memory is two C ints per distinct term of each document plus two per document (a token list lives only
    during :meth:`add`).  Postings are kept in blocks of whole documents; once more than ``memory_postings`` are
    held, every block goes to an anonymous temporary file instead (8 bytes a posting on disk, read back block by
    block), so building the index of a million chunks needs the finished matrix plus one block in memory.  It has
    the shape bm25s's ``BM25.index`` reads from a ``bm25s.tokenization.Tokenized`` (attributes :attr:`ids` and
    :attr:`vocab`), so it can be handed to it directly; only the subclass made by :func:`build_bm25_index` knows
    how to index it.  Use it as a context manager (or call :meth:`close`) to delete the temporary file at once.

    Args:
        memory_postings: postings held in memory before spilling to a temporary file (default
            :data:`MEMORY_POSTINGS`, 4M = 32 MB); an ``int >= 0``, ``0`` spills every block.
        block_postings: postings per block (default :data:`BLOCK_POSTINGS`); a block ends at a document boundary.

    Attributes:
        vocab: term → id, ids in order of first occurrence.

    Raises:
        ValueError: ``memory_postings < 0`` or ``block_postings < 1``.  TypeError: either is not an int.
    """

    #: Default postings held in memory before the rest go to a temporary file.
    MEMORY_POSTINGS = 1 << 22
    #: Default postings per block.
    BLOCK_POSTINGS = 1 << 18

    def __init__(self, *, memory_postings: int | None = None, block_postings: int | None = None) -> None:
        memory = check_int(memory_postings, "memory_postings", minimum=0, allow_none=True)
        block = check_int(block_postings, "block_postings", allow_none=True)
        self._memory_postings = self.MEMORY_POSTINGS if memory is None else memory
        self._block_postings = self.BLOCK_POSTINGS if block is None else block
        self.vocab: dict[str, int] = {}
        self._terms = array("i")  # term id of each posting of the open block, document by document
        self._tfs = array("i")  # term frequency of each posting of the open block
        self._doc_len = array("q")  # tokens per document
        self._doc_terms = array("q")  # postings per document
        self._block_first_doc = 0  # first document of the open block
        # closed blocks: (first doc, end doc, terms, tfs) in memory, or (first doc, end doc, file offset, postings)
        self._blocks: list[tuple[int, int, Any, Any]] = []
        self._held = 0  # postings of the closed blocks held in memory
        self._df = np.zeros(0, dtype=np.int64)  # document frequency of each term id, over the closed blocks
        self._spill: Any = None  # the temporary file, once one is needed

    def close(self) -> None:
        """Delete the temporary file (if any); the postings in it are gone."""
        if self._spill is not None:
            self._spill.close()
            self._spill = None

    def add(self, tokens: Sequence[str]) -> None:
        """Append one document given as its tokens."""
        vocab = self.vocab
        setdefault = vocab.setdefault
        counts = Counter(tokens)
        self._terms.extend([setdefault(t, len(vocab)) for t in counts])
        self._tfs.extend(counts.values())
        self._doc_len.append(len(tokens))
        self._doc_terms.append(len(counts))
        if len(self._terms) >= self._block_postings:
            self._close_block()

    def add_counted(
        self, terms: Sequence[str], term_ids: np.ndarray, tfs: np.ndarray, doc_len: np.ndarray, doc_terms: np.ndarray
    ) -> None:
        """Append a batch of documents already reduced to postings against the batch's own vocabulary (what
        :func:`~langchain_ragspine.backends.directory.bm25_parallel.count_batch` returns): ``terms`` the batch's distinct terms
        in order of first occurrence, ``term_ids`` (int, indexes into ``terms``) and ``tfs`` one entry per
        posting, document after document, ``doc_len`` the tokens and ``doc_terms`` the postings of each document.

        The result is exactly that of :meth:`add` on each document's tokens in turn: new terms get ids in the
        order of their first occurrence, so the vocabulary and every posting are the same.

        Raises:
            ValueError: the arrays do not fit together.
        """
        term_ids = np.asarray(term_ids, dtype=np.int32)
        tfs = np.asarray(tfs, dtype=np.int32)
        doc_len = np.asarray(doc_len, dtype=np.int64)
        doc_terms = np.asarray(doc_terms, dtype=np.int64)
        if term_ids.shape != tfs.shape or doc_len.shape != doc_terms.shape or int(doc_terms.sum()) != term_ids.size:
            raise ValueError("add_counted: term_ids/tfs and doc_len/doc_terms do not fit together")
        if term_ids.size and (int(term_ids.min()) < 0 or int(term_ids.max()) >= len(terms)):
            raise ValueError("add_counted: a term id is outside the batch's terms")
        if doc_len.size == 0:
            return
        vocab = self.vocab
        # known terms are looked up in C; new ones get the next ids in the batch's order of first occurrence
        to_global = np.fromiter(map(vocab.get, terms, repeat(-1)), dtype=np.int32, count=len(terms))
        new = np.flatnonzero(to_global < 0)
        if new.size:  # the batch's terms are distinct: the new ones are numbered on from len(vocab), in order
            first = len(vocab)
            vocab.update(zip(map(terms.__getitem__, new.tolist()), range(first, first + new.size), strict=True))
            to_global[new] = np.arange(first, first + new.size, dtype=np.int32)
        self._close_block()
        self._doc_len.frombytes(doc_len.tobytes())
        self._doc_terms.frombytes(doc_terms.tobytes())
        self._store_block(to_global[term_ids], tfs)

    def _close_block(self) -> None:
        """Move the open block to memory or to the temporary file, counting its document frequencies."""
        if len(self._doc_len) == self._block_first_doc:
            return
        terms = np.array(self._terms, dtype=np.int32)
        tfs = np.array(self._tfs, dtype=np.int32)
        self._terms, self._tfs = array("i"), array("i")
        self._store_block(terms, tfs)

    def _store_block(self, terms: np.ndarray, tfs: np.ndarray) -> None:
        """Keep the postings of documents ``_block_first_doc`` up to the last one added as a closed block, in
        memory or in the temporary file, counting their document frequencies."""
        end = len(self._doc_len)
        counts = np.bincount(terms, minlength=len(self.vocab))
        if counts.size > self._df.size:
            self._df = np.concatenate([self._df, np.zeros(counts.size - self._df.size, dtype=np.int64)])
        self._df[: counts.size] += counts
        first, self._block_first_doc = self._block_first_doc, end
        if self._spill is None and self._held + terms.size <= self._memory_postings:
            self._blocks.append((first, end, terms, tfs))
            self._held += terms.size
            return
        if self._spill is None:
            import tempfile

            self._spill = tempfile.TemporaryFile(prefix="ragspine-bm25-postings-")
        offset = self._spill.seek(0, os.SEEK_END)
        self._spill.write(terms.tobytes())
        self._spill.write(tfs.tobytes())
        self._blocks.append((first, end, offset, terms.size))

    def _iter_blocks(self) -> Iterator[tuple[int, int, np.ndarray, np.ndarray]]:
        """``(first doc, end doc, terms, tfs)`` of every closed block, in document order."""
        for first, end, a, b in self._blocks:
            if isinstance(a, np.ndarray):
                yield first, end, a, b
                continue
            self._spill.seek(a)
            raw = self._spill.read(8 * b)
            yield first, end, np.frombuffer(raw, dtype=np.int32, count=b), np.frombuffer(raw, np.int32, b, 4 * b)

    @property
    def ids(self) -> TermPostings:
        """The postings themselves (the ``ids`` of bm25s's ``Tokenized``, which ``build_index_from_ids`` gets)."""
        return self

    @property
    def num_docs(self) -> int:
        """Documents added."""
        return len(self._doc_len)

    def lucene_scores(self, *, k1: float, b: float) -> dict[str, Any]:
        """bm25s's eager score matrix (``method="lucene"``) as the ``scores`` dict ``build_index_from_ids``
        returns: ``data`` (float32 BM25 contribution of each posting), ``indices`` (int32 document ids) and
        ``indptr`` (int64, one slice per term id) of a CSC matrix, term-major with document ids ascending, and
        ``num_docs``.  Lucene IDF ``ln(1 + (N - df + 0.5) / (df + 0.5))``; TF ``tf / (tf + k1·(1 - b + b·dl/avgdl))``.

        The matrix is filled block by block (a counting sort: each term's slice has a cursor), so besides the
        result only one block's arrays are alive.
        """
        self._close_block()
        n_docs = len(self._doc_len)
        df = np.zeros(len(self.vocab), dtype=np.int64)
        df[: self._df.size] = self._df
        lengths = np.frombuffer(self._doc_len, dtype=np.int64).astype(np.float32)
        doc_terms = np.frombuffer(self._doc_terms, dtype=np.int64)
        idf = np.log(1.0 + (n_docs - df + 0.5) / (df + 0.5)).astype(np.float32)
        norm = (k1 * (1.0 - b + b * lengths / lengths.mean())).astype(np.float32)
        indptr = np.concatenate([[0], np.cumsum(df)]).astype(np.int64)
        data = np.empty(int(indptr[-1]), dtype=np.float32)
        indices = np.empty(int(indptr[-1]), dtype=np.int32)
        cursor = indptr[:-1].copy()  # next free slot of each term's slice
        for first, end, term, tf_int in self._iter_blocks():
            if term.size == 0:  # a block of documents without a token
                continue
            tf = tf_int.astype(np.float32)
            doc = np.repeat(np.arange(first, end, dtype=np.int32), doc_terms[first:end])
            score = idf[term] * tf / (tf + norm[doc])
            order = _stable_order(term)  # term-major; doc ids stay ascending within a term
            # the block's postings of term t (its run, in the sorted order) go to cursor[t], cursor[t] + 1, ...
            counts = np.bincount(term, minlength=cursor.size)
            present = np.flatnonzero(counts)
            run = counts[present]
            starts = np.cumsum(run) - run  # where each run begins in the sorted order
            pos = np.repeat(cursor[present] - starts, run) + np.arange(term.size, dtype=np.int64)
            data[pos] = score[order]
            indices[pos] = doc[order]
            cursor[present] += run
        return {"data": data, "indices": indices, "indptr": indptr, "num_docs": n_docs}

    def term_major(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The raw postings, term-major, for an index that scores at query time
        (:class:`~langchain_ragspine.backends.directory.bm25_postings.PostingsSegment`): ``(indptr, rows, tfs,
        lengths)`` — ``indptr`` int64 ``(len(vocab) + 1,)`` (term id ``t``'s postings are ``indptr[t]:indptr[t+1]``),
        ``rows`` int32 document ids ascending within each term, ``tfs`` int32 term frequencies, ``lengths`` int64
        tokens per document.  Filled block by block as :meth:`lucene_scores` is."""
        self._close_block()
        df = np.zeros(len(self.vocab), dtype=np.int64)
        df[: self._df.size] = self._df
        doc_terms = np.frombuffer(self._doc_terms, dtype=np.int64)
        indptr = np.concatenate([[0], np.cumsum(df)]).astype(np.int64)
        rows = np.empty(int(indptr[-1]), dtype=np.int32)
        tfs = np.empty(int(indptr[-1]), dtype=np.int32)
        cursor = indptr[:-1].copy()
        for first, end, term, tf in self._iter_blocks():
            if term.size == 0:
                continue
            doc = np.repeat(np.arange(first, end, dtype=np.int32), doc_terms[first:end])
            order = _stable_order(term)
            counts = np.bincount(term, minlength=cursor.size)
            present = np.flatnonzero(counts)
            run = counts[present]
            starts = np.cumsum(run) - run
            pos = np.repeat(cursor[present] - starts, run) + np.arange(term.size, dtype=np.int64)
            rows[pos] = doc[order]
            tfs[pos] = tf[order]
            cursor[present] += run
        lengths = np.frombuffer(self._doc_len, dtype=np.int64).copy()
        return indptr, rows, tfs, lengths


def _stable_order(keys: np.ndarray) -> np.ndarray:
    """``np.argsort(keys, kind="stable")`` for non-negative int32 ``keys``, several times faster: each key is packed
    with its position into one int64 (``key << bits | position``), the packed values — all distinct, so any sort
    orders them the same way — are sorted in place (numpy's vectorised sort of int64, AVX-512 where the CPU has
    it), and the positions are read back."""
    n = keys.size
    bits = max(1, (n - 1).bit_length())
    if n == 0 or int(keys.max()) >= 1 << (63 - bits):
        return np.argsort(keys, kind="stable")
    packed = keys.astype(np.int64) << bits
    packed |= np.arange(n, dtype=np.int64)
    packed.sort()
    packed &= (1 << bits) - 1
    return packed


@functools.cache
def _postings_bm25_class() -> type:
    """``bm25s.BM25`` whose ``build_index_from_ids`` — bm25s's documented override point — also accepts
    :class:`TermPostings` (made on first use: bm25s is imported lazily)."""
    import bm25s

    class PostingsBM25(bm25s.BM25):
        def build_index_from_ids(
            self,
            unique_token_ids: Any,
            corpus_token_ids: Any,
            show_progress: bool = True,
            leave_progress: bool = False,
        ) -> dict[str, Any]:
            if not isinstance(corpus_token_ids, TermPostings):
                return super().build_index_from_ids(
                    unique_token_ids, corpus_token_ids, show_progress=show_progress, leave_progress=leave_progress
                )
            if self.method != "lucene" or self.idf_method != "lucene":
                raise ValueError(f"TermPostings are scored with method='lucene' only, not {self.method!r}")
            self.nonoccurrence_array = None  # Lucene BM25 has no non-occurrence term (bm25s sets it the same way)
            return corpus_token_ids.lucene_scores(k1=self.k1, b=self.b)

    return PostingsBM25


# -- persistence -------------------------------------------------------------------------------------------------
def save_bm25_index(
    path: str | os.PathLike[str],
    index: Any,
    docs: Sequence[Document],
    *,
    tokenizer: str | Tokenizer,
    k: int,
    k1: float,
    b: float,
    filter: Mapping[str, Any] | None,
    generation: int | None = None,
) -> None:
    """Write ``index`` (a ``bm25s.BM25``, or ``None`` for a corpus without tokens) and ``docs`` to directory
    ``path``, replacing it atomically; ``tokenizer``, ``k``, ``k1``, ``b`` and ``filter`` go to ``retriever.json``,
    the checksum of every file and ``generation`` (the chunk-store generation ``docs`` were read at; default
    ``None``: not from a store) to ``manifest.json``, written last.

    Raises:
        ValueError: a metadata value is not JSON-serialisable.
        StoreWriteError: a write failed (disk full, …), naming the file; the previous save is intact.
    """
    name = tokenizer_name(tokenizer)
    config = {
        "format": FORMAT,
        "k": k,
        "k1": k1,
        "b": b,
        "tokenizer": name,
        "tokenizer_version": tokenizer_version(name) if name is not None else None,
        "filter": filter,
        "num_docs": len(docs),
        "empty_index": index is None,
    }
    with atomic_dir(path, marker=CONFIG_FILE, writes=SAVE_LAYOUT) as tmp:
        (tmp / CONFIG_FILE).write_text(json.dumps(config, ensure_ascii=False, indent=1), "utf-8")
        write_documents(tmp / DOCS_FILE, docs)
        if index is not None:
            index.save(tmp / ARRAYS_DIR, show_progress=False)
        write_manifest(tmp, generation=generation)


@dataclass(frozen=True)
class SavedBM25Index:
    """What :func:`load_bm25_index` read: the documents, the ``bm25s.BM25`` (``None`` for an empty index, or an
    unverified one), the tokenizer to query it with, the saved retriever settings ``{"k", "k1", "b", "filter"}``,
    the chunk-store generation the index was built from (``None``: not from a store, or unverified), and whether it
    was verified (``False``: saved before checksums existed — nothing vouches for its arrays, which were not read;
    rebuild the index from ``docs``)."""

    docs: list[Document]
    index: Any
    tokenizer: str | Tokenizer
    settings: dict[str, Any]
    generation: int | None = None
    verified: bool = True


def load_bm25_index(
    path: str | os.PathLike[str], *, tokenizer: str | Tokenizer | None = None, generation: int | None = None
) -> SavedBM25Index:
    """Read and verify an index directory written by :func:`save_bm25_index` (bm25s arrays with
    ``allow_pickle=False``; the checks are in the module docstring).

    Args:
        tokenizer: the tokenizer to query with; default the one named in ``retriever.json``.
        generation: the chunk-store generation the index must have been built from (default ``None``: any, as
            for a retriever saved outside a store).  When given, an index without a checksum manifest is refused
            too, so the caller rebuilds it from the store.

    Returns:
        A :class:`SavedBM25Index`; without a manifest (and without ``generation``) an unverified one: its
        documents, no arrays.

    Raises:
        StoreError: the directory is missing, incomplete, or not a ragspine BM25 index; a file does not match the
            manifest, or the index does not hold together (the message names the file and why); it was built from
            another ``generation``; or it is stale: its recorded tokenizer version (absent = ``"1"``, an index
            from before script folding) is not the current
            :func:`~langchain_ragspine.tokenizers.tokenizer_version` of the tokenizer it names, so queries would
            be tokenized differently from the indexed documents — rebuild it.
        ValueError: the index was saved with a custom tokenizer and ``tokenizer`` is not given.
    """
    root = Path(path)
    config = read_config(root, CONFIG_FILE, fmt=FORMAT, what="BM25 index")
    tok = tokenizer if tokenizer is not None else config.get("tokenizer")
    if tok is None:
        raise ValueError(f"{root} was saved with a custom tokenizer; pass tokenizer= to load()")
    empty = config.get("empty_index", False)
    manifest = read_manifest(root)
    if manifest is not None:  # before anything in retriever.json is believed
        required = [CONFIG_FILE, DOCS_FILE] + ([] if empty else [f"{ARRAYS_DIR}/{name}" for name in ARRAY_FILES])
        manifest.check(required=required, generation=generation)
    saved_name = config.get("tokenizer")
    if isinstance(saved_name, str) and tokenizer_name(tok) == saved_name:
        saved, current = str(config.get("tokenizer_version") or "1"), tokenizer_version(saved_name)
        if saved != current:
            raise StoreError(
                f"stale index: built with tokenizer {saved_name!r} version {saved}, but {saved_name!r} now "
                f"produces version {current} tokens; rebuild it from its documents (ragspine ingest)",
                path=root,
            )
    if manifest is None and generation is not None:
        raise StoreError("missing: no checksum (saved before checksums were recorded, or deleted)",
                         path=root / MANIFEST_FILE)
    if not isinstance(empty, bool):
        raise StoreError("empty_index must be true or false", path=root / CONFIG_FILE, field="empty_index")
    settings = {key: config[key] for key in ("k", "k1", "b", "filter")}
    docs = read_documents(root / DOCS_FILE, expected=config.get("num_docs"))
    if manifest is None:  # nothing vouches for the arrays: not read
        return SavedBM25Index(docs=docs, index=None, tokenizer=tok, settings=settings, verified=False)
    index = None
    if not empty:
        import bm25s

        arrays = root / ARRAYS_DIR
        try:
            index = bm25s.BM25.load(arrays, load_corpus=False, allow_pickle=False, show_progress=False)
        except (OSError, ValueError, EOFError, KeyError, TypeError, ImportError) as e:
            raise StoreError(f"unreadable bm25s index files: {e}", path=arrays) from None
        _check_structure(index, len(docs), settings, arrays)
    if isinstance(saved_name, str):  # re-tokenized with the tokenizer the documents were indexed with
        _check_columns(index, docs, get_tokenizer(saved_name), root / DOCS_FILE)
    return SavedBM25Index(
        docs=docs, index=index, tokenizer=tok, settings=settings, generation=manifest.generation
    )


def _check_structure(index: Any, n_docs: int, settings: Mapping[str, Any], arrays: Path) -> None:
    """Refuse bm25s arrays that do not hold together, whatever the manifest says (a query would raise a numpy
    error or score the wrong documents): dtypes, shapes, ``indptr`` against the vocabulary and the postings,
    document ids against ``n_docs``, scores positive and finite, bm25s's parameters against ``settings``."""
    scores = getattr(index, "scores", None) or {}
    data, indices, indptr = (np.asarray(scores.get(key)) for key in ("data", "indices", "indptr"))
    vocab = getattr(index, "vocab_dict", None)

    def refuse(name: str, why: str) -> None:
        raise StoreError(f"{why} (a damaged or edited index)", path=arrays / name)

    if index.method != "lucene" or index.idf_method != "lucene" or (index.k1, index.b) != (
        settings["k1"], settings["b"]
    ):
        refuse("params.index.json", f"parameters {index.method}/{index.idf_method} k1={index.k1} b={index.b} are "
               f"not retriever.json's lucene/lucene k1={settings['k1']} b={settings['b']}")
    if scores.get("num_docs") != n_docs:
        refuse("params.index.json", f"num_docs is {scores.get('num_docs')!r}, {DOCS_FILE} holds {n_docs} documents")
    if not isinstance(vocab, dict) or not vocab:
        refuse("vocab.index.json", "the vocabulary is not a non-empty JSON object")
    assert isinstance(vocab, dict)
    n_terms = len(vocab)
    for name, arr, kind in (("data", data, "f"), ("indices", indices, "i"), ("indptr", indptr, "i")):
        if arr.ndim != 1 or arr.dtype.kind != kind:
            refuse(f"{name}.csc.index.npy", f"{name} is a {arr.dtype} array of shape {arr.shape}, expected a "
                   f"one-dimensional {'float' if kind == 'f' else 'integer'} array")
    if indptr.size != n_terms + 1:
        refuse("indptr.csc.index.npy", f"indptr has {indptr.size} entries, expected {n_terms + 1} (one per term of "
               "the vocabulary, plus one)")
    if indptr[0] != 0 or np.any(indptr[1:] < indptr[:-1]):
        refuse("indptr.csc.index.npy", "indptr does not rise from 0")
    if data.size != indptr[-1]:
        refuse("data.csc.index.npy", f"data holds {data.size} postings, indptr {indptr[-1]}")
    if indices.size != data.size:
        refuse("indices.csc.index.npy", f"indices holds {indices.size} postings, data {data.size}")
    if data.size and (int(indices.min()) < 0 or int(indices.max()) >= n_docs):
        refuse("indices.csc.index.npy", f"a document id is outside the {n_docs} documents of {DOCS_FILE}")
    if data.size and not (float(data.min()) > 0 and np.isfinite(data.max())):
        refuse("data.csc.index.npy", "a score is not positive and finite")
    try:
        ids = np.fromiter(vocab.values(), dtype=np.int64, count=n_terms)
    except (TypeError, ValueError):
        ids = np.array([-1])
    if int(ids.min()) < 0 or int(ids.max()) >= n_terms or int(np.bincount(ids, minlength=n_terms).max()) != 1:
        refuse("vocab.index.json", f"the term ids are not 0 .. {n_terms - 1}, each once")


def _check_columns(index: Any, docs: Sequence[Document], tokenize: Tokenizer, docs_path: Path) -> None:
    """The documents at :data:`SPOT_CHECK_DOCS` evenly spread positions, tokenized again, must each get exactly
    their tokens' terms from the index (``None``: none at all): what catches rows of ``docs.jsonl`` out of line with the arrays when no
    checksum can (a bug, or a manifest rewritten by hand).  One pass over the postings."""
    n = len(docs)
    if n == 0:
        return
    picks = np.unique(np.linspace(0, n - 1, num=min(n, SPOT_CHECK_DOCS)).round().astype(np.int64))
    found: dict[int, set[int]] = {int(p): set() for p in picks}
    vocab: dict[str, int] = {}
    if index is not None:  # ``None``: an index without a token, so no document may have one
        indices, indptr = index.scores["indices"], index.scores["indptr"]
        chosen = np.zeros(n, dtype=bool)
        chosen[picks] = True
        postings = np.flatnonzero(chosen[indices])  # the postings of the chosen documents
        terms = np.searchsorted(indptr, postings, side="right") - 1
        for doc, term in zip(indices[postings].tolist(), terms.tolist(), strict=True):
            found[doc].add(term)
        vocab = index.vocab_dict
    for p in picks.tolist():
        expected = {vocab.get(token, -1) for token in tokenize(index_text(docs[p]))}
        if expected != found[p]:
            key = docs[p].metadata.get("chunk_id") or docs[p].id
            raise StoreError(
                f"document {key!r} does not match the index: the index gives it other terms than its text has "
                "(rows out of line with the bm25s arrays: edited, swapped, or saved by a bug)",
                path=docs_path,
                line=p + 1,
            )
