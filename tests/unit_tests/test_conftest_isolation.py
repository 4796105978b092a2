"""The test harness (``tests/conftest.py`` over ``tests/harness.py``): settings isolation and markers.

Regression: ``tests/conftest.py`` handled 14 of the 21 settings variables, by a hand-kept list, so a developer's
own ``RAGSPINE_WORKERS=-1`` (or ``RAGSPINE_PG_*``, ``RAGSPINE_RERANKER``, ``RAGSPINE_POSTPROCESSOR``, a lower-case
``ragspine_k``) or a ``.env`` in the working directory changed what the tests saw (``RAGSPINE_WORKERS=-1 pytest``
failed 47 tests).  The isolation is now derived from the settings model: every field's variable is removed (in any
letter case), the pinned ones are set, ``.env`` is not read.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tomllib
from pathlib import Path, PurePath
from typing import Any

import pytest

from langchain_ragspine.settings import RagSpineSettings, get_settings, setting_variable
from tests.harness import DOTENV, PINNED, isolate_settings, markers_for, setting_variables

TESTS = Path(__file__).resolve().parents[1]

#: a bad or surprising value for some variables (the others get ``garbage-<field>``)
GARBAGE = {"RAGSPINE_WORKERS": "-1", "RAGSPINE_K": "abc", "RAGSPINE_CHUNK_SIZE": "0", "RAGSPINE_EMBEDDING": "e5",
           "OLLAMA_HOST": "http://localhost:11434", "RAGSPINE_STORE": "postgresql://nowhere/db"}


def _garbage(prefix: str) -> dict[str, str]:
    return {variable: GARBAGE.get(variable, f"{prefix}-{variable.lower()}") for variable in setting_variables()}


def _expected(cache_dir: Path) -> dict[str, Any]:
    """The settings a test starts with: the defaults, with the pinned values."""
    defaults = {f: info.get_default(call_default_factory=True) for f, info in RagSpineSettings.model_fields.items()}
    return {**defaults, **PINNED, "cache_dir": cache_dir}


def test_the_variables_are_those_of_the_settings_model() -> None:
    assert setting_variables() == {setting_variable(f) for f in RagSpineSettings.model_fields}
    assert len(setting_variables()) == len(RagSpineSettings.model_fields)
    assert {"RAGSPINE_WORKERS", "RAGSPINE_PG_POOL_SIZE", "RAGSPINE_RERANKER", "OLLAMA_HOST"} <= setting_variables()


def test_garbage_in_every_variable_and_in_dotenv_leaves_the_defaults_and_the_pinned_values(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text("".join(f"{k}={v}\n" for k, v in _garbage("dotenv").items()), "utf-8")
    for variable, value in _garbage("env").items():
        monkeypatch.setenv(variable, value)
    monkeypatch.setenv("ragspine_tokenizer", "lowercase-garbage")  # read as RAGSPINE_TOKENIZER
    monkeypatch.setenv("RAGSPINE_DATA", "/where/the/shared/data/is")  # not a setting: left alone
    monkeypatch.setenv("RAGSPINE_NOTEBOOK_OUT", "kept")  # a tool's variable (settings.TOOL_VARIABLES), no setting
    monkeypatch.setitem(RagSpineSettings.model_config, "env_file", DOTENV)
    defaults = _expected(tmp_path / "cache")
    polluted = get_settings().model_dump()
    assert all(polluted[f] != defaults[f] for f in RagSpineSettings.model_fields)  # every variable is read

    before = dict(os.environ)
    isolate_settings(monkeypatch, tmp_path / "cache")

    assert get_settings().model_dump() == defaults
    changed = {name for name in before if os.environ.get(name) != before[name]}
    assert {name.upper() for name in changed} == setting_variables()  # cleared (or pinned): exactly the model's
    assert "ragspine_tokenizer" in changed
    assert os.environ["RAGSPINE_DATA"] == "/where/the/shared/data/is"
    assert os.environ["RAGSPINE_NOTEBOOK_OUT"] == "kept"
    # .env is still there, and would be read: the isolation is what keeps it out
    monkeypatch.setitem(RagSpineSettings.model_config, "env_file", DOTENV)
    reread = get_settings().model_dump()
    assert all(reread[f] != defaults[f] for f in RagSpineSettings.model_fields if f not in (*PINNED, "cache_dir"))


def test_every_test_starts_isolated(_session_cache_dir: Path) -> None:
    assert RagSpineSettings.model_config["env_file"] is None
    assert {name.upper() for name in os.environ} & setting_variables() == {
        setting_variable(field) for field in (*PINNED, "cache_dir")
    }
    assert get_settings().model_dump() == _expected(_session_cache_dir)


@pytest.fixture(scope="module")
def seen_by_a_module_fixture() -> tuple[object, set[str], dict[str, Any]]:
    return (RagSpineSettings.model_config["env_file"], {n.upper() for n in os.environ} & setting_variables(),
            get_settings().model_dump())


def test_module_fixtures_are_isolated_too(seen_by_a_module_fixture: Any, _session_cache_dir: Path) -> None:
    """Regression: the isolation was a function-scoped fixture, so a module-scoped fixture that ingests read a
    developer's ``RAGSPINE_TOKENIZER`` (``test_query_transform_config``'s ``demo_store``)."""
    env_file, variables, settings = seen_by_a_module_fixture
    assert env_file is None
    assert variables == {setting_variable(field) for field in (*PINNED, "cache_dir")}
    assert settings == _expected(_session_cache_dir)


def test_the_dotenv_fixture_reads_the_file_it_writes(dotenv: Any, tmp_path: Path) -> None:
    assert Path.cwd() == tmp_path
    assert get_settings().k == 6  # no .env yet
    path = dotenv(RAGSPINE_K="9", RAGSPINE_TOKENIZER="cjk")
    assert path == tmp_path / ".env"
    assert (get_settings().k, get_settings().tokenizer) == (9, "cjk")
    assert get_settings().embedding == "none"  # the environment (pinned) still wins over .env
    dotenv(RAGSPINE_K="3")
    assert (get_settings().k, get_settings().tokenizer) == (3, "auto")


# -- markers ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path, fixtures, marked, expected", [
    ("unit_tests/retrievers/test_bm25.py", (), (), set()),
    ("integration_tests/postgres/test_postgres_store.py", (), (), {"postgres", "integration"}),
    ("unit_tests/vectorstores/test_vectorstore_filters.py", ("tmp_path", "pg_url", "pg_server"), (), {"postgres", "integration"}),
    ("unit_tests/test_ask_cli.py", (), ("shared_data",), {"integration"}),  # shared_data itself is on the test
    ("unit_tests/embeddings/test_embeddings.py", (), ("subprocess",), set()),
    ("integration_tests/test_readme.py", (), (), {"docs", "integration"}),
    ("integration_tests/test_notebooks.py", (), (), {"docs", "integration"}),
    ("integration_tests/test_vectorstore_standard.py", (), (), {"standard", "integration"}),
    ("integration_tests/test_langgraph_dev.py", (), (), {"langgraph", "integration"}),
    ("integration_tests/test_shared_data.py", (), (), {"shared_data", "integration"}),
    # the folders of the tree S03 moves the files into
    ("integration_tests/postgres/test_backend.py", (), (), {"postgres", "integration"}),
    ("integration_tests/shared_data/test_ask_cli.py", (), (), {"shared_data", "integration"}),
    ("integration_tests/docs/test_readme.py", (), (), {"docs", "integration"}),
])
def test_markers_follow_folder_file_and_fixtures(path: str, fixtures: tuple[str, ...], marked: tuple[str, ...],
                                                 expected: set[str]) -> None:
    assert markers_for(PurePath(path), fixtures, marked) == expected


#: a plugin for the child pytest below: prints what ``-m`` kept and left out, with each test's markers
_REPORTER = """
def _line(tag, item):
    print(tag, item.name, ",".join(sorted({m.name for m in item.iter_markers()})))

def pytest_deselected(items):
    for item in items:
        _line("deselected", item)

def pytest_collection_finish(session):
    for item in session.items:
        _line("selected", item)
"""


@pytest.mark.subprocess
def test_the_collection_hook_marks_before_m_selects(tmp_path: Path) -> None:
    """The real conftest and pytest options on a tiny test tree: ``-m`` sees the markers the hook adds (it runs
    first), and a test using ``pg_server`` through another fixture is ``postgres``."""
    tree = tmp_path / "tests"
    (tree / "unit_tests").mkdir(parents=True)
    (tree / "integration_tests").mkdir()
    for name in ("conftest.py", "harness.py", "__init__.py"):
        (tree / name).write_text((TESTS / name).read_text("utf-8"), "utf-8")
    (tree / "unit_tests" / "__init__.py").touch()
    (tree / "integration_tests" / "__init__.py").touch()
    (tree / "unit_tests" / "test_plain.py").write_text(
        "import pytest\n\ndef test_unit(): pass\n\ndef test_pg(pg_url): pass\n\n"
        "@pytest.mark.shared_data\ndef test_data(): pass\n\n@pytest.mark.subprocess\ndef test_child(): pass\n",
        "utf-8",
    )
    (tree / "unit_tests" / "test_postgres_x.py").write_text("def test_pg_file(): pass\n", "utf-8")
    (tree / "integration_tests" / "test_x_standard.py").write_text("def test_std(): pass\n", "utf-8")
    (tmp_path / "reporter.py").write_text(_REPORTER, "utf-8")
    options = tomllib.loads((TESTS.parent / "pyproject.toml").read_text("utf-8"))["tool"]["pytest"]["ini_options"]
    assert "--strict-markers" in options["addopts"].split()
    (tmp_path / "pytest.ini").write_text(
        f"[pytest]\naddopts = {options['addopts']}\nmarkers =\n" + "".join(f"    {m}\n" for m in options["markers"]),
        "utf-8",
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(TESTS.parent)]),
           "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "reporter", "-p", "no:cacheprovider",
         "-c", str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path), "-m", "not integration", str(tree)],
        capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(line for line in done.stdout.splitlines() if line.startswith(("selected", "deselected"))) == [
        "deselected test_data integration,shared_data",
        "deselected test_pg integration,postgres",
        "deselected test_pg_file integration,postgres",
        "deselected test_std integration,standard",
        "selected test_child subprocess",
        "selected test_unit ",
    ]


# -- the subprocess marker is written on every test that starts a process ----------------------------------------
def _starts_a_process(node: ast.AST) -> bool:
    """``subprocess.run / Popen / call / check_call / check_output``, ``os.fork``, ``multiprocessing.*``."""
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and (
            (n.value.id == "subprocess" and n.attr in {"run", "Popen", "call", "check_call", "check_output"})
            or (n.value.id == "os" and n.attr.startswith("fork"))
            or n.value.id == "multiprocessing"
        ):
            return True
    return False


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        n.arg for n in ast.walk(node) if isinstance(n, ast.arg)  # fixtures by parameter name
    }


def _definitions(tree: ast.Module) -> dict[str, ast.AST]:
    found: dict[str, ast.AST] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found[node.name] = node
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                if isinstance(target, ast.Name):
                    found[target.id] = node
    return found


def _tests_starting_a_process(files: list[Path], root: Path) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """``"file::test"`` (file relative to ``root``) -> the test function, for every test that starts a process:
    itself, or through a function, class, fixture or module-level value of its file, or a helper (of any of
    ``files``) it imports by name."""
    trees = {path: ast.parse(path.read_text("utf-8")) for path in files}
    helpers = {name for tree in trees.values() for name, node in _definitions(tree).items() if _starts_a_process(node)}
    found: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    for path, tree in trees.items():
        definitions = _definitions(tree)
        spawning = {name for name, node in definitions.items() if _starts_a_process(node)}
        spawning |= {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                     for a in n.names if a.name in helpers}
        while grown := {name for name, node in definitions.items() if name not in spawning and _names(node) & spawning}:
            spawning |= grown
        for name in spawning:
            node = definitions.get(name)
            if name.startswith("test_") and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                found[f"{path.relative_to(root)}::{name}"] = node
    return found


def _marked_subprocess(test: ast.FunctionDef | ast.AsyncFunctionDef, tree: ast.Module) -> bool:
    """Marked on the test, or on parameters of it (``pytest.param(..., marks=pytest.mark.subprocess)``, also in a
    module-level value its decorators name)."""
    values = _definitions(tree)
    sources: list[ast.AST] = [*test.decorator_list]
    sources += [values[name] for d in test.decorator_list for name in _names(d) if name in values]
    return any(
        isinstance(n, ast.Attribute) and n.attr == "subprocess" and isinstance(n.value, ast.Attribute)
        and n.value.attr == "mark"
        for source in sources for n in ast.walk(source)
    )


def test_every_test_that_starts_a_process_is_marked_subprocess() -> None:
    files = sorted(p for p in TESTS.rglob("*.py") if "fixtures" not in p.relative_to(TESTS).parts)
    trees = {str(p.relative_to(TESTS)): ast.parse(p.read_text("utf-8")) for p in files}
    found = _tests_starting_a_process(files, TESTS)
    assert len(found) >= 30  # the check finds them (the CLI, child scripts, the LangGraph server, GatedIngest ...)
    unmarked = sorted(key for key, test in found.items() if not _marked_subprocess(test, trees[key.split("::")[0]]))
    assert unmarked == [], "add @pytest.mark.subprocess to these tests"


def test_the_process_check_follows_helpers_and_fixtures(tmp_path: Path) -> None:
    (tmp_path / "_child.py").write_text(
        "import subprocess\n\nclass Gate:\n    def __init__(self):\n        subprocess.Popen(['x'])\n", "utf-8")
    (tmp_path / "test_x.py").write_text(
        "import os, pytest\nfrom ._child import Gate\n\n"
        "def _spawn():\n    os.fork()\n\n@pytest.fixture\ndef forked():\n    _spawn()\n\n"
        "HOWS = [pytest.param('child', marks=pytest.mark.subprocess), 'here']\n\n"
        "def test_gate():\n    Gate()\n\ndef test_fixture(forked):\n    pass\n\n"
        "@pytest.mark.subprocess\ndef test_marked():\n    _spawn()\n\n"
        "@pytest.mark.parametrize('how', HOWS)\ndef test_param(how):\n    _spawn()\n\n"
        "def test_plain():\n    pass\n",
        "utf-8",
    )
    found = _tests_starting_a_process([tmp_path / "_child.py", tmp_path / "test_x.py"], tmp_path)
    tree = ast.parse((tmp_path / "test_x.py").read_text("utf-8"))
    assert {key: _marked_subprocess(test, tree) for key, test in found.items()} == {
        "test_x.py::test_gate": False, "test_x.py::test_fixture": False,
        "test_x.py::test_marked": True, "test_x.py::test_param": True,
    }
