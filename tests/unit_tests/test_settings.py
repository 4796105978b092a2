"""One settings object: every RAGSPINE_* variable (and OLLAMA_HOST) reaches the code through RagSpineSettings, with
the precedence explicit argument > environment > .env > default, and the library never reads os.environ itself.

Each test runs in a temporary working directory, so ``.env`` is the one the test writes."""

import ast
import json
import re
from pathlib import Path

import pytest

from langchain_ragspine.chat_models import make_chat_model, resolve_chat_model
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.embeddings.factory import make_embeddings
from langchain_ragspine.settings import (
    DEFAULT_K,
    DEFAULT_LLM,
    RagSpineSettings,
    get_settings,
    ollama_base_url,
)
from langchain_ragspine.specs import DEFAULT_CHAT_MODEL
from tests.harness import clear_settings

PACKAGE = Path(__file__).resolve().parents[2] / "langchain_ragspine"

#: field -> (default, value in .env, value in the environment, explicit argument).  Four distinct values each.
CASES: dict[str, tuple[object, str, str, object]] = {
    "tokenizer": ("auto", "fugashi", "whitespace", "cjk"),
    "chunk_size": (480, "300", "200", 100),
    "chunk_overlap": (80, "30", "20", 10),
    "store": (None, "/from/dotenv", "/from/env", Path("/from/argument")),
    "k": (6, "9", "7", 5),
    "embedding": ("auto", "hashing:16", "hashing:8", "none"),
    "retrieval_mode": ("auto", "hybrid", "vector", "bm25"),
    "llm": ("none", "ollama:dotenv", "ollama:env", "auto"),
    "ollama_host": (None, "http://dotenv:1", "http://env:2", "http://argument:3"),
    "cache_dir": (None, "/cache/dotenv", "/cache/env", Path("/cache/argument")),
    "chunker": (None, "laws", "qa", "book"),
    "pg_pool_size": (4, "6", "3", 2),
    "pg_hnsw_threshold": (20_000, "500", "0", 1000),
    "pg_ef_search": (100, "64", "32", 200),
    "pg_statement_timeout": (30.0, "5", "0.25", 0),
    "query_transform": ("none", "hyde", "multi_query", "glossary"),
    "glossary": (None, "/glossary/dotenv.yaml", "/glossary/env.yaml", Path("/glossary/argument.yaml")),
    "query_deny_list": (None, "/deny/dotenv.txt", "/deny/env.txt", Path("/deny/argument.txt")),
    "reranker": ("none", "llm", "cross_encoder:/from/env", "llm:ollama:argument"),
    "postprocessor": ("none", "mmr", "lost_in_middle,compress", "compress"),
    "workers": (0, "3", "2", 1),
    "sparse": ("none", "e5", "splade:/from/env", "splade:/from/argument"),
    "contextual": (None, "on", "off", "true"),
    "answer_graph": ("corrective", "adaptive", "simple", "self_rag"),
    "relation_graph": ("none", "cooccurrence", "Cooccurrence", "COOCCURRENCE"),
    "raptor": ("none", "hashing", "hashing:16", "e5"),
}


def _env_name(field: str) -> str:
    return "OLLAMA_HOST" if field == "ollama_host" else f"RAGSPINE_{field.upper()}"


def _coerce(field: str, raw: object) -> object:
    """What the setting holds for a raw value (strings from env/.env are parsed into the field's type)."""
    if raw is None:
        return None
    if field in ("chunk_size", "chunk_overlap", "k", "pg_pool_size", "pg_hnsw_threshold", "pg_ef_search", "workers"):
        return int(raw)  # type: ignore[arg-type]
    if field == "pg_statement_timeout":
        return float(raw)  # type: ignore[arg-type]
    if field in ("store", "cache_dir", "glossary", "query_deny_list"):
        return Path(str(raw))
    return raw


@pytest.fixture
def clean(monkeypatch, tmp_path, dotenv):
    """No settings variable in the environment (not even the ones the tests pin) and an empty working directory
    whose .env is read (no .env yet)."""
    clear_settings(monkeypatch)
    return tmp_path


def _dotenv(directory: Path, **values: str) -> None:
    (directory / ".env").write_text("".join(f"{k}={v}\n" for k, v in values.items()), "utf-8")


def test_every_field_has_a_precedence_case():
    assert set(CASES) == set(RagSpineSettings.model_fields)


@pytest.mark.parametrize("field", sorted(CASES))
def test_precedence_argument_over_environment_over_dotenv_over_default(field, clean, monkeypatch):
    default, in_dotenv, in_env, argument = CASES[field]
    name = _env_name(field)
    assert getattr(RagSpineSettings(), field) == default
    _dotenv(clean, **{name: in_dotenv})
    assert getattr(get_settings(), field) == _coerce(field, in_dotenv)
    monkeypatch.setenv(name, in_env)
    assert getattr(get_settings(), field) == _coerce(field, in_env)
    assert getattr(RagSpineSettings(**{field: argument}), field) == _coerce(field, argument)


def test_settings_are_read_afresh_on_each_call(clean, monkeypatch):
    """Tests (and notebooks) change variables at run time: the next call sees the change."""
    assert get_settings().k == 6
    monkeypatch.setenv("RAGSPINE_K", "3")
    assert get_settings().k == 3
    _dotenv(clean, RAGSPINE_TOKENIZER="cjk")
    assert get_settings().tokenizer == "cjk"


def test_blank_paths_count_as_unset(clean, monkeypatch):
    monkeypatch.setenv("RAGSPINE_STORE", "")
    monkeypatch.setenv("RAGSPINE_CACHE_DIR", "  ")
    s = get_settings()
    assert s.store is None and s.cache_dir is None


@pytest.mark.parametrize(
    "name, value, message",
    [("RAGSPINE_RETRIEVAL_MODE", "fast", "unknown retrieval mode"), ("RAGSPINE_TOKENIZER", "mecab", "unknown tokenizer"),
     ("RAGSPINE_K", "0", "k must be an integer > 0"), ("RAGSPINE_CHUNK_SIZE", "big", "integer"),
     ("RAGSPINE_CHUNKER", "recursive", "unknown chunker")],
)
def test_bad_values_are_refused_from_dotenv_too(clean, name, value, message):
    """Refused where the setting is used (configured_setting), not when the settings are read: see
    test_settings_where_used.py."""
    from langchain_ragspine.configured import configured_setting

    _dotenv(clean, **{name: value})
    get_settings()
    with pytest.raises(ValueError, match=f"^{name}={value!r}: .*{message}"):
        configured_setting(name.removeprefix("RAGSPINE_").lower())


def test_a_bad_query_transform_is_refused_where_it_is_used(clean):
    """A query-only setting must not break ingest (which reads the settings too): RAGSPINE_QUERY_TRANSFORM is
    checked by configured_query_transform, with a message naming the variable, a suggestion and the choices."""
    from langchain_ragspine.specs import configured_query_transform

    _dotenv(clean, RAGSPINE_QUERY_TRANSFORM="Multi-Querry")
    assert get_settings().query_transform == "Multi-Querry"
    with pytest.raises(ValueError, match=r"^RAGSPINE_QUERY_TRANSFORM='Multi-Querry': unknown query transformation "
                                         r"'Multi-Querry' \(did you mean 'multi_query'\?\); choose one of none, hyde"):
        configured_query_transform()
    _dotenv(clean, RAGSPINE_QUERY_TRANSFORM="Multi-Query")  # held as written; checked where used, one spelling
    assert (get_settings().query_transform, configured_query_transform()) == ("Multi-Query", "multi_query")
    _dotenv(clean, RAGSPINE_QUERY_TRANSFORM=" ")
    assert get_settings().query_transform == "none" == configured_query_transform()


@pytest.mark.parametrize(("name", "value", "command", "message"), [
    ("RAGSPINE_TOKENIZER", "mecab", "ingest", "RAGSPINE_TOKENIZER='mecab': unknown tokenizer 'mecab'"),
    ("RAGSPINE_K", "abc", "search", "RAGSPINE_K='abc': k must be an integer > 0"),
    ("RAGSPINE_CHUNKER", "paragraf", "ingest", "RAGSPINE_CHUNKER='paragraf': unknown chunker 'paragraf' (did you "
                                               "mean 'paragraph'?)"),
])
def test_the_cli_names_the_variable_of_a_bad_setting(clean, monkeypatch, capsys, name, value, command, message):
    from langchain_ragspine.cli import main

    monkeypatch.setenv(name, value)
    argv = ["search", "q"] if command == "search" else ["ingest", str(_corpus(clean / "c"))]
    assert main([*argv, "--store", str(clean / "S")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ragspine: error: {message}")
    assert "pydantic" not in err and "validation error for" not in err


# -- the consumers: a value in .env is used, not only validated (regressions: RAGSPINE_EMBEDDING and
# RAGSPINE_RETRIEVAL_MODE in .env were validated, then ignored; OLLAMA_HOST and RAGSPINE_LLM were read from
# os.environ only) -------------------------------------------------------------------------------------------------
def _corpus(root: Path) -> Path:
    root.mkdir()
    (root / "tsuyu.md").write_text("# 梅雨\n\n梅雨は北海道と小笠原諸島を除く日本で見られる雨季である。", "utf-8")
    (root / "kyoto.md").write_text("# 京都\n\n京都の観光名所は清水寺と金閣寺である。\n\n" + "京都の寺。" * 40, "utf-8")
    (root / "en.md").write_text("# Rain\n\nThe rainy season in Japan is called tsuyu.", "utf-8")
    return root


def test_regression_embedding_in_dotenv_is_used(clean):
    _dotenv(clean, RAGSPINE_EMBEDDING="hashing:8")
    emb = make_embeddings()
    assert isinstance(emb, HashingEmbeddings) and emb.size == 8


def test_regression_retrieval_mode_and_embedding_in_dotenv_reach_ingest_and_open_retriever(clean):
    from langchain_ragspine.pipeline.ingest import ingest
    from langchain_ragspine.pipeline.sources import open_retriever
    from langchain_ragspine.retrievers import BM25Retriever, HybridRetriever

    corpus = _corpus(clean / "c")
    _dotenv(clean, RAGSPINE_EMBEDDING="hashing")
    assert ingest(corpus, clean / "S").dense is not None  # .env's embedding built the dense channel
    assert isinstance(open_retriever(clean / "S").current, HybridRetriever)
    _dotenv(clean, RAGSPINE_EMBEDDING="hashing", RAGSPINE_RETRIEVAL_MODE="bm25")
    assert isinstance(open_retriever(clean / "S").current, BM25Retriever)  # .env's mode was ignored before


def test_k_tokenizer_and_chunking_in_dotenv_reach_ingest_and_search(clean):
    from langchain_ragspine.pipeline.ingest import ingest
    from langchain_ragspine.pipeline.sources import open_retriever, search

    corpus = _corpus(clean / "c")
    plain = ingest(corpus, clean / "A").chunks
    _dotenv(clean, RAGSPINE_TOKENIZER="cjk", RAGSPINE_CHUNK_SIZE="60", RAGSPINE_CHUNK_OVERLAP="0", RAGSPINE_K="2")
    summary = ingest(corpus, clean / "B")
    assert summary.chunks > plain  # 60-char chunks
    assert json.loads((clean / "B" / "index.json").read_text("utf-8"))["tokenizer"] == "cjk"
    retriever = open_retriever(clean / "B")
    assert retriever.k == 2 and len(search(retriever, "京都の寺")) == 2


def test_llm_and_ollama_host_in_dotenv_reach_the_chat_model(clean):
    pytest.importorskip("langchain_ollama")
    _dotenv(clean, RAGSPINE_LLM="ollama:llama3.2:3b", OLLAMA_HOST="gpu-box:11434")
    llm = make_chat_model()
    assert llm.model == "llama3.2:3b" and llm.base_url == "http://gpu-box:11434"
    assert ollama_base_url() == "http://gpu-box:11434"
    emb = make_embeddings("ollama:bge-m3")
    assert emb.base_url == "http://gpu-box:11434"


def test_cache_dir_in_dotenv_reaches_the_onnx_cache(clean):
    from langchain_ragspine.embeddings.e5_onnx import default_cache_dir

    _dotenv(clean, RAGSPINE_CACHE_DIR=str(clean / "models"))
    assert default_cache_dir() == clean / "models"


def test_store_in_dotenv_reaches_the_cli(clean, capsys):
    from langchain_ragspine.cli import main

    corpus = _corpus(clean / "c")
    _dotenv(clean, RAGSPINE_STORE=str(clean / "S"))
    assert main(["ingest", str(corpus)]) == 0
    capsys.readouterr()
    assert main(["search", "清水寺", "--json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[0])["doc_id"] == "kyoto"


# -- one k, one LLM setting: documented meaning per entry point ------------------------------------------------------
def test_k_unset_is_each_entry_points_default_and_set_is_everyones(clean, monkeypatch):
    from langchain_ragspine.cli import _settings_defaults, build_parser

    def parsed(argv: list[str]) -> int:
        args = build_parser().parse_args(argv)
        _settings_defaults(args)  # an option left out: RAGSPINE_K, read (and checked) where k is used
        return int(args.k)

    def parsed_k() -> dict[str, int]:
        return {
            "search": parsed(["search", "q", "--store", "S"]),
            "ask": parsed(["ask", "q", "--store", "S"]),
            "demo": parsed(["demo"]),
        }

    assert DEFAULT_K == 6 and parsed_k() == {"search": 6, "ask": 6, "demo": 6}  # one default k
    monkeypatch.setenv("RAGSPINE_K", "5")
    assert parsed_k() == {"search": 5, "ask": 5, "demo": 5}
    assert parsed(["search", "q", "--store", "S", "-k", "2"]) == 2  # an option wins


def test_retriever_classes_default_to_the_one_k_and_ignore_the_settings(clean, monkeypatch):
    from langchain_core.documents import Document

    from langchain_ragspine.retrievers import BM25Retriever

    monkeypatch.setenv("RAGSPINE_K", "9")
    docs = [Document(page_content=f"梅雨 {i}", metadata={"chunk_id": f"d#{i}"}) for i in range(6)]
    assert BM25Retriever.from_documents(docs).k == DEFAULT_K == 6  # issue 26, D1: one default k, not LangChain's 4


def test_llm_unset_means_no_llm_everywhere(clean, monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:9")  # nothing listens
    assert DEFAULT_LLM == "none"  # one default: before, the library said "none" and the CLI "auto"
    assert make_chat_model() is None
    assert resolve_chat_model().llm is None and "no LLM reachable" not in resolve_chat_model().how
    from langchain_ragspine.cli import _resolve_llm

    assert _resolve_llm(None)[1] == resolve_chat_model().how  # ragspine ask / demo: the same default
    _dotenv(clean, RAGSPINE_LLM="auto")  # one setting: it decides for every entry point
    auto = resolve_chat_model()
    assert auto.llm is None and f"no LLM reachable for {DEFAULT_CHAT_MODEL}" in auto.how and auto.warning is None
    assert _resolve_llm(None)[1] == auto.how


def test_every_spec_means_the_same_in_the_library_and_the_cli(clean, monkeypatch):
    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:9")
    assert make_chat_model("auto") is None  # was an init_chat_model error: auto now means the same everywhere
    named = resolve_chat_model("ollama:qwen2.5:7b")
    assert named.llm is None and "no LLM reachable" in (named.warning or "")
    with pytest.raises(ValueError, match="nosuchprovider"):
        resolve_chat_model("nosuchprovider:model")


def test_cli_ask_without_llm_setting_uses_no_llm_and_with_dotenv_auto_tries_one(clean, capsys, monkeypatch):
    from langchain_ragspine.cli import main
    from langchain_ragspine.pipeline.ingest import ingest

    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:9")
    ingest(_corpus(clean / "c"), clean / "S")
    assert main(["ask", "清水寺はどこ", "--store", str(clean / "S")]) == 0
    err = capsys.readouterr().err
    assert "deterministic path" in err and "no LLM reachable" not in err  # no probe: the LLM is opt-in
    _dotenv(clean, RAGSPINE_LLM="auto")
    assert main(["ask", "清水寺はどこ", "--store", str(clean / "S")]) == 0
    assert f"no LLM reachable for {DEFAULT_CHAT_MODEL}" in capsys.readouterr().err


# -- the rule itself -------------------------------------------------------------------------------------------------
def _environment_reads(path: Path) -> list[str]:
    """``os.environ`` / ``os.getenv`` / ``environ`` imported from os, anywhere in a module."""
    tree = ast.parse(path.read_text("utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv", "environb", "putenv"):
            found.append(f"{path.name}:{node.lineno} os.{node.attr}")
        if isinstance(node, ast.ImportFrom) and node.module == "os":
            found += [f"{path.name}:{node.lineno} from os import {a.name}" for a in node.names
                      if a.name in ("environ", "getenv", "environb", "putenv")]
    return found


def test_the_library_never_reads_the_environment_itself():
    # the settings module is the one reader: pydantic-settings reads the values, and it lists the RAGSPINE_* names
    # to refuse one that is no setting (settings.check_setting_names)
    reads = [r for path in sorted(PACKAGE.rglob("*.py")) for r in _environment_reads(path)]
    assert [r for r in reads if not r.startswith("settings.py:")] == [], (
        "read configuration through langchain_ragspine.settings.get_settings()")
    assert len(reads) == 1  # that one place: the names of the environment


def test_the_rule_checker_finds_environment_reads(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("import os\nfrom os import getenv\nx = os.environ.get('A')\n", "utf-8")
    assert len(_environment_reads(probe)) == 2


@pytest.mark.parametrize("name, hint", [
    ("RAGSPINE_TOKENISER", "did you mean RAGSPINE_TOKENIZER?"), ("ragspine_chunksize", "did you mean RAGSPINE_CHUNK_SIZE?"),
    ("RAGSPINE_OLLAMA_HOST", "did you mean OLLAMA_HOST?"), ("RAGSPINE_ZZZ", "not a langchain-ragspine setting;"),
])
def test_an_unknown_ragspine_variable_is_an_error_naming_it(
    name: str, hint: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression (trial of 5d1ab81): a misspelt ``RAGSPINE_TOKENISER=cjk`` was silently ignored (the default
    tokenizer ran).  An unknown ``RAGSPINE_*`` variable — in the environment or in ``.env`` — is an error naming it
    and the closest setting; the repository tools' own variables (``RAGSPINE_DATA``, …) are not settings and pass."""
    from langchain_ragspine.cli import main
    from langchain_ragspine.settings import TOOL_VARIABLES, get_settings

    for tool in TOOL_VARIABLES:
        monkeypatch.setenv(tool, "1")
    get_settings()  # tool variables are fine
    monkeypatch.setenv(name, "cjk")
    with pytest.raises(ValueError, match=re.escape(name) + ".*" + re.escape(hint)):
        get_settings()
    assert main(["search", "x", "--store", str(tmp_path)]) == 2
    assert name in capsys.readouterr().err
    monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text(f"{name}=cjk\n", "utf-8")
    monkeypatch.setitem(RagSpineSettings.model_config, "env_file", ".env")
    with pytest.raises(ValueError, match=re.escape(name)):
        get_settings()


def test_the_name_check_parses_an_unchanged_env_file_once_and_an_edited_one_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Review of issue 26: the unknown-name check parsed ``.env`` a second time on every ``get_settings()`` (after
    pydantic-settings' own read).  Its names are kept by the file's identity, so an unchanged file is parsed once,
    and an edit (even one of the same size) is seen at the next call."""
    import dotenv

    from langchain_ragspine.settings import get_settings

    parsed: list[str] = []
    real = dotenv.dotenv_values

    def counting(path: object = None, *args: object, **kwargs: object) -> object:
        parsed.append(str(path))
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(dotenv, "dotenv_values", counting)
    monkeypatch.chdir(tmp_path)
    env = tmp_path / ".env"
    env.write_text("RAGSPINE_K=5\n", "utf-8")
    monkeypatch.setitem(RagSpineSettings.model_config, "env_file", ".env")
    assert [get_settings().k for _ in range(3)] == [5, 5, 5]
    assert parsed.count(".env") == 1  # the name check's parse (pydantic-settings reads the file itself)
    env.write_text("RAGSPINE_Q=5\n", "utf-8")  # same size, another name
    with pytest.raises(ValueError, match="RAGSPINE_Q is not a langchain-ragspine setting"):
        get_settings()
    env.unlink()
    assert get_settings().k == 6


def test_an_unknown_or_mistyped_keyword_of_the_settings_is_an_error() -> None:
    """Regression (trial of 5d1ab81): ``RagSpineSettings(kk=3)`` was ignored and ``RagSpineSettings(k=True)`` held
    ``1``."""
    with pytest.raises(ValueError, match=r"'kk' is not a langchain-ragspine setting \(did you mean k\?\)"):
        RagSpineSettings(kk=3)
    with pytest.raises(ValueError, match="k must be a number, got True"):
        RagSpineSettings(k=True)
    with pytest.raises(ValueError, match="tokenizer must be a string, got False"):
        RagSpineSettings(tokenizer=False)
    assert RagSpineSettings(k=3).k == 3 and RagSpineSettings(OLLAMA_HOST="http://h:1").ollama_host == "http://h:1"


def test_a_store_that_is_no_string_is_refused_without_quoting_it() -> None:
    """Regression (review of the trial of bf21278): pydantic's error for ``store=[url]`` quoted the value, the URL's
    password with it; a path-like setting that is neither a string nor a path is a TypeError naming the field."""
    for field in ("store", "cache_dir", "glossary", "query_deny_list"):
        with pytest.raises(TypeError, match=rf"^{field} must be a string or a path, got list$") as info:
            RagSpineSettings(**{field: ["postgresql://u:pw9@h/db"]})
        assert "pw9" not in str(info.value)
    assert RagSpineSettings(store="postgresql://u:pw9@h/db").store == "postgresql://u:pw9@h/db"


# -- the design's switches (issue 28, part 5): one setting each, the design's other names refused naming it --------
@pytest.mark.parametrize(("name", "use"), [("RAGSPINE_ADAPTIVE", "RAGSPINE_ANSWER_GRAPH=adaptive"),
                                           ("RAGSPINE_CORRECTIVE", "RAGSPINE_ANSWER_GRAPH=corrective"),
                                           ("RAGSPINE_QUERY_DECOMPOSE", "RAGSPINE_QUERY_TRANSFORM=decompose"),
                                           ("RAGSPINE_COLPALI", "out of this package's scope")])
def test_a_design_switch_name_is_refused_naming_the_one_setting(monkeypatch, name, use):
    """They were silently ignored (before the name check) — now each names the setting that does it."""
    monkeypatch.setenv(name, "1")
    with pytest.raises(ValueError, match=f"{name} is the RAGSpine design's name.*{use}"):
        get_settings()


def test_contextual_and_answer_graph_are_settings_checked_where_used(monkeypatch, tmp_path):
    from langchain_ragspine.configured import configured_setting
    from langchain_ragspine.graphs import GRAPH_BUILDERS
    from langchain_ragspine.specs import ANSWER_GRAPHS

    assert tuple(GRAPH_BUILDERS) == ANSWER_GRAPHS
    assert configured_setting("contextual") is None and configured_setting("answer_graph") == "corrective"
    for raw, want in (("on", True), ("OFF", False), ("1", True), ("no", False), ("", None)):
        monkeypatch.setenv("RAGSPINE_CONTEXTUAL", raw)
        assert configured_setting("contextual") is want
    monkeypatch.setenv("RAGSPINE_CONTEXTUAL", "maybe")
    with pytest.raises(ValueError, match="RAGSPINE_CONTEXTUAL='maybe': expected on or off"):
        configured_setting("contextual")
    monkeypatch.setenv("RAGSPINE_ANSWER_GRAPH", "Self-RAG")
    assert configured_setting("answer_graph") == "self_rag"
    monkeypatch.setenv("RAGSPINE_ANSWER_GRAPH", "adaptiv")
    with pytest.raises(ValueError, match=r"RAGSPINE_ANSWER_GRAPH='adaptiv': unknown answer graph .*'adaptive'"):
        configured_setting("answer_graph")


def test_ragspine_contextual_switches_ingest_headers_on(monkeypatch, tmp_path):
    import json

    from langchain_ragspine.pipeline.ingest import ingest

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("# 梅雨\n\n梅雨は六月に始まる。\n", "utf-8")
    monkeypatch.setenv("RAGSPINE_CONTEXTUAL", "on")
    ingest(corpus, tmp_path / "on", progress=False, embedding="none")
    assert "contextual" in json.loads((tmp_path / "on" / "index.json").read_text("utf-8"))
    ingest(corpus, tmp_path / "off", progress=False, embedding="none", contextual=False)  # the argument wins
    assert "contextual" not in json.loads((tmp_path / "off" / "index.json").read_text("utf-8"))


def test_the_readme_switch_table_names_real_settings_and_every_design_name():
    """The README's one table of switches (issue 28, part 5) cannot drift: each setting it names is a setting, each
    alias it lists parses to its spec, and every refused design name is in the text."""
    from langchain_ragspine.settings import DESIGN_SWITCHES, RagSpineSettings, setting_variable
    from langchain_ragspine.specs import EMBEDDING_ALIASES, RERANKER_ALIASES

    readme = (PACKAGE.parent / "README.md").read_text("utf-8")
    section = readme.split("## Switches: every opt-in stage, one setting", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| stage")]
    named = {m for row in rows for m in re.findall(r"`(RAGSPINE_[A-Z_]+)`", row.split("|")[2])}
    variables = {setting_variable(f) for f in RagSpineSettings.model_fields}
    assert len(rows) >= 10 and named <= variables, named - variables
    for name in DESIGN_SWITCHES:
        assert f"`{name}`" in section, name
    from langchain_ragspine.pipeline.modes import mode_aliases, mode_names

    (mode_row,) = [row for row in rows if "`RAGSPINE_RETRIEVAL_MODE`" in row]
    for name in (*mode_names(), *mode_aliases()):  # a mode added without its row fails here (RAPTOR's did, once)
        assert f"`{name}`" in mode_row, name
    for alias in (*EMBEDDING_ALIASES, *RERANKER_ALIASES):
        assert f"`{alias.replace('_', '-')}" in section, alias  # sentence_transformers: a spelling of the dashed one
