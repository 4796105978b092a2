"""Child process for ``test_chunk_store.py``'s SIGKILL test; not a test module itself.

Usage: ``python _chunk_store_crash_child.py DB_PATH [batch]``.  Commits version 1 of document ``"doc"``
(:data:`N_V1` chunks) and prints ``COMMITTED``, then starts replacing it with version 2 (:data:`N_V2` chunks).  Once
the rows of version 2 are inserted — inside the open transaction — it prints ``PAUSED`` and sleeps, waiting for the
parent's ``SIGKILL``.  With ``batch``, the replacement runs in a ``write_batch`` after a complete (uncommitted)
write of document :data:`OTHER_ID`.  The pause comes from overriding ``ChunkStore._insert_rows`` in a subclass, so
the production code has no test hooks.
"""

from __future__ import annotations

import contextlib
import sys
import time
from typing import Any

from langchain_core.documents import Document

from langchain_ragspine.backends.directory.chunk_store import ChunkStore

DOC_ID = "doc"
OTHER_ID = "other"
N_V1 = 3
N_V2 = 400
#: Version-2 chunk texts are long so that, with a tiny page cache, uncommitted pages spill into the WAL file.
V2_TEXT_CHARS = 2000


def make_chunks(version: int, n: int, doc_id: str = DOC_ID) -> list[Document]:
    """``n`` chunk ``Document``s of ``doc_id`` for ``version``, shaped like the splitter's output."""
    docs: list[Document] = []
    pos = 0
    for i in range(n):
        text = f"version {version} chunk {i} " + ("x" * (V2_TEXT_CHARS if version == 2 else 10))
        md: dict[str, Any] = {
            "doc_id": doc_id,
            "chunk_id": f"{doc_id}#{i}",
            "start_index": pos,
            "end_index": pos + len(text),
            "source_locator": f"{doc_id}.md#{pos}-{pos + len(text)}",
            "title": "Crash test",
            "sensitivity": "PUBLIC",
            "source": f"{doc_id}.md",
        }
        docs.append(Document(page_content=text, metadata=md, id=md["chunk_id"]))
        pos += len(text) + 2
    return docs


class PausingChunkStore(ChunkStore):
    """Pauses forever once the chunk rows of a document version are inserted, once armed."""

    armed = False

    def _insert_rows(self, cur, table, *args):  # type: ignore[no-untyped-def]
        super()._insert_rows(cur, table, *args)
        if self.armed and table == "chunks":
            print("PAUSED", flush=True)
            time.sleep(120)


def main(db_path: str, batch: bool) -> None:
    store = PausingChunkStore(db_path)
    store._connection().execute(
        "PRAGMA cache_size = -64"
    )  # 64 KiB: make the open transaction spill to the WAL
    store.replace_doc_chunks(DOC_ID, make_chunks(1, N_V1), valid_as_of="2024-01-01")
    print("COMMITTED", flush=True)
    with store.write_batch() if batch else contextlib.nullcontext():
        if batch:
            store._connection().execute("PRAGMA cache_size = -64")  # a batch sets a large cache: spill anyway
            store.replace_doc_chunks(OTHER_ID, make_chunks(1, 5, OTHER_ID))
        store.armed = True
        store.replace_doc_chunks(DOC_ID, make_chunks(2, N_V2), valid_as_of="2025-01-01")
    print("FINISHED", flush=True)  # never reached when the parent kills us


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:] == ["batch"])
