"""The learned-sparse channel of a store directory (issue 28, part 2): ingest(sparse=...) encodes and records it,
search follows the record, off changes nothing, RESTRICTED chunks are never encoded or cached, PostgreSQL refuses
it by name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from langchain_ragspine.backends.directory.embedding_cache import EmbeddingCache
from langchain_ragspine.embeddings import sparse as sparse_module
from langchain_ragspine.errors import StoreError
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.sources import open_retriever
from langchain_ragspine.retrievers.sparse import SparseRetriever, sparse_cache_key
from tests.unit_tests.retrievers.test_sparse import Letters

SEEN: list[str] = []


@pytest.fixture(autouse=True)
def letters_for_e5(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spec 'e5' builds the toy Letters encoder (recording every text it sees), so no model runs here."""

    class Recording(Letters):
        def __init__(self, *args: object, **kwargs: object) -> None:
            super().__init__()
            self.seen = SEEN

    SEEN.clear()
    monkeypatch.setattr(sparse_module, "E5SparseEmbeddings", Recording)


def _corpus(root: Path, *, restricted: bool = True) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "tsuyu.md").write_text("# 梅雨\n\n梅雨は六月から七月にかけて続く雨の季節である。\n", "utf-8")
    (root / "beijing.md").write_text("# 北京\n\n北京是中国的首都。\n", "utf-8")
    label = "RESTRICTED" if restricted else "PUBLIC"
    (root / "plan.md").write_text(f"---\nsensitivity: {label}\n---\n# 計画\n\n梅雨の秘密計画書である。\n", "utf-8")
    return root


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.startswith("chunks.sqlite")}


def test_sparse_off_changes_no_file_and_no_mode(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus")
    ingest(corpus, tmp_path / "a", progress=False, embedding="none")
    ingest(corpus, tmp_path / "b", progress=False, embedding="none", sparse="none")
    a, b = _files(tmp_path / "a"), _files(tmp_path / "b")
    assert a.keys() == b.keys() and "sparse" not in json.loads(a["index.json"])
    assert SEEN == []
    assert type(open_retriever(tmp_path / "a", k=3).invoke("梅雨")) is list
    with pytest.raises(StoreError, match="mode 'sparse' needs a learned-sparse channel"):
        open_retriever(tmp_path / "a", mode="sparse").invoke("梅雨")


def test_ingest_encodes_records_and_search_follows_the_record(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus")
    store = tmp_path / "store"
    summary = ingest(corpus, store, progress=False, embedding="none", sparse="e5")
    record = json.loads((store / "index.json").read_text("utf-8"))["sparse"]
    assert record["spec"] == "e5" and record["model_key"] == "sparse:letters"
    assert any("chunks encoded" in n for n in summary.notes)
    assert not any("秘密" in t for t in SEEN)  # RESTRICTED: never encoded
    with EmbeddingCache(store / "embeddings.sqlite", read_only=True) as cache:
        cached = {cid for cid, _ in cache.keys("sparse:letters")}
    assert cached and not any(c.startswith("plan") for c in cached)
    SEEN.clear()
    got = open_retriever(store, mode="sparse", k=5).invoke("梅雨の季節")
    assert got and all(not d.metadata["doc_id"].startswith("plan") for d in got)
    assert got[0].metadata["doc_id"] == "tsuyu" and "sparse" in got[0].metadata["scores"]
    assert SEEN == ["梅雨の季節"]  # the chunks came from the cache; only the query was encoded
    auto = open_retriever(store, k=3).invoke("梅雨")
    assert "sparse" in auto[0].metadata["scores"]  # auto fuses the recorded channel
    SEEN.clear()
    ingest(corpus, store, progress=False, embedding="none")  # unchanged corpus, sparse=None: the store's own
    assert SEEN == [] and "sparse" in json.loads((store / "index.json").read_text("utf-8"))


def test_a_relabel_removes_the_chunk_from_the_sparse_cache_and_results(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus", restricted=False)
    store = tmp_path / "store"
    ingest(corpus, store, progress=False, embedding="none", sparse="e5")
    live = open_retriever(store, mode="sparse", k=5)  # opened before the relabel, kept open
    assert any(d.metadata["doc_id"] == "plan" for d in live.invoke("秘密計画"))
    _corpus(corpus, restricted=True)
    ingest(corpus, store, progress=False, embedding="none")
    with EmbeddingCache(store / "embeddings.sqlite", read_only=True) as cache:
        assert not any(c.startswith("plan") for c, _ in cache.keys("sparse:letters"))
    assert not any(d.metadata["doc_id"] == "plan" for d in live.invoke("秘密計画"))
    assert not any(d.metadata["doc_id"] == "plan" for d in open_retriever(store, mode="sparse").invoke("秘密計画"))


def test_switched_off_by_name_and_bad_specs(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus")
    store = tmp_path / "store"
    ingest(corpus, store, progress=False, embedding="none", sparse="e5")
    summary = ingest(corpus, store, progress=False, embedding="none", sparse="none")
    assert "sparse" not in json.loads((store / "index.json").read_text("utf-8"))
    assert any("switched off" in n for n in summary.notes)
    before = _files(store)
    with pytest.raises(ValueError, match="unknown sparse encoder 'spalde'"):
        ingest(corpus, store, progress=False, embedding="none", sparse="spalde")
    with pytest.raises(TypeError, match="sparse is a sparse-encoder spec"):
        ingest(corpus, store, progress=False, embedding="none", sparse=Letters())  # type: ignore[arg-type]
    assert _files(store) == before  # refused before the store was touched


def test_the_setting_switches_it_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAGSPINE_SPARSE", "E5")
    store = tmp_path / "store"
    ingest(_corpus(tmp_path / "corpus"), store, progress=False, embedding="none")
    assert json.loads((store / "index.json").read_text("utf-8"))["sparse"]["spec"] == "e5"
    monkeypatch.setenv("RAGSPINE_SPARSE", "spalde")
    with pytest.raises(ValueError, match="RAGSPINE_SPARSE='spalde'"):
        ingest(_corpus(tmp_path / "corpus"), store, progress=False, embedding="none")


def test_postgresql_refuses_it_by_name_before_connecting() -> None:
    with pytest.raises(ValueError, match="a PostgreSQL store does not support learned sparse retrieval"):
        ingest("docs/demo", "postgresql://u@127.0.0.1:9/none", progress=False, embedding="none", sparse="e5")


def test_cache_key_is_namespaced() -> None:
    assert sparse_cache_key(Letters()) == "sparse:letters"
    assert isinstance(SparseRetriever.from_documents([], Letters()), SparseRetriever)


def test_the_cli_takes_sparse(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from langchain_ragspine.cli import main

    store = tmp_path / "store"
    assert main(["ingest", str(_corpus(tmp_path / "corpus")), "--store", str(store), "--embedding", "none",
                 "--sparse", "e5"]) == 0
    assert json.loads((store / "index.json").read_text("utf-8"))["sparse"]["spec"] == "e5"
    capsys.readouterr()
    assert main(["search", "梅雨", "--store", str(store), "--mode", "sparse", "--json"]) == 0
    first = json.loads(capsys.readouterr().out.splitlines()[0])
    assert first["doc_id"] == "tsuyu" and first["scores"]["sparse"] > 0  # trial of 2751fdc: --json dropped it
    assert main(["search", "梅雨", "--store", str(store), "--mode", "bm25", "--json"]) == 0
    assert "sparse" not in json.loads(capsys.readouterr().out.splitlines()[0])["scores"]  # absent where it did not run


def test_a_vector_store_relabel_or_delete_removes_the_chunk_from_the_cache(tmp_path: Path) -> None:
    """Regression (trial of 2751fdc): a RagSpineVectorStore write that relabelled a chunk RESTRICTED (or deleted
    it) left its dense and learned-sparse vectors in embeddings.sqlite; only ingest pruned the cache."""
    from langchain_core.documents import Document

    from langchain_ragspine.embeddings import HashingEmbeddings
    from langchain_ragspine.vectorstores import RagSpineVectorStore

    corpus = _corpus(tmp_path / "corpus", restricted=False)
    store = tmp_path / "store"
    ingest(corpus, store, progress=False, embedding="hashing:64", sparse="e5")

    def cached(prefix: str) -> set[str]:
        with EmbeddingCache(store / "embeddings.sqlite", read_only=True) as cache:
            return {m for m in ("sparse:letters", "HashingEmbeddings(size=64)")
                    if any(c.startswith(prefix) for c, _ in cache.keys(m))}

    assert cached("plan") == {"sparse:letters", "HashingEmbeddings(size=64)"}
    vs = RagSpineVectorStore(str(store), HashingEmbeddings(64))
    plan = [d for d in vs.get_by_ids([f"plan#{i}" for i in range(5)])]
    assert plan
    vs.add_documents([Document(page_content=d.page_content, metadata={**d.metadata, "sensitivity": "RESTRICTED"},
                               id=d.id) for d in plan])
    assert cached("plan") == set()  # neither model keeps a vector of the relabelled chunk
    assert cached("beijing") == {"sparse:letters", "HashingEmbeddings(size=64)"}  # the others are kept
    vs.delete([f"beijing#{i}" for i in range(5)])
    assert cached("beijing") == set()
    assert cached("tsuyu") == {"sparse:letters", "HashingEmbeddings(size=64)"}
