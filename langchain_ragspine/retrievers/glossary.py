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
at a word boundary on that side (``BM25`` does not match inside ``BM250``; an English plural counts as the term:
``-s`` / ``-es``, ``-ies`` for a consonant and ``y`` — ``policies``, not ``policys``), other terms (Japanese, Chinese) match as substrings.  Where terms overlap the longest, leftmost one
wins.  Rewrites are written in NFKC (as the tokenizers read them).  Matching is a hash lookup per query position and
term length (the keys folded as ``re.IGNORECASE`` compares characters), not one regular expression of every term:
loading and matching stay fast for glossaries of tens of thousands of groups.

In the ``groups`` / ``expand`` mapping no other top-level key is allowed; a group is a list of two or more terms, not
a bare string (a ``terms:`` mapping holds nothing else); terms are strings (quote ``2023`` in YAML); a key written
twice in one mapping (JSON object) is an error, not "the last one wins".  A file of another shape, an empty file and a file that
gives no term a synonym are :class:`~langchain_ragspine.errors.RagSpineError` naming the file and, for YAML, the line.
"""

from __future__ import annotations

import reprlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig, RunnableSerializable
from pydantic import ConfigDict

from langchain_ragspine.arguments import PositiveIntField, check_arguments
from langchain_ragspine.errors import RagSpineError, json_type_name
from langchain_ragspine.retrievers._config_files import line_of, read_structured_file
from langchain_ragspine.retrievers._term_match import plural_endings
from langchain_ragspine.retrievers.base import check_query
from langchain_ragspine.retrievers.query_transform import QueryTransformRetriever
from langchain_ragspine.text.folding import fold_key, fold_query, normalize_spaces, simple_casefold

__all__ = ["Glossary", "GlossaryQueryRewriter", "GlossaryRetriever"]

#: A term beginning (ending) with one of these matches only at a word boundary on that side.
_ASCII_ALNUM = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
#: An index entry: ``(key, boundary on the left, boundary on the right, endings)`` — the indexed text is the term
#: (or its plural stem, :func:`~langchain_ragspine.retrievers._term_match.plural_endings`), one of ``endings``
#: follows it.
_Entry = tuple[str, bool, bool, tuple[str, ...]]

#: What ``[A-Za-z0-9]`` matches under ``re.IGNORECASE``, after
#: :func:`~langchain_ragspine.text.folding.simple_casefold` (``K`` Kelvin sign, ``ı``, ``ſ``, ``İ``
#: fold into it).
_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789")
_repr = reprlib.Repr()  # bounded: a malformed entry may be huge (YAML aliases)
_repr.maxlevel, _repr.maxlist, _repr.maxdict, _repr.maxstring, _repr.maxother = 2, 6, 6, 60, 60
_short = _repr.repr


class _Malformed(TypeError):
    """A glossary entry of the wrong shape; ``line`` is its line in a YAML file, when known."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.line = line


class Glossary:
    """Synonyms by term: the expansions a query term gets.

    Args:
        groups: synonym groups, each a list of two or more terms; every term of a group expands to the group's
            other terms, in the group's order.
        expand: one-way expansions ``term -> synonyms`` (a string or a list of strings).
        source: where the glossary came from (for messages), or ``None``.

    Terms are stored NFKC-normalised with runs of whitespace as one space, and looked up case-insensitively.
    A term's synonyms are listed in the order they were first given; a term that is its own synonym is skipped.
    Terms are found in a query by a hash lookup per start position and term length (:meth:`find`), so building
    takes time linear in the glossary's size and matching time linear in the query's length times the number of
    distinct term lengths — a 50,000-group glossary loads in about a second and rewrites a query in milliseconds.

    Raises:
        TypeError: a group that is not a list of two or more strings (a bare string is one term, not a group), or
            an expansion that is not a mapping of strings to a string or a list of strings.

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
        # spellings whose re.IGNORECASE fold differs from their key's (``Straße`` for ``strasse``, ``İstanbul``)
        self._other_spellings: dict[str, set[str]] = {}
        # (term key, synonym key) pairs added so far: one set of tuples of strings, which the garbage collector
        # stops tracking, rather than a set per term, which it would traverse on every full collection
        seen: set[tuple[str, str]] = set()
        for terms in _check_groups(groups if isinstance(groups, list) else list(groups)):
            spelled = [normalize_spaces(t) for t in terms]
            keys = [t.casefold() for t in spelled]
            for term_spelled, key in zip(spelled, keys, strict=True):
                self._add(key, term_spelled, spelled, keys, seen)
        for term, synonyms in _check_expansions(expand or {}).items():
            spelled = [normalize_spaces(s) for s in synonyms]
            self._add(fold_key(term), normalize_spaces(term), spelled, [s.casefold() for s in spelled], seen)
        self._index, self._lengths = self._build_index()

    def _add(self, key: str, spelled: str, synonyms: Sequence[str], synonym_keys: Sequence[str],
             seen: set[tuple[str, str]]) -> None:
        if not key:
            return
        self._spelling.setdefault(key, spelled)
        if simple_casefold(spelled) != simple_casefold(key):
            self._other_spellings.setdefault(key, set()).add(simple_casefold(spelled))
        out = self._synonyms.get(key)
        if out is None:
            out = self._synonyms[key] = []
        for synonym, synonym_key in zip(synonyms, synonym_keys, strict=True):
            if synonym_key and synonym_key != key and (key, synonym_key) not in seen:
                seen.add((key, synonym_key))
                out.append(synonym)

    def _build_index(self) -> tuple[dict[str, tuple[_Entry, ...]], dict[str, tuple[int, ...]]]:
        """``(index, lengths)``: every term with synonyms by its :func:`~langchain_ragspine.text.folding.simple_casefold` (and that of any spelling that folds
        otherwise, ``Straße``) — as ``(key, word boundary on the left, word boundary on the right, endings)``,
        sorted by key, a term that may take a plural indexed by its plural stem — and, by first folded character,
        the lengths indexed there, longest first."""
        index: dict[str, tuple[_Entry, ...]] = {}
        lengths: dict[str, set[int]] = {}
        for key, synonyms in self._synonyms.items():
            if not synonyms:
                continue
            left, right = key[0] in _ASCII_ALNUM, key[-1] in _ASCII_ALNUM
            for folded in sorted({simple_casefold(key), *self._other_spellings.get(key, ())}):
                endings: tuple[str, ...] = ("",)
                if right and folded[-1] in _WORD_CHARS and folded[-1].isalpha():
                    folded, endings = plural_endings(folded)
                entry = (key, left, right, endings)
                same = index.get(folded)
                index[folded] = (entry,) if same is None else tuple(sorted({*same, entry}))
                lengths.setdefault(folded[0], set()).add(len(folded))
        return index, {c: tuple(sorted(ls, reverse=True)) for c, ls in lengths.items()}

    def __len__(self) -> int:
        """The number of terms that have at least one synonym."""
        return sum(1 for v in self._synonyms.values() if v)

    def __repr__(self) -> str:
        where = f", source={self.source!r}" if self.source else ""
        return f"Glossary({len(self)} terms{where})"

    def synonyms(self, term: str) -> list[str]:
        """The synonyms of ``term`` (any case, any width), in glossary order; ``[]`` for an unknown term."""
        return list(self._synonyms.get(fold_key(term), []))

    def find(self, query: str) -> list[tuple[int, int, str]]:
        """``(start, end, term)`` of every glossary term in ``normalize_spaces(query)`` (NFKC, whitespace runs as one
        space),
        left to right, non-overlapping; ``term`` is the glossary's key (folded).

        Matching is case-insensitive as ``re.IGNORECASE``.  At each position the longest term that matches wins
        (equal lengths: the first key in code-point order); a term that begins (ends) with an ASCII letter or digit
        must not be preceded (followed) by one, and a term ending in an ASCII letter also matches in its English
        plural (:func:`~langchain_ragspine.retrievers._term_match.plural_endings`: ``-es`` / ``-s``, ``-ies`` after
        a consonant and ``y``; the longer ending tried first).  A term matches its own spelling as well as its case
        fold (``Straße`` and ``strasse``).  The scan goes on after the match.  ``[]`` for a non-string."""
        if not self._index or not isinstance(query, str):
            return []
        text = normalize_spaces(query)
        folded = simple_casefold(text)
        n = len(text)
        found: list[tuple[int, int, str]] = []
        index, lengths = self._index, self._lengths
        start = 0
        while start < n:
            end, key = _match_end(folded, start, index, lengths.get(folded[start], ()))
            if end < 0:
                start += 1
                continue
            found.append((start, end, key))
            start = end
        return found

    # -- files ------------------------------------------------------------------------------------------------------
    @classmethod
    def from_data(cls, data: Any, *, source: str | None = None) -> Glossary:
        """A glossary from parsed JSON / YAML data in one of the shapes of the module docstring.

        Raises:
            RagSpineError: the data has another shape: the message names ``source``, the line (for YAML data read
                with line numbers) and the offending group, term or key.
        """
        try:
            if isinstance(data, list):
                return cls(data, source=source)
            if isinstance(data, Mapping):
                reserved = [k for k in ("groups", "expand") if k in data]
                if not reserved:
                    return cls(expand=data, source=source)
                extra = [k for k in data if k not in ("groups", "expand")]
                if extra:
                    raise _Malformed(
                        f"unexpected top-level key {extra[0]!r} next to {reserved[0]!r}: a glossary mapping holds "
                        "'groups' (a list of synonym groups) and/or 'expand' (term: synonyms) and nothing else; "
                        "without them it is a plain mapping term: synonyms",
                        line_of(data, extra[0]),
                    )
                groups, expand = data.get("groups"), data.get("expand")
                if groups is not None and not isinstance(groups, list):
                    raise _Malformed(f"'groups' must be a list of synonym groups, got {json_type_name(groups)} "
                                     f"{_short(groups)}", line_of(data, "groups"))
                if expand is not None and not isinstance(expand, Mapping):
                    raise _Malformed(f"'expand' must map terms to synonyms (term: [synonym, …]), got "
                                     f"{json_type_name(expand)} {_short(expand)}", line_of(data, "expand"))
                return cls(groups or [], expand=expand or {}, source=source)
            raise _Malformed(f"a glossary is a list of synonym groups or a mapping, got {json_type_name(data)}")
        except _Malformed as e:
            raise RagSpineError(f"malformed glossary: {e}", path=source, line=e.line) from e

    @classmethod
    def from_file(cls, path: str | Path) -> Glossary:
        """Read a ``.json``, ``.yaml`` or ``.yml`` glossary file.

        An empty file (or one with only comments), and a file whose groups give no term a synonym, are errors:
        a glossary that rewrites nothing is a mistake, not a setting (to switch glossary rewriting off, leave the
        transformation out).

        Raises:
            RagSpineError: the file cannot be read, does not parse, writes a key twice in one mapping, is empty, has
                another shape or defines no synonym (file, line — YAML — and entry named).
        """
        data = read_structured_file(path, "glossary", lines=True, unique_keys=True)
        if data is None or (isinstance(data, (list, Mapping)) and not data):
            raise RagSpineError("the glossary is empty: write synonym groups, one per line, e.g. - [chunk, チャンク]",
                                path=path)
        glossary = cls.from_data(data, source=str(path))
        if not len(glossary):
            raise RagSpineError("the glossary defines no synonyms: every group has fewer than two distinct terms",
                                path=path)
        return glossary


def _match_end(folded: str, start: int, index: Mapping[str, Sequence[_Entry]],
               lengths: Sequence[int]) -> tuple[int, str]:
    """``(end, key)`` of the match at ``start`` of ``folded`` (see :meth:`Glossary.find`), or ``(-1, "")``: the
    longest indexed text whose word boundaries hold, with the longest of its endings after which the boundary
    holds."""
    n = len(folded)
    left_ok = start == 0 or folded[start - 1] not in _WORD_CHARS
    for length in lengths:
        end = start + length
        if end > n:
            continue
        entries = index.get(folded[start:end])
        if entries is None:
            continue
        for key, left, right, endings in entries:
            if left and not left_ok:
                continue
            for ending in endings:
                if ending and not folded.startswith(ending, end):
                    continue
                stop = end + len(ending)
                if not right or stop >= n or folded[stop] not in _WORD_CHARS:
                    return stop, key
    return -1, ""


def _check_groups(data: list[Any]) -> list[list[str]]:
    """The groups of ``data`` as lists of strings (a group may be written ``{terms: [...]}``).

    Raises:
        _Malformed: a group of another shape, naming the group, the term and (YAML) the line.
    """
    if data and all(isinstance(x, str) for x in data):
        raise _Malformed(
            f"a list of plain strings ({_short(data[0])}, …) is not a glossary: write each synonym group as a list, "
            f"e.g. - [{data[0]}, <synonym>] (or write a mapping term: [synonyms])", line_of(data, 0)
        )
    out = []
    for i, item in enumerate(data):
        where, line = f"group {i + 1}", line_of(data, i)
        if isinstance(item, Mapping):
            if "terms" not in item:
                raise _Malformed(f"{where} is a mapping without 'terms': {_short(dict(item))}", line)
            extra = [k for k in item if k != "terms"]
            if extra:
                raise _Malformed(f"{where} has the unexpected key {_short(extra[0])} next to 'terms': a group "
                                 "mapping holds 'terms' only", line_of(item, extra[0]))
            item, line = item["terms"], line_of(item, "terms")
        if isinstance(item, str):
            raise _Malformed(f"{where} is the single term {item!r}: a synonym group is a list of two or more terms, "
                             f"e.g. - [{item}, <synonym>]", line)
        terms = _check_terms(item, where, line)
        if len(terms) < 2:
            example = terms[0] if terms else "<term>"
            raise _Malformed(f"{where} is {_short(terms)}: a synonym group is a list of two or more terms, "
                             f"e.g. - [{example}, <synonym>]", line)
        out.append(terms)
    return out


def _check_expansions(data: Mapping[Any, Any]) -> dict[str, list[str]]:
    """``data`` (term -> a synonym or a list of them) as ``{term: [synonyms]}``.

    Raises:
        _Malformed: a term that is not a string, or synonyms of another shape (term and, for YAML, line named).
    """
    out = {}
    for term, synonyms in data.items():
        line = line_of(data, term)
        if not isinstance(term, str):
            raise _Malformed(f"a glossary term must be a string, got {json_type_name(term)} {_short(term)}"
                             f"{_quote_hint(term)}", line)
        out[term] = [synonyms] if isinstance(synonyms, str) else _check_terms(
            synonyms, f"the synonyms of {term!r}", line, one="a string or ")
    return out


def _check_terms(value: Any, where: str, line: int | None, one: str = "") -> list[str]:
    if not isinstance(value, (list, tuple)):
        raise _Malformed(f"{where} must be {one}a list of strings, got {json_type_name(value)} {_short(value)}", line)
    for j, term in enumerate(value):
        if not isinstance(term, str):
            raise _Malformed(f"{where} must be {one}a list of strings: term {j + 1} is {json_type_name(term)} "
                             f"{_short(term)}{_quote_hint(term)}", line_of(value, j) or line)
    return value if isinstance(value, list) else list(value)


def _quote_hint(value: Any) -> str:
    """A hint for a number, boolean or null that a YAML writer probably meant as text (``2023``, ``yes``)."""
    return " (quote it to make it a term)" if value is None or isinstance(value, (bool, int, float)) else ""


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
    NFKC-normalised.  A blank query gives ``[query]``; a non-string one is a ``TypeError``, as for the retrievers.

    Raises:
        TypeError: an unknown keyword argument (``max_query=2``: the message suggests ``max_queries``).
        TypeError / ValueError: a bad ``glossary`` or ``max_queries < 1``.
        RagSpineError: a glossary file that cannot be read, does not parse, is empty or malformed (file and
            line named).

    Example:
        >>> rewriter = GlossaryQueryRewriter([["チャンク", "chunk", "断片"], ["検索", "retrieval"]], max_queries=4)
        >>> rewriter.invoke("チャンクの検索")
        ['チャンクの検索', 'chunkの検索', 'チャンクのretrieval', '断片の検索']
    """

    glossary: Glossary
    max_queries: PositiveIntField = 5

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid")

    def __init__(self, glossary: Any = None, max_queries: int = 5, **data: Any) -> None:
        check_arguments(type(self).__name__, data, type(self).model_fields)
        if glossary is None:
            glossary = data.pop("glossary", None)
        if glossary is None:
            raise TypeError("GlossaryQueryRewriter needs a glossary (a Glossary, a file path, or glossary data)")
        super().__init__(glossary=_as_glossary(glossary), max_queries=max_queries, **data)

    def rewrite(self, query: str) -> list[str]:
        """``[query, *variants]`` (see the class docstring).

        Raises:
            TypeError: ``query`` is not a string (``None``, a list: use ``batch`` for several queries).
        """
        if not check_query(type(self).__name__, query, "rewrite").strip():
            return [query]
        out = [query]
        seen = {fold_query(query)}
        text = normalize_spaces(query)
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
        """``[input, *variants]``: :meth:`rewrite` as a Runnable (so it composes with ``|`` and ``batch``).

        Raises:
            TypeError: ``input`` is not a string — the same one-line message as the retrievers' (a list: use
                ``.batch``; a dict: ``itemgetter("question") | rewriter``).
        """
        return self._call_with_config(self.rewrite, check_query(type(self).__name__, input), config)


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
        ``fetch_k``, ``filter``, ``deny_list``, ``c``)

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
    init_arguments: ClassVar[tuple[str, ...]] = ("glossary", "max_queries")

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
