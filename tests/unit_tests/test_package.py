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
    "IngestSummary",
    "LLMListwiseReranker",
    "LayoutTextSplitter",
    "LoaderError",
    "LostInTheMiddleReorder",
    "MMRCompressor",
    "MultiIndexRetriever",
    "MultiQueryRetriever",
    "ParagraphTextSplitter",
    "ParentChildRetriever",
    "ParentChildTextSplitter",
    "QueryDenyList",
    "RAGFusionRetriever",
    "RESTRICTED_SENSITIVITY",
    "RagSpineError",
    "RagSpineSettings",
    "RagSpineVectorStore",
    "RestrictedGate",
    "RetrievalMode",
    "SemanticTextSplitter",
    "SentenceWindowTextSplitter",
    "StepBackRetriever",
    "StoreError",
    "StoredChunk",
    "compile_filter",
    "get_settings",
    "get_tokenizer",
    "ingest",
    "is_restricted",
    "make_answer_chain",
    "make_chat_model",
    "make_embeddings",
    "make_query_transform",
    "matches",
    "open_retriever",
    "register_mode",
    "search",
]


def test_the_public_api_is_exactly_the_pinned_list():
    assert langchain_ragspine.__all__ == PUBLIC_API
    assert PUBLIC_API == sorted(PUBLIC_API)


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
