"""The relation graph as a derived file of a store directory: off changes nothing, on survives a restart,
RESTRICTED chunks never reach it, PostgreSQL refuses it by name."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from langchain_ragspine.backends.directory import chunk_store as chunk_store_module
from langchain_ragspine.backends.directory.graph_file import GRAPH_FILE, read_graph_file
from langchain_ragspine.errors import StaleIndexWarning, StoreError
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.modes import DocumentsSource, build_mode
from langchain_ragspine.pipeline.sources import StoreSource, open_retriever
from langchain_ragspine.relations import LLMRelationExtractor
from tests.unit_tests.spy_models import SpyChatModel

QUESTION = "Which castle is near the Shinkansen to Osaka?"


def _corpus(root: Path, *, restricted: bool = False) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "kyoto.md").write_text("# Kyoto\n\nKyoto station connects to the Shinkansen line toward Osaka.\n", "utf-8")
    (root / "osaka.md").write_text("# Osaka\n\nOsaka castle stands near the Shinkansen station of Osaka.\n", "utf-8")
    (root / "tokyo.md").write_text("# Tokyo\n\nTokyo tower and the Shinkansen terminal; castle ruins.\n", "utf-8")
    label = "RESTRICTED" if restricted else "PUBLIC"
    (root / "plan.md").write_text(
        f"---\nsensitivity: {label}\ntags: [Zetaproject]\n---\n# Plan\n\nZetaproject Osaka castle Shinkansen Zetaproject.\n", "utf-8")
    return root


@pytest.fixture
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every version written at the same instant, so two ingests of one corpus write the same bytes."""
    monkeypatch.setattr(chunk_store_module, "utc_now_iso", lambda: "2026-01-01T00:00:00.000000+00:00")


def _files(root: Path) -> dict[str, bytes]:
    """Every file's bytes; ``chunks.sqlite`` as its SQL dump less its random ``store_id`` (SQLite's pages and the
    store id differ between two identical runs even without a graph: two plain ingests are compared the same way)."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file() and not p.name.startswith("chunks.sqlite"):
            out[str(p.relative_to(root))] = p.read_bytes()
    with contextlib.closing(sqlite3.connect(root / "chunks.sqlite")) as db:
        rows = [r for r in db.iterdump() if not r.startswith("INSERT INTO \"meta\" VALUES('store_id'")]
        out["chunks.sqlite"] = "\n".join(rows).encode("utf-8")
    return out


def test_graph_off_leaves_every_file_byte_identical(tmp_path: Path, frozen_clock: None) -> None:
    corpus = _corpus(tmp_path / "corpus")
    ingest(corpus, tmp_path / "plain", progress=False, embedding="none")
    ingest(corpus, tmp_path / "none", progress=False, embedding="none", graph=None)
    ingest(corpus, tmp_path / "on", progress=False, embedding="none", graph="cooccurrence")
    plain, none, on = (_files(tmp_path / n) for n in ("plain", "none", "on"))
    assert GRAPH_FILE not in plain and plain == none
    assert set(on) == set(plain) | {GRAPH_FILE}
    assert {n: b for n, b in on.items() if n != GRAPH_FILE} == plain  # the graph touches no other file
    ingest(corpus, tmp_path / "plain", progress=False, embedding="none")  # re-ingest, still off: unchanged
    assert _files(tmp_path / "plain") == plain


def test_graph_file_is_deterministic_and_kept_by_a_plain_reingest(tmp_path: Path, frozen_clock: None) -> None:
    corpus = _corpus(tmp_path / "corpus")
    for name in ("a", "b"):
        ingest(corpus, tmp_path / name, progress=False, embedding="none", graph=True)
    first = (tmp_path / "a" / GRAPH_FILE).read_bytes()
    assert first == (tmp_path / "b" / GRAPH_FILE).read_bytes()
    summary = ingest(corpus, tmp_path / "a", progress=False, embedding="none")  # graph=None: the store's own
    assert (tmp_path / "a" / GRAPH_FILE).read_bytes() == first and not summary.notes
    ingest(corpus, tmp_path / "a", progress=False, embedding="none", graph=False)
    assert not (tmp_path / "a" / GRAPH_FILE).exists()


def test_restricted_chunks_contribute_nothing_and_a_relabel_removes_their_edges(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus")
    store = tmp_path / "store"
    ingest(corpus, store, progress=False, embedding="none", graph="cooccurrence")
    saved, _ = read_graph_file(store)
    assert saved is not None
    assert "zetaproject" in saved.graph.nodes()  # public for now: plan.md's term is a node
    plan_chunks = [c for c in saved.chunks if c.startswith("plan")]
    assert plan_chunks and any(set(plan_chunks) & set(e.chunks) for e in saved.graph.edges())
    _corpus(corpus, restricted=True)  # relabel plan.md RESTRICTED and re-ingest
    ingest(corpus, store, progress=False, embedding="none")  # graph=None: the recorded extractor rebuilds it
    text = (store / GRAPH_FILE).read_text("utf-8")
    assert "zetaproject" not in text and "plan" not in json.loads(text)["chunks"].__str__()
    saved, _ = read_graph_file(store)
    assert saved is not None and not any(c.startswith("plan") for e in saved.graph.edges() for c in e.chunks)
    got = open_retriever(store, mode="graph", k=10).invoke("Zetaproject castle Osaka")
    assert got and not any(d.metadata["doc_id"].startswith("plan") for d in got)


@pytest.mark.subprocess
def test_graph_results_survive_a_restart(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus")
    store = tmp_path / "store"
    ingest(corpus, store, progress=False, embedding="none", graph="cooccurrence")
    with StoreSource(store) as source:
        here = [(d.metadata["chunk_id"], d.metadata["scores"]["fused"]) for d in source.graph(k=5).invoke(QUESTION)]
    assert here
    code = (
        "import json, sys\n"
        "from langchain_ragspine.pipeline.sources import StoreSource\n"
        "with StoreSource(sys.argv[1]) as s:\n"
        f"    print(json.dumps([[d.metadata['chunk_id'], d.metadata['scores']['fused']] for d in s.graph(k=5).invoke({QUESTION!r})]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(store)], capture_output=True, text=True, check=True)
    assert [tuple(x) for x in json.loads(out.stdout)] == here


def test_mode_graph_from_a_store_and_from_documents(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus")
    store = tmp_path / "store"
    ingest(corpus, store, progress=False, embedding="none")
    with pytest.raises(StoreError, match="no relation graph"):
        open_retriever(store, mode="graph")
    ingest(corpus, store, progress=False, embedding="none", graph="cooccurrence")
    retriever = open_retriever(store, mode="graph", k=3, filter={"doc_id": {"$ne": "osaka"}})
    got = retriever.invoke(QUESTION)
    assert got and all(d.metadata["doc_id"] != "osaka" for d in got)
    source = corpus / "kyoto.md"
    for d in got:  # verbatim slices of their sources
        if d.metadata["doc_id"] == "kyoto":
            assert source.read_text("utf-8")[d.metadata["start_index"]:d.metadata["end_index"]] == d.page_content
    from langchain_ragspine.document_loaders import CorpusLoader
    from langchain_ragspine.text_splitters import ParagraphTextSplitter

    chunks = ParagraphTextSplitter().split_documents(CorpusLoader(corpus).load())
    in_memory = build_mode("graph", DocumentsSource(chunks), k=3)
    assert in_memory.invoke(QUESTION)


def test_a_damaged_graph_file_is_never_used(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus")
    store = tmp_path / "store"
    ingest(corpus, store, progress=False, embedding="none", graph="cooccurrence")
    path = store / GRAPH_FILE
    path.write_text(path.read_text("utf-8").replace("osaka", "osakx"), "utf-8")
    with pytest.raises(StoreError, match="checksum"):
        open_retriever(store, mode="graph")
    summary = ingest(corpus, store, progress=False, embedding="none")
    assert not path.exists() and any("removed" in n for n in summary.notes)


def test_a_graph_older_than_the_store_is_rebuilt_in_memory(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus")
    store = tmp_path / "store"
    ingest(corpus, store, progress=False, embedding="none", graph="cooccurrence")
    (corpus / "kyoto.md").write_text("# Kyoto\n\nKyoto temples only.\n", "utf-8")
    path = store / GRAPH_FILE
    before = path.read_bytes()
    ingest(corpus, store, progress=False, embedding="none", graph=False)
    path.write_bytes(before)  # put the old graph back: it names kyoto's old chunk
    with pytest.warns(StaleIndexWarning, match="relation graph"), StoreSource(store) as source:
        got = source.graph(k=5).invoke("Kyoto station Shinkansen")
    assert all("Kyoto station" not in d.page_content for d in got)


def test_llm_extractor_is_incremental_and_never_sees_restricted_text(tmp_path: Path) -> None:
    corpus = _corpus(tmp_path / "corpus", restricted=True)
    store = tmp_path / "store"
    spy = SpyChatModel(reply="Osaka castle | near | Shinkansen")
    ingest(corpus, store, progress=False, embedding="none", graph=LLMRelationExtractor(spy))
    assert len(spy.prompts) == 3 and not any("Zetaproject" in p for p in spy.prompts)
    spy.prompts.clear()
    (corpus / "tokyo.md").write_text("# Tokyo\n\nTokyo tower only.\n", "utf-8")
    ingest(corpus, store, progress=False, embedding="none", graph=LLMRelationExtractor(spy))
    assert len(spy.prompts) == 1 and "Tokyo tower only." in spy.prompts[0]  # only the changed chunk is asked
    (corpus / "kyoto.md").write_text("# Kyoto\n\nKyoto temples.\n", "utf-8")
    summary = ingest(corpus, store, progress=False, embedding="none")  # no model given: kept, pruned, noted
    assert any("1 new or changed chunks have no relations" in n for n in summary.notes)
    saved, _ = read_graph_file(store)
    assert saved is not None and saved.extractor["name"] == "llm"
    assert not any(c.startswith("kyoto") for c in saved.chunks)
    got = open_retriever(store, mode="graph", k=5).invoke("osaka castle")
    assert got and not any(d.metadata["doc_id"] == "plan" for d in got)


def test_postgresql_refuses_the_graph_by_name() -> None:
    with pytest.raises(ValueError, match="relation graph"):
        ingest("docs/demo", "postgresql://localhost:1/none", graph="cooccurrence", progress=False)

    class PgLike(DocumentsSource):
        unsupported = {"relation graph": "it keeps no relation graph yet"}
        backend_name = "a PostgreSQL store"

    with pytest.raises(ValueError, match="relation graph"):
        build_mode("graph", PgLike([]), k=3)


def test_unknown_extractor_is_refused_before_the_store_is_touched(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown relation extractor"):
        ingest(_corpus(tmp_path / "corpus"), tmp_path / "store", graph="triples", progress=False)
    assert not (tmp_path / "store").exists()


def test_a_vector_store_write_withdraws_a_relabelled_chunk_from_the_graph_file(tmp_path: Path) -> None:
    """Regression (review of the i28-graph branch): a write that is not an ingest — the vector store's — relabelled
    a chunk RESTRICTED or retracted it, and ``graph.json`` kept its entities and edges on disk until the next ingest
    (search never used them, but a derived file must never hold them)."""
    from langchain_core.documents import Document

    from langchain_ragspine.embeddings import HashingEmbeddings
    from langchain_ragspine.vectorstores import RagSpineVectorStore

    corpus = _corpus(tmp_path / "corpus")
    store = tmp_path / "store"
    ingest(corpus, store, progress=False, embedding="none", graph="cooccurrence")
    saved, _ = read_graph_file(store)
    assert saved is not None and "zetaproject" in saved.graph.nodes()
    plan = [c for c in saved.chunks if c.startswith("plan")]
    vs = RagSpineVectorStore(str(store), HashingEmbeddings(64))
    (old,) = vs.get_by_ids(plan[:1])
    vs.add_documents([Document(page_content=old.page_content, metadata={**old.metadata, "sensitivity": "RESTRICTED"},
                               id=old.id)])
    text = (store / GRAPH_FILE).read_text("utf-8")
    assert "zetaproject" not in text.lower() and plan[0] not in json.loads(text)["chunks"]
    saved, _ = read_graph_file(store)  # still a valid file, the other chunks' extractions kept
    assert saved is not None and saved.chunks and "osaka" in saved.graph.nodes()
    kyoto = [c for c in saved.chunks if c.startswith("kyoto")]
    vs.delete(kyoto)
    saved, _ = read_graph_file(store)
    assert saved is not None and not set(kyoto) & set(saved.chunks)
    assert not any(set(kyoto) & set(e.chunks) for e in saved.graph.edges())


def test_ragspine_relation_graph_switches_the_graph_on(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 28, part 5: the relation graph has one setting, RAGSPINE_RELATION_GRAPH (graph= wins)."""
    corpus = _corpus(tmp_path / "corpus")
    monkeypatch.setenv("RAGSPINE_RELATION_GRAPH", "Cooccurrence")
    ingest(corpus, tmp_path / "on", progress=False, embedding="none")
    assert (tmp_path / "on" / GRAPH_FILE).is_file()
    ingest(corpus, tmp_path / "off", progress=False, embedding="none", graph=False)
    assert not (tmp_path / "off" / GRAPH_FILE).exists()
    monkeypatch.setenv("RAGSPINE_RELATION_GRAPH", "llm")
    with pytest.raises(ValueError, match="RAGSPINE_RELATION_GRAPH='llm': unknown relation extractor"):
        ingest(corpus, tmp_path / "bad", progress=False, embedding="none")
    assert not (tmp_path / "bad").exists()


def test_the_cli_builds_the_graph_and_none_switches_it_off(tmp_path: Path) -> None:
    """Trial of 2751fdc: the README named a CLI for the relation graph, but `ragspine ingest --graph` did not exist
    (the refusals and the mode's message pointed at it), and ingest(graph="none") was an unknown extractor."""
    from langchain_ragspine.cli import main

    corpus = _corpus(tmp_path / "corpus")
    store = tmp_path / "store"
    assert main(["ingest", str(corpus), "--store", str(store), "--embedding", "none", "--graph", "cooccurrence"]) == 0
    assert (store / GRAPH_FILE).is_file()
    assert open_retriever(store, mode="graph", k=3).invoke(QUESTION)
    ingest(corpus, store, progress=False, embedding="none", graph="none")
    assert not (store / GRAPH_FILE).exists()


def test_a_mode_a_postgresql_store_lacks_is_refused_before_connecting() -> None:
    """Trial of 2751fdc: open_retriever(<postgresql url>, mode="sparse" | "graph") connected first and failed with
    a connection error instead of the named refusal."""
    url = "postgresql://u@127.0.0.1:9/none"  # nothing listens there: a connection attempt would fail otherwise
    with pytest.raises(ValueError, match="a PostgreSQL store does not support learned sparse retrieval"):
        open_retriever(url, mode="sparse")
    with pytest.raises(ValueError, match="a PostgreSQL store does not support relation graph"):
        open_retriever(url, mode="graph")
    with pytest.raises(ValueError, match="a PostgreSQL store does not support RAPTOR tree"):
        open_retriever(url, mode="raptor")


def test_contextual_takes_a_bool_not_a_word(tmp_path: Path) -> None:
    """Trial of 2751fdc: ingest(contextual="off") (any non-empty string) switched the headers on."""
    with pytest.raises(TypeError, match="contextual takes True, False or None"):
        ingest(_corpus(tmp_path / "corpus"), tmp_path / "store", progress=False, embedding="none", contextual="off")  # type: ignore[arg-type]
    assert not (tmp_path / "store").exists()
