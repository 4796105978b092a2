"""The LangGraph builders: bounds whatever the graders say, CRAG's correction order, Self-RAG's reasons, adaptive
routing and merging, reducers, streaming, checkpointing, filters, and the jsquad answer without an LLM."""

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.retrievers import BaseRetriever
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.errors import GraphRecursionError
from pydantic import Field

from langchain_ragspine.graphs import (
    SIMPLE_RAG_MAX_STEPS,
    Graders,
    adaptive_rag_max_steps,
    build_adaptive_rag,
    build_corrective_rag,
    build_self_rag,
    build_simple_rag,
    corrective_rag_max_steps,
    merge_documents,
    self_rag_max_steps,
)
from langchain_ragspine.graphs.adaptive import adaptive_rag_max_llm_calls, merge_sub_answers_text
from langchain_ragspine.graphs.nodes import restricted_gate
from langchain_ragspine.graphs.state import append_trace, merge_sub_answers, replace
from langchain_ragspine.retrievers import BM25Retriever


def _doc(i: int, text: str, lang: str = "en", sensitivity: str = "PUBLIC") -> Document:
    return Document(
        page_content=text,
        metadata={
            "chunk_id": f"d{i}#0", "doc_id": f"d{i}", "title": f"T{i}", "source_locator": f"d{i}.md#0-{len(text)}",
            "lang": lang, "sensitivity": sensitivity,
        },
    )


DOCS = [
    _doc(1, "Mount Fuji is the highest mountain in Japan. It is 3776 metres tall."),
    _doc(2, "The Eiffel Tower is in Paris. It was completed in 1889."),
    _doc(3, "梅雨は北海道と小笠原諸島を除く日本でみられる。梅雨は雨季の一種である。", lang="ja"),
    _doc(4, "Mount Fuji last erupted in 1707. The highest mountain in Japan is a volcano.", lang="de"),
]
QUESTION = "Which is the highest mountain in Japan?"


@pytest.fixture(scope="module")
def retriever() -> BM25Retriever:
    return BM25Retriever.from_documents(DOCS, k=4)


def _kind(system: str) -> str:
    s = system.lower()
    for key, kind in (
        ("retrieved passage is relevant", "relevance"), ("is supported by the numbered", "support"),
        ("answer resolves a question", "usefulness"), ("better search query", "rewrite"),
        ("classify the question", "classify"), ("split the question", "decompose"),
        ("numbered context passages", "answer"), ("small talk", "small_talk"),
    ):
        if key in s:
            return kind
    return "other"


class ScriptedChatModel(BaseChatModel):
    """Answers by prompt kind: ``script(kind, human_text, call_number) -> reply``; records every call."""

    script: Callable[[str, str, int], str]
    calls: list[tuple[str, str]] = Field(default_factory=list)

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:  # type: ignore[no-untyped-def]
        system = " ".join(str(m.content) for m in messages if m.type == "system")
        human = "\n".join(str(m.content) for m in messages if m.type != "system")
        kind = _kind(system)
        self.calls.append((kind, human))
        reply = self.script(kind, human, sum(1 for k, _ in self.calls if k == kind))
        if isinstance(reply, Exception):
            raise reply
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=reply))])

    @property
    def _llm_type(self) -> str:
        return "scripted"


def _steps(graph: Any, inputs: dict[str, Any], **config: Any) -> tuple[list[str], dict[str, Any]]:
    """Node names in the order they ran (one per superstep here), and the final state."""
    names: list[str] = []
    final: dict[str, Any] = {}
    for mode, chunk in graph.stream(inputs, config or None, stream_mode=["updates", "values"]):
        if mode == "updates":
            names.extend(chunk)
        else:
            final = chunk
    return names, final


BUILDERS = {
    "simple": (build_simple_rag, lambda r: SIMPLE_RAG_MAX_STEPS),
    "corrective": (build_corrective_rag, corrective_rag_max_steps),
    "adaptive": (build_adaptive_rag, adaptive_rag_max_steps),
    "self_rag": (build_self_rag, self_rag_max_steps),
}


def _assert_refusal(state: dict[str, Any]) -> None:
    assert state["refused"] is True
    assert "insufficient context" in state["answer"].lower()
    assert state["citations"] == [] and state["documents"] == []


# -- bounds ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(BUILDERS))
@pytest.mark.parametrize("how", ["stub_graders", "llm_says_no"])
def test_always_no_refuses_within_bound_even_with_a_huge_recursion_limit(retriever, name, how):
    build, bound = BUILDERS[name]
    if how == "stub_graders":
        graph = build(retriever, graders=Graders.constant("no"))
    else:
        graph = build(retriever, FakeListChatModel(responses=["no"]))
    inputs = {"question": QUESTION, "filters": {"lang": "en"}}
    names, final = _steps(graph, inputs, recursion_limit=10_000)
    _assert_refusal(final)
    assert len(names) <= bound(2)
    _assert_refusal(graph.invoke(inputs, {"recursion_limit": 10_000}))
    _assert_refusal(graph.invoke(inputs))  # the builder's own recursion_limit covers the bound


def test_crag_correction_order_is_drop_filters_then_rewrite_then_refuse(retriever):
    graph = build_corrective_rag(retriever, graders=Graders.constant("no"), relax_filters=True)
    names, final = _steps(graph, {"question": QUESTION, "filters": {"lang": "en"}}, recursion_limit=10_000)
    cycle = ["retrieve", "restricted_gate", "grade_documents"]
    assert names == ["prepare", *cycle, "drop_filters", *cycle, "rewrite_query", *cycle, "refuse"]
    assert final["original_query"] == QUESTION
    assert final["search_query"] == "highest mountain Japan"  # the deterministic rewrite
    assert final["filters"] is None and final["filters_dropped"] is True
    assert final["dropped_filters"] == {"lang": "en"}
    assert final["retries"] == 2
    assert [t["step"] for t in final["trace"]] == names
    # without filters: rewrite, then a second rewrite that repeats the first ends the loop early
    names, final = _steps(graph, {"question": QUESTION}, recursion_limit=10_000)
    assert [n for n in names if n not in cycle] == ["prepare", "rewrite_query", "rewrite_query", "refuse"]
    assert final["retry_reason"] == "rewrite_exhausted"
    # the default (relax_filters=False) never widens a filtered search
    for strict in (build_corrective_rag(retriever, graders=Graders.constant("no")),
                   build_corrective_rag(retriever, graders=Graders.constant("no"), relax_filters=False)):
        names, final = _steps(strict, {"question": QUESTION, "filters": {"lang": "en"}})
        assert [n for n in names if n not in cycle] == ["prepare", "rewrite_query", "rewrite_query", "refuse"]
        assert final["filters_dropped"] is False and final["dropped_filters"] is None


def _endless_rewrites(kind: str, human: str, n: int) -> str:
    return {"rewrite": f"mountain variant {n}", "classify": "decompose", "decompose": "highest mountain?"}.get(
        kind, "Mount Fuji [1]."
    )


def _failed_decomposition(kind: str, human: str, n: int) -> str:
    return {"classify": "decompose", "decompose": "highest mountain?\nmountain in Japan?"}.get(kind, "Mount Fuji [1].")


def _supersteps(names: list[str]) -> int:
    """Supersteps of a run: parallel ``answer_sub_question`` branches share one."""
    return sum(1 for i, n in enumerate(names) if not (n == "answer_sub_question" and names[i - 1] == n))


@pytest.mark.parametrize("max_retries", [0, 1, 2, 3])
@pytest.mark.parametrize("name", ["corrective", "adaptive", "self_rag"])
def test_worst_case_step_count_is_exact_and_suffices(retriever, name, max_retries):
    build, bound = BUILDERS[name]
    graders = (
        Graders(relevance=lambda q, d: "yes", support=lambda a, ds: "yes", usefulness=lambda q, a: "no")
        if name == "self_rag"
        else Graders.constant("no")
    )
    inputs = {"question": QUESTION, "filters": {"lang": "en"}}
    # the adaptive worst case is the single path with its corrections, or (max_retries=0) a decomposition that
    # answers nothing followed by its fallback
    script = _failed_decomposition if name == "adaptive" and max_retries == 0 else _endless_rewrites

    def graph() -> Any:
        return build(retriever, ScriptedChatModel(script=script), graders=graders, max_retries=max_retries)

    names, final = _steps(graph(), inputs, recursion_limit=10_000)
    assert _supersteps(names) == bound(max_retries)  # the worst case is reached …
    _assert_refusal(final)
    assert final["retries"] == max_retries
    graph().invoke(inputs, {"recursion_limit": bound(max_retries) + 1})  # … and this limit suffices
    with pytest.raises(GraphRecursionError):
        graph().invoke(inputs, {"recursion_limit": bound(max_retries)})


def test_simple_graph_has_no_loop(retriever):
    names, final = _steps(build_simple_rag(retriever, graders=Graders.constant("no")), {"question": QUESTION})
    assert names == ["prepare", "retrieve", "restricted_gate", "grade_documents", "refuse"]
    _assert_refusal(final)


def test_self_rag_records_the_reason(retriever):
    unsupported = Graders(relevance=lambda q, d: "yes", support=lambda a, ds: "no", usefulness=lambda q, a: "yes")
    names, final = _steps(build_self_rag(retriever, graders=unsupported), {"question": QUESTION})
    retries = [t for t in final["trace"] if t["step"] == "retry"]
    assert [(t["reason"], t["action"]) for t in retries] == [("unsupported", "regenerate")] * 2
    assert final["retry_reason"] == "unsupported"
    assert final["trace"][-1] == {"step": "refuse", "reason": "unsupported", "retries": 2}
    _assert_refusal(final)
    assert names.count("generate") == 3
    # not useful → rewrite and retrieve again
    useless = Graders(relevance=lambda q, d: "yes", support=lambda a, ds: "yes", usefulness=lambda q, a: "no")
    final = build_self_rag(retriever, graders=useless, max_retries=1).invoke({"question": QUESTION})
    assert [t.get("action") for t in final["trace"] if t["step"] == "retry"] == ["rewrite_query"]
    assert final["retry_reason"] == "not_useful"


# -- answers --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(BUILDERS))
def test_every_graph_answers_extractively_without_an_llm(retriever, name):
    final = BUILDERS[name][0](retriever).invoke({"question": QUESTION, "filters": None})
    assert final["refused"] is False
    assert "Mount Fuji is the highest mountain in Japan." in final["answer"]
    for c in final["citations"]:
        assert final["documents"][c["n"] - 1].metadata["chunk_id"] == c["chunk_id"]
    assert final["citations"][0]["doc_id"] in ("d1", "d4")


def test_llm_path_maps_citations_to_the_documents_given(retriever):
    def script(kind: str, human: str, n: int) -> str:
        return {"relevance": '{"binary_score": "yes"}', "answer": "Mount Fuji [1], see also [9]."}.get(kind, "yes")

    llm = ScriptedChatModel(script=script)
    final = build_corrective_rag(retriever, llm).invoke({"question": QUESTION})
    assert final["answer"] == "Mount Fuji [1], see also."
    assert final["mode"] == "llm"
    assert [c["n"] for c in final["citations"]] == [1]
    assert final["citations"][0]["chunk_id"] == final["documents"][0].metadata["chunk_id"]
    assert final["original_query"] == QUESTION


def test_llm_failure_in_generation_degrades_to_extractive(retriever):
    def script(kind: str, human: str, n: int) -> Any:
        return ConnectionError("down") if kind == "answer" else "yes"

    final = build_corrective_rag(retriever, ScriptedChatModel(script=script)).invoke({"question": QUESTION})
    assert final["mode"] == "extractive_fallback"
    assert "Mount Fuji is the highest mountain in Japan." in final["answer"]
    assert [t for t in final["trace"] if t["step"] == "generate"][0]["mode"] == "extractive_fallback"


def test_streaming_yields_node_names_in_order(retriever):
    graph = build_corrective_rag(retriever)
    updates = list(graph.stream({"question": QUESTION}, stream_mode="updates"))
    assert [next(iter(u)) for u in updates] == [
        "prepare", "retrieve", "restricted_gate", "grade_documents", "generate",
    ]


def test_adaptive_routes(retriever):
    graph = build_adaptive_rag(retriever)
    hello = graph.invoke({"question": "Hello!"})
    assert hello["route"] == "none"
    assert "No documents were used" in hello["answer"]
    assert hello["citations"] == [] and hello["documents"] == []
    assert "retrieve" not in [t["step"] for t in hello["trace"]]
    single = graph.invoke({"question": QUESTION})
    assert single["route"] == "single"


def test_adaptive_decomposes_in_parallel_and_merges_deterministically(retriever):
    graph = build_adaptive_rag(retriever)
    question = "Which is the highest mountain in Japan? Where is the Eiffel Tower?"
    names, final = _steps(graph, {"question": question})
    assert final["route"] == "decompose"
    assert final["sub_questions"] == ["Which is the highest mountain in Japan?", "Where is the Eiffel Tower?"]
    assert names.count("answer_sub_question") == 2
    assert len(names) <= adaptive_rag_max_steps(2) + 1  # the two branches share one superstep
    blocks = final["answer"].split("\n\n")
    assert blocks[0].startswith("Which is the highest mountain in Japan?\n")
    assert blocks[1].startswith("Where is the Eiffel Tower?\n")
    assert "Eiffel Tower is in Paris" in blocks[1]
    ids = [d.metadata["chunk_id"] for d in final["documents"]]
    assert len(ids) == len(set(ids))
    for c in final["citations"]:
        assert final["documents"][c["n"] - 1].metadata["chunk_id"] == c["chunk_id"]
        assert f"[{c['n']}]" in final["answer"]
    # the same question gives the same answer (deterministic merge)
    assert graph.invoke({"question": question})["answer"] == final["answer"]


def test_adaptive_llm_classification_and_unparsable_decomposition_fall_back(retriever):
    def script(kind: str, human: str, n: int) -> str:
        return {"classify": "<think>hmm</think>decompose", "decompose": "```\n1. Which is the highest mountain?\n"
                "2. Where is the Eiffel Tower?\n3. Is it in Japan?\n```"}.get(kind, "yes [1]")

    final = build_adaptive_rag(retriever, ScriptedChatModel(script=script)).invoke({"question": QUESTION})
    assert final["route"] == "decompose"
    # numbering and fences stripped; a sub-question sharing no word with the question is dropped
    assert final["sub_questions"] == ["Which is the highest mountain?", "Is it in Japan?"]
    # an LLM that says "none" for a real question is overruled: questions are answered from documents
    final = build_adaptive_rag(retriever, ScriptedChatModel(script=lambda k, h, n: "none")).invoke({"question": QUESTION})
    assert final["route"] == "single"


def test_misrouted_factoid_question_falls_back_to_answering_it_before_refusing(retriever):
    # the case: a one-entity question the model classifies as "decompose", three invented sub-questions
    # that all fail — before, the graph refused (after 23 LLM calls) while the corrective graph answered it
    invented = "Which mountain range has the highest volcano?\nHow was the highest mountain formed?\n" \
        "Who first climbed the highest mountain?"

    def script(kind: str, human: str, n: int) -> str:
        if kind == "relevance":  # only the original question finds a relevant passage
            return "yes" if human.endswith(f"Question: {QUESTION}") and "highest mountain in Japan." in human else "no"
        return {"classify": "decompose", "decompose": invented, "answer": "Mount Fuji [1]."}.get(kind, "no")

    llm = ScriptedChatModel(script=script)
    names, final = _steps(build_adaptive_rag(retriever, llm), {"question": QUESTION})
    assert final["route"] == "decompose" and len(final["sub_questions"]) == 3
    assert all(s["refused"] for s in final["sub_answers"])
    assert final["refused"] is False and final["answer"] == "Mount Fuji [1]."
    assert final["citations"][0]["doc_id"] == "d1" and final["citations"][0]["attributed"] is False
    assert final["fallbacks"] == 1
    assert {"step": "merge_answers", "answered": 0, "of": 3, "fallback": "single"} in final["trace"]
    assert names[-5:] == ["merge_answers", "retrieve", "restricted_gate", "grade_documents", "generate"]
    assert len(llm.calls) <= adaptive_rag_max_llm_calls(2, k=4)
    # the corrective graph answers the same question the same way
    corrective = build_corrective_rag(retriever, ScriptedChatModel(script=script)).invoke({"question": QUESTION})
    assert corrective["answer"] == final["answer"]


def test_the_fallback_is_one_plain_attempt_then_a_refusal(retriever):
    def script(kind: str, human: str, n: int) -> str:
        return {"classify": "decompose", "decompose": "highest mountain?\nmountain in Japan?"}.get(kind, "no")

    llm = ScriptedChatModel(script=script)
    names, final = _steps(build_adaptive_rag(retriever, llm), {"question": QUESTION, "filters": {"lang": "en"}})
    _assert_refusal(final)
    assert final["fallbacks"] == 1
    # no corrections (drop_filters / rewrite_query) after the fallback, one search of the original question
    assert names[-5:] == ["merge_answers", "retrieve", "restricted_gate", "grade_documents", "refuse"]
    assert [t["query"] for t in final["trace"] if t["step"] == "retrieve"] == [QUESTION]
    assert _supersteps(names) <= adaptive_rag_max_steps(2)
    assert len(llm.calls) <= adaptive_rag_max_llm_calls(2, k=4)


def test_llm_call_bound():
    assert adaptive_rag_max_llm_calls(2, k=6) == 30
    assert adaptive_rag_max_llm_calls(0, k=0) == 6
    with pytest.raises(ValueError):
        adaptive_rag_max_llm_calls(2, k=-1)


def test_merge_sub_answers_renumbers_and_dedupes():
    a, b, c = DOCS[0], DOCS[1], DOCS[3]
    subs = [
        {"index": 1, "question": "Q2", "answer": "B [2] and A [1]", "citations": [{"n": 2}, {"n": 1}],
         "documents": [a, b], "refused": False},
        {"index": 0, "question": "Q1", "answer": "C [1], A [2]", "citations": [{"n": 1}, {"n": 2}],
         "documents": [c, a], "refused": False},
    ]
    answer, citations, documents = merge_sub_answers_text(subs)  # type: ignore[arg-type]
    assert [d.metadata["chunk_id"] for d in documents] == ["d4#0", "d1#0", "d2#0"]
    assert answer == "Q1\nC [1], A [2]\n\nQ2\nB [3] and A [2]"
    assert [x["n"] for x in citations] == [1, 2, 3]


# -- state, reducers, filters, checkpointing --------------------------------------------------------------------------
def test_reducers():
    a, b, c = DOCS[0], DOCS[1], DOCS[2]
    assert merge_documents([a], [b, a, c]) == [a, b, c]
    assert merge_documents([a, b], replace([c, c])) == [c]
    assert merge_documents([a], None) == [a]
    assert merge_documents(None, a) == [a]
    nokey = Document(page_content="same")
    assert merge_documents([nokey], [Document(page_content="same")]) == [nokey, Document(page_content="same")]
    with pytest.raises(TypeError):
        merge_documents([], ["text"])
    assert append_trace([{"step": 1}], [{"step": 2}]) == [{"step": 1}, {"step": 2}]
    assert append_trace([{"step": 1}], replace([{"step": 0}])) == [{"step": 0}]
    merged = merge_sub_answers([{"index": 1, "x": 1}], [{"index": 0, "x": 0}, {"index": 1, "x": 2}])  # type: ignore[list-item]
    assert merged == [{"index": 0, "x": 0}, {"index": 1, "x": 2}]


def test_restricted_gate_node_drops_restricted_documents():
    docs = [DOCS[0], _doc(9, "TOPSECRET", sensitivity="ｒｅｓｔｒｉｃｔｅｄ"), DOCS[1]]
    update = restricted_gate({"documents": docs, "search_query": "q"})
    assert update["documents"] == replace([DOCS[0], DOCS[1]])
    assert update["trace"] == [{"step": "restricted_gate", "kept": 2, "dropped": 1}]


class ListRetriever(BaseRetriever):
    """Returns its documents as they are: no ``filter=`` keyword, no RESTRICTED gate."""

    docs: list[Document]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return list(self.docs)


def test_filters_are_applied_after_retrieval_when_the_retriever_cannot_take_them():
    graph = build_corrective_rag(ListRetriever(docs=DOCS), relax_filters=False)
    final = graph.invoke({"question": QUESTION, "filters": {"lang": "de"}})
    assert [d.metadata["lang"] for d in final["documents"]] == ["de"]
    assert final["trace"][1]["filter"] == "post"


def test_filters_go_to_our_retrievers(retriever):
    final = build_corrective_rag(retriever).invoke({"question": QUESTION, "filters": {"lang": "de"}})
    assert final["trace"][1]["filter"] == "retriever"
    assert {d.metadata["lang"] for d in final["documents"]} == {"de"}


def test_checkpointed_thread_starts_each_run_fresh(retriever):
    graph = build_self_rag(retriever, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}}
    first = graph.invoke({"question": QUESTION}, config)
    second = graph.invoke({"question": "Where is the Eiffel Tower?"}, config)
    assert first["citations"][0]["doc_id"] in ("d1", "d4")
    assert second["trace"][0]["step"] == "prepare" and second["trace"].count(second["trace"][0]) == 1
    assert [d.metadata["doc_id"] for d in second["documents"]][0] == "d2"
    assert graph.get_state(config).values["answer"] == second["answer"]


def test_bad_arguments(retriever):
    graph = build_corrective_rag(retriever)
    with pytest.raises(ValueError):
        graph.invoke({"question": "  "})
    with pytest.raises(ValueError):
        graph.invoke({"question": QUESTION, "filters": {"year": {"bogus_op": 1}}})
    with pytest.raises(ValueError):
        build_corrective_rag(retriever, max_retries=-1)
    with pytest.raises(TypeError):
        build_self_rag("not a retriever")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        build_adaptive_rag(retriever, graders="lexical")  # type: ignore[arg-type]


# -- the jsquad store -------------------------------------------------------------------------------------------------
DATA = Path(os.environ.get("RAGSPINE_DATA") or Path(__file__).resolve().parents[3].parent / "shared" / "data")
JSQUAD_DOCS = DATA / "jsquad-valid" / "docs"


@pytest.fixture(scope="module")
def jsquad_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not JSQUAD_DOCS.is_dir():
        pytest.skip(f"jsquad-valid data not found under {DATA} (set RAGSPINE_DATA)")
    from langchain_ragspine import ingest

    store = tmp_path_factory.mktemp("jsquad") / "store"
    ingest(JSQUAD_DOCS, store, embedding="none", mode="bm25")
    return store


@pytest.mark.shared_data
@pytest.mark.parametrize("build", [build_corrective_rag, build_simple_rag, build_self_rag, build_adaptive_rag])
def test_jsquad_tsuyu_question_is_answered_extractively(jsquad_store, build):
    from langchain_ragspine import open_retriever

    final = build(open_retriever(jsquad_store)).invoke({"question": "日本で梅雨がないのは北海道とどこか。"})
    assert final["refused"] is False
    assert "小笠原諸島" in final["answer"]
    assert "jsquad-valid-a0000" in {c["doc_id"] for c in final["citations"]}
    assert all(c["title"] == "梅雨" for c in final["citations"] if c["doc_id"] == "jsquad-valid-a0000")


@pytest.mark.shared_data
def test_jsquad_tsuyu_question_with_a_fake_chat_model(jsquad_store):
    from langchain_ragspine import open_retriever

    def script(kind: str, human: str, n: int) -> str:
        if kind == "relevance":
            return "yes" if "小笠原" in human or "北海道" in human else "no"
        return "小笠原諸島です [1]。" if kind == "answer" else "yes"

    final = build_corrective_rag(open_retriever(jsquad_store), ScriptedChatModel(script=script)).invoke(
        {"question": "日本で梅雨がないのは北海道とどこか。"}
    )
    assert final["answer"] == "小笠原諸島です [1]。"
    assert final["citations"][0]["doc_id"] == "jsquad-valid-a0000"
    assert final["documents"][0].metadata["chunk_id"] == final["citations"][0]["chunk_id"]
