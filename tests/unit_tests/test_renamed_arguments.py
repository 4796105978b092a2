"""The two counts have one name each (issue 26, O2): ``k`` is the result count and ``fetch_k`` the candidate pool,
everywhere.  The old names (``candidate_k``, ``parent_k``, ``child_k``, ``max_docs`` and the rerankers' ``top_n``)
stay one release by one rule (:func:`langchain_ragspine.arguments.rename_arguments`), checked here for every class,
function and call that took one: the new name works; the old one gives the same result with a
``DeprecationWarning`` naming the new name, attributed to the caller's line; both with different values are a
``TypeError`` naming both; both with the same value warn only.  ``top_n`` is kept where it is the keyword of the
LangChain class the package's class stands in for (``CrossEncoderReranker``, ``LLMListwiseRerank``): accepted
without a warning, a conflict still an error.

Before O2 the new names did not exist on these routes (``HybridRetriever(fetch_k=…)`` was an unknown argument,
``make_answer_chain(k=…)`` a ``TypeError``): run at the base of O2, 46 of these 53 tests failed; the 7 that passed
are ``ParentChildRetriever``'s constructor cases, which issue 27 had already deprecated.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel

from langchain_ragspine.chains import make_answer_chain
from langchain_ragspine.chains.answer import prepare_context
from langchain_ragspine.document_compressors import CrossEncoderReranker, LLMListwiseReranker
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.modes import DocumentsSource, mode_factory
from langchain_ragspine.pipeline.plan import build_retriever
from langchain_ragspine.pipeline.sources import open_retriever
from langchain_ragspine.retrievers import (
    BM25Retriever,
    DenseRetriever,
    HybridRetriever,
    HyDERetriever,
    MultiIndexRetriever,
    MultiQueryRetriever,
    ParentChildRetriever,
)
from langchain_ragspine.text_splitters import ParentChildTextSplitter
from langchain_ragspine.vectorstores import RagSpineVectorStore

QUERY = "rainy season"
DOCS = [Document(page_content=f"rainy season note {i} " + "word " * (i % 5), metadata={"chunk_id": f"d{i}#0",
                                                                                      "doc_id": f"d{i}"})
        for i in range(14)]
EMB = HashingEmbeddings(64)


def _ids(docs: Any) -> list[Any]:
    return [d.metadata.get("chunk_id", d.id) for d in docs]


def _hybrid(**kw: Any) -> HybridRetriever:
    return HybridRetriever(retrievers=[BM25Retriever.from_documents(DOCS), DenseRetriever.from_documents(DOCS, EMB)],
                           k=3, fusion="rrf", **kw)


def _parent_child(**kw: Any) -> ParentChildRetriever:
    from langchain_core.stores import InMemoryStore
    from langchain_core.vectorstores import InMemoryVectorStore

    r = ParentChildRetriever(vectorstore=InMemoryVectorStore(EMB), docstore=InMemoryStore(),
                             child_splitter=ParentChildTextSplitter(chunk_size=16, chunk_overlap=0), **kw)
    r.add_documents([Document("# A\n\nrainy season one. rainy two.\n\n# B\n\nrainy season three.", id="w")])
    return r


def _llm() -> FakeListChatModel:
    return FakeListChatModel(responses=["rainy season note\nnote 3"] * 4)


@dataclass(frozen=True)
class Case:
    """``run(**{name: value})`` under the new and the old name gives the same ``result``."""

    id: str
    old: str
    new: str
    run: Callable[..., Any]
    value: Any = 2
    other: Any = 3


def _store_case(tmp: Path) -> Path:
    corpus = tmp / "corpus"
    corpus.mkdir(parents=True)
    for i in range(8):
        (corpus / f"n{i}.md").write_text(f"# Note {i}\n\nThe rainy season note number {i}.\n", "utf-8")
    ingest(corpus, tmp / "store", embedding="hashing", mode="hybrid", progress=False)
    return tmp / "store"


def _cases(tmp: Path) -> list[Case]:
    store = _store_case(tmp / "s")
    live = open_retriever(store, mode="hybrid", k=3)
    vs = RagSpineVectorStore(tmp / "vs", EMB)
    vs.add_documents([Document(d.page_content, id=f"v{i}") for i, d in enumerate(DOCS)])
    return [
        # fetch_k (was candidate_k): constructor fields and what reads them
        Case("HybridRetriever", "candidate_k", "fetch_k", lambda **kw: (_hybrid(**kw).fetch_k,
                                                                         _ids(_hybrid(**kw).invoke(QUERY)))),
        Case("HybridRetriever.from_documents", "candidate_k", "fetch_k",
             lambda **kw: HybridRetriever.from_documents(DOCS, EMB, **kw).fetch_k),
        Case("HybridRetriever.invoke", "candidate_k", "fetch_k", lambda **kw: _ids(_hybrid().invoke(QUERY, **kw)),
             value=1, other=5),
        Case("MultiQueryRetriever", "candidate_k", "fetch_k",
             lambda **kw: MultiQueryRetriever(BM25Retriever.from_documents(DOCS), _llm(), k=2, **kw).fetch_k),
        Case("HyDERetriever", "candidate_k", "fetch_k",
             lambda **kw: _ids(HyDERetriever(BM25Retriever.from_documents(DOCS), _llm(), k=2, **kw).invoke(QUERY))),
        Case("MultiIndexRetriever", "candidate_k", "fetch_k",
             lambda **kw: MultiIndexRetriever({"a": BM25Retriever.from_documents(DOCS)}, k=2, **kw).fetch_k),
        Case("ParentChildRetriever(fetch_k)", "child_k", "fetch_k", lambda **kw: _parent_child(**kw).fetch_k),
        Case("ParentChildRetriever(k)", "parent_k", "k", lambda **kw: _ids(_parent_child(**kw).invoke("rainy")),
             value=1),
        Case("LiveStoreRetriever.invoke", "candidate_k", "fetch_k", lambda **kw: _ids(live.invoke(QUERY, **kw))),
        Case("open_retriever", "candidate_k", "fetch_k",
             lambda **kw: open_retriever(store, mode="hybrid", k=3, **kw).current.fetch_k),
        Case("build_retriever", "candidate_k", "fetch_k",
             lambda **kw: build_retriever("hybrid", DocumentsSource(DOCS, embedding=EMB), k=3, **kw).fetch_k),
        Case("mode_factory", "candidate_k", "fetch_k",
             lambda **kw: mode_factory("hybrid", k=3, embedding=EMB, **kw)(DOCS).fetch_k),
        Case("RagSpineVectorStore.hybrid_search", "candidate_k", "fetch_k",
             lambda **kw: [d.id for d in vs.hybrid_search(QUERY, k=3, **kw)], value=1, other=5),
        # k (was max_docs): the passages the answer chain shows
        Case("prepare_context", "max_docs", "k", lambda **kw: _ids(prepare_context(DOCS, **kw))),
        Case("make_answer_chain", "max_docs", "k",
             lambda **kw: make_answer_chain(None, **kw).invoke({"question": QUERY, "documents": DOCS})["citations"]),
    ]


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Case]:
    return {c.id: c for c in _cases(tmp_path_factory.mktemp("renamed"))}


CASE_IDS = [
    "HybridRetriever", "HybridRetriever.from_documents", "HybridRetriever.invoke", "MultiQueryRetriever",
    "HyDERetriever", "MultiIndexRetriever", "ParentChildRetriever(fetch_k)", "ParentChildRetriever(k)",
    "LiveStoreRetriever.invoke", "open_retriever", "build_retriever", "mode_factory",
    "RagSpineVectorStore.hybrid_search", "prepare_context", "make_answer_chain",
]


def test_every_case_is_listed(cases: dict[str, Case]) -> None:
    assert sorted(cases) == sorted(CASE_IDS)


@pytest.mark.parametrize("case_id", CASE_IDS)
def test_the_new_name_works_and_the_old_one_warns_with_the_same_result(cases: dict[str, Case], case_id: str) -> None:
    case = cases[case_id]
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # the new name: no warning of ours
        new = case.run(**{case.new: case.value})
    with pytest.warns(DeprecationWarning) as seen:
        old = case.run(**{case.old: case.value})
    assert old == new
    ours = [w for w in seen if f"({case.old}=...) is deprecated: pass {case.new}= instead" in str(w.message)]
    assert ours, [str(w.message) for w in seen]
    assert all(w.filename == __file__ for w in ours)  # the caller's own line
    assert new != case.run(**{case.new: case.other}) or case.new == "fetch_k"  # the value reaches the result


@pytest.mark.parametrize("case_id", CASE_IDS)
def test_both_names_with_different_values_name_both(cases: dict[str, Case], case_id: str) -> None:
    case = cases[case_id]
    with pytest.warns(DeprecationWarning), pytest.raises(TypeError) as e:
        case.run(**{case.new: case.other, case.old: case.value})
    assert f"got {case.new}={case.other!r} and {case.old}={case.value!r}" in str(e.value)
    assert f"{case.old} is the deprecated name of {case.new}" in str(e.value)


@pytest.mark.parametrize("case_id", CASE_IDS)
def test_both_names_with_the_same_value_warn_only(cases: dict[str, Case], case_id: str) -> None:
    case = cases[case_id]
    new = case.run(**{case.new: case.value})
    with pytest.warns(DeprecationWarning, match=f"pass {case.new}= instead"):
        assert case.run(**{case.new: case.value, case.old: case.value}) == new


@pytest.mark.parametrize("cls", [HybridRetriever, MultiQueryRetriever, MultiIndexRetriever, ParentChildRetriever])
def test_the_old_attribute_reads_and_assigns_the_new_one_with_a_warning(cls: type) -> None:
    r: Any = {
        HybridRetriever: lambda: _hybrid(fetch_k=7),
        MultiQueryRetriever: lambda: MultiQueryRetriever(BM25Retriever.from_documents(DOCS), _llm(), fetch_k=7),
        MultiIndexRetriever: lambda: MultiIndexRetriever({"a": BM25Retriever.from_documents(DOCS)}, fetch_k=7),
        ParentChildRetriever: lambda: _parent_child(fetch_k=7),
    }[cls]()
    old = "child_k" if cls is ParentChildRetriever else "candidate_k"
    with pytest.warns(DeprecationWarning, match=rf"^{cls.__name__}\.{old} is deprecated: use fetch_k") as seen:
        assert getattr(r, old) == 7
    assert seen[0].filename == __file__
    with pytest.warns(DeprecationWarning, match=f"{old} is deprecated"):
        setattr(r, old, 9)
    assert r.fetch_k == 9


def test_a_hybrid_save_keeps_its_file_format_and_old_saves_load(tmp_path: Path) -> None:
    """hybrid.json (format ``ragspine-hybrid/1``) names the per-channel depth ``candidate_k`` as it always did, so
    a save reads the same in the package before and after the rename; loading one gives ``fetch_k`` silently."""
    import json

    _hybrid(fetch_k=7).save(tmp_path / "h")
    config = json.loads((tmp_path / "h" / "hybrid.json").read_text("utf-8"))
    assert config["candidate_k"] == 7 and "fetch_k" not in config
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        assert HybridRetriever.load(tmp_path / "h", embedding=EMB).fetch_k == 7


# -- top_n: kept where it is the LangChain class's keyword -----------------------------------------------------------
class _Scores:
    def predict(self, pairs: list[tuple[str, str]], **_: Any) -> list[float]:
        return [float(len(text)) for _, text in pairs]


RERANKERS: dict[str, Callable[..., Any]] = {
    "CrossEncoderReranker": lambda **kw: CrossEncoderReranker(model=_Scores(), **kw),
    "LLMListwiseReranker": lambda **kw: LLMListwiseReranker(llm=FakeListChatModel(responses=["[3] > [1] > [2]"]),
                                                            **kw),
}


@pytest.mark.parametrize("name", list(RERANKERS))
def test_a_reranker_takes_k_and_keeps_top_n_without_a_warning(name: str) -> None:
    make = RERANKERS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        by_k, by_top_n = make(k=2), make(top_n=2)
        assert by_k.k == by_top_n.k == by_top_n.top_n == 2
        assert _ids(by_k.compress_documents(DOCS[:5], QUERY)) == _ids(by_top_n.compress_documents(DOCS[:5], QUERY))
        assert len(by_k.compress_documents(DOCS[:5], QUERY)) == 2
        assert make(k=2, top_n=2).k == 2
        by_top_n.top_n = 3
        assert by_top_n.k == 3
    with pytest.raises(TypeError, match=rf"^{name} got k=2 and top_n=3: top_n is another name of k; pass one$"):
        make(k=2, top_n=3)
