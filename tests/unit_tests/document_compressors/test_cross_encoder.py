"""CrossEncoderReranker: the real sentence-transformers path on a tiny random BERT, and ordering with a stub model."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document

from langchain_ragspine.document_compressors.cross_encoder import CrossEncoderReranker, normalize_logits

pytest.importorskip("sentence_transformers")

from tests.unit_tests.tiny_cross_encoder import build_tiny_cross_encoder  # noqa: E402


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(build_tiny_cross_encoder(tmp_path_factory.mktemp("ce1"), num_labels=1, max_position_embeddings=64))


@pytest.fixture(scope="module")
def tiny_model_2(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(build_tiny_cross_encoder(tmp_path_factory.mktemp("ce2"), num_labels=2, max_position_embeddings=64))


def _doc(i: int, text: str, **md: Any) -> Document:
    return Document(
        page_content=text,
        metadata={"chunk_id": f"d{i}#0", "doc_id": f"d{i}", "start_index": 0, "end_index": len(text), **md},
    )


class StubCrossEncoder:
    """Scores each pair from a table the test controls: ``logits[text]``; records every call."""

    def __init__(self, logits: dict[str, Any]) -> None:
        self.logits = logits
        self.calls: list[list[tuple[str, str]]] = []

    def predict(self, pairs: list[tuple[str, str]], batch_size: int = 32, **kwargs: Any) -> np.ndarray:
        self.calls.append(list(pairs))
        return np.asarray([self.logits[text] for _, text in pairs], dtype=np.float32)


# -- normalisation ------------------------------------------------------------------------------------------------
def test_normalize_logits_sigmoid_for_one_logit_softmax_for_two():
    margin, score = normalize_logits([0.0, 2.0, -3.0])
    assert score.tolist() == pytest.approx([0.5, 1 / (1 + math.exp(-2)), 1 / (1 + math.exp(3))])
    margin2, score2 = normalize_logits([[1.0, 3.0], [2.0, -1.0]])
    softmax_pos = [math.exp(3) / (math.exp(1) + math.exp(3)), math.exp(-1) / (math.exp(2) + math.exp(-1))]
    assert score2.tolist() == pytest.approx(softmax_pos)
    assert margin2.tolist() == [2.0, -3.0]
    _, col = normalize_logits([[0.0], [1.0]])
    assert col.shape == (2,)


def test_normalize_logits_stays_in_unit_interval_for_huge_logits_and_nan():
    margin, score = normalize_logits([1e6, -1e6, 40.0, 50.0, float("nan")])
    assert np.all((score >= 0) & (score <= 1)) and not np.isnan(score).any()
    assert margin[3] > margin[2]  # the order survives where the sigmoid saturates
    assert margin[4] == -np.inf


def test_normalize_logits_rejects_three_labels():
    with pytest.raises(ValueError, match="1 or 2 logits"):
        normalize_logits([[0.1, 0.2, 0.3]])


# -- ordering with a stub ------------------------------------------------------------------------------------------
def test_orders_by_score_keeps_k_and_all_metadata():
    docs = [
        _doc(1, "low", title="T1", source_locator="d1.md#0-3", scores={"bm25": 9.0, "vector": None, "fused": 9.0}),
        _doc(2, "high", title="T2", extra=[1, 2]),
        _doc(3, "mid", title="T3"),
    ]
    stub = StubCrossEncoder({"low": -2.0, "high": 3.0, "mid": 0.5})
    out = CrossEncoderReranker(model=stub, k=2).compress_documents(docs, "q")
    assert [d.page_content for d in out] == ["high", "mid"]
    assert out[0].metadata["scores"]["rerank"] == pytest.approx(1 / (1 + math.exp(-3.0)))
    for d in out:
        src = next(x for x in docs if x.page_content == d.page_content)
        assert {k: v for k, v in d.metadata.items() if k != "scores"} == {
            k: v for k, v in src.metadata.items() if k != "scores"
        }
    # the other score channels survive the rerank
    all_out = CrossEncoderReranker(model=stub, k=None).compress_documents(docs, "q")
    low = next(d for d in all_out if d.page_content == "low")
    assert low.metadata["scores"] == {"bm25": 9.0, "vector": None, "fused": 9.0, "rerank": pytest.approx(0.1192, abs=1e-4)}
    assert docs[0].metadata["scores"] == {"bm25": 9.0, "vector": None, "fused": 9.0}  # input not modified
    assert stub.calls[0] == [("q", "low"), ("q", "high"), ("q", "mid")]


def test_ties_break_on_chunk_id_whatever_the_input_order():
    docs = [_doc(3, "c"), _doc(1, "a"), _doc(2, "b")]
    stub = StubCrossEncoder({"a": 1.0, "b": 1.0, "c": 1.0})
    reranker = CrossEncoderReranker(model=stub, k=None)
    assert [d.metadata["chunk_id"] for d in reranker.compress_documents(docs, "q")] == ["d1#0", "d2#0", "d3#0"]
    assert [d.metadata["chunk_id"] for d in reranker.compress_documents(docs[::-1], "q")] == ["d1#0", "d2#0", "d3#0"]


def test_saturated_scores_still_order_by_logit():
    docs = [_doc(1, "a"), _doc(2, "b")]
    out = CrossEncoderReranker(model=StubCrossEncoder({"a": 40.0, "b": 50.0})).compress_documents(docs, "q")
    assert [d.page_content for d in out] == ["b", "a"]


def test_empty_input_and_restricted_only_input_do_not_call_the_model():
    stub = StubCrossEncoder({})
    reranker = CrossEncoderReranker(model=stub)
    assert reranker.compress_documents([], "q") == []
    assert reranker.compress_documents([_doc(1, "secret", sensitivity="restricted")], "q") == []
    assert stub.calls == []


def test_restricted_documents_are_never_scored_or_returned():
    stub = StubCrossEncoder({"open": 0.0})
    out = CrossEncoderReranker(model=stub).compress_documents(
        [_doc(1, "secret", sensitivity="ＲＥＳＴＲＩＣＴＥＤ"), _doc(2, "open")], "q"
    )
    assert [d.page_content for d in out] == ["open"]
    assert stub.calls == [[("q", "open")]]


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"k": 0}, ValueError),
        ({"k": "3"}, TypeError),
        ({"max_length": 0}, ValueError),
        ({"batch_size": True}, TypeError),
    ],
)
def test_bad_arguments_name_the_field(kwargs, error):
    with pytest.raises(error, match=next(iter(kwargs))):
        CrossEncoderReranker(model=StubCrossEncoder({}), **kwargs)


def test_model_without_predict_is_a_type_error():
    with pytest.raises(TypeError, match="predict"):
        CrossEncoderReranker(model=object())


# -- the real sentence-transformers path on a tiny random BERT ---------------------------------------------------
def test_tiny_bert_by_path_scores_in_unit_interval_and_keeps_metadata(tiny_model):
    docs = [
        _doc(1, "梅雨は北海道にない。", title="梅雨", sensitivity="INTERNAL"),
        _doc(2, "the tower is in paris.", title="Tower"),
        _doc(3, "東京の天気", title="天気"),
    ]
    reranker = CrossEncoderReranker(model=tiny_model, k=3, batch_size=2)
    out = reranker.compress_documents(docs, "梅雨 北海道")
    assert sorted(d.metadata["chunk_id"] for d in out) == ["d1#0", "d2#0", "d3#0"]
    scores = [d.metadata["scores"]["rerank"] for d in out]
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert scores == sorted(scores, reverse=True)
    assert len(set(scores)) == 3  # the random model does distinguish the inputs
    for d in out:
        src = next(x for x in docs if x.metadata["chunk_id"] == d.metadata["chunk_id"])
        assert d.page_content == src.page_content
        assert set(d.metadata) == set(src.metadata) | {"scores"}
    # the same model scores the same pairs the same way (eval mode, no dropout)
    again = reranker.compress_documents(docs, "梅雨 北海道")
    assert [d.metadata["scores"]["rerank"] for d in again] == scores


def test_tiny_bert_a_10000_character_document_is_truncated_not_fatal(tiny_model):
    long_doc = _doc(1, ("梅雨は北海道にない。" * 1000)[:10_000])
    assert len(long_doc.page_content) == 10_000
    # max_length 512 is above the tiny model's 64 position embeddings: it is capped, not a tensor-size crash
    reranker = CrossEncoderReranker(model=tiny_model, max_length=512)
    assert reranker.encoder.max_seq_length == 64
    out = reranker.compress_documents([long_doc, _doc(2, "short")], "梅雨" * 2000)
    assert len(out) == 2 and all(0.0 <= d.metadata["scores"]["rerank"] <= 1.0 for d in out)


def test_tiny_bert_object_with_too_long_limit_is_capped(tiny_model):
    from sentence_transformers import CrossEncoder

    model = CrossEncoder(tiny_model, max_length=512)  # would crash on a long input by itself
    with pytest.raises(RuntimeError):
        model.predict([("q", "梅雨" * 5000)])
    reranker = CrossEncoderReranker(model=model, max_length=1024)
    assert model.max_seq_length == 64
    assert len(reranker.compress_documents([_doc(1, "梅雨" * 5000)], "q")) == 1


def test_tiny_bert_given_object_never_has_its_limit_raised(tiny_model):
    from sentence_transformers import CrossEncoder

    model = CrossEncoder(tiny_model, max_length=16)
    CrossEncoderReranker(model=model, max_length=512)
    assert model.max_seq_length == 16


def test_tiny_bert_two_logit_model_uses_the_positive_class(tiny_model_2):
    import torch
    from sentence_transformers import CrossEncoder

    docs = [_doc(1, "梅雨は北海道にない。"), _doc(2, "the tower is in paris.")]
    out = CrossEncoderReranker(model=tiny_model_2, k=None).compress_documents(docs, "梅雨")
    raw = CrossEncoder(tiny_model_2).predict(
        [("梅雨", d.page_content) for d in docs], activation_fn=torch.nn.Identity()
    )
    expected = torch.softmax(torch.tensor(raw), dim=1)[:, 1].tolist()
    got = {d.metadata["chunk_id"]: d.metadata["scores"]["rerank"] for d in out}
    assert got == {"d1#0": pytest.approx(expected[0], abs=1e-6), "d2#0": pytest.approx(expected[1], abs=1e-6)}


def test_tiny_bert_scores_ignore_the_models_own_activation(tiny_model):
    """The model's default activation (Sigmoid here) is not applied twice: score = sigmoid(raw logit)."""
    import torch
    from sentence_transformers import CrossEncoder

    doc = _doc(1, "東京の天気")
    raw = float(CrossEncoder(tiny_model).predict([("天気", doc.page_content)], activation_fn=torch.nn.Identity())[0])
    out = CrossEncoderReranker(model=tiny_model).compress_documents([doc], "天気")
    assert out[0].metadata["scores"]["rerank"] == pytest.approx(1 / (1 + math.exp(-raw)), abs=1e-6)


async def test_async_matches_sync(tiny_model):
    docs = [_doc(1, "梅雨は北海道にない。"), _doc(2, "the tower is in paris."), _doc(3, "東京の天気")]
    reranker = CrossEncoderReranker(model=tiny_model, k=2)
    sync = reranker.compress_documents(docs, "天気")
    assert await reranker.acompress_documents(docs, "天気") == sync
