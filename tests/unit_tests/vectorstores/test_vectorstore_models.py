"""One rule for a store opened with another embedding model, on both backends (issue 26, after the trial of
2026-12-02): the store records the model its vectors were made with (the first write that stores vectors, and
every ingest with a model, which re-embeds and so switches the store); opening it with another model is a
``StoreError`` naming both models (``backends.base.check_vector_model``).

Before, the directory store silently embedded every chunk again with the new model (at 12 chunks/s for e5 here, an
hour per 40,000 chunks, and a second set of vectors in the cache), while PostgreSQL refused.

The PostgreSQL cases need the session's PostgreSQL (``pg_server`` in ``tests/conftest.py``) and skip without it.
"""

from __future__ import annotations

from contextlib import closing
from pathlib import Path

import pytest
from langchain_core.documents import Document

from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.errors import StoreError
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.vectorstores import RagSpineVectorStore

RECORDS = [Document("梅雨は六月に始まる。", id="a"), Document("台風は秋に来る。", id="b")]


class Counting(HashingEmbeddings):
    """A hashing model that counts the texts it embeds (same vectors and model key as its size says)."""

    calls: int = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        type(self).calls += len(texts)
        return super().embed_documents(texts)


@pytest.fixture(params=["dir", "pg"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return str(tmp_path / "store") if request.param == "dir" else str(request.getfixturevalue("pg_url"))


def test_regression_another_model_is_refused_naming_both_on_both_backends(location: str) -> None:
    with closing(RagSpineVectorStore(location, HashingEmbeddings(64))) as vs:
        vs.add_documents(RECORDS)
    Counting.calls = 0
    with pytest.raises(StoreError, match=r"were made with HashingEmbeddings\(size=64\), not Counting\(size=32\); "
                                         r"open it with that model, or re-ingest"):
        RagSpineVectorStore(location, Counting(32)).close()
    assert Counting.calls == 0  # nothing embedded again
    with closing(RagSpineVectorStore(location, HashingEmbeddings(64))) as same:  # the same model: as before
        assert [d.id for d in same.similarity_search("梅雨", k=1)] == ["a"]


def test_regression_a_writer_of_another_model_is_refused_though_it_opened_first(location: str) -> None:
    # both open a store that records no model yet; the first write records its model, the second writer's is then
    # refused in its write's transaction (nothing written), so the store never holds vectors of two models
    first, second = RagSpineVectorStore(location, HashingEmbeddings(64)), RagSpineVectorStore(location,
                                                                                              HashingEmbeddings(32))
    try:
        first.add_documents(RECORDS[:1])
        with pytest.raises(StoreError, match=r"made with HashingEmbeddings\(size=64\), not HashingEmbeddings\(size=32"):
            second.add_documents(RECORDS[1:])
        assert [d.id for d in first.get_by_ids(["a", "b"])] == ["a"]
    finally:
        first.close()
        second.close()


def test_a_store_without_vectors_opens_with_any_model_and_an_ingest_switches_it(location: str,
                                                                              tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "tsuyu.md").write_text("# 梅雨\n\n梅雨は六月に始まる。\n", "utf-8")
    ingest(corpus, location, progress=False, mode="bm25")  # BM25 only: no model recorded
    with closing(RagSpineVectorStore(location, HashingEmbeddings(32))) as vs:  # any model: this one is the first
        vs.add_documents(RECORDS)
    ingest(corpus, location, progress=False, embedding="hashing")  # re-embeds with HashingEmbeddings(256)
    with pytest.raises(StoreError, match=r"made with HashingEmbeddings\(size=256\), not HashingEmbeddings\(size=32"):
        RagSpineVectorStore(location, HashingEmbeddings(32)).close()
    with closing(RagSpineVectorStore(location, HashingEmbeddings(256))) as vs:
        assert {d.id for d in vs.get_by_ids(["a", "b"])} == {"a", "b"}  # the vector store's records are kept
