"""Relation extractors: what turns chunks into a relation graph (GraphRAG's indexing step, Edge et al. 2024).

Two are built in, both behind one protocol (:class:`RelationExtractor`), and :func:`build_graph` runs either over
a corpus's chunks::

    graph = build_graph(chunks, CooccurrenceExtractor())          # deterministic, no model
    graph = build_graph(chunks, LLMRelationExtractor(chat_model))  # opt-in: a chat model writes triples

* :class:`CooccurrenceExtractor` (the default when a graph is switched on) — no model.  A chunk's entities are
  (1) the values of its metadata keys ``entities`` / ``tags`` / ``keywords`` / ``topic`` (kind ``metadata``),
  (2) the terms of its document's title and heading path (kind ``title``), and (3) its most distinctive terms
  (kind ``term``): CJK words as MeCab (fugashi + unidic-lite, the package's tokenizer dictionary) segments them,
  folded Traditional→Simplified, and Latin-script words as the ``"auto"`` tokenizer analyses them (Snowball stems,
  no stop words) — :func:`entity_terms` — kept when they occur in at least ``min_df`` chunks and at most
  ``max_df`` of them, the ``max_terms`` with the highest tf·idf per chunk.  Every two entities of a chunk are joined by
  a ``co-occurs`` edge that keeps the chunk's id.  Its output depends on the whole corpus (document frequencies),
  so it is rebuilt over every chunk at each ingest (cheap: see ``benchmarks/RESULTS.md``, section ``graph``).
* :class:`LLMRelationExtractor` (opt-in) — a chat model is asked for ``subject | relation | object`` lines per
  chunk; each chunk is independent, so an ingest re-asks only for chunks that are new or changed
  (:attr:`RelationExtractor.incremental`).

RESTRICTED chunks (:mod:`langchain_ragspine.sensitivity`) never reach an extractor — :func:`build_graph` drops
them first, and each extractor drops them again — so they contribute no node, no edge and never reach a prompt.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage

from langchain_ragspine.documents import has_visible_text
from langchain_ragspine.relations.store import GraphStore, InMemoryGraphStore
from langchain_ragspine.sensitivity import drop_restricted
from langchain_ragspine.stopwords import is_content_term
from langchain_ragspine.text import CJK_CHAR_RE, HEADING_KEYS
from langchain_ragspine.text.folding import normalize
from langchain_ragspine.tokenizers import cjk_tokenize, fold_to_simplified, mecab_surfaces

__all__ = [
    "COOCCURS",
    "DEFAULT_METADATA_KEYS",
    "CooccurrenceExtractor",
    "Extraction",
    "LLM_PROMPT",
    "LLMRelationExtractor",
    "NAMED_KINDS",
    "RelationExtractor",
    "build_graph",
    "chunk_fingerprint",
    "entity_name",
    "entity_terms",
    "extract_chunks",
    "extractions_of",
    "extractor_from_config",
    "graph_of",
    "make_extractor",
    "query_entities",
]

#: The relation of a co-occurrence edge.
COOCCURS = "co-occurs"
#: The metadata keys whose values are entities (a string or a list of strings).
DEFAULT_METADATA_KEYS: tuple[str, ...] = ("entities", "tags", "keywords", "topic")

_DIGITS = re.compile(r"^[\d.,:/-]+$")


def entity_name(text: str) -> str:
    """The normalised name of an entity: NFKC, lower case, whitespace collapsed, Traditional→Simplified per
    character (``"  Ｔｏｋｙｏ  Tower"`` → ``"tokyo tower"``)."""
    return fold_to_simplified(" ".join(normalize(str(text)).lower().split()))


def entity_terms(text: str) -> list[str]:
    """The entity-like terms of ``text``, in order, repeats kept: its Latin-script words as the ``"auto"``
    tokenizer analyses them (stemmed, stop words out) and its CJK words as MeCab segments them (folded
    Traditional→Simplified), each at least two characters, a content term
    (:func:`~langchain_ragspine.stopwords.is_content_term`) and not a number.

    Example:
        >>> entity_terms("BM25 ranks chunks; 東京大学の研究者")
        ['bm25', 'rank', 'chunk', '东京', '大学', '研究']
    """
    norm = normalize(text).lower()
    out = [t for t in cjk_tokenize(norm) if not CJK_CHAR_RE.search(t)]
    if CJK_CHAR_RE.search(norm):
        out.extend(fold_to_simplified(s) for s in mecab_surfaces(norm) if CJK_CHAR_RE.search(s))
    return [t for t in out if len(t) >= 2 and not _DIGITS.match(t) and is_content_term(t, stemmed=True)]


def chunk_fingerprint(doc: Document) -> str:
    """SHA-256 of a chunk's text and metadata (minus ``scores``): what a saved graph checks a chunk against to
    reuse its extraction (an edited or relabelled chunk has another fingerprint)."""
    meta = {k: v for k, v in doc.metadata.items() if k != "scores"}
    body = json.dumps([doc.page_content, meta], ensure_ascii=False, sort_keys=True, default=str)
    return hashlib.sha256(body.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Extraction:
    """What an extractor found in one chunk: ``entities`` (``(name, kind)`` pairs) and ``triples``
    (``(subject, relation, object)``), names normalised (:func:`entity_name`)."""

    entities: tuple[tuple[str, str], ...] = ()
    triples: tuple[tuple[str, str, str], ...] = ()


@runtime_checkable
class RelationExtractor(Protocol):
    """The relation-extractor slot of ingest (``ingest(..., graph=extractor)``).

    Attributes:
        incremental: whether a chunk's extraction depends on that chunk alone (then a re-ingest reuses the saved
            extraction of every unchanged chunk and asks only for the others).
    """

    incremental: bool

    def config(self) -> dict[str, Any]:
        """A JSON record of the extractor (``{"name": ..., ...}``), saved with the graph: a graph saved with
        another config is rebuilt."""
        ...

    def extract(self, chunks: Sequence[Document]) -> dict[str, Extraction]:
        """``{chunk_id: Extraction}`` for ``chunks`` (none RESTRICTED: :func:`build_graph` removed them)."""
        ...

    def query_entities(self, question: str, graph: GraphStore) -> list[str]:
        """The nodes of ``graph`` that ``question`` names, sorted (the seeds of a local search)."""
        ...


def _chunk_id(doc: Document) -> str:
    cid = doc.metadata.get("chunk_id") or doc.id
    if not cid:
        raise ValueError("a chunk for the relation graph needs metadata['chunk_id'] (or Document.id)")
    return str(cid)


def _metadata_entities(doc: Document, keys: Sequence[str]) -> list[str]:
    out: list[str] = []
    for key in keys:
        value = doc.metadata.get(key)
        values = [value] if isinstance(value, str) else list(value) if isinstance(value, (list, tuple)) else []
        out.extend(entity_name(v) for v in values if isinstance(v, str) and v.strip())
    return [v for v in out if v]


def _title_text(doc: Document) -> str:
    parts = [str(doc.metadata.get("title") or "")]
    for key in HEADING_KEYS:
        value = doc.metadata.get(key)
        if isinstance(value, str):
            parts.append(value)
        elif isinstance(value, (list, tuple)):
            parts.extend(str(v) for v in value)
    return " ".join(parts)


#: Node kinds a question may name whole (a multi-word or unsegmented name), besides its terms.
NAMED_KINDS = ("metadata", "llm")


def query_entities(question: str, graph: GraphStore) -> list[str]:
    """The nodes of ``graph`` that ``question`` names, sorted: its :func:`entity_terms` that are nodes, and the
    nodes of :data:`NAMED_KINDS` whose whole (normalised) name occurs in it (``"tokyo tower"``, ``"chunk-store"``)."""
    seeds = {t for t in entity_terms(question) if graph.has_node(t)}
    q = entity_name(question)
    seeds |= {n for n in graph.nodes() if len(n) >= 2 and graph.node_kind(n) in NAMED_KINDS and n in q}
    return sorted(seeds)


class CooccurrenceExtractor:
    """Entities from metadata, title/heading terms and distinctive CJK-aware terms; an edge between every two
    entities of a chunk (see the module docstring).

    Args:
        metadata_keys: metadata keys whose values are entities (default :data:`DEFAULT_METADATA_KEYS`).
        max_terms: the most distinctive text terms kept per chunk (default 6), by tf·idf, ties by the term.
        max_title_terms: title / heading terms kept per chunk (default 4), in order of appearance.
        min_df: a text term is an entity only when at least this many chunks hold it (default 2: a term of one
            chunk joins nothing).
        max_df: ... and at most this fraction of the chunks (default 0.1: a term of every chunk says nothing).

    Raises:
        ValueError: ``max_terms`` / ``max_title_terms`` < 0, ``min_df`` < 1, ``max_df`` outside (0, 1].
    """

    incremental = False

    def __init__(
        self,
        *,
        metadata_keys: Sequence[str] = DEFAULT_METADATA_KEYS,
        max_terms: int = 6,
        max_title_terms: int = 4,
        min_df: int = 2,
        max_df: float = 0.1,
    ) -> None:
        for name, value, low in (("max_terms", max_terms, 0), ("max_title_terms", max_title_terms, 0),
                                 ("min_df", min_df, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
        if isinstance(max_df, bool) or not isinstance(max_df, (int, float)) or not 0 < max_df <= 1:
            raise ValueError(f"max_df must be a number in (0, 1], got {max_df!r}")
        self.metadata_keys = tuple(metadata_keys)
        self.max_terms = max_terms
        self.max_title_terms = max_title_terms
        self.min_df = min_df
        self.max_df = float(max_df)

    def config(self) -> dict[str, Any]:
        """``{"name": "cooccurrence", "version": 1, ...the parameters}``."""
        return {"name": "cooccurrence", "version": 1, "metadata_keys": list(self.metadata_keys),
                "max_terms": self.max_terms, "max_title_terms": self.max_title_terms, "min_df": self.min_df,
                "max_df": self.max_df}

    def extract(self, chunks: Sequence[Document]) -> dict[str, Extraction]:
        """See :class:`RelationExtractor`; every chunk's terms are read once, document frequencies over ``chunks``."""
        chunks = drop_restricted(chunks)
        terms = [Counter(entity_terms(c.page_content)) for c in chunks]
        df: Counter[str] = Counter()
        for t in terms:
            df.update(t.keys())
        n = len(chunks)
        top_df = max(self.min_df, int(self.max_df * n))
        titles: dict[str, list[str]] = {}
        out: dict[str, Extraction] = {}
        for doc, tf in zip(chunks, terms, strict=True):
            title = _title_text(doc)
            if title not in titles:
                titles[title] = list(dict.fromkeys(entity_terms(title)))[: self.max_title_terms]
            ranked = sorted(
                (t for t in tf if self.min_df <= df[t] <= top_df),
                key=lambda t: (-tf[t] * math.log(1 + n / df[t]), t),
            )[: self.max_terms]
            entities: dict[str, str] = {}
            for name in _metadata_entities(doc, self.metadata_keys):
                entities.setdefault(name, "metadata")
            for name in titles[title]:
                entities.setdefault(name, "title")
            for name in ranked:
                entities.setdefault(name, "term")
            names = sorted(entities)
            triples = tuple((a, COOCCURS, b) for i, a in enumerate(names) for b in names[i + 1:])
            out[_chunk_id(doc)] = Extraction(tuple(sorted(entities.items())), triples)
        return out

    def query_entities(self, question: str, graph: GraphStore) -> list[str]:
        """:func:`query_entities`."""
        return query_entities(question, graph)


#: The prompt of :class:`LLMRelationExtractor` (``{max_triples}``, ``{text}``).
LLM_PROMPT = (
    "Extract at most {max_triples} factual relations from the passage below, one per line, as\n"
    "subject | relation | object\n"
    "Use the entity names as written in the passage (people, places, organisations, products, concepts). "
    "Write nothing else.\n\nPassage:\n{text}"
)


class LLMRelationExtractor:
    """Triples written by a chat model, one call per chunk (opt-in; GraphRAG's LLM indexing step).

    Args:
        llm: any ``BaseChatModel`` (tests: langchain_core's fake chat models).
        max_triples: triples asked for and kept per chunk (default 10).
        prompt: the prompt template (default :data:`LLM_PROMPT`; fields ``{max_triples}``, ``{text}``).

    A reply line that is not ``a | r | b`` is skipped; a failing call leaves that chunk without relations (it is
    asked again at the next ingest).  RESTRICTED chunks are never sent.  The model is named in :meth:`config` by
    its class and ``model`` / ``model_name`` (a graph built by another model is rebuilt).
    """

    incremental = True

    def __init__(self, llm: BaseChatModel, *, max_triples: int = 10, prompt: str = LLM_PROMPT) -> None:
        if not isinstance(llm, BaseChatModel):
            raise TypeError(f"LLMRelationExtractor takes a BaseChatModel, got {type(llm).__name__}")
        if isinstance(max_triples, bool) or not isinstance(max_triples, int) or max_triples < 1:
            raise ValueError(f"max_triples must be an int >= 1, got {max_triples!r}")
        self.llm = llm
        self.max_triples = max_triples
        self.prompt = prompt

    def config(self) -> dict[str, Any]:
        """``{"name": "llm", "model": ..., "max_triples": ..., "prompt": sha256 of the prompt}``."""
        model = getattr(self.llm, "model", None) or getattr(self.llm, "model_name", None)
        return {"name": "llm", "model": f"{type(self.llm).__name__}:{model or ''}", "max_triples": self.max_triples,
                "prompt": hashlib.sha256(self.prompt.encode("utf-8")).hexdigest()[:16]}

    def extract(self, chunks: Sequence[Document]) -> dict[str, Extraction]:
        """See :class:`RelationExtractor`."""
        out: dict[str, Extraction] = {}
        for doc in drop_restricted(chunks):
            try:
                reply = self.llm.invoke([HumanMessage(self.prompt.format(max_triples=self.max_triples,
                                                                         text=doc.page_content))])
            except Exception:  # a model failure degrades: no relations for this chunk (asked again next ingest)
                continue
            out[_chunk_id(doc)] = self.parse(str(reply.content))
        return out

    def parse(self, reply: str) -> Extraction:
        """The triples of a reply: lines ``subject | relation | object`` (bullets and numbering stripped), at most
        :attr:`max_triples`, names normalised; others skipped."""
        triples: list[tuple[str, str, str]] = []
        for line in reply.splitlines():
            parts = [p.strip() for p in re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", line).split("|")]
            if len(parts) != 3 or not all(parts):
                continue
            s, r, o = entity_name(parts[0]), " ".join(parts[1].lower().split()), entity_name(parts[2])
            if s and o and s != o and (s, r, o) not in triples:
                triples.append((s, r, o))
            if len(triples) >= self.max_triples:
                break
        names = sorted({n for s, _, o in triples for n in (s, o)})
        return Extraction(tuple((n, "llm") for n in names), tuple(triples))

    def query_entities(self, question: str, graph: GraphStore) -> list[str]:
        """:func:`query_entities`."""
        return query_entities(question, graph)


def make_extractor(spec: Any) -> RelationExtractor | None:
    """The extractor of ingest's ``graph`` argument: ``None`` / ``False`` → ``None``; ``True`` or
    ``"cooccurrence"`` → :class:`CooccurrenceExtractor`; a :class:`RelationExtractor` as it is.

    Raises:
        ValueError: another string (with the known name); TypeError: anything else.
    """
    if spec is None or spec is False:
        return None
    if spec is True:
        return CooccurrenceExtractor()
    if isinstance(spec, str):
        if spec.strip().lower() == "cooccurrence":
            return CooccurrenceExtractor()
        raise ValueError(f"unknown relation extractor {spec!r}; choose 'cooccurrence' or pass a RelationExtractor "
                         "(e.g. LLMRelationExtractor(chat_model))")
    if isinstance(spec, RelationExtractor):
        return spec
    raise TypeError(f"graph takes None, True/False, 'cooccurrence' or a RelationExtractor, got {type(spec).__name__}")


def extractor_from_config(config: Mapping[str, Any]) -> RelationExtractor | None:
    """The extractor a saved graph's config describes, when it can be rebuilt from it (the co-occurrence one);
    ``None`` for an LLM extractor (its model is not saved)."""
    if config.get("name") != "cooccurrence":
        return None
    return CooccurrenceExtractor(
        metadata_keys=tuple(config.get("metadata_keys", DEFAULT_METADATA_KEYS)),
        max_terms=int(config.get("max_terms", 6)), max_title_terms=int(config.get("max_title_terms", 4)),
        min_df=int(config.get("min_df", 2)), max_df=float(config.get("max_df", 0.1)),
    )


def extractions_of(graph: GraphStore, chunk_ids: Iterable[str]) -> dict[str, Extraction]:
    """The per-chunk extractions a graph holds for ``chunk_ids`` (nodes mentioned by, and edges supported by, each
    chunk): what an incremental re-ingest reuses for unchanged chunks."""
    wanted = set(chunk_ids)
    entities: dict[str, list[tuple[str, str]]] = {c: [] for c in wanted}
    triples: dict[str, list[tuple[str, str, str]]] = {c: [] for c in wanted}
    for n in graph.nodes():
        for c in graph.node_chunks(n):
            if c in wanted:
                entities[c].append((n, graph.node_kind(n)))
    for e in graph.edges():
        for c in e.chunks:
            if c in wanted:
                triples[c].append((e.source, e.relation, e.target))
    return {c: Extraction(tuple(sorted(entities[c])), tuple(sorted(triples[c]))) for c in sorted(wanted)}


def extract_chunks(
    chunks: Iterable[Document],
    extractor: RelationExtractor | None,
    *,
    reuse: Mapping[str, Extraction] | None = None,
) -> dict[str, Extraction]:
    """``{chunk_id: Extraction}`` of ``chunks``: RESTRICTED chunks and chunks without visible text are dropped first,
    the chunks in ``reuse`` (an incremental extractor's saved results for unchanged chunks) are taken as they are,
    and ``extractor`` extracts the rest (``None``: the rest get nothing).  An extraction for a chunk that was not
    asked for is never kept."""
    kept = sorted((c for c in drop_restricted(chunks) if has_visible_text(c)), key=_chunk_id)
    reuse = dict(reuse or {})
    todo = [c for c in kept if _chunk_id(c) not in reuse]
    found = dict(extractor.extract(todo)) if todo and extractor is not None else {}
    out: dict[str, Extraction] = {}
    for c in kept:
        cid = _chunk_id(c)
        if cid in reuse:
            out[cid] = reuse[cid]
        elif cid in found:
            out[cid] = found[cid]
    return out


def graph_of(extractions: Mapping[str, Extraction], *, into: GraphStore | None = None) -> GraphStore:
    """The graph of per-chunk ``extractions``: every entity and triple added with its chunk as provenance, in
    chunk-id order (the same extractions give the same graph); ``into`` default a new :class:`InMemoryGraphStore`."""
    graph: GraphStore = InMemoryGraphStore() if into is None else into
    for cid in sorted(extractions):
        ex = extractions[cid]
        for name, kind in ex.entities:
            graph.add_node(name, chunk_id=cid, kind=kind)
        for s, r, o in ex.triples:
            if s != o:
                graph.add_edge(s, r, o, chunk_id=cid)
    return graph


def build_graph(
    chunks: Iterable[Document],
    extractor: RelationExtractor | None,
    *,
    reuse: Mapping[str, Extraction] | None = None,
    into: GraphStore | None = None,
) -> GraphStore:
    """The relation graph of ``chunks``: :func:`graph_of` of :func:`extract_chunks` — RESTRICTED chunks dropped
    first (they give no node and no edge), ``reuse`` taken as it is, ``extractor`` run on the rest.

    Args:
        chunks: the corpus's chunks (``metadata["chunk_id"]``).
        extractor: a :class:`RelationExtractor` (``None``: only ``reuse``).
        reuse: ``{chunk_id: Extraction}`` to take instead of extracting those chunks again.
        into: the graph to fill (default a new :class:`InMemoryGraphStore`).
    """
    return graph_of(extract_chunks(chunks, extractor, reuse=reuse), into=into)
