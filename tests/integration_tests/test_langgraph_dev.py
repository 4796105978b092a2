"""`langgraph dev` (the `dev` extra: langgraph-cli[inmem]) serves graphs/langgraph.json on loopback: the server
starts, lists an assistant per graph, answers /assistants/{id}/schemas, and stops.  Skipped, with the reason, when
the in-memory server is not installed."""

import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

GRAPHS = Path(__file__).resolve().parents[2] / "graphs"
GRAPH_IDS = ("corrective_rag", "adaptive_rag", "self_rag")

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("langgraph_api") is None or importlib.util.find_spec("langgraph_cli") is None,
    reason="langgraph dev needs the `dev` extra (pip install 'langchain-ragspine[dev]': langgraph-cli[inmem]); "
    "langgraph-api is not installed here",
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _request(url: str, body: dict | None = None) -> object:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as response:
        return json.loads(response.read().decode())


@pytest.fixture
def server(tmp_path):
    yield from _serve(tmp_path, {})


def _serve(tmp_path: Path, settings: dict[str, str]):
    """``langgraph dev`` on a free loopback port with ``RAGSPINE_LLM=none`` and ``settings``; yields its URL."""
    exe = shutil.which("langgraph", path=str(Path(sys.executable).parent)) or shutil.which("langgraph")
    if exe is None:
        pytest.skip("the langgraph command (langgraph-cli) is not on PATH")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGSPINE_")}
    env.update({"RAGSPINE_LLM": "none", "LANGSMITH_TRACING": "false", "LANGGRAPH_CLI_NO_ANALYTICS": "1"})
    env.update(settings)
    log = (tmp_path / "langgraph-dev.log").open("w")
    proc = subprocess.Popen(
        [exe, "dev", "--config", str(GRAPHS / "langgraph.json"), "--host", "127.0.0.1", "--port", str(port),
         "--no-browser", "--no-reload"],
        cwd=GRAPHS, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180  # a readiness wait, not a timing assertion
        while True:
            if proc.poll() is not None:
                pytest.fail(f"langgraph dev exited with {proc.returncode}:\n{(tmp_path / 'langgraph-dev.log').read_text()}")
            try:
                _request(f"{base}/ok")
                break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if time.monotonic() > deadline:
                    pytest.fail(f"langgraph dev did not start:\n{(tmp_path / 'langgraph-dev.log').read_text()}")
                time.sleep(0.5)
        yield base
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()


def _assistants(base: str) -> dict[str, str]:
    found = _request(f"{base}/assistants/search", {"limit": 50})
    assert isinstance(found, list)
    return {a["graph_id"]: a["assistant_id"] for a in found}


@pytest.mark.subprocess
def test_langgraph_dev_serves_every_graph_and_its_schemas(server):
    assistants = _assistants(server)
    assert set(GRAPH_IDS) <= set(assistants)
    for graph_id in GRAPH_IDS:
        schemas = _request(f"{server}/assistants/{assistants[graph_id]}/schemas")
        assert isinstance(schemas, dict) and schemas["graph_id"] == graph_id
        assert schemas["state_schema"] and "question" in schemas["state_schema"].get("properties", {})


@pytest.mark.subprocess
def test_langgraph_dev_input_and_output_schemas_are_not_null(server):
    assistants = _assistants(server)
    for graph_id in GRAPH_IDS:
        schemas = _request(f"{server}/assistants/{assistants[graph_id]}/schemas")
        assert schemas["input_schema"] and schemas["output_schema"], graph_id


def _ingest(corpus: Path, store: Path) -> None:
    """``ragspine ingest`` in a process of its own (neither the server's nor this one)."""
    env = {**os.environ, "PYTHONPATH": str(GRAPHS.parent)}
    done = subprocess.run([sys.executable, "-m", "langchain_ragspine", "ingest", str(corpus), "--store", str(store)],
                          env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


@pytest.fixture
def served_store(tmp_path):
    corpus, store = tmp_path / "corpus", tmp_path / "S"
    corpus.mkdir()
    (corpus / "secret.md").write_text("# Valley\n\nCANARYSRV9 is the code of the valley rivers.", "utf-8")
    (corpus / "public.md").write_text("# Rivers\n\nThe valley rivers flow north in spring.", "utf-8")
    _ingest(corpus, store)
    for base in _serve(tmp_path, {"RAGSPINE_STORE": str(store)}):
        yield base, corpus, store


@pytest.mark.subprocess
def test_the_served_graph_stops_answering_with_a_canary_relabelled_while_it_runs(served_store):
    """Issue 25: the server keeps its graph (and retriever) for its lifetime; a relabel or a deletion ingested by
    another process takes effect on the next run, without a restart."""
    base, corpus, store = served_store
    assistant = _assistants(base)["corrective_rag"]

    def ask() -> str:
        out = _request(f"{base}/runs/wait", {"assistant_id": assistant, "input": {
            "question": "What is the code of the valley rivers?", "filters": None}})
        assert isinstance(out, dict) and out.get("documents"), out
        return json.dumps([out.get("answer"), out.get("citations"), out.get("documents")], ensure_ascii=False)

    assert "CANARYSRV9" in ask()  # not vacuous: served while public
    (corpus / "secret.json").write_text('{"sensitivity": "RESTRICTED"}', "utf-8")
    _ingest(corpus, store)
    assert "CANARYSRV9" not in ask()
    (corpus / "secret.json").unlink()
    _ingest(corpus, store)
    assert "CANARYSRV9" in ask()  # public again: served again by the same server
    (corpus / "secret.md").unlink()
    _ingest(corpus, store)
    assert "CANARYSRV9" not in ask()


@pytest.fixture
def chat_store(tmp_path):
    corpus, store = tmp_path / "corpus", tmp_path / "S"
    corpus.mkdir()
    (corpus / "rivers.md").write_text("# Rivers\n\nThe valley rivers flow north in spring.", "utf-8")
    (corpus / "whys.md").write_text("# The five whys\n\nWhy is that a question we ask? The five whys repeat why.",
                                    "utf-8")
    _ingest(corpus, store)
    yield from _serve(tmp_path, {"RAGSPINE_STORE": str(store)})


@pytest.mark.subprocess
def test_a_served_thread_condenses_follow_ups_and_carries_citations_on_the_messages(chat_store):
    """Issue 27: a thread on the server (its own checkpointer, messages as JSON): the reply's citations survive
    the round trip in ``response_metadata``, and the follow-up is searched with the first question's words."""
    base = chat_store
    assistant = _assistants(base)["corrective_rag"]
    thread = _request(f"{base}/threads", {})
    assert isinstance(thread, dict)

    def say(text: str) -> dict:
        out = _request(f"{base}/threads/{thread['thread_id']}/runs/wait", {
            "assistant_id": assistant, "input": {"messages": [{"type": "human", "content": text}]}})
        assert isinstance(out, dict), out
        return out

    one = say("Which way do the valley rivers flow?")
    reply = one["messages"][-1]
    assert reply["type"] == "ai" and "[1]" in reply["content"]
    assert reply["response_metadata"]["citations"][0]["title"] == "Rivers"
    two = say("Why is that?")
    assert two["search_query"].startswith("Why is that?") and "rivers" in two["search_query"]
    assert [m["type"] for m in two["messages"]] == ["human", "ai", "human", "ai"]
    assert two["messages"][-1]["response_metadata"]["citations"][0]["title"] == "Rivers"
