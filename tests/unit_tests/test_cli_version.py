"""`ragspine --version` prints the distribution's version and exits 0."""

import pytest

from langchain_ragspine import __version__
from langchain_ragspine.cli import main


def test_version_flag(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"ragspine {__version__}"
    assert __version__ != "0+unknown"
