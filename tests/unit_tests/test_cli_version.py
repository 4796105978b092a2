"""`ragspine --version` prints the distribution's version and exits 0; `--help` and `--version` import nothing of
the retrieval stack (issue 27 §2: they took a second, importing all of it)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from langchain_ragspine import __version__
from langchain_ragspine.cli import COMMANDS, build_parser, command_parser, main

REPO = Path(__file__).resolve().parents[2]

#: Packages the answer to --help / --version must not load: the stack (and what the settings load).
HEAVY = ("langchain_core", "langchain", "langgraph", "numpy", "faiss", "bm25s", "pydantic", "pydantic_settings",
         "psycopg", "langchain_text_splitters", "langsmith")

# Runs main(argv) in a fresh interpreter and prints which HEAVY packages and which modules of the package it loaded.
_PROBE = """
import json, sys
from langchain_ragspine.cli import main
try:
    status = main(json.loads(sys.argv[1]))
except SystemExit as e:
    status = e.code
heavy = json.loads(sys.argv[2])
loaded = sorted({m.split(".")[0] for m in sys.modules if m.split(".")[0] in heavy})
ours = sorted(m for m in sys.modules if m.startswith("langchain_ragspine"))
print(json.dumps({"status": status, "heavy": loaded, "ours": ours}), file=sys.stderr)
"""


def _probe(*argv: str) -> tuple[dict, str]:
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(list(argv)), json.dumps(HEAVY)],
        capture_output=True, text=True, cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    return json.loads(proc.stderr.strip().splitlines()[-1]), proc.stdout


def test_version_flag(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"ragspine {__version__}"
    assert __version__ != "0+unknown"


@pytest.mark.subprocess
@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["-h"], ["--vers"], [], ["nonsense"]])
def test_help_and_version_import_nothing_of_the_stack(argv):
    report, out = _probe(*argv)
    assert report["status"] == (2 if argv in ([], ["nonsense"]) else 0)
    assert report["heavy"] == [], f"ragspine {' '.join(argv)} imported {report['heavy']}"
    assert report["ours"] == ["langchain_ragspine", "langchain_ragspine._version", "langchain_ragspine.cli"]
    if argv and argv[0].startswith("--v"):
        assert out.strip() == f"ragspine {__version__}"


@pytest.mark.subprocess
def test_the_check_can_fail_a_command_imports_the_stack():
    report, _ = _probe("search", "--help")  # its --mode choices come from the mode registry
    assert report["status"] == 0 and "langchain_core" in report["heavy"]


def test_the_top_level_help_is_the_full_parsers():
    light, _ = command_parser(command_help=False)
    assert light.format_help() == build_parser().format_help()
    assert [name for name, _ in COMMANDS] == ["ingest", "search", "eval", "ask", "demo", "fit-reranker"]


@pytest.mark.subprocess
def test_importing_the_package_loads_nothing_but_its_version():
    proc = subprocess.run(
        [sys.executable, "-c", "import json, sys, langchain_ragspine; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True, text=True, cwd=REPO, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
    )
    loaded = set(json.loads(proc.stdout))
    assert not {m.split(".")[0] for m in loaded} & set(HEAVY)
    assert {m for m in loaded if m.startswith("langchain_ragspine")} == {"langchain_ragspine", "langchain_ragspine._version"}
