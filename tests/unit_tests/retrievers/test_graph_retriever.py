"""GraphRetriever: local search over a relation graph, returning the chunks that support the edges walked."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document

from langchain_ragspine.relations import CooccurrenceExtractor, InMemoryGraphStore, build_graph
from langchain_ragspine.retrievers import BM25Retriever, HybridRetriever
from langchain_ragspine.retrievers.graph import GraphRetriever


def _chunk(cid: str, text: str, **meta: object) -> Document:
    return Document(page_content=text, metadata={"chunk_id": cid, "doc_id": cid.split("#")[0], "lang": "en", **meta})


DOCS = [
    _chunk("a#0", "alpha beta"),
    _chunk("b#0", "beta gamma", lang="ja"),
    _chunk("c#0", "gamma delta"),
    _chunk("d#0", "alpha"),
    _chunk("e#0", "epsilon zeta"),
    _chunk("r#0", "alpha secret", sensitivity="RESTRICTED"),
]


def _graph() -> InMemoryGraphStore:
    g = InMemoryGraphStore()
    for d in DOCS:
        words = d.page_content.split()
        cid = str(d.metadata["chunk_id"])
        for w in words:
            g.add_node(w, chunk_id=cid)
        for i, a in enumerate(words):
            for b in words[i + 1:]:
                g.add_edge(a, "co-occurs", b, chunk_id=cid)
    return g


def _ids(docs: list[Document]) -> list[str]:
    return [str(d.metadata["chunk_id"]) for d in docs]


def test_hops_bound_the_neighbourhood() -> None:
    g = _graph()
    assert _ids(GraphRetriever(graph=g, docs=DOCS, hops=0).invoke("alpha")) == ["a#0", "d#0"]
    # hop 1 walks alpha-beta (a#0 now supports two entities); hop 2 beta-gamma (b#0); hop 3 gamma-delta (c#0)
    assert _ids(GraphRetriever(graph=g, docs=DOCS, hops=1).invoke("alpha")) == ["a#0", "d#0"]
    assert _ids(GraphRetriever(graph=g, docs=DOCS, hops=2).invoke("alpha")) == ["a#0", "d#0", "b#0"]
    assert _ids(GraphRetriever(graph=g, docs=DOCS, hops=3).invoke("alpha")) == ["a#0", "d#0", "b#0", "c#0"]
    one, zero = (GraphRetriever(graph=g, docs=DOCS, hops=h).invoke("alpha")[0] for h in (1, 0))
    assert one.metadata["scores"]["fused"] > zero.metadata["scores"]["fused"]


def test_a_chunk_joining_two_question_entities_ranks_first() -> None:
    g = _graph()
    got = GraphRetriever(graph=g, docs=DOCS, hops=1).invoke("beta and gamma?")
    assert _ids(got)[0] == "b#0"
    assert got[0].metadata["scores"]["fused"] > got[1].metadata["scores"]["fused"]


def test_results_are_the_chunks_verbatim_with_scores() -> None:
    got = GraphRetriever(graph=_graph(), docs=DOCS, k=2).invoke("alpha")
    assert [d.page_content for d in got] == ["alpha beta", "alpha"]
    assert all(d.id == d.metadata["chunk_id"] for d in got)
    s = got[0].metadata["scores"]
    assert s["bm25"] is None and s["vector"] is None and s["rerank"] is None and s["fused"] > 0


def test_restricted_chunks_never_come_back_even_when_the_graph_names_them() -> None:
    g = _graph()  # built with the RESTRICTED chunk's edges on purpose
    r = GraphRetriever(graph=g, docs=DOCS, hops=1)
    assert "r#0" not in _ids(r.invoke("alpha secret"))
    assert r.invoke("secret") == []  # 'secret' is supported only by the RESTRICTED chunk
    # a label added after the build: skipped before the cut to k
    docs = [Document(d.page_content, metadata=dict(d.metadata)) for d in DOCS]
    late = GraphRetriever(graph=g, docs=docs, k=2, hops=2)
    late.docs[0].metadata["sensitivity"] = "RESTRICTED"
    assert _ids(late.invoke("alpha")) == ["d#0", "b#0"]


def test_call_filter_is_anded_with_the_own_filter() -> None:
    r = GraphRetriever(graph=_graph(), docs=DOCS, hops=3, filter={"lang": "en"})
    assert _ids(r.invoke("alpha")) == ["a#0", "d#0", "c#0"]
    assert _ids(r.invoke("alpha", filter={"doc_id": {"$in": ["b", "c"]}})) == ["c#0"]  # b#0 is ja: never widened
    assert r.invoke("alpha", filter={"lang": "ja"}) == []


def test_unknown_entities_give_nothing_and_ties_break_on_chunk_id() -> None:
    r = GraphRetriever(graph=_graph(), docs=DOCS)
    assert r.invoke("omega") == []
    assert _ids(r.invoke("epsilon zeta", k=1)) == ["e#0"]
    assert _ids(GraphRetriever(graph=_graph(), docs=list(reversed(DOCS)), hops=0).invoke("alpha")) == ["a#0", "d#0"]


def test_fusable_in_the_hybrid_retriever() -> None:
    chunks = [_chunk(f"x{i}#0", t) for i, t in enumerate([
        "Kyoto station connects to the Shinkansen line.", "The Shinkansen reaches Osaka quickly.",
        "Osaka castle museum.", "Tokyo tower at night.", "Osaka food markets and castle walls.",
    ])]
    graph = build_graph(chunks, CooccurrenceExtractor(max_df=1.0))
    hybrid = HybridRetriever(retrievers=[BM25Retriever.from_documents(chunks, k=3), GraphRetriever(graph=graph, docs=chunks)],
                             k=3)
    got = hybrid.invoke("Shinkansen to Osaka")
    assert len(got) == 3 and {d.page_content for d in got} <= {c.page_content for c in chunks}
    assert got[0].metadata["scores"]["fused"] is not None


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="hops"):
        GraphRetriever(graph=_graph(), docs=DOCS, hops=4)
    with pytest.raises(ValueError, match="decay"):
        GraphRetriever(graph=_graph(), docs=DOCS, decay=0)
    with pytest.raises(TypeError, match="GraphStore"):
        GraphRetriever(graph={"a": 1}, docs=DOCS)
    with pytest.raises(TypeError, match="did you mean 'hops'"):
        GraphRetriever(graph=_graph(), docs=DOCS, hop=1)  # type: ignore[call-arg]
