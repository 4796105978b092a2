"""Tokenizing the BM25 index in several processes builds exactly the index one process builds (issue 12).

Same vocabulary (ids included), same score matrix bit for bit, same search results and scores — through
``build_bm25_index``, ``BM25Retriever`` and ``ingest`` (the saved index files), also when a worker process dies
(the rest is tokenized in this process) and when an ingest is interrupted while tokenizing and run again.
Batches are made small here so a few hundred texts really go through a pool of worker processes.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from langchain_ragspine.backends.directory import bm25_parallel
from langchain_ragspine.backends.directory.bm25_index import TermPostings, build_bm25_index
from langchain_ragspine.backends.directory.bm25_parallel import count_batch, iter_counted, resolve_workers
from langchain_ragspine.backends.directory.chunk_store import ChunkStore
from langchain_ragspine.backends.directory.layout import BM25_DIR, CHUNKS_DB
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.retrievers import BM25Retriever
from langchain_ragspine.tokenizers import get_tokenizer

JA = "日本で梅雨がないのは北海道と小笠原諸島である。東京都の天気は晴れ、気温は二十度を超えた。"
ZH = "北京是中华人民共和国的首都，關聯式資料庫的備份與還原。长江是亚洲最长的河流。"
EN = "Reciprocal rank fusion combines BM25 and dense retrieval; k=60. "
_PARENT = os.getpid()


def _texts(n: int, seed: int = 0) -> list[str]:
    """``n`` deterministic mixed-script texts (some empty, some English only, some with symbols only)."""
    rng = random.Random(seed)
    pool = [JA, ZH, EN, "ＡＢＣ　ｶﾀｶﾅ 한국어 123", "", "。、！？", "東京"]
    out = []
    for _ in range(n):
        parts = rng.choices(pool, k=rng.randint(1, 4))
        text = "".join(parts)
        if text and rng.random() < 0.7:  # vary the text so the vocabulary keeps growing across batches
            cut = rng.randrange(len(text))
            text = text[cut:] + text[:cut] + str(rng.randrange(1000))
        out.append(text)
    return out


def _assert_same_index(a, b) -> None:  # type: ignore[no-untyped-def]
    assert (a is None) == (b is None)
    if a is None:
        return
    assert list(a.vocab_dict.items()) == list(b.vocab_dict.items())  # ids, in order
    for key in ("data", "indices", "indptr"):
        assert a.scores[key].dtype == b.scores[key].dtype
        assert a.scores[key].tobytes() == b.scores[key].tobytes()
    assert a.scores["num_docs"] == b.scores["num_docs"]


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bm25_parallel, "BATCH_TEXTS", 16)


# -- one batch, in this process -----------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(
    texts=st.lists(st.sampled_from([JA, ZH, EN, "", "東京 tokyo", "北京 北京 北京", "。"]), max_size=12),
    tokenizer=st.sampled_from(["auto", "cjk", "whitespace", "fugashi-nofold"]),
    batch=st.integers(1, 5),
)
def test_counted_batches_merge_to_the_postings_of_one_process(texts: list[str], tokenizer: str, batch: int) -> None:
    tokenize = get_tokenizer(tokenizer)
    with TermPostings() as one, TermPostings() as merged:
        for text in texts:
            one.add(tokenize(text))
        for counted in iter_counted(texts, tokenizer, workers=1, batch_texts=batch):
            merged.add_counted(counted.term_list(), counted.term_ids, counted.tfs, counted.doc_len, counted.doc_terms)
        assert list(merged.vocab.items()) == list(one.vocab.items())
        assert merged.num_docs == one.num_docs == len(texts)
        if one.vocab:
            a, b = one.lucene_scores(k1=1.5, b=0.75), merged.lucene_scores(k1=1.5, b=0.75)
            for key in ("data", "indices", "indptr"):
                assert a[key].tobytes() == b[key].tobytes()


def test_count_batch_counts_terms_per_document() -> None:
    batch = count_batch("whitespace", ["b a b", "", "c a"])
    assert batch.terms == "b\x00a\x00c" and batch.term_list() == ["b", "a", "c"]  # first occurrence
    assert batch.doc_len.tolist() == [3, 0, 2] and batch.doc_terms.tolist() == [2, 0, 2]
    pairs = [(batch.term_list()[t], int(f)) for t, f in zip(batch.term_ids, batch.tfs, strict=True)]
    assert pairs == [("b", 2), ("a", 1), ("a", 1), ("c", 1)]


def test_terms_holding_the_separator_stay_a_list() -> None:
    batch = count_batch("whitespace", ["a\x00b c", "c"])  # str.split() keeps NUL inside a token
    assert batch.terms == ["a\x00b", "c"] and batch.term_list() == ["a\x00b", "c"]


def test_add_counted_rejects_arrays_that_do_not_fit() -> None:
    with TermPostings() as p, pytest.raises(ValueError, match="do not fit"):
        p.add_counted(["a"], np.array([0, 0]), np.array([1]), np.array([1]), np.array([1]))
    with TermPostings() as p, pytest.raises(ValueError, match="outside"):
        p.add_counted(["a"], np.array([1]), np.array([1]), np.array([1]), np.array([1]))


# -- how many workers ----------------------------------------------------------------------------------------
def test_resolve_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bm25_parallel, "usable_cores", lambda: 2)
    assert resolve_workers(1, 10**6) == 1
    assert resolve_workers(3, 10**6) == 3  # explicit: as asked ...
    assert resolve_workers(3, 3000) == 2  # ... but never more than there are batches (2048 texts each)
    assert resolve_workers(0, bm25_parallel.MIN_PARALLEL_TEXTS - 1) == 1  # automatic: small input, one process
    expected = 2 if bm25_parallel._forks_safely() else 1
    assert resolve_workers(None, 10**6) == resolve_workers(0, 10**6) == expected
    with pytest.raises(ValueError, match=r"^workers must be an int >= 0 or None \(0: automatic\), got -1$"):
        resolve_workers(-1, 10)
    with pytest.raises(TypeError, match=r"^workers must be an int >= 0 or None \(0: automatic\), got bool True$"):
        resolve_workers(True, 10)  # type: ignore[arg-type]


def test_workers_setting_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from langchain_ragspine.configured import configured_setting
    from langchain_ragspine.settings import get_settings

    assert get_settings().workers == 0
    monkeypatch.setenv("RAGSPINE_WORKERS", "3")
    assert get_settings().workers == 3 == configured_setting("workers")
    monkeypatch.setenv("RAGSPINE_WORKERS", "-1")  # refused where it is used, naming the variable
    with pytest.raises(ValueError, match=r"^RAGSPINE_WORKERS='-1': workers must be an integer >= 0"):
        configured_setting("workers")


# -- a real pool -------------------------------------------------------------------------------------------
needs_fork = pytest.mark.skipif(not bm25_parallel._forks_safely(), reason="worker processes are forked on POSIX only")


@pytest.fixture
def pool_starts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the pools started (the production code has no test hooks: this wraps its pool factory)."""
    started: list[int] = []
    start = bm25_parallel._start_pool

    def counting(workers: int, tokenizer: str):  # type: ignore[no-untyped-def]
        started.append(workers)
        return start(workers, tokenizer)

    monkeypatch.setattr(bm25_parallel, "_start_pool", counting)
    return started


@needs_fork
@pytest.mark.parametrize("tokenizer", ["auto", "cjk"])
def test_index_of_two_workers_equals_one_process(small_batches: None, pool_starts: list[int], tokenizer: str) -> None:
    texts = _texts(300)
    tokenize = get_tokenizer(tokenizer)
    one = build_bm25_index(texts, tokenize, k1=1.5, b=0.75, workers=1)
    two = build_bm25_index(texts, tokenize, k1=1.5, b=0.75, workers=2)
    assert pool_starts == [2]
    _assert_same_index(one, two)


@needs_fork
def test_retriever_results_and_scores_do_not_depend_on_workers(small_batches: None, pool_starts: list[int]) -> None:
    docs = [Document(page_content=t, metadata={"chunk_id": f"d#{i}"}) for i, t in enumerate(_texts(200, seed=1))]
    one = BM25Retriever.from_documents(docs, k=10)
    two = BM25Retriever.from_documents(docs, k=10, workers=2)
    assert pool_starts == [2]
    for query in ("北海道の梅雨", "北京的首都", "rank fusion", "東京", "關聯式資料庫"):
        assert one.search(query) == two.search(query)
        assert one.score(query).tobytes() == two.score(query).tobytes()


def _dies_in_a_worker(tokenizer: str, texts: list[str]) -> bm25_parallel.CountedBatch:
    """``count_batch``, except that a worker process given the third batch exits at once (as if killed)."""
    if os.getpid() != _PARENT and "DIE" in texts[0]:
        os._exit(3)
    return _count_batch(tokenizer, texts)


_count_batch = bm25_parallel.count_batch


@needs_fork
def test_a_dead_worker_leaves_the_rest_to_this_process_with_the_same_index(
    small_batches: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = _texts(200, seed=2)
    texts[32] = "DIE " + texts[32]  # first text of the third batch
    tokenize = get_tokenizer("auto")
    one = build_bm25_index(texts, tokenize, k1=1.5, b=0.75, workers=1)
    monkeypatch.setattr(bm25_parallel, "count_batch", _dies_in_a_worker)
    with pytest.warns(RuntimeWarning, match="tokenizing the rest in this process"):
        two = build_bm25_index(texts, tokenize, k1=1.5, b=0.75, workers=2)
    _assert_same_index(one, two)


# -- ingest ---------------------------------------------------------------------------------------------------
def _corpus(root: Path, n_files: int = 40) -> Path:
    rng = random.Random(5)
    for i in range(n_files):
        paras = [rng.choice([JA, ZH, EN]) * rng.randint(1, 3) + str(i * 7 + j) for j in range(rng.randint(1, 5))]
        (root / f"doc-{i:03d}.md").parent.mkdir(parents=True, exist_ok=True)
        (root / f"doc-{i:03d}.md").write_text(f"# Doc {i}\n\n" + "\n\n".join(paras) + "\n", "utf-8")
    return root


def _index_files(store: Path) -> dict[str, bytes]:
    """The saved BM25 index's files; ``docs.jsonl`` without the per-store ``ingested_at``, and ``manifest.json``
    without the checksums that cover it (``docs.jsonl``'s and the manifest's own)."""
    out = {}
    for p in sorted((store / BM25_DIR).rglob("*")):
        if not p.is_file():
            continue
        data = p.read_bytes()
        if p.name == "docs.jsonl":
            rows = [json.loads(line) for line in data.decode("utf-8").splitlines()]
            for row in rows:
                row.get("metadata", {}).pop("ingested_at", None)
            data = json.dumps(rows, ensure_ascii=False, sort_keys=True).encode()
        if p.name == "manifest.json":
            manifest = json.loads(data)
            del manifest["sha256"], manifest["files"]["docs.jsonl"]["sha256"]
            data = json.dumps(manifest, sort_keys=True).encode()
        out[str(p.relative_to(store))] = data
    return out


@pytest.fixture
def one_process_store(tmp_path: Path) -> tuple[Path, Path]:
    """``(corpus, store)``: a corpus and its store ingested in one process."""
    corpus = _corpus(tmp_path / "corpus")
    ingest(corpus, tmp_path / "one", embedding="none", mode="bm25", workers=1, progress=False)
    return corpus, tmp_path / "one"


@needs_fork
def test_ingest_with_workers_saves_the_same_index_files(
    tmp_path: Path,
    one_process_store: tuple[Path, Path],
    small_batches: None,
    pool_starts: list[int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    corpus, one = one_process_store
    monkeypatch.setenv("RAGSPINE_WORKERS", "2")  # through the settings
    two = tmp_path / "two"
    summary = ingest(corpus, two, embedding="none", mode="bm25", progress=False)
    assert pool_starts == [2] and summary.index_rebuilt
    files = _index_files(one)
    assert "bm25/bm25s/data.csc.index.npy" in files and "bm25/bm25s/vocab.index.json" in files
    assert _index_files(two) == files


class _Interrupted(Exception):
    pass


@needs_fork
def test_an_ingest_interrupted_while_tokenizing_is_rebuilt_the_same(
    tmp_path: Path,
    one_process_store: tuple[Path, Path],
    small_batches: None,
    pool_starts: list[int],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    corpus, clean = one_process_store

    store = tmp_path / "store"
    add_counted = TermPostings.add_counted
    merged: list[int] = []

    def interrupted(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        if len(merged) == 2:
            raise _Interrupted  # e.g. Ctrl-C after the store was written, while the index is being built
        merged.append(1)
        return add_counted(self, *args, **kwargs)

    monkeypatch.setattr(TermPostings, "add_counted", interrupted)
    with pytest.raises(_Interrupted):
        ingest(corpus, store, embedding="none", mode="bm25", workers=2, progress=False)
    with ChunkStore(store / CHUNKS_DB, read_only=True) as s:
        assert s.count_chunks() > 0  # the chunk store was committed ...
    assert not (store / BM25_DIR).exists()  # ... the index was not written
    monkeypatch.setattr(TermPostings, "add_counted", add_counted)
    summary = ingest(corpus, store, embedding="none", mode="bm25", workers=2, progress=False)
    assert summary.new == 0 and summary.unchanged == summary.documents and summary.index_rebuilt
    assert _index_files(store) == _index_files(clean)
    assert pool_starts == [2, 2]


def test_regression_a_block_of_documents_without_tokens_builds() -> None:
    # A closed block holding only empty documents (here: the last one) made lucene_scores fail with IndexError.
    with TermPostings(block_postings=1) as blocked, TermPostings() as whole:
        for tokens in (["a", "b", "a"], [], ["b"], []):
            blocked.add(tokens)
            whole.add(tokens)
        a, b = blocked.lucene_scores(k1=1.5, b=0.75), whole.lucene_scores(k1=1.5, b=0.75)
        for key in ("data", "indices", "indptr"):
            assert a[key].tobytes() == b[key].tobytes()


@needs_fork
def test_prefetched_batches_are_used_only_for_exactly_their_texts(small_batches: None, pool_starts: list[int]) -> None:
    texts = _texts(100, seed=3)
    tokenize = get_tokenizer("cjk")
    one = build_bm25_index(texts, tokenize, k1=1.5, b=0.75, workers=1)
    other = [*texts[:-1], texts[-1] + " changed"]
    with bm25_parallel.prefetched(bm25_parallel.CountedBatches(texts, "cjk", workers=2)):
        assert bm25_parallel.take_prefetched(other, "cjk") is None
        assert bm25_parallel.take_prefetched(texts, "auto") is None
        _assert_same_index(build_bm25_index(other, tokenize, k1=1.5, b=0.75, workers=1),
                           build_bm25_index(other, tokenize, k1=1.5, b=0.75, workers=1))
        two = build_bm25_index(texts, tokenize, k1=1.5, b=0.75, workers=1)  # takes the prefetched batches
        assert bm25_parallel.take_prefetched(texts, "cjk") is None  # once
    assert pool_starts == [2]
    _assert_same_index(one, two)


@needs_fork
@pytest.mark.parametrize("contextual", [False, True])
def test_ingest_prefetch_matches_the_store_with_headers_and_restricted_documents(
    tmp_path: Path, small_batches: None, pool_starts: list[int], contextual: bool
) -> None:
    corpus = _corpus(tmp_path / "corpus")
    (corpus / "zz-secret.md").write_text("---\nsensitivity: RESTRICTED\n---\n# Secret\n\n" + JA * 3 + "\n", "utf-8")
    (corpus / "A-first.md").write_text("# Upper case sorts first\n\n" + ZH + "\n", "utf-8")
    one, two = tmp_path / "one", tmp_path / "two"
    ingest(corpus, one, embedding="none", mode="bm25", workers=1, contextual=contextual, progress=False)
    ingest(corpus, two, embedding="none", mode="bm25", workers=2, contextual=contextual, progress=False)
    assert pool_starts == [2]  # the prefetched batches were used: no second pool for the build
    assert _index_files(two) == _index_files(one)
    assert b"Secret" not in _index_files(two)["bm25/docs.jsonl"]


@needs_fork
def test_a_failing_ingest_stops_the_prefetching_workers(
    tmp_path: Path, small_batches: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import langchain_ragspine.pipeline.ingest as ingest_module  # where ingest looks the stage up

    pools = []
    start = bm25_parallel._start_pool
    monkeypatch.setattr(bm25_parallel, "_start_pool", lambda *a: pools.append(start(*a)) or pools[-1])

    def fails(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise _Interrupted

    monkeypatch.setattr(ingest_module, "write_documents", fails)
    with pytest.raises(_Interrupted):
        ingest(_corpus(tmp_path / "corpus"), tmp_path / "store", embedding="none", mode="bm25", workers=2,
               progress=False)
    assert len(pools) == 1 and pools[0]._shutdown_thread  # the prefetch pool was shut down


def test_prefetch_outside_a_scope_is_refused() -> None:
    batches = bm25_parallel.CountedBatches(["東京"], "cjk", workers=1)
    with pytest.raises(RuntimeError, match="prefetch_scope"):
        bm25_parallel.prefetch(batches)


@needs_fork
@pytest.mark.parametrize("reverse", [False, True])
def test_ingest_tokenizes_while_chunking_in_the_stores_order(
    tmp_path: Path, small_batches: None, pool_starts: list[int], monkeypatch: pytest.MonkeyPatch, reverse: bool
) -> None:
    """A new store's chunks go to the tokenizing processes while ingest is still chunking, in the order the build
    reads them from the store (by ``doc_id``): the pool starts before the last document is chunked when the
    loader's order is that order, and only once the first one in that order is chunked when it is not (a JSONL
    file whose ids run backwards); the saved index is the one-process index either way."""
    from langchain_ragspine.pipeline import stages

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    rng = random.Random(7)
    rows = [{"id": f"d{i:03d}", "text": rng.choice([JA, ZH, EN]) * rng.randint(1, 3) + str(i)} for i in range(60)]
    (corpus / "docs.jsonl").write_text(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in (rows[::-1] if reverse else rows)), "utf-8")
    one = tmp_path / "one"
    ingest(corpus, one, embedding="none", mode="bm25", workers=1, progress=False)
    chunked: list[int] = []
    split = stages.split_document
    monkeypatch.setattr(stages, "split_document", lambda splitter, doc: (chunked.append(1), split(splitter, doc))[1])
    at_start: list[int] = []
    start = bm25_parallel._start_pool
    monkeypatch.setattr(bm25_parallel, "_start_pool", lambda *a: (at_start.append(len(chunked)), start(*a))[1])
    two = tmp_path / "two"
    ingest(corpus, two, embedding="none", mode="bm25", workers=2, progress=False)
    assert len(at_start) == 1 and len(chunked) == 60  # one pool: the build took the streamed batches
    assert (at_start[0] == 60) if reverse else (at_start[0] < 30)
    assert _index_files(two) == _index_files(one)


def test_growing_batches_are_the_batches_of_the_whole_list(small_batches: None) -> None:
    texts = _texts(100)
    growing = bm25_parallel.CountedBatches.growing("cjk", workers=1)
    for i in range(0, 100, 7):
        growing.extend(texts[i : i + 7])
    with pytest.raises(RuntimeError, match="finish"):
        iter(growing).__next__()
    growing.finish()
    assert bm25_parallel.take_prefetched(texts, "cjk") is None  # not registered
    got = list(growing)
    want = list(iter_counted(texts, "cjk", workers=1))
    assert len(got) == len(want) == 7  # batches of 16
    for a, b in zip(got, want, strict=True):
        assert a.term_list() == b.term_list() and np.array_equal(a.term_ids, b.term_ids)
    with pytest.raises(RuntimeError, match="extend"):
        growing.extend(["more"])
    with pytest.raises(ValueError, match="workers"):
        bm25_parallel.CountedBatches.growing("cjk", workers=-1)


_ORPHAN_SCRIPT = """
import sys, time
from langchain_ragspine.backends.directory import bm25_parallel
texts = ["東京都の天気は晴れ。" * 20 + str(i) for i in range(4000)]
batches = bm25_parallel.CountedBatches(texts, "cjk", workers=2, batch_texts=16, ahead=2)
time.sleep(1.0)  # the pool has started its workers; two batches are queued, the rest wait for this process
print(" ".join(str(p) for p in batches._pool._processes), flush=True)
time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
    except FileNotFoundError:
        return False


@pytest.mark.subprocess
@needs_fork
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc to see the workers")
def test_regression_workers_exit_when_the_ingest_process_is_killed(tmp_path: Path) -> None:
    """Killing the process that tokenizes (SIGKILL: no shutdown) left its worker processes alive for good, one
    blocked writing a result nobody reads; now each exits within a second or so."""
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "pool.py"
    script.write_text(_ORPHAN_SCRIPT, "utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(Path(__file__).parents[4]),
                                                                      os.environ.get("PYTHONPATH")])))
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=env)
    try:
        workers = [int(p) for p in proc.stdout.readline().split()]  # type: ignore[union-attr]
        assert len(workers) == 2 and all(_alive(p) for p in workers)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + 15
        while any(_alive(p) for p in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not any(_alive(p) for p in workers)
    finally:
        proc.kill()
        for pid in workers if "workers" in locals() else []:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
