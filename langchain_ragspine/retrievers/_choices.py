"""What the package's two "pick among named choices" model callers share — the multi-index
:class:`~langchain_ragspine.retrievers.multi_index.LLMRouter` (choices: index ids) and the
:class:`~langchain_ragspine.retrievers.filter_extraction.LLMFilterExtractor` (choices: metadata fields): the check
of their arguments, and how their prompts list the choices."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from langchain_core.language_models import BaseChatModel
from langchain_core.prompts import ChatPromptTemplate

from langchain_ragspine.retrievers.query_transform import MAX_PROMPT_QUERY_CHARS

__all__ = ["ChoicePrompter", "check_choices", "listing"]


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


class ChoicePrompter:
    """The part of both model callers that is the same: the checked ``llm``, the ``choices`` (``{name:
    description}``), the prompt (default :attr:`default_prompt`) and the messages it formats, the choices listed under
    the prompt variable :attr:`listing_key` and the question under ``question``.

    Raises:
        TypeError: ``llm`` is not a ``BaseChatModel``.
        ValueError: ``choices`` is empty (the message is :attr:`empty_message`).
    """

    default_prompt: ClassVar[ChatPromptTemplate]
    listing_key: ClassVar[str]
    empty_message: ClassVar[str]

    def __init__(self, llm: BaseChatModel, choices: Mapping[str, str], prompt: ChatPromptTemplate | None) -> None:
        self.choices = check_choices(llm, choices, self.empty_message)
        self.llm = llm
        self.prompt = prompt or self.default_prompt

    def messages(self, question: str) -> list[Any]:
        """The messages sent to the model; the question is put in cut to
        :data:`~langchain_ragspine.retrievers.query_transform.MAX_PROMPT_QUERY_CHARS` characters (as the query
        transformations do), so a huge query does not make a huge prompt."""
        return self.prompt.format_messages(
            **{self.listing_key: listing(self.choices)}, question=question[:MAX_PROMPT_QUERY_CHARS]
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}({sorted(self.choices)})"
