"""Document loaders (LangChain ``BaseLoader``s): Markdown, text and JSONL corpora with sidecar metadata."""

from langchain_ragspine.document_loaders.corpus import CorpusLoader, LoaderWarning, LoadStats
from langchain_ragspine.document_loaders.locators import (
    RestrictedSourceError,
    SourceLocator,
    parse_source_locator,
    read_source_text,
    resolve_source_locator,
    source_locator_for,
)

__all__ = [
    "CorpusLoader",
    "LoadStats",
    "LoaderWarning",
    "RestrictedSourceError",
    "SourceLocator",
    "parse_source_locator",
    "read_source_text",
    "resolve_source_locator",
    "source_locator_for",
]
