"""Answer evaluation (langchain_ragspine.evaluation.answers): every metric on hand-computed cases, the runner over
real graphs and fake / spy models, the RAGAS export, the judge's parsing and what the judge may see."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableLambda

from langchain_ragspine.chains.answer import sentence_supports
from langchain_ragspine.evaluation import (
    ANSWER_METRICS,
    RAGAS_COLUMNS,
    AnswerJudge,
    QADataset,
    QAQuestion,
    answer_tokens,
    answers_markdown,
    citation_scores,
    compare_paired,
    contains_answer,
    evaluate,
    evaluate_answers,
    exact_match,
    lexical_faithfulness,
    normalize_answer,
    parse_relevance_verdict,
    parse_support_verdicts,
    ragas_rows,
    reads_as_refusal,
    token_f1,
    write_ragas,
)
from langchain_ragspine.graphs import build_corrective_rag, build_simple_rag
from langchain_ragspine.retrievers import BM25Retriever
from tests.unit_tests.spy_models import SpyChatModel

MARKER = "SECRET-RUNBOOK-9q"


# ---------------------------------------------------------------------------------------------- tokens, EM, F1
@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("The Tokyo Tower は 333 メートル。[1]", ["tokyo", "tower", "は", "333", "メ", "ー", "ト", "ル"]),
        ("「東京」です。", ["東", "京", "で", "す"]),
        ("ＡＢＣ１２３", ["abc123"]),  # NFKC folds full width, case folded
        ("北京【2】大学", ["北", "京", "大", "学"]),  # a citation marker is not a token
        ("An apple, a pear and THE plum!", ["apple", "pear", "and", "plum"]),  # articles and punctuation dropped
        ("서울 특별시", ["서울", "특별시"]),  # Hangul is written with spaces: words
        ("<think>ignore me</think>答え", ["答", "え"]),
        (None, []),
    ],
)
def test_answer_tokens_hand_cases(text: Any, tokens: list[str]):
    assert answer_tokens(text) == tokens


def test_exact_match_normalises_like_squad_with_cjk_characters():
    assert exact_match("The Eiffel Tower.", ["eiffel tower"]) == 1.0
    assert exact_match("「東京」", ["東京"]) == 1.0
    assert exact_match("ＴＯＫＹＯ", "tokyo") == 1.0
    assert exact_match("東京都", ["東京"]) == 0.0
    assert exact_match("anything", ["。"]) == 0.0  # a gold that normalises to nothing never matches
    assert normalize_answer("「東京」です。") == "東 京 で す"


def test_token_f1_hand_computed():
    # 東京タワー: 5 tokens, gold 東京: 2 shared → P = 2/5, R = 1 → F1 = 2 * 0.4 / 1.4
    assert token_f1("東京タワー", ["東京"]) == pytest.approx(2 * 0.4 / 1.4)
    # [cat, sat] vs [cat, sat, down]: P = 1, R = 2/3 → 0.8; the best gold wins
    assert token_f1("the cat sat", ["a cat sat down", "dog"]) == pytest.approx(0.8)
    # multiplicity counts: [北, 京, 北, 京] vs [北, 京] → P = 2/4, R = 1
    assert token_f1("北京北京", ["北京"]) == pytest.approx(2 * 0.5 / 1.5)
    assert token_f1("", ["東京"]) == 0.0 and token_f1("東京", ["大阪"]) == 0.0


def test_contains_answer_folds_width_and_case_and_ignores_markers():
    assert contains_answer("答えは東京です。[1]", ["東京"]) == 1.0
    assert contains_answer("It is the ＥＩＦＦＥＬ tower [2]", ["Eiffel"]) == 1.0
    assert contains_answer("大阪です", ["東京", ""]) == 0.0  # an empty gold is ignored, not contained everywhere
    assert contains_answer(None, ["東京"]) == 0.0  # type: ignore[arg-type]
    # trial of issue 29: spaces next to CJK are optional in CJK text (EM / F1 already ignored them)
    assert contains_answer("既定は480文字です。", ["480 文字"]) == 1.0
    assert contains_answer("サイドカー JSON を読みます", ["サイドカーJSON"]) == 1.0
    assert contains_answer("the EiffelTower", ["Eiffel Tower"]) == 0.0  # between Latin words a space counts
    # re-check trial: a line wrap or a double space is one space; CJK punctuation takes optional spaces too
    assert contains_answer("Tokyo\nTower", ["Tokyo Tower"]) == contains_answer("Tokyo  Tower", ["Tokyo Tower"]) == 1.0
    assert contains_answer("480 〜 500", ["480〜500"]) == contains_answer("〜 480 文字", ["〜480文字"]) == 1.0


# ---------------------------------------------------------------------------------------------- citations
Q = QAQuestion(id="q1", question="梅雨がないのは北海道とどこか", answers=["小笠原諸島"], doc_id="a")
GOLD = Document(page_content="梅雨は北海道と小笠原諸島を除く日本で見られる。", metadata={"doc_id": "a", "chunk_id": "a#0"})
SAME_DOC_NO_ANSWER = Document(page_content="梅雨前線は停滞する。", metadata={"doc_id": "a", "chunk_id": "a#1"})
OTHER = Document(page_content="小笠原諸島は東京都に属する。", metadata={"doc_id": "b", "chunk_id": "b#0"})


def test_citation_precision_and_recall_hand_computed():
    docs = [GOLD, SAME_DOC_NO_ANSWER, OTHER]
    # cited 1 (gold), 3 (answer text but another article): precision 1/2, recall 1
    assert citation_scores([{"n": 1}, {"n": 3}], docs, Q, refused=False) == (0.5, 1.0)
    # only non-gold passages cited: precision 0, recall 0; a number outside the passages is ignored
    assert citation_scores([{"n": 2}, {"n": 9}], docs, Q, refused=False) == (0.0, 0.0)
    assert citation_scores([], docs, Q, refused=False) == (None, 0.0)
    assert citation_scores([], [], Q, refused=True) == (None, None)


def test_lexical_faithfulness_counts_supported_sentences():
    docs = [GOLD, OTHER]
    verbatim = "梅雨は北海道と小笠原諸島を除く日本で見られる。"
    assert lexical_faithfulness(verbatim + "[1]", docs, [1]) == 1.0
    invented = verbatim + "[1]\n富士山の山頂ではペンギンが暮らしている。"
    assert lexical_faithfulness(invented, docs, [1]) == pytest.approx(0.5)
    assert lexical_faithfulness(verbatim, docs, []) == 0.0  # nothing cited: nothing supports it
    assert lexical_faithfulness(verbatim, docs, [2]) == 0.0  # the cited passage is not the one that holds it
    assert lexical_faithfulness("What is it?", docs, [1]) is None  # no content term: not measured
    with pytest.raises(ValueError, match="min_support"):
        lexical_faithfulness(verbatim, docs, [1], min_support=1.5)


def test_a_restricted_passage_never_supports_a_sentence():
    secret = Document(page_content=f"鍵の交換手順 {MARKER}", metadata={"doc_id": "r", "sensitivity": "RESTRICTED"})
    items = sentence_supports(f"鍵の交換手順 {MARKER}。", [secret])
    assert items and items[0].support == []  # gated before numbering: no passage is left
    assert lexical_faithfulness(f"鍵の交換手順 {MARKER}。", [secret], [1]) == 0.0


# ---------------------------------------------------------------------------------------------- judge parsing
@pytest.mark.parametrize(
    ("reply", "n", "verdicts"),
    [
        ("1: yes\n2: no", 2, [True, False]),
        ("1. Yes\n2) NO\n", 2, [True, False]),
        ("<think>1: no</think>\n[1] - supported\n2: not supported", 2, [True, False]),
        ("Here you go:\n1: yes\n**2**: yes", 2, [True, True]),  # a preamble is ignored; bold numbers are read
        ("1: yes - the passage states it\n2: no", 2, [True, False]),  # an explanation that agrees
        # trial of issue 29: each of these was read as a pass
        ("1: yes or no", 1, None),
        ("1: Yes - though not supported", 1, None),
        ("1: maybe\n1: yes", 1, None),  # a numbered line without a verdict
        ("1: yes\n2: no\nActually 1: no", 2, None),  # a numbered verdict inside another line
        ("yes\n1: no", 1, None),  # bare and numbered verdicts mixed
        # re-check trial of issue 29: a verdict taken back on another line
        ("1: yes\n2: no\nCorrection - 1. no", 2, None),
        ("1: YES\nI changed my mind: 1 is no", 1, None),
        ("1: yes\nOn reflection 1 is not supported", 1, None),
        ("1: Yes\n1. Yes\nActually no", 1, None),
        ("1: yes", 2, None),  # a statement without a verdict
        ("1: yes\n1: no\n2: yes", 2, None),  # conflicting verdicts
        ("1: yes\n2: yes\n3: yes", 2, None),  # a number that names no statement
        ("All statements are supported.", 2, None),
        ("", 1, None),
        (None, 1, None),
        ("yes", 1, [True]),  # a bare verdict for the one statement (the local 1.5B model's usual reply)
        ("No.", 1, [False]),
        ("yes\nno", 2, [True, False]),  # bare verdicts, one a line, as many as the statements: in order
        ("yes", 2, None),  # fewer bare verdicts than statements: unknown
        ("1", 1, None),  # a number alone is no verdict
        ("yes, it is supported", 1, None),
    ],
)
def test_parse_support_verdicts(reply: Any, n: int, verdicts: list[bool] | None):
    assert parse_support_verdicts(reply, n) == verdicts


@pytest.mark.parametrize(
    ("reply", "score"),
    [
        ("Yes.", 1.0), ("**yes**", 1.0), ("Answer: partly", 0.5), ("Partially", 0.5), ("no", 0.0),
        ("<think>maybe yes</think>No", 0.0), ("yes or no", None), ("maybe", None), ("", None), (None, None),
        ("はい", None), ("Yes, it answers the question.", 1.0),
        # trial of issue 29: each of these was read as a pass
        ("yes\nno", None), ("Yes. Actually, no.", None), ("yes and no", None),
        # re-check trial of issue 29: hedged or negated after the verdict
        ("Yes; nope", None), ("Yes!!! Nah", None), ("yes — not at all", None), ("Yes, it does not fully answer", None),
        # audit of issue 29: a "no" explained by a negation was unknown, so judged relevance leaned high
        ("No, it does not answer the question.", 0.0), ("No. The answer doesn't address it.", 0.0),
        ("No, but it is related.", None), ("No; however, it names the city.", None),
    ],
)
def test_parse_relevance_verdict(reply: Any, score: float | None):
    assert parse_relevance_verdict(reply) == score


# ---------------------------------------------------------------------------------------------- the runner
DOCS = [
    Document(page_content="梅雨は北海道と小笠原諸島を除く日本で見られる。", metadata={"doc_id": "a", "title": "梅雨"}),
    Document(page_content="京都の名所は清水寺である。", metadata={"doc_id": "b", "title": "京都"}),
    Document(page_content="大阪の人口は約二百七十万人である。", metadata={"doc_id": "c", "title": "大阪"}),
    Document(page_content=f"京都の名所の合鍵は金庫にある。{MARKER}",
             metadata={"doc_id": "s", "title": "秘密", "sensitivity": "RESTRICTED"}),
]
QUESTIONS = [
    QAQuestion(id="q1", question="梅雨がないのは北海道とどこか", answers=["小笠原諸島"], doc_id="a"),
    QAQuestion(id="q2", question="京都の名所は何か", answers=["清水寺"], doc_id="b"),
    QAQuestion(id="q3", question="大阪の人口は", answers=["存在しない答え"], doc_id="c"),
]
DATASET = QADataset(name="tiny", docs=DOCS, questions=QUESTIONS)


def _retriever() -> BM25Retriever:
    chunks = [Document(page_content=d.page_content, metadata={**d.metadata, "chunk_id": f"{d.metadata['doc_id']}#0"})
              for d in DOCS]
    return BM25Retriever.from_documents(chunks, k=3)


def test_evaluate_answers_over_the_extractive_simple_graph():
    result = evaluate_answers(build_simple_rag(_retriever(), llm=None), DATASET, name="simple")
    by_id = {r["id"]: r for r in result.per_query}
    assert by_id["q1"]["answer_contains"] == 1.0 and by_id["q2"]["answer_contains"] == 1.0
    assert by_id["q3"]["answer_contains"] == 0.0  # its gold answer is in no document
    for qid in ("q1", "q2"):
        assert by_id[qid]["gold_retrieved"] == 1.0 and by_id[qid]["citation_recall"] == 1.0
        assert by_id[qid]["faithfulness"] == 1.0  # extractive sentences are verbatim from the cited passage
        assert by_id[qid]["llm_calls"] == 0 and by_id[qid]["refused"] == 0.0
    assert by_id["q3"]["gold_retrieved"] == 0.0
    assert result.aggregate["answer_contains"] == pytest.approx(2 / 3)
    assert result.aggregate["refusal_rate"] == 0.0 and result.aggregate["false_refusal_rate"] == 0.0
    assert "judge_faithfulness" not in result.aggregate  # no judge: no judged measures
    assert result.config["kind"] == "answers" and result.config["n_questions"] == 3
    assert result.latency_ms["p50"] > 0
    assert all(MARKER not in json.dumps(r, ensure_ascii=False) for r in result.per_query)  # the gate held
    assert evaluate_answers(build_simple_rag(_retriever(), llm=None), DATASET, limit=1).config["n_questions"] == 1


def test_false_refusal_is_a_refusal_after_the_gold_passage_was_retrieved():
    retriever = _retriever()

    def refuse_after_searching(inputs: dict[str, Any]) -> dict[str, Any]:
        retriever.invoke(inputs["question"])  # the gold passage comes back ...
        return {"answer": "わかりません", "citations": [], "documents": [], "refused": True}  # ... and it refuses

    result = evaluate_answers(RunnableLambda(refuse_after_searching), DATASET)
    by_id = {r["id"]: r for r in result.per_query}
    assert by_id["q1"]["refused"] == 1.0 and by_id["q1"]["false_refusal"] == 1.0
    assert by_id["q3"]["refused"] == 1.0 and by_id["q3"]["false_refusal"] == 0.0  # nothing could answer it
    assert by_id["q1"]["citation_recall"] is None and by_id["q1"]["faithfulness"] is None
    assert result.aggregate["refusal_rate"] == 1.0
    assert result.aggregate["false_refusal_rate"] == pytest.approx(2 / 3)
    assert result.aggregate["answer_contains"] == 0.0


def test_an_i_dont_know_answer_counts_as_a_refusal_even_unflagged():
    graph = RunnableLambda(lambda _: {"answer": "I don't know.", "citations": [], "documents": []})
    result = evaluate_answers(graph, DATASET, limit=1)
    assert result.per_query[0]["refused"] == 1.0


@pytest.mark.parametrize(
    ("answer", "refusal"),
    [
        # audit of issue 29: a real model's own wording was not counted as a refusal
        ("根据提供的资料，无法回答该问题。", True), ("資料からは分かりません。", True),
        ("提供された文書には記載がありません。", True), ("I cannot answer from the context.", True),
        ("The context does not mention the year [1].", True), ("文档中没有提到这个人。", True),
        ("There is no information about it in the passages.", True), ("<think>hmm</think>我不知道。", True),
        # answers first, or a statement about the world: not refusals
        ("Tokyo [1]. The documents do not say more.", False), ("生年は不明です。", False),
        ("具体原因尚不清楚。", False), ("小笠原諸島には梅雨がない [1]。", False), ("清水寺です。", False),
        ("", False), (None, False),
        # re-audit of issue 29: missed, and read into titles or a statement about the world
        ("該当する情報は資料に見当たりません。", True), ("抱歉，我无法根据提供的信息回答。", True),
        ("The context doesn't say.", True), ("Sorry, the answer is not in the passages.", True),
        ("《我不知道》的作者是张三。", False), ("「わからない」は2001年の曲です。", False),
        ("No information was lost during the migration.", False), ('"I don\'t know" is a song by X.', False),
    ],
)
def test_reads_as_refusal(answer: Any, refusal: bool):
    assert reads_as_refusal(answer) is refusal


def test_a_model_refusal_in_its_own_words_is_a_refusal_and_a_false_one_when_the_gold_was_retrieved():
    llm = GenericFakeChatModel(messages=iter([AIMessage(content="資料からは分かりません。")] * 10))
    result = evaluate_answers(build_simple_rag(_retriever(), llm=llm), DATASET, limit=2)
    for r in result.per_query:
        assert r["llm_calls"] > 0 and r["refused"] == 1.0 and r["false_refusal"] == 1.0  # gold passage retrieved
        assert r["answer_contains"] == 0.0 and r["faithfulness"] is None


def test_the_offline_path_never_reads_refusal_wording_into_a_verbatim_sentence():
    # an extractive answer is a sentence of the corpus: "…わからない…" in it is content, not a refusal
    docs = [Document(page_content="火山の正確な数はわからないとされる。", metadata={"doc_id": "v", "chunk_id": "v#0"})]
    ds = QADataset(name="v", docs=docs, questions=[
        QAQuestion(id="v1", question="火山の正確な数は", answers=["わからない"], doc_id="v")])
    graph = build_simple_rag(BM25Retriever.from_documents(docs, k=1), llm=None)
    record = evaluate_answers(graph, ds).per_query[0]
    assert record["llm_calls"] == 0 and record["refused"] == 0.0 and record["answer_contains"] == 1.0


def test_llm_calls_are_counted_and_the_judge_sees_only_what_the_prompt_saw():
    llm = GenericFakeChatModel(messages=iter([AIMessage(content="清水寺です。[1]")] * 10))
    judge = SpyChatModel(reply="1: yes")
    graph = build_simple_rag(_retriever(), llm=llm)
    result = evaluate_answers(graph, DATASET, limit=2, judge=judge)
    # the simple graph's two calls (one batch of passage grades, one answer); the judge's are counted apart
    assert [r["llm_calls"] for r in result.per_query] == [2, 2]
    assert [r["judge_calls"] for r in result.per_query] == [2, 2]  # faithfulness and relevance
    assert len(judge.prompts) == 4
    assert all(MARKER not in p and "合鍵" not in p for p in judge.prompts)  # RESTRICTED never reaches the judge
    q2 = result.per_query[1]
    assert q2["judge_faithfulness"] == 1.0
    assert q2["judge_relevance"] is None  # "1: yes" is no relevance verdict: unknown, not a pass
    assert q2["judge_unknown"] == 1
    assert result.aggregate["judge_unknown_rate"] == pytest.approx(2 / 4)
    assert "judge_relevance" in result.config["metrics"]


def test_judged_faithfulness_is_the_share_of_supported_statements():
    # audit of issue 29: judged faithfulness was only ever tested at 1.0
    two = "清水寺です。[1] 金閣寺もあります。[1]"
    llm = GenericFakeChatModel(messages=iter([AIMessage(content=two)] * 10))
    replies = iter(["1: yes\n2: no", "partly"])

    class Judge(SpyChatModel):
        def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[no-untyped-def]
            self.reply = next(replies)
            return super()._generate(messages, stop, run_manager, **kwargs)

    judge = Judge()
    record = evaluate_answers(build_simple_rag(_retriever(), llm=llm), DATASET, judge=judge, questions=[
        QUESTIONS[1]]).per_query[0]
    assert "1. 清水寺です。" in judge.prompts[0] and "2. 金閣寺もあります。" in judge.prompts[0]
    assert record["judge_faithfulness"] == pytest.approx(0.5)  # one of the two statements supported
    assert record["judge_relevance"] == pytest.approx(0.5) and record["judge_unknown"] == 0


def test_an_unparseable_or_failing_judge_is_unknown_never_a_pass():
    graph = build_simple_rag(_retriever(), llm=None)
    garbled = evaluate_answers(graph, DATASET, judge=SpyChatModel(reply="Looks fine to me!"))
    assert all(r["judge_faithfulness"] is None and r["judge_relevance"] is None for r in garbled.per_query)
    assert all(r["judge_unknown"] == 2 for r in garbled.per_query)
    assert garbled.aggregate["judge_unknown_rate"] == 1.0
    broken = AnswerJudge(SpyChatModel(error="judge down"))
    failed = evaluate_answers(graph, DATASET, limit=1, judge=broken)
    assert failed.per_query[0]["judge_faithfulness"] is None and broken.errors == 2
    with pytest.raises(TypeError, match="chat model"):
        AnswerJudge("qwen")  # type: ignore[arg-type]


def test_refusals_are_not_judged():
    judge = SpyChatModel(reply="yes")
    graph = build_corrective_rag(_retriever(), llm=None)
    result = evaluate_answers(graph, DATASET, judge=judge, questions=[
        QAQuestion(id="x", question="火星の首都はどこですか", answers=["なし"], doc_id="a"),
    ])
    assert result.per_query[0]["refused"] == 1.0
    assert judge.prompts == [] and result.per_query[0]["judge_calls"] == 0


def test_bad_arguments_name_what_is_wrong():
    graph = build_simple_rag(_retriever(), llm=None)
    with pytest.raises(TypeError, match="Runnable"):
        evaluate_answers(object(), DATASET)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="QADataset"):
        evaluate_answers(graph, object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="min_support"):
        evaluate_answers(graph, DATASET, min_support=-0.1)
    with pytest.raises(TypeError, match="mapping"):
        evaluate_answers(RunnableLambda(lambda _: "just text"), DATASET)


# ---------------------------------------------------------------------------------------------- export, pairs
#: RAGAS's own column names (ragas.dataset_schema.SingleTurnSample, 0.2+; the 0.1 datasets.Dataset columns).
RAGAS_V02 = ("user_input", "retrieved_contexts", "response", "reference")
RAGAS_V01 = ("question", "contexts", "answer", "ground_truth")


def test_ragas_export_uses_ragas_column_names(tmp_path: Path):
    assert RAGAS_COLUMNS == {"ragas": RAGAS_V02, "ragas-legacy": RAGAS_V01}
    result = evaluate_answers(build_simple_rag(_retriever(), llm=None), DATASET, limit=2)
    rows = ragas_rows(result)
    assert [tuple(r) for r in rows] == [RAGAS_V02] * 2
    assert rows[1]["user_input"] == "京都の名所は何か" and rows[1]["reference"] == "清水寺"
    assert rows[1]["response"] == result.per_query[1]["answer"]
    assert any("清水寺" in c for c in rows[1]["retrieved_contexts"])
    legacy = ragas_rows(result, layout="ragas-legacy")
    assert [tuple(r) for r in legacy] == [RAGAS_V01] * 2
    lines = write_ragas(result, tmp_path / "run.jsonl").read_text("utf-8").splitlines()
    assert [json.loads(line) for line in lines] == rows
    assert json.loads(write_ragas(result, tmp_path / "run.json", layout="ragas-legacy").read_text("utf-8")) == legacy
    with pytest.raises(ValueError, match="layout"):
        ragas_rows(result, layout="trulens")  # type: ignore[arg-type]
    retrieval = evaluate(_retriever(), DATASET, ks=(1,))
    with pytest.raises(ValueError, match="retrieval result"):
        ragas_rows(retrieval)


def test_paired_comparison_of_answer_results_and_every_pair_in_the_table():
    simple = evaluate_answers(build_simple_rag(_retriever(), llm=None), DATASET, name="simple")

    def refuse(_: Any) -> dict[str, Any]:
        return {"answer": "わかりません", "citations": [], "documents": [], "refused": True}

    never = evaluate_answers(RunnableLambda(refuse), DATASET, name="never")
    again = evaluate_answers(build_simple_rag(_retriever(), llm=None), DATASET, name="again")
    found = {c.metric: c for c in compare_paired(simple, never)}  # default metrics: the answer measures
    assert set(found) <= set(ANSWER_METRICS) and "answer_contains" in found
    assert found["answer_contains"].difference == pytest.approx(-2 / 3)
    assert found["refused"].difference == pytest.approx(1.0)
    assert "citation_recall" not in found  # never answered: nothing to pair
    table = answers_markdown([simple, never, again], n_resamples=100)
    assert table.count("Paired difference to **") == 2  # simple vs (never, again); never vs again
    assert "| never − simple | again − simple |" in table and "| again − never |" in table
    # audit of issue 29: the cost side is paired too (exact match, model calls, latency)
    for metric in ("| exact_match |", "| llm_calls |", "| latency_ms |"):
        assert metric in table
    with pytest.raises(ValueError, match="retrieval result"):
        answers_markdown([evaluate(_retriever(), DATASET, ks=(1,))])


def test_a_chain_that_returns_a_restricted_passage_is_refused_before_anything_is_written():
    # its answer may quote the passage: nothing of the run reaches a judge, a result or an export (re-check trial of
    # issue 29: gating the passages alone let a quoting answer through and shifted the citation numbers)
    from langchain_ragspine.errors import RagSpineError

    secret = DOCS[3]

    def leaky(inputs: dict[str, Any]) -> dict[str, Any]:  # a chain that forgot the gate
        return {"answer": f"清水寺です。{MARKER}[2]", "citations": [{"n": 2}], "documents": [secret, DOCS[1]]}

    judge = SpyChatModel(reply="1: yes")
    with pytest.raises(RagSpineError, match="RESTRICTED passage .*question 'q2'"):
        evaluate_answers(RunnableLambda(leaky), DATASET, judge=judge, questions=[QUESTIONS[1]])
    assert judge.prompts == []


def test_plot_answer_metrics_draws_the_measures_results_have(tmp_path: Path):
    from langchain_ragspine.evaluation import plot_answer_metrics

    simple = evaluate_answers(build_simple_rag(_retriever(), llm=None), DATASET, name="simple")
    png = plot_answer_metrics([simple], tmp_path / "a.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    with pytest.raises(ValueError, match="no result has any of"):
        plot_answer_metrics([simple], tmp_path / "b.png", metrics=["judge_relevance"])


def test_a_graph_error_names_the_question():
    def boom(inputs: dict[str, Any]) -> dict[str, Any]:
        raise ConnectionError("model down")

    with pytest.raises(ConnectionError, match="model down") as info:
        evaluate_answers(RunnableLambda(boom), DATASET)
    assert "question 'q1'" in "".join(info.value.__notes__)


def test_a_chain_without_documents_is_scored_on_its_last_outermost_retrieval():
    # trial of issue 29: a retriever wrapping another reported every passage twice, and the passages of all calls
    # were numbered together; the chain's citations number its last call's passages only
    from operator import itemgetter

    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.retrievers import BaseRetriever

    from langchain_ragspine.chains import make_answer_chain

    class Wrapper(BaseRetriever):  # an outer retriever calling an inner one, as a live store does
        inner: BaseRetriever

        def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
            return self.inner.invoke(query, config={"callbacks": run_manager.get_child()})

    wrapped = Wrapper(inner=_retriever())
    chain = {"documents": itemgetter("question") | wrapped, "question": itemgetter("question")} | make_answer_chain(None)
    record = evaluate_answers(chain, DATASET, questions=[QUESTIONS[1]]).per_query[0]
    assert len(record["contexts"]) == len(set(record["contexts"])) == 3  # once each, not twice
    assert record["citation_precision"] == 1.0 and record["gold_retrieved"] == 1.0

    def two_searches(inputs: dict[str, Any]) -> dict[str, Any]:
        wrapped.invoke("大阪の人口は")  # a first search, then the one the answer is made from
        docs = wrapped.invoke(inputs["question"])
        return make_answer_chain(None).invoke({"question": inputs["question"], "documents": docs})

    record = evaluate_answers(RunnableLambda(two_searches), DATASET, questions=[QUESTIONS[1]]).per_query[0]
    assert len(record["contexts"]) == 3 and any("清水寺" in c for c in record["contexts"][:1])
    assert record["citation_precision"] == 1.0  # [1] is the last search's first passage


def test_retriever_calls_nested_at_any_depth_are_recorded_once():
    # re-check trial of issue 29: a retriever running a chain of retrievers had its inner calls recorded too
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnableParallel

    inner = _retriever()

    class Outer(BaseRetriever):
        def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
            both = RunnableParallel(a=RunnableLambda(lambda q: q) | inner, b=inner).invoke(
                query, config={"callbacks": run_manager.get_child()})
            return both["a"][:1]

    outer = Outer()

    def chain(inputs: dict[str, Any]) -> dict[str, Any]:
        outer.invoke(inputs["question"])
        return {"answer": "清水寺 [1]", "citations": [{"n": 1}]}

    record = evaluate_answers(RunnableLambda(chain), DATASET, questions=[QUESTIONS[1]]).per_query[0]
    assert len(record["contexts"]) == 1  # the outer call's one passage, not the inner calls' six
    assert record["citation_precision"] == 1.0
