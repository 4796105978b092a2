"""``drop_restricted_pairs``: the one RESTRICTED gate of the exits that return ``(document, score)`` pairs (the
local store's and the versioned stores' ``similarity_search_with_score``; each wrote the same filter inline before)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_ragspine import RagSpineVectorStore
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.sensitivity import drop_restricted_pairs
from langchain_ragspine.vectorstores import base as vs_base
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


class _Versioned(vs_base.VersionedVectorStore):
    """The smallest VersionedVectorStore: its search returns fixed pairs, one of them RESTRICTED by a look-alike."""

    def __init__(self, embedding: Embeddings, pairs: list[tuple[Document, float]]) -> None:
        super().__init__(embedding)
        self.pairs = pairs

    def _active_chunks(self, doc_ids: Any) -> dict[str, list[Document]]:
        return {}

    def _write_versions(self, versions: Any) -> None:
        return None

    def _search_by_vector(self, vector: Any, k: int, filter: Any) -> list[tuple[Document, float]]:
        return self.pairs[:k]

    def _read_by_ids(self, ids: Any) -> list[Document]:
        return []

    @classmethod
    def from_texts(
        cls, texts: Any, embedding: Embeddings, metadatas: Any = None, **kwargs: Any
    ) -> _Versioned:
        raise NotImplementedError


def test_the_versioned_store_scored_exit_uses_the_gate(monkeypatch: pytest.MonkeyPatch) -> None:
    pairs = [
        (Document("secret", id="s", metadata={"sensitivity": "RESTR1CTED"}), 0.9),
        (Document("open", id="o"), 0.5),
    ]
    store = _Versioned(EMB, pairs)
    assert [(d.id, s) for d, s in store.similarity_search_with_score("q", k=2)] == [("o", 0.5)]
    assert [d.id for d in store.similarity_search("q", k=2)] == ["o"]
    monkeypatch.setattr(vs_base, "drop_restricted_pairs", lambda pairs: list(pairs))
    assert [d.id for d, _ in store.similarity_search_with_score("q", k=2)] == ["s", "o"]


class _VersionedWithVectors(_Versioned):
    """A versioned store whose MMR candidates include a RESTRICTED look-alike, the most relevant of them."""

    def _search_by_vector_with_embeddings(self, vector: Any, k: int, filter: Any) -> list[tuple[Document, float, Any]]:
        q = np.asarray(vector, dtype=np.float32)
        return [(d, s, q) for d, s in self.pairs[:k]]


def test_the_versioned_store_mmr_gates_before_the_pick() -> None:
    """A RESTRICTED candidate is dropped before MMR picks ``k``: it neither leaves nor takes a place of ``k``."""
    pairs = [
        (Document("secret", id="s", metadata={"sensitivity": "RESTR1CTED"}), 0.9),
        (Document("open", id="o"), 0.5),
        (Document("other", id="p"), 0.4),
    ]
    store = _VersionedWithVectors(EMB, pairs)
    assert sorted(str(d.id) for d in store.max_marginal_relevance_search("q", k=2, fetch_k=3)) == ["o", "p"]
    assert [d.id for d in store.as_retriever(search_type="mmr", search_kwargs={"k": 1}).invoke("q")] == ["o"]


def test_a_versioned_store_without_mmr_refuses_it_at_once() -> None:
    """Regression (trial 6d): ``as_retriever(search_type="mmr")`` was accepted and ``invoke`` raised a bare
    ``NotImplementedError()``; a backend with no MMR now says so when the retriever is built, and its
    ``max_marginal_relevance_search`` names the store."""
    store = _Versioned(EMB, [(Document("open", id="o"), 0.5)])
    with pytest.raises(ValueError, match=r"_Versioned has no maximal marginal relevance search: use search_type="):
        store.as_retriever(search_type="mmr")
    with pytest.raises(NotImplementedError, match=r"_Versioned has no maximal marginal relevance search"):
        store.max_marginal_relevance_search("q")
    assert [d.id for d in store.as_retriever(search_type="similarity").invoke("q")] == ["o"]
