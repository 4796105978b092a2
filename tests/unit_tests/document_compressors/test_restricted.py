import pytest
from langchain_core.documents import Document

from langchain_ragspine.document_compressors import RESTRICTED_SENSITIVITY, RestrictedGate, is_restricted


def _doc(i, sensitivity):
    md = {"chunk_id": f"d#{i}"}
    if sensitivity is not ...:
        md["sensitivity"] = sensitivity
    return Document(page_content=f"text {i}", metadata=md)


@pytest.mark.parametrize(
    "label",
    [
        "RESTRICTED", "restricted", " Restricted\n", "\tRESTRICTED ",
        # look-alikes found in a fresh-user trial (regressions): full width, zero-width space, Turkish dotted I
        "ＲＥＳＴＲＩＣＴＥＤ", "RESTRICTED\u200b", "RESTR\u200bICTED", "RESTRİCTED", "ｒｅｓｔｒｉｃｔｅｄ",
        # issue 8: RESTRICTED among other words or punctuation is RESTRICTED (the most restrictive reading)
        "RESTRICTED, INTERNAL", "Restricted.", "RESTRICTED-ISH", "RESTRICTED（社外秘）", "internal/restricted",
    ],
)
def test_restricted_labels_are_dropped_case_insensitively(label):
    docs = [_doc(0, "PUBLIC"), _doc(1, label), _doc(2, "INTERNAL")]
    out = RestrictedGate().compress_documents(docs, query="q")
    assert [d.metadata["chunk_id"] for d in out] == ["d#0", "d#2"]
    assert len(docs) == 3  # input untouched


# (a number used to pass too; it is not a readable label, so it is RESTRICTED now: test_sensitivity_fail_closed.py)
@pytest.mark.parametrize("label", ["PUBLIC", "", None, ..., "UNRESTRICTED", "PUBLIC, INTERNAL", "社外秘"])
def test_other_labels_pass(label):
    assert not is_restricted(_doc(0, label).metadata)
    assert len(RestrictedGate().compress_documents([_doc(0, label)], query="q")) == 1


def test_constant():
    assert RESTRICTED_SENSITIVITY == "RESTRICTED"
    assert is_restricted(_doc(0, "restricted"))  # a Document is accepted too


async def test_async_and_in_a_compression_pipeline_around_langchains_retriever():
    import warnings

    from langchain_classic.retrievers import ContextualCompressionRetriever

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from langchain_community.retrievers import BM25Retriever as LangChainBM25

    from langchain_ragspine.tokenizers import cjk_tokenize

    docs = [
        Document(page_content="鍵の交換手順 社外秘", metadata={"chunk_id": "r#0", "sensitivity": "Restricted"}),
        Document(page_content="鍵の交換は年に一度", metadata={"chunk_id": "p#0", "sensitivity": "PUBLIC"}),
    ]
    base = LangChainBM25.from_documents(docs, k=2, preprocess_func=cjk_tokenize)  # knows nothing of labels
    assert len(base.invoke("鍵の交換")) == 2
    gated = ContextualCompressionRetriever(base_compressor=RestrictedGate(), base_retriever=base)
    assert [d.metadata["chunk_id"] for d in gated.invoke("鍵の交換")] == ["p#0"]
    assert [d.metadata["chunk_id"] for d in await gated.ainvoke("鍵の交換")] == ["p#0"]


def test_regression_foreign_documents_with_capitalised_key_or_list_label_are_restricted():
    # documents from another loader, gated by RestrictedGate around a foreign retriever (second user trial)
    assert is_restricted({"Sensitivity": "RESTRICTED"})
    assert is_restricted({" SENSITIVITY ": "restricted"})
    assert is_restricted({"sensitivity": ["INTERNAL", "RESTRICTED"]})
    assert not is_restricted({"sensitivity": ["INTERNAL", "PUBLIC"]})
    assert not is_restricted({"classification": "RESTRICTED"})


def test_regression_foreign_documents_with_folded_key_spellings_are_restricted():
    # issue 8: the key is folded like the value (NFKC width, case, surrounding and zero-width spaces)
    for key in ["Ｓｅｎｓｉｔｉｖｉｔｙ", " sensitivity ", "sensi\u200btivity", "SENSITIVITY\u3000", "ｓｅｎｓｉｔｉｖｉｔｙ"]:
        assert is_restricted({key: "RESTRICTED"}), key
        assert [d.metadata for d in RestrictedGate().compress_documents([Document("x", metadata={key: "restricted."})], "q")] == []
    assert not is_restricted({"sensitivity_note": "RESTRICTED"})
