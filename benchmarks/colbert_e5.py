"""Late interaction over e5's own token vectors: ColBERT MaxSim as an offline reranker of BM25's top 20.

For each set, the chunks (``ParagraphTextSplitter`` 480/80), BM25 ``auto``'s top 20 per question, then
:class:`~langchain_ragspine.document_compressors.colbert.ColBERTReranker` over multilingual-e5-small's final hidden
states (:meth:`~langchain_ragspine.embeddings.e5_onnx.OnnxE5Engine.token_states`, ONNX int8; e5 was never trained
for MaxSim — this measures whether its token vectors rerank well as they are).  Answer recall@1/@5 against BM25's
own order on the same questions, with paired bootstrap intervals and randomisation p-values
(:mod:`langchain_ragspine.evaluation.significance`); a reference row reranks the same top 20 by e5's pooled
cosine (the mean of the same token states, as ``encode`` pools them).

Token rows: ``all`` (every row: ``<s>``, the ``query: `` / ``passage: `` prefix, the text, ``</s>``) or
``content`` (the text's tokens only).  Which one to report is chosen on the training sets (``--tune``: jaquad-train,
cmrc2018-trial); the evaluation sets (jsquad-valid, cmrc2018-dev) only report.

    python benchmarks/colbert_e5.py --tune [--sample 200]           # choose the token rows on the training sets
    python benchmarks/colbert_e5.py --rows content [--sample 500]   # report on the evaluation sets -> RESULTS.md

``--sample N``: a seeded random subset (``random.Random(0)``) of N questions per set.  Token states of every
candidate chunk are computed once per run (e5 ONNX int8 on 2 shared cores: ~12 chunks/s).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import DATA, update_results_section  # noqa: E402
from langchain_core.documents import Document  # noqa: E402

from langchain_ragspine.document_compressors.colbert import ColBERTReranker, l2_normalize_rows  # noqa: E402
from langchain_ragspine.embeddings.e5_checkpoint import E5Checkpoint  # noqa: E402
from langchain_ragspine.embeddings.e5_onnx import PASSAGE_PREFIX, QUERY_PREFIX, OnnxE5Engine  # noqa: E402
from langchain_ragspine.embeddings.e5_tokenizer import E5Tokenizer  # noqa: E402
from langchain_ragspine.evaluation import load_dataset  # noqa: E402
from langchain_ragspine.evaluation.datasets import QADataset, QAQuestion  # noqa: E402
from langchain_ragspine.evaluation.metrics import first_answer_rank  # noqa: E402
from langchain_ragspine.evaluation.significance import (  # noqa: E402
    paired_bootstrap_interval,
    paired_randomization_test,
)
from langchain_ragspine.pipeline.modes import mode_factory  # noqa: E402
from langchain_ragspine.text_splitters import ParagraphTextSplitter  # noqa: E402

CANDIDATES = 20
KS = (1, 5)
EVAL_SETS = ("jsquad-valid", "cmrc2018-dev")
TUNE_SETS = ("jaquad-train", "cmrc2018-trial")
ROWS = ("all", "content")
LATENCY_QUESTIONS = 200


class E5TokenStates:
    """A :class:`~langchain_ragspine.document_compressors.colbert.TokenEncoder` over e5's token states, with every
    text's states kept (a benchmark reranks the same chunks for many questions)."""

    def __init__(self, engine: OnnxE5Engine, tokenizer: E5Tokenizer, rows: str) -> None:
        self.engine, self.tokenizer, self.rows = engine, tokenizer, rows
        self._cache: dict[tuple[bool, str], np.ndarray] = {}
        self._raw: dict[tuple[bool, str], np.ndarray] = {}

    def _content_rows(self, text: str, prefix: str) -> np.ndarray:
        """Boolean mask of the text's own tokens among the rows token_states gives (windows of 510 + <s>/</s>)."""
        ids = self.tokenizer.encode(prefix + text)
        n_prefix = len(self.tokenizer.encode(prefix.strip()))
        assert ids[:n_prefix] == self.tokenizer.encode(prefix.strip()), "the prefix tokenizes on its own"
        keep: list[bool] = []
        for a in range(0, max(len(ids), 1), 510):
            keep += [False, *(a + i >= n_prefix for i in range(len(ids[a : a + 510]))), False]
        return np.asarray(keep)

    def raw(self, texts: Sequence[str], is_query: bool) -> list[np.ndarray]:
        missing = [t for t in dict.fromkeys(texts) if (is_query, t) not in self._raw]
        if missing:
            for text, states in zip(missing, self.engine.token_states(missing, is_query=is_query), strict=True):
                self._raw[(is_query, text)] = states.astype(np.float32)
        return [self._raw[(is_query, t)] for t in texts]

    def _vectors(self, texts: Sequence[str], is_query: bool) -> list[np.ndarray]:
        out = []
        for text, states in zip(texts, self.raw(texts, is_query), strict=True):
            key = (is_query, text)
            if key not in self._cache:
                if self.rows == "content":
                    mask = self._content_rows(text, QUERY_PREFIX if is_query else PASSAGE_PREFIX)
                    assert mask.shape[0] == states.shape[0]
                    states = states[mask] if mask.any() else states
                self._cache[key] = l2_normalize_rows(states)
            out.append(self._cache[key])
        return out

    def query_vectors(self, texts: Sequence[str]) -> list[np.ndarray]:
        return self._vectors(texts, True)

    def document_vectors(self, texts: Sequence[str]) -> list[np.ndarray]:
        return self._vectors(texts, False)

    def pooled(self, text: str, is_query: bool) -> np.ndarray:
        (states,) = self.raw([text], is_query)
        mean = states.mean(axis=0)
        return mean / max(float(np.linalg.norm(mean)), 1e-6)


def rank(docs: Sequence[Document], q: QAQuestion) -> int | None:
    return first_answer_rank(docs, q.doc_id, q.answers)


def hits(ranks: Sequence[int | None], k: int) -> np.ndarray:
    return np.array([1.0 if r is not None and r <= k else 0.0 for r in ranks])


def load_set(name: str) -> QADataset:
    """The set; a training set's questions with an empty question or no answer (cmrc2018-trial has one) are left
    out, through a filtered copy of questions.jsonl beside links to the set's other files."""
    root = DATA / name
    if name in TUNE_SETS:
        import json
        import tempfile

        copy = Path(tempfile.mkdtemp(prefix=f"colbert-{name}-"))
        for entry in root.iterdir():
            if entry.name != "questions.jsonl":
                (copy / entry.name).symlink_to(entry)
        kept = [line for line in (root / "questions.jsonl").read_text("utf-8").splitlines()
                if line.strip() and str(json.loads(line).get("question", "")).strip()
                and any(str(a).strip() for a in json.loads(line).get("answers", []))]
        (copy / "questions.jsonl").write_text("\n".join(kept) + "\n", "utf-8")
        root = copy
    ds = load_dataset(root)
    assert isinstance(ds, QADataset)
    return ds


def run_set(name: str, encoders: dict[str, E5TokenStates], sample: int | None) -> dict[str, object]:
    ds = load_set(name)
    chunks = ParagraphTextSplitter().split_documents(ds.docs)
    questions = list(ds.questions)
    if sample is not None and sample < len(questions):
        questions = random.Random(0).sample(questions, sample)
    bm25 = mode_factory("bm25", k=CANDIDATES, tokenizer="auto")(chunks)
    cands = [bm25.invoke(q.question, k=CANDIDATES) for q in questions]
    distinct = list(dict.fromkeys(d.page_content for c in cands for d in c))
    first = next(iter(encoders.values()))
    t0 = time.perf_counter()
    first.raw(distinct, False)
    first.raw([q.question for q in questions], True)
    embed_s = time.perf_counter() - t0
    for enc in encoders.values():
        enc._raw = first._raw  # the same states, computed once
    print(f"{name}: {len(questions)} questions, {len(chunks)} chunks, {len(distinct)} distinct candidates, "
          f"token states in {embed_s:.0f} s", flush=True)
    ranks: dict[str, list[int | None]] = {"BM25 auto (top 20 order)": [rank(c, q) for q, c in zip(questions, cands,
                                                                                                      strict=True)]}
    latency: dict[str, float] = {}
    for rows, enc in encoders.items():
        reranker = ColBERTReranker(model=enc, k=None)
        ranks[f"+ ColBERT MaxSim, e5 token states ({rows})"] = [
            rank(reranker.compress_documents(c, q.question), q) for q, c in zip(questions, cands, strict=True)]
        timed = list(zip(questions, cands, strict=True))[:LATENCY_QUESTIONS]  # again, every state cached now
        t1 = time.perf_counter()
        for q, c in timed:
            reranker.compress_documents(c, q.question)
        latency[rows] = (time.perf_counter() - t1) * 1000 / max(len(timed), 1)
    pooled_ranks = []
    for q, c in zip(questions, cands, strict=True):
        qv = first.pooled(q.question, True)
        scores = [float(qv @ first.pooled(d.page_content, False)) for d in c]
        order = sorted(range(len(c)), key=lambda i: (-scores[i], i))
        pooled_ranks.append(rank([c[i] for i in order], q))
    ranks["+ e5 pooled cosine (reference)"] = pooled_ranks
    return {"name": name, "n": len(questions), "total": len(ds.questions), "chunks": len(chunks),
            "distinct": len(distinct), "embed_s": embed_s, "ranks": ranks, "latency": latency}


def table(result: dict[str, object]) -> list[str]:
    ranks: dict[str, list[int | None]] = result["ranks"]  # type: ignore[assignment]
    base_name = next(iter(ranks))
    base = np.stack([hits(ranks[base_name], k) for k in KS], axis=1)
    lines = ["| order of BM25's top 20 | ans R@1 | ans R@5 | Δ R@1 [95% CI] (p) | Δ R@5 [95% CI] (p) |",
             "|---|---:|---:|---:|---:|"]
    for label, r in ranks.items():
        other = np.stack([hits(r, k) for k in KS], axis=1)
        cells = [f"{other[:, j].mean():.4f}" for j in range(len(KS))]
        if label == base_name:
            lines.append(f"| {label} | {' | '.join(cells)} | - | - |")
            continue
        diff, lo, hi = paired_bootstrap_interval(base, other)
        p = paired_randomization_test(base, other)
        deltas = [f"{diff[j]:+.4f} [{lo[j]:+.4f}, {hi[j]:+.4f}] ({p[j]:.4f})" for j in range(len(KS))]
        lines.append(f"| {label} | {' | '.join(cells)} | {' | '.join(deltas)} |")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tune", action="store_true", help="the training sets, both row choices; writes nothing")
    ap.add_argument("--rows", choices=ROWS, nargs="+", default=list(ROWS))
    ap.add_argument("--sample", type=int, default=None, help="a seeded random subset of N questions per set")
    ap.add_argument("--sets", nargs="+", default=None)
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    sets = args.sets or (TUNE_SETS if args.tune else EVAL_SETS)
    checkpoint = E5Checkpoint()
    engine = OnnxE5Engine(checkpoint=checkpoint)
    tokenizer = E5Tokenizer(checkpoint.tokenizer)
    parts: list[str] = []
    for name in sets:
        encoders = {rows: E5TokenStates(engine, tokenizer, rows) for rows in args.rows}
        result = run_set(name, encoders, args.sample)
        sampled = (f"a seeded random sample (random.Random(0)) of {result['n']} of its {result['total']} questions"
                   if result["n"] < result["total"] else f"all {result['n']} questions")
        latency = ", ".join(f"{rows} {ms:.1f} ms" for rows, ms in result["latency"].items())  # type: ignore[attr-defined]
        lines = [f"**{name}**: {sampled}; {result['chunks']} chunks, {result['distinct']} distinct candidates, "
                 f"their token states in {result['embed_s']:.0f} s; MaxSim rerank of 20 per query (states cached, "
                 f"first {LATENCY_QUESTIONS} questions): "
                 f"{latency}", "", *table(result), ""]
        print("\n".join(lines), flush=True)
        parts += lines
    if args.tune or args.no_write or args.sets:
        return 0
    command = "python benchmarks/colbert_e5.py" + (f" --rows {' '.join(args.rows)}" if args.rows != list(ROWS) else "")
    command += f" --sample {args.sample}" if args.sample else ""
    body = "\n".join([
        "ColBERT MaxSim (Khattab & Zaharia 2020) over multilingual-e5-small's own final hidden states (ONNX int8, "
        "`OnnxE5Engine.token_states`; e5 is not a ColBERT model, nothing was trained) reranking BM25 `auto`'s top "
        "20 (ParagraphTextSplitter 480/80). Answer recall@k: a top-k chunk from the question's own article "
        "contains a gold answer verbatim (NFKC). Δ: reranked − BM25 on the same questions, paired bootstrap 95% "
        "interval (10,000 resamples, seed 0) and paired randomisation p-value "
        "(`langchain_ragspine.evaluation.significance`). Token rows: `all` = every row (`<s>`, the `query: ` / "
        "`passage: ` prefix, `</s>`), `content` = the text's own tokens. Reference: the same top 20 by e5's pooled "
        "cosine (mean of the same states).",
        "",
        *parts,
    ])
    update_results_section("colbert-e5", "ColBERT MaxSim over e5 token states as a reranker of BM25's top 20 "
                           "(issue 28)", command, body)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
