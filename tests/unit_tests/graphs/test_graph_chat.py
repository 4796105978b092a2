"""Graphs hold a conversation: follow-ups condensed into a standalone search question (offline rule and chat
model), the answer for the user's own words with the recent history, citations on the reply's ``AIMessage``, the
``condense_question=False`` switch, and what the history may hold (never RESTRICTED text, never foreign messages)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from pydantic import Field

from langchain_ragspine.graphs import (
    GRAPH_BUILDERS,
    build_adaptive_rag,
    build_corrective_rag,
    build_simple_rag,
)
from langchain_ragspine.graphs.conversation import (
    DEFAULT_HISTORY_TURNS,
    MAX_HISTORY_MESSAGE_CHARS,
    chat_history,
    condense_question,
    condense_question_deterministic,
    is_graph_reply,
    topic_terms,
)
from langchain_ragspine.retrievers import BM25Retriever
from tests.unit_tests.chat_docs import SECRET, chunk
from tests.unit_tests.spy_models import SpyChatModel

DOCS = [
    chunk("tsuyu", "梅雨のない地域", "北海道には梅雨がない。梅雨前線は北海道に届く前に弱まるからである。"),
    chunk("naze", "なぜなぜ分析", "なぜなぜ分析は、問題が起きたときに「なぜ」を繰り返して原因を探る手法です。"),
    chunk("meiyu", "没有梅雨的地区", "北海道没有梅雨，因为梅雨锋到达北海道之前已经减弱。"),
    chunk("ceshi", "单元测试", "为什么要写单元测试？为了尽早发现错误。"),
    chunk("rainy", "Regions without a rainy season", "Hokkaido has no rainy season. The rainy front weakens before it "
         "reaches Hokkaido."),
    chunk("whys", "The five whys", "Why is that a question we ask? The five whys technique repeats why to find a root "
         "cause."),
    chunk("secret", "secret memo", f"{SECRET} Hokkaido rainy season 梅雨 北海道 {SECRET}", sensitivity="RESTRICTED"),
]
#: (first question, follow-up, the document that answers both)
CONVERSATIONS = {
    "ja": ("梅雨がない地域はどこですか？", "それはなぜですか？", "tsuyu"),
    "zh": ("哪个地区没有梅雨？", "为什么？", "meiyu"),
    "en": ("Which region has no rainy season?", "Why is that?", "rainy"),
}


@pytest.fixture(scope="module")
def retriever() -> BM25Retriever:
    return BM25Retriever.from_documents(DOCS, k=3)


def _thread(graph: Any, *questions: str, thread: str = "t") -> list[dict[str, Any]]:
    config = {"configurable": {"thread_id": thread}}
    return [graph.invoke({"messages": [HumanMessage(q)]}, config) for q in questions]


def _condense_step(out: dict[str, Any]) -> dict[str, Any] | None:
    return next((t for t in out["trace"] if t["step"] == "condense_question"), None)


class ScriptedChat(BaseChatModel):
    """Answers each kind of prompt the graphs send (condense, batch grading, answer) and records every prompt's
    messages."""

    standalone: str = ""
    answer: str = "Hokkaido has no rainy season [1]."
    condense_error: bool = False
    calls: list[list[BaseMessage]] = Field(default_factory=list)

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:  # type: ignore[no-untyped-def]
        self.calls.append(list(messages))
        system = str(messages[0].content)
        if "standalone question" in system:
            if self.condense_error:
                raise ConnectionError("model down")
            reply = self.standalone
        elif "Grade passages" in str(messages[-1].content):
            n = int(re.findall(r"Grade passages 1 to (\d+)", str(messages[-1].content))[0])
            reply = "{" + ", ".join(f'"{i}": "yes"' for i in range(1, n + 1)) + "}"
        else:
            reply = self.answer
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=reply))])

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def prompts_of(self, kind: str) -> list[list[BaseMessage]]:
        def kind_of(call: list[BaseMessage]) -> str:
            if "standalone question" in str(call[0].content):
                return "condense"
            return "grade" if "Grade passages" in str(call[-1].content) else "answer"

        return [c for c in self.calls if kind_of(c) == kind]


# -- the offline rule ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("lang", list(CONVERSATIONS))
@pytest.mark.parametrize("name", list(GRAPH_BUILDERS))
def test_an_offline_follow_up_borrows_the_previous_question(retriever, name, lang):
    first, follow_up, gold = CONVERSATIONS[lang]
    graph = GRAPH_BUILDERS[name](retriever, checkpointer=InMemorySaver())
    one, two = _thread(graph, first, follow_up)
    assert [c["doc_id"] for c in one["citations"]] == [gold]
    step = _condense_step(two)
    assert step is not None and step["how"] == "borrowed" and step["turns"] == 1
    assert two["search_query"] == step["query"] and two["search_query"].startswith(follow_up)
    assert topic_terms(two["search_query"]) & topic_terms(first)  # the earlier question's content words
    assert two["original_query"] == follow_up  # the answer addresses the user's own words
    assert not two["refused"] and {c["doc_id"] for c in two["citations"]} == {gold}
    retrieved = [t["query"] for t in two["trace"] if t["step"] == "retrieve"]
    assert retrieved[0] == step["query"]
    assert [m.type for m in two["messages"]] == ["human", "ai", "human", "ai"]


@pytest.mark.parametrize("lang", list(CONVERSATIONS))
def test_without_condensing_the_follow_up_is_searched_alone_and_refused(retriever, lang):
    first, follow_up, gold = CONVERSATIONS[lang]
    graph = build_corrective_rag(retriever, checkpointer=InMemorySaver(), condense_question=False)
    _, two = _thread(graph, first, follow_up)
    assert _condense_step(two) is None and two["refused"] is True
    assert [t["query"] for t in two["trace"] if t["step"] == "retrieve"][0] == follow_up


def _comparable(out: dict[str, Any]) -> dict[str, Any]:
    """A graph's output without what differs between two runs of one question: message ids (fresh uuids) and
    the conversation before the run."""
    reply = out["messages"][-1] if out.get("messages") else None
    rest = {k: v for k, v in out.items() if k != "messages"}
    if reply is not None:
        rest["reply"] = (reply.type, reply.content, reply.response_metadata)
    return rest


@pytest.mark.parametrize("name", list(GRAPH_BUILDERS))
@pytest.mark.parametrize("with_llm", [False, True])
def test_condense_question_false_is_every_message_on_its_own(retriever, name, with_llm):
    """The off switch: on a checkpointed thread, each turn's result and every prompt are those of the same message
    asked alone on a fresh graph — the graphs before conversations existed read no history at all."""
    build = GRAPH_BUILDERS[name]
    questions = ["梅雨がない地域はどこですか？", "それはなぜですか？", "Why is that?"]
    spy = SpyChatModel(reply="yes [1]")
    graph = build(retriever, spy if with_llm else None, checkpointer=InMemorySaver(), condense_question=False)
    threaded = _thread(graph, *questions)
    for question, out in zip(questions, threaded, strict=True):
        alone_spy = SpyChatModel(reply="yes [1]")
        alone = build(retriever, alone_spy if with_llm else None, condense_question=False).invoke(
            {"messages": [HumanMessage(question)]}
        )
        assert _comparable(out) == _comparable(alone)
    solo_prompts = []
    for question in questions:
        alone_spy = SpyChatModel(reply="yes [1]")
        build(retriever, alone_spy if with_llm else None, condense_question=False).invoke(
            {"messages": [HumanMessage(question)]}
        )
        solo_prompts += alone_spy.prompts
    assert spy.prompts == solo_prompts


@pytest.mark.parametrize("name", list(GRAPH_BUILDERS))
@pytest.mark.parametrize("with_llm", [False, True])
def test_a_first_message_and_a_question_run_as_without_condensing(retriever, name, with_llm):
    build = GRAPH_BUILDERS[name]
    for inputs in ({"messages": [HumanMessage("Which region has no rainy season?")]},
                   {"question": "Which region has no rainy season?"}):
        on_spy, off_spy = SpyChatModel(reply="yes [1]"), SpyChatModel(reply="yes [1]")
        on = build(retriever, on_spy if with_llm else None).invoke(inputs)
        off = build(retriever, off_spy if with_llm else None, condense_question=False).invoke(inputs)
        assert _comparable(on) == _comparable(off) and on_spy.prompts == off_spy.prompts


def test_a_self_contained_follow_up_is_searched_as_it_is(retriever):
    graph = build_corrective_rag(retriever, checkpointer=InMemorySaver())
    _, two = _thread(graph, "梅雨がない地域はどこですか？", "Which region has no rainy season?")
    assert _condense_step(two)["how"] == "as_is"
    assert two["search_query"] == "Which region has no rainy season?"
    assert [c["doc_id"] for c in two["citations"]] == ["rainy"]


def test_small_talk_after_a_question_is_not_given_the_topic(retriever):
    graph = build_adaptive_rag(retriever, checkpointer=InMemorySaver())
    _, two = _thread(graph, "梅雨がない地域はどこですか？", "ありがとう")
    assert _condense_step(two)["how"] == "small_talk" and two["route"] == "none"


def test_the_rule_walks_back_to_the_latest_question_with_content_and_ignores_replies():
    history = [HumanMessage("梅雨がない地域はどこですか？"), AIMessage("東京 大阪", response_metadata={"ragspine": {}}),
               HumanMessage("なぜ？"), HumanMessage("ありがとう")]
    found = condense_question_deterministic("それはどうしてですか？", history)
    assert found.how == "borrowed" and "梅雨" in found.question and "東京" not in found.question
    assert condense_question_deterministic("為什麼？", []).how == "as_is"  # nothing to borrow
    assert topic_terms("那是为什么呢？") == set() and topic_terms("Why is that?") == set()


# -- with a chat model -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("lang", list(CONVERSATIONS))
def test_a_chat_model_condenses_and_the_answer_sees_the_conversation(retriever, lang):
    first, follow_up, gold = CONVERSATIONS[lang]
    standalone = {"ja": "北海道に梅雨がないのはなぜですか？", "zh": "为什么北海道没有梅雨？",
                  "en": "Why does Hokkaido have no rainy season?"}[lang]
    llm = ScriptedChat(standalone=standalone)
    graph = build_corrective_rag(retriever, llm, checkpointer=InMemorySaver())
    one, two = _thread(graph, first, follow_up)
    step = _condense_step(two)
    assert step == {"step": "condense_question", "how": "llm", "query": standalone, "turns": 1}
    assert two["search_query"] == standalone and two["original_query"] == follow_up
    [condense] = llm.prompts_of("condense")
    shown = str(condense[-1].content)
    assert f"User: {first}" in shown and f"Last message: {follow_up}" in shown
    assert "Assistant: Hokkaido has no rainy season." in shown and "[1]" not in shown.split("Last message")[0]
    answer_prompt = llm.prompts_of("answer")[-1]
    assert [m.type for m in answer_prompt] == ["system", "human", "ai", "human"]  # system, history, context+question
    assert answer_prompt[1].content == first and "[1]" not in str(answer_prompt[2].content)
    assert f"Question ({ {'ja': 'Japanese', 'zh': 'Chinese', 'en': 'English'}[lang] }): {follow_up}" in str(
        answer_prompt[-1].content
    )
    assert "earlier turns of the conversation" in str(answer_prompt[0].content)
    grade_prompt = llm.prompts_of("grade")[-1]
    assert f"Question: {standalone}" in str(grade_prompt[-1].content)  # graded against the standalone question
    assert {c["doc_id"] for c in two["citations"]} == {gold}  # passage [1] of the standalone search


def test_a_generic_fake_chat_model_drives_a_two_turn_thread(retriever):
    """GenericFakeChatModel answers in call order: turn 1 grades and answers, turn 2 condenses, grades, answers."""
    llm = GenericFakeChatModel(messages=iter([
        AIMessage('{"1": "yes", "2": "no", "3": "no"}'), AIMessage("Hokkaido has no rainy season [1]."),
        AIMessage("Why does Hokkaido have no rainy season?"),
        AIMessage('{"1": "yes", "2": "no", "3": "no"}'), AIMessage("The rainy front weakens before it reaches Hokkaido [1]."),
    ]))
    graph = build_simple_rag(retriever, llm, checkpointer=InMemorySaver())
    _, two = _thread(graph, "Which region has no rainy season?", "Why is that?")
    assert two["search_query"] == "Why does Hokkaido have no rainy season?"
    assert two["answer"] == "The rainy front weakens before it reaches Hokkaido [1]."
    assert two["messages"][-1].response_metadata["citations"][0]["doc_id"] == "rainy"


@pytest.mark.parametrize("how", ["error", "no_content", "too_long"])
def test_an_unusable_condensation_falls_back_to_the_rule(retriever, how):
    llm = ScriptedChat(standalone={"error": "", "no_content": "Why is that?", "too_long": "梅雨 " * 200}[how],
                       condense_error=how == "error")
    graph = build_corrective_rag(retriever, llm, checkpointer=InMemorySaver())
    _, two = _thread(graph, "Which region has no rainy season?", "Why is that?")
    step = _condense_step(two)
    assert step["how"] == "borrowed" and step["llm_failed"] is True
    assert step["query"] == "Why is that? region rainy season"


def test_the_history_window_is_bounded(retriever):
    llm = ScriptedChat(standalone="Why does Hokkaido have no rainy season?")
    graph = build_corrective_rag(retriever, llm, checkpointer=InMemorySaver(), history_turns=1)
    long_question = "Which region has no rainy season? " + "x" * 3000
    _thread(graph, "Where is the five whys technique used?", long_question, "Why is that?")
    condense = str(llm.prompts_of("condense")[-1][-1].content)
    assert "five whys" not in condense  # two turns back: outside a one-turn window
    assert "x" * (MAX_HISTORY_MESSAGE_CHARS - 40) in condense and "x" * MAX_HISTORY_MESSAGE_CHARS not in condense
    answer_prompt = llm.prompts_of("answer")[-1]
    assert len(answer_prompt) == 4 and len(str(answer_prompt[1].content)) == MAX_HISTORY_MESSAGE_CHARS
    assert DEFAULT_HISTORY_TURNS == 3
    with pytest.raises(ValueError, match="history_turns"):
        build_corrective_rag(retriever, history_turns=0)
    with pytest.raises(TypeError, match="condense_question"):
        build_corrective_rag(retriever, condense_question="false")  # type: ignore[arg-type]


def test_chat_history_keeps_users_and_the_graphs_own_replies_only():
    ours = AIMessage("Hokkaido [1].", response_metadata={"ragspine": {"refused": False}})
    messages = [
        SystemMessage("system text"), HumanMessage("q1"), ours,
        AIMessage("", tool_calls=[{"name": "t", "args": {}, "id": "1"}]), ToolMessage("tool text", tool_call_id="1"),
        AIMessage("another node's text"), HumanMessage("q2"), HumanMessage("the question"),
    ]
    history = chat_history(messages, turns=5)
    assert [(m.type, m.content) for m in history] == [("human", "q1"), ("ai", "Hokkaido."), ("human", "q2")]
    assert is_graph_reply(ours) and not is_graph_reply(messages[-3])
    assert chat_history(messages, turns=1) == [HumanMessage("q2")]


def test_condense_question_without_history_makes_no_call():
    llm = ScriptedChat(standalone="unused")
    assert condense_question("Why is that?", [], llm=llm).how == "as_is" and llm.calls == []


# -- RESTRICTED never reaches a prompt through the conversation -----------------------------------------------------
@pytest.mark.parametrize("name", list(GRAPH_BUILDERS))
def test_no_restricted_text_reaches_a_prompt_through_the_history(retriever, name):
    """The corpus holds a RESTRICTED chunk that matches every question; earlier replies were gated, and messages
    the graph did not write (a tool result, another node's AI message, a system message, all holding the secret)
    are never read."""
    spy = SpyChatModel(reply="Hokkaido has no rainy season [1].")
    graph = GRAPH_BUILDERS[name](retriever, spy, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    one = graph.invoke({"messages": [HumanMessage("Which region has no rainy season?")]}, config)
    assert SECRET not in repr(one)
    foreign = [AIMessage("", tool_calls=[{"name": "lookup", "args": {}, "id": "c1"}]),
               ToolMessage(f"{SECRET} tool result", tool_call_id="c1"), AIMessage(f"{SECRET} from another node"),
               SystemMessage(f"{SECRET} system")]
    two = graph.invoke({"messages": [*foreign, HumanMessage("Why is that?")]}, config)
    assert spy.prompts and not any(SECRET in p for p in spy.prompts)
    assert any("Conversation:" in p for p in spy.prompts)  # the condense call did run
    assert SECRET not in repr({k: v for k, v in two.items() if k != "messages"})
    assert SECRET not in repr(two["messages"][-1])


# -- citations on the message ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(GRAPH_BUILDERS))
def test_a_messages_state_app_renders_the_citations_from_the_message(retriever, name):
    app = StateGraph(MessagesState)
    app.add_node("rag", GRAPH_BUILDERS[name](retriever))
    app.add_edge(START, "rag")
    chat = app.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    state = chat.invoke({"messages": [HumanMessage("Which region has no rainy season?")]}, config)
    assert set(state) == {"messages"}  # nothing but messages in the parent's state
    reply = state["messages"][-1]
    sources = {c["n"]: c for c in reply.response_metadata["citations"]}
    markers = {int(n) for group in re.findall(r"\[([\d, ]+)\]", reply.content) for n in group.split(",")}
    assert markers and markers <= set(sources)
    assert {sources[n]["title"] for n in markers} == {"Regions without a rainy season"}
    assert set(sources[1]) == {"n", "chunk_id", "doc_id", "title", "source_locator", "attributed"}
    assert sources[1]["chunk_id"] == "rainy#0" and sources[1]["source_locator"].startswith("rainy.md")
    meta = reply.response_metadata["ragspine"]
    assert meta["refused"] is False and meta["search_query"] == "Which region has no rainy season?"
    state = chat.invoke({"messages": [HumanMessage("Why is that?")]}, config)
    assert state["messages"][-1].response_metadata["citations"][0]["doc_id"] == "rainy"
    assert SECRET not in repr(state["messages"])


def test_a_refusal_carries_no_citations(retriever):
    out = build_corrective_rag(retriever).invoke({"messages": [HumanMessage("What is the capital of Peru?")]})
    meta = out["messages"][-1].response_metadata
    assert out["refused"] and meta["citations"] == [] and meta["ragspine"]["refused"] is True


# -- the chat-app example of docs/answer-graphs.md ------------------------------------------------------------------
def _docs_block(marker: str) -> str:
    text = (Path(__file__).resolve().parents[3] / "docs" / "answer-graphs.md").read_text("utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    [block] = [b for b in blocks if marker in b]
    return block


def test_the_chat_app_example_of_the_docs_runs(capsys):
    namespace: dict[str, Any] = {}
    exec(compile(_docs_block("# chat app example"), "answer-graphs.md", "exec"), namespace)
    printed = capsys.readouterr().out
    assert "[1] 梅雨のない地域" in printed and "それはなぜですか？" in printed
    assert namespace["turns"][1]["search_query"].startswith("それはなぜですか？")
