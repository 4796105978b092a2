"""A store directory's derived JSON files (``graph.json``, ``raptor.json``): one object, checksummed, written
atomically, read back only when its format and checksum match.

::

    write_checked_json(root / "graph.json", {"format": "ragspine-graph-file/1", "generation": 12, ...})
    body, why = read_checked_json(root / "graph.json", "ragspine-graph-file/1")   # (None, why) when damaged

The text is compact with sorted keys, so the same content gives the same bytes; ``sha256`` (of the rest, in that
form) is added on write and checked on read, so a damaged or hand-edited file is read as absent — never used.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from langchain_ragspine.backends.directory.regular_files import check_regular
from langchain_ragspine.errors import write_errors

__all__ = ["read_checked_json", "remove_derived_file", "write_checked_json"]


def _text(body: Mapping[str, Any]) -> str:
    return json.dumps(body, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def _digest(body: Mapping[str, Any]) -> str:
    return hashlib.sha256(_text(body).encode("utf-8")).hexdigest()


def write_checked_json(target: Path, body: Mapping[str, Any]) -> None:
    """Write ``body`` and its ``sha256`` to ``target`` atomically (a temporary name, then a rename: a reader sees
    the old file or the new one).

    Raises:
        StoreWriteError: the file could not be written (disk full, …); the previous file is intact and no
            temporary file is left.
    """
    out = dict(body)
    out["sha256"] = _digest(out)
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    with write_errors(target, kept=f"the previous {target.name} is intact"):
        try:
            tmp.write_text(_text(out), "utf-8")
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise


def read_checked_json(path: Path, file_format: str) -> tuple[dict[str, Any] | None, str | None]:
    """``(body without its sha256, None)``; ``(None, None)`` when there is no file; ``(None, why)`` when it is not
    JSON, not ``file_format``, its checksum does not match, or its ``generation`` is not an integer or null.

    Raises:
        StoreError: the path is there but not a regular file (a FIFO, a folder).
    """
    if not check_regular(path):
        return None, None
    try:
        body = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        return None, f"{path}: unreadable ({type(e).__name__}: {e})"
    if not isinstance(body, dict) or body.get("format") != file_format:
        return None, f"{path}: not a {file_format} file"
    digest = body.pop("sha256", None)
    if digest != _digest(body):
        return None, f"{path}: its checksum does not match (damaged or edited)"
    generation = body.get("generation")
    if generation is not None and (isinstance(generation, bool) or not isinstance(generation, int)):
        return None, f"{path}: field 'generation' is not an integer"
    return body, None


def remove_derived_file(path: Path) -> bool:
    """Remove the derived file ``path``; whether there was one.

    Raises:
        StoreError: it is not a regular file.
    """
    if not check_regular(path):
        return False
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    return True
