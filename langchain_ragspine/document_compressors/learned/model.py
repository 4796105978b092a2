"""The learned reranker's model file: a LightGBM LambdaMART text model and its JSON sidecar; training and loading.

::

    from langchain_ragspine.document_compressors.learned.model import LearnedModel, train_lambdarank

    model = train_lambdarank(X, labels, groups, valid=(Xv, labels_v, groups_v))   # LambdaMART, deterministic
    model.save("my-reranker.txt")             # my-reranker.txt (LightGBM's text format) + my-reranker.txt.json
    LearnedModel.load("my-reranker.txt").score(X)   # the same scores, bit for bit

LambdaMART (Burges, "From RankNet to LambdaRank to LambdaMART: An Overview", MSR-TR-2010-82) is gradient-boosted
regression trees trained on LambdaRank's gradients, which weight each pair of candidates by the change in nDCG a
swap would make: it optimises the top of a list directly.  The learner is LightGBM's ``lambdarank`` objective (Ke
et al., NeurIPS 2017), the ``learn`` extra (``pip install 'langchain-ragspine[learn]'``).

Two files, never a pickle: ``<path>`` is LightGBM's own text model (``Booster.model_to_string``), and
``<path>.json`` the sidecar — ``format`` (:data:`MODEL_FORMAT`), ``version``, ``feature_version`` and ``features``
(the columns the model reads, :data:`~langchain_ragspine.document_compressors.learned.features.FEATURE_NAMES`), the
``tokenizer`` of the content terms, ``depth`` (the candidates per question it was trained on), the SHA-256 of the
model file, and free-form ``training`` information (data, parameters, the command that rebuilds it).  Loading
checks all of it, so a foreign, truncated or mismatched file is an error naming its path, never a silent bad
ranking.  Training is deterministic (``deterministic``, ``force_row_wise``, one thread, fixed seeds): the same
data gives the same file, byte for byte.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from langchain_ragspine._optional import import_optional
from langchain_ragspine.arguments import unwritable_reason
from langchain_ragspine.document_compressors.learned.features import FEATURE_NAMES, FEATURE_VERSION
from langchain_ragspine.errors import RagSpineError
from langchain_ragspine.tokenizers import TOKENIZERS

__all__ = ["DEFAULT_PARAMS", "MODEL_FORMAT", "MODEL_VERSION", "LearnedModel", "ModelFileError", "check_model_path",
           "require_lightgbm", "sidecar_path",
           "train_lambdarank"]

#: The sidecar's ``format`` value: what marks a file pair as a RAGSpine learned reranker.
MODEL_FORMAT = "ragspine-learned-reranker"
#: The sidecar layout's version.
MODEL_VERSION = 1

#: LightGBM parameters of :func:`train_lambdarank` (each can be overridden); the determinism switches are forced.
DEFAULT_PARAMS: dict[str, Any] = {
    "objective": "lambdarank",
    "metric": "ndcg",
    "eval_at": [1, 5],
    "learning_rate": 0.1,
    "num_leaves": 15,
    "min_data_in_leaf": 50,
    "lambdarank_truncation_level": 10,
    "feature_fraction": 1.0,
    "bagging_fraction": 1.0,
}
_DETERMINISTIC: dict[str, Any] = {
    "deterministic": True, "force_row_wise": True, "num_threads": 1, "seed": 0, "bagging_seed": 0,
    "feature_fraction_seed": 0, "data_random_seed": 0, "drop_seed": 0, "objective_seed": 0, "verbosity": -1,
}


class ModelFileError(RagSpineError):
    """A model file that cannot be used: missing, foreign (not a RAGSpine learned reranker), truncated or changed
    (its checksum), or of another feature set; ``str()`` reads ``"<path>: <reason>"`` (a
    :class:`~langchain_ragspine.errors.RagSpineError`, so the CLI prints it as one line)."""


def sidecar_path(path: str | os.PathLike[str]) -> Path:
    """The sidecar of model file ``path``: ``<path>.json``."""
    p = Path(path)
    return p.with_name(p.name + ".json")


def require_lightgbm() -> Any:
    """The ``lightgbm`` module.

    Raises:
        ImportError: LightGBM is not installed; the message names the ``learn`` extra.
    """
    return import_optional("lightgbm", "the learned reranker needs LightGBM: pip install 'langchain-ragspine[learn]'")


def check_model_path(path: str | os.PathLike[str]) -> Path:
    """``path`` as a model file :meth:`LearnedModel.save` can write, checked before any work (a fit can take
    minutes): not empty, not a directory, not named ``*.json`` (the sidecar is ``<path>.json``: a model named
    ``x.txt.json`` would overwrite the sidecar of a model ``x.txt``), its sidecar path not a directory.

    Raises:
        ValueError: naming the path and why.
    """
    if not str(path).strip():
        raise ValueError("the model path is empty: name a file (e.g. .ragspine/reranker.txt)")
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"{p}: a directory; name the model file to write in it (e.g. {p / 'reranker.txt'})")
    if p.suffix.lower() == ".json":
        raise ValueError(f"{p}: a model file named *.json would read as another model's sidecar ({p.stem}'s); "
                         f"name it e.g. {p.with_suffix('.txt')} (its sidecar is then {p.with_suffix('.txt')}.json)")
    if sidecar_path(p).is_dir():
        raise ValueError(f"{sidecar_path(p)}: a directory where the model's sidecar goes")
    reason = unwritable_reason(p.parent)  # the nearest existing ancestor must be a directory we can write in
    if reason is not None:
        raise ValueError(f"{p}: {reason}")
    return p


@dataclass
class LearnedModel:
    """A trained LambdaMART model with what it was trained on.

    Attributes:
        booster: the ``lightgbm.Booster``.
        features: the feature names it reads, in order.
        tokenizer: the tokenizer of the content-term features (``"auto"``).
        depth: candidates per question in training (a hint for ``fetch_k``).
        training: free-form facts about the training (data, parameters, command), kept in the sidecar.
        path: the model file it was loaded from (``None`` when trained in this process).
    """

    booster: Any
    features: tuple[str, ...] = FEATURE_NAMES
    tokenizer: str = "auto"
    depth: int = 30
    training: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None

    def score(self, features: np.ndarray) -> np.ndarray:
        """Scores of the rows of ``features`` (shape ``(n, len(self.features))``; higher is better), ``float64``
        ``(n,)``; ``(0,)`` for no rows.  One thread."""
        x = np.asarray(features, dtype=np.float64)
        if x.shape[0] == 0:
            return np.zeros(0, dtype=np.float64)
        return np.asarray(self.booster.predict(x, num_threads=1), dtype=np.float64)

    def model_text(self) -> str:
        """The LightGBM text model (what :meth:`save` writes to ``path``)."""
        return str(self.booster.model_to_string(num_iteration=-1))

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the model to ``path`` (LightGBM text) and its sidecar ``<path>.json``; returns ``path``."""
        p = check_model_path(path)
        text = self.model_text()
        data = text.encode("utf-8")
        meta = {
            "format": MODEL_FORMAT,
            "version": MODEL_VERSION,
            "feature_version": FEATURE_VERSION,
            "features": list(self.features),
            "tokenizer": self.tokenizer,
            "depth": self.depth,
            "model_sha256": hashlib.sha256(data).hexdigest(),
            "model_bytes": len(data),
            "training": self.training,
        }
        side = sidecar_path(p)
        p.parent.mkdir(parents=True, exist_ok=True)
        # both files are written in full before either replaces the old pair: a failed write leaves the previous
        # model and sidecar as they were (and a crash between the two renames, a pair whose checksum refuses it)
        tmp_model, tmp_side = p.with_name(f".{p.name}.tmp"), side.with_name(f".{side.name}.tmp")
        try:
            tmp_model.write_bytes(data)
            tmp_side.write_text(json.dumps(meta, ensure_ascii=False, indent=1, sort_keys=True) + "\n", encoding="utf-8")
            os.replace(tmp_model, p)
            os.replace(tmp_side, side)
        finally:
            tmp_model.unlink(missing_ok=True)
            tmp_side.unlink(missing_ok=True)
        return p

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> LearnedModel:
        """Read a model saved by :meth:`save`.

        Raises:
            ModelFileError: ``path`` or its sidecar is missing or no regular file; the sidecar is not this format
                or version; the model file's checksum differs (truncated or changed); it was trained on other
                features or another feature version; LightGBM cannot read it.  Each message names the path.
            ImportError: LightGBM is not installed (the ``learn`` extra).
        """
        p = Path(path)
        side = sidecar_path(p)
        if p.is_dir():
            raise ModelFileError(path=p, reason="a directory, not a learned reranker model file")
        if not p.is_file():
            raise ModelFileError(path=p, reason="learned reranker model file not found")
        if not side.is_file():
            raise ModelFileError(path=p, reason=f"not a RAGSpine learned reranker (its sidecar {side.name} is missing)")
        try:
            meta = json.loads(side.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ModelFileError(path=side, reason=f"not a RAGSpine learned reranker sidecar ({e})") from None
        if not isinstance(meta, Mapping) or meta.get("format") != MODEL_FORMAT:
            raise ModelFileError(path=side, reason="not a RAGSpine learned reranker sidecar (format is not "
                                 f"{MODEL_FORMAT!r})")
        if meta.get("version") != MODEL_VERSION:
            raise ModelFileError(path=side, reason=f"sidecar version {meta.get('version')!r}, this package reads "
                                 f"{MODEL_VERSION}")
        data = p.read_bytes()
        if hashlib.sha256(data).hexdigest() != meta.get("model_sha256"):
            raise ModelFileError(path=p, reason="the model file does not match its sidecar's checksum "
                                 f"(truncated or changed; {len(data)} bytes, the sidecar says {meta.get('model_bytes')!r})")
        features = meta.get("features")
        if meta.get("feature_version") != FEATURE_VERSION:
            raise ModelFileError(path=p, reason="trained on feature version "
                                 f"{meta.get('feature_version')!r}; this package computes version {FEATURE_VERSION}")
        if not isinstance(features, list) or not features:
            raise ModelFileError(path=side, reason=f"field 'features': {features!r} is not the list of feature names "
                                 "the model reads")
        tokenizer = meta.get("tokenizer", "auto")
        if not isinstance(tokenizer, str) or tokenizer not in TOKENIZERS:
            raise ModelFileError(path=side, reason=f"field 'tokenizer': {tokenizer!r} is not a tokenizer of this "
                                 f"package ({', '.join(sorted(TOKENIZERS))})")
        unknown = [f for f in features if f not in FEATURE_NAMES]
        if unknown:
            raise ModelFileError(path=p, reason="reads features this package does not compute: "
                                 f"{', '.join(map(str, unknown))}")
        lgb = require_lightgbm()
        try:
            booster = lgb.Booster(model_str=data.decode("utf-8"))
        except (UnicodeDecodeError, lgb.basic.LightGBMError) as e:
            raise ModelFileError(path=p, reason=f"LightGBM cannot read the model ({e})") from None
        if booster.num_feature() != len(features):
            raise ModelFileError(path=p, reason=f"the model reads {booster.num_feature()} features, its sidecar names "
                                 f"{len(features)}")
        if not isinstance(meta.get("training", {}), Mapping):
            raise ModelFileError(path=side, reason=f"field 'training': {meta.get('training')!r} is not an object")
        depth = meta.get("depth", 30)
        return cls(booster=booster, features=tuple(features), tokenizer=str(tokenizer),
                   depth=int(depth) if isinstance(depth, int) else 30, training=dict(meta.get("training") or {}),
                   path=p)

    def columns(self) -> np.ndarray:
        """Indices of :attr:`features` in :data:`FEATURE_NAMES` (the columns of ``candidate_features`` it reads)."""
        return np.array([FEATURE_NAMES.index(f) for f in self.features], dtype=np.intp)


def train_lambdarank(
    features: np.ndarray,
    labels: np.ndarray,
    groups: Sequence[int],
    *,
    valid: tuple[np.ndarray, np.ndarray, Sequence[int]] | None = None,
    feature_names: Sequence[str] = FEATURE_NAMES,
    num_boost_round: int = 500,
    early_stopping_rounds: int = 50,
    params: Mapping[str, Any] | None = None,
    tokenizer: str = "auto",
    depth: int = 30,
    training: Mapping[str, Any] | None = None,
) -> LearnedModel:
    """Fit LambdaMART (LightGBM ``lambdarank``) on query groups; deterministic.

    Args:
        features: ``(n, len(feature_names))`` rows, the groups one after another.
        labels: ``(n,)`` relevance grades (0 / 1: the candidate holds a gold answer of the question's document).
        groups: rows per question, in order (``sum(groups) == n``).
        valid: held-out ``(features, labels, groups)`` for early stopping (stops after ``early_stopping_rounds``
            rounds without a better nDCG@1 of the held-out questions; the best round is kept).
        feature_names: the columns' names (default all of ``FEATURE_NAMES``; a subset for ablations).
        num_boost_round: at most this many trees (default 500).
        params: LightGBM parameters over :data:`DEFAULT_PARAMS` (the determinism switches cannot be overridden).
        tokenizer, depth, training: recorded in the model (and its sidecar).

    Raises:
        ValueError: shapes that do not agree.  ImportError: LightGBM is not installed.
    """
    lgb = require_lightgbm()
    x = np.asarray(features, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != len(feature_names) or y.shape != (x.shape[0],) or sum(groups) != x.shape[0]:
        raise ValueError(f"features {x.shape}, labels {y.shape}, groups summing to {sum(groups)} and "
                         f"{len(feature_names)} feature names do not agree")
    merged = {**DEFAULT_PARAMS, **(params or {}), **_DETERMINISTIC}
    names = list(feature_names)
    train_set = lgb.Dataset(x, y, group=list(groups), feature_name=names, free_raw_data=False,
                            params={"verbosity": -1})
    sets, callbacks = [], []
    if valid is not None:
        vx, vy, vg = valid
        sets.append(lgb.Dataset(np.asarray(vx, dtype=np.float64), np.asarray(vy, dtype=np.float64), group=list(vg),
                                feature_name=names, reference=train_set))
        callbacks.append(lgb.early_stopping(early_stopping_rounds, first_metric_only=True, verbose=False))
    booster = lgb.train(merged, train_set, num_boost_round=num_boost_round, valid_sets=sets, callbacks=callbacks)
    if valid is not None and booster.best_iteration > 0:
        booster = lgb.Booster(model_str=booster.model_to_string(num_iteration=booster.best_iteration))
    info = {**(training or {}), "params": {k: merged[k] for k in sorted(merged)},
            "trees": booster.num_trees()}
    return LearnedModel(booster=booster, features=tuple(names), tokenizer=tokenizer, depth=depth, training=info)
