"""What a BM25 build's tokenizing step hands on: :class:`CountedBatch`, a batch of documents reduced to postings.

A leaf of the directory backend: :mod:`~langchain_ragspine.backends.directory.bm25_parallel` (which makes them, in
worker processes or in this one) and :mod:`~langchain_ragspine.backends.directory._gram_count` (the fast path for
character n-gram tokenizers) both build it, so neither imports the other for it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["TERM_SEPARATOR", "CountedBatch"]


@dataclass(frozen=True)
class CountedBatch:
    """A batch of documents reduced to postings against the batch's own vocabulary.

    Attributes:
        terms: the batch's distinct terms, in order of first occurrence (document by document, token by token);
            as one string joined by :data:`TERM_SEPARATOR` when no term holds it (one object instead of tens of
            thousands to send between processes and keep while waiting), see :meth:`term_list`.
        term_ids: int32, one per posting, document after document: the posting's term as an index into ``terms``
            (each term once per document, in no particular order within it).
        tfs: int32, the frequency of each posting's term in its document.
        doc_len: int64, tokens per document.
        doc_terms: int64, postings (distinct terms) per document.
    """

    terms: list[str] | str
    term_ids: np.ndarray
    tfs: np.ndarray
    doc_len: np.ndarray
    doc_terms: np.ndarray

    def term_list(self) -> list[str]:
        """:attr:`terms` as a list."""
        if isinstance(self.terms, str):
            return self.terms.split(TERM_SEPARATOR)
        return self.terms


#: Joins the terms of a :class:`CountedBatch` (no registered tokenizer but ``whitespace`` can make a term holding it).
TERM_SEPARATOR = "\x00"
