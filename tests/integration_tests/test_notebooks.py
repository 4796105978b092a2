"""Execute the notebooks so they cannot rot (nbclient); skipped, saying why, without ../shared/data."""

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("RAGSPINE_DATA", REPO.parent / "shared" / "data"))


@pytest.mark.skipif(
    not (DATA / "jsquad-valid" / "questions.jsonl").exists(),
    reason=f"notebooks/evaluation.ipynb evaluates ../shared/data, not found at {DATA}",
)
def test_evaluation_notebook_runs(tmp_path: Path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    monkeypatch.setenv("RAGSPINE_DATA", str(DATA))
    monkeypatch.setenv("RAGSPINE_NOTEBOOK_LIMIT", "200")
    monkeypatch.setenv("RAGSPINE_NOTEBOOK_OUT", str(tmp_path))
    nb = nbformat.read(REPO / "notebooks" / "evaluation.ipynb", as_version=4)
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(REPO / "notebooks")}}).execute()
    assert (tmp_path / "recall_at_k.png").stat().st_size > 5000
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs)  # the plot is shown inline
