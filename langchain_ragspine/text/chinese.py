"""Traditional→Simplified Chinese folding, one character at a time (OpenCC's ``t2s`` character table).

A comparison form like those of :mod:`langchain_ragspine.text.folding`, for tokens only, never for stored text.
The tokenizers that fold (:mod:`langchain_ragspine.tokenizers`: ``"auto"``, ``"cjk"``, ``"fugashi"``) use
:func:`fold_to_simplified` and :func:`fold_tokens`; the numpy postings counter uses :func:`fold_table` itself.
:data:`FOLD_VERSION` is part of every folding tokenizer's version, so a saved index built with another fold is
detected as stale.  Why this fold (per character, Traditional→Simplified, all text) is said in the tokenizers'
module docstring and measured in ``benchmarks/RESULTS.md``, sections ``cross-script`` and ``cross-script-speed``.

OpenCC is imported lazily, on the first call that needs the table.
"""

from __future__ import annotations

import functools
import unicodedata

import numpy as np

from langchain_ragspine.text import CJK_CHAR_RE

__all__ = ["FOLD_VERSION", "fold_table", "fold_to_simplified", "fold_tokens"]

#: The version of the fold itself; part of :func:`~langchain_ragspine.tokenizers.tokenizer_version` of every
#: folding tokenizer.
FOLD_VERSION = "t2s-char/1"
# Code points whose OpenCC conversion is read: the CJK ideograph blocks of ``CJK_CHAR_CLASS``.
_IDEOGRAPH_RANGES = ((0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0x20000, 0x2FA1F))


@functools.cache
def fold_table() -> np.ndarray:
    """The Traditional→Simplified character fold as a lookup table: ``uint32`` array over code points
    U+0000–U+2FFFF (planes 0–2, which hold every ideograph block), ``table[c]`` = folded code point (identity where
    nothing folds).  Built once per process (~0.1 s, 768 KiB) from OpenCC's own ``t2s`` dictionaries; the same
    array on every call (``fold_table.cache_clear()`` builds it again).  Do not modify it.

    >>> chr(fold_table()[ord("關")]), chr(fold_table()[ord("a")])
    ('关', 'a')

    Raises:
        ImportError: OpenCC is not installed (a core dependency).
    """
    try:
        import opencc
    except ImportError as e:  # pragma: no cover - opencc is a core dependency
        raise ImportError(
            "Chinese script folding needs OpenCC: pip install opencc (or use a '-nofold' tokenizer)"
        ) from e
    # Without the "tofu risk" extension, whose targets lie outside the CJK blocks the tokenizers know.
    converter = opencc.OpenCC("t2s", include_tofu_risk_dictionaries=False)
    chars = [
        ch
        for lo, hi in _IDEOGRAPH_RANGES
        for ch in map(chr, range(lo, hi + 1))
        if unicodedata.normalize("NFKC", ch) == ch  # tokens are folded after NFKC: other characters never occur
    ]
    # One character per line: no two characters are ever adjacent, so OpenCC's phrase table never applies and
    # each character gets exactly its entry in the character table (TSCharacters).
    converted = converter.convert("\n".join(chars)).split("\n")
    if len(converted) != len(chars):  # pragma: no cover - a broken OpenCC installation
        raise RuntimeError(f"OpenCC t2s returned {len(converted)} lines for {len(chars)} characters")
    fold = {
        ch: out
        for ch, out in zip(chars, converted, strict=True)
        if out != ch and len(out) == 1 and CJK_CHAR_RE.match(out) and unicodedata.normalize("NFKC", out) == out
    }
    # Close the map under itself (薴→苧→苎 becomes 薴→苎), so folding is idempotent.
    while any(out in fold for out in fold.values()):
        fold = {ch: fold.get(out, out) for ch, out in fold.items()}
    table = np.arange(0x30000, dtype=np.uint32)
    table[[ord(ch) for ch in fold]] = [ord(out) for out in fold.values()]
    return table


def fold_to_simplified(text: str) -> str:
    """Fold Traditional Chinese characters in ``text`` to Simplified, one character at a time.

    Each character is replaced by its Simplified form in OpenCC's ``t2s`` character table (TSCharacters,
    `OpenCC <https://github.com/BYVoid/OpenCC>`_, Apache-2.0), e.g. ``關聯式資料庫`` → ``关联式资料库``.  The fold is
    a pure function of the character (no phrase context), so a query and a document always fold a shared
    character the same way; it preserves length and offsets, is idempotent, and leaves Simplified text, kana,
    hangul and Latin unchanged (a Simplified character that is also a Traditional variant, such as ``乾``, folds
    too — on both sides).  Japanese kanji that are Traditional forms fold as well (``東京`` → ``东京``); tokenizers
    fold queries and documents alike, so Japanese still matches Japanese.  One table lookup per character (numpy:
    ~4 µs for 400 characters, ~3 µs for a short query); ASCII text is returned as is.  The table is built from
    OpenCC on first use (~0.1 s, :func:`fold_table`).

    Used on tokens only, never on stored text.  Expects NFKC-normalised text (compatibility ideographs are folded
    by NFKC first).

    >>> fold_to_simplified("關聯式資料庫的備份與還原")
    '关联式资料库的备份与还原'
    """
    if text.isascii():
        return text
    table = fold_table()
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    if int(codes.max()) < table.size:
        folded = table.take(codes)
    else:  # characters beyond plane 2 (none of them folds)
        folded = np.where(codes < table.size, table.take(np.minimum(codes, table.size - 1)), codes)
    return folded.tobytes().decode("utf-32-le", "surrogatepass")


def fold_tokens(tokens: list[str]) -> list[str]:
    """``[fold_to_simplified(t) for t in tokens]``, computed with one :func:`fold_to_simplified` call over the
    tokens joined by newlines; the same list object when nothing folds (also for ``[]``).  A token that holds a
    newline is folded one by one with the rest (the result never shifts a token).

    >>> fold_tokens(["關聯", "の", "東京"])
    ['关联', 'の', '东京']
    """
    if not tokens:
        return tokens
    joined = "\n".join(tokens)
    folded = fold_to_simplified(joined)
    if folded == joined:
        return tokens
    parts = folded.split("\n")
    # MeCab's surfaces never hold a newline; a caller's tokens might, then fold them one by one
    return parts if len(parts) == len(tokens) else [fold_to_simplified(t) for t in tokens]
