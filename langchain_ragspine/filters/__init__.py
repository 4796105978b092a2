"""Metadata predicates: one evaluator for every retrieval channel, applied before scoring.

A filter is a ``dict``; every entry must hold (AND).  An entry is a metadata field mapped to a condition, or a
logical operator::

    {"lang": "ja"}                                  # eq
    {"tags": ["uv", "python"]}                      # in
    {"year": {"gte": 2020, "lt": 2024}}             # range: every operator of a field must hold
    {"updated": {"between": ["2024-01-01", "2024-06-30"]}}
    {"dept": {"nin": ["hr", "legal"]}}
    {"draft": {"$not": {"eq": True}}}                # NOT of a field condition
    {"$or": [{"lang": "ja"}, {"year": {"gte": 2024}}]}
    {"$and": [{"dept": "a"}, {"$not": {"tags": "old"}}]}

Comparison operators: ``eq ne in nin gt gte lt lte between`` and ``not`` inside a field's condition (each also
written with a leading ``$``, as in MongoDB / Chroma / LangChain vector-store filters).  Logical operators at the
top level of a filter (or of a nested one): ``$and`` and ``$or`` (a non-empty list of filters) and ``$not`` (a
filter).  A bare value means ``eq``, a list/tuple/set means ``in``.

Semantics (fail closed, because filters often scope access):

* **The stored value decides the type.**  A string in metadata compares as a string: ``{"order_id": "0098231"}``
  does not match ``"98231"``, ``{"version": "1.10"}`` does not match ``"1.1"`` (and ``{"version": {"ne": "1.10"}}``
  does).  Only where the stored value is a number, a boolean or a date is the operand converted to that type, never
  the other way round: the operand ``"2020"`` matches a stored ``2020``, ``"false"`` (also ``no``/``off``, as in
  YAML) a stored ``False``, ``"2024-01-01"`` orders against a stored date.  Dates are ``date``/``datetime`` values
  and the ISO-8601 strings they become in JSON (the loader, the chunk store and saved indexes keep front-matter
  dates as ``"2026-11-01"`` / ``"2026-11-01T10:00:00+09:00"``); a date without a time zone is UTC.  For equality a
  number operand equals a stored string spelled the same (``98231`` equals ``"98231"``).  Ordering operators
  (``gt``, ``between``, …) compare like with like: numbers as numbers, dates as points in time, strings by code
  point; a value that cannot be converted to the stored type does not match (a stored date: see Errors), and
  booleans have no order.
* **Missing fields never match** — for every operator, ``ne``, ``nin`` and ``not`` included.  ``None``, NaN and an
  empty list count as missing.  Logical operators follow SQL's three-valued logic (ISO/IEC 9075, as for ``NULL``):
  a condition on a missing field is *unknown*; ``$not`` of unknown is unknown, ``$and`` is false when any part is
  false, ``$or`` true when any part is true; only a filter that is *true* matches.  So
  ``{"$not": {"dept": "hr"}}`` matches a ``dept: "sales"`` chunk but never a chunk without ``dept``, and
  ``{"$or": [{"dept": "hr"}, {"lang": "ja"}]}`` matches a ``lang: "ja"`` chunk that has no ``dept``.  A missing
  field counts only where it would decide the result: ``{"$not": {"$and": [{"dept": "hr"}, {"lang": "ja"}]}}``
  matches a ``lang: "en"`` chunk without ``dept`` (whatever its ``dept`` were, the ``$and`` is false).
* **List-valued metadata** (``tags: ["uv", "python"]``) matches a positive operator when *any* element matches;
  ``ne``/``nin`` match when *no* element equals / is in the value(s).
* **Errors, not silent empty results.**  An unknown operator (naming the valid ones), a malformed operand
  (``between`` without two bounds, ``in`` with a scalar, a ``dict`` where a value belongs) or an empty field name
  raises ``ValueError`` when the filter is compiled — before any retrieval.  An operand compared with a stored date
  that is not a date this module reads raises ``ValueError`` naming the accepted formats (:data:`DATE_FORMATS`)
  when the mask is computed, still before scoring: for ``gt``/``gte``/``lt``/``lte``/``between`` any such operand
  (``2024/01/01``, ``2024``), for ``eq``/``ne``/``in``/``nin`` a date-shaped one (``2024/01/01``, ``2024-1-1``,
  ``2024年1月1日``; a plain word is simply not equal) — where the evaluation meets such a stored date: a chunk is
  evaluated only as far as decides it, so an operand the result does not depend on may pass.  A field holding
  dates in some chunks and other strings in others is therefore best filtered with ISO dates.  A field that no
  indexed chunk has produces an :class:`UnknownFilterFieldWarning` naming the closest known fields
  (:class:`FilterMasks`; one warning each for the first :data:`MAX_FIELD_WARNINGS` such fields, one for the rest),
  once per process for each field and set of known fields, on every backend and channel (:func:`unreported_fields`).
* **Bounded size.**  A filter nests at most :data:`MAX_FILTER_DEPTH` (64) dicts and lists — each ``$and`` /
  ``$or`` level is two (a dict in a list), a ``$not`` or a field's ``not`` one, so about 30 levels of ``$and`` —,
  holds at most :data:`MAX_FILTER_NODES` (1,000) nodes — every key of every dict in it counts one: a field, a
  logical operator, a comparison operator, so ``{"$or": [{"x": 1}, {"x": 2}]}`` is three —, its ``in`` / ``nin``
  / ``between`` lists hold at most :data:`MAX_FILTER_VALUES` (10,000) values, one list or all of them together,
  and its strings — field names, operators, values — at most :data:`MAX_FILTER_CHARS` (1,000,000) characters
  together.  Beyond any of these a ``ValueError`` names the limit, before anything recursive (compiling, hashing,
  printing) touches the filter: one walk (:func:`check_filter_size`), whatever the entry point —
  :func:`compile_filter`, :func:`matches`, :func:`and_filters`, :func:`filter_key`, every retriever and vector
  store, and the SQL compiler of :mod:`langchain_ragspine.filters.sql`, which validates here first (so PostgreSQL
  refuses exactly the same filters, and a filter's SQL never needs more than 6 parameters per node: at most
  6,000, well under PostgreSQL's 65,535 per statement).
* **Compiled once per call, evaluated as far as needed.**  A filter compiles in time linear in its size into a
  :class:`CompiledFilter` (:func:`compiled_filter`): a retriever's call compiles its filter once, at the door, and
  every channel, gate and merge of the call — the retriever's own filter ANDed in, a hybrid's BM25 and dense
  channels, the SQL of both PostgreSQL channels — reuses it.  Evaluated per chunk, every ``$and`` / ``$or`` stops
  as soon as its answer is known (a flat filter of many fields the chunk lacks is decided by the first), one
  field's tests under one ``$and`` / ``$or`` are one test memoised per distinct stored value, and the equalities
  of one field in an ``$or`` (``ne`` / ``nin`` in an ``$and``) are one set lookup — in SQL too.

Retrievers combine a filter given at call time with their own ``filter`` by AND (:func:`and_filters`): a call can
narrow what a retriever returns, never widen it.

The CLI form (:func:`parse_filter_expressions`) writes the same predicates as ``FIELD<op>VALUE``: ``year>=2020``,
``year<2024``, ``dept!=hr``, ``tags=uv,python`` (a comma list means ``in``; ``!=`` with a list means ``nin``),
``year=2019..2021`` (``between``, inclusive).  Its values are strings, typed by the stored field as above.
"""

from __future__ import annotations

import difflib
import re
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Annotated, Any, TypeVar

import numpy as np
from pydantic import AfterValidator

from langchain_ragspine.filters.values import DATE_FORMATS as DATE_FORMATS
from langchain_ragspine.filters.values import LOGICAL_OPERATORS as LOGICAL_OPERATORS
from langchain_ragspine.filters.values import NO_FORM as _NO
from langchain_ragspine.filters.values import OPERATORS as OPERATORS
from langchain_ragspine.filters.values import SCALAR_TYPES as _SCALAR_TYPES
from langchain_ragspine.filters.values import SEQUENCES as _SEQUENCES
from langchain_ragspine.filters.values import TIME as _TIME
from langchain_ragspine.filters.values import Operand as _Operand
from langchain_ragspine.filters.values import date_error as _date_error
from langchain_ragspine.filters.values import elements as _elements
from langchain_ragspine.filters.values import is_value_list as _is_value_list
from langchain_ragspine.filters.values import op_name as _op_name
from langchain_ragspine.filters.values import operand as _operand
from langchain_ragspine.filters.values import operand_list as _operand_list

__all__ = [
    "MAX_FIELD_WARNINGS",
    "MAX_FILTER_CHARS",
    "MAX_FILTER_DEPTH",
    "MAX_FILTER_NODES",
    "MAX_FILTER_VALUES",
    "and_filters",
    "check_filter_size",
    "compile_filter",
    "compiled_filter",
    "CompiledFilter",
    "Condition",
    "FilterField",
    "checked_filter",
    "filter_fields",
    "filter_key",
    "FilterMasks",
    "matches",
    "parse_filter_expression",
    "parse_filter_expressions",
    "Predicate",
    "Test",
    "reset_filter_warnings",
    "unknown_field_message",
    "unreported_fields",
    "UnknownFilterFieldWarning",
    "warn_unknown_fields",
]

Predicate = Callable[[Mapping[str, Any]], bool]

#: The deepest a filter may nest dicts and lists (the filter itself is level 1; ``{"$and": [{...}]}`` is three
#: levels, ``{"$not": {...}}`` two): deeper filters raise ``ValueError`` (a filter ~1,000 levels deep would otherwise
#: exhaust Python's recursion limit somewhere in compiling, hashing or printing it).
MAX_FILTER_DEPTH = 64
#: The most values the ``in`` / ``nin`` / ``between`` lists of one filter may hold, one list or all of them together
#: (more raise ``ValueError``): a filter is a condition, not a table to join against; a longer list belongs in the
#: metadata (a tag or a group field).
MAX_FILTER_VALUES = 10_000
#: The most nodes a filter may hold, counting every key of every dict in it — a field, a logical operator
#: (``$and`` / ``$or`` / ``$not``), a comparison operator — across its nesting (more raise ``ValueError``): an
#: ``$or`` of 30,000 equalities (or 50,000 fields) got around :data:`MAX_FILTER_VALUES`, took seconds per call to
#: evaluate and was more than PostgreSQL's 65,535 parameters of one statement.  Lowered from 10,000 (issue 25): in
#: PostgreSQL every field test is a per-row subplan, and a hybrid search of 300 chunks with a filter of 10,000
#: nodes took 7 s (10,000 fields) or hit the 30 s statement timeout (an ``$and`` of 4,999 ``ne`` tests of two
#: fields); at 1,000 nodes the worst measured is under a second.  Filters that list many values take them in
#: ``in`` / ``nin`` lists (:data:`MAX_FILTER_VALUES`, one node each list).
MAX_FILTER_NODES = 1_000
#: The most characters the strings of a filter may hold together — every field name, operator and string value
#: counts its length (more raise ``ValueError``): 10,000 ids of 36 characters (UUIDs) take 360,000, while a ``nin``
#: of 9,999 strings of 10,000 characters (100 MB) took 77 s per search on PostgreSQL, shipping the list with every
#: statement.
MAX_FILTER_CHARS = 1_000_000


class UnknownFilterFieldWarning(UserWarning):
    """A filter names a metadata field that no indexed chunk has (it can only match nothing)."""


# -- field conditions -----------------------------------------------------------------------------------------------
Test = Callable[[list[tuple[int, Any]]], bool]  # over the non-empty elements of one field


# The tests bind what they use as default arguments, not as closure cells: one tuple instead of a cell per name (a
# filter of 10,000 conditions allocates fewer objects, which is what the garbage collector's time grows with).
def _eq_test(field: str, o: _Operand) -> Test:
    def eq(els: list[tuple[int, Any]], forms: dict[int, Any] = o.eq, date_like: bool = o.date_like,
           field: str = field, o: _Operand = o) -> bool:
        for kind, v in els:
            f = forms.get(kind, _NO)
            if f is _NO:
                if kind == _TIME and date_like:
                    raise _date_error(field, o)
            elif f == v:
                return True
        return False

    return eq


def _in_test(field: str, ops: list[_Operand]) -> Test:
    sets: dict[int, set[Any]] = {}
    for o in ops:
        for kind, f in o.eq.items():
            sets.setdefault(kind, set()).add(f)
    bad = next((o for o in ops if o.date_like), None)

    def in_(els: list[tuple[int, Any]], sets: dict[int, set[Any]] = sets, bad: _Operand | None = bad,
            field: str = field) -> bool:
        for kind, v in els:
            if kind == _TIME and bad is not None:
                raise _date_error(field, bad)
            s = sets.get(kind)
            if s is not None and v in s:
                return True
        return False

    return in_


_ORDER: dict[str, Callable[[Any, Any], bool]] = {
    "gt": lambda v, f: v > f,
    "gte": lambda v, f: v >= f,
    "lt": lambda v, f: v < f,
    "lte": lambda v, f: v <= f,
}


def _order_test(field: str, name: str, o: _Operand) -> Test:
    def order(els: list[tuple[int, Any]], forms: dict[int, Any] = o.order,
              cmp: Callable[[Any, Any], bool] = _ORDER[name], field: str = field, o: _Operand = o) -> bool:
        for kind, v in els:
            f = forms.get(kind, _NO)
            if f is _NO:
                if kind == _TIME:
                    raise _date_error(field, o)
            elif cmp(v, f):
                return True
        return False

    return order


def _between_test(field: str, lo: _Operand, hi: _Operand) -> Test:
    def between(els: list[tuple[int, Any]], lo: _Operand = lo, hi: _Operand = hi, field: str = field) -> bool:
        for kind, v in els:
            a, b = lo.order.get(kind, _NO), hi.order.get(kind, _NO)
            if a is _NO or b is _NO:
                if kind == _TIME:
                    raise _date_error(field, lo if a is _NO else hi)
            elif a <= v <= b:
                return True
        return False

    return between


#: A field's compiled condition: its test, and — when the test is "some element equals one of these operands"
#: (``eq``, ``in``, a bare value or list) or the negation of that (``ne``, ``nin``, flagged) — those operands, so
#: that many such tests of one field under one $or / $and fold into one set lookup (:func:`_combine`).
Condition = tuple[Test, list[_Operand] | None, bool]


def _compile_op(field: str, op: Any, operand: Any) -> Condition:
    name = _op_name(field, op)
    if name == "not":
        inner, ops, neg = _compile_condition(field, operand)
        return _negated(inner), ops, not neg
    if name in ("in", "nin"):
        ops = _operand_list(field, str(op), operand)
        in_ = _in_test(field, ops)
        return (in_, ops, False) if name == "in" else (_negated(in_), ops, True)
    if name == "between":
        bounds = _operand_list(field, str(op), operand)
        if len(bounds) != 2:
            raise ValueError(f"filter on {field!r}: 'between' needs [low, high], got {operand!r}")
        return _between_test(field, *bounds), None, False
    value = _operand(field, str(op), operand)
    if name == "eq":
        return _eq_test(field, value), [value], False
    if name == "ne":
        return _negated(_eq_test(field, value)), [value], True
    return _order_test(field, name, value), None, False


def _compile_condition(field: str, cond: Any) -> Condition:
    """A field's condition — bare value (eq), list (in) or operator dict (all must hold) — as a test."""
    if isinstance(cond, Mapping):
        if not cond:
            raise ValueError(f"filter on {field!r}: empty operator dict")
        conditions = [_compile_op(field, op, operand) for op, operand in cond.items()]
        if len(conditions) == 1:
            return conditions[0]
        return _all_tests([t for t, _, _ in conditions]), None, False
    if isinstance(cond, _SEQUENCES):
        return _compile_op(field, "in", list(cond))
    return _compile_op(field, "eq", cond)


# -- filters as trees (three-valued: a node is true, false, or unknown because a field is missing) -----------------
# A compiled filter is a tree of field tests, AND / OR and NOT.  It is evaluated as two two-valued predicates per
# node, *is true* and *is false* (Kleene's logic as in SQL, and as filters.sql compiles it): AND is true when every
# part is and false when any part is, OR the dual, NOT swaps the two, a field test on a missing field is neither.
# Each predicate stops as soon as its answer is known, so a chunk is looked at only as far as decides it: a flat
# filter of 9,999 fields the chunk lacks is decided by its first field.  Tests of one field under one AND / OR are
# merged into one test of that field (a function of the stored value alone, so memoised per distinct value), and an
# AND / OR with more distinct fields than a chunk has keys looks only at the fields the chunk has.
class _Field:
    """A test of one field: unknown where the field is missing, else ``test`` of its comparable elements.

    Scalar values repeat across chunks (dept, lang, year, dates): each distinct value is tested once, per exact type
    (so True, 1 and 1.0 never share an entry).  The predicates are bound methods (no closures: a filter of 10,000
    fields allocates as few objects as it can, which is what the garbage collector's time grows with)."""

    __slots__ = ("field", "test", "ops", "neg", "_memos", "_true", "_false")

    def __init__(self, field: str, test: Test, ops: list[_Operand] | None = None, neg: bool = False) -> None:
        self.field = field
        self.test = test
        self.ops = ops  # the test is "some element equals one of ops" (negated when neg); None: another test
        self.neg = neg
        self._memos: dict[type, dict[Any, bool | None]] | None = None
        self._true: Predicate | None = None
        self._false: Predicate | None = None

    def true(self) -> Predicate:
        """The predicate "the field is there and passes the test"."""
        if self._true is None:
            self._true = self._is_true
        return self._true

    def false(self) -> Predicate:
        """The predicate "the field is there and fails the test"."""
        if self._false is None:
            self._false = self._is_false
        return self._false

    def _tri(self, value: Any) -> bool | None:
        """The test of a present value (``None``: it holds nothing comparable), memoised for scalars."""
        els = _elements(value)
        hit = self.test(els) if els else None
        t = type(value)
        if t in _MEMO_TYPES:
            memos = self._memos
            if memos is None:
                memos = self._memos = {}
            memo = memos.get(t)
            if memo is None:
                memo = memos[t] = {}
            memo[value] = hit
        return hit

    def _answer(self, md: Mapping[str, Any]) -> bool | None:
        """The three-valued answer for ``md``'s value of the field (``None`` for a missing one), memoised per
        value."""
        value = md.get(self.field)
        if value is None:
            return None
        memos = self._memos
        if memos is not None:
            memo = memos.get(type(value))
            if memo is not None:
                hit = memo.get(value, _NO)
                if hit is not _NO:
                    return hit  # type: ignore[return-value]  # a memo holds only bool | None
        return self._tri(value)

    def _is_true(self, md: Mapping[str, Any]) -> bool:
        return self._answer(md) is True

    def _is_false(self, md: Mapping[str, Any]) -> bool:
        return self._answer(md) is False


_MEMO_TYPES = frozenset({str, int, float, bool})


class _Logic:
    """AND (``conj``) or OR of at least two parts, at most one :class:`_Field` per field among them."""

    __slots__ = ("conj", "parts", "_true", "_false")

    def __init__(self, conj: bool, parts: list[_Tree]) -> None:
        self.conj = conj
        self.parts = parts
        self._true: Predicate | None = None
        self._false: Predicate | None = None

    def true(self) -> Predicate:
        """AND: every part is true; OR: some part is."""
        if self._true is None:
            self._true = self._all(True) if self.conj else self._any(True)
        return self._true

    def false(self) -> Predicate:
        """AND: some part is false; OR: every part is."""
        if self._false is None:
            self._false = self._any(False) if self.conj else self._all(False)
        return self._false

    @staticmethod
    def _side(part: _Tree, side: bool) -> Predicate:
        return part.true() if side else part.false()

    def _all(self, side: bool) -> Predicate:
        # a part on a field the chunk lacks is not true (nor false): the loop stops there, so it runs at most
        # (keys of the chunk + 1) field parts before it stops, whatever the filter's width
        preds = [self._side(p, side) for p in self.parts]

        def all_(md: Mapping[str, Any]) -> bool:
            for p in preds:
                if not p(md):
                    return False
            return True

        return all_

    def _any(self, side: bool) -> Predicate:
        by_field = {p.field: self._side(p, side) for p in self.parts if isinstance(p, _Field)}
        fields = list(by_field.values())
        others = [self._side(p, side) for p in self.parts if not isinstance(p, _Field)]
        width = len(fields)

        def any_(md: Mapping[str, Any]) -> bool:
            if width > len(md):  # more fields than the chunk has keys: only the keys it has can decide
                for key in md:
                    p = by_field.get(key)
                    if p is not None and p(md):
                        return True
            else:
                for p in fields:
                    if p(md):
                        return True
            for p in others:
                if p(md):
                    return True
            return False

        return any_


class _Neg:
    """NOT of a part that is not a field test (the NOT of a field test is a field test: :func:`_negate`)."""

    __slots__ = ("part",)

    def __init__(self, part: _Tree) -> None:
        self.part = part

    def true(self) -> Predicate:
        return self.part.false()

    def false(self) -> Predicate:
        return self.part.true()


_Tree = _Field | _Logic | _Neg


def _negated(test: Test) -> Test:
    return lambda els: not test(els)


def _all_tests(tests: list[Test]) -> Test:
    def all_(els: list[tuple[int, Any]]) -> bool:
        for t in tests:
            if not t(els):
                return False
        return True

    return all_


def _any_test(tests: list[Test]) -> Test:
    def any_(els: list[tuple[int, Any]]) -> bool:
        for t in tests:
            if t(els):
                return True
        return False

    return any_


def _negate(part: _Tree) -> _Tree:
    """NOT ``part``: a field test negated is a field test (unknown stays unknown); NOT NOT is the part."""
    if isinstance(part, _Field):
        return _Field(part.field, _negated(part.test), part.ops, not part.neg)
    if isinstance(part, _Neg):
        return part.part
    return _Neg(part)


def _combine(conj: bool, parts: list[_Tree]) -> _Tree:
    """AND (``conj``) / OR of ``parts``: nested ones of the same kind flattened, the field tests of one field merged
    into one test (where the field is missing all of them are unknown, else each is true or false), in order.  Among
    them, the equalities of an OR (``eq``, ``in``) are one ``in`` test of all their operands, and the negated ones of
    an AND (``ne``, ``nin``) one ``nin``: an $or of 10,000 equalities is one set lookup per value, not 10,000."""
    flat: list[_Tree] = []
    for p in parts:
        if isinstance(p, _Logic) and p.conj == conj:
            flat.extend(p.parts)
        else:
            flat.append(p)
    groups: dict[str, list[_Field]] = {}
    out: list[_Tree | str] = []
    for p in flat:
        if isinstance(p, _Field):
            if p.field not in groups:
                groups[p.field] = []
                out.append(p.field)
            groups[p.field].append(p)
        else:
            out.append(p)
    merged = [_merged_field(q, groups[q], conj) if isinstance(q, str) else q for q in out]
    return merged[0] if len(merged) == 1 else _Logic(conj, merged)


def _merged_field(field: str, group: list[_Field], conj: bool) -> _Field:
    """The one test of ``field`` that the AND (``conj``) / OR of ``group`` (its tests, in order) is."""
    if len(group) == 1:
        return group[0]
    # AND of "none equals" is "none equals any"; OR of "some element equals" is "some element equals any"
    folds = [f for f in group if f.ops is not None and f.neg == conj]
    if len(folds) > 1:
        ops = [o for f in folds for o in f.ops or ()]
        in_ = _in_test(field, ops)
        folded = _Field(field, _negated(in_) if conj else in_, ops, conj)
        group = [folded, *(f for f in group if not (f.ops is not None and f.neg == conj))]
        if len(group) == 1:
            return folded
    return _Field(field, (_all_tests if conj else _any_test)([f.test for f in group]))


def _filter_list(op: str, value: Any, fields: list[str], where: str) -> tuple[list[_Tree], list[Any]]:
    if isinstance(value, Mapping) or isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise ValueError(f"filter: {op} needs a non-empty list of filters, got {value!r}")
    parts = list(value)
    if not parts:
        raise ValueError(f"filter: {op} needs a non-empty list of filters, got []")
    trees: list[_Tree] = []
    copies: list[Any] = []
    for i, p in enumerate(parts):
        tree, copy = _compile_tree(p, fields, where=f"{op}[{i}]")
        trees.append(tree)
        copies.append(copy)
    return trees, copies


def _condition_copy(cond: Any) -> Any:
    """A copy of a field's (validated) condition whose containers are this module's own: operator dicts, and lists
    for value lists (a tuple, set, range or array becomes a list of its values, in order)."""
    if isinstance(cond, Mapping):
        return {op: _condition_copy(v) if _op_name("", op) == "not" else list(v) if _is_value_list(v) else v
                for op, v in cond.items()}
    if isinstance(cond, _SEQUENCES):
        return list(cond)
    return cond


def _compile_tree(filter: Any, fields: list[str], *, where: str = "filter") -> tuple[_Tree, dict[str, Any]]:
    """``(tree, copy)`` of a (nested) filter dict: its tree, and a copy of it that shares no container with it (what
    :class:`CompiledFilter` shows, so a change to the caller's dict afterwards changes neither); the fields it
    names are appended to ``fields``."""
    if not isinstance(filter, Mapping):
        raise TypeError(f"{where} must be a dict of field -> condition, got {filter!r}")
    if not filter:
        raise ValueError(f"{where} is an empty dict; nested filters need at least one condition")
    parts: list[_Tree] = []
    copy: dict[str, Any] = {}
    for key, cond in filter.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"filter field names must be non-empty strings, got {key!r}")
        if key.startswith("$"):
            if key == "$and" or key == "$or":
                trees, copies = _filter_list(key, cond, fields, where)
                parts.append(_combine(key == "$and", trees))
                copy[key] = copies
            elif key == "$not":
                tree, copy[key] = _compile_tree(cond, fields, where="$not")
                parts.append(_negate(tree))
            else:
                raise ValueError(
                    f"filter: unknown logical operator {key!r}; valid ones: {', '.join(LOGICAL_OPERATORS)} "
                    f"(comparisons go inside a field: {{'field': {{'{key}': value}}}}; operators: "
                    f"{', '.join(OPERATORS)})"
                )
            continue
        fields.append(key)
        parts.append(_Field(key, *_compile_condition(key, cond)))
        copy[key] = _condition_copy(cond)
    return _combine(True, parts), copy

# What a container of a filter is, for check_filter_size: a filter (a dict of fields and logical operators), a
# field's condition (a dict of comparison operators), the parts of an $and / $or, or a list of values (in, nin,
# between, a bare list).  A malformed filter's containers get some role; compiling it raises afterwards.
_FILTER, _CONDITION, _PARTS, _VALUES = range(4)


def _child_role(role: int, key: Any, child: Any, field: str, op: str) -> tuple[int, str, str]:
    """``(role, field, operator)`` of the container ``child`` found under ``key`` in a container of ``role``."""
    if isinstance(child, Mapping):
        if role == _FILTER and not (isinstance(key, str) and key.startswith("$")):
            return _CONDITION, str(key), ""
        return (_CONDITION, field, "") if role == _CONDITION else (_FILTER, "", "")
    if role == _FILTER and key in ("$and", "$or"):
        return _PARTS, "", ""
    if role == _FILTER:
        return _VALUES, str(key), "in"
    if role == _CONDITION:
        return _VALUES, field, str(key)
    return _VALUES, field, op


def _shown(where: str) -> str:
    return where if len(where) <= 80 else where[:40] + " … " + where[-36:]


def _chars_error() -> ValueError:
    return ValueError(
        f"filter holds more than {MAX_FILTER_CHARS} characters in its strings (filters.MAX_FILTER_CHARS: every "
        "field name, operator and string value counts its length) — filter on a field the documents share (a tag, "
        "a group) instead of listing long values"
    )


def check_filter_size(filter: Any) -> None:
    """Refuse a filter beyond the size limits: nested deeper than :data:`MAX_FILTER_DEPTH` dicts and lists (the
    filter itself is level 1), holding more than :data:`MAX_FILTER_NODES` nodes (every key of its dicts), more
    than :data:`MAX_FILTER_VALUES` values in an ``in`` / ``nin`` / ``between`` list or in all of them together, or
    more than :data:`MAX_FILTER_CHARS` characters in its strings together (field names, operators, values).

    One walk with an explicit stack (no recursion; a tuple, set, range or array counts as a list), safe on any
    input, that stops at the first limit it meets: a container's size is counted before its parts are visited, so
    the walk looks at no more than about the limits' worth of a filter, and a filter with cycles or a million keys
    is refused as quickly as a small one.  Every entry point of this module runs it before anything recursive (compiling,
    ``json.dumps``, ``repr``) sees the filter, and so does the SQL compiler (:mod:`~langchain_ragspine.filters.sql`).

    Raises:
        ValueError: the message names the limit, its constant, and where: the path (too deep), the field and the
            operator (one list too long).

    Example:
        >>> check_filter_size({"$and": [{"a": 1}, {"$not": {"b": {"in": [2, 3]}}}]})  # 5 nodes, 2 values: fine
    """
    if not isinstance(filter, (Mapping, *_SEQUENCES)):
        return
    nodes = values = chars = 0
    root_role = _FILTER if isinstance(filter, Mapping) else _PARTS
    stack: list[tuple[Any, int, str, int, str, str]] = [(filter, 1, "filter", root_role, "", "")]
    while stack:
        value, depth, where, role, field, op = stack.pop()
        if depth > MAX_FILTER_DEPTH:
            raise ValueError(
                f"filter is nested more than {MAX_FILTER_DEPTH} levels deep (filters.MAX_FILTER_DEPTH: dicts and "
                f"lists; each $and/$or level counts two, a $not one), at {_shown(where)}; flatten it (an $and of "
                "many parts, or an 'in' list, needs no nesting)"
            )
        size = len(value)
        if role == _VALUES:
            if size > MAX_FILTER_VALUES:
                what = f"filter on {field!r}: operator {op!r}" if field else f"filter: the list at {_shown(where)}"
                raise ValueError(
                    f"{what} lists {size} values; the limit is {MAX_FILTER_VALUES} (filters.MAX_FILTER_VALUES) — "
                    "filter on a field the documents share (a tag, a group) instead"
                )
            values += size
            if values > MAX_FILTER_VALUES:
                raise ValueError(
                    f"filter lists more than {MAX_FILTER_VALUES} values in its in/nin/between lists together; the "
                    f"limit is {MAX_FILTER_VALUES} (filters.MAX_FILTER_VALUES, one list or all of them) — filter on a "
                    "field the documents share (a tag, a group) instead"
                )
        # a dict's keys are nodes; each part of an $and/$or is a filter of one key at least
        elif nodes + size > MAX_FILTER_NODES:
            raise ValueError(
                f"filter holds more than {MAX_FILTER_NODES} nodes (filters.MAX_FILTER_NODES: every key of its "
                "dicts counts one — a field, $and/$or/$not, a comparison operator); an $or of equalities on one "
                "field is one 'in' list, and many documents are better chosen by a field they share (a tag, a group)"
            )
        elif isinstance(value, Mapping):
            nodes += size
        is_map = isinstance(value, Mapping)
        items = value.items() if is_map else enumerate(value)
        for key, child in items:
            if is_map and isinstance(key, str):
                chars += len(key)
            tc = type(child)
            if tc is str:
                chars += len(child)
            elif tc not in _SCALAR_TYPES:
                if isinstance(child, str):
                    chars += len(child)
                elif isinstance(child, Mapping) or _is_value_list(child):
                    step = f"[{key}]" if not is_map else f".{key}" if isinstance(key, str) else ".?"
                    stack.append((child, depth + 1, where + step, *_child_role(role, key, child, field, op)))
        if chars > MAX_FILTER_CHARS:  # after one container: at most the node or value limit's worth of strings
            raise _chars_error()

class CompiledFilter(Mapping[str, Any]):
    """A filter validated and compiled once — build it with :func:`compiled_filter` and hand it on in place of the
    dict: ``cf = compiled_filter({"dept": "hr"})``, then ``retriever.invoke(q, filter=cf)`` (every retriever, vector
    store and the SQL compiler of this package take it as it is, without validating or compiling it again),
    ``cf.predicate(metadata) -> bool``, ``cf.fields``.

    A read-only mapping: a copy of the filter as it was compiled (dicts, and lists for its lists of parts and
    values; the scalars are the caller's), so changing the caller's dict afterwards changes neither what it shows nor
    what it matches.  :meth:`to_dict` gives a plain copy (what a retriever from outside this package receives).  A
    retriever's call compiles its filter once into one of these (``ContractRetriever`` does it at the door, the
    retriever-call contract for any other retriever) and every channel, gate and merge of that call uses it:
    :func:`compiled_filter` of several parts ANDs them without compiling a compiled part again.

    Attributes:
        predicate: ``metadata -> bool``, true only where the filter is true (see the module docstring).
        fields: the metadata fields the filter names, in order of appearance, each once.
        key: a string identifying the filter's meaning, for caches (:func:`filter_key`).
    """

    __slots__ = ("_filter", "_tree", "_fields", "_key", "_predicate", "_derived", "_parts")

    def __init__(
        self, filter: dict[str, Any], tree: _Tree, fields: Sequence[str], parts: tuple[CompiledFilter, ...] = ()
    ) -> None:
        self._filter = filter
        self._tree = tree
        self._fields = tuple(dict.fromkeys(fields))
        self._parts = parts  # an AND built by compiled_filter: its parts (so a further AND lists them, flat)
        self._key: str | None = None
        self._predicate: Predicate | None = None
        self._derived: dict[str, Any] = {}

    @classmethod
    def _compile(cls, filter: Any) -> CompiledFilter | None:
        if isinstance(filter, CompiledFilter):
            return filter
        if filter is None:
            return None
        check_filter_size(filter)
        if not isinstance(filter, Mapping):
            raise TypeError(f"filter must be a dict of field -> condition, got {filter!r}")
        if not filter:
            return None
        fields: list[str] = []
        tree, copy = _compile_tree(filter, fields)
        return cls(copy, tree, fields)

    @classmethod
    def _all(cls, parts: Sequence[CompiledFilter]) -> CompiledFilter:
        """The AND of compiled ``parts`` (two or more), without compiling them again; size-checked as one filter."""
        flt = {"$and": [p._filter for p in parts]}
        check_filter_size(flt)
        return cls(flt, _combine(True, [p._tree for p in parts]), [f for p in parts for f in p._fields], tuple(parts))

    @property
    def predicate(self) -> Predicate:
        if self._predicate is None:
            self._predicate = self._tree.true()
        return self._predicate

    @property
    def fields(self) -> tuple[str, ...]:
        return self._fields

    @property
    def key(self) -> str:
        if self._key is None:
            self._key = repr(_canonical(self._filter))
        return self._key

    def derived(self, name: str, build: Callable[[CompiledFilter], _T]) -> _T:
        """``build(self)``, computed at the first call for ``name`` and kept with the filter: another form of it
        (its SQL, :mod:`~langchain_ragspine.filters.sql`) built once however many searches of one call use it."""
        try:
            return self._derived[name]  # type: ignore[no-any-return]
        except KeyError:
            return self._derived.setdefault(name, build(self))  # type: ignore[no-any-return]

    def to_dict(self) -> dict[str, Any]:
        """A plain copy of the filter (new dicts and lists all through)."""
        return _plain_copy(self._filter)

    def __getitem__(self, key: str) -> Any:
        return self._filter[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._filter)

    def __len__(self) -> int:
        return len(self._filter)

    def __repr__(self) -> str:
        return f"CompiledFilter({self._filter!r})"


_T = TypeVar("_T")


def _plain_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain_copy(v) for v in value]
    return value


def _type_name(t: type) -> str:
    return f"{t.__module__}.{t.__qualname__}"


def _canonical(value: Any) -> Any:
    """An image of a (size-checked) filter whose ``repr`` tells apart any two filters that may mean different
    things: exact ``str`` / ``int`` / ``float`` / ``bool`` / ``None``, ``dict`` (keys sorted) and ``list`` stand
    for themselves; any other value or container becomes ``(its type, its repr / its items)`` — so a date never
    meets the string spelling its repr, a set never the string of its repr, ``True`` never ``1``."""
    t = type(value)
    if t in _SCALAR_TYPES:
        return value
    if isinstance(value, Mapping):
        items = sorted(((_canonical(k), _canonical(v)) for k, v in value.items()), key=lambda kv: repr(kv[0]))
        d = dict(items)
        return d if t is dict else (_type_name(t), d)
    if t is list:
        return [_canonical(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return (_type_name(t), sorted((_canonical(v) for v in value), key=repr))
    if _is_value_list(value):
        return (_type_name(t), [_canonical(v) for v in value])
    return (_type_name(t), repr(value))


def compiled_filter(*filters: Mapping[str, Any] | None) -> CompiledFilter | None:
    """The AND of ``filters`` validated and compiled once (:class:`CompiledFilter`); ``None`` when all are absent or
    empty.  A part that is a :class:`CompiledFilter` already is not compiled again, and one filter is returned as it
    is: ``compiled_filter(retriever_filter, call_filter)`` is what a retriever's call searches with.  Parts that
    mean the same (:func:`filter_key`) are ANDed once.

    Raises:
        ValueError, TypeError: as :func:`compile_filter`, for any part or for their AND (the size limits hold for
            the AND as one filter).

    Example:
        >>> cf = compiled_filter({"dept": "hr"}, {"year": {"gte": 2020}})
        >>> cf.predicate({"dept": "hr", "year": 2024}), cf.fields
        (True, ('dept', 'year'))
    """
    parts: list[CompiledFilter] = []
    for f in filters:
        c = CompiledFilter._compile(f)
        if c is None:
            continue
        if len(filters) == 1:
            return c
        for part in c._parts or (c,):  # an AND built here is ANDed as its parts: {"$and": [a, b, c]}, flat
            if not any(part is p for p in parts):
                parts.append(part)
    if len(parts) > 1:
        seen: set[str] = set()
        parts = [p for p in parts if not (p.key in seen or seen.add(p.key))]  # type: ignore[func-returns-value]
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else CompiledFilter._all(parts)


def compile_filter(filter: Mapping[str, Any] | None) -> Predicate | None:
    """Validate ``filter`` and return a predicate ``metadata -> bool`` (``None`` for an empty/absent filter).

    The predicate is ``True`` only where the filter is true (see the module docstring: stored types decide, a
    missing field never matches, three-valued ``$and``/``$or``/``$not``).  To validate once and hand the filter on,
    use :func:`compiled_filter` (whose result this accepts, returning its predicate at once).

    Raises:
        ValueError: unknown operator (the message names the valid ones), malformed operand, empty field name, an
            empty ``$and``/``$or`` list, a filter beyond a size limit of :func:`check_filter_size`
            (:data:`MAX_FILTER_DEPTH`, :data:`MAX_FILTER_NODES`, :data:`MAX_FILTER_VALUES`,
            :data:`MAX_FILTER_CHARS`); when called, an operand compared with a stored date that is not in one of
            :data:`DATE_FORMATS`.
        TypeError: ``filter`` (or a nested filter) is not a mapping.
    """
    cf = CompiledFilter._compile(filter)
    return None if cf is None else cf.predicate


def filter_fields(filter: Mapping[str, Any] | None) -> list[str]:
    """The metadata fields ``filter`` names, in order of appearance, nested filters included.

    Raises:
        ValueError, TypeError: as :func:`compile_filter`.
    """
    cf = CompiledFilter._compile(filter)
    return [] if cf is None else list(cf.fields)


def matches(metadata: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """``True`` when ``metadata`` satisfies ``filter`` (an absent or empty filter matches everything):
    ``matches({"lang": "ja", "year": 2024}, {"year": {"gte": 2020}})`` is ``True``.  The metadata comes first.

    Raises:
        ValueError, TypeError: as :func:`compile_filter` (the size limits of :func:`check_filter_size` included).
        TypeError: ``metadata`` has a key that is a logical operator (``$and``, ``$or``, ``$not``): it is a filter,
            so the two arguments were given the wrong way round (no filter can name such a field anyway).
    """
    if isinstance(metadata, Mapping) and not metadata.keys().isdisjoint(LOGICAL_OPERATORS):
        raise TypeError(
            "matches(metadata, filter): the metadata has a key "
            f"{next(k for k in LOGICAL_OPERATORS if k in metadata)!r}, a logical operator — it is a filter; pass "
            "the metadata first and the filter second"
        )
    pred = compile_filter(filter)
    return True if pred is None else pred(metadata)


def and_filters(*filters: Mapping[str, Any] | None) -> dict[str, Any] | CompiledFilter | None:
    """The AND of several filters: ``None`` when all are absent/empty, the one filter when only one is given, else
    ``{"$and": [f1, f2, …]}``; filters that mean the same (:func:`filter_key`: ``{"x": True}`` and ``{"x": 1}``
    do not) are kept once.  Retrievers use it to combine their own ``filter`` with a call's: the result never
    matches more than any of its parts.  When a part is a :class:`CompiledFilter`, the result is the
    :func:`compiled_filter` of them all (compiled, without compiling that part again).

    Raises:
        TypeError: a filter is not a mapping.
        ValueError: a filter is beyond a size limit of :func:`check_filter_size`.
    """
    if any(isinstance(f, CompiledFilter) for f in filters):
        return compiled_filter(*filters)
    parts: list[dict[str, Any]] = []
    keys: set[str] = set()
    for f in filters:
        if f is None:
            continue
        check_filter_size(f)  # before the key below, which recurses
        if not isinstance(f, Mapping):
            raise TypeError(f"filter must be a dict of field -> condition, got {f!r}")
        if f:
            key = repr(_canonical(f))
            if key not in keys:
                keys.add(key)
                parts.append(dict(f))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {"$and": parts}


def filter_key(filter: Mapping[str, Any] | None) -> str:
    """A stable string key for ``filter`` (for caching candidate masks): equal for filters that differ only in the
    order of their keys, different for filters that may match differently — also where ``==`` or JSON would
    confuse them (``True`` and ``1``, a date and the string of its ``repr``, a set and a string).

    Raises:
        ValueError: ``filter`` is beyond a size limit of :func:`check_filter_size` (checked before anything
            recursive).
    """
    if isinstance(filter, CompiledFilter):
        return filter.key
    check_filter_size(filter)
    return repr(_canonical(filter or {}))


def unknown_field_message(field: str, known: Iterable[str]) -> str:
    """The warning text for a filter ``field`` that no indexed chunk has, naming the closest ``known`` fields
    (:func:`difflib.get_close_matches`), else a few known ones."""
    names = sorted(set(known))
    close = difflib.get_close_matches(field, names, n=3, cutoff=0.6)
    if close:
        hint = "closest known fields: " + ", ".join(repr(c) for c in close)
    else:
        shown = ", ".join(repr(n) for n in names[:12]) + (", …" if len(names) > 12 else "")
        hint = f"known fields: {shown}" if names else "the chunks have no metadata"
    return f"filter field {field!r} is in no indexed chunk's metadata (a missing field never matches); {hint}"


#: The most fields of one filter that get an :class:`UnknownFilterFieldWarning` each (with the closest known
#: fields); any further unknown fields of the filter share one more warning, which counts them.
MAX_FIELD_WARNINGS = 10


# (hash of a store's known fields, field) already warned about in this process: see unreported_fields
_REPORTED: set[tuple[int, str]] = set()
_REPORTED_LOCK = threading.Lock()
_REPORTED_MAX = 4096  # then forgotten, all at once (a field may be warned about again)


def unreported_fields(unknown: Sequence[str], known: Iterable[str]) -> list[str]:
    """Those of the unknown filter fields ``unknown`` not yet reported for a store whose chunks have the fields
    ``known`` (and marks them reported): the one rule of :class:`UnknownFilterFieldWarning`, on every backend and
    channel — **once per process for each field and set of known fields**.  So a hybrid's BM25 and dense channels
    (same store, same fields) warn once, not twice; a PostgreSQL retriever warns at its first call, not every call;
    a store whose fields change (a field added by an ingest) is a new set, and warns again.  At most 4,096 pairs are
    kept, then all forgotten.  :func:`reset_filter_warnings` forgets them (tests, a long-lived app that wants to be
    told again)."""
    known_key = hash(frozenset(known))
    with _REPORTED_LOCK:
        if len(_REPORTED) >= _REPORTED_MAX:
            _REPORTED.clear()
        fresh = [f for f in dict.fromkeys(unknown) if (known_key, f) not in _REPORTED]
        _REPORTED.update((known_key, f) for f in fresh)
    return fresh


def reset_filter_warnings() -> None:
    """Forget which unknown filter fields were warned about (:func:`unreported_fields`): each warns once again."""
    with _REPORTED_LOCK:
        _REPORTED.clear()


def warn_unknown_fields(unknown: Sequence[str], known: Iterable[str], *, stacklevel: int = 2) -> None:
    """Warn (:class:`UnknownFilterFieldWarning`) for the filter fields ``unknown`` that no indexed chunk has
    (``known``: the fields the chunks have), each once per process and set of known fields
    (:func:`unreported_fields`): one warning each for the first :data:`MAX_FIELD_WARNINGS`
    (:func:`unknown_field_message`), one more naming a few of the rest and counting them.  ``stacklevel`` as for
    :func:`warnings.warn`, counted from the caller of this function."""
    known = list(known)
    unknown = unreported_fields(unknown, known)
    for field in unknown[:MAX_FIELD_WARNINGS]:
        warnings.warn(unknown_field_message(field, known), UnknownFilterFieldWarning, stacklevel=stacklevel + 1)
    rest = unknown[MAX_FIELD_WARNINGS:]
    if rest:
        shown = ", ".join(repr(f) for f in rest[:5]) + (", …" if len(rest) > 5 else "")
        warnings.warn(
            f"{len(rest)} more filter fields are in no indexed chunk's metadata (a missing field never matches): "
            f"{shown}",
            UnknownFilterFieldWarning,
            stacklevel=stacklevel + 1,
        )


class FilterMasks:
    """Boolean candidate masks over a fixed list of metadata dicts, one per filter, computed once and cached.

    ``mask(filter)`` is ``None`` for an absent/empty filter, else a ``bool`` array of shape ``(len(metadatas),)``
    with ``True`` where the filter matches — what the retrievers use to restrict candidates before scoring.  A
    filter (a dict, or a :class:`CompiledFilter`, which is not compiled again) is evaluated over the metadata once
    per distinct filter (keyed by :func:`filter_key`); at most ``size`` masks are kept (default 32), the oldest
    dropped first.  When a mask is computed, the fields the filter names that no metadata dict has are reported with
    :class:`UnknownFilterFieldWarning` naming the closest known fields (:func:`warn_unknown_fields`).

    Raises:
        ValueError, TypeError: from :func:`compile_filter`, for a malformed filter, or a date operand in a format
            the filter does not read (see :data:`DATE_FORMATS`).
    """

    def __init__(self, metadatas: Sequence[Mapping[str, Any]], *, size: int = 32) -> None:
        self._metadatas = metadatas
        self._size = size
        self._masks: dict[str, np.ndarray] = {}
        self._known: frozenset[str] | None = None

    def known_fields(self) -> frozenset[str]:
        """Every metadata key of the indexed chunks (computed once)."""
        if self._known is None:
            keys: set[str] = set()
            for md in self._metadatas:
                keys.update(md.keys())
            self._known = frozenset(keys)
        return self._known

    def mask(self, filter: Mapping[str, Any] | None) -> np.ndarray | None:
        """The candidate mask of ``filter`` (see the class docstring)."""
        cf = compiled_filter(filter)
        if cf is None:
            return None
        key = cf.key
        hit = self._masks.get(key)
        if hit is not None:
            return hit
        if self._metadatas:
            known = self.known_fields()
            unknown = [field for field in cf.fields if field not in known]
            if unknown:
                warn_unknown_fields(unknown, known, stacklevel=4)
        pred = cf.predicate
        hit = np.fromiter((pred(md) for md in self._metadatas), dtype=bool, count=len(self._metadatas))
        if len(self._masks) >= self._size:
            self._masks.pop(next(iter(self._masks)))
        self._masks[key] = hit
        return hit

_EXPR_RE = re.compile(r"^\s*([^=!<>\s][^=!<>]*?)\s*(>=|<=|!=|=|>|<)\s*(.*?)\s*$", re.S)


def parse_filter_expression(expr: str) -> tuple[str, dict[str, Any]]:
    """Parse one CLI filter ``FIELD<op>VALUE`` into ``(field, {operator: operand})``.

    ``=`` is ``eq`` (``in`` for a comma list, ``between`` for ``low..high``), ``!=`` is ``ne`` (``nin`` for a comma
    list), and ``>``, ``>=``, ``<``, ``<=`` are ``gt``, ``gte``, ``lt``, ``lte``.  Values stay strings; the stored
    field's type decides how they compare (``draft=false`` matches a stored boolean ``false``).

    Raises:
        ValueError: the expression has no operator, no field or no value.
    """
    m = _EXPR_RE.match(expr)
    if not m or not m.group(3) or m.group(3)[0] in "=<>!":
        raise ValueError(f"malformed filter {expr!r}; write FIELD=VALUE, FIELD>=VALUE, FIELD=a,b or FIELD=lo..hi")
    field, sym, raw = m.group(1), m.group(2), m.group(3)
    if sym == "=":
        if ".." in raw:
            lo, _, hi = raw.partition("..")
            if not lo or not hi:
                raise ValueError(f"malformed range in filter {expr!r}; write FIELD=low..high")
            return field, {"between": [lo, hi]}
        if "," in raw:
            return field, {"in": [v.strip() for v in raw.split(",") if v.strip()]}
        return field, {"eq": raw}
    if sym == "!=":
        if "," in raw:
            return field, {"nin": [v.strip() for v in raw.split(",") if v.strip()]}
        return field, {"ne": raw}
    return field, {{">": "gt", ">=": "gte", "<": "lt", "<=": "lte"}[sym]: raw}


def parse_filter_expressions(exprs: Iterable[str]) -> dict[str, Any]:
    """Parse several CLI filters into one filter dict (conditions on the same field are ANDed)."""
    out: dict[str, dict[str, Any]] = {}
    for expr in exprs:
        field, cond = parse_filter_expression(expr)
        slot = out.setdefault(field, {})
        for op, operand in cond.items():
            if op in slot:
                raise ValueError(f"filter {expr!r} repeats operator {op!r} on field {field!r}")
            slot[op] = operand
    compile_filter(out)
    return dict(out)


def checked_filter(filter: dict[str, Any] | None) -> dict[str, Any] | None:
    """``filter`` unchanged once :func:`compile_filter` accepts it: the check of every retriever's ``filter`` field
    (:data:`FilterField`), at construction, on assignment and in ``model_copy(update=…)`` alike.

    Raises:
        ValueError / TypeError: as :func:`compile_filter`, naming the operator, field or value.
    """
    compile_filter(filter)
    return filter


#: The type of a retriever's own ``filter`` field: a filter dict (or ``None``) that is checked whenever it is set —
#: a bad one is refused when it is given, never at the next search.
FilterField = Annotated[dict[str, Any] | None, AfterValidator(checked_filter)]
