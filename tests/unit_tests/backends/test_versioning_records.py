"""The vector store's record rules in ``backends/versioning.py`` (issue 26, B5), pure: what both backends store for
a record (``mark_record``), what they give back (``written_record`` / ``written_document``), and how a write becomes
the documents' next versions (``merged_versions``)."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document

from langchain_ragspine.backends.versioning import (
    READ_BACK_KEYS,
    VECTORSTORE_RECORD_KEY,
    StoredChunk,
    mark_record,
    merged_versions,
    written_document,
    written_record,
)


def _row(doc_id: str, chunk_id: str, text: str, metadata: dict, version: int = 1) -> StoredChunk:
    return StoredChunk(chunk_id=chunk_id, doc_id=doc_id, text=text, start_index=None, end_index=None,
                       source_locator=None, title=metadata.get("title"), sensitivity=None, metadata=metadata,
                       valid_as_of="", ingested_at="2026-01-01T00:00:00+00:00", version=version, active=True)


@pytest.mark.parametrize("metadata", [
    {}, {"lang": "ja"}, {"doc_id": "law"}, {"chunk_id": "other", "doc_id": ""},
    {"doc_version": 7, "valid_as_of": "2024-01-01", "ingested_at": "mine", "title": "T"},
])
def test_a_record_reads_back_as_written_from_its_row_and_from_to_document(metadata: dict) -> None:
    record = Document("梅雨", id="r1", metadata=metadata)
    stored = mark_record(record, also=READ_BACK_KEYS)
    assert stored.metadata["chunk_id"] == "r1" and stored.metadata["doc_id"] == (metadata.get("doc_id") or "r1")
    row = _row(stored.metadata["doc_id"], "r1", "梅雨", stored.metadata, version=3)
    assert written_record(row) == record
    assert written_document(row.to_document()) == record  # what PostgreSQL's searches read rows back as


def test_a_row_without_the_marker_reads_back_with_its_lineage() -> None:
    row = _row("law", "law#0", "第一条", {"doc_id": "law", "chunk_id": "law#0"})
    assert written_record(row) == row.to_document() == written_document(row.to_document())
    with pytest.raises(ValueError, match=f"{VECTORSTORE_RECORD_KEY!r} is reserved"):
        mark_record(Document("x", id="x", metadata={VECTORSTORE_RECORD_KEY: 1}))


def test_merged_versions_replaces_appends_moves_and_deletes() -> None:
    active = [_row("a", "a0", "old a0", {"doc_id": "a", "chunk_id": "a0"}),
              _row("a", "a1", "old a1", {"doc_id": "a", "chunk_id": "a1"}),
              _row("b", "b0", "old b0", {"doc_id": "b", "chunk_id": "b0"})]
    put = [Document("new a1", id="a1", metadata={"doc_id": "a"}),
           Document("moved", id="b0", metadata={"doc_id": "a"}),  # b0 leaves b for a: b is retracted
           Document("new c0", id="c0")]
    got = merged_versions(put, active)
    assert {d: [(c.id, c.page_content) for c in cs] for d, cs in got.items()} == {
        "a": [("a0", "old a0"), ("a1", "new a1"), ("b0", "moved")], "b": [], "c0": [("c0", "new c0")]}
    assert merged_versions([], active, delete=["a0", "zz"]) == {"a": [Document("old a1", id="a1", metadata={
        "doc_id": "a", "chunk_id": "a1"})]}
    assert merged_versions([], active, delete=["zz"]) == {}  # an unknown id changes nothing
    twice = merged_versions([Document("1", id="x"), Document("2", id="x")], [])
    assert [c.page_content for c in twice["x"]] == ["2"]  # the last of repeated ids wins
