"""Structure-aware, sentence-window and semantic chunkers: presets on small legal, book and FAQ samples, the
verbatim-slice property for every splitter (ja / zh / en), and the chunker registry."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

from langchain_ragspine.chains.answer import format_context
from langchain_ragspine.document_loaders import CorpusLoader
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.text.graphemes import Graphemes
from langchain_ragspine.text_splitters import (
    LayoutTextSplitter,
    ParagraphTextSplitter,
    ParentChildTextSplitter,
    SemanticTextSplitter,
    SentenceWindowTextSplitter,
)
from langchain_ragspine.text_splitters.chunkers import CHUNKERS, chunker_mismatch, make_chunker
from langchain_ragspine.text_splitters.semantic import semantic_breakpoints

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "chunkers"


def _load(name: str) -> tuple[str, list[Document]]:
    docs = list(CorpusLoader(FIXTURES / name).lazy_load())
    return (FIXTURES / name).read_text("utf-8"), docs


def _layout(name: str, preset: str, size: int = 200) -> list[Document]:
    raw, docs = _load(name)
    chunks = LayoutTextSplitter(chunk_size=size, chunk_overlap=0, preset=preset).split_documents(docs)
    for c in chunks:  # file offsets, verbatim
        assert raw[c.metadata["start_index"] : c.metadata["end_index"]] == c.page_content
    return chunks


def _by_heading(chunks: list[Document]) -> list[tuple[list[str], str]]:
    return [(c.metadata["heading"], c.page_content.split("\n")[0]) for c in chunks]


# -- presets ---------------------------------------------------------------------------------------------------
def test_laws_preset_chinese_articles_are_chunks_with_their_items():
    chunks = _layout("law_zh.md", "laws", size=80)
    assert _by_heading(chunks) == [
        (["示例管理法", "第一章\u3000总则", "第一条"], "# 示例管理法"),
        (["示例管理法", "第一章\u3000总则", "第二条"], "第二条\u3000本法适用于下列活动："),
        (["示例管理法", "第二章\u3000管理", "第三条"], "第二章\u3000管理"),
        (["示例管理法", "第二章\u3000管理", "第四条之一"], "第四条之一\u3000示例登记应当在三十日内办理。"),
    ]
    assert chunks[1].page_content.endswith("（三）示例的终止。")  # the article keeps its items (项)


def test_laws_preset_items_become_chunks_when_the_article_is_too_long():
    chunks = _layout("law_zh.md", "laws", size=30)
    article = [(c.metadata["heading"][-1], c.page_content) for c in chunks if "第二条" in c.metadata["heading"]]
    assert article == [  # the article packs the items that fit with it; the rest are chunks of their own
        ("第二条", "第二条\u3000本法适用于下列活动：\n（一）示例的设立；"),
        ("（二）", "（二）示例的变更；"),
        ("（三）", "（三）示例的终止。"),
    ]
    assert all(len(c.page_content) <= 30 for c in chunks)


def test_laws_preset_japanese_articles_captions_and_items():
    chunks = _layout("law_ja.md", "laws", size=100)
    assert _by_heading(chunks) == [
        (["第一条（目的）"], "（目的）"),
        (["第二条（定義）"], "（定義）"),
        (["第十条の二"], "第十条の二\u3000管理者は、毎年度、報告書を提出しなければならない。"),
    ]
    assert "２\u3000前項の規定は" in chunks[0].page_content  # 項 2 stays with its article
    assert chunks[1].page_content.endswith("二\u3000管理者\u3000例示を管理する者")  # and 号 with theirs
    small = _layout("law_ja.md", "laws", size=60)
    assert [c.metadata["heading"] for c in small] == [
        ["第一条（目的）"], ["第一条（目的）", "２"], ["第二条（定義）"], ["第二条（定義）", "一"], ["第二条（定義）", "二"],
        ["第十条の二"],
    ]


def test_book_preset_parts_chapters_and_markdown_numbered_headings():
    chunks = _layout("book.md", "book", size=60)
    heads = [c.metadata["heading"] for c in chunks]
    assert heads[0] == ["星の旅", "第一部\u3000出発", "第一章\u3000駅"]
    assert chunks[0].page_content.startswith("# 星の旅")  # bare headings open the first chunk
    assert ["星の旅", "第一部\u3000出発", "第二章\u3000海"] in heads
    assert any(h[-1] == "Chapter 3 The Island" for h in heads)
    assert ["1. Notes", "1.1 Sources"] in heads


def test_layout_preset_ignores_book_markers_but_sees_markdown():
    chunks = _layout("book.md", "layout", size=60)
    assert all("第一章\u3000駅" not in c.metadata["heading"] for c in chunks)
    assert chunks[0].metadata["heading"][0] == "星の旅"


def test_qa_preset_keeps_each_question_with_its_answer():
    chunks = _layout("faq.md", "qa", size=200)
    pairs = [(c.metadata["heading"][-1], c.page_content) for c in chunks]
    assert [q for q, _ in pairs] == [
        "Q: パスワードを忘れました。", "登録メールが届きません？", "问：如何申请退款？", "How do I delete my account?",
    ]
    assert pairs[1][1].endswith("それでも届かない場合はサポートに連絡してください。")  # answer over two paragraphs
    assert pairs[2][1].startswith("问：如何申请退款？\n答：")
    assert "How do I delete" not in pairs[2][1]


def test_qa_question_opens_the_first_piece_of_a_long_answer():
    text = "Q: 長い回答？\n\n" + "とても長い回答の文です。" * 20
    chunks = LayoutTextSplitter(chunk_size=60, chunk_overlap=10, preset="qa").create_documents([text])
    assert chunks[0].page_content.startswith("Q: 長い回答？\n\nとても")
    assert all(c.metadata["heading"] == ["Q: 長い回答？"] for c in chunks)
    assert len(chunks) > 2


def test_headings_inside_fenced_code_are_not_headings():
    text = "# Real\n\nText.\n\n```\n# not a heading\n```\n\n## Next\n\nMore."
    chunks = LayoutTextSplitter(chunk_size=20, chunk_overlap=0).create_documents([text])
    assert {tuple(c.metadata["heading"]) for c in chunks} == {("Real",), ("Real", "Next")}


def test_sibling_sections_never_share_a_chunk():
    text = "## A\n\nalpha.\n\n## B\n\nbeta."
    chunks = LayoutTextSplitter(chunk_size=480).create_documents([text])
    assert [c.page_content for c in chunks] == ["## A\n\nalpha.", "## B\n\nbeta."]
    assert ParagraphTextSplitter(chunk_size=480).split_text(text) == [text]  # the paragraph splitter packs them


def test_unknown_preset_is_refused():
    with pytest.raises(ValueError, match="unknown layout preset 'statute'"):
        LayoutTextSplitter(preset="statute")


# -- sentence window -------------------------------------------------------------------------------------------
def test_sentence_window_one_sentence_per_chunk_and_window_in_metadata():
    text = "一文目。二文目！三文目？\n\nFourth one. Fifth one.\n- item"
    chunks = SentenceWindowTextSplitter(window_size=1).create_documents([text])
    assert [c.page_content for c in chunks] == ["一文目。", "二文目！", "三文目？", "Fourth one.", "Fifth one.", "- item"]
    third = chunks[2]
    assert third.metadata["window_text"] == "二文目！三文目？\n\nFourth one."
    ws, we = third.metadata["window_start_index"], third.metadata["window_end_index"]
    assert text[ws:we] == third.metadata["window_text"]
    assert chunks[0].metadata["window_text"] == "一文目。二文目！"


def test_sentence_window_text_is_what_the_answer_prompt_shows():
    chunk = SentenceWindowTextSplitter(window_size=1).create_documents(["前の文。答えの文。後の文。"])[1]
    context = format_context([chunk])
    assert "前の文。答えの文。後の文。" in context
    compressed = Document(chunk.page_content, metadata={**chunk.metadata, "prompt_text": "圧縮"})
    assert "圧縮" in format_context([compressed]) and "前の文" not in format_context([compressed])


def test_sentence_window_cuts_an_over_budget_sentence():
    text = "あ" * 50 + "。短い。"
    chunks = SentenceWindowTextSplitter(chunk_size=20, chunk_overlap=0).create_documents([text])
    assert all(len(c.page_content) <= 20 for c in chunks)
    assert chunks[-1].page_content == "短い。"


# -- semantic --------------------------------------------------------------------------------------------------
class _TopicEmbeddings(Embeddings):
    """Vector = counts of topic words: cats vs markets; a drift between the two groups is a clear breakpoint."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[t.count("cat") + t.count("猫") + 0.01, t.count("market") + t.count("株") + 0.01] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def test_semantic_cuts_where_the_topic_changes():
    text = "The cat sat. The cat purred. A cat slept. The market fell. The market rose. Markets closed."
    splitter = SemanticTextSplitter(_TopicEmbeddings(), buffer_size=0, breakpoint_threshold_amount=80)
    assert splitter.split_text(text) == ["The cat sat. The cat purred. A cat slept.", "The market fell. The market rose. Markets closed."]


def test_semantic_is_deterministic_and_respects_the_budget():
    text = "猫が鳴いた。猫が寝た。猫が起きた。" * 6 + "株が上がった。株が下がった。" * 6
    a = SemanticTextSplitter(HashingEmbeddings(64), chunk_size=40, chunk_overlap=0).create_documents([text])
    b = SemanticTextSplitter(HashingEmbeddings(64), chunk_size=40, chunk_overlap=0).create_documents([text])
    assert [(c.id, c.page_content) for c in a] == [(c.id, c.page_content) for c in b]
    assert all(len(c.page_content) <= 40 for c in a)


def test_semantic_breakpoints_thresholds():
    v = np.array([[1, 0], [1, 0], [0, 1], [0, 1]], dtype=float)
    assert semantic_breakpoints(v, "percentile", 50) == [1]
    assert semantic_breakpoints(v, "standard_deviation", 1) == [1]
    assert semantic_breakpoints(v[:1]) == []
    with pytest.raises(ValueError, match="breakpoint_threshold_type"):
        semantic_breakpoints(v, "gradient")  # type: ignore[arg-type]


def test_semantic_needs_an_embeddings_object():
    with pytest.raises(TypeError, match="Embeddings"):
        SemanticTextSplitter("e5")  # type: ignore[arg-type]


# -- the registry ----------------------------------------------------------------------------------------------
def test_every_chunker_name_builds_a_splitter_with_its_configuration():
    for name in CHUNKERS:
        splitter, config = make_chunker(name, chunk_size=100, chunk_overlap=10, embedding=HashingEmbeddings(16))
        assert config["name"] == name and config["chunk_size"] == 100
        assert splitter.split_documents([Document("# T\n\n本文です。Text.", metadata={"source": "a.md"})])
    assert make_chunker("semantic", chunk_size=100, chunk_overlap=10, embedding=HashingEmbeddings(16))[1][
        "embedding"
    ].startswith("HashingEmbeddings")
    with pytest.raises(ValueError, match="needs an embedding model"):
        make_chunker("semantic", chunk_size=100, chunk_overlap=10)
    with pytest.raises(ValueError, match="unknown chunker"):
        make_chunker("recursive", chunk_size=100, chunk_overlap=10)


def test_chunker_mismatch_rules():
    para = {"name": "paragraph", "chunk_size": 480, "chunk_overlap": 80}
    layout = {"name": "layout", "chunk_size": 480, "chunk_overlap": 80}
    assert chunker_mismatch(None, layout, has_documents=False) is None
    assert chunker_mismatch(None, para, has_documents=True) is None  # an old store: built by the paragraph splitter
    assert "built before stores recorded" in str(chunker_mismatch(None, layout, has_documents=True))
    assert chunker_mismatch(para, dict(para), has_documents=True) is None
    assert "chunk_size=480" in str(chunker_mismatch(para, {**para, "chunk_size": 200}, has_documents=True))


# -- the verbatim-slice property, every splitter, ja / zh / en -------------------------------------------------
_ATOMS = [
    "# 見出し\n", "## Section\n", "第一章　总则\n", "第一条　", "第2条 ", "（一）", "２　", "一　", "Q: ", "问：", "質問：",
    "1. Scope\n", "1.2 Details\n", "Chapter 3\n", "```\n", "\n", "\n\n", "\r\n", " ", "\u3000",
    "梅雨は六月に始まる。", "台风在秋天来。", "本法适用于全国，", "登録メールが届きません？", "How do I reset it?",
    "The cat sat. ", "e\u0301", "👍🏽", "Well-known 3.14 value", "「引用。」",
]
_texts = st.lists(st.sampled_from(_ATOMS), max_size=60).map("".join)


def _splitters(size: int, overlap: int) -> list[ParagraphTextSplitter]:
    out: list[ParagraphTextSplitter] = [ParagraphTextSplitter(size, overlap)]
    out += [LayoutTextSplitter(size, overlap, preset=p) for p in ("layout", "laws", "book", "qa")]
    out += [
        ParentChildTextSplitter(size, overlap, parent_chunk_size=3 * size),
        SentenceWindowTextSplitter(window_size=2, chunk_size=size, chunk_overlap=overlap),
        SemanticTextSplitter(HashingEmbeddings(16), size, overlap),
    ]
    return out


@settings(max_examples=40, deadline=None)
@given(text=_texts, size=st.integers(8, 120), overlap_frac=st.floats(0, 0.5), offset=st.integers(0, 5))
def test_property_every_splitter_returns_verbatim_slices_covering_the_text(text, size, overlap_frac, offset):
    overlap = int(size * overlap_frac)
    source = "x" * offset + text  # the loader's body_offset: offsets index the file
    for splitter in _splitters(size, overlap):
        docs = splitter.create_documents([text], [{"source": "f.md", "body_offset": offset}])
        covered = [False] * len(text)
        for d in docs:
            s, e = d.metadata["start_index"], d.metadata["end_index"]
            assert source[s:e] == d.page_content and d.page_content.strip(), type(splitter).__name__
            assert d.metadata["source_locator"] == f"f.md#{s}-{e}"
            assert len(d.page_content) <= size or len(d.page_content) == len(d.page_content.strip()), d.page_content
            for i in range(s - offset, e - offset):
                covered[i] = True
            if "window_text" in d.metadata:
                ws, we = d.metadata["window_start_index"], d.metadata["window_end_index"]
                assert source[ws:we] == d.metadata["window_text"] and ws <= s and e <= we
        missed = [text[i] for i, c in enumerate(covered) if not c and not text[i].isspace()]
        assert not missed, (type(splitter).__name__, missed)
        assert len({d.id for d in docs}) == len(docs)


@settings(max_examples=30, deadline=None)
@given(text=_texts, size=st.integers(8, 80))
def test_property_layout_chunks_stay_within_budget_and_one_section(text, size):
    splitter = LayoutTextSplitter(size, size // 4, preset="laws")
    for s, e, path in splitter.section_chunks(Graphemes(text)):
        assert e - s <= size or len(text[s:e]) == 1
        assert isinstance(path, tuple)
