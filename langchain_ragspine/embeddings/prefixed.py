"""Role prefixes for asymmetric embedding models, around any LangChain ``Embeddings``.

Many retrieval embedders are trained with different prefixes for queries and documents and lose accuracy without
them: multilingual-e5 uses ``"query: "`` / ``"passage: "`` (Wang et al., 2024), ruri-v3 (Tsukagoshi & Shimizu,
"Ruri: Japanese General Text Embeddings", 2024) uses ``"検索クエリ: "`` / ``"検索文書: "``.
:class:`PrefixedEmbeddings` adds them; :data:`PREFIX_PRESETS` names the known pairs.
"""

from __future__ import annotations

from langchain_core.embeddings import Embeddings

__all__ = [
    "PREFIX_PRESETS",
    "PrefixedEmbeddings",
    "preset_for_model",
]

#: Known ``(query_prefix, document_prefix)`` pairs, by preset name.
PREFIX_PRESETS: dict[str, tuple[str, str]] = {
    "e5": ("query: ", "passage: "),
    "ruri-v3": ("検索クエリ: ", "検索文書: "),
    "none": ("", ""),
}


def preset_for_model(name: str) -> str:
    """The preset a model name implies: ``"ruri-v3"`` for ruri-v3 models, ``"e5"`` for (multilingual-)e5 ones,
    else ``"none"``."""
    low = name.lower()
    if "ruri-v3" in low or "ruri_v3" in low:
        return "ruri-v3"
    if "e5" in low.replace("\\", "/").split("/")[-1]:
        return "e5"
    return "none"


class PrefixedEmbeddings(Embeddings):
    """Wrap ``inner`` so queries get ``query_prefix`` and documents get ``document_prefix`` before embedding.

    Args:
        inner: any LangChain ``Embeddings``.
        query_prefix / document_prefix: strings prepended verbatim (default ``""``).
        preset: a key of :data:`PREFIX_PRESETS`; explicit prefixes win over it.

    Raises:
        ValueError: unknown ``preset``.
    """

    def __init__(
        self,
        inner: Embeddings,
        *,
        query_prefix: str | None = None,
        document_prefix: str | None = None,
        preset: str | None = None,
    ) -> None:
        q, d = ("", "")
        if preset is not None:
            if preset not in PREFIX_PRESETS:
                raise ValueError(f"unknown prefix preset {preset!r}; choose one of {sorted(PREFIX_PRESETS)}")
            q, d = PREFIX_PRESETS[preset]
        self.inner = inner
        self.query_prefix = q if query_prefix is None else query_prefix
        self.document_prefix = d if document_prefix is None else document_prefix

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed ``document_prefix + text`` for each text."""
        return self.inner.embed_documents([self.document_prefix + t for t in texts])

    def embed_query(self, text: str) -> list[float]:
        """Embed ``query_prefix + text``."""
        return self.inner.embed_query(self.query_prefix + text)

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """Async twin of :meth:`embed_documents`."""
        return await self.inner.aembed_documents([self.document_prefix + t for t in texts])

    async def aembed_query(self, text: str) -> list[float]:
        """Async twin of :meth:`embed_query`."""
        return await self.inner.aembed_query(self.query_prefix + text)
