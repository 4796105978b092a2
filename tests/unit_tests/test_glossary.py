"""Glossary query expansion: files in every shape, deterministic rewrites (original first, round-robin, at most
max_queries), word boundaries for ASCII terms, and the shipped glossaries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.documents import Document

from langchain_ragspine.document_loaders import CorpusLoader
from langchain_ragspine.errors import RagSpineError
from langchain_ragspine.retrievers import BM25Retriever, Glossary, GlossaryQueryRewriter, GlossaryRetriever
from langchain_ragspine.text_splitters import ParagraphTextSplitter

from ._transform_fakes import SpyRetriever, doc

ROOT = Path(__file__).resolve().parents[2]
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


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_max_queries_is_checked(bad):
    with pytest.raises(ValueError, match="max_queries"):
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
