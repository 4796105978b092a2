"""Speed and memory: ragspine's bm25s-backed ``BM25Retriever`` vs ``langchain_community``'s (rank_bm25).

Both retrievers get the same Documents and the same tokenizer (ours as ``tokenizer=``, LangChain's as
``preprocess_func=``), so the comparison is about the index, not the text analysis.

Corpus: ``--sizes`` synthetic chunks (default 10k and 100k) of real text, recombining the sentences of the shared
Wikipedia articles in ``../shared/data`` (``jsquad-valid`` Japanese, ``cmrc2018-dev`` Chinese; chunks alternate
between the two).  Sentences are cut with :func:`langchain_ragspine.text.sentence_spans`; each chunk concatenates
randomly sampled sentences (fixed seed) up to a target length drawn from 300-480 chars, so content and sizes are
deterministic.  Queries: a fixed random sample of real questions from both sets' ``questions.jsonl`` (alternating
Japanese / Chinese), one list for both retrievers; LangChain's, ~1 s/query at 100k, is timed on a prefix of it.

Each (size, retriever) configuration runs in its own subprocess, one after the other: build time (Documents -> ready
retriever, tokenization included; libraries imported and the tokenizer warmed up beforehand), peak memory of the
build (growth of the peak RSS: ``resource.getrusage().ru_maxrss`` after the build minus before it, the high-water
mark being reset through ``/proc/self/clear_refs`` first when the kernel allows it), then ``invoke(query)`` latency
(``time.perf_counter``) after a few warm-up queries.

    python benchmarks/speed.py                  # 10k and 100k chunks, tokenizer "cjk" (~5 min on 2 cores)
    python benchmarks/speed.py --quick          # smoke run: 2k chunks, few queries, RESULTS.md untouched
    python benchmarks/speed.py --sizes 50k --tokenizer auto

The Markdown table is printed and written to the ``speed`` section of ``benchmarks/RESULTS.md`` (not with
``--quick`` unless ``--write`` is given).  Exits with status 2 when ``../shared/data`` is missing.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import resource
import shlex
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import DATA, REPO, update_results_section  # noqa: E402

SETS = ("jsquad-valid", "cmrc2018-dev")
MIN_CHARS, MAX_CHARS = 300, 480
WARMUP = 5


# -- data ----------------------------------------------------------------------------------------------------
def sentence_pool(set_name: str) -> list[str]:
    """Every sentence (stripped, 5..MAX_CHARS chars) of the set's articles, title lines excluded, in file order."""
    from langchain_ragspine.text import sentence_spans

    pool: list[str] = []
    for path in sorted((DATA / set_name / "docs").glob("*.md")):
        text = path.read_text("utf-8")
        body = text.split("\n", 1)[1] if text.startswith("#") else text
        for para in body.split("\n\n"):
            para = para.strip()
            for s, e in sentence_spans(para):
                sent = para[s:e].strip()
                if 5 <= len(sent) <= MAX_CHARS:
                    pool.append(sent)
    return pool


def make_corpus(size: int, seed: int, parts_out: list[tuple[int, tuple[int, ...]]] | None = None) -> list[Any]:
    """``size`` synthetic chunks (alternating Japanese / Chinese) of recombined real sentences, deterministic.

    With ``parts_out``, each chunk's ``(set index, sentence indices into sentence_pool(SETS[set index]))`` is
    appended to it."""
    from langchain_core.documents import Document

    pools = [sentence_pool(s) for s in SETS]
    rng = random.Random(seed)
    docs = []
    for i in range(size):
        set_idx = i % len(SETS)
        pool = pools[set_idx]
        target = rng.randint(MIN_CHARS, MAX_CHARS)
        parts: list[str] = []
        picked: list[int] = []
        length = 0
        while length < target:
            j = rng.randrange(len(pool))
            sent = pool[j]
            if length + len(sent) > MAX_CHARS:
                if length >= MIN_CHARS:
                    break
                continue  # too long to fit: draw another
            parts.append(sent)
            picked.append(j)
            length += len(sent)
        if parts_out is not None:
            parts_out.append((set_idx, tuple(picked)))
        doc_id = f"synth-{SETS[set_idx]}-{i // 8:06d}"  # 8 chunks per synthetic "document"
        docs.append(
            Document(
                page_content="".join(parts),
                metadata={"chunk_id": f"{doc_id}#{i % 8}", "doc_id": doc_id, "set": SETS[set_idx]},
            )
        )
    return docs


def make_queries(n: int, seed: int) -> list[str]:
    """``n`` real questions, alternating between the sets, each set's sample drawn with a fixed seed."""
    per_set = []
    for k, s in enumerate(SETS):
        with open(DATA / s / "questions.jsonl", encoding="utf-8") as f:
            qs = [json.loads(line)["question"] for line in f if line.strip()]
        rng = random.Random(seed * 1000 + k)
        per_set.append(rng.sample(qs, min(len(qs), (n + 1) // 2)))
    out: list[str] = []
    for pair in zip(*per_set, strict=False):
        out.extend(pair)
    return out[:n]


# -- one configuration, in a subprocess ----------------------------------------------------------------------
def _reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets the RSS high-water mark (VmHWM, ru_maxrss) to the current RSS
        return True
    except OSError:
        return False


def _maxrss_mb() -> float:
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / 1024 if sys.platform != "darwin" else kb / 1024 / 1024  # macOS reports bytes


def _pct(values: list[float], q: float) -> float:
    """Percentile ``q`` in [0, 100] with linear interpolation (numpy's default)."""
    xs = sorted(values)
    if len(xs) == 1:
        return xs[0]
    pos = (len(xs) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def worker(cfg: dict[str, Any]) -> dict[str, Any]:
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    from langchain_ragspine.tokenizers import get_tokenizer

    side, size, seed = cfg["side"], cfg["size"], cfg["seed"]
    docs = make_corpus(size, seed)
    queries = make_queries(cfg["n_queries"], seed)
    tok = get_tokenizer(cfg["tokenizer"])
    tok("東京都の天気と北京的天气 warm-up")  # load lazy resources (MeCab for "auto"/"fugashi") outside the timing

    if side == "ragspine":
        import bm25s  # noqa: F401  (imported lazily by the retriever; keep the import out of the build time)

        from langchain_ragspine.retrievers import BM25Retriever

        def build() -> Any:
            return BM25Retriever.from_documents(docs, k=cfg["k"], tokenizer=tok)
    else:
        import rank_bm25  # noqa: F401
        from langchain_community.retrievers import BM25Retriever as LCBM25Retriever

        def build() -> Any:
            return LCBM25Retriever.from_documents(docs, k=cfg["k"], preprocess_func=tok)

    gc.collect()
    reset = _reset_peak_rss()
    rss_before = _maxrss_mb()
    t0 = time.perf_counter()
    retriever = build()
    build_s = time.perf_counter() - t0
    peak_mb = _maxrss_mb() - rss_before

    for q in queries[:WARMUP]:
        retriever.invoke(q)
    lat: list[float] = []
    hits = 0
    for q in queries:
        t0 = time.perf_counter()
        res = retriever.invoke(q)
        lat.append((time.perf_counter() - t0) * 1000)
        hits += bool(res)
    out = {
        "side": side,
        "size": size,
        "build_s": build_s,
        "peak_mb": peak_mb,
        "rss_before_mb": rss_before,
        "peak_reset": reset,
        "latencies_ms": lat,
        "n_with_results": hits,
        "avg_chars": sum(len(d.page_content) for d in docs) / max(1, len(docs)),
    }
    if side == "ragspine":  # the same queries through .search() (no Document copies, no callback manager)
        for q in queries[:WARMUP]:
            retriever.search(q, k=cfg["k"])
        search_lat = []
        for q in queries:
            t0 = time.perf_counter()
            retriever.search(q, k=cfg["k"])
            search_lat.append((time.perf_counter() - t0) * 1000)
        out["search_latencies_ms"] = search_lat
    return out


def run_worker(cfg: dict[str, Any]) -> dict[str, Any]:
    t0 = time.perf_counter()
    label = f"  {cfg['side']:>9} @ {cfg['size']:,} chunks, {cfg['n_queries']} queries ..."
    print(label, end=" ", flush=True, file=sys.stderr)
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(cfg)],
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    if proc.returncode != 0:
        print("FAILED", file=sys.stderr)
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"speed.py: worker {cfg} exited with status {proc.returncode}")
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"done in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return res


# -- driver --------------------------------------------------------------------------------------------------
def parse_size(text: str) -> int:
    t = text.strip().lower()
    mult = 1
    if t.endswith("k"):
        t, mult = t[:-1], 1000
    elif t.endswith("m"):
        t, mult = t[:-1], 1_000_000
    n = int(float(t) * mult)
    if n <= 0:
        raise argparse.ArgumentTypeError(f"size must be positive: {text!r}")
    return n


def lc_queries_for(size: int, args: argparse.Namespace) -> int:
    if args.lc_queries is not None:
        return args.lc_queries
    if args.quick:
        return 10
    return 200 if size <= 20_000 else 40  # rank_bm25 costs ~1 s/query at 100k chunks


def table(results: list[tuple[dict, dict]], tokenizer: str) -> str:
    rows = [
        "| chunks | retriever | queries timed | build s | p50 ms | p95 ms | build peak RSS MB | p50 speed-up |",
        "|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    notes = []
    for ours, lc in results:
        n_lc = len(lc["latencies_ms"])
        ours_p50_same = statistics.median(ours["latencies_ms"][:n_lc])
        lc_p50 = statistics.median(lc["latencies_ms"])
        ratio = lc_p50 / ours_p50_same
        for r, label in (
            (ours, "ragspine `BM25Retriever` (bm25s)"),
            (lc, "langchain_community `BM25Retriever` (rank_bm25)"),
        ):
            lat = r["latencies_ms"]
            rows.append(
                f"| {r['size']:,} | {label} | {len(lat)} | {r['build_s']:.2f} | {_pct(lat, 50):.2f} | "
                f"{_pct(lat, 95):.2f} | {r['peak_mb']:,.0f} | {f'**{ratio:,.0f}x**' if r is ours else ''} |"
            )
        s = ours["search_latencies_ms"]
        notes.append(
            f"{ours['size']:,} chunks (mean {ours['avg_chars']:.0f} chars): ragspine p50 over the same {n_lc} "
            f"queries as LangChain {ours_p50_same:.2f} ms; `.search()` (no Document copies) p50 "
            f"{_pct(s, 50):.2f} ms, p95 {_pct(s, 95):.2f} ms; queries with >= 1 result: ragspine "
            f"{ours['n_with_results']}/{len(ours['latencies_ms'])}, LangChain {lc['n_with_results']}/{n_lc}."
        )
    reset = all(r["peak_reset"] for pair in results for r in pair)
    body = "\n".join(rows) + "\n\n"
    body += (
        f"Tokenizer `{tokenizer}` for both (ours as `tokenizer=`, LangChain's as `preprocess_func=`); `k=4`; "
        f"latency is `invoke(query)` after {WARMUP} warm-up queries. Queries are real JSQuAD / CMRC 2018 questions "
        "alternating Japanese / Chinese, one fixed list; LangChain is timed on a prefix of it (it costs ~1 s/query "
        "at 100k chunks), and the speed-up is LangChain's p50 over ours on that same prefix. Build = Documents to a "
        "ready retriever, tokenization included (libraries imported beforehand). Peak memory = growth of the peak "
        "RSS during the build (`resource.getrusage` `ru_maxrss` after minus before"
        + (", high-water mark reset via `/proc/self/clear_refs` just before" if reset else "")
        + "), one subprocess per configuration: the index plus everything transient (token lists, counters) held "
        "during the build; the Documents themselves are allocated before and not counted.\n\n"
        "Corpus: synthetic 300-480-char chunks of real sentences recombined from the `jsquad-valid` and "
        "`cmrc2018-dev` articles in `../shared/data` (CC BY-SA 4.0; fixed seed), alternating Japanese / "
        "Chinese.\n\n"
    )
    body += "\n".join(f"- {n}" for n in notes) + "\n"
    return body


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--sizes", default=None, help="comma-separated corpus sizes, e.g. 10k,100k (default 10k,100k)")
    p.add_argument("--tokenizer", default="cjk", help="tokenizer name for both retrievers (default cjk)")
    p.add_argument("--queries", type=int, default=None, help="queries timed for ragspine (default 500)")
    p.add_argument(
        "--lc-queries", type=int, default=None, help="queries timed for LangChain (default: 200 up to 20k, else 40)"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="smoke run: 2k chunks, 50/10 queries, RESULTS.md untouched")
    p.add_argument("--write", action="store_true", help="write RESULTS.md even with --quick")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0

    missing = [s for s in SETS if not (DATA / s / "docs").is_dir() or not (DATA / s / "questions.jsonl").is_file()]
    if missing:
        print(
            f"speed.py: shared evaluation data not found: {', '.join(str(DATA / s) for s in missing)}\n"
            "Expected ../shared/data next to the repository (see ../shared/data/README.md), "
            "or set RAGSPINE_DATA to its location.",
            file=sys.stderr,
        )
        return 2

    from langchain_ragspine.tokenizers import get_tokenizer

    try:
        get_tokenizer(args.tokenizer)
    except ValueError as e:
        p.error(str(e))
    sizes = [parse_size(s) for s in (args.sizes or ("2k" if args.quick else "10k,100k")).split(",") if s.strip()]
    n_ours = args.queries if args.queries is not None else (50 if args.quick else 500)

    print(f"BM25 speed benchmark, tokenizer {args.tokenizer!r}, sizes {sizes}", file=sys.stderr)
    results = []
    for size in sizes:
        n_lc = min(lc_queries_for(size, args), n_ours)
        base = {"size": size, "seed": args.seed, "tokenizer": args.tokenizer, "k": 4}
        ours = run_worker({**base, "side": "ragspine", "n_queries": n_ours})
        lc = run_worker({**base, "side": "langchain", "n_queries": n_lc})
        results.append((ours, lc))

    body = table(results, args.tokenizer)
    print(body)
    if not args.quick or args.write:
        script = Path(sys.argv[0]).resolve()
        try:
            script_arg = str(script.relative_to(REPO))
        except ValueError:
            script_arg = str(script)
        command = shlex.join(["python", script_arg, *(sys.argv[1:] if argv is None else argv)])
        update_results_section("speed", "BM25 speed: ragspine vs langchain_community", command, body)
        print(f"written to {REPO / 'benchmarks' / 'RESULTS.md'} (section 'speed')", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
