"""Retrieval modes through ingest/open_retriever/CLI: hybrid by default when an embedding model is configured,
pure BM25 (no embedding model, no vector index) otherwise, and the embedding cache across re-ingests."""

import json
from pathlib import Path

import pytest

import langchain_ragspine.embeddings.factory as embeddings_factory
from langchain_ragspine.backends.directory.layout import VECTOR_DIR
from langchain_ragspine.cli import main
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.errors import StaleIndexWarning, StoreError
from langchain_ragspine.filters import UnknownFilterFieldWarning
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.sources import open_retriever, search
from langchain_ragspine.retrievers import BM25Retriever, DenseRetriever, HybridRetriever


class CountingEmbeddings(HashingEmbeddings):
    """Hashing embeddings that count the texts sent to embed_documents (one instance per test)."""

    def __init__(self) -> None:
        super().__init__(64)
        self.embedded = 0

    def embed_documents(self, texts):
        self.embedded += len(texts)
        return super().embed_documents(texts)


def _write(path: Path, text: str, **meta) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")
    if meta:
        path.with_suffix(".json").write_text(json.dumps(meta, ensure_ascii=False), "utf-8")


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    _write(root / "tsuyu.md", "# 梅雨\n\n梅雨は北海道と小笠原諸島を除く日本で見られる雨季である。", lang="ja")
    _write(root / "kyoto.md", "# 京都\n\n京都の観光名所は清水寺と金閣寺である。", lang="ja")
    _write(root / "en.md", "# Rainy season\n\nThe rainy season in Japan is called tsuyu.\n\n" + "More text. " * 60, lang="en")
    return root


def test_reingest_of_unchanged_corpus_embeds_nothing_and_changes_reembed_only_their_chunks(corpus, tmp_path):
    store = tmp_path / "S"
    emb = CountingEmbeddings()
    s1 = ingest(corpus, store, embedding=emb)
    n_chunks = s1.chunks
    assert emb.embedded == n_chunks == s1.embedded and s1.dense is not None
    s2 = ingest(corpus, store, embedding=emb)
    assert (s2.unchanged, s2.embedded) == (3, 0) and emb.embedded == n_chunks  # not one embed_documents text
    (corpus / "kyoto.md").write_text("# 京都\n\n京都の名所は伏見稲荷大社である。", "utf-8")
    s3 = ingest(corpus, store, embedding=emb)
    assert s3.changed == 1 and s3.embedded == 1 and emb.embedded == n_chunks + 1


def test_auto_mode_is_hybrid_when_an_embedding_model_is_configured(corpus, tmp_path, monkeypatch):
    monkeypatch.setenv("RAGSPINE_EMBEDDING", "hashing")
    store = tmp_path / "S"
    assert ingest(corpus, store).dense is not None
    r = open_retriever(store)
    assert isinstance(r.current, HybridRetriever)
    top = search(r, "京都の清水寺", k=2)[0]
    assert top.metadata["doc_id"] == "kyoto"
    s = top.metadata["scores"]
    assert s["bm25"] > 0 and s["vector"] is not None and s["fused"] is not None
    assert isinstance(open_retriever(store, mode="vector").current, DenseRetriever)
    assert isinstance(open_retriever(store, mode="bm25").current, BM25Retriever)


@pytest.mark.parametrize("mode", ["economy", "bm25", "lexical"])
def test_lexical_presets_build_no_embedding_model_and_no_vector_index(corpus, tmp_path, monkeypatch, mode):
    monkeypatch.setenv("RAGSPINE_EMBEDDING", "hashing")

    def no_model(*a, **k):
        raise AssertionError("an embedding model was built in a lexical mode")

    monkeypatch.setattr(embeddings_factory, "make_embeddings", no_model)
    import langchain_ragspine.pipeline.sources as sources

    monkeypatch.setattr(sources, "make_embeddings", no_model)
    store = tmp_path / "S"
    s = ingest(corpus, store, mode=mode)
    assert s.dense is None and not (store / VECTOR_DIR).exists() and not (store / "embeddings.sqlite").exists()
    assert isinstance(open_retriever(store, mode=mode).current, BM25Retriever)


def test_hybrid_and_vector_modes_need_an_embedding_model(corpus, tmp_path):
    with pytest.raises(ValueError, match="needs an embedding model"):
        ingest(corpus, tmp_path / "S", mode="hybrid")  # RAGSPINE_EMBEDDING=none in tests
    ingest(corpus, tmp_path / "S2")
    with pytest.raises(StoreError, match="needs a vector index"):
        open_retriever(tmp_path / "S2", mode="vector")
    assert isinstance(open_retriever(tmp_path / "S2", mode="auto").current, BM25Retriever)


def test_off_means_byte_identical_output(corpus, tmp_path, capsys):
    store = str(tmp_path / "S")
    query = ["search", "梅雨 京都 rainy", "--store", store, "--json"]
    assert main(["ingest", str(corpus), "--store", store]) == 0
    capsys.readouterr()
    assert main(query) == 0
    before = capsys.readouterr().out
    assert before
    # switch the dense layer on for the same store: the chunks are unchanged, only a vector index is added
    assert main(["ingest", str(corpus), "--store", store, "--embedding", "hashing"]) == 0
    assert "3 unchanged" in capsys.readouterr().out
    for mode in ("bm25", "economy", "lexical"):
        assert main(query + ["--mode", mode]) == 0
        assert capsys.readouterr().out == before  # the layer off: byte for byte what it was
    assert main(query) == 0  # auto is now hybrid
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert any(r["scores"]["vector"] is not None for r in rows)


def test_filter_runs_before_scoring_in_every_mode(tmp_path):
    root = tmp_path / "c"
    for i in range(100):
        _write(root / f"a{i:03d}.md", "梅雨 前線 梅雨 前線 梅雨", dept="a")
    _write(root / "c000.md", "京都 の 名所 と 梅雨", dept="c")
    store = tmp_path / "S"
    ingest(root, store, embedding="hashing")
    for mode in ("bm25", "vector", "hybrid"):
        r = open_retriever(store, mode=mode, k=4)
        assert {d.metadata["dept"] for d in search(r, "梅雨 前線", k=4)} == {"a"}
        got = search(r, "梅雨 前線", k=4, filter={"dept": "c"})
        assert [d.metadata["doc_id"] for d in got] == ["c000"], mode
        with pytest.warns(UnknownFilterFieldWarning, match=f"'missing_{mode}'") as record:
            assert search(r, "梅雨 前線", k=4, filter={f"missing_{mode}": {"ne": "x"}}) == []
        assert len(record) == 1, mode  # once, also from the hybrid's two channels


def test_stale_vector_index_is_rebuilt_from_the_cache_without_embedding(corpus, tmp_path):
    store = tmp_path / "S"
    emb = CountingEmbeddings()
    ingest(corpus, store, embedding=emb)
    before = emb.embedded
    state = json.loads((store / "index.json").read_text())
    state["vector"]["generation"] = -1
    (store / "index.json").write_text(json.dumps(state))
    with pytest.warns(StaleIndexWarning, match="vector index"):
        r = open_retriever(store, mode="vector", embedding=emb)
    assert search(r, "清水寺", k=1)[0].metadata["doc_id"] == "kyoto"
    assert emb.embedded == before  # every vector came from the embedding cache


def test_lexical_reingest_drops_the_stale_vector_index(corpus, tmp_path):
    store = tmp_path / "S"
    ingest(corpus, store, embedding="hashing")
    assert (store / VECTOR_DIR).is_dir()
    (corpus / "kyoto.md").write_text("# 京都\n\n変更", "utf-8")
    ingest(corpus, store, mode="bm25")
    assert not (store / VECTOR_DIR).exists()
    assert isinstance(open_retriever(store).current, BM25Retriever)  # auto: no vector index any more → BM25


def test_cli_eval_compares_modes(corpus, tmp_path, capsys):
    ds = tmp_path / "ds"
    (ds / "docs").mkdir(parents=True)
    for p in corpus.glob("*.md"):
        (ds / "docs" / p.name).write_text(p.read_text("utf-8"), "utf-8")
    q = {"id": "q1", "question": "京都の名所は", "answers": ["清水寺"], "doc_id": "kyoto", "paragraph": 0}
    (ds / "questions.jsonl").write_text(json.dumps(q, ensure_ascii=False) + "\n", "utf-8")
    out = tmp_path / "r.json"
    assert main(["eval", str(ds), "--mode", "bm25", "vector", "hybrid", "--embedding", "hashing", "--json", str(out)]) == 0
    names = [r["name"] for r in json.loads(out.read_text("utf-8"))["results"]]
    assert names == ["bm25", "vector", "hybrid"]
    assert "| answer_recall@1 |" in capsys.readouterr().out


# -- regressions from the second fresh-user trial -----------------------------------------------------------------
class FailingEmbeddings(HashingEmbeddings):
    def __init__(self) -> None:
        super().__init__(64)

    def embed_documents(self, texts):
        raise ConnectionError("Failed to connect to Ollama")


def _cache_rows(store: Path) -> int:
    import sqlite3

    with sqlite3.connect(store / "embeddings.sqlite") as conn:
        return conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0]


def test_regression_failing_embedding_model_leaves_the_store_untouched(corpus, tmp_path):
    from langchain_ragspine.backends.directory.chunk_store import ChunkStore
    from langchain_ragspine.errors import RagSpineError

    store = tmp_path / "S"
    ingest(corpus, store, embedding="hashing")
    state_before = (store / "index.json").read_text()
    with ChunkStore(store / "chunks.sqlite", read_only=True) as cs:
        gen = cs.generation
    (corpus / "kyoto.md").write_text("# 京都\n\n京都の名所は伏見稲荷大社である。", "utf-8")
    with pytest.raises(RagSpineError, match="embedding model .* failed: ConnectionError.*store was not changed"):
        ingest(corpus, store, embedding=FailingEmbeddings())
    with ChunkStore(store / "chunks.sqlite", read_only=True) as cs:
        assert cs.generation == gen  # no new version was committed
    assert (store / "index.json").read_text() == state_before
    assert search(open_retriever(store), "清水寺", k=1)[0].metadata["doc_id"] == "kyoto"


def test_regression_unreadable_embedding_cache_is_moved_aside(corpus, tmp_path):
    store = tmp_path / "S"
    ingest(corpus, store, embedding="hashing")
    with open(store / "embeddings.sqlite", "r+b") as f:
        f.write(b"\0" * 4096)
    with pytest.warns(StaleIndexWarning, match="unreadable embedding cache"):
        s = ingest(corpus, store, embedding="hashing")
    assert s.embedded == s.chunks  # a fresh cache, re-filled
    assert list(store.glob("embeddings.sqlite.corrupt-*"))
    assert isinstance(open_retriever(store).current, HybridRetriever)


def test_regression_query_encoder_must_match_the_index_and_reads_never_write_the_cache(corpus, tmp_path):
    store = tmp_path / "S"
    ingest(corpus, store, embedding="hashing")
    rows = _cache_rows(store)
    with pytest.raises(StoreError, match="vector index was built with"):
        open_retriever(store, embedding="hashing:32")
    state = json.loads((store / "index.json").read_text())
    state["vector"]["generation"] = -1
    (store / "index.json").write_text(json.dumps(state))
    with pytest.warns(StaleIndexWarning):
        open_retriever(store, mode="vector")
    assert _cache_rows(store) == rows


def test_auto_without_a_dense_channel_keeps_the_filter(tmp_path):
    """Regression (issue 26 trial, FAIL 1): ``auto`` over a store without a vector index (or chunks in memory without
    an embedding model) fell back to BM25 and dropped its options — ``filter=`` included, so the filter widened to
    nothing.  The fallback keeps every option: the filter is ANDed, as in every other mode that takes one."""
    from langchain_core.documents import Document

    from langchain_ragspine.pipeline.ingest import ingest
    from langchain_ragspine.pipeline.modes import DocumentsSource
    from langchain_ragspine.pipeline.plan import build_retriever
    from langchain_ragspine.pipeline.sources import open_retriever

    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "tsuyu.md").write_text("---\nlang: ja\n---\n# 梅雨\n\n梅雨は六月に始まる。rainy\n", "utf-8")
    (corpus / "rainy.md").write_text("---\nlang: en\n---\n# Rain\n\nThe rainy season 梅雨 in Japan.\n", "utf-8")
    ingest(corpus, tmp_path / "S", progress=False, embedding="none")
    store = open_retriever(tmp_path / "S", mode="auto", filter={"lang": "ja"})
    assert [d.metadata["lang"] for d in store.invoke("梅雨 rainy")] == ["ja"]
    assert [d.metadata["lang"] for d in store.invoke("梅雨 rainy", filter={"lang": "en"})] == []  # ANDed
    docs = [Document("梅雨は六月 rainy", metadata={"chunk_id": "a#0", "lang": "ja"}),
            Document("rainy season 梅雨", metadata={"chunk_id": "b#0", "lang": "en"})]
    memory = build_retriever("auto", DocumentsSource(docs), k=4, filter={"lang": "ja"})
    assert [d.metadata["chunk_id"] for d in memory.invoke("梅雨 rainy")] == ["a#0"]
    # without options the fallback is plain BM25, as before
    assert [d.metadata["chunk_id"] for d in build_retriever("auto", DocumentsSource(docs), k=4).invoke("梅雨 rainy")] \
        == ["b#0", "a#0"]


def test_auto_without_a_dense_channel_keeps_the_filter_on_postgresql(tmp_path, pg_url):
    """The same fallback over a ``postgresql://`` store ingested without an embedding model."""
    from langchain_ragspine.pipeline.ingest import ingest
    from langchain_ragspine.pipeline.sources import open_retriever

    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "tsuyu.md").write_text("---\nlang: ja\n---\n# 梅雨\n\n梅雨は六月に始まる。rainy\n", "utf-8")
    (corpus / "rainy.md").write_text("---\nlang: en\n---\n# Rain\n\nThe rainy season 梅雨 in Japan.\n", "utf-8")
    ingest(corpus, pg_url, progress=False, embedding="none")
    retriever = open_retriever(pg_url, mode="auto", filter={"lang": "ja"})
    assert [d.metadata["lang"] for d in retriever.invoke("梅雨 rainy")] == ["ja"]
