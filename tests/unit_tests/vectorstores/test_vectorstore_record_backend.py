"""A custom record source behind the vector store (:class:`~langchain_ragspine.backends.directory.backend.
RecordBackend`): wrapped in a :class:`~langchain_ragspine.backends.directory.backend.DirectoryBackend` it is a
``StoreBackend`` like any other — searched, filtered and gated as the store directory's records are.  Handing the
record source to ``RagSpineVectorStore`` itself (the old second route, issue 26 item 8) still works for one release
and warns, naming the wrapper."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from langchain_core.documents import Document

from langchain_ragspine.backends.directory.backend import DirectoryBackend, RecordBackend
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.vectorstores import RagSpineVectorStore

EMB = HashingEmbeddings(64)


class MemoryRecords:
    """Records in a dict: each write is one assignment (atomic), the generation bumped by each."""

    def __init__(self) -> None:
        self._records: dict[str, Document] = {}
        self._generation = 0

    @property
    def generation(self) -> int:
        return self._generation

    @property
    def cache_path(self) -> Path | None:
        return None

    def records(self) -> list[Document]:
        return [self._records[k] for k in sorted(self._records)]

    def upsert(self, docs: Sequence[Document]) -> None:
        self._records = {**self._records, **{str(d.id): d for d in docs}}
        self._generation += 1

    def delete(self, ids: Sequence[str]) -> None:
        self._records = {k: v for k, v in self._records.items() if k not in set(ids)}
        self._generation += 1

    def close(self) -> None:
        pass


def _fill(store: RagSpineVectorStore) -> None:
    store.add_texts(
        ["梅雨は六月から七月にかけて続く。", "北海道には梅雨がない。", "社外秘の給与表。"],
        [{"lang": "ja", "topic": "weather"}, {"lang": "ja", "topic": "geography"},
         {"lang": "ja", "sensitivity": "RESTRICTED"}],
        ids=["tsuyu", "hokkaido", "secret"],
    )


def test_a_wrapped_record_source_is_searched_filtered_and_gated() -> None:
    records = MemoryRecords()
    assert isinstance(records, RecordBackend)
    store = RagSpineVectorStore(DirectoryBackend(records, EMB))
    _fill(store)
    assert sorted(d.id for d in records.records()) == ["hokkaido", "secret", "tsuyu"]  # written to the source
    found = store.similarity_search("梅雨", k=3)
    assert "secret" not in {d.id for d in found} and {d.id for d in found} == {"tsuyu", "hokkaido"}
    assert [d.id for d in store.similarity_search("梅雨", k=3, filter={"topic": "geography"})] == ["hokkaido"]
    assert [d.id for d in store.as_retriever(search_type="bm25", search_kwargs={"k": 1}).invoke("北海道")] == [
        "hokkaido"]
    assert store.get_by_ids(["secret"]) == []  # RESTRICTED records never leave, by id either
    store.delete(["tsuyu"])
    assert [d.id for d in store.similarity_search("梅雨", k=3)] == ["hokkaido"]


def test_a_record_source_given_directly_still_works_and_warns_naming_the_wrapper() -> None:
    records = MemoryRecords()
    with pytest.warns(DeprecationWarning, match=r"DirectoryBackend\(records, embedding\)") as caught:
        store = RagSpineVectorStore(records, EMB)
    assert caught[0].filename == __file__  # the user's line
    _fill(store)
    assert {d.id for d in store.similarity_search("梅雨", k=3)} == {"tsuyu", "hokkaido"}
