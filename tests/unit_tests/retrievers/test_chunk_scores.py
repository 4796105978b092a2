"""metadata["scores"] is a ChunkScores: per-query scores take no part in comparing two results of one chunk, and
they serialize as a plain dict (JSON, model_dump, dumpd/load, LangGraph checkpoints) with no warning."""

from __future__ import annotations

import copy
import json
import pickle
import warnings

import pytest
from langchain_core.documents import Document

from langchain_ragspine.documents import ChunkScores, with_scores

A = Document(page_content="梅雨は6月", metadata={"chunk_id": "a#0", "doc_id": "a"})


def test_two_results_of_one_chunk_are_equal_whatever_their_scores():
    x, y = with_scores(A, bm25=7.5, fused=7.5), with_scores(A, bm25=1.0, fused=1.0)
    assert isinstance(x.metadata["scores"], ChunkScores)
    assert x == y and not (x != y) and x in [y]
    assert dict(x.metadata["scores"]) != dict(y.metadata["scores"])  # the values are still there, and differ


@pytest.mark.parametrize(
    "other",
    [
        Document(page_content="梅雨は7月", metadata={"chunk_id": "a#0", "doc_id": "a"}),  # other text
        Document(page_content="梅雨は6月", metadata={"chunk_id": "a#1", "doc_id": "a"}),  # other chunk
        Document(page_content="梅雨は6月", metadata={"chunk_id": "a#0", "doc_id": "a", "sensitivity": "PUBLIC"}),
    ],
)
def test_results_that_differ_in_anything_but_scores_stay_unequal(other):
    assert with_scores(A, bm25=1.0) != with_scores(other, bm25=1.0)


def test_against_a_plain_dict_scores_compare_by_value():
    s = with_scores(A, bm25=2.5).metadata["scores"]
    assert s == {"bm25": 2.5, "vector": None, "fused": None, "rerank": None}
    assert s != {"bm25": 9.0, "vector": None, "fused": None, "rerank": None}
    assert {"bm25": 9.0, "vector": None, "fused": None, "rerank": None} != s
    assert s != [("bm25", 2.5)]
    # a document with plain-dict scores (e.g. restored from a checkpoint) compares by value
    plain = Document(page_content=A.page_content, metadata={**A.metadata, "scores": {"bm25": 9.0}}, id="a#0")
    assert with_scores(A, bm25=2.5) != plain


def test_scores_serialize_as_a_plain_dict_everywhere():
    from langchain_core.load import dumpd, load
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    d = with_scores(A, bm25=2.5, fused=2.5)
    assert json.loads(d.model_dump_json())["metadata"]["scores"]["bm25"] == 2.5
    assert type(d.model_dump()["metadata"]["scores"]) is dict
    assert json.dumps(d.metadata["scores"]) == '{"bm25": 2.5, "vector": null, "fused": 2.5, "rerank": null}'
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # load() is beta
        assert type(load(dumpd(d), allowed_objects="core").metadata["scores"]) is dict
    for serde in (JsonPlusSerializer(), JsonPlusSerializer(allowed_msgpack_modules=None)):  # permissive, strict
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no "unregistered type" warning
            back = serde.loads_typed(serde.dumps_typed({"documents": [d]}))["documents"][0]
        assert type(back) is Document and type(back.metadata["scores"]) is dict
        assert back.metadata["scores"] == dict(d.metadata["scores"]) and back.id == "a#0"
    for twin in (copy.deepcopy(d), pickle.loads(pickle.dumps(d))):
        assert dict(twin.metadata["scores"]) == dict(d.metadata["scores"])
