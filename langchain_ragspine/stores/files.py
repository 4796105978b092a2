"""On-disk helpers shared by every persisted index: atomic directory replacement and documents as JSON lines.

An index directory is written into a fresh temporary sibling and swapped in with two renames (:func:`atomic_dir`),
so a reader sees the old directory or the new one, and a crash leaves at worst a hidden ``.NAME.tmp-*`` /
``.NAME.old-*`` sibling that the next ingest removes.  Documents are stored as one JSON object per line
(``{"id", "page_content", "metadata"}``) — no pickle anywhere.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.documents import Document

from langchain_ragspine.errors import StoreError


def replace_dir(new: Path, target: Path) -> None:
    """Move directory ``new`` to ``target``, replacing what is there (the old copy is removed after the swap)."""
    old: Path | None = None
    if target.exists():
        old = target.with_name(f".{target.name}.old-{os.getpid()}")
        if old.exists():
            shutil.rmtree(old)
        os.replace(target, old)
    os.replace(new, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


#: The settings file of a saved BM25 or dense retriever (each saved index directory has one; hybrid: ``hybrid.json``).
RETRIEVER_CONFIG = "retriever.json"


def check_replaceable(target: Path, marker: str) -> None:
    """Refuse to replace ``target`` unless it is absent, an empty directory, or a directory holding ``marker`` (the
    file a previous save wrote there), so a save never deletes what it did not write.

    Raises:
        FileExistsError: ``target`` is a file (or anything but a directory), or a non-empty directory without
            ``marker``; the message names it.
    """
    if not target.exists() and not target.is_symlink():
        return
    if target.is_symlink() or not target.is_dir():
        raise FileExistsError(f"refusing to save to {target}: it exists and is not a directory; choose a new path")
    if (target / marker).is_file() or not any(target.iterdir()):
        return
    raise FileExistsError(
        f"refusing to save to {target}: the directory is not empty and holds no saved index ({marker} is missing), "
        "so replacing it would delete its files; choose a new or empty directory"
    )


def discard_unsaved(target: Path, marker: str) -> None:
    """Remove ``target`` when a save could not replace it (:func:`check_replaceable` refuses): for an index
    directory inside a store the package owns, where anything else at that path is a damaged index to rebuild."""
    try:
        check_replaceable(target, marker)
    except FileExistsError:
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        else:
            target.unlink()


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike[str], *, marker: str) -> Iterator[Path]:
    """Yield a fresh temporary directory beside ``path``; on success it replaces ``path`` (:func:`replace_dir`), on
    any exception it is removed and ``path`` is left as it was.  Its mode follows the umask (``mkdtemp`` makes 0700).

    ``marker`` is the file every save of this kind writes into the directory: an existing ``path`` is replaced only
    when it is an empty directory or holds ``marker`` (:func:`check_replaceable`), checked before anything is
    written and again just before the swap.

    Raises:
        FileExistsError: ``path`` is a file, or a non-empty directory that is not a previous save.
    """
    target = Path(path)
    check_replaceable(target, marker)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    umask = os.umask(0)
    os.umask(umask)
    tmp.chmod(0o777 & ~umask)
    try:
        yield tmp
        check_replaceable(target, marker)  # it may have changed while the index was written
        replace_dir(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def read_config(root: Path, filename: str, *, fmt: str, what: str) -> dict[str, Any]:
    """The JSON object ``root/filename`` of a saved index, checked to carry ``"format": fmt``.

    Raises:
        StoreError: the file is missing (``"no {what} here"``), not UTF-8 JSON (its line is named), not an
            object, or of another format.
    """
    path = root / filename
    try:
        config = json.loads(path.read_text("utf-8"))
    except FileNotFoundError:
        raise StoreError(f"no {what} here ({filename} missing)", path=root) from None
    except json.JSONDecodeError as e:
        raise StoreError(f"corrupt {filename}: {e.msg}", path=path, line=e.lineno) from None
    except UnicodeDecodeError as e:
        raise StoreError(f"corrupt {filename}: {e}", path=path) from None
    found = config.get("format") if isinstance(config, dict) else None
    if found != fmt:
        raise StoreError(f"unknown index format {found!r}, expected {fmt!r}", path=path)
    return config


def json_default(value: Any) -> Any:
    """``json.dumps`` fallback for metadata: dates as ISO-8601, sets/tuples as lists, numpy scalars as numbers.

    Raises:
        TypeError: any other type (named in the message).
    """
    if isinstance(value, (_dt.date, _dt.datetime)):
        return value.isoformat()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"metadata value {value!r} of type {type(value).__name__} is not JSON-serialisable")


def write_documents(path: Path, docs: Iterable[Document]) -> None:
    """Write ``docs`` to ``path`` as JSON lines.

    Raises:
        ValueError: a metadata value is not JSON-serialisable (the chunk id is named).
    """
    with open(path, "w", encoding="utf-8") as f:
        for d in docs:
            try:
                line = json.dumps(
                    {"id": d.id, "page_content": d.page_content, "metadata": d.metadata},
                    ensure_ascii=False,
                    default=json_default,
                )
            except (TypeError, ValueError) as e:
                key = d.metadata.get("chunk_id") or d.id
                raise ValueError(f"cannot save document {key!r}: {e}") from e
            f.write(line + "\n")


def read_documents(path: Path, *, expected: int | None = None) -> list[Document]:
    """Read documents written by :func:`write_documents`.

    Raises:
        StoreError: the file is missing, not UTF-8, has a malformed row (its line is named), or holds a different
            number of documents than ``expected``.
    """
    docs: list[Document] = []
    try:
        with open(path, encoding="utf-8") as f:
            for lineno, line in enumerate(f, 1):
                try:
                    row = json.loads(line)
                    docs.append(Document(page_content=row["page_content"], metadata=row["metadata"], id=row["id"]))
                except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
                    raise StoreError(f"corrupt document row: {e}", path=path, line=lineno) from None
    except FileNotFoundError:
        raise StoreError("documents file missing", path=path) from None
    except UnicodeDecodeError as e:
        raise StoreError(f"documents file is not UTF-8: {e}", path=path) from None
    if expected is not None and len(docs) != expected:
        raise StoreError(f"expected {expected} documents, found {len(docs)}", path=path)
    return docs
