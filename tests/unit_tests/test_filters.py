import datetime as dt

import pytest

from langchain_ragspine.filters import (
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


def test_numbers_compare_as_numbers_not_strings():
    assert matches({"year": 2021}, {"year": {"gte": "2020"}})
    assert matches({"year": "2021"}, {"year": {"gte": 2020}})
    assert matches({"n": 10}, {"n": {"gt": 9}})  # "10" < "9" lexicographically
    assert matches({"n": "10"}, {"n": {"gt": "9"}})
    assert matches({"year": 2020}, {"year": "2020"})
    assert matches({"x": 1.5}, {"x": {"between": [1, 2]}})


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


@pytest.mark.parametrize("operand", ["2026-9-01", "2026-11-1", "2026-13-01"])
def test_regression_non_iso_dates_in_a_filter_are_an_error(operand):
    # they used to compare as plain strings and silently match nothing (second user trial)
    with pytest.raises(ValueError, match="not ISO-8601"):
        compile_filter({"updated": {"gte": operand}})
