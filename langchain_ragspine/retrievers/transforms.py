"""The query-transformation factory: a retriever wrapped in the transformation a name asks for
(``RAGSPINE_QUERY_TRANSFORM``, ``--transform``).

Usage::

    from langchain_ragspine.retrievers.transforms import make_query_transform

    make_query_transform("hyde", base, llm="ollama:qwen2.5:7b")   # HyDERetriever(base, the chat model)
    make_query_transform(None, base)                               # RAGSPINE_QUERY_TRANSFORM, else base itself

The names are :data:`~langchain_ragspine.specs.QUERY_TRANSFORMS` (checked by
:func:`~langchain_ragspine.specs.resolve_query_transform`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from langchain_ragspine import chat_models
from langchain_ragspine.retrievers.decomposition import DecompositionRetriever
from langchain_ragspine.retrievers.deny_list import QueryDenyList
from langchain_ragspine.retrievers.glossary import GlossaryRetriever
from langchain_ragspine.retrievers.hyde import HyDERetriever
from langchain_ragspine.retrievers.multi_query import MultiQueryRetriever, RAGFusionRetriever
from langchain_ragspine.retrievers.step_back import StepBackRetriever
from langchain_ragspine.settings import get_settings
from langchain_ragspine.specs import configured_query_transform, resolve_query_transform

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.retrievers import BaseRetriever

__all__ = ["make_query_transform"]


def make_query_transform(
    name: str | None,
    base: BaseRetriever,
    *,
    llm: str | BaseChatModel | None = None,
    glossary: object = None,
    deny_list: object = None,
    **kwargs: object,
) -> BaseRetriever:
    """``base`` wrapped in the query transformation ``name`` (default ``RAGSPINE_QUERY_TRANSFORM``, else
    ``"none"``).

    * ``none`` — ``base`` itself, unchanged.
    * ``hyde`` — :class:`~langchain_ragspine.retrievers.HyDERetriever`; ``multi_query`` —
      :class:`~langchain_ragspine.retrievers.MultiQueryRetriever`; ``rag_fusion`` —
      :class:`~langchain_ragspine.retrievers.RAGFusionRetriever`; ``step_back`` —
      :class:`~langchain_ragspine.retrievers.StepBackRetriever`; ``decompose`` —
      :class:`~langchain_ragspine.retrievers.DecompositionRetriever`.  They need a chat model: ``llm`` (a spec for
      :func:`~langchain_ragspine.chat_models.make_chat_model` or a ``BaseChatModel``; default ``RAGSPINE_LLM``, whose library default is no LLM).
      Without one the transformation is skipped with one warning and the results equal ``base``'s.
    * ``glossary`` — :class:`~langchain_ragspine.retrievers.GlossaryRetriever` over ``glossary`` (a file path, a
      ``Glossary``, or glossary data; default ``RAGSPINE_GLOSSARY``).  No LLM.

    Args:
        name: the transformation (any case; ``-`` for ``_``).
        base: the retriever to wrap.
        llm: the chat model of an LLM transformation (ignored by the others).
        glossary: the ``glossary`` transformation's synonyms.
        deny_list: terms no generated query may mention — a ``QueryDenyList``, a list of terms, or a file
            (:meth:`~langchain_ragspine.retrievers.QueryDenyList.from_file`); default ``RAGSPINE_QUERY_DENY_LIST``,
            else no gate.
        kwargs: fields of the retriever (``k``, ``fetch_k``, ``filter``, ``n_queries``, ``include_original``,
            ``max_queries`` for ``glossary``, ``prompt`` …).

    Raises:
        ValueError: an unknown name (from ``RAGSPINE_QUERY_TRANSFORM``: the message names the variable);
            ``glossary`` without a glossary; a bad chat model spec.
        RagSpineError: a glossary or deny-list file that cannot be read or is malformed (file and line named).
    """
    settings = get_settings()
    key = configured_query_transform(settings) if name is None else resolve_query_transform(name)
    if key == "none":
        return base
    if deny_list is None and settings.query_deny_list is not None:
        deny_list = settings.query_deny_list
    if isinstance(deny_list, (str, os.PathLike)):
        deny_list = QueryDenyList.from_file(Path(deny_list))
    options: dict[str, object] = dict(kwargs)
    if deny_list is not None:
        options["deny_list"] = deny_list
    if key == "glossary":
        glossary = glossary if glossary is not None else settings.glossary
        if glossary is None:
            raise ValueError(
                "the glossary query transformation needs a glossary file: pass glossary= (or --glossary FILE), "
                "or set RAGSPINE_GLOSSARY"
            )
        return GlossaryRetriever(base, glossary=glossary, **options)
    classes = {"hyde": HyDERetriever, "multi_query": MultiQueryRetriever, "rag_fusion": RAGFusionRetriever,
               "step_back": StepBackRetriever, "decompose": DecompositionRetriever}
    model = chat_models.make_chat_model(llm)
    return classes[key](base, model, **options)  # type: ignore[abstract, arg-type]

