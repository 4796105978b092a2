"""A vector-store retriever's own filter scopes every call (issue 25): ``as_retriever(search_kwargs={"filter": F})``
then ``invoke(q, filter=G)`` searches ``F AND G``, and ``filter=None`` keeps ``F`` — for every search type, sync
and async, on :class:`RagSpineVectorStore` and :class:`PostgresVectorStore` (LangChain's ``VectorStoreRetriever``
merges ``search_kwargs | kwargs``, so the call's filter used to replace the retriever's: the sales record came back
from an HR-scoped retriever, and ``filter=None`` returned everything).

The PostgreSQL cases need the session's PostgreSQL (``pg_server`` in ``tests/conftest.py``) and skip without it.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.vectorstores import VectorStore

from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.retrievers.contract import invoke_retriever
from langchain_ragspine.retrievers.embed_as import DocumentRoleVectorStoreRetriever
from langchain_ragspine.vectorstores import RagSpineVectorStore, ScopedVectorStoreRetriever

EMB = HashingEmbeddings(64)

RECORDS = [
    Document(page_content="falcon migration report", metadata={"dept": "hr", "year": 2024}, id="hr"),
    Document(page_content="falcon migration report", metadata={"dept": "sales", "year": 2024}, id="sales"),
    Document(page_content="falcon migration report", metadata={"dept": "hr", "year": 2020}, id="hr-old"),
]

#: search_kwargs per search type, so every record is a candidate (a threshold of 0 keeps every match)
SEARCH_KWARGS: dict[str, dict[str, Any]] = {
    "similarity": {"k": 10},
    "mmr": {"k": 10, "fetch_k": 10},
    "similarity_score_threshold": {"k": 10, "score_threshold": 0.0},
    "bm25": {"k": 10},
    "hybrid": {"k": 10},
}
#: the search types of each store's retriever: every one on both backends (issue 26, B6; PostgresVectorStore had
#: LangChain's three only)
TYPES = {"dir": list(SEARCH_KWARGS), "pg": list(SEARCH_KWARGS)}


@pytest.fixture(params=["dir", "pg"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, VectorStore]]:
    if request.param == "dir":
        s = RagSpineVectorStore(tmp_path / "S", EMB)
        s.add_documents(RECORDS)
        yield "dir", s
        s.close()
        return
    from langchain_ragspine.vectorstores import PostgresVectorStore

    pg = PostgresVectorStore(request.getfixturevalue("pg_url"), EMB)
    pg.add_documents(RECORDS)
    yield "pg", pg


def _retriever(store: VectorStore, search_type: str, flt: dict[str, Any] | None = None) -> Any:
    kwargs = dict(SEARCH_KWARGS[search_type])
    if flt is not None:
        kwargs["filter"] = flt
    return store.as_retriever(search_type=search_type, search_kwargs=kwargs)


def _ids(docs: list[Document]) -> set[str]:
    return {str(d.id) for d in docs}


def test_regression_a_call_filter_is_anded_with_the_retrievers_own_for_every_search_type(store) -> None:
    kind, s = store
    for search_type in TYPES[kind]:
        r = _retriever(s, search_type, {"dept": "hr"})
        assert isinstance(r, ScopedVectorStoreRetriever), search_type
        assert _ids(r.invoke("falcon")) == {"hr", "hr-old"}, search_type
        assert _ids(r.invoke("falcon", filter={"dept": "sales"})) == set(), search_type  # was {"sales"}
        assert _ids(r.invoke("falcon", filter=None)) == {"hr", "hr-old"}, search_type  # was all three
        assert _ids(r.invoke("falcon", filter={"year": 2024})) == {"hr"}, search_type
        assert _ids(r.invoke("falcon", filter={})) == {"hr", "hr-old"}, search_type
        # an unscoped retriever takes the call's filter as it is
        assert _ids(_retriever(s, search_type).invoke("falcon", filter={"dept": "sales"})) == {"sales"}, search_type
        assert r.search_kwargs["filter"] == {"dept": "hr"}  # the call changed nothing in the retriever


async def test_regression_the_async_path_ands_the_filters_too(store) -> None:
    kind, s = store
    for search_type in TYPES[kind]:
        r = _retriever(s, search_type, {"dept": "hr"})
        assert _ids(await r.ainvoke("falcon", filter={"dept": "sales"})) == set(), search_type
        assert _ids(await r.ainvoke("falcon", filter=None)) == {"hr", "hr-old"}, search_type
        assert _ids(await r.ainvoke("falcon", filter={"year": 2024})) == {"hr"}, search_type


def test_regression_a_document_role_search_keeps_the_retrievers_filter(store) -> None:
    """``embed_as="document"`` (HyDE's probe) takes another path through the retriever: the same AND holds."""
    kind, s = store
    for search_type in ("similarity", "mmr"):
        r = _retriever(s, search_type, {"dept": "hr"})
        twin = r if kind == "dir" else DocumentRoleVectorStoreRetriever.over(r)
        options = {"embed_as": "document"} if kind == "dir" else {}
        assert _ids(twin.invoke("falcon", filter={"dept": "sales"}, **options)) == set(), search_type
        assert _ids(twin.invoke("falcon", filter=None, **options)) == {"hr", "hr-old"}, search_type


def test_the_retriever_call_contract_keeps_the_scope(store) -> None:
    kind, s = store
    for search_type in TYPES[kind]:
        r = _retriever(s, search_type, {"dept": "hr"})
        assert _ids(invoke_retriever(r, "falcon", k=10, filter={"dept": "sales"})) == set(), search_type
        assert _ids(invoke_retriever(r, "falcon", k=10, filter={"year": 2024})) == {"hr"}, search_type


def test_a_bad_call_filter_is_refused_not_dropped(store) -> None:
    kind, s = store
    r = _retriever(s, "similarity", {"dept": "hr"})
    with pytest.raises(TypeError, match="filter"):
        r.invoke("falcon", filter=lambda d: True)
    with pytest.raises(ValueError):
        r.invoke("falcon", filter={"year": {"bogus": 1}})


def test_a_foreign_store_keeps_its_filter_and_refuses_one_it_cannot_and() -> None:
    """A document-role search over a store of another filter dialect cannot AND two filters: a call's filter is
    refused when the retriever has its own (never replaced), ``filter=None`` keeps the retriever's."""
    from langchain_core.vectorstores import InMemoryVectorStore

    mem = InMemoryVectorStore(EMB)
    mem.add_documents(RECORDS)
    own = lambda d: d.metadata["dept"] == "hr"  # noqa: E731 - InMemoryVectorStore's filter dialect: a callable
    twin = DocumentRoleVectorStoreRetriever.over(mem.as_retriever(search_kwargs={"k": 10, "filter": own}))
    assert _ids(twin.invoke("falcon", filter=None)) == {"hr", "hr-old"}
    with pytest.raises(ValueError, match="cannot AND"):
        twin.invoke("falcon", filter=lambda d: d.metadata["dept"] == "sales")
    unscoped = DocumentRoleVectorStoreRetriever.over(mem.as_retriever(search_kwargs={"k": 10}))
    assert _ids(unscoped.invoke("falcon", filter=lambda d: d.metadata["dept"] == "sales")) == {"sales"}


def test_regression_a_filter_sees_the_records_lineage_on_both_backends(store) -> None:
    """Issue 26 trial, FAIL 3: a record's lineage — ``doc_id`` (its document: ``metadata["doc_id"]``, else its own
    id), ``chunk_id``, ``doc_version``, ``ingested_at`` — is what a filter sees on every backend (the directory
    store found nothing and warned the field was unknown; PostgreSQL filtered its columns), while the returned
    metadata stays exactly what was written."""
    kind, s = store
    s.add_documents([Document("falcon migration plan", id="plan", metadata={"dept": "hr", "doc_id": "falcon"}),
                     Document("falcon migration notes", id="notes", metadata={"doc_id": "falcon"})])
    cases = {
        "doc_id falcon": ({"doc_id": "falcon"}, {"plan", "notes"}),
        "doc_id of its own": ({"doc_id": "hr"}, {"hr"}),
        "chunk_id": ({"chunk_id": {"in": ["sales", "notes"]}}, {"sales", "notes"}),
        "ingested_at": ({"ingested_at": {"gte": "2000-01-01"}}, {"hr", "sales", "hr-old", "plan", "notes"}),
        "doc_version": ({"doc_version": 1, "dept": "hr"}, {"hr", "hr-old", "plan"}),
        "and with the record's own": ({"doc_id": "falcon", "dept": "hr"}, {"plan"}),
    }
    for search_type in TYPES[kind]:
        for name, (flt, want) in cases.items():
            with warnings.catch_warnings():
                warnings.simplefilter("error")  # no UnknownFilterFieldWarning: the fields are known
                got = _retriever(s, search_type, flt).invoke("falcon")
            assert _ids(got) == want, (search_type, name)
            for d in got:  # the lineage is filtered on, not added to what comes back
                assert "ingested_at" not in d.metadata and "doc_version" not in d.metadata, (search_type, d.metadata)
    assert _ids(s.similarity_search("falcon", k=10, filter={"doc_id": "falcon"})) == {"plan", "notes"}


def test_the_vector_stores_bookkeeping_key_is_no_filter_field(store) -> None:
    kind, s = store
    with pytest.raises(ValueError, match="_ragspine_record.*reserved"):
        s.similarity_search("falcon", k=10, filter={"_ragspine_record": {"ne": "x"}})
    with pytest.warns(UserWarning, match="known fields") as caught:
        s.similarity_search("falcon", k=10, filter={"nosuch": 1})
    assert "_ragspine_record" not in str(caught[0].message)
