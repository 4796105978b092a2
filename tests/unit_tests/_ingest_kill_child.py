"""Child process for ``test_resumable_embedding.py``'s SIGKILL test; not a test module itself.

Usage: ``python _ingest_kill_child.py CORPUS STORE``.  Ingests ``CORPUS`` into ``STORE`` with the ``"hashing"``
embedding spec, made slow (:data:`DELAY_S` per ``embed_documents`` call after the first) by patching
``HashingEmbeddings.embed_documents`` in this process only, so the parent can kill it while it embeds.  The
production code has no test hooks.
"""

from __future__ import annotations

import sys
import time

from langchain_ragspine.embeddings import HashingEmbeddings
from langchain_ragspine.pipeline.ingest import ingest

DELAY_S = 0.5

_original = HashingEmbeddings.embed_documents
_calls = 0


def _slow_embed_documents(self: HashingEmbeddings, texts: list[str]) -> list[list[float]]:
    global _calls
    _calls += 1
    if _calls > 1:  # the probe batch (before the store changes) is fast; the rest is slow
        time.sleep(DELAY_S)
    return _original(self, texts)


if __name__ == "__main__":
    HashingEmbeddings.embed_documents = _slow_embed_documents  # type: ignore[method-assign]
    ingest(sys.argv[1], sys.argv[2], embedding="hashing", progress=False)
    print("FINISHED", flush=True)
