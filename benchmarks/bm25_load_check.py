"""What verifying a saved BM25 index costs at load time (issue 25 §5): ``BM25Retriever.load`` with the checks
(checksum manifest, structure, documents against columns) vs the same files loaded by a package without them.

The index is ``benchmarks/speed.py``'s synthetic corpus (300-480-char chunks of the shared ``jsquad-valid`` /
``cmrc2018-dev`` articles, fixed seed), built once with tokenizer ``cjk`` and saved by this commit (so it has a
manifest; the older package ignores that file).  Each load runs in its own subprocess (the files are in the page
cache after the first), alternating this commit and ``--before`` so machine load hits both alike; the table gives
the median of ``--repeat`` loads, and this commit's load split into its checks (timed on their own, in the same
subprocess, after the load).

    git archive main langchain_ragspine | tar -x -C /tmp/prev
    python benchmarks/bm25_load_check.py --size 100k --before /tmp/prev
    python benchmarks/bm25_load_check.py --quick --before /tmp/prev     # 5k chunks, RESULTS.md untouched

Writes the ``bm25-load-check`` section of ``benchmarks/RESULTS.md`` (not with ``--quick`` unless ``--write``).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import REPO, run_json_worker, update_results_section  # noqa: E402

QUERY = "梅雨はいつ始まりますか"


def _build(cfg: dict[str, Any]) -> dict[str, Any]:
    import speed

    from langchain_ragspine.retrievers import BM25Retriever

    docs = speed.make_corpus(cfg["size"], cfg["seed"])
    t0 = time.perf_counter()
    BM25Retriever.from_documents(docs, k=4, tokenizer=cfg["tokenizer"], workers=0).save(cfg["path"], generation=1)
    files = [p for p in Path(cfg["path"]).rglob("*") if p.is_file()]
    return {"build_save_s": time.perf_counter() - t0, "mb": sum(p.stat().st_size for p in files) / 2**20}


def _load(cfg: dict[str, Any]) -> dict[str, Any]:
    from langchain_ragspine.retrievers import BM25Retriever

    t0, c0 = time.perf_counter(), time.process_time()
    retriever = BM25Retriever.load(cfg["path"])
    out: dict[str, Any] = {"load_s": time.perf_counter() - t0, "load_cpu_s": time.process_time() - c0}
    retriever.invoke(QUERY)  # the first query (the checks warm the tokenizer up that it would otherwise warm)
    out["first_query_s"] = time.perf_counter() - t0
    out["first_query_cpu_s"] = time.process_time() - c0
    if cfg["split"]:  # this commit: time each check again on its own
        from langchain_ragspine.backends.directory import bm25_index
        from langchain_ragspine.backends.directory.files import read_manifest
        from langchain_ragspine.tokenizers import get_tokenizer

        path = Path(cfg["path"])
        t0 = time.perf_counter()
        manifest = read_manifest(path)
        assert manifest is not None
        manifest.check()
        out["manifest_s"] = time.perf_counter() - t0
        index, docs = retriever.vectorizer, retriever.docs
        settings = {"k1": retriever.k1, "b": retriever.b}
        t0 = time.perf_counter()
        bm25_index._check_structure(index, len(docs), settings, path / bm25_index.ARRAYS_DIR)
        out["structure_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        bm25_index._check_columns(index, docs, get_tokenizer(retriever.tokenizer), path / bm25_index.DOCS_FILE)
        out["columns_s"] = time.perf_counter() - t0
    return out


def worker(cfg: dict[str, Any]) -> dict[str, Any]:
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    return _build(cfg) if cfg["job"] == "build" else _load(cfg)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", default="100k")
    p.add_argument("--tokenizer", default="cjk")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--before", type=Path, default=None, help="a folder holding a langchain_ragspine without checks")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--write", action="store_true")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    if args.before is None:
        p.error("--before is required (a package without the checks, e.g. main exported with git archive)")
    import speed

    size = speed.parse_size("5k" if args.quick else args.size)
    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="ragspine-bm25-load-check-") as tmp:
        path = str(Path(tmp) / "bm25")
        base = {"size": size, "seed": args.seed, "tokenizer": args.tokenizer, "path": path}
        print(f"build {size:,} chunks ...", file=sys.stderr, flush=True)
        built = run_json_worker(__file__, {**base, "job": "build"}, REPO)
        runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
        for i in range(args.repeat):
            for label, src in (("before", args.before.resolve()), ("after", REPO)):
                runs[label].append(run_json_worker(__file__, {**base, "job": "load", "split": label == "after"}, src))
            print(f"  load {i + 1}/{args.repeat} done", file=sys.stderr, flush=True)
    load = f"{load_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end (1-min averages)"

    def med(label: str, key: str) -> float:
        return statistics.median(r[key] for r in runs[label])

    def cell(key: str) -> str:
        before, after = med("before", key), med("after", key)
        return f"{before:.2f} | {after:.2f} | {after - before:+.2f} ({100 * (after - before) / before:+.0f}%)"

    body = (
        "| chunks | index on disk MB | measure | without checks (`--before`) | with checks (this commit) | added |\n"
        "|---:|---:|---|---:|---:|---:|\n"
        + "".join(
            f"| {size:,} | {built['mb']:,.0f} | {what} | {cell(key)} |\n"
            for what, key in (
                ("load, wall s", "load_s"),
                ("load, CPU s", "load_cpu_s"),
                ("load + first query, wall s", "first_query_s"),
                ("load + first query, CPU s", "first_query_cpu_s"),
            )
        )
        + "\nThe checks of this commit's load, each timed again on its own after it (wall s): manifest (sizes + "
        f"SHA-256 of every file) {med('after', 'manifest_s'):.2f}, structure {med('after', 'structure_s'):.3f}, "
        f"documents vs columns {med('after', 'columns_s'):.3f}.\n\n"
        f"Tokenizer `{args.tokenizer}`; median of {args.repeat} loads each, one subprocess per load, alternating "
        "before/after, files in the page cache. `load` = `BM25Retriever.load`; `load + first query` adds one "
        "`invoke` (the row check tokenizes documents at load, so the tokenizer's first-use cost moves from the "
        "first query into the load). CPU = `time.process_time` of the process (not the time it waited for a core). "
        f"Load average: {load} on 2 cores shared with other engineers, so wall times are noisy; CPU times less so.\n"
    )
    print(body)
    if not args.quick or args.write:
        cmd = shlex.join(["python", "benchmarks/bm25_load_check.py", *(sys.argv[1:] if argv is None else argv)])
        update_results_section("bm25-load-check", "BM25 load: the cost of verifying the saved index", cmd, body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
