"""Where the CPU of a BM25 build goes: each step of the ``auto`` and ``cjk`` tokenizers and of the postings count.

``benchmarks/ingest_speed.py`` times BM25-only ingest end to end; on 2 cores its tokenizing processes are the
critical path.  This script splits their work into steps and times each over the same texts in one process (CPU
seconds, ``time.process_time``), so the floor of an ingest is known:

* normalize — NFKC + lower-casing (``normalize(text).lower()``), every tokenizer's first step;
* fold — Traditional→Simplified folding of the normalised text (``fold_to_simplified``);
* grams — the ``cjk`` words and CJK unigrams + bigrams of the folded text (what ``cjk`` returns after fold);
* MeCab — ``mecab_surfaces`` of the normalised text, for texts holding a CJK character (what ``auto`` adds);
* tokenizer — the whole tokenizer (``auto_tokenize`` / ``cjk_tokenize``), all steps above plus filtering;
* token count — the tokenizer plus reducing its tokens to postings one dictionary look-up per token, per batch of
  2,048 texts (``bm25_parallel._count_tokens``, what a tokenizing process ran before the numpy count);
  count = token count - tokenizer;
* count_batch — what a tokenizing process runs per batch of 2,048 texts now (``bm25_parallel.count_batch``): for
  ``cjk`` / ``auto`` the numpy count of ``backends/directory/_gram_count.py``, the same postings without a string per n-gram.

Texts: the synthetic chunks of ``benchmarks/speed.py`` (real ``jsquad-valid`` / ``cmrc2018-dev`` sentences
recombined into 300-480-character paragraphs, Japanese and Chinese alternating, fixed seed), the corpus
``ingest_speed.py`` writes to files.  The data is read from ``../shared/data`` (or ``RAGSPINE_DATA``); without it
the script says so and exits with status 2.

    python benchmarks/tokenize_cpu.py            # 100k texts, writes the tokenize-cpu section of RESULTS.md
    python benchmarks/tokenize_cpu.py --quick    # 8k texts, RESULTS.md untouched
"""

from __future__ import annotations

import argparse
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from _common import DATA, REPO, update_results_section  # noqa: E402

BATCH = 2048


def _cpu(fn: Callable[[Any], Any], items: list[Any]) -> float:
    """CPU seconds of ``fn`` over each item; results are dropped at once, as a tokenizing process drops its
    token lists (keeping 100k token lists would make the garbage collector the cost being measured)."""
    t0 = time.process_time()
    for item in items:
        fn(item)
    return time.process_time() - t0


def measure(texts: list[str]) -> list[tuple[str, float]]:
    """``(step, CPU seconds)`` over ``texts``, in the order of the module docstring."""
    from langchain_ragspine import tokenizers as T
    from langchain_ragspine.backends.directory.bm25_parallel import _count_tokens, count_batch

    T.auto_tokenize("東京都の天気と北京的天气 warm-up")  # tagger and fold table loaded outside the timing
    norm = [T.normalize(t).lower() for t in texts]
    folded = [T.fold_to_simplified(t) for t in norm]
    cjk_norm = [t for t in norm if T.CJK_CHAR_RE.search(t)]
    rows = [
        ("normalize", _cpu(lambda t: T.normalize(t).lower(), texts)),
        ("fold", _cpu(T.fold_to_simplified, norm)),
        ("grams", _cpu(T._gram_tokens, folded)),
        ("MeCab", _cpu(T.mecab_surfaces, cjk_norm)),
    ]
    starts = list(range(0, len(texts), BATCH))
    for name, tokenize in (("cjk", T.cjk_tokenize), ("auto", T.auto_tokenize)):
        tok = _cpu(tokenize, texts)
        tokens = _cpu(lambda i, fn=tokenize: _count_tokens(fn, texts[i : i + BATCH]), starts)
        batches = _cpu(lambda i, name=name: count_batch(name, texts[i : i + BATCH]), starts)
        rows += [(f"{name}: tokenizer", tok), (f"{name}: token count", tokens), (f"{name}: count", tokens - tok),
                 (f"{name}: count_batch (numpy)", batches)]
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--size", default=None, help="texts (default 100k, 8k with --quick)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quick", action="store_true", help="8k texts, RESULTS.md untouched")
    args = p.parse_args(argv)
    import speed

    missing = [s for s in speed.SETS if not (DATA / s / "docs").is_dir()]
    if missing:
        print(f"tokenize_cpu.py: shared evaluation data not found: {', '.join(str(DATA / s) for s in missing)}\n"
              "Expected ../shared/data next to the repository (see ../shared/data/README.md), "
              "or set RAGSPINE_DATA to its location.", file=sys.stderr)
        return 2
    size = speed.parse_size(args.size or ("8k" if args.quick else "100k"))
    texts = [d.page_content for d in speed.make_corpus(size, args.seed)]
    chars = sum(map(len, texts))
    rows = measure(texts)
    lines = ["| step | CPU s | µs per text | share of `auto: token count` |", "|---|---:|---:|---:|"]
    total = dict(rows)["auto: token count"]
    for name, sec in rows:
        lines.append(f"| {name} | {sec:.1f} | {sec / len(texts) * 1e6:.0f} | {sec / total:.0%} |")
    body = "\n".join(lines) + "\n\n" + (
        f"{len(texts):,} synthetic texts ({chars:,} characters, seed {args.seed}), one process, CPU seconds "
        f"(`time.process_time`); token count and count_batch in batches of {BATCH:,} texts as the tokenizing "
        "processes run them. "
        "MeCab runs on the texts holding a CJK character (all of them here).\n"
    )
    print(body)
    if not args.quick:
        cmd = shlex.join(["python", "benchmarks/tokenize_cpu.py", *(sys.argv[1:] if argv is None else argv)])
        update_results_section("tokenize-cpu", "Where the CPU of a BM25 build goes (tokenizer steps and count)",
                               cmd, body)
        print(f"written to {REPO / 'benchmarks' / 'RESULTS.md'} (section 'tokenize-cpu')", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
