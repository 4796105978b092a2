"""make_answer_tool: a graph as a compact agent tool (content = the answer with its numbered sources, artifact =
the cited documents, RESTRICTED-free), driven by langchain's ``create_agent`` with a fake tool-calling model."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool
from langgraph.checkpoint.memory import InMemorySaver

from langchain_ragspine.graphs import build_adaptive_rag, build_corrective_rag, make_answer_tool
from langchain_ragspine.graphs.tools import format_sources
from langchain_ragspine.retrievers import BM25Retriever
from tests.unit_tests.chat_docs import SECRET, chunk

DOCS = [
    chunk("rainy", "Regions without a rainy season", "Hokkaido has no rainy season. The rainy front weakens before it "
         "reaches Hokkaido.", tenant="A"),
    chunk("fuji", "Mount Fuji", "Mount Fuji is the highest mountain in Japan.", tenant="B"),
    chunk("secret", "memo", f"{SECRET} Hokkaido rainy season Fuji mountain {SECRET}", sensitivity="RESTRICTED"),
]


@pytest.fixture(scope="module")
def retriever() -> BM25Retriever:
    return BM25Retriever.from_documents(DOCS, k=3)


class ToolCallingFake(GenericFakeChatModel):
    """GenericFakeChatModel that accepts ``bind_tools`` (as create_agent calls it) and records what it was sent."""

    seen: list[list[Any]] = []

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[no-untyped-def]
        self.seen.append(list(messages))
        return super()._generate(messages, stop, run_manager, **kwargs)


def _agent_model(question: str, final: str = "Hokkaido [1].") -> ToolCallingFake:
    call = {"name": "search_documents", "args": {"question": question}, "id": "call_1", "type": "tool_call"}
    return ToolCallingFake(messages=iter([AIMessage("", tool_calls=[call]), AIMessage(final)]), seen=[])


def test_an_agent_calls_the_graph_tool_and_gets_the_compact_answer(retriever):
    graph = build_corrective_rag(retriever)
    tool = make_answer_tool(graph)
    assert isinstance(tool, BaseTool) and tool.name == "search_documents" and tool.response_format == "content_and_artifact"
    assert set(tool.args) == {"question"}
    model = _agent_model("Which region has no rainy season?")
    agent = create_agent(model, [tool])
    out = agent.invoke({"messages": [HumanMessage("Where is there no rainy season?")]})
    [message] = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    direct = graph.invoke({"question": "Which region has no rainy season?"})
    assert message.content == (
        f"{direct['answer']}\n\nSources:\n[1] Regions without a rainy season — rainy.md#0-{len(DOCS[0].page_content)} "
        "(chunk rainy#0)"
    )
    assert [d.metadata["chunk_id"] for d in message.artifact] == ["rainy#0"]
    assert SECRET not in repr(out["messages"])
    # the model that reads the tool result gets the compact content, not the output dict
    tool_seen = [m for m in model.seen[-1] if isinstance(m, ToolMessage)]
    assert tool_seen[0].content == message.content and "trace" not in message.content
    assert len(message.content) < len(str(direct)) / 3
    assert out["messages"][-1].content == "Hokkaido [1]."


def test_a_refusal_has_no_sources_and_no_artifact(retriever):
    tool = make_answer_tool(build_corrective_rag(retriever))
    message = tool.invoke({"type": "tool_call", "name": "search_documents", "id": "x",
                           "args": {"question": "What is the capital of Peru?"}})
    assert "insufficient context" in message.content.lower() and "Sources:" not in message.content
    assert message.artifact == []


async def test_the_tool_runs_asynchronously_and_with_scoping_filters(retriever):
    tool = make_answer_tool(build_corrective_rag(retriever), name="search_b", description="Tenant B only.",
                            filters={"tenant": "B"})
    call = {"type": "tool_call", "name": "search_b", "id": "y", "args": {"question": "Which region has no rainy season?"}}
    message = await tool.ainvoke(call)
    assert message.artifact == [] and "Sources:" not in message.content  # tenant A's page is out of scope
    call["args"] = {"question": "Which is the highest mountain in Japan?"}
    message = await tool.ainvoke(call)
    assert [d.metadata["doc_id"] for d in message.artifact] == ["fuji"]


def test_a_merged_answer_lists_every_cited_source(retriever):
    tool = make_answer_tool(build_adaptive_rag(retriever))
    message = tool.invoke({"type": "tool_call", "name": "search_documents", "id": "z", "args": {
        "question": "Which region has no rainy season? Which is the highest mountain in Japan?"}})
    assert "[1] Regions without a rainy season" in message.content and "[2] Mount Fuji" in message.content
    assert [d.metadata["doc_id"] for d in message.artifact] == ["rainy", "fuji"]


def test_an_agent_with_a_checkpointer_calls_the_tool_on_every_turn(retriever):
    tool = make_answer_tool(build_corrective_rag(retriever))
    calls = [{"name": "search_documents", "args": {"question": q}, "id": f"c{i}", "type": "tool_call"}
             for i, q in enumerate(["Which region has no rainy season?", "Which is the highest mountain in Japan?"])]
    model = ToolCallingFake(messages=iter([AIMessage("", tool_calls=[calls[0]]), AIMessage("one"),
                                           AIMessage("", tool_calls=[calls[1]]), AIMessage("two")]), seen=[])
    agent = create_agent(model, [tool], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    agent.invoke({"messages": [HumanMessage("first")]}, config)
    out = agent.invoke({"messages": [HumanMessage("second")]}, config)
    artifacts = [m.artifact for m in out["messages"] if isinstance(m, ToolMessage)]

    def doc_id(d: Any) -> str:  # a checkpointed ToolMessage's artifact comes back as plain data
        return d.metadata["doc_id"] if isinstance(d, Document) else d["metadata"]["doc_id"]

    assert [[doc_id(d) for d in a] for a in artifacts] == [["rainy"], ["fuji"]]
    assert SECRET not in repr(out["messages"])


def test_bad_arguments_are_refused(retriever):
    with pytest.raises(TypeError, match="Runnable"):
        make_answer_tool(retriever.invoke)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        make_answer_tool(build_corrective_rag(retriever), filters={"tenant": {"$bogus": 1}})
    assert format_sources([{"n": 2, "doc_id": "d", "title": None}]) == "[2] d"


@pytest.mark.parametrize("question", ["", "   ", "\n\t", None])
def test_an_empty_question_from_the_model_comes_back_to_it_as_a_tool_error(retriever, question):
    """Regression (trial 27 F1): a question "" or "   " raised the graph's ValueError out of the whole agent run;
    it is a validation error of the tool's input, returned to the model as an error ToolMessage naming ``question``
    (as a missing or ``None`` question always was), and the model goes on."""
    model = _agent_model(question, final="done")  # type: ignore[arg-type]
    agent = create_agent(model, [make_answer_tool(build_corrective_rag(retriever))])
    out = agent.invoke({"messages": [HumanMessage("Where is there no rainy season?")]})
    [message] = [m for m in out["messages"] if isinstance(m, ToolMessage)]
    assert message.status == "error" and "question" in message.content
    assert out["messages"][-1].content == "done"
    assert [m for m in model.seen[-1] if isinstance(m, ToolMessage)][0].content == message.content


def test_a_retriever_in_place_of_the_graph_is_refused_when_the_tool_is_made(retriever):
    # issue 27 trial 2, F2: accepted, then every call failed with "BM25Retriever.invoke ... got a dict"
    with pytest.raises(TypeError, match="graph must be an answering graph .*got the retriever BM25Retriever"):
        make_answer_tool(retriever)


@pytest.mark.parametrize("name, error", [("", ValueError), ("   ", ValueError), ("search docs", ValueError),
                                         ("x" * 65, ValueError), (None, TypeError), (3, TypeError)])
def test_a_tool_name_chat_models_refuse_is_refused_naming_it(retriever, name, error):
    # issue 27 trial 2, F3: "" and None silently became "answer" (not the documented "search_documents")
    with pytest.raises(error, match="name must"):
        make_answer_tool(build_corrective_rag(retriever), name=name)
    assert make_answer_tool(build_corrective_rag(retriever), name="search-docs_2").name == "search-docs_2"
