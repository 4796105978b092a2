"""Answers whose citations always resolve (issue 9 §3): citation markers in the forms models write, out-of-range
numbers, attribution when the model writes no marker, unsupported sentences, the uncited policy, content terms
(no question words or stop words as evidence), and plain English extractive answers."""

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel, GenericFakeChatModel

from langchain_ragspine.chains import extractive_answer, make_answer_chain
from langchain_ragspine.chains.answer import (
    UNCITED_WARNING,
    attribute_citations,
    normalize_citations,
    parse_citation_numbers,
    rewrite_citation_markers,
    strip_citation_markers,
)
from langchain_ragspine.graphs import build_adaptive_rag, build_corrective_rag
from langchain_ragspine.graphs.graders import LexicalGrader
from langchain_ragspine.retrievers import BM25Retriever
from langchain_ragspine.stopwords import content_terms
from tests.unit_tests.chains.test_answer_chain import SpyChatModel  # records every prompt, answers ``reply``


def _doc(i: int, text: str, *, sensitivity: str = "PUBLIC", **md: Any) -> Document:
    meta = {"chunk_id": f"d{i}#0", "doc_id": f"d{i}", "title": f"T{i}", "source_locator": f"d{i}.md#0-{len(text)}",
            "sensitivity": sensitivity, **md}
    return Document(page_content=text, metadata=meta)


DOCS = [
    _doc(1, "The Eiffel Tower is in Paris. It was completed in 1889."),
    _doc(2, "Mount Fuji is the highest mountain in Japan. It is 3776 metres tall."),
    _doc(3, "梅雨は北海道と小笠原諸島を除く日本でみられる。梅雨は雨季の一種である。"),
]


# -- markers --------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "numbers"),
    [
        ("a [1].", [1]),
        ("a [1, 2].", [1, 2]),
        ("a [1,2] b [2，3] c [3、1]", [1, 2, 3]),
        ("a [1][2].", [1, 2]),
        ("a [1] [2].", [1, 2]),
        ("a [1-3].", [1, 2, 3]),
        ("a [1–3].", [1, 2, 3]),  # en dash
        ("a [1—3] [4 ~ 5]", [1, 2, 3, 4, 5]),
        ("a [3-1].", [3, 2, 1]),
        ("a ［１］ b ［２, ３］", [1, 2, 3]),  # full-width brackets and digits
        ("a 【1】 b 【２】", [1, 2]),
        ("a [1, 3-4]", [1, 3, 4]),
        ("a [1-5000]", [1, 5000]),  # implausible ranges are not expanded
        ("no markers [x] [] [1a]", []),
    ],
)
def test_citation_markers_in_the_forms_models_write(text, numbers):
    assert parse_citation_numbers(text) == numbers


def test_normalize_citations_expands_range_checks_and_reports_invalid_numbers():
    text, cited, invalid = normalize_citations("Fuji [1-3]. Tower [1][2]. Rain ［３］. Moon [7]. Sun 【4–5】.", 3)
    assert text == "Fuji [1, 2, 3]. Tower [1, 2]. Rain [3]. Moon. Sun."
    assert cited == [1, 2, 3]
    assert invalid == [7, 4, 5]
    # a range that runs past the context keeps its valid part
    assert normalize_citations("a [2-4]", 3) == ("a [2, 3]", [2, 3], [4])
    assert normalize_citations("a [0]", 3) == ("a", [], [0])
    assert normalize_citations("nothing", 0) == ("nothing", [], [])


def test_rewrite_and_strip_markers():
    assert rewrite_citation_markers("A [1][2] B [2–3].", lambda ns: [n * 10 for n in ns]) == "A [10, 20] B [20, 30]."
    assert strip_citation_markers("A [1][2]B").split() == ["A", "B"]


# -- the LLM path: markers -------------------------------------------------------------------------------------------
def test_llm_answer_markers_are_normalised_and_out_of_range_numbers_reported():
    llm = FakeListChatModel(responses=["Fuji is 3776 m [1-2]. The tower is in Paris 【9】. Rain [２]."])
    out = make_answer_chain(llm).invoke({"question": "Tell me", "documents": DOCS})
    assert out["answer"] == "Fuji is 3776 m [1, 2]. The tower is in Paris. Rain [2]."
    assert [(c["n"], c["chunk_id"], c["attributed"]) for c in out["citations"]] == [
        (1, "d1#0", False), (2, "d2#0", False)
    ]
    assert out["invalid_citations"] == [9]
    assert out["unsupported_sentences"] == [] and out["warning"] is None


def test_regression_range_marker_gave_no_citations():
    # before: "[1-3]" was not read, so the answer had no citations and the marker stayed in the text unchecked
    out = make_answer_chain(GenericFakeChatModel(messages=iter(["Paris and Fuji [1-3]."]))).invoke(
        {"question": "Where?", "documents": DOCS[:2]}
    )
    assert out["answer"] == "Paris and Fuji [1, 2]."
    assert [c["n"] for c in out["citations"]] == [1, 2]
    assert out["invalid_citations"] == [3]


# -- the LLM path: attribution ----------------------------------------------------------------------------------------
def test_answer_without_markers_is_cited_by_attribution_and_unsupported_sentences_are_flagged():
    llm = FakeListChatModel(responses=["Mount Fuji is 3776 metres tall. Bananas are yellow and grow in Ecuador."])
    out = make_answer_chain(llm).invoke({"question": "How tall is Mount Fuji?", "documents": DOCS})
    assert out["answer"] == "Mount Fuji is 3776 metres tall.[2] Bananas are yellow and grow in Ecuador."
    assert [(c["n"], c["chunk_id"], c["attributed"]) for c in out["citations"]] == [(2, "d2#0", True)]
    assert out["unsupported_sentences"] == ["Bananas are yellow and grow in Ecuador."]
    assert out["mode"] == "llm" and out["warning"] is None


def test_attribution_in_japanese_and_chinese():
    llm = FakeListChatModel(responses=["北海道と小笠原諸島です。"])
    out = make_answer_chain(llm).invoke({"question": "日本で梅雨がないのは北海道とどこか。", "documents": DOCS})
    assert out["answer"] == "北海道と小笠原諸島です。[3]"
    assert out["citations"][0]["doc_id"] == "d3" and out["citations"][0]["attributed"] is True
    zh = [_doc(7, "北京大学创办于1898年，初名京师大学堂。"), _doc(8, "清华大学位于北京海淀区。")]
    out = make_answer_chain(FakeListChatModel(responses=["北京大学创办于1898年。"])).invoke(
        {"question": "北京大学是哪一年创办的？", "documents": zh}
    )
    assert [c["doc_id"] for c in out["citations"]] == ["d7"]


@pytest.mark.parametrize(
    ("reply", "expected", "gold"),
    [
        # CMRC 2018 dev, DEV_1117_QUERY_2 and DEV_115_QUERY_3 with the local 1.5B model: the marker went inside the
        # title brackets ("《樱花大战系列 [1]》") and before the final "。", so the gold answer was no longer in the text
        ("《樱花大战系列》", "《樱花大战系列》[1]", "《樱花大战系列》"),
        ("圣训学是一种知识，传述者与传述的内容都必须确认无误。", "圣训学是一种知识，传述者与传述的内容都必须确认无误。[1]",
         "圣训学是一种知识，传述者与传述的内容都必须确认无误。"),
        ("She called it “the Sakura Wars series”.", "She called it “the Sakura Wars series”.[1]", "“the Sakura Wars series”."),
        ("Sakura Wars 1996", "Sakura Wars 1996 [1]", "Sakura Wars 1996"),
    ],
)
def test_an_attributed_marker_never_splits_the_models_words(reply, expected, gold):
    docs = [_doc(1, "《大神一郎奋斗记》是《樱花大战系列》的外传游戏。圣训学是一种知识，传述者与传述的内容都必须确认无误。"
                 "She called it “the Sakura Wars series”. Sakura Wars 1996.")]
    out = attribute_citations(reply, docs)
    assert out["answer"] == expected and gold in out["answer"]
    assert [c["n"] for c in out["citations"]] == [1]


def test_nothing_attributable_is_refused_by_default_and_flagged_when_kept():
    llm = FakeListChatModel(responses=["Bananas are yellow and grow in Ecuador."])
    out = make_answer_chain(llm).invoke({"question": "How tall is Mount Fuji?", "documents": DOCS})
    assert out["answer"] == "I don't know" and out["citations"] == []
    assert out["warning"] == UNCITED_WARNING
    assert out["unsupported_sentences"] == ["Bananas are yellow and grow in Ecuador."]
    llm = FakeListChatModel(responses=["Bananas are yellow and grow in Ecuador."])
    kept = make_answer_chain(llm, uncited="warn").invoke({"question": "How tall is Mount Fuji?", "documents": DOCS})
    assert kept["answer"] == "Bananas are yellow and grow in Ecuador." and kept["citations"] == []
    assert kept["warning"] == UNCITED_WARNING
    with pytest.raises(ValueError):
        make_answer_chain(llm, uncited="ignore")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        make_answer_chain(llm, min_support=2.0)


def test_dont_know_from_the_model_is_not_attributed_or_warned():
    out = make_answer_chain(FakeListChatModel(responses=["わかりません [1]。"])).invoke(
        {"question": "量子色力学とは何ですか", "documents": DOCS}
    )
    assert out["citations"] == [] and out["warning"] is None and out["answer"] == "わかりません。"


def test_attribution_never_cites_a_passage_that_was_not_in_the_prompt():
    # only the first passage is shown (k=1); the answer matches the second one, which the model never saw
    spy = SpyChatModel(reply="Mount Fuji is 3776 metres tall.")
    out = make_answer_chain(spy, k=1, uncited="warn").invoke({"question": "Fuji?", "documents": DOCS})
    assert out["citations"] == [] and out["warning"] == UNCITED_WARNING
    assert "3776" not in spy.prompts[0]


def test_attribution_never_cites_restricted_text():
    secret = _doc(9, "TOPSECRET launch codes are 1234 and 5678.", sensitivity="ｒｅｓｔｒｉｃｔｅｄ")
    found = attribute_citations("The launch codes are 1234 and 5678. Paris has the Eiffel Tower.", [secret, DOCS[0]])
    assert [(c["n"], c["chunk_id"]) for c in found["citations"]] == [(1, "d1#0")]  # numbered after the gate
    assert found["unsupported_sentences"] == ["The launch codes are 1234 and 5678."]
    spy = SpyChatModel(reply="The launch codes are 1234 and 5678.")
    out = make_answer_chain(spy, uncited="warn").invoke({"question": "codes?", "documents": [secret, DOCS[0]]})
    assert out["citations"] == [] and all("TOPSECRET" not in p for p in spy.prompts)


@settings(max_examples=40, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab 。.[]1-23,，【】［］１")), max_size=40), st.integers(0, 4))
def test_normalised_markers_always_resolve(text, n):
    out, cited, invalid = normalize_citations(text, n)
    assert all(1 <= k <= n for k in parse_citation_numbers(out))
    assert set(cited) == set(parse_citation_numbers(out))
    assert not set(cited) & set(invalid)


# -- content terms and the extractive answer -------------------------------------------------------------------------
def test_content_terms_leave_out_question_words_stopwords_and_particles():
    assert content_terms("What is the weather in Tokyo?") == {"weather", "tokyo"}
    assert content_terms("What is it?") == set()
    assert content_terms("どこですか") == set()
    assert content_terms("什么是什么") == set()
    ja = content_terms("日本で梅雨がないのは北海道とどこか。")
    assert {"梅雨", "北海道"} <= ja and not {"の", "は", "どこ", "か", "道と", "で梅"} & ja
    zh = content_terms("北京大学是哪一年成立的？")
    assert {"北京", "大学", "成立"} <= zh and not {"哪", "是", "的"} & zh


def test_plain_english_questions_get_extractive_answers():
    tokyo = [_doc(1, "Tokyo weather is sunny today.")]
    out = extractive_answer("What is the weather in Tokyo?", tokyo)
    assert out["answer"] == "Tokyo weather is sunny today. [1]"  # before: "I don't know"
    assert out["citations"][0]["chunk_id"] == "d1#0" and out["citations"][0]["attributed"] is False
    assert extractive_answer("What is it?", tokyo)["answer"] == "I don't know"  # nothing to look for


APPLES = [
    _doc(1, "Aomori is famous for apples. Cherries are grown in Yamagata."),
    _doc(2, "Tokyo weather is sunny today."),
]


def test_regression_an_answer_only_uses_sentences_that_share_content_terms():
    # before: "Cherries are grown in Yamagata." was added because it shares "are" with the question
    out = extractive_answer("What are apples?", APPLES)
    assert out["answer"] == "Aomori is famous for apples. [1]"
    for build in (build_adaptive_rag, build_corrective_rag):
        final = build(BM25Retriever.from_documents(APPLES, k=2)).invoke({"question": "What are apples?"})
        assert final["answer"] == "Aomori is famous for apples. [1]", build.__name__


# The two chunks of the demo corpus that the corrective graph kept for "Which BM25 engine does the package use?"
# after the paragraph splitter changed (overlap inside long paragraphs, headings joined to their section).
BM25_TITLE = "BM25 ranking, Lucene IDF and why the engine is bm25s"
BM25_CHUNKS = [
    _doc(6, "this matters: particles and endings such as 「です」 or 「ます」 occur everywhere.\n\n## Why bm25s\n\n"
            "The engine is bm25s. When the index is built, it tokenizes every chunk once and precomputes the BM25 "
            "contribution of every (term, chunk) pair into a sparse matrix. A query then selects the rows of its "
            "terms and sums them, which is a few vectorised operations regardless of corpus size.", title=BM25_TITLE),
    _doc(0, f"# {BM25_TITLE}\n\nBM25Retriever ranks chunks with Okapi BM25, the lexical scoring function behind "
            "Lucene, Elasticsearch and most search engines. A chunk's score sums, over the query's terms, how rare "
            "the term is in the collection (inverse document frequency, IDF) times how often it occurs in the "
            "chunk, saturated and corrected for chunk length.\n\n## The formula", title=BM25_TITLE),
]


def test_regression_the_documents_title_is_evidence_for_its_sentences():
    # before: "I don't know" — "The engine is bm25s." shares only "engine" with the question ("bm25s" is not
    # "bm25"; "package" and "use" occur in no sentence), 0.196 of its IDF weight, under min_coverage 0.2
    out = extractive_answer("Which BM25 engine does the package use?", BM25_CHUNKS)
    assert out["answer"].splitlines()[0] == "The engine is bm25s. [1]"
    assert out["citations"][0]["chunk_id"] == "d6#0"
    # without a title the same sentence is not the answer: the title is what makes it one.  Before English stems
    # (auto-nostem) nothing was enough evidence; with them "engines" is "engine" and "bm25s" is "bm25", so a
    # sentence of the other chunk is chosen instead.
    untitled = [Document(page_content=d.page_content, metadata={**d.metadata, "title": None}) for d in BM25_CHUNKS]
    question = "Which BM25 engine does the package use?"
    assert extractive_answer(question, untitled, tokenizer="auto-nostem")["answer"] == "I don't know"
    assert extractive_answer(question, BM25_CHUNKS, tokenizer="auto-nostem")["answer"].startswith("The engine is")
    assert not extractive_answer(question, untitled)["answer"].startswith("The engine is bm25s.")


def test_title_picks_the_sentence_of_the_article_the_question_names():
    docs = [_doc(1, "It is 3,776 metres tall. It last erupted in 1707.", title="Mount Fuji"),
            _doc(2, "It is 333 metres tall.", title="Tokyo Tower")]
    # before: "I don't know" (only "tall" was evidence, and both sentences have it)
    assert extractive_answer("How tall is Mount Fuji?", docs)["answer"] == "It is 3,776 metres tall. [1]"
    assert extractive_answer("How tall is Tokyo Tower?", docs)["answer"] == "It is 333 metres tall. [2]"


def test_title_alone_never_makes_a_sentence_an_answer():
    # every sentence needs a content term of its own: a title that matches the whole question is not an answer
    docs = [_doc(1, "It last erupted in 1707. Climbers start at the fifth station.", title="Mount Fuji height")]
    assert extractive_answer("Mount Fuji height?", docs)["answer"] == "I don't know"
    assert extractive_answer("Which station do Mount Fuji climbers start at?", docs)["answer"] == (
        "Climbers start at the fifth station. [1]")


def test_lexical_grader_ignores_question_words_and_particles():
    g = LexicalGrader()
    unrelated = Document(page_content="What is it? Where is it? それはどこですか。")
    assert g.relevance("What is the weather in Tokyo?", unrelated) == "no"
    assert g.relevance("東京の天気はどうですか", Document(page_content="それはどうですか。")) == "no"
    assert g.relevance("What is the weather in Tokyo?", Document(page_content="Tokyo weather is sunny today.")) == "yes"
    assert g.overlap("What is it?", unrelated) == 0.0


def test_demo_corpus_english_question_is_answered_from_the_right_chunk(tmp_path: Path, capsys):
    from langchain_ragspine import ingest
    from langchain_ragspine.cli import demo_corpus_dir, main

    ingest(demo_corpus_dir(), tmp_path / "S", embedding="none", mode="bm25", progress=False)
    question = "Which BM25 engine does the package use?"
    assert main(["ask", question, "--store", str(tmp_path / "S"), "--llm", "none", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["refused"] is False  # before: "I don't know" although the right chunk was kept
    assert "The engine is bm25s." in record["answer"]
    cited = {c["chunk_id"] for c in record["citations"]}
    assert any(cid.startswith("en/bm25#") for cid in cited)
    for c in record["citations"]:
        assert record["documents"][c["n"] - 1]["chunk_id"] == c["chunk_id"]


def test_ask_reports_attributed_citations_and_unsupported_sentences(tmp_path: Path, capsys, monkeypatch):
    import langchain_ragspine.chat_models as chat_models
    from langchain_ragspine import ingest
    from langchain_ragspine.cli import main

    root = tmp_path / "corpus"
    root.mkdir()
    (root / "tsuyu.md").write_text("# 梅雨\n\n日本で梅雨がないのは北海道と小笠原諸島である。梅雨前線は停滞する。", "utf-8")
    ingest(root, tmp_path / "S", embedding="none", mode="bm25", progress=False)

    class Routing(SpyChatModel):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[no-untyped-def]
            text = "\n".join(str(m.content) for m in messages)
            self.reply = "北海道と小笠原諸島です。Bananas grow in Ecuador." if "numbered context" in text else "yes"
            return super()._generate(messages, stop, run_manager, **kwargs)

    monkeypatch.setattr(chat_models, "make_chat_model", lambda spec=None, **kw: Routing())
    argv = ["ask", "日本で梅雨がないのは北海道とどこか。", "--store", str(tmp_path / "S"), "--llm", "fake:m"]
    assert main([*argv, "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["answer"] == "北海道と小笠原諸島です。[1]Bananas grow in Ecuador."
    assert [(c["doc_id"], c["attributed"]) for c in record["citations"]] == [("tsuyu", True)]
    assert record["unsupported_sentences"] == ["Bananas grow in Ecuador."] and record["warning"] is None
    assert main(argv) == 0
    assert "no passage supports: Bananas grow in Ecuador." in capsys.readouterr().err
