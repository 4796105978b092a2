"""On-disk helpers shared by every persisted index: atomic directory replacement and documents as JSON lines.

An index directory is written into a fresh temporary sibling and swapped in with two renames (:func:`atomic_dir`),
so a reader sees the old directory or the new one, and a crash leaves at worst a hidden ``.NAME.tmp-*`` /
``.NAME.old-*`` sibling that the next ingest removes.  Documents are stored as one JSON object per line
(``{"id", "page_content", "metadata"}``) — no pickle anywhere.

A save may also write a checksum manifest (:func:`write_manifest`, ``manifest.json``: the size and SHA-256 of every
file and the chunk-store generation the index was built from), last, inside the same temporary directory, so the
files and their manifest appear together; :func:`read_manifest` and :meth:`Manifest.check` verify them on load.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import io
import json
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

import numpy as np
from langchain_core.documents import Document

from langchain_ragspine.backends.directory.regular_files import check_regular, open_regular
from langchain_ragspine.errors import StoreError, write_errors

__all__ = [
    "FORMAT_PREFIX",
    "MANIFEST_FILE",
    "MANIFEST_FORMAT",
    "RETRIEVER_CONFIG",
    "atomic_dir",
    "check_replaceable",
    "discard_unsaved",
    "file_sha256",
    "json_default",
    "layout",
    "Manifest",
    "read_config",
    "read_documents",
    "read_manifest",
    "replace_dir",
    "SaveLayout",
    "write_documents",
    "write_manifest",
]


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
        config = json.loads(_read_text(path))
    except (OSError, StoreError, UnicodeDecodeError, json.JSONDecodeError):
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

    A write that fails (disk full, a quota, an I/O error: :func:`~langchain_ragspine.errors.write_errors`) is a
    :class:`~langchain_ragspine.errors.StoreWriteError` naming the file under ``path`` it was writing and saying
    that the previous save is intact.

    Raises:
        FileExistsError: ``path`` is a file, or a non-empty directory that is not a previous save, or a previous
            save with other entries in it.
        StoreWriteError: a write failed; nothing is left of this save, and ``path`` is as it was.
    """
    target = Path(path)
    check_replaceable(target, marker, writes)
    kept = f"the previous save in {target} is intact" if target.exists() else f"nothing was saved at {target}"

    tmp: Path | None = None

    def in_target(name: str) -> Path | None:
        """The file a failing write names, as it is called once the save is in place."""
        with contextlib.suppress(ValueError, TypeError):
            return target / Path(name).relative_to(tmp)  # type: ignore[arg-type]
        return None

    with write_errors(target, kept=kept, rename=in_target):
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


def _read_text(path: Path) -> str:
    """The UTF-8 text of the regular file at ``path`` (:func:`open_regular`: a FIFO, a folder or a device is a
    :class:`StoreError`)."""
    with open_regular(path) as f:
        return f.read().decode("utf-8")


def read_config(root: Path, filename: str, *, fmt: str, what: str) -> dict[str, Any]:
    """The JSON object ``root/filename`` of a saved index, checked to carry ``"format": fmt``.

    Raises:
        StoreError: the file is missing (``"no {what} here"``), not a regular file (a FIFO, a folder, a device:
            never read), unreadable, not UTF-8 JSON (its line is named), not an object, or of another format.
    """
    path = root / filename
    try:
        config = json.loads(_read_text(path))
    except FileNotFoundError:
        raise StoreError(f"no {what} here ({filename} missing)", path=root) from None
    except OSError as e:
        raise StoreError(f"unreadable {filename}: {e.strerror or e}", path=path) from None
    except json.JSONDecodeError as e:
        raise StoreError(f"corrupt {filename}: {e.msg}", path=path, line=e.lineno) from None
    except UnicodeDecodeError as e:
        raise StoreError(f"corrupt {filename}: {e}", path=path) from None
    found = config.get("format") if isinstance(config, dict) else None
    if found != fmt:
        raise StoreError(f"unknown index format {found!r}, expected {fmt!r}", path=path)
    return config


def file_sha256(path: str | os.PathLike[str]) -> str:
    """The SHA-256 of the file at ``path``, as 64 hex digits (read in blocks: any size, little memory).

    Raises:
        FileNotFoundError / OSError: the file is missing or cannot be read.
        StoreError: it is not a regular file (a FIFO, a folder, a device: never read).
    """
    with open_regular(path) as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


#: The checksum manifest a save writes into its directory (:func:`write_manifest`).
MANIFEST_FILE = "manifest.json"
MANIFEST_FORMAT = "ragspine-manifest/1"


def _manifest_digest(body: Mapping[str, Any]) -> str:
    """SHA-256 of the manifest's own content (every key but ``"sha256"``), as canonical JSON."""
    canonical = json.dumps({k: v for k, v in body.items() if k != "sha256"}, sort_keys=True, ensure_ascii=False,
                           separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _saved_files(directory: Path) -> list[str]:
    """Every file under ``directory`` but the manifest, as sorted POSIX paths relative to it."""
    return sorted(
        p.relative_to(directory).as_posix()
        for p in directory.rglob("*")
        if p.is_file() and p != directory / MANIFEST_FILE
    )


def write_manifest(directory: str | os.PathLike[str], *, generation: int | None = None) -> None:
    """Write ``directory/manifest.json``: the size in bytes and SHA-256 of every file under ``directory``
    (recursively), the chunk-store ``generation`` the files were built from (``None``: not built from a store), and
    the SHA-256 of the manifest's own content.  Call it last, inside :func:`atomic_dir`, so the manifest appears
    with the files it describes.

    Raises:
        OSError: a file cannot be read, or the manifest cannot be written.
    """
    root = Path(directory)
    files = {
        name: {"bytes": (root / name).stat().st_size, "sha256": file_sha256(root / name)}
        for name in _saved_files(root)
    }
    body: dict[str, Any] = {"format": MANIFEST_FORMAT, "generation": generation, "files": files}
    body["sha256"] = _manifest_digest(body)
    (root / MANIFEST_FILE).write_text(json.dumps(body, ensure_ascii=False, indent=1), "utf-8")


@dataclass(frozen=True)
class Manifest:
    """A checksum manifest read by :func:`read_manifest`.

    Attributes:
        root: the saved directory.
        generation: the chunk-store generation the files were built from (``None``: not built from a store).
        files: relative POSIX path → ``(bytes, sha256)`` of every file the save wrote.
    """

    root: Path
    generation: int | None
    files: Mapping[str, tuple[int, str]]

    def check(self, *, required: Iterable[str] = (), generation: int | None = None) -> None:
        """Verify the saved files before anything reads them: each of ``required`` (relative paths) is listed,
        when ``generation`` is given the files were built from that chunk-store generation, and every listed file
        exists with its recorded size and SHA-256.  Sizes are compared first (a truncated, extended or missing
        file is found without reading anything), then every file is hashed in blocks (about 1 GB/s on one core
        with SHA extensions: benchmarks/RESULTS.md, bm25-load-check).

        Raises:
            StoreError: naming the first file that does not match, and why (not covered by the manifest, another
                generation, missing, another size, another SHA-256).
        """
        manifest = self.root / MANIFEST_FILE
        for name in required:
            if name not in self.files:
                raise StoreError(f"not covered by {MANIFEST_FILE} (no checksum recorded)", path=self.root / name)
        if generation is not None and self.generation != generation:
            raise StoreError(
                f"built from chunk-store generation {self.generation}, but the store is at generation {generation}",
                path=manifest,
            )
        for name, (size, _) in self.files.items():
            path = self.root / name
            try:
                found = path.stat().st_size if check_regular(path) else None  # a FIFO, a folder: StoreError
            except OSError:
                found = None
            if found is None:
                raise StoreError(f"missing (listed in {MANIFEST_FILE})", path=path)
            if found != size:
                raise StoreError(f"{found} bytes, but {MANIFEST_FILE} records {size} (truncated or rewritten)", path=path)
        for name, (_, sha) in self.files.items():
            path = self.root / name
            try:
                found_sha = file_sha256(path)
            except OSError as e:
                raise StoreError(f"unreadable: {e.strerror or e}", path=path) from None
            if found_sha != sha:
                raise StoreError(f"does not match the SHA-256 recorded in {MANIFEST_FILE} (changed after the save)",
                                 path=path)


def read_manifest(directory: str | os.PathLike[str]) -> Manifest | None:
    """The checksum manifest of a saved directory, or ``None`` when it has none (saved before manifests existed,
    or the manifest was deleted: nothing vouches for the files).

    Raises:
        StoreError: the manifest is not a regular file (a FIFO, a folder, a device: never read), unreadable,
            malformed, or does not match its own SHA-256 (edited or damaged).
    """
    root = Path(directory)
    path = root / MANIFEST_FILE
    try:
        body = json.loads(_read_text(path))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise StoreError(f"corrupt {MANIFEST_FILE}: {e}", path=path) from None
    if not isinstance(body, dict) or body.get("format") != MANIFEST_FORMAT:
        raise StoreError(f"not a checksum manifest (format {MANIFEST_FORMAT!r} expected)", path=path)
    if body.get("sha256") != _manifest_digest(body):
        raise StoreError(f"{MANIFEST_FILE} does not match its own SHA-256 (edited or damaged)", path=path)
    generation, files = body.get("generation"), body.get("files")
    entries: dict[str, tuple[int, str]] = {}
    ok = (generation is None or type(generation) is int) and isinstance(files, dict)
    for name, entry in files.items() if isinstance(files, dict) else ():
        size = entry.get("bytes") if isinstance(entry, dict) else None
        sha = entry.get("sha256") if isinstance(entry, dict) else None
        # a listed path stays inside the directory: relative, no "..", no empty part
        parts = name.split("/") if isinstance(name, str) else [""]
        if type(size) is not int or not isinstance(sha, str) or any(p in ("", ".", "..") for p in parts):
            ok = False
            break
        entries[name] = (size, sha)
    if not ok:
        raise StoreError(f"malformed {MANIFEST_FILE}: expected a generation and files {{path: {{bytes, sha256}}}}",
                         path=path)
    return Manifest(root=root, generation=generation, files=entries)


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
        StoreError: the file is missing, not a regular file (a FIFO, a folder, a device: never read), not UTF-8,
            has a malformed row (its line is named), or holds a different number of documents than ``expected``.
    """
    docs: list[Document] = []
    try:
        with io.TextIOWrapper(open_regular(path), encoding="utf-8") as f:
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
