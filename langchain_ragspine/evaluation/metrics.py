"""Retrieval metrics on ranked id lists: Recall@k, MRR@k, nDCG@k, hit rate@k, and answer recall@k.

Every metric here is a pure function of *one* query's ranking; averaging over queries is the caller's job
(:func:`mean`, or :func:`~langchain_ragspine.evaluation.runner.evaluate`).  The inputs are:

* ``ranked`` — retrieved ids, best first.  Only the first occurrence of an id counts; later duplicates are
  dropped *before* cutting at ``k`` (so ``k`` counts distinct ids), as in ``trec_eval``, ``pytrec_eval`` and
  ``ranx``, whose runs are ``{doc_id: score}`` mappings and cannot hold a duplicate.
* ``qrels`` — relevance judgements ``{id: grade}``.  ``grade > 0`` is relevant; ``grade <= 0`` (TREC's 0 and
  BEIR's occasional negative labels) is judged non-relevant.  Unjudged ids are non-relevant.

Definitions (``rel_i`` = grade of the result at rank ``i`` when it is relevant, else 0; ``R`` = the set of
relevant ids; ranks start at 1):

* Recall@k = ``|{relevant ids in the top k}| / |R|`` — the standard IR measure (Manning, Raghavan & Schütze,
  *Introduction to Information Retrieval*, 2008, §8.3).
* MRR@k = ``1 / rank`` of the first relevant id within the top k, else 0 (Voorhees, "The TREC-8 Question
  Answering Track Report", 1999); the mean over queries is the *mean* reciprocal rank.
* nDCG@k = ``DCG@k / IDCG@k`` with ``DCG@k = Σ_{i=1..k} rel_i / log2(i + 1)`` — gain = grade, log2 discount —
  and ``IDCG@k`` the DCG@k of the judged grades sorted in decreasing order (Järvelin & Kekäläinen, "Cumulated
  gain-based evaluation of IR techniques", ACM TOIS 20(4), 2002).  This is the linear-gain form used by
  ``trec_eval``'s ``ndcg_cut`` and ``ranx``'s ``ndcg``; BEIR's tables use the same via ``pytrec_eval``.  (The
  exponential gain ``2^grade - 1`` of Burges et al. 2005 is ``ranx``'s ``ndcg_burges``; it agrees only for
  binary grades.)
* Hit rate@k (also "success@k", "top-k accuracy") = 1 if any relevant id is in the top k, else 0.
* Answer recall@k — the QA retrieval measure of DPR (Karpukhin et al., "Dense Passage Retrieval for
  Open-Domain Question Answering", EMNLP 2020: "top-k retrieval accuracy", a passage counts if it contains an
  answer span), made strict: a retrieved chunk counts only if it comes from the question's own document
  (``metadata["doc_id"]``) *and* contains one of the gold answers verbatim after Unicode NFKC normalisation of
  both sides.

Conventions when a query has no relevant id: :func:`recall_at_k`, :func:`mrr_at_k`, :func:`ndcg_at_k` and
:func:`hit_rate_at_k` return ``0.0`` (there is nothing to find).  Such queries are normally *excluded* from
the average (the runner does), because they only pull every system towards 0 equally.

Agreement with ``ranx`` (checked to 1e-9 by a property test in
``tests/unit_tests/evaluation/test_evaluation_metrics.py``): ``ranx.evaluate(qrels, run, ["recall@k", "mrr@k", "ndcg@k",
"hit_rate@k"])`` gives the mean of these functions over the queries when

* the run's scores are distinct per query (ranx sorts by score with an unstable sort, so the order of tied
  scores is unspecified — here the order is the list order, which has no ties);
* every query is in both the qrels and the run (ranx asserts equal key sets unless ``make_comparable=True``);
* the mean is taken over *all* queries, including those without a relevant id (ranx scores them 0 and keeps
  them in the mean, as ``trec_eval`` does; our runner leaves them out);
* relevance level ``1`` (ranx's default ``-l1``): ranx drops judgements below 1, which is exactly our
  ``grade <= 0`` for integer grades.

ranx also hashes doc ids to 64-bit integers stored in ``float64``
(``ranx.data_structures.common.to_typed_list``), so two distinct ids can collide in principle; this module
compares the strings themselves.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

from langchain_core.documents import Document

from langchain_ragspine.arguments import check_k
from langchain_ragspine.text.folding import normalize

__all__ = [
    "answer_recall_at_k",
    "dcg_at_k",
    "dedupe",
    "first_answer_rank",
    "hit_rate_at_k",
    "is_answer_passage",
    "mean",
    "mrr_at_k",
    "ndcg_at_k",
    "recall_at_k",
]


def dedupe(ranked: Iterable[str]) -> list[str]:
    """``ranked`` with every id after its first occurrence removed, order kept.

    Example:
        >>> dedupe(["a", "b", "a", "c", "b"])
        ['a', 'b', 'c']
    """
    seen: set[str] = set()
    out: list[str] = []
    for rid in ranked:
        if rid not in seen:
            seen.add(rid)
            out.append(rid)
    return out


def _top(ranked: Sequence[str], k: int) -> list[str]:
    """The first ``k`` distinct ids of ``ranked``."""
    k = check_k(k)
    seen: set[str] = set()
    out: list[str] = []
    for rid in ranked:
        if rid in seen:
            continue
        seen.add(rid)
        out.append(rid)
        if len(out) == k:
            break
    return out


def _relevant(qrels: Mapping[str, int]) -> set[str]:
    return {doc_id for doc_id, grade in qrels.items() if grade > 0}


def recall_at_k(ranked: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    """Recall@k = |relevant ids among the first ``k`` distinct ids of ``ranked``| / |relevant ids|.

    Args:
        ranked: retrieved ids, best first (duplicates after the first occurrence are ignored).
        qrels: ``{id: grade}``; ``grade > 0`` is relevant.
        k: cutoff, ``>= 1``.

    Returns:
        A value in [0, 1]; ``0.0`` when ``qrels`` has no relevant id (such queries are normally excluded from
        the average; see the module docstring).

    Raises:
        ValueError: ``k < 1``.  TypeError: ``k`` is not an int.
    """
    top = _top(ranked, k)
    relevant = _relevant(qrels)
    if not relevant:
        return 0.0
    return sum(1 for rid in top if rid in relevant) / len(relevant)


def mrr_at_k(ranked: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    """Reciprocal rank at k: ``1 / r`` for the rank ``r`` (from 1) of the first relevant id within the first
    ``k`` distinct ids, else ``0.0``.

    Raises:
        ValueError: ``k < 1``.  TypeError: ``k`` is not an int.
    """
    top = _top(ranked, k)
    relevant = _relevant(qrels)
    for rank, rid in enumerate(top, start=1):
        if rid in relevant:
            return 1.0 / rank
    return 0.0


def dcg_at_k(gains: Sequence[float], k: int) -> float:
    """``DCG@k = Σ_{i=1..min(k, len(gains))} gains[i-1] / log2(i + 1)`` (Järvelin & Kekäläinen 2002).

    Raises:
        ValueError: ``k < 1``.  TypeError: ``k`` is not an int.
    """
    k = check_k(k)
    return sum(g / math.log2(i + 1) for i, g in enumerate(gains[:k], start=1))


def ndcg_at_k(ranked: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    """nDCG@k with gain = grade and a log2 discount: ``DCG@k / IDCG@k``.

    ``DCG@k = Σ_{i=1..k} g_i / log2(i + 1)`` where ``g_i`` is the grade of the i-th distinct retrieved id if
    it is relevant (grade > 0), else 0.  ``IDCG@k`` is the same sum over the positive judged grades sorted in
    decreasing order, cut at ``k``.

    Returns:
        A value in [0, 1]; ``0.0`` when ``IDCG@k = 0`` (no relevant id).

    Raises:
        ValueError: ``k < 1``.  TypeError: ``k`` is not an int.
    """
    top = _top(ranked, k)
    ideal = sorted((g for g in qrels.values() if g > 0), reverse=True)
    idcg = dcg_at_k(ideal, k)
    if idcg == 0:
        return 0.0
    gains = [g if (g := qrels.get(rid, 0)) > 0 else 0 for rid in top]
    return dcg_at_k(gains, k) / idcg


def hit_rate_at_k(ranked: Sequence[str], qrels: Mapping[str, int], k: int) -> float:
    """``1.0`` if any of the first ``k`` distinct ids of ``ranked`` is relevant, else ``0.0``.

    Raises:
        ValueError: ``k < 1``.  TypeError: ``k`` is not an int.
    """
    relevant = _relevant(qrels)
    return 1.0 if any(rid in relevant for rid in _top(ranked, k)) else 0.0


def first_answer_rank(docs: Sequence[Document], doc_id: str, answers: Sequence[str]) -> int | None:
    """Rank (from 1) of the first document in ``docs`` whose ``metadata["doc_id"]`` equals ``doc_id`` and
    whose ``page_content`` contains one of ``answers`` verbatim after NFKC normalisation of both; ``None`` if
    there is none.  ``answer_recall@k`` is then ``rank is not None and rank <= k`` for every ``k`` at once.

    ``doc_id`` is compared as a string (``str(metadata["doc_id"])``; a document without one never matches);
    empty answers are ignored (an empty string is contained in every text and would make every same-document
    chunk a hit).

    Example:
        >>> d = Document(page_content="東京は日本の首都", metadata={"doc_id": "a"})
        >>> first_answer_rank([d], "a", ["日本"]), first_answer_rank([d], "b", ["日本"])
        (1, None)
    """
    wanted = [n for a in answers if (n := normalize(a))]
    if not wanted:
        return None
    for rank, doc in enumerate(docs, start=1):
        got = doc.metadata.get("doc_id")
        if got is None or str(got) != str(doc_id):
            continue
        text = normalize(doc.page_content)
        if any(a in text for a in wanted):
            return rank
    return None


def is_answer_passage(doc: Document, doc_id: str, answers: Sequence[str]) -> bool:
    """Whether ``doc`` is a gold passage of a question: from document ``doc_id`` and holding one of ``answers``
    verbatim after NFKC — the hit of :func:`first_answer_rank` and answer recall, the label of the learned
    reranker's training rows and the gold passage of answer evaluation's citation measures."""
    return first_answer_rank([doc], doc_id, answers) is not None


def answer_recall_at_k(docs: Sequence[Document], *, doc_id: str, answers: Sequence[str], k: int) -> float:
    """``1.0`` if one of the first ``k`` retrieved ``docs`` comes from document ``doc_id`` and contains a gold
    answer (NFKC on both sides), else ``0.0``.  See :func:`first_answer_rank`.

    Raises:
        ValueError: ``k < 1``.  TypeError: ``k`` is not an int.
    """
    k = check_k(k)
    rank = first_answer_rank(docs[:k], doc_id, answers)
    return 1.0 if rank is not None else 0.0


def mean(values: Iterable[float]) -> float:
    """Arithmetic mean; ``nan`` for no values (so an empty average is visible, not a fake 0)."""
    total = 0.0
    n = 0
    for v in values:
        total += v
        n += 1
    return total / n if n else math.nan
