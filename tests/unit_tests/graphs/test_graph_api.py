"""The graphs the LangGraph way: schemas and as_tool, per-run context, output_schema, compressors=, one-call
grading (call counts with fake chat models, parsing, fallback), overridable prompts, and chat-state graphs
(MessagesState node, stream_mode="messages", filters per run on a checkpointed thread)."""

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun, Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from pydantic import Field

from langchain_ragspine.document_compressors import LostInTheMiddleReorder, MMRCompressor
from langchain_ragspine.graphs import (
    GRAPH_BUILDERS,
    Graders,
    GraphPrompts,
    build_adaptive_rag,
    build_corrective_rag,
    build_self_rag,
    build_simple_rag,
    corrective_rag_max_steps,
    make_graders,
    parse_batch_relevance,
)
from langchain_ragspine.graphs.adaptive import adaptive_rag_max_steps
from langchain_ragspine.graphs.self_rag import self_rag_max_steps
from langchain_ragspine.retrievers import BM25Retriever
from tests.unit_tests.graphs.test_graphs import DOCS, QUESTION, _doc

SECRET = _doc(9, "SECRETMARK the highest mountain in Japan is classified", sensitivity="restricted")


@pytest.fixture(scope="module")
def retriever() -> BM25Retriever:
    return BM25Retriever.from_documents(DOCS, k=4)


class SpyModel(BaseChatModel):
    """Answers from ``replies`` in turn (the last one repeats) and records every prompt and its tags."""

    replies: list[str]
    prompts: list[str] = Field(default_factory=list)
    tags_seen: list[list[str]] = Field(default_factory=list)

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:  # type: ignore[no-untyped-def]
        self.prompts.append("\n".join(str(m.content) for m in messages))
        self.tags_seen.append(list(run_manager.tags) if run_manager else [])
        reply = self.replies[min(len(self.prompts) - 1, len(self.replies) - 1)]
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=reply))])

    @property
    def _llm_type(self) -> str:
        return "spy"


class RecordingRetriever(BaseRetriever):
    """BM25 over DOCS plus the RESTRICTED chunk on every call (unless ``secret=False``); records the ``k`` each call
    asked for."""

    ks: list[Any] = Field(default_factory=list)
    secret: bool = True

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None,
        filter: dict | None = None,
    ) -> list[Document]:
        self.ks.append(k)
        hits = BM25Retriever.from_documents(DOCS, k=k or 4).invoke(query, filter=filter)
        return [*hits, SECRET] if self.secret else hits


class SpyCompressor(BaseDocumentCompressor):
    """Drops the last document, records what it was given; ``inject`` adds the RESTRICTED chunk (hostile)."""

    seen: list[list[str]] = Field(default_factory=list)
    inject: bool = False

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        self.seen.append([d.page_content for d in documents])
        out = list(documents)[:-1]
        return [*out, SECRET] if self.inject else out


# -- schemas, as_tool, context, output ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(GRAPH_BUILDERS))
def test_schemas_and_as_tool_work(retriever, name):
    graph = GRAPH_BUILDERS[name](retriever)
    inputs = graph.get_input_jsonschema()
    assert set(inputs["properties"]) == {"question", "messages", "filters"}
    assert not inputs.get("required")
    outputs = graph.get_output_jsonschema()["properties"]
    assert {"answer", "citations", "documents", "trace", "refused"} <= set(outputs)
    assert not {"tried_queries", "search_filters", "chat", "reply_id", "question", "filters"} & set(outputs)
    assert set(graph.get_context_jsonschema()["properties"]) == {"k", "max_retries", "relax_filters"}
    tool = graph.as_tool(name=f"rag_{name}", description="Answer from the documents with citations.")
    out = tool.invoke({"question": QUESTION, "filters": None, "messages": []})
    assert "Mount Fuji is the highest mountain in Japan." in out["answer"]
    simple_tool = graph.as_tool(name=f"ask_{name}", description="Ask.", arg_types={"question": str})
    assert set(simple_tool.args) == {"question"}
    assert simple_tool.invoke({"question": QUESTION})["citations"][0]["doc_id"] in ("d1", "d4")


def test_output_schema_keeps_internal_keys_internal(retriever):
    out = build_corrective_rag(retriever).invoke({"question": QUESTION, "filters": {"lang": "en"}})
    assert {"answer", "citations", "documents", "trace", "refused", "retries", "filters_dropped",
            "dropped_filters"} <= set(out)
    assert not {"tried_queries", "search_filters", "chat", "reply_id", "question", "filters", "k",
                "relax_filters"} & set(out)
    assert not out.get("messages")  # a question in, no chat messages out


def test_per_run_k_and_max_retries_from_context_or_configurable():
    # no RESTRICTED chunk here: the contract would ask again for 4k when one is gated from k (tested elsewhere)
    spy = RecordingRetriever(secret=False)
    graph = build_corrective_rag(spy, graders=Graders.constant("no"), k=3, max_retries=2, relax_filters=True)
    inputs = {"question": QUESTION, "filters": {"lang": "en"}}
    final = graph.invoke(inputs)
    assert spy.ks == [3, 3, 3] and final["retries"] == 2  # the builder's values
    spy.ks.clear()
    final = graph.invoke(inputs, context={"k": 2, "max_retries": 1})
    assert spy.ks == [2, 2] and final["retries"] == 1
    spy.ks.clear()
    final = graph.invoke(inputs, {"configurable": {"k": 1, "max_retries": 0}})
    assert spy.ks == [1] and final["retries"] == 0 and final["refused"] is True
    with pytest.raises(ValueError, match="exceeds the graph's max_retries=2"):
        graph.invoke({"question": QUESTION}, context={"max_retries": 5})
    with pytest.raises(ValueError, match=r"k must be an int >= 1 or None, got 0"):
        graph.invoke({"question": QUESTION}, context={"k": 0})


def test_graph_builders_take_no_closures_and_nodes_are_module_level(retriever):
    import functools
    import inspect

    graph = build_self_rag(retriever, compressors=[LostInTheMiddleReorder()])
    for name, node in graph.builder.nodes.items():
        func = node.runnable.func if hasattr(node.runnable, "func") else None
        target = func.func if isinstance(func, functools.partial) else func
        assert target is not None and "<locals>" not in target.__qualname__, name
        assert inspect.getdoc(target), name


# -- compressors= ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("build", [build_simple_rag, build_corrective_rag, build_adaptive_rag, build_self_rag])
def test_compressors_run_after_the_gate_and_before_grading_and_are_gated_again(build):
    spy = SpyCompressor(inject=True)
    graph = build(RecordingRetriever(), compressors=[LostInTheMiddleReorder(), spy])
    final = graph.invoke({"question": QUESTION})
    assert spy.seen and all("SECRETMARK" not in text for seen in spy.seen for text in seen)  # after the gate
    assert "SECRETMARK" not in repr(final)  # what it re-introduced was gated again
    compress = [t for t in final["trace"] if t["step"] == "compress"][0]
    assert compress["compressors"][0]["compressor"] == "LostInTheMiddleReorder"
    assert compress["compressors"][1] == {"compressor": "SpyCompressor", "in": len(spy.seen[0]),
                                          "out": len(spy.seen[0])}  # dropped one, added the secret
    assert compress["restricted_dropped"] == 1 and compress["kept"] == len(spy.seen[0]) - 1
    steps = [t["step"] for t in final["trace"]]
    assert steps.index("restricted_gate") < steps.index("compress") < steps.index("grade_documents")
    assert final["refused"] is False and "Mount Fuji" in final["answer"]


def test_a_compressor_that_drops_a_document_is_seen_in_the_trace_and_the_grading(retriever):
    spy = SpyCompressor()
    final = build_corrective_rag(retriever, compressors=[spy]).invoke({"question": QUESTION})
    compress = next(t for t in final["trace"] if t["step"] == "compress")
    grade = next(t for t in final["trace"] if t["step"] == "grade_documents")
    # BM25 finds 2: the Eiffel Tower chunk shares only stop words with the question, which BM25 no longer indexes
    assert compress["compressors"] == [{"compressor": "SpyCompressor", "in": 2, "out": 1}]
    assert grade["graded"] == 1


def test_mmr_compressor_in_a_graph_changes_what_is_graded(retriever):
    mmr = MMRCompressor(k=2)
    final = build_corrective_rag(retriever, compressors=[mmr]).invoke({"question": QUESTION})
    assert next(t for t in final["trace"] if t["step"] == "grade_documents")["graded"] == 2
    assert final["refused"] is False


def test_without_compressors_the_graph_is_unchanged(retriever):
    graph = build_corrective_rag(retriever)
    assert "compress" not in graph.builder.nodes
    assert build_corrective_rag(retriever, compressors=[]).invoke({"question": QUESTION}) == graph.invoke(
        {"question": QUESTION}
    )


def test_adaptive_sub_questions_run_the_compressors(retriever):
    spy = SpyCompressor()
    final = build_adaptive_rag(retriever, compressors=[spy]).invoke(
        {"question": "Which is the highest mountain in Japan? Where is the Eiffel Tower?"}
    )
    assert final["route"] == "decompose" and len(spy.seen) == 2
    branches = [t for t in final["trace"] if t["step"] == "answer_sub_question"]
    assert all(b["compressors"][0]["compressor"] == "SpyCompressor" for b in branches)


@pytest.mark.parametrize(
    ("build", "bound"),
    [(build_corrective_rag, corrective_rag_max_steps), (build_adaptive_rag, adaptive_rag_max_steps),
     (build_self_rag, self_rag_max_steps)],
)
def test_compress_bound_covers_the_worst_case(retriever, build, bound):
    graders = Graders(relevance=lambda q, d: "yes", support=lambda a, ds: "yes", usefulness=lambda q, a: "no") \
        if build is build_self_rag else Graders.constant("no")
    llm = SpyModel(replies=[f"mountain variant {i}" for i in range(40)])
    graph = build(retriever, llm, graders=graders, compressors=[LostInTheMiddleReorder()])
    steps = list(graph.stream({"question": QUESTION, "filters": {"lang": "en"}}, stream_mode="updates"))
    assert len(steps) <= bound(2, compress=True)
    assert steps[-1].get("refuse") is not None


def test_bad_compressors_are_refused(retriever):
    with pytest.raises(TypeError):
        build_corrective_rag(retriever, compressors=LostInTheMiddleReorder())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        build_self_rag(retriever, compressors=["reorder"])  # type: ignore[list-item]


# -- one-call grading -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("reply", "n", "expected"),
    [
        ('{"1": "yes", "2": "no", "3": "yes"}', 3, ["yes", "no", "yes"]),
        ('```json\n{"[1]": true, "[2]": false}\n```', 2, ["yes", "no"]),
        ('<think>1 fits</think>{"relevant": [2]}', 3, ["no", "yes", "no"]),
        ('{"grades": [{"id": 2, "binary_score": "yes"}, {"id": 1, "binary_score": "no"}]}', 2, ["no", "yes"]),
        ('["yes", "no"]', 2, ["yes", "no"]),
        ("[1, 0, 1]", 3, ["yes", "no", "yes"]),
        ("[1, 3]", 3, ["yes", "no", "yes"]),
        ("1. yes\n2. no\n3. はい", 3, ["yes", "no", "yes"]),
        ("[1] relevant\n[2] not relevant", 2, ["yes", "no"]),
        ("Passage 1: yes, Passage 2: no", 2, ["yes", "no"]),
        ("Relevant: 1, 3", 3, ["yes", "no", "yes"]),
        ("Relevant: none", 2, ["no", "no"]),
        ("yes\nno", 2, ["yes", "no"]),
        ("yes", 1, ["yes"]),
        ('{"1": "yes"}', 3, ["yes", "unknown", "unknown"]),  # partial: the rest is asked one by one
        ('{"1": "yes", "7": "no"}', 2, ["yes", "unknown"]),  # out of range ignored
        ("1: yes\n1: no\n2: yes", 2, ["unknown", "yes"]),  # contradictory
        ("I cannot tell.", 2, ["unknown", "unknown"]),
        ("", 2, ["unknown", "unknown"]),
        (None, 2, ["unknown", "unknown"]),
    ],
)
def test_parse_batch_relevance(reply, n, expected):
    assert parse_batch_relevance(reply, n) == expected
    assert parse_batch_relevance(AIMessage(content=reply or ""), n) == (expected if reply else ["unknown"] * n)


def test_parse_batch_relevance_never_raises():
    for junk in (object(), {"a": object()}, [[[[]]]], '{"1": ', 12, b"yes"):
        assert parse_batch_relevance(junk, 2) in (["unknown", "unknown"], ["yes", "no"], ["no", "no"])
    assert parse_batch_relevance("yes", 0) == []


def test_the_common_corrective_path_makes_two_llm_calls(retriever):
    llm = SpyModel(replies=['{"1": "yes", "2": "no"}', "Mount Fuji [1]."])
    final = build_corrective_rag(retriever, llm).invoke({"question": QUESTION})
    assert len(llm.prompts) == 2  # one grades both passages BM25 found (d1, d4), one answers
    assert "Grade passages 1 to 2." in llm.prompts[0]
    assert final["answer"] == "Mount Fuji [1]." and final["refused"] is False
    assert next(t for t in final["trace"] if t["step"] == "grade_documents")["relevant"] == 1


def test_fake_list_chat_model_counts(retriever):
    llm = FakeListChatModel(responses=["1. yes\n2. no", "Mount Fuji [1]."])
    final = build_corrective_rag(retriever, llm).invoke({"question": QUESTION})
    assert llm.i == 0  # both responses used, the list wrapped around exactly once
    assert final["answer"] == "Mount Fuji [1]."


def test_an_unusable_batch_answer_falls_back_to_one_call_per_document(retriever):
    llm = SpyModel(replies=["I am not sure.", "yes", "no", "Mount Fuji [1]."])
    final = build_corrective_rag(retriever, llm).invoke({"question": QUESTION})
    assert len(llm.prompts) == 1 + 2 + 1
    assert sum("Grade passages" in p for p in llm.prompts) == 1
    assert final["answer"] == "Mount Fuji [1]."
    # a partial answer asks only about the passages it left out
    llm = SpyModel(replies=['{"1": "yes"}', "no", "Mount Fuji [1]."])
    build_corrective_rag(retriever, llm).invoke({"question": QUESTION})
    assert len(llm.prompts) == 1 + 1 + 1


def test_a_failing_batch_call_falls_back_too(retriever):
    class Flaky(SpyModel):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:  # type: ignore[no-untyped-def]
            if "Grade passages" in str(messages[-1].content):
                self.prompts.append("batch")
                raise ConnectionError("down")
            return super()._generate(messages, stop, run_manager, **kwargs)

    llm = Flaky(replies=["yes", "Mount Fuji [1]."])
    final = build_corrective_rag(retriever, llm).invoke({"question": QUESTION})
    assert llm.prompts[0] == "batch" and len(llm.prompts) == 1 + 2 + 1
    assert final["refused"] is False


def test_batch_grading_can_be_switched_off_and_the_lexical_path_makes_no_call(retriever):
    llm = SpyModel(replies=["yes", "Mount Fuji [1]."])
    graders = make_graders(llm, batch=False)
    build_corrective_rag(retriever, llm, graders=graders).invoke({"question": QUESTION})
    assert len(llm.prompts) == 2 + 1
    assert Graders.lexical().relevance_batch is None


def test_restricted_text_never_reaches_the_batch_prompt():
    llm = SpyModel(replies=["yes", "Mount Fuji [1]."])
    for build in (build_simple_rag, build_corrective_rag, build_adaptive_rag, build_self_rag):
        build(RecordingRetriever(), llm).invoke({"question": QUESTION})
    graders = make_graders(llm)
    assert graders.relevant_many(QUESTION, [SECRET, DOCS[0]])[0] == "no"
    assert llm.prompts and not any("SECRETMARK" in p for p in llm.prompts)


def test_grader_rewrite_and_routing_calls_are_tagged_nostream(retriever):
    llm = SpyModel(replies=["decompose", "highest mountain?\nmountain in Japan?", "no"])
    build_adaptive_rag(retriever, llm).invoke({"question": QUESTION})
    assert llm.tags_seen and all("nostream" in tags for tags in llm.tags_seen)


# -- prompts --------------------------------------------------------------------------------------------------------
def test_prompts_are_overridable_and_checked(retriever):
    mine = ChatPromptTemplate.from_messages([("system", "REWRITE-ME"), ("human", "{question} / {tried}")])
    llm = SpyModel(replies=["no"])
    build_corrective_rag(retriever, llm, prompts=GraphPrompts().replace(rewrite=mine), max_retries=1).invoke(
        {"question": QUESTION}
    )
    assert any(p.startswith("REWRITE-ME") for p in llm.prompts)
    with pytest.raises(ValueError, match="variables"):
        GraphPrompts().replace(rewrite=ChatPromptTemplate.from_messages([("human", "{query}")]))
    with pytest.raises(TypeError, match="unknown prompt"):
        GraphPrompts().replace(rewrit=mine)
    with pytest.raises(TypeError):
        build_corrective_rag(retriever, prompts={"rewrite": mine})  # type: ignore[arg-type]


# -- chat-state graphs ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(GRAPH_BUILDERS))
def test_a_graph_is_a_node_of_a_messages_state_app(retriever, name):
    app_builder = StateGraph(MessagesState)
    app_builder.add_node("rag", GRAPH_BUILDERS[name](retriever))
    app_builder.add_edge(START, "rag")
    app_builder.add_edge("rag", END)
    app = app_builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": name}}
    out = app.invoke({"messages": [HumanMessage(QUESTION)]}, config)
    assert [m.type for m in out["messages"]] == ["human", "ai"]
    assert "Mount Fuji is the highest mountain in Japan." in out["messages"][-1].content
    out = app.invoke({"messages": [HumanMessage("Where is the Eiffel Tower?")]}, config)
    assert [m.type for m in out["messages"]] == ["human", "ai", "human", "ai"]
    assert "Paris" in out["messages"][-1].content


def test_chat_input_directly_and_question_with_messages_is_an_error(retriever):
    graph = build_corrective_rag(retriever)
    out = graph.invoke({"messages": [HumanMessage("Where is the Eiffel Tower?"), AIMessage("…"),
                                     HumanMessage(QUESTION)]})
    assert out["original_query"] == QUESTION
    assert out["messages"][-1].type == "ai" and out["messages"][-1].content == out["answer"]
    with pytest.raises(ValueError, match="both 'question' and 'messages'"):  # which one is the question: a guess
        graph.invoke({"question": "Where is the Eiffel Tower?", "messages": [HumanMessage(QUESTION)]})
    with pytest.raises(ValueError, match="human message"):
        graph.invoke({"messages": [AIMessage("hi")]})


def test_self_rag_chat_state_holds_one_reply_per_turn(retriever):
    unsupported = Graders(relevance=lambda q, d: "yes", support=lambda a, ds: "no", usefulness=lambda q, a: "yes")
    out = build_self_rag(retriever, graders=unsupported).invoke({"messages": [HumanMessage(QUESTION)]})
    assert [m.type for m in out["messages"]] == ["human", "ai"]
    assert out["messages"][-1].content == out["answer"] and out["refused"] is True


def test_stream_messages_carries_only_the_answer_tokens(retriever):
    llm = GenericFakeChatModel(messages=iter([
        AIMessage(content='{"1": "yes", "2": "no", "3": "no", "4": "no"}'),
        AIMessage(content="Mount Fuji is the highest [1]."),
    ]))
    graph = build_corrective_rag(retriever, llm)
    streamed = list(graph.stream({"messages": [HumanMessage(QUESTION)]}, stream_mode="messages"))
    assert streamed and all(isinstance(m, AIMessageChunk) for m, _ in streamed)
    assert {meta["langgraph_node"] for _, meta in streamed} == {"generate"}
    assert "".join(str(m.content) for m, _ in streamed) == "Mount Fuji is the highest [1]."


def test_stream_messages_without_an_llm_carries_the_extractive_answer_once(retriever):
    graph = build_corrective_rag(retriever)
    streamed = list(graph.stream({"messages": [HumanMessage(QUESTION)]}, stream_mode="messages"))
    assert len(streamed) == 1 and "Mount Fuji is the highest mountain in Japan." in streamed[0][0].content


@pytest.mark.parametrize("name", ["corrective", "adaptive", "self_rag", "simple"])
def test_filters_apply_to_the_run_that_passed_them(retriever, name):
    graph = GRAPH_BUILDERS[name](retriever, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": f"filters-{name}"}}
    kw = {} if name == "simple" else {}
    first = graph.invoke({"question": "Where is the Eiffel Tower?", "filters": {"lang": "ja"}}, config, **kw)
    assert first["trace"][0] == {"step": "prepare", "filters": True}
    second = graph.invoke({"question": "Where is the Eiffel Tower?"}, config)
    assert second["trace"][0] == {"step": "prepare", "filters": False}
    assert second["refused"] is False and "Paris" in second["answer"]  # before: the ja filter carried over
    assert graph.get_state(config).values.get("filters") is None
    # chat turns on one thread: the second turn has no filter either
    chat = GRAPH_BUILDERS[name](retriever, checkpointer=InMemorySaver())
    chat.invoke({"messages": [HumanMessage(QUESTION)], "filters": {"lang": "ja"}}, config)
    again = chat.invoke({"messages": [HumanMessage("Where is the Eiffel Tower?")]}, config)
    assert again["trace"][0]["filters"] is False and "Paris" in again["answer"]
    assert [m.type for m in again["messages"]] == ["human", "ai", "human", "ai"]


# -- input keys (trial 16b: {"filter": ...} was dropped silently and the run had no filter) -------------------------
@pytest.mark.parametrize("name", list(GRAPH_BUILDERS))
@pytest.mark.parametrize(
    ("inputs", "match"),
    [
        ({"question": QUESTION, "filter": {"lang": "ja"}}, r"'filter' \(did you mean 'filters'\?\)"),
        ({"questions": QUESTION}, r"'questions' \(did you mean 'question'\?\)"),
        ({"question": QUESTION, "top_k": 3}, r"unexpected input key 'top_k'"),
        ({"question": QUESTION, "messages": [HumanMessage(QUESTION)]}, "both 'question' and 'messages'"),
    ],
)
def test_an_unknown_input_key_or_two_questions_is_an_error(retriever, name, inputs, match):
    graph = GRAPH_BUILDERS[name](retriever, checkpointer=InMemorySaver())
    with pytest.raises(ValueError, match=match):
        graph.invoke(inputs, {"configurable": {"thread_id": "t"}})
    with pytest.raises(ValueError, match=match):
        asyncio.run(graph.ainvoke(inputs, {"configurable": {"thread_id": "a"}}))
    with pytest.raises(ValueError, match=match):
        list(graph.stream(inputs, {"configurable": {"thread_id": "s"}}, stream_mode="updates"))


@pytest.mark.parametrize("name", list(GRAPH_BUILDERS))
def test_known_input_keys_still_work_also_on_a_checkpointed_thread(retriever, name):
    graph = GRAPH_BUILDERS[name](retriever, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    out = graph.invoke({"question": QUESTION, "filters": {"doc_id": {"$in": ["d1", "d4"]}}}, config)
    assert "Mount Fuji is the highest mountain in Japan." in out["answer"]
    out = graph.invoke({"messages": [HumanMessage(QUESTION)]}, config)  # a question earlier on the thread: fine
    assert out["messages"][-1].type == "ai" and out["messages"][-1].content == out["answer"]
    out = graph.invoke({"question": QUESTION, "filters": None, "messages": []}, config)  # as_tool's full form
    assert "Mount Fuji is the highest mountain in Japan." in out["answer"]


@pytest.mark.parametrize("name", list(GRAPH_BUILDERS))
def test_as_a_subgraph_the_parents_other_keys_are_ignored_but_a_misspelt_filter_is_not(retriever, name):
    class ParentState(MessagesState):
        summary: str

    app = StateGraph(ParentState)
    app.add_node("rag", GRAPH_BUILDERS[name](retriever))
    app.add_edge(START, "rag")
    out = app.compile(checkpointer=InMemorySaver()).invoke(
        {"messages": [HumanMessage(QUESTION)], "summary": "earlier turns"}, {"configurable": {"thread_id": "p"}}
    )
    assert "Mount Fuji is the highest mountain in Japan." in out["messages"][-1].content

    class FilterState(MessagesState):
        filter: dict[str, Any]

    app2 = StateGraph(FilterState)
    app2.add_node("rag", GRAPH_BUILDERS[name](retriever))
    app2.add_edge(START, "rag")
    with pytest.raises(ValueError, match="did you mean 'filters'"):
        app2.compile().invoke({"messages": [HumanMessage(QUESTION)], "filter": {"lang": "ja"}})
