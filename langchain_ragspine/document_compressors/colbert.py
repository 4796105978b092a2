"""Late-interaction reranking (ColBERT's MaxSim): one vector per token, each query token matched to its best
document token.

ColBERT (Khattab & Zaharia, "ColBERT: Efficient and Effective Passage Search via Contextualized Late Interaction
over BERT", SIGIR 2020) encodes the query and each passage separately into one L2-normalised vector per token and
scores a pair by *MaxSim*: for every query token, the highest cosine to any of the passage's tokens, summed over
the query tokens.  A token-level match survives where one pooled vector per text blurs it, and the passages'
vectors do not depend on the query (unlike a cross-encoder's joint pass).  Here it reorders a first stage's
candidates, as :class:`~langchain_ragspine.document_compressors.CrossEncoderReranker` does.

Usage::

    from langchain_ragspine.document_compressors.colbert import ColBERTReranker

    reranker = ColBERTReranker(model="/models/my-colbert", k=5)   # a local folder; nothing is downloaded
    top = reranker.compress_documents(candidates, "梅雨はいつ？")

A checkpoint is a local folder loaded with ``transformers`` (``AutoTokenizer`` / ``AutoModel``,
``local_files_only=True``) and read the way ColBERT checkpoints are written (:class:`ColBERTCheckpoint`):

* **projection head** — pylate's (``modules.json`` naming ``Dense`` modules, each a folder with ``config.json`` and
  ``linear.weight``) or Stanford ColBERT's (``linear.weight`` beside the encoder's weights); none: the hidden states
  themselves;
* **markers** — pylate's ``query_prefix`` / ``document_prefix`` (``config_sentence_transformers.json``) or
  Stanford's ``query_token_id`` / ``doc_token_id`` (``artifact.metadata``), a token inserted after ``[CLS]``;
* **query expansion** — queries padded to the checkpoint's query length with ``[MASK]`` tokens, whose vectors take
  part in MaxSim (pylate's ``do_query_expansion`` / ``query_length``; Stanford's ``query_maxlen``);
* **skip list** — document tokens left out of MaxSim (pylate's ``skiplist_words``; Stanford's punctuation with
  ``mask_punctuation``).

pylate itself is not needed (nor used).  ``transformers`` and ``torch`` are the ``st`` extra's.
"""

from __future__ import annotations

import json
import os
import string
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from pydantic import ConfigDict, Field, PrivateAttr

from langchain_ragspine._optional import import_optional
from langchain_ragspine.arguments import DEFAULT_K, OptionalPositiveIntField, PositiveIntField, known_fields
from langchain_ragspine.document_compressors._common import reranked

__all__ = ["ColBERTCheckpoint", "ColBERTReranker", "TokenEncoder", "l2_normalize_rows", "maxsim"]


def l2_normalize_rows(vectors: Any) -> np.ndarray:
    """``vectors`` (``(n, dim)``) with every row scaled to unit length (a zero row stays zero), float32."""
    arr = np.asarray(vectors, dtype=np.float32)
    norms = np.sqrt((arr * arr).sum(axis=1, keepdims=True))
    return arr / np.maximum(norms, 1e-12)


def maxsim(query: np.ndarray, document: np.ndarray) -> float:
    """ColBERT's late-interaction score: ``sum_i max_j <query_i, document_j>``.

    ``query`` ``(m, dim)`` and ``document`` ``(n, dim)`` hold L2-normalised token vectors, so each term is a
    cosine and the score lies in ``[-m, m]``.  A document without tokens (``n = 0``) scores ``-m`` (every query
    token's best cosine taken as -1, the lowest possible).
    """
    if query.shape[0] == 0:
        return 0.0
    if document.shape[0] == 0:
        return -float(query.shape[0])
    sims = np.asarray(query, np.float64) @ np.asarray(document, np.float64).T
    return float(sims.max(axis=1).sum())


@runtime_checkable
class TokenEncoder(Protocol):
    """What :class:`ColBERTReranker` needs of a model: token vectors for queries and for documents.

    Each method takes ``n`` texts and returns ``n`` float arrays ``(tokens_i, dim)`` of L2-normalised rows, in
    input order — exactly the vectors MaxSim compares.
    """

    def query_vectors(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Token vectors of each query."""
        ...

    def document_vectors(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Token vectors of each document."""
        ...


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        raise OSError(f"{path}: unreadable ColBERT checkpoint file ({e})") from e
    return data if isinstance(data, dict) else {}


def _linear_weights(folder: Path, prefix: str = "linear.") -> dict[str, Any] | None:
    """The ``linear.weight`` (and ``linear.bias``) tensors in ``folder``'s ``model.safetensors`` or
    ``pytorch_model.bin``, keyed without ``prefix``; ``None`` when neither file holds them."""
    safetensors_file, bin_file = folder / "model.safetensors", folder / "pytorch_model.bin"
    tensors: dict[str, Any] = {}
    if safetensors_file.is_file():
        from safetensors import safe_open

        with safe_open(str(safetensors_file), framework="pt") as f:
            tensors = {key: f.get_tensor(key) for key in f.keys() if key.startswith(prefix)}  # noqa: SIM118
    elif bin_file.is_file():
        import torch

        state = torch.load(str(bin_file), map_location="cpu", weights_only=True)
        tensors = {key: value for key, value in state.items() if key.startswith(prefix)}
    weights = {key.removeprefix(prefix): value for key, value in tensors.items()}
    return weights if "weight" in weights else None


class ColBERTCheckpoint:
    """A ColBERT checkpoint in a local folder, as a :class:`TokenEncoder` (the model behind
    :class:`ColBERTReranker`).

    Usage: ``ColBERTCheckpoint("/models/colbert", max_length=512).document_vectors(["…"])[0]`` → float32
    ``(tokens, dim)``.

    Args:
        path: the folder: a ``transformers`` model + tokenizer, optionally with a pylate / Stanford ColBERT
            projection head, markers, query length and skip list (see the module docstring).
        max_length: the most tokens a query or document is read with (special tokens and marker included; default
            512); longer texts are truncated.  Capped by the model's absolute position embeddings; a query padded
            for expansion uses the checkpoint's query length when that is smaller.  The checkpoint's own document
            length (pylate ``document_length``, Stanford ``doc_maxlen``) is not applied: pass it as ``max_length`` to
            read documents as the model was trained.
        batch_size: texts per forward pass (default 32).
        model_kwargs: more keyword arguments for ``AutoModel.from_pretrained`` (``local_files_only`` is always
            ``True``).

    Attributes:
        query_marker_id, document_marker_id: the marker token ids inserted after ``[CLS]`` (``None``: none).
        query_length: queries are padded to this many tokens with ``[MASK]`` (``None``: no expansion).
        dim: the dimension of the token vectors (the projection's output, else the hidden size).

    Raises:
        OSError: ``path`` is not a folder, or not a model ``transformers`` can load (the message names it); an
            unreadable checkpoint file.
        ValueError: a projection head with an activation other than identity, or a marker not in the vocabulary.
        ImportError: ``transformers`` / ``torch`` (the ``st`` extra) are missing.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        max_length: int = 512,
        batch_size: int = 32,
        model_kwargs: dict[str, Any] | None = None,
    ) -> None:
        root = Path(path)
        if not root.is_dir():
            raise OSError(f"{os.fspath(path)}: no ColBERT checkpoint folder there (a local path is required; "
                          "nothing is downloaded)")
        transformers = import_optional(
            "transformers",
            "ColBERTReranker needs transformers and torch: install torch (a CPU build) first, then "
            "pip install 'langchain-ragspine[st]'",
        )
        import torch

        self.path = root
        self.batch_size = batch_size
        modules = _read_json_list(root / "modules.json")
        encoder_dir = root / next((m.get("path", "") for m in modules if "Transformer" in str(m.get("type", ""))), "")
        kwargs = {**(model_kwargs or {}), "local_files_only": True}
        try:
            with _quiet(transformers):  # Stanford's linear.weight is "unexpected" to AutoModel: it is read below
                self.tokenizer = transformers.AutoTokenizer.from_pretrained(str(encoder_dir), local_files_only=True)
                self.model = transformers.AutoModel.from_pretrained(str(encoder_dir), **kwargs)
        except (OSError, ValueError, KeyError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise OSError(f"{os.fspath(path)}: not a ColBERT checkpoint transformers can load ({first})") from e
        self.model.eval()
        self._projections = self._read_projections(root, modules, encoder_dir)
        pylate = _read_json(root / "config_sentence_transformers.json")
        stanford = _read_json(root / "artifact.metadata")
        if not any(k in pylate for k in ("query_prefix", "query_length")):
            pylate = {}
        self.query_marker_id = self._marker(pylate.get("query_prefix") or stanford.get("query_token_id"))
        self.document_marker_id = self._marker(pylate.get("document_prefix") or stanford.get("doc_token_id"))
        query_length = (pylate.get("query_length") if pylate.get("do_query_expansion", True) else None) or (
            stanford.get("query_maxlen")
        )
        self.query_length: int | None = int(query_length) if isinstance(query_length, int) and query_length > 0 else None
        self._attend_to_expansion = bool(pylate.get("attend_to_expansion_tokens", stanford.get("attend_to_mask_tokens",
                                                                                                  False)))
        if self.query_length is not None and self.tokenizer.mask_token_id is None:
            self.query_length = None  # no [MASK] to expand with
        skip_words = list(pylate.get("skiplist_words") or [])
        if stanford.get("mask_punctuation", bool(stanford)):
            skip_words += list(string.punctuation)
        self._skip_ids: set[int] = set()
        for word in skip_words:
            pieces = self.tokenizer.encode(word, add_special_tokens=False) if isinstance(word, str) else []
            if len(pieces) == 1:  # as pylate and Stanford ColBERT: a word of one token
                self._skip_ids.add(int(pieces[0]))
        limit = _position_limit(self.model)
        self.max_length = min(max_length, limit) if limit is not None else max_length
        hidden = int(self.model.config.hidden_size)
        self.dim = int(self._projections[-1].out_features) if self._projections else hidden
        self._torch = torch

    @staticmethod
    def _read_projections(root: Path, modules: list[dict[str, Any]], encoder_dir: Path) -> list[Any]:
        """The linear layers after the encoder, in order: pylate's ``Dense`` modules, else Stanford's ``linear``."""
        import torch

        layers: list[Any] = []
        dense = [m for m in modules if str(m.get("type", "")).endswith("Dense")]
        sources: list[tuple[Path, dict[str, Any]]] = []
        for module in dense:
            folder = root / str(module.get("path", ""))
            config = _read_json(folder / "config.json")
            activation = str(config.get("activation_function", "torch.nn.modules.linear.Identity"))
            if not activation.endswith("Identity"):
                raise ValueError(f"{folder}: projection activation {activation!r} is not supported (identity only)")
            sources.append((folder, config))
        if not dense:
            sources.append((encoder_dir, {}))
        for folder, _config in sources:
            weights = _linear_weights(folder)
            if weights is None:
                if dense:
                    raise OSError(f"{folder}: the Dense module has no linear.weight")
                continue
            weight = weights["weight"].float()
            bias = weights.get("bias")
            layer = torch.nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None)
            with torch.no_grad():
                layer.weight.copy_(weight)
                if bias is not None:
                    layer.bias.copy_(bias.float())
            layers.append(layer.eval())
        return layers

    def _marker(self, token: Any) -> int | None:
        if not isinstance(token, str) or not token:
            return None
        vocab = self.tokenizer.get_vocab()
        for candidate in (token, token.strip()):
            if candidate in vocab:
                return int(vocab[candidate])
        raise ValueError(f"{self.path}: the checkpoint's marker {token!r} is not in its tokenizer's vocabulary")

    def query_vectors(self, texts: Sequence[str]) -> list[np.ndarray]:
        """L2-normalised token vectors of each query (marker and ``[MASK]`` expansion included)."""
        return self._encode(texts, self.query_marker_id, query=True)

    def document_vectors(self, texts: Sequence[str]) -> list[np.ndarray]:
        """L2-normalised token vectors of each document (padding and skip-list tokens left out)."""
        return self._encode(texts, self.document_marker_id, query=False)

    def _encode(self, texts: Sequence[str], marker: int | None, *, query: bool) -> list[np.ndarray]:
        torch = self._torch
        out: list[np.ndarray] = []
        extra = 1 if marker is not None else 0
        expand = query and self.query_length is not None
        length = min(self.query_length or self.max_length, self.max_length) if expand else self.max_length
        for start in range(0, len(texts), self.batch_size):
            batch = list(texts[start : start + self.batch_size])
            enc = self.tokenizer(batch, truncation=True, max_length=max(length - extra, 2),
                                 padding="max_length" if expand else True, return_tensors="pt")
            ids, mask = enc["input_ids"], enc["attention_mask"]
            if marker is not None:
                column = torch.full((ids.shape[0], 1), marker, dtype=ids.dtype)
                ids = torch.cat([ids[:, :1], column, ids[:, 1:]], dim=1)
                mask = torch.cat([mask[:, :1], torch.ones_like(column), mask[:, 1:]], dim=1)
            keep = mask.bool()
            if expand:
                padding = ~keep
                ids = ids.masked_fill(padding, int(self.tokenizer.mask_token_id))
                keep = torch.ones_like(keep)
                if self._attend_to_expansion:
                    mask = torch.ones_like(mask)
            elif self._skip_ids:
                keep &= ~torch.isin(ids, torch.tensor(sorted(self._skip_ids), dtype=ids.dtype))
            feeds = {"input_ids": ids, "attention_mask": mask}
            if "token_type_ids" in enc:
                feeds["token_type_ids"] = torch.zeros_like(ids)
            with torch.no_grad():
                hidden = self.model(**feeds).last_hidden_state
                for layer in self._projections:
                    hidden = layer(hidden)
            states = hidden.float().cpu().numpy()
            rows = keep.cpu().numpy()
            out.extend(l2_normalize_rows(states[i][rows[i]]) for i in range(states.shape[0]))
        return out


@contextmanager
def _quiet(transformers: Any) -> Iterator[None]:
    """transformers' warnings and progress bars off while loading, restored afterwards."""
    logging_ = transformers.utils.logging
    verbosity, bars = logging_.get_verbosity(), logging_.is_progress_bar_enabled()
    logging_.set_verbosity_error()
    logging_.disable_progress_bar()
    try:
        yield
    finally:
        logging_.set_verbosity(verbosity)
        if bars:
            logging_.enable_progress_bar()


def _read_json_list(path: Path) -> list[dict[str, Any]]:
    try:
        data = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as e:
        raise OSError(f"{path}: unreadable ColBERT checkpoint file ({e})") from e
    return [m for m in data if isinstance(m, dict)] if isinstance(data, list) else []


def _position_limit(model: Any) -> int | None:
    """The longest input the model's absolute position embeddings allow (RoBERTa-style ones start after the
    padding index), or ``None`` when it has none."""
    for name, module in model.named_modules():
        if name.endswith("position_embeddings") and isinstance(getattr(module, "num_embeddings", None), int):
            pad = getattr(module, "padding_idx", None)
            return int(module.num_embeddings) - (int(pad) + 1 if pad is not None else 0)
    return None


class ColBERTReranker(BaseDocumentCompressor):
    """Rerank documents by ColBERT MaxSim and keep the ``k`` best (a ``BaseDocumentCompressor``).

    Usage: ``ColBERTReranker(model="/models/colbert", k=5).compress_documents(docs, query)``, or
    ``make_reranker("colbert:/models/colbert")``.

    Args:
        model: a local ColBERT checkpoint folder (loaded at construction as a :class:`ColBERTCheckpoint`; nothing
            is downloaded), or any :class:`TokenEncoder` (an object with ``query_vectors`` / ``document_vectors``).
        k: documents returned (default 6, :data:`~langchain_ragspine.arguments.DEFAULT_K`); ``None`` returns all,
            reordered.
        max_length: the most tokens a query or a document is read with (default 512); longer ones are truncated.
            Capped by the model's position embeddings (see :class:`ColBERTCheckpoint`).  Ignored for a
            ``TokenEncoder`` object.
        batch_size: texts per forward pass (default 32; a path only).
        model_kwargs: more keyword arguments for ``AutoModel.from_pretrained`` (a path only).

    ``compress_documents(documents, query)`` drops RESTRICTED documents (fail closed), encodes the query and the
    others' ``page_content``, and returns at most ``k`` copies, best first, each with every input metadata key and
    ``metadata["scores"]["rerank"]`` in [0, 1]; ``page_content`` is untouched.  The order is MaxSim's
    (:func:`maxsim`; ties by ``chunk_id``).  The score normalises it as the cross-encoder's sigmoid does, to
    [0, 1], comparable across queries: ``(MaxSim / m + 1) / 2`` for a query of ``m`` token vectors — the mean over
    query tokens of the best cosine, mapped from [-1, 1] to [0, 1] (monotone, so the order is MaxSim's).  An empty
    input returns ``[]`` without calling the model.

    Raises:
        OSError: ``model`` is a path that is not a loadable checkpoint folder (the message names it).
        TypeError: ``model`` is neither a path nor a :class:`TokenEncoder`; ``k`` / ``max_length`` /
            ``batch_size`` not an int.
        ValueError: ``k`` / ``max_length`` / ``batch_size`` < 1; an unsupported checkpoint (see
            :class:`ColBERTCheckpoint`).
        ImportError: a path without ``transformers`` / ``torch`` installed.
    """

    _known = known_fields()

    model: Any
    k: OptionalPositiveIntField = DEFAULT_K
    max_length: PositiveIntField = 512
    batch_size: PositiveIntField = 32
    model_kwargs: dict[str, Any] = Field(default_factory=dict)

    model_config = ConfigDict(arbitrary_types_allowed=True, protected_namespaces=())

    _encoder: Any = PrivateAttr(default=None)

    def model_post_init(self, context: Any, /) -> None:
        """Load the checkpoint (see the class docstring)."""
        if isinstance(self.model, (str, os.PathLike)):
            self._encoder = ColBERTCheckpoint(self.model, max_length=self.max_length, batch_size=self.batch_size,
                                              model_kwargs=dict(self.model_kwargs))
        elif isinstance(self.model, TokenEncoder):
            self._encoder = self.model
        else:
            raise TypeError("model must be a ColBERT checkpoint path or an object with query_vectors(texts) and "
                            f"document_vectors(texts); got {type(self.model).__name__}")

    @property
    def encoder(self) -> Any:
        """The token encoder in use (a :class:`ColBERTCheckpoint` for a path)."""
        return self._encoder

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """Relevance of each text to ``query`` in [0, 1] (see the class docstring): float64 ``(len(texts),)``."""
        return self._maxsims_and_scores(query, texts)[1]

    def _maxsims_and_scores(self, query: str, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        if not texts:
            return np.zeros(0), np.zeros(0)
        (q,) = self._encoder.query_vectors([query])
        docs = self._encoder.document_vectors(list(texts))
        if len(docs) != len(texts):
            raise ValueError(f"the token encoder returned {len(docs)} documents' vectors for {len(texts)} texts")
        raw = np.array([maxsim(q, d) for d in docs], dtype=np.float64)
        m = max(q.shape[0], 1)
        return raw, np.clip((raw / m + 1.0) / 2.0, 0.0, 1.0)

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """The ``k`` most relevant non-RESTRICTED ``documents``, best first, with ``scores["rerank"]``."""
        return reranked(documents, query, type(self).__name__, self.k, self._maxsims_and_scores)
