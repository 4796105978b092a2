"""What the package's two "pick among named choices" model callers share — the multi-index
:class:`~langchain_ragspine.retrievers.multi_index.LLMRouter` (choices: index ids) and the
:class:`~langchain_ragspine.retrievers.filter_extraction.LLMFilterExtractor` (choices: metadata fields): the check
of their arguments, and how their prompts list the choices."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.language_models import BaseChatModel

__all__ = ["check_choices", "listing"]


def check_choices(llm: Any, choices: Mapping[str, str], empty: str) -> dict[str, str]:
    """``choices`` (``{name: description}``) as a ``str -> str`` dict, after checking that ``llm`` is a chat model.

    Raises:
        TypeError: ``llm`` is not a ``BaseChatModel``.
        ValueError: ``choices`` is empty (the message is ``empty``).
    """
    if not isinstance(llm, BaseChatModel):
        raise TypeError(f"llm must be a BaseChatModel, got {type(llm).__name__}")
    if not choices:
        raise ValueError(empty)
    return {str(k): str(v) for k, v in choices.items()}


def listing(choices: Mapping[str, str]) -> str:
    """The choices as the prompts list them, one ``- name: description`` line each."""
    return "\n".join(f"- {name}: {description}" for name, description in choices.items())
