"""Child process for ``test_postgres_store.py``'s SIGKILL test; not a test module itself.

Usage: ``python _pg_crash_child.py URL``.  Commits version 1 of document ``"doc"`` (:data:`N_V1` chunks) and prints
``COMMITTED``, then starts replacing it with version 2 (:data:`N_V2` chunks).  Inside that open transaction — after
the chunk rows are inserted, before their search-table rows — it prints ``PAUSED`` and sleeps, waiting for the
parent's ``SIGKILL``.  The pause comes from overriding ``PostgresChunkStore._insert_searchable`` in a subclass, so
the production code has no test hooks.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from langchain_core.documents import Document

from langchain_ragspine.backends.postgres.chunk_store import PostgresChunkStore

DOC_ID = "doc"
N_V1 = 3
N_V2 = 50


def make_chunks(version: int, n: int) -> list[Document]:
    """``n`` chunk ``Document``s of :data:`DOC_ID` for ``version``, shaped like the splitter's output."""
    docs: list[Document] = []
    pos = 0
    for i in range(n):
        text = f"version {version} chunk {i} " + "x" * 10
        md: dict[str, Any] = {
            "doc_id": DOC_ID, "chunk_id": f"{DOC_ID}#{i}", "start_index": pos, "end_index": pos + len(text),
            "source_locator": f"{DOC_ID}.md#{pos}-{pos + len(text)}", "title": "Crash test", "source": f"{DOC_ID}.md",
        }
        docs.append(Document(page_content=text, metadata=md, id=md["chunk_id"]))
        pos += len(text) + 2
    return docs


class PausingStore(PostgresChunkStore):
    """Pauses forever inside the write transaction, once armed."""

    armed = False

    def _insert_searchable(self, cur, rows, stored, searchable):  # type: ignore[no-untyped-def]
        if self.armed:
            print("PAUSED", flush=True)
            time.sleep(120)
        return super()._insert_searchable(cur, rows, stored, searchable)


def main(url: str) -> None:
    store = PausingStore(url)
    store.replace_doc_chunks(DOC_ID, make_chunks(1, N_V1), valid_as_of="2024-01-01")
    print("COMMITTED", flush=True)
    store.armed = True
    store.replace_doc_chunks(DOC_ID, make_chunks(2, N_V2), valid_as_of="2025-01-01")
    print("FINISHED", flush=True)  # never reached when the parent kills us


if __name__ == "__main__":
    main(sys.argv[1])
