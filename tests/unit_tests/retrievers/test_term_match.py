"""The one English plural rule of the routers' term matcher and the glossary rewriter (regressions of issue 14's
second trial: ``policy`` missed ``policies`` and matched ``policys``)."""

from __future__ import annotations

import re

import pytest
from langchain_core.documents import Document

from langchain_ragspine.retrievers import BM25Retriever, MultiIndexRetriever
from langchain_ragspine.retrievers._term_match import plural_endings, term_pattern


@pytest.mark.parametrize(
    "word, stem, endings",
    [("policy", "polic", ("ies", "y")), ("city", "cit", ("ies", "y")), ("key", "key", ("es", "s", "")),
     ("day", "day", ("es", "s", "")), ("leave", "leave", ("es", "s", "")), ("y", "y", ("es", "s", ""))],
)
def test_plural_endings(word, stem, endings):
    assert plural_endings(word) == (stem, endings)


@pytest.mark.parametrize(
    "term, text, found",
    [("policy", "hr policies", True), ("policy", "policy", True), ("policy", "policys", False),
     ("policy", "policyes", False), ("company", "companies", True), ("city", "cities", True),
     ("leave", "leaves", True), ("key", "keys", True), ("hr policy", "hr  policies", True),
     ("policy", "policiesx", False)],
)
def test_term_pattern_plurals(term, text, found):
    assert bool(re.search(term_pattern(term, plurals=True), text)) is found
    if text != term:
        assert not re.search(term_pattern(term), text)  # without plurals, only the term itself


def test_keyword_router_routes_a_y_plural():
    """Router keyword ``policy`` routed "HR policies" nowhere (every index searched)."""
    indexes = {name: BM25Retriever.from_documents([Document(page_content=f"{name} text",
                                                            metadata={"chunk_id": f"{name}#0"})])
               for name in ("handbook", "eng")}
    retriever = MultiIndexRetriever(indexes, {"handbook": ["policy"]})
    assert retriever.route("HR policies").selected == ("handbook",)
    assert retriever.route("HR policys").fallback == "no_known_index"
