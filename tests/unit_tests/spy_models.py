"""A spy chat model for tests: records every prompt it is sent and answers a fixed reply (or raises)."""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import Field


class SpyChatModel(BaseChatModel):
    """Records every prompt (its messages joined by newlines) in ``prompts``; answers ``reply``, or raises
    ``ConnectionError(error)`` when ``error`` is set."""

    reply: str = "[2] > [1] > [3]"
    error: str | None = None
    prompts: list[str] = Field(default_factory=list)

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        self.prompts.append("\n".join(str(m.content) for m in messages))
        if self.error:
            raise ConnectionError(self.error)
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=self.reply))])

    @property
    def _llm_type(self) -> str:
        return "spy"
