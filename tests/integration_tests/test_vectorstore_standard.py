"""LangChain's standard vector-store suites (langchain-tests, sync and async) against RagSpineVectorStore, offline:
a fresh store directory per test, deterministic embeddings."""

from collections.abc import Generator
from pathlib import Path

import pytest
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore
from langchain_tests.integration_tests import VectorStoreIntegrationTests

from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.vectorstores import RagSpineVectorStore


class TestRagSpineVectorStoreStandard(VectorStoreIntegrationTests):
    @staticmethod
    def get_embeddings() -> Embeddings:
        return HashingEmbeddings(64)

    @pytest.fixture
    def vectorstore(self, tmp_path: Path) -> Generator[VectorStore, None, None]:  # type: ignore[override]
        store = RagSpineVectorStore(tmp_path / "store", self.get_embeddings())
        try:
            yield store
        finally:
            store.close()


class TestRagSpineVectorStoreStandardDefaultEmbeddings(TestRagSpineVectorStoreStandard):
    """The same suite with langchain-tests' own DeterministicFakeEmbedding (random vectors per text)."""

    get_embeddings = staticmethod(VectorStoreIntegrationTests.get_embeddings)


class TestRagSpineVectorStoreStandardTemporary(TestRagSpineVectorStoreStandard):
    """The same suite over a temporary store (``RagSpineVectorStore(embedding=...)``: no location, deleted on
    close), as LangChain's in-memory stores are used."""

    @pytest.fixture
    def vectorstore(self) -> Generator[VectorStore, None, None]:  # type: ignore[override]
        store = RagSpineVectorStore(embedding=self.get_embeddings())
        try:
            yield store
        finally:
            store.close()


class TestPostgresVectorStoreStandard(TestRagSpineVectorStoreStandard):
    """The same suite over PostgreSQL (``PostgresVectorStore``: ``RagSpineVectorStore`` over the PostgreSQL backend),
    a fresh schema per test (``pg_url``; skips, saying why, without the session's PostgreSQL)."""

    @pytest.fixture
    def vectorstore(self, pg_url: str) -> Generator[VectorStore, None, None]:  # type: ignore[override]
        from langchain_ragspine.vectorstores import PostgresVectorStore

        store = PostgresVectorStore(pg_url, self.get_embeddings())
        try:
            yield store
        finally:
            store.close()
