"""Shared helpers for the benchmark scripts: locating ../shared/data and updating benchmarks/RESULTS.md."""

from __future__ import annotations

import datetime as _dt
import os
import platform
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "benchmarks" / "RESULTS.md"
DATA = Path(os.environ.get("RAGSPINE_DATA", REPO.parent / "shared" / "data"))


def machine() -> str:
    """One line describing where the numbers were measured."""
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def git_rev() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def update_results_section(
    name: str, title: str, command: str, body: str, *, measured: str | None = None, commit: str | None = None
) -> None:
    """Replace (or append) the section ``name`` of RESULTS.md with ``body``, stamped with command, date and commit
    (default: now and HEAD; a report written later from a saved run passes the run's own)."""
    stamp = measured or _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    section = (
        f"<!-- BEGIN {name} -->\n## {title}\n\n"
        f"Command: `{command}`  \nMeasured: {stamp}, commit {commit or git_rev()}, {machine()}\n\n"
        f"{body.rstrip()}\n<!-- END {name} -->"
    )
    text = RESULTS.read_text("utf-8") if RESULTS.exists() else "# Benchmark results\n\nRegenerate with `make bench`.\n"
    pattern = re.compile(rf"<!-- BEGIN {re.escape(name)} -->.*?<!-- END {re.escape(name)} -->", re.S)
    if pattern.search(text):
        text = pattern.sub(lambda _: section, text)
    else:
        text = text.rstrip() + "\n\n" + section + "\n"
    RESULTS.write_text(text, "utf-8")


def data_missing(sets: list[str]) -> bool:
    """Whether a set of ``sets`` has no ``questions.jsonl`` under :data:`DATA`; if so, say which on stderr."""
    import sys

    missing = [s for s in sets if not (DATA / s / "questions.jsonl").exists()]
    if missing:
        print(f"benchmark data not found: {', '.join(str(DATA / s) for s in missing)} "
              "(expected ../shared/data beside the repo, or set RAGSPINE_DATA)", file=sys.stderr)
    return bool(missing)


def run_json_worker(script: str | os.PathLike[str], cfg: dict, src: Path, env: dict[str, str] | None = None) -> dict:
    """Run ``python SCRIPT --worker JSON(cfg)`` in ``src`` with ``src`` (a package folder, e.g. an older commit's
    export) and ``benchmarks/`` on ``PYTHONPATH`` and ``env`` added; return the JSON object its last stdout line
    holds.  A failing worker prints its stderr and exits the benchmark."""
    import json
    import sys

    path = Path(script).resolve()
    proc = subprocess.run(
        [sys.executable, str(path), "--worker", json.dumps(cfg)],
        capture_output=True,
        text=True,
        cwd=str(src),
        env={**os.environ, **(env or {}), "PYTHONPATH": os.pathsep.join([str(src), str(REPO / "benchmarks")])},
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"{path.name}: worker {cfg} exited with status {proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1])
