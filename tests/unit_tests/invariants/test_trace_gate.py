"""No callback payload or stream event carries a RESTRICTED document, whoever's retriever returned it.

Issue 25: when a wrapper, graph or ``search`` of the package ran a retriever from outside the package that returned
RESTRICTED documents, that inner run's ``on_retriever_end`` — and so ``astream_events`` and a LangSmith trace — carried
them, before any gate.  The contract now runs such a retriever untraced and reports the gated result in its place.

Every wrapper and every graph here runs over a foreign retriever (a plain ``BaseRetriever`` that also runs nested
runnables, and LangChain's ``VectorStoreRetriever``) that returns a RESTRICTED canary first.  A recording handler
keeps every payload of every event; ``astream_events(version="v2")`` and ``collect_runs`` are collected too; none may
contain the canary.  Each test also checks that the foreign retriever was called and that a run reporting its gated
result is traced, so none can pass by tracing nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import langsmith
import pytest
from langchain_core.callbacks import (
    AsyncCallbackManagerForRetrieverRun,
    BaseCallbackHandler,
    CallbackManagerForRetrieverRun,
)
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.config import ensure_config
from langchain_core.tracers.context import collect_runs, tracing_v2_enabled
from langchain_core.tracers.langchain import wait_for_all_tracers
from langchain_core.vectorstores import InMemoryVectorStore
from langsmith.run_helpers import tracing_context
from langsmith.utils import tracing_is_enabled
from pydantic import Field

from langchain_ragspine.backends.directory.chunk_store import ChunkStore
from langchain_ragspine.document_compressors import (
    LostInTheMiddleReorder,
    MMRCompressor,
    SecondStageRetriever,
    gated_compression_retriever,
)
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.graphs import (
    build_adaptive_rag,
    build_corrective_rag,
    build_self_rag,
    build_simple_rag,
)
from langchain_ragspine.pipeline.sources import search
from langchain_ragspine.retrievers import (
    BM25Retriever,
    FilterExtractionRetriever,
    GatedRetriever,
    HybridRetriever,
    MultiIndexRetriever,
    MultiQueryRetriever,
    ParentChildRetriever,
    invoke_retriever,
    traces_own_run,
)
from langchain_ragspine.retrievers.transforms import make_query_transform
from langchain_ragspine.text_splitters import ParentChildTextSplitter
from tests.unit_tests._transform_fakes import SpyChatModel

CANARY = "CANARYTRACE91"
QUESTION = "zebra finch seeds"
SECRET = Document(page_content=f"{QUESTION} {QUESTION} {CANARY}",  # the best match of QUESTION
                  metadata={"chunk_id": "secret#0", "doc_id": "secret", "sensitivity": "RESTRICTED", "year": 2023},
                  id="secret#0")
PUBLIC = [
    Document(page_content=f"The zebra finch eats seeds ({i}).", metadata={"chunk_id": f"birds#{i}", "doc_id": "birds",
             "sensitivity": "PUBLIC", "year": 2023}, id=f"birds#{i}")
    for i in range(4)
]


class Recorder(BaseCallbackHandler):
    """Keeps ``repr`` of every payload of every callback event (and the events' names)."""

    raise_error: bool = True

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []


def _recording(name: str) -> Callable[..., None]:
    def record(self: Recorder, *args: Any, **kwargs: Any) -> None:
        self.events.append((name, repr((args, kwargs))))
    return record


for _name in dir(BaseCallbackHandler):
    if _name.startswith("on_"):
        setattr(Recorder, _name, _recording(_name))


class ForeignRetriever(BaseRetriever):
    """Not this package's: returns ``docs`` (default the canary first, then the public chunks), after running a nested
    runnable as a child run and one with no config (the context's); records what each call could report to."""

    docs: list[Document] = Field(default_factory=lambda: [SECRET, *PUBLIC])
    calls: list[dict[str, Any]] = Field(default_factory=list)

    def _record(self, run_manager: Any) -> None:
        self.calls.append({
            "handlers": [*run_manager.handlers, *run_manager.inheritable_handlers],
            "context_callbacks": ensure_config().get("callbacks"),
            "tracing": tracing_is_enabled(),
        })

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        self._record(run_manager)
        echo = RunnableLambda(lambda q: f"{q} {CANARY}", name="echo")
        echo.invoke(query, {"callbacks": run_manager.get_child()})
        echo.invoke(query)
        return list(self.docs)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        self._record(run_manager)
        echo = RunnableLambda(lambda q: f"{q} {CANARY}", name="echo")
        await echo.ainvoke(query, {"callbacks": run_manager.get_child()})
        await echo.ainvoke(query)
        return list(self.docs)


def _vector_store_retriever() -> BaseRetriever:
    store = InMemoryVectorStore(HashingEmbeddings(64))
    store.add_documents([SECRET, *PUBLIC])
    return store.as_retriever(search_kwargs={"k": 5})


FOREIGN: dict[str, Callable[[], BaseRetriever]] = {"plain": ForeignRetriever, "vectorstore": _vector_store_retriever}


def _bm25() -> BM25Retriever:
    return BM25Retriever.from_documents([Document(page_content="zebra finch seeds in the aviary",
                                                  metadata={"chunk_id": "aviary#0", "doc_id": "aviary"})])


def _parent_child(foreign: BaseRetriever, tmp_path: Path) -> BaseRetriever:
    splitter = ParentChildTextSplitter(40, 0, parent_chunk_size=400)
    docs = [Document(page_content=f"zebra finch seeds {CANARY}. " * 4, metadata={"doc_id": "s", "sensitivity": "RESTRICTED"}),
            Document(page_content="The zebra finch eats seeds. " * 4, metadata={"doc_id": "p"})]
    store = ChunkStore(tmp_path / "chunks.sqlite")
    for d in docs:
        parents, children = splitter.split_with_parents([d])
        store.replace_doc_chunks(d.metadata["doc_id"], children, parents=parents)
    _, secret_children = splitter.split_with_parents(docs[:1])
    _, public_children = splitter.split_with_parents(docs[1:])
    if isinstance(foreign, ForeignRetriever):
        foreign = ForeignRetriever(docs=[*secret_children, *public_children])
    else:
        vectors = InMemoryVectorStore(HashingEmbeddings(64))
        vectors.add_documents([*secret_children, *public_children])
        foreign = vectors.as_retriever(search_kwargs={"k": 20})
    return ParentChildRetriever(foreign, store, fetch_k=10, k=2)


def _llm() -> SpyChatModel:
    return SpyChatModel(replies=["zebra finch seeds\nfinch diet"])


#: Every wrapper of the package over a foreign retriever: name -> builder(foreign, tmp_path).
WRAPPERS: dict[str, Callable[[BaseRetriever, Path], BaseRetriever]] = {
    "hybrid": lambda f, _: HybridRetriever(retrievers=[_bm25(), f], k=4),
    "multi_index": lambda f, _: MultiIndexRetriever({"foreign": f, "ours": _bm25()}, k=4),
    "parent_child": _parent_child,
    "filter_extraction": lambda f, _: FilterExtractionRetriever(f, k=3),
    "hyde": lambda f, _: make_query_transform("hyde", f, llm=_llm()),
    "multi_query": lambda f, _: make_query_transform("multi_query", f, llm=_llm()),
    "rag_fusion": lambda f, _: make_query_transform("rag_fusion", f, llm=_llm()),
    "step_back": lambda f, _: make_query_transform("step_back", f, llm=_llm()),
    "decompose": lambda f, _: make_query_transform("decompose", f, llm=_llm()),
    "glossary": lambda f, _: make_query_transform("glossary", f, glossary=[["finch", "songbird"]]),
    "deny_list": lambda f, _: MultiQueryRetriever(f, _llm(), deny_list=["vault"]),
    "second_stage": lambda f, _: SecondStageRetriever(
        base_retriever=f, compressors=[MMRCompressor(embeddings=HashingEmbeddings(64)), LostInTheMiddleReorder()], k=3),
    "compression_retriever": lambda f, _: gated_compression_retriever(f, [LostInTheMiddleReorder()]),
    "gated": lambda f, _: GatedRetriever(retriever=f),
}


def _assert_clean(payloads: list[str], foreign: BaseRetriever) -> None:
    """No payload holds the canary; a run reporting the foreign retriever's gated result was traced; the foreign
    retriever itself (when it records) was called with nothing to report to."""
    leaked = [p for p in payloads if CANARY in p]
    assert not leaked, f"RESTRICTED text in a callback payload / stream event: {leaked[0][:300]}"
    assert any("ragspine_reported" in p for p in payloads), "no reported run: the trace lost the foreign retriever"
    calls = getattr(foreign, "calls", None)
    if calls is not None:
        assert calls, "the foreign retriever was never called"
        assert all(not c["handlers"] and not c["context_callbacks"] and not c["tracing"] for c in calls), calls


def _foreign_of(retriever: BaseRetriever) -> BaseRetriever:
    """The foreign retriever inside a wrapper (the one that records its calls), found by walking its fields."""
    seen: list[Any] = [retriever]
    while seen:
        obj = seen.pop()
        if isinstance(obj, ForeignRetriever):
            return obj
        if isinstance(obj, BaseRetriever):
            seen.extend(getattr(obj, name, None) for name in type(obj).model_fields)
        elif isinstance(obj, (list, tuple)):
            seen.extend(obj)
        elif isinstance(obj, dict):
            seen.extend(obj.values())
    return retriever


@pytest.mark.parametrize("foreign_kind", FOREIGN)
@pytest.mark.parametrize("wrapper", WRAPPERS)
def test_no_wrapper_traces_a_restricted_document(wrapper: str, foreign_kind: str, tmp_path: Path) -> None:
    retriever = WRAPPERS[wrapper](FOREIGN[foreign_kind](), tmp_path)
    foreign = _foreign_of(retriever)
    recorder = Recorder()
    with collect_runs() as collected:
        docs = retriever.invoke(QUESTION, {"callbacks": [recorder]})
    assert all(CANARY not in d.page_content for d in docs)
    runs = [repr(run.model_dump()) for run in collected.traced_runs]
    _assert_clean([p for _, p in recorder.events] + runs, foreign)

    recorder = Recorder()
    asyncio.run(retriever.ainvoke(QUESTION, {"callbacks": [recorder]}))
    _assert_clean([p for _, p in recorder.events], foreign)

    async def events() -> list[str]:
        return [repr(e) async for e in retriever.astream_events(QUESTION, version="v2")]

    _assert_clean(asyncio.run(events()), foreign)


GRAPHS = {"corrective": build_corrective_rag, "adaptive": build_adaptive_rag, "self_rag": build_self_rag,
          "simple": build_simple_rag}


@pytest.mark.parametrize("compressors", [None, [LostInTheMiddleReorder()]], ids=["plain", "compressors"])
@pytest.mark.parametrize("base", ["foreign", "vectorstore", "hybrid"])
@pytest.mark.parametrize("graph", GRAPHS)
def test_no_graph_traces_or_streams_a_restricted_document(graph: str, base: str, compressors: Any) -> None:
    foreign = ForeignRetriever() if base != "vectorstore" else _vector_store_retriever()
    retriever = HybridRetriever(retrievers=[_bm25(), foreign], k=4) if base == "hybrid" else foreign
    app = GRAPHS[graph](retriever, compressors=compressors)
    recorder = Recorder()
    out = app.invoke({"question": QUESTION}, {"callbacks": [recorder]})
    assert CANARY not in repr(out)
    _assert_clean([p for _, p in recorder.events], foreign)

    async def events() -> list[str]:
        return [repr(e) async for e in app.astream_events({"question": QUESTION}, version="v2")]

    _assert_clean(asyncio.run(events()), foreign)


def test_search_inside_a_traced_runnable_does_not_trace_the_foreign_run() -> None:
    # indexing.search takes no config: the caller's callbacks reach the foreign retriever through the context
    foreign = ForeignRetriever()
    recorder = Recorder()
    RunnableLambda(lambda q: search(foreign, q, k=3)).invoke(QUESTION, {"callbacks": [recorder]})
    _assert_clean([p for _, p in recorder.events], foreign)


def test_the_reported_run_stands_in_for_the_foreign_one() -> None:
    foreign = ForeignRetriever(tags=["mine"], metadata={"owner": "me"})
    recorder = Recorder()
    docs = invoke_retriever(foreign, QUESTION, k=2, filter={"year": 2023},
                            config={"callbacks": [recorder], "run_name": "my-store", "tags": ["outer"]})
    assert [d.id for d in docs] == ["birds#0", "birds#1"]
    names = [name for name, _ in recorder.events]
    assert names == ["on_retriever_start", "on_retriever_end"]  # the nested runs of the foreign retriever: none
    start, end = (payload for _, payload in recorder.events)
    assert "'name': 'my-store'" in start and "'ragspine_reported': True" in start and "'owner': 'me'" in start
    assert "'mine'" in start and "'outer'" in start
    assert end.count("Document(") == 2 and CANARY not in end  # the call's result: gated, filtered, cut to k


def test_an_error_of_the_foreign_retriever_is_reported() -> None:
    class Failing(BaseRetriever):
        def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
            raise ConnectionError("store down")

    recorder = Recorder()
    with pytest.raises(ConnectionError):
        invoke_retriever(Failing(), QUESTION, config={"callbacks": [recorder]})
    assert [name for name, _ in recorder.events] == ["on_retriever_start", "on_retriever_error"]


def test_our_retrievers_trace_their_own_gated_run_also_after_a_late_label() -> None:
    docs = [Document(page_content=f"zebra finch seeds {CANARY}", metadata={"chunk_id": "late#0"}), *PUBLIC]
    bm25 = BM25Retriever.from_documents(docs, k=3)
    docs[0].metadata["sensitivity"] = "RESTRICTED"  # labelled after the index was built
    assert traces_own_run(bm25) and traces_own_run(HybridRetriever(retrievers=[bm25]))
    for retriever in (bm25, HybridRetriever(retrievers=[bm25], k=3), GatedRetriever(retriever=bm25)):
        recorder = Recorder()
        retriever.invoke(QUESTION, {"callbacks": [recorder]})
        asyncio.run(retriever.ainvoke(QUESTION, {"callbacks": [recorder]}))
        payloads = [p for _, p in recorder.events]
        assert payloads and not [p for p in payloads if CANARY in p]
        assert not [p for p in payloads if "ragspine_reported" in p]  # our own runs are traced as they are


def test_a_subclass_outside_the_package_is_foreign() -> None:
    class Leaky(BM25Retriever):
        def _get_relevant_documents(self, query: str, *, run_manager: Any, **kwargs: Any) -> list[Document]:
            return [SECRET, *super()._get_relevant_documents(query, run_manager=run_manager, **kwargs)]

    leaky = Leaky.from_documents(PUBLIC)
    assert not traces_own_run(leaky)
    recorder = Recorder()
    assert [d.id for d in invoke_retriever(leaky, QUESTION, k=2, config={"callbacks": [recorder]})] != ["secret#0"]
    assert not [p for _, p in recorder.events if CANARY in p]


def test_the_recorder_would_see_the_canary_of_a_direct_foreign_run() -> None:
    # the check can fail: a foreign retriever invoked directly (not through the package) traces its RESTRICTED answer
    recorder = Recorder()
    ForeignRetriever().invoke(QUESTION, {"callbacks": [recorder]})
    assert any(CANARY in p for _, p in recorder.events)


class LangSmithSpy(langsmith.Client):
    """A LangSmith client that posts nothing: it keeps ``repr`` of every run it is sent."""

    def __init__(self) -> None:
        super().__init__(api_key="test", api_url="http://127.0.0.1:9", auto_batch_tracing=False)
        self.posted: list[str] = []

    def create_run(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        self.posted.append(repr((args, kwargs)))

    def update_run(self, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        self.posted.append(repr((args, kwargs)))


@pytest.mark.parametrize("how", ["tracing_context", "tracing_v2_enabled"])
def test_a_langsmith_trace_shows_no_restricted_document(how: str) -> None:
    client = LangSmithSpy()
    foreign = ForeignRetriever()
    hybrid = HybridRetriever(retrievers=[_bm25(), foreign], k=4)
    tracing = (tracing_context(enabled=True, client=client, project_name="ragspine-test") if how == "tracing_context"
               else tracing_v2_enabled(project_name="ragspine-test", client=client))
    with tracing:
        hybrid.invoke(QUESTION)
        build_corrective_rag(foreign).invoke({"question": QUESTION})
    wait_for_all_tracers()
    assert client.posted
    _assert_clean(client.posted, foreign)


def test_gated_retriever_asks_through_the_contract() -> None:
    foreign = ForeignRetriever()
    assert [d.id for d in GatedRetriever(retriever=foreign).invoke(QUESTION)] == [d.id for d in PUBLIC]
    assert [d.id for d in GatedRetriever(retriever=foreign, k=2).invoke(QUESTION)] == ["birds#0", "birds#1"]
    assert [d.id for d in asyncio.run(GatedRetriever(retriever=foreign).ainvoke(QUESTION, k=1))] == ["birds#0"]
    assert GatedRetriever(retriever=foreign).invoke(QUESTION, filter={"year": 2024}) == []  # filtered, fail closed
    with pytest.raises(TypeError, match="BaseRetriever"):
        GatedRetriever(retriever="bm25")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="k"):
        GatedRetriever(retriever=foreign, k=0)
