"""Property: no RESTRICTED text reaches a prompt or leaves a graph or the answer chain, ever.

Hypothesis builds small corpora of Japanese/English words with a random subset labelled RESTRICTED (in random
case / width / whitespace variants), each restricted chunk holding a unique marker.  The retriever is BM25 over the
*unlabelled* texts, mapped back to the labelled documents — so it returns restricted chunks like any others, and
only the graphs' own gate stands between them and the model.  A spy chat model records every message it gets and
answers with "yes [1]" (a relevance "yes", a support "yes", an answer citing passage 1; for the one-call batch
grader, a usable verdict with one passage and an unusable one — so the per-document fallback runs — with more).
Graphs are also built with a hostile compressor that adds every RESTRICTED chunk back (the gate after the
compressors must remove them), and asked through a chat state (``{"messages": [...]}``) as well as a question.
"""

from collections.abc import Sequence
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.callbacks import CallbackManagerForRetrieverRun, Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field

from langchain_ragspine.chains import make_answer_chain
from langchain_ragspine.document_compressors.restricted import is_restricted
from langchain_ragspine.graphs import (
    build_adaptive_rag,
    build_corrective_rag,
    build_self_rag,
    build_simple_rag,
)
from langchain_ragspine.retrievers import BM25Retriever

WORDS = [
    "梅雨", "北海道", "小笠原", "検索", "文書", "東京", "天気", "graph", "store", "search", "mountain", "Japan", "river",
    "policy", "budget", "tower", "雨季", "台風", "index", "chunk",
]
RESTRICTED_LABELS = ["RESTRICTED", "restricted", " Restricted ", "ＲＥＳＴＲＩＣＴＥＤ", "ｒｅｓｔｒｉｃｔｅｄ\n", "RESTRICTED\u200b"]
OTHER_LABELS = ["PUBLIC", "INTERNAL", "CONFIDENTIAL", None]


class SpyChatModel(BaseChatModel):
    reply: str = "yes [1]"
    prompts: list[str] = Field(default_factory=list)

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:  # type: ignore[no-untyped-def]
        self.prompts.append("\n".join(str(m.content) for m in messages))
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=self.reply))])

    @property
    def _llm_type(self) -> str:
        return "spy"


class RawBM25Retriever(BaseRetriever):
    """BM25 ranking over every document, RESTRICTED ones included (BM25Retriever would drop them when built), plus
    every RESTRICTED chunk appended to each result, so that the graphs' own gate is exercised on every call."""

    docs: list[Document]
    model_config = ConfigDict(arbitrary_types_allowed=True)
    _bm25: Any = None

    def model_post_init(self, context: Any, /) -> None:
        unlabelled = [
            Document(page_content=d.page_content, metadata={k: v for k, v in d.metadata.items() if k != "sensitivity"})
            for d in self.docs
        ]
        self._bm25 = BM25Retriever.from_documents(unlabelled, k=8)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, filter: dict | None = None, k: int | None = None
    ) -> list[Document]:
        by_id = {d.metadata["chunk_id"]: d for d in self.docs}
        hits = [by_id[d.metadata["chunk_id"]] for d in self._bm25.invoke(query, filter=filter)]
        # hostile on purpose: every restricted chunk comes along, matching or not, filtered or not
        return hits + [d for d in self.docs if is_restricted(d) and d not in hits]


class HostileCompressor(BaseDocumentCompressor):
    """Reverses the documents and appends every RESTRICTED chunk of the corpus (a compressor must never be trusted)."""

    docs: list[Document]

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        return [*reversed(list(documents)), *(d for d in self.docs if is_restricted(d))]


@st.composite
def corpora(draw: st.DrawFn) -> tuple[list[Document], list[str], str, dict | None]:
    n = draw(st.integers(5, 15))
    restricted = draw(st.lists(st.booleans(), min_size=n, max_size=n).filter(any))
    docs, markers = [], []
    for i, secret in enumerate(restricted):
        words = draw(st.lists(st.sampled_from(WORDS), min_size=3, max_size=12))
        text = " ".join(words)
        if secret:
            marker = f"LEAKMARK{i:02d}秘密"
            markers.append(marker)
            text = f"{marker} {text} {marker}。"
            label = draw(st.sampled_from(RESTRICTED_LABELS))
        else:
            label = draw(st.sampled_from(OTHER_LABELS))
        md = {"chunk_id": f"c{i}#0", "doc_id": f"c{i}", "title": f"title {i}", "source_locator": f"c{i}.md#0-9",
              "lang": draw(st.sampled_from(["ja", "en"]))}
        if label is not None:
            md["sensitivity"] = label
        docs.append(Document(page_content=text, metadata=md))
    question = " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4))) + "?"
    filters = draw(st.sampled_from([None, {"lang": "ja"}, {"lang": "en"}]))
    return docs, markers, question, filters


def _assert_clean(markers: list[str], *texts: Any) -> None:
    for text in texts:
        blob = repr(text)
        for marker in markers:
            assert marker not in blob


BUILDERS = [build_simple_rag, build_corrective_rag, build_adaptive_rag, build_self_rag]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(corpora(), st.booleans(), st.booleans(), st.booleans())
def test_no_restricted_text_reaches_a_prompt_or_leaves_a_graph(case, with_llm, hostile, chat):
    docs, markers, question, filters = case
    retriever = RawBM25Retriever(docs=docs)
    assert any(is_restricted(d) for d in retriever.invoke(question, filter=filters))
    for build in BUILDERS:
        spy = SpyChatModel()
        compressors = [HostileCompressor(docs=docs)] if hostile else None
        graph = build(retriever, spy if with_llm else None, compressors=compressors)
        inputs: dict[str, Any] = (
            {"messages": [HumanMessage(question)], "filters": filters} if chat else {"question": question, "filters": filters}
        )
        streamed: list[Any] = []
        final: dict[str, Any] = {}
        for mode, chunk in graph.stream(inputs, stream_mode=["updates", "values"]):
            streamed.append(chunk)
            if mode == "values":
                final = chunk
        _assert_clean(markers, *spy.prompts)
        _assert_clean(markers, streamed)  # every intermediate update and state, not only the final one
        _assert_clean(markers, final.get("answer"), final.get("citations"), final.get("documents"), final.get("trace"))
        _assert_clean(markers, final.get("messages"))
        assert not any(is_restricted(d) for d in final.get("documents") or [])
        assert final.get("answer")


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(corpora(), st.booleans(), st.sampled_from(["それはなぜですか？", "为什么？", "Why is that?"]))
def test_no_restricted_text_reaches_a_prompt_through_a_conversation(case, with_llm, follow_up):
    """Multi-turn threads on a checkpointer: the follow-up is condensed (with the spy, a model call whose prompt
    holds the conversation) and answered with the history in its prompt; the earlier turns' replies were gated, so
    neither the condense prompt, the answer prompt, the custom progress events nor the thread's state hold a
    marker."""
    from langgraph.checkpoint.memory import InMemorySaver

    docs, markers, question, filters = case
    retriever = RawBM25Retriever(docs=docs)
    for build in BUILDERS:
        spy = SpyChatModel()
        graph = build(retriever, spy if with_llm else None, checkpointer=InMemorySaver())
        config = {"configurable": {"thread_id": "t"}}
        streamed: list[Any] = []
        for text in (question, follow_up):
            streamed += list(graph.stream({"messages": [HumanMessage(text)], "filters": filters}, config,
                                          stream_mode=["updates", "values", "custom"]))
        state = graph.get_state(config).values
        _assert_clean(markers, *spy.prompts)
        _assert_clean(markers, streamed, state.get("messages"), state.get("trace"))
        assert any(t["step"] == "condense_question" for t in state["trace"])
        assert not with_llm or any("Conversation:" in p for p in spy.prompts)


@settings(max_examples=25, deadline=None)
@given(corpora())
def test_the_answer_chain_never_passes_restricted_text(case):
    docs, markers, question, _ = case
    spy = SpyChatModel()
    # a reply without markers is cited by attribution: that path must never cite a restricted chunk either
    unmarked = SpyChatModel(reply=question.rstrip("?") + ".")
    chains = (make_answer_chain(spy), make_answer_chain(spy, lost_in_the_middle=True), make_answer_chain(),
              make_answer_chain(unmarked, uncited="warn"))
    for chain in chains:
        out = chain.invoke({"question": question, "documents": docs})
        _assert_clean(markers, out, *spy.prompts, *unmarked.prompts)
        assert all(c["chunk_id"] in {d.metadata["chunk_id"] for d in docs if not is_restricted(d)} for c in out["citations"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(corpora(), st.sampled_from(["[1] > [2] > [3]", "[3] > [1]", "nonsense", "<think>[2]</think>[2] > [1]"]))
def test_the_listwise_reranker_never_sends_restricted_text(case, reply):
    from langchain_classic.retrievers import ContextualCompressionRetriever

    from langchain_ragspine.document_compressors import LLMListwiseReranker, gated_pipeline

    docs, markers, question, filters = case
    retriever = RawBM25Retriever(docs=docs)
    candidates = retriever.invoke(question, filter=filters)
    assert any(is_restricted(d) for d in candidates)
    spy = SpyChatModel(reply=reply)
    reranker = LLMListwiseReranker(llm=spy, k=None)
    # directly on hostile input (no gate in front): the reranker gates itself
    direct = reranker.compress_documents(candidates, question)
    # and behind the gate, as a pipeline and as a ContextualCompressionRetriever
    piped = gated_pipeline([reranker]).compress_documents(candidates, question)
    wrapped = ContextualCompressionRetriever(base_compressor=reranker, base_retriever=retriever).invoke(question)
    _assert_clean(markers, *spy.prompts)
    for out in (direct, piped, wrapped):
        _assert_clean(markers, out)
        assert not any(is_restricted(d) for d in out)
    open_ids = sorted(d.metadata["chunk_id"] for d in candidates if not is_restricted(d))
    assert sorted(d.metadata["chunk_id"] for d in direct) == open_ids  # nothing open is lost either
    assert len(open_ids) < 2 or len(spy.prompts) >= 2  # with two open candidates the model was asked
