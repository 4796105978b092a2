"""Chinese in either script (issue 9, section 4): Traditional↔Simplified folding of tokens, never of text.

The folding tokenizers (``auto``, ``cjk``, ``fugashi``) fold Traditional characters to Simplified in their tokens;
the ``-nofold`` variants give the tokens of before; a saved index records the tokenizer version, so an index built
with unfolded tokens is detected as stale and rebuilt.
"""

import json
import warnings
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from langchain_ragspine.backends.directory.layout import BM25_DIR, INDEX_STATE
from langchain_ragspine.errors import StaleIndexWarning, StoreError
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.sources import open_retriever, search
from langchain_ragspine.retrievers import BM25Retriever
from langchain_ragspine.tokenizers import (
    TOKENIZERS,
    fold_to_simplified,
    get_tokenizer,
    tokenizer_version,
)

TRAD_QUERY = "關聯式資料庫的備份與還原"
SIMP_QUERY = "关联式资料库的备份与还原"
TRAD_DOC = "關聯式資料庫的備份與還原：管理員應每天備份資料庫，並在硬碟故障時從備份還原資料。"
SIMP_DOC = "关联式资料库的备份与还原：管理员应每天备份资料库，并在硬碟故障时从备份还原资料。"
OFF_TOPIC = [
    "台北的天氣今天晴朗，氣溫二十八度，午後可能有雷陣雨。",
    "这道菜的做法很简单：先把鸡蛋打散，再和番茄一起炒。",
    "資料顯示，今年的旅遊人數比去年增加了百分之十。",
]

# Tokens of this text from the tokenizers as they were before folding existed (commit 519053c): "-nofold" must
# reproduce them byte for byte.
MIXED = "關聯式資料庫的備份與還原。东京と東京の乾燥した天気、Ｒｅｌａｔｉｏｎａｌ DB 한국어 𠁞"
_MIXED_CJK = [
    "關", "聯", "式", "資", "料", "庫", "的", "備", "份", "與", "還", "原", "關聯", "聯式", "式資", "資料", "料庫",
    "庫的", "的備", "備份", "份與", "與還", "還原", "东", "京", "と", "東", "京", "の", "乾", "燥", "し", "た", "天",
    "気", "东京", "京と", "と東", "東京", "京の", "の乾", "乾燥", "燥し", "した", "た天", "天気", "relational", "db",
    "한", "국", "어", "한국", "국어", "𠁞",
]
_MIXED_FUGASHI = [
    "關聯", "式", "資料", "庫", "的", "備", "份", "與", "還原", "东京", "と", "東京", "の", "乾燥", "し", "た", "天気",
    "relational", "db", "한국어", "𠁞",
]
BEFORE_FOLDING = {"cjk": _MIXED_CJK, "fugashi": _MIXED_FUGASHI, "auto": _MIXED_CJK + _MIXED_FUGASHI[:17] + ["한국어", "𠁞"]}

FOLDING = ("auto", "cjk", "fugashi")

# Text drawn from Traditional, Simplified and Japanese characters, kana, hangul, Latin, digits and punctuation.
_ALPHABET = st.sampled_from(
    list("關聯資料庫備份與還原東京乾燥髮發後雲葉臺灣薴關联资料库备份与还原东京干燥发后云叶台湾苎")
    + list("のはがをにでとしたカタナー한국어ABCabc ０１２.,。、「」\n")
    + ["𠁞", "𠀾", "ｶ", "Ａ", "\U000e0100", "\U00030000"]
)
_TEXT = st.text(alphabet=_ALPHABET, max_size=40)


# -- the fold -----------------------------------------------------------------------------------------------------
def test_fold_maps_traditional_to_simplified_and_leaves_the_rest():
    assert fold_to_simplified(TRAD_QUERY) == SIMP_QUERY
    assert fold_to_simplified(TRAD_DOC) == SIMP_DOC
    assert fold_to_simplified(SIMP_DOC) == SIMP_DOC  # Simplified text is already folded
    assert fold_to_simplified("東京の乾燥") == "东京の干燥"  # Japanese kanji fold too (on both sides alike)
    assert fold_to_simplified("ひらがな カタカナ 한국어 Latin 123 。、") == "ひらがな カタカナ 한국어 Latin 123 。、"
    assert fold_to_simplified("𠁞") == "𠀾"  # a folding character beyond the BMP
    assert fold_to_simplified("薴") == "苎"  # closed under itself: OpenCC gives 薴→苧 and 苧→苎
    # characters beyond the table (a variation selector, plane 14) and lone surrogates pass through
    assert fold_to_simplified("關\U000e0100聯\ud800") == "关\U000e0100联\ud800"
    assert fold_to_simplified("") == "" and fold_to_simplified("ASCII only") == "ASCII only"


@settings(max_examples=200, deadline=None)
@given(_TEXT)
def test_fold_is_idempotent_and_keeps_length_and_non_han(text):
    folded = fold_to_simplified(text)
    assert len(folded) == len(text)  # offsets survive: one character for one character
    assert fold_to_simplified(folded) == folded
    for a, b in zip(text, folded, strict=True):
        if a != b:
            assert "\u3400" <= a and "\u3400" <= b  # only ideographs change, into ideographs


# -- tokenizers: folding on, and off means the tokens of before ----------------------------------------------------
@pytest.mark.parametrize("name", FOLDING)
def test_nofold_tokens_are_byte_identical_to_before(name):
    assert get_tokenizer(f"{name}-nofold")(MIXED) == BEFORE_FOLDING[name]


def test_simplified_and_traditional_give_the_same_grams():
    cjk, auto = get_tokenizer("cjk"), get_tokenizer("auto")
    assert cjk(TRAD_QUERY) == cjk(SIMP_QUERY) and cjk(TRAD_DOC) == cjk(SIMP_DOC)
    assert set(cjk(TRAD_DOC)) <= set(auto(SIMP_DOC))  # auto adds MeCab's morphemes, which may split differently
    assert get_tokenizer("cjk-nofold")(TRAD_QUERY) != get_tokenizer("cjk-nofold")(SIMP_QUERY)


@settings(max_examples=80, deadline=None)
@given(_TEXT)
def test_folding_tokenizers_are_the_folded_nofold_tokens(text):
    # Folding changes what a token says, never where tokens start or end (MeCab segments the text as written);
    # "auto" and "cjk" also analyse English words, which their "-nostem" variants do not.
    for name in FOLDING:
        folding = name if name == "fugashi" else f"{name}-nostem"
        assert get_tokenizer(folding)(text) == [fold_to_simplified(t) for t in get_tokenizer(f"{name}-nofold")(text)]


def test_the_fold_keeps_its_old_import_path():
    # the fold moved to text.chinese (issue 26 H4); the tokenizers' public names still import, as the same objects
    from langchain_ragspine import tokenizers
    from langchain_ragspine.text import chinese

    assert tokenizers.fold_to_simplified is chinese.fold_to_simplified
    assert tokenizers.FOLD_VERSION == chinese.FOLD_VERSION == "t2s-char/1"


def test_fold_tokens_keeps_one_token_per_token():
    from langchain_ragspine.text.chinese import fold_tokens

    tokens = ["關聯", "の", "東京"]
    assert fold_tokens(tokens) == ["关联", "の", "东京"]
    assert fold_tokens(["关联", "の"]) == ["关联", "の"] and fold_tokens([]) == []
    assert fold_tokens(["關\n聯", "東"]) == ["关\n联", "东"]  # a token with a newline does not shift the others


def test_whitespace_does_not_fold():
    assert get_tokenizer("whitespace")(TRAD_QUERY) == [TRAD_QUERY]


def test_tokenizer_versions():
    for name in ("whitespace", "auto-nofold", "cjk-nofold", "fugashi-nofold"):
        assert tokenizer_version(name) == "1"  # tokens as before: old indexes stay valid
    for name in ("fugashi", "auto-nostem", "cjk-nostem"):
        assert tokenizer_version(name).startswith("2+t2s-char/1+opencc-")
    for name in ("auto", "cjk"):  # the fold and the English analysis (test_english_analysis.py)
        assert tokenizer_version(name).startswith("3+t2s-char/1+opencc-")
    assert tokenizer_version(" AUTO ") == tokenizer_version("auto")
    with pytest.raises(ValueError, match="unknown tokenizer"):
        tokenizer_version("mecab")
    assert set(TOKENIZERS) >= {f"{n}-nofold" for n in FOLDING}


# -- BM25: the example, both directions ---------------------------------------------------------------------
def _retriever(docs_text: str, tokenizer: str = "auto") -> BM25Retriever:
    texts = [docs_text, *OFF_TOPIC]
    return BM25Retriever.from_texts(
        texts, metadatas=[{"chunk_id": f"d#{i}"} for i in range(len(texts))], tokenizer=tokenizer, k=4
    )


_DIRECTIONS = pytest.mark.parametrize(
    ("doc", "query", "same_script_query"),
    [(TRAD_DOC, SIMP_QUERY, TRAD_QUERY), (SIMP_DOC, TRAD_QUERY, SIMP_QUERY)],
    ids=["simplified-query-traditional-doc", "traditional-query-simplified-doc"],
)


@pytest.mark.parametrize(("tokenizer", "ratio"), [("auto", 0.85), ("cjk", 1.0), ("fugashi", 0.5)])
@_DIRECTIONS
def test_a_query_in_either_script_finds_the_document(tokenizer, ratio, doc, query, same_script_query):
    # The example: before, the cross-script query scored the document 1.74 against 9.82 in its own script.
    r = _retriever(doc, tokenizer)
    hits = r.invoke(query)
    assert hits[0].page_content == doc  # found first, and the chunk text is untouched (not folded)
    cross = hits[0].metadata["scores"]["bm25"]
    same = r.invoke(same_script_query)[0].metadata["scores"]["bm25"]
    # auto: the grams match exactly, MeCab's morphemes of the two scripts may differ; cjk: identical tokens;
    # fugashi: only morphemes, so a different segmentation costs more
    assert cross >= ratio * same - 1e-4
    assert hits[1].metadata["scores"]["bm25"] < cross / 5  # far above the off-topic documents
    nofold = _retriever(doc, f"{tokenizer}-nofold")
    assert float(nofold.score(query)[0]) < min(cross, same) / 3  # what the fold fixes


@_DIRECTIONS
def test_without_folding_the_cross_script_query_scores_like_before(doc, query, same_script_query):
    r = _retriever(doc, "auto-nofold")
    cross, same = float(r.score(query)[0]), float(r.score(same_script_query)[0])
    assert cross < same / 4


def test_stored_text_and_metadata_are_untouched():
    r = _retriever(TRAD_DOC)
    assert r.docs[0].page_content == TRAD_DOC
    out = r.invoke(SIMP_QUERY)[0]
    assert out.page_content == TRAD_DOC and out.metadata["chunk_id"] == "d#0"


# -- saved indexes: the tokenizer version, and an old (unfolded) index is stale --------------------------------------
def _config(path: Path) -> dict:
    return json.loads((path / "retriever.json").read_text("utf-8"))


def _as_written_before_folding(path: Path, tokenizer: str) -> None:
    """Make the saved index at ``path`` look as the package wrote it before folding: no version recorded, the
    tokenizer named ``tokenizer`` (an ``auto-nofold`` index then holds exactly the tokens "auto" gave), and no
    checksum manifest (those came later still)."""
    config = _config(path)
    config["tokenizer"] = tokenizer
    del config["tokenizer_version"]
    (path / "retriever.json").write_text(json.dumps(config), "utf-8")
    (path / "manifest.json").unlink()


def test_save_records_the_tokenizer_version_and_load_checks_it(tmp_path: Path):
    for name in ("auto", "auto-nofold", "whitespace"):
        _retriever(TRAD_DOC, name).save(tmp_path / name)
        assert _config(tmp_path / name)["tokenizer_version"] == tokenizer_version(name)
        loaded = BM25Retriever.load(tmp_path / name)
        assert loaded.invoke(TRAD_DOC)[0].page_content == TRAD_DOC
    _retriever(TRAD_DOC, "auto-nofold").save(tmp_path / "old")
    _as_written_before_folding(tmp_path / "old", "auto")
    with pytest.raises(StoreError, match=r"stale index: built with tokenizer 'auto' version 1"):
        BM25Retriever.load(tmp_path / "old")
    # an old index of a tokenizer whose tokens did not change still loads (rebuilt from its documents: no checksum)
    _retriever(TRAD_DOC, "whitespace").save(tmp_path / "ws-old")
    _as_written_before_folding(tmp_path / "ws-old", "whitespace")
    with pytest.warns(StaleIndexWarning, match="no checksum"):
        old = BM25Retriever.load(tmp_path / "ws-old")
    assert old.invoke(TRAD_DOC)[0].page_content == TRAD_DOC


def test_a_store_with_a_pre_folding_index_is_rebuilt(tmp_path: Path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "db.md").write_text(f"# 資料庫\n\n{TRAD_DOC}\n", "utf-8")
    for i, text in enumerate(OFF_TOPIC):
        (corpus / f"other{i}.md").write_text(f"# 其他\n\n{text}\n", "utf-8")
    store = tmp_path / "store"
    ingest(corpus, store)
    state = json.loads((store / INDEX_STATE).read_text("utf-8"))
    assert state["tokenizer_version"] == tokenizer_version("auto")

    # Turn the store into one written before folding: the saved index has unfolded tokens and no version.
    docs = BM25Retriever.load(store / BM25_DIR).docs
    BM25Retriever.from_documents(docs, tokenizer="auto-nofold").save(store / BM25_DIR)
    _as_written_before_folding(store / BM25_DIR, "auto")
    del state["tokenizer_version"]
    (store / INDEX_STATE).write_text(json.dumps(state), "utf-8")

    with pytest.warns(StaleIndexWarning, match="stale index"):
        retriever = open_retriever(store, mode="bm25")
    hit = search(retriever, SIMP_QUERY, k=1)[0]  # the rebuilt in-memory index folds: found first
    assert hit.metadata["doc_id"] == "db" and TRAD_DOC in hit.page_content

    s = ingest(corpus, store)  # re-ingest rewrites the index although no document changed
    assert s.unchanged == 4 and s.index_rebuilt
    assert _config(store / BM25_DIR)["tokenizer_version"] == tokenizer_version("auto")
    with warnings.catch_warnings():
        warnings.simplefilter("error", StaleIndexWarning)
        assert search(open_retriever(store, mode="bm25"), SIMP_QUERY, k=1)[0].metadata["doc_id"] == "db"
