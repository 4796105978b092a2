"""Checks on the real evaluation data in ../shared/data; skipped (with the reason) when it is absent."""

import json
import os
from pathlib import Path

import pytest

from langchain_ragspine.cli import main

DATA = Path(os.environ.get("RAGSPINE_DATA", Path(__file__).resolve().parents[2].parent / "shared" / "data"))
JSQUAD = DATA / "jsquad-valid"

pytestmark = pytest.mark.skipif(
    not (JSQUAD / "docs").is_dir(),
    reason=f"shared evaluation data not found at {JSQUAD} (clone beside ../shared, or set RAGSPINE_DATA)",
)


def test_tsuyu_question_ranks_the_tsuyu_article_first(tmp_path: Path, capsys):
    store = str(tmp_path / "S")
    assert main(["ingest", str(JSQUAD / "docs"), "--store", store]) == 0
    assert "59 documents" in capsys.readouterr().out
    assert main(["search", "日本で梅雨がないのは北海道とどこか。", "--store", store, "--json", "-k", "5"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(rows) == 5
    assert rows[0]["title"] == "梅雨" and rows[0]["doc_id"] == "jsquad-valid-a0000"
    article = (JSQUAD / "docs" / "jsquad-valid-a0000.md").read_text("utf-8")
    assert article[rows[0]["start_index"] : rows[0]["end_index"]] == rows[0]["text"]
