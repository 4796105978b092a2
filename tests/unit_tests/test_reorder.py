"""Lost-in-the-middle: the most relevant first, the second most relevant last, for every n (even n included)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.documents import Document

from langchain_ragspine.chains import make_answer_chain, prepare_context
from langchain_ragspine.document_compressors import LostInTheMiddleReorder, lost_in_the_middle_order
from tests.unit_tests.spy_models import SpyChatModel

EXPECTED = {
    0: [],
    1: [1],
    2: [1, 2],
    3: [1, 3, 2],
    4: [1, 3, 4, 2],  # LangChain's LongContextReorder gives 2, 4, 3, 1 here: the best document last
    5: [1, 3, 5, 4, 2],
    6: [1, 3, 5, 6, 4, 2],
    7: [1, 3, 5, 7, 6, 4, 2],
}


@pytest.mark.parametrize("n", sorted(EXPECTED))
def test_written_out_order_for_n_0_to_7(n):
    assert lost_in_the_middle_order(list(range(1, n + 1))) == EXPECTED[n]


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 40))
def test_property_best_first_second_last_weakest_in_the_middle(n):
    ranks = list(range(1, n + 1))
    out = lost_in_the_middle_order(ranks)
    assert sorted(out) == ranks  # a permutation
    if n >= 1:
        assert out[0] == 1
    if n >= 2:
        assert out[-1] == 2
    # relevance decreases toward the middle: ranks grow from the front to the weakest, then shrink to the back
    peak = out.index(n) if n else 0
    assert all(a < b for a, b in zip(out[:peak], out[1 : peak + 1], strict=True))
    assert all(a > b for a, b in zip(out[peak:-1], out[peak + 1 :], strict=True))
    # the two ends hold the better half: position from the nearer end grows with rank
    depth = [min(i, n - 1 - i) for i in range(n)]
    by_rank = [depth[out.index(r)] for r in ranks]
    assert by_rank == sorted(by_rank)


def test_input_is_not_modified():
    items = [1, 2, 3, 4]
    lost_in_the_middle_order(items)
    assert items == [1, 2, 3, 4]


def _doc(i: int, sensitivity: str = "PUBLIC") -> Document:
    return Document(
        page_content=f"passage {i}",
        metadata={"chunk_id": f"d{i}#0", "doc_id": f"d{i}", "title": f"T{i}", "sensitivity": sensitivity},
    )


def test_compressor_gates_then_reorders_even_n():
    docs = [_doc(1), _doc(9, "restricted"), _doc(2), _doc(3), _doc(4)]
    out = LostInTheMiddleReorder().compress_documents(docs, "q")
    assert [d.metadata["doc_id"] for d in out] == ["d1", "d3", "d4", "d2"]
    assert out[0] is docs[0]  # documents are passed through unchanged


async def test_compressor_async_matches_sync():
    docs = [_doc(i) for i in range(1, 7)]
    assert await LostInTheMiddleReorder().acompress_documents(docs, "q") == LostInTheMiddleReorder().compress_documents(
        docs, "q"
    )


def test_answer_chain_lost_in_the_middle_uses_the_same_order_for_even_n():
    docs = [_doc(i) for i in range(1, 5)]
    assert [d.metadata["doc_id"] for d in prepare_context(docs, lost_in_the_middle=True)] == ["d1", "d3", "d4", "d2"]
    spy = SpyChatModel(reply="ok [4]")
    out = make_answer_chain(spy, lost_in_the_middle=True).invoke({"question": "q?", "documents": docs})
    prompt = spy.prompts[0]
    assert prompt.index("[1] T1") < prompt.index("[2] T3") < prompt.index("[3] T4") < prompt.index("[4] T2")
    assert out["citations"][0]["chunk_id"] == "d2#0"  # [4] is the second most relevant, shown last
