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
  ``2024年1月1日``; a plain word is simply not equal).  A field holding dates in some chunks and other strings in
  others is therefore best filtered with ISO dates.  A field that no indexed chunk
  has produces an :class:`UnknownFilterFieldWarning` naming the closest known fields (:class:`FilterMasks`).
* **Bounded size.**  A filter nests at most :data:`MAX_FILTER_DEPTH` (64) dicts and lists — each ``$and`` /
  ``$or`` level is two (a dict in a list), a ``$not`` or a field's ``not`` one, so about 30 levels of ``$and`` —,
  holds at most :data:`MAX_FILTER_NODES` (10,000) nodes — every key of every dict in it counts one: a field, a
  logical operator, a comparison operator, so ``{"$or": [{"x": 1}, {"x": 2}]}`` is three — and its ``in`` / ``nin``
  / ``between`` lists hold at most :data:`MAX_FILTER_VALUES` (10,000) values, one list or all of them together.
  Beyond any of these a ``ValueError`` names the limit, before anything recursive (compiling, hashing, printing)
  touches the filter: one walk (:func:`check_filter_size`), whatever the entry point — :func:`compile_filter`,
  :func:`matches`, :func:`and_filters`, :func:`filter_key`, every retriever and vector store, and the SQL compiler
  of :mod:`langchain_ragspine.filters.sql`, which validates here first (so PostgreSQL refuses exactly the same
  filters, and a filter's SQL never needs more than 6 parameters per node: at most 60,000, under PostgreSQL's
  65,535 per statement).  Within the limits a filter compiles in time linear in its size.

Retrievers combine a filter given at call time with their own ``filter`` by AND (:func:`and_filters`): a call can
narrow what a retriever returns, never widen it.

The CLI form (:func:`parse_filter_expressions`) writes the same predicates as ``FIELD<op>VALUE``: ``year>=2020``,
``year<2024``, ``dept!=hr``, ``tags=uv,python`` (a comma list means ``in``; ``!=`` with a list means ``nin``),
``year=2019..2021`` (``between``, inclusive).  Its values are strings, typed by the stored field as above.
"""

from __future__ import annotations

import datetime as _dt
import difflib
import functools
import json
import math
import numbers
import re
import warnings
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

Predicate = Callable[[Mapping[str, Any]], bool]

#: Comparison operators of a field condition (each also accepted with a leading ``$``).
OPERATORS = ("eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "between", "not")
#: Logical operators at the top level of a filter.
LOGICAL_OPERATORS = ("$and", "$or", "$not")
#: The date spellings an operand may use when it is compared with a stored date (ISO-8601).
DATE_FORMATS = "YYYY-MM-DD, YYYY-MM-DDTHH:MM[:SS[.ffffff]] with an optional Z or ±HH:MM (ISO-8601)"
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
#: evaluate and was more than PostgreSQL's 65,535 parameters of one statement.
MAX_FILTER_NODES = 10_000


class UnknownFilterFieldWarning(UserWarning):
    """A filter names a metadata field that no indexed chunk has (it can only match nothing)."""


# kinds of a comparable value; a stored value's kind picks the operand's form it is compared with
_BOOL, _NUM, _TIME, _STR = 0, 1, 2, 3
_NO = object()  # "the operand has no form of this kind"

_INT_RE = re.compile(r"[+-]?\d+")
_NUMBER_RE = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_ISO_RE = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?(?:Z|[+-]\d{2}(?::?\d{2})?)?)?")
# digits in a date-ish layout (2024/01/01, 2024.1.1, 01/02/2024, 2024年1月1日, 2024-1-1 …): meant as a date
_DATE_LIKE_RE = re.compile(r"\d{1,4}\s*[-/.年]\s*\d{1,2}\s*[-/.月]\s*\d{1,4}\s*日?(?:[T\s].*)?", re.S)
_TRUE = frozenset({"true", "yes", "on"})
_FALSE = frozenset({"false", "no", "off"})
_SEQUENCES = (list, tuple, set, frozenset)
_SCALAR_TYPES = frozenset({str, int, float, bool, type(None)})  # no containers: skipped fast by check_filter_size


def _as_utc(value: _dt.datetime) -> _dt.datetime:
    if value.tzinfo is None:
        return value.replace(tzinfo=_dt.UTC)
    return value.astimezone(_dt.UTC)


def _date_value(value: _dt.date) -> _dt.datetime:
    if isinstance(value, _dt.datetime):
        return _as_utc(value)
    return _dt.datetime(value.year, value.month, value.day, tzinfo=_dt.UTC)


@functools.lru_cache(maxsize=1 << 16)
def _parse_time(text: str) -> _dt.datetime | None:
    """The UTC instant of an ISO-8601 date/datetime string, else ``None`` (cached: stored values repeat)."""
    if not _ISO_RE.fullmatch(text):
        return None
    try:
        return _as_utc(_dt.datetime.fromisoformat(text))
    except ValueError:
        return None


def _stored(value: Any) -> tuple[int, Any] | None:
    """``(kind, comparable)`` of one stored scalar; ``None`` for a value that cannot be compared (None, NaN, dict)."""
    tv = type(value)
    if tv is str:
        if len(value) < 10 or value[4] != "-":  # cheap: cannot be an ISO date
            return (_STR, value)
        t = _parse_time(value)
        return (_STR, value) if t is None else (_TIME, t)
    if tv is int:
        return (_NUM, value)
    if tv is float:
        return None if math.isnan(value) else (_NUM, value)
    if tv is bool:
        return (_BOOL, value)
    if isinstance(value, np.bool_):
        return (_BOOL, bool(value))
    if isinstance(value, numbers.Real):
        return None if math.isnan(value) else (_NUM, value)
    if isinstance(value, _dt.date):
        return (_TIME, _date_value(value))
    if isinstance(value, str):  # a str subclass
        return _stored(str(value))
    return None


def _elements(value: Any) -> list[tuple[int, Any]]:
    """The comparable elements of a stored metadata value; ``[]`` means missing."""
    if isinstance(value, _SEQUENCES):
        out = []
        for v in value:
            t = _stored(v)
            if t is not None:
                out.append(t)
        return out
    t = _stored(value)
    return [] if t is None else [t]


# -- operands -------------------------------------------------------------------------------------------------------
class _Operand:
    """One operand in every form it may take: ``eq[kind]`` for equality, ``order[kind]`` for ordering."""

    __slots__ = ("raw", "eq", "order", "date_like")

    def __init__(self, raw: Any, eq: dict[int, Any], order: dict[int, Any], date_like: bool = False) -> None:
        self.raw = raw
        self.eq = eq
        self.order = order
        self.date_like = date_like


def _number_text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _operand(field: str, op: str, value: Any) -> _Operand:
    if isinstance(value, str):
        s = value.strip()
        eq: dict[int, Any] = {_STR: value}
        order: dict[int, Any] = {_STR: value}
        if _NUMBER_RE.fullmatch(s):
            num: float = int(s) if _INT_RE.fullmatch(s) else float(s)
            if math.isfinite(num):
                eq[_NUM] = order[_NUM] = num
        low = s.lower()
        if low in _TRUE or low in _FALSE:
            eq[_BOOL] = low in _TRUE
        t = _parse_time(s)
        if t is not None:
            eq[_TIME] = order[_TIME] = t
        return _Operand(value, eq, order, date_like=t is None and bool(_DATE_LIKE_RE.fullmatch(s)))
    if isinstance(value, bool):
        return _Operand(value, {_BOOL: value, _STR: "true" if value else "false"}, {})
    if isinstance(value, numbers.Real) and math.isfinite(value):
        return _Operand(value, {_NUM: value, _STR: _number_text(value)}, {_NUM: value})
    if isinstance(value, _dt.date):
        t = _date_value(value)
        return _Operand(value, {_TIME: t, _STR: value.isoformat()}, {_TIME: t})
    raise ValueError(
        f"filter on {field!r}: operator {op!r} needs a comparable value (a string, number, boolean or date), "
        f"got {value!r}"
    )


def _date_error(field: str, operand: _Operand) -> ValueError:
    return ValueError(
        f"filter on {field!r}: the field holds dates, and {operand.raw!r} is not a date this filter reads; "
        f"write {DATE_FORMATS}, e.g. 2024-01-01"
    )


def _operand_list(field: str, op: str, value: Any) -> list[_Operand]:
    # a collection (list, tuple, set, range, array …), whose length check_filter_size counted; not an iterator,
    # which the first of a search's compilations would use up
    if _is_value_list(value):
        return [_operand(field, op, v) for v in value]
    raise ValueError(f"filter on {field!r}: operator {op!r} needs a list of values, got {value!r}")


def _is_value_list(value: Any) -> bool:
    """Whether ``value`` is a list of values in a filter: a sized collection, not a string or a mapping."""
    if not isinstance(value, Collection) or isinstance(value, (str, bytes, bytearray, Mapping)):
        return False
    try:
        len(value)  # a 0-d numpy array is a Collection without a length
    except TypeError:
        return False
    return True


# -- field conditions -----------------------------------------------------------------------------------------------
Test = Callable[[list[tuple[int, Any]]], bool]  # over the non-empty elements of one field


def _eq_test(field: str, o: _Operand) -> Test:
    forms, date_like = o.eq, o.date_like

    def eq(els: list[tuple[int, Any]]) -> bool:
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

    def in_(els: list[tuple[int, Any]]) -> bool:
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
    forms, cmp = o.order, _ORDER[name]

    def order(els: list[tuple[int, Any]]) -> bool:
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
    def between(els: list[tuple[int, Any]]) -> bool:
        for kind, v in els:
            a, b = lo.order.get(kind, _NO), hi.order.get(kind, _NO)
            if a is _NO or b is _NO:
                if kind == _TIME:
                    raise _date_error(field, lo if a is _NO else hi)
            elif a <= v <= b:
                return True
        return False

    return between


def _op_name(field: str, op: Any) -> str:
    name = op[1:] if isinstance(op, str) and op.startswith("$") else op
    if name in OPERATORS:
        return str(name)
    hint = ""
    if op in LOGICAL_OPERATORS or name in ("and", "or"):
        hint = f" ({', '.join(LOGICAL_OPERATORS)} combine whole filters, e.g. {{'$or': [{{'a': 1}}, {{'b': 2}}]}})"
    raise ValueError(
        f"filter on {field!r}: unknown operator {op!r}; valid operators: {', '.join(OPERATORS)} "
        f"(also with a leading $){hint}"
    )


def _compile_op(field: str, op: Any, operand: Any) -> Test:
    name = _op_name(field, op)
    if name == "not":
        inner = _compile_condition(field, operand)
        return lambda els: not inner(els)
    if name in ("in", "nin"):
        in_ = _in_test(field, _operand_list(field, str(op), operand))
        return in_ if name == "in" else (lambda els: not in_(els))
    if name == "between":
        bounds = _operand_list(field, str(op), operand)
        if len(bounds) != 2:
            raise ValueError(f"filter on {field!r}: 'between' needs [low, high], got {operand!r}")
        return _between_test(field, *bounds)
    value = _operand(field, str(op), operand)
    if name == "eq":
        return _eq_test(field, value)
    if name == "ne":
        eq = _eq_test(field, value)
        return lambda els: not eq(els)
    return _order_test(field, name, value)


def _compile_condition(field: str, cond: Any) -> Test:
    """A field's condition — bare value (eq), list (in) or operator dict (all must hold) — as a test."""
    if isinstance(cond, Mapping):
        if not cond:
            raise ValueError(f"filter on {field!r}: empty operator dict")
        tests = [_compile_op(field, op, operand) for op, operand in cond.items()]
        if len(tests) == 1:
            return tests[0]
        return lambda els: all(t(els) for t in tests)
    if isinstance(cond, _SEQUENCES):
        return _compile_op(field, "in", list(cond))
    return _compile_op(field, "eq", cond)


# -- filters (three-valued: True, False, or None = unknown because a field is missing) -------------------------------
Node = Callable[[Mapping[str, Any]], bool | None]


def _field_node(field: str, test: Test) -> Node:
    # scalar values repeat across chunks (dept, lang, year, dates): evaluate each distinct value once, per exact
    # type (so True, 1 and 1.0 never share an entry)
    memos: dict[type, dict[Any, bool | None]] = {str: {}, int: {}, float: {}, bool: {}}

    def node(md: Mapping[str, Any]) -> bool | None:
        value = md.get(field)
        memo = memos.get(type(value))
        if memo is None:  # None, a list, a date, …
            els = _elements(value)
            return test(els) if els else None
        hit = memo.get(value, _NO)
        if hit is _NO:
            els = _elements(value)
            hit = memo[value] = test(els) if els else None
        return hit  # type: ignore[return-value]

    return node


def _kleene(nodes: list[Node], decisive: bool) -> Node:
    """Kleene's AND (``decisive=False``) or OR (``decisive=True``): ``decisive`` as soon as one part is, else
    unknown if any part is unknown, else ``not decisive``."""
    if len(nodes) == 1:
        return nodes[0]

    def combine(md: Mapping[str, Any]) -> bool | None:
        unknown = False
        for n in nodes:
            r = n(md)
            if r is decisive:
                return decisive
            if r is None:
                unknown = True
        return None if unknown else not decisive

    return combine


def _not(node: Node) -> Node:
    def not_(md: Mapping[str, Any]) -> bool | None:
        r = node(md)
        return None if r is None else not r

    return not_


def _filter_list(op: str, value: Any, fields: list[str]) -> list[Node]:
    if isinstance(value, Mapping) or isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise ValueError(f"filter: {op} needs a non-empty list of filters, got {value!r}")
    parts = list(value)
    if not parts:
        raise ValueError(f"filter: {op} needs a non-empty list of filters, got []")
    return [_compile_nodes(p, fields, where=f"{op}[{i}]") for i, p in enumerate(parts)]


def _compile_nodes(filter: Any, fields: list[str], *, where: str = "filter") -> Node:
    """The three-valued node of a (nested) filter dict; the fields it names are appended to ``fields``."""
    if not isinstance(filter, Mapping):
        raise TypeError(f"{where} must be a dict of field -> condition, got {filter!r}")
    if not filter:
        raise ValueError(f"{where} is an empty dict; nested filters need at least one condition")
    nodes: list[Node] = []
    for key, cond in filter.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"filter field names must be non-empty strings, got {key!r}")
        if key.startswith("$"):
            if key == "$and":
                nodes.append(_kleene(_filter_list(key, cond, fields), False))
            elif key == "$or":
                nodes.append(_kleene(_filter_list(key, cond, fields), True))
            elif key == "$not":
                nodes.append(_not(_compile_nodes(cond, fields, where="$not")))
            else:
                raise ValueError(
                    f"filter: unknown logical operator {key!r}; valid ones: {', '.join(LOGICAL_OPERATORS)} "
                    f"(comparisons go inside a field: {{'field': {{'{key}': value}}}}; operators: "
                    f"{', '.join(OPERATORS)})"
                )
            continue
        fields.append(key)
        nodes.append(_field_node(key, _compile_condition(key, cond)))
    return _kleene(nodes, False)


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


def check_filter_size(filter: Any) -> None:
    """Refuse a filter beyond the size limits: nested deeper than :data:`MAX_FILTER_DEPTH` dicts and lists (the
    filter itself is level 1), holding more than :data:`MAX_FILTER_NODES` nodes (every key of its dicts), or more
    than :data:`MAX_FILTER_VALUES` values in an ``in`` / ``nin`` / ``between`` list or in all of them together.

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
    nodes = values = 0
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
        items = value.items() if isinstance(value, Mapping) else enumerate(value)
        for key, child in items:
            if type(child) not in _SCALAR_TYPES and (isinstance(child, Mapping) or _is_value_list(child)):
                step = f"[{key}]" if not isinstance(value, Mapping) else f".{key}" if isinstance(key, str) else ".?"
                stack.append((child, depth + 1, where + step, *_child_role(role, key, child, field, op)))


def _compile(filter: Mapping[str, Any] | None) -> tuple[Predicate | None, list[str]]:
    if filter is None:
        return None, []
    check_filter_size(filter)
    if not isinstance(filter, Mapping):
        raise TypeError(f"filter must be a dict of field -> condition, got {filter!r}")
    if not filter:
        return None, []
    fields: list[str] = []
    node = _compile_nodes(filter, fields)

    def predicate(metadata: Mapping[str, Any]) -> bool:
        return node(metadata) is True

    return predicate, list(dict.fromkeys(fields))


def compile_filter(filter: Mapping[str, Any] | None) -> Predicate | None:
    """Validate ``filter`` and return a predicate ``metadata -> bool`` (``None`` for an empty/absent filter).

    The predicate is ``True`` only where the filter is true (see the module docstring: stored types decide, a
    missing field never matches, three-valued ``$and``/``$or``/``$not``).

    Raises:
        ValueError: unknown operator (the message names the valid ones), malformed operand, empty field name, an
            empty ``$and``/``$or`` list, a filter nested deeper than :data:`MAX_FILTER_DEPTH` or an ``in`` /
            ``nin`` list longer than :data:`MAX_FILTER_VALUES`; when called, an operand compared with a stored date
            that is not in one of :data:`DATE_FORMATS`.
        TypeError: ``filter`` (or a nested filter) is not a mapping.
    """
    return _compile(filter)[0]


def filter_fields(filter: Mapping[str, Any] | None) -> list[str]:
    """The metadata fields ``filter`` names, in order of appearance, nested filters included.

    Raises:
        ValueError, TypeError: as :func:`compile_filter`.
    """
    return _compile(filter)[1]


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


def and_filters(*filters: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The AND of several filters: ``None`` when all are absent/empty, the one filter when only one is given, else
    ``{"$and": [f1, f2, …]}``.  Retrievers use it to combine their own ``filter`` with a call's: the result never
    matches more than any of its parts.

    Raises:
        TypeError: a filter is not a mapping.
        ValueError: a filter is nested deeper than :data:`MAX_FILTER_DEPTH`.
    """
    parts: list[dict[str, Any]] = []
    for f in filters:
        if f is None:
            continue
        check_filter_size(f)  # before the comparisons below, which recurse
        if not isinstance(f, Mapping):
            raise TypeError(f"filter must be a dict of field -> condition, got {f!r}")
        if f and dict(f) not in parts:
            parts.append(dict(f))
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {"$and": parts}


def filter_key(filter: Mapping[str, Any] | None) -> str:
    """A stable string key for ``filter`` (for caching candidate masks).

    Raises:
        ValueError: ``filter`` is nested deeper than :data:`MAX_FILTER_DEPTH` (checked before ``json.dumps``, which
            recurses).
    """
    check_filter_size(filter)
    return json.dumps(filter or {}, sort_keys=True, default=repr, ensure_ascii=False)


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


class FilterMasks:
    """Boolean candidate masks over a fixed list of metadata dicts, one per filter, computed once and cached.

    ``mask(filter)`` is ``None`` for an absent/empty filter, else a ``bool`` array of shape ``(len(metadatas),)``
    with ``True`` where the filter matches — what the retrievers use to restrict candidates before scoring.  A
    filter is compiled and evaluated over the metadata once per distinct filter (keyed by :func:`filter_key`); at
    most ``size`` masks are kept (default 32), the oldest dropped first.  When a mask is computed, every field the
    filter names that no metadata dict has is reported with an :class:`UnknownFilterFieldWarning` naming the
    closest known fields.

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
        if filter is None:
            return None
        if not isinstance(filter, Mapping):
            raise TypeError(f"filter must be a dict of field -> condition, got {filter!r}")
        if not filter:
            return None
        key = filter_key(filter)
        hit = self._masks.get(key)
        if hit is not None:
            return hit
        pred, fields = _compile(filter)
        assert pred is not None
        if self._metadatas:
            known = self.known_fields()
            for field in fields:
                if field not in known:
                    warnings.warn(unknown_field_message(field, known), UnknownFilterFieldWarning, stacklevel=4)
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
