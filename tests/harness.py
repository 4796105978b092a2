"""What ``tests/conftest.py`` does to every test, as plain functions (so tests of the harness can call them).

Usage (``conftest.py``)::

    isolate_settings(monkeypatch, cache_dir)            # autouse, every test
    write_dotenv = read_dotenv(monkeypatch, tmp_path)   # the ``dotenv`` fixture
    for marker in markers_for(path, item.fixturenames): item.add_marker(marker)

**Settings isolation**, derived from the settings model, so a setting added to it is isolated without a change
here: every variable of a field of :class:`~langchain_ragspine.settings.RagSpineSettings`
(:func:`~langchain_ragspine.settings.setting_variable`; in any letter case, as pydantic-settings reads them unless
the model is case-sensitive) is removed from the environment, the :data:`PINNED` ones are then set (no real
embedding model, no local LLM server, the derived-model cache in the session's temporary directory), and ``.env``
is not read (a developer's own file stays out of the tests; the ``dotenv`` fixture turns it back on for the tests
of reading it).  ``RAGSPINE_DATA`` (where the shared evaluation data lives) is not a setting and is left alone.
A child process a test starts inherits the isolated environment, but reads a ``.env`` in its working directory.

**Markers**, from where a test file is: see :func:`markers_for`.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Callable, Iterable
from pathlib import Path, PurePath

import pytest

from langchain_ragspine.settings import RagSpineSettings, setting_variable

__all__ = [
    "DOTENV",
    "FILE_MARKERS",
    "FIXTURE_MARKERS",
    "FOLDER_MARKERS",
    "INTEGRATION_KINDS",
    "PINNED",
    "clear_settings",
    "isolate_settings",
    "markers_for",
    "read_dotenv",
    "setting_variables",
]

#: field -> the value every test starts with (``cache_dir`` too: the session's temporary directory).
PINNED: dict[str, str] = {
    "embedding": "none",  # with the embed extra, "auto" would load the e5 model
    "ollama_host": "http://127.0.0.1:9",  # the discard port: nothing listens, so --llm auto finds no server
}
#: The ``.env`` file the settings read outside the tests (the model's own ``env_file``).
DOTENV = RagSpineSettings.model_config.get("env_file")


def setting_variables() -> frozenset[str]:
    """The variable of every settings field: ``RAGSPINE_<FIELD>``, and ``OLLAMA_HOST``."""
    return frozenset(setting_variable(field) for field in RagSpineSettings.model_fields)


def clear_settings(monkeypatch: pytest.MonkeyPatch) -> set[str]:
    """Remove every settings variable from the environment, in any letter case unless the model is
    case-sensitive (``ragspine_k=3`` is read as ``RAGSPINE_K``); returns the names removed."""
    wanted = setting_variables()
    if not RagSpineSettings.model_config.get("case_sensitive", False):
        wanted = frozenset(name.upper() for name in wanted)
        removed = {name for name in os.environ if name.upper() in wanted}
    else:
        removed = {name for name in os.environ if name in wanted}
    for name in removed:
        monkeypatch.delenv(name)
    return removed


def isolate_settings(monkeypatch: pytest.MonkeyPatch, cache_dir: Path) -> None:
    """Every settings variable removed, :data:`PINNED` and ``cache_dir`` set, ``.env`` not read (undone with
    ``monkeypatch``)."""
    clear_settings(monkeypatch)
    for field, value in {**PINNED, "cache_dir": str(cache_dir)}.items():
        monkeypatch.setenv(setting_variable(field), value)
    # pydantic-settings reads model_config["env_file"] each time the settings are made
    monkeypatch.setitem(RagSpineSettings.model_config, "env_file", None)


def read_dotenv(monkeypatch: pytest.MonkeyPatch, directory: Path) -> Callable[..., Path]:
    """For a test of reading ``.env``: work in ``directory`` and read its ``.env`` again (the environment stays
    isolated).  Returns ``write(**variables)``, which writes ``directory/.env`` (``VARIABLE=value`` lines, replacing
    the file) and returns its path."""
    monkeypatch.chdir(directory)
    monkeypatch.setitem(RagSpineSettings.model_config, "env_file", DOTENV)

    def write(**variables: str) -> Path:
        path = directory / str(DOTENV)
        path.write_text("".join(f"{name}={value}\n" for name, value in variables.items()), "utf-8")
        return path

    return write


# -- markers -----------------------------------------------------------------------------------------------------
#: A folder of the test tree -> its markers (the folders of docs/dev/plan-issue-26.md, S03; ``integration_tests/`` today).
FOLDER_MARKERS: dict[str, tuple[str, ...]] = {
    "integration_tests": ("integration",),
    "postgres": ("postgres",),
    "standard": ("standard",),
    "langgraph": ("langgraph",),
    "docs": ("docs",),
    "shared_data": ("shared_data",),
}
#: A test file name (a glob) -> its markers, wherever the file is (these names stay when files move).
FILE_MARKERS: dict[str, tuple[str, ...]] = {
    "test_postgres_*.py": ("postgres",),
    "test_*_standard.py": ("standard",),
    "test_langgraph_*.py": ("langgraph",),
    "test_readme.py": ("docs",),
    "test_notebooks.py": ("docs",),
    "test_shared_data.py": ("shared_data",),
}
#: A fixture -> the markers of every test that uses it, directly or through another fixture (``pg_url`` …).
FIXTURE_MARKERS: dict[str, tuple[str, ...]] = {"pg_server": ("postgres",)}
#: What needs more than this process and the repository (a server, a service, another tool, the shared data, the
#: docs' notebooks): each of these markers brings ``integration`` with it.
INTEGRATION_KINDS = frozenset({"postgres", "standard", "langgraph", "docs", "shared_data"})


def markers_for(path: PurePath, fixturenames: Iterable[str] = (), marked: Iterable[str] = ()) -> set[str]:
    """The markers a test gets from where it is: its folders below ``tests/`` (:data:`FOLDER_MARKERS`), its file
    name (:data:`FILE_MARKERS`), the fixtures it uses (:data:`FIXTURE_MARKERS`), plus ``integration`` for any of
    :data:`INTEGRATION_KINDS` among those and among the markers it has already (``marked``: those written on the
    test, such as ``@pytest.mark.shared_data``).  ``path`` is the test file's path relative to ``tests/``."""
    found: set[str] = set()
    for folder in path.parts[:-1]:
        found.update(FOLDER_MARKERS.get(folder, ()))
    for pattern, markers in FILE_MARKERS.items():
        if fnmatch.fnmatchcase(path.name, pattern):
            found.update(markers)
    for fixture in fixturenames:
        found.update(FIXTURE_MARKERS.get(fixture, ()))
    if (found | set(marked)) & INTEGRATION_KINDS:
        found.add("integration")
    return found


def write_corpus(root: Path, texts: dict[str, str]) -> Path:
    """``root`` made a corpus folder of one Markdown file per ``texts`` item (``{name}.md``: the text and a final
    newline); returns ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        (root / f"{name}.md").write_text(text + "\n", "utf-8")
    return root
