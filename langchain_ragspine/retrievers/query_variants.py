"""Parse the search queries an LLM wrote: one pure function shared by every query transformation.

Multi-query retrieval (LangChain's ``MultiQueryRetriever``), RAG-Fusion (Raudaschl, 2023), step-back prompting
(Zheng et al., "Take a Step Back: Evoking Reasoning via Abstraction in Large Language Models", ICLR 2024) and
decomposition (Zhou et al., "Least-to-Most Prompting Enables Complex Reasoning in Large Language Models", ICLR 2023)
all ask a chat model for a few queries, one per line.  Models do not keep to the format: they number the lines,
add bullets, quotes and a preamble ("Here are three queries:"), leave blank or whitespace-only lines, wrap the
list in a code fence or a JSON array, and reasoning models prepend a ``<think>`` block.
:func:`parse_query_variants` reads all of these and returns the original query first, then at most ``n`` distinct
generated queries.  LangChain's own ``LineListOutputParser`` splits on newlines only, so a numbered list becomes
queries that start with ``"1. "`` and a blank line becomes an empty query.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

__all__ = ["MAX_QUERY_CHARS", "fold_query", "parse_query_variants", "reply_text", "strip_think"]

#: A generated line longer than this (characters) is not a query (a paragraph of explanation): it is dropped.
MAX_QUERY_CHARS = 300

_THINK_BLOCK_RE = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE_RE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)
# list markers, after NFKC (so full-width digits and parentheses are ASCII): 1.  1)  (1)  [1]  1:  ①  -  *  •  ・
_D = "[0-9０-９]"
_MARKER_RE = re.compile(  # written for both widths: the text itself is returned as the model wrote it
    r"^(?:[-*+•・●◦▪‣–—－＊]+(?=\s|$)|[•・●◦▪‣]|[(（]" + _D + r"{1,3}[)）]|[\[［]" + _D + r"{1,3}[\]］]|"
    + _D + r"{1,3}[.)）:：、．](?![0-9０-９])|[\u2460-\u2473\u2776-\u277f\u2780-\u2793])\s*"
)
_LABEL_RE = re.compile(
    r"^(?:(?:alternative\s+|rephrased\s+|rewritten\s+|search\s+|sub-?)?(?:query|question|version|variant)"
    r"|step-?back(?:\s+question)?|検索クエリ|クエリ|質問|問い|サブクエスチョン|问题|查询|子问题|提问)\s*[0-9０-９]*\s*[:：]\s*",
    re.IGNORECASE,
)
_QUOTE_PAIRS = {'"': '"', "'": "'", "`": "`", "“": "”", "‘": "’", "「": "」", "『": "』", "《": "》", "«": "»"}
_JSON_KEYS = ("queries", "questions", "sub_questions", "subquestions", "variants", "query", "question")


def strip_think(text: str) -> str:
    """``text`` without ``<think>…</think>`` blocks; an unclosed ``<think>`` drops everything after it, a stray
    ``</think>`` is removed.  Case-insensitive.

    Example:
        >>> strip_think("<think>plan</think>\\n1. 梅雨 時期")
        '\\n1. 梅雨 時期'
    """
    out = _THINK_BLOCK_RE.sub("", text)
    lower = out.lower()
    if "<think>" in lower:
        out = out[: lower.index("<think>")]
    return re.sub(r"</think>", "", out, flags=re.IGNORECASE)


def reply_text(reply: Any) -> str:
    """The text of a chat model's reply: a string as is, a message's ``content`` (a string, or a list of strings
    and ``{"type": "text", "text": …}`` blocks joined), anything else ``""``.  Never raises."""
    content = getattr(reply, "content", reply)
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append(block["text"])
        return "".join(parts)
    return ""


def fold_query(text: str) -> str:
    """The form two queries are compared in: NFKC, case-folded, runs of whitespace as one space, trailing
    punctuation (``?？。.!！``) removed.  ``"What is BM25?"`` and ``"what  is ＢＭ２５"`` fold alike."""
    folded = " ".join(unicodedata.normalize("NFKC", text).casefold().split())
    return folded.rstrip("?？。.!！ ")


def _unquote(line: str) -> str:
    for _ in range(3):
        line = line.strip()
        if line.startswith("**") and line.endswith("**") and len(line) > 4:
            line = line[2:-2]
            continue
        if len(line) >= 2 and _QUOTE_PAIRS.get(line[0]) == line[-1]:
            line = line[1:-1]
            continue
        break
    return line.strip()


def _clean_line(raw: str) -> str:
    line = raw.strip()
    for _ in range(2):  # "1. Query 1: …", "- **Query:** …"
        line = _MARKER_RE.sub("", line, count=1).strip()
        line = line.replace("**", "") if line.startswith("**") else line
        line = _LABEL_RE.sub("", line, count=1).strip()
    return _unquote(line)


def _json_items(body: str) -> list[str] | None:
    text = body.strip()
    if not text or text[0] not in "[{":
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if isinstance(data, dict):
        for key in _JSON_KEYS:
            if key in data:
                data = data[key]
                break
        else:
            return None
    if isinstance(data, str):
        data = [data]
    if not isinstance(data, list):
        return None
    return [str(x) for x in data if isinstance(x, (str, int, float)) and not isinstance(x, bool)]


def _is_header(line: str) -> bool:
    """A preamble such as ``Here are three alternative queries:`` (a line that ends with a colon)."""
    return line.endswith((":", "："))


def parse_query_variants(reply: Any, original: str | None = None, n: int | None = None) -> list[str]:
    """The queries in an LLM's ``reply``: ``original`` first (when given), then at most ``n`` distinct generated
    queries in the order the model wrote them.  A pure function; never raises.

    Read from ``reply`` (a string or a chat message, see :func:`reply_text`):

    * ``<think>`` blocks are removed (:func:`strip_think`), a code fence is unwrapped;
    * a JSON array of strings, or an object with a list or string under ``queries``, ``questions``,
      ``sub_questions``, ``variants``, ``query`` or ``question``, gives the items;
    * otherwise every line is one item: blank and whitespace-only lines are skipped, list markers (``1.``,
      ``2)``, ``(3)``, ``①``, ``-``, ``*``, ``•``, ``・``, full-width ``１．``), labels (``Query 2:``,
      ``質問：``, ``问题1：``), Markdown bold and surrounding quotes (``"…"``, ``「…」``, ``“…”``) are stripped,
      and a line ending with a colon (a preamble) or longer than :data:`MAX_QUERY_CHARS` is dropped.

    Items are compared after :func:`fold_query` (NFKC, case, whitespace, trailing ``?``): a repeat, or a restatement
    of ``original``, is dropped.  Queries are returned as the model wrote them (markers and quotes removed).

    Args:
        reply: the model's reply.
        original: the user's query, returned first and unchanged (``None``: only generated queries).
        n: at most this many generated queries (``None``: all; ``0``: none).

    Returns:
        ``[original, q1, …, qn]`` (or ``[q1, …]`` without ``original``); ``[original]`` when nothing usable was
        generated.

    Example:
        >>> parse_query_variants("<think>…</think>\\nHere are two queries:\\n1. \\"梅雨の時期\\"\\n\\n   \\n2) 梅雨はいつ？",
        ...                      original="梅雨はいつ？", n=3)
        ['梅雨はいつ？', '梅雨の時期']
    """
    out: list[str] = [original] if original is not None else []
    if n is not None and n <= 0:
        return out
    seen = {fold_query(original)} if original is not None else set()
    try:
        body = strip_think(reply_text(reply))
        fence = _FENCE_RE.search(body)
        if fence:
            body = fence.group(1)
        items = _json_items(body)
        from_json = items is not None
        lines = items if items is not None else body.splitlines()
        generated = 0
        for raw in lines:
            if not isinstance(raw, str) or not raw.strip():
                continue
            line = _clean_line(raw)
            if not line or len(line) > MAX_QUERY_CHARS or (not from_json and _is_header(line)):
                continue
            key = fold_query(line)
            if not key or key in seen:
                continue
            seen.add(key)
            out.append(line)
            generated += 1
            if n is not None and generated >= n:
                break
    except Exception:  # noqa: BLE001 - a model's reply never makes retrieval fail
        return [original] if original is not None else []
    return out
