"""The second stage wired in: make_reranker / make_postprocessor / make_compressors (and their RAGSPINE_* settings),
SecondStageRetriever, and --rerank / --postprocess on `ragspine search | eval | ask`.  Off means byte-identical."""

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.retrievers import BaseRetriever

import langchain_ragspine.chat_models as chat_models
from langchain_ragspine.arguments import DEFAULT_FETCH_K
from langchain_ragspine.cli import main, result_record
from langchain_ragspine.document_compressors import (
    CrossEncoderReranker,
    ExtractiveCompressor,
    LLMListwiseReranker,
    LostInTheMiddleReorder,
    MMRCompressor,
    SecondStageRetriever,
    selects_candidates,
)
from langchain_ragspine.document_compressors.factory import (
    make_compressors,
    make_postprocessor,
    make_reranker,
)
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.sources import open_retriever, search
from langchain_ragspine.settings import get_settings
from langchain_ragspine.specs import (
    POSTPROCESSORS,
    RERANKER_SPECS,
    configured_postprocessor,
    configured_reranker,
)
from tests.unit_tests.spy_models import SpyChatModel
from tests.unit_tests.test_eval_cli import _qa_folder

SECRET = "SECRET-MARKER-77"


@pytest.fixture(autouse=True)
def _no_second_stage_settings(monkeypatch, tmp_path):
    for name in ("RAGSPINE_RERANKER", "RAGSPINE_POSTPROCESSOR", "RAGSPINE_LLM", "RAGSPINE_K"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # no .env


# -- factories ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", [None, "none", "NONE", "", "  "])
def test_make_reranker_none_builds_nothing(spec):
    assert make_reranker(spec) is None


def test_make_reranker_unknown_name_lists_the_valid_ones():
    with pytest.raises(ValueError) as e:
        make_reranker("rankzephyr")
    for valid in RERANKER_SPECS:
        assert valid in str(e.value)
    with pytest.raises(ValueError, match="cross_encoder:<model"):
        make_reranker("cross_encoder:")


def test_make_reranker_llm_uses_the_given_model_and_fails_clearly_without_one():
    fake = FakeListChatModel(responses=["[2] > [1]"])
    reranker = make_reranker("llm", llm=fake, k=3)
    assert isinstance(reranker, LLMListwiseReranker) and reranker.llm is fake and reranker.k == 3
    with pytest.raises(ValueError, match="RAGSPINE_LLM"):
        make_reranker("llm")  # no llm= and RAGSPINE_LLM unset: the library uses no LLM


def test_make_reranker_llm_spec_builds_the_named_chat_model(monkeypatch):
    fake = FakeListChatModel(responses=["[1]"])
    asked = []
    monkeypatch.setattr(chat_models, "make_chat_model", lambda spec=None, **kw: asked.append(spec) or fake)
    reranker = make_reranker("LLM:ollama:qwen2.5:7b")
    assert isinstance(reranker, LLMListwiseReranker) and reranker.llm is fake
    assert asked == ["ollama:qwen2.5:7b"]


class ScoredModel:
    """A cross-encoder stand-in: the logit of a text is the number after "score=" in it."""

    def predict(self, pairs, **kwargs):
        return np.array([float(text.split("score=")[1].split()[0]) for _, text in pairs])


def test_make_reranker_cross_encoder_on_a_tiny_random_bert(tmp_path):
    pytest.importorskip("sentence_transformers")
    from tests.unit_tests.tiny_cross_encoder import build_tiny_cross_encoder

    path = build_tiny_cross_encoder(tmp_path / "ce")
    reranker = make_reranker(f"Cross-Encoder:{path}", k=2)
    assert isinstance(reranker, CrossEncoderReranker) and reranker.k == 2
    docs = [Document(page_content=f"梅雨 text {i}", metadata={"chunk_id": f"d#{i}", "x": i}) for i in range(4)]
    out = reranker.compress_documents(docs, "梅雨")
    assert len(out) == 2 and all(0.0 <= d.metadata["scores"]["rerank"] <= 1.0 for d in out)


def test_make_postprocessor_builds_the_steps_in_the_order_written():
    steps = make_postprocessor(" Compress , lost-in-middle,MMR ", k=3)
    assert [type(s) for s in steps] == [ExtractiveCompressor, LostInTheMiddleReorder, MMRCompressor]
    assert steps[2].k == 3
    assert make_postprocessor("none") == [] and make_postprocessor("") == [] and make_postprocessor(None) == []


@pytest.mark.parametrize("spec", ["mmr,rerank", "lost_in_the_middle", "none,mmr"])
def test_make_postprocessor_unknown_step_lists_the_valid_ones(spec):
    with pytest.raises(ValueError) as e:
        make_postprocessor(spec)
    assert all(name in str(e.value) for name in POSTPROCESSORS)


def test_make_postprocessor_refuses_a_repeated_step():
    with pytest.raises(ValueError, match="'mmr' is repeated"):
        make_postprocessor("mmr,compress,mmr")


def test_settings_choose_the_second_stage(monkeypatch):
    monkeypatch.setenv("RAGSPINE_POSTPROCESSOR", "mmr,compress")
    monkeypatch.setenv("RAGSPINE_RERANKER", "llm")
    assert get_settings().postprocessor == "mmr,compress"
    assert [type(s) for s in make_postprocessor(k=4)] == [MMRCompressor, ExtractiveCompressor]
    fake = FakeListChatModel(responses=["[1]"])
    assert isinstance(make_reranker(llm=fake), LLMListwiseReranker)
    stage = make_compressors(llm=fake, k=4)
    assert [type(s) for s in stage] == [LLMListwiseReranker, MMRCompressor, ExtractiveCompressor]
    assert stage[0].k == 4 and stage[1].k == 4


BAD_STAGE_SETTINGS = [
    ("RAGSPINE_RERANKER", "bogus", make_reranker,
     "RAGSPINE_RERANKER='bogus': unknown reranker 'bogus'; use one of: none, auto, cross_encoder:<model name or "
     "path>, llm, llm:<chat model spec>, colbert:<local checkpoint path>, splade:<local path>, learned, learned:<model file>"),
    ("RAGSPINE_RERANKER", "cross-encodr:m", make_reranker,
     "RAGSPINE_RERANKER='cross-encodr:m': unknown reranker 'cross-encodr:m' (did you mean 'cross_encoder'?); use "
     "one of: none, auto, cross_encoder:<model name or path>, llm, llm:<chat model spec>, colbert:<local "
     "checkpoint path>, splade:<local path>, learned, learned:<model file>"),
    ("RAGSPINE_RERANKER", "cross_encoder:", make_reranker,
     "RAGSPINE_RERANKER='cross_encoder:': malformed reranker spec 'cross_encoder:': write cross_encoder:<model name "
     "or path>"),
    ("RAGSPINE_POSTPROCESSOR", "mmr,dedupe", make_postprocessor,
     "RAGSPINE_POSTPROCESSOR='mmr,dedupe': unknown post-processing step 'dedupe' in 'mmr,dedupe'; use none or a "
     "comma-separated list of: mmr, lost_in_middle, compress"),
    ("RAGSPINE_POSTPROCESSOR", "lost-in-midle", make_postprocessor,
     "RAGSPINE_POSTPROCESSOR='lost-in-midle': unknown post-processing step 'lost_in_midle' (did you mean "
     "'lost_in_middle'?) in 'lost-in-midle'; use none or a comma-separated list of: mmr, lost_in_middle, compress"),
    ("RAGSPINE_POSTPROCESSOR", "mmr,mmr", make_postprocessor,
     "RAGSPINE_POSTPROCESSOR='mmr,mmr': post-processing step 'mmr' is repeated in 'mmr,mmr'"),
]


@pytest.mark.parametrize(("name", "value", "factory", "message"), BAD_STAGE_SETTINGS)
def test_a_bad_setting_fails_where_it_is_used_and_names_the_variable(monkeypatch, name, value, factory, message):
    """RAGSPINE_RERANKER=bogus made get_settings() itself raise, so every command broke (see the ingest test
    below); now reading the settings keeps it as written and the factory that uses it refuses it, naming the
    variable and listing the valid values."""
    monkeypatch.setenv(name, value)
    assert get_settings()  # reading the settings does not fail on a setting only some commands use
    with pytest.raises(ValueError) as e:
        factory()
    assert str(e.value) == message
    with pytest.raises(ValueError, match=f"^{name}="):
        make_compressors(k=3)


@pytest.mark.parametrize(("name", "value", "spelled"), [("RAGSPINE_RERANKER", " Cross-Encoder : m ", "cross_encoder:m"),
                                                        ("RAGSPINE_RERANKER", "  ", "none"),
                                                        ("RAGSPINE_POSTPROCESSOR", "MMR, lost-in-middle",
                                                         "mmr,lost_in_middle"),
                                                        ("RAGSPINE_POSTPROCESSOR", " ", "none")])
def test_a_good_stage_setting_is_read_in_its_one_spelling(monkeypatch, name, value, spelled):
    """The settings hold it as written (stripped; blank: ``none``); where it is used it is read in its one spelling."""
    monkeypatch.setenv(name, value)
    field = "reranker" if name == "RAGSPINE_RERANKER" else "postprocessor"
    configured = configured_reranker if field == "reranker" else configured_postprocessor
    assert (getattr(get_settings(), field), configured()) == (value.strip() or "none", spelled)


def test_an_explicit_spec_does_not_read_the_bad_setting(monkeypatch):
    monkeypatch.setenv("RAGSPINE_RERANKER", "bogus")
    monkeypatch.setenv("RAGSPINE_POSTPROCESSOR", "dedupe")
    assert make_reranker("none") is None
    assert [type(c) for c in make_compressors("none", "mmr", k=2)] == [MMRCompressor]
    with pytest.raises(ValueError, match="^unknown reranker 'rankzephyr'"):  # an argument is not named as a variable
        make_reranker("rankzephyr")


@pytest.mark.parametrize(("name", "value"), [("RAGSPINE_RERANKER", "bogus"), ("RAGSPINE_POSTPROCESSOR", "mmx")])
def test_a_bad_stage_setting_does_not_break_ingest(tmp_path, capsys, monkeypatch, name, value):
    """Regression: RAGSPINE_RERANKER=bogus (or RAGSPINE_POSTPROCESSOR=mmx) made `ragspine ingest` exit 2 with
    "bad RAGSPINE_* setting", and indexing.ingest / open_retriever raise pydantic's ValidationError, though neither
    ever reranks."""
    monkeypatch.setenv(name, value)
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.md").write_text("# A\n\nchunk offsets and citations.", "utf-8")
    assert main(["ingest", str(corpus), "--store", str(tmp_path / "s"), "--mode", "bm25"]) == 0
    ingest(corpus, tmp_path / "s2", mode="bm25")
    assert open_retriever(tmp_path / "s2", mode="bm25").invoke("chunk")
    assert search(open_retriever(tmp_path / "s", mode="bm25"), "chunk", k=1)
    capsys.readouterr()


# -- SecondStageRetriever -------------------------------------------------------------------------------------------
class ListRetriever(BaseRetriever):
    """Returns its documents in order, at most ``k``; records each ``k`` it was asked for."""

    docs: list[Document]
    asked: list = []

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int = 4,
                                filter=None) -> list[Document]:
        self.asked.append(k)
        docs = self.docs
        if filter:
            docs = [d for d in docs if all(d.metadata.get(f) == v for f, v in filter.items())]
        return docs[:k]


class SpyCompressor(BaseDocumentCompressor):
    seen: list = []

    def compress_documents(self, documents: Sequence[Document], query: str, callbacks=None) -> Sequence[Document]:
        self.seen.append([d.page_content for d in documents])
        return list(documents)


def _docs(n: int, restricted: Sequence[int] = ()) -> list[Document]:
    return [
        Document(
            page_content=f"passage {i} score={n - i if i % 2 else i}" + (f" {SECRET}" if i in restricted else ""),
            metadata={"chunk_id": f"d#{i}", "doc_id": f"doc{i % 3}", "sensitivity": "RESTRICTED" if i in restricted
                      else "internal", "group": "a" if i < n // 2 else "b"},
        )
        for i in range(n)
    ]


def test_second_stage_without_compressors_returns_the_base_results_unchanged():
    base = ListRetriever(docs=_docs(30, restricted=[3]), asked=[])
    out = SecondStageRetriever(base_retriever=base, compressors=[]).invoke("q", k=5)
    # the RESTRICTED d#3 is gated before the cut to k, so it does not use up one of the 5 (it used to leave 4)
    assert out == [d for d in _docs(30, restricted=[3])[:6] if d.metadata["chunk_id"] != "d#3"]
    assert base.asked == [5, 20]  # no candidate pool without a choosing stage; asked again as 1 of 5 was gated


def test_second_stage_gate_first_then_a_pool_of_fetch_k_then_k():
    spy = SpyCompressor(seen=[])
    base = ListRetriever(docs=_docs(40, restricted=[1, 7]), asked=[])
    reranker = CrossEncoderReranker(model=ScoredModel(), k=None)
    retriever = SecondStageRetriever(base_retriever=base, compressors=[spy, reranker, LostInTheMiddleReorder()])
    out = retriever.invoke("q", k=4)
    # the gate comes before the cut to the pool of fetch_k: 2 of the first 20 are RESTRICTED, so the base is asked
    # again (over-fetching, as for a post-filter) and the pool holds 20 gated candidates, not 18
    assert base.asked == [DEFAULT_FETCH_K, 4 * DEFAULT_FETCH_K]
    assert len(spy.seen[0]) == DEFAULT_FETCH_K and not any(SECRET in t for t in spy.seen[0])
    # the reranker orders the 20 gated candidates by logit; the cut to k=4 comes right after it, so the reorder that
    # follows puts the best first and the second best last among the four returned
    ranked = sorted((d for d in _docs(40)[: DEFAULT_FETCH_K + 2] if d.metadata["chunk_id"] not in ("d#1", "d#7")),
                    key=lambda d: -float(d.page_content.split("score=")[1]))[:4]
    assert [d.metadata["chunk_id"] for d in out] == [ranked[i].metadata["chunk_id"] for i in (0, 2, 3, 1)]
    assert all(0 < d.metadata["scores"]["rerank"] <= 1 for d in out)


def test_second_stage_passes_the_filter_to_the_first_stage_and_fetches_max_k_fetch_k():
    base = ListRetriever(docs=_docs(60), asked=[])
    retriever = SecondStageRetriever(base_retriever=base, compressors=[MMRCompressor(k=30)], fetch_k=10)
    out = retriever.invoke("passage", k=25, filter={"group": "b"})
    assert base.asked == [25] and len(out) == 25 and {d.metadata["group"] for d in out} == {"b"}


async def test_second_stage_async_matches_sync():
    base = ListRetriever(docs=_docs(30, restricted=[2]), asked=[])
    retriever = SecondStageRetriever(
        base_retriever=base, compressors=[CrossEncoderReranker(model=ScoredModel(), k=6), MMRCompressor(k=3)]
    )
    assert await retriever.ainvoke("passage", k=3) == retriever.invoke("passage", k=3)


def test_second_stage_rejects_what_is_not_a_compressor():
    with pytest.raises(TypeError, match=r"compressors\[0\]"):
        SecondStageRetriever(base_retriever=ListRetriever(docs=[]), compressors=[object()])
    with pytest.raises(ValueError):
        SecondStageRetriever(base_retriever=ListRetriever(docs=[]), compressors=[], fetch_k=0)


def test_selects_candidates():
    assert selects_candidates([LostInTheMiddleReorder(), MMRCompressor()])
    assert not selects_candidates([LostInTheMiddleReorder(), ExtractiveCompressor()])


# -- the CLI --------------------------------------------------------------------------------------------------------
@pytest.fixture
def store(tmp_path: Path) -> str:
    root = tmp_path / "corpus"
    root.mkdir()
    for i in range(12):
        body = "。".join(f"梅雨前線 {i} の話 {j}" for j in range(i % 4 + 1))
        (root / f"t{i:02d}.md").write_text(f"# 梅雨 {i}\n\n{body}。北海道には梅雨がない。", "utf-8")
    long = "".join(f"梅雨前線と北海道の話、その{j}。別の話題の文、その{j}。" for j in range(12))
    (root / "long.md").write_text(f"# 長い梅雨\n\n{long}", "utf-8")
    (root / "keys.md").write_text(f"---\nsensitivity: restricted\n---\n# 鍵\n\n梅雨前線 北海道 {SECRET}。", "utf-8")
    ingest(root, tmp_path / "S", embedding="hashing")
    return str(tmp_path / "S")


QUERY = "梅雨前線 北海道"


def _lines(capsys) -> list[str]:
    return capsys.readouterr().out.splitlines()


def test_search_with_the_second_stage_off_is_byte_identical(store, capsys, monkeypatch):
    expected = [json.dumps(result_record(i, d), ensure_ascii=False, default=str)
                for i, d in enumerate(search(open_retriever(store, k=5), QUERY, k=5), 1)]
    assert main(["search", QUERY, "--store", store, "-k", "5", "--json"]) == 0
    assert _lines(capsys) == expected
    assert main(["search", QUERY, "--store", store, "-k", "5", "--json", "--rerank", "none", "--postprocess", "none"]) == 0
    assert _lines(capsys) == expected
    monkeypatch.setenv("RAGSPINE_RERANKER", "none")
    monkeypatch.setenv("RAGSPINE_POSTPROCESSOR", "")
    assert main(["search", QUERY, "--store", store, "-k", "5", "--json"]) == 0
    assert _lines(capsys) == expected
    text = []
    for argv in ([], ["--rerank", "none"]):
        assert main(["search", QUERY, "--store", store, "-k", "5", *argv]) == 0
        text.append(capsys.readouterr().out)
    assert text[0] == text[1]


def test_search_rerank_cross_encoder_chooses_k_among_the_candidates(store, capsys, tmp_path):
    pytest.importorskip("sentence_transformers")
    from tests.unit_tests.tiny_cross_encoder import build_tiny_cross_encoder

    path = build_tiny_cross_encoder(tmp_path / "ce")
    pool = {d.metadata["chunk_id"] for d in search(open_retriever(store, k=DEFAULT_FETCH_K), QUERY, k=DEFAULT_FETCH_K)}
    assert main(["search", QUERY, "--store", store, "-k", "3", "--json", "--rerank", f"cross_encoder:{path}"]) == 0
    out = capsys.readouterr().out
    records = [json.loads(line) for line in out.splitlines()]
    assert len(records) == 3 and {r["chunk_id"] for r in records} <= pool
    assert all(0 <= r["scores"]["rerank"] <= 1 for r in records) and SECRET not in out
    ranks = [r["scores"]["rerank"] for r in records]
    assert ranks == sorted(ranks, reverse=True)


def test_search_postprocess_from_the_environment(store, capsys, monkeypatch):
    monkeypatch.setenv("RAGSPINE_POSTPROCESSOR", "mmr,compress")
    assert main(["search", QUERY, "--store", store, "-k", "4", "--json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(records) == 4 and len({r["chunk_id"] for r in records}) == 4
    # chunks longer than ExtractiveCompressor's 240 characters get a prompt_text, shorter ones are left as they are
    assert any("prompt_text" in r["metadata"] for r in records)
    assert all(("prompt_text" in r["metadata"]) == (len(r["text"]) > 240) for r in records)
    assert all(r["text"] in Path(store).parent.joinpath("corpus", r["doc_id"] + ".md").read_text("utf-8")
               for r in records)  # page_content stays the verbatim chunk


def test_search_rerank_llm_without_an_llm_warns_and_keeps_the_order(store, capsys, monkeypatch):
    monkeypatch.setenv("RAGSPINE_LLM", "none")
    assert main(["search", QUERY, "--store", store, "-k", "5", "--json"]) == 0
    plain = capsys.readouterr().out
    assert main(["search", QUERY, "--store", store, "-k", "5", "--json", "--rerank", "llm"]) == 0
    cap = capsys.readouterr()
    assert cap.out == plain and "--rerank llm: no LLM" in cap.err


def test_search_rerank_llm_never_shows_the_model_restricted_text(store, capsys, monkeypatch):
    spy = SpyChatModel()
    monkeypatch.setattr(chat_models, "make_chat_model", lambda spec=None, **kw: spy)
    assert main(["search", QUERY, "--store", store, "-k", "3", "--rerank", "llm:fake"]) == 0
    assert spy.prompts and not any(SECRET in p for p in spy.prompts)
    assert SECRET not in capsys.readouterr().out


@pytest.mark.parametrize(("flag", "value", "valid"), [("--rerank", "bm25", "cross_encoder:<model"),
                                                       ("--postprocess", "mmr,dedupe", "lost_in_middle")])
def test_search_unknown_second_stage_is_a_usage_error(store, capsys, flag, value, valid):
    assert main(["search", QUERY, "--store", store, flag, value]) == 2
    err = capsys.readouterr().err
    assert "ragspine: error:" in err and valid in err


@pytest.mark.parametrize("command", ["search", "ask", "eval"])
@pytest.mark.parametrize(("name", "value", "message"), [
    ("RAGSPINE_RERANKER", "rankzephyr", "ragspine: error: RAGSPINE_RERANKER='rankzephyr': unknown reranker "
     "'rankzephyr'; use one of: none, auto, cross_encoder:<model name or path>, llm, llm:<chat model spec>, "
     "colbert:<local checkpoint path>, splade:<local path>, learned, learned:<model file>\n"),
    ("RAGSPINE_POSTPROCESSOR", "mmr,dedupe", "ragspine: error: RAGSPINE_POSTPROCESSOR='mmr,dedupe': unknown "
     "post-processing step 'dedupe' in 'mmr,dedupe'; use none or a comma-separated list of: mmr, lost_in_middle, "
     "compress\n"),
])
def test_bad_second_stage_setting_is_a_usage_error_where_used(store, capsys, monkeypatch, tmp_path, command, name,
                                                               value, message):
    monkeypatch.setenv(name, value)
    argv = {"search": ["search", QUERY, "--store", store],
            "ask": ["ask", QUERY, "--store", store],
            "eval": ["eval", str(_qa_folder(tmp_path / "ds")), "--mode", "bm25"]}[command]
    assert main(argv) == 2
    assert capsys.readouterr().err.endswith(message)


def test_a_second_stage_flag_overrides_a_bad_setting(store, capsys, monkeypatch):
    expected = [json.dumps(result_record(i, d), ensure_ascii=False, default=str)
                for i, d in enumerate(search(open_retriever(store, k=5), QUERY, k=5), 1)]
    monkeypatch.setenv("RAGSPINE_RERANKER", "rankzephyr")
    monkeypatch.setenv("RAGSPINE_POSTPROCESSOR", "dedupe")
    assert main(["search", QUERY, "--store", store, "-k", "5", "--json", "--rerank", "none", "--postprocess",
                 "none"]) == 0
    assert _lines(capsys) == expected


def test_eval_with_the_second_stage_names_it_and_off_is_unchanged(tmp_path, capsys):
    ds = _qa_folder(tmp_path / "ds")
    outs = []
    for i, argv in enumerate(([], ["--rerank", "none", "--postprocess", "none"], ["--postprocess", "mmr,lost_in_middle"])):
        out = tmp_path / f"r{i}.json"
        assert main(["eval", str(ds), "--mode", "bm25", "--json", str(out), *argv]) == 0
        capsys.readouterr()
        outs.append(json.loads(out.read_text("utf-8"))["results"][0])
    assert outs[0]["name"] == outs[1]["name"] == "bm25"
    assert outs[0]["aggregate"] == outs[1]["aggregate"]
    assert outs[2]["name"] == "bm25 + mmr,lost_in_middle"
    assert outs[2]["aggregate"]["answer_recall@1"] == pytest.approx(2 / 3)  # q3's answer is in no document


# -- ask ------------------------------------------------------------------------------------------------------------
def _spy_builders(monkeypatch, calls):
    from langchain_ragspine import graphs

    real = graphs.GRAPH_BUILDERS["corrective"]

    def corrective(retriever, *, llm=None, compressors=None, **options):
        calls.append({"retriever": retriever, "compressors": compressors, "options": options})
        return real(retriever, llm=llm, **options)

    monkeypatch.setitem(graphs.GRAPH_BUILDERS, "corrective", corrective)


def test_ask_without_flags_builds_the_graph_as_before(store, capsys, monkeypatch):
    calls: list = []
    _spy_builders(monkeypatch, calls)
    assert main(["ask", QUERY, "--store", store, "--llm", "none", "-k", "3"]) == 0
    capsys.readouterr()
    assert calls[0]["compressors"] is None and calls[0]["retriever"].k == 3


def test_ask_passes_the_second_stage_to_the_graph_with_a_candidate_pool(store, capsys, monkeypatch):
    calls: list = []
    _spy_builders(monkeypatch, calls)
    assert main(["ask", QUERY, "--store", store, "--llm", "none", "-k", "3", "--postprocess", "mmr,lost_in_middle"]) == 0
    capsys.readouterr()
    (call,) = calls
    assert [type(c) for c in call["compressors"]] == [MMRCompressor, LostInTheMiddleReorder]
    assert call["compressors"][0].k == 3 and call["retriever"].k == DEFAULT_FETCH_K


def test_ask_with_a_postprocessor_only_keeps_k(store, capsys, monkeypatch):
    calls: list = []
    _spy_builders(monkeypatch, calls)
    assert main(["ask", QUERY, "--store", store, "--llm", "none", "-k", "3", "--postprocess", "compress"]) == 0
    capsys.readouterr()
    assert [type(c) for c in calls[0]["compressors"]] == [ExtractiveCompressor] and calls[0]["retriever"].k == 3


def test_ask_fetch_k_sets_the_candidate_pool(store, capsys, monkeypatch):
    """``--fetch-k`` (issue 26, O2: LangChain's name of the candidate pool) sets the first stage's depth."""
    calls: list = []
    _spy_builders(monkeypatch, calls)
    assert main(["ask", QUERY, "--store", store, "--llm", "none", "-k", "3", "--postprocess", "mmr",
                 "--fetch-k", "7"]) == 0
    capsys.readouterr()
    assert calls[0]["compressors"][0].k == 3 and calls[0]["retriever"].k == 7
    assert main(["ask", QUERY, "--store", store, "--llm", "none", "-k", "9", "--postprocess", "mmr",
                 "--fetch-k", "7"]) == 0  # the pool is at least k
    capsys.readouterr()
    assert calls[1]["retriever"].k == 9


def test_search_and_eval_fetch_k_reach_the_second_stage(store, capsys, monkeypatch, tmp_path):
    import langchain_ragspine.document_compressors as compressors

    made: list[SecondStageRetriever] = []

    class Recorded(SecondStageRetriever):
        def model_post_init(self, context):
            super().model_post_init(context)
            made.append(self)

    monkeypatch.setattr(compressors, "SecondStageRetriever", Recorded)
    assert main(["search", QUERY, "--store", store, "-k", "2", "--postprocess", "mmr", "--fetch-k", "5"]) == 0
    assert main(["search", QUERY, "--store", store, "-k", "2", "--postprocess", "mmr"]) == 0
    assert [(r.k, r.fetch_k) for r in made] == [(2, 5), (2, DEFAULT_FETCH_K)]
    capsys.readouterr()
    made.clear()
    assert main(["eval", str(_qa_folder(tmp_path / "qa")), "--mode", "bm25", "--ks", "1", "3",
                 "--postprocess", "mmr", "--fetch-k", "4"]) == 0
    capsys.readouterr()
    assert made and all((r.k, r.fetch_k) == (3, 4) for r in made)


@pytest.mark.parametrize("command", ["search", "ask"])
def test_fetch_k_without_a_choosing_stage_or_below_one_is_an_error(store, capsys, command):
    extra = ["--llm", "none"] if command == "ask" else []
    assert main([command, QUERY, "--store", store, *extra, "--fetch-k", "5"]) == 2
    assert "--fetch-k is the pool a reranker or mmr chooses the k results from" in capsys.readouterr().err
    assert main([command, QUERY, "--store", store, *extra, "--postprocess", "compress", "--fetch-k", "5"]) == 2
    assert "add --rerank or --postprocess mmr" in capsys.readouterr().err
    assert main([command, QUERY, "--store", store, *extra, "--postprocess", "mmr", "--fetch-k", "0"]) == 2
    assert "--fetch-k must be an int >= 1, got 0" in capsys.readouterr().err


@pytest.mark.parametrize("graph", ["corrective", "adaptive", "self_rag"])
def test_ask_rerank_reaches_the_graph_and_no_restricted_text_leaks(store, capsys, monkeypatch, graph):
    pytest.importorskip("sentence_transformers")
    from tests.unit_tests.tiny_cross_encoder import build_tiny_cross_encoder

    path = build_tiny_cross_encoder(Path(store).parent / "ce")
    assert main(["ask", QUERY, "--store", store, "--graph", graph, "--llm", "none", "-k", "3", "--json",
                 "--rerank", f"cross_encoder:{path}", "--postprocess", "lost_in_middle"]) == 0
    out = capsys.readouterr().out
    record = json.loads(out)
    assert SECRET not in out
    docs = record["documents"]
    assert docs and len(docs) <= 3
    assert all(d["scores"].get("rerank") is not None for d in docs)  # the cross-encoder scored what was used



def test_eval_beir_runs_the_second_stage_on_every_built_retriever(tmp_path, capsys, monkeypatch):
    import langchain_ragspine.cli as cli

    root = tmp_path / "beir"
    root.mkdir()
    corpus = [{"_id": f"d{i}", "title": "", "text": f"京都の清水寺 score={i}"} for i in range(6)]
    (root / "corpus.jsonl").write_text("".join(json.dumps(c, ensure_ascii=False) + "\n" for c in corpus), "utf-8")
    (root / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "清水寺"}, ensure_ascii=False) + "\n", "utf-8")
    (root / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td5\t1\n", "utf-8")
    def run(*argv: str) -> dict:
        out = tmp_path / "b.json"
        assert main(["eval", str(root), "--mode", "bm25", "--json", str(out), *argv]) == 0
        capsys.readouterr()
        return json.loads(out.read_text("utf-8"))["results"][0]

    results = [run()]
    # the stand-in cross-encoder (no weights here) scores d5, the relevant one, highest
    monkeypatch.setattr(cli, "_second_stage",
                        lambda args, *, k, llm=None: [CrossEncoderReranker(model=ScoredModel(), k=k)])
    results.append(run("--rerank", "cross_encoder:scored"))
    assert results[0]["name"] == "bm25" and results[0]["aggregate"]["mrr@10"] < 1.0  # BM25 ties: chunk_id order
    assert results[1]["name"] == "bm25 + rerank cross_encoder:scored" and results[1]["aggregate"]["mrr@10"] == 1.0


def test_search_rerank_with_a_folder_that_is_not_a_model_is_one_clear_line(store, capsys, tmp_path):
    """Regression (new-user trial): a folder that is not a cross-encoder printed a raw pydantic validation dump
    ("1 validation error for CrossEncoderReranker … errors.pydantic.dev"); it is one line naming the folder."""
    folder = tmp_path / "not-a-model"
    folder.mkdir()
    (folder / "a.md").write_text("# a\n\ntext", "utf-8")
    assert main(["search", QUERY, "--store", store, "--rerank", f"cross_encoder:{folder}"]) == 2
    err = capsys.readouterr().err
    assert "ragspine: error:" in err and str(folder) in err and "not a cross-encoder model" in err
    assert "validation error" not in err and "pydantic" not in err
    with pytest.raises(OSError, match="not a cross-encoder model"):
        make_reranker(f"cross_encoder:{folder}")
