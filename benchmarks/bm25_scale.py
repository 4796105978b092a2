"""BM25 at scale: build peak memory, build time, index size on disk, load time and query latency, up to 1M chunks.

The corpus and queries are ``benchmarks/speed.py``'s (synthetic 300-480-char chunks recombining the sentences of
the shared ``jsquad-valid`` / ``cmrc2018-dev`` articles, fixed seed; real questions alternating Japanese / Chinese).
Each configuration runs in its own subprocess: ``BM25Retriever.from_documents(docs, tokenizer=...)`` with the peak
RSS measured around it (``resource.getrusage`` ``ru_maxrss``; the high-water mark is reset through
``/proc/self/clear_refs`` just before, so "growth" is the build's own peak over the Documents already in memory, and
"process" the whole process's peak), then ``save`` (size of the directory on disk), ``load`` (time), and
``invoke(query)`` latency on the loaded retriever after 5 warm-up queries.

``--before SRC`` also runs each size with the package found in ``SRC`` (e.g. an older commit exported with
``git archive COMMIT langchain_ragspine | tar -x -C /tmp/prev``), side by side in the same run; ``--before-max``
limits that to sizes it can build in this machine's memory.

    python benchmarks/bm25_scale.py --sizes 100k,1m --before /tmp/prev --before-max 100k
    python benchmarks/bm25_scale.py --quick          # 5k chunks, RESULTS.md untouched

Writes the ``bm25-1m`` section of ``benchmarks/RESULTS.md`` (not with ``--quick`` unless ``--write``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shlex
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO, run_json_worker, update_results_section  # noqa: E402

WARMUP = 5


def _dir_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def worker(cfg: dict[str, Any]) -> dict[str, Any]:
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    import speed  # the corpus and queries of benchmarks/speed.py

    import langchain_ragspine
    from langchain_ragspine.retrievers import BM25Retriever
    from langchain_ragspine.tokenizers import get_tokenizer

    size = cfg["size"]
    parts: list[tuple[int, tuple[int, ...]]] = []
    docs = speed.make_corpus(size, cfg["seed"], parts_out=parts)
    queries = speed.make_queries(cfg["n_queries"], cfg["seed"])
    tok = get_tokenizer(cfg["tokenizer"])
    tok("東京都の天気と北京的天气 warm-up")
    tokenizer: Any = cfg["tokenizer"]
    if cfg.get("pretokenized"):
        # each sentence tokenized once; a chunk's tokens are its sentences' tokens (bigrams across a sentence
        # boundary left out), so the build times the index, not the tokenizer
        sent_tokens = [[tok(s) for s in speed.sentence_pool(name)] for name in speed.SETS]
        by_text = {d.page_content: p for d, p in zip(docs, parts, strict=True)}
        del parts

        def tokenizer(text: str) -> list[str]:
            hit = by_text.get(text)
            if hit is None:
                return tok(text)
            toks = sent_tokens[hit[0]]
            return [t for j in hit[1] for t in toks[j]]
    import bm25s  # noqa: F401

    gc.collect()
    reset = speed._reset_peak_rss()
    rss_before = speed._maxrss_mb()
    t0 = time.perf_counter()
    retriever = BM25Retriever.from_documents(docs, k=4, tokenizer=tokenizer)
    build_s = time.perf_counter() - t0
    peak_process = speed._maxrss_mb()
    nnz = int(retriever.vectorizer.scores["indptr"][-1])
    with tempfile.TemporaryDirectory(prefix="ragspine-bm25-scale-") as tmp:
        path = Path(tmp) / "bm25"
        t0 = time.perf_counter()
        retriever.save(path)
        save_s = time.perf_counter() - t0
        disk_mb = _dir_mb(path)
        arrays_mb = _dir_mb(path / "bm25s")
        del retriever
        gc.collect()
        t0 = time.perf_counter()
        loaded = BM25Retriever.load(path, tokenizer=tokenizer)
        load_s = time.perf_counter() - t0
    for q in queries[:WARMUP]:
        loaded.invoke(q)
    lat = []
    for q in queries:
        t0 = time.perf_counter()
        loaded.invoke(q)
        lat.append((time.perf_counter() - t0) * 1000)
    return {
        "src": str(Path(langchain_ragspine.__file__).parents[1]),
        "size": size,
        "nnz": nnz,
        "build_s": build_s,
        "growth_mb": peak_process - rss_before,
        "process_mb": peak_process,
        "docs_mb": rss_before,
        "peak_reset": reset,
        "save_s": save_s,
        "disk_mb": disk_mb,
        "arrays_mb": arrays_mb,
        "load_s": load_s,
        "p50_ms": speed._pct(lat, 50),
        "p95_ms": speed._pct(lat, 95),
        "n_queries": len(lat),
    }


def run_worker(cfg: dict[str, Any], src: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    print(f"  {cfg['label']} @ {cfg['size']:,} chunks ...", end=" ", flush=True, file=sys.stderr)
    res = run_json_worker(__file__, cfg, src)
    print(f"done in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    res["label"] = cfg["label"]
    return res


def table(results: list[dict[str, Any]], tokenizer: str, load: str) -> str:
    rows = [
        "| chunks | build | postings | build s | build peak RSS growth MB | process peak RSS MB | index on disk MB "
        "(bm25s arrays) | load s | query p50 ms | p95 ms |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        rows.append(
            f"| {r['size']:,} | {r['label']} | {r['nnz']:,} | {r['build_s']:.1f} | {r['growth_mb']:,.0f} | "
            f"{r['process_mb']:,.0f} | {r['disk_mb']:,.0f} ({r['arrays_mb']:,.0f}) | {r['load_s']:.2f} | "
            f"{r['p50_ms']:.2f} | {r['p95_ms']:.2f} |"
        )
    return (
        "\n".join(rows)
        + "\n\n"
        + f"Tokenizer `{tokenizer}`; `k=4`; {results[0]['n_queries']} queries on the loaded retriever after "
        f"{WARMUP} warm-up queries. Build = `BM25Retriever.from_documents` (tokenization included). Peak RSS "
        "growth = `ru_maxrss` after the build minus before it (high-water mark reset via `/proc/self/clear_refs`), "
        "i.e. the index plus everything transient, over the Documents already in memory; process peak = the "
        "whole worker (Documents included). One subprocess per row, rows run one after the other in one run. "
        f"Load average during the run: {load} on 2 cores shared with other engineers, so times are noisy; memory "
        "is not affected by load. Re-run the timings on a quiet machine with the command above.\n"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="100k,1m")
    p.add_argument("--tokenizer", default="cjk")
    p.add_argument("--queries", type=int, default=300)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--before", type=Path, default=None, help="a folder holding an older langchain_ragspine")
    p.add_argument("--before-max", default=None, help="largest size to run --before at (default: all)")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--write", action="store_true")
    p.add_argument(
        "--pretokenized", action="store_true",
        help="tokenize each sentence once and compose chunk tokens from them (times the index, not the tokenizer)",
    )
    p.add_argument("--json", type=Path, default=None, help="also write the raw results to this JSON file")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    import speed

    sizes = [speed.parse_size(s) for s in ("5k" if args.quick else args.sizes).split(",") if s.strip()]
    before_max = speed.parse_size(args.before_max) if args.before_max else max(sizes)
    results = []
    load_start = os.getloadavg()[0]
    for size in sizes:
        base = {
            "size": size, "seed": args.seed, "tokenizer": args.tokenizer, "n_queries": args.queries,
            "pretokenized": args.pretokenized,
        }
        if args.before is not None and size <= before_max:
            results.append(run_worker({**base, "label": "before"}, args.before.resolve()))
        results.append(run_worker({**base, "label": "after (this commit)"}, REPO))
    load = f"{load_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end (1-min averages)"
    if args.json is not None:
        args.json.write_text(json.dumps({"load": load, "results": results}, indent=1), "utf-8")
    body = table(results, args.tokenizer, load)
    if args.before is not None:
        body += f"\n`before` = the package exported from commit `{args.before.name}` into `--before`.\n"
    print(body)
    if not args.quick or args.write:
        cmd = shlex.join(["python", "benchmarks/bm25_scale.py", *(sys.argv[1:] if argv is None else argv)])
        update_results_section("bm25-1m", "BM25 at 1M chunks: build memory, index size, load and query time", cmd, body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
