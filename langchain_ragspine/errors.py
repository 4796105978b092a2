"""Errors raised by langchain-ragspine for problems in the user's data.

Bad *arguments* raise the standard ``ValueError`` / ``TypeError`` with the offending value.  Bad *data* (a file that
is not UTF-8, a malformed sidecar, a JSONL line without ``text``) raises :class:`RagSpineError`, whose message names
the file, the line and the field, so a user can open the file and fix it.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import sqlite3
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "as_os_error",
    "creation_errno",
    "json_type_name",
    "LoaderError",
    "os_error_of",
    "parse_json_object",
    "RagSpineError",
    "read_only_mount",
    "sqlite_cannot_open",
    "StaleIndexWarning",
    "StoreError",
    "StoreWriteError",
    "warn_stale",
    "write_errors",
]


class RagSpineError(Exception):
    """A problem in the user's data, located by file, line and field where known.

    Attributes:
        path: the offending file, or ``None``.
        line: 1-based line number inside ``path``, or ``None``.
        field: the offending field name (a metadata key, a JSON key), or ``None``.
        reason: the bare explanation, without the location prefix.

    ``str(err)`` reads ``"<path>:<line>: field '<field>': <reason>"``, leaving out the parts that are unknown.
    """

    def __init__(
        self,
        reason: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.reason = reason
        self.path = str(path) if path is not None else None
        self.line = line
        self.field = field
        super().__init__(self._format())

    def _format(self) -> str:
        where = ""
        if self.path is not None:
            where = self.path if self.line is None else f"{self.path}:{self.line}"
            where += ": "
        what = f"field {self.field!r}: " if self.field else ""
        return f"{where}{what}{self.reason}"


class LoaderError(RagSpineError):
    """A corpus file could not be loaded (encoding, binary content, malformed JSON, missing ``text``)."""


class StoreError(RagSpineError):
    """The chunk store or a persisted index is missing, corrupt, or from an incompatible version."""


class StoreWriteError(StoreError, OSError):
    """A file of a store could not be written — the disk is full or has no free inode (``ENOSPC``, or SQLite's
    ``SQLITE_FULL``), a quota is exhausted (``EDQUOT``), an I/O error (``EIO``), no file descriptor is left
    (``EMFILE``), or the file system or folder refused the write (``EROFS``, ``EACCES``: SQLite's ``unable to open
    database file`` and ``attempt to write a readonly database`` too, :func:`creation_errno`) — and nothing was lost:
    the write went to a temporary name (or into a SQLite transaction) and was abandoned, so what the file held
    before is intact; the message says what is kept.  Raised by :func:`write_errors`.  It is also an ``OSError``
    (with :attr:`errno`), so code that catches the file system's errors catches it.

    Attributes:
        errno: the ``errno`` code (``errno.ENOSPC`` also for ``SQLITE_FULL``), or ``None`` when unknown.
        why: ``"disk full"``, ``"no free inode left"`` (``ENOSPC`` on a file system with free blocks but no free
            inode: too many files), ``"disk full or no free inode left"`` (``ENOSPC`` when it can no longer be told),
            ``"disk quota exceeded"``, or the error's description (``"Permission denied"``, ``"Too many open
            files"``).
        detail: the underlying error, e.g. ``"[Errno 28] No space left on device"``.
        full: whether the disk (or the quota) is full, so a retry needs space.
    """

    def __init__(self, reason: str, *, path: str | Path | None = None, code: int | None = None, why: str = "",
                 detail: str = "") -> None:
        super().__init__(reason, path=path)
        self.errno = code
        self.why = why
        self.detail = detail
        self.full = code in (errno.ENOSPC, errno.EDQUOT)


#: What :func:`os_error_of` reads from a library's ``RuntimeError`` text: the C library's description of these codes
#: (FAISS reports a failed ``fwrite`` as ``"... write error in <file>: 4051 != 100352 (No space left on device)"``).
#: The same codes, and running out of file descriptors (``EMFILE``, ``ENFILE``), are what makes a new file impossible
#: to create (:func:`creation_errno`).
_WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM,
                 errno.EMFILE, errno.ENFILE)
#: How numpy reports a write that stopped short (``"4596 requested and 1520 written"``), with no ``errno``.
_SHORT_WRITE = re.compile(r"\d+ requested and \d+ written")
#: SQLite's primary result codes of a failed write, as ``errno`` codes (https://www.sqlite.org/rescode.html).
_SQLITE_ERRNOS = {sqlite3.SQLITE_FULL: errno.ENOSPC, sqlite3.SQLITE_IOERR: errno.EIO}
#: SQLite's primary result codes of a file it could not create or open for writing (the database, its ``-wal`` /
#: ``-shm`` / ``-journal``): ``SQLITE_CANTOPEN`` ("unable to open database file": no inode left, too many open
#: files, no permission) and ``SQLITE_READONLY`` ("attempt to write a readonly database": a read-only file, folder or
#: file system).  SQLite does not say why; :func:`creation_errno` finds out.
_SQLITE_CANNOT_CREATE = (sqlite3.SQLITE_CANTOPEN, sqlite3.SQLITE_READONLY)
#: ``SQLITE_READONLY_DBMOVED``: the file was moved or removed under the connection, not a write that failed.
_SQLITE_DBMOVED = 1032


def creation_errno(path: str | Path) -> int | None:
    """Why the file ``path`` (a SQLite database, or a file beside it) cannot be written now, as an ``errno`` code,
    or ``None`` when nothing says it cannot.  SQLite reports a file it could not create as ``SQLITE_CANTOPEN``
    without the reason; this asks the file system the same question: it creates (and removes at once) an empty
    file beside ``path`` — failing with ``ENOSPC`` when the file system has no free inode, ``EDQUOT``, ``EMFILE`` /
    ``ENFILE``, ``EACCES`` / ``EPERM`` for a folder this process cannot write, ``EROFS`` — and, when that works,
    checks that ``path`` itself is writable (``EACCES``, or ``EROFS`` on a read-only file system).  Only codes of
    :data:`_WRITE_ERRNOS` are returned (a missing folder, for one, is not a failed write)."""
    target = Path(path)
    probe = target.with_name(f".ragspine-probe-{os.getpid()}-{id(target):x}")
    code: int | None = None
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    except OSError as e:
        code = e.errno
    else:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(probe)
        if target.exists() and not os.access(target, os.W_OK):
            code = errno.EROFS if read_only_mount(target) else errno.EACCES
    return code if code in _WRITE_ERRNOS else None


def sqlite_cannot_open(error: BaseException) -> bool:
    """Whether ``error``, or an error it was raised from, is SQLite failing to create or open a file for writing
    (``SQLITE_CANTOPEN``, ``SQLITE_READONLY``: :data:`_SQLITE_CANNOT_CREATE`) — a file it could not open, which
    says nothing about whether its content is damaged."""
    seen: BaseException | None = error
    while seen is not None:
        code = getattr(seen, "sqlite_errorcode", None)
        if isinstance(seen, sqlite3.Error) and isinstance(code, int) and code != _SQLITE_DBMOVED and (
                code & 0xFF in _SQLITE_CANNOT_CREATE):
            return True
        seen = seen.__cause__
    return False


def read_only_mount(path: str | Path) -> bool:
    """Whether ``path`` is on a file system mounted read-only (``statvfs``; ``False`` when unknown)."""
    with contextlib.suppress(OSError, AttributeError):
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    return False


def _no_space(path: str | Path | None) -> str:
    """What ``ENOSPC`` ("No space left on device") means for the file system of ``path`` now (``statvfs``):
    ``"no free inode left"`` when it has free blocks but no free inode (too many files; a file system that does not
    count inodes reports none at all, and is not one), ``"disk full"`` when no block is free, else (the space was
    freed since, e.g. by removing the failed write's temporary files, or ``path`` is unknown) both."""
    for where in () if path is None else (Path(path), Path(path).parent):
        try:
            st = os.statvfs(where)
        except (OSError, AttributeError):
            continue
        if st.f_files > 0 and st.f_favail == 0 and st.f_bavail > 0:
            return "no free inode left"
        if st.f_bavail == 0:
            return "disk full"
        break
    return "disk full or no free inode left"


def os_error_of(error: BaseException, filename: str | Path | None = None) -> OSError | None:
    """``error`` as the ``OSError`` of the write that failed (naming ``filename`` when it names no file), or
    ``None`` when it is not a failed write.  A failed write is an ``OSError`` (not ``FileExistsError``: a refusal);
    numpy's short write (no ``errno``) counts as ``ENOSPC``; a ``sqlite3`` error with result code ``SQLITE_FULL``
    (``ENOSPC``) or ``SQLITE_IOERR`` (``EIO``), or — with ``filename``, the SQLite file — ``SQLITE_CANTOPEN`` /
    ``SQLITE_READONLY`` when :func:`creation_errno` finds why the file cannot be written (no free inode, too many
    open files, a read-only folder); a ``RuntimeError`` whose text carries the C library's description of a write
    error in parentheses, e.g. FAISS's ``"... (No space left on device)"``."""
    name = None if filename is None else str(filename)
    if isinstance(error, FileExistsError):
        return None  # a refusal to replace a file (a save's check), not a write that failed
    if isinstance(error, OSError):
        if error.errno is None and _SHORT_WRITE.search(str(error)):  # numpy's tofile: no errno, the disk is full
            return OSError(errno.ENOSPC, f"short write ({error}), the disk is probably full",
                           error.filename or name)
        if error.filename is None and name is not None:
            return OSError(error.errno, error.strerror or str(error) or type(error).__name__, name)
        return error
    code: int | None = None
    if isinstance(error, sqlite3.Error):
        found = getattr(error, "sqlite_errorcode", None)
        code = _SQLITE_ERRNOS.get(found & 0xFF) if isinstance(found, int) else None
        text = str(error)
        if (code is None and name is not None and isinstance(found, int) and found != _SQLITE_DBMOVED
                and found & 0xFF in _SQLITE_CANNOT_CREATE):
            code = creation_errno(name)
            if code is not None:
                text = os.strerror(code)
    elif isinstance(error, RuntimeError):
        text = str(error)
        code = next((c for c in _WRITE_ERRNOS if f"({os.strerror(c)})" in text), None)
        text = os.strerror(code) if code is not None else text
    if code is None:
        return None
    return OSError(code, text, name)


@contextlib.contextmanager
def as_os_error(filename: str | Path) -> Iterator[None]:
    """Re-raise a failed write inside the block (:func:`os_error_of`) as the ``OSError`` naming ``filename``: for a
    library that reports it otherwise (FAISS's ``RuntimeError``, ``sqlite3``), inside a :func:`write_errors` block
    that then names the file."""
    try:
        yield
    except Exception as e:
        failure = os_error_of(e, filename)
        if failure is None or failure is e:
            raise
        raise failure from e


def _why(error: OSError) -> str:
    if error.errno == errno.ENOSPC:
        # inode exhaustion is ENOSPC too, with bytes to spare: say which, so the user frees the right thing
        return _no_space(error.filename)
    if error.errno == errno.EDQUOT:
        return "disk quota exceeded"
    return error.strerror or type(error).__name__


@contextlib.contextmanager
def write_errors(
    path: str | Path, *, kept: str, rename: Callable[[str], Path | None] | None = None
) -> Iterator[None]:
    """Around the writes of one file or index directory ``path``: a failed write inside the block (see
    :func:`os_error_of`) is re-raised as a :class:`StoreWriteError` — ``"<file>: could not be written (disk full:
    [Errno 28] No space left on device); nothing was lost: <kept>"`` — naming ``path``, or the file the error names
    as ``rename`` maps it (e.g. from a temporary directory to ``path``; ``None``: name ``path``).  The block must
    leave ``kept`` true when it fails (write to a temporary name; a SQLite transaction).  A
    :class:`StoreWriteError` from a nested block passes unchanged, unless ``rename`` maps its file (a nested save in
    this one's temporary directory: then it names the file as ``rename`` maps it, and says ``kept``); any other
    error passes unchanged.

    Raises:
        StoreWriteError: see above.
    """
    try:
        yield
    except StoreWriteError as e:
        inner = rename(e.path) if rename is not None and e.path is not None else None
        if inner is None:
            raise
        # a nested save (a hybrid retriever's channel) inside this one's temporary directory: name the file as it
        # is called once this save is in place, and say what this save keeps
        raise StoreWriteError(_written(e.why, e.detail, kept), path=inner, code=e.errno, why=e.why,
                              detail=e.detail) from e
    except Exception as e:
        # a SQLite error says no more than "unable to open database file": the path lets os_error_of find out why
        failure = os_error_of(e, path if isinstance(e, sqlite3.Error) else None)
        if failure is None:
            raise
        where = Path(path)
        if rename is not None and failure.filename is not None:
            where = rename(str(failure.filename)) or where
        if failure.errno is not None and failure.strerror:
            detail = f"[Errno {failure.errno}] {failure.strerror}"  # the file is named by the message's prefix
        else:
            detail = str(failure.strerror or (failure.args[0] if failure.args else type(failure).__name__))
        why = _why(failure)
        raise StoreWriteError(_written(why, detail, kept), path=where, code=failure.errno, why=why,
                              detail=detail) from e


def _written(why: str, detail: str, kept: str) -> str:
    return f"could not be written ({why}: {detail}); nothing was lost: {kept}"


class StaleIndexWarning(UserWarning):
    """A saved index did not match the chunk store, or could not be verified or read, and was rebuilt in memory
    (from the chunk store, or for a saved retriever from its own documents); the message names the file and why.
    Search answers from the rebuilt index, never from the saved one; ``ragspine ingest`` (or saving again)
    rewrites it.  Also importable, for one release, from the ``indexing`` shim (which warns)."""


def warn_stale(message: str) -> None:
    """Warn with :class:`StaleIndexWarning`, attributed to the first caller outside this package, langchain_core and
    pydantic (however many mode builders, or a live retriever's reload inside ``invoke``, stand between it and the
    index).  Both store backends' retrieval sources warn through it."""
    import langchain_core
    import pydantic

    from langchain_ragspine._stacklevel import user_stacklevel

    warnings.warn(message, StaleIndexWarning, stacklevel=user_stacklevel(langchain_core, pydantic))


def json_type_name(value: Any) -> str:
    """The JSON name of ``value``'s type (``null``, ``boolean``, ``number``, ``string``, ``array``, ``object``), else
    the Python type name — for messages about malformed JSON data."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def parse_json_object(
    line: str,
    *,
    path: str | Path,
    lineno: int,
    what: str,
    error: type[RagSpineError] = RagSpineError,
    object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
) -> dict[str, Any]:
    """One line of a JSON Lines file (https://jsonlines.org) as a JSON object.

    Args:
        line: the line's text.  path, lineno: where it is (for the error).
        what: how the message names the line (``"a line"`` → ``"a line must be a JSON object, got array"``).
        error: the :class:`RagSpineError` subclass raised (default :class:`RagSpineError`).
        object_pairs_hook: passed to ``json.loads``.

    Raises:
        RagSpineError: (``error``) ``"not valid JSON: <reason> (column <n>)"`` or ``"<what> must be a JSON object,
            got <JSON type>"``, located at ``path:lineno``.
    """
    try:
        obj = json.loads(line, object_pairs_hook=object_pairs_hook)
    except json.JSONDecodeError as exc:
        raise error(f"not valid JSON: {exc.msg} (column {exc.colno})", path=path, line=lineno) from None
    if not isinstance(obj, dict):
        raise error(f"{what} must be a JSON object, got {json_type_name(obj)}", path=path, line=lineno)
    return obj
