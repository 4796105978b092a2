"""The RESTRICTED gate comes before the cut to ``k``, everywhere a list is cut (new-user trial of issue 14).

Over a plain retriever that returns four RESTRICTED chunks ahead of many public ones,
``MultiQueryRetriever(leaky, llm, k=4)`` returned one document: the retriever-call contract cut each list to ``k``
and the exit gate then dropped the RESTRICTED ones.  Now the contract gates first (and over-fetches a retriever that
takes ``k``), :func:`fuse` ranks without RESTRICTED documents, and BM25 / dense skip a label added after the build
before their own cut — so a retriever returns up to ``k`` non-RESTRICTED chunks whenever the candidates allow, and
never a RESTRICTED one.
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel
from langchain_core.retrievers import BaseRetriever
from pydantic import Field

from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.retrievers import (
    BM25Retriever,
    DecompositionRetriever,
    DenseRetriever,
    FilterExtractionRetriever,
    GlossaryRetriever,
    HybridRetriever,
    HyDERetriever,
    MultiIndexRetriever,
    MultiQueryRetriever,
    ParentChildRetriever,
    RAGFusionRetriever,
    StepBackRetriever,
    ainvoke_retriever,
    invoke_retriever,
)
from langchain_ragspine.retrievers.hybrid import fuse
from langchain_ragspine.sensitivity import is_restricted

# four RESTRICTED chunks, in several spellings of the label, ahead of ten public ones: all share the query's words
SECRETS = [
    Document(page_content="梅雨の秘密 0", metadata={"chunk_id": "s0", "parent_id": "S0", "sensitivity": "RESTRICTED"}),
    Document(page_content="梅雨の秘密 1", metadata={"chunk_id": "s1", "parent_id": "S1", "Sensitivity": "ｒｅｓｔｒｉｃｔｅｄ"}),
    Document(page_content="梅雨の秘密 2", metadata={"chunk_id": "s2", "parent_id": "S2",
                                                 "sensitivity": ["INTERNAL", "Restricted"]}),
    Document(page_content="梅雨の秘密 3", metadata={"chunk_id": "s3", "parent_id": "S3", "sensitivity": "restricted"}),
]
PUBLIC = [
    Document(page_content=f"梅雨の季節 資料 {i}", metadata={"chunk_id": f"p{i}", "parent_id": f"P{i}", "year": 2023})
    for i in range(10)
]
ALL = [*SECRETS, *PUBLIC]


def _ids(docs: Sequence[Document]) -> list[str]:
    return [d.metadata["chunk_id"] for d in docs]


class Leaky(BaseRetriever):
    """A plain LangChain retriever (the trial's): no ``k``, no ``filter``; the RESTRICTED chunks first."""

    docs: list[Document] = Field(default_factory=lambda: list(ALL))

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return list(self.docs)


class LeakyK(BaseRetriever):
    """Takes ``k`` (so the contract can over-fetch it); the RESTRICTED chunks first; records each ``k`` asked."""

    asked: list[int | None] = Field(default_factory=list)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None
    ) -> list[Document]:
        self.asked.append(k)
        return ALL[: k or 4]


class Parents:
    """A parent store: ``P{i}`` / ``S{i}`` → a parent document (the ``S`` ones are RESTRICTED too)."""

    def get_parents(self, parent_ids: Sequence[str]) -> Mapping[str, Any]:
        label = {"sensitivity": "RESTRICTED"}
        return {p: Document(page_content=f"parent {p}", metadata={"chunk_id": p, **(label if p[0] == "S" else {})})
                for p in parent_ids}


# -- the contract -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_the_contract_gates_a_plain_retriever_before_the_cut(mode):
    gated: list[Document] = []
    if mode == "sync":
        docs = invoke_retriever(Leaky(), "梅雨", k=4, gated=gated)
    else:
        docs = asyncio.run(ainvoke_retriever(Leaky(), "梅雨", k=4, gated=gated))
    assert _ids(docs) == ["p0", "p1", "p2", "p3"]  # was ['s0', 's1', 's2', 's3'], and nothing after the gate
    assert _ids(gated) == ["s0", "s1", "s2", "s3"]  # reported to a caller that asks (the hybrid's fail-closed fusion)


def test_the_contract_over_fetches_a_k_retriever_whose_answer_was_gated():
    leaky = LeakyK()
    assert _ids(invoke_retriever(leaky, "梅雨", k=4)) == ["p0", "p1", "p2", "p3"]
    assert leaky.asked == [4, 16]  # 4 asked, all 4 gated: asked again, as for a post-filter
    leaky.asked.clear()
    assert _ids(invoke_retriever(leaky, "梅雨", k=2, filter={"year": 2023})) == ["p0", "p1"]
    assert leaky.asked == [2, 8]
    leaky.asked.clear()
    assert invoke_retriever(leaky, "梅雨") == ALL[4:4]  # no k: the retriever's default 4, all gated: nothing


# -- every wrapper of the package over the trial's leaky retriever ------------------------------------------------
def _llm(reply: str = "梅雨の時期\n梅雨の資料") -> FakeListChatModel:
    return FakeListChatModel(responses=[reply] * 20)


WRAPPERS: dict[str, Callable[[BaseRetriever], BaseRetriever]] = {
    "multi_query": lambda base: MultiQueryRetriever(base, _llm(), k=4),
    "rag_fusion": lambda base: RAGFusionRetriever(base, _llm(), k=4),
    "hyde": lambda base: HyDERetriever(base, _llm("梅雨は六月の雨の季節です。"), k=4),
    "step_back": lambda base: StepBackRetriever(base, _llm("日本の季節"), k=4),
    "decomposition": lambda base: DecompositionRetriever(base, _llm(), k=4),
    "glossary": lambda base: GlossaryRetriever(base, glossary=[["梅雨", "つゆ"]], k=4),
    "multi_index": lambda base: MultiIndexRetriever({"a": base}, k=4),
    "multi_index_two": lambda base: MultiIndexRetriever({"a": base, "b": Leaky(docs=list(PUBLIC))}, k=4),
    "filter_extraction": lambda base: FilterExtractionRetriever(base, k=4),
    "hybrid": lambda base: HybridRetriever(retrievers=[base], k=4),
    "hybrid_rrf": lambda base: HybridRetriever(retrievers=[base, Leaky(docs=list(PUBLIC))], k=4, fusion="rrf"),
    "parent_child": lambda base: ParentChildRetriever(base, Parents(), fetch_k=4, k=4),
}


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("base", ["plain", "takes_k"])
@pytest.mark.parametrize("name", list(WRAPPERS))
def test_every_wrapper_returns_k_public_chunks_over_a_base_that_returns_restricted_ones_first(name, base, mode):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        retriever = WRAPPERS[name](Leaky() if base == "plain" else LeakyK())
    question = "梅雨の資料"  # no year: filter extraction finds no filter and searches with the call's alone
    docs = retriever.invoke(question) if mode == "sync" else asyncio.run(retriever.ainvoke(question))
    assert len(docs) == 4, _ids(docs)  # MultiQueryRetriever returned 1 in the trial (here: 0)
    assert not any(is_restricted(d) for d in docs)
    assert set(_ids(docs)) <= {d.metadata["chunk_id"] for d in PUBLIC} | {d.metadata["parent_id"] for d in PUBLIC}


def test_the_trial_input_multi_query_over_a_plain_retriever_k_4_and_k_2():
    for k in (4, 2):
        retriever = MultiQueryRetriever(Leaky(), _llm("段落の分割位置"), k=k)
        assert len(retriever.invoke("長い段落はどこで切られますか？")) == k


# -- fuse: a RESTRICTED document takes no rank ---------------------------------------------------------------------
def test_fuse_ranks_without_restricted_documents_and_still_drops_their_keys_everywhere():
    a, b = PUBLIC[0], PUBLIC[1]
    fused = fuse([[SECRETS[0], SECRETS[1], a, b]], k=2, c=60)
    assert _ids(fused) == ["p0", "p1"]
    assert fused[0].metadata["scores"]["fused"] == pytest.approx(1 / 61)  # rank 1, not rank 3 behind the secrets
    # convex: a RESTRICTED document's score moves no min-max range (a and b span [0, 1] without it)
    scored = [Document(page_content=d.page_content, metadata={**d.metadata, "scores": {"bm25": s}})
              for d, s in ((SECRETS[0], 100.0), (a, 2.0), (b, 1.0))]
    out = fuse([scored], fusion="convex", weights=[1.0])
    assert [d.metadata["scores"]["fused"] for d in out] == [1.0, 0.0]
    # fail closed: a key RESTRICTED in one list is dropped although another list has an unlabelled copy
    plain_copy = Document(page_content=SECRETS[0].page_content, metadata={"chunk_id": "s0"})
    assert _ids(fuse([[plain_copy, a], [SECRETS[0]]])) == ["p0"]


# -- BM25 / dense: a label added after the build is skipped before their own cut ---------------------------------
def _late_label_retrievers() -> dict[str, BaseRetriever]:
    docs = [Document(page_content=d.page_content, metadata=dict(d.metadata)) for d in PUBLIC]
    bm25 = BM25Retriever.from_documents(docs, k=3)
    dense = DenseRetriever.from_documents(docs, HashingEmbeddings(64), k=3)
    return {"bm25": bm25, "dense": dense, "hybrid": HybridRetriever(retrievers=[bm25, dense], k=3)}


@pytest.mark.parametrize("name", ["bm25", "dense", "hybrid"])
def test_a_label_added_after_the_build_does_not_use_up_k(name):
    retrievers = _late_label_retrievers()
    retriever = retrievers[name]
    before = _ids(retriever.invoke("梅雨の季節 資料 0"))
    assert len(before) == 3
    for r in (retrievers["bm25"], retrievers["dense"]):  # label the top hits in place, after the build
        for d in r.docs:  # type: ignore[attr-defined]
            if d.metadata["chunk_id"] in before[:2]:
                d.metadata["sensitivity"] = "RESTRICTED"
    after = retriever.invoke("梅雨の季節 資料 0")
    assert len(after) == 3 and not set(after_ids := _ids(after)) & set(before[:2]), after_ids  # was 1 result
    assert len(asyncio.run(retriever.ainvoke("梅雨の季節 資料 0"))) == 3


def test_bm25_and_dense_search_skip_a_late_label_and_leave_the_mask_alone():
    retrievers = _late_label_retrievers()
    bm25, dense = retrievers["bm25"], retrievers["dense"]
    assert isinstance(bm25, BM25Retriever) and isinstance(dense, DenseRetriever)
    top = bm25.search("梅雨の季節 資料 0", k=3)
    bm25.docs[top[0][0]].metadata["sensitivity"] = "RESTRICTED"
    again = bm25.search("梅雨の季節 資料 0", k=3, filter={"year": 2023})
    assert len(again) == 3 and top[0][0] not in [i for i, _ in again]
    vector = dense.embedding.embed_query("梅雨の季節 資料 0")
    hits = dense.search_by_vector(vector, k=3)
    dense.docs[hits[0][0]].metadata["sensitivity"] = "RESTRICTED"
    assert len(dense.search_by_vector(vector, k=3)) == 3
    assert hits[0][0] not in [i for i, _ in dense.search_by_vector(vector, k=3, filter={"year": 2023})]
    assert len(bm25.search("梅雨の季節 資料 0", k=3, filter={"year": 2023})) == 3  # the filter's mask was not edited


# -- graphs: the retrieve step still counts the RESTRICTED chunks the contract gated --------------------------------
def test_a_graph_retrieves_k_public_chunks_and_its_trace_counts_the_gated_ones():
    from langchain_ragspine.graphs import build_simple_rag

    final = build_simple_rag(Leaky(), k=4).invoke({"question": "梅雨の資料"})
    retrieve = [t for t in final["trace"] if t["step"] == "retrieve"][0]
    assert retrieve["retrieved"] == 4 and retrieve["restricted_dropped"] == 4  # the contract's gate, before its cut
    assert "秘密" not in repr(final)
