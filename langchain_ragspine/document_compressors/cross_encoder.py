"""Cross-encoder reranking: score every (query, passage) pair jointly and keep the best ``k``.

A cross-encoder reads the query and a passage together through one transformer and outputs a relevance logit, which
ranks far better than comparing two independently computed vectors (Nogueira & Cho, "Passage Re-ranking with BERT",
2019).  It is too slow to score a whole corpus, so it reorders the few dozen candidates a first-stage retriever
returned ("retrieve and rerank").  Models are sentence-transformers ``CrossEncoder``\\ s (Reimers & Gurevych,
"Sentence-BERT", EMNLP 2019): any name on the Hugging Face Hub or a local path, e.g.
``hotchpotch/japanese-reranker-cross-encoder-xsmall-v1`` (Japanese) or ``BAAI/bge-reranker-v2-m3``
(multilingual).

What :class:`CrossEncoderReranker` does that LangChain's ``CrossEncoderReranker`` +
``HuggingFaceCrossEncoder`` (``langchain_classic`` / ``langchain_community``) does not:

* **scores in [0, 1]**: the model's raw logits are requested and normalised here — the sigmoid of the logit for
  a one-logit model, the softmax probability of the positive (last) class for a two-logit model — whatever
  activation the model's config names, so ``metadata["scores"]["rerank"]`` is comparable across models and calls;
* **long inputs are truncated, never fatal**: the tokenizer's maximum length is capped at what the model's
  position embeddings allow (a ``max_length`` above it used to raise a tensor-size error);
* **metadata survives**: each result is a copy of its input ``Document`` with every metadata key kept and
  ``scores`` updated in the ``{"bm25", "vector", "fused", "rerank"}`` layout (other channels kept);
* **deterministic ties**: equal scores are ordered by ``chunk_id`` (else ``Document.id``, else input position).

sentence-transformers is the ``st`` extra (``pip install torch==2.13.0`` or another CPU build first, then
``pip install 'langchain-ragspine[st]'``); a Hub model is downloaded once, on the user's machine.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from pydantic import ConfigDict, Field, PrivateAttr

from langchain_ragspine._optional import import_optional
from langchain_ragspine.arguments import (
    DEFAULT_K,
    OptionalPositiveIntField,
    PositiveIntField,
    known_fields,
    renamed_fields,
)
from langchain_ragspine.document_compressors._common import reranked

__all__ = ["CrossEncoderReranker", "normalize_logits"]


def normalize_logits(logits: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(margin, score)`` for a batch of cross-encoder outputs.

    ``logits`` has shape ``(n,)`` or ``(n, 1)`` (one logit per pair: ``margin`` = the logit) or ``(n, 2)`` (two
    classes, the last one "relevant": ``margin = l1 - l0``).  ``score = sigmoid(margin)``, in [0, 1] — for two
    classes that is exactly the softmax probability of the positive class.  ``margin`` keeps the order where the
    sigmoid saturates (logits 40 and 50 both map to 1.0 in float64); NaN counts as the lowest margin.

    Raises:
        ValueError: another shape (a classifier with three or more labels is not a reranker).
    """
    arr = np.asarray(logits, dtype=np.float64)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr[:, 0]
    if arr.ndim == 1:
        margin = arr
    elif arr.ndim == 2 and arr.shape[1] == 2:
        margin = arr[:, 1] - arr[:, 0]
    else:
        raise ValueError(f"a reranking cross-encoder gives 1 or 2 logits per pair; got output of shape {arr.shape}")
    margin = np.nan_to_num(margin, nan=-np.inf)
    score = 0.5 * (1.0 + np.tanh(margin / 2.0))  # the logistic function, without overflow
    return margin, score


def _load_cross_encoder(name: str, max_length: int, kwargs: dict[str, Any]) -> Any:
    cross_encoder = import_optional(
        "sentence_transformers",
        "CrossEncoderReranker needs sentence-transformers: install torch (a CPU build) first, then "
        "pip install 'langchain-ragspine[st]'",
    )
    try:
        return cross_encoder.CrossEncoder(name, max_length=max_length, **kwargs)
    except ValueError as e:  # transformers: "Unrecognized model in <dir>" — a folder that is not a model
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise OSError(f"{name}: not a cross-encoder model ({first})") from e


def _position_limit(encoder: Any) -> int | None:
    """The longest input (in tokens, special tokens included) the model's absolute position embeddings allow, or
    ``None`` when it has none (relative or rotary positions) or cannot be inspected (a stand-in object).

    RoBERTa-style embeddings (``padding_idx`` set) start positions after the padding index, so they allow
    ``num_embeddings - padding_idx - 1`` tokens.
    """
    for candidate in (encoder, getattr(encoder, "model", None)):
        named = getattr(candidate, "named_modules", None)
        if not callable(named):
            continue
        for name, module in named():
            if name.endswith("position_embeddings") and isinstance(getattr(module, "num_embeddings", None), int):
                pad = getattr(module, "padding_idx", None)
                return int(module.num_embeddings) - (int(pad) + 1 if pad is not None else 0)
    return None


def _cap_max_length(encoder: Any, wanted: int) -> None:
    """Lower the encoder's maximum input length to ``min(wanted, its current limit, its position limit)``.

    sentence-transformers ≥ 5 names it ``max_seq_length``; earlier versions ``max_length``.  Objects with neither
    (stand-ins) are left alone.
    """
    attr = "max_seq_length" if hasattr(type(encoder), "max_seq_length") else "max_length"
    if not hasattr(encoder, attr):
        return
    current = getattr(encoder, attr)
    limit = min(x for x in (wanted, current, _position_limit(encoder)) if isinstance(x, int) and x > 0)
    if limit != current:
        setattr(encoder, attr, limit)


class CrossEncoderReranker(BaseDocumentCompressor):
    """Rerank documents with a cross-encoder and keep the ``k`` best (a ``BaseDocumentCompressor``).

    Args:
        model: a sentence-transformers ``CrossEncoder`` model name (Hub) or local path — loaded at construction —
            or an already-built ``CrossEncoder`` (or any object with ``predict(pairs, batch_size=...)`` returning
            one or two logits per ``(query, text)`` pair).
        k: documents returned (default 6, :data:`~langchain_ragspine.arguments.DEFAULT_K`); ``None`` returns all, reordered.  ``top_n``, the keyword of LangChain's
            ``CrossEncoderReranker`` (which this class stands in for), is accepted as another name of ``k`` without
            a warning (with ``k`` and another value: a ``TypeError``); ``reranker.top_n`` reads and sets ``k``.
        max_length: maximum tokens per (query, passage) input (default 512); longer inputs are truncated
            (``longest_first``).  The effective limit is also capped by the model's position embeddings and, for a
            given model object, by its own current limit — it is never raised.
        batch_size: pairs per forward pass (default 32).
        model_kwargs: keyword arguments for ``CrossEncoder(model, ...)`` when ``model`` is a name or path (e.g.
            ``{"device": "cpu", "local_files_only": True, "trust_remote_code": True}``).

    ``compress_documents(documents, query)`` drops RESTRICTED documents (fail closed), scores the others against
    ``query`` on their ``page_content``, and returns at most ``k`` copies, best first, each with every input
    metadata key and ``metadata["scores"]["rerank"]`` in [0, 1] (see :func:`normalize_logits`); ties are ordered
    by ``chunk_id``.  An empty input returns ``[]`` without calling the model.  ``acompress_documents`` runs the
    same in a worker thread.

    Raises:
        ImportError: ``model`` is a name/path and sentence-transformers (the ``st`` extra) is not installed.
        TypeError: ``model`` is neither a name/path nor an object with ``predict``; ``k`` / ``max_length`` /
            ``batch_size`` not an int; ``top_n`` and ``k`` with different values.
        ValueError: ``k`` / ``max_length`` / ``batch_size`` < 1; at call time, a model giving three or more
            logits per pair.
        OSError: the named model cannot be found (sentence-transformers' own error; no network for a Hub name).
    """

    _known = known_fields("top_n")

    model: Any
    k: OptionalPositiveIntField = DEFAULT_K
    max_length: PositiveIntField = 512
    batch_size: PositiveIntField = 32
    model_kwargs: dict[str, Any] = Field(default_factory=dict)

    model_config = ConfigDict(arbitrary_types_allowed=True, protected_namespaces=())

    _encoder: Any = PrivateAttr(default=None)

    #: ``top_n``: LangChain's name of ``k``, kept (see the class docstring).
    _renamed = renamed_fields("top_n", kept=["top_n"])

    @property
    def top_n(self) -> int | None:
        """LangChain's name of :attr:`k` (kept: no warning)."""
        return self.k

    @top_n.setter
    def top_n(self, value: int | None) -> None:
        self.k = value

    def model_post_init(self, context: Any, /) -> None:
        """Load the model (see the class docstring)."""
        if isinstance(self.model, (str, os.PathLike)):
            encoder = _load_cross_encoder(os.fspath(self.model), self.max_length, dict(self.model_kwargs))
        elif callable(getattr(self.model, "predict", None)):
            encoder = self.model
        else:
            raise TypeError(
                "model must be a CrossEncoder name or path, or an object with predict(pairs); "
                f"got {type(self.model).__name__}"
            )
        _cap_max_length(encoder, self.max_length)
        self._encoder = encoder

    @property
    def encoder(self) -> Any:
        """The loaded cross-encoder object."""
        return self._encoder

    def _predict_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``predict``: the batch size, no progress bar, and an identity activation (raw
        logits; normalisation is done here) under the name this sentence-transformers version uses."""
        params = inspect.signature(self._encoder.predict).parameters
        takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
        kwargs: dict[str, Any] = {}
        for name, value in (("batch_size", self.batch_size), ("show_progress_bar", False)):
            if takes_any or name in params:
                kwargs[name] = value
        for name in ("activation_fn", "activation_fct"):  # sentence-transformers >= 4 / 3
            if name in params:
                import torch

                kwargs[name] = torch.nn.Identity()
                break
        return kwargs

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """Relevance of each text to ``query`` in [0, 1]: float64 array of shape ``(len(texts),)``."""
        return self._margins_and_scores(query, texts)[1]

    def _margins_and_scores(self, query: str, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        if not texts:
            return np.zeros(0), np.zeros(0)
        pairs = [(query, text) for text in texts]
        logits = self._encoder.predict(pairs, **self._predict_kwargs())
        if hasattr(logits, "detach"):  # a torch tensor from a stand-in model
            logits = logits.detach().cpu().numpy()
        margin, score = normalize_logits(logits)
        if margin.shape[0] != len(texts):
            raise ValueError(f"the cross-encoder returned {margin.shape[0]} scores for {len(texts)} pairs")
        return margin, score

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """The ``k`` most relevant non-RESTRICTED ``documents``, best first, with ``scores["rerank"]``."""
        return reranked(documents, query, type(self).__name__, self.k, self._margins_and_scores)
