"""Cost of a metadata filter: compile it and evaluate it over every chunk's metadata (``FilterMasks.mask``).

Filters run before scoring over every chunk, once per distinct filter (the mask is cached), so this is the extra
latency of the first query with a new filter.  The corpus is synthetic chunk metadata shaped like an ingested store
(``doc_id``, ``chunk_id``, offsets, ``title``, ``sensitivity``, a string ``dept``, an int ``year``, an ISO-date
``updated``, a boolean ``draft``, a ``tags`` list, ``ingested_at``), seeded.  With ``--baseline FILE`` another
``filters`` module (e.g. main's: ``git show main:langchain_ragspine/filters/__init__.py > /tmp/filters_main.py``) is timed side by
side in the same run, on the filters it supports.

    python benchmarks/filter_speed.py [--size 100000] [--baseline /tmp/filters_main.py]
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import shlex
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import update_results_section  # noqa: E402

from langchain_ragspine import filters as ours  # noqa: E402

FILTERS: list[tuple[str, dict[str, Any], bool]] = [  # (label, filter, baseline supports it)
    ("eq on a string", {"dept": "sales"}, True),
    ("in (3 strings)", {"dept": {"in": ["sales", "hr", "legal"]}}, True),
    ("int range", {"year": {"gte": 2019, "lt": 2023}}, True),
    ("date range (ISO strings)", {"updated": {"between": ["2024-01-01", "2024-06-30"]}}, True),
    ("bool from a CLI string", {"draft": "false"}, True),
    ("list field, nin", {"tags": {"nin": ["old"]}}, True),
    ("3 fields", {"dept": "sales", "year": {"gte": 2020}, "draft": False}, True),
    ("$or of 2 fields", {"$or": [{"dept": "hr"}, {"year": {"gte": 2023}}]}, False),
    ("$not", {"$not": {"dept": "hr"}}, False),
]


def make_metadatas(n: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    depts = ["sales", "hr", "legal", "eng", "ops", "finance"]
    out = []
    for i in range(n):
        doc = i // 8
        start = (i % 8) * 400
        out.append({
            "title": f"Document {doc}", "source": f"docs/{doc}.md", "doc_id": f"doc{doc}", "sensitivity": "INTERNAL",
            "dept": rng.choice(depts), "year": rng.randint(2015, 2025),
            "updated": f"{rng.randint(2020, 2026)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
            "draft": rng.random() < 0.2, "tags": rng.sample(["uv", "python", "old", "new", "faq"], k=rng.randint(0, 3)),
            "chunk_id": f"doc{doc}#{i % 8}", "start_index": start, "end_index": start + 400,
            "source_locator": f"docs/{doc}.md#{start}-{start + 400}", "valid_as_of": "",
            "ingested_at": "2026-11-30T10:00:00.000000+00:00", "version": 1,
        })
    return out


def load_module(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("baseline_filters", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def time_mask(module: ModuleType, metadatas: list[dict[str, Any]], flt: dict[str, Any], rounds: int) -> float:
    """Best of ``rounds`` (ms): a fresh ``FilterMasks`` each time, so every round compiles and evaluates."""
    best = float("inf")
    for _ in range(rounds):
        masks = module.FilterMasks(metadatas)
        t0 = time.perf_counter()
        masks.mask(flt)
        best = min(best, time.perf_counter() - t0)
    return best * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--baseline", default=None, help="another filters.py to time side by side")
    ap.add_argument("--baseline-label", default=None, help="what the baseline is, for RESULTS.md (e.g. main@abc123)")
    ap.add_argument("--no-write", action="store_true", help="print only; do not update RESULTS.md")
    args = ap.parse_args()
    metadatas = make_metadatas(args.size)
    base = load_module(args.baseline) if args.baseline else None
    rows = ["| filter | this package, ms | baseline, ms | ratio |", "|---|---:|---:|---:|"]
    for label, flt, supported in FILTERS:
        t = time_mask(ours, metadatas, flt, args.rounds)
        if base is not None and supported:
            b = time_mask(base, metadatas, flt, args.rounds)
            rows.append(f"| {label} `{flt}` | {t:.1f} | {b:.1f} | {t / b:.2f} |")
        else:
            rows.append(f"| {label} `{flt}` | {t:.1f} | — | — |")
        print(rows[-1], flush=True)
    body = "\n".join(rows) + (
        f"\n\n{args.size:,} synthetic chunk metadata dicts (16 keys, seeded); each cell is the best of {args.rounds} "
        "rounds of one `FilterMasks(...).mask(filter)` — compile plus one evaluation per chunk, the cost of the first "
        "query with a new filter (later queries reuse the cached mask). Baseline: "
        + (f"{args.baseline_label or Path(args.baseline).name}, timed in the same run" if base else "none")
        + ". Timings on a shared 2-core machine; compare ratios within one run."
    )
    if not args.no_write:
        cmd = "python benchmarks/filter_speed.py" + (f" --size {args.size}" if args.size != 100_000 else "")
        if args.baseline:
            cmd += f" --baseline {args.baseline}" + (f" --baseline-label {shlex.quote(args.baseline_label)}" if args.baseline_label else "")
        update_results_section("filter-speed", f"Metadata filter cost over {args.size:,} chunks", cmd, body)


if __name__ == "__main__":
    main()
