"""Query transformations: search a base retriever with several queries derived from the user's and fuse the lists.

The machinery every transformation shares — HyDE (:mod:`~langchain_ragspine.retrievers.hyde`), multi-query and
RAG-Fusion (:mod:`~langchain_ragspine.retrievers.multi_query`), step-back (:mod:`~langchain_ragspine.retrievers.step_back`),
decomposition (:mod:`~langchain_ragspine.retrievers.decomposition`) and glossary expansion
(:mod:`~langchain_ragspine.retrievers.glossary`):

1. **Plan.**  A subclass generates queries (an LLM call, or a glossary lookup); the user's query comes first.
2. **Gate.**  Every *generated* query passes the deny-list (:class:`~langchain_ragspine.retrievers.deny_list.QueryDenyList`):
   one that mentions a denied term is dropped before it is searched, and the drop is recorded (position and term
   index, never the text).
3. **Search.**  Each remaining query goes to the base retriever through the package's retriever-call contract
   (:func:`~langchain_ragspine.retrievers.contract.invoke_retriever`), with the call's ``k`` (or ``fetch_k``) and
   ``filter`` — the call's filter ANDed with the wrapper's own, so a transformation can only narrow what its base
   would return.  ``ainvoke`` searches the queries concurrently.
4. **Fuse.**  The ranked lists are fused by Reciprocal Rank Fusion (Cormack, Clarke & Büttcher, SIGIR 2009; ``c =
   60``), as RAG-Fusion does (Raudaschl, "Forget RAG, the Future is RAG-Fusion", 2023), with
   :func:`~langchain_ragspine.retrievers.hybrid.fuse`: results are unique by ``chunk_id`` (else ``Document.id``) and
   RESTRICTED chunks never come out (also when a single query was searched).  Ties break by the order of the
   queries — the user's query first, then the generated ones as the model wrote them — then by rank, then by
   ``chunk_id`` (``fuse(..., ties="lists")``): a chunk the user's own query found wins a tie against one only a
   generated query found.  Each query is searched to the same depth, ``max(k, fetch_k)``, so for every ``k`` up
   to ``fetch_k`` the fused ranking is the same and ``k`` only cuts it: results are prefix-stable across ``k``
   (``invoke(q, k=3)`` is the first three of ``invoke(q, k=5)`` when ``fetch_k >= 5``).  With the default
   ``fetch_k`` (``None``: the depth is ``k``) a larger ``k`` searches deeper, and RRF may then reorder the top.
   Without ``k`` each query is searched with the base's default and the fused list is cut to the longest list
   searched — the base's default number of results, so a call without ``k`` equals one with ``k`` set to it.

Every returned document carries a trace entry appended to ``metadata["query_transform"]`` (a list, one entry per
transformation it passed through)::

    {"transform": "multi_query", "queries": ["<user query>", "<variant 2>", "<variant 3>"], "positions": [0, 2, 3],
     "matched": [0, 2], "dropped": [{"position": 1, "term": 0, "reason": "deny_list"}], "llm_calls": 1,
     "fallback": None}

Positions count the *planned* queries: 0 is the user's query, the generated ones count from 1 in the order the model
wrote them, before the deny-list gate.  ``queries`` are the queries searched and ``positions`` the planned position
of each (here variant 1 was dropped, so the second query searched is variant 2); ``dropped[].position`` is in the
same numbering.  ``matched`` lists the indices *in* ``queries`` of the queries that found the document (here the
user's query and variant 3).  ``fallback`` says why
fewer queries than planned were searched: ``"llm_error"`` (the model failed; the user's query alone is searched),
``"no_variants"`` (nothing usable was generated, or the deny-list dropped it all), ``"empty_query"`` (the query is
blank — empty, whitespace, or only invisible characters such as a zero-width space: nothing to transform, the model
is not called).  HyDE's hypothetical document
appears in the trace only as the placeholder :data:`PROBE_PLACEHOLDER`: it is a probe, never evidence.

**Off means unchanged.**  A transformation that needs an LLM and has none (``llm=None``) warns once, when it is
built (:class:`QueryTransformSkippedWarning`), and every call returns exactly what the base retriever returns for
the same ``k`` and ``filter`` — no fusion, no trace.  So does a call whose query is blank (empty, whitespace, or
only zero-width and other invisible characters), with or without a model: there is nothing to transform, so no
model is called.  When the model fails at run time the user's query is searched
alone (the results are the base's, with a trace entry saying ``"llm_error"``); LLM failures degrade, they never
raise.
"""

from __future__ import annotations

import asyncio
import logging
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar

import langchain_core
import pydantic
from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.prompts import BasePromptTemplate, ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig
from pydantic import ConfigDict, Field, field_validator

from langchain_ragspine._stacklevel import user_stacklevel
from langchain_ragspine.arguments import OptionalPositiveIntField, check_int, check_k, int_field
from langchain_ragspine.documents import doc_key
from langchain_ragspine.filters import CompiledFilter, FilterField, compile_filter, compiled_filter
from langchain_ragspine.retrievers.base import AsyncCall, ContractRetriever, RetrieverCall, SyncCall
from langchain_ragspine.retrievers.contract import (
    Search,
    ainvoke_retriever,
    asearch_each,
    child_config,
    invoke_retriever,
    search_each,
)
from langchain_ragspine.retrievers.deny_list import DeniedQuery, QueryDenyList
from langchain_ragspine.retrievers.hybrid import DEFAULT_C, fuse
from langchain_ragspine.retrievers.query_variants import is_blank, parse_query_variants
from langchain_ragspine.sensitivity import drop_restricted
from langchain_ragspine.served import ServedIds, served_ids

__all__ = [
    "MAX_PROMPT_QUERY_CHARS",
    "PROBE_PLACEHOLDER",
    "TRACE_KEY",
    "add_trace_entry",
    "call_params",
    "child_config",
    "LLMQueryTransformRetriever",
    "QueryPlan",
    "QueryTransformRetriever",
    "QueryTransformSkippedWarning",
]

logger = logging.getLogger(__name__)

#: The metadata key of the trace every transformation appends to.
TRACE_KEY = "query_transform"
#: What a trace shows in place of generated text that is only a probe (HyDE's hypothetical document).
PROBE_PLACEHOLDER = "<hypothetical document>"
#: The most characters of the user's query a transformation puts into its prompt (the rest is cut off; the search
#: of the user's own query is never cut).  The same bound as HyDE's probe (``HyDERetriever.max_chars``, 1000).
MAX_PROMPT_QUERY_CHARS = 1000
#: The variables a transformation's prompt may take: ``question`` (required) and ``n``.
PROMPT_VARIABLES = ("question", "n")

# A warning about how a transformation was built names the first frame outside the package, pydantic (which runs
# model_post_init) and langchain_core (whose Serializable.__init__ stands between) — the user's line.
_LIBRARIES = (pydantic, langchain_core)


class QueryTransformSkippedWarning(UserWarning):
    """An LLM query transformation was built without a chat model: it passes every call to its base retriever."""


@dataclass
class QueryPlan:
    """The queries one call searches, and what happened to the others.

    Attributes:
        transform: the transformation's name (``"hyde"``, ``"multi_query"``, …).
        queries: the queries searched, in order; the user's query first unless the transformation leaves it out
            (HyDE with ``include_original=False``).
        shown: what the trace shows for each query (the query itself, or :data:`PROBE_PLACEHOLDER`); the trace cuts
            a query longer than :data:`MAX_PROMPT_QUERY_CHARS` there and marks the cut with ``…``.
        dropped: generated queries the deny-list removed (their ``position`` in the planned numbering).
        positions: the planned position of each query in ``queries`` (0: the user's query; generated queries from 1,
            in the model's order, before the deny-list); ``None``: ``0, 1, 2, …``.
        llm_calls: chat-model calls made to plan.
        fallback: ``None``, ``"llm_error"``, ``"no_variants"`` or ``"empty_query"`` (see the module docstring).
    """

    transform: str
    queries: list[str]
    shown: list[str]
    dropped: list[DeniedQuery] = field(default_factory=list)
    llm_calls: int = 0
    fallback: str | None = None
    positions: list[int] | None = None

    def trace(self, matched: Sequence[int] = ()) -> dict[str, Any]:
        """The trace entry (JSON-safe) for a document found by the queries at indices ``matched`` of ``queries``
        (see the module docstring)."""
        return {
            "transform": self.transform,
            # a query longer than the prompt cap is shown cut (with "…"): every result carries this trace
            "queries": [q if len(q) <= MAX_PROMPT_QUERY_CHARS else q[:MAX_PROMPT_QUERY_CHARS] + "…" for q in self.shown],
            "positions": list(self.positions) if self.positions is not None else list(range(len(self.queries))),
            "matched": list(matched),
            "dropped": [d.record() for d in self.dropped],
            "llm_calls": self.llm_calls,
            "fallback": self.fallback,
        }


def add_trace_entry(doc: Document, entry: Mapping[str, Any]) -> Document:
    """A copy of ``doc`` with ``entry`` appended to its ``metadata["query_transform"]`` list."""
    md = dict(doc.metadata)
    previous = md.get(TRACE_KEY)
    md[TRACE_KEY] = [*(previous if isinstance(previous, list) else []), dict(entry)]
    return Document(page_content=doc.page_content, metadata=md, id=doc.id)


def call_params(
    own_k: int | None,
    fetch_k: int | None,
    own_filter: Mapping[str, Any] | None,
    k: int | None,
    filter: Mapping[str, Any] | None,
) -> tuple[int | None, int | None, CompiledFilter | None]:
    """``(k, depth, filter)`` of one call to a wrapper retriever, for a retriever that is not a
    :class:`~langchain_ragspine.retrievers.base.ContractRetriever` (whose base class resolves ``k`` and the filter
    itself, :class:`~langchain_ragspine.retrievers.base.RetrieverCall`, and ``call.depth(fetch_k)`` is the depth).

    ``k`` is the call's (checked), else the wrapper's ``own_k`` (``None``: the inner retrievers' defaults); ``depth``
    — what each inner search asks for — is ``max(k, fetch_k)`` (``None`` when ``k`` is); the filter is the
    wrapper's ANDed with the call's, compiled once (:func:`~langchain_ragspine.filters.compiled_filter`: the call's
    filter comes compiled, and every inner search reuses the result).

    Raises:
        TypeError, ValueError: a bad ``k``; a malformed filter.
    """
    k = own_k if k is None else check_k(k)
    flt = compiled_filter(own_filter, filter)
    return k, None if k is None else max(k, fetch_k or k), flt


class QueryTransformRetriever(ContractRetriever):
    """Base class of the query transformations: plan queries, gate them, search the base with each, fuse by RRF.

    Subclasses implement :meth:`generate` (and :meth:`agenerate` when they call a model) and set
    :attr:`transform_name`.

    Attributes:
        base: the retriever searched (any ``BaseRetriever``; called through the retriever-call contract).
        k: results per call (an ``int >= 1``; ``invoke(query, k=…)`` overrides it).  ``None`` (default): the base's
            own default — each query is searched with no ``k`` (``fetch_k`` is not used) and the fused list is
            cut to the longest of the lists fused.
        fetch_k: results asked of the base per query when ``k`` is known: ``max(k, fetch_k)``.  Default
            ``None``: ``k`` itself.  A larger value lets RRF see deeper into each list, and makes results
            prefix-stable for every ``k <= fetch_k`` (see the module docstring); it costs a deeper search of
            the base per query.  ``candidate_k`` is its old name (deprecated: a ``DeprecationWarning``; removed in
            the next release).
        filter: the wrapper's own metadata filter, ANDed with a call's ``filter`` (and with the base's own, which
            the base applies): a call can narrow, never widen.
        deny_list: terms a generated query must not mention (:class:`QueryDenyList`, or a list of terms);
            ``None``: no gate.
        c: the RRF constant (default 60).

    Raises:
        TypeError: ``base`` is not a ``BaseRetriever``; ``k`` / ``fetch_k`` / ``c`` not an int; an unknown
            keyword argument to ``invoke``.
        ValueError: ``k`` / ``fetch_k`` < 1; ``c < 0``; a malformed filter.
    """

    base: BaseRetriever
    k: OptionalPositiveIntField = None
    fetch_k: OptionalPositiveIntField = None
    filter: FilterField = None
    deny_list: QueryDenyList | None = None
    c: Annotated[int, int_field(minimum=0)] = DEFAULT_C

    model_config = ConfigDict(arbitrary_types_allowed=True)

    #: ``candidate_k``: the old name of ``fetch_k``, for one release.
    renamed_arguments: ClassVar[tuple[str, ...]] = ("candidate_k",)

    #: The transformation's name in traces and in :data:`~langchain_ragspine.specs.QUERY_TRANSFORMS`.
    transform_name: ClassVar[str] = "transform"

    def __init__(self, base: BaseRetriever | None = None, /, **data: Any) -> None:
        if base is not None:
            data["base"] = base
        elif "retriever" in data:  # LangChain's MultiQueryRetriever names its base `retriever`
            data["base"] = data.pop("retriever")
        if not isinstance(data.get("base"), BaseRetriever):
            raise TypeError(f"base must be a langchain_core BaseRetriever, got {type(data.get('base')).__name__}")
        super().__init__(**data)

    @field_validator("deny_list", mode="before")
    @classmethod
    def _deny_list(cls, value: Any) -> QueryDenyList | None:
        if value is None or isinstance(value, QueryDenyList):
            return value
        return QueryDenyList(value)

    def model_post_init(self, context: Any, /) -> None:
        """Validate the parameters (see the class docstring)."""
        if not isinstance(self.base, BaseRetriever):
            raise TypeError(f"base must be a langchain_core BaseRetriever, got {type(self.base).__name__}")
        check_int(self.c, "c", minimum=0)
        compile_filter(self.filter)

    # -- planning (subclasses) ----------------------------------------------------------------------------------------
    @property
    def active(self) -> bool:
        """Whether the transformation runs (an LLM transformation without a model does not)."""
        return True

    def generate(self, query: str, config: RunnableConfig | None = None) -> tuple[list[str], int]:
        """``(generated queries, model calls)`` for ``query`` — without the user's query.  Raise to signal a
        failed model call (the plan then falls back to the user's query)."""
        raise NotImplementedError

    async def agenerate(self, query: str, config: RunnableConfig | None = None) -> tuple[list[str], int]:
        """Async :meth:`generate` (default: the sync one in a worker thread)."""
        return await asyncio.to_thread(self.generate, query, config)

    def searches_original(self) -> bool:
        """Whether the user's query is searched too (it always is, except for HyDE with ``include_original=False``
        when a probe was generated)."""
        return True

    def show(self, generated: str) -> str:
        """How a generated query appears in the trace (itself; HyDE's probe as :data:`PROBE_PLACEHOLDER`)."""
        return generated

    def _make_plan(self, query: str, generated: list[str] | None, calls: int) -> QueryPlan:
        if generated is None:
            return QueryPlan(self.transform_name, [query], [query], llm_calls=calls, fallback="llm_error")
        dropped: list[DeniedQuery] = []
        if self.deny_list:
            generated, dropped = self.deny_list.split(generated, first=1)
        if not generated:
            return QueryPlan(self.transform_name, [query], [query], dropped, calls, "no_variants")
        gone = {d.position for d in dropped}
        kept_positions = [p for p in range(1, len(generated) + len(dropped) + 1) if p not in gone]
        lead = [query] if self.searches_original() else []
        return QueryPlan(
            self.transform_name, lead + generated, lead + [self.show(g) for g in generated], dropped, calls,
            positions=[0] * len(lead) + kept_positions,
        )

    def _blank_plan(self, query: str) -> QueryPlan | None:
        """The plan of a blank ``query`` — empty, or only whitespace and invisible characters such as a zero-width
        space (:func:`~langchain_ragspine.retrievers.query_variants.is_blank`) — (itself alone, no model call), else
        ``None``."""
        if not is_blank(query):
            return None
        return QueryPlan(self.transform_name, [query], [query], fallback="empty_query")

    def plan(self, query: str, config: RunnableConfig | None = None) -> QueryPlan:
        """The queries a call with ``query`` would search (this makes the model call, except for an empty or
        whitespace-only ``query``; nothing is searched).  Graphs use it to show or answer the generated queries
        separately."""
        blank = self._blank_plan(query)
        if blank is not None:
            return blank
        try:
            generated, calls = self.generate(query, config)
        except Exception as e:  # noqa: BLE001 - LLM failures degrade to the user's query
            logger.warning("%s: query generation failed, searching the query alone: %s", self.transform_name, e)
            return self._make_plan(query, None, 1)
        return self._make_plan(query, generated, calls)

    async def aplan(self, query: str, config: RunnableConfig | None = None) -> QueryPlan:
        """Async :meth:`plan`."""
        blank = self._blank_plan(query)
        if blank is not None:
            return blank
        try:
            generated, calls = await self.agenerate(query, config)
        except Exception as e:  # noqa: BLE001
            logger.warning("%s: query generation failed, searching the query alone: %s", self.transform_name, e)
            return self._make_plan(query, None, 1)
        return self._make_plan(query, generated, calls)

    # -- retrieval ----------------------------------------------------------------------------------------------------
    def _params(self, call: RetrieverCall[Any]) -> tuple[int | None, int | None, CompiledFilter | None]:
        """``(k, depth per query, combined filter)`` of a call (``k`` and the filter as the base resolved them)."""
        return call.k, call.depth(self.fetch_k), call.filter

    def _searches(self, plan: QueryPlan) -> list[Search]:
        """One search of the base per planned query, traced as ``query_{i}`` (HyDE adds a call option to its
        probe's search)."""
        return [(self.base, q, f"query_{i}") for i, q in enumerate(plan.queries)]

    @staticmethod
    def _depth(plan: QueryPlan, k: int | None, depth: int | None) -> int | None:
        """What each search asks for: ``k`` for a single query (nothing to fuse), else the candidate depth."""
        return k if len(plan.queries) == 1 else depth

    def _finish(
        self, query: str, plan: QueryPlan, lists: Sequence[list[Document]], k: int | None
    ) -> list[Document]:
        if len(plan.queries) == 1:  # nothing to fuse; the RESTRICTED gate still runs (fuse applies it otherwise)
            docs = drop_restricted(lists[0])
            docs = docs if k is None else docs[:k]
            entry = plan.trace([0])
            return [add_trace_entry(d, entry) for d in docs]
        limit = k if k is not None else max((len(x) for x in lists), default=0)
        if limit == 0:
            return []
        fused = fuse(list(lists), k=limit, c=self.c, ties="lists")
        found: dict[str, list[int]] = {}
        for pos, docs in enumerate(lists):
            for d in docs:
                key = doc_key(d)
                if key is not None and pos not in found.setdefault(key, []):
                    found[key].append(pos)
        return [add_trace_entry(d, plan.trace(found.get(doc_key(d) or "", []))) for d in fused]

    def served_ids(self, ids: Sequence[str]) -> ServedIds | None:
        """Which of ``ids`` this retriever would still return (:mod:`~langchain_ragspine.served`): what its
        ``base`` answers (it returns only documents ``base`` returned); ``None`` when that cannot tell."""
        return served_ids(self.base, ids)

    def _retrieve(self, query: str, call: SyncCall) -> list[Document]:
        k, depth, flt = self._params(call)
        if not self.active or is_blank(query):  # no model, or nothing to transform: the base's results
            return invoke_retriever(self.base, query, k=k, filter=flt, config=call.child("base"))
        plan = self.plan(query, call.child("plan"))
        lists = search_each(self._searches(plan), k=self._depth(plan, k, depth), filter=flt, run_manager=call.run_manager)
        return self._finish(query, plan, lists, k)

    async def _aretrieve(self, query: str, call: AsyncCall) -> list[Document]:
        k, depth, flt = self._params(call)
        if not self.active or is_blank(query):
            return await ainvoke_retriever(self.base, query, k=k, filter=flt, config=call.child("base"))
        plan = await self.aplan(query, call.child("plan"))
        lists = await asearch_each(self._searches(plan), k=self._depth(plan, k, depth), filter=flt,
                                   run_manager=call.run_manager)
        return self._finish(query, plan, lists, k)


def check_prompt_variables(prompt: BasePromptTemplate, owner: str) -> None:
    """Check that ``prompt`` takes the variable ``question`` and no other than :data:`PROMPT_VARIABLES`.

    Raises:
        TypeError: ``prompt`` is not a ``BasePromptTemplate``.
        ValueError: ``question`` is missing, or there are unknown variables (both named in the message).
    """
    if not isinstance(prompt, BasePromptTemplate):
        raise TypeError(f"{owner}: prompt must be a langchain_core prompt template, got {type(prompt).__name__}")
    variables = set(prompt.input_variables)
    missing = [] if "question" in variables else ["question"]
    unknown = sorted(variables - set(PROMPT_VARIABLES))
    if missing or unknown:
        raise ValueError(
            f"{owner}: the prompt must take the variable 'question' and may take 'n' (the number of queries); "
            f"missing {missing}, unknown {unknown} (fill other variables with prompt.partial(...))"
        )


class LLMQueryTransformRetriever(QueryTransformRetriever):
    """A query transformation whose queries a chat model writes.

    Attributes:
        llm: the chat model (any ``BaseChatModel``), or ``None``: the transformation is skipped — one
            :class:`QueryTransformSkippedWarning` when built, and every call returns the base's results unchanged.
        prompt: a prompt template (a ``ChatPromptTemplate``, or any ``BasePromptTemplate`` such as LangChain's
            ``PromptTemplate``) that takes the variable ``question`` and may take ``n`` (the number of queries
            wanted); default: the subclass's :attr:`default_prompt`.  The question is put in cut to
            :data:`MAX_PROMPT_QUERY_CHARS` characters.
        n_queries: how many queries the model is asked for, and the most that are used (the user's query is added
            to them).

    The subclasses — :class:`~langchain_ragspine.retrievers.hyde.HyDERetriever`,
    :class:`~langchain_ragspine.retrievers.multi_query.MultiQueryRetriever`,
    :class:`~langchain_ragspine.retrievers.multi_query.RAGFusionRetriever`,
    :class:`~langchain_ragspine.retrievers.step_back.StepBackRetriever` and
    :class:`~langchain_ragspine.retrievers.decomposition.DecompositionRetriever` — are built alike,
    ``Cls(base, llm, **fields)``, and differ in the prompt and in how the reply becomes queries.

    Example (a fake chat model stands in for the LLM):
        >>> from langchain_core.documents import Document
        >>> from langchain_core.language_models import FakeListChatModel
        >>> from langchain_ragspine import BM25Retriever
        >>> from langchain_ragspine.retrievers import (DecompositionRetriever, HyDERetriever, MultiQueryRetriever,
        ...                                            RAGFusionRetriever, StepBackRetriever)
        >>> base = BM25Retriever.from_documents([
        ...     Document(page_content="梅雨は六月から七月にかけて続く雨の季節。", metadata={"chunk_id": "tsuyu#0"}),
        ...     Document(page_content="The rainy season in Japan is called tsuyu.", metadata={"chunk_id": "en#0"}),
        ...     Document(page_content="日本の気候には四季がある。", metadata={"chunk_id": "climate#0"}),
        ...     Document(page_content="北京是中国的首都。", metadata={"chunk_id": "beijing#0"}),
        ... ])
        >>> def llm(reply: str) -> FakeListChatModel:
        ...     return FakeListChatModel(responses=[reply])
        >>> hyde = HyDERetriever(base, llm("梅雨は毎年六月ごろに始まる長雨の季節です。"), k=1)
        >>> [(d.metadata["chunk_id"], d.metadata["query_transform"][0]["queries"]) for d in hyde.invoke("梅雨はいつ？")]
        [('tsuyu#0', ['梅雨はいつ？', '<hypothetical document>'])]
        >>> multi_query = MultiQueryRetriever(base, llm("1. rainy season Japan\\n2. tsuyu"), k=2)
        >>> sorted(d.metadata["chunk_id"] for d in multi_query.invoke("梅雨はいつ？"))
        ['en#0', 'tsuyu#0']
        >>> [d.metadata["chunk_id"] for d in RAGFusionRetriever(base, llm("中国首都\\n北京")).invoke("首都")]
        ['beijing#0']
        >>> step_back = StepBackRetriever(base, llm("日本の気候の特徴は？"), k=2)
        >>> sorted(d.metadata["chunk_id"] for d in step_back.invoke("梅雨はいつ？"))  # one found by each query
        ['climate#0', 'tsuyu#0']
        >>> DecompositionRetriever(base, llm("東京の人口は？\\n大阪の人口は？")).decompose("東京と大阪の人口の差は？")
        ['東京の人口は？', '大阪の人口は？']
    """

    llm: BaseChatModel | None = None
    prompt: BasePromptTemplate | None = None
    n_queries: int = Field(default=3)

    #: The prompt used when ``prompt`` is not given.
    default_prompt: ClassVar[ChatPromptTemplate]

    def __init__(self, base: BaseRetriever | None = None, llm: BaseChatModel | None = None, /, **data: Any) -> None:
        if llm is not None:
            data["llm"] = llm
        if data.get("prompt") is not None:  # a clear error before pydantic wraps it
            check_prompt_variables(data["prompt"], type(self).__name__)
        super().__init__(base, **data)

    @field_validator("n_queries", mode="before")
    @classmethod
    def _strict_n(cls, value: Any) -> int:
        return check_k(value, "n_queries")

    def model_post_init(self, context: Any, /) -> None:
        """Validate (the prompt's variables too); warn once when there is no model.

        Raises:
            ValueError: ``prompt`` does not take the variable ``question``, or takes one other than ``question``
                and ``n`` (the message names them): every call would fail to fill it.
        """
        super().model_post_init(context)
        if self.prompt is not None:
            check_prompt_variables(self.prompt, type(self).__name__)
        if self.llm is None:
            warnings.warn(
                f"{type(self).__name__}: no chat model, so the {self.transform_name!r} query transformation is "
                "skipped and the base retriever's results are returned unchanged (set RAGSPINE_LLM or pass llm=)",
                QueryTransformSkippedWarning,
                stacklevel=user_stacklevel(*_LIBRARIES),
            )

    @property
    def active(self) -> bool:
        """Whether a chat model is set."""
        return self.llm is not None

    def messages(self, query: str) -> list[Any]:
        """The messages sent to the model for ``query`` (cut to :data:`MAX_PROMPT_QUERY_CHARS` characters)."""
        return self._format(query, self.n_queries)

    def _format(self, query: str, n: int) -> list[Any]:
        template = self.prompt or self.default_prompt
        return template.format_prompt(question=query[:MAX_PROMPT_QUERY_CHARS], n=n).to_messages()

    def parse(self, reply: Any, query: str) -> list[str]:
        """The generated queries in the model's ``reply`` (without ``query``); at most :attr:`n_queries`."""
        return parse_query_variants(reply, query, self.n_queries)[1:]

    def generate(self, query: str, config: RunnableConfig | None = None) -> tuple[list[str], int]:
        """One model call; its reply parsed with :meth:`parse`."""
        assert self.llm is not None
        reply = self.llm.invoke(self.messages(query), config)
        return self.parse(reply, query), 1

    async def agenerate(self, query: str, config: RunnableConfig | None = None) -> tuple[list[str], int]:
        """One async model call (``ainvoke``)."""
        assert self.llm is not None
        reply = await self.llm.ainvoke(self.messages(query), config)
        return self.parse(reply, query), 1

