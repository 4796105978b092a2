"""BM25 retriever for Japanese, Chinese and English text, a drop-in for LangChain's ``BM25Retriever``.

Okapi BM25 (Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009) in Lucene's
variant: ``idf(t) = ln(1 + (N - df + 0.5) / (df + 0.5))`` — never negative — and
``tf' = tf / (tf + k1 * (1 - b + b * dl / avgdl))``.  Scores are precomputed into a sparse term-document matrix by
`bm25s <https://github.com/xhluca/bm25s>`_ (Lù, "BM25S: Orders of magnitude faster lexical search via eager sparse
scoring", 2024), so a query costs one sparse row-sum instead of a Python loop over every document (which is what
``rank_bm25`` behind ``langchain_community``'s retriever does).

Differences from ``langchain_community.retrievers.BM25Retriever`` a user may rely on:

* ``tokenizer`` (a name from :mod:`langchain_ragspine.tokenizers` or a callable) replaces ``preprocess_func``
  (still accepted), and defaults to ``"auto"``, which handles Japanese and Chinese;
* documents with score 0 (no query term) are never returned; ties break on ``chunk_id``;
* each result is a copy of the stored ``Document`` with ``metadata["scores"] = {"bm25": s, "vector": None,
  "fused": s, "rerank": None}``;
* ``filter`` restricts candidates *before* scoring (see :mod:`langchain_ragspine.filters`); a filter given to
  ``invoke`` is ANDed with the retriever's own ``filter``, never replaces it;
* ``k`` must be an ``int >= 1`` (``"3"``, ``2.0``, ``True``, ``0`` are errors naming ``k``);
* ``save(dir)`` / ``load(dir)`` persist numpy arrays and JSON — never pickle — with the tokenizer's name and
  version, and ``load`` refuses an index whose tokens the named tokenizer no longer produces;
* documents labelled RESTRICTED (see :mod:`langchain_ragspine.document_compressors.restricted`) are dropped when
  the retriever is built: they are never indexed (so they do not even shape the IDF), scored or returned;
* a document's tokens come from ``metadata["index_text"]`` when present (e.g. a contextual header + the text, see
  :func:`langchain_ragspine.text.index_text`), else from ``page_content``; results are the stored documents, so
  ``page_content`` and citations never change.
"""

from __future__ import annotations

import json
import numbers
import os
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import numpy as np
from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, PrivateAttr, field_validator

from langchain_ragspine.errors import StoreError
from langchain_ragspine.filters import FilterMasks, and_filters, compile_filter
from langchain_ragspine.sensitivity import drop_restricted
from langchain_ragspine.stores.files import atomic_dir, read_config, read_documents, write_documents
from langchain_ragspine.text import index_text
from langchain_ragspine.tokenizers import Tokenizer, get_tokenizer, tokenizer_name, tokenizer_version

_FORMAT = "ragspine-bm25/1"
# Set while load() validates a retriever whose index comes from disk, so model_post_init skips the build.
# (pydantic's validation context does not reach model_post_init through LangChain's BaseRetriever.)
_SKIP_BUILD: ContextVar[bool] = ContextVar("ragspine_bm25_skip_build", default=False)


def doc_key(doc: Document) -> str | None:
    """The identity of a chunk: ``metadata["chunk_id"]``, else ``Document.id``, else ``None``."""
    cid = doc.metadata.get("chunk_id")
    if cid is not None and cid != "":
        return str(cid)
    return doc.id or None


def check_k(value: Any, name: str = "k") -> int:
    """``value`` as a result count: an ``int >= 1`` (numpy integers accepted), else an error naming ``name``.

    Raises:
        TypeError: ``value`` is not an integer (``"3"``, ``2.0``, ``True``, ``None``).
        ValueError: ``value < 1``.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int >= 1, got {type(value).__name__} {value!r}")
    if value < 1:
        raise ValueError(f"{name} must be an int >= 1, got {value!r}")
    return int(value)


def with_scores(doc: Document, **scores: float | None) -> Document:
    """A copy of ``doc`` whose ``metadata["scores"]`` holds the four channels, updated with ``scores``."""
    md = dict(doc.metadata)
    merged: dict[str, float | None] = {"bm25": None, "vector": None, "fused": None, "rerank": None}
    prev = md.get("scores")
    if isinstance(prev, Mapping):
        merged.update(prev)
    merged.update(scores)
    md["scores"] = merged
    return Document(page_content=doc.page_content, metadata=md, id=doc.id)


class BM25Retriever(BaseRetriever):
    """Okapi BM25 (Lucene variant, via bm25s) over a list of ``Document``s.

    Build with :meth:`from_documents` / :meth:`from_texts`, or directly with ``BM25Retriever(docs=[...])``.

    Attributes:
        docs: the indexed documents (typically chunks from ``ParagraphTextSplitter``).
        k: number of results (default 4), an ``int >= 1``; ``invoke(query, k=...)`` overrides it per call.
        tokenizer: tokenizer name (``"auto"``, ``"cjk"``, ``"fugashi"``, ``"whitespace"``) or a callable
            ``str -> list[str]``; queries and documents use the same one.
        k1: term-frequency saturation (default 1.5).
        b: length normalisation in [0, 1] (default 0.75).
        filter: the retriever's own metadata filter (:mod:`langchain_ragspine.filters`); ``invoke(query,
            filter=...)`` is ANDed with it, so a call narrows the results but never widens them.

    ``invoke`` returns at most ``k`` documents with a positive score, best first, ties broken by ``chunk_id``.
    An empty corpus, an empty or whitespace-only query, and a query with no indexed term return ``[]``.
    RESTRICTED documents are removed from ``docs`` at construction.

    Raises:
        ValueError: ``k < 1``, ``k1 < 0`` or ``b`` outside [0, 1]; an unknown tokenizer; a malformed filter.
        TypeError: ``k`` is not an int.
    """

    docs: list[Document] = Field(default_factory=list, repr=False)
    k: int = 4
    tokenizer: str | Callable[[str], list[str]] = "auto"
    k1: float = 1.5
    b: float = 0.75
    filter: dict[str, Any] | None = None

    model_config = ConfigDict(arbitrary_types_allowed=True)

    _tokenize: Tokenizer = PrivateAttr()
    _bm25: Any = PrivateAttr(default=None)
    _tie_rank: np.ndarray = PrivateAttr()
    _masks: FilterMasks = PrivateAttr()

    def __init__(self, **data: Any) -> None:
        # LangChain's BM25Retriever names the tokenizer `preprocess_func`; accept it for drop-in use.
        if "preprocess_func" in data:
            pre = data.pop("preprocess_func")
            data.setdefault("tokenizer", pre)
        data.pop("vectorizer", None)
        super().__init__(**data)

    @field_validator("k", mode="before")
    @classmethod
    def _strict_k(cls, value: Any) -> int:
        return check_k(value)

    def model_post_init(self, context: Any, /) -> None:
        """Validate parameters and build the index from ``docs`` (unless :meth:`load` supplies one)."""
        if self.k1 < 0:
            raise ValueError(f"k1 must be >= 0, got {self.k1}")
        if not 0.0 <= self.b <= 1.0:
            raise ValueError(f"b must be in [0, 1], got {self.b}")
        compile_filter(self.filter)
        self.docs = drop_restricted(self.docs)  # never indexed, scored or returned: one gate at construction
        self._masks = FilterMasks([d.metadata for d in self.docs])
        self._tokenize = get_tokenizer(self.tokenizer)
        self._tie_rank = _tie_ranks(self.docs)
        if not _SKIP_BUILD.get():
            self._bm25 = _build_bm25((index_text(d) for d in self.docs), self._tokenize, k1=self.k1, b=self.b)

    # -- construction -----------------------------------------------------------------------------------------------
    @classmethod
    def from_documents(
        cls,
        documents: Iterable[Document],
        *,
        k: int = 4,
        tokenizer: str | Tokenizer = "auto",
        k1: float = 1.5,
        b: float = 0.75,
        bm25_params: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> BM25Retriever:
        """Index ``documents`` (``bm25_params={"k1":…, "b":…}`` as in LangChain's retriever is accepted too)."""
        params = {"k1": k1, "b": b, **dict(bm25_params or {})}
        if "preprocess_func" in kwargs:  # LangChain's name for the tokenizer
            tokenizer = kwargs.pop("preprocess_func")
        return cls(docs=list(documents), k=k, tokenizer=tokenizer, **params, **kwargs)

    @classmethod
    def from_texts(
        cls,
        texts: Iterable[str],
        metadatas: Iterable[dict[str, Any]] | None = None,
        ids: Iterable[str] | None = None,
        bm25_params: Mapping[str, Any] | None = None,
        preprocess_func: Tokenizer | None = None,
        **kwargs: Any,
    ) -> BM25Retriever:
        """Index plain ``texts`` with optional parallel ``metadatas`` and ``ids``; ``kwargs`` as in
        :meth:`from_documents`.  The positional order is LangChain's: ``texts, metadatas, ids, bm25_params,
        preprocess_func``.

        Raises:
            ValueError: ``metadatas`` or ``ids`` has a different length than ``texts``.
        """
        texts = list(texts)
        metas = list(metadatas) if metadatas is not None else [{} for _ in texts]
        id_list = list(ids) if ids is not None else [None] * len(texts)
        if len(metas) != len(texts) or len(id_list) != len(texts):
            raise ValueError(
                f"from_texts got {len(texts)} texts, {len(metas)} metadatas and {len(id_list)} ids"
            )
        docs = [Document(page_content=t, metadata=dict(m), id=i) for t, m, i in zip(texts, metas, id_list, strict=True)]
        if preprocess_func is not None:
            kwargs["tokenizer"] = preprocess_func
        return cls.from_documents(docs, bm25_params=bm25_params, **kwargs)

    @property
    def preprocess_func(self) -> Tokenizer:
        """The tokenizer callable (LangChain's ``BM25Retriever`` attribute name)."""
        return self._tokenize

    @property
    def vectorizer(self) -> Any:
        """The underlying ``bm25s.BM25`` index (``None`` for an empty corpus); LangChain's attribute name."""
        return self._bm25

    # -- retrieval --------------------------------------------------------------------------------------------------
    def score(self, query: str) -> np.ndarray:
        """BM25 score of every document for ``query``: float32 array of shape ``(len(docs),)``."""
        n = len(self.docs)
        if self._bm25 is None or not query or not query.strip():
            return np.zeros(n, dtype=np.float32)
        ids = self._bm25.get_tokens_ids(self._tokenize(query))
        if not ids:
            return np.zeros(n, dtype=np.float32)
        return np.asarray(self._bm25.get_scores_from_ids(ids), dtype=np.float32)

    def search(
        self, query: str, *, k: int | None = None, filter: Mapping[str, Any] | None = None
    ) -> list[tuple[int, float]]:
        """Top ``k`` ``(doc_position, score)`` pairs with score > 0, best first, ties by ``chunk_id``, among the
        documents that match both the retriever's own :attr:`filter` and ``filter`` (AND).

        Raises:
            TypeError, ValueError: a bad ``k`` (see :func:`check_k`); a malformed filter.
        """
        k = self.k if k is None else check_k(k)
        mask = self._masks.mask(and_filters(self.filter, filter))
        if not self.docs:
            return []
        scores = self.score(query)
        ok = scores > 0
        if mask is not None:
            ok &= mask
        cand = np.flatnonzero(ok)
        if cand.size == 0:
            return []
        cs = scores[cand]
        if cand.size > k:
            kth = np.partition(cs, cand.size - k)[cand.size - k]
            keep = cs >= kth  # keep every tie at the boundary, then break ties by chunk_id
            cand, cs = cand[keep], cs[keep]
        order = np.lexsort((self._tie_rank[cand], -cs))[:k]
        return [(int(cand[i]), float(cs[i])) for i in order]

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        filter: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        if kwargs:
            raise TypeError(f"unexpected keyword arguments for BM25Retriever: {sorted(kwargs)}")
        return [
            with_scores(self.docs[i], bm25=s, fused=s) for i, s in self.search(query, k=k, filter=filter)
        ]

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        filter: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        # BM25 is CPU-bound and sub-millisecond: run it inline (LangChain's default async path would drop k/filter)
        return self._get_relevant_documents(
            query, run_manager=run_manager.get_sync(), k=k, filter=filter, **kwargs
        )

    # -- persistence ------------------------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the index to directory ``path`` (replaced atomically): bm25s arrays (``.npy``, no pickle), the
        vocabulary and parameters as JSON, the documents as JSON lines.

        Raises:
            ValueError: the tokenizer is a custom callable (it cannot be persisted; pass it to :meth:`load`), or a
                metadata value is not JSON-serialisable.
        """
        name = tokenizer_name(self.tokenizer)
        config = {
            "format": _FORMAT,
            "k": self.k,
            "k1": self.k1,
            "b": self.b,
            "tokenizer": name,
            "tokenizer_version": tokenizer_version(name) if name is not None else None,
            "filter": self.filter,
            "num_docs": len(self.docs),
            "empty_index": self._bm25 is None,
        }
        with atomic_dir(path) as tmp:
            (tmp / "retriever.json").write_text(json.dumps(config, ensure_ascii=False, indent=1), "utf-8")
            write_documents(tmp / "docs.jsonl", self.docs)
            if self._bm25 is not None:
                self._bm25.save(tmp / "bm25s", show_progress=False)

    @classmethod
    def load(
        cls, path: str | os.PathLike[str], *, tokenizer: str | Tokenizer | None = None, **overrides: Any
    ) -> BM25Retriever:
        """Load an index written by :meth:`save`; ``overrides`` replace saved fields such as ``k`` or ``filter``.

        Raises:
            StoreError: the directory is missing, incomplete, or not a ragspine BM25 index; or it is stale: its
                recorded tokenizer version (absent = ``"1"``, an index from before script folding) is not the
                current :func:`~langchain_ragspine.tokenizers.tokenizer_version` of the tokenizer it names, so
                queries would be tokenized differently from the indexed documents — rebuild it.
            ValueError: the index was saved with a custom tokenizer and ``tokenizer`` is not given.
        """
        root = Path(path)
        config = read_config(root, "retriever.json", fmt=_FORMAT, what="BM25 index")
        tok = tokenizer if tokenizer is not None else config.get("tokenizer")
        if tok is None:
            raise ValueError(f"{root} was saved with a custom tokenizer; pass tokenizer= to load()")
        saved_name = config.get("tokenizer")
        if isinstance(saved_name, str) and tokenizer_name(tok) == saved_name:
            saved, current = str(config.get("tokenizer_version") or "1"), tokenizer_version(saved_name)
            if saved != current:
                raise StoreError(
                    f"stale index: built with tokenizer {saved_name!r} version {saved}, but {saved_name!r} now "
                    f"produces version {current} tokens; rebuild it from its documents (ragspine ingest)",
                    path=root,
                )
        docs = read_documents(root / "docs.jsonl", expected=config.get("num_docs"))
        fields = {k: config[k] for k in ("k", "k1", "b", "filter")}
        fields.update(overrides)
        token = _SKIP_BUILD.set(True)
        try:
            retriever = cls.model_validate({"docs": docs, "tokenizer": tok, **fields})
        finally:
            _SKIP_BUILD.reset(token)
        if not config.get("empty_index"):
            import bm25s

            try:
                retriever._bm25 = bm25s.BM25.load(root / "bm25s", load_corpus=False, allow_pickle=False)
            except (OSError, ValueError, EOFError, KeyError, TypeError) as e:
                raise StoreError(f"unreadable bm25s index files: {e}", path=root / "bm25s") from None
        return retriever


def _tie_ranks(docs: Sequence[Document]) -> np.ndarray:
    """Rank of each document's tie-break key (``chunk_id``, else ``id``, else position)."""
    keys = [(doc_key(d) or "", i) for i, d in enumerate(docs)]
    order = sorted(range(len(keys)), key=keys.__getitem__)
    ranks = np.empty(len(keys), dtype=np.int64)
    ranks[np.asarray(order, dtype=np.int64)] = np.arange(len(keys), dtype=np.int64)
    return ranks


def _build_bm25(texts: Iterable[str], tokenize: Tokenizer, *, k1: float, b: float) -> Any:
    """A bm25s Lucene index over ``texts``, or ``None`` when there is no token at all.

    Documents are tokenized one at a time and reduced at once to (term id, tf) pairs, so the corpus is never held
    as token strings (at 100k chunks of ~400 CJK chars that is ~80M Python strings).  The eager score matrix is then
    computed with numpy in bm25s's own layout — ``data`` / ``indices`` (doc ids) / ``indptr`` (per term id), Lucene
    IDF and TF as in bm25s's ``method="lucene"`` — and handed to a ``bm25s.BM25``, which does the scoring and the
    (pickle-free) persistence.  ``tests/unit_tests/test_bm25.py`` checks the matrix equals bm25s's own build.
    """
    vocab: dict[str, int] = {}
    setdefault = vocab.setdefault
    terms = array("i")
    tfs = array("i")
    doc_len: list[int] = []
    doc_terms: list[int] = []
    for text in texts:
        tokens = tokenize(text)
        counts = Counter(tokens)
        terms.extend([setdefault(t, len(vocab)) for t in counts])
        tfs.extend(counts.values())
        doc_len.append(len(tokens))
        doc_terms.append(len(counts))
    if not vocab:
        return None
    import bm25s

    n_docs = len(doc_len)
    term = np.frombuffer(terms, dtype=np.intc).astype(np.int32, copy=False)
    tf = np.frombuffer(tfs, dtype=np.intc).astype(np.float32)
    doc = np.repeat(np.arange(n_docs, dtype=np.int32), np.asarray(doc_terms, dtype=np.int64))
    lengths = np.asarray(doc_len, dtype=np.float32)
    df = np.bincount(term, minlength=len(vocab))
    idf = np.log(1.0 + (n_docs - df + 0.5) / (df + 0.5)).astype(np.float32)
    norm = (k1 * (1.0 - b + b * lengths / lengths.mean())).astype(np.float32)
    score = idf[term] * tf / (tf + norm[doc])
    order = np.argsort(term, kind="stable")  # term-major; doc ids stay ascending within a term
    index = bm25s.BM25(k1=k1, b=b, method="lucene")
    index.scores = {
        "data": score[order].astype(np.float32, copy=False),
        "indices": doc[order],
        "indptr": np.concatenate([[0], np.cumsum(df)]).astype(np.int64),
        "num_docs": n_docs,
    }
    index.vocab_dict = vocab
    index.unique_token_ids_set = set(vocab.values())
    index.nonoccurrence_array = None
    return index
