"""Parse the search queries an LLM wrote: one pure function shared by every query transformation.

Multi-query retrieval (LangChain's ``MultiQueryRetriever``), RAG-Fusion (Raudaschl, 2023), step-back prompting
(Zheng et al., "Take a Step Back: Evoking Reasoning via Abstraction in Large Language Models", ICLR 2024) and
decomposition (Zhou et al., "Least-to-Most Prompting Enables Complex Reasoning in Large Language Models", ICLR 2023)
all ask a chat model for a few queries, one per line.  Models do not keep to the format: they number the lines,
add bullets, quotes, headings and chatter ("Sure! Here are three queries:", "I hope these help!"), leave blank,
whitespace-only or zero-width lines, wrap the list in a code fence or a JSON array, and reasoning models prepend a
``<think>`` block.
:func:`parse_query_variants` reads all of these and returns the original query first, then at most ``n`` distinct
generated queries.  LangChain's own ``LineListOutputParser`` splits on newlines only, so a numbered list becomes
queries that start with ``"1. "`` and a blank line becomes an empty query.
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Any

from langchain_ragspine.text.folding import fold_query, normalize

__all__ = ["MAX_QUERY_CHARS", "fold_query", "is_blank", "parse_query_variants", "reply_text", "strip_think"]

#: A generated line longer than this (characters) is not a query (a paragraph of explanation): it is dropped.
MAX_QUERY_CHARS = 300
#: Only the first this many lines of a reply are read (a reply is a few queries; a longer one is runaway output).
MAX_REPLY_LINES = 1000

_THINK_BLOCK_RE = re.compile(r"<think>.*?</think>", re.DOTALL | re.IGNORECASE)
_FENCE_RE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)```", re.DOTALL)
# list markers, after NFKC (so full-width digits and parentheses are ASCII): 1.  1)  (1)  [1]  1:  1 -  ①  -  *  •  ・
_D = "[0-9０-９]"
_MARKER_RE = re.compile(  # written for both widths: the text itself is returned as the model wrote it
    r"^(?:[-*+•・●◦▪‣–—－＊]+(?=\s|$)|[•・●◦▪‣]|[(（]" + _D + r"{1,3}[)）]|[\[［]" + _D + r"{1,3}[\]］]|"
    + _D + r"{1,3}[.)）:：、．](?![0-9０-９])|" + _D + r"{1,3}[ \t]+[-–—－](?=[ \t])|"
    r"[\u2460-\u2473\u2776-\u277f\u2780-\u2793])\s*"
)
_LABEL_RE = re.compile(
    r"^(?:(?:alternative\s+|rephrased\s+|rewritten\s+|search\s+|sub-?)?(?:query|question|version|variant)"
    r"|step-?back(?:\s+question)?|検索クエリ|クエリ|質問|問い|サブクエスチョン|问题|查询|子问题|提问|q)"
    r"\s*[0-9０-９]*(?:\s*[:：]|[ \t]+[-–—－][ \t])\s*",
    re.IGNORECASE,
)
# a Markdown heading ("## Queries") and a block quote marker ("> ")
_HEADING_RE = re.compile(r"^#{1,6}(?:\s|$)")
_QUOTE_MARK_RE = re.compile(r"^(?:>[ \t]*)+(?=\S)")
# chatter a model writes around its list: the start of a line that is not a list item (see parse_query_variants)
_CHATTER_RE = re.compile(
    r"^(?:(?:sure|certainly|of course|absolutely|alright|okay|ok)[!,.、！，。]"
    r"|here(?:'s|’s|\s+is|\s+are)\b|below\s+(?:is|are)\b|i\s+hope\b|hope\s+(?:this|these|that|it)\b"
    r"|let\s+me\s+know\b|feel\s+free\b"
    r"|はい[、。!！]|もちろん|承知しました|かしこまりました|以下[はにがで]|以上(?:です|になります|となります)|お役に立"
    r"|好的|当然|以下是|下面是|以上是|希望(?:这些|以上|对你|能)|如有)",
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


def is_blank(text: str) -> bool:
    """Whether ``text`` holds nothing to search: empty after NFKC once whitespace and invisible format characters
    (Unicode category Cf: zero-width space U+200B, byte-order mark U+FEFF, joiners, soft hyphen) are removed.

    Example:
        >>> is_blank(" \\u200b\\ufeff\\u3000"), is_blank("?")
        (True, False)
    """
    return not _strip_invisible(normalize(text))


def _is_edge(ch: str) -> bool:
    return ch.isspace() or unicodedata.category(ch) == "Cf"


def _strip_invisible(text: str) -> str:
    """``text`` without whitespace and format characters at either end."""
    start, end = 0, len(text)
    while start < end and _is_edge(text[start]):
        start += 1
    while end > start and _is_edge(text[end - 1]):
        end -= 1
    return text[start:end]


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


def _clean_line(raw: str) -> tuple[str, bool]:
    """``(text, is_item)``: the line without list markers, labels, a block-quote mark, Markdown bold and quotes, and
    whether a list marker or a label was found (the line is an item of a list)."""
    line = _strip_invisible(raw)
    line = _QUOTE_MARK_RE.sub("", line, count=1)
    item = False
    for _ in range(2):  # "1. Query 1: …", "- **Query:** …"
        line, markers = _MARKER_RE.subn("", line, count=1)
        line = line.strip()
        line = line.replace("**", "") if line.startswith("**") else line
        line, labels = _LABEL_RE.subn("", line, count=1)
        line = line.strip()
        item = item or bool(markers or labels)
    return _strip_invisible(_unquote(line)), item


def _json_items(body: str) -> list[str] | None:
    """The strings in ``body`` when it is JSON (an array, or an object with a list or string under one of
    :data:`_JSON_KEYS` — or, with none of them, under its only key holding strings); ``None`` when it is not JSON.
    Items that are not strings are dropped."""
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
            values = [v for v in data.values() if isinstance(v, (str, list))]
            data = values[0] if len(values) == 1 else []
    if isinstance(data, str):
        data = [data]
    if not isinstance(data, list):
        return []
    return [x for x in data if isinstance(x, str)]


def _is_header(line: str) -> bool:
    """A preamble such as ``Here are three alternative queries:`` or ``以下は検索クエリです：`` (a line that ends with a
    colon)."""
    return line.endswith((":", "："))


def _lines(body: str) -> list[str]:
    """The query lines of a reply that is not JSON: list markers and labels stripped, and chatter dropped.

    A line is dropped when it is blank (also zero-width only), a Markdown heading, ends with a colon, or — when it
    is not itself a list item — opens with chatter (:data:`_CHATTER_RE`), or comes before the first or after the last
    item of a list.  A marker alone on its line (``"1."``) makes the next line an item.  A line that is JSON (an
    array or an object) gives its strings.
    """
    rows: list[tuple[str, bool]] = []
    pending = False  # a marker alone on the previous line
    for raw in body.splitlines()[:MAX_REPLY_LINES]:
        if is_blank(raw) or _HEADING_RE.match(raw.strip()):
            continue
        text, item = _clean_line(raw)
        if not text:
            pending = pending or item
            continue
        if text[0] in "[{":
            items = _json_items(text)
            if items is not None:
                rows.extend((_clean_line(x)[0], True) for x in items)
                pending = False
                continue
        item, pending = item or pending, False
        if _is_header(text) or (not item and _CHATTER_RE.match(text)):
            continue
        rows.append((text, item))
    marked = [i for i, (_, item) in enumerate(rows) if item]
    # a list (two items or more): what stands before its first item or after its last is a lead-in or a closing
    # remark.  One marked line among plain ones is no list — a Japanese line may well open with "・" — so nothing
    # is trimmed then (chatter around it is still caught by the colon and chatter rules above).
    if len(marked) >= 2:
        rows = rows[marked[0] : marked[-1] + 1]
    return [text for text, _ in rows]


def parse_query_variants(reply: Any, original: str | None = None, n: int | None = None) -> list[str]:
    """The queries in an LLM's ``reply``: ``original`` first (when given), then at most ``n`` distinct generated
    queries in the order the model wrote them.  A pure function; never raises.

    Read from ``reply`` (a string or a chat message, see :func:`reply_text`):

    * ``<think>`` blocks are removed (:func:`strip_think`), a code fence is unwrapped;
    * a JSON array, or an object with a list or string under ``queries``, ``questions``, ``sub_questions``,
      ``variants``, ``query`` or ``question`` (or, with none of these keys, under its only key that holds strings),
      gives the items — strings only: numbers, ``null`` and nested objects are dropped; a line of JSON inside a
      longer reply is read the same way, never searched as text;
    * otherwise every line is one item: list markers (``1.``, ``2)``, ``(3)``, ``1 -``, ``①``, ``-``, ``*``,
      ``•``, ``・``, full-width ``１．``), labels (``Query 2:``, ``Q1:``, ``Question 1 -``, ``質問：``,
      ``问题1：``), a block-quote mark (``> ``), Markdown bold and surrounding quotes (``"…"``, ``「…」``,
      ``“…”``) are stripped, and these lines are dropped — the rule for chatter, kept conservative so that a query
      is not taken for it:

      - blank lines, also those of only whitespace or invisible characters (``\\u200b``, ``\\ufeff``), and
        Markdown headings (``## Queries``);
      - a line that ends with a colon (``Here are three queries:``, ``以下は検索クエリです：``);
      - when two or more lines are list items (they had a marker or a label): every line before the first item and
        after the last one (a lead-in such as ``Sure! Here are three alternative queries.``, a closing ``I hope these
        help!``); a marker alone on its line makes the next line the item;
      - a line that is not a list item and opens as chatter does — ``Sure``, ``Certainly``, ``Of course``,
        ``Absolutely``, ``Alright``, ``Okay``, ``OK`` followed by punctuation; ``Here is/are``, ``Here's``,
        ``Below is/are``, ``I hope``, ``Hope this/these/that/it``, ``Let me know``, ``Feel free``; ``はい、``,
        ``もちろん``, ``承知しました``, ``かしこまりました``, ``以下は/に/が/で``, ``以上です``, ``お役に立``;
        ``好的``, ``当然``, ``以下是``, ``下面是``, ``以上是``, ``希望这些/以上/对你/能``, ``如有``;
      - a line longer than :data:`MAX_QUERY_CHARS` (a paragraph, not a query), and every line after the first
        :data:`MAX_REPLY_LINES`.

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
        lines = [_clean_line(x)[0] for x in items] if items is not None else _lines(body)
        generated = 0
        for raw in lines:
            line = _strip_invisible(raw)
            if is_blank(line) or len(line) > MAX_QUERY_CHARS:
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
