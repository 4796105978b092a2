"""The writer lock of a store directory: one writer at a time, readers never wait.

Every writer of a store directory — ``ingest`` (Python and CLI), a
:class:`~langchain_ragspine.vectorstores.RagSpineVectorStore` write, the creation of the store — holds an advisory
lock on ``DIR/.ragspine.lock`` (:data:`LOCK_FILE`) for the whole write::

    with writer_lock(Path("store"), timeout=None):   # waits for the writer holding it, if any
        ...  # write the chunk store, then its derived indexes and index.json

The lock is ``fcntl.flock`` on POSIX systems (``msvcrt.locking`` of one byte far past the file's content on
Windows; best effort, not run by this package's tests).  The operating system releases it when its holder exits,
however it exits (``SIGKILL`` included), so a crashed writer never leaves a stale lock behind.  It is held per open
file, so two threads of one process exclude each other as two processes do; a thread that already holds the lock
of a directory may take it again (the lock is re-entrant per thread).  Processes forked while it is held (the BM25
tokenizer workers) close their copy first thing (an ``os.register_at_fork`` hook), and ``os.fork`` returns in the
holder only once the child has done so (it says so by closing a pipe), so a child never keeps the lock past its
parent — not even when the parent is killed right after the fork.  (A flock belongs to the open file, which a fork
shares: before this wait, a holder killed in the instant between the fork and its child's first step left the
lock held by the child.)

The lock file must be a regular file: a FIFO, a folder, a device or a symbolic link at ``DIR/.ragspine.lock`` is a
:class:`~langchain_ragspine.errors.StoreError` naming it and saying what to do (it is opened without blocking and
without following links, then checked with ``fstat``); :func:`writer_pid` treats one as "no writer".  A lock that
cannot be created or written (a read-only store, no inode left, a quota) is a
:class:`~langchain_ragspine.errors.StoreWriteError` saying that nothing was written.

The holder writes its process id into the file (and empties it on release), so a writer that has to wait can say
whom it waits for, and a reader can tell a running ingest (:func:`writer_pid`) from one that was interrupted.
Readers never take the lock: :func:`writer_pid` only tests it, without waiting.

A PostgreSQL store has the same lock with the same contract (``lock_timeout``, :class:`StoreBusyError`, the waiting
line): a session advisory lock per store schema, :mod:`langchain_ragspine.backends.postgres.lock`.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import socket
import stat
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from langchain_ragspine.backends.directory.regular_files import not_regular
from langchain_ragspine.errors import StoreError, write_errors

__all__ = [
    "LOCK_FILE",
    "NOT_A_DIRECTORY",
    "StoreBusyError",
    "StoreReplacedError",
    "busy_error",
    "check_lock_timeout",
    "describe_holder",
    "waiting_message",
    "writer_lock",
    "writer_pid",
]

#: The message for a store path that is a file (from Python and the CLI alike).
NOT_A_DIRECTORY = "a store must be a directory (a store path, --store, RAGSPINE_STORE), but this is a file"

#: The lock file inside a store directory.
LOCK_FILE = ".ragspine.lock"

_LOG = logging.getLogger(__name__)
#: What a writer that could not take the lock leaves (the message of its StoreWriteError).
_UNCHANGED = "this writer wrote nothing, and the store is unchanged"
#: Seconds a writer retries silently before it says it waits (a reader's test of the lock holds it for
#: microseconds), and the longest pause between two tries while it waits with a timeout.
_GRACE_S = 0.05
_POLL_S = 0.05

if sys.platform == "win32":  # pragma: no cover - not run here
    import msvcrt

    _FAR = 1 << 30  # the locked byte, far past the pid the holder writes at the start of the file

    def _try_lock(fd: int, *, shared: bool = False) -> bool:
        os.lseek(fd, _FAR, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True

    def _lock(fd: int) -> None:
        while not _try_lock(fd):
            time.sleep(_POLL_S)

    def _unlock(fd: int) -> None:
        os.lseek(fd, _FAR, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)

else:
    import fcntl

    def _try_lock(fd: int, *, shared: bool = False) -> bool:
        try:
            fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        except OSError as e:
            if e.errno in (errno.EAGAIN, errno.EACCES):
                return False
            raise
        return True

    def _lock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX)  # interrupted by Ctrl-C (PEP 475 retries other signals)

    def _unlock(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_UN)


class StoreBusyError(StoreError):
    """Another writer holds the store directory's lock and the wait for it ran out (``timeout``).

    Attributes:
        pid: the holder's process id (0 when it could not be read).
    """

    def __init__(self, reason: str, *, path: str | Path, pid: int) -> None:
        super().__init__(reason, path=path)
        self.pid = pid


class StoreReplacedError(StoreError):
    """The store directory was removed or replaced (``rm -rf`` and a new ingest, a ``mv`` into its place) while a
    writer held its lock: what that writer wrote went to the removed files, not to the store now at the path, which
    it left unchanged.  Raised by :func:`writer_lock` when the block ends; run the write again."""


@dataclass
class _Held:
    """A lock this process holds: the thread that holds it and the open lock file."""

    owner: int
    fd: int


_HELD: dict[str, _Held] = {}
_HELD_GUARD = threading.Lock()


#: While a fork of a process holding a lock runs: the pipe by which its child says it closed its copies (read end,
#: write end).  Forks of one process run one at a time while it holds a lock (``_HELD_GUARD`` is held from
#: :func:`_before_fork` to the end of the fork), so one pipe is enough.
_FORK_PIPE: list[int] = []


def _before_fork() -> None:
    """In the parent, before ``os.fork``: when a lock is held, a pipe for the child's word that it closed its copies
    of the lock files.  ``_HELD_GUARD`` stays taken until the fork ends (released by the two hooks below), so the
    child copies a consistent ``_HELD``."""
    _HELD_GUARD.acquire()
    if _HELD:
        try:
            _FORK_PIPE[:] = os.pipe()
        except OSError:  # no descriptor left: the child still closes its copies, the parent just does not wait
            _FORK_PIPE.clear()


def _after_fork_in_parent() -> None:
    """In the parent, after ``os.fork`` (also a failed one): wait until the child has closed its copies of the held
    lock files (it closes the pipe's write end after them, or dies), so that from the moment ``fork`` returns no
    child keeps a lock of this process — not even when this process is killed an instant later."""
    try:
        if _FORK_PIPE:
            read_end, write_end = _FORK_PIPE
            _FORK_PIPE.clear()
            os.close(write_end)
            try:
                while os.read(read_end, 1):  # b"" (end of file): every copy of the write end is closed
                    pass
            except OSError:
                pass
            finally:
                os.close(read_end)
    finally:
        _HELD_GUARD.release()


def _close_in_child() -> None:
    """In a forked child: close the copies of the held lock files (closing, not unlocking: the parent keeps the
    lock), then the pipe's write end, which tells the parent (waiting in :func:`_after_fork_in_parent`) that this
    child holds no lock: so a child never holds a store's lock after its parent has gone."""
    for held in _HELD.values():
        with contextlib.suppress(OSError):
            os.close(held.fd)
    _HELD.clear()
    for fd in _FORK_PIPE:
        with contextlib.suppress(OSError):
            os.close(fd)
    _FORK_PIPE.clear()
    _HELD_GUARD.release()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent, after_in_child=_close_in_child)


def check_lock_timeout(timeout: float | None) -> float | None:
    """``timeout`` checked: ``None`` (wait as long as it takes) or seconds ``>= 0``.

    Raises:
        TypeError: ``timeout`` is not a number (a ``bool`` included).
        ValueError: ``timeout`` is negative or not finite.
    """
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise TypeError(f"lock_timeout must be None or a number of seconds >= 0, got {timeout!r}")
    if not 0 <= timeout < float("inf"):
        raise ValueError(f"lock_timeout must be None or a number of seconds >= 0, got {timeout!r}")
    return float(timeout)


def _read_pid(fd: int) -> int:
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        return int(os.read(fd, 32).decode("ascii").strip() or 0)
    except (OSError, ValueError, UnicodeDecodeError):
        return 0


def writer_pid(root: Path) -> int | None:
    """The process id of the writer holding the lock of store directory ``root`` now, ``0`` when one holds it but
    its id cannot be read, or ``None`` when no writer holds it (also when there is no lock file, it cannot be
    opened, or it is not a regular file: no writer can take such a lock).  Never waits (not even on a FIFO) and
    never keeps the lock.
    """
    path = Path(root) / LOCK_FILE
    try:
        fd = _open_regular(path, os.O_RDONLY)
    except (OSError, StoreError):
        return None
    try:
        if _try_lock(fd, shared=True):
            _unlock(fd)
            return None
        return _read_pid(fd)
    except OSError:
        return None
    finally:
        os.close(fd)


def describe_holder(pid: int, host: str | None = None) -> str:
    """``"pid N"`` (``"pid N on HOST"`` for a ``host`` other than this machine), ``"an unknown process"`` for 0."""
    if not pid:
        return "an unknown process"
    return f"pid {pid}" if host is None or host == socket.gethostname() else f"pid {pid} on {host}"


def waiting_message(lock: str, pid: int, host: str | None = None) -> str:
    """The line a writer says (once) when it has to wait for the holder of ``lock`` (a lock file, or a PostgreSQL
    store's lock)."""
    return (
        f"waiting for the writer holding {lock} ({describe_holder(pid, host)}: an ingest or a vector-store write into "
        "this store) to finish…"
    )


def busy_error(
    lock: str, *, path: str | Path, pid: int, waited: float, timeout: float | None, host: str | None = None
) -> StoreBusyError:
    """The :class:`StoreBusyError` of a writer that waited ``waited`` seconds for the holder of ``lock`` (named with
    its ``pid``) and gave up at its ``timeout``; the same for a store directory and a PostgreSQL store."""
    return StoreBusyError(
        f"another writer ({describe_holder(pid, host)}: an ingest or a vector-store write) holds {lock}; waited "
        f"{waited:.1f}s (lock_timeout={timeout:g}); try again when it has finished, or allow a longer lock_timeout "
        "(ragspine ingest --lock-timeout SECONDS)",
        path=path,
        pid=pid,
    )


#: What to do about a lock file that is not a regular file.
_NOT_A_LOCK = (
    "the writer lock of a store must be a regular file, so no writer can run; nothing was written: remove it (a "
    "writer creates it again) and run the write again"
)


def _open_regular(path: Path, flags: int) -> int:
    """``os.open(path, flags)``, refused unless ``path`` is a regular file (not a symbolic link): opened without
    blocking (a FIFO's open would wait for a peer) and without following a symbolic link (one to ``/dev/zero``, a
    FIFO, or to nothing, which ``O_CREAT`` would create outside the store), then checked with ``fstat``.

    Raises:
        StoreError: ``path`` is a folder, a FIFO, a socket, a device or a symbolic link (named, with what to do).
        OSError: it cannot be opened (missing without ``O_CREAT``, no permission, no inode left, …).
    """
    extra = getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags | extra, 0o666)
    except OSError as e:
        if e.errno in (errno.EISDIR, errno.ELOOP, errno.ENXIO, errno.EOPNOTSUPP, errno.ENODEV):
            with contextlib.suppress(OSError):
                mode = os.lstat(path).st_mode
                if not stat.S_ISREG(mode):
                    raise not_regular(path, mode, remedy=_NOT_A_LOCK) from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise not_regular(path, mode, remedy=_NOT_A_LOCK)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_lock_file(root: Path) -> tuple[int, bool]:
    """The lock file opened for writing (created, with ``root``, when missing); whether ``root`` was created.

    Raises:
        StoreError: ``root`` is a file; the lock file is not a regular file (:func:`_open_regular`).
        StoreWriteError: ``root`` or the lock file cannot be created or opened for writing (a read-only folder or
            file system, no inode left, a quota, no descriptor left): nothing was written.
    """
    created = False
    with write_errors(root / LOCK_FILE, kept=_UNCHANGED):
        if not root.is_dir():
            try:
                root.mkdir(parents=True)
                created = True
            except FileExistsError:
                if not root.is_dir():
                    raise StoreError(NOT_A_DIRECTORY, path=root) from None
        try:
            return _open_regular(root / LOCK_FILE, os.O_RDWR | os.O_CREAT), created
        except BaseException:
            if created:  # leave nothing behind: the folder was made for this lock only
                with contextlib.suppress(OSError):
                    root.rmdir()
            raise


def _same_file(fd: int, path: Path) -> bool:
    """Whether ``path`` still names the file open as ``fd`` (a releasing writer may have removed it)."""
    try:
        here, there = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


def _identity(path: Path) -> tuple[int, int] | None:
    """``(st_dev, st_ino)`` of ``path``, ``None`` when it is gone."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def _replaced_reason(root: Path, home: tuple[int, int] | None) -> str:
    """Why a held lock is no longer the lock of ``root`` (``home``: the directory's identity when it was taken)."""
    if _identity(root) != home:
        return (
            "the store directory was removed or replaced while this writer held its lock, so what it wrote is not "
            "in the store now at this path (which it left unchanged); run it again"
        )
    return (
        f"the lock file {LOCK_FILE} was removed while this writer held it, so another writer may have written "
        "meanwhile; check the store and run the write again"
    )


def _poll(fd: int, until: float) -> bool:
    """Try to take the lock until ``until`` (``time.monotonic()``); whether it was taken."""
    while not _try_lock(fd):
        left = until - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(_POLL_S, left))
    return True


def _acquire(root: Path, timeout: float | None, on_wait: Callable[[str], None]) -> tuple[int, bool]:
    """Take the lock (see :func:`writer_lock`); returns the open lock file and whether ``root`` was created."""
    path = root / LOCK_FILE
    started = time.monotonic()
    deadline = None if timeout is None else started + timeout
    announced = False
    while True:
        fd, created = _open_lock_file(root)
        try:
            # a reader's test of the lock holds it for microseconds: retry a moment before saying we wait
            grace = started + _GRACE_S if deadline is None else min(started + _GRACE_S, deadline)
            if not _poll(fd, grace):
                pid = _read_pid(fd)
                if deadline is not None and time.monotonic() >= deadline:
                    raise _busy(root, pid, time.monotonic() - started, timeout)
                if not announced:
                    on_wait(waiting_message(str(path), pid))
                    announced = True
                if deadline is None:
                    _lock(fd)
                elif not _poll(fd, deadline):
                    raise _busy(root, _read_pid(fd), time.monotonic() - started, timeout)
            if _same_file(fd, path):
                with write_errors(path, kept=_UNCHANGED):  # the pid needs a block: the disk may be full
                    os.ftruncate(fd, 0)
                    os.lseek(fd, 0, os.SEEK_SET)
                    os.write(fd, f"{os.getpid()}\n".encode("ascii"))
                return fd, created
            _unlock(fd)  # the releasing writer removed the file it locked: take the lock of the new one
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)


def _busy(root: Path, pid: int, waited: float, timeout: float | None) -> StoreBusyError:
    return busy_error(str(root / LOCK_FILE), path=root, pid=pid, waited=waited, timeout=timeout)


def _release(root: Path, fd: int, created: bool) -> None:
    """Release the lock; remove ``root`` again when this writer created it and left nothing in it but the lock."""
    try:
        os.ftruncate(fd, 0)
        if created:
            with contextlib.suppress(OSError):
                if [p.name for p in root.iterdir()] == [LOCK_FILE]:
                    os.unlink(root / LOCK_FILE)  # a waiting writer sees the file gone and retries (_same_file)
                    root.rmdir()
    finally:
        try:
            _unlock(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def writer_lock(
    root: str | os.PathLike[str],
    *,
    timeout: float | None = None,
    on_wait: Callable[[str], None] | None = None,
) -> Iterator[Path]:
    """Hold the writer lock of store directory ``root`` for the block; yields the lock file's path.

    ``root`` is created when missing (and removed again on release if the block left nothing in it but the lock
    file, e.g. an ingest that failed before it wrote anything).  When another writer holds the lock, ``on_wait``
    (default: a ``logging`` warning of this module's logger, which Python prints on stderr when logging is not
    configured) is called once with a line naming the lock file and the holder's pid, and the call waits:
    ``timeout=None`` (default) as long as it takes, else at most ``timeout`` seconds (``0``: not at all).
    The same thread may nest the lock.

    Raises:
        StoreBusyError: another writer still holds the lock after ``timeout`` seconds (names it and its pid).
        StoreReplacedError: when the block ends without an error, the lock file at ``root`` is no longer the one
            it held: the directory was removed or replaced meanwhile, so the block's writes are not in it.
        StoreWriteError: (a :class:`StoreError`) ``root`` or the lock file cannot be created or written — a
            read-only folder or file system, another user's store, no inode or block left, a quota, no file
            descriptor left —, naming the lock file and saying that nothing was written.
        StoreError: ``root`` is a file; the lock file is not a regular file (a FIFO, a folder, a symbolic link:
            named, with what to do); it cannot be locked (the reason named).
        TypeError, ValueError: a bad ``timeout`` (:func:`check_lock_timeout`).
    """
    root = Path(root)
    timeout = check_lock_timeout(timeout)
    key = os.path.realpath(root / LOCK_FILE)
    me = threading.get_ident()
    with _HELD_GUARD:
        held = _HELD.get(key)
    if held is not None and held.owner == me:  # nested in this thread's own block: that block releases it
        yield root / LOCK_FILE
        return
    if root.exists() and not root.is_dir():
        raise StoreError(NOT_A_DIRECTORY, path=root)
    try:
        fd, created = _acquire(root, timeout, on_wait or _LOG.warning)
        home = _identity(root)
    except StoreError:
        raise
    except OSError as e:
        raise StoreError(f"cannot lock {root / LOCK_FILE}: {e.strerror or e}", path=root) from e
    with _HELD_GUARD:
        _HELD[key] = _Held(owner=me, fd=fd)
    try:
        yield root / LOCK_FILE
        if not _same_file(fd, root / LOCK_FILE):
            # the directory was removed (and maybe rebuilt, with a lock file of its own) under this writer: what it
            # wrote is in unlinked files, and another writer may have held the new lock meanwhile
            raise StoreReplacedError(_replaced_reason(root, home), path=root)
    finally:
        with _HELD_GUARD:
            _HELD.pop(key, None)
        _release(root, fd, created)
