"""The RESTRICTED gate: a ``BaseDocumentCompressor`` that removes restricted chunks.

A chunk is restricted when ``metadata["sensitivity"]``, normalised by :func:`normalize_label`, equals
:data:`RESTRICTED_SENSITIVITY`.  The normalisation folds what a person would still read as "RESTRICTED": case,
surrounding whitespace, full-width letters (``ＲＥＳＴＲＩＣＴＥＤ``, easy to type with a Japanese input method),
invisible format characters (a zero-width space), and diacritics (a Turkish ``İ``).  The gate runs before anything reaches a prompt and at every exit of the package
(``ragspine search``, graph outputs, listwise rerank input); :func:`is_restricted` is the one test all of them use.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document

#: The one sensitivity label that never leaves the package (compared after ``strip().upper()``).
RESTRICTED_SENSITIVITY = "RESTRICTED"


#: The labels the loader knows; any other label is kept but warned about.
KNOWN_SENSITIVITIES = ("PUBLIC", "INTERNAL", "CONFIDENTIAL", RESTRICTED_SENSITIVITY)


def normalize_label(value: str) -> str:
    """A sensitivity label in canonical form: NFKD, combining marks and format characters (Unicode categories
    Mn, Me, Cf) removed, NFKC, whitespace stripped, upper-cased.  ``" ｒｅｓｔｒｉｃｔｅｄ\u200b"`` →
    ``"RESTRICTED"``."""
    decomposed = unicodedata.normalize("NFKD", value)
    kept = "".join(ch for ch in decomposed if unicodedata.category(ch) not in ("Mn", "Me", "Cf"))
    return unicodedata.normalize("NFKC", kept).strip().upper()


def is_restricted(metadata: Any) -> bool:
    """``True`` when ``metadata`` (a mapping, or a ``Document``) is labelled RESTRICTED (see
    :func:`normalize_label`): under the key ``sensitivity`` in any case, as a string or inside a list of labels."""
    if isinstance(metadata, Document):
        metadata = metadata.metadata
    if not isinstance(metadata, Mapping):
        return False
    for key, value in metadata.items():
        # fail closed on documents from other loaders: `Sensitivity`, ` SENSITIVITY `, and list-valued labels
        if isinstance(key, str) and key.strip().lower() == "sensitivity":
            values = value if isinstance(value, (list, tuple, set, frozenset)) else [value]
            if any(isinstance(v, str) and normalize_label(v) == RESTRICTED_SENSITIVITY for v in values):
                return True
    return False


def drop_restricted(documents: Iterable[Document]) -> list[Document]:
    """The documents that are not RESTRICTED, in their original order."""
    return [d for d in documents if not is_restricted(d.metadata)]


class RestrictedGate(BaseDocumentCompressor):
    """Drop every document whose ``metadata["sensitivity"]`` is ``RESTRICTED`` (see :func:`normalize_label`).

    Use it as the first compressor in a ``ContextualCompressionRetriever`` or ``DocumentCompressorPipeline``, or as a
    graph node, so restricted text cannot reach an LLM.  Order and all other documents are kept unchanged; the input
    sequence is not modified.
    """

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """Return ``documents`` without the RESTRICTED ones (``query`` is unused)."""
        return drop_restricted(documents)

    async def acompress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        """Async twin of :meth:`compress_documents`."""
        return drop_restricted(documents)
