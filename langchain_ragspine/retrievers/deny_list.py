"""A deny-list gate on generated queries: a query an LLM (or a glossary) wrote that mentions a denied term is dropped
before it is searched.

Query transformations (HyDE, multi-query, RAG-Fusion, step-back, decomposition, glossary expansion) send text the
user never typed to the search backend.  A model may bring in a project code name, a person, or a topic the
deployment must not search for (its logs, a shared search service, a corpus where such a query would surface
documents out of scope).  :class:`QueryDenyList` is the gate every transformation runs its generated queries through
(:class:`~langchain_ragspine.retrievers.query_transform.QueryTransformRetriever`); the user's own query is never
rewritten or dropped by it.

Matching compares a *skeleton* of both sides (:func:`fold_term`), so a model cannot slip a term past the gate by
writing it another way.  The skeleton folds:

* compatibility forms, combining marks and invisible format characters (:func:`langchain_ragspine.sensitivity.fold`:
  NFKC — full-width ``ＯＲＩＯＮ``, half-width ``ｼｬｶﾞｲﾋ`` —, accents, zero-width spaces and joiners, soft hyphens);
* Traditional Chinese characters to Simplified (:func:`langchain_ragspine.tokenizers.fold_to_simplified`, OpenCC's
  character table — the fold the package's tokenizers apply, so ``機密項目`` would find the ``机密项目`` documents);
* case (``str.casefold``), and letters of other scripts that look like Latin letters to the letter they look like
  (:func:`langchain_ragspine._confusables.latin_skeleton`, from ``confusables.txt`` of Unicode Technical Standard #39:
  Cyrillic ``О`` in ``Project Оrion``, Greek ``Ρ``; ``i`` and ``l`` count as one letter);
* separators: whitespace, hyphens and dashes (Unicode category Pd), underscores (Pc), dots (``.``, ``。``) and middle
  dots (``·``, ``・``, ``‧``, ``∙``, ``⋅``, ``•``) are removed, so ``Project-Orion``, ``ProjectOrion``,
  ``project_orion`` and ``社 外 秘`` all match.

A query *mentions* a term when the term's skeleton is a substring of the query's.  Substring matching fails closed
(a term inside a longer word counts, and so does a term spread over two words: ``projector ion`` mentions ``Project
Orion``) and works for Japanese and Chinese, which have no spaces between words.  Not folded: digits for letters
(``Pr0ject``), hiragana for katakana, spellings in other words (a translation, an abbreviation) — list those as terms
of their own.  A dropped query is recorded by position and by the index of the term in the list, never by its text:
the trace must not repeat what the gate kept out.
"""

from __future__ import annotations

import unicodedata
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from langchain_ragspine._confusables import latin_skeleton
from langchain_ragspine.errors import RagSpineError, json_type_name
from langchain_ragspine.retrievers._config_files import YAML_SUFFIXES, read_structured_file, read_text_file
from langchain_ragspine.sensitivity import fold
from langchain_ragspine.tokenizers import fold_to_simplified

__all__ = ["DeniedQuery", "EmptyDenyListWarning", "QueryDenyList", "fold_term"]


class EmptyDenyListWarning(UserWarning):
    """A deny-list file holds no term, so the gate it was meant to set up is off."""


#: Dots and middle dots the skeleton removes (besides whitespace, dashes and connectors, by Unicode category).
_DOTS = frozenset(".。·・‧∙⋅•")


def _is_separator(ch: str) -> bool:
    return ch.isspace() or ch in _DOTS or unicodedata.category(ch) in ("Pd", "Pc")


def fold_term(text: str) -> str:
    """The skeleton the gate compares (see the module docstring): :func:`~langchain_ragspine.sensitivity.fold`,
    Traditional→Simplified, case and Latin look-alikes folded, separators removed.

    Example:
        >>> fold_term(" Ｐｒｏｊｅｃｔ\\u200b - ORION "), fold_term("Project \\u041erion"), fold_term("機密 項目")
        ('projectorion', 'projectorion', '机密项目')
    """
    return "".join(ch for ch in latin_skeleton(fold_to_simplified(fold(text))) if not _is_separator(ch))


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
        TypeError: ``terms`` is a string or a mapping (pass a list), or holds a non-string (the message gives its
            index).

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
        if isinstance(terms, Mapping):
            raise TypeError("terms must be a list of strings, not a mapping (read a file with QueryDenyList.from_file)")
        kept: list[str] = []
        folded: list[str] = []
        for index, term in enumerate(terms):
            if not isinstance(term, str):
                raise TypeError(
                    f"a denied term must be a string, got {type(term).__name__} at index {index}: {term!r}"
                )
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

        A file that holds no term (empty, only comments or blank lines, an empty list, an empty YAML document) gives
        an empty gate — every generated query passes — and an :class:`EmptyDenyListWarning` naming the file.

        Raises:
            RagSpineError: the file cannot be read, does not parse, or is not a list of strings (the message names
                the file, and for an entry that is not a string its position in the list and, when the parser
                knows it, its line).
        """
        p = Path(path)
        if p.suffix.lower() not in (".json", *YAML_SUFFIXES):
            lines = read_text_file(p, "deny-list").splitlines()
            gate = cls(line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#"))
        else:
            data = read_structured_file(p, "deny-list")
            key = None
            if isinstance(data, dict):
                key = "deny" if "deny" in data else "terms"
                data = data.get(key)
            if data is None and key is None:  # an empty YAML document
                data = []
            if not isinstance(data, list):
                raise RagSpineError("a deny-list is a list of strings (or a mapping with one under 'deny')", path=p)
            for index, term in enumerate(data):
                if not isinstance(term, str):
                    raise RagSpineError(
                        f"deny-list entry {index + 1} (index {index}) must be a string, got "
                        f"{json_type_name(term)}: {term!r}", path=p, line=_entry_line(p, key, index),
                    )
            gate = cls(data)
        if not gate:
            warnings.warn(
                f"the deny-list file {p} holds no term, so no generated query is dropped",
                EmptyDenyListWarning,
                stacklevel=2,
            )
        return gate


def _entry_line(path: Path, key: str | None, index: int) -> int | None:
    """The 1-based line of item ``index`` of the list in a JSON or YAML file (under ``key`` when the file is a
    mapping), or ``None`` when it cannot be told.  The file is composed into YAML nodes (JSON is YAML), never
    constructed into objects."""
    try:
        node = yaml.compose(path.read_text("utf-8"))
        if key is not None and isinstance(node, yaml.MappingNode):
            node = next(v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key)
        if isinstance(node, yaml.SequenceNode):
            return int(node.value[index].start_mark.line) + 1
    except Exception:  # noqa: BLE001 - only a better message is lost
        return None
    return None
