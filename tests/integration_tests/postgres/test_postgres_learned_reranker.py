"""`--rerank learned` on a PostgreSQL store (issue 30): the same reranked results as over a store directory with the
same chunks, and the RESTRICTED chunk never scored nor printed.  Needs the session's PostgreSQL (``pg_server``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("lightgbm")

from langchain_ragspine.cli import main  # noqa: E402
from tests.unit_tests.test_indexing_cli import SECRET, _write  # noqa: E402


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    _write(root / "tsuyu.md", "# 梅雨\n\n梅雨は北海道と小笠原諸島を除く日本で見られる雨季である。\n\n梅雨前線が停滞する。",
           lang="ja")
    _write(root / "kyoto.md", "# 京都\n\n京都の観光名所は清水寺と金閣寺である。", lang="ja")
    _write(root / "keys.md", f"# 鍵\n\n梅雨の時期の鍵交換手順。{SECRET} 梅雨 梅雨 北海道", sensitivity="restricted", lang="ja")
    _write(root / "en.md", "# Rainy season\n\nThe rainy season in Japan is called tsuyu.", lang="en")
    return root


def _search(store: str, capsys: pytest.CaptureFixture[str]) -> list[dict]:
    assert main(["search", "日本で梅雨がないのは北海道とどこか", "--store", store, "--mode", "bm25", "-k", "3",
                 "--rerank", "learned", "--json"]) == 0
    out = capsys.readouterr().out
    assert SECRET not in out
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def test_learned_rerank_on_postgres_equals_the_store_directory(corpus: Path, tmp_path: Path, pg_url: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ingest", str(corpus), "--store", pg_url, "--embedding", "none"]) == 0
    assert main(["ingest", str(corpus), "--store", str(tmp_path / "dir"), "--embedding", "none"]) == 0
    capsys.readouterr()
    on_pg, on_dir = _search(pg_url, capsys), _search(str(tmp_path / "dir"), capsys)
    assert on_pg and all(r["scores"]["rerank"] is not None for r in on_pg)
    assert [r["chunk_id"] for r in on_pg] == [r["chunk_id"] for r in on_dir]
    assert [round(r["scores"]["rerank"], 6) for r in on_pg] == [round(r["scores"]["rerank"], 6) for r in on_dir]
