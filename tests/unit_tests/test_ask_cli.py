"""`ragspine ask`: the deterministic path, the LLM path with a fake chat model, --json, --stream, every graph."""

import json
import os
from pathlib import Path

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult

import langchain_ragspine.chat_models as chat_models
from langchain_ragspine.cli import main
from langchain_ragspine.pipeline.ingest import ingest

SECRET = "SECRET-MARKER-99"


class RoutingFakeChatModel(BaseChatModel):
    """Answers the answer-chain prompt with a fixed cited answer and every grading prompt with "yes"."""

    answer: str = "小笠原諸島です [1]。"
    prompts: list = []

    @property
    def _llm_type(self) -> str:
        return "routing-fake"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        text = "\n".join(str(m.content) for m in messages)
        self.prompts.append(text)
        reply = self.answer if "numbered context passages" in text else "yes"
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=reply))])


@pytest.fixture
def store(tmp_path: Path) -> str:
    root = tmp_path / "corpus"
    root.mkdir()
    (root / "tsuyu.md").write_text("# 梅雨\n\n日本で梅雨がないのは北海道と小笠原諸島である。梅雨前線は停滞する。", "utf-8")
    (root / "kyoto.md").write_text("# 京都\n\n京都の観光名所は清水寺と金閣寺である。", "utf-8")
    (root / "keys.md").write_text(f"---\nsensitivity: restricted\n---\n# 鍵\n\n日本で梅雨がないのは{SECRET}である。", "utf-8")
    ingest(root, tmp_path / "S")
    return str(tmp_path / "S")


@pytest.mark.parametrize("graph", ["corrective", "adaptive", "self_rag", "simple"])
def test_ask_deterministic_path_cites_the_right_document(store, graph, capsys):
    assert main(["ask", "日本で梅雨がないのは北海道とどこか。", "--store", store, "--graph", graph, "--llm", "none"]) == 0
    cap = capsys.readouterr()
    assert "小笠原諸島" in cap.out and "[1] 梅雨  (tsuyu.md#" in cap.out
    assert SECRET not in cap.out + cap.err
    assert "deterministic path" in cap.err


def test_ask_json_holds_answer_citations_documents_and_trace(store, capsys):
    assert main(["ask", "日本で梅雨がないのは北海道とどこか。", "--store", store, "--llm", "none", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["graph"] == "corrective" and not record["refused"]
    assert record["citations"][0]["doc_id"] == "tsuyu"
    n = record["citations"][0]["n"]
    assert record["documents"][n - 1]["chunk_id"] == record["citations"][0]["chunk_id"]
    assert [t["step"] for t in record["trace"]][:3] == ["prepare", "retrieve", "restricted_gate"]
    assert SECRET not in json.dumps(record, ensure_ascii=False)


def test_ask_stream_prints_each_node(store, capsys):
    assert main(["ask", "日本で梅雨がないのは北海道とどこか。", "--store", store, "--llm", "none", "--stream"]) == 0
    err = capsys.readouterr().err
    nodes = [line.split()[1] for line in err.splitlines() if line.startswith("→ ")]
    assert nodes[:4] == ["prepare", "retrieve", "restricted_gate", "grade_documents"] and nodes[-1] == "generate"


@pytest.mark.parametrize("graph", ["corrective", "adaptive", "self_rag", "simple"])
def test_ask_llm_path_with_a_fake_chat_model(store, capsys, monkeypatch, graph):
    fake = RoutingFakeChatModel(prompts=[])
    monkeypatch.setattr(chat_models, "make_chat_model", lambda spec=None, **kw: fake)
    assert main(["ask", "日本で梅雨がないのは北海道とどこか。", "--store", store, "--llm", "fake:model", "--json",
                 "--graph", graph]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["answer"] == "小笠原諸島です [1]。" and record["llm"] == "LLM path: fake:model"
    assert record["citations"][0]["doc_id"] == "tsuyu"
    assert fake.prompts and not any(SECRET in p for p in fake.prompts)


def test_ask_without_reachable_llm_says_so(store, capsys, monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:9")  # discard port: nothing listens
    assert main(["ask", "日本で梅雨がないのは北海道とどこか。", "--store", store, "--llm", "auto"]) == 0
    assert "no LLM reachable" in capsys.readouterr().err


DATA = Path(os.environ.get("RAGSPINE_DATA", Path(__file__).resolve().parents[2].parent / "shared" / "data"))


@pytest.mark.shared_data
@pytest.mark.skipif(not (DATA / "jsquad-valid").is_dir(), reason=f"shared evaluation data not found at {DATA}")
def test_ask_on_jsquad_store_cites_the_tsuyu_article(tmp_path, capsys, monkeypatch):
    assert main(["ingest", str(DATA / "jsquad-valid" / "docs"), "--store", str(tmp_path / "S")]) == 0
    capsys.readouterr()
    question = "日本で梅雨がないのは北海道とどこか。"
    assert main(["ask", question, "--store", str(tmp_path / "S"), "--llm", "none", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert "小笠原諸島" in record["answer"]
    assert "jsquad-valid-a0000" in {c["doc_id"] for c in record["citations"]}
    fake = RoutingFakeChatModel(prompts=[])
    monkeypatch.setattr(chat_models, "make_chat_model", lambda spec=None, **kw: fake)
    assert main(["ask", question, "--store", str(tmp_path / "S"), "--llm", "fake:m", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["answer"] == "小笠原諸島です [1]。" and record["citations"][0]["doc_id"] == "jsquad-valid-a0000"


# -- regressions from the second fresh-user trial -----------------------------------------------------------------
def test_regression_ask_keeps_filters_unless_relaxing_is_asked_for(store, capsys):
    argv = ["ask", "日本で梅雨がないのは北海道とどこか。", "--store", store, "--llm", "none", "--json",
            "--filter", "lang=en"]
    assert main(argv) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["refused"] and record["citations"] == []  # no document has lang=en: refuse, never widen
    assert "drop_filters" not in [t["step"] for t in record["trace"]]
    assert record["filters_dropped"] is False and record["dropped_filters"] is None
    assert main(argv + ["--relax-filters"]) == 0
    cap = capsys.readouterr()
    record = json.loads(cap.out)
    assert record["citations"][0]["doc_id"] == "tsuyu" and "so they were dropped" in cap.err
    assert record["filters_dropped"] is True and record["dropped_filters"] == {"lang": {"eq": "en"}}
    assert '{"lang": {"eq": "en"}}' in cap.err  # the note names what was dropped


@pytest.mark.parametrize("graph", ["self_rag", "simple"])
def test_regression_relax_filters_on_a_graph_that_never_drops_them_is_an_error(store, graph, capsys):
    """``--relax-filters`` was silently ignored by the graphs that have no drop-filters correction."""
    argv = ["ask", "日本で梅雨がないのは北海道とどこか。", "--store", store, "--llm", "none", "--graph", graph,
            "--filter", "lang=en", "--relax-filters"]
    assert main(argv) == 2
    assert f"--relax-filters: the {graph} graph never drops filters" in capsys.readouterr().err


@pytest.mark.parametrize("question", ["the", "What?", "です", "の"])
def test_regression_contentless_questions_are_refused(store, capsys, question):
    assert main(["ask", question, "--store", store, "--llm", "none", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["refused"] and record["citations"] == []


def test_regression_explicit_unusable_llm_is_an_error(store, capsys):
    assert main(["ask", "梅雨", "--store", store, "--llm", "nosuchprovider:model"]) == 2
    assert "--llm 'nosuchprovider:model'" in capsys.readouterr().err
