"""The second-stage factory: rerankers and post-processing steps from spec strings (``RAGSPINE_RERANKER``,
``RAGSPINE_POSTPROCESSOR``, ``--rerank``, ``--postprocess``).

Usage::

    from langchain_ragspine.document_compressors.factory import make_compressors, make_reranker

    make_reranker("cross_encoder:hotchpotch/japanese-reranker-cross-encoder-xsmall-v1", k=5)
    make_compressors("llm", "mmr,lost_in_middle", k=6)   # [LLMListwiseReranker, MMRCompressor, LostInTheMiddleReorder]

The spec language is :func:`~langchain_ragspine.specs.parse_reranker_spec` /
:func:`~langchain_ragspine.specs.parse_postprocessor_spec`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_ragspine import chat_models
from langchain_ragspine.document_compressors.colbert import ColBERTReranker
from langchain_ragspine.document_compressors.compression import ExtractiveCompressor
from langchain_ragspine.document_compressors.cross_encoder import CrossEncoderReranker
from langchain_ragspine.document_compressors.learned.reranker import LearnedReranker
from langchain_ragspine.document_compressors.listwise import LLMListwiseReranker
from langchain_ragspine.document_compressors.mmr import MMRCompressor
from langchain_ragspine.document_compressors.reorder import LostInTheMiddleReorder
from langchain_ragspine.document_compressors.sparse import SparseReranker
from langchain_ragspine.embeddings.sparse import SentenceTransformerSparseEmbeddings
from langchain_ragspine.settings import DEFAULT_K
from langchain_ragspine.specs import (
    DEFAULT_CHAT_MODEL,
    configured_postprocessor,
    configured_reranker,
    parse_postprocessor_spec,
    parse_reranker_spec,
)

if TYPE_CHECKING:
    from langchain_core.documents import BaseDocumentCompressor
    from langchain_core.embeddings import Embeddings
    from langchain_core.language_models import BaseChatModel

__all__ = ["make_compressors", "make_postprocessor", "make_reranker"]


def make_reranker(
    spec: str | None = None, *, llm: BaseChatModel | None = None, **kwargs: Any
) -> BaseDocumentCompressor | None:
    """Build the second-stage reranker named by ``spec`` (default: ``RAGSPINE_RERANKER``, else ``"none"``).

    Specs:

    * ``none`` (or ``""``) — ``None``: no reranker; results stay exactly as the first stage ranked them.
    * ``auto`` — ``llm`` when a chat model is given (``llm=``) or configured (``RAGSPINE_LLM``), else ``None``:
      no reranker is bundled, so offline ``auto`` changes nothing (as ``RAGSPINE_EMBEDDING=auto`` without e5).
    * ``cross_encoder:<model>`` (also ``ce:<model>``) —
      :class:`~langchain_ragspine.document_compressors.CrossEncoderReranker` with a
      sentence-transformers ``CrossEncoder`` name (Hugging Face Hub) or local path, e.g.
      ``cross_encoder:hotchpotch/japanese-reranker-cross-encoder-xsmall-v1``.  Needs the ``st`` extra; a Hub name
      needs network access on first use.
    * ``llm`` — :class:`~langchain_ragspine.document_compressors.LLMListwiseReranker` (RankGPT) with ``llm``, else
      the chat model of ``RAGSPINE_LLM`` (:func:`~langchain_ragspine.chat_models.make_chat_model`).
    * ``llm:<chat model spec>`` — the same with ``make_chat_model(<spec>)``, e.g. ``llm:ollama:qwen2.5:7b``.
    * ``colbert:<path>`` — :class:`~langchain_ragspine.document_compressors.colbert.ColBERTReranker` (late
      interaction, MaxSim) with the ColBERT checkpoint in that local folder (a ``transformers`` model, pylate or
      Stanford ColBERT layout); never downloaded.  Needs ``transformers`` and ``torch`` (the ``st`` extra).
    * ``splade:<path>`` — :class:`~langchain_ragspine.document_compressors.sparse.SparseReranker` over the SPLADE
      model in that local folder (:class:`~langchain_ragspine.embeddings.sparse.SentenceTransformerSparseEmbeddings`).
    * ``learned`` — :class:`~langchain_ragspine.document_compressors.learned.LearnedReranker` with the bundled
      LambdaMART model (offline; needs LightGBM, the ``learn`` extra); ``learned:<model file>`` — with a model of
      ``ragspine fit-reranker``.

    ``kwargs`` go to the reranker's constructor (``k``, ``max_length``, ``window``, …).

    Raises:
        ValueError: an unknown spec (the message lists :data:`~langchain_ragspine.specs.RERANKER_SPECS`; from ``RAGSPINE_RERANKER`` it names
            the variable); ``llm`` with no chat model given or configured.
        ImportError: ``cross_encoder`` without sentence-transformers (the message names the ``st`` extra);
            ``colbert`` without transformers / torch.
        ModelFileError (a RagSpineError): the ``learned`` model file is missing, foreign or truncated (naming it).
        OSError: the cross-encoder model cannot be found; the ColBERT path is no loadable checkpoint folder (the
            message names it).
    """
    scheme, arg = parse_reranker_spec(spec if spec is not None else configured_reranker())
    if scheme == "none":
        return None
    if scheme == "cross_encoder":
        return CrossEncoderReranker(model=arg, **kwargs)
    if scheme == "colbert":
        return ColBERTReranker(model=arg, **kwargs)
    if scheme == "splade":
        return SparseReranker(embedding=SentenceTransformerSparseEmbeddings(arg), **kwargs)
    if scheme == "learned":
        return LearnedReranker(model=arg or None, **kwargs)
    if scheme == "auto":
        chat = chat_models.make_chat_model(llm)  # llm, else RAGSPINE_LLM's, else None
        return None if chat is None else LLMListwiseReranker(llm=chat, **kwargs)
    chat = chat_models.make_chat_model(arg or llm)  # the spec's model, else llm, else RAGSPINE_LLM's
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

    Steps (comma-separated, see :data:`~langchain_ragspine.specs.POSTPROCESSORS`):

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

