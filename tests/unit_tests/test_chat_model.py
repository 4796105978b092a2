"""make_chat_model / llm_is_reachable: construction only, never the network (the unreachable case is a closed port)."""

import socket
import sys

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from langchain_ragspine.chat_models import llm_is_reachable, make_chat_model
from langchain_ragspine.settings import ollama_base_url
from langchain_ragspine.specs import DEFAULT_CHAT_MODEL


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    monkeypatch.delenv("RAGSPINE_LLM", raising=False)
    monkeypatch.delenv("OLLAMA_HOST", raising=False)


def test_no_llm_by_default_and_for_none():
    assert make_chat_model() is None
    for spec in ("none", "NONE", " None ", ""):
        assert make_chat_model(spec) is None


def test_env_none_means_no_llm(monkeypatch):
    monkeypatch.setenv("RAGSPINE_LLM", "none")
    assert make_chat_model() is None


def test_a_chat_model_passes_through():
    llm = FakeListChatModel(responses=["x"])
    assert make_chat_model(llm) is llm


@pytest.mark.parametrize("spec", ["default", "ollama", "DEFAULT", DEFAULT_CHAT_MODEL])
def test_default_is_ollama_qwen(spec):
    from langchain_ollama import ChatOllama

    llm = make_chat_model(spec)
    assert isinstance(llm, ChatOllama)
    assert llm.model == "qwen2.5:7b"
    assert llm.base_url == "http://localhost:11434"
    assert DEFAULT_CHAT_MODEL == "ollama:qwen2.5:7b"


def test_env_spec_and_ollama_host_without_scheme(monkeypatch):
    monkeypatch.setenv("RAGSPINE_LLM", "ollama:llama3.2:3b")
    monkeypatch.setenv("OLLAMA_HOST", "gpu-box:11434")
    llm = make_chat_model()
    assert llm.model == "llama3.2:3b"
    assert llm.base_url == "http://gpu-box:11434"
    assert ollama_base_url() == "http://gpu-box:11434"


def test_explicit_kwargs_win_over_defaults(monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", "https://ollama.example:443/")
    assert make_chat_model("ollama:qwen2.5:7b").base_url == "https://ollama.example:443"
    llm = make_chat_model("ollama:qwen2.5:7b", base_url="http://other:1", temperature=0.5)
    assert llm.base_url == "http://other:1"
    assert llm.temperature == 0.5


def test_bad_specs():
    with pytest.raises(ValueError, match="ollama:<model>"):
        make_chat_model("ollama:")
    with pytest.raises(TypeError):
        make_chat_model(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError):  # init_chat_model cannot infer a provider for this
        make_chat_model("no-such-provider-model-xyz")


def test_missing_ollama_package_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "langchain_ollama", None)  # makes `import langchain_ollama` fail
    with pytest.raises(ImportError, match=r"langchain-ragspine\[ollama\]"):
        make_chat_model("default")


def _closed_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_reachability_without_network():
    assert llm_is_reachable(None) is False
    assert llm_is_reachable(FakeListChatModel(responses=["x"])) is True  # not probed
    llm = make_chat_model("ollama:qwen2.5:7b", base_url=f"http://127.0.0.1:{_closed_port()}")
    assert llm_is_reachable(llm, timeout=0.5) is False


# -- one resolver (issue 26, H3): resolve_chat_model names where a spec came from; builders build with make_chat_model
def test_resolve_chat_model_names_where_an_unusable_spec_came_from(monkeypatch):
    from langchain_ragspine.chat_models import resolve_chat_model

    with pytest.raises(ValueError, match=r"^chat model spec 'nosuchprovider:model': "):
        resolve_chat_model("nosuchprovider:model")
    with pytest.raises(ValueError, match=r"^--llm 'nosuchprovider:model': "):  # the CLI's option
        resolve_chat_model(" nosuchprovider:model ", setting="--llm")
    monkeypatch.setenv("RAGSPINE_LLM", "nosuchprovider:model")
    for setting in (None, "--llm"):  # no spec given: it came from the variable, whatever the caller's option
        with pytest.raises(ValueError, match=r"^RAGSPINE_LLM='nosuchprovider:model': "):
            resolve_chat_model(None, setting=setting)


def test_the_cli_resolves_through_the_library_resolver(monkeypatch, capsys):
    from langchain_ragspine.cli import _resolve_llm

    with pytest.raises(ValueError, match=r"^--llm 'nosuchprovider:model': "):
        _resolve_llm("nosuchprovider:model")
    monkeypatch.setenv("RAGSPINE_LLM", "nosuchprovider:model")
    with pytest.raises(ValueError, match=r"^RAGSPINE_LLM='nosuchprovider:model': "):  # was "RAGSPINE_LLM: chat ..."
        _resolve_llm(None)
    monkeypatch.setenv("OLLAMA_HOST", f"http://127.0.0.1:{_closed_port()}")
    llm, how = _resolve_llm(DEFAULT_CHAT_MODEL)
    assert llm is None and f"no LLM reachable for {DEFAULT_CHAT_MODEL}" in how
    assert capsys.readouterr().err.startswith(f"warning: no LLM reachable for {DEFAULT_CHAT_MODEL}")


def _graph_llm(llm):
    from langchain_core.documents import Document

    from langchain_ragspine.graphs.nodes import make_parts
    from langchain_ragspine.retrievers import BM25Retriever

    retriever = BM25Retriever.from_documents([Document("梅雨", metadata={"chunk_id": "a#0"})])
    return make_parts(retriever, llm, max_retries=1, graders=None, answer_chain=None, k=None, max_docs=6,
                      lost_in_the_middle=False, tokenizer="auto", prompts=None, compressors=None).llm


def test_a_graph_builds_its_model_with_make_chat_model_and_none_never_reads_the_environment(monkeypatch):
    monkeypatch.setenv("RAGSPINE_LLM", DEFAULT_CHAT_MODEL)
    assert _graph_llm(None) is None  # a builder's llm=None is no LLM: RAGSPINE_LLM is for the entry points
    assert _graph_llm("none") is None
    fake = FakeListChatModel(responses=["x"])
    assert _graph_llm(fake) is fake
    assert _graph_llm(DEFAULT_CHAT_MODEL).model == "qwen2.5:7b"  # a spec: make_chat_model's model
    with pytest.raises(TypeError, match=r"^llm must be a BaseChatModel, a chat model spec \(a string\) or None, got 42$"):
        _graph_llm(42)
    with pytest.raises(ValueError, match="ollama:<model>"):
        _graph_llm("ollama:")


def test_the_llm_reranker_takes_its_spec_else_llm_else_the_environment(monkeypatch):
    from langchain_ragspine.document_compressors.factory import make_reranker

    fake = FakeListChatModel(responses=["x"])
    assert make_reranker("llm", llm=fake).llm is fake
    assert make_reranker("llm:ollama:llama3.2:3b", llm=fake).llm.model == "llama3.2:3b"  # the spec wins
    monkeypatch.setenv("RAGSPINE_LLM", "ollama:llama3.2:3b")
    assert make_reranker("llm").llm.model == "llama3.2:3b"
    monkeypatch.setenv("RAGSPINE_LLM", "none")
    with pytest.raises(ValueError, match="the llm reranker needs a chat model"):
        make_reranker("llm")
