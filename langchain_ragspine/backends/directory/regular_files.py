"""Every file of a store directory is read only when it is a regular file: the one check, used by every reader.

A store directory's files — ``index.json``, a saved index's ``retriever.json`` / ``manifest.json`` /
``docs.jsonl`` / bm25s arrays, the FAISS index and its id map, ``chunks.sqlite`` and ``embeddings.sqlite`` — are
read by path.  Something else under one of those names would hang or flood the reader: a FIFO blocks ``open`` (or
the first ``read``) until a writer comes, which may be never; a symlink to ``/dev/zero`` reads forever; a folder
fails with an ``OSError`` the callers did not expect.  So every reader goes through this module:

* :func:`check_regular` stats the path (symlinks followed) and raises a
  :class:`~langchain_ragspine.errors.StoreError` naming it and what is there (``"not a regular file: a FIFO"``)
  — the error a damaged file gives, so a search treats it as damaged (a
  :class:`~langchain_ragspine.errors.StaleIndexWarning`, or the store's error) and ``ingest`` rewrites it or refuses
  naming it; for readers that take a path (SQLite, FAISS, bm25s);
* :func:`open_regular` opens for reading with ``O_NONBLOCK`` (a FIFO's ``open`` returns at once) and checks the
  open file with ``fstat``, so nothing replaced between a check and the open is read either.

A missing file (or a symlink to nothing) is :class:`FileNotFoundError` / ``False``, as before: each caller decides
what a missing file means.
"""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path

from langchain_ragspine.errors import StoreError

__all__ = ["check_regular", "not_regular", "open_regular"]


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"


#: What to do about a store file that is not a regular file (the default remedy of :func:`not_regular`).
_REMEDY = "remove it or ingest the store again"


def not_regular(path: str | os.PathLike[str], mode: int, *, remedy: str = _REMEDY) -> StoreError:
    """The :class:`~langchain_ragspine.errors.StoreError` for ``path``, which is there but, by its ``st_mode``, not a
    regular file: ``"<path>: not a regular file: a FIFO (never read: it could block or never end); <remedy>"``."""
    return StoreError(f"not a regular file: {_kind(mode)} (never read: it could block or never end); {remedy}",
                      path=Path(path))


def _refuse(path: Path, mode: int) -> StoreError:
    return not_regular(path, mode)


def check_regular(path: str | os.PathLike[str]) -> bool:
    """Whether a regular file is at ``path`` (symlinks followed): ``True``; ``False`` when nothing is there (also a
    symlink to nothing)::

        if check_regular(root / "index.json"): ...

    Raises:
        StoreError: something else is there — a folder, a FIFO, a socket, a device — naming ``path`` and what.
        OSError: the path cannot be stat'ed (no permission on a parent folder, …).
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(st.st_mode):
        raise _refuse(Path(path), st.st_mode)
    return True


def open_regular(path: str | os.PathLike[str]) -> io.BufferedReader:
    """``path`` opened for binary reading, refused unless it is a regular file — checked on the open file (the
    open never blocks: ``O_NONBLOCK``)::

        with open_regular(root / "index.json") as f:
            text = f.read().decode("utf-8")

    Raises:
        FileNotFoundError: nothing at ``path``.
        StoreError: not a regular file (as :func:`check_regular`).
        OSError: it cannot be opened (no permission, …).
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise _refuse(Path(path), mode)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)  # a regular file: back to ordinary reads
        return open(fd, "rb", closefd=True)  # noqa: SIM115 - the caller closes it
    except BaseException:
        os.close(fd)
        raise
