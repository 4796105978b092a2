"""Multi-index routing: send a query to the indexes (libraries) it is about, search them concurrently, fuse.

Query routing ("logical routing" in LangChain's RAG-from-scratch series; the router of Adaptive-RAG, Jeong et al.,
NAACL 2024) picks, per query, the data sources worth searching — an HR handbook, the engineering wiki, the product
FAQ — so a query does not pay for, or get distracted by, the others.  :class:`MultiIndexRetriever` takes named
indexes (any ``BaseRetriever`` each) and a router:

* :class:`KeywordRouter` (the default): rules ``index_id -> keywords``; a query mentioning a keyword selects that
  index.  Compared after NFKC and case folding; a keyword in English (or other spaced-script) letters and digits
  matches whole words only (``hr`` is not in ``three``), a Japanese or Chinese one as a substring.  Deterministic,
  no LLM.  Rules naming an id that is not an index are an error.
* :class:`LLMRouter`: a chat model reads the index descriptions and names the indexes to search.
* any callable ``query -> list of index ids``.

The router never narrows recall silently: **if it fails (raises, times out, replies nonsense) or names no known
index, every index is searched** (:class:`RoutingDecision` says which happened).  The selected indexes are searched
through the retriever-call contract with the call's ``k`` and ``filter`` — concurrently under ``ainvoke`` — and
their lists are fused by Reciprocal Rank Fusion (Cormack et al., SIGIR 2009; scores of different indexes are not
comparable, ranks are).  A chunk is identified *within its index*: ``(index_id, chunk_id)``, because two libraries
ingested separately may both have a ``README#0``.  Every result carries ``metadata["index_id"]``.

**Inside a LangGraph graph**, a fan-out over indexes (one ``Send`` per index, each branch writing its documents)
merges through :func:`merge_index_results`, a reducer, and a node after the fan-in ranks the merged list with
:func:`fuse_by_index` — the same fusion :class:`MultiIndexRetriever` uses.  Each branch searches with
:func:`search_index`, which tags its results with their ``index_id`` (:func:`tag_index`, which also drops RESTRICTED
chunks) before the node returns them (a node's return value is what ``stream(stream_mode="updates")`` shows);
the reducer drops RESTRICTED chunks too, and refuses untagged documents (the same ``chunk_id`` in two indexes would
otherwise be merged into one)::

    class State(TypedDict):
        question: str
        index_results: Annotated[list[Document], merge_index_results]
        documents: list[Document]

    def fan_out(state):                          # one branch per index, run in parallel
        return [Send("search_one", {"question": state["question"], "index_id": i}) for i in indexes]

    def search_one(state):
        i = state["index_id"]
        return {"index_results": search_index(indexes[i], state["question"], index_id=i, k=6)}

    def rank(state):
        return {"documents": fuse_by_index(state["index_results"], k=6)}
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Self

from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig
from pydantic import ConfigDict, PrivateAttr

from langchain_ragspine.arguments import OptionalPositiveIntField, check_int, close_names, int_field
from langchain_ragspine.documents import dedupe_by, doc_key
from langchain_ragspine.filters import CompiledFilter, FilterField, compile_filter
from langchain_ragspine.retrievers._choices import ChoicePrompter
from langchain_ragspine.retrievers._term_match import terms_regex
from langchain_ragspine.retrievers.base import AsyncCall, ContractRetriever, RetrieverCall, SyncCall
from langchain_ragspine.retrievers.contract import (
    Search,
    ainvoke_retriever,
    asearch_each,
    invoke_retriever,
    search_each,
)
from langchain_ragspine.retrievers.embed_as import EMBED_AS_OPTION, embed_as_options, embed_as_target
from langchain_ragspine.retrievers.hybrid import DEFAULT_C, fuse
from langchain_ragspine.retrievers.query_variants import reply_text, strip_think
from langchain_ragspine.sensitivity import drop_restricted
from langchain_ragspine.served import ServedIds, combine_served
from langchain_ragspine.text.folding import fold_text

__all__ = [
    "INDEX_ID_KEY",
    "ROUTER_PROMPT",
    "KeywordRouter",
    "LLMRouter",
    "MultiIndexRetriever",
    "RoutingDecision",
    "asearch_index",
    "fuse_by_index",
    "merge_index_results",
    "search_index",
    "tag_index",
]

logger = logging.getLogger(__name__)

#: The metadata key naming the index a result came from.
INDEX_ID_KEY = "index_id"

#: The default prompt of :class:`LLMRouter` (variables ``indexes``: one ``- id: description`` line each, and
#: ``question``).
ROUTER_PROMPT = ChatPromptTemplate.from_messages([
    ("system", "You route questions to the document collections that can answer them."),
    ("human", "Collections:\n{indexes}\n\nWhich collections should be searched for the question below? Reply with "
              "their names only, separated by commas. If you are unsure, name all of them.\n\n"
              "Question: {question}"),
])


@dataclass(frozen=True)
class RoutingDecision:
    """Which indexes one query searches.

    Attributes:
        selected: the index ids searched, in the indexes' order.
        routed: the ids the router named (known ones, in the router's order).
        fallback: ``None`` when the router's choice is searched; ``"router_error"`` (it raised),
            ``"no_known_index"`` (it named none of the indexes) or ``"empty_query"`` (the query is empty or
            whitespace: the router is not called) when every index is searched instead.
    """

    selected: tuple[str, ...]
    routed: tuple[str, ...] = ()
    fallback: str | None = None


class KeywordRouter:
    """Select indexes by keywords: ``{index_id: [keyword, …]}``.

    A query selects every index one of whose keywords it mentions.  Query and keywords are compared after NFKC, case
    folding and whitespace folding; a keyword written in letters or digits of a spaced script (English, accented
    Latin, Greek, Cyrillic) matches whole words only (``hr`` is not in ``three``, ``leave`` not in ``cleave``; an
    English plural ``-s`` / ``-es`` counts, ``leave`` finds ``leaves``), a Japanese or Chinese keyword matches as a
    substring (``休暇`` in ``有給休暇は``) — the rule of the glossary rewriter
    (:mod:`~langchain_ragspine.retrievers._term_match`).  Returns ``[]`` when no keyword matches (the retriever then
    searches every index).

    A ``KeywordRouter`` is built from its rules alone and does not know which indexes exist, so it cannot tell a
    misspelt index id from a real one: :class:`MultiIndexRetriever` checks the rule ids against its ``indexes`` when
    the router is bound to them (at construction, and when ``router`` or ``indexes`` is assigned later), and refuses
    an unknown id with a did-you-mean.  Called on its own, the router returns the ids as its rules write them.

    Raises:
        TypeError: ``rules`` is not a mapping of strings to lists of strings.
        ValueError: an empty or blank id, or a rule with no non-blank keyword (it could never select its index);
            the message names the id.

    Example:
        >>> router = KeywordRouter({"hr": ["休暇", "給与", "leave"], "eng": ["BM25", "デプロイ"]})
        >>> router("有給休暇は何日？"), router("How is ＢＭ２５ tuned?"), router("天気"), router("cleave the index")
        (['hr'], ['eng'], [], [])
    """

    def __init__(self, rules: Mapping[str, Iterable[str]]) -> None:
        if not isinstance(rules, Mapping):
            raise TypeError(f"rules must map index ids to lists of keywords, got {type(rules).__name__}")
        self.rules: dict[str, list[str]] = {}
        for index_id, keywords in rules.items():
            if isinstance(keywords, str) or not all(isinstance(w, str) for w in keywords):
                raise TypeError(f"the keywords of {index_id!r} must be a list of strings, got {keywords!r}")
            index_id = _check_index_id(str(index_id))
            kept = [w for w in keywords if fold_text(w)]
            if not kept:
                raise ValueError(f"the keyword rule of {index_id!r} has no keyword (got {keywords!r}), so it could "
                                 "never select that index; give it a keyword or leave the index out of the rules")
            self.rules[index_id] = kept
        self._patterns = {i: terms_regex(map(fold_text, ws), plurals=True) for i, ws in self.rules.items()}

    def __call__(self, query: str) -> list[str]:
        text = fold_text(query) if isinstance(query, str) else ""
        return [i for i, pattern in self._patterns.items() if pattern is not None and pattern.search(text)]

    def __repr__(self) -> str:
        return f"KeywordRouter({sorted(self.rules)})"


class LLMRouter(ChoicePrompter):
    """Select indexes with a chat model that reads their descriptions.

    Args:
        llm: the chat model.
        descriptions: ``{index_id: what the index holds}`` — the ids the model may name.
        prompt: a ``ChatPromptTemplate`` with ``indexes`` and ``question`` (default :data:`ROUTER_PROMPT`).

    The reply is read for the known ids, in the order they appear, after ``<think>`` blocks are removed and with the
    folding and matching of :class:`KeywordRouter` (NFKC, any case): an id with a spaced-script letter or digit at an
    edge must stand alone on that side, where ``-`` and ``_`` also join (``hr`` is not read in ``hr-policy``; ids such
    as ``hr-policy``, ``eng_wiki``, ``faq.v2`` are read whole), and a Japanese or Chinese id is read inside text
    (``人事と技術``); where ids overlap the longest wins (``人事部`` is not also ``人事``).  Unknown names are ignored.
    A failed call raises (the retriever then searches every index).

    The ids of ``descriptions`` are the only ones the router can return, so they are checked here: each must be a
    non-empty string, and no two may be the same after the folding above (``hr`` and ``HR``, ``ｈｒ`` and ``hr``): a
    reply naming one could not be told from the other, and one of the two indexes could never be chosen.
    :class:`MultiIndexRetriever` checks, when the router is bound to its ``indexes``, that every id is one of them.

    Raises:
        TypeError: ``llm`` is not a ``BaseChatModel``.
        ValueError: ``descriptions`` is empty, an id is empty or blank, or two ids fold to the same text (the
            message names both and lists the ids).
    """

    default_prompt = ROUTER_PROMPT
    listing_key = "indexes"
    empty_message = "descriptions must name at least one index"

    def __init__(
        self, llm: BaseChatModel, descriptions: Mapping[str, str], prompt: ChatPromptTemplate | None = None
    ) -> None:
        super().__init__(llm, descriptions, prompt)
        self.descriptions = self.choices
        self._by_folded: dict[str, str] = {}
        for index_id in self.descriptions:
            folded = fold_text(_check_index_id(index_id))
            if not folded:
                raise ValueError(f"the LLMRouter descriptions name {index_id!r}, which is blank once folded "
                                 "(invisible characters only), so no reply could name it")
            if folded in self._by_folded:
                raise ValueError(
                    f"the LLMRouter descriptions name {self._by_folded[folded]!r} and {index_id!r}, which a reply "
                    f"cannot tell apart (ids are read in any case and width); the ids are "
                    f"{', '.join(map(repr, self.descriptions))}"
                )
            self._by_folded[folded] = index_id
        self._ids = terms_regex(self._by_folded, joiners="-_")

    def parse(self, reply: Any) -> list[str]:
        """The known index ids named in ``reply``, in order of first mention (see the class docstring)."""
        if self._ids is None:
            return []
        found: list[str] = []
        for m in self._ids.finditer(fold_text(strip_think(reply_text(reply)))):
            index_id = self._by_folded[" ".join(m.group(0).split())]
            if index_id not in found:
                found.append(index_id)
        return found

    def __call__(self, query: str, config: RunnableConfig | None = None) -> list[str]:
        """The index ids the model names for ``query``; ``[]`` without a model call for an empty or whitespace
        query (nothing to route)."""
        if not query.strip():
            return []
        return self.parse(self.llm.invoke(self.messages(query), config))

    async def acall(self, query: str, config: RunnableConfig | None = None) -> list[str]:
        """Async ``__call__``."""
        if not query.strip():
            return []
        return self.parse(await self.llm.ainvoke(self.messages(query), config))


# -- fusion and the graph reducer ---------------------------------------------------------------------------------------
def _check_index_id(index_id: Any) -> str:
    if not isinstance(index_id, str) or not index_id.strip():
        raise ValueError(f"an index id is a non-empty string, got {index_id!r}")
    return index_id


def tag_index(docs: Iterable[Document], index_id: str) -> list[Document]:
    """Copies of ``docs`` with ``metadata["index_id"] = index_id``, in their order, RESTRICTED ones dropped
    (:func:`~langchain_ragspine.sensitivity.drop_restricted`: what the package hands back never holds one).

    Raises:
        ValueError: ``index_id`` is not a non-empty string.

    Example:
        >>> docs = [Document(page_content="a", metadata={"chunk_id": "a#0", "sensitivity": "RESTRICTED"}),
        ...         Document(page_content="b", metadata={"chunk_id": "b#0"})]
        >>> [(d.metadata["index_id"], d.metadata["chunk_id"]) for d in tag_index(docs, "hr")]
        [('hr', 'b#0')]
    """
    _check_index_id(index_id)
    out = []
    for d in drop_restricted(docs):
        md = dict(d.metadata)
        md[INDEX_ID_KEY] = index_id
        out.append(Document(page_content=d.page_content, metadata=md, id=d.id))
    return out


def search_index(
    retriever: BaseRetriever,
    query: str,
    *,
    index_id: str,
    k: int | None = None,
    filter: Mapping[str, Any] | None = None,
    config: RunnableConfig | None = None,
) -> list[Document]:
    """One branch of a fan-out over indexes: ``retriever`` searched for ``query`` through the retriever-call contract
    (:func:`~langchain_ragspine.retrievers.contract.invoke_retriever`, with ``k`` and ``filter``), each result tagged
    ``metadata["index_id"] = index_id`` (:func:`tag_index`), RESTRICTED ones dropped
    (:func:`~langchain_ragspine.sensitivity.drop_restricted`) — so what a graph node returns, and what
    ``stream(stream_mode="updates")`` shows of it, never holds a RESTRICTED chunk.

    Returns:
        At most ``k`` documents (fewer when some were RESTRICTED), in the retriever's order.

    Raises:
        ValueError: ``index_id`` is not a non-empty string; bad ``k`` or ``filter`` (as ``invoke_retriever``).
        TypeError: as ``invoke_retriever``.
    """
    _check_index_id(index_id)
    return tag_index(invoke_retriever(retriever, query, k=k, filter=filter, config=config), index_id)


async def asearch_index(
    retriever: BaseRetriever,
    query: str,
    *,
    index_id: str,
    k: int | None = None,
    filter: Mapping[str, Any] | None = None,
    config: RunnableConfig | None = None,
) -> list[Document]:
    """Async :func:`search_index` (through :func:`~langchain_ragspine.retrievers.contract.ainvoke_retriever`)."""
    _check_index_id(index_id)
    return tag_index(await ainvoke_retriever(retriever, query, k=k, filter=filter, config=config), index_id)


def _index_key(doc: Document) -> tuple[str, str] | None:
    key = doc_key(doc)
    return None if key is None else (str(doc.metadata.get(INDEX_ID_KEY)), key)


def _check_tagged(docs: Sequence[Document], where: str) -> None:
    """Raise ``ValueError`` when a document has no ``metadata["index_id"]``: two indexes may both hold a
    ``README#0``, and without the tag the second would be taken for a duplicate of the first and lost."""
    for d in docs:
        index_id = d.metadata.get(INDEX_ID_KEY)
        if not isinstance(index_id, str) or not index_id.strip():
            raise ValueError(
                f"{where}: a document without metadata[{INDEX_ID_KEY!r}] (chunk_id {d.metadata.get('chunk_id')!r}, "
                f"index_id {index_id!r}); tag each branch's results with tag_index(docs, index_id) or search with "
                f"search_index(retriever, query, index_id=...)"
            )


def merge_index_results(left: list[Document] | None, right: Document | Sequence[Document] | None) -> list[Document]:
    """LangGraph reducer for a fan-out over indexes: ``left + right``, where a document whose ``(index_id,
    chunk_id)`` is already present is dropped (the first occurrence wins; documents without a chunk key are kept)
    and RESTRICTED documents are dropped (:func:`~langchain_ragspine.sensitivity.drop_restricted`), so the graph
    state never holds one.

    Use it as ``Annotated[list[Document], merge_index_results]``; the order is arrival order, so rank the merged
    list with :func:`fuse_by_index`.  Every document of ``right`` must carry ``metadata["index_id"]``
    (:func:`tag_index`, :func:`search_index`): the same ``chunk_id`` in two indexes is two chunks.

    Raises:
        TypeError: ``right`` is not a ``Document``, a list of them, or ``None``.
        ValueError: a document of ``right`` has no ``metadata["index_id"]`` (an untagged one would be merged with
            another index's chunk of the same ``chunk_id`` and lost); the message names it and the fix.

    Example:
        >>> a = tag_index([Document(page_content="x", metadata={"chunk_id": "README#0"})], "hr")
        >>> b = tag_index([Document(page_content="y", metadata={"chunk_id": "README#0"})], "eng")
        >>> [d.metadata["index_id"] for d in merge_index_results(merge_index_results(None, a), b + a)]
        ['hr', 'eng']
    """
    current = drop_restricted(left or [])
    if right is None:
        return current
    items = [right] if isinstance(right, Document) else right
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence) or not all(
        isinstance(d, Document) for d in items
    ):
        raise TypeError(f"an index_results update must be a Document or a list of them, got {right!r}"[:300])
    _check_tagged(items, "merge_index_results")
    seen = {k for k in map(_index_key, current) if k is not None}
    return current + dedupe_by(drop_restricted(items), _index_key, seen=seen)


def fuse_by_index(docs: Sequence[Document], *, k: int | None = None, c: int = DEFAULT_C) -> list[Document]:
    """Rank documents of several indexes: each ``metadata["index_id"]`` group, in its given order, is one ranked
    list; the lists are fused by Reciprocal Rank Fusion (:func:`~langchain_ragspine.retrievers.hybrid.fuse`).

    A chunk is ``(index_id, chunk_id)``: the same ``chunk_id`` in two indexes is two results.  Returns at most
    ``k`` documents (``None``: all), each a copy with ``metadata["scores"]["fused"]`` set; RESTRICTED ones are
    dropped.  Ties break on ``index_id``, then ``chunk_id``.

    Raises:
        TypeError / ValueError: bad ``k`` or ``c``.
        ValueError: a document without ``metadata["index_id"]`` (as :func:`merge_index_results`).
    """
    _check_tagged(docs, "fuse_by_index")
    groups: dict[str, list[Document]] = {}
    for d in docs:
        groups.setdefault(str(d.metadata.get(INDEX_ID_KEY)), []).append(d)
    return _fuse_groups(list(groups.items()), k=k, c=c)


def _fuse_groups(groups: Sequence[tuple[str, list[Document]]], *, k: int | None, c: int) -> list[Document]:
    if not groups:
        return []
    originals: dict[str, Document] = {}
    lists: list[list[Document]] = []
    for index_id, docs in groups:
        keyed = []
        for pos, d in enumerate(docs):
            key = doc_key(d)
            ns = f"{index_id}\x1f{key}" if key is not None else f"{index_id}\x1f\x00{pos}"
            originals.setdefault(ns, d)
            md = dict(d.metadata)
            md["chunk_id"] = ns
            keyed.append(Document(page_content=d.page_content, metadata=md))
        lists.append(keyed)
    out = []
    for fused in fuse(lists, k=k, c=c):
        original = originals[fused.metadata["chunk_id"]]
        md = dict(original.metadata)
        md["scores"] = fused.metadata["scores"]
        md[INDEX_ID_KEY] = fused.metadata.get(INDEX_ID_KEY, md.get(INDEX_ID_KEY))
        out.append(Document(page_content=original.page_content, metadata=md, id=original.id))
    return out


# -- the retriever ------------------------------------------------------------------------------------------------------
def _close_ids(name: str, ids: Iterable[str]) -> list[str]:
    """The index ids ``name`` may have meant: those equal to it but for case (``"Hr"`` → ``"hr"``), then close
    spellings (:func:`~langchain_ragspine.arguments.close_names`), compared case-insensitively, up to 3."""
    ids = list(ids)
    folded = name.casefold()
    same_case = [i for i in ids if i.casefold() == folded]
    by_folded: dict[str, list[str]] = {}
    for i in ids:
        by_folded.setdefault(i.casefold(), []).append(i)
    close = [i for f in close_names(folded, by_folded) for i in by_folded[f]]
    return list(dict.fromkeys(same_case + close + close_names(name, ids)))[:3]


RouterLike = Callable[..., Sequence[str]]


class MultiIndexRetriever(ContractRetriever):
    """Route each query to some of several named indexes, search those, fuse by RRF.

    ``MultiIndexRetriever(indexes, router)``.

    Attributes:
        indexes: ``{index_id: retriever}`` (at least one; ids are non-empty strings).
        router: :class:`KeywordRouter`, :class:`LLMRouter`, a mapping of keyword rules (made a
            :class:`KeywordRouter`), a ``BaseChatModel`` (made an :class:`LLMRouter` over ``descriptions``), or any
            callable ``query -> list of index ids``.  ``None`` (default): a :class:`KeywordRouter` whose keywords are
            the index ids themselves.
        descriptions: ``{index_id: description}`` for an LLM router built from a chat model (an index without one is
            described by its id).
        k: results per call (``invoke(query, k=…)`` overrides); ``None`` (default): each index searched with its
            own default ``k`` and the whole fused list returned — every chunk any searched index returned, fused,
            no cut (as LangChain's ``EnsembleRetriever``), so each index's best match is in it.
        fetch_k: results asked of each index when ``k`` is known (default ``k``).  ``candidate_k`` is its old name
            (deprecated: a ``DeprecationWarning``; removed in the next release).
        filter: the retriever's own filter, ANDed with a call's; every index gets the combined filter.
        c: the RRF constant (default 60).

    Results: at most ``k`` documents (all of them when ``k`` is ``None``), each with ``metadata["index_id"]``, RESTRICTED ones dropped; with one index
    selected, that index's results in its order and with its scores; with several, fused by RRF
    (``scores["fused"]``), unique by ``(index_id, chunk_id)``.  ``ainvoke`` searches the selected indexes concurrently
    (and calls an :class:`LLMRouter` with ``ainvoke``); ``invoke`` searches them one after another.
    ``invoke(query, embed_as="document")`` (HyDE's hypothetical document) reaches each index searched as
    :func:`~langchain_ragspine.retrievers.embed_as.embed_as_target` decides (passed to a dense or hybrid index,
    honoured for a LangChain ``VectorStoreRetriever`` by a document-vector search, dropped for BM25); the router
    reads the text as it is.

    Binding: the router is checked against ``indexes`` here, where the two meet (a :class:`KeywordRouter` does not
    know the indexes), and again whenever ``router``, ``indexes`` or ``descriptions`` is assigned
    (``retriever.router = {...}``) or replaced by ``model_copy(update=...)``; a refused assignment changes nothing.
    The default router and a chat model given as ``router`` are rebuilt over the new ``indexes``.  A plain callable
    router cannot be checked in advance: an id it returns that is not an index is ignored when it routes (none
    known: every index is searched, fallback ``"no_known_index"``).

    Raises:
        ValueError: no indexes, an empty id, bad ``k``/``fetch_k``/``c``, a malformed filter; keyword rules,
            ``descriptions`` or an :class:`LLMRouter`'s descriptions naming an id that is not one of ``indexes``
            (the message names the id, the closest ids and lists the indexes) — also on assignment.
        TypeError: an index that is not a ``BaseRetriever``; a router of another type; ``k`` / ``fetch_k`` /
            ``c`` not an int.

    Example:
        >>> from langchain_core.documents import Document
        >>> from langchain_ragspine import BM25Retriever
        >>> hr = BM25Retriever.from_documents([Document(page_content="有給休暇は年20日。", metadata={"chunk_id": "leave#0"})])
        >>> eng = BM25Retriever.from_documents([Document(page_content="BM25 の k1 は 1.5。", metadata={"chunk_id": "bm25#0"})])
        >>> retriever = MultiIndexRetriever({"hr": hr, "eng": eng}, {"hr": ["休暇"], "eng": ["BM25"]}, k=3)
        >>> [(d.metadata["index_id"], d.metadata["chunk_id"]) for d in retriever.invoke("有給休暇は何日？")]
        [('hr', 'leave#0')]
        >>> retriever.route("天気は？")
        RoutingDecision(selected=('hr', 'eng'), routed=(), fallback='no_known_index')
    """

    indexes: dict[str, BaseRetriever]
    router: Any = None
    descriptions: dict[str, str] | None = None
    k: OptionalPositiveIntField = None
    fetch_k: OptionalPositiveIntField = None
    filter: FilterField = None
    c: Annotated[int, int_field(minimum=0)] = DEFAULT_C

    model_config = ConfigDict(arbitrary_types_allowed=True)

    #: ``invoke(query, embed_as=…)`` is handed on to each index searched (see the class docstring).
    call_options: ClassVar[tuple[str, ...]] = (EMBED_AS_OPTION,)
    #: ``candidate_k``: the old name of ``fetch_k``, for one release.
    renamed_arguments: ClassVar[tuple[str, ...]] = ("candidate_k",)

    #: The fields the router is bound to: assigning one (or updating it in ``model_copy``) binds the router again.
    bound_fields: ClassVar[tuple[str, ...]] = ("indexes", "router", "descriptions")

    _router_spec: Any = PrivateAttr(default=None)  # the router as given (None, rules, chat model, router, callable)

    def __init__(self, indexes: Mapping[str, BaseRetriever] | None = None, router: Any = None, /,
                 **data: Any) -> None:
        if indexes is not None:
            data["indexes"] = indexes
        given = data.get("indexes")
        if isinstance(given, Mapping):
            data["indexes"] = dict(given)
            for index_id, retriever in given.items():
                if not isinstance(retriever, BaseRetriever):
                    raise TypeError(f"index {index_id!r} is a {type(retriever).__name__}, expected a BaseRetriever")
        if router is not None:
            data["router"] = router
        super().__init__(**data)

    def model_post_init(self, context: Any, /) -> None:
        """Validate; build the router from its shorthand."""
        self._router_spec = self.router
        self._bind()

    def _bind(self) -> None:
        """Check the fields and bind the router as given (:attr:`_router_spec`) to ``indexes``: build it from its
        shorthand and check the ids it can name.

        Raises:
            ValueError, TypeError: as the class docstring says.
        """
        if not isinstance(self.indexes, dict) or not self.indexes:
            raise ValueError("indexes must map at least one index id to a retriever")
        for index_id, retriever in self.indexes.items():
            if not isinstance(index_id, str) or not index_id.strip():
                raise ValueError(f"an index id is a non-empty string, got {index_id!r}")
            if not isinstance(retriever, BaseRetriever):
                raise TypeError(f"index {index_id!r} is a {type(retriever).__name__}, expected a BaseRetriever")
        check_int(self.c, "c", minimum=0)
        compile_filter(self.filter)
        if self.descriptions is not None:
            self._check_ids(self.descriptions, "descriptions")
        router = self._router_spec
        if router is None:
            router = KeywordRouter({i: [i] for i in self.indexes})
        elif isinstance(router, Mapping):
            router = KeywordRouter(router)
        elif isinstance(router, BaseChatModel):
            given = self.descriptions or {}
            router = LLMRouter(router, {i: given.get(i, i) for i in self.indexes})
        elif not callable(router):
            raise TypeError(f"router must be a KeywordRouter, an LLMRouter, keyword rules, a chat model or a "
                            f"callable, got {type(router).__name__}")
        if isinstance(router, KeywordRouter):
            self._check_ids(router.rules, "keyword rules")
        elif isinstance(router, LLMRouter):
            self._check_ids(router.descriptions, "LLMRouter descriptions")
        self.__dict__["router"] = router  # the built router; the shorthand stays in _router_spec

    def __setattr__(self, name: str, value: Any) -> None:
        if name not in type(self).bound_fields:
            super().__setattr__(name, value)
            return
        self._rebind({name: value})

    def _rebind(self, values: Mapping[str, Any]) -> None:
        """Set the :attr:`bound_fields` ``values`` and bind the router again; when that fails, restore them."""
        saved = {name: self.__dict__.get(name) for name in type(self).bound_fields}
        saved_spec = self._router_spec
        for name, value in values.items():
            if name == "indexes" and isinstance(value, Mapping):
                for index_id, retriever in value.items():
                    if not isinstance(retriever, BaseRetriever):
                        raise TypeError(f"index {index_id!r} is a {type(retriever).__name__}, expected a "
                                        "BaseRetriever")
                value = dict(value)
            super().__setattr__(name, value)
            if name == "router":
                self._router_spec = value
        try:
            self._bind()
        except Exception:
            self.__dict__.update(saved)  # a refused assignment changes nothing
            self._router_spec = saved_spec
            raise

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """pydantic's ``model_copy``; an ``update`` of ``indexes``, ``router`` or ``descriptions`` binds the copy's
        router again (checked as at construction)."""
        rest = dict(update or {})
        bound = {name: rest.pop(name) for name in list(rest) if name in type(self).bound_fields}
        copied = super().model_copy(update=rest or None, deep=deep)
        if bound:
            copied._rebind(bound)
        return copied

    def _check_ids(self, named: Iterable[str], what: str) -> None:
        """Raise ``ValueError`` when ``named`` holds an id that is not one of the indexes (a did-you-mean)."""
        unknown = [i for i in named if i not in self.indexes]
        if unknown:
            raise ValueError(self._unknown_ids_message(unknown, what))

    def _unknown_ids_message(self, unknown: Sequence[Any], what: str) -> str:
        """``the {what} name unknown index 'x' (did you mean 'y'?); the indexes are …``."""
        parts = []
        for index_id in unknown:
            close = _close_ids(str(index_id), self.indexes)
            parts.append(repr(index_id) + (f" (did you mean {', '.join(map(repr, close))}?)" if close else ""))
        return (f"the {what} name unknown index{'es' if len(parts) > 1 else ''} {', '.join(parts)}; "
                f"the indexes are {', '.join(map(repr, self.indexes))}")

    # -- routing ----------------------------------------------------------------------------------------------------
    def _decide(self, routed: Any) -> RoutingDecision:
        if isinstance(routed, str):
            routed = [routed]
        named, unknown = [], []
        for i in routed if isinstance(routed, Iterable) else []:
            if isinstance(i, str) and i in self.indexes:
                if i not in named:
                    named.append(i)
            elif i not in unknown:
                unknown.append(i)
        if unknown:  # only a plain callable can name one: the other routers are checked when bound
            logger.warning("MultiIndexRetriever: %s; ignored", self._unknown_ids_message(unknown, "router's ids"))
        if not named:
            return RoutingDecision(tuple(self.indexes), (), "no_known_index")
        return RoutingDecision(tuple(i for i in self.indexes if i in named), tuple(named))

    def _failed(self, e: Exception) -> RoutingDecision:
        logger.warning("MultiIndexRetriever: routing failed, searching every index: %s", e)
        return RoutingDecision(tuple(self.indexes), (), "router_error")

    def route(self, query: str, config: RunnableConfig | None = None) -> RoutingDecision:
        """The indexes ``query`` searches (this calls the router, nothing is searched).  Never raises.  An empty or
        whitespace query searches every index without calling the router (fallback ``"empty_query"``)."""
        if not query.strip():
            return RoutingDecision(tuple(self.indexes), (), "empty_query")
        try:
            routed = self.router(query, config) if isinstance(self.router, LLMRouter) else self.router(query)
        except Exception as e:  # noqa: BLE001 - a failed router searches everything
            return self._failed(e)
        return self._decide(routed)

    async def aroute(self, query: str, config: RunnableConfig | None = None) -> RoutingDecision:
        """Async :meth:`route` (an :class:`LLMRouter` is called with ``ainvoke``)."""
        if not isinstance(self.router, LLMRouter) or not query.strip():
            return self.route(query, config)
        try:
            routed = await self.router.acall(query, config)
        except Exception as e:  # noqa: BLE001
            return self._failed(e)
        return self._decide(routed)

    # -- retrieval --------------------------------------------------------------------------------------------------
    def _params(self, call: RetrieverCall[Any]) -> tuple[int | None, int | None, CompiledFilter | None]:
        return call.k, call.depth(self.fetch_k), call.filter  # k and the filter: resolved by the base

    def _searches(self, decision: RoutingDecision, query: str, call: RetrieverCall[Any]) -> list[Search]:
        """One search per selected index, traced as ``index_{i}``, with the call's ``embed_as`` handed on as
        :func:`~langchain_ragspine.retrievers.embed_as.embed_as_target` decides for that index."""
        options = embed_as_options(call.options)
        out: list[Search] = []
        for i in decision.selected:
            target, handed = embed_as_target(self.indexes[i], options)
            out.append((target, query, f"index_{i}", handed) if handed else (target, query, f"index_{i}"))
        return out

    @staticmethod
    def _depth(decision: RoutingDecision, k: int | None, depth: int | None) -> int | None:
        """What each search asks for: ``k`` for a single index (nothing to fuse), else the candidate depth."""
        return k if len(decision.selected) == 1 else depth

    def _finish(self, decision: RoutingDecision, lists: Sequence[list[Document]], k: int | None) -> list[Document]:
        groups = [(i, tag_index(docs, i)) for i, docs in zip(decision.selected, lists, strict=True)]  # gated
        if len(groups) == 1:  # nothing to fuse
            docs = groups[0][1]
            return docs if k is None else docs[:k]
        return _fuse_groups(groups, k=k, c=self.c)  # k None: the whole fused list, no cut

    def served_ids(self, ids: Sequence[str]) -> ServedIds | None:
        """Which of ``ids`` this retriever would still return (:mod:`~langchain_ragspine.served`): what its indexes
        answer (:func:`~langchain_ragspine.served.combine_served`: served by one and withdrawn by none — two indexes
        may hold the same chunk id, and a citation names no index); ``None`` when no index can tell."""
        return combine_served(list(self.indexes.values()), ids)

    def _retrieve(self, query: str, call: SyncCall) -> list[Document]:
        k, depth, flt = self._params(call)
        decision = self.route(query, call.child("router"))
        lists = search_each(self._searches(decision, query, call), k=self._depth(decision, k, depth), filter=flt,
                            run_manager=call.run_manager)
        return self._finish(decision, lists, k)

    async def _aretrieve(self, query: str, call: AsyncCall) -> list[Document]:
        k, depth, flt = self._params(call)
        decision = await self.aroute(query, call.child("router"))
        lists = await asearch_each(self._searches(decision, query, call), k=self._depth(decision, k, depth), filter=flt,
                                   run_manager=call.run_manager)
        return self._finish(decision, lists, k)
