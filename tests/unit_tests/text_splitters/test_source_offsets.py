"""Issue 9 §1: chunk offsets and source locators index the file a reader opens (see document_loaders.locators)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from langchain_ragspine.backends.directory.chunk_store import ChunkStore
from langchain_ragspine.backends.directory.layout import CHUNKS_DB
from langchain_ragspine.document_loaders import (
    CorpusLoader,
    LoaderWarning,
    SourceLocator,
    parse_source_locator,
    read_source_text,
    resolve_source_locator,
)
from langchain_ragspine.errors import LoaderError
from langchain_ragspine.evaluation import evaluate, load_dataset
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.retrievers import BM25Retriever
from langchain_ragspine.text_splitters import ParagraphTextSplitter


def _load_and_split(paths, splitter: ParagraphTextSplitter | None = None) -> list[Document]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LoaderWarning)
        docs = CorpusLoader(paths).load()
    return (splitter or ParagraphTextSplitter(chunk_size=40, chunk_overlap=10)).split_documents(docs)


def _assert_chunks_resolve(chunks: list[Document], root: Path) -> None:
    assert chunks
    for c in chunks:
        md = c.metadata
        s, e = md["start_index"], md["end_index"]
        assert md["source_locator"] == f"{md['source']}#{s}-{e}"
        assert resolve_source_locator(md["source_locator"], root) == c.page_content
        if md.get("line") is None:
            assert read_source_text(root / md["source"])[s:e] == c.page_content


def test_front_matter_offsets_point_past_the_front_matter(tmp_path: Path) -> None:
    # the case: 3 lines of front matter, and `fm.md#0-19` pointed at the front matter
    text = "---\ntitle: FM\n---\nThe body starts here.\n\nSecond paragraph of the body.\n"
    (tmp_path / "fm.md").write_text(text, "utf-8")
    chunks = _load_and_split(tmp_path, ParagraphTextSplitter(chunk_size=25, chunk_overlap=0))
    assert chunks[0].metadata["source_locator"] == "fm.md#18-39"
    assert text[18:39] == "The body starts here." == chunks[0].page_content
    assert chunks[0].metadata["body_offset"] == 18
    _assert_chunks_resolve(chunks, tmp_path)


@pytest.mark.parametrize(
    "name, raw",
    [
        ("bom.md", "\ufeff# 見出し\n\n本文の一段落目です。\n\n二段落目。"),
        ("crlf.md", "# Title\r\n\r\nFirst paragraph line one\r\nline two.\r\n\r\nSecond paragraph.\r\n"),
        ("all.md", "\ufeff---\r\ntitle: 全部\r\ntags: [a, b]\r\n---\r\n本文です。\r\n\r\n二段落目の本文。\r\n"),
        ("plain.txt", "A plain text file.\n\nIts second paragraph, with émoji 👍🏽 and e\u0301.\n"),
        ("empty-fm.md", "---\n---\n梅雨は雨季である。\n"),
    ],
)
@pytest.mark.parametrize("sidecar", [False, True])
def test_every_loader_path_resolves(tmp_path: Path, name: str, raw: str, sidecar: bool) -> None:
    path = tmp_path / name
    path.write_bytes(raw.encode("utf-8"))
    if sidecar:
        path.with_suffix(".json").write_text(json.dumps({"sensitivity": "PUBLIC", "title": "side"}), "utf-8")
    chunks = _load_and_split(path, ParagraphTextSplitter(chunk_size=20, chunk_overlap=5))
    _assert_chunks_resolve(chunks, tmp_path)
    assert not any(c.page_content.startswith("\ufeff") or "title:" in c.page_content for c in chunks)


def test_jsonl_locator_names_the_line_and_offsets_in_its_text(tmp_path: Path) -> None:
    text_2 = 'Line "two"\nhas escapes: \u3042 and 👍, then a second sentence that is long enough to split.'
    lines = [
        json.dumps({"id": "one", "text": "first document"}),
        json.dumps({"id": "two", "text": text_2, "body_offset": 7}),  # reserved: dropped, not applied
    ]
    path = tmp_path / "c.jsonl"
    path.write_text("\ufeff" + "\n".join(lines) + "\n", "utf-8")
    chunks = _load_and_split(path, ParagraphTextSplitter(chunk_size=40, chunk_overlap=10))
    two = [c for c in chunks if c.metadata["doc_id"] == "two"]
    assert len(two) > 1
    for c in two:
        md = c.metadata
        assert md["source"] == "c.jsonl:2" and "body_offset" not in md
        assert md["source_locator"] == f"c.jsonl:2#{md['start_index']}-{md['end_index']}"
        assert text_2[md["start_index"] : md["end_index"]] == c.page_content
    assert two[0].metadata["start_index"] == 0
    _assert_chunks_resolve(chunks, tmp_path)


def test_parse_source_locator() -> None:
    assert parse_source_locator("laws/a#b.md#3-10") == SourceLocator("laws/a#b.md", None, 3, 10)
    loc = parse_source_locator("data/c.JSONL:12#0-5")
    assert (loc.path, loc.line, loc.start, loc.end, loc.source) == ("data/c.JSONL", 12, 0, 5, "data/c.JSONL:12")
    assert str(loc) == "data/c.JSONL:12#0-5"
    assert parse_source_locator("notes:3.md#1-2").line is None  # only .jsonl sources name a line
    for bad in ("a.md", "a.md#5", "a.md#x-3", "#1-2", "a.md#5-3"):
        with pytest.raises(ValueError):
            parse_source_locator(bad)
    with pytest.raises(TypeError):
        parse_source_locator(None)  # type: ignore[arg-type]


def test_resolve_source_locator_errors(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("short", "utf-8")
    (tmp_path / "c.jsonl").write_text('{"text": "x"}\n[1]\n', "utf-8")
    assert resolve_source_locator("a.md#0-5", tmp_path) == "short"
    with pytest.raises(ValueError, match="past the file"):
        resolve_source_locator("a.md#0-6", tmp_path)
    with pytest.raises(ValueError, match="relative"):
        resolve_source_locator("../a.md#0-1", tmp_path / "sub")
    with pytest.raises(FileNotFoundError):
        resolve_source_locator("missing.md#0-1", tmp_path)
    with pytest.raises(LoaderError, match="'text'"):
        resolve_source_locator("c.jsonl:2#0-1", tmp_path)
    with pytest.raises(LoaderError, match=r"no line 9 \(the file has 2\)"):  # trial 25c: it said 3
        resolve_source_locator("c.jsonl:9#0-1", tmp_path)
    with pytest.raises(LoaderError, match=r"no line 3 \(the file has 2\)"):
        resolve_source_locator("c.jsonl:3#0-1", tmp_path)
    with pytest.raises(ValueError, match="line numbers of a JSONL file start at 1, got 0"):  # trial 25c: a raw
        resolve_source_locator("c.jsonl:0#0-1", tmp_path)  # FileNotFoundError for 'c.jsonl:0'


def test_splitter_applies_body_offset_and_checks_it() -> None:
    sp = ParagraphTextSplitter(chunk_size=20, chunk_overlap=0)
    docs = sp.create_documents(["body text"], [{"doc_id": "d", "source": "d.md", "body_offset": 7}])
    assert docs[0].metadata["start_index"] == 7 and docs[0].metadata["source_locator"] == "d.md#7-16"
    for bad in (-1, "7", True, 1.5):
        with pytest.raises(ValueError, match="body_offset"):
            sp.create_documents(["body"], [{"doc_id": "d", "body_offset": bad}])


# -- hypothesis: generated files, every chunk resolves --------------------------------------------------------------

_PIECES = ["梅雨", "は", "雨季", "である", "。", "中文", "，", "the", "rainy", "season", " ", ".", "👍🏽", "🇯🇵",
           "👨\u200d👩\u200d👧", "e\u0301", "a\u0308", "、", "「", "」", "#", "-"]
_line = st.lists(st.sampled_from(_PIECES), min_size=1, max_size=12).map("".join)
_body_lines = st.lists(st.one_of(_line, st.just("")), min_size=1, max_size=12)


@st.composite
def corpus_files(draw: st.DrawFn) -> tuple[str, bytes, dict | None]:
    """``(file name, file bytes, sidecar or None)`` with BOM or not, CRLF / LF / mixed newlines, front matter or not."""
    newline = draw(st.sampled_from(["\n", "\r\n", "mixed"]))

    def nl() -> str:
        return draw(st.sampled_from(["\n", "\r\n"])) if newline == "mixed" else newline

    lines = draw(_body_lines)
    body = "".join(line + nl() for line in lines[:-1]) + lines[-1] + draw(st.sampled_from(["", nl()]))
    front = ""
    if draw(st.booleans()):
        title = draw(st.sampled_from(["梅雨", "Rainy season", "'引用: 句'"]))
        front = f"---{nl()}title: {title}{nl()}lang: ja{nl()}---{nl()}"
    bom = "\ufeff" if draw(st.booleans()) else ""
    name = draw(st.sampled_from(["doc.md", "doc.txt", "sub/doc.markdown"]))
    sidecar = {"sensitivity": "PUBLIC", "source_note": "s"} if draw(st.booleans()) else None
    return name, (bom + front + body).encode("utf-8"), sidecar


def _write_corpus(root: Path, files: list[tuple[str, bytes, dict | None]]) -> None:
    for i, (name, data, sidecar) in enumerate(files):
        path = root / f"{i}-{name}"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        if sidecar is not None:
            path.with_suffix(".json").write_text(json.dumps(sidecar), "utf-8")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=st.lists(corpus_files(), min_size=1, max_size=3), size=st.integers(8, 60))
def test_property_loaded_chunks_slice_the_file(tmp_path_factory, files, size) -> None:
    root = tmp_path_factory.mktemp("corpus")
    _write_corpus(root, files)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LoaderWarning)
        docs = CorpusLoader(root).load()
    chunks = ParagraphTextSplitter(chunk_size=size, chunk_overlap=size // 4).split_documents(docs)
    for c in chunks:
        s, e = c.metadata["start_index"], c.metadata["end_index"]
        with open(root / c.metadata["source"], encoding="utf-8", newline="") as f:
            assert f.read()[s:e] == c.page_content
        assert resolve_source_locator(c.metadata["source_locator"], root) == c.page_content


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(files=st.lists(corpus_files(), min_size=1, max_size=3))
def test_property_ingested_chunks_slice_the_file(tmp_path_factory, files) -> None:
    root = tmp_path_factory.mktemp("corpus")
    _write_corpus(root, files)
    store = tmp_path_factory.mktemp("store")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LoaderWarning)
        ingest(root, store, chunk_size=30, chunk_overlap=8, mode="bm25", progress=False)
    with ChunkStore(store / CHUNKS_DB, read_only=True) as cs:
        rows = list(cs.iter_chunks())
    for row in rows:
        assert read_source_text(root / row.metadata["source"])[row.start_index : row.end_index] == row.text
        assert resolve_source_locator(row.source_locator, root) == row.text


# -- migration: a store written with body-relative offsets ----------------------------------------------------------


def test_reingest_over_body_relative_offsets_gives_new_versions_that_resolve(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "fm.md").write_text("---\ntitle: 梅雨\n---\n梅雨は雨季である。\n\n北海道には梅雨がない。\n", "utf-8")
    (corpus / "plain.md").write_text("# 京都\n\n京都の観光名所は清水寺である。\n", "utf-8")
    store = tmp_path / "store"
    ingest(corpus, store, mode="bm25", progress=False)
    # what a store written before offsets indexed the file holds: the same chunks, offsets relative to the body
    fm = next(d for d in CorpusLoader(corpus).load() if d.id == "fm")
    del fm.metadata["body_offset"]
    old = ParagraphTextSplitter().split_documents([fm])
    assert old[0].metadata["source_locator"] == "fm.md#0-22"  # the front matter and the start of the body
    assert resolve_source_locator(old[0].metadata["source_locator"], corpus) != old[0].page_content
    with ChunkStore(store / CHUNKS_DB) as cs:
        cs.replace_doc_chunks("fm", old)
    summary = ingest(corpus, store, mode="bm25", progress=False)
    assert (summary.changed, summary.unchanged, summary.new) == (1, 1, 0)
    with ChunkStore(store / CHUNKS_DB, read_only=True) as cs:
        rows = list(cs.iter_chunks())
    assert {r.doc_id for r in rows} == {"fm", "plain"}
    for row in rows:
        assert resolve_source_locator(row.source_locator, corpus) == row.text


# -- the evaluation runner maps file offsets back into the document ------------------------------------------------


def _qa_dir(root: Path, front_matter: bool) -> Path:
    docs = {
        "alpha": "# Alpha\n\nThe zebra lives in Kenya.\n\nThe falcon flies over Quito.\n",
        "beta": "# Beta\n\nThe falcon nests in sunny Lima.\n\nThe walrus swims near Oslo.\n",
    }
    (root / "docs").mkdir(parents=True)
    for doc_id, text in docs.items():
        head = "\ufeff---\ntitle: a long front matter title that shifts every offset\n---\n" if front_matter else ""
        (root / "docs" / f"{doc_id}.md").write_text(head + text, "utf-8")
    questions = [
        {"id": "q1", "question": "zebra", "answers": ["Kenya"], "doc_id": "alpha", "paragraph": 0},
        {"id": "q2", "question": "walrus", "answers": ["Oslo"], "doc_id": "beta", "paragraph": 1},
    ]
    (root / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions), "utf-8")
    beir = root / "beir"
    beir.mkdir()
    corpus = [{"_id": f"{d}-p{n}", "title": d, "text": p.strip()} for d, t in docs.items() for n, p in
              enumerate(t.split("\n\n")[1:])]
    (beir / "corpus.jsonl").write_text("".join(json.dumps(c) + "\n" for c in corpus), "utf-8")
    (beir / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q["id"], "text": q["question"]}) + "\n" for q in questions), "utf-8"
    )
    (beir / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\talpha-p0\t1\nq2\tbeta-p1\t1\n", "utf-8")
    return root


def test_paragraph_metrics_ignore_front_matter(tmp_path: Path) -> None:
    results = []
    for fm in (False, True):
        ds = load_dataset(_qa_dir(tmp_path / str(fm), fm))
        results.append(
            evaluate(
                lambda c: BM25Retriever.from_documents(c, tokenizer="whitespace"),
                ds,
                ks=(1, 2),
                splitter=ParagraphTextSplitter(chunk_size=40, chunk_overlap=0),
                progress=False,
            ).aggregate
        )
    assert results[0] == results[1]
    assert results[0]["ndcg@10"] == 1.0
