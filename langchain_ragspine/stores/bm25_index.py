"""The BM25 index: bm25s's eager score matrix built from tokenized texts, and its persistence (no pickle).

Okapi BM25 (Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009) in Lucene's
variant, ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))`` and ``tf' = tf / (tf + k1 * (1 - b + b * dl / avgdl))``,
precomputed into a sparse term-document matrix, as `bm25s <https://github.com/xhluca/bm25s>`_ does (Lù, "BM25S:
Orders of magnitude faster lexical search via eager sparse scoring", 2024).  bm25s keeps tokenization, scoring and
selection apart; this module is the indexing side: :func:`build_bm25_index` turns texts into a ``bm25s.BM25``
(scoring and persistence are bm25s's), :func:`save_bm25_index` / :func:`load_bm25_index` write and read an index
directory.  :class:`~langchain_ragspine.retrievers.bm25.BM25Retriever` is the retriever over it.

An index directory (written into a temporary sibling that then replaces it, see
:func:`~langchain_ragspine.stores.files.atomic_dir`):

* ``retriever.json`` — format ``"ragspine-bm25/1"``, the retriever's ``k``, ``k1``, ``b`` and ``filter``, the
  tokenizer's registered name (``null`` for a custom callable) and :func:`~langchain_ragspine.tokenizers.tokenizer_version`,
  ``num_docs``, and ``empty_index`` (no token at all: no arrays);
* ``docs.jsonl`` — the indexed documents, one JSON object per line;
* ``bm25s/`` — bm25s's own files: ``data`` / ``indices`` / ``indptr`` ``.npy`` arrays, ``vocab.index.json``,
  ``params.index.json``.
"""

from __future__ import annotations

import json
import os
from array import array
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.documents import Document

from langchain_ragspine.errors import StoreError
from langchain_ragspine.stores.files import atomic_dir, read_config, read_documents, write_documents
from langchain_ragspine.tokenizers import Tokenizer, tokenizer_name, tokenizer_version

__all__ = ["FORMAT", "SavedBM25Index", "build_bm25_index", "load_bm25_index", "save_bm25_index"]

#: ``format`` of ``retriever.json``.
FORMAT = "ragspine-bm25/1"
CONFIG_FILE = "retriever.json"
DOCS_FILE = "docs.jsonl"
ARRAYS_DIR = "bm25s"


def build_bm25_index(texts: Iterable[str], tokenize: Tokenizer, *, k1: float, b: float) -> Any:
    """A bm25s Lucene index over ``texts``, or ``None`` when there is no token at all.

    Documents are tokenized one at a time and reduced at once to (term id, tf) pairs, so the corpus is never held
    as token strings (at 100k chunks of ~400 CJK chars that is ~80M Python strings).  The eager score matrix is then
    computed with numpy in bm25s's own layout — ``data`` / ``indices`` (doc ids) / ``indptr`` (per term id), Lucene
    IDF and TF as in bm25s's ``method="lucene"`` — and handed to a ``bm25s.BM25``, which does the scoring and the
    (pickle-free) persistence.  ``tests/unit_tests/test_bm25.py`` checks the matrix equals bm25s's own build.
    """
    vocab: dict[str, int] = {}
    setdefault = vocab.setdefault
    terms = array("i")
    tfs = array("i")
    doc_len: list[int] = []
    doc_terms: list[int] = []
    for text in texts:
        tokens = tokenize(text)
        counts = Counter(tokens)
        terms.extend([setdefault(t, len(vocab)) for t in counts])
        tfs.extend(counts.values())
        doc_len.append(len(tokens))
        doc_terms.append(len(counts))
    if not vocab:
        return None
    import bm25s

    n_docs = len(doc_len)
    term = np.frombuffer(terms, dtype=np.intc).astype(np.int32, copy=False)
    tf = np.frombuffer(tfs, dtype=np.intc).astype(np.float32)
    doc = np.repeat(np.arange(n_docs, dtype=np.int32), np.asarray(doc_terms, dtype=np.int64))
    lengths = np.asarray(doc_len, dtype=np.float32)
    df = np.bincount(term, minlength=len(vocab))
    idf = np.log(1.0 + (n_docs - df + 0.5) / (df + 0.5)).astype(np.float32)
    norm = (k1 * (1.0 - b + b * lengths / lengths.mean())).astype(np.float32)
    score = idf[term] * tf / (tf + norm[doc])
    order = np.argsort(term, kind="stable")  # term-major; doc ids stay ascending within a term
    index = bm25s.BM25(k1=k1, b=b, method="lucene")
    index.scores = {
        "data": score[order].astype(np.float32, copy=False),
        "indices": doc[order],
        "indptr": np.concatenate([[0], np.cumsum(df)]).astype(np.int64),
        "num_docs": n_docs,
    }
    index.vocab_dict = vocab
    index.unique_token_ids_set = set(vocab.values())
    index.nonoccurrence_array = None
    return index


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
) -> None:
    """Write ``index`` (a ``bm25s.BM25``, or ``None`` for a corpus without tokens) and ``docs`` to directory
    ``path``, replacing it atomically; ``tokenizer``, ``k``, ``k1``, ``b`` and ``filter`` go to ``retriever.json``.

    Raises:
        ValueError: a metadata value is not JSON-serialisable.
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
    with atomic_dir(path) as tmp:
        (tmp / CONFIG_FILE).write_text(json.dumps(config, ensure_ascii=False, indent=1), "utf-8")
        write_documents(tmp / DOCS_FILE, docs)
        if index is not None:
            index.save(tmp / ARRAYS_DIR, show_progress=False)


@dataclass(frozen=True)
class SavedBM25Index:
    """What :func:`load_bm25_index` read: the documents, the ``bm25s.BM25`` (``None`` for an empty index), the
    tokenizer to query it with, and the saved retriever settings ``{"k", "k1", "b", "filter"}``."""

    docs: list[Document]
    index: Any
    tokenizer: str | Tokenizer
    settings: dict[str, Any]


def load_bm25_index(
    path: str | os.PathLike[str], *, tokenizer: str | Tokenizer | None = None
) -> SavedBM25Index:
    """Read an index directory written by :func:`save_bm25_index` (bm25s arrays with ``allow_pickle=False``).

    Args:
        tokenizer: the tokenizer to query with; default the one named in ``retriever.json``.

    Raises:
        StoreError: the directory is missing, incomplete, or not a ragspine BM25 index; or it is stale: its
            recorded tokenizer version (absent = ``"1"``, an index from before script folding) is not the
            current :func:`~langchain_ragspine.tokenizers.tokenizer_version` of the tokenizer it names, so
            queries would be tokenized differently from the indexed documents — rebuild it.
        ValueError: the index was saved with a custom tokenizer and ``tokenizer`` is not given.
    """
    root = Path(path)
    config = read_config(root, CONFIG_FILE, fmt=FORMAT, what="BM25 index")
    tok = tokenizer if tokenizer is not None else config.get("tokenizer")
    if tok is None:
        raise ValueError(f"{root} was saved with a custom tokenizer; pass tokenizer= to load()")
    saved_name = config.get("tokenizer")
    if isinstance(saved_name, str) and tokenizer_name(tok) == saved_name:
        saved, current = str(config.get("tokenizer_version") or "1"), tokenizer_version(saved_name)
        if saved != current:
            raise StoreError(
                f"stale index: built with tokenizer {saved_name!r} version {saved}, but {saved_name!r} now "
                f"produces version {current} tokens; rebuild it from its documents (ragspine ingest)",
                path=root,
            )
    docs = read_documents(root / DOCS_FILE, expected=config.get("num_docs"))
    index = None
    if not config.get("empty_index"):
        import bm25s

        try:
            index = bm25s.BM25.load(root / ARRAYS_DIR, load_corpus=False, allow_pickle=False)
        except (OSError, ValueError, EOFError, KeyError, TypeError) as e:
            raise StoreError(f"unreadable bm25s index files: {e}", path=root / ARRAYS_DIR) from None
    settings = {key: config[key] for key in ("k", "k1", "b", "filter")}
    return SavedBM25Index(docs=docs, index=index, tokenizer=tok, settings=settings)
