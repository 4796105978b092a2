"""The old home of the settings and the factories (before issue 26, C1-C2): every name it had, re-exported from where
it lives now, for one release; importing it warns (``DeprecationWarning``, naming each name's home).  No module of
the package imports it (``tests/unit_tests/test_import_graph.py``, rule 4); new code imports from the homes:

* :mod:`langchain_ragspine.settings` — :class:`RagSpineSettings`, :func:`get_settings` and the numeric checks (a
  leaf: it imports nothing from the package);
* :mod:`langchain_ragspine.configured` — :func:`configured_setting`, every checked setting;
* :mod:`langchain_ragspine.specs` — the spec strings (query transforms, rerankers, post-processors, embeddings,
  chat models) and their ``configured_*`` readers;
* :mod:`langchain_ragspine.embeddings.factory`, :mod:`langchain_ragspine.chat_models`,
  :mod:`langchain_ragspine.retrievers.transforms`, :mod:`langchain_ragspine.document_compressors.factory` — the
  factories, each next to what it makes;
* :mod:`langchain_ragspine.pipeline.modes` — ``RETRIEVAL_MODES`` / ``LEXICAL_MODES``;
  :mod:`langchain_ragspine.arguments` — ``DEFAULT_FETCH_K``.
"""

from langchain_ragspine._stacklevel import warn_moved as _warn_moved
from langchain_ragspine.arguments import DEFAULT_FETCH_K
from langchain_ragspine.chat_models import (
    DETERMINISTIC_PATH,
    ChatModelChoice,
    llm_is_reachable,
    make_chat_model,
    resolve_chat_model,
)
from langchain_ragspine.configured import configured_setting
from langchain_ragspine.document_compressors.factory import (
    make_compressors,
    make_postprocessor,
    make_reranker,
)
from langchain_ragspine.embeddings.factory import make_embeddings, resolve_embedding
from langchain_ragspine.pipeline.modes import LEXICAL_MODES, RETRIEVAL_MODES
from langchain_ragspine.retrievers.transforms import make_query_transform
from langchain_ragspine.settings import (
    CHECKED_WHERE_USED,
    DEFAULT_K,
    DEFAULT_LLM,
    DEFAULT_OLLAMA_HOST,
    MAX_STATEMENT_TIMEOUT,
    RagSpineSettings,
    check_timeout,
    get_settings,
    ollama_base_url,
    setting_variable,
    settings_error_message,
)
from langchain_ragspine.specs import (
    DEFAULT_CHAT_MODEL,
    LLM_QUERY_TRANSFORMS,
    POSTPROCESSORS,
    QUERY_TRANSFORMS,
    RERANKER_SPECS,
    configured_postprocessor,
    configured_query_transform,
    configured_reranker,
    normalise_postprocessor_spec,
    normalise_reranker_spec,
    parse_postprocessor_spec,
    parse_reranker_spec,
    resolve_query_transform,
)

_warn_moved(
    __name__,
    {
        "langchain_ragspine.arguments": ["DEFAULT_FETCH_K"],
        "langchain_ragspine.chat_models": [
            "ChatModelChoice", "DETERMINISTIC_PATH", "llm_is_reachable", "make_chat_model",
            "resolve_chat_model",
        ],
        "langchain_ragspine.configured": ["configured_setting"],
        "langchain_ragspine.document_compressors.factory": [
            "make_compressors", "make_postprocessor", "make_reranker",
        ],
        "langchain_ragspine.embeddings.factory": ["make_embeddings", "resolve_embedding"],
        "langchain_ragspine.pipeline.modes": ["LEXICAL_MODES", "RETRIEVAL_MODES"],
        "langchain_ragspine.retrievers.transforms": ["make_query_transform"],
        "langchain_ragspine.settings": [
            "CHECKED_WHERE_USED", "DEFAULT_K", "DEFAULT_LLM", "DEFAULT_OLLAMA_HOST", "MAX_STATEMENT_TIMEOUT",
            "RagSpineSettings", "check_timeout", "get_settings", "ollama_base_url", "setting_variable",
            "settings_error_message",
        ],
        "langchain_ragspine.specs": [
            "DEFAULT_CHAT_MODEL", "LLM_QUERY_TRANSFORMS", "POSTPROCESSORS", "QUERY_TRANSFORMS",
            "RERANKER_SPECS", "configured_postprocessor", "configured_query_transform", "configured_reranker",
            "normalise_postprocessor_spec", "normalise_reranker_spec", "parse_postprocessor_spec",
            "parse_reranker_spec", "resolve_query_transform",
        ],
    },
)

__all__ = [
    "CHECKED_WHERE_USED",
    "DEFAULT_CHAT_MODEL",
    "DEFAULT_FETCH_K",
    "DEFAULT_K",
    "DEFAULT_LLM",
    "DEFAULT_OLLAMA_HOST",
    "DETERMINISTIC_PATH",
    "LEXICAL_MODES",
    "LLM_QUERY_TRANSFORMS",
    "MAX_STATEMENT_TIMEOUT",
    "POSTPROCESSORS",
    "QUERY_TRANSFORMS",
    "RERANKER_SPECS",
    "RETRIEVAL_MODES",
    "ChatModelChoice",
    "RagSpineSettings",
    "check_timeout",
    "configured_postprocessor",
    "configured_query_transform",
    "configured_reranker",
    "configured_setting",
    "get_settings",
    "llm_is_reachable",
    "make_chat_model",
    "make_compressors",
    "make_embeddings",
    "make_postprocessor",
    "make_query_transform",
    "make_reranker",
    "normalise_postprocessor_spec",
    "normalise_reranker_spec",
    "ollama_base_url",
    "parse_postprocessor_spec",
    "parse_reranker_spec",
    "resolve_chat_model",
    "resolve_embedding",
    "resolve_query_transform",
    "setting_variable",
    "settings_error_message",
]
