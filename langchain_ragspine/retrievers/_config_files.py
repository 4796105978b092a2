"""Reading the small user-written files the query transformations take (glossaries, deny-lists): JSON or YAML by
suffix, errors naming the file (and the line, where the parser knows it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from langchain_ragspine.errors import RagSpineError

#: Suffixes read as YAML; ``.json`` is read as JSON.
YAML_SUFFIXES = (".yaml", ".yml")


def read_text_file(path: str | Path, what: str) -> str:
    """The UTF-8 text of ``path``.

    Raises:
        RagSpineError: the file cannot be read or is not UTF-8 (the message names ``what`` and the file).
    """
    p = Path(path)
    try:
        return p.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise RagSpineError(f"cannot read the {what}: {e}", path=p) from e


def read_structured_file(path: str | Path, what: str) -> Any:
    """The data in a ``.json``, ``.yaml`` or ``.yml`` file.

    Raises:
        RagSpineError: the file cannot be read, has another suffix, or does not parse (the message names ``what``,
            the file and, for a parse error, the line).
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix != ".json" and suffix not in YAML_SUFFIXES:
        raise RagSpineError(f"a {what} is a .json, .yaml or .yml file, got {p.suffix or 'no suffix'!r}", path=p)
    text = read_text_file(p, what)
    try:
        if suffix == ".json":
            return json.loads(text)
        return yaml.safe_load(text)
    except json.JSONDecodeError as e:
        raise RagSpineError(f"malformed JSON in the {what}: {e.msg}", path=p, line=e.lineno) from e
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise RagSpineError(f"malformed YAML in the {what}: {getattr(e, 'problem', None) or e}", path=p,
                            line=line) from e
