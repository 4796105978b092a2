"""The demo QA set (``docs/demo-qa``): it loads in the QA layout, every gold answer is a verbatim span of its page
(and of the paragraph named), no question targets a RESTRICTED or INTERNAL page, and ``ragspine eval`` runs on it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from langchain_ragspine.cli import main
from langchain_ragspine.document_loaders import CorpusLoader
from langchain_ragspine.evaluation import QADataset, load_dataset, paragraph_spans_of
from langchain_ragspine.text import CJK_CHAR_RE

REPO = Path(__file__).resolve().parents[3]
QA = REPO / "docs" / "demo-qa"


@pytest.fixture(scope="module")
def dataset() -> QADataset:
    loaded = load_dataset(QA)
    assert isinstance(loaded, QADataset)
    return loaded


def test_the_docs_folder_is_the_demo_corpus_not_a_copy(dataset: QADataset):
    assert (QA / "docs").resolve() == (REPO / "docs" / "demo").resolve()
    demo = CorpusLoader(REPO / "docs" / "demo").load()
    assert [(d.metadata["doc_id"], d.page_content) for d in dataset.docs] == [
        (d.metadata["doc_id"], d.page_content) for d in demo
    ]


def test_every_answer_is_a_verbatim_span_of_its_page_and_paragraph(dataset: QADataset):
    assert 30 <= len(dataset.questions) <= 45
    for q in dataset.questions:
        doc = dataset.doc(q.doc_id)
        assert q.paragraph is not None, q.id
        start, end = paragraph_spans_of(doc)[q.paragraph]
        for answer in q.answers:
            assert answer in doc.page_content[start:end], (q.id, answer)


def test_questions_target_public_pages_only_about_half_in_each_language(dataset: QADataset):
    langs = []
    for q in dataset.questions:
        doc = dataset.doc(q.doc_id)
        assert doc.metadata["sensitivity"] == "PUBLIC", q.id
        lang = doc.metadata["lang"]
        has_cjk = CJK_CHAR_RE.search(q.question) is not None
        assert has_cjk == (lang == "ja"), q.id  # a Japanese question for a Japanese page, English for English
        assert q.id.startswith(f"{lang}-"), q.id
        langs.append(lang)
    assert abs(langs.count("ja") - langs.count("en")) <= 4


def test_the_file_is_one_object_a_line_with_only_the_qa_fields():
    lines = (QA / "questions.jsonl").read_text("utf-8").splitlines()
    for line in lines:
        assert set(json.loads(line)) == {"id", "question", "answers", "doc_id", "paragraph"}


def test_ragspine_eval_runs_on_it(tmp_path: Path, capsys):
    out = tmp_path / "r.json"
    assert main(["eval", str(QA), "--mode", "bm25", "--json", str(out)]) == 0
    assert "| answer_recall@10 |" in capsys.readouterr().out
    (result,) = json.loads(out.read_text("utf-8"))["results"]
    assert result["config"]["n_questions"] == 40
    assert result["aggregate"]["answer_recall@10"] >= 0.9  # BM25 finds nearly every answer in its top ten
