"""A retriever answers only from the documents its index was built from, and never returns a RESTRICTED chunk.

Regression tests for a new-user trial (issue 16): after ``r.docs[0] = secret`` (an in-place edit of the list),
``r.model_copy(update={"docs": [secret]})``, or a caller labelling its own ``Document`` RESTRICTED after
construction, ``BM25Retriever`` / ``DenseRetriever`` returned the RESTRICTED chunk or the wrong chunk, and
``DenseRetriever.model_copy(update={"docs": extra})`` raised ``IndexError``.
"""

from __future__ import annotations

import asyncio
import copy
import pickle
from typing import Any

import pytest
from langchain_core.documents import Document

from langchain_ragspine import BM25Retriever, DenseRetriever, HybridRetriever
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.retrievers.base import ContractRetriever, IndexedDocuments, SyncCall

EMB = HashingEmbeddings(256)
SECRET = Document("TOP SECRET payroll apple banana", metadata={"chunk_id": "S1", "sensitivity": "restricted"})


def _docs() -> list[Document]:
    return [Document("apple banana", metadata={"chunk_id": "A1"}), Document("cherry date", metadata={"chunk_id": "A2"})]


BUILDERS = {
    "bm25": lambda docs: BM25Retriever.from_documents(docs, k=2),
    "dense": lambda docs: DenseRetriever.from_documents(docs, EMB, k=2),
    "hybrid": lambda docs: HybridRetriever.from_documents(docs, EMB, k=2),
}
INDEXED = ("bm25", "dense")


def _leaks(docs: list[Document]) -> bool:
    return any("SECRET" in d.page_content or d.metadata.get("sensitivity") for d in docs)


@pytest.mark.parametrize("name", INDEXED)
@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d.__setitem__(0, SECRET),
        lambda d: d.append(SECRET),
        lambda d: d.extend([SECRET]),
        lambda d: d.insert(0, SECRET),
        lambda d: d.__delitem__(0),
        lambda d: d.pop(),
        lambda d: d.remove(d[0]),
        lambda d: d.clear(),
        lambda d: d.sort(key=lambda x: x.page_content),
        lambda d: d.reverse(),
        lambda d: d.__iadd__([SECRET]),
    ],
)
def test_an_in_place_edit_of_docs_is_refused_and_changes_nothing(name, edit):
    r = BUILDERS[name](_docs())
    with pytest.raises(TypeError, match=r"docs is the list its index was built from.*assign a new list"):
        edit(r.docs)
    assert [d.metadata["chunk_id"] for d in r.docs] == ["A1", "A2"]
    assert [d.id for d in r.invoke("apple banana", k=1)] == ["A1"]


@pytest.mark.parametrize("name", INDEXED)
def test_augmented_assignment_is_refused_too(name):
    r = BUILDERS[name](_docs())
    with pytest.raises(TypeError, match="cannot be edited in place"):
        r.docs += [SECRET]
    assert not _leaks(r.invoke("TOP SECRET payroll apple banana"))


@pytest.mark.parametrize("name", INDEXED)
def test_docs_still_reads_as_a_list(name):
    src = _docs()
    r = BUILDERS[name](src)
    assert isinstance(r.docs, list) and isinstance(r.docs, IndexedDocuments)
    assert r.docs == src and len(r.docs) == 2 and r.docs[1:][0].metadata["chunk_id"] == "A2"
    plain = list(r.docs)
    plain.append(SECRET)  # a plain copy is the caller's to edit
    assert len(r.docs) == 2
    for clone in (copy.copy(r.docs), copy.deepcopy(r.docs), pickle.loads(pickle.dumps(r.docs))):
        assert clone == r.docs and type(clone) is IndexedDocuments


@pytest.mark.parametrize("name", INDEXED)
def test_model_copy_with_new_docs_rebuilds_the_index(name):
    r = BUILDERS[name](_docs())
    secret_copy = r.model_copy(update={"docs": [SECRET, SECRET]})
    assert secret_copy.docs == [] and secret_copy.invoke("TOP SECRET payroll") == []
    extra = [Document("fig grape", metadata={"chunk_id": "F1"})]
    other = r.model_copy(update={"docs": extra})  # DenseRetriever raised IndexError here
    assert [d.id for d in other.invoke("fig grape")] == ["F1"]
    assert [d.id for d in r.invoke("apple banana", k=1)] == ["A1"]  # the original is unchanged
    deep = r.model_copy(update={"k": 1}, deep=True)
    assert [d.id for d in deep.invoke("apple banana")] == ["A1"]


@pytest.mark.parametrize("name", [*INDEXED, "hybrid"])
def test_a_callers_document_labelled_restricted_after_construction_is_never_returned(name):
    src = _docs()
    r = BUILDERS[name](src)
    assert "A1" in [d.id for d in r.invoke("apple banana", k=2)]
    src[0].metadata["sensitivity"] = "restricted"  # labelled after construction: the exit gate sees it
    for got in (r.invoke("apple banana", k=2), asyncio.run(r.ainvoke("apple banana", k=2))):
        assert "A1" not in [d.id for d in got] and not _leaks(got)
    if name in INDEXED:  # indexed as given, not copied (a million copies cost ~0.8 GB); the caller's list untouched
        assert r.docs[0] is src[0] and len(src) == len(_docs())


@pytest.mark.parametrize("name", INDEXED)
def test_a_document_of_docs_labelled_restricted_in_place_is_never_returned(name):
    r = BUILDERS[name](_docs())
    r.docs[0].metadata["sensitivity"] = "RESTRICTED"
    assert "A1" not in [d.id for d in r.invoke("apple banana")]
    assert "A1" not in [d.id for d in asyncio.run(r.ainvoke("apple banana"))]


def test_a_hybrid_channel_cannot_be_edited_in_place():
    h = HybridRetriever.from_documents(_docs(), EMB, k=2)
    for channel in h.retrievers:
        with pytest.raises(TypeError, match="cannot be edited in place"):
            channel.docs[0] = SECRET  # type: ignore[attr-defined]
    assert not _leaks(h.invoke("TOP SECRET payroll apple banana"))


@pytest.mark.parametrize("name", INDEXED)
def test_docs_replaced_behind_the_retrievers_back_is_one_clear_error(name):
    r = BUILDERS[name](_docs())
    r.__dict__["docs"] = [SECRET]
    with pytest.raises(ValueError, match="not the list its index was built from"):
        r.invoke("apple banana")


class _Leaky(ContractRetriever):
    """A retriever whose hook returns a RESTRICTED chunk (as a buggy subclass or a foreign child could)."""

    def _retrieve(self, query: str, call: SyncCall) -> list[Document]:
        return [SECRET, Document("fine", id="ok"), Document("x", metadata={"ＳＥＮＳＩＴＩＶＩＴＹ": "Restricted."})]


def test_every_contract_retriever_result_passes_the_gate():
    r = _Leaky()
    assert [d.id for d in r.invoke("q")] == ["ok"]
    assert [d.id for d in asyncio.run(r.ainvoke("q"))] == ["ok"]


def test_vector_store_results_are_copies_and_gated(tmp_path):
    from langchain_ragspine import RagSpineVectorStore

    store = RagSpineVectorStore(tmp_path / "s", EMB)
    store.add_texts(["apple banana", "cherry date"], [{"tags": ["a"]}, {}], ids=["A1", "A2"])
    got = store.get_by_ids(["A1"])[0]
    got.metadata["sensitivity"] = "RESTRICTED"  # the caller's result, not the store's record
    got.metadata.pop("tags")
    searches: list[Any] = [
        lambda: store.get_by_ids(["A1"]),
        lambda: store.similarity_search("apple banana", k=2),
        lambda: [d for d, _ in store.similarity_search_with_score("apple banana", k=2)],
        lambda: store.max_marginal_relevance_search("apple banana", k=2),
        lambda: store.hybrid_search("apple banana", k=2),
        lambda: store.bm25_search("apple banana", k=2),
        lambda: store.as_retriever(search_type="mmr").invoke("apple banana"),
    ]
    for search in searches:
        a1 = [d for d in search() if d.id == "A1"]
        assert a1 and a1[0].metadata["tags"] == ["a"] and "sensitivity" not in a1[0].metadata
    store.close()


# -- identity of documents that bring none ----------------------------------------------------------------------------
def _plain_chunks() -> list[Document]:
    """What LangChain's RecursiveCharacterTextSplitter gives: neither ``chunk_id`` nor ``id`` (the trial's input)."""
    from langchain_text_splitters import RecursiveCharacterTextSplitter

    text = "\n\n".join(f"Paragraph {i}: apple orchard notes number {i} about harvest." for i in range(6))
    splitter = RecursiveCharacterTextSplitter(chunk_size=80, chunk_overlap=0)
    return splitter.split_documents([Document(text, metadata={"source": "notes.txt"})])


def test_hybrid_returns_each_plain_langchain_chunk_once_with_an_id():
    docs = _plain_chunks()
    assert len(docs) == 6 and all(d.id is None and "chunk_id" not in d.metadata for d in docs)
    res = HybridRetriever.from_documents(docs, EMB, k=12).invoke("apple orchard harvest")
    assert len(res) == 6  # was 12: every chunk twice, id=None
    assert all(d.id is not None and d.id == d.metadata["chunk_id"] for d in res)
    assert sorted(d.page_content for d in res) == sorted(d.page_content for d in docs)
    assert all(d.id is None and "chunk_id" not in d.metadata for d in docs)  # the caller's documents untouched


@pytest.mark.parametrize("name", INDEXED)
def test_plain_chunks_get_deterministic_ids_that_channels_share(name):
    docs = _plain_chunks()
    first = {d.page_content: d.id for d in BUILDERS[name](docs).invoke("apple orchard harvest", k=6)}
    again = {d.page_content: d.id for d in BUILDERS[name](_plain_chunks()).invoke("apple orchard harvest", k=6)}
    other = {d.page_content: d.id for d in BUILDERS["bm25" if name == "dense" else "dense"](docs).invoke(
        "apple orchard harvest", k=6)}
    assert first == again == other and len(set(first.values())) == 6
    assert all(i is not None and i.startswith("chunk-") for i in first.values())


def test_given_identities_are_kept_and_equal_texts_stay_two_chunks():
    docs = [
        Document("same text", metadata={"chunk_id": "c#0"}),
        Document("same text", id="given"),
        Document("same text"),
        Document("same text"),
    ]
    r = BM25Retriever.from_documents(docs, k=4)
    ids = {d.id for d in r.invoke("same text")}
    assert len(ids) == 4 and {"c#0", "given", "chunk-2e68a7bba11b90d1", "chunk-2e68a7bba11b90d1-1"} == ids
    assert r.docs[0].id is None and r.docs[1].metadata.get("chunk_id") is None  # only the absent identity is set


# Trial 16b: ids were "chunk-{position}-{hash}", so channels built separately from the same chunks in another order
# or from a subset disagreed, and the hybrid retriever returned every chunk twice.
@pytest.mark.parametrize(
    "dense_docs", [lambda d: d[::-1], lambda d: d[2:], lambda d: d[1::2] + d[::2]], ids=["reversed", "subset", "shuffled"]
)
def test_channels_built_separately_in_any_order_or_subset_agree(dense_docs):
    docs = _plain_chunks()
    hybrid = HybridRetriever(
        retrievers=[BM25Retriever.from_documents(docs, k=6), DenseRetriever.from_documents(dense_docs(docs), EMB, k=6)],
        k=12,
    )
    res = hybrid.invoke("apple orchard harvest")
    assert len(res) == 6 and len({d.page_content for d in res}) == 6  # was 12 (reversed) / 10 (subset)
    assert all(d.id == d.metadata["chunk_id"] for d in res)


def test_repeated_texts_stay_distinct_chunks_and_match_by_order_of_repetition():
    same = [Document("apple pie"), Document("pear"), Document("apple pie")]
    bm25 = {d.id for d in BM25Retriever.from_documents(same, k=3).docs}
    dense = {d.id for d in DenseRetriever.from_documents(same[::-1], EMB, k=3).docs}
    assert bm25 == dense and len(bm25) == 3
    res = HybridRetriever.from_documents(same, EMB, k=3).invoke("apple pie")
    assert [d.page_content for d in res].count("apple pie") == 2


@pytest.mark.parametrize("name", [*INDEXED, "hybrid"])
@pytest.mark.parametrize(
    "docs",
    [
        [Document("apple one", id="i1"), Document("apple two", id="i2")],
        [Document("apple one", id="my-0", metadata={"source": "x"}), Document("apple two", id="my-1")],
    ],
)
def test_a_document_keyed_by_id_alone_returns_chunk_id_equal_to_id(name, docs):
    res = BUILDERS[name](docs).invoke("apple")
    assert res and all(d.id is not None and d.id == d.metadata.get("chunk_id") for d in res)
    assert all("chunk_id" not in d.metadata for d in docs)  # the caller's documents untouched


def test_from_texts_with_ids_returns_chunk_id_equal_to_id():
    res = BM25Retriever.from_texts(["apple one", "apple two"], ids=["i1", "i2"]).invoke("apple")
    assert sorted((d.id, d.metadata["chunk_id"]) for d in res) == [("i1", "i1"), ("i2", "i2")]


@pytest.mark.parametrize("name", [*INDEXED, "hybrid"])
def test_one_identity_given_to_two_different_texts_warns_once_naming_it(name):
    docs = [Document("apple pie recipe", metadata={"chunk_id": "same"}),
            Document("apple tart other", metadata={"chunk_id": "same"})]
    with pytest.warns(UserWarning, match="'same'") as caught:
        BUILDERS[name](docs)
    assert len([w for w in caught if "share an identity" in str(w.message)]) == (2 if name == "hybrid" else 1)


@pytest.mark.parametrize("name", INDEXED)
def test_the_same_chunk_given_twice_does_not_warn(name, recwarn):
    doc = Document("apple pie recipe", metadata={"chunk_id": "same"})
    BUILDERS[name]([doc, Document("apple pie recipe", metadata={"chunk_id": "same"}), Document("pear")])
    assert not [w for w in recwarn if "share an identity" in str(w.message)]
