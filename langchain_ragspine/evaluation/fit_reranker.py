"""Fit the learned reranker to labelled questions: candidates from a first stage, labels by the answer-recall rule.

::

    from langchain_ragspine.evaluation import load_qa
    from langchain_ragspine.evaluation.fit_reranker import fit_reranker

    report = fit_reranker([load_qa("my-qa")], out="my-reranker.txt")   # what `ragspine fit-reranker` runs
    report.before_at_1, report.after_at_1                                 # held-out answer recall@1

For each question of a QA dataset (``ragspine eval``'s layout: ``docs/`` + ``questions.jsonl``) the first stage
(BM25 ``auto`` over ``ParagraphTextSplitter`` chunks, the package's default chunking) returns ``depth`` candidates;
each gets the feature row of :func:`~langchain_ragspine.document_compressors.learned.features.candidate_features`
and the label 1 when it comes from the question's document and contains one of its gold answers (NFKC) — the rule
of answer recall (:func:`~langchain_ragspine.evaluation.metrics.first_answer_rank`).  The questions are split by
document (a held-out share of the documents, chosen by a hash of the document id, so the split is the same on
every run and no article is on both sides); LambdaMART is fitted on the rest with early stopping on the held-out
questions' nDCG@1, and the held-out answer recall@1 is reported before (the first stage's order) and after (the
reranked order).  RESTRICTED chunks are dropped before any feature is computed.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from langchain_ragspine.document_compressors.learned.features import (
    FEATURE_NAMES,
    candidate_features,
    query_terms,
)
from langchain_ragspine.document_compressors.learned.model import (
    LearnedModel,
    check_model_path,
    require_lightgbm,
    train_lambdarank,
)
from langchain_ragspine.evaluation.datasets import QADataset
from langchain_ragspine.evaluation.metrics import is_answer_passage
from langchain_ragspine.pipeline.modes import mode_factory
from langchain_ragspine.progress import progress_bar
from langchain_ragspine.retrievers.contract import invoke_retriever
from langchain_ragspine.sensitivity import drop_restricted
from langchain_ragspine.text_splitters import ParagraphTextSplitter

__all__ = ["DEFAULT_DEPTH", "DEFAULT_HELD_OUT", "FitReport", "TrainingGroups", "fit_reranker", "held_out_split",
           "recall_at_1", "training_groups"]

#: Candidates per question the reranker is trained on (the first stage's top 30).
DEFAULT_DEPTH = 30
#: Share of the documents whose questions are held out for early stopping and the before/after report.
DEFAULT_HELD_OUT = 0.2

FirstStage = Callable[[list[Document]], BaseRetriever]


@dataclass
class TrainingGroups:
    """Feature rows of every question's candidates, one group per question, in question order.

    Attributes:
        features: ``(n, len(FEATURE_NAMES))`` float64.
        labels: ``(n,)`` 0 / 1.
        groups: candidates per question.
        question_ids / doc_ids / datasets: per question.
    """

    features: np.ndarray
    labels: np.ndarray
    groups: list[int]
    question_ids: list[str] = field(default_factory=list)
    doc_ids: list[str] = field(default_factory=list)
    datasets: list[str] = field(default_factory=list)

    def subset(self, keep: Sequence[bool]) -> TrainingGroups:
        """The groups whose ``keep`` entry is true (one entry per question)."""
        starts = np.concatenate([[0], np.cumsum(self.groups)]).astype(int)
        rows = np.concatenate([np.arange(starts[i], starts[i + 1]) for i, k in enumerate(keep) if k] or
                              [np.zeros(0, dtype=int)])
        pick = [i for i, k in enumerate(keep) if k]
        return TrainingGroups(self.features[rows], self.labels[rows], [self.groups[i] for i in pick],
                              [self.question_ids[i] for i in pick], [self.doc_ids[i] for i in pick],
                              [self.datasets[i] for i in pick])

    @staticmethod
    def concat(parts: Sequence[TrainingGroups]) -> TrainingGroups:
        """The groups of ``parts``, one after another."""
        width = len(FEATURE_NAMES) if not parts else parts[0].features.shape[1]
        return TrainingGroups(
            np.concatenate([p.features for p in parts]) if parts else np.zeros((0, width)),
            np.concatenate([p.labels for p in parts]) if parts else np.zeros(0),
            [g for p in parts for g in p.groups], [q for p in parts for q in p.question_ids],
            [d for p in parts for d in p.doc_ids], [s for p in parts for s in p.datasets])


def training_groups(
    dataset: QADataset,
    *,
    depth: int = DEFAULT_DEPTH,
    tokenizer: str = "auto",
    first_stage: FirstStage | None = None,
    limit: int | None = None,
    progress: bool = False,
) -> TrainingGroups:
    """The candidates, features and labels of ``dataset``'s questions (the first ``limit``, default all).

    ``first_stage`` builds the retriever from the chunks (default: BM25 with ``tokenizer`` over
    ``ParagraphTextSplitter()`` chunks, ``depth`` results).  A question none of whose candidates is relevant
    still makes a group (all labels 0): it counts in the recall and LightGBM learns nothing from it.
    """
    chunks = ParagraphTextSplitter().split_documents(dataset.docs)
    factory = first_stage or mode_factory("bm25", k=depth, tokenizer=tokenizer)
    retriever = factory(chunks)
    rows: list[np.ndarray] = []
    labels: list[np.ndarray] = []
    out = TrainingGroups(np.zeros((0, len(FEATURE_NAMES))), np.zeros(0), [])
    questions = dataset.questions[:limit] if limit is not None else dataset.questions
    for q in progress_bar(questions, desc=f"features {dataset.name}", unit="q", show=progress):
        docs = drop_restricted(invoke_retriever(retriever, q.question, k=depth))[:depth]
        if not docs:
            continue
        rows.append(candidate_features(query_terms(q.question, tokenizer), docs, tokenizer=tokenizer))
        labels.append(np.array([1.0 if is_answer_passage(d, q.doc_id, q.answers) else 0.0 for d in docs]))
        out.groups.append(len(docs))
        out.question_ids.append(q.id)
        out.doc_ids.append(q.doc_id)
        out.datasets.append(dataset.name)
    if rows:
        out.features = np.concatenate(rows)
        out.labels = np.concatenate(labels)
    return out


def held_out_split(doc_ids: Sequence[str], share: float = DEFAULT_HELD_OUT) -> list[bool]:
    """``True`` for the questions held out: those whose document's id hashes (SHA-256) into the first ``share``
    of the range — about ``share`` of the documents, the same on every run and machine."""
    if not 0.0 < share < 1.0:
        raise ValueError(f"held-out share must be in (0, 1), got {share}")
    return [int.from_bytes(hashlib.sha256(d.encode("utf-8")).digest()[:8], "big") / 2**64 < share for d in doc_ids]


def recall_at_1(groups: TrainingGroups, scores: np.ndarray | None = None) -> float:
    """Answer recall@1 of ``groups``: the share of questions whose first candidate is relevant — in the first
    stage's order (``scores=None``) or by ``scores`` (highest first; ties keep the first stage's order)."""
    if not groups.groups:
        return float("nan")
    hits, start = 0, 0
    for g in groups.groups:
        best = start if scores is None else start + int(np.argmax(scores[start:start + g]))
        hits += int(groups.labels[best] > 0)
        start += g
    return hits / len(groups.groups)


@dataclass
class FitReport:
    """What :func:`fit_reranker` did: the model file, the held-out answer recall@1 before and after, sizes, time,
    and ``n_without_answer``: questions none of whose first-stage candidates holds a gold answer (the answer is in
    no chunk of its document, the document is RESTRICTED, or BM25 does not reach it within ``depth``) — they teach
    the ranker nothing."""

    path: Path | None
    model: LearnedModel
    before_at_1: float
    after_at_1: float
    n_train: int
    n_held_out: int
    trees: int
    seconds: float
    n_without_answer: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def fit_reranker(
    datasets: Sequence[QADataset],
    out: str | os.PathLike[str] | None = None,
    *,
    depth: int = DEFAULT_DEPTH,
    held_out: float = DEFAULT_HELD_OUT,
    tokenizer: str = "auto",
    feature_names: Sequence[str] = FEATURE_NAMES,
    params: dict[str, Any] | None = None,
    training: dict[str, Any] | None = None,
    groups: TrainingGroups | None = None,
    progress: bool = False,
) -> FitReport:
    """Fit a learned reranker to ``datasets``' questions and save it to ``out`` (and ``<out>.json``).

    Args:
        datasets: QA datasets (:func:`~langchain_ragspine.evaluation.load_qa`).
        out: the model file to write; ``None`` writes nothing.
        depth: first-stage candidates per question (default 30).
        held_out: share of the documents held out for early stopping and the report (default 0.2).
        tokenizer: of the first stage and the content-term features (default ``"auto"``).
        feature_names: the features to train on (default all; a subset for ablations).
        params: LightGBM parameters over :data:`~langchain_ragspine.document_compressors.learned.model.DEFAULT_PARAMS`.
        training: facts recorded in the sidecar (e.g. the command that rebuilds the file).
        groups: precomputed :func:`training_groups` of ``datasets`` (to skip the first stage).

    Raises:
        ValueError: no question has a relevant candidate on one side of the split (too few questions or
            documents: the message says how many there are).
        ImportError: LightGBM is not installed (the ``learn`` extra).
    """
    t0 = time.perf_counter()
    require_lightgbm()  # before the first stage runs over every question
    if out is not None:
        check_model_path(out)
    if groups is None:
        groups = TrainingGroups.concat([training_groups(d, depth=depth, tokenizer=tokenizer, progress=progress)
                                        for d in datasets])
    keys = [f"{s}/{d}" for s, d in zip(groups.datasets, groups.doc_ids, strict=True)]
    held = held_out_split(keys, held_out)
    train, valid = groups.subset([not h for h in held]), groups.subset(held)
    if not train.labels.any() or not valid.labels.any():
        raise ValueError(f"cannot fit: {len(train.groups)} training and {len(valid.groups)} held-out questions, and "
                         "one side has no question whose candidates hold its answer; label more questions (over "
                         f"more documents), or change the held-out share (--held-out, now {held_out})")
    cols = [FEATURE_NAMES.index(f) for f in feature_names]
    info = {"datasets": list(dict.fromkeys(groups.datasets)), "questions": len(groups.groups), "depth": depth,
            "held_out_share": held_out, "train_questions": len(train.groups),
            "held_out_questions": len(valid.groups), **(training or {})}
    model = train_lambdarank(train.features[:, cols], train.labels, train.groups,
                             valid=(valid.features[:, cols], valid.labels, valid.groups), feature_names=feature_names,
                             params=params, tokenizer=tokenizer, depth=depth, training=info)
    before, after = recall_at_1(valid), recall_at_1(valid, model.score(valid.features[:, cols]))
    model.training["held_out_recall@1"] = {"before": round(before, 6), "after": round(after, 6)}
    path = model.save(out) if out is not None else None
    starts = np.concatenate([[0], np.cumsum(groups.groups)]).astype(int)
    answered = sum(bool(groups.labels[a:b].any()) for a, b in zip(starts[:-1], starts[1:], strict=True))
    asked = sum(len(d.questions) for d in datasets) if datasets else len(groups.groups)
    return FitReport(path=path, model=model, before_at_1=before, after_at_1=after, n_train=len(train.groups),
                     n_held_out=len(valid.groups), trees=int(model.booster.num_trees()),
                     seconds=time.perf_counter() - t0, n_without_answer=max(0, asked - answered))
