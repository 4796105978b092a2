"""Streaming: progress events on LangGraph's ``stream_mode="custom"`` (never a passage's text), and the answer
chain's ``stream()`` yielding the model's tokens before the result ``invoke`` returns."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableLambda
from langgraph.checkpoint.memory import InMemorySaver

from langchain_ragspine.chains import make_answer_chain
from langchain_ragspine.graphs import (
    GRAPH_BUILDERS,
    Graders,
    build_adaptive_rag,
    build_corrective_rag,
    build_self_rag,
)
from langchain_ragspine.graphs.nodes import progress, retrieve
from langchain_ragspine.retrievers import BM25Retriever
from tests.unit_tests.chat_docs import SECRET, chunk

DOCS = [
    chunk("rainy", "Regions without a rainy season", "Hokkaido has no rainy season. The rainy front weakens before it "
         "reaches Hokkaido."),
    chunk("fuji", "Mount Fuji", "Mount Fuji is the highest mountain in Japan."),
    chunk("eiffel", "Eiffel Tower", "The Eiffel Tower is in Paris."),
    chunk("secret", "memo", f"{SECRET} Hokkaido rainy season {SECRET}", sensitivity="RESTRICTED"),
]
PASSAGE_TEXTS = [d.page_content for d in DOCS]


@pytest.fixture(scope="module")
def retriever() -> BM25Retriever:
    return BM25Retriever.from_documents(DOCS, k=3)


def _custom(graph: Any, inputs: dict[str, Any], config: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return list(graph.stream(inputs, config, stream_mode="custom"))


def _assert_textless(events: list[dict[str, Any]]) -> None:
    blob = repr(events)
    assert SECRET not in blob
    for text in PASSAGE_TEXTS:
        for sentence in text.split(". "):
            assert sentence.strip(". ") not in blob


def test_the_corrective_graph_reports_its_progress(retriever):
    events = _custom(build_corrective_rag(retriever), {"question": "Which region has no rainy season?"})
    assert [e["event"] for e in events] == ["retrieved", "graded", "answering", "answered"]
    assert events[0] == {"event": "retrieved", "count": 1, "query": "Which region has no rainy season?"}
    assert events[1] == {"event": "graded", "graded": 1, "relevant": 1}
    assert events[2] == {"event": "answering", "passages": 1}
    assert events[3] == {"event": "answered", "cited": [1], "mode": "extractive"}
    _assert_textless(events)


async def test_progress_events_stream_asynchronously_too(retriever):
    graph = build_corrective_rag(retriever)
    inputs = {"question": "Which region has no rainy season?"}
    events = [e async for e in graph.astream(inputs, stream_mode="custom")]
    assert events == _custom(graph, inputs)


def test_corrections_and_a_refusal_are_reported(retriever):
    graph = build_corrective_rag(retriever, graders=Graders.constant("no"), max_retries=1)
    events = _custom(graph, {"question": "Which region has no rainy season?"})
    assert [e["event"] for e in events] == ["retrieved", "graded", "rewriting", "retrieved", "graded", "refused"]
    assert events[2] == {"event": "rewriting", "attempt": 1, "query": "region rainy season"}
    assert events[-1] == {"event": "refused", "reason": "no_relevant_documents"}


def test_a_follow_up_reports_its_standalone_question(retriever):
    graph = build_corrective_rag(retriever, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke({"messages": [HumanMessage("Which region has no rainy season?")]}, config)
    events = _custom(graph, {"messages": [HumanMessage("Why is that?")]}, config)
    assert events[0] == {"event": "condensed", "query": "Why is that? region rainy season", "how": "borrowed"}
    assert events[1]["event"] == "retrieved" and events[1]["query"] == "Why is that? region rainy season"


def test_adaptive_and_self_rag_report_their_own_steps(retriever):
    events = _custom(build_adaptive_rag(retriever),
                     {"question": "Which is the highest mountain in Japan? Where is the Eiffel Tower?"})
    assert events[0] == {"event": "routed", "route": "decompose"}
    assert sorted(e["index"] for e in events if e["event"] == "retrieved") == [0, 1]
    assert events[-1]["event"] == "answered" and events[-1]["mode"] == "merged"
    events = _custom(build_self_rag(retriever), {"question": "Which region has no rainy season?"})
    checks = [(e["check"], e["verdict"]) for e in events if e["event"] == "checked"]
    assert checks == [("support", "yes"), ("usefulness", "yes")]
    _assert_textless(events)


@pytest.mark.parametrize("name", list(GRAPH_BUILDERS))
def test_custom_events_come_with_the_other_stream_modes_and_hold_no_passage(retriever, name):
    seen: dict[str, list[Any]] = {"custom": [], "updates": []}
    for mode, item in GRAPH_BUILDERS[name](retriever).stream(
        {"messages": [HumanMessage("Which region has no rainy season?")]}, stream_mode=["custom", "updates"]
    ):
        seen[mode].append(item)
    assert {"retrieved", "graded", "answering", "answered"} <= {e["event"] for e in seen["custom"]}
    _assert_textless(seen["custom"])


def test_progress_outside_a_graph_is_a_no_op(retriever):
    progress("retrieved", count=1)  # no run context: nothing to write to, no error
    RunnableLambda(lambda _: progress("retrieved", count=1)).invoke(None)  # a runnable, but not a graph
    from langchain_ragspine.graphs.nodes import make_parts

    parts = make_parts(retriever, None, max_retries=0, graders=None, answer_chain=None, k=None, max_docs=6,
                       lost_in_the_middle=False, tokenizer="auto", prompts=None, compressors=None)
    assert retrieve({"search_query": "Hokkaido"}, parts=parts)["trace"][0]["retrieved"] == 1


# -- the answer chain -----------------------------------------------------------------------------------------------
def _fake(text: str) -> GenericFakeChatModel:
    return GenericFakeChatModel(messages=iter([AIMessage(text)]))


INPUTS = {"question": "Which region has no rainy season?", "documents": DOCS[:2]}


@pytest.mark.parametrize(
    "reply",
    [
        "Hokkaido has no rainy season [1].",
        "<think>passage 1 says it</think>Hokkaido has no rainy season [1-1].",
        "Hokkaido has no rainy season.",  # no marker: attributed in the result, not in the tokens
        "I don't know",
    ],
)
def test_the_answer_chain_streams_tokens_then_the_invoke_result(reply):
    expected = make_answer_chain(_fake(reply)).invoke(INPUTS)
    chunks = list(make_answer_chain(_fake(reply)).stream(INPUTS))
    tokens, result = chunks[:-1], chunks[-1]
    assert result == expected
    assert len(tokens) > 1 and all(set(t) == {"token"} for t in tokens)
    streamed = "".join(t["token"] for t in tokens)
    assert "think" not in streamed and "passage 1 says" not in streamed
    assert streamed == reply.split("</think>")[-1]


async def test_the_answer_chain_streams_asynchronously():
    reply = "Hokkaido has no rainy season [1]."
    expected = await make_answer_chain(_fake(reply)).ainvoke(INPUTS)
    chunks = [c async for c in make_answer_chain(_fake(reply)).astream(INPUTS)]
    assert chunks[-1] == expected and "".join(c["token"] for c in chunks[:-1]) == reply


def test_a_model_failing_mid_stream_gives_the_extractive_fallback():
    class Failing(GenericFakeChatModel):
        def _stream(self, *args: Any, **kwargs: Any) -> Any:
            yield from list(super()._stream(*args, **kwargs))[:2]
            raise ConnectionError("dropped")

    chunks = list(make_answer_chain(Failing(messages=iter([AIMessage("Hokkaido has no rainy season [1].")]))).stream(
        INPUTS
    ))
    assert chunks[-1]["mode"] == "extractive_fallback" and chunks[-1]["citations"][0]["doc_id"] == "rainy"


def test_without_a_model_or_passages_the_stream_is_the_one_result():
    assert list(make_answer_chain(None).stream(INPUTS)) == [make_answer_chain(None).invoke(INPUTS)]
    empty = {"question": "Why?", "documents": []}
    assert list(make_answer_chain(_fake("unused")).stream(empty)) == [make_answer_chain(_fake("x")).invoke(empty)]


def test_a_streamed_chain_composes_and_batches_as_before():
    chain = make_answer_chain(_fake("Hokkaido has no rainy season [1].")) | RunnableLambda(lambda out: out["answer"])
    assert list(chain.stream(INPUTS))[-1] == "Hokkaido has no rainy season [1]."
    batched = make_answer_chain(GenericFakeChatModel(messages=iter([AIMessage("a [1]."), AIMessage("b [2].")])))
    assert [o["answer"] for o in batched.batch([INPUTS, INPUTS], {"max_concurrency": 1})] == ["a [1].", "b [2]."]
