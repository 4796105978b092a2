"""Keyword-argument checks with a did-you-mean: an unknown or misspelt argument is an error, never silently dropped.

LangChain's pydantic-based classes ignore unknown constructor fields by default and ``BaseRetriever.invoke`` drops
keywords a retriever does not name, so ``BM25Retriever(top_k=3)`` or ``search_kwargs={"kk": 3}`` would quietly use
the defaults.  Every public entry point of the package that takes ``**kwargs`` checks them here, and the message
names the closest known names (:func:`difflib.get_close_matches`, Ratcliff/Obershelp similarity >= 0.6) and any
LangChain synonym (``top_k`` → ``k``).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping

__all__ = ["SYNONYMS", "check_arguments", "close_names", "unknown_arguments_message"]

#: Names users bring from LangChain, Haystack or LlamaIndex, and the package's name for the same thing.
SYNONYMS: Mapping[str, str] = {
    "top_k": "k",
    "topk": "k",
    "similarity_top_k": "k",
    "n": "k",
    "num_results": "k",
    "filters": "filter",
    "where": "filter",
    "embeddings": "embedding",
    "embedding_function": "embedding",
    "documents": "docs",
    "llm_chain": "llm",
}


def unknown_arguments_message(owner: str, unknown: Iterable[str], known: Iterable[str], *, what: str = "argument") -> str:
    """One line naming every unknown argument of ``owner`` with its closest known names.

    Example:
        >>> unknown_arguments_message("BM25Retriever", ["top_k", "kk"], ["k", "k1", "b", "tokenizer"])
        "BM25Retriever got unexpected arguments 'top_k' (did you mean 'k'?), 'kk' (did you mean 'k'?); known: 'b', 'k', 'k1', 'tokenizer'"
    """
    names = sorted(set(known))
    parts = []
    for name in unknown:
        close = close_names(name, names)
        hint = f" (did you mean {', '.join(repr(c) for c in close)}?)" if close else ""
        parts.append(f"{name!r}{hint}")
    plural = "s" if len(parts) > 1 else ""
    return f"{owner} got unexpected {what}{plural} {', '.join(parts)}; known: {', '.join(repr(n) for n in names)}"


def close_names(name: str, known: Iterable[str]) -> list[str]:
    """The known names ``name`` may have meant: its :data:`SYNONYMS` entry when known, then up to 3 close matches
    (:func:`difflib.get_close_matches`, similarity >= 0.6); ``[]`` when none.

    Example:
        >>> close_names("filter", ["question", "messages", "filters"]), close_names("summary", ["filters"])
        (['filters'], [])
    """
    names = sorted(set(known))
    close = [SYNONYMS[name]] if SYNONYMS.get(name) in names else []
    return close + [c for c in difflib.get_close_matches(name, names, n=3, cutoff=0.6) if c not in close]


def check_arguments(owner: str, given: Iterable[str], known: Iterable[str], *, what: str = "argument") -> None:
    """Raise ``TypeError`` when a name in ``given`` is not in ``known`` (see :func:`unknown_arguments_message`).

    Raises:
        TypeError: an unknown name, with a did-you-mean.
    """
    known_set = set(known)
    unknown = [n for n in given if n not in known_set]
    if unknown:
        raise TypeError(unknown_arguments_message(owner, unknown, known_set, what=what))
