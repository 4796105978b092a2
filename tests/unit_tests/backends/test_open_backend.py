"""``open_backend`` is the one place that decides whether a store is a directory or a PostgreSQL URL (issue 26, B4).

What it returns for each spelling of a store, what the handles say (where the store is, how messages name it, its
document count and chunker record), and — read from the source — that no other module of the package tests a store
for being a URL, except the PostgreSQL classes refusing a non-URL handed to them.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import langchain_ragspine
from langchain_ragspine.backends.directory.chunk_store import INGEST_WRITER
from langchain_ragspine.backends.open import DirectoryLocation, PostgresLocation, open_backend
from langchain_ragspine.pipeline.ingest import ingest

PACKAGE = Path(langchain_ragspine.__file__).parent


@pytest.mark.parametrize(
    "store", ["postgresql://u@h/db", "postgres://h/db", "  PostgreSQL://h/db ", "POSTGRES://h:5432/db?sslmode=off"]
)
def test_a_postgresql_url_opens_the_postgres_backend_as_given(store: str) -> None:
    backend = open_backend(store)
    assert isinstance(backend, PostgresLocation)
    assert backend.location == store  # the CLI hands the URL on unchanged
    assert backend.url == store.strip()
    assert (backend.keeps_parents, backend.contextual_headers) == (False, False)
    assert backend.recorded_chunker() == (None, False)


@pytest.mark.parametrize("store", ["store", "./a/b", "postgresql:dir", "C:/x"])  # a URL: refused below
def test_anything_else_is_a_store_directory(store: str) -> None:
    backend = open_backend(store)
    assert backend == DirectoryLocation(Path(store))
    assert backend.location == backend.shown == Path(store)


def test_a_path_is_always_a_directory_even_one_spelt_like_a_url() -> None:
    """``Path`` folds the ``//`` of a URL: a ``Path`` given is a directory, as before open_backend."""
    assert isinstance(open_backend(Path("postgresql://h/db")), DirectoryLocation)


def test_messages_name_a_postgres_store_without_its_password() -> None:
    assert open_backend("postgresql://u:secret@h/db").shown == "postgresql://u:***@h/db"


def test_opening_reads_nothing_and_a_missing_directory_holds_no_documents(tmp_path: Path) -> None:
    backend = open_backend(tmp_path / "absent")
    assert backend.active_document_count() == 0
    assert backend.recorded_chunker() == (None, False)
    assert not (tmp_path / "absent").exists()


def test_a_directory_backend_counts_its_documents_and_reads_its_chunker(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for name in ("a", "b"):
        (corpus / f"{name}.md").write_text(f"# {name}\n\n梅雨の話 {name}\n", "utf-8")
    ingest(corpus, tmp_path / "s", embedding="none", mode="bm25", progress=False)
    backend = open_backend(str(tmp_path / "s"))
    assert backend.active_document_count() == backend.active_document_count(owner=INGEST_WRITER) == 2
    assert backend.active_document_count(owner="someone else") == 0
    chunker, has_documents = backend.recorded_chunker()
    assert chunker is not None and chunker["name"] == "paragraph" and has_documents


#: The modules that may call ``is_postgres_url``: where it is defined, open_backend, and the PostgreSQL classes that
#: refuse a non-URL handed to them (a ``ValueError``), which choose nothing.
URL_CHECKERS = {
    "backends/postgres/chunk_store.py",
    "backends/open.py",
    "backends/postgres/lock.py",
    "backends/postgres/backend.py",  # PostgresBackend (PostgresVectorStore's), moved from vectorstores/postgres.py
}


def test_no_other_module_asks_whether_a_store_is_a_url() -> None:
    callers = set()
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                fn = node.func
                name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else None
                if name == "is_postgres_url":
                    callers.add(path.relative_to(PACKAGE).as_posix())
    assert callers == URL_CHECKERS


OTHER_SCHEMES = ["mysql://x/y", "sqlite:///x.db", "https://example.org/store", " postgresql+psycopg://u:secret@h/db"]


@pytest.mark.parametrize("url", OTHER_SCHEMES)
def test_a_url_of_another_scheme_is_refused_naming_it(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Regression (issue 26 trial, FAIL 2): a URL no backend serves became a store directory named after it
    (``./mysql:/x/y``), so ``ingest`` reported success into a local folder and a search said 'no chunk store'."""
    monkeypatch.chdir(tmp_path)
    scheme = url.strip().split("://")[0]
    with pytest.raises(ValueError, match=rf"no backend serves {re.escape(scheme)}:// URLs") as info:
        open_backend(url)
    assert "secret" not in str(info.value)
    assert ("SQLAlchemy" in str(info.value)) == scheme.startswith("postgresql+")
    assert list(tmp_path.iterdir()) == []


def test_the_cli_refuses_another_scheme_and_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys):
    from langchain_ragspine.cli import main

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.md").write_text("# A\n\nrain\n", "utf-8")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_info:
        main(["ingest", str(corpus), "--store", "postgresql+psycopg://u:secret@h/db", "--embedding", "none"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "no backend serves postgresql+psycopg:// URLs" in err and "secret" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus"]


def test_the_vector_store_refuses_another_scheme_and_opens_postgresql(tmp_path: Path, pg_url: str,
                                                                      monkeypatch: pytest.MonkeyPatch):
    """RagSpineVectorStore given a URL string: another scheme is refused before anything is written; a
    postgresql:// URL opens the PostgreSQL backend (it made a local directory named after the URL)."""
    from langchain_core.embeddings import DeterministicFakeEmbedding

    from langchain_ragspine.vectorstores import PostgresVectorStore, RagSpineVectorStore

    monkeypatch.chdir(tmp_path)
    emb = DeterministicFakeEmbedding(size=16)
    with pytest.raises(ValueError, match="no backend serves mysql:// URLs"):
        RagSpineVectorStore("mysql://x/y", emb)
    store = RagSpineVectorStore(pg_url, emb)
    try:
        store.add_texts(["rainy season in June"], ids=["r1"])
        again = PostgresVectorStore(pg_url, emb)
        assert [d.id for d in again.similarity_search("rainy season", k=1)] == ["r1"]
        again.close()
        with pytest.raises(ValueError, match="takes no tokenizer='cjk'"):
            RagSpineVectorStore(pg_url, emb, tokenizer="cjk")
    finally:
        store.close()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("store", ["postgresql:/u:pw9@h/db", "POSTGRES:/h/db", " postgres:u:pw9@h/db", "postgresql:u@h"])
def test_a_postgresql_url_missing_a_slash_is_refused_not_made_a_directory(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (trial of 5d1ab81): ``postgresql:/u:pw@h/db`` (one slash) became a store directory of that name —
    ``ingest`` wrote it under the working directory, and the search's "no chunk store here" printed the password."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="malformed PostgreSQL URL") as info:
        open_backend(store)
    assert "pw9" not in str(info.value)
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.md").write_text("# a\n\n梅雨\n", "utf-8")
    with pytest.raises(ValueError, match="malformed PostgreSQL URL"):
        ingest(corpus, store, embedding="none", mode="bm25", progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]


def test_a_postgres_location_never_shows_its_password() -> None:
    """Regression (trial of 5d1ab81): ``repr(PostgresLocation(...))`` printed the URL as given, password included."""
    backend = open_backend("postgresql://u:pw9@h/db?sslpassword=k9")
    for text in (repr(backend), str(backend), backend.shown):
        assert "pw9" not in text and "k9" not in text and "u:***@h/db" in text


@pytest.mark.parametrize("text, shown", [
    # libpq quotes a malformed URL whole in its own error message
    ('missing "=" after "POSTGRESQL://u:pw9@h:1/db" in connection info string',
     'missing "=" after "POSTGRESQL://u:***@h:1/db" in connection info string'),
    ('in URI: "postgresql://u:pw9@[::1/db"', 'in URI: "postgresql://u:***@[::1/db"'),
    ("postgresql:/u:pw9@h/db", "postgresql:/u:***@h/db"),
    ("host=h password=pw9 dbname=d", "host=h password=*** dbname=d"),
    ("host=h password='pw 9' dbname=d", "host=h password=*** dbname=d"),
    ("postgresql://h/db?sslpassword=pw9&x=1", "postgresql://h/db?sslpassword=***&x=1"),
    ("postgresql://u@h/db: no password here", "postgresql://u@h/db: no password here"),
    # one rule for a URL and a message (redact_url is redact_text): any scheme, an unencoded "@" in the password
    ("mysql://u:pw9@h/db", "mysql://u:***@h/db"),
    ("store 'postgresql+psycopg://u:pw9@h/db' is not", "store 'postgresql+psycopg://u:***@h/db' is not"),
    ("postgresql://u:p@w9@h:5/db", "postgresql://u:***@h:5/db"),
    ("postgresql://:pw9@h/db", "postgresql://:***@h/db"),
    ("postgresql://u:pw9@h/db?sslmode=require&PassWord=pw9", "postgresql://u:***@h/db?sslmode=require&PassWord=***"),
    ("error at line 3: connection refused", "error at line 3: connection refused"),
])
def test_every_password_in_an_error_text_is_hidden(text: str, shown: str) -> None:
    from langchain_ragspine.backends.postgres.chunk_store import redact_text, redact_url

    assert redact_text(text) == shown == redact_url(text)
    assert "pw9" not in shown and "w9@" not in shown


@pytest.mark.parametrize("url, libpq", [
    ("  POSTGRESQL://u@h/db ", "postgresql://u@h/db"), ("Postgres://h/DB", "postgres://h/DB"),
    ("postgresql://h/db", "postgresql://h/db"),
])
def test_the_url_libpq_gets_has_a_lower_case_scheme(url: str, libpq: str) -> None:
    """Regression (trial of 5d1ab81): ``POSTGRESQL://…`` was taken as a PostgreSQL store but handed to libpq as
    given, which reads it as a malformed keyword/value string (and quoted it, password and all, in its error)."""
    from langchain_ragspine.backends.postgres.chunk_store import libpq_url

    assert libpq_url(url) == libpq


def test_a_feature_postgresql_lacks_is_refused_by_one_rule_before_the_server_is_reached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Trial of 5d1ab81: parent-child ingest, the parent_child mode and --contextual were refused in three places
    with three wordings (and --contextual only after connecting).  Now every one is ``refuse(backend, feature)``
    against the backend's ``unsupported`` mapping: one wording, before any connection (port 9: nothing listens)."""
    from langchain_ragspine.backends.base import CONTEXTUAL, PARENTS
    from langchain_ragspine.backends.postgres.chunk_store import PostgresChunkStore
    from langchain_ragspine.cli import main

    url = "postgresql://nobody@127.0.0.1:9/none?connect_timeout=2"
    assert set(PostgresChunkStore.unsupported) >= {PARENTS, CONTEXTUAL}
    assert open_backend(url).unsupported == PostgresChunkStore.unsupported
    assert not open_backend(url).keeps_parents and not open_backend(url).contextual_headers
    assert open_backend(str(tmp_path)).keeps_parents and open_backend(str(tmp_path)).contextual_headers
    for feature, kwargs in ((PARENTS, {"chunker": "parent_child"}), (CONTEXTUAL, {"contextual": True})):
        why = PostgresChunkStore.unsupported[feature]
        with pytest.raises(ValueError, match="^" + re.escape(f"a PostgreSQL store does not support {feature}: {why}")):
            ingest(tmp_path / "absent", url, mode="bm25", **kwargs)
    # one subject whichever class of the backend refuses (trial of ba5bf07: PostgresLocation / PostgresSource)
    from langchain_ragspine.backends.postgres.backend import PostgresBackend
    from langchain_ragspine.pipeline.sources import PostgresSource

    for cls in (PostgresChunkStore, PostgresBackend, open_backend(url).__class__, PostgresSource):
        assert cls.backend_name == "a PostgreSQL store" and cls.unsupported == PostgresChunkStore.unsupported
    monkeypatch.chdir(tmp_path)
    capsys.readouterr()
    assert main(["ingest", str(tmp_path), "--store", url, "--contextual"]) != 0
    err = capsys.readouterr().err
    assert f"does not support {CONTEXTUAL}" in err and "Connection refused" not in err


@pytest.mark.parametrize(("store", "message"), [
    ("postgresql:/u:pw9@h/db", "malformed PostgreSQL URL"), ("mysql://u:pw9@h/db", "no backend serves mysql://"),
])
def test_a_url_in_ragspine_store_is_opened_or_refused_never_made_a_directory(
    store: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Regression: ``RAGSPINE_STORE`` became a ``Path`` unless it started with ``postgresql://``, so a URL missing a
    slash or in another scheme was a directory (``ragspine ingest`` made ``./postgresql:`` and ``./mysql:``),
    bypassing open_backend's refusal."""
    from langchain_ragspine.cli import main
    from langchain_ragspine.settings import get_settings

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAGSPINE_STORE", store)
    assert get_settings().store == store  # a string: open_backend decides
    corpus = tmp_path / "c"
    corpus.mkdir()
    (corpus / "a.md").write_text("# a\n\n梅雨\n", "utf-8")
    capsys.readouterr()
    with pytest.raises(SystemExit) as info:  # argparse's --store default: a usage error
        main(["ingest", str(corpus)])
    err = capsys.readouterr().err
    assert info.value.code == 2 and message in err and "pw9" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]


def test_a_store_that_is_a_file_is_named_in_the_python_apis_words_too(tmp_path: Path) -> None:
    """Trial of ba5bf07: ``ingest(corpus, "README.md")`` said "--store must be a directory" (the CLI's flag) to a
    Python caller."""
    from langchain_ragspine.errors import StoreError

    (tmp_path / "file.txt").write_text("x", "utf-8")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.md").write_text("# a\n\n梅雨\n", "utf-8")
    with pytest.raises(StoreError, match=r"a store must be a directory \(a store path, --store, RAGSPINE_STORE\)"):
        ingest(tmp_path / "c", tmp_path / "file.txt", embedding="none", mode="bm25", progress=False)


@pytest.mark.parametrize("store", ["", "   "])
def test_an_empty_store_is_refused_not_the_working_directory(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trial of ba5bf07: ``--store ""`` (an unset shell variable) was the working directory — ``ingest`` would
    write a store there, and a search said ``.: no chunk store here``."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "a.md").write_text("# a\n\n梅雨\n", "utf-8")
    with pytest.raises(ValueError, match="the store is empty"):
        open_backend(store)
    with pytest.raises(ValueError, match="the store is empty"):
        ingest(tmp_path / "c", store, embedding="none", mode="bm25", progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]


@pytest.mark.parametrize("url", [
    "postgresql://app:Sale50%off@127.0.0.1:9/rag",  # libpq: invalid percent-encoded token: "Sale50%off"
    "postgresql://app@127.0.0.1:9/rag?password=Sale50%zz",
])
def test_a_password_libpq_echoes_alone_is_hidden_too(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Regression (trial of bf21278): libpq repeats a bad percent-encoded password by itself in its message, where
    no URL pattern finds it; the connection's own secrets are hidden wherever the message repeats one."""
    pytest.importorskip("psycopg")
    from langchain_ragspine.cli import main
    from langchain_ragspine.embeddings import HashingEmbeddings
    from langchain_ragspine.errors import StoreError
    from langchain_ragspine.vectorstores import RagSpineVectorStore

    with pytest.raises(StoreError) as info:
        RagSpineVectorStore(url, HashingEmbeddings(8))
    assert "Sale50" not in str(info.value) and "cannot connect to PostgreSQL" in str(info.value)
    assert main(["search", "x", "--store", url]) == 2
    err = capsys.readouterr().err
    assert "Sale50" not in err and "***" in err
