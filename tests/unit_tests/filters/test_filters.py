import datetime as dt
import warnings
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from langchain_ragspine.filters import (
    FilterMasks,
    UnknownFilterFieldWarning,
    and_filters,
    compile_filter,
    matches,
    parse_filter_expression,
    parse_filter_expressions,
)


def test_bare_value_is_eq_and_list_is_in():
    assert matches({"lang": "ja"}, {"lang": "ja"})
    assert not matches({"lang": "en"}, {"lang": "ja"})
    assert matches({"lang": "zh"}, {"lang": ["ja", "zh"]})
    assert not matches({"lang": "en"}, {"lang": ["ja", "zh"]})


def test_all_fields_must_hold():
    md = {"lang": "ja", "topic": "bm25"}
    assert matches(md, {"lang": "ja", "topic": "bm25"})
    assert not matches(md, {"lang": "ja", "topic": "x"})


def test_empty_filter_matches_everything():
    assert matches({}, None) and matches({}, {})
    assert compile_filter(None) is None


@pytest.mark.parametrize("op", ["eq", "ne", "in", "nin", "gt", "gte", "lt", "lte", "between"])
def test_missing_field_never_matches(op):
    operand = {"in": ["a"], "nin": ["a"], "between": [1, 2]}.get(op, "a")
    assert not matches({"other": 1}, {"f": {op: operand}})
    assert not matches({"f": None}, {"f": {op: operand}})
    assert not matches({"f": []}, {"f": {op: operand}})


def test_stored_numbers_compare_as_numbers():
    assert matches({"year": 2021}, {"year": {"gte": "2020"}})  # the operand takes the stored type
    assert matches({"n": 10}, {"n": {"gt": 9}})  # "10" < "9" lexicographically
    assert matches({"n": 10}, {"n": {"gt": "9"}})
    assert matches({"year": 2020}, {"year": "2020"})
    assert matches({"x": 1.5}, {"x": {"between": [1, 2]}})
    assert matches({"v": 1.1}, {"v": "1.10"})  # a stored number: "1.10" is the number 1.1


def test_stored_strings_compare_as_strings():
    # a string in metadata is a string: the operand is never read as a number against it
    assert not matches({"n": "10"}, {"n": {"gt": "9"}})
    assert not matches({"year": "2021"}, {"year": {"gte": 2020}})  # a number does not order against a string
    assert matches({"year": "2021"}, {"year": {"gte": "2020"}})
    assert matches({"id": "98231"}, {"id": 98231})  # equality: a number equals the same spelling
    assert not matches({"id": "098231"}, {"id": 98231})


def test_dates_compare_as_dates():
    assert matches({"d": "2024-03-01"}, {"d": {"between": ["2024-01-01", "2024-06-30"]}})
    assert matches({"d": dt.date(2024, 3, 1)}, {"d": {"gte": "2024-02-29"}})
    assert matches({"d": "2024-03-01T10:00:00+09:00"}, {"d": {"lt": "2024-03-01T02:00:00Z"}})
    assert not matches({"d": "2024-03-01"}, {"d": {"gt": "2024-03-01"}})


def test_mixed_kinds_do_not_order():
    assert not matches({"x": "abc"}, {"x": {"gt": 1}})
    assert not matches({"x": 5}, {"x": {"lt": "zzz"}})
    assert matches({"x": "b"}, {"x": {"gt": "a"}})


def test_list_valued_metadata():
    md = {"tags": ["uv", "python"]}
    assert matches(md, {"tags": "uv"})
    assert matches(md, {"tags": {"in": ["rust", "python"]}})
    assert not matches(md, {"tags": {"ne": "uv"}})  # ne: no element equals
    assert matches(md, {"tags": {"ne": "rust"}})
    assert not matches(md, {"tags": {"nin": ["python"]}})
    assert matches(md, {"tags": {"nin": ["rust"]}})


def test_several_operators_on_one_field_are_anded():
    f = {"year": {"gte": 2020, "$lt": 2024}}
    assert matches({"year": 2023}, f)
    assert not matches({"year": 2024}, f)


@pytest.mark.parametrize(
    "flt, match",
    [
        ({"a": {"like": 1}}, "unknown operator 'like'"),
        ({"a": {"in": "x"}}, "'in' needs a list"),
        ({"a": {"between": [1]}}, "between"),
        ({"a": {}}, "empty operator"),
        ({"a": {"gt": None}}, "comparable"),
        ({"": 1}, "non-empty"),
    ],
)
def test_malformed_filters_raise_value_error(flt, match):
    with pytest.raises(ValueError, match=match):
        compile_filter(flt)


def test_non_mapping_filter_is_type_error():
    with pytest.raises(TypeError):
        compile_filter(["a"])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "expr, parsed",
    [
        ("lang=ja", ("lang", {"eq": "ja"})),
        ("year>=2020", ("year", {"gte": "2020"})),
        ("year < 2024", ("year", {"lt": "2024"})),
        ("tags=uv,python", ("tags", {"in": ["uv", "python"]})),
        ("dept!=hr", ("dept", {"ne": "hr"})),
        ("dept!=hr,legal", ("dept", {"nin": ["hr", "legal"]})),
        ("year=2019..2021", ("year", {"between": ["2019", "2021"]})),
    ],
)
def test_parse_cli_expressions(expr, parsed):
    assert parse_filter_expression(expr) == parsed


@pytest.mark.parametrize("bad", ["lang", "=ja", "lang=", "year=..2", "", "year>>1", "year=<1", "a==b"])
def test_parse_rejects_malformed_expressions(bad):
    with pytest.raises(ValueError, match="filter"):
        parse_filter_expression(bad)


def test_parse_several_on_same_field():
    f = parse_filter_expressions(["year>=2020", "year<2024", "lang=ja"])
    assert f == {"year": {"gte": "2020", "lt": "2024"}, "lang": {"eq": "ja"}}
    assert matches({"year": 2022, "lang": "ja"}, f)
    with pytest.raises(ValueError, match="repeats"):
        parse_filter_expressions(["year>=1", "year>=2"])


@pytest.mark.parametrize("operand", ["2026-9-01", "2026-11-1", "2026-13-01", "2024/01/01", "2024.01.01", "2024年1月1日"])
@pytest.mark.parametrize("stored", ["2026-11-01", dt.date(2026, 11, 1), "2026-11-01T10:00:00+09:00"])
def test_regression_non_iso_dates_in_a_filter_are_an_error(operand, stored):
    # they used to compare as plain strings and silently match nothing (second user trial; issue 8: 2024/01/01)
    for flt in ({"updated": {"gte": operand}}, {"updated": operand}, {"updated": {"ne": operand}},
                {"updated": {"in": [operand]}}, {"updated": {"between": ["2020-01-01", operand]}}):
        with pytest.raises(ValueError, match=r"not a date this filter reads; write YYYY-MM-DD"):
            matches({"updated": stored}, flt)


def test_a_date_shaped_operand_against_a_string_field_compares_as_a_string():
    assert matches({"path": "2024/01/01"}, {"path": "2024/01/01"})
    assert not matches({"path": "2024/01/01"}, {"path": "2024/1/1"})


@pytest.mark.parametrize("operand", [2024, "2024", "soon"])
def test_ordering_a_date_field_needs_a_date(operand):
    with pytest.raises(ValueError, match="the field holds dates"):
        matches({"updated": "2026-11-01"}, {"updated": {"gte": operand}})
    assert not matches({"updated": "2026-11-01"}, {"updated": operand})  # not equal, no error


# -- issue 8, section 2: filters never widen ------------------------------------------------------------------------
@pytest.mark.parametrize(
    "metadata, flt, expected",
    [
        ({"order_id": "98231"}, {"order_id": "0098231"}, False),
        ({"order_id": "0098231"}, {"order_id": "98231"}, False),
        ({"order_id": "0098231"}, {"order_id": "0098231"}, True),
        ({"version": "1.1"}, {"version": "1.10"}, False),
        ({"version": "1.10"}, {"version": "1.1"}, False),
        ({"version": "1.1"}, {"version": {"ne": "1.10"}}, True),
        ({"version": "1.10"}, {"version": {"ne": "1.10"}}, False),
        ({"version": "1.1"}, {"version": {"in": ["1.10", "1.2"]}}, False),
        ({"version": "1.1"}, {"version": {"nin": ["1.10"]}}, True),
        ({"draft": False}, {"draft": "false"}, True),
        ({"draft": False}, {"draft": "FALSE"}, True),
        ({"draft": False}, {"draft": "no"}, True),  # YAML 1.1 spellings, as front matter reads them
        ({"draft": False}, {"draft": {"ne": "true"}}, True),
        ({"draft": True}, {"draft": {"ne": "true"}}, False),
        ({"draft": True}, {"draft": "false"}, False),
        ({"draft": True}, {"draft": "1"}, False),  # a boolean is not a number
        ({"draft": "false"}, {"draft": False}, True),  # a stored string: the operand's spelling
        ({"n": 1}, {"n": True}, False),
        ({"year": 2020}, {"year": "2020"}, True),
        ({"year": 2020}, {"year": {"lt": "2020.5"}}, True),
        ({"updated": dt.date(2024, 1, 2)}, {"updated": {"gt": "2024-01-01"}}, True),
        ({"updated": "2024-01-02"}, {"updated": {"gt": dt.date(2024, 1, 1)}}, True),
        ({"updated": dt.datetime(2024, 1, 1, 9, tzinfo=dt.timezone(dt.timedelta(hours=9)))},
         {"updated": "2024-01-01T00:00:00Z"}, True),
    ],
)
def test_issue8_typed_by_the_stored_value(metadata, flt, expected):
    assert matches(metadata, flt) is expected


def test_in_with_mixed_operands_uses_each_in_the_stored_type():
    flt = {"x": {"in": ["0098231", "1.10", "false"]}}
    assert matches({"x": 98231}, flt) and matches({"x": 1.1}, flt) and matches({"x": False}, flt)
    assert not matches({"x": "98231"}, flt) and not matches({"x": "1.1"}, flt)


# -- $and / $or / $not --------------------------------------------------------------------------------------------------
def test_regression_logical_operators_are_supported():
    # "$and" used to be read as a field name: "operator 'in' needs a comparable value"
    flt = {"$and": [{"dept": "a"}, {"year": {"gte": 2020}}]}
    assert matches({"dept": "a", "year": 2021}, flt)
    assert not matches({"dept": "a", "year": 2019}, flt)
    flt = {"$or": [{"dept": "a"}, {"dept": "b"}]}
    assert matches({"dept": "b"}, flt) and not matches({"dept": "c"}, flt)
    assert matches({"dept": "b"}, {"$not": {"dept": "a"}})
    assert matches({"x": 3}, {"x": {"$not": {"gt": 5}}}) and not matches({"x": 7}, {"x": {"$not": {"gt": 5}}})
    assert matches({"x": 3}, {"x": {"gte": 1, "not": 2}})


@pytest.mark.parametrize(
    "flt",
    [
        {"$not": {"dept": "a"}},
        {"$not": {"dept": {"ne": "a"}}},
        {"dept": {"$not": {"eq": "a"}}},
        {"$not": {"$or": [{"dept": "a"}, {"lang": "ja"}]}},
        {"$not": {"$and": [{"dept": "a"}, {"lang": "en"}]}},
        {"$not": {"$not": {"dept": "a"}}},
    ],
)
def test_not_never_matches_a_chunk_missing_the_field(flt):
    # three-valued logic (as SQL's NULL): a condition on a missing field is unknown, and NOT unknown is unknown
    assert not matches({"lang": "en"}, flt)
    assert not matches({"lang": "en", "dept": None}, flt)
    assert not matches({"lang": "en", "dept": []}, flt)


def test_a_missing_field_matters_only_where_it_decides_the_result():
    flt = {"$or": [{"dept": "hr"}, {"lang": "ja"}]}
    assert matches({"lang": "ja"}, flt)  # unknown OR true = true
    assert not matches({"lang": "en"}, flt)
    assert not matches({"lang": "en"}, {"$not": flt})  # NOT (unknown OR false) = unknown
    assert matches({"lang": "en", "dept": "x"}, {"$not": flt})  # NOT (false OR false) = true
    # NOT (unknown AND false) = NOT false = true: lang alone decides, whatever dept would be
    assert matches({"lang": "en"}, {"$not": {"$and": [{"dept": "hr"}, {"lang": "ja"}]}})


def test_nested_logic_and_field_conditions_combine():
    flt = {"lang": "ja", "$or": [{"year": {"gte": 2024}}, {"$and": [{"dept": "a"}, {"$not": {"draft": True}}]}]}
    assert matches({"lang": "ja", "year": 2025}, flt)
    assert matches({"lang": "ja", "year": 2000, "dept": "a", "draft": False}, flt)
    assert not matches({"lang": "ja", "year": 2000, "dept": "a", "draft": True}, flt)
    assert not matches({"lang": "ja", "year": 2000, "dept": "a"}, flt)  # draft missing: unknown
    assert not matches({"lang": "en", "year": 2025}, flt)


@pytest.mark.parametrize(
    "flt, error, match",
    [
        ({"a": {"$regex": "x"}}, ValueError, r"unknown operator '\$regex'; valid operators: eq, ne, in, nin, gt"),
        ({"a": {"like": 1}}, ValueError, "valid operators: eq, ne, in, nin, gt, gte, lt, lte, between, not"),
        ({"a": {"$and": [{"b": 1}]}}, ValueError, r"unknown operator '\$and'.*combine whole filters"),
        ({"$nor": [{"a": 1}]}, ValueError, r"unknown logical operator '\$nor'; valid ones: \$and, \$or, \$not"),
        ({"$eq": 1}, ValueError, r"unknown logical operator '\$eq'.*comparisons go inside a field"),
        ({"$and": {"a": 1}}, ValueError, r"\$and needs a non-empty list of filters"),
        ({"$or": []}, ValueError, r"\$or needs a non-empty list"),
        ({"$and": ["a"]}, TypeError, r"\$and\[0\] must be a dict"),
        ({"$not": [{"a": 1}]}, TypeError, r"\$not must be a dict"),
        ({"$not": {}}, ValueError, "empty dict"),
        ({"a": {"in": [{"b": 1}]}}, ValueError, "needs a comparable value"),
    ],
)
def test_logical_and_operator_errors_name_the_operator(flt, error, match):
    with pytest.raises(error, match=match):
        compile_filter(flt)


def test_and_filters_never_widen():
    assert and_filters(None, {}) is None
    assert and_filters({"a": 1}, None) == {"a": 1}
    assert and_filters({"a": 1}, {"a": 1}) == {"a": 1}
    both = and_filters({"dept": "a"}, {"dept": "b"})
    assert both == {"$and": [{"dept": "a"}, {"dept": "b"}]}
    assert not matches({"dept": "a"}, both) and not matches({"dept": "b"}, both)
    with pytest.raises(TypeError):
        and_filters({"a": 1}, ["b"])  # type: ignore[arg-type]


_VALUES = st.one_of(st.none(), st.sampled_from(["a", "b", "1.10", "1.1", 1, 2, True, False, "2024-01-01"]))
_LEAVES = st.builds(
    lambda f, op, v: {f: {op: v}},
    st.sampled_from(["x", "y"]),
    st.sampled_from(["eq", "ne", "gt", "lte"]),
    st.sampled_from(["a", "1.10", "1", 2, True, "2023-06-01"]),
)
_FILTERS = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.builds(lambda a: {"$not": a}, inner),
        st.builds(lambda a, b: {"$and": [a, b]}, inner, inner),
        st.builds(lambda a, b: {"$or": [a, b]}, inner, inner),
    ),
    max_leaves=6,
)


def _metadata(x: object, y: object) -> dict:
    return {k: v for k, v in (("x", x), ("y", y)) if v is not None}


def _truth(flt: dict, md: dict) -> bool | None:
    """A reference three-valued evaluation (Kleene), written independently of filters.py."""
    (key, cond), = flt.items()
    if key == "$not":
        r = _truth(cond, md)
        return None if r is None else not r
    if key in ("$and", "$or"):
        rs = [_truth(c, md) for c in cond]
        decisive = key == "$or"
        if decisive in rs:
            return decisive
        return None if None in rs else not decisive
    return None if key not in md else matches(md, flt)


@settings(max_examples=300, deadline=None)
@given(_FILTERS, _VALUES, _VALUES)
def test_property_logic_is_three_valued_and_a_missing_field_never_matches(flt, x, y):
    md = _metadata(x, y)
    try:
        got, negated, expected = matches(md, flt), matches(md, {"$not": flt}), _truth(flt, md)
    except ValueError:  # a non-date operand ordered against a stored date
        return
    assert got is (expected is True)
    assert negated is (expected is False)
    assert not (got and negated)  # never both a filter and its negation
    if not md:
        assert not got and not negated


# -- FilterMasks: compiled and evaluated once per filter; unknown fields warn --------------------------------------
class CountingMetadata(dict):
    reads = 0

    def get(self, key, default=None):
        CountingMetadata.reads += 1
        return super().get(key, default)


def test_masks_are_evaluated_once_per_filter_and_cached():
    mds = [CountingMetadata(dept="a" if i % 2 else "b", year=2000 + i) for i in range(10)]
    masks = FilterMasks(mds)
    assert masks.mask(None) is None and masks.mask({}) is None
    CountingMetadata.reads = 0
    first = masks.mask({"dept": "a", "year": {"gte": 2005}})
    assert first.tolist() == [False, False, False, False, False, True, False, True, False, True]
    reads = CountingMetadata.reads
    assert reads > 0
    assert masks.mask({"year": {"gte": 2005}, "dept": "a"}) is first  # same filter, key order aside
    assert CountingMetadata.reads == reads  # not evaluated again


def test_unknown_field_warns_with_the_closest_known_fields():
    masks = FilterMasks([{"dept": "a", "department_code": 1}, {"dept": "b", "lang": "ja"}])
    with pytest.warns(UnknownFilterFieldWarning, match=r"'dpet' is in no indexed chunk's metadata.*closest known fields: 'dept'"):
        assert not masks.mask({"dpet": "a"}).any()
    with pytest.warns(UnknownFilterFieldWarning, match="'lnag'"):  # nested in $or too; the other branch still counts
        assert masks.mask({"$or": [{"lnag": "ja"}, {"dept": "a"}]}).tolist() == [True, False]
    with pytest.warns(UnknownFilterFieldWarning, match="known fields: 'department_code', 'dept', 'lang'"):
        masks.mask({"zzzzzz": 1})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        masks.mask({"lang": "ja"})  # a field some chunk has: no warning
        FilterMasks([]).mask({"anything": 1})  # an empty corpus: nothing to compare with


def test_masks_keep_true_one_and_one_point_zero_apart():
    # evaluation is memoised per distinct stored value; True == 1 == 1.0 in Python must not share an entry
    masks = FilterMasks([{"x": True}, {"x": 1}, {"x": 1.0}, {"x": "1"}, {"x": True}, {"x": 1}])
    assert masks.mask({"x": 1}).tolist() == [False, True, True, True, False, True]
    assert masks.mask({"x": True}).tolist() == [True, False, False, False, True, False]
    assert masks.mask({"x": "1.0"}).tolist() == [False, True, True, False, False, True]


@pytest.mark.parametrize("flt", [
    {"year": {"$gte": 10**400}},
    {"year": 10**400},
    {"year": {"$between": [0, 10**400]}},
    {"year": {"$in": [1, -(10**400)]}},
])
def test_regression_a_number_beyond_a_floats_range_is_a_clear_error_on_both_backends(flt: dict[str, Any]) -> None:
    # trial 25c: a raw "OverflowError: int too large to convert to float" from every retriever
    from langchain_ragspine.filters import compile_filter
    from langchain_ragspine.filters.sql import filter_sql

    for compile_it in (compile_filter, lambda f: filter_sql(f, row="c")):
        with pytest.raises(ValueError, match=r"filter on 'year'.*out of range \(a filter number must fit a 64-bit"):
            compile_it(flt)
    assert compile_filter({"year": {"$lt": 10**300}}) is not None  # a big int a float holds is still a number
