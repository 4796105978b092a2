"""The learned reranker: its features on hand-made cases (English, Japanese, Chinese), the model file (round trip,
bit-for-bit rebuild, graceful errors for missing / foreign / truncated files), LearnedReranker (the RESTRICTED gate
first, k, scores), its spec (`learned`, `learned:<path>`) and the second stage's candidate pool."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from langchain_core.documents import Document

pytest.importorskip("lightgbm")

from langchain_ragspine.document_compressors import SecondStageRetriever, selects_candidates  # noqa: E402
from langchain_ragspine.document_compressors.factory import make_reranker  # noqa: E402
from langchain_ragspine.document_compressors.learned import (  # noqa: E402
    DEFAULT_MODEL,
    FEATURE_NAMES,
    LearnedModel,
    LearnedReranker,
    ModelFileError,
    candidate_features,
    train_lambdarank,
)
from langchain_ragspine.document_compressors.learned import reranker as reranker_module  # noqa: E402
from langchain_ragspine.document_compressors.learned.features import (  # noqa: E402
    longest_common_substring,
    query_terms,
    smallest_window,
)
from langchain_ragspine.document_compressors.learned.model import sidecar_path  # noqa: E402
from langchain_ragspine.specs import normalise_reranker_spec, parse_reranker_spec  # noqa: E402

COL = {name: i for i, name in enumerate(FEATURE_NAMES)}


def doc(text: str, *, title: str = "", start: int | None = 0, cid: str = "", sensitivity: str = "INTERNAL",
        **scores: float | None) -> Document:
    meta: dict = {"title": title, "chunk_id": cid or text[:8], "doc_id": cid.split("#")[0] or "d",
                  "sensitivity": sensitivity}
    if start is not None:
        meta["start_index"] = start
    if scores:
        meta["scores"] = {"bm25": None, "vector": None, "fused": None, "rerank": None, **scores}
    return Document(page_content=text, metadata=meta)


# ------------------------------------------------------------------------------------------------------ features


def test_string_helpers():
    assert longest_common_substring("北海道とどこ", "北海道と小笠原諸島") == 4
    assert longest_common_substring("abcdef", "xxcdexx") == 3
    assert longest_common_substring("", "abc") == 0 and longest_common_substring("abc", "") == 0
    assert longest_common_substring("abc", "xyz") == 0
    assert smallest_window("a tokyo b c weather d tokyo weather", ["tokyo", "weather"]) == (2, 13)
    assert smallest_window("tokyo only", ["tokyo", "weather"]) == (1, 5)
    assert smallest_window("nothing", ["tokyo"]) == (0, 0)


def test_english_features_by_hand():
    q = "What is the weather in Tokyo?"
    assert query_terms(q).terms == ("tokyo", "weather")
    docs = [
        doc("Tokyo weather is sunny today.", title="Tokyo", start=0, bm25=8.0, fused=8.0),
        doc("Cherries are grown in Yamagata. The weather there is cold.", title="Yamagata", start=500,
            bm25=2.0, fused=2.0),
        doc("Nothing related at all.", start=None),
    ]
    x = candidate_features(q, docs)
    assert x.shape == (3, len(FEATURE_NAMES)) and x.dtype == np.float64
    a, b, c = x
    # channel scores and flags: vector missing everywhere; the third has no scores at all
    assert (a[COL["bm25"]], a[COL["has_bm25"]], a[COL["vector"]], a[COL["has_vector"]]) == (8.0, 1.0, 0.0, 0.0)
    assert c[COL["has_bm25"]] == c[COL["has_fused"]] == 0.0
    # rank and the normalised first-stage score (fused over the list's best)
    assert [row[COL["rank"]] for row in x] == [1, 2, 3] and b[COL["inv_rank"]] == 0.5
    assert a[COL["score_norm"]] == 1.0 and b[COL["score_norm"]] == 0.25 and b[COL["score_gap"]] == 0.75
    # term shares: both terms in the first, only "weather" in the second, none in the third
    assert (a[COL["term_share"]], b[COL["term_share"]], c[COL["term_share"]]) == (1.0, 0.5, 0.0)
    assert a[COL["idf_share"]] == 1.0 and 0.0 < b[COL["idf_share"]] < 1.0
    # "tokyo" is in one candidate, "weather" in two: tokyo weighs more, so b's share is below a half
    assert b[COL["idf_share"]] < 0.5
    # title: "Tokyo" names the question's entity, "Yamagata" does not
    assert a[COL["title_in_question"]] == 1.0 and b[COL["title_in_question"]] == 0.0
    assert a[COL["title_share"]] > 0.5 and b[COL["title_share"]] == 0.0
    # the two terms stand side by side in a ("tokyo weather": 12 of 13 characters are the terms)
    assert a[COL["window_density"]] == pytest.approx(12 / 13) and b[COL["window_density"]] == 1.0
    assert a[COL["window_log"]] == pytest.approx(math.log1p(13))
    assert c[COL["window_density"]] == 0.0 and c[COL["window_log"]] == 0.0
    # position: a starts its document, b does not, c does not say
    assert (a[COL["is_first"]], b[COL["is_first"]], c[COL["is_first"]]) == (1.0, 0.0, 0.0)
    assert b[COL["start_log"]] == pytest.approx(math.log1p(500))
    assert a[COL["length_log"]] == pytest.approx(math.log1p(len("Tokyo weather is sunny today.")))


def test_japanese_features_by_hand():
    q = "日本で梅雨がないのは北海道とどこか。"
    terms = query_terms(q)
    assert {"梅雨", "北海道", "日本"} <= set(terms.terms) and not any("どこ" in t for t in terms.terms)
    assert "か" not in terms.chars and "梅" in terms.chars  # kana out of the character set, ideographs in
    docs = [doc("梅雨は、北海道と小笠原諸島を除く日本の雨季である。", title="梅雨", bm25=5.0),
            doc("北海道の気候は冷涼である。", title="北海道", bm25=6.0)]
    a, b = candidate_features(q, docs)
    assert a[COL["term_share"]] > b[COL["term_share"]]
    assert a[COL["bigram_share"]] > b[COL["bigram_share"]] and a[COL["char_share"]] > b[COL["char_share"]]
    assert a[COL["lcs_chars"]] == 4 and a[COL["lcs_share"]] == pytest.approx(4 / len(terms.core))  # 北海道と
    assert a[COL["title_in_question"]] == b[COL["title_in_question"]] == 1.0  # both titles are named
    assert b[COL["score_norm"]] == 1.0 and a[COL["score_norm"]] == pytest.approx(5 / 6)


def test_chinese_traditional_matches_simplified_and_question_words_are_cut():
    q = "長江流經哪些省份？"  # Traditional; the candidate is Simplified
    terms = query_terms(q)
    assert "哪" not in terms.core and "长江" in terms.terms
    a, b = candidate_features(q, [doc("长江流经青海、四川等省份。", title="长江"), doc("黄河是中国第二长河。")])
    assert a[COL["term_share"]] > 0.5 and a[COL["title_in_question"]] == 1.0 and b[COL["title_in_question"]] == 0.0
    assert a[COL["lcs_chars"]] == 4  # 长江流经 after folding
    assert a[COL["char_share"]] > b[COL["char_share"]]


def test_no_candidates_and_odd_scores():
    assert candidate_features("tokyo", []).shape == (0, len(FEATURE_NAMES))
    x = candidate_features("tokyo", [doc("tokyo", bm25=float("nan"), fused=True), doc("x", start=-3)])  # type: ignore[arg-type]
    assert x[0, COL["has_bm25"]] == 0.0 and x[0, COL["has_fused"]] == 0.0  # NaN and a bool are no score
    assert x[1, COL["start_log"]] == 0.0
    assert np.isfinite(x).all()


# ---------------------------------------------------------------------------------------------------- the model


def synthetic(n_groups: int = 200, size: int = 10, seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Groups whose relevant row is the one with the highest term_share (plus noise in every column)."""
    rng = np.random.default_rng(seed)
    x = rng.random((n_groups * size, len(FEATURE_NAMES)))
    y = np.zeros(n_groups * size)
    for g in range(n_groups):
        rows = slice(g * size, (g + 1) * size)
        y[g * size + int(np.argmax(x[rows, COL["term_share"]]))] = 1.0
    return x, y, [size] * n_groups


def tiny_model(seed: int = 0) -> LearnedModel:
    x, y, groups = synthetic(seed=seed)
    vx, vy, vg = synthetic(20, seed=seed + 1)
    return train_lambdarank(x, y, groups, valid=(vx, vy, vg), num_boost_round=30, params={"min_data_in_leaf": 5},
                            training={"note": "test"})


def test_training_learns_and_round_trips_bit_for_bit(tmp_path):
    model = tiny_model()
    x, y, groups = synthetic(20, seed=7)
    scores = model.score(x)
    hits = sum(y[g * 10 + int(np.argmax(scores[g * 10:(g + 1) * 10]))] for g in range(20))
    assert hits >= 15  # it learned which column matters
    path = model.save(tmp_path / "m.txt")
    loaded = LearnedModel.load(path)
    assert np.array_equal(loaded.score(x), scores)  # identical scores after save + load
    assert loaded.features == FEATURE_NAMES and loaded.training["note"] == "test" and loaded.path == path
    meta = json.loads(sidecar_path(path).read_text())
    assert meta["format"] == "ragspine-learned-reranker" and meta["features"] == list(FEATURE_NAMES)
    # deterministic: training again on the same data writes the same bytes
    again = tiny_model().save(tmp_path / "again.txt")
    assert again.read_bytes() == path.read_bytes()
    assert sidecar_path(again).read_bytes() == sidecar_path(path).read_bytes()
    assert model.score(np.zeros((0, len(FEATURE_NAMES)))).shape == (0,)


def test_training_checks_shapes():
    x, y, groups = synthetic(5)
    with pytest.raises(ValueError, match="do not agree"):
        train_lambdarank(x, y[:-1], groups)
    with pytest.raises(ValueError, match="do not agree"):
        train_lambdarank(x[:, :3], y, groups)


@pytest.fixture
def model_file(tmp_path) -> Path:
    return tiny_model().save(tmp_path / "model.txt")


def test_missing_and_foreign_files_are_errors_naming_the_path(tmp_path, model_file):
    missing = tmp_path / "nope.txt"
    with pytest.raises(ModelFileError, match=r"nope\.txt: learned reranker model file not found"):
        LearnedReranker(model=missing)
    foreign = tmp_path / "foreign.txt"
    foreign.write_text(model_file.read_text())  # a LightGBM model, but not ours: no sidecar
    with pytest.raises(ModelFileError, match=r"foreign\.txt: not a RAGSpine learned reranker \(its sidecar"):
        LearnedModel.load(foreign)
    sidecar_path(foreign).write_text('{"format": "something-else"}')
    with pytest.raises(ModelFileError, match="foreign.txt.json: not a RAGSpine learned reranker sidecar"):
        LearnedModel.load(foreign)
    sidecar_path(foreign).write_text("not json")
    with pytest.raises(ModelFileError, match="foreign.txt.json"):
        LearnedModel.load(foreign)


def test_truncated_changed_or_mismatched_model_files_are_refused(model_file):
    meta = json.loads(sidecar_path(model_file).read_text())
    data = model_file.read_bytes()
    model_file.write_bytes(data[: len(data) // 2])  # truncated
    with pytest.raises(ModelFileError, match=r"model\.txt: the model file does not match its sidecar's checksum"):
        LearnedModel.load(model_file)
    model_file.write_bytes(data)
    for change, pattern in ((lambda m: m.update(feature_version=99), "feature version 99"),
                            (lambda m: m.update(features=["bm25", "telepathy"]), "telepathy"),
                            (lambda m: m.update(features=["bm25"]), "reads 23 features, its sidecar names 1"),
                            (lambda m: m.update(version=7), "sidecar version 7")):
        bad = dict(meta)
        change(bad)
        sidecar_path(model_file).write_text(json.dumps(bad))
        with pytest.raises(ModelFileError, match=pattern):
            LearnedModel.load(model_file)
    # trial of issue 30: a missing or non-list 'features' read "trained on feature version 1; this package
    # computes version 1", and an unknown tokenizer was an error naming neither the sidecar nor the field
    for change, pattern in ((lambda m: m.pop("features"), r"model\.txt\.json: field 'features': None"),
                            (lambda m: m.update(features="bm25"), r"field 'features': 'bm25' is not the list"),
                            (lambda m: m.update(tokenizer="nonexistent"),
                             r"model\.txt\.json: field 'tokenizer': 'nonexistent' is not a tokenizer"),
                            # re-check of issue 30: these were tracebacks (TypeError)
                            (lambda m: m.update(tokenizer=["auto"]), r"field 'tokenizer': \['auto'\] is not a"),
                            (lambda m: m.update(training=[1]), r"field 'training': \[1\] is not an object")):
        bad = dict(meta)
        change(bad)
        sidecar_path(model_file).write_text(json.dumps(bad))
        with pytest.raises(ModelFileError, match=pattern):
            LearnedModel.load(model_file)
    with pytest.raises(ModelFileError, match="a directory, not a learned reranker model file"):
        LearnedModel.load(model_file.parent)
    # a file whose checksum matches but which LightGBM cannot read
    import hashlib

    model_file.write_bytes(b"tree\nnot a model\n")
    sidecar_path(model_file).write_text(json.dumps({**meta, "model_sha256": hashlib.sha256(
        b"tree\nnot a model\n").hexdigest()}))
    with pytest.raises(ModelFileError, match="LightGBM cannot read the model"):
        LearnedModel.load(model_file)


# ------------------------------------------------------------------------------------------------ the reranker


def test_reranker_orders_by_the_model_keeps_k_and_scores_in_0_1(model_file):
    rerank = LearnedReranker(model=model_file, k=2)
    docs = [doc("nothing here", cid="a#0", bm25=9.0), doc("tokyo weather report", cid="b#0", bm25=3.0),
            doc("tokyo", cid="c#0", bm25=4.0)]
    raw = rerank.scores(docs, "weather in tokyo")
    out = rerank.compress_documents(docs, "weather in tokyo")
    assert len(out) == 2
    expected = sorted(range(3), key=lambda i: (-raw[i], i))[:2]
    assert [d.metadata["chunk_id"] for d in out] == [docs[i].metadata["chunk_id"] for i in expected]
    for d, i in zip(out, expected, strict=True):
        assert d.metadata["scores"]["rerank"] == pytest.approx(1 / (1 + math.exp(-raw[i])))
        assert d.metadata["scores"]["bm25"] == docs[i].metadata["scores"]["bm25"]  # other channels kept
        assert d.page_content == docs[i].page_content
    assert LearnedReranker(model=model_file, k=None).compress_documents(docs, "q") and \
        len(LearnedReranker(model=model_file, k=None).compress_documents(docs, "q")) == 3
    assert rerank.compress_documents([], "q") == []


def test_restricted_candidates_are_never_scored(model_file, monkeypatch):
    seen: list[list[str]] = []
    real = reranker_module.candidate_features

    def spy(question, documents, **kw):
        seen.append([d.page_content for d in documents])
        return real(question, documents, **kw)

    monkeypatch.setattr(reranker_module, "candidate_features", spy)
    rerank = LearnedReranker(model=model_file, k=5)
    secret = doc("tokyo weather secret plan", cid="s#0", sensitivity="RESTRICTED", bm25=99.0)
    secret_lower = doc("tokyo weather secret two", cid="t#0", sensitivity="restricted", bm25=98.0)
    public = doc("tokyo weather", cid="p#0", bm25=1.0)
    out = rerank.compress_documents([secret, public, secret_lower], "weather in tokyo")
    assert [d.metadata["chunk_id"] for d in out] == ["p#0"]
    assert seen == [["tokyo weather"]]
    assert rerank.compress_documents([secret], "weather in tokyo") == [] and len(seen) == 1  # not even called


def test_unknown_keyword_and_bad_k(model_file):
    with pytest.raises(TypeError, match="kk"):
        LearnedReranker(model=model_file, kk=3)
    with pytest.raises(ValueError, match="k must be"):
        LearnedReranker(model=model_file, k=0)


def test_specs_and_factory(model_file):
    assert parse_reranker_spec("learned") == ("learned", "")
    assert parse_reranker_spec(f" Learned : {model_file}") == ("learned", str(model_file))
    assert normalise_reranker_spec("LEARNED") == "learned"
    with pytest.raises(ValueError, match="did you mean 'learned'"):
        parse_reranker_spec("learnd")
    built = make_reranker(f"learned:{model_file}", k=3)
    assert isinstance(built, LearnedReranker) and built.k == 3 and built.learned_model.path == model_file
    with pytest.raises(ModelFileError, match="missing.txt"):
        make_reranker("learned:/no/such/dir/missing.txt")


def test_the_bundled_model_loads_and_ships_with_its_sidecar():
    assert DEFAULT_MODEL.is_file() and sidecar_path(DEFAULT_MODEL).is_file()
    built = make_reranker("learned")
    assert isinstance(built, LearnedReranker) and set(built.learned_model.features) <= set(FEATURE_NAMES)
    assert "bm25" not in built.learned_model.features  # chosen without the raw channel scores (RESULTS.md)
    meta = json.loads(sidecar_path(DEFAULT_MODEL).read_text())
    assert "benchmarks/learned_reranker.py build" in meta["training"]["rebuild"]
    assert set(meta["training"]["datasets"]) == {"jaquad-train", "cmrc2018-trial"}


def test_second_stage_fetches_the_candidate_pool_for_it(model_file):
    from langchain_ragspine.retrievers import BM25Retriever

    docs = [Document(page_content=f"tokyo weather {i} " + "filler " * i, metadata={"chunk_id": f"d{i}#0",
                                                                                  "doc_id": f"d{i}"})
            for i in range(30)]
    rerank = LearnedReranker(model=model_file, k=3)
    assert selects_candidates([rerank])
    asked: list[int] = []

    class Spy(BM25Retriever):
        def _retrieve(self, query, call):  # type: ignore[no-untyped-def]
            asked.append(call.k)
            return super()._retrieve(query, call)

    two = SecondStageRetriever(base_retriever=Spy.from_documents(docs, tokenizer="whitespace"), compressors=[rerank],
                               k=3, fetch_k=25)
    out = two.invoke("tokyo weather")
    assert asked == [25] and len(out) == 3 and all(d.metadata["scores"]["rerank"] is not None for d in out)


def test_a_model_of_a_feature_subset_reads_its_own_columns(tmp_path):
    names = ("term_share", "rank", "char_share")
    x, y, groups = synthetic()
    cols = [COL[n] for n in names]
    model = train_lambdarank(x[:, cols], y, groups, feature_names=names, num_boost_round=20,
                             params={"min_data_in_leaf": 5})
    path = model.save(tmp_path / "subset.txt")
    rerank = LearnedReranker(model=path, k=None)
    assert rerank.learned_model.features == names and list(rerank.learned_model.columns()) == cols
    docs = [doc("tokyo", cid="a#0", bm25=1.0), doc("tokyo weather", cid="b#0", bm25=2.0)]
    full = candidate_features("weather in tokyo", docs)
    assert rerank.scores(docs, "weather in tokyo") == [float(s) for s in model.score(full[:, cols])]


def test_in_a_graphs_compressors_behind_the_gate():
    from langchain_ragspine.graphs import build_corrective_rag
    from langchain_ragspine.retrievers import BM25Retriever

    docs = [Document(page_content="Mount Fuji is 3776 m high, the highest mountain of Japan.",
                     metadata={"chunk_id": "fuji#0", "doc_id": "fuji", "title": "Mount Fuji", "start_index": 0}),
            Document(page_content="Mount Fuji secret survey: the highest mountain of Japan.",
                     metadata={"chunk_id": "s#0", "doc_id": "s", "sensitivity": "RESTRICTED", "start_index": 0}),
            Document(page_content="Mount Takao is a small mountain near Tokyo.",
                     metadata={"chunk_id": "takao#0", "doc_id": "takao", "title": "Mount Takao", "start_index": 0})]
    rerank = LearnedReranker(k=2)  # the bundled model
    final = build_corrective_rag(BM25Retriever.from_documents(docs, k=3), compressors=[rerank]).invoke(
        {"question": "How high is Mount Fuji, the highest mountain of Japan?"})
    compress = next(t for t in final["trace"] if t["step"] == "compress")
    assert compress["compressors"][0]["compressor"] == "LearnedReranker"
    assert "secret" not in json.dumps(final, default=str)
    assert "3776" in final["answer"]


def test_save_refuses_a_path_that_would_clash_and_keeps_the_old_pair_when_a_write_fails(tmp_path, monkeypatch):
    # trial of issue 30: --out keep.txt.json overwrote keep.txt's sidecar; a sidecar that could not be written
    # left a new model beside the old sidecar
    model = tiny_model()
    keep = model.save(tmp_path / "keep.txt")
    before = (keep.read_bytes(), sidecar_path(keep).read_bytes())
    with pytest.raises(ValueError, match=r"keep\.txt\.json: a model file named \*\.json would read as"):
        model.save(tmp_path / "keep.txt.json")
    with pytest.raises(ValueError, match="a directory; name the model file"):
        model.save(tmp_path)
    with pytest.raises(ValueError, match="the model path is empty"):
        model.save("")
    (tmp_path / "x.txt.json").mkdir()
    with pytest.raises(ValueError, match=r"x\.txt\.json: a directory where the model's sidecar goes"):
        model.save(tmp_path / "x.txt")
    other = tiny_model(seed=1)

    def disk_full(self, *args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", disk_full)
    with pytest.raises(OSError, match="No space left"):
        other.save(keep)
    monkeypatch.undo()
    assert (keep.read_bytes(), sidecar_path(keep).read_bytes()) == before  # the previous pair, untouched
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt", "keep.txt.json", "x.txt.json"]  # no temp file
    assert LearnedModel.load(keep).model_text() == model.model_text()
