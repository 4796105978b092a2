"""Bad input to ``RagSpineVectorStore`` gets one clear error, and an empty query finds nothing in every search type.

Regression tests for a new-user trial (issue 16): ``add_texts(["i1", "i2"], ids=["i1"])`` silently dropped "i2";
``similarity_search(None)`` raised ``normalize() argument 2 must be str``; ``add_documents(["plain string"])`` raised
``AttributeError``; ``similarity_search("")`` returned 4 arbitrary records while hybrid and bm25 gave ``[]``;
``fetch_k=0`` silently became 50 while ``-1`` was an error.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.documents import Document

from langchain_ragspine import RagSpineVectorStore
from langchain_ragspine.embeddings import HashingEmbeddings


@pytest.fixture
def store(tmp_path):
    s = RagSpineVectorStore(tmp_path / "store", HashingEmbeddings(256))
    s.add_texts(["梅雨は六月から七月の雨季。", "北京是中国的首都。", "Paris is the capital of France."],
                ids=["tsuyu", "beijing", "paris"])
    yield s
    s.close()


def _all_ids(store: RagSpineVectorStore) -> list[str]:
    return sorted(str(d.id) for d in store.backend.records())


@pytest.mark.parametrize(
    ("texts", "kwargs", "message"),
    [
        (["i1", "i2"], {"ids": ["i1"]}, r"add_texts got 2 texts and 1 ids"),
        (["i1"], {"ids": ["i1", "i2"]}, r"add_texts got 1 texts and 2 ids"),
        (["m1", "m2"], {"metadatas": [{"a": 1}]}, r"add_texts got 2 texts and 1 metadatas"),
    ],
)
def test_add_texts_with_lists_of_other_lengths_is_an_error_and_writes_nothing(store, texts, kwargs, message):
    before = _all_ids(store)
    with pytest.raises(ValueError, match=message):
        store.add_texts(texts, **kwargs)
    with pytest.raises(ValueError, match=message):
        asyncio.run(store.aadd_texts(texts, **kwargs))
    assert _all_ids(store) == before


def test_add_texts_still_takes_langchains_shapes(store):
    assert store.add_texts(["a text"], [{"x": 1}], ids=["t1"]) == ["t1"]
    assert asyncio.run(store.aadd_texts(["b text"], ids=["t2"])) == ["t2"]
    assert store.add_texts(["c text"], metadatas=[], ids=[])[0] not in ("", None)  # empty lists mean none
    assert store.get_by_ids(["t1"])[0].metadata == {"x": 1}


def test_a_text_or_document_of_the_wrong_type_names_its_index(store):
    with pytest.raises(TypeError, match=r"add_texts: texts\[1\] must be a str, got int 123"):
        store.add_texts(["ok", 123])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"add_documents: documents\[1\] must be a langchain_core Document, got str"):
        store.add_documents([Document("ok"), "plain string"])  # type: ignore[list-item]
    assert _all_ids(store) == ["beijing", "paris", "tsuyu"]


SEARCHES: dict[str, Any] = {
    "similarity_search": lambda s, q: s.similarity_search(q),
    "similarity_search_with_score": lambda s, q: s.similarity_search_with_score(q),
    "max_marginal_relevance_search": lambda s, q: s.max_marginal_relevance_search(q),
    "hybrid_search": lambda s, q: s.hybrid_search(q),
    "bm25_search": lambda s, q: s.bm25_search(q),
    "asimilarity_search": lambda s, q: asyncio.run(s.asimilarity_search(q)),
    "amax_marginal_relevance_search": lambda s, q: asyncio.run(s.amax_marginal_relevance_search(q)),
}


@pytest.mark.parametrize("bad", [None, 123, ["梅雨"]])
@pytest.mark.parametrize("name", list(SEARCHES))
def test_a_query_that_is_not_a_string_is_one_clear_line(store, name, bad):
    method = (name[1:] if name.startswith("a") else name).removesuffix("_with_score")
    with pytest.raises(TypeError, match=rf"^RagSpineVectorStore\.{method} takes one query string, got "):
        SEARCHES[name](store, bad)


@pytest.mark.parametrize("query", ["", "   ", "\n"])
@pytest.mark.parametrize("name", list(SEARCHES))
def test_an_empty_query_finds_nothing_in_every_search_type(store, name, query):
    assert SEARCHES[name](store, query) == []  # similarity_search("") returned 4 arbitrary records


@pytest.mark.parametrize("search_type", ["similarity", "mmr", "hybrid", "bm25"])
def test_an_empty_query_through_the_retriever_finds_nothing(store, search_type):
    assert store.as_retriever(search_type=search_type).invoke("") == []


@pytest.mark.parametrize("fetch_k", [0, -1])
def test_fetch_k_below_one_is_an_error_in_hybrid_search(store, fetch_k):
    with pytest.raises(ValueError, match=rf"^fetch_k must be an int >= 1, got {fetch_k}$"):
        store.hybrid_search("梅雨", k=2, fetch_k=fetch_k)
    with pytest.raises(ValueError, match=r"^fetch_k must be an int >= 1"):
        store.as_retriever(search_kwargs={"fetch_k": fetch_k}).invoke("梅雨")
    with pytest.warns(DeprecationWarning, match="pass fetch_k="), pytest.raises(ValueError, match=r"^fetch_k must"):
        store.hybrid_search("梅雨", k=2, candidate_k=fetch_k)  # the old name, checked under the new one
    assert [d.id for d in store.hybrid_search("梅雨", k=1, fetch_k=1)] == ["tsuyu"]


@pytest.mark.parametrize("bad", [None, 123, ["梅雨"], {"question": "梅雨"}])
@pytest.mark.parametrize("search_type", ["similarity", "mmr", "hybrid", "bm25"])
def test_the_stores_retriever_gives_the_retrievers_line(store, search_type, bad):
    r = store.as_retriever(search_type=search_type)
    pattern = r"^RagSpineStoreRetriever\.invoke takes one query string, got .*\.batch\(\[\.\.\.\]\).*itemgetter"
    with pytest.raises(TypeError, match=pattern):
        r.invoke(bad)
    with pytest.raises(TypeError, match=pattern):
        asyncio.run(r.ainvoke(bad))


# -- a single string where a list is expected (new-user trial 16b: iterated as characters, data loss) --------------
STRING_FOR_A_LIST = {
    "delete": (lambda s: s.delete("abc"), r"delete: ids must be a list, got a single str 'abc'; pass a list"),
    "get_by_ids": (lambda s: s.get_by_ids("abc"), r"get_by_ids: ids must be a list, got a single str 'abc'"),
    "add_texts ids": (lambda s: s.add_texts(["x1", "x2", "x3"], ids="abc"), r"add_texts: ids must be a list"),
    "add_texts texts": (lambda s: s.add_texts("abc"), r"add_texts: texts must be a list, got a single str 'abc'"),
    "add_texts bytes": (lambda s: s.add_texts(b"abc"), r"add_texts: texts must be a list, got a single bytes"),
    "add_documents ids": (
        lambda s: s.add_documents([Document("x1"), Document("x2"), Document("x3")], ids="abc"),
        r"add_documents: ids must be a list, got a single str 'abc'",
    ),
    "add_documents str": (lambda s: s.add_documents("abc"), r"add_documents: documents must be a list.*add_texts"),
    "add_documents None": (lambda s: s.add_documents(None), r"add_documents: documents must be a list, got NoneType"),
    "metadatas [None]": (lambda s: s.add_texts(["m"], metadatas=[None]), r"add_texts: metadatas\[0\] must be a dict"),
    "metadatas ['x']": (lambda s: s.add_texts(["m"], metadatas=["x"]), r"metadatas\[0\] must be a dict, got str 'x'"),
}


@pytest.mark.parametrize("case", list(STRING_FOR_A_LIST))
def test_a_single_string_for_a_list_is_one_clear_type_error_and_changes_nothing(tmp_path, case):
    call, message = STRING_FOR_A_LIST[case]
    s = RagSpineVectorStore(tmp_path / "store", HashingEmbeddings(64))
    s.add_texts(["apple", "banana", "cherry", "all three"], ids=["a", "b", "c", "abc"])
    with pytest.raises(TypeError, match=message) as err:
        call(s)
    assert len(str(err.value).splitlines()) == 1
    assert _all_ids(s) == ["a", "abc", "b", "c"]
    assert [d.page_content for d in s.get_by_ids(["a", "b", "c", "abc"])] == ["apple", "banana", "cherry", "all three"]
    s.close()


def test_the_async_methods_refuse_a_single_string_too(store):
    with pytest.raises(TypeError, match="delete: ids must be a list"):
        asyncio.run(store.adelete("tsuyu"))
    with pytest.raises(TypeError, match="add_texts: texts must be a list"):
        asyncio.run(store.aadd_texts("abc"))
    with pytest.raises(TypeError, match="get_by_ids: ids must be a list"):
        asyncio.run(store.aget_by_ids("tsuyu"))
    assert _all_ids(store) == ["beijing", "paris", "tsuyu"]


def test_lists_tuples_and_generators_are_still_taken(store):
    assert store.add_texts(iter(["g1 text", "g2 text"]), ids=("g1", "g2")) == ["g1", "g2"]
    assert store.add_texts(["h1 text", "h2 text"], ids=iter(["h1", "h2"])) == ["h1", "h2"]  # one-shot ids
    assert [d.id for d in store.get_by_ids(("g1", "g2"))] == ["g1", "g2"]
    store.delete(iter(["g1"]))
    assert [d.id for d in store.get_by_ids(["g1", "g2"])] == ["g2"]


# ------------------------------------------------------------------------------------------------ call keywords
#: each store's search types, and the search_kwargs that make every record a candidate
_TYPES = {
    "dir": ["similarity", "mmr", "similarity_score_threshold", "hybrid", "bm25"],
    "pg": ["similarity", "mmr", "similarity_score_threshold"],
}


@pytest.fixture(params=["dir", "pg"])
def any_store(request, tmp_path):
    if request.param == "dir":
        s: Any = RagSpineVectorStore(tmp_path / "store", HashingEmbeddings(64))
    else:
        from langchain_ragspine.vectorstores import PostgresVectorStore

        s = PostgresVectorStore(request.getfixturevalue("pg_url"), HashingEmbeddings(64))
    s.add_texts(["falcon hr report", "falcon sales report"], ids=["hr", "sales"])
    yield request.param, s
    if request.param == "dir":
        s.close()


def test_a_call_cannot_switch_the_search_type_and_says_which_it_is(any_store):
    """Regression (trial, other defects): ``RagSpineStoreRetriever.invoke(q, search_type="similarity")`` raised
    ``TypeError: RagSpineVectorStore.search() got multiple values for argument 'search_type'`` (hybrid, bm25) or
    named the store's method (the others).  The search type is the retriever's: a call naming one is refused, with
    the retriever's own and what a call takes."""
    kind, s = any_store
    for search_type in _TYPES[kind]:
        kwargs = {"score_threshold": 0.0} if search_type == "similarity_score_threshold" else {}
        r = s.as_retriever(search_type=search_type, search_kwargs=kwargs)
        owner = type(r).__name__
        for name, value in (("search_type", "similarity"), ("search_kwargs", {"k": 1})):
            message = (rf"^{owner}\.invoke got {name}=.*set when it is built \(vectorstore\.as_retriever\({name}="
                       rf".*this one's search_type is '{search_type}'")
            with pytest.raises(TypeError, match=message):
                r.invoke("falcon", **{name: value})
            with pytest.raises(TypeError, match=message):
                asyncio.run(r.ainvoke("falcon", **{name: value}))
            with pytest.raises(TypeError, match=message):
                r.batch(["falcon"], **{name: value})
        with pytest.raises(TypeError, match=rf"^{owner}\.invoke got unexpected keyword argument 'kk' \(did you mean 'k'"):
            r.invoke("falcon", kk=1)
        assert len(r.invoke("falcon", k=1)) == 1  # the keywords a call takes still work


def test_an_unknown_search_kwargs_key_is_refused_by_both_stores(any_store):
    """PostgresVectorStore's retriever took any key and failed (or not) at the first call."""
    _, s = any_store
    with pytest.raises(TypeError, match=r"search_kwargs got unexpected key 'kk' \(did you mean 'k'\?\)"):
        s.as_retriever(search_kwargs={"kk": 3})
    with pytest.raises(TypeError, match=r"got unexpected argument 'search_kwarg' \(did you mean 'search_kwargs'"):
        s.as_retriever(search_kwarg={"k": 3})


@pytest.mark.parametrize(("call", "message"), [
    (lambda s: s.add_texts(["z"], ids=[1]), r"add_documents: ids\[0\] must be a str, got int 1"),
    (lambda s: s.add_documents([Document(page_content="z")], ids=[b"z"]), r"ids\[0\] must be a str, got bytes"),
    (lambda s: s.get_by_ids(["a", 1]), r"get_by_ids: ids\[1\] must be a str, got int 1"),
    (lambda s: s.delete([2]), r"delete: ids\[0\] must be a str, got int 2"),
])
def test_regression_an_id_that_is_not_a_str_is_refused_not_converted(store, call, message):
    """Trial of 5d1ab81: ``add_texts(ids=[1])`` stored ``'1'`` silently and ``get_by_ids([1, "1"])`` returned that
    record twice; LangChain's ids are strings."""
    before = _all_ids(store)
    with pytest.raises(TypeError, match=message):
        call(store)
    assert _all_ids(store) == before


@pytest.mark.parametrize("label", ["", "  ", None, []])
def test_regression_an_empty_sensitivity_label_is_refused_as_the_loader_refuses_it(store, label):
    """Trial of 5d1ab81: the vector store stored ``{"sensitivity": ""}`` (then served as not RESTRICTED) though the
    corpus loader refuses an empty label: it is never read as the default."""
    before = _all_ids(store)
    for key in ("sensitivity", "Sensitivity"):
        with pytest.raises(ValueError, match=rf"metadata '{key}' = .*no sensitivity label"):
            store.add_texts(["秘密の手順"], metadatas=[{key: label}])
    assert _all_ids(store) == before
    assert store.add_texts(["公開の手順"], metadatas=[{"sensitivity": "PUBLIC"}])


@pytest.mark.parametrize("md", [{"doc_id": 5}, {"doc_id": ""}, {"chunk_id": None}, {"chunk_id": ["a"]}])
def test_regression_a_lineage_id_in_metadata_must_be_a_str(store, md):
    """Trial of ba5bf07: ``{"doc_id": 5}`` was stored and returned, yet no filter on it matched (lineage fields
    compare as strings); it is refused, naming the field, and nothing is written."""
    before = _all_ids(store)
    with pytest.raises(ValueError, match=rf"metadata '{next(iter(md))}' = .*non-empty str"):
        store.add_texts(["年次報告"], metadatas=[md])
    assert _all_ids(store) == before


@pytest.mark.parametrize(("flt", "error"), [("lang=ja", TypeError), ({"lang": {"$regex": "j"}}, ValueError),
                                            ({"$or": []}, ValueError)])
def test_regression_a_malformed_filter_fails_when_the_retriever_is_built(store, flt, error):
    """Trial of ba5bf07: ``as_retriever(search_kwargs={"filter": "lang=ja"})`` was built and failed at invoke."""
    with pytest.raises(error):
        store.as_retriever(search_kwargs={"filter": flt})
