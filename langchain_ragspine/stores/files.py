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
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeAlias

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


#: What a save of one kind writes into its directory: each key is a regular expression that must match an entry's
#: whole name; its value is the layout of that entry when it is a directory whose contents are checked too, or
#: ``None`` (a file, or a directory written whole by a library, e.g. bm25s arrays).
SaveLayout: TypeAlias = Mapping[str, "SaveLayout | None"]

#: The ``"format"`` of every index directory this package saves starts with this (``ragspine-bm25/1``, ...).
FORMAT_PREFIX = "ragspine-"


def layout(*names: str, **subdirs: SaveLayout | None) -> dict[str, SaveLayout | None]:
    """A :data:`SaveLayout` of plain entry ``names`` (matched literally) plus ``subdirs`` (already regexes)."""
    out: dict[str, SaveLayout | None] = {re.escape(n): None for n in names}
    out.update(subdirs)
    return out


_MISSING: Any = object()


def _foreign_entries(directory: Path, writes: SaveLayout, prefix: str = "") -> list[str]:
    """Entries under ``directory`` that a save with layout ``writes`` does not write (relative names, sorted)."""
    foreign: list[str] = []
    for entry in sorted(directory.iterdir()):
        sub = next((v for pat, v in writes.items() if re.fullmatch(pat, entry.name)), _MISSING)
        if sub is _MISSING:
            foreign.append(prefix + entry.name)
        elif sub is not None:
            if entry.is_dir() and not entry.is_symlink():
                foreign += _foreign_entries(entry, sub, f"{prefix}{entry.name}/")  # type: ignore[arg-type]
            else:
                foreign.append(prefix + entry.name)
    return foreign


def _is_our_config(path: Path) -> bool:
    """Whether ``path`` is a settings file this package wrote: a JSON object whose ``"format"`` starts with
    :data:`FORMAT_PREFIX`."""
    try:
        config = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    fmt = config.get("format") if isinstance(config, dict) else None
    return isinstance(fmt, str) and fmt.startswith(FORMAT_PREFIX)


def check_replaceable(target: Path, marker: str, writes: SaveLayout) -> None:
    """Refuse to replace ``target`` unless it is absent, an empty directory, or a previous save: a directory whose
    ``marker`` (the settings file every save of this kind writes) is one this package wrote (a JSON object with a
    ``"format"`` starting ``ragspine-``) and which holds nothing a save with layout ``writes`` does not write.
    So a save never deletes what it did not write — a user's own ``retriever.json`` or a note added beside a
    saved index is kept.

    Raises:
        FileExistsError: ``target`` is a file (or anything but a directory), a non-empty directory without our
            ``marker``, or a saved index holding other entries (up to five are named); nothing is touched.
    """
    if not target.exists() and not target.is_symlink():
        return
    if target.is_symlink() or not target.is_dir():
        raise FileExistsError(f"refusing to save to {target}: it exists and is not a directory; choose a new path")
    if not any(target.iterdir()):
        return
    if not (target / marker).is_file() or (target / marker).is_symlink() or not _is_our_config(target / marker):
        raise FileExistsError(
            f"refusing to save to {target}: the directory is not empty and holds no saved index ({marker} is "
            "missing or was not written by ragspine), so replacing it would delete its files; choose a new or "
            "empty directory"
        )
    foreign = _foreign_entries(target, writes)
    if foreign:
        shown = ", ".join(foreign[:5]) + (f" and {len(foreign) - 5} more" if len(foreign) > 5 else "")
        raise FileExistsError(
            f"refusing to save to {target}: besides a saved index it holds {shown}, which a save does not write "
            "and replacing the directory would delete; move them out or choose a new directory"
        )


def discard_unsaved(target: Path, marker: str, writes: SaveLayout) -> None:
    """Remove ``target`` when a save could not replace it (:func:`check_replaceable` refuses): for an index
    directory inside a store the package owns, where anything else at that path is a damaged index to rebuild."""
    try:
        check_replaceable(target, marker, writes)
    except FileExistsError:
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        else:
            target.unlink()


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike[str], *, marker: str, writes: SaveLayout) -> Iterator[Path]:
    """Yield a fresh temporary directory beside ``path``; on success it replaces ``path`` (:func:`replace_dir`), on
    any exception it is removed and ``path`` is left as it was.  Its mode follows the umask (``mkdtemp`` makes 0700).

    ``marker`` is the settings file every save of this kind writes into the directory and ``writes`` the layout of
    everything it may write (:data:`SaveLayout`): an existing ``path`` is replaced only when it is an empty
    directory or a previous save holding nothing else (:func:`check_replaceable`), checked before anything is
    written and again just before the swap.

    Raises:
        FileExistsError: ``path`` is a file, or a non-empty directory that is not a previous save, or a previous
            save with other entries in it.
    """
    target = Path(path)
    check_replaceable(target, marker, writes)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    umask = os.umask(0)
    os.umask(umask)
    tmp.chmod(0o777 & ~umask)
    try:
        yield tmp
        check_replaceable(target, marker, writes)  # it may have changed while the index was written
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
