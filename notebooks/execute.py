"""Re-execute notebooks and save their outputs in place, so the rendered notebooks read well on their own.

Usage (from the repository's root, in the environment of ``make test``: the ``test`` extra has nbclient, ipykernel,
matplotlib and the ``embed`` extra's e5)::

    python notebooks/execute.py                           # notebooks/walkthrough.ipynb
    python notebooks/execute.py notebooks/evaluation.ipynb   # any others, by path
    python notebooks/execute.py --check                   # run, report, leave the files unchanged

Each notebook runs in a fresh ``python3`` kernel with ``notebooks/`` as its working directory (nbclient, 600 s per
cell); the run time is printed.  The committed outputs are those of the offline path: run it without
``RAGSPINE_LLM`` / ``RAGSPINE_RERANKER`` set (this script refuses to save otherwise, unless ``--allow-env``), so a
reader sees the same deterministic answers the tests see.  Saved outputs are refused when they contain the demo's
RESTRICTED marker or an error.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parent
DEFAULT = [NOTEBOOKS / "walkthrough.ipynb"]
#: In every chunk of the demo corpus's RESTRICTED runbook (docs/demo-corpus.md); never in a saved output.
RESTRICTED_MARKER = "INTERNAL-ONLY-7f3a"
#: Settings that change what the walkthrough prints (a real model instead of the offline path).
ONLINE_SETTINGS = ("RAGSPINE_LLM", "RAGSPINE_RERANKER")


def run(path: Path, *, timeout: int = 600) -> tuple[object, float]:
    """Execute the notebook at ``path`` (outputs replaced); returns ``(notebook, seconds)``."""
    import nbclient
    import nbformat

    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": str(path.parent)}}).execute()
    return nb, time.perf_counter() - start


def problems(nb: object) -> list[str]:
    """What makes a notebook's outputs unfit to save: an error output, the RESTRICTED marker anywhere."""
    import nbformat

    found = []
    for i, cell in enumerate(nb.cells):  # type: ignore[attr-defined]
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                found.append(f"cell {i}: {out.get('ename')}: {out.get('evalue')}")
    if RESTRICTED_MARKER in nbformat.writes(nb):  # type: ignore[arg-type]
        found.append(f"the RESTRICTED marker {RESTRICTED_MARKER} is in the outputs")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/walkthrough.ipynb")
    parser.add_argument("--check", action="store_true", help="run and report only; do not save")
    parser.add_argument("--allow-env", action="store_true", help=f"save even with {', '.join(ONLINE_SETTINGS)} set")
    args = parser.parse_args(argv)
    online = [name for name in ONLINE_SETTINGS if os.environ.get(name, "").strip().lower() not in ("", "none")]
    if online and not args.check and not args.allow_env:
        print(f"{', '.join(online)} set: the committed outputs are the offline path's; unset it, or pass "
              "--check / --allow-env", file=sys.stderr)
        return 2
    status = 0
    for path in args.notebooks or DEFAULT:
        import nbformat

        nb, seconds = run(path.resolve())
        found = problems(nb)
        print(f"{path}: executed in {seconds:.1f} s" + (f"; {len(found)} problem(s)" if found else ""))
        for p in found:
            print(f"  {p}", file=sys.stderr)
        if found:
            status = 1
        elif not args.check:
            nbformat.write(nb, path)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
