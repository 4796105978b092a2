"""RAPTOR tree building: seeded clustering, summary nodes with their members' provenance, RESTRICTED chunks kept
out of every embedding call and prompt, and reuse of unchanged leaves and clusters."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.raptor import (
    ExtractiveSummariser,
    LLMSummariser,
    RaptorBuilder,
    RaptorTree,
    cluster_vectors,
    spherical_kmeans,
)
from tests.unit_tests.spy_models import SpyChatModel

TOPICS = ["Kyoto temple wooden hall", "Osaka castle stone wall", "Shinkansen train station", "梅雨 六月 雨 季節"]


def _chunks(n: int = 24, *, restricted: int | None = None) -> list[Document]:
    out = []
    for i in range(n):
        topic = TOPICS[i % len(TOPICS)]
        meta = {"chunk_id": f"d{i}#0", "doc_id": f"d{i}", "source": f"docs/d{i}.md"}
        if restricted == i:
            meta["sensitivity"] = "RESTRICTED"
        out.append(Document(f"{topic} number {i}. The {topic} is described here. Fact {i} matters.", metadata=meta))
    return out


def _varied(n: int) -> list[Document]:
    """``n`` chunks of 12 seeded random words each from a vocabulary of 400 (clusters of real variety)."""
    vocab = [f"w{i}" for i in range(400)]
    out = []
    for i in range(n):
        rng = random.Random(i)
        words = [vocab[(i * 7 + rng.randrange(40)) % 400] for _ in range(12)]
        out.append(Document(" ".join(words) + ".", metadata={"chunk_id": f"v{i}#0", "doc_id": f"v{i}"}))
    return out


class SpyEmbeddings(Embeddings):
    """HashingEmbeddings(64) that records every text it embeds."""

    def __init__(self) -> None:
        self.inner = HashingEmbeddings(64)
        self.texts: list[str] = []
        self.size = 64

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self.texts.append(text)
        return self.inner.embed_query(text)


def test_spherical_kmeans_is_seeded_and_covers_every_row() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(50, 8)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    a, b = spherical_kmeans(x, 5, seed=1), spherical_kmeans(x, 5, seed=1)
    assert np.array_equal(a, b) and set(a.tolist()) == set(range(5))
    groups = cluster_vectors(x, cluster_size=4, seed=0)
    assert sorted(i for g in groups for i in g) == list(range(50))
    assert max(len(g) for g in groups) <= 8


def test_identical_rows_are_cut_into_bounded_runs() -> None:
    x = np.ones((30, 4), dtype=np.float32) / 2
    groups = cluster_vectors(x, cluster_size=5)
    assert sorted(i for g in groups for i in g) == list(range(30)) and max(map(len, groups)) <= 10


def test_tree_has_levels_up_to_one_root_and_summaries_carry_member_provenance() -> None:
    chunks = _chunks()
    tree = RaptorBuilder(HashingEmbeddings(64), cluster_size=4).build(chunks)
    assert tree.levels() >= 2 and len(tree.roots()) == 1
    (root,) = tree.roots()
    top = tree.nodes[root]
    assert top.is_summary and set(top.members) == {c.metadata["chunk_id"] for c in chunks}
    for node in tree.summaries():
        md = node.metadata()
        assert md["is_synthesis"] is True
        below = set()
        for c in node.children:
            below |= set(tree.nodes[c].members)
        assert set(md["member_chunk_ids"]) == below
        assert set(md["doc_ids"]) == {m.split("#")[0] for m in below}
        assert set(md["sources"]) == {f"docs/{m.split('#')[0]}.md" for m in below}
        assert node.to_document().metadata["is_synthesis"] is True
    assert all(not tree.nodes[c].is_summary for c in tree.chunks)


def test_extractive_summaries_are_verbatim_sentences_of_their_members() -> None:
    chunks = _chunks()
    by_id = {c.metadata["chunk_id"]: c.page_content for c in chunks}
    tree = RaptorBuilder(HashingEmbeddings(64), cluster_size=4, summariser=ExtractiveSummariser(120)).build(chunks)
    for node in tree.summaries():
        members = " ".join(by_id[m] for m in node.members)
        assert node.text and all(s.strip(" .") in members for s in node.text.split(". "))


def test_tree_is_a_function_of_the_corpus_not_its_order() -> None:
    chunks = _chunks()
    shuffled = chunks[:]
    random.Random(1).shuffle(shuffled)
    a = RaptorBuilder(HashingEmbeddings(64), cluster_size=4).build(chunks).to_json()
    b = RaptorBuilder(HashingEmbeddings(64), cluster_size=4).build(shuffled).to_json()
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    back = RaptorTree.from_json(json.loads(json.dumps(a)))
    assert back.to_json() == a


def test_restricted_chunks_are_never_embedded_clustered_or_summarised() -> None:
    chunks = _chunks(restricted=5)
    secret = chunks[5].page_content
    emb = SpyEmbeddings()
    spy = SpyChatModel(reply="A summary.")
    tree = RaptorBuilder(emb, cluster_size=4, summariser=LLMSummariser(spy)).build(chunks)
    assert "d5#0" not in tree.chunks and not any("d5#0" in n.members for n in tree.nodes.values())
    assert emb.texts and not any(secret in t for t in emb.texts)
    assert spy.prompts and not any("Fact 5 matters" in p for p in spy.prompts)
    assert not any("Fact 5 matters" in n.text for n in tree.nodes.values())


def test_llm_summaries_and_their_fallback() -> None:
    spy = SpyChatModel(reply="  The cluster is about castles.  ")
    tree = RaptorBuilder(HashingEmbeddings(64), cluster_size=4, summariser=LLMSummariser(spy)).build(_chunks(8))
    assert {n.text for n in tree.summaries()} == {"The cluster is about castles."}
    assert tree.config["summariser"]["name"] == "llm"
    failing = LLMSummariser(SpyChatModel(error="down"))
    tree = RaptorBuilder(HashingEmbeddings(64), cluster_size=4, summariser=failing).build(_chunks(8))
    assert failing.fallbacks == len(tree.summaries()) > 0
    chunks = " ".join(c.page_content for c in _chunks(8))
    assert all(s.strip(" .") in chunks for n in tree.summaries() for s in n.text.split(". "))  # extractive


def test_a_rebuild_reuses_unchanged_leaves_and_clusters_and_equals_a_fresh_build() -> None:
    chunks = _varied(200)
    builder = RaptorBuilder(SpyEmbeddings(), cluster_size=4)
    first = builder.build(chunks)
    again = builder.build(chunks, reuse=first)
    assert builder.last_embedded == 0 and builder.last_summarised == 0 and again.to_json() == first.to_json()
    changed = chunks[:]
    changed[3] = Document("A brand new paragraph on ferries.", metadata=dict(chunks[3].metadata))
    incremental = builder.build(changed, reuse=first)
    assert 1 <= builder.last_embedded < len(changed)
    assert builder.last_summarised < len(first.summaries()) / 2  # only the clusters the change moved
    fresh = RaptorBuilder(SpyEmbeddings(), cluster_size=4).build(changed)
    assert incremental.to_json() == fresh.to_json()  # history-independent
    other = RaptorBuilder(SpyEmbeddings(), cluster_size=5)
    other.build(chunks, reuse=first)
    assert other.last_embedded == len(chunks) + len(other.build(chunks).summaries())  # another config: no reuse


def test_without_drops_the_leaf_and_every_summary_above_it() -> None:
    tree = RaptorBuilder(HashingEmbeddings(64), cluster_size=4).build(_chunks())
    pruned = tree.without(["d2#0"])
    assert "d2#0" not in pruned.nodes and "d2#0" not in pruned.chunks
    assert not any("d2#0" in n.members for n in pruned.nodes.values())
    assert all(c in pruned.nodes for n in pruned.nodes.values() for c in n.children)
    assert set(pruned.chunks) == set(tree.chunks) - {"d2#0"}


def test_builder_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="needs an embedding model"):
        RaptorBuilder("none")
    with pytest.raises(ValueError, match="unknown embedding spec"):
        RaptorBuilder("hashng")
    with pytest.raises(TypeError, match="summariser"):
        RaptorBuilder("hashing", summariser="llm")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="cluster_size"):
        RaptorBuilder("hashing", cluster_size=1)
    assert RaptorBuilder("hashing").build([]).nodes == {}
