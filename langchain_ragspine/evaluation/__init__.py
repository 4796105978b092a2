"""Retrieval evaluation: metrics, dataset readers, a runner for any LangChain retriever, and plots.

* :mod:`.metrics` — Recall@k, MRR@k, nDCG@k (Järvelin & Kekäläinen 2002), hit rate@k and answer recall@k
  (DPR's top-k accuracy, strict: same document + verbatim answer after NFKC) on ranked id lists;
* :mod:`.datasets` — BEIR-layout and QA-layout readers, and the paragraph-id mapping of the QA data;
* :mod:`.runner` — :func:`evaluate` a retriever (or a factory) and report per-query / aggregate metrics,
  latency and index time as JSON or Markdown;
* :mod:`.significance` — paired differences between two configurations on the same questions, with a paired
  bootstrap interval and a randomisation-test p-value;
* :mod:`.answers` — :func:`evaluate_answers` scores what a graph or chain answers: correctness (gold in answer,
  exact match, token F1 with CJK-aware normalisation), citation precision / recall, faithfulness (lexical offline,
  an LLM judge when given), answer relevance (judge), refusals and false refusals, model calls and latency; and
  the export in RAGAS's columns (:func:`write_ragas`);
* :mod:`.plots` — recall@k curves and latency-vs-quality scatter plots (matplotlib, extra ``eval``).
"""

from langchain_ragspine.evaluation.answers import (
    ANSWER_METRICS,
    RAGAS_COLUMNS,
    AnswerJudge,
    answer_tokens,
    answers_markdown,
    citation_scores,
    contains_answer,
    evaluate_answers,
    exact_match,
    lexical_faithfulness,
    normalize_answer,
    paired_answer_metrics,
    parse_relevance_verdict,
    parse_support_verdicts,
    ragas_rows,
    reads_as_refusal,
    token_f1,
    write_ragas,
)
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
    is_answer_passage,
    mean,
    mrr_at_k,
    ndcg_at_k,
    recall_at_k,
)
from langchain_ragspine.evaluation.plots import plot_answer_metrics, plot_latency_quality, plot_recall_curves
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
    "ANSWER_METRICS",
    "AnswerJudge",
    "RAGAS_COLUMNS",
    "answer_tokens",
    "answers_markdown",
    "citation_scores",
    "contains_answer",
    "evaluate_answers",
    "exact_match",
    "lexical_faithfulness",
    "normalize_answer",
    "paired_answer_metrics",
    "parse_relevance_verdict",
    "parse_support_verdicts",
    "ragas_rows",
    "reads_as_refusal",
    "token_f1",
    "write_ragas",
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
    "is_answer_passage",
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
    "plot_answer_metrics",
    "plot_latency_quality",
    "plot_recall_curves",
    "recall_at_k",
]
