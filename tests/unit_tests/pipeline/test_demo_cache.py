"""`ragspine demo` keeps its chunk vectors in the user cache dir between runs, so only the first run embeds
(issue 12: `make demo` <= 20 s from a warm venv)."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest

from langchain_ragspine.cli import DEMO_EMBEDDING_CACHE, main


def _embedded(out: str) -> int:
    m = re.search(r"; (\d+) embedded;", out)
    assert m, out
    return int(m.group(1))


def test_second_demo_run_embeds_nothing_and_prints_the_same_results(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.setenv("RAGSPINE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("RAGSPINE_EMBEDDING", "hashing")
    assert main(["demo"]) == 0
    first = capsys.readouterr().out
    assert _embedded(first) > 0 and "mode: hybrid" in first
    saved = tmp_path / "cache" / DEMO_EMBEDDING_CACHE
    with sqlite3.connect(saved) as conn:
        assert conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0] == _embedded(first)
    assert main(["demo"]) == 0
    second = capsys.readouterr().out
    assert _embedded(second) == 0
    strip = lambda s: re.sub(r"; [\d.]+s\n", "\n", re.sub(r"\d+ embedded", "", s))  # noqa: E731
    assert strip(second) == strip(first)
    assert "INTERNAL-ONLY-7f3a" not in second


def test_an_unreadable_demo_cache_is_only_a_miss(tmp_path: Path, monkeypatch, capsys):
    monkeypatch.setenv("RAGSPINE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("RAGSPINE_EMBEDDING", "hashing")
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / DEMO_EMBEDDING_CACHE).write_bytes(b"not sqlite" * 100)
    with pytest.warns(UserWarning, match="unreadable embedding cache"):
        assert main(["demo"]) == 0
    assert _embedded(capsys.readouterr().out) > 0
    assert main(["demo"]) == 0  # the file was replaced by a good one
    assert _embedded(capsys.readouterr().out) == 0
