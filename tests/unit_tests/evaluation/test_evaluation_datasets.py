"""Dataset readers (BEIR and QA layouts), their error messages, and the QA data's paragraph ids."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from langchain_core.documents import Document

from langchain_ragspine.errors import RagSpineError
from langchain_ragspine.evaluation import (
    BEIRDataset,
    QADataset,
    QAQuestion,
    load_beir,
    load_dataset,
    load_qa,
    paragraph_id,
    paragraph_ids_for,
    paragraph_spans_of,
)


def _jsonl(rows: list[object]) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows)


def _write_beir(root: Path, *, corpus=None, queries=None, qrels=None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "corpus.jsonl").write_text(
        corpus
        if corpus is not None
        else _jsonl(
            [
                {"_id": "d1", "title": "One", "text": "first text"},
                {"_id": "d2", "title": "Two", "text": "second text", "url": "http://x"},
                {"_id": 3, "text": "third, no title"},
            ]
        ),
        "utf-8",
    )
    (root / "queries.jsonl").write_text(
        queries
        if queries is not None
        else _jsonl([{"_id": "q1", "text": "first?"}, {"_id": "q2", "text": "二番目？"}]),
        "utf-8",
    )
    if qrels is not False:
        (root / "qrels.tsv").write_text(
            qrels if qrels is not None else "query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td2\t0\nq2\t3\t1\n",
            "utf-8",
        )
    return root


DOC_A = "# Alpha\n\nThe zebra lives in Kenya.\n\nThe falcon flies over Quito.\n"
DOC_B = "# ベータ\n\n　全角スペースで始まる段落。\n\n二つ目の段落。\n三行目も同じ段落。\n"


def _write_qa(root: Path, questions=None, *, beir: bool = True) -> Path:
    (root / "docs").mkdir(parents=True, exist_ok=True)
    (root / "docs" / "alpha.md").write_text(DOC_A, "utf-8")
    (root / "docs" / "alpha.json").write_text(json.dumps({"title": "Alpha", "lang": "en"}), "utf-8")
    (root / "docs" / "beta.md").write_text(DOC_B, "utf-8")
    (root / "questions.jsonl").write_text(
        questions
        if questions is not None
        else _jsonl(
            [
                {"id": "q1", "question": "Where?", "answers": ["Kenya"], "doc_id": "alpha", "paragraph": 0},
                {
                    "id": "q2",
                    "question": "何？",
                    "answers": ["段落", "三行目"],
                    "doc_id": "beta",
                    "paragraph": 1,
                },
                {
                    "id": "q3",
                    "question": "No paragraph",
                    "answers": ["Quito"],
                    "doc_id": "alpha",
                    "paragraph": None,
                },
                {"id": "q4", "question": "Paragraph omitted", "answers": ["falcon"], "doc_id": "alpha"},
            ]
        ),
        "utf-8",
    )
    if beir:
        _write_beir(
            root / "beir",
            corpus=_jsonl([{"_id": "alpha-p0", "title": "Alpha", "text": "The zebra lives in Kenya."}]),
            queries=_jsonl([{"_id": "q1", "text": "Where?"}]),
            qrels="query-id\tcorpus-id\tscore\nq1\talpha-p0\t1\n",
        )
    return root


# ------------------------------------------------------------------------------------------------ BEIR


def test_load_beir(tmp_path):
    ds = load_beir(_write_beir(tmp_path / "set"))
    assert isinstance(ds, BEIRDataset) and ds.name == "set"
    assert [d.id for d in ds.corpus] == ["d1", "d2", "3"]
    assert ds.corpus[0].page_content == "first text"
    assert ds.corpus[0].metadata == {"_id": "d1", "doc_id": "d1", "title": "One"}
    assert ds.corpus[1].metadata["url"] == "http://x"
    assert ds.corpus[2].metadata["title"] == ""
    assert ds.queries == {"q1": "first?", "q2": "二番目？"}
    assert ds.qrels == {"q1": {"d1": 2, "d2": 0}, "q2": {"3": 1}}


def test_qrels_without_header_and_beir_split_folder(tmp_path):
    root = _write_beir(tmp_path / "a", qrels="q1\td1\t1\nq2\t3\t2\n")
    assert load_beir(root).qrels == {"q1": {"d1": 1}, "q2": {"3": 2}}
    # BEIR's own layout: qrels/<split>.tsv
    root = _write_beir(tmp_path / "b", qrels=False)
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td2\t1\n", "utf-8")
    (root / "qrels" / "dev.tsv").write_text("q2\td1\t1\n", "utf-8")
    assert load_beir(root).qrels == {"q1": {"d2": 1}}
    assert load_beir(root, split="dev").qrels == {"q2": {"d1": 1}}
    # blank lines, CRLF, a BOM and space-separated rows are tolerated
    root = _write_beir(tmp_path / "c", qrels="\ufeffquery-id\tcorpus-id\tscore\r\n\r\nq1 d1 1\r\n")
    assert load_beir(root).qrels == {"q1": {"d1": 1}}


def _err(exc_info) -> RagSpineError:
    err = exc_info.value
    assert isinstance(err, RagSpineError)
    return err


@pytest.mark.parametrize(
    "corpus, line, field, words",
    [
        ('{"_id": "d1", "text": "ok"}\n{"_id": "d2", "text": \n', 2, None, "not valid JSON"),
        ('{"_id": "d1", "text": "ok"}\n["d2", "text"]\n', 2, None, "JSON object, got array"),
        ('{"_id": "d1", "text": "ok"}\n\n{"text": "no id"}\n', 3, "_id", "missing"),
        ('{"_id": ["d1"], "text": "ok"}\n', 1, "_id", "must be a string, got array"),
        ('{"_id": "", "text": "ok"}\n', 1, "_id", "must not be empty"),
        ('{"_id": "d1"}\n', 1, "text", "missing"),
        ('{"_id": "d1", "text": 5}\n', 1, "text", "must be a string, got number"),
        ('{"_id": "d1", "text": "x", "title": {"a": 1}}\n', 1, "title", "must be a string, got object"),
        (
            '{"_id": "d1", "text": "x"}\n{"_id": "d1", "text": "y"}\n',
            2,
            "_id",
            "duplicate corpus id 'd1' (first on line 1)",
        ),
    ],
)
def test_malformed_corpus_lines(tmp_path, corpus, line, field, words):
    root = _write_beir(tmp_path / "set", corpus=corpus)
    with pytest.raises(RagSpineError) as info:
        load_beir(root)
    err = _err(info)
    path = str(root / "corpus.jsonl")
    assert (err.path, err.line, err.field) == (path, line, field)
    assert f"{path}:{line}: " in str(err) and words in str(err)
    if field:
        assert f"field {field!r}" in str(err)


@pytest.mark.parametrize(
    "queries, line, field, words",
    [
        ('{"_id": "q1", "text": "ok"}\n{"_id": "q2"}\n', 2, "text", "missing"),
        ('{"_id": "q1", "text": null}\n', 1, "text", "must be a string, got null"),
        ('{"_id": true, "text": "t"}\n', 1, "_id", "must be a string, got boolean"),
        ('{"_id": "q1", "text": "a"}\n{"_id": "q1", "text": "b"}\n', 2, "_id", "duplicate query id"),
        ("not json\n", 1, None, "not valid JSON"),
    ],
)
def test_malformed_query_lines(tmp_path, queries, line, field, words):
    root = _write_beir(tmp_path / "set", queries=queries)
    with pytest.raises(RagSpineError) as info:
        load_beir(root)
    err = _err(info)
    path = str(root / "queries.jsonl")
    assert (err.path, err.line, err.field) == (path, line, field)
    assert f"{path}:{line}: " in str(err) and words in str(err)


@pytest.mark.parametrize(
    "qrels, line, field, words",
    [
        (
            "query-id\tcorpus-id\tscore\nq1\td1\n",
            2,
            None,
            "needs 3 tab-separated columns (query-id, corpus-id, score), got 2",
        ),
        ("q1\td1\t1\t0\n", 1, None, "got 4"),
        ("q1\td1\t1\nq1\td2\tyes\n", 2, "score", "must be an integer, got 'yes'"),
        ("q1\td1\t1.5\n", 1, "score", "must be an integer"),
        ("q1\td1\t1\n\nq1\td1\t2\n", 3, "score", "conflicting judgement"),
        ("\td1\t1\n", 1, "query-id", "empty"),
        ("q1\t\t1\n", 1, "corpus-id", "empty"),
        # a header anywhere but the first line is a malformed row
        ("q1\td1\t1\nquery-id\tcorpus-id\tscore\n", 2, "score", "must be an integer, got 'score'"),
    ],
)
def test_malformed_qrels_rows(tmp_path, qrels, line, field, words):
    root = _write_beir(tmp_path / "set", qrels=qrels)
    with pytest.raises(RagSpineError) as info:
        load_beir(root)
    err = _err(info)
    path = str(root / "qrels.tsv")
    assert (err.path, err.line, err.field) == (path, line, field)
    assert f"{path}:{line}: " in str(err) and words in str(err)


def test_missing_beir_files(tmp_path):
    root = _write_beir(tmp_path / "set", qrels=False)
    with pytest.raises(RagSpineError, match="qrels.tsv: file not found"):
        load_beir(root)
    (root / "queries.jsonl").unlink()
    with pytest.raises(RagSpineError, match="queries.jsonl: file not found"):
        load_beir(root)
    with pytest.raises(RagSpineError, match="not a directory"):
        load_beir(tmp_path / "nope")


def test_non_utf8_line_is_located(tmp_path):
    root = _write_beir(tmp_path / "set")
    (root / "queries.jsonl").write_bytes(b'{"_id": "q1", "text": "ok"}\n{"_id": "q2", "text": "\xff"}\n')
    with pytest.raises(RagSpineError) as info:
        load_beir(root)
    assert (_err(info).path, _err(info).line) == (str(root / "queries.jsonl"), 2)


# ------------------------------------------------------------------------------------------------ QA


def test_load_qa(tmp_path):
    ds = load_qa(_write_qa(tmp_path / "qa"))
    assert isinstance(ds, QADataset) and ds.name == "qa"
    assert [d.metadata["doc_id"] for d in ds.docs] == ["alpha", "beta"]
    assert ds.docs[0].metadata["lang"] == "en"  # sidecar metadata
    assert ds.doc("beta").page_content == DOC_B
    assert ds.questions == [
        QAQuestion(id="q1", question="Where?", answers=["Kenya"], doc_id="alpha", paragraph=0),
        QAQuestion(id="q2", question="何？", answers=["段落", "三行目"], doc_id="beta", paragraph=1),
        QAQuestion(id="q3", question="No paragraph", answers=["Quito"], doc_id="alpha", paragraph=None),
        QAQuestion(id="q4", question="Paragraph omitted", answers=["falcon"], doc_id="alpha", paragraph=None),
    ]
    assert ds.beir is not None and ds.beir.qrels == {"q1": {"alpha-p0": 1}}
    assert load_qa(_write_qa(tmp_path / "nobeir", beir=False)).beir is None


def test_load_dataset_detects_the_layout(tmp_path):
    assert isinstance(load_dataset(_write_qa(tmp_path / "qa")), QADataset)
    assert isinstance(load_dataset(_write_beir(tmp_path / "beir")), BEIRDataset)
    (tmp_path / "empty").mkdir()
    with pytest.raises(RagSpineError, match="not a dataset"):
        load_dataset(tmp_path / "empty")
    with pytest.raises(RagSpineError, match="not a directory"):
        load_dataset(tmp_path / "missing")
    (tmp_path / "nodocs").mkdir()
    (tmp_path / "nodocs" / "questions.jsonl").write_text("", "utf-8")
    with pytest.raises(RagSpineError, match="docs/ folder"):
        load_dataset(tmp_path / "nodocs")


GOOD = {"id": "q1", "question": "Where?", "answers": ["Kenya"], "doc_id": "alpha", "paragraph": 0}


def _with(**changes):
    row = {**GOOD, **changes}
    return {k: v for k, v in row.items() if v is not _DROP}


_DROP = object()


@pytest.mark.parametrize(
    "bad, field, words",
    [
        ('{"id": "q9", "question": ', None, "not valid JSON"),
        ("42", None, "JSON object, got number"),
        (_with(id=_DROP), "id", "missing"),
        (_with(id=None), "id", "must be a string, got null"),
        (_with(question=_DROP), "question", "missing"),
        (_with(question=["Where?"]), "question", "must be a string, got array"),
        (_with(question="  "), "question", "must not be empty"),
        (_with(answers=_DROP), "answers", "missing"),
        (_with(answers="Kenya"), "answers", "must be a non-empty array of strings, got string"),
        (_with(answers=[]), "answers", "got array (empty)"),
        (_with(answers=["Kenya", 3]), "answers[1]", "must be a non-empty string, got number"),
        (_with(answers=[""]), "answers[0]", "got an empty string"),
        (_with(doc_id=_DROP), "doc_id", "missing"),
        (_with(doc_id="gamma"), "doc_id", "no document 'gamma' in the docs folder"),
        (_with(paragraph="0"), "paragraph", "must be an integer or null, got string"),
        (_with(paragraph=True), "paragraph", "must be an integer or null, got boolean"),
        (_with(paragraph=2), "paragraph", "2 is out of range: document 'alpha' has 2 paragraphs"),
        (_with(paragraph=-1), "paragraph", "out of range"),
        (_with(id="q0"), "id", "duplicate question id 'q0' (first on line 1)"),
    ],
)
def test_malformed_question_lines(tmp_path, bad, field, words):
    first = _with(id="q0")
    root = _write_qa(tmp_path / "qa", questions=_jsonl([first, bad]), beir=False)
    with pytest.raises(RagSpineError) as info:
        load_qa(root)
    err = _err(info)
    path = str(root / "questions.jsonl")
    assert (err.path, err.line, err.field) == (path, 2, field)
    assert f"{path}:2: " in str(err) and words in str(err)


def test_malformed_qa_beir_folder_names_its_file(tmp_path):
    root = _write_qa(tmp_path / "qa")
    (root / "beir" / "qrels.tsv").write_text("q1\talpha-p0\n", "utf-8")
    with pytest.raises(RagSpineError) as info:
        load_qa(root)
    assert (_err(info).path, _err(info).line) == (str(root / "beir" / "qrels.tsv"), 1)


# ------------------------------------------------------------------------------------------------ paragraphs


def test_paragraph_spans_skip_the_title_line():
    doc = Document(page_content=DOC_A, metadata={"doc_id": "alpha"})
    spans = paragraph_spans_of(doc)
    assert [DOC_A[s:e] for s, e in spans] == ["The zebra lives in Kenya.", "The falcon flies over Quito."]
    # leading ideographic space is trimmed; a paragraph may span several lines
    doc_b = Document(page_content=DOC_B, metadata={"doc_id": "beta"})
    assert [DOC_B[s:e] for s, e in paragraph_spans_of(doc_b)] == [
        "全角スペースで始まる段落。",
        "二つ目の段落。\n三行目も同じ段落。",
    ]
    # an empty title ("# " → "#") is still a title; no title line → paragraphs from the first one
    empty_title = "# \n\nA\n\nB"
    assert [empty_title[s:e] for s, e in paragraph_spans_of(Document(page_content=empty_title))] == ["A", "B"]
    no_title = "A first paragraph.\n\n## Not a title\n\nC"
    assert len(paragraph_spans_of(Document(page_content=no_title))) == 3
    assert len(paragraph_spans_of(Document(page_content="# Title\nbody on the next line\n\nB"))) == 2


def test_paragraph_ids_for_char_ranges():
    doc = Document(page_content=DOC_A, metadata={"doc_id": "alpha"})
    p0 = DOC_A.index("The zebra")
    p1 = DOC_A.index("The falcon")
    assert paragraph_id("alpha", 3) == "alpha-p3"
    assert paragraph_ids_for(doc, 0, len(DOC_A)) == ["alpha-p0", "alpha-p1"]
    assert paragraph_ids_for(doc, 0, p0 + 3) == ["alpha-p0"]  # title + start of p0
    assert paragraph_ids_for(doc, 0, 7) == []  # the title alone
    assert paragraph_ids_for(doc, p0 + 10, p1 + 1) == ["alpha-p0", "alpha-p1"]
    assert paragraph_ids_for(doc, p0 + 10, p1 + 1, by_overlap=True) == ["alpha-p0", "alpha-p1"]
    assert paragraph_ids_for(doc, p1 - 5, len(DOC_A), by_overlap=True) == ["alpha-p1", "alpha-p0"]
    assert paragraph_ids_for(doc, p1 - 2, p1) == []  # the blank line between paragraphs
    assert paragraph_ids_for(doc, p1, p1) == []  # an empty range overlaps nothing
    # the document id falls back to Document.id
    assert paragraph_ids_for(Document(page_content=DOC_A, id="A"), p1, p1 + 1) == ["A-p1"]
    with pytest.raises(ValueError, match="start"):
        paragraph_ids_for(doc, 5, 4)


# ------------------------------------------------------------------------------------------------ shared data


def _shared_data() -> Path:
    env = os.environ.get("RAGSPINE_DATA")
    return Path(env) if env else Path(__file__).resolve().parents[3].parent / "shared" / "data"


SHARED = _shared_data()
SETS = ["jsquad-valid", "cmrc2018-dev"]

# Every way the shared data's paragraph n differs from its BEIR corpus text of "{doc_id}-p{n}": BEIR keeps a
# leading ideographic space (U+3000) or ASCII space that paragraph_spans trims.  Any other difference fails.
KNOWN_TEXT_DIFFERENCES = {
    "jsquad-valid": {
        "jsquad-valid-a0017-p0": " ",
        "jsquad-valid-a0045-p2": "\u3000",
        "jsquad-valid-a0045-p4": "\u3000",
        "jsquad-valid-a0045-p6": "\u3000",
        "jsquad-valid-a0045-p7": "\u3000",
        "jsquad-valid-a0045-p8": "\u3000",
    },
    "cmrc2018-dev": {},
}
# cmrc2018-dev-a0215 has an empty title ("# " line, "title": "" in its sidecar): CorpusLoader falls back to
# the file stem as the title, while the BEIR corpus keeps "".  Its two paragraphs come from two different
# articles.
KNOWN_TITLE_DIFFERENCES = {
    "cmrc2018-dev": {"cmrc2018-dev-a0215-p0", "cmrc2018-dev-a0215-p1"},
    "jsquad-valid": set(),
}


@pytest.fixture(scope="module", params=SETS)
def shared_set(request):
    root = SHARED / request.param
    if not (root / "questions.jsonl").exists():
        pytest.skip(
            f"shared evaluation data not found at {root} (set RAGSPINE_DATA to the folder holding {SETS})"
        )
    return request.param, load_dataset(root)


@pytest.mark.shared_data
def test_shared_paragraphs_match_the_beir_corpus(shared_set):
    name, ds = shared_set
    assert isinstance(ds, QADataset) and ds.beir is not None
    corpus = {d.id: d for d in ds.beir.corpus}
    ours: dict[str, tuple[str, str]] = {}
    for doc in ds.docs:
        for n, (s, e) in enumerate(paragraph_spans_of(doc)):
            ours[paragraph_id(doc.metadata["doc_id"], n)] = (doc.page_content[s:e], doc.metadata["title"])
    assert set(ours) == set(corpus), (
        f"only ours: {sorted(set(ours) - set(corpus))[:5]}, only BEIR: {sorted(set(corpus) - set(ours))[:5]}"
    )
    text_diffs: dict[str, str] = {}
    title_diffs: set[str] = set()
    for pid, (text, title) in ours.items():
        beir_text = corpus[pid].page_content
        if beir_text != text:
            lead = beir_text[: len(beir_text) - len(beir_text.lstrip())]
            trail = beir_text[len(beir_text.rstrip()) :]
            assert beir_text.strip() == text and not trail, (
                f"{pid}: BEIR {beir_text[:60]!r}… vs ours {text[:60]!r}… differ beyond leading whitespace"
            )
            text_diffs[pid] = lead
        if corpus[pid].metadata["title"] != title:
            title_diffs.add(pid)
    assert text_diffs == KNOWN_TEXT_DIFFERENCES[name]
    assert title_diffs == KNOWN_TITLE_DIFFERENCES[name]


@pytest.mark.shared_data
def test_shared_questions_point_at_existing_paragraphs(shared_set):
    name, ds = shared_set
    expected = {"jsquad-valid": (59, 4442), "cmrc2018-dev": (847, 3219)}[name]
    assert (len(ds.docs), len(ds.questions)) == expected
    qrels = ds.beir.qrels
    for q in ds.questions:
        # the paragraph-level qrels judge exactly the question's own paragraph
        assert qrels[q.id] == {paragraph_id(q.doc_id, q.paragraph): 1}
