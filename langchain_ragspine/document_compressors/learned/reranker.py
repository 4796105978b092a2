"""Rerank a first stage's candidates with a learned LambdaMART model over cheap features — offline, ~2–4 ms a list of 30.

::

    from langchain_ragspine.document_compressors.learned import LearnedReranker

    rerank = LearnedReranker(k=5)                       # the bundled model (trained on JaQuAD + CMRC 2018 trial)
    top = rerank.compress_documents(candidates, "日本で梅雨がないのは北海道とどこか。")
    LearnedReranker(model="my-reranker.txt")            # a model of `ragspine fit-reranker`

    make_reranker("learned")  /  ragspine search "…" --store DIR --rerank learned  /  --rerank learned:my-reranker.txt

The classic learning-to-rank second stage (LambdaMART, Burges 2010, as Anserini / Pyserini ship it): each candidate
becomes a row of :mod:`~langchain_ragspine.document_compressors.learned.features` (its channel scores, rank, the
share of the question's content terms in its text and title, longest common substring, the tightest window of the
question's terms, character-bigram overlap, length and position), and a gradient-boosted tree ensemble
(:mod:`~langchain_ragspine.document_compressors.learned.model`) scores it.  Where a cross-encoder needs a
transformer and weights this machine cannot download, this needs LightGBM (the ``learn`` extra) and a 345-kB text
file shipped in the package; see ``docs/postprocessing.md`` for what it gains and costs on the shared sets.

The bundled model was trained on BM25 ``auto`` candidates (top 30); over another first stage (the hybrid's
``vector`` / ``fused`` scores) it still ranks by its lexical features, untrained on those channels — fit one with
``ragspine fit-reranker`` for that.  RESTRICTED candidates are dropped before any feature is computed;
``page_content`` is never changed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from pydantic import ConfigDict, PrivateAttr

from langchain_ragspine.arguments import DEFAULT_K, OptionalPositiveIntField, known_fields
from langchain_ragspine.document_compressors._common import reranked
from langchain_ragspine.document_compressors.learned.features import candidate_features, query_terms
from langchain_ragspine.document_compressors.learned.model import LearnedModel

__all__ = ["DEFAULT_MODEL", "LearnedReranker"]

#: The model shipped in the package (with its sidecar ``learned-reranker-v1.txt.json``).
DEFAULT_MODEL = Path(__file__).resolve().parent / "learned-reranker-v1.txt"


class LearnedReranker(BaseDocumentCompressor):
    """Rerank candidates with a learned LambdaMART model and keep the ``k`` best (a ``BaseDocumentCompressor``).

    Args:
        model: a model file (:meth:`LearnedModel.save <langchain_ragspine.document_compressors.learned.model.
            LearnedModel.save>`, ``ragspine fit-reranker``), or ``None`` (default): the bundled
            :data:`DEFAULT_MODEL`.  Read once, when the reranker is built.
        k: documents returned (default 6); ``None`` returns all, reordered.

    Give it the first stage's list in the first stage's order (its rank is a feature) with
    ``metadata["scores"]`` as the package's retrievers set them; 20–50 candidates (the bundled model was trained
    on 30).  Each result carries ``metadata["scores"]["rerank"]`` = the logistic function of the model's score (in
    (0, 1), in the order of the score); equal scores keep the first stage's order (a tree ensemble gives equal
    scores often, and the first stage's order is the better guess than ``chunk_id``).  An empty input returns ``[]`` without calling the
    model.

    Raises:
        ModelFileError (a ``RagSpineError``): the model file is missing, not one of ours, truncated or of another
            feature set (the message names the path).
        ImportError: LightGBM is not installed (``pip install 'langchain-ragspine[learn]'``).
        TypeError: an unknown keyword (with a did-you-mean).  ValueError: ``k < 1``.
    """

    _known = known_fields()

    model: str | Path | None = None
    k: OptionalPositiveIntField = DEFAULT_K

    model_config = ConfigDict(arbitrary_types_allowed=True)

    _model: LearnedModel = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        """Read the model file."""
        self._model = LearnedModel.load(DEFAULT_MODEL if self.model is None else self.model)

    @property
    def learned_model(self) -> LearnedModel:
        """The loaded :class:`~langchain_ragspine.document_compressors.learned.model.LearnedModel`."""
        return self._model

    def scores(self, documents: Sequence[Document], query: str) -> list[float]:
        """The model's raw scores of ``documents`` (in their order, RESTRICTED ones included only if the caller
        passes them — :meth:`compress_documents` never does)."""
        x = candidate_features(query_terms(query, self._model.tokenizer), documents, tokenizer=self._model.tokenizer)
        return [float(s) for s in self._model.score(x[:, self._model.columns()])]

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """The ``k`` best non-RESTRICTED ``documents`` by the model's score, with ``scores["rerank"]``."""
        # ties keep the first stage's order (its rank is one of the model's features)
        return reranked(documents, query, type(self).__name__, self.k, self._scores_and_probabilities,
                        whole_documents=True, ties="input")

    def _scores_and_probabilities(self, query: str, docs: list[Document]) -> tuple[list[float], list[float]]:
        raw = self.scores(docs, query)
        return raw, [0.5 * (1.0 + math.tanh(r / 2.0)) for r in raw]
