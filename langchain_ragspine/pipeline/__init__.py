"""The pipeline: what composes loaders, splitters, backends and retrievers into ingest and retrieval.

Today it holds :mod:`~langchain_ragspine.pipeline.modes` (the retrieval-mode registry:
``from langchain_ragspine.pipeline.modes import RetrievalMode, register_mode``); this package re-exports nothing
yet (issue 26 adds the sources, ingest stages and the retrieval plan beside it).
"""

__all__: list[str] = []
