"""Chinese in either script: BM25 with and without Traditional→Simplified folding of tokens (issue 9, section 4).

Quality (answer recall@1/@5 with :func:`langchain_ragspine.evaluation.evaluate`, ``BM25Retriever`` over
``ParagraphTextSplitter`` 480/80 chunks), each row with the folding tokenizer (``auto``: after) and its ``-nofold``
variant (``auto-nofold``: the tokens of before):

* CMRC 2018 dev (Simplified articles) with the original Simplified questions — the reference;
* the same questions converted to Traditional (OpenCC ``s2t``) against the Simplified articles;
* the questions converted with OpenCC ``s2twp`` (Taiwan standard *with Taiwan phrasing*, e.g. 数据库 → 資料庫):
  regional vocabulary, which a character fold does not change — shown to mark the limit of the technique;
* the reverse direction: the articles (and gold answers, so that the verbatim-answer test still applies) converted
  to Traditional, searched with the Simplified questions, next to the Traditional questions on those articles;
* JSQuAD valid (Japanese; kanji shared with Traditional Chinese fold too): original questions;
* with ``--alternatives``, the designs the default was chosen against: folding before MeCab, and OpenCC's
  phrase-level conversion instead of the per-character table.

Speed, in the same process and interleaved so that machine load hits both alike: tokenization throughput (chunks/s)
of each tokenizer and its ``-nofold`` variant over the same ~400-character chunks (CMRC Simplified, CMRC converted to
Traditional, JSQuAD; best of ``--rounds``), the per-query cost of the fold, and the one-time build of the fold table.

    python benchmarks/cross_script.py --alternatives        # all of the above (~40 min on 2 busy cores)
    python benchmarks/cross_script.py --no-quality          # the speed table only (~3 min)
    python benchmarks/cross_script.py --limit 300 --no-write  # a quick look
    python benchmarks/cross_script.py --tokenizers auto cjk fugashi   # quality of all three (~3x longer)

Tables go to ``benchmarks/RESULTS.md``, sections ``cross-script`` (quality; not with ``--limit``) and
``cross-script-speed``, unless ``--no-write``.  Needs ``../shared/data`` (or ``RAGSPINE_DATA``); exits with status 2
without it.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from collections.abc import Callable, Sequence

from _common import DATA, update_results_section
from langchain_core.documents import Document

from langchain_ragspine.evaluation import evaluate, load_dataset
from langchain_ragspine.evaluation.datasets import QADataset
from langchain_ragspine.retrievers import BM25Retriever
from langchain_ragspine.text import normalize
from langchain_ragspine.text.chinese import fold_table, fold_to_simplified
from langchain_ragspine.text_splitters import ParagraphTextSplitter
from langchain_ragspine.tokenizers import (
    Tokenizer,
    auto_nofold_tokenize,
    get_tokenizer,
)

KS = (1, 5)


def _converter(config: str) -> Callable[[str], str]:
    import opencc

    return opencc.OpenCC(config).convert


def _with_questions(ds: QADataset, convert: Callable[[str], str]) -> QADataset:
    questions = [dataclasses.replace(q, question=convert(q.question)) for q in ds.questions]
    return QADataset(ds.name, ds.docs, questions)


def _with_documents(ds: QADataset, convert: Callable[[str], str]) -> QADataset:
    """The articles converted; gold answers converted alike (answer recall tests a verbatim answer in the chunk)."""
    docs = [Document(page_content=convert(d.page_content), metadata=dict(d.metadata), id=d.id) for d in ds.docs]
    questions = [
        dataclasses.replace(q, answers=list(dict.fromkeys([convert(a) for a in q.answers] + q.answers)))
        for q in ds.questions
    ]
    return QADataset(ds.name, docs, questions)


def _recall(ds: QADataset, tokenizer: str | Tokenizer, limit: int | None) -> dict[str, float]:
    r = evaluate(
        lambda chunks: BM25Retriever.from_documents(chunks, tokenizer=tokenizer),
        ds,
        ks=KS,
        limit=limit,
        progress=False,
        name=str(tokenizer),
    )
    return {k: r.aggregate[f"answer_recall@{k}"] for k in (1, 5)} | {"n": r.config["n_questions"]}


def quality(tokenizers: Sequence[str], limit: int | None, alternatives: bool = False) -> str:
    cmrc = load_dataset(DATA / "cmrc2018-dev")
    jsquad = load_dataset(DATA / "jsquad-valid")
    assert isinstance(cmrc, QADataset) and isinstance(jsquad, QADataset)
    s2t, s2twp = _converter("s2t"), _converter("s2twp")
    trad_docs = _with_documents(cmrc, s2t)
    cases = [
        ("cmrc2018-dev", "Simplified", "Simplified (original)", cmrc),
        ("cmrc2018-dev", "Simplified", "Traditional (s2t)", _with_questions(cmrc, s2t)),
        ("cmrc2018-dev", "Simplified", "Traditional, Taiwan phrasing (s2twp)", _with_questions(cmrc, s2twp)),
        ("cmrc2018-dev", "Traditional (s2t)", "Simplified (original)", trad_docs),
        ("cmrc2018-dev", "Traditional (s2t)", "Traditional (s2t)", _with_questions(trad_docs, s2t)),
        ("jsquad-valid", "Japanese", "Japanese (original)", jsquad),
    ]
    rows = []
    for tok in tokenizers:
        for set_name, docs, questions, ds in cases:
            before = _recall(ds, f"{tok}-nofold", limit)
            after = _recall(ds, tok, limit)
            print(f"{tok:8s} {set_name} docs {docs:18s} questions {questions:38s} "
                  f"R@1 {before[1]:.4f} -> {after[1]:.4f}  R@5 {before[5]:.4f} -> {after[5]:.4f}", flush=True)
            rows.append(
                f"| {tok} | {set_name} | {docs} | {questions} | {before['n']} | {before[1]:.4f} | **{after[1]:.4f}** "
                f"| {before[5]:.4f} | **{after[5]:.4f}** |"
            )
    head = (
        "| tokenizer | set | articles | questions | n | R@1 before | R@1 after | R@5 before | R@5 after |\n"
        "|---|---|---|---|---:|---:|---:|---:|---:|\n"
    )
    out = head + "\n".join(rows) + "\n"
    if alternatives:
        out += "\n" + _alternatives([cases[i] for i in (0, 1, 3, 5)], limit)
    return out


def _alternatives(cases: Sequence[tuple[str, str, str, QADataset]], limit: int | None) -> str:
    """The designs the default was chosen against, as ``auto`` variants: where the fold happens (before or after
    MeCab) and how (per character, or OpenCC's phrase-level ``t2s`` conversion of the whole text)."""
    t2s = _converter("t2s")
    variants: list[tuple[str, str | Tokenizer]] = [
        ("no fold (`auto-nofold`)", "auto-nofold"),
        ("per character, MeCab sees the text as written (the default `auto`)", "auto"),
        ("per character, MeCab sees the folded text",
         lambda text: auto_nofold_tokenize(fold_to_simplified(normalize(text).lower()))),
        ("phrase-level OpenCC `t2s`, MeCab sees the converted text",
         lambda text: auto_nofold_tokenize(t2s(normalize(text).lower()))),
    ]
    head = "| auto variant | " + " | ".join(f"{s}: {d} articles, {q} questions" for s, d, q, _ in cases)
    head += " |\n|---|" + "---:|" * len(cases) + "\n"
    rows = []
    for label, tok in variants:
        cells = []
        for *_, ds in cases:
            r = _recall(ds, tok, limit)
            cells.append(f"{r[1]:.4f} / {r[5]:.4f}")
        print(f"{label:70s} " + "  ".join(cells), flush=True)
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    return "Alternatives (answer recall@1 / @5):\n\n" + head + "\n".join(rows) + "\n"


def _chunk_texts(ds: QADataset, n: int) -> list[str]:
    chunks = ParagraphTextSplitter().split_documents(ds.docs)
    texts = [c.page_content for c in chunks if len(c.page_content) >= 200]
    return texts[:n]


def _best_rate(fn: Callable[[str], object], texts: Sequence[str], rounds: int) -> float:
    """Texts per second of CPU time of this process (``time.process_time``: on a shared machine, time spent
    waiting for a core is not counted), best of ``rounds``."""
    best = float("inf")
    for _ in range(rounds):
        t0 = time.process_time()
        for t in texts:
            fn(t)
        best = min(best, time.process_time() - t0)
    return len(texts) / max(best, 1e-9)


def speed(tokenizers: Sequence[str], n_chunks: int, rounds: int) -> str:
    t0 = time.perf_counter()
    fold_table.cache_clear()
    fold_table()
    build_ms = (time.perf_counter() - t0) * 1000
    cmrc = load_dataset(DATA / "cmrc2018-dev")
    jsquad = load_dataset(DATA / "jsquad-valid")
    assert isinstance(cmrc, QADataset) and isinstance(jsquad, QADataset)
    s2t = _converter("s2t")
    zh = _chunk_texts(cmrc, n_chunks)
    corpora = {"Chinese, Simplified": zh, "Chinese, Traditional (s2t)": [s2t(t) for t in zh],
               "Japanese": _chunk_texts(jsquad, n_chunks)}
    rows = []
    for tok in tokenizers:
        fold, nofold = get_tokenizer(tok), get_tokenizer(f"{tok}-nofold")
        for label, texts in corpora.items():
            rates: dict[str, list[float]] = {"nofold": [], "fold": []}
            for _ in range(rounds):  # interleaved: each round times both, so load changes hit both alike
                rates["nofold"].append(_best_rate(nofold, texts, 1))
                rates["fold"].append(_best_rate(fold, texts, 1))
            before, after = max(rates["nofold"]), max(rates["fold"])
            mean_len = statistics.mean(len(t) for t in texts)
            print(f"{tok:8s} {label:28s} {len(texts)} chunks of {mean_len:.0f} chars: "
                  f"{before:.0f} -> {after:.0f} chunks/s ({after / before:.2f}x)", flush=True)
            rows.append(f"| {tok} | {label} | {len(texts)} × {mean_len:.0f} | {before:,.0f} | {after:,.0f} "
                        f"| {after / before:.2f} |")
    fold_rate = _best_rate(fold_to_simplified, corpora["Chinese, Traditional (s2t)"], rounds)
    questions = [s2t(q.question) for q in cmrc.questions[:1000]]
    q_rate = _best_rate(fold_to_simplified, questions, rounds)
    q_len = statistics.mean(len(q) for q in questions)
    table = (
        "| tokenizer | chunks | n × mean chars | chunks/s no fold | chunks/s fold | ratio |\n"
        "|---|---|---:|---:|---:|---:|\n" + "\n".join(rows) + "\n"
    )
    notes = (
        f"\nThe fold alone (`fold_to_simplified`): {fold_rate:,.0f} Traditional chunks/s "
        f"({1e6 / fold_rate:.1f} µs per chunk); {1e6 / q_rate:.2f} µs per query (1,000 Traditional CMRC questions, "
        f"{q_len:.0f} chars on average). Building the fold table from OpenCC's dictionary, once per process on first "
        f"use: {build_ms:.0f} ms.\n"
    )
    return table + notes


QUALITY_NOTE = (
    "Answer recall@k (a top-k chunk of the question's own article contains a gold answer verbatim, NFKC) of "
    "`BM25Retriever` over ParagraphTextSplitter 480/80 chunks. *Before*: the `-nofold` tokenizer (the tokens the "
    "package produced before folding); *after*: the default, which folds Traditional characters to Simplified in "
    "its tokens (OpenCC `t2s` character table). Conversions use OpenCC (`s2t`: OpenCC standard Traditional; "
    "`s2twp`: Taiwan standard with Taiwan phrasing). For Traditional articles the gold answers are converted the "
    "same way.\n"
)
SPEED_NOTE = (
    "Tokenization throughput over the same ~400-character chunks (ParagraphTextSplitter chunks of at least 200 "
    "characters) with and without the fold: chunks per second of process CPU time (`time.process_time`, so time "
    "spent waiting for a core on a shared machine does not count), best of the interleaved rounds, one process, "
    "one core.\n"
)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizers", nargs="+", default=["auto"], choices=["auto", "cjk", "fugashi"],
                    help="tokenizers of the quality table (auto)")
    ap.add_argument("--speed-tokenizers", nargs="+", default=["auto", "cjk", "fugashi"],
                    choices=["auto", "cjk", "fugashi"], help="tokenizers of the speed table (all three)")
    ap.add_argument("--limit", type=int, default=None, help="first N questions per set (default: all)")
    ap.add_argument("--chunks", type=int, default=1000, help="chunks per corpus for the speed table (1000)")
    ap.add_argument("--rounds", type=int, default=5, help="timing rounds; the best is reported (5)")
    ap.add_argument("--alternatives", action="store_true",
                    help="also evaluate the fold designs the default was chosen against (~10 min more)")
    ap.add_argument("--no-quality", action="store_true")
    ap.add_argument("--no-speed", action="store_true")
    ap.add_argument("--no-write", action="store_true", help="print only; leave RESULTS.md untouched")
    args = ap.parse_args()
    missing = [s for s in ("cmrc2018-dev", "jsquad-valid") if not (DATA / s / "questions.jsonl").exists()]
    if missing:
        print(f"benchmark data not found: {', '.join(str(DATA / s) for s in missing)} "
              "(expected ../shared/data beside the repo, or set RAGSPINE_DATA)", file=sys.stderr)
        return 2
    command = "python benchmarks/cross_script.py" + "".join(f" {a}" for a in sys.argv[1:])
    if not args.no_quality:
        body = QUALITY_NOTE + "\n" + quality(args.tokenizers, args.limit, args.alternatives)
        print(body)
        if not args.no_write and args.limit is None:
            update_results_section("cross-script", "Chinese in either script: Traditional↔Simplified folding",
                                   command, body)
    if not args.no_speed:
        body = SPEED_NOTE + "\n" + speed(args.speed_tokenizers, args.chunks, args.rounds)
        print(body)
        if not args.no_write:
            update_results_section("cross-script-speed", "Chinese in either script: cost of the fold",
                                   command, body)
    return 0


if __name__ == "__main__":
    sys.exit(main())
