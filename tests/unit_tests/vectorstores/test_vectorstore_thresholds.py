"""Issue 27 §2: ``score_threshold`` on ``RagSpineVectorStore`` works in every search type that has a relevance score
and is refused by name where it has none.

Before, ``hybrid``, ``bm25`` and ``similarity`` accepted ``score_threshold`` and ignored it (``_PASSED_ALONG``), so
``as_retriever(search_type="hybrid", search_kwargs={"score_threshold": 0.8})`` returned weak results silently, and
``mmr`` ignored it too.  Now: ``hybrid`` thresholds the fused score (``HybridRetriever``'s, in [0, 1]), ``bm25`` the
raw BM25 score (``BM25Retriever``'s), ``similarity`` the relevance score (the cosine clipped to [0, 1], as
``similarity_score_threshold`` does), and ``mmr`` refuses it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.vectorstores import RagSpineVectorStore

EMB = HashingEmbeddings(64)
TEXTS = [
    "梅雨は六月から七月にかけて続く雨の季節である。",
    "梅雨前線が停滞すると大雨になる。",
    "北京是中国的首都。",
    "The rainy season in Japan is called tsuyu.",
    "梅雨の時期は地域によって違う。梅雨明けは七月。",
    "Falcons fly over the rivers of Kyoto.",
]
Q = "梅雨の季節"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[RagSpineVectorStore]:
    vs = RagSpineVectorStore(tmp_path / "s", EMB)
    vs.add_texts(TEXTS, ids=[f"t{i}" for i in range(len(TEXTS))])
    yield vs
    vs.close()


def _fused(docs: list) -> list[float]:
    return [d.metadata["scores"]["fused"] for d in docs]


def test_regression_hybrid_honours_score_threshold(store: RagSpineVectorStore) -> None:
    everything = store.as_retriever(search_kwargs={"k": 6}).invoke(Q)
    cut = sorted(_fused(everything))[len(everything) // 2]
    kept = store.as_retriever(search_kwargs={"k": 6, "score_threshold": cut}).invoke(Q)
    assert kept == [d for d in everything if d.metadata["scores"]["fused"] >= cut]
    assert 0 < len(kept) < len(everything)
    per_call = store.as_retriever(search_kwargs={"k": 6}).invoke(Q, score_threshold=cut)
    assert [d.id for d in per_call] == [d.id for d in kept]
    assert [d.id for d in store.hybrid_search(Q, k=6, score_threshold=cut)] == [d.id for d in kept]


def test_regression_bm25_honours_score_threshold_on_the_raw_score(store: RagSpineVectorStore) -> None:
    everything = store.bm25_search(Q, k=6)
    scores = [d.metadata["scores"]["bm25"] for d in everything]
    cut = sorted(scores)[len(scores) // 2]
    kept = store.as_retriever(search_type="bm25", search_kwargs={"k": 6, "score_threshold": cut}).invoke(Q)
    assert [d.id for d in kept] == [d.id for d in everything if d.metadata["scores"]["bm25"] >= cut]
    assert 0 < len(kept) < len(everything)
    assert store.bm25_search(Q, k=6, score_threshold=max(scores) + 1) == []  # unbounded scale: no top


def test_regression_similarity_honours_score_threshold_as_a_relevance_score(store: RagSpineVectorStore) -> None:
    pairs = store.similarity_search_with_relevance_scores(Q, k=6)
    cut = sorted(s for _, s in pairs)[len(pairs) // 2]
    expected = [d.id for d, s in pairs if s >= cut]
    similarity = store.as_retriever(search_type="similarity", search_kwargs={"k": 6, "score_threshold": cut})
    langchains = store.as_retriever(search_type="similarity_score_threshold",
                                    search_kwargs={"k": 6, "score_threshold": cut})
    assert [d.id for d in similarity.invoke(Q)] == [d.id for d in langchains.invoke(Q)] == expected
    assert 0 < len(expected) < len(pairs)


def test_mmr_refuses_score_threshold_by_name(store: RagSpineVectorStore) -> None:
    with pytest.raises(ValueError, match=r"score_threshold=0\.5 has no meaning for search_type='mmr'.*'hybrid'"):
        store.as_retriever(search_type="mmr", search_kwargs={"score_threshold": 0.5})
    with pytest.raises(ValueError, match=r"score_threshold=0\.5 has no meaning for search_type='mmr'"):
        store.as_retriever(search_type="mmr").invoke(Q, score_threshold=0.5)
    with pytest.raises(ValueError, match=r"no meaning for search_type='mmr'"):
        store.max_marginal_relevance_search(Q, score_threshold=0.5)
    assert store.as_retriever(search_type="mmr", search_kwargs={"k": 2}).invoke(Q)  # without it, as before


@pytest.mark.parametrize(
    ("search_type", "value", "error", "message"),
    [
        ("hybrid", 1.5, ValueError, r"score_threshold must be a number in \[0, 1\.0\].*fused score"),
        ("similarity", 1.5, ValueError, r"score_threshold must be a number in \[0, 1\.0\].*relevance score"),
        ("bm25", -1, ValueError, r"score_threshold must be a finite number >= 0.*raw BM25 score"),
        ("hybrid", "0.5", TypeError, r"score_threshold must be a number or None"),
        ("bm25", float("nan"), ValueError, r"score_threshold must be a finite number"),
    ],
)
def test_a_threshold_off_its_scale_is_refused_naming_the_scale(
    store: RagSpineVectorStore, search_type: str, value: object, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        store.as_retriever(search_type=search_type, search_kwargs={"score_threshold": value}).invoke(Q)


@pytest.mark.parametrize("bad, error", [("x", TypeError), ("0.5", TypeError), (True, TypeError), (-5, ValueError),
                                        (1.5, ValueError), (float("nan"), ValueError)])
def test_relevance_score_search_checks_its_threshold(tmp_path, bad, error) -> None:
    # issue 27 trial 2, F1: similarity_search_with_relevance_scores handed score_threshold to langchain_core as it
    # was ("x": "'>=' not supported between 'float' and 'str'"; -5: every result kept), while similarity_search
    # named it
    store = RagSpineVectorStore.from_texts(["梅雨は六月。", "紅葉は十一月。"], HashingEmbeddings(64),
                                           store_dir=tmp_path / "s")
    with pytest.raises(error, match="score_threshold"):
        store.similarity_search_with_relevance_scores("梅雨", score_threshold=bad)
    with pytest.raises(error, match="score_threshold"):
        asyncio.run(store.asimilarity_search_with_relevance_scores("梅雨", score_threshold=bad))
    assert [d.page_content for d, _ in store.similarity_search_with_relevance_scores("梅雨", k=1,
                                                                                      score_threshold=0.0)] == ["梅雨は六月。"]


# -- a keyword the search type does not use (issue 26, after the trial of 2026-12-02) -----------------------------
# Before, ``search_kwargs={"lambda_mult": 0.3}`` with search_type "hybrid" (or "similarity", "bm25", ...) and
# ``fetch_k`` with "similarity" / "bm25" were taken and silently ignored: a user tuning diversity on a hybrid
# retriever saw no change and no error.
UNUSED = [
    ("hybrid", "lambda_mult", 0.3),
    ("similarity", "lambda_mult", 0.3),
    ("similarity_score_threshold", "lambda_mult", 0.3),
    ("bm25", "lambda_mult", 0.3),
    ("similarity", "fetch_k", 30),
    ("bm25", "fetch_k", 30),
    ("mmr", "score_threshold", 0.5),
]


@pytest.mark.parametrize(("search_type", "name", "value"), UNUSED)
def test_regression_a_search_kwarg_the_search_type_does_not_use_is_refused_by_name(
    store: RagSpineVectorStore, search_type: str, name: str, value: float
) -> None:
    message = rf"{name}={value} has no meaning for search_type='{search_type}'"
    extra = {"score_threshold": 0.1} if search_type == "similarity_score_threshold" else {}
    with pytest.raises(ValueError, match=message):  # when the retriever is built
        store.as_retriever(search_type=search_type, search_kwargs={name: value, **extra})
    retriever = store.as_retriever(search_type=search_type, search_kwargs=extra)
    with pytest.raises(ValueError, match=message):  # per call
        retriever.invoke(Q, **{name: value})
    with pytest.raises(ValueError, match=message):
        asyncio.run(retriever.ainvoke(Q, **{name: value}))
    retriever.invoke(Q)  # without it, as before


def test_regression_the_store_methods_refuse_a_keyword_their_search_type_does_not_use(
    store: RagSpineVectorStore,
) -> None:
    for method, name in [(store.similarity_search, "fetch_k"), (store.similarity_search, "lambda_mult"),
                         (store.hybrid_search, "lambda_mult"), (store.bm25_search, "fetch_k")]:
        with pytest.raises(ValueError, match=rf"^{name}=0\.5 has no meaning"):
            method(Q, **{name: 0.5})
        assert method(Q, **{name: None})  # None is no keyword
    # the keywords each search type does use are taken
    assert store.as_retriever(search_type="mmr", search_kwargs={"fetch_k": 6, "lambda_mult": 0.2}).invoke(Q)
    assert store.as_retriever(search_type="hybrid", search_kwargs={"fetch_k": 6, "score_threshold": 0.0}).invoke(Q)
    assert store.hybrid_search(Q, fetch_k=6)


@pytest.mark.parametrize(("search_type", "search_kwargs", "error", "message"), [
    ("similarity", {"k": "3"}, TypeError, r"k must be an int >= 1, got str '3'"),
    ("hybrid", {"k": 0}, ValueError, r"k must be an int >= 1, got 0"),
    ("similarity", {"k": True}, TypeError, r"k must be an int >= 1, got bool True"),
    ("mmr", {"fetch_k": 2.5}, TypeError, r"fetch_k must be an int >= 1"),
    ("mmr", {"lambda_mult": 2}, ValueError, r"lambda_mult must be a number in \[0, 1\], got 2"),
    ("bm25", {"score_threshold": "x"}, TypeError, r"score_threshold must be a number or None"),
    ("hybrid", {"score_threshold": -1}, ValueError, r"score_threshold must be a finite number >= 0"),
])
def test_regression_a_bad_search_kwargs_value_fails_when_the_retriever_is_built(
    store: RagSpineVectorStore, search_type: str, search_kwargs: dict, error: type[Exception], message: str
) -> None:
    """Trial of 5d1ab81: ``as_retriever(search_kwargs={"k": "3"})`` was built and failed at its first invoke —
    in a chain, far from the line that made it."""
    with pytest.raises(error, match=message):
        store.as_retriever(search_type=search_type, search_kwargs=search_kwargs)
