"""No RESTRICTED text reaches an embedding model: not from a chunker, an ingest, a vector store or a transform.

Issue 25: ``--chunker semantic`` sent every RESTRICTED document's sentences to ``embed_documents`` (with a remote
embedding service the text leaves the machine).  Every ``HashingEmbeddings`` call is recorded here (the class's
methods are wrapped, so each path is caught whichever object it builds), and no recorded text may hold the canary of
the RESTRICTED document; a public document's text must be recorded, so the spy cannot pass by seeing nothing.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.documents import Document

from langchain_ragspine.cli import main
from langchain_ragspine.document_compressors import MMRCompressor
from langchain_ragspine.document_loaders import CorpusLoader
from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.pipeline.ingest import ingest
from langchain_ragspine.pipeline.sources import open_retriever, search
from langchain_ragspine.retrievers import DenseRetriever, HybridRetriever
from langchain_ragspine.text_splitters import SemanticTextSplitter
from langchain_ragspine.text_splitters.chunkers import CHUNKERS, make_chunker
from langchain_ragspine.vectorstores import RagSpineVectorStore

CANARY = "CANARYZQX"
PUBLIC_WORD = "zebrafinch"
SECRET_TEXT = (
    f"# Keys\n\nThe vault code is {CANARY} one. Guards rotate at noon. {CANARY} opens the east door.\n\n"
    f"Payroll runs monthly. Bonuses are {CANARY} secret. The safe is in room nine.\n"
)
PUBLIC_TEXT = (
    f"# Birds\n\nThe {PUBLIC_WORD} sings at dawn. Finches eat seeds. Sparrows nest in eaves.\n\n"
    "Stocks fell today. Markets were calm. Bonds rose slightly.\n"
)


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every text any HashingEmbeddings is asked to embed (documents and queries, sync and async)."""
    texts: list[str] = []
    docs, query = HashingEmbeddings.embed_documents, HashingEmbeddings.embed_query

    def embed_documents(self: HashingEmbeddings, batch: list[str]) -> list[list[float]]:
        texts.extend(batch)
        return docs(self, batch)

    def embed_query(self: HashingEmbeddings, text: str) -> list[float]:
        texts.append(text)
        return query(self, text)

    monkeypatch.setattr(HashingEmbeddings, "embed_documents", embed_documents)
    monkeypatch.setattr(HashingEmbeddings, "embed_query", embed_query)
    yield texts


def _assert_gated(texts: list[str]) -> None:
    assert not [t for t in texts if CANARY in t], "RESTRICTED text reached the embedding model"
    assert any(PUBLIC_WORD in t for t in texts), "the spy saw no public text: the test would pass vacuously"


def _corpus(root: Path, secret_meta: str = "---\nsensitivity: RESTRICTED\n---\n") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "birds.md").write_text(PUBLIC_TEXT, "utf-8")
    (root / "keys.md").write_text(secret_meta + SECRET_TEXT, "utf-8")
    return root


def _docs() -> list[Document]:
    return [
        Document(page_content=PUBLIC_TEXT, metadata={"doc_id": "birds", "sensitivity": "PUBLIC"}),
        Document(page_content=SECRET_TEXT, metadata={"doc_id": "keys", "Sensitivity": " restricted "}),
    ]


# -- every chunker ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", CHUNKERS)
def test_no_chunker_embeds_a_restricted_document(name: str, seen: list[str]) -> None:
    splitter, _ = make_chunker(name, chunk_size=120, chunk_overlap=20, embedding=HashingEmbeddings(64))
    chunks = splitter.split_documents(_docs())
    secret = [c for c in chunks if c.metadata["doc_id"] == "keys"]
    assert secret and all(SECRET_TEXT[c.metadata["start_index"]:c.metadata["end_index"]] == c.page_content
                          for c in secret)  # still chunked (the store versions it), verbatim
    assert not [t for t in seen if CANARY in t]
    if name == "semantic":
        _assert_gated(seen)
        # split as the paragraph splitter splits it, with the same budgets
        paragraph, _ = make_chunker("paragraph", chunk_size=120, chunk_overlap=20)
        assert [c.page_content for c in secret] == [c.page_content for c in paragraph.split_documents(_docs()[1:])]


def test_semantic_splitter_create_documents_and_transform_documents_gate(seen: list[str]) -> None:
    splitter = SemanticTextSplitter(HashingEmbeddings(64), chunk_size=120, chunk_overlap=20)
    splitter.create_documents([PUBLIC_TEXT, SECRET_TEXT], [{"doc_id": "b"}, {"sensitivity": ["INTERNAL", "RESTRICTED"]}])
    splitter.transform_documents(_docs())
    _assert_gated(seen)


# -- every ingest path -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", CHUNKERS)
def test_python_ingest_embeds_no_restricted_text_with_any_chunker(name: str, tmp_path: Path, seen: list[str]) -> None:
    corpus = _corpus(tmp_path / "corpus")
    ingest(corpus, tmp_path / "S", embedding=HashingEmbeddings(64), mode="hybrid", chunker=name, chunk_size=120,
           chunk_overlap=20, progress=False)
    for mode in ("hybrid", "vector"):
        hits = search(open_retriever(tmp_path / "S", mode=mode, embedding=HashingEmbeddings(64)), "vault code", k=6)
        assert all(CANARY not in d.page_content for d in hits)
    _assert_gated(seen)


def test_python_ingest_semantic_with_contextual_headers_and_a_sidecar_label(tmp_path: Path, seen: list[str]) -> None:
    corpus = _corpus(tmp_path / "corpus", secret_meta="")
    (corpus / "keys.json").write_text(json.dumps({"sensitivity": "ＲＥＳＴＲＩＣＴＥＤ"}), "utf-8")
    summary = ingest(corpus, tmp_path / "S", embedding=HashingEmbeddings(64), chunker="semantic", contextual=True,
                     progress=False)
    assert summary.documents == 2
    _assert_gated(seen)


def test_python_ingest_of_a_relabelled_document_embeds_none_of_it(tmp_path: Path, seen: list[str]) -> None:
    corpus = _corpus(tmp_path / "corpus", secret_meta="---\nsensitivity: PUBLIC\n---\n")
    (corpus / "keys.md").write_text(SECRET_TEXT.replace(CANARY, "placeholder"), "utf-8")
    ingest(corpus, tmp_path / "S", embedding="hashing", chunker="semantic", progress=False)
    _corpus(corpus)  # the document now holds the canary and is RESTRICTED
    seen.clear()
    ingest(corpus, tmp_path / "S", embedding="hashing", chunker="semantic", progress=False)
    assert not [t for t in seen if CANARY in t]


def test_cli_ingest_semantic_embeds_no_restricted_text(tmp_path: Path, seen: list[str], capsys) -> None:
    corpus = _corpus(tmp_path / "corpus")
    assert main(["ingest", str(corpus), "--store", str(tmp_path / "S"), "--embedding", "hashing", "--chunker",
                 "semantic", "--mode", "hybrid"]) == 0
    assert main(["search", "vault code", "--store", str(tmp_path / "S"), "--mode", "hybrid", "--json"]) == 0
    assert CANARY not in capsys.readouterr().out
    _assert_gated(seen)


def test_vector_store_writes_embed_no_restricted_text(tmp_path: Path, seen: list[str]) -> None:
    secret = {"doc_id": "keys", "sensitivity": "RESTRICTED"}
    store = RagSpineVectorStore(tmp_path / "A", HashingEmbeddings(64))
    store.add_documents([Document(page_content=PUBLIC_TEXT, metadata={"doc_id": "birds"}),
                         Document(page_content=SECRET_TEXT, metadata=secret)], ids=["b", "k"])
    store.add_texts([f"{CANARY} two"], [secret], ids=["k2"])
    asyncio.run(store.aadd_texts([f"{CANARY} three"], [secret], ids=["k3"]))
    other = RagSpineVectorStore.from_texts([PUBLIC_TEXT, f"{CANARY} four"], HashingEmbeddings(64),
                                           [{"doc_id": "b"}, secret], store_dir=tmp_path / "B")
    for s in (store, other):
        for search_type in ("similarity", "mmr", "hybrid", "bm25"):
            assert all(CANARY not in d.page_content for d in s.search("vault", search_type, k=4))
        s.close()
    _assert_gated(seen)


def test_retrievers_and_compressors_embed_no_restricted_text(seen: list[str]) -> None:
    docs = _docs()
    DenseRetriever.from_documents(docs, HashingEmbeddings(64)).invoke("vault")
    HybridRetriever.from_documents(docs, embedding=HashingEmbeddings(64)).invoke("vault")
    MMRCompressor(embeddings=HashingEmbeddings(64)).compress_documents(docs, "vault")
    asyncio.run(MMRCompressor(embeddings=HashingEmbeddings(64)).acompress_documents(docs, "vault"))
    _assert_gated(seen)


def test_the_loader_labels_reach_the_semantic_splitter(tmp_path: Path, seen: list[str]) -> None:
    docs = CorpusLoader(_corpus(tmp_path / "corpus")).load()
    SemanticTextSplitter(HashingEmbeddings(64)).split_documents(docs)
    _assert_gated(seen)


# -- PostgreSQL ------------------------------------------------------------------------------------------------------
def test_postgres_ingest_and_vector_store_embed_no_restricted_text(tmp_path: Path, pg_url: str,
                                                                   seen: list[str]) -> None:
    from langchain_ragspine.vectorstores import PostgresVectorStore

    ingest(_corpus(tmp_path / "corpus"), pg_url, embedding="hashing", chunker="semantic", progress=False)
    assert all(CANARY not in d.page_content for d in search(open_retriever(pg_url, mode="hybrid"), "vault", k=6))
    store = PostgresVectorStore(pg_url, HashingEmbeddings())
    secret = {"doc_id": "keys2", "sensitivity": "RESTRICTED"}
    store.add_documents([Document(page_content=f"{CANARY} five", metadata=secret)])
    store.add_texts([f"{CANARY} six", f"{PUBLIC_WORD} seven"], [secret, {"doc_id": "p7"}])
    PostgresVectorStore.from_texts([f"{CANARY} eight"], HashingEmbeddings(), [secret], url=pg_url)
    assert all(CANARY not in d.page_content for d in store.similarity_search("vault", k=8))
    _assert_gated(seen)
