"""Argument checks shared by every public entry point: unknown keyword arguments and integer arguments.

**Unknown arguments** are an error with a did-you-mean, never silently dropped.

LangChain's pydantic-based classes ignore unknown constructor fields by default and ``BaseRetriever.invoke`` drops
keywords a retriever does not name, so ``BM25Retriever(top_k=3)`` or ``search_kwargs={"kk": 3}`` would quietly use
the defaults.  Every public entry point of the package that takes ``**kwargs`` checks them here, and the message
names the closest known names (:func:`difflib.get_close_matches`, Ratcliff/Obershelp similarity >= 0.6) and any
LangChain synonym (``top_k`` → ``k``).

**Integer arguments** (result counts, pool sizes, batch sizes, worker counts, retries …) go through one check,
:func:`check_int` (:func:`check_k` for a result count), or one of its pydantic field types
(:data:`PositiveIntField`, :data:`OptionalPositiveIntField`, :func:`int_field`), so every one accepts the same
values (``int`` and numpy integers; never ``bool``, ``float`` or ``str``), raises the same errors (``TypeError``
for a non-integer, ``ValueError`` below the minimum) and says so in one format:
``k must be an int >= 1, got 0``.

The module imports nothing from the package, so any module may use it.
"""

from __future__ import annotations

import difflib
import numbers
from collections.abc import Iterable, Mapping
from typing import Annotated, Any, Literal, overload

from pydantic import BeforeValidator, ValidationInfo

__all__ = [
    "SYNONYMS",
    "OptionalPositiveIntField",
    "PositiveIntField",
    "check_arguments",
    "check_int",
    "check_k",
    "close_names",
    "int_field",
    "unknown_arguments_message",
]

#: Names users bring from LangChain, Haystack or LlamaIndex, and the package's name for the same thing.
SYNONYMS: Mapping[str, str] = {
    "top_k": "k",
    "topk": "k",
    "similarity_top_k": "k",
    "n": "k",
    "num_results": "k",
    "filters": "filter",
    "where": "filter",
    "embeddings": "embedding",
    "embedding_function": "embedding",
    "documents": "docs",
    "llm_chain": "llm",
}


def unknown_arguments_message(owner: str, unknown: Iterable[str], known: Iterable[str], *, what: str = "argument") -> str:
    """One line naming every unknown argument of ``owner`` with its closest known names.

    Example:
        >>> unknown_arguments_message("BM25Retriever", ["top_k", "kk"], ["k", "k1", "b", "tokenizer"])
        "BM25Retriever got unexpected arguments 'top_k' (did you mean 'k'?), 'kk' (did you mean 'k'?); known: 'b', 'k', 'k1', 'tokenizer'"
    """
    names = sorted(set(known))
    parts = []
    for name in unknown:
        close = close_names(name, names)
        hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
        parts.append(f"{name!r}{hint}")
    plural = "s" if len(parts) > 1 else ""
    return f"{owner} got unexpected {what}{plural} {', '.join(parts)}; known: {', '.join(repr(n) for n in names)}"


def close_names(name: str, known: Iterable[str]) -> list[str]:
    """The known names ``name`` may have meant: its :data:`SYNONYMS` entry when known, then up to 3 close matches
    (:func:`difflib.get_close_matches`, similarity >= 0.6); ``[]`` when none.

    Example:
        >>> close_names("filter", ["question", "messages", "filters"]), close_names("summary", ["filters"])
        (['filters'], [])
    """
    names = sorted(set(known))
    close = [SYNONYMS[name]] if SYNONYMS.get(name) in names else []
    return close + [c for c in difflib.get_close_matches(name, names, n=3, cutoff=0.6) if c not in close]


def check_arguments(owner: str, given: Iterable[str], known: Iterable[str], *, what: str = "argument") -> None:
    """Raise ``TypeError`` when a name in ``given`` is not in ``known`` (see :func:`unknown_arguments_message`).

    Raises:
        TypeError: an unknown name, with a did-you-mean.
    """
    known_set = set(known)
    unknown = [n for n in given if n not in known_set]
    if unknown:
        raise TypeError(unknown_arguments_message(owner, unknown, known_set, what=what))


# -- integer arguments ----------------------------------------------------------------------------------------------
@overload
def check_int(value: Any, name: str, *, minimum: int = 1, allow_none: Literal[False] = False, hint: str = "") -> int:
    ...


@overload
def check_int(value: Any, name: str, *, minimum: int = 1, allow_none: bool, hint: str = "") -> int | None:
    ...


def check_int(value: Any, name: str, *, minimum: int = 1, allow_none: bool = False, hint: str = "") -> int | None:
    """``value`` as a plain ``int >= minimum`` (``None`` passes through when ``allow_none``), else an error naming
    ``name``: the one integer-argument check of the package.

    Accepted: ``int`` and any other :class:`numbers.Integral` (numpy integers), returned as ``int``.  Refused:
    ``bool`` (``True`` is not a count), ``float`` (even ``2.0``), strings (``"3"``) and ``None`` unless
    ``allow_none``.  The message is ``"<name> must be an int >= <minimum>[ or None][ (<hint>)], got <value>"``
    (for a non-integer, the value's type name precedes it).

    Args:
        value: the argument as given.
        name: the argument's name in the message (``"k"``, ``"fetch_k"``, ``"BM25Retriever.k"``).
        minimum: the smallest accepted value (default 1; 0 for counts where 0 means "none" or "automatic").
        allow_none: whether ``None`` is accepted (returned as is).
        hint: a short note put in the message after the bound (``"0: automatic"``).

    Raises:
        TypeError: ``value`` is not an integer (``bool``, ``float``, ``str``, ``None`` unless ``allow_none``).
        ValueError: ``value < minimum``.

    Example:
        >>> check_int(3, "k"), check_int(None, "top_n", allow_none=True), check_int(0, "workers", minimum=0)
        (3, None, 0)
        >>> check_int(0, "k")
        Traceback (most recent call last):
        ...
        ValueError: k must be an int >= 1, got 0
        >>> check_int(2.0, "workers", minimum=0, hint="0: automatic")
        Traceback (most recent call last):
        ...
        TypeError: workers must be an int >= 0 (0: automatic), got float 2.0
    """
    if value is None and allow_none:
        return None
    expected = f"{name} must be an int >= {minimum}{' or None' if allow_none else ''}{f' ({hint})' if hint else ''}"
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{expected}, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{expected}, got {int(value)!r}")
    return int(value)


def check_k(value: Any, name: str = "k") -> int:
    """``value`` as a result count: :func:`check_int` with ``minimum=1`` (``name`` defaults to ``"k"``).

    Raises:
        TypeError: ``value`` is not an integer (``"3"``, ``2.0``, ``True``, ``None``).
        ValueError: ``value < 1``.

    Example:
        >>> check_k(3)
        3
        >>> check_k(0, "top_n")
        Traceback (most recent call last):
        ...
        ValueError: top_n must be an int >= 1, got 0
    """
    return check_int(value, name)


def int_field(*, minimum: int = 1, allow_none: bool = False, hint: str = "") -> BeforeValidator:
    """A pydantic ``BeforeValidator`` running :func:`check_int` on a field before pydantic sees it, the message
    naming the field: ``Annotated[int, int_field(minimum=0)]``.

    The ``TypeError`` of a non-integer propagates as is (pydantic does not wrap it); the ``ValueError`` of a value
    below ``minimum`` arrives inside pydantic's ``ValidationError`` (a ``ValueError``), with the same text.
    """

    def check(value: Any, info: ValidationInfo) -> int | None:
        return check_int(value, str(info.field_name), minimum=minimum, allow_none=allow_none, hint=hint)

    return BeforeValidator(check)


#: A pydantic field type: an ``int >= 1`` (:func:`check_int`; the error names the field).
PositiveIntField = Annotated[int, int_field()]
#: A pydantic field type: ``None`` or an ``int >= 1`` (a result count where ``None`` means "all" or "the default").
OptionalPositiveIntField = Annotated[int | None, int_field(allow_none=True)]
