"""Raw-postings BM25 segments (``backends/directory/bm25_postings.py``): a corpus split into segments, with dead
rows, or merged, scores exactly — bit for bit — as one segment of its live rows, and agrees with
``BM25Retriever`` (bm25s's float32 matrix) to float32 precision."""

from __future__ import annotations

import random

import numpy as np
import pytest
from langchain_core.documents import Document

from langchain_ragspine.backends.directory.bm25_postings import PostingsSegment, bm25_scores, merge_segments
from langchain_ragspine.retrievers.bm25 import BM25Retriever
from langchain_ragspine.tokenizers import get_tokenizer

WORDS = ["梅雨", "北京", "rain", "season", "首都", "六月", "七月", "falcon", "river", "雨", "季節", "Kyoto"]


@pytest.fixture(scope="module")
def texts() -> list[str]:
    rng = random.Random(1)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 12))) + "。梅雨は" * rng.randint(0, 2)
            for _ in range(300)]


def _scores(parts: list[tuple[PostingsSegment, np.ndarray | None]], query: str) -> list[np.ndarray]:
    return bm25_scores(get_tokenizer("auto")(query), parts, k1=1.5, b=0.75)


@pytest.mark.parametrize("tokenizer", ["auto", "custom"])
def test_segments_dead_rows_and_merges_score_as_one_segment(texts: list[str], tokenizer: str) -> None:
    auto = get_tokenizer("auto")
    tok = auto if tokenizer == "auto" else (lambda text: auto(text))  # a callable: tokenized text by text
    q = "梅雨 の rain 首都 梅雨"
    full = PostingsSegment.build(texts, tok)
    a, b = PostingsSegment.build(texts[:200], tok), PostingsSegment.build(texts[200:], tok)
    assert np.array_equal(_scores([(full, None)], q)[0], np.concatenate(_scores([(a, None), (b, None)], q)))
    live = np.ones(300, dtype=np.bool_)
    live[[3, 50, 250]] = False
    kept = [t for t, alive in zip(texts, live, strict=True) if alive]
    dead = _scores([(full, live)], q)[0]
    assert np.array_equal(dead[live], _scores([(PostingsSegment.build(kept, tok), None)], q)[0])
    assert not dead[~live].any()
    merged = merge_segments([(full, live), (a, None)])
    assert np.array_equal(_scores([(merged, None)], q)[0],
                          _scores([(PostingsSegment.build(kept + texts[:200], tok), None)], q)[0])


def test_scores_agree_with_bm25_retriever(texts: list[str]) -> None:
    q = "梅雨 の rain 首都 梅雨"
    ours = _scores([(PostingsSegment.build(texts, get_tokenizer("auto")), None)], q)[0]
    theirs = BM25Retriever(docs=[Document(page_content=t, metadata={"chunk_id": str(i)})
                                 for i, t in enumerate(texts)]).score(q)
    np.testing.assert_allclose(theirs, ours, rtol=1e-6, atol=1e-6)
