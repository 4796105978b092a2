"""The retriever every CLI / setting combination builds, pinned: class and arguments, all the way down.

The retrieval plan (base mode + query transformations + second stage) used to be composed by the CLI itself
(``cli._plan`` / ``_second_stage``), by the mode registry (``--mode hyde`` was a registered mode) and by
``graphs/app.py``; it is now built by one library function (:mod:`langchain_ragspine.pipeline.plan`).  This test
records what each combination built before that move (``retrieval_plan_pins.json``, written by the code before the
refactor with ``RAGSPINE_RECORD_PINS=1``) and checks that it still builds exactly that: the same classes, nested the
same way, with the same field values (paths and models by type only).
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from pydantic import BaseModel

from langchain_ragspine.cli import main

PINS = Path(__file__).with_name("retrieval_plan_pins.json")
RECORD = os.environ.get("RAGSPINE_RECORD_PINS") == "1"


def describe(obj: Any) -> Any:
    """A JSON-able picture of a retriever: class, simple field values, nested retrievers and compressors."""
    if isinstance(obj, str) and os.path.isabs(obj):
        return "<path>"
    if isinstance(obj, (str, int, float, bool)) or obj is None:
        return obj
    if isinstance(obj, Path):
        return "<path>"
    if isinstance(obj, Document):
        return "<document>"
    if isinstance(obj, (list, tuple)):
        if obj and all(isinstance(x, Document) for x in obj):
            return f"<{len(obj)} documents>"
        return [describe(x) for x in obj]
    if isinstance(obj, dict):
        return {str(k): describe(v) for k, v in sorted(obj.items(), key=lambda kv: str(kv[0]))}
    if isinstance(obj, BaseModel) and type(obj).__module__.startswith("langchain_ragspine"):
        out: dict[str, Any] = {"class": type(obj).__name__}
        for name in type(obj).model_fields:
            if name in ("callbacks", "tags", "metadata", "verbose", "name", "cache", "rate_limiter"):
                continue
            out[name] = describe(getattr(obj, name, None))
        current = getattr(type(obj), "current", None)
        if isinstance(current, property):
            out["current"] = describe(obj.current)  # type: ignore[attr-defined]
        return out
    if callable(obj) and not isinstance(obj, BaseModel):
        return "<callable>"
    return f"<{type(obj).__name__}>"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> dict[str, Path]:
    from langchain_ragspine.pipeline.ingest import ingest

    root = tmp_path_factory.mktemp("plans")
    corpus = root / "corpus"
    _write(corpus / "tsuyu.md", "# 梅雨\n\n梅雨は北海道と小笠原諸島を除く日本で見られる雨季である。京都も梅雨。")
    _write(corpus / "kyoto.md", "# 京都\n\n京都の観光名所は清水寺と金閣寺である。京都の梅雨は蒸し暑い。")
    _write(corpus / "en.md", "# Rain\n\nThe rainy season in Japan is called tsuyu.")
    _write(root / "g.yaml", "- [rainy season, 梅雨]\n")
    ingest(corpus, root / "lexical", progress=False)
    ingest(corpus, root / "dense", embedding="hashing", progress=False)
    ingest(corpus, root / "pc", chunker="parent_child", progress=False)
    ds = root / "ds"
    _write(ds / "docs" / "kyoto.md", (corpus / "kyoto.md").read_text("utf-8"))
    q = {"id": "q1", "question": "京都の名所は", "answers": ["清水寺"], "doc_id": "kyoto", "paragraph": 0}
    _write(ds / "questions.jsonl", json.dumps(q, ensure_ascii=False) + "\n")
    beir = root / "beir"
    docs = [{"_id": "d1", "title": "", "text": "梅雨前線が停滞する"}, {"_id": "d2", "title": "", "text": "京都の清水寺"}]
    _write(beir / "corpus.jsonl", "".join(json.dumps(c, ensure_ascii=False) + "\n" for c in docs))
    _write(beir / "queries.jsonl", json.dumps({"_id": "q1", "text": "清水寺"}, ensure_ascii=False) + "\n")
    _write(beir / "qrels.tsv", "query-id\tcorpus-id\tscore\nq1\td2\t1\n")
    return {"lexical": root / "lexical", "dense": root / "dense", "pc": root / "pc", "glossary": root / "g.yaml",
            "qa": ds, "beir": beir}


#: (name, store, argv after the store, environment)
SEARCH = [
    ("default", "lexical", [], {}),
    ("auto-dense", "dense", [], {}),
    ("bm25", "dense", ["--mode", "bm25"], {}),
    ("economy", "dense", ["--mode", "economy"], {}),
    ("lexical", "dense", ["--mode", "lexical"], {}),
    ("hybrid", "dense", ["--mode", "hybrid"], {}),
    ("vector", "dense", ["--mode", "vector", "-k", "3"], {}),
    ("auto-parent-child", "pc", [], {}),
    ("parent_child", "pc", ["--mode", "parent_child"], {}),
    ("mode-hyde", "dense", ["--mode", "hyde"], {}),
    ("mode-HyDE", "lexical", ["--mode", "HyDE"], {}),
    ("transform-hyde", "dense", ["--transform", "hyde"], {}),
    ("mode-hyde-transform-hyde", "lexical", ["--mode", "hyde", "--transform", "hyde"], {}),
    ("mode-glossary", "lexical", ["--mode", "glossary", "--glossary", "@glossary"], {}),
    ("mode-glossary-transform-glossary", "lexical",
     ["--mode", "glossary", "--transform", "glossary", "--glossary", "@glossary"], {}),
    ("mode-hyde-transform-glossary", "lexical", ["--mode", "hyde", "--transform", "glossary", "--glossary",
                                                 "@glossary"], {}),
    ("bm25-multi-query", "lexical", ["--mode", "bm25", "--transform", "multi-query"], {}),
    ("mode-decompose", "pc", ["--mode", "decompose"], {}),
    ("env-mode-hyde", "lexical", [], {"RAGSPINE_RETRIEVAL_MODE": "hyde"}),
    ("env-mode-economy", "lexical", [], {"RAGSPINE_RETRIEVAL_MODE": "economy"}),
    ("env-transform", "lexical", [], {"RAGSPINE_QUERY_TRANSFORM": "step_back"}),
    ("env-transform-and-mode", "lexical", ["--mode", "rag_fusion"], {"RAGSPINE_QUERY_TRANSFORM": "hyde"}),
    ("rerank-llm-no-llm", "lexical", ["--rerank", "llm"], {}),
    ("mmr", "lexical", ["--postprocess", "mmr"], {}),
    ("mmr-fetch-k", "lexical", ["--postprocess", "mmr", "--fetch-k", "30", "-k", "4"], {}),
    ("lost-in-middle", "dense", ["--postprocess", "lost_in_middle,compress"], {}),
    ("hyde-mmr", "lexical", ["--mode", "hyde", "--postprocess", "mmr,lost_in_middle"], {}),
    ("env-postprocessor", "lexical", [], {"RAGSPINE_POSTPROCESSOR": "mmr"}),
    ("env-k", "lexical", ["--transform", "hyde"], {"RAGSPINE_K": "3"}),
]

ASK = [
    ("default", "lexical", [], {}),
    ("hybrid", "dense", ["--mode", "hybrid", "-k", "4"], {}),
    ("mode-hyde", "lexical", ["--mode", "hyde"], {}),
    ("transform-glossary", "lexical", ["--transform", "glossary", "--glossary", "@glossary"], {}),
    ("mode-step-back-transform-hyde", "lexical", ["--mode", "step_back", "--transform", "hyde"], {}),
    ("mmr", "lexical", ["--postprocess", "mmr"], {}),
    ("mmr-fetch-k", "lexical", ["--postprocess", "mmr", "--fetch-k", "12"], {}),
    ("rerank-llm-no-llm", "lexical", ["--rerank", "llm"], {}),
    ("env-mode-glossary", "lexical", ["--glossary", "@glossary"], {"RAGSPINE_RETRIEVAL_MODE": "glossary"}),
    ("self-rag", "lexical", ["--graph", "self_rag", "--mode", "hyde"], {}),
]

EVAL = [
    ("qa", "qa", ["--mode", "bm25", "economy", "hyde", "--transform", "glossary", "--glossary", "@glossary"], {}),
    ("qa-mmr", "qa", ["--mode", "auto", "glossary", "--glossary", "@glossary", "--postprocess", "mmr"], {}),
    ("qa-env", "qa", [], {"RAGSPINE_RETRIEVAL_MODE": "hyde"}),
    ("beir", "beir", ["--mode", "bm25", "lexical", "hyde", "--transform", "glossary", "--glossary", "@glossary"],
     {}),
    ("beir-mmr", "beir", ["--mode", "multi_query", "--postprocess", "mmr", "--fetch-k", "20"], {}),
]


def _argv(stores: dict[str, Path], args: list[str]) -> list[str]:
    return [str(stores["glossary"]) if a == "@glossary" else a for a in args]


def _run(monkeypatch, stores, argv, env) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(argv) == 0


def _check(key: str, got: Any) -> None:
    got = json.loads(json.dumps(got))
    pins = json.loads(PINS.read_text("utf-8")) if PINS.exists() else {}
    if RECORD:
        pins[key] = got
        PINS.write_text(json.dumps(pins, ensure_ascii=False, indent=1, sort_keys=True) + "\n", "utf-8")
        return
    assert key in pins, f"no pin for {key}: record with RAGSPINE_RECORD_PINS=1 on the code before the change"
    assert got == pins[key]


@pytest.mark.parametrize(("name", "store", "args", "env"), SEARCH, ids=[c[0] for c in SEARCH])
def test_search_builds_the_pinned_retriever(name, store, args, env, stores, monkeypatch, capsys):
    import langchain_ragspine.pipeline.sources as sources

    seen: list[Any] = []
    monkeypatch.setattr(sources, "search", lambda retriever, query, **kw: seen.append(retriever) or [])
    _run(monkeypatch, stores, ["search", "京都 梅雨", "--store", str(stores[store]), *_argv(stores, args)], env)
    capsys.readouterr()
    _check(f"search/{name}", describe(seen[0]))


@pytest.mark.parametrize(("name", "store", "args", "env"), ASK, ids=[c[0] for c in ASK])
def test_ask_builds_the_pinned_retriever(name, store, args, env, stores, monkeypatch, capsys):
    from langchain_ragspine import graphs

    seen: dict[str, Any] = {}

    class _Graph:
        def invoke(self, inputs: Any) -> dict[str, Any]:
            return {"answer": "", "citations": []}

    def _builder(graph: str):
        def build(retriever: Any, *, llm: Any = None, relax_filters: bool = False, compressors: Any = None,
                  **kw: Any) -> _Graph:
            seen.update(graph=graph, retriever=describe(retriever), compressors=describe(compressors),
                        relax_filters=relax_filters, options=sorted(kw))
            return _Graph()
        return build

    for graph in list(graphs.GRAPH_BUILDERS):
        monkeypatch.setitem(graphs.GRAPH_BUILDERS, graph, _builder(graph))
    _run(monkeypatch, stores, ["ask", "京都の名所は", "--store", str(stores[store]), "--llm", "none",
                               *_argv(stores, args)], env)
    capsys.readouterr()
    _check(f"ask/{name}", seen)


@pytest.mark.parametrize(("name", "store", "args", "env"), EVAL, ids=[c[0] for c in EVAL])
def test_eval_builds_the_pinned_retrievers(name, store, args, env, stores, monkeypatch, capsys):
    import langchain_ragspine.evaluation as evaluation
    from langchain_ragspine.evaluation import EvalResult

    seen: list[Any] = []
    real = evaluation.evaluate

    def spy(retriever: Any, dataset: Any, **kw: Any) -> EvalResult:
        if callable(retriever) and not hasattr(retriever, "invoke"):  # a BEIR factory: build it over the corpus
            built = retriever([Document(page_content=t, metadata={"chunk_id": f"d{i}#0", "doc_id": f"d{i}"})
                               for i, t in enumerate(["梅雨前線", "京都の清水寺"])])
        else:
            built = retriever
        seen.append({"name": kw.get("name"), "retriever": describe(built)})
        return real(retriever, dataset, **kw)

    monkeypatch.setattr(evaluation, "evaluate", spy)
    _run(monkeypatch, stores, ["eval", str(stores[store]), *_argv(stores, args)], env)
    capsys.readouterr()
    _check(f"eval/{name}", seen)


def _docs() -> list[Document]:
    return [Document(page_content=t, metadata={"chunk_id": f"d{i}#0", "doc_id": f"d{i}"})
            for i, t in enumerate(["梅雨前線", "京都の清水寺"])]


def test_library_entry_points_build_the_pinned_retrievers(stores, monkeypatch):
    from langchain_ragspine.pipeline.modes import mode_factory
    from langchain_ragspine.pipeline.sources import open_retriever

    monkeypatch.setenv("RAGSPINE_GLOSSARY", str(stores["glossary"]))
    got = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got["open-retriever-hyde"] = describe(open_retriever(stores["lexical"], mode="hyde", k=4))
        got["open-retriever-economy"] = describe(open_retriever(stores["lexical"], mode="economy"))
        got["mode-factory-glossary"] = describe(mode_factory("glossary", k=5)(_docs()))
        got["mode-factory-hyde"] = describe(mode_factory("hyde", k=3, embedding="hashing")(_docs()))
        monkeypatch.setenv("RAGSPINE_RETRIEVAL_MODE", "multi_query")
        got["open-retriever-env-mode"] = describe(open_retriever(stores["dense"]))
    _check("library", got)


def test_served_graphs_build_the_pinned_retriever(stores, monkeypatch):
    import importlib.util

    path = Path(__file__).resolve().parents[3] / "graphs" / "app.py"
    spec = importlib.util.spec_from_file_location("_pinned_app", path)
    assert spec is not None and spec.loader is not None
    got = {}
    for env_mode in ("auto", "hyde", "economy"):
        app = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(app)
        monkeypatch.setenv("RAGSPINE_STORE", str(stores["dense"]))
        monkeypatch.setenv("RAGSPINE_RETRIEVAL_MODE", env_mode)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            retriever, llm, _compressors = app._parts()
        got[env_mode] = {"retriever": describe(retriever), "llm": describe(llm)}
    _check("served", got)
