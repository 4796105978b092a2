"""`ingest(..., contextual=True)` / `ragspine ingest --contextual`: contextual headers applied at ingest, recorded in
index.json so every search path indexes the same way; page_content, offsets and citations unchanged; a changed
setting rebuilds the indexes (with a note); every chunk is embedded once, by the text it is indexed by."""

import json
import shutil
import warnings
from pathlib import Path

import pytest

from langchain_ragspine.backends.directory.layout import BM25_DIR, INDEX_STATE
from langchain_ragspine.cli import main
from langchain_ragspine.errors import StaleIndexWarning
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.sources import StoreSource, open_retriever, search
from tests.unit_tests.retrievers.test_dense import CountingEmbeddings

SECRET = "SECRET-MARKER-55"
#: The Eiffel chunk never names its subject: only the title (front matter) does.
EIFFEL = "It was completed in 1889 for the World's Fair. Gustave's company designed and built it in two years."


@pytest.fixture(autouse=True)
def _clean_settings(monkeypatch, tmp_path):
    for name in ("RAGSPINE_EMBEDDING", "RAGSPINE_RETRIEVAL_MODE", "RAGSPINE_K", "RAGSPINE_TOKENIZER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "eiffel.md").write_text(f"---\ntitle: Eiffel Tower\n---\n{EIFFEL}\n", "utf-8")
    (root / "bridge.md").write_text("---\ntitle: Golden Gate\n---\nThe bridge opened in 1937 in San Francisco.\n", "utf-8")
    (root / "tower.md").write_text("---\ntitle: Tokyo Tower\n---\nA tower in Minato, completed in 1958.\n", "utf-8")
    (root / "keys.md").write_text(f"---\ntitle: Eiffel keys\nsensitivity: restricted\n---\n{SECRET} 1889\n", "utf-8")
    return root


def _lineage(docs):
    keys = ("doc_id", "chunk_id", "source_locator", "start_index", "end_index", "title", "sensitivity")
    return sorted((d.page_content, *(d.metadata.get(k) for k in keys)) for d in docs)


def test_contextual_ingest_finds_the_chunk_by_its_title_and_keeps_text_and_citations(corpus, tmp_path):
    ingest(corpus, tmp_path / "plain", embedding="none")
    ingest(corpus, tmp_path / "ctx", embedding="none", contextual=True)
    plain = search(open_retriever(tmp_path / "plain", mode="bm25"), "Eiffel", k=3)
    ctx = search(open_retriever(tmp_path / "ctx", mode="bm25"), "Eiffel", k=3)
    assert "eiffel" not in {d.metadata["doc_id"] for d in plain}
    assert ctx[0].metadata["doc_id"] == "eiffel" and ctx[0].page_content == EIFFEL
    assert ctx[0].metadata["index_text"] == "Eiffel Tower\n\n" + ctx[0].page_content
    assert SECRET not in json.dumps([d.metadata for d in ctx], default=str)
    # the same chunks, texts, offsets and citations either way
    with StoreSource(tmp_path / "plain") as a, StoreSource(tmp_path / "ctx") as b:
        assert _lineage(a.documents()) == _lineage(b.documents())
        text = (corpus / "eiffel.md").read_text("utf-8")
        for d in b.documents():
            if d.metadata["doc_id"] == "eiffel":
                assert text[d.metadata["start_index"]:d.metadata["end_index"]] == d.page_content
    state = json.loads((tmp_path / "ctx" / INDEX_STATE).read_text("utf-8"))
    assert state["contextual"]["fields"][0] == "title"
    assert "contextual" not in json.loads((tmp_path / "plain" / INDEX_STATE).read_text("utf-8"))


def test_contextual_off_writes_the_same_index_state_and_results_as_before(corpus, tmp_path):
    ingest(corpus, tmp_path / "a", embedding="hashing")
    ingest(corpus, tmp_path / "b", embedding="hashing", contextual=False)
    state_a = json.loads((tmp_path / "a" / INDEX_STATE).read_text("utf-8"))
    state_b = json.loads((tmp_path / "b" / INDEX_STATE).read_text("utf-8"))
    assert state_a == state_b and "contextual" not in state_a and "contextual" not in state_a["vector"]
    for query in ("Eiffel", "completed 1889", "bridge"):
        ra = search(open_retriever(tmp_path / "a"), query, k=3)
        rb = search(open_retriever(tmp_path / "b"), query, k=3)
        def strip(docs):
            return [(d.page_content, {k: v for k, v in d.metadata.items() if k != "ingested_at"}) for d in docs]

        assert strip(ra) == strip(rb)
        assert all("index_text" not in d.metadata for d in ra)


def test_every_chunk_is_embedded_once_by_its_index_text(corpus, tmp_path):
    emb = CountingEmbeddings()
    summary = ingest(corpus, tmp_path / "S", embedding=emb, contextual=True)
    # 3 documents of one chunk each; the RESTRICTED one is never embedded
    assert summary.embedded == 3 and len(emb.embedded) == 3
    assert sorted(t.split("\n\n")[0] for t in emb.embedded) == ["Eiffel Tower", "Golden Gate", "Tokyo Tower"]
    again = ingest(corpus, tmp_path / "S", embedding=emb)  # the store's setting is kept: nothing to embed
    assert again.embedded == 0 and len(emb.embedded) == 3 and not again.index_rebuilt
    state = json.loads((tmp_path / "S" / INDEX_STATE).read_text("utf-8"))
    assert state["contextual"] == state["vector"]["contextual"]
    dense = search(open_retriever(tmp_path / "S", mode="vector", embedding=emb), "Eiffel Tower", k=3)
    assert len(emb.embedded) == 3 and dense  # the saved vector index is used: search embeds no chunk


def test_changing_the_setting_rebuilds_the_indexes_and_says_so(corpus, tmp_path):
    store = tmp_path / "S"
    ingest(corpus, store, embedding="none", contextual=True)
    assert search(open_retriever(store, mode="bm25"), "Eiffel", k=1)[0].metadata["doc_id"] == "eiffel"
    off = ingest(corpus, store, embedding="none", contextual=False)
    assert off.index_rebuilt and off.unchanged == 4 and off.changed == 0
    assert any("contextual headers switched off" in n and "rebuilt" in n for n in off.notes)
    assert "contextual" not in json.loads((store / INDEX_STATE).read_text("utf-8"))
    assert "eiffel" not in {d.metadata["doc_id"] for d in search(open_retriever(store, mode="bm25"), "Eiffel", k=3)}
    on = ingest(corpus, store, embedding="none", contextual=True)
    assert on.index_rebuilt and any("switched on" in n for n in on.notes)
    first = ingest(corpus, tmp_path / "new", embedding="none", contextual=True)
    assert not any("switched" in n for n in first.notes)  # a new store has nothing to switch


def test_every_read_path_indexes_with_the_recorded_headers(corpus, tmp_path):
    store = tmp_path / "S"
    ingest(corpus, store, embedding="none", contextual=True)
    with StoreSource(store) as source:  # eval's tokenizer comparison builds BM25 in memory
        assert source.bm25(k=1, tokenizer="whitespace").invoke("Eiffel")[0].metadata["doc_id"] == "eiffel"
    shutil.rmtree(store / BM25_DIR)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rebuilt = search(open_retriever(store, mode="bm25"), "Eiffel", k=1)
    assert any(issubclass(w.category, StaleIndexWarning) for w in caught)
    assert rebuilt[0].metadata["doc_id"] == "eiffel"


def test_cli_ingest_contextual_then_search(corpus, tmp_path, capsys):
    store = str(tmp_path / "S")
    assert main(["ingest", str(corpus), "--store", store, "--embedding", "none", "--contextual"]) == 0
    capsys.readouterr()
    assert main(["search", "Eiffel", "--store", store, "-k", "1", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["doc_id"] == "eiffel" and record["text"] == EIFFEL
    assert record["source_locator"].startswith("eiffel.md#")
    assert main(["ingest", str(corpus), "--store", store, "--embedding", "none", "--no-contextual"]) == 0
    assert "contextual headers switched off" in capsys.readouterr().err


# -- `--chunker laws --contextual` (and every heading chunker) indexes the heading path (issue 27 §3) -----------------
#: 賃金 (wages) is named by a heading only, never in the text of the last chunk (第四条 / the second paragraph).
STATUTE = ("---\ntitle: Labour Standards Act\n---\n第一章 総則\n\n第一条 この法律は、労働者の保護を目的とする。\n\n"
           "第二章 賃金\n\n第三条 使用者は、毎月一回以上、一定の期日を定めて支払わなければならない。\n\n"
           "第四条 使用者は、労働者が女性であることを理由として、男性と差別的取扱いをしてはならない。\n")
MARKDOWN = ("---\ntitle: Labour Standards Act\n---\n# 労働基準法\n\n## 賃金\n\n"
            "使用者は、毎月一回以上、一定の期日を定めて支払わなければならない。"
            "使用者は、労働者が女性であることを理由として、男性と差別的取扱いをしてはならない。\n")
#: Which text each heading chunker finds headings in (the statute presets read 第N章; the others Markdown).
HEADED = {"laws": STATUTE, "book": STATUTE, "layout": MARKDOWN, "qa": MARKDOWN, "parent_child": MARKDOWN}
SMALL = ["--chunk-size", "60", "--chunk-overlap", "0"]


def _corpus_of(tmp_path: Path, text: str) -> Path:
    root = tmp_path / "laws"
    root.mkdir()
    (root / "labour.md").write_text(text, "utf-8")
    return root


@pytest.mark.parametrize("chunker", sorted(HEADED))
def test_cli_ingest_with_a_heading_chunker_and_contextual_finds_a_chunk_by_its_heading(tmp_path, capsys, chunker):
    store = str(tmp_path / "S")
    corpus = _corpus_of(tmp_path, HEADED[chunker])
    assert main(["ingest", str(corpus), "--store", store, "--embedding", "none", "--chunker", chunker,
                 "--contextual", *SMALL]) == 0
    capsys.readouterr()
    with StoreSource(store) as source:
        docs = source.bm25(k=50).docs
    assert all(d.metadata.get("heading") for d in docs)
    for d in docs:
        assert d.metadata["index_text"].startswith("Labour Standards Act · " + " > ".join(d.metadata["heading"]))
    (last,) = [d for d in docs if "女性" in d.page_content]
    assert "賃金" not in last.page_content and "賃金" in " ".join(last.metadata["heading"])
    found = search(open_retriever(store, mode="bm25"), "賃金", k=5)  # was: title-only headers, never found
    assert last.page_content in [d.page_content for d in found]
    assert all(d.metadata["source_locator"].startswith("labour.md#") for d in found)


def test_a_store_with_the_old_header_fields_is_rebuilt_with_the_heading_on_the_next_contextual_ingest(tmp_path):
    store, corpus = tmp_path / "S", _corpus_of(tmp_path, STATUTE)
    kw = {"embedding": "none", "chunker": "laws", "chunk_size": 60, "chunk_overlap": 0}
    ingest(corpus, store, contextual=True, **kw)
    state = json.loads((store / INDEX_STATE).read_text("utf-8"))
    old = [f for f in state["contextual"]["fields"] if f != "heading"]  # what a store ingested before recorded
    state["contextual"]["fields"] = old
    (store / INDEX_STATE).write_text(json.dumps(state), "utf-8")
    kept = ingest(corpus, store, **kw)  # no --contextual: the store's own record is kept
    assert json.loads((store / INDEX_STATE).read_text("utf-8"))["contextual"]["fields"] == old
    assert not any("contextual" in n for n in kept.notes)
    again = ingest(corpus, store, contextual=True, **kw)
    assert again.index_rebuilt
    assert any(n.startswith("contextual headers changed: the BM25 index was rebuilt") for n in again.notes)
    assert "heading" in json.loads((store / INDEX_STATE).read_text("utf-8"))["contextual"]["fields"]
    found = search(open_retriever(store, mode="bm25"), "賃金", k=5)
    assert any("女性" in d.page_content for d in found)
