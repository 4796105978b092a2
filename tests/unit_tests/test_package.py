"""Packaging: the public API is pinned, the version comes from the distribution's metadata."""

from __future__ import annotations

import importlib.metadata
import inspect
from pathlib import Path

import pytest

import langchain_ragspine
from langchain_ragspine import _version

#: The public API. Adding or removing a name is a deliberate edit of this list (and of the docs that name it).
PUBLIC_API = [
    "BM25Retriever",
    "ChunkStore",
    "ContextualHeader",
    "CorpusLoader",
    "CrossEncoderReranker",
    "DecompositionRetriever",
    "DenseRetriever",
    "ExtractiveCompressor",
    "FilterExtractionRetriever",
    "GlossaryRetriever",
    "HyDERetriever",
    "HybridRetriever",
    "LLMListwiseReranker",
    "LayoutTextSplitter",
    "LostInTheMiddleReorder",
    "MMRCompressor",
    "MultiIndexRetriever",
    "MultiQueryRetriever",
    "ParagraphTextSplitter",
    "ParentChildRetriever",
    "ParentChildTextSplitter",
    "QueryDenyList",
    "RAGFusionRetriever",
    "RagSpineError",
    "RagSpineSettings",
    "RagSpineVectorStore",
    "RestrictedGate",
    "SemanticTextSplitter",
    "SentenceWindowTextSplitter",
    "StepBackRetriever",
    "get_settings",
    "ingest",
    "is_restricted",
    "make_answer_chain",
    "make_chat_model",
    "make_embeddings",
    "make_query_transform",
    "open_retriever",
    "register_mode",
    "search",
]


#: Names the root exported before issue 26 R1 -> the module that still exports them (for one release the root
#: resolves each with a DeprecationWarning).
MOVED_FROM_THE_ROOT = {
    "IngestSummary": "langchain_ragspine.pipeline.stages",
    "LoaderError": "langchain_ragspine.errors",
    "RESTRICTED_SENSITIVITY": "langchain_ragspine.document_compressors",
    "RetrievalMode": "langchain_ragspine.pipeline.modes",
    "StoreError": "langchain_ragspine.errors",
    "StoredChunk": "langchain_ragspine.backends.directory.chunk_store",
    "compile_filter": "langchain_ragspine.filters",
    "get_tokenizer": "langchain_ragspine.tokenizers",
    "matches": "langchain_ragspine.filters",
}


def test_the_public_api_is_exactly_the_pinned_list():
    assert langchain_ragspine.__all__ == PUBLIC_API
    assert PUBLIC_API == sorted(PUBLIC_API)
    assert len(PUBLIC_API) <= 40  # issue 26 R1: what a user composes; helpers live in their subpackages


def test_dir_of_the_root_shows_the_public_names_not_its_own_helpers() -> None:
    """Regression (trial of 5d1ab81): ``dir(langchain_ragspine)`` listed ``Any``, ``TYPE_CHECKING`` and
    ``importlib`` (and the lazy-import tables) beside the public names."""
    shown = [n for n in dir(langchain_ragspine) if not n.startswith("__")]
    assert shown == sorted(langchain_ragspine.__all__)


@pytest.mark.subprocess
def test_a_name_the_root_no_longer_exports_still_resolves_once_with_a_warning_naming_its_module(
    tmp_path: Path,
) -> None:
    """Each moved name, in a fresh interpreter (the root caches what it resolved): ``from langchain_ragspine import
    X`` gives the object its module exports, with one DeprecationWarning that points at the importing line and
    names the module to import it from; the name is not in ``__all__`` nor ``dir()`` before its use."""
    import subprocess
    import sys

    script = """
import importlib, json, sys, warnings
moved = json.loads(sys.argv[1])
import langchain_ragspine as root
before = set(dir(root))
out = {}
for name, module in moved.items():
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        value = getattr(root, name)
        again = getattr(root, name)
    out[name] = {
        "same": value is getattr(importlib.import_module(module), name) and again is value,
        "warnings": [(w.category.__name__, str(w.message), w.filename == __file__) for w in seen],
        "listed": name in root.__all__ or name in before,
    }
print(json.dumps(out))
"""
    import json

    use = tmp_path / "use.py"
    use.write_text(script, "utf-8")
    proc = subprocess.run([sys.executable, str(use), json.dumps(MOVED_FROM_THE_ROOT)], capture_output=True,
                          text=True, check=True)
    out = json.loads(proc.stdout)
    for name, module in MOVED_FROM_THE_ROOT.items():
        got = out[name]
        assert got["same"] and not got["listed"], name
        assert got["warnings"] == [[
            "DeprecationWarning",
            f"langchain_ragspine.{name} is deprecated and goes in the next release: import it from {module} "
            f"(from {module} import {name})",
            True,
        ]], name  # JSON: lists


def test_an_unknown_root_name_is_an_attribute_error_naming_it():
    with pytest.raises(AttributeError, match="has no attribute 'BM25Retreiver'"):
        langchain_ragspine.BM25Retreiver  # noqa: B018


def test_every_public_name_resolves_and_classes_and_functions_are_documented():
    for name in PUBLIC_API:
        obj = getattr(langchain_ragspine, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), name
    assert langchain_ragspine.__dict__.keys() >= set(PUBLIC_API)


def test_lost_in_the_middle_reorder_is_exported_from_the_root():
    from langchain_ragspine.document_compressors.reorder import LostInTheMiddleReorder

    assert langchain_ragspine.LostInTheMiddleReorder is LostInTheMiddleReorder


def test_the_version_is_the_distributions():
    assert langchain_ragspine.__version__ == importlib.metadata.version("langchain-ragspine")


def test_without_metadata_the_version_comes_from_pyproject(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(_version, "version", missing)
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "langchain-ragspine"\nversion = "9.8.7"\n', "utf-8")
    assert _version.read_version(pyproject) == "9.8.7"
    pyproject.write_text('[project]\nname = "another-package"\nversion = "1.0"\n', "utf-8")
    assert _version.read_version(pyproject) == "0+unknown"
    pyproject.write_text("not [ toml", "utf-8")
    assert _version.read_version(pyproject) == "0+unknown"
    assert _version.read_version(tmp_path / "missing.toml") == "0+unknown"
    # the repository's own pyproject.toml, as in a source checkout
    assert _version.read_version() == _version.read_version(Path(_version.__file__).parents[1] / "pyproject.toml")
