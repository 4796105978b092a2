"""The pipeline: what composes loaders, splitters, backends and retrievers into ingest and retrieval.

Today it holds :mod:`~langchain_ragspine.pipeline.modes` (the retrieval-mode registry:
``from langchain_ragspine.pipeline.modes import RetrievalMode, register_mode``) and
:mod:`~langchain_ragspine.pipeline.plan` (the retrieval plan — base mode, query transformations, second stage — and
its one builder: ``from langchain_ragspine.pipeline.plan import RetrievalPlan, build_retriever``); this package
re-exports nothing yet (issue 26 adds the sources and ingest stages beside them).
"""

__all__: list[str] = []
