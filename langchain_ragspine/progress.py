"""Progress a person can see: one bar per phase on a terminal or in Jupyter, a line every ~10 s elsewhere.

Long runs (``ingest``, ``evaluate``, ``ragspine demo``) go through phases — ``load``, ``chunk``, ``embed``,
``index``, ``eval`` — and each phase reports through :func:`progress_bar`:

* on a terminal (stderr is a TTY) or in a Jupyter kernel: a `tqdm <https://tqdm.github.io>`_ bar (the notebook
  widget when ``ipywidgets`` is installed, else tqdm's text bar, so no ``IProgress`` warning);
* elsewhere (a log file, CI, a pipe): :class:`LineProgress` — a start line, then one line at most every
  :data:`LINE_INTERVAL` seconds with the count, the rate and the time elapsed, and a last line when the phase ends;
* ``progress=False``: nothing.

Entry points open a :func:`reporting` context with their ``progress`` argument (``None``: the automatic choice
above); inside it every :func:`progress_bar` follows that choice, and a bar opened while another is open (e.g. an
embedding model's own bar inside the ``embed`` phase) stays silent, so each phase shows one bar.  Outside a
:func:`reporting` context :func:`progress_bar` keeps the library default: a bar on a terminal, nothing elsewhere.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from typing import IO, Any, Literal

from langchain_ragspine._closing import Closing

__all__ = ["LINE_INTERVAL", "LineProgress", "progress_bar", "progress_mode", "reporting"]

#: Seconds between two progress lines when stderr is not a terminal.
LINE_INTERVAL = 10.0

Mode = Literal["bar", "lines", "off"]



class _State:
    """The reporting choice of one :func:`reporting` block and how many of its bars are open."""

    def __init__(self, mode: Mode) -> None:
        self.mode = mode
        self.open = 0


_STATE: ContextVar[_State | None] = ContextVar("ragspine_progress", default=None)


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def _in_jupyter() -> bool:
    """Whether this process is a Jupyter kernel (IPython with a kernel app)."""
    if "IPython" not in sys.modules:
        return False
    try:
        from IPython import get_ipython

        shell = get_ipython()
        return shell is not None and "IPKernelApp" in getattr(shell, "config", {})
    except Exception:  # pragma: no cover - a broken IPython install
        return False


def progress_mode(progress: bool | None) -> Mode:
    """What ``progress`` means here: ``False`` → ``"off"``; otherwise ``"bar"`` on a terminal or in Jupyter, else
    ``"lines"``."""
    if progress is False:
        return "off"
    return "bar" if _stderr_is_terminal() or _in_jupyter() else "lines"


@contextlib.contextmanager
def reporting(progress: bool | None) -> Iterator[Mode]:
    """Within the block, :func:`progress_bar` shows :func:`progress_mode` ``(progress)``; yields the mode.

    Nested in another block, ``progress=None`` (or ``True``) keeps the outer block's choice (the outermost entry
    point decides); ``False`` silences the inner block."""
    outer = _STATE.get()
    state = outer if outer is not None and progress is not False else _State(progress_mode(progress))
    token = _STATE.set(state)
    try:
        yield state.mode
    finally:
        _STATE.reset(token)


class LineProgress(Closing):
    """A progress report as plain lines on ``stream`` (default stderr): for logs, CI and pipes.

    Args:
        iterable: optional; iterating the reporter iterates it and counts each item.
        total: the expected count (``None``: unknown; default ``len(iterable)`` when it has one).
        desc: the phase name that starts every line.
        unit: what is counted (``"doc"``, ``"chunk"``, …).
        stream: where lines go (default ``sys.stderr`` at the time of writing).
        clock: seconds, monotonic (default :func:`time.monotonic`; tests pass a fake clock).
        interval: at least this many seconds between two progress lines (default :data:`LINE_INTERVAL`).

    Lines look like ``embed: started (1,200 chunks)``, ``embed: 480/1,200 chunks (40%), 12.0 chunks/s, 40 s``,
    ``embed: done, 1,200 chunks in 98 s``.
    """

    def __init__(
        self,
        iterable: Iterable[Any] | None = None,
        *,
        total: int | None = None,
        desc: str = "progress",
        unit: str = "it",
        stream: IO[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        interval: float = LINE_INTERVAL,
    ) -> None:
        self.iterable = iterable
        if total is None and iterable is not None and hasattr(iterable, "__len__"):
            total = len(iterable)  # type: ignore[arg-type]
        self.total = total
        self.desc, self.unit, self.n = desc, unit, 0
        self._stream, self._clock, self.interval = stream, clock, interval
        self._start = self._last = clock()
        self._closed = False
        of = f" ({total:,} {self._units(total)})" if total is not None else ""
        self._write(f"{desc}: started{of}")

    def _units(self, n: int) -> str:
        return self.unit if n == 1 or self.unit.endswith("s") else f"{self.unit}s"

    def _write(self, line: str) -> None:
        stream = self._stream if self._stream is not None else sys.stderr
        stream.write(line + "\n")
        stream.flush()

    def update(self, n: int = 1) -> None:
        """Count ``n`` more; write a line when :attr:`interval` seconds passed since the last one."""
        self.n += n
        now = self._clock()
        if now - self._last >= self.interval:
            self._last = now
            elapsed = now - self._start
            of = f"/{self.total:,}" if self.total is not None else ""
            pct = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
            rate = self.n / elapsed if elapsed > 0 else 0.0
            self._write(
                f"{self.desc}: {self.n:,}{of} {self._units(self.n)}{pct}, {rate:.1f} {self._units(2)}/s, {elapsed:.0f} s"
            )

    def close(self) -> None:
        """Write the last line (once)."""
        if self._closed:
            return
        self._closed = True
        self._write(f"{self.desc}: done, {self.n:,} {self._units(self.n)} in {self._clock() - self._start:.0f} s")

    def __iter__(self) -> Iterator[Any]:
        if self.iterable is None:
            raise TypeError("this LineProgress was made without an iterable")
        try:
            for item in self.iterable:
                yield item
                self.update(1)
        finally:
            self.close()


class _Tracked(Closing):
    """A bar of a :func:`reporting` block that counts itself open while it lives, so bars opened inside it stay
    silent."""

    def __init__(self, bar: Any, state: _State) -> None:
        self._bar = bar
        self._state = state
        state.open += 1
        self._done = False

    def update(self, n: int = 1) -> None:
        self._bar.update(n)

    def close(self) -> None:
        if not self._done:
            self._done = True
            self._bar.close()
            self._state.open -= 1

    def __iter__(self) -> Iterator[Any]:
        try:
            yield from self._bar
        finally:
            self.close()


def _tqdm_class() -> Any:
    if _in_jupyter() and importlib.util.find_spec("ipywidgets") is not None:
        from tqdm.notebook import tqdm as notebook_tqdm

        return notebook_tqdm
    from tqdm.std import tqdm as text_tqdm

    return text_tqdm


def progress_bar(
    iterable: Iterable[Any] | None = None,
    *,
    total: int | None = None,
    desc: str,
    unit: str = "it",
    show: bool | None = None,
) -> Any:
    """A progress reporter for one phase: iterate it (with ``iterable``) or call ``update(n)``; ``close()`` or use
    it as a context manager.

    Args:
        iterable: what the phase iterates (optional).
        total: the expected count (default ``len(iterable)`` when it has one).
        desc: the phase name (``"load"``, ``"chunk"``, ``"embed"``, ``"index"``, ``"eval …"``).
        unit: what is counted.
        show: ``False``: silent.  Inside :func:`reporting`: ignored unless ``False`` (the context decides).
            Outside: ``True`` → a bar, ``None`` → a bar on a terminal only.

    Returns:
        A tqdm bar, a :class:`LineProgress`, or a disabled tqdm (silent), with ``update``, ``close`` and iteration.
    """
    state = _STATE.get()
    if state is None:  # the library default
        if show is False or not (show or _stderr_is_terminal()):
            return _silent(iterable, total, desc, unit)
        return _tqdm_class()(iterable, total=total, desc=desc, unit=unit, file=sys.stderr)
    if show is False or state.mode == "off" or state.open:
        return _silent(iterable, total, desc, unit)
    if state.mode == "lines":
        return _Tracked(LineProgress(iterable, total=total, desc=desc, unit=unit), state)
    return _Tracked(_tqdm_class()(iterable, total=total, desc=desc, unit=unit, file=sys.stderr), state)


def _silent(iterable: Iterable[Any] | None, total: int | None, desc: str, unit: str) -> Any:
    from tqdm.std import tqdm as text_tqdm

    return text_tqdm(iterable, total=total, desc=desc, unit=unit, disable=True)
