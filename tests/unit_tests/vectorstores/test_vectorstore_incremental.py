"""Issue 27 §2: a small write to ``RagSpineVectorStore`` costs what it adds, and searches as a full rebuild would.

Every write used to rebuild the whole in-memory index (BM25 tokenized every chunk again, the dense channel read
every vector again): 30 rounds of (add 10 texts, search) over 300 chunks took 7.8 s against 0.4 s for
``InMemoryVectorStore``.  A write now adds a small segment (``backends/directory/indexes.py``) searched beside the
others with exact merged scoring — BM25 from raw postings with the corpus statistics of every live row.  These
tests pin both halves: only the new texts are tokenized (and embedded), and after any sequence of adds, updates,
moves, deletes, RESTRICTED records, writes by another process, a failed write and a copy of the store written
otherwise, every search type returns exactly — ids, order and scores, bit for bit — what a store opened fresh on
the same directory returns.
"""

from __future__ import annotations

import errno
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document

from langchain_ragspine.backends.directory.chunk_store import ChunkStore
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.errors import StoreError
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.tokenizers import get_tokenizer
from langchain_ragspine.vectorstores import RagSpineVectorStore

EMB = HashingEmbeddings(64)
WORDS = ["梅雨", "北京", "rain", "season", "首都", "六月", "七月", "falcon", "river", "季節", "Kyoto", "前線"]
QUERIES = ["梅雨 の 季節", "rain season falcon", "北京 首都", "前線 river 梅雨 梅雨", "Kyoto"]
FILTERS: list[dict[str, Any] | None] = [None, {"dept": "a"}, {"n": {"gte": 20}}]


def _text(i: int) -> str:
    picked = [WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(1 + i % 9)]
    return " ".join(picked) + ("。梅雨前線が停滞する。" if i % 4 == 0 else "")


def _doc(i: int, **extra: Any) -> Document:
    return Document(page_content=_text(i), metadata={"dept": "ab"[i % 2], "n": i, **extra}, id=f"r{i}")


class CountingTokenizer:
    """The ``auto`` tokenizer, counting the texts it is given (queries included)."""

    def __init__(self) -> None:
        self.inner = get_tokenizer("auto")
        self.texts = 0

    def __call__(self, text: str) -> list[str]:
        self.texts += 1
        return self.inner(text)


def _results(vs: RagSpineVectorStore) -> dict[str, Any]:
    """What every search type returns for the queries and filters, with every score."""
    out: dict[str, Any] = {}
    for q in QUERIES:
        for f in FILTERS:
            key = f"{q}|{f}"
            out["bm25 " + key] = [(d.id, dict(d.metadata["scores"])) for d in vs.bm25_search(q, k=7, filter=f)]
            out["dense " + key] = [(d.id, s) for d, s in vs.similarity_search_with_score(q, k=7, filter=f)]
            out["hybrid " + key] = [(d.id, dict(d.metadata["scores"])) for d in vs.hybrid_search(q, k=7, filter=f)]
            out["mmr " + key] = [d.id for d in vs.max_marginal_relevance_search(q, k=4, fetch_k=9, filter=f)]
            out["bm25>=1 " + key] = [d.id for d in vs.bm25_search(q, k=7, filter=f, score_threshold=1.0)]
    return out


def _same_as_fresh(vs: RagSpineVectorStore, root: Path, tokenizer: Any = "auto") -> None:
    fresh = RagSpineVectorStore(root, vs.embedding, tokenizer=tokenizer)  # the same model (another is refused)
    try:
        assert _results(vs) == _results(fresh)
        ids = [f"r{i}" for i in range(200)]
        assert vs.get_by_ids(ids) == fresh.get_by_ids(ids)
    finally:
        fresh.close()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def counted(root: Path) -> Iterator[tuple[RagSpineVectorStore, CountingTokenizer]]:
    tok = CountingTokenizer()
    vs = RagSpineVectorStore(root, EMB, tokenizer=tok)
    vs.add_documents([_doc(i) for i in range(40)])
    vs.similarity_search("梅雨")
    yield vs, tok
    vs.close()


def test_regression_a_small_add_tokenizes_only_what_it_adds(counted) -> None:
    """Before: each add-then-search tokenized every chunk of the store again (40, 50, 60, ... texts)."""
    vs, tok = counted
    for r in range(12):
        tok.texts = 0
        vs.add_documents([_doc(100 + 10 * r + j) for j in range(10)])
        assert [d.id for d in vs.bm25_search("梅雨", k=100)]  # brings the indexes up to date, one query tokenized
        assert tok.texts == 10 + 1, f"round {r}: {tok.texts} texts tokenized for an add of 10"


def test_small_writes_search_exactly_as_a_fresh_build(counted, root: Path) -> None:
    vs, tok = counted
    for r in range(30):  # more rows than a merge waits for, so deltas, delta merges and main merges all happen
        base = 100 + 10 * r
        vs.add_documents([_doc(base + j) for j in range(10)])
        if r % 3 == 1:
            vs.delete([f"r{base - 3}", f"r{r}"])
        if r % 4 == 2:  # an update in place, and a record moved into another document
            vs.add_documents([_doc(base + 1, extra="changed"), _doc(r + 1, doc_id="shared")])
        if r % 5 == 0 or r in (29,):
            _same_as_fresh(vs, root, tok)
    assert len(vs.similarity_search("梅雨", k=1000)) == len(vs.backend.records())


def test_restricted_records_never_enter_a_segment(root: Path) -> None:
    seen: list[str] = []

    class Spy(HashingEmbeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            seen.extend(texts)
            return super().embed_documents(texts)

    vs = RagSpineVectorStore(root, Spy(64))
    vs.add_documents([_doc(i) for i in range(20)])
    vs.bm25_search("梅雨")
    secret = Document(page_content="梅雨 機密 CANARY27", metadata={"sensitivity": "RESTRICTED", "dept": "a"}, id="s")
    vs.add_documents([secret, _doc(50)])
    for search in (vs.bm25_search, vs.hybrid_search, vs.similarity_search, vs.max_marginal_relevance_search):
        assert "s" not in [d.id for d in search("梅雨 CANARY27", k=50)]
    assert vs.get_by_ids(["s"]) == []
    assert not any("CANARY27" in t for t in seen)
    _same_as_fresh(vs, root)  # and N, avgdl, df do not count it: the scores are a fresh build's
    vs.add_documents([Document(page_content=_text(3), metadata={"sensitivity": "RESTRICTED"}, id="r3")])  # relabel
    assert "r3" not in [d.id for d in vs.hybrid_search(_text(3), k=50)]
    _same_as_fresh(vs, root)
    vs.close()


def test_writes_of_another_process_and_of_an_ingest_are_applied_as_segments(root: Path, tmp_path: Path) -> None:
    vs = RagSpineVectorStore(root, EMB)
    vs.add_documents([_doc(i) for i in range(30)])
    vs.bm25_search("梅雨")
    other = RagSpineVectorStore(root, EMB)
    other.add_documents([_doc(i) for i in range(30, 45)])
    other.delete(["r2", "r31"])
    other.close()
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(5):
        (corpus / f"doc{i}.md").write_text(f"# Doc {i}\n\n{_text(200 + i)}\n\n{_text(300 + i)}\n", "utf-8")
    ingest(corpus, root, progress=False, mode="bm25")
    assert len(vs._current().parts) > 1  # updated, not built again
    _same_as_fresh(vs, root)
    vs.close()


def test_a_failed_write_leaves_the_segments_as_they_were(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    vs = RagSpineVectorStore(root, EMB)
    vs.add_documents([_doc(i) for i in range(30)])
    before = _results(vs)
    calls = [0]
    original = ChunkStore._insert_rows

    def second_fails(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        if calls[0] == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return original(*args, **kwargs)

    monkeypatch.setattr(ChunkStore, "_insert_rows", staticmethod(second_fails))
    with pytest.raises(StoreError, match="wrote nothing"):
        vs.add_documents([_doc(i, doc_id=f"d{i}") for i in range(60, 64)])
    monkeypatch.undo()
    assert _results(vs) == before
    _same_as_fresh(vs, root)
    vs.close()


def test_a_copy_written_otherwise_copied_over_the_store_is_read_again(root: Path, tmp_path: Path) -> None:
    """A copy of the store (same store id) written differently, then copied over it in place: the change feed
    after the generation the indexes hold does not describe the difference, so the store is read again whole."""
    vs = RagSpineVectorStore(root, EMB)
    vs.add_documents([_doc(i) for i in range(20)])
    fork = tmp_path / "fork"
    shutil.copytree(root, fork)
    vs.add_documents([_doc(i) for i in range(20, 25)])
    vs.bm25_search("梅雨")
    other = RagSpineVectorStore(fork, EMB)
    other.add_documents([_doc(i, dept="z") for i in range(100, 108)])  # more generations than the original's
    other.delete(["r1"])
    other.close()
    con = sqlite3.connect(root / "chunks.sqlite")  # the store's own log emptied first, as a copy-in expects
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    shutil.copytree(fork, root, dirs_exist_ok=True, copy_function=shutil.copyfile)
    ids = {d.id for d in vs.bm25_search("梅雨 rain 北京 falcon Kyoto 首都", k=1000)}
    assert "r1" not in ids and "r21" not in ids and "r100" in ids
    _same_as_fresh(vs, root)
    vs.close()
