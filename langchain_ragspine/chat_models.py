"""Chat models from spec strings: :func:`make_chat_model` builds one, :func:`resolve_chat_model` also says which path
answers (an LLM, or the deterministic path when none is asked for or reachable).

Usage::

    from langchain_ragspine.chat_models import make_chat_model, resolve_chat_model

    make_chat_model()                      # RAGSPINE_LLM, else "none": None (no LLM, the deterministic path)
    make_chat_model("ollama:qwen2.5:7b")   # a ChatOllama at OLLAMA_HOST, temperature 0
    resolve_chat_model("auto").how         # "LLM path: ollama:qwen2.5:7b", or the deterministic path and why

The spec language is :func:`~langchain_ragspine.specs.parse_chat_model_spec`'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from langchain_ragspine._optional import import_optional
from langchain_ragspine.settings import from_setting, get_settings, ollama_base_url
from langchain_ragspine.specs import DEFAULT_CHAT_MODEL, parse_chat_model_spec

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

__all__ = [
    "DETERMINISTIC_PATH",
    "ChatModelChoice",
    "llm_is_reachable",
    "make_chat_model",
    "resolve_chat_model",
]


def make_chat_model(spec: str | BaseChatModel | None = None, **kwargs: object) -> BaseChatModel | None:
    """Build the chat model named by ``spec`` (default: ``RAGSPINE_LLM``, else ``"none"``: :data:`~langchain_ragspine.settings.DEFAULT_LLM`).

    No LLM is the library's default: without a spec and without ``RAGSPINE_LLM`` this returns ``None``, and every
    chain and graph of the package then runs its deterministic path (extractive answers, lexical graders), offline.

    Specs:

    * a ``BaseChatModel`` — returned as is (``kwargs`` are ignored).
    * ``none`` (any case, or an empty string) — ``None``: no LLM.
    * ``auto`` — :data:`~langchain_ragspine.specs.DEFAULT_CHAT_MODEL` when its server answers within a second (probed once, here), else
      ``None``; see :func:`resolve_chat_model`.
    * ``default`` / ``ollama`` — :data:`~langchain_ragspine.specs.DEFAULT_CHAT_MODEL` (``ollama:qwen2.5:7b``).
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
    kind, model = parse_chat_model_spec(spec)
    if kind == "none":
        return None
    if kind == "auto":
        return resolve_chat_model("auto", setting=None, **kwargs).llm
    raw = model
    options: dict[str, object] = dict(kwargs)
    if kind == "ollama":
        import_optional(
            "langchain_ollama", f"chat model spec {spec!r} needs langchain-ollama: pip install 'langchain-ragspine[ollama]'"
        )
        raw = f"ollama:{model}"
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

    ``spec`` (default: ``RAGSPINE_LLM``, else :data:`~langchain_ragspine.settings.DEFAULT_LLM`, ``"none"``): ``none`` → no LLM; ``auto`` →
    :data:`~langchain_ragspine.specs.DEFAULT_CHAT_MODEL` when its server answers
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
                head = from_setting(setting, raw)  # RAGSPINE_LLM='x': , as every setting
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


