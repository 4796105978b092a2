"""Parent-child chunking and retrieval: parents versioned in the chunk store (schema 3, migration from 2), the
retriever's k / fetch_k, missing and RESTRICTED parents, a second process reading the same store, ingest with
--chunker, the parent_child mode and auto over a parent_child store (issue 27 §2; the LangChain drop-in is in
test_parent_child_dropin.py)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from langchain_ragspine.backends.directory.chunk_store import SCHEMA_VERSION, ChunkStore
from langchain_ragspine.backends.directory.layout import CHUNKS_DB
from langchain_ragspine.cli import main
from langchain_ragspine.errors import StoreError
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.sources import open_retriever, search
from langchain_ragspine.retrievers import BM25Retriever, ParentChildRetriever
from langchain_ragspine.text_splitters import ParentChildTextSplitter
from langchain_ragspine.text_splitters.chunkers import CHUNKERS

REPO = Path(__file__).resolve().parents[3]


def _doc(doc_id: str, text: str, **md: Any) -> Document:
    return Document(text, metadata={"doc_id": doc_id, "source": f"{doc_id}.md", **md})


def _split(docs: list[Document], size: int = 40, parent: int = 400) -> tuple[list[Document], list[Document]]:
    return ParentChildTextSplitter(size, 0, parent_chunk_size=parent).split_with_parents(docs)


def _store(tmp_path: Path, docs: list[Document], **kw: int) -> tuple[ChunkStore, list[Document], list[Document]]:
    parents, children = _split(docs, **kw)
    store = ChunkStore(tmp_path / "chunks.sqlite")
    for d in docs:
        did = d.metadata["doc_id"]
        store.replace_doc_chunks(
            did,
            [c for c in children if c.metadata["doc_id"] == did],
            parents=[p for p in parents if p.metadata["doc_id"] == did],
        )
    return store, parents, children


# -- the splitter ------------------------------------------------------------------------------------------------
def test_children_lie_inside_their_parent_and_carry_its_locator():
    text = "# 梅雨\n\n" + "梅雨は六月に始まり七月に終わる。" * 12 + "\n\n# 台風\n\n台風は秋に来る。"
    parents, children = _split([_doc("w", text)], size=50, parent=120)
    by_id = {p.id: p for p in parents}
    assert len(parents) >= 3 and len(children) > len(parents)
    for c in children:
        p = by_id[c.metadata["parent_id"]]
        assert p.metadata["start_index"] <= c.metadata["start_index"] < c.metadata["end_index"] <= p.metadata["end_index"]
        assert c.metadata["parent_locator"] == p.metadata["source_locator"]
        assert (c.metadata["parent_start_index"], c.metadata["parent_end_index"]) == (
            p.metadata["start_index"], p.metadata["end_index"])
        assert c.metadata["heading"] == p.metadata["heading"]
    for p in parents:
        assert text[p.metadata["start_index"] : p.metadata["end_index"]] == p.page_content  # its own verbatim slice
        assert p.id == p.metadata["chunk_id"] == p.metadata["parent_id"]
    assert [p.metadata["heading"] for p in parents][-1] == ["台風"]  # sections are parents
    assert [c.id for c in children] == [f"w#{i}" for i in range(len(children))]
    assert ParentChildTextSplitter(50, 0, parent_chunk_size=120).split_documents([_doc("w", text)]) == children


def test_parent_budget_must_exceed_the_child_budget():
    with pytest.raises(ValueError, match="parent_chunk_size"):
        ParentChildTextSplitter(100, 10, parent_chunk_size=100)


def test_parents_share_the_document_label():
    parents, children = _split([_doc("r", "機密の手順。" * 20, sensitivity="RESTRICTED")])
    assert {d.metadata["sensitivity"] for d in parents + children} == {"RESTRICTED"}


# -- the store ---------------------------------------------------------------------------------------------------
def test_parents_are_versioned_with_their_document(tmp_path):
    store, parents, children = _store(tmp_path, [_doc("a", "一つ目の段落です。" * 10)])
    assert store.count_parents() == len(parents)
    assert store.replace_doc_chunks("a", children, parents=parents) == 1  # identical: no new version
    new_parents, new_children = _split([_doc("a", "書き換えた段落です。" * 10)])
    assert store.replace_doc_chunks("a", new_children, parents=new_parents) == 2
    assert [p.text for p in store.iter_parents()] == [p.page_content for p in new_parents]
    assert len(list(store.iter_parents(include_inactive=True))) == len(parents) + len(new_parents)
    assert store.replace_doc_chunks("a", []) == 3  # retraction deactivates parents too
    assert store.count_parents() == 0 and store.get_parents([new_parents[0].id]) == {}
    store.close()


def test_a_parent_only_change_is_a_new_version(tmp_path):
    text = "段落。" * 30
    store, parents, children = _store(tmp_path, [_doc("a", text)])
    changed = [Document(p.page_content, metadata={**p.metadata, "topic": "law"}, id=p.id) for p in parents]
    assert store.replace_doc_chunks("a", children, parents=changed) == 2
    store.close()


def test_children_must_name_a_given_parent(tmp_path):
    parents, children = _split([_doc("a", "段落。" * 30)])
    with ChunkStore(tmp_path / "c.sqlite") as store:
        with pytest.raises(ValueError, match=r"chunk 'a#0' of doc_id 'a' names parent 'a#p0', which is not among"):
            store.replace_doc_chunks("a", children, parents=[Document("x", metadata={"doc_id": "a", "parent_id": "a#p9"})])
        with pytest.raises(ValueError, match="parents were given without chunks"):
            store.replace_doc_chunks("a", [], parents=parents)
        assert store.current_version("a") is None  # nothing written


def test_schema_2_store_opens_read_only_and_migrates(tmp_path):
    path = tmp_path / "chunks.sqlite"
    docs = [_doc("a", "古い店の段落。" * 5)]
    from langchain_ragspine.text_splitters import ParagraphTextSplitter

    chunks = ParagraphTextSplitter().split_documents(docs)
    with ChunkStore(path) as store:
        store.replace_doc_chunks("a", chunks)
    con = sqlite3.connect(path)  # make it a schema-2 file, as written before parents existed
    con.executescript("DROP TABLE parents; UPDATE meta SET value = '2' WHERE key = 'schema_version';")
    con.commit()
    con.close()
    with ChunkStore(path, read_only=True) as old:
        assert old.schema_version == 2 and old.chunker is None and old.count_parents() == 0
        assert old.get_parents(["a#p0"]) == {} and list(old.iter_parents()) == []
        assert [c.text for c in old.iter_chunks()] == [c.page_content for c in chunks]
    with ChunkStore(path) as store:
        assert store.schema_version == SCHEMA_VERSION
        assert store.replace_doc_chunks("a", chunks) == 1  # same hash as schema 2 wrote: unchanged


def test_the_saved_schema_2_fixture_migrates_additively(tmp_path):
    """The store of tests/fixtures/store-5830ee7 (schema 2, written by main before parents existed): a read-only
    open changes no byte; a writable open migrates to the current schema keeping every chunk and version row as it
    was (schema 4 adds the writer, owner and generation of each version: the ingest wrote these)."""
    fixture = REPO / "tests" / "fixtures" / "store-5830ee7"
    shutil.copytree(fixture / "store", tmp_path / "store")
    shutil.copytree(fixture / "corpus", tmp_path / "corpus")
    path = tmp_path / "store" / CHUNKS_DB

    def rows() -> tuple[list[tuple], list[tuple]]:
        con = sqlite3.connect(path)
        try:
            return (con.execute("SELECT * FROM chunks ORDER BY id").fetchall(),
                    con.execute("SELECT doc_id, version, content_hash, n_chunks, valid_as_of, ingested_at, retracted "
                                "FROM doc_versions ORDER BY doc_id, version").fetchall())
        finally:
            con.close()

    before_bytes, before_rows = hashlib.sha256(path.read_bytes()).hexdigest(), rows()
    with ChunkStore(path, read_only=True) as old:
        assert old.schema_version == 2 and old.chunker is None and old.count_parents() == 0
    assert hashlib.sha256(path.read_bytes()).hexdigest() == before_bytes
    with ChunkStore(path) as store:
        assert store.schema_version == SCHEMA_VERSION and store.count_parents() == 0
    assert rows() == before_rows  # additive: nothing deleted or rewritten
    con = sqlite3.connect(path)
    assert set(con.execute("SELECT writer, owner, generation FROM doc_versions")) == {("ingest", "ingest", None)}
    con.close()
    summary = ingest(tmp_path / "corpus", tmp_path / "store", tokenizer="cjk-nofold", mode="bm25", progress=False)
    assert summary.unchanged == summary.documents == 3  # the content hashes schema 2 wrote still match
    with ChunkStore(path, read_only=True) as store:
        assert store.chunker == {"name": "paragraph", "chunk_size": 480, "chunk_overlap": 80}
    with pytest.raises(StoreError, match="built before stores recorded their chunker"):  # before the record
        shutil.copytree(fixture / "store", tmp_path / "fresh")
        ingest(tmp_path / "corpus", tmp_path / "fresh", chunker="layout", mode="bm25", progress=False)


# -- the retriever -----------------------------------------------------------------------------------------------
def test_one_document_of_ten_children_returns_that_parent(tmp_path):
    text = "\n\n".join(f"梅雨の記録その{i}は六月の雨について書いている。" for i in range(10))
    store, parents, children = _store(tmp_path, [_doc("rain", text)], size=30, parent=1000)
    assert len(parents) == 1 and len(children) == 10
    retriever = ParentChildRetriever(BM25Retriever.from_documents(children), store, fetch_k=4, k=1)
    hits = retriever.invoke("梅雨 六月の雨")
    assert [h.id for h in hits] == ["rain#p0"]
    assert hits[0].page_content == text and len(hits[0].metadata["child_ids"]) == 4
    assert hits[0].metadata["scores"]["bm25"] > 0
    store.close()


def test_several_documents_return_distinct_parents_up_to_parent_k(tmp_path):
    docs = [
        _doc(f"d{n}", "\n\n".join(f"台風{n}号の記録{i}。台風は秋に来る。" for i in range(6))) for n in range(4)
    ]
    store, parents, children = _store(tmp_path, docs, size=20, parent=1000)
    child = BM25Retriever.from_documents(children)
    retriever = ParentChildRetriever(child, store, fetch_k=50, k=3)
    hits = retriever.invoke("台風 秋")
    assert len(hits) == 3 and len({h.id for h in hits}) == 3
    ranked = [c.metadata["parent_id"] for c in child.invoke("台風 秋", k=50)]
    assert [h.id for h in hits] == list(dict.fromkeys(ranked))[:3]  # child-rank order of the best child
    assert [h.id for h in retriever.invoke("台風 秋", k=10)] == list(dict.fromkeys(ranked))  # k per call
    assert [h.id for h in ParentChildRetriever(child, store, fetch_k=3, k=5).invoke("台風 秋")] == list(
        dict.fromkeys(ranked[:3]))
    store.close()


def test_a_child_naming_an_unknown_parent_is_dropped_and_one_without_parent_id_raises(tmp_path):
    store, parents, children = _store(tmp_path, [_doc("a", "段落の文。" * 20)], size=30)
    orphan = Document("段落の文。", metadata={**children[0].metadata, "parent_id": "a#p7", "chunk_id": "x#0"})
    retriever = ParentChildRetriever(BM25Retriever.from_documents([orphan]), store, fetch_k=5, k=2)
    assert retriever.invoke("段落") == []  # no such parent in the store: nothing to return
    both = ParentChildRetriever(BM25Retriever.from_documents([orphan, *children]), store, fetch_k=50, k=2)
    assert [h.id for h in both.invoke("段落")] == ["a#p0"]
    plain = Document("段落の文。", metadata={"chunk_id": "y#0"})
    with pytest.raises(StoreError, match=r"child 'y#0' has no parent_id"):
        ParentChildRetriever(BM25Retriever.from_documents([plain]), store).invoke("段落")
    store.close()


def test_a_store_without_parents_is_a_clear_error(tmp_path):
    """Children over a store ingested without --chunker parent_child: no parent can ever be found, so this is a
    configuration error (named), not a deleted document."""
    docs = [_doc("a", "段落の文。" * 20)]
    parents, children = _split(docs, size=30)
    store = ChunkStore(tmp_path / "chunks.sqlite")
    store.replace_doc_chunks("a", children)  # the chunks only, no parents
    retriever = ParentChildRetriever(BM25Retriever.from_documents(children), store, fetch_k=5, k=2)
    with pytest.raises(StoreError, match=r"child 'a#0' names parent 'a#p0', but the store holds chunks and no "
                                         r"parents.*--chunker parent_child"):
        retriever.invoke("段落")
    store.close()


def test_a_static_child_index_outlives_a_deleted_document(tmp_path):
    """Regression (trial ``t2_parent.py``): a ``ParentChildRetriever`` built by hand over a static child index raised
    ``StoreError`` on every query that reached a deleted document's child; it now drops that child (its parent is
    gone) and answers from the others, every parent read from the store at the call (its current label)."""
    docs = [_doc("a", "台風の記録。台風は秋に来る。" * 6), _doc("b", "台風の対策。窓を閉めて台風に備える。" * 6)]
    store, parents, children = _store(tmp_path, docs, size=20, parent=1000)
    retriever = ParentChildRetriever(BM25Retriever.from_documents(children), store, fetch_k=50, k=5)
    assert sorted(h.metadata["doc_id"] for h in retriever.invoke("台風")) == ["a", "b"]
    store.replace_doc_chunks("a", [])  # deleted after the child index was built
    assert [h.metadata["doc_id"] for h in retriever.invoke("台風")] == ["b"]
    assert [h.metadata["doc_id"] for h in asyncio.run(retriever.ainvoke("台風"))] == ["b"]
    relabelled = [Document(d.page_content, metadata={**d.metadata, "sensitivity": "RESTRICTED"}, id=d.id)
                  for d in (*children, *parents) if d.metadata["doc_id"] == "b"]
    store.replace_doc_chunks("b", [d for d in relabelled if d.id in {c.id for c in children}],
                             parents=[d for d in relabelled if d.id in {p.id for p in parents}])
    assert retriever.invoke("台風") == []  # the stale child says PUBLIC; the parent read now is RESTRICTED
    store.replace_doc_chunks("b", [])
    assert retriever.invoke("台風") == []  # every document deleted: nothing, and no error
    store.close()


class _Leaky(BaseRetriever):
    """A child retriever that returns whatever it holds, RESTRICTED included (a user's own retriever)."""

    docs: list[Document]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        return list(self.docs)


def test_restricted_parents_are_never_returned(tmp_path):
    docs = [_doc("pub", "公開の手順。" * 10, sensitivity="PUBLIC"), _doc("sec", "機密の手順。" * 10, sensitivity="RESTRICTED")]
    store, parents, children = _store(tmp_path, docs)
    secret_children = [c for c in children if c.metadata["doc_id"] == "sec"]
    unlabeled = [Document(c.page_content, metadata={**c.metadata, "sensitivity": None}) for c in secret_children]
    for leak in (secret_children, unlabeled):  # the child says nothing, the parent is RESTRICTED: still dropped
        hits = ParentChildRetriever(_Leaky(docs=leak + children[:1]), store, k=5).invoke("手順")
        assert [h.metadata["doc_id"] for h in hits] == ["pub"]
    assert BM25Retriever.from_documents(children).invoke("機密") == []  # BM25 never indexes RESTRICTED children
    store.close()


def test_filter_reaches_the_child_retriever(tmp_path):
    docs = [_doc("ja", "梅雨の話。" * 8, lang="ja"), _doc("zh", "梅雨的故事。" * 8, lang="zh")]
    store, parents, children = _store(tmp_path, docs)
    retriever = ParentChildRetriever(BM25Retriever.from_documents(children), store)
    assert {h.metadata["doc_id"] for h in retriever.invoke("梅雨", filter={"lang": "zh"})} == {"zh"}
    leaky = ParentChildRetriever(_Leaky(docs=children), store)  # a retriever without filter: filtered here
    assert {h.metadata["doc_id"] for h in leaky.invoke("梅雨", filter={"lang": "ja"})} == {"ja"}
    store.close()


async def test_async_matches_sync(tmp_path):
    store, parents, children = _store(tmp_path, [_doc(f"d{n}", f"文書{n}の内容。" * 8) for n in range(3)])
    retriever = ParentChildRetriever(BM25Retriever.from_documents(children), store, k=2)
    assert [d.id for d in await retriever.ainvoke("内容")] == [d.id for d in retriever.invoke("内容")]
    store.close()


def test_bad_counts_and_store_are_refused(tmp_path):
    child = BM25Retriever.from_documents([Document("x", metadata={"chunk_id": "x"})])
    with ChunkStore(tmp_path / "c.sqlite") as store:
        with pytest.raises(ValueError, match="fetch_k must be an int >= 1"):
            ParentChildRetriever(child, store, fetch_k=0)
        with pytest.raises(ValueError, match="k must be an int >= 1"):
            ParentChildRetriever(child, store, k=0)
    with pytest.raises(ValueError, match="get_parents"):
        ParentChildRetriever(child, {"a": 1})


# -- ingest, the mode, and a second process ---------------------------------------------------------------------------
def _corpus(tmp_path: Path) -> Path:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "rain.md").write_text(
        "# 梅雨\n\n" + "\n\n".join(f"梅雨の観測{i}。六月の雨量を記録した。" for i in range(8)) + "\n\n# 台風\n\n台風は秋に来る。\n",
        "utf-8",
    )
    (corpus / "law.md").write_text("第一条　本法は全国に適用する。\n\n第二条　施行は四月とする。\n", "utf-8")
    (corpus / "secret.md").write_text("---\nsensitivity: RESTRICTED\n---\n梅雨の機密の観測手順。\n", "utf-8")
    return corpus


_SEARCH_CHILD = """
import json, sys
from langchain_ragspine import open_retriever, search
r = open_retriever(sys.argv[1], mode="parent_child", k=3)
print(json.dumps([[d.id, d.page_content, d.metadata["source_locator"], d.metadata["child_ids"]]
                  for d in search(r, sys.argv[2], k=3)], ensure_ascii=False))
"""


@pytest.mark.subprocess
def test_parents_survive_a_restart_across_two_processes(tmp_path):
    store_dir = tmp_path / "store"
    env = {"PYTHONPATH": str(REPO), "RAGSPINE_EMBEDDING": "none", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    ingest_code = (
        "import sys; from langchain_ragspine import ingest; "
        "print(ingest(sys.argv[1], sys.argv[2], chunker='parent_child', chunk_size=40, chunk_overlap=10, mode='bm25').line())"
    )
    run = {"capture_output": True, "text": True, "env": env, "cwd": tmp_path, "timeout": 300}
    made = subprocess.run([sys.executable, "-c", ingest_code, str(_corpus(tmp_path)), str(store_dir)], **run)
    assert made.returncode == 0, made.stderr
    found = subprocess.run([sys.executable, "-c", _SEARCH_CHILD, str(store_dir), "梅雨 六月の雨量"], **run)
    assert found.returncode == 0, found.stderr
    hits = json.loads(found.stdout)
    with ChunkStore(store_dir / CHUNKS_DB, read_only=True) as store:
        stored = {p.chunk_id: p for p in store.iter_parents()}
    assert hits and hits[0][0] == "rain#p0"
    for pid, text, locator, child_ids in hits:  # the parents the other process wrote, verbatim from the store
        assert stored[pid].text == text and stored[pid].source_locator == locator and child_ids
    raw = (tmp_path / "corpus" / "rain.md").read_text("utf-8")
    start, end = map(int, hits[0][2].split("#")[1].split("-"))
    assert raw[start:end] == hits[0][1]
    assert all("機密" not in text for _, text, _, _ in hits)


def test_ingest_records_the_chunker_and_refuses_another(tmp_path, capsys):
    corpus, store_dir = _corpus(tmp_path), tmp_path / "store"
    ingest(corpus, store_dir, chunker="parent_child", chunk_size=40, chunk_overlap=10, mode="bm25")
    with ChunkStore(store_dir / CHUNKS_DB, read_only=True) as store:
        assert store.chunker == {
            "name": "parent_child", "chunk_size": 40, "chunk_overlap": 10, "parent_chunk_size": 160, "preset": "layout",
        }
        assert store.count_parents() >= 3
    with pytest.raises(StoreError, match=r"refusing to ingest: this store was chunked by parent_child\(.*\), not layout"):
        ingest(corpus, store_dir, chunker="layout", chunk_size=40, chunk_overlap=10, mode="bm25")
    with pytest.raises(StoreError, match=r"chunk_size=40.*not parent_child\(.*chunk_size=480"):
        ingest(corpus, store_dir, chunker="parent_child", mode="bm25")
    summary = ingest(corpus, store_dir, chunk_size=40, chunk_overlap=10, mode="bm25")  # no chunker named: the store's
    assert summary.unchanged == summary.documents == 3
    assert main(["ingest", str(corpus), "--store", str(store_dir), "--chunker", "qa", "--mode", "bm25"]) == 2
    assert "refusing to ingest" in capsys.readouterr().err


def test_search_refuses_a_store_of_another_chunker(tmp_path, monkeypatch):
    corpus, store_dir = _corpus(tmp_path), tmp_path / "store"
    ingest(corpus, store_dir, chunker="laws", mode="bm25")
    assert open_retriever(store_dir, mode="bm25")  # unset: searched as built
    monkeypatch.setenv("RAGSPINE_CHUNKER", "paragraph")
    with pytest.raises(StoreError, match="refusing to search: this store was chunked by laws"):
        open_retriever(store_dir, mode="bm25")
    monkeypatch.setenv("RAGSPINE_CHUNKER", "laws")
    assert open_retriever(store_dir, mode="bm25")
    monkeypatch.setenv("RAGSPINE_CHUNK_SIZE", "300")  # same chunker, other budgets: another configuration
    with pytest.raises(StoreError, match=r"chunked by laws\(chunk_overlap=80, chunk_size=480\), but the "
                                         r"configuration asked for is laws\(chunk_overlap=80, chunk_size=300\)"):
        open_retriever(store_dir, mode="bm25")
    monkeypatch.setenv("RAGSPINE_CHUNKER", "book")
    monkeypatch.delenv("RAGSPINE_CHUNK_SIZE")
    with pytest.raises(StoreError, match="refusing to search"):
        open_retriever(store_dir, mode="parent_child")


def test_parent_child_mode_needs_a_store_with_parents(tmp_path):
    corpus, store_dir = _corpus(tmp_path), tmp_path / "store"
    ingest(corpus, store_dir, mode="bm25")
    with pytest.raises(StoreError, match="holds no parents .*chunked by paragraph"):
        open_retriever(store_dir, mode="parent_child")


def test_parent_child_mode_over_auto_returns_parents(tmp_path):
    corpus, store_dir = _corpus(tmp_path), tmp_path / "store"
    ingest(corpus, store_dir, chunker="parent_child", chunk_size=40, chunk_overlap=10, mode="parent_child")
    retriever = open_retriever(store_dir, mode="parent_child", k=2)
    assert isinstance(retriever.current, ParentChildRetriever)
    hits = search(retriever, "施行は四月", k=2)
    assert hits[0].id == "law#p0"  # the layout preset makes the whole file one section: one parent
    assert hits[0].page_content == "第一条　本法は全国に適用する。\n\n第二条　施行は四月とする。"
    assert hits[0].metadata["heading"] == [] and hits[0].metadata["child_ids"]
    assert [h.page_content for h in search(retriever, "台風", k=2)] == ["# 台風\n\n台風は秋に来る。"]


@pytest.mark.parametrize("embedding", ["none", "hashing"])
def test_auto_over_a_parent_child_store_returns_distinct_parents(embedding, tmp_path):
    """Regression (issue 27 §2): ``auto`` — the default of open_retriever and ``ragspine search`` — over a store
    ingested with ``--chunker parent_child`` returned the children, several of one parent; it returns the store's
    distinct parents now (the store records its chunker), and another mode named explicitly still gets children."""
    corpus, store_dir = _corpus(tmp_path), tmp_path / "store"
    ingest(corpus, store_dir, chunker="parent_child", chunk_size=40, chunk_overlap=10, embedding=embedding,
           mode="auto", progress=False)
    retriever = open_retriever(store_dir, k=3)  # no mode: auto
    assert isinstance(retriever.current, ParentChildRetriever) and retriever.current.k == 3
    hits = search(retriever, "梅雨 六月の雨量", k=3)
    assert hits[0].id == "rain#p0" and len(hits[0].metadata["child_ids"]) > 1
    assert len({h.id for h in hits}) == len(hits) and all("#p" in h.id for h in hits)
    assert [h.id for h in search(retriever, "梅雨 六月の雨量", k=1)] == ["rain#p0"]
    explicit = "hybrid" if embedding == "hashing" else "bm25"
    children = search(open_retriever(store_dir, mode=explicit, k=3), "梅雨 六月の雨量", k=3)
    parent_ids = [c.metadata["parent_id"] for c in children]
    assert all("#p" not in c.id for c in children) and len(set(parent_ids)) < len(parent_ids)  # children, as asked
    assert not isinstance(open_retriever(store_dir, mode=explicit).current, ParentChildRetriever)
    assert [h.id for h in search(open_retriever(store_dir, mode="parent_child", k=3), "梅雨 六月の雨量", k=3)] == [
        h.id for h in hits]


def test_ragspine_search_on_a_parent_child_store_returns_distinct_parents_without_a_mode(tmp_path, capsys):
    corpus, store = _corpus(tmp_path), str(tmp_path / "store")
    assert main(["ingest", str(corpus), "--store", store, "--chunker", "parent_child", "--chunk-size", "40",
                 "--chunk-overlap", "10", "--mode", "bm25"]) == 0
    capsys.readouterr()
    assert main(["search", "梅雨 六月の雨量", "--store", store, "--json", "-k", "3"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert rows[0]["chunk_id"] == "rain#p0" and len({r["chunk_id"] for r in rows}) == len(rows)
    assert all("#p" in r["chunk_id"] for r in rows)
    raw = (corpus / "rain.md").read_text("utf-8")
    assert raw[rows[0]["start_index"] : rows[0]["end_index"]] == rows[0]["text"]
    assert main(["search", "梅雨 六月の雨量", "--store", store, "--json", "-k", "3", "--mode", "bm25"]) == 0
    children = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert [r["chunk_id"] for r in children] != [r["chunk_id"] for r in rows]  # an explicit mode: the children
    assert all("#p" not in r["chunk_id"] for r in children)


def test_auto_over_another_store_is_unchanged(tmp_path):
    corpus, store_dir = _corpus(tmp_path), tmp_path / "store"
    ingest(corpus, store_dir, chunker="layout", mode="bm25", progress=False)
    assert isinstance(open_retriever(store_dir).current, BM25Retriever)


def test_parent_child_on_postgresql_is_refused_before_the_store_is_touched(tmp_path, monkeypatch):
    """No PostgreSQL store keeps parents: ``--chunker parent_child`` into one is refused by name before any file is
    read or the server is reached (port 9 here: connecting would be a different error)."""
    url = "postgresql://nobody@127.0.0.1:9/none"
    refused = r"a PostgreSQL store does not support parents: it keeps no parent passages"
    with pytest.raises(ValueError, match=refused):
        ingest(tmp_path / "no-such-corpus", url, chunker="parent_child", mode="bm25")
    monkeypatch.setenv("RAGSPINE_CHUNKER", "parent_child")
    with pytest.raises(ValueError, match=refused):
        ingest(tmp_path / "no-such-corpus", url, mode="bm25")


def test_a_postgresql_store_searches_children_in_auto_and_refuses_the_parent_mode(tmp_path, pg_url):
    corpus = _corpus(tmp_path)
    ingest(corpus, pg_url, mode="bm25", progress=False)
    hits = search(open_retriever(pg_url, k=3), "施行は四月", k=3)
    assert hits and hits[0].metadata["doc_id"] == "law"
    with pytest.raises(ValueError, match=r"a PostgreSQL store does not support parents: it keeps no "
                                         r"parent passages"):
        open_retriever(pg_url, mode="parent_child")
    # regression (trial of bf21278): a ParentChildRetriever handed the PostgreSQL chunk store was accepted and
    # found no parent, silently ([] for every query); it is refused in the same words
    from langchain_ragspine.backends.postgres.chunk_store import PostgresChunkStore

    with PostgresChunkStore(pg_url, read_only=True) as store, pytest.raises(
        ValueError, match=r"a PostgreSQL store does not support parents: it keeps no parent passages"
    ):
        ParentChildRetriever(child_retriever=open_retriever(pg_url, mode="bm25"), store=store)


@pytest.mark.parametrize("name", CHUNKERS)
def test_cli_ingest_with_every_chunker_then_search(name, tmp_path, capsys):
    corpus, store = _corpus(tmp_path), str(tmp_path / "store")
    extra = ["--embedding", "hashing"] if name == "semantic" else []  # semantic cuts on embeddings
    assert main(["ingest", str(corpus), "--store", store, "--chunker", name, "--mode", "bm25",
                 "--chunk-size", "40", "--chunk-overlap", "10", *extra]) == 0
    assert "this run: 3 documents" in capsys.readouterr().out
    with ChunkStore(Path(store) / CHUNKS_DB, read_only=True) as chunks:
        assert chunks.chunker is not None and chunks.chunker["name"] == name
        assert (chunks.count_parents() > 0) == (name == "parent_child")
    mode = "parent_child" if name == "parent_child" else "bm25"
    assert main(["search", "施行は四月", "--store", store, "--json", "-k", "3", "--mode", mode]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert rows and rows[0]["doc_id"] == "law" and "施行は四月" in rows[0]["text"]
    for row in rows:  # every result, child or parent, is a verbatim slice of its file
        raw = (corpus / f"{row['doc_id']}.md").read_text("utf-8")
        assert raw[row["start_index"] : row["end_index"]] == row["text"]
        assert "機密" not in row["text"]
    if name != "paragraph":  # another chunker than the store's is refused, by name
        assert main(["ingest", str(corpus), "--store", store, "--chunker", "paragraph", "--mode", "bm25"]) == 2
        assert f"chunked by {name}(" in capsys.readouterr().err


def test_ragspine_chunker_environment_selects_the_ingest_chunker(tmp_path, monkeypatch, capsys):
    corpus, store = _corpus(tmp_path), tmp_path / "store"
    monkeypatch.setenv("RAGSPINE_CHUNKER", "qa")
    assert main(["ingest", str(corpus), "--store", str(store), "--mode", "bm25"]) == 0
    with ChunkStore(store / CHUNKS_DB, read_only=True) as chunks:
        assert chunks.chunker == {"name": "qa", "chunk_size": 480, "chunk_overlap": 80}
    monkeypatch.setenv("RAGSPINE_CHUNKER", "recursive")
    with pytest.raises(ValueError, match="unknown chunker 'recursive'"):
        ingest(corpus, store, mode="bm25")


def test_the_chunking_doc_python_blocks_run(monkeypatch, capsys):
    """docs/chunking.md's examples run as written (repo root as cwd), so the page cannot drift from the code."""
    blocks = re.findall(r"```python\n(.*?)```", (REPO / "docs" / "chunking.md").read_text("utf-8"), re.S)
    assert blocks
    monkeypatch.chdir(REPO)
    namespace: dict[str, Any] = {"__name__": "__chunking_doc__"}
    for block in blocks:
        exec(compile(block, "docs/chunking.md", "exec"), namespace)
    printed = capsys.readouterr().out.splitlines()
    assert 2 <= len(printed) <= 6 and all("#" in line for line in printed)  # a locator per parent, k=3 per block
    namespace["store"].close()
    drop_in = namespace["retriever"]  # the ParentDocumentRetriever-style block ran last
    assert isinstance(drop_in, ParentChildRetriever) and drop_in.vectorstore is not None
