"""ExtractiveCompressor: the query's sentences go to prompt_text; page_content and lineage stay byte-identical."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from langchain_ragspine.chains import format_context, make_answer_chain
from langchain_ragspine.document_compressors.compression import ExtractiveCompressor, sentence_units

JA = (
    "梅雨は、北海道と小笠原諸島を除く日本、朝鮮半島南部、中国の南部から長江流域にかけての沿海部、および台湾など、"
    "東アジアの広範囲においてみられる特有の気象現象で、5月から7月にかけて来る曇りや雨の多い期間のこと。"
    "雨季の一種である。\n\n"
    "日本の梅雨入りは沖縄が最も早く、5月上旬である。東北地方北部の梅雨入りは6月中旬になる。"
    "梅雨の時期は湿度が高く、カビが生えやすい。"
)
EN = (
    "The Eiffel Tower is a wrought-iron lattice tower in Paris. It is named after the engineer Gustave Eiffel. "
    "Locally nicknamed La dame de fer, it was constructed from 1887 to 1889. It was the world's tallest structure "
    "until 1930. The tower has three levels for visitors, with restaurants on the first and second levels."
)


def _doc(i: int, text: str, **md: Any) -> Document:
    meta = {
        "chunk_id": f"d{i}#0",
        "doc_id": f"d{i}",
        "title": f"T{i}",
        "source_locator": f"d{i}.md#0-{len(text)}",
        "start_index": 0,
        "end_index": len(text),
        "sensitivity": "INTERNAL",
        "scores": {"bm25": 3.0, "vector": None, "fused": 3.0, "rerank": None},
        **md,
    }
    return Document(page_content=text, metadata=meta, id=f"id{i}")


def test_sentence_units_split_lines_and_sentence_ends_without_white_space():
    text = "One. Two!\n\n  三つ。四つ\n"
    assert [text[s:e] for s, e in sentence_units(text)] == ["One.", "Two!", "三つ。", "四つ"]
    assert sentence_units("   \n ") == []


def test_keeps_the_answer_sentence_and_shrinks_the_prompt():
    docs = [_doc(1, JA), _doc(2, EN)]
    out = ExtractiveCompressor(max_chars=80).compress_documents(docs, "日本の梅雨入りが最も早いのはどこか")
    ja = out[0].metadata["prompt_text"]
    assert "沖縄" in ja and len(ja) < len(JA) / 2
    assert "東アジアの広範囲" not in ja  # the long first sentence does not fit beside the answer
    out_en = ExtractiveCompressor(max_chars=140).compress_documents(docs, "When was the Eiffel Tower constructed?")
    en = out_en[1].metadata["prompt_text"]
    assert "1887 to 1889" in en and len(en) <= 140 + len(" … ") and len(en) < len(EN) / 2


def test_page_content_and_lineage_are_byte_identical():
    docs = [_doc(1, JA), _doc(2, EN)]
    before = copy.deepcopy(docs)
    out = ExtractiveCompressor(max_chars=60).compress_documents(docs, "梅雨入り 沖縄")
    assert docs == before  # inputs not modified
    for src, got in zip(docs, out, strict=True):
        assert got.page_content == src.page_content and got.id == src.id
        assert {k: v for k, v in got.metadata.items() if k != "prompt_text"} == src.metadata
        # every kept piece is verbatim text of the chunk
        for piece in got.metadata["prompt_text"].split(" … "):
            assert piece in src.page_content


def test_kept_sentences_stay_in_text_order_and_adjacent_ones_are_one_slice():
    text = "Alpha one. Beta two. Gamma three. Delta four. Epsilon five."
    out = ExtractiveCompressor(max_chars=30).compress_documents([_doc(1, text)], "delta beta")
    assert out[0].metadata["prompt_text"] == "Beta two. … Delta four."
    out = ExtractiveCompressor(max_chars=30).compress_documents([_doc(1, text)], "gamma delta")
    assert out[0].metadata["prompt_text"] == "Gamma three. Delta four."


def test_short_documents_are_left_as_they_are():
    short = _doc(1, "Short text.")
    assert ExtractiveCompressor(max_chars=100).compress_documents([short], "text") == [short]


def test_no_overlap_keeps_the_lead():
    out = ExtractiveCompressor(max_chars=40).compress_documents([_doc(2, EN)], "量子色力学")
    assert out[0].metadata["prompt_text"] == "The Eiffel Tower is a wrought-iron lattice tower in Paris."[:58]


def test_compresses_an_existing_prompt_text_and_drops_restricted():
    doc = _doc(1, "raw", prompt_text=EN)
    secret = _doc(2, EN, sensitivity="restricted")
    out = ExtractiveCompressor(max_chars=60).compress_documents([secret, doc], "1930 tallest")
    assert len(out) == 1 and out[0].page_content == "raw"
    assert "1930" in out[0].metadata["prompt_text"] and len(out[0].metadata["prompt_text"]) < len(EN)


def test_the_answer_chain_shows_the_compressed_text_and_cites_the_chunk():
    docs = ExtractiveCompressor(max_chars=80).compress_documents([_doc(1, JA)], "梅雨入りが最も早いのはどこ")
    context = format_context(docs)
    assert docs[0].metadata["prompt_text"] in context and "東アジア" not in context
    out = make_answer_chain().invoke({"question": "梅雨入りが最も早いのはどこ", "documents": docs})
    assert out["citations"][0]["chunk_id"] == "d1#0"


def test_bad_max_chars():
    with pytest.raises(ValueError, match="max_chars"):
        ExtractiveCompressor(max_chars=0)


async def test_async_matches_sync():
    comp = ExtractiveCompressor(max_chars=60)
    docs = [_doc(1, JA), _doc(2, EN)]
    assert await comp.acompress_documents(docs, "梅雨") == comp.compress_documents(docs, "梅雨")


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from(["梅雨は雨季。", "Tower in Paris. ", "北海道\n", "日本の気候。", "It rains. "]), max_size=20),
    st.sampled_from(["梅雨", "Paris tower", "気候", ""]),
    st.integers(1, 120),
)
def test_property_prompt_text_is_verbatim_and_page_content_untouched(parts, query, max_chars):
    text = "".join(parts) or " "
    doc = _doc(1, text)
    (out,) = ExtractiveCompressor(max_chars=max_chars).compress_documents([doc], query)
    assert out.page_content == text
    prompt = out.metadata.get("prompt_text")
    if prompt is not None:
        assert all(piece in text for piece in prompt.split(" … "))
