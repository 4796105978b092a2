"""Every checked setting, read where it is used: :func:`configured_setting`.

Usage::

    from langchain_ragspine.configured import configured_setting

    configured_setting("k")          # 6, or RAGSPINE_K's integer
    configured_setting("tokenizer")  # RAGSPINE_TOKENIZER in its one spelling ("CJK" -> "cjk"), else "auto"

The settings themselves (:mod:`langchain_ragspine.settings`) are a leaf that knows no tokenizer, chunker or mode
name; this module checks each :data:`~langchain_ragspine.settings.CHECKED_WHERE_USED` setting against the module
that knows its values (the numbers in :mod:`~langchain_ragspine.settings`, the spec strings in
:mod:`~langchain_ragspine.specs`, the tokenizers, the chunkers, the mode registry).  It sits above the mode
registry, so the CLI, ingest and search use it; a lower module reads its one setting through the function of that
setting's home (:func:`~langchain_ragspine.settings.configured_number`,
:func:`~langchain_ragspine.specs.configured_reranker`, :func:`~langchain_ragspine.pipeline.modes.resolve_mode` …).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain_ragspine.pipeline.modes import resolve_mode_name
from langchain_ragspine.settings import (
    CHECKED_WHERE_USED,
    NUMERIC_SETTINGS,
    RagSpineSettings,
    blank_setting,
    configured_number,
    get_settings,
    setting_variable,
)
from langchain_ragspine.specs import (
    known_name,
    normalise_postprocessor_spec,
    normalise_raptor_spec,
    normalise_reranker_spec,
    normalise_sparse_spec,
    parse_switch,
    resolve_answer_graph,
    resolve_query_transform,
    resolve_relation_graph,
)
from langchain_ragspine.text_splitters.chunkers import CHUNKERS
from langchain_ragspine.tokenizers import TOKENIZERS

__all__ = ["configured_setting"]


def _tokenizer(value: object, *, setting: str | None = None) -> str:
    if not isinstance(value, str):
        raise TypeError(f"a tokenizer name is a string, got {value!r}")
    return known_name(value, TOKENIZERS, "tokenizer", str(sorted(TOKENIZERS)), setting=setting)


def _chunker(value: object, *, setting: str | None = None) -> str | None:
    if value is None or isinstance(value, str) and not value.strip():
        return None
    if not isinstance(value, str):
        raise TypeError(f"a chunker name is a string, got {value!r}")
    return known_name(value, CHUNKERS, "chunker", ", ".join(CHUNKERS), setting=setting)


#: How each name or spec setting is checked: ``check(value, setting=...)`` gives the value in its one spelling or
#: raises ``ValueError`` naming the variable ``setting`` (the numbers: :func:`~.settings.configured_number`).
_CHECKS: dict[str, Callable[..., Any]] = {
    "tokenizer": _tokenizer,
    "chunker": _chunker,
    "retrieval_mode": resolve_mode_name,
    "query_transform": resolve_query_transform,
    "reranker": normalise_reranker_spec,
    "postprocessor": normalise_postprocessor_spec,
    "sparse": normalise_sparse_spec,
    "contextual": parse_switch,
    "answer_graph": resolve_answer_graph,
    "relation_graph": resolve_relation_graph,
    "raptor": normalise_raptor_spec,
}


def configured_setting(field: str, settings: RagSpineSettings | None = None) -> Any:
    """The value of the setting ``field`` (one of :data:`~langchain_ragspine.settings.CHECKED_WHERE_USED`;
    environment or ``.env``, else the default), checked, in its one spelling and type: what the code that uses the
    setting reads, and the one place a bad value is refused (``configured_setting("k")`` → ``6``, or ``int`` from
    ``RAGSPINE_K``).

    Args:
        field: the field name (``"k"``, ``"tokenizer"``, ``"chunk_size"`` …).
        settings: the settings to read (default: :func:`~langchain_ragspine.settings.get_settings`, read now).

    Raises:
        ValueError: a bad value; the message names the variable and value, and the valid values (with a
            suggestion for a misspelt name) or the expected type: ``RAGSPINE_K='abc': k must be an integer > 0``.
        KeyError: ``field`` is not one of :data:`~langchain_ragspine.settings.CHECKED_WHERE_USED`.
    """
    if field not in CHECKED_WHERE_USED:
        raise KeyError(f"{field!r} is not a checked setting; choose one of {', '.join(CHECKED_WHERE_USED)}")
    settings = settings or get_settings()
    if field in NUMERIC_SETTINGS:
        return configured_number(field, settings)
    blank, value = blank_setting(field, getattr(settings, field))
    if blank:
        return value
    return _CHECKS[field](value, setting=setting_variable(field))
