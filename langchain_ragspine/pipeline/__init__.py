"""The pipeline: what composes loaders, splitters, backends and retrievers into ingest and retrieval.

Modules: :mod:`~langchain_ragspine.pipeline.modes` (the retrieval-mode registry:
``from langchain_ragspine.pipeline.modes import RetrievalMode, register_mode``),
:mod:`~langchain_ragspine.pipeline.stages` (the ingest stages: load → split → write versions → lexical index →
embed), :mod:`~langchain_ragspine.pipeline.ingest` (``ingest``, which runs them on a store) and
:mod:`~langchain_ragspine.pipeline.sources` (``open_retriever``, ``StoreSource``, ``open_source``, ``search``), and
:mod:`~langchain_ragspine.pipeline.plan` (the retrieval plan — base mode, query transformations, second stage — and
its one builder: ``from langchain_ragspine.pipeline.plan import RetrievalPlan, build_retriever``).  This package
re-exports nothing.
"""

__all__: list[str] = []
