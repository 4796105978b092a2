"""HyDE: search with a hypothetical answer a chat model writes, never with it as evidence.

Hypothetical Document Embeddings (Gao, Ma, Lin & Callan, "Precise Zero-Shot Dense Retrieval without Relevance
Labels", ACL 2023; arXiv 2212.10496, 2022) asks an instruction-following model to *write a passage that answers the
question*, and searches with that passage instead of the question: a passage resembles the passages that hold the
answer more than the question does, in vocabulary and in embedding space, even when its facts are wrong.  Here the
passage is searched through any base retriever (dense, BM25, hybrid); with ``include_original`` (the default) the
user's question is searched too and the two lists are fused by Reciprocal Rank Fusion
(:class:`~langchain_ragspine.retrievers.query_transform.QueryTransformRetriever`).  LangChain's own
``HypotheticalDocumentEmbedder`` is an ``Embeddings`` wrapper (dense retrieval only, the question is not searched).

**The probe is embedded as a document.**  Gao et al. encode the hypothetical document with the *document* encoder
(LangChain's ``HypotheticalDocumentEmbedder`` calls ``embed_documents`` too): it is written to look like a passage.
So when the base declares the ``embed_as`` call option (:class:`~langchain_ragspine.retrievers.dense.DenseRetriever`,
:class:`~langchain_ragspine.retrievers.postgres.PostgresDenseRetriever`,
:class:`~langchain_ragspine.vectorstores.RagSpineStoreRetriever`, and the wrappers that hand it on to the dense
channel inside them: :class:`~langchain_ragspine.retrievers.hybrid.HybridRetriever`,
:class:`~langchain_ragspine.retrievers.parent_child.ParentChildRetriever`,
:class:`~langchain_ragspine.retrievers.multi_index.MultiIndexRetriever`,
:class:`~langchain_ragspine.retrievers.filter_extraction.FilterExtractionRetriever`), the probe's search passes
``embed_as="document"`` (for e5 models: the ``"passage: "`` prefix instead of ``"query: "``); the user's own
question is embedded as a query, as always.  A LangChain ``VectorStoreRetriever`` base (search type
``similarity`` or ``mmr``) is searched with the probe's document vector through the store's standard by-vector
method; one that cannot be (``similarity_score_threshold``, a store without ``embeddings``) embeds it as a query,
with an :class:`~langchain_ragspine.retrievers.embed_as.EmbedAsIgnoredWarning`.  Any other base (BM25, a foreign
retriever) gets the probe as a plain query, with no extra keyword (see :mod:`~langchain_ragspine.retrievers.embed_as`).

**The hypothetical document is a probe.**  Its facts are invented, so it is never returned, cited, stored, put in
metadata or a trace (the trace shows :data:`~langchain_ragspine.retrievers.query_transform.PROBE_PLACEHOLDER`), or
shown to a grader as evidence: only chunks of the corpus come out.  It leaves the package only as a query to the
base retriever — and, when it mentions a denied term, not even that (the deny-list gate drops it).  A callback
handler attached to the call sees it as the chat model's output, as it sees every model call.
"""

from __future__ import annotations

from typing import Any, ClassVar

from langchain_core.prompts import ChatPromptTemplate
from pydantic import Field, model_validator

from langchain_ragspine.retrievers.contract import Search
from langchain_ragspine.retrievers.embed_as import EMBED_AS_OPTION, embed_as_target
from langchain_ragspine.retrievers.query_transform import (
    PROBE_PLACEHOLDER,
    LLMQueryTransformRetriever,
    QueryPlan,
)
from langchain_ragspine.retrievers.query_variants import is_blank, reply_text, strip_think
from langchain_ragspine.text.folding import fold_query

__all__ = ["HYDE_PROMPT", "HyDERetriever"]

_AS_DOCUMENT = {EMBED_AS_OPTION: "document"}

#: The default HyDE prompt (Gao et al.'s instruction, "write a passage to answer the question", with the language
#: kept and the length bounded for a small model).
HYDE_PROMPT = ChatPromptTemplate.from_messages([
    ("system", "You write short encyclopedia-style passages. Write in the language of the question."),
    ("human", "Please write a passage of two to four sentences that answers the question.\n"
              "Question: {question}\nPassage:"),
])


class HyDERetriever(LLMQueryTransformRetriever):
    """Search ``base`` with a hypothetical answer written by ``llm`` (and, by default, the question); fuse by RRF.

    ``HyDERetriever(base, llm, include_original=True)``.

    Attributes:
        include_original: search the question as well and fuse both lists (default ``True``); ``False`` searches
            the hypothetical document alone (the question alone when none could be written).
        max_chars: the hypothetical document is cut to this many characters before it is searched (default 1000).
        n_queries: always 1 (one hypothetical document is written); another value is a ``TypeError``.
        (and those of :class:`~langchain_ragspine.retrievers.query_transform.LLMQueryTransformRetriever`)

    Results: chunks of the corpus only — at most ``k``, unique by ``chunk_id``, each with a trace entry whose
    ``queries`` are ``[question, "<hypothetical document>"]``.  Without a model: the base's results, unchanged.

    Over a base that declares the ``embed_as`` call option (dense, hybrid, and the parent-child, multi-index and
    filter-extraction wrappers, which hand it on), the hypothetical document is searched with
    ``embed_as="document"`` — embedded by ``embed_documents``, as in Gao et al. — and the question with none
    (``embed_query``); a LangChain ``VectorStoreRetriever`` base is searched by the probe's document vector (see
    the module docstring); any other base gets both as plain queries.
    Example: :class:`~langchain_ragspine.retrievers.query_transform.LLMQueryTransformRetriever`.
    """

    include_original: bool = True
    max_chars: int = Field(default=1000, gt=0)
    n_queries: int = 1

    transform_name: ClassVar[str] = "hyde"
    default_prompt: ClassVar[ChatPromptTemplate] = HYDE_PROMPT

    @model_validator(mode="before")
    @classmethod
    def _one_probe(cls, data: Any) -> Any:
        """``n_queries`` other than 1 is refused: it would be accepted and change nothing."""
        if isinstance(data, dict) and "n_queries" in data and data["n_queries"] != 1:
            raise TypeError(
                f"{cls.__name__} writes one hypothetical document per question, so n_queries={data['n_queries']!r} "
                "would change nothing; leave it out (for several generated queries use MultiQueryRetriever or "
                "RAGFusionRetriever)"
            )
        return data

    def searches_original(self) -> bool:
        """The ``include_original`` field."""
        return self.include_original

    def _searches(self, plan: QueryPlan) -> list[Search]:
        """The base's searches; the probe's (a generated query: planned position >= 1) with
        ``embed_as="document"``, as :func:`~langchain_ragspine.retrievers.embed_as.embed_as_target` hands it on
        (the option for a base that declares it, a document-vector search for a LangChain
        ``VectorStoreRetriever``, nothing for BM25 or a foreign retriever)."""
        searches = super()._searches(plan)
        positions = plan.positions if plan.positions is not None else range(len(plan.queries))
        out: list[Search] = []
        for (r, q, tag, *_), position in zip(searches, positions, strict=True):
            target, options = embed_as_target(r, _AS_DOCUMENT) if position > 0 else (r, {})
            out.append((target, q, tag, options) if options else (target, q, tag))
        return out

    def show(self, generated: str) -> str:
        """The probe is shown as :data:`PROBE_PLACEHOLDER`, never as text."""
        return PROBE_PLACEHOLDER

    def parse(self, reply: Any, query: str) -> list[str]:
        """The hypothetical document: the reply's text without ``<think>`` blocks, whitespace runs collapsed, cut
        to :attr:`max_chars`; ``[]`` when blank (also only zero-width characters) or a restatement of the
        question."""
        text = " ".join(strip_think(reply_text(reply)).split())[: self.max_chars].strip()
        if is_blank(text) or fold_query(text) == fold_query(query):
            return []
        return [text]

    def messages(self, query: str) -> list[Any]:
        """The HyDE prompt for ``query`` (cut to :data:`~langchain_ragspine.retrievers.query_transform.
        MAX_PROMPT_QUERY_CHARS` characters)."""
        return self._format(query, 1)

