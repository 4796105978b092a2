"""Extractive context compression: show the model only the sentences of each chunk that bear on the query.

Sentence-extraction compression keeps, per retrieved chunk, the sentences most related to the query and drops the
rest, shrinking the prompt without generating text (the extractive compressor of RECOMP: Xu, Shi & Choi, "RECOMP:
Improving Retrieval-Augmented LMs with Compression and Selective Augmentation", ICLR 2024; LangChain's
``EmbeddingsFilter`` / ``LLMChainExtractor`` are the embedding and LLM variants).  Sentences are scored
lexically, as in the package's extractive answer: the IDF-weighted share of the query's distinct tokens a sentence
contains (Luhn's sentence significance, "The Automatic Creation of Literature Abstracts", IBM J. R&D 1958), with
IDF over all candidate sentences of the call, so words every sentence shares weigh little.

The result goes to ``metadata["prompt_text"]``, the key the answer chain shows the model instead of
``page_content``; ``page_content``, ``id`` and all lineage (``doc_id``, ``chunk_id``, offsets, ``source_locator``,
``scores``) stay byte-identical, so citations still point at the verbatim chunk.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from pydantic import ConfigDict, PrivateAttr

from langchain_ragspine.arguments import PositiveIntField, known_fields
from langchain_ragspine.documents import check_documents
from langchain_ragspine.sensitivity import drop_restricted
from langchain_ragspine.text.sentences import line_sentence_spans
from langchain_ragspine.tokenizers import Tokenizer, get_tokenizer

__all__ = ["PROMPT_TEXT_KEY", "ExtractiveCompressor", "sentence_units"]

#: The metadata key of the text shown to a model instead of ``page_content``.
PROMPT_TEXT_KEY = "prompt_text"


def sentence_units(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` offsets of the sentences of ``text``: split at line breaks and at sentence ends
    (:func:`langchain_ragspine.text.sentences.line_sentence_spans`, the rules of
    :func:`~langchain_ragspine.text.sentences.sentence_spans`), surrounding white space excluded, blank pieces
    dropped."""
    return line_sentence_spans(text)


def _source_text(doc: Document) -> str:
    text = doc.metadata.get(PROMPT_TEXT_KEY)
    return text if isinstance(text, str) and text.strip() else doc.page_content


class ExtractiveCompressor(BaseDocumentCompressor):
    """Keep the sentences of each document most related to the query, in ``metadata["prompt_text"]``.

    Args:
        max_chars: characters of sentences kept per document (default 240; separators not counted).  A document
            whose text is at most this long is left as it is; a single best sentence longer than this is kept whole.
        tokenizer: tokenizer name or callable for matching query and sentence tokens (default ``"auto"``).
        separator: put between kept sentences that are not adjacent in the text (default ``" … "``); adjacent ones
            are kept as one verbatim slice.

    ``compress_documents(documents, query)`` drops RESTRICTED documents, then for each other document splits its
    text (an existing ``prompt_text``, else ``page_content``) into sentences (:func:`sentence_units`), scores
    them (module docstring), takes sentences best first (ties: earlier first) while they fit in ``max_chars``, and
    writes them in text order to ``metadata["prompt_text"]`` of a copy.  Sentences sharing no token with the query
    are not taken; when no sentence of a document shares one, its leading sentences are kept.  The documents stay
    in their order, none is dropped, and ``page_content`` and every other metadata key are unchanged.

    Raises:
        TypeError, ValueError: ``max_chars`` not an int ``>= 1``; an unknown tokenizer.
    """

    _known = known_fields()

    max_chars: PositiveIntField = 240
    tokenizer: str | Callable[[str], list[str]] = "auto"
    separator: str = " … "

    model_config = ConfigDict(arbitrary_types_allowed=True)

    _tokenize: Tokenizer = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        """Resolve the tokenizer."""
        self._tokenize = get_tokenizer(self.tokenizer)

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """Copies of the non-RESTRICTED ``documents`` with ``metadata["prompt_text"]`` (see the class docstring)."""
        docs = drop_restricted(check_documents(documents, f"{type(self).__name__}.compress_documents"))
        texts = [_source_text(d) for d in docs]
        long = [i for i, t in enumerate(texts) if len(t) > self.max_chars]
        if not long:
            return docs
        units = {i: sentence_units(texts[i]) for i in long}
        tokens = {i: [set(self._tokenize(texts[i][s:e])) for s, e in units[i]] for i in long}
        q_tokens = set(self._tokenize(query or ""))
        all_sets = [toks for sets in tokens.values() for toks in sets]
        weight = {}
        for t in q_tokens:  # Lucene's IDF over the sentences of this call (never negative)
            df = sum(1 for toks in all_sets if t in toks)
            weight[t] = math.log(1.0 + (len(all_sets) - df + 0.5) / (df + 0.5))
        out = list(docs)
        for i in long:
            scores = [sum(weight[t] for t in q_tokens & toks) for toks in tokens[i]]
            kept = self._choose(units[i], scores)
            if not kept:  # no sentence at all (white space only): nothing to compress
                continue
            md = dict(docs[i].metadata)
            md[PROMPT_TEXT_KEY] = self._render(texts[i], [units[i][j] for j in kept], kept)
            out[i] = Document(page_content=docs[i].page_content, metadata=md, id=docs[i].id)
        return out

    def _choose(self, units: list[tuple[int, int]], scores: list[float]) -> list[int]:
        """Indices of the sentences kept, in text order."""
        relevant = [j for j, s in enumerate(scores) if s > 0]
        order = sorted(relevant, key=lambda j: (-scores[j], j)) if relevant else list(range(len(units)))
        kept: list[int] = []
        used = 0
        for j in order:
            length = units[j][1] - units[j][0]
            if kept and used + length > self.max_chars:
                if relevant:
                    continue  # a shorter, less relevant sentence may still fit
                break  # the lead: stop at the first sentence that does not fit
            kept.append(j)
            used += length
            if used >= self.max_chars:
                break
        return sorted(kept)

    def _render(self, text: str, spans: list[tuple[int, int]], indices: list[int]) -> str:
        """The kept sentences in order: consecutive ones as one verbatim slice, others joined by ``separator``."""
        pieces: list[str] = []
        group_start, group_end, last = spans[0][0], spans[0][1], indices[0]
        for (s, e), j in zip(spans[1:], indices[1:], strict=True):
            if j == last + 1:
                group_end = e
            else:
                pieces.append(text[group_start:group_end])
                group_start, group_end = s, e
            last = j
        pieces.append(text[group_start:group_end])
        return self.separator.join(pieces)

    async def acompress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """Async twin of :meth:`compress_documents` (no I/O: runs inline)."""
        return self.compress_documents(documents, query, callbacks)
