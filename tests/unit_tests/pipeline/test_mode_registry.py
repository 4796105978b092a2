"""The mode registry: one place from a mode name to its retriever, used by open_retriever, ingest, the CLI (search,
ask, eval on QA and BEIR folders) and settings.  A mode registered at run time is selectable everywhere; this is
the "add a retrieval mode" recipe of docs/architecture.md, carried out in a test:

1. the retriever (here ``ReversedRetriever``, a toy that wraps BM25),
2. one ``register_mode`` call,
3. a line of docs.
"""

import json
from pathlib import Path

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from langchain_ragspine.backends.directory.layout import VECTOR_DIR
from langchain_ragspine.cli import build_parser, main
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.errors import StoreError
from langchain_ragspine.evaluation.runner import DEFAULT_KS
from langchain_ragspine.graphs import GRAPH_BUILDERS
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.modes import (
    LEXICAL_MODES,
    RETRIEVAL_MODES,
    DocumentsSource,
    RetrievalMode,
    get_mode,
    lexical_mode_names,
    mode_aliases,
    mode_choices,
    mode_factory,
    mode_names,
    register_mode,
    resolve_mode_name,
    unregister_mode,
)
from langchain_ragspine.pipeline.plan import build_retriever
from langchain_ragspine.pipeline.sources import StoreSource, open_retriever, search
from langchain_ragspine.retrievers import BM25Retriever, DenseRetriever, HybridRetriever


class ReversedRetriever(BaseRetriever):
    """Toy retriever: the base retriever's results in reverse order, marked ``toy`` (so a test sees it ran)."""

    base: BaseRetriever

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs
    ) -> list[Document]:
        docs = self.base.invoke(query, **kwargs)
        return [Document(page_content=d.page_content, metadata={**d.metadata, "toy": True}, id=d.id)
                for d in reversed(docs)]


@pytest.fixture
def toy_mode():
    mode = register_mode(RetrievalMode.wrapping("toy", base="bm25", wrap=lambda r, ctx: ReversedRetriever(base=r)))
    yield mode
    unregister_mode("toy")


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    root = tmp_path / "corpus"
    _write(root / "tsuyu.md", "# 梅雨\n\n梅雨は北海道と小笠原諸島を除く日本で見られる雨季である。京都も梅雨。")
    _write(root / "kyoto.md", "# 京都\n\n京都の観光名所は清水寺と金閣寺である。京都の梅雨は蒸し暑い。")
    _write(root / "osaka.md", "# 大阪\n\n大阪の人口は約二百七十万人である。京都に近い。")
    _write(root / "en.md", "# Rain\n\nThe rainy season in Japan is called tsuyu.")
    return root


def _ids(docs) -> list[str]:
    return [d.metadata["chunk_id"] for d in docs]


def test_a_mode_registered_at_run_time_works_through_open_retriever(toy_mode, corpus, tmp_path):
    ingest(corpus, tmp_path / "S")
    toy = open_retriever(tmp_path / "S", mode="toy", k=3)
    assert isinstance(toy.current, ReversedRetriever) and isinstance(toy.current.base, BM25Retriever)
    plain = search(open_retriever(tmp_path / "S", mode="bm25"), "京都 梅雨", k=3)
    got = search(toy, "京都 梅雨", k=3)
    assert len(plain) == 3 and _ids(got) == _ids(plain)[::-1] and all(d.metadata["toy"] for d in got)
    assert get_mode("TOY") is toy_mode and "toy" in mode_names()


def test_a_mode_registered_at_run_time_works_through_the_cli(toy_mode, corpus, tmp_path, capsys):
    store = str(tmp_path / "S")
    assert main(["ingest", str(corpus), "--store", store]) == 0
    capsys.readouterr()
    query = ["search", "京都 梅雨", "--store", store, "--json", "-k", "3"]
    assert main(query + ["--mode", "bm25"]) == 0
    plain = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert main(query + ["--mode", "toy"]) == 0
    toy = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["chunk_id"] for r in toy] == [r["chunk_id"] for r in plain][::-1]
    assert all(r["metadata"]["toy"] for r in toy) and not any("toy" in r["metadata"] for r in plain)


def test_a_registered_mode_is_a_valid_setting_and_works_in_ask_and_eval(toy_mode, corpus, tmp_path, capsys, monkeypatch):
    ingest(corpus, tmp_path / "S")
    monkeypatch.setenv("RAGSPINE_RETRIEVAL_MODE", "toy")
    assert isinstance(open_retriever(tmp_path / "S").current, ReversedRetriever)
    assert main(["ask", "京都の観光名所は", "--store", str(tmp_path / "S"), "--llm", "none", "--json"]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["documents"] and all(d["metadata"]["toy"] for d in record["documents"])
    monkeypatch.delenv("RAGSPINE_RETRIEVAL_MODE")
    ds = tmp_path / "ds"
    _write(ds / "docs" / "kyoto.md", (corpus / "kyoto.md").read_text("utf-8"))
    q = {"id": "q1", "question": "京都の名所は", "answers": ["清水寺"], "doc_id": "kyoto", "paragraph": 0}
    _write(ds / "questions.jsonl", json.dumps(q, ensure_ascii=False) + "\n")
    out = tmp_path / "r.json"
    assert main(["eval", str(ds), "--mode", "toy", "bm25", "--json", str(out)]) == 0
    assert [r["name"] for r in json.loads(out.read_text("utf-8"))["results"]] == ["toy", "bm25"]


def test_an_unregistered_mode_is_refused(corpus, tmp_path, capsys):
    ingest(corpus, tmp_path / "S")
    with pytest.raises(SystemExit):
        main(["search", "京都", "--store", str(tmp_path / "S"), "--mode", "toy"])
    assert "invalid choice: 'toy'" in capsys.readouterr().err
    with pytest.raises(ValueError, match="unknown retrieval mode 'toy'; choose one of auto, hybrid"):
        open_retriever(tmp_path / "S", mode="toy")


def test_a_wrapping_mode_needs_what_its_base_needs(toy_mode, corpus, tmp_path, monkeypatch):
    assert get_mode("toy").embedding == "none"
    monkeypatch.setenv("RAGSPINE_EMBEDDING", "hashing")
    s = ingest(corpus, tmp_path / "S", mode="toy")  # a lexical base: no embedding model, no vector index
    assert s.dense is None and not (tmp_path / "S" / VECTOR_DIR).exists()
    register_mode(RetrievalMode.wrapping("toy-hybrid", base="hybrid", wrap=lambda r, ctx: ReversedRetriever(base=r)))
    try:
        assert get_mode("toy-hybrid").embedding == "required"
        monkeypatch.setenv("RAGSPINE_EMBEDDING", "none")
        with pytest.raises(ValueError, match="mode 'toy-hybrid' needs an embedding model"):
            ingest(corpus, tmp_path / "S2", mode="toy-hybrid")
        ingest(corpus, tmp_path / "S3", embedding="hashing")
        r = open_retriever(tmp_path / "S3", mode="toy-hybrid", alpha=0.5)  # options reach the wrapped base
        assert isinstance(r.current.base, HybridRetriever) and r.current.base.alpha == 0.5
    finally:
        unregister_mode("toy-hybrid")


def test_a_mode_factory_builds_registered_modes_from_documents(toy_mode):
    docs = [Document(page_content=t, metadata={"chunk_id": f"d#{i}", "doc_id": "d"})
            for i, t in enumerate(["京都の梅雨", "京都の寺", "大阪"])]
    r = mode_factory("toy", k=2)(docs)
    assert isinstance(r, ReversedRetriever)
    assert _ids(r.invoke("京都 梅雨")) == _ids(BM25Retriever.from_documents(docs, k=2).invoke("京都 梅雨"))[::-1]
    with pytest.raises(ValueError, match="mode 'vector' needs an embedding model"):
        mode_factory("vector", k=2, embedding="none")  # refused before any document is indexed


# -- the built-in modes ---------------------------------------------------------------------------------------------
def test_builtin_modes_and_their_embedding_use():
    """One lexical mode, ``bm25``; ``economy`` and ``lexical`` are its aliases (every spelling of
    ``config.RETRIEVAL_MODES`` / ``LEXICAL_MODES`` is still accepted, and is that mode)."""
    assert mode_names()[:5] == ("auto", "hybrid", "vector", "bm25", "parent_child")
    assert lexical_mode_names()[:1] == ("bm25",) and mode_aliases() == {"economy": "bm25", "lexical": "bm25"}
    assert set(RETRIEVAL_MODES) <= set(mode_choices()) and set(LEXICAL_MODES) <= set(mode_choices())
    assert {resolve_mode_name(m) for m in LEXICAL_MODES} == {"bm25"} and resolve_mode_name(" Economy ") == "bm25"
    assert all(get_mode(m) is get_mode("bm25") for m in LEXICAL_MODES)
    assert {m: get_mode(m).embedding for m in ("auto", "hybrid", "vector")} == {
        "auto": "optional", "hybrid": "required", "vector": "required"
    }
    assert not get_mode("vector").uses_tokenizer and get_mode("bm25").uses_tokenizer


@pytest.mark.parametrize("mode", RETRIEVAL_MODES)
def test_a_store_and_its_documents_give_the_same_retriever(mode, corpus, tmp_path):
    """The registry builds each mode the same from a store directory and from the same chunks in memory."""
    emb = HashingEmbeddings(64)
    ingest(corpus, tmp_path / "S", embedding=emb)
    with StoreSource(tmp_path / "S", embedding=emb) as source:
        from_store = build_retriever(mode, source, k=4)
        in_memory = build_retriever(mode, DocumentsSource(source.documents(), embedding=emb), k=4)
    assert type(from_store) is type(in_memory)
    assert type(from_store) is {"vector": DenseRetriever, "hybrid": HybridRetriever, "auto": HybridRetriever}.get(
        mode, BM25Retriever
    )
    for query in ("京都 梅雨", "rainy season", "大阪の人口"):
        a, b = from_store.invoke(query), in_memory.invoke(query)
        assert _ids(a) == _ids(b) and [d.metadata["scores"] for d in a] == [d.metadata["scores"] for d in b]


def test_auto_without_a_dense_channel_is_bm25_from_either_source(corpus, tmp_path):
    ingest(corpus, tmp_path / "S")
    with StoreSource(tmp_path / "S") as source:
        assert isinstance(build_retriever("auto", source, k=3), BM25Retriever)
        assert isinstance(build_retriever("auto", DocumentsSource(source.documents()), k=3), BM25Retriever)


def test_store_source_opens_on_entering_and_closes_on_leaving(corpus, tmp_path):
    # the context-manager / store-property behaviour StoreSource and PostgresSource share (StoreBackedSource)
    source = StoreSource(tmp_path / "missing")
    with pytest.raises(StoreError, match="no chunk store here"):
        source.__enter__()
    ingest(corpus, tmp_path / "S")
    source = StoreSource(tmp_path / "S")
    with pytest.raises(RuntimeError, match="StoreSource is used outside its `with` block"):
        _ = source.store
    with source as entered:
        assert entered is source and source.documents()
    with pytest.raises(RuntimeError, match="outside its `with` block"):
        source.documents()


def test_registry_errors():
    with pytest.raises(ValueError, match="registered already"):
        register_mode(RetrievalMode("bm25", lambda ctx: ctx.bm25()))
    for bad in ("", "Toy", " toy"):
        with pytest.raises(ValueError, match="lower-case"):
            RetrievalMode(bad, lambda ctx: ctx.bm25())
    with pytest.raises(ValueError, match="embedding must be"):
        RetrievalMode("x", lambda ctx: ctx.bm25(), embedding="maybe")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown retrieval mode 'nope'"):
        RetrievalMode.wrapping("x", base="nope", wrap=lambda r, ctx: r)
    with pytest.raises(TypeError, match="RetrievalMode"):
        register_mode("bm25")  # type: ignore[arg-type]
    docs = [Document(page_content="京都", metadata={"chunk_id": "d#0"})]
    with pytest.raises(TypeError, match="mode 'bm25' takes only the option filter, got \\['alpha'\\]"):
        build_retriever("bm25", DocumentsSource(docs), k=1, alpha=0.5)
    with pytest.raises(TypeError, match="mode 'vector' takes only the option filter, got \\['fusion'\\]"):
        build_retriever("vector", DocumentsSource(docs, embedding=HashingEmbeddings()), k=1, filter={}, fusion="rrf")


def test_an_alias_is_a_registered_name():
    """A mode's aliases resolve to it everywhere, and are taken: another mode of that name is refused."""
    register_mode(RetrievalMode("toy2", lambda ctx: ctx.bm25(), aliases=("toy-two",)))
    try:
        assert resolve_mode_name("TOY-TWO") == "toy2" and "toy-two" in mode_choices()
        assert "toy-two" not in mode_names()
        with pytest.raises(ValueError, match="'toy-two' is registered already"):
            register_mode(RetrievalMode("toy-two", lambda ctx: ctx.bm25()))
        with pytest.raises(ValueError, match="'economy' is registered already"):
            register_mode(RetrievalMode("toy3", lambda ctx: ctx.bm25(), aliases=("economy",)))
        with pytest.raises(ValueError, match="lower-case"):
            RetrievalMode("toy4", lambda ctx: ctx.bm25(), aliases=("Toy",))
    finally:
        unregister_mode("toy2")
    assert "toy-two" not in mode_choices() and "toy2" not in mode_names()


def test_replacing_a_mode_is_explicit(toy_mode):
    other = RetrievalMode("toy", lambda ctx: ctx.bm25())
    assert register_mode(other, replace=True) is other and get_mode("toy") is other


def test_cli_choices_come_from_library_constants(toy_mode):
    parser = build_parser()
    sub = {a.dest: a for a in parser._subparsers._group_actions[0].choices["ask"]._actions}
    assert list(sub["graph"].choices) == list(GRAPH_BUILDERS) and "self_rag" in sub["graph"].choices
    assert sub["mode"].choices == mode_choices() and "toy" in sub["mode"].choices
    assert set(mode_names()) | {"economy", "lexical", "hyde"} <= set(sub["mode"].choices)
    ev = {a.dest: a for a in parser._subparsers._group_actions[0].choices["eval"]._actions}
    assert ev["ks"].default == list(DEFAULT_KS)


@pytest.mark.parametrize("mode", ["bm25", "vector", "hybrid", "auto"])
def test_every_mode_takes_its_own_filter_and_ands_it_with_the_calls(mode: str, corpus: Path, tmp_path: Path) -> None:
    """Trial of 5d1ab81: ``open_retriever(store, mode="bm25" | "vector", filter=...)`` was a TypeError ("takes no
    options") while ``hybrid`` and ``auto`` took it.  Every mode takes the retriever's own filter; a call's filter
    is ANDed with it (never widens it)."""
    ingest(corpus, tmp_path / "s", embedding=HashingEmbeddings(), progress=False)
    for path, text in (("tsuyu.json", '{"lang": "ja", "year": 2020}'), ("kyoto.json", '{"lang": "ja", "year": 2024}'),
                       ("osaka.json", '{"lang": "ja", "year": 2024}'), ("en.json", '{"lang": "en", "year": 2024}')):
        (corpus / path).write_text(text, "utf-8")
    ingest(corpus, tmp_path / "s", embedding=HashingEmbeddings(), progress=False)
    own = open_retriever(tmp_path / "s", mode=mode, k=4, embedding=HashingEmbeddings(), filter={"lang": "ja"})
    plain = open_retriever(tmp_path / "s", mode=mode, k=4, embedding=HashingEmbeddings())
    hits = search(own, "京都 梅雨", k=4)
    assert hits and {d.metadata["lang"] for d in hits} == {"ja"}
    assert _ids(hits) == _ids(search(plain, "京都 梅雨", k=4, filter={"lang": "ja"}))
    anded = search(own, "京都 梅雨 rainy", k=4, filter={"year": 2024})
    assert anded and all(d.metadata["lang"] == "ja" and d.metadata["year"] == 2024 for d in anded)
    assert search(own, "rainy season", k=4, filter={"lang": "en"}) == []  # the call cannot widen it


def test_the_old_name_of_build_mode_warns_and_is_build_mode() -> None:
    """Two public ``build_retriever`` functions (the registry's, the plan's) became one: the plan's; the
    registry's primitive is ``build_mode``, and its old name still works for one release, warning at the user's
    line and naming both."""
    from langchain_ragspine.pipeline import modes
    from langchain_ragspine.pipeline.plan import build_retriever as plan_build

    with pytest.warns(DeprecationWarning, match=r"pipeline\.plan\.build_retriever.*pipeline\.modes\.build_mode") as w:
        old = modes.build_retriever
    assert old is modes.build_mode and w[0].filename == __file__
    assert "build_retriever" not in modes.__all__
    docs = [Document(page_content=t, metadata={"chunk_id": f"c{i}", "doc_id": f"d{i}"})
            for i, t in enumerate(["梅雨は六月", "台風は九月", "北海道の梅雨"])]
    ids = [[d.id for d in build(mode, DocumentsSource(docs), k=2).invoke("梅雨")] for build in (modes.build_mode, plan_build)
           for mode in ("bm25",)]
    assert ids[0] == ids[1] and len(ids[0]) == 2  # a mode name is a plan: the same retriever
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        modes.nothing  # noqa: B018 - the attribute error is what is under test
