"""Clear errors where there were tracebacks (issue 25, section 6): permission errors on folders, documents and
sidecars (also with ``on_error="skip"``), a disk full while the BM25 index is saved, a corpus nested 1,200 folders
deep, filters nested 500 (``$and``) or 2,000 (``$not``) levels deep, very wide filters (up to ``MAX_FILTER_NODES``),
long ``in`` lists (alone or together) and very long BM25 queries.  The PostgreSQL side (the same limits, the
statement timeout) is ``test_postgres_limits.py``.

Tests run as root, where ``chmod`` denies nothing, so permission errors are injected at the OS call the loader
makes (``os.scandir``, ``Path.stat``, ``Path.read_bytes``); disk full is injected into the BM25 save.
"""

from __future__ import annotations

import errno
import json
import os
import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document

from langchain_ragspine.backends.directory import bm25_index
from langchain_ragspine.backends.directory.layout import BM25_DIR
from langchain_ragspine.backends.directory.lock import LOCK_FILE
from langchain_ragspine.cli import main
from langchain_ragspine.document_loaders import CorpusLoader
from langchain_ragspine.document_loaders.corpus import LoaderWarning
from langchain_ragspine.errors import LoaderError, StaleIndexWarning, StoreError
from langchain_ragspine.filters import (
    MAX_FILTER_DEPTH,
    MAX_FILTER_NODES,
    MAX_FILTER_VALUES,
    and_filters,
    compile_filter,
    filter_key,
    matches,
)
from langchain_ragspine.filters.sql import filter_sql
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.sources import open_retriever, search
from langchain_ragspine.retrievers import BM25Retriever, DenseRetriever, HybridRetriever
from langchain_ragspine.retrievers.bm25 import MAX_QUERY_CHARS


def _write(path: Path, text: str, **sidecar: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")
    if sidecar:
        path.with_suffix(".json").write_text(json.dumps(sidecar), "utf-8")
    return path


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    _write(root / "a.md", "# A\n\nThe rainy season is called tsuyu.")
    _write(root / "locked" / "b.md", "# B\n\nKyoto has many temples.")
    _write(root / "c.md", "# C\n\nThe chunk store keeps every version.", sensitivity="RESTRICTED")
    return root


def _denied(path: Path) -> PermissionError:
    return PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))


def _deny_listing(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    real = os.scandir

    def scandir(path: Any = ".") -> Any:
        if Path(path) == folder:
            raise _denied(folder)
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)


def _deny(monkeypatch: pytest.MonkeyPatch, method: str, target: Path) -> None:
    """``Path.<method>`` raises EACCES for ``target`` (``stat``: its type cannot be read; ``read_bytes``: it cannot
    be read)."""
    real = getattr(Path, method)

    def denied(self: Path, *args: Any, **kwargs: Any) -> Any:
        if self == target:
            raise _denied(target)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, method, denied)


def _one_line_error(capsys: pytest.CaptureFixture[str], *needles: str) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("ragspine: error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


# -- permission errors -----------------------------------------------------------------------------------------------
def test_a_folder_that_cannot_be_listed_is_a_loader_error_naming_it(corpus, monkeypatch):
    _deny_listing(monkeypatch, corpus / "locked")
    with pytest.raises(LoaderError) as caught:
        CorpusLoader(corpus).load()
    assert caught.value.path == str(corpus / "locked") and "Permission denied" in str(caught.value)


def test_the_corpus_folder_itself_cannot_be_listed(corpus, monkeypatch, tmp_path, capsys):
    _deny_listing(monkeypatch, corpus)
    with pytest.raises(LoaderError, match="cannot list this folder"):
        CorpusLoader(corpus).load()
    assert main(["ingest", str(corpus), "--store", str(tmp_path / "s")]) == 2
    _one_line_error(capsys, str(corpus), "Permission denied")
    assert not (tmp_path / "s" / "chunks.sqlite").exists()  # nothing was written


def test_a_skipped_folder_is_reported_and_never_retracts_its_documents(corpus, monkeypatch, tmp_path, capsys):
    store = tmp_path / "s"
    ingest(corpus, store)
    _deny_listing(monkeypatch, corpus / "locked")
    loader = CorpusLoader(corpus, on_error="skip")
    with pytest.warns(LoaderWarning, match="locked.*Permission denied"):
        docs = loader.load()
    assert sorted(d.metadata["doc_id"] for d in docs) == ["a", "c"]
    assert loader.stats.skipped == [(str(corpus / "locked"), None, "cannot list this folder (none of its files "
                                                                   "were loaded): Permission denied")]
    with pytest.warns(LoaderWarning):
        summary = ingest(corpus, store, on_error="skip")
    assert (summary.skipped, summary.retracted) == (1, 0)  # b.md is not gone, only unreadable now
    assert "locked/b" in [d.metadata["doc_id"] for d in search(open_retriever(store), "Kyoto temples", k=3)]
    capsys.readouterr()
    with pytest.warns(LoaderWarning, match="Permission denied"):  # the CLI prints it as one "warning:" line
        assert main(["ingest", str(corpus), "--store", str(store), "--on-error", "skip"]) == 0
    captured = capsys.readouterr()
    assert "1 skipped" in captured.out and "retraction skipped" in captured.err and "Traceback" not in captured.err


def test_a_document_that_cannot_be_read(corpus, monkeypatch, tmp_path, capsys):
    doc = corpus / "a.md"
    _deny(monkeypatch, "read_bytes", doc)
    with pytest.raises(LoaderError) as caught:
        CorpusLoader(corpus).load()
    assert caught.value.path == str(doc) and caught.value.reason == "cannot read this file: Permission denied"
    assert main(["ingest", str(corpus), "--store", str(tmp_path / "s")]) == 2
    _one_line_error(capsys, str(doc), "Permission denied")
    loader = CorpusLoader(corpus, on_error="skip")
    with pytest.warns(LoaderWarning, match="a.md"):
        assert sorted(d.metadata["doc_id"] for d in loader.load()) == ["c", "locked/b"]
    assert [p for p, _, _ in loader.stats.skipped] == [str(doc)] and loader.stats.files == 3


def test_a_document_whose_type_cannot_be_read(corpus, monkeypatch):
    """The walk stats each candidate (a symlink into a folder the user may not enter fails there)."""
    doc = corpus / "locked" / "b.md"
    _deny(monkeypatch, "stat", doc)
    with pytest.raises(LoaderError) as caught:
        CorpusLoader(corpus).load()
    assert caught.value.path == str(doc) and "Permission denied" in caught.value.reason
    loader = CorpusLoader(corpus, on_error="skip")
    with pytest.warns(LoaderWarning):
        assert sorted(d.metadata["doc_id"] for d in loader.load()) == ["a", "c"]


def test_a_path_given_whose_type_cannot_be_read(corpus, monkeypatch):
    doc = corpus / "a.md"
    _deny(monkeypatch, "stat", doc)
    with pytest.raises(LoaderError, match="cannot read this path: Permission denied"):
        CorpusLoader([doc, corpus / "c.md"])
    loader = CorpusLoader([doc, corpus / "c.md"], on_error="skip")  # checked again, and skipped, when loading
    with pytest.warns(LoaderWarning, match="a.md"):
        assert [d.metadata["doc_id"] for d in loader.load()] == ["c"]


def test_a_sidecar_that_cannot_be_read_fails_closed(corpus, monkeypatch, tmp_path, capsys):
    """A sidecar may hold the label: one that exists but cannot be read is an error naming it (one line from the
    CLI), and with "skip" its document is skipped, never loaded without its label (more cases, a sidecar whose type
    cannot be read among them: test_labels_unreadable.py)."""
    side = corpus / "c.json"
    _deny(monkeypatch, "read_bytes", side)
    with pytest.raises(LoaderError) as caught:
        CorpusLoader(corpus).load()
    assert caught.value.path == str(side) and "Permission denied" in caught.value.reason
    assert main(["ingest", str(corpus), "--store", str(tmp_path / "s")]) == 2
    _one_line_error(capsys, str(side))
    loader = CorpusLoader(corpus, on_error="skip")
    with pytest.warns(LoaderWarning, match="c.json"):
        assert sorted(d.metadata["doc_id"] for d in loader.load()) == ["a", "locked/b"]
    assert [p for p, _, _ in loader.stats.skipped] == [str(side)]


def test_the_cli_prints_a_file_system_error_in_one_line(tmp_path, monkeypatch, capsys):
    """An OSError outside the loader (here: the store directory cannot be created) is one line too."""
    _write(tmp_path / "c" / "a.md", "# A\n\ntext")
    real = Path.mkdir

    def mkdir(self: Path, *args: Any, **kwargs: Any) -> None:
        if self == tmp_path / "s":
            raise _denied(self)
        real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    assert main(["ingest", str(tmp_path / "c"), "--store", str(tmp_path / "s")]) == 2
    _one_line_error(capsys, "Permission denied", str(tmp_path / "s"))


# -- a corpus nested 1,200 folders deep -------------------------------------------------------------------------------
DEEP = 1200


@pytest.fixture
def deep_corpus(tmp_path: Path) -> Iterator[Path]:
    """``deep/a/a/…/a/leaf.md``, 1,200 folders below ``deep`` (about 2,400 characters of path: below PATH_MAX, 4096,
    but far beyond Python's recursion limit); removed bottom-up afterwards (``shutil.rmtree`` recurses)."""
    root = tmp_path / "deep"
    folders = [root]
    for _ in range(DEEP):
        folders.append(folders[-1] / "a")
    for folder in folders:
        os.mkdir(folder)
    _write(folders[-1] / "leaf.md", "# Leaf\n\nThe deepest document of the corpus.")
    _write(root / "top.md", "# Top\n\nA document at the top.")
    yield root
    for folder in reversed(folders):
        for entry in os.listdir(folder):
            if not (folder / entry).is_dir():
                os.unlink(folder / entry)
        os.rmdir(folder)


def test_a_corpus_nested_1200_folders_deep_loads_and_searches(deep_corpus, tmp_path, capsys):
    docs = CorpusLoader(deep_corpus).load()
    assert [d.metadata["doc_id"] for d in docs] == ["a/" * DEEP + "leaf", "top"]
    assert main(["ingest", str(deep_corpus), "--store", str(tmp_path / "s"), "--mode", "bm25"]) == 0
    hits = search(open_retriever(tmp_path / "s"), "deepest document", k=1)
    assert hits[0].metadata["source"] == "a/" * DEEP + "leaf.md"


# -- disk full while the BM25 index is saved ---------------------------------------------------------------------------
def _disk_full(monkeypatch: pytest.MonkeyPatch, *, after_writing: bool = True) -> Any:
    """The BM25 save writes (part of) docs.jsonl, then the disk is full; returns the real function, to restore."""
    real = bm25_index.write_documents

    def write_documents(path: Path, docs: Any) -> None:
        if after_writing:
            real(path, docs)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(bm25_index, "write_documents", write_documents)
    return real


def _leftovers(store: Path) -> list[str]:
    """Hidden files a save left behind (temporary directories / files); the writer lock is the store's own."""
    return sorted(p.name for p in store.iterdir() if p.name.startswith(".") and p.name != LOCK_FILE)


def test_disk_full_while_saving_bm25_says_what_was_committed(corpus, tmp_path, monkeypatch, capsys):
    store = tmp_path / "s"
    real = _disk_full(monkeypatch)
    with pytest.raises(StoreError) as caught:
        ingest(corpus, store, tokenizer="whitespace")
    message = str(caught.value)
    for part in ("committed this run (store generation", "3 documents, 3 chunks", "disk full",
                 "the next search rebuilds the BM25 index in memory", "StaleIndexWarning",
                 "run `ragspine ingest` again when there is space"):
        assert part in message, message
    assert not (store / BM25_DIR).exists() and _leftovers(store) == []  # no partial index left to trust
    # the next search rebuilds the index from the committed chunks, with the tokenizer this run asked for
    with pytest.warns(StaleIndexWarning, match="rebuilt in memory"):
        rebuilt = open_retriever(store)
    assert isinstance(rebuilt.current, BM25Retriever) and rebuilt.current.tokenizer == "whitespace"  # not the default, "auto"
    got = search(rebuilt, "Kyoto has temples", k=3)
    assert main(["ingest", str(corpus), "--store", str(tmp_path / "s2")]) == 2
    _one_line_error(capsys, "disk full", "the next search rebuilds")
    monkeypatch.setattr(bm25_index, "write_documents", real)
    ingest(corpus, tmp_path / "reference", tokenizer="whitespace")
    expected = search(open_retriever(tmp_path / "reference"), "Kyoto has temples", k=3)
    assert [d.metadata["chunk_id"] for d in got] == [d.metadata["chunk_id"] for d in expected] != []


def test_disk_full_on_re_ingest_leaves_the_old_index_untrusted(corpus, tmp_path, monkeypatch):
    store = tmp_path / "s"
    ingest(corpus, store)
    old = {p.relative_to(store): p.read_bytes() for p in (store / BM25_DIR).rglob("*") if p.is_file()}
    _write(corpus / "a.md", "# A\n\nThe plum rain arrives in June.")
    real = _disk_full(monkeypatch, after_writing=False)
    with pytest.raises(StoreError, match="disk full"):
        ingest(corpus, store)
    monkeypatch.setattr(bm25_index, "write_documents", real)
    # the previous save is untouched, and not trusted: search finds the committed new version
    assert {p.relative_to(store): p.read_bytes() for p in (store / BM25_DIR).rglob("*") if p.is_file()} == old
    assert _leftovers(store) == []
    with pytest.warns(StaleIndexWarning):
        hits = search(open_retriever(store), "plum rain June", k=1)
    assert "plum rain" in hits[0].page_content
    summary = ingest(corpus, store)  # with space again, ingest saves the index
    assert summary.index_rebuilt
    with warnings.catch_warnings():
        warnings.simplefilter("error", StaleIndexWarning)
        assert "plum rain" in search(open_retriever(store), "plum rain June", k=1)[0].page_content


# -- filters nested too deep, very wide, long lists ------------------------------------------------------------------
def _nested_and(depth: int) -> dict[str, Any]:
    flt: dict[str, Any] = {"lang": "en"}
    for _ in range(depth):
        flt = {"$and": [flt]}
    return flt


def _nested_not(depth: int) -> dict[str, Any]:
    flt: dict[str, Any] = {"lang": "en"}
    for _ in range(depth):
        flt = {"$not": flt}
    return flt


def _field_not(depth: int) -> dict[str, Any]:
    cond: Any = {"eq": "en"}
    for _ in range(depth):
        cond = {"not": cond}
    return {"lang": cond}


def _deep_operand(depth: int) -> dict[str, Any]:
    value: Any = "en"
    for _ in range(depth):
        value = [value]
    return {"lang": {"in": value}}


DOCS = [Document(page_content=f"tsuyu rainy season {i}", metadata={"chunk_id": f"d{i}#0", "lang": lang, "n": i})
        for i, lang in enumerate(["en", "ja", "en"])]
#: each would exhaust the recursion limit somewhere (compiling, json.dumps, repr in a message)
DEEP_FILTERS = {"$and 500": _nested_and(500), "$not 2000": _nested_not(2000), "field not 2000": _field_not(2000),
                "operand 3000": _deep_operand(3000)}


@pytest.mark.parametrize("name", sorted(DEEP_FILTERS))
def test_a_filter_nested_too_deep_is_a_value_error_naming_the_limit(name):
    flt = DEEP_FILTERS[name]
    limit = re.escape(f"more than {MAX_FILTER_DEPTH} levels deep (filters.MAX_FILTER_DEPTH")
    for call in (compile_filter, filter_key, lambda f: and_filters({"n": 1}, f), lambda f: matches({}, f),
                 lambda f: filter_sql(f, row="s.chunk_row")):
        with pytest.raises(ValueError, match=limit):
            call(flt)
    bm25 = BM25Retriever.from_documents(DOCS)
    dense = DenseRetriever.from_documents(DOCS, embedding=_embedding())
    for retriever in (bm25, dense, HybridRetriever(retrievers=[bm25, dense])):
        with pytest.raises(ValueError, match=limit):
            retriever.invoke("rainy season", filter=flt)
    with pytest.raises(ValueError, match=limit):
        BM25Retriever.from_documents(DOCS, filter=flt)


def _embedding() -> Any:
    from langchain_ragspine.embeddings import HashingEmbeddings

    return HashingEmbeddings(16)


def test_the_depth_limit_is_exact_and_the_semantics_hold_up_to_it():
    """``{"$not": …}`` n times around a field condition nests n + 1 dicts: 63 are allowed, 64 are one too many."""
    allowed, refused = _nested_not(MAX_FILTER_DEPTH - 1), _nested_not(MAX_FILTER_DEPTH)
    retriever = BM25Retriever.from_documents(DOCS)
    # 63 negations of lang == en: lang != en (a missing field never matches)
    assert [d.metadata["lang"] for d in retriever.invoke("rainy season", filter=allowed)] == ["ja"]
    with pytest.raises(ValueError, match=str(MAX_FILTER_DEPTH)):
        retriever.invoke("rainy season", filter=refused)
    assert filter_sql(allowed, row="s.chunk_row") is not None
    with pytest.raises(ValueError, match=str(MAX_FILTER_DEPTH)):
        filter_sql(refused, row="s.chunk_row")


def test_a_cyclic_filter_is_refused_too():
    flt: dict[str, Any] = {}
    flt["$not"] = flt
    with pytest.raises(ValueError, match="levels deep"):
        compile_filter(flt)


def _nodes(flt: Any) -> int:
    """Every key of every dict in ``flt`` (what MAX_FILTER_NODES counts)."""
    if isinstance(flt, dict):
        return len(flt) + sum(_nodes(v) for v in flt.values())
    if isinstance(flt, (list, tuple, set)):
        return sum(_nodes(v) for v in flt)
    return 0


def test_a_wide_filter_works_on_both_backends_up_to_the_node_limit():
    m = (MAX_FILTER_NODES - 1) // 2  # {"$and": [...]} of m parts {"n": {"ne": i}}: 1 + 2m nodes
    wide = {"$and": [{"n": {"ne": i}} for i in range(3, 3 + m)]}
    assert _nodes(wide) == MAX_FILTER_NODES - 1
    assert [d.metadata["n"] for d in BM25Retriever.from_documents(DOCS, k=5).invoke("rainy season", filter=wide)] \
        == [0, 1, 2]
    sql = filter_sql(wide, row="s.chunk_row")  # the ne tests of one field are one nin test (issue 25)
    assert sql is not None and sql.sql.count("EXISTS") == 2 and len(sql.params) == 4
    fields = {"$and": [{f"n{i}": {"ne": i}} for i in range(3, 3 + m)]}  # ne tests of m fields: 2 tests each
    sql = filter_sql(fields, row="s.chunk_row")
    assert sql is not None and sql.sql.count("EXISTS") == 2 * m and len(sql.params) == 4 * m
    widest = {"$or": [{"n": i} for i in range(MAX_FILTER_NODES - 1)]}  # exactly the limit
    assert _nodes(widest) == MAX_FILTER_NODES and compile_filter(widest) is not None
    assert filter_sql(widest, row="s.chunk_row") is not None


#: the wide filters of the trial (issue 25, 6e; each got around the 10,000-value ``in`` limit, took 3-20 s per call
#: on the file store and overflowed PostgreSQL's 65,535 parameters), and one node over the limit
WIDE_FILTERS = {
    "$or of 30k eq": {"$or": [{"n": i} for i in range(30_000)]},
    "$and of 30k ne": {"$and": [{"n": {"ne": i}} for i in range(30_000)]},
    "50k fields": {f"f{i}": i for i in range(50_000)},
    "one node over": {"$or": [{"n": i} for i in range(MAX_FILTER_NODES)]},
    "nested one node over": {"$and": [{"$or": [{"n": i} for i in range(MAX_FILTER_NODES // 2)]},
                                      {"$not": {"$or": [{"lang": str(i)} for i in range(MAX_FILTER_NODES // 2)]}}]},
}


@pytest.mark.parametrize("name", sorted(WIDE_FILTERS))
def test_a_filter_over_the_node_limit_is_refused_at_every_entry_point(name, tmp_path):
    from langchain_ragspine.graphs import build_corrective_rag
    from langchain_ragspine.vectorstores import RagSpineVectorStore

    flt = WIDE_FILTERS[name]
    assert _nodes(flt) > MAX_FILTER_NODES
    limit = re.escape(f"more than {MAX_FILTER_NODES} nodes (filters.MAX_FILTER_NODES")
    bm25 = BM25Retriever.from_documents(DOCS)
    dense = DenseRetriever.from_documents(DOCS, embedding=_embedding())
    vectors = RagSpineVectorStore(tmp_path / "vs", _embedding())
    vectors.add_documents(DOCS)
    calls = [compile_filter, filter_key, lambda f: and_filters({"n": 1}, f), lambda f: matches({"n": 1}, f),
             lambda f: filter_sql(f, row="s.chunk_row"), lambda f: BM25Retriever.from_documents(DOCS, filter=f),
             lambda f: vectors.similarity_search("rainy season", k=2, filter=f),
             lambda f: vectors.as_retriever().invoke("rainy season", filter=f),
             lambda f: build_corrective_rag(bm25).invoke({"question": "rainy season", "filters": f})]
    calls += [lambda f, r=r: r.invoke("rainy season", filter=f)
              for r in (bm25, dense, HybridRetriever(retrievers=[bm25, dense]))]
    for call in calls:
        with pytest.raises(ValueError, match=limit):
            call(flt)
    vectors.close()


def test_the_values_of_all_in_lists_together_are_limited_as_one_list():
    """Regression (6e): six ``in`` lists of 9,999 values each passed the per-list limit."""
    six = {"$or": [{"n": {"in": list(range(j * 10_000, j * 10_000 + 9_999))}} for j in range(6)]}
    together = re.escape(f"more than {MAX_FILTER_VALUES} values in its in/nin/between lists together")
    for call in (compile_filter, lambda f: matches({"n": 1}, f), lambda f: filter_sql(f, row="s.chunk_row"),
                 lambda f: BM25Retriever.from_documents(DOCS).invoke("rainy season", filter=f)):
        with pytest.raises(ValueError, match=together):
            call(six)
    half = MAX_FILTER_VALUES // 2
    two = {"$or": [{"n": {"in": [0, *range(100, 100 + half - 1)]}}, {"lang": list(map(str, range(half - 1))) + ["ja"]}]}
    assert [d.metadata["n"] for d in BM25Retriever.from_documents(DOCS).invoke("rainy season", filter=two)] == [0, 1]
    with pytest.raises(ValueError, match=together):
        compile_filter({"$and": [two, {"n": {"between": [0, 9]}}]})  # two values more
    ranges = {"$or": [{"n": {"in": range(half)}}, {"n": {"nin": range(half + 1)}}]}  # any collection counts
    with pytest.raises(ValueError, match=together):
        compile_filter(ranges)
    # an iterator has no length to check, and the first of a search's compilations would use it up
    with pytest.raises(ValueError, match=r"operator 'in' needs a list of values, got <generator"):
        compile_filter({"n": {"in": (i for i in range(3))}})


def test_matches_applies_the_limits_and_refuses_swapped_arguments():
    """Regression (6f): ``matches(filter, metadata)`` — the arguments swapped — took any filter, however deep or
    wide, as metadata and answered ``False``; the filter goes second, and there the limits apply as everywhere."""
    deep, wide = _nested_and(500), WIDE_FILTERS["$or of 30k eq"]
    for flt, limit in ((deep, "levels deep"), (wide, "MAX_FILTER_NODES")):
        with pytest.raises(ValueError, match=limit):
            matches({"n": 1}, flt)
        with pytest.raises(ValueError, match=limit):
            matches({"n": 1}, filter=flt)
        with pytest.raises(TypeError, match=r"matches\(metadata, filter\).*'\$(and|or)'.*metadata first"):
            matches(flt, {"n": 1})
    assert matches({"n": 1, "lang": "en"}, {"$or": [{"n": 2}, {"lang": "en"}]})
    assert not matches({"n": 1}, {"$not": {"n": 1}})


def test_an_in_list_compiles_to_sql_without_comparing_every_pair():
    """Regression: the SQL compiler deduplicated an ``in`` list with a list scan, ~n²/2 comparisons (a 50,000-value
    list took a minute, holding a pooled connection); now each value is hashed once."""
    compared = 0

    class Counted(str):
        __hash__ = str.__hash__

        def __eq__(self, other: object) -> bool:
            nonlocal compared
            compared += 1
            return str.__eq__(self, other)

    values = [Counted(f"v{i}") for i in range(2000)]
    sql = filter_sql({"tag": {"in": [*values, values[0]]}}, row="s.chunk_row")
    assert sql is not None and list(sql.params[1]) == values  # distinct, in first-seen order
    assert compared < 100  # a list scan makes about 2,000,000


@pytest.mark.parametrize("op", ["in", "nin", "$in"])
def test_an_in_list_longer_than_the_limit_is_refused(op):
    retriever = BM25Retriever.from_documents(DOCS)
    at_limit = {"n": {op: list(range(MAX_FILTER_VALUES))}}
    assert len(retriever.invoke("rainy season", filter=at_limit)) == (3 if op != "nin" else 0)
    too_long = {"n": {op: list(range(MAX_FILTER_VALUES + 1))}}
    message = f"lists {MAX_FILTER_VALUES + 1} values; the limit is {MAX_FILTER_VALUES}"
    for call in (compile_filter, lambda f: filter_sql(f, row="s.chunk_row"),
                 lambda f: retriever.invoke("rainy season", filter=f)):
        with pytest.raises(ValueError, match=message):
            call(too_long)
    with pytest.raises(ValueError, match=message):
        compile_filter({"n": list(range(MAX_FILTER_VALUES + 1))})  # a bare list means "in"


def test_a_graph_gives_the_message_for_a_deep_filter():
    from langchain_ragspine.graphs import build_corrective_rag

    graph = build_corrective_rag(BM25Retriever.from_documents(DOCS))
    with pytest.raises(ValueError, match="levels deep"):
        graph.invoke({"question": "rainy season", "filters": _nested_not(2000)})


# -- very long BM25 queries -----------------------------------------------------------------------------------------------
def test_a_bm25_query_longer_than_the_limit_is_refused(tmp_path, capsys):
    bm25 = BM25Retriever.from_documents(DOCS)
    assert bm25.invoke("rainy " + "x" * (MAX_QUERY_CHARS - 6))  # at the limit: searched
    long = "rainy season " * 40_000  # ~500k characters: 18 s of scoring before the limit
    message = f"the query is {len(long):,} characters long; a BM25 query may be at most {MAX_QUERY_CHARS:,}"
    hybrid = HybridRetriever(retrievers=[bm25, DenseRetriever.from_documents(DOCS, embedding=_embedding())])
    for call in (bm25.invoke, hybrid.invoke, bm25.score, lambda q: bm25.search(q, k=1)):
        with pytest.raises(ValueError, match=message):
            call(long)
    _write(tmp_path / "c" / "a.md", "# A\n\nrainy season")
    ingest(tmp_path / "c", tmp_path / "s", mode="bm25")
    capsys.readouterr()
    assert main(["search", long, "--store", str(tmp_path / "s")]) == 2
    _one_line_error(capsys, f"at most {MAX_QUERY_CHARS:,}")
