"""Identity and arguments of the package's retrievers: id = chunk_id on every result, unknown arguments are errors
with a did-you-mean, typed signatures, assignments that rebuild the index, and a clear error for a non-string
query."""

import asyncio
import inspect
from operator import itemgetter

import pytest
from langchain_core.documents import Document
from langchain_core.runnables import RunnableLambda
from pydantic import ValidationError

from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.retrievers import BM25Retriever, DenseRetriever, HybridRetriever

EMB = HashingEmbeddings(128)
DOCS = [
    Document(page_content="梅雨は六月から七月にかけて続く雨の季節。", metadata={"chunk_id": "tsuyu#0"}),
    Document(page_content="梅雨前線が停滞すると大雨になる。", metadata={"chunk_id": "front#0"}),
    Document(page_content="北京是中国的首都。", metadata={"chunk_id": "beijing#0"}),
]
OTHER = [Document(page_content="台風は夏から秋に来る。", metadata={"chunk_id": "typhoon#0"})]


def _all() -> list:
    bm25 = BM25Retriever.from_documents(DOCS)
    dense = DenseRetriever.from_documents(DOCS, EMB)
    return [bm25, dense, HybridRetriever(retrievers=[bm25, dense])]


@pytest.mark.parametrize("i", range(3))
def test_every_result_has_id_equal_to_chunk_id(i):
    docs = _all()[i].invoke("梅雨")
    assert docs and all(d.id == d.metadata["chunk_id"] for d in docs)
    assert all(d.id is None for d in DOCS)  # the inputs are not modified


def test_a_document_with_only_an_id_keeps_it():
    r = BM25Retriever.from_texts(["梅雨の季節"], ids=["x1"])
    assert [d.id for d in r.invoke("梅雨")] == ["x1"]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: BM25Retriever(docs=DOCS, top_k=3), r"unexpected argument 'top_k' \(did you mean 'k'\?\)"),
        (lambda: BM25Retriever(docs=DOCS, kk=3), r"'kk' \(did you mean 'k'"),
        (lambda: BM25Retriever(docs=DOCS, tokeniser="cjk"), r"did you mean 'tokenizer'"),
        (lambda: DenseRetriever(docs=DOCS, embedding=EMB, search_kwargs={"k": 2}), r"'search_kwargs'"),
        (lambda: DenseRetriever(docs=DOCS, embeddings=EMB), r"did you mean 'embedding'"),
        (lambda: HybridRetriever(retrievers=[BM25Retriever(docs=DOCS)], fecth_k=5), r"did you mean 'fetch_k'"),
        (lambda: BM25Retriever.from_documents(DOCS, top_k=2), r"did you mean 'k'"),
        (lambda: DenseRetriever.from_documents(DOCS, EMB, filters={"a": 1}), r"did you mean 'filter'"),
    ],
)
def test_unknown_constructor_arguments_are_errors_with_a_did_you_mean(build, message):
    with pytest.raises(TypeError, match=message):
        build()


def test_langchain_names_still_work():
    r = BM25Retriever(docs=DOCS, preprocess_func=str.split, vectorizer=None)
    assert r.preprocess_func("a b") == ["a", "b"]


@pytest.mark.parametrize("cls", [BM25Retriever, DenseRetriever, HybridRetriever])
def test_signatures_are_typed_and_closed(cls):
    """What IDEs show (and, with the pydantic mypy plugin, what mypy checks; tests/typing/check_arguments.py is the
    mypy side, run by `make lint`): the fields by name, and no **kwargs that would swallow a misspelling."""
    params = inspect.signature(cls).parameters
    assert "k" in params and "filter" in params
    assert all(p.kind is not p.VAR_KEYWORD for p in params.values())


def test_assigning_docs_rebuilds_the_index():
    bm25, dense, _ = _all()
    bm25.docs = OTHER
    dense.docs = OTHER
    assert [d.id for d in bm25.invoke("台風")] == ["typhoon#0"]
    assert [d.id for d in dense.invoke("台風", k=5)] == ["typhoon#0"]
    assert bm25.invoke("梅雨") == []  # the old chunks are gone from the index
    bm25.docs = [*OTHER, Document(page_content="機密", metadata={"chunk_id": "s#0", "sensitivity": "RESTRICTED"})]
    assert [d.id for d in bm25.docs] == [None] and bm25.invoke("機密") == []  # the gate runs on rebuild too
    bm25.k1 = 0.0  # a parameter of the index: rebuilt with it
    assert bm25.invoke("台風")[0].metadata["scores"]["bm25"] > 0


def test_assignments_are_validated():
    bm25 = BM25Retriever.from_documents(DOCS)
    with pytest.raises(TypeError, match="k must be an int"):
        bm25.k = "3"
    bm25.k = 1
    assert len(bm25.invoke("梅雨")) == 1


@pytest.mark.parametrize("bad", [["梅雨", "北京"], {"question": "梅雨"}, None])
@pytest.mark.parametrize("i", range(3))
def test_a_query_that_is_not_a_string_gets_one_clear_line(i, bad):
    r = _all()[i]
    with pytest.raises(TypeError, match=r"takes one query string.*\.batch\(\[\.\.\.\]\).*itemgetter") as err:
        r.invoke(bad)
    assert "\n" not in str(err.value)
    with pytest.raises(TypeError, match="takes one query string"):
        asyncio.run(r.ainvoke(bad))
    # what the message suggests works
    assert [len(x) > 0 for x in r.batch(["梅雨", "北京"])] == [True, True]
    chain = RunnableLambda(itemgetter("question")) | r
    assert chain.invoke({"question": "梅雨"})


def test_langchain_ensemble_over_ours_returns_each_chunk_once():
    classic = pytest.importorskip("langchain_classic.retrievers", reason="langchain-classic is not installed")
    bm25, dense, _ = _all()
    ens = classic.EnsembleRetriever(retrievers=[bm25, dense], weights=[0.5, 0.5])
    ids = [d.id for d in ens.invoke("梅雨")]
    assert ids and len(ids) == len(set(ids))
    ens_key = classic.EnsembleRetriever(retrievers=[bm25, dense], weights=[0.5, 0.5], id_key="chunk_id")
    ids = [d.id for d in ens_key.invoke("梅雨")]
    assert ids and len(ids) == len(set(ids))


def test_langchain_multiquery_over_ours_returns_each_chunk_once():
    classic = pytest.importorskip("langchain_classic.retrievers", reason="langchain-classic is not installed")
    from langchain_core.language_models import FakeListLLM

    hybrid = _all()[2]
    mq = classic.MultiQueryRetriever.from_llm(retriever=hybrid, llm=FakeListLLM(responses=["梅雨\n梅雨の季節\n梅雨前線"]))
    ids = [d.id for d in mq.invoke("梅雨")]
    assert ids and len(ids) == len(set(ids)), ids


def test_sync_backed_async_path_runs_inline_or_in_a_thread() -> None:
    # one async implementation (retrievers/base.py) serves BM25 (inline) and the PostgreSQL retrievers (executor)
    import threading

    from langchain_core.callbacks import CallbackManagerForRetrieverRun

    from langchain_ragspine.retrievers.base import SyncBackedRetriever

    class Probe(SyncBackedRetriever):
        def _get_relevant_documents(
            self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None, **kwargs: object
        ) -> list[Document]:
            meta = {"k": k, "extra": sorted(kwargs), "thread": threading.get_ident()}
            return [Document(page_content=query, metadata=meta)]

    class ThreadProbe(Probe):
        run_async_in_executor = True

    async def run(r: Probe) -> Document:
        return (await r.ainvoke("q", k=2, lang="ja"))[0]

    loop_thread = threading.get_ident()
    inline = asyncio.run(run(Probe()))
    threaded = asyncio.run(run(ThreadProbe()))
    assert inline.metadata == {"k": 2, "extra": ["lang"], "thread": loop_thread}
    assert threaded.metadata["k"] == 2 and threaded.metadata["extra"] == ["lang"]
    assert threaded.metadata["thread"] != loop_thread


# -- model_copy skips validation (new-user trial of issue 16, left over): a bad k is caught at call time ----------
def _with_transform() -> list:
    from langchain_ragspine.retrievers import MultiQueryRetriever
    from tests.unit_tests.spy_models import SpyChatModel

    return [*_all(), MultiQueryRetriever(_all()[0], SpyChatModel(reply="梅雨の季節\n梅雨前線"))]


@pytest.mark.parametrize(("bad", "error"), [(0, ValueError), (-2, ValueError), ("3", TypeError), (None, TypeError)])
@pytest.mark.parametrize("i", range(4))
def test_a_bad_k_is_refused_by_model_copy_and_caught_at_call_time_past_validation(i, bad, error):
    r = _with_transform()[i]
    name = type(r).__name__
    if bad is None and i == 3:  # k=None is a transform's default (the base's own k): valid
        assert r.model_copy(update={"k": None}).invoke("梅雨")
        return
    with pytest.raises((error, ValidationError)):  # model_copy validates its update, as an assignment does
        r.model_copy(update={"k": bad})
    broken = r.model_copy()
    broken.__dict__["k"] = bad  # what model_construct leaves: no validation at all
    pattern = rf"^{name}\.k must be an int >= 1, got .*model_construct does not validate"
    with pytest.raises(error, match=pattern):
        broken.invoke("梅雨")  # BM25 said "kth(=1) out of bounds (1)" (numpy), Dense and Hybrid returned []
    with pytest.raises(error, match=pattern):
        asyncio.run(broken.ainvoke("梅雨"))
    if i == 3:
        assert broken.llm.prompts == []  # refused before the model was called
    assert len(r.model_copy(update={"k": 1}).invoke("梅雨")) == 1  # a good k through model_copy still works


@pytest.mark.parametrize("i", range(4))
def test_model_copy_refuses_an_update_key_that_is_not_a_field(i):
    r = _with_transform()[i]
    with pytest.raises(TypeError, match=r"model_copy got unexpected update key 'top_k' \(did you mean 'k'\?\)"):
        r.model_copy(update={"top_k": 0})  # was stored and ignored: the copy still returned k results
    assert r.model_copy(update={"name": "mine"}).name == "mine"


# -- HybridRetriever: an assignment is checked like the constructor (new-user trial of issue 16, left over) -------
@pytest.mark.parametrize(
    ("field", "value", "error", "message"),
    [
        ("retrievers", [], ValueError, r"retrievers must be a non-empty list of BaseRetriever, got \[\]"),
        ("weights", [1.0], ValueError, r"weights has 1 entries for 2"),
        ("alpha", 0.3, ValueError, r"give either weights or alpha, not both"),
        ("top_alpha", 0.5, ValueError, r"top_alpha is a two_stage parameter"),
        ("c", -1, ValueError, r"c must be an int >= 0, got -1"),
        ("filter", {"year": {"regex": "x"}}, ValueError, r"regex"),
    ],
)
def test_hybrid_assignments_are_checked_like_the_constructor_and_undone(field, value, error, message):
    bm25, dense, _ = _all()
    h = HybridRetriever(retrievers=[bm25, dense], weights=[1.0, 1.0], fusion="rrf")
    before = h.invoke("梅雨")
    with pytest.raises(error, match=message):
        setattr(h, field, value)  # `h.retrievers = []` was accepted; invoke then failed in zip()
    assert len(h.retrievers) == 2 and h.weights == [1.0, 1.0] and h.alpha is None and h.c == 60
    assert h.invoke("梅雨") == before  # a refused assignment changes nothing
    h.retrievers = [dense, bm25]  # a consistent assignment still works
    assert h.retrievers[0] is dense and h.invoke("梅雨")


def test_hybrid_model_copy_and_with_config_still_work_and_a_bad_copy_fails_at_call_time():
    bm25, dense, h = _all()
    assert h.with_config(run_name="mine").invoke("梅雨") == h.invoke("梅雨")
    assert h.model_copy(update={"retrievers": [bm25], "k": 1}).invoke("梅雨") == bm25.invoke("梅雨", k=1)
    with pytest.raises(ValueError, match=r"retrievers must be a non-empty list of BaseRetriever, got \[\]"):
        h.model_copy(update={"retrievers": []}).invoke("梅雨")  # model_copy does not validate: the call does
    with pytest.raises(ValueError, match=r"weights has 3 entries for 2"):
        asyncio.run(h.model_copy(update={"weights": [1, 1, 1]}).ainvoke("梅雨"))


# -- every retriever of the package refuses an unknown constructor argument (new-user trial of issue 14) ----------
# The transforms, MultiIndexRetriever, FilterExtractionRetriever, ParentChildRetriever and SecondStageRetriever
# silently accepted them (pydantic's default extra="ignore"); only BM25 / Dense / Hybrid refused them.
def _llm():
    from langchain_core.language_models import FakeListChatModel

    return FakeListChatModel(responses=["梅雨の季節"] * 10)


def _unknown_argument_cases() -> list:
    import warnings

    from langchain_ragspine import retrievers as r
    from langchain_ragspine.document_compressors.pipeline import SecondStageRetriever
    from langchain_ragspine.document_compressors.reorder import LostInTheMiddleReorder

    bm25 = BM25Retriever.from_documents(DOCS)
    warnings.simplefilter("ignore")  # an LLM transform without a model warns
    return [
        (lambda: r.MultiQueryRetriever(bm25, _llm(), num_queries=5), r"'num_queries' \(did you mean 'n_queries'\?\)"),
        (lambda: r.MultiQueryRetriever(bm25, _llm(), parser_key="lines"), r"'parser_key'"),  # LangChain's, from_llm
        (lambda: r.MultiQueryRetriever(bm25, llm_chain=_llm()), r"'llm_chain' \(did you mean 'llm'\?\)"),
        (lambda: r.RAGFusionRetriever(bm25, _llm(), top_k=3), r"'top_k' \(did you mean 'k'\?\)"),
        (lambda: r.HyDERetriever(bm25, _llm(), kk=3), r"'kk' \(did you mean 'k'"),
        (lambda: r.StepBackRetriever(bm25, _llm(), filters={"a": 1}), r"'filters' \(did you mean 'filter'\?\)"),
        (lambda: r.DecompositionRetriever(bm25, _llm(), n_query=2), r"'n_query' \(did you mean 'n_queries'"),
        (lambda: r.GlossaryRetriever(bm25, glossary=[["梅雨", "rain"]], max_query=2), r"'max_query'"),
        (lambda: r.MultiIndexRetriever({"a": bm25}, top_k=3), r"'top_k' \(did you mean 'k'\?\)"),
        (lambda: r.FilterExtractionRetriever(bm25, kk=3), r"'kk' \(did you mean 'k'"),
        (lambda: r.ParentChildRetriever(bm25, chld_k=3), r"'chld_k' \(did you mean 'fetch_k'"),
        (lambda: SecondStageRetriever(base_retriever=bm25, compressors=[LostInTheMiddleReorder()], top_k=2), r"'top_k' \(did you mean 'k'\?\)"),
    ]


@pytest.mark.parametrize("i", range(12))
def test_every_retriever_refuses_an_unknown_constructor_argument_like_bm25(i):
    build, message = _unknown_argument_cases()[i]
    with pytest.raises(TypeError, match=rf"^\w+Retriever got unexpected argument {message}") as err:
        build()
    assert "\n" not in str(err.value)


def test_the_known_names_of_the_message_include_constructor_only_arguments():
    from langchain_ragspine.retrievers.base import ContractRetriever

    class Built(ContractRetriever):
        k: int = 4
        init_arguments = ("glossary", "max_queries")

        def __init__(self, **data: object) -> None:
            data.pop("glossary", None)
            super().__init__(**data)

    with pytest.raises(TypeError, match=r"'max_query' \(did you mean 'max_queries'\?\); known: 'glossary', 'k', "):
        Built(glossary="g", max_query=2)
    assert Built(glossary="g", k=2).k == 2


def test_langchain_machinery_still_works_on_every_kind_of_retriever():
    """with_config, configurable_fields (which rebuilds the class from its fields), model_copy, deepcopy, dumpd and
    BaseRetriever's own fields (name, tags, metadata) — after extra="forbid" moved into the shared base class."""
    import copy
    import warnings

    from langchain_core.load import dumpd
    from langchain_core.runnables import ConfigurableField

    from langchain_ragspine import retrievers as r

    warnings.simplefilter("ignore")
    bm25, dense, hybrid = _all()
    own = {"name": "mine", "tags": ["t"], "metadata": {"m": 1}}
    every = [
        hybrid,
        r.MultiQueryRetriever(bm25, _llm(), k=2, **own),
        r.HyDERetriever(bm25, _llm(), k=2, **own),
        r.GlossaryRetriever(bm25, glossary=[["梅雨", "雨"]], max_queries=2, k=2, **own),
        r.MultiIndexRetriever({"a": bm25, "b": dense}, k=2, **own),
        r.FilterExtractionRetriever(bm25, k=2, **own),
        r.MultiQueryRetriever(retriever=bm25, llm=_llm(), k=2),  # LangChain's name for the base
    ]
    for ret in every:
        assert ret.with_config(tags=["x"]).invoke("梅雨")
        fields = ret.configurable_fields(k=ConfigurableField(id="k"))
        assert len(fields.with_config(configurable={"k": 1}).invoke("梅雨")) == 1
        assert len(ret.model_copy(update={"k": 1}).invoke("梅雨")) == 1
        assert copy.deepcopy(ret).invoke("梅雨")
        assert dumpd(ret)["type"] == "not_implemented"
    assert (every[1].name, every[1].tags, every[1].metadata) == ("mine", ["t"], {"m": 1})


def test_our_vector_stores_as_retriever_still_take_langchain_keywords(tmp_path):
    from langchain_ragspine.vectorstores import RagSpineVectorStore

    store = RagSpineVectorStore(tmp_path / "s", EMB)
    store.add_documents(DOCS)
    ret = store.as_retriever(search_type="similarity", search_kwargs={"k": 1}, tags=["t"], metadata={"m": 1})
    assert len(ret.invoke("梅雨")) == 1 and "t" in ret.tags and ret.metadata == {"m": 1}
    with pytest.raises(TypeError, match=r"did you mean 'k'"):
        store.as_retriever(search_kwargs={"top_k": 1}).invoke("梅雨")


# -- every check of a field holds on assignment and in model_copy (fresh-user trial of 7b84662) -------------------
def _with_filter_fields() -> list:
    """One retriever of every class with its own ``filter`` field (BM25, dense, hybrid, a query transform, the
    learned-sparse one)."""
    from langchain_ragspine.relations import CooccurrenceExtractor, build_graph
    from langchain_ragspine.retrievers import MultiQueryRetriever
    from langchain_ragspine.retrievers.graph import GraphRetriever
    from langchain_ragspine.retrievers.sparse import SparseRetriever
    from tests.unit_tests.retrievers.test_sparse import Letters
    from tests.unit_tests.spy_models import SpyChatModel

    graph = GraphRetriever(graph=build_graph(DOCS, CooccurrenceExtractor()), docs=DOCS)
    return [*_all(), MultiQueryRetriever(_all()[0], SpyChatModel(reply="梅雨")),
            SparseRetriever.from_documents(DOCS, Letters()), graph]


@pytest.mark.parametrize("i", range(6))
@pytest.mark.parametrize("bad", [{"$bogus": 1}, {"lang": {"$zz": 1}}, "bad"])
def test_a_bad_filter_is_refused_when_assigned_or_copied_and_changes_nothing(i, bad):
    """Regression (trial of 7b84662): ``r.filter = {"$bogus": 1}`` was accepted (the constructor's check ran in
    ``model_post_init`` only) and every later search failed; ``model_copy(update=…)`` kept it too."""
    r = _with_filter_fields()[i]
    before = [d.id for d in r.invoke("梅雨")]
    with pytest.raises((ValueError, TypeError)):
        r.filter = bad
    assert r.filter is None and [d.id for d in r.invoke("梅雨")] == before
    with pytest.raises((ValueError, TypeError)):
        r.model_copy(update={"filter": bad})
    with pytest.raises((ValueError, TypeError)):
        type(r)(**{**{name: getattr(r, name) for name in type(r).model_fields if name != "filter"}, "filter": bad})
    r.filter = {"doc_id": "none-such"}  # a good filter is taken at once and narrows the next search
    assert r.invoke("梅雨") == []


@pytest.mark.parametrize("value", [float("inf"), float("-inf"), float("nan")])
def test_an_infinite_k1_is_refused_everywhere(value):
    """Regression (trial of 7b84662): ``BM25Retriever(k1=inf)`` and ``r.k1 = inf`` were accepted, and every query
    then returned ``[]`` (every score NaN)."""
    with pytest.raises(ValueError, match="k1 must be a finite number >= 0"):
        BM25Retriever.from_documents(DOCS, k1=value)
    r = BM25Retriever.from_documents(DOCS)
    before = r.invoke("梅雨")
    with pytest.raises(ValueError, match="k1"):
        r.k1 = value
    with pytest.raises(ValueError, match="k1"):
        r.model_copy(update={"k1": value})
    assert r.k1 == 1.5 and r.invoke("梅雨") == before


def test_a_store_without_parents_is_refused_when_assigned_or_copied():
    """Regression (trial of 7b84662): ``ParentChildRetriever(store=<a PostgreSQL store>)`` was refused, but
    ``pcr.store = that_store`` and ``pcr.model_copy(update={"store": …})`` were accepted and found nothing."""
    from langchain_ragspine.retrievers import ParentChildRetriever

    class NoParents:  # what PostgresChunkStore says of itself: backends.base.refuse reads `unsupported`
        unsupported = {"parents": "a PostgreSQL store keeps no parents"}
        backend_name = "PostgreSQL"

        def get_parents(self, ids):
            return {}

    parent = Document(page_content="梅雨は六月から七月。", id="p#0", metadata={"chunk_id": "p#0", "doc_id": "p"})
    child = Document(page_content="梅雨は六月から七月。", metadata={"chunk_id": "p#0.0", "doc_id": "p", "parent_id": "p#0"})

    class Parents:  # a parent store (a ChunkStore's get_parents)
        def get_parents(self, ids):
            return {i: parent for i in ids if i == "p#0"}

    pcr = ParentChildRetriever(BM25Retriever.from_documents([child]), store=Parents(), k=1)
    assert [d.id for d in pcr.invoke("梅雨")] == ["p#0"]
    with pytest.raises(ValueError, match="does not support parents"):
        ParentChildRetriever(BM25Retriever.from_documents([child]), store=NoParents(), k=1)
    old = pcr.store
    with pytest.raises(ValueError, match="does not support parents"):
        pcr.store = NoParents()
    assert pcr.store is old and [d.id for d in pcr.invoke("梅雨")] == ["p#0"]
    with pytest.raises(ValueError, match="does not support parents"):
        pcr.model_copy(update={"store": NoParents()})


def test_a_misspelt_keyword_of_a_one_channel_mode_gets_a_did_you_mean():
    """Trial of 7b84662: ``tokenzier=`` was told "(options of the fusion: use mode 'hybrid' or 'auto')"."""
    from langchain_ragspine.pipeline.modes import mode_factory

    with pytest.raises(TypeError, match=r"got \['tokenzier'\] \(did you mean 'tokenizer'\?\)$"):
        mode_factory("bm25", k=3, tokenzier="cjk")(DOCS)
    with pytest.raises(TypeError, match=r"alpha: options of the fusion: use mode 'hybrid' or 'auto'"):
        mode_factory("bm25", k=3, alpha=0.5)(DOCS)


def _constructor_checked_fields() -> list[tuple[object, str, object]]:
    """``(retriever, field, a value its constructor refuses)`` for the checks that ran in ``model_post_init`` only
    (second re-check trial of 7b84662's fixes)."""
    from langchain_ragspine.retrievers import MultiIndexRetriever, MultiQueryRetriever
    from langchain_ragspine.retrievers.sparse import SparseRetriever
    from tests.unit_tests.retrievers.test_sparse import Letters
    from tests.unit_tests.spy_models import SpyChatModel

    bm25, dense = _all()[:2]
    multi = MultiIndexRetriever(indexes={"a": bm25, "b": dense}, k=2)
    transform = MultiQueryRetriever(bm25, SpyChatModel(reply="梅雨"))
    sparse = SparseRetriever.from_documents(DOCS, Letters())
    return [(multi, "c", -1), (transform, "c", -1), (bm25, "workers", -3), (dense, "batch_size", 0),
            (sparse, "batch_size", 0), (bm25, "workers", 1.5)]


@pytest.mark.parametrize("i", range(6))
def test_a_value_the_constructor_refuses_is_refused_when_assigned_or_copied(i):
    """Regression (re-check trial of 9e10150): ``MultiIndexRetriever.c = -1`` (every call then failed),
    ``BM25Retriever.workers = -3`` and ``DenseRetriever.batch_size = 0`` (the next rebuild failed on them) were
    accepted by assignment and ``model_copy``: their checks ran in ``model_post_init`` only."""
    r, name, bad = _constructor_checked_fields()[i]
    before = [d.id for d in r.invoke("梅雨")]
    old = getattr(r, name)
    with pytest.raises((ValueError, TypeError), match=name):
        setattr(r, name, bad)
    with pytest.raises((ValueError, TypeError), match=name):
        r.model_copy(update={name: bad})
    assert getattr(r, name) == old and [d.id for d in r.invoke("梅雨")] == before


def test_parent_child_refuses_none_for_its_children_or_parents_on_assignment():
    """Regression (re-check trial of 9e10150): ``r.store = None`` / ``r.child_retriever = None`` were accepted,
    and the next invoke raised an AttributeError / a bare AssertionError."""
    from langchain_ragspine.retrievers import ParentChildRetriever

    parent = Document(page_content="梅雨は六月から七月。", id="p#0", metadata={"chunk_id": "p#0", "doc_id": "p"})
    child = Document(page_content="梅雨は六月から七月。", metadata={"chunk_id": "p#0.0", "doc_id": "p", "parent_id": "p#0"})

    class Parents:
        def get_parents(self, ids):
            return {i: parent for i in ids if i == "p#0"}

    r = ParentChildRetriever(BM25Retriever.from_documents([child]), store=Parents(), k=1)
    for name, match in (("store", "needs store="), ("child_retriever", "needs child_retriever=")):
        old = getattr(r, name)
        with pytest.raises(TypeError, match=match):
            setattr(r, name, None)
        with pytest.raises(TypeError, match=match):
            r.model_copy(update={name: None})
        assert getattr(r, name) is old and [d.id for d in r.invoke("梅雨")] == ["p#0"]
