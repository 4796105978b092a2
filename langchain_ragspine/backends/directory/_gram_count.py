"""The postings of the ``cjk`` and ``auto`` tokenizers for a batch of texts, counted with numpy instead of per token.

:func:`~langchain_ragspine.backends.directory.bm25_parallel.count_batch` reduces a batch of texts to postings: tokenize each
text, give each token a number (one dictionary look-up per token), count each document's numbers.  For the
registered ``cjk`` / ``auto`` tokenizers (and their ``-nofold`` variants) a 400-character CJK chunk has ~1,000
tokens, of which ~800 are the character unigrams and bigrams; making each of them a Python string and looking it up
costs ~290 µs per chunk, more than MeCab itself (``benchmarks/RESULTS.md``, section ``tokenize-cpu``).
:func:`count_gram_batch` produces the same :class:`~langchain_ragspine.backends.directory.bm25_parallel.CountedBatch` — the same
terms in the same order of first occurrence, the same postings (each document's terms and frequencies; their order
within a document is free, the saved index is the same bit for bit) — without those strings:

* the batch's normalised texts are joined and turned into one array of code points (folded
  Traditional→Simplified with the tokenizers' own table, :func:`~langchain_ragspine.text.chinese.fold_table`, when
  the tokenizer folds);
* every CJK character present is given a rank, so a unigram is the integer ``r1 * (R + 1)`` and a bigram
  ``r1 * (R + 1) + r2`` (``R`` distinct CJK characters in the batch): no strings;
* the other terms — Latin words (their English stems, stop words dropped, for ``cjk`` and ``auto``:
  :func:`~langchain_ragspine.text.english.english_terms`), and the MeCab morphemes of ``auto`` other than one or two CJK characters — are
  strings as before, numbered with a dictionary; a morpheme of one or two CJK characters gets the integer of the
  unigram / bigram it equals, as its string would;
* each token's position in the tokenizer's output (the order :func:`~langchain_ragspine.tokenizers.auto_tokenize`
  returns: per match of the text, the words or the run's unigrams then its bigrams, then the morphemes) is computed
  arithmetically, and one sort of ``(document, term, position)`` integers gives each document's terms with their
  frequencies and each term's first occurrence.

Where the integers would not fit in 63 bits (a batch with very long texts *and* a huge character set) it returns
``None`` and the caller counts the batch token by token.  ``tests/unit_tests/backends/directory/test_gram_count.py`` checks it equals
the token-by-token count on random and real text (hypothesis).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence

import numpy as np

from langchain_ragspine import tokenizers
from langchain_ragspine.backends.directory.counted_batch import CountedBatch
from langchain_ragspine.text import CJK_CHAR_RE, normalize
from langchain_ragspine.text.chinese import fold_table, fold_to_simplified, fold_tokens
from langchain_ragspine.text.english import english_terms
from langchain_ragspine.tokenizers import MECAB_SURFACE_END, mecab_surface_tagger, mecab_surfaces

#: The tokenizers :func:`count_gram_batch` counts: name → (MeCab morphemes added, Traditional→Simplified fold,
#: English analysis of the words).
GRAM_TOKENIZERS: dict[str, tuple[bool, bool, bool]] = {
    "cjk": (False, True, True),
    "cjk-nostem": (False, True, False),
    "cjk-nofold": (False, False, False),
    "auto": (True, True, True),
    "auto-nostem": (True, True, False),
    "auto-nofold": (True, False, False),
}

# The words of ``tokenizers._TOKEN_RE`` (its second group): a match of the first group is a run of CJK characters.
_WORD_RE = re.compile(tokenizers.WORD_PATTERN)
#: Code points below this hold every CJK character (and every character the fold changes).
_PLANES = 0x30000
_BEL = ord(MECAB_SURFACE_END)  # ends every morpheme in the output of tokenizers.mecab_surface_tagger
_I64 = np.int64


@functools.cache
def _cjk_table() -> np.ndarray:
    """``bool`` array over every code point: ``table[c]`` is whether ``chr(c)`` is a CJK character of
    :data:`~langchain_ragspine.text.CJK_CHAR_CLASS` (1.1 MB, built once per process)."""
    table = np.zeros(0x110000, dtype=bool)
    chars = "".join(map(chr, range(_PLANES)))  # position = code point (lone surrogates included)
    table[[m.start() for m in CJK_CHAR_RE.finditer(chars)]] = True
    return table


def _codes(text: str) -> np.ndarray:
    """The code points of ``text`` (``uint32``)."""
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)


def _bits(n: int) -> int:
    """Bits to hold the integers ``0 .. n - 1``."""
    return max(1, int(n - 1).bit_length())


def _group_starts(sorted_values: np.ndarray) -> np.ndarray:
    """Where each run of equal values begins in ``sorted_values`` (non-empty)."""
    flags = np.empty(sorted_values.size, dtype=bool)
    flags[0] = True
    np.not_equal(sorted_values[1:], sorted_values[:-1], out=flags[1:])
    return np.flatnonzero(flags)


def count_gram_batch(tokenizer: str, texts: Sequence[str]) -> CountedBatch | None:
    """``count_batch(tokenizer, texts)`` for a tokenizer of :data:`GRAM_TOKENIZERS`, counted with numpy (see the
    module docstring); ``None`` when the batch's integers would not fit in 63 bits.

    Each document's postings come in the order of their term integers, not of their term numbers (the index does
    not depend on that order).

    Raises:
        KeyError: ``tokenizer`` is not in :data:`GRAM_TOKENIZERS`.
    """
    with_morphemes, fold, english = GRAM_TOKENIZERS[tokenizer]
    n_docs = len(texts)
    if not n_docs:
        return _counted([], np.zeros(0, _I64), np.zeros(0, _I64), np.zeros(0, _I64), np.zeros(0, _I64))
    norms = [normalize(t).lower() for t in texts]
    lengths = np.fromiter(map(len, norms), dtype=_I64, count=n_docs)
    ends = np.cumsum(lengths + 1) - 1  # position of each text's separator in ``joined``
    joined = "\n".join(norms) + "\n"  # "\n" is neither a CJK character nor a word character: no token crosses it
    codes = _codes(joined)
    is_cjk = _cjk_table()[codes]
    cjk_pos = np.flatnonzero(is_cjk)
    chars = codes[cjk_pos]
    if fold:  # the fold changes only CJK characters, into CJK characters
        chars = fold_table()[chars]
    doc_of = np.repeat(np.arange(n_docs, dtype=_I64), lengths + 1)  # document of each position of ``joined``

    # ranks of the CJK characters present: a unigram is r1 * (R + 1), a bigram r1 * (R + 1) + r2
    present = np.zeros(_PLANES, dtype=bool)
    present[chars] = True
    rank = np.cumsum(present, dtype=_I64)
    rank_chars = np.flatnonzero(present).astype(np.uint32)  # rank r is the character rank_chars[r - 1]
    base = len(rank_chars) + 1

    # runs of CJK characters (consecutive CJK positions), words, and each text's morphemes
    run_first = np.ones(cjk_pos.size, dtype=bool)
    np.not_equal(cjk_pos[1:], cjk_pos[:-1] + 1, out=run_first[1:])
    run_of = np.cumsum(run_first) - 1
    run_start = cjk_pos[run_first]
    run_len = np.diff(np.append(np.flatnonzero(run_first), cjk_pos.size))
    vocab: dict[str, int] = {}
    number = _numberer(vocab)
    word_pos: list[int] = []
    words: list[str] = []
    for m in _WORD_RE.finditer(joined):
        word_pos.append(m.start())
        words.append(m.group())
    if english:  # each word its stem, stop words dropped (one cache look-up per word)
        words = english_terms(words)
        if "" in words:
            kept = [i for i, w in enumerate(words) if w]
            word_pos = [word_pos[i] for i in kept]
            words = [words[i] for i in kept]
    word_id = list(map(number, words))
    words_at = np.asarray(word_pos, dtype=_I64)
    m_doc, m_key, m_index, m_count = _morphemes(
        norms, doc_of[run_start], fold, rank, base, vocab, n_docs, with_morphemes
    )

    # the tokenizer's output, segment by segment: a run (2n - 1 tokens), a word (1), a text's morphemes
    seg_pos = np.concatenate((run_start, words_at, ends))
    seg_size = np.concatenate((2 * run_len - 1, np.ones(words_at.size, dtype=_I64), m_count))
    order = np.argsort(seg_pos)  # positions are distinct
    offset = np.empty_like(seg_size)
    sizes = seg_size[order]
    offset[order] = np.cumsum(sizes) - sizes
    seg_doc = doc_of[seg_pos]
    doc_len = np.bincount(seg_doc, weights=seg_size, minlength=n_docs).astype(_I64)
    offset -= (np.cumsum(doc_len) - doc_len)[seg_doc]  # position within the text's tokens
    n_runs = run_start.size
    run_off, word_off, block_off = offset[:n_runs], offset[n_runs : n_runs + words_at.size], offset[-n_docs:]

    # every token: (document, term integer, position among the text's tokens)
    within = cjk_pos - run_start[run_of]
    r = rank[chars]
    bigram = np.flatnonzero(np.diff(run_of) == 0)  # index into cjk_pos of each bigram's first character
    n_keys = base * base + len(vocab)
    doc_bits, key_bits = _bits(n_docs), _bits(n_keys)
    slot_bits = _bits(int(doc_len.max(initial=1)))
    shift = key_bits + slot_bits
    if doc_bits + shift > 63:
        return None
    cjk_doc = doc_of[cjk_pos] << shift
    run_off_of = run_off[run_of]
    packed = np.concatenate((
        cjk_doc | ((r * base) << slot_bits) | (run_off_of + within),
        cjk_doc[bigram]
        | ((r[bigram] * base + r[bigram + 1]) << slot_bits)
        | (run_off_of[bigram] + run_len[run_of[bigram]] + within[bigram]),
        (doc_of[words_at] << shift) | ((np.asarray(word_id, dtype=_I64) + base * base) << slot_bits) | word_off,
        (m_doc << shift) | (m_key << slot_bits) | (block_off[m_doc] + m_index),
    ))
    if not packed.size:
        return _counted([], np.zeros(0, _I64), np.zeros(0, _I64), doc_len, np.zeros(n_docs, _I64))

    # one sort: each (document, term) with its frequency and its first position in the document
    packed.sort()
    starts = _group_starts(packed >> slot_bits)
    tf = np.diff(np.append(starts, packed.size))
    first = packed[starts]
    del packed
    g_doc = first >> shift
    g_key = (first >> slot_bits) & ((1 << key_bits) - 1)
    n_groups = starts.size
    group_bits = _bits(n_groups)
    if key_bits + group_bits > 63:
        return None

    # each term's first occurrence: its first (document, term) group in document order
    by_key = (g_key << group_bits) | np.arange(n_groups, dtype=_I64)
    by_key.sort()
    k_starts = _group_starts(by_key >> group_bits)
    groups = by_key & ((1 << group_bits) - 1)
    first_group = groups[k_starts]
    first_at = (g_doc[first_group] << slot_bits) | (first[first_group] & ((1 << slot_bits) - 1))
    term_order = np.argsort(first_at)  # the terms in order of first occurrence (distinct positions)
    local = np.empty(k_starts.size, dtype=_I64)
    local[term_order] = np.arange(k_starts.size, dtype=_I64)
    term_ids = np.empty(n_groups, dtype=_I64)
    term_ids[groups] = np.repeat(local, np.diff(np.append(k_starts, n_groups)))
    doc_terms = np.bincount(g_doc, minlength=n_docs).astype(_I64)
    terms = _term_strings(g_key[first_group[term_order]], base, rank_chars, vocab)
    return _counted(terms, term_ids, tf, doc_len, doc_terms)


def _morphemes(
    norms: list[str],
    run_docs: np.ndarray,
    fold: bool,
    rank: np.ndarray,
    base: int,
    vocab: dict[str, int],
    n_docs: int,
    with_morphemes: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The MeCab morphemes ``auto`` adds (those holding a CJK character, folded when the tokenizer folds) of the
    texts holding a CJK run (``run_docs``: the document of each run): ``(document, term integer, index among the
    document's morphemes, morphemes per document)``."""
    empty = np.zeros(0, dtype=_I64)
    if not with_morphemes or not run_docs.size:
        return empty, empty, empty, np.zeros(n_docs, dtype=_I64)
    parse = mecab_surface_tagger().parse
    outs: list[str] = []
    out_docs: list[int] = []
    odd_docs: list[int] = []
    for d in np.unique(run_docs).tolist():
        norm = norms[d]
        out = None if len(norm) > tokenizers.MECAB_MAX_CHARS or "\a" in norm or "\0" in norm else parse(norm)
        if out is None or not out.endswith("\a"):
            odd_docs.append(d)  # the tokenizer's own path: pieces, or fugashi's nodes
        else:
            outs.append(out)
            out_docs.append(d)
    squared = base * base
    cjk_table = _cjk_table()
    folding = fold_table() if fold else None

    mdoc_parts: list[np.ndarray] = []
    mkey_parts: list[np.ndarray] = []
    if outs:
        text = "".join(outs)
        codes = _codes(text)
        ends = np.flatnonzero(codes == _BEL)
        begins = np.empty_like(ends)
        begins[0] = 0
        begins[1:] = ends[:-1] + 1
        lens = ends - begins
        cum = np.zeros(codes.size + 1, dtype=_I64)
        np.cumsum(cjk_table[codes], out=cum[1:])
        n_cjk = cum[ends] - cum[begins]
        per_out = np.fromiter((o.count("\a") for o in outs), dtype=_I64, count=len(outs))
        keep = np.flatnonzero(n_cjk)
        short = (n_cjk[keep] == lens[keep]) & (lens[keep] <= 2)
        b = begins[keep]
        pair = lens[keep] == 2
        first = codes[b[short]]
        second = codes[b[short & pair] + 1]
        if folding is not None:  # fold changes only CJK characters: fold what is read
            first, second = folding[first], folding[second]
        mkey = np.empty(keep.size, dtype=_I64)
        short_key = rank[first] * base
        short_key[pair[short]] += rank[second]
        mkey[short] = short_key
        other = np.flatnonzero(~short)
        if other.size:
            strings = [text[i:j] for i, j in zip(b[other].tolist(), ends[keep[other]].tolist(), strict=True)]
            if folding is not None:
                strings = fold_tokens(strings)
            mkey[other] = [number + squared for number in map(_numberer(vocab), strings)]
        mdoc_parts.append(np.repeat(np.asarray(out_docs, dtype=_I64), per_out)[keep])
        mkey_parts.append(mkey)
    for d in odd_docs:
        surfaces = [s for s in mecab_surfaces(norms[d]) if CJK_CHAR_RE.search(s)]
        if fold:
            surfaces = [fold_to_simplified(s) for s in surfaces]
        keys = [_string_key(s, rank, base, vocab) for s in surfaces]
        mdoc_parts.append(np.full(len(keys), d, dtype=_I64))
        mkey_parts.append(np.asarray(keys, dtype=_I64))
    m_doc = np.concatenate(mdoc_parts) if mdoc_parts else empty
    m_key = np.concatenate(mkey_parts) if mkey_parts else empty
    if odd_docs and outs:  # each part is in document order; the odd documents' part comes last
        order = np.argsort(m_doc, kind="stable")
        m_doc, m_key = m_doc[order], m_key[order]
    m_count = np.bincount(m_doc, minlength=n_docs).astype(_I64)
    m_index = np.arange(m_doc.size, dtype=_I64) - (np.cumsum(m_count) - m_count)[m_doc]
    return m_doc, m_key, m_index, m_count


def _numberer(vocab: dict[str, int]) -> Callable[[str], int]:
    """``term → its number in vocab``, numbering a new term ``len(vocab)``."""
    setdefault = vocab.setdefault
    return lambda term: setdefault(term, len(vocab))


def _string_key(term: str, rank: np.ndarray, base: int, vocab: dict[str, int]) -> int:
    """The integer of ``term``: that of its unigram / bigram when it is one or two CJK characters, else
    ``base ** 2`` + its number in ``vocab``."""
    if 1 <= len(term) <= 2 and all(CJK_CHAR_RE.match(ch) for ch in term):
        key = int(rank[ord(term[0])]) * base
        return key + (int(rank[ord(term[1])]) if len(term) == 2 else 0)
    return _numberer(vocab)(term) + base * base


def _term_strings(term_keys: np.ndarray, base: int, rank_chars: np.ndarray, vocab: dict[str, int]) -> str | list[str]:
    """The strings of ``term_keys`` (integers made by :func:`count_gram_batch`), in that order, joined by
    ``TERM_SEPARATOR`` (NUL) into one string — built as one array of code points, no string per term — or, when a
    term holds NUL, as a list."""
    squared = base * base
    is_gram = term_keys < squared
    words = list(vocab)
    if any("\0" in w for w in words):
        out: list[str] = []
        for key in term_keys.tolist():
            if key >= squared:
                out.append(words[key - squared])
            else:
                r1, r2 = divmod(key, base)
                out.append(chr(rank_chars[r1 - 1]) + (chr(rank_chars[r2 - 1]) if r2 else ""))
        return out
    word_codes = _codes("".join(words))
    word_len = np.fromiter(map(len, words), dtype=_I64, count=len(words))
    word_start = np.cumsum(word_len) - word_len
    r1, r2 = np.divmod(term_keys, base)
    wnum = np.where(is_gram, 0, term_keys - squared)
    length = np.where(is_gram, 1 + (r2 > 0), word_len[wnum] if words else 0)
    at = np.cumsum(length + 1) - (length + 1)  # where each term begins, a separator after each
    out_codes = np.zeros(int(at[-1] + length[-1]) if term_keys.size else 0, dtype=np.uint32)
    g = np.flatnonzero(is_gram)
    out_codes[at[g]] = rank_chars[r1[g] - 1]
    g2 = g[r2[g] > 0]
    out_codes[at[g2] + 1] = rank_chars[r2[g2] - 1]
    w = np.flatnonzero(~is_gram)
    if w.size:
        n = length[w]
        src = np.repeat(word_start[wnum[w]] - np.cumsum(n) + n, n) + np.arange(int(n.sum()))
        out_codes[np.repeat(at[w] - np.cumsum(n) + n, n) + np.arange(int(n.sum()))] = word_codes[src]
    return out_codes.tobytes().decode("utf-32-le", "surrogatepass")


def _counted(
    terms: str | list[str], term_ids: np.ndarray, tfs: np.ndarray, doc_len: np.ndarray, doc_terms: np.ndarray
) -> CountedBatch:
    """The :class:`CountedBatch`; ``terms`` as :func:`_term_strings` gives them (joined, or a list when a term holds
    the separator, or empty)."""
    return CountedBatch(
        terms=terms,
        term_ids=term_ids.astype(np.int32),
        tfs=tfs.astype(np.int32),
        doc_len=doc_len.astype(np.int64),
        doc_terms=doc_terms.astype(np.int64),
    )
