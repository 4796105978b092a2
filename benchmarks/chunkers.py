"""Chunkers compared on the shared sets: answer recall@1/@5 per ``--chunker``, with index size and latency.

For each set in ``../shared/data`` (JSQuAD valid, Japanese; CMRC 2018 dev, Chinese) and each chunker name of
:data:`~langchain_ragspine.text_splitters.chunkers.CHUNKERS`, the set's ``docs/`` folder is ingested into a fresh
store exactly as ``ragspine ingest DOCS --store S --chunker NAME --mode bm25`` does (480/80 characters, BM25 with the
``auto`` tokenizer, no vector index), the store is opened as ``ragspine search`` opens it (``--mode bm25``; for
``parent_child``, ``--mode parent_child``: BM25 over the children, 50 children per query, the distinct parents read
from the chunk store), and every question is run through
:func:`langchain_ragspine.evaluation.evaluate`.

Answer recall@k: one of the top-k *returned units* — chunks, or for ``parent_child`` the returned parents — comes
from the question's own article and contains a gold answer verbatim (NFKC).  Larger units contain answers more
often, so the table also gives the mean length of a returned unit: compare recall at equal reading cost, not only
per rank.  ``sentence_window`` is scored on its sentence (``page_content``), not on ``window_text``.

The ``semantic`` chunker cuts where adjacent-sentence embeddings diverge, so it needs an embedding model; it
gets one row per ``--semantic-embedding``: ``hashing`` (the default) is the deterministic hashing embeddings — a
lexical-overlap signal, *not* a semantic model; ``e5`` is multilingual-e5-small (the package's ONNX Runtime int8
engine), which embeds every sentence of a set with its neighbours at ingest (~14k short texts for both sets: many
minutes on 2 shared cores); ``skip`` leaves the row out.

    python benchmarks/chunkers.py [--sets jsquad-valid cmrc2018-dev] [--limit N] [--only NAME ...]
                                  [--semantic-embedding {hashing,e5,skip} ...]

The table goes to ``benchmarks/RESULTS.md`` (section ``chunkers``) unless ``--limit`` or ``--only`` is given.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

from _common import DATA, data_missing, update_results_section

from langchain_ragspine.backends.directory.chunk_store import ChunkStore
from langchain_ragspine.backends.directory.layout import CHUNKS_DB
from langchain_ragspine.evaluation import EvalResult, evaluate, load_dataset
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.sources import open_retriever
from langchain_ragspine.text_splitters.chunkers import CHUNKERS

KS = (1, 5, 10)
CHUNK_SIZE, CHUNK_OVERLAP = 480, 80
#: Extra rows beside the defaults: ``(label, chunker, chunk_size, chunk_overlap)``.  Parent-child with 120/20
#: children has parents of 480 characters (``4 * chunk_size``): returned units as long as paragraph's chunks.
VARIANTS = (("parent_child 120/20", "parent_child", 120, 20),)


def rows_to_run(only: list[str] | None, semantic: list[str]) -> list[tuple[str, str, int, int, str | None]]:
    """``(label, chunker, chunk_size, chunk_overlap, embedding spec)`` of every row, defaults first; one
    ``semantic`` row per embedding in ``semantic`` (none for ``skip``)."""
    rows: list[tuple[str, str, int, int, str | None]] = []
    for n in CHUNKERS:
        if n != "semantic":
            rows.append((n, n, CHUNK_SIZE, CHUNK_OVERLAP, None))
        else:
            rows += [(f"semantic ({e} embeddings)", n, CHUNK_SIZE, CHUNK_OVERLAP, e) for e in semantic if e != "skip"]
    rows += [(label, n, size, overlap, None) for label, n, size, overlap in VARIANTS]
    return [r for r in rows if only is None or r[1] in only]


def _bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def run_one(
    docs: Path, dataset: object, label: str, name: str, size: int, overlap: int, work: Path, *,
    embedding: str | None, limit: int | None,
) -> dict:
    """Ingest ``docs`` with chunker ``name`` (``size``/``overlap``) into a fresh store under ``work``, evaluate it,
    return one table row's numbers."""
    store = work / "".join(ch if ch.isalnum() else "_" for ch in label)
    t0 = time.perf_counter()
    ingest(
        docs, store, chunker=name, chunk_size=size, chunk_overlap=overlap, tokenizer="auto",
        mode="bm25", embedding=embedding, progress=False,
    )
    ingest_s = time.perf_counter() - t0
    with ChunkStore(store / CHUNKS_DB, read_only=True) as chunks:
        lengths = [len(c.text) for c in chunks.iter_chunks()]
        parents = [len(p.text) for p in chunks.iter_parents()]
    pc = name == "parent_child"
    retriever = open_retriever(store, mode="parent_child" if pc else "bm25", k=max(KS))
    result: EvalResult = evaluate(retriever, dataset, ks=KS, limit=limit, name=label)  # type: ignore[arg-type]
    returned = parents if pc else lengths
    return {
        "label": label,
        "name": name,
        "result": result,
        "chunks": len(lengths),
        "parents": len(parents),
        "indexed_chars": sum(lengths) + sum(parents),
        "unit_chars": sum(returned) / max(1, len(returned)),
        "store_mb": _bytes(store) / 1e6,
        "ingest_s": ingest_s,
    }


def table(rows: list[dict], source_chars: int) -> str:
    head = (
        "| chunker | ans R@1 | ans R@5 | ans R@10 | returned unit | mean unit chars | index entries | "
        "stored chars / source | store MB | ingest s | p50 ms | p95 ms |\n"
        "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|\n"
    )
    out = []
    for row in rows:
        r: EvalResult = row["result"]
        agg = r.aggregate
        unit = f"parent ({row['parents']:,} parents)" if row["name"] == "parent_child" else "chunk"
        label = row["label"]
        out.append(
            f"| {label} | {agg['answer_recall@1']:.4f} | {agg['answer_recall@5']:.4f} | "
            f"{agg['answer_recall@10']:.4f} | {unit} | {row['unit_chars']:.0f} | {row['chunks']:,} | "
            f"{row['indexed_chars'] / source_chars:.2f} | {row['store_mb']:.2f} | {row['ingest_s']:.1f} | "
            f"{r.latency_ms['p50']:.2f} | {r.latency_ms['p95']:.2f} |\n"
        )
    return head + "".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", nargs="+", default=["jsquad-valid", "cmrc2018-dev"])
    ap.add_argument("--limit", type=int, default=None, help="first N questions per set (default: all)")
    ap.add_argument("--only", nargs="+", default=None, choices=CHUNKERS, metavar="NAME", help="these chunkers only")
    ap.add_argument("--semantic-embedding", nargs="+", default=["hashing"], choices=["hashing", "e5", "skip"],
                    help="the semantic chunker's model(s), one row each (default hashing)")
    args = ap.parse_args()
    if data_missing(args.sets):
        return 2
    plan = rows_to_run(args.only, args.semantic_embedding)
    os.environ["RAGSPINE_EMBEDDING"] = "none"  # no vector index anywhere; semantic gets its model explicitly
    os.environ.pop("RAGSPINE_CHUNKER", None)
    sections = []
    with tempfile.TemporaryDirectory(prefix="ragspine-chunkers-") as tmp:
        for set_name in args.sets:
            dataset = load_dataset(DATA / set_name)
            source_chars = sum(len(d.page_content) for d in dataset.docs)
            rows = []
            for label, name, size, overlap, embedding in plan:
                row = run_one(DATA / set_name / "docs", dataset, label, name, size, overlap, Path(tmp) / set_name,
                              embedding=embedding, limit=args.limit)
                rows.append(row)
                agg = row["result"].aggregate
                print(f"{set_name:13s} {label:20s} ans R@1 {agg['answer_recall@1']:.4f} R@5 "
                      f"{agg['answer_recall@5']:.4f} units {row['chunks']} ingest {row['ingest_s']:.1f}s",
                      flush=True)
            n = rows[0]["result"].config["n_questions"] if rows else 0
            sections.append(f"### {set_name} ({n} questions, {source_chars:,} source chars)\n\n"
                            f"{table(rows, source_chars)}\n")
    body = "\n".join(sections)
    print(body)
    if args.limit is None and args.only is None:
        note = (
            "Each row: `ragspine ingest DOCS --chunker NAME --mode bm25` (480/80 unless the row says otherwise, BM25 "
            "tokenizer auto, no vector index), searched as `ragspine search --mode bm25` (`--mode parent_child` for parent_child: 50 BM25 "
            "children per query, distinct parents from the chunk store). Answer recall@k counts the returned units: "
            "chunks, or for parent_child the parents. Index entries: chunks in the BM25 index (children for "
            "parent_child). Stored chars / source: characters of all stored chunks (and parents) over the source "
            "characters (overlap and parents make it exceed 1). Store MB: the store directory (chunk store + BM25 "
            "arrays). Ingest s: load + chunk + store + BM25 index. p50/p95: `invoke` latency per question.\n\n"
        )
        if any(r[4] == "hashing" for r in plan):
            note += (
                "**`semantic (hashing embeddings)` is not a semantic model**: hashing embeddings make its cuts follow "
                "lexical overlap between adjacent sentences; it shows the chunker's mechanics at no embedding cost. "
                "`semantic (e5 embeddings)` is multilingual-e5-small (ONNX Runtime int8); its ingest time is "
                "mostly embedding every sentence with its neighbours.\n\n"
            )
        command = "python benchmarks/chunkers.py" + "".join(f" {a}" for a in sys.argv[1:])
        update_results_section("chunkers", "Chunkers on the shared sets (BM25 auto)", command, note + body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
