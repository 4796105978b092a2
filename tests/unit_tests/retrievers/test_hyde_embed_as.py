"""HyDE embeds its hypothetical document as a document (issue 14): the ``embed_as`` call option of the dense and
hybrid retrievers, and HyDE passing ``embed_as="document"`` for the probe's search only.

Gao et al. ("Precise Zero-Shot Dense Retrieval without Relevance Labels", 2022) encode the hypothetical document with
the document encoder, and LangChain's ``HypotheticalDocumentEmbedder.embed_query`` calls ``embed_documents``; before
this change the probe went through ``embed_query`` (e5's ``"query: "`` prefix).  A spy ``Embeddings`` records which
method embedded which text.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import InMemoryVectorStore
from pydantic import Field

from langchain_ragspine import BM25Retriever, DenseRetriever, HybridRetriever
from langchain_ragspine.backends.directory.embedding_cache import EmbeddingCache
from langchain_ragspine.embeddings import CachedEmbeddings, HashingEmbeddings
from langchain_ragspine.retrievers import (
    EmbedAsIgnoredWarning,
    FilterExtractionRetriever,
    HyDERetriever,
    MultiIndexRetriever,
    ParentChildRetriever,
)
from langchain_ragspine.retrievers.query_transform import PROBE_PLACEHOLDER, TRACE_KEY
from langchain_ragspine.vectorstores import RagSpineVectorStore
from tests.unit_tests._transform_fakes import SpyChatModel, SpyRetriever, doc

QUESTION = "梅雨はいつ始まりますか"
PROBE = "梅雨は毎年六月ごろに始まる長雨の季節で、七月中旬まで続く。"
DOCS = [
    doc("tsuyu#0", "梅雨は六月から七月にかけて続く雨の季節。"),
    doc("tsuyu#1", "梅雨は毎年六月ごろに始まる長雨の季節で、七月中旬まで続く。"),
    doc("beijing#0", "北京是中国的首都。"),
    doc("en#0", "The rainy season in Japan is called tsuyu."),
]


class SpyEmbeddings(Embeddings):
    """e5-like roles over hashing: ``"query: "`` / ``"passage: "`` before the text; records every call as
    ``(method, text)``."""

    def __init__(self) -> None:
        self.inner = HashingEmbeddings(64)
        self.calls: list[tuple[str, str]] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += [("embed_documents", t) for t in texts]
        return self.inner.embed_documents([f"passage: {t}" for t in texts])

    def embed_query(self, text: str) -> list[float]:
        self.calls.append(("embed_query", text))
        return self.inner.embed_query(f"query: {text}")

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += [("aembed_documents", t) for t in texts]
        await asyncio.sleep(0)
        return self.inner.embed_documents([f"passage: {t}" for t in texts])

    async def aembed_query(self, text: str) -> list[float]:
        self.calls.append(("aembed_query", text))
        await asyncio.sleep(0)
        return self.inner.embed_query(f"query: {text}")


class KwargsSpy(BaseRetriever):
    """A foreign retriever that takes any keyword and records each call's keywords."""

    docs: list[Document] = Field(default_factory=list)
    seen: list[tuple[str, dict[str, Any]]] = Field(default_factory=list)

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        self.seen.append((query, dict(kwargs)))
        return list(self.docs)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        self.seen.append((query, dict(kwargs)))
        return list(self.docs)


def _dense(emb: Embeddings, **kw: Any) -> DenseRetriever:
    return DenseRetriever.from_documents(DOCS, emb, **kw)


def _hybrid(emb: Embeddings) -> HybridRetriever:
    return HybridRetriever(retrievers=[BM25Retriever.from_documents(DOCS), _dense(emb)], k=3)


def _run(retriever: BaseRetriever, query: str, mode: str, **kw: Any) -> list[Document]:
    return asyncio.run(retriever.ainvoke(query, **kw)) if mode == "async" else retriever.invoke(query, **kw)


def _method(name: str, mode: str) -> str:
    return f"a{name}" if mode == "async" else name


# ---------------------------------------------------------------------------------------------------- HyDE
@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("kind", ["dense", "hybrid"])
def test_hyde_embeds_the_probe_as_a_document_and_the_question_as_a_query(kind: str, mode: str) -> None:
    emb = SpyEmbeddings()
    base = _dense(emb) if kind == "dense" else _hybrid(emb)
    emb.calls.clear()  # the chunks' embedding at build time
    hyde = HyDERetriever(base, SpyChatModel(replies=[PROBE]), k=3)
    docs = _run(hyde, QUESTION, mode)
    assert sorted(emb.calls) == sorted([(_method("embed_query", mode), QUESTION),
                                        (_method("embed_documents", mode), PROBE)])
    # the probe is still never returned or traced
    assert all(d.page_content != PROBE or d.metadata["chunk_id"] == "tsuyu#1" for d in docs)
    assert all(d.metadata[TRACE_KEY][0]["queries"] == [QUESTION, PROBE_PLACEHOLDER] for d in docs)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_hyde_without_the_question_embeds_only_the_probe_as_a_document(mode: str) -> None:
    emb = SpyEmbeddings()
    base = _dense(emb)
    emb.calls.clear()
    _run(HyDERetriever(base, SpyChatModel(replies=[PROBE]), include_original=False, k=2), QUESTION, mode)
    assert emb.calls == [(_method("embed_documents", mode), PROBE)]


def test_the_document_role_finds_the_chunk_the_probe_copies_with_cosine_one() -> None:
    """With e5-like roles, a probe that is a chunk's very text meets that chunk's vector exactly only in the
    document role (chunks are embedded as documents); in the query role the prefix differs."""
    base = _dense(SpyEmbeddings())
    as_doc = base.invoke(PROBE, k=1, embed_as="document")[0]
    as_query = base.invoke(PROBE, k=1)[0]
    assert as_doc.metadata["chunk_id"] == "tsuyu#1"
    assert as_doc.metadata["scores"]["vector"] == pytest.approx(1.0, abs=1e-6)
    assert as_query.metadata["scores"]["vector"] < 0.999


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_hyde_over_a_foreign_base_passes_no_unknown_keyword(mode: str) -> None:
    base = KwargsSpy(docs=DOCS[:2])
    docs = _run(HyDERetriever(base, SpyChatModel(replies=[PROBE]), k=2), QUESTION, mode)
    assert sorted(q for q, _ in base.seen) == sorted([QUESTION, PROBE])
    assert all("embed_as" not in kw for _, kw in base.seen), base.seen
    assert [d.metadata["chunk_id"] for d in docs] == ["tsuyu#0", "tsuyu#1"]
    # a foreign retriever that names k and filter (and would fail on any other keyword) gets the probe as a query
    spy = SpyRetriever(default=DOCS[:2])
    _run(HyDERetriever(spy, SpyChatModel(replies=[PROBE]), k=2), QUESTION, mode)
    assert sorted(spy.queries) == sorted([QUESTION, PROBE])


def test_hyde_over_bm25_is_unchanged_bm25_would_refuse_the_option() -> None:
    bm25 = BM25Retriever.from_documents(DOCS)
    with pytest.raises(TypeError, match="embed_as"):
        bm25.invoke(QUESTION, embed_as="document")
    hyde = HyDERetriever(bm25, SpyChatModel(replies=[PROBE]), k=3)
    got = [(d.metadata["chunk_id"], d.metadata[TRACE_KEY][0]["matched"]) for d in hyde.invoke(QUESTION)]
    assert got[0] == ("tsuyu#1", [0, 1])


def test_hyde_without_a_model_embeds_the_question_as_a_query_only() -> None:
    emb = SpyEmbeddings()
    base = _dense(emb)
    emb.calls.clear()
    with pytest.warns(UserWarning):
        hyde = HyDERetriever(base, None, k=2)
    assert hyde.invoke(QUESTION) == base.invoke(QUESTION, k=2)
    assert emb.calls == [("embed_query", QUESTION)] * 2


def test_hyde_fallback_searches_the_question_as_a_query() -> None:
    """A failed model call: only the user's question is searched, in the query role."""
    emb = SpyEmbeddings()
    base = _dense(emb)
    emb.calls.clear()
    HyDERetriever(base, SpyChatModel(error="down"), k=2).invoke(QUESTION)
    assert emb.calls == [("embed_query", QUESTION)]


# ---------------------------------------------------------------------------------------------------- the option
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_dense_embed_as(mode: str) -> None:
    emb = SpyEmbeddings()
    dense = _dense(emb)
    emb.calls.clear()
    default = _run(dense, QUESTION, mode)
    assert _run(dense, QUESTION, mode, embed_as="query") == default
    as_doc = _run(dense, QUESTION, mode, embed_as="document")
    assert emb.calls == [(_method("embed_query", mode), QUESTION)] * 2 + [(_method("embed_documents", mode), QUESTION)]
    vector = np.asarray(HashingEmbeddings(64).embed_documents([f"passage: {QUESTION}"])[0])
    assert [d.metadata["chunk_id"] for d in as_doc] == [dense.docs[i].metadata["chunk_id"]
                                                        for i, _ in dense.search_by_vector(vector)]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_hybrid_hands_embed_as_to_dense_channels_only(mode: str) -> None:
    emb = SpyEmbeddings()
    foreign = KwargsSpy(docs=DOCS[2:])
    hybrid = HybridRetriever(retrievers=[BM25Retriever.from_documents(DOCS), _dense(emb), foreign], k=3)
    emb.calls.clear()
    _run(hybrid, QUESTION, mode, embed_as="document")
    assert emb.calls == [(_method("embed_documents", mode), QUESTION)]
    assert foreign.seen == [(QUESTION, {})]
    emb.calls.clear()
    foreign.seen.clear()
    _run(hybrid, QUESTION, mode)  # not given: nobody is passed it
    assert emb.calls == [(_method("embed_query", mode), QUESTION)]
    assert foreign.seen == [(QUESTION, {})]


@pytest.mark.parametrize("value", ["passage", "documents", "QUERY", "", 1, True])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_bad_embed_as_is_a_value_error(value: Any, mode: str) -> None:
    emb = SpyEmbeddings()
    bm25_only = HybridRetriever(retrievers=[BM25Retriever.from_documents(DOCS)])
    for retriever in (_dense(emb), _hybrid(emb), bm25_only):
        emb.calls.clear()
        for query in (QUESTION, "  "):  # checked before anything, also for a blank query
            with pytest.raises(ValueError, match="embed_as must be 'query'.*or 'document'"):
                _run(retriever, query, mode, embed_as=value)
        assert emb.calls == []


# ---------------------------------------------------------------------------------------------------- caches
def test_the_probe_is_never_written_to_the_embedding_cache(tmp_path: Path) -> None:
    cache_file = tmp_path / "embeddings.sqlite"
    emb = SpyEmbeddings()
    base = _dense(emb, cache_path=cache_file)
    with EmbeddingCache(cache_file, read_only=True) as cache:
        before = cache.count()
    assert before == len(DOCS)
    HyDERetriever(base, SpyChatModel(replies=[PROBE]), k=2).invoke(QUESTION)
    with EmbeddingCache(cache_file, read_only=True) as cache:
        assert cache.count() == before
    # a rebuild over the same chunks embeds nothing: the cache is as the chunks left it
    emb.calls.clear()
    assert _dense(emb, cache_path=cache_file).last_embedded == 0


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_cache_wrapper_given_as_embedding_does_not_store_the_probe(tmp_path: Path, mode: str) -> None:
    """``CachedEmbeddings.embed_documents`` stores what it embeds (keyed by model and text, unbounded); a probe goes
    to the model behind it."""
    spy = SpyEmbeddings()
    with EmbeddingCache(tmp_path / "e.sqlite") as cache:
        wrapper = CachedEmbeddings(spy, cache)
        base = _dense(wrapper)
        rows = cache.count()
        spy.calls.clear()
        _run(HyDERetriever(base, SpyChatModel(replies=[PROBE]), k=2), QUESTION, mode)
        assert cache.count() == rows
        assert (_method("embed_documents", mode), PROBE) in spy.calls


def test_langchains_cache_backed_embeddings_does_not_store_the_probe() -> None:
    cache_module = pytest.importorskip("langchain_classic.embeddings")
    from langchain_core.stores import InMemoryByteStore

    spy = SpyEmbeddings()
    store = InMemoryByteStore()
    wrapper = cache_module.CacheBackedEmbeddings.from_bytes_store(spy, store, namespace="spy", key_encoder="sha256")
    base = _dense(wrapper)
    keys = set(store.yield_keys())
    assert len(keys) == len(DOCS)
    spy.calls.clear()
    HyDERetriever(base, SpyChatModel(replies=[PROBE]), k=2).invoke(QUESTION)
    assert set(store.yield_keys()) == keys
    assert spy.calls == [("embed_query", QUESTION), ("embed_documents", PROBE)]


# ------------------------------------------------------------------------- the probe through wrappers (regressions)
# Before: ParentChildRetriever, MultiIndexRetriever, FilterExtractionRetriever and any VectorStoreRetriever did not
# declare embed_as, so HyDE over them embedded its hypothetical document with embed_query.
class ParentStore:
    """Parents by id (what ParentChildRetriever reads): each chunk of DOCS is its own parent ``"{chunk_id}/p"``."""

    def get_parents(self, ids: list[str]) -> dict[str, Document]:
        by_id = {f"{d.metadata['chunk_id']}/p": d for d in DOCS}
        return {i: Document(page_content=by_id[i].page_content, metadata={"chunk_id": i}) for i in ids if i in by_id}


def _children() -> list[Document]:
    return [Document(page_content=d.page_content, metadata={**d.metadata, "parent_id": f"{d.metadata['chunk_id']}/p"})
            for d in DOCS]


def _wrapped(kind: str, emb: Embeddings) -> BaseRetriever:
    if kind == "parent_child":
        return ParentChildRetriever(DenseRetriever.from_documents(_children(), emb), ParentStore(), fetch_k=4,
                                    k=3)
    if kind == "parent_child_over_hybrid":
        child = HybridRetriever(retrievers=[BM25Retriever.from_documents(_children()),
                                            DenseRetriever.from_documents(_children(), emb)], k=4)
        return ParentChildRetriever(child, ParentStore(), fetch_k=4, k=3)
    if kind == "multi_index":
        return MultiIndexRetriever({"ja": _dense(emb), "bm25": BM25Retriever.from_documents(DOCS)},
                                   lambda q: ["ja", "bm25"], k=3)
    if kind == "filter_extraction":
        return FilterExtractionRetriever(_dense(emb), k=3)
    raise AssertionError(kind)


def _spied(kind: str) -> tuple[SpyEmbeddings, BaseRetriever]:
    """A spy embedding and the wrapper ``kind`` over it, the build-time calls forgotten."""
    emb = SpyEmbeddings()
    base = _wrapped(kind, emb)
    emb.calls.clear()
    return emb, base


WRAPPERS = ["parent_child", "parent_child_over_hybrid", "multi_index", "filter_extraction"]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("kind", WRAPPERS)
def test_hyde_probe_reaches_the_dense_channel_through_a_wrapper_as_a_document(kind: str, mode: str) -> None:
    emb, base = _spied(kind)
    docs = _run(HyDERetriever(base, SpyChatModel(replies=[PROBE]), k=3), QUESTION, mode)
    assert sorted(emb.calls) == sorted([(_method("embed_query", mode), QUESTION),
                                        (_method("embed_documents", mode), PROBE)])
    assert docs and all(d.metadata[TRACE_KEY][0]["queries"] == [QUESTION, PROBE_PLACEHOLDER] for d in docs)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("kind", WRAPPERS)
def test_a_wrapper_hands_embed_as_on_and_without_it_embeds_as_a_query(kind: str, mode: str) -> None:
    emb, base = _spied(kind)
    as_query = _run(base, PROBE, mode)
    assert _run(base, PROBE, mode, embed_as="query") == as_query
    assert emb.calls == [(_method("embed_query", mode), PROBE)] * 2
    emb.calls.clear()
    _run(base, PROBE, mode, embed_as="document")
    assert emb.calls == [(_method("embed_documents", mode), PROBE)]
    with pytest.raises(ValueError, match="embed_as must be 'query'"):
        _run(base, PROBE, mode, embed_as="passage")


def test_a_wrapper_over_bm25_drops_the_option() -> None:
    bm25 = BM25Retriever.from_documents(_children())
    for base in (ParentChildRetriever(bm25, ParentStore(), fetch_k=4, k=2), FilterExtractionRetriever(bm25)):
        assert base.invoke(PROBE, embed_as="document") == base.invoke(PROBE)


def _in_memory(emb: Embeddings, search_type: str, store_class: Any = None, **search_kwargs: Any) -> Any:
    store = (store_class or InMemoryVectorStore)(emb)
    store.add_documents(DOCS)
    kwargs: dict[str, Any] = {"k": 3, **search_kwargs}
    return store.as_retriever(search_type=search_type, search_kwargs=kwargs)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("search_type", ["similarity", "mmr"])
def test_hyde_over_a_langchain_vectorstore_retriever_searches_by_the_document_vector(search_type: str,
                                                                                     mode: str) -> None:
    emb = SpyEmbeddings()
    base = _in_memory(emb, search_type, fetch_k=4)
    emb.calls.clear()
    docs = _run(HyDERetriever(base, SpyChatModel(replies=[PROBE]), include_original=False, k=3), QUESTION, mode)
    assert emb.calls == [(_method("embed_documents", mode), PROBE)]
    assert docs[0].page_content == PROBE  # the chunk whose passage vector the probe's equals
    # the same vector as the store's own by-vector search of the probe's passage embedding
    vector = emb.inner.embed_documents([f"passage: {PROBE}"])[0]
    expected = (base.vectorstore.similarity_search_by_vector(vector, k=3) if search_type == "similarity"
                else base.vectorstore.max_marginal_relevance_search_by_vector(vector, k=3, fetch_k=4))
    assert [d.page_content for d in docs] == [d.page_content for d in expected]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_hyde_over_a_hybrid_with_a_langchain_vectorstore_channel(mode: str) -> None:
    emb = SpyEmbeddings()
    hybrid = HybridRetriever(retrievers=[BM25Retriever.from_documents(DOCS), _in_memory(emb, "similarity")], k=3)
    emb.calls.clear()
    _run(HyDERetriever(hybrid, SpyChatModel(replies=[PROBE]), k=3), QUESTION, mode)
    assert sorted(emb.calls) == sorted([(_method("embed_query", mode), QUESTION),
                                        (_method("embed_documents", mode), PROBE)])


def _stores_without_the_document_role() -> list[tuple[str, Any]]:
    class ScoredStore(InMemoryVectorStore):  # InMemoryVectorStore has no relevance function of its own
        def _select_relevance_score_fn(self) -> Any:
            return lambda score: score

    class NoEmbeddingsStore(InMemoryVectorStore):  # a store that does not expose its model
        @property
        def embeddings(self) -> Any:
            return None

    return [("similarity_score_threshold", ScoredStore), ("similarity", NoEmbeddingsStore)]


@pytest.mark.parametrize(("search_type", "store_class"), _stores_without_the_document_role())
def test_a_vectorstore_retriever_that_cannot_take_the_document_role_falls_back_visibly(search_type: str,
                                                                                       store_class: Any) -> None:
    emb = SpyEmbeddings()
    extra = {"score_threshold": -1.0} if search_type == "similarity_score_threshold" else {}
    base = _in_memory(emb, search_type, store_class, **extra)
    emb.calls.clear()
    hyde = HyDERetriever(base, SpyChatModel(replies=[PROBE]), include_original=False, k=3)
    with pytest.warns(EmbedAsIgnoredWarning, match=f"search type {search_type!r}.*embed_query") as record:
        assert hyde.invoke(QUESTION)
    assert record[0].filename == __file__  # points at the user's line
    assert emb.calls == [("embed_query", PROBE)]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("search_type", ["hybrid", "similarity", "mmr"])
def test_hyde_over_the_ragspine_store_retriever_embeds_the_probe_as_a_document(tmp_path: Path, search_type: str,
                                                                               mode: str) -> None:
    emb = SpyEmbeddings()
    store = RagSpineVectorStore(tmp_path / "S", emb)
    store.add_documents(DOCS)
    base = store.as_retriever(search_type=search_type, search_kwargs={"k": 3})
    base.invoke("warm up")  # builds the indexes (the chunks are embedded as documents then)
    emb.calls.clear()
    docs = _run(HyDERetriever(base, SpyChatModel(replies=[PROBE]), k=3), QUESTION, mode)
    run = "sync" if search_type == "hybrid" else mode  # the store's async hybrid search runs the sync one in a thread
    assert sorted(emb.calls) == sorted([(_method("embed_query", run), QUESTION),
                                        (_method("embed_documents", run), PROBE)])
    assert PROBE in [d.page_content for d in docs]
    emb.calls.clear()
    assert _run(base, PROBE, mode, embed_as="query") == _run(base, PROBE, mode)
    assert emb.calls == [(_method("embed_query", run), PROBE)] * 2
    store.close()


def test_the_ragspine_store_retriever_bm25_and_threshold_types(tmp_path: Path) -> None:
    emb = SpyEmbeddings()
    store = RagSpineVectorStore(tmp_path / "S", emb)
    store.add_documents(DOCS)
    bm25 = store.as_retriever(search_type="bm25", search_kwargs={"k": 3})
    assert bm25.invoke(PROBE, embed_as="document") == bm25.invoke(PROBE)  # embeds nothing
    threshold = store.as_retriever(search_type="similarity_score_threshold",
                                   search_kwargs={"k": 3, "score_threshold": 0.0})
    threshold.invoke("warm up")
    emb.calls.clear()
    with pytest.warns(EmbedAsIgnoredWarning):
        threshold.invoke(PROBE, embed_as="document")
    assert emb.calls == [("embed_query", PROBE)]
    store.close()
