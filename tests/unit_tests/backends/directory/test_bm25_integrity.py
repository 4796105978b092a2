"""A saved BM25 index is verified on load (issue 25 §5): checksums tied to the chunk store's generation, the arrays'
structure, and the documents against the index's columns.  A damaged, edited or unverifiable index is never
answered from: in a store it is rebuilt in memory from the chunk store with a ``StaleIndexWarning`` naming the file
and the reason, and ``ingest`` rewrites it even when nothing in the corpus changed; a standalone
``BM25Retriever.load`` raises a ``StoreError`` naming the file."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document

from langchain_ragspine.backends.directory.bm25_index import SPOT_CHECK_DOCS
from langchain_ragspine.backends.directory.chunk_store import ChunkStore
from langchain_ragspine.backends.directory.files import MANIFEST_FILE, read_manifest, write_manifest
from langchain_ragspine.backends.directory.layout import BM25_DIR, CHUNKS_DB, INDEX_STATE
from langchain_ragspine.cli import main
from langchain_ragspine.errors import StaleIndexWarning, StoreError
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.sources import open_retriever, search
from langchain_ragspine.retrievers import BM25Retriever, HybridRetriever

TEXTS = {
    "tsuyu": "# 梅雨\n\n梅雨は六月から七月にかけて続く雨の季節である。",
    "beijing": "# 北京\n\n北京是中国的首都，故宫在北京。",
    "kyoto": "# 京都\n\n京都の観光名所は清水寺と金閣寺である。",
    "store": "# Store\n\nThe chunk store keeps every version of every document.",
    "typhoon": "# 台風\n\n台風は夏から秋にかけて日本に来る。",
}
#: query -> a string every correct result of it contains
QUERIES = {"梅雨": "梅雨", "北京的首都": "北京", "清水寺": "清水寺", "chunk store": "chunk", "台風": "台風"}
INDICES = "bm25s/indices.csc.index.npy"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A corpus and its store, ingested once (tests copy it)."""
    root = tmp_path_factory.mktemp("pristine")
    for name, text in TEXTS.items():
        (root / "corpus").mkdir(exist_ok=True)
        (root / "corpus" / f"{name}.md").write_text(text + "\n", "utf-8")
    ingest(root / "corpus", root / "store", mode="bm25", progress=False)
    return root


@pytest.fixture()
def saved(pristine: Path, tmp_path: Path) -> Path:
    shutil.copytree(pristine / "corpus", tmp_path / "corpus")
    shutil.copytree(pristine / "store", tmp_path / "store")
    return tmp_path


def _answers(retriever: Any) -> dict[str, list[tuple[str, float]]]:
    return {q: [(d.metadata["chunk_id"], d.metadata["scores"]["bm25"]) for d in search(retriever, q, k=3)]
            for q in QUERIES}


@pytest.fixture(scope="module")
def expected(pristine: Path) -> dict[str, list[tuple[str, float]]]:
    """The answers of the undamaged index; each first hit holds its query's term (a meaningful fixture)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", StaleIndexWarning)
        retriever = open_retriever(pristine / "store", mode="bm25", k=3)
    got = _answers(retriever)
    texts = {d.metadata["chunk_id"]: d.page_content for d in retriever.current.docs}
    assert all(got[q] and term in texts[got[q][0][0]] for q, term in QUERIES.items())
    return got


def _open_warned(store: Path) -> tuple[Any, list[str]]:
    """``open_retriever(store)`` in bm25 mode, and the StaleIndexWarning messages it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        retriever = open_retriever(store, mode="bm25", k=3)
    return retriever, [str(w.message) for w in caught if issubclass(w.category, StaleIndexWarning)]


def _assert_clean(store: Path, expected: dict[str, list[tuple[str, float]]]) -> None:
    """The saved index loads as saved (no warning, no rebuild) and answers as before."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", StaleIndexWarning)
        retriever = open_retriever(store, mode="bm25", k=3)
    assert _answers(retriever) == expected
    read_manifest(store / BM25_DIR).check()  # type: ignore[union-attr]


def _halve_bytes(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _halve_array(path: Path) -> None:
    """A valid .npy holding the first half of the array (what slipped through: it loaded, then answered wrongly)."""
    array = np.load(path)
    with open(path, "wb") as f:  # np.save(path) would append ".npy" to a name that has it already: keep the name
        np.save(f, array[: array.size // 2])


def _swap_rows(path: Path, i: int = 0, j: int = 1) -> None:
    lines = path.read_text("utf-8").splitlines(keepends=True)
    lines[i], lines[j] = lines[j], lines[i]
    path.write_text("".join(lines), "utf-8")


def _cli_search(store: Path, capsys: pytest.CaptureFixture[str]) -> tuple[dict[str, list[str]], list[str]]:
    """``ragspine search --json`` of every query: the chunk ids and texts per query, and the StaleIndexWarnings."""
    got: dict[str, list[str]] = {}
    stale: list[str] = []
    texts: dict[str, str] = {}
    for q in QUERIES:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert main(["search", q, "--store", str(store), "--mode", "bm25", "--json", "-k", "3"]) == 0
        stale += [str(w.message) for w in caught if issubclass(w.category, StaleIndexWarning)]
        rows = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
        got[q] = [r["chunk_id"] for r in rows]
        texts.update({r["chunk_id"]: r["text"] for r in rows})
    for q, term in QUERIES.items():
        assert got[q] and all(term in texts[cid] for cid in got[q][:1]), (q, got[q])
    return got, stale


# -- the two reported faults ---------------------------------------------------------------------------------------
FAULTS = {
    "halved indices.csc.index.npy (bytes)": (lambda bm25: _halve_bytes(bm25 / INDICES), "indices.csc.index.npy"),
    "halved indices.csc.index.npy (array)": (lambda bm25: _halve_array(bm25 / INDICES), "indices.csc.index.npy"),
    "swapped rows of bm25/docs.jsonl": (lambda bm25: _swap_rows(bm25 / "docs.jsonl"), "docs.jsonl"),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_regression_a_reported_fault_is_rebuilt_with_a_warning_never_answered(saved, expected, fault) -> None:
    damage, name = FAULTS[fault]
    damage(saved / "store" / BM25_DIR)
    retriever, stale = _open_warned(saved / "store")
    assert len(stale) == 1 and name in stale[0] and "rebuilt in memory from the chunk store" in stale[0], stale
    assert _answers(retriever) == expected


@pytest.mark.parametrize("fault", list(FAULTS))
def test_regression_a_reported_fault_through_the_cli_search(saved, expected, fault, capsys) -> None:
    damage, name = FAULTS[fault]
    damage(saved / "store" / BM25_DIR)
    got, stale = _cli_search(saved / "store", capsys)
    assert stale and all(name in message for message in stale)
    assert got == {q: [cid for cid, _ in hits] for q, hits in expected.items()}


@pytest.mark.parametrize("fault", list(FAULTS))
@pytest.mark.parametrize("via", ["python", "cli"])
def test_regression_a_reingest_repairs_a_reported_fault_although_nothing_changed(saved, expected, fault, via,
                                                                                  capsys) -> None:
    damage, _ = FAULTS[fault]
    damage(saved / "store" / BM25_DIR)
    if via == "python":
        summary = ingest(saved / "corpus", saved / "store", mode="bm25", progress=False)
        assert summary.unchanged == len(TEXTS) and summary.index_rebuilt
    else:
        assert main(["ingest", str(saved / "corpus"), "--store", str(saved / "store"), "--mode", "bm25"]) == 0
        assert f"0 new, 0 changed, {len(TEXTS)} unchanged" in capsys.readouterr().out
    _assert_clean(saved / "store", expected)
    got, stale = _cli_search(saved / "store", capsys)
    assert stale == [] and got == {q: [cid for cid, _ in hits] for q, hits in expected.items()}


# -- every saved file: truncated, byte-flipped, deleted -------------------------------------------------------------
def _saved_files(pristine: Path) -> list[str]:
    manifest = read_manifest(pristine / "store" / BM25_DIR)
    assert manifest is not None
    return [*manifest.files, MANIFEST_FILE]


SAVED_FILES = ["retriever.json", "docs.jsonl", "bm25s/params.index.json", "bm25s/vocab.index.json",
               "bm25s/data.csc.index.npy", INDICES, "bm25s/indptr.csc.index.npy", MANIFEST_FILE]


def test_the_manifest_covers_every_saved_file(pristine: Path) -> None:
    bm25 = pristine / "store" / BM25_DIR
    on_disk = sorted(p.relative_to(bm25).as_posix() for p in bm25.rglob("*") if p.is_file())
    assert on_disk == sorted(SAVED_FILES) == sorted(_saved_files(pristine))
    with ChunkStore(pristine / "store" / CHUNKS_DB, read_only=True) as store:
        assert read_manifest(bm25).generation == store.generation  # type: ignore[union-attr]


def _flip(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


DAMAGE = {
    "truncated": lambda p: p.write_bytes(p.read_bytes()[: max(1, p.stat().st_size // 3)]),
    "byte-flipped": _flip,
    "deleted": lambda p: p.unlink(),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize("name", SAVED_FILES)
def test_any_damaged_saved_file_gives_a_warning_naming_it_and_correct_results(saved, expected, name, damage) -> None:
    DAMAGE[damage](saved / "store" / BM25_DIR / name)
    retriever, stale = _open_warned(saved / "store")
    assert len(stale) == 1 and name.rsplit("/", 1)[-1] in stale[0], stale
    assert _answers(retriever) == expected
    summary = ingest(saved / "corpus", saved / "store", mode="bm25", progress=False)
    assert summary.unchanged == len(TEXTS) and summary.index_rebuilt
    _assert_clean(saved / "store", expected)


@pytest.mark.parametrize("damage", list(DAMAGE))
@pytest.mark.parametrize("name", [n for n in SAVED_FILES if n != MANIFEST_FILE])
def test_a_standalone_load_of_a_damaged_file_is_a_store_error_naming_it(tmp_path, name, damage) -> None:
    docs = [Document(page_content=t, metadata={"chunk_id": f"{n}#0"}) for n, t in TEXTS.items()]
    BM25Retriever.from_documents(docs, tokenizer="auto").save(tmp_path / "bm25")
    DAMAGE[damage](tmp_path / "bm25" / name)
    with pytest.raises(StoreError, match=name.rsplit("/", 1)[-1].replace(".", r"\.")):
        BM25Retriever.load(tmp_path / "bm25")


# -- what the checksum cannot catch: a manifest rewritten by hand ---------------------------------------------------
def _rewrite_manifest(bm25: Path) -> None:
    manifest = read_manifest(bm25)
    write_manifest(bm25, generation=manifest.generation if manifest else None)


def _edit_npy(name: str, edit: Any) -> Any:
    def damage(bm25: Path) -> None:
        path = bm25 / "bm25s" / name
        array = np.load(path)
        with open(path, "wb") as f:
            np.save(f, edit(array.copy()))

    return damage


def _edit_json(name: str, edit: Any) -> Any:
    def damage(bm25: Path) -> None:
        path = bm25 / name
        path.write_text(json.dumps(edit(json.loads(path.read_text("utf-8"))), ensure_ascii=False), "utf-8")

    return damage


def _set(key: str, value: Any) -> Any:
    def edit(obj: dict[str, Any]) -> dict[str, Any]:
        obj[key] = value
        return obj

    return edit


def _duplicate_id(vocab: dict[str, int]) -> dict[str, int]:
    first, second = list(vocab)[:2]
    vocab[second] = vocab[first]
    return vocab


def _edit_text(path: Path) -> None:
    """The last document's text replaced (its line stays valid JSON)."""
    rows = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
    rows[-1]["page_content"] = "まったく別の文章。"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")


def _nan(array: np.ndarray) -> np.ndarray:
    array[0] = np.nan
    return array


STRUCTURAL = {
    "indices halved": (_edit_npy("indices.csc.index.npy", lambda a: a[: a.size // 2]), "indices.csc.index.npy"),
    "indptr halved": (_edit_npy("indptr.csc.index.npy", lambda a: a[: a.size // 2]), "indptr.csc.index.npy"),
    "data halved": (_edit_npy("data.csc.index.npy", lambda a: a[: a.size // 2]), "data.csc.index.npy"),
    "indptr not rising": (_edit_npy("indptr.csc.index.npy", lambda a: a[::-1]), "indptr.csc.index.npy"),
    "a document id past the documents": (
        _edit_npy("indices.csc.index.npy", lambda a: a + len(TEXTS)), "indices.csc.index.npy"),
    "a NaN score": (_edit_npy("data.csc.index.npy", _nan), "data.csc.index.npy"),
    "a 2-D array": (_edit_npy("data.csc.index.npy", lambda a: a.reshape(1, -1)), "data.csc.index.npy"),
    "integer scores": (_edit_npy("data.csc.index.npy", lambda a: a.astype(np.int32)), "data.csc.index.npy"),
    "a term id used twice": (_edit_json("bm25s/vocab.index.json", _duplicate_id), "vocab.index.json"),
    "another k1": (_edit_json("bm25s/params.index.json", _set("k1", 0.9)), "params.index.json"),
    "another num_docs": (_edit_json("bm25s/params.index.json", _set("num_docs", 99)), "params.index.json"),
    "swapped document rows": (lambda bm25: _swap_rows(bm25 / "docs.jsonl"), "docs.jsonl"),
    "a document's text edited": (lambda bm25: _edit_text(bm25 / "docs.jsonl"), "docs.jsonl"),
}


@pytest.mark.parametrize("fault", list(STRUCTURAL))
def test_structural_damage_under_a_rewritten_manifest_is_refused_naming_the_file(saved, expected, fault) -> None:
    damage, name = STRUCTURAL[fault]
    bm25 = saved / "store" / BM25_DIR
    damage(bm25)
    _rewrite_manifest(bm25)  # the checksums now vouch for the damage: only the structure can tell
    with pytest.raises(StoreError, match=name.replace(".", r"\.")) as caught:
        BM25Retriever.load(bm25)
    assert "index" in caught.value.reason
    retriever, stale = _open_warned(saved / "store")
    assert len(stale) == 1 and name in stale[0]
    assert _answers(retriever) == expected


def test_the_row_check_spans_the_whole_index_and_catches_swaps_at_its_positions(tmp_path: Path) -> None:
    n = 5 * SPOT_CHECK_DOCS
    docs = [Document(page_content=f"document number{i} word{i}", metadata={"chunk_id": f"d#{i}"}) for i in range(n)]
    BM25Retriever.from_documents(docs, tokenizer="whitespace").save(tmp_path / "bm25")
    assert BM25Retriever.load(tmp_path / "bm25").invoke("word0")[0].metadata["chunk_id"] == "d#0"
    middle = int(np.linspace(0, n - 1, SPOT_CHECK_DOCS).round()[SPOT_CHECK_DOCS // 2])  # a checked position
    for i, j in ((0, 1), (n - 2, n - 1), (middle, middle + 1)):  # the first, the last, one in the middle
        shutil.copytree(tmp_path / "bm25", tmp_path / f"swap{i}")
        _swap_rows(tmp_path / f"swap{i}" / "docs.jsonl", i, j)
        _rewrite_manifest(tmp_path / f"swap{i}")
        with pytest.raises(StoreError, match=r"docs\.jsonl:\d+: document 'd#\d+' does not match the index"):
            BM25Retriever.load(tmp_path / f"swap{i}")


# -- generation, manifest, old saves ---------------------------------------------------------------------------------
def test_an_index_of_another_generation_is_rebuilt(saved, expected) -> None:
    bm25 = saved / "store" / BM25_DIR
    manifest = read_manifest(bm25)
    assert manifest is not None and manifest.generation is not None
    write_manifest(bm25, generation=manifest.generation - 1)  # index.json still claims the store's generation
    retriever, stale = _open_warned(saved / "store")
    assert len(stale) == 1 and f"built from chunk-store generation {manifest.generation - 1}" in stale[0]
    assert _answers(retriever) == expected
    assert ingest(saved / "corpus", saved / "store", mode="bm25", progress=False).index_rebuilt
    _assert_clean(saved / "store", expected)


def test_a_manifest_edited_by_hand_without_its_digest_is_refused(saved, expected) -> None:
    path = saved / "store" / BM25_DIR / MANIFEST_FILE
    body = json.loads(path.read_text("utf-8"))
    body["files"]["docs.jsonl"]["bytes"] += 1
    path.write_text(json.dumps(body), "utf-8")
    retriever, stale = _open_warned(saved / "store")
    assert len(stale) == 1 and "manifest.json does not match its own SHA-256" in stale[0]
    assert _answers(retriever) == expected


@pytest.mark.parametrize("entry", [{"../retriever.json": {"bytes": 1, "sha256": "0"}}, {"docs.jsonl": {"bytes": "1"}}])
def test_a_malformed_manifest_is_refused(tmp_path: Path, entry: dict[str, Any]) -> None:
    BM25Retriever.from_documents([Document(page_content="a b")], tokenizer="whitespace").save(tmp_path / "bm25")
    path = tmp_path / "bm25" / MANIFEST_FILE
    body = json.loads(path.read_text("utf-8"))
    body["files"].update(entry)
    from langchain_ragspine.backends.directory.files import _manifest_digest

    body["sha256"] = _manifest_digest(body)
    path.write_text(json.dumps(body), "utf-8")
    with pytest.raises(StoreError, match="malformed manifest.json"):
        BM25Retriever.load(tmp_path / "bm25")


def test_a_save_without_a_checksum_is_rebuilt_from_its_documents_never_read(tmp_path: Path) -> None:
    docs = [Document(page_content=t, metadata={"chunk_id": f"{n}#0"}) for n, t in TEXTS.items()]
    BM25Retriever.from_documents(docs, tokenizer="auto", k=2).save(tmp_path / "bm25")
    expected = [d.metadata["chunk_id"] for d in BM25Retriever.load(tmp_path / "bm25").invoke("清水寺")]
    (tmp_path / "bm25" / MANIFEST_FILE).unlink()  # as saved before checksums were recorded
    _halve_array(tmp_path / "bm25" / INDICES)  # and its arrays damaged: they must not be read
    with pytest.warns(StaleIndexWarning, match=r"no checksum.*rebuilt in memory from its docs\.jsonl"):
        loaded = BM25Retriever.load(tmp_path / "bm25")
    assert loaded.k == 2 and [d.metadata["chunk_id"] for d in loaded.invoke("清水寺")] == expected == ["kyoto#0"]
    loaded.save(tmp_path / "bm25")  # saving again rewrites it with a manifest
    with warnings.catch_warnings():
        warnings.simplefilter("error", StaleIndexWarning)
        assert [d.metadata["chunk_id"] for d in BM25Retriever.load(tmp_path / "bm25").invoke("清水寺")] == expected
    with pytest.raises(StoreError, match="generation"):  # a caller with a store asks for its generation
        BM25Retriever.load(tmp_path / "bm25", generation=3)


def test_a_store_index_without_a_checksum_is_rebuilt_and_ingest_rewrites_it(saved, expected) -> None:
    (saved / "store" / BM25_DIR / MANIFEST_FILE).unlink()
    retriever, stale = _open_warned(saved / "store")
    assert len(stale) == 1 and "manifest.json: missing: no checksum" in stale[0]
    assert "run `ragspine ingest` of the store's corpus again to rewrite it" in stale[0]
    assert "documents other writers added, such as the vector store's, are kept" in stale[0]
    assert _answers(retriever) == expected
    assert ingest(saved / "corpus", saved / "store", mode="bm25", progress=False).index_rebuilt
    _assert_clean(saved / "store", expected)


def test_an_empty_index_is_verified_too(tmp_path: Path) -> None:
    docs = [Document(page_content="。、", metadata={"chunk_id": "p#0"})]  # no token at all
    BM25Retriever.from_documents(docs, tokenizer="auto").save(tmp_path / "bm25")
    assert BM25Retriever.load(tmp_path / "bm25").invoke("梅雨") == []
    _edit_text(tmp_path / "bm25" / "docs.jsonl")  # now a document with tokens the (absent) index lacks
    with pytest.raises(StoreError, match="docs.jsonl"):
        BM25Retriever.load(tmp_path / "bm25")
    _rewrite_manifest(tmp_path / "bm25")
    with pytest.raises(StoreError, match="does not match the index"):
        BM25Retriever.load(tmp_path / "bm25")


def test_a_hybrid_save_with_a_damaged_bm25_channel_is_refused(tmp_path: Path) -> None:
    docs = [Document(page_content=t, metadata={"chunk_id": f"{n}#0"}) for n, t in TEXTS.items()]
    bm25 = BM25Retriever.from_documents(docs, tokenizer="auto")
    HybridRetriever(retrievers=[bm25, BM25Retriever.from_documents(docs, tokenizer="cjk")]).save(tmp_path / "h")
    assert HybridRetriever.load(tmp_path / "h").invoke("清水寺")[0].metadata["chunk_id"] == "kyoto#0"
    _halve_array(tmp_path / "h" / "channel-1" / INDICES)
    with pytest.raises(StoreError, match=r"channel-1.*indices\.csc\.index\.npy"):
        HybridRetriever.load(tmp_path / "h")


def test_index_json_and_the_manifest_record_the_same_generation(pristine: Path) -> None:
    state = json.loads((pristine / "store" / INDEX_STATE).read_text("utf-8"))
    assert read_manifest(pristine / "store" / BM25_DIR).generation == state["generation"]  # type: ignore[union-attr]


@pytest.mark.parametrize("name", ["docs.jsonl", "bm25s/vocab.index.json", INDICES])
def test_a_file_that_would_fail_to_parse_is_reported_by_its_checksum(tmp_path: Path, name: str) -> None:
    """Every file is hashed before anything reads it: a damaged one is reported as such, not as a parser's error."""
    docs = [Document(page_content=t, metadata={"chunk_id": f"{n}#0"}) for n, t in TEXTS.items()]
    BM25Retriever.from_documents(docs, tokenizer="auto").save(tmp_path / "bm25")
    path = tmp_path / "bm25" / name
    data = bytearray(path.read_bytes())
    data[:8] = b"\x00" * 8  # same size, unparsable
    path.write_bytes(bytes(data))
    with pytest.raises(StoreError, match=name.replace(".", r"\.") + ": does not match the SHA-256") as caught:
        BM25Retriever.load(tmp_path / "bm25")
    assert caught.value.__context__ is None  # nothing was parsed
