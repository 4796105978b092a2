"""The evaluation runner on a tiny QA + BEIR fixture with hand-derived metric values, and the plots."""

from __future__ import annotations

import json
import math
import sys
import warnings
from math import log2

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from langchain_ragspine import BM25Retriever, ParagraphTextSplitter
from langchain_ragspine.evaluation import (
    EvalResult,
    QADataset,
    compare_markdown,
    evaluate,
    load_dataset,
    plot_latency_quality,
    plot_recall_curves,
)
from langchain_ragspine.tokenizers import whitespace_tokenize

# Three articles, two paragraphs each.  With chunk_size=60 / overlap 0 every paragraph is its own chunk, and
# the "# title" line is packed with paragraph 0 (title + p0 <= 60 chars; p0 + p1 > 60).
DOCS = {
    "alpha": "# Alpha\n\nThe zebra lives in Kenya.\n\nThe falcon flies over Quito.\n",
    "beta": "# Beta\n\nThe falcon nests in sunny Lima.\n\nThe walrus swims near Oslo.\n",
    "gamma": "# Gamma\n\nA walrus statue stands in a small Riga park.\n\nBakers in Tallinn sell rye bread.\n",
}
QUESTIONS = [
    # "zebra" is only in alpha#0 → answer at rank 1; paragraph ranking [alpha-p0]
    {"id": "q1", "question": "zebra", "answers": ["Kenya"], "doc_id": "alpha", "paragraph": 0},
    # "falcon" is in alpha#1 (5 tokens) and beta#0 (8 tokens): the shorter ranks first → answer at rank 2;
    # paragraph ranking [alpha-p1, beta-p0]
    {"id": "q2", "question": "falcon", "answers": ["Lima"], "doc_id": "beta", "paragraph": 0},
    # no indexed term, answer nowhere; not in the qrels (unjudged)
    {"id": "q3", "question": "penguin", "answers": ["Antarctica"], "doc_id": "gamma", "paragraph": 1},
    # "walrus" is in beta#1 (5 tokens) and gamma#0 (11 tokens) → [beta-p1, gamma-p0]; graded qrels below
    {"id": "q4", "question": "walrus", "answers": ["Oslo"], "doc_id": "beta", "paragraph": 1},
    # full-width answer: a hit only because both sides are NFKC-normalised
    {"id": "q5", "question": "zebra lives", "answers": ["Ｋｅｎｙａ"], "doc_id": "alpha", "paragraph": 0},
]
QRELS = {
    "q1": {"alpha-p0": 1},
    "q2": {"beta-p0": 1},
    "q4": {"beta-p1": 1, "gamma-p0": 2},
    "q5": {"alpha-p0": 1},
}
KS = (1, 2, 3)
SPLITTER_ARGS = {"chunk_size": 60, "chunk_overlap": 0}

# hand-derived per-question values
NDCG_Q2 = 1 / log2(3)  # the relevant paragraph at rank 2
NDCG_Q4 = (1 + 2 / log2(3)) / (2 + 1 / log2(3))  # grades 1, 2 ranked; ideal 2, 1
EXPECTED_QA = {
    "answer_recall@1": 3 / 5,  # q1, q4, q5
    "answer_recall@2": 4 / 5,  # + q2
    "answer_recall@3": 4 / 5,
    "ndcg@10": (1 + NDCG_Q2 + NDCG_Q4 + 1) / 4,  # judged: q1, q2, q4, q5
    "mrr@10": (1 + 1 / 2 + 1 + 1) / 4,
    "recall@1": (1 + 0 + 1 / 2 + 1) / 4,
    "recall@2": 1.0,
    "recall@3": 1.0,
}
EXPECTED_RANKS = {"q1": 1, "q2": 2, "q3": None, "q4": 1, "q5": 1}


@pytest.fixture(scope="module")
def dataset_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-qa")
    (root / "docs").mkdir()
    for doc_id, text in DOCS.items():
        (root / "docs" / f"{doc_id}.md").write_text(text, "utf-8")
        (root / "docs" / f"{doc_id}.json").write_text(json.dumps({"title": doc_id.title()}), "utf-8")
    (root / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS), "utf-8")
    beir = root / "beir"
    beir.mkdir()
    corpus = []
    for doc_id, text in DOCS.items():
        paragraphs = text.split("\n\n")[1:]
        corpus += [
            {"_id": f"{doc_id}-p{n}", "title": doc_id, "text": p.strip()} for n, p in enumerate(paragraphs)
        ]
    (beir / "corpus.jsonl").write_text("".join(json.dumps(c) + "\n" for c in corpus), "utf-8")
    (beir / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": q["id"], "text": q["question"]}) + "\n" for q in QUESTIONS), "utf-8"
    )
    rows = [f"{q}\t{c}\t{g}" for q, judged in QRELS.items() for c, g in judged.items()]
    (beir / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(rows) + "\n", "utf-8")
    return root


@pytest.fixture(scope="module")
def dataset(dataset_dir) -> QADataset:
    ds = load_dataset(dataset_dir)
    assert isinstance(ds, QADataset)
    return ds


def ours(chunks: list[Document]) -> BaseRetriever:
    return BM25Retriever.from_documents(chunks, tokenizer="whitespace")


def _lc_bm25() -> type[BaseRetriever]:
    """LangChain's BM25Retriever (langchain-community warns on import that it is being sunset)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from langchain_community.retrievers import BM25Retriever as LCBM25Retriever
    return LCBM25Retriever


def langchains(chunks: list[Document]) -> BaseRetriever:
    return _lc_bm25().from_documents(chunks, preprocess_func=whitespace_tokenize)


def test_fixture_chunks_are_one_paragraph_each(dataset):
    chunks = ParagraphTextSplitter(**SPLITTER_ARGS).split_documents(dataset.docs)
    assert [c.metadata["chunk_id"] for c in chunks] == [f"{d}#{i}" for d in DOCS for i in (0, 1)]
    assert chunks[0].page_content == "# Alpha\n\nThe zebra lives in Kenya."


@pytest.mark.parametrize("factory, depth_via", [(ours, "invoke(k=...)"), (langchains, "k field")])
def test_qa_metrics_match_hand_derived_values(dataset, factory, depth_via):
    result = evaluate(
        factory, dataset, ks=KS, splitter=ParagraphTextSplitter(**SPLITTER_ARGS), progress=False
    )
    assert list(result.aggregate) == list(EXPECTED_QA)
    for metric, value in EXPECTED_QA.items():
        assert result.aggregate[metric] == pytest.approx(value, abs=1e-12), metric
    assert {r["id"]: r["answer_rank"] for r in result.per_query} == EXPECTED_RANKS
    by_id = {r["id"]: r for r in result.per_query}
    assert by_id["q4"]["ndcg@10"] == pytest.approx(NDCG_Q4, abs=1e-12)
    assert by_id["q2"]["mrr@10"] == 0.5 and by_id["q2"]["recall@1"] == 0.0
    assert by_id["q3"]["ndcg@10"] is None  # unjudged
    assert by_id["q1"]["retrieved"][0] == "alpha#0"
    cfg = result.config
    assert cfg["depth"] == 10 and cfg["depth_via"] == depth_via  # at least 10 for nDCG@10 / MRR@10
    assert (cfg["n_questions"], cfg["n_judged"], cfg["n_units"], cfg["ks"]) == (5, 4, 6, [1, 2, 3])
    assert cfg["splitter"] == {"class": "ParagraphTextSplitter", "chunk_size": 60, "chunk_overlap": 0}
    assert cfg["dataset"] == dataset.name and cfg["dataset_kind"] == "qa"
    assert result.index_seconds is not None and result.index_seconds >= 0
    assert result.latency_ms["p50"] > 0 and result.latency_ms["p95"] >= result.latency_ms["p50"]
    assert all(r["latency_ms"] > 0 for r in result.per_query)


def test_config_names_the_retriever_and_its_parameters(dataset):
    mine = evaluate(ours, dataset, ks=KS, splitter=ParagraphTextSplitter(**SPLITTER_ARGS), progress=False)
    assert mine.name == "BM25Retriever"
    assert mine.config["retriever"] == "langchain_ragspine.retrievers.bm25.BM25Retriever"
    assert mine.config["retriever_params"]["tokenizer"] == "whitespace"
    lc = evaluate(
        langchains, dataset, ks=KS, splitter=ParagraphTextSplitter(**SPLITTER_ARGS), name="LangChain BM25"
    )
    assert lc.name == "LangChain BM25"
    assert lc.config["retriever"] == "langchain_community.retrievers.bm25.BM25Retriever"
    assert lc.config["retriever_params"]["preprocess_func"] == "whitespace"
    assert lc.config["factory"].endswith("langchains")


def test_built_retrievers_are_not_modified(dataset):
    chunks = ParagraphTextSplitter(**SPLITTER_ARGS).split_documents(dataset.docs)
    lc = _lc_bm25().from_documents(chunks, preprocess_func=whitespace_tokenize, k=1)
    result = evaluate(lc, dataset, ks=KS)
    assert lc.k == 1  # the runner asked a copy for 10 results
    assert result.aggregate["answer_recall@2"] == pytest.approx(4 / 5)
    assert result.index_seconds is None and result.config["factory"] is None
    assert result.config["n_units"] == 6
    with pytest.raises(ValueError, match="splitter is only used with a factory"):
        evaluate(lc, dataset, splitter=ParagraphTextSplitter())


class _Fixed(BaseRetriever):
    """Returns the same documents for every query (no ``k``: the runner uses what it returns)."""

    docs: list[Document]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        return list(self.docs)


def test_chunks_without_offsets_are_located_in_their_parent(dataset):
    # whole paragraphs without start_index / end_index (e.g. from another splitter): found by their text
    docs = [
        Document(page_content="The walrus swims near Oslo.", metadata={"doc_id": "beta"}),
        Document(page_content="Bakers in Tallinn sell rye bread.", metadata={"doc_id": "gamma"}),
        Document(page_content="A walrus statue stands in a small Riga park.", metadata={"doc_id": "gamma"}),
        Document(page_content="not in any document", metadata={"doc_id": "gamma"}),
        Document(page_content="no parent", metadata={"doc_id": "nowhere"}),
    ]
    result = evaluate(_Fixed(docs=docs), dataset, ks=(1, 3))
    q4 = next(r for r in result.per_query if r["id"] == "q4")
    # paragraphs ranked [beta-p1, gamma-p1, gamma-p0]: DCG = 1 + 2/log2(4); IDCG = 2 + 1/log2(3)
    assert q4["ndcg@10"] == pytest.approx((1 + 2 / 2) / (2 + 1 / log2(3)))
    assert q4["answer_rank"] == 1 and q4["recall@1"] == 0.5 and q4["recall@3"] == 1.0
    assert result.config["depth_via"] == "as returned"


def test_beir_dataset_scores_corpus_ids(dataset):
    assert dataset.beir is not None
    result = evaluate(ours, dataset.beir, ks=KS, progress=False)
    # paragraph corpus: the same rankings as the chunks; q3 has no qrels and is not run
    assert list(result.aggregate) == ["ndcg@10", "mrr@10", "recall@1", "recall@2", "recall@3"]
    for metric in result.aggregate:
        assert result.aggregate[metric] == pytest.approx(EXPECTED_QA[metric], abs=1e-12), metric
    assert result.config["n_questions"] == 4 and result.config["n_queries_without_qrels"] == 1
    assert result.config["n_units"] == 6 and "splitter" not in result.config
    assert result.per_query[1]["retrieved"] == ["alpha-p1", "beta-p0"]


def test_limit_ks_and_argument_errors(dataset):
    result = evaluate(ours, dataset, ks=[3, 1, 1], limit=2, progress=False)
    assert [r["id"] for r in result.per_query] == ["q1", "q2"]
    assert result.config["ks"] == [1, 3]
    assert evaluate(ours, dataset, limit=0).per_query == []
    for bad in ((), 5, "15"):
        with pytest.raises(ValueError, match=r"^ks must be a non-empty sequence of ints >= 1"):
            evaluate(ours, dataset, ks=bad)
    with pytest.raises(ValueError, match=r"^ks\[0\] must be an int >= 1, got 0$"):
        evaluate(ours, dataset, ks=(0, 1))
    for bad in (("1",), (1.0,), (1, True)):  # a cutoff that is not an int: the type error of every int argument
        with pytest.raises(TypeError, match=r"^ks\[\d\] must be an int >= 1, got "):
            evaluate(ours, dataset, ks=bad)
    with pytest.raises(ValueError, match="limit"):
        evaluate(ours, dataset, limit=-1)
    with pytest.raises(TypeError, match="BaseRetriever or a factory"):
        evaluate(42, dataset)
    with pytest.raises(TypeError, match="factory must return a BaseRetriever"):
        evaluate(lambda chunks: "nope", dataset)
    with pytest.raises(TypeError, match="QADataset or a BEIRDataset"):
        evaluate(ours, {"docs": []})


def test_no_qrels_means_answer_recall_only(dataset):
    bare = QADataset(name="bare", docs=dataset.docs, questions=dataset.questions, beir=None)
    result = evaluate(ours, bare, ks=KS, splitter=ParagraphTextSplitter(**SPLITTER_ARGS))
    assert list(result.aggregate) == ["answer_recall@1", "answer_recall@2", "answer_recall@3"]
    assert result.config["depth"] == 3 and result.config["n_judged"] == 0


def test_progress_bar_goes_to_stderr(dataset, capsys):
    evaluate(ours, dataset, ks=KS, progress=True, name="bar")
    assert "eval bar" in capsys.readouterr().err
    evaluate(ours, dataset, ks=KS, progress=False, name="quiet")
    assert "eval quiet" not in capsys.readouterr().err


@pytest.fixture(scope="module")
def results(dataset) -> list[EvalResult]:
    sp = ParagraphTextSplitter(**SPLITTER_ARGS)
    return [
        evaluate(ours, dataset, ks=(1, 3, 10, 100), splitter=sp, name="ragspine BM25"),
        evaluate(langchains, dataset, ks=(1, 3, 10, 100), splitter=sp, name="LangChain BM25 | 日本語"),
    ]


def test_json_round_trip(results):
    text = results[1].to_json()
    assert "日本語" in text  # ensure_ascii=False
    data = json.loads(text)
    assert set(data) == {"name", "config", "per_query", "aggregate", "latency_ms", "index_seconds"}
    back = EvalResult.from_json(text)
    assert back.aggregate == results[1].aggregate and back.name == results[1].name
    # NaN (an empty average) is written as null, so the JSON is standard
    empty = EvalResult(name="e", config={}, per_query=[], aggregate={"ndcg@10": math.nan}, latency_ms={})
    assert json.loads(empty.to_json())["aggregate"] == {"ndcg@10": None}
    assert math.isnan(EvalResult.from_json(empty.to_json()).aggregate["ndcg@10"])
    with pytest.raises(ValueError, match="not an EvalResult"):
        EvalResult.from_json('{"name": "x"}')


def test_markdown(results):
    md = results[0].to_markdown()
    assert md.startswith("### ragspine BM25\n")
    assert "| answer_recall@1 | 0.6000 |" in md and "| ndcg@10 |" in md
    assert "| latency p50 (ms) |" in md and "| index time (s) |" in md
    table = compare_markdown(results)
    lines = table.splitlines()
    assert lines[0] == "| metric | ragspine BM25 | LangChain BM25 \\| 日本語 |"
    assert lines[1] == "|---|---:|---:|"
    assert "| answer_recall@1 | **0.6000** | **0.6000** |" in lines  # ties are both bold
    assert "| recall@100 | **1.0000** | **1.0000** |" in lines
    with pytest.raises(ValueError):
        compare_markdown([])


def _check_png(path, tmp_path):
    from PIL import Image

    from langchain_ragspine.evaluation.plots import DPI, FIGSIZE

    assert path.exists() and path.stat().st_size > 5_000
    with Image.open(path) as im:
        assert im.format == "PNG"
        assert im.size == (round(FIGSIZE[0] * DPI), round(FIGSIZE[1] * DPI))


def test_plots_are_written(results, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no glyph or font warnings escape, even for the CJK name
        curves = plot_recall_curves(results, tmp_path / "plots" / "recall.png")
        scatter = plot_latency_quality(results, tmp_path / "plots" / "latency.png")
        para = plot_recall_curves(results, tmp_path / "paragraph-recall.png", metric="recall")
        ndcg = plot_latency_quality(results, tmp_path / "ndcg.png", metric="ndcg@10")
    for path in (curves, scatter, para, ndcg):
        _check_png(path, tmp_path)
    import matplotlib.image

    assert matplotlib.image.imread(curves).shape[:2] == (675, 1050)


def test_plot_errors(results, tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="no 'answer_recall@1'"):
        plot_latency_quality([EvalResult("x", {}, [], {"ndcg@10": 0.5}, {"p50": 1.0})], tmp_path / "x.png")
    with pytest.raises(ValueError, match="no answer_recall@k"):
        plot_recall_curves([EvalResult("x", {}, [], {"ndcg@10": 0.5}, {"p50": 1.0})], tmp_path / "x.png")
    with pytest.raises(ValueError):
        plot_recall_curves([], tmp_path / "x.png")
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"pip install 'langchain-ragspine\[eval\]'"):
        plot_recall_curves(results, tmp_path / "x.png")
