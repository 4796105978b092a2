"""Argument checks shared by every public entry point: unknown keyword arguments, integer arguments and the
directories output goes to.

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

**The two counts** have one name each, LangChain's: ``k`` is how many results come back and ``fetch_k`` how many
candidates a stage chooses them from.  :data:`DEFAULT_K` is the one default result count of every route (retrievers,
compressors, chains, vector-store searches, the CLI, the served graphs).  The package's older names
(:data:`RENAMED`: ``parent_k``, ``top_n``, ``max_docs`` → ``k``; ``candidate_k``, ``child_k`` → ``fetch_k``) are
accepted for one release by one rule, :func:`rename_arguments`: an old name alone is a ``DeprecationWarning``
naming the new one, both with the same value the warning only, both with different values a ``TypeError`` naming
both.  Classes use it through :func:`renamed_fields` (a pydantic ``model_validator(mode="before")``; the package's
retrievers through ``ContractRetriever.renamed_arguments``) and :func:`renamed_property` (reading or assigning the
old attribute), functions through :func:`renamed_keywords` (a decorator).  Where the old name is the keyword of the
LangChain class a class stands in for (``top_n`` of LangChain's ``CrossEncoderReranker`` and
``LLMListwiseRerank``), it is *kept*: accepted without a warning, a conflict still an error.

**Output locations** (a CLI's ``--json`` / ``--ragas``, a model file) are checked before the work that fills them
with :func:`unwritable_reason`.

The module imports nothing from the package but :mod:`langchain_ragspine._stacklevel` (a leaf), so any module may
use it.
"""

from __future__ import annotations

import difflib
import functools
import numbers
import os
import tempfile
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, cast, overload

import pydantic
from pydantic import BeforeValidator, ValidationInfo, model_validator

from langchain_ragspine._stacklevel import user_stacklevel
from langchain_ragspine.settings import DEFAULT_K as DEFAULT_K

__all__ = [
    "DEFAULT_FETCH_K",
    "DEFAULT_K",
    "DEFAULT_KS",
    "RENAMED",
    "SYNONYMS",
    "OptionalPositiveIntField",
    "PositiveIntField",
    "check_arguments",
    "check_int",
    "check_k",
    "close_names",
    "int_field",
    "unwritable_reason",
    "rename_arguments",
    "known_fields",
    "renamed_fields",
    "renamed_keywords",
    "renamed_property",
    "unknown_arguments_message",
]

# DEFAULT_K (6), ``k`` of every route when neither an argument nor RAGSPINE_K gives one, is stated once in
# langchain_ragspine.settings (the default of RAGSPINE_K) and re-exported here (imported above).
#: ``fetch_k`` — the candidates a choosing second stage (a reranker, MMR) picks ``k`` from — when none is given:
#: LangChain's ``max_marginal_relevance_search`` default.  The pool is ``max(k, fetch_k)``.
DEFAULT_FETCH_K = 20
#: The recall@k cutoffs an evaluation reports when none are given (``ragspine eval --ks``,
#: :func:`~langchain_ragspine.evaluation.evaluate`); here, not in the evaluation package, so the CLI's parser
#: reads it without importing that package (~1 s of ``ragspine search --help``).
DEFAULT_KS: tuple[int, ...] = (1, 3, 5, 10, 100)

#: The package's old names of the two counts (accepted for one release, see :func:`rename_arguments`) and the names
#: they are now: ``k`` for the result count, ``fetch_k`` for the candidate pool.
RENAMED: Mapping[str, str] = {
    "parent_k": "k",
    "top_n": "k",
    "max_docs": "k",
    "candidate_k": "fetch_k",
    "child_k": "fetch_k",
}

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
    **RENAMED,
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


def unwritable_reason(directory: str | os.PathLike[str]) -> str | None:
    """Why no file could be created in ``directory`` — or, when it does not exist yet, under its nearest existing
    ancestor (where ``mkdir -p`` would create it) — or ``None`` when one can.

    Usage::

        reason = unwritable_reason(Path(args.out).parent)   # None, "a.txt is a file, not a directory",
        if reason:                                          # or "/proc is not writable (No such file …)"
            raise ValueError(f"--out {args.out}: {reason}")

    A file is created there and removed: permission bits do not tell for root or ``/proc``.
    """
    start = Path(directory)
    for part in (start, *start.parents):
        if part.exists():
            if not part.is_dir():
                return f"{part} is a file, not a directory"
            try:
                with tempfile.NamedTemporaryFile(dir=part, prefix=".ragspine-check-"):
                    return None
            except OSError as e:
                return f"{part} is not writable ({e.strerror or e})"
    return None


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


# -- renamed arguments ----------------------------------------------------------------------------------------------
def _same(a: Any, b: Any) -> bool:
    try:
        return a is b or bool(a == b)
    except Exception:  # an object whose == is not a bool (an array): not the same
        return False


def rename_arguments(
    owner: str, arguments: Mapping[str, Any], old_names: Iterable[str], *, kept: Iterable[str] = ()
) -> dict[str, Any]:
    """A copy of ``arguments`` with each of ``old_names`` (keys of :data:`RENAMED`) given under its new name: the one
    rule for the package's renamed arguments.

    * an old name alone: its value moves to the new name, with a ``DeprecationWarning`` naming both
      (``HybridRetriever(candidate_k=...) is deprecated: pass fetch_k= instead (candidate_k is removed in the next
      release)``), attributed to the caller's own line;
    * old and new with the same value: the warning, the value kept;
    * old and new with different values: a ``TypeError`` naming both (``HybridRetriever got fetch_k=30 and
      candidate_k=40: candidate_k is the deprecated name of fetch_k; pass fetch_k only``);
    * a name in ``kept`` (the keyword of the LangChain class ``owner`` stands in for, e.g. ``top_n``) is accepted
      without a warning; with the new name and another value it is a ``TypeError`` too.

    Args:
        owner: what the message names: a class (``"HybridRetriever"``) or a call (``"HybridRetriever.invoke"``,
            ``"make_answer_chain"``).
        arguments: the keyword arguments as given (not modified).
        old_names: the old names ``owner`` accepts.
        kept: those of ``old_names`` accepted without a warning.

    Raises:
        TypeError: an old name and its new name with different values.
        KeyError: a name of ``old_names`` that :data:`RENAMED` does not hold (a mistake in the package).

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as seen:
        ...     warnings.simplefilter("always")
        ...     rename_arguments("HybridRetriever", {"candidate_k": 30, "k": 3}, ["candidate_k"])
        {'k': 3, 'fetch_k': 30}
        >>> str(seen[0].message)
        'HybridRetriever(candidate_k=...) is deprecated: pass fetch_k= instead (candidate_k is removed in the next release)'
        >>> rename_arguments("CrossEncoderReranker", {"top_n": 3}, ["top_n"], kept=["top_n"])
        {'k': 3}
        >>> rename_arguments("CrossEncoderReranker", {"top_n": 3, "k": 2}, ["top_n"], kept=["top_n"])
        Traceback (most recent call last):
        ...
        TypeError: CrossEncoderReranker got k=2 and top_n=3: top_n is another name of k; pass one
    """
    out = dict(arguments)
    quiet = set(kept)
    for old in old_names:
        new = RENAMED[old]
        if old not in out:
            continue
        value = out.pop(old)
        if old not in quiet:
            import langchain_core

            warnings.warn(
                f"{owner}({old}=...) is deprecated: pass {new}= instead ({old} is removed in the next release)",
                DeprecationWarning, stacklevel=user_stacklevel(pydantic, langchain_core),
            )
        if new in out and not _same(out[new], value):
            why = f"{old} is another name of {new}; pass one" if old in quiet else (
                f"{old} is the deprecated name of {new}; pass {new} only")
            raise TypeError(f"{owner} got {new}={out[new]!r} and {old}={value!r}: {why}")
        out[new] = value
    return out


def renamed_fields(*old_names: str, kept: Iterable[str] = ()) -> Any:
    """A pydantic ``model_validator(mode="before")`` applying :func:`rename_arguments` to a model's constructor
    arguments (the message names the class): ``_renamed = renamed_fields("top_n", kept=["top_n"])`` in the class
    body.  The package's retrievers list their old names in ``ContractRetriever.renamed_arguments`` instead (the
    same rule, run before their unknown-argument check)."""
    names, quiet = tuple(old_names), tuple(kept)
    for name in names:
        RENAMED[name]  # a KeyError here, at class creation, for a name RENAMED does not hold

    def rename(cls: type, data: Any) -> Any:
        return rename_arguments(cls.__name__, data, names, kept=quiet) if isinstance(data, dict) else data

    return model_validator(mode="before")(classmethod(rename))  # type: ignore[arg-type]


def known_fields(*also: str) -> Any:
    """A pydantic ``model_validator(mode="before")`` refusing a constructor keyword that is no field (nor alias)
    of the model, nor one of ``also`` (names another validator takes, such as ``top_n``), with a did-you-mean
    (:func:`check_arguments`): ``_known = known_fields()`` in the class body of a document compressor, whose
    LangChain base class ignores unknown keywords (``MMRCompressor(top_n=3)`` kept ``k=6``).

    Raises:
        TypeError: (at construction) an unknown keyword, naming it and the closest known names.
    """
    extra = tuple(also)

    def check(cls: Any, data: Any) -> Any:
        if isinstance(data, dict):
            fields = cls.model_fields
            check_arguments(cls.__name__, data, {*fields, *(f.alias for f in fields.values() if f.alias), *extra})
        return data

    return model_validator(mode="before")(classmethod(check))  # type: ignore[arg-type]


def renamed_property(old: str, *, kept: bool = False) -> property:
    """The attribute ``old`` (a key of :data:`RENAMED`) as a property reading and assigning its new name, with a
    ``DeprecationWarning`` (``HybridRetriever.candidate_k is deprecated: use fetch_k``) unless ``kept``."""
    new = RENAMED[old]

    def warn(obj: object) -> None:
        if not kept:
            warnings.warn(f"{type(obj).__name__}.{old} is deprecated: use {new} ({old} is removed in the next "
                          "release)", DeprecationWarning, stacklevel=user_stacklevel(pydantic))

    def get(self: Any) -> Any:
        warn(self)
        return getattr(self, new)

    def set_(self: Any, value: Any) -> None:
        warn(self)
        setattr(self, new, value)

    doc = f"``{new}`` under its {'other' if kept else 'deprecated'} name (see :func:`~langchain_ragspine.arguments.rename_arguments`)."
    return property(get, set_, doc=doc)


Function = TypeVar("Function", bound=Callable[..., Any])


def renamed_keywords(*old_names: str, kept: Iterable[str] = ()) -> Callable[[Function], Function]:
    """A decorator: the function accepts ``old_names`` (keys of :data:`RENAMED`) as keywords for its new names, by
    :func:`rename_arguments` (the message names the function).  Its signature is the new one (``inspect.signature``
    and type checkers see only the new names).

    Example:
        >>> @renamed_keywords("max_docs")
        ... def shown(docs, *, k=6):
        ...     return docs[:k]
        >>> shown([1, 2, 3], k=2)
        [1, 2]
    """
    names, quiet = tuple(old_names), tuple(kept)
    for name in names:
        RENAMED[name]

    def decorate(func: Function) -> Function:
        owner = func.__qualname__

        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if any(name in kwargs for name in names):
                kwargs = rename_arguments(owner, kwargs, names, kept=quiet)
            return func(*args, **kwargs)

        return cast(Function, wrapper)

    return decorate
