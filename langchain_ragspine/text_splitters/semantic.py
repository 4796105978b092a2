"""Semantic chunking: cut where the meaning of adjacent sentences drifts apart.

:class:`SemanticTextSplitter` embeds every sentence together with its ``buffer_size`` neighbours on each side,
measures the cosine distance between consecutive such windows, and cuts after sentence ``i`` when the distance to
``i + 1`` is above a threshold computed per document: its ``breakpoint_threshold_amount``-th percentile (default 95,
so about one cut in twenty sentences), or mean + amount × standard deviation, or mean + amount × IQR.  A group of
sentences longer than ``chunk_size`` is then chunked by the paragraph machinery, so chunks stay within budget.
Every chunk is a verbatim slice ``text[start:end]`` from its first sentence's start to its last sentence's end.

A document labelled RESTRICTED (:func:`~langchain_ragspine.sensitivity.is_restricted` on its metadata) is never
embedded: it is chunked as the paragraph splitter chunks it.

The result depends only on the text and the embedding model: the same model gives the same chunks (the threshold
is a statistic of the document's own distances; no randomness).

The technique is Greg Kamradt's "semantic chunking" (*5 Levels of Text Splitting*, 2024) as implemented by
LangChain's ``langchain_experimental.text_splitter.SemanticChunker`` (``buffer_size=1``, percentile 95), with
sentences found by the package's CJK-aware boundaries and verbatim offsets instead of re-joined sentences.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_ragspine.arguments import check_int
from langchain_ragspine.sensitivity import is_restricted
from langchain_ragspine.text.graphemes import Graphemes, Span
from langchain_ragspine.text.sentences import sentence_segments
from langchain_ragspine.text_splitters.paragraph import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_OVERLAP_CHARS,
    ParagraphTextSplitter,
    SourceText,
)

__all__ = ["BreakpointThresholdType", "SemanticTextSplitter", "semantic_breakpoints"]

#: How the cut threshold is computed from a document's sentence distances (LangChain's names).
BreakpointThresholdType = Literal["percentile", "standard_deviation", "interquartile"]
_DEFAULT_AMOUNT: dict[str, float] = {"percentile": 95.0, "standard_deviation": 3.0, "interquartile": 1.5}


def semantic_breakpoints(
    vectors: np.ndarray, threshold_type: BreakpointThresholdType = "percentile", amount: float | None = None
) -> list[int]:
    """Indices ``i`` such that a cut goes between sentence ``i`` and ``i + 1``.

    Args:
        vectors: ``(n, dims)`` embeddings of the buffered sentences, in order (need not be normalised).
        threshold_type: ``"percentile"`` (cut where the distance is above its ``amount``-th percentile, default
            95), ``"standard_deviation"`` (above mean + ``amount`` × std, default 3) or ``"interquartile"`` (above
            mean + ``amount`` × IQR, default 1.5 — LangChain's definition).
        amount: the threshold parameter (default per type, as above).

    Returns:
        Sorted indices in ``[0, n - 2]``; ``[]`` for fewer than two sentences.

    Raises:
        ValueError: an unknown ``threshold_type``.
    """
    if threshold_type not in _DEFAULT_AMOUNT:
        raise ValueError(f"unknown breakpoint_threshold_type {threshold_type!r}; choose one of {list(_DEFAULT_AMOUNT)}")
    if len(vectors) < 2:
        return []
    v = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    v = v / np.where(norms == 0, 1.0, norms)
    distances = 1.0 - np.sum(v[:-1] * v[1:], axis=1)
    a = _DEFAULT_AMOUNT[threshold_type] if amount is None else float(amount)
    if threshold_type == "percentile":
        threshold = float(np.percentile(distances, a))
    elif threshold_type == "standard_deviation":
        threshold = float(np.mean(distances) + a * np.std(distances))
    else:
        q1, q3 = np.percentile(distances, [25, 75])
        threshold = float(np.mean(distances) + a * (q3 - q1))
    return [int(i) for i in np.flatnonzero(distances > threshold)]


class SemanticTextSplitter(ParagraphTextSplitter):
    """Chunks whose boundaries fall where adjacent-sentence embedding similarity drops (see the module docstring).

    Args:
        embedding: the ``Embeddings`` used on sentences (``embed_documents``); required.
        chunk_size: the longest chunk, in characters (default 480): a longer sentence group is chunked by the
            paragraph machinery.
        chunk_overlap: overlap between those pieces (default 80).
        buffer_size: sentences on each side embedded with a sentence (default 1, as Kamradt's and LangChain's).
        breakpoint_threshold_type: ``"percentile"`` (default), ``"standard_deviation"`` or ``"interquartile"``.
        breakpoint_threshold_amount: its parameter (default 95 / 3 / 1.5).
        **kwargs: passed to ``TextSplitter``.

    Raises:
        TypeError: ``embedding`` is not an ``Embeddings``; ``buffer_size`` or a budget is not an ``int``.
        ValueError: ``buffer_size < 0``, an unknown threshold type, or bad budgets.

    Chunks carry the paragraph splitter's lineage metadata.  Each text costs one ``embed_documents`` call with one
    string per sentence — except a RESTRICTED one (its metadata labelled so, :func:`~langchain_ragspine.sensitivity.
    is_restricted`): its text never reaches the model, it is chunked as :class:`ParagraphTextSplitter` chunks it
    (the same budgets), so its chunks are still versioned in a store (which never indexes or embeds them).

    Example:
        >>> from langchain_ragspine.embeddings import HashingEmbeddings
        >>> from langchain_ragspine.text_splitters import SemanticTextSplitter
        >>> text = "Cats purr. Cats nap. Cats purr and nap. Stocks fell. Markets fell. Stocks and markets fell."
        >>> splitter = SemanticTextSplitter(HashingEmbeddings(64), breakpoint_threshold_amount=50)
        >>> all(text[c.metadata["start_index"]:c.metadata["end_index"]] == c.page_content
        ...     for c in splitter.create_documents([text]))
        True
    """

    def __init__(
        self,
        embedding: Embeddings,
        chunk_size: int = DEFAULT_CHUNK_CHARS,
        chunk_overlap: int = DEFAULT_OVERLAP_CHARS,
        *,
        buffer_size: int = 1,
        breakpoint_threshold_type: BreakpointThresholdType = "percentile",
        breakpoint_threshold_amount: float | None = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(embedding, Embeddings):
            raise TypeError(f"embedding must be a langchain_core Embeddings, got {type(embedding).__name__}")
        buffer_size = check_int(buffer_size, "buffer_size", minimum=0)
        if breakpoint_threshold_type not in _DEFAULT_AMOUNT:
            raise ValueError(
                f"unknown breakpoint_threshold_type {breakpoint_threshold_type!r}; choose one of {list(_DEFAULT_AMOUNT)}"
            )
        super().__init__(chunk_size=chunk_size, chunk_overlap=chunk_overlap, **kwargs)
        self.embedding = embedding
        self.buffer_size = buffer_size
        self.breakpoint_threshold_type: BreakpointThresholdType = breakpoint_threshold_type
        self.breakpoint_threshold_amount = (
            _DEFAULT_AMOUNT[breakpoint_threshold_type]
            if breakpoint_threshold_amount is None
            else float(breakpoint_threshold_amount)
        )

    def _groups(self, g: Graphemes, sentences: Sequence[Span]) -> list[Span]:
        """Sentence groups between breakpoints, as spans."""
        if not sentences:
            return []
        b, n, text = self.buffer_size, len(sentences), g.text
        buffered = [text[sentences[max(0, i - b)][0] : sentences[min(n - 1, i + b)][1]] for i in range(n)]
        vectors = np.asarray(self.embedding.embed_documents(buffered)) if n > 1 else np.zeros((n, 1))
        cuts = semantic_breakpoints(vectors, self.breakpoint_threshold_type, self.breakpoint_threshold_amount)
        groups: list[Span] = []
        first = 0
        for i in [*cuts, n - 1]:
            groups.append((sentences[first][0], sentences[i][1]))
            first = i + 1
        return groups

    def _documents_of(self, source: SourceText) -> list[Document]:
        """The chunks of one source text; a RESTRICTED one is split by paragraphs, without the embedding model."""
        if is_restricted(source.base):
            spans = ParagraphTextSplitter.split_spans(self, source.text)
            return [source.chunk(n, s, e) for n, (s, e) in enumerate(spans)]
        return super()._documents_of(source)

    def split_spans(self, text: str) -> list[Span]:
        """``(start, end)`` offsets of the chunks of ``text``, in order (each sentence embedded: a text known to be
        RESTRICTED goes through :meth:`split_documents` / :meth:`create_documents` with its metadata instead)."""
        g = Graphemes(text)
        out: list[Span] = []
        for s, e in self._groups(g, sentence_segments(g)):
            out.extend([(s, e)] if e - s <= self._chunk_size else self._pack(g, s, e))
        return out
