"""Document loaders (LangChain ``BaseLoader``s): Markdown, text and JSONL corpora with sidecar metadata."""

from langchain_ragspine.document_loaders.corpus import CorpusLoader, LoaderWarning, LoadStats

__all__ = ["CorpusLoader", "LoadStats", "LoaderWarning"]
