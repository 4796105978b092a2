"""ColBERTReranker: MaxSim late interaction over a tiny random BERT checkpoint built here (plain, pylate and Stanford
layouts), checked against MaxSim computed independently by a plain numpy loop; k, truncation, RESTRICTED, empty
input, bad paths and the ``colbert:<path>`` spec."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from langchain_core.documents import Document

pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

from langchain_ragspine.document_compressors.colbert import (  # noqa: E402
    ColBERTCheckpoint,
    ColBERTReranker,
    TokenEncoder,
    maxsim,
)
from langchain_ragspine.document_compressors.factory import make_reranker  # noqa: E402
from langchain_ragspine.specs import normalise_reranker_spec, parse_reranker_spec  # noqa: E402
from tests.unit_tests.tiny_colbert import build_tiny_colbert  # noqa: E402

QUERY = "梅雨 tokyo"
TEXTS = ["梅雨は東京の天気", "tokyo rain", "abc def 山川", "北海道 検索 文書", "梅雨 tokyo 梅雨", "xyz."]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("colbert")
    return {style: build_tiny_colbert(root / style, style=style, seed=i)  # type: ignore[arg-type]
            for i, style in enumerate(("plain", "pylate", "stanford"))}


def _docs(texts: Sequence[str] = TEXTS) -> list[Document]:
    return [Document(page_content=t, metadata={"chunk_id": f"d#{i}", "x": i}) for i, t in enumerate(texts)]


# -- the independent reference: transformers directly, then a plain loop ---------------------------------------------
def _reference_vectors(path: Path, text: str, *, query: bool, max_length: int = 512) -> np.ndarray:
    """Token vectors as a ColBERT checkpoint of the tiny builder's layout defines them, computed step by step."""
    from safetensors.numpy import load_file
    from transformers import BertModel, BertTokenizer

    tokenizer = BertTokenizer.from_pretrained(str(path))
    model = BertModel.from_pretrained(str(path)).eval()
    st = json.loads((path / "config_sentence_transformers.json").read_text()) if (
        path / "config_sentence_transformers.json").exists() else {}
    meta = json.loads((path / "artifact.metadata").read_text()) if (path / "artifact.metadata").exists() else {}
    marker = (st.get("query_prefix") if query else st.get("document_prefix")) or (
        meta.get("query_token_id") if query else meta.get("doc_token_id"))
    length = min(max_length, 128)
    if query and st.get("query_length"):
        length = min(length, st["query_length"])
    ids = tokenizer.encode(text, truncation=True, max_length=length - (1 if marker else 0))
    if marker:
        ids = [ids[0], tokenizer.convert_tokens_to_ids(marker.strip()), *ids[1:]]
    attention = [1] * len(ids)
    if query and st.get("query_length"):
        while len(ids) < length:
            ids.append(tokenizer.mask_token_id)
            attention.append(0)
    with torch.no_grad():
        hidden = model(input_ids=torch.tensor([ids]), attention_mask=torch.tensor([attention])).last_hidden_state[0]
    vectors = hidden.numpy().astype(np.float64)
    if (path / "1_Dense").exists():
        vectors = vectors @ load_file(str(path / "1_Dense" / "model.safetensors"))["linear.weight"].T
    elif meta:
        vectors = vectors @ load_file(str(path / "model.safetensors"))["linear.weight"].T
    if not query and st.get("skiplist_words"):
        skip = {tokenizer.convert_tokens_to_ids(w) for w in st["skiplist_words"]}
        vectors = vectors[[i not in skip for i in ids]]
    return vectors


def _loop_maxsim(q: np.ndarray, d: np.ndarray) -> float:
    total = 0.0
    for qv in q:
        best = -np.inf
        for dv in d:
            best = max(best, float(np.dot(qv, dv) / (np.linalg.norm(qv) * np.linalg.norm(dv))))
        total += best
    return total


def _reference_scores(path: Path, query: str, texts: Sequence[str], max_length: int = 512) -> tuple[list[float], int]:
    q = _reference_vectors(path, query, query=True, max_length=max_length)
    return [_loop_maxsim(q, _reference_vectors(path, t, query=False, max_length=max_length)) for t in texts], len(q)


# -- ranking ----------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("style", ["plain", "pylate", "stanford"])
def test_ranking_and_scores_follow_maxsim_computed_independently(checkpoints, style):
    path = checkpoints[style]
    reranker = ColBERTReranker(model=path, k=None)
    out = reranker.compress_documents(_docs(), QUERY)
    expected, m = _reference_scores(path, QUERY, TEXTS)
    order = sorted(range(len(TEXTS)), key=lambda i: -expected[i])
    assert [d.metadata["x"] for d in out] == order
    assert len(set(np.round(expected, 6))) == len(TEXTS)  # no ties: the order is MaxSim's, not the tie-break's
    for d in out:
        assert d.metadata["scores"]["rerank"] == pytest.approx((expected[d.metadata["x"]] / m + 1) / 2, abs=1e-5)
        assert 0.0 <= d.metadata["scores"]["rerank"] <= 1.0


def test_the_checkpoint_layouts_are_read(checkpoints):
    plain, pylate, stanford = (ColBERTCheckpoint(checkpoints[s]) for s in ("plain", "pylate", "stanford"))
    assert (plain.dim, plain.query_marker_id, plain.query_length) == (16, None, None)
    vocab = pylate.tokenizer.get_vocab()
    assert (pylate.dim, pylate.query_marker_id, pylate.document_marker_id, pylate.query_length) == (
        8, vocab["[Q]"], vocab["[D]"], 12)
    assert all(v.shape == (12, 8) for v in pylate.query_vectors(["a", "梅雨 tokyo"]))  # expanded with [MASK]
    assert (stanford.dim, stanford.query_marker_id, stanford.document_marker_id) == (
        8, vocab["[unused0]"], vocab["[unused1]"])
    for encoder in (plain, pylate, stanford):
        (v,) = encoder.document_vectors(["abc, def."])
        np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    # pylate's skip list drops "," and "." from documents: 2 fewer rows than Stanford's (same text, same marker count)
    assert pylate.document_vectors(["abc, def."])[0].shape[0] == stanford.document_vectors(["abc, def."])[0].shape[0] - 2


def test_batches_give_the_vectors_of_one_text_alone(checkpoints):
    encoder = ColBERTCheckpoint(checkpoints["pylate"], batch_size=2)
    together = encoder.document_vectors(TEXTS)
    for text, vectors in zip(TEXTS, together, strict=True):
        np.testing.assert_allclose(vectors, encoder.document_vectors([text])[0], atol=1e-5)


# -- k, metadata, truncation -------------------------------------------------------------------------------------------
def test_k_keeps_the_best_and_metadata_and_page_content_survive(checkpoints):
    docs = _docs()
    full = ColBERTReranker(model=checkpoints["plain"], k=None).compress_documents(docs, QUERY)
    top = ColBERTReranker(model=checkpoints["plain"], k=2).compress_documents(docs, QUERY)
    assert [d.metadata["x"] for d in top] == [d.metadata["x"] for d in full[:2]]
    assert len(ColBERTReranker(model=checkpoints["plain"]).compress_documents(docs, QUERY)) == 6  # DEFAULT_K
    for d in full:
        assert d.page_content == TEXTS[d.metadata["x"]] and d.metadata["chunk_id"] == f"d#{d.metadata['x']}"
    assert all("scores" not in d.metadata for d in docs)  # inputs not mutated


def test_long_texts_are_truncated_to_max_length_and_the_position_limit(checkpoints):
    path = checkpoints["plain"]
    long = "梅雨" * 400  # 800 tokens: past the 128 positions of the tiny model
    reranker = ColBERTReranker(model=path, k=None)
    (v,) = reranker.encoder.document_vectors([long])
    assert v.shape[0] == 128
    short = ColBERTReranker(model=path, k=None, max_length=16)
    (v16,) = short.encoder.document_vectors([long])
    assert v16.shape[0] == 16
    # what is past the limit does not count: two texts equal up to it score the same, as the reference on 16 tokens
    texts = ["梅雨" * 20 + "tokyo", "梅雨" * 20 + "abc"]
    out = short.compress_documents(_docs(texts), QUERY)
    assert out[0].metadata["scores"]["rerank"] == pytest.approx(out[1].metadata["scores"]["rerank"], abs=1e-9)
    expected, m = _reference_scores(path, QUERY, texts[:1], max_length=16)
    assert out[0].metadata["scores"]["rerank"] == pytest.approx((expected[0] / m + 1) / 2, abs=1e-5)


# -- RESTRICTED and empty input ------------------------------------------------------------------------------------------
class SpyEncoder:
    """A TokenEncoder recording every text it is given; one-hot vectors: token c of a text is e_{ord(c) % 4}."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def _vectors(self, texts: Sequence[str]) -> list[np.ndarray]:
        self.seen += list(texts)
        return [np.eye(4, dtype=np.float32)[[ord(c) % 4 for c in t] or [0]] for t in texts]

    query_vectors = _vectors
    document_vectors = _vectors


def test_restricted_documents_are_dropped_before_the_model_sees_them():
    spy = SpyEncoder()
    assert isinstance(spy, TokenEncoder)
    docs = _docs(["abcd", "aaaa", "SECRET text"])
    docs[2].metadata["sensitivity"] = "restricted"
    out = ColBERTReranker(model=spy, k=None).compress_documents(docs, "ab")
    assert [d.metadata["x"] for d in out] == [0, 1]
    assert all("SECRET" not in t for t in spy.seen)
    # MaxSim with one-hot tokens: "ab" vs "abcd" matches both tokens (2), vs "aaaa" one of them (1 + 0)
    assert [d.metadata["scores"]["rerank"] for d in out] == [1.0, pytest.approx(0.75)]


def test_empty_input_returns_nothing_without_calling_the_model():
    spy = SpyEncoder()
    reranker = ColBERTReranker(model=spy)
    assert reranker.compress_documents([], "q") == []
    restricted = _docs(["x"])
    restricted[0].metadata["sensitivity"] = "RESTRICTED"
    assert reranker.compress_documents(restricted, "q") == []
    assert spy.seen == []


def test_maxsim_by_hand():
    q = np.array([[1.0, 0.0], [0.0, 1.0]])
    d = np.array([[1.0, 0.0], [np.sqrt(0.5), np.sqrt(0.5)]])
    assert maxsim(q, d) == pytest.approx(1.0 + np.sqrt(0.5))
    assert maxsim(q, np.zeros((0, 2))) == -2.0


# -- errors -------------------------------------------------------------------------------------------------------------
def test_a_bad_path_is_an_error_naming_it(tmp_path):
    missing = tmp_path / "no-such-colbert"
    with pytest.raises(OSError, match="no-such-colbert"):
        ColBERTReranker(model=missing)
    empty = tmp_path / "empty-folder"
    empty.mkdir()
    with pytest.raises(OSError, match="empty-folder"):
        ColBERTReranker(model=str(empty))
    with pytest.raises(TypeError, match="query_vectors"):
        ColBERTReranker(model=42)
    with pytest.raises(TypeError, match="top_k"):
        ColBERTReranker(model=SpyEncoder(), top_k=3)


def test_an_unsupported_projection_is_refused(checkpoints, tmp_path):
    import shutil

    path = shutil.copytree(checkpoints["pylate"], tmp_path / "tanh")
    config = json.loads((path / "1_Dense" / "config.json").read_text())
    config["activation_function"] = "torch.nn.modules.activation.Tanh"
    (path / "1_Dense" / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="Tanh"):
        ColBERTReranker(model=path)


# -- the spec -------------------------------------------------------------------------------------------------------------
def test_the_colbert_spec(checkpoints):
    path = checkpoints["pylate"]
    assert parse_reranker_spec(f" ColBERT : {path} ") == ("colbert", str(path))
    assert normalise_reranker_spec(f"COLBERT:{path}") == f"colbert:{path}"
    reranker = make_reranker(f"colbert:{path}", k=2)
    assert isinstance(reranker, ColBERTReranker) and reranker.k == 2
    assert len(reranker.compress_documents(_docs(), QUERY)) == 2
    with pytest.raises(ValueError, match="colbert:<local checkpoint path>"):
        make_reranker("colbert:")
    with pytest.raises(ValueError, match="colbert:<local checkpoint path>"):
        make_reranker("colbert")
    with pytest.raises(ValueError, match="unknown reranker 'colbrt:x' \\(did you mean 'colbert'\\?\\)"):
        make_reranker("colbrt:x")
    with pytest.raises(OSError, match="nowhere-colbert"):
        make_reranker("colbert:/nowhere-colbert")
