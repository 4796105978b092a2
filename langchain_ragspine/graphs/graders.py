"""Graders: is a chunk relevant, is an answer supported by its context, is it useful — yes / no / unknown.

These are the reflection steps of Self-RAG (Asai et al., "Self-RAG: Learning to Retrieve, Generate, and Critique
through Self-Reflection", ICLR 2024: ISREL, ISSUP, ISUSE) and the retrieval evaluator of CRAG (Yan et al.,
"Corrective Retrieval Augmented Generation", 2024), asked of a chat model as binary questions the way LangGraph's
agentic-RAG tutorials do, or decided deterministically when there is no LLM.

* :func:`parse_binary` turns whatever a model returns — ``None``, ``""``, an ``AIMessage``, fenced JSON,
  ``<think>…</think>`` prefixes, ``{"score": "yes"}``, ``{"binary_score": "Yes"}``, ``{"score": true}``,
  はい / いいえ, prose that says "yes" or "no" — into ``"yes"``, ``"no"`` or ``"unknown"``, and never raises.
* :class:`LLMRelevanceGrader`, :class:`LLMSupportGrader`, :class:`LLMUsefulnessGrader` ask a ``BaseChatModel``;
  any exception becomes ``"unknown"``.  RESTRICTED chunks are never put in their prompts.
* :class:`LexicalGrader` decides without a model: relevance by the share of the question's content terms the chunk
  contains (:mod:`langchain_ragspine.stopwords`, the BM25 tokenizer), support by verbatim containment,
  usefulness by "not an I-don't-know".
* :class:`LLMBatchRelevanceGrader` grades every passage of a retrieval in ONE call (one numbered list in, one
  verdict per number out, read by :func:`parse_batch_relevance`); the per-document grader is asked only about the
  passages that reply left ungraded, so the common corrective path makes two model calls (grade, answer).
* :class:`Graders` bundles the checks the graphs use; :func:`make_graders` builds them for an LLM (with the
  lexical grader deciding whenever the LLM's verdict is unknown) or without one.  LLM grader calls carry the
  ``nostream`` tag, so LangGraph's ``stream_mode="messages"`` does not stream them.

How a graph treats a verdict (conservative: nothing unvetted reaches the answer): ``"unknown"`` that is left after
the lexical fallback counts as ``"no"`` for relevance, support and usefulness alike — a chunk is used only when
judged relevant, an answer is returned only when judged supported and useful; otherwise the graph retries within
its bound and then refuses.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableConfig

from langchain_ragspine.chains.answer import (
    format_context,
    is_dont_know,
    strip_citation_markers,
    strip_think,
)
from langchain_ragspine.document_compressors.restricted import drop_restricted, is_restricted
from langchain_ragspine.graphs.prompts import (
    BATCH_RELEVANCE_PROMPT,
    RELEVANCE_PROMPT,
    SUPPORT_PROMPT,
    USEFULNESS_PROMPT,
    GraphPrompts,
)
from langchain_ragspine.stopwords import content_terms
from langchain_ragspine.text.folding import normalize, normalize_spaces
from langchain_ragspine.text.sentences import line_sentences
from langchain_ragspine.tokenizers import Tokenizer, get_tokenizer

__all__ = [
    "DEFAULT_MIN_OVERLAP",
    "NOSTREAM_TAG",
    "Graders",
    "LLMBatchRelevanceGrader",
    "LLMRelevanceGrader",
    "LLMSupportGrader",
    "LLMUsefulnessGrader",
    "LexicalGrader",
    "Verdict",
    "make_graders",
    "parse_batch_relevance",
    "parse_binary",
]

Verdict = Literal["yes", "no", "unknown"]

#: Keys a structured grader answer may carry its verdict under (checked in this order, case-insensitively).
_VERDICT_KEYS = (
    "binary_score", "score", "answer", "verdict", "grade", "decision", "result", "relevant", "relevance",
    "supported", "useful", "label", "output", "value", "response", "content", "text",
)
_YES_WORDS = frozenset({"yes", "true", "relevant", "supported", "useful", "grounded", "correct"})
_NO_WORDS = frozenset({"no", "false", "irrelevant", "unsupported", "ungrounded", "incorrect", "useless"})
#: Answers that count only when they are the whole reply.
_WHOLE_ONLY: dict[str, Verdict] = {"y": "yes", "ok": "yes", "n": "no"}
_NEGATED_RE = re.compile(
    r"\b(?:not|isn't|isnt|is not|doesn't|does not|don't|do not)\s+(?:\w+\s+)?"
    r"(?:relevant|supported|useful|grounded|correct|answer|support|help|contain)\w*"
)
_YES_EXACT = frozenset({"はい", "是", "是的", "对", "有关", "相关", "関連あり"})
_NO_EXACT = frozenset({"いいえ", "否", "不是", "不", "不对", "无关", "不相关", "関連なし"})
_FENCE_RE = re.compile(r"```[a-zA-Z0-9_-]*\s*(.*?)\s*```", re.DOTALL)
_WORD_RE = re.compile(r"[a-z]+")
_LEADING_CJK_RE = re.compile(r"^(はい|いいえ|是的|不是|不相关|不对|相关|无关|是|否)(?:[\s、。,，.!！:：]|$)")
_MAX_DEPTH = 6


# -- parsing --------------------------------------------------------------------------------------------------------
def parse_binary(output: Any) -> Verdict:
    """``"yes"``, ``"no"`` or ``"unknown"`` from a grader's raw output; never raises.

    Accepted: ``None`` / ``""`` / anything unrecognisable → ``"unknown"``; ``bool``; ``1`` / ``0``; a string;
    an ``AIMessage`` (or any message, or an object with ``.content``/``.text``) and lists of content blocks; a dict
    or a pydantic model with a verdict under ``binary_score``, ``score``, ``answer``, ``verdict``, … (any case).
    Strings lose ``<think>…</think>`` blocks and code fences, are parsed as JSON when they are JSON (or contain a
    ``{…}`` object), are NFKC-normalised and lower-cased; then a leading はい/いいえ/是/否 decides, else the first
    English verdict word (``yes/true/relevant/supported/useful`` vs ``no/false/not/irrelevant/unsupported``): when
    both kinds occur, the one the text starts with wins, and otherwise the answer is ``"unknown"``.
    """
    try:
        return _parse(output, 0)
    except Exception:  # noqa: BLE001 - a grader never raises
        return "unknown"


def _parse(output: Any, depth: int) -> Verdict:
    if depth > _MAX_DEPTH or output is None:
        return "unknown"
    if isinstance(output, bool):
        return "yes" if output else "no"
    if isinstance(output, (int, float)):
        return "yes" if output == 1 else "no" if output == 0 else "unknown"
    if isinstance(output, str):
        return _parse_text(output, depth)
    if isinstance(output, BaseMessage):
        return _parse(output.content, depth + 1)
    if isinstance(output, Mapping):
        lowered = {str(k).strip().lower(): v for k, v in output.items()}
        for key in _VERDICT_KEYS:
            if key in lowered:
                return _parse(lowered[key], depth + 1)
        if lowered.get("type") == "text" and "text" in lowered:
            return _parse(lowered["text"], depth + 1)
        return "unknown"
    if isinstance(output, (list, tuple)):
        if len(output) == 1:
            return _parse(output[0], depth + 1)
        texts = [x if isinstance(x, str) else x.get("text") for x in output if isinstance(x, (str, Mapping))]
        joined = "".join(t for t in texts if isinstance(t, str))
        return _parse_text(joined, depth) if joined else "unknown"
    dump = getattr(output, "model_dump", None)
    if callable(dump):
        return _parse(dump(), depth + 1)
    for attr in ("content", "text"):
        value = getattr(output, attr, None)
        if isinstance(value, (str, list)):
            return _parse(value, depth + 1)
    return "unknown"


def _parse_text(text: str, depth: int) -> Verdict:
    text = strip_think(text)
    fenced = _FENCE_RE.search(text)
    if fenced:
        text = fenced.group(1)
    text = text.strip().strip("`").strip()
    if not text:
        return "unknown"
    if text[0] in "{[\"" or text in ("true", "false"):
        try:
            return _parse(json.loads(text), depth + 1)
        except (ValueError, RecursionError):
            pass
    if "{" in text and "}" in text:
        try:
            found = _parse(json.loads(text[text.index("{") : text.rindex("}") + 1]), depth + 1)
            if found != "unknown":
                return found
        except (ValueError, RecursionError):
            pass
    norm = normalize(text).strip().lower()
    bare = norm.strip(" \t\r\n。．.!！、,，:：\"'「」*_#()（）[]")
    if bare in _YES_EXACT:
        return "yes"
    if bare in _NO_EXACT:
        return "no"
    lead = _LEADING_CJK_RE.match(bare)
    if lead:
        return "yes" if lead.group(1) in _YES_EXACT else "no"
    if bare in _WHOLE_ONLY:
        return _WHOLE_ONLY[bare]
    words = _WORD_RE.findall(_NEGATED_RE.sub(" no ", norm))
    hits = [w for w in words if w in _YES_WORDS or w in _NO_WORDS]
    if not hits:
        return "unknown"
    kinds = {"yes" if w in _YES_WORDS else "no" for w in hits}
    if len(kinds) == 1:
        return kinds.pop()  # type: ignore[return-value]
    if words and words[0] == hits[0]:  # mixed: the verdict the text starts with wins
        return "yes" if hits[0] in _YES_WORDS else "no"
    return "unknown"


# -- LLM graders ----------------------------------------------------------------------------------------------------
#: The tag LangGraph's ``stream_mode="messages"`` skips: grader, rewrite and routing calls carry it, so a chat app
#: streams only the answer's tokens.
NOSTREAM_TAG = "nostream"
_NOSTREAM: RunnableConfig = {"tags": [NOSTREAM_TAG]}


class _LLMGrader:
    """Common part of the LLM graders: prompt → chat model → :func:`parse_binary`; errors become ``"unknown"``."""

    default_prompt: ChatPromptTemplate

    def __init__(self, llm: BaseChatModel, prompt: ChatPromptTemplate | None = None) -> None:
        if not isinstance(llm, BaseChatModel):
            raise TypeError(f"llm must be a BaseChatModel, got {llm!r}")
        self.llm = llm
        self.prompt = prompt or self.default_prompt

    def _ask(self, **variables: str) -> Verdict:
        try:
            return parse_binary(self.llm.invoke(self.prompt.format_messages(**variables), _NOSTREAM))
        except Exception:  # noqa: BLE001 - documented fallback: an LLM failure is an unknown verdict
            return "unknown"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({type(self.llm).__name__})"


class LLMRelevanceGrader(_LLMGrader):
    """``grader(question, document) -> Verdict``: is the passage relevant to the question?  RESTRICTED → ``"no"``
    without asking.  Prompt variables: ``question``, ``document`` (``prompt_text``, else ``page_content``)."""

    default_prompt = RELEVANCE_PROMPT

    def __call__(self, question: str, document: Document) -> Verdict:
        if is_restricted(document):
            return "no"
        text = document.metadata.get("prompt_text") or document.page_content
        return self._ask(question=question, document=str(text))


class LLMSupportGrader(_LLMGrader):
    """``grader(answer, documents) -> Verdict``: is every claim of the answer in the (numbered) passages?
    RESTRICTED passages are left out of the prompt.  Prompt variables: ``answer``, ``documents``."""

    default_prompt = SUPPORT_PROMPT

    def __call__(self, answer: str, documents: Sequence[Document]) -> Verdict:
        return self._ask(answer=answer, documents=format_context(drop_restricted(documents)))


class LLMUsefulnessGrader(_LLMGrader):
    """``grader(question, answer) -> Verdict``: does the answer resolve the question?  Variables: ``question``,
    ``answer``."""

    default_prompt = USEFULNESS_PROMPT

    def __call__(self, question: str, answer: str) -> Verdict:
        return self._ask(question=question, answer=answer)


# -- one-call (batch) relevance grading ------------------------------------------------------------------------------
_NUM_KEY_RE = re.compile(r"^\s*(?:\[|\(|#|passage|document|doc|chunk|id|no\.?|段落|文書|文章|パッセージ)?\s*(\d+)\s*[\])]?\s*$")
_ID_KEYS = ("id", "n", "index", "number", "num", "passage", "passage_id", "document", "doc", "doc_id", "chunk")
_LIST_KEYS = ("grades", "results", "scores", "passages", "documents", "verdicts", "ratings", "items", "answers")
_YES_LIST_KEYS = ("relevant", "relevant_passages", "relevant_ids", "relevant_documents", "yes")
_NO_LIST_KEYS = ("irrelevant", "not_relevant", "irrelevant_passages", "no")
_LINE_RE = re.compile(
    r"^\s*(?:[-*•]\s*)?(?:\*\*)?(?:passage|document|doc|chunk|段落|文書|文章|パッセージ|#)?\s*[\[(（【]?\s*(\d+)\s*"
    r"[\])）】]?\s*(?:\*\*)?\s*[.:：=\-–—、,，)）]?\s*(.+?)\s*$",
    re.IGNORECASE,
)
_PAIR_RE = re.compile(
    r"[\[(（]?(\d+)[\])）]?\s*[.:：=\-–—]\s*\"?(yes|no|true|false|relevant|irrelevant|はい|いいえ|是|否)\b",
    re.IGNORECASE,
)
_NUMBERS_LINE_RE = re.compile(
    r"^\s*(?:relevant(?:\s+passages?)?|yes|関連(?:あり)?|相关)\s*[:：=]\s*(none|なし|无|[\d\s,，、\[\]()#and&]+)\s*$",
    re.IGNORECASE,
)
_VERDICT_TOKEN_RE = re.compile(r"\b(yes|no|true|false)\b|(はい|いいえ)", re.IGNORECASE)


def _number(key: Any) -> int | None:
    if isinstance(key, bool):
        return None
    if isinstance(key, int):
        return key
    m = _NUM_KEY_RE.match(normalize(str(key)).lower()) if isinstance(key, str) else None
    return int(m.group(1)) if m else None


def _numbers(value: Any) -> list[int] | None:
    """A list of passage numbers (``[1, 3]``, ``"1, 3"``, ``"none"``), else ``None``."""
    if isinstance(value, str):
        text = normalize(value).strip().lower()
        if text in ("none", "なし", "无", ""):
            return []
        found = re.findall(r"\d+", text)
        return [int(x) for x in found] if found and not re.search(r"[a-z]{3,}", text.replace("and", "")) else None
    if isinstance(value, (list, tuple)) and all(_number(v) is not None for v in value):
        return [n for n in (_number(v) for v in value) if n is not None]
    return None


class _Votes:
    """Verdicts by passage number (1-based); a number given two different verdicts becomes ``"unknown"``."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.by_number: dict[int, Verdict] = {}

    def add(self, number: int | None, verdict: Verdict) -> None:
        if number is None or not 1 <= number <= self.n or verdict == "unknown":
            return
        old = self.by_number.get(number)
        self.by_number[number] = verdict if old in (None, verdict) else "unknown"

    def listed(self, yes: Sequence[int] | None, no: Sequence[int] | None) -> None:
        """``{"relevant": [1, 3]}``-style answers: listed numbers get the verdict, the others its opposite when
        only one kind of list was given."""
        yes_set = {x for x in yes or [] if 1 <= x <= self.n}
        no_set = {x for x in no or [] if 1 <= x <= self.n}
        for i in range(1, self.n + 1):
            if i in yes_set:
                self.add(i, "yes")
            elif i in no_set:
                self.add(i, "no")
            elif yes is not None and no is None:
                self.add(i, "no")
            elif no is not None and yes is None:
                self.add(i, "yes")

    def result(self) -> list[Verdict]:
        return [self.by_number.get(i, "unknown") for i in range(1, self.n + 1)]


def _batch_from_json(value: Any, votes: _Votes, depth: int = 0) -> None:
    if depth > _MAX_DEPTH:
        return
    if isinstance(value, Mapping):
        lowered = {str(k).strip().lower(): v for k, v in value.items()}
        yes = next((_numbers(lowered[k]) for k in _YES_LIST_KEYS if k in lowered and _numbers(lowered[k]) is not None), None)
        no = next((_numbers(lowered[k]) for k in _NO_LIST_KEYS if k in lowered and _numbers(lowered[k]) is not None), None)
        if yes is not None or no is not None:
            votes.listed(yes, no)
            return
        for key in _LIST_KEYS:
            if key in lowered and isinstance(lowered[key], (list, tuple, Mapping)):
                _batch_from_json(lowered[key], votes, depth + 1)
                return
        for key, v in value.items():
            votes.add(_number(key), parse_binary(v))
        return
    if isinstance(value, (list, tuple)):
        items = list(value)
        if items and all(isinstance(x, Mapping) for x in items):
            for item in items:
                low = {str(k).strip().lower(): v for k, v in item.items()}
                number = next((_number(low[k]) for k in _ID_KEYS if k in low and _number(low[k]) is not None), None)
                rest = {k: v for k, v in low.items() if k not in _ID_KEYS}
                if number is not None:
                    votes.add(number, parse_binary(rest))
                elif len(items) == votes.n:
                    votes.add(items.index(item) + 1, parse_binary(rest))
            return
        ints = [x for x in items if isinstance(x, int) and not isinstance(x, bool)]
        positional = len(items) == votes.n and (
            len(ints) < len(items) or any(x == 0 for x in ints) or all(x in (0, 1) for x in ints)
        )
        if positional:
            for i, x in enumerate(items, 1):
                votes.add(i, parse_binary(x))
        elif len(ints) == len(items):
            votes.listed(ints, None)


def _batch_from_text(text: str, votes: _Votes) -> None:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    for line in lines:
        m = _NUMBERS_LINE_RE.match(normalize(line))
        if m:
            votes.listed(_numbers(m.group(1)) or [], None)
            return
    pairs = _PAIR_RE.findall(normalize(text))
    if len(pairs) > 1 or (len(pairs) == 1 and len(lines) == 1 and votes.n == 1):
        for number, word in pairs:
            votes.add(int(number), parse_binary(word))
        return
    numbered = [m for m in (_LINE_RE.match(normalize(ln)) for ln in lines) if m]
    if numbered:
        for m in numbered:
            votes.add(int(m.group(1)), parse_binary(m.group(2)))
        return
    tokens = [(a or b).lower() for a, b in _VERDICT_TOKEN_RE.findall(text)]
    if len(tokens) == votes.n:  # a bare yes/no list in passage order
        for i, token in enumerate(tokens, 1):
            votes.add(i, parse_binary(token))


def parse_batch_relevance(output: Any, n: int) -> list[Verdict]:
    """``n`` verdicts (passage 1 first) from one model reply that grades ``n`` numbered passages; never raises.

    Read, in order: ``<think>`` blocks and code fences are dropped; JSON — an object keyed by number
    (``{"1": "yes", "[2]": "no"}``, values anything :func:`parse_binary` reads), a list of verdicts in passage
    order (``["yes", "no"]``, ``[1, 0]``), a list of objects with a number (``[{"id": 1, "relevant": true}]``), or
    the numbers of the relevant passages (``{"relevant": [1, 3]}``, ``[1, 3]``: the others are ``"no"``); else
    text — a ``Relevant: 1, 3`` line, ``1: yes, 2: no`` pairs, one numbered line per passage (``[1] yes``,
    ``Passage 2 - not relevant``, ``3. はい``), or a bare ``yes / no`` list with exactly ``n`` entries.  A number
    given two different verdicts, a number outside ``1..n`` and a passage the reply does not mention give
    ``"unknown"`` (the caller asks for those one by one).
    """
    if n <= 0:
        return []
    votes = _Votes(n)
    try:
        if isinstance(output, BaseMessage):
            output = output.content
        if isinstance(output, list):
            texts = [x if isinstance(x, str) else x.get("text") for x in output if isinstance(x, (str, Mapping))]
            output = "".join(t for t in texts if isinstance(t, str))
        if not isinstance(output, str):
            _batch_from_json(output, votes)
            return votes.result()
        text = strip_think(output)
        fenced = _FENCE_RE.search(text)
        if fenced:
            text = fenced.group(1)
        text = text.strip()
        for opener, closer in (("{", "}"), ("[", "]")):
            if opener in text and closer in text:
                try:
                    _batch_from_json(json.loads(text[text.index(opener) : text.rindex(closer) + 1]), votes)
                except (ValueError, RecursionError):
                    continue
                if votes.by_number:
                    return votes.result()
        _batch_from_text(text, votes)
    except Exception:  # noqa: BLE001 - a grader never raises
        return ["unknown"] * n
    return votes.result()


class LLMBatchRelevanceGrader:
    """``grader(question, documents) -> list[Verdict]``: every passage graded in ONE chat-model call.

    The passages are numbered ``[1]…[n]`` (:func:`~langchain_ragspine.chains.answer.format_context`:
    ``prompt_text``, else ``page_content``) in :data:`~langchain_ragspine.graphs.prompts.BATCH_RELEVANCE_PROMPT`
    (variables ``question``, ``documents``, ``n``) and the reply is read by :func:`parse_batch_relevance`.  A
    RESTRICTED document is ``"no"`` and never enters the prompt; a failed call gives ``"unknown"`` for all.
    :meth:`Graders.relevant_many` asks the per-document grader about every ``"unknown"`` left.
    """

    def __init__(self, llm: BaseChatModel, prompt: ChatPromptTemplate | None = None) -> None:
        if not isinstance(llm, BaseChatModel):
            raise TypeError(f"llm must be a BaseChatModel, got {llm!r}")
        self.llm = llm
        self.prompt = prompt or BATCH_RELEVANCE_PROMPT

    def __call__(self, question: str, documents: Sequence[Document]) -> list[Verdict]:
        verdicts: list[Verdict] = ["no" if is_restricted(d) else "unknown" for d in documents]
        open_at = [i for i, d in enumerate(documents) if not is_restricted(d)]
        if not open_at:
            return verdicts
        shown = [documents[i] for i in open_at]
        try:
            reply = self.llm.invoke(
                self.prompt.format_messages(question=question, documents=format_context(shown), n=str(len(shown))),
                _NOSTREAM,
            )
        except Exception:  # noqa: BLE001 - documented fallback: per-document grading
            return verdicts
        for i, verdict in zip(open_at, parse_batch_relevance(reply, len(shown)), strict=True):
            verdicts[i] = verdict
        return verdicts

    def __repr__(self) -> str:
        return f"LLMBatchRelevanceGrader({type(self.llm).__name__})"


# -- deterministic grader -------------------------------------------------------------------------------------------
#: Default (smoothed) share of the question's content terms a chunk must contain to count as relevant (see
#: LexicalGrader.overlap).
DEFAULT_MIN_OVERLAP = 0.55


class LexicalGrader:
    """Deterministic grader, no model: the three checks as methods.

    * :meth:`relevance` — ``"yes"`` when the chunk (``page_content`` plus ``prompt_text``) contains at least
      ``min_overlap`` (default :data:`DEFAULT_MIN_OVERLAP` = 0.55) of the question's distinct content terms, as
      the add-one-smoothed share of :meth:`overlap` (:func:`~langchain_ragspine.stopwords.content_terms` with
      ``tokenizer``, default ``"auto"``, the BM25 one: stop words, question words and kana-only tokens never
      count; a question with no content term matches nothing), or when one of its retrieval scores reaches its
      threshold in ``score_thresholds`` (e.g. ``{"rerank": 0.5}``; default none).  RESTRICTED → ``"no"``.
    * :meth:`support` — ``"yes"`` when every sentence of the answer (citation markers removed) occurs verbatim
      (whitespace-normalised) in one of the documents; an "I don't know" is supported.  Extractive answers are
      supported by construction; free LLM text usually is not, which is why an LLM run uses :class:`LLMSupportGrader`.
    * :meth:`usefulness` — ``"yes"`` unless the answer is empty, an "I don't know" or an "insufficient context".

    How the defaults were chosen (BM25 ``auto`` top 6, ParagraphTextSplitter 480/80, a fixed random 500-question
    sample of each set; answerable = the questions as asked, unanswerable = the same questions with their article
    filtered out; "kept" = a top-6 chunk of the gold article that holds the answer is graded relevant, "rejected" =
    every chunk of the unanswerable search is graded irrelevant).  Content terms with ``min_overlap`` 0.55 keep the
    gold chunk for 98.4 % of JSQuAD valid and 94.0 % of CMRC 2018 dev questions and reject 65 % / 61 % of the
    unanswerable ones; 0.5: 98.6 / 97.6 % kept, 49 / 40 % rejected; 0.6: 97.8 / 91.4 % kept, 75 / 73 % rejected.
    The grader before content terms (all tokens but English stop words, plain share, 0.5) kept 97.4 / 89.2 % and
    rejected 46 / 68 %: particles (の, は) matched every Japanese chunk while Chinese interrogative n-grams (什么,
    是哪) matched none.  End to end (``ragspine ask`` without an LLM), see ``benchmarks/RESULTS.md``, section
    ``extractive-answers``.  Token overlap is a weak answerability signal — it filters clearly off-topic
    chunks; an LLM grader does the rest.  BM25 score thresholds (40, 60, 80) changed answer containment by at most
    1.5 points while accepting up to 6 points more unanswerable questions, and raw BM25 scores depend on query
    length and corpus, so no score threshold is on by default; ``{"rerank": …}`` or ``{"vector": …}`` are the
    scores worth thresholding, for models whose scale you know.

    Raises:
        ValueError: ``min_overlap`` outside [0, 1]; an unknown tokenizer.
    """

    def __init__(
        self,
        *,
        tokenizer: str | Tokenizer = "auto",
        min_overlap: float = DEFAULT_MIN_OVERLAP,
        score_thresholds: Mapping[str, float] | None = None,
    ) -> None:
        if not 0.0 <= min_overlap <= 1.0:
            raise ValueError(f"min_overlap must be in [0, 1], got {min_overlap}")
        self.tokenize = get_tokenizer(tokenizer)
        self.min_overlap = min_overlap
        self.score_thresholds = dict(score_thresholds or {})

    def overlap(self, question: str, document: Document) -> float:
        """The add-one-smoothed share of the question's distinct content terms found in the chunk,
        ``(found + 1) / (terms + 1)``, in (0, 1]; 0.0 when the question has no content term ("What is it?",
        "どこですか": nothing to look for, so no chunk is relevant).  Content terms:
        :func:`~langchain_ragspine.stopwords.content_terms` (no stop words, question words or kana-only tokens).
        The smoothing keeps short questions from being all-or-nothing: one of two terms gives 0.67, two of four
        0.6, one of three 0.5."""
        q = content_terms(question or "", self.tokenize)
        if not q:
            return 0.0
        text = document.page_content
        extra = document.metadata.get("prompt_text")
        if isinstance(extra, str):
            text = text + "\n" + extra
        return (len(q & set(self.tokenize(text))) + 1) / (len(q) + 1)

    def relevance(self, question: str, document: Document) -> Verdict:
        """Relevance of ``document`` to ``question`` (see the class docstring)."""
        if is_restricted(document):
            return "no"
        scores = document.metadata.get("scores")
        if isinstance(scores, Mapping):
            for key, threshold in self.score_thresholds.items():
                value = scores.get(key)
                if isinstance(value, (int, float)) and value >= threshold:
                    return "yes"
        return "yes" if self.overlap(question, document) >= self.min_overlap else "no"

    def support(self, answer: str, documents: Sequence[Document]) -> Verdict:
        """Whether every answer sentence occurs verbatim in ``documents`` (see the class docstring)."""
        if is_dont_know(answer):
            return "yes"
        haystacks = []
        for doc in drop_restricted(documents):
            haystacks.append(normalize_spaces(doc.page_content))
            extra = doc.metadata.get("prompt_text")
            if isinstance(extra, str):
                haystacks.append(normalize_spaces(extra))
        answered = line_sentences(strip_citation_markers(answer), skip_headings=True, skip_code=True)
        sentences = [normalize_spaces(s) for s in answered]
        sentences = [s for s in sentences if s]
        if not sentences or not haystacks:
            return "no"
        return "yes" if all(any(s in h for h in haystacks) for s in sentences) else "no"

    def usefulness(self, question: str, answer: str) -> Verdict:
        """``"no"`` for an empty / "I don't know" / "insufficient context" answer, else ``"yes"``."""
        return "no" if is_dont_know(answer) else "yes"

    def __repr__(self) -> str:
        return f"LexicalGrader(min_overlap={self.min_overlap}, score_thresholds={self.score_thresholds})"


# -- bundle ---------------------------------------------------------------------------------------------------------
RelevanceCheck = Callable[[str, Document], Any]
SupportCheck = Callable[[str, Sequence[Document]], Any]
UsefulnessCheck = Callable[[str, str], Any]
BatchRelevanceCheck = Callable[[str, Sequence[Document]], Sequence[Any]]


def _with_fallback(primary: Callable[..., Any], fallback: Callable[..., Any] | None) -> Callable[..., Verdict]:
    def grade(*args: Any) -> Verdict:
        try:
            verdict = parse_binary(primary(*args))
        except Exception:  # noqa: BLE001 - a grader never raises
            verdict = "unknown"
        if verdict == "unknown" and fallback is not None:
            try:
                verdict = parse_binary(fallback(*args))
            except Exception:  # noqa: BLE001
                verdict = "unknown"
        return verdict

    return grade


@dataclass(frozen=True)
class Graders:
    """The three checks a graph asks, as callables returning a verdict (anything :func:`parse_binary` reads).

    Attributes:
        relevance: ``(question, document) -> verdict``.
        support: ``(answer, documents) -> verdict`` — is the answer grounded in the documents it was given?
        usefulness: ``(question, answer) -> verdict`` — does the answer resolve the question?
        relevance_batch: optional ``(question, documents) -> [verdict, …]`` grading every document in one call
            (:class:`LLMBatchRelevanceGrader`); ``None`` (default): one ``relevance`` call per document.

    Use :meth:`constant` to stub them (tests, demos) and :func:`make_graders` for the usual ones.  The graphs call
    them through :meth:`relevant`, :meth:`supported` and :meth:`useful`, which never raise and return a
    :data:`Verdict`.
    """

    relevance: RelevanceCheck
    support: SupportCheck
    usefulness: UsefulnessCheck
    relevance_batch: BatchRelevanceCheck | None = None

    @classmethod
    def constant(cls, verdict: Any) -> Graders:
        """Graders that always answer ``verdict`` (e.g. ``"no"``: every graph must then refuse within its bound)."""
        return cls(relevance=lambda q, d: verdict, support=lambda a, ds: verdict, usefulness=lambda q, a: verdict)

    @classmethod
    def lexical(cls, grader: LexicalGrader | None = None) -> Graders:
        """The deterministic graders of ``grader`` (default ``LexicalGrader()``)."""
        g = grader or LexicalGrader()
        return cls(relevance=g.relevance, support=g.support, usefulness=g.usefulness)

    def relevant(self, question: str, document: Document) -> Verdict:
        """The relevance verdict; a RESTRICTED document is ``"no"`` without asking."""
        if is_restricted(document):
            return "no"
        return _with_fallback(self.relevance, None)(question, document)

    def relevant_many(self, question: str, documents: Sequence[Document]) -> list[Verdict]:
        """One relevance verdict per document, in order; RESTRICTED documents are ``"no"`` and never asked about.

        With ``relevance_batch``: one batch call for all open documents, then :meth:`relevant` (the per-document
        check, with its own fallbacks) only for those the batch answer left ``"unknown"`` — all of them when the
        batch answer was unusable (or raised), none when it graded every passage.  Without it: :meth:`relevant`
        for each document.  Never raises.
        """
        docs = list(documents)
        open_docs = [d for d in docs if not is_restricted(d)]
        batch: list[Verdict] = ["unknown"] * len(open_docs)
        if self.relevance_batch is not None and open_docs:
            try:
                raw = list(self.relevance_batch(question, open_docs))
                if len(raw) == len(open_docs):
                    batch = [parse_binary(v) for v in raw]
            except Exception:  # noqa: BLE001 - documented fallback: per-document grading
                pass
        verdicts = iter(v if v != "unknown" else self.relevant(question, d) for d, v in zip(open_docs, batch, strict=True))
        return ["no" if is_restricted(d) else next(verdicts) for d in docs]

    def supported(self, answer: str, documents: Sequence[Document]) -> Verdict:
        """The support verdict, over the non-RESTRICTED ``documents``."""
        return _with_fallback(self.support, None)(answer, drop_restricted(documents))

    def useful(self, question: str, answer: str) -> Verdict:
        """The usefulness verdict."""
        return _with_fallback(self.usefulness, None)(question, answer)


def make_graders(
    llm: BaseChatModel | None = None,
    *,
    lexical: LexicalGrader | None = None,
    tokenizer: str | Tokenizer = "auto",
    prompts: GraphPrompts | None = None,
    batch: bool = True,
) -> Graders:
    """The graders a graph uses by default.

    Without ``llm``: :class:`LexicalGrader` (``lexical``, default ``LexicalGrader(tokenizer=tokenizer)``); no model
    call, ever.  With an ``llm``: relevance of all passages of a retrieval in one call
    (:class:`LLMBatchRelevanceGrader`, unless ``batch=False``) with the per-document :class:`LLMRelevanceGrader`
    for passages the batch reply left ungraded, and the support and usefulness graders — each falling back to
    the lexical check when its verdict is ``"unknown"`` (a failed call, an unparsable reply), the documented
    fallback for LLM failures.  ``prompts`` (default :class:`~langchain_ragspine.graphs.prompts.GraphPrompts`)
    supplies the prompts.
    """
    lex = lexical or LexicalGrader(tokenizer=tokenizer)
    if llm is None:
        return Graders.lexical(lex)
    p = prompts or GraphPrompts()
    return Graders(
        relevance=_with_fallback(LLMRelevanceGrader(llm, p.relevance), lex.relevance),
        support=_with_fallback(LLMSupportGrader(llm, p.support), lex.support),
        usefulness=_with_fallback(LLMUsefulnessGrader(llm, p.usefulness), lex.usefulness),
        relevance_batch=LLMBatchRelevanceGrader(llm, p.batch_relevance) if batch else None,
    )
