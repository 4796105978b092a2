"""Relation extractors: the deterministic co-occurrence one and the opt-in LLM one; RESTRICTED chunks give nothing."""

from __future__ import annotations

import pytest
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from langchain_ragspine.relations import (
    COOCCURS,
    CooccurrenceExtractor,
    LLMRelationExtractor,
    build_graph,
    entity_terms,
    make_extractor,
)
from langchain_ragspine.relations.extractors import extractions_of, graph_of, query_entities
from tests.unit_tests.spy_models import SpyChatModel


def _chunk(cid: str, text: str, **meta: object) -> Document:
    return Document(page_content=text, metadata={"chunk_id": cid, "doc_id": cid.split("#")[0], **meta})


CORPUS = [
    _chunk("a#0", "Kyoto station connects to the Shinkansen line.", title="Kyoto travel"),
    _chunk("a#1", "The Shinkansen reaches Osaka in fifteen minutes.", title="Kyoto travel"),
    _chunk("b#0", "Osaka castle was rebuilt; the castle museum opens daily.", title="Osaka", topic="Castles"),
    _chunk("c#0", "東京大学の研究者が京都大学と共同研究を行った。", title="研究"),
    _chunk("c#1", "京都大学の研究者は東京で講演した。", title="研究"),
    _chunk("d#0", "Secret Shinkansen Osaka plan zeta-project.", title="Plans", sensitivity="RESTRICTED"),
]


def test_entity_terms_are_cjk_aware_and_skip_stop_words() -> None:
    assert entity_terms("The castle of Osaka") == ["castl", "osaka"]
    assert entity_terms("東京大学の研究者") == ["东京", "大学", "研究"]  # MeCab words, folded to Simplified
    assert entity_terms("It is 2024.") == []


def test_cooccurrence_graph_joins_entities_of_a_chunk_with_provenance() -> None:
    g = build_graph(CORPUS, CooccurrenceExtractor(max_df=1.0))
    assert g.provenance("osaka", "shinkansen") == ("a#1",)
    assert g.node_kind("castles") == "metadata" and "b#0" in g.node_chunks("castles")
    assert g.node_kind("kyoto") == "title"  # from the title, in every chunk of the document
    assert "大学" in g.nodes() and g.provenance("大学", "研究") == ("c#0", "c#1")
    assert {e.relation for e in g.edges()} == {COOCCURS}


def test_restricted_chunks_give_no_node_and_no_edge() -> None:
    g = build_graph(CORPUS, CooccurrenceExtractor(max_df=1.0, min_df=1))
    everything = g.dumps()
    assert "d#0" not in everything and "zeta" not in everything and "plans" not in g.nodes()
    assert all("d#0" not in e.chunks for e in g.edges())


def test_cooccurrence_is_deterministic_whatever_the_order() -> None:
    a = build_graph(CORPUS, CooccurrenceExtractor()).dumps()  # type: ignore[attr-defined]
    b = build_graph(list(reversed(CORPUS)), CooccurrenceExtractor()).dumps()  # type: ignore[attr-defined]
    assert a == b


def test_document_frequency_bounds_pick_the_terms() -> None:
    strict = build_graph(CORPUS, CooccurrenceExtractor(min_df=2, max_df=1.0, max_title_terms=0, metadata_keys=()))
    # a term of one chunk only ('museum') joins nothing; 'shinkansen' (two chunks) stays
    assert "museum" not in strict.nodes() and "shinkansen" in strict.nodes()
    with pytest.raises(ValueError, match="max_df"):
        CooccurrenceExtractor(max_df=0)
    with pytest.raises(ValueError, match="min_df"):
        CooccurrenceExtractor(min_df=0)


def test_query_entities_find_terms_and_metadata_names() -> None:
    g = build_graph(CORPUS, CooccurrenceExtractor(max_df=1.0))
    # 'castles' is the metadata entity named whole; 'castl' (one chunk only) is no node; 'near' is no term
    assert query_entities("Which castles are near the Shinkansen?", g) == ["castles", "shinkansen"]


def test_llm_extractor_parses_triples_from_a_fake_chat_model() -> None:
    llm = FakeListChatModel(responses=[
        "1. Kyoto station | connects to | Shinkansen\nnot a triple\n- Shinkansen | reaches | Osaka",
        "Osaka castle | located in | Osaka",
        "nothing here",
    ])
    ex = LLMRelationExtractor(llm, max_triples=5)
    g = build_graph(CORPUS[:3], ex)
    assert g.provenance("kyoto station", "shinkansen") == ("a#0",)
    assert g.provenance("osaka", "shinkansen") == ("a#0",)
    assert [(e.source, e.relation, e.target) for e in g.edges()][:1] == [("kyoto station", "connects to", "shinkansen")]
    assert g.node_kind("osaka castle") == "llm" and g.node_chunks("osaka castle") == ("a#1",)
    assert extractions_of(g, ["a#1"])["a#1"].triples == (("osaka castle", "located in", "osaka"),)


def test_llm_extractor_never_sends_a_restricted_chunk() -> None:
    spy = SpyChatModel(reply="Osaka | has | castle")
    build_graph(CORPUS, LLMRelationExtractor(spy))
    assert len(spy.prompts) == 5
    assert not any("zeta-project" in p or "Secret" in p for p in spy.prompts)
    # the extractor gates on its own too, when called directly
    spy.prompts.clear()
    LLMRelationExtractor(spy).extract([CORPUS[-1]])
    assert spy.prompts == []


def test_llm_failure_degrades_to_no_relations_for_that_chunk() -> None:
    spy = SpyChatModel(error="down")
    assert LLMRelationExtractor(spy).extract(CORPUS[:2]) == {}


def test_graph_of_reuses_saved_extractions() -> None:
    g = build_graph(CORPUS, CooccurrenceExtractor())
    again = graph_of(extractions_of(g, [str(c.metadata["chunk_id"]) for c in CORPUS]))
    assert again.dumps() == g.dumps()  # type: ignore[attr-defined]


def test_make_extractor_spellings() -> None:
    assert make_extractor(None) is None and make_extractor(False) is None
    assert isinstance(make_extractor(True), CooccurrenceExtractor)
    assert isinstance(make_extractor(" Cooccurrence "), CooccurrenceExtractor)
    with pytest.raises(ValueError, match="unknown relation extractor 'llm'"):
        make_extractor("llm")
    with pytest.raises(TypeError, match="RelationExtractor"):
        make_extractor(3)
    with pytest.raises(TypeError, match="BaseChatModel"):
        LLMRelationExtractor("ollama:qwen")  # type: ignore[arg-type]
