"""Settings: every ``RAGSPINE_*`` environment variable (and ``OLLAMA_HOST``), from the environment or a ``.env`` file.

Usage::

    from langchain_ragspine.settings import get_settings

    settings = get_settings()            # read now: the environment, then ./.env, then the defaults
    settings.store, settings.llm         # as written (a blank one is unset)
    configured_number("k")               # a numeric setting, checked: 6, or RAGSPINE_K's integer

:class:`RagSpineSettings` reads, in order of precedence: explicit arguments, environment variables, a ``.env`` file in
the working directory, then the defaults below.  :func:`get_settings` is the one accessor: the library never reads
``os.environ`` itself, so a value in ``.env`` counts exactly as the same variable exported.  Settings are read when
a call needs one (about half a millisecond a read) and never cached across calls: a variable changed at run time
(``monkeypatch.setenv`` in a test, ``os.environ[...] = ...`` in a notebook) takes effect on the next call.  The CLI
takes its option defaults from them, so ``RAGSPINE_TOKENIZER=cjk ragspine ingest docs --store S`` works like
``--tokenizer cjk``; an argument or option given explicitly always wins.  A bad value is refused where the setting
is used (:func:`~langchain_ragspine.configured.configured_setting`, naming the variable), so it never breaks a
command that does not use it.

This module is the bottom layer of the package: it imports nothing from it (``tests/unit_tests/test_import_graph.py``
checks), so every module may read the settings.  What a name or spec setting means (a tokenizer, a retrieval mode,
a reranker spec …) is checked by the module that knows the names: :mod:`langchain_ragspine.specs` (the spec
strings) and :func:`~langchain_ragspine.configured.configured_setting` (every checked setting); the numbers are
checked here (:func:`configured_number`).
"""

from __future__ import annotations

import difflib
import math
import os
import re
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = [
    "CHECKED_WHERE_USED",
    "DESIGN_SWITCHES",
    "DEFAULT_CHUNK_CHARS",
    "DEFAULT_K",
    "DEFAULT_LLM",
    "DEFAULT_OLLAMA_HOST",
    "DEFAULT_OVERLAP_CHARS",
    "MALFORMED_POSTGRES_RE",
    "MAX_STATEMENT_TIMEOUT",
    "NUMERIC_SETTINGS",
    "TOOL_VARIABLES",
    "URL_SCHEME_RE",
    "RagSpineSettings",
    "blank_setting",
    "check_count",
    "check_setting_names",
    "check_timeout",
    "configured_number",
    "from_setting",
    "get_settings",
    "looks_like_url",
    "ollama_base_url",
    "setting_variable",
    "settings_error_message",
]

#: ``k`` — how many results come back — when neither an argument nor ``RAGSPINE_K`` gives one, for every route of
#: the package: the retriever classes (``BM25Retriever``, ``DenseRetriever``, ``HybridRetriever``, the PostgreSQL
#: ones, ``ParentChildRetriever``, ``LiveStoreRetriever``, ``SecondStageRetriever``), the compressors
#: (``CrossEncoderReranker``, ``LLMListwiseReranker``, ``MMRCompressor``), the answer chain's passages, the vector
#: stores' searches and ``as_retriever()``, ``open_retriever`` / ``search``, ``ragspine search | ask | demo`` and the
#: served graphs.  6 is what a RAG graph is given per search (a short prompt for a small model) and what the answer
#: benchmarks measure.  (LangChain's own classes default to 4; this package's are one number everywhere.)  Stated
#: here, the default of ``RAGSPINE_K``; :mod:`langchain_ragspine.arguments` re-exports it.
DEFAULT_K = 6
#: Default chunk budget in characters (``RAGSPINE_CHUNK_SIZE``; the splitters re-export it).
DEFAULT_CHUNK_CHARS = 480
#: Default overlap between consecutive chunks, in characters (``RAGSPINE_CHUNK_OVERLAP``).
DEFAULT_OVERLAP_CHARS = 80
#: The chat model spec when neither an argument nor ``RAGSPINE_LLM`` gives one, everywhere (library, ``ragspine
#: ask`` / ``demo``, ``graphs/app.py``): no LLM — offline and deterministic unless asked.  ``auto`` (the default chat
#: model when its server answers, else the deterministic path) is one ``--llm auto`` or ``RAGSPINE_LLM=auto`` away;
#: every spec means the same everywhere (see :func:`~langchain_ragspine.chat_models.resolve_chat_model`).
DEFAULT_LLM = "none"
#: Where Ollama listens when ``OLLAMA_HOST`` is not set.
DEFAULT_OLLAMA_HOST = "http://localhost:11434"
#: The longest PostgreSQL statement timeout, in seconds (``statement_timeout`` is an ``int`` of milliseconds).
MAX_STATEMENT_TIMEOUT = 2_147_483


def from_setting(setting: str | None, value: object) -> str:
    """``RAGSPINE_X='value': `` — the head of an error about a value read from the variable ``setting`` — or
    ``""`` for a value given as an argument (``setting=None``).

    Example:
        >>> from_setting("RAGSPINE_K", "abc")
        "RAGSPINE_K='abc': "
    """
    return f"{setting}={value!r}: " if setting else ""


def check_count(value: object, *, what: str, minimum: int, setting: str | None = None) -> int:
    """An integer setting: ``value`` (an ``int``, or a string of one, blanks around it allowed) if it is at least
    ``minimum``; else a ``ValueError`` naming the variable ``setting`` (when given, with the value) or ``what``
    (with ``got …``).

    Example:
        >>> check_count(" 7 ", what="k", minimum=1)
        7
    """
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str) and value.strip().lstrip("+-").isdigit():
        number = int(value.strip())
    if number is None or number < minimum:
        bound = "> 0" if minimum == 1 else f">= {minimum}"
        raise ValueError(f"{from_setting(setting, value)}{what} must be an integer {bound}"
                         + ("" if setting else f", got {value!r}"))
    return number


def check_timeout(value: object, *, setting: str | None = None, what: str = "pg_statement_timeout") -> float:
    """A time limit in seconds: ``value`` (a number, or a string of one) if it is finite and in
    ``[0, MAX_STATEMENT_TIMEOUT]`` (``0``: no limit), as a ``float``; else a ``ValueError`` naming the variable
    ``setting`` (when given) or ``what``.

    Example:
        >>> check_timeout("2.5")
        2.5
    """
    number: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if number is None or not math.isfinite(number) or not 0 <= number <= MAX_STATEMENT_TIMEOUT:
        raise ValueError(f"{from_setting(setting, value)}{what} must be a number of seconds from 0 (no limit) to "
                         f"{MAX_STATEMENT_TIMEOUT}" + ("" if setting else f", got {value!r}"))
    return number


#: The numeric settings and the least value each takes (``pg_statement_timeout``: a number of seconds, see
#: :func:`check_timeout`); :func:`configured_number` checks them.
_MINIMUM: dict[str, int] = {
    "chunk_size": 1, "chunk_overlap": 0, "k": 1, "pg_pool_size": 1, "pg_hnsw_threshold": 0, "pg_ef_search": 1,
    "workers": 0,
}
#: The numeric settings (checked here, by :func:`configured_number`).
NUMERIC_SETTINGS = (*_MINIMUM, "pg_statement_timeout")


def _number_checker(field: str) -> Callable[..., Any]:
    if field == "pg_statement_timeout":
        return check_timeout

    def check(value: object, *, setting: str | None = None) -> int:
        return check_count(value, what=field, minimum=_MINIMUM[field], setting=setting)

    return check


#: The settings whose value is constrained (a name from a list, a spec, an integer in a range).  Each is checked
#: where it is used, never when the settings are read: a bad value is kept as written and refused by
#: :func:`~langchain_ragspine.configured.configured_setting` (``RAGSPINE_K='abc': k must be an integer > 0``), so
#: a setting one command does not use cannot break it (``RAGSPINE_K=abc ragspine ingest …`` works;
#: ``RAGSPINE_CHUNK_SIZE=big ragspine search …`` too, unless ``RAGSPINE_CHUNKER`` asks search to check the store's
#: chunking).
CHECKED_WHERE_USED = (
    "tokenizer", "chunk_size", "chunk_overlap", "chunker", "k", "retrieval_mode", "pg_pool_size",
    "pg_hnsw_threshold", "pg_ef_search", "pg_statement_timeout", "query_transform", "reranker", "postprocessor",
    "workers", "sparse", "contextual", "answer_graph", "relation_graph", "raptor",
)
#: What a blank value of a :data:`CHECKED_WHERE_USED` setting means, where it means anything (else it is refused).
_BLANK: dict[str, object] = {"chunker": None, "query_transform": "none", "reranker": "none", "postprocessor": "none",
                              "sparse": "none", "contextual": None, "answer_graph": "corrective",
                              "relation_graph": "none", "raptor": "none"}

def blank_setting(field: str, value: object) -> tuple[bool, object]:
    """``(True, meaning)`` when ``value`` is a blank (or ``None``) value of a setting for which blank means something
    (``chunker``: ``None``; ``query_transform``, ``reranker``, ``postprocessor``: ``"none"``), else
    ``(False, value)``: what every checker of a :data:`CHECKED_WHERE_USED` setting does first."""
    if field in _BLANK and (value is None or isinstance(value, str) and not value.strip()):
        return True, _BLANK[field]
    return False, value


def setting_variable(field: str) -> str:
    """The variable a settings field is read from: ``RAGSPINE_<FIELD>`` (``OLLAMA_HOST`` for ``ollama_host``)."""
    return "OLLAMA_HOST" if field == "ollama_host" else f"RAGSPINE_{field.upper()}"


def configured_number(field: str, settings: RagSpineSettings | None = None) -> Any:
    """The value of the numeric setting ``field`` (one of :data:`NUMERIC_SETTINGS`; environment or ``.env``, else the
    default), checked: an ``int`` (a ``float`` of seconds for ``pg_statement_timeout``).  What the low layers read
    as the default of an argument (``configured_number("pg_ef_search")`` → ``100``).

    Args:
        field: the field name (``"k"``, ``"chunk_size"``, ``"pg_pool_size"`` …).
        settings: the settings to read (default: :func:`get_settings`, read now).

    Raises:
        ValueError: a bad value, naming the variable and the value: ``RAGSPINE_K='abc': k must be an integer > 0``.
        KeyError: ``field`` is not a numeric setting.
    """
    if field not in NUMERIC_SETTINGS:
        raise KeyError(f"{field!r} is not a numeric setting; choose one of {', '.join(NUMERIC_SETTINGS)}")
    value = getattr(settings or get_settings(), field)
    return _number_checker(field)(value, setting=setting_variable(field))


def ollama_base_url(settings: RagSpineSettings | None = None) -> str:
    """``OLLAMA_HOST`` as a URL (``http://`` prefixed when it has no scheme, no trailing ``/``), else
    :data:`DEFAULT_OLLAMA_HOST`.

    Example:
        >>> ollama_base_url(RagSpineSettings(ollama_host="gpu:11434"))
        'http://gpu:11434'
    """
    base_url = ((settings or get_settings()).ollama_host or "").strip() or DEFAULT_OLLAMA_HOST
    if not base_url.startswith(("http://", "https://")):
        base_url = "http://" + base_url
    return base_url.rstrip("/")


#: ``scheme://`` at the start of a store string (RFC 3986's scheme characters; group 1: the scheme).
URL_SCHEME_RE = re.compile(r"^\s*([A-Za-z][A-Za-z0-9+.-]*)://")
#: A PostgreSQL URL missing a slash (``postgresql:/u:pw@h/db``) or both (``postgres:u@h/db``): ``postgresql:`` /
#: ``postgres:`` then one ``/``, or a user part (``…@``) before any ``/``.  (``postgresql:dir`` is a directory.)
MALFORMED_POSTGRES_RE = re.compile(r"(?i)^\s*postgres(?:ql)?:(?:/(?!/)|[^/]*@)")


def looks_like_url(value: str) -> bool:
    """Whether a store string is no directory path: a ``scheme://`` URL or a PostgreSQL URL missing a slash — kept
    as a string (``Path`` would fold its ``//`` and make a directory named after it) for
    :func:`~langchain_ragspine.backends.open.open_backend` to open or refuse, naming what is wrong."""
    return bool(URL_SCHEME_RE.match(value) or MALFORMED_POSTGRES_RE.match(value))


class RagSpineSettings(BaseSettings):
    """Package settings: every ``RAGSPINE_*`` variable (and ``OLLAMA_HOST``), from the environment or ``.env``.

    Usage: ``get_settings().store``; ``RagSpineSettings(k=5)`` for explicit values.

    Precedence: an explicit argument (``RagSpineSettings(k=5)``, or a function's own argument) > the environment >
    ``.env`` in the working directory > the default.  Read them with :func:`get_settings`.

    Checked where used: a setting with a constrained value (:data:`CHECKED_WHERE_USED`: a name from a list, a spec,
    an integer in a range) is checked by :func:`~langchain_ragspine.configured.configured_setting` where a command
    or function uses it, never when the settings are read.  A number that is valid is held as its type
    (``RAGSPINE_K=" 7 "`` → ``7``); a name or spec is held as written (stripped; a blank ``chunker`` is ``None``,
    a blank transform / reranker / post-processor ``"none"``), and ``configured_setting`` gives it in its one
    spelling (``RAGSPINE_TOKENIZER=CJK`` → ``"cjk"``); a bad value is held as written (a string) and refused where
    it is used, with a ``ValueError`` naming the variable, the value and what is expected
    (``RAGSPINE_K='abc': k must be an integer > 0``).  So a setting a command does not use cannot break it:
    ``RAGSPINE_K=abc`` does not break ``ingest``, nor ``RAGSPINE_TOKENIZER=mecab`` ``search``.
    Who uses what: ``ingest`` (and ``ragspine demo``, ``eval``'s ingest) reads ``tokenizer``, ``chunk_size``,
    ``chunk_overlap``, ``chunker``, ``retrieval_mode``, ``embedding`` and ``workers``; ``open_retriever`` /
    ``search()`` / ``ragspine search | ask`` read ``k``, ``retrieval_mode`` and, only when set, ``chunker`` (then
    also the chunk budgets, to check the store's chunking), and the CLI the query-transform and second-stage
    settings; the tokenizer and the query encoder are recorded with the index, so search never reads
    ``tokenizer`` or ``embedding``; ``workers`` is read by search only to rebuild a stale BM25 index; the
    ``pg_*`` settings only by PostgreSQL stores and retrievers, as the defaults of their arguments.

    Attributes:
        tokenizer: BM25 tokenizer name for :func:`~langchain_ragspine.pipeline.ingest.ingest` and ``ragspine ingest`` /
            ``eval`` (``RAGSPINE_TOKENIZER``: one of :data:`~langchain_ragspine.tokenizers.TOKENIZERS`, any case;
            default ``"auto"``).  Search never reads it: the store records its tokenizer.
        chunk_size: chunk budget in characters (``RAGSPINE_CHUNK_SIZE``: an integer > 0; default 480).
        chunk_overlap: overlap in characters (``RAGSPINE_CHUNK_OVERLAP``: an integer >= 0; default 80).
        chunker: how ingest chunks documents (``RAGSPINE_CHUNKER``: one of
            :data:`~langchain_ragspine.text_splitters.chunkers.CHUNKERS`; unset or blank: the store's recorded
            chunker, ``paragraph`` for a new store).  Set, it must match the store's record for ingest and search
            alike (search then reads ``chunk_size`` and ``chunk_overlap`` too).
        store: default store for the CLI and ``graphs/app.py``: a directory or a ``postgresql://`` URL
            (``RAGSPINE_STORE``; default none: the
            CLI then requires ``--store``, ``graphs/app.py`` ingests the demo corpus).
        k: number of chunks a search returns, for every entry point (``RAGSPINE_K``: an integer > 0; default
            :data:`DEFAULT_K` = 6).  ``ingest`` never reads it.
        embedding: embedding spec for :func:`~langchain_ragspine.embeddings.factory.make_embeddings` and ingest
            (``RAGSPINE_EMBEDDING``; default ``"auto"``).
        retrieval_mode: a registered retrieval mode (``RAGSPINE_RETRIEVAL_MODE``; default ``"auto"``; see
            :mod:`langchain_ragspine.pipeline.modes`), for ingest (whether to embed) and search alike.  Checked when
            used, so a mode registered after the settings were read counts.
        llm: chat model spec (``RAGSPINE_LLM``; default :data:`DEFAULT_LLM` = ``"none"``: the deterministic
            path everywhere; ``"auto"`` uses the default chat model when its server answers).
        ollama_host: where Ollama listens (``OLLAMA_HOST``, Ollama's own variable, no prefix; default
            ``http://localhost:11434``).
        cache_dir: where derived models (the ONNX e5 graph) are cached (``RAGSPINE_CACHE_DIR``; default
            ``platformdirs.user_cache_dir("langchain-ragspine")``).
        pg_pool_size: most connections one process opens to one PostgreSQL store (``RAGSPINE_PG_POOL_SIZE``: an
            integer > 0; default 4; see ``docs/postgres.md``).
        pg_hnsw_threshold: the dense channel of a PostgreSQL store gets a pgvector HNSW index once it holds this
            many vectors; below it every search is exact (``RAGSPINE_PG_HNSW_THRESHOLD``: an integer >= 0; default
            20000).
        pg_ef_search: pgvector's ``hnsw.ef_search`` for a query (raised to ``k`` when smaller;
            ``RAGSPINE_PG_EF_SEARCH``: an integer > 0; default 100): the default of a PostgreSQL dense retriever's
            ``ef_search``.
        pg_statement_timeout: the longest one search of a PostgreSQL store may run, in seconds, before the server
            cancels it and the search raises (``RAGSPINE_PG_STATEMENT_TIMEOUT``: a number from 0 to 2147483, 0 for
            no limit; default 30), so no query holds a pooled connection for longer; writes are not limited.  The
            default of a PostgreSQL retriever's ``statement_timeout``.
        query_transform: the query transformation of
            :func:`~langchain_ragspine.retrievers.transforms.make_query_transform` and the CLI's ``--transform``
            (``RAGSPINE_QUERY_TRANSFORM``; one of :data:`~langchain_ragspine.specs.QUERY_TRANSFORMS`, any case,
            ``-`` for ``_``; default and blank: ``"none"``).  An unknown name is kept as written and refused only
            where a transformation is made (:func:`~langchain_ragspine.specs.configured_query_transform`:
            ``make_query_transform(None, …)``, ``ragspine search | ask | eval``), so it cannot break ``ingest``.
            :func:`~langchain_ragspine.pipeline.sources.open_retriever` and :func:`~langchain_ragspine.pipeline.sources.search`
            never read it.
        glossary: the glossary file of the ``glossary`` transformation (``RAGSPINE_GLOSSARY``; default none).
        query_deny_list: a file of terms no generated query may mention (``RAGSPINE_QUERY_DENY_LIST``; default
            none: no gate).  See :class:`~langchain_ragspine.retrievers.QueryDenyList`.
        reranker: the second-stage reranker of ``ragspine search | ask | eval`` (``RAGSPINE_RERANKER``; default
            and blank: ``"none"``); see :func:`~langchain_ragspine.document_compressors.factory.make_reranker`.
            Like ``query_transform``, an unknown spec is kept as written and refused only where a reranker is made
            (:func:`~langchain_ragspine.specs.configured_reranker`: ``make_reranker(None)``,
            ``make_compressors``, ``ragspine search | ask | eval`` without ``--rerank``), so it cannot break
            ``ingest``.
        postprocessor: comma-separated post-processing steps after the reranker (``RAGSPINE_POSTPROCESSOR``;
            default and blank: ``"none"``); see
            :func:`~langchain_ragspine.document_compressors.factory.make_postprocessor`.  An unknown or repeated
            step is kept as written and refused only where post-processing is made
            (:func:`~langchain_ragspine.specs.configured_postprocessor`).
        workers: processes that tokenize chunks when ingest (or a search that finds the saved index stale) builds
            a BM25 index (``RAGSPINE_WORKERS``: an integer >= 0; default 0: automatic, every usable core for a large
            corpus; 1: one process).  The index is the same whatever the number; see
            :mod:`langchain_ragspine.backends.directory.bm25_parallel`.
        sparse: the learned-sparse encoder ``ingest`` builds the sparse channel of a store directory with
            (``RAGSPINE_SPARSE``; :data:`~langchain_ragspine.specs.SPARSE_SPECS`: ``none``, ``e5``,
            ``splade:<path>``; default and blank: ``"none"``, no sparse channel).  Search follows the store's record
            (a store ingested with it fuses the channel in ``auto`` / ``hybrid``), never this setting.  An unknown
            spec is kept as written and refused where ingest reads it
            (:func:`~langchain_ragspine.specs.configured_sparse`).
        contextual: whether ``ingest`` indexes and embeds chunks with a title / heading header
            (``RAGSPINE_CONTEXTUAL``: ``on`` / ``off``, also ``true`` / ``false``, ``1`` / ``0``, ``yes`` / ``no``;
            default and blank: the store's own setting, off for a new store) when ``contextual=`` / ``--contextual``
            is not given.
        answer_graph: the LangGraph graph ``ragspine ask`` answers with when ``--graph`` is not given
            (``RAGSPINE_ANSWER_GRAPH``: ``simple``, ``corrective`` (default), ``adaptive``, ``self_rag``).
        relation_graph: the relation extractor ``ingest`` builds a store directory's relation graph with when
            ``graph=`` is not given (``RAGSPINE_RELATION_GRAPH``: ``none`` (default and blank: the store's own),
            ``cooccurrence``); see :mod:`langchain_ragspine.relations`.
        raptor: the RAPTOR tree ``ingest`` builds for a store directory (``RAGSPINE_RAPTOR``;
            :data:`~langchain_ragspine.specs.RAPTOR_SPECS`: ``none``, or the tree's embedding spec such as
            ``hashing`` or ``e5``; default and blank: ``"none"``, no tree).  Search follows the store's
            ``raptor.json`` (mode ``raptor``), never this setting.  An unknown spec is kept as written and refused
            where ingest reads it (:func:`~langchain_ragspine.specs.configured_raptor`).

    Raises:
        pydantic.ValidationError: only for a value no field can hold (a non-string path); every constrained value
            is refused where it is used instead (see above).
    """

    model_config = SettingsConfigDict(
        env_prefix="RAGSPINE_", env_file=".env", extra="ignore", populate_by_name=True
    )

    def __init__(self, **values: Any) -> None:
        check_setting_names(values, explicit=True)
        check_setting_names(_environment_names(values.get("_env_file", self.model_config.get("env_file"))))
        super().__init__(**values)

    # the constrained fields (CHECKED_WHERE_USED) hold a bad value as written: read them with configured_setting
    tokenizer: str = "auto"
    chunk_size: int | str = DEFAULT_CHUNK_CHARS
    chunk_overlap: int | str = DEFAULT_OVERLAP_CHARS
    chunker: str | None = None
    store: Path | str | None = None  # a directory, or a postgresql:// URL (kept as a string)
    k: int | str = DEFAULT_K
    embedding: str = "auto"
    retrieval_mode: str = "auto"
    llm: str = DEFAULT_LLM
    ollama_host: str | None = Field(None, validation_alias=AliasChoices("ollama_host", "OLLAMA_HOST"))
    cache_dir: Path | None = None
    pg_pool_size: int | str = 4
    pg_hnsw_threshold: int | str = 20_000
    pg_ef_search: int | str = 100
    pg_statement_timeout: float | str = 30.0
    query_transform: str = "none"
    glossary: Path | None = None
    query_deny_list: Path | None = None
    reranker: str = "none"
    postprocessor: str = "none"
    workers: int | str = 0
    sparse: str = "none"
    contextual: str | None = None
    answer_graph: str = "corrective"
    relation_graph: str = "none"
    raptor: str = "none"

    @field_validator("store", "cache_dir", "glossary", "query_deny_list", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object, info: ValidationInfo) -> object:
        if isinstance(value, str) and not value.strip():
            return None
        if isinstance(value, str) and not looks_like_url(value):
            return Path(value)  # a directory; a URL stays a string (Path would fold its "//")
        if value is not None and not isinstance(value, (str, os.PathLike)):
            # a TypeError passes pydantic unwrapped: its error would quote the value (a URL's password with it)
            raise TypeError(f"{info.field_name} must be a string or a path, got {type(value).__name__}")
        return value  # backends.open.open_backend decides: a PostgreSQL store, or an error naming what is wrong

    @field_validator(*CHECKED_WHERE_USED, mode="before")
    @classmethod
    def _check_where_used(cls, value: object, info: ValidationInfo) -> object:
        # refused where the setting is used (configured_setting), not here: a number that parses is held as its
        # type, anything else as written (stripped), a blank one as what blank means
        field = str(info.field_name)
        if isinstance(value, bool):  # never from the environment (a string): an explicit RagSpineSettings(k=True)
            raise ValueError(f"{field} must be {'a number' if field in NUMERIC_SETTINGS else 'a string'}, got {value!r}")
        blank, meaning = blank_setting(field, value)
        if blank:
            return meaning
        if field in NUMERIC_SETTINGS:
            try:
                return _number_checker(field)(value)
            except (TypeError, ValueError):
                pass
        return value.strip() if isinstance(value, str) else value


#: ``RAGSPINE_*`` variables that are not settings: read by this repository's own tools, never by the package —
#: ``RAGSPINE_DATA`` (the shared evaluation data, for benchmarks, notebooks and data-backed tests),
#: ``RAGSPINE_NOTEBOOK_LIMIT`` / ``RAGSPINE_NOTEBOOK_OUT`` (the notebooks' run), ``RAGSPINE_RECORD_PINS`` (tests).
#: The RAGSpine design's names of switches that are one setting here: each is refused, naming the setting to use
#: (two names for one switch would be two ways to do one thing; an unknown name is never ignored).
DESIGN_SWITCHES = {
    "RAGSPINE_ADAPTIVE": "RAGSPINE_ANSWER_GRAPH=adaptive (the graph `ragspine ask` answers with)",
    "RAGSPINE_CORRECTIVE": "RAGSPINE_ANSWER_GRAPH=corrective (the default graph of `ragspine ask`)",
    "RAGSPINE_SELF_RAG": "RAGSPINE_ANSWER_GRAPH=self_rag",
    "RAGSPINE_QUERY_DECOMPOSE": "RAGSPINE_QUERY_TRANSFORM=decompose",
    "RAGSPINE_HYDE": "RAGSPINE_QUERY_TRANSFORM=hyde",
    "RAGSPINE_MULTI_QUERY": "RAGSPINE_QUERY_TRANSFORM=multi_query",
    "RAGSPINE_RERANK": "RAGSPINE_RERANKER=<spec> (e.g. cross_encoder:<path>, auto)",
    "RAGSPINE_COLPALI": "nothing: visual document retrieval (ColPali) is out of this package's scope",
}

TOOL_VARIABLES = frozenset({"RAGSPINE_DATA", "RAGSPINE_NOTEBOOK_LIMIT", "RAGSPINE_NOTEBOOK_OUT", "RAGSPINE_RECORD_PINS"})


#: The ``RAGSPINE_*`` names of each ``.env`` file read, by path, with the file's identity when read (device, inode,
#: size, mtime in ns): a file is parsed again only when it changed, so :func:`get_settings` does not parse it twice.
_ENV_FILE_NAMES: dict[str, tuple[tuple[int, int, int, int], list[str]]] = {}


def _environment_names(env_file: object) -> list[str]:
    """The ``RAGSPINE_*`` names of the environment and of ``env_file`` (when it is a file), upper-cased as the
    settings read them."""
    names = [n for n in os.environ if n.upper().startswith("RAGSPINE_")]
    if isinstance(env_file, (str, os.PathLike)):
        path = os.fspath(env_file)
        try:
            st = os.stat(path)
        except OSError:
            return names
        if not stat.S_ISREG(st.st_mode):
            return names
        identity = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        cached = _ENV_FILE_NAMES.get(path)
        if cached is None or cached[0] != identity:
            from dotenv import dotenv_values

            cached = (identity, [n for n in dotenv_values(path) if n.upper().startswith("RAGSPINE_")])
            _ENV_FILE_NAMES[path] = cached
        names += cached[1]
    return names


def check_setting_names(names: Iterable[str], *, explicit: bool = False) -> None:
    """Refuse a setting name that is none: an unknown keyword of ``RagSpineSettings(...)`` (``explicit``), or a
    ``RAGSPINE_*`` variable of the environment or ``.env`` that no setting reads (:data:`TOOL_VARIABLES` aside) —
    never ignored, so a misspelt ``RAGSPINE_TOKENISER`` is not silently the default.

    Example:
        >>> check_setting_names(["RAGSPINE_K", "RAGSPINE_DATA"])
        >>> check_setting_names(["RAGSPINE_TOKENISER"])
        Traceback (most recent call last):
        ValueError: RAGSPINE_TOKENISER is not a langchain-ragspine setting (did you mean RAGSPINE_TOKENIZER?); unset it, or see RagSpineSettings for the settings

    Raises:
        ValueError: the first such name, with the closest setting (:func:`difflib.get_close_matches`).
    """
    fields = RagSpineSettings.model_fields
    if explicit:
        known = {*fields, "OLLAMA_HOST"}
        for name in names:
            if name not in known and not name.startswith("_"):  # _env_file & co.: pydantic-settings' own
                close = difflib.get_close_matches(name, sorted(fields), n=1, cutoff=0.6)
                hint = f" (did you mean {close[0]}?)" if close else ""
                raise ValueError(f"{name!r} is not a langchain-ragspine setting{hint}; the settings: {', '.join(fields)}")
        return
    variables = {setting_variable(f) for f in fields}
    for name in names:
        upper = name.upper()
        if upper in DESIGN_SWITCHES:
            raise ValueError(
                f"{name} is the RAGSpine design's name of a switch that is one setting here: set "
                f"{DESIGN_SWITCHES[upper]}, and unset {name}"
            )
        if upper not in variables and upper not in TOOL_VARIABLES:
            unprefixed = upper.removeprefix("RAGSPINE_")
            by_name = {v.removeprefix("RAGSPINE_"): v for v in variables}  # compare the names, not the prefix
            close = ([unprefixed] if unprefixed in variables  # RAGSPINE_OLLAMA_HOST: OLLAMA_HOST
                     else [by_name[c] for c in difflib.get_close_matches(unprefixed, sorted(by_name), n=1, cutoff=0.7)])
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ValueError(
                f"{name} is not a langchain-ragspine setting{hint}; unset it, or see RagSpineSettings for the settings"
            )


def get_settings() -> RagSpineSettings:
    """The settings as they are now: the environment and ``.env`` (in the working directory) read afresh.

    The one way the library reads configuration.  Not cached: a call costs about half a millisecond, so a variable
    changed at run time takes effect on the next call (and tests that monkeypatch the environment stay isolated).

    A bad value of a constrained setting does not fail here: it is held as written and refused where it is used
    (:func:`~langchain_ragspine.configured.configured_setting`), so reading the settings never breaks a command
    that does not use it.

    Raises:
        pydantic.ValidationError: only a value no field can hold (``settings_error_message`` names the variable).
    """
    return RagSpineSettings()


def settings_error_message(error: ValueError) -> str:
    """One line per bad setting of a :func:`get_settings` error, each naming its variable and value:
    ``RAGSPINE_STORE=3: …`` (what ``ragspine`` prints, instead of pydantic's report naming the field).  Any other
    ``ValueError`` is returned as its text."""
    from pydantic import ValidationError

    if not isinstance(error, ValidationError):
        return str(error)
    lines = []
    for item in error.errors(include_url=False):
        field = str(item["loc"][0]) if item.get("loc") else ""
        name = setting_variable(field)
        message = str(item.get("msg", "")).removeprefix("Value error, ")
        lines.append(f"{name}={item.get('input')!r}: {message}")
    return "\n".join(lines)
