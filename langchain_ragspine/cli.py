"""The ``ragspine`` command line: ``ingest``, ``search``, ``ask``, ``eval`` and ``demo``.

``ragspine ingest PATH... --store DIR`` loads, chunks and indexes a corpus; ``ragspine search QUERY --store DIR``
prints ranked, cited chunks (never a RESTRICTED one); ``ragspine ask QUESTION --store DIR`` answers with numbered citations through a LangGraph graph
(:mod:`langchain_ragspine.graphs`); ``ragspine eval DATASET`` measures retrieval quality (see
:mod:`langchain_ragspine.evaluation`); ``ragspine demo`` ingests and searches the bundled demo corpus.
Defaults come from :class:`~langchain_ragspine.config.RagSpineSettings` (``RAGSPINE_*`` environment variables or
``.env``); mode names from :mod:`langchain_ragspine.modes`, graph names from
:data:`~langchain_ragspine.graphs.GRAPH_BUILDERS`.  The CLI parses arguments and prints; the work is the library's.
Data errors print one line naming the file and line, and exit with status 2.
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import sys
import tempfile
import time
import warnings
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, cast

from langchain_core.documents import Document

from langchain_ragspine._version import __version__
from langchain_ragspine.config import DEFAULT_K, RagSpineSettings, get_settings, resolve_chat_model
from langchain_ragspine.errors import RagSpineError
from langchain_ragspine.evaluation.runner import DEFAULT_KS
from langchain_ragspine.filters import parse_filter_expressions
from langchain_ragspine.indexing import StoreSource, ingest, open_retriever, result_record, search
from langchain_ragspine.modes import build_retriever, get_mode, mode_factory, mode_names, needs_dense_index
from langchain_ragspine.retrievers import BM25Retriever, HybridRetriever
from langchain_ragspine.tokenizers import TOKENIZERS

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


def _format_hit(rank: int, doc: Document) -> str:
    md = doc.metadata
    score = (md.get("scores") or {}).get("fused")
    score_txt = f"{score:.3f}" if isinstance(score, (int, float)) else "-"
    return (
        f"{rank:>3}. {md.get('title') or md.get('doc_id')}  [{md.get('source_locator')}]  score {score_txt}\n"
        f"     {_snippet(doc.page_content)}\n"
    )


def _cmd_ingest(args: argparse.Namespace) -> int:
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
    )
    for note in summary.notes:
        print(f"note: {note}", file=sys.stderr)
    print(summary.line())
    return 0


def _cmd_search(args: argparse.Namespace) -> int:
    flt = parse_filter_expressions(args.filter) if args.filter else None
    retriever = open_retriever(args.store, k=args.k, mode=args.mode, embedding=args.embedding)
    _print_results(search(retriever, args.query, k=args.k, filter=flt), as_json=args.json)
    return 0


def _eval_runs(args: argparse.Namespace) -> list[tuple[str, str]]:
    """``(mode, tokenizer)`` for every requested mode × tokenizer; a mode without a BM25 channel runs once."""
    return [
        (mode, tok)
        for mode in args.mode
        for tok in (args.tokenizer if get_mode(mode).uses_tokenizer else ["auto"])
    ]


def _mode_label(mode: str, tok: str, n_tokenizers: int) -> str:
    """``mode`` is the effective one (``auto`` resolved); the tokenizer is named when it varies or is not auto."""
    plain = not get_mode(mode).uses_tokenizer or n_tokenizers == 1 and tok == "auto"
    return mode if plain else f"{mode} tokenizer={tok}"


def _eval_qa_retrievers(args: argparse.Namespace, store_dir: Path) -> list[tuple[str, Any, float]]:
    """``(name, retriever, build_seconds)`` for every requested mode × tokenizer over the ingested store."""
    out = []
    with StoreSource(store_dir, embedding=args.embedding) as source:
        for mode, tok in _eval_runs(args):
            t0 = time.perf_counter()
            retriever = build_retriever(mode, source, k=max(args.ks), tokenizer=tok)
            effective = (
                "bm25" if isinstance(retriever, BM25Retriever)
                else "hybrid" if isinstance(retriever, HybridRetriever) else mode
            )
            out.append((_mode_label(effective, tok, len(args.tokenizer)), retriever, time.perf_counter() - t0))
    return out


def _check_baseline(baseline: str | None, names: Sequence[str]) -> None:
    """Fail before the evaluation runs when ``--baseline`` names none of the configurations."""
    if baseline is not None and baseline not in names:
        raise ValueError(f"--baseline {baseline!r} is not one of the configurations: {list(names)}")


def _cmd_eval(args: argparse.Namespace) -> int:
    from langchain_ragspine.evaluation import (
        BEIRDataset,
        compare_markdown,
        compare_paired,
        evaluate,
        load_dataset,
    )

    dataset = load_dataset(args.dataset)
    if isinstance(dataset, BEIRDataset):
        runs = _eval_runs(args)
        _check_baseline(args.baseline, [_mode_label(mode, tok, len(args.tokenizer)) for mode, tok in runs])
        results = [
            evaluate(mode_factory(mode, k=max(args.ks), tokenizer=tok, embedding=args.embedding), dataset,
                     ks=args.ks, limit=args.limit, name=_mode_label(mode, tok, len(args.tokenizer)))
            for mode, tok in runs
        ]
    else:
        needs_dense = needs_dense_index(args.mode, args.embedding)
        with tempfile.TemporaryDirectory(prefix="ragspine-eval-") as tmp:
            store_dir = Path(args.store) if args.store else Path(tmp)
            summary = ingest(
                Path(args.dataset) / "docs", store_dir, tokenizer=args.tokenizer[0],
                embedding=args.embedding, mode="hybrid" if needs_dense else "bm25",
            )
            print(f"ingest: {summary.line()}", file=sys.stderr)
            results = []
            retrievers = _eval_qa_retrievers(args, store_dir)
            _check_baseline(args.baseline, [name for name, _, _ in retrievers])
            for name, retriever, seconds in retrievers:
                result = evaluate(retriever, dataset, ks=args.ks, limit=args.limit, name=name)
                result.index_seconds = seconds
                results.append(result)
    print(compare_markdown(results, baseline=args.baseline))
    if args.json:
        base = next((r for r in results if r.name == args.baseline), results[0])
        paired = [c.to_dict() for r in results if r is not base for c in compare_paired(base, r)]
        Path(args.json).write_text(
            json.dumps({"results": [r.to_dict() for r in results], "paired": paired}, ensure_ascii=False, indent=1),
            "utf-8",
        )
        print(f"wrote {args.json}", file=sys.stderr)
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
    """``(chat model or None, a sentence saying which path answers)`` for ``ragspine ask`` / ``demo``:
    :func:`~langchain_ragspine.config.resolve_chat_model` (``RAGSPINE_LLM``, else ``none``);
    its warning, if any, goes to stderr."""
    try:
        choice = resolve_chat_model(spec)
    except ValueError as e:
        raise ValueError(f"--llm {spec!r}: {e.__cause__ or e}" if spec is not None else f"RAGSPINE_LLM: {e}") from e
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


def _cmd_ask(args: argparse.Namespace) -> int:
    from langchain_ragspine.graphs import GRAPH_BUILDERS

    retriever = open_retriever(args.store, k=args.k, mode=args.mode, embedding=args.embedding)
    llm, how = _resolve_llm(args.llm)
    builder = GRAPH_BUILDERS[args.graph]
    options: dict[str, Any] = {}
    if "relax_filters" in inspect.signature(builder).parameters:
        options["relax_filters"] = args.relax_filters  # filters scope access: kept unless the user opts in
    graph = builder(retriever, llm=llm, **options)
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
    if any(isinstance(t, Mapping) and t.get("step") == "drop_filters" for t in state.get("trace") or []):
        print("note: nothing relevant matched the filters, so they were dropped (--relax-filters)", file=sys.stderr)
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


def _cmd_demo(args: argparse.Namespace) -> int:
    corpus = demo_corpus_dir()
    with tempfile.TemporaryDirectory(prefix="ragspine-demo-") as tmp:
        print(f"Ingesting the demo corpus ({corpus}) into a temporary store …")
        summary = ingest(corpus, tmp)  # progress per phase on stderr (a bar on a terminal)
        print(summary.line())
        retriever = open_retriever(tmp, k=args.k)
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


def build_parser(settings: RagSpineSettings | None = None) -> argparse.ArgumentParser:
    """The argument parser, with defaults from ``settings`` (default: :func:`~langchain_ragspine.config.get_settings`),
    ``--mode`` choices from the mode registry and ``--graph`` choices from the graph builders."""
    s = settings or get_settings()
    modes = mode_names()
    parser = argparse.ArgumentParser(
        prog="ragspine", description="Retrieval for Japanese, Chinese and English documents (LangChain parts)."
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    store_kw: dict = {"default": s.store, "required": s.store is None, "type": Path}

    p = sub.add_parser("ingest", help="load, chunk and index files into a store directory")
    p.add_argument("paths", nargs="+", help=".md/.txt/.jsonl files or folders")
    p.add_argument("--store", help="store directory (created if missing)", **store_kw)
    p.add_argument("--chunk-size", type=int, default=s.chunk_size, help="chunk budget in characters (480)")
    p.add_argument("--chunk-overlap", type=int, default=s.chunk_overlap, help="overlap in characters (80)")
    p.add_argument("--tokenizer", default=s.tokenizer, choices=sorted(TOKENIZERS), help="BM25 tokenizer (auto)")
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
        "--mode", default=None, choices=modes,
        help="retrieval mode (RAGSPINE_RETRIEVAL_MODE, else auto); bm25/lexical/economy build no vector index",
    )
    p.set_defaults(func=_cmd_ingest)

    p = sub.add_parser("search", help="ranked, cited chunks for a query")
    p.add_argument("query")
    p.add_argument("--store", help="store directory written by `ragspine ingest`", **store_kw)
    p.add_argument("-k", type=int, default=s.k, help=f"number of results (RAGSPINE_K, else {DEFAULT_K})")
    p.add_argument(
        "--filter", action="append", default=[], metavar="FIELD=VALUE",
        help="metadata filter; repeatable (all must hold); also FIELD>=V, FIELD!=V, FIELD=a,b, FIELD=lo..hi; "
        "V compares in the stored field's type (draft=false matches a boolean, dates as YYYY-MM-DD)",
    )
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.add_argument(
        "--mode", default=None, choices=modes,
        help="auto (hybrid when the store has a vector index), hybrid, vector, bm25/lexical/economy "
        "(RAGSPINE_RETRIEVAL_MODE, else auto)",
    )
    p.add_argument("--embedding", default=None, metavar="SPEC", help="query encoder (default: the store's)")
    p.set_defaults(func=_cmd_search)

    p = sub.add_parser("eval", help="measure retrieval quality on a QA or BEIR dataset folder")
    p.add_argument("dataset", help="a QA folder (docs/ + questions.jsonl [+ beir/]) or a BEIR folder")
    p.add_argument(
        "--mode", nargs="+", default=[s.retrieval_mode], choices=modes,
        help="retrieval modes to compare side by side (RAGSPINE_RETRIEVAL_MODE, else auto)",
    )
    p.add_argument("--embedding", default=None, metavar="SPEC", help="dense model for hybrid/vector/auto")
    p.add_argument(
        "--tokenizer", nargs="+", default=[s.tokenizer], choices=sorted(TOKENIZERS),
        help="BM25 tokenizers to compare (auto)",
    )
    p.add_argument("--limit", type=int, default=None, help="first N questions only")
    p.add_argument(
        "--ks", type=int, nargs="+", default=list(DEFAULT_KS),
        help=f"cutoffs for recall@k ({' '.join(map(str, DEFAULT_KS))})",
    )
    p.add_argument("--store", default=None, help="keep the ingested store here (default: a temporary one)")
    p.add_argument(
        "--baseline", default=None, metavar="NAME",
        help="configuration the others are compared with, paired, with 95%% intervals (default: the first)",
    )
    p.add_argument("--json", default=None, metavar="OUT", help="write every result as JSON")
    p.add_argument("--plot", default=None, metavar="OUT.png", help="recall@k curves (and OUT-latency.png)")
    p.set_defaults(func=_cmd_eval)

    p = sub.add_parser("ask", help="answer a question with cited passages (LangGraph RAG graphs)")
    p.add_argument("question")
    p.add_argument("--store", help="store directory written by `ragspine ingest`", **store_kw)
    p.add_argument(
        "--graph", default="corrective", choices=_GraphNames(), metavar="GRAPH",
        help="which graph answers: %(choices)s (corrective)",
    )
    p.add_argument(
        "--llm", default=None, metavar="SPEC",
        help="none (default: extractive answers, no LLM), auto (ollama:qwen2.5:7b when reachable), or a "
        "provider:model string (RAGSPINE_LLM)",
    )
    p.add_argument("-k", type=int, default=s.k, help=f"passages retrieved per search (RAGSPINE_K, else {DEFAULT_K})")
    p.add_argument("--mode", default=None, choices=modes, help="retrieval mode (RAGSPINE_RETRIEVAL_MODE, else auto)")
    p.add_argument("--filter", action="append", default=[], metavar="FIELD=VALUE", help="metadata filter")
    p.add_argument(
        "--relax-filters", action="store_true",
        help="let the corrective/adaptive graphs drop the filters when nothing relevant matches (off: filters "
        "scope access, so by default they are kept and the graph refuses instead)",
    )
    p.add_argument("--embedding", default=None, metavar="SPEC", help="query encoder (default: the store's)")
    p.add_argument("--json", action="store_true", help="print the final state as one JSON object")
    p.add_argument("--stream", action="store_true", help="print each graph node as it finishes (stderr)")
    p.set_defaults(func=_cmd_ask)

    p = sub.add_parser("demo", help="ingest the bundled demo corpus, search three questions, answer one")
    p.add_argument("-k", type=int, default=s.k, help=f"results per question (RAGSPINE_K, else {DEFAULT_K})")
    p.add_argument("--llm", default=None, metavar="SPEC", help="as for ask (default: none)")
    p.set_defaults(func=_cmd_demo)
    return parser


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # what Python makes of undecodable bytes in argv


def _format_warning(message, category, filename, lineno, line=None) -> str:  # type: ignore[no-untyped-def]
    """One line per warning, without the source line Python prints by default."""
    return f"warning: {message}\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``ragspine`` console script; returns the exit status."""
    try:
        settings = get_settings()
    except ValueError as e:
        print(f"ragspine: error: bad RAGSPINE_* setting: {e}", file=sys.stderr)
        return 2
    args = build_parser(settings).parse_args(argv)
    warnings.formatwarning = _format_warning
    query = getattr(args, "query", None)
    if isinstance(query, str) and _LONE_SURROGATE.search(query):
        print("ragspine: error: the query is not valid UTF-8 text", file=sys.stderr)
        return 2
    if getattr(args, "k", 1) <= 0:
        print(f"ragspine: error: -k must be > 0, got {args.k}", file=sys.stderr)
        return 2
    if getattr(args, "limit", None) is not None and args.limit <= 0:
        print(f"ragspine: error: --limit must be > 0, got {args.limit}", file=sys.stderr)
        return 2
    try:
        return int(args.func(args))
    except (RagSpineError, FileNotFoundError, ValueError) as e:
        print(f"ragspine: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `ragspine search ... | head`
        return 0
    except KeyboardInterrupt:
        print(
            "ragspine: interrupted; every document committed so far is kept and the store stays usable "
            "(run the command again to finish)",
            file=sys.stderr,
        )
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
