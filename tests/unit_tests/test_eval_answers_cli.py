"""`ragspine eval DATASET --answers`: graphs compared on answers over a small QA folder built in tmp_path."""

import json
from pathlib import Path

import pytest

from langchain_ragspine.cli import main
from tests.unit_tests.test_eval_cli import _qa_folder


def test_eval_answers_compares_graphs_and_writes_json_and_ragas(tmp_path: Path, capsys):
    ds = _qa_folder(tmp_path / "ds")
    out, ragas = tmp_path / "r.json", tmp_path / "ragas"
    args = ["eval", str(ds), "--answers", "--graph", "simple", "corrective", "--mode", "bm25",
            "--json", str(out), "--ragas", str(ragas)]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "| configuration | n | answer_contains |" in text
    assert "| simple | 3 |" in text and "| corrective | 3 |" in text
    assert "| metric | corrective − simple |" in text
    data = json.loads(out.read_text("utf-8"))
    assert [r["name"] for r in data["results"]] == ["simple", "corrective"]
    for r in data["results"]:
        assert r["config"]["kind"] == "answers"
        # q1 and q2 are answered from their article; q3's gold answer is in no document
        assert r["aggregate"]["answer_contains"] == pytest.approx(2 / 3)
    assert {p["metric"] for p in data["paired"]} >= {"answer_contains", "faithfulness", "refused"}
    assert all(p["baseline"] == "simple" and p["other"] == "corrective" for p in data["paired"])
    rows = [json.loads(line) for line in (ragas / "simple.jsonl").read_text("utf-8").splitlines()]
    assert len(rows) == 3 and list(rows[0]) == ["user_input", "retrieved_contexts", "response", "reference"]
    assert (ragas / "corrective.jsonl").is_file()


def test_eval_answers_legacy_ragas_layout(tmp_path: Path):
    ds = _qa_folder(tmp_path / "ds")
    ragas = tmp_path / "ragas"
    assert main(["eval", str(ds), "--answers", "--graph", "simple", "--mode", "bm25", "--ragas", str(ragas),
                 "--ragas-layout", "ragas-legacy", "--limit", "1"]) == 0
    rows = [json.loads(line) for line in (ragas / "simple.jsonl").read_text("utf-8").splitlines()]
    assert len(rows) == 1 and list(rows[0]) == ["question", "contexts", "answer", "ground_truth"]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--graph", "simple"], "--graph: answer evaluation options, read only with --answers"),
        (["--judge", "ollama:x"], "--judge: answer evaluation options"),
        (["-k", "3"], "-k: answer evaluation options"),
        (["--answers", "--plot", "x.png"], "--plot draws retrieval recall curves"),
        (["--answers", "--ks", "1", "5"], "--ks: retrieval cutoffs"),
        (["--answers", "-k", "0"], "-k must be an int >= 1"),
        (["--answers", "--judge", "none"], "--judge 'none': name the judge model"),
        (["--ragas-layout", "ragas-legacy"], "--ragas-layout: answer evaluation options"),  # trial of issue 29
        (["--answers", "--graph", "simple", "simple"], "--graph simple: named twice"),
        (["--answers", "--judge", "nosuchprovider:m"], "--judge 'nosuchprovider:m': "),
    ],
)
def test_eval_answer_options_are_refused_where_they_are_not_read(tmp_path: Path, capsys, extra, message):
    ds = _qa_folder(tmp_path / "ds")
    assert main(["eval", str(ds), "--mode", "bm25", *extra]) == 2
    assert message in capsys.readouterr().err


def test_eval_answers_refuses_a_beir_folder(tmp_path: Path, capsys):
    root = tmp_path / "beir"
    root.mkdir()
    (root / "corpus.jsonl").write_text(json.dumps({"_id": "d1", "title": "t", "text": "東京"}) + "\n", "utf-8")
    (root / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "東京"}) + "\n", "utf-8")
    (root / "qrels.tsv").write_text("q1\td1\t1\n", "utf-8")
    assert main(["eval", str(root), "--answers"]) == 2
    assert "--answers needs gold answers" in capsys.readouterr().err


def test_eval_answers_refuses_an_unreachable_judge_by_name(tmp_path: Path, capsys, monkeypatch):
    pytest.importorskip("langchain_ollama")
    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:9")  # nothing listens on the discard port
    ds = _qa_folder(tmp_path / "ds")
    args = ["eval", str(ds), "--answers", "--graph", "simple", "--mode", "bm25", "--judge", "ollama:qwen2.5:7b"]
    # judged measures were asked for by name: no run with every verdict unknown, an error before any work
    assert main(args) == 2
    assert "--judge 'ollama:qwen2.5:7b': the judge model is not reachable" in capsys.readouterr().err


def test_eval_output_paths_are_checked_before_any_question_is_answered(tmp_path: Path, capsys, monkeypatch):
    # trial of issue 29: a --ragas that was a file failed only after every question had been answered
    import langchain_ragspine.evaluation.answers as answers

    ds = _qa_folder(tmp_path / "ds")
    afile = tmp_path / "afile.txt"
    afile.write_text("x", "utf-8")
    (tmp_path / "r").mkdir()
    called = []
    monkeypatch.setattr(answers, "evaluate_answers", lambda *a, **k: called.append(1))
    cases = [
        (["--ragas", str(afile)], f"--ragas {afile}: {afile} is a file, not a directory"),
        (["--ragas", str(afile / "sub")], f"--ragas {afile / 'sub'}: {afile} is a file, not a directory"),
        (["--json", str(tmp_path)], f"--json {str(tmp_path)!r}: not a writable file in an existing directory"),
        (["--json", str(tmp_path / "no" / "r.json")], "not a writable file in an existing directory"),
        # re-check trial of issue 29
        (["--json", ""], "--json '': not a writable file"),
        (["--ragas", ""], "--ragas '': name the directory"),
        (["--ragas-layout", "ragas-legacy"], "--ragas-layout: the layout of the --ragas files, read only with --ragas"),
        (["--ragas", str(tmp_path / "r"), "--json", str(tmp_path / "r" / "simple.jsonl")],
         "inside the --ragas directory"),
        (["--json", "/proc/x.json"], "--json '/proc/x.json': not a writable file"),
    ]
    for extra, message in cases:
        assert main(["eval", str(ds), "--answers", "--mode", "bm25", *extra]) == 2
        assert message in capsys.readouterr().err
    assert not called and not (tmp_path / "no").exists() and list((tmp_path / "r").iterdir()) == []
    # the retrieval evaluation checks its --json the same way
    assert main(["eval", str(ds), "--mode", "bm25", "--json", str(tmp_path)]) == 2
    assert "--json" in capsys.readouterr().err


def test_eval_answers_records_the_configuration(tmp_path: Path):
    ds = _qa_folder(tmp_path / "ds")
    out = tmp_path / "r.json"
    assert main(["eval", str(ds), "--answers", "--graph", "simple", "--mode", "bm25", "-k", "3", "--json", str(out),
                 "--limit", "1"]) == 0
    config = json.loads(out.read_text("utf-8"))["results"][0]["config"]
    assert config["graph_name"] == "simple" and config["mode"] == "bm25" and config["k"] == 3
    assert config["llm"].startswith("deterministic path")  # no --llm, no RAGSPINE_LLM: the offline path, said so


def test_eval_answers_compares_two_models_paired(tmp_path: Path, monkeypatch):
    # issue 29: "a user choosing between two models" compares them in one run, each graph with each model
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    import langchain_ragspine.cli as cli
    from langchain_ragspine.chat_models import DETERMINISTIC_PATH

    fake = FakeListChatModel(responses=["清水寺 [1]"])

    def resolve(spec):
        return (fake, "LLM path: fake") if spec == "fake" else (None, DETERMINISTIC_PATH)

    monkeypatch.setattr(cli, "_eval_answer_llm", resolve)
    ds = _qa_folder(tmp_path / "ds")
    out = tmp_path / "r.json"
    assert main(["eval", str(ds), "--answers", "--graph", "simple", "--mode", "bm25", "--llm", "none", "fake",
                 "--json", str(out)]) == 0
    data = json.loads(out.read_text("utf-8"))
    by_name = {r["name"]: r for r in data["results"]}
    assert list(by_name) == ["simple llm=none", "simple llm=fake"]
    assert by_name["simple llm=none"]["config"]["llm_spec"] == "none"
    assert by_name["simple llm=none"]["aggregate"]["llm_calls"] == 0
    assert by_name["simple llm=fake"]["aggregate"]["llm_calls"] > 0  # the fake model answered
    # the fake answers 清水寺 to every question: right on q2 only; the extractive path is right on q1 and q2
    assert by_name["simple llm=fake"]["aggregate"]["answer_contains"] == pytest.approx(1 / 3)
    assert by_name["simple llm=none"]["aggregate"]["answer_contains"] == pytest.approx(2 / 3)
    paired = [p for p in data["paired"] if p["metric"] == "answer_contains"]
    assert [(p["baseline"], p["other"]) for p in paired] == [("simple llm=none", "simple llm=fake")]
    assert paired[0]["difference"] == pytest.approx(-1 / 3)


def test_eval_answers_refuses_a_model_named_twice(tmp_path: Path, capsys):
    ds = _qa_folder(tmp_path / "ds")
    assert main(["eval", str(ds), "--answers", "--mode", "bm25", "--llm", "none", "None"]) == 2
    assert "--llm none None: a model named twice" in capsys.readouterr().err


def test_eval_answers_refuses_an_unreachable_model_named_by_llm(tmp_path: Path, capsys, monkeypatch):
    # audit of issue 29: an unreachable --llm warned, then scored the offline path under the graph's name (rc 0)
    pytest.importorskip("langchain_ollama")
    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:9")
    ds = _qa_folder(tmp_path / "ds")
    out = tmp_path / "r.json"
    assert main(["eval", str(ds), "--answers", "--mode", "bm25", "--llm", "ollama:b", "--json", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--llm 'ollama:b':" in err and "does not fall back" in err
    assert not out.exists()


def test_eval_answers_llm_given_twice_compares_both(tmp_path: Path, monkeypatch):
    # audit of issue 29: --llm a --llm b kept only b
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    import langchain_ragspine.cli as cli
    from langchain_ragspine.chat_models import DETERMINISTIC_PATH

    seen = []
    fake = FakeListChatModel(responses=["清水寺 [1]"])
    monkeypatch.setattr(cli, "_eval_answer_llm", lambda spec: seen.append(spec) or (
        (None, DETERMINISTIC_PATH) if spec == "none" else (fake, "LLM path: x")))
    ds = _qa_folder(tmp_path / "ds")
    out = tmp_path / "r.json"
    assert main(["eval", str(ds), "--answers", "--graph", "simple", "--mode", "bm25", "--llm", "none", "--llm", "x",
                 "--limit", "1", "--json", str(out)]) == 0
    assert seen == ["none", "x"]
    assert [r["name"] for r in json.loads(out.read_text("utf-8"))["results"]] == ["simple llm=none", "simple llm=x"]


def test_eval_answers_baseline_is_checked_and_listed_first(tmp_path: Path, capsys):
    # audit of issue 29: --baseline was ignored with --answers (an unknown name ran, rc 0)
    ds = _qa_folder(tmp_path / "ds")
    base = ["eval", str(ds), "--answers", "--graph", "simple", "corrective", "--mode", "bm25", "--limit", "2"]
    assert main([*base, "--baseline", "nosuch"]) == 2
    assert "--baseline 'nosuch' is not one of the configurations: ['simple', 'corrective']" in capsys.readouterr().err
    out = tmp_path / "r.json"
    assert main([*base, "--baseline", "corrective", "--json", str(out)]) == 0
    assert "| metric | simple − corrective |" in capsys.readouterr().out
    data = json.loads(out.read_text("utf-8"))
    assert [r["name"] for r in data["results"]] == ["corrective", "simple"]
    assert {(p["baseline"], p["other"]) for p in data["paired"]} == {("corrective", "simple")}


def test_eval_answers_json_pairs_the_cost_too(tmp_path: Path):
    # re-audit of issue 29: --json's paired list left out llm_calls and latency (the printed table had them)
    ds = _qa_folder(tmp_path / "ds")
    out, ragas = tmp_path / "r.json", tmp_path / "ragas"
    assert main(["eval", str(ds), "--answers", "--graph", "simple", "corrective", "--mode", "bm25", "--limit", "2",
                 "--json", str(out), "--ragas", str(ragas)]) == 0
    metrics = {p["metric"] for p in json.loads(out.read_text("utf-8"))["paired"]}
    assert {"llm_calls", "latency_ms", "exact_match", "answer_contains"} <= metrics


def test_eval_answers_refuses_two_models_that_are_both_the_offline_path(tmp_path: Path, capsys, monkeypatch):
    # re-audit of issue 29: --llm none auto with no server compared the offline path with itself
    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:9")
    ds = _qa_folder(tmp_path / "ds")
    assert main(["eval", str(ds), "--answers", "--mode", "bm25", "--llm", "none", "auto"]) == 2
    assert "--llm none auto: each of these answers on the offline path" in capsys.readouterr().err


def test_ragas_file_names_of_two_models_that_fold_alike_stay_apart(tmp_path: Path, monkeypatch):
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    import langchain_ragspine.cli as cli

    models = {"x:y": FakeListChatModel(responses=["清水寺 [1]"]), "x-y": FakeListChatModel(responses=["大阪 [1]"])}
    monkeypatch.setattr(cli, "_eval_answer_llm", lambda spec: (models[spec], f"LLM path: {spec}"))
    ds = _qa_folder(tmp_path / "ds")
    ragas = tmp_path / "ragas"
    assert main(["eval", str(ds), "--answers", "--graph", "simple", "--mode", "bm25", "--llm", "x:y", "x-y",
                 "--limit", "1", "--ragas", str(ragas)]) == 0
    assert sorted(p.name for p in ragas.iterdir()) == ["simple-llm-x-y-2.jsonl", "simple-llm-x-y.jsonl"]
