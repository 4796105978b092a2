"""A deny-list gate on generated queries: a query an LLM (or a glossary) wrote that mentions a denied term is dropped
before it is searched.

Query transformations (HyDE, multi-query, RAG-Fusion, step-back, decomposition, glossary expansion) send text the
user never typed to the search backend.  A model may bring in a project code name, a person, or a topic the
deployment must not search for (its logs, a shared search service, a corpus where such a query would surface
documents out of scope).  :class:`QueryDenyList` is the gate every transformation runs its generated queries through
(:class:`~langchain_ragspine.retrievers.query_transform.QueryTransformRetriever`); the user's own query is never
rewritten or dropped by it.

Matching folds both sides the way sensitivity labels are folded (:func:`langchain_ragspine.sensitivity.fold`: NFKC,
combining marks and zero-width characters removed), then case (``str.casefold``) and runs of whitespace: a query
*mentions* a term when the folded term is a substring of the folded query.  Substring matching fails closed (a term
inside a longer word counts) and works for Japanese and Chinese, which have no spaces between words.  A dropped query is recorded by position and by
the index of the term in the list, never by its text: the trace must not repeat what the gate kept out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from langchain_ragspine.errors import RagSpineError
from langchain_ragspine.retrievers._config_files import YAML_SUFFIXES, read_structured_file, read_text_file
from langchain_ragspine.sensitivity import fold

__all__ = ["DeniedQuery", "QueryDenyList", "fold_term"]


def fold_term(text: str) -> str:
    """``text`` as the gate compares it: :func:`~langchain_ragspine.sensitivity.fold`, ``casefold()``, and every run of
    whitespace as one space.

    Example:
        >>> fold_term(" Ｐｒｏｊｅｃｔ\\u200b  ORION ")
        'project orion'
    """
    return " ".join(fold(text).casefold().split())


@dataclass(frozen=True)
class DeniedQuery:
    """One generated query the gate dropped.

    Attributes:
        position: the query's position among the transformation's queries (0 is the user's query, which is never
            dropped; generated queries count from 1).
        term: the index, in :attr:`QueryDenyList.terms`, of the first denied term it mentions.
    """

    position: int
    term: int

    def record(self) -> dict[str, int | str]:
        """The trace entry: ``{"position": …, "term": …, "reason": "deny_list"}`` (no text)."""
        return {"position": self.position, "term": self.term, "reason": "deny_list"}


class QueryDenyList:
    """Terms that a generated query must not mention.

    Args:
        terms: the denied terms (any language); blank entries are ignored, duplicates (after folding) kept once.

    Raises:
        TypeError: ``terms`` is a string (pass a list) or holds a non-string.

    Example:
        >>> gate = QueryDenyList(["Project Orion", "社外秘"])
        >>> gate.denied_term("what is PROJECT ORION?"), gate.denied_term("梅雨の時期"), gate.denied_term("社外秘の資料")
        (0, None, 1)
        >>> kept, dropped = gate.split(["梅雨", "梅雨 project orion", "梅雨の季節"])
        >>> kept, [d.record() for d in dropped]
        (['梅雨', '梅雨の季節'], [{'position': 1, 'term': 0, 'reason': 'deny_list'}])
    """

    def __init__(self, terms: Iterable[str] = ()) -> None:
        if isinstance(terms, (str, bytes)):
            raise TypeError("terms must be a list of strings, not one string")
        kept: list[str] = []
        folded: list[str] = []
        for term in terms:
            if not isinstance(term, str):
                raise TypeError(f"a denied term must be a string, got {type(term).__name__}: {term!r}")
            f = fold_term(term)
            if f and f not in folded:
                kept.append(term)
                folded.append(f)
        self._terms = tuple(kept)
        self._folded = tuple(folded)

    @property
    def terms(self) -> tuple[str, ...]:
        """The terms, as given (blank and duplicate entries removed)."""
        return self._terms

    def __len__(self) -> int:
        return len(self._terms)

    def __bool__(self) -> bool:
        return bool(self._terms)

    def __repr__(self) -> str:
        return f"QueryDenyList({len(self._terms)} terms)"

    def denied_term(self, query: str) -> int | None:
        """The index of the first term ``query`` mentions, or ``None``.  A non-string query is denied (index 0 when
        there is any term): the gate fails closed."""
        if not self._folded:
            return None
        if not isinstance(query, str):
            return 0
        text = fold_term(query)
        for i, term in enumerate(self._folded):
            if term in text:
                return i
        return None

    def split(self, queries: Sequence[str], *, first: int = 0) -> tuple[list[str], list[DeniedQuery]]:
        """``(kept, dropped)``: the queries that mention no denied term, in order, and a :class:`DeniedQuery` for
        each one dropped; ``first`` is the position number of ``queries[0]`` (1 for a list of generated queries
        that follows the user's)."""
        kept: list[str] = []
        dropped: list[DeniedQuery] = []
        for pos, query in enumerate(queries, start=first):
            term = self.denied_term(query)
            if term is None:
                kept.append(query)
            else:
                dropped.append(DeniedQuery(pos, term))
        return kept, dropped

    @classmethod
    def from_file(cls, path: str | Path) -> QueryDenyList:
        """Read terms from a file: a JSON or YAML list of strings (``.json``, ``.yaml``, ``.yml``; a mapping with
        the list under ``deny`` or ``terms`` works too), or any other file as plain text, one term a line (blank
        lines and lines starting with ``#`` are skipped).

        Raises:
            RagSpineError: the file cannot be read, does not parse, or is not a list of strings (the message names
                the file).
        """
        p = Path(path)
        if p.suffix.lower() not in (".json", *YAML_SUFFIXES):
            lines = read_text_file(p, "deny-list").splitlines()
            return cls(line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#"))
        data = read_structured_file(p, "deny-list")
        if isinstance(data, dict):
            data = data.get("deny", data.get("terms"))
        if not isinstance(data, list) or not all(isinstance(t, str) for t in data):
            raise RagSpineError("a deny-list is a list of strings (or a mapping with one under 'deny')", path=p)
        return cls(data)
