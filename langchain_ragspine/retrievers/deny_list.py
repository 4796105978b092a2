"""A deny-list gate on generated queries: a query an LLM (or a glossary) wrote that mentions a denied term is dropped
before it is searched.

Query transformations (HyDE, multi-query, RAG-Fusion, step-back, decomposition, glossary expansion) send text the
user never typed to the search backend.  A model may bring in a project code name, a person, or a topic the
deployment must not search for (its logs, a shared search service, a corpus where such a query would surface
documents out of scope).  :class:`QueryDenyList` is the gate every transformation runs its generated queries through
(:class:`~langchain_ragspine.retrievers.query_transform.QueryTransformRetriever`); the user's own query is never
rewritten or dropped by it.

Matching compares a *skeleton* of both sides, so a model cannot slip a term past the gate by writing it another
way.  The skeleton folds:

* compatibility forms, combining marks and invisible format characters (:func:`langchain_ragspine.text.folding.fold`:
  NFKC — full-width ``ＯＲＩＯＮ``, half-width ``ｼｬｶﾞｲﾋ`` —, accents, zero-width spaces and joiners, soft hyphens);
* Traditional Chinese characters to Simplified (:func:`langchain_ragspine.text.chinese.fold_to_simplified`, OpenCC's
  character table — the fold the package's tokenizers apply, so ``機密項目`` would find the ``机密项目`` documents);
* case (``str.casefold``), and letters of other scripts that look like Latin letters to the letter they look like
  (:func:`langchain_ragspine.text.confusables.latin_skeleton`, from ``confusables.txt`` of Unicode Technical Standard #39:
  Cyrillic ``О`` in ``Project Оrion``, Greek ``Ρ``; a look-alike of a capital ``I`` such as Cyrillic ``Ӏ`` matches
  either ``i`` or ``l``).  The ASCII letters ``i`` and ``l`` are not folded together;
* separators: whitespace, hyphens and dashes (Unicode category Pd), underscores (Pc), dots (``.``, ``。``) and middle
  dots (``·``, ``・``, ``‧``, ``∙``, ``⋅``, ``•``) all read as one separator.

A query *mentions* a term by this rule (the term is cut into runs of Latin letters and digits — its *Latin words* —
and every other character, such as a CJK character or kana):

* Between any two parts of the term, the query may have separators or none: ``Project Orion`` matches
  ``ProjectOrion``, ``Project-Orion``, ``project_orion``; ``社外秘`` matches ``社 外 秘`` and ``社・外・秘``.
* A Latin word may also be spelled letter by letter with separators: ``AI`` matches ``A.I.``, ``A-I``, ``A I``.
* A run of Latin words must start and end at a word boundary of the query: the character before it and the character
  after it is not a Latin letter or digit.  So ``AI`` does not match ``rainy``, ``email``, ``Data Integration``
  (``a I`` across two words, not at a boundary) nor ``Al Gore``, and ``ml`` does not match ``HTML`` or ``similar``.
  A CJK character next to a Latin word is a boundary (``AIの活用`` mentions ``AI``).
* Every other character matches as a substring (Japanese and Chinese have no spaces between words):
  ``社外秘の資料`` mentions ``社外秘``.

The trade-off: before this rule a term matched as a substring of the query with separators removed and ``i``/``l``
folded together, which failed closed on a term spread over two words (``projector ion``) but dropped most innocent
queries for a short Latin term (``AI`` dropped 42 % of 1,199 English documentation sentences, ``IT`` 53 %).  Now a
Latin term inside a longer word (``Orions``, ``OrionDB``), one word split differently (the term ``ProjectOrion``
does not match ``Project Orion`` — list the spaced form, which matches both), and an ASCII ``l`` written for a
capital ``I`` (``ORlON``) pass the gate: list such spellings as terms of their own.  Not folded either: digits for
letters (``Pr0ject``), hiragana for katakana, spellings in other words (a translation, an abbreviation).  A dropped
query is recorded by position and by the index of the term in the list the user gave, never by its text: the trace
must not repeat what the gate kept out.

The gate runs on the queries that one transformation generates.  A transformation wrapped inside another takes the
outer one's queries as the user's own and never drops them, so give each LLM layer its own ``deny_list`` (or pass the
same list to every layer).
"""

from __future__ import annotations

import re
import unicodedata
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import yaml

from langchain_ragspine.errors import RagSpineError, json_type_name
from langchain_ragspine.retrievers._config_files import YAML_SUFFIXES, read_structured_file, read_text_file
from langchain_ragspine.text.chinese import fold_to_simplified
from langchain_ragspine.text.confusables import I_OR_L, latin_skeleton
from langchain_ragspine.text.folding import fold

__all__ = ["DeniedQuery", "EmptyDenyListWarning", "QueryDenyList", "fold_term"]


class EmptyDenyListWarning(UserWarning):
    """A deny-list file holds no term, so the gate it was meant to set up is off."""


#: Dots and middle dots the skeleton removes (besides whitespace, dashes and connectors, by Unicode category).
_DOTS = frozenset(".。·・‧∙⋅•")


def _is_separator(ch: str) -> bool:
    return ch.isspace() or ch in _DOTS or unicodedata.category(ch) in ("Pd", "Pc")


def _spaced_skeleton(text: str) -> str:
    """The skeleton of ``text`` with each separator written as one space (see the module docstring)."""
    return "".join(" " if _is_separator(ch) else ch for ch in latin_skeleton(fold_to_simplified(fold(text))))


def fold_term(text: str) -> str:
    """The skeleton the gate compares, separators removed (see the module docstring):
    :func:`~langchain_ragspine.text.folding.fold`, Traditional→Simplified, case and Latin look-alikes folded.

    Example:
        >>> fold_term(" Ｐｒｏｊｅｃｔ\\u200b - ORION "), fold_term("Project \\u041erion"), fold_term("機密 項目")
        ('projectorion', 'projectorion', '机密项目')
    """
    return _spaced_skeleton(text).replace(" ", "")


#: The characters of a Latin word in a skeleton: ASCII letters and digits, and the look-alike of ``I``/``l``.
_LATIN = frozenset("abcdefghijklmnopqrstuvwxyz0123456789" + I_OR_L)
_NOT_LATIN_BEFORE = f"(?<![a-z0-9{I_OR_L}])"
_NOT_LATIN_AFTER = f"(?![a-z0-9{I_OR_L}])"


def _letter(ch: str) -> str:
    """The pattern of one skeleton character of a term (``i``/``l`` also match a look-alike of either)."""
    if ch in "il":
        return f"[{ch}{I_OR_L}]"
    if ch == I_OR_L:
        return f"[il{I_OR_L}]"
    return re.escape(ch)


def _latin_word(word: str) -> str:
    """A Latin word of a term: written as one word, or (two letters or more) spelled with separators (``a.i.``)."""
    joined = "".join(_letter(ch) for ch in word)
    if len(word) < 2:
        return joined
    return f"(?:{joined}|{' +'.join(_letter(ch) for ch in word)})"


def _term_pattern(term: str) -> str | None:
    """The regular expression a query's spaced skeleton must contain to mention ``term`` (``None``: the term is
    only separators).  Parts of the term are joined by `` *`` (separators or none); a run of Latin words is
    bounded by no Latin letter or digit either side."""
    skeleton = _spaced_skeleton(term)
    parts: list[tuple[bool, str]] = []  # (is a Latin word, text), in order; separators dropped
    for ch in skeleton:
        if ch == " ":
            if parts and parts[-1][0] and parts[-1][1]:
                parts.append((True, ""))  # a separator ends a Latin word
            continue
        latin = ch in _LATIN
        if latin and parts and parts[-1][0]:
            parts[-1] = (True, parts[-1][1] + ch)
        else:
            parts.append((latin, ch))
    parts = [p for p in parts if p[1]]
    if not parts:
        return None
    out: list[str] = []
    for i, (latin, text) in enumerate(parts):
        if not latin:
            out.append(re.escape(text))
            continue
        starts_run = i == 0 or not parts[i - 1][0]
        ends_run = i == len(parts) - 1 or not parts[i + 1][0]
        before = _NOT_LATIN_BEFORE if starts_run else ""
        after = _NOT_LATIN_AFTER if ends_run else ""
        out.append(before + _latin_word(text) + after)
    return " *".join(out)


@dataclass(frozen=True)
class DeniedQuery:
    """One generated query the gate dropped.

    Attributes:
        position: the query's position among the transformation's queries (0 is the user's query, which is never
            dropped; generated queries count from 1).
        term: the index, in the list of terms the user gave (blank and duplicate entries counted), of the first
            denied term it mentions; for a duplicate, its first occurrence.
    """

    position: int
    term: int

    def record(self) -> dict[str, int | str]:
        """The trace entry: ``{"position": …, "term": …, "reason": "deny_list"}`` (no text)."""
        return {"position": self.position, "term": self.term, "reason": "deny_list"}


class QueryDenyList:
    """Terms that a generated query must not mention.

    Args:
        terms: the denied terms (any language); blank entries (and entries of separators only) are ignored,
            duplicates (after folding) kept once.  A non-empty list in which every entry is ignored warns
            :class:`EmptyDenyListWarning`: the gate is off.

    Raises:
        TypeError: ``terms`` is a string or a mapping (pass a list), or holds a non-string (the message gives its
            index).

    Example:
        >>> gate = QueryDenyList(["Project Orion", "社外秘", "AI"])
        >>> gate.denied_term("what is PROJECT ORION?"), gate.denied_term("梅雨の時期"), gate.denied_term("社外秘の資料")
        (0, None, 1)
        >>> gate.denied_term("A.I. strategy"), gate.denied_term("rainy season"), gate.denied_term("Al Gore")
        (2, None, None)
        >>> kept, dropped = gate.split(["梅雨", "梅雨 project orion", "梅雨の季節"])
        >>> kept, [d.record() for d in dropped]
        (['梅雨', '梅雨の季節'], [{'position': 1, 'term': 0, 'reason': 'deny_list'}])
    """

    def __init__(self, terms: Iterable[str] = ()) -> None:
        given = self._load(terms)
        if given and not self._terms:
            warnings.warn(
                f"the deny-list's {given} entr{'y' if given == 1 else 'ies'} hold no term (blank or only separators), "
                "so no generated query is dropped",
                EmptyDenyListWarning,
                stacklevel=2,
            )

    def _load(self, terms: Iterable[str]) -> int:
        """Set the terms; returns how many entries were given."""
        if isinstance(terms, (str, bytes)):
            raise TypeError("terms must be a list of strings, not one string")
        if isinstance(terms, Mapping):
            raise TypeError("terms must be a list of strings, not a mapping (read a file with QueryDenyList.from_file)")
        kept: list[str] = []
        patterns: list[str] = []
        indexes: list[int] = []
        given = 0
        for index, term in enumerate(terms):
            given += 1
            if not isinstance(term, str):
                raise TypeError(
                    f"a denied term must be a string, got {type(term).__name__} at index {index}: {term!r}"
                )
            pattern = _term_pattern(term)
            if pattern is not None and pattern not in patterns:
                kept.append(term)
                patterns.append(pattern)
                indexes.append(index)
        self._terms = tuple(kept)
        self._patterns = tuple(re.compile(p) for p in patterns)
        self._indexes = tuple(indexes)
        return given

    @property
    def terms(self) -> tuple[str, ...]:
        """The terms, as given (blank and duplicate entries removed, so a position here may differ from the
        index :meth:`denied_term` and the trace give, which count in the list the user gave)."""
        return self._terms

    def __len__(self) -> int:
        return len(self._terms)

    def __bool__(self) -> bool:
        return bool(self._terms)

    def __repr__(self) -> str:
        return f"QueryDenyList({len(self._terms)} terms)"

    def denied_term(self, query: str) -> int | None:
        """The index, in the list of terms given, of the first term ``query`` mentions (see the module docstring), or
        ``None``.  A non-string query is denied (the first term's index, when there is any term): the gate fails
        closed."""
        if not self._patterns:
            return None
        if not isinstance(query, str):
            return self._indexes[0]
        text = _spaced_skeleton(query)
        for index, pattern in zip(self._indexes, self._patterns, strict=True):
            if pattern.search(text):
                return index
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
            gate = cls.__new__(cls)
            gate._load(line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#"))
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
            gate = cls.__new__(cls)
            gate._load(data)
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
