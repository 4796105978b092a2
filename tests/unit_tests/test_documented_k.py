"""The documented default of ``k`` is the one used (issue 25, docs): ``open_retriever``'s and ``search``'s docstrings
said ``RAGSPINE_K``, else 10, while both return :data:`~langchain_ragspine.settings.DEFAULT_K` (6) results, as the
README says."""

from __future__ import annotations

import re
from pathlib import Path

from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.sources import open_retriever, search
from langchain_ragspine.settings import DEFAULT_K


def _documented_k(doc: str | None) -> int:
    found = re.findall(r"``RAGSPINE_K``,? else (\d+)", " ".join((doc or "").split()))
    assert len(found) == 1, doc
    return int(found[0])


def test_the_default_k_the_docstrings_give_is_the_number_of_results(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for i in range(DEFAULT_K + 6):
        (corpus / f"d{i}.md").write_text(f"# Doc {i}\n\nThe rainy season note number {i}.\n", "utf-8")
    ingest(corpus, tmp_path / "store", mode="bm25", progress=False)
    retriever = open_retriever(tmp_path / "store")  # RAGSPINE_K is unset (tests/conftest.py)
    assert len(retriever.invoke("rainy season")) == _documented_k(open_retriever.__doc__) == DEFAULT_K
    assert len(search(retriever, "rainy season")) == _documented_k(search.__doc__) == DEFAULT_K
