"""The sensitivity-label policy: one place that decides what ``RESTRICTED`` means.

Every part of the package that looks at a ``sensitivity`` label — the loader that reads it, the retrievers that keep
RESTRICTED chunks out of their indexes, ``ingest`` that keeps them out of derived files, and the RESTRICTED gate at
every exit — asks this module.  The rule is *fail closed*: when a label is ambiguous, the most restrictive reading
wins.

* **Folding.**  Keys and values are compared after :func:`fold`: Unicode compatibility decomposition (NFKD),
  combining marks and invisible format characters removed (Unicode categories Mn, Me, Cf — a zero-width space, the
  dot of a Turkish ``İ``), recomposition (NFKC, so full-width ``ＲＥＳＴＲＩＣＴＥＤ`` is ``RESTRICTED``) and surrounding
  whitespace stripped.  Keys then compare case-insensitively (``Ｓｅｎｓｉｔｉｖｉｔｙ``, `` sensitivity `` and
  ``SENSITIVITY`` all name the label), values upper-cased.
* **Restricted.**  A value is restricted when the word ``RESTRICTED`` is among the ASCII-letter runs of its folded
  form: ``"restricted"``, ``"RESTRICTED, INTERNAL"``, ``"Restricted."``, ``"RESTRICTED（社外秘）"`` and a list holding
  any of these are restricted; ``"UNRESTRICTED"`` (one other word) is not.  Labels of other types are read by
  :func:`is_restricted_label` (bytes decoded, an Enum's value, nested lists and mappings searched at any depth);
  a value it cannot read as a label (a number, a bool, any other object) is restricted.
* **Most restrictive.**  :data:`KNOWN_SENSITIVITIES` is ordered from least to most restrictive; of several labels
  (duplicate keys, a list, sources that disagree) :func:`most_restrictive` keeps the highest, and when one of them
  is not a known label — so no order is known — the result is RESTRICTED.

Unicode normalisation forms are those of Unicode Standard Annex #15; the categories are the Unicode General
Categories.
"""

from __future__ import annotations

import enum
import functools
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

__all__ = [
    "KNOWN_SENSITIVITIES",
    "RESTRICTED_SENSITIVITY",
    "SENSITIVITY_KEY",
    "drop_restricted",
    "fold",
    "is_restricted",
    "is_restricted_label",
    "is_sensitivity_key",
    "label_words",
    "most_restrictive",
    "normalize_label",
    "parse_label",
]

#: The one sensitivity label that never leaves the package (compared after :func:`normalize_label`).
RESTRICTED_SENSITIVITY = "RESTRICTED"

#: The labels the package knows, from least to most restrictive; any other label is kept but warned about.
KNOWN_SENSITIVITIES = ("PUBLIC", "INTERNAL", "CONFIDENTIAL", RESTRICTED_SENSITIVITY)

#: The metadata key of the label (any spelling that :func:`is_sensitivity_key` accepts is read as this key).
SENSITIVITY_KEY = "sensitivity"

_T = TypeVar("_T")
_RANK = {name: i for i, name in enumerate(KNOWN_SENSITIVITIES)}
_WORD = re.compile(r"[A-Z]+")
_LIST_TYPES = (list, tuple, set, frozenset)


def fold(text: str) -> str:
    """``text`` with compatibility forms, combining marks and format characters folded away, whitespace stripped.

    NFKD, then every character of Unicode category Mn, Me or Cf removed, then NFKC, then ``strip()``.  Case is
    kept (see :func:`normalize_label` and :func:`is_sensitivity_key`).

    Example:
        >>> fold(" Ｓｅｎｓｉ\\u200bｔｉｖｉｔｙ ")
        'Sensitivity'
    """
    decomposed = unicodedata.normalize("NFKD", text)
    kept = "".join(ch for ch in decomposed if unicodedata.category(ch) not in ("Mn", "Me", "Cf"))
    return unicodedata.normalize("NFKC", kept).strip()


def normalize_label(value: str) -> str:
    """A sensitivity label in canonical form: :func:`fold`, upper-cased.

    Example:
        >>> normalize_label(" ｒｅｓｔｒｉｃｔｅｄ\\u200b")
        'RESTRICTED'
    """
    return fold(value).upper()


def is_sensitivity_key(key: Any) -> bool:
    """Whether a metadata ``key`` names the sensitivity label: a string that folds (:func:`fold`, case-insensitive)
    to ``"sensitivity"``.

    Example:
        >>> is_sensitivity_key("Ｓｅｎｓｉｔｉｖｉｔｙ"), is_sensitivity_key("sensitivity_note")
        (True, False)
    """
    if not isinstance(key, str):
        return False
    if key.isascii():  # the common case, without Unicode work: no ASCII character is folded away
        return key.strip().lower() == SENSITIVITY_KEY
    return _folded_key(key) == SENSITIVITY_KEY


@functools.lru_cache(maxsize=4096)
def _folded_key(key: str) -> str:
    return fold(key).casefold()


def label_words(value: str) -> list[str]:
    """The runs of ASCII letters in ``normalize_label(value)``: ``"Restricted, internal."`` → ``["RESTRICTED",
    "INTERNAL"]``; ``"RESTRICTED（社外秘）"`` → ``["RESTRICTED"]``."""
    return list(_words(value))


@functools.lru_cache(maxsize=4096)
def _words(value: str) -> tuple[str, ...]:
    return tuple(_WORD.findall(normalize_label(value)))


def is_restricted_label(value: Any) -> bool:
    """Whether a label value is RESTRICTED.  Fails closed: a value that cannot be read as a label is RESTRICTED.

    * ``None``: not restricted (no label).
    * a string: restricted when the word ``RESTRICTED`` is among its :func:`label_words` (``"restricted"``,
      ``"RESTRICTED, INTERNAL"``; not ``"PUBLIC"``, ``""`` or ``"UNRESTRICTED"``).
    * ``bytes`` / ``bytearray`` / ``memoryview``: decoded as UTF-8 (undecodable bytes replaced), then as a string.
    * an ``enum.Enum`` member: its ``value``, read by these same rules.
    * a list / tuple / set / frozenset: restricted when any item is, at any depth (``["x", ["restricted"]]``); an
      empty one is not.
    * a mapping: restricted when any key or value is, at any depth (``{"level": "restricted"}``); an empty one is
      not.
    * anything else — a number, a bool, any other object — and a container nested deeper than
      :data:`_MAX_DEPTH` levels (or a self-containing one), or one whose iteration raises: restricted.  Such a value
      is not a label the package knows how to read, and an ambiguous label is RESTRICTED.

    Example:
        >>> is_restricted_label(["PUBLIC", "INTERNAL"]), is_restricted_label({"level": "Restricted"})
        (False, True)
        >>> is_restricted_label(b"RESTRICTED"), is_restricted_label(3), is_restricted_label(None)
        (True, True, False)
    """
    if isinstance(value, str):  # the common case first
        return RESTRICTED_SENSITIVITY in _words(value)
    try:
        return _is_restricted_value(value, 0)
    except Exception:  # a container that cannot be read (its iteration raised): fail closed
        return True


#: How deep :func:`is_restricted_label` reads nested containers; deeper (or self-containing) ones are RESTRICTED.
_MAX_DEPTH = 32


def _is_restricted_value(value: Any, depth: int) -> bool:
    if value is None:
        return False
    if isinstance(value, str):
        return RESTRICTED_SENSITIVITY in _words(value)
    if depth >= _MAX_DEPTH:
        return True
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _is_restricted_value(bytes(value).decode("utf-8", errors="replace"), depth + 1)
    if isinstance(value, enum.Enum):
        return _is_restricted_value(value.value, depth + 1)
    if isinstance(value, Mapping):
        return any(
            _is_restricted_value(k, depth + 1) or _is_restricted_value(v, depth + 1) for k, v in value.items()
        )
    if isinstance(value, _LIST_TYPES):
        return any(_is_restricted_value(v, depth + 1) for v in value)
    return True  # a number, a bool, any other object: not a readable label


def is_restricted(metadata: Any) -> bool:
    """``True`` when ``metadata`` (a mapping, or a ``Document``) is labelled RESTRICTED: under any key that
    :func:`is_sensitivity_key` accepts, a value that :func:`is_restricted_label` accepts.

    This is the one test every exit of the package uses (the ``RestrictedGate``, ``search``, the graphs, the
    retrievers' index builders); it also covers documents from other loaders (``{"Sensitivity": ["INTERNAL",
    "RESTRICTED"]}``).
    """
    metadata = getattr(metadata, "metadata", metadata)  # a langchain_core Document
    if not isinstance(metadata, Mapping):
        return False
    return any(is_sensitivity_key(key) and is_restricted_label(value) for key, value in metadata.items())


def drop_restricted(documents: Iterable[_T]) -> list[_T]:
    """The documents (``Document`` objects, or metadata mappings) that are not RESTRICTED, in their order."""
    return [d for d in documents if not is_restricted(d)]


def most_restrictive(labels: Sequence[str]) -> str:
    """The most restrictive of several label strings (the merge of duplicate keys and disagreeing sources).

    * any restricted (:func:`is_restricted_label`): ``"RESTRICTED"``, or the last label as written when every label
      folds to the same value;
    * all fold (:func:`normalize_label`) to the same value: the last one, as written (later sources win ties);
    * all known: the highest in :data:`KNOWN_SENSITIVITIES`, in canonical spelling;
    * otherwise (an unknown label disagrees with another, so no order is known): ``"RESTRICTED"``.

    Raises:
        ValueError: ``labels`` is empty.
        TypeError: a label is not a string.

    Example:
        >>> most_restrictive(["PUBLIC", "internal"]), most_restrictive(["PUBLIC", "team-a"])
        ('INTERNAL', 'RESTRICTED')
    """
    if not labels:
        raise ValueError("most_restrictive() needs at least one label")
    for label in labels:
        if not isinstance(label, str):
            raise TypeError(f"a sensitivity label must be a str, got {type(label).__name__}: {label!r}")
    folded = {normalize_label(label) for label in labels}
    if len(folded) == 1:
        return labels[-1]
    if any(is_restricted_label(label) for label in labels):
        return RESTRICTED_SENSITIVITY
    if folded <= _RANK.keys():
        return max(folded, key=_RANK.__getitem__)
    return RESTRICTED_SENSITIVITY


def parse_label(value: str | Sequence[str]) -> tuple[str, str | None]:
    """Read one label value as written in a source: ``(label, why_ambiguous)``.

    * a string that folds to a known label (``"restricted"``, ``"ＰＵＢＬＩＣ"``): itself, not ambiguous;
    * a string naming RESTRICTED among other words or punctuation (``"RESTRICTED, INTERNAL"``, ``"Restricted."``):
      ``"RESTRICTED"``, ambiguous;
    * a string made only of known labels and punctuation (``"PUBLIC, INTERNAL"``, ``"Public."``): the most
      restrictive of them, ambiguous;
    * any other string (``"team-a"``, ``"社外秘"``): itself, not ambiguous (it is an *unknown* label; the caller
      warns about those);
    * a list / tuple of strings: the :func:`most_restrictive` of its items' readings, ambiguous when they differ
      or an item is.

    Raises:
        ValueError: an empty list.
        TypeError: ``value`` is neither a string nor a list / tuple of strings.
    """
    if isinstance(value, str):
        if normalize_label(value) in _RANK:
            return value, None
        words = label_words(value)
        if RESTRICTED_SENSITIVITY in words:
            return RESTRICTED_SENSITIVITY, f"{value!r} names RESTRICTED among other words or punctuation"
        if words and set(words) <= _RANK.keys():
            return max(words, key=_RANK.__getitem__), f"{value!r} is not one label"
        return value, None
    if isinstance(value, (list, tuple)):
        if not value:
            raise ValueError("an empty list is not a sensitivity label")
        readings = [parse_label(item) for item in _strings(value)]
        label = most_restrictive([label for label, _ in readings])
        reasons = [why for _, why in readings if why]
        if len({normalize_label(label) for label, _ in readings}) > 1:
            reasons.append(f"the list {list(value)!r} holds different labels")
        return label, "; ".join(reasons) or None
    raise TypeError(f"a sensitivity label must be a string or a list of strings, got {type(value).__name__}")


def _strings(items: Sequence[Any]) -> list[str]:
    for item in items:
        if not isinstance(item, str):
            raise TypeError(
                f"a sensitivity label list may hold only strings, got {type(item).__name__}: {item!r}"
            )
    return list(items)
