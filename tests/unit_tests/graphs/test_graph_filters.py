"""Graph filters never widen unless the caller asks by name (issue 25): ``build_corrective_rag`` and
``build_adaptive_rag`` used to default to ``relax_filters=True``, so ``{"question": q, "filters": {"tenant": "C"}}``
came back with tenant A and B documents, ``filters_dropped: True``, and — in chat mode — an ``AIMessage`` that
said nothing.  Now every graph keeps the filters by default (a rewrite, then a refusal, as ``ragspine ask`` does);
``relax_filters=True`` widens and reports it in the result, the trace and on the ``AIMessage``; a run may turn it
off, never on.  Sync, async and streamed runs, every route of the adaptive graph."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage

from langchain_ragspine.graphs import (
    GRAPH_BUILDERS,
    Graders,
    build_adaptive_rag,
    build_corrective_rag,
)
from langchain_ragspine.graphs.nodes import FILTERS_DROPPED_NOTE
from langchain_ragspine.retrievers import BM25Retriever
from tests.unit_tests.graphs.test_graphs import ScriptedChatModel


def _doc(i: int, text: str, tenant: str) -> Document:
    return Document(
        page_content=text,
        metadata={"chunk_id": f"t{i}#0", "doc_id": f"t{i}", "title": f"T{i}", "source_locator": f"t{i}.md#0-1",
                  "tenant": tenant},
    )


DOCS = [
    _doc(1, "The falcon migration starts in March. It moves the billing servers.", "A"),
    _doc(2, "The falcon migration starts in May. It moves the mail servers.", "B"),
    _doc(3, "Tenant A keeps its invoices for seven years.", "A"),
]
QUESTION = "Which servers does the falcon migration move?"
TENANT_C = {"tenant": "C"}
#: the graphs with the drop-filters correction
RELAXING = {"corrective": build_corrective_rag, "adaptive": build_adaptive_rag}


@pytest.fixture(scope="module")
def retriever() -> BM25Retriever:
    return BM25Retriever.from_documents(DOCS, k=4)


def _streamed_documents(graph: Any, inputs: dict[str, Any], **kw: Any) -> tuple[list[Document], dict[str, Any]]:
    """Every document any node wrote while streaming (``updates``), and the final state (``values``)."""
    seen: list[Document] = []
    final: dict[str, Any] = {}
    for mode, chunk in graph.stream(inputs, stream_mode=["updates", "values"], **kw):
        if mode == "values":
            final = chunk
            continue
        for update in chunk.values():
            docs = (update or {}).get("documents")
            seen.extend(docs.get("replace", []) if isinstance(docs, dict) else docs or [])
    return seen, final


def _assert_kept(final: dict[str, Any]) -> None:
    """The filters held: a refusal, no document of tenant A or B, nothing dropped."""
    assert final["refused"] is True and "insufficient context" in final["answer"].lower()
    assert final["documents"] == [] and final["citations"] == []
    assert "drop_filters" not in [t["step"] for t in final["trace"]]
    assert not final.get("filters_dropped") and final.get("dropped_filters") is None


# -- the default: filters are kept ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(GRAPH_BUILDERS))
def test_regression_a_filter_matching_nothing_is_refused_never_widened(retriever, name):
    graph = GRAPH_BUILDERS[name](retriever)
    inputs = {"question": QUESTION, "filters": TENANT_C}
    _assert_kept(graph.invoke(inputs))
    seen, final = _streamed_documents(graph, inputs)
    assert seen == [] and final["refused"] is True  # no tenant A / B document in any streamed update
    # the same question unfiltered is answered from tenant A / B documents: the refusal is the filter's doing
    assert graph.invoke({"question": QUESTION})["citations"]


@pytest.mark.parametrize("name", list(GRAPH_BUILDERS))
async def test_regression_the_async_and_chat_paths_keep_the_filters_too(retriever, name):
    graph = GRAPH_BUILDERS[name](retriever)
    _assert_kept(await graph.ainvoke({"question": QUESTION, "filters": TENANT_C}))
    out = await graph.ainvoke({"messages": [HumanMessage(QUESTION)], "filters": TENANT_C})
    _assert_kept(out)
    message = out["messages"][-1]
    assert isinstance(message, AIMessage) and message.content == out["answer"]
    assert "filters_dropped" not in message.response_metadata
    async for mode, chunk in graph.astream({"question": QUESTION, "filters": TENANT_C},
                                           stream_mode=["updates", "values"]):
        if mode == "updates":
            for update in chunk.values():
                assert not (update or {}).get("filters_dropped")


def test_regression_adaptive_routes_keep_the_filters(retriever):
    """The decomposition route (sub-questions in parallel branches, then the fallback to the single path) searches
    with the run's filters too, and the fallback never drops them."""

    def script(kind: str, human: str, n: int) -> str:
        return {"classify": "decompose", "decompose": "falcon migration servers?\nfalcon migration move?"}.get(
            kind, "no"
        )

    for relax in (False, True):
        graph = build_adaptive_rag(retriever, ScriptedChatModel(script=script), relax_filters=relax)
        seen, final = _streamed_documents(graph, {"question": QUESTION, "filters": TENANT_C})
        steps = [t["step"] for t in final["trace"]]
        assert final["route"] == "decompose" and "answer_sub_question" in steps
        assert seen == [] and final["refused"] is True and "drop_filters" not in steps


# -- the opt-in: relax_filters=True, reported -----------------------------------------------------------------------
@pytest.mark.parametrize("name", list(RELAXING))
def test_relaxing_is_asked_for_by_name_and_reported(retriever, name):
    graph = RELAXING[name](retriever, relax_filters=True)
    final = graph.invoke({"question": QUESTION, "filters": TENANT_C})
    assert final["filters_dropped"] is True and final["dropped_filters"] == TENANT_C
    assert not final["refused"] and {d.metadata["tenant"] for d in final["documents"]} <= {"A", "B"}
    [entry] = [t for t in final["trace"] if t["step"] == "drop_filters"]
    assert entry["filters"] == TENANT_C
    # the schema names both keys, so a served graph returns them
    assert {"filters_dropped", "dropped_filters"} <= set(graph.get_output_jsonschema()["properties"])


@pytest.mark.parametrize("name", list(RELAXING))
async def test_relaxing_is_reported_on_the_chat_reply(retriever, name):
    graph = RELAXING[name](retriever, relax_filters=True)
    inputs = {"messages": [HumanMessage(QUESTION)], "filters": TENANT_C}
    for out in (graph.invoke(inputs), await graph.ainvoke(inputs)):
        message = out["messages"][-1]
        assert isinstance(message, AIMessage)
        report = {k: message.response_metadata[k] for k in ("filters_dropped", "dropped_filters")}
        assert report == {"filters_dropped": True, "dropped_filters": TENANT_C}
        assert message.response_metadata["citations"] == out["citations"]  # the reply carries its citations too
        assert message.content == f"{out['answer']}\n{FILTERS_DROPPED_NOTE['en']}"
        assert out["filters_dropped"] is True and out["dropped_filters"] == TENANT_C
    # a refusal after the drop says so too
    refusing = RELAXING[name](retriever, relax_filters=True, graders=Graders.constant("no"))
    out = refusing.invoke(inputs)
    assert out["refused"] is True and out["messages"][-1].response_metadata["filters_dropped"] is True
    # a run that needed no drop carries no note
    out = graph.invoke({"messages": [HumanMessage(QUESTION)], "filters": {"tenant": "A"}})
    assert out["messages"][-1].content == out["answer"]
    assert not {"filters_dropped", "dropped_filters"} & set(out["messages"][-1].response_metadata)


def test_a_japanese_question_gets_the_note_in_japanese(retriever):
    graph = build_corrective_rag(retriever, relax_filters=True, graders=Graders.constant("no"))
    out = graph.invoke({"messages": [HumanMessage("ファルコンの移行はいつ始まりますか？")], "filters": TENANT_C})
    assert out["messages"][-1].content.endswith(FILTERS_DROPPED_NOTE["ja"])


# -- per run: off, never on -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(RELAXING))
def test_a_run_may_turn_relaxing_off_never_on(retriever, name):
    relaxing = RELAXING[name](retriever, relax_filters=True)
    inputs = {"question": QUESTION, "filters": TENANT_C}
    _assert_kept(relaxing.invoke(inputs, context={"relax_filters": False}))
    _assert_kept(relaxing.invoke(inputs, {"configurable": {"relax_filters": False}}))
    assert relaxing.invoke(inputs, context={"relax_filters": True})["filters_dropped"] is True
    with pytest.raises(TypeError, match="relax_filters must be True or False"):
        relaxing.invoke(inputs, context={"relax_filters": "false"})  # a truthy string must not widen


@pytest.mark.parametrize("name", list(GRAPH_BUILDERS))
def test_a_run_cannot_widen_a_graph_built_to_keep_its_filters(retriever, name):
    graph = GRAPH_BUILDERS[name](retriever)
    inputs = {"question": QUESTION, "filters": TENANT_C}
    for config in ({"context": {"relax_filters": True}}, {"config": {"configurable": {"relax_filters": True}}}):
        with pytest.raises(ValueError, match="a run cannot widen a filter"):
            graph.invoke(inputs, **config)
    _assert_kept(graph.invoke(inputs, context={"relax_filters": False}))


@pytest.mark.parametrize("name", list(RELAXING))
def test_relax_filters_must_be_a_bool(retriever, name):
    with pytest.raises(TypeError, match="relax_filters must be True or False"):
        RELAXING[name](retriever, relax_filters="no")
