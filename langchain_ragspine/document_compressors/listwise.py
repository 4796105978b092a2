"""LLM listwise reranking: show a chat model the numbered candidates and ask for their order.

Listwise reranking with a generative model follows RankGPT (Sun et al., "Is ChatGPT Good at Search? Investigating
Large Language Models as Re-Ranking Agents", EMNLP 2023): the passages are listed with identifiers ``[1]`` … ``[n]``
and the model answers with a permutation such as ``[2] > [1] > [3]``.  Unlike pointwise relevance grading, the model
compares the candidates with each other in one call.

Two pure functions do the text work — :func:`build_listwise_prompt` and :func:`parse_listwise_response` — and
:class:`LLMListwiseReranker` wraps them as a ``BaseDocumentCompressor``.  The guarantees:

* **RESTRICTED never reaches the model.**  Candidates labelled RESTRICTED (:mod:`langchain_ragspine.sensitivity`,
  the one policy) are removed before the prompt is built — and from the result; when none is left, or the input is
  empty, the model is not called.  :func:`build_listwise_prompt` itself refuses a RESTRICTED document.
* **The parser is total.**  Real models answer in many shapes: RankGPT's ``[2] > [1] > [3]``, a JSON array
  ``[2, 1, 3]`` (or ``{"ranking": [...]}``), prose ("Passage 2 is the most relevant, then 3"), full-width digits,
  a ``<think>…</think>`` block before the answer.  Ids out of range and repeats are dropped, the ids the model
  left out are appended in their original order, so the result is always a permutation.
* **It never raises on model trouble.**  A model error, or an answer with no usable id, keeps the input order
  (logged as a warning); ``scores["rerank"]`` is then left as it was.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Sequence
from typing import Annotated, Any

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.runnables import Runnable
from pydantic import ConfigDict

from langchain_ragspine.arguments import (
    DEFAULT_K,
    OptionalPositiveIntField,
    PositiveIntField,
    check_int,
    known_fields,
    renamed_fields,
)
from langchain_ragspine.document_compressors._common import instance_of
from langchain_ragspine.documents import check_documents
from langchain_ragspine.retrievers.bm25 import with_scores
from langchain_ragspine.sensitivity import drop_restricted, is_restricted
from langchain_ragspine.text import normalize

__all__ = ["LLMListwiseReranker", "build_listwise_prompt", "parse_listwise_response", "parse_ranking"]

logger = logging.getLogger(__name__)

#: Characters of each passage shown to the model by default (a chunk of the default splitter is ≤ 480).
DEFAULT_PASSAGE_CHARS = 600

_BRACKET_ID_RE = re.compile(r"\[\s*(\d+)\s*\]")
_LABELLED_ID_RE = re.compile(
    r"(?:\b(?:passages?|documents?|docs?|candidates?|ids?|no\.?|number)|#|文書|段落|候補|パッセージ|文章|文档|候选)"
    r"\s*#?\s*(\d+)",
    re.IGNORECASE,
)
_NUMBER_RE = re.compile(r"(?<![\d.])(\d+)(?!\.?\d)")  # whole numbers, not parts of decimals
_ONLY_NUMBERS_RE = re.compile(r"^[\s\d,>、，.;:\-]*$")
_JSON_ARRAY_RE = re.compile(r"\[[^\[\]]*\]|\{[^{}]*\}")


def _passage_text(doc: Document | str) -> str:
    if isinstance(doc, str):
        return doc
    text = doc.metadata.get("prompt_text")
    return text if isinstance(text, str) and text.strip() else doc.page_content


def build_listwise_prompt(
    query: str, candidates: Sequence[Document | str], *, max_chars: int | None = DEFAULT_PASSAGE_CHARS
) -> str:
    """The listwise ranking prompt (RankGPT's layout): instructions, the passages as ``[1] …`` … ``[n] …``, the
    query again, and the answer format ``[2] > [1] > [3]``.

    Args:
        query: the search query.
        candidates: ``Document``\\ s (their ``prompt_text`` when set, else ``page_content``) or plain strings, in
            the order they get ids ``1..n``.
        max_chars: each passage is cut to this many characters, white space collapsed (default 600; ``None``: no
            cut), so ``n`` candidates give a prompt of bounded size.

    A pure function: the same input always gives the same string.

    Raises:
        ValueError: a candidate ``Document`` is labelled RESTRICTED (the caller must gate first), or
            ``max_chars < 1``.
    """
    if max_chars is not None:
        check_int(max_chars, "max_chars")
    n = len(candidates)
    lines = [
        f"Below are {n} passages, each with a numeric identifier in square brackets. Rank them by how relevant "
        "they are to the search query.",
        "",
        f"Search query: {query}",
        "",
    ]
    for i, cand in enumerate(candidates, 1):
        if isinstance(cand, Document) and is_restricted(cand):
            raise ValueError(f"candidate {i} is labelled RESTRICTED; it must never be sent to a model")
        text = " ".join(_passage_text(cand).split())
        if max_chars is not None and len(text) > max_chars:
            text = text[:max_chars] + "…"
        lines.append(f"[{i}] {text}")
    lines += [
        "",
        f"Search query: {query}",
        f"Rank all {n} passages above from most to least relevant to the search query. Answer only with the "
        "identifiers in order, separated by >, for example [2] > [1] > [3]. Do not explain.",
    ]
    return "\n".join(lines)


def _strip_think(text: str) -> str:
    # imported here: chains.answer imports this package (the reorder and gate modules)
    from langchain_ragspine.chains.answer import strip_think

    return strip_think(text)


def _json_ids(text: str) -> list[int]:
    """Ids from the first JSON array (or object holding one) in ``text`` whose items are ints or numeric strings."""
    for m in _JSON_ARRAY_RE.finditer(text):
        try:
            value = json.loads(m.group(0))
        except ValueError:
            continue
        if isinstance(value, dict):
            value = next((v for v in value.values() if isinstance(v, list)), None)
        if not isinstance(value, list) or not value:
            continue
        ids: list[int] = []
        for item in value:
            if isinstance(item, bool):
                break
            if isinstance(item, int):
                ids.append(item)
            elif isinstance(item, str) and (found := re.search(r"\d+", item)):
                ids.append(int(found.group(0)))
            else:
                break
        else:
            return ids
    return []


def parse_ranking(text: str, n: int) -> list[int] | None:
    """The 0-based candidate positions a model's answer names, in its order, valid (``1..n``) and first
    occurrences only — or ``None`` when the answer names no valid id (the caller keeps the input order).

    Formats tried in turn, the first that yields a valid id wins: bracketed ids (``[2] > [1]``, RankGPT's), a
    JSON array or an object holding one (``[2, 1]``, ``{"ranking": ["2", "1"]}``), labelled numbers (``Passage 2``,
    ``#2``, ``文書2``), then bare numbers (``2 > 1 > 3``, ``2, 1, 3``; at least two ids, unless the answer is only
    numbers and separators).  ``<think>…</think>`` is removed first and the
    text NFKC-normalised (full-width ``［２］`` reads as ``[2]``).  The ids the answer leaves out are *not* added
    (see :func:`parse_listwise_response`).
    """
    if not isinstance(text, str) or n < 1:
        return None
    body = normalize(_strip_think(text))
    for tier, extract in enumerate((
        lambda t: [int(x) for x in _BRACKET_ID_RE.findall(t)],
        _json_ids,
        lambda t: [int(x) for x in _LABELLED_ID_RE.findall(t)],
        lambda t: [int(x) for x in _NUMBER_RE.findall(t)],
    )):
        seen: list[int] = []
        for i in extract(body):
            if 1 <= i <= n and i - 1 not in seen:
                seen.append(i - 1)
        # a lone bare number inside prose ("I cannot rank these 3 passages") is not a ranking
        if seen and (tier < 3 or len(seen) >= 2 or _ONLY_NUMBERS_RE.match(body)):
            return seen
    return None


def parse_listwise_response(text: str, n: int) -> list[int]:
    """A model's ranking answer as a permutation of ``range(n)`` (0-based positions, best first).

    The ids :func:`parse_ranking` finds, then every id it left out in its original order; an answer with no
    usable id (empty, refusal, garbage, not a string) gives the input order ``[0, 1, …, n-1]``.  Never raises;
    ``n <= 0`` gives ``[]``.

    Example:
        >>> parse_listwise_response("<think>…</think>[3] > [1] > [3] > [9]", 4)
        [2, 0, 1, 3]
    """
    if not isinstance(n, int) or n <= 0:
        return []
    return _complete(parse_ranking(text, n) or [], n)


def _complete(ranked: list[int], n: int) -> list[int]:
    """``ranked`` followed by the positions of ``range(n)`` it lacks, in order."""
    chosen = set(ranked)
    return ranked + [i for i in range(n) if i not in chosen]


def _message_text(message: Any) -> str:
    """The text of a chat model's reply (an ``AIMessage``, content blocks, or a plain string from an LLM)."""
    if isinstance(message, str):
        return message
    text = getattr(message, "text", None)
    if isinstance(text, str):  # langchain-core 1.x: a str (TextAccessor)
        return str(text)
    if callable(text):  # langchain-core < 1: a method
        text = text()
        if isinstance(text, str):
            return text
    content = getattr(message, "content", "")
    return content if isinstance(content, str) else str(content)


class LLMListwiseReranker(BaseDocumentCompressor):
    """Rerank documents with one listwise call to a chat model (RankGPT), keep the ``k`` best.

    Args:
        llm: any ``BaseChatModel`` (or a ``Runnable`` taking a prompt string and returning a message or string).
        k: documents returned (default 6, :data:`~langchain_ragspine.arguments.DEFAULT_K`); ``None`` returns all, reordered.  ``top_n``, the keyword of LangChain's
            ``LLMListwiseRerank`` (which this class stands in for), is accepted as another name of ``k`` without a
            warning (with ``k`` and another value: a ``TypeError``); ``reranker.top_n`` reads and sets ``k``.
        window: how many of the (non-RESTRICTED) candidates the model ranks (default 20); the rest follow, in their
            input order, after the ranked ones.
        max_chars: characters of each passage shown (default 600, see :func:`build_listwise_prompt`).

    ``compress_documents(documents, query)``: RESTRICTED documents are removed first; with none left (or one: there
    is nothing to order) the model is not called.  Otherwise the first ``window`` candidates go into one prompt
    (:func:`build_listwise_prompt`) and the answer is read with :func:`parse_listwise_response`.  When the model's
    order is used, each returned copy gets ``scores["rerank"] = 1 - (rank - 1) / window_len`` (1.0 for the first,
    a rank-derived value: the model gives no scores); other metadata is kept.  When the call raises or the answer
    names no valid id, the input order is kept, the documents are returned as they are, and a warning is logged.
    It never raises because of the model.  ``acompress_documents`` awaits ``llm.ainvoke``.

    Raises:
        TypeError: ``llm`` is not a ``Runnable``; ``k`` / ``window`` / ``max_chars`` not an int;
            ``top_n`` and ``k`` with different values.
        ValueError: ``k`` / ``window`` / ``max_chars`` < 1.
    """

    _known = known_fields("top_n")

    llm: Annotated[Runnable[Any, Any], instance_of(Runnable, "a BaseChatModel (a Runnable)")]
    k: OptionalPositiveIntField = DEFAULT_K
    window: PositiveIntField = 20
    max_chars: PositiveIntField = DEFAULT_PASSAGE_CHARS

    model_config = ConfigDict(arbitrary_types_allowed=True)

    #: ``top_n``: LangChain's name of ``k``, kept (see the class docstring).
    _renamed = renamed_fields("top_n", kept=["top_n"])

    @property
    def top_n(self) -> int | None:
        """LangChain's name of :attr:`k` (kept: no warning)."""
        return self.k

    @top_n.setter
    def top_n(self, value: int | None) -> None:
        self.k = value

    def _prepare(self, documents: Sequence[Document], query: str) -> tuple[list[Document], str | None]:
        """``(candidates, prompt)``: the gated candidates, and the prompt — ``None`` when no call is needed."""
        docs = drop_restricted(documents)
        if len(docs) < 2:
            return docs, None
        return docs, build_listwise_prompt(query, docs[: self.window], max_chars=self.max_chars)

    def _finish(self, docs: list[Document], answer: str | None, error: BaseException | None) -> list[Document]:
        """The result: the model's order when ``answer`` names an id, else the input order (logged when a call
        was made: ``answer`` or ``error`` given); cut to ``k``."""
        head = docs[: self.window]
        ranked = parse_ranking(answer, len(head)) if answer is not None else None
        if ranked is None:
            if error is not None:
                logger.warning("listwise rerank: the model call failed (%s: %s); keeping the input order",
                               type(error).__name__, error)
            elif answer is not None:  # (neither: no call was needed)
                logger.warning("listwise rerank: no passage id in the model's answer %r; keeping the input order",
                               (answer or "")[:200])
            out = list(docs)
        else:
            m = len(head)
            out = [with_scores(head[i], rerank=1.0 - rank / m) for rank, i in enumerate(_complete(ranked, m))]
            out += docs[self.window:]
        return out if self.k is None else out[: self.k]

    def _ask(self, prompt: str, callbacks: Callbacks | None) -> tuple[str | None, BaseException | None]:
        """``(answer, None)``, or ``(None, error)`` when the model call fails (any failure degrades to the input
        order)."""
        try:
            return _message_text(self.llm.invoke(prompt, config={"callbacks": callbacks})), None
        except Exception as error:  # noqa: BLE001 - any model failure degrades to the input order
            return None, error

    async def _aask(self, prompt: str, callbacks: Callbacks | None) -> tuple[str | None, BaseException | None]:
        """Async twin of :meth:`_ask` (awaits ``llm.ainvoke``)."""
        try:
            return _message_text(await self.llm.ainvoke(prompt, config={"callbacks": callbacks})), None
        except Exception as error:  # noqa: BLE001 - any model failure degrades to the input order
            return None, error

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """The non-RESTRICTED ``documents`` in the model's order (first ``k``); see the class docstring."""
        docs, prompt = self._prepare(check_documents(documents, f"{type(self).__name__}.compress_documents"), query)
        if prompt is None:
            return self._finish(docs, None, None)
        return self._finish(docs, *self._ask(prompt, callbacks))

    async def acompress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """Async twin of :meth:`compress_documents` (awaits ``llm.ainvoke``)."""
        docs, prompt = self._prepare(check_documents(documents, f"{type(self).__name__}.compress_documents"), query)
        if prompt is None:
            return self._finish(docs, None, None)
        return self._finish(docs, *await self._aask(prompt, callbacks))
