"""The RAPTOR tree as a derived file of a store directory: off changes nothing, on survives a restart and is rebuilt
incrementally, RESTRICTED chunks never reach it (nor a prompt), a vector-store write withdraws relabelled chunks
from it, PostgreSQL refuses it by name."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from langchain_ragspine.backends.directory import chunk_store as chunk_store_module
from langchain_ragspine.backends.directory.raptor_file import RAPTOR_FILE, read_raptor_file
from langchain_ragspine.errors import StaleIndexWarning, StoreError
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.modes import DocumentsSource, build_mode
from langchain_ragspine.pipeline.sources import StoreSource, open_retriever
from langchain_ragspine.raptor import LLMSummariser, RaptorBuilder
from tests.unit_tests.spy_models import SpyChatModel

QUESTION = "Which castle has stone walls near the river?"
SECRET = "Zetaproject budget"


def _corpus(root: Path, *, restricted: bool = False) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(10):
        (root / f"kyoto{i}.md").write_text(
            f"# Kyoto {i}\n\nKyoto temple {i} is old and wooden. Its hall was rebuilt in {1600 + i}.\n", "utf-8")
        (root / f"osaka{i}.md").write_text(
            f"# Osaka {i}\n\nOsaka castle {i} has stone walls. Its gate faces the river.\n", "utf-8")
    label = "RESTRICTED" if restricted else "PUBLIC"
    (root / "plan.md").write_text(
        f"---\nsensitivity: {label}\n---\n# Plan\n\n{SECRET} for the Osaka castle walls.\n", "utf-8")
    return root


@pytest.fixture
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every version written at the same instant, so two ingests of one corpus write the same bytes."""
    monkeypatch.setattr(chunk_store_module, "utc_now_iso", lambda: "2026-01-01T00:00:00.000000+00:00")


def _files(root: Path) -> dict[str, bytes]:
    """Every file's bytes; ``chunks.sqlite`` as its SQL dump less its random ``store_id``."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.name.startswith("chunks.sqlite"):
            out[str(p.relative_to(root))] = p.read_bytes()
    with contextlib.closing(sqlite3.connect(root / "chunks.sqlite")) as db:
        rows = [r for r in db.iterdump() if not r.startswith("INSERT INTO \"meta\" VALUES('store_id'")]
        out["chunks.sqlite"] = "\n".join(rows).encode("utf-8")
    return out


def test_raptor_off_leaves_every_file_byte_identical(tmp_path: Path, frozen_clock: None) -> None:
    corpus = _corpus(tmp_path / "corpus")
    ingest(corpus, tmp_path / "plain", progress=False, embedding="none")
    ingest(corpus, tmp_path / "none", progress=False, embedding="none", raptor=None)
    ingest(corpus, tmp_path / "on", progress=False, embedding="none", raptor="hashing")
    plain, none, on = (_files(tmp_path / n) for n in ("plain", "none", "on"))
    assert RAPTOR_FILE not in plain and plain == none
    assert set(on) == set(plain) | {RAPTOR_FILE}
    assert {n: b for n, b in on.items() if n != RAPTOR_FILE} == plain  # the tree touches no other file
    ingest(corpus, tmp_path / "plain", progress=False, embedding="none")
    assert _files(tmp_path / "plain") == plain


def test_raptor_file_is_deterministic_kept_by_a_plain_reingest_and_removed_when_off(
        tmp_path: Path, frozen_clock: None) -> None:
    corpus = _corpus(tmp_path / "corpus")
    for name in ("a", "b"):
        ingest(corpus, tmp_path / name, progress=False, embedding="none", raptor="hashing")
    first = (tmp_path / "a" / RAPTOR_FILE).read_bytes()
    assert first == (tmp_path / "b" / RAPTOR_FILE).read_bytes()
    summary = ingest(corpus, tmp_path / "a", progress=False, embedding="none")  # raptor=None: the store's own
    assert (tmp_path / "a" / RAPTOR_FILE).read_bytes() == first and not summary.notes
    ingest(corpus, tmp_path / "a", progress=False, embedding="none", raptor=False)
    assert not (tmp_path / "a" / RAPTOR_FILE).exists()


def test_reingest_after_a_change_reuses_the_rest_of_the_tree(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus")
    store = tmp_path / "store"
    ingest(corpus, store, progress=False, embedding="none", raptor="hashing")
    (corpus / "kyoto3.md").write_text("# Kyoto 3\n\nA ferry crosses the lake at dawn.\n", "utf-8")
    summary = ingest(corpus, store, progress=False, embedding="none")
    (note,) = [n for n in summary.notes if n.startswith("RAPTOR tree:")]
    embedded = int(note.split("(")[1].split(" texts embedded")[0])
    saved, _ = read_raptor_file(store)
    assert saved is not None
    assert 1 <= embedded < len(saved.tree.nodes)  # the changed chunk and the summaries above it, not the rest
    fresh = tmp_path / "fresh"
    ingest(corpus, fresh, progress=False, embedding="none", raptor="hashing")
    again, _ = read_raptor_file(fresh)
    assert again is not None and again.tree.to_json() == saved.tree.to_json()  # as if built at once


def test_restricted_chunks_never_reach_the_file_and_a_relabel_removes_them(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus")
    store = tmp_path / "store"
    ingest(corpus, store, progress=False, embedding="none", raptor="hashing")
    saved, _ = read_raptor_file(store)
    assert saved is not None and any(c.startswith("plan") for c in saved.tree.chunks)  # public for now
    _corpus(corpus, restricted=True)
    ingest(corpus, store, progress=False, embedding="none")
    text = (store / RAPTOR_FILE).read_text("utf-8")
    assert SECRET not in text and "plan#" not in text
    got = open_retriever(store, mode="raptor", k=30).invoke("Zetaproject budget castle walls")
    assert got and not any(d.metadata["doc_id"] == "plan" for d in got)


def test_llm_summaries_never_see_restricted_text_and_are_kept_without_the_model(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus", restricted=True)
    store = tmp_path / "store"
    spy = SpyChatModel(reply="Temples and castles of Kansai.")
    ingest(corpus, store, progress=False, embedding="none",
           raptor=RaptorBuilder("hashing", summariser=LLMSummariser(spy)))
    assert spy.prompts and not any(SECRET in p for p in spy.prompts)
    saved, _ = read_raptor_file(store)
    assert saved is not None and saved.tree.config["summariser"]["name"] == "llm"
    assert {n.text for n in saved.tree.summaries()} == {"Temples and castles of Kansai."}
    (corpus / "osaka2.md").write_text("# Osaka 2\n\nA ferry crosses the bay.\n", "utf-8")
    summary = ingest(corpus, store, progress=False, embedding="none")  # no model given: kept where unchanged
    assert any("summarised extractively" in n for n in summary.notes)
    saved, _ = read_raptor_file(store)
    assert saved is not None and saved.tree.config["summariser"]["name"] == "llm"
    assert "Temples and castles of Kansai." in {n.text for n in saved.tree.summaries()}


@pytest.mark.subprocess
def test_raptor_results_survive_a_restart(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus")
    store = tmp_path / "store"
    ingest(corpus, store, progress=False, embedding="none", raptor="hashing")
    with StoreSource(store) as source:
        here = [(d.metadata["chunk_id"], d.metadata["scores"]["fused"]) for d in source.raptor(k=5).invoke(QUESTION)]
    assert here
    code = (
        "import json, sys\n"
        "from langchain_ragspine.pipeline.sources import StoreSource\n"
        "with StoreSource(sys.argv[1]) as s:\n"
        f"    print(json.dumps([[d.metadata['chunk_id'], d.metadata['scores']['fused']] for d in s.raptor(k=5).invoke({QUESTION!r})]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(store)], capture_output=True, text=True, check=True)
    assert [tuple(x) for x in json.loads(out.stdout)] == here


def test_mode_raptor_from_a_store_and_from_documents(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus")
    store = tmp_path / "store"
    ingest(corpus, store, progress=False, embedding="none")
    with pytest.raises(StoreError, match="no RAPTOR tree"):
        open_retriever(store, mode="raptor")
    ingest(corpus, store, progress=False, embedding="none", raptor="hashing")
    got = open_retriever(store, mode="raptor", k=3, filter={"doc_id": {"$ne": "osaka1"}}).invoke(QUESTION)
    assert got and all(d.metadata["doc_id"] != "osaka1" for d in got)
    for d in got:  # verbatim slices of their sources
        text = (corpus / f"{d.metadata['doc_id']}.md").read_text("utf-8")
        assert text[d.metadata["start_index"]:d.metadata["end_index"]] == d.page_content
    from langchain_ragspine.document_loaders import CorpusLoader
    from langchain_ragspine.embeddings import HashingEmbeddings
    from langchain_ragspine.text_splitters import ParagraphTextSplitter

    chunks = ParagraphTextSplitter().split_documents(CorpusLoader(corpus).load())
    assert build_mode("raptor", DocumentsSource(chunks, embedding=HashingEmbeddings(64)), k=3).invoke(QUESTION)
    with pytest.raises(ValueError, match="embedding"):
        build_mode("raptor", DocumentsSource(chunks), k=3)


def test_a_damaged_raptor_file_is_never_used_and_ingest_removes_it(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus")
    store = tmp_path / "store"
    ingest(corpus, store, progress=False, embedding="none", raptor="hashing")
    path = store / RAPTOR_FILE
    path.write_text(path.read_text("utf-8").replace("kyoto1#0", "kyoto1#9"), "utf-8")
    with pytest.raises(StoreError, match="checksum"):
        open_retriever(store, mode="raptor")
    summary = ingest(corpus, store, progress=False, embedding="none")
    assert not path.exists() and any("removed" in n for n in summary.notes)


def test_a_tree_older_than_the_store_is_used_for_what_it_still_matches(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus")
    store = tmp_path / "store"
    ingest(corpus, store, progress=False, embedding="none", raptor="hashing")
    before = (store / RAPTOR_FILE).read_bytes()
    (corpus / "osaka1.md").write_text("# Osaka 1\n\nA ferry crosses the bay.\n", "utf-8")
    ingest(corpus, store, progress=False, embedding="none", raptor=False)
    (store / RAPTOR_FILE).write_bytes(before)  # the old tree back: it names osaka1's old chunk
    with pytest.warns(StaleIndexWarning, match="RAPTOR"), StoreSource(store) as source:
        got = source.raptor(k=30).invoke("Osaka castle stone walls")
    assert got and all("castle 1 " not in d.page_content for d in got)


def test_a_vector_store_write_withdraws_a_relabelled_chunk_from_the_raptor_file(tmp_path: Path) -> None:
    from langchain_core.documents import Document

    from langchain_ragspine.embeddings import HashingEmbeddings
    from langchain_ragspine.vectorstores import RagSpineVectorStore

    corpus = _corpus(tmp_path / "corpus")
    store = tmp_path / "store"
    ingest(corpus, store, progress=False, embedding="none", raptor="hashing")
    assert SECRET in (store / RAPTOR_FILE).read_text("utf-8") or any(
        c.startswith("plan") for c in json.loads((store / RAPTOR_FILE).read_text("utf-8"))["tree"]["chunks"])
    vs = RagSpineVectorStore(str(store), HashingEmbeddings(64))
    (old,) = vs.get_by_ids(["plan#0"])
    vs.add_documents([Document(page_content=old.page_content, metadata={**old.metadata, "sensitivity": "RESTRICTED"},
                               id=old.id)])
    text = (store / RAPTOR_FILE).read_text("utf-8")
    assert SECRET not in text and "plan#0" not in text
    saved, _ = read_raptor_file(store)  # still a valid file, the other leaves kept
    assert saved is not None and "kyoto1#0" in saved.tree.chunks
    vs.delete(["kyoto1#0"])
    saved, _ = read_raptor_file(store)
    assert saved is not None and "kyoto1#0" not in saved.tree.chunks
    assert not any("kyoto1#0" in n.members for n in saved.tree.nodes.values())


def test_postgresql_refuses_raptor_by_name() -> None:
    with pytest.raises(ValueError, match="RAPTOR tree"):
        ingest("docs/demo", "postgresql://localhost:1/none", raptor="hashing", progress=False)

    class PgLike(DocumentsSource):
        unsupported = {"RAPTOR tree": "it keeps no RAPTOR tree yet"}
        backend_name = "a PostgreSQL store"

    with pytest.raises(ValueError, match="a PostgreSQL store does not support RAPTOR tree"):
        build_mode("raptor", PgLike([]), k=3)
    from langchain_ragspine.backends.base import RAPTOR
    from langchain_ragspine.backends.postgres.chunk_store import PostgresChunkStore

    assert RAPTOR in PostgresChunkStore.unsupported


def test_the_setting_and_bad_arguments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    corpus = _corpus(tmp_path / "corpus")
    with pytest.raises(ValueError, match="unknown RAPTOR spec"):
        ingest(corpus, tmp_path / "s1", raptor="hashng", progress=False)
    with pytest.raises(TypeError, match="spec"):
        from langchain_ragspine.embeddings import HashingEmbeddings

        ingest(corpus, tmp_path / "s1", raptor=RaptorBuilder(HashingEmbeddings(8)), progress=False)
    assert not (tmp_path / "s1").exists()
    monkeypatch.setenv("RAGSPINE_RAPTOR", "hashing:32")
    ingest(corpus, tmp_path / "s2", progress=False, embedding="none")
    saved, _ = read_raptor_file(tmp_path / "s2")
    assert saved is not None and saved.tree.config["embedding"] == "hashing:32" and saved.tree.dim == 32


def test_cli_ingest_raptor(tmp_path: Path) -> None:
    from langchain_ragspine.cli import main

    corpus = _corpus(tmp_path / "corpus")
    assert main(["ingest", str(corpus), "--store", str(tmp_path / "s"), "--embedding", "none",
                 "--raptor", "hashing"]) == 0
    assert (tmp_path / "s" / RAPTOR_FILE).is_file()
    assert main(["ingest", str(corpus), "--store", str(tmp_path / "s"), "--embedding", "none",
                 "--raptor", "none"]) == 0
    assert not (tmp_path / "s" / RAPTOR_FILE).exists()
