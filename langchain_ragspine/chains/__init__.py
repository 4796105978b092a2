"""Chains (LCEL ``Runnable``s): answer generation with numbered citations, extractive when there is no LLM."""

from langchain_ragspine.chains.answer import (
    DONT_KNOW,
    INSUFFICIENT_CONTEXT,
    UNCITED_WARNING,
    Citation,
    attribute_citations,
    detect_language,
    extractive_answer,
    format_context,
    insufficient_context,
    is_dont_know,
    make_answer_chain,
    normalize_citations,
    parse_citation_numbers,
    prepare_context,
)

__all__ = [
    "Citation",
    "DONT_KNOW",
    "INSUFFICIENT_CONTEXT",
    "UNCITED_WARNING",
    "attribute_citations",
    "detect_language",
    "extractive_answer",
    "format_context",
    "insufficient_context",
    "is_dont_know",
    "make_answer_chain",
    "normalize_citations",
    "parse_citation_numbers",
    "prepare_context",
]
