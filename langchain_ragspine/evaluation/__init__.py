"""Retrieval evaluation: metrics, dataset readers, a runner for any LangChain retriever, and plots.

* :mod:`.metrics` — Recall@k, MRR@k, nDCG@k (Järvelin & Kekäläinen 2002), hit rate@k and answer recall@k
  (DPR's top-k accuracy, strict: same document + verbatim answer after NFKC) on ranked id lists;
* :mod:`.datasets` — BEIR-layout and QA-layout readers, and the paragraph-id mapping of the QA data;
* :mod:`.runner` — :func:`evaluate` a retriever (or a factory) and report per-query / aggregate metrics,
  latency and index time as JSON or Markdown;
* :mod:`.significance` — paired differences between two configurations on the same questions, with a paired
  bootstrap interval and a randomisation-test p-value;
* :mod:`.plots` — recall@k curves and latency-vs-quality scatter plots (matplotlib, extra ``eval``).
"""

from langchain_ragspine.evaluation.datasets import (
    BEIRDataset,
    QADataset,
    QAQuestion,
    load_beir,
    load_dataset,
    load_qa,
    paragraph_id,
    paragraph_ids_for,
    paragraph_spans_of,
)
from langchain_ragspine.evaluation.metrics import (
    answer_recall_at_k,
    dcg_at_k,
    dedupe,
    first_answer_rank,
    hit_rate_at_k,
    mean,
    mrr_at_k,
    ndcg_at_k,
    recall_at_k,
)
from langchain_ragspine.evaluation.plots import plot_latency_quality, plot_recall_curves
from langchain_ragspine.evaluation.runner import (
    DEFAULT_KS,
    EvalResult,
    compare_markdown,
    evaluate,
    paired_markdown,
)
from langchain_ragspine.evaluation.significance import (
    PairedComparison,
    compare_paired,
    paired_bootstrap_interval,
    paired_randomization_test,
)

__all__ = [
    "BEIRDataset",
    "DEFAULT_KS",
    "EvalResult",
    "QADataset",
    "PairedComparison",
    "QAQuestion",
    "answer_recall_at_k",
    "compare_markdown",
    "compare_paired",
    "dcg_at_k",
    "dedupe",
    "evaluate",
    "first_answer_rank",
    "hit_rate_at_k",
    "load_beir",
    "load_dataset",
    "load_qa",
    "mean",
    "mrr_at_k",
    "ndcg_at_k",
    "paired_bootstrap_interval",
    "paired_markdown",
    "paired_randomization_test",
    "paragraph_id",
    "paragraph_ids_for",
    "paragraph_spans_of",
    "plot_latency_quality",
    "plot_recall_curves",
    "recall_at_k",
]
