"""Chunking time and memory against paragraph length (issue 25 §5): one huge paragraph versus the same text in
normal paragraphs, for every chunker, with an older package beside this one (``--before``).

Inputs, each ``--sizes`` MB of UTF-8 (default 1 and 10), written to a temporary directory (deleted afterwards):

* ``ja`` — the paragraphs of the shared ``jsquad-valid`` articles (Japanese, sentence ends ``。``), cycled;
* ``zh`` — the paragraphs of the shared ``cmrc2018-dev`` articles (Chinese), cycled;
* ``latin`` — random lowercase words (1-10 letters, fixed seed) separated by single spaces: no sentence end, no
  clause mark, no line break;
* ``cjk-run`` — the ``cmrc2018-dev`` text with everything but CJK characters removed: no boundary at all but
  grapheme boundaries;
* ``letter-run`` — random lowercase letters (fixed seed) and nothing else: no break point at all (no line break, no
  sentence end, no space, and every position inside a "word").

Each input comes in two forms: ``one paragraph`` (the paragraphs joined with nothing, ``latin`` with a space: one
line, no blank line) and ``paragraphs`` (joined with a blank line; ``latin`` in 60-word paragraphs, ``cjk-run`` and
``letter-run`` in 400-character ones), the reference.  Every chunker of :data:`~langchain_ragspine.text_splitters.chunkers.CHUNKERS`
is built by ``make_chunker(name, chunk_size=480, chunk_overlap=80)`` as ``ragspine ingest`` builds it (``semantic``
with ``HashingEmbeddings()``, a lexical stand-in that costs no model), and
``split_documents([Document(text, metadata={"source": ...})])`` is timed, in its own subprocess per row (library
imported and the text read beforehand).  Peak memory: the growth of the process's peak RSS during that call
(``ru_maxrss`` after minus before, the high-water mark reset through ``/proc/self/clear_refs`` just before); the text
itself is read before and not counted.  Each row also hashes its chunks (ids, offsets, window / parent offsets,
headings), so before and after can be compared chunk for chunk.

``--before DIR`` runs the package found in ``DIR`` too (e.g. ``git archive 66aa609 langchain_ragspine | tar -x -C
/tmp/66aa609``; the folder's name labels the column), before and after interleaved row by row.  An older,
quadratic splitter can take hours on 10 MB: a run is killed after ``--timeout`` seconds (reported as ``> N s``),
and a larger size of the same row is then not run.  For the single-paragraph rows of ``--before`` the script also
times the smaller ``--scaling`` sizes (default 0.05, 0.1 and 0.2 MB) and, for a run that timed out or was not run,
extrapolates its time quadratically from the largest run that finished, ``t = t0 * (n / n0)^2`` (marked as
extrapolated; the old cutter rescans the rest of the paragraph for every piece, and the power fitted to the finished
runs is reported beside it);
a before run predicted to take more than ``--skip-factor`` (5) timeouts is not started; the chunkers of
``--always-run`` (``paragraph``) run every size anyway, so their rows show what a timeout measured.

    git archive 66aa609 langchain_ragspine | tar -x -C /tmp/66aa609
    python benchmarks/chunking_scale.py --before /tmp/66aa609          # 1 and 10 MB, all chunkers
    python benchmarks/chunking_scale.py --quick                         # 0.2 MB, paragraph only, no RESULTS.md

Writes the ``chunking-scale`` section of ``benchmarks/RESULTS.md`` (not with ``--quick`` unless ``--write``).
Exits with status 2 when ``../shared/data`` is missing.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import math
import os
import random
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import DATA, REPO, update_results_section  # noqa: E402
from speed import _maxrss_mb, _reset_peak_rss  # noqa: E402

KINDS = ("ja", "zh", "latin", "cjk-run", "letter-run")
FORMS = ("one paragraph", "paragraphs")
SPLITTERS = ("paragraph", "layout", "laws", "qa", "book", "parent_child", "sentence_window", "semantic")
SETS = {"ja": "jsquad-valid", "zh": "cmrc2018-dev", "cjk-run": "cmrc2018-dev"}
CHUNK_SIZE, CHUNK_OVERLAP = 480, 80
_CJK = re.compile(r"[\u3005\u3006\u3040-\u309f\u30a0-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


# -- inputs ----------------------------------------------------------------------------------------------------
def _article_paragraphs(set_name: str) -> list[str]:
    out: list[str] = []
    for path in sorted((DATA / set_name / "docs").glob("*.md")):
        raw = path.read_text("utf-8")
        body = raw.split("\n", 1)[1] if raw.startswith("# ") else raw
        out += [p.replace("\n", "") for p in (s.strip() for s in re.split(r"\n\s*\n", body)) if p]
    return out


def _pieces(kind: str, target: int, seed: int) -> list[str]:
    """Paragraphs of ``kind`` adding up to at least ``target`` UTF-8 bytes."""
    pieces: list[str] = []
    total = 0
    if kind == "latin":
        rng = random.Random(seed)
        letters = "abcdefghijklmnopqrstuvwxyz"
        while total < target:
            words = ["".join(rng.choice(letters) for _ in range(rng.randint(1, 10))) for _ in range(60)]
            pieces.append(" ".join(words))
            total += len(pieces[-1]) + 1
        return pieces
    if kind == "letter-run":
        rng = random.Random(seed)
        while total < target:
            pieces.append("".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(400)))
            total += 400
        return pieces
    source = _article_paragraphs(SETS[kind])
    if kind == "cjk-run":
        run = "".join(_CJK.findall("".join(source)))
        source = [run[i : i + 400] for i in range(0, len(run), 400)]
    i = 0
    while total < target:
        pieces.append(source[i % len(source)])
        total += len(pieces[-1].encode("utf-8"))
        i += 1
    return pieces


def make_text(kind: str, form: str, megabytes: float, seed: int = 0) -> str:
    """The input ``kind`` in ``form``, cut to ``megabytes`` MB of UTF-8 (at a character, then whitespace-trimmed)."""
    target = int(megabytes * 1_000_000)
    pieces = _pieces(kind, target, seed)
    joiner = "\n\n" if form == "paragraphs" else (" " if kind == "latin" else "")
    text = joiner.join(pieces)
    return text.encode("utf-8")[:target].decode("utf-8", errors="ignore").strip()


# -- worker (one row, in a subprocess) ---------------------------------------------------------------------------
def _digest(docs: list[Any]) -> str:
    keys = ("start_index", "end_index", "window_start_index", "window_end_index", "parent_start_index",
            "parent_end_index", "parent_id", "heading")
    h = hashlib.sha256()
    for d in docs:
        h.update(json.dumps([d.id, *(d.metadata.get(k) for k in keys)], ensure_ascii=False).encode("utf-8"))
    return h.hexdigest()[:16]


def worker(cfg: dict[str, Any]) -> dict[str, Any]:
    from langchain_core.documents import Document

    from langchain_ragspine.embeddings import HashingEmbeddings
    from langchain_ragspine.text_splitters.chunkers import make_chunker

    text = Path(cfg["text"]).read_text("utf-8")
    name = cfg["splitter"]
    splitter, _ = make_chunker(name, chunk_size=CHUNK_SIZE, chunk_overlap=CHUNK_OVERLAP,
                               embedding=HashingEmbeddings() if name == "semantic" else None)
    splitter.split_documents([Document(page_content="梅雨は六月に始まる。 Warm up.", metadata={"source": "w"})])
    doc = Document(page_content=text, metadata={"source": "scale.md"})
    gc.collect()
    reset = _reset_peak_rss()
    rss0 = _maxrss_mb()
    t0 = time.perf_counter()
    docs = splitter.split_documents([doc])
    seconds = time.perf_counter() - t0
    return {"seconds": seconds, "chunks": len(docs), "digest": _digest(docs), "rss_growth_mb": _maxrss_mb() - rss0,
            "rss_reset": reset, "package": str(Path(sys.modules["langchain_ragspine"].__file__).parent)}


def run_row(cfg: dict[str, Any], src: Path, timeout: float) -> dict[str, Any]:
    """Run :func:`worker` on ``cfg`` with the package in ``src``; ``{"timeout": seconds}`` when killed."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(REPO / "benchmarks")]),
           "RAGSPINE_EMBEDDING": "none"}
    env.pop("RAGSPINE_CHUNKER", None)
    try:
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--worker", json.dumps(cfg)],
                              capture_output=True, text=True, cwd=str(src), env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"timeout": timeout}
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"chunking_scale.py: worker {cfg} exited with status {proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# -- extrapolation ----------------------------------------------------------------------------------------------
def extrapolate(points: list[tuple[int, float]], n: int) -> float | None:
    """``t0 * (n / n0)^2`` from the largest ``(n0, t0)`` of ``points``, or ``None`` without points."""
    if not points:
        return None
    n0, t0 = max(points)
    return t0 * (n / n0) ** 2


def fit_power(points: list[tuple[int, float]]) -> tuple[float, float] | None:
    """Least-squares ``log t = log c + p log n`` over ``(n, t)`` points; ``(c, p)``, or ``None`` with < 2 points."""
    pts = [(math.log(n), math.log(t)) for n, t in points if n > 0 and t > 0]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    sxx = sum((x - mx) ** 2 for x, _ in pts)
    if sxx == 0:
        return None
    p = sum((x - mx) * (y - my) for x, y in pts) / sxx
    return math.exp(my - p * mx), p


# -- table -----------------------------------------------------------------------------------------------------
def _secs(r: dict[str, Any] | None, extrapolated: float | None = None) -> str:
    if r is None:
        return "—"
    if "timeout" in r or r.get("skipped"):
        head = f"> {r['timeout']:.0f} s (timed out)" if "timeout" in r else f"not run: {r['skipped']}"
        return head + (f"; ≈ {extrapolated:,.0f} s extrapolated" if extrapolated is not None else "")
    return f"{r['seconds']:.3f}" if r["seconds"] < 1 else f"{r['seconds']:.2f}"


def _ratio(x: float) -> str:
    return f"{x:,.1f}x" if x < 10 else f"{x:,.0f}x"


def _mb(r: dict[str, Any] | None) -> str:
    return f"{r['rss_growth_mb']:,.1f}" if r is not None and "seconds" in r else "—"


def table(rows: list[dict[str, Any]], has_before: bool) -> str:
    if has_before:
        head = ("| input | MB | chars | chunker | chunks | one paragraph: before s | after s | speed-up | "
                "before peak MB | after peak MB | paragraphs: before s | after s | identical |\n"
                "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
    else:
        head = ("| input | MB | chars | chunker | chunks | one paragraph s | peak MB | paragraphs s | peak MB |\n"
                "|---|---:|---:|---|---:|---:|---:|---:|---:|\n")
    out = []
    for row in rows:
        one, par = row["one paragraph"], row["paragraphs"]
        a1, a2 = one.get("after"), par.get("after")
        chunks = f"{a1['chunks']:,}" if a1 and "chunks" in a1 else "—"
        lead = f"| {row['kind']} | {row['mb']:g} | {row['chars']:,} | {row['splitter']} | {chunks} | "
        if not has_before:
            out.append(lead + f"{_secs(a1)} | {_mb(a1)} | {_secs(a2)} | {_mb(a2)} |\n")
            continue
        b1, b2 = one.get("before"), par.get("before")
        speed = "—"
        if b1 and a1 and "seconds" in a1:
            if "seconds" in b1:
                speed = _ratio(b1["seconds"] / a1["seconds"])
            elif "timeout" in b1:
                speed = "> " + _ratio(b1["timeout"] / a1["seconds"])
        same = []
        for b, a in ((b1, a1), (b2, a2)):
            if b and a and "digest" in b and "digest" in a:
                same.append("yes" if b["digest"] == a["digest"] else "**NO**")
        out.append(lead + f"{_secs(b1, row.get('extrapolated'))} | {_secs(a1)} | {speed} | {_mb(b1)} | {_mb(a1)} | "
                   f"{_secs(b2)} | {_secs(a2)} | {' / '.join(same) or '—'} |\n")
    return head + "".join(out)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default=None, help="comma-separated MB of UTF-8 (default 1,10; 0.2 with --quick)")
    p.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated, of {', '.join(KINDS)}")
    p.add_argument("--splitters", default=None, help="comma-separated chunker names (default: all)")
    p.add_argument("--before", type=Path, default=None, help="a folder holding an older langchain_ragspine")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds before a run is killed (default 120)")
    p.add_argument("--scaling", default="0.05,0.1,0.2",
                   help="smaller MB sizes timed on the --before side to extrapolate what timed out ('' for none)")
    p.add_argument("--skip-factor", type=float, default=5.0,
                   help="on the --before side, do not start a single-paragraph run (of a chunker not in --always-run) "
                        "whose extrapolated time exceeds this many timeouts (default 5)")
    p.add_argument("--always-run", default="paragraph", help="chunkers whose before runs are never skipped")
    p.add_argument("--quick", action="store_true", help="smoke run: 0.2 MB, paragraph only, RESULTS.md untouched")
    p.add_argument("--write", action="store_true", help="write RESULTS.md even with --quick")
    p.add_argument("--json", type=Path, default=None, help="also write the raw results to this JSON file")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    missing = [s for s in set(SETS.values()) if not (DATA / s / "docs").is_dir()]
    if missing:
        print(f"chunking_scale.py: shared evaluation data not found: {', '.join(str(DATA / s) for s in missing)} "
              "(expected ../shared/data beside the repository, or set RAGSPINE_DATA)", file=sys.stderr)
        return 2
    sizes = [float(s) for s in (args.sizes or ("0.2" if args.quick else "1,10")).split(",")]
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    splitters = [s.strip() for s in (args.splitters or ("paragraph" if args.quick else ",".join(SPLITTERS))).split(",")]
    scaling = [float(s) for s in args.scaling.split(",") if s.strip()] if args.before is not None else []
    always = {a.strip() for a in args.always_run.split(",")}
    sides: list[tuple[str, Path]] = ([("before", args.before.resolve())] if args.before is not None else [])
    sides.append(("after", REPO))
    load_start = os.getloadavg()
    rows: list[dict[str, Any]] = []
    scaling_runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="ragspine-chunking-scale-") as tmp:
        files: dict[tuple[str, str, float], tuple[Path, int]] = {}

        def text_file(kind: str, form: str, mb: float) -> tuple[Path, int]:
            if (kind, form, mb) not in files:
                text = make_text(kind, form, mb)
                path = Path(tmp) / f"{kind}-{form.replace(' ', '-')}-{mb:g}.md"
                path.write_text(text, "utf-8")
                files[kind, form, mb] = (path, len(text))
            return files[kind, form, mb]

        def run(side: str, src: Path, kind: str, form: str, mb: float, name: str) -> dict[str, Any]:
            path, chars = text_file(kind, form, mb)
            cfg = {"text": str(path), "splitter": name}
            r = run_row(cfg, src, args.timeout)
            r.update(side=side, kind=kind, form=form, mb=mb, chars=chars, splitter=name)
            shown = f"{r['seconds']:.2f} s, {r['chunks']} chunks" if "seconds" in r else f"> {args.timeout:.0f} s"
            print(f"{side:6s} {kind:8s} {mb:5g} MB {form:13s} {name:15s} {shown}", file=sys.stderr, flush=True)
            return r

        for kind in kinds:
            for name in splitters:
                points: list[tuple[int, float]] = []
                if scaling:
                    for mb in scaling:
                        r = run("before", sides[0][1], kind, "one paragraph", mb, name)
                        scaling_runs.append(r)
                        if "seconds" in r:
                            points.append((r["chars"], r["seconds"]))
                timed_out: dict[tuple[str, str], float] = {}
                for mb in sizes:
                    row: dict[str, Any] = {"kind": kind, "mb": mb, "splitter": name,
                                           "chars": text_file(kind, "one paragraph", mb)[1]}
                    for form in FORMS:
                        row[form] = {}
                        for side, src in sides:
                            if (side, form) in timed_out and not (side == "before" and name in always):
                                row[form][side] = {"skipped": f"{timed_out[side, form]:g} MB timed out"}
                                continue
                            guess = extrapolate(points, row["chars"])
                            if (side == "before" and form == "one paragraph" and name not in always and guess
                                    and guess > args.skip_factor * args.timeout):
                                row[form][side] = {"skipped": f"> {args.skip_factor:g}x the timeout predicted"}
                                continue
                            r = run(side, src, kind, form, mb, name)
                            row[form][side] = r
                            if "timeout" in r:
                                timed_out[side, form] = mb
                            elif side == "before" and form == "one paragraph":
                                points.append((r["chars"], r["seconds"]))
                    fit = fit_power(points)
                    if fit is not None:
                        row["power"] = fit[1]
                    before = row["one paragraph"].get("before")
                    guess = extrapolate(points, row["chars"])
                    if before is not None and "seconds" not in before and guess and guess > args.timeout:
                        row["extrapolated"] = guess  # (one below a timeout that was measured says nothing)
                    rows.append(row)
    load_end = os.getloadavg()
    if args.json is not None:
        args.json.write_text(json.dumps({"rows": rows, "scaling": scaling_runs, "load": [load_start, load_end]},
                                        indent=1, ensure_ascii=False), "utf-8")
    has_before = args.before is not None
    body = table(rows, has_before) + "\n"
    if scaling_runs:
        body += ("\nBefore, single paragraph, the smaller sizes (s), and the power `p` of `t = c * n^p` fitted to "
                 "all the before runs of the row that finished:\n\n")
        body += "| input | chunker | " + " | ".join(f"{mb:g} MB" for mb in scaling) + " | fitted power p |\n"
        body += "|---|---|" + "---:|" * (len(scaling) + 1) + "\n"
        for kind in kinds:
            for name in splitters:
                runs = {r["mb"]: r for r in scaling_runs if r["kind"] == kind and r["splitter"] == name}
                powers = [r["power"] for r in rows if r["kind"] == kind and r["splitter"] == name and "power" in r]
                fitted = f"{powers[-1]:.2f}" if powers else "—"
                body += f"| {kind} | {name} | " + " | ".join(_secs(runs.get(mb)) for mb in scaling) + f" | {fitted} |\n"
    load = (f"{' / '.join(f'{x:.1f}' for x in load_start)} at the start, "
            f"{' / '.join(f'{x:.1f}' for x in load_end)} at the end (1 / 5 / 15-min load averages, "
            f"{os.cpu_count()} cores)")
    body += (
        "\nEach row: `make_chunker(NAME, chunk_size=480, chunk_overlap=80)` (`semantic` with `HashingEmbeddings()`), "
        "`split_documents([Document(text)])` timed in its own subprocess (library imported, text read beforehand). "
        "Inputs: `ja` = `jsquad-valid` paragraphs, `zh` = `cmrc2018-dev` paragraphs (cycled), `latin` = random "
        "lowercase words with single spaces (no sentence end, no clause mark, no line break), `cjk-run` = the "
        "`cmrc2018-dev` text reduced to its CJK characters (no boundary but grapheme boundaries), `letter-run` = "
        "random lowercase letters only (no break point at all: every position is inside a word); MB = UTF-8 "
        "megabytes, chars = characters of the single-paragraph text. *One paragraph*: the paragraphs joined "
        "with nothing (`latin`: a space), one line; *paragraphs*: joined with a blank line (`latin` 60 words, "
        "`cjk-run` and `letter-run` 400 characters each), the reference. Chunks: of the single paragraph, this "
        "commit. Peak MB: "
        "growth of the peak RSS during the call (`ru_maxrss`, reset via `/proc/self/clear_refs` before it). "
        "Identical: the chunks (ids, offsets, window / parent offsets, headings) hash the same before and after, "
        "single paragraph / paragraphs. A run is killed after "
        f"{args.timeout:.0f} s. Before, for the other chunkers than {', '.join(sorted(always))}, a larger size of a "
        f"row that timed out is not run, nor a single-paragraph run predicted to take more than "
        f"{args.skip_factor:g} timeouts. What timed out or was not run is extrapolated quadratically from the "
        "largest single-paragraph run of the row that finished (the smaller sizes below, or 1 MB): "
        "`t = t0 * (n / n0)^2`, an estimate, not a measurement — the old cutter rescans the rest of the "
        "paragraph for every piece, and the fitted powers below are 1.7-2.2.\n\n"
        f"Load average: {load}.\n"
    )
    if has_before:
        body += f"\n`before` = the package exported from commit `{args.before.name}` into `--before`.\n"
    print(body)
    if not args.quick or args.write:
        cmd = shlex.join(["python", "benchmarks/chunking_scale.py", *(sys.argv[1:] if argv is None else argv)])
        update_results_section("chunking-scale", "Chunking time against paragraph length (one huge paragraph)",
                               cmd, body)
        print(f"written to {REPO / 'benchmarks' / 'RESULTS.md'} (section 'chunking-scale')", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
