"""Readers for retrieval evaluation data: the BEIR layout and the question-answering (QA) layout.

* **BEIR** (Thakur et al., "BEIR: A Heterogeneous Benchmark for Zero-shot Evaluation of Information Retrieval
  Models", NeurIPS Datasets and Benchmarks 2021): a folder with ``corpus.jsonl`` (one ``{"_id", "title",
  "text"}`` object a line), ``queries.jsonl`` (``{"_id", "text"}``) and ``qrels.tsv`` (tab-separated
  ``query-id  corpus-id  score``, with or without that header line; BEIR's own ``qrels/<split>.tsv`` is read
  when there is no ``qrels.tsv``).
* **QA**: a folder with ``docs/`` (a corpus read by
  :class:`~langchain_ragspine.document_loaders.CorpusLoader`, e.g. ``<doc_id>.md`` = ``# title`` + blank-line
  separated paragraphs, with ``<doc_id>.json`` sidecars), ``questions.jsonl`` (``{"id", "question", "answers":
  [...], "doc_id", "paragraph"}``, the SQuAD-style extractive QA data of JSQuAD / CMRC 2018 turned into a
  retrieval task) and, optionally, ``beir/`` — the same data at paragraph level in BEIR layout, whose corpus
  ids are ``f"{doc_id}-p{n}"`` (see :func:`paragraph_id`).

Malformed data raises :class:`~langchain_ragspine.errors.RagSpineError` naming the file, the 1-based line and
the field: a line that is not JSON or not an object, a missing or mistyped field, a duplicate id, a qrels row
without three columns or with a non-integer score, a question whose ``doc_id`` is not among the documents or
whose ``paragraph`` is out of range.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.documents import Document

from langchain_ragspine.document_loaders import CorpusLoader
from langchain_ragspine.errors import RagSpineError, json_type_name, parse_json_object
from langchain_ragspine.text_splitters.paragraph import Span, paragraph_spans

__all__ = [
    "BEIRDataset",
    "QADataset",
    "QAQuestion",
    "load_beir",
    "load_dataset",
    "load_qa",
    "paragraph_id",
    "paragraph_ids_for",
    "paragraph_spans_of",
]

_QRELS_HEADER = ("query-id", "corpus-id", "score")
_TITLE_LINE = re.compile(r"#(?:[ \t][^\n]*)?")


@dataclass
class BEIRDataset:
    """A retrieval test collection in BEIR layout.

    Attributes:
        corpus: one ``Document`` per corpus line: ``id`` = ``_id``, ``page_content`` = ``text``, metadata
            ``{"_id", "doc_id" (= _id), "title"}`` plus any other fields of the line.
        queries: ``{query_id: text}``.
        qrels: ``{query_id: {corpus_id: grade}}`` (``grade > 0`` is relevant).
        name: the folder name (for reports).
    """

    corpus: list[Document]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    name: str = ""


@dataclass
class QAQuestion:
    """One question of a QA dataset.

    Attributes:
        id: question id (unique in the dataset).
        question: the question text (the retrieval query).
        answers: gold answer strings (at least one, non-empty).
        doc_id: the document the answer comes from.
        paragraph: 0-based index of the answer's paragraph in that document (see :func:`paragraph_spans_of`),
            or ``None`` when unknown.
    """

    id: str
    question: str
    answers: list[str]
    doc_id: str
    paragraph: int | None = None


@dataclass
class QADataset:
    """A QA retrieval dataset: documents, questions, and optionally paragraph-level BEIR qrels.

    Attributes:
        name: the folder name.
        docs: the documents, as loaded by ``CorpusLoader`` (``metadata["doc_id"]`` set).
        questions: in file order.
        beir: the ``beir/`` sub-folder when present (paragraph-level corpus, queries keyed by question id,
            qrels).
    """

    name: str
    docs: list[Document]
    questions: list[QAQuestion]
    beir: BEIRDataset | None = None
    _by_id: dict[str, Document] = field(default_factory=dict, init=False, repr=False, compare=False)

    def doc(self, doc_id: str) -> Document:
        """The document with ``metadata["doc_id"] == doc_id``.

        Raises:
            KeyError: no such document.
        """
        if len(self._by_id) != len(self.docs):
            self._by_id = {_doc_id(d): d for d in self.docs}
        return self._by_id[doc_id]


# ------------------------------------------------------------------------------------------------- paragraphs


def _doc_id(doc: Document) -> str:
    value = doc.metadata.get("doc_id")
    if value is None or value == "":
        value = doc.id
    if value is None or value == "":
        raise ValueError("document has neither metadata['doc_id'] nor an id")
    return str(value)


def paragraph_id(doc_id: str, n: int) -> str:
    """The paragraph-level corpus id convention of the QA data: ``f"{doc_id}-p{n}"`` (``n`` from 0)."""
    return f"{doc_id}-p{n}"


def paragraph_spans_of(doc: Document) -> list[Span]:
    """``(start, end)`` offsets into ``doc.page_content`` of its paragraphs, numbered as the QA data numbers
    them.

    Paragraphs are :func:`~langchain_ragspine.text_splitters.paragraph.paragraph_spans` (blank-line separated,
    whitespace-trimmed, empty ones dropped) without the leading title paragraph: the first paragraph is
    dropped when it is a single ATX level-1 heading line (``# title``, or a bare ``#`` when the title is
    empty).  Paragraph ``n`` of the result is corpus id ``f"{doc_id}-p{n}"``.
    """
    spans = paragraph_spans(doc.page_content)
    if spans:
        s, e = spans[0]
        if _TITLE_LINE.fullmatch(doc.page_content[s:e]):
            spans = spans[1:]
    return spans


def paragraph_ids_for(
    doc: Document, start: int, end: int, *, spans: list[Span] | None = None, by_overlap: bool = False
) -> list[str]:
    """Ids (``f"{doc_id}-p{n}"``) of the paragraphs of ``doc`` that the char range ``[start, end)`` overlaps.

    ``start`` / ``end`` are offsets into ``doc.page_content``: for a ``ParagraphTextSplitter`` chunk, its
    ``start_index`` / ``end_index`` minus ``doc.metadata.get("body_offset", 0)`` (chunk offsets index the source
    file).  The range overlaps paragraph ``[ps, pe)`` when ``start < pe and ps < end``.  The title line and the blank lines between paragraphs belong to no
    paragraph.

    Args:
        doc: the parent document (``metadata["doc_id"]``, else ``doc.id``, names it).
        start / end: the chunk's char range in ``doc.page_content``.
        spans: precomputed :func:`paragraph_spans_of` ``(doc)``, to save recomputing it for every chunk.
        by_overlap: order the ids by the number of characters shared with the range, most first (ties in
            document order) instead of in document order.  A chunk that starts with an 80-character overlap
            from the previous paragraph then ranks its own paragraph first.

    Returns:
        The ids in document order (or by overlap); ``[]`` when the range overlaps no paragraph.

    Raises:
        ValueError: ``start > end``, or ``doc`` has no id.
    """
    if start > end:
        raise ValueError(f"start ({start}) must be <= end ({end})")
    doc_id = _doc_id(doc)
    if spans is None:
        spans = paragraph_spans_of(doc)
    hits = [(n, min(pe, end) - max(ps, start)) for n, (ps, pe) in enumerate(spans) if start < pe and ps < end]
    if by_overlap:
        hits.sort(key=lambda h: -h[1])  # stable: ties keep document order
    return [paragraph_id(doc_id, n) for n, _ in hits]


# ---------------------------------------------------------------------------------------------- JSONL helpers


def _read_lines(path: Path) -> Iterator[tuple[int, str]]:
    """``(lineno, line)`` for the non-blank lines of a UTF-8 file (a leading BOM is dropped)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise RagSpineError("file not found", path=path) from None
    except UnicodeDecodeError as exc:
        bad_line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise RagSpineError(f"not valid UTF-8 ({exc.reason})", path=path, line=bad_line) from None
    text = text.removeprefix("\ufeff")
    for lineno, line in enumerate(text.split("\n"), start=1):
        line = line.rstrip("\r")
        if line.strip():
            yield lineno, line


def _json_objects(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for lineno, line in _read_lines(path):
        yield lineno, parse_json_object(line, path=path, lineno=lineno, what="a line")


def _records(path: Path, key: str, what: str) -> Iterator[tuple[int, dict[str, Any], str]]:
    """``(line number, object, id)`` of each JSON line of ``path``, its id read from field ``key``; a repeated id
    is a :class:`RagSpineError` naming both lines (``what`` names the kind of id, e.g. ``"corpus"``)."""
    seen: dict[str, int] = {}
    for lineno, obj in _json_objects(path):
        rid = _id_field(obj, key, path, lineno)
        if rid in seen:
            raise RagSpineError(
                f"duplicate {what} id {rid!r} (first on line {seen[rid]})",
                path=path,
                line=lineno,
                field=key,
            )
        seen[rid] = lineno
        yield lineno, obj, rid


def _id_field(obj: dict[str, Any], key: str, path: Path, lineno: int) -> str:
    """A required id: a non-empty string, or an integer (converted)."""
    if key not in obj:
        raise RagSpineError("missing", path=path, line=lineno, field=key)
    value = obj[key]
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise RagSpineError(f"must be a string, got {json_type_name(value)}", path=path, line=lineno, field=key)
    text = str(value)
    if not text.strip():
        raise RagSpineError("must not be empty", path=path, line=lineno, field=key)
    return text


def _str_field(obj: dict[str, Any], key: str, path: Path, lineno: int, *, default: str | None = None) -> str:
    if key not in obj or (default is not None and obj[key] is None):
        if default is None:
            raise RagSpineError("missing", path=path, line=lineno, field=key)
        return default
    value = obj[key]
    if not isinstance(value, str):
        raise RagSpineError(f"must be a string, got {json_type_name(value)}", path=path, line=lineno, field=key)
    return value


# ---------------------------------------------------------------------------------------------------- BEIR


def _read_corpus(path: Path) -> list[Document]:
    docs: list[Document] = []
    for lineno, obj, doc_id in _records(path, "_id", "corpus"):
        text = _str_field(obj, "text", path, lineno)
        title = _str_field(obj, "title", path, lineno, default="")
        extra = {k: v for k, v in obj.items() if k not in ("_id", "text", "title")}
        meta = {**extra, "_id": doc_id, "doc_id": doc_id, "title": title}
        docs.append(Document(id=doc_id, page_content=text, metadata=meta))
    return docs


def _read_queries(path: Path) -> dict[str, str]:
    queries: dict[str, str] = {}
    for lineno, obj, qid in _records(path, "_id", "query"):
        queries[qid] = _str_field(obj, "text", path, lineno)
    return queries


def _read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """Tab-separated ``query-id corpus-id score`` rows; a first line equal to that header is skipped.

    Rows are split on tabs (BEIR's format); a row without a tab is split on runs of whitespace.
    """
    qrels: dict[str, dict[str, int]] = {}
    for lineno, line in _read_lines(path):
        cols = line.split("\t") if "\t" in line else line.split()
        cols = [c.strip() for c in cols]
        if lineno == 1 and tuple(c.lower() for c in cols) == _QRELS_HEADER:
            continue
        if len(cols) != 3:
            raise RagSpineError(
                f"a qrels row needs 3 tab-separated columns (query-id, corpus-id, score), got {len(cols)}",
                path=path,
                line=lineno,
            )
        qid, cid, raw = cols
        if not qid:
            raise RagSpineError("empty", path=path, line=lineno, field="query-id")
        if not cid:
            raise RagSpineError("empty", path=path, line=lineno, field="corpus-id")
        try:
            grade = int(raw)
        except ValueError:
            raise RagSpineError(
                f"must be an integer, got {raw!r}", path=path, line=lineno, field="score"
            ) from None
        judged = qrels.setdefault(qid, {})
        if cid in judged and judged[cid] != grade:
            raise RagSpineError(
                f"conflicting judgement for ({qid!r}, {cid!r}): {judged[cid]} earlier, {grade} here",
                path=path,
                line=lineno,
                field="score",
            )
        judged[cid] = grade
    return qrels


def load_beir(path: str | os.PathLike[str], *, split: str = "test") -> BEIRDataset:
    """Read a BEIR-layout folder: ``corpus.jsonl``, ``queries.jsonl`` and ``qrels.tsv`` (else
    ``qrels/<split>.tsv``).

    Qrels rows naming a query or corpus id absent from the other files are kept as they are (real BEIR sets
    have a few); the runner evaluates only queries present in ``queries`` with at least one relevant
    judgement.

    Raises:
        RagSpineError: a missing file, or a malformed line (file, line and field named).
    """
    root = Path(path)
    if not root.is_dir():
        raise RagSpineError("not a directory", path=root)
    qrels_path = root / "qrels.tsv"
    if not qrels_path.exists() and (root / "qrels" / f"{split}.tsv").exists():
        qrels_path = root / "qrels" / f"{split}.tsv"
    return BEIRDataset(
        corpus=_read_corpus(root / "corpus.jsonl"),
        queries=_read_queries(root / "queries.jsonl"),
        qrels=_read_qrels(qrels_path),
        name=root.name,
    )


# ---------------------------------------------------------------------------------------------------- QA


def _read_questions(path: Path, docs: dict[str, Document]) -> list[QAQuestion]:
    questions: list[QAQuestion] = []
    n_paragraphs: dict[str, int] = {}
    for lineno, obj, qid in _records(path, "id", "question"):
        question = _str_field(obj, "question", path, lineno)
        if not question.strip():
            raise RagSpineError("must not be empty", path=path, line=lineno, field="question")
        if "answers" not in obj:
            raise RagSpineError("missing", path=path, line=lineno, field="answers")
        answers = obj["answers"]
        if not isinstance(answers, list) or not answers:
            raise RagSpineError(
                f"must be a non-empty array of strings, got {json_type_name(answers)}"
                + (" (empty)" if isinstance(answers, list) else ""),
                path=path,
                line=lineno,
                field="answers",
            )
        for i, a in enumerate(answers):
            if not isinstance(a, str) or not a.strip():
                what = json_type_name(a) if not isinstance(a, str) else "an empty string"
                raise RagSpineError(
                    f"must be a non-empty string, got {what}", path=path, line=lineno, field=f"answers[{i}]"
                )
        doc_id = _id_field(obj, "doc_id", path, lineno)
        if doc_id not in docs:
            raise RagSpineError(
                f"no document {doc_id!r} in the docs folder", path=path, line=lineno, field="doc_id"
            )
        paragraph = obj.get("paragraph")
        if paragraph is not None:
            if isinstance(paragraph, bool) or not isinstance(paragraph, int):
                raise RagSpineError(
                    f"must be an integer or null, got {json_type_name(paragraph)}",
                    path=path,
                    line=lineno,
                    field="paragraph",
                )
            if doc_id not in n_paragraphs:
                n_paragraphs[doc_id] = len(paragraph_spans_of(docs[doc_id]))
            if not 0 <= paragraph < n_paragraphs[doc_id]:
                raise RagSpineError(
                    f"{paragraph} is out of range: document {doc_id!r} has {n_paragraphs[doc_id]} paragraphs",
                    path=path,
                    line=lineno,
                    field="paragraph",
                )
        questions.append(
            QAQuestion(id=qid, question=question, answers=list(answers), doc_id=doc_id, paragraph=paragraph)
        )
    return questions


def load_qa(path: str | os.PathLike[str]) -> QADataset:
    """Read a QA-layout folder: ``docs/`` (via ``CorpusLoader``), ``questions.jsonl``, and ``beir/`` if
    present.

    Raises:
        RagSpineError: a missing ``docs/`` or ``questions.jsonl``; a malformed document (``LoaderError``) or
            line (file, line and field named); a question whose ``doc_id`` is not among the documents or whose
            ``paragraph`` is out of range.
    """
    root = Path(path)
    if not root.is_dir():
        raise RagSpineError("not a directory", path=root)
    if not (root / "docs").is_dir():
        raise RagSpineError("a QA dataset needs a docs/ folder", path=root / "docs")
    docs = CorpusLoader(root / "docs").load()
    by_id: dict[str, Document] = {}
    for d in docs:
        by_id.setdefault(_doc_id(d), d)
    questions = _read_questions(root / "questions.jsonl", by_id)
    beir = load_beir(root / "beir") if (root / "beir").is_dir() else None
    return QADataset(name=root.name, docs=docs, questions=questions, beir=beir)


def load_dataset(path: str | os.PathLike[str]) -> QADataset | BEIRDataset:
    """Read a dataset folder, detecting its layout: QA when ``questions.jsonl`` exists, else BEIR.

    Raises:
        RagSpineError: the folder is missing, holds neither layout, or has malformed data.
    """
    root = Path(path)
    if not root.is_dir():
        raise RagSpineError("not a directory", path=root)
    if (root / "questions.jsonl").exists():
        return load_qa(root)
    if (root / "corpus.jsonl").exists():
        return load_beir(root)
    raise RagSpineError(
        "not a dataset: expected questions.jsonl + docs/ (QA layout) "
        "or corpus.jsonl + queries.jsonl + qrels.tsv (BEIR layout)",
        path=root,
    )
