"""Issues 25 + 27: an earlier reply that quoted a chunk relabelled RESTRICTED (or retracted) after it was made never
goes back into a prompt as chat history, and a checkpointed thread stops carrying it.

Turn 1 of a checkpointed thread answers from a directory store through a live retriever, quoting chunk ``a#0`` (it
holds the canary).  Then ``a`` is relabelled RESTRICTED (a sidecar) or deleted, and the store re-ingested — in this
process or in another one.  Turn 2 is a follow-up: a spy chat model records every prompt of every kind (condense,
grading, rewrite, routing, answer); none holds the canary, nor do the result, the stream events after the first node
or the state left in the checkpoint.  With nothing relabelled the history is what it was: every prompt byte for byte
as with the check switched off.  And the protocol under it (``served_ids``) per retriever kind.
"""

from __future__ import annotations

import asyncio
import json
import re
import warnings
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.retrievers import BaseRetriever
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from pydantic import Field

from langchain_ragspine.graphs import GRAPH_BUILDERS, nodes
from langchain_ragspine.graphs.conversation import (
    WITHDRAWN_NOTE,
    ConversationCheck,
    chat_history,
    check_conversation,
    is_withdrawn,
    reply_sources,
    withdraw_from_thread,
)
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.sources import open_retriever
from langchain_ragspine.retrievers import (
    LiveStoreRetriever,
)
from tests.unit_tests.retrievers.test_live_retriever import CANARY, _corpus, _delete, _reingest, _relabel
from tests.unit_tests.retrievers.test_served_ids import Fixed

FIRST = "Which rivers are in the secret valley?"
FOLLOW_UP = "Why is that?"


class Chat(BaseChatModel):
    """Answers each kind of prompt the graphs send so that every graph takes its answering path, and records every
    prompt (all its messages' text): condense → a standalone question, relevance (batch or one) / support /
    usefulness → yes, routing → ``single``, small-talk check → no, rewrite → a query, the answer → ``answer``."""

    answer: str = f"The secret valley has rivers: {CANARY} [1]."
    prompts: list[str] = Field(default_factory=list)

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        text = "\n".join(str(m.content) for m in messages)
        self.prompts.append(text)
        system, last = str(messages[0].content), str(messages[-1].content)
        if "standalone question" in system:
            reply = "Why are there rivers in the valley?"
        elif "Grade passages" in last:
            n = int(re.findall(r"Grade passages 1 to (\d+)", last)[0])
            reply = json.dumps({str(i): "yes" for i in range(1, n + 1)})
        elif "binary_score" in system:
            reply = '{"binary_score": "no"}' if "small talk" in system else '{"binary_score": "yes"}'
        elif system.startswith("Classify the question"):
            reply = "single"
        elif system.startswith("Split the question"):
            reply = "rivers of the valley"
        elif system.startswith("You rewrite a question"):
            reply = "valley rivers"
        else:
            reply = self.answer
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=reply))])

    @property
    def _llm_type(self) -> str:
        return "history-spy"


def _store(tmp_path: Path) -> tuple[Path, Path, LiveStoreRetriever]:
    corpus, store = _corpus(tmp_path), tmp_path / "S"
    ingest(corpus, store, progress=False, mode="bm25")
    retriever = open_retriever(store, mode="bm25", k=3)
    assert isinstance(retriever, LiveStoreRetriever)
    return corpus, store, retriever


def _change(corpus: Path, store: Path, change: str, *, other_process: bool) -> None:
    (_relabel if change == "relabel" else _delete)(corpus)
    _reingest(corpus, store, {"mode": "bm25"}, other_process=other_process)


def _turn_one(graph: Any, config: dict[str, Any]) -> AIMessage:
    out = graph.invoke({"messages": [HumanMessage(FIRST)]}, config)
    reply = out["messages"][-1]
    assert CANARY in reply.content and "a#0" in reply_sources(reply)  # not vacuous: turn 1 quoted the chunk
    return reply


def _text_of(value: Any) -> str:
    return repr(value)


# -- the graphs: turn 2 after a relabel / retraction ---------------------------------------------------------------
CASES = [(name, change, False) for name in GRAPH_BUILDERS for change in ("relabel", "delete")] + [
    pytest.param(name, change, True, marks=pytest.mark.subprocess)
    for name in ("corrective", "adaptive") for change in ("relabel", "delete")
]


@pytest.mark.parametrize(("name", "change", "other_process"), CASES)
def test_no_prompt_result_or_event_carries_a_reply_withdrawn_since(tmp_path, name, change, other_process):
    corpus, store, retriever = _store(tmp_path)
    chat = Chat()
    graph = GRAPH_BUILDERS[name](retriever, chat, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    first = _turn_one(graph, config)
    assert any(CANARY in p for p in chat.prompts)

    _change(corpus, store, change, other_process=other_process)
    chat.prompts.clear()
    chat.answer = "Kyoto has rivers [1]."
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        chunks = list(graph.stream({"messages": [HumanMessage(FOLLOW_UP)]}, config,
                                   stream_mode=["updates", "messages", "custom", "values"]))
    assert chat.prompts and not [p for p in chat.prompts if CANARY in p]
    assert any("Conversation:" in p for p in chat.prompts)  # the follow-up was condensed with the model
    assert any(FIRST in p for p in chat.prompts)  # the user's own earlier question stays in the history
    # LangGraph's first "values" chunk replays the thread as stored before the run (docs/answer-graphs.md); from
    # the first node on, nothing carries the withdrawn reply
    values = [c for mode, c in chunks if mode == "values"]
    rest = [c for mode, c in chunks if mode != "values"]
    assert CANARY not in _text_of(rest) and CANARY not in _text_of(values[1:])
    state = graph.get_state(config).values
    assert CANARY not in _text_of(state)  # the checkpoint after the run, the result with it
    withdrawn = next(m for m in state["messages"] if m.id == first.id)  # replaced in place, same id
    assert is_withdrawn(withdrawn) and withdrawn.content == WITHDRAWN_NOTE["en"]
    assert withdrawn.response_metadata["citations"] == []
    assert [m.type for m in state["messages"]] == ["human", "ai", "human", "ai"]
    step = next(t for t in state["trace"] if t["step"] == "check_history")
    assert step == {"step": "check_history", "withdrawn": 1, "unverified": 0}


@pytest.mark.subprocess
def test_async_events_after_the_first_node_never_carry_the_withdrawn_reply(tmp_path):
    corpus, store, retriever = _store(tmp_path)
    chat = Chat()
    graph = GRAPH_BUILDERS["corrective"](retriever, chat, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    _turn_one(graph, config)
    _change(corpus, store, "relabel", other_process=False)
    chat.prompts.clear()
    chat.answer = "Kyoto has rivers [1]."

    async def events() -> list[dict[str, Any]]:
        return [e async for e in graph.astream_events({"messages": [HumanMessage(FOLLOW_UP)]}, config, version="v2")]

    got = asyncio.run(events())
    carrying = [e for e in got if CANARY in repr(e)]
    # only the first node's input: the state as the checkpointer stored it before this run (documented)
    assert all(e["name"] == "prepare" and CANARY not in repr({k: v for k, v in e["data"].items() if k != "input"})
               for e in carrying), [(e["event"], e["name"]) for e in carrying]
    assert chat.prompts and not [p for p in chat.prompts if CANARY in p]
    assert CANARY not in repr(graph.get_state(config).values)


@pytest.mark.subprocess
def test_a_messages_state_parent_app_gets_the_reply_replaced_too(tmp_path):
    corpus, store, retriever = _store(tmp_path)
    chat = Chat()
    app = StateGraph(MessagesState)
    app.add_node("rag", GRAPH_BUILDERS["corrective"](retriever, chat))
    app.add_edge(START, "rag")
    parent = app.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    first = _turn_one(parent, config)
    _change(corpus, store, "relabel", other_process=False)
    chat.prompts.clear()
    chat.answer = "Kyoto has rivers [1]."
    out = parent.invoke({"messages": [HumanMessage(FOLLOW_UP)]}, config)
    assert not [p for p in chat.prompts if CANARY in p]
    assert CANARY not in repr(out) and is_withdrawn(next(m for m in out["messages"] if m.id == first.id))


# -- nothing relabelled: the history is what it was ----------------------------------------------------------------
def _unchecked(messages: Any, retriever: Any) -> ConversationCheck:
    """The conversation as the graphs read it before the check existed: everything kept, nothing replaced."""
    return ConversationCheck([m for m in messages if isinstance(m, BaseMessage)], [])


def _comparable(out: dict[str, Any]) -> str:
    """A result without what differs between two runs by construction (message ids, which are uuids)."""
    messages = [(m.type, m.content, {k: v for k, v in m.response_metadata.items()}) for m in out["messages"]]
    return repr(({k: v for k, v in out.items() if k != "messages"}, messages))


@pytest.mark.parametrize("name", list(GRAPH_BUILDERS))
def test_with_nothing_relabelled_every_prompt_and_result_is_as_without_the_check(tmp_path, name, monkeypatch):
    _corpus_dir, _store_dir, retriever = _store(tmp_path)
    runs = []
    for check in (True, False):
        if not check:
            monkeypatch.setattr(nodes, "check_conversation", _unchecked)
        chat = Chat()
        graph = GRAPH_BUILDERS[name](retriever, chat, checkpointer=InMemorySaver())
        config = {"configurable": {"thread_id": "t"}}
        outs = [graph.invoke({"messages": [HumanMessage(q)]}, config) for q in (FIRST, FOLLOW_UP, "And the temples?")]
        runs.append((chat.prompts, [_comparable(o) for o in outs]))
    (checked_prompts, checked_outs), (plain_prompts, plain_outs) = runs
    assert checked_prompts == plain_prompts  # byte for byte, condense and answer prompts included
    assert checked_outs == plain_outs
    assert any(CANARY in p for p in checked_prompts[len(checked_prompts) // 3:])  # the served reply is in the history


# -- a retriever that cannot tell: fail closed ----------------------------------------------------------------------
class Foreign(BaseRetriever):
    """A retriever from outside the package: no ``served_ids``."""

    inner: BaseRetriever

    def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
        return self.inner.invoke(query)


def test_a_retriever_that_cannot_tell_keeps_cited_replies_out_of_every_prompt(tmp_path):
    _corpus_dir, _store_dir, retriever = _store(tmp_path)
    chat = Chat()
    graph = GRAPH_BUILDERS["corrective"](Foreign(inner=retriever), chat, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    first = _turn_one(graph, config)
    chat.prompts.clear()
    out = graph.invoke({"messages": [HumanMessage(FOLLOW_UP)]}, config)
    said = first.content.split(CANARY)[0]  # the reply's own words (the chunk is public: it is retrieved again)
    assert said.strip() and not [p for p in chat.prompts if said in p]  # the reply never reaches a prompt
    assert any(FIRST in p for p in chat.prompts)  # the user's question does
    assert out["messages"][1] == first  # left as it is in the state (the retriever did not say it was withdrawn)
    assert {"step": "check_history", "withdrawn": 0, "unverified": 1} in out["trace"]


# -- check_conversation ------------------------------------------------------------------------------------------
def _reply(text: str, passages: list[str | None] | None, *, mid: str = "r1", cited: list[str] = ()) -> AIMessage:
    mark: dict[str, Any] = {"search_query": "q", "refused": False, "mode": "llm"}
    if passages is not None:
        mark["passages"] = passages
    citations = [{"n": i, "chunk_id": c, "doc_id": c.split("#")[0], "title": None, "source_locator": None,
                  "attributed": False} for i, c in enumerate(cited, 1)]
    return AIMessage(text, id=mid, response_metadata={"citations": citations, "ragspine": mark})




def test_check_conversation_sorts_replies_by_what_the_retriever_says():
    retriever = Fixed(served=frozenset({"a#0", "b#0"}), withdrawn=frozenset({"x#0"}))
    messages = [
        HumanMessage("q1", id="h1"), _reply("served", ["a#0", "b#0"], mid="r1"),
        HumanMessage("q2", id="h2"), _reply(f"{CANARY} withdrawn", ["a#0", "x#0"], mid="r2"),
        HumanMessage("q3", id="h3"), _reply("other corpus", ["z#0"], mid="r3"),
        HumanMessage("q4", id="h4"), _reply("no id", [None], mid="r4"),
        HumanMessage("q5", id="h5"), _reply("refusal", [], mid="r5"),
        HumanMessage("q6", id="h6"), _reply(f"{CANARY} old reply", None, mid="r6", cited=["x#0"]),  # no passages key
        HumanMessage("q7", id="h7"),
    ]
    checked = check_conversation(messages, retriever)
    assert [m.id for m in checked.kept] == ["h1", "r1", "h2", "h3", "h4", "h5", "r5", "h6", "h7"]
    assert [m.id for m in checked.withdrawn] == ["r2", "r6"] and checked.unverified == 2
    assert all(is_withdrawn(m) and CANARY not in repr(m) for m in checked.withdrawn)
    history = chat_history([*checked.kept, *checked.withdrawn], turns=10)  # a withdrawn reply is never read
    assert [m.content for m in history if m.type == "ai"] == ["served", "refusal"]
    # nothing to check: no call at all, everything kept
    assert check_conversation([HumanMessage("q")], object()).kept[0].content == "q"


def test_tool_results_made_from_a_withdrawn_chunk_are_replaced():
    retriever = Fixed(served=frozenset({"a#0"}), withdrawn=frozenset({"x#0"}))
    call = AIMessage("", id="c", tool_calls=[{"name": "search_documents", "args": {"question": "q"}, "id": "t1"}])
    bad = ToolMessage(f"{CANARY} [1]", id="m1", tool_call_id="t1", name="search_documents",
                      artifact=[Document(CANARY, id="x#0", metadata={"chunk_id": "x#0"})])
    as_dicts = ToolMessage(f"{CANARY} [1]", id="m2", tool_call_id="t2",
                           artifact=[{"id": None, "metadata": {"chunk_id": "x#0"}, "page_content": CANARY}])
    good = ToolMessage("fine", id="m3", tool_call_id="t3", artifact=[Document("ok", id="a#0")])
    checked = check_conversation([HumanMessage("q", id="h"), call, bad, as_dicts, good], retriever)
    assert [m.id for m in checked.kept] == ["h", "c", "m3"]
    assert [(m.id, m.tool_call_id) for m in checked.withdrawn] == [("m1", "t1"), ("m2", "t2")]  # the call stays paired
    assert all(m.artifact is None and CANARY not in repr(m) for m in checked.withdrawn)


@pytest.mark.subprocess
def test_withdraw_from_thread_cleans_the_thread_before_a_run(tmp_path):
    corpus, store, retriever = _store(tmp_path)
    chat = Chat()
    graph = GRAPH_BUILDERS["corrective"](retriever, chat, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    _turn_one(graph, config)
    assert withdraw_from_thread(graph, config, retriever) == 0  # nothing withdrawn: nothing written
    before = graph.get_state(config)
    _change(corpus, store, "relabel", other_process=False)
    assert withdraw_from_thread(graph, config, retriever) >= 2  # the reply and turn 1's passage
    assert CANARY in repr(before.values) and CANARY not in repr(graph.get_state(config).values)
    chat.answer = "Kyoto has rivers [1]."

    async def everything() -> tuple[list[Any], list[dict[str, Any]]]:
        chunks = [c async for c in graph.astream({"messages": [HumanMessage(FOLLOW_UP)]}, config,
                                                  stream_mode="values")]
        events = [e async for e in graph.astream_events({"messages": [HumanMessage("And temples?")]}, config,
                                                        version="v2")]
        return chunks, events

    chunks, events = asyncio.run(everything())
    assert chunks and CANARY not in repr(chunks) and CANARY not in repr(events)


def test_a_postgres_retriever_withdraws_the_reply_too(pg_url):
    from langchain_ragspine.backends.postgres.versions import add_documents
    from langchain_ragspine.retrievers.postgres import PostgresBM25Retriever

    def chunk(doc_id: str, text: str, **label: str) -> Document:
        return Document(text, metadata={"doc_id": doc_id, "chunk_id": f"{doc_id}#0", "title": doc_id, **label})

    add_documents(pg_url, [chunk("a", f"{CANARY} rivers of the secret valley."),
                           chunk("b", "Public rivers and temples of Kyoto.")])
    chat = Chat()
    graph = GRAPH_BUILDERS["corrective"](PostgresBM25Retriever(url=pg_url, k=3), chat, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    first = _turn_one(graph, config)
    add_documents(pg_url, [chunk("a", f"{CANARY} rivers of the secret valley.", sensitivity="RESTRICTED")])
    chat.prompts.clear()
    chat.answer = "Kyoto has rivers [1]."
    out = graph.invoke({"messages": [HumanMessage(FOLLOW_UP)]}, config)
    assert chat.prompts and not [p for p in chat.prompts if CANARY in p]
    assert CANARY not in repr(out) and is_withdrawn(next(m for m in out["messages"] if m.id == first.id))
