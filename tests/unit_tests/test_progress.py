"""Progress a person can see: one bar per phase on a terminal, a start line and a line every ~10 s elsewhere,
silence with progress=False.  Time is a fake clock; nothing sleeps."""

import io
import sys

import pytest

from langchain_ragspine import progress as progress_module
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.progress import LineProgress, progress_bar, progress_mode, reporting


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_line_progress_writes_a_start_line_then_one_line_per_interval_and_a_last_line():
    clock, out = FakeClock(), io.StringIO()
    bar = LineProgress(total=300, desc="embed", unit="chunk", stream=out, clock=clock, interval=10.0)
    for _ in range(30):  # 30 batches of 10 chunks, 1 s each
        clock.now += 1.0
        bar.update(10)
    bar.close()
    bar.close()  # once
    lines = out.getvalue().splitlines()
    assert lines[0] == "embed: started (300 chunks)"
    assert lines[1:4] == [
        "embed: 100/300 chunks (33%), 10.0 chunks/s, 10 s",
        "embed: 200/300 chunks (67%), 10.0 chunks/s, 20 s",
        "embed: 300/300 chunks (100%), 10.0 chunks/s, 30 s",
    ]
    assert lines[4:] == ["embed: done, 300 chunks in 30 s"]


def test_line_progress_is_quiet_between_intervals_and_counts_an_iterable():
    clock, out = FakeClock(), io.StringIO()
    items = []
    for item in LineProgress(iter(range(5)), desc="load", unit="doc", stream=out, clock=clock):
        clock.now += 0.5  # 2.5 s in all: no progress line
        items.append(item)
    assert items == [0, 1, 2, 3, 4]
    assert out.getvalue().splitlines() == ["load: started", "load: done, 5 docs in 2 s"]


def _fake_stderr(monkeypatch, tty: bool) -> io.StringIO:
    class Err(io.StringIO):
        def isatty(self) -> bool:
            return tty

    err = Err()
    monkeypatch.setattr(sys, "stderr", err)
    return err


def test_modes(monkeypatch):
    _fake_stderr(monkeypatch, tty=True)
    assert (progress_mode(None), progress_mode(True), progress_mode(False)) == ("bar", "bar", "off")
    _fake_stderr(monkeypatch, tty=False)
    assert (progress_mode(None), progress_mode(True), progress_mode(False)) == ("lines", "lines", "off")
    monkeypatch.setattr(progress_module, "_in_jupyter", lambda: True)
    assert progress_mode(None) == "bar"  # a notebook cell shows a bar, not log lines


def test_inside_a_phase_inner_bars_are_silent_and_the_outer_block_decides(monkeypatch):
    err = _fake_stderr(monkeypatch, tty=False)
    with reporting(None):
        with progress_bar(total=2, desc="embed", unit="chunk") as outer:
            with progress_bar(total=2, desc="model", unit="chunk") as inner:  # e.g. the model's own bar
                inner.update(2)
            outer.update(2)
        with reporting(None):  # a nested entry point keeps the outer choice
            with progress_bar(total=1, desc="index", unit="doc") as bar:
                bar.update(1)
        with reporting(False):
            with progress_bar(total=1, desc="hidden", unit="doc") as bar:
                bar.update(1)
    text = err.getvalue()
    assert "embed: started" in text and "index: started" in text
    assert "model" not in text and "hidden" not in text


def test_outside_reporting_the_library_default_is_a_bar_on_a_terminal_only(monkeypatch):
    err = _fake_stderr(monkeypatch, tty=False)
    with progress_bar(total=3, desc="embed", unit="chunk") as bar:
        bar.update(3)
    assert err.getvalue() == ""


def _corpus(tmp_path):
    corpus = tmp_path / "c"
    corpus.mkdir()
    for i in range(3):
        (corpus / f"d{i}.md").write_text(f"# 文書{i}\n\n梅雨は六月から七月の雨季。資料{i}。", "utf-8")
    return corpus


def test_ingest_off_a_terminal_writes_a_start_and_done_line_per_phase(tmp_path, monkeypatch):
    err = _fake_stderr(monkeypatch, tty=False)
    ingest(_corpus(tmp_path), tmp_path / "S", embedding=HashingEmbeddings(32), mode="hybrid")
    lines = err.getvalue().splitlines()
    starts = [line.split(":")[0] for line in lines if line.endswith("started") or "started (" in line]
    assert starts == ["load", "chunk", "embed", "index"]
    assert "chunk: started (3 docs)" in lines and "embed: started (3 chunks)" in lines
    assert sum(1 for line in lines if ": done," in line) == 4


def test_ingest_with_progress_false_is_silent(tmp_path, monkeypatch):
    err = _fake_stderr(monkeypatch, tty=False)
    ingest(_corpus(tmp_path), tmp_path / "S", embedding=HashingEmbeddings(32), mode="hybrid", progress=False)
    assert err.getvalue() == ""


def test_ingest_on_a_terminal_shows_one_bar_per_phase(tmp_path, monkeypatch):
    _fake_stderr(monkeypatch, tty=True)
    made = []

    class RecordingBar:
        def __init__(self, iterable=None, *, total=None, desc, unit, file):
            made.append(desc)
            self.iterable = iterable

        def update(self, n=1):
            pass

        def close(self):
            pass

        def __iter__(self):
            yield from self.iterable

    monkeypatch.setattr(progress_module, "_tqdm_class", lambda: RecordingBar)
    ingest(_corpus(tmp_path), tmp_path / "S", embedding=HashingEmbeddings(32), mode="hybrid")
    assert made == ["load", "chunk", "embed", "index"]


def test_tqdm_class_avoids_the_notebook_widget_without_ipywidgets(monkeypatch):
    monkeypatch.setattr(progress_module, "_in_jupyter", lambda: True)
    monkeypatch.setattr(progress_module.importlib.util, "find_spec", lambda name: None)
    from tqdm.std import tqdm as text_tqdm

    assert progress_module._tqdm_class() is text_tqdm


@pytest.mark.parametrize("progress", [None, False])
def test_evaluate_reports_its_phase(tmp_path, monkeypatch, progress):
    from langchain_core.documents import Document

    from langchain_ragspine.evaluation.datasets import QADataset, QAQuestion
    from langchain_ragspine.evaluation.runner import evaluate
    from langchain_ragspine.retrievers import BM25Retriever

    err = _fake_stderr(monkeypatch, tty=False)
    docs = [Document(page_content="梅雨は六月から七月の雨季。", metadata={"doc_id": "d0", "chunk_id": "d0#0"})]
    dataset = QADataset(name="t", docs=docs, questions=[QAQuestion(id="q1", question="梅雨はいつ", answers=["六月"], doc_id="d0")])
    evaluate(BM25Retriever.from_documents(docs), dataset, progress=progress, name="bm25")
    if progress is False:
        assert err.getvalue() == ""
    else:
        assert err.getvalue().splitlines()[0] == "eval bm25: started (1 q)"


def test_demo_off_a_terminal_reports_each_phase_on_stderr_and_keeps_stdout_clean(tmp_path, monkeypatch, capsys):
    # regression: `ragspine demo` ingested with progress=False, so 6-36 s of embedding passed in silence
    from langchain_ragspine.cli import main

    monkeypatch.setenv("RAGSPINE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("RAGSPINE_EMBEDDING", "hashing")
    err = _fake_stderr(monkeypatch, tty=False)
    assert main(["demo"]) == 0
    lines = err.getvalue().splitlines()
    starts = [line.split(":")[0] for line in lines if line.endswith("started") or "started (" in line]
    assert starts[:2] == ["load", "chunk"] and "index" in starts and any(s.startswith("embed") for s in starts)
    assert not any("started" in line for line in capsys.readouterr().out.splitlines())


def test_an_ingest_larger_than_the_model_check_labels_the_check_and_embeds_the_rest_in_one_bar(tmp_path, monkeypatch):
    from langchain_ragspine.pipeline.ingest import PROBE_CHUNKS

    corpus = tmp_path / "c"
    corpus.mkdir()
    for i in range(PROBE_CHUNKS + 8):
        (corpus / f"d{i}.md").write_text(f"# 文書{i}\n\n梅雨は六月から七月の雨季。資料{i}。", "utf-8")
    err = _fake_stderr(monkeypatch, tty=False)
    ingest(corpus, tmp_path / "S", embedding=HashingEmbeddings(32), mode="hybrid")
    lines = err.getvalue().splitlines()
    starts = [line.split(":")[0] for line in lines if line.endswith("started") or "started (" in line]
    assert starts == ["load", "chunk", "embed (model check)", "index", "embed"]
    assert f"embed (model check): started ({PROBE_CHUNKS} chunks)" in lines and "embed: started (8 chunks)" in lines
