"""`ragspine eval` on small QA and BEIR folders built in tmp_path, and on the shared data when present."""

import json
import os
from pathlib import Path

import pytest

from langchain_ragspine.cli import main


def _qa_folder(root: Path) -> Path:
    docs = root / "docs"
    docs.mkdir(parents=True)
    articles = {
        "a": "# 梅雨\n\n梅雨は北海道と小笠原諸島を除く日本で見られる。\n\n梅雨前線は停滞する。",
        "b": "# 京都\n\n京都の名所は清水寺である。",
        "c": "# 大阪\n\n大阪の人口は約二百七十万人である。",
    }
    for doc_id, text in articles.items():
        (docs / f"{doc_id}.md").write_text(text, "utf-8")
    questions = [
        {"id": "q1", "question": "梅雨がないのは北海道とどこか", "answers": ["小笠原諸島"], "doc_id": "a", "paragraph": 0},
        {"id": "q2", "question": "京都の名所は何か", "answers": ["清水寺"], "doc_id": "b", "paragraph": 0},
        {"id": "q3", "question": "大阪の人口は", "answers": ["存在しない答え"], "doc_id": "c", "paragraph": 0},
    ]
    (root / "questions.jsonl").write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in questions), "utf-8")
    return root


def test_eval_qa_folder_prints_table_and_writes_json_and_plots(tmp_path: Path, capsys):
    ds = _qa_folder(tmp_path / "ds")
    out = tmp_path / "r.json"
    png = tmp_path / "r.png"
    assert main(["eval", str(ds), "--tokenizer", "auto", "cjk", "--json", str(out), "--plot", str(png)]) == 0
    table = capsys.readouterr().out
    assert "| answer_recall@1 |" in table and "bm25 tokenizer=auto" in table and "bm25 tokenizer=cjk" in table
    results = json.loads(out.read_text("utf-8"))["results"]
    assert [r["name"] for r in results] == ["bm25 tokenizer=auto", "bm25 tokenizer=cjk"]
    for r in results:
        # q1 and q2 are found at rank 1; q3's answer is not in the corpus
        assert r["aggregate"]["answer_recall@1"] == pytest.approx(2 / 3)
        assert r["config"]["n_questions"] == 3
    assert png.stat().st_size > 5000 and (tmp_path / "r-latency.png").stat().st_size > 5000


def test_eval_prints_paired_differences_to_the_baseline(tmp_path: Path, capsys):
    ds = _qa_folder(tmp_path / "ds")
    out = tmp_path / "r.json"
    args = ["eval", str(ds), "--tokenizer", "auto", "whitespace", "--baseline", "bm25 tokenizer=whitespace"]
    assert main([*args, "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Paired difference to **bm25 tokenizer=whitespace** on the same questions (n = 3)" in text
    assert "| metric | bm25 tokenizer=auto − bm25 tokenizer=whitespace |" in text
    row = next(line for line in text.splitlines() if line.startswith("| answer_recall@1 |") and "[" in line)
    # whitespace tokens cannot match unsegmented Japanese; auto finds 2 of 3, a difference 3 questions cannot prove:
    # the exact bootstrap interval of d = [1, 1, 0] excludes 0, but the exact randomisation p is 2/4 (regression)
    assert "+0.6667 [+0.2167, +1.0000] p=0.5 n.s." in row
    paired = json.loads(out.read_text("utf-8"))["paired"]
    first = paired[0]
    assert (first["metric"], first["baseline"], first["other"]) == (
        "answer_recall@1", "bm25 tokenizer=whitespace", "bm25 tokenizer=auto"
    )
    assert first["difference"] == pytest.approx(2 / 3) and first["significant"] is False
    # an unknown baseline fails before anything is evaluated
    assert main(["eval", str(ds), "--baseline", "nope"]) == 2
    assert "--baseline 'nope' is not one of the configurations: ['bm25']" in capsys.readouterr().err


def test_eval_limit_and_store(tmp_path: Path, capsys):
    ds = _qa_folder(tmp_path / "ds")
    assert main(["eval", str(ds), "--limit", "2", "--store", str(tmp_path / "S"), "--json", str(tmp_path / "r.json")]) == 0
    res = json.loads((tmp_path / "r.json").read_text("utf-8"))["results"][0]
    assert res["config"]["n_questions"] == 2 and res["aggregate"]["answer_recall@1"] == 1.0
    assert (tmp_path / "S" / "chunks.sqlite").exists()
    assert main(["eval", str(ds), "--limit", "0"]) == 2


def test_eval_beir_folder(tmp_path: Path, capsys):
    root = tmp_path / "beir"
    root.mkdir()
    corpus = [{"_id": "d1", "title": "", "text": "梅雨前線が停滞する"}, {"_id": "d2", "title": "", "text": "京都の清水寺"}]
    (root / "corpus.jsonl").write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in corpus), "utf-8")
    (root / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "清水寺"}, ensure_ascii=False) + "\n", "utf-8")
    (root / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td2\t1\n", "utf-8")
    assert main(["eval", str(root), "--json", str(tmp_path / "b.json")]) == 0
    res = json.loads((tmp_path / "b.json").read_text("utf-8"))["results"][0]
    assert res["aggregate"]["ndcg@10"] == 1.0 and res["aggregate"]["mrr@10"] == 1.0


def test_eval_bad_dataset_names_file_and_line(tmp_path: Path, capsys):
    ds = _qa_folder(tmp_path / "ds")
    with open(ds / "questions.jsonl", "a", encoding="utf-8") as f:
        f.write('{"id": "q4", "question": "x"}\n')
    assert main(["eval", str(ds)]) == 2
    err = capsys.readouterr().err
    assert "questions.jsonl:4" in err


DATA = Path(os.environ.get("RAGSPINE_DATA", Path(__file__).resolve().parents[2].parent / "shared" / "data"))


@pytest.mark.shared_data
@pytest.mark.skipif(not (DATA / "jsquad-valid").is_dir(), reason=f"shared evaluation data not found at {DATA}")
def test_eval_on_jsquad(tmp_path: Path, capsys):
    out = tmp_path / "r.json"
    assert main(["eval", str(DATA / "jsquad-valid"), "--mode", "bm25", "--limit", "300", "--json", str(out),
                 "--plot", str(tmp_path / "r.png")]) == 0
    table = capsys.readouterr().out
    for metric in ("answer_recall@1", "answer_recall@5", "answer_recall@10", "ndcg@10", "mrr@10", "recall@100"):
        assert f"| {metric} |" in table
    agg = json.loads(out.read_text("utf-8"))["results"][0]["aggregate"]
    assert agg["answer_recall@1"] > 0.85 and agg["answer_recall@10"] > 0.97


def test_eval_into_an_existing_store_keeps_its_vector_index(tmp_path: Path, capsys):
    # trial of issue 30: `eval --store S --mode bm25` re-ingested S with mode bm25, which dropped its vector index
    # (and `search --mode hybrid` on S failed afterwards, for every app on that store)
    from langchain_ragspine.pipeline.sources import open_source

    ds = _qa_folder(tmp_path / "ds")
    store = tmp_path / "S"
    assert main(["ingest", str(ds / "docs"), "--store", str(store), "--embedding", "hashing:32"]) == 0
    assert main(["eval", str(ds), "--store", str(store), "--mode", "bm25"]) == 0
    with open_source(store) as source:
        assert source.recorded_embedding() == "hashing:32"
    capsys.readouterr()
    assert main(["search", "京都の名所", "--store", str(store), "--mode", "hybrid", "--json"]) == 0
    hits = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert hits and hits[0]["metadata"]["doc_id"] == "b"
    # nor is its tokenizer changed: the tokenizers compared are built in memory (re-check of issue 30)
    assert main(["eval", str(ds), "--store", str(store), "--mode", "bm25", "--tokenizer", "cjk", "auto"]) == 0
    with open_source(store) as source:
        assert source.recorded_tokenizer() == "auto" and source.recorded_embedding() == "hashing:32"
    # a store without a vector index stays without one
    bare = tmp_path / "B"
    assert main(["eval", str(ds), "--store", str(bare), "--mode", "bm25"]) == 0
    with open_source(bare) as source:
        assert source.recorded_embedding() is None


def test_eval_embedding_none_and_a_bm25_eval_with_a_model_named_embed_nothing(tmp_path: Path, capsys):
    # re-check of issue 30: `--embedding none` read as a model (mode hybrid needs an embedding model), and
    # `--mode bm25 --embedding hashing` embedded every chunk of a temporary store it never searched with
    ds = _qa_folder(tmp_path / "ds")
    assert main(["eval", str(ds), "--mode", "bm25", "--embedding", "none"]) == 0
    assert main(["eval", str(ds), "--mode", "bm25", "--embedding", "hashing:32"]) == 0
    err = capsys.readouterr().err
    assert "needs an embedding model" not in err
    assert [line for line in err.splitlines() if line.startswith("ingest:")] and " embedded" not in err.replace(
        "0 embedded", "")
