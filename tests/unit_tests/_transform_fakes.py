"""Fakes shared by the query-transformation tests: a spy base retriever and a scripted spy chat model."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.retrievers import BaseRetriever
from pydantic import Field

from langchain_ragspine.filters import matches


def doc(cid: str, text: str | None = None, **metadata: Any) -> Document:
    return Document(page_content=text if text is not None else f"text of {cid}", metadata={"chunk_id": cid, **metadata})


class SpyRetriever(BaseRetriever):
    """Returns ``lists[query]`` (else ``default``), filtered and cut to ``k``; records every call."""

    lists: dict[str, list[Document]] = Field(default_factory=dict)
    default: list[Document] = Field(default_factory=list)
    calls: list[tuple[str, int | None, Any]] = Field(default_factory=list)

    def _pick(self, query: str, k: int | None, filter: Mapping[str, Any] | None) -> list[Document]:
        self.calls.append((query, k, dict(filter) if filter else None))
        docs = self.lists.get(query, self.default)
        if filter:
            docs = [d for d in docs if matches(d.metadata, filter)]
        return list(docs if k is None else docs[:k])

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None,
        filter: Mapping[str, Any] | None = None,
    ) -> list[Document]:
        return self._pick(query, k, filter)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, k: int | None = None,
        filter: Mapping[str, Any] | None = None,
    ) -> list[Document]:
        await asyncio.sleep(0)
        return self._pick(query, k, filter)

    @property
    def queries(self) -> list[str]:
        return [q for q, _, _ in self.calls]


class SpyChatModel(BaseChatModel):
    """Answers ``replies`` in turn (the last one repeats); records every prompt; raises ``error`` when set."""

    replies: list[str] = Field(default_factory=lambda: ["ok"])
    prompts: list[str] = Field(default_factory=list)
    error: str | None = None

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:  # type: ignore[no-untyped-def]
        self.prompts.append("\n".join(str(m.content) for m in messages))
        if self.error:
            raise ConnectionError(self.error)
        reply = self.replies[min(len(self.prompts) - 1, len(self.replies) - 1)]
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=reply))])

    @property
    def _llm_type(self) -> str:
        return "spy"
