"""One context-manager protocol for the package's objects that hold a resource and have ``close()``."""

from __future__ import annotations

from typing import Self

__all__ = ["Closing"]


class Closing:
    """Base class: ``with obj as o:`` gives ``obj`` itself and calls ``obj.close()`` on leaving the block, whether
    it ends normally or by an exception (which propagates).  The context-manager half of
    :func:`contextlib.closing`, as a base class so ``with Store(...) as s`` keeps the object's type.

    Subclasses implement :meth:`close`; it should be idempotent (``close()`` after ``close()`` does nothing).
    """

    def close(self) -> None:  # pragma: no cover - every subclass overrides it
        """Release the resource (implemented by subclasses)."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
