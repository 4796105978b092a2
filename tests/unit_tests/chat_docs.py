"""Documents for the conversation, streaming, tool and rewrite tests: one chunk each, with the lineage metadata the
graphs cite, and a RESTRICTED marker that must never show up anywhere."""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document

#: The text of the RESTRICTED test chunks; a test fails when it appears in a prompt, an event or an output.
SECRET = "SECRETMARK秘密"


def chunk(cid: str, title: str, text: str, **extra: Any) -> Document:
    """A one-chunk document ``{cid}#0`` with ``doc_id``, ``title``, ``source_locator`` and ``extra`` metadata."""
    md = {"chunk_id": f"{cid}#0", "doc_id": cid, "title": title, "source_locator": f"{cid}.md#0-{len(text)}", **extra}
    return Document(page_content=text, metadata=md)
