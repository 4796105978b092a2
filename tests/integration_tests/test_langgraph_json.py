"""Load every entry of graphs/langgraph.json the way `langgraph dev` does, and invoke it."""

import asyncio
import importlib.util
import inspect
import json
import os
import sys
from pathlib import Path

import pytest

GRAPHS = Path(__file__).resolve().parents[2] / "graphs"


def _load(entry: str):
    path, _, attr = entry.partition(":")
    file = (GRAPHS / path).resolve()
    spec = importlib.util.spec_from_file_location(f"_ragspine_graph_app_{file.stem}", file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    value = getattr(module, attr)
    if inspect.iscoroutinefunction(value):  # an async graph factory, as langgraph dev calls it
        return asyncio.run(value())
    return value


def test_langgraph_json_entries_load_and_answer(monkeypatch):
    monkeypatch.delenv("RAGSPINE_STORE", raising=False)
    monkeypatch.setenv("RAGSPINE_LLM", "none")
    config = json.loads((GRAPHS / "langgraph.json").read_text("utf-8"))
    assert set(config["graphs"]) == {"corrective_rag", "adaptive_rag", "self_rag"}
    for name, entry in config["graphs"].items():
        graph = _load(entry)
        state = graph.invoke({"question": "長い段落はどこで切られますか？", "filters": None})
        assert state["answer"], name
        assert state["citations"] and all(c["doc_id"] == "ja/splitter" for c in state["citations"]), name
        assert isinstance(state["trace"], list) and state["trace"], name


def test_langgraph_json_uses_a_configured_store(monkeypatch, tmp_path):
    from langchain_ragspine.pipeline.ingest import ingest

    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "tsuyu.md").write_text("# 梅雨\n\n日本で梅雨がないのは北海道と小笠原諸島である。", "utf-8")
    ingest(corpus, tmp_path / "S")
    monkeypatch.setenv("RAGSPINE_STORE", str(tmp_path / "S"))
    monkeypatch.setenv("RAGSPINE_LLM", "none")
    graph = _load("./app.py:corrective_rag")
    state = graph.invoke({"question": "梅雨がないのは北海道とどこか", "filters": None})
    assert "小笠原諸島" in state["answer"] and state["citations"][0]["doc_id"] == "tsuyu"


def test_regression_the_served_graphs_build_the_second_stage_and_transform_of_the_settings(monkeypatch, tmp_path):
    """Trial of 5d1ab81: ``graphs/app.py`` ignored RAGSPINE_POSTPROCESSOR / RAGSPINE_RERANKER /
    RAGSPINE_QUERY_TRANSFORM (only a code comment said so), though ``ragspine ask --graph`` builds them.  Now the served
    graphs run the same plan: here MMR over the candidates, after the RESTRICTED gate, and a bad value is an error
    naming its variable."""
    from langchain_ragspine.pipeline.ingest import ingest

    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "tsuyu.md").write_text("# 梅雨\n\n日本で梅雨がないのは北海道と小笠原諸島である。", "utf-8")
    ingest(corpus, tmp_path / "S", progress=False)
    monkeypatch.setenv("RAGSPINE_STORE", str(tmp_path / "S"))
    monkeypatch.setenv("RAGSPINE_LLM", "none")
    question = {"question": "梅雨がないのは北海道とどこか", "filters": None}
    plain = _load("./app.py:corrective_rag").invoke(question)
    assert "compress" not in [t["step"] for t in plain["trace"]]
    monkeypatch.setenv("RAGSPINE_POSTPROCESSOR", "mmr")
    state = _load("./app.py:corrective_rag").invoke(question)
    steps = [t for t in state["trace"] if t["step"] == "compress"]
    assert steps and [c["compressor"] for c in steps[0]["compressors"]] == ["MMRCompressor"]
    assert "小笠原諸島" in state["answer"]
    monkeypatch.setenv("RAGSPINE_POSTPROCESSOR", "nope")
    with pytest.raises(ValueError, match="RAGSPINE_POSTPROCESSOR"):
        _load("./app.py:corrective_rag")
    monkeypatch.delenv("RAGSPINE_POSTPROCESSOR")
    monkeypatch.setenv("RAGSPINE_QUERY_TRANSFORM", "multi_query")  # an LLM transformation, no LLM: skipped, warned
    with pytest.warns(UserWarning, match="multi_query"):
        assert "小笠原諸島" in _load("./app.py:corrective_rag").invoke(question)["answer"]


def test_regression_the_served_graphs_never_widen_a_filter(monkeypatch, tmp_path):
    """``graphs/app.py`` (what ``langgraph dev`` serves) built the corrective and adaptive graphs with the old
    default ``relax_filters=True``: a question filtered to tenant C came back with tenant A and B documents.  Every
    served graph now refuses, in question and chat form, and a run cannot ask to widen."""
    from langchain_core.messages import HumanMessage

    from langchain_ragspine.pipeline.ingest import ingest

    corpus = tmp_path / "c"
    corpus.mkdir()
    for tenant in ("A", "B"):
        (corpus / f"{tenant}.md").write_text(
            f"---\ntenant: {tenant}\n---\n# 梅雨\n\n日本で梅雨がないのは北海道と小笠原諸島である。", "utf-8"
        )
    ingest(corpus, tmp_path / "S", progress=False)
    monkeypatch.setenv("RAGSPINE_STORE", str(tmp_path / "S"))
    monkeypatch.setenv("RAGSPINE_LLM", "none")
    config = json.loads((GRAPHS / "langgraph.json").read_text("utf-8"))
    question = "梅雨がないのは北海道とどこか"
    for name, entry in config["graphs"].items():
        graph = _load(entry)
        assert graph.invoke({"question": question, "filters": {"tenant": "A"}})["citations"], name  # it answers
        for inputs in ({"question": question, "filters": {"tenant": "C"}},
                       {"messages": [HumanMessage(question)], "filters": {"tenant": "C"}}):
            state = graph.invoke(inputs)
            assert state["refused"] and state["documents"] == [] and state["citations"] == [], name
            assert "drop_filters" not in [t["step"] for t in state["trace"]], name
            assert state["filters_dropped"] is False and state["dropped_filters"] is None, name
        with pytest.raises(ValueError, match="a run cannot widen a filter"):
            graph.invoke({"question": question, "filters": {"tenant": "C"}}, context={"relax_filters": True})


@pytest.mark.subprocess
def test_the_app_graph_stops_answering_with_a_canary_relabelled_while_it_runs(monkeypatch, tmp_path):
    """Issue 25: the app caches its retriever (functools.cache); the corrective graph answered with the canary of a
    document that was RESTRICTED by then.  The cached retriever is a live one: after a relabel ingested by another
    process, the same graph object answers without the canary; made public again, with it; deleted, without."""
    import subprocess

    from langchain_ragspine.pipeline.ingest import ingest

    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "secret.md").write_text("# Valley\n\nCANARYAPP7 is the code of the valley rivers.", "utf-8")
    (corpus / "public.md").write_text("# Rivers\n\nThe valley rivers flow north in spring.", "utf-8")
    ingest(corpus, tmp_path / "S", progress=False)
    monkeypatch.setenv("RAGSPINE_STORE", str(tmp_path / "S"))
    monkeypatch.setenv("RAGSPINE_LLM", "none")
    graph = _load("./app.py:corrective_rag")
    question = {"question": "What is the code of the valley rivers?", "filters": None}

    def shown(state: dict) -> str:
        return repr([state["answer"], state["citations"], state["documents"]])

    assert "CANARYAPP7" in shown(graph.invoke(question))  # not vacuous: served while public
    root = Path(__file__).resolve().parents[2]

    def ingest_elsewhere() -> None:
        env = {**os.environ, "PYTHONPATH": str(root)}
        done = subprocess.run([sys.executable, "-m", "langchain_ragspine", "ingest", str(corpus), "--store",
                               str(tmp_path / "S")], env=env, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr

    (corpus / "secret.json").write_text('{"sensitivity": "RESTRICTED"}', "utf-8")
    ingest_elsewhere()
    after = graph.invoke(question)
    assert "CANARYAPP7" not in shown(after) and after["documents"]
    assert "CANARYAPP7" not in shown(asyncio.run(graph.ainvoke(question)))
    (corpus / "secret.json").unlink()  # public again: served again, by the same graph
    ingest_elsewhere()
    assert "CANARYAPP7" in shown(graph.invoke(question))
    (corpus / "secret.md").unlink()  # deleted: retracted by the ingest
    ingest_elsewhere()
    assert "CANARYAPP7" not in shown(graph.invoke(question))


def test_langgraph_json_is_valid_for_langgraph_cli():
    cli = pytest.importorskip("langgraph_cli.config", reason="langgraph-cli not installed")
    cli.validate_config_file(GRAPHS / "langgraph.json")


def test_importing_the_app_does_no_work(monkeypatch):
    """No ingest, no retriever, no model at import: `langgraph dev` (or a test) builds a graph when it reads it."""
    import langchain_ragspine.chat_models as chat_models
    import langchain_ragspine.pipeline.ingest as ingest_module
    import langchain_ragspine.pipeline.sources as sources

    def no_work(*a, **k):
        raise AssertionError("graphs/app.py did work at import")

    for module, name in ((ingest_module, "ingest"), (sources, "open_retriever"), (chat_models, "make_chat_model")):
        monkeypatch.setattr(module, name, no_work)
    file = (GRAPHS / "app.py").resolve()
    spec = importlib.util.spec_from_file_location("_ragspine_graph_app_lazy", file)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert sorted(module.__all__) == ["adaptive_rag", "corrective_rag", "self_rag"]
    with pytest.raises(AssertionError, match="did work"):
        module.corrective_rag  # noqa: B018 - the first read builds the graph (and here hits the patched ingest)
    with pytest.raises(AttributeError):
        module.no_such_graph  # noqa: B018
