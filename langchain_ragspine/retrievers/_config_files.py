"""Reading the small user-written files the query transformations take (glossaries, deny-lists): JSON or YAML by
suffix, errors naming the file (and the line, where the parser knows it).

With ``lines=True`` a YAML file's lists and mappings come back as :class:`YamlList` / :class:`YamlDict`, which
remember the line each item and key was written on, so a check of the content can name the line too
(:func:`line_of`); JSON does not keep positions, so messages about JSON content name the entry instead.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from langchain_ragspine.errors import RagSpineError

#: Suffixes read as YAML; ``.json`` is read as JSON.
YAML_SUFFIXES = (".yaml", ".yml")


def read_text_file(path: str | Path, what: str) -> str:
    """The UTF-8 text of ``path``.

    Raises:
        RagSpineError: the file cannot be read or is not UTF-8 (the message names ``what`` and the file).
    """
    p = Path(path)
    try:
        return p.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise RagSpineError(f"cannot read the {what}: {e}", path=p) from e


class YamlList(list[Any]):
    """A YAML sequence: a ``list`` that also knows the 1-based ``line`` it starts on and ``item_lines``, the line of
    each item."""

    line: int | None = None
    item_lines: tuple[int, ...] = ()


class YamlDict(dict[Any, Any]):
    """A YAML mapping: a ``dict`` that also knows the 1-based ``line`` it starts on and ``key_lines``, the line of
    each key."""

    line: int | None = None
    key_lines: dict[Any, int]


class _LineLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """``yaml.safe_load``'s loader (libyaml's when installed), building :class:`YamlList` / :class:`YamlDict`."""

    unique_keys = False


class _UniqueLineLoader(_LineLoader):
    """:class:`_LineLoader` that refuses a key written twice in one mapping."""

    unique_keys = True


class _DuplicateKey(ValueError):
    """A JSON object with a key written twice."""


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``'s ``object_pairs_hook``: the object as a dict, or :class:`_DuplicateKey`."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(f"duplicate key {key!r} in one object: the later value would replace the earlier "
                                "one; merge them into one entry")
        out[key] = value
    return out


def _construct_list(loader: Any, node: yaml.SequenceNode) -> Any:
    data = YamlList()
    data.line = node.start_mark.line + 1
    data.item_lines = tuple(item.start_mark.line + 1 for item in node.value)
    yield data  # yielded first, filled after: aliases may point back at it
    data.extend(loader.construct_sequence(node))


def _construct_dict(loader: Any, node: yaml.MappingNode) -> Any:
    data = YamlDict()
    data.line = node.start_mark.line + 1
    data.key_lines = {}
    yield data
    if getattr(loader, "unique_keys", False):
        _check_unique_keys(loader, node)
    data.update(loader.construct_mapping(node))  # merges "<<" keys into node.value first
    for key_node, _ in node.value:
        key = loader.construct_object(key_node)
        data.key_lines.setdefault(key, key_node.start_mark.line + 1)


def _check_unique_keys(loader: Any, node: yaml.MappingNode) -> None:
    """Refuse a key written twice in ``node`` (keys merged in with ``<<`` may be overridden, as YAML allows)."""
    lines: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node)
        try:
            first = lines.get(key)
        except TypeError:  # an unhashable key: construct_mapping refuses it
            continue
        if first is not None:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r} (first on line {first}): the later value would replace the "
                "earlier one; merge them into one entry", key_node.start_mark)
        lines[key] = key_node.start_mark.line + 1


_LineLoader.add_constructor("tag:yaml.org,2002:seq", _construct_list)
_LineLoader.add_constructor("tag:yaml.org,2002:map", _construct_dict)


def line_of(container: Any, item: Any = None) -> int | None:
    """The 1-based line of ``container[item]`` (an index of a :class:`YamlList`, a key of a :class:`YamlDict`), or
    of ``container`` itself when ``item`` is ``None`` or unknown; ``None`` for data that kept no lines (JSON)."""
    if isinstance(container, YamlList) and isinstance(item, int) and 0 <= item < len(container.item_lines):
        return container.item_lines[item]
    if isinstance(container, YamlDict) and item is not None:
        try:
            return container.key_lines.get(item, container.line)
        except TypeError:  # an unhashable item
            return container.line
    return getattr(container, "line", None)


def read_structured_file(path: str | Path, what: str, *, lines: bool = False, unique_keys: bool = False) -> Any:
    """The data in a ``.json``, ``.yaml`` or ``.yml`` file (YAML read safely: no Python objects).

    Args:
        path: the file.
        what: what the file is, for messages (``"glossary"``).
        lines: build a YAML file's lists and mappings as :class:`YamlList` / :class:`YamlDict` (see
            :func:`line_of`); JSON data is plain either way.
        unique_keys: a key written twice in one mapping (YAML) or object (JSON) is an error, not "the last one
            wins".

    Raises:
        RagSpineError: the file cannot be read, has another suffix, or does not parse (the message names ``what``,
            the file and, for a parse error or a duplicate YAML key, the line; a duplicate JSON key is named).
    """
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix != ".json" and suffix not in YAML_SUFFIXES:
        raise RagSpineError(f"a {what} is a .json, .yaml or .yml file, got {p.suffix or 'no suffix'!r}", path=p)
    text = read_text_file(p, what)
    try:
        if suffix == ".json":
            return json.loads(text, object_pairs_hook=_unique_pairs) if unique_keys else json.loads(text)
        if lines or unique_keys:
            return yaml.load(text, Loader=_UniqueLineLoader if unique_keys else _LineLoader)  # noqa: S506 - SafeLoader
        return yaml.safe_load(text)
    except _DuplicateKey as e:
        raise RagSpineError(f"malformed JSON in the {what}: {e}", path=p) from e
    except json.JSONDecodeError as e:
        raise RagSpineError(f"malformed JSON in the {what}: {e.msg}", path=p, line=e.lineno) from e
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise RagSpineError(f"malformed YAML in the {what}: {getattr(e, 'problem', None) or e}", path=p,
                            line=line) from e
