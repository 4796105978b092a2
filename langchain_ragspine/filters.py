"""Metadata predicates: one evaluator for every retrieval channel, applied before scoring.

A filter is a ``dict`` mapping a metadata field to a condition; all fields must hold (AND).  A condition is either a
bare value (``eq``), a list/tuple/set of values (``in``), or a dict of operators, all of which must hold::

    {"lang": "ja"}                                  # eq
    {"tags": ["uv", "python"]}                      # in
    {"year": {"gte": 2020, "lt": 2024}}             # range, typed
    {"published": {"between": ["2024-01-01", "2024-06-30"]}}
    {"dept": {"nin": ["hr", "legal"]}}

Operators: ``eq ne in nin gt gte lt lte between`` (a leading ``$`` is accepted, as in MongoDB/Chroma filters).

Semantics (fail closed, because filters often scope access):

* **Typed comparisons.** Both sides are typed before comparing: numbers (and numeric strings such as ``"2020"``)
  compare as numbers, ISO-8601 dates/datetimes (strings, ``date`` or ``datetime``) as points in time, booleans as
  booleans, other strings as strings.  Numbers are never compared lexicographically.  Ordering operators between
  values of different kinds (a number against a word) do not match.
* **Missing fields never match** — for every operator, ``ne`` and ``nin`` included.  ``None`` and an empty list
  count as missing.
* **List-valued metadata** (``tags: ["uv", "python"]``) matches a positive operator when *any* element matches;
  ``ne``/``nin`` match when *no* element equals / is in the value(s).
* An unknown operator or a malformed operand (``between`` without two bounds, ``in`` with a scalar) raises
  ``ValueError`` naming it, when the filter is compiled — before any retrieval.

The CLI form (:func:`parse_filter_expressions`) writes the same predicates as ``FIELD<op>VALUE``: ``year>=2020``,
``year<2024``, ``dept!=hr``, ``tags=uv,python`` (a comma list means ``in``; ``!=`` with a list means ``nin``),
``year=2019..2021`` (``between``, inclusive).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

Predicate = Callable[[Mapping[str, Any]], bool]

OPERATORS = ("eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "between")

_NUMBER_RE = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ][0-9:.]+(?:Z|[+-]\d{2}:?\d{2})?)?")

# kinds: order of the tuple's first element keeps values of different kinds apart
_BOOL, _NUM, _TIME, _STR = 0, 1, 2, 3


def _typed(value: Any) -> tuple[int, Any] | None:
    """``(kind, comparable)`` for a scalar, or ``None`` for a value that cannot be compared (dict, NaN, None)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return (_BOOL, value)
    if isinstance(value, (int, float)):
        if isinstance(value, float) and math.isnan(value):
            return None
        return (_NUM, value)
    if isinstance(value, _dt.datetime):
        return (_TIME, _as_utc(value))
    if isinstance(value, _dt.date):
        return (_TIME, _as_utc(_dt.datetime(value.year, value.month, value.day)))
    if isinstance(value, str):
        s = value.strip()
        if _NUMBER_RE.fullmatch(s):
            num = float(s)
            return (_NUM, int(num) if num.is_integer() and abs(num) < 2**53 else num)
        if _DATE_RE.fullmatch(s):
            try:
                return (_TIME, _as_utc(_dt.datetime.fromisoformat(s.replace("Z", "+00:00"))))
            except ValueError:
                pass
        return (_STR, value)
    return None


def _as_utc(value: _dt.datetime) -> _dt.datetime:
    if value.tzinfo is None:
        return value.replace(tzinfo=_dt.UTC)
    return value.astimezone(_dt.UTC)


def _elements(value: Any) -> list[tuple[int, Any]]:
    """The typed elements of a metadata value; ``[]`` means missing."""
    items = list(value) if isinstance(value, (list, tuple, set, frozenset)) else [value]
    typed = [_typed(v) for v in items]
    return [t for t in typed if t is not None]


def _cmp(op: str, a: tuple[int, Any], b: tuple[int, Any]) -> bool:
    if op == "eq":
        return a == b
    if a[0] != b[0] or a[0] == _BOOL:
        return False
    if op == "gt":
        return bool(a[1] > b[1])
    if op == "gte":
        return bool(a[1] >= b[1])
    if op == "lt":
        return bool(a[1] < b[1])
    return bool(a[1] <= b[1])  # lte


_LOOSE_DATE_RE = re.compile(r"\d{4}-\d{1,2}-\d{1,2}(?:[T ].*)?")


def _operand_scalar(field: str, op: str, value: Any) -> tuple[int, Any]:
    t = _typed(value)
    if isinstance(value, str) and _LOOSE_DATE_RE.fullmatch(value.strip()) and (t is None or t[0] != _TIME):
        raise ValueError(
            f"filter on {field!r}: {value!r} looks like a date but is not ISO-8601; write YYYY-MM-DD (e.g. 2026-09-01)"
        )
    if t is None:
        raise ValueError(f"filter on {field!r}: operator {op!r} needs a comparable value, got {value!r}")
    return t


def _operand_list(field: str, op: str, value: Any) -> list[tuple[int, Any]]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable) or isinstance(value, Mapping):
        raise ValueError(f"filter on {field!r}: operator {op!r} needs a list of values, got {value!r}")
    return [_operand_scalar(field, op, v) for v in value]


def _compile_op(field: str, op: str, operand: Any) -> Callable[[list[tuple[int, Any]]], bool]:
    name = op[1:] if op.startswith("$") else op
    if name not in OPERATORS:
        raise ValueError(f"filter on {field!r}: unknown operator {op!r}; use one of {', '.join(OPERATORS)}")
    if name in ("in", "nin"):
        values = _operand_list(field, op, operand)
        if name == "in":
            return lambda els: any(e in values for e in els)
        return lambda els: not any(e in values for e in els)
    if name == "between":
        bounds = _operand_list(field, op, operand)
        if len(bounds) != 2:
            raise ValueError(f"filter on {field!r}: 'between' needs [low, high], got {operand!r}")
        lo, hi = bounds
        return lambda els: any(_cmp("gte", e, lo) and _cmp("lte", e, hi) for e in els)
    value = _operand_scalar(field, op, operand)
    if name == "ne":
        return lambda els: not any(e == value for e in els)
    return lambda els: any(_cmp(name, e, value) for e in els)


def compile_filter(filter: Mapping[str, Any] | None) -> Predicate | None:
    """Validate ``filter`` and return a predicate ``metadata -> bool`` (``None`` for an empty/absent filter).

    Raises:
        ValueError: unknown operator, malformed operand, or an empty field name.
        TypeError: ``filter`` is not a mapping.
    """
    if filter is None:
        return None
    if not isinstance(filter, Mapping):
        raise TypeError(f"filter must be a dict of field -> condition, got {filter!r}")
    if not filter:
        return None
    checks: list[tuple[str, list[Callable[[list[tuple[int, Any]]], bool]]]] = []
    for field, cond in filter.items():
        if not isinstance(field, str) or not field:
            raise ValueError(f"filter field names must be non-empty strings, got {field!r}")
        if isinstance(cond, Mapping):
            if not cond:
                raise ValueError(f"filter on {field!r}: empty operator dict")
            ops = [_compile_op(field, str(op), operand) for op, operand in cond.items()]
        elif isinstance(cond, (list, tuple, set, frozenset)):
            ops = [_compile_op(field, "in", list(cond))]
        else:
            ops = [_compile_op(field, "eq", cond)]
        checks.append((field, ops))

    def predicate(metadata: Mapping[str, Any]) -> bool:
        for field, ops in checks:
            els = _elements(metadata.get(field))
            if not els:
                return False
            if not all(op(els) for op in ops):
                return False
        return True

    return predicate


def matches(metadata: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """``True`` when ``metadata`` satisfies ``filter`` (an absent or empty filter matches everything)."""
    pred = compile_filter(filter)
    return True if pred is None else pred(metadata)


def filter_key(filter: Mapping[str, Any] | None) -> str:
    """A stable string key for ``filter`` (for caching candidate masks)."""
    return json.dumps(filter or {}, sort_keys=True, default=str, ensure_ascii=False)


class FilterMasks:
    """Boolean candidate masks over a fixed list of metadata dicts, one per filter, computed once and cached.

    ``mask(filter)`` is ``None`` for an absent/empty filter, else a ``bool`` array of shape ``(len(metadatas),)``
    with ``True`` where the filter matches — what the retrievers use to restrict candidates before scoring.  At most
    ``size`` masks are kept (default 32); the oldest is dropped first.

    Raises:
        ValueError, TypeError: from :func:`compile_filter`, for a malformed filter.
    """

    def __init__(self, metadatas: Sequence[Mapping[str, Any]], *, size: int = 32) -> None:
        self._metadatas = metadatas
        self._size = size
        self._masks: dict[str, np.ndarray] = {}

    def mask(self, filter: Mapping[str, Any] | None) -> np.ndarray | None:
        """The candidate mask of ``filter`` (see the class docstring)."""
        pred = compile_filter(filter)
        if pred is None:
            return None
        key = filter_key(filter)
        hit = self._masks.get(key)
        if hit is None:
            hit = np.fromiter((pred(md) for md in self._metadatas), dtype=bool, count=len(self._metadatas))
            if len(self._masks) >= self._size:
                self._masks.pop(next(iter(self._masks)))
            self._masks[key] = hit
        return hit


_EXPR_RE = re.compile(r"^\s*([^=!<>\s][^=!<>]*?)\s*(>=|<=|!=|=|>|<)\s*(.*?)\s*$", re.S)


def parse_filter_expression(expr: str) -> tuple[str, dict[str, Any]]:
    """Parse one CLI filter ``FIELD<op>VALUE`` into ``(field, {operator: operand})``.

    ``=`` is ``eq`` (``in`` for a comma list, ``between`` for ``low..high``), ``!=`` is ``ne`` (``nin`` for a comma
    list), and ``>``, ``>=``, ``<``, ``<=`` are ``gt``, ``gte``, ``lt``, ``lte``.  Values stay strings; typing happens
    at comparison time.

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
