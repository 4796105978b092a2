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
from langchain_ragspine.retrievers.deny_list import EmptyDenyListWarning, fold_term
from langchain_ragspine.text.confusables import I_OR_L, LATIN_LOOK_ALIKES, latin_skeleton
from tests.unit_tests._transform_fakes import SpyChatModel, SpyRetriever, doc

DENIED = "Project Orion"
LLM_CLASSES = [MultiQueryRetriever, RAGFusionRetriever, StepBackRetriever, DecompositionRetriever]


@pytest.mark.parametrize(
    "query", ["project orion", "ＰＲＯＪＥＣＴ ＯＲＩＯＮ", "Project\u200b Orion", "the  project   orion plan",
              "PROJECT ORION?"],
)
def test_terms_match_after_folding(query):
    assert QueryDenyList([DENIED]).denied_term(query) == 0


TRIAL_TERMS = ["Project Orion", "社外秘", "机密项目"]


@pytest.mark.parametrize(
    "query, term",
    [  # new-user trial of issue 14: each of these generated queries was searched
        ("Project-Orion", 0), ("ProjectOrion", 0), ("社 外 秘", 1), ("機密項目的進展", 2), ("Project \u041erion", 0),
        # the same folds, other spellings
        ("project_orion roadmap", 0), ("PROJECT.ORION", 0), ("Project・Orion", 0), ("Project\u2014Orion", 0),
        ("Ρroject Οrion", 0), ("ΡRОЈЕСТ ОRӀОN", 0), ("社\u3000外・秘", 1), ("機 密 項 目", 2), ("Project\u00a0Orion", 0),
    ],
)
def test_spelling_variants_of_a_term_are_caught(query, term):
    assert QueryDenyList(TRIAL_TERMS).denied_term(query) == term


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("variant", ["Project-Orion", "ProjectOrion", "社 外 秘", "機密項目的進展", "Project \u041erion"])
async def test_trial_variants_are_never_searched(variant, mode):
    base = SpyRetriever(default=[doc("a#0")])
    retriever = MultiQueryRetriever(base, SpyChatModel(replies=[f"1. 安全なクエリ\n2. {variant}"]), n_queries=3,
                                    deny_list=TRIAL_TERMS, k=3)
    docs = retriever.invoke("普通の質問") if mode == "sync" else await retriever.ainvoke("普通の質問")
    assert base.queries == ["普通の質問", "安全なクエリ"]
    assert docs[0].metadata["query_transform"][-1]["dropped"][0]["position"] == 2


def test_the_users_query_is_searched_whatever_its_spelling():
    base = SpyRetriever(default=[doc("a#0")])
    MultiQueryRetriever(base, SpyChatModel(replies=["x"]), deny_list=TRIAL_TERMS).invoke("機密項目 Project-Orion")
    assert base.queries[0] == "機密項目 Project-Orion"


def test_unrelated_queries_still_pass():
    gate = QueryDenyList(TRIAL_TERMS)
    for query in ["orion nebula", "project plan", "社外の人", "机器学习", "Прожект", "梅雨の時期", "オリオン座"]:
        assert gate.denied_term(query) is None, query


def test_skeleton_folds():
    assert fold_term(" Ｐｒｏｊｅｃｔ\u200b - ORION ") == "projectorion"
    assert fold_term("鍵ローテーション") == "键ローテーション"  # the long-vowel mark is a letter, not a dash
    assert latin_skeleton("Аррlе") == latin_skeleton("apple") == "apple"  # ASCII i and l stay apart
    assert latin_skeleton("\u04c0\u0399") == I_OR_L * 2  # look-alikes of a capital I match either letter


def test_look_alike_table_is_letters_outside_ascii_and_no_cjk():
    import unicodedata

    for letter, points in LATIN_LOOK_ALIKES.items():
        assert letter in "abcdefghijklmnopqrstuvwxyz"
        for point in points.split():
            ch = chr(int(point, 16))
            assert not ch.isascii() and unicodedata.category(ch).startswith("L"), (letter, point)
            assert not 0x3000 <= ord(ch) <= 0x9FFF and not 0xAC00 <= ord(ch) <= 0xD7AF, (letter, point)
    assert "041E" in LATIN_LOOK_ALIKES["o"].split() and "043E" in LATIN_LOOK_ALIKES["o"].split()


def test_cjk_terms_match_as_substrings_and_others_pass():
    gate = QueryDenyList(["社外秘", DENIED])
    assert gate.denied_term("社外秘の資料はどこ") == 0
    assert gate.denied_term("梅雨はいつ") is None
    assert QueryDenyList([]).denied_term("anything") is None
    with pytest.warns(EmptyDenyListWarning):
        assert QueryDenyList(["  ", ""]).terms == ()


# -- round 2 of the trial: short Latin terms dropped most innocent queries --------------------------------------------
@pytest.mark.parametrize(
    "term, query",
    [("AI", "How do I train a model?"), ("AI", "email the details"), ("AI", "rainy season"), ("AI", "real data"),
     ("AI", "Data Integration"), ("AI", "Al Gore"), ("AI", "What is the capital of Thailand?"),
     ("ml", "HTML parser"), ("ml", "similar documents"), ("ml", "time limit"), ("ml", "team lead"),
     ("ml", "Millions"), ("ml", "small model"), ("ml", "XML"), ("IT", "edit the title"), ("IT", "quite a title"),
     ("HR", "three hours"), ("li", "limit the list"), ("Project Orion", "projector ion"), ("Orion", "Orions")],
)
def test_a_latin_term_inside_other_words_does_not_drop(term, query):
    assert QueryDenyList([term]).denied_term(query) is None


@pytest.mark.parametrize(
    "term, query",
    [("AI", "AI"), ("AI", "ai safety"), ("AI", "A.I."), ("AI", "A-I policy"), ("AI", "what is A I"),
     ("AI", "AIの活用"), ("AI", "生成AI"), ("AI", "(AI)"), ("AI", "ＡＩ"), ("AI", "Α\u0399"), ("AI", "A\u04c0"),
     ("ml", "ML ops"), ("ml", "5 ml of water"), ("ml", "m.l."), ("A.I.", "ai"), ("A I", "A-I"),
     ("Project Orion", "the project orion plan"), ("Project Orion", "ProjectOrion"), ("Orion計画", "orion 計画"),
     ("GPT-4", "gpt4"), ("GPT-4", "GPT 4 release"), ("Ollama", "OLLAMA"), ("Ollama", "O\u0399\u04c0ama")],
)
def test_a_latin_term_matches_as_a_word_in_any_spelling(term, query):
    assert QueryDenyList([term]).denied_term(query) == 0


@pytest.mark.parametrize(
    "terms, variant, term",
    [(["社外秘", " ", "Secret"], "Secret Orion plan", 2), (["", "Orion"], "Secret Orion plan", 1),
     (["Orion", "orion", "Secret"], "Secret plan", 2), (["-", "Orion"], "Orion", 1),
     (["Orion", "ORION", "Secret"], "the secret", 2)],
)
def test_the_trace_names_the_term_by_its_index_in_the_users_list(terms, variant, term):
    # round 2 of the trial: the index pointed into the cleaned, de-duplicated list
    base = SpyRetriever(default=[doc("a#0")])
    gate = QueryDenyList(terms)
    assert gate.denied_term(variant) == term
    docs = MultiQueryRetriever(base, SpyChatModel(replies=[f"1. {variant}"]), deny_list=terms).invoke("q")
    assert docs[0].metadata["query_transform"][-1]["dropped"] == [{"position": 1, "term": term,
                                                                     "reason": "deny_list"}]
    assert QueryDenyList(["Orion", "orion"]).denied_term("orion") == 0  # a duplicate: its first occurrence


@pytest.mark.parametrize("terms", [["-"], ["・"], [" ", "—", "_"], [""]])
def test_a_list_of_separators_only_warns(terms):
    with pytest.warns(EmptyDenyListWarning, match="no generated query is dropped"):
        gate = QueryDenyList(terms)
    assert not gate


def test_a_list_with_a_term_or_no_entry_does_not_warn(recwarn):
    QueryDenyList([])
    QueryDenyList(["-", "Orion"])
    assert not [w for w in recwarn if issubclass(w.category, EmptyDenyListWarning)]


def test_a_separators_only_file_warns_once(tmp_path):
    path = tmp_path / "deny.txt"
    path.write_text("-\n・\n", "utf-8")
    with pytest.warns(EmptyDenyListWarning) as record:
        QueryDenyList.from_file(path)
    assert len([w for w in record if issubclass(w.category, EmptyDenyListWarning)]) == 1
    assert str(path) in str(record[0].message)


def test_non_string_queries_fail_closed():
    assert QueryDenyList(["x"]).denied_term(None) == 0  # type: ignore[arg-type]


def test_terms_must_be_a_list_of_strings():
    with pytest.raises(TypeError):
        QueryDenyList("Project Orion")
    with pytest.raises(TypeError, match="index 1"):
        QueryDenyList(["ok", 3])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="mapping"):
        QueryDenyList({"deny": ["Project Orion"]})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "name, text",
    [("deny.txt", "# code names\nProject Orion\n\n社外秘\n"), ("deny.json", json.dumps(["Project Orion", "社外秘"])),
     ("deny.yaml", "deny:\n  - Project Orion\n  - 社外秘\n")],
)
def test_files(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text, "utf-8")
    assert QueryDenyList.from_file(path).terms == ("Project Orion", "社外秘")


@pytest.mark.parametrize(
    "name, text", [("empty.txt", ""), ("comments.txt", "# nothing yet\n\n"), ("empty.json", "[]"),
                   ("empty.yaml", ""), ("comment.yaml", "# nothing\n"), ("deny.yaml", "deny: []\n")],
)
def test_an_empty_file_warns_naming_it(tmp_path, name, text):
    # new-user trial of issue 14: an empty deny-list file turned the gate off silently
    path = tmp_path / name
    path.write_text(text, "utf-8")
    with pytest.warns(EmptyDenyListWarning, match=str(path)):
        gate = QueryDenyList.from_file(path)
    assert not gate


@pytest.mark.parametrize(
    "name, text, where",
    [("nonstr.json", '["a", 1]', ":1: deny-list entry 2 (index 1) must be a string, got number"),
     ("lines.json", '[\n  "a",\n  "b",\n  null\n]', ":4: deny-list entry 3 (index 2) must be a string, got null"),
     ("deny.yaml", "deny:\n  - a\n  - [b]\n", ":3: deny-list entry 2 (index 1) must be a string, got array")],
)
def test_a_non_string_entry_is_named(tmp_path, name, text, where):
    path = tmp_path / name
    path.write_text(text, "utf-8")
    with pytest.raises(RagSpineError) as info:
        QueryDenyList.from_file(path)
    assert str(info.value).startswith(str(path) + where)


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


def test_stacked_layers_each_need_the_deny_list():
    """Round 2 of the trial: an inner layer takes the outer layer's generated query as the user's own."""
    def stack(outer_deny):
        base = SpyRetriever(default=[doc("a#0")])
        inner = MultiQueryRetriever(base, SpyChatModel(replies=["1. safe query"]), deny_list=[DENIED])
        HyDERetriever(inner, SpyChatModel(replies=["Project Orion is the new plan."]),
                      deny_list=outer_deny).invoke("what is the new plan?")
        return [q.casefold() for q in base.queries]

    assert any("project orion" in q for q in stack(None))  # the documented gap: the inner gate does not see it
    assert not any("project orion" in q for q in stack([DENIED]))  # the documented fix: one per layer
