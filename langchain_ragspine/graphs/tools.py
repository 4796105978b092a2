"""A graph as a compact tool for agents: the cited answer as the tool message, the cited passages as its artifact.

``graph.as_tool()`` hands an agent the repr of the whole output dict — passages, scores and trace, thousands of
characters a model must read through.  :func:`make_answer_tool` gives it what LangChain's
``create_retriever_tool(..., response_format="content_and_artifact")`` gives for a retriever: a ``BaseTool`` whose
``ToolMessage.content`` is the answer with its numbered sources, and whose ``ToolMessage.artifact`` is the cited
``Document``s, for the application (not the model) to render.  Neither ever holds a RESTRICTED chunk.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field, field_validator

from langchain_ragspine.document_compressors.restricted import drop_restricted, is_restricted
from langchain_ragspine.filters import compile_filter

__all__ = ["DEFAULT_TOOL_DESCRIPTION", "AnswerToolInput", "format_sources", "make_answer_tool"]

#: The default description of :func:`make_answer_tool`'s tool (what the agent's model reads to decide to call it).
DEFAULT_TOOL_DESCRIPTION = (
    "Answer a question from the indexed documents. Input: one self-contained question (no pronouns that point into "
    "the conversation). Returns the answer with numbered sources [n], or says the documents do not support an answer."
)


class AnswerToolInput(BaseModel):
    """The arguments of :func:`make_answer_tool`'s tool: ``question``, a non-blank string (passed on unchanged).

    A missing, non-string, empty or whitespace-only question is a ``pydantic.ValidationError`` naming ``question``,
    so an agent's ``ToolNode`` hands it back to the model as an error ``ToolMessage`` it can retry, instead of the
    graph's ``ValueError`` ending the agent's run.
    """

    question: str = Field(
        min_length=1, description="A self-contained question, in the language of the documents or the user."
    )

    @field_validator("question")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the question must not be blank (only whitespace)")
        return value


def format_sources(citations: Sequence[Mapping[str, Any]]) -> str:
    """The sources block of a tool answer, one line per citation: ``[n] title — source_locator (chunk chunk_id)``
    (a missing title falls back to ``doc_id``, a missing locator or chunk id is left out); ``""`` for none."""
    lines = []
    for c in citations:
        line = f"[{c.get('n')}] {c.get('title') or c.get('doc_id') or 'untitled'}"
        if c.get("source_locator"):
            line += f" — {c['source_locator']}"
        if c.get("chunk_id"):
            line += f" (chunk {c['chunk_id']})"
        lines.append(line)
    return "\n".join(lines)


def _content_and_artifact(out: Any) -> tuple[str, list[Document]]:
    if not isinstance(out, Mapping) or not isinstance(out.get("answer"), str):
        raise TypeError(f"make_answer_tool needs a graph that returns {{'answer': str, ...}}, got {type(out).__name__}")
    documents = [d for d in out.get("documents") or [] if isinstance(d, Document)]
    citations = [c for c in out.get("citations") or [] if 1 <= int(c.get("n", 0)) <= len(documents)]
    cited = [c for c in citations if not is_restricted(documents[int(c["n"]) - 1])]
    artifact = drop_restricted([documents[int(c["n"]) - 1] for c in cited])
    sources = format_sources(cited)
    content = f"{out['answer']}\n\nSources:\n{sources}" if sources else out["answer"]
    return content, artifact


#: A tool name chat models' tool calling accepts (OpenAI's and Anthropic's rule).
_TOOL_NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")


def make_answer_tool(
    graph: Runnable[Any, Any],
    name: str = "search_documents",
    description: str = DEFAULT_TOOL_DESCRIPTION,
    *,
    filters: Mapping[str, Any] | None = None,
) -> BaseTool:
    """A ``BaseTool`` that asks ``graph`` a question and returns the cited answer compactly (for
    ``langchain.agents.create_agent``, LangGraph's ``create_react_agent``, ``model.bind_tools``)::

        from langchain.agents import create_agent
        tool = make_answer_tool(build_corrective_rag(retriever, llm), name="search_handbook",
                                description="Answer questions about the employee handbook.")
        agent = create_agent(llm, [tool])

    The tool takes one argument, ``question`` (:class:`AnswerToolInput`), runs
    ``graph.invoke({"question": question})`` (with ``filters`` when given) and answers with
    ``response_format="content_and_artifact"``: the content is the graph's ``answer`` followed by a
    ``Sources:`` block (:func:`format_sources`: ``[n] title — locator (chunk id)`` for each citation; none for a
    refusal), the artifact the cited ``Document``s in citation order.  RESTRICTED chunks are in neither (the graph
    gates them; the tool drops any that would still be labelled so).  Sync and async (``ainvoke`` runs
    ``graph.ainvoke``); callbacks and tracing go through the tool's run.  On an agent's checkpointed thread, the
    artifacts of earlier turns come back from the checkpoint as plain dicts (``{"id", "metadata",
    "page_content"}``), as for any ``ToolMessage.artifact``.

    Args:
        graph: a graph of :mod:`langchain_ragspine.graphs` (any ``Runnable`` taking ``{"question": str}`` and
            returning ``answer``, ``citations``, ``documents``).
        name: the tool's name (default ``"search_documents"``).
        description: what the agent's model reads (default :data:`DEFAULT_TOOL_DESCRIPTION`).
        filters: a metadata filter every call of the tool passes (default ``None``; ANDed with the retriever's
            own, never widened — the model cannot change it).

    Raises:
        TypeError: ``graph`` is not a ``Runnable``, or is a retriever; ``name`` is not a string; (at call) the graph's output is not an answer dict.
        pydantic.ValidationError: (at call) ``question`` is missing, not a string, empty or blank (in an agent,
            returned to the model as an error ``ToolMessage``; see :class:`AnswerToolInput`).
        ValueError: a malformed ``filters``; a ``name`` that is not 1-64 letters, digits, ``_`` or ``-``.

    Example:
        >>> from langchain_core.documents import Document
        >>> from langchain_ragspine.graphs import build_corrective_rag
        >>> from langchain_ragspine.retrievers import BM25Retriever
        >>> docs = [Document("Hokkaido has no rainy season.", metadata={"chunk_id": "rain#0", "doc_id": "rain",
        ...         "title": "Rainy season", "source_locator": "rain.md#0-29"})]
        >>> tool = make_answer_tool(build_corrective_rag(BM25Retriever.from_documents(docs)))
        >>> print(tool.invoke({"question": "Which region has no rainy season?"}))
        Hokkaido has no rainy season. [1]
        <BLANKLINE>
        Sources:
        [1] Rainy season — rain.md#0-29 (chunk rain#0)
        >>> message = tool.invoke({"type": "tool_call", "id": "1", "name": tool.name,
        ...                        "args": {"question": "Which region has no rainy season?"}})
        >>> [d.id for d in message.artifact]
        ['rain#0']
    """
    if not isinstance(graph, Runnable):
        raise TypeError(f"graph must be a Runnable (a compiled graph), got {type(graph).__name__}")
    if isinstance(graph, BaseRetriever):
        raise TypeError(
            f"graph must be an answering graph (e.g. build_corrective_rag(retriever)), got the retriever "
            f"{type(graph).__name__}: a retriever returns documents, not an answer; for a retriever tool use "
            "langchain_core.tools.create_retriever_tool"
        )
    if not isinstance(name, str):
        raise TypeError(f"name must be a string, got {type(name).__name__}")
    if not _TOOL_NAME_RE.fullmatch(name):
        raise ValueError(
            f"name must be 1-64 letters, digits, '_' or '-' (what chat models' tool calling accepts), got {name!r}"
        )
    if filters is not None and not isinstance(filters, Mapping):
        raise ValueError(f"filters must be a dict or None, got {filters!r}")
    compile_filter(dict(filters) if filters else None)
    fixed = {"filters": dict(filters)} if filters else {}

    def answer(question: str) -> tuple[str, list[Document]]:
        return _content_and_artifact(graph.invoke({"question": question, **fixed}))

    async def aanswer(question: str) -> tuple[str, list[Document]]:
        return _content_and_artifact(await graph.ainvoke({"question": question, **fixed}))

    return StructuredTool.from_function(
        func=answer, coroutine=aanswer, name=name, description=description, args_schema=AnswerToolInput,
        response_format="content_and_artifact",
    )
