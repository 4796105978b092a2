"""Metadata filters as SQL: the predicate language of :mod:`langchain_ragspine.filters`, run inside PostgreSQL.

The Postgres backend (:mod:`langchain_ragspine.backends.postgres.chunk_store`) keeps, for every searchable chunk, one row per
metadata value in a *typed values* table, ``ragspine_fields(chunk_row, field, kind, s, n, t, b)``:

* ``kind`` is the type the Python evaluator gives the stored value (:func:`value_rows` calls the evaluator's own
  classifier, so both backends type a value the same way): ``1`` boolean (``b``), ``2`` number (``n``, ``numeric``
  holding the exact binary value of a float, so ``0.1``, ``2**70`` and ``1e300`` compare exactly as in Python),
  ``3`` date/time (``t``, ``timestamptz``: ISO-8601 strings and ``date``/``datetime`` values, a date without a time
  zone being UTC), ``4`` string (``s``, ``COLLATE "C"``: ordered by code point, equal only when identical);
* a list-valued field gives one row per element; a field whose value cannot be compared (``None``, NaN, an empty
  list, a dict) gives one row of ``kind 0`` — present for "which fields exist", missing for every operator.

:func:`filter_sql` turns a filter into a SQL boolean over those rows.  SQL's ``NULL`` logic is not used directly;
each node is compiled to two two-valued expressions, *is true* and *is false* (Kleene's three-valued logic as in
ISO/IEC 9075: a condition on a missing field is neither).  ``$and`` is true when every part is true and false when
any part is false, ``$or`` the dual, ``$not`` swaps the two, and the filter matches where *is true* holds — exactly
the evaluator's semantics (missing fields never match, also for ``ne``, ``nin`` and ``not``).  An operand takes
the stored value's type, never the reverse: its forms per kind come from the evaluator (``"2020"`` is the string
``"2020"`` and the number 2020, and meets each stored kind in the matching form).

Size: :func:`filter_sql` validates with :func:`~langchain_ragspine.filters.compiled_filter` first, so a filter is
within :func:`~langchain_ragspine.filters.check_filter_size`'s limits, and each node (a key of one of its dicts) needs
at most 6 parameters — a bare ``in`` list: the field's name and one array per stored kind, and the name again when
negated (the field must be there); every other node fewer — so a filter's SQL has at most
6 × :data:`~langchain_ragspine.filters.MAX_FILTER_NODES` = 6,000 parameters, and a search's statement stays well
under PostgreSQL's 65,535 (the operands of a filter hold at most
:data:`~langchain_ragspine.filters.MAX_FILTER_CHARS` characters together: a statement never ships megabytes of
them).  A filter of more than :data:`SEMI_JOIN_LIMIT` field tests has each test end in ``OFFSET 0`` (a per-row
subplan, not a join the planner must order: see there), so every field test costs a subplan per row: the equalities
of one field under one ``$or`` (``ne`` / ``nin`` under an ``$and``) are one ``= ANY`` test, as the evaluator folds
them, and the SQL of a compiled filter is built once for all the searches of a call.

One difference, on malformed input only: the evaluator raises for a non-ISO date operand (``2024/01/01``) when it
meets a stored date in the field; the SQL form raises when any searchable chunk holds a date in that field
(:func:`check_filter`), before the query runs — also where the evaluator would have short-circuited past it.
"""

from __future__ import annotations

import datetime as _dt
import math
import numbers
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

# The evaluator's own classifier and operand forms: the translation must type values exactly as it does.
from langchain_ragspine.filters import CompiledFilter, compiled_filter, warn_unknown_fields
from langchain_ragspine.filters.values import BOOL as _BOOL
from langchain_ragspine.filters.values import NUM as _NUM
from langchain_ragspine.filters.values import SEQUENCES as _SEQUENCES
from langchain_ragspine.filters.values import STR as _STR
from langchain_ragspine.filters.values import TIME as _TIME
from langchain_ragspine.filters.values import Operand as _Operand
from langchain_ragspine.filters.values import date_error as _date_error
from langchain_ragspine.filters.values import elements as _elements
from langchain_ragspine.filters.values import op_name as _op_name
from langchain_ragspine.filters.values import operand as _operand
from langchain_ragspine.filters.values import operand_list as _operand_list

__all__ = ["KIND_NONE", "SEMI_JOIN_LIMIT", "SqlFilter", "check_filter", "filter_sql", "value_rows"]

#: ``kind`` of a field present with no comparable value (``None``, NaN, ``[]``, a dict).
KIND_NONE = 0
# kind code in the table = the evaluator's kind + 1
_KIND = {_BOOL: 1, _NUM: 2, _TIME: 3, _STR: 4}
_COLUMN = {_BOOL: "b", _NUM: "n", _TIME: "t", _STR: "s"}
_ARRAY_TYPE = {_BOOL: "boolean[]", _NUM: "numeric[]", _TIME: "timestamptz[]", _STR: "text[]"}
_ORDER_SQL = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}

#: The values table (the name the Postgres store creates).
FIELDS_TABLE = "ragspine_fields"

ValueRow = tuple[str, int, str | None, Decimal | None, _dt.datetime | None, bool | None]


def _number(value: Any) -> Decimal:
    """The exact value of a stored or operand number as ``Decimal`` (a float's binary value, not its repr)."""
    if isinstance(value, numbers.Integral):
        return Decimal(int(value))
    f = float(value)
    if math.isinf(f):
        return Decimal("Infinity") if f > 0 else Decimal("-Infinity")
    return Decimal(f)


def _sql_value(kind: int, value: Any) -> Any:
    """A comparable (as the evaluator holds it) as the parameter for its column."""
    if kind == _NUM:
        return _number(value)
    if kind == _BOOL:
        return bool(value)
    return value  # str, or an aware UTC datetime


def value_rows(metadata: Mapping[str, Any], *, where: str = "") -> list[ValueRow]:
    """The typed-values rows of one chunk's metadata: ``(field, kind, s, n, t, b)``, one per distinct comparable
    element of each field, or one ``kind 0`` row for a field with none.

    Args:
        metadata: the chunk's metadata as retrievers see it (``StoredChunk.to_document().metadata``).
        where: the chunk, for the error message.

    Raises:
        ValueError: a string value holds a NUL character (PostgreSQL text cannot hold one; the message names the
            chunk and field).
    """
    rows: list[ValueRow] = []
    for key, value in metadata.items():
        name = str(key)
        if "\x00" in name:
            raise ValueError(f"{where}metadata key {name!r} holds a NUL character, which PostgreSQL cannot store")
        seen: set[tuple[int, Any]] = set()
        for kind, v in _elements(value):
            if (kind, v) in seen:
                continue
            seen.add((kind, v))
            x = _sql_value(kind, v)
            if kind == _STR and "\x00" in x:
                raise ValueError(
                    f"{where}metadata {name!r} holds a NUL character, which PostgreSQL text cannot store"
                )
            rows.append((
                name,
                _KIND[kind],
                x if kind == _STR else None,
                x if kind == _NUM else None,
                x if kind == _TIME else None,
                x if kind == _BOOL else None,
            ))
        if not seen:
            rows.append((name, KIND_NONE, None, None, None, None))
    return rows


# -- SQL fragments: (text with %s placeholders, parameters in order) -------------------------------------------------
Frag = tuple[str, tuple[Any, ...]]
_TRUE: Frag = ("TRUE", ())
_FALSE: Frag = ("FALSE", ())


def _join(op: str, parts: Sequence[Frag]) -> Frag:
    if len(parts) == 1:
        return parts[0]
    return "(" + f" {op} ".join(p[0] for p in parts) + ")", tuple(x for p in parts for x in p[1])


def _not(frag: Frag) -> Frag:
    return f"(NOT {frag[0]})", frag[1]


#: The most ``EXISTS`` tests a filter's SQL leaves to the planner to turn into (semi- and anti-) joins.  Beyond, each
#: test ends in ``OFFSET 0``, which keeps it a per-row subplan (PostgreSQL does not pull up an ``EXISTS`` with an
#: ``OFFSET``): the planner searches join orders over every pulled-up test, and planning grew much faster than the
#: filter (measured on PostgreSQL 18: an AND of 50 fields took 0.18 s to plan, 100 fields 0.7 s, 300 fields 34 s —
#: the search cancelled by the statement timeout long before the node limit; as subplans 300 fields plan in 0.04 s,
#: 10,000 in about 2 s, the node limit's 1,000 in about 0.2 s).  Small filters keep the joins, which a selective
#: filter over a large store may need.
SEMI_JOIN_LIMIT = 16
_SUBLINK_END = "/*sublink*/"  # where " OFFSET 0" goes, replaced in every filter's text by filter_sql
_ROW = "/*row*/"  # where the row expression goes: a filter's text is built once, for any row (filter_sql)


@dataclass
class _Ctx:
    row: str = _ROW  # the SQL expression of the chunk row id being filtered
    fields: list[str] = field(default_factory=list)
    date_checks: dict[str, _Operand] = field(default_factory=dict)
    sublinks: int = 0

    def exists(self, name: str, cond: Frag | None) -> Frag:
        """``EXISTS`` an element of field ``name`` of the row (with ``cond`` on it; ``None``: any comparable one)."""
        self.sublinks += 1
        text = f"EXISTS (SELECT 1 FROM {FIELDS_TABLE} v WHERE v.chunk_row = {self.row} AND v.field = %s AND "
        if cond is None:
            return text + f"v.kind <> {KIND_NONE}{_SUBLINK_END})", (name,)
        return text + cond[0] + f"{_SUBLINK_END})", (name, *cond[1])

    def check_dates(self, name: str, operand: _Operand) -> None:
        self.date_checks.setdefault(name, operand)


def _kind_cond(kind: int, sql_op: str, value: Any) -> Frag:
    return f"(v.kind = {_KIND[kind]} AND v.{_COLUMN[kind]} {sql_op} %s)", (_sql_value(kind, value),)


def _eq_match(ctx: _Ctx, name: str, o: _Operand) -> Frag:
    if o.date_like and _TIME not in o.eq:
        ctx.check_dates(name, o)
    conds = [_kind_cond(kind, "=", v) for kind, v in o.eq.items()]
    return ctx.exists(name, _join("OR", conds)) if conds else _FALSE


def _in_match(ctx: _Ctx, name: str, ops: list[_Operand]) -> Frag:
    sets: dict[int, dict[Any, None]] = {}  # per kind, the distinct values in first-seen order (linear: no list scan)
    for o in ops:
        if o.date_like:
            ctx.check_dates(name, o)
        for kind, v in o.eq.items():
            sets.setdefault(kind, {})[_sql_value(kind, v)] = None
    conds: list[Frag] = [
        (f"(v.kind = {_KIND[kind]} AND v.{_COLUMN[kind]} = ANY(%s::{_ARRAY_TYPE[kind]}))", (list(values),))
        for kind, values in sets.items()
    ]
    return ctx.exists(name, _join("OR", conds)) if conds else _FALSE


def _order_match(ctx: _Ctx, name: str, op: str, o: _Operand) -> Frag:
    if _TIME not in o.order:
        ctx.check_dates(name, o)
    conds = [_kind_cond(kind, _ORDER_SQL[op], v) for kind, v in o.order.items()]
    return ctx.exists(name, _join("OR", conds)) if conds else _FALSE


def _between_match(ctx: _Ctx, name: str, lo: _Operand, hi: _Operand) -> Frag:
    if _TIME not in lo.order or _TIME not in hi.order:
        ctx.check_dates(name, lo if _TIME not in lo.order else hi)
    conds: list[Frag] = []
    for kind, a in lo.order.items():
        if kind in hi.order:
            col = _COLUMN[kind]
            conds.append((
                f"(v.kind = {_KIND[kind]} AND v.{col} >= %s AND v.{col} <= %s)",
                (_sql_value(kind, a), _sql_value(kind, hi.order[kind])),
            ))
    return ctx.exists(name, _join("OR", conds)) if conds else _FALSE


def _op_test(ctx: _Ctx, name: str, op: Any, operand: Any) -> tuple[Frag, bool]:
    """``(test, positive)``: the test over a present field's elements; ``positive`` when it is one ``EXISTS`` (so
    true implies the field is present)."""
    op_name = _op_name(name, op)
    if op_name == "not":
        inner, _ = _condition_test(ctx, name, operand)
        return _not(inner), False
    if op_name in ("in", "nin"):
        match = _in_match(ctx, name, _operand_list(name, str(op), operand))
        return (match, True) if op_name == "in" else (_not(match), False)
    if op_name == "between":
        lo, hi = _operand_list(name, str(op), operand)
        return _between_match(ctx, name, lo, hi), True
    value = _operand(name, str(op), operand)
    if op_name == "eq":
        return _eq_match(ctx, name, value), True
    if op_name == "ne":
        return _not(_eq_match(ctx, name, value)), False
    return _order_match(ctx, name, op_name, value), True


def _condition_test(ctx: _Ctx, name: str, cond: Any) -> tuple[Frag, bool]:
    if isinstance(cond, Mapping):
        tests = [_op_test(ctx, name, op, operand) for op, operand in cond.items()]
        return _join("AND", [t for t, _ in tests]), all(p for _, p in tests)
    if isinstance(cond, _SEQUENCES):
        return _op_test(ctx, name, "in", list(cond))
    return _op_test(ctx, name, "eq", cond)


def _equalities(part: Any) -> tuple[str, str, list[Any]] | None:
    """``(field, "in" or "nin", operands)`` when ``part`` (a validated filter) is one field's equality — a bare
    value or list, ``eq``, ``in`` — or its negation (``ne``, ``nin``); else ``None``."""
    if not isinstance(part, Mapping) or len(part) != 1:
        return None
    ((name, cond),) = part.items()
    if name.startswith("$"):
        return None
    if isinstance(cond, Mapping):
        if len(cond) != 1:
            return None
        ((op, operand),) = cond.items()
        op_name = _op_name(name, op)
        if op_name in ("eq", "ne"):
            return name, "in" if op_name == "eq" else "nin", [operand]
        return (name, op_name, list(operand)) if op_name in ("in", "nin") else None
    return name, "in", list(cond) if isinstance(cond, _SEQUENCES) else [cond]


def _folded(key: str, parts: Sequence[Any]) -> list[Any]:
    """The parts of an ``$or`` with the equalities of one field as one ``in`` (``$and``: the negated ones as one
    ``nin``), at the place of the first, as the evaluator folds them: the same truth and falsity, one test instead
    of thousands (an ``$and`` of 500 ``ne`` ran 500 subplans per row)."""
    want = "in" if key == "$or" else "nin"
    groups: dict[str, list[Any]] = {}  # field -> its equality parts
    slots: list[Any] = []  # the parts, a field's name standing for its equalities
    for part in parts:
        eq = _equalities(part)
        if eq is None or eq[1] != want:
            slots.append(part)
            continue
        if eq[0] not in groups:
            groups[eq[0]] = []
            slots.append(eq[0])
        groups[eq[0]].append(part)
    if len(slots) == len(parts):
        return list(parts)
    out: list[Any] = []
    for p in slots:
        if not isinstance(p, str):
            out.append(p)
        elif len(groups[p]) == 1:
            out.append(groups[p][0])
        else:
            out.append({p: {want: [v for part in groups[p] for v in _equalities(part)[2]]}})  # type: ignore[index]
    return out


def _node(ctx: _Ctx, flt: Mapping[str, Any]) -> tuple[Frag, Frag]:
    """``(is_true, is_false)`` of a (nested) filter dict: two two-valued SQL booleans."""
    trues: list[Frag] = []
    falses: list[Frag] = []
    for key, cond in flt.items():
        if key == "$and" or key == "$or":
            parts = [_node(ctx, part) for part in _folded(key, cond)]
            t = _join("AND" if key == "$and" else "OR", [p[0] for p in parts])
            f = _join("OR" if key == "$and" else "AND", [p[1] for p in parts])
        elif key == "$not":
            f, t = _node(ctx, cond)
        else:
            ctx.fields.append(key)
            test, positive = _condition_test(ctx, key, cond)
            present = ctx.exists(key, None)
            t = test if positive else _join("AND", [present, test])
            f = _join("AND", [present, _not(test)])
        trues.append(t)
        falses.append(f)
    return _join("AND", trues), _join("OR", falses)


@dataclass(frozen=True)
class SqlFilter:
    """A filter compiled to SQL.

    Attributes:
        sql: a boolean SQL expression with ``%s`` placeholders, true exactly where the filter is true.
        params: the placeholders' values, in order.
        fields: the metadata fields the filter names (for the unknown-field warning), in order, distinct.
        date_checks: ``field -> operand`` whose comparison the evaluator refuses when the field holds a date
            (see :func:`check_filter`).
    """

    sql: str
    params: tuple[Any, ...]
    fields: tuple[str, ...]
    date_checks: Mapping[str, _Operand]

    def date_error(self, name: str) -> ValueError:
        """The evaluator's own error for a non-date operand compared with a stored date in ``name``."""
        return _date_error(name, self.date_checks[name])


def filter_sql(filter: Mapping[str, Any] | None, *, row: str) -> SqlFilter | None:
    """``filter`` as SQL over the typed values of the chunk whose row id is the SQL expression ``row``; ``None`` for
    an absent or empty filter.  The filter is validated and compiled first
    (:func:`~langchain_ragspine.filters.compiled_filter`; one compiled already is taken as it is), and its SQL is
    built once per compiled filter, for any ``row``: the searches of one call (the channels of a hybrid) share it.

    Raises:
        ValueError, TypeError: a malformed filter, exactly as :func:`langchain_ragspine.filters.compile_filter`
            (it validates first).
    """
    compiled = compiled_filter(filter)
    if compiled is None:
        return None
    built = compiled.derived("sql", _build_sql)
    return SqlFilter(built.sql.replace(_ROW, row), built.params, built.fields, built.date_checks)


def _build_sql(filter: CompiledFilter) -> SqlFilter:
    """``filter``'s SQL with :data:`_ROW` in place of the row expression."""
    ctx = _Ctx()
    (text, params), _ = _node(ctx, filter)
    text = text.replace(_SUBLINK_END, "" if ctx.sublinks <= SEMI_JOIN_LIMIT else " OFFSET 0")
    return SqlFilter(text, params, tuple(dict.fromkeys(ctx.fields)), dict(ctx.date_checks))


def check_filter(conn: Any, flt: SqlFilter, *, stacklevel: int = 2, hidden: Collection[str] = ()) -> None:
    """Run the checks the evaluator makes when it computes a mask, over the searchable chunks of the database
    behind ``conn``: a non-date operand compared with a field that holds dates raises; a field that no chunk has
    warns (:class:`~langchain_ragspine.filters.UnknownFilterFieldWarning`, naming the closest known fields; one
    warning each for at most :data:`~langchain_ragspine.filters.MAX_FIELD_WARNINGS` fields, then one for the rest:
    :func:`~langchain_ragspine.filters.warn_unknown_fields`), unless
    there is no chunk at all.  One query; a second, for the known field names, only when a field is unknown.
    ``hidden``: field names of the store's own bookkeeping that older rows may hold, never named as known fields
    (and a filter on one is unknown).

    Raises:
        ValueError: the evaluator's date error (:data:`~langchain_ragspine.filters.DATE_FORMATS`).
    """
    names = list(dict.fromkeys([*flt.fields, *flt.date_checks]))
    rows = conn.execute(
        f"SELECT f, EXISTS (SELECT 1 FROM {FIELDS_TABLE} v WHERE v.field = f), "
        f"EXISTS (SELECT 1 FROM {FIELDS_TABLE} v WHERE v.field = f AND v.kind = {_KIND[_TIME]}) "
        "FROM unnest(%s::text[]) WITH ORDINALITY AS u(f, i) ORDER BY i",
        (names,),
    ).fetchall()
    for name, _present, has_date in rows:
        if has_date and name in flt.date_checks:
            raise flt.date_error(name)
    named = set(flt.fields)
    unknown = [name for name, present, _ in rows if name in named and (not present or name in hidden)]
    if unknown:
        known = [r[0] for r in conn.execute(f"SELECT DISTINCT field FROM {FIELDS_TABLE}").fetchall()
                 if r[0] not in hidden]
        if known:
            warn_unknown_fields(unknown, known, stacklevel=stacklevel)
