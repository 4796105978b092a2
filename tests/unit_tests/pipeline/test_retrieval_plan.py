"""The retrieval plan (pipeline/plan.py): one library function builds base mode + query transformations + second
stage, for the CLI, the served graphs and the benchmarks; transformations are not modes (``--mode hyde`` is the
deprecated spelling of ``--transform hyde``)."""

import json
import warnings
from pathlib import Path

import pytest
from langchain_core.documents import Document

from langchain_ragspine.cli import main
from langchain_ragspine.document_compressors import MMRCompressor, SecondStageRetriever
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.modes import DocumentsSource
from langchain_ragspine.pipeline.plan import RetrievalPlan, build_retriever, retriever_factory
from langchain_ragspine.retrievers import BM25Retriever, GlossaryRetriever, HyDERetriever, LiveStoreRetriever
from tests.unit_tests.pipeline.test_retrieval_plan_pins import describe

DOCS = [Document(page_content=t, metadata={"chunk_id": f"d{i}#0", "doc_id": f"d{i}"})
        for i, t in enumerate(["梅雨は六月に始まる", "京都の清水寺", "rainy season in Japan"])]


@pytest.fixture
def glossary(tmp_path: Path) -> Path:
    path = tmp_path / "g.yaml"
    path.write_text("- [rainy season, 梅雨]\n", "utf-8")
    return path


@pytest.fixture
def store(tmp_path: Path) -> Path:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("# 梅雨\n\n梅雨は六月に始まる。京都も梅雨。", "utf-8")
    (corpus / "b.md").write_text("# Rain\n\nThe rainy season in Japan is called tsuyu.", "utf-8")
    ingest(corpus, tmp_path / "S", progress=False)
    return tmp_path / "S"


def test_a_transformation_given_as_the_mode_is_auto_with_it_and_warns():
    with pytest.warns(DeprecationWarning, match="'hyde' is a query transformation, not a mode.*--transform hyde"):
        plan = RetrievalPlan.of("HyDE")
    assert plan == RetrievalPlan("auto", ("hyde",))
    with pytest.warns(DeprecationWarning):
        assert RetrievalPlan.of("glossary", transform="glossary").transforms == ("glossary",)  # applied once
    with pytest.warns(DeprecationWarning) as seen:
        assert RetrievalPlan(mode="step_back", transforms=("hyde",)).transforms == ("step_back", "hyde")
    # regression (issue 26 trial, FAIL 5): the warning named the dataclass's generated __init__ ('<string>', 8)
    assert [w.filename for w in seen] == [__file__]
    with pytest.warns(DeprecationWarning) as seen:
        RetrievalPlan.of("hyde")
    assert [w.filename for w in seen] == [__file__]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the plain spellings warn nothing
        assert RetrievalPlan.of("bm25", transform="multi-query") == RetrievalPlan("bm25", ("multi_query",))
        assert RetrievalPlan.of("Economy").mode == "bm25" and RetrievalPlan(mode="lexical").mode == "bm25"
        assert RetrievalPlan.of(None) == RetrievalPlan() and RetrievalPlan().mode is None


def test_a_plan_checks_its_parts_when_made():
    with pytest.raises(ValueError, match="unknown retrieval mode 'nope'"):
        RetrievalPlan(mode="nope")
    with pytest.raises(ValueError, match="unknown query transformation 'hype'"):
        RetrievalPlan(transforms=("hype",))
    with pytest.raises(TypeError, match="tuple of query transformation names"):
        RetrievalPlan(transforms="hyde")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown reranker"):
        RetrievalPlan(reranker="rankzephyr")
    with pytest.raises(ValueError, match="unknown post-processing step"):
        RetrievalPlan(postprocessor="mmmr")
    with pytest.raises(ValueError, match="fetch_k"):
        RetrievalPlan(fetch_k=0)
    assert RetrievalPlan(reranker=" Cross-Encoder : m ", postprocessor="MMR").reranker == "cross_encoder:m"


def test_configured_reads_the_settings_the_cli_uses(monkeypatch):
    monkeypatch.setenv("RAGSPINE_QUERY_TRANSFORM", "glossary")
    monkeypatch.setenv("RAGSPINE_POSTPROCESSOR", "mmr")
    monkeypatch.setenv("RAGSPINE_RETRIEVAL_MODE", "hyde")
    with pytest.warns(DeprecationWarning):
        plan = RetrievalPlan.configured()
    assert plan == RetrievalPlan("auto", ("hyde", "glossary"), postprocessor="mmr")
    assert RetrievalPlan() == RetrievalPlan(None, (), "none", "none")  # RetrievalPlan() reads none of them
    monkeypatch.setenv("RAGSPINE_QUERY_TRANSFORM", "hype")
    with pytest.raises(ValueError, match="^RAGSPINE_QUERY_TRANSFORM='hype'"):
        RetrievalPlan.configured("bm25")


def test_build_retriever_composes_base_transforms_and_second_stage(glossary):
    plan = RetrievalPlan("bm25", ("glossary",), postprocessor="mmr", fetch_k=7)
    r = build_retriever(plan, DocumentsSource(DOCS), k=2, glossary=glossary)
    assert isinstance(r, SecondStageRetriever) and (r.k, r.fetch_k) == (2, 7)
    assert [type(c) for c in r.compressors] == [MMRCompressor]
    assert isinstance(r.base_retriever, GlossaryRetriever) and isinstance(r.base_retriever.base, BM25Retriever)
    assert r.base_retriever.base.k == 2
    assert "d0" in {d.metadata["doc_id"] for d in r.invoke("rainy season")}  # the glossary reached 梅雨
    factory = retriever_factory(plan, k=2, glossary=glossary)
    assert describe(factory(DOCS)) == describe(r)
    assert build_retriever("bm25", DocumentsSource(DOCS), k=2).__class__ is BM25Retriever  # a mode name is a plan


def test_build_retriever_over_a_store_follows_the_store(store):
    r = build_retriever(RetrievalPlan("bm25", ("hyde",)), store, k=3, llm="none")
    assert isinstance(r, HyDERetriever) and isinstance(r.base, LiveStoreRetriever)
    assert isinstance(r.base.current, BM25Retriever) and r.base.k == 3
    assert isinstance(build_retriever(None, store, k=3), LiveStoreRetriever)  # RetrievalPlan(): open_retriever's


def test_cli_mode_hyde_is_transform_hyde_with_a_note(store, capsys):
    query = ["search", "梅雨", "--store", str(store), "--json"]
    assert main([*query, "--transform", "hyde"]) == 0
    new, new_err = capsys.readouterr()
    assert main([*query, "--mode", "hyde"]) == 0
    old, old_err = capsys.readouterr()
    assert old == new and [json.loads(line) for line in old.splitlines()]
    assert "is a query transformation, not a mode" not in new_err
    assert old_err.count("note: retrieval mode 'hyde' is a query transformation, not a mode: use mode 'auto' with "
                         "transform 'hyde' (--transform hyde") == 1


def test_cli_mode_from_the_setting_gets_the_note_too(store, capsys, monkeypatch):
    monkeypatch.setenv("RAGSPINE_RETRIEVAL_MODE", "multi-query".replace("-", "_"))
    assert main(["search", "梅雨", "--store", str(store)]) == 0
    assert "note: retrieval mode 'multi_query' is a query transformation" in capsys.readouterr().err


def test_one_plan_runs_on_both_backends_with_the_same_results(tmp_path: Path, pg_url: str, glossary: Path) -> None:
    """Issue 26's check that a backend-agnostic feature touches no backend code: the retrieval plan (O1) was written
    without a line in backends/, postgres.py or the PostgreSQL retrievers, and the same plan — base mode, a query
    transformation, a second stage — over a store directory and over a postgresql:// store of the same corpus gives
    the same documents in the same order."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    texts = {"a": "# 梅雨\n\n梅雨は六月に始まる。京都も梅雨。", "b": "# Rain\n\nThe rainy season in Japan is called tsuyu.",
             "c": "# 清水寺\n\n京都の清水寺は秋の紅葉で知られる。", "d": "# Autumn\n\nKyoto in autumn: red maple leaves."}
    for name, text in texts.items():
        (corpus / f"{name}.md").write_text(text, "utf-8")
    ingest(corpus, tmp_path / "S", progress=False, mode="bm25")
    ingest(corpus, pg_url, progress=False, mode="bm25")
    plan = RetrievalPlan("bm25", ("glossary",), postprocessor="mmr", fetch_k=4)
    found = {}
    for where in (tmp_path / "S", pg_url):
        r = build_retriever(plan, where, k=2, glossary=glossary)
        assert isinstance(r, SecondStageRetriever) and isinstance(r.base_retriever, GlossaryRetriever)
        found[str(where)] = [(d.metadata["chunk_id"], d.page_content) for d in r.invoke("rainy season in Kyoto")]
    directory, postgres = found.values()
    assert len(directory) == 2 and directory == postgres and {c.split("#")[0] for c, _ in directory} & {"a", "b"}


def test_cli_mode_takes_any_case_as_the_setting_and_the_plan_do(store, capsys):
    """Regression (issue 26 trial, FAIL 6): ``--mode Economy`` / ``BM25`` was argparse's 'invalid choice' while
    RAGSPINE_RETRIEVAL_MODE=Economy and RetrievalPlan('Economy') took it."""
    query = ["search", "梅雨", "--store", str(store), "--json"]
    assert main([*query, "--mode", "bm25"]) == 0
    lower = capsys.readouterr().out
    for spelling in ("BM25", "Economy", " Lexical "):
        assert main([*query, "--mode", spelling]) == 0
        assert capsys.readouterr().out == lower and lower
