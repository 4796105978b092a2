"""Child process for ``test_chunk_store.py``'s SIGKILL test; not a test module itself.

Usage: ``python _chunk_store_crash_child.py DB_PATH``.  Commits version 1 of document ``"doc"`` (:data:`N_V1`
chunks) and prints ``COMMITTED``, then starts replacing it with version 2 (:data:`N_V2` chunks).  After
:data:`PAUSE_AFTER` rows of version 2 are inserted — inside the open transaction — it prints ``PAUSED`` and
sleeps, waiting for the parent's ``SIGKILL``.  The pause comes from overriding
``ChunkStore._insert_chunk_row`` in a subclass, so the production code has no test hooks.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from langchain_core.documents import Document

from langchain_ragspine.stores.chunk_store import ChunkStore

DOC_ID = "doc"
N_V1 = 3
N_V2 = 400
PAUSE_AFTER = 300
#: Version-2 chunk texts are long so that, with a tiny page cache, uncommitted pages spill into the WAL file.
V2_TEXT_CHARS = 2000


def make_chunks(version: int, n: int) -> list[Document]:
    """``n`` chunk ``Document``s of :data:`DOC_ID` for ``version``, shaped like the splitter's output."""
    docs: list[Document] = []
    pos = 0
    for i in range(n):
        text = f"version {version} chunk {i} " + ("x" * (V2_TEXT_CHARS if version == 2 else 10))
        md: dict[str, Any] = {
            "doc_id": DOC_ID,
            "chunk_id": f"{DOC_ID}#{i}",
            "start_index": pos,
            "end_index": pos + len(text),
            "source_locator": f"{DOC_ID}.md#{pos}-{pos + len(text)}",
            "title": "Crash test",
            "sensitivity": "PUBLIC",
            "source": f"{DOC_ID}.md",
        }
        docs.append(Document(page_content=text, metadata=md, id=md["chunk_id"]))
        pos += len(text) + 2
    return docs


class PausingChunkStore(ChunkStore):
    """Pauses forever after ``pause_after`` inserted rows, once armed."""

    pause_after: int | None = None
    inserted = 0

    def _insert_chunk_row(self, cur, row):  # type: ignore[no-untyped-def]
        rowid = super()._insert_chunk_row(cur, row)
        if self.pause_after is not None:
            self.inserted += 1
            if self.inserted == self.pause_after:
                print("PAUSED", flush=True)
                time.sleep(120)
        return rowid


def main(db_path: str) -> None:
    store = PausingChunkStore(db_path)
    store._connection().execute(
        "PRAGMA cache_size = -64"
    )  # 64 KiB: make the open transaction spill to the WAL
    store.replace_doc_chunks(DOC_ID, make_chunks(1, N_V1), valid_as_of="2024-01-01")
    print("COMMITTED", flush=True)
    store.pause_after = PAUSE_AFTER
    store.replace_doc_chunks(DOC_ID, make_chunks(2, N_V2), valid_as_of="2025-01-01")
    print("FINISHED", flush=True)  # never reached when the parent kills us


if __name__ == "__main__":
    main(sys.argv[1])
