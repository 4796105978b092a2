"""Evaluate any LangChain retriever on a QA or BEIR dataset: quality metrics, latency and index time.

:func:`evaluate` runs every question through a ``BaseRetriever`` — ours or LangChain's own, so they can be
compared on the same data — and scores the rankings with :mod:`langchain_ragspine.evaluation.metrics`:

* QA datasets (:class:`~langchain_ragspine.evaluation.datasets.QADataset`): answer recall@k for every ``k`` in
  ``ks`` (a hit when a top-k chunk comes from the question's document and contains a gold answer, NFKC), and —
  when the dataset has paragraph-level qrels in ``beir/`` — nDCG@10, MRR@10 and Recall@k over paragraph ids;
* BEIR datasets (:class:`~langchain_ragspine.evaluation.datasets.BEIRDataset`): nDCG@10, MRR@10 and Recall@k
  over corpus ids — the measures reported by BEIR (Thakur et al., NeurIPS 2021).

Latency is the wall time of each ``invoke`` (p50/p95 in milliseconds, linear-interpolated percentiles); index
time is the wall time of the factory call when a factory is given.  The result serialises to JSON and
Markdown.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_text_splitters import TextSplitter

from langchain_ragspine.arguments import DEFAULT_KS, check_int, check_k
from langchain_ragspine.documents import doc_key
from langchain_ragspine.evaluation.datasets import (
    BEIRDataset,
    QADataset,
    paragraph_id,
    paragraph_spans_of,
)
from langchain_ragspine.evaluation.metrics import (
    dedupe,
    first_answer_rank,
    mean,
    mrr_at_k,
    ndcg_at_k,
    recall_at_k,
)
from langchain_ragspine.evaluation.significance import (
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    PairedComparison,
    compare_paired,
    significance_metrics,
)
from langchain_ragspine.progress import progress_bar, reporting
from langchain_ragspine.retrievers.contract import invoke_retriever, retriever_params
from langchain_ragspine.text_splitters import ParagraphTextSplitter
from langchain_ragspine.tokenizers import tokenizer_name

__all__ = [
    "DEFAULT_KS",
    "EvalResult",
    "RetrieverFactory",
    "compare_markdown",
    "evaluate",
    "format_metric",
    "latency_percentiles",
    "paired_markdown",
]

#: Cutoff of the nDCG and MRR columns (BEIR's headline nDCG@10).
RANK_CUTOFF = 10
#: How many retrieved ids each per-query record keeps (for inspection).
KEEP_RETRIEVED = 10

RetrieverFactory = Callable[[list[Document]], BaseRetriever]


# ---------------------------------------------------------------------------------------------------- result


def _finite(value: Any) -> Any:
    """NaN/inf → ``None`` recursively, so the JSON is standard."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _md_escape(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def format_metric(value: float | None, digits: int = 4) -> str:
    """``value`` with ``digits`` decimals for a Markdown table; ``"–"`` for ``None`` or NaN."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.{digits}f}"


@dataclass
class EvalResult:
    """The outcome of :func:`evaluate`.

    Attributes:
        name: a label for tables and plots (default: the retriever class name).
        config: how the run was set up — ``retriever`` (qualified class name), ``retriever_params`` (its
            ``k``, ``tokenizer`` / ``preprocess_func``, ``k1``, ``b``, ``search_kwargs`` where present),
            ``factory``, ``splitter`` (class, ``chunk_size``, ``chunk_overlap``) when the runner split the
            documents, ``dataset``, ``dataset_kind`` (``"qa"`` / ``"beir"``), ``n_questions``, ``n_judged``
            (questions with a relevant qrels entry), ``n_units`` (chunks or corpus documents indexed), ``ks``,
            ``depth`` (results requested per question), ``depth_via`` (how it was requested),
            ``split_seconds``.
        per_query: one dict per question: ``id``, ``latency_ms``, ``n_retrieved``, ``retrieved`` (the first
            :data:`KEEP_RETRIEVED` chunk / corpus ids), for QA ``answer_rank`` (``None`` = no hit within
            ``depth``) and ``answer_recall@k``, and the qrels metrics (``None`` for an unjudged question).
        aggregate: metric name → mean over the questions (answer recall: all questions; qrels metrics: judged
            questions only).  Names: ``answer_recall@k``, ``ndcg@10``, ``mrr@10``, ``recall@k``.
        latency_ms: ``{"p50": ..., "p95": ..., "mean": ...}`` over the ``invoke`` calls, in milliseconds.
        index_seconds: wall time of the factory call, ``None`` when a built retriever was given.
    """

    name: str
    config: dict[str, Any]
    per_query: list[dict[str, Any]]
    aggregate: dict[str, float]
    latency_ms: dict[str, float]
    index_seconds: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The result as plain JSON data (NaN becomes ``None``)."""
        return _finite(dataclasses.asdict(self))

    def to_json(self, *, indent: int | None = None) -> str:
        """JSON text (``ensure_ascii=False``, so CJK stays readable)."""
        return json.dumps(self.to_dict(), ensure_ascii=False, indent=indent)

    @classmethod
    def from_json(cls, text: str) -> EvalResult:
        """Rebuild a result from :meth:`to_json` output (``None`` metric values become NaN).

        Raises:
            ValueError: ``text`` is not JSON of a result.
        """
        data = json.loads(text)
        try:
            aggregate = {k: math.nan if v is None else float(v) for k, v in data["aggregate"].items()}
            latency = {k: math.nan if v is None else float(v) for k, v in data["latency_ms"].items()}
            return cls(
                name=str(data["name"]),
                config=dict(data["config"]),
                per_query=list(data["per_query"]),
                aggregate=aggregate,
                latency_ms=latency,
                index_seconds=data.get("index_seconds"),
            )
        except (KeyError, TypeError, AttributeError) as exc:
            raise ValueError(f"not an EvalResult JSON: {exc!r}") from None

    def to_markdown(self) -> str:
        """A Markdown section: a one-line description of the setup and a ``metric | value`` table."""
        cfg = self.config
        params = ", ".join(f"{k}={v}" for k, v in cfg.get("retriever_params", {}).items())
        lines = [
            f"### {_md_escape(self.name)}",
            "",
            f"{_md_escape(cfg.get('retriever', '?'))}({_md_escape(params)}) on "
            f"`{_md_escape(cfg.get('dataset', '?'))}` — {cfg.get('n_questions', '?')} questions "
            f"({cfg.get('n_judged', 0)} with qrels), {cfg.get('n_units', '?')} units indexed, "
            f"depth {cfg.get('depth')}",
            "",
            "| metric | value |",
            "|---|---:|",
        ]
        lines += [f"| {m} | {format_metric(v)} |" for m, v in self.aggregate.items()]
        lines.append(f"| latency p50 (ms) | {format_metric(self.latency_ms.get('p50'), 2)} |")
        lines.append(f"| latency p95 (ms) | {format_metric(self.latency_ms.get('p95'), 2)} |")
        lines.append(f"| index time (s) | {format_metric(self.index_seconds, 2)} |")
        return "\n".join(lines) + "\n"


def compare_markdown(
    results: Sequence[EvalResult],
    *,
    baseline: str | None = None,
    significance: bool = True,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> str:
    """One Markdown table with a column per result and a row per metric (the union, in first-seen order), then
    latency p50/p95 and index time.  The best value of each row is bold (highest quality, lowest time).

    With two or more results and ``significance`` (the default), a second table follows: for every result other
    than the baseline, the paired difference to the baseline on the same questions with its 95% bootstrap
    interval and randomisation-test p-value (:func:`~langchain_ragspine.evaluation.significance.compare_paired`:
    answer recall@k and nDCG@10; ``n.s.`` marks a difference that is not significant: its interval contains 0 or
    p >= 0.05).

    Args:
        results: the results to show, all on the same dataset.
        baseline: the name of the result the others are compared with (default: the first).
        significance: add the paired-difference table.
        n_resamples, seed: bootstrap / randomisation resamples (default 10,000) and their seed (default 0).

    Raises:
        ValueError: ``results`` is empty, or ``baseline`` is not one of their names.
    """
    if not results:
        raise ValueError("compare_markdown needs at least one result")
    names = [r.name for r in results]
    if baseline is not None and baseline not in names:
        raise ValueError(f"baseline {baseline!r} is not one of the results: {names}")
    metrics: list[str] = []
    for r in results:
        metrics += [m for m in r.aggregate if m not in metrics]
    rows: list[tuple[str, list[float | None], bool, int]] = [
        (m, [r.aggregate.get(m) for r in results], True, 4) for m in metrics
    ]
    rows.append(("latency p50 (ms)", [r.latency_ms.get("p50") for r in results], False, 2))
    rows.append(("latency p95 (ms)", [r.latency_ms.get("p95") for r in results], False, 2))
    rows.append(("index time (s)", [r.index_seconds for r in results], False, 2))
    header = "| metric | " + " | ".join(_md_escape(r.name) for r in results) + " |"
    lines = [header, "|---|" + "---:|" * len(results)]
    for label, values, higher_better, digits in rows:
        ok = [v for v in values if v is not None and not math.isnan(v)]
        best = (max(ok) if higher_better else min(ok)) if len(ok) > 1 else None
        cells = []
        for v in values:
            cell = format_metric(v, digits)
            if best is not None and v == best:
                cell = f"**{cell}**"
            cells.append(cell)
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    if significance and len(results) > 1:
        base = results[names.index(baseline)] if baseline is not None else results[0]
        text += "\n" + paired_markdown(base, [r for r in results if r is not base], n_resamples=n_resamples, seed=seed)
    return text


def paired_markdown(
    baseline: EvalResult,
    others: Sequence[EvalResult],
    *,
    metrics: Sequence[str] | None = None,
    n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> str:
    """A Markdown table of paired differences ``other - baseline``: a row per metric, a column per other result,
    each cell ``difference [low, high] p=…`` (95% paired bootstrap interval, two-sided randomisation p-value;
    `` n.s.`` when not significant, see :attr:`~langchain_ragspine.evaluation.significance.PairedComparison.significant`).
    A result evaluated on other questions gets ``not paired`` cells.

    Args:
        baseline: the result every other is compared with.
        others: the other results.
        metrics: default :func:`~langchain_ragspine.evaluation.significance.significance_metrics` of the baseline.
        n_resamples, seed: see :func:`~langchain_ragspine.evaluation.significance.compare_paired`.
    """
    names = list(metrics) if metrics is not None else significance_metrics(baseline)
    columns: list[dict[str, PairedComparison] | None] = []
    n = 0
    for other in others:
        try:
            found = compare_paired(baseline, other, names, n_resamples=n_resamples, seed=seed)
        except ValueError:
            columns.append(None)
            continue
        columns.append({c.metric: c for c in found})
        n = max([n, *(c.n for c in found)])
    lines = [
        f"Paired difference to **{_md_escape(baseline.name)}** on the same questions (n = {n}): mean difference "
        f"[95% paired bootstrap interval] and two-sided randomisation p ({n_resamples:,} resamples, seed {seed}); "
        "n.s. = not significant (the interval contains 0 or p >= 0.05).",
        "",
        "| metric | " + " | ".join(f"{_md_escape(o.name)} − {_md_escape(baseline.name)}" for o in others) + " |",
        "|---|" + "---:|" * len(others),
    ]
    for metric in names:
        cells = []
        for col in columns:
            if col is None:
                cells.append("not paired")
            elif metric not in col:
                cells.append("–")
            else:
                cells.append(col[metric].cell(p_value=True))
        lines.append(f"| {metric} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------------- helpers


def _check_ks(ks: Sequence[int]) -> tuple[int, ...]:
    if isinstance(ks, (str, bytes)) or not isinstance(ks, Sequence) or not ks:
        raise ValueError(f"ks must be a non-empty sequence of ints >= 1, got {ks!r}")
    return tuple(sorted({check_k(k, f"ks[{i}]") for i, k in enumerate(ks)}))


def _callable_name(fn: Any) -> str:
    name = tokenizer_name(fn) if callable(fn) else None
    if name is not None:
        return name
    module = getattr(fn, "__module__", None)
    qual = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__
    return f"{module}.{qual}" if module else str(qual)


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if callable(value):
        return _callable_name(value)
    return repr(value)


def _retriever_params(retriever: BaseRetriever) -> dict[str, Any]:
    params: dict[str, Any] = {}
    for key in ("k", "tokenizer", "preprocess_func", "k1", "b", "search_type", "search_kwargs"):
        if hasattr(retriever, key):
            params[key] = _jsonable(getattr(retriever, key))
    bm25_params = getattr(retriever, "bm25_params", None)  # LangChain's (kept in the vectorizer)
    if isinstance(bm25_params, Mapping):
        params["bm25_params"] = _jsonable(bm25_params)
    return params


def _searcher(retriever: BaseRetriever, depth: int) -> tuple[Callable[[str], list[Document]], str]:
    """A ``query -> documents`` function asking ``retriever`` for ``depth`` results, and how it asks.

    The retriever-call contract (:func:`~langchain_ragspine.retrievers.contract.invoke_retriever`) decides:
    ``invoke(query, k=depth)`` for our retrievers and a ``VectorStoreRetriever`` (``"invoke(k=...)"``); a copy
    with ``k = depth`` for a retriever with a ``k`` field (LangChain's ``BM25Retriever``, ``TFIDFRetriever``…;
    ``"k field"``); else the retriever as it is, cut at ``depth`` (``"as returned"``).  The user's retriever object
    is never modified.
    """
    params = retriever_params(retriever)
    via = "k field" if params.k_field else "invoke(k=...)" if params.takes_k else "as returned"
    return (lambda q: invoke_retriever(retriever, q, k=depth)), via


def _corpus_key(doc: Document) -> str | None:
    """A BEIR corpus id: ``metadata["_id"]``, else ``metadata["doc_id"]``, else ``Document.id``."""
    for key in ("_id", "doc_id"):
        value = doc.metadata.get(key)
        if value is not None and value != "":
            return str(value)
    return doc.id or None


class _ParagraphMap:
    """Chunk → paragraph ids, with the paragraph spans of each parent document computed once."""

    def __init__(self, docs: Sequence[Document]) -> None:
        self._docs: dict[str, Document] = {}
        for d in docs:
            key = d.metadata.get("doc_id") or d.id
            if key:
                self._docs.setdefault(str(key), d)
        self._spans: dict[str, tuple[list[int], list[int]]] = {}

    def ids(self, chunk: Document) -> list[str]:
        """Paragraph ids overlapped by ``chunk``, most overlapped characters first (ties in document order).

        The chunk's range in its parent is ``metadata["start_index"]``/``["end_index"]`` minus the parent's
        ``body_offset`` (offsets index the source file, see ``document_loaders.locators``); without
        ``end_index`` it is ``start_index + len(page_content)``; without ``start_index`` the first occurrence
        of the chunk text in the parent.  A chunk whose parent or range cannot be found maps to no paragraph.
        """
        doc_id = chunk.metadata.get("doc_id")
        parent = self._docs.get(str(doc_id)) if doc_id is not None else None
        if parent is None:
            return []
        start = chunk.metadata.get("start_index")
        end = chunk.metadata.get("end_index")
        base = parent.metadata.get("body_offset")
        if isinstance(base, int) and not isinstance(base, bool) and isinstance(start, int) and base > 0:
            start -= base
            end = end - base if isinstance(end, int) else end
        if not isinstance(start, int) or isinstance(start, bool) or start < 0:
            start = parent.page_content.find(chunk.page_content)
            if start < 0:
                return []
            end = start + len(chunk.page_content)
        elif not isinstance(end, int) or isinstance(end, bool) or end < start:
            end = start + len(chunk.page_content)
        key = str(doc_id)
        if key not in self._spans:
            spans = paragraph_spans_of(parent)
            self._spans[key] = ([s for s, _ in spans], [e for _, e in spans])
        starts, ends = self._spans[key]
        # paragraphs n with ends[n] > start and starts[n] < end (both lists are increasing)
        lo = bisect_right(ends, start)
        hi = bisect_left(starts, end)
        hits = sorted(range(lo, hi), key=lambda n: -(min(ends[n], end) - max(starts[n], start)))
        return [paragraph_id(key, n) for n in hits]


def latency_percentiles(values_ms: Sequence[float]) -> dict[str, float]:
    """``{"p50", "p95", "mean"}`` of ``values_ms`` (linear-interpolated percentiles, ``numpy.percentile``); NaN for
    an empty sequence."""
    if not values_ms:
        return {"p50": math.nan, "p95": math.nan, "mean": math.nan}
    arr = np.asarray(values_ms, dtype=np.float64)
    return {
        "p50": float(np.percentile(arr, 50)),
        "p95": float(np.percentile(arr, 95)),
        "mean": float(arr.mean()),
    }


def _qrels_metrics(
    ranked: Sequence[str], qrels: Mapping[str, int] | None, ks: Sequence[int]
) -> dict[str, Any]:
    names = [f"ndcg@{RANK_CUTOFF}", f"mrr@{RANK_CUTOFF}", *(f"recall@{k}" for k in ks)]
    if not qrels or not any(g > 0 for g in qrels.values()):
        return dict.fromkeys(names, None)
    out: dict[str, Any] = {
        f"ndcg@{RANK_CUTOFF}": ndcg_at_k(ranked, qrels, RANK_CUTOFF),
        f"mrr@{RANK_CUTOFF}": mrr_at_k(ranked, qrels, RANK_CUTOFF),
    }
    for k in ks:
        out[f"recall@{k}"] = recall_at_k(ranked, qrels, k)
    return out


# --------------------------------------------------------------------------------------------------- evaluate


def evaluate(
    retriever_or_factory: BaseRetriever | RetrieverFactory,
    dataset: QADataset | BEIRDataset,
    *,
    ks: Sequence[int] = DEFAULT_KS,
    limit: int | None = None,
    splitter: TextSplitter | None = None,
    progress: bool | None = None,
    name: str | None = None,
) -> EvalResult:
    """Run every question of ``dataset`` through a retriever and score the rankings.

    Args:
        retriever_or_factory: a built ``BaseRetriever`` (any: ours, LangChain's, a user's), or a factory
            ``chunks -> BaseRetriever``.  A factory receives the dataset's documents split by ``splitter``
            (QA) or the corpus documents as they are (BEIR), and its call is timed as the index time.
        dataset: a :class:`QADataset` or :class:`BEIRDataset` (see :func:`~.datasets.load_dataset`).
        ks: cutoffs for answer recall@k and Recall@k (default ``(1, 3, 5, 10, 100)``); nDCG and MRR are at 10.
        limit: evaluate only the first ``limit`` questions (in file order for QA, ``queries.jsonl`` order for
            BEIR).
        splitter: how a factory's QA documents are chunked (default ``ParagraphTextSplitter()``: 480/80
            chars).
        progress: ``None`` (default) or ``True``: a progress bar per phase on a terminal or in Jupyter, else a
            start line and a line every ~10 s on stderr (:mod:`langchain_ragspine.progress`); ``False``: silent.
        name: label of the result (default: the retriever's class name).

    Returns:
        An :class:`EvalResult`.

    Each question asks for ``depth = max(ks)`` results (at least 10 when qrels metrics are computed, so
    nDCG@10 and MRR@10 see ten ranks), passing ``k`` the way the retriever accepts it (see
    ``config["depth_via"]``); results beyond ``depth`` are ignored.  QA: answer recall@k for every question;
    with ``dataset.beir`` qrels, the ranked chunks become a ranked list of paragraph ids (each chunk
    contributes the paragraphs its ``start_index``/``end_index`` range overlaps, the most overlapped first —
    so a chunk's 80-character overlap into the previous paragraph does not outrank its own paragraph; repeats
    dropped), scored with nDCG@10, MRR@10 and Recall@k — ``k`` counts paragraphs, not chunks.  BEIR: ranked
    ids are each result's ``metadata["_id"]`` (else ``metadata["doc_id"]``, else ``Document.id``), repeats
    dropped, so chunked corpora score at document level.  Questions without a relevant judgement get ``None``
    qrels metrics and are left out of those averages; BEIR queries without one are not run at all.

    Raises:
        TypeError: ``retriever_or_factory`` is neither a retriever nor a callable, a factory returns something
            that is not a ``BaseRetriever``, ``dataset`` is of an unknown type, or a cutoff in ``ks`` or ``limit`` is
            not an int.
        ValueError: ``ks`` empty or not a sequence, a cutoff < 1, ``limit < 0``, or ``splitter`` given with a built
            retriever.
    """
    with reporting(progress):
        return _evaluate(
            retriever_or_factory, dataset, ks=ks, limit=limit, splitter=splitter, progress=progress, name=name
        )


def _evaluate(
    retriever_or_factory: BaseRetriever | RetrieverFactory,
    dataset: QADataset | BEIRDataset,
    *,
    ks: Sequence[int],
    limit: int | None,
    splitter: TextSplitter | None,
    progress: bool | None,
    name: str | None,
) -> EvalResult:
    ks = _check_ks(ks)
    check_int(limit, "limit", minimum=0, allow_none=True)
    is_factory = not isinstance(retriever_or_factory, BaseRetriever)
    if is_factory and not callable(retriever_or_factory):
        got = type(retriever_or_factory).__name__
        raise TypeError(f"expected a BaseRetriever or a factory chunks -> BaseRetriever, got {got}")
    if not is_factory and splitter is not None:
        raise ValueError("splitter is only used with a factory; a built retriever has already been indexed")

    config: dict[str, Any] = {}
    if isinstance(dataset, QADataset):
        kind = "qa"
        units: list[Document] = dataset.docs
        qrels = dataset.beir.qrels if dataset.beir is not None else None
        questions: list[tuple[str, str]] = [(q.id, q.question) for q in dataset.questions]
    elif isinstance(dataset, BEIRDataset):
        kind = "beir"
        units = dataset.corpus
        qrels = dataset.qrels
        questions = [
            (qid, text)
            for qid, text in dataset.queries.items()
            if any(g > 0 for g in dataset.qrels.get(qid, {}).values())
        ]
        config["n_queries_without_qrels"] = len(dataset.queries) - len(questions)
    else:
        raise TypeError(f"dataset must be a QADataset or a BEIRDataset, got {type(dataset).__name__}")
    if limit is not None:
        questions = questions[:limit]

    index_seconds: float | None = None
    retriever: BaseRetriever
    if isinstance(retriever_or_factory, BaseRetriever):
        retriever = retriever_or_factory
        n_docs = getattr(retriever, "docs", None)
        config["n_units"] = len(n_docs) if isinstance(n_docs, list) else None
    else:
        if kind == "qa":
            sp = splitter if splitter is not None else ParagraphTextSplitter()
            t0 = time.perf_counter()
            units = sp.split_documents(units)
            config["split_seconds"] = time.perf_counter() - t0
            config["splitter"] = {
                "class": type(sp).__name__,
                "chunk_size": getattr(sp, "_chunk_size", None),
                "chunk_overlap": getattr(sp, "_chunk_overlap", None),
            }
        t0 = time.perf_counter()
        built = retriever_or_factory(list(units))
        index_seconds = time.perf_counter() - t0
        if not isinstance(built, BaseRetriever):
            raise TypeError(f"the factory must return a BaseRetriever, got {type(built).__name__}")
        retriever = built
        config["n_units"] = len(units)

    depth = max(ks) if qrels is None else max(max(ks), RANK_CUTOFF)
    search, depth_via = _searcher(retriever, depth)
    config.update(
        retriever=f"{type(retriever).__module__}.{type(retriever).__qualname__}",
        retriever_params=_retriever_params(retriever),
        factory=_callable_name(retriever_or_factory) if is_factory else None,
        dataset=getattr(dataset, "name", "") or "",
        dataset_kind=kind,
        n_questions=len(questions),
        ks=list(ks),
        depth=depth,
        depth_via=depth_via,
    )

    qa_by_id = {q.id: q for q in dataset.questions} if isinstance(dataset, QADataset) else {}
    pmap = _ParagraphMap(dataset.docs) if isinstance(dataset, QADataset) and qrels is not None else None
    per_query: list[dict[str, Any]] = []
    latencies: list[float] = []
    for qid, text in progress_bar(
        questions, desc=f"eval {name or type(retriever).__name__}", unit="q", show=progress
    ):
        t0 = time.perf_counter()
        docs = list(search(text))
        ms = (time.perf_counter() - t0) * 1000.0
        latencies.append(ms)
        docs = docs[:depth]
        record: dict[str, Any] = {"id": qid, "latency_ms": ms, "n_retrieved": len(docs)}
        if kind == "qa":
            question = qa_by_id[qid]
            record["retrieved"] = [doc_key(d) for d in docs[:KEEP_RETRIEVED]]
            rank = first_answer_rank(docs, question.doc_id, question.answers)
            record["answer_rank"] = rank
            for k in ks:
                record[f"answer_recall@{k}"] = 1.0 if rank is not None and rank <= k else 0.0
            if qrels is not None and pmap is not None:
                ranked = dedupe(pid for d in docs for pid in pmap.ids(d))
                record.update(_qrels_metrics(ranked, qrels.get(qid), ks))
        else:
            ranked = dedupe(key for d in docs if (key := _corpus_key(d)) is not None)
            record["retrieved"] = ranked[:KEEP_RETRIEVED]
            record.update(_qrels_metrics(ranked, qrels.get(qid) if qrels is not None else None, ks))
        per_query.append(record)

    metric_names: list[str] = []
    if kind == "qa":
        metric_names += [f"answer_recall@{k}" for k in ks]
    if qrels is not None:
        metric_names += [f"ndcg@{RANK_CUTOFF}", f"mrr@{RANK_CUTOFF}", *(f"recall@{k}" for k in ks)]
    aggregate = {m: mean(r[m] for r in per_query if r.get(m) is not None) for m in metric_names}
    judged_metric = f"ndcg@{RANK_CUTOFF}"
    config["n_judged"] = sum(1 for r in per_query if r.get(judged_metric) is not None)
    return EvalResult(
        name=name or type(retriever).__name__,
        config=config,
        per_query=per_query,
        aggregate=aggregate,
        latency_ms=latency_percentiles(latencies),
        index_seconds=index_seconds,
    )
