"""Which chunk ids a retriever still serves: the check a chat graph runs before earlier replies go into a prompt.

A reply of a chat graph was made from passages that passed the RESTRICTED gate *when it was made*.  If one of them is
relabelled RESTRICTED or retracted afterwards (a re-ingest, by any process), the reply still quotes it; sent back to a
model as chat history it would carry RESTRICTED text into a prompt.  So before history is used, the graphs ask the
retriever which of the reply's passages it would still return now, through :func:`served_ids`.

The protocol: a retriever that can tell has a method ``served_ids(ids: Sequence[str]) -> ServedIds`` (every store
backed retriever of the package and every wrapper over one has it; a foreign retriever may add it too — duck typed).
The answer sorts each id into one of three:

* **served** — the retriever would return that chunk now (it is in the corpus it searches, and not RESTRICTED);
* **withdrawn** — the id was a chunk of this retriever's store and is not served any more (relabelled RESTRICTED,
  retracted, or gone from its document's current version); only stores that keep their history can tell this
  (:class:`~langchain_ragspine.retrievers.live.LiveStoreRetriever`, the PostgreSQL retrievers);
* neither (**unknown**) — nothing this retriever can vouch for (an id of another corpus, an in-memory index that never
  held it).

"Served" is about the corpus, not one query: whether a search *could* return the chunk, whatever the filter.

A retriever without the method cannot tell (:func:`served_ids` returns ``None``).  The rule for that is the package's
rule for ambiguity: **fail closed** — a caller treats every id as not served.  The chat graphs then leave every
earlier reply that was made from passages out of their prompts (the user's own messages stay), while a retriever that
can tell keeps the history exactly as it was (:mod:`~langchain_ragspine.graphs.conversation`).

Example:
    >>> from langchain_core.documents import Document
    >>> from langchain_ragspine.retrievers import BM25Retriever
    >>> r = BM25Retriever.from_documents([Document("Kyoto temples", metadata={"chunk_id": "k#0"})])
    >>> served_ids(r, ["k#0", "x#0"])
    ServedIds(served=frozenset({'k#0'}), withdrawn=frozenset())
    >>> served_ids(object(), ["k#0"]) is None   # cannot tell: fail closed
    True
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SERVED_IDS_METHOD", "ServedIds", "combine_served", "served_ids", "still_served"]

#: The name of the protocol's method on a retriever.
SERVED_IDS_METHOD = "served_ids"


@dataclass(frozen=True)
class ServedIds:
    """A retriever's answer for some chunk ids (see the module docstring): ``served`` — it would return them now;
    ``withdrawn`` — chunks of its store that it no longer serves (relabelled RESTRICTED, retracted, superseded).
    An id in neither is unknown to it.  Both are subsets of the ids asked, and disjoint."""

    served: frozenset[str] = field(default_factory=frozenset)
    withdrawn: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def of(cls, asked: Iterable[str], served: Iterable[str], withdrawn: Iterable[str] = ()) -> ServedIds:
        """The answer for ``asked`` (``served`` and ``withdrawn`` cut to the asked ids; withdrawn wins over
        served, failing closed)."""
        wanted = set(asked)
        out = frozenset(wanted.intersection(withdrawn))
        return cls(served=frozenset(wanted.intersection(served)) - out, withdrawn=out)


def _ids(ids: Iterable[str]) -> list[str]:
    if isinstance(ids, (str, bytes)):
        raise TypeError(f"ids must be a list of chunk ids, not a single {type(ids).__name__}: {ids!r}")
    out = list(ids)
    for i in out:
        if not isinstance(i, str):
            raise TypeError(f"chunk ids must be str, got {type(i).__name__}: {i!r}")
    return out


def served_ids(retriever: Any, ids: Iterable[str]) -> ServedIds | None:
    """``retriever.served_ids(ids)`` when the retriever has the method (the protocol of the module docstring), else
    ``None``: it cannot tell, and the caller fails closed (treats every id as not served).  An empty ``ids`` asks
    nothing (``ServedIds()`` for a retriever that can tell).

    Raises:
        TypeError: ``ids`` is a single string or holds a non-string; the method returned something other than a
            :class:`ServedIds` or ``None``.
        StoreError: the retriever's store is unreadable (the method's own error).
    """
    wanted = _ids(ids)
    method = getattr(retriever, SERVED_IDS_METHOD, None)
    if not callable(method):
        return None
    found = method(wanted)
    if found is None:
        return None
    if not isinstance(found, ServedIds):
        raise TypeError(f"{type(retriever).__name__}.served_ids returned {type(found).__name__}, not ServedIds or None")
    return ServedIds.of(wanted, found.served, found.withdrawn)


def still_served(retriever: Any, ids: Iterable[str]) -> set[str]:
    """The ids among ``ids`` that ``retriever`` would still return now (:func:`served_ids`); empty when it cannot
    tell (fail closed).

    Raises:
        TypeError / StoreError: as :func:`served_ids`.
    """
    found = served_ids(retriever, ids)
    return set() if found is None else set(found.served)


def combine_served(retrievers: Sequence[Any], ids: Sequence[str]) -> ServedIds | None:
    """The answer of a retriever that returns what ``retrievers`` return (a hybrid's channels, a multi-index's
    indexes, one wrapped base): an id is served when one of them serves it and none reports it withdrawn (two
    indexes may both hold a ``README#0``: failing closed, a withdrawn one wins), withdrawn when one reports it so;
    ``None`` when none of them can tell.

    Raises:
        TypeError / StoreError: as :func:`served_ids`.
    """
    wanted = _ids(ids)
    answers = [served_ids(r, wanted) for r in retrievers]
    told = [a for a in answers if a is not None]
    if not told:
        return None
    return ServedIds.of(
        wanted, (i for a in told for i in a.served), (i for a in told for i in a.withdrawn)
    )
