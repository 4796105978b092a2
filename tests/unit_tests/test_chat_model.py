"""make_chat_model / llm_is_reachable: construction only, never the network (the unreachable case is a closed port)."""

import socket
import sys

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from langchain_ragspine.config import DEFAULT_CHAT_MODEL, llm_is_reachable, make_chat_model, ollama_base_url


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
