"""The package version, read from the installed distribution's metadata, so it is written once: in pyproject.toml.

A source checkout that is not installed (``PYTHONPATH=. python …``) has no metadata; the version then comes from
the ``pyproject.toml`` beside the package, and is ``"0+unknown"`` when that cannot be read either.
"""

from __future__ import annotations

import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

#: The distribution name on PyPI.
DISTRIBUTION = "langchain-ragspine"
_PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def read_version(pyproject: Path = _PYPROJECT) -> str:
    """``importlib.metadata.version("langchain-ragspine")``, else the ``[project] version`` of ``pyproject`` when
    it names this distribution, else ``"0+unknown"``."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        pass
    try:
        project = tomllib.loads(pyproject.read_text("utf-8"))["project"]
        if project["name"] == DISTRIBUTION:
            return str(project["version"])
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, KeyError, TypeError):
        pass
    return "0+unknown"


__version__ = read_version()
