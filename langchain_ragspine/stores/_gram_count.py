"""The postings of the ``cjk`` and ``auto`` tokenizers for a batch of texts, counted with numpy instead of per token.

:func:`~langchain_ragspine.stores.bm25_parallel.count_batch` reduces a batch of texts to postings: tokenize each
text, give each token a number (one dictionary look-up per token), count each document's numbers.  For the
registered ``cjk`` / ``auto`` tokenizers (and their ``-nofold`` variants) a 400-character CJK chunk has ~1,000
tokens, of which ~800 are the character unigrams and bigrams; making each of them a Python string and looking it up
costs ~290 µs per chunk, more than MeCab itself (``benchmarks/RESULTS.md``, section ``tokenize-cpu``).
:func:`count_gram_batch` produces the same :class:`~langchain_ragspine.stores.bm25_parallel.CountedBatch` — the same
terms in the same order of first occurrence, the same postings, bit for bit — without those strings:

* the batch's normalised texts are joined and turned into one array of code points (folded
  Traditional→Simplified with the tokenizers' own table when the tokenizer folds);
* every CJK character present is given a rank, so a unigram is the integer ``r1 * (R + 1)`` and a bigram
  ``r1 * (R + 1) + r2`` (``R`` distinct CJK characters in the batch): no strings;
* the other terms — Latin words, and the MeCab morphemes of ``auto`` other than one or two CJK characters — are
  strings as before, numbered with a dictionary; a morpheme of one or two CJK characters gets the integer of the
  unigram / bigram it equals, as its string would;
* each token's position in the tokenizer's output (the order :func:`~langchain_ragspine.tokenizers.auto_tokenize`
  returns: per match of the text, the words or the run's unigrams then its bigrams, then the morphemes) is computed
  arithmetically, and one sort of ``(document, term, position)`` integers gives each document's terms with their
  frequencies and each term's first occurrence.

Where the integers would not fit in 63 bits (a batch with very long texts *and* a huge character set) it returns
``None`` and the caller counts the batch token by token.  ``tests/unit_tests/test_gram_count.py`` checks it equals
the token-by-token count on random and real text (hypothesis).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from langchain_ragspine import tokenizers
from langchain_ragspine.text import CJK_CHAR_CLASS, CJK_CHAR_RE, normalize
from langchain_ragspine.tokenizers import _fold_table, _surface_tagger, fold_to_simplified, mecab_surfaces

if TYPE_CHECKING:
    from langchain_ragspine.stores.bm25_parallel import CountedBatch

#: The tokenizers :func:`count_gram_batch` counts: name → (MeCab morphemes added, Traditional→Simplified fold).
GRAM_TOKENIZERS: dict[str, tuple[bool, bool]] = {
    "cjk": (False, True),
    "cjk-nofold": (False, False),
    "auto": (True, True),
    "auto-nofold": (True, False),
}

# The words of ``tokenizers._TOKEN_RE`` (its second group): a match of the first group is a run of CJK characters.
_WORD_RE = re.compile(rf"[^\W_{CJK_CHAR_CLASS}]+")
#: Code points below this hold every CJK character (and every character the fold changes).
_PLANES = 0x30000
_BEL = 7  # ends every morpheme in the output of tokenizers._surface_tagger
_I64 = np.int64


@functools.cache
def _cjk_table() -> np.ndarray:
    """``bool`` array over code points ``0 .. _PLANES`` (the last entry, for anything beyond, ``False``):
    ``table[c]`` is whether ``chr(c)`` is a CJK character of :data:`~langchain_ragspine.text.CJK_CHAR_CLASS`."""
    table = np.zeros(_PLANES + 1, dtype=bool)
    chars = "".join(map(chr, range(_PLANES)))  # position = code point (lone surrogates included)
    table[[m.start() for m in CJK_CHAR_RE.finditer(chars)]] = True
    return table


def _codes(text: str) -> np.ndarray:
    return np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32).astype(_I64)


def _bits(n: int) -> int:
    """Bits to hold the integers ``0 .. n - 1``."""
    return max(1, int(n - 1).bit_length())


def count_gram_batch(tokenizer: str, texts: Sequence[str]) -> CountedBatch | None:
    """``count_batch(tokenizer, texts)`` for a tokenizer of :data:`GRAM_TOKENIZERS`, counted with numpy (see the
    module docstring); ``None`` when the batch's integers would not fit in 63 bits.

    Raises:
        KeyError: ``tokenizer`` is not in :data:`GRAM_TOKENIZERS`.
    """
    from langchain_ragspine.stores.bm25_parallel import CountedBatch

    with_morphemes, fold = GRAM_TOKENIZERS[tokenizer]
    n_docs = len(texts)
    norms = [normalize(t).lower() for t in texts]
    lengths = np.fromiter(map(len, norms), dtype=_I64, count=n_docs)
    ends = np.cumsum(lengths + 1) - 1  # position of each text's separator in ``joined``
    joined = "\n".join(norms) + "\n"  # "\n" is neither a CJK character nor a word character: no token crosses it
    codes = _codes(joined)
    cjk_table = _cjk_table()
    capped = np.minimum(codes, _PLANES)
    if fold:
        folded = _fold_table().astype(_I64)[np.minimum(codes, _PLANES - 1)]
        codes = np.where(codes < _PLANES, folded, codes)
    is_cjk = cjk_table[capped]
    del capped
    doc_of = np.repeat(np.arange(n_docs, dtype=_I64), lengths + 1)  # document of each position of ``joined``

    # ranks of the CJK characters present: a unigram is r1 * (R + 1), a bigram r1 * (R + 1) + r2
    present = np.zeros(_PLANES, dtype=bool)
    cjk_pos = np.flatnonzero(is_cjk)
    present[codes[cjk_pos]] = True
    rank = np.cumsum(present, dtype=_I64)
    rank_chars = np.flatnonzero(present)  # rank r is the character rank_chars[r - 1]
    base = len(rank_chars) + 1

    # runs of CJK characters, words, and each text's morphemes (one block after its matches)
    prev = np.concatenate(([False], is_cjk[:-1]))
    nxt = np.concatenate((is_cjk[1:], [False]))
    run_start = np.flatnonzero(is_cjk & ~prev)
    run_len = np.flatnonzero(is_cjk & ~nxt) + 1 - run_start
    words = _WORD_RE.finditer(joined)
    vocab: dict[str, int] = {}
    number = vocab.setdefault
    word_pos: list[int] = []
    word_id: list[int] = []
    for m in words:
        word_pos.append(m.start())
        word_id.append(number(m.group(), len(vocab)))

    m_doc, m_key, m_index, m_count = _morphemes(
        norms, run_start, doc_of, fold, cjk_table, rank, base, vocab, n_docs, with_morphemes
    )

    # the tokenizer's output, segment by segment: a run (2n - 1 tokens), a word (1), a text's morphemes
    seg_pos = np.concatenate((run_start, np.asarray(word_pos, dtype=_I64), ends))
    seg_size = np.concatenate((2 * run_len - 1, np.ones(len(word_pos), dtype=_I64), m_count))
    order = np.argsort(seg_pos, kind="stable")
    offset_sorted = np.cumsum(seg_size[order]) - seg_size[order]
    offset = np.empty_like(offset_sorted)
    offset[order] = offset_sorted
    doc_len = np.bincount(doc_of[seg_pos], weights=seg_size, minlength=n_docs).astype(_I64)
    doc_first = np.cumsum(doc_len) - doc_len
    offset -= doc_first[doc_of[seg_pos]]  # position within the text's tokens
    n_runs, n_words = len(run_start), len(word_pos)
    run_off, word_off, block_off = offset[:n_runs], offset[n_runs : n_runs + n_words], offset[n_runs + n_words :]

    # every token: (document, term integer, position among the text's tokens)
    run_of = np.cumsum(is_cjk & ~prev)[cjk_pos] - 1
    within = cjk_pos - run_start[run_of]
    r = rank[codes[cjk_pos]]
    bigram = (cjk_pos + 1 < len(codes)) & is_cjk[np.minimum(cjk_pos + 1, len(codes) - 1)]
    bi = cjk_pos[bigram]
    word_key = np.asarray(word_id, dtype=_I64) + base * base
    keys = np.concatenate((
        r * base,
        r[bigram] * base + rank[codes[bi + 1]],
        word_key,
        m_key,
    ))
    docs = np.concatenate((doc_of[cjk_pos], doc_of[bi], doc_of[np.asarray(word_pos, dtype=_I64)], m_doc))
    slots = np.concatenate((
        run_off[run_of] + within,
        run_off[run_of[bigram]] + run_len[run_of[bigram]] + within[bigram],
        word_off,
        block_off[m_doc] + m_index,
    ))
    n_keys = base * base + len(vocab)
    doc_bits, key_bits = _bits(n_docs), _bits(n_keys)
    slot_bits = _bits(int(doc_len.max(initial=1)))
    if doc_bits + key_bits + slot_bits > 63 or key_bits + _bits(max(1, len(keys))) > 63:
        return None
    if not keys.size:
        return _counted([], np.zeros(0, _I64), np.zeros(0, _I64), doc_len, np.zeros(n_docs, _I64))

    # one sort: each (document, term) with its frequency and its first position in the document
    packed = np.sort((docs << (key_bits + slot_bits)) | (keys << slot_bits) | slots)
    pair = packed >> slot_bits
    starts = np.flatnonzero(np.concatenate(([True], pair[1:] != pair[:-1])))
    tf = np.diff(np.append(starts, packed.size))
    g_pair = pair[starts]
    g_doc = g_pair >> key_bits
    g_key = g_pair & ((1 << key_bits) - 1)
    g_slot = packed[starts] & ((1 << slot_bits) - 1)
    del packed, pair

    # each term's first occurrence: its first (document, term) group in document order
    group_bits = _bits(len(starts))
    by_key = np.sort((g_key << group_bits) | np.arange(len(starts), dtype=_I64))
    k_of = by_key >> group_bits
    k_starts = np.flatnonzero(np.concatenate(([True], k_of[1:] != k_of[:-1])))
    first_group = by_key[k_starts] & ((1 << group_bits) - 1)
    first_at = (g_doc[first_group] << slot_bits) | g_slot[first_group]
    term_order = np.argsort(first_at)  # the terms in order of first occurrence
    local = np.empty(len(k_starts), dtype=_I64)
    local[term_order] = np.arange(len(k_starts), dtype=_I64)
    group_local = np.empty(len(starts), dtype=_I64)
    group_local[by_key & ((1 << group_bits) - 1)] = np.repeat(local, np.diff(np.append(k_starts, by_key.size)))

    # each document's postings in ascending term number, as the token-by-token count gives them
    local_bits = _bits(len(k_starts))
    tf_bits = _bits(int(tf.max()) + 1)
    if doc_bits + local_bits + tf_bits > 63:
        order2 = np.lexsort((group_local, g_doc))
        term_ids, tfs = group_local[order2], tf[order2]
    else:
        final = np.sort((g_doc << (local_bits + tf_bits)) | (group_local << tf_bits) | tf)
        term_ids = (final >> tf_bits) & ((1 << local_bits) - 1)
        tfs = final & ((1 << tf_bits) - 1)
    doc_terms = np.bincount(g_doc, minlength=n_docs).astype(_I64)

    term_keys = k_of[k_starts][term_order]
    terms = _term_strings(term_keys, base, rank_chars, vocab)
    return _counted(terms, term_ids, tfs, doc_len, doc_terms)


def _morphemes(
    norms: list[str],
    run_start: np.ndarray,
    doc_of: np.ndarray,
    fold: bool,
    cjk_table: np.ndarray,
    rank: np.ndarray,
    base: int,
    vocab: dict[str, int],
    n_docs: int,
    with_morphemes: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The MeCab morphemes ``auto`` adds (those holding a CJK character, folded when the tokenizer folds), for the
    texts holding a CJK run: ``(document, term integer, index among the document's morphemes, morphemes per
    document)``."""
    empty = np.zeros(0, dtype=_I64)
    if not with_morphemes or not len(run_start):
        return empty, empty, empty, np.zeros(n_docs, dtype=_I64)
    docs_with_cjk = np.unique(doc_of[run_start]).tolist()
    parse = _surface_tagger().parse
    outs: list[str] = []
    out_docs: list[int] = []
    odd_docs: list[int] = []
    for d in docs_with_cjk:
        norm = norms[d]
        out = None if len(norm) > tokenizers.MECAB_MAX_CHARS or "\a" in norm or "\0" in norm else parse(norm)
        if out is None or not out.endswith("\a"):
            odd_docs.append(d)  # the tokenizer's own path: pieces, or fugashi's nodes
        else:
            outs.append(out)
            out_docs.append(d)
    number = vocab.setdefault
    squared = base * base

    mdoc_parts: list[np.ndarray] = []
    mkey_parts: list[np.ndarray] = []
    if outs:
        text = "".join(outs)
        codes = _codes(text)
        if fold:
            table = _fold_table()
            low = codes < _PLANES
            codes = np.where(low, table[np.minimum(codes, _PLANES - 1)], codes)
            text = codes.astype(np.uint32).tobytes().decode("utf-32-le", "surrogatepass")
        ends = np.flatnonzero(codes == _BEL)
        begins = np.concatenate(([0], ends[:-1] + 1))
        lens = ends - begins
        cjk = cjk_table[np.minimum(codes, _PLANES)]
        cum = np.concatenate(([0], np.cumsum(cjk, dtype=_I64)))
        n_cjk = cum[ends] - cum[begins]
        per_out = np.fromiter((o.count("\a") for o in outs), dtype=_I64, count=len(outs))
        mdoc = np.repeat(np.asarray(out_docs, dtype=_I64), per_out)
        keep = n_cjk > 0
        short = keep & (n_cjk == lens) & (lens <= 2)
        low_codes = np.minimum(codes, _PLANES - 1)  # rank is read only where the morpheme is CJK characters
        first = rank[low_codes[begins]] * base
        second = np.where(lens == 2, rank[low_codes[np.minimum(begins + 1, len(codes) - 1)]], 0)
        mkey = np.where(short, first + second, -1)
        other = np.flatnonzero(keep & ~short)
        if other.size:
            b, e = begins[other].tolist(), ends[other].tolist()
            mkey[other] = [number(text[i:j], len(vocab)) + squared for i, j in zip(b, e, strict=True)]
        mdoc_parts.append(mdoc[keep])
        mkey_parts.append(mkey[keep])
    for d in odd_docs:
        surfaces = [s for s in mecab_surfaces(norms[d]) if CJK_CHAR_RE.search(s)]
        if fold:
            surfaces = [fold_to_simplified(s) for s in surfaces]
        keys = [_string_key(s, rank, base, vocab) for s in surfaces]
        mdoc_parts.append(np.full(len(keys), d, dtype=_I64))
        mkey_parts.append(np.asarray(keys, dtype=_I64))
    m_doc = np.concatenate(mdoc_parts) if mdoc_parts else empty
    m_key = np.concatenate(mkey_parts) if mkey_parts else empty
    # the documents are in order within each part; the odd documents come last: order all by document, stably
    if odd_docs and outs:
        order = np.argsort(m_doc, kind="stable")
        m_doc, m_key = m_doc[order], m_key[order]
    m_count = np.bincount(m_doc, minlength=n_docs).astype(_I64)
    m_index = np.arange(len(m_doc), dtype=_I64) - (np.cumsum(m_count) - m_count)[m_doc]
    return m_doc, m_key, m_index, m_count


def _string_key(term: str, rank: np.ndarray, base: int, vocab: dict[str, int]) -> int:
    """The integer of ``term``: that of its unigram / bigram when it is one or two CJK characters, else
    ``base ** 2`` + its number in ``vocab``."""
    if 1 <= len(term) <= 2 and all(CJK_CHAR_RE.match(ch) for ch in term):
        key = int(rank[ord(term[0])]) * base
        return key + (int(rank[ord(term[1])]) if len(term) == 2 else 0)
    return vocab.setdefault(term, len(vocab)) + base * base


def _term_strings(term_keys: np.ndarray, base: int, rank_chars: np.ndarray, vocab: dict[str, int]) -> list[str]:
    """The strings of ``term_keys`` (integers made by :func:`count_gram_batch`), in that order."""
    squared = base * base
    is_gram = term_keys < squared
    grams = term_keys[is_gram]
    first, second = grams // base, grams % base
    cps = np.zeros((len(grams), 3), dtype=np.uint32)  # first char, second char (or none), separator NUL
    cps[:, 0] = rank_chars[first - 1]
    cps[:, 1] = np.where(second > 0, rank_chars[np.maximum(second, 1) - 1], 0)
    flat = cps.ravel()
    keep = np.ones(flat.size, dtype=bool)
    keep[1::3] = second > 0
    gram_strings = flat[keep].tobytes().decode("utf-32-le").split("\0")
    gram_strings.pop()  # after the last separator
    by_number = list(vocab)
    words = [by_number[k - squared] for k in term_keys[~is_gram].tolist()]
    gi, wi = iter(gram_strings), iter(words)
    return [next(gi) if g else next(wi) for g in is_gram.tolist()]


def _counted(
    terms: list[str], term_ids: np.ndarray, tfs: np.ndarray, doc_len: np.ndarray, doc_terms: np.ndarray
) -> CountedBatch:
    from langchain_ragspine.stores.bm25_parallel import TERM_SEPARATOR, CountedBatch

    joined: list[str] | str = terms
    if terms:
        text = TERM_SEPARATOR.join(terms)
        if text.count(TERM_SEPARATOR) == len(terms) - 1:
            joined = text
    return CountedBatch(
        terms=joined,
        term_ids=term_ids.astype(np.int32),
        tfs=tfs.astype(np.int32),
        doc_len=doc_len.astype(np.int64),
        doc_terms=doc_terms.astype(np.int64),
    )
