"""Any retriever behind the retriever-call contract, as a retriever of the package: ``k``, ``filter``, the RESTRICTED
gate, and a trace that shows only what the gate let through.

LangChain's own wrappers (``ContextualCompressionRetriever``, ``EnsembleRetriever``, ``MultiQueryRetriever``) run
their base retriever as a child run with the caller's callbacks, so its whole answer — RESTRICTED documents
included — reaches LangSmith and ``astream_events`` before any gate.  :class:`GatedRetriever` in between runs the
base through :func:`~langchain_ragspine.retrievers.contract.invoke_retriever`: a retriever that is not this
package's runs untraced and the contract reports the gated result in its place (see
:mod:`langchain_ragspine.retrievers.contract`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import field_validator

from langchain_ragspine.arguments import OptionalPositiveIntField
from langchain_ragspine.retrievers.base import AsyncCall, ContractRetriever, SyncCall
from langchain_ragspine.retrievers.contract import ainvoke_retriever, invoke_retriever, retriever_params
from langchain_ragspine.served import ServedIds, served_ids

__all__ = ["GatedRetriever"]


class GatedRetriever(ContractRetriever):
    """``GatedRetriever(retriever=any_retriever)``: ``invoke(query, k=…, filter=…)`` / ``ainvoke`` ask ``retriever``
    through the retriever-call contract and return its answer without RESTRICTED documents.

    Args:
        retriever: any ``BaseRetriever`` (a LangChain ``VectorStoreRetriever``, another library's retriever).
        k: results when a call gives none (default ``None``: as many as ``retriever`` returns by default).

    Raises:
        TypeError: ``retriever`` is not a ``BaseRetriever``; ``k`` is not an int; an unknown keyword argument of a
            call.
        ValueError: ``k < 1``.

    A call asks ``retriever`` for ``k`` results matching ``filter`` as :func:`~langchain_ragspine.retrievers.
    contract.invoke_retriever` does (a filter it cannot take is applied to its results, over-fetching; RESTRICTED
    documents removed before the cut to ``k``).  Its trace is a run of this class with one child: ``retriever``'s
    own run when it is one of this package's gated retrievers, else the run the contract reports in its place
    (same name, the gated result as its output), ``retriever`` itself running with no callbacks.

    Example:
        >>> from langchain_core.documents import Document
        >>> from langchain_core.vectorstores import InMemoryVectorStore
        >>> from langchain_ragspine.embeddings import HashingEmbeddings
        >>> store = InMemoryVectorStore(HashingEmbeddings(64))
        >>> _ = store.add_documents([Document(page_content="梅雨 RESTRICTED", metadata={"sensitivity": "RESTRICTED"}),
        ...                          Document(page_content="梅雨 public")])
        >>> [d.page_content for d in GatedRetriever(retriever=store.as_retriever()).invoke("梅雨")]
        ['梅雨 public']
    """

    retriever: BaseRetriever
    k: OptionalPositiveIntField = None

    @field_validator("retriever", mode="before")
    @classmethod
    def _check_retriever(cls, value: Any) -> Any:
        retriever_params(value)  # the contract's TypeError for anything that is not a BaseRetriever
        return value

    def served_ids(self, ids: Sequence[str]) -> ServedIds | None:
        """Which of ``ids`` this retriever would still return (:mod:`~langchain_ragspine.served`): what its
        ``retriever`` answers (it returns only documents ``retriever`` returned); ``None`` when that cannot tell."""
        return served_ids(self.retriever, ids)

    def _retrieve(self, query: str, call: SyncCall) -> list[Document]:
        return invoke_retriever(self.retriever, query, k=call.k, filter=call.filter, config=call.child("gated"))

    async def _aretrieve(self, query: str, call: AsyncCall) -> list[Document]:
        return await ainvoke_retriever(self.retriever, query, k=call.k, filter=call.filter,
                                       config=call.child("gated"))
