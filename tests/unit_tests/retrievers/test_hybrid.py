"""HybridRetriever and fuse(): RRF / convex fusion against hand arithmetic, identity by key, filters, async."""

import asyncio
import time
import warnings
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_tests.integration_tests import RetrieversIntegrationTests

from langchain_ragspine.documents import with_scores
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.retrievers import BM25Retriever, HybridRetriever, fuse


def _d(cid: str | None, text: str | None = None, *, id: str | None = None, **md: Any) -> Document:
    meta = dict(md)
    if cid is not None:
        meta["chunk_id"] = cid
    return Document(page_content=text if text is not None else f"text of {cid or id}", metadata=meta, id=id)


def _ids(docs: list[Document]) -> list[str]:
    return [d.metadata.get("chunk_id") or d.id for d in docs]


class FixedRetriever(BaseRetriever):
    """A foreign channel: returns a fixed ranked list and takes no k / filter."""

    docs: list[Document]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return list(self.docs)


class KRetriever(BaseRetriever):
    """A channel in our style: takes k and filter, and records what it was called with."""

    docs: list[Document]
    calls: list[dict[str, Any]] = []  # pydantic copies a list passed in: read ``retriever.calls``

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None, filter: Any = None
    ) -> list[Document]:
        self.calls.append({"k": k, "filter": filter})
        return list(self.docs[: k if k is not None else len(self.docs)])


class SleepyRetriever(BaseRetriever):
    """Async channel that waits ``delay`` seconds (sync: blocks the same time)."""

    docs: list[Document]
    delay: float = 0.2

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        time.sleep(self.delay)
        return list(self.docs)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun
    ) -> list[Document]:
        await asyncio.sleep(self.delay)
        return list(self.docs)


A, B, C, D = (_d(x) for x in ("a#0", "b#0", "c#0", "d#0"))


# -- RRF against hand arithmetic -------------------------------------------------------------------------------------
def test_rrf_matches_hand_arithmetic_ranks_from_one_c_60():
    out = fuse([[A, B, C], [C, A]])
    # a: 1/(60+1) + 1/(60+2); c: 1/(60+3) + 1/(60+1); b: 1/(60+2)
    assert _ids(out) == ["a#0", "c#0", "b#0"]
    fused = [d.metadata["scores"]["fused"] for d in out]
    assert fused == pytest.approx([0.0325224749, 0.0322664585, 0.0161290323], abs=1e-10)
    assert fused[0] == 1 / 61 + 1 / 62


def test_retriever_gives_the_same_numbers_and_k_truncates():
    h = HybridRetriever(retrievers=[FixedRetriever(docs=[A, B, C]), FixedRetriever(docs=[C, A])], k=2, fusion="rrf")
    out = h.invoke("q")
    assert _ids(out) == ["a#0", "c#0"]
    assert out[0].metadata["scores"]["fused"] == pytest.approx(1 / 61 + 1 / 62)
    assert _ids(h.invoke("q", k=3)) == ["a#0", "c#0", "b#0"]
    with pytest.raises(ValueError, match="k must be an int >= 1"):
        h.invoke("q", k=0)


def test_constant_c_is_honoured():
    out = fuse([[A, B], [B]], c=0)
    # a: 1/1 = 1.0; b: 1/2 + 1/1 = 1.5
    assert _ids(out) == ["b#0", "a#0"]
    assert [d.metadata["scores"]["fused"] for d in out] == [1.5, 1.0]


def test_weights_are_honoured():
    out = fuse([[A, B, C], [C, A]], weights=[2, 1])
    # a: 2/61 + 1/62 = 0.0489159; c: 2/63 + 1/61 = 0.0481395; b: 2/62 = 0.0322581
    assert _ids(out) == ["a#0", "c#0", "b#0"]
    assert [d.metadata["scores"]["fused"] for d in out] == pytest.approx([0.0489159172, 0.0481394744, 0.0322580645])
    # weight 2 for the second list doubles its influence: now c (rank 1 there) wins over a
    out = fuse([[A, B, C], [C, A]], weights=[1, 2])
    # c: 1/63 + 2/61 = 0.0486599; a: 1/61 + 2/62 = 0.0486516
    assert _ids(out)[:2] == ["c#0", "a#0"]
    assert out[0].metadata["scores"]["fused"] == pytest.approx(1 / 63 + 2 / 61)


def test_weight_zero_removes_a_channel_entirely():
    alone = fuse([[A, B]])
    with_zero = fuse([[A, B], [D, B, C]], weights=[1, 0])
    assert _ids(with_zero) == _ids(alone) == ["a#0", "b#0"]  # d and c (only in the zero channel) are gone
    assert [d.metadata["scores"] for d in with_zero] == [d.metadata["scores"] for d in alone]
    # a zero-weight channel is not even called by the retriever
    off = KRetriever(docs=[D])
    h = HybridRetriever(retrievers=[FixedRetriever(docs=[A, B]), off], weights=[1.0, 0.0])
    assert _ids(h.invoke("q")) == ["a#0", "b#0"]
    assert off.calls == []


def test_duplicate_key_in_one_list_counts_once_at_its_best_rank():
    a_again = _d("a#0", "another rendering of a")
    out = fuse([[A, a_again, B]])
    # a counted once at rank 1; b is the second distinct key: rank 2
    assert _ids(out) == ["a#0", "b#0"]
    assert [d.metadata["scores"]["fused"] for d in out] == [1 / 61, 1 / 62]
    assert out[0].page_content == A.page_content  # the first (best-ranked) occurrence is the one kept
    # across lists the contributions do add up
    assert fuse([[A, a_again], [a_again]])[0].metadata["scores"]["fused"] == 1 / 61 + 1 / 61


# -- identity ----------------------------------------------------------------------------------------------------------
def test_keys_are_chunk_id_never_page_content():
    same_text_1 = _d("x#0", "同じ本文")
    same_text_2 = _d("y#0", "同じ本文")
    out = fuse([[same_text_1], [same_text_2]])
    assert _ids(out) == ["x#0", "y#0"]  # same text, different chunks: kept apart (tie broken by chunk_id)
    v1, v2 = _d("z#0", "本文"), _d("z#0", "本文（prompt_text 版）")
    out = fuse([[v1], [v2]])
    assert len(out) == 1 and out[0].metadata["scores"]["fused"] == 2 / 61  # same chunk, different text: merged


def test_document_id_is_the_key_when_there_is_no_chunk_id():
    a1 = _d(None, "one", id="doc-1")
    a2 = _d(None, "one, again", id="doc-1")
    b = _d(None, "two", id="doc-2")
    out = fuse([[a1, b], [a2]])
    assert _ids(out) == ["doc-1", "doc-2"]
    assert out[0].metadata["scores"]["fused"] == 2 / 61
    # chunk_id wins over id
    assert _ids(fuse([[_d("c#1", id="doc-9")], [_d("c#1", id="other")]])) == ["c#1"]


def test_documents_without_any_key_meet_by_text_across_lists_never_within_one():
    n1, n2 = _d(None, "same"), _d(None, "same")
    out = fuse([[n1], [n2], [A]])
    # was 3 results (each keyless occurrence its own key); the same text from two channels is one chunk, as the
    # package's own retrievers identify a keyless text (content_chunk_id) and as LangChain's EnsembleRetriever fuses
    assert [d.page_content for d in out] == ["same", "text of a#0"]
    assert out[0].metadata["scores"]["fused"] == 2 / 61
    # two copies of a text in one list stay two chunks (the n-th copy meets the n-th copy elsewhere)
    out = fuse([[n1, n2], [_d(None, "same")]])
    assert [d.metadata["scores"]["fused"] for d in out] == [2 / 61, 1 / 62]
    # an unmatched keyless document still comes after keyed ties, in first-seen order
    assert [d.page_content for d in fuse([[_d(None, "x")], [_d(None, "y")], [A]])] == ["text of a#0", "x", "y"]


def test_ties_break_on_chunk_id():
    p, q = _d("zeta#0"), _d("alpha#0")
    out = fuse([[p, q], [q, p]])
    assert out[0].metadata["scores"]["fused"] == out[1].metadata["scores"]["fused"]  # 1/61 + 1/62 both
    assert _ids(out) == ["alpha#0", "zeta#0"]
    assert _ids(fuse([[q, p], [p, q]])) == ["alpha#0", "zeta#0"]  # order of the lists does not matter


def test_scores_are_merged_across_channels():
    lex = [with_scores(A, bm25=7.5, fused=7.5), with_scores(B, bm25=3.0, fused=3.0)]
    vec = [with_scores(_d("a#0", "dense copy"), vector=0.83, fused=0.83), with_scores(C, vector=0.5, fused=0.5)]
    out = {d.metadata["chunk_id"]: d for d in fuse([lex, vec])}
    assert out["a#0"].metadata["scores"] == {"bm25": 7.5, "vector": 0.83, "fused": 2 / 61, "rerank": None}
    assert out["b#0"].metadata["scores"] == {"bm25": 3.0, "vector": None, "fused": 1 / 62, "rerank": None}
    assert out["c#0"].metadata["scores"] == {"bm25": None, "vector": 0.5, "fused": 1 / 62, "rerank": None}
    assert out["a#0"].page_content == A.page_content  # first occurrence: equal weights → channel order
    # with a heavier second channel, its copy is the one returned
    heavy = {d.metadata["chunk_id"]: d for d in fuse([lex, vec], weights=[1, 3])}
    assert heavy["a#0"].page_content == "dense copy"
    assert heavy["a#0"].metadata["scores"]["bm25"] == 7.5
    # inputs untouched
    assert "scores" not in A.metadata and lex[0].metadata["scores"]["fused"] == 7.5


def test_every_result_has_the_four_score_keys():
    out = HybridRetriever(retrievers=[FixedRetriever(docs=[A, B])]).invoke("q")
    assert all(set(d.metadata["scores"]) == {"bm25", "vector", "fused", "rerank"} for d in out)
    assert all(d.metadata["scores"]["rerank"] is None for d in out)


# -- convex fusion -----------------------------------------------------------------------------------------------------
def _convex_lists() -> list[list[Document]]:
    lex = [with_scores(A, bm25=10.0), with_scores(B, bm25=6.0), with_scores(C, bm25=2.0)]  # normalised 1, .5, 0
    vec = [with_scores(C, vector=0.9), with_scores(A, vector=0.5), with_scores(D, vector=0.4)]  # 1, .2, 0
    return [lex, vec]


def test_convex_fusion_by_hand():
    out = fuse(_convex_lists(), fusion="convex", alpha=0.7)
    # a: .7*1 + .3*.2 = .76; b: .7*.5 = .35; c: .7*0 + .3*1 = .3; d: 0
    assert _ids(out) == ["a#0", "b#0", "c#0", "d#0"]
    assert [d.metadata["scores"]["fused"] for d in out] == pytest.approx([0.76, 0.35, 0.30, 0.0])
    out = fuse(_convex_lists(), fusion="convex")  # alpha 0.5: a .6, c .5, b .25, d 0
    assert _ids(out) == ["a#0", "c#0", "b#0", "d#0"]
    assert [d.metadata["scores"]["fused"] for d in out] == pytest.approx([0.6, 0.5, 0.25, 0.0])
    # explicit weights are rescaled to sum 1: [3, 1] == alpha .75
    assert [d.metadata["scores"]["fused"] for d in fuse(_convex_lists(), fusion="convex", weights=[3, 1])] == (
        pytest.approx([d.metadata["scores"]["fused"] for d in fuse(_convex_lists(), fusion="convex", alpha=0.75)])
    )


def test_convex_without_scores_falls_back_to_the_rrf_term():
    out = fuse([[A, B, C]], fusion="convex")
    # 1/(60+rank) = 1/61, 1/62, 1/63 → min-max: 1, (1/62 - 1/63) / (1/61 - 1/63) = 3843/7812 = .4919355, 0
    assert [d.metadata["scores"]["fused"] for d in out] == pytest.approx([1.0, 0.4919355, 0.0])
    out = fuse([[A, B, C]], fusion="convex", c=0)  # 1, 1/2, 1/3 → 1, .25, 0
    assert [d.metadata["scores"]["fused"] for d in out] == pytest.approx([1.0, 0.25, 0.0])
    # a scoreless channel beside a scored one: [a, c, d] → 1, .4919, 0; vectors c .9, b .7, d .5 → 1, .5, 0
    scored = [with_scores(C, vector=0.9), with_scores(B, vector=0.7), with_scores(D, vector=0.5)]
    out = fuse([[A, C, D], scored], fusion="convex")
    # c: .5*.4919355 + .5*1 = .7459677; a: .5*1; b: .5*.5; d: 0
    assert _ids(out) == ["c#0", "a#0", "b#0", "d#0"]
    assert [d.metadata["scores"]["fused"] for d in out] == pytest.approx([0.7459677, 0.5, 0.25, 0.0])


def test_default_fusion_keeps_the_first_channels_best_then_convex_0_55():
    lists = _convex_lists()  # lexical a 1, b .5, c 0; dense c 1, a .2, d 0
    h = HybridRetriever(retrievers=[FixedRetriever(docs=lst) for lst in lists], k=4)
    assert h.fusion == "two_stage" and h.alpha is None and h.top_alpha is None
    assert (h.effective_alpha, h.effective_top_alpha) == (0.55, 1.0)
    assert h.invoke("q") == fuse(lists, fusion="two_stage", alpha=0.55, top_alpha=1.0, k=4)
    # a: .55 + .45*.2 = .64 (and the lexical best); c: .45; b: .275; d: 0
    assert _ids(h.invoke("q")) == ["a#0", "c#0", "b#0", "d#0"]
    assert [d.metadata["scores"]["fused"] for d in h.invoke("q")] == pytest.approx([0.64, 0.45, 0.275, 0.0])
    # the dense channel cannot take rank 1 from the lexical best, however strong it is
    strong = [with_scores(C, vector=0.9), with_scores(D, vector=0.1)]
    out = HybridRetriever(retrievers=[FixedRetriever(docs=lists[0]), FixedRetriever(docs=strong)], k=4).invoke("q")
    assert _ids(out)[:2] == ["a#0", "c#0"]  # c: .45 * 1 beats b: .55 * .5 at rank 2
    # convex keeps its own default weight, 0.7; equal weights are one argument away
    convex = HybridRetriever(retrievers=[FixedRetriever(docs=lst) for lst in lists], k=4, fusion="convex")
    assert convex.effective_alpha == 0.7
    assert [d.metadata["scores"]["fused"] for d in convex.invoke("q")] == pytest.approx([0.76, 0.35, 0.30, 0.0])
    eq = HybridRetriever(retrievers=[FixedRetriever(docs=lst) for lst in lists], k=4, fusion="convex", alpha=0.5)
    assert [d.metadata["scores"]["fused"] for d in eq.invoke("q")] == pytest.approx([0.6, 0.5, 0.25, 0.0])


def test_convex_retriever_option():
    chans = [FixedRetriever(docs=lst) for lst in _convex_lists()]
    out = HybridRetriever(retrievers=chans, fusion="convex", alpha=0.7, k=2).invoke("q")
    assert _ids(out) == ["a#0", "b#0"]
    assert out[0].metadata["scores"] == pytest.approx({"bm25": 10.0, "vector": 0.5, "fused": 0.76, "rerank": None})


# -- two-stage fusion --------------------------------------------------------------------------------------------------
def test_two_stage_by_hand():
    lists = _convex_lists()  # lexical a 1, b .5, c 0; dense c 1, a .2, d 0
    # ranks 2+ by alpha .3: c .7, a .3 + .7*.2 = .44, b .15, d 0; rank 1 by top_alpha .75: a .8, b .375, c .25
    out = fuse(lists, fusion="two_stage", alpha=0.3, top_alpha=0.75)
    assert _ids(out) == ["a#0", "c#0", "b#0", "d#0"]
    # ranks 2+ keep their score; rank 1 carries the highest (its own 0.44 is below rank 2's 0.7), so "fused"
    # never rises down the list (before: [0.44, 0.7, ...], and MMR re-ranking by "fused" moved rank 1)
    assert [d.metadata["scores"]["fused"] for d in out] == pytest.approx([0.7, 0.7, 0.15, 0.0])
    # top_alpha = alpha is plain convex fusion
    same = fuse(lists, fusion="two_stage", alpha=0.3, top_alpha=0.3)
    assert same == fuse(lists, fusion="convex", alpha=0.3)
    # top_alpha 1.0 keeps the first channel's best at rank 1; top_alpha 0 puts the second channel's best there
    assert _ids(fuse(lists, fusion="two_stage", alpha=0.3, top_alpha=1.0))[0] == "a#0"
    assert _ids(fuse(lists, fusion="two_stage", alpha=0.9, top_alpha=0.0)) == ["c#0", "a#0", "b#0", "d#0"]
    # k cuts after the rank-1 choice
    assert _ids(fuse(lists, fusion="two_stage", alpha=0.3, top_alpha=0.75, k=1)) == ["a#0"]
    assert fuse(lists, fusion="two_stage", k=0) == []


def test_two_stage_ties_at_rank_one_go_to_the_better_fused_score_then_the_key():
    lex = [with_scores(A, bm25=5.0), with_scores(B, bm25=5.0), with_scores(C, bm25=1.0)]  # a 1, b 1, c 0
    vec = [with_scores(B, vector=0.9), with_scores(D, vector=0.1)]  # b 1, d 0
    out = fuse([lex, vec], fusion="two_stage", alpha=0.5, top_alpha=1.0)
    assert _ids(out) == ["b#0", "a#0", "c#0", "d#0"]  # a and b tie at rank 1; b's fused score is higher
    tied = fuse([lex, [with_scores(D, vector=0.9)]], fusion="two_stage", alpha=0.5, top_alpha=1.0)
    assert _ids(tied)[0] == "a#0"  # a full tie breaks on chunk_id


def test_two_stage_rank_one_respects_restricted_and_zero_weights():
    secret = _d("s#0", sensitivity="RESTRICTED")
    lex = [with_scores(secret, bm25=9.0), with_scores(A, bm25=6.0), with_scores(B, bm25=1.0)]
    vec = [with_scores(B, vector=0.9), with_scores(A, vector=0.1)]
    out = fuse([lex, vec], fusion="two_stage", alpha=0.2, top_alpha=1.0)
    assert "s#0" not in _ids(out)
    # without the restricted chunk, the lexical best is a (6 → (6 - 1) / (9 - 1) = .625 vs b 0): a is rank 1
    assert _ids(out)[0] == "a#0"
    # a channel with weight 0 is off at rank 1 too: only the lexical list counts
    only = fuse([lex[1:], vec], fusion="two_stage", weights=[1.0, 0.0], top_alpha=0.0)
    assert _ids(only) == ["a#0", "b#0"]
    # an empty first channel leaves rank 1 to the fused order
    assert _ids(fuse([[], vec], fusion="two_stage", top_alpha=1.0)) == ["b#0", "a#0"]


def test_two_stage_retriever_option_and_validation():
    chans = [FixedRetriever(docs=lst) for lst in _convex_lists()]
    h = HybridRetriever(retrievers=chans, fusion="two_stage", alpha=0.3, top_alpha=0.75, k=4)
    assert h.invoke("q") == fuse(_convex_lists(), fusion="two_stage", alpha=0.3, top_alpha=0.75, k=4)
    with pytest.raises(ValueError, match="top_alpha"):
        fuse(_convex_lists(), fusion="convex", top_alpha=0.5)
    with pytest.raises(ValueError, match="top_alpha"):
        HybridRetriever(retrievers=chans, fusion="rrf", top_alpha=0.5)
    with pytest.raises(ValueError, match="top_alpha"):
        HybridRetriever(retrievers=chans, top_alpha=1.5)
    with pytest.raises(ValueError, match="top_alpha"):
        fuse(_convex_lists(), fusion="two_stage", top_alpha=-0.1)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from("abcdefg"), st.integers(0, 5)), max_size=7),
    st.lists(st.tuples(st.sampled_from("abcdefg"), st.integers(0, 5)), max_size=7),
    st.sampled_from([0.0, 0.3, 0.5, 0.7, 1.0]),
    st.sampled_from([0.0, 0.25, 0.75, 1.0]),
)
def test_two_stage_is_its_rank_one_then_convex_order(lex_raw, vec_raw, alpha, top_alpha):
    lex = [with_scores(_d(f"{x}#0"), bm25=float(s)) for x, s in lex_raw]
    vec = [with_scores(_d(f"{x}#0"), vector=float(s)) for x, s in vec_raw]
    out = fuse([lex, vec], fusion="two_stage", alpha=alpha, top_alpha=top_alpha)
    plain = fuse([lex, vec], fusion="convex", alpha=alpha)
    # with both channels on at both stages, rank 1 is the convex winner at top_alpha
    top = fuse([lex, vec], fusion="convex", alpha=top_alpha) if 0 < alpha < 1 and 0 < top_alpha < 1 else None
    assert sorted(_ids(out)) == sorted(_ids(plain))
    first_seen: dict[str, float] = {}
    for x, sc in lex_raw:
        first_seen.setdefault(x, float(sc))
    if first_seen and alpha > 0 and top_alpha == 1.0:
        # the lexical channel's best score is at rank 1, whatever the dense channel says
        assert out[0].metadata["scores"]["bm25"] == max(first_seen.values())
    if out:
        # ranks 2+ are the convex order without the rank-1 document
        assert _ids(out)[1:] == [i for i in _ids(plain) if i != _ids(out)[0]]
        if top is not None:
            # rank 1 has the best rank-1 score (the convex score with top_alpha)
            best = top[0].metadata["scores"]["fused"]
            got = next(d for d in top if d.metadata["chunk_id"] == _ids(out)[0]).metadata["scores"]["fused"]
            assert got == pytest.approx(best)


# -- channels: fetch_k, filter, RESTRICTED --------------------------------------------------------------------------
def test_fetch_k_is_passed_to_channels_that_take_k_and_truncates_the_others():
    ours = KRetriever(docs=[A, B, C, D])
    foreign = FixedRetriever(docs=[D, C, B, A])
    h = HybridRetriever(retrievers=[ours, foreign], fetch_k=2, k=2, fusion="rrf")
    out = h.invoke("q")
    assert ours.calls == [{"k": 2, "filter": None}]
    # ours: a, b; foreign truncated to d, c — each 1/61 or 1/62, so ties break on chunk_id.  Untruncated, the
    # foreign list would add b (rank 3) and a (rank 4): a = 1/61 + 1/64, b = 1/62 + 1/63 would be the top two.
    assert _ids(out) == ["a#0", "d#0"]


def test_fetch_k_counts_distinct_keys():
    foreign = FixedRetriever(docs=[A, _d("a#0", "dup"), B, C])
    out = HybridRetriever(retrievers=[foreign], fetch_k=2, k=2).invoke("q")
    assert _ids(out) == ["a#0", "b#0"]  # counting the duplicate, the depth-2 list would hold a#0 only


_FILTER_DOCS = [
    _d("ja#0", "東京 東京 東京 の天気", lang="ja"),
    _d("en#0", "東京 weather", lang="en"),
    _d("en#1", "Osaka weather", lang="en"),
]


def test_filter_runs_before_scoring_in_bm25_and_after_in_a_vector_store_channel():
    bm = BM25Retriever.from_documents(_FILTER_DOCS)
    store = InMemoryVectorStore(HashingEmbeddings())
    store.add_documents(_FILTER_DOCS)
    vec = store.as_retriever()
    assert _ids(bm.invoke("東京", k=1)) == ["ja#0"]  # unfiltered, the Japanese chunk is the best match
    h = HybridRetriever(retrievers=[bm, vec], fetch_k=1, k=1, fusion="rrf")
    out = h.invoke("東京", filter={"lang": "en"})
    # BM25 filtered before scoring: its one candidate is en#0.  The vector store cannot take our dict filter (it
    # would call it as a function); its top-1 is ja#0, removed after retrieval — so the contract asks it again for
    # 4 (it has 3), filters, and its best English chunk en#0 is its one candidate: both channels rank en#0 first.
    assert _ids(vec.invoke("東京", k=1)) == ["ja#0"]
    assert _ids(out) == ["en#0"]
    assert out[0].metadata["scores"]["bm25"] is not None
    assert out[0].metadata["scores"]["fused"] == pytest.approx(2 / 61)
    # a constructor filter holds on every call; a per-call filter is ANDed with it, never replaces it
    h2 = HybridRetriever(retrievers=[bm, vec], filter={"lang": "en"}, k=5)
    assert {d.metadata["lang"] for d in h2.invoke("東京")} == {"en"}
    assert h2.invoke("東京", filter={"lang": "ja"}) == []


def test_filter_is_passed_to_channels_that_take_it_and_never_widens():
    ours = KRetriever(docs=[_d("a#0", lang="ja"), _d("b#0", lang="en")])  # ignores its filter
    out = HybridRetriever(retrievers=[ours], k=5).invoke("q", filter={"lang": "en"})
    assert ours.calls == [{"k": 50, "filter": {"lang": "en"}}]
    assert _ids(out) == ["b#0"]  # post-filtered anyway
    # a missing field never matches (fail closed)
    assert HybridRetriever(retrievers=[FixedRetriever(docs=[A])]).invoke("q", filter={"lang": {"ne": "en"}}) == []


def test_restricted_documents_from_a_foreign_channel_are_dropped():
    secret = _d("s#0", "機密", sensitivity="restricted")
    out = HybridRetriever(retrievers=[FixedRetriever(docs=[secret, A])], k=5).invoke("q")
    assert _ids(out) == ["a#0"]
    # a key labelled RESTRICTED in any channel is dropped even if another channel has an unlabelled copy
    plain = _d("s#0", "機密")
    out = HybridRetriever(retrievers=[FixedRetriever(docs=[plain, A]), FixedRetriever(docs=[secret])], k=5).invoke("q")
    assert _ids(out) == ["a#0"]
    assert _ids(fuse([[secret, B]])) == ["b#0"]


# -- async -------------------------------------------------------------------------------------------------------------
async def test_ainvoke_runs_channels_concurrently():
    h = HybridRetriever(retrievers=[SleepyRetriever(docs=[A, B]), SleepyRetriever(docs=[B, C])], k=3, fusion="rrf")
    t0 = time.perf_counter()
    out = await h.ainvoke("q")
    elapsed = time.perf_counter() - t0
    assert elapsed < 0.35, elapsed  # sequential would take >= 0.4 s
    assert _ids(out) == ["b#0", "a#0", "c#0"]


async def test_ainvoke_equals_invoke_with_bm25_and_a_vector_store():
    # BM25Retriever has no async method taking k/filter: it runs in a worker thread with them instead
    bm = BM25Retriever.from_documents(_FILTER_DOCS)
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    store.add_documents(_FILTER_DOCS)
    h = HybridRetriever(retrievers=[bm, store.as_retriever()], k=3)
    for kw in ({}, {"filter": {"lang": "en"}}, {"k": 1, "fetch_k": 2}):
        assert await h.ainvoke("東京", **kw) == h.invoke("東京", **kw)


# -- validation --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "kw",
    [
        {"retrievers": []},
        {"weights": [1.0]},
        {"weights": [1.0, -1.0]},
        {"weights": [0.0, 0.0]},
        {"weights": [1.0, float("nan")]},
        {"c": -1},
        {"fetch_k": 0},
        {"k": -1},
        {"fusion": "borda"},
        {"alpha": 1.5},
        {"weights": [1.0, 1.0], "alpha": 0.3},
        {"filter": {"year": {"regex": "x"}}},
    ],
)
def test_bad_arguments_raise_value_error(kw):
    params = {"retrievers": [FixedRetriever(docs=[A]), FixedRetriever(docs=[B])], **kw}
    with pytest.raises(ValueError):
        HybridRetriever(**params)


def test_type_errors():
    with pytest.raises((TypeError, ValueError)):
        HybridRetriever(retrievers=["not a retriever"])
    h = HybridRetriever(retrievers=[FixedRetriever(docs=[A])])
    with pytest.raises(TypeError, match="top_n"):
        h.invoke("q", top_n=3)
    with pytest.raises(ValueError):
        h.invoke("q", k=-1)
    with pytest.raises(ValueError):
        h.invoke("q", fetch_k=0)
    with pytest.raises(ValueError):
        h.invoke("q", filter={"x": {"between": [1]}})
    with pytest.raises(TypeError):
        fuse([["plain string"]])
    with pytest.raises(ValueError):
        fuse([])
    with pytest.raises(ValueError):
        fuse([[A]], k=-2)


# -- LangChain's EnsembleRetriever, side by side -------------------------------------------------------------------------
def test_differences_from_langchain_ensemble_retriever():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langchain_classic.retrievers import EnsembleRetriever

    twin1, twin2 = _d("law#1", "第一条 本法の目的"), _d("law#9", "第一条 本法の目的")  # same text, two chunks
    v1, v2 = _d("qa#3", "梅雨とは"), _d("qa#3", "梅雨とは（前後の文脈付き）")  # one chunk, two renderings
    lex = [twin1, v1, twin1, B]  # twin1 repeated inside one list
    vec = [twin2, v2, B]
    chans = [FixedRetriever(docs=lex), FixedRetriever(docs=vec)]

    ens = EnsembleRetriever(retrievers=chans).invoke("q")
    ours = HybridRetriever(retrievers=chans, k=10, fusion="rrf").invoke("q")

    # Ensemble keys by page_content: the two law chunks collapse into one, which the repeated twin1 makes count three
    # times (ranks 1 and 3 of lex, rank 1 of vec); the two renderings of qa#3 stay apart, each with half its score;
    # b keeps its raw rank 4 in lex.  Weights default to 1/2 each.
    assert [d.metadata["chunk_id"] for d in ens] == ["law#1", "b#0", "qa#3", "qa#3"]
    # law: .5 * (1/61 + 1/63 + 1/61) = .02433; b: .5 * (1/64 + 1/63) = .01575; qa#3: .5/62 = .00806 twice
    # Ours keys by chunk_id: two law chunks, one qa#3 found by both channels, twin1 counted once, and b is the third
    # distinct key of lex: qa#3 2/62 = .03226 > b 2/63 = .03175 > law#1 = law#9 = 1/61 (tie → chunk_id).
    assert _ids(ours) == ["qa#3", "b#0", "law#1", "law#9"]
    s = {d.metadata["chunk_id"]: d.metadata["scores"]["fused"] for d in ours}
    assert s == pytest.approx({"qa#3": 2 / 62, "b#0": 2 / 63, "law#1": 1 / 61, "law#9": 1 / 61})
    # Ensemble returns documents untouched (no scores), and all of them (no k)
    assert all("scores" not in d.metadata for d in ens)

    # with unique texts and consistent ids the two agree on the order (weights scale does not matter)
    chans = [FixedRetriever(docs=[A, B, C]), FixedRetriever(docs=[C, A, D])]
    ens = EnsembleRetriever(retrievers=chans, weights=[0.7, 0.3], id_key="chunk_id").invoke("q")
    ours = HybridRetriever(retrievers=chans, weights=[0.7, 0.3], k=10, fusion="rrf").invoke("q")
    assert _ids(ens) == _ids(ours) == ["a#0", "c#0", "b#0", "d#0"]


# -- LangChain's standard retriever suite ------------------------------------------------------------------------------
_STD_DOCS = [
    Document(page_content=f"梅雨は東アジアの雨季です。資料{i}番。", metadata={"chunk_id": f"doc{i}#0"}) for i in range(6)
]


def _std_vector_retriever() -> BaseRetriever:
    store = InMemoryVectorStore(HashingEmbeddings())
    store.add_documents(_STD_DOCS)
    return store.as_retriever()


class TestHybridRetrieverStandard(RetrieversIntegrationTests):
    @property
    def retriever_constructor(self) -> type[HybridRetriever]:
        return HybridRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        return {"retrievers": [BM25Retriever.from_documents(_STD_DOCS), _std_vector_retriever()], "k": 4}

    @property
    def retriever_query_example(self) -> str:
        return "梅雨とは"


# -- from_documents, save / load (like BM25Retriever and DenseRetriever) ------------------------------------------
def _hybrid_docs():
    from langchain_core.documents import Document

    return [
        Document(page_content="梅雨は六月から七月にかけて続く雨の季節。", metadata={"chunk_id": "tsuyu#0", "dept": "a"}),
        Document(page_content="梅雨前線が停滞すると大雨になる。", metadata={"chunk_id": "front#0", "dept": "b"}),
        Document(page_content="北京是中国的首都。", metadata={"chunk_id": "beijing#0", "dept": "a"}),
        Document(page_content="機密の梅雨メモ", metadata={"chunk_id": "secret#0", "sensitivity": "RESTRICTED"}),
    ]


def test_from_documents_builds_bm25_then_dense_and_save_load_round_trips(tmp_path):
    from langchain_ragspine.embeddings import HashingEmbeddings
    from langchain_ragspine.retrievers import BM25Retriever, DenseRetriever, HybridRetriever

    emb = HashingEmbeddings(128)
    h = HybridRetriever.from_documents(_hybrid_docs(), emb, k=3, fusion="convex", alpha=0.6, filter={"dept": {"$in": ["a", "b"]}})
    assert [type(r) for r in h.retrievers] == [BM25Retriever, DenseRetriever]
    before = h.invoke("梅雨の季節")
    assert before and all(d.metadata["chunk_id"] != "secret#0" for d in before)
    h.save(tmp_path / "H")
    loaded = HybridRetriever.load(tmp_path / "H", embedding=emb)
    assert (loaded.k, loaded.fusion, loaded.alpha, loaded.filter) == (3, "convex", 0.6, h.filter)
    after = loaded.invoke("梅雨の季節")
    assert [(d.metadata["chunk_id"], d.metadata["scores"]) for d in after] == [
        (d.metadata["chunk_id"], d.metadata["scores"]) for d in before
    ]
    assert HybridRetriever.load(tmp_path / "H", embedding=emb, k=1).invoke("梅雨の季節") == after[:1]


def test_hybrid_load_errors_name_what_is_missing(tmp_path):
    import pytest

    from langchain_ragspine.embeddings import HashingEmbeddings
    from langchain_ragspine.errors import StoreError
    from langchain_ragspine.retrievers import BM25Retriever, HybridRetriever

    HybridRetriever.from_documents(_hybrid_docs(), HashingEmbeddings(128)).save(tmp_path / "H")
    with pytest.raises(ValueError, match="embedding="):
        HybridRetriever.load(tmp_path / "H")
    with pytest.raises(ValueError, match="built with embeddings"):
        HybridRetriever.load(tmp_path / "H", embedding=HashingEmbeddings(64))
    with pytest.raises(StoreError, match="no hybrid retriever here"):
        HybridRetriever.load(tmp_path / "nothing")
    from langchain_core.vectorstores import InMemoryVectorStore

    vs = InMemoryVectorStore(HashingEmbeddings(16))
    foreign = HybridRetriever(retrievers=[BM25Retriever.from_documents(_hybrid_docs()), vs.as_retriever()])
    with pytest.raises(TypeError, match=r"retrievers\[1\] is a VectorStoreRetriever"):
        foreign.save(tmp_path / "F")
    assert not (tmp_path / "F").exists()


def test_regression_mmr_after_two_stage_keeps_rank_one():
    from langchain_ragspine.document_compressors import MMRCompressor

    out = fuse(_convex_lists(), fusion="two_stage", alpha=0.3, top_alpha=0.75)
    assert _ids(out)[0] == "a#0"
    # before: MMR took relevance from "fused" (a 0.44 < c 0.7) and put c first
    assert _ids(MMRCompressor(k=4).compress_documents(out, "q"))[0] == "a#0"


# -- a foreign vector store built from the same texts (new-user trial of issue 16, left over) ---------------------
from langchain_ragspine.documents import content_chunk_id  # noqa: E402
from langchain_ragspine.retrievers.hybrid import DEFAULT_C, FUSIONS  # noqa: E402

_TRIAL_TEXTS = ["梅雨は六月から七月にかけて続く雨の季節。", "北京是中国的首都。", "The chunk store keeps every version."]


def _foreign(texts: list[str], metadatas: list[dict] | None = None) -> BaseRetriever:
    store = InMemoryVectorStore(embedding=DeterministicFakeEmbedding(size=32))
    store.add_texts(texts, metadatas)  # no ids: the store gives each text its own uuid Document.id
    return store.as_retriever(search_kwargs={"k": len(texts)})


@pytest.mark.parametrize("fusion", FUSIONS)
def test_regression_a_foreign_store_without_ids_and_bm25_return_each_chunk_once(fusion):
    bm25 = BM25Retriever.from_texts(_TRIAL_TEXTS, tokenizer="cjk")
    foreign = _foreign(_TRIAL_TEXTS)
    h = HybridRetriever(retrievers=[bm25, foreign], k=10, fusion=fusion)
    out = h.invoke("梅雨の季節")
    texts = [d.page_content for d in out]
    assert sorted(texts) == sorted(_TRIAL_TEXTS)  # before: the BM25 hit came back twice (uuid vs content id)
    assert asyncio.run(h.ainvoke("梅雨の季節")) == out
    top = next(d for d in out if d.page_content == _TRIAL_TEXTS[0])
    # the fused chunk is the BM25 channel's document (its content id), with its bm25 score and both contributions
    assert top.id == top.metadata["chunk_id"] == content_chunk_id(_TRIAL_TEXTS[0])
    assert top.metadata["scores"]["bm25"] > 0 and top.metadata["scores"]["vector"] is None  # the store reports none
    if fusion == "rrf":
        vec_rank = 1 + [d.page_content for d in foreign.invoke("梅雨の季節")].index(_TRIAL_TEXTS[0])
        assert top.metadata["scores"]["fused"] == pytest.approx(1 / (DEFAULT_C + 1) + 1 / (DEFAULT_C + vec_rank))
    # the other chunks, found by the store alone, keep the store's own ids
    assert all(d.id == d.metadata["chunk_id"] and not d.id.startswith("chunk-") for d in out if d is not top)


def test_equal_texts_from_different_documents_stay_apart_and_pair_by_doc_id():
    texts = ["同じ本文です。", "同じ本文です。", "別の本文。"]
    metas = [{"doc_id": "X"}, {"doc_id": "Y"}, {"doc_id": "Z"}]
    bm25 = BM25Retriever.from_texts(texts, metas, tokenizer="cjk")  # chunk-h (X) and chunk-h-1 (Y): two chunks
    out = HybridRetriever(retrievers=[bm25, _foreign(texts, metas)], k=10, fusion="rrf").invoke("同じ本文")
    assert sorted(d.metadata["doc_id"] for d in out) == ["X", "Y", "Z"]  # not merged into one, not returned twice
    # the foreign copy of Y's text is paired with Y's chunk, not with X's (the first copy of that text)
    bm_x, bm_y = (d for d in bm25.invoke("同じ本文") if d.metadata["doc_id"] in "XY")
    bm_x, bm_y = sorted((bm_x, bm_y), key=lambda d: d.metadata["doc_id"])
    f_y = _d(None, texts[0], id="uuid-y", doc_id="Y")
    out = {d.metadata["doc_id"]: d.metadata["scores"]["fused"] for d in fuse([[bm_x, bm_y], [f_y]])}
    assert out == {"X": 1 / 61, "Y": 1 / 62 + 1 / 61}
    # a copy from another document is not fused with the only chunk of that text
    out = fuse([[bm_x], [_d(None, texts[0], id="uuid-w", doc_id="W")]])
    assert [d.metadata["doc_id"] for d in out] == ["X", "W"]
    # without doc_id on the foreign side, the n-th copy meets the n-th chunk
    out = fuse([[bm_x, bm_y], [_d(None, texts[0], id="u1"), _d(None, texts[0], id="u2")]])
    assert [d.metadata["doc_id"] for d in out] == ["X", "Y"]


def test_our_chunk_id_keeps_its_key_and_two_foreign_stores_meet():
    ours = _d("law#1", "第一条")
    mine = _d("mine#7", "第一条")  # a foreign document carrying a chunk_id of its own: never re-keyed by text
    assert _ids(fuse([[ours], [mine]])) == ["law#1", "mine#7"]
    s1, s2 = _d(None, "第二条", id="uuid-1"), _d(None, "第二条", id="uuid-2")  # two stores, two uuids, one text
    out = fuse([[s1], [s2]])
    assert len(out) == 1 and out[0].id == "uuid-1" and out[0].metadata["scores"]["fused"] == 2 / 61
    # user-given ids shared by the channels still match by id, and keep them
    assert [d.id for d in fuse([[_d(None, "本文", id="a")], [_d(None, "本文", id="a")]])] == ["a"]


def test_a_text_matched_chunk_labelled_restricted_in_any_channel_is_dropped():
    bm25 = BM25Retriever.from_texts(["公開の本文。", "秘密の本文。"], tokenizer="cjk")
    foreign = _foreign(["公開の本文。", "秘密の本文。"], [{}, {"sensitivity": "RESTRICTED"}])
    out = HybridRetriever(retrievers=[bm25, foreign], k=10, fusion="rrf").invoke("本文")
    assert [d.page_content for d in out] == ["公開の本文。"]  # fail closed: the foreign label drops the chunk


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.lists(
            st.tuples(st.sampled_from(["p", "q", "r"]), st.sampled_from([None, "X", "Y"]),
                      st.sampled_from(["ours", "uuid", "none"]), st.integers(0, 3)),
            max_size=6,
        ),
        min_size=1, max_size=3,
    )
)
def test_every_list_position_contributes_once_and_lists_never_merge_their_own_documents(raw):
    lists = []
    for ch, lst in enumerate(raw):
        docs = []
        for pos, (text, doc_id, kind, n) in enumerate(lst):
            md = {} if doc_id is None else {"doc_id": doc_id}
            if kind == "ours":
                docs.append(_d(content_chunk_id(text, n), text, **md))
            else:
                docs.append(_d(None, text, id=f"u{ch}-{pos}" if kind == "uuid" else None, **md))
        lists.append(docs)
    from langchain_ragspine.retrievers.hybrid import _fusion_keys

    for keyed in _fusion_keys(lists, [True] * len(lists)):  # one contribution per chunk per list
        assert len({key for key, _ in keyed}) == len(keyed)
    out = fuse(lists)
    distinct = [len({(d.metadata.get("chunk_id") or d.id or ("anon", i)) for i, d in enumerate(lst)}) for lst in lists]
    total = sum(1 / (DEFAULT_C + r) for n in distinct for r in range(1, n + 1))
    assert sum(d.metadata["scores"]["fused"] for d in out) == pytest.approx(total)  # nothing lost or counted twice
    assert max(distinct) <= len(out) <= sum(distinct)  # no two chunks of one list became one result
    keys = [d.metadata.get("chunk_id") for d in out if d.metadata.get("chunk_id")]
    assert len(keys) == len(set(keys))


# -- id_key (EnsembleRetriever's argument) and score_threshold (issue 27 §2) -----------------------------------------
def _c(cid: str, doc_id: Any, **scores: float) -> Document:
    d = _d(cid, doc_id=doc_id) if doc_id is not None else _d(cid)
    return with_scores(d, **scores) if scores else d


def test_id_key_is_accepted_and_makes_one_result_per_value_across_and_within_channels():
    # two channels return chunks of three documents; by chunk identity there are five results, by doc_id three
    lex = [_c("p#0", "p"), _c("p#1", "p"), _c("q#0", "q"), _c("r#0", "r")]
    vec = [_c("q#2", "q"), _c("p#1", "p")]
    chans = [FixedRetriever(docs=lex), FixedRetriever(docs=vec)]
    assert len(HybridRetriever(retrievers=chans, k=10, fusion="rrf").invoke("x")) == 5
    out = HybridRetriever(retrievers=chans, k=10, fusion="rrf", id_key="doc_id").invoke("x")
    # p: rank 1 of lex (p#1 repeats p there: counted once) and rank 2 of vec; q: rank 2 of lex, rank 1 of vec;
    # r: rank 3 of lex.  p = 1/61 + 1/62 = q (tie → the key "p"), r = 1/63
    assert [d.metadata["doc_id"] for d in out] == ["p", "q", "r"]
    assert [d.metadata["scores"]["fused"] for d in out] == pytest.approx([1 / 61 + 1 / 62, 1 / 62 + 1 / 61, 1 / 63])
    # each result is its value's best-ranked chunk (equal weights: the first channel's), with its own chunk_id
    assert _ids(out) == ["p#0", "q#0", "r#0"]


def test_id_key_agrees_with_ensemble_retriever_where_each_list_names_a_value_once():
    from langchain_classic.retrievers import EnsembleRetriever

    lex = [_c("p#0", "p"), _c("q#0", "q"), _c("r#0", "r")]
    vec = [_c("r#4", "r"), _c("s#0", "s"), _c("p#3", "p")]
    chans = [FixedRetriever(docs=lex), FixedRetriever(docs=vec)]
    ens = EnsembleRetriever(retrievers=chans, weights=[0.6, 0.4], id_key="doc_id").invoke("x")
    ours = HybridRetriever(retrievers=chans, weights=[0.6, 0.4], k=10, fusion="rrf", id_key="doc_id").invoke("x")
    # p .6/61 + .4/63 = .016185 > r .6/63 + .4/61 = .016081 > q .6/62 > s .4/62
    assert [d.metadata["doc_id"] for d in ours] == [d.metadata["doc_id"] for d in ens] == ["p", "r", "q", "s"]


def test_id_key_a_missing_value_never_merges_and_values_keep_their_type():
    # EnsembleRetriever raises KeyError for a document without the field; here it keeps its chunk identity
    lex = [_c("a#0", None), _c("b#0", None), _c("n#0", 1), _c("s#0", "1")]
    vec = [_c("a#0", None), _c("n#1", 1)]
    out = fuse([lex, vec], id_key="doc_id")
    assert sorted(_ids(out)) == ["a#0", "b#0", "n#0", "s#0"]  # a and b stay two; 1 and "1" stay two; n#1 joins 1
    scores = {d.metadata["chunk_id"]: d.metadata["scores"]["fused"] for d in out}
    assert scores["n#0"] == pytest.approx(1 / 63 + 1 / 62) and scores["s#0"] == pytest.approx(1 / 64)


def test_id_key_fetch_k_counts_chunks_and_a_restricted_chunk_drops_its_value():
    lex = [_c("p#0", "p"), _c("p#1", "p"), _c("q#0", "q"), _c("r#0", "r")]
    # fetch_k still counts the chunks a channel is asked for: the first two of lex are both p's
    h = HybridRetriever(retrievers=[FixedRetriever(docs=lex)], k=2, fetch_k=2, fusion="rrf", id_key="doc_id")
    assert [d.metadata["doc_id"] for d in h.invoke("x")] == ["p"]
    assert [d.metadata["doc_id"] for d in h.invoke("x", fetch_k=3)] == ["p", "q"]
    secret = _d("q#9", doc_id="q", sensitivity="RESTRICTED")
    h = HybridRetriever(retrievers=[FixedRetriever(docs=lex), FixedRetriever(docs=[secret])], k=10, id_key="doc_id")
    assert [d.metadata["doc_id"] for d in h.invoke("x")] == ["p", "r"]  # fail closed: q has a RESTRICTED chunk


@pytest.mark.parametrize(("value", "error"), [("", ValueError), (3, TypeError), (["doc_id"], TypeError)])
def test_id_key_must_be_a_field_name(value, error):
    with pytest.raises(error, match="id_key"):
        HybridRetriever(retrievers=[FixedRetriever(docs=[A])], id_key=value)
    with pytest.raises(error, match="id_key"):
        fuse([[A]], id_key=value)


def test_score_threshold_drops_fused_scores_below_it_on_the_fusions_scale():
    chans = [FixedRetriever(docs=lst) for lst in _convex_lists()]
    # convex alpha .7: a .76, b .35, c .30, d 0 (test_convex_fusion_by_hand)
    h = HybridRetriever(retrievers=chans, k=10, fusion="convex", alpha=0.7, score_threshold=0.3)
    assert _ids(h.invoke("q")) == ["a#0", "b#0", "c#0"]  # c's .30 is not below .3: kept
    assert _ids(h.invoke("q", score_threshold=0.5)) == ["a#0"]  # one call's own threshold
    assert _ids(h.invoke("q", k=1)) == ["a#0"]
    assert _ids(HybridRetriever(retrievers=chans, k=10, fusion="convex", alpha=0.7).invoke("q"))[-1] == "d#0"
    # rrf: a 1/61 + 1/62, c 1/63 + 1/61, b 1/62; scale [0, 2/61]
    rrf = HybridRetriever(retrievers=[FixedRetriever(docs=[A, B, C]), FixedRetriever(docs=[C, A])], k=10,
                          fusion="rrf", score_threshold=0.02)
    assert _ids(rrf.invoke("q")) == ["a#0", "c#0"]


async def test_score_threshold_async_matches_sync():
    chans = [FixedRetriever(docs=lst) for lst in _convex_lists()]
    h = HybridRetriever(retrievers=chans, k=10, score_threshold=0.3)
    assert await h.ainvoke("q") == h.invoke("q")
    assert _ids(await h.ainvoke("q", score_threshold=0.9)) == _ids(h.invoke("q", score_threshold=0.9))


@pytest.mark.parametrize(("kw", "error", "message"), [
    ({"score_threshold": 1.5}, ValueError, r"in \[0, 1\.0\] \(the two_stage fused score"),
    ({"score_threshold": -0.1}, ValueError, "score_threshold"),
    ({"score_threshold": float("nan")}, ValueError, "score_threshold"),
    ({"score_threshold": "0.5"}, TypeError, "score_threshold"),
    ({"score_threshold": 0.04, "fusion": "rrf"}, ValueError, r"RRF fused score, in \[0, 0\.0327869\]"),
])
def test_score_threshold_outside_its_scale_is_refused(kw, error, message):
    chans = [FixedRetriever(docs=[A]), FixedRetriever(docs=[B])]
    with pytest.raises(error, match=message):
        HybridRetriever(retrievers=chans, **kw)
    value = kw["score_threshold"]
    other = {k: v for k, v in kw.items() if k != "score_threshold"}
    with pytest.raises(error, match=message):
        HybridRetriever(retrievers=chans, **other).invoke("q", score_threshold=value)


def test_id_key_and_score_threshold_are_saved(tmp_path):
    from langchain_ragspine.embeddings import HashingEmbeddings

    emb = HashingEmbeddings(128)
    h = HybridRetriever.from_documents(_hybrid_docs(), emb, k=5, id_key="doc_id", score_threshold=0.2)
    h.save(tmp_path / "H")
    loaded = HybridRetriever.load(tmp_path / "H", embedding=emb)
    assert (loaded.id_key, loaded.score_threshold) == ("doc_id", 0.2)
    assert loaded.invoke("梅雨の季節") == h.invoke("梅雨の季節")


def test_rrf_ties_go_to_the_earlier_channels_better_rank_then_the_chunk_id():
    # issue 30: each channel's #1 scores 1/61.  By chunk_id alone "a#0" (the dense #1) would come first; the
    # earlier (lexical) channel's #1 wins the tie, as LlamaIndex's and Haystack's RRF keep the earlier list's document.
    z, a, m, y = _d("z#0"), _d("a#0"), _d("m#0"), _d("y#0")
    lexical, dense = FixedRetriever(docs=[z, m]), FixedRetriever(docs=[a, y])
    out = HybridRetriever(retrievers=[lexical, dense], k=4, fusion="rrf").invoke("q")
    assert [d.metadata["scores"]["fused"] for d in out] == pytest.approx([1 / 61, 1 / 61, 1 / 62, 1 / 62])
    assert _ids(out) == ["z#0", "a#0", "m#0", "y#0"]
    # a tie between two documents of the earlier list: its better rank first (x: lexical #2 + dense #3;
    # w: lexical #3 + dense #2 — equal sums)
    x, w = _d("x#0"), _d("w#0")
    lexical, dense = FixedRetriever(docs=[z, x, w]), FixedRetriever(docs=[a, w, x])
    out = HybridRetriever(retrievers=[lexical, dense], k=5, fusion="rrf").invoke("q")
    assert _ids(out)[:2] == ["x#0", "w#0"]
    # the score-based fusions still break exact ties on the key
    same = [with_scores(_d("b#0"), bm25=1.0), with_scores(_d("c#0"), bm25=1.0)]
    out = HybridRetriever(retrievers=[FixedRetriever(docs=same[::-1])], k=2, fusion="convex").invoke("q")
    assert _ids(out) == ["b#0", "c#0"]
