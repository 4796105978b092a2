import json
import random
import re
from itertools import pairwise

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from langchain_ragspine.cli import main
from langchain_ragspine.text_splitters import (
    DEFAULT_CHUNK_CHARS,
    DEFAULT_OVERLAP_CHARS,
    ParagraphTextSplitter,
)


def _assert_verbatim(text, docs):
    for d in docs:
        s, e = d.metadata["start_index"], d.metadata["end_index"]
        assert text[s:e] == d.page_content


def test_defaults():
    sp = ParagraphTextSplitter()
    assert (DEFAULT_CHUNK_CHARS, DEFAULT_OVERLAP_CHARS) == (480, 80)
    assert sp._chunk_size == 480 and sp._chunk_overlap == 80


@pytest.mark.parametrize(
    "size, overlap, match",
    [(0, 0, "chunk_size"), (-5, 0, "chunk_size"), (10, -1, "chunk_overlap"), (10, 10, "smaller"), (10, 11, "smaller")],
)
def test_invalid_budgets(size, overlap, match):
    with pytest.raises(ValueError, match=match):
        ParagraphTextSplitter(chunk_size=size, chunk_overlap=overlap)


def _semantic(**kwargs):
    from langchain_ragspine.embeddings import HashingEmbeddings
    from langchain_ragspine.text_splitters import SemanticTextSplitter

    return SemanticTextSplitter(HashingEmbeddings(8), **kwargs)


def _splitter(name):
    from langchain_ragspine import text_splitters

    return _semantic if name == "SemanticTextSplitter" else getattr(text_splitters, name)


# every splitter checks its integer arguments with arguments.check_int: one format, the argument named
_PARAGRAPH_LIKE = ["ParagraphTextSplitter", "ParentChildTextSplitter", "SentenceWindowTextSplitter",
                   "SemanticTextSplitter", "LayoutTextSplitter"]


@pytest.mark.parametrize("name", _PARAGRAPH_LIKE)
@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"chunk_size": 0}, ValueError, "chunk_size must be an int >= 1, got 0"),
        ({"chunk_size": -5}, ValueError, "chunk_size must be an int >= 1, got -5"),
        ({"chunk_size": "480"}, TypeError, "chunk_size must be an int >= 1, got str '480'"),
        ({"chunk_size": 480.0}, TypeError, "chunk_size must be an int >= 1, got float 480.0"),
        ({"chunk_size": True}, TypeError, "chunk_size must be an int >= 1, got bool True"),
        ({"chunk_size": 100, "chunk_overlap": -1}, ValueError, "chunk_overlap must be an int >= 0, got -1"),
        ({"chunk_size": 100, "chunk_overlap": None}, TypeError, "chunk_overlap must be an int >= 0, got NoneType None"),
    ],
)
def test_the_budgets_are_checked_alike_by_every_splitter(name, kwargs, error, message):
    with pytest.raises(error) as info:
        _splitter(name)(**kwargs)
    assert str(info.value) == message


@pytest.mark.parametrize(
    "make, error, message",
    [
        (lambda: _splitter("SentenceWindowTextSplitter")(window_size=-1), ValueError,
         "window_size must be an int >= 0, got -1"),
        (lambda: _splitter("SentenceWindowTextSplitter")(window_size=1.0), TypeError,
         "window_size must be an int >= 0, got float 1.0"),
        (lambda: _semantic(buffer_size=-1), ValueError, "buffer_size must be an int >= 0, got -1"),
        (lambda: _semantic(buffer_size="1"), TypeError, "buffer_size must be an int >= 0, got str '1'"),
        (lambda: _splitter("ParentChildTextSplitter")(100, 10, parent_chunk_size=0), ValueError,
         "parent_chunk_size must be an int >= 1, got 0"),
        (lambda: _splitter("ParentChildTextSplitter")(100, 10, parent_chunk_size=400.0), TypeError,
         "parent_chunk_size must be an int >= 1, got float 400.0"),
        (lambda: _splitter("ParentChildTextSplitter")(100, 10, parent_chunk_size=100), ValueError,
         "parent_chunk_size (100) must be larger than chunk_size (100)"),
    ],
)
def test_the_other_integer_arguments_are_checked_naming_them(make, error, message):
    with pytest.raises(error) as info:
        make()
    assert str(info.value) == message


def test_numpy_integer_budgets_are_plain_ints():
    np = pytest.importorskip("numpy")
    sp = ParagraphTextSplitter(chunk_size=np.int64(200), chunk_overlap=np.int32(20))
    assert (type(sp._chunk_size), type(sp._chunk_overlap)) == (int, int) and (sp._chunk_size, sp._chunk_overlap) == (200, 20)
    window = _splitter("SentenceWindowTextSplitter")(window_size=np.int64(2))
    assert type(window.window_size) is int and window.window_size == 2


def test_short_paragraphs_are_packed_into_one_chunk():
    text = "# 題\n\n一段落目です。\n\n二段落目です。"
    assert ParagraphTextSplitter(chunk_size=100, chunk_overlap=10).split_text(text) == [text]


def test_packing_respects_budget_and_overlaps():
    paras = [f"段落{i}の文です。" + "あ" * 30 + "。次の文。" for i in range(12)]
    text = "\n\n".join(paras)
    sp = ParagraphTextSplitter(chunk_size=120, chunk_overlap=20)
    spans = sp.split_spans(text)
    assert len(spans) > 3
    assert all(e - s <= 120 for s, e in spans)
    # consecutive packed chunks overlap, and every paragraph is covered by some chunk
    assert all(b[0] < a[1] for a, b in pairwise(spans))
    for p in paras:
        assert any(p in text[s:e] for s, e in spans)


def test_overlap_snaps_to_sentence_start():
    text = "前の段落の一文目。二文目です。\n\n次の段落です。"
    sp = ParagraphTextSplitter(chunk_size=22, chunk_overlap=8)
    chunks = sp.split_text(text)
    assert chunks[0] == "前の段落の一文目。二文目です。"
    assert chunks[1] == "二文目です。\n\n次の段落です。"


def test_long_paragraph_cut_at_sentence_ends_with_overlap():
    sents = [f"文{i}は" + "い" * (8 + 3 * (i % 4)) + "。" for i in range(12)]  # 12-21 chars: one starts in 20
    text = "".join(sents)
    sp = ParagraphTextSplitter(chunk_size=60, chunk_overlap=20)
    spans = sp.split_spans(text)
    chunks = [text[s:e] for s, e in spans]
    assert len(chunks) > 3
    assert all(c.endswith("。") and c.startswith("文") for c in chunks)  # cut and overlap at sentence boundaries
    assert all(e - s <= 60 for s, e in spans)
    assert all(b[0] < a[1] <= b[0] + 20 for a, b in pairwise(spans))  # consecutive pieces overlap, by <= 20
    assert all(a[0] < b[0] and a[1] < b[1] for a, b in pairwise(spans))  # progress
    assert spans[0][0] == 0 and spans[-1][1] == len(text)


def test_sentence_over_budget_is_hard_cut():
    text = "x" * 250
    spans = ParagraphTextSplitter(chunk_size=100, chunk_overlap=10).split_spans(text)
    # no boundary but code points inside one "word": full pieces, no overlap (it would start inside the word)
    assert spans == [(0, 100), (100, 200), (200, 250)]


def test_last_piece_is_not_a_sliver():
    text = "x" * 205
    spans = ParagraphTextSplitter(chunk_size=100, chunk_overlap=10).split_spans(text)
    # (200, 205) would hold 5 characters: the last piece gets at least (100 - 10) // 8 = 11 of its own
    assert spans == [(0, 100), (100, 194), (194, 205)]


def test_english_sentences():
    text = "First sentence here. Second one is longer than it looks! Third? Fourth."
    chunks = ParagraphTextSplitter(chunk_size=60, chunk_overlap=5).split_text(text)
    # a sentence end beats the word boundary nearer the budget; no sentence starts in the 5-char overlap window
    assert chunks == ["First sentence here. Second one is longer than it looks!", "Third? Fourth."]


def test_empty_and_whitespace_text():
    sp = ParagraphTextSplitter()
    assert sp.split_text("") == []
    assert sp.split_text(" \n\n \t\n") == []


def test_documents_carry_lineage_metadata():
    text = "# Title\n\n" + "\n\n".join(f"段落{i}です。" + "う" * 50 for i in range(6))
    doc = Document(page_content=text, metadata={"doc_id": "ja/a", "source": "ja/a.md", "title": "T"})
    docs = ParagraphTextSplitter(chunk_size=120, chunk_overlap=20).split_documents([doc])
    assert len(docs) > 1
    _assert_verbatim(text, docs)
    for i, d in enumerate(docs):
        md = d.metadata
        assert md["chunk_id"] == f"ja/a#{i}" == d.id
        assert md["source_locator"] == f"ja/a.md#{md['start_index']}-{md['end_index']}"
        assert md["title"] == "T" and md["doc_id"] == "ja/a"
    assert doc.metadata == {"doc_id": "ja/a", "source": "ja/a.md", "title": "T"}  # input not mutated


def test_doc_id_fallbacks():
    sp = ParagraphTextSplitter()
    by_source = sp.create_documents(["本文"], [{"source": "x.txt"}])[0]
    assert by_source.metadata["doc_id"] == "x.txt" and by_source.metadata["chunk_id"] == "x.txt#0"
    by_id = sp.split_documents([Document(page_content="本文", id="d1")])[0]
    assert by_id.metadata["chunk_id"] == "d1#0"
    anon = sp.create_documents(["本文"])[0]
    assert anon.metadata["chunk_id"] == sp.create_documents(["本文"])[0].metadata["chunk_id"]  # stable hash
    with pytest.raises(ValueError, match="metadatas"):
        sp.create_documents(["a", "b"], [{}])


def test_real_article_chunks_within_budget_and_verbatim():
    rng = random.Random(7)
    sentences = ["梅雨は東アジアの雨季である。", "Tsuyu is the rainy season.", "北海道には梅雨がない！"]
    paras = ["".join(rng.choice(sentences) for _ in range(rng.randint(1, 40))) for _ in range(30)]
    text = "\n\n".join(paras)
    docs = ParagraphTextSplitter().create_documents([text], [{"doc_id": "d"}])
    _assert_verbatim(text, docs)
    assert all(len(d.page_content) <= 480 for d in docs)


texts = st.lists(
    st.text(alphabet=st.sampled_from(list("あいう漢字ab .。！?\n")), min_size=0, max_size=200),
    min_size=0,
    max_size=8,
).map("\n\n".join)


def test_regression_overlap_counts_the_gap_between_paragraphs():
    # found by the property test: the blank lines between two paragraphs were not counted against the budget,
    # so the overlapping chunk "?\n\n?" (4 chars) exceeded chunk_size=2
    spans = ParagraphTextSplitter(chunk_size=2, chunk_overlap=1).split_spans("??\n\n?")
    assert spans == [(0, 2), (4, 5)]


def test_regression_overlap_never_starts_inside_a_latin_word():
    # the demo corpus showed a chunk starting "ows" (from "rows") when the overlap window held no word start
    text = "Old rows stay in the table as history\n\n" + "x" * 40
    chunks = ParagraphTextSplitter(chunk_size=45, chunk_overlap=4).split_text(text)
    assert chunks == ["Old rows stay in the table as history", "x" * 40]
    # CJK text has no word boundaries: a character cut is fine there
    cjk = "あいうえおかきくけこ\n\n" + "さ" * 8
    assert ParagraphTextSplitter(chunk_size=12, chunk_overlap=3).split_text(cjk)[1] == "けこ\n\n" + "さ" * 8


# -- issue 9: chunk boundaries people would choose ------------------------------------------------------------------
_WORDS = (
    "alpha bravo charlie delta echo golf hotel india juliett kilo lima mike november oscar papa quebec romeo "
    "sierra tango uniform victor whiskey xray yankee zulu retrieval passage citation boundary paragraph"
).split()


def _english_without_punctuation(n_chars: int, seed: int = 3) -> str:
    rng = random.Random(seed)
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < n_chars:
        words.append(rng.choice(_WORDS))
    return " ".join(words)[:n_chars].rstrip()


def _english_with_word_across(position: int, word: str, n_chars: int) -> tuple[str, int]:
    """English without punctuation, ``word`` placed so that it straddles ``position``; returns (text, word start)."""
    head = _english_without_punctuation(position - 8, seed=1)
    head = head[: head.rfind(" ")]
    pad = "x" * (position - 3 - len(head) - 2)  # the word starts 3 chars before position
    prefix = f"{head} {pad} "
    tail = _english_without_punctuation(n_chars - len(prefix) - len(word) - 1, seed=2)
    return f"{prefix}{word} {tail}", len(prefix)


def _words_whole(text: str, spans: list[tuple[int, int]]) -> None:
    for m in re.finditer(r"\S+", text):
        assert any(s <= m.start() and m.end() <= e for s, e in spans), f"{m.group()!r} at {m.start()} is in no chunk"


def test_english_without_punctuation_is_cut_between_words_and_overlaps():
    text, at = _english_with_word_across(480, "foxtrot", 5000)
    assert len(text) >= 4990 and at < 480 < at + len("foxtrot")  # the old splitter hard-cut at 480
    spans = ParagraphTextSplitter().split_spans(text)
    assert all(e - s <= 480 for s, e in spans)
    for s, e in spans:  # no cut inside a word
        assert s == 0 or text[s - 1] == " "
        assert e == len(text) or text[e] == " "
    assert all(b[0] < a[1] for a, b in pairwise(spans))  # consecutive pieces overlap (starting on a word)
    assert all(a[1] - b[0] <= 80 for a, b in pairwise(spans))
    _words_whole(text, spans)
    assert any("foxtrot" in text[s:e] for s, e in spans)


def test_bm25_search_finds_a_word_that_straddled_an_old_cut(tmp_path, capsys):
    text, _ = _english_with_word_across(960, "foxtrot", 5000)
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "long.md").write_text(text, "utf-8")
    store = str(tmp_path / "store")
    assert main(["ingest", str(corpus), "--store", store]) == 0
    capsys.readouterr()
    assert main(["search", "foxtrot", "--store", store, "--json", "-k", "3"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert rows and "foxtrot" in rows[0]["text"]
    assert text[rows[0]["start_index"] : rows[0]["end_index"]] == rows[0]["text"]


def test_no_cut_inside_a_url_when_a_space_fits_the_budget():
    url = "https://example.com/" + "a" * 40
    text = "see " + " ".join(["word"] * 18) + f" {url} " + " ".join(["tail"] * 30)
    assert text.index(url) < 100 < text.index(url) + len(url)
    spans = ParagraphTextSplitter(chunk_size=100, chunk_overlap=20).split_spans(text)
    assert all(s == 0 or text[s - 1] == " " for s, _ in spans)
    assert all(e == len(text) or text[e] == " " for _, e in spans)
    assert any(url in text[s:e] for s, e in spans)


def _assert_whole_lines(text: str, spans: list[tuple[int, int]], size: int = 480) -> None:
    assert len(spans) > 1
    for s, e in spans:
        assert e - s <= size
        line_start = text.rfind("\n", 0, s) + 1
        assert not text[line_start:s].strip(), f"chunk starts mid-line: {text[s:s + 20]!r}"  # indent stripped
        assert e == len(text) or text[e] == "\n", f"chunk ends mid-line: {text[e - 20:e]!r}"
    assert all(b[0] < a[1] for a, b in pairwise(spans))  # overlap by whole lines
    lines = text.split("\n")
    for line in lines:  # every line is whole in some chunk
        assert any(line in text[s:e] for s, e in spans)


def test_markdown_list_splits_between_items():
    items = [f"- 項目{i:02d}: 梅雨の時期の手順 step {i} では、鍵を交換して記録する。" for i in range(30)]
    text = "\n".join(items)
    assert 1100 <= len(text) <= 1200  # the 1,130-character list
    _assert_whole_lines(text, ParagraphTextSplitter().split_spans(text))


def test_markdown_table_splits_between_rows():
    rows = ["| 名前 | 説明 | 値 |", "|---|---|---|"]
    rows += [f"| item-{i} | 東京の観測点{i}、rainy season の降水量 | {i * 3.5:.1f} mm |" for i in range(30)]
    text = "\n".join(rows)
    assert len(text) > 1000
    _assert_whole_lines(text, ParagraphTextSplitter().split_spans(text))


def test_fenced_code_splits_between_lines():
    body = [f"    total_{i} = compute(values[{i}], weight={i}.5)  # 合計{i}" for i in range(30)]
    text = "```python\n" + "\n".join(body) + "\n```"
    _assert_whole_lines(text, ParagraphTextSplitter().split_spans(text))


_JA_SENTENCES = [
    "梅雨は、北海道と小笠原諸島を除く日本で見られる雨季である。",
    "五月から七月にかけて、東アジアの広い範囲で雨の多い時期が続く。",
    "梅雨前線が停滞すると、各地で長雨となる。",
    "気象庁は毎年「梅雨入り」と「梅雨明け」の時期を発表している。",
    "ただし、発表はあくまで速報であり、秋に見直されることがある！",
    "沖縄では五月上旬に梅雨入りすることが多い。",
    "梅雨の語源には諸説があり、梅の実が熟す頃の雨だからとも言われる？",
    "農業にとって梅雨の雨は重要で、田植えの時期と重なる。",
]


def _japanese_paragraph(n_chars: int) -> str:
    out: list[str] = []
    i = 0
    while sum(map(len, out)) < n_chars:
        out.append(f"（{i}）" + _JA_SENTENCES[i % len(_JA_SENTENCES)])
        i += 1
    return "".join(out)


def test_long_japanese_paragraph_chunks_overlap_at_sentence_starts():
    text = _japanese_paragraph(1400)
    assert 1400 <= len(text) < 1500
    spans = ParagraphTextSplitter().split_spans(text)
    assert len(spans) >= 3
    assert all(e - s <= 480 for s, e in spans)
    assert all(b[0] < a[1] and a[1] - b[0] <= 80 for a, b in pairwise(spans))  # consecutive chunks overlap
    for s, e in spans:
        assert text[e - 1] in "。！？", text[s:e]  # cut at sentence ends
        assert text[s] == "（", text[s:e]  # start at sentence starts (also the overlap)
    sentences = re.findall(r"（\d+）[^。！？]*[。！？]", text)
    assert "".join(sentences) == text
    for sent in sentences:  # a fact in one sentence is always whole in a chunk
        assert any(sent in text[s:e] for s, e in spans)


def test_japanese_without_sentence_ends_cuts_at_clause_marks():
    text = "、".join(f"項目{i}の値は正しく記録された" for i in range(60))
    spans = ParagraphTextSplitter(chunk_size=120, chunk_overlap=30).split_spans(text)
    assert all(text[e - 1] == "、" for _, e in spans[:-1])
    assert all(text[s - 1] == "、" for s, _ in spans[1:])


def test_chunk_ids_are_deterministic():
    text = _japanese_paragraph(1400) + "\n\n" + _english_without_punctuation(2000)
    doc = Document(page_content=text, metadata={"doc_id": "d", "source": "d.md"})
    a = ParagraphTextSplitter().split_documents([doc])
    b = ParagraphTextSplitter().split_documents([doc])
    assert [(d.id, d.page_content, d.metadata) for d in a] == [(d.id, d.page_content, d.metadata) for d in b]
    assert [d.id for d in a] == [f"d#{i}" for i in range(len(a))]


# clusters of several code points: combining marks, emoji modifier / ZWJ / flag sequences, an Indic conjunct, CRLF,
# a space carrying a combining mark
_ATOMS = [
    "あ", "い", "漢", "字", "中", "文", "a", "b", "xyz", " ", "\n", "\n\n", "。", "、", "！", ".", ",", "?", "」",
    "e\u0301", "a\u0308\u0323", "👍🏽", "👨\u200d👩\u200d👧", "🇯🇵", "\u0915\u094d\u0937", "\r\n", " \u0301", "가",
]
_many_scripts = st.lists(st.sampled_from(_ATOMS), max_size=150).map("".join)


def _grapheme_bounds(text: str) -> set[int]:
    bounds = {0}
    for m in regex.finditer(r"\X", text):
        bounds.add(m.end())
    return bounds


@settings(max_examples=400, deadline=None)
@given(text=st.one_of(texts, _many_scripts), size=st.integers(1, 120), overlap_frac=st.floats(0, 0.9))
def test_property_grapheme_safe_verbatim_covering_and_progressing(text, size, overlap_frac):
    overlap = min(int(size * overlap_frac), size - 1)
    sp = ParagraphTextSplitter(chunk_size=size, chunk_overlap=overlap)
    spans = sp.split_spans(text)
    bounds = _grapheme_bounds(text)
    longest = max((m.end() - m.start() for m in regex.finditer(r"\X", text)), default=0)
    for s, e in spans:
        assert 0 <= s < e <= len(text) and e - s <= size
        if longest <= size:  # a cluster longer than the budget is the one case cut at code points
            assert s in bounds and e in bounds, (text[s:e], s, e)
            clusters = regex.findall(r"\X", text[s:e])
            assert not clusters[0].isspace() and not clusters[-1].isspace()  # whitespace is trimmed
    # progress: starts and ends strictly increase (so no chunk lies inside another and splitting terminates)
    assert all(a[0] < b[0] and a[1] < b[1] for a, b in pairwise(spans))
    assert all(a[1] - b[0] <= overlap for a, b in pairwise(spans))  # overlap within budget
    covered = set()
    for s, e in spans:
        covered.update(range(s, e))
    assert all(i in covered for i, ch in enumerate(text) if not ch.isspace())
    docs = sp.create_documents([text], [{"doc_id": "d"}])
    _assert_verbatim(text, docs)
    assert [d.id for d in docs] == [d.id for d in sp.create_documents([text], [{"doc_id": "d"}])]


@pytest.mark.parametrize(
    ("text", "size", "overlap"),
    [(". \u0301", 2, 0), (". \u0301", 2, 1), ("a \u0301", 2, 0), ("x. \u0301\u0301y z", 3, 1), ("梅雨。 \u0301雨", 2, 0)],
)
def test_a_space_carrying_a_combining_mark_is_never_cut_from_its_mark(text, size, overlap):
    """Regression (found by the property test above): ``". \u0301"`` with ``chunk_size=2`` was cut at 2, between the
    space and the combining acute that forms one grapheme cluster with it, because no whitespace, sentence or
    grapheme cut was allowed next to that space; the last resort cut at code points though the cluster fits."""
    spans = ParagraphTextSplitter(chunk_size=size, chunk_overlap=overlap).split_spans(text)
    bounds = _grapheme_bounds(text)
    assert spans and all(s in bounds and e in bounds and e - s <= size for s, e in spans), spans
    assert all(i in set().union(*(range(s, e) for s, e in spans)) for i, ch in enumerate(text) if not ch.isspace())


def test_heading_before_a_long_paragraph_opens_its_first_chunk():
    text = "# 梅雨\n\n" + _japanese_paragraph(900)
    spans = ParagraphTextSplitter().split_spans(text)
    assert spans[0][0] == 0 and text[spans[0][0] : spans[0][1]].startswith("# 梅雨\n\n（0）")  # no title-only chunk
    assert all(e - s <= 480 for s, e in spans)


_TRICKY = _ATOMS + ["\u0600", "\u1100", "\u1161", "\u11a8", "🇺", "\r", "\u200d", "\u0301", "\u094d", "\u0937"]


@settings(max_examples=300, deadline=None)
@given(text=st.lists(st.sampled_from(_TRICKY), max_size=40).map("".join))
def test_property_grapheme_boundaries_match_full_segmentation(text):
    # the splitter segments only the stretches around non-"simple" characters; it must agree with \X everywhere
    from langchain_ragspine.text.graphemes import Graphemes

    g = Graphemes(text)
    bounds = _grapheme_bounds(text)
    assert [i for i in range(len(text) + 1) if g.at(i)] == sorted(bounds)


def test_chunks_share_no_mutable_metadata_value() -> None:
    """Each chunk gets its own copy of the document's metadata: scalar metadata is copied cheaply, a list or dict
    value is deep-copied, so changing one chunk's metadata never changes another chunk's or the source's."""
    tags = ["a", {"nested": [1]}]
    source = {"source": "d.md", "title": "T", "year": 2020, "score": 0.5, "ok": True, "none": None, "tags": tags}
    text = "一段目の文章です。" * 40 + "\n\n" + "二段目の文章です。" * 40
    chunks = ParagraphTextSplitter(chunk_size=200, chunk_overlap=0).create_documents([text], [source])
    assert len(chunks) >= 2
    chunks[0].metadata["tags"][1]["nested"].append(2)
    chunks[0].metadata["title"] = "changed"
    assert chunks[1].metadata["tags"] == ["a", {"nested": [1]}] and chunks[1].metadata["title"] == "T"
    assert tags == ["a", {"nested": [1]}]
    plain = ParagraphTextSplitter(chunk_size=200, chunk_overlap=0).create_documents([text], [{"source": "d.md"}])
    plain[0].metadata["doc_id"] = "x"
    assert plain[1].metadata["doc_id"] == "d.md"
