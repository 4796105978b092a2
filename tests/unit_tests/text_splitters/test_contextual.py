"""ContextualHeader: a metadata header indexed and embedded with the chunk; page_content and lineage unchanged."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from langchain_core.documents import Document

from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.retrievers import BM25Retriever, DenseRetriever
from langchain_ragspine.text import INDEX_TEXT_KEY, index_text
from langchain_ragspine.text_splitters.contextual import ContextualHeader, contextual_header


def _chunk(doc_id: str, i: int, text: str, start: int, **md: Any) -> Document:
    return Document(
        page_content=text,
        metadata={
            "doc_id": doc_id,
            "chunk_id": f"{doc_id}#{i}",
            "start_index": start,
            "end_index": start + len(text),
            "source_locator": f"{doc_id}.md#{start}-{start + len(text)}",
            "sensitivity": "PUBLIC",
            **md,
        },
    )


# a second chunk that never names its article: only the title says it is about the Eiffel Tower
TOWER = _chunk("tower", 1, "It was completed in 1889 and painted every seven years.", 120, title="Eiffel Tower")
FUJI = _chunk("fuji", 1, "It last erupted in 1707 and is climbed in summer.", 90, title="Mount Fuji")
TSUYU = _chunk("tsuyu", 2, "沖縄では5月上旬に始まり、6月下旬に終わる。", 200, title="梅雨", heading_path=["梅雨", "日本の梅雨"])
CORPUS = [TOWER, FUJI, TSUYU]


def test_header_joins_the_fields_that_are_present():
    md = {
        "title": "梅雨",
        "heading_path": ["梅雨", "気候", "東アジア"],
        "period": "2024-06",
        "entities": ["気象庁", "沖縄"],
        "year": True,  # a boolean is no header text
        "sensitivity": "PUBLIC",
    }
    assert contextual_header(md) == "梅雨 · 気候 > 東アジア · 2024-06 · 気象庁, 沖縄"
    assert contextual_header({"title": "  Eiffel\n Tower ", "year": 1889}) == "Eiffel Tower · 1889"
    assert contextual_header({}) == ""
    assert contextual_header({"title": "A", "section": "B"}, ["section", "title"], separator=" | ") == "B | A"


def test_transform_sets_index_text_only():
    before = copy.deepcopy(CORPUS)
    out = ContextualHeader().transform_documents(CORPUS)
    assert CORPUS == before  # inputs not modified
    assert out[0].metadata[INDEX_TEXT_KEY] == "Eiffel Tower\n\nIt was completed in 1889 and painted every seven years."
    assert out[2].metadata[INDEX_TEXT_KEY].startswith("梅雨 · 日本の梅雨\n\n沖縄では")
    for src, got in zip(CORPUS, out, strict=True):
        assert got.page_content == src.page_content and got.id == src.id
        assert {k: v for k, v in got.metadata.items() if k != INDEX_TEXT_KEY} == src.metadata
    bare = Document(page_content="no metadata")
    assert ContextualHeader().transform_documents([bare]) == [bare]
    assert index_text(bare) == "no metadata"


def test_header_is_deterministic():
    a = ContextualHeader().transform_documents(CORPUS)
    b = ContextualHeader().transform_documents(copy.deepcopy(CORPUS))
    assert [d.metadata[INDEX_TEXT_KEY] for d in a] == [d.metadata[INDEX_TEXT_KEY] for d in b]


def test_bm25_finds_a_chunk_by_its_title_only_words_and_returns_it_verbatim():
    plain = BM25Retriever.from_documents(CORPUS, k=3)
    assert plain.invoke("Eiffel") == []  # the chunk text never says "Eiffel"
    contextual = BM25Retriever.from_documents(ContextualHeader().transform_documents(CORPUS), k=3)
    hits = contextual.invoke("Eiffel")
    assert [d.metadata["chunk_id"] for d in hits] == ["tower#1"]
    assert hits[0].page_content == TOWER.page_content  # what is returned and cited is the chunk itself
    for key in ("start_index", "end_index", "source_locator", "doc_id"):
        assert hits[0].metadata[key] == TOWER.metadata[key]
    ja_hits = contextual.invoke("日本の梅雨")
    assert ja_hits[0].metadata["chunk_id"] == "tsuyu#2" and ja_hits[0].page_content == TSUYU.page_content


def test_without_index_text_bm25_is_unchanged():
    a = BM25Retriever.from_documents(CORPUS, k=3).invoke("1889 erupted 沖縄")
    b = BM25Retriever.from_documents(copy.deepcopy(CORPUS), k=3).invoke("1889 erupted 沖縄")
    assert a == b and a


def test_dense_embeds_the_index_text_and_returns_page_content(tmp_path):
    emb = HashingEmbeddings()
    docs = ContextualHeader().transform_documents(CORPUS)
    dense = DenseRetriever.from_documents(docs, emb, k=1)
    hit = dense.invoke("Eiffel Tower")[0]
    assert hit.metadata["chunk_id"] == "tower#1" and hit.page_content == TOWER.page_content
    expected = emb.embed_documents([docs[0].metadata[INDEX_TEXT_KEY]])[0]
    assert hit.metadata["scores"]["vector"] == pytest.approx(
        sum(a * b for a, b in zip(expected, emb.embed_query("Eiffel Tower"), strict=True)), abs=1e-5
    )
    # save/load checks the embedded text's hash against the index text, not page_content
    dense.save(tmp_path / "v")
    loaded = DenseRetriever.load(tmp_path / "v", embedding=emb)
    assert loaded.invoke("Eiffel Tower")[0].metadata["chunk_id"] == "tower#1"


def test_bad_fields():
    with pytest.raises(TypeError, match="fields"):
        ContextualHeader(fields="title")


async def test_async_transform_matches_sync():
    header = ContextualHeader()
    assert await header.atransform_documents(CORPUS) == header.transform_documents(CORPUS)


# -- the package's own splitters write `heading`; the header reads it (issue 27 §3) ---------------------------------
_HEADED_TEXTS = {
    "layout": "# 梅雨\n\n## 沖縄の梅雨\n\n沖縄では5月上旬に始まり、6月下旬に終わる。\n",
    "laws": "第一章 総則\n\n第一条 この法律は、労働者の保護を目的とする。\n\n第二章 賃金\n\n第三条 使用者は、毎月一回以上支払う。\n",
    "book": "第一章 旅立ち\n\n少年は朝早く村を出た。\n\n第二章 海\n\n船は三日で港に着いた。\n",
    "qa": "Q: 梅雨はいつ始まりますか？\n\n六月上旬です。\n\nQ: いつ終わりますか？\n\n七月中旬です。\n",
    "parent_child": "# 梅雨\n\n## 沖縄の梅雨\n\n沖縄では5月上旬に始まり、6月下旬に終わる。\n",
}


@pytest.mark.parametrize("chunker", sorted(_HEADED_TEXTS))
def test_the_header_of_every_heading_chunkers_chunk_names_its_heading_path(chunker):
    from langchain_ragspine.text_splitters.chunkers import make_chunker

    splitter, _ = make_chunker(chunker, chunk_size=40, chunk_overlap=0)
    doc = Document(page_content=_HEADED_TEXTS[chunker], metadata={"doc_id": "d", "source": "d.md", "title": "T"})
    chunks = splitter.split_documents([doc])
    headed = [c for c in chunks if c.metadata.get("heading")]
    assert headed, f"{chunker} wrote no heading: the check could not fail"
    for chunk in headed:
        path = " > ".join(chunk.metadata["heading"])
        assert ContextualHeader().header(chunk) == f"T · {path}"  # was "T": the heading was never read
        assert ContextualHeader().index_text(chunk) == f"T · {path}\n\n{chunk.page_content}"


def test_one_list_of_heading_keys_is_shared_by_the_splitters_and_the_header():
    from langchain_ragspine.text import HEADING_KEY, HEADING_KEYS
    from langchain_ragspine.text_splitters.contextual import DEFAULT_HEADER_FIELDS, HEADING_FIELDS

    assert HEADING_KEY == "heading" and HEADING_KEYS[0] == HEADING_KEY
    assert HEADING_FIELDS == frozenset(HEADING_KEYS)
    assert DEFAULT_HEADER_FIELDS[: 1 + len(HEADING_KEYS)] == ("title", *HEADING_KEYS)
    # a list under any heading key is a path (" > "); the same path under two keys is said once
    md = {"title": "T", "heading": ["A", "B"], "section": ["A", "B"], "entities": ["x", "y"]}
    assert contextual_header(md) == "T · A > B · x, y"
