"""End-to-end tests of ingest/search (Python API and the `ragspine` CLI) on small corpora built in tmp_path."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from langchain_ragspine.backends.directory.chunk_store import ChunkStore
from langchain_ragspine.backends.directory.layout import BM25_DIR
from langchain_ragspine.cli import DEMO_QUESTIONS, demo_corpus_dir, main
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.sources import open_retriever, search

SECRET = "SECRET-MARKER-42"


def _write(path: Path, text: str, **sidecar) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")
    if sidecar:
        path.with_suffix(".json").write_text(json.dumps(sidecar, ensure_ascii=False), "utf-8")


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    _write(root / "tsuyu.md", "# 梅雨\n\n梅雨は北海道と小笠原諸島を除く日本で見られる雨季である。\n\n梅雨前線が停滞する。", lang="ja", year=2020)
    _write(root / "kyoto.md", "# 京都\n\n京都の観光名所は清水寺と金閣寺である。", lang="ja", year=2024)
    _write(root / "keys.md", f"# 鍵\n\n梅雨の時期の鍵交換手順。{SECRET} 梅雨 梅雨 北海道", sensitivity="restricted", lang="ja")
    _write(root / "en.md", "# Rainy season\n\nThe rainy season in Japan is called tsuyu.", lang="en", year=2022)
    return root


def test_ingest_then_search(corpus: Path, tmp_path: Path):
    store = tmp_path / "store"
    s = ingest(corpus, store)
    assert (s.documents, s.new, s.changed, s.unchanged, s.retracted) == (4, 4, 0, 0, 0)
    assert s.index_rebuilt and (store / BM25_DIR).is_dir()
    res = search(open_retriever(store), "日本で梅雨がないのは北海道とどこか", k=2)
    # the RESTRICTED chunk would rank 2nd; it is not in the index at all, so k is filled with public chunks
    assert [d.metadata["doc_id"] for d in res] == ["tsuyu", "kyoto"]
    assert all(SECRET not in d.page_content for d in res)


def test_reingest_unchanged_corpus_changes_nothing(corpus: Path, tmp_path: Path):
    store = tmp_path / "store"
    ingest(corpus, store)
    with ChunkStore(store / "chunks.sqlite", read_only=True) as cs:
        gen = cs.generation
    mtimes = {p: p.stat().st_mtime_ns for p in (store / BM25_DIR).rglob("*")}
    s = ingest(corpus, store)
    assert (s.new, s.changed, s.unchanged, s.retracted, s.index_rebuilt) == (0, 0, 4, 0, False)
    with ChunkStore(store / "chunks.sqlite", read_only=True) as cs:
        assert cs.generation == gen
    assert {p: p.stat().st_mtime_ns for p in (store / BM25_DIR).rglob("*")} == mtimes


def test_changed_and_removed_documents(corpus: Path, tmp_path: Path):
    store = tmp_path / "store"
    ingest(corpus, store)
    (corpus / "kyoto.md").write_text("# 京都\n\n京都の名所は伏見稲荷大社である。", "utf-8")
    (corpus / "en.md").unlink()
    s = ingest(corpus, store)
    assert (s.new, s.changed, s.unchanged, s.retracted) == (0, 1, 2, 1)
    r = open_retriever(store)
    assert search(r, "伏見稲荷")[0].metadata["doc_id"] == "kyoto"
    assert search(r, "清水寺") == []  # the old version is inactive
    assert search(r, "rainy season tsuyu") == []  # retracted
    with ChunkStore(store / "chunks.sqlite", read_only=True) as cs:
        assert cs.current_version("kyoto") == 2
    (corpus / "en.md").write_text("# Rainy season\n\nBack again: tsuyu.", "utf-8")
    s = ingest(corpus, store)
    assert (s.new, s.retracted) == (1, 0)
    assert search(open_retriever(store), "tsuyu")[0].metadata["doc_id"] == "en"


def test_keep_missing_does_not_retract(corpus: Path, tmp_path: Path):
    store = tmp_path / "store"
    ingest(corpus, store)
    s = ingest(corpus / "kyoto.md", store, retract_missing=False)
    assert s.retracted == 0
    assert search(open_retriever(store), "rainy season")


def test_bad_file_leaves_previous_version_and_skip_never_retracts(corpus: Path, tmp_path: Path):
    store = tmp_path / "store"
    ingest(corpus, store)
    (corpus / "kyoto.md").write_bytes("# 京都\n\n壊れた".encode() + b"\xff\xfe\n")
    from langchain_ragspine.errors import RagSpineError

    with pytest.raises(RagSpineError, match=r"kyoto\.md:3"):
        ingest(corpus, store)
    assert search(open_retriever(store), "清水寺")[0].metadata["doc_id"] == "kyoto"
    with pytest.warns(UserWarning, match="kyoto.md"):
        s = ingest(corpus, store, on_error="skip")
    assert (s.skipped, s.retracted) == (1, 0)
    assert any("retraction skipped" in n for n in s.notes)
    assert search(open_retriever(store), "清水寺")[0].metadata["doc_id"] == "kyoto"


def test_stale_or_missing_index_is_rebuilt_from_the_store(corpus: Path, tmp_path: Path):
    store = tmp_path / "store"
    ingest(corpus, store)
    import shutil

    from langchain_ragspine.errors import StaleIndexWarning

    shutil.rmtree(store / BM25_DIR)
    with pytest.warns(StaleIndexWarning, match="retriever.json missing"):
        assert search(open_retriever(store), "清水寺")[0].metadata["doc_id"] == "kyoto"
    (store / "index.json").write_text(json.dumps({"generation": -1, "tokenizer": "auto"}))
    with pytest.warns(StaleIndexWarning, match="older than the chunk store"):
        assert search(open_retriever(store), "清水寺")[0].metadata["doc_id"] == "kyoto"


def test_tokenizer_change_rebuilds_index(corpus: Path, tmp_path: Path):
    store = tmp_path / "store"
    ingest(corpus, store)
    s = ingest(corpus, store, tokenizer="cjk")
    assert s.unchanged == 4 and s.index_rebuilt
    assert open_retriever(store).current.tokenizer == "cjk"


# -- CLI ------------------------------------------------------------------------------------------------------------
def _json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_cli_ingest_search_json(corpus: Path, tmp_path: Path, capsys):
    store = str(tmp_path / "store")
    assert main(["ingest", str(corpus), "--store", store]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("this run: 4 documents, 4 chunks (4 new, 0 changed, 0 unchanged, 0 retracted); ")
    assert "; store: 4 documents, 4 chunks; " in line
    assert main(["search", "梅雨 北海道", "--store", store, "--json", "-k", "5"]) == 0
    rows = _json_lines(capsys.readouterr().out)
    assert [r["rank"] for r in rows] == list(range(1, len(rows) + 1))
    first = rows[0]
    assert set(first) == {
        "rank", "text", "doc_id", "title", "chunk_id", "source_locator", "start_index", "end_index",
        "sensitivity", "metadata", "scores",
    }
    assert first["doc_id"] == "tsuyu" and first["title"] == "梅雨"
    assert first["scores"]["vector"] is None and first["scores"]["bm25"] == first["scores"]["fused"] > 0
    source = (corpus / "tsuyu.md").read_text("utf-8")
    assert source[first["start_index"] : first["end_index"]] == first["text"]
    assert first["source_locator"] == f"tsuyu.md#{first['start_index']}-{first['end_index']}"
    assert all(r["sensitivity"].upper() != "RESTRICTED" and SECRET not in r["text"] for r in rows)


def test_cli_ingest_json_is_one_object_with_the_summary_lines_counts(corpus: Path, tmp_path: Path, capsys):
    store = str(tmp_path / "store")
    assert main(["ingest", str(corpus), "--store", store, "--json"]) == 0
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 1  # one JSON object, as search --json prints one per result
    first = json.loads(out)
    seconds = first.pop("seconds")
    assert isinstance(seconds, float) and seconds >= 0
    assert first == {"documents": 4, "chunks": 4, "new": 4, "changed": 0, "unchanged": 0, "retracted": 0,
                     "skipped": 0, "empty": 0, "store_documents": 4, "store_chunks": 4, "index_rebuilt": True,
                     "embedded": 0, "dense": None, "notes": []}
    # the same counts as the line the command prints without --json
    (corpus / "kyoto.md").unlink()
    (corpus / "bad.jsonl").write_text('{"no_text": 1}\n', "utf-8")
    assert main(["ingest", str(corpus), "--store", store, "--json", "--on-error", "skip"]) == 0
    again, err = capsys.readouterr()
    record = json.loads(again)
    assert (record["documents"], record["unchanged"], record["retracted"], record["skipped"]) == (3, 3, 0, 1)
    assert record["notes"] and all(f"note: {n}" in err for n in record["notes"])  # why nothing was retracted
    assert main(["ingest", str(corpus), "--store", store, "--on-error", "skip"]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("this run: 3 documents, 3 chunks (0 new, 0 changed, 3 unchanged, 0 retracted, 1 skipped)")


def test_cli_filters(corpus: Path, tmp_path: Path, capsys):
    store = str(tmp_path / "store")
    main(["ingest", str(corpus), "--store", store])
    capsys.readouterr()
    main(["search", "梅雨 rainy season", "--store", store, "--json", "--filter", "lang=en"])
    assert {r["doc_id"] for r in _json_lines(capsys.readouterr().out)} == {"en"}
    main(["search", "梅雨 京都 rainy", "--store", store, "--json", "--filter", "year>=2021"])
    assert {r["doc_id"] for r in _json_lines(capsys.readouterr().out)} == {"kyoto", "en"}
    assert main(["search", "梅雨", "--store", store, "--filter", "year>>1"]) == 2
    assert "filter" in capsys.readouterr().err


def test_cli_readable_output_never_prints_restricted(corpus: Path, tmp_path: Path, capsys):
    store = str(tmp_path / "store")
    main(["ingest", str(corpus), "--store", store])
    capsys.readouterr()
    assert main(["search", "鍵交換手順 " + SECRET, "--store", store]) == 0
    out = capsys.readouterr().out
    assert SECRET not in out and "鍵交換" not in out
    assert "withheld" not in out and "RESTRICTED" not in out  # nothing says whether restricted text matched


def test_cli_errors_name_file_and_line(tmp_path: Path, capsys):
    bad = tmp_path / "c" / "bad.jsonl"
    bad.parent.mkdir()
    bad.write_text('{"text": "ok"}\n{"title": "no text"}\n', "utf-8")
    assert main(["ingest", str(bad.parent), "--store", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "bad.jsonl:2" in err and "text" in err
    assert main(["search", "x", "--store", str(tmp_path / "nothing")]) == 2
    assert "ingest" in capsys.readouterr().err
    assert main(["ingest", str(tmp_path / "missing"), "--store", str(tmp_path / "s")]) == 2
    assert "missing" in capsys.readouterr().err


def test_cli_store_from_environment(corpus: Path, tmp_path: Path, capsys, monkeypatch):
    monkeypatch.setenv("RAGSPINE_STORE", str(tmp_path / "envstore"))
    monkeypatch.setenv("RAGSPINE_TOKENIZER", "cjk")
    assert main(["ingest", str(corpus)]) == 0
    assert open_retriever(tmp_path / "envstore").current.tokenizer == "cjk"
    capsys.readouterr()
    assert main(["search", "清水寺", "--json"]) == 0
    assert _json_lines(capsys.readouterr().out)[0]["doc_id"] == "kyoto"


def test_demo_prints_cited_results_and_no_restricted_text(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    for q in DEMO_QUESTIONS:
        assert f"Q: {q}" in out
    assert "ja/tokenizers.md#0-" in out  # the Japanese question is answered by the tokenizers page, cited
    assert "en/chunk-store.md#" in out
    assert "INTERNAL-ONLY-7f3a" not in out  # the marker of the RESTRICTED runbook
    assert "incident-runbook" not in out
    assert demo_corpus_dir().is_dir()


@pytest.mark.subprocess
def test_python_dash_m_entry_point(tmp_path: Path):
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    proc = subprocess.run(
        [sys.executable, "-m", "langchain_ragspine", "search", "x", "--store", str(tmp_path)],
        capture_output=True, text=True, env=env,
    )
    assert proc.returncode == 2 and "ragspine: error" in proc.stderr


# -- regressions from a fresh-user trial ---------------------------------------------------------------------------
def test_regression_load_reads_the_saved_index_without_rebuilding(corpus: Path, tmp_path: Path, monkeypatch):
    store = tmp_path / "store"
    ingest(corpus, store)
    import langchain_ragspine.retrievers.bm25 as bm25_mod

    def boom(*a, **k):
        raise AssertionError("load() rebuilt the index")

    monkeypatch.setattr(bm25_mod, "build_bm25_index", boom)
    r = open_retriever(store)  # would call build_bm25_index if load() re-indexed
    assert search(r, "清水寺")[0].metadata["doc_id"] == "kyoto"


@pytest.mark.parametrize("damage", ["truncate_npy", "empty_npy", "bm25_is_file", "bad_vocab", "bad_config"])
def test_regression_damaged_index_falls_back_and_ingest_repairs_it(corpus: Path, tmp_path: Path, damage):
    import shutil

    from langchain_ragspine.errors import StaleIndexWarning

    store = tmp_path / "store"
    ingest(corpus, store)
    idx = store / BM25_DIR
    if damage == "truncate_npy":
        p = idx / "bm25s" / "data.csc.index.npy"
        p.write_bytes(p.read_bytes()[:100])
    elif damage == "empty_npy":
        (idx / "bm25s" / "indices.csc.index.npy").write_bytes(b"")
    elif damage == "bm25_is_file":
        shutil.rmtree(idx)
        idx.write_text("not an index")
    elif damage == "bad_config":  # not a settings file a save wrote: ingest discards the directory and rebuilds
        (idx / "retriever.json").write_text("{garbage")
    else:
        (idx / "bm25s" / "vocab.index.json").write_text("{garbage")
    with pytest.warns(StaleIndexWarning, match="rebuilt in memory"):
        assert search(open_retriever(store), "清水寺")[0].metadata["doc_id"] == "kyoto"
    s = ingest(corpus, store)
    assert s.unchanged == 4 and s.index_rebuilt  # ingest notices and rewrites the index
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert search(open_retriever(store), "清水寺")[0].metadata["doc_id"] == "kyoto"


def test_regression_store_never_overwrites_foreign_directories(corpus: Path, tmp_path: Path, capsys):
    from langchain_ragspine.errors import StoreError

    proj = tmp_path / "proj"
    (proj / "bm25").mkdir(parents=True)
    (proj / "bm25" / "notes.txt").write_text("notes")
    (proj / "index.json").write_text('{"name": "my-app"}')
    with pytest.raises(StoreError, match="not a ragspine store"):
        ingest(corpus, proj)
    assert (proj / "bm25" / "notes.txt").read_text() == "notes"
    assert (proj / "index.json").read_text() == '{"name": "my-app"}'
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert main(["ingest", str(corpus), "--store", str(afile)]) == 2
    assert "must be a directory" in capsys.readouterr().err


def test_regression_store_inside_the_corpus_is_not_ingested(corpus: Path):
    store = corpus / "store"
    ingest(corpus, store)
    s = ingest(corpus, store)  # used to fail: the loader read the store's own docs.jsonl
    assert (s.documents, s.unchanged) == (4, 4)


def test_regression_leftover_temp_dirs_are_cleaned(corpus: Path, tmp_path: Path):
    store = tmp_path / "store"
    ingest(corpus, store)
    (store / ".bm25.tmp-abc").mkdir()
    (store / ".bm25.old-123").mkdir()
    ingest(corpus, store)
    assert not list(store.glob(".bm25.*"))


def test_regression_failed_ingest_leaves_no_empty_store(tmp_path: Path):
    bad = tmp_path / "c"
    bad.mkdir()
    (bad / "x.jsonl").write_text('{"no_text": 1}\n')
    from langchain_ragspine.errors import RagSpineError

    with pytest.raises(RagSpineError):
        ingest(bad, tmp_path / "new-store")
    assert not (tmp_path / "new-store").exists()


def test_regression_cli_rejects_undecodable_query(corpus: Path, tmp_path: Path, capsys):
    store = str(tmp_path / "store")
    main(["ingest", str(corpus), "--store", store])
    capsys.readouterr()
    assert main(["search", "\udcff梅雨", "--store", store]) == 2  # how Python hands over the byte 0xff in argv
    assert "not valid UTF-8" in capsys.readouterr().err


def test_regression_ctrl_c_is_a_clean_exit(monkeypatch, capsys, corpus: Path, tmp_path: Path):
    import langchain_ragspine.pipeline.ingest as ingest_module

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(ingest_module, "ingest", interrupted)  # the CLI imports it when the command runs
    assert main(["ingest", str(corpus), "--store", str(tmp_path / "s")]) == 130
    assert "interrupted" in capsys.readouterr().err
