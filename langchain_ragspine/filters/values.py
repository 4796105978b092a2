"""The comparable values of a metadata filter: what a stored value and an operand are compared as.

Shared by the two filter compilers, the Python predicate (:mod:`langchain_ragspine.filters`) and the SQL one
(:mod:`langchain_ragspine.filters.sql`), so both read a value alike.  A stored scalar has one *kind*
(:data:`BOOL`, :data:`NUM`, :data:`TIME`, :data:`STR`; :func:`stored_value`, :func:`elements` for a list); an
operand has a form per kind it can be compared as (:class:`Operand`: ``eq[kind]`` for equality, ``order[kind]``
for ordering; :func:`operand`, :func:`operand_list`), and the kind of the stored value picks the form — a string
``"2024-01-01"`` compares with stored dates as a date and with stored strings as itself, ``"3"`` with numbers as
``3``.  The rules are those of the module docstring of :mod:`langchain_ragspine.filters`.

Example:
    >>> operand("year", "gte", "2020").order[NUM], elements([2021, None, "x"])
    (2020, [(1, 2021), (3, 'x')])
"""

from __future__ import annotations

import datetime as _dt
import functools
import math
import numbers
import re
from collections.abc import Collection, Mapping
from typing import Any

import numpy as np

__all__ = [
    "BOOL",
    "DATE_FORMATS",
    "LOGICAL_OPERATORS",
    "NO_FORM",
    "NUM",
    "OPERATORS",
    "SCALAR_TYPES",
    "SEQUENCES",
    "STR",
    "TIME",
    "Operand",
    "date_error",
    "elements",
    "is_value_list",
    "op_name",
    "operand",
    "operand_list",
    "parse_time",
    "short_repr",
    "stored_value",
]

#: Comparison operators of a field condition (each also accepted with a leading ``$``).
OPERATORS = ("eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "between", "not")
#: Logical operators at the top level of a filter.
LOGICAL_OPERATORS = ("$and", "$or", "$not")
#: The date spellings an operand may use when it is compared with a stored date (ISO-8601).
DATE_FORMATS = "YYYY-MM-DD, YYYY-MM-DDTHH:MM[:SS[.ffffff]] with an optional Z or ±HH:MM (ISO-8601)"
# kinds of a comparable value; a stored value's kind picks the operand's form it is compared with
BOOL, NUM, TIME, STR = 0, 1, 2, 3
NO_FORM = object()  # "the operand has no form of this kind"

_INT_RE = re.compile(r"[+-]?\d+")
_NUMBER_RE = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_ISO_RE = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?(?:Z|[+-]\d{2}(?::?\d{2})?)?)?")
# digits in a date-ish layout (2024/01/01, 2024.1.1, 01/02/2024, 2024年1月1日, 2024-1-1 …): meant as a date
_DATE_LIKE_RE = re.compile(r"\d{1,4}\s*[-/.年]\s*\d{1,2}\s*[-/.月]\s*\d{1,4}\s*日?(?:[T\s].*)?", re.S)
_TRUE = frozenset({"true", "yes", "on"})
_FALSE = frozenset({"false", "no", "off"})
SEQUENCES = (list, tuple, set, frozenset)
SCALAR_TYPES = frozenset({str, int, float, bool, type(None)})  # no containers: skipped fast by check_filter_size


def _as_utc(value: _dt.datetime) -> _dt.datetime:
    if value.tzinfo is None:
        return value.replace(tzinfo=_dt.UTC)
    return value.astimezone(_dt.UTC)


def _date_value(value: _dt.date) -> _dt.datetime:
    if isinstance(value, _dt.datetime):
        return _as_utc(value)
    return _dt.datetime(value.year, value.month, value.day, tzinfo=_dt.UTC)


#: The longest string _ISO_RE can match (``2026-11-01T10:00:00.000000+09:00``).
_ISO_MAX = 32


def parse_time(text: str) -> _dt.datetime | None:
    """The UTC instant of an ISO-8601 date/datetime string, else ``None`` (cached: stored values repeat; a string
    too long to be a date is neither parsed nor kept)."""
    return None if len(text) > _ISO_MAX else _parse_short_time(text)


@functools.lru_cache(maxsize=1 << 16)
def _parse_short_time(text: str) -> _dt.datetime | None:
    if not _ISO_RE.fullmatch(text):
        return None
    try:
        return _as_utc(_dt.datetime.fromisoformat(text))
    except ValueError:
        return None


def stored_value(value: Any) -> tuple[int, Any] | None:
    """``(kind, comparable)`` of one stored scalar; ``None`` for a value that cannot be compared (None, NaN, dict)."""
    tv = type(value)
    if tv is str:
        if len(value) < 10 or value[4] != "-":  # cheap: cannot be an ISO date
            return (STR, value)
        t = parse_time(value)
        return (STR, value) if t is None else (TIME, t)
    if tv is int:
        return (NUM, value)
    if tv is float:
        return None if math.isnan(value) else (NUM, value)
    if tv is bool:
        return (BOOL, value)
    if isinstance(value, np.bool_):
        return (BOOL, bool(value))
    if isinstance(value, numbers.Real):
        return None if math.isnan(value) else (NUM, value)
    if isinstance(value, _dt.date):
        return (TIME, _date_value(value))
    if isinstance(value, str):  # a str subclass
        return stored_value(str(value))
    return None


def elements(value: Any) -> list[tuple[int, Any]]:
    """The comparable elements of a stored metadata value; ``[]`` means missing."""
    if isinstance(value, SEQUENCES):
        out = []
        for v in value:
            t = stored_value(v)
            if t is not None:
                out.append(t)
        return out
    t = stored_value(value)
    return [] if t is None else [t]


# -- operands -------------------------------------------------------------------------------------------------------
class Operand:
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


def _number_of(text: str) -> float | None:
    """The finite number a numeric string spells, else ``None``: beyond Python's digits limit for ``int`` (4,300)
    it is read as a float, which overflows to infinity there, so it has no number form (no stored number is that
    long: JSON and YAML refuse them too)."""
    try:
        num: float = int(text) if _INT_RE.fullmatch(text) else float(text)
    except ValueError:  # an int of more digits than sys.get_int_max_str_digits()
        num = float(text)
    return num if math.isfinite(num) else None


def operand(field: str, op: str, value: Any) -> Operand:
    if isinstance(value, str):
        s = value.strip()
        eq: dict[int, Any] = {STR: value}
        order: dict[int, Any] = {STR: value}
        if _NUMBER_RE.fullmatch(s):
            num = _number_of(s)
            if num is not None:
                eq[NUM] = order[NUM] = num
        low = s.lower()
        if low in _TRUE or low in _FALSE:
            eq[BOOL] = low in _TRUE
        t = parse_time(s)
        if t is not None:
            eq[TIME] = order[TIME] = t
        return Operand(value, eq, order, date_like=t is None and bool(_DATE_LIKE_RE.fullmatch(s)))
    if isinstance(value, bool):
        return Operand(value, {BOOL: value, STR: "true" if value else "false"}, {})
    if isinstance(value, numbers.Real):
        try:
            finite = math.isfinite(value)
        except OverflowError:  # an int beyond a float's range (10**400): no backend compares it
            raise ValueError(
                f"filter on {field!r}: operator {op!r}: the number {short_repr(value)} is out of range (a filter "
                "number must fit a 64-bit float, |x| < 1.8e308)"
            ) from None
        if finite:
            return Operand(value, {NUM: value, STR: _number_text(value)}, {NUM: value})
    if isinstance(value, _dt.date):
        t = _date_value(value)
        return Operand(value, {TIME: t, STR: value.isoformat()}, {TIME: t})
    raise ValueError(
        f"filter on {field!r}: operator {op!r} needs a comparable value (a string, number, boolean or date), "
        f"got {value!r}"
    )


def short_repr(value: Any) -> str:
    """``repr(value)``, its middle cut when it is long (a 400-digit int)."""
    text = repr(value) if not isinstance(value, int) or value.bit_length() < 10_000 else f"<int of {value.bit_length()} bits>"
    return text if len(text) <= 40 else f"{text[:18]}…{text[-18:]} ({len(text)} characters)"


def date_error(field: str, operand: Operand) -> ValueError:
    return ValueError(
        f"filter on {field!r}: the field holds dates, and {operand.raw!r} is not a date this filter reads; "
        f"write {DATE_FORMATS}, e.g. 2024-01-01"
    )


def operand_list(field: str, op: str, value: Any) -> list[Operand]:
    # a collection (list, tuple, set, range, array …), whose length check_filter_size counted; not an iterator,
    # which the first of a search's compilations would use up
    if is_value_list(value):
        return [operand(field, op, v) for v in value]
    raise ValueError(f"filter on {field!r}: operator {op!r} needs a list of values, got {value!r}")


def is_value_list(value: Any) -> bool:
    """Whether ``value`` is a list of values in a filter: a sized collection, not a string or a mapping."""
    if not isinstance(value, Collection) or isinstance(value, (str, bytes, bytearray, Mapping)):
        return False
    try:
        len(value)  # a 0-d numpy array is a Collection without a length
    except TypeError:
        return False
    return True


def op_name(field: str, op: Any) -> str:
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


