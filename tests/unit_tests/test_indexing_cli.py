"""End-to-end tests of ingest/search (Python API and the `ragspine` CLI) on small corpora built in tmp_path."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from langchain_ragspine.cli import DEMO_QUESTIONS, demo_corpus_dir, main
from langchain_ragspine.indexing import BM25_DIR, ingest, open_retriever, search
from langchain_ragspine.stores import ChunkStore

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
    assert res.documents[0].metadata["doc_id"] == "tsuyu"
    assert res.withheld == 1  # the restricted chunk ranked 2nd and was removed
    assert all(SECRET not in d.page_content for d in res.documents)
    assert [d.metadata["doc_id"] for d in res.documents] == ["tsuyu", "kyoto"]  # refilled from rank 3


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
    assert search(r, "伏見稲荷").documents[0].metadata["doc_id"] == "kyoto"
    assert search(r, "清水寺").documents == []  # the old version is inactive
    assert search(r, "rainy season tsuyu").documents == []  # retracted
    with ChunkStore(store / "chunks.sqlite", read_only=True) as cs:
        assert cs.current_version("kyoto") == 2
    (corpus / "en.md").write_text("# Rainy season\n\nBack again: tsuyu.", "utf-8")
    s = ingest(corpus, store)
    assert (s.new, s.retracted) == (1, 0)
    assert search(open_retriever(store), "tsuyu").documents[0].metadata["doc_id"] == "en"


def test_keep_missing_does_not_retract(corpus: Path, tmp_path: Path):
    store = tmp_path / "store"
    ingest(corpus, store)
    s = ingest(corpus / "kyoto.md", store, retract_missing=False)
    assert s.retracted == 0
    assert search(open_retriever(store), "rainy season").documents


def test_bad_file_leaves_previous_version_and_skip_never_retracts(corpus: Path, tmp_path: Path):
    store = tmp_path / "store"
    ingest(corpus, store)
    (corpus / "kyoto.md").write_bytes("# 京都\n\n壊れた".encode() + b"\xff\xfe\n")
    from langchain_ragspine.errors import RagSpineError

    with pytest.raises(RagSpineError, match=r"kyoto\.md:3"):
        ingest(corpus, store)
    assert search(open_retriever(store), "清水寺").documents[0].metadata["doc_id"] == "kyoto"
    with pytest.warns(UserWarning, match="kyoto.md"):
        s = ingest(corpus, store, on_error="skip")
    assert (s.skipped, s.retracted) == (1, 0)
    assert any("retraction skipped" in n for n in s.notes)
    assert search(open_retriever(store), "清水寺").documents[0].metadata["doc_id"] == "kyoto"


def test_stale_or_missing_index_is_rebuilt_from_the_store(corpus: Path, tmp_path: Path):
    store = tmp_path / "store"
    ingest(corpus, store)
    import shutil

    shutil.rmtree(store / BM25_DIR)
    assert search(open_retriever(store), "清水寺").documents[0].metadata["doc_id"] == "kyoto"
    (store / "index.json").write_text(json.dumps({"generation": -1, "tokenizer": "auto"}))
    assert search(open_retriever(store), "清水寺").documents[0].metadata["doc_id"] == "kyoto"


def test_tokenizer_change_rebuilds_index(corpus: Path, tmp_path: Path):
    store = tmp_path / "store"
    ingest(corpus, store)
    s = ingest(corpus, store, tokenizer="cjk")
    assert s.unchanged == 4 and s.index_rebuilt
    assert open_retriever(store).tokenizer == "cjk"


# -- CLI ------------------------------------------------------------------------------------------------------------
def _json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_cli_ingest_search_json(corpus: Path, tmp_path: Path, capsys):
    store = str(tmp_path / "store")
    assert main(["ingest", str(corpus), "--store", store]) == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith("4 documents, ") and "4 new, 0 changed, 0 unchanged, 0 retracted" in line
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
    assert "withheld" in out


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
    assert open_retriever(tmp_path / "envstore").tokenizer == "cjk"
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
    assert "withheld" in out
    assert demo_corpus_dir().is_dir()


def test_python_dash_m_entry_point(tmp_path: Path):
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    proc = subprocess.run(
        [sys.executable, "-m", "langchain_ragspine", "search", "x", "--store", str(tmp_path)],
        capture_output=True, text=True, env=env,
    )
    assert proc.returncode == 2 and "ragspine: error" in proc.stderr
