"""A sensitivity label of any type fails closed (trial 16b: these labels failed OPEN — every retriever returned the
chunk — because ``is_restricted_label`` read only strings and flat lists of strings)."""

from __future__ import annotations

import copy
import enum
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from langchain_ragspine import BM25Retriever
from langchain_ragspine.document_compressors import RestrictedGate
from langchain_ragspine.sensitivity import is_restricted, is_restricted_label


class Level(enum.Enum):
    PUBLIC = "public"
    RESTRICTED = "restricted"


class Code(enum.IntEnum):
    ONE = 1


class Opaque:
    def __str__(self) -> str:
        return "PUBLIC"


class BrokenMapping(dict[str, str]):
    def items(self) -> Any:
        raise RuntimeError("cannot read")


_LOOP: list[Any] = ["PUBLIC"]
_LOOP.append(_LOOP)
_DEEP: list[Any] = ["PUBLIC"]
for _ in range(40):
    _DEEP = [_DEEP]

RESTRICTED_LABELS: list[Any] = [
    # the trial's fail-open labels
    {"level": "restricted"},
    b"RESTRICTED",
    ["x", ["restricted"]],
    Level.RESTRICTED,
    # more of the same kinds
    bytearray(b"Restricted."),
    memoryview(b"internal/restricted"),
    "ＲＥＳＴＲＩＣＴＥＤ".encode(),
    ("PUBLIC", ("INTERNAL", {"RESTRICTED"})),
    {"restricted": True},  # a key names it
    {"a": {"b": [b"restricted"]}},
    [Level.RESTRICTED],
    # not readable as a label: fails closed
    5,
    0,
    1.5,
    float("nan"),
    True,
    False,
    Code.ONE,
    Level,  # the class, not a member
    Opaque(),
    object(),
    ["PUBLIC", 5],
    {"level": 2},
    _LOOP,  # contains itself
    BrokenMapping(level="PUBLIC"),
    _DEEP,  # nested deeper than _MAX_DEPTH
]

OPEN_LABELS: list[Any] = [
    None,
    "",
    "PUBLIC",
    "UNRESTRICTED",
    [],
    (),
    {},
    ["PUBLIC", None],
    ["INTERNAL", ["PUBLIC"]],
    {"level": "public"},
    b"PUBLIC",
    b"\xff\xfeinternal",  # undecodable bytes are replaced, the rest is read
    Level.PUBLIC,
]


@pytest.mark.parametrize("label", RESTRICTED_LABELS, ids=repr)
def test_unusual_labels_fail_closed_at_every_exit(label: Any) -> None:
    assert is_restricted_label(label)
    doc = Document("the secret plan", metadata={"sensitivity": label})
    assert is_restricted(doc)
    try:
        copy.deepcopy(label)
    except Exception:  # a memoryview, a mapping that cannot be read: the retrievers cannot copy such metadata
        return
    assert RestrictedGate().compress_documents([doc], query="plan") == []
    retriever = BM25Retriever.from_documents([doc, Document("a public plan", metadata={"sensitivity": "PUBLIC"})])
    assert [d.page_content for d in retriever.invoke("secret plan")] == ["a public plan"]


@pytest.mark.parametrize("label", OPEN_LABELS, ids=repr)
def test_readable_labels_without_restricted_stay_open(label: Any) -> None:
    assert not is_restricted_label(label)
    assert not is_restricted({"sensitivity": label})


_PLAIN = st.sampled_from(["PUBLIC", "INTERNAL", "CONFIDENTIAL", "RESTRICTED", "restricted", "team-a", "UNRESTRICTED"])


@settings(max_examples=100, deadline=None)
@given(st.one_of(_PLAIN, st.lists(_PLAIN, max_size=4), st.tuples(_PLAIN, _PLAIN), st.frozensets(_PLAIN, max_size=3)))
def test_strings_and_flat_lists_of_strings_read_as_before(label: Any) -> None:
    items = [label] if isinstance(label, str) else list(label)
    before = any(v.upper() in ("RESTRICTED",) or v == "restricted" for v in items)
    assert is_restricted_label(label) == before


@settings(max_examples=100, deadline=None)
@given(
    st.recursive(
        _PLAIN.map(lambda s: s.encode()) | _PLAIN,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_PLAIN, inner, max_size=2),
        max_leaves=8,
    )
)
def test_a_nested_label_is_restricted_exactly_when_a_string_in_it_is(label: Any) -> None:
    def strings(v: Any) -> list[str]:
        if isinstance(v, bytes):
            return [v.decode()]
        if isinstance(v, str):
            return [v]
        if isinstance(v, dict):
            return [s for k, x in v.items() for s in strings(k) + strings(x)]
        return [s for x in v for s in strings(x)]

    assert is_restricted_label(label) == any(is_restricted_label(s) for s in strings(label))


@pytest.mark.parametrize("metadata", [
    {"metadata": {"sensitivity": "RESTRICTED"}},  # LangChain's Document JSON shape, left by another loader
    {"meta": {"Sensitivity": "restricted"}},
    {"kwargs": {"metadata": {"sensitivity": ["INTERNAL", "RESTRICTED"]}}},  # dumpd(Document(...))
    {"sections": [{"title": "a"}, {"sensitivity": "RЕSTRICTED"}]},  # in a list, a Cyrillic Е
    {"a": {"b": {"c": {"d": {"sеnsitivity": "RESTRICTED"}}}}},  # a look-alike key, four levels down
])
def test_regression_a_label_key_nested_in_runtime_metadata_is_restricted(metadata: dict[str, Any]) -> None:
    # trial 25c: RestrictedGate kept these foreign documents, so every wrapper and graph over such a retriever
    # returned them, traced them and put them into the prompt
    assert is_restricted(metadata)
    docs = [Document("secret", metadata=metadata), Document("public", metadata={"meta": {"sensitivity": "public"}})]
    assert [d.page_content for d in RestrictedGate().compress_documents(docs, "q")] == ["public"]


def test_nested_metadata_without_a_restricted_label_is_not_restricted() -> None:
    assert not is_restricted({"metadata": {"sensitivity": "INTERNAL"}, "scores": {"bm25": 1.0, "vector": None}})
    assert not is_restricted({"meta": {"note": "RESTRICTED"}})  # a value under another key is not a label


def test_nested_metadata_deeper_than_the_limit_fails_closed() -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(40):
        node["x"] = {}
        node = node["x"]
    assert is_restricted(deep)
    cyclic: dict[str, Any] = {}
    cyclic["self"] = cyclic
    assert is_restricted(cyclic)
