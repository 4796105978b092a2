"""The old import paths of modules that issue 26 moved (docs/dev/plan-issue-26.md, S02) keep working for one release.

Each old module is a shim: it re-exports exactly the public names of the module that replaced it (its ``__all__``
equals them; ``config`` and ``indexing``, split into several modules, re-export exactly the names they had), as the
same objects, and importing it issues one ``DeprecationWarning`` (since R2, decision D13: they go one release later)
that names where to import from instead, attributed to the importing line.  The ``stores`` package warns when one
of its names is used, not when it is imported as the parent of ``stores.X`` (so an old import warns once).  No test
but this one, no benchmark and no graph (``graphs/``) imports a shim; no module of the package either (rule 4 of
``test_import_graph.py``, over the same :data:`SHIM_MODULES`).
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

import langchain_ragspine
from langchain_ragspine._stacklevel import moved_message
from tests.import_graph import ImportGraph

PACKAGE = Path(langchain_ragspine.__file__).parent
TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent

#: The shims' own warnings, which the tests below that only read the shims need not see (the warning tests catch
#: them themselves).
pytestmark = pytest.mark.filterwarnings(r"ignore:langchain_ragspine\.\S+ is deprecated:DeprecationWarning")

#: old module -> the module that replaced it.
SHIMS = {
    "langchain_ragspine.stores.chunk_store": "langchain_ragspine.backends.directory.chunk_store",
    "langchain_ragspine.stores.bm25_index": "langchain_ragspine.backends.directory.bm25_index",
    "langchain_ragspine.stores.bm25_parallel": "langchain_ragspine.backends.directory.bm25_parallel",
    "langchain_ragspine.stores.embedding_cache": "langchain_ragspine.backends.directory.embedding_cache",
    "langchain_ragspine.stores.faiss_index": "langchain_ragspine.backends.directory.faiss_index",
    "langchain_ragspine.stores.files": "langchain_ragspine.backends.directory.files",
    "langchain_ragspine.stores.index_state": "langchain_ragspine.backends.directory.index_state",
    "langchain_ragspine.stores.lock": "langchain_ragspine.backends.directory.lock",
    "langchain_ragspine.stores.postgres": "langchain_ragspine.backends.postgres.chunk_store",
    "langchain_ragspine.stores.pg_vectors": "langchain_ragspine.backends.postgres.vectors",
    "langchain_ragspine.stores.pg_lock": "langchain_ragspine.backends.postgres.lock",
    "langchain_ragspine.stores.pg_filter": "langchain_ragspine.filters.sql",
    "langchain_ragspine.modes": "langchain_ragspine.pipeline.modes",
    "langchain_ragspine.document_compressors.contextual": "langchain_ragspine.text_splitters.contextual",
    "langchain_ragspine.vectorstores._indexes": "langchain_ragspine.backends.directory.indexes",
}

#: What ``langchain_ragspine.stores`` exported before the move, and where each name lives now.
STORES_PACKAGE = {
    "ChunkStore": "langchain_ragspine.backends.directory.chunk_store",
    "EmbeddingCache": "langchain_ragspine.backends.directory.embedding_cache",
    "FaissVectorIndex": "langchain_ragspine.backends.directory.faiss_index",
    "StoredChunk": "langchain_ragspine.backends.directory.chunk_store",
}

#: What ``langchain_ragspine.config`` held before issue 26's C1-C2 split it (settings, spec strings, factories), and
#: where each name lives now.  ``config`` is a shim of several modules: it re-exports exactly these.
CONFIG_NAMES = {
    "DEFAULT_FETCH_K": "langchain_ragspine.arguments",
    "ChatModelChoice": "langchain_ragspine.chat_models",
    "DETERMINISTIC_PATH": "langchain_ragspine.chat_models",
    "llm_is_reachable": "langchain_ragspine.chat_models",
    "make_chat_model": "langchain_ragspine.chat_models",
    "resolve_chat_model": "langchain_ragspine.chat_models",
    "configured_setting": "langchain_ragspine.configured",
    "make_compressors": "langchain_ragspine.document_compressors.factory",
    "make_postprocessor": "langchain_ragspine.document_compressors.factory",
    "make_reranker": "langchain_ragspine.document_compressors.factory",
    "make_embeddings": "langchain_ragspine.embeddings.factory",
    "resolve_embedding": "langchain_ragspine.embeddings.factory",
    "LEXICAL_MODES": "langchain_ragspine.pipeline.modes",
    "RETRIEVAL_MODES": "langchain_ragspine.pipeline.modes",
    "make_query_transform": "langchain_ragspine.retrievers.transforms",
    "CHECKED_WHERE_USED": "langchain_ragspine.settings",
    "DEFAULT_K": "langchain_ragspine.settings",
    "DEFAULT_LLM": "langchain_ragspine.settings",
    "DEFAULT_OLLAMA_HOST": "langchain_ragspine.settings",
    "MAX_STATEMENT_TIMEOUT": "langchain_ragspine.settings",
    "RagSpineSettings": "langchain_ragspine.settings",
    "check_timeout": "langchain_ragspine.settings",
    "get_settings": "langchain_ragspine.settings",
    "ollama_base_url": "langchain_ragspine.settings",
    "setting_variable": "langchain_ragspine.settings",
    "settings_error_message": "langchain_ragspine.settings",
    "DEFAULT_CHAT_MODEL": "langchain_ragspine.specs",
    "LLM_QUERY_TRANSFORMS": "langchain_ragspine.specs",
    "POSTPROCESSORS": "langchain_ragspine.specs",
    "QUERY_TRANSFORMS": "langchain_ragspine.specs",
    "RERANKER_SPECS": "langchain_ragspine.specs",
    "configured_postprocessor": "langchain_ragspine.specs",
    "configured_query_transform": "langchain_ragspine.specs",
    "configured_reranker": "langchain_ragspine.specs",
    "normalise_postprocessor_spec": "langchain_ragspine.specs",
    "normalise_reranker_spec": "langchain_ragspine.specs",
    "parse_postprocessor_spec": "langchain_ragspine.specs",
    "parse_reranker_spec": "langchain_ragspine.specs",
    "resolve_query_transform": "langchain_ragspine.specs",
}

#: What ``langchain_ragspine.indexing`` held before P1-P3 split it (its public names, and ``StaleIndexWarning`` and
#: ``INDEX_STATE`` that users imported from it), and where each name lives now.
INDEXING_MODULE = {
    **dict.fromkeys(
        ("BM25_DIR", "CHUNKS_DB", "EMBEDDING_CACHE", "INDEX_STATE", "STORE_MARKER", "VECTOR_DIR", "check_store_dir",
         "prepare_store_dir", "store_writer"),
        "langchain_ragspine.backends.directory.layout",
    ),
    **dict.fromkeys(("PROBE_CHUNKS", "ingest"), "langchain_ragspine.pipeline.ingest"),
    **dict.fromkeys(
        ("CONTEXTUAL_DEFAULT", "DocumentStore", "IngestSummary", "build_bm25", "write_documents"),
        "langchain_ragspine.pipeline.stages",
    ),
    **dict.fromkeys(
        ("StoreSource", "check_store_chunker", "open_retriever", "open_source", "search"),
        "langchain_ragspine.pipeline.sources",
    ),
    **dict.fromkeys(("KeyedVectorCache", "STORE_UNCHANGED", "warm_embedding_cache"), "langchain_ragspine.embeddings.cache"),
    "result_record": "langchain_ragspine.cli",
    "StaleIndexWarning": "langchain_ragspine.errors",
}

#: What ``langchain_ragspine.postgres`` held before item 8 of issue 26 moved the PostgreSQL backend into one folder
#: (and ingest's and the sources' PostgreSQL parts beside their directory twins), and where each name lives now.
POSTGRES_MODULE = {
    **dict.fromkeys(("active_document_count", "add_documents", "write_versions"),
                    "langchain_ragspine.backends.postgres.versions"),
    "ingest_postgres": "langchain_ragspine.pipeline.ingest",
    "PostgresSource": "langchain_ragspine.pipeline.sources",
}

#: Every shim module: the modules above, the ``stores`` package, ``config``, ``indexing`` and ``postgres``.
SHIM_MODULES = frozenset(SHIMS) | {"langchain_ragspine.stores", "langchain_ragspine.config", "langchain_ragspine.indexing",
                                   "langchain_ragspine.postgres"}


def _defined_public_names(module: ModuleType) -> set[str]:
    """The public names a module defines at top level (functions, classes, assignments), read from its source:
    what its ``__all__`` would hold (for a module that has none yet)."""
    assert module.__file__ is not None
    names: set[str] = set()
    for node in ast.parse(Path(module.__file__).read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if not n.startswith("_")}


def _public_names(module: ModuleType) -> set[str]:
    declared = getattr(module, "__all__", None)
    return set(declared) if declared is not None else _defined_public_names(module)


@pytest.mark.parametrize("old, new", sorted(SHIMS.items()))
def test_a_shim_reexports_exactly_the_public_names_of_its_new_module(old: str, new: str) -> None:
    shim, moved = importlib.import_module(old), importlib.import_module(new)
    assert len(shim.__all__) == len(set(shim.__all__))
    assert set(shim.__all__) == _public_names(moved)
    for name in shim.__all__:
        assert getattr(shim, name) is getattr(moved, name), f"{old}.{name} is not {new}.{name}"
    # nothing else public: a shim holds re-exports only
    assert {n for n in vars(shim) if not n.startswith("_")} == set(shim.__all__)


def test_the_stores_package_reexports_what_it_exported() -> None:
    import langchain_ragspine.stores as stores

    assert sorted(stores.__all__) == sorted(STORES_PACKAGE)
    for name, home in STORES_PACKAGE.items():
        assert getattr(stores, name) is getattr(importlib.import_module(home), name)


def test_config_reexports_every_name_it_had_from_its_new_home() -> None:
    import langchain_ragspine.config as config

    assert sorted(config.__all__) == sorted(CONFIG_NAMES)
    for name, home in CONFIG_NAMES.items():
        module = importlib.import_module(home)
        assert name in module.__all__, f"{name} is not a public name of {home}"
        assert getattr(config, name) is getattr(module, name), f"config.{name} is not {home}.{name}"
    # nothing else public: the shim defines nothing itself
    assert {n for n in vars(config) if not n.startswith("_")} == set(config.__all__)


def test_the_indexing_module_reexports_what_it_held() -> None:
    import langchain_ragspine.indexing as indexing

    assert sorted(indexing.__all__) == sorted(INDEXING_MODULE)
    for name, home in INDEXING_MODULE.items():
        assert getattr(indexing, name) is getattr(importlib.import_module(home), name), name
    # nothing else public: the shim holds re-exports only
    assert {n for n in vars(indexing) if not n.startswith("_")} == set(indexing.__all__)


def test_the_postgres_module_reexports_what_it_held() -> None:
    import langchain_ragspine.postgres as postgres

    assert sorted(postgres.__all__) == sorted(POSTGRES_MODULE)
    for name, home in POSTGRES_MODULE.items():
        module = importlib.import_module(home)
        assert name in module.__all__, f"{name} is not a public name of {home}"
        assert getattr(postgres, name) is getattr(module, name), name
    assert {n for n in vars(postgres) if not n.startswith("_")} == set(postgres.__all__)


def test_old_paths_give_the_same_objects() -> None:
    import langchain_ragspine.stores.chunk_store
    import langchain_ragspine.stores.postgres
    from langchain_ragspine.backends.directory.chunk_store import ChunkStore
    from langchain_ragspine.backends.postgres.chunk_store import close_pools
    from langchain_ragspine.modes import register_mode
    from langchain_ragspine.pipeline import modes
    from langchain_ragspine.stores import ChunkStore as OldChunkStore

    assert langchain_ragspine.stores.chunk_store.ChunkStore is ChunkStore is OldChunkStore
    assert langchain_ragspine.stores.postgres.close_pools is close_pools
    assert register_mode is modes.register_mode  # one registry, whichever path registers a mode


#: What each shim's warning says to import instead: a module (all its names), or name -> home.
INSTEAD: dict[str, str | dict[str, str]] = {
    **SHIMS, "langchain_ragspine.config": CONFIG_NAMES, "langchain_ragspine.indexing": INDEXING_MODULE,
    "langchain_ragspine.postgres": POSTGRES_MODULE,
}


def _homes_named(message: str, old: str) -> str | dict[str, str]:
    """What a shim's warning says to import instead: the one module, or each name's home (from
    :func:`moved_message`'s two forms)."""
    head = f"{old} is deprecated and goes in the next release: import "
    assert message.startswith(head), message
    rest = message.removeprefix(head)
    if rest.startswith("its names from "):
        return rest.removeprefix("its names from ")
    named: dict[str, str] = {}
    for group in rest.removeprefix("each name from its home: ").split("; "):
        names, _, home = group.partition(" from ")
        named.update(dict.fromkeys(names.split(", "), home))
    return named


@pytest.fixture
def fresh() -> Iterator[None]:
    """The shims (and the ``stores`` package's cached names) forgotten for one test, then put back: importing one
    again runs it again, as a first import in a new interpreter does."""
    import langchain_ragspine.stores as stores

    saved = {name: sys.modules.pop(name) for name in list(sys.modules) if name in SHIM_MODULES}
    cached = {name: vars(stores).pop(name) for name in STORES_PACKAGE if name in vars(stores)}
    try:
        yield
    finally:
        sys.modules.update(saved)
        for name, module in saved.items():  # the parent's attribute too: the module it had
            parent, _, child = name.rpartition(".")
            setattr(sys.modules[parent], child, module)
        vars(stores).update(cached)


@pytest.mark.parametrize("old", sorted(SHIMS.keys() | {"langchain_ragspine.config", "langchain_ragspine.indexing"}))
def test_importing_a_shim_warns_once_naming_its_home_at_the_importing_line(old: str, fresh: None) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        line = sys._getframe().f_lineno + 1
        __import__(old)  # an import statement's call: the frames between are the import machinery's
    ours = [w for w in caught if "langchain_ragspine" in str(w.message)]
    assert [(w.category, w.filename, w.lineno) for w in ours] == [(DeprecationWarning, __file__, line)]
    assert _homes_named(str(ours[0].message), old) == INSTEAD[old]
    if old in SHIMS:
        assert str(ours[0].message) == moved_message(old, SHIMS[old])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        __import__(old)  # imported now: no second warning
        shim = sys.modules[old]
        for name in shim.__all__:
            getattr(shim, name)


def test_the_stores_package_warns_when_a_name_is_used_not_when_imported(fresh: None) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        __import__("langchain_ragspine.stores")  # also what importing stores.X runs first: no warning of its own
        assert caught == []
        line = sys._getframe().f_lineno + 1
        from langchain_ragspine.stores import ChunkStore, StoredChunk  # noqa: F401 - what is under test
        from langchain_ragspine.stores import ChunkStore as Again  # noqa: F401 - cached: no second warning
    assert [(w.category, w.filename, w.lineno) for w in caught] == [(DeprecationWarning, __file__, line)] * 2
    assert [_homes_named(str(w.message), "langchain_ragspine.stores") for w in caught] == [
        {"ChunkStore": STORES_PACKAGE["ChunkStore"]}, {"StoredChunk": STORES_PACKAGE["StoredChunk"]}
    ]
    import langchain_ragspine.stores as stores

    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        stores.nothing  # noqa: B018 - the attribute error is what is under test


#: Imports each shim in a fresh interpreter, one ``import`` statement each, and prints what each warned (JSON).
_FRESH_IMPORTS = """\
import importlib, json, sys, warnings
for home in json.loads(sys.argv[1]):  # the homes first: only the shims' own warnings are caught below
    importlib.import_module(home)
seen = {}
"""


@pytest.mark.subprocess
def test_each_shim_warns_once_in_a_fresh_interpreter_at_the_users_import(tmp_path: Path) -> None:
    """The same in a new interpreter, with real ``import`` statements (the old spellings users wrote): a
    ``stores.X`` import runs the ``stores`` package first, and still warns once."""
    statements = {old: f"import {old}" for old in sorted(SHIM_MODULES - {"langchain_ragspine.stores"})}
    statements["langchain_ragspine.stores"] = "from langchain_ragspine.stores import ChunkStore"
    script, lines = [_FRESH_IMPORTS], {}
    for old, statement in statements.items():
        script.append("with warnings.catch_warnings(record=True) as caught:\n    warnings.simplefilter('always')\n")
        lines[old] = sum(part.count("\n") for part in script) + 1
        script.append(f"    {statement}\n")
        script.append(f"seen[{old!r}] = [(w.category.__name__, w.filename, w.lineno, str(w.message)) "
                      "for w in caught]\n")
    script.append("print(json.dumps(seen))\n")
    path = tmp_path / "old_user_code.py"
    path.write_text("".join(script), "utf-8")
    homes = sorted({*SHIMS.values(), *CONFIG_NAMES.values(), *INDEXING_MODULE.values(), *POSTGRES_MODULE.values(),
                    *STORES_PACKAGE.values()})
    proc = subprocess.run([sys.executable, str(path), json.dumps(homes)], capture_output=True, text=True, cwd=REPO,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert {old: [(c, f, n) for c, f, n, _ in found] for old, found in seen.items()} == {
        old: [("DeprecationWarning", str(path), lines[old])] for old in statements
    }
    for old, found in seen.items():
        expected = INSTEAD.get(old, {"ChunkStore": STORES_PACKAGE["ChunkStore"]})
        assert _homes_named(found[0][3], old) == expected


def test_the_doctest_collection_leaves_every_shim_out() -> None:
    """``pytest`` collects the package for its examples (``--doctest-modules``), which imports each module: a shim
    left in would warn in every run (and fail one under ``-W error::DeprecationWarning``)."""
    import fnmatch
    import shlex
    import tomllib

    addopts = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["tool"]["pytest"]["ini_options"]["addopts"]
    globs = [opt.removeprefix("--ignore-glob=") for opt in shlex.split(addopts) if opt.startswith("--ignore-glob=")]
    files = {name: PACKAGE.parent.joinpath(*name.split(".")) for name in SHIM_MODULES}
    paths = {name: path if path.is_dir() else path.with_suffix(".py") for name, path in files.items()}
    left_in = sorted(name for name, path in paths.items()
                     if not any(fnmatch.fnmatch(str(p), g) for p in (path, *path.parents) for g in globs))
    assert left_in == []


@pytest.fixture(scope="module")
def graph() -> ImportGraph:
    return ImportGraph.from_package(PACKAGE)


def _fallback_lines(path: Path) -> set[int]:
    """The lines of the imports inside ``except ImportError:`` (or ``ModuleNotFoundError``) handlers of a file: a
    benchmark's fallback for a ``--before`` package from before the moves, run only where the new path fails."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ExceptHandler) and node.type is not None:
            caught = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
            if any(isinstance(c, ast.Name) and c.id in {"ImportError", "ModuleNotFoundError"} for c in caught):
                lines.update(n.lineno for stmt in node.body for n in ast.walk(stmt)
                             if isinstance(n, ast.Import | ast.ImportFrom))
    return lines


def _shim_imports_outside_the_package(graph: ImportGraph, root: Path) -> list[str]:
    files = [p for folder in (root / "tests", root / "graphs", root / "benchmarks") for p in sorted(folder.rglob("*.py"))
             if (root / "tests" / "fixtures") not in p.parents]
    return [
        f"{path.relative_to(root)}:{edge.line}: {edge.imported}"
        for path in files
        if path.name != Path(__file__).name
        for edge in graph.imports_in(path)
        if edge.imported in SHIM_MODULES and edge.line not in _fallback_lines(path)
    ]


def test_no_test_benchmark_or_graph_imports_a_shim(graph: ImportGraph) -> None:
    """Outside the package (its own modules: rule 4 of ``test_import_graph.py``), so the suite and the benchmarks
    raise none of the shims' warnings.  A benchmark may in an ``except ImportError:`` fallback, run only with a
    ``--before`` package from before the moves (``ingest_speed.py --before``); so may the scripts that wrote the
    saved-store fixtures (``tests/fixtures/*/make_fixture.py``), which run with the package of the commit they
    name."""
    assert _shim_imports_outside_the_package(graph, REPO) == []


def test_the_outside_check_fails_on_a_benchmark_importing_a_shim(graph: ImportGraph, tmp_path: Path) -> None:
    for folder in ("tests/fixtures/old", "graphs", "benchmarks"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "benchmarks" / "bench.py").write_text(
        "try:\n    from langchain_ragspine.pipeline import ingest\nexcept ImportError:\n"
        "    from langchain_ragspine import indexing\n"                   # a fallback: allowed
        "def run():\n    from langchain_ragspine.config import make_chat_model\n",  # not
        "utf-8",
    )
    (tmp_path / "tests" / "fixtures" / "old" / "make_fixture.py").write_text("import langchain_ragspine.indexing\n")
    assert _shim_imports_outside_the_package(graph, tmp_path) == ["benchmarks/bench.py:6: langchain_ragspine.config"]


def test_the_shim_check_sees_a_shim_import(graph: ImportGraph, tmp_path: Path) -> None:
    """The scan above finds each form of import (a check that cannot fail is no check)."""
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import langchain_ragspine.stores.lock\n"
        "from langchain_ragspine import modes\n"
        "from langchain_ragspine.stores import ChunkStore\n"
        "def f():\n    from langchain_ragspine.document_compressors import contextual\n",
        encoding="utf-8",
    )
    hits = {edge.imported for edge in graph.imports_in(sample) if edge.imported in SHIM_MODULES}
    assert hits == {
        "langchain_ragspine.stores.lock",
        "langchain_ragspine.modes",
        "langchain_ragspine.stores",
        "langchain_ragspine.document_compressors.contextual",
    }
