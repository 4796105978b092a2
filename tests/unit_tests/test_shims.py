"""The old import paths of modules that issue 26 moved (docs/dev/plan-issue-26.md, S02) keep working for one release.

Each old module is a shim: it re-exports exactly the public names of the module that replaced it (its ``__all__``
equals them; ``config``, split into several modules, re-exports exactly the names it had), as the same objects, and warns about nothing yet (the ``DeprecationWarning`` comes with step R2).  No
test but this one and no graph (``graphs/``) imports a shim; no module of the package either (rule 4 of
``test_import_graph.py``, over the same :data:`SHIM_MODULES`).
"""

from __future__ import annotations

import ast
import importlib
import warnings
from pathlib import Path
from types import ModuleType

import pytest

import langchain_ragspine
from tests.import_graph import ImportGraph

PACKAGE = Path(langchain_ragspine.__file__).parent
TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent

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
        ("CONTEXTUAL_DEFAULT", "STORE_UNCHANGED", "DocumentStore", "IngestSummary", "KeyedVectorCache", "build_bm25",
         "warm_embedding_cache", "write_documents"),
        "langchain_ragspine.pipeline.stages",
    ),
    **dict.fromkeys(
        ("StoreSource", "check_store_chunker", "open_retriever", "open_source", "search"),
        "langchain_ragspine.pipeline.sources",
    ),
    "result_record": "langchain_ragspine.cli",
    "StaleIndexWarning": "langchain_ragspine.errors",
}

#: Every shim module: the modules above, the ``stores`` package, ``config`` and ``indexing``.
SHIM_MODULES = frozenset(SHIMS) | {"langchain_ragspine.stores", "langchain_ragspine.config", "langchain_ragspine.indexing"}


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


@pytest.mark.parametrize("old", sorted(SHIM_MODULES))
def test_a_shim_does_not_warn_yet(old: str) -> None:
    shim = importlib.import_module(old)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        importlib.reload(shim)  # a shim holds no state: running it again is what a first import runs
        for name in shim.__all__:
            getattr(shim, name)


@pytest.fixture(scope="module")
def graph() -> ImportGraph:
    return ImportGraph.from_package(PACKAGE)


def test_no_test_or_graph_imports_a_shim(graph: ImportGraph) -> None:
    """Outside the package (its own modules: rule 4 of ``test_import_graph.py``).  Benchmarks may: they also run
    a package from before the moves (``ingest_speed.py --before``); so may the scripts that wrote the saved-store
    fixtures (``tests/fixtures/*/make_fixture.py``), which run with the package of the commit they name."""
    files = [p for folder in (TESTS, REPO / "graphs") for p in sorted(folder.rglob("*.py"))
             if (TESTS / "fixtures") not in p.parents]
    offenders = [
        f"{path}:{edge.line}: {edge.imported}"
        for path in files
        if path.resolve() != Path(__file__).resolve()
        for edge in graph.imports_in(path)
        if edge.imported in SHIM_MODULES
    ]
    assert offenders == []


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
