"""parse_query_variants: the one parser of LLM-written queries (numbering, bullets, blank lines, quotes, <think>)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage

from langchain_ragspine.retrievers.query_variants import (
    fold_query,
    is_blank,
    parse_query_variants,
    strip_think,
)

Q = "梅雨はいつ？"


@pytest.mark.parametrize(
    "reply, expected",
    [
        ("1. 梅雨の時期\n2. 梅雨 始まり\n3. 雨季 日本", ["梅雨の時期", "梅雨 始まり", "雨季 日本"]),
        ("1) a\n(2) b\n[3] c\n４．d\n① e\n（６）f", ["a", "b", "c", "d", "e", "f"]),
        ("- a\n* b\n• c\n・d\n+ e", ["a", "b", "c", "d", "e"]),
        ("a\n\n   \n\t\nb\n", ["a", "b"]),  # blank and whitespace-only lines
        ('"a"\n\'b\'\n「c」\n“d”\n『e』\n**f**', ["a", "b", "c", "d", "e", "f"]),
        ("<think>I should write\n1. not this</think>\n1. a\n2. b", ["a", "b"]),
        ("<THINK>x</THINK>a</think>\nb", ["a", "b"]),
        ("<think>never closed\n1. a", []),
        ("Here are three alternative queries:\n1. a\n2. b", ["a", "b"]),
        ("Query 1: a\nQuestion 2: b\n質問3：c\n问题４：d\nSub-question: e\n**Query 6:** f", ["a", "b", "c", "d", "e", "f"]),
        ('```\n["a", "b"]\n```', ["a", "b"]),
        ('{"queries": ["a", "b"]}', ["a", "b"]),
        ('```json\n{"sub_questions": ["a"]}\n```', ["a"]),
        ("a\nA\n a \na?", ["a"]),  # duplicates after folding (case, spaces, trailing ?)
        ("梅雨はいつ?\n梅雨はいつ\nb", ["b"]),  # restatements of the original are dropped
        ("2023年の売上\n100 things to do\n3.14 is pi", ["2023年の売上", "100 things to do", "3.14 is pi"]),
        ("x" * 301 + "\nshort", ["short"]),  # a paragraph is not a query
    ],
)
def test_parser_cases(reply, expected):
    assert parse_query_variants(reply, Q, 10) == [Q, *expected]


@pytest.mark.parametrize(
    "reply, expected",
    [  # new-user trial of issue 14: each of these lines was taken as a query (and used up an n_queries slot)
        ("Sure! Here are three alternative queries.\n1. a rainy season\n2. tsuyu\nI hope these help!",
         ["a rainy season", "tsuyu"]),
        ("## Queries\n1. 梅雨の時期", ["梅雨の時期"]),
        ("1 - 梅雨の時期\n2 - 梅雨入り", ["梅雨の時期", "梅雨入り"]),
        ("Q1: 梅雨の時期\nQ2: 梅雨入り", ["梅雨の時期", "梅雨入り"]),
        ("Question 1 - 梅雨の時期", ["梅雨の時期"]),
        ("> 梅雨の時期\n> 梅雨入り", ["梅雨の時期", "梅雨入り"]),
        ('{"queries": [1, 2, true, null, {"q": "x"}, "梅雨入り"]}', ["梅雨入り"]),
        ('{"queries": [1, 2]}', []),
        ('{"foo": ["梅雨の時期"]}', ["梅雨の時期"]),  # one list under an unknown key: its strings
        ('{"foo": ["a"], "bar": ["b"]}', []),  # which one? neither, and never the raw JSON
        ('Here you go:\n{"foo": [1]}\n1. 梅雨の時期', ["梅雨の時期"]),
        ("梅雨の時期\u200b\n\u200b\n\ufeff\n梅雨入り", ["梅雨の時期", "梅雨入り"]),
        ("\u200b\n\u200b\u200b\n\ufeff", []),
        # chatter without a list, in three languages
        ("Sure! Here are some queries.\nrainy season Japan\ntsuyu start\nLet me know if you need more.",
         ["rainy season Japan", "tsuyu start"]),
        ("はい、承知しました。\n梅雨の時期\n梅雨入り\n以上です。", ["梅雨の時期", "梅雨入り"]),
        ("以下は検索クエリです：\n梅雨の時期\n梅雨入り", ["梅雨の時期", "梅雨入り"]),
        ("好的，以下是三个查询：\n梅雨季节\n入梅时间\n希望这些对你有帮助！", ["梅雨季节", "入梅时间"]),
        ("以下に3つの検索クエリを示します。\n1. 梅雨の時期\n2. 梅雨入り\nお役に立てば幸いです。", ["梅雨の時期", "梅雨入り"]),
        # a marker alone on its line makes the next line the item
        ("Here they are.\n1.\n梅雨の時期\n2.\n梅雨入り", ["梅雨の時期", "梅雨入り"]),
        # queries that only look like chatter stay
        ("Great Wall of China history\nOK Computer album\nSure Start programme", ["Great Wall of China history",
                                                                                  "OK Computer album",
                                                                                  "Sure Start programme"]),
        ("- Here is a query in a list\n- 以下は例", ["Here is a query in a list", "以下は例"]),
    ],
)
def test_chatter_headings_and_more_markers(reply, expected):
    assert parse_query_variants(reply, Q, 10) == [Q, *expected]


def test_chatter_does_not_use_up_the_n_slots():
    reply = "Sure! Here are three alternative queries.\n## Queries\n1. a\n2. b\n3. c\nI hope these help!"
    assert parse_query_variants(reply, Q, 3) == [Q, "a", "b", "c"]


def test_original_first_and_at_most_n_variants():
    reply = "\n".join(f"{i}. query {i}" for i in range(1, 9))
    assert parse_query_variants(reply, Q, 3) == [Q, "query 1", "query 2", "query 3"]
    assert parse_query_variants(reply, Q, 0) == [Q]
    assert parse_query_variants(reply, None, 2) == ["query 1", "query 2"]


def test_text_is_returned_as_written():
    """Markers are stripped; the query keeps its own width and punctuation (what the base retriever gets)."""
    assert parse_query_variants("１．東京の人口は？", Q, 3) == [Q, "東京の人口は？"]


def test_messages_and_content_blocks_are_read():
    assert parse_query_variants(AIMessage(content="1. a\n2. b"), Q, 5) == [Q, "a", "b"]
    blocks = AIMessage(content=[{"type": "text", "text": "a\n"}, "b"])
    assert parse_query_variants(blocks, Q, 5) == [Q, "a", "b"]


@pytest.mark.parametrize("reply", [None, 42, b"1. a", {"queries": ["a"]}, object(), "", "   \n \n"])
def test_unusable_replies_give_the_original_alone(reply):
    assert parse_query_variants(reply, Q, 3) == [Q]


def test_is_blank():
    assert is_blank("") and is_blank(" \t\u3000") and is_blank("\u200b") and is_blank("\ufeff\u200d\u00ad")
    assert not is_blank("a") and not is_blank("?") and not is_blank("\u200b梅雨")


def test_strip_think_and_fold_query():
    assert strip_think("a<think>b</think>c") == "ac"
    assert fold_query("What is  ＢＭ２５?") == fold_query("what is bm25")


@settings(max_examples=150, deadline=None)
@given(reply=st.text(max_size=400), original=st.text(min_size=1, max_size=30), n=st.integers(0, 6))
def test_property_original_first_bounded_distinct_nonempty(reply, original, n):
    out = parse_query_variants(reply, original, n)
    assert out[0] == original
    assert len(out) <= n + 1
    generated = out[1:]
    assert all(q.strip() and q == q.strip() for q in generated)
    folded = [fold_query(q) for q in out]
    assert len(set(folded)) == len(folded)


_WORDS = st.text(alphabet="abcxyz梅雨東京人口北京首都のはか ", min_size=1, max_size=20).filter(
    lambda s: s.strip() and not s.strip().lower().startswith(("query", "question", "version", "variant", "sub"))
)


@settings(max_examples=100, deadline=None)
@given(lines=st.lists(_WORDS, min_size=1, max_size=6), marker=st.sampled_from(["{i}. ", "{i}) ", "- ", "* ", "・",
                                                                             "({i}) ", "", '"{x}"']))
def test_property_list_markers_are_stripped_and_nothing_else(lines, marker):
    def mark(i: int, x: str) -> str:
        return f'"{x}"' if marker == '"{x}"' else marker.format(i=i) + x

    reply = "\n\n".join(mark(i, x) for i, x in enumerate(lines, 1))
    expected: list[str] = []
    for x in lines:
        if fold_query(x) and fold_query(x) not in {fold_query(e) for e in expected}:
            expected.append(x.strip())
    assert parse_query_variants(reply, None, 10) == expected


def test_one_line_opening_with_a_middle_dot_among_plain_lines_is_not_a_list():
    # regression (benchmarks/transforms.py scripted replies): "・" opened the second of three plain lines, so the
    # parser took it for a one-item list and dropped the lines before and after it as chatter
    q = "気象学では一般的にモンスーン・アジアに含める地域はどこか"
    reply = "気象学では一般的にモンスーン\n・アジアに含める地域はどこか\n気象学では一般的にモンスーン・アジアに含める地域はどこか 概要"
    assert parse_query_variants(reply, q, 3) == [
        q, "気象学では一般的にモンスーン", "アジアに含める地域はどこか", f"{q} 概要",
    ]
    # a real list keeps trimming its lead-in and closing remark
    assert parse_query_variants("Here they are.\n・梅雨の時期\n・梅雨の期間\nHave a nice day.", "梅雨", 3) == [
        "梅雨", "梅雨の時期", "梅雨の期間",
    ]
