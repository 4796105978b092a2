"""Glossary query expansion: files in every shape, deterministic rewrites (original first, round-robin, at most
max_queries), word boundaries for ASCII terms, and the shipped glossaries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from langchain_ragspine.document_loaders import CorpusLoader
from langchain_ragspine.errors import RagSpineError
from langchain_ragspine.retrievers import BM25Retriever, Glossary, GlossaryQueryRewriter, GlossaryRetriever
from langchain_ragspine.text_splitters import ParagraphTextSplitter
from tests.unit_tests._transform_fakes import SpyRetriever, doc

ROOT = Path(__file__).resolve().parents[3]
DEMO_GLOSSARY = ROOT / "docs" / "glossaries" / "demo.yaml"
GENERAL_JA = ROOT / "docs" / "glossaries" / "general-ja.yaml"
GENERAL_ZH = ROOT / "docs" / "glossaries" / "general-zh.yaml"


def test_groups_are_symmetric_and_expansions_one_way():
    g = Glossary([["チャンク", "chunk", "文本块"]], expand={"RAG": ["retrieval-augmented generation", "検索拡張生成"]})
    assert g.synonyms("chunk") == ["チャンク", "文本块"]
    assert g.synonyms("文本块") == ["チャンク", "chunk"]
    assert g.synonyms("ＲＡＧ") == ["retrieval-augmented generation", "検索拡張生成"]
    assert g.synonyms("検索拡張生成") == []  # one way
    assert g.synonyms("unknown") == []


@pytest.mark.parametrize(
    "suffix, text",
    [
        (".yaml", "- [チャンク, chunk]\n- terms: [BM25, Okapi BM25]\n"),
        (".yml", "groups:\n  - [チャンク, chunk]\n  - [BM25, Okapi BM25]\n"),
        (".json", json.dumps([["チャンク", "chunk"], {"terms": ["BM25", "Okapi BM25"]}], ensure_ascii=False)),
        (".json", json.dumps({"groups": [["チャンク", "chunk"]], "expand": {"BM25": ["Okapi BM25"]}},
                             ensure_ascii=False)),
    ],
)
def test_every_file_shape_loads(tmp_path, suffix, text):
    path = tmp_path / f"g{suffix}"
    path.write_text(text, "utf-8")
    g = Glossary.from_file(path)
    assert g.synonyms("chunk") == ["チャンク"]
    assert g.synonyms("bm25") == ["Okapi BM25"]


def test_plain_mapping_is_one_way(tmp_path):
    path = tmp_path / "g.yaml"
    path.write_text("RAG: [retrieval-augmented generation]\nLLM: large language model\n", "utf-8")
    g = Glossary.from_file(path)
    assert g.synonyms("rag") == ["retrieval-augmented generation"]
    assert g.synonyms("llm") == ["large language model"]


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("g.yaml", "- [a, b\n- c", "malformed YAML"),
        ("g.json", "[[\"a\", \"b\"],", "malformed JSON"),
        ("g.yaml", "- [a, 3]\n", "group 1 must be a list of strings"),
        ("g.yaml", "- {words: [a, b]}\n", "without 'terms'"),
        ("g.yaml", "42\n", "list of synonym groups or a mapping"),
        ("g.txt", "a b\n", ".json, .yaml or .yml"),
    ],
)
def test_bad_files_name_the_file(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text, "utf-8")
    with pytest.raises(RagSpineError, match=message) as info:
        Glossary.from_file(path)
    assert str(path) in str(info.value)


def test_missing_file_names_it(tmp_path):
    with pytest.raises(RagSpineError, match="cannot read the glossary"):
        Glossary.from_file(tmp_path / "absent.yaml")


def test_rewrites_original_first_round_robin_and_bounded():
    rewriter = GlossaryQueryRewriter([["チャンク", "chunk", "断片", "文本块"], ["検索", "search"]], max_queries=4)
    assert rewriter.invoke("チャンクの検索") == ["チャンクの検索", "chunkの検索", "チャンクのsearch", "断片の検索"]
    assert GlossaryQueryRewriter([["a", "b"]], max_queries=1).invoke("a") == ["a"]


def test_every_occurrence_is_replaced_and_unknown_queries_stay_alone():
    rewriter = GlossaryQueryRewriter([["チャンク", "chunk"]])
    assert rewriter.invoke("チャンクとチャンク") == ["チャンクとチャンク", "chunkとchunk"]
    assert rewriter.invoke("梅雨はいつ") == ["梅雨はいつ"]
    assert rewriter.invoke("") == [""]


def test_ascii_terms_match_whole_words_plurals_and_any_case_or_width():
    rewriter = GlossaryQueryRewriter([["BM25", "Okapi"], ["chunk", "チャンク"]])
    assert rewriter.invoke("BM250 and XBM25") == ["BM250 and XBM25"]
    assert rewriter.invoke("ｂｍ２５ scores of chunks") == [
        "ｂｍ２５ scores of chunks", "Okapi scores of chunks", "bm25 scores of チャンク"
    ]


def test_longest_term_wins_where_terms_overlap():
    rewriter = GlossaryQueryRewriter([["検索", "search"], ["全文検索", "full-text search"]])
    assert rewriter.invoke("全文検索とは") == ["全文検索とは", "full-text searchとは"]


def test_rewriter_is_deterministic_and_a_runnable():
    rewriter = GlossaryQueryRewriter(DEMO_GLOSSARY)
    q = "チャンクのオフセットはどこに記録されますか？"
    assert rewriter.invoke(q) == rewriter.invoke(q)
    assert rewriter.batch([q, q]) == [rewriter.invoke(q)] * 2


@pytest.mark.parametrize(("bad", "error"), [(0, ValueError), (-1, ValueError), (1.5, TypeError), (True, TypeError)])
def test_max_queries_is_checked(bad, error):
    with pytest.raises(error, match="max_queries must be an int >= 1, got "):
        GlossaryQueryRewriter([["a", "b"]], max_queries=bad)


def test_shipped_glossaries_load():
    assert len(Glossary.from_file(DEMO_GLOSSARY)) >= 40
    ja, zh = Glossary.from_file(GENERAL_JA), Glossary.from_file(GENERAL_ZH)
    assert ja.synonyms("米国") == ["アメリカ合衆国", "アメリカ"]
    assert zh.synonyms("逝世") == ["去世", "过世"]
    # one file per language: a term spelled alike in both (原因) keeps its own language's synonyms
    assert ja.synonyms("原因") == ["理由"] and zh.synonyms("原因") == ["缘故"]


def test_glossary_retriever_searches_every_rewrite_and_fuses():
    base = SpyRetriever(lists={
        "チャンク": [doc("ja#0")], "chunk": [doc("en#0"), doc("ja#0")], "断片": [],
    })
    retriever = GlossaryRetriever(base, glossary=[["チャンク", "chunk", "断片"]], k=5)
    docs = retriever.invoke("チャンク")
    assert base.queries == ["チャンク", "chunk", "断片"]
    assert [d.metadata["chunk_id"] for d in docs] == ["ja#0", "en#0"]  # ja#0 is found by two queries
    trace = docs[0].metadata["query_transform"][-1]
    assert trace["transform"] == "glossary" and trace["llm_calls"] == 0 and trace["matched"] == [0, 1]


def test_demo_glossary_finds_the_page_written_in_the_other_language():
    """An English question about offsets reaches the Japanese splitter page through the glossary."""
    docs = ParagraphTextSplitter().split_documents(CorpusLoader(ROOT / "docs" / "demo").load())
    bm25 = BM25Retriever.from_documents(docs, k=10)
    query = "citation offset"
    plain = {d.metadata["doc_id"] for d in bm25.invoke(query)}
    expanded = GlossaryRetriever(bm25, glossary=DEMO_GLOSSARY, k=10).invoke(query)
    assert "ja/splitter" not in plain
    assert "ja/splitter" in {d.metadata["doc_id"] for d in expanded}
    assert all(isinstance(d, Document) and d.metadata["chunk_id"] for d in expanded)


# -- the matcher: the same matches as the regular expression it replaced (one alternation of every term, longest
# first, re.IGNORECASE), at any size -------------------------------------------------------------------------------
def _regex_find(glossary: Glossary, query: str) -> list[tuple[int, int, str]]:
    """The matcher the glossary used before (kept here as the reference): ``re.finditer`` over one alternation of
    every term with synonyms — and of every spelling of it that folds otherwise (``Straße`` of ``strasse``) —
    sorted longest first, case-insensitive, with word boundaries for ASCII ends and the English plural of
    :func:`~langchain_ragspine.retrievers._term_match.plural_endings`; each alternative a named group, so a match
    names its term."""
    import re

    from langchain_ragspine.retrievers._term_match import plural_endings
    from langchain_ragspine.text.folding import normalize_spaces as _norm
    from langchain_ragspine.text.folding import simple_casefold as _fold

    keys = [k for k, v in glossary._synonyms.items() if v]
    if not keys:
        return []
    alternatives = []
    for key in keys:
        left = re.match(r"[A-Za-z0-9]", key[0]) is not None
        right = re.match(r"[A-Za-z0-9]", key[-1]) is not None
        for text in {_fold(key), *glossary._other_spellings.get(key, ())}:
            endings: tuple[str, ...] = ("",)
            if right and re.match(r"[a-z]", text[-1]):
                text, endings = plural_endings(text)
            alternatives.append((-len(text), text, key, left, right, endings))
    parts, names = [], {}
    for i, (_, text, key, left, right, endings) in enumerate(sorted(alternatives)):
        body = r"\s+".join(re.escape(w) for w in text.split(" "))
        tail = "(?:" + "|".join(re.escape(e) for e in endings) + ")" if endings != ("",) else ""
        parts.append(f"(?P<g{i}>" + (r"(?<![A-Za-z0-9])" if left else "") + body + tail
                     + (r"(?![A-Za-z0-9])" if right else "") + ")")
        names[f"g{i}"] = key
    return [(m.start(), m.end(), names[m.lastgroup or ""])
            for m in re.compile("|".join(parts), re.IGNORECASE).finditer(_norm(query))]


# letters whose case-insensitive matching is irregular (dotless and dotted i, long s, Kelvin sign, final sigma, micro
# sign, sharp s), plurals, word characters, CJK, punctuation and spaces
_ALPHABET = "aAbBeEsSiIıİſKkΣσςµμßẞ01チャンク日本+#. -"
_terms = st.text(_ALPHABET, min_size=1, max_size=5)


@settings(max_examples=300, deadline=None)
@given(groups=st.lists(st.lists(_terms, min_size=2, max_size=3), min_size=1, max_size=8),
       noise=st.lists(st.one_of(_terms, st.sampled_from([" ", "s", "es", "x", "の", "-"])), max_size=12),
       data=st.data())
def test_matches_are_the_regex_matches(groups, noise, data):
    glossary = Glossary(groups)
    words = [t for g in groups for t in g] + noise
    query = "".join(data.draw(st.lists(st.sampled_from(words), max_size=10)))
    assert glossary.find(query) == _regex_find(glossary, query)


def test_case_folding_is_the_regex_case_folding():
    """Every code point folds as re.IGNORECASE compares it: simple lower case plus CPython's extra classes."""
    from langchain_ragspine.text.folding import _CASE_CLASSES
    from langchain_ragspine.text.folding import simple_casefold as _fold

    sre = pytest.importorskip("_sre")
    casefix = pytest.importorskip("re._casefix")
    if not hasattr(sre, "unicode_tolower"):
        pytest.skip("this Python's _sre has no unicode_tolower")
    canon = {c: cls[0] for cls in _CASE_CLASSES for c in cls}
    for cp in range(0x110000):
        if 0xD800 <= cp < 0xE000:
            continue
        c = chr(cp)
        lower = chr(sre.unicode_tolower(cp))
        assert _fold(c) == canon.get(lower, lower), hex(cp)
    classes = {frozenset(chr(x) for x in (cp, *others)) for cp, others in casefix._EXTRA_CASES.items()}
    assert classes == {frozenset(cls) for cls in _CASE_CLASSES}


def test_a_50k_group_glossary_rewrites_correctly():
    """The size the regex took 30 s to load and 47 s to match a long query with (no timing asserted here; see
    benchmarks/glossary_speed.py)."""
    n = 50_000
    glossary = Glossary([[f"term{i}", f"syn{i}a", f"syn{i}b"] for i in range(n)])
    assert len(glossary) == 3 * n
    rewriter = GlossaryQueryRewriter(glossary)
    assert rewriter.invoke("How is TERM49999 related to syn7b and syn3as?") == [
        "How is TERM49999 related to syn7b and syn3as?",
        "How is syn49999a related to syn7b and syn3as?",
        "How is TERM49999 related to term7 and syn3as?",
        "How is TERM49999 related to syn7b and term3?",  # syn3as: the plural of syn3a
        "How is syn49999b related to syn7b and syn3as?",
    ]
    # unknown, inside a word, or a plural of a term ending in a digit
    assert rewriter.invoke("term50000 xterm1 term1x term3s") == ["term50000 xterm1 term1x term3s"]
    long_query = " ".join(f"term{i}" for i in range(0, n, 25))  # 2,000 terms
    matches = glossary.find(long_query)
    assert [key for _, _, key in matches] == [f"term{i}" for i in range(0, n, 25)]
    assert matches == _regex_find(Glossary([[f"term{i}", f"syn{i}a", f"syn{i}b"] for i in range(0, n, 25)]),
                                  long_query)
    assert rewriter.invoke(long_query)[1:3] == [long_query.replace("term0 ", "syn0a ", 1),
                                                long_query.replace("term25 ", "syn25a ", 1)]


# -- malformed files: a clear error naming the file and, for YAML, the line (regressions from the new-user trial) ----
@pytest.mark.parametrize(
    "name, text, line, message",
    [
        # a list of plain strings loaded as a glossary of 0 terms, silently
        ("g.yaml", "- a\n- b\n", 1, "a list of plain strings ('a', …) is not a glossary"),
        ("g.json", '["a", "b"]', None, "a list of plain strings ('a', …) is not a glossary"),
        ("g.yaml", "- [a, b]\n- c\n", 2, "group 2 is the single term 'c'"),
        # groups plus another key said "the synonyms of 'groups' must be a list of strings"
        ("g.yaml", "groups: [[a, b]]\nextra: 1\n", 2, "unexpected top-level key 'extra' next to 'groups'"),
        # content errors name the line of the term (YAML) or the group and term (JSON)
        ("g.yaml", "- [chunk, チャンク]\n- [index, 索引]\n- - BM25\n  - 25\n", 4,
         "group 3 must be a list of strings: term 2 is number 25 (quote it to make it a term)"),
        ("g.json", '[["a", "b"], ["c", 3]]', None, "group 2 must be a list of strings: term 2 is number 3"),
        ("g.yaml", "expand:\n  RAG: [retrieval-augmented generation]\n  LLM: 7\n", 3,
         "the synonyms of 'LLM' must be a string or a list of strings, got number 7"),
        ("g.yaml", "groups:\n  - [a, b]\n  - {words: [c, d]}\n", 3, "group 2 is a mapping without 'terms'"),
        ("g.yaml", "- [x, y]\n- - [nested, list]\n", 2, "group 2 must be a list of strings: term 1 is array"),
        ("g.yaml", "expand: [a, b]\n", 1, "'expand' must map terms to synonyms"),
        ("g.yaml", "groups: 5\n", 1, "'groups' must be a list of synonym groups, got number 5"),
        ("g.yaml", "RAG: [retrieval]\n2023: [令和5年]\n", 2, "a glossary term must be a string, got number 2023"),
        # an empty glossary rewrites nothing: a mistake, not a setting
        ("g.yaml", "", None, "the glossary is empty"),
        ("g.yaml", "# only a comment\n", None, "the glossary is empty"),
        ("g.json", "[]", None, "the glossary is empty"),
        ("g.yaml", "- [a, A]\n- [b, B]\n", None, "the glossary defines no synonyms"),
        # regressions (issue 14, second trial): accepted silently, the first entry dropped or ignored
        ("g.yaml", "expand: {RAG: [retrieval], RAG: [検索]}\n", 1, "duplicate key 'RAG' (first on line 1)"),
        ("g.yaml", "expand:\n  RAG: [retrieval]\n  LLM: [大規模言語モデル]\n  RAG: [検索]\n", 4,
         "duplicate key 'RAG' (first on line 2)"),
        ("g.yaml", "groups: [[a, b]]\ngroups: [[c, d]]\n", 2, "duplicate key 'groups'"),
        ("g.json", '{"expand": {"RAG": ["retrieval"], "RAG": ["検索"]}}', None, "duplicate key 'RAG'"),
        ("g.json", '{"RAG": ["retrieval"], "RAG": ["検索"]}', None, "duplicate key 'RAG'"),
        ("g.yaml", "- [chunk, チャンク]\n- [index]\n", 2,
         "group 2 is ['index']: a synonym group is a list of two or more terms"),
        ("g.yaml", "- [chunk, チャンク]\n- []\n", 2, "group 2 is []: a synonym group is a list of two or more terms"),
        ("g.json", '[["chunk", "チャンク"], ["index"]]', None, "group 2 is ['index']"),
        ("g.yaml", "- [a, b]\n- terms: [c, d]\n  note: x\n", 3,
         "group 2 has the unexpected key 'note' next to 'terms'"),
    ],
)
def test_malformed_glossaries_name_the_file_line_and_entry(tmp_path, name, text, line, message):
    path = tmp_path / name
    path.write_text(text, "utf-8")
    with pytest.raises(RagSpineError) as info:
        Glossary.from_file(path)
    assert message in str(info.value)
    assert info.value.path == str(path) and info.value.line == line
    assert str(info.value).startswith(f"{path}:{line}: " if line else f"{path}: ")


def test_a_huge_malformed_entry_is_reported_briefly(tmp_path):
    """YAML aliases can make an entry of millions of strings: the message shows a bounded excerpt."""
    levels = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"] + [
        f"{c}: &{c} [{', '.join(['*' + p] * 9)}]" for p, c in zip("abcdefg", "bcdefgh", strict=True)]
    path = tmp_path / "laughs.yaml"
    path.write_text("\n".join(levels) + "\ngroups: [*h]\n", "utf-8")
    with pytest.raises(RagSpineError, match="unexpected top-level key 'a'") as info:
        Glossary.from_file(path)
    assert len(str(info.value)) < 600
    path.write_text("\n".join(f"- {lv.split(': ', 1)[1]}" for lv in levels) + "\n", "utf-8")
    with pytest.raises(RagSpineError, match="group 2 must be a list of strings: term 1 is array") as info:
        Glossary.from_file(path)
    assert len(str(info.value)) < 600


def test_groups_given_in_code_are_checked_the_same_way():
    with pytest.raises(TypeError, match="a list of plain strings"):
        Glossary(["chunk", "チャンク"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="group 2 is the single term 'c'"):
        Glossary([["a", "b"], "c"])  # type: ignore[list-item]
    with pytest.raises(RagSpineError, match="a list of plain strings"):
        GlossaryQueryRewriter(["chunk", "チャンク"])


def test_a_glossary_setting_of_plain_strings_is_an_error(tmp_path, monkeypatch):
    from langchain_ragspine.retrievers.transforms import make_query_transform

    path = tmp_path / "strings.yaml"
    path.write_text("- a\n- b\n", "utf-8")
    monkeypatch.setenv("RAGSPINE_GLOSSARY", str(path))
    with pytest.raises(RagSpineError, match=f"{path}:1: .*list of plain strings"):
        make_query_transform("glossary", SpyRetriever())


@pytest.mark.parametrize("bad", [None, ["chunk"], {"question": "chunk"}, 3])
def test_a_query_that_is_not_a_string_is_a_type_error(bad):
    """invoke(None) returned [None]; a list came back wrapped.  Now the retrievers' one-line TypeError."""
    rewriter = GlossaryQueryRewriter([["chunk", "チャンク"]])
    with pytest.raises(TypeError, match=r"GlossaryQueryRewriter\.invoke takes one query string, got "):
        rewriter.invoke(bad)
    with pytest.raises(TypeError, match=r"GlossaryQueryRewriter\.rewrite takes one query string"):
        rewriter.rewrite(bad)
    assert rewriter.batch(["chunk", ""]) == [["chunk", "チャンク"], [""]]


async def test_a_query_that_is_not_a_string_is_a_type_error_async():
    with pytest.raises(TypeError, match="takes one query string, got None"):
        await GlossaryQueryRewriter([["chunk", "チャンク"]]).ainvoke(None)


def test_glossary_retriever_suggests_max_queries_for_a_misspelled_keyword(tmp_path):
    # regression: max_query=2 was refused without the did-you-mean (glossary/max_queries are __init__-only keywords)
    from langchain_ragspine import BM25Retriever
    from langchain_ragspine.retrievers import GlossaryRetriever

    path = tmp_path / "g.json"
    path.write_text('{"groups": [["梅雨", "rainy season"]]}', "utf-8")
    base = BM25Retriever.from_texts(["梅雨の時期", "rainy season in Japan"])
    with pytest.raises(TypeError, match=r"'max_query' \(did you mean 'max_queries'\?\)"):
        GlossaryRetriever(base, glossary=str(path), max_query=2)
    assert GlossaryRetriever(base, glossary=str(path), max_queries=2).invoke("梅雨")


# -- regressions (issue 14, second trial) ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "term, query, matches",
    [("policy", "HR policies", True), ("policy", "policy", True), ("policy", "policys", False),
     ("company", "companies", True), ("city", "Cities", True), ("key", "keys", True), ("key", "keies", False),
     ("leave", "leaves", True), ("bus", "buses", True), ("HR policy", "hr policies", True)],
)
def test_english_plurals_take_ies_after_a_consonant_and_y(term, query, matches):
    """``policy`` did not match ``policies`` (nor ``companies``, ``cities``) but matched the non-word ``policys``."""
    rewriter = GlossaryQueryRewriter([[term, "SYN"]])
    assert (len(rewriter.invoke(query)) == 2) is matches


@pytest.mark.parametrize("term", ["Straße", "İstanbul", "ǅemal"])
def test_a_term_whose_case_fold_changes_length_matches_its_own_spelling(term):
    """``GlossaryQueryRewriter([["Straße", "street"]]).invoke("Straße")`` returned ``['Straße']``: the index held
    the case fold (``strasse``) only, which the query's character-for-character fold never equals."""
    rewriter = GlossaryQueryRewriter([[term, "street"]])
    assert rewriter.invoke(term) == [term, "street"]
    assert rewriter.invoke(f"{term.upper()} 1") == [f"{term.upper()} 1", "street 1"]
    assert rewriter.invoke(term.casefold()) == [term.casefold(), "street"]


@pytest.mark.parametrize("kwargs, hint", [({"max_query": 2}, "(did you mean 'max_queries'?)"), ({"bogus": 1}, "")])
def test_unknown_rewriter_arguments_are_a_type_error(kwargs, hint):
    """``GlossaryQueryRewriter("demo.yaml", max_query=2)`` kept max_queries=5 silently; ``bogus=1`` was accepted."""
    with pytest.raises(TypeError, match="GlossaryQueryRewriter got unexpected argument") as info:
        GlossaryQueryRewriter(DEMO_GLOSSARY, **kwargs)
    assert hint in str(info.value)


def test_a_group_mapping_and_code_groups_are_checked_too():
    with pytest.raises(TypeError, match="group 1 is \\['a'\\]: a synonym group is a list of two or more terms"):
        Glossary([["a"]])
    with pytest.raises(RagSpineError, match="unexpected key 'extra' next to 'terms'"):
        Glossary.from_data([{"terms": ["a", "b"], "extra": 1}])


def test_yaml_merge_keys_may_be_overridden(tmp_path):
    """A key written twice is an error; a key merged in with ``<<`` and overridden is YAML, not a mistake."""
    from langchain_ragspine.retrievers._config_files import read_structured_file

    path = tmp_path / "m.yaml"
    path.write_text("a: &x {k: 1, j: 2}\nb: {<<: *x, k: 3}\n", "utf-8")
    assert read_structured_file(path, "glossary", unique_keys=True) == {"a": {"k": 1, "j": 2}, "b": {"k": 3, "j": 2}}
