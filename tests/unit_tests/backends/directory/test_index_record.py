"""A damaged ``index.json`` (issue 25 §5): not UTF-8, not JSON, not an object, a field of the wrong type, missing or
unknown.  It was read with ``.get`` wherever it was used, so a search raised ``UnicodeDecodeError`` or
``AttributeError: 'str' object has no attribute 'get'`` (``"vector": "x"``), and ``ingest --embedding hashing``
could not repair it.  Now one schema check (``backends/directory/index_state.py``) reads it: a search treats an invalid record
as absent with a ``StaleIndexWarning`` naming the file and the field (and answers from the saved BM25 index only
when its own checksums show it matches the store), a mode that cannot answer without it (``hybrid``, ``vector``)
raises a ``StoreError`` naming it, and every ingest mode rewrites it."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import pytest

from langchain_ragspine.backends.directory.layout import INDEX_STATE, VECTOR_DIR
from langchain_ragspine.cli import main
from langchain_ragspine.embeddings.factory import make_embeddings
from langchain_ragspine.errors import StaleIndexWarning, StoreError
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.sources import open_retriever, search

TEXTS = {
    "tsuyu": "# 梅雨\n\n梅雨は六月から七月にかけて続く雨の季節である。",
    "kyoto": "# 京都\n\n京都の観光名所は清水寺と金閣寺である。",
    "store": "# Store\n\nThe chunk store keeps every version of every document.",
    "filters": "# Filters\n\nMetadata filters narrow a search before scoring.",
}
QUERIES = ("梅雨", "清水寺", "chunk store", "metadata filters")

#: damaged index.json contents -> the field the message names (None: the file as a whole)
DAMAGES: dict[str, tuple[bytes, str | None]] = {
    "invalid_utf8": (b"\xff\xfe garbage", None),
    "invalid_json": (b'{"generation": 3, "tokenizer": "auto",', None),
    "top_level_list": (b"[1, 2]", None),
    "null": (b"null", None),
    "vector_string": (b'{"generation": %(g)d, "tokenizer": "auto", "vector": "x"}', "vector"),
    "vector_wrong_types": (
        b'{"generation": %(g)d, "tokenizer": "auto", "vector": {"generation": "a", "model_key": 3}}',
        "vector.generation",
    ),
    "vector_missing_model_key": (b'{"generation": %(g)d, "tokenizer": "auto", "vector": {"generation": %(g)d}}',
                                 "vector.model_key"),
    "generation_string": (b'{"generation": "%(g)d", "tokenizer": "auto"}', "generation"),
    "generation_missing": (b'{"tokenizer": "auto"}', "generation"),
    "tokenizer_number": (b'{"generation": %(g)d, "tokenizer": 5}', "tokenizer"),
    "tokenizer_unknown": (b'{"generation": %(g)d, "tokenizer": "mecab-ko"}', "tokenizer"),
    "tokenizer_missing": (b'{"generation": %(g)d}', "tokenizer"),
    "contextual_fields_number": (b'{"generation": %(g)d, "tokenizer": "auto", "contextual": {"fields": 3, '
                                 b'"separator": " "}}', "contextual.fields"),
    "contextual_string": (b'{"generation": %(g)d, "tokenizer": "auto", "contextual": "x"}', "contextual"),
    "unknown_field": (b'{"generation": %(g)d, "tokenizer": "auto", "vectors": {}}', "vectors"),
}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A corpus and its hybrid store (hashing embeddings), ingested once (tests copy it)."""
    root = tmp_path_factory.mktemp("pristine")
    (root / "corpus").mkdir()
    for name, text in TEXTS.items():
        (root / "corpus" / f"{name}.md").write_text(text + "\n", "utf-8")
    ingest(root / "corpus", root / "store", mode="hybrid", embedding="hashing", progress=False)
    return root


def _answers(retriever: Any) -> dict[str, list[str]]:
    return {q: [d.metadata["chunk_id"] for d in search(retriever, q, k=2)] for q in QUERIES}


@pytest.fixture(scope="module")
def expected(pristine: Path) -> dict[str, dict[str, list[str]]]:
    """The undamaged store's answers, by mode (no warning)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", StaleIndexWarning)
        got = {mode: _answers(open_retriever(pristine / "store", mode=mode)) for mode in ("bm25", "hybrid")}
    assert all(got["bm25"][q] for q in QUERIES)
    return got


def _damaged(pristine: Path, tmp_path: Path, damage: str) -> Path:
    shutil.copytree(pristine / "corpus", tmp_path / "corpus")
    shutil.copytree(pristine / "store", tmp_path / "store")
    generation = json.loads((tmp_path / "store" / INDEX_STATE).read_text("utf-8"))["generation"]
    content, _ = DAMAGES[damage]
    (tmp_path / "store" / INDEX_STATE).write_bytes(content % {b"g": generation} if b"%(g)" in content else content)
    return tmp_path / "store"


def _stale(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, StaleIndexWarning)]


def _names_the_damage(message: str, store: Path, field: str | None) -> None:
    assert str(store / INDEX_STATE) in message, message
    if field is not None:
        assert f"field {field!r}" in message, message


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_search_treats_a_damaged_index_record_as_absent_and_says_so(pristine, expected, tmp_path, damage):
    store, field = _damaged(pristine, tmp_path, damage), DAMAGES[damage][1]
    for mode in ("bm25", "auto"):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            retriever = open_retriever(store, mode=mode)
        messages = _stale(caught)
        assert messages, mode
        _names_the_damage(messages[0], store, field)
        # the saved BM25 index proves by its own checksums that it matches the store: the same answers
        assert _answers(retriever) == expected["bm25"], mode
    # a mode that needs the vector index cannot tell its model from a damaged record: a StoreError naming it
    for mode in ("hybrid", "vector"):
        with pytest.raises(StoreError) as caught_error, warnings.catch_warnings():
            warnings.simplefilter("ignore", StaleIndexWarning)
            open_retriever(store, mode=mode)
        _names_the_damage(str(caught_error.value), store, field)
        assert "needs the vector index" in str(caught_error.value)
    # given the model, the vector channel is rebuilt from the cached vectors
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", StaleIndexWarning)
        retriever = open_retriever(store, mode="hybrid", embedding=make_embeddings("hashing"))
    assert _answers(retriever) == expected["hybrid"]


@pytest.mark.parametrize("damage", ["invalid_utf8", "vector_string", "top_level_list", "tokenizer_number"])
def test_the_cli_search_warns_or_gives_one_error_line(pristine, tmp_path, capsys, damage):
    store = _damaged(pristine, tmp_path, damage)
    capsys.readouterr()
    with pytest.warns(StaleIndexWarning, match=str(store / INDEX_STATE)):
        assert main(["search", "梅雨", "--store", str(store), "--mode", "bm25"]) == 0
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err and "1. " in captured.out
    with pytest.warns(StaleIndexWarning, match=str(store / INDEX_STATE)):
        assert main(["search", "梅雨", "--store", str(store), "--mode", "hybrid"]) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("ragspine: error:")]
    assert len(lines) == 1 and "Traceback" not in err and str(store / INDEX_STATE) in lines[0], err


@pytest.mark.parametrize("damage", sorted(DAMAGES))
@pytest.mark.parametrize("mode", ["bm25", "hybrid"])
def test_every_ingest_mode_rewrites_a_damaged_index_record(pristine, expected, tmp_path, damage, mode):
    store = _damaged(pristine, tmp_path, damage)
    summary = ingest(tmp_path / "corpus", store, mode=mode, embedding="hashing", progress=False)
    assert summary.unchanged == len(TEXTS) and summary.index_rebuilt
    assert any(str(store / INDEX_STATE) in note for note in summary.notes), summary.notes
    state = json.loads((store / INDEX_STATE).read_text("utf-8"))
    pristine_state = json.loads((pristine / "store" / INDEX_STATE).read_text("utf-8"))
    if mode == "hybrid":
        assert state == pristine_state
    else:
        assert state == {k: v for k, v in pristine_state.items() if k != "vector"}
        assert not (store / VECTOR_DIR).exists()  # no record names it any more
    with warnings.catch_warnings():
        warnings.simplefilter("error", StaleIndexWarning)
        assert _answers(open_retriever(store, mode="bm25")) == expected["bm25"]
        if mode == "hybrid":
            assert _answers(open_retriever(store, mode="hybrid")) == expected["hybrid"]


def test_the_cli_ingest_repairs_an_index_record_that_is_not_utf8(pristine, tmp_path, capsys):
    """The reported input: ``ingest --mode bm25`` failed with ``'utf-8' codec can't decode byte 0xff``."""
    store = _damaged(pristine, tmp_path, "invalid_utf8")
    assert main(["ingest", str(tmp_path / "corpus"), "--store", str(store), "--mode", "bm25"]) == 0
    assert "Traceback" not in capsys.readouterr().err
    assert json.loads((store / INDEX_STATE).read_text("utf-8"))["tokenizer"] == "auto"


def test_every_record_ingest_writes_passes_the_check(pristine, tmp_path):
    """No false alarm: what ingest writes (BM25 only, hybrid, contextual headers, and a store written before
    tokenizers had versions) is read back without a warning."""
    shutil.copytree(pristine / "corpus", tmp_path / "corpus")
    ingest(tmp_path / "corpus", tmp_path / "ctx", mode="hybrid", embedding="hashing", contextual=True, progress=False)
    ingest(tmp_path / "corpus", tmp_path / "lex", mode="bm25", progress=False)
    old = json.loads((tmp_path / "lex" / INDEX_STATE).read_text("utf-8"))
    assert "contextual" in json.loads((tmp_path / "ctx" / INDEX_STATE).read_text("utf-8"))
    with warnings.catch_warnings():
        warnings.simplefilter("error", StaleIndexWarning)
        for store, mode in ((tmp_path / "ctx", "hybrid"), (pristine / "store", "hybrid"), (tmp_path / "lex", "bm25")):
            assert search(open_retriever(store, mode=mode), "梅雨", k=1)
    del old["tokenizer_version"]  # as written before tokenizers had versions: valid, the BM25 load checks it
    (tmp_path / "lex" / INDEX_STATE).write_text(json.dumps(old), "utf-8")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        open_retriever(tmp_path / "lex", mode="bm25")
    assert not any(INDEX_STATE in m and "field" in m for m in _stale(caught))
