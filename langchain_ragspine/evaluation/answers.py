"""Answer evaluation: score what a graph or chain *answers*, not only what it retrieves.

:func:`evaluate_answers` runs every question of a QA dataset through a LangChain ``Runnable`` that takes
``{"question": str}`` and returns a state with ``answer`` (a compiled graph of :mod:`langchain_ragspine.graphs`, or
any chain shaped like one) and scores each answer on the measures RAG evaluation uses:

* **correctness** against the gold answers: ``answer_contains`` (a gold answer occurs in the answer, NFKC and case
  folded, citation markers removed — the "gold in answer" of open-domain QA), ``exact_match`` and ``f1`` (the SQuAD
  measures, Rajpurkar et al., EMNLP 2016, max over the gold answers) over :func:`answer_tokens`: Latin, digit and
  Hangul runs are words, every Han / kana character is a token of its own — the character-level scoring of CMRC 2018
  (Cui et al., EMNLP 2019) and JSQuAD (Kurihara et al., LREC 2022) with SQuAD's normalisation (punctuation removed,
  English articles dropped).  CMRC's own script takes the longest common substring for F1; ours is the bag-of-tokens
  F1 of SQuAD, so F1 here can be a little higher than CMRC's on the same answers.
* **citations**: ``citation_precision`` — the share of cited passages that support the answer (the passage is from
  the question's document and contains a gold answer, NFKC: the rule of answer recall); ``citation_recall`` — 1 when
  such a passage is among the cited ones (None after a refusal).  Cf. ALCE's citation precision / recall (Gao et
  al., EMNLP 2023), which check entailment per sentence; these check the gold passage.
* **faithfulness** — the share of answer sentences the cited passages support.  Offline (always): the lexical
  support of :func:`~langchain_ragspine.chains.answer.sentence_supports` (IDF-weighted content-term overlap,
  character n-grams for CJK) reaching ``min_support`` (default 0.5) for at least one cited passage.  With a
  ``judge`` model, also ``judge_faithfulness``: the judge says, sentence by sentence, whether the passages support
  it (RAGAS's faithfulness, Es et al., EACL 2024 demos, with the answer's own sentences as statements).
* **answer relevance** — ``judge_relevance``, with a judge only: does the answer address the question (yes = 1,
  partly = 0.5, no = 0).  There is no offline proxy: lexical overlap with the question rewards echoing it, and
  RAGAS's embedding proxy needs a model to write questions back from the answer.
* **refusals**: ``refused`` (the graph refused, or the answer is an "I don't know"), ``gold_retrieved`` (a
  retriever call of the run returned a gold passage) and ``false_refusal`` (refused although it did).
* **cost**: ``llm_calls`` (chat-model and LLM calls the run made, counted by a callback; the judge's are
  ``judge_calls``) and ``latency_ms`` (wall time of ``invoke``).

A judge reply that cannot be parsed is *unknown*: the metric is ``None`` for that question (left out of the mean)
and ``judge_unknown`` counts it — it never counts as a pass.  The judge sees what the graph's prompt saw and nothing
more: the question, the answer and the passages of the final state (``documents``, after the RESTRICTED gate —
gated again here), numbered as the graph numbered them.

:func:`ragas_rows` / :func:`write_ragas` export a run in the columns RAGAS reads, so a team can run its own RAGAS or
LLM-judge suite on it without this package depending on RAGAS.  The result is an
:class:`~langchain_ragspine.evaluation.runner.EvalResult` (``config["kind"] == "answers"``), so
:func:`~langchain_ragspine.evaluation.significance.compare_paired` gives the paired differences with intervals, and
:func:`answers_markdown` the table of several configurations with every pair compared.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
import unicodedata
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel, BaseLanguageModel
from langchain_core.messages import HumanMessage, SystemMessage
from langchain_core.runnables import Runnable

from langchain_ragspine.arguments import check_int
from langchain_ragspine.chains.answer import (
    DEFAULT_MIN_SUPPORT,
    SentenceSupport,
    format_context,
    is_dont_know,
    prompt_text,
    sentence_supports,
    strip_citation_markers,
    strip_think,
)
from langchain_ragspine.document_compressors.restricted import drop_restricted
from langchain_ragspine.documents import doc_key
from langchain_ragspine.errors import RagSpineError
from langchain_ragspine.evaluation.datasets import QADataset, QAQuestion
from langchain_ragspine.evaluation.metrics import is_answer_passage, mean
from langchain_ragspine.evaluation.runner import (
    EvalResult,
    format_metric,
    latency_percentiles,
    paired_markdown,
)
from langchain_ragspine.evaluation.significance import DEFAULT_RESAMPLES, DEFAULT_SEED
from langchain_ragspine.progress import progress_bar
from langchain_ragspine.text.sentences import line_sentence_spans
from langchain_ragspine.tokenizers import Tokenizer

__all__ = [
    "ANSWER_METRICS",
    "RAGAS_COLUMNS",
    "AnswerJudge",
    "answer_tokens",
    "answers_markdown",
    "citation_scores",
    "contains_answer",
    "evaluate_answers",
    "exact_match",
    "lexical_faithfulness",
    "normalize_answer",
    "parse_relevance_verdict",
    "paired_answer_metrics",
    "parse_support_verdicts",
    "ragas_rows",
    "reads_as_refusal",
    "token_f1",
    "write_ragas",
]

#: The per-question metrics of :func:`evaluate_answers`, in table order (``judge_*`` only with a judge).  Each is
#: a value in [0, 1] or ``None`` (not defined for that question: see the module docstring).
ANSWER_METRICS = (
    "answer_contains",
    "exact_match",
    "f1",
    "citation_precision",
    "citation_recall",
    "faithfulness",
    "judge_faithfulness",
    "judge_relevance",
    "refused",
    "false_refusal",
    "gold_retrieved",
)

#: The columns of :func:`ragas_rows` by layout: ``"ragas"`` is RAGAS 0.2+'s ``SingleTurnSample`` /
#: ``EvaluationDataset.from_list``; ``"ragas-legacy"`` the ``datasets.Dataset`` columns of RAGAS 0.1.
RAGAS_COLUMNS: dict[str, tuple[str, str, str, str]] = {
    "ragas": ("user_input", "retrieved_contexts", "response", "reference"),
    "ragas-legacy": ("question", "contexts", "answer", "ground_truth"),
}

RagasLayout = Literal["ragas", "ragas-legacy"]


# ---------------------------------------------------------------------------------------------- correctness
_ARTICLES = frozenset({"a", "an", "the"})


def _is_cjk_char(ch: str) -> bool:
    """A Han ideograph or a kana: a token of its own (Hangul, like Latin, is written with spaces)."""
    o = ord(ch)
    return (
        0x3040 <= o <= 0x30FF  # hiragana, katakana (with ー)
        or 0x31F0 <= o <= 0x31FF  # katakana phonetic extensions
        or 0x3400 <= o <= 0x4DBF  # CJK extension A
        or 0x4E00 <= o <= 0x9FFF  # CJK unified ideographs
        or 0xF900 <= o <= 0xFAFF  # compatibility ideographs
        or 0x20000 <= o <= 0x3FFFF  # extensions B-H
        or ch == "々"
    )


def _answer_text(answer: Any) -> str:
    """The answer's own words: ``<think>`` blocks and citation markers removed (``""`` for a non-string)."""
    return strip_citation_markers(strip_think(answer)) if isinstance(answer, str) else ""


def answer_tokens(text: str) -> list[str]:
    """The tokens :func:`exact_match` and :func:`token_f1` compare.

    ``answer_tokens("The Tokyo Tower は 333 メートル。[1]") == ["tokyo", "tower", "は", "333", "メ", "ー", "ト", "ル"]``.
    Citation markers (``[1]``, ``【2】``) are removed; the text is NFKC-normalised and case folded; punctuation and
    symbols (Unicode categories P and S) separate tokens and are dropped; every Han or kana character is one token;
    other letters and digits form word tokens (Latin, digits, Hangul); the English articles a / an / the are dropped
    (SQuAD's normalisation).  A non-string gives ``[]``.
    """
    if not isinstance(text, str):
        return []
    folded = unicodedata.normalize("NFKC", _answer_text(text)).casefold()
    tokens: list[str] = []
    word: list[str] = []

    def flush() -> None:
        if word:
            w = "".join(word)
            if w not in _ARTICLES:
                tokens.append(w)
            word.clear()

    for ch in folded:
        if _is_cjk_char(ch):
            flush()
            tokens.append(ch)
        elif ch.isalnum() or unicodedata.category(ch) in ("Mn", "Mc"):
            word.append(ch)
        else:  # space, punctuation, symbol
            flush()
    flush()
    return tokens


def normalize_answer(text: str) -> str:
    """:func:`answer_tokens` joined by single spaces: the form :func:`exact_match` compares
    (``normalize_answer("「東京」です。") == "東 京 で す"``)."""
    return " ".join(answer_tokens(text))


def _golds(answers: Sequence[str] | str) -> list[str]:
    if isinstance(answers, str):
        return [answers]
    return [a for a in answers if isinstance(a, str)]


def exact_match(prediction: str, answers: Sequence[str] | str) -> float:
    """1.0 when ``prediction`` equals one of ``answers`` after :func:`normalize_answer`, else 0.0 (SQuAD's EM).

    A gold answer that normalises to nothing (only punctuation) is ignored; with none left, 0.0.
    """
    pred = normalize_answer(prediction)
    golds = [g for g in (normalize_answer(a) for a in _golds(answers)) if g]
    return 1.0 if golds and pred in golds else 0.0


def token_f1(prediction: str, answers: Sequence[str] | str) -> float:
    """SQuAD's F1 over :func:`answer_tokens` (bag of tokens: precision and recall of the shared tokens, counted
    with multiplicity), the maximum over ``answers``; 0.0 when either side has no token.

    ``token_f1("東京タワー", ["東京"]) == 2 * (2/5 * 1) / (2/5 + 1) ≈ 0.571``.
    """
    pred = answer_tokens(prediction)
    best = 0.0
    for gold in _golds(answers):
        ref = answer_tokens(gold)
        if not pred or not ref:
            continue
        common = sum((Counter(pred) & Counter(ref)).values())
        if common == 0:
            continue
        p, r = common / len(pred), common / len(ref)
        best = max(best, 2 * p * r / (p + r))
    return best


#: Whitespace next to a Han or kana character: optional in CJK text ("480 文字" = "480文字"), so dropped.
_CJK_SPACE = re.compile(
    r"\s+(?=[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff])"
    r"|(?<=[\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff])\s+"
)
_SPACES = re.compile(r"\s+")


def _folded(text: str) -> str:
    text = _SPACES.sub(" ", unicodedata.normalize("NFKC", text).casefold())  # a line wrap, a double space: one space
    return _CJK_SPACE.sub("", text)


def contains_answer(prediction: str, answers: Sequence[str] | str) -> float:
    """1.0 when one of ``answers`` occurs in ``prediction`` (both NFKC-normalised and case folded, whitespace next to a
    Han or kana character or CJK punctuation dropped — ``"480 文字"`` matches ``"480文字"``, ``"480 〜 500"``
    ``"480〜500"`` —, every other run of whitespace one space, citation markers and ``<think>`` blocks removed from
    the prediction), else 0.0; empty gold answers are ignored.  A space between Latin words still counts
    (``"Eiffel Tower"`` is not in ``"EiffelTower"``, but is in ``"Eiffel\\nTower"``)."""
    if not isinstance(prediction, str):
        return 0.0
    text = _folded(_answer_text(prediction))
    return 1.0 if any(g and g in text for g in (_folded(a) for a in _golds(answers))) else 0.0


# ---------------------------------------------------------------------------------------------- citations
# ---------------------------------------------------------------------------------------------- refusals
#: Refusal wording a model writes in its own words, matched in an answer's first sentence (NFKC, case folded):
#: "I cannot answer…", "the context does not mention…", 資料からは分かりません, 文書には記載がありません,
#: 根据提供的资料，无法回答.  Statements about the *world* ("生年は不明です", "原因尚不清楚") are not refusals and
#: are left out on purpose.
_REFUSAL_PATTERNS = tuple(re.compile(p) for p in (
    r"\b(?:i|we)\s+(?:do not|don't|cannot|can't|can not|am unable to|am not able to|are unable to|could not|"
    r"couldn't)\s+(?:know|answer|find|determine|tell|say|provide|confirm)\b",
    r"\b(?:cannot|can't|can not|could not|couldn't|unable to)\s+(?:be\s+)?(?:answer(?:ed)?|determined?|found)\b",
    r"\b(?:context|contexts|documents?|passages?|sources?|information|text)\s+(?:provided\s+|given\s+)?"
    r"(?:(?:does|do|did)\s+not|doesn't|don't|didn't)\s+"
    r"(?:contain|mention|say|provide|include|specify|state|answer|give|cover)\b",
    r"\b(?:there is|there's|contains?|provides?|gives?|i have|i found)\s+no\s+(?:relevant\s+|such\s+)?information\b",
    r"^no\s+(?:relevant\s+)?information\s+(?:about|on|regarding|is\s+(?:given|provided|available))\b",
    r"\bnot\s+(?:(?:mentioned|stated|specified|provided|given|found|available)\s+)?in\s+the\s+"
    r"(?:provided\s+|given\s+)?(?:context|documents?|passages?|sources?|text)\b",
    r"わかりません|分かりません|わからない|分からない|答えられません|回答できません|お答えできません|判断できません|"
    r"特定できません",
    r"(?:資料|文書|文脈|コンテキスト|本文|パッセージ|提供され)[^。]*?(?:記載|言及|記述|情報|書かれ|含まれ|見当たら|"
    r"見当たり|見つから|見つかり)[^。]*?(?:ありません|ない|ません)",
    r"不知道|无法回答|無法回答|无法确定|無法確定|无法得知|無法得知|不能回答|无从得知|無從得知",
    r"(?:无法|無法|不能)[^。，,]{0,12}(?:回答|确定|確定|得知|判断|判斷)",
    r"(?:资料|資料|文档|文檔|文件|上下文|文本|段落|提供的)[^。]*?(?:没有|沒有|未|无|無)"
    r"(?:提到|提及|记载|記載|说明|說明|相关|相關|包含|涉及|给出|給出|信息|資訊)",
))
#: Quoted spans (a title, a quotation) are not the answer's own words: 《我不知道》, 「わからない」, "I don't know".
_QUOTED = re.compile(r"《[^》]*》|「[^」]*」|『[^』]*』|“[^”]*”|\"[^\"]*\"")


def reads_as_refusal(answer: Any) -> bool:
    """Whether a model's ``answer`` opens with a refusal in its own words.

    Usage::

        reads_as_refusal("根据提供的资料，无法回答该问题。")          # True
        reads_as_refusal("提供された文書には記載がありません。")       # True
        reads_as_refusal("I cannot answer from the context.")          # True
        reads_as_refusal("Tokyo [1]. The documents do not say more.")  # False: it answers first

    :func:`~langchain_ragspine.chains.answer.is_dont_know` knows the package's own refusals (わかりません, the
    "insufficient context" sentence) as whole answers; a real model words them freely.  This reads the answer's
    first sentence (after ``<think>`` blocks and citation markers are removed, NFKC, case folded) against refusal
    wording in English, Japanese and Chinese (:data:`_REFUSAL_PATTERNS`): "I cannot answer / do not know", "the
    context does not mention", "there is no information", "not in the passages", 分かりません / 答えられません,
    資料に記載がありません, 无法回答 / 不知道, 资料中没有提到.  Quoted spans (a title: 《我不知道》, 「わからない」)
    are not read, and a statement about the world ("生年は不明です") is not a refusal.  Non-strings are
    ``False`` (:func:`evaluate_answers` counts those as refusals through ``is_dont_know``).
    """
    if not isinstance(answer, str):
        return False
    text = unicodedata.normalize("NFKC", strip_citation_markers(strip_think(answer))).casefold().replace("’", "'")
    text = _QUOTED.sub(" ", text)
    spans = line_sentence_spans(text)  # the package's sentence splitter, line by line
    first = text[spans[0][0]:spans[0][1]] if spans else ""
    return any(p.search(first) for p in _REFUSAL_PATTERNS)


def _is_gold_passage(doc: Document, question: QAQuestion) -> bool:
    return is_answer_passage(doc, question.doc_id, question.answers)


def _cited_numbers(citations: Any, n_docs: int) -> list[int]:
    out: list[int] = []
    for c in citations or []:
        n = c.get("n") if isinstance(c, Mapping) else None
        if isinstance(n, int) and 1 <= n <= n_docs and n not in out:
            out.append(n)
    return out


def citation_scores(
    citations: Sequence[Mapping[str, Any]], documents: Sequence[Document], question: QAQuestion, *, refused: bool
) -> tuple[float | None, float | None]:
    """``(citation_precision, citation_recall)`` of one answer.

    ``citations`` are the answer's ``[{"n", …}]`` records, ``n`` numbering ``documents`` (the passages the answer was
    given) from 1; a number outside them is ignored.  Precision: the share of cited passages that are gold passages
    (from ``question.doc_id`` and containing one of its answers, NFKC), ``None`` when nothing is cited.  Recall: 1.0
    when a gold passage is cited, else 0.0; ``None`` for a refusal (``refused``), which cites nothing by design.
    """
    cited = _cited_numbers(citations, len(documents))
    gold = [_is_gold_passage(documents[n - 1], question) for n in cited]
    precision = sum(gold) / len(gold) if gold else None
    recall = None if refused else (1.0 if any(gold) else 0.0)
    return precision, recall


def lexical_faithfulness(
    answer: str,
    documents: Sequence[Document],
    cited: Sequence[int],
    *,
    tokenizer: str | Tokenizer = "auto",
    min_support: float = DEFAULT_MIN_SUPPORT,
) -> float | None:
    """The share of the answer's sentences that one of the ``cited`` passages supports lexically.

    ``documents`` are the passages the answer was given (numbered from 1; RESTRICTED ones are dropped first, as the
    prompt dropped them); ``cited`` the passage numbers the answer cites.  A sentence (citation markers removed) is
    supported when :func:`~langchain_ragspine.chains.answer.sentence_supports` gives one cited passage a support of
    at least ``min_support`` (default 0.5); with nothing cited, no sentence is.  ``None`` when the answer has no
    sentence with a content term.

    Raises:
        ValueError: ``min_support`` outside [0, 1].
    """
    if not 0.0 <= min_support <= 1.0:
        raise ValueError(f"min_support must be in [0, 1], got {min_support}")
    return _supported_share(_answer_sentences(answer, documents, tokenizer), cited, min_support)


def _answer_sentences(
    answer: Any, documents: Sequence[Document], tokenizer: str | Tokenizer
) -> list[SentenceSupport]:
    """The answer's sentences with a content term and each passage's support of them."""
    return sentence_supports(_answer_text(answer), documents, tokenizer=tokenizer)


def _supported_share(items: Sequence[SentenceSupport], cited: Sequence[int], min_support: float) -> float | None:
    """The share of ``items`` one of the ``cited`` passages (numbers from 1) supports by ``min_support`` or more;
    ``None`` without items."""
    if not items:
        return None
    wanted = [n - 1 for n in cited]
    supported = sum(1 for it in items if any(0 <= i < len(it.support) and it.support[i] >= min_support
                                               for i in wanted))
    return supported / len(items)


# ---------------------------------------------------------------------------------------------- the judge
JUDGE_FAITHFULNESS_PROMPT = """\
You check whether statements are supported by passages. Use only the passages, not outside knowledge.
For each numbered statement, reply on its own line with the statement's number, a colon and one word: \
"yes" if the passages state it or directly imply it, "no" otherwise. Reply with nothing else.

Passages:
{passages}

Question: {question}

Statements:
{statements}"""

JUDGE_RELEVANCE_PROMPT = """\
Does the answer respond to the question (whether or not it is correct)? Reply with exactly one word: \
"yes" (it answers the question), "partly" (it answers only part of it or is vague) or "no" (it does not answer it).

Question: {question}

Answer: {answer}"""

#: A line that opens with a statement number: ``1:``, ``1.``, ``[2] -``, ``**3**:``, ``4)``.
_NUMBERED_LINE = re.compile(r"^\s*[\[(]?\s*\**\s*(\d+)\s*\**\s*[\])]?\s*[:：.)\-–]\s*(.*)$")
#: A numbered verdict anywhere in a line ("Actually 1: no"): a line that is not itself numbered but holds one.
_INNER_VERDICT = re.compile(r"\b\d+\s*[:：]\s*\**\s*(?:yes|no|supported|unsupported|not supported)\b", re.I)
_SUPPORT_WORD = re.compile(r"\b(not supported|unsupported|supported|yes|no)\b", re.I)
_BARE_VERDICT = re.compile(r"[*\"'`]*(yes|no|supported|unsupported|not supported)[*\"'`.!]*", re.I)
_RELEVANCE = {"yes": 1.0, "partly": 0.5, "partially": 0.5, "partial": 0.5, "no": 0.0}
_RELEVANCE_WORD = re.compile(r"\b(yes|no|partly|partially|partial)\b")
#: Words after a relevance verdict that take it back or hedge it.
_HEDGE = re.compile(r"\b(not|nope|nah|never|none|but|however|although|though|except|incorrect|wrong)\b|n't\b")
#: Words after a "no" that hedge it (a negation after "no" agrees with it).
_CONTRAST = re.compile(r"\b(but|however|although|though|except|yet)\b")


def _polarity(text: str) -> bool | None:
    """``True`` / ``False`` when every support word of ``text`` agrees (yes / supported vs no / unsupported / not
    supported), ``None`` when there is none or they disagree ("yes or no", "yes - though not supported")."""
    found = {w.lower() in ("yes", "supported") for w in _SUPPORT_WORD.findall(text)}
    return found.pop() if len(found) == 1 else None


def parse_support_verdicts(reply: Any, n_statements: int) -> list[bool] | None:
    """The judge's per-statement verdicts (``True`` = supported), or ``None`` when the reply cannot be read.

    Reads lines ``"1: yes"`` (also ``"1. no"``, ``"[2] - yes"``, ``"**3**: supported"``, ``"4) not supported"``, any
    case, after a ``<think>`` block is removed); a numbered line may explain its verdict, but every support word in
    it must agree.  Every statement 1..``n_statements`` needs exactly one verdict.  The whole reply is unknown
    (``None``), never a pass, when a numbered line has no verdict or contradicts itself ("1: yes or no",
    ``"1: maybe"``), a number repeats with another verdict or names no statement, a statement has none, or any other
    line holds a support word ("Actually 1: no", "On reflection 1 is not supported", "There is no mention…": strict
    on purpose).  A reply made only of bare verdicts, one a line, exactly as many as there are statements (``"yes"``
    for one statement — small models drop the number), is read in order.  Other lines (a preamble without a support
    word) are ignored.
    """
    if not isinstance(reply, str) or n_statements < 1:
        return None
    lines = [line.strip() for line in strip_think(reply).splitlines() if line.strip()]
    bare: list[bool] = []
    verdicts: dict[int, bool] = {}
    for line in lines:
        numbered = _NUMBERED_LINE.match(line)
        if numbered:
            n, value = int(numbered.group(1)), _polarity(numbered.group(2))
            if value is None or not 1 <= n <= n_statements or verdicts.get(n, value) != value:
                return None
            verdicts[n] = value
        elif (m := _BARE_VERDICT.fullmatch(line)) is not None:
            bare.append(m.group(1).lower() in ("yes", "supported"))
        elif _SUPPORT_WORD.search(line) or _INNER_VERDICT.search(line):
            return None  # a verdict outside the verdict lines ("Actually 1: no", "On reflection 1 is not supported")
    if bare and verdicts:  # both forms: which verdict is which statement's is not clear
        return None
    if bare:
        return bare if len(bare) == n_statements else None
    if set(verdicts) != set(range(1, n_statements + 1)):
        return None
    return [verdicts[i] for i in range(1, n_statements + 1)]


def parse_relevance_verdict(reply: Any) -> float | None:
    """``yes`` → 1.0, ``partly`` / ``partially`` → 0.5, ``no`` → 0.0: the reply's first word (after a ``<think>``
    block, quotes, bold marks and a leading "Answer:" are removed, any case), when no other verdict word anywhere in
    the reply disagrees with it ("Yes. Actually, no.", "yes or no", "yes\\nno" are unknown) and nothing after it
    negates or hedges it ("Yes; nope", "yes — not at all", "Yes, but…"); anything else is unknown (``None``), never
    a pass."""
    if not isinstance(reply, str):
        return None
    text = strip_think(reply).strip().strip("*\"'` ").casefold()
    text = re.sub(r"^(answer|verdict|reply)\s*[:：]\s*", "", text).strip("*\"'` ")
    m = re.match(r"([a-z]+)", text)
    if not m or m.group(1) not in _RELEVANCE:
        return None
    if len({_RELEVANCE[w] for w in _RELEVANCE_WORD.findall(text)}) != 1:
        return None
    value = _RELEVANCE[m.group(1)]
    # "Yes; nope", "yes — not at all", "Yes, but it does not fully answer": taken back.  After "no" a negation
    # agrees ("No, it does not answer the question"); only a contrast ("No, but…") hedges it.
    if (_CONTRAST if value == 0.0 else _HEDGE).search(text[m.end():]):
        return None
    return value


class AnswerJudge:
    """An LLM judge of faithfulness and answer relevance for :func:`evaluate_answers`.

    Usage::

        judge = AnswerJudge(ChatOllama(model="qwen2.5:7b", temperature=0))
        verdicts = judge.faithfulness(question, statements, passages)   # [True, False, …] or None
        score = judge.relevance(question, answer)                        # 1.0 / 0.5 / 0.0 or None

    One model call per measure and answer (:data:`JUDGE_FAITHFULNESS_PROMPT`, :data:`JUDGE_RELEVANCE_PROMPT`),
    each a single human message.  Passages are numbered as :func:`~langchain_ragspine.chains.answer.format_context`
    numbers them for the answer prompt, RESTRICTED ones dropped first, so the judge never sees more than the graph's
    prompt did.  A reply that cannot be parsed (:func:`parse_support_verdicts`, :func:`parse_relevance_verdict`) or
    a model error gives ``None`` (unknown).  ``calls`` counts the model calls made.

    Args:
        llm: a LangChain chat model (or LLM).

    Raises:
        TypeError: ``llm`` is not a LangChain language model.
    """

    def __init__(self, llm: BaseLanguageModel[Any]) -> None:
        if not isinstance(llm, BaseLanguageModel):
            raise TypeError(f"judge must be a LangChain chat model, got {type(llm).__name__}")
        self.llm = llm
        self.calls = 0
        self.errors = 0

    def _ask(self, prompt: str) -> str | None:
        self.calls += 1
        try:
            if isinstance(self.llm, BaseChatModel):
                out: Any = self.llm.invoke([
                    SystemMessage(content="You are a careful, strict evaluator."), HumanMessage(content=prompt),
                ])
            else:
                out = self.llm.invoke(prompt)
        except Exception:  # noqa: BLE001 - a judge failure is an unknown verdict, not a crash of the evaluation
            self.errors += 1
            return None
        content = getattr(out, "content", out)
        return content if isinstance(content, str) else None

    def faithfulness(self, question: str, statements: Sequence[str], passages: Sequence[Document]) -> list[bool] | None:
        """Per-statement verdicts (``True`` = the passages support it), or ``None`` (unknown)."""
        if not statements:
            return None
        numbered = "\n".join(f"{i}. {s.strip()}" for i, s in enumerate(statements, 1))
        context = format_context(passages) or "(no passages)"
        reply = self._ask(JUDGE_FAITHFULNESS_PROMPT.format(passages=context, question=question, statements=numbered))
        return parse_support_verdicts(reply, len(statements))

    def relevance(self, question: str, answer: str) -> float | None:
        """1.0 / 0.5 / 0.0 (yes / partly / no), or ``None`` (unknown)."""
        return parse_relevance_verdict(self._ask(JUDGE_RELEVANCE_PROMPT.format(question=question, answer=answer)))


# ---------------------------------------------------------------------------------------------- the runner
class _RunRecorder(BaseCallbackHandler):
    """Counts the model calls of one run and keeps, per outermost retriever call, what it returned (gated).

    A retriever that calls others (a hybrid's channels, a live store's BM25, a retriever running a chain of them)
    reports each inner call too: every run's parent is recorded, and only retriever calls with no retriever among
    their ancestors are kept, so a passage is recorded once per search."""

    def __init__(self) -> None:
        self.llm_calls = 0
        self.calls: list[list[Document]] = []
        self._parent: dict[UUID, UUID | None] = {}
        self._retriever_runs: set[UUID] = set()
        self._lock = threading.Lock()

    @property
    def retrieved(self) -> list[Document]:
        """Every outermost retriever call's documents, in the order the calls ended."""
        return [d for call in self.calls for d in call]

    def _started(self, run_id: UUID, parent_run_id: UUID | None) -> None:
        with self._lock:
            self._parent[run_id] = parent_run_id

    def _inside_a_retriever(self, run_id: UUID) -> bool:
        seen: set[UUID] = set()
        up = self._parent.get(run_id)
        while up is not None and up not in seen:
            if up in self._retriever_runs:
                return True
            seen.add(up)
            up = self._parent.get(up)
        return False

    def on_chain_start(
        self, serialized: Any, inputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self._started(run_id, parent_run_id)

    def on_tool_start(
        self, serialized: Any, input_str: str, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self._started(run_id, parent_run_id)

    def on_chat_model_start(
        self, serialized: Any, messages: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self._started(run_id, parent_run_id)
        with self._lock:
            self.llm_calls += 1

    def on_llm_start(
        self, serialized: Any, prompts: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self._started(run_id, parent_run_id)
        with self._lock:
            self.llm_calls += 1

    def on_retriever_start(
        self, serialized: Any, query: str, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self._started(run_id, parent_run_id)
        with self._lock:
            self._retriever_runs.add(run_id)

    def on_retriever_end(self, documents: Sequence[Document], *, run_id: UUID, **kwargs: Any) -> None:
        docs = drop_restricted([d for d in documents if isinstance(d, Document)])
        with self._lock:
            if not self._inside_a_retriever(run_id):
                self.calls.append(docs)


def evaluate_answers(
    graph: Runnable[Any, Any],
    dataset: QADataset,
    *,
    limit: int | None = None,
    name: str | None = None,
    judge: BaseLanguageModel[Any] | AnswerJudge | None = None,
    tokenizer: str | Tokenizer = "auto",
    min_support: float = DEFAULT_MIN_SUPPORT,
    progress: bool | None = None,
    questions: Iterable[QAQuestion] | None = None,
) -> EvalResult:
    """Answer every question of ``dataset`` with ``graph`` and score the answers (see the module docstring).

    Usage::

        graph = build_corrective_rag(open_retriever("store/"), llm=None)
        result = evaluate_answers(graph, load_dataset("data/jsquad-valid"), limit=200, name="corrective")
        result.aggregate["answer_contains"], result.aggregate["faithfulness"], result.latency_ms["p50"]
        compare_paired(result, other, ANSWER_METRICS)        # paired differences with 95% intervals

    Args:
        graph: a ``Runnable`` taking ``{"question": str}`` and returning a mapping with ``answer`` and, as every graph
            of :mod:`langchain_ragspine.graphs` returns, ``citations`` (``n`` numbering ``documents``), ``documents``
            (the passages the answer was given) and ``refused``.  Without ``documents`` in the output, the last
            outermost retriever call of the run to end stands for them (with calls in parallel, return
            ``documents`` for exact numbering).  The graph is called with ``invoke`` (sync): an async-only graph
            raises LangChain's ``TypeError``.
        dataset: a :class:`~langchain_ragspine.evaluation.datasets.QADataset` (gold answers and documents).
        limit: the first ``limit`` questions only (default: all).
        name: the configuration's name in tables (default: the graph's ``name`` or class name).
        judge: a chat model (wrapped in :class:`AnswerJudge`) or an :class:`AnswerJudge`: adds ``judge_faithfulness``
            and ``judge_relevance``; refusals are not judged.  Default ``None``: offline metrics only.
        tokenizer: the tokenizer of the lexical faithfulness check (default ``"auto"``).
        min_support: the lexical support a sentence needs (default 0.5, as the answer chain's attribution).
        progress: show a progress bar (default: on a terminal).
        questions: the questions to run, instead of the dataset's (e.g. a seeded sample of them).

    Returns:
        An :class:`~langchain_ragspine.evaluation.runner.EvalResult`: ``per_query`` holds, per question, ``id``,
        ``question``, ``answer``, ``mode``, ``ground_truths``, ``contexts`` (the passages' prompt text), ``cited``
        (their ``chunk_id``), every metric of :data:`ANSWER_METRICS` (``None`` where undefined), ``llm_calls``,
        ``judge_calls``, ``judge_unknown`` and ``latency_ms``; ``aggregate`` the mean of each metric over the questions
        where it is defined, plus ``refusal_rate``, ``false_refusal_rate``, ``llm_calls`` (mean per question),
        ``judge_unknown_rate`` (unknown verdicts / judge calls) with a judge; ``latency_ms`` p50 / p95 / mean of
        ``invoke``.

    Raises:
        TypeError: ``graph`` is not a ``Runnable``, ``dataset`` is not a QA dataset, or ``judge`` is not a model.
        ValueError: ``limit < 0`` or ``min_support`` outside [0, 1].
        RagSpineError: the graph's output ``documents`` hold a RESTRICTED passage (its answer may quote it).
    """
    if not isinstance(graph, Runnable):
        raise TypeError(f"graph must be a LangChain Runnable (a compiled graph or a chain), got {type(graph).__name__}")
    if not isinstance(dataset, QADataset):
        raise TypeError(f"answers are scored against gold answers: a QADataset is needed, got {type(dataset).__name__}")
    check_int(limit, "limit", minimum=0, allow_none=True)
    if not 0.0 <= min_support <= 1.0:
        raise ValueError(f"min_support must be in [0, 1], got {min_support}")
    the_judge = judge if isinstance(judge, AnswerJudge) or judge is None else AnswerJudge(judge)
    todo = list(questions) if questions is not None else list(dataset.questions)
    if limit is not None:
        todo = todo[:limit]
    label = name or getattr(graph, "name", None) or type(graph).__name__
    per_query: list[dict[str, Any]] = []
    for q in progress_bar(todo, desc=f"answers {label}", unit="q", show=progress):
        per_query.append(_score_one(graph, q, the_judge, tokenizer=tokenizer, min_support=min_support))
    aggregate: dict[str, float] = {}
    for metric in ANSWER_METRICS:
        if metric.startswith("judge_") and the_judge is None:
            continue
        aggregate[metric] = mean(r[metric] for r in per_query if r.get(metric) is not None)
    aggregate["refusal_rate"] = aggregate.pop("refused")
    aggregate["false_refusal_rate"] = aggregate.pop("false_refusal")
    aggregate["llm_calls"] = mean(r["llm_calls"] for r in per_query)
    if the_judge is not None:
        calls = sum(r["judge_calls"] for r in per_query)
        aggregate["judge_unknown_rate"] = sum(r["judge_unknown"] for r in per_query) / calls if calls else math.nan
    config: dict[str, Any] = {
        "kind": "answers",
        "metrics": [m for m in ANSWER_METRICS if the_judge is not None or not m.startswith("judge_")],
        "graph": f"{type(graph).__module__}.{type(graph).__qualname__}",
        "dataset": dataset.name,
        "dataset_kind": "qa",
        "n_questions": len(per_query),
        "judge": None if the_judge is None else _model_name(the_judge.llm),
        "min_support": min_support,
        "tokenizer": tokenizer if isinstance(tokenizer, str) else getattr(tokenizer, "__name__", "callable"),
    }
    return EvalResult(
        name=label, config=config, per_query=per_query, aggregate=aggregate,
        latency_ms=latency_percentiles([r["latency_ms"] for r in per_query]),
    )


def _model_name(llm: Any) -> str:
    for attr in ("model", "model_name"):
        value = getattr(llm, attr, None)
        if isinstance(value, str) and value:
            return f"{type(llm).__name__}({value})"
    return type(llm).__name__


def _score_one(
    graph: Runnable[Any, Any], q: QAQuestion, judge: AnswerJudge | None, *, tokenizer: str | Tokenizer,
    min_support: float,
) -> dict[str, Any]:
    recorder = _RunRecorder()
    t0 = time.perf_counter()
    try:
        state = graph.invoke({"question": q.question}, config={"callbacks": [recorder]})
    except Exception as e:
        e.add_note(f"evaluate_answers: raised by the graph on question {q.id!r}")
        raise
    ms = (time.perf_counter() - t0) * 1000.0
    if not isinstance(state, Mapping):
        raise TypeError(f"the graph returned {type(state).__name__}, not a mapping with 'answer' (question {q.id})")
    answer = state.get("answer")
    answer = answer if isinstance(answer, str) else ""
    given = state.get("documents")
    if isinstance(given, Sequence) and not isinstance(given, str) and all(isinstance(d, Document) for d in given):
        documents = list(given)
        if len(drop_restricted(documents)) != len(documents):  # the answer may quote it: nothing of it is written
            raise RagSpineError(
                f"the graph returned a RESTRICTED passage among the documents of its answer (question {q.id!r}): "
                "gate before the prompt (RestrictedGate / drop_restricted); the run is not scored, so nothing "
                "derived from it reaches a judge, a result or an export"
            )
    else:  # a chain that does not return its passages: its last retrieval stands for them
        documents = list(recorder.calls[-1]) if recorder.calls else []
    # a model's refusal in its own words counts too (the offline path's answers are verbatim sentences: not read)
    refused = (bool(state.get("refused")) or is_dont_know(answer)
               or (recorder.llm_calls > 0 and reads_as_refusal(answer)))
    gold_retrieved = any(_is_gold_passage(d, q) for d in [*recorder.retrieved, *documents])
    citations = state.get("citations") or []
    cited = [] if refused else _cited_numbers(citations, len(documents))
    precision, recall = citation_scores(citations if not refused else [], documents, q, refused=refused)
    sentences = [] if refused else _answer_sentences(answer, documents, tokenizer)  # faithfulness and the judge's
    faithful = None if refused else _supported_share(sentences, cited, min_support)
    record: dict[str, Any] = {
        "id": q.id,
        "question": q.question,
        "answer": answer,
        "mode": state.get("mode"),
        "ground_truths": list(q.answers),
        "contexts": [prompt_text(d) for d in documents],
        "cited": [doc_key(documents[n - 1]) for n in cited],
        "answer_contains": 0.0 if refused else contains_answer(answer, q.answers),
        "exact_match": 0.0 if refused else exact_match(answer, q.answers),
        "f1": 0.0 if refused else token_f1(answer, q.answers),
        "citation_precision": precision,
        "citation_recall": recall,
        "faithfulness": faithful,
        "judge_faithfulness": None,
        "judge_relevance": None,
        "refused": 1.0 if refused else 0.0,
        "false_refusal": 1.0 if refused and gold_retrieved else 0.0,
        "gold_retrieved": 1.0 if gold_retrieved else 0.0,
        "llm_calls": recorder.llm_calls,
        "judge_calls": 0,
        "judge_unknown": 0,
        "latency_ms": ms,
    }
    if judge is not None and not refused:
        before = judge.calls
        statements = [it.sentence for it in sentences]
        unknown = 0
        if statements:
            verdicts = judge.faithfulness(q.question, statements, documents)
            if verdicts is None:
                unknown += 1
            else:
                record["judge_faithfulness"] = sum(verdicts) / len(verdicts)
        relevance = judge.relevance(q.question, _answer_text(answer))
        if relevance is None:
            unknown += 1
        record["judge_relevance"] = relevance
        record["judge_calls"] = judge.calls - before
        record["judge_unknown"] = unknown
    return record


# ---------------------------------------------------------------------------------------------- export, tables
def _check_answer_result(result: EvalResult, needs: str) -> None:
    """Refuse a retrieval result where an answer result (:func:`evaluate_answers`) is needed."""
    if result.config.get("kind") != "answers":
        raise ValueError(f"{result.name!r} is a retrieval result; {needs}")


def ragas_rows(result: EvalResult, *, layout: RagasLayout = "ragas") -> list[dict[str, Any]]:
    """The run as rows in RAGAS's columns, one per question: the question, the passages the answer was given (their
    prompt text, as the model read them), the answer (citation markers kept) and the first gold answer.

    ``layout="ragas"`` (default) names them ``user_input``, ``retrieved_contexts``, ``response``, ``reference``
    (RAGAS 0.2+: ``EvaluationDataset.from_list(rows)``); ``"ragas-legacy"`` names them ``question``, ``contexts``,
    ``answer``, ``ground_truth`` (RAGAS 0.1: ``datasets.Dataset.from_list(rows)``).

    Raises:
        ValueError: an unknown ``layout``, or ``result`` is not from :func:`evaluate_answers`.
    """
    if layout not in RAGAS_COLUMNS:
        raise ValueError(f"unknown layout {layout!r}: expected one of {sorted(RAGAS_COLUMNS)}")
    _check_answer_result(result, "ragas_rows needs one from evaluate_answers")
    q_col, c_col, a_col, g_col = RAGAS_COLUMNS[layout]
    return [
        {
            q_col: r["question"],
            c_col: list(r["contexts"]),
            a_col: r["answer"],
            g_col: (r["ground_truths"] or [""])[0],
        }
        for r in result.per_query
    ]


def write_ragas(result: EvalResult, path: str | Path, *, layout: RagasLayout = "ragas") -> Path:
    """Write :func:`ragas_rows` to ``path`` as JSON Lines (UTF-8, one row a line; ``.json`` writes one JSON
    array instead) and return the path.  Read it back with ``pandas.read_json(path, lines=True)`` or
    ``datasets.load_dataset("json", data_files=path)``.

    Raises:
        ValueError: see :func:`ragas_rows`.
    """
    rows = ragas_rows(result, layout=layout)
    out = Path(path)
    if out.suffix == ".json":
        out.write_text(json.dumps(rows, ensure_ascii=False, indent=1) + "\n", "utf-8")
    else:
        out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return out


#: The metrics :func:`answers_markdown` compares pairwise (the judge's when present).
_PAIRED = (
    "answer_contains", "exact_match", "f1", "citation_precision", "citation_recall", "faithfulness",
    "judge_faithfulness", "judge_relevance", "refused", "false_refusal", "llm_calls", "latency_ms",
)


def paired_answer_metrics(results: Sequence[EvalResult]) -> list[str]:
    """The metrics :func:`answers_markdown` pairs for ``results``: the answer measures, the judge's when a result
    has them, and the cost side (``llm_calls``, ``latency_ms``) — pass them to
    :func:`~langchain_ragspine.evaluation.significance.compare_paired` for the same comparisons as data."""
    return [m for m in _PAIRED if any(x.get(m) is not None for r in results for x in r.per_query)]


def answers_markdown(
    results: Sequence[EvalResult], *, significance: bool = True, n_resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> str:
    """A Markdown table of answer results (a row per configuration, a column per measure), then, for two or more
    results and ``significance``, the paired difference of every pair on the same questions with its 95% bootstrap
    interval and randomisation p-value (:func:`~langchain_ragspine.evaluation.runner.paired_markdown`).

    Raises:
        ValueError: ``results`` is empty or holds a retrieval result.
    """
    if not results:
        raise ValueError("answers_markdown needs at least one result")
    for r in results:
        _check_answer_result(r, "answers_markdown needs results of evaluate_answers")
    columns = [m for m in (
        "answer_contains", "exact_match", "f1", "citation_precision", "citation_recall", "faithfulness",
        "judge_faithfulness", "judge_relevance", "judge_unknown_rate", "refusal_rate", "false_refusal_rate",
        "llm_calls",
    ) if any(m in r.aggregate for r in results)]
    lines = [
        "| configuration | n | " + " | ".join(columns) + " | p50 ms | p95 ms |",
        "|---|---:|" + "---:|" * (len(columns) + 2),
    ]
    for r in results:
        cells = [format_metric(r.aggregate.get(m), 2 if m == "llm_calls" else 3) for m in columns]
        lines.append(
            f"| {r.name} | {r.config.get('n_questions', len(r.per_query))} | " + " | ".join(cells)
            + f" | {format_metric(r.latency_ms.get('p50'), 1)} | {format_metric(r.latency_ms.get('p95'), 1)} |"
        )
    text = "\n".join(lines) + "\n"
    if significance and len(results) > 1:
        metrics = paired_answer_metrics(results)
        for i, base in enumerate(results[:-1]):
            text += "\n" + paired_markdown(base, results[i + 1:], metrics=metrics, n_resamples=n_resamples, seed=seed)
    return text
