"""Query analysis for the graphs: small-talk detection, complexity classification, decomposition and rewriting.

* :func:`classify_question` — the deterministic complexity classifier of the adaptive graph.  Adaptive-RAG (Jeong et
  al., "Adaptive-RAG: Learning to Adapt Retrieval-Augmented Large Language Models through Question Complexity",
  NAACL 2024) routes each question to no retrieval, single-step retrieval or multi-step retrieval with a trained
  classifier; this is a transparent rule set over the same three classes: ``"none"`` for greetings and thanks,
  ``"decompose"`` when :func:`split_question` finds two or more sub-questions, else ``"single"``.
* :func:`split_question` — deterministic decomposition (at most 3 parts): several questions in one message (two
  or more question sentences), clauses joined by a clause-level conjunction (``; and also …``, ``および``,
  ``並びに``, ``并且``, ``以及``), or a comparison of two named things (``difference between A and B``,
  ``AとBの違い``, ``A和B的区别``) — "least-to-most" decomposition (Zhou et al., ICLR 2023) without a model.
* :func:`rewrite_query_deterministic` — the corrective rewrite without a model (CRAG's query rewriting, Yan et al.,
  2024; Ma et al., "Query Rewriting for Retrieval-Augmented Large Language Models", EMNLP 2023): question words,
  particles, auxiliaries and punctuation removed (MeCab/unidic-lite part-of-speech tags for CJK text, a stopword
  list for English), content words kept in order.
* :func:`parse_lines` / :func:`clean_query` — robust parsing of an LLM's sub-questions and rewrites.

Nothing here raises on odd input: empty or unparsable text gives the conservative answer (``"single"``, no split,
the query unchanged).
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from typing import Any, Literal

from langchain_ragspine.chains.answer import strip_think
from langchain_ragspine.stopwords import (
    CHINESE_QUESTION_WORDS,
    ENGLISH_STOPWORDS,
    JAPANESE_QUESTION_WORDS,
    content_terms,
)
from langchain_ragspine.text import CJK_CHAR_CLASS, CJK_CHAR_RE, normalize, sentence_spans
from langchain_ragspine.tokenizers import Tokenizer, get_tokenizer

__all__ = [
    "MAX_SUB_QUESTIONS",
    "Complexity",
    "classify_question",
    "clean_query",
    "is_small_talk",
    "parse_lines",
    "rewrite_query_deterministic",
    "shares_tokens",
    "split_question",
]

Complexity = Literal["none", "single", "decompose"]

#: Decomposition never yields more sub-questions than this.
MAX_SUB_QUESTIONS = 3

_GREETINGS = (
    "good morning", "good afternoon", "good evening", "thank you", "thanks", "hello", "hi", "hey", "howdy",
    "bye", "goodbye", "cheers", "greetings", "how are you", "nice to meet you",
    "おはようございます", "おはよう", "こんにちは", "こんばんは", "ありがとうございます", "ありがとう", "よろしくお願いします",
    "よろしく", "さようなら", "はじめまして", "お疲れ様です", "お疲れさま",
    "你好", "您好", "谢谢", "多谢", "早上好", "晚上好", "再见", "你好吗",
)
_FILLERS = ("there", "all", "everyone", "again", "so much", "very much", "a lot", "you", "team", "folks", "bot",
            "さん", "皆さん", "大家", "啊", "呀", "了")
_PUNCT_RE = re.compile(r"[\s\W_]+")
_QUESTION_MARK_RE = re.compile(r"[?？]")
_EN_QUESTION_WORD_RE = re.compile(
    r"^(?:what|which|who|whom|whose|when|where|why|how|is|are|was|were|do|does|did|can|could|should|would|will)\b",
    re.IGNORECASE,
)
_CJK_QUESTION_END_RE = re.compile(r"(?:か|の|吗|呢|么)[。.]?$")
_CLAUSE_SPLIT_RE = re.compile(
    r"\s*(?:;|；|,?\s+and also\s+|,?\s+as well as\s+|、?および、?|、?並びに、?|、?ならびに、?|，?并且|，?以及|，?而且|、また、)\s*",
    re.IGNORECASE,
)
_COMPARE_EN_RE = re.compile(
    r"(?:difference|differences|compare|comparison)\s+(?:between\s+|of\s+)?(?P<a>.+?)\s+(?:and|with|to|vs\.?|versus)\s+"
    r"(?P<b>.+?)\s*[?？.。]*$|(?P<a2>\S.+?)\s+(?:vs\.?|versus)\s+(?P<b2>.+?)\s*[?？.。]*$",
    re.IGNORECASE,
)
_COMPARE_JA_RE = re.compile(r"(?P<a>[^、。？?]+?)と(?P<b>[^、。？?と]+?)(?:の|を|は)?(?:違い|比較|差|比べ|相違)")
_COMPARE_ZH_RE = re.compile(r"(?P<a>[^，。？?]+?)(?:和|与|跟|同)(?P<b>[^，。？?]+?)(?:的)?(?:区别|比较|差异|不同|异同)")
# Chinese runs are cut at these in the deterministic rewrite (the interrogatives, plus 是 and 的).
_ZH_CUT_WORDS = CHINESE_QUESTION_WORDS | {"是", "的"}
_KANA_RE = re.compile("[\u3040-\u30ff]")
# runs of CJK text and runs of anything else (ASCII words inside Japanese stay whole: "BM25", not "BM 25")
_RUN_RE = re.compile(rf"[{CJK_CHAR_CLASS}]+|[^{CJK_CHAR_CLASS}]+")
_LEADING_CONJ_RE = re.compile(r"^(?:また|それと|それから|さらに|and|also|plus|另外|还有|以及|并且)[、,，\s]+", re.IGNORECASE)
_DROP_POS = frozenset({"助詞", "助動詞", "補助記号", "記号", "空白", "代名詞"})
_PREFIX_RE = re.compile(
    r"^\s*(?:[-*•]|\d+[.)、:：]|[(（]?\d+[)）]|(?:sub-?question|question|query|search query|rewritten query|rewrite|"
    r"検索クエリ|クエリ|質問|问题|查询)\s*\d*\s*[:：])\s*",
    re.IGNORECASE,
)


def is_small_talk(question: str) -> bool:
    """Whether ``question`` is only a greeting / thanks / farewell (optionally with "there", "everyone", a name
    suffix and punctuation): such messages need no retrieval."""
    if not isinstance(question, str):
        return False
    text = normalize(question).lower().strip()
    if not text or len(text) > 60:
        return False
    for phrase in sorted(_GREETINGS + _FILLERS, key=len, reverse=True):
        if CJK_CHAR_RE.search(phrase):
            text = text.replace(phrase, " ")
        else:
            text = re.sub(rf"\b{re.escape(phrase)}\b", " ", text)
    original = normalize(question).lower()
    had_greeting = any(
        (g in original) if CJK_CHAR_RE.search(g) else re.search(rf"\b{re.escape(g)}\b", original) for g in _GREETINGS
    )
    return bool(had_greeting) and not _PUNCT_RE.sub("", text)


def _is_question_sentence(sentence: str) -> bool:
    s = sentence.strip()
    return bool(_QUESTION_MARK_RE.search(s) or _EN_QUESTION_WORD_RE.match(s) or _CJK_QUESTION_END_RE.search(s))


def _dedupe_parts(parts: Sequence[str]) -> list[str]:
    out: list[str] = []
    for p in parts:
        p = _LEADING_CONJ_RE.sub("", p.strip(" \t\r\n、,，")).strip()
        if p and p not in out:
            out.append(p)
    return out[:MAX_SUB_QUESTIONS]


def _long_enough(part: str) -> bool:
    text = _PUNCT_RE.sub("", part)
    return len(text) >= (2 if CJK_CHAR_RE.search(text) else 3)


def split_question(question: str) -> list[str]:
    """Sub-questions of ``question`` (2–3 of them), or ``[]`` when it is one question.  Deterministic; see the module
    docstring for the rules.  Japanese ``と`` alone never splits (``北海道とどこか`` is one question)."""
    if not isinstance(question, str) or not question.strip():
        return []
    text = question.strip()
    # 1. several question sentences
    sentences = [text[s:e].strip() for s, e in sentence_spans(text)]
    asked = [s for s in sentences if _is_question_sentence(s) and _long_enough(s)]
    if len(asked) >= 2 and (len(_QUESTION_MARK_RE.findall(text)) >= 2 or len(asked) == len(sentences)):
        return _dedupe_parts(asked)
    # 2. a comparison of two things
    for rx in (_COMPARE_JA_RE, _COMPARE_ZH_RE, _COMPARE_EN_RE):
        m = rx.search(text)
        if m:
            a = (m.groupdict().get("a") or m.groupdict().get("a2") or "").strip()
            b = (m.groupdict().get("b") or m.groupdict().get("b2") or "").strip()
            a = re.sub(r"^(?:what\s+is\s+the|what's\s+the|what\s+are\s+the|the)\s+", "", a, flags=re.IGNORECASE)
            if _long_enough(a) and _long_enough(b) and a != b:
                return _dedupe_parts([a, b])
    # 3. clauses joined by a clause-level conjunction
    parts = [p for p in _CLAUSE_SPLIT_RE.split(text) if p and _long_enough(p)]
    if len(parts) >= 2:
        mark = "？" if CJK_CHAR_RE.search(text) else "?"
        ends = "?？。.!！"
        fixed = [p if p[-1] in ends else p + (mark if _QUESTION_MARK_RE.search(text) else "") for p in parts]
        return _dedupe_parts(fixed)
    return []


def classify_question(question: str) -> Complexity:
    """``"none"`` (small talk, answer without retrieval), ``"decompose"`` (:func:`split_question` finds 2+ parts)
    or ``"single"`` — the default, also for anything unusual."""
    if is_small_talk(question):
        return "none"
    if len(split_question(question)) >= 2:
        return "decompose"
    return "single"


def shares_tokens(a: str, b: str, tokenizer: str | Tokenizer = "auto") -> bool:
    """Whether ``a`` and ``b`` share a content term (:func:`~langchain_ragspine.stopwords.content_terms` with
    ``tokenizer``; single CJK characters ignored unless that leaves nothing) — a sanity check that an LLM's
    rewrite or sub-question is still about the question."""
    tok = get_tokenizer(tokenizer)

    def content(text: str) -> set[str]:
        terms = content_terms(text, tok)
        kept = {t for t in terms if not (len(t) == 1 and CJK_CHAR_RE.match(t))}
        return kept or terms

    return bool(content(a) & content(b))


def rewrite_query_deterministic(query: str) -> str:
    """``query`` reduced to its content words, space-separated: ``日本で梅雨がないのは北海道とどこか。`` →
    ``日本 梅雨 ない 北海道``; ``What is the capital of France?`` → ``capital France``.  Returns ``query`` stripped
    when nothing would be left."""
    if not isinstance(query, str):
        return ""
    text = normalize(query).strip()
    words: list[str] = []
    japanese = bool(_KANA_RE.search(text))
    for m in _RUN_RE.finditer(text):
        run = m.group(0)
        if not CJK_CHAR_RE.search(run):
            words.extend(w for w in re.findall(r"[^\W_]+(?:[-'][^\W_]+)*", run) if w.lower() not in ENGLISH_STOPWORDS)
        elif japanese:
            from langchain_ragspine.tokenizers import fugashi_tagger, mecab_pieces

            for w in (w for piece in mecab_pieces(run) for w in fugashi_tagger()(piece)):
                surface = w.surface
                if not surface or getattr(w.feature, "pos1", None) in _DROP_POS or surface in JAPANESE_QUESTION_WORDS:
                    continue
                if not all(unicodedata.category(ch)[0] in "PSZC" for ch in surface):
                    words.append(surface)
        else:  # Chinese: MeCab would mis-segment it; cut at question words instead
            for word in sorted(_ZH_CUT_WORDS, key=len, reverse=True):
                run = run.replace(word, " ")
            words.extend(run.split())
    out: list[str] = []
    for w in words:
        if w not in out:
            out.append(w)
    return " ".join(out) if out else text


def clean_query(text: Any, *, max_chars: int = 300) -> str:
    """The first usable line of an LLM reply as a query: ``<think>`` blocks, code fences, JSON wrappers
    (``{"query": …}``), list markers, ``Query:`` prefixes and quotes removed; ``""`` when nothing is left or the
    line is longer than ``max_chars``."""
    lines = parse_lines(text)
    if not lines:
        return ""
    line = lines[0]
    return "" if len(line) > max_chars else line


def parse_lines(text: Any, *, limit: int | None = None) -> list[str]:
    """Lines of an LLM reply as a list of strings (sub-questions, queries); never raises.

    Accepts a string or a message (``.content``); removes ``<think>`` blocks and code fences; a JSON list of strings
    or an object with a list / string under ``questions``, ``sub_questions``, ``queries``, ``query`` is read as
    such; otherwise one item per non-empty line, with bullets, numbering (``1.``, ``(2)``), ``Question:``-style
    prefixes and surrounding quotes stripped.  Duplicates are dropped; at most ``limit`` items.
    """
    try:
        content = getattr(text, "content", text)
        if isinstance(content, list):
            content = "".join(x if isinstance(x, str) else str(x.get("text", "")) for x in content
                              if isinstance(x, (str, dict)))
        if not isinstance(content, str):
            return []
        body = strip_think(content)
        fence = re.search(r"```[a-zA-Z0-9_-]*\s*(.*?)\s*```", body, re.DOTALL)
        if fence:
            body = fence.group(1)
        items: list[str] | None = None
        stripped = body.strip()
        if stripped[:1] in "[{":
            try:
                data = json.loads(stripped)
                if isinstance(data, dict):
                    for key in ("questions", "sub_questions", "subquestions", "queries", "query", "question"):
                        if key in data:
                            data = data[key]
                            break
                if isinstance(data, str):
                    data = [data]
                if isinstance(data, list):
                    items = [str(x) for x in data if isinstance(x, (str, int, float))]
            except ValueError:
                items = None
        if items is None:
            items = body.splitlines()
        out: list[str] = []
        for raw in items:
            line = _PREFIX_RE.sub("", raw.strip()).strip().strip("\"'`“”「」*").strip()
            if line and line not in out:
                out.append(line)
        return out[:limit] if limit is not None else out
    except Exception:  # noqa: BLE001 - parsing a model's reply never raises
        return []
