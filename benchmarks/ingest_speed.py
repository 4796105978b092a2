"""BM25-only ingest end to end: ``ingest(dir, store, embedding="none", mode="bm25")`` in chunks per second.

What ``ragspine ingest DIR --store STORE --embedding none`` runs: load the files (``CorpusLoader``), chunk them (the
default ``ParagraphTextSplitter``, 480/80), write the versioned chunk store (SQLite), tokenize every chunk, build the
BM25 index and save it.  Goal (issue 12): >= 2,500 chunks/s at 100k chunks.

Corpus: Markdown files written to a temporary directory (deleted afterwards) holding the synthetic chunks of
``benchmarks/speed.py`` — real sentences of the shared ``jsquad-valid`` / ``cmrc2018-dev`` articles recombined into
300-480-character paragraphs, fixed seed, Japanese and Chinese alternating — four paragraphs per file under a
``# title`` line, one language per file.  The default splitter makes about one chunk per paragraph; the chunk count
reported is the one ``ingest`` returns.  The data is read from ``../shared/data`` (or ``RAGSPINE_DATA``), never
copied into the repository; without it the script says so and exits with status 2.

Each configuration (package, tokenizer) runs in its own subprocess into a fresh store directory, one after the other:
the ``ingest`` call is timed end to end (library imported beforehand; the fugashi tagger, the fold table and worker
processes are started inside the timing, as a user's ingest starts them), with a per-phase breakdown taken by
wrapping the package's own functions (load = ``CorpusLoader.lazy_load``, chunk = the splitter, store =
``write_documents``, read = reading the chunks back from the store for the index, tokenize = time spent in the
tokenizer or waiting for the tokenizing processes, index = the rest of the BM25 build, save = ``BM25Retriever.save``,
other = everything else) and the peak RSS of the process (``ru_maxrss``) and of its largest child (tokenizing
processes, if any).  With ``--before DIR`` the package found in ``DIR`` (e.g. ``git archive 6b8f897
langchain_ragspine | tar -x -C /tmp/6b8f897``) runs each tokenizer too, before/after interleaved in one run.

    git archive 6b8f897 langchain_ragspine | tar -x -C /tmp/6b8f897        # the folder's name labels the rows
    python benchmarks/ingest_speed.py --before /tmp/6b8f897 --check-identical   # 100k chunks, auto and cjk
    python benchmarks/ingest_speed.py --quick                               # 5k chunks, RESULTS.md untouched
    python benchmarks/ingest_speed.py --corpus en --before /tmp/before-en --section english-analysis-ingest

``--corpus en`` writes English paragraphs instead: the sentences of the repository's own English prose
(``README.md``, ``docs/*.md``, ``docs/demo/en/*.md``; code, tables and headings left out) recombined the same way
(300-480 characters, fixed seed), to measure what the English analysis of ``auto`` / ``cjk`` costs; it needs no
shared data.  Its vocabulary is small (a few thousand distinct words), so nearly every word hits the stem cache.

Writes the ``ingest-speed`` section of ``benchmarks/RESULTS.md`` (``--section`` names another; not with ``--quick``
unless ``--write``).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import shlex
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import DATA, REPO, run_json_worker, update_results_section  # noqa: E402

#: Paragraphs (synthetic chunks of ``speed.make_corpus``) per file.
PER_FILE = 4
PHASES = ("load", "chunk", "store", "read", "tokenize", "index", "save", "other")


# -- corpus --------------------------------------------------------------------------------------------------
def english_sentences() -> list[str]:
    """The sentences (20-480 characters) of the repository's English prose, in file order: ``README.md``,
    ``docs/*.md`` and ``docs/demo/en/*.md`` without fenced code, tables, headings and indented blocks."""
    from langchain_ragspine.text import sentence_spans

    paths = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "docs/demo/en").glob("*.md"))]
    out: list[str] = []
    for path in paths:
        fenced = False
        lines: list[str] = []
        for line in path.read_text("utf-8").splitlines():
            if line.lstrip().startswith("```"):
                fenced = not fenced
                continue
            if fenced or line.startswith(("|", "#", "    ", "<!--")):
                lines.append("")
                continue
            lines.append(line)
        for para in "\n".join(lines).split("\n\n"):
            para = " ".join(para.split())
            for a, b in sentence_spans(para):
                sent = para[a:b].strip()
                if 20 <= len(sent) <= 480 and sum(ch.isascii() for ch in sent) > 0.95 * len(sent):
                    out.append(sent)
    return out


def english_corpus(size: int, seed: int) -> dict[str, list[str]]:
    """``size`` English paragraphs of 300-480 characters recombined from :func:`english_sentences` (fixed seed),
    grouped 8 to a ``doc_id`` as :func:`speed.make_corpus` groups its chunks."""
    import random

    pool = english_sentences()
    rng = random.Random(seed)
    by_doc: dict[str, list[str]] = {}
    for i in range(size):
        target = rng.randint(300, 480)
        parts: list[str] = []
        length = 0
        while length < target:
            sent = pool[rng.randrange(len(pool))]
            if length + len(sent) + 1 > 480:
                if length >= 300:
                    break
                continue
            parts.append(sent)
            length += len(sent) + 1
        by_doc.setdefault(f"synth-en-{i // 8:06d}", []).append(" ".join(parts))
    return by_doc


def write_corpus(folder: Path, paragraphs: int, seed: int, kind: str = "cjk") -> tuple[int, int]:
    """Write ``paragraphs`` synthetic paragraphs (``kind`` ``"cjk"``: Japanese / Chinese, ``"en"``: English) as
    Markdown files under ``folder``; ``(files, characters)``."""
    by_doc: dict[str, list[str]] = {}
    if kind == "en":
        by_doc = english_corpus(paragraphs, seed)
    else:
        import speed

        docs = speed.make_corpus(paragraphs, seed)
        for d in docs:  # speed.make_corpus groups 8 consecutive chunks (4 per language) under one doc_id
            by_doc.setdefault(str(d.metadata["doc_id"]), []).append(d.page_content)
    files = chars = 0
    for n, (doc_id, paras) in enumerate(by_doc.items()):
        for start in range(0, len(paras), PER_FILE):
            sub = folder / f"{n // 1000:03d}"
            sub.mkdir(exist_ok=True)
            text = f"# {doc_id} part {start // PER_FILE}\n\n" + "\n\n".join(paras[start : start + PER_FILE]) + "\n"
            (sub / f"{doc_id}-{start // PER_FILE}.md").write_text(text, "utf-8")
            files += 1
            chars += len(text)
    return files, chars


# -- one configuration, in a subprocess ----------------------------------------------------------------------
class Phases:
    """Seconds spent inside wrapped functions, by phase (nested calls counted once, in the outer phase)."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.cpu = dict.fromkeys(PHASES, 0.0)  # this process's CPU time (children not included)
        self._depth = 0

    def timed(self, phase: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if self._depth:
                return fn(*args, **kwargs)
            self._depth += 1
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[phase] += time.perf_counter() - t0
                self.cpu[phase] += time.process_time() - c0
                self._depth -= 1

        return wrapper

    def timed_iter(self, phase: str, it: Iterator[Any]) -> Iterator[Any]:
        """``it``, with the time spent producing each item counted in ``phase``."""
        while True:
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                item = next(it)
            except StopIteration:
                return
            finally:
                self.seconds[phase] += time.perf_counter() - t0
                self.cpu[phase] += time.process_time() - c0
            yield item


def _instrument(phases: Phases) -> None:
    """Wrap the package's phase functions (those of the package on ``sys.path``, old or new)."""
    from langchain_ragspine.document_loaders import CorpusLoader
    from langchain_ragspine.retrievers import bm25 as bm25_module

    try:
        from langchain_ragspine.backends.directory import bm25_index
    except ImportError:  # a --before package from before issue 26 moved stores/ to backends/
        from langchain_ragspine.stores import bm25_index  # type: ignore[no-redef]

    lazy_load = CorpusLoader.lazy_load
    CorpusLoader.lazy_load = lambda self: phases.timed_iter("load", lazy_load(self))  # type: ignore[method-assign]
    try:  # the ingest stages (issue 26, P1): each phase function where its callers look it up
        from langchain_ragspine.pipeline import ingest as ingest_module
        from langchain_ragspine.pipeline import stages

        stages.split_document = phases.timed("chunk", stages.split_document)
        ingest_module.write_documents = phases.timed("store", ingest_module.write_documents)
        read = phases.timed("read", stages.store_documents)
        stages.store_documents = ingest_module.store_documents = read
    except ImportError:  # a --before package from before P1: one indexing module
        from langchain_ragspine import indexing  # type: ignore[no-redef]

        indexing._split = phases.timed("chunk", indexing._split)
        indexing.write_documents = phases.timed("store", indexing.write_documents)
        indexing._store_documents = phases.timed("read", indexing._store_documents)
    save = bm25_module.BM25Retriever.save
    bm25_module.BM25Retriever.save = phases.timed("save", save)  # type: ignore[method-assign]

    # the BM25 build: "tokenize" is the time in the tokenizer (in this process) or spent waiting for the batches of
    # the tokenizing processes; "index" the rest of the build.  The registered tokenizers are replaced by timed
    # wrappers (registered, so the package still knows them by name and may send them to worker processes).
    from langchain_ragspine import tokenizers

    busy = [False]  # inside a timed wait for the tokenizing processes: do not count the tokenizer again

    def timed_tokenizer(fn: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
        def tokenize(text: str) -> list[str]:
            if busy[0]:
                return fn(text)
            t, c = time.perf_counter(), time.process_time()
            try:
                return fn(text)
            finally:
                phases.seconds["tokenize"] += time.perf_counter() - t
                phases.cpu["tokenize"] += time.process_time() - c

        return tokenize

    for name, fn in list(tokenizers.TOKENIZERS.items()):
        tokenizers.TOKENIZERS[name] = timed_tokenizer(fn)
    try:  # the parallel path, where the package has one
        from langchain_ragspine.backends.directory import bm25_parallel
    except ImportError:
        try:  # a --before package from before issue 26 moved stores/ to backends/
            from langchain_ragspine.stores import bm25_parallel  # type: ignore[no-redef]
        except ImportError:
            bm25_parallel = None
    if bm25_parallel is not None:
        batches_iter = bm25_parallel.CountedBatches.__iter__

        def timed_batches(self: Any) -> Iterator[Any]:
            it = batches_iter(self)
            while True:
                t, c = time.perf_counter(), time.process_time()
                busy[0] = True
                try:
                    item = next(it)
                except StopIteration:
                    return
                finally:
                    busy[0] = False
                    phases.seconds["tokenize"] += time.perf_counter() - t
                    phases.cpu["tokenize"] += time.process_time() - c
                yield item

        bm25_parallel.CountedBatches.__iter__ = timed_batches  # type: ignore[method-assign]

    build = bm25_index.build_bm25_index

    def timed_build(*args: Any, **kwargs: Any) -> Any:
        t0, c0 = time.perf_counter(), time.process_time()
        before, cpu_before = phases.seconds["tokenize"], phases.cpu["tokenize"]
        phases._depth += 1  # nothing inside counts as another phase
        try:
            return build(*args, **kwargs)
        finally:
            phases._depth -= 1
            phases.seconds["index"] += time.perf_counter() - t0 - (phases.seconds["tokenize"] - before)
            phases.cpu["index"] += time.process_time() - c0 - (phases.cpu["tokenize"] - cpu_before)

    bm25_module.build_bm25_index = timed_build


def _maxrss_mb(who: int) -> float:
    return resource.getrusage(who).ru_maxrss / 1024


def worker(cfg: dict[str, Any]) -> dict[str, Any]:
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    import langchain_ragspine
    from langchain_ragspine import ingest  # the root: the same name in a --before package

    phases = Phases()
    _instrument(phases)
    store = Path(cfg["store"])
    rss_before = _maxrss_mb(resource.RUSAGE_SELF)
    cpu0 = os.times()
    t0 = time.perf_counter()
    summary = ingest(cfg["corpus"], store, embedding="none", mode="bm25", tokenizer=cfg["tokenizer"], progress=False)
    seconds = time.perf_counter() - t0
    cpu1 = os.times()
    phases.seconds["other"] = seconds - sum(v for k, v in phases.seconds.items() if k != "other")
    phases.cpu["other"] = (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system) - sum(
        v for k, v in phases.cpu.items() if k != "other"
    )
    out = {
        "src": str(Path(langchain_ragspine.__file__).parents[1]),
        "tokenizer": cfg["tokenizer"],
        "documents": summary.documents,
        "chunks": summary.chunks,
        "store_chunks": summary.store_chunks,
        "seconds": seconds,
        "chunks_per_s": summary.chunks / seconds,
        "phases": phases.seconds,
        "phases_cpu": phases.cpu,
        "cpu_self_s": (cpu1.user - cpu0.user) + (cpu1.system - cpu0.system),
        "cpu_children_s": (cpu1.children_user - cpu0.children_user) + (cpu1.children_system - cpu0.children_system),
        "rss_before_mb": rss_before,
        "peak_rss_mb": _maxrss_mb(resource.RUSAGE_SELF),
        "peak_child_rss_mb": _maxrss_mb(resource.RUSAGE_CHILDREN),
        "store_mb": sum(p.stat().st_size for p in store.rglob("*") if p.is_file()) / 2**20,
    }
    if cfg.get("digest"):
        out["digest"] = _index_digest(store)
    return out


def _index_digest(store: Path) -> str:
    """SHA-256 over the saved BM25 index files (arrays, vocabulary, settings, documents without their per-store
    ``ingested_at``), to compare two builds.  ``manifest.json`` is left out: it holds the checksums of those files
    as written, ``docs.jsonl``'s with its ``ingested_at``, so it differs between any two builds."""
    import hashlib

    h = hashlib.sha256()
    for p in sorted((store / "bm25").rglob("*")):
        if p.is_file() and p.name != "manifest.json":
            h.update(str(p.relative_to(store)).encode())
            if p.name == "docs.jsonl":
                with p.open(encoding="utf-8") as f:
                    for line in f:
                        row = json.loads(line)
                        row.get("metadata", {}).pop("ingested_at", None)
                        h.update(json.dumps(row, ensure_ascii=False, sort_keys=True).encode())
            else:
                h.update(p.read_bytes())
    return h.hexdigest()


def run_worker(cfg: dict[str, Any], src: Path, env_extra: dict[str, str]) -> dict[str, Any]:
    t0 = time.perf_counter()
    print(f"  {cfg['label']:<22} tokenizer {cfg['tokenizer']:<5} ...", end=" ", flush=True, file=sys.stderr)
    res = run_json_worker(__file__, cfg, src, env_extra)
    res["label"] = cfg["label"]
    print(f"{res['chunks_per_s']:,.0f} chunks/s ({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
    return res


# -- driver --------------------------------------------------------------------------------------------------
def table(results: list[dict[str, Any]]) -> str:
    head = (
        "| tokenizer | package | chunks | ingest s | **chunks/s** | "
        + " | ".join(f"{p} s" for p in PHASES)
        + " | CPU s (self + children) | peak RSS MB (largest child) |"
    )
    rows = [head, "|" + "---|" * (6 + len(PHASES) + 1)]
    rows[1] = "|---|---|---:|---:|---:|" + "---:|" * len(PHASES) + "---:|---:|"
    for r in results:
        ph = r["phases"]
        child = f" ({r['peak_child_rss_mb']:,.0f})" if r["peak_child_rss_mb"] > 1 else ""
        rows.append(
            f"| {r['tokenizer']} | {r['label']} | {r['chunks']:,} | {r['seconds']:.1f} | **{r['chunks_per_s']:,.0f}** | "
            + " | ".join(f"{ph[p]:.1f}" for p in PHASES)
            + f" | {r['cpu_self_s']:.0f} + {r['cpu_children_s']:.0f} | {r['peak_rss_mb']:,.0f}{child} |"
        )
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", default=None, help="synthetic paragraphs (~ chunks): default 100k, 5k with --quick")
    p.add_argument("--tokenizers", default="auto,cjk", help="comma-separated (default auto,cjk)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--before", type=Path, default=None, help="a folder holding an older langchain_ragspine")
    p.add_argument("--workers", default=None, help="RAGSPINE_WORKERS for the runs of this commit (default: unset)")
    p.add_argument("--repeat", type=int, default=1, help="runs per configuration, interleaved (default 1)")
    p.add_argument("--quick", action="store_true", help="smoke run: 5k paragraphs (unless --size), RESULTS.md untouched")
    p.add_argument("--write", action="store_true", help="write RESULTS.md even with --quick")
    p.add_argument("--check-identical", action="store_true",
                   help="also check that every run of a tokenizer saved a byte-identical BM25 index")
    p.add_argument("--json", type=Path, default=None, help="also write the raw results to this JSON file")
    p.add_argument("--corpus", choices=("cjk", "en"), default="cjk",
                   help="cjk: Japanese/Chinese paragraphs of the shared sets (default); en: English paragraphs")
    p.add_argument("--section", default="ingest-speed", help="the RESULTS.md section to write (default ingest-speed)")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0

    import speed

    missing = [s for s in speed.SETS if not (DATA / s / "docs").is_dir()] if args.corpus == "cjk" else []
    if missing:
        print(
            f"ingest_speed.py: shared evaluation data not found: {', '.join(str(DATA / s) for s in missing)}\n"
            "Expected ../shared/data next to the repository (see ../shared/data/README.md), "
            "or set RAGSPINE_DATA to its location.",
            file=sys.stderr,
        )
        return 2
    size = speed.parse_size(args.size or ("5k" if args.quick else "100k"))
    tokenizers = [t.strip() for t in args.tokenizers.split(",") if t.strip()]
    env_after = {"RAGSPINE_WORKERS": args.workers} if args.workers else {}
    results: list[dict[str, Any]] = []
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="ragspine-ingest-speed-") as tmp:
        corpus = Path(tmp) / "corpus"
        corpus.mkdir()
        t0 = time.perf_counter()
        files, chars = write_corpus(corpus, size, args.seed, args.corpus)
        print(f"corpus: {size:,} paragraphs in {files:,} files, {chars:,} characters "
              f"({time.perf_counter() - t0:.0f} s)", file=sys.stderr)
        n = 0
        for _ in range(args.repeat):
            for tok in tokenizers:
                sides: list[tuple[str, Path, dict[str, str]]] = []
                if args.before is not None:
                    sides.append((f"before ({args.before.name})", args.before.resolve(), {}))
                sides.append(("after (this commit)", REPO, env_after))
                for label, src, env in sides:
                    n += 1
                    store = Path(tmp) / f"store-{n}"
                    cfg = {"label": label, "tokenizer": tok, "corpus": str(corpus), "store": str(store),
                           "digest": args.check_identical}
                    results.append(run_worker(cfg, src, env))
                    shutil.rmtree(store, ignore_errors=True)
    load_end = os.getloadavg()
    identical = []
    if args.check_identical:
        for tok in tokenizers:
            digests = {r["digest"] for r in results if r["tokenizer"] == tok}
            identical.append(f"tokenizer `{tok}`: {'identical' if len(digests) == 1 else '**DIFFERENT**'} saved "
                             f"BM25 index files (arrays, vocabulary, documents) across its "
                             f"{sum(r['tokenizer'] == tok for r in results)} runs")
            print(identical[-1], file=sys.stderr)
    if args.json is not None:
        args.json.write_text(json.dumps({"load": [load_start, load_end], "results": results}, indent=1), "utf-8")

    load = (f"{' / '.join(f'{x:.1f}' for x in load_start)} at the start, "
            f"{' / '.join(f'{x:.1f}' for x in load_end)} at the end (1 / 5 / 15-min load averages, "
            f"{os.cpu_count()} cores)")
    body = table(results) + "\n"
    source = (
        "real `jsquad-valid` / `cmrc2018-dev` sentences recombined, Japanese and Chinese alternating"
        if args.corpus == "cjk" else
        f"English: the {len(english_sentences()):,} sentences of the repository's English prose (README.md, "
        "docs/*.md, docs/demo/en/*.md) recombined"
    )
    body += (
        f"Corpus: {size:,} synthetic 300-480-char paragraphs ({source}, fixed seed {args.seed}) in {files:,} "
        "Markdown files, "
        f"{chars:,} characters; chunked by the default `ParagraphTextSplitter` (480/80). Timed: "
        "`ingest(corpus, store, embedding=\"none\", mode=\"bm25\", tokenizer=...)` into a new store, end to end, "
        "one subprocess per row (library imported beforehand; tagger, fold table and any worker processes start "
        "inside the timing). Phases: load = `CorpusLoader`, chunk = the splitter, store = writing the chunk store, "
        "read = reading the chunks back for the index, tokenize = in the tokenizer (or waiting for the tokenizing "
        "processes), index = the rest of the BM25 build, save = writing the index. CPU = process CPU time of the "
        "ingest, its own and its children's (tokenizing processes). Peak RSS = the process's `ru_maxrss` "
        "(imports included), in brackets that of its largest child.\n\n"
        f"Load average: {load}.\n"
    )
    if identical:
        body += "\n" + "; ".join(identical) + ".\n"
    if args.before is not None:
        body += f"\n`before` = the package exported from commit `{args.before.name}` into `--before`.\n"
    if env_after:
        body += f"\nRuns of this commit with `RAGSPINE_WORKERS={args.workers}`.\n"
    print(body)
    if not args.quick or args.write:
        cmd = shlex.join(["python", "benchmarks/ingest_speed.py", *(sys.argv[1:] if argv is None else argv)])
        title = "BM25-only ingest end to end (load, chunk, store, index)"
        if args.corpus == "en":
            title += ", English corpus"
        update_results_section(args.section, title, cmd, body)
        print(f"written to {REPO / 'benchmarks' / 'RESULTS.md'} (section {args.section!r})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
