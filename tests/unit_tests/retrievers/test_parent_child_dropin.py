"""ParentChildRetriever as a drop-in for LangChain's ParentDocumentRetriever (issue 27 §2): the same constructor
arguments and add_documents, ``k`` parents (constructor and call), the deprecated ``parent_k`` / ``child_k``,
verbatim parents and children with offsets from any splitter, and the RESTRICTED gate before the splitter, the
embedding model and the docstore."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

import pytest
from langchain_classic.retrievers import ParentDocumentRetriever
from langchain_classic.retrievers.multi_vector import SearchType
from langchain_classic.storage import LocalFileStore, create_kv_docstore
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.stores import InMemoryStore
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_text_splitters import RecursiveCharacterTextSplitter, TextSplitter

from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.retrievers import BM25Retriever, ParentChildRetriever
from langchain_ragspine.retrievers.parent_child import ByteStoreDocstore
from langchain_ragspine.text_splitters import (
    LayoutTextSplitter,
    ParagraphTextSplitter,
    ParentChildTextSplitter,
)

CANARY = "CANARYZQX"

RAIN = (
    "# Rainy season\n\nThe rainy season starts in June in Tokyo. It brings humid air and long showers.\n\n"
    "Farmers plant rice during the rainy season. The paddies need the water.\n\n"
    "# Typhoons\n\nTyphoons arrive in autumn. They bring strong wind and storm surges.\n"
)
TEA = (
    "# Green tea\n\nGreen tea is picked in May. The first flush is the most prized.\n\n"
    "Matcha is ground from shaded leaves. It is whisked, not steeped.\n"
)
SNOW = "# Snow\n\nSnow falls in Hokkaido from November. Ski resorts open in December.\n"
SECRET = f"# Vault\n\nThe vault code is {CANARY}. Guards rotate at noon. The {CANARY} key opens the east door.\n"


def _docs() -> list[Document]:
    return [
        Document(RAIN, metadata={"source": "rain.md", "topic": "weather", "lang": "en"}),
        Document(TEA, metadata={"source": "tea.md", "topic": "food", "lang": "en"}),
        Document(SNOW, metadata={"source": "snow.md", "topic": "weather", "lang": "en"}),
    ]


TSUYU = "# 梅雨\n\n梅雨は六月に始まる。"


def _raw(doc_id: str) -> str:
    return {"rain.md": RAIN, "tea.md": TEA, "snow.md": SNOW, "規程/梅雨 2024.md": TSUYU}[doc_id]


def _assert_verbatim(docs: list[Document]) -> None:
    for d in docs:
        md = d.metadata
        assert _raw(md["doc_id"])[md["start_index"] : md["end_index"]] == d.page_content
        assert md["source_locator"] == f"{md['source']}#{md['start_index']}-{md['end_index']}"


def _langchain_snippet(cls: type, **extra: Any) -> Any:
    """The ParentDocumentRetriever how-to, with ``cls`` in its place (the only line that differs)."""
    child_splitter = RecursiveCharacterTextSplitter(chunk_size=60, chunk_overlap=0)
    parent_splitter = RecursiveCharacterTextSplitter(chunk_size=160, chunk_overlap=0)
    vectorstore = InMemoryVectorStore(HashingEmbeddings(256))
    store = InMemoryStore()
    retriever = cls(vectorstore=vectorstore, docstore=store, child_splitter=child_splitter,
                    parent_splitter=parent_splitter, **extra)
    retriever.add_documents(_docs(), ids=None)
    return retriever


# -- the swap ---------------------------------------------------------------------------------------------------
def test_the_parent_document_retriever_snippet_runs_with_the_class_name_swapped():
    theirs = _langchain_snippet(ParentDocumentRetriever)
    ours = _langchain_snippet(ParentChildRetriever)
    question = "When does the rainy season start?"
    their_texts = [d.page_content for d in theirs.invoke(question)]
    hits = ours.invoke(question)
    assert hits and hits[0].page_content in their_texts  # the same best parent
    assert "rainy season starts in June" in hits[0].page_content
    assert len(hits) == len({h.id for h in hits}) == min(5, len(list(ours.docstore.yield_keys())))
    _assert_verbatim(hits)
    for h in hits:  # each parent holds the children that found it, verbatim at their offsets
        assert h.id == h.metadata["chunk_id"] == h.metadata["parent_id"] and h.metadata["child_ids"]
        for cid in h.metadata["child_ids"]:
            child = ours.vectorstore.get_by_ids([cid])[0]
            assert child.metadata["parent_id"] == h.id
            assert h.metadata["start_index"] <= child.metadata["start_index"] <= child.metadata["end_index"] <= \
                h.metadata["end_index"]
    _assert_verbatim(ours.vectorstore.get_by_ids([c for h in hits for c in h.metadata["child_ids"]]))
    # LangChain's attributes are there too
    assert isinstance(ours.docstore, InMemoryStore) and isinstance(ours.vectorstore, InMemoryVectorStore)
    assert ours.id_key == "parent_id" and ours.search_type == "similarity"


def test_ids_are_deterministic_and_a_second_add_writes_the_same_keys():
    one, two = _langchain_snippet(ParentChildRetriever), _langchain_snippet(ParentChildRetriever)
    keys = sorted(one.docstore.yield_keys())
    assert keys == sorted(two.docstore.yield_keys())
    assert keys[0] == "rain.md#p0"
    children = len(one.vectorstore.store)
    one.add_documents(_docs())  # the same documents again: the same keys, no duplicates
    assert sorted(one.docstore.yield_keys()) == keys and len(one.vectorstore.store) == children


def test_ids_name_the_documents():
    retriever = ParentChildRetriever(vectorstore=InMemoryVectorStore(HashingEmbeddings(64)), docstore=InMemoryStore(),
                                     child_splitter=ParagraphTextSplitter(60, 0))
    retriever.add_documents(_docs()[:2], ids=["r", "t"])
    assert sorted(retriever.docstore.yield_keys()) == ["r#p0", "t#p0"]  # no parent_splitter: a document is one parent
    with pytest.raises(ValueError, match="got 2 documents and 1 ids"):
        retriever.add_documents(_docs()[:2], ids=["r"])
    pages = [Document("Page one of the manual.", metadata={"source": "m.pdf", "page": 0}),
             Document("Page two of the manual.", metadata={"source": "m.pdf", "page": 1})]
    with pytest.raises(ValueError, match=r"documents 0 and 1 have the same doc_id 'm.pdf'.*pass ids="):
        retriever.add_documents(pages)
    retriever.add_documents(pages, ids=["m.pdf:0", "m.pdf:1"])
    assert {"m.pdf:0#p0", "m.pdf:1#p0"} <= set(retriever.docstore.yield_keys())


def test_a_child_of_an_earlier_version_is_not_returned():
    """A document added again under its id with other text: its old children beyond the new ones stay in the vector
    store (add_documents does not delete), but their parent no longer holds them, so they find nothing."""
    retriever = ParentChildRetriever(vectorstore=InMemoryVectorStore(HashingEmbeddings(256)), docstore=InMemoryStore(),
                                     child_splitter=ParagraphTextSplitter(60, 0), k=5)
    retriever.add_documents([Document(RAIN, metadata={"source": "rain.md"})])
    assert "Typhoons arrive" in retriever.invoke("typhoons arrive in autumn")[0].page_content
    retriever.add_documents([Document("# Rainy season\n\nShort now.\n", metadata={"source": "rain.md"})])
    assert any("Typhoons" in d["text"] for d in retriever.vectorstore.store.values())  # the stale child is there ...
    top = retriever.vectorstore.similarity_search("typhoons arrive in autumn storm surges", k=1)[0]
    assert "Typhoons" in top.page_content  # the best child is the stale one ...
    assert retriever.invoke("typhoons arrive in autumn storm surges", k=5) != []  # (the new child matches a little)
    stale_only = ParentChildRetriever(vectorstore=retriever.vectorstore, docstore=retriever.docstore, fetch_k=1)
    assert stale_only.invoke("typhoons arrive in autumn storm surges") == []  # ... and alone it finds nothing
    assert [d.page_content for d in retriever.invoke("short now")] == ["# Rainy season\n\nShort now.\n"]


# -- k --------------------------------------------------------------------------------------------------------------
def test_k_is_the_number_of_distinct_parents_at_construction_and_per_call():
    retriever = _langchain_snippet(ParentChildRetriever, k=2)
    question = "rainy season typhoons green tea snow"
    hits = retriever.invoke(question)
    assert len(hits) == 2 and len({h.id for h in hits}) == 2
    assert len(retriever.invoke(question, k=3)) == 3
    assert len(retriever.invoke(question, k=1)) == 1
    everything = retriever.invoke(question, k=50)
    assert len(everything) == len({h.id for h in everything}) == len(list(retriever.docstore.yield_keys()))
    # fetch_k is the children asked for: one child, one parent, whatever k
    assert len(ParentChildRetriever(vectorstore=retriever.vectorstore, docstore=retriever.docstore, k=5,
                                    fetch_k=1).invoke(question)) == 1


def test_one_parent_with_many_children_in_the_top_is_returned_once():
    text = "\n\n".join(f"Record {i}: the rainy season brought rain to Tokyo." for i in range(12))
    retriever = ParentChildRetriever(vectorstore=InMemoryVectorStore(HashingEmbeddings(256)), docstore=InMemoryStore(),
                                     child_splitter=ParagraphTextSplitter(60, 0), k=3)
    retriever.add_documents([Document(text, metadata={"source": "log.md"}), *_docs()[1:]])
    hits = retriever.invoke("rainy season rain Tokyo")
    assert [h.id for h in hits].count("log.md#p0") == 1 and len(hits) == 3
    assert len(hits[0].metadata["child_ids"]) == 12  # all twelve matched children, on one parent


def test_search_kwargs_k_is_fetch_k_and_search_type_is_langchains():
    retriever = _langchain_snippet(ParentChildRetriever, search_kwargs={"k": 1})
    assert retriever.fetch_k == 1 and len(retriever.invoke("green tea matcha")) == 1
    mmr = _langchain_snippet(ParentChildRetriever, search_type=SearchType.mmr, search_kwargs={"fetch_k": 30})
    assert mmr.search_type == "mmr" and mmr.child_retriever.search_type == "mmr"
    assert "Matcha" in mmr.invoke("matcha whisked shaded leaves")[0].page_content
    with pytest.raises(TypeError, match=r"fetch_k=3 and search_kwargs\['k'\]=1"):
        _langchain_snippet(ParentChildRetriever, search_kwargs={"k": 1}, fetch_k=3)
    with pytest.raises(ValueError, match="search_type"):
        _langchain_snippet(ParentChildRetriever, search_type="nearest")


def test_parent_k_and_child_k_are_deprecated_aliases():
    retriever = _langchain_snippet(ParentChildRetriever)
    common = {"vectorstore": retriever.vectorstore, "docstore": retriever.docstore}
    with pytest.warns(DeprecationWarning, match=r"parent_k=\.\.\.\) is deprecated: pass k=") as record:
        old = ParentChildRetriever(**common, parent_k=2)
    assert record[0].filename == __file__  # points at the caller's line
    assert old.k == 2 and len(old.invoke("rainy season typhoons green tea snow")) == 2
    with pytest.warns(DeprecationWarning, match=r"child_k=\.\.\.\) is deprecated: pass fetch_k="):
        assert ParentChildRetriever(**common, child_k=7).fetch_k == 7
    with pytest.warns(DeprecationWarning, match="parent_k is deprecated: use k"):
        assert old.parent_k == 2
    with pytest.warns(DeprecationWarning), pytest.raises(TypeError, match=r"got k=3 and parent_k=2: parent_k is the "
                                                                          r"deprecated name of k; pass k only"):
        ParentChildRetriever(**common, k=3, parent_k=2)
    with pytest.warns(DeprecationWarning), pytest.raises(TypeError, match=r"fetch_k=9 and child_k=8"):
        ParentChildRetriever(**common, fetch_k=9, child_k=8)
    with pytest.warns(DeprecationWarning):
        assert ParentChildRetriever(**common, k=3, parent_k=3).k == 3  # the same value twice: no conflict
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ParentChildRetriever(**common, k=3, fetch_k=9)  # the new names warn nothing


# -- verbatim slices from any splitter --------------------------------------------------------------------------------
@pytest.mark.parametrize("child, parent", [
    (RecursiveCharacterTextSplitter(chunk_size=50, chunk_overlap=10), None),
    (RecursiveCharacterTextSplitter(chunk_size=50, chunk_overlap=10), RecursiveCharacterTextSplitter(chunk_size=150, chunk_overlap=0)),
    (ParagraphTextSplitter(50, 10), LayoutTextSplitter(150, 0)),
    (ParentChildTextSplitter(50, 10, parent_chunk_size=150), None),
])
def test_parents_and_children_are_verbatim_slices_whatever_the_splitters(child, parent):
    retriever = ParentChildRetriever(vectorstore=InMemoryVectorStore(HashingEmbeddings(64)), docstore=InMemoryStore(),
                                     child_splitter=child, parent_splitter=parent)
    retriever.add_documents(_docs())
    parents = retriever.docstore.mget(list(retriever.docstore.yield_keys()))
    children = retriever.vectorstore.get_by_ids(list(retriever.vectorstore.store))
    assert parents and len(children) > len(parents)
    _assert_verbatim(parents)
    _assert_verbatim(children)
    by_id = {p.id: p for p in parents}
    for c in children:
        p = by_id[c.metadata["parent_id"]]
        assert p.metadata["start_index"] <= c.metadata["start_index"] < c.metadata["end_index"] <= p.metadata["end_index"]
        assert c.metadata["parent_locator"] == p.metadata["source_locator"]
    if isinstance(parent, LayoutTextSplitter) or isinstance(child, ParentChildTextSplitter):  # sections: headings
        assert {tuple(p.metadata["heading"]) for p in parents} >= {("Rainy season",), ("Typhoons",)}
        assert all(c.metadata["heading"] == by_id[c.metadata["parent_id"]].metadata["heading"] for c in children)


class _Rewriting(TextSplitter):
    """A splitter that changes the text (lower-cases it): its pieces are no slice of the document."""

    def split_text(self, text: str) -> list[str]:
        return [p.lower() for p in text.split("\n\n") if p.strip()]


def test_a_splitter_that_rewrites_the_text_is_refused_and_nothing_is_written():
    retriever = ParentChildRetriever(vectorstore=InMemoryVectorStore(HashingEmbeddings(64)), docstore=InMemoryStore(),
                                     child_splitter=_Rewriting())
    with pytest.raises(ValueError, match=r"_Rewriting returned a piece that is not a verbatim slice of document "
                                         r"'rain.md'"):
        retriever.add_documents(_docs())
    assert list(retriever.docstore.yield_keys()) == [] and retriever.vectorstore.store == {}


# -- RESTRICTED -------------------------------------------------------------------------------------------------------
class _SpyEmbeddings(Embeddings):
    def __init__(self) -> None:
        self.inner = HashingEmbeddings(64)
        self.texts: list[str] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        self.texts.append(text)
        return self.inner.embed_query(text)


class _SpySplitter(RecursiveCharacterTextSplitter):
    seen: list[str]

    def split_text(self, text: str) -> list[str]:
        self.seen.append(text)
        return super().split_text(text)


@pytest.mark.parametrize("label", [{"sensitivity": "RESTRICTED"}, {"Sensitivity": ["INTERNAL", "restricted"]}])
def test_restricted_documents_reach_no_splitter_embedding_model_or_docstore(label):
    emb, splitter = _SpyEmbeddings(), _SpySplitter(chunk_size=50, chunk_overlap=0)
    splitter.seen = []
    retriever = ParentChildRetriever(vectorstore=InMemoryVectorStore(emb), docstore=InMemoryStore(),
                                     child_splitter=splitter)
    docs = [Document(SECRET, metadata={"source": "vault.md", **label}), *_docs()]
    retriever.add_documents(docs, ids=["vault", "rain", "tea", "snow"])
    asyncio.run(retriever.aadd_documents(docs[:1], ids=["vault2"]))
    assert emb.texts and not any(CANARY in t for t in emb.texts)  # embedded: the public children only
    assert splitter.seen and not any(CANARY in t for t in splitter.seen)
    keys = list(retriever.docstore.yield_keys())
    assert keys and not any(k.startswith("vault") for k in keys)
    assert not any(CANARY in d["text"] for d in retriever.vectorstore.store.values())
    assert all(CANARY not in h.page_content for h in retriever.invoke(f"vault code {CANARY} east door", k=10))


def test_a_parent_relabelled_restricted_or_out_of_the_filter_is_not_returned():
    retriever = _langchain_snippet(ParentChildRetriever, k=10)
    question = "tea matcha"
    hit = retriever.invoke(question)[0]
    assert hit.metadata["doc_id"] == "tea.md"
    parent = retriever.docstore.mget([hit.id])[0]
    retriever.docstore.mset([(hit.id, Document(parent.page_content, id=parent.id,
                                               metadata={**parent.metadata, "sensitivity": "RESTRICTED"}))])
    assert hit.id not in [h.id for h in retriever.invoke(question)]  # the children still say PUBLIC
    retriever.docstore.mset([(hit.id, Document(parent.page_content, id=parent.id,
                                               metadata={**parent.metadata, "topic": "drink"}))])
    assert hit.id not in [h.id for h in retriever.invoke(question, filter={"topic": "food"})]  # checked on the parent
    assert retriever.invoke(question, filter={"topic": "drink"}) == []  # the children say "food": both must match


def test_the_call_filter_ands_with_the_stores_own_filter():
    retriever = _langchain_snippet(ParentChildRetriever, k=10,
                                   search_kwargs={"filter": lambda d: d.metadata["topic"] == "weather"})
    question = "rainy season typhoons green tea snow"
    assert {h.metadata["doc_id"] for h in retriever.invoke(question)} == {"rain.md", "snow.md"}
    assert {h.metadata["doc_id"] for h in retriever.invoke(question, filter={"source": "snow.md"})} == {"snow.md"}
    assert retriever.invoke(question, filter={"topic": "food"}) == []  # the store's filter and the call's: AND


# -- id_key, child_metadata_fields, persistence, refusals ------------------------------------------------------------
def test_id_key_and_child_metadata_fields():
    retriever = _langchain_snippet(ParentChildRetriever, id_key="parent", child_metadata_fields=["topic"])
    child = next(iter(retriever.vectorstore.store.values()))["metadata"]
    assert child["parent"] == child["parent_id"]
    assert "lang" not in child and child["topic"] and {"doc_id", "chunk_id", "start_index", "source_locator"} <= set(child)
    assert retriever.invoke("green tea")[0].metadata["doc_id"] == "tea.md"
    with pytest.raises(ValueError, match=r"id_key='doc_id' \(ParentDocumentRetriever's default\) cannot be used"):
        _langchain_snippet(ParentChildRetriever, id_key="doc_id")
    with pytest.raises(ValueError, match="id_key='chunk_id' is a key the package writes"):
        _langchain_snippet(ParentChildRetriever, id_key="chunk_id")


def test_parents_in_a_local_file_store_survive_a_new_retriever(tmp_path):
    """``byte_store=LocalFileStore(path)`` (ParentDocumentRetriever's persistent setup): the parent ids are escaped
    to the file-name characters LocalFileStore allows; a new retriever over the same files reads them."""
    vectorstore = InMemoryVectorStore(HashingEmbeddings(256))
    docs = [*_docs(), Document(TSUYU, metadata={"source": "規程/梅雨 2024.md"})]
    first = ParentChildRetriever(vectorstore=vectorstore, byte_store=LocalFileStore(tmp_path),
                                 child_splitter=ParagraphTextSplitter(60, 0))
    first.add_documents(docs)
    assert isinstance(first.docstore, ByteStoreDocstore)
    assert sorted(first.docstore.yield_keys()) == ["rain.md#p0", "snow.md#p0", "tea.md#p0", "規程/梅雨 2024.md#p0"]
    assert all(p.parent == tmp_path for p in tmp_path.rglob("*"))  # one flat file per parent, inside the store
    second = ParentChildRetriever(vectorstore=vectorstore, byte_store=LocalFileStore(tmp_path))
    hits = second.invoke("green tea first flush")
    assert hits[0].metadata["doc_id"] == "tea.md" and hits[0] == first.invoke("green tea first flush")[0]
    _assert_verbatim(hits)
    assert second.invoke("梅雨は六月")[0].metadata["source_locator"] == "規程/梅雨 2024.md#0-16"
    with pytest.raises(ValueError, match=r"docstore refused a parent id .*pass the byte store itself as byte_store="):
        ParentChildRetriever(vectorstore=vectorstore, docstore=create_kv_docstore(LocalFileStore(tmp_path / "kv")),
                             child_splitter=ParagraphTextSplitter(60, 0)).add_documents(_docs())


def test_what_is_missing_or_unsupported_is_refused_by_name(tmp_path):
    vectorstore, docstore = InMemoryVectorStore(HashingEmbeddings(64)), InMemoryStore()
    with pytest.raises(TypeError, match="needs child_retriever= .* or vectorstore="):
        ParentChildRetriever(docstore=docstore)
    with pytest.raises(TypeError, match="needs store= .* or docstore="):
        ParentChildRetriever(vectorstore=vectorstore)
    with pytest.raises(TypeError, match="got docstore= and byte_store="):
        ParentChildRetriever(vectorstore=vectorstore, docstore=docstore, byte_store=LocalFileStore(tmp_path))
    with pytest.raises(TypeError, match="search_type / search_kwargs with a child_retriever"):
        ParentChildRetriever(vectorstore.as_retriever(), docstore=docstore, search_kwargs={"k": 3})
    with pytest.raises(TypeError, match="add_documents needs child_splitter="):
        ParentChildRetriever(vectorstore=vectorstore, docstore=docstore).add_documents(_docs())
    bm25 = BM25Retriever.from_documents([Document("x", metadata={"chunk_id": "x#0", "parent_id": "x#p0"})])
    with pytest.raises(TypeError, match="add_documents needs vectorstore= and docstore="):
        ParentChildRetriever(bm25, docstore=docstore, child_splitter=ParagraphTextSplitter()).add_documents(_docs())
    with pytest.raises(TypeError, match="got store= and docstore="):
        ParentChildRetriever(bm25, InMemoryStore(), docstore=docstore)
    with pytest.raises(TypeError, match=r"'kk' \(did you mean 'k'"):
        ParentChildRetriever(vectorstore=vectorstore, docstore=docstore, kk=3)
    retriever = ParentChildRetriever(vectorstore=vectorstore, docstore=InMemoryStore(),
                                     child_splitter=ParagraphTextSplitter(60, 0))
    retriever.add_documents(_docs()[:1])
    retriever.docstore.mset([("rain.md#p0", b"bytes")])
    with pytest.raises(TypeError, match=r"docstore holds a bytes under parent id 'rain.md#p0'.*as byte_store="):
        retriever.invoke("rainy season")


async def test_async_add_and_invoke_match_sync():
    sync = _langchain_snippet(ParentChildRetriever, k=3)
    retriever = ParentChildRetriever(vectorstore=InMemoryVectorStore(HashingEmbeddings(256)), docstore=InMemoryStore(),
                                     child_splitter=RecursiveCharacterTextSplitter(chunk_size=60, chunk_overlap=0),
                                     parent_splitter=RecursiveCharacterTextSplitter(chunk_size=160, chunk_overlap=0),
                                     k=3)
    await retriever.aadd_documents(_docs())
    question = "rainy season typhoons green tea snow"
    assert [d.id for d in await retriever.ainvoke(question)] == [d.id for d in sync.invoke(question)]
    assert [d.id for d in await retriever.ainvoke(question, k=1)] == [d.id for d in sync.invoke(question, k=1)]


def test_configurable_fields_rebuild_the_retriever_from_its_fields(tmp_path):
    """configurable_fields builds the class again from the fields of the built retriever (child retriever and
    vector store, store and docstore, docstore and byte store all set): that is no conflict."""
    from langchain_core.runnables import ConfigurableField

    for extra in ({"search_kwargs": {"k": 30}}, {"byte_store": LocalFileStore(tmp_path)}):
        if "byte_store" in extra:
            retriever = ParentChildRetriever(vectorstore=InMemoryVectorStore(HashingEmbeddings(256)),
                                             child_splitter=ParagraphTextSplitter(60, 0), **extra)
            retriever.add_documents(_docs())
        else:
            retriever = _langchain_snippet(ParentChildRetriever, **extra)
        configurable = retriever.configurable_fields(k=ConfigurableField(id="parents"))
        question = "rainy season typhoons green tea snow"
        assert len(configurable.invoke(question, config={"configurable": {"parents": 2}})) == 2
        assert len(configurable.invoke(question)) == min(5, len(list(retriever.docstore.yield_keys())))


def test_byte_store_keys_round_trip_and_foreign_keys_are_left_alone():
    from langchain_core.stores import InMemoryByteStore

    raw = InMemoryByteStore()
    docstore = ByteStoreDocstore(raw)
    keys = ["rain.md#p0", "規程/梅雨 2024.md#p3", "a_b", "__", "x_5f_y"]
    docstore.mset([(k, Document(k, id=k)) for k in keys])
    assert all(set(e) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") for e in raw.store)
    assert sorted(docstore.yield_keys()) == sorted(keys)
    assert [d.page_content for d in docstore.mget(keys)] == keys
    raw.mset([("abc_def_", b"{}")])  # a key another writer left: listed as it is, no error
    assert "abc_def_" in list(docstore.yield_keys())
    raw.mset([("rain.md_23_p0", b"not json")])  # a damaged value: refused by name, not a crash deep inside
    with pytest.raises(ValueError, match="value for key 'rain.md#p0' is not a stored Document"):
        docstore.mget(["rain.md#p0"])
