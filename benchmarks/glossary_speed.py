"""Glossary size vs speed: load a large glossary and rewrite queries with it (``GlossaryQueryRewriter``).

Synthetic glossaries of N groups ``[termI, synIa, synIb]`` (the shape of the new-user trial that found the old
matcher — one big regular-expression alternation — taking 30 s to load 50,000 groups and 47 s for a 2,000-term
query).  For each size: the time to build a ``Glossary`` from the groups in memory, to load it from a JSON file,
to rewrite a short query (mean of ``--rounds``), a 200-word query with no glossary term, and a 2,000-term query.
With ``--baseline FILE`` another ``glossary.py`` (e.g. main's: ``git show
main:langchain_ragspine/retrievers/glossary.py > /tmp/glossary_main.py``) is timed side by side in the same run,
and the rewrites of both are compared (they must be equal).

    python benchmarks/glossary_speed.py [--sizes 5000 50000] [--baseline /tmp/glossary_main.py]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import shlex
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import update_results_section  # noqa: E402

from langchain_ragspine.retrievers import glossary as ours  # noqa: E402

SHORT = "how is term17 related to syn300b in the index?"
WORDS_200 = " ".join(["word"] * 200)
TERMS_2000 = " ".join(f"term{i}" for i in range(2000))


def groups(n: int) -> list[list[str]]:
    return [[f"term{i}", f"syn{i}a", f"syn{i}b"] for i in range(n)]


def load_module(path: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location("baseline_glossary", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # pydantic resolves the module's annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def timed(fn: Callable[[], Any], rounds: int = 1) -> tuple[float, Any]:
    """``(mean seconds, last result)`` of ``rounds`` calls, with ``re``'s cache of compiled patterns emptied first
    (the regex baseline would otherwise reuse the pattern the previous step compiled)."""
    re.purge()
    t0 = time.perf_counter()
    for _ in range(rounds):
        out = fn()
    return (time.perf_counter() - t0) / rounds, out


def measure(module: ModuleType, n: int, path: Path, rounds: int) -> tuple[dict[str, float], list[list[str]]]:
    """Seconds per step for a glossary of ``n`` groups, and the rewrites of the three queries."""
    data = groups(n)
    build, _ = timed(lambda: module.Glossary(data))
    load, glossary = timed(lambda: module.Glossary.from_file(path))
    rewriter = module.GlossaryQueryRewriter(glossary)
    short, a = timed(lambda: rewriter.invoke(SHORT), rounds)
    words, b = timed(lambda: rewriter.invoke(WORDS_200))
    many, c = timed(lambda: rewriter.invoke(TERMS_2000))
    return {"build": build, "load": load, "short": short, "words": words, "many": many}, [a, b, c]


def fmt(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms" if seconds < 1 else f"{seconds:.2f} s"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[5000, 50000])
    ap.add_argument("--rounds", type=int, default=20, help="rewrites of the short query per measurement")
    ap.add_argument("--baseline", default=None, help="another glossary.py to time side by side")
    ap.add_argument("--baseline-label", default=None, help="what the baseline is, for RESULTS.md (e.g. main@abc123)")
    ap.add_argument("--no-write", action="store_true", help="print only; do not update RESULTS.md")
    args = ap.parse_args()
    base = load_module(args.baseline) if args.baseline else None
    steps = [("build", "build from 3·N terms in memory"), ("load", "load the JSON file"),
             ("short", f"rewrite a short query (mean of {args.rounds})"), ("words", "rewrite 200 words, no term"),
             ("many", "rewrite a 2,000-term query")]
    rows = ["| groups | step | this package | baseline | speed-up |", "|---:|---|---:|---:|---:|"]
    same = True
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            path = Path(tmp) / f"g{n}.json"
            path.write_text(json.dumps(groups(n)), "utf-8")
            ours_t, ours_out = measure(ours, n, path, args.rounds)
            base_t, base_out = measure(base, n, path, args.rounds) if base else ({}, None)
            if base_out is not None:
                same = same and ours_out == base_out
            for key, label in steps:
                b = base_t.get(key)
                ratio = f"{b / ours_t[key]:.0f}×" if b else "—"
                rows.append(f"| {n:,} | {label} | {fmt(ours_t[key])} | {fmt(b) if b else '—'} | {ratio} |")
                print(rows[-1], flush=True)
    print(f"rewrites equal to the baseline's: {same if base else 'no baseline'}")
    body = "\n".join(rows) + (
        "\n\nSynthetic glossaries of N groups `[termI, synIa, synIb]`; the short query is "
        f"`{SHORT}`, the 2,000-term query `term0 term1 … term1999`. Baseline: "
        + (f"{args.baseline_label or Path(args.baseline).name}, timed in the same run; the rewrites of all three "
           f"queries were {'equal' if same else 'DIFFERENT'}" if base else "none")
        + ". Timings on a shared 2-core machine; compare ratios within one run."
    )
    if not args.no_write:
        cmd = "python benchmarks/glossary_speed.py" + (
            f" --sizes {' '.join(map(str, args.sizes))}" if args.sizes != [5000, 50000] else "")
        if args.baseline:
            cmd += f" --baseline {args.baseline}" + (
                f" --baseline-label {shlex.quote(args.baseline_label)}" if args.baseline_label else "")
        update_results_section("glossary-speed", "Glossary size vs load and rewrite time", cmd, body)


if __name__ == "__main__":
    main()
