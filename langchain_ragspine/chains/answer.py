"""Answer generation with numbered citations, and an extractive answer when there is no LLM.

The context is "stuffed" into one prompt as numbered passages (the "stuff" strategy of LangChain's
``create_stuff_documents_chain``) and the model is told to cite them as ``[n]``, the convention of attributed
question answering (Gao et al., "Enabling Large Language Models to Generate Text with Citations", EMNLP 2023 —
ALCE).  The model is also told to say "I don't know" in the question's language when the passages do not support
an answer.  Passages may be put best-at-both-ends (``lost_in_the_middle=True``; Liu et al., "Lost in the Middle",
TACL 2024); numbering always follows the order the model sees, so every citation maps back to the chunk it names.

Citations always resolve.  Markers are read in the forms models write (``[1]``, ``[1, 2]``, ``[1][2]``, ``[1-3]``,
``[1–3]``, ``［１］``, ``【1】``) and rewritten in one form, ``[1, 2, 3]``; a number that names no passage is
removed from the text and reported in ``invalid_citations``.  Small models often ignore the instruction to cite:
an answer without a valid marker is cited by attribution — each sentence to the passage that supports it best
(lexical overlap of content terms, :func:`attribute_citations`), marked ``attributed`` — and a sentence no passage
supports is listed in ``unsupported_sentences``.  An answer nothing supports is never returned as a normal one
(see ``uncited`` in :func:`make_answer_chain`).

Without an LLM the chain answers extractively: it picks the sentences of the given chunks that share the most
(IDF-weighted) content terms with the question — the sentence-selection baseline of extractive QA and of extractive
summarisation (Luhn, "The Automatic Creation of Literature Abstracts", IBM J. R&D 1958) — and returns them verbatim,
each followed by its citation.  Question words and stop words are never evidence
(:mod:`langchain_ragspine.stopwords`).  The RESTRICTED gate runs on the documents first, on every path.

Output of every path: ``{"answer": str, "citations": [{"n", "chunk_id", "doc_id", "title", "source_locator",
"attributed"}], "mode": "llm" | "extractive" | "extractive_fallback", "invalid_citations": [int],
"unsupported_sentences": [str], "warning": str | None}``.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal, NamedTuple, cast

from langchain_core.callbacks import AsyncCallbackManagerForChainRun, CallbackManagerForChainRun
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda, RunnablePassthrough
from langchain_core.runnables.config import patch_config
from typing_extensions import TypedDict  # pydantic (graph JSON schemas) needs it on Python < 3.12

from langchain_ragspine.arguments import DEFAULT_K, check_int, renamed_keywords
from langchain_ragspine.document_compressors.reorder import lost_in_the_middle_order
from langchain_ragspine.document_compressors.restricted import drop_restricted
from langchain_ragspine.stopwords import content_terms
from langchain_ragspine.text import CJK_CHAR_RE, normalize
from langchain_ragspine.text.sentences import line_sentence_spans, line_sentences
from langchain_ragspine.tokenizers import Tokenizer, get_tokenizer

__all__ = [
    "ANSWER_HISTORY_NOTE",
    "ANSWER_SYSTEM_PROMPT",
    "Citation",
    "DEFAULT_MIN_SUPPORT",
    "DONT_KNOW",
    "INSUFFICIENT_CONTEXT",
    "MAX_CITATION_RANGE",
    "NO_RETRIEVAL_NOTE",
    "SentenceSupport",
    "UNCITED_WARNING",
    "attribute_citations",
    "citation_for",
    "cite_llm_answer",
    "detect_language",
    "dont_know",
    "extractive_answer",
    "format_citation_marker",
    "format_context",
    "insufficient_context",
    "is_dont_know",
    "make_answer_chain",
    "normalize_citations",
    "parse_citation_numbers",
    "prepare_context",
    "prompt_text",
    "rewrite_citation_markers",
    "sentence_supports",
    "strip_citation_markers",
    "strip_think",
]

logger = logging.getLogger(__name__)

Language = Literal["ja", "zh", "en"]

#: The "I don't know" answer, by question language.
DONT_KNOW: dict[str, str] = {"ja": "わかりません", "zh": "我不知道", "en": "I don't know"}
#: The refusal the graphs give when no retrieved context supports an answer (it always names "insufficient context").
INSUFFICIENT_CONTEXT: dict[str, str] = {
    "ja": "情報が不足しています（insufficient context）：検索した文書からはこの質問に答えられません。",
    "zh": "上下文不足（insufficient context）：检索到的文档无法回答这个问题。",
    "en": "Insufficient context: the retrieved documents do not support an answer to this question.",
}
#: Appended to replies given without retrieval (greetings, chit-chat).
NO_RETRIEVAL_NOTE: dict[str, str] = {
    "ja": "（この返答には文書を使用していません。）",
    "zh": "（本回复未使用任何文档。）",
    "en": "(No documents were used for this reply.)",
}
_DONT_KNOW_FORMS = frozenset(
    {"", "i don't know", "i do not know", "i dont know", "unknown", "わかりません", "分かりません", "わからない",
     "我不知道", "不知道"}
)
_LANGUAGE_NAMES = {"ja": "Japanese", "zh": "Chinese", "en": "English"}

_KANA_RE = re.compile("[\u3040-\u30ff\u31f0-\u31ff]")
_HANGUL_RE = re.compile("[\uac00-\ud7af\u1100-\u11ff\u3130-\u318f]")
_THINK_RE = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
# A citation marker: one number or a range in brackets, or a list of them — [1]  [1, 2]  [1-3]  [1–3]  ［１］  【1】.
# Runs of adjacent markers ([1][2], [1] [2]) are read as one (see _MARKER_RUN_RE).
_OPEN, _CLOSE = r"\[［【", r"\]］】"
_NUM = "[0-9０-９]{1,4}"
_RANGE_DASH = "\\-‐‑‒–—―~〜～－"
_LIST_SEP = ",，、;；"
_ITEM = rf"{_NUM}(?:\s*[{_RANGE_DASH}]\s*{_NUM})?"
_MARKER_BODY = rf"{_ITEM}(?:\s*[{_LIST_SEP}]\s*{_ITEM})*"
_MARKER_RE = re.compile(rf"[{_OPEN}]\s*({_MARKER_BODY})\s*[{_CLOSE}]")
_MARKER_RUN_RE = re.compile(rf"[{_OPEN}]\s*{_MARKER_BODY}\s*[{_CLOSE}](?:[ \t]*[{_OPEN}]\s*{_MARKER_BODY}\s*[{_CLOSE}])*")
_SPACED_MARKER_RUN_RE = re.compile(rf"([ \t]*)({_MARKER_RUN_RE.pattern})")
_CLOSING_PUNCT = frozenset("。．.,，、!！?？:：;；)）」』")
_ITEM_RE = re.compile(rf"({_NUM})(?:\s*[{_RANGE_DASH}]\s*({_NUM}))?")
#: A range longer than this is not expanded: ``[1-5000]`` reads as the two numbers 1 and 5000.
MAX_CITATION_RANGE = 100


class Citation(TypedDict):
    """One cited passage: ``n`` is its number in the context the model was given (from 1); ``attributed`` is true
    when the package attributed the citation to an answer sentence (the model wrote no valid marker), false when
    the model wrote it or the sentence is the passage's own (extractive answers)."""

    n: int
    chunk_id: str | None
    doc_id: str | None
    title: str | None
    source_locator: str | None
    attributed: bool


# -- language -------------------------------------------------------------------------------------------------------
def detect_language(text: str) -> Language:
    """``"ja"`` when ``text`` has kana, ``"zh"`` when it has CJK ideographs but no kana, else ``"en"``.

    A script check, not a language model: it only chooses the language of fixed replies ("I don't know",
    "insufficient context").  Korean and other scripts get the English replies.
    """
    if not isinstance(text, str):
        return "en"
    if _KANA_RE.search(text):
        return "ja"
    if CJK_CHAR_RE.search(_HANGUL_RE.sub("", text)):
        return "zh"
    return "en"


def dont_know(question: str) -> str:
    """"I don't know" in the language of ``question`` (わかりません / 我不知道 / I don't know)."""
    return DONT_KNOW[detect_language(question)]


def insufficient_context(question: str) -> str:
    """The explicit refusal ("insufficient context") in the language of ``question``."""
    return INSUFFICIENT_CONTEXT[detect_language(question)]


def is_dont_know(answer: Any) -> bool:
    """Whether ``answer`` is empty, an "I don't know" (any of :data:`DONT_KNOW`, ignoring case, punctuation and
    citation markers) or an "insufficient context" refusal."""
    if not isinstance(answer, str):
        return True
    text = normalize(_MARKER_RUN_RE.sub("", strip_think(answer))).lower().replace("’", "'")
    if "insufficient context" in text:
        return True
    text = re.sub(r"\s+", " ", text).strip(" \t\n。．.!！?？、,，\"“”「」()（）")
    return text in _DONT_KNOW_FORMS


def strip_think(text: str) -> str:
    """``text`` without ``<think>…</think>`` blocks (reasoning models); an unclosed ``<think>`` drops the rest."""
    if not isinstance(text, str):
        return ""
    out = _THINK_RE.sub("", text)
    lower = out.lower()
    if "<think>" in lower:
        out = out[: lower.index("<think>")]
    return out.replace("</think>", "").strip()


# -- context --------------------------------------------------------------------------------------------------------
def prompt_text(doc: Document) -> str:
    """The text of ``doc`` a model is shown: ``metadata["prompt_text"]`` (a compressed passage), else
    ``metadata["window_text"]`` (a sentence's window), else ``page_content``."""
    for key in ("prompt_text", "window_text"):  # a compressed passage, else a sentence's window, else the chunk
        text = doc.metadata.get(key)
        if isinstance(text, str) and text.strip():
            return text
    return doc.page_content


def format_context(documents: Sequence[Document]) -> str:
    """The numbered context block the model sees, one passage per document, numbered from 1 in the given order::

        [1] {title} ({source_locator})
        {prompt_text, else window_text, else page_content}

    ``title`` falls back to ``doc_id``, then ``"untitled"``; the parenthesis is left out without a locator.
    Passages are separated by a blank line.  RESTRICTED documents are dropped first (the gate), so numbering is
    over the documents that remain — call :func:`prepare_context` first to number exactly what you pass.
    """
    blocks = []
    for n, doc in enumerate(drop_restricted(documents), 1):
        md = doc.metadata
        title = md.get("title") or md.get("doc_id") or "untitled"
        locator = md.get("source_locator")
        head = f"[{n}] {title}" + (f" ({locator})" if locator else "")
        blocks.append(f"{head}\n{prompt_text(doc).strip()}")
    return "\n\n".join(blocks)


@renamed_keywords("max_docs")
def prepare_context(
    documents: Sequence[Document], *, k: int | None = DEFAULT_K, lost_in_the_middle: bool = False
) -> list[Document]:
    """The passages a model is shown, in the order it sees them: RESTRICTED ones dropped (the gate), the first
    ``k`` kept (default 6, :data:`~langchain_ragspine.arguments.DEFAULT_K`; ``None``: all), then reordered
    best-at-both-ends when ``lost_in_the_middle`` is true.  ``max_docs`` is the old name of ``k`` (deprecated: a
    ``DeprecationWarning``; removed in the next release).

    Raises:
        ValueError: ``k < 1``.  TypeError: ``k`` is neither an int nor ``None``; ``max_docs`` and ``k`` with
            different values.
    """
    check_int(k, "k", allow_none=True)
    docs = drop_restricted(documents)
    if k is not None:
        docs = docs[:k]
    return lost_in_the_middle_order(docs) if lost_in_the_middle else docs


def citation_for(n: int, doc: Document, *, attributed: bool = False) -> Citation:
    """The citation record of passage ``n`` (``chunk_id`` falls back to ``Document.id``); ``attributed`` marks a
    citation the package attributed to an answer sentence rather than one the model wrote."""
    md = doc.metadata
    chunk_id = md.get("chunk_id") or doc.id
    return {
        "n": n,
        "chunk_id": None if chunk_id is None else str(chunk_id),
        "doc_id": None if md.get("doc_id") is None else str(md.get("doc_id")),
        "title": md.get("title"),
        "source_locator": md.get("source_locator"),
        "attributed": attributed,
    }


# -- citation markers -----------------------------------------------------------------------------------------------
def _marker_numbers(group: str) -> list[int]:
    """The numbers of one marker body (``"1, 3-5"`` → ``[1, 3, 4, 5]``); ranges of more than
    :data:`MAX_CITATION_RANGE` numbers give their two ends, a reversed range counts down."""
    out: list[int] = []
    for m in _ITEM_RE.finditer(group):
        a = int(normalize(m.group(1)))
        if m.group(2) is None:
            out.append(a)
            continue
        b = int(normalize(m.group(2)))
        if abs(b - a) >= MAX_CITATION_RANGE:
            out.extend((a, b))
        else:
            out.extend(range(a, b + 1) if a <= b else range(a, b - 1, -1))
    return out


def _run_numbers(run: str) -> list[int]:
    """The numbers of a run of adjacent markers, in order, without repeats."""
    out: list[int] = []
    for m in _MARKER_RE.finditer(run):
        for n in _marker_numbers(m.group(1)):
            if n not in out:
                out.append(n)
    return out


def format_citation_marker(numbers: Sequence[int]) -> str:
    """The one marker form the package writes: ``[1]``, ``[1, 2, 3]`` (``""`` for no number)."""
    return "[" + ", ".join(str(n) for n in numbers) + "]" if numbers else ""


def parse_citation_numbers(text: str) -> list[int]:
    """The citation numbers in ``text``, in order of first use, without repeats.

    Markers are read in the forms models write: ``[1]``, ``[1, 2]`` / ``[1，2]`` / ``[1、2]``, ``[1][2]``,
    ranges ``[1-3]`` / ``[1–3]`` (any dash, ``~``, ``〜``), full-width brackets and digits (``［１］``, ``【1】``).
    A range expands (``[1-3]`` → 1, 2, 3; at most :data:`MAX_CITATION_RANGE` numbers).  No range check here: see
    :func:`normalize_citations`.
    """
    seen: list[int] = []
    for m in _MARKER_RE.finditer(text or ""):
        for n in _marker_numbers(m.group(1)):
            if n not in seen:
                seen.append(n)
    return seen


def rewrite_citation_markers(text: str, renumber: Callable[[list[int]], Sequence[int]]) -> str:
    """``text`` with every run of adjacent citation markers (``[1][2]``, ``[1-3]``, ``［１］``) replaced by one
    marker in the form of :func:`format_citation_marker` holding ``renumber(numbers)`` (repeats dropped); a marker
    left without numbers is removed with the spaces before it (``"Paris [9]."`` → ``"Paris."``).  Nothing else of
    the text changes, apart from surrounding whitespace being stripped."""

    def repl(m: re.Match[str]) -> str:
        kept: list[int] = []
        for n in renumber(_run_numbers(m.group(2))):
            if n not in kept:
                kept.append(n)
        if kept:
            return m.group(1) + format_citation_marker(kept)
        following = source[m.end() : m.end() + 1]
        return "" if not following or following in _CLOSING_PUNCT or following.isspace() else m.group(1)

    source = text or ""
    return _SPACED_MARKER_RUN_RE.sub(repl, source).strip()


def strip_citation_markers(text: str) -> str:
    """``text`` without citation markers (each run of markers becomes a line break, so sentences stay apart)."""
    return _MARKER_RUN_RE.sub("\n", text or "")


def normalize_citations(text: str, n_passages: int) -> tuple[str, list[int], list[int]]:
    """Parse, expand and range-check the citation markers of ``text`` against a context of ``n_passages``.

    Returns ``(text, cited, invalid)``: ``text`` with every run of markers rewritten as one ``[a, b, …]`` marker of
    the numbers that name a passage (``1 … n_passages``) — ``[1-3]`` → ``[1, 2, 3]``, ``[1][2]`` → ``[1, 2]``,
    ``［２］`` → ``[2]`` — and markers without such a number removed; ``cited`` the valid numbers in order of first
    use; ``invalid`` the numbers that name no passage, in order of first use (they never stay in the text).
    """
    valid = range(1, max(n_passages, 0) + 1)
    invalid: list[int] = []

    def keep(numbers: list[int]) -> list[int]:
        invalid.extend(n for n in numbers if n not in valid and n not in invalid)
        return [n for n in numbers if n in valid]

    out = rewrite_citation_markers(text, keep)
    return out, parse_citation_numbers(out), invalid


def _idf(terms: set[str], token_sets: Sequence[set[str]]) -> dict[str, float]:
    """BM25's IDF of each term over ``token_sets``, ``log(1 + (N - df + 0.5) / (df + 0.5))`` (always > 0)."""
    n = len(token_sets)
    return {t: math.log(1.0 + (n - (df := sum(1 for s in token_sets if t in s)) + 0.5) / (df + 0.5)) for t in terms}


# -- extractive answer ----------------------------------------------------------------------------------------------
def extractive_answer(
    question: str,
    documents: Sequence[Document],
    *,
    tokenizer: str | Tokenizer = "auto",
    max_sentences: int = 3,
    min_coverage: float = 0.2,
    relative_cutoff: float = 0.6,
    search_question: str | None = None,
) -> dict[str, Any]:
    """An answer made of the given chunks' own sentences, each followed by its citation ``[n]``.

    ``documents`` are numbered from 1 in the given order (pass what :func:`prepare_context` returns).  The evidence
    is the question's content terms (:func:`~langchain_ragspine.stopwords.content_terms` with ``tokenizer``,
    default ``"auto"``, the BM25 one): question words, stop words and Japanese kana-only tokens never count.  Every
    sentence of every (non-RESTRICTED) chunk that contains at least one content term itself is a candidate; a
    sentence without one is never used.  A candidate is scored by the IDF-weighted share of the question's content
    terms found in the sentence *or in its document's title* (``metadata["title"]``): a sentence is read in the
    context of the article it belongs to — "The engine is bm25s." under the title "BM25 ranking … why the engine is
    bm25s" is about BM25, and the sentences of a CMRC or JSQuAD article name its subject by a pronoun or not at all
    (the title-with-passage input of dense passage retrieval, Karpukhin et al., EMNLP 2020).  IDF is BM25's, over
    the candidate sentences (the title does not count towards document frequency), so terms every sentence shares
    weigh little and a question term no sentence and no title holds weighs most.  The best sentence is taken, then
    up to ``max_sentences - 1`` more whose score is at least ``relative_cutoff`` × the best (default 0.6); repeated
    text (overlapping chunks) is skipped.  When the best sentence covers less than ``min_coverage`` (default 0.2)
    of the question, or the question has no content term, the answer is "I don't know" in the question's language
    with no citations.  See ``benchmarks/RESULTS.md`` (section ``extractive-answers``) for how often the answer
    holds a gold answer on the shared sets, and ``docs/answer-graphs.md`` for the rules measured against this one.
    ``search_question`` (default ``None``: the question) is the text whose content terms are looked for instead —
    a chat follow-up's standalone question ("それはなぜですか？ 日本 梅雨 ない"); "I don't know" still comes in the
    language of ``question``.

    Returns:
        ``{"answer": str, "citations": list[Citation], "mode": "extractive", "invalid_citations": [],
        "unsupported_sentences": [], "warning": None}``, citations in order of first use (``attributed`` false:
        each cited sentence is a verbatim sentence of its chunk).

    Raises:
        ValueError: ``max_sentences < 1``.  TypeError: ``max_sentences`` is not an int.
    """
    check_int(max_sentences, "max_sentences")
    docs = drop_restricted(documents)
    tokenize = get_tokenizer(tokenizer)
    q_terms = content_terms((question if search_question is None else search_question) or "", tokenize)
    candidates: list[tuple[int, int, str, set[str]]] = []  # (n, position, sentence, tokens)
    titles: dict[int, set[str]] = {}  # n -> the question's content terms in the document's title
    for n, doc in enumerate(docs, 1):
        title = doc.metadata.get("title")
        titles[n] = q_terms & set(tokenize(title)) if isinstance(title, str) else set()
        for i, sentence in enumerate(line_sentences(doc.page_content, skip_headings=True, skip_code=True)):
            candidates.append((n, i, sentence, set(tokenize(sentence))))
    nothing = _result(dont_know(question), [], "extractive")
    if not q_terms or not candidates:
        return nothing
    weight = _idf(q_terms, [c[3] for c in candidates])
    total = sum(weight.values())
    scored = sorted(
        ((sum(weight[t] for t in own | titles[n]) / total, n, i, s)
         for n, i, s, toks in candidates if (own := q_terms & toks)),
        key=lambda x: (-x[0], x[1], x[2]),
    )
    if not scored or scored[0][0] < min_coverage:
        return nothing
    best = scored[0][0]
    chosen: list[tuple[str, int]] = []
    for score, n, _i, sentence in scored:
        if len(chosen) >= max_sentences or score < best * relative_cutoff:
            break
        if any(sentence in prev or prev in sentence for prev, _ in chosen):
            continue
        chosen.append((sentence, n))
    cited: list[int] = []
    for _, n in chosen:
        if n not in cited:
            cited.append(n)
    answer = "\n".join(f"{sentence} [{n}]" for sentence, n in chosen)
    return _result(answer, [citation_for(n, docs[n - 1]) for n in cited], "extractive")


def _result(
    answer: str,
    citations: list[Citation],
    mode: str,
    *,
    invalid: list[int] | None = None,
    unsupported: list[str] | None = None,
    warning: str | None = None,
) -> dict[str, Any]:
    return {
        "answer": answer,
        "citations": citations,
        "mode": mode,
        "invalid_citations": list(invalid or []),
        "unsupported_sentences": list(unsupported or []),
        "warning": warning,
    }


# -- attribution ----------------------------------------------------------------------------------------------------
#: Default share of an answer sentence's (IDF-weighted) content terms a passage must contain to support it.
DEFAULT_MIN_SUPPORT = 0.5

#: Words answers use to talk about the context rather than the topic ("according to the passage", "答案是").
_ANSWER_BOILERPLATE = frozenset(
    "according answer answers passage passages context contexts text document documents source sources mentioned "
    "mentions states stated provided information based".split()
)
_ANSWER_BOILERPLATE_CJK = ("根据", "答案", "文中", "文章", "上下文", "提到", "によると", "によれば", "文書", "本文", "回答")


class SentenceSupport(NamedTuple):
    """One answer sentence and how much each passage supports it (see :func:`sentence_supports`)."""

    start: int
    end: int
    sentence: str
    support: list[float]


def sentence_supports(
    text: str, documents: Sequence[Document], *, tokenizer: str | Tokenizer = "auto"
) -> list[SentenceSupport]:
    """How much each passage supports each sentence of ``text``: the lexical support behind
    :func:`attribute_citations` and the offline faithfulness of :mod:`langchain_ragspine.evaluation.answers`.

    ``sentence_supports(answer, docs)[0].support[n - 1]`` is how much passage ``n`` supports the answer's first
    sentence (1.0: the passage holds every content term of it).  ``documents`` are numbered from 1 in the order given, after the RESTRICTED gate
    (:func:`~langchain_ragspine.document_compressors.restricted.drop_restricted`), so ``support[n - 1]`` is passage
    ``n``'s.  A sentence's support by a passage is the share of its content terms
    (:func:`~langchain_ragspine.stopwords.content_terms`; character unigrams and bigrams for CJK text) that the
    passage's text (``prompt_text``, else ``window_text``, else ``page_content``: what a model read) contains, each
    term weighted by its BM25 IDF over the passages, so a term no passage has weighs most; words that talk about the
    context ("according to the passage", 根据文章) are not counted.  Sentences are split as
    :func:`~langchain_ragspine.text.sentences.line_sentence_spans` splits them (headings skipped); a sentence with no
    content term ("Yes.") is left out.

    Returns:
        One :class:`SentenceSupport` ``(start, end, sentence, support)`` per sentence with a content term, in text
        order: ``text[start:end] == sentence``; ``support`` has one value in [0, 1] per passage (empty without
        passages).
    """
    docs = drop_restricted(documents)
    tokenize = get_tokenizer(tokenizer)
    passages = [set(tokenize(prompt_text(d))) for d in docs]
    boilerplate = _ANSWER_BOILERPLATE | {t for w in _ANSWER_BOILERPLATE_CJK for t in tokenize(w)}
    out: list[SentenceSupport] = []
    for s, e in line_sentence_spans(text, skip_headings=True):
        sentence = text[s:e]
        terms = content_terms(sentence, tokenize) - boilerplate
        if not terms:
            continue
        weight = _idf(terms, passages)
        total = sum(weight.values())
        out.append(SentenceSupport(s, e, sentence, [sum(weight[t] for t in terms & p) / total for p in passages]))
    return out


def attribute_citations(
    answer: str,
    documents: Sequence[Document],
    *,
    tokenizer: str | Tokenizer = "auto",
    min_support: float = DEFAULT_MIN_SUPPORT,
) -> dict[str, Any]:
    """Cite an answer that carries no citation markers: each sentence gets the passage that supports it best.

    ``documents`` are the passages the answer was written from, numbered from 1 in this order (the context shown
    to the model); RESTRICTED ones are never cited (they are dropped first, so pass the gated list you numbered).
    A sentence is supported by a passage in the share of its content terms
    (:func:`~langchain_ragspine.stopwords.content_terms` — for CJK text these are character unigrams and bigrams,
    so the check is character n-gram overlap) that the passage's text (``prompt_text``, else ``page_content``: what
    the model read) contains, each term weighted by its IDF over the passages — a term of the sentence that no
    passage has weighs most, so a claim from outside the context lowers the support.  Words that talk about the
    context ("according to the passage", 根据文章) are not counted.  The best passage (lowest number on a tie)
    is cited when its support reaches ``min_support`` (default :data:`DEFAULT_MIN_SUPPORT` = 0.5): ``[n]`` is
    written after the sentence, so the model's words stay verbatim — a quoted title, a closing bracket or the final
    punctuation is never split (``"… tall.[2]"``, ``"…です。[1]"``, ``"《樱花大战系列》[1]"``; ``" [n]"`` after a
    sentence that ends in a letter or digit).  Sentences with no content term ("Yes.") are left as they are.  This is
    post-hoc attribution by lexical overlap (cf. Gao et al., "RARR: Researching and Revising What Language Models
    Say", ACL 2023, and ALCE's citation recall, EMNLP 2023), not an entailment check.

    Returns:
        ``{"answer": str (with the markers), "citations": list[Citation] (``attributed`` true, order of first use),
        "unsupported_sentences": list[str] (sentences no passage supports, verbatim)}``.

    Raises:
        ValueError: ``min_support`` outside [0, 1].
    """
    if not 0.0 <= min_support <= 1.0:
        raise ValueError(f"min_support must be in [0, 1], got {min_support}")
    docs = drop_restricted(documents)
    pieces: list[str] = []
    cited: list[int] = []
    unsupported: list[str] = []
    pos = 0
    for item in sentence_supports(answer, docs, tokenizer=tokenizer):
        support = item.support
        best = max(range(len(support)), key=lambda i: (support[i], -i)) if support else -1
        if best < 0 or support[best] < min_support:
            unsupported.append(item.sentence)
            continue
        space = " " if item.sentence[-1].isalnum() else ""  # "…tall.[2]", "…です。[1]", "…m [2]"
        pieces.append(answer[pos:item.end] + f"{space}[{best + 1}]")
        pos = item.end
        if best + 1 not in cited:
            cited.append(best + 1)
    pieces.append(answer[pos:])
    return {
        "answer": "".join(pieces),
        "citations": [citation_for(n, docs[n - 1], attributed=True) for n in cited],
        "unsupported_sentences": unsupported,
    }


# -- the chain ------------------------------------------------------------------------------------------------------
ANSWER_SYSTEM_PROMPT = """\
You answer questions using only the numbered context passages you are given.
Rules:
- Use only facts stated in the passages. Do not add outside knowledge.
- Cite the passages you use with their numbers in square brackets, like [1] or [2][3], right after the statement \
they support.
- If the passages do not support an answer, reply only "I don't know" in the language of the question: \
"わかりません" for Japanese, "我不知道" for Chinese, "I don't know" for English.
- Answer in the language of the question, concisely."""

ANSWER_HUMAN_PROMPT = """\
Context:

{context}

Question ({language}): {question}
If the context does not support an answer, reply exactly: {dont_know}"""

#: Added to :data:`ANSWER_SYSTEM_PROMPT` when the input has a ``chat_history`` (the earlier turns then come between
#: the system message and the context, as LangChain's chat prompts place a ``MessagesPlaceholder``).
ANSWER_HISTORY_NOTE = """\
- The earlier turns of the conversation come before the context. Use them only to understand what the question \
refers to; facts still come only from the numbered passages, and the numbers refer to these passages only."""


def _check_inputs(inputs: Any) -> tuple[str, list[Document]]:
    if not isinstance(inputs, Mapping):
        raise TypeError(f"the answer chain takes {{'question': str, 'documents': [Document]}}, got {inputs!r}")
    question = inputs.get("question")
    if not isinstance(question, str):
        raise ValueError(f"'question' must be a string, got {question!r}")
    documents = inputs.get("documents") or []
    if not isinstance(documents, Sequence) or not all(isinstance(d, Document) for d in documents):
        raise TypeError("'documents' must be a list of langchain_core.documents.Document")
    history = inputs.get("chat_history")
    if history is not None and (
        not isinstance(history, Sequence) or isinstance(history, str) or not all(isinstance(m, BaseMessage) for m in history)
    ):
        raise TypeError("'chat_history' must be a list of langchain_core.messages.BaseMessage")
    standalone = inputs.get("standalone_question")
    if standalone is not None and not isinstance(standalone, str):
        raise ValueError(f"'standalone_question' must be a string or None, got {standalone!r}")
    return question, list(documents)


@renamed_keywords("max_docs")
def make_answer_chain(
    llm: BaseChatModel | None = None,
    *,
    lost_in_the_middle: bool = False,
    k: int | None = DEFAULT_K,
    tokenizer: str | Tokenizer = "auto",
    prompt: ChatPromptTemplate | None = None,
    min_support: float = DEFAULT_MIN_SUPPORT,
    uncited: Literal["refuse", "warn"] = "refuse",
) -> Runnable[dict[str, Any], dict[str, Any]]:
    """An LCEL chain ``{"question": str, "documents": list[Document]} -> {"answer", "citations", "mode",
    "invalid_citations", "unsupported_sentences", "warning"}``.

    Every path first applies the RESTRICTED gate, keeps the first ``k`` documents (default 6,
    :data:`~langchain_ragspine.arguments.DEFAULT_K`; ``None``: all; ``max_docs`` is its old name, deprecated) and,
    with ``lost_in_the_middle=True``, shows them best-at-both-ends; passages are numbered in the order shown.

    * ``llm`` given: ``prompt`` (default :data:`ANSWER_SYSTEM_PROMPT` + the numbered context and the question;
      variables ``context``, ``question``, ``language``, ``dont_know``) → ``llm`` → text.  ``<think>`` blocks are
      removed and the citation markers are read in the forms models write and normalised
      (:func:`normalize_citations`: ``[1-3]`` → ``[1, 2, 3]``, ``[1][2]`` → ``[1, 2]``, ``［２］`` → ``[2]``);
      numbers that name no passage are removed from the text and listed in ``invalid_citations``.  ``citations``
      lists the valid numbers in order of first use (``attributed: False``).  When the text has no valid marker,
      each sentence is attributed to the passage that supports it best (:func:`attribute_citations`, ``min_support``)
      — those citations carry ``attributed: True`` — and sentences no passage supports are listed in
      ``unsupported_sentences``.  ``mode`` is ``"llm"``.  If the call raises, the chain degrades to the extractive
      answer (``mode="extractive_fallback"``, logged as a warning).
    * ``llm=None``: :func:`extractive_answer` (``mode="extractive"``), no model, deterministic.

    Conversation (optional input keys, what the graphs pass for a chat follow-up; without them nothing changes):
    ``chat_history`` — a list of ``BaseMessage`` (the earlier turns; the caller makes sure they hold no RESTRICTED
    text) that the default prompt puts between the system message (with :data:`ANSWER_HISTORY_NOTE` added) and
    the context, so the model answers the question as the user asked it in the conversation; a custom ``prompt``
    gets it as the variable ``chat_history`` when it has one, else it is unused.  ``standalone_question`` — the
    follow-up made self-contained; the extractive answer looks for its content terms
    (:func:`extractive_answer`'s ``search_question``), the LLM prompt does not use it.

    An answer is never returned without citations silently.  When an LLM answer (not an "I don't know") has no
    valid marker and no sentence can be attributed, ``uncited`` decides: ``"refuse"`` (default) replaces it with
    "I don't know" in the question's language, no citations, and says why in ``warning`` (the model's text is
    logged at debug level, never returned) — an answer nothing in the context supports is not grounded, so it is
    not presented as one; ``"warn"`` keeps the text with ``citations: []`` and the reason in ``warning``.
    ``warning`` is ``None`` otherwise.

    No document (or only RESTRICTED ones) gives "I don't know" in the question's language without calling a model.

    Streaming: with an ``llm``, ``chain.stream(inputs)`` (and ``astream``) yields the model's text as it is
    written, one ``{"token": str}`` dict per piece (``<think>`` blocks left out), then one last dict: the result
    ``invoke`` returns (markers checked, citations, attribution, or the ``uncited`` refusal — the streamed text
    is a draft; show the last dict's ``answer``).  A model that fails mid-stream gives the extractive fallback as
    the last dict.  ``invoke`` / ``batch`` are unchanged.  Without an ``llm`` the stream is the one result dict.

    Raises:
        ValueError: ``k < 1``, ``min_support`` outside [0, 1], an unknown ``uncited``; at invoke,
            ``question`` is missing or not a string, ``standalone_question`` not a string.
        TypeError: ``llm`` is not a chat model, ``k`` neither an int nor ``None``, ``max_docs`` and ``k`` with
            different values; at invoke, the input is not a mapping, ``documents`` is not a
            list of ``Document``, or ``chat_history`` is not a list of ``BaseMessage``.
    """
    check_int(k, "k", allow_none=True)
    if llm is not None and not isinstance(llm, BaseChatModel):
        raise TypeError(f"llm must be a BaseChatModel or None, got {llm!r}")
    if not 0.0 <= min_support <= 1.0:
        raise ValueError(f"min_support must be in [0, 1], got {min_support}")
    if uncited not in ("refuse", "warn"):
        raise ValueError(f"uncited must be 'refuse' or 'warn', got {uncited!r}")
    tok = get_tokenizer(tokenizer)

    def prepare(inputs: Any) -> dict[str, Any]:
        question, documents = _check_inputs(inputs)
        shown = prepare_context(documents, k=k, lost_in_the_middle=lost_in_the_middle)
        lang = detect_language(question)
        state = {
            "question": question,
            "documents": shown,
            "context": format_context(shown),
            "language": _LANGUAGE_NAMES[lang],
            "dont_know": DONT_KNOW[lang],
        }
        for key in ("chat_history", "standalone_question"):  # only when given: otherwise the state is unchanged
            if inputs.get(key):
                state[key] = list(inputs[key]) if key == "chat_history" else inputs[key]
        return state

    def extractive(state: dict[str, Any]) -> dict[str, Any]:
        return extractive_answer(
            state["question"], state["documents"], tokenizer=tok, search_question=state.get("standalone_question")
        )

    prep = RunnableLambda(prepare, name="prepare_context")
    if llm is None:
        return (prep | RunnableLambda(extractive, name="extractive_answer")).with_config(run_name="ragspine_answer")

    template = prompt or ChatPromptTemplate.from_messages(
        [("system", ANSWER_SYSTEM_PROMPT), ("human", ANSWER_HUMAN_PROMPT)]
    )
    with_history = prompt or ChatPromptTemplate.from_messages(
        [
            ("system", ANSWER_SYSTEM_PROMPT + "\n" + ANSWER_HISTORY_NOTE),
            MessagesPlaceholder("chat_history"),
            ("human", ANSWER_HUMAN_PROMPT),
        ]
    )

    def template_for(state: Mapping[str, Any]) -> ChatPromptTemplate:
        return with_history if state.get("chat_history") else template

    def finish(state: dict[str, Any]) -> dict[str, Any]:
        return cite_llm_answer(
            state.get("raw") or "", state["documents"], question=state["question"], tokenizer=tok,
            min_support=min_support, uncited=uncited,
        )

    def fallback(state: dict[str, Any]) -> dict[str, Any]:
        error = state.get("error")
        logger.warning("chat model call failed (%s: %s); using the extractive answer", type(error).__name__, error)
        out = extractive(state)
        out["mode"] = "extractive_fallback"
        return out

    def path(tpl: ChatPromptTemplate) -> Runnable[Any, Any]:
        generate = tpl | llm | StrOutputParser()
        return (RunnablePassthrough.assign(raw=generate) | RunnableLambda(finish, name="parse_citations")).with_fallbacks(
            [RunnableLambda(fallback, name="extractive_fallback")], exception_key="error"
        )

    llm_path = path(template)
    history_path = llm_path if prompt is not None else path(with_history)

    def route(state: dict[str, Any]) -> Runnable[Any, Any] | dict[str, Any]:
        if not state["documents"]:
            return _result(state["dont_know"], [], "llm")
        return history_path if state.get("chat_history") else llm_path

    chain = (prep | RunnableLambda(route, name="answer")).with_config(run_name="ragspine_answer")
    return _StreamingAnswerChain(
        chain=cast("Runnable[dict[str, Any], dict[str, Any]]", chain), prepare=prepare, llm=llm,
        template_for=template_for, finish=finish, fallback=fallback,
    )


_THINK_OPEN = "<think>"


def _visible_text(raw: str) -> str:
    """The part of a model's partial reply a reader may see: ``<think>`` blocks removed (an unclosed one hides
    the rest) and a trailing piece that may be the start of ``<think>`` held back."""
    lower = raw.lower()
    for n in range(min(len(_THINK_OPEN) - 1, len(raw)), 0, -1):
        if lower.endswith(_THINK_OPEN[:n]):
            raw = raw[:-n]
            break
    return strip_think(raw)


class _Draft:
    """A model's reply as it streams: ``raw`` so far, and :meth:`add` giving the new visible text of each chunk."""

    def __init__(self) -> None:
        self.raw = ""
        self._shown = ""

    def add(self, chunk: BaseMessage) -> str:
        """Append ``chunk``'s text; the text a reader sees that it adds (``""``: nothing new to show yet)."""
        self.raw += chunk.content if isinstance(chunk.content, str) else chunk.text
        visible = _visible_text(self.raw)
        if len(visible) <= len(self._shown) or not visible.startswith(self._shown):
            return ""
        token, self._shown = visible[len(self._shown):], visible
        return token


class _StreamingAnswerChain(Runnable[dict[str, Any], dict[str, Any]]):
    """:func:`make_answer_chain` with an LLM: ``invoke`` / ``ainvoke`` are the LCEL chain's own (same result, same
    trace); ``stream`` / ``astream`` yield the model's tokens as ``{"token": str}`` and then the result."""

    name = "ragspine_answer"

    def __init__(
        self,
        *,
        chain: Runnable[dict[str, Any], dict[str, Any]],
        prepare: Callable[[Any], dict[str, Any]],
        llm: BaseChatModel,
        template_for: Callable[[Mapping[str, Any]], ChatPromptTemplate],
        finish: Callable[[dict[str, Any]], dict[str, Any]],
        fallback: Callable[[dict[str, Any]], dict[str, Any]],
    ) -> None:
        self.chain = chain
        self._prepare, self._llm, self._template_for = prepare, llm, template_for
        self._finish, self._fallback = finish, fallback

    @property
    def InputType(self) -> Any:  # noqa: N802 - LangChain's name
        return self.chain.InputType

    @property
    def OutputType(self) -> Any:  # noqa: N802 - LangChain's name
        return self.chain.OutputType

    def get_input_schema(self, config: RunnableConfig | None = None) -> Any:
        return self.chain.get_input_schema(config)

    def get_output_schema(self, config: RunnableConfig | None = None) -> Any:
        return self.chain.get_output_schema(config)

    def invoke(self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any) -> dict[str, Any]:
        return self.chain.invoke(input, config, **kwargs)

    async def ainvoke(
        self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> dict[str, Any]:
        return await self.chain.ainvoke(input, config, **kwargs)

    def _start(self, inputs: Iterable[Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """The prepared state of the (last) input, and the result when no model call is needed."""
        values = list(inputs)
        state = self._prepare(values[-1] if values else None)
        return state, (None if state["documents"] else _result(state["dont_know"], [], "llm"))

    def _stream(
        self, inputs: Iterator[dict[str, Any]], run_manager: CallbackManagerForChainRun, config: RunnableConfig
    ) -> Iterator[dict[str, Any]]:
        state, done = self._start(inputs)
        if done is not None:
            yield done
            return
        child = patch_config(config, callbacks=run_manager.get_child())
        draft = _Draft()
        try:
            for chunk in self._llm.stream(self._template_for(state).invoke(state, child), child):
                if token := draft.add(chunk):
                    yield {"token": token}
            result = self._finish({**state, "raw": draft.raw})
        except Exception as e:  # noqa: BLE001 - the documented fallback, as invoke's
            result = self._fallback({**state, "error": e})
        yield result

    async def _astream(
        self, inputs: AsyncIterator[dict[str, Any]], run_manager: AsyncCallbackManagerForChainRun, config: RunnableConfig
    ) -> AsyncIterator[dict[str, Any]]:
        state, done = self._start([value async for value in inputs])
        if done is not None:
            yield done
            return
        child = patch_config(config, callbacks=run_manager.get_child())
        draft = _Draft()
        try:
            async for chunk in self._llm.astream(await self._template_for(state).ainvoke(state, child), child):
                if token := draft.add(chunk):
                    yield {"token": token}
            result = self._finish({**state, "raw": draft.raw})
        except Exception as e:  # noqa: BLE001 - the documented fallback, as ainvoke's
            result = self._fallback({**state, "error": e})
        yield result

    def stream(
        self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> Iterator[dict[str, Any]]:
        yield from self._transform_stream_with_config(iter([input]), self._stream, config, **kwargs)

    async def astream(
        self, input: dict[str, Any], config: RunnableConfig | None = None, **kwargs: Any
    ) -> AsyncIterator[dict[str, Any]]:
        async def one() -> AsyncIterator[dict[str, Any]]:
            yield input

        async for chunk in self._atransform_stream_with_config(one(), self._astream, config, **kwargs):
            yield chunk


#: ``warning`` of an answer refused (or kept, with ``uncited="warn"``) because no passage supports any sentence.
UNCITED_WARNING = (
    "uncited: the model's answer has no valid citation and no passage of the context supports any of its sentences"
)


def cite_llm_answer(
    raw: str,
    documents: Sequence[Document],
    *,
    question: str,
    tokenizer: str | Tokenizer = "auto",
    min_support: float = DEFAULT_MIN_SUPPORT,
    uncited: Literal["refuse", "warn"] = "refuse",
) -> dict[str, Any]:
    """Turn a model's raw reply into the chain's result (see :func:`make_answer_chain`): ``<think>`` removed,
    markers normalised and range-checked against ``documents`` (the passages shown, numbered from 1), attribution
    when no valid marker is left, and the ``uncited`` policy when nothing can be cited.

    Returns:
        ``{"answer", "citations", "mode": "llm", "invalid_citations", "unsupported_sentences", "warning"}``.
    """
    docs = drop_restricted(documents)
    text, cited, invalid = normalize_citations(strip_think(raw), len(docs))
    if not text or is_dont_know(text):  # no answer: nothing to cite, and no marker left dangling
        return _result(rewrite_citation_markers(text, lambda _: []) or dont_know(question), [], "llm", invalid=invalid)
    if cited:
        return _result(text, [citation_for(n, docs[n - 1]) for n in cited], "llm", invalid=invalid)
    found = attribute_citations(text, docs, tokenizer=tokenizer, min_support=min_support)
    if found["citations"]:
        return _result(
            found["answer"], found["citations"], "llm", invalid=invalid, unsupported=found["unsupported_sentences"]
        )
    unsupported = found["unsupported_sentences"]
    if uncited == "refuse":
        logger.debug("refusing an answer no passage supports: %r", text)
        return _result(dont_know(question), [], "llm", invalid=invalid, unsupported=unsupported,
                       warning=UNCITED_WARNING)
    return _result(text, [], "llm", invalid=invalid, unsupported=unsupported, warning=UNCITED_WARNING)
