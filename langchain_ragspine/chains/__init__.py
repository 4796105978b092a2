"""Chains (LCEL ``Runnable``s): answer generation with numbered citations, extractive when there is no LLM.

The public names of :mod:`langchain_ragspine.chains.answer` (``make_answer_chain``, ``Citation``,
``extractive_answer``, ``format_context``, ``prepare_context``, ``attribute_citations``, ``DONT_KNOW``, …).
"""

from langchain_ragspine.chains import answer as _answer
from langchain_ragspine.chains.answer import *  # noqa: F403  (re-exported: __all__ below)

__all__ = list(_answer.__all__)
