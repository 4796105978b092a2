"""Glossary query expansion: deterministic query rewrites from a synonym file, no LLM.

Query expansion with a thesaurus is the oldest query transformation in IR (Voorhees, "Query Expansion using
Lexical-Semantic Relations", SIGIR 1994; Manning, Raghavan & Schütze, *Introduction to Information Retrieval*,
2008, §9.2.2): a term of the query is replaced by a synonym the collection may use instead — ``チャンク`` for
``chunk``, ``文本块`` for ``チャンク``, ``Okapi BM25`` for ``BM25``.  A lexical retriever only matches words that
are written, so an expansion reaches documents written with the other word; the rewritten queries are searched
separately and fused (:class:`GlossaryRetriever`, Reciprocal Rank Fusion as in RAG-Fusion), so the user's own
wording keeps its weight.

A glossary file is JSON or YAML (``.json``, ``.yaml``, ``.yml``), in any of three shapes:

.. code-block:: yaml

    # 1. a list of synonym groups: each term of a group stands for every other one
    - [チャンク, chunk, 文本块, 分块]
    - terms: [BM25, Okapi BM25]          # a group may also be written as a mapping with "terms"
    # 2. a mapping with "groups" (a list as above) and/or "expand" (one-way: the term gets the synonyms,
    #    the synonyms do not get the term)
    # groups: [[…], …]
    # expand: {RAG: [retrieval-augmented generation, 検索拡張生成]}
    # 3. a plain mapping term -> synonyms (one-way), e.g. {RAG: [retrieval-augmented generation]}

Terms are matched after NFKC and case folding; a term that begins or ends with an ASCII letter or digit matches only
at a word boundary on that side (``BM25`` does not match inside ``BM250``; an English plural ``-s`` / ``-es`` counts
as the term), other terms (Japanese, Chinese) match as substrings.  Where terms overlap the longest, leftmost one
wins.  Rewrites are written in NFKC (as the tokenizers read them).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig, RunnableSerializable
from pydantic import ConfigDict, field_validator

from langchain_ragspine.errors import RagSpineError
from langchain_ragspine.retrievers._config_files import read_structured_file
from langchain_ragspine.retrievers.query_transform import QueryTransformRetriever
from langchain_ragspine.retrievers.query_variants import fold_query

__all__ = ["Glossary", "GlossaryQueryRewriter", "GlossaryRetriever"]

_ASCII_WORD = re.compile(r"[A-Za-z0-9]")


def _norm(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).split())


def _key(text: str) -> str:
    return _norm(text).casefold()


class Glossary:
    """Synonyms by term: the expansions a query term gets.

    Args:
        groups: synonym groups; every term of a group expands to the group's other terms, in the group's order.
        expand: one-way expansions ``term -> synonyms``.
        source: where the glossary came from (for messages), or ``None``.

    Terms are stored NFKC-normalised with runs of whitespace as one space, and looked up case-insensitively.
    A term's synonyms are listed in the order they were first given; a term that is its own synonym is skipped.

    Raises:
        TypeError: a group or an expansion that is not a list of strings / a mapping of strings to lists of strings.

    Example:
        >>> g = Glossary([["チャンク", "chunk", "文本块"]], expand={"RAG": ["retrieval-augmented generation"]})
        >>> g.synonyms("CHUNK"), g.synonyms("rag"), g.synonyms("retrieval-augmented generation")
        (['チャンク', '文本块'], ['retrieval-augmented generation'], [])
    """

    def __init__(
        self,
        groups: Iterable[Sequence[str]] = (),
        *,
        expand: Mapping[str, Sequence[str]] | None = None,
        source: str | None = None,
    ) -> None:
        self.source = source
        self._synonyms: dict[str, list[str]] = {}
        self._spelling: dict[str, str] = {}
        for i, group in enumerate(groups):
            terms = _strings(group, f"group {i + 1}")
            for term in terms:
                self._add(term, terms)
        for term, synonyms in (expand or {}).items():
            if not isinstance(term, str):
                raise TypeError(f"a glossary term must be a string, got {type(term).__name__}: {term!r}")
            self._add(term, _strings(synonyms, f"the synonyms of {term!r}"))
        self._pattern = self._compile()

    def _add(self, term: str, synonyms: Sequence[str]) -> None:
        key = _key(term)
        if not key:
            return
        self._spelling.setdefault(key, _norm(term))
        out = self._synonyms.setdefault(key, [])
        for s in synonyms:
            if _key(s) and _key(s) != key and all(_key(s) != _key(x) for x in out):
                out.append(_norm(s))

    def _compile(self) -> re.Pattern[str] | None:
        keys = [k for k, v in self._synonyms.items() if v]
        if not keys:
            return None
        parts = []
        for key in sorted(keys, key=lambda k: (-len(k), k)):
            left = r"(?<![A-Za-z0-9])" if _ASCII_WORD.match(key[0]) else ""
            right = ""
            if _ASCII_WORD.match(key[-1]):  # an English plural counts as the term: chunk → chunks, index → indexes
                right = (r"(?:e?s)?" if key[-1].isalpha() else "") + r"(?![A-Za-z0-9])"
            parts.append(left + r"\s+".join(re.escape(w) for w in key.split(" ")) + right)
        return re.compile("|".join(parts), re.IGNORECASE)

    def __len__(self) -> int:
        """The number of terms that have at least one synonym."""
        return sum(1 for v in self._synonyms.values() if v)

    def __repr__(self) -> str:
        where = f", source={self.source!r}" if self.source else ""
        return f"Glossary({len(self)} terms{where})"

    def synonyms(self, term: str) -> list[str]:
        """The synonyms of ``term`` (any case, any width), in glossary order; ``[]`` for an unknown term."""
        return list(self._synonyms.get(_key(term), []))

    def find(self, query: str) -> list[tuple[int, int, str]]:
        """``(start, end, term)`` of every glossary term in ``_norm(query)`` (NFKC, whitespace runs as one space),
        left to right, longest match first, non-overlapping; ``term`` is the glossary's key (folded)."""
        if self._pattern is None or not isinstance(query, str):
            return []
        text = _norm(query)
        found = []
        for m in self._pattern.finditer(text):
            key = _key(m.group(0))
            for candidate in (key, key[:-1], key[:-2]):  # the term itself, or its plural
                if self._synonyms.get(candidate):
                    found.append((m.start(), m.end(), candidate))
                    break
        return found

    # -- files ------------------------------------------------------------------------------------------------------
    @classmethod
    def from_data(cls, data: Any, *, source: str | None = None) -> Glossary:
        """A glossary from parsed JSON / YAML data in one of the shapes of the module docstring.

        Raises:
            RagSpineError: the data has another shape (the message names ``source`` and the offending entry).
        """
        try:
            if isinstance(data, list):
                return cls(_groups(data), source=source)
            if isinstance(data, Mapping):
                if set(data) <= {"groups", "expand"} and data:
                    expand = data.get("expand") or {}
                    if not isinstance(expand, Mapping):
                        raise TypeError(f"'expand' must map terms to lists of synonyms, got {type(expand).__name__}")
                    return cls(_groups(data.get("groups") or []), expand=_expansions(expand), source=source)
                return cls(expand=_expansions(data), source=source)
            raise TypeError(f"a glossary is a list of synonym groups or a mapping, got {type(data).__name__}")
        except TypeError as e:
            raise RagSpineError(f"malformed glossary: {e}", path=source) from e

    @classmethod
    def from_file(cls, path: str | Path) -> Glossary:
        """Read a ``.json``, ``.yaml`` or ``.yml`` glossary file.

        Raises:
            RagSpineError: the file cannot be read, does not parse, or has another shape (file and entry named).
        """
        return cls.from_data(read_structured_file(path, "glossary"), source=str(path))


def _strings(value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        return [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(x, str) for x in value):
        raise TypeError(f"{where} must be a list of strings, got {value!r}"[:200])
    return list(value)


def _groups(data: Any) -> list[list[str]]:
    if not isinstance(data, list):
        raise TypeError(f"'groups' must be a list, got {type(data).__name__}")
    out = []
    for i, item in enumerate(data):
        if isinstance(item, Mapping):
            if "terms" not in item:
                raise TypeError(f"group {i + 1} is a mapping without 'terms': {dict(item)!r}"[:200])
            item = item["terms"]
        out.append(_strings(item, f"group {i + 1}"))
    return out


def _expansions(data: Mapping[Any, Any]) -> dict[str, list[str]]:
    out = {}
    for term, synonyms in data.items():
        if not isinstance(term, str):
            raise TypeError(f"a glossary term must be a string, got {term!r}")
        out[term] = _strings(synonyms, f"the synonyms of {term!r}")
    return out


def _as_glossary(value: Any) -> Glossary:
    if isinstance(value, Glossary):
        return value
    if isinstance(value, (str, Path)):
        return Glossary.from_file(value)
    if isinstance(value, (list, Mapping)):
        return Glossary.from_data(value)
    raise TypeError(f"glossary must be a Glossary, a file path, a list of groups or a mapping, got {value!r}"[:200])


class GlossaryQueryRewriter(RunnableSerializable[str, list[str]]):
    """Rewrite a query with a glossary's synonyms: ``query -> [query, variant, …]``, deterministic, no LLM.

    Each variant replaces one glossary term of the query (every occurrence of it) by one of its synonyms.  Variants
    are taken round-robin over the terms found, left to right — the first synonym of every term, then the second
    of every term, … — so a query with several glossary terms gets a variant for each before any term gets two.
    Variants equal to an earlier query (NFKC, case, whitespace) are skipped.

    Args:
        glossary: a :class:`Glossary`, a glossary file (``.json`` / ``.yaml``), or the data of one.
        max_queries: at most this many queries in all, the original included (default 5); ``1`` returns only the
            original.

    ``invoke(query)`` returns ``[query, *variants]`` — the original first and unchanged; variants are written
    NFKC-normalised.  A non-string or blank query gives ``[query]``.

    Raises:
        TypeError / ValueError: a bad ``glossary`` or ``max_queries < 1``.
        RagSpineError: a glossary file that cannot be read or parsed.

    Example:
        >>> rewriter = GlossaryQueryRewriter([["チャンク", "chunk", "断片"], ["検索", "retrieval"]], max_queries=4)
        >>> rewriter.invoke("チャンクの検索")
        ['チャンクの検索', 'chunkの検索', 'チャンクのretrieval', '断片の検索']
    """

    glossary: Glossary
    max_queries: int = 5

    model_config = ConfigDict(arbitrary_types_allowed=True)

    def __init__(self, glossary: Any = None, max_queries: int = 5, **data: Any) -> None:
        if glossary is None:
            glossary = data.pop("glossary", None)
        if glossary is None:
            raise TypeError("GlossaryQueryRewriter needs a glossary (a Glossary, a file path, or glossary data)")
        super().__init__(glossary=_as_glossary(glossary), max_queries=max_queries, **data)

    @field_validator("max_queries", mode="before")
    @classmethod
    def _check_max(cls, value: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"max_queries must be an int >= 1, got {value!r}")
        return value

    def rewrite(self, query: str) -> list[str]:
        """``[query, *variants]`` (see the class docstring)."""
        if not isinstance(query, str) or not query.strip():
            return [query]
        out = [query]
        seen = {fold_query(query)}
        text = _norm(query)
        matches = self.glossary.find(query)
        # one entry per distinct term, in order of first appearance, with every span of it
        spans: dict[str, list[tuple[int, int]]] = {}
        for start, end, key in matches:
            spans.setdefault(key, []).append((start, end))
        options = [(key, self.glossary.synonyms(key)) for key in spans]
        depth = max((len(s) for _, s in options), default=0)
        for level in range(depth):
            for key, synonyms in options:
                if len(out) >= self.max_queries:
                    return out
                if level >= len(synonyms):
                    continue
                variant = _replace(text, spans[key], synonyms[level])
                folded = fold_query(variant)
                if folded not in seen:
                    seen.add(folded)
                    out.append(variant)
        return out

    def invoke(self, input: str, config: RunnableConfig | None = None, **kwargs: Any) -> list[str]:
        """``[input, *variants]``: :meth:`rewrite` as a Runnable (so it composes with ``|`` and ``batch``)."""
        return self._call_with_config(self.rewrite, input, config)


def _replace(text: str, spans: Sequence[tuple[int, int]], synonym: str) -> str:
    out, last = [], 0
    for start, end in spans:
        out.append(text[last:start])
        out.append(synonym)
        last = end
    out.append(text[last:])
    return "".join(out)


class GlossaryRetriever(QueryTransformRetriever):
    """Search ``base`` with the query and its glossary rewrites (:class:`GlossaryQueryRewriter`); fuse by RRF.

    ``GlossaryRetriever(base, rewriter)`` — or ``GlossaryRetriever(base, glossary=path, max_queries=5)``.

    Attributes:
        rewriter: the :class:`GlossaryQueryRewriter`.
        (and those of :class:`~langchain_ragspine.retrievers.query_transform.QueryTransformRetriever`: ``k``,
        ``candidate_k``, ``filter``, ``deny_list``, ``c``)

    Deterministic and offline.  A query with no glossary term is searched alone, so its results are the base's
    (with a trace entry); rewrites pass the deny-list like any generated query.

    Example:
        >>> from langchain_core.documents import Document
        >>> from langchain_ragspine import BM25Retriever
        >>> docs = [Document(page_content="A chunk is a slice of the source.", metadata={"chunk_id": "en#0"}),
        ...         Document(page_content="チャンクの大きさは480文字。", metadata={"chunk_id": "ja#0"})]
        >>> retriever = GlossaryRetriever(BM25Retriever.from_documents(docs), glossary=[["チャンク", "chunk"]], k=2)
        >>> sorted(d.metadata["chunk_id"] for d in retriever.invoke("チャンク"))
        ['en#0', 'ja#0']
    """

    rewriter: GlossaryQueryRewriter

    transform_name: ClassVar[str] = "glossary"

    def __init__(self, base: BaseRetriever | None = None, rewriter: GlossaryQueryRewriter | None = None, /,
                 **data: Any) -> None:
        if rewriter is None and "glossary" in data:
            rewriter = GlossaryQueryRewriter(data.pop("glossary"), max_queries=data.pop("max_queries", 5))
        if rewriter is not None:
            data["rewriter"] = rewriter
        super().__init__(base, **data)

    def generate(self, query: str, config: RunnableConfig | None = None) -> tuple[list[str], int]:
        """The rewrites of ``query`` (no model call)."""
        return self.rewriter.rewrite(query)[1:], 0

    async def agenerate(self, query: str, config: RunnableConfig | None = None) -> tuple[list[str], int]:
        """The rewrites of ``query`` (no model call, no thread)."""
        return self.generate(query, config)
