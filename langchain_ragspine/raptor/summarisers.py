"""What writes a RAPTOR summary node's text from its children's texts (:mod:`langchain_ragspine.raptor.tree`).

::

    ExtractiveSummariser(max_chars=400).summarise(["梅雨は六月に始まる。…", "…"])   # verbatim sentences, offline
    LLMSummariser(chat_model).summarise(texts)                                      # opt-in: a chat model writes it

RAPTOR (Sarthi et al., ICLR 2024, section 3) has a language model summarise each cluster.  The default here needs
no model: :class:`ExtractiveSummariser` keeps the cluster's most *central* sentences verbatim — a sentence's
centrality is the mean, over its distinct content terms (:func:`~langchain_ragspine.stopwords.content_terms`, the
``cjk`` tokenizer: no MeCab), of the share of the cluster's children that hold the term — picked greedily (one per
child first, so a summary covers its children), up to ``max_chars``, in the children's order.  A summary node is a
synthesis either way: it is searched, never cited (:class:`~langchain_ragspine.retrievers.raptor.RaptorRetriever`
resolves it to its member chunks).

RESTRICTED chunks never reach a summariser: the tree builder drops them before anything is embedded, clustered or
summarised, so a summariser never sees their text and an LLM never gets it in a prompt.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage

from langchain_ragspine.arguments import check_int
from langchain_ragspine.stopwords import content_terms
from langchain_ragspine.text.sentences import sentence_spans

__all__ = ["SUMMARY_PROMPT", "ExtractiveSummariser", "LLMSummariser", "Summariser"]

logger = logging.getLogger(__name__)


class Summariser:
    """The summariser slot: :meth:`summarise` turns children's texts into one summary text; :meth:`config` is the
    JSON record a saved tree keeps (``name`` first).  Subclass it for your own."""

    name = "summariser"

    def summarise(self, texts: Sequence[str]) -> str:  # pragma: no cover - every summariser overrides it
        """The summary of ``texts`` (the children's texts, in order)."""
        raise NotImplementedError

    def config(self) -> dict[str, Any]:
        """What a saved tree records of this summariser (JSON-able)."""
        return {"name": self.name}


class ExtractiveSummariser(Summariser):
    """The default, offline summariser: the cluster's most central sentences, verbatim (module docstring).

    Args:
        max_chars: the summary's length budget in characters (default 400, about one chunk); at least one sentence
            is kept whatever its length.

    Raises:
        ValueError: ``max_chars < 1``.

    Example:
        >>> s = ExtractiveSummariser(max_chars=60)
        >>> s.summarise(["Kyoto has temples. Kyoto station is big.", "Osaka has a castle. Kyoto temples are old."])
        'Kyoto has temples. Kyoto temples are old.'
    """

    name = "extractive"

    def __init__(self, max_chars: int = 400) -> None:
        check_int(max_chars, "max_chars")
        self.max_chars = max_chars

    def config(self) -> dict[str, Any]:
        """``{"name": "extractive", "max_chars": …}``."""
        return {"name": self.name, "max_chars": self.max_chars}

    def summarise(self, texts: Sequence[str]) -> str:
        """The most central sentences of ``texts`` (see the class docstring), joined in their order; ``""`` for no
        text."""
        sentences: list[tuple[int, int, str, frozenset[str]]] = []  # (child, position, sentence, terms)
        child_terms: list[set[str]] = []
        for c, text in enumerate(texts):
            terms: set[str] = set()
            for p, (a, b) in enumerate(sentence_spans(text)):
                sentence = text[a:b].strip()
                if not sentence:
                    continue
                st = frozenset(content_terms(sentence, "cjk"))
                sentences.append((c, p, sentence, st))
                terms |= st
            child_terms.append(terms)
        if not sentences:
            return ""
        n = max(len(texts), 1)
        share: dict[str, int] = {}
        for terms in child_terms:
            for t in terms:
                share[t] = share.get(t, 0) + 1

        def centrality(item: tuple[int, int, str, frozenset[str]]) -> float:
            terms = item[3]
            return sum(share[t] for t in terms) / (n * len(terms)) if terms else 0.0

        ranked = sorted(range(len(sentences)), key=lambda i: (-centrality(sentences[i]), sentences[i][0],
                                                              sentences[i][1]))
        chosen: list[int] = []
        used = 0
        covered: set[int] = set()
        for first_pass in (True, False):
            for i in ranked:
                child, _, sentence, _ = sentences[i]
                if i in chosen or (first_pass and child in covered):
                    continue
                cost = len(sentence) + (1 if chosen else 0)
                if chosen and used + cost > self.max_chars:
                    continue
                chosen.append(i)
                covered.add(child)
                used += cost
        chosen.sort(key=lambda i: (sentences[i][0], sentences[i][1]))
        return " ".join(sentences[i][2] for i in chosen)


#: The prompt of :class:`LLMSummariser` (``{passages}``: the children's texts, numbered).
SUMMARY_PROMPT = (
    "Write a short summary of the following passages, in their language. Keep names, numbers and dates exactly as "
    "written; add nothing that is not in the passages. Answer with the summary only.\n\n{passages}"
)


class LLMSummariser(Summariser):
    """RAPTOR's abstractive summary (opt-in): a chat model summarises the children's texts (:data:`SUMMARY_PROMPT`).

    Args:
        llm: any LangChain ``BaseChatModel``.
        max_input_chars: the children's texts are cut to this many characters in all (default 6,000), each child
            getting an equal share.
        fallback: what writes the summary when the model fails or answers blank (default
            :class:`ExtractiveSummariser`): an LLM failure degrades, it never fails the build.

    Raises:
        TypeError: ``llm`` is not a ``BaseChatModel``.
        ValueError: ``max_input_chars < 1``.
    """

    name = "llm"

    def __init__(self, llm: BaseChatModel, *, max_input_chars: int = 6000, fallback: Summariser | None = None) -> None:
        if not isinstance(llm, BaseChatModel):
            raise TypeError(f"LLMSummariser takes a BaseChatModel, got {type(llm).__name__}")
        check_int(max_input_chars, "max_input_chars")
        self.llm = llm
        self.max_input_chars = max_input_chars
        self.fallback = fallback if fallback is not None else ExtractiveSummariser()
        #: Summaries written by the fallback because the model failed or answered blank.
        self.fallbacks = 0

    def config(self) -> dict[str, Any]:
        """``{"name": "llm", "max_input_chars": …}`` (the model itself is not recorded)."""
        return {"name": self.name, "max_input_chars": self.max_input_chars}

    def summarise(self, texts: Sequence[str]) -> str:
        """The model's summary of ``texts``; the fallback's when the model raises or answers blank."""
        share = max(self.max_input_chars // max(len(texts), 1), 1)
        passages = "\n\n".join(f"[{i + 1}] {t[:share].strip()}" for i, t in enumerate(texts))
        try:
            reply = self.llm.invoke([HumanMessage(SUMMARY_PROMPT.format(passages=passages))])
            text = reply.content if isinstance(reply.content, str) else str(reply.content)
        except Exception as e:  # an LLM failure degrades to the extractive summary
            logger.warning("LLMSummariser: the model failed (%s: %s); extractive summary instead", type(e).__name__, e)
            text = ""
        if not text.strip():
            self.fallbacks += 1
            return self.fallback.summarise(texts)
        return text.strip()
