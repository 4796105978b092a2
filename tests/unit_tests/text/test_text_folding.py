"""``text.folding``: the package's comparison forms in one module.  Each function that moved here in issue 26 H2a
(from ``sensitivity``, ``retrievers._term_match``, ``retrievers.query_variants``, ``retrievers.glossary``,
``graphs.graders``, ``document_loaders.corpus``) is checked against a copy of the code it replaced, so glossary
lookups, router matches, query de-duplication, the support grader and sidecar names compare as before."""

from __future__ import annotations

import re
import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from langchain_ragspine.text.folding import (
    file_name_key,
    fold,
    fold_key,
    fold_query,
    fold_text,
    normalize,
    normalize_spaces,
    simple_casefold,
)

#: Whitespace of every kind, full-width and compatibility forms, combining marks, invisible characters, cases that
#: fold to several characters (ß, ﬃ, İ), Greek final sigma, CJK and kana.
_ALPHABET = st.sampled_from(list(
    " \t\n\r\x0b\x0c\x1c\x85\xa0\u1680\u2000\u2028\u3000\u200b\u200d\ufeff\u00adAaZzİıſßﬃΣσςΐKµ"
    "ＡＢＣ１２ｶﾀｶﾅ①㍿e\u0301\u0308\u20dd?？。.!！漢字かなカナ한"
))
_texts = st.lists(_ALPHABET, max_size=40).map("".join) | st.text(max_size=40)


@settings(max_examples=1000, deadline=None)
@given(text=_texts)
def test_property_each_fold_is_the_code_it_replaced(text: str) -> None:
    nfkc = unicodedata.normalize("NFKC", text)
    # graphs.graders._normalize_ws and retrievers.glossary._norm
    assert normalize_spaces(text) == re.sub(r"\s+", " ", nfkc).strip() == " ".join(nfkc.split())
    assert fold_key(text) == " ".join(nfkc.split()).casefold()  # retrievers.glossary._key
    # retrievers.query_variants.fold_query
    assert fold_query(text) == " ".join(nfkc.casefold().split()).rstrip("?？。.!！ ")
    # sensitivity.fold and retrievers._term_match.fold_text
    kept = "".join(ch for ch in unicodedata.normalize("NFKD", text) if unicodedata.category(ch) not in ("Mn", "Me", "Cf"))
    assert fold(text) == unicodedata.normalize("NFKC", kept).strip()
    assert fold_text(text) == " ".join(fold(text).casefold().split())
    assert normalize(text) == nfkc
    assert file_name_key(text) == unicodedata.normalize("NFC", text).casefold()  # document_loaders.corpus._name_key
    assert len(simple_casefold(text)) == len(text)  # offsets carry over


def test_the_forms_differ_where_their_comparisons_need_it() -> None:
    text = " Ｈｒ\u200b  Ｐｏｌｉｃｙ? "
    assert normalize_spaces(text) == "Hr\u200b Policy?"  # NFKC keeps the zero-width space and the case
    assert fold_key(text) == "hr\u200b policy?"
    assert fold_query(text) == "hr\u200b policy"
    assert fold_text(text) == "hr policy?"  # fold drops invisible characters
    assert simple_casefold("Straße İ") == "straße i" and "Straße".casefold() == "strasse"
