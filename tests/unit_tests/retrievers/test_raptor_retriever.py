"""RaptorRetriever: collapsed tree and tree traversal; results are always citable chunks (a summary node resolves
to its members), filters are ANDed, RESTRICTED chunks never come out."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.documents import Document

from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.raptor import RaptorBuilder, RaptorTree
from langchain_ragspine.retrievers.raptor import RaptorRetriever

EMB = HashingEmbeddings(64)
TOPICS = ["Kyoto temple wooden hall", "Osaka castle stone wall", "Shinkansen train station", "rainy season June"]


def _chunks() -> list[Document]:
    out = []
    for i in range(24):
        topic = TOPICS[i % 4]
        out.append(Document(f"{topic} number {i}. The {topic} is described here.",
                            metadata={"chunk_id": f"d{i}#0", "doc_id": f"d{i}", "lang": "ja" if i % 2 else "en"}))
    return out


CHUNKS = _chunks()
TREE = RaptorBuilder(EMB, cluster_size=4).build(CHUNKS)


def _retriever(**kw: object) -> RaptorRetriever:
    return RaptorRetriever(tree=TREE, docs=CHUNKS, embedding=EMB, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize("strategy", ["collapsed", "traversal"])
def test_results_are_chunks_verbatim_never_summaries(strategy: str) -> None:
    texts = {c.metadata["chunk_id"]: c.page_content for c in CHUNKS}
    got = _retriever(k=5, strategy=strategy).invoke("Osaka castle stone wall")
    assert len(got) == 5 and len({d.id for d in got}) == 5
    for d in got:
        assert d.page_content == texts[d.metadata["chunk_id"]] and d.id == d.metadata["chunk_id"]
        assert "is_synthesis" not in d.metadata and "castle" in d.page_content
        assert set(d.metadata["raptor"]) == {"node", "level", "is_synthesis"}
    fused = [d.metadata["scores"]["fused"] for d in got]
    assert fused == sorted(fused, reverse=True)


def test_a_summary_hit_resolves_to_its_member_chunks() -> None:
    top = TREE.summaries()[0]
    r = _retriever(k=len(top.members))
    scores = r.node_scores(top.text)
    assert max(scores, key=lambda n: scores[n]) == top.node_id  # the summary's own text finds it first
    got = r.invoke(top.text)
    assert {d.metadata["chunk_id"] for d in got} == set(top.members)
    assert all(d.metadata["raptor"]["node"] == top.node_id and d.metadata["raptor"]["is_synthesis"] for d in got)
    assert all(d.metadata["raptor_summary"] == top.text for d in got)


def test_filters_are_anded_and_a_summary_is_shown_only_when_every_member_passes() -> None:
    top = TREE.summaries()[0]
    r = _retriever(k=24, filter={"lang": "en"})
    got = r.invoke(top.text, filter={"doc_id": {"$ne": "d0"}})
    assert got and all(d.metadata["lang"] == "en" and d.metadata["doc_id"] != "d0" for d in got)
    langs = {c.metadata["chunk_id"]: c.metadata["lang"] for c in CHUNKS}
    mixed = [n for n in TREE.summaries() if len({langs[m] for m in n.members}) > 1]
    assert mixed
    for d in got:
        node = TREE.nodes[d.metadata["raptor"]["node"]]
        if node.node_id in {n.node_id for n in mixed}:
            assert "raptor_summary" not in d.metadata  # text of members the filter scoped out never shows


def test_restricted_chunks_never_come_out_even_when_relabelled_after_the_build() -> None:
    docs = [Document(c.page_content, metadata={**c.metadata, "sensitivity": "RESTRICTED"})
            if c.metadata["chunk_id"] == "d1#0" else c for c in CHUNKS]
    for strategy in ("collapsed", "traversal"):
        got = RaptorRetriever(tree=TREE, docs=docs, embedding=EMB, k=24, strategy=strategy).invoke("castle number 1")
        assert got and "d1#0" not in {d.metadata["chunk_id"] for d in got}
    assert RaptorRetriever(tree=TREE, docs=docs, embedding=EMB).served_ids(["d1#0", "d2#0"]).served == {"d2#0"}


def test_leaves_whose_chunk_is_not_in_docs_are_never_returned() -> None:
    got = RaptorRetriever(tree=TREE, docs=CHUNKS[:4], embedding=EMB, k=10).invoke("castle")
    assert {d.metadata["chunk_id"] for d in got} <= {"d0#0", "d1#0", "d2#0", "d3#0"}


def test_traversal_starts_at_the_roots_and_honours_the_beam() -> None:
    got = _retriever(k=3, strategy="traversal", beam=1).invoke("Shinkansen train station")
    assert got and all("Shinkansen" in d.page_content for d in got)


def test_async_matches_sync_and_an_empty_query_or_tree_gives_nothing() -> None:
    r = _retriever(k=4)
    assert [d.id for d in asyncio.run(r.ainvoke("Kyoto temple"))] == [d.id for d in r.invoke("Kyoto temple")]
    assert r.invoke("   ") == []
    assert RaptorRetriever(tree=RaptorTree(), docs=[], embedding=EMB).invoke("x") == []


def test_arguments_are_checked() -> None:
    with pytest.raises(TypeError, match="RaptorTree"):
        RaptorRetriever(tree={}, docs=CHUNKS, embedding=EMB)
    with pytest.raises(TypeError, match="Embeddings"):
        RaptorRetriever(tree=TREE, docs=CHUNKS, embedding="hashing")
    with pytest.raises(ValueError):
        RaptorRetriever(tree=TREE, docs=CHUNKS, embedding=EMB, strategy="bfs")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="did you mean"):
        RaptorRetriever(tree=TREE, docs=CHUNKS, embedding=EMB, strategie="collapsed")  # type: ignore[call-arg]
    with pytest.raises(ValueError, match="dimensions"):
        RaptorRetriever(tree=TREE, docs=CHUNKS, embedding=HashingEmbeddings(32)).invoke("castle")
