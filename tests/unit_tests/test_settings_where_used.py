"""A RAGSPINE_* setting is checked where it is used: a bad value never breaks a command or function that does not use
it, and where it is used it fails with one line naming the variable, the value and what is expected.

Regressions: ``RAGSPINE_K=abc ragspine ingest DIR --store S`` (and ``indexing.ingest``) failed although ingest never
uses k; ``RAGSPINE_TOKENIZER=mecab`` (or a bad chunk size, worker count or pg_* number) broke ``ragspine search``,
``open_retriever`` and every factory that reads the settings (``make_chat_model``, ``make_query_transform`` …),
though none of them reads it: every value was validated when the settings were read.
"""

import json
from pathlib import Path

import pytest
from langchain_core.documents import Document

from langchain_ragspine.chat_models import make_chat_model
from langchain_ragspine.cli import main
from langchain_ragspine.configured import configured_setting
from langchain_ragspine.embeddings.factory import make_embeddings
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.modes import resolve_mode
from langchain_ragspine.pipeline.sources import open_retriever, search
from langchain_ragspine.retrievers import BM25Retriever
from langchain_ragspine.retrievers.transforms import make_query_transform
from langchain_ragspine.settings import CHECKED_WHERE_USED, RagSpineSettings, get_settings
from tests.harness import clear_settings

#: variable -> (a bad value, the head of the error where it is used)
BAD: dict[str, tuple[str, str]] = {
    "RAGSPINE_TOKENIZER": ("mecab", "RAGSPINE_TOKENIZER='mecab': unknown tokenizer 'mecab'; choose one of ['auto'"),
    "RAGSPINE_CHUNK_SIZE": ("big", "RAGSPINE_CHUNK_SIZE='big': chunk_size must be an integer > 0"),
    "RAGSPINE_CHUNK_OVERLAP": ("-1", "RAGSPINE_CHUNK_OVERLAP='-1': chunk_overlap must be an integer >= 0"),
    "RAGSPINE_CHUNKER": ("paragraf", "RAGSPINE_CHUNKER='paragraf': unknown chunker 'paragraf' (did you mean "
                                     "'paragraph'?); choose one of paragraph"),
    "RAGSPINE_K": ("abc", "RAGSPINE_K='abc': k must be an integer > 0"),
    "RAGSPINE_RETRIEVAL_MODE": ("fast", "RAGSPINE_RETRIEVAL_MODE='fast': unknown retrieval mode 'fast'; choose one "
                                        "of auto, hybrid"),
    "RAGSPINE_PG_POOL_SIZE": ("0", "RAGSPINE_PG_POOL_SIZE='0': pg_pool_size must be an integer > 0"),
    "RAGSPINE_PG_HNSW_THRESHOLD": ("many", "RAGSPINE_PG_HNSW_THRESHOLD='many': pg_hnsw_threshold must be an "
                                           "integer >= 0"),
    "RAGSPINE_PG_EF_SEARCH": ("1.5", "RAGSPINE_PG_EF_SEARCH='1.5': pg_ef_search must be an integer > 0"),
    "RAGSPINE_PG_STATEMENT_TIMEOUT": ("30s", "RAGSPINE_PG_STATEMENT_TIMEOUT='30s': pg_statement_timeout must be a "
                                             "number of seconds from 0 (no limit) to 2147483"),
    "RAGSPINE_QUERY_TRANSFORM": ("hide", "RAGSPINE_QUERY_TRANSFORM='hide': unknown query transformation 'hide' "
                                         "(did you mean 'hyde'?)"),
    "RAGSPINE_RERANKER": ("bogus", "RAGSPINE_RERANKER='bogus': unknown reranker 'bogus'"),
    "RAGSPINE_POSTPROCESSOR": ("mmx", "RAGSPINE_POSTPROCESSOR='mmx': unknown post-processing step 'mmx'"),
    "RAGSPINE_WORKERS": ("two", "RAGSPINE_WORKERS='two': workers must be an integer >= 0"),
    "RAGSPINE_CONTEXTUAL": ("maybe", "RAGSPINE_CONTEXTUAL='maybe': expected on or off"),
    "RAGSPINE_ANSWER_GRAPH": ("adaptiv", "RAGSPINE_ANSWER_GRAPH='adaptiv': unknown answer graph 'adaptiv'"),
    "RAGSPINE_RELATION_GRAPH": ("coocurrence", "RAGSPINE_RELATION_GRAPH='coocurrence': unknown relation extractor "
                                               "'coocurrence' (did you mean 'cooccurrence'?)"),
    "RAGSPINE_SPARSE": ("spalde", "RAGSPINE_SPARSE='spalde': unknown sparse encoder 'spalde' (did you mean 'splade'?)"),
    "RAGSPINE_RAPTOR": ("hashng", "RAGSPINE_RAPTOR='hashng': unknown RAPTOR spec 'hashng' (did you mean 'hashing'?)"),
}
#: what each entry point reads (and so may fail on)
INGEST_USES = {"RAGSPINE_TOKENIZER", "RAGSPINE_CHUNK_SIZE", "RAGSPINE_CHUNK_OVERLAP", "RAGSPINE_CHUNKER",
               "RAGSPINE_RETRIEVAL_MODE", "RAGSPINE_WORKERS", "RAGSPINE_SPARSE",
               "RAGSPINE_CONTEXTUAL", "RAGSPINE_RELATION_GRAPH", "RAGSPINE_RAPTOR"}
SEARCH_USES = {"RAGSPINE_K", "RAGSPINE_RETRIEVAL_MODE", "RAGSPINE_CHUNKER", "RAGSPINE_QUERY_TRANSFORM",
               "RAGSPINE_RERANKER", "RAGSPINE_POSTPROCESSOR", "RAGSPINE_ANSWER_GRAPH"}  # the last: ask's only


def _field(variable: str) -> str:
    return variable.removeprefix("RAGSPINE_").lower()


@pytest.fixture
def clean(monkeypatch, tmp_path, dotenv):
    """No settings variable in the environment (not even the ones the tests pin), an empty working directory whose
    .env is read (no .env yet), and a small corpus."""
    clear_settings(monkeypatch)
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.md").write_text("# A\n\nchunk offsets and citations.\n\nanother paragraph about stores.", "utf-8")
    (corpus / "b.md").write_text("# B\n\n京都の名所は清水寺である。", "utf-8")
    return tmp_path


def _set(monkeypatch, variables) -> None:
    for name in variables:
        monkeypatch.setenv(name, BAD[name][0])


def test_every_constrained_field_is_covered():
    assert {_field(v) for v in BAD} == set(CHECKED_WHERE_USED)
    assert INGEST_USES | SEARCH_USES <= set(BAD)


@pytest.mark.parametrize("variable", sorted(BAD))
def test_a_bad_value_is_read_and_refused_where_it_is_used(clean, variable):
    """Also from .env: get_settings() keeps the value as written; configured_setting refuses it, naming it."""
    (clean / ".env").write_text(f"{variable}={BAD[variable][0]}\n", "utf-8")
    assert get_settings() is not None
    with pytest.raises(ValueError) as caught:
        configured_setting(_field(variable))
    assert str(caught.value).startswith(BAD[variable][1])


def test_good_values_are_read_in_their_one_spelling_and_type(clean, monkeypatch):
    """A number is held as its type when the settings are read; a name as written (the settings know no names:
    they are a leaf), and configured_setting gives its one spelling."""
    monkeypatch.setenv("RAGSPINE_K", " 7 ")
    monkeypatch.setenv("RAGSPINE_TOKENIZER", "CJK")
    monkeypatch.setenv("RAGSPINE_CHUNKER", " ")
    monkeypatch.setenv("RAGSPINE_RETRIEVAL_MODE", "BM25")
    s = get_settings()
    assert (s.k, s.tokenizer, s.chunker, s.retrieval_mode) == (7, "CJK", None, "BM25")
    assert [configured_setting(f) for f in ("k", "tokenizer", "chunker", "retrieval_mode")] == [7, "cjk", None, "bm25"]
    assert configured_setting("k", RagSpineSettings(k=3)) == 3
    with pytest.raises(ValueError, match=r"^RAGSPINE_K=0: k must be an integer > 0$"):
        configured_setting("k", RagSpineSettings(k=0))  # an explicit bad argument is refused the same way
    with pytest.raises(KeyError, match="not a checked setting"):
        configured_setting("store")


def test_regression_bad_k_does_not_break_ingest(clean, monkeypatch, capsys):
    _set(monkeypatch, ["RAGSPINE_K"])
    assert main(["ingest", str(clean / "c"), "--store", str(clean / "s"), "--mode", "bm25"]) == 0
    assert ingest(clean / "c", clean / "s2", mode="bm25").chunks > 0
    assert "error" not in capsys.readouterr().err


def test_ingest_works_with_every_setting_it_does_not_use_bad(clean, monkeypatch, capsys):
    _set(monkeypatch, set(BAD) - INGEST_USES)
    assert main(["ingest", str(clean / "c"), "--store", str(clean / "s")]) == 0
    assert ingest(clean / "c", clean / "s2").chunks > 0
    assert "error" not in capsys.readouterr().err


def test_search_and_ask_work_with_every_setting_they_do_not_use_bad(clean, monkeypatch, capsys):
    """The tokenizer is recorded with the index, so search never reads RAGSPINE_TOKENIZER; the chunk budgets are
    read only when RAGSPINE_CHUNKER asks search to check the store's chunking."""
    ingest(clean / "c", clean / "s", mode="bm25")
    _set(monkeypatch, set(BAD) - SEARCH_USES)
    capsys.readouterr()
    assert main(["search", "清水寺", "--store", str(clean / "s"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[0])["doc_id"] == "b"
    assert main(["ask", "清水寺はどこ", "--store", str(clean / "s")]) == 0
    retriever = open_retriever(clean / "s")
    assert isinstance(retriever.current, BM25Retriever) and search(retriever, "清水寺")[0].metadata["doc_id"] == "b"
    monkeypatch.setenv("RAGSPINE_CHUNKER", "paragraph")  # now search checks the budgets: the bad size is used
    with pytest.raises(ValueError, match=r"^RAGSPINE_CHUNK_SIZE='big': chunk_size must be an integer > 0"):
        open_retriever(clean / "s")


def test_factories_work_with_every_setting_bad(clean, monkeypatch):
    """make_chat_model, make_embeddings and make_query_transform read the settings, but none of these."""
    _set(monkeypatch, BAD)
    assert make_chat_model() is None
    assert make_embeddings("hashing:8") is not None
    base = BM25Retriever.from_documents([Document(page_content="梅雨", metadata={"chunk_id": "d#0"})])
    assert make_query_transform("none", base) is base
    assert resolve_mode("bm25") == "bm25"


@pytest.mark.parametrize(("variable", "argv"), [
    ("RAGSPINE_K", ["search", "q", "--store", "{s}"]),
    ("RAGSPINE_K", ["ask", "q", "--store", "{s}"]),
    ("RAGSPINE_K", ["demo"]),
    ("RAGSPINE_RETRIEVAL_MODE", ["search", "q", "--store", "{s}"]),
    ("RAGSPINE_RETRIEVAL_MODE", ["ingest", "{c}", "--store", "{s}"]),
    ("RAGSPINE_TOKENIZER", ["ingest", "{c}", "--store", "{s}"]),
    ("RAGSPINE_CHUNK_SIZE", ["ingest", "{c}", "--store", "{s}"]),
    ("RAGSPINE_CHUNKER", ["ingest", "{c}", "--store", "{s}"]),
    ("RAGSPINE_CHUNKER", ["search", "q", "--store", "{s}"]),
    ("RAGSPINE_TOKENIZER", ["eval", "{c}"]),
    ("RAGSPINE_RETRIEVAL_MODE", ["eval", "{c}"]),
])
def test_where_a_setting_is_used_the_cli_names_it(clean, monkeypatch, capsys, variable, argv):
    ingest(clean / "c", clean / "s", mode="bm25")
    capsys.readouterr()
    _set(monkeypatch, [variable])
    assert main([a.format(s=clean / "s", c=clean / "c") for a in argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ragspine: error: {BAD[variable][1]}")
    assert len(err.splitlines()) == 1 and "pydantic" not in err and "validation error" not in err


def test_an_explicit_option_or_argument_does_not_read_the_bad_setting(clean, monkeypatch, capsys):
    _set(monkeypatch, ["RAGSPINE_K", "RAGSPINE_TOKENIZER", "RAGSPINE_CHUNK_SIZE", "RAGSPINE_RETRIEVAL_MODE"])
    assert main(["ingest", str(clean / "c"), "--store", str(clean / "s"), "--tokenizer", "cjk", "--chunk-size", "200",
                 "--mode", "bm25"]) == 0
    assert main(["search", "清水寺", "--store", str(clean / "s"), "-k", "1", "--mode", "bm25"]) == 0
    assert len(search(open_retriever(clean / "s", k=1, mode="bm25"), "清水寺", k=1)) == 1
    capsys.readouterr()


def test_a_bad_embedding_setting_is_named_where_it_is_used(clean, monkeypatch):
    monkeypatch.setenv("RAGSPINE_EMBEDDING", "bogus")
    with pytest.raises(ValueError, match=r"^RAGSPINE_EMBEDDING='bogus': unknown embedding spec 'bogus'; use one of none"):
        make_embeddings()
    with pytest.raises(ValueError, match=r"^unknown embedding spec 'bogus'"):  # an argument is not a variable
        make_embeddings("bogus")
    ingest(Path(clean / "c"), clean / "s", mode="bm25")  # a lexical ingest loads no embedding model
    assert search(open_retriever(clean / "s"), "清水寺")  # search uses the store's recorded model: none
