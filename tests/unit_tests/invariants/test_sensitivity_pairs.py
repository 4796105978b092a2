"""``drop_restricted_pairs``: the one RESTRICTED gate of the exits that return ``(document, score)`` pairs
(``RagSpineVectorStore.similarity_search_with_score``, over the directory store and over any backend; each store
wrote the same filter inline before)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document

from langchain_ragspine import RagSpineVectorStore
from langchain_ragspine.backends.base import MMR
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.sensitivity import drop_restricted_pairs
from langchain_ragspine.vectorstores import store as vs_store

EMB = HashingEmbeddings(64)


def test_drop_restricted_pairs_keeps_order_scores_and_objects() -> None:
    keep1 = Document("a", metadata={"sensitivity": "PUBLIC"})
    keep2: dict[str, Any] = {"doc_id": "m"}
    pairs = [
        (keep1, 0.9),
        (Document("b", metadata={"sensitivity": "R-E-S-T-R-I-C-T-E-D"}), 0.8),
        (keep2, 0.7),
        (Document("c", metadata={"Ｓｅｎｓｉｔｉｖｉｔｙ": "R\u0415STRICT\u0415D"}), 0.6),
        (keep1, 0.5),
    ]
    got = drop_restricted_pairs(iter(pairs))
    assert got == [(keep1, 0.9), (keep2, 0.7), (keep1, 0.5)]
    assert got[0][0] is keep1 and got[1][0] is keep2
    assert drop_restricted_pairs([]) == []


def test_the_local_store_scored_exit_uses_the_gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A record labelled behind the index's back (after it was built) is caught by ``similarity_search_with_score``'s
    gate; without the gate it would be returned."""
    store = RagSpineVectorStore(tmp_path / "s", EMB)
    store.add_texts(["apple banana", "cherry date"], ids=["A1", "A2"])
    store._current().record("A1").metadata["sensitivity"] = "R-E-S-T-R-I-C-T-E-D"
    assert [d.id for d, _ in store.similarity_search_with_score("apple banana", k=2)] == ["A2"]
    monkeypatch.setattr(vs_store, "drop_restricted_pairs", lambda pairs: list(pairs))
    assert "A1" in [d.id for d, _ in store.similarity_search_with_score("apple banana", k=2)]
    store.close()


class _Search:
    """A search backend returning fixed pairs, one of them RESTRICTED by a look-alike (the record it stands for was
    labelled behind the store's back)."""

    def __init__(self, pairs: list[tuple[Document, float]]) -> None:
        self.pairs = pairs

    def lexical_search(self, query: str, k: int, filter: Any = None, *, score_threshold: Any = None) -> list[Any]:
        return self.pairs[:k]

    def vector_search(self, vector: Any, k: int, filter: Any = None) -> list[tuple[Document, float]]:
        return self.pairs[:k]

    def vector_search_with_vectors(self, vector: Any, k: int, filter: Any = None) -> list[tuple[Document, float, Any]]:
        q = np.asarray(vector, dtype=np.float32)
        return [(d, s, q) for d, s in self.pairs[:k]]


class _Backend:
    """The smallest StoreBackend (backends.base): its search is :class:`_Search`; ``unsupported`` as given."""

    def __init__(self, pairs: list[tuple[Document, float]], unsupported: dict[str, str] | None = None) -> None:
        self.pairs = pairs
        self.embedding = EMB
        self.unsupported = unsupported or {}
        self.where = None

    def upsert(self, records: Any) -> None:
        return None

    def delete(self, ids: Any) -> None:
        return None

    def get_by_ids(self, ids: Any) -> list[Document]:
        return []

    def search(self) -> _Search:
        return _Search(self.pairs)

    def close(self) -> None:
        return None


def test_the_scored_exit_over_any_backend_uses_the_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    pairs = [
        (Document("secret", id="s", metadata={"sensitivity": "RESTR1CTED"}), 0.9),
        (Document("open", id="o"), 0.5),
    ]
    store = RagSpineVectorStore(_Backend(pairs))
    assert [(d.id, s) for d, s in store.similarity_search_with_score("q", k=2)] == [("o", 0.5)]
    assert [d.id for d in store.similarity_search("q", k=2)] == ["o"]
    monkeypatch.setattr(vs_store, "drop_restricted_pairs", lambda pairs: list(pairs))
    assert [d.id for d, _ in store.similarity_search_with_score("q", k=2)] == ["s", "o"]


def test_mmr_over_any_backend_gates_before_the_pick() -> None:
    """A RESTRICTED candidate is dropped before MMR picks ``k``: it neither leaves nor takes a place of ``k``."""
    pairs = [
        (Document("secret", id="s", metadata={"sensitivity": "RESTR1CTED"}), 0.9),
        (Document("open", id="o"), 0.5),
        (Document("other", id="p"), 0.4),
    ]
    store = RagSpineVectorStore(_Backend(pairs))
    assert sorted(str(d.id) for d in store.max_marginal_relevance_search("q", k=2, fetch_k=3)) == ["o", "p"]
    assert [d.id for d in store.as_retriever(search_type="mmr", search_kwargs={"k": 1}).invoke("q")] == ["o"]


def test_a_backend_without_mmr_refuses_it_by_name_at_once() -> None:
    """Regression (trial 6d): ``as_retriever(search_type="mmr")`` was accepted and ``invoke`` raised a bare
    ``NotImplementedError()``; a backend listing MMR in its ``unsupported`` now has it refused by name
    (``backends.base.refuse``) when the retriever is built, and by ``max_marginal_relevance_search``."""
    store = RagSpineVectorStore(_Backend([(Document("open", id="o"), 0.5)], {MMR: "use search_type='similarity'"}))
    message = r"_Backend does not support maximal marginal relevance search: use search_type='similarity'"
    with pytest.raises(ValueError, match=message):
        store.as_retriever(search_type="mmr")
    with pytest.raises(ValueError, match=message):
        store.max_marginal_relevance_search("q")
    assert [d.id for d in store.as_retriever(search_type="similarity").invoke("q")] == ["o"]
