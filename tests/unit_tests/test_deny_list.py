"""The deny-list gate: a generated query that mentions a denied term is never searched, for every transformation,
sync and async; the drop is recorded by position and term index, never by text."""

from __future__ import annotations

import json

import pytest

from langchain_ragspine.errors import RagSpineError
from langchain_ragspine.retrievers import (
    DecompositionRetriever,
    GlossaryRetriever,
    HyDERetriever,
    MultiQueryRetriever,
    QueryDenyList,
    RAGFusionRetriever,
    StepBackRetriever,
)

from ._transform_fakes import SpyChatModel, SpyRetriever, doc

DENIED = "Project Orion"
LLM_CLASSES = [MultiQueryRetriever, RAGFusionRetriever, StepBackRetriever, DecompositionRetriever]


@pytest.mark.parametrize(
    "query", ["project orion", "ＰＲＯＪＥＣＴ ＯＲＩＯＮ", "Project\u200b Orion", "the  project   orion plan",
              "PROJECT ORION?"],
)
def test_terms_match_after_folding(query):
    assert QueryDenyList([DENIED]).denied_term(query) == 0


def test_cjk_terms_match_as_substrings_and_others_pass():
    gate = QueryDenyList(["社外秘", DENIED])
    assert gate.denied_term("社外秘の資料はどこ") == 0
    assert gate.denied_term("梅雨はいつ") is None
    assert QueryDenyList([]).denied_term("anything") is None
    assert QueryDenyList(["  ", ""]).terms == ()


def test_non_string_queries_fail_closed():
    assert QueryDenyList(["x"]).denied_term(None) == 0  # type: ignore[arg-type]


def test_terms_must_be_a_list_of_strings():
    with pytest.raises(TypeError):
        QueryDenyList("Project Orion")
    with pytest.raises(TypeError):
        QueryDenyList(["ok", 3])  # type: ignore[list-item]


@pytest.mark.parametrize(
    "name, text",
    [("deny.txt", "# code names\nProject Orion\n\n社外秘\n"), ("deny.json", json.dumps(["Project Orion", "社外秘"])),
     ("deny.yaml", "deny:\n  - Project Orion\n  - 社外秘\n")],
)
def test_files(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, "utf-8")
    assert QueryDenyList.from_file(path).terms == ("Project Orion", "社外秘")


def test_bad_file_names_the_file(tmp_path):
    path = tmp_path / "deny.json"
    path.write_text('{"deny": "not a list"}', "utf-8")
    with pytest.raises(RagSpineError, match="list of strings") as info:
        QueryDenyList.from_file(path)
    assert str(path) in str(info.value)


# -- the gate in every transformation -----------------------------------------------------------------------------------
def _llm_transform(cls, base, reply):
    return cls(base, SpyChatModel(replies=[reply]), deny_list=[DENIED], n_queries=3, k=4)


REPLY = "1. orion launch date\n2. when does project ORION launch\n3. launch schedule"


@pytest.mark.parametrize("cls", LLM_CLASSES)
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_denied_variant_is_never_searched(cls, mode):
    base = SpyRetriever(default=[doc("a#0")])
    retriever = _llm_transform(cls, base, REPLY)
    docs = retriever.invoke("launch?") if mode == "sync" else await retriever.ainvoke("launch?")
    searched = [q.casefold() for q in base.queries]
    assert searched[0] == "launch?"
    assert all("project orion" not in q for q in searched)
    assert "orion launch date" in searched  # the gate drops only what mentions the term
    trace = docs[0].metadata["query_transform"][-1]
    assert trace["dropped"] == [{"position": 2, "term": 0, "reason": "deny_list"}]
    assert "orion" not in json.dumps(trace["dropped"]).casefold()


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_a_denied_hypothetical_document_is_not_searched(mode):
    base = SpyRetriever(default=[doc("a#0")])
    hyde = HyDERetriever(base, SpyChatModel(replies=["Project Orion launches in May."]), deny_list=[DENIED])
    docs = hyde.invoke("launch?") if mode == "sync" else await hyde.ainvoke("launch?")
    assert base.queries == ["launch?"]
    trace = docs[0].metadata["query_transform"][-1]
    assert trace["fallback"] == "no_variants" and trace["dropped"] == [{"position": 1, "term": 0,
                                                                          "reason": "deny_list"}]


def test_a_denied_glossary_rewrite_is_not_searched():
    base = SpyRetriever(default=[doc("a#0")])
    retriever = GlossaryRetriever(base, glossary=[["launch", "Project Orion go-live", "release"]], deny_list=[DENIED])
    retriever.invoke("launch date")
    assert base.queries == ["launch date", "release date"]


def test_the_users_own_query_is_searched_even_when_it_names_a_term():
    """The gate is on *generated* text: what the user typed is theirs to search."""
    base = SpyRetriever(default=[doc("a#0")])
    _llm_transform(MultiQueryRetriever, base, "x").invoke("Project Orion status")
    assert base.queries[0] == "Project Orion status"


def test_every_variant_denied_searches_the_query_alone():
    base = SpyRetriever(default=[doc("a#0"), doc("b#0")])
    retriever = _llm_transform(MultiQueryRetriever, base, "project orion 1\nproject orion 2")
    docs = retriever.invoke("status")
    assert base.queries == ["status"]
    assert [d.metadata["chunk_id"] for d in docs] == ["a#0", "b#0"]
    assert docs[0].metadata["query_transform"][-1]["fallback"] == "no_variants"
