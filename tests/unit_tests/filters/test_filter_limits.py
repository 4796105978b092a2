"""Filters just under the size limits answer fast, and the same as small ones (issue 25, section 6: limits).

Before: a filter of 9,999 fields took 49 s on a 300-document directory store in hybrid mode, and a ``nin`` of
9,999 strings of 10,000 characters 77 s on PostgreSQL.  A call validated and compiled the same filter about six
times (each channel, the gate, the merge of the retriever's filter with the call's), evaluated every node of it for
every chunk, and nothing bounded the characters of a filter.  Now a call compiles its filter once
(``CompiledFilter``), evaluation stops as soon as a chunk's answer is known, the equalities of one field fold into
one set test, and ``MAX_FILTER_CHARS`` bounds the strings.  No timing is asserted here (``benchmarks/
filter_limits.py`` measures it); these tests count compilations and compare results.  The PostgreSQL side is in
``test_postgres_limits.py``.
"""

from __future__ import annotations

import datetime as dt
import re
import warnings
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from langchain_ragspine import filters
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.filters import (
    MAX_FIELD_WARNINGS,
    MAX_FILTER_CHARS,
    MAX_FILTER_NODES,
    MAX_FILTER_VALUES,
    FilterMasks,
    UnknownFilterFieldWarning,
    and_filters,
    compile_filter,
    compiled_filter,
    filter_key,
    matches,
)
from langchain_ragspine.filters.sql import filter_sql
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.sources import open_retriever
from langchain_ragspine.retrievers import BM25Retriever, DenseRetriever, HybridRetriever
from langchain_ragspine.retrievers.contract import invoke_retriever

QUERY = "rainy season report"
DOCS = [Document(page_content=f"rainy season report number {i}",
                 metadata={"chunk_id": f"d{i}#0", "doc_id": f"d{i}", "dept": "ab"[i % 2], "n": i,
                           "source": f"d{i}.md", "tags": ["x", f"t{i % 3}"]})
        for i in range(12)]


def _retrievers(**own: Any) -> dict[str, BaseRetriever]:
    bm25 = BM25Retriever.from_documents(DOCS, k=20)
    dense = DenseRetriever.from_documents(DOCS, HashingEmbeddings(32), k=20)
    return {"bm25": bm25, "dense": dense, "hybrid": HybridRetriever(retrievers=[bm25, dense], k=20, **own)}


def _ids(docs: list[Document]) -> list[str]:
    return sorted(d.metadata["chunk_id"] for d in docs)


class _Compilations:
    """Counts the field conditions compiled (``filters._compile_condition``, one call per field of a filter each
    time the filter is compiled)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.n = 0
        real = filters._compile_condition

        def counting(field: str, cond: Any) -> Any:
            self.n += 1
            return real(field, cond)

        monkeypatch.setattr(filters, "_compile_condition", counting)


FLT = {"dept": "a", "n": {"gte": 3}}  # two field conditions
WANT = ["d10#0", "d4#0", "d6#0", "d8#0"]


@pytest.mark.parametrize("name", ["bm25", "dense", "hybrid"])
def test_a_call_compiles_its_filter_once(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: a hybrid call compiled the same filter 5 times (its merge with its own filter, each channel's
    contract call and mask); now once, whichever retriever answers (BM25 and dense alone already did)."""
    retriever = _retrievers()[name]
    compiled = _Compilations(monkeypatch)
    assert _ids(retriever.invoke(QUERY, filter=FLT)) == WANT
    assert compiled.n == 2
    assert _ids(invoke_retriever(retriever, QUERY, k=20, filter=FLT)) == WANT  # through the contract too
    assert compiled.n == 4


async def test_an_async_hybrid_call_compiles_its_filter_once(monkeypatch: pytest.MonkeyPatch) -> None:
    retriever = _retrievers()["hybrid"]
    compiled = _Compilations(monkeypatch)
    assert _ids(await retriever.ainvoke(QUERY, filter=FLT)) == WANT
    assert compiled.n == 2


def test_the_own_filter_and_the_call_filter_are_compiled_once_each(monkeypatch: pytest.MonkeyPatch) -> None:
    retriever = _retrievers(filter={"tags": "t0"})["hybrid"]  # d0 d3 d6 d9
    compiled = _Compilations(monkeypatch)
    assert _ids(retriever.invoke(QUERY, filter=FLT)) == ["d6#0"]  # the AND: never wider than either
    assert compiled.n == 3
    assert _ids(retriever.invoke(QUERY)) == ["d0#0", "d3#0", "d6#0", "d9#0"]
    assert compiled.n == 4


def test_a_store_retriever_call_compiles_its_filter_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tester's case: ``open_retriever(mode="hybrid")`` over a directory store (the live wrapper, the hybrid,
    its two channels): one compilation per call (before: 6)."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(6):
        (corpus / f"d{i}.md").write_text(f"---\ndept: {'ab'[i % 2]}\n---\n# Doc {i}\n\nrainy season report {i}\n")
    ingest(corpus, tmp_path / "store", embedding="hashing", progress=False)
    retriever = open_retriever(tmp_path / "store", mode="hybrid", k=10)
    compiled = _Compilations(monkeypatch)
    docs = retriever.invoke(QUERY, filter={"dept": "a"})
    assert sorted(d.metadata["dept"] for d in docs) == ["a", "a", "a"] and compiled.n == 1


def test_a_compiled_filter_is_a_snapshot(monkeypatch: pytest.MonkeyPatch) -> None:
    """A compiled filter is what its dict was when it was compiled: changing the dict afterwards changes neither
    what it matches nor what it shows; retrievers take it as it is; one from elsewhere gets a plain copy."""
    flt: dict[str, Any] = {"dept": "b", "n": {"in": [1, 3]}}
    cf = compiled_filter(flt)
    assert cf is not None and compiled_filter(cf) is cf and compile_filter(cf) is cf.predicate
    flt["dept"] = "a"
    flt["n"]["in"].append(5)
    assert dict(cf) == {"dept": "b", "n": {"in": [1, 3]}} and cf.fields == ("dept", "n")
    compiled = _Compilations(monkeypatch)
    assert _ids(_retrievers()["hybrid"].invoke(QUERY, filter=cf)) == ["d1#0", "d3#0"]
    assert compiled.n == 0  # not compiled again

    seen: list[Any] = []

    class Foreign(BaseRetriever):
        def _get_relevant_documents(self, query: str, *, run_manager: Any, filter: Any = None) -> list[Document]:
            seen.append(filter)
            return [d for d in DOCS if matches(d.metadata, filter)]

    assert _ids(invoke_retriever(Foreign(), QUERY, filter=cf)) == ["d1#0", "d3#0"]
    assert type(seen[0]) is dict and seen[0] == dict(cf) and seen[0]["n"] is not cf["n"]


# -- the characters of a filter are bounded ------------------------------------------------------------------------
def _long_filter(total: int) -> dict[str, Any]:
    """A ``nin`` of strings of 10,000 characters holding about ``total`` characters (the tester's filter, scaled)."""
    return {"source": {"nin": [f"v{i:04d}" * 2_000 for i in range(total // 10_000 + 1)]}}


def test_a_filter_over_the_character_limit_is_refused_at_every_entry_point(tmp_path: Path) -> None:
    """Regression: nothing bounded the characters of a filter — a ``nin`` of 9,999 strings of 10,000 characters
    (100 MB) passed every check and took 77 s per search on PostgreSQL."""
    from langchain_ragspine.graphs import build_corrective_rag
    from langchain_ragspine.vectorstores import RagSpineVectorStore

    over = _long_filter(MAX_FILTER_CHARS)
    keys = {f"{'k' * 999}{i:04d}": 1 for i in range(MAX_FILTER_CHARS // 1003 + 1)}  # field names count too
    limit = re.escape(f"more than {MAX_FILTER_CHARS} characters in its strings (filters.MAX_FILTER_CHARS")
    retrievers = _retrievers()
    vectors = RagSpineVectorStore(tmp_path / "vs", HashingEmbeddings(32))
    vectors.add_documents(DOCS[:3])
    calls = [compile_filter, filter_key, compiled_filter, lambda f: and_filters({"n": 1}, f),
             lambda f: matches({"n": 1}, f), lambda f: filter_sql(f, row="s.chunk_row"),
             lambda f: BM25Retriever.from_documents(DOCS, filter=f),
             lambda f: vectors.similarity_search(QUERY, k=2, filter=f),
             lambda f: vectors.as_retriever().invoke(QUERY, filter=f),
             lambda f: build_corrective_rag(retrievers["bm25"]).invoke({"question": QUERY, "filters": f})]
    calls += [lambda f, r=r: r.invoke(QUERY, filter=f) for r in retrievers.values()]
    for flt in (over, keys):
        for call in calls:
            with pytest.raises(ValueError, match=limit):
                call(flt)
    # the AND of two filters under the limit is one filter over it
    half = _long_filter(MAX_FILTER_CHARS // 2 + 10_000)
    other = {"doc_id": {"nin": [f"v{i:04d}" * 2_000 for i in range(MAX_FILTER_CHARS // 20_000 + 1)]}}
    with pytest.raises(ValueError, match=limit):
        compiled_filter(half, other)
    with pytest.raises(ValueError, match=limit):
        HybridRetriever(retrievers=list(retrievers.values())[:2], filter=half).invoke(QUERY, filter=other)
    vectors.close()


def test_legitimate_long_filters_pass_the_character_limit() -> None:
    """10,000 ids of 36 characters (UUIDs: 360,000) are well inside the limit, and mean what they say."""
    ids = [f"{i:08d}-0000-0000-0000-000000000000" for i in range(MAX_FILTER_VALUES - 2)] + ["d1.md", "d2.md"]
    got = _retrievers()["hybrid"].invoke(QUERY, filter={"source": {"in": ids}})
    assert _ids(got) == ["d1#0", "d2#0"]
    assert _ids(_retrievers()["bm25"].invoke(QUERY, filter=_long_filter(MAX_FILTER_CHARS - 20_000))) == _ids(DOCS)


# -- big filters mean what the small ones do ------------------------------------------------------------------------
def _big_and_small() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(name, a filter near the limits, the small filter it equals on DOCS)."""
    absent = [f"x{i}.md" for i in range(5_000)]
    m = (MAX_FILTER_NODES - 1) // 2
    return [
        ("nin of 5,000", {"source": {"nin": [*absent[:2_500], "d1.md", *absent[2_500:], "d4.md"]}},
         {"source": {"nin": ["d1.md", "d4.md"]}}),
        ("$or of equalities", {"$or": [{"source": f"x{i}.md"} for i in range(MAX_FILTER_NODES - 3)] +
                               [{"source": "d2.md"}, {"n": 5}]}, {"$or": [{"source": "d2.md"}, {"n": 5}]}),
        ("$and of ne", {"$and": [{"n": {"ne": i}} for i in range(100, 100 + m - 1)] + [{"n": {"ne": 3}}]},
         {"n": {"ne": 3}}),
        ("$not of an $or of ne", {"$not": {"$or": [{"n": {"ne": 4}}, *({"n": {"ne": 4}} for _ in range(m - 1))]}},
         {"n": 4}),
        ("fields no chunk has", {"dept": "a", **{f"f{i}": "x" for i in range(MAX_FILTER_NODES - 1)}},
         {"source": "none"}),
        ("negated fields no chunk has", {"$not": {f"f{i}": "x" for i in range(MAX_FILTER_NODES - 2)}},
         {"source": "none"}),
        ("$or of $and", {"$or": [{"$and": [{"n": i}, {"dept": "ab"[i % 2]}]} for i in range(300)] +
                         [{"$and": [{"n": 7}, {"dept": "a"}]}]}, {"n": {"lte": 11}}),
        ("$or of many fields and one", {"$or": [*({f"f{i}": "x"} for i in range(MAX_FILTER_NODES - 2)),
                                                {"tags": "t2"}]}, {"tags": "t2"}),
    ]


@pytest.mark.parametrize("case", range(len(_big_and_small())))
def test_a_big_filter_gives_the_chunks_of_the_small_one(case: int) -> None:
    name, big, small = _big_and_small()[case]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnknownFilterFieldWarning)
        for kind, retriever in _retrievers().items():
            assert _ids(retriever.invoke(QUERY, filter=big)) == _ids(retriever.invoke(QUERY, filter=small)), (name,
                                                                                                               kind)
        want = [d.metadata["chunk_id"] for d in DOCS if matches(d.metadata, small)]
        assert [d.metadata["chunk_id"] for d in DOCS if matches(d.metadata, big)] == want, name


_OPS = st.sampled_from(["eq", "ne", "in", "nin", "gt", "not"])
_OPERANDS = st.sampled_from(["a", "b", 1, 2, "2", True, "2024-01-01", 1.5])


def _leaf(field: str, op: str, value: Any) -> dict[str, Any]:
    if op in ("in", "nin"):
        return {field: {op: [value, "zz"]}}
    if op == "not":
        return {field: {"not": {"eq": value}}}
    return {field: value} if op == "eq" else {field: {op: value}}


_LEAVES = st.builds(_leaf, st.sampled_from(["x", "x", "y", "gone"]), _OPS, _OPERANDS)
_WIDE = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.builds(lambda a: {"$not": a}, inner),
        st.builds(lambda parts: {"$and": parts}, st.lists(inner, min_size=1, max_size=8)),
        st.builds(lambda parts: {"$or": parts}, st.lists(inner, min_size=1, max_size=8)),
        st.builds(lambda a, b: {**a, **b}, inner, inner),  # a dict of several keys: AND
    ),
    max_leaves=24,
)
_STORED = st.one_of(st.none(), _OPERANDS, st.lists(_OPERANDS, max_size=3))


def _truth(flt: dict[str, Any], md: dict[str, Any]) -> bool | None:
    """A reference three-valued evaluation (Kleene over every key of every dict), written independently of the
    compiler: each field condition on its own through ``matches``."""
    results = []
    for key, cond in flt.items():
        if key == "$not":
            r = _truth(cond, md)
            results.append(None if r is None else not r)
        elif key in ("$and", "$or"):
            rs = [_truth(c, md) for c in cond]
            decisive = key == "$or"
            results.append(decisive if decisive in rs else None if None in rs else not decisive)
        else:
            value = md.get(key)
            present = value is not None and value != []
            results.append(matches(md, {key: cond}) if present else None)
    return False if False in results else None if None in results else True


@settings(max_examples=300, deadline=None)
@given(_WIDE, _STORED, _STORED)
def test_property_folded_and_short_circuited_filters_keep_kleene_semantics(flt: dict[str, Any], x: Any,
                                                                            y: Any) -> None:
    """Folding one field's tests, merging them and stopping early change no answer: every filter (wide ones with
    repeated fields, nested $not, dicts of several keys) gives what the reference evaluation gives, and so does
    its negation, through a compiled filter and through a mask."""
    md = {k: v for k, v in (("x", x), ("y", y)) if v is not None}
    try:
        expected = _truth(flt, md)
    except ValueError:  # a non-date operand ordered against a stored date: the evaluator may stop before it
        return
    cf = compiled_filter(flt)
    neg = compiled_filter({"$not": flt})
    assert cf is not None and neg is not None
    assert cf.predicate(md) is (expected is True), (flt, md)
    assert neg.predicate(md) is (expected is False), (flt, md)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnknownFilterFieldWarning)
        assert FilterMasks([md]).mask(cf).tolist() == [expected is True]


# -- what a cache key or an AND may not confuse ----------------------------------------------------------------------
def test_and_filters_keeps_filters_that_mean_different_things() -> None:
    """Regression: ``and_filters({"x": True}, {"x": 1})`` kept only ``{"x": True}`` (``True == 1``), so a chunk
    with ``x: True`` matched the AND although ``{"x": 1}`` does not match it: the AND widened."""
    for a, b in (({"x": True}, {"x": 1}), ({"x": 1}, {"x": True}), ({"x": 0}, {"x": False})):
        both = and_filters(a, b)
        assert both == {"$and": [a, b]}
        for md in ({"x": True}, {"x": 1}, {"x": False}, {"x": 0}):
            assert matches(md, both) == (matches(md, a) and matches(md, b))
    assert and_filters({"x": 1, "y": 2}, {"y": 2, "x": 1}) == {"x": 1, "y": 2}  # the same filter: kept once
    assert compiled_filter({"x": True}, {"x": 1}).predicate({"x": True}) is False  # type: ignore[union-attr]


def test_masks_of_filters_that_print_alike_are_not_shared() -> None:
    """Regression: masks were cached by ``json.dumps(filter, default=repr)``, so a set operand shared its mask with
    the string of its repr, a date with the string of its repr, ``(1, 2)`` with ``[1, 2]`` aside."""
    masks = FilterMasks([{"t": "a"}, {"t": "{'a'}"}, {"d": "2024-01-01"}, {"d": "datetime.date(2024, 1, 1)"}])
    assert masks.mask({"t": {"a"}}).tolist() == [True, False, False, False]
    assert masks.mask({"t": "{'a'}"}).tolist() == [False, True, False, False]
    assert masks.mask({"d": dt.date(2024, 1, 1)}).tolist() == [False, False, True, False]
    assert masks.mask({"d": "datetime.date(2024, 1, 1)"}).tolist() == [False, False, False, True]
    assert filter_key({"a": 1, "b": [1, 2]}) == filter_key({"b": [1, 2], "a": 1})
    assert len({filter_key(f) for f in ({"x": True}, {"x": 1}, {"x": 1.0}, {"x": "1"}, {"x": "True"})}) == 5


def test_a_numeric_string_of_many_digits_is_a_string_operand() -> None:
    """Regression: a string operand of more than 4,300 digits raised Python's own ``ValueError`` ("Exceeds the
    limit (4300 digits) for integer string conversion") from deep inside the compiler."""
    digits = "1" * 5_000
    assert matches({"id": digits}, {"id": digits}) and not matches({"id": 5}, {"id": {"gte": digits}})
    assert matches({"id": "1" * 4_999}, {"id": {"lt": digits}})  # as strings, by code point


def test_unknown_fields_warn_once_each_up_to_a_limit_then_once_for_the_rest() -> None:
    """Regression: a filter of 9,999 fields no chunk has gave 9,999 warnings, each computing the closest known
    fields (1.3 s per mask)."""
    masks = FilterMasks([{"dept": "a"}])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        masks.mask({"dpet": "a", **{f"f{i}": 1 for i in range(50)}})
    messages = [str(w.message) for w in caught if w.category is UnknownFilterFieldWarning]
    assert len(messages) == MAX_FIELD_WARNINGS + 1
    assert "'dpet' is in no indexed chunk's metadata" in messages[0] and "closest known fields: 'dept'" in messages[0]
    assert messages[-1].startswith(f"{51 - MAX_FIELD_WARNINGS} more filter fields are in no indexed chunk's metadata")
