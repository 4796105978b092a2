"""Filter extraction: read a metadata filter out of the question ("2023年の…" → ``{"year": 2023}``) and search with it.

LangChain's ``SelfQueryRetriever`` has a chat model turn a question into a query plus a structured filter
("self-querying"); here extraction is optional and conservative, by rules or by a model:

* :class:`RuleFilterExtractor` — deterministic and conservative: a year that reads as a time qualifier of the
  question (``2023年の``, ``2023年に``, ``2023 年``, ``in 2023``, full-width digits too) or a range (``2022-2023年``,
  ``2022年から2023年まで``, ``from 2022 to 2023``) becomes a filter on a year field (``{"year": 2023}``, a range
  ``{"year": {"between": [2022, 2023]}}``) or a date field (``{"updated": {"gte": "2023-01-01", "lt":
  "2024-01-01"}}``).  Fiscal years (``2023年度``), durations, decades, compounds and open-ended years (``1500年前``,
  ``2020年代``, ``2000年問題``, ``1000年に一度``, ``2021年以降``) are not read, a number outside ``min_year`` ..
  ``max_year`` (1900 .. 2100) is not a year, and a question with a plausible year the rules do not read gets no
  filter at all — a missed filter costs nothing, a wrong one loses documents.
* :class:`LLMFilterExtractor` — a chat model writes a JSON filter over fields you describe; anything but a valid
  filter over those fields (:mod:`langchain_ragspine.filters` syntax) is discarded.

:class:`FilterExtractionRetriever` ANDs the extracted filter with the call's and its own
(:func:`~langchain_ragspine.filters.and_filters`): **it can only narrow** the candidate set, never widen it.
**A failed extraction means no filter, not an error**: nothing found, a model that fails or replies nonsense, a
filter that does not compile — the call then runs with the other filters only, exactly as the base would.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Literal

from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import RunnableConfig
from pydantic import ConfigDict

from langchain_ragspine.arguments import OptionalPositiveIntField
from langchain_ragspine.filters import FilterField, compile_filter, compiled_filter
from langchain_ragspine.retrievers._choices import ChoicePrompter
from langchain_ragspine.retrievers.base import AsyncCall, ContractRetriever, SyncCall
from langchain_ragspine.retrievers.contract import ainvoke_retriever, invoke_retriever
from langchain_ragspine.retrievers.embed_as import EMBED_AS_OPTION, embed_as_options, embed_as_target
from langchain_ragspine.retrievers.query_transform import add_trace_entry
from langchain_ragspine.retrievers.query_variants import reply_text, strip_think
from langchain_ragspine.served import ServedIds, served_ids
from langchain_ragspine.text.folding import normalize

__all__ = [
    "DEFAULT_MAX_YEAR",
    "DEFAULT_MIN_YEAR",
    "EN_FUNCTION_WORDS",
    "FILTER_PROMPT",
    "FilterExtractionRetriever",
    "LLMFilterExtractor",
    "RuleFilterExtractor",
]

logger = logging.getLogger(__name__)

#: The default plausible years of :class:`RuleFilterExtractor` (inclusive): a number outside is not read as a year.
DEFAULT_MIN_YEAR = 1900
DEFAULT_MAX_YEAR = 2100

_Y = r"([0-9]{4})"
_BEFORE = r"(?<![0-9A-Za-z.,/:\-])"  # not inside a number, a word, a date, a version, a phone number
_AFTER = r"(?![0-9A-Za-z]|[.,][0-9])"
#: A four-digit number, not part of a longer number, word, decimal or list: every such number in the plausible range
#: must be read as a time qualifier, or the question gets no filter.
_NUMBER = re.compile(r"(?<![0-9A-Za-z.,])[0-9]{4}" + _AFTER)
# what may follow "2023年" for it to qualify the question in time: a particle (の に は も で と や), punctuation, the
# end, a month (2023年3月), 中/内 (during the year), 的/里 (Chinese); not 度 (fiscal year), 前 (ago), 間 (a span),
# 代 (a decade), 問題, 以降 / まで / から (open-ended), に一度 (once in … years), nor anything else
_OPEN = r"(?:以|まで|迄|から|より|前|後|后|間|间|来|ぶり)"
_QUAL = (r"(?:の|に(?!\s*[一二三1-9]\s*[度回])|は|も|で|と|や|中|内|的|里|[0-9]{1,2}\s*月|[、,。.?!)）」』]"
         r"|\s+(?!" + _OPEN + r"|度|代)|$)")
_SEP = r"(?:-|–|—|~|〜|から|至|到)"
#: English function words that may follow "in 2023" (a year read in English must be followed by one of them, by
#: punctuation or by the end): "in 2000 words", "in 2048 bits", "in 1999 yen", "in 2010 mode" are amounts or names,
#: not years.  A content word after the number is never taken for a time qualifier.
EN_FUNCTION_WORDS = (
    "a", "about", "after", "alone", "an", "and", "are", "as", "at", "be", "been", "before", "but", "by", "can",
    "could", "did", "do", "does", "for", "from", "had", "has", "have", "he", "her", "here", "his", "how", "i", "if",
    "in", "is", "it", "its", "may", "might", "must", "nor", "not", "of", "on", "only", "or", "our", "shall", "she",
    "should", "so", "than", "that", "the", "their", "there", "these", "they", "this", "those", "to", "vs", "was",
    "we", "were", "what", "when", "where", "whether", "which", "while", "who", "whom", "whose", "why", "will",
    "with", "would", "yet", "you", "your",
)
# after an English "in 2023" / "from 2022 to 2023": the end, punctuation, a Japanese particle, or a function word
_EN_FOLLOW = (r"(?=\s*(?:$|[^\w\s]|[のにはもでとや]|(?:" + "|".join(EN_FUNCTION_WORDS)
              + r")(?![0-9A-Za-z'’\-])))")
_RANGE_RES = (
    # 2022-2023年の / 2022〜2023年 / 2022年から2023年まで / 2022～2023 / 2022年至2023年 (ja, zh, bare)
    re.compile(_BEFORE + _Y + r"\s*(?:年\s*)?" + _SEP + r"\s*" + _Y
               + r"(?:\s*年(?=" + _QUAL + r"|まで|迄)|(?!\s*年|[0-9A-Za-z/:\-]|[.,][0-9]))"),
    # from 2020 to 2022 / between 2020 and 2022 / in 2022-2023 / during 2021 through 2023
    re.compile(r"(?i)\b(?:from|between|in|during)\s+" + _Y + r"\s*(?:-|–|—|~|to|and|through|until|till)\s*" + _Y
               + r"(?![0-9A-Za-z'’\-])" + _EN_FOLLOW),
)
_SINGLE_RES = (
    re.compile(_BEFORE + _Y + r"\s*年(?=" + _QUAL + r")"),  # 2023年の / 2023年に / 2023 年 / 2023年3月 (ja, zh)
    re.compile(r"(?i)\b(?:in|during|in\s+the\s+year)\s+" + _Y + r"(?![0-9A-Za-z'’\-]|[.,][0-9])" + _EN_FOLLOW),  # in 2023
)


class RuleFilterExtractor:
    """Extract a year filter by rules — conservatively: a missed filter costs nothing, a wrong one loses documents.

    A year is read only where it reads as a time qualifier of the question:

    * Japanese / Chinese ``2023年`` followed by a particle or punctuation (``2023年の``, ``2023年に``, ``2023年は``,
      ``2023年的``, ``2023 年``), a month (``2023年3月``) or ``中`` / ``内``; English ``in 2023``, ``during 2023``,
      ``in the year 2023``, followed by the end, punctuation, a particle (``の``, ``に``, …) or a function word
      (:data:`EN_FUNCTION_WORDS`: ``in 2023 and``, ``in 2023 for``, …) — never by a content word (``in 2000
      words``, ``in 2048 bits``, ``in 1999 yen``, ``in 2010 mode`` are amounts or names); full-width digits too.
    * A range: ``2022-2023年``, ``2022〜2023年``, ``2022～2023``, ``2022年から2023年まで``, ``2022年至2023年``,
      ``from 2022 to 2023``, ``between 2022 and 2023``, ``in 2022-2023`` (English ranges followed as a single
      English year is).  The first year must not be later than the
      second.

    Not read: fiscal years (``2023年度``: their months differ by organisation), durations, decades and compounds
    (``1500年前``, ``3年間``, ``2020年代``, ``2000年問題``, ``1000年に一度``, ``the 1990s``), open-ended years
    (``2021年以降``, ``2023年まで``, ``since 2021``, ``until 2023``), dates (``2023/04/01``), ``FY2023``.  A
    four-digit number is a year only between ``min_year`` and ``max_year``.  **If any number in that range is not
    read as a year as above** ("2023年の売上と2021年以降の推移", "in 2023 compared with 2022"), the question gets no
    filter at all: its time scope is not understood.

    Args:
        field: the metadata field to filter (default ``"year"``).
        kind: ``"year"`` — the field holds a year (``{"year": 2023}``; several years or a range: ``between``, both
            ends included); ``"date"`` — it holds ISO dates (``{"updated": {"gte": "2023-01-01", "lt":
            "2024-01-01"}}``, half-open).
        min_year, max_year: the plausible years, inclusive (default 1900 and 2100); set them for a historical
            corpus.

    Calling it with a question returns the filter, or ``None`` when the question names no year it reads.  Several
    years become the range that covers them.

    Raises:
        ValueError: an empty ``field``; an unknown ``kind``; ``min_year`` / ``max_year`` not four-digit ints with
            ``min_year <= max_year``.

    Example:
        >>> RuleFilterExtractor()("2023年の売上は？"), RuleFilterExtractor()("売上は？")
        ({'year': 2023}, None)
        >>> RuleFilterExtractor("updated", kind="date")("What changed in ２０２４?")
        {'updated': {'gte': '2024-01-01', 'lt': '2025-01-01'}}
        >>> RuleFilterExtractor()("2020年から2022年までの変化"), RuleFilterExtractor()("2022〜2023年の売上")
        ({'year': {'between': [2020, 2022]}}, {'year': {'between': [2022, 2023]}})
        >>> RuleFilterExtractor()("2000年問題の影響"), RuleFilterExtractor()("1000年に一度の売上")
        (None, None)
    """

    def __init__(
        self,
        field: str = "year",
        *,
        kind: Literal["year", "date"] = "year",
        min_year: int = DEFAULT_MIN_YEAR,
        max_year: int = DEFAULT_MAX_YEAR,
    ) -> None:
        if not isinstance(field, str) or not field.strip():
            raise ValueError(f"field must be a non-empty string, got {field!r}")
        if kind not in ("year", "date"):
            raise ValueError(f"kind must be 'year' or 'date', got {kind!r}")
        for name, value in (("min_year", min_year), ("max_year", max_year)):
            if isinstance(value, bool) or not isinstance(value, int) or not 1000 <= value <= 9999:
                raise ValueError(f"{name} must be a four-digit int (years are read as four digits), got {value!r}")
        if min_year > max_year:
            raise ValueError(f"min_year must be <= max_year, got {min_year} and {max_year}")
        self.field = field
        self.kind = kind
        self.min_year = min_year
        self.max_year = max_year

    def years(self, question: str) -> list[int]:
        """The years ``question`` names as time qualifiers (a range: its two ends), sorted, distinct; ``[]`` when it
        names none, or when a number in the plausible range is not read as one (see the class docstring)."""
        if not isinstance(question, str):
            return []
        text = normalize(question)
        numbers = {m.start() for m in _NUMBER.finditer(text) if self.min_year <= int(m.group()) <= self.max_year}
        if not numbers:
            return []
        read: set[int] = set()
        years: set[int] = set()
        for rx in _RANGE_RES:
            for m in rx.finditer(text):
                if {m.start(1), m.start(2)} <= numbers and int(m.group(1)) <= int(m.group(2)):
                    read |= {m.start(1), m.start(2)}
                    years |= {int(m.group(1)), int(m.group(2))}
        for rx in _SINGLE_RES:
            for m in rx.finditer(text):
                if m.start(1) in numbers:
                    read.add(m.start(1))
                    years.add(int(m.group(1)))
        return sorted(years) if read == numbers else []

    def __call__(self, question: str) -> dict[str, Any] | None:
        years = self.years(question)
        if not years:
            return None
        lo, hi = years[0], years[-1]
        if self.kind == "date":
            return {self.field: {"gte": f"{lo:04d}-01-01", "lt": f"{hi + 1:04d}-01-01"}}
        return {self.field: lo if lo == hi else {"between": [lo, hi]}}

    def __repr__(self) -> str:
        return f"RuleFilterExtractor({self.field!r}, kind={self.kind!r}, min_year={self.min_year}, " \
               f"max_year={self.max_year})"


#: The default prompt of :class:`LLMFilterExtractor` (variables ``fields`` and ``question``).
FILTER_PROMPT = ChatPromptTemplate.from_messages([
    ("system", "You turn constraints stated in a question into a JSON metadata filter. You never guess."),
    ("human", "Metadata fields:\n{fields}\n\nWrite a JSON object that keeps only documents matching what the "
              "question explicitly requires of these fields, using {{\"field\": value}} for equality or "
              "{{\"field\": {{\"gte\": x, \"lte\": y}}}} for ranges. Use only the fields listed. If the question states "
              "no such constraint, reply {{}}. Reply with the JSON object only.\n\nQuestion: {question}"),
])


class LLMFilterExtractor(ChoicePrompter):
    """Extract a filter with a chat model.

    Args:
        llm: the chat model.
        fields: ``{field: description}`` — the only fields a filter may use.
        prompt: a ``ChatPromptTemplate`` with ``fields`` and ``question`` (default :data:`FILTER_PROMPT`).

    Calling it returns the filter, or ``None`` when the model finds none, fails, or writes anything but a JSON
    object that compiles as a filter (:func:`~langchain_ragspine.filters.compile_filter`) and names only ``fields``
    at its top level (logical operators ``$and`` / ``$or`` / ``$not`` are refused: an extracted filter is a plain
    conjunction).  Never raises.
    """

    default_prompt = FILTER_PROMPT
    listing_key = "fields"
    empty_message = "fields must name at least one metadata field"

    def __init__(self, llm: BaseChatModel, fields: Mapping[str, str], prompt: ChatPromptTemplate | None = None
                 ) -> None:
        super().__init__(llm, fields, prompt)
        self.fields = self.choices

    def parse(self, reply: Any) -> dict[str, Any] | None:
        """The filter in ``reply``, or ``None`` (see the class docstring)."""
        text = strip_think(reply_text(reply)).strip()
        fence = re.search(r"```[A-Za-z0-9_-]*\s*(.*?)```", text, re.DOTALL)
        if fence:
            text = fence.group(1).strip()
        start, end = text.find("{"), text.rfind("}")
        if start < 0 or end < start:
            return None
        try:
            data = json.loads(text[start : end + 1])
        except ValueError:
            return None
        if not isinstance(data, dict) or not data or not set(data) <= set(self.fields):
            return None
        try:
            compile_filter(data)
        except (ValueError, TypeError):
            return None
        return data

    def __call__(self, question: str, config: RunnableConfig | None = None) -> dict[str, Any] | None:
        """The filter the model extracts from ``question``, or ``None`` (also on any failure, and without a model
        call for an empty or whitespace question)."""
        if not question.strip():
            return None
        try:
            return self.parse(self.llm.invoke(self.messages(question), config))
        except Exception as e:  # noqa: BLE001 - a failed extraction means no filter
            logger.warning("LLMFilterExtractor: extraction failed, no filter: %s", e)
            return None

    async def acall(self, question: str, config: RunnableConfig | None = None) -> dict[str, Any] | None:
        """Async ``__call__``."""
        if not question.strip():
            return None
        try:
            return self.parse(await self.llm.ainvoke(self.messages(question), config))
        except Exception as e:  # noqa: BLE001
            logger.warning("LLMFilterExtractor: extraction failed, no filter: %s", e)
            return None


Extractor = Callable[..., "dict[str, Any] | None"]


class FilterExtractionRetriever(ContractRetriever):
    """Search ``base`` with a filter extracted from the question, ANDed with the call's and its own.

    ``FilterExtractionRetriever(base, extractor)``.

    Attributes:
        base: the retriever searched (through the retriever-call contract).
        extractor: a :class:`RuleFilterExtractor` (default), an :class:`LLMFilterExtractor`, or any callable
            ``question -> filter | None``.
        k: results per call (``invoke(query, k=…)`` overrides); ``None``: the base's default.
        filter: the retriever's own filter.

    With a filter extracted, every result carries a trace entry ``{"transform": "filter_extraction", "filter":
    {...}}`` in ``metadata["query_transform"]``; with none (or a failed extraction) the results are exactly the
    base's for the call's ``k`` and ``filter``.

    ``invoke(query, embed_as="document")`` (HyDE's hypothetical document) is handed on to ``base`` as
    :func:`~langchain_ragspine.retrievers.embed_as.embed_as_target` decides (passed to a dense or hybrid base,
    honoured for a LangChain ``VectorStoreRetriever`` by a document-vector search, dropped for BM25).

    Example:
        >>> from langchain_core.documents import Document
        >>> from langchain_ragspine import BM25Retriever
        >>> docs = [Document(page_content="売上は10億円だった。", metadata={"chunk_id": "a#0", "year": 2022}),
        ...         Document(page_content="売上は12億円だった。", metadata={"chunk_id": "b#0", "year": 2023})]
        >>> retriever = FilterExtractionRetriever(BM25Retriever.from_documents(docs), k=2)
        >>> [d.metadata["chunk_id"] for d in retriever.invoke("2023年の売上は？")]
        ['b#0']
    """

    base: BaseRetriever
    extractor: Any = None
    k: OptionalPositiveIntField = None
    filter: FilterField = None

    model_config = ConfigDict(arbitrary_types_allowed=True)

    #: ``invoke(query, embed_as=…)`` is handed on to ``base`` (see the class docstring).
    call_options: ClassVar[tuple[str, ...]] = (EMBED_AS_OPTION,)

    def __init__(self, base: BaseRetriever | None = None, extractor: Any = None, /, **data: Any) -> None:
        if base is not None:
            data["base"] = base
        if extractor is not None:
            data["extractor"] = extractor
        if not isinstance(data.get("base"), BaseRetriever):
            raise TypeError(f"base must be a langchain_core BaseRetriever, got {type(data.get('base')).__name__}")
        super().__init__(**data)

    def model_post_init(self, context: Any, /) -> None:
        """Validate; the default extractor is :class:`RuleFilterExtractor`."""
        if not isinstance(self.base, BaseRetriever):
            raise TypeError(f"base must be a langchain_core BaseRetriever, got {type(self.base).__name__}")
        if self.extractor is None:
            self.extractor = RuleFilterExtractor()
        elif not callable(self.extractor):
            raise TypeError(f"extractor must be callable, got {type(self.extractor).__name__}")
        compile_filter(self.filter)

    def extract(self, question: str, config: RunnableConfig | None = None) -> dict[str, Any] | None:
        """The filter extracted from ``question``, or ``None``.  Never raises."""
        try:
            found = self.extractor(question, config) if isinstance(self.extractor, LLMFilterExtractor) \
                else self.extractor(question)
        except Exception as e:  # noqa: BLE001 - a failed extraction means no filter
            logger.warning("filter extraction failed, no filter: %s", e)
            return None
        return _valid(found)

    async def aextract(self, question: str, config: RunnableConfig | None = None) -> dict[str, Any] | None:
        """Async :meth:`extract`."""
        if isinstance(self.extractor, LLMFilterExtractor):
            return _valid(await self.extractor.acall(question, config))
        return self.extract(question, config)

    def _finish(self, docs: list[Document], found: dict[str, Any] | None) -> list[Document]:
        if found is None:
            return docs
        entry = {"transform": "filter_extraction", "filter": found}
        return [add_trace_entry(d, entry) for d in docs]

    def served_ids(self, ids: Sequence[str]) -> ServedIds | None:
        """Which of ``ids`` this retriever would still return (:mod:`~langchain_ragspine.served`): what its
        ``base`` answers (it returns only documents ``base`` returned); ``None`` when that cannot tell."""
        return served_ids(self.base, ids)

    def _retrieve(self, query: str, call: SyncCall) -> list[Document]:
        k, flt = call.k, call.filter  # resolved by the base (the own filter AND the call's)
        found = self.extract(query, call.child("extract"))
        base, options = embed_as_target(self.base, embed_as_options(call.options))
        docs = invoke_retriever(base, query, k=k, filter=compiled_filter(flt, found),
                                config=call.child("base"), options=options)
        return self._finish(docs, found)

    async def _aretrieve(self, query: str, call: AsyncCall) -> list[Document]:
        k, flt = call.k, call.filter
        found = await self.aextract(query, call.child("extract"))
        base, options = embed_as_target(self.base, embed_as_options(call.options))
        docs = await ainvoke_retriever(base, query, k=k, filter=compiled_filter(flt, found),
                                       config=call.child("base"), options=options)
        return self._finish(docs, found)


def _valid(found: Any) -> dict[str, Any] | None:
    """``found`` when it is a non-empty filter that compiles, else ``None`` (a failed extraction is no filter)."""
    if not isinstance(found, Mapping) or not found:
        return None
    try:
        compile_filter(found)
    except (ValueError, TypeError):
        return None
    return dict(found)
