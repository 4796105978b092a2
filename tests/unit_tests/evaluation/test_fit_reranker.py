"""`ragspine fit-reranker` and evaluation.fit_reranker on a tiny labelled dataset built here: the model file it
writes loads, is used by `--rerank learned:FILE` in `ragspine eval` and `search`, and a rerun writes the same bytes;
errors for too few questions and for a bad model path are one line."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("lightgbm")

from langchain_ragspine.cli import main  # noqa: E402
from langchain_ragspine.document_compressors.learned import LearnedModel  # noqa: E402
from langchain_ragspine.document_compressors.learned.model import sidecar_path  # noqa: E402
from langchain_ragspine.evaluation import load_qa  # noqa: E402
from langchain_ragspine.evaluation.fit_reranker import (  # noqa: E402
    TrainingGroups,
    fit_reranker,
    held_out_split,
    recall_at_1,
    training_groups,
)

WORDS = [f"w{i}" for i in range(400)]


def tiny_dataset(root: Path, n_docs: int = 30, seed: int = 3) -> Path:
    """``n_docs`` articles of four paragraphs; each question names its article's topic word and one word of the
    paragraph holding its answer, while another paragraph repeats the topic word (so BM25's first hit is often
    the wrong paragraph)."""
    rng = random.Random(seed)
    (root / "docs").mkdir(parents=True)
    lines = []
    for d in range(n_docs):
        topic = f"topic{d}"
        paragraphs = []
        for p in range(4):
            body = " ".join(rng.choice(WORDS) for _ in range(25))
            paragraphs.append(f"{topic} {topic} {topic} {body}" if p == 0 else f"{body} {topic} answer{d}x{p} done")
        (root / "docs" / f"doc{d}.md").write_text(f"# {topic}\n\n" + "\n\n".join(paragraphs) + "\n", "utf-8")
        for p in (1, 2, 3):
            clue = paragraphs[p].split()[rng.randrange(0, 25)]
            lines.append({"id": f"q{d}-{p}", "question": f"what is the {topic} of {clue}?",
                          "answers": [f"answer{d}x{p}"], "doc_id": f"doc{d}", "paragraph": p})
    (root / "questions.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n", "utf-8")
    return root


@pytest.fixture
def dataset(tmp_path) -> Path:
    return tiny_dataset(tmp_path / "qa")


def test_training_groups_label_by_the_answer_rule(dataset):
    ds = load_qa(dataset)
    groups = training_groups(ds, depth=8)
    assert len(groups.groups) == 90 and all(1 <= g <= 8 for g in groups.groups)  # BM25 returns matches only
    assert groups.features.shape == (sum(groups.groups), 23) and set(np.unique(groups.labels)) <= {0.0, 1.0}
    start, answered = 0, 0
    for g, qid in zip(groups.groups, groups.question_ids, strict=True):
        # answer<d>x<p> is in one paragraph: one chunk, or two where the 80-character overlap repeats it
        assert groups.labels[start:start + g].sum() <= 2, qid
        answered += int(groups.labels[start:start + g].any())
        start += g
    assert answered >= 60
    assert 0.0 < recall_at_1(groups) < 1.0
    # subset / concat keep the groups aligned
    keep = [i % 2 == 0 for i in range(len(groups.groups))]
    half = groups.subset(keep)
    assert len(half.groups) == 45 and half.features.shape[0] == sum(half.groups)
    both = TrainingGroups.concat([half, groups.subset([not k for k in keep])])
    assert both.features.shape == groups.features.shape


def test_held_out_split_is_by_document_and_stable():
    ids = [f"doc{i}" for i in range(1000)]
    held = held_out_split(ids, 0.2)
    assert held == held_out_split(ids, 0.2) and 150 < sum(held) < 250
    assert held_out_split(["a", "a", "a"], 0.5) in ([True] * 3, [False] * 3)
    with pytest.raises(ValueError, match="share"):
        held_out_split(ids, 1.5)


def test_fit_command_writes_a_model_that_eval_and_search_use(dataset, tmp_path, capsys):
    out = tmp_path / "models" / "mine.txt"
    assert main(["fit-reranker", str(dataset), "--out", str(out), "--depth", "8"]) == 0
    text = capsys.readouterr().out
    assert f"wrote {out}" in text and "held-out answer recall@1: first stage" in text and "reranked" in text
    model = LearnedModel.load(out)
    meta = json.loads(sidecar_path(out).read_text())
    assert meta["training"]["rebuild"].startswith("ragspine fit-reranker ") and meta["depth"] == 8
    before, after = meta["training"]["held_out_recall@1"]["before"], meta["training"]["held_out_recall@1"]["after"]
    assert f"{before:.4f} -> reranked {after:.4f}" in text
    assert model.booster.num_trees() >= 1
    # deterministic: a second fit writes the same bytes
    again = tmp_path / "again.txt"
    assert main(["fit-reranker", str(dataset), "--out", str(again), "--depth", "8", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["out"] == str(again) and record["held_out_recall@1_after"] == pytest.approx(after, abs=1e-6)
    assert again.read_bytes() == out.read_bytes()
    # the model in use: eval over the same dataset with --rerank learned:FILE, and search over a store
    results = tmp_path / "eval.json"
    assert main(["eval", str(dataset), "--mode", "bm25", "--rerank", f"learned:{out}", "--ks", "1", "5",
                 "--json", str(results)]) == 0
    capsys.readouterr()
    assert json.loads(results.read_text())
    store = tmp_path / "store"
    assert main(["ingest", str(dataset / "docs"), "--store", str(store), "--embedding", "none"]) == 0
    capsys.readouterr()
    assert main(["search", "what is the topic3 of answer3x2", "--store", str(store), "--mode", "bm25",
                 "--rerank", f"learned:{out}", "-k", "3", "--json"]) == 0
    hits = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert 1 <= len(hits) <= 3 and all(h["scores"]["rerank"] is not None for h in hits)
    assert hits[0]["doc_id"] == "doc3"


def test_fit_errors_are_one_line(tmp_path, capsys):
    small = tiny_dataset(tmp_path / "small", n_docs=1)
    assert main(["fit-reranker", str(small), "--out", str(tmp_path / "m.txt")]) == 2
    err = capsys.readouterr().err
    assert "ragspine: error: cannot fit" in err and "label more questions" in err and "--held-out, now 0.2" in err
    assert main(["fit-reranker", str(small), "--out", str(tmp_path / "m.txt"), "--held-out", "1.5"]) == 2
    assert "--held-out" in capsys.readouterr().err
    assert main(["search", "x", "--store", str(tmp_path / "nostore"), "--rerank", f"learned:{tmp_path}/none.txt"]) == 2
    assert "none.txt" in capsys.readouterr().err


def test_fit_reranker_function_without_writing(dataset):
    report = fit_reranker([load_qa(dataset)], None, depth=8)
    assert report.path is None and report.n_train + report.n_held_out == 90 and report.trees >= 1
    assert 0.0 <= report.before_at_1 <= 1.0 and 0.0 <= report.after_at_1 <= 1.0


def test_restricted_candidates_never_become_training_rows(dataset, monkeypatch):
    from langchain_core.documents import Document

    import langchain_ragspine.evaluation.fit_reranker as fit

    secret = Document(page_content="answer0x1 secret", metadata={"doc_id": "doc0", "chunk_id": "s#0",
                                                                  "sensitivity": "RESTRICTED"})
    real = fit.invoke_retriever
    seen: list[int] = []

    def with_secret(retriever, query, **kw):  # type: ignore[no-untyped-def]
        docs = [secret, *real(retriever, query, **kw)]
        seen.append(len(docs) - 1)
        return docs

    monkeypatch.setattr(fit, "invoke_retriever", with_secret)
    groups = training_groups(load_qa(dataset), depth=8)
    assert groups.groups == [min(n, 8) for n in seen]  # the secret is dropped before any row is made


def test_fit_checks_its_output_and_lightgbm_before_any_work(dataset, tmp_path, capsys, monkeypatch):
    # trial of issue 30: a bad --out failed after the whole fit, and a missing LightGBM was a traceback after it
    import sys

    import langchain_ragspine.evaluation.fit_reranker as fit

    calls = []
    monkeypatch.setattr(fit, "training_groups", lambda *a, **k: calls.append(1))
    (tmp_path / "side.txt.json").mkdir()
    cases = [
        ([str(tmp_path)], "a directory; name the model file"),
        ([""], "the model path is empty"),
        ([str(tmp_path / "keep.txt.json")], "a model file named *.json would read as another model's sidecar"),
        ([str(tmp_path / "side.txt")], "a directory where the model's sidecar goes"),
    ]
    for out, message in cases:
        assert main(["fit-reranker", str(dataset), "--out", *out]) == 2
        assert message in capsys.readouterr().err
    assert main(["fit-reranker", str(dataset), str(dataset), "--out", str(tmp_path / "m.txt")]) == 2
    assert "the same dataset named twice" in capsys.readouterr().err
    # re-check of issue 30: an alias (symlinked docs/ and questions.jsonl) or a copy put the same questions in
    # training and held out (held-out recall@1 1.0000)
    alias = tmp_path / "alias"
    alias.mkdir()
    (alias / "docs").symlink_to(dataset / "docs")
    (alias / "questions.jsonl").symlink_to(dataset / "questions.jsonl")
    assert main(["fit-reranker", str(dataset), str(alias), "--out", str(tmp_path / "m.txt")]) == 2
    assert f"{alias}: question 'q0-1' is also in {dataset}" in capsys.readouterr().err
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert main(["fit-reranker", str(dataset), "--out", str(afile / "m.txt")]) == 2
    assert f"{afile} is a file, not a directory" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "lightgbm", None)  # as if it were not installed
    assert main(["fit-reranker", str(dataset), "--out", str(tmp_path / "m.txt")]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "ragspine: error: the learned reranker needs LightGBM: pip install 'langchain-ragspine[learn]'"
    assert not calls and not (tmp_path / "m.txt").exists()


def test_the_recorded_rebuild_command_names_the_options_used(dataset, tmp_path, capsys):
    # re-check of issue 30: the sidecar's rebuild command left out --depth and --held-out, so it did not rebuild
    out = tmp_path / "m.txt"
    assert main(["fit-reranker", str(dataset), "--out", str(out), "--depth", "8", "--held-out", "0.3"]) == 0
    rebuild = json.loads(sidecar_path(out).read_text())["training"]["rebuild"]
    assert rebuild == f"ragspine fit-reranker {dataset} --out {out} --depth 8 --held-out 0.3"
    capsys.readouterr()
    again = tmp_path / "again.txt"
    assert main(rebuild.replace(str(out), str(again)).split()[1:]) == 0
    assert again.read_bytes() == out.read_bytes()


def test_fit_says_how_many_questions_cannot_teach_it(tmp_path, capsys):
    # trial of issue 30: questions whose answer is in no document were used without a word
    root = tiny_dataset(tmp_path / "qa")
    lines = (root / "questions.jsonl").read_text("utf-8").splitlines()
    spoilt = [json.loads(x) for x in lines]
    for q in spoilt[::3]:
        q["answers"] = ["no such answer anywhere"]
    (root / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in spoilt), "utf-8")
    out = tmp_path / "m.txt"
    assert main(["fit-reranker", str(root), "--out", str(out), "--depth", "8", "--json"]) == 0
    captured = capsys.readouterr()
    record = json.loads(captured.out)
    n_spoilt = len(spoilt[::3])
    assert record["questions_without_answer"] >= n_spoilt
    assert f"note: {record['questions_without_answer']} of {len(spoilt)} questions have no candidate" in captured.err
