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
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


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
    """A file of a store could not be written — the disk is full (``ENOSPC``, or SQLite's ``SQLITE_FULL``), a quota
    is exhausted (``EDQUOT``), an I/O error (``EIO``), or the file system refused the write — and nothing was lost:
    the write went to a temporary name (or into a SQLite transaction) and was abandoned, so what the file held
    before is intact; the message says what is kept.  Raised by :func:`write_errors`.  It is also an ``OSError``
    (with :attr:`errno`), so code that catches the file system's errors catches it.

    Attributes:
        errno: the ``errno`` code (``errno.ENOSPC`` also for ``SQLITE_FULL``), or ``None`` when unknown.
        why: ``"disk full"``, ``"disk quota exceeded"``, or the error's description (``"Permission denied"``).
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
_WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM)
#: How numpy reports a write that stopped short (``"4596 requested and 1520 written"``), with no ``errno``.
_SHORT_WRITE = re.compile(r"\d+ requested and \d+ written")
#: SQLite's primary result codes of a failed write, as ``errno`` codes (https://www.sqlite.org/rescode.html).
_SQLITE_ERRNOS = {sqlite3.SQLITE_FULL: errno.ENOSPC, sqlite3.SQLITE_IOERR: errno.EIO}


def os_error_of(error: BaseException, filename: str | Path | None = None) -> OSError | None:
    """``error`` as the ``OSError`` of the write that failed (naming ``filename`` when it names no file), or
    ``None`` when it is not a failed write.  A failed write is an ``OSError`` (not ``FileExistsError``: a refusal);
    numpy's short write (no ``errno``) counts as ``ENOSPC``; a ``sqlite3`` error with result code ``SQLITE_FULL``
    (``ENOSPC``) or ``SQLITE_IOERR`` (``EIO``); a ``RuntimeError`` whose text carries the C library's description
    of a write error in parentheses, e.g. FAISS's ``"... (No space left on device)"``."""
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
        return "disk full"
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
        failure = os_error_of(e)
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
    rewrites it.  Also importable as ``langchain_ragspine.indexing.StaleIndexWarning``."""


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
