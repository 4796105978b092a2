"""The README's Python blocks run as written, in order, in one namespace: every block says whether the test runs
it (`<!-- readme-test: run -->`) or why not (`<!-- readme-test: skip: reason -->`), and the run blocks execute in a
temporary directory (so nothing they write lands in the clone), with no RAGSPINE_* settings and no server."""

import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_BLOCK = re.compile(r"(?:<!-- readme-test: (run|skip[^>]*) -->\n)?```python\n(.*?)```", re.S)


def _blocks() -> list[tuple[str | None, str]]:
    return [(m.group(1), m.group(2)) for m in _BLOCK.finditer((REPO / "README.md").read_text("utf-8"))]


def test_every_readme_python_block_says_whether_it_runs():
    blocks = _blocks()
    assert len(blocks) >= 6
    unmarked = [code.splitlines()[0] for mark, code in blocks if mark is None]
    assert not unmarked, f"README python blocks without a readme-test marker: {unmarked}"
    for _, code in blocks:
        assert code.lstrip().startswith("# Needs:"), f"a README block does not say what it needs: {code[:60]!r}"


def test_readme_python_blocks_run(monkeypatch, capsys, tmp_path):
    for name in list(os.environ):
        if name.startswith("RAGSPINE_"):
            monkeypatch.delenv(name)
    (tmp_path / "docs").symlink_to(REPO / "docs", target_is_directory=True)  # the blocks read docs/demo
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__readme__"}
    ran = 0
    for i, (mark, code) in enumerate(_blocks()):
        if mark != "run":
            continue
        exec(compile(code, f"README.md python block {i + 1}", "exec"), namespace)
        ran += 1
    assert ran >= 6
    out = capsys.readouterr().out
    assert "ja/tokenizers.md#" in out  # the ten-line example cites its source
    assert "長い段落は文末で切ります [1]。" in out  # the LCEL chain ran through the chat model
    assert "INTERNAL-ONLY-7f3a" not in out  # the demo corpus' RESTRICTED runbook never comes out
    assert namespace["final"]["citations"], "the corrective graph answered with citations"
    kept = namespace["kept"]  # a filter matching nothing: refused, never widened (the default relax_filters=False)
    assert kept["refused"] is True and kept["filters_dropped"] is False and kept["documents"] == []
    assert "['note-1'] []" in out  # the vector-store retriever ANDed the call's filter with its own
    # what the blocks write stays in the git-ignored .ragspine/ (here under the temporary directory)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".ragspine", "docs"]
    assert namespace["store"].get_by_ids(["note-1"]) == []  # the vector-store block deleted what it added


def test_readme_stores_go_to_an_ignored_directory():
    text = (REPO / "README.md").read_text("utf-8")
    stores = re.findall(r"--store (\S+)", text)
    assert stores and all(s.startswith((".ragspine/", "DIR", "postgresql://")) for s in stores), stores  # a URL is no directory
    assert ".ragspine/" in (REPO / ".gitignore").read_text("utf-8").splitlines()


@pytest.mark.parametrize("extra", ["dev", "test", "embed"])
def test_install_lines_name_extras_that_exist(extra):
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text("utf-8"))["project"]["optional-dependencies"]
    assert extra in extras
    assert f"'.[{extra}]'" in (REPO / "README.md").read_text("utf-8")
