"""Issue 8, section 3 (ingest cannot silently lose or merge documents) and the derived-files half of section 1
(derived indexes and caches hold only what search may return), with the Python API and the `ragspine` CLI."""

import hashlib
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings

from langchain_ragspine.backends.directory.chunk_store import ChunkStore
from langchain_ragspine.backends.directory.embedding_cache import EmbeddingCache
from langchain_ragspine.backends.directory.layout import CHUNKS_DB, EMBEDDING_CACHE
from langchain_ragspine.cli import main
from langchain_ragspine.document_loaders.corpus import LoaderWarning
from langchain_ragspine.embeddings.batching import l2_normalize
from langchain_ragspine.embeddings.cache import content_hash
from langchain_ragspine.errors import StoreError
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.sources import open_retriever, search


def _write(path: Path, text: str, **sidecar) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")
    if sidecar:
        path.with_suffix(".json").write_text(json.dumps(sidecar, ensure_ascii=False), "utf-8")
    return path


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    _write(root / "a.md", "# A\n\nalpha text about rivers.")
    _write(root / "b.md", "# B\n\nbeta text about mountains.")
    _write(root / "c.md", "# C\n\ngamma text about towers.")
    return root


def _active(store: Path) -> list[str]:
    with ChunkStore(store / CHUNKS_DB, read_only=True) as s:
        return s.doc_ids()


def _generation(store: Path) -> int:
    with ChunkStore(store / CHUNKS_DB, read_only=True) as s:
        return s.generation


# ---------------------------------------------------------------------------- 0 documents


def test_regression_zero_documents_never_retract_a_store_silently(corpus, tmp_path):
    store = tmp_path / "S"
    ingest(corpus, store)
    before = _generation(store)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(StoreError) as info:
        ingest(empty, store)
    msg = str(info.value)
    assert str(store) in msg and "retract all 3 active documents" in msg and "allow_empty=True" in msg
    assert _active(store) == ["a", "b", "c"] and _generation(store) == before  # nothing written


def test_zero_documents_from_empty_files_say_so(corpus, tmp_path):
    store = tmp_path / "S"
    ingest(corpus, store)
    blank = _write(tmp_path / "blank" / "x.md", "   \n")
    with pytest.warns(UserWarning, match="empty document"), pytest.raises(StoreError, match=r"1 empty file"):
        ingest(blank.parent, store)
    assert _active(store) == ["a", "b", "c"]


def test_allow_empty_retracts_everything_and_keep_missing_retracts_nothing(corpus, tmp_path):
    store = tmp_path / "S"
    ingest(corpus, store)
    empty = tmp_path / "empty"
    empty.mkdir()
    s = ingest(empty, store, retract_missing=False)
    assert (s.documents, s.retracted, s.store_documents) == (0, 0, 3)
    s = ingest(empty, store, allow_empty=True)
    assert (s.documents, s.retracted, s.store_documents, s.store_chunks) == (0, 3, 0, 0)
    assert _active(store) == []
    assert search(open_retriever(store), "alpha") == []
    s = ingest(empty, store)  # an empty store has nothing to lose
    assert (s.documents, s.retracted) == (0, 0)


def test_zero_documents_into_a_new_store_is_fine(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    s = ingest(empty, tmp_path / "S")
    assert (s.documents, s.store_documents) == (0, 0)


def test_cli_refuses_zero_documents_with_exit_code_and_message(corpus, tmp_path, capsys):
    store = tmp_path / "S"
    assert main(["ingest", str(corpus), "--store", str(store)]) == 0
    capsys.readouterr()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["ingest", str(empty), "--store", str(store)]) == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("ragspine: error: ")]  # after progress lines
    assert len(errors) == 1 and err.splitlines()[-1] == errors[0] and str(store) in errors[0]
    assert "retract all 3 active documents" in err and "--allow-empty" in err
    assert _active(store) == ["a", "b", "c"]
    assert main(["ingest", str(empty), "--store", str(store), "--allow-empty"]) == 0
    out = capsys.readouterr().out
    assert "this run: 0 documents, 0 chunks (0 new, 0 changed, 0 unchanged, 3 retracted)" in out
    assert "store: 0 documents, 0 chunks" in out


def test_a_run_that_retracts_most_of_a_store_says_so(corpus, tmp_path, capsys):
    store = tmp_path / "S"
    ingest(corpus, store)
    s = ingest(corpus / "a.md", store)
    assert s.retracted == 2
    assert any("retracted 2 of the store's 3 documents" in n for n in s.notes)
    assert main(["ingest", str(corpus), "--store", str(store)]) == 0
    assert "note:" not in capsys.readouterr().err  # adding documents back retracts nothing


# ---------------------------------------------------------------------------- doc_ids


def test_regression_several_folders_with_the_same_file_names_lose_nothing(tmp_path):
    _write(tmp_path / "projA" / "README.md", "# A\n\nalpha readme zebra.")
    _write(tmp_path / "projB" / "README.md", "# B\n\nbeta readme yak.")
    _write(tmp_path / "projB" / "notes.md", "markdown notes walrus.")
    _write(tmp_path / "projB" / "notes.txt", "text notes vole.")
    store = tmp_path / "S"
    paths = [tmp_path / "projA", tmp_path / "projB"]
    s = ingest(paths, store)
    assert (s.documents, s.new, s.skipped) == (4, 4, 0)
    assert _active(store) == ["notes.md", "notes.txt", "projA/README", "projB/README"]
    r = open_retriever(store)
    for word, doc_id in [
        ("zebra", "projA/README"),
        ("yak", "projB/README"),
        ("walrus", "notes.md"),
        ("vole", "notes.txt"),
    ]:
        assert [d.metadata["doc_id"] for d in search(r, word, k=1)] == [doc_id]
    s = ingest(paths, store)  # the same paths again: the same ids
    assert (s.new, s.changed, s.unchanged, s.retracted, s.index_rebuilt) == (0, 0, 4, 0, False)


def test_an_existing_single_folder_store_keeps_its_ids(corpus, tmp_path):
    store = tmp_path / "S"
    ingest(corpus, store)
    assert _active(store) == ["a", "b", "c"]
    s = ingest(corpus, store)
    assert (s.unchanged, s.retracted) == (3, 0)


# ---------------------------------------------------------------------------- summary scope


def test_summary_counts_documents_and_chunks_on_the_same_scope(corpus, tmp_path):
    store = tmp_path / "S"
    first = ingest(corpus, store)
    assert (first.documents, first.chunks, first.store_documents, first.store_chunks) == (3, 3, 3, 3)
    s = ingest(corpus / "a.md", store, retract_missing=False)
    assert (s.documents, s.chunks, s.store_documents, s.store_chunks) == (1, 1, 3, 3)
    assert s.line().startswith(
        "this run: 1 documents, 1 chunks (0 new, 0 changed, 1 unchanged, 0 retracted); "
    )
    assert "; store: 3 documents, 3 chunks; " in s.line()


# ---------------------------------------------------------------------------- derived files


def _derived_files(store: Path) -> list[Path]:
    """Every file of the store directory except the chunk store (the source of truth, which keeps every version)."""
    return [p for p in store.rglob("*") if p.is_file() and not p.name.startswith(CHUNKS_DB)]


class DenseFakeEmbeddings(Embeddings):
    """32 pseudo-random dims per text (seeded by its SHA-256): every vector's bytes are unique, so a byte search of
    the store's files finds a vector if and only if it is there (128 bytes fit in one SQLite page, uncut)."""

    size = 32

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [_vector(t).tolist() for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return _vector(text).tolist()


def _vector(text: str) -> np.ndarray:
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
    v = np.random.default_rng(seed).standard_normal(32).astype(np.float32)
    return v / np.linalg.norm(v)


def _traces(text: str) -> list[bytes]:
    """What a chunk of ``text`` leaves in derived files: the text itself, its vector (as cached and as indexed,
    L2-normalised again), and its content hash (the key of its cache and id-map rows)."""
    v = _vector(text)
    return [
        text.encode("utf-8"),
        v.astype("<f4").tobytes(),
        l2_normalize(v[None, :])[0].astype("<f4").tobytes(),
        content_hash(text).encode("ascii"),
    ]


def test_regression_restricted_or_retracted_chunks_leave_nothing_in_derived_files(tmp_path):
    root = tmp_path / "corpus"
    keep = _write(root / "keep.md", "ordinary text about rivers.")
    secret = _write(root / "secret.md", "SECRETTOKEN-ALPHA launch codes.")
    gone = _write(root / "gone.md", "RETRACTTOKEN-BETA old text.")
    changed = _write(root / "changed.md", "OLDTOKEN-GAMMA first version.")
    born = _write(root / "born.md", "BORNTOKEN-DELTA never public.", sensitivity="RESTRICTED")
    texts = {p.stem: p.read_text("utf-8") for p in (keep, secret, gone, changed, born)}
    store = tmp_path / "S"
    emb = DenseFakeEmbeddings()
    ingest(root, store, embedding=emb)

    def files() -> bytes:
        return b"".join(p.read_bytes() for p in _derived_files(store))

    before = files()
    for stem in ("keep", "secret", "gone", "changed"):  # the checks below can fail: every trace is there now
        assert all(trace in before for trace in _traces(texts[stem])), stem
    assert not any(trace in before for trace in _traces(texts["born"]))  # RESTRICTED from the start

    # the secret becomes RESTRICTED (in another spelling), one document is deleted, one changes
    secret.with_suffix(".json").write_text('{"Sensitivity": "Restricted."}', "utf-8")
    gone.unlink()
    changed.write_text("NEWTOKEN-EPSILON second version.", "utf-8")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", LoaderWarning)
        s = ingest(root, store, embedding=emb)
    assert (s.changed, s.retracted) == (2, 1)

    after = files()
    names = sorted(p.relative_to(store).as_posix() for p in _derived_files(store))
    assert "embeddings.sqlite" in names and not any(n.endswith(("-wal", "-shm", "-journal")) for n in names)
    for stem in ("secret", "gone", "changed", "born"):
        for i, trace in enumerate(_traces(texts[stem])):
            assert trace not in after, (stem, i)
    assert all(trace in after for trace in _traces(texts["keep"]))
    assert all(trace in after for trace in _traces("NEWTOKEN-EPSILON second version."))
    with EmbeddingCache(store / EMBEDDING_CACHE, read_only=True) as cache:
        assert cache.count() == 2  # keep#0 and the new changed#0: exactly what search may return
    # the chunk store is the source of truth and keeps every version, the restricted one included
    assert b"SECRETTOKEN-ALPHA" in b"".join(p.read_bytes() for p in store.glob(CHUNKS_DB + "*"))
    # and no search returns any of it
    for mode in ("bm25", "vector", "hybrid"):
        r = open_retriever(store, mode=mode, embedding=emb)
        for query in (
            "SECRETTOKEN-ALPHA launch codes.",
            "RETRACTTOKEN-BETA",
            "OLDTOKEN-GAMMA",
            "BORNTOKEN-DELTA",
        ):
            assert {d.metadata["doc_id"] for d in search(r, query, k=10)} <= {"keep", "changed"}


def test_a_lexical_reingest_also_prunes_the_cache(tmp_path):
    root = tmp_path / "corpus"
    _write(root / "a.md", "alpha.")
    secret = _write(root / "s.md", "SECRETTOKEN text.")
    store = tmp_path / "S"
    ingest(root, store, embedding=DenseFakeEmbeddings())
    vector = _traces(secret.read_text("utf-8"))[1]
    assert vector in (store / EMBEDDING_CACHE).read_bytes()
    secret.with_suffix(".json").write_text('{"sensitivity": "RESTRICTED"}', "utf-8")
    ingest(root, store, mode="bm25")
    assert vector not in (store / EMBEDDING_CACHE).read_bytes()
    assert not (store / "vector").exists()


def test_prune_without_a_model_key_prunes_every_model(tmp_path):
    with EmbeddingCache(tmp_path / "e.sqlite") as cache:
        v = np.ones(4, dtype=np.float32)
        cache.put_many("m1", [("a#0", "h1", v), ("b#0", "h2", v)])
        cache.put_many("m2", [("a#0", "h1", v), ("b#0", "h2", v), ("a#0", "old", v)])
        assert cache.prune("m1", {("a#0", "h1")}) == 1  # one model only, as before
        assert (cache.count("m1"), cache.count("m2")) == (1, 3)
        assert cache.prune(None, {("a#0", "h1")}) == 2
        assert (cache.count("m1"), cache.count("m2")) == (1, 1)


@pytest.mark.subprocess
def test_cli_warns_about_an_ambiguous_label_on_stderr_and_never_returns_the_document(tmp_path, capsys):
    root = tmp_path / "corpus"
    _write(root / "open.md", "rivers and mountains.")
    secret = _write(root / "secret.md", "---\nsensitivity: RESTRICTED\nsensitivity: PUBLIC\n---\nSECRETTOKEN rivers.\n")
    store = tmp_path / "S"
    proc = subprocess.run(  # a real process: pytest would record the warnings instead of printing them
        [sys.executable, "-m", "langchain_ragspine", "ingest", str(root), "--store", str(store), "--mode", "bm25"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONIOENCODING": "utf-8"},
    )
    assert proc.returncode == 0, proc.stderr
    assert f"warning: {secret}:3: sensitivity is set 2 times" in proc.stderr and "keeping RESTRICTED" in proc.stderr
    assert main(["search", "SECRETTOKEN rivers", "--store", str(store), "--json"]) == 0
    out = capsys.readouterr().out
    assert "SECRETTOKEN" not in out and [json.loads(x)["doc_id"] for x in out.splitlines()] == ["open"]


@pytest.mark.parametrize("how", ["argument", "environment"])
def test_regression_a_bad_workers_value_fails_before_an_existing_store_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str
) -> None:
    """A bad ``workers`` (``RAGSPINE_WORKERS``) on an ingest into an existing store was checked only by the BM25
    rebuild after the new chunks were committed, leaving a stale index; it fails before the store is touched."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("# A\n\n東京都の天気は晴れ。\n", "utf-8")
    store = tmp_path / "store"
    ingest(corpus, store, embedding="none", mode="bm25", progress=False)
    (corpus / "b.md").write_text("# B\n\n北京是中国的首都。\n", "utf-8")
    before = (store / CHUNKS_DB).read_bytes()
    if how == "argument":
        with pytest.raises(ValueError, match=r"workers must be an int >= 0 or None \(0: automatic\), got -1"):
            ingest(corpus, store, embedding="none", mode="bm25", workers=-1, progress=False)
    else:
        monkeypatch.setenv("RAGSPINE_WORKERS", "-1")
        with pytest.raises(ValueError, match="RAGSPINE_WORKERS='-1'"):
            ingest(corpus, store, embedding="none", mode="bm25", progress=False)
    assert (store / CHUNKS_DB).read_bytes() == before
    with ChunkStore(store / CHUNKS_DB, read_only=True) as s:
        assert len(s.doc_ids()) == 1
