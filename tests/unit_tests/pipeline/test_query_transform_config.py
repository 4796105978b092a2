"""Query transformations as configuration: make_query_transform, RAGSPINE_QUERY_TRANSFORM / _GLOSSARY /
_QUERY_DENY_LIST, the mode registry (``--mode hyde``) and the CLI's ``--transform`` — all off by default, and an LLM
transformation without a model is skipped with one warning, its results the base's byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.language_models import FakeListChatModel

from langchain_ragspine.cli import demo_corpus_dir, main
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.modes import get_mode, mode_factory
from langchain_ragspine.pipeline.sources import open_retriever
from langchain_ragspine.retrievers import (
    DecompositionRetriever,
    GlossaryRetriever,
    HyDERetriever,
    MultiQueryRetriever,
    QueryTransformSkippedWarning,
    RAGFusionRetriever,
    StepBackRetriever,
)
from langchain_ragspine.retrievers.transforms import make_query_transform
from langchain_ragspine.specs import LLM_QUERY_TRANSFORMS, QUERY_TRANSFORMS
from tests.unit_tests._transform_fakes import SpyChatModel, SpyRetriever, doc

ROOT = Path(__file__).resolve().parents[3]
DEMO_GLOSSARY = ROOT / "docs" / "glossaries" / "demo.yaml"
CLASSES = {"hyde": HyDERetriever, "multi_query": MultiQueryRetriever, "rag_fusion": RAGFusionRetriever,
           "step_back": StepBackRetriever, "decompose": DecompositionRetriever}


@pytest.fixture(scope="module")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("demo") / "store"
    ingest(demo_corpus_dir(), store, mode="bm25")
    return store


def test_none_is_the_default_and_returns_the_base_itself():
    base = SpyRetriever()
    assert make_query_transform(None, base) is base
    assert make_query_transform("none", base) is base
    assert make_query_transform(" NONE ", base) is base


@pytest.mark.parametrize("name", LLM_QUERY_TRANSFORMS)
def test_each_llm_transform_is_built_with_a_model_and_kwargs(name):
    llm = FakeListChatModel(responses=["v1\nv2"])
    retriever = make_query_transform(name.replace("_", "-").upper(), SpyRetriever(), llm=llm, k=3)
    assert type(retriever) is CLASSES[name] and retriever.llm is llm and retriever.k == 3


@pytest.mark.parametrize("name", LLM_QUERY_TRANSFORMS)
def test_without_a_model_an_llm_transform_warns_once_and_returns_the_bases_results(name, demo_store):
    base = open_retriever(demo_store, k=5, mode="bm25")
    with pytest.warns(QueryTransformSkippedWarning) as record:
        retriever = make_query_transform(name, base)  # RAGSPINE_LLM unset: the library default is no LLM
    assert len(record) == 1
    for call in ({}, {"k": 2}, {"filter": {"lang": "en"}}):
        assert retriever.invoke("chunk offsets", **call) == base.invoke("chunk offsets", **call)


def test_unknown_names_and_a_missing_glossary_are_clear_errors():
    with pytest.raises(ValueError, match="unknown query transformation 'hype'.*hyde"):
        make_query_transform("hype", SpyRetriever())
    with pytest.raises(ValueError, match="glossary"):
        make_query_transform("glossary", SpyRetriever())


def test_settings_choose_the_transform_glossary_and_deny_list(monkeypatch, tmp_path):
    deny = tmp_path / "deny.txt"
    deny.write_text("# code names\nretrieval\n", "utf-8")
    monkeypatch.setenv("RAGSPINE_QUERY_TRANSFORM", "glossary")
    monkeypatch.setenv("RAGSPINE_GLOSSARY", str(DEMO_GLOSSARY))
    monkeypatch.setenv("RAGSPINE_QUERY_DENY_LIST", str(deny))
    base = SpyRetriever(default=[doc("a")])
    retriever = make_query_transform(None, base, max_queries=3)
    assert isinstance(retriever, GlossaryRetriever)
    retriever.invoke("search")
    assert base.queries == ["search", "検索"]  # "retrieval" is denied; max_queries=3 would have allowed it
    assert retriever.invoke("search")[0].metadata["query_transform"][-1]["dropped"] == [
        {"position": 2, "term": 0, "reason": "deny_list"}]


def test_transform_names_are_deprecated_spellings_of_auto_with_the_transform(monkeypatch):
    """Transforms are not modes (issue 26, O1): the registry holds none, but a transformation's name given as a mode
    still builds ``auto`` wrapped in it, for one release, with a DeprecationWarning naming the new spelling."""
    from langchain_ragspine.pipeline.modes import mode_choices, mode_names

    assert not set(QUERY_TRANSFORMS[1:]) & set(mode_names()) and set(QUERY_TRANSFORMS[1:]) <= set(mode_choices())
    assert all(get_mode(n) is get_mode("auto") for n in QUERY_TRANSFORMS[1:])  # it needs what auto needs
    monkeypatch.setenv("RAGSPINE_GLOSSARY", str(DEMO_GLOSSARY))
    from langchain_ragspine.document_loaders import CorpusLoader
    from langchain_ragspine.text_splitters import ParagraphTextSplitter

    chunks = ParagraphTextSplitter().split_documents(CorpusLoader(demo_corpus_dir()).load())
    with pytest.warns(DeprecationWarning, match="'glossary' is a query transformation, not a mode: use mode 'auto' "
                                                "with transform 'glossary' \\(--transform glossary"):
        glossary = mode_factory("glossary", k=10)(chunks)
    assert isinstance(glossary, GlossaryRetriever) and glossary.k == 10
    assert "ja/splitter" in {d.metadata["doc_id"] for d in glossary.invoke("citation offset")}
    with pytest.warns(QueryTransformSkippedWarning), pytest.warns(DeprecationWarning, match="--transform hyde"):
        hyde = mode_factory("hyde", k=5)(chunks)
    assert hyde.invoke("citation offset") == mode_factory("auto", k=5)(chunks).invoke("citation offset")


def _search(capsys, store: Path, *extra: str) -> tuple[list[dict], str]:
    assert main(["search", "citation offset", "--store", str(store), "--json", "-k", "10", *extra]) == 0
    out, err = capsys.readouterr()
    return [json.loads(line) for line in out.splitlines()], err


def test_cli_transform_glossary_reaches_the_page_in_the_other_language(demo_store, capsys):
    plain, _ = _search(capsys, demo_store)
    expanded, _ = _search(capsys, demo_store, "--transform", "glossary", "--glossary", str(DEMO_GLOSSARY))
    doc_ids = [r.get("doc_id") or r.get("metadata", {}).get("doc_id") for r in expanded]
    assert "ja/splitter" in doc_ids
    assert "ja/splitter" not in [r.get("doc_id") or r.get("metadata", {}).get("doc_id") for r in plain]


@pytest.mark.parametrize("name", LLM_QUERY_TRANSFORMS)
def test_cli_llm_transform_without_a_model_prints_what_the_plain_search_prints(name, demo_store, capsys):
    assert main(["search", "citation offset", "--store", str(demo_store), "-k", "5"]) == 0
    plain_out, _ = capsys.readouterr()
    with pytest.warns(QueryTransformSkippedWarning) as record:
        assert main(["search", "citation offset", "--store", str(demo_store), "-k", "5", "--transform", name]) == 0
    out, _ = capsys.readouterr()
    assert out == plain_out  # byte for byte
    assert len(record) == 1


def test_cli_transform_uses_the_configured_chat_model(demo_store, capsys, monkeypatch):
    """``--transform multi_query`` asks RAGSPINE_LLM's model (a spy here) and searches its variants."""
    spy = SpyChatModel(replies=["1. 文字位置\n2. 出典"])
    monkeypatch.setattr("langchain_ragspine.chat_models.resolve_chat_model",  # the CLI imports it when it runs
                        lambda spec, **kw: type("C", (), {"llm": spy, "how": "LLM path", "warning": None})())
    rows, err = _search(capsys, demo_store, "--transform", "multi_query")
    assert len(spy.prompts) == 1 and "citation offset" in spy.prompts[0]
    assert rows and all(r for r in rows)


def test_cli_rejects_an_unknown_transform(capsys):
    with pytest.raises(SystemExit) as info:
        main(["search", "q", "--transform", "hype"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --transform: unknown query transformation 'hype' (did you mean 'hyde'?)" in err
    assert "choose one of none, hyde, multi_query" in err


def test_a_bad_env_transform_is_a_clear_cli_error(monkeypatch, capsys, demo_store):
    monkeypatch.setenv("RAGSPINE_QUERY_TRANSFORM", "hype")
    assert main(["search", "q", "--store", str(demo_store)]) == 2
    assert "unknown query transformation" in capsys.readouterr().err


# -- regressions from the new-user trial: --glossary with --mode glossary, the spellings --transform takes, and
# RAGSPINE_QUERY_TRANSFORM blank or bad --------------------------------------------------------------------------
def _doc_ids(rows: list[dict]) -> list[str]:
    return [r.get("doc_id") or r.get("metadata", {}).get("doc_id") for r in rows]


@pytest.mark.parametrize("how", [["--mode", "glossary"], ["--transform", "glossary"]])
def test_cli_glossary_flag_reaches_the_glossary_mode_and_transform(demo_store, capsys, how):
    """``--mode glossary --glossary FILE`` failed ("needs a glossary file: pass glossary= (or --glossary FILE)"):
    the mode read RAGSPINE_GLOSSARY only."""
    rows, _ = _search(capsys, demo_store, *how, "--glossary", str(DEMO_GLOSSARY))
    assert "ja/splitter" in _doc_ids(rows)


def test_cli_glossary_mode_from_the_setting_takes_the_flag_too(demo_store, capsys, monkeypatch):
    monkeypatch.setenv("RAGSPINE_RETRIEVAL_MODE", "glossary")
    rows, _ = _search(capsys, demo_store, "--glossary", str(DEMO_GLOSSARY))
    assert "ja/splitter" in _doc_ids(rows)


def test_cli_glossary_mode_equals_auto_with_the_glossary_transform(demo_store, capsys):
    via_mode, _ = _search(capsys, demo_store, "--mode", "glossary", "--glossary", str(DEMO_GLOSSARY))
    via_transform, _ = _search(capsys, demo_store, "--mode", "auto", "--transform", "glossary", "--glossary",
                               str(DEMO_GLOSSARY))
    assert via_mode == via_transform


@pytest.mark.parametrize("how", [["--mode", "glossary"], ["--transform", "glossary"]])
def test_cli_ask_takes_the_glossary_flag(demo_store, capsys, how):
    assert main(["ask", "citation offset", "--store", str(demo_store), "--json", *how]) == 2
    assert "needs a glossary file" in capsys.readouterr().err  # no --glossary, no RAGSPINE_GLOSSARY
    assert main(["ask", "citation offset", "--store", str(demo_store), "--json", *how,
                 "--glossary", str(DEMO_GLOSSARY)]) == 0
    record = json.loads(capsys.readouterr().out)
    assert any(t.get("step") == "retrieve" and t.get("retrieved") for t in record["trace"])


def test_cli_eval_takes_the_glossary_flag_with_the_glossary_mode(tmp_path, capsys):
    glossary = _rainy_season_dataset(tmp_path)
    out = tmp_path / "r.json"
    assert main(["eval", str(tmp_path / "ds"), "--mode", "glossary", "bm25", "--glossary", str(glossary),
                 "--json", str(out)]) == 0
    results = {r["name"]: r for r in json.loads(out.read_text("utf-8"))["results"]}
    assert set(results) == {"glossary", "bm25"}
    assert results["glossary"]["aggregate"]["answer_recall@1"] == 1.0
    assert results["bm25"]["aggregate"]["answer_recall@1"] == 0.0
    capsys.readouterr()


@pytest.mark.parametrize("spelling", ["HyDE", "multi-query", " Rag-Fusion ", "STEP-BACK", "Decompose"])
def test_cli_transform_takes_the_spellings_the_setting_takes(spelling, demo_store, capsys):
    """``--transform HyDE`` / ``multi-query`` were refused by argparse although RAGSPINE_QUERY_TRANSFORM and
    make_query_transform took them (one normalisation now: specs.resolve_query_transform)."""
    assert main(["search", "citation offset", "--store", str(demo_store), "-k", "5"]) == 0
    plain_out, _ = capsys.readouterr()
    with pytest.warns(QueryTransformSkippedWarning) as record:  # no LLM: skipped, as for the canonical name
        assert main(["search", "citation offset", "--store", str(demo_store), "-k", "5", "--transform",
                     spelling]) == 0
    assert capsys.readouterr().out == plain_out
    assert len(record) == 1 and spelling.strip().lower().replace("-", "_") in str(record[0].message)


@pytest.mark.parametrize("blank", ["", "  "])
def test_a_blank_transform_setting_is_unset(blank, demo_store, capsys, monkeypatch):
    assert main(["search", "citation offset", "--store", str(demo_store), "-k", "5"]) == 0
    plain_out, _ = capsys.readouterr()
    monkeypatch.setenv("RAGSPINE_QUERY_TRANSFORM", blank)
    assert main(["search", "citation offset", "--store", str(demo_store), "-k", "5"]) == 0
    assert capsys.readouterr().out == plain_out
    base = SpyRetriever()
    assert make_query_transform(None, base) is base


def test_a_bad_transform_setting_fails_where_it_is_used_and_names_the_variable(tmp_path, capsys, monkeypatch,
                                                                             demo_store):
    """RAGSPINE_QUERY_TRANSFORM=hyd broke `ragspine ingest` and open_retriever with pydantic's report on the field
    ``query_transform``: now ingest and open_retriever work, and search / make_query_transform say which variable is
    wrong, suggest the name and list the valid ones."""
    monkeypatch.setenv("RAGSPINE_QUERY_TRANSFORM", "hyd")
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.md").write_text("# A\n\nchunk offsets and citations.", "utf-8")
    assert main(["ingest", str(corpus), "--store", str(tmp_path / "s"), "--mode", "bm25"]) == 0
    assert open_retriever(tmp_path / "s", mode="bm25").invoke("chunk")
    capsys.readouterr()
    assert main(["search", "citation offset", "--store", str(demo_store)]) == 2
    err = capsys.readouterr().err
    assert err == ("ragspine: error: RAGSPINE_QUERY_TRANSFORM='hyd': unknown query transformation 'hyd' (did you "
                   "mean 'hyde'?); choose one of none, hyde, multi_query, rag_fusion, step_back, decompose, "
                   "glossary\n")
    with pytest.raises(ValueError, match=r"^RAGSPINE_QUERY_TRANSFORM='hyd': .*did you mean 'hyde'"):
        make_query_transform(None, SpyRetriever())
    assert make_query_transform("none", SpyRetriever())  # an explicit name does not read the variable
    assert main(["search", "citation offset", "--store", str(demo_store), "--transform", "none"]) == 0


@pytest.mark.parametrize(("name", "close"), [("stepback", "step_back"), ("multiquery", "multi_query"),
                                             ("decomposition", "decompose"), ("hyd", "hyde")])
def test_unknown_transform_names_suggest_the_closest(name, close):
    with pytest.raises(ValueError, match=f"did you mean {close!r}"):
        make_query_transform(name, SpyRetriever())


def _rainy_season_dataset(tmp_path: Path) -> Path:
    """A QA folder ``tmp_path/ds`` whose one question ("rainy season") BM25 misses and a glossary file mapping it to
    the article's word (梅雨); returns the glossary."""
    docs = tmp_path / "ds" / "docs"
    docs.mkdir(parents=True)
    (docs / "a.md").write_text("# 梅雨\n\n梅雨は北海道と小笠原諸島を除く日本で見られる雨季である。", "utf-8")
    (docs / "b.md").write_text("# 京都\n\n京都の名所は清水寺である。", "utf-8")
    q = {"id": "q1", "question": "rainy season", "answers": ["小笠原諸島"], "doc_id": "a", "paragraph": 0}
    (tmp_path / "ds" / "questions.jsonl").write_text(json.dumps(q, ensure_ascii=False) + "\n", "utf-8")
    glossary = tmp_path / "g.yaml"
    glossary.write_text("- [rainy season, 梅雨]\n", "utf-8")
    return glossary


def test_cli_eval_with_a_transform_labels_and_runs_it(tmp_path, capsys):
    """``ragspine eval --transform glossary`` wraps every configuration; the label says so; a glossary that maps the
    question's word to the article's finds what BM25 alone misses."""
    glossary = _rainy_season_dataset(tmp_path)
    out = tmp_path / "r.json"
    assert main(["eval", str(tmp_path / "ds"), "--mode", "bm25", "--json", str(out)]) == 0
    assert json.loads(out.read_text("utf-8"))["results"][0]["aggregate"]["answer_recall@1"] == 0.0
    assert main(["eval", str(tmp_path / "ds"), "--mode", "bm25", "--transform", "glossary", "--glossary",
                 str(glossary), "--json", str(out)]) == 0
    result = json.loads(out.read_text("utf-8"))["results"][0]
    assert result["name"] == "bm25 +glossary"
    assert result["aggregate"]["answer_recall@1"] == 1.0
    assert "bm25 +glossary" in capsys.readouterr().out


def test_a_name_close_to_nothing_gets_no_suggestion():
    with pytest.raises(ValueError) as info:
        make_query_transform("nonsense", SpyRetriever())
    assert "did you mean" not in str(info.value) and "choose one of none, hyde" in str(info.value)


# -- regressions (issue 14, second trial) ----------------------------------------------------------------------------
def test_cli_mode_and_transform_glossary_apply_the_glossary_once(demo_store, capsys):
    """``--mode glossary --transform glossary`` applied the glossary twice (the results changed)."""
    once, _ = _search(capsys, demo_store, "--mode", "glossary", "--glossary", str(DEMO_GLOSSARY))
    both, _ = _search(capsys, demo_store, "--mode", "glossary", "--transform", "glossary", "--glossary",
                      str(DEMO_GLOSSARY))
    assert both == once


@pytest.mark.parametrize("command", ["search", "ask"])
def test_cli_glossary_without_the_glossary_transform_is_an_error(demo_store, capsys, command):
    """``--glossary FILE`` without a glossary transformation was silently ignored."""
    assert main([command, "citation offset", "--store", str(demo_store), "--glossary", str(DEMO_GLOSSARY)]) == 2
    assert "--glossary is read by the glossary query transformation only" in capsys.readouterr().err


def test_cli_eval_glossary_without_the_glossary_transform_is_an_error(tmp_path, capsys):
    glossary = _rainy_season_dataset(tmp_path)
    assert main(["eval", str(tmp_path / "ds"), "--mode", "bm25", "--glossary", str(glossary)]) == 2
    assert "--glossary is read by the glossary query transformation only" in capsys.readouterr().err


@pytest.mark.parametrize("spelling", ["HyDE", "Multi-Query", " glossary "])
def test_cli_mode_takes_the_spellings_transform_takes(spelling, demo_store, capsys, recwarn):
    """``--mode HyDE`` was rejected while ``--transform HyDE`` was accepted."""
    canonical = spelling.strip().lower().replace("-", "_")
    extra = ["--glossary", str(DEMO_GLOSSARY)] if canonical == "glossary" else []
    spelled, _ = _search(capsys, demo_store, "--mode", spelling, *extra)
    plain, _ = _search(capsys, demo_store, "--mode", canonical, *extra)
    assert spelled == plain


def test_regression_ingest_with_a_transformation_as_its_mode_warns_as_search_does(tmp_path: Path) -> None:
    """Trial of 5d1ab81: ``open_retriever(mode="hyde")`` warned that the spelling is deprecated, ``ingest(mode=
    "hyde")`` said nothing (and ingested as mode auto)."""
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.md").write_text("# a\n\n梅雨の話\n", "utf-8")
    with pytest.warns(DeprecationWarning, match=r"'hyde' is a query transformation, not a mode.*to ingest, it is "
                                                r"mode 'auto'") as record:
        summary = ingest(corpus, tmp_path / "s", mode="hyde", embedding="none", progress=False)
    assert summary.documents == 1 and record[0].filename == __file__


def test_regression_open_retriever_in_glossary_mode_takes_glossary(tmp_path: Path, monkeypatch) -> None:
    """Trial of ba5bf07: ``open_retriever(store, mode="glossary", glossary=...)`` was a TypeError (the glossary was
    handed to the HybridRetriever under it) though ``RAGSPINE_GLOSSARY`` and the CLI's ``--glossary`` worked.  The
    transformation's own options go to it; the result is the one ``RAGSPINE_GLOSSARY`` gives."""
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.md").write_text("# 梅雨\n\n梅雨は日本の雨季である。\n", "utf-8")
    ingest(corpus, tmp_path / "s", embedding="none", progress=False)
    with pytest.warns(DeprecationWarning):
        given = open_retriever(tmp_path / "s", mode="glossary", glossary=DEMO_GLOSSARY).invoke("梅雨")
    monkeypatch.setenv("RAGSPINE_GLOSSARY", str(DEMO_GLOSSARY))
    with pytest.warns(DeprecationWarning):
        configured = open_retriever(tmp_path / "s", mode="glossary").invoke("梅雨")
    assert given and [d.id for d in given] == [d.id for d in configured]
    assert given[0].metadata["query_transform"][0]["transform"] == "glossary"
    with pytest.raises(TypeError, match="glossary"):  # a mode without the transformation still refuses it
        open_retriever(tmp_path / "s", mode="bm25", glossary=DEMO_GLOSSARY)
